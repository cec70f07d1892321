"""``sequential``: the calls of a batch in model order, one after another."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from toolcall_lab._execution import Interrupted
from toolcall_lab.events import make_action, make_observation
from toolcall_lab.strategies.base import Strategy, unchanged
from toolcall_lab.strategies.batch import Batch


class Sequential(Strategy):
    """Each call starts when the previous one has finished (ACTION, OBSERVATION, next ACTION, ...)."""

    name = "sequential"

    def runs_as(self) -> str | None:
        return unchanged(self, Sequential, "sequential")

    async def run(self, batch: Batch) -> None:
        if not batch._screen_now():
            await batch._screen()
        executor = batch._executor
        now, execute = executor.now, executor.execute
        calls, done, started = batch._calls, batch._done, batch._started
        screened, is_open = batch._pre, batch._open
        emit, round_index, run_id = batch._emit, batch.round_index, batch._run_id
        settled = batch._settled()
        for pos, call in enumerate(calls):
            if executor.stop_asked and executor.refuse_start():  # an abort just now: the rest never start
                raise asyncio.CancelledError
            started[pos] = at = now()
            is_open[pos] = True
            emit(make_action("action", at, round_index, call, run_id))
            pre = screened[pos]
            if pre is None:
                try:
                    done[pos] = ex = await execute(call, pos, at)
                except Interrupted as exc:
                    done[pos] = exc.execution
                    raise
                # nothing runs between the tool's end and its observation unless a result hook is set
                at = ex.ended_at if settled else now()
            else:
                done[pos] = ex = pre if pre.started_at == at else replace(pre, started_at=at, ended_at=at)
            is_open[pos] = False
            emit(make_observation("observation", at, round_index, ex, run_id))

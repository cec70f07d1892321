"""`Batch.run_parallel`'s path for the common case: a whole final batch screened without awaiting, no
slots to wait for, nothing else running. One task per call, events as each call starts and finishes.

A hand-rolled task group: each task counts itself out and the last one wakes the batch, so a call
costs one task and one loop iteration (`asyncio.TaskGroup` adds a done-callback and another
iteration per task, a third of the per-call cost on no-op tools); the per-call work reads the
batch's lists and the executor's clock as locals (the batch's general `_Group` reads them through
attributes, a fifth more per call on no-op tools). The semantics are `_Group`'s: the first exception
that must stop the run (cancellation aside) cancels the others, which are drained before it
propagates; cancelling the batch cancels and drains every call; a cancellation reaching a call is
`Batch._cancelled`'s to record.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from toolcall_lab._execution import Interrupted
from toolcall_lab._hooks import wait_until_stopped
from toolcall_lab.events import make_action, make_observation

TASK_NAME = "toolcall_lab tool call"
"""The name of the tasks calls run in concurrently (as `asyncio.all_tasks()` shows them)."""


async def run_all(batch: Any, positions: list[int]) -> None:
    """Run the screened calls at `positions` of a final `Batch` (typed ``Any`` here: the batch module
    imports this one) at once: every ACTION at one instant
    (a call screened out is answered, and observed, then), then one task per call that runs, each
    OBSERVATION when its call finishes; returns when every call has finished."""
    loop = asyncio.get_running_loop()
    executor = batch._executor
    clock, origin, execute = executor._clock, executor.origin, executor.execute
    calls, done, started, is_open = batch._calls, batch._done, batch._started, batch._open
    screened = batch._pre
    emit, round_index, run_id = batch._emit, batch._round_index, batch._run_id
    settled = batch._settled()
    at = clock() - origin  # the batch starts at one instant: one clock read for all its actions
    runnable = []
    for pos in positions:  # (marked open before each event: a listener that stops the run leaves
        is_open[pos] = True  # the record consistent)
        emit(make_action("action", at, round_index, calls[pos], run_id))
        pre = screened[pos]
        if pre is None:
            runnable.append(pos)
        else:  # decided at screening: answered at once
            done[pos] = ex = pre if pre.started_at == at else replace(pre, started_at=at, ended_at=at)
            is_open[pos] = False
            emit(make_observation("observation", at, round_index, ex, run_id))
    if not runnable:
        return
    finished = loop.create_future()
    failure: list[BaseException] = []
    left = len(runnable)  # calls still to finish; the last one wakes the batch

    async def one(pos: int) -> None:
        nonlocal left
        started[pos] = t = clock() - origin
        try:
            done[pos] = ex = await execute(calls[pos], pos, t)
            is_open[pos] = False
            end = ex.ended_at if settled else clock() - origin
            emit(make_observation("observation", end, round_index, ex, run_id))
        except asyncio.CancelledError:
            batch._cancelled(pos)
            raise
        except BaseException as exc:  # the run must stop: wake the batch, which re-raises it
            if isinstance(exc, Interrupted) and exc.execution is not None:
                done[pos] = exc.execution
            failure.append(exc)
            if not finished.done():
                finished.set_result(None)
            return
        left -= 1
        if not left and not finished.done():
            finished.set_result(None)

    # asyncio.Task directly when no task factory is installed (what loop.create_task does then, minus
    # its Python wrapper), named once (Python 3.11 formats a fresh "Task-N" name per task otherwise):
    # together a tenth of a call's cost here. A task factory, when set, is respected.
    if loop.get_task_factory() is None:
        Task = asyncio.Task
        tasks = [Task(one(pos), loop=loop, name=TASK_NAME) for pos in runnable]
    else:
        tasks = [loop.create_task(one(pos), name=TASK_NAME) for pos in runnable]
    try:
        await finished
    finally:
        if left or failure:  # (when every call counted itself out, every task has returned)
            pending = [t for t in tasks if not t.done()]
            if pending:
                if failure:  # a call must stop the run: the harness stops the others, not the
                    batch._stopping = {*(batch._stopping or ()), *pending}  # strategy (their records say why)
                for t in pending:
                    t.cancel()
                await wait_until_stopped(pending)
    if failure:
        raise failure[0]

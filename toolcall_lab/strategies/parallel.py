"""``parallel``: every call of a batch at once, with an optional concurrency cap and per-tool limits.

The batch's ACTION events all come first (one instant), then its OBSERVATION events in batch order
once every call has finished; results go back in model order whatever order calls finish in.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping

from toolcall_lab._execution import Interrupted
from toolcall_lab._hooks import wait_until_stopped
from toolcall_lab.events import make_action, make_observation
from toolcall_lab.strategies._slots import check_limits
from toolcall_lab.strategies.base import Strategy
from toolcall_lab.strategies.batch import TASK_NAME, Batch

_PLAIN = re.compile(r"[A-Za-z0-9_.\-]+")
"""Tool names written bare in an option name; any other (and ``cap``) is written as a JSON string."""


def option_name(base: str, concurrency: int | None, tool_limits: Mapping[str, int]) -> str:
    """``parallel``, ``parallel[cap=4]``, ``eager[cap=4,web_search=2]``: a name that says the options
    (and that `toolcall_lab.strategies.resolve` reads back)."""
    options = ([f"cap={concurrency}"] if concurrency is not None else []) + [
        f"{tool if _PLAIN.fullmatch(tool) and tool != 'cap' else json.dumps(tool)}={k}"
        for tool, k in sorted(tool_limits.items())
    ]
    return f"{base}[{','.join(options)}]" if options else base


class Parallel(Strategy):
    """All calls at once (at most `concurrency` at a time, at most ``tool_limits[name]`` of a tool).

    Args:
        concurrency: cap on calls at once (None: the run's ``concurrency`` setting).
        tool_limits: per tool, the most calls at once, e.g. ``{"web_search": 2}``.
        name: defaults to a subclass's own ``name`` (``class Mine(Parallel): name = "mine"``),
            else ``parallel`` with the options, e.g. ``parallel[cap=4,web_search=2]``.
    """

    def __init__(
        self,
        *,
        concurrency: int | None = None,
        tool_limits: Mapping[str, int] | None = None,
        name: str | None = None,
    ) -> None:
        self.tool_limits = check_limits("Parallel", concurrency, tool_limits)
        self.concurrency = concurrency
        self.name = name or type(self).name or option_name("parallel", concurrency, self.tool_limits)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))

    async def run(self, batch: Batch) -> None:
        if not batch._screen_now():
            await batch._screen()
        at = batch.now()  # the batch starts at one instant: one clock read for all its actions
        emit, round_index, done, screened = batch._emit, batch.round_index, batch._done, batch._pre
        runnable = []
        is_open = batch._open = [False] * len(batch._calls)  # (marked before each event: a listener
        for pos, call in enumerate(batch._calls):  # that stops the run leaves the record consistent)
            is_open[pos] = True
            emit(make_action("action", at, round_index, call))
            pre = screened[pos]
            if pre is None:
                runnable.append(pos)
            else:
                done[pos] = pre
        if runnable:
            if batch._slots is None:
                await run_all(batch, runnable)
            else:  # under a cap or per-tool limits: calls wait for slots, in model order
                group = batch._group_for(observe=False)
                for pos in runnable:
                    group.dispatch(pos, at, act=False)
                batch._group = None
                await group.wait()
        at = batch.now()
        for pos, ex in enumerate(done):
            is_open[pos] = False
            emit(make_observation("observation", at, round_index, ex))


async def run_all(batch: Batch, positions: list[int]) -> None:
    """Run the calls at `positions` concurrently, no cap: one task each, started in model order.

    A hand-rolled task group: each task counts itself out and the last one wakes the batch, so a
    call costs one task and one loop iteration (`asyncio.TaskGroup` adds a done-callback and another
    iteration per task, a third of the per-call cost on no-op tools). The semantics are a task
    group's: the first exception that must stop the run (cancellation aside) cancels the others,
    which are drained before it propagates; cancelling the batch cancels and drains every call.
    """
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    failure: list[BaseException] = []
    executor = batch._executor
    clock, origin, execute = executor._clock, executor.origin, executor.execute
    calls, done, started = batch._calls, batch._done, batch._started
    left = len(positions)  # calls still to finish; the last one wakes the batch

    async def one(pos: int) -> None:
        nonlocal left
        started[pos] = at = clock() - origin
        try:
            done[pos] = await execute(calls[pos], pos, at)
        except asyncio.CancelledError:
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
    Task, name = asyncio.Task, TASK_NAME
    if loop.get_task_factory() is None:
        tasks = [Task(one(pos), loop=loop, name=name) for pos in positions]
    else:
        tasks = [loop.create_task(one(pos), name=name) for pos in positions]
    try:
        await finished
    finally:
        if left or failure:  # (when every call counted itself out, every task has returned)
            pending = [t for t in tasks if not t.done()]
            if pending:
                for t in pending:
                    t.cancel()
                await wait_until_stopped(pending)
    if failure:
        raise failure[0]

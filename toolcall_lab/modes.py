"""Execution modes: how one batch (the tool calls of one model response) is scheduled. Running each
call (screening, hooks, timeouts, timing) is `toolcall_lab._execution.Executor`'s job.

- sequential: in model order, one after another.
- parallel: all at once, optional concurrency cap; ACTION events first, then OBSERVATION events in
  batch order; results in model order whatever order they finish in.
- serialized: one call per client round trip through a `SerializedSession`. Cost model: a batch of N
  calls costs N-1 extra client round trips of `round_trip_s` each (the first call arrives with the
  model's response; the last result travels with the next model request), recorded as
  `ClientRoundTrip`s labelled ``placeholder``. The complete message list is rebuilt once all are
  answered.
- first_only: the legacy bug of reading ``tool_calls[0]``: only the first call runs; the others are
  recorded as skipped and never answered (the protocol validator flags the transcript).

Results are kept by position, never by id: buggy servers send the same id twice in one batch, and
each of those calls is still run (or screened) and answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from toolcall_lab._execution import Executor, Interrupted
from toolcall_lab.events import RunEvent, make_action, make_observation
from toolcall_lab.messages import ToolCall
from toolcall_lab.proxy.session import SerializedSession
from toolcall_lab.records import (
    ROUND_TRIP_PLACEHOLDER,
    ClientRoundTrip,
    Mode,
    Timing,
    ToolExecution,
    make_round_trip,
)


class BatchState:
    """What a batch has done so far, by position; survives cancellation so an abort keeps finished
    results and knows which calls were running.

    Attributes:
        calls: the batch, in model order.
        done: each call's record once it has one (None: not settled yet).
        started: when each call's turn came (None: it had not started).
        tool_messages: set by modes that build the tool messages themselves (serialized: from the
            session); otherwise the loop makes one per answered call.
        client_round_trips: client round trips this batch cost (serialized: 1 + (N-1)).
        round_trips: serialized mode's extra client round trips, timed.
    """

    __slots__ = ("calls", "client_round_trips", "done", "round_trips", "started", "tool_messages")

    def __init__(self, calls: Sequence[ToolCall]) -> None:
        self.calls = calls
        self.done: list[ToolExecution | None] = [None] * len(calls)
        self.started: list[float | None] = [None] * len(calls)
        self.tool_messages: list[dict[str, Any]] | None = None
        self.client_round_trips = 1
        self.round_trips: list[ClientRoundTrip] = []

    def __repr__(self) -> str:
        settled = sum(d is not None for d in self.done)
        return f"<BatchState {settled}/{len(self.calls)} settled>"


Emit = Callable[[RunEvent], None]
TASK_NAME = "toolcall_lab tool call"
"""The name of the tasks parallel mode runs calls in (as `asyncio.all_tasks()` shows them)."""


async def _one(
    executor: Executor, state: BatchState, pos: int, pre: ToolExecution | None, at: float
) -> ToolExecution:
    """Run (or settle) the call at `pos`, whose turn came at time `at`; the record lands in `state`."""
    state.started[pos] = at
    call = state.calls[pos]
    if pre is None:
        try:
            ex = await executor.execute(call, pos, at)
        except Interrupted as exc:
            if exc.execution is not None:
                state.done[pos] = exc.execution
            raise
    elif pre.started_at != at:  # decided at screening; it happens when its turn comes
        ex = replace(pre, started_at=at, ended_at=at)
    else:
        ex = pre
    state.done[pos] = ex
    return ex


async def run_sequential(
    executor: Executor, state: BatchState, screened: list[ToolExecution | None], emit: Emit, round_index: int
) -> None:
    now, execute = executor.now, executor.execute
    calls, done, started = state.calls, state.done, state.started
    hooks = executor.hooks
    settled = hooks.approve_result is None and hooks.on_tool_complete is None
    for pos, call in enumerate(calls):
        started[pos] = at = now()
        emit(make_action("action", at, round_index, call))
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
        emit(make_observation("observation", at, round_index, ex))


async def run_parallel(
    executor: Executor,
    state: BatchState,
    screened: list[ToolExecution | None],
    emit: Emit,
    round_index: int,
    concurrency: int | None,
) -> None:
    at = executor.now()  # the batch starts at one instant: one clock read for all its actions
    done = state.done
    runnable = []
    for pos, call in enumerate(state.calls):
        emit(make_action("action", at, round_index, call))
        pre = screened[pos]
        if pre is None:
            runnable.append(pos)
        else:
            done[pos] = pre
    if runnable:
        await run_all(executor, state, runnable, concurrency)
    at = executor.now()
    for ex in state.done:
        emit(make_observation("observation", at, round_index, ex))


async def run_all(executor: Executor, state: BatchState, positions: list[int], cap: int | None) -> None:
    """Run the calls at `positions` concurrently (at most `cap` at once), in model order of starting.

    A hand-rolled task group: each task counts itself out and the last one wakes the batch, so a call
    costs one task and one loop iteration (`asyncio.TaskGroup` adds a done-callback and another
    iteration per task, a third of the per-call cost on no-op tools). The semantics are a task
    group's: the first exception that must stop the run (cancellation aside) cancels the others, which
    are drained before it propagates; cancelling the batch cancels and drains every call.
    """
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    failure: list[BaseException] = []
    clock, origin, execute = executor._clock, executor.origin, executor.execute
    calls, done, started = state.calls, state.done, state.started
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

    async def worker(queue: Iterator[int]) -> None:  # under a cap: `cap` workers take calls in order
        for pos in queue:
            if failure:
                return
            await one(pos)

    # asyncio.Task directly when no task factory is installed (what loop.create_task does then, minus
    # its Python wrapper), named once (Python 3.11 formats a fresh "Task-N" name per task otherwise):
    # together a tenth of a call's cost here. A task factory, when set, is respected.
    spawn = loop.create_task if loop.get_task_factory() is not None else None
    Task, name = asyncio.Task, TASK_NAME
    if cap is None or cap >= len(positions):
        tasks = (
            [Task(one(pos), loop=loop, name=name) for pos in positions]
            if spawn is None
            else [spawn(one(pos), name=name) for pos in positions]
        )
    else:
        queue = iter(positions)
        tasks = [
            Task(worker(queue), loop=loop, name=name) if spawn is None else spawn(worker(queue), name=name)
            for _ in range(cap)
        ]
    try:
        await finished
    finally:
        if left or failure:  # (when every call counted itself out, every task has returned)
            pending = [t for t in tasks if not t.done()]
            if pending:
                for t in pending:
                    t.cancel()
                await asyncio.wait(pending)
    if failure:
        raise failure[0]


def _session(assistant_message: dict[str, Any], calls: Sequence[ToolCall]) -> tuple[SerializedSession, bool]:
    """A session keyed by position: calls whose id repeats in the batch get a unique stand-in id
    (``id#position``) inside the session (True: stand-ins were needed; map the results back).

    In process, the session only hands out calls and collects results (the loop keeps the
    conversation and never asks it to rebuild the upstream request), so it gets the assistant message
    without its tool calls: the session deep-copies the message, and copying N calls per batch costs
    more than scheduling them."""
    message = {k: v for k, v in assistant_message.items() if k != "tool_calls"}
    if len({c.tool_call_id for c in calls}) == len(calls):
        return SerializedSession(message, calls), False
    seen: set[str] = set()
    unique = []
    for pos, call in enumerate(calls):
        if call.tool_call_id in seen:
            call = replace(call, tool_call_id=f"{call.tool_call_id}#{pos}")
        seen.add(call.tool_call_id)
        unique.append(call)
    return SerializedSession(message, unique), True


async def run_serialized(
    executor: Executor,
    state: BatchState,
    screened: list[ToolExecution | None],
    emit: Emit,
    round_index: int,
    assistant_message: dict[str, Any],
    round_trip_s: float,
) -> None:
    """One call per client round trip: the first call comes with the model's response, each later one
    costs a round trip (the client sends the previous result, the proxy answers with the next call)."""
    calls, done, started = state.calls, state.done, state.started
    session, stand_ins = _session(assistant_message, calls)
    timing = Timing(source="placeholder", note=f"{ROUND_TRIP_PLACEHOLDER} ({round_trip_s} s)")
    now, execute = executor.now, executor.execute
    hooks = executor.hooks
    settled = hooks.approve_result is None and hooks.on_tool_complete is None
    pos = 0
    at = now()
    while (handed := session.next_call()) is not None:
        call = calls[pos]
        if pos:
            if round_trip_s:
                await asyncio.sleep(round_trip_s)
                ended = now()
            else:
                ended = at
            state.round_trips.append(make_round_trip(call.tool_call_id, pos, at, ended, timing))
            state.client_round_trips += 1
            at = ended
        started[pos] = at
        emit(make_action("action", at, round_index, call))
        pre = screened[pos]
        if pre is None:
            try:
                done[pos] = ex = await execute(call, pos, at)
            except Interrupted as exc:
                done[pos] = exc.execution
                raise
            at = ex.ended_at if settled else now()
        else:
            done[pos] = ex = pre if pre.started_at == at else replace(pre, started_at=at, ended_at=at)
        session.submit(handed.tool_call_id, ex.result)
        emit(make_observation("observation", at, round_index, ex))
        pos += 1
    messages = session.tool_messages()
    if stand_ins:  # back to the ids the model sent
        messages = [{**m, "tool_call_id": c.tool_call_id} for c, m in zip(calls, messages, strict=True)]
    state.tool_messages = messages


async def run_first_only(
    executor: Executor, state: BatchState, screened: list[ToolExecution | None], emit: Emit, round_index: int
) -> None:
    first = state.calls[0]
    at = executor.now()
    emit(make_action("action", at, round_index, first))
    ex = await _one(executor, state, 0, screened[0], at)
    emit(make_observation("observation", executor.now(), round_index, ex))
    for pos in range(1, len(state.calls)):
        state.done[pos] = executor.skipped(state.calls[pos])


async def execute_batch(
    mode: Mode,
    executor: Executor,
    state: BatchState,
    *,
    emit: Emit,
    round_index: int,
    assistant_message: dict[str, Any],
    concurrency: int | None = None,
    round_trip_s: float = 0.0,
) -> None:
    """Run the batch in `state` under `mode`; results land in `state.done` (and survive an abort)."""
    calls = state.calls
    screened = await executor.screen(calls[:1] if mode == "first_only" else calls)
    if mode == "sequential":
        await run_sequential(executor, state, screened, emit, round_index)
    elif mode == "parallel":
        await run_parallel(executor, state, screened, emit, round_index, concurrency)
    elif mode == "serialized":
        await run_serialized(executor, state, screened, emit, round_index, assistant_message, round_trip_s)
    else:
        await run_first_only(executor, state, screened, emit, round_index)

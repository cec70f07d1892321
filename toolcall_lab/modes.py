"""Execution modes: how one batch (the tool calls of one model response) is run.

- sequential: in index order, one after another.
- parallel: all at once (asyncio TaskGroup), optional concurrency cap; ACTION events first, then
  OBSERVATION events in batch order; results in model order whatever order they finish in.
- serialized: one call per client round trip through a `SerializedSession`, each hand-out costing
  `round_trip_s`; the complete message list is rebuilt once all are answered.
- first_only: the legacy bug of reading ``tool_calls[0]``: only the first call runs; the others are
  recorded as skipped and never answered (the protocol validator flags the transcript).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from toolcall_lab._execution import Executor
from toolcall_lab.events import Action, Observation, RunEvent
from toolcall_lab.messages import ToolCall
from toolcall_lab.proxy.session import SerializedSession
from toolcall_lab.records import Mode, ToolExecution


@dataclass(slots=True)
class BatchState:
    """What a batch has done so far; survives cancellation so an abort keeps finished results."""

    calls: Sequence[ToolCall]
    done: dict[str, ToolExecution] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    tool_messages: list[dict[str, Any]] | None = None
    client_round_trips: int = 0


Emit = Callable[[RunEvent], None]


async def _one(
    executor: Executor, state: BatchState, call: ToolCall, pre: ToolExecution | None
) -> ToolExecution:
    now = state.started[call.tool_call_id] = executor.now()
    if pre is None:
        ex = await executor.execute(call, now)
    elif pre.started_at != now:  # decided at screening; it happens when its turn comes
        ex = replace(pre, started_at=now, ended_at=now)
    else:
        ex = pre
    state.done[call.tool_call_id] = ex
    return ex


async def run_sequential(
    executor: Executor, state: BatchState, screened: list[ToolExecution | None], emit: Emit, round_index: int
) -> None:
    for call, pre in zip(state.calls, screened, strict=True):
        emit(Action(at=executor.now(), round_index=round_index, call=call))
        ex = await _one(executor, state, call, pre)
        emit(Observation(at=executor.now(), round_index=round_index, execution=ex))


async def run_parallel(
    executor: Executor,
    state: BatchState,
    screened: list[ToolExecution | None],
    emit: Emit,
    round_index: int,
    concurrency: int | None,
) -> None:
    at = executor.now()  # the batch starts at one instant: one clock read for all its actions
    for call in state.calls:
        emit(Action(at=at, round_index=round_index, call=call))
    gate = asyncio.Semaphore(concurrency) if concurrency else None

    async def capped(call: ToolCall) -> None:
        async with gate:  # type: ignore[union-attr]
            await _one(executor, state, call, None)

    async with asyncio.TaskGroup() as group:
        for call, pre in zip(state.calls, screened, strict=True):
            if pre is None:
                group.create_task(capped(call) if gate is not None else _one(executor, state, call, None))
            else:
                state.done[call.tool_call_id] = pre
    at = executor.now()
    for call in state.calls:
        emit(Observation(at=at, round_index=round_index, execution=state.done[call.tool_call_id]))


async def run_serialized(
    executor: Executor,
    state: BatchState,
    screened: list[ToolExecution | None],
    emit: Emit,
    round_index: int,
    assistant_message: dict[str, Any],
    round_trip_s: float,
) -> None:
    session = SerializedSession(assistant_message, state.calls)
    pre_by_id = {c.tool_call_id: p for c, p in zip(state.calls, screened, strict=True)}
    while (call := session.next_call()) is not None:
        if round_trip_s:
            await asyncio.sleep(round_trip_s)  # the proxy hands this one call to the client
        state.client_round_trips += 1
        emit(Action(at=executor.now(), round_index=round_index, call=call))
        ex = await _one(executor, state, call, pre_by_id[call.tool_call_id])
        session.submit(call.tool_call_id, ex.result)
        emit(Observation(at=executor.now(), round_index=round_index, execution=ex))
    state.tool_messages = session.tool_messages()


async def run_first_only(
    executor: Executor, state: BatchState, screened: list[ToolExecution | None], emit: Emit, round_index: int
) -> None:
    first = state.calls[0]
    emit(Action(at=executor.now(), round_index=round_index, call=first))
    ex = await _one(executor, state, first, screened[0])
    emit(Observation(at=executor.now(), round_index=round_index, execution=ex))
    for call in state.calls[1:]:
        state.done[call.tool_call_id] = executor.skipped(call)


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
    screened = await executor.screen(state.calls[:1] if mode == "first_only" else state.calls)
    runner: Awaitable[None]
    if mode == "sequential":
        runner = run_sequential(executor, state, screened, emit, round_index)
    elif mode == "parallel":
        runner = run_parallel(executor, state, screened, emit, round_index, concurrency)
    elif mode == "serialized":
        runner = run_serialized(executor, state, screened, emit, round_index, assistant_message, round_trip_s)
    else:
        runner = run_first_only(executor, state, screened, emit, round_index)
    await runner

"""The batch a strategy schedules: the tool calls of one model response, and the means to run them.

A `Batch` is what `Strategy.run` receives. It owns everything a strategy must not get wrong, so a
strategy only decides *when* each call runs:

- running a call goes through the run's executor: screening (arguments, unknown tools,
  de-duplication, ``approve_call``, in model order), the tool's timeout, exceptions as data,
  ``approve_result`` and the other hooks under the run's hook policy, timing on the run's clock
  (real or virtual);
- `run` emits the ACTION and OBSERVATION events of each call; the concurrency cap and the per-tool
  limits are applied by `run`, `start` and `run_parallel` (a call that waits for a slot records
  when it was queued, `ToolExecution.queued_at`);
- results are kept by position and go back to the model in model order, whatever order the
  strategy ran them in; when the run is cut off (abort, cancellation, the deadline, an
  interruption) finished calls keep their outcome, the others are recorded as cancelled, and every
  ACTION gets its OBSERVATION.

While the model streams (strategies with ``streams = True``), calls arrive one by one as each
becomes complete (`arrivals`); `calls` holds the final batch once the stream has ended.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from toolcall_lab._execution import Executor, Interrupted
from toolcall_lab.events import RunEvent, make_action, make_observation
from toolcall_lab.exceptions import UsageError
from toolcall_lab.messages import Finding, ToolCall
from toolcall_lab.records import ClientRoundTrip, ToolExecution
from toolcall_lab.strategies._slots import Slots

Emit = Callable[[RunEvent], None]
TASK_NAME = "toolcall_lab tool call"
"""The name of the tasks calls run in concurrently (as `asyncio.all_tasks()` shows them)."""


def _drop(event: RunEvent) -> None:
    return None


_NO_LIMITS: Mapping[str, int] = MappingProxyType({})
_NOT_STREAMING: deque[int] = deque(maxlen=0)
"""The arrivals of every batch that does not stream: always empty (it holds nothing)."""
_NO_CALLS: Mapping[int, ToolCall] = MappingProxyType({})
_NO_MOVES: Mapping[int, int] = MappingProxyType({})


class Batch:
    """One batch of tool calls as a strategy sees it (see the module docstring).

    What a strategy reads: `calls` (model order; final once the stream has ended), `call(pos)`,
    `round_index`, `streaming`, `concurrency`, `tool_limits`, `results`, `now()`.
    What it does: `run(pos)` (one call, awaited), `start(pos)` + `join()` (concurrently, in the
    batch's tasks), `run_sequential()` / `run_parallel()` (the classic modes), `skip(pos)` (never
    answered: the legacy first-only bug), `note(text)` (recorded with the round), `arrivals()`
    (positions as calls become complete while the model streams). Lower level, for strategies
    that emit events themselves: `screen`, `verdict`, `execute`, `act`, `observe`.
    """

    # Class-level defaults for what most batches never change (a batch is made per model response;
    # setting fewer attributes keeps that cost off small batches). Lists are made per batch.
    tool_messages: list[dict[str, Any]] | None = None
    """Set by strategies that build the tool messages themselves (serialized: from the session)."""
    client_round_trips = 1
    chunk_timing: str | None = None
    """Once the stream has ended: what its chunk offsets rest on (``recorded``, ``spread``,
    ``estimated``, ``none``; see `toolcall_lab.records.ChunkTiming`)."""
    streaming = False
    """True while the model is still streaming this batch's response."""
    assistant_message: dict[str, Any] | None = None
    """The assistant message carrying the calls (None while the model streams)."""
    concurrency: int | None = None
    """At most this many calls at once (None: no cap), for `run`, `start` and `run_parallel`."""
    tool_limits: Mapping[str, int] = _NO_LIMITS
    """At most ``tool_limits[name]`` calls of tool `name` at once."""
    round_trip_s = 0.0
    _screened = 0  # positions below this are screened (in model order)
    _checked: list[bool] | None = None  # streaming: screened one by one
    _lock: asyncio.Lock | None = None
    _slots: Slots | None = None
    _group: _Group | None = None
    _wake: asyncio.Future[None] | None = None
    _final = True
    _arrivals: deque[int] = _NOT_STREAMING
    _indices: Mapping[int, ToolCall] = _NO_CALLS  # streaming: position -> the call as it arrived early
    _moved: Mapping[int, int] = _NO_MOVES

    def __init__(
        self,
        executor: Executor,
        calls: Sequence[ToolCall] = (),
        *,
        round_index: int = 0,
        emit: Emit | None = None,
        strategy: str = "",
        assistant_message: dict[str, Any] | None = None,
        concurrency: int | None = None,
        tool_limits: Mapping[str, int] | None = None,
        round_trip_s: float = 0.0,
        streaming: bool = False,
    ) -> None:
        self.executor = executor
        self.round_index = round_index
        self.strategy = strategy
        """The name of the strategy running the batch."""
        if assistant_message is not None:
            self.assistant_message = assistant_message
        if concurrency is not None or tool_limits:
            self.concurrency = concurrency
            if tool_limits:
                self.tool_limits = tool_limits
            self._slots = Slots(concurrency, self.tool_limits)
        if round_trip_s:
            self.round_trip_s = round_trip_s
        self.calls: tuple[ToolCall, ...] = tuple(calls)
        n = len(self.calls)
        self.done: list[ToolExecution | None] = [None] * n
        """Each call's record once it has one, by position (None: not settled yet)."""
        self.started: list[float | None] = [None] * n
        """When each call started running (None: it had not started)."""
        self.round_trips: list[ClientRoundTrip] = []
        self.notes: list[str] = []
        self.findings: list[Finding] = []
        self._emit: Emit = emit or _drop
        self._open = [False] * n  # an ACTION was emitted and its OBSERVATION not yet
        self._pre: list[ToolExecution | None] = [None] * n
        self._dedupe = executor.new_batch()
        if streaming:
            self.streaming = True
            self._final = False
            self._checked = [False] * n
            self._arrivals = deque()
            self._indices = {}
            self._moved = {}

    def __repr__(self) -> str:
        settled = sum(d is not None for d in self.done)
        return f"<Batch round {self.round_index} {self.strategy}: {settled}/{len(self.done)} settled>"

    # -- reading -------------------------------------------------------------------------------------

    def call(self, pos: int) -> ToolCall:
        """The call at `pos` (also while the model streams, once it has arrived)."""
        if self._final:
            return self.calls[pos]
        return self._indices[pos]

    def now(self) -> float:
        """The run's clock: seconds since the run started (real or virtual)."""
        return self.executor.now()

    @property
    def results(self) -> tuple[ToolExecution | None, ...]:
        """Each call's record so far, by position (None: not settled yet)."""
        return tuple(self.done)

    def note(self, text: str) -> None:
        """Record a remark about this batch with its round (`Round.strategy_notes`)."""
        self.notes.append(text)

    # -- events --------------------------------------------------------------------------------------

    def act(self, pos: int, at: float | None = None) -> None:
        """Emit the ACTION event of the call at `pos` (the strategy dispatched it)."""
        self._open[pos] = True
        self._emit(make_action("action", self.now() if at is None else at, self.round_index, self.call(pos)))

    def observe(self, pos: int, at: float | None = None) -> None:
        """Emit the OBSERVATION event of the call at `pos` (it must be settled)."""
        ex = self.done[pos]
        if ex is None:
            raise UsageError(f"observe({pos}): the call at position {pos} has no result yet")
        self._open[pos] = False
        self._emit(make_observation("observation", self.now() if at is None else at, self.round_index, ex))

    # -- screening -----------------------------------------------------------------------------------

    def screen_now(self) -> bool:
        """Screen every call now if that needs no await (no ``approve_call`` hook); False when
        `screen` must be awaited instead."""
        executor = self.executor
        if executor.hooks.approve_call is not None:
            return False
        n = len(self.calls)
        if self._screened < n:
            check, calls, pre, dedupe = executor.check, self.calls, self._pre, self._dedupe
            for pos in range(self._screened, n):
                pre[pos] = check(calls[pos], pos, dedupe)
            self._screened = n
        return True

    async def screen(self, upto: int | None = None) -> None:
        """Screen the calls in model order up to position `upto` (exclusive; default: all): bad
        arguments, unknown tools, duplicates, ``approve_call``. Runs each call's checks once."""
        n = len(self.calls) if upto is None else min(upto, len(self.calls))
        if self._screened >= n:
            return
        executor, calls, pre, dedupe = self.executor, self.calls, self._pre, self._dedupe
        if executor.hooks.approve_call is None:
            check = executor.check
            for pos in range(self._screened, n):
                pre[pos] = check(calls[pos], pos, dedupe)
            self._screened = n
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # concurrent callers: still one by one, in model order
            for pos in range(self._screened, n):
                pre[pos] = await executor.screen_one(calls[pos], pos, dedupe)
                self._screened = pos + 1

    async def verdict(self, pos: int) -> ToolExecution | None:
        """None when the call at `pos` may run; else the record it is answered with instead
        (screening it first if needed: in model order, or in arrival order while streaming)."""
        checked = self._checked
        if checked is None:
            if self._screened <= pos:
                await self.screen(pos + 1)
            return self._pre[pos]
        if not checked[pos]:
            checked[pos] = True
            executor = self.executor
            call = self.call(pos)
            if executor.hooks.approve_call is None:
                self._pre[pos] = executor.check(call, pos, self._dedupe)
            else:
                self._pre[pos] = await executor.screen_one(call, pos, self._dedupe)
        return self._pre[pos]

    def _check_now(self, pos: int) -> ToolExecution | None:
        """`verdict` without awaiting, when no ``approve_call`` hook is set (the checks are sync)."""
        checked = self._checked
        if checked is None:
            if self._screened <= pos:
                executor, calls, pre, dedupe = self.executor, self.calls, self._pre, self._dedupe
                check = executor.check
                for k in range(self._screened, pos + 1):
                    pre[k] = check(calls[k], k, dedupe)
                self._screened = pos + 1
        elif not checked[pos]:
            checked[pos] = True
            self._pre[pos] = self.executor.check(self.call(pos), pos, self._dedupe)
        return self._pre[pos]

    # -- running -------------------------------------------------------------------------------------

    def _settled(self) -> bool:
        """Whether nothing runs between a tool's end and its observation (no result hooks)."""
        hooks = self.executor.hooks
        return hooks.approve_result is None and hooks.on_tool_complete is None

    def _answer(self, pos: int, pre: ToolExecution, at: float) -> ToolExecution:
        """A call decided at screening is answered when its turn comes (it takes no time)."""
        ex = pre if pre.started_at == at else replace(pre, started_at=at, ended_at=at)
        self.done[pos] = ex
        return ex

    def _check_unsettled(self, pos: int) -> None:
        if self.done[pos] is not None or self.started[pos] is not None:
            raise UsageError(
                f"strategy {self.strategy!r}: the call at position {pos} was already run or skipped; "
                "each call runs once"
            )

    async def execute(self, pos: int, at: float | None = None) -> ToolExecution:
        """Lower level than `run`: the screened call at `pos` through the executor, started at `at`
        (default: now), its record kept; no events, no slots (the strategy handles both)."""
        if at is None:
            at = self.executor.now()
        pre = self._pre[pos]
        if pre is not None:
            return self._answer(pos, pre, at)
        early = not self._final
        self.started[pos] = at
        try:
            ex = await self.executor.execute(self.call(pos), pos, at)
        except Interrupted as exc:
            if exc.execution is not None:
                self.done[self.at(pos, early)] = exc.execution
            raise
        self.done[self.at(pos, early)] = ex
        return ex

    async def run(self, pos: int) -> ToolExecution:
        """Run the call at `pos` now and return its record: ACTION, screening, a slot (under the
        cap and the per-tool limits), the tool through the executor, OBSERVATION."""
        self._check_unsettled(pos)
        early = not self._final
        pre = await self.verdict(pos)
        pos = self.at(pos, early)
        executor = self.executor
        at = executor.now()
        self.act(pos, at)
        if pre is not None:
            ex = self._answer(pos, pre, at)
            self.observe(pos, at)
            return ex
        call = self.call(pos)
        slots = self._slots
        queued: float | None = None
        if slots is not None and not slots.take(call.name):
            loop = asyncio.get_running_loop()
            granted: asyncio.Future[Any] = loop.create_future()
            slots.wait(pos, call.name, at, granted.set_result)
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    slots.release(call.name)  # it had its slot, but never used it
                else:
                    slots.forget(pos)
                raise
            queued, at = at, executor.now()
        self.started[self.at(pos, early)] = at
        try:
            ex = await executor.execute(call, pos, at)
        except Interrupted as exc:
            if exc.execution is not None:
                self.done[self.at(pos, early)] = exc.execution
            raise
        finally:
            if slots is not None:
                slots.release(call.name)
        if queued is not None:
            ex = replace(ex, queued_at=queued)
        pos = self.at(pos, early)
        self.done[pos] = ex
        self.observe(pos, ex.ended_at if self._settled() else executor.now())
        return ex

    async def run_sequential(self, positions: Iterable[int] | None = None) -> None:
        """Run the calls at `positions` (default: all) one after another, in the order given."""
        for pos in range(len(self.calls)) if positions is None else positions:
            await self.run(pos)

    async def run_parallel(self, positions: Iterable[int] | None = None) -> None:
        """Run the calls at `positions` (default: all) concurrently, under the cap and the per-tool
        limits; returns when all have finished. ACTIONs when each is dispatched (all at once),
        OBSERVATIONs when each finishes."""
        for pos in range(len(self.calls)) if positions is None else list(positions):
            self.start(pos)
        await self.join()

    def start(self, pos: int) -> None:
        """Dispatch the call at `pos` to run in a task of the batch (at once, or when a slot frees);
        `join` waits for every call started. If one must stop the run (cancellation aside), the
        others are cancelled and drained and the exception propagates from `join`."""
        self._check_unsettled(pos)
        self._group_for().dispatch(pos, self.executor.now())

    def _group_for(self, observe: bool = True) -> _Group:
        group = self._group
        if group is None:
            group = self._group = _Group(self, observe)
        return group

    async def join(self) -> None:
        """Wait for every call `start` dispatched to finish."""
        group = self._group
        if group is not None:
            self._group = None
            await group.wait()

    def skip(self, pos: int) -> None:
        """Leave the call at `pos` unexecuted and unanswered (status ``skipped``): the legacy bug of
        reading only ``tool_calls[0]``. The protocol validator flags such a transcript."""
        if self.done[pos] is None:
            self.done[pos] = self.executor.skipped(self.call(pos))

    # -- streaming -----------------------------------------------------------------------------------

    async def arrivals(self) -> AsyncIterator[int]:
        """Positions of calls as each becomes complete while the model streams, ending when the
        stream has ended and every call has arrived. Without streaming: every position, in order.

        Positions are final: a call arrives early only while the stream's call indices run 0, 1,
        2, ... (anything else, e.g. sparse indices, and the remaining calls arrive at its end).
        """
        if self._checked is None:
            for pos in range(len(self.calls)):
                yield pos
            return
        queue = self._arrivals
        loop = asyncio.get_running_loop()
        while True:
            while queue:
                yield queue.popleft()
            if not self.streaming:
                return
            self._wake = loop.create_future()
            await self._wake  # (raises what stopped a call the batch runs: the run must stop)

    def _failed(self, exc: BaseException) -> None:
        """A call the batch runs must stop the run: a strategy waiting for arrivals hears it now."""
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_exception(exc)

    def _ensure(self, n: int) -> None:
        """Room for `n` calls (while streaming it grows in steps; `end_stream` trims it)."""
        grow = n - len(self.done)
        if grow > 0:
            if self.streaming:
                grow = max(grow, len(self.done), 8)
            self.done += [None] * grow
            self.started += [None] * grow
            self._open += [False] * grow
            self._pre += [None] * grow
            if self._checked is not None:
                self._checked += [False] * grow

    async def next_arrivals(self) -> bool:
        """Wait until calls have arrived (in ``_arrivals``) or the stream has ended; False when the
        stream has ended and every call has arrived (what `arrivals` does, without a generator)."""
        if self._arrivals:
            return True
        if not self.streaming:
            return False
        self._wake = asyncio.get_running_loop().create_future()
        await self._wake
        return bool(self._arrivals) or self.streaming

    def arrive(self, pos: int, call: ToolCall) -> None:
        """(The loop) the call at `pos` became complete while the model streams."""
        if self._final:
            raise UsageError(f"arrive({pos}): the batch is not streaming (its calls are final)")
        if pos >= len(self.done):
            self._ensure(pos + 1)
        self._indices[pos] = call  # type: ignore[index]  # (a dict while streaming)
        self._arrivals.append(pos)
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def end_stream(
        self,
        calls: Sequence[ToolCall],
        assistant_message: dict[str, Any] | None,
        chunk_timing: str | None = None,
    ) -> None:
        """(The loop) the stream ended with these calls (choice 0, model order): calls that arrived
        early are checked against what the stream ended with, and the rest arrive now."""
        early = self._indices
        self.calls = tuple(calls)
        self.assistant_message = assistant_message
        self.chunk_timing = chunk_timing
        final = {c.index: p for p, c in enumerate(self.calls)}
        moved = {pos: final[c.index] for pos, c in early.items() if final.get(c.index, pos) != pos}
        if moved:
            self._move(moved)
            early = self._indices
        self.streaming = False
        n = len(self.calls)
        self._ensure(n)
        if len(self.done) > n:  # the room made while streaming, beyond the final batch (all empty)
            del self.done[n:], self.started[n:], self._open[n:], self._pre[n:]
            if self._checked is not None:
                del self._checked[n:]
        for pos, call in early.items():
            self._compare(pos, call, self.calls[pos])
        for pos in range(len(self.calls)):
            if pos not in early:
                self._arrivals.append(pos)
        self._final = True
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def _move(self, moved: dict[int, int]) -> None:
        """Calls that arrived early sit elsewhere in the final batch: only a call index that sorts
        before them appearing later (a negative index) does that. Move their state; calls still
        running find their new position through `_moved`."""
        n = max(len(self.calls), len(self.done))
        fresh: list[list[Any]] = [[None] * n, [None] * n, [False] * n, [None] * n, [False] * n]
        old: list[list[Any]] = [self.done, self.started, self._open, self._pre, self._checked or []]
        order = [p for p in range(len(self.done)) if p not in moved] + list(moved)  # moved ones last
        for pos in order:
            for src, dst in zip(old, fresh, strict=True):
                if pos < len(src):
                    dst[moved.get(pos, pos)] = src[pos]
        self.done, self.started, self._open, self._pre = fresh[0], fresh[1], fresh[2], fresh[3]
        if self._checked is not None:
            self._checked = fresh[4]
        self._indices = {moved.get(p, p): c for p, c in self._indices.items()}
        waiting = [moved.get(p, p) for p in self._arrivals]  # (in place: strategies hold the deque)
        self._arrivals.clear()
        self._arrivals.extend(waiting)
        self._moved = moved

    def at(self, pos: int, early: bool = True) -> int:
        """Where a call dispatched at `pos` sits now: the same, except for a call dispatched while
        the model streamed (`early`) that `_move` moved."""
        return self._moved.get(pos, pos) if early and self._moved else pos

    def _compare(self, pos: int, early: ToolCall, final: ToolCall) -> None:
        """A call that started before the stream ended must be the call the stream ended with."""
        if early is final or (
            early.arguments == final.arguments
            and early.name == final.name
            and early.tool_call_id == final.tool_call_id
        ):
            return
        if early.name == final.name and early.args is not None and early.args == final.args:
            return  # the same call (e.g. an id the loop made unique, whitespace after the object)
        self.findings.append(
            Finding(
                kind="changed_after_start",
                severity="error",
                call_index=final.index,
                tool_call_id=final.tool_call_id,
                message=f"call {final.tool_call_id} (position {pos}) started as {early.name}"
                f"({early.arguments}) when its arguments formed a complete object, but the stream "
                f"ended with {final.name}({final.arguments}); the record keeps what ran",
            )
        )

    # -- closing -------------------------------------------------------------------------------------

    def began(self) -> bool:
        """Whether any call has started or been settled."""
        return any(t is not None for t in self.started) or any(d is not None for d in self.done)

    def running(self) -> bool:
        """Whether calls `start` dispatched have not all finished (the strategy did not `join`)."""
        group = self._group
        return group is not None and any(not t.done() for t in group.tasks)

    async def drain(self) -> None:
        """Cancel the calls `start` dispatched that are still running, and wait until they stopped."""
        group = self._group
        if group is None:
            return
        self._group = None
        pending = [t for t in group.tasks if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending)

    def unsettled(self) -> list[int]:
        """Positions of calls neither run nor skipped (after the strategy returned: its bug)."""
        return [pos for pos, ex in enumerate(self.done) if ex is None]

    def close(self, cut: str | None = None) -> list[ToolExecution]:
        """The batch's records, by position. After a cut (`cut` says why), calls that had not
        finished are recorded as cancelled; every ACTION without its OBSERVATION gets one now."""
        executor = self.executor
        out: list[ToolExecution] = []
        early = self._indices
        for pos, call in enumerate(self.calls):
            ex = self.done[pos]
            if ex is None:
                ex = executor.cut_off(call, pos, self.started[pos], cut or "the batch was cut off")
                self.done[pos] = ex
            elif early and (ex.tool_call_id != call.tool_call_id or ex.arguments != call.arguments):
                ran = early.get(pos)
                if ran is not None and ran.args == call.args and ran.name == call.name:
                    ex = replace(ex, tool_call_id=call.tool_call_id, arguments=call.arguments)
                    self.done[pos] = ex
            out.append(ex)
        if any(self._open):
            at = executor.now()
            for pos, is_open in enumerate(self._open):
                if is_open:
                    self.observe(pos, at)
        return out


class _Group:
    """The calls a batch runs concurrently (`Batch.start`): one task per call.

    A hand-rolled task group: each task counts itself out and the last one wakes the batch, so a
    call costs one task and one loop iteration (`asyncio.TaskGroup` adds a done-callback and another
    iteration per task). The semantics are a task group's: the first exception that must stop the
    run (cancellation aside) cancels the others, which are drained before it propagates; cancelling
    the batch cancels and drains every call. A call screened out (a duplicate, bad arguments, ...)
    is answered at once, without a task or a slot. The per-call path reads the batch's lists and
    the executor's clock directly (it is the hot path of ``eager``).
    """

    __slots__ = (
        "batch",
        "check",
        "emit",
        "failure",
        "fast",
        "finished",
        "left",
        "loop",
        "observe",
        "round_index",
        "screened",
        "settled",
        "spawn",
        "tasks",
    )

    def __init__(self, batch: Batch, observe: bool = True) -> None:
        self.batch = batch
        self.observe = observe
        """Emit each call's OBSERVATION when it finishes (else the strategy does, e.g. all at the end)."""
        self.loop = loop = asyncio.get_running_loop()
        self.finished: asyncio.Future[None] = loop.create_future()
        self.failure: list[BaseException] = []
        self.left = 0
        self.tasks: list[asyncio.Task[None]] = []
        self.settled = batch._settled()
        self.screened = batch.executor.hooks.approve_call is None  # the checks need no await
        self.fast = self.screened and batch._slots is None  # nothing to await before the tool
        self.emit = batch._emit
        self.check = batch.executor.check
        self.round_index = batch.round_index
        # asyncio.Task directly when no task factory is installed (what loop.create_task does then,
        # minus its Python wrapper): a tenth of a call's cost here. A task factory is respected.
        self.spawn = loop.create_task if loop.get_task_factory() is not None else None

    def dispatch(self, pos: int, at: float, act: bool = True) -> None:
        """ACTION now (unless the strategy emitted it); then the call runs in a task (waiting for
        its slots if it must)."""
        batch = self.batch
        call = batch.calls[pos] if batch._final else batch._indices[pos]
        if act:
            batch._open[pos] = True
            self.emit(make_action("action", at, self.round_index, call))
        screened = self.screened
        if screened:
            checked = batch._checked
            if checked is None:
                pre = batch._check_now(pos)
            elif checked[pos]:
                pre = batch._pre[pos]
            else:
                checked[pos] = True
                pre = batch._pre[pos] = self.check(call, pos, batch._dedupe)
            if pre is not None:
                batch._answer(pos, pre, at)
                if self.observe:
                    batch.observe(pos, at)
                return
        self.left += 1
        if self.fast:
            coro = self.plain(pos, call, not batch._final)
        else:
            coro = self.one(pos, call, at, screened, not batch._final)
        spawn = self.spawn
        self.tasks.append(
            asyncio.Task(coro, loop=self.loop, name=TASK_NAME)
            if spawn is None
            else spawn(coro, name=TASK_NAME)
        )

    async def plain(self, pos: int, call: ToolCall, early: bool) -> None:
        """`one` for a screened call with no slots to wait for (the common case, kept lean)."""
        batch = self.batch
        executor = batch.executor
        try:
            batch.started[pos] = started = executor._clock() - executor.origin
            ex = await executor.execute(call, pos, started)
            if early and batch._moved:
                pos = batch.at(pos)
            batch.done[pos] = ex
            if self.observe:
                batch._open[pos] = False
                self.emit(
                    make_observation(
                        "observation",
                        ex.ended_at if self.settled else executor._clock() - executor.origin,
                        self.round_index,
                        ex,
                    )
                )
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the run must stop: wake the batch, which re-raises it
            self.failed(exc, batch.at(pos, early))
            return
        self.left -= 1
        if not self.left and not self.finished.done():
            self.finished.set_result(None)

    def failed(self, exc: BaseException, pos: int) -> None:
        if isinstance(exc, Interrupted) and exc.execution is not None:
            self.batch.done[pos] = exc.execution
        self.failure.append(exc)
        if not self.finished.done():
            self.finished.set_result(None)
        self.batch._failed(exc)

    async def one(self, pos: int, call: ToolCall, at: float, screened: bool, early: bool) -> None:
        batch = self.batch
        executor = batch.executor
        try:
            pre = None if screened else await batch.verdict(pos)
            if early and batch._moved:
                pos = batch.at(pos)
            if pre is not None:
                now = executor.now()
                batch._answer(pos, pre, now)
                if self.observe:
                    batch.observe(pos, now)
            else:
                slots = batch._slots
                queued: float | None = None
                if slots is not None and not slots.take(call.name):
                    granted: asyncio.Future[Any] = self.loop.create_future()
                    slots.wait(pos, call.name, at, granted.set_result)
                    try:
                        await granted
                    except asyncio.CancelledError:
                        if granted.done() and not granted.cancelled():
                            slots.release(call.name)  # it had its slots, but never used them
                        else:
                            slots.forget(pos)
                        raise
                    queued = at
                    if early and batch._moved:
                        pos = batch.at(pos)
                started = executor._clock() - executor.origin
                batch.started[pos] = started
                try:
                    ex = await executor.execute(call, pos, started)
                finally:
                    if slots is not None:
                        slots.release(call.name)
                if queued is not None:
                    ex = replace(ex, queued_at=queued)
                if early and batch._moved:
                    pos = batch.at(pos)
                batch.done[pos] = ex
                if self.observe:
                    batch._open[pos] = False
                    self.emit(
                        make_observation(
                            "observation",
                            ex.ended_at if self.settled else executor._clock() - executor.origin,
                            batch.round_index,
                            ex,
                        )
                    )
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the run must stop: wake the batch, which re-raises it
            self.failed(exc, batch.at(pos, early))
            return
        self.left -= 1
        if not self.left and not self.finished.done():
            self.finished.set_result(None)

    async def wait(self) -> None:
        if not self.left and not self.failure:
            return
        try:
            while self.left and not self.failure:  # (calls may have counted down to 0 before, and
                if self.finished.done():  # more been dispatched since: wait for those too)
                    self.finished = self.loop.create_future()
                await self.finished
        finally:
            if self.left or self.failure:  # (when every call counted itself out, every task returned)
                pending = [t for t in self.tasks if not t.done()]
                if pending:
                    for t in pending:
                        t.cancel()
                    await asyncio.wait(pending)
        if self.failure:
            raise self.failure[0]

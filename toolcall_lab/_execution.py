"""Running one tool call: screening (arguments, unknown tools, duplicates, approval), timeouts,
exceptions as data, result approval, hooks. Every outcome is a `ToolExecution`; nothing raises but
cancellation, replay divergence and the BaseExceptions a tool or hook raises (carried as `Interrupted`).

This is the unit every execution strategy builds on: `Executor.screen_one`
decides whether a call may run, `Executor.execute` runs it on the run's clock. How a batch is
scheduled is the strategies' business (`toolcall_lab.strategies`).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from toolcall_lab.clock import VirtualEventLoop
from toolcall_lab.exceptions import ReplayDivergenceError, UsageError
from toolcall_lab.messages import ParsedArguments, ToolCall
from toolcall_lab.records import (
    DECIDED,
    MEASURED,
    SIMULATED,
    CallStatus,
    HookFailure,
    HookName,
    Timing,
    ToolExecution,
    make_execution,
)
from toolcall_lab.tools import Tool, ToolOutcome, ToolRegistry, ToolThreads

Approval = bool | str | None

current_tool_call: contextvars.ContextVar[ToolCall] = contextvars.ContextVar("current_tool_call")
"""The call a tool function is running for, set for tools made with ``uses_current_call=True``
(replayed tools: they answer by tool_call_id)."""
_set_current = current_tool_call.set


@dataclass(frozen=True, slots=True, kw_only=True)
class Hooks:
    """Optional callbacks into a run; each may be a plain function or a coroutine function.

    approve_call(call) -> True/None to run it, False or a reason string to reject it.
    approve_result(call, execution) -> True/None to send the result, False/reason to withhold it.
    before_model_call(messages) -> the message list to send (or None to keep it).
    on_tool_start(call), on_tool_complete(execution), on_model_chunk(payload): notifications.

    When a hook raises, the failure is recorded (`HookFailure`: the hook, the call, the error, what
    followed) and the run follows this policy:

    - approve_call: the call is rejected, with the error as the reason (it does not run);
    - approve_result: the result is withheld (the call ran; status ``withheld``);
    - before_model_call: the run stops before that model call (status ``failed``, reason ``hook_error``);
    - on_tool_start, on_tool_complete, on_model_chunk (and the ``on_event`` listener): notifications
      only; the failure is recorded and the run goes on unchanged.

    KeyboardInterrupt and other BaseExceptions from a hook propagate out of `run` (with the partial
    record attached as ``partial_result``), as they would from any Python call.
    """

    approve_call: Callable[[ToolCall], Approval | Awaitable[Approval]] | None = None
    approve_result: Callable[[ToolCall, ToolExecution], Approval | Awaitable[Approval]] | None = None
    before_model_call: Callable[[list[dict[str, Any]]], Any] | None = None
    on_tool_start: Callable[[ToolCall], Any] | None = None
    on_tool_complete: Callable[[ToolExecution], Any] | None = None
    on_model_chunk: Callable[[dict[str, Any]], Any] | None = None

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            hook = getattr(self, name)
            if hook is not None and not callable(hook):
                raise UsageError(
                    f"Hooks.{name}={hook!r}: must be a function or coroutine function, or None for none"
                )


class Interrupted(Exception):
    """Carries a BaseException that is not an `Exception` (KeyboardInterrupt, SystemExit, ...) raised
    by a tool or hook through the run's tasks: asyncio would re-raise it straight out of the event
    loop, past the code that keeps the record. `run` re-raises ``original`` with the partial record."""

    def __init__(self, original: BaseException, where: str, execution: ToolExecution | None = None) -> None:
        super().__init__(f"{where} raised {type(original).__name__}")
        self.original = original
        self.where = where
        self.execution = execution
        """The record of the call that raised it, when a tool did."""


class _HarnessTimeout(Exception):
    """The harness's limit (`Tool.timeout_s`) expired, as opposed to a TimeoutError the tool raised."""


def being_cancelled() -> bool:
    """Whether the current task has a cancellation request pending (as opposed to a CancelledError
    that some code raised or let through on its own)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


try:  # canonical JSON for de-duplication keys; orjson is 5-10x faster when installed
    import orjson

    _SORTED = orjson.OPT_SORT_KEYS
    _dumps = orjson.dumps

    def canonical_json(value: Any) -> str:
        """Sorted-key compact JSON: equal arguments give equal text (1, 1.0 and true stay apart)."""
        try:  # decoded at once: keeping orjson's bytes (over-allocated buffers) costs 10x in a batch
            return _dumps(value, option=_SORTED).decode()
        except TypeError:  # integers beyond 64 bits and the like
            return json.dumps(value, sort_keys=True, separators=(",", ":"))

except ImportError:  # pragma: no cover - the optional extra is absent

    def canonical_json(value: Any) -> str:
        """Sorted-key compact JSON: equal arguments give equal text (1, 1.0 and true stay apart)."""
        return json.dumps(value, sort_keys=True, separators=(",", ":"))


def dedupe_key(call: ToolCall) -> str | None:
    """Same tool + same arguments (canonical JSON) -> same key; None when arguments are unusable."""
    args = call.args
    if args is None:
        return None
    return f"{call.name}\x00{canonical_json(args)}"


def result_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _rejected(approval: Approval) -> str | None:
    if approval is None or approval is True:
        return None
    return approval if isinstance(approval, str) and approval else "rejected by policy"


def _error(exc: BaseException) -> str:
    """``Type: message`` (an exception whose ``str()`` itself fails is shown by its ``repr``)."""
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not turn a tool's error into a harness crash
        text = "(its str() raised an error too)"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_Key = tuple[str, str]


class Executor:
    """Turns tool calls into executions against a registry, with the run's hooks, clock and threads.

    Args:
        tools: the registry; hooks: the run's `Hooks`; origin: the clock reading that is time 0.
        dedupe: within-batch de-duplication; dedupe_across_rounds: across rounds for every tool
            (tools marked `Tool.idempotent` get it anyway).
    """

    def __init__(
        self,
        tools: ToolRegistry,
        hooks: Hooks,
        origin: float,
        *,
        dedupe: bool = True,
        dedupe_across_rounds: bool = False,
    ) -> None:
        self.tools = tools
        self._tool = tools._tools.get  # the registry's own dict: a lookup per call, kept cheap
        self.hooks = hooks
        self.origin = origin
        self.dedupe = dedupe
        self.dedupe_across_rounds = dedupe_across_rounds
        loop = asyncio.get_running_loop()
        self._clock = loop.time
        self.clock_timing: Timing = SIMULATED if isinstance(loop, VirtualEventLoop) else MEASURED
        """The label of a duration measured on this run's clock (real or virtual)."""
        self._threads: ToolThreads | None = None
        self.history: dict[_Key, tuple[str, int]] = {}
        """Cross-round de-duplication: key -> (id, round) of the first successful call with that key."""
        self.round_index: int | None = None
        """The round in progress (the loop sets it), for hook failure records."""
        self.hook_failures: list[HookFailure] = []
        self.on_hook_failure: Callable[[HookFailure], None] | None = None
        """Called with each failure as it is recorded (the loop emits an event)."""

    def now(self) -> float:
        return self._clock() - self.origin

    @property
    def threads(self) -> ToolThreads:
        """Worker threads for this run's sync tools (made on first use, shut down by `close`)."""
        if self._threads is None:
            self._threads = ToolThreads()
        return self._threads

    def close(self) -> None:
        """The run is over: idle tool threads exit; threads stuck in timed-out calls are left behind."""
        if self._threads is not None:
            self._threads.shutdown()

    # -- records the harness decides -----------------------------------------------------------------

    def _made(
        self,
        call: ToolCall,
        status: CallStatus,
        text: str,
        *,
        duplicate_of: str | None = None,
        timing: Timing = DECIDED,
    ) -> ToolExecution:
        """The record of an outcome decided without running the tool: it took no time."""
        now = self.now()
        error = None if status in ("ok", "skipped") else text
        return make_execution(
            call.tool_call_id, call.name, call.arguments, call.index, status, text, error, now, now,
            duplicate_of, timing,
        )  # fmt: skip

    def skipped(self, call: ToolCall) -> ToolExecution:
        return self._made(call, "skipped", "not executed: only the first call of the batch runs (first_only)")

    def cancelled(self, call: ToolCall, started_at: float | None, why: str) -> ToolExecution:
        """A call cut off by an abort, a cancellation or the deadline (`why` says which)."""
        if started_at is None:
            return self._made(call, "cancelled", f"Not executed: {why} before this call started.")
        now = self.now()
        text = f"Cancelled: {why} while this call was running; its result is unknown."
        return make_execution(
            call.tool_call_id, call.name, call.arguments, call.index, "cancelled", text, text, started_at,
            max(now, started_at), None, self.clock_timing,
        )  # fmt: skip

    # -- hooks --------------------------------------------------------------------------------------

    def hook_failed(
        self, hook: HookName, exc: BaseException, effect: str, call: ToolCall | None, position: int | None
    ) -> HookFailure:
        failure = HookFailure(
            hook=hook,
            error=_error(exc),
            effect=effect,
            at=self.now(),
            round_index=self.round_index,
            tool_call_id=None if call is None else call.tool_call_id,
            position=position,
            timing=self.clock_timing,
        )
        self.hook_failures.append(failure)
        if self.on_hook_failure is not None:
            self.on_hook_failure(failure)
        return failure

    async def ask(
        self,
        hook: HookName,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        *,
        effect: str,
        call: ToolCall | None = None,
        position: int | None = None,
    ) -> tuple[bool, Any]:
        """Call a hook: (True, its value), or (False, the exception) after recording the failure."""
        try:
            value = fn(*args)
            if inspect.isawaitable(value):
                value = await value
            return True, value
        except asyncio.CancelledError as exc:
            if being_cancelled():
                raise
            self.hook_failed(hook, exc, effect, call, position)
            return False, exc
        except Exception as exc:  # a hook's bug is recorded and handled by policy, never a crash
            self.hook_failed(hook, exc, effect, call, position)
            return False, exc
        except BaseException as exc:
            raise Interrupted(exc, f"hook {hook}") from exc

    # -- screening ----------------------------------------------------------------------------------

    def new_batch(self) -> dict[_Key, tuple[str, int]]:
        """The within-batch de-duplication state of a new batch (key -> (id, position))."""
        return {}

    async def screen_one(
        self, call: ToolCall, position: int, batch: dict[_Key, tuple[str, int]]
    ) -> ToolExecution | None:
        """Decide whether `call` may run (None) or what it is answered with instead."""
        pre = self.check(call, position, batch)
        if pre is not None:
            return pre
        approve = self.hooks.approve_call
        if approve is not None:
            ok, verdict = await self.ask(
                "approve_call", approve, (call,), effect="call rejected", call=call, position=position
            )
            reason = _rejected(verdict) if ok else f"the approve_call hook failed ({_error(verdict)})"
            if reason is not None:
                if self.dedupe:  # a rejected call is not the original of later duplicates
                    self._forget(call, position, batch)
                return self._made(call, "rejected", f"Rejected: {reason}. The call was not executed.")
        return None

    async def screen(self, calls: Sequence[ToolCall]) -> list[ToolExecution | None]:
        """`screen_one` for a whole batch, in model order (None = runnable)."""
        batch = self.new_batch()
        if self.hooks.approve_call is None:
            check = self.check
            return [check(call, i, batch) for i, call in enumerate(calls)]
        return [await self.screen_one(call, i, batch) for i, call in enumerate(calls)]

    def check(
        self, call: ToolCall, position: int, batch: dict[_Key, tuple[str, int]]
    ) -> ToolExecution | None:
        """The checks that need no hook: arguments, tool, duplicates (None = may run)."""
        outcome = call.parse_arguments()
        if type(outcome) is not ParsedArguments or not call.complete:
            reason = "incomplete" if type(outcome) is ParsedArguments else outcome.reason  # type: ignore[union-attr]
            return self._made(
                call,
                "invalid_arguments",
                f"Error: arguments for {call.name!r} are {reason}. "
                "The call was not executed; send valid JSON arguments.",
            )
        tool = self._tool(call.name)
        if tool is None:
            known = ", ".join(self.tools.names()) or "none"
            return self._made(
                call, "unknown_tool", f"Error: unknown tool {call.name!r}. Available tools: {known}."
            )
        dedupe = self.dedupe
        across = self.dedupe_across_rounds or tool.idempotent
        if not (dedupe or across):
            return None
        key = (call.name, canonical_json(outcome.value))
        if dedupe:
            first = batch.get(key)
            if first is not None:
                return self._made(
                    call,
                    "duplicate",
                    f"Not executed: duplicates call {first[0]} (position {first[1]} of this batch; same "
                    "tool and arguments; within-batch de-duplication). Use that call's result.",
                    duplicate_of=first[0],
                )
        if across:
            earlier = self.history.get(key)
            if earlier is not None:
                rule = (
                    f"{call.name!r} is marked idempotent"
                    if tool.idempotent
                    else "cross-round de-duplication is on for this run"
                )
                return self._made(
                    call,
                    "duplicate",
                    f"Not executed: duplicates call {earlier[0]} of round {earlier[1]} (same tool and "
                    f"arguments; {rule}). Use that call's result.",
                    duplicate_of=earlier[0],
                )
        if dedupe:
            batch[key] = (call.tool_call_id, position)
        return None

    def _forget(self, call: ToolCall, position: int, batch: dict[_Key, tuple[str, int]]) -> None:
        args = call.args
        key = (call.name, canonical_json(args)) if args is not None else None
        if key is not None and batch.get(key) == (call.tool_call_id, position):
            del batch[key]

    # -- running ------------------------------------------------------------------------------------

    async def execute(
        self, call: ToolCall, position: int | None = None, started: float | None = None
    ) -> ToolExecution:
        """Run one screened call on the run's clock; tool exceptions and timeouts become results.

        `position` is the call's place in its batch (for hook failure records); `started` the time
        its turn came, when the caller already read the clock (re-read after an ``on_tool_start``
        hook). Raises only when the run must stop: cancellation, replay divergence, and
        `Interrupted` (carrying a KeyboardInterrupt or other BaseException a tool or hook raised).
        """
        tool = self._tool(call.name)
        outcome = call.parse_arguments()
        if tool is None or type(outcome) is not ParsedArguments:
            raise UsageError(f"execute() got call {call.tool_call_id} that screening would not let run")
        args = outcome.value
        hooks = self.hooks
        if hooks.on_tool_start is not None:  # checked here: awaiting a no-op costs per call
            try:
                await self.ask(
                    "on_tool_start",
                    hooks.on_tool_start,
                    (call,),
                    effect="ignored; the call ran",
                    call=call,
                    position=position,
                )
            except Interrupted as stop:  # the tool never started
                what = type(stop.original).__name__
                stop.execution = self._made(
                    call, "cancelled", f"Not executed: the on_tool_start hook raised {what}; the run stopped."
                )
                raise
            started = None
        clock, origin = self._clock, self.origin
        if started is None:
            started = clock() - origin
        if tool.uses_current_call:  # only when asked: setting a context variable costs per call
            _set_current(call)
        status: CallStatus = "ok"
        timing = self.clock_timing
        try:
            if tool.timeout_s is not None:
                value = await self._limited(tool, args)
            elif tool.is_async:
                value = await tool.function(**args)
            else:
                value = await self.threads.run(tool.function, args)
            if type(value) is str:
                text = value
            elif isinstance(value, ToolOutcome):
                status, text = value.status, value.text
                timing = value.timing or timing
            else:
                text = result_text(value)
        except _HarnessTimeout:
            status = "timeout"
            text = f"Error: tool {call.name!r} timed out after {tool.timeout_s} s (the harness's limit)."
            if not tool.is_async:
                text += " Its thread cannot be stopped and may still be running; its result is discarded."
        except asyncio.CancelledError as exc:
            if being_cancelled():
                raise
            status, text = "error", f"Error: tool {call.name!r} raised {_error(exc)}"
        except ReplayDivergenceError:
            raise
        except Exception as exc:  # a tool's exception is data for the model, not a crash of the run
            status, text = "error", f"Error: tool {call.name!r} raised {_error(exc)}"
        except BaseException as exc:
            text = f"Error: tool {call.name!r} raised {_error(exc)}; the run stopped."
            ended = clock() - self.origin
            ex = make_execution(
                call.tool_call_id, call.name, call.arguments, call.index, "error", text, text, started,
                ended, None, timing,
            )  # fmt: skip
            raise Interrupted(exc, f"tool {call.name!r}", ex) from exc
        ended = clock() - origin
        ex = make_execution(
            call.tool_call_id, call.name, call.arguments, call.index, status, text,
            None if status == "ok" else text, started, ended, None, timing,
        )  # fmt: skip
        if hooks.approve_result is not None and status == "ok":
            try:
                ok, verdict = await self.ask(
                    "approve_result",
                    hooks.approve_result,
                    (call, ex),
                    effect="result withheld",
                    call=call,
                    position=position,
                )
            except Interrupted as stop:  # the tool ran; its result was never approved
                what = type(stop.original).__name__
                text = f"Result withheld: the approve_result hook raised {what}; the run stopped."
                stop.execution = make_execution(
                    call.tool_call_id, call.name, call.arguments, call.index, "withheld", text, text, started,
                    ended, None, timing,
                )  # fmt: skip
                raise
            reason = _rejected(verdict) if ok else f"the approve_result hook failed ({_error(verdict)})"
            if reason is not None:
                withheld = f"Result withheld: {reason}."
                ex = make_execution(
                    call.tool_call_id, call.name, call.arguments, call.index, "withheld", withheld,
                    withheld, started, ended, None, timing,
                )  # fmt: skip
        if hooks.on_tool_complete is not None:
            try:
                await self.ask(
                    "on_tool_complete",
                    hooks.on_tool_complete,
                    (ex,),
                    effect="ignored; the result stands",
                    call=call,
                    position=position,
                )
            except Interrupted as stop:  # the call is settled; its record stands
                stop.execution = ex
                raise
        return ex

    async def _limited(self, tool: Tool, args: dict[str, Any]) -> Any:
        """The tool under its own limit; the harness's expiry is told apart from the tool's TimeoutError."""
        limit = asyncio.timeout(tool.timeout_s)
        try:
            async with limit:
                if tool.is_async:
                    return await tool.function(**args)
                return await self.threads.run(tool.function, args)
        except TimeoutError:
            if limit.expired():
                raise _HarnessTimeout from None
            raise

    def remember(
        self, executions: Sequence[ToolExecution], calls: Sequence[ToolCall], round_index: int
    ) -> None:
        """Add this batch's successful calls to the cross-round history (for the tools it applies to)."""
        for call, ex in zip(calls, executions, strict=True):
            if ex.status != "ok":
                continue
            tool = self.tools.get(call.name)
            if tool is None or not (self.dedupe_across_rounds or tool.idempotent):
                continue
            args = call.args
            if args is not None:
                self.history.setdefault((call.name, canonical_json(args)), (call.tool_call_id, round_index))

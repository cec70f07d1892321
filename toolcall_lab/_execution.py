"""Running one tool call: screening (arguments, unknown tools, duplicates, approval), timeouts,
exceptions as data, result approval. Every outcome is a `ToolExecution`; nothing raises but
cancellation.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolcall_lab.clock import VirtualEventLoop
from toolcall_lab.exceptions import ReplayDivergenceError
from toolcall_lab.messages import InvalidArguments, ToolCall
from toolcall_lab.records import DECIDED, MEASURED, SIMULATED, CallStatus, Timing, ToolExecution
from toolcall_lab.tools import ToolOutcome, ToolRegistry

Approval = bool | str | None

current_tool_call: contextvars.ContextVar[ToolCall] = contextvars.ContextVar("current_tool_call")
"""The call a tool function is running for (lets replayed tools answer by tool_call_id)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hooks:
    """Optional callbacks into a run; each may be a plain function or a coroutine function.

    approve_call(call) -> True/None to run it, False or a reason string to reject it.
    approve_result(call, execution) -> True/None to send the result, False/reason to withhold it.
    before_model_call(messages) -> the message list to send (or None to keep it).
    on_tool_start(call), on_tool_complete(execution), on_model_chunk(payload): notifications.
    """

    approve_call: Callable[[ToolCall], Approval | Awaitable[Approval]] | None = None
    approve_result: Callable[[ToolCall, ToolExecution], Approval | Awaitable[Approval]] | None = None
    before_model_call: Callable[[list[dict[str, Any]]], Any] | None = None
    on_tool_start: Callable[[ToolCall], Any] | None = None
    on_tool_complete: Callable[[ToolExecution], Any] | None = None
    on_model_chunk: Callable[[dict[str, Any]], Any] | None = None


async def call_hook(hook: Callable[..., Any] | None, *args: Any) -> Any:
    if hook is None:
        return None
    value = hook(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


try:  # canonical JSON for de-duplication keys; orjson is 5-10x faster when installed
    import orjson

    def _canonical(value: Any) -> str:
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:  # integers beyond 64 bits and the like
            return json.dumps(value, sort_keys=True, separators=(",", ":"))

except ImportError:  # pragma: no cover - the optional extra is absent

    def _canonical(value: Any) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))


def dedupe_key(call: ToolCall) -> str | None:
    """Same tool + same arguments (canonical JSON) -> same key; None when arguments are unusable."""
    args = call.args
    if args is None:
        return None
    return f"{call.name}\x00{_canonical(args)}"


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


class Executor:
    """Turns tool calls into executions against a registry, with the run's hooks and clock origin."""

    def __init__(self, tools: ToolRegistry, hooks: Hooks, origin: float, *, dedupe: bool) -> None:
        self.tools = tools
        self.hooks = hooks
        self.origin = origin
        self.dedupe = dedupe
        loop = asyncio.get_running_loop()
        self._clock = loop.time
        self.clock_timing: Timing = SIMULATED if isinstance(loop, VirtualEventLoop) else MEASURED
        """The label of a duration measured on this run's clock (real or virtual)."""
        self.history: dict[str, str] = {}
        """dedupe key -> id of the first call with that key that ran successfully in this run."""

    def now(self) -> float:
        return self._clock() - self.origin

    def _made(
        self,
        call: ToolCall,
        status: CallStatus,
        text: str,
        *,
        duplicate_of: str | None = None,
        started_at: float | None = None,
        ended_at: float | None = None,
        timing: Timing = DECIDED,
    ) -> ToolExecution:
        """The record of a call's outcome; without times, it happened just now and took no time."""
        now = self.now() if started_at is None or ended_at is None else 0.0
        return ToolExecution(
            tool_call_id=call.tool_call_id,
            name=call.name,
            arguments=call.arguments,
            index=call.index,
            status=status,
            result=text,
            error=None if status in ("ok", "skipped") else text,
            started_at=now if started_at is None else started_at,
            ended_at=now if ended_at is None else ended_at,
            duplicate_of=duplicate_of,
            timing=timing,
        )

    def skipped(self, call: ToolCall) -> ToolExecution:
        return self._made(call, "skipped", "not executed: only the first call of the batch runs (first_only)")

    def cancelled(self, call: ToolCall, started_at: float | None = None) -> ToolExecution:
        ex = self._made(
            call,
            "cancelled",
            "Cancelled: the run was aborted before this call finished.",
            timing=self.clock_timing,
        )
        return ex if started_at is None else replace(ex, started_at=started_at)

    async def screen(self, calls: Sequence[ToolCall]) -> list[ToolExecution | None]:
        """Decide up front which calls cannot run (None = runnable), in model order."""
        out: list[ToolExecution | None] = []
        in_batch: dict[str, str] = {}
        for call in calls:
            outcome = call.parse_arguments()
            if isinstance(outcome, InvalidArguments) or not call.complete:
                reason = outcome.reason if isinstance(outcome, InvalidArguments) else "incomplete"
                out.append(
                    self._made(
                        call,
                        "invalid_arguments",
                        f"Error: arguments for {call.name!r} are {reason}. "
                        "The call was not executed; send valid JSON arguments.",
                    )
                )
                continue
            if call.name not in self.tools:
                known = ", ".join(self.tools.names()) or "none"
                out.append(
                    self._made(
                        call, "unknown_tool", f"Error: unknown tool {call.name!r}. Available tools: {known}."
                    )
                )
                continue
            key = dedupe_key(call) if self.dedupe else None
            first = (in_batch.get(key) or self.history.get(key)) if key else None
            if first is not None:
                out.append(
                    self._made(
                        call,
                        "duplicate",
                        f"Not executed: duplicates call {first} (same tool and arguments); "
                        "use that call's result.",
                        duplicate_of=first,
                    )
                )
                continue
            hook = self.hooks.approve_call
            rejection = _rejected(await call_hook(hook, call)) if hook is not None else None
            if rejection is not None:
                out.append(self._made(call, "rejected", f"Rejected: {rejection}. The call was not executed."))
                continue
            if key:
                in_batch[key] = call.tool_call_id
            out.append(None)
        return out

    async def execute(self, call: ToolCall, started: float | None = None) -> ToolExecution:
        """Run one screened call; tool exceptions and timeouts become results, not raises.

        `started` is the start time if the caller already read the clock (the hook runs first).
        """
        tool = self.tools.get(call.name)
        assert tool is not None, "execute() is only called on screened calls"
        if self.hooks.on_tool_start is not None:  # checked here: awaiting a no-op costs per call
            await call_hook(self.hooks.on_tool_start, call)
            started = None
        if started is None:
            started = self.now()
        status: CallStatus = "ok"
        timing = self.clock_timing
        current_tool_call.set(call)
        try:
            if tool.timeout_s is None:
                args = call.args or {}
                value = await (tool.function(**args) if tool.is_async else tool.invoke(args))
            else:
                value = await asyncio.wait_for(tool.invoke(call.args or {}), tool.timeout_s)
            if isinstance(value, ToolOutcome):
                status, text = value.status, value.text
                timing = value.timing or timing
            else:
                text = result_text(value)
        except TimeoutError:
            status, text = "timeout", f"Error: tool {call.name!r} timed out after {tool.timeout_s} s."
        except (asyncio.CancelledError, ReplayDivergenceError):
            raise
        except Exception as exc:  # a tool's exception is data for the model, not a crash of the run
            status, text = "error", f"Error: tool {call.name!r} raised {type(exc).__name__}: {exc}"
        ex = self._made(call, status, text, started_at=started, ended_at=self.now(), timing=timing)
        if status == "ok" and self.hooks.approve_result is not None:
            reason = _rejected(await call_hook(self.hooks.approve_result, call, ex))
            if reason is not None:
                withheld = f"Result withheld: {reason}."
                ex = replace(ex, status="rejected", result=withheld, error=withheld)
        if self.hooks.on_tool_complete is not None:
            await call_hook(self.hooks.on_tool_complete, ex)
        return ex

    def remember(self, executions: Sequence[ToolExecution], calls: Sequence[ToolCall]) -> None:
        """Add this batch's successful calls to the run's de-duplication history."""
        by_id = {c.tool_call_id: c for c in calls}
        for ex in executions:
            call = by_id.get(ex.tool_call_id)
            key = dedupe_key(call) if call is not None and ex.status == "ok" else None
            if key and key not in self.history:
                self.history[key] = ex.tool_call_id

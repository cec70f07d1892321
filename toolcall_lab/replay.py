"""Replay a trace: the recorded model responses and tool results, re-timed as recorded, under any
mode or strategy.

The model's responses are reused (each chunk at its recorded offset, so a strategy that streams,
like ``eager``, sees calls complete when the recording says they did), the tools' recorded
durations are reused, and only the execution strategy changes: that is what makes strategies
comparable on the same trace. On the virtual clock (default) a replay takes milliseconds and is
exactly reproducible.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from toolcall_lab._execution import Hooks, current_tool_call, dedupe_key
from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import ReplayDivergenceError, UsageError
from toolcall_lab.loop import run
from toolcall_lab.messages import ToolCall
from toolcall_lab.models import ModelRequest
from toolcall_lab.records import ChunkTiming, Round, Timing, ToolExecution
from toolcall_lab.runs import RunConfig, RunResult
from toolcall_lab.strategies import StrategySpec, resolve
from toolcall_lab.tools import Tool, ToolOutcome, ToolRegistry
from toolcall_lab.trace import Trace

Check = Literal["strict", "ids", "off"]


def _normal(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.get("role"), "content": message.get("content") or None}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            (c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
            for c in message["tool_calls"]
        ]
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _ids(messages: Sequence[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        out += [c.get("id") for c in m.get("tool_calls") or []]
        if m.get("role") == "tool":
            out.append(f"<-{m.get('tool_call_id')}")
    return out


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def divergence(
    sent: Sequence[dict[str, Any]], recorded: Sequence[dict[str, Any]], check: Check
) -> str | None:
    """How the conversation sent differs from the recorded one (None when it matches under `check`)."""
    if check == "off":
        return None
    if check == "ids":
        a, b = _ids(sent), _ids(recorded)
        return None if a == b else f"tool-call ids differ: sent {a}, recorded {b}"
    for i in range(max(len(sent), len(recorded))):
        if i >= len(sent):
            return f"message {i} is missing; the recording has {_short(_normal(recorded[i]))}"
        if i >= len(recorded):
            return f"message {i} is extra: {_short(_normal(sent[i]))}"
        x, y = _normal(sent[i]), _normal(recorded[i])
        if x != y:
            return f"message {i} differs:\n  sent:     {_short(x)}\n  recorded: {_short(y)}"
    return None


class ReplayModel:
    """Serves a trace's recorded responses in order, re-emitting each chunk at its recorded offset.

    Args:
        trace: the trace to replay.
        check: ``strict`` compares every message sent with the recording, ``ids`` only the
            sequence of tool-call ids, ``off`` nothing (for replays whose conversation differs on
            purpose, e.g. first_only against a parallel recording).
    """

    origin = "replayed"

    def __init__(self, trace: Trace, *, check: Check = "strict") -> None:
        self.trace = trace
        self.check = check
        self.name = f"replay:{trace.metadata.title}"
        self.served = 0

    def response_timing(self, request: ModelRequest) -> tuple[Timing, ChunkTiming]:
        """A replayed response is timed as recorded, so it carries the recording's labels."""
        recorded = self.trace.rounds[self.served - 1].model_call
        return recorded.timing, recorded.chunk_timing

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        rounds = self.trace.rounds
        k = self.served
        if k >= len(rounds):
            raise ReplayDivergenceError(
                f"{self.trace.metadata.title}: model call {k + 1} asked for, but the "
                f"recording has only {len(rounds)} response(s)"
            )
        recorded: Round = rounds[k]
        self.served += 1
        diff = divergence(request.messages, recorded.request_messages, self.check)
        if diff is not None:
            raise ReplayDivergenceError(
                f"{self.trace.metadata.title}: round {k}: the conversation differs from "
                f"the recording ({self.check} check): {diff}"
            )
        loop = asyncio.get_running_loop()
        start = loop.time()
        call = recorded.model_call
        for chunk in call.chunks:
            delay = start + chunk.offset_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            yield chunk.payload
        rest = start + call.latency_s - loop.time()
        if rest > 0:
            await asyncio.sleep(rest)


_OUTCOME: dict[str, Literal["ok", "error", "timeout"]] = {"error": "error", "timeout": "timeout"}


def replay_tools(trace: Trace) -> ToolRegistry:
    """Tools that return the recorded results after the recorded durations, answering by tool_call_id
    (or, for calls the recording does not know by id, by name and arguments in recorded order)."""
    recorded: list[ToolExecution] = []
    by_id: dict[str, deque[int]] = defaultdict(deque)
    by_key: dict[str, deque[int]] = defaultdict(deque)
    for r in trace.rounds:
        calls = {c.tool_call_id: c for c in r.tool_calls}
        for ex in r.executions:
            if ex.status in ("ok", "error", "timeout", "withheld"):  # the tool ran
                recorded.append(ex)
                by_id[ex.tool_call_id].append(len(recorded) - 1)
                call = calls.get(ex.tool_call_id)
                key = dedupe_key(call) if call is not None else None
                if key:
                    by_key[key].append(len(recorded) - 1)
    used: set[int] = set()

    def take(queue: deque[int] | None) -> int | None:
        while queue and queue[0] in used:
            queue.popleft()
        return queue.popleft() if queue else None

    def make(name: str) -> Any:
        async def replayed(**_: Any) -> ToolOutcome:
            call = current_tool_call.get()
            pos = take(by_id.get(call.tool_call_id))
            if pos is None:
                pos = take(by_key.get(dedupe_key(call) or ""))
            if pos is None:
                raise ReplayDivergenceError(
                    f"{trace.metadata.title}: no recorded execution for call "
                    f"{call.tool_call_id} {name}({call.arguments})"
                )
            used.add(pos)
            ex = recorded[pos]
            await asyncio.sleep(ex.duration_s)
            return ToolOutcome(text=ex.result, status=_OUTCOME.get(ex.status, "ok"), timing=ex.timing)

        replayed.__name__ = name
        return replayed

    registry = ToolRegistry()
    for schema in trace.tools:
        fn = schema.get("function") or {}
        name = fn.get("name")
        if name and name not in registry:
            registry.add(
                Tool(
                    name=name,
                    function=make(name),
                    description=fn.get("description") or "",
                    parameters=fn.get("parameters") or {},
                    uses_current_call=True,
                )
            )
    return registry


def _between(text: str, prefix: str, suffix: str) -> str | None:
    if text.startswith(prefix) and text.endswith(suffix):
        return text[len(prefix) : len(text) - len(suffix)]
    return None


def replay_hooks(trace: Trace) -> Hooks:
    """The recording's approval decisions, made again: calls it rejected are rejected with the
    recorded reason, results it withheld are withheld with the recorded reason, so the conversation
    (and the record) matches the recording's. Calls are matched by tool_call_id, in recorded order."""
    rejected: dict[str, deque[str]] = defaultdict(deque)
    withheld: dict[str, deque[str]] = defaultdict(deque)
    for r in trace.rounds:
        for ex in r.executions:
            if ex.status == "rejected":
                reason = _between(ex.result, "Rejected: ", ". The call was not executed.")
                rejected[ex.tool_call_id].append(reason or ex.result)
            elif ex.status == "withheld":
                reason = _between(ex.result, "Result withheld: ", ".")
                withheld[ex.tool_call_id].append(reason or ex.result)

    def approve_call(call: ToolCall) -> str | None:
        queue = rejected.get(call.tool_call_id)
        return queue.popleft() if queue else None

    def approve_result(call: ToolCall, execution: ToolExecution) -> str | None:
        queue = withheld.get(call.tool_call_id)
        return queue.popleft() if queue else None

    return Hooks(
        approve_call=approve_call if rejected else None,
        approve_result=approve_result if withheld else None,
    )


def replay_config(trace: Trace, mode: StrategySpec | None = None, **settings: Any) -> RunConfig:
    """The trace's recorded settings, with the mode or strategy (and any setting) overridden."""
    recorded = {k: v for k, v in trace.metadata.settings.items() if k in RunConfig.__dataclass_fields__}
    chosen = mode if mode is not None else trace.metadata.mode or "sequential"
    merged = {**recorded, **settings, "mode": chosen}
    try:
        return RunConfig(**merged)
    except UsageError:
        if mode is not None or "mode" in settings:
            raise
        raise UsageError(
            f"{trace.metadata.title}: recorded under the strategy {trace.metadata.mode!r}, which is not a "
            "built-in; pass it to replay it under the same strategy (replay(trace, my_strategy), or "
            "--strategy module:attribute), or name another"
        ) from None


def _skips_calls(spec: Any) -> bool:
    try:
        return bool(getattr(resolve(spec), "skips_calls", False))
    except UsageError:  # a recording's user strategy, unknown here
        return False


def default_check(trace: Trace, mode: StrategySpec) -> Check:
    """``strict``, or ``off`` when the replay's strategy or the recording's leaves calls unanswered
    on purpose (``first_only``) and they differ: such a conversation cannot match the recording."""
    recorded = trace.metadata.mode or "sequential"
    if resolve(mode).name == recorded:
        return "strict"
    return "off" if _skips_calls(mode) or _skips_calls(recorded) else "strict"


async def replay_async(
    trace: Trace,
    mode: StrategySpec | None = None,
    *,
    check: Check | None = None,
    tools: ToolRegistry | None = None,
    **settings: Any,
) -> RunResult:
    """Replay on the running loop's clock (real time in a notebook: ``await replay_async(...)``)."""
    cfg = replay_config(trace, mode, **settings)
    model = ReplayModel(trace, check=check or default_check(trace, cfg.mode))
    hooks = replay_hooks(trace)
    return await run(model, tools or replay_tools(trace), trace.initial_messages, config=cfg, hooks=hooks)


def replay(
    trace: Trace,
    mode: StrategySpec | None = None,
    *,
    virtual: bool = True,
    check: Check | None = None,
    tools: ToolRegistry | None = None,
    **settings: Any,
) -> RunResult:
    """Replay a trace under `mode` (a mode or strategy name, ``module:attribute``, or a strategy
    object; default: the recording's) and return the run; on the virtual clock unless ``virtual=False``.

    Passing real `tools` on the virtual clock warns: virtual time jumps over real waits.
    """
    if virtual and tools is not None:
        warnings.warn(
            "replaying with real tools on the virtual clock: their real waits are skipped and "
            "timeouts may fire spuriously; use virtual=False for real tools",
            RuntimeWarning,
            stacklevel=2,
        )
    coro = replay_async(trace, mode, check=check, tools=tools, **settings)
    if virtual:
        return run_virtual(coro)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    from toolcall_lab.exceptions import UsageError

    raise UsageError("replay(virtual=False) inside a running event loop: use `await replay_async(...)`")

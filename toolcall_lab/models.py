"""The model boundary: a protocol, and a strict scripted model for tests and teaching.

A model streams OpenAI chat-completion chunks (dicts) for a request; it may instead yield one whole
``chat.completion`` body. The loop times and parses what arrives, so every model gets the same
treatment: the scripted one here, the replay model (`toolcall_lab.replay`) and the ``openai`` client
adapter (`toolcall_lab.openai_model`).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from toolcall_lab.exceptions import ScriptError, UsageError
from toolcall_lab.messages import ToolCall
from toolcall_lab.records import ChunkTiming, Timing


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """What the loop asks of the model for one round."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] | None
    round_index: int
    batch: int
    params: Mapping[str, Any] = field(default_factory=dict)
    """Extra request parameters (`RunConfig.params`); without ``tools`` the loop leaves out the
    tool-only ones (``parallel_tool_calls``, ``tool_choice``), which the OpenAI API rejects there."""


@runtime_checkable
class Model(Protocol):
    """Anything that streams chat-completion chunks for a request.

    Optional members the loop reads when present: ``origin`` (``"scripted"``, ``"replayed"``; default
    ``"recorded"``: a live run) and ``response_timing(request) -> (Timing, ChunkTiming)``, called after
    each stream ends, saying where the response's duration came from when the model knows better
    than the clock (a replay reproduces the recording's labels; a script says its latencies are
    placeholders). ``copy_free = True`` says the model never changes a request it is given nor a
    payload after yielding it, so the loop may skip its defensive copies of both (the replay model,
    which only reads; hooks and listeners still get copies). Any other model gets copies.
    """

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]: ...


def response_timing(model: Any, request: ModelRequest, clock: Timing) -> tuple[Timing, ChunkTiming]:
    """The timing label of the response the model just streamed (see `Model`)."""
    describe = getattr(model, "response_timing", None)
    if describe is not None:
        timing, chunks = describe(request)
        if timing is SCRIPTED and clock.source == "recorded":  # a script played on the real clock:
            return SCRIPT_MEASURED, "recorded"  # what it took was measured, as the chunks' arrival
        return timing, chunks
    return clock, "recorded"  # as they arrived on the run's clock (the clock's label says which)


ScriptedCall = ToolCall | tuple[str, Mapping[str, Any] | str] | tuple[str, Mapping[str, Any] | str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedResponse:
    """One scripted model turn: text and/or tool calls, with the time it takes.

    Args:
        content: assistant text (None for none).
        tool_calls: calls as ``(name, arguments)`` or ``(name, arguments, tool_call_id)``; arguments
            are a dict (serialised) or a raw string (sent as is, so broken JSON can be scripted).
            Without an id the call gets ``call_{batch}_{index}``.
        latency_s: seconds from request to the last chunk; ttfc_s: to the first chunk (default: a
            quarter of the latency).
    """

    content: str | None = None
    tool_calls: tuple[ScriptedCall, ...] = ()
    reasoning: str | None = None
    latency_s: float = 0.0
    ttfc_s: float | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for name in ("latency_s", "ttfc_s"):
            value = getattr(self, name)
            if (value is not None or name == "latency_s") and (
                isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            ):
                raise UsageError(
                    f"ScriptedResponse {name}={value!r}: must be a finite number of seconds >= 0 (a NaN "
                    "or infinite latency would stall the virtual clock or time nothing)"
                )
        for name in ("latency_s", "ttfc_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UsageError(
                    f"ScriptedResponse {name}={value!r}: must be a finite number of seconds >= 0"
                )
        if self.ttfc_s is not None and not self.ttfc_s <= self.latency_s:
            raise UsageError(
                f"ScriptedResponse latency_s={self.latency_s!r}, ttfc_s={self.ttfc_s!r}: "
                "need 0 <= ttfc_s <= latency_s"
            )

    def chunks(self, batch: int) -> list[dict[str, Any]]:
        """The chat-completion chunks this turn streams as."""
        calls = []
        for i, item in enumerate(self.tool_calls):
            if isinstance(item, ToolCall):
                calls.append((item.tool_call_id, item.name, item.arguments))
                continue
            name, args = item[0], item[1]
            cid = item[2] if len(item) > 2 else f"call_{batch}_{i}"
            calls.append((cid, name, args if isinstance(args, str) else json.dumps(args)))
        return response_chunks(
            content=self.content,
            reasoning=self.reasoning,
            calls=calls,
            finish_reason=self.finish_reason or ("tool_calls" if calls else "stop"),
            usage=self.usage,
            response_id=f"chatcmpl-scripted-{batch}",
        )

    def offsets(self, n: int) -> list[float]:
        """Arrival offsets for `n` chunks: the first at ttfc, the rest spread evenly to the latency."""
        ttfc = self.latency_s / 4 if self.ttfc_s is None else self.ttfc_s
        if n <= 1:
            return [self.latency_s] * n
        step = (self.latency_s - ttfc) / (n - 1)
        return [ttfc + i * step for i in range(n - 1)] + [self.latency_s]


def response_chunks(
    *,
    content: str | None,
    calls: Sequence[tuple[str, str, str]],
    reasoning: str | None = None,
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
    response_id: str = "chatcmpl-scripted",
    model: str = "scripted",
) -> list[dict[str, Any]]:
    """Chat-completion chunks for a response: role/text, reasoning, one header + one args delta per call."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": response_id,
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    out = [chunk({"role": "assistant", "content": content or ""})]
    if reasoning:
        out.insert(0, chunk({"role": "assistant", "reasoning_content": reasoning}))
    for i, (cid, name, args) in enumerate(calls):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": cid,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        if args:
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args}}]}))
    out.append(chunk({}, finish_reason))
    if usage:
        out.append(
            {
                "id": response_id,
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [],
                "usage": usage,
            }
        )
    return out


SCRIPTED = Timing(source="placeholder", note="scripted latency (ScriptedResponse.latency_s)")
"""A scripted model's latency on the virtual clock: the script's constant, not a measurement."""
SCRIPT_MEASURED = Timing(
    source="recorded",
    note="measured on the real clock; a scripted model (its delays are the script's latency_s)",
)
"""A scripted model's latency on the real clock: measured (its delays are the script's, the time is not)."""


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


ScriptStep = ScriptedResponse | str | Callable[[ModelRequest], "ScriptedResponse | str"]


class ScriptedModel:
    """A strict model that plays a script: one step per model call.

    A step is a `ScriptedResponse`, a plain string (a final text answer), or a function of the
    request returning one of those. Calling it more often than scripted raises `ScriptError`;
    `assert_consumed()` raises when steps were left unused.
    """

    origin = "scripted"

    def __init__(self, steps: Sequence[ScriptStep], *, name: str = "scripted") -> None:
        self.name = name
        self.steps = list(steps)
        self.requests: list[ModelRequest] = []

    def _step(self, request: ModelRequest) -> ScriptedResponse:
        if len(self.requests) >= len(self.steps):
            raise ScriptError(
                f"{self.name}: script has {len(self.steps)} step(s) but the model was "
                f"called a {_ordinal(len(self.requests) + 1)} time (round {request.round_index}); "
                "add a step or lower max_rounds"
            )
        self.requests.append(request)
        step = self.steps[len(self.requests) - 1]
        if callable(step) and not isinstance(step, ScriptedResponse):
            step = step(request)
        if isinstance(step, str):
            step = ScriptedResponse(content=step)
        return step

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        step = self._step(request)
        chunks = step.chunks(request.batch)
        loop = asyncio.get_running_loop()
        start = loop.time()
        for offset, payload in zip(step.offsets(len(chunks)), chunks, strict=True):
            delay = start + offset - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            yield payload

    def response_timing(self, request: ModelRequest) -> tuple[Timing, ChunkTiming]:
        """Scripted latencies are constants chosen by the script's author, chunks spread evenly."""
        return SCRIPTED, "spread"

    def assert_consumed(self) -> None:
        """Raise `ScriptError` when scripted steps were never used."""
        left = len(self.steps) - len(self.requests)
        if left:
            raise ScriptError(
                f"{self.name}: {left} scripted step(s) left unused after {len(self.requests)} model call(s)"
            )

    def __repr__(self) -> str:
        return f"ScriptedModel({self.name!r}, {len(self.requests)}/{len(self.steps)} steps used)"

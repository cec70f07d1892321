"""What every format shares: a call being assembled, turning it into a `ToolCall`, stream events."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from toolcall_lab.messages import (
    Finding,
    FindingKind,
    InvalidArguments,
    ParsedArguments,
    ParsedChoice,
    ParsedResponse,
    Severity,
    ToolCall,
    fallback_tool_call_id,
    parse_arguments,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallStarted:
    """A new tool call appeared in the stream."""

    kind: Literal["call_started"] = "call_started"
    chunk_index: int
    choice_index: int
    call_index: int
    tool_call_id: str | None
    name: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgumentsDelta:
    """A piece of a call's argument string arrived."""

    kind: Literal["arguments_delta"] = "arguments_delta"
    chunk_index: int
    choice_index: int
    call_index: int
    delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFinished:
    """A call is complete (emitted when the stream ends, in index order)."""

    kind: Literal["call_finished"] = "call_finished"
    call: ToolCall


StreamEvent = CallStarted | ArgumentsDelta | CallFinished
StreamListener = Callable[[StreamEvent], None]


class StreamAccumulator:
    """What every streaming accumulator keeps: the batch number for fallback ids, the optional event
    listener, findings so far, the chunk counter, and the response's id, model and usage."""

    def __init__(self, *, batch: int = 0, listener: StreamListener | None = None) -> None:
        self.batch = batch
        self.listener = listener
        self.findings: list[Finding] = []
        self.chunk_count = 0
        self.usage: dict[str, Any] | None = None
        self.response_id: str | None = None
        self.model: str | None = None


def single_choice(
    fmt: str,
    *,
    text: list[str],
    reasoning: list[str],
    calls: list[ToolCall],
    finish_reason: str | None,
    findings: list[Finding],
    usage: dict[str, Any] | None,
    response_id: str | None,
    model: str | None,
) -> ParsedResponse:
    """A response with one choice (Anthropic and Responses API answers have exactly one)."""
    choice = ParsedChoice(
        index=0,
        content="".join(text) or None,
        reasoning="".join(reasoning) or None,
        tool_calls=tuple(calls),
        finish_reason=finish_reason,
    )
    return ParsedResponse(
        format=fmt,
        choices=(choice,),
        findings=tuple(findings),
        usage=usage,
        response_id=response_id,
        model=model,
    )


def calls_snapshot(calls: list[PendingCall]) -> dict[int, dict[int, dict[str, Any]]]:
    """Calls assembled so far (choice 0 only), keyed like the chat accumulator's `snapshot`."""
    return {
        0: {c.index: {"id": c.tool_call_id, "name": c.name, "arguments": "".join(c.pieces)} for c in calls}
    }


class PendingCall:
    """A tool call still being assembled from deltas (mutable; internal to accumulators)."""

    __slots__ = (
        "choice_index",
        "first_chunk",
        "index",
        "name",
        "pieces",
        "repeated_header",
        "saw_empty_id",
        "tool_call_id",
    )

    def __init__(self, choice_index: int, index: int, first_chunk: int) -> None:
        self.choice_index = choice_index
        self.index = index
        self.first_chunk = first_chunk
        self.tool_call_id: str | None = None
        self.name: str | None = None
        self.pieces: list[str] = []
        self.saw_empty_id = False
        self.repeated_header = False

    @classmethod
    def announced(
        cls, choice_index: int, index: int, first_chunk: int, tool_call_id: Any, name: Any
    ) -> PendingCall:
        """A call whose id and name arrived together (a header delta, a block start, a whole body)."""
        call = cls(choice_index, index, first_chunk)
        call.tool_call_id = tool_call_id or None
        call.saw_empty_id = tool_call_id == ""
        call.name = name or None
        return call

    def finalize(
        self,
        *,
        batch: int,
        findings: list[Finding],
        finish_reason: str | None = None,
        raw: str | None = None,
    ) -> ToolCall:
        """Build the frozen call, reporting missing ids/names and unusable arguments as findings."""

        def report(kind: FindingKind, message: str, severity: Severity = "warning") -> None:
            findings.append(
                Finding(
                    kind=kind,
                    message=message,
                    severity=severity,
                    chunk_index=self.first_chunk,
                    choice_index=self.choice_index,
                    call_index=self.index,
                    tool_call_id=tool_call_id,
                )
            )

        tool_call_id = self.tool_call_id
        id_source: Literal["provider", "fallback"] = "provider"
        if not tool_call_id:
            tool_call_id = fallback_tool_call_id(batch, self.index, self.choice_index)
            id_source = "fallback"
            what = 'an empty id ("")' if self.saw_empty_id else "no id"
            report(
                "empty_id" if self.saw_empty_id else "missing_id",
                f"call {self.index} came with {what}; using fallback id {tool_call_id}",
                "info",
            )
        name = self.name or ""
        if not name:
            report("missing_name", f"call {tool_call_id} has no function name", "error")
        if self.repeated_header:
            report(
                "repeated_header",
                f"call {tool_call_id}: id/name repeated on continuation deltas (kept once, not concatenated)",
                "info",
            )
        arguments = "".join(self.pieces) if raw is None else raw
        outcome = parse_arguments(arguments)
        complete = True
        if type(outcome) is InvalidArguments:
            complete = False
            cut = outcome.truncated or finish_reason == "length"
            report(
                "incomplete_arguments" if cut else "invalid_arguments",
                f"call {tool_call_id} ({name}): arguments {outcome.reason}; raw string kept, call marked "
                "incomplete and will not be executed",
                "error",
            )
        elif type(outcome) is ParsedArguments and (outcome.double_encoded or outcome.empty):
            if outcome.double_encoded:
                report(
                    "double_encoded_arguments",
                    f"call {tool_call_id} ({name}): arguments are a JSON string holding JSON; decoded again",
                )
            else:
                report(
                    "empty_arguments",
                    f"call {tool_call_id} ({name}): empty argument string, read as {{}}",
                    "info",
                )
        return ToolCall(
            tool_call_id=tool_call_id,
            name=name,
            arguments=arguments,
            index=self.index,
            choice_index=self.choice_index,
            id_source=id_source,
            complete=complete,
            _outcome=outcome,
        )


def compact_json(value: Any) -> str:
    """Serialise an argument object the way it is shown for object-valued inputs (no spaces)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

"""Frozen value types for what a model said: tool calls, their arguments, findings and responses.

A tool call keeps the argument string exactly as the model sent it; `ToolCall.parse_arguments()` reads
it lazily and totally (a dict or an `InvalidArguments` that says why, never an exception, never a repair).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

IdSource = Literal["provider", "fallback"]
Severity = Literal["info", "warning", "error"]
FindingKind = Literal[
    "malformed_chunk",
    "missing_index",
    "sparse_index",
    "duplicate_index_in_chunk",
    "duplicate_tool_call_id",
    "missing_id",
    "empty_id",
    "id_changed",
    "repeated_header",
    "name_changed",
    "missing_name",
    "double_encoded_arguments",
    "empty_arguments",
    "incomplete_arguments",
    "invalid_arguments",
    "no_finish_reason",
    "length_finish",
    "orphan_delta",
    "unexpected_event",
    "changed_after_start",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedArguments:
    """Arguments that read as a JSON object."""

    kind: Literal["ok"] = "ok"
    value: dict[str, Any]
    double_encoded: bool = False
    """The wire string was a JSON *string* holding the object; it was decoded once more."""
    empty: bool = False
    """The wire string was empty; read as ``{}`` (tools without parameters)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidArguments:
    """Arguments that do not read as a JSON object, and why."""

    kind: Literal["invalid"] = "invalid"
    reason: str
    truncated: bool = False
    """The string ends where the JSON still expected more: a cut-off stream, not a malformed one."""


ArgumentsOutcome = ParsedArguments | InvalidArguments


_fast_loads: Any
try:  # orjson reads valid JSON 3-5x faster; anything it refuses is re-read by json for the diagnosis
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - the optional extra is absent
    _fast_loads = json.loads


def parse_arguments(raw: str) -> ArgumentsOutcome:
    """Read a tool call's argument string. Total: every input gives an outcome, none raises."""
    if not raw or raw.isspace():
        return ParsedArguments(value={}, empty=True)
    try:
        value = _fast_loads(raw)
        if type(value) is dict:
            return ParsedArguments(value=value)
    except Exception:  # orjson is stricter (NaN, huge integers); json below decides
        pass
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(raw.rstrip()) or exc.msg.startswith("Unterminated string")
        what = "cut off (incomplete JSON)" if truncated else "not valid JSON"
        return InvalidArguments(reason=f"{what}: {exc.msg} at char {exc.pos}", truncated=truncated)
    except RecursionError:
        return InvalidArguments(reason="not valid JSON: nested too deeply")
    double = False
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return InvalidArguments(reason="a JSON string, not a JSON object")
        if not isinstance(inner, dict):
            return InvalidArguments(reason="a JSON string, not a JSON object")
        value, double = inner, True
    if not isinstance(value, dict):
        return InvalidArguments(reason=f"must be a JSON object, got {type(value).__name__}")
    return ParsedArguments(value=value, double_encoded=double)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call as the model made it.

    `arguments` is the raw string exactly as received (concatenated deltas, or an Anthropic `input`
    object serialised compactly). `complete` is False when the stream ended before the arguments
    formed valid JSON; such calls are reported and never executed.
    """

    tool_call_id: str
    name: str
    arguments: str
    index: int = 0
    choice_index: int = 0
    id_source: IdSource = "provider"
    complete: bool = True
    _outcome: ArgumentsOutcome | None = field(default=None, compare=False, repr=False)

    def parse_arguments(self) -> ArgumentsOutcome:
        """The arguments as a dict, or why they are unusable (cached after the first call)."""
        outcome = self._outcome
        if outcome is None:
            outcome = parse_arguments(self.arguments)
            object.__setattr__(self, "_outcome", outcome)
        return outcome

    @property
    def args(self) -> dict[str, Any] | None:
        """The parsed arguments, or None when they are invalid."""
        outcome = self.parse_arguments()
        return outcome.value if isinstance(outcome, ParsedArguments) else None

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat `tool_calls` entry for this call (arguments byte-exact)."""
        return {
            "id": self.tool_call_id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """A diagnostic about odd or broken wire data, with where it was seen."""

    kind: FindingKind
    message: str
    severity: Severity = "warning"
    chunk_index: int | None = None
    choice_index: int | None = None
    call_index: int | None = None
    tool_call_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "severity": self.severity,
            "chunk_index": self.chunk_index,
            "choice_index": self.choice_index,
            "call_index": self.call_index,
            "tool_call_id": self.tool_call_id,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedChoice:
    """One choice of a model response: text, reasoning, tool calls and why it stopped."""

    index: int = 0
    content: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None

    def to_message(self) -> dict[str, Any]:
        """The assistant message in OpenAI chat format, as it goes back into the conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return message


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedResponse:
    """A whole model response after parsing, whatever wire format it came in."""

    format: str
    choices: tuple[ParsedChoice, ...] = ()
    findings: tuple[Finding, ...] = ()
    usage: dict[str, Any] | None = None
    response_id: str | None = None
    model: str | None = None

    @property
    def first(self) -> ParsedChoice:
        """Choice 0 (an empty choice when the response had none)."""
        return self.choices[0] if self.choices else ParsedChoice()

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls of choice 0, in index order."""
        return self.first.tool_calls

    def to_dict(self) -> dict[str, Any]:
        """The `toolcall-lab parse` output shape."""
        return {
            "format": self.format,
            "model": self.model,
            "choices": [
                {
                    "index": c.index,
                    "content": c.content,
                    "reasoning": c.reasoning,
                    "finish_reason": c.finish_reason,
                    "tool_calls": [
                        {
                            "id": t.tool_call_id,
                            "name": t.name,
                            "arguments": t.arguments,
                            "index": t.index,
                            "id_source": t.id_source,
                            "complete": t.complete,
                        }
                        for t in c.tool_calls
                    ],
                }
                for c in self.choices
            ],
            "findings": [f.to_dict() for f in self.findings],
        }


def fallback_tool_call_id(batch: int, index: int, choice_index: int = 0) -> str:
    """The id given to a call the provider sent without one: ``call_{batch}_{index}``.

    `batch` counts the model calls of one run from 0, so ids are reproducible and unique per run.
    Calls of choices other than 0 get a ``_c{choice}`` suffix to stay unique.
    """
    base = f"call_{batch}_{index}"
    return base if choice_index == 0 else f"{base}_c{choice_index}"

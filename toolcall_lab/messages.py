"""Frozen value types for what a model said: tool calls, their arguments, findings and responses.

A tool call keeps the argument string exactly as the model sent it; `ToolCall.parse_arguments()` reads
it lazily and totally (a dict or an `InvalidArguments` that says why, never an exception, never a repair).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from toolcall_lab.finding_kinds import Severity

IdSource = Literal["provider", "fallback"]
CallKind = Literal["function", "custom", "builtin"]
FindingKind = Literal[
    "sse_nonstandard_line",
    "sse_unknown_field",
    "sse_ignored_data",
    "sse_raw_json",
    "sse_stray_text",
    "sse_unterminated_event",
    "invalid_utf8",
    "unreadable_data",
    "data_after_done",
    "data_after_error",
    "new_stream_without_done",
    "malformed_chunk",
    "wrong_type",
    "content_parts",
    "event_before_start",
    "chunk_as_body",
    "extra_choices",
    "unknown_event",
    "unknown_block",
    "content_in_start",
    "mixed_formats",
    "provider_error",
    "unexpected_event",
    "missing_index",
    "sparse_index",
    "duplicate_index_in_chunk",
    "duplicate_tool_call_id",
    "index_reused",
    "id_changed",
    "repeated_header",
    "split_name",
    "split_call",
    "duplicate_legacy_call",
    "conflicting_legacy_call",
    "name_changed",
    "late_name",
    "unknown_call_type",
    "flat_tool_call",
    "legacy_function_call",
    "arguments_not_string",
    "missing_id",
    "empty_id",
    "missing_name",
    "double_encoded_arguments",
    "empty_arguments",
    "incomplete_arguments",
    "invalid_arguments",
    "duplicate_keys",
    "unfinished_call",
    "split_surrogate_pair",
    "lone_surrogate",
    "custom_tool_call",
    "builtin_tool_call",
    "server_tool_call",
    "no_finish_reason",
    "finish_without_calls",
    "length_finish",
    "filtered_finish",
    "abnormal_finish",
    "refusal",
    "incomplete_response",
    "orphan_delta",
    "recovered_delta",
    "call_held_back",
    "late_delta",
    "unannounced_item",
    "arguments_mismatch",
    "text_mismatch",
    "not_in_completed",
    "recovered_from_completed",
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
    duplicate_key: str | None = None
    """A key one object of the JSON holds twice (``{"dest": "a", "dest": "b"}``): which value the model
    meant is unknown (JSON readers keep the last), so the arguments are not used."""


ArgumentsOutcome = ParsedArguments | InvalidArguments


class _NotJSONNumber(ValueError):
    """``NaN``, ``Infinity`` or a number beyond a double (``1e999``): Python's reader accepts them,
    JSON does not, and a tool would receive nan or inf."""


def _constant(name: str) -> Any:
    raise _NotJSONNumber(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise _NotJSONNumber(f"{text[:40]} is beyond what a JSON number can hold (read as infinity)")
    return value


def _strict_loads(raw: str | bytes) -> Any:
    """`json.loads` refusing what JSON refuses (NaN, Infinity, numbers that overflow to infinity)."""
    return json.loads(raw, parse_constant=_constant, parse_float=_finite)


_fast_loads: Any
try:  # orjson reads valid JSON 3-5x faster; anything it refuses is re-read by json for the diagnosis
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - the optional extra is absent
    _fast_loads = _strict_loads


def parse_arguments(raw: str) -> ArgumentsOutcome:
    """Read a tool call's argument string. Total: every input gives an outcome, none raises."""
    if not raw or raw.isspace():
        return ParsedArguments(value={}, empty=True)
    try:
        value = _fast_loads(raw)
        if type(value) is dict:
            if raw.count(":") == len(value):  # (`unique_keys`'s first test, inlined)
                return ParsedArguments(value=value)
            return _checked(raw, value, False)
    except Exception:  # orjson is stricter (NaN, huge integers); json below decides
        pass
    try:
        value = _strict_loads(raw)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(raw.rstrip()) or exc.msg.startswith("Unterminated string")
        what = "cut off (incomplete JSON)" if truncated else "not valid JSON"
        return InvalidArguments(reason=f"{what}: {exc.msg} at char {exc.pos}", truncated=truncated)
    except _NotJSONNumber as exc:
        return InvalidArguments(reason=f"not valid JSON: {exc}")
    except RecursionError:
        return InvalidArguments(reason="not valid JSON: nested too deeply")
    double = False
    text = raw
    if isinstance(value, str):
        try:
            inner = _strict_loads(value)
        except (ValueError, RecursionError):
            return InvalidArguments(reason="a JSON string, not a JSON object")
        if not isinstance(inner, dict):
            return InvalidArguments(reason="a JSON string, not a JSON object")
        text, value, double = value, inner, True
    if not isinstance(value, dict):
        return InvalidArguments(reason=f"must be a JSON object, got {type(value).__name__}")
    return _checked(text, value, double)


def _checked(raw: str, value: dict[str, Any], double: bool) -> ArgumentsOutcome:
    """`value` (read from `raw`) as arguments, unless an object of `raw` holds a key twice."""
    if not unique_keys(raw, value):
        twice = first_duplicate(raw)
        if twice is not None:
            key, first, last = twice
            return InvalidArguments(
                reason=f"the key {key!r} appears twice in one object (first {first}, then {last}); which "
                "value the model meant is unknown",
                duplicate_key=key,
            )
    return ParsedArguments(value=value, double_encoded=double)


def unique_keys(raw: str, value: Any) -> bool:
    """True when no object of the JSON text `raw` (read as `value`) can hold a key twice; False when
    one may (then `first_duplicate` decides). Costs one ``str.count`` for the usual flat object.

    Every key-value pair has one colon outside strings. When the colons of `raw` number no more than
    the keys `value` kept plus the colons inside its strings, no pair was dropped, so no key was
    repeated (a ``\\u`` escape could hide a colon, so such a text is checked in full)."""
    colons = raw.count(":")
    if type(value) is dict and colons == len(value):
        return True
    if "\\u" in raw:
        return False
    try:
        return colons == _pairs_and_colons(value)
    except RecursionError:  # nested too deeply to count: the full check decides
        return False


def _pairs_and_colons(value: Any) -> int:
    """The keys of every object in `value` plus the colons inside its strings (keys and values)."""
    kind = type(value)
    if kind is str:
        return value.count(":")  # type: ignore[no-any-return]
    if kind is dict:
        total = len(value)
        for key, item in value.items():
            total += key.count(":") + (_pairs_and_colons(item) if type(item) in (str, dict, list) else 0)
        return total
    if kind is list:
        return sum(_pairs_and_colons(item) for item in value if type(item) in (str, dict, list))
    return 0


def first_duplicate(raw: str) -> tuple[str, str, str] | None:
    """The first key an object of the JSON text `raw` holds twice, with its first and last values
    (compact JSON, shortened); None when there is none. Reads the whole text again (slow path)."""
    found: list[tuple[str, str, str]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in items:
            if key in out and not found:
                found.append((key, _shown(out[key]), _shown(item)))
            out[key] = item
        return out

    try:
        json.loads(raw, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    return found[0] if found else None


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= 40 else text[:39] + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call as the model made it, for the client to execute.

    `arguments` is the raw string exactly as received (concatenated deltas, or an Anthropic `input`
    object serialised compactly). `complete` is False when the stream ended before the arguments
    formed valid JSON, or ended in a provider error; such calls are reported and never executed.
    `kind` is ``"custom"`` for Responses custom tools, whose input is free-form text, not JSON, and
    ``"builtin"`` for the Responses built-in tools a client runs (``computer``, ``local_shell``...),
    whose arguments are the item's action as JSON.
    """

    tool_call_id: str
    name: str
    arguments: str
    index: int = 0
    choice_index: int = 0
    id_source: IdSource = "provider"
    complete: bool = True
    kind: CallKind = "function"
    _outcome: ArgumentsOutcome | dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """The parsed arguments, once known (a plain dict: the parser's shortcut for a valid object)."""

    def parse_arguments(self) -> ArgumentsOutcome:
        """The arguments as a dict, or why they are unusable (cached after the first call)."""
        outcome = self._outcome
        if type(outcome) is dict:
            outcome = new_parsed(outcome)
            object.__setattr__(self, "_outcome", outcome)
        elif outcome is None:
            if self.kind == "custom":
                outcome = InvalidArguments(reason="free-form input of a custom tool, not JSON")
            else:
                outcome = parse_arguments(self.arguments)
            object.__setattr__(self, "_outcome", outcome)
        return outcome  # type: ignore[return-value]

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
class ServerToolCall:
    """A tool the provider ran on its own servers (Anthropic ``server_tool_use``, Responses
    ``web_search_call`` ...): recorded model behaviour, never handed to the client loop."""

    tool_call_id: str
    name: str
    arguments: str
    result_type: str | None = None
    """The type of the result block or item (``web_search_tool_result``), None if none was seen."""
    result_error: str | None = None
    """The error code of an error result (``max_uses_exceeded``), else None."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.tool_call_id,
            "name": self.name,
            "arguments": self.arguments,
            "result_type": self.result_type,
            "result_error": self.result_error,
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
    server_tool_calls: tuple[ServerToolCall, ...] = ()
    """Tools the provider ran itself; reported, never executed by the client."""

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
    error: str | None = None
    """Why the response ended in an error, else None: the provider's own message (a provider error),
    or ``"unreadable data: ..."`` when the recording broke off. Its calls are marked incomplete."""

    @property
    def first(self) -> ParsedChoice:
        """Choice 0 (an empty choice when the response had none)."""
        return self.choices[0] if self.choices else ParsedChoice()

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls of choice 0, in index order."""
        return self.first.tool_calls

    @property
    def server_tool_calls(self) -> tuple[ServerToolCall, ...]:
        """The server-side tool calls of choice 0."""
        return self.first.server_tool_calls

    def to_dict(self) -> dict[str, Any]:
        """The `toolcall-lab parse` output shape."""
        return {
            "format": self.format,
            "model": self.model,
            "error": self.error,
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
                            "kind": t.kind,
                        }
                        for t in c.tool_calls
                    ],
                    "server_tool_calls": [s.to_dict() for s in c.server_tool_calls],
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


# -- fast constructors for the parser's hot path --------------------------------------------------
# A frozen dataclass's generated __init__ sets each field through object.__setattr__, which costs
# ~1 µs for a ToolCall: as much as parsing a small stream. The parser builds the same values through
# a mutable twin class with the very same slots, then switches the instance's class (CPython allows
# it between classes of identical layout). The result is an ordinary, equal, immutable instance;
# every field is set (tests check the twins against the dataclass fields). Only the parsers use these.


def _twin(cls: type) -> type:
    return type(f"_{cls.__name__}Builder", (), {"__slots__": cls.__slots__})  # type: ignore[attr-defined]


_new = object.__new__
_ToolCallTwin = _twin(ToolCall)
_ChoiceTwin = _twin(ParsedChoice)
_ResponseTwin = _twin(ParsedResponse)
_ArgumentsTwin = _twin(ParsedArguments)


def new_tool_call(
    tool_call_id: str,
    name: str,
    arguments: str,
    index: int,
    choice_index: int,
    id_source: IdSource,
    complete: bool,
    kind: CallKind,
    outcome: ArgumentsOutcome | dict[str, Any] | None,
    _twin: Any = _ToolCallTwin,
    _cls: type = ToolCall,
) -> ToolCall:
    """`ToolCall(...)` with every field given, positionally."""
    call = _new(_twin)
    call.tool_call_id = tool_call_id
    call.name = name
    call.arguments = arguments
    call.index = index
    call.choice_index = choice_index
    call.id_source = id_source
    call.complete = complete
    call.kind = kind
    call._outcome = outcome
    call.__class__ = _cls
    return call  # type: ignore[no-any-return]


def new_choice(
    index: int,
    content: str | None,
    reasoning: str | None,
    tool_calls: tuple[ToolCall, ...],
    finish_reason: str | None,
    server_tool_calls: tuple[ServerToolCall, ...] = (),
    _twin: Any = _ChoiceTwin,
    _cls: type = ParsedChoice,
) -> ParsedChoice:
    """`ParsedChoice(...)` with every field given, positionally."""
    choice = _new(_twin)
    choice.index = index
    choice.content = content
    choice.reasoning = reasoning
    choice.tool_calls = tool_calls
    choice.finish_reason = finish_reason
    choice.server_tool_calls = server_tool_calls
    choice.__class__ = _cls
    return choice  # type: ignore[no-any-return]


def new_response(
    fmt: str,
    choices: tuple[ParsedChoice, ...],
    findings: tuple[Finding, ...],
    usage: dict[str, Any] | None,
    response_id: str | None,
    model: str | None,
    error: str | None = None,
    _twin: Any = _ResponseTwin,
    _cls: type = ParsedResponse,
) -> ParsedResponse:
    """`ParsedResponse(...)` with every field given, positionally."""
    response = _new(_twin)
    response.format = fmt
    response.choices = choices
    response.findings = findings
    response.usage = usage
    response.response_id = response_id
    response.model = model
    response.error = error
    response.__class__ = _cls
    return response  # type: ignore[no-any-return]


def new_parsed(
    value: dict[str, Any], _twin: Any = _ArgumentsTwin, _cls: type = ParsedArguments
) -> ParsedArguments:
    """`ParsedArguments(value=value)`: a plain object, neither double-encoded nor empty."""
    parsed = _new(_twin)
    parsed.kind = "ok"
    parsed.value = value
    parsed.double_encoded = False
    parsed.empty = False
    parsed.__class__ = _cls
    return parsed  # type: ignore[no-any-return]

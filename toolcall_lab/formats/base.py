"""What every format shares: a call being assembled, turning it into a `ToolCall`, stream events,
findings with the registry's severity, and ending a stream (normally, in a provider error, or after
unreadable data)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, NoReturn

from toolcall_lab.exceptions import ProviderStreamError, UsageError
from toolcall_lab.formats._findings import FINDINGS_PER_KIND as FINDINGS_PER_KIND
from toolcall_lab.formats._findings import FindingLimit as FindingLimit
from toolcall_lab.formats._findings import capped as capped
from toolcall_lab.formats._findings import finding as finding
from toolcall_lab.formats._values import STARTS, a_json_type, as_text, may_hold_calls
from toolcall_lab.formats._values import compact_json as compact_json
from toolcall_lab.formats._values import fix_surrogates as fix_surrogates
from toolcall_lab.formats._values import join_text as join_text
from toolcall_lab.formats.errors import rejected_output
from toolcall_lab.messages import (
    CallKind,
    Finding,
    FindingKind,
    InvalidArguments,
    ParsedArguments,
    ParsedChoice,
    ParsedResponse,
    ServerToolCall,
    ToolCall,
    _fast_loads,
    _ToolCallTwin,
    fallback_tool_call_id,
    new_choice,
    new_response,
    new_tool_call,
    parse_arguments,
    unique_keys,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallStarted:
    """A new tool call appeared in the stream: emitted once per call, before its first
    `ArgumentsDelta`, with the id and name known at that point (None when the first delta carried
    none). An id or a name that arrives or changes later (a name split across deltas, a late id, a
    fallback id) is not announced again: `CallFinished.call` carries the final values."""

    kind: Literal["call_started"] = "call_started"
    chunk_index: int
    choice_index: int
    call_index: int
    tool_call_id: str | None
    name: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgumentsDelta:
    """A piece of a call's argument string arrived. In a chat stream the deltas of a call joined are
    its final `arguments` (unless a finding says a surrogate pair was joined); Anthropic and Responses
    streams may replace them by a final form (``input`` of the block start, ``.done``), with a
    finding when they differ."""

    kind: Literal["arguments_delta"] = "arguments_delta"
    chunk_index: int
    choice_index: int
    call_index: int
    delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFinished:
    """A call is final (emitted once per call when the stream ends, also in a provider error, in
    index order); ``call.complete`` says whether it may be executed."""

    kind: Literal["call_finished"] = "call_finished"
    call: ToolCall


StreamEvent = CallStarted | ArgumentsDelta | CallFinished
StreamListener = Callable[[StreamEvent], None]


class StreamAccumulator:
    """What every streaming accumulator keeps: the batch number for fallback ids, the optional event
    listener, findings so far, the chunk counter, and the response's id, model and usage.

    Subclasses build their result in `_result(error)`; `finish()` is `_result(None)` (or the
    `damaged` reason when a reader marked the stream as holding unreadable data), and a provider
    error ends the stream through `fail()`, which raises with the partial result attached. Once
    finished or failed, the accumulator is closed: `finish()` returns the same response again and
    `feed()` raises `UsageError` (it costs nothing per chunk: the instance changes class).
    """

    __slots__ = (
        "_final",
        "_limit",
        "batch",
        "chunk_count",
        "damaged",
        "findings",
        "foreign",
        "listener",
        "model",
        "response_id",
        "usage",
    )

    opened = True
    """The response has begun (Anthropic: ``message_start`` or its end was seen), so a payload that
    starts a response starts the next one. Anthropic pings, or content events, before
    ``message_start`` do not begin it: the ``message_start`` after them is the same message's."""

    def __init__(self, *, batch: int = 0, listener: StreamListener | None = None) -> None:
        self.batch = batch
        self.listener = listener
        self.findings: list[Finding] = []
        self.chunk_count = 0
        self.usage: dict[str, Any] | None = None
        self.response_id: str | None = None
        self.model: str | None = None
        self.damaged: str | None = None
        self.foreign: str | None = None  # an event of this wire format starts the next response
        self._final: ParsedResponse | None = None
        self._limit: FindingLimit | None = None

    def note(self, kind: FindingKind, message: str, **where: Any) -> None:
        """The findings collector of a stream: every finding of the accumulator goes through here,
        and past `FINDINGS_PER_KIND` of one kind they are only counted (`capped` adds the summary)."""
        limit = self._limit
        if limit is None:
            if len(self.findings) < FINDINGS_PER_KIND:  # no kind can be over the cap yet
                self.findings.append(finding(kind, message, **where))
                return
            limit = self._limit = FindingLimit()
            for note in self.findings:
                limit.counts[note.kind] = limit.counts.get(note.kind, 0) + 1
        seen = limit.counts.get(kind, 0) + 1
        limit.counts[kind] = seen
        if seen <= FINDINGS_PER_KIND:
            self.findings.append(finding(kind, message, **where))

    def _event_mapping(self, event: Any, n: int) -> Mapping[str, Any] | None:
        """Event `n`, not a dict, as a mapping (an SDK model is dumped); None, after a
        ``malformed_chunk`` finding, when it is no object at all."""
        dump = getattr(event, "model_dump", None)
        event = dump(mode="json") if dump is not None else event
        if isinstance(event, Mapping):
            return event
        self.note(
            "malformed_chunk",
            f"chunk {n}: event is {type(event).__name__}, expected an object; skipped",
            chunk_index=n,
        )
        return None

    def _part(
        self, event: Mapping[str, Any], key: str, n: int, *, required: bool = False
    ) -> Mapping[str, Any]:
        """``event[key]`` when it is an object; else {}, reported when of another type (and when absent
        or null, if the event's format `required` it)."""
        part = event.get(key)
        if isinstance(part, Mapping):
            return part
        if part is not None or required:
            what = "missing" if key not in event else f"{a_json_type(part)}, not an object"
            self.note(
                "malformed_chunk",
                f"chunk {n}: the {str(event.get('type'))[:40]} event's `{key}` is {what}; skipped",
                chunk_index=n,
            )
        return {}

    def feed(self, payload: Any) -> None:
        """Take one payload of the stream."""
        raise NotImplementedError

    own_format = "unknown"
    """This reader's wire format, as `wire_format_of` names it."""

    def _foreign_event(self, event: Mapping[str, Any], n: int, fmt: str, ended: bool) -> bool:
        """An event of another wire format (`fmt`) in this stream (``mixed_formats``). After this
        response `ended`, or when it starts a response of its own (``message_start``,
        ``response.created``), the file holds recordings of several formats: `foreign` asks the
        recording reader to read it as the next response (True). Anywhere else it is skipped,
        quoted, and when it may hold call data every call of this response is held back (False)."""
        kind = event.get("type")
        what = _WHAT[fmt] + (f" ({str(kind)[:40]!r})" if kind is not None else "")
        what = f"{what}, not {_WHAT[self.own_format]},"
        if ended or kind in STARTS:
            self.foreign = fmt
            when = "after this response ended" if ended else "starting a response"
            self.note(
                "mixed_formats",
                f"chunk {n}: {what} {when}: the stream holds recordings of another wire format; "
                "read_recording / iter_responses read it as the next response, in its own format",
                chunk_index=n,
            )
            return True
        holds = may_hold_calls(event)
        self.note(
            "mixed_formats",
            f"chunk {n}: {what} inside this response; skipped ({as_text(event)[:300]})"
            + ("; it may hold tool call data, so every call of this response is held back" if holds else ""),
            chunk_index=n,
        )
        if holds:
            self._hold_all(
                f"chunk {n} was {what} holding tool call data inside this response: which call it "
                "belongs to, or whether it is a call of its own, is unknown"
            )
        return False

    def _hold_all(self, reason: str) -> None:
        """Hold back every client call of this response (`reason`: what could not be read)."""
        raise NotImplementedError

    def _result(self, error: str | None) -> ParsedResponse:
        raise NotImplementedError

    def pending_calls(self) -> list[PendingCall]:
        """The calls being assembled (for memory compaction by the recording reader)."""
        return []

    def text_pieces(self) -> list[list[Any]]:
        """The lists of text pieces being gathered (for memory compaction by the recording reader)."""
        return []

    def finish(self) -> ParsedResponse:
        """End of stream: finalise every call (fallback ids, argument checks) and return the response."""
        response = self._result(self.damaged)
        self._final = response  # closed (`_close`, inlined: once per response)
        self.__class__ = _CLOSED.get(type(self)) or _closed_class(type(self))
        return response

    def damage(self, reason: str) -> None:
        """A reader could not read part of this stream (`reason` says where and why): the response
        will end with that error and its calls incomplete, whatever follows."""
        if self.damaged is None:
            self.damaged = reason

    def _close(self, response: ParsedResponse) -> None:
        self._final = response
        self.__class__ = _closed_class(type(self))

    def fail(self, message: str, payload: dict[str, Any], chunk_index: int | None) -> NoReturn:
        """The provider reported an error: raise `ProviderStreamError` quoting it, with the response so
        far (every call in progress marked incomplete, a ``provider_error`` finding naming them) as
        ``partial_responses``."""
        partial = self._result(message)
        calls = [c for choice in partial.choices for c in choice.tool_calls]
        note = provider_error_note(message, payload, calls, chunk_index)
        partial = replace(partial, findings=(*partial.findings, note))
        self._close(partial)
        exc = ProviderStreamError(message, payload=payload, line_number=None, chunk_index=chunk_index)
        exc.partial_responses = (partial,)
        raise exc


_WHAT = {
    "openai-chat": "a chat-completion chunk",
    "anthropic": "an Anthropic event",
    "openai-responses": "a Responses API event",
    "unknown": "an event of this stream's format",
}


def _feed_closed(self: StreamAccumulator, payload: Any) -> None:
    raise UsageError(
        f"{type(self).__mro__[1].__name__}.feed() after the stream was finished (or failed): it already "
        "built its response; use a new accumulator for the next response"
    )


def _finish_closed(self: StreamAccumulator) -> ParsedResponse:
    assert self._final is not None
    return self._final


_CLOSED: dict[type, type] = {}


def _closed_class(cls: type) -> type:
    """The closed twin of an accumulator class (same layout, so an instance can switch to it)."""
    closed = _CLOSED.get(cls)
    if closed is None:
        closed = _CLOSED[cls] = type(
            cls.__name__,
            (cls,),
            {"__slots__": (), "feed": _feed_closed, "finish": _finish_closed, "__module__": cls.__module__},
        )
        _CLOSED[closed] = closed
    return closed


REPLACED = "\ufffd"


def hold_replaced(response: ParsedResponse, where: str) -> ParsedResponse:
    """`response`, read from bytes of which some were not UTF-8 and were replaced by U+FFFD (`where`
    says where), with every complete call whose arguments hold a U+FFFD held back: they may not be
    what the model sent. The findings name each call (``call_held_back``)."""
    findings = list(response.findings)
    choices = []
    for choice in response.choices:
        calls = []
        for call in choice.tool_calls:
            if call.complete and REPLACED in call.arguments:
                findings.append(
                    finding(
                        "call_held_back",
                        f"call {call.tool_call_id} ({call.name}): its arguments hold U+FFFD, and bytes of "
                        f"this response that were not UTF-8 were replaced by it ({where}): they may not be "
                        "what the model sent; call marked incomplete and will not be executed",
                        choice_index=call.choice_index,
                        call_index=call.index,
                        tool_call_id=call.tool_call_id,
                    )
                )
                call = replace(call, complete=False)
            calls.append(call)
        choices.append(replace(choice, tool_calls=tuple(calls)))
    if len(findings) == len(response.findings):
        return response
    return replace(response, choices=tuple(choices), findings=tuple(findings))


def failure_clause(error: str) -> str:
    """Why the calls of a response that ended in `error` are never complete, as a clause for the
    finding that names each (`PendingCall.finalize`)."""
    if error.startswith("unreadable data"):
        return "the response holds unreadable data"
    return "the response ended in a provider error"


_CALL_FINISHES = frozenset({"tool_calls", "function_call", "tool_use"})


def promised_calls(
    field: str, reason: str | None, findings: list[Finding], where: str = "", choice_index: int | None = None
) -> None:
    """The ``finish_without_calls`` finding of a choice whose finish / stop reason says it made tool
    calls (``tool_calls``, ``tool_use``) when none was read: they were lost on the way."""
    if reason in _CALL_FINISHES:
        findings.append(
            finding(
                "finish_without_calls",
                f"{where}{field} {reason!r} but no tool call was read",
                choice_index=choice_index,
            )
        )


def repeated_provider_ids(calls: Iterable[ToolCall], findings: list[Finding]) -> None:
    """A ``duplicate_tool_call_id`` finding per provider id that more than one call of a choice
    carries: results matched by id would be crossed (fallback ids are made unique already)."""
    where: dict[str, list[int]] = {}
    for call in calls:
        if call.id_source == "provider":
            where.setdefault(call.tool_call_id, []).append(call.index)
    for tool_call_id, indices in where.items():
        if len(indices) > 1:
            findings.append(
                finding(
                    "duplicate_tool_call_id",
                    f"the calls at indices {indices} share the provider id {tool_call_id!r}: tool results "
                    "matched by id would be crossed; each call kept (answer them by position)",
                    tool_call_id=tool_call_id,
                    call_index=indices[1],
                )
            )


def _ids_shared_with_server(
    calls: Iterable[ToolCall], server_calls: Iterable[ServerToolCall], findings: list[Finding]
) -> None:
    """A ``duplicate_tool_call_id`` finding per provider id that a client call shares with a
    server-side call (``server_tool_use`` and ``tool_use`` with one id): a result matched by id would
    answer the wrong one."""
    server = {s.tool_call_id for s in server_calls if s.tool_call_id}
    for call in calls:
        if call.id_source == "provider" and call.tool_call_id in server:
            findings.append(
                finding(
                    "duplicate_tool_call_id",
                    f"call {call.tool_call_id!r} ({call.name}) at index {call.index} shares its provider id "
                    "with a server-side tool call of this response: results matched by id would be "
                    "crossed; both kept (answer the client call by position)",
                    tool_call_id=call.tool_call_id,
                    call_index=call.index,
                )
            )


def usage_problem(usage: Any, where: str = "") -> str | None:
    """What is wrong with a response's ``usage`` that is there but not an object (a number, a string, a
    list): the message of its ``wrong_type`` finding (it is not kept); None when it is absent, null or
    an object. `where` prefixes the message (``"chunk 3: "``)."""
    if usage is None or isinstance(usage, Mapping):
        return None
    return f"{where}usage {compact_json(usage)[:60]} is {a_json_type(usage)}, not an object; not kept"


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
    server_calls: tuple[ServerToolCall, ...] = (),
    error: str | None = None,
) -> ParsedResponse:
    """A response with one choice (Anthropic and Responses API answers have exactly one)."""
    if len(calls) > 1:
        repeated_provider_ids(calls, findings)
    elif not calls and error is None:
        promised_calls("stop_reason", finish_reason, findings)
    if calls and server_calls:
        _ids_shared_with_server(calls, server_calls, findings)
    content = join_text(text, findings, "text")
    thought = join_text(reasoning, findings, "reasoning")
    choice = new_choice(0, content, thought, tuple(calls), finish_reason, server_calls)
    return new_response(fmt, (choice,), tuple(findings), usage, response_id, model, error)


def error_only(fmt: str, kind: FindingKind, note: str, error: str) -> ParsedResponse:
    """A response that holds nothing but an error and the finding that says why."""
    return single_choice(
        fmt,
        text=[],
        reasoning=[],
        calls=[],
        finish_reason=None,
        findings=[finding(kind, note)],
        usage=None,
        response_id=None,
        model=None,
        error=error,
    )


def error_response(message: str, fmt: str = "unknown", payload: Any = None) -> ParsedResponse:
    """A response that is nothing but a provider error (an error body, or an error before any data);
    `payload`: the provider's error payload (what it rejected is quoted, see `provider_error_note`)."""
    note = provider_error_note(message, payload, (), None, instead=True)
    return error_only(fmt, "provider_error", note.message, message)


def provider_error_note(
    message: str,
    payload: Any,
    calls: Iterable[ToolCall],
    chunk_index: int | None,
    *,
    instead: bool = False,
) -> Finding:
    """The ``provider_error`` finding: the provider's message, where it came, which calls it left
    incomplete, and the model output the provider rejected (Groq's ``failed_generation``), if any."""
    if chunk_index is not None:
        text = f"provider error at chunk {chunk_index}: {message}"
    else:
        text = f"provider error instead of a response: {message}" if instead else f"provider error: {message}"
    marked = [c.tool_call_id for c in calls if not c.complete]
    if marked:
        shown = ", ".join(marked[:10]) + (f" and {len(marked) - 10} more" if len(marked) > 10 else "")
        text += f"; {len(marked)} call(s) in progress marked incomplete ({shown})"
    rejected = rejected_output(payload)
    if rejected is not None:
        text += (
            f"; the model output it rejected (failed_generation): {json.dumps(rejected, ensure_ascii=False)}"
        )
    return finding("provider_error", text, chunk_index=chunk_index)


def extra_choices_note(choices: list[ParsedChoice]) -> Finding:
    """The ``extra_choices`` finding of a response with several choices: what the choices after the
    first hold, since `ParsedResponse.tool_calls` and the run loop read the first only."""
    others = []
    for c in choices[1:]:
        parts = [f"{len(c.tool_calls)} call(s)"] if c.tool_calls else []
        parts += [what for what, text in (("text", c.content), ("reasoning", c.reasoning)) if text]
        others.append(f"choice {c.index}: {', '.join(parts) or 'nothing'}")
    return finding(
        "extra_choices",
        f"the response has {len(choices)} choices; tool_calls, to_message() and the run loop use choice "
        f"{choices[0].index} only ({'; '.join(others)})",
    )


def calls_snapshot(calls: list[PendingCall]) -> dict[int, dict[int, dict[str, Any]]]:
    """Calls assembled so far (choice 0 only), keyed like the chat accumulator's `snapshot`."""
    return {
        0: {c.index: {"id": c.tool_call_id, "name": c.name, "arguments": "".join(c.pieces)} for c in calls}
    }


_new = object.__new__
_CACHE_BELOW = 1 << 20
"""Arguments this long or longer are not kept parsed on the call (read again when asked), so a
huge argument is held once, as the string the model sent."""


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _decoded_lone(arguments: str, outcome: ParsedArguments) -> bool:
    """Do the decoded arguments hold a lone surrogate (escaped in the JSON text)? Only called when the
    text holds a ``\\u`` escape, so the common call never pays for it."""
    if _ESCAPED_SURROGATE.search(arguments) is None:
        return False
    try:
        json.dumps(outcome.value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class PendingCall:
    """A tool call still being assembled from deltas (mutable; internal to accumulators).

    Rare facts (quirks) are class-level defaults, so building a call sets only what every call has;
    `quirky` tells `finalize` that one of them was set and findings are due.
    """

    # set on every call
    choice_index: int
    index: int
    first_chunk: int
    tool_call_id: str | None
    name: str | None
    pieces: list[str]
    # quirks, rarely set (class defaults)
    quirky = False
    saw_empty_id = False
    repeated_header = False
    name_pieces = 0
    other_ids = 0
    first_other_id: str | None = None
    non_string_args = False
    kind: CallKind = "function"
    done = False
    blocks = 0  # leading entries of `pieces` that are already joined blocks (memory compaction)
    next_name: str | None = None  # a repeated name after complete arguments, waiting for the next delta
    snapshot_of: str | None = None  # the first name a longer snapshot replaced ('get' -> 'get_weather')
    late = False  # a delta came after the block was closed (reported once)
    unknown_type: str | None = (
        None  # why a chat entry is not read (its type, or keys): kept raw, never complete
    )
    flat = False  # a chat entry with name/arguments at the top level, not under `function`
    args_absent: str | None = None  # a whole body's `arguments` / `input` was absent: "`input` missing"
    non_string_at: int | None = None  # the chunk of the first argument piece that was not a string
    held: str | None = None  # why the call is held back (never complete): what could not be read
    started = False  # CallStarted was emitted to the listener
    guessed = False  # a delta without index was read as this call's, among several (reported once)
    finished_by: str | None = None  # what ended the call when the response did not end normally

    def __init__(self, choice_index: int, index: int, first_chunk: int) -> None:
        self.choice_index = choice_index
        self.index = index
        self.first_chunk = first_chunk
        self.tool_call_id = None
        self.name = None
        self.pieces = []

    @classmethod
    def announced(
        cls, choice_index: int, index: int, first_chunk: int, tool_call_id: Any, name: Any
    ) -> PendingCall:
        """A call whose id and name arrived together (a header delta, a block start, a whole body)."""
        call = cls(choice_index, index, first_chunk)
        if tool_call_id:
            call.tool_call_id = str(tool_call_id)
        elif tool_call_id == "":
            call.saw_empty_id = True
        if name:
            call.name = str(name)
        return call

    def add_name(self, piece: str) -> None:
        """A name piece: equal to the name so far = a repeat; starting with it = a snapshot that
        replaces it; anything else = the next piece of a split name (appended)."""
        current = self.name
        if current is None:
            self.name = piece
            self.name_pieces = 1
        elif piece == current:
            self.repeated_header = self.quirky = True
        elif piece.startswith(current):
            if self.snapshot_of is None:
                self.snapshot_of = current
            self.name = piece
            self.quirky = True
        else:
            self.name = current + piece
            self.name_pieces = (self.name_pieces or 1) + 1
            self.quirky = True

    def not_string(self, value: Any, chunk_index: int) -> str:
        """An argument piece that is not a string (an object, a number): its compact JSON, kept, with
        an ``arguments_not_string`` finding at the chunk it first came in."""
        self.came_not_string(chunk_index)
        return compact_json(value)

    def came_not_string(self, chunk_index: int) -> None:
        """Some of the arguments came as JSON, not a string, first at `chunk_index` (reported)."""
        self.non_string_args = self.quirky = True
        if self.non_string_at is None:
            self.non_string_at = chunk_index

    def hold(self, reason: str) -> None:
        """Something meant for this call could not be read (`reason`): it will never be complete."""
        if self.held is None:
            self.held = reason
            self.quirky = True

    def looks_complete(self) -> bool:
        """The arguments so far already form a complete JSON object (a later header is a new call)."""
        pieces = self.pieces
        if not pieces or not pieces[-1].rstrip().endswith("}"):
            return False
        return type(parse_arguments("".join(pieces))) is ParsedArguments

    def finalize(
        self,
        batch: int,
        findings: list[Finding],
        raw: str | None = None,
        failed: str | None = None,
        cut: str | None = None,
        taken: set[str] | None = None,
        json_ends: bool = False,
    ) -> ToolCall:
        """Build the frozen call, reporting missing ids/names and unusable arguments as findings.

        `raw`: the final argument text when it is not the pieces joined. `failed`: why the call can
        never be complete (the stream ended in a provider error, holds unreadable data, was filtered).
        `cut`: why nothing shows the call was finished (the response did not end normally, see
        `_endings`, and the call's own structure does not close it), else None; such a call is
        incomplete, also when its arguments parse, unless `json_ends` (a chat stream with no finish
        reason at all, where arguments that form a JSON object are taken as whole). Either reason is
        a clause of the finding naming the call. `taken`: the provider ids of the whole response,
        which a fallback id must not repeat (None when every call has one).
        """
        tool_call_id = self.tool_call_id
        name = self.name
        if tool_call_id and name and not (self.quirky or failed or cut):  # the common case, kept short
            arguments = "".join(self.pieces) if raw is None else raw
            if arguments.isascii() and arguments and name.isascii() and tool_call_id.isascii():
                try:
                    value = _fast_loads(arguments)
                except Exception:
                    value = None
                # a dict read from text with as many colons as keys holds no key twice; other texts
                # (colons in strings, nested objects) are counted further (`unique_keys`)
                if type(value) is dict and (
                    arguments.count(":") == len(value) or unique_keys(arguments, value)
                ):
                    call: Any = _new(_ToolCallTwin)  # new_tool_call(...), inlined: once per call parsed
                    call.tool_call_id = tool_call_id
                    call.name = name
                    call.arguments = arguments
                    call.index = self.index
                    call.choice_index = self.choice_index
                    call.id_source = "provider"
                    call.complete = True
                    call.kind = "function"
                    call._outcome = value if len(arguments) < _CACHE_BELOW else None
                    call.__class__ = ToolCall
                    return call  # type: ignore[no-any-return]
        return self._finalize(batch, findings, raw, failed, cut, taken, json_ends)

    def _finalize(
        self,
        batch: int,
        findings: list[Finding],
        raw: str | None,
        failed: str | None,
        cut: str | None,
        taken: set[str] | None,
        json_ends: bool,
    ) -> ToolCall:
        tool_call_id = self.tool_call_id
        where = {
            "chunk_index": self.first_chunk,
            "choice_index": self.choice_index,
            "call_index": self.index,
        }
        id_source: Literal["provider", "fallback"] = "provider"
        if not tool_call_id:
            tool_call_id = fallback_tool_call_id(batch, self.index, self.choice_index)
            id_source = "fallback"
            what = 'an empty id ("")' if self.saw_empty_id else "no id"
            clash = ""
            if taken is not None and tool_call_id in taken:
                free = 1
                while f"{tool_call_id}_{free}" in taken:
                    free += 1
                clash = f"fallback id {tool_call_id!r} is another call's id in this response, so "
                tool_call_id = f"{tool_call_id}_{free}"
            if taken is not None:
                taken.add(tool_call_id)
            findings.append(
                finding(
                    "empty_id" if self.saw_empty_id else "missing_id",
                    f"call {self.index} came with {what}; {clash}using fallback id {tool_call_id}",
                    tool_call_id=tool_call_id,
                    **where,
                )
            )
        elif not tool_call_id.isascii():
            tool_call_id = _checked_text(tool_call_id, f"call {tool_call_id!r}: the id", findings, where)
        name = self.name or ""
        if name and not name.isascii():
            name = _checked_text(name, f"call {tool_call_id}: the name", findings, where)
        named = False  # a finding already says why this call is never complete
        if self.quirky:
            self._quirks(tool_call_id, name, findings, where)
            if self.held is not None:
                failed = failed or "held back"
                named = True
                findings.append(
                    finding(
                        "call_held_back",
                        f"call {tool_call_id} ({name}): {self.held}; call marked incomplete and will not "
                        "be executed",
                        tool_call_id=tool_call_id,
                        **where,
                    )
                )
        if not name:
            named = True
            findings.append(
                finding(
                    "missing_name",
                    f"call {tool_call_id} has no function name; marked incomplete and will not be executed",
                    tool_call_id=tool_call_id,
                    **where,
                )
            )
        arguments = "".join(self.pieces) if raw is None else raw
        if not arguments.isascii():
            arguments, joined, lone = fix_surrogates(arguments)
            if joined:
                findings.append(
                    finding(
                        "split_surrogate_pair",
                        f"call {tool_call_id}: a surrogate pair split across chunks was joined",
                        tool_call_id=tool_call_id,
                        **where,
                    )
                )
            if lone:
                findings.append(
                    finding(
                        "lone_surrogate",
                        f"call {tool_call_id}: arguments hold a lone surrogate; kept as is",
                        tool_call_id=tool_call_id,
                        **where,
                    )
                )
        if self.unknown_type is not None:
            findings.append(
                finding(
                    "unknown_call_type",
                    f"call {tool_call_id}: {self.unknown_type}; what it holds is kept raw as its "
                    "arguments, the call marked incomplete and will not be executed",
                    tool_call_id=tool_call_id,
                    **where,
                )
            )
            return new_tool_call(
                tool_call_id,
                name,
                arguments,
                self.index,
                self.choice_index,
                id_source,
                False,
                self.kind,
                InvalidArguments(reason=f"{self.unknown_type}, not read"),
            )
        why = failed or cut  # (a held-back call's own finding says why)
        if self.kind == "custom":
            outcome: Any = InvalidArguments(reason="free-form input of a custom tool, not JSON")
            findings.append(
                finding(
                    "custom_tool_call",
                    f"call {tool_call_id} ({name}): custom tool with free-form input "
                    "(kept as text, not JSON)",
                    tool_call_id=tool_call_id,
                    **where,
                )
            )
            if why is not None and not named:  # free-form text has no end of its own: only a
                # normal end of the response, or its item's end, says it is whole
                findings.append(
                    finding(
                        "unfinished_call",
                        f"call {tool_call_id} ({name}): {why}, and a custom tool's free-form input has "
                        "no end of its own (it may be cut); marked incomplete and will not be executed",
                        tool_call_id=tool_call_id,
                        **where,
                    )
                )
            return new_tool_call(
                tool_call_id,
                name,
                arguments,
                self.index,
                self.choice_index,
                id_source,
                why is None and bool(name),
                "custom",
                outcome,
            )
        if self.kind == "builtin":
            findings.append(
                finding(
                    "builtin_tool_call",
                    f"call {tool_call_id} ({name}): built-in tool run by the client; arguments are its "
                    "action",
                    tool_call_id=tool_call_id,
                    **where,
                )
            )
        outcome = parse_arguments(arguments)
        if type(outcome) is ParsedArguments and "\\u" in arguments and _decoded_lone(arguments, outcome):
            findings.append(
                finding(
                    "lone_surrogate",
                    f"call {tool_call_id}: the decoded arguments hold a lone surrogate (an escaped "
                    "\\ud800-\\udfff without its pair); kept as is",
                    tool_call_id=tool_call_id,
                    **where,
                )
            )
        complete = bool(name)  # a call without a name cannot be run
        if type(outcome) is InvalidArguments:
            complete = False
            if outcome.duplicate_key is not None:
                findings.append(
                    finding(
                        "duplicate_keys",
                        f"call {tool_call_id} ({name}): arguments {outcome.reason}; raw string kept, call "
                        "marked incomplete and will not be executed",
                        tool_call_id=tool_call_id,
                        **where,
                    )
                )
            else:
                findings.append(
                    finding(
                        "incomplete_arguments" if outcome.truncated or why else "invalid_arguments",
                        f"call {tool_call_id} ({name}): arguments {outcome.reason}"
                        + (f" ({why})" if why and not named else "")
                        + "; raw string kept, call marked incomplete and will not be executed",
                        tool_call_id=tool_call_id,
                        **where,
                    )
                )
        elif outcome.empty:
            if why is not None:
                complete = False
                if not named:
                    findings.append(
                        finding(
                            "incomplete_arguments",
                            f"call {tool_call_id} ({name}): no arguments arrived before {why}; call marked "
                            "incomplete and will not be executed",
                            tool_call_id=tool_call_id,
                            **where,
                        )
                    )
            else:
                what = (
                    self.args_absent
                    if self.args_absent is not None
                    else "empty argument string"
                    if not arguments
                    else "argument string of only whitespace"
                )
                ended = self.finished_by or "a response that ended normally"
                message = f"call {tool_call_id} ({name}): {what} in {ended}, read as {{}}"
                findings.append(finding("empty_arguments", message, tool_call_id=tool_call_id, **where))
        else:
            if outcome.double_encoded:
                message = (
                    f"call {tool_call_id} ({name}): arguments are a JSON string holding JSON; decoded again"
                )
                findings.append(
                    finding("double_encoded_arguments", message, tool_call_id=tool_call_id, **where)
                )
            if failed is not None or (cut is not None and not json_ends):
                complete = False
                if not named:
                    findings.append(
                        finding(
                            "unfinished_call",
                            f"call {tool_call_id} ({name}): {why}, and nothing shows the call was finished "
                            "(arguments that parse may still be cut); marked incomplete and will not be "
                            "executed",
                            tool_call_id=tool_call_id,
                            **where,
                        )
                    )
        return new_tool_call(
            tool_call_id,
            name,
            arguments,
            self.index,
            self.choice_index,
            id_source,
            complete,
            self.kind,
            outcome,
        )

    def _quirks(self, tool_call_id: str, name: str, findings: list[Finding], where: dict[str, Any]) -> None:
        if self.repeated_header:
            findings.append(
                finding(
                    "repeated_header",
                    f"call {tool_call_id}: id/name repeated on continuation deltas "
                    "(kept once, not concatenated)",
                    tool_call_id=tool_call_id,
                    **where,
                )
            )
        if self.snapshot_of is not None:
            findings.append(
                finding(
                    "split_name",
                    f"call {tool_call_id}: the name arrived as growing snapshots ({self.snapshot_of!r} "
                    f"... {name!r}); kept the last, not joined",
                    tool_call_id=tool_call_id,
                    **where,
                )
            )
        if self.name_pieces > 1:
            findings.append(
                finding(
                    "split_name",
                    f"call {tool_call_id}: function name arrived in {self.name_pieces} pieces, "
                    f"joined as {name!r}",
                    tool_call_id=tool_call_id,
                    **where,
                )
            )
        if self.other_ids:
            findings.append(
                finding(
                    "id_changed",
                    f"call {self.index}: {self.other_ids} later delta(s) carried other ids "
                    f"(first {self.first_other_id!r}); kept {tool_call_id!r}",
                    tool_call_id=tool_call_id,
                    **where,
                )
            )
        if self.flat:
            findings.append(
                finding(
                    "flat_tool_call",
                    f"call {tool_call_id} ({name}): name/arguments sent at the top level of the tool call "
                    "entry, not inside `function`; read as the function's",
                    tool_call_id=tool_call_id,
                    **where,
                )
            )
        if self.non_string_args:
            at = self.non_string_at
            findings.append(
                finding(
                    "arguments_not_string",
                    f"call {tool_call_id} ({name}): arguments sent as JSON, not a string"
                    + (f" (first at chunk {at})" if at else "")
                    + "; kept, serialised compactly",
                    tool_call_id=tool_call_id,
                    **{**where, "chunk_index": at if at is not None else where["chunk_index"]},
                )
            )


def _checked_text(text: str, what: str, findings: list[Finding], where: dict[str, Any]) -> str:
    """An id or name with surrogates: a split pair joined, a lone one kept; either reported."""
    fixed, joined, lone = fix_surrogates(text)
    if joined:
        findings.append(
            finding(
                "split_surrogate_pair", f"{what}: a surrogate pair split across chunks was joined", **where
            )
        )
    if lone:
        findings.append(finding("lone_surrogate", f"{what} holds a lone surrogate; kept as is", **where))
    return fixed


def provider_ids(calls: list[PendingCall]) -> set[str] | None:
    """The ids the provider gave, for fallback ids to avoid; None when every call has one (the
    common case, where no fallback id is made)."""
    ids: set[str] | None = None
    for call in calls:
        if call.tool_call_id is None:
            ids = set()
            break
    if ids is None:
        return None
    for call in calls:
        if call.tool_call_id is not None:
            ids.add(call.tool_call_id)
    return ids

"""A stream of payloads -> parsed responses: detect the wire format, run its accumulator payload by
payload (memory does not grow with the number of chunks, nor with the number of responses: each is
yielded and forgotten), split where a new response starts, and keep what was read when a provider
error or unreadable data ends a stream."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, NoReturn

from toolcall_lab.exceptions import ProviderStreamError, UnknownFormatError, WireFormatError
from toolcall_lab.formats._values import ANTHROPIC_EVENTS, join_blocks, unknown_shape
from toolcall_lab.formats.anthropic import AnthropicStreamAccumulator, parse_anthropic_message
from toolcall_lab.formats.base import (
    FindingLimit,
    StreamAccumulator,
    error_only,
    error_response,
    finding,
    hold_replaced,
)
from toolcall_lab.formats.errors import error_message
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator, parse_chat_completion
from toolcall_lab.formats.openai_responses import ResponsesStreamAccumulator, parse_responses_output
from toolcall_lab.formats.sse import DONE, Unreadable
from toolcall_lab.messages import Finding, ParsedResponse

WireFormat = Literal["openai-chat", "anthropic", "openai-responses"]
ErrorPolicy = Literal["raise", "keep"]
_RESPONSES_ITEMS = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
    }
)
_NEW_RESPONSE = {"openai-responses": "response.created", "anthropic": "message_start"}
_COMPACT_EVERY = 8192
_MAX_UNDETECTED = 64


def detect_payload_format(payload: Mapping[str, Any]) -> WireFormat:
    """The wire format of one stream payload or whole response body.

    A body is a Responses API response when it says so (``"object": "response"``) or its
    ``output`` is a list of Responses items; an ``output`` of another shape (AWS Bedrock Converse's
    ``{"message": ...}``, a string) is not enough. Raises `UnknownFormatError` naming the keys.
    """
    kind = payload.get("type")
    if "choices" in payload or str(payload.get("object", "")).startswith("chat.completion"):
        return "openai-chat"
    if isinstance(kind, str) and kind.startswith("response."):
        return "openai-responses"
    if isinstance(kind, str) and (kind in ANTHROPIC_EVENTS or (kind == "message" and "content" in payload)):
        return "anthropic"
    if payload.get("object") == "response":
        return "openai-responses"
    output = payload.get("output")
    if (
        type(output) is list
        and output
        and all(isinstance(item, Mapping) for item in output)
        and any(item.get("type") in _RESPONSES_ITEMS for item in output)
    ):
        return "openai-responses"
    raise UnknownFormatError(unknown_shape(payload, "payload"))


def unknown_stream(payloads: list[Any], what: str = "the stream") -> str:
    """Why no payload of a stream has a known wire format, naming the first one's keys."""
    first = next((p for p in payloads if isinstance(p, Mapping)), None)
    shape = "" if first is None else "; " + unknown_shape(first, "first payload")
    return f"no payload of {what} has a known wire format{shape}"


def try_detect(payload: Mapping[str, Any]) -> WireFormat | None:
    try:
        return detect_payload_format(payload)
    except UnknownFormatError:
        return None


def new_accumulator(fmt: WireFormat, batch: int) -> StreamAccumulator:
    if fmt == "openai-chat":
        return ChatCompletionAccumulator(batch=batch)
    if fmt == "anthropic":
        return AnthropicStreamAccumulator(batch=batch)
    return ResponsesStreamAccumulator(batch=batch)


def unreadable_response(reason: str, fmt: str = "unknown") -> ParsedResponse:
    """A response that stands for data that could not be read (a damaged exchange of a cassette,
    unreadable data after the last response of a stream): nothing but the reason, as its error."""
    return error_only(fmt, "unreadable_data", reason, f"unreadable data: {reason}")


def parse_body(body: Mapping[str, Any], *, batch: int = 0) -> ParsedResponse:
    """A whole (non-streamed) response body of any format; error bodies raise `ProviderStreamError`.

    A body that is one saved stream chunk (``chat.completion.chunk``, choices with ``delta``) is
    read as a stream of that one chunk, with a ``chunk_as_body`` finding.
    """
    fmt = try_detect(body)
    if fmt is None:
        message = error_message(body)
        if message is None:
            raise UnknownFormatError(unknown_shape(body, "body"))
        exc = ProviderStreamError(message, payload=dict(body), line_number=None)
        exc.partial_responses = (error_response(message, payload=body),)
        raise exc
    if fmt == "openai-chat":
        if _is_chunk(body):
            return _chunk_body(body, batch)
        return parse_chat_completion(body, batch=batch)
    if fmt == "anthropic":
        return parse_anthropic_message(body, batch=batch)
    return parse_responses_output(body, batch=batch)


def _is_chunk(body: Mapping[str, Any]) -> bool:
    if body.get("object") == "chat.completion.chunk":
        return True
    choices = body.get("choices")
    return type(choices) is list and any(
        isinstance(c, Mapping) and "delta" in c and "message" not in c for c in choices
    )


def _chunk_body(body: Mapping[str, Any], batch: int) -> ParsedResponse:
    acc = ChatCompletionAccumulator(batch=batch)
    acc.note(
        "chunk_as_body",
        "the body is a single stream chunk (choices carry `delta`, not `message`); read as a stream of one "
        "chunk",
    )
    acc.feed(dict(body))  # a provider error raises with the response so far, the finding in it
    return acc.finish()


class _Notes(list[Finding]):
    """Framing findings waiting for the response they belong to, capped per kind like every
    finding (`FindingLimit`): memory does not grow with the number of bad lines."""

    __slots__ = ("limit",)

    def __init__(self) -> None:
        super().__init__()
        self.limit = FindingLimit()

    def add(self, note: Finding) -> None:
        if self.limit(note) is not None:
            self.append(note)

    def take(self) -> list[Finding]:
        """The notes with their summaries; the collector starts afresh for the next response."""
        out = [*self, *self.limit.summary()]
        self.clear()
        self.limit = FindingLimit()
        return out


def _with_notes(response: ParsedResponse, notes: _Notes) -> ParsedResponse:
    if not notes:
        return response
    replaced = next((n for n in notes if n.kind == "invalid_utf8"), None)
    response = replace(response, findings=(*notes.take(), *response.findings))
    if replaced is not None:  # bytes that were not UTF-8 came in this response's payloads
        response = hold_replaced(response, replaced.message.partition(":")[0])
    return response


Watch = Callable[[StreamAccumulator | None, ParsedResponse | None, Sequence[Finding]], None]
"""What `iter_stream_responses` hands a watcher before each item and after the last: the
accumulator of the response being read (None between responses), the response that ended at
``[DONE]`` or a provider error and is yielded with the next payload (or None), and the framing
findings not yet given to a response."""


def iter_stream_responses(
    items: Iterable[dict[str, Any] | Any],
    *,
    fmt: WireFormat | None = None,
    batch: int = 0,
    errors: ErrorPolicy = "raise",
    where: list[int] | None = None,
    watch: Watch | None = None,
) -> Iterator[ParsedResponse]:
    """Responses from a stream of payload dicts, `DONE` markers, `Unreadable` markers and framing
    findings. Each response is yielded as soon as it ends and not kept (memory does not grow with
    the number of responses); `collect` gathers them into a list.

    A new response starts after ``[DONE]``, at ``response.created`` (Responses) and at
    ``message_start`` (Anthropic). A provider error ends the response it is in: with
    ``errors="raise"`` it raises `ProviderStreamError` whose ``partial_responses`` hold the failed
    response (those before it were yielded); with ``errors="keep"`` the failed response is yielded
    (``error`` set) and reading goes on. Unreadable data raises `SSEDecodeError` (with the response
    in progress, marked failed) or, with ``errors="keep"``, marks the response it falls in (or the
    next one, between responses) with the error and an ``unreadable_data`` finding, its calls
    incomplete, and reading goes on: what follows is still read and shown.
    `where[0]`, when given, is the line of the current payload. `watch`, when given, is called
    before each item and once after the last with the reading so far (see `Watch`): how a stream
    stepper shows each step as this reader reads it.
    """
    notes = _Notes()
    held: list[dict[str, Any]] = []
    acc: StreamAccumulator | None = None
    feed: Any = None
    boundary: str | None = _NEW_RESPONSE.get(fmt) if fmt else None
    after_done = False
    after_error = False
    count = 0
    marks = _TextBlocks()
    yielded = 0
    last: ParsedResponse | None = None  # ended at [DONE] or an error; yielded at the next payload,
    # or at the end with the framing findings that came after it
    damage: str | None = None  # unreadable data outside a response: it marks the next one
    for item in items:
        if watch is not None:
            watch(acc, last, notes)
        if type(item) is dict:
            if last is not None:  # a payload: the response that ended before it is whole
                yield last
                last = None
            if acc is None:
                if fmt is None:
                    fmt = try_detect(item)
                    if fmt is None:
                        message = error_message(item)
                        if message is not None:
                            response = _with_notes(error_response(message, payload=item), notes)
                            if errors == "raise":
                                _raise(
                                    ProviderStreamError(message, payload=item, line_number=_line(where)),
                                    response,
                                )
                            last, yielded = response, yielded + 1
                            batch += 1
                            after_error = True
                            continue
                        held.append(item)
                        if len(held) > _MAX_UNDETECTED:
                            raise UnknownFormatError(unknown_stream(held, f"the first {len(held)}"))
                        continue
                    boundary = _NEW_RESPONSE.get(fmt)
                if after_done:
                    notes.add(
                        finding(
                            "data_after_done",
                            f"line {_line(where)}: data after [DONE]; read as response {batch}",
                        )
                    )
                    after_done = False
                if after_error:
                    notes.add(
                        finding(
                            "data_after_error",
                            f"line {_line(where)}: data after the provider error that ended response "
                            f"{batch - 1}; read as response {batch}",
                        )
                    )
                    after_error = False
                acc = new_accumulator(fmt, batch)
                feed = acc.feed
                count = 0
                if damage is not None:
                    acc.damage(damage)
                    damage = None
                if held:
                    for h in held:
                        feed(h)
                    held.clear()
            elif (
                boundary is not None and item.get("type") == boundary and acc.chunk_count and acc.opened
            ) or (
                boundary is None and acc.finished and _another_stream(acc, item)  # type: ignore[attr-defined]
            ):
                ended = acc.response_id
                yield _with_notes(acc.finish(), notes)
                if boundary is None:
                    notes.add(
                        finding(
                            "new_stream_without_done",
                            f"line {_line(where)}: a chunk with id {item.get('id')!r} after response "
                            f"{ended!r} finished, with no [DONE] between them; read as response "
                            f"{batch + 1}",
                        )
                    )
                yielded += 1
                batch += 1
                acc = new_accumulator(fmt, batch)  # type: ignore[arg-type]
                feed = acc.feed
                count = 0
            try:
                feed(item)
            except ProviderStreamError as exc:
                last, yielded = _stream_error(exc, notes, errors, where), yielded + 1
                batch += 1
                acc = None
                after_error = True
                continue
            if acc.foreign is not None:  # an event of another wire format starts the next response
                fmt = acc.foreign  # type: ignore[assignment]
                yield _with_notes(acc.finish(), notes)
                yielded += 1
                batch += 1
                boundary = _NEW_RESPONSE.get(fmt)  # type: ignore[arg-type]
                acc = new_accumulator(fmt, batch)  # type: ignore[arg-type]
                feed = acc.feed
                count = 0
                try:
                    feed(item)
                except ProviderStreamError as exc:
                    last, yielded = _stream_error(exc, notes, errors, where), yielded + 1
                    batch += 1
                    acc = None
                    after_error = True
                    continue
            count += 1
            if count >= _COMPACT_EVERY:
                count = 0
                _compact(acc, marks)
        elif item is DONE:
            after_error = False
            if acc is not None:
                last, yielded = _with_notes(acc.finish(), notes), yielded + 1
                batch += 1
                acc = None
            after_done = True
        elif type(item) is Unreadable:
            error = item.error
            reason = f"unreadable data: {error}"
            if errors == "raise":
                if last is not None:
                    yield last
                    last = None
                if acc is not None:
                    error.partial_responses = (_with_notes(acc._result(reason), notes),)
                raise error
            note = finding(
                "unreadable_data",
                f"{error}; the response it falls in is marked failed, its calls incomplete",
            )
            if acc is not None:
                acc.note(note.kind, note.message)
                acc.damage(reason)
            else:
                notes.add(note)
                damage = damage or reason
        else:
            notes.add(item)  # type: ignore[arg-type]  # a framing finding
    if watch is not None:
        watch(acc, last, notes)
    if held:
        raise UnknownFormatError(unknown_stream(held))
    if acc is None and damage is None and notes and last is not None:
        last = replace(last, findings=(*last.findings, *notes.take()))  # framing findings after the last one
    if last is not None:
        yield last
    if acc is not None:
        yield _with_notes(acc.finish(), notes)
    elif damage is not None:  # unreadable data after the last response, or nothing else
        response = unreadable_response(damage.removeprefix("unreadable data: "), fmt or "unknown")
        yield replace(response, findings=tuple(notes.take()))  # (the notes hold the unreadable_data finding)
    elif not yielded and fmt is None:
        raise UnknownFormatError(no_payloads(notes))


def no_payloads(notes: list[Finding]) -> str:
    """Why a stream gave nothing to parse: no payloads, and what its lines held instead (the first
    framing finding quotes it: HTML, plain text...)."""
    if not notes:
        return "the stream holds no payloads"
    more = f" (and {len(notes) - 1} more finding(s) about its lines)" if len(notes) > 1 else ""
    return f"the stream holds no payloads; {notes[0].message}{more}"


def _another_stream(acc: Any, item: dict[str, Any]) -> bool:
    """A chat chunk that starts another stream: after a finish reason, a chunk whose ``id`` differs
    from the response's (two streams saved one after the other without ``[DONE]``) and that says
    something (a delta with a value). A usage or metadata chunk after the finish reason is not a
    stream's start, also when its id differs (servers that give every chunk a new id: old
    llama.cpp, LiteLLM before some providers)."""
    rid = item.get("id")
    if not (type(rid) is str and rid and acc.response_id is not None and rid != acc.response_id):
        return False
    choices = item.get("choices")
    if type(choices) is not list:
        return False
    for choice in choices:
        delta = choice.get("delta") if type(choice) is dict else None
        if type(delta) is dict and any(v is not None and v != "" for v in delta.values()):
            return True
    return False


def collect(responses: Iterable[ParsedResponse]) -> list[ParsedResponse]:
    """Every response of an iterator in a list; an error raised on the way carries all the
    responses read before it, the failed one last (``partial_responses``)."""
    out: list[ParsedResponse] = []
    try:
        for response in responses:
            out.append(response)
    except WireFormatError as exc:
        exc.partial_responses = (*out, *exc.partial_responses)
        raise
    return out


def _line(where: list[int] | None) -> int | None:
    return where[0] if where else None


def _stream_error(exc: ProviderStreamError, notes: Any, errors: str, where: Any) -> ParsedResponse:
    """The response a provider error ended (its calls in progress incomplete), or, with
    ``errors="raise"``, the error raised again with the line it came on."""
    response = _with_notes(exc.partial_responses[0], notes)  # type: ignore[arg-type]
    if errors == "raise":
        _raise(
            ProviderStreamError(
                exc.provider_message,
                payload=exc.payload,
                line_number=_line(where),
                chunk_index=exc.chunk_index,
            ),
            response,
        )
    return response


def _raise(exc: WireFormatError, failed: ParsedResponse) -> NoReturn:
    exc.partial_responses = (failed,)
    raise exc


class _TextBlocks:
    """How many leading entries of each text list of the response being read are joined blocks
    (memory compaction, `_compact`); each list is held with its count, so its id stays its own."""

    __slots__ = ("acc", "keep")

    def __init__(self) -> None:
        self.acc: StreamAccumulator | None = None
        self.keep: dict[int, tuple[int, list[Any]]] = {}


def _compact(acc: StreamAccumulator | None, marks: _TextBlocks) -> None:
    """Join the argument and text pieces that came since the last compaction, so memory follows the
    size of the arguments and the text, not the number of chunks (each piece is copied once: linear
    in the total)."""
    if acc is None:
        return
    for call in acc.pending_calls():
        pieces = call.pieces
        keep = call.blocks
        if len(pieces) - keep > 64:
            pieces[keep:] = ["".join(pieces[keep:])]
            call.blocks = keep + 1
    if marks.acc is not acc:  # another response: its lists are new
        marks.acc = acc
        marks.keep.clear()
    for text in acc.text_pieces():
        held = marks.keep.get(id(text))
        keep = 0 if held is None else held[0]
        if len(text) - keep > 64:
            marks.keep[id(text)] = (join_blocks(text, keep), text)

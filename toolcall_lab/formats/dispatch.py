"""A stream of payloads -> parsed responses: detect the wire format, run its accumulator payload by
payload (memory does not grow with the number of chunks), split where a new response starts, and
keep what was read when a provider error or unreadable data ends a stream."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any, Literal

from toolcall_lab.exceptions import ProviderStreamError, SSEDecodeError, UnknownFormatError, WireFormatError
from toolcall_lab.formats.anthropic import AnthropicStreamAccumulator, parse_anthropic_message
from toolcall_lab.formats.base import StreamAccumulator, finding, single_choice
from toolcall_lab.formats.errors import error_message
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator, parse_chat_completion
from toolcall_lab.formats.openai_responses import ResponsesStreamAccumulator, parse_responses_output
from toolcall_lab.formats.sse import DONE
from toolcall_lab.messages import Finding, ParsedResponse

WireFormat = Literal["openai-chat", "anthropic", "openai-responses"]
ErrorPolicy = Literal["raise", "keep"]
_ANTHROPIC_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
    }
)
_NEW_RESPONSE = {"openai-responses": "response.created", "anthropic": "message_start"}
_COMPACT_EVERY = 8192
_MAX_UNDETECTED = 64


def detect_payload_format(payload: Mapping[str, Any]) -> WireFormat:
    """The wire format of one stream payload or whole response body."""
    kind = payload.get("type")
    if "choices" in payload or str(payload.get("object", "")).startswith("chat.completion"):
        return "openai-chat"
    if isinstance(kind, str) and kind.startswith("response."):
        return "openai-responses"
    if kind in _ANTHROPIC_EVENTS or (kind == "message" and "content" in payload):
        return "anthropic"
    if payload.get("object") == "response" or "output" in payload:
        return "openai-responses"
    raise UnknownFormatError(f"cannot tell the wire format of a payload with keys {sorted(payload)[:8]}")


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


def error_response(message: str, fmt: str = "unknown") -> ParsedResponse:
    """A response that is nothing but a provider error (an error body, or an error before any data)."""
    return single_choice(
        fmt,
        text=[],
        reasoning=[],
        calls=[],
        finish_reason=None,
        findings=[finding("provider_error", f"provider error instead of a response: {message}")],
        usage=None,
        response_id=None,
        model=None,
        error=message,
    )


def parse_body(body: Mapping[str, Any], *, batch: int = 0) -> ParsedResponse:
    """A whole (non-streamed) response body of any format; error bodies raise `ProviderStreamError`."""
    fmt = try_detect(body)
    if fmt is None:
        message = error_message(body)
        if message is None:
            raise UnknownFormatError(f"cannot tell the wire format of a body with keys {sorted(body)[:8]}")
        exc = ProviderStreamError(message, payload=dict(body), line_number=None)
        exc.partial_responses = (error_response(message),)
        raise exc
    if fmt == "openai-chat":
        return parse_chat_completion(body, batch=batch)
    if fmt == "anthropic":
        return parse_anthropic_message(body, batch=batch)
    return parse_responses_output(body, batch=batch)


def _with_notes(response: ParsedResponse, notes: list[Finding]) -> ParsedResponse:
    if not notes:
        return response
    out = replace(response, findings=(*notes, *response.findings))
    notes.clear()
    return out


def iter_stream_responses(
    items: Iterable[dict[str, Any] | Any],
    *,
    fmt: WireFormat | None = None,
    batch: int = 0,
    errors: ErrorPolicy = "raise",
    where: list[int] | None = None,
) -> Iterator[ParsedResponse]:
    """Responses from a stream of payload dicts, `DONE` markers and framing findings.

    A new response starts after ``[DONE]``, at ``response.created`` (Responses) and at
    ``message_start`` (Anthropic). A provider error ends the response it is in: with
    ``errors="raise"`` it raises `ProviderStreamError` whose ``partial_responses`` hold every
    response so far (the failed one last); with ``errors="keep"`` the failed response is yielded
    (``error`` set) and reading goes on. `where[0]`, when given, is the line of the current payload.
    """
    done: list[ParsedResponse] = []  # only kept to attach to an error; the caller holds the rest
    notes: list[Finding] = []
    held: list[dict[str, Any]] = []
    acc: StreamAccumulator | None = None
    feed: Any = None
    boundary: str | None = _NEW_RESPONSE.get(fmt) if fmt else None
    after_done = False
    count = 0
    try:
        for item in items:
            if type(item) is dict:
                if acc is None:
                    if fmt is None:
                        fmt = try_detect(item)
                        if fmt is None:
                            message = error_message(item)
                            if message is not None:
                                response = _with_notes(error_response(message), notes)
                                if errors == "raise":
                                    _raise(
                                        ProviderStreamError(message, payload=item, line_number=_line(where)),
                                        done,
                                        response,
                                    )
                                done.append(response)
                                yield response
                                batch += 1
                                continue
                            held.append(item)
                            if len(held) > _MAX_UNDETECTED:
                                raise UnknownFormatError(
                                    f"no payload among the first {len(held)} has a known wire format"
                                )
                            continue
                        boundary = _NEW_RESPONSE.get(fmt)
                    if after_done:
                        notes.append(
                            finding(
                                "data_after_done",
                                f"line {_line(where)}: data after [DONE]; read as response {batch}",
                            )
                        )
                        after_done = False
                    acc = new_accumulator(fmt, batch)
                    feed = acc.feed
                    count = 0
                    if held:
                        for h in held:
                            feed(h)
                        held.clear()
                elif boundary is not None and acc.chunk_count and item.get("type") == boundary:
                    response = _with_notes(acc.finish(), notes)
                    done.append(response)
                    yield response
                    batch += 1
                    acc = new_accumulator(fmt, batch)  # type: ignore[arg-type]
                    feed = acc.feed
                    count = 0
                try:
                    feed(item)
                except ProviderStreamError as exc:
                    response = _with_notes(exc.partial_responses[0], notes)  # type: ignore[arg-type]
                    if errors == "raise":
                        _raise(
                            ProviderStreamError(
                                exc.provider_message,
                                payload=exc.payload,
                                line_number=_line(where),
                                chunk_index=exc.chunk_index,
                            ),
                            done,
                            response,
                        )
                    done.append(response)
                    yield response
                    batch += 1
                    acc = None
                    continue
                count += 1
                if count >= _COMPACT_EVERY:
                    count = 0
                    _compact(acc)
            elif item is DONE:
                if acc is not None:
                    response = _with_notes(acc.finish(), notes)
                    done.append(response)
                    yield response
                    batch += 1
                    acc = None
                after_done = True
            else:
                notes.append(item)  # type: ignore[arg-type]  # a framing finding
    except SSEDecodeError as exc:  # unreadable data: keep what was read, the response in progress failed
        partial = None if acc is None else _with_notes(acc._result(f"unreadable data: {exc}"), notes)
        exc.partial_responses = (*done, partial) if partial is not None else tuple(done)
        raise
    if held:
        raise UnknownFormatError("no payload of the stream has a known wire format")
    if acc is not None:
        yield _with_notes(acc.finish(), notes)
    elif not done and fmt is None:
        raise UnknownFormatError("the stream holds no payloads")


def _line(where: list[int] | None) -> int | None:
    return where[0] if where else None


def _raise(exc: WireFormatError, done: list[ParsedResponse], failed: ParsedResponse) -> None:
    exc.partial_responses = (*done, failed)
    raise exc


def _compact(acc: StreamAccumulator | None) -> None:
    """Join the argument pieces that came since the last compaction, so memory follows the size of
    the arguments, not the number of chunks (each piece is copied once: linear in the total)."""
    if acc is None:
        return
    for call in acc.pending_calls():
        pieces = call.pieces
        keep = call.blocks
        if len(pieces) - keep > 64:
            pieces[keep:] = ["".join(pieces[keep:])]
            call.blocks = keep + 1

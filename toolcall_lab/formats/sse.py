"""Server-sent events, parsed by the WHATWG rules: bytes -> events -> JSON payloads.

The framing follows https://html.spec.whatwg.org/multipage/server-sent-events.html (the model:
httpx-sse's ``_decoders.py``): one UTF-8 BOM at the start is dropped; lines end in CRLF, LF or CR
(and nothing else: U+2028, U+2029 and NEL inside JSON strings are text, as ``str.splitlines`` would
not have it); a blank line dispatches the event; ``:`` lines are comments; ``data:`` lines of one
event are joined with ``\\n``; an event whose data is empty carries no payload; ``retry`` and unknown
fields are ignored. Where a recording differs from the standard the reader says so with a finding and
keeps the data: whitespace before a field name (`` data: ...``) is read as that field, an unknown
field is reported, and an event the file ends in without its closing blank line is read.

A payload that is not JSON raises `SSEDecodeError` with its line number. JSON that a fast decoder
refuses (escaped lone surrogates, huge numbers) is read by the standard library instead. Provider
errors (``event: error``, llama.cpp's ``error:`` field, ``{"error": ...}`` payloads) raise
`ProviderStreamError` with the provider's message from `iter_sse_payloads`; the recording reader
hands them to the accumulators instead, which keep the response so far.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

from toolcall_lab.exceptions import ProviderStreamError, SSEDecodeError
from toolcall_lab.formats.base import finding
from toolcall_lab.formats.errors import error_frame_payload, error_message
from toolcall_lab.messages import Finding

try:  # orjson decodes 2-4x faster than json; both give the same values for provider payloads
    import orjson

    _loads: Any = orjson.loads
except ImportError:  # pragma: no cover - exercised when the optional extra is absent
    _loads = json.loads

BOM = b"\xef\xbb\xbf"
_ERROR_TYPES = ("error", "response.failed")
READ_SIZE = 1 << 20


class _Done:
    """The ``data: [DONE]`` marker (ends one response of a stream)."""

    def __repr__(self) -> str:
        return "DONE"


DONE = _Done()


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: its ``event:`` name (or None), joined ``data:`` text, and line."""

    event: str | None
    data: str
    id: str | None
    line_number: int


Source = bytes | str | Iterable[bytes | str]


def byte_pieces(source: Source | Any, *, chunked: bool = False) -> Iterator[bytes]:
    """The stream as byte pieces. Items of an iterable are lines (without or with their line end)
    unless `chunked`, when they are arbitrary pieces of the byte stream (as read from a socket)."""
    if isinstance(source, bytes | bytearray | memoryview):
        yield bytes(source)
        return
    if isinstance(source, str):
        yield source.encode("utf-8", "surrogatepass")
        return
    read = getattr(source, "read", None)
    if read is not None:  # a binary file
        yield from iter(lambda: read(READ_SIZE), b"")
        return
    for item in source:
        piece = item.encode("utf-8", "surrogatepass") if isinstance(item, str) else bytes(item)
        if chunked:
            yield piece
        elif piece.endswith(b"\r"):
            yield piece[:-1] + b"\n"
        elif piece.endswith(b"\n"):
            yield piece
        else:
            yield piece + b"\n"


_FIELDS = frozenset({b"data", b"event", b"id", b"retry", b"error"})


def sse_frames(pieces: Iterable[bytes]) -> Iterator[tuple[str | None, bytes, int, str | None] | Finding]:
    """Frame byte pieces into (event, data, first line, last event id) tuples, WHATWG style.

    Findings about the framing (`sse_*`, `invalid_utf8`) are yielded in line with the frames.
    """
    event: str | None = None
    event_id: str | None = None
    data: bytes | None = None
    start = 0
    number = 0
    pending = b""
    head = True  # the BOM check is still to do
    skip_lf = False  # the last piece ended in CR: a LF starting the next one completes a CRLF
    for piece in chain(pieces, (None,)):
        if piece is None:  # end of stream: the last line needs no line end
            if not pending:
                break
            piece = b"\n"
        else:
            if skip_lf:
                skip_lf = False
                if piece[:1] == b"\n":
                    piece = piece[1:]
            if not piece:
                continue
        if pending:
            piece = pending + piece
        if head:
            if len(piece) < 3 and BOM.startswith(piece):
                pending = piece
                continue
            head = False
            if piece.startswith(BOM):
                piece = piece[3:]
        if b"\r" in piece:
            if piece[-1:] == b"\r":
                skip_lf = True
                lines = piece[:-1].replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
                pending = b""
            else:
                lines = piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
                pending = lines.pop()
        else:
            lines = piece.split(b"\n")
            pending = lines.pop()
        for line in lines:
            number += 1
            if line[:6] == b"data: ":
                value = line[6:]
            elif not line:
                if data is not None:
                    yield event, data, start, event_id
                    data = None
                event = None
                continue
            elif line[:1] == b":" or line.isspace():  # a comment; or only blanks (no field, no dispatch)
                continue
            else:
                name, colon, value = line.partition(b":")
                if value[:1] == b" ":
                    value = value[1:]
                if name not in _FIELDS:
                    stripped = name.replace(BOM, b"").strip()
                    if colon and stripped in _FIELDS:
                        yield finding(
                            "sse_nonstandard_line",
                            f"line {number}: {name.decode('utf-8', 'replace')!r} has whitespace before "
                            "the field "
                            f"name; read as {stripped.decode()!r}",
                        )
                        name = stripped
                    else:
                        shown = line[:80].decode("utf-8", "replace")
                        yield finding(
                            "sse_unknown_field",
                            f"line {number}: unknown SSE field {name[:40].decode('utf-8', 'replace')!r} "
                            f"ignored: {shown!r}",
                        )
                        continue
                if name == b"event":
                    event = value.decode("utf-8", "replace")
                    continue
                if name == b"id":
                    if b"\0" not in value:
                        event_id = value.decode("utf-8", "replace")
                    continue
                if name == b"retry":
                    continue
                if name == b"error":  # llama.cpp (before 2025-09) sends `error: {...}` instead of data
                    event = "error"
            if data is None:
                data, start = value, number
            else:
                data = data + b"\n" + value
    if data is not None:
        if data.strip() != b"[DONE]":
            yield finding(
                "sse_unterminated_event",
                f"line {start}: the file ends without the blank line that closes this event; read anyway",
            )
        yield event, data, start, event_id


def decode_json(data: bytes | str, line_number: int, notes: list[Finding] | None = None) -> Any:
    """JSON text -> value: the fast decoder first, the standard library for what it refuses."""
    try:
        return _loads(data)
    except Exception:  # orjson is stricter (lone surrogates, NaN, huge integers); json decides below
        pass
    text = data
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            try:
                text = data.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                text = data.decode("utf-8", "replace")
                note = finding(
                    "invalid_utf8", f"line {line_number}: bytes that are not valid UTF-8 replaced by U+FFFD"
                )
                if notes is not None:
                    notes.append(note)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        shown = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise SSEDecodeError(f"data is not JSON ({exc})", line_number=line_number, line=shown) from None


def payload_items(
    frames: Iterable[tuple[str | None, bytes, int, str | None] | Finding], where: list[int] | None = None
) -> Iterator[dict[str, Any] | _Done | Finding]:
    """Frames -> payload dicts, `DONE` markers and findings, in order.

    An error frame (``event: error``, ``error:``) becomes a payload every accumulator reads as a
    provider error. `where[0]` is set to the line of the payload last yielded.
    """
    notes: list[Finding] = []
    if where is None:
        where = [0]
    loads = _loads
    for frame in frames:
        if type(frame) is not tuple:
            yield frame  # type: ignore[misc]
            continue
        event, data, start, _ = frame
        if event != "error":  # the common case first: a JSON object the fast decoder reads
            try:
                payload = loads(data)
            except Exception:
                payload = None
            if type(payload) is dict:
                where[0] = start
                yield payload
                continue
        if not data or data.isspace():
            continue  # an event without data carries no payload
        if data[:1] == b"[" and data.strip() == b"[DONE]":
            yield DONE
            continue
        if event == "error":
            payload = error_frame_payload(data.decode("utf-8", "replace"))
        else:
            payload = decode_json(data, start, notes)
            if notes:
                yield from notes
                notes.clear()
            if type(payload) is not dict:
                raise SSEDecodeError(
                    f"data is JSON {type(payload).__name__}, expected an object",
                    line_number=start,
                    line=data.decode("utf-8", "replace"),
                )
        where[0] = start
        yield payload


def iter_sse_events(
    source: Source, *, chunked: bool = False, findings: list[Finding] | None = None
) -> Iterator[SSEEvent]:
    """Frame an event stream into events (blank line = dispatch; comments ``:`` ignored).

    `source`: bytes, text, a binary file, or an iterable of lines (or of arbitrary byte pieces
    with ``chunked=True``). Framing findings are appended to `findings` when given.
    """
    for frame in sse_frames(byte_pieces(source, chunked=chunked)):
        if type(frame) is not tuple:
            if findings is not None:
                findings.append(frame)  # type: ignore[arg-type]
            continue
        event, data, start, event_id = frame
        yield SSEEvent(event, data.decode("utf-8", "replace"), event_id, start)


def iter_sse_payloads(
    source: Source, *, chunked: bool = False, findings: list[Finding] | None = None
) -> Iterator[dict[str, Any]]:
    """JSON payloads of an event stream, stopping at ``[DONE]``.

    Raises `SSEDecodeError` (with the line) for data that is not a JSON object, and
    `ProviderStreamError` (with the provider's message and line) for an error event or payload.
    Framing findings are appended to `findings` when given.
    """
    where = [0]
    for item in payload_items(sse_frames(byte_pieces(source, chunked=chunked)), where):
        if type(item) is dict:
            if "error" in item or item.get("type") in _ERROR_TYPES:
                message = error_message(item)
                if message is not None:
                    raise ProviderStreamError(message, payload=item, line_number=where[0])
            yield item
        elif item is DONE:
            return
        elif findings is not None:
            findings.append(item)  # type: ignore[arg-type]


def decode_payload(data: str | bytes, *, line_number: int, event: str | None = None) -> dict[str, Any]:
    """Decode one ``data:`` value; raise the library's errors for non-JSON and provider errors."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if event == "error":
        payload: Any = error_frame_payload(raw.decode("utf-8", "replace"))
    else:
        payload = decode_json(raw, line_number)
    if type(payload) is not dict:
        raise SSEDecodeError(
            f"data is JSON {type(payload).__name__}, expected an object",
            line_number=line_number,
            line=str(data),
        )
    message = error_message(payload)
    if message is not None:
        raise ProviderStreamError(message, payload=payload, line_number=line_number)
    return payload

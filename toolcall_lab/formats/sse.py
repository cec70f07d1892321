"""Server-sent events, parsed by the WHATWG rules: bytes -> events -> JSON payloads.

The framing follows https://html.spec.whatwg.org/multipage/server-sent-events.html (the model:
httpx-sse's ``_decoders.py``): one UTF-8 BOM at the start is dropped; lines end in CRLF, LF or CR
(and nothing else: U+2028, U+2029 and NEL inside JSON strings are text, as ``str.splitlines`` would
not have it); a blank line dispatches the event; ``:`` lines are comments; ``data:`` lines of one
event are joined with ``\\n``; an event whose data is empty carries no payload; ``retry`` and unknown
fields are ignored. Where a recording differs from the standard the reader says so with a finding and
keeps the data: whitespace before a field name (`` data: ...``) is read as that field, JSON text on
lines without ``data:`` (JSON lines in an SSE file, a raw error body mid-stream) is read as data, an
``event: error`` without data still reports an error, an unknown field or stray text is reported,
and an event the file ends in without its closing blank line is read. ``data:  [DONE]`` is the end
marker whatever the whitespace around it. Framing findings of one kind are listed up to
`FINDINGS_PER_KIND` times per stream, then counted, so memory does not grow with damaged lines.

A payload that is not JSON raises `SSEDecodeError` with its line number from `iter_sse_payloads`;
`payload_items` yields it as an `Unreadable` marker instead, so a recording reader can keep going.
JSON that a fast decoder refuses (escaped lone surrogates, huge numbers) is read by the standard
library instead. Provider errors (``event: error``, llama.cpp's ``error:`` field, ``{"error": ...}``
payloads, an ``error`` inside a choice) raise `ProviderStreamError` with the provider's message from
`iter_sse_payloads`; the recording reader hands them to the accumulators instead, which keep the
response so far.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

from toolcall_lab.exceptions import ProviderStreamError, SSEDecodeError
from toolcall_lab.formats._values import compact_json, event_type_from_line
from toolcall_lab.formats.base import FINDINGS_PER_KIND as FINDINGS_PER_KIND
from toolcall_lab.formats.base import FindingLimit, finding
from toolcall_lab.formats.errors import error_frame_payload, error_message, list_error_message
from toolcall_lab.messages import Finding

try:  # orjson decodes 2-4x faster than json; both give the same values for provider payloads
    import orjson

    _loads: Any = orjson.loads
except ImportError:  # pragma: no cover - exercised when the optional extra is absent
    _loads = json.loads

BOM = b"\xef\xbb\xbf"
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
_FIELD_PREFIXES = (b"data:", b"event:", b"id:", b"retry:", b"error:")
_TOKEN = re.compile(rb"[A-Za-z][A-Za-z0-9_.-]*\Z")
Frame = tuple[str | None, bytes, int, str | None]


def sse_frames(pieces: Iterable[bytes]) -> Iterator[Frame | Finding]:
    """Frame byte pieces into (event, data, first line, last event id) tuples, WHATWG style.

    Findings about the framing (`sse_*`, `invalid_utf8`) are yielded in line with the frames; past
    `FINDINGS_PER_KIND` of one kind they are counted and reported once, at the end.

    Beyond the standard, so that no provider data is dropped unseen: JSON text on lines without a
    field name (a line starting with ``{`` or ``[``, and the lines that follow it up to a blank line
    or a field) is read as one event's data, with an `sse_raw_json` finding; an ``event: error``
    without data is dispatched (it is a provider error, message or not).
    """
    event: str | None = None
    event_id: str | None = None
    data: bytes | None = None
    more: bytearray | None = None  # the data of an event of several lines, grown in place (linear)
    raw = 0  # lines of JSON text without a field name in the event in progress (0: a normal event)
    start = 0
    number = 0
    pending = b""
    held: list[bytes] = []  # more pieces of the unfinished line `pending` (joined once, at its end)
    head = True  # the BOM check is still to do
    skip_lf = False  # the last piece ended in CR: a LF starting the next one completes a CRLF
    limited = FindingLimit()

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
            if not head and b"\n" not in piece and b"\r" not in piece:
                held.append(piece)  # a line longer than a piece: copy it once, when it ends
                continue
            if held:
                piece = b"".join((pending, *held, piece))
                held.clear()
            else:
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
        del piece  # (a huge line is held once: by `lines`, then by the data taken from it)
        lines.reverse()
        while lines:
            line = lines.pop()
            number += 1
            if line[:6] == b"data: " and not raw:
                value = line[6:]
                del line
            elif not line:
                if data is not None:
                    if raw:
                        note = limited(_raw_note(start, raw))
                        if note is not None:
                            yield note
                        raw = 0
                    yield event, data if more is None else bytes(more), start, event_id
                    data = more = None
                elif event == "error":  # `event: error` without data: still the provider's error
                    yield event, b"", number - 1, event_id
                event = None
                continue
            elif line[:1] == b":" or line.isspace():  # a comment; or only blanks (no field, no dispatch)
                continue
            elif raw and not line.startswith(_FIELD_PREFIXES) and line[:1] not in b"{[":
                if more is None:
                    more = bytearray(data)  # type: ignore[arg-type]
                more += b"\n"
                more += line
                raw += 1
                continue
            else:
                if line[:1] in b"{[":  # JSON text without `data:` (JSON lines in an SSE file, a raw error)
                    if data is not None:  # the event before it was not closed by a blank line
                        if raw:
                            note = limited(_raw_note(start, raw))
                            if note is not None:
                                yield note
                        yield event, data if more is None else bytes(more), start, event_id
                        event = None
                    data, more, start, raw = line, None, number, 1
                    continue
                if raw and data is not None:  # a field after raw JSON text ends it
                    note = limited(_raw_note(start, raw))
                    if note is not None:
                        yield note
                    yield event, data if more is None else bytes(more), start, event_id
                    data = more = None
                    event = None
                    raw = 0
                    if line[:6] == b"data: ":
                        data, start = line[6:], number
                        continue
                name, colon, value = line.partition(b":")
                if value[:1] == b" ":
                    value = value[1:]
                if name not in _FIELDS:
                    stripped = name.replace(BOM, b"").strip()
                    if colon and stripped in _FIELDS:
                        what = (
                            "a byte order mark (U+FEFF) before the field name (files joined together?)"
                            if BOM in name
                            else "whitespace before the field name"
                        )
                        note = limited(
                            finding(
                                "sse_nonstandard_line",
                                f"line {number}: {name.decode('utf-8', 'replace')!r} has {what}; read as "
                                f"{stripped.decode()!r}",
                            )
                        )
                        if note is not None:
                            yield note
                        name = stripped
                    else:
                        shown = line[:80].decode("utf-8", "replace")
                        if colon and stripped.lower() == b"data":  # `Data:`: field names are
                            # case-sensitive (WHATWG), so it is not data; a server surely meant it as such
                            found = finding(
                                "sse_ignored_data",
                                f"line {number}: a field that looks like data ("
                                f"{name[:40].decode('utf-8', 'replace')!r}) was ignored: SSE field names "
                                f"are case-sensitive, so its payload is not read: {shown!r}",
                            )
                        elif colon and _TOKEN.match(stripped):
                            found = finding(
                                "sse_unknown_field",
                                f"line {number}: unknown SSE field {name[:40].decode('utf-8', 'replace')!r} "
                                f"ignored: {shown!r}",
                            )
                        else:
                            found = finding(
                                "sse_stray_text",
                                f"line {number}: text that is not an SSE field ignored: {shown!r}",
                            )
                        note = limited(found)
                        if note is not None:
                            yield note
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
                if more is None:
                    more = bytearray(data)
                more += b"\n"
                more += value
    if data is not None:
        if raw:
            note = limited(_raw_note(start, raw))
            if note is not None:
                yield note
        elif data.strip() != b"[DONE]" or more is not None:
            yield finding(
                "sse_unterminated_event",
                f"line {start}: the file ends without the blank line that closes this event; read anyway",
            )
        yield event, data if more is None else bytes(more), start, event_id
    elif event == "error":
        yield event, b"", number, event_id
    yield from limited.summary()


def _raw_note(start: int, lines: int) -> Finding:
    span = f"line {start}" if lines == 1 else f"lines {start}-{start + lines - 1}"
    return finding(
        "sse_raw_json",
        f"{span}: JSON text without the `data:` field name; read as the data of one event",
    )


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


class Unreadable:
    """Data that could not be read, in line with the payloads: the error it raises, kept so a
    reader can decide (stop, or mark the response in progress and read on)."""

    __slots__ = ("error",)

    def __init__(self, error: SSEDecodeError) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"Unreadable({self.error})"


def object_payload(payload: Any, what: str, number: int, raw: bytes) -> dict[str, Any] | Unreadable:
    """A decoded payload that is not a dict, as the object parsers read: a provider's list-wrapped
    error becomes its error object; anything else is unreadable (`what`: "data" or "line")."""
    if type(payload) is list and (message := list_error_message(payload)) is not None:
        return {"error": {"message": message}}
    return Unreadable(
        SSEDecodeError(
            f"{what} is JSON {type(payload).__name__}, expected an object",
            line_number=number,
            line=raw.decode("utf-8", "replace"),
        )
    )


Item = dict[str, Any] | _Done | Finding | Unreadable


def payload_items(frames: Iterable[Frame | Finding], where: list[int] | None = None) -> Iterator[Item]:
    """Frames -> payload dicts, `DONE` markers, findings and `Unreadable` markers, in order.

    An error frame (``event: error``, ``error:``) becomes a payload every accumulator reads as a
    provider error; so does a JSON array of error objects (Gemini's error bodies). `where[0]` is
    set to the line of the payload last yielded.
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
                if event is not None and "type" not in payload and event_type_from_line(event):
                    yield typed_by_line(payload, event, start)
                    payload["type"] = event
                yield payload
                continue
            if not data or data.isspace():
                continue  # an event without data carries no payload
            if data.strip() == b"[DONE]":  # also `data:  [DONE]` and `data:\t[DONE]`
                yield DONE
                continue
            try:
                payload = decode_json(data, start, notes)
            except SSEDecodeError as exc:
                if b"\n" in data:  # several data lines that are not one JSON text: try them one by one
                    yield from _line_by_line(data, start, exc, where)
                else:
                    yield Unreadable(exc)
                continue
            if notes:
                yield from notes
                notes.clear()
            if type(payload) is not dict:
                payload = object_payload(payload, "data", start, data)
                if type(payload) is Unreadable:
                    yield payload
                    continue
            if event is not None and "type" not in payload and event_type_from_line(event):
                yield typed_by_line(payload, event, start)
                payload["type"] = event
        else:
            payload = error_frame_payload(data.decode("utf-8", "replace"))
        where[0] = start
        yield payload


def typed_by_line(payload: dict[str, Any], event: str, line: int) -> Finding:
    """The finding of a payload without ``type`` whose SSE ``event:`` line names one: the event
    line's name is read as its type (Anthropic and Responses payloads carry their type in both)."""
    return finding(
        "malformed_chunk",
        f"line {line}: a payload without `type` ({compact_json(payload)[:80]}); read as the "
        f"type its SSE event line names, {event!r}",
    )


def _line_by_line(data: bytes, start: int, error: SSEDecodeError, where: list[int]) -> Iterator[Item]:
    """The data lines of one event that are separate JSON payloads (a proxy that wrote an error
    event before closing the event in progress, a server that writes no blank line between
    events): each line read alone (``[DONE]`` as the end marker), the rest unreadable."""
    lines = data.split(b"\n")
    decoded = []
    for line in lines:
        try:
            value = _loads(line)
        except Exception:
            value = None
        decoded.append(value if type(value) is dict else None)
    if not any(decoded):
        yield Unreadable(error)
        return
    yield finding(
        "sse_nonstandard_line",
        f"lines {start}-{start + len(lines) - 1}: the data lines of one event are separate JSON texts (a "
        "blank line missing between events); read line by line",
    )
    for offset, (line, value) in enumerate(zip(lines, decoded, strict=True)):
        if value is not None:
            where[0] = start + offset
            yield value
        elif line.strip() == b"[DONE]":  # the end marker, on its line like the payloads
            yield DONE
        elif line.strip():
            yield Unreadable(
                SSEDecodeError(
                    "data is not JSON (an event cut short?)",
                    line_number=start + offset,
                    line=line.decode("utf-8", "replace"),
                )
            )


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
    Framing findings are appended to `findings` when given; among them ``invalid_utf8`` says bytes
    that are not UTF-8 became U+FFFD. The recording readers (`read_recording`, `iter_responses`)
    then hold back every call whose arguments hold a U+FFFD; an accumulator fed from here does not
    see the finding, so do the same with `toolcall_lab.formats.base.hold_replaced`.
    """
    where = [0]
    for item in payload_items(sse_frames(byte_pieces(source, chunked=chunked)), where):
        if type(item) is dict:
            message = error_message(item)
            if message is not None:
                raise ProviderStreamError(message, payload=item, line_number=where[0])
            yield item
        elif item is DONE:
            return
        elif type(item) is Unreadable:
            raise item.error
        elif findings is not None:
            findings.append(item)  # type: ignore[arg-type]

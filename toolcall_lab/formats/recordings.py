"""Recordings on disk -> exchanges -> parsed responses, whatever container and wire format.

Containers: ``.sse`` (raw event stream), ``.chunks.jsonl`` (one SSE payload per line, vercel/ai
style), ``.json`` (a response body, or a list of recorded HTTP exchanges), ``.yaml`` (VCR cassettes
with several request/response interactions; ``!!binary`` bodies are decoded by their recorded
``content-encoding``). Wire formats are detected from the payloads.

Two ways in: `read_recording(path)` reads everything into `Exchange` values (payloads kept, for
importers and widgets); `iter_responses(path)` / `RecordingReader` parse ``.sse`` and ``.jsonl``
streams payload by payload from the file, in memory that grows with the calls, not the chunks nor
the responses.

A file of many exchanges (a cassette, an exchange list) loses nothing to one bad exchange: an
interaction whose body cannot be read (does not decompress, has an unknown shape, holds data that is
not JSON) becomes an `Exchange` with `unreadable` set, which ``parse(errors="keep")`` turns into a
response whose ``error`` and ``unreadable_data`` finding say which interaction and why; the others
are read as usual. With ``errors="raise"`` (the default) parsing stops there, with the responses
read before it on the exception.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO, Literal

from toolcall_lab.exceptions import ProviderStreamError, SSEDecodeError, UnknownFormatError, WireFormatError
from toolcall_lab.formats._bodies import decode_body, headers_of
from toolcall_lab.formats._values import unknown_shape
from toolcall_lab.formats.base import FindingLimit, error_response, finding, hold_replaced
from toolcall_lab.formats.dispatch import (
    ErrorPolicy,
    WireFormat,
    collect,
    detect_payload_format,
    iter_stream_responses,
    no_payloads,
    parse_body,
    try_detect,
    unknown_stream,
    unreadable_response,
)
from toolcall_lab.formats.errors import error_message, list_error_message
from toolcall_lab.formats.sse import (
    BOM,
    DONE,
    READ_SIZE,
    Unreadable,
    byte_pieces,
    decode_json,
    object_payload,
    payload_items,
    sse_frames,
)
from toolcall_lab.messages import Finding, ParsedResponse

__all__ = [
    "Exchange",
    "Recording",
    "RecordingReader",
    "detect_payload_format",
    "iter_responses",
    "read_recording",
]

Container = Literal["sse", "chunks-jsonl", "json", "exchanges", "cassette"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One recorded model call: what was asked (if recorded) and what came back."""

    format: WireFormat | Literal["unknown"]
    payloads: tuple[dict[str, Any], ...] | None = None
    """Streamed payloads in order, for streamed responses."""
    body: dict[str, Any] | None = None
    """The whole response body, for non-streamed responses."""
    request: dict[str, Any] | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    """The provider's error when the exchange is an error instead of a response (HTTP >= 400)."""
    items: tuple[Any, ...] | None = field(default=None, compare=False, repr=False)
    """The stream as read: payloads, ``[DONE]`` markers and framing findings, in order."""
    lines: tuple[int, ...] | None = field(default=None, compare=False, repr=False)
    """The line of each payload in `items` (for error messages), when read from a file."""
    unreadable: str | None = None
    """Why this exchange could not be read (``"interaction 1: the body does not decompress as gzip
    (...)"``), else None. Such an exchange holds nothing else (format ``"unknown"``)."""
    failure: WireFormatError | None = field(default=None, compare=False, repr=False)
    """The error behind `unreadable`, raised again by ``parse(errors="raise")``."""
    notes: tuple[Finding, ...] = field(default=(), compare=False, repr=False)
    """Findings about reading the body itself (``invalid_utf8``), given to its first response."""

    @property
    def streamed(self) -> bool:
        return self.payloads is not None

    def parse(self, *, batch: int = 0, errors: ErrorPolicy = "raise") -> list[ParsedResponse]:
        """Parse this exchange (a stream may hold several responses).

        A provider error raises `ProviderStreamError` (``partial_responses`` = what was read), or
        with ``errors="keep"`` comes back as a response whose ``error`` is set. An unreadable
        exchange raises its error, or with ``errors="keep"`` comes back as a response saying why.
        """
        out = self._parse(batch, errors)
        if self.notes and out:
            out[0] = replace(out[0], findings=(*self.notes, *out[0].findings))
            replaced = next((n for n in self.notes if n.kind == "invalid_utf8"), None)
            if replaced is not None:  # the body held bytes that are not UTF-8: every response of it
                out = [hold_replaced(r, replaced.message.partition(";")[0]) for r in out]
        return out

    def _parse(self, batch: int, errors: ErrorPolicy) -> list[ParsedResponse]:
        if self.unreadable is not None:
            if errors == "keep" or self.failure is None:
                return [unreadable_response(self.unreadable)]
            raise self.failure
        if self.error is not None:
            response = error_response(self.error, self.format, self.body)
            if errors == "keep":
                return [response]
            exc = ProviderStreamError(self.error, payload=self.body or {}, line_number=None)
            exc.partial_responses = (response,)
            raise exc
        if self.payloads is not None:
            where = [0]
            items: Iterable[Any] = self.payloads
            if self.items is not None:
                items = self.items if self.lines is None else _with_lines(self.items, self.lines, where)
            fmt = None if self.format == "unknown" else self.format
            return collect(iter_stream_responses(items, fmt=fmt, batch=batch, errors=errors, where=where))
        try:
            return [parse_body(self.body or {}, batch=batch)]
        except ProviderStreamError as exc:
            if errors == "keep":
                return list(exc.partial_responses)  # type: ignore[arg-type]
            raise


def _with_lines(items: tuple[Any, ...], lines: tuple[int, ...], where: list[int]) -> Iterator[Any]:
    payload_lines = iter(lines)
    for item in items:
        if type(item) is dict:
            where[0] = next(payload_lines, 0)
        yield item


@dataclass(frozen=True, slots=True, kw_only=True)
class Recording:
    """A recording file: its container kind and the exchanges it holds."""

    path: str
    container: Container
    exchanges: tuple[Exchange, ...]

    def parse(self, *, errors: ErrorPolicy = "raise") -> list[ParsedResponse]:
        """Every response in the file, in order; fallback ids numbered by position.

        ``errors="keep"`` returns provider errors as responses (``error`` set) and goes on with
        the next exchange; ``"raise"`` stops at the first, with everything read so far on the
        exception (``partial_responses``).
        """
        out: list[ParsedResponse] = []
        for exchange in self.exchanges:
            try:
                out.extend(exchange.parse(batch=len(out), errors=errors))
            except WireFormatError as exc:
                exc.partial_responses = (*out, *exc.partial_responses)
                _name(exc, self.path)
                raise
        return out


def _name(exc: WireFormatError, path: str) -> None:
    if not str(exc).startswith(path):
        exc.args = (f"{path}: {exc}",)


# -- reading streams -----------------------------------------------------------------------------
def _jsonl_items(pieces: Iterable[bytes], where: list[int]) -> Iterator[dict[str, Any] | Any]:
    """One JSON payload per line (a BOM and blank lines tolerated; lines end in LF, CRLF or CR, as
    in the SSE reader, also across read boundaries; ``[DONE]`` lines are markers; a line that is not
    a JSON object is an `Unreadable` marker)."""
    notes: list[Finding] = []
    limit = FindingLimit()
    number = 0
    pending = b""
    held: list[bytes] = []  # more pieces of the unfinished line `pending` (joined once, at its end)
    first = True
    skip_lf = False  # the last piece ended in CR: a LF starting the next one completes a CRLF
    for piece in chain(pieces, (None,)):
        if piece is None:
            if not pending and not held:
                break
            lines, pending = [b"".join((pending, *held))], b""
        else:
            if skip_lf:
                skip_lf = False
                if piece[:1] == b"\n":
                    piece = piece[1:]
            if not piece:
                continue
            if pending and not first and b"\n" not in piece and b"\r" not in piece:
                held.append(piece)  # a line longer than a piece: copy it once, when it ends
                continue
            if held:
                piece = b"".join((pending, *held, piece))
                held.clear()
            else:
                piece = pending + piece
            if first:
                if len(piece) < 3 and BOM.startswith(piece):
                    pending = piece
                    continue
                first = False
                if piece.startswith(BOM):
                    piece = piece[3:]
            if b"\r" in piece:  # CR or CRLF line ends (a raw CR cannot be inside a JSON string)
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
            del piece  # (a huge line is held once)
        lines.reverse()
        while lines:
            line = lines.pop()
            number += 1
            if line[-1:] == b"\r":
                line = line[:-1]
            if not line or line.isspace():
                continue
            if line[:1] not in b"{[" and line.lstrip()[:1] not in b"{[":
                if line.startswith(b"data:"):  # an SSE line among the JSON lines: its data is the JSON
                    note = limit(
                        finding(
                            "sse_nonstandard_line",
                            f"line {number}: a `data:` line in a JSON-lines file; read as the JSON after it",
                        )
                    )
                    if note is not None:
                        yield note
                    line = line[5:]
                elif line.startswith((b":", b"event:", b"id:", b"retry:")):
                    note = limit(
                        finding(
                            "sse_nonstandard_line",
                            f"line {number}: an SSE line in a JSON-lines file ignored: "
                            f"{line[:60].decode('utf-8', 'replace')!r}",
                        )
                    )
                    if note is not None:
                        yield note
                    continue
            if line.strip() == b"[DONE]":
                yield DONE
                continue
            try:
                payload = decode_json(line, number, notes)
            except SSEDecodeError as exc:
                yield Unreadable(exc)
                continue
            if notes:
                yield from notes
                notes.clear()
            if type(payload) is not dict:
                payload = object_payload(payload, "line", number, line)
                if type(payload) is Unreadable:
                    yield payload
                    continue
            where[0] = number
            yield payload
    yield from limit.summary()


Framing = Literal["json", "jsonl", "sse"]
_WIDE_BOMS = (
    (b"\x00\x00\xfe\xff", "UTF-32BE"),
    (b"\xff\xfe\x00\x00", "UTF-32LE"),
    (b"\xfe\xff", "UTF-16BE"),
    (b"\xff\xfe", "UTF-16LE"),
)


def _refuse_wide(first: bytes) -> None:
    """Refuse a stream file in UTF-16 or UTF-32 (a byte order mark, or the NUL bytes of ASCII text
    in those encodings: Windows PowerShell 5's ``>`` writes UTF-16): event streams and JSON lines
    are UTF-8, and read as such they would give no payload and a misleading error."""
    name = next((name for bom, name in _WIDE_BOMS if first.startswith(bom)), None)
    if first.startswith(b"\x1f\x8b"):
        raise UnknownFormatError(
            "the file is gzip data (it starts with the gzip magic bytes 1f 8b), not an event stream or "
            "JSON lines; decompress it first, e.g. `gunzip -c in > out.sse`"
        )
    head = first[:4]
    if name is None and len(head) == 4 and b"\x00" in head:
        zeros = "".join("0" if b == 0 else "x" for b in head)
        name = {"x0x0": "UTF-16LE", "0x0x": "UTF-16BE", "x000": "UTF-32LE", "000x": "UTF-32BE"}.get(zeros)
    if name is not None:
        raise UnknownFormatError(
            f"the file is {name} text, not UTF-8 (event streams and JSON lines are UTF-8); convert it "
            f"first, e.g. `iconv -f {name} -t UTF-8 in > out`"
        )


def _sniff(first: bytes, container: Container, read: Callable[[], bytes]) -> tuple[Framing, list[bytes]]:
    """How a stream file is framed, from its bytes: the extension is a hint, the bytes decide (a
    ``.sse`` file may hold a JSON error body or JSON lines, a ``.jsonl`` file SSE). JSON text is one
    document or JSON lines by its structure, not its line ends (`_after_first_value`). `read` gives
    the next block of the file (``b""`` at its end); returns the framing and the blocks read, which
    the reader reads again."""
    head = (first[3:] if first.startswith(BOM) else first).lstrip()
    if head[:1] in (b"{", b"["):
        if container == "chunks-jsonl":
            return "jsonl", [first]
        blocks = [first]
        more = _after_first_value(first, len(first) - len(head), blocks, read)
        return ("jsonl" if more else "json"), blocks
    if container == "chunks-jsonl" and not head.startswith((b"data:", b"event:", b"id:", b"retry:", b":")):
        return "jsonl", [first]
    return "sse", [first]


_OUTSIDE = re.compile(rb"[^{}\[\]\"]*+")
_INSIDE = re.compile(rb'(?:[^"\\]++|\\.)*+', re.DOTALL)
_BLANKS = re.compile(rb"[ \t\r\n]*+")


def _after_first_value(block: bytes, pos: int, blocks: list[bytes], read: Callable[[], bytes]) -> bool:
    """Does text other than whitespace follow the first JSON value (which starts at `pos` of `block`)?
    Scans the value's structure (brackets, strings and their escapes), whatever its line ends (CR
    only, LF, CRLF) and however long its first line, block by block (each read is kept in `blocks`;
    memory grows with the first value only). A value the file ends inside is one (cut) document."""
    depth = 0
    in_string = escaped = False
    while True:
        end = len(block)
        while pos < end:
            if in_string:
                if escaped:
                    pos, escaped = pos + 1, False
                    continue
                pos = _INSIDE.match(block, pos).end()  # type: ignore[union-attr]
                if pos >= end:
                    break
                if block[pos] == 0x22:  # the closing quote
                    in_string = False
                else:  # a backslash ending the block: the next block's first byte is escaped
                    escaped = True
                pos += 1
                continue
            pos = _OUTSIDE.match(block, pos).end()  # type: ignore[union-attr]
            if pos >= end:
                break
            byte = block[pos]
            pos += 1
            if byte == 0x22:
                in_string = True
            elif byte in (0x7B, 0x5B):  # { [
                depth += 1
            else:
                depth -= 1
                if depth <= 0:
                    return _more_text(block, pos, blocks, read)
        block = read()
        if not block:
            return False
        blocks.append(block)
        pos = 0


def _more_text(block: bytes, pos: int, blocks: list[bytes], read: Callable[[], bytes]) -> bool:
    """Is there text other than whitespace from `pos` on (reading further blocks as needed)?"""
    while True:
        pos = _BLANKS.match(block, pos).end()  # type: ignore[union-attr]
        if pos < len(block):
            return True
        block = read()
        if not block:
            return False
        blocks.append(block)
        pos = 0


_CONTAINER_OF: dict[Framing, Container] = {"json": "json", "jsonl": "chunks-jsonl", "sse": "sse"}


def _stream_items(handle: BinaryIO, framing: Framing, where: list[int]) -> Iterator[Any]:
    pieces = byte_pieces(handle)
    if framing == "jsonl":
        return _jsonl_items(pieces, where)
    return payload_items(sse_frames(pieces), where)


STDIN = "-"
"""The path that names standard input (``toolcall-lab parse -``)."""


class RecordingReader:
    """Iterate a recording's responses. ``.sse`` and ``.jsonl`` files are parsed payload by payload
    as they are read (bounded memory); other containers are small and read whole.

    Args:
        path: the recording file, or ``"-"`` for standard input (its container is told from its
            bytes: a cassette, a JSON body or exchange list, JSON lines, or an event stream,
            streamed as a file is).
        errors: ``"raise"`` (stop at a provider error, `ProviderStreamError` carrying the responses
            so far) or ``"keep"`` (yield the failed response with ``error`` set and go on).
        stdin: what ``"-"`` reads (default: ``sys.stdin.buffer``).
    """

    def __init__(
        self, path: str | Path, *, errors: ErrorPolicy = "raise", stdin: BinaryIO | None = None
    ) -> None:
        self.errors: ErrorPolicy = errors
        self._stdin: BinaryIO | None = None
        if str(path) == STDIN:
            self.path = Path("<stdin>")  # (how errors name it)
            self._stdin = stdin if stdin is not None else sys.stdin.buffer
            self.container: Container = "sse"  # until its bytes say otherwise
        else:
            self.path = Path(path)
            self.container = _container_of(self.path)

    def __iter__(self) -> Iterator[ParsedResponse]:
        try:
            if self._stdin is not None:
                yield from self._read(self._stdin, None)
            elif self.container in ("sse", "chunks-jsonl"):
                try:
                    handle = self.path.open("rb")
                except OSError as exc:
                    raise UnknownFormatError(f"cannot read: {exc}") from exc
                with handle:
                    yield from self._read(handle, self.container)
            else:
                yield from self._parse(read_recording(self.path).exchanges)
        except WireFormatError as exc:
            _name(exc, str(self.path))
            raise

    def _parse(self, exchanges: Iterable[Exchange]) -> Iterator[ParsedResponse]:
        batch = 0
        for exchange in exchanges:
            responses = exchange.parse(batch=batch, errors=self.errors)
            batch += len(responses)
            yield from responses

    def _read(self, handle: BinaryIO, container: Container | None) -> Iterator[ParsedResponse]:
        """A stream file (`container` its extension's hint), or standard input (None: the bytes
        decide, a cassette and whole JSON are read whole, a stream payload by payload)."""
        first = handle.read(READ_SIZE)
        _refuse_wide(first)
        if container is None and _looks_like_cassette(first):
            self.container = "cassette"
            yield from self._parse(_cassette(first + handle.read(), self.path))
            return
        framing, blocks = _sniff(first, container or "sse", lambda: handle.read(READ_SIZE))
        self.container = _CONTAINER_OF[framing]
        if framing == "json":
            blocks.append(handle.read())
            doc = _load_json(b"".join(blocks), self.path)
            if container is None:
                self.container, exchanges = _json_exchanges(doc)
                yield from self._parse(exchanges)
            else:
                yield from _exchange_of_json(doc).parse(errors=self.errors)
            return
        where = [0]
        items = _stream_items(_Prefixed(blocks, handle), framing, where)  # type: ignore[arg-type]
        yield from iter_stream_responses(items, errors=self.errors, where=where)


def _looks_like_cassette(first: bytes) -> bool:
    """YAML with a cassette's ``interactions`` list (what `read_recording` reads from .yaml)."""
    head = first.lstrip(b"\xef\xbb\xbf \t\r\n")
    return not head.startswith((b"{", b"[", b"data:", b"event:", b":")) and (
        head.startswith((b"interactions:", b"---")) or b"\ninteractions:" in head[:65536]
    )


class _Prefixed:
    """A binary file whose first blocks were already read (for sniffing)."""

    def __init__(self, blocks: list[bytes], handle: BinaryIO) -> None:
        self._blocks = blocks
        self._handle = handle

    def read(self, size: int) -> bytes:
        if self._blocks:
            return self._blocks.pop(0)
        return self._handle.read(size)


def iter_responses(path: str | Path, *, errors: ErrorPolicy = "raise") -> Iterator[ParsedResponse]:
    """Every response in a recording, parsed as the file is read (see `RecordingReader`)."""
    return iter(RecordingReader(path, errors=errors))


# -- reading whole files -------------------------------------------------------------------------
def _container_of(path: Path) -> Container:
    if path.is_dir():
        raise UnknownFormatError(
            f"{path}: a directory, not a recording file (give one file; `toolcall-lab conformance "
            "DIR` runs a folder of conformance cases)"
        )
    if not path.exists():
        raise UnknownFormatError(f"{path}: no such file")
    name = path.name
    if name.endswith(".sse"):
        return "sse"
    if name.endswith(".jsonl"):
        return "chunks-jsonl"
    if name.endswith((".yaml", ".yml")):
        return "cassette"
    if name.endswith(".json"):
        return "json"
    raise UnknownFormatError(
        f"{path}: unknown file type (expected .sse, .chunks.jsonl, .json or a .yaml cassette)"
    )


def _load_json(data: bytes, path: Path) -> Any:
    text = data[3:] if data.startswith(BOM) else data
    try:
        return json.loads(text)
    except RecursionError:
        raise SSEDecodeError("JSON nested too deeply to read", line_number=1, line="") from None
    except json.JSONDecodeError as exc:
        lines = text.decode("utf-8", "replace").split("\n")
        raise SSEDecodeError(
            f"not JSON ({exc.msg})",
            line_number=exc.lineno,
            line=lines[exc.lineno - 1] if 0 < exc.lineno <= len(lines) else "",
        ) from None
    except UnicodeDecodeError as exc:
        raise UnknownFormatError(f"{path}: not UTF-8 text ({exc})") from None


def _collect(items: Iterable[Any], where: list[int]) -> tuple[list[Any], tuple[int, ...]]:
    """The stream's items, and the line of each payload."""
    out: list[Any] = []
    lines: list[int] = []
    for item in items:
        out.append(item)
        if type(item) is dict:
            lines.append(where[0])
    return out, tuple(lines)


def _exchange_of_stream(items: list[Any], lines: tuple[int, ...] | None = None, **extra: Any) -> Exchange:
    payloads = tuple(p for p in items if type(p) is dict)
    fmt = next((f for p in payloads if (f := try_detect(p))), None)
    if fmt is None:
        message = next((m for p in payloads if (m := error_message(p))), None)
        if message is not None:
            return Exchange(format="openai-chat", payloads=None, body=payloads[0], error=message, **extra)
        broken = next((i.error for i in items if type(i) is Unreadable), None)
        if broken is not None and not payloads:
            raise broken
        raise UnknownFormatError(
            no_payloads([i for i in items if isinstance(i, Finding)])
            if not payloads
            else unknown_stream(list(payloads))
        )
    return Exchange(format=fmt, payloads=payloads, items=tuple(items), lines=lines, **extra)


def _exchange_of_json(doc: Any, status: int | None = None, **extra: Any) -> Exchange:
    """A whole JSON document: a response body, a provider error body, a JSON array of error objects
    (Gemini's REST API), or a JSON array of stream payloads (a stream saved as one array)."""
    if isinstance(doc, list):
        message = list_error_message(doc)
        if message is not None:
            return Exchange(format="openai-chat", error=_with_status(message, status), **extra)
        if status is not None and status >= 400:
            return Exchange(format="openai-chat", error=f"HTTP {status}: {json.dumps(doc)[:300]}", **extra)
        if doc and all(isinstance(item, dict) for item in doc) and any(try_detect(item) for item in doc):
            return _exchange_of_stream(list(doc), **extra)
        raise UnknownFormatError(
            "a JSON array that is neither stream payloads nor error objects is not a response body"
        )
    return _exchange_of_doc(doc, status, **extra)


def _exchange_of_doc(doc: Any, status: int | None = None, **extra: Any) -> Exchange:
    """A whole JSON document: a response body, or a provider error body."""
    if not isinstance(doc, dict):
        if status is not None and status >= 400:
            return Exchange(format="openai-chat", error=f"HTTP {status}: {json.dumps(doc)[:300]}", **extra)
        raise UnknownFormatError(f"JSON {type(doc).__name__} is not a response body")
    fmt = try_detect(doc)
    failed = status is not None and status >= 400
    message = error_message(doc) if fmt is None or failed else None
    if fmt is None or message is not None:
        if message is None and failed:
            message = f"{json.dumps(doc, ensure_ascii=False)[:300]}"
        if message is None:
            raise UnknownFormatError(unknown_shape(doc, "body"))
        message = _with_status(message, status)
        return Exchange(
            format="anthropic" if doc.get("type") == "error" else "openai-chat",
            body=doc,
            error=message,
            **extra,
        )
    return Exchange(format=fmt, body=doc, **extra)


def _with_status(message: str, status: int | None) -> str:
    """A provider's error message with the HTTP status it came with (``HTTP 429: ...``)."""
    return f"HTTP {status}: {message}" if status is not None and status >= 400 else message


def _exchange_of_text(text: str, status: int | None, **extra: Any) -> Exchange:
    """A recorded response body as text: JSON (an object, or an array of errors), or an event stream."""
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith(("{", "[")):
        try:
            doc = json.loads(stripped)
        except RecursionError:
            raise UnknownFormatError("the body is JSON nested too deeply to read") from None
        except json.JSONDecodeError as exc:
            streamy = any(line.startswith(("data:", "event:")) for line in stripped.splitlines()[:50])
            if (status is None or status < 400) and not streamy:
                raise SSEDecodeError(
                    f"the body is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}; cut off?)",
                    line_number=exc.lineno,
                    line=stripped.split("\n")[exc.lineno - 1] if exc.lineno else "",
                ) from None
        else:
            return _exchange_of_json(doc, status, **extra)
    if status is not None and status >= 400:
        return Exchange(format="openai-chat", error=f"HTTP {status}: {text.strip()[:300]}", **extra)
    where = [0]
    items, lines = _collect(payload_items(sse_frames(byte_pieces(text)), where), where)
    return _exchange_of_stream(items, lines, **extra)


def _exchange_of_recorded(raw: Any, status: int | None, **extra: Any) -> Exchange:
    if isinstance(raw, Mapping):
        return _exchange_of_doc(dict(raw), status, **extra)
    if isinstance(raw, list):
        return _exchange_of_json(raw, status, **extra)
    if isinstance(raw, str):
        return _exchange_of_text(raw, status, **extra)
    if raw is None:
        return _exchange_of_text("", status, **extra)
    raise UnknownFormatError(f"response body is {type(raw).__name__}, expected text or an object")


def _unreadable(where: str, exc: WireFormatError) -> Exchange:
    """An exchange that could not be read: it costs only itself (see `Exchange.unreadable`)."""
    exc.args = (f"{where}: {exc}",)
    return Exchange(format="unknown", unreadable=str(exc), failure=exc)


def read_recording(path: str | Path) -> Recording:
    """Read a recording file; raises `WireFormatError` subclasses naming the file when the file as
    a whole is unreadable. In a file of many exchanges, a bad one is kept as `Exchange.unreadable`."""
    p = Path(path)
    try:
        return _read(p)
    except WireFormatError as exc:
        _name(exc, str(p))
        raise


def _read(p: Path) -> Recording:
    container = _container_of(p)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise UnknownFormatError(f"cannot read: {exc}") from exc
    if container in ("sse", "chunks-jsonl"):
        _refuse_wide(data[:4])
        framing, _ = _sniff(data, container, _Empty().read)
        if framing == "json":
            return Recording(
                path=str(p), container="json", exchanges=(_exchange_of_json(_load_json(data, p)),)
            )
        where = [0]
        items, lines = _collect(_stream_items(_Prefixed([data], _Empty()), framing, where), where)  # type: ignore[arg-type]
        exchange = _exchange_of_stream(items, lines)
        return Recording(path=str(p), container=_CONTAINER_OF[framing], exchanges=(exchange,))
    if container == "cassette":
        return Recording(path=str(p), container="cassette", exchanges=_cassette(data, p))
    container, exchanges = _json_exchanges(_load_json(data, p))
    return Recording(path=str(p), container=container, exchanges=exchanges)


def _json_exchanges(doc: Any) -> tuple[Container, tuple[Exchange, ...]]:
    """A whole JSON document: a list of recorded exchanges, a response body, an error body..."""
    if isinstance(doc, list) and doc and all(isinstance(x, dict) and "response" in x for x in doc[:1]):
        return "exchanges", tuple(_exchanges(doc))
    if isinstance(doc, dict | list):
        if isinstance(doc, list) and not doc:
            raise UnknownFormatError("an empty JSON array: no exchanges, no response")
        try:
            return "json", (_exchange_of_json(doc),)
        except UnknownFormatError:
            if isinstance(doc, list):
                first = next((x for x in doc if isinstance(x, dict)), None)
                shape = "" if first is None else "; " + unknown_shape(first, "first element")
                raise UnknownFormatError(
                    "JSON is neither a response body, a list of exchanges, nor a list of error objects"
                    + shape
                ) from None
            raise
    raise UnknownFormatError("JSON is neither a response body nor a list of exchanges")


class _Empty:
    def read(self, size: int = 0) -> bytes:
        return b""


def _exchanges(doc: list[Any]) -> Iterator[Exchange]:
    for number, x in enumerate(doc):
        if not isinstance(x, dict) or not isinstance(x.get("response") or {}, dict):
            yield _unreadable(f"exchange {number}", UnknownFormatError("not an object with a response"))
            continue
        response = x.get("response") or {}
        request = x.get("request") or {}
        request = request if isinstance(request, dict) else {}
        headers = headers_of(response.get("headers"))
        status = response.get("status_code") or response.get("status")
        try:
            body, notes = decode_body(response.get("body"), headers)
            exchange = _exchange_of_recorded(
                body,
                status if isinstance(status, int) else None,
                request=request.get("body") if isinstance(request.get("body"), dict) else None,
                response_headers=headers,
            )
        except WireFormatError as exc:
            yield _unreadable(f"exchange {number}", exc)
            continue
        yield replace(exchange, notes=_where(f"exchange {number}", notes)) if notes else exchange


def _cassette(data: bytes, p: Path) -> tuple[Exchange, ...]:
    import yaml

    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = yaml.load(data, Loader=loader)
    except RecursionError:
        raise UnknownFormatError("not a readable YAML cassette: nested too deeply") from None
    except yaml.YAMLError as exc:
        raise UnknownFormatError(f"not a readable YAML cassette: {exc}".replace("\n", " ")) from None
    interactions = doc.get("interactions") if isinstance(doc, dict) else None
    if not isinstance(interactions, list):
        raise UnknownFormatError("YAML without a cassette 'interactions' list")
    if not interactions:
        raise UnknownFormatError("the cassette holds no interactions")
    items: list[Exchange] = []
    for number, item in enumerate(interactions):
        where = f"interaction {number}"
        if not isinstance(item, dict):
            items.append(_unreadable(where, UnknownFormatError("not a mapping")))
            continue
        response, request = item.get("response") or {}, item.get("request") or {}
        if not isinstance(response, dict) or not isinstance(request, dict):
            items.append(_unreadable(where, UnknownFormatError("its request or response is not a mapping")))
            continue
        headers = headers_of(response.get("headers"))
        status = response.get("status")
        code = status.get("code") if isinstance(status, dict) else status
        try:
            raw = response.get("parsed_body")
            notes: list[Finding] = []
            if raw is None:
                body = response.get("body")
                raw, notes = decode_body(body if body is not None else response.get("content"), headers)
            exchange = _exchange_of_recorded(
                raw,
                code if isinstance(code, int) else None,
                request=request.get("parsed_body"),
                response_headers=headers,
            )
        except WireFormatError as exc:
            items.append(_unreadable(where, exc))
            continue
        items.append(replace(exchange, notes=_where(where, notes)) if notes else exchange)
    return tuple(items)


def _where(where: str, notes: list[Finding]) -> tuple[Finding, ...]:
    return tuple(replace(n, message=f"{where}: {n.message}") for n in notes)


def findings_of(items: Iterable[Any]) -> list[Finding]:
    """The framing findings among stream items (for display)."""
    return [i for i in items if isinstance(i, Finding)]

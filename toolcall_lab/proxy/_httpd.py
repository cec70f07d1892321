"""The proxy's HTTP/1.1 server side: a lean asyncio protocol, so a request costs the proxy little more
than its own work.

A general web framework spends a good part of a loopback hop on what the proxy does not use (routing
tables, middlewares, multidicts, request objects built field by field). This server reads a request
(RFC 9112), hands the whole request to one handler, and writes its `Response` (``Content-Length``) or
`StreamResponse` (chunked, with flow control; close-delimited for HTTP/1.0). What it holds to:

- **Strict heads.** Lines end with CRLF; a header name is a token; a value is visible characters,
  spaces and tabs only: a bare CR or LF, NUL or another control character anywhere in the head, an
  obsolete folded line, a malformed request line or Content-Length, a missing or repeated Host (HTTP/1.1)
  is a 400, never passed on. Values are kept as the bytes received (decoded as latin-1, which maps each
  byte to one character, so they go out again byte for byte).
- **Bodies.** ``Content-Length`` or ``Transfer-Encoding: chunked`` (chunk sizes checked as they are
  read: hexadecimal digits only, a chunk that would pass the body limit is refused before it is read;
  trailers checked and dropped). ``Content-Encoding: gzip`` / ``deflate`` bodies are decoded (the
  limit applies to the decoded size); another coding is a 415. ``Expect: 100-continue`` is answered
  once the head is read; any other expectation is a 417.
- **Connections.** Keep-alive (HTTP/1.1 by default, HTTP/1.0 when asked, and then said so in the
  reply), ``Connection: close``, pipelined requests answered in order. A client that half-closes its
  side after a complete request (``shutdown(SHUT_WR)``) still gets its reply. The head of a request
  must arrive whole within `head_timeout_s` of its first byte (a fresh connection: of its opening),
  else a 408; its body must arrive whole within `body_timeout_s` of the end of the head, else a 408
  and the connection closes; a connection idle for `keepalive_s` is closed. At most
  `max_connections` are open: at the cap a new one takes the place of the longest-idle kept-alive
  connection, or is answered 503 at once when every connection is in use.
- **Early replies reach the client.** A refusal written before the request's body was read (a 413 from
  the Content-Length, a 503 past the body budget or the connection cap, a 408, a malformed head) is
  followed by a lingering close, as Apache and nginx do: the server half-closes (FIN after the reply)
  and reads and discards what the client still sends (up to twice `max_body_bytes`, for 30 s at most
  and 2 s without a byte), then closes; a lingering connection counts as idle at the connection cap.
  Closing at once, with the body still arriving, makes the kernel answer with a reset, and a client
  still sending (httpx, the openai client) loses the reply.
- **Handlers.** A handler is never cancelled when its client goes away (the proxy finishes what it
  started: a retry finds the reply kept); a stream stops when its client is gone. `HTTPServer.close`
  stops accepting, closes idle connections, and gives handlers in flight `grace_s` to deliver their
  replies (with ``Connection: close``) before it cancels them.
"""

from __future__ import annotations

import asyncio
import http
import logging
import re
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from email.utils import formatdate
from typing import Any, cast

logger = logging.getLogger("toolcall_lab.proxy")

MAX_HEAD = 64 * 1024
"""Largest request line + headers accepted (a larger head gets a 431); trailers likewise."""
MAX_BUFFERED = 1024 * 1024
"""Bytes read ahead of the request being answered before reading pauses."""
MAX_KNOWN_HEADS = 256
"""Heads remembered (by their bytes, Content-Length aside) so a client's next request with the same head
is not parsed again; the whole set is dropped when it fills."""
MAX_KNOWN_HEAD_BYTES = 8192
"""Only heads up to this size are remembered (real clients' are about 1 KB): at most 2 MB in all."""
REPEATED = "\n"
"""Between the values of a header sent more than once (a line feed cannot be in a value): each is
written as a line of its own again (``Set-Cookie`` must never be joined, RFC 9110 5.3)."""
MAX_CHUNK_LINE = 4096
"""Longest chunk-size line (size and extensions) accepted."""
LINGER_IDLE_S = 2.0
LINGER_S = 30.0
"""After an early reply (a refusal written before the request's body was read: 413, 503, 408, ...) the
connection half-closes and reads and discards what the client still sends, for at most `LINGER_S` in
all and `LINGER_IDLE_S` without a byte (Apache's lingering close: 30 s and 2 s), so the client's TCP
stack is not reset while it sends and keeps the reply."""

_REASONS = {s.value: s.phrase.encode() for s in http.HTTPStatus}
_date_cache: list[Any] = [0, b""]

_TCHAR = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]"
_REQUEST_LINE = re.compile(rb"(%s+) ([\x21-\x7e]+) (HTTP/[0-9]\.[0-9])\r\n" % _TCHAR)
_FIELD = re.compile(
    rb"(%s+):[ \t]*((?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?)[ \t]*\r\n" % _TCHAR
)
"""One header line: a token name, a value of visible characters (obs-text included) with inner spaces
and tabs, CRLF. Anything else (a bare CR or LF, NUL, another control character) does not match."""
_CTL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_TOKEN_START = re.compile(_TCHAR)
_CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;[\t\x20-\x7e\x80-\xff]*)?")
_LENGTH = re.compile(r"[0-9]{1,18}")
_LENGTH_LINE = re.compile(rb"\r\n[Cc]ontent-[Ll]ength:[ \t]*([0-9]{1,18})[ \t]*(?=\r\n)")
"""A plain Content-Length line: the one line in which a client's successive heads usually differ."""
_ABSOLUTE = re.compile(r"https?://[^/?#]*", re.I)


def _plain_number(text: str) -> bool:
    """ASCII digits only, at most 18 (``str.isdigit`` alone takes ``²``, a latin-1 character)."""
    return text.isascii() and text.isdigit() and len(text) < 19


def _date() -> bytes:
    """The Date header line, formatted once per second."""
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache[0], _date_cache[1] = now, b"Date: " + formatdate(now, usegmt=True).encode() + b"\r\n"
    line: bytes = _date_cache[1]
    return line


class Request:
    """A request as read: method, path (query string apart), lower-case header names, the whole body
    (decoded when it came with a ``Content-Encoding``).

    `memo` is shared by every request whose head had the same bytes (Content-Length aside): a handler
    keeps there what it works out from the headers alone (the caller's scope, the headers it forwards),
    so that a client's next request with the same head costs nothing of it. `parsed` is free for the
    handler (the body as it read it, between the server's fast path and its task)."""

    __slots__ = ("body", "headers", "memo", "method", "parsed", "path", "query", "version")

    def __init__(
        self,
        method: str,
        path: str,
        query: str,
        version: str,
        headers: dict[str, str],
        body: bytes,
        memo: dict[str, Any] | None = None,
    ) -> None:
        self.method, self.path, self.query, self.version = method, path, query, version
        self.headers, self.body = headers, body
        self.memo: dict[str, Any] = {} if memo is None else memo
        self.parsed: Any = None


class Response:
    """A whole reply: status, headers and body (``Content-Length`` is added when written)."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.status, self.body, self.headers = status, body, headers

    @property
    def content_type(self) -> str:
        return next((v for k, v in self.headers.items() if k.lower() == "content-type"), "")


class StreamResponse:
    """A reply whose body is written as `chunks` yields it; `chunks` is closed when the client goes."""

    __slots__ = ("chunks", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], chunks: AsyncIterator[bytes]) -> None:
        self.status, self.headers, self.chunks = status, headers, chunks


Reply = Response | StreamResponse
Handler = Callable[[Request], Awaitable[Reply]]
FastHandler = Callable[[Request], Response | None]
"""Answers a request at once, without a task (None: leave it to the `Handler`)."""
_INTERNAL_ERROR = b'{"error": {"message": "internal error", "type": "server_error"}}'


def _internal_error() -> Response:
    return Response(500, _INTERNAL_ERROR, {"Content-Type": "application/json"})


class BadRequest(Exception):
    def __init__(self, status: int, message: str, code: str = "") -> None:
        super().__init__(message)
        self.status, self.code = status, code


class _Pending:
    """A request whose head is read and whose body is still arriving."""

    __slots__ = (
        "body",
        "chunked",
        "headers",
        "keep",
        "length",
        "memo",
        "method",
        "path",
        "query",
        "stage",
        "version",
    )

    def __init__(
        self,
        method: str,
        path: str,
        query: str,
        version: str,
        headers: dict[str, str],
        keep: bool,
        memo: dict[str, Any] | None = None,
    ) -> None:
        self.method, self.path, self.query, self.version = method, path, query, version
        self.headers, self.keep = headers, keep
        self.memo = memo
        self.chunked = False
        self.length = 0
        """Content-Length; with chunked, what is left of the chunk being read."""
        self.stage = "size"  # chunked: size | data | crlf | trailers
        self.body = bytearray()


def _bad_line(line: bytes, what: str) -> BadRequest:
    """A 400 saying what is wrong with a head line (a control character, folding, no colon...)."""
    shown = line[:100]
    found = _CTL.search(line)
    if found is not None:
        char = {0: "NUL", 10: "a bare LF", 13: "a bare CR"}.get(found.group()[0], f"{found.group()!r}")
        why = f"holds {char} (control characters are refused, never forwarded)"
    elif line[:1] in (b" ", b"\t"):
        why = "starts with whitespace (folded header lines are obsolete and refused)"
    elif b":" not in line:
        why = "has no colon (a header line is `Name: value`)"
    else:
        why = "is not `Name: value` (the name must be a token: letters, digits and !#$%&'*+-.^_`|~)"
    return BadRequest(400, f"{what} {shown!r} {why}")


def _fields(
    head: bytes, pos: int, what: str, single: frozenset[str] = frozenset()
) -> tuple[dict[str, str], int]:
    """Header (or trailer) lines from `pos` to the end of `head` (which ends with CRLF): lower-case names,
    values as latin-1 text (byte for byte); the values of a repeated name joined with a line feed
    (`REPEATED`, which no value can hold: each goes on as a line of its own, RFC 9110 5.3), except those
    in `single`, whose repetition is a 400 (a field that is not a list, such as a credential: two values
    would reach the upstream as one). Returns the fields and how many Host lines there were."""
    fields: dict[str, str] = {}
    hosts = 0
    end = len(head)
    match = _FIELD.match
    while pos < end:
        found = match(head, pos)
        if found is None:
            stop = head.find(b"\r\n", pos)
            raise _bad_line(head[pos : stop if stop >= 0 else end], what)
        key = found.group(1).decode("ascii").lower()
        value = found.group(2).decode("latin-1")
        if key in fields:
            if key in single:
                raise BadRequest(
                    400,
                    f"the {found.group(1).decode('ascii')} header is sent more than once; it takes one "
                    "value (two would be joined into one the upstream cannot read, and this one decides "
                    "whose state the request may use): send it once",
                )
            fields[key] = f"{fields[key]}{REPEATED}{value}"
        else:
            fields[key] = value
        if key == "host":
            hosts += 1
        pos = found.end()
    return fields, hosts


def _decoded(body: bytes, coding: str, limit: int) -> bytes:
    """A body sent with a Content-Encoding, decoded (at most `limit` bytes: a larger one is a 413)."""
    name = coding.strip().lower()
    if name in ("", "identity"):
        return body
    if name in ("gzip", "x-gzip"):
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif name == "deflate":
        decoder = zlib.decompressobj()
    else:
        raise BadRequest(
            415, f"Content-Encoding {coding[:40]!r} is not supported: send the body as is, or gzip / deflate"
        )
    try:
        out = decoder.decompress(body, limit + 1)
        if len(out) <= limit:
            out += decoder.flush()
    except zlib.error as exc:
        raise BadRequest(
            400, f"the body is not valid {name} data (Content-Encoding: {coding}): {exc}"
        ) from None
    if len(out) > limit:
        raise BadRequest(413, "")
    if not decoder.eof:
        raise BadRequest(400, f"the {name} body (Content-Encoding: {coding}) is cut short")
    return out


class _Protocol(asyncio.Protocol):
    """One client connection: parse requests, call the handler one request at a time, write replies."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.busy = False
        self.closed = False
        self.eof = False
        self.refused = False
        self.last_data = 0.0
        self.head_since: float | None = None
        """When the head being read began (None: no head under way)."""
        self.body_since = 0.0
        """When the head of the request whose body is being read (`pending`) ended."""
        self.timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[None] | None = None
        self.drain: asyncio.Future[None] | None = None
        self.paused = False
        self.reading_paused = False
        self.pending: _Pending | None = None
        self.reserved = 0
        """Bytes of the in-flight body budget this connection's request holds (`HTTPServer.reserve`)."""
        self.linger: int | None = None
        """After an early reply: how many more bytes the client may send (read and discarded) before the
        connection closes (`_linger`); None otherwise."""

    # --- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        transport = self.transport
        server = self.server
        if len(server.connections) >= server.max_connections and not server.make_room():
            self.refused = self.busy = True
            reply = server.refusal(
                503,
                f"the proxy has {server.max_connections} connections open (its cap, max_connections) and "
                "all are in use; try again shortly",
                "",
            )
            length = b"Content-Length: %d\r\n" % len(reply.body)
            transport.write(self._head(reply.status, reply.headers, False, "HTTP/1.1", length) + reply.body)
            self._linger()
            return
        server.connections.add(self)
        self.last_data = self.head_since = self.loop.time()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        if self.task is None:  # a request being answered gives its bytes back when it is done
            self._release()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.drain is not None and not self.drain.done():
            self.drain.set_result(None)

    def data_received(self, data: bytes) -> None:
        if self.linger is not None:  # after an early reply: read and dropped, up to a bound
            self.linger -= len(data)
            self.last_data = self.loop.time()
            if self.linger < 0:
                self._close()
            return
        if self.refused:
            return
        self.last_data = self.loop.time()
        self.buffer += data
        if not self.busy:
            if self.pending is None and self.head_since is None:
                self.head_since = self.last_data
            self._next()
        elif len(self.buffer) > MAX_BUFFERED and self.transport is not None:
            self.transport.pause_reading()  # a client sending ahead while its request is answered
            self.reading_paused = True

    def eof_received(self) -> bool:
        """The client half-closed its side: what it sent in full is still answered, then the connection
        closes (True keeps the transport open for writing)."""
        self.eof = True
        if self.linger is not None:  # the client has sent all it will: the early reply is delivered
            self._close()
            return True
        if not self.busy and not self.refused:
            self._next()
        return True

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.drain is not None and not self.drain.done():
            self.drain.set_result(None)

    # --- reading requests ------------------------------------------------------------------------

    def _next(self) -> None:
        """Read the next complete request from the buffer and answer it: at once when the server's
        `fast` handler can (then the next buffered request), else in a task."""
        fast = self.server.fast
        while True:
            try:
                read = self._read()
            except BadRequest as exc:
                self._refuse(exc.status, str(exc), exc.code)
                return
            if read is None:
                break
            request, keep = read
            if fast is not None:
                try:
                    reply = fast(request)
                except Exception:  # the handler's own errors are JSON already; this is a last resort
                    logger.exception("HTTP handler failed on %s %s", request.method, request.path)
                    reply = _internal_error()
                if reply is not None:
                    keep = keep and not self.server.closing
                    self._write(reply, keep, request.version)
                    self._release()
                    if not keep or self.closed:
                        self._close()
                        return
                    self.last_data = self.loop.time()
                    if self.buffer:
                        self.head_since = self.last_data
                        continue
                    if self.eof:
                        self._close()
                    else:
                        self._arm()
                    return
            self.busy = True
            self.task = self.loop.create_task(self._answer(request, keep))
            return
        if self.eof:  # half-closed with no complete request left: nothing more can come
            if self.buffer or self.pending is not None:
                self._refuse(400, self._cut_short())
            else:
                self._close()
        else:  # waiting for the rest: the head's deadline, or the body's (a whole request needs none)
            self._arm()

    def _cut_short(self) -> str:
        pending = self.pending
        if pending is None:
            return "the client closed its side before the request head was complete"
        got = len(pending.body) if pending.chunked else len(self.buffer)
        expected = "a chunked body" if pending.chunked else f"{pending.length} bytes"
        return f"the client closed its side after {got} bytes of the body ({expected} expected)"

    def _read(self) -> tuple[Request, bool] | None:
        pending = self.pending
        if pending is None:
            head = self._read_head()
            if head is None or isinstance(head, tuple):  # a whole request of a head seen before: read
                return head
            pending = head
        buffer = self.buffer
        if pending.chunked:
            if not self._read_chunks(pending):
                return None
            body = bytes(pending.body)
        else:
            if len(buffer) < pending.length:
                return None
            body = bytes(buffer[: pending.length])
            del buffer[: pending.length]
        self.pending = None
        headers = pending.headers
        coding = headers.pop("content-encoding", None)
        if coding is not None:
            body = _decoded(body, coding, self.server.max_body_bytes)
            if len(body) > self.reserved:  # held decoded: counted so (within max_body_bytes)
                self.server.inflight += len(body) - self.reserved
                self.reserved = len(body)
        request = Request(
            pending.method, pending.path, pending.query, pending.version, headers, body, pending.memo
        )
        return request, pending.keep

    def _read_head(self) -> _Pending | tuple[Request, bool] | None:
        """The head at the start of the buffer read into a `_Pending` (its body to come), None when it
        is not whole yet; a head seen before whose body is in the buffer already is read at once, the
        whole request returned (the usual case of a kept-alive client)."""
        buffer = self.buffer
        while buffer.startswith(b"\r\n"):  # empty lines before a request line are ignored (RFC 9112 2.2)
            del buffer[:2]
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > MAX_HEAD:
                raise BadRequest(431, f"request head longer than {MAX_HEAD} bytes")
            if buffer.find(b"\n\n") >= 0 or buffer.find(b"\n\r\n") >= 0:
                raise BadRequest(400, "request lines must end with CRLF (a bare LF was sent)")
            first = buffer.find(b"\r\n")
            if first >= 0 and _REQUEST_LINE.match(buffer) is None:  # no need to wait for the rest
                raise _bad_request_line(bytes(buffer[: first + 2]))
            if (
                first < 0
                and buffer
                and (_TOKEN_START.match(buffer) is None or _CTL.search(buffer.rstrip(b"\r")))
            ):
                raise _bad_request_line(bytes(buffer[:100]) + b"\r\n")  # not HTTP (a TLS hello, ...)
            return None
        if end + 4 > MAX_HEAD:
            raise BadRequest(431, f"request head longer than {MAX_HEAD} bytes")
        head = bytes(buffer[: end + 2])
        found = _LENGTH_LINE.search(head)
        known = None
        if found is not None:  # a head seen before but for its Content-Length: read already, and good
            key = head[: found.start()] + head[found.end() :]
            known = self.server.heads.get(key)
        if known is not None:
            assert found is not None
            method, path, query, version, fields, keep, memo = known
            text = found.group(1)
            length = int(text)
            if length > self.server.max_body_bytes:
                raise BadRequest(413, "")
            headers = dict(fields)
            headers["content-length"] = text.decode("ascii")
            stop = end + 4 + length
            if len(buffer) >= stop:  # the body is here too: no `_Pending`, no deadline to arm
                if length:
                    self._reserve(length)
                body = bytes(buffer[end + 4 : stop])
                del buffer[:stop]
                self.head_since = None
                return Request(method, path, query, version, headers, body, memo), keep
            pending = _Pending(method, path, query, version, headers, keep, memo)
            pending.length = length
            return self._body_next(pending, end, None, False)
        line = _REQUEST_LINE.match(head)
        if line is None:
            raise _bad_request_line(head)
        method = line.group(1).decode("ascii")
        target = line.group(2).decode("ascii")
        version = line.group(3).decode("ascii")
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise BadRequest(505, f"unsupported version {version!r}")
        headers, hosts = _fields(head, line.end(), "header line", self.server.single_headers)
        old = version == "HTTP/1.0"
        if not old and hosts != 1:
            raise BadRequest(
                400,
                "an HTTP/1.1 request needs exactly one Host header" + (f" ({hosts} sent)" if hosts else ""),
            )
        connection = headers.get("connection")
        if connection is None:  # HTTP/1.1 keeps the connection, HTTP/1.0 closes it
            keep = not old
        else:
            tokens = {t.strip().lower() for t in connection.replace(REPEATED, ",").split(",")}
            keep = "keep-alive" in tokens if old else "close" not in tokens
        if target[:1] != "/":
            absolute = _ABSOLUTE.match(target)
            if absolute is not None:  # absolute form: keep the path
                target = target[absolute.end() :] or "/"
                target = target if target.startswith("/") else "/" + target
        path, _, query = target.partition("?")
        pending = _Pending(method, path, query, version, headers, keep)
        expect = headers.get("expect")
        if expect is not None and not old and expect.strip().lower() != "100-continue":
            raise BadRequest(
                417, f"Expect: {expect[:60]!r} cannot be met (the proxy meets 100-continue only)"
            )
        transfer = headers.get("transfer-encoding")
        length_text = headers.get("content-length")
        if transfer is not None:
            if old:
                raise BadRequest(400, "Transfer-Encoding in an HTTP/1.0 request")
            if length_text is not None:
                raise BadRequest(400, "request has both Content-Length and Transfer-Encoding")
            if transfer.strip().lower() != "chunked":
                raise BadRequest(501, f"unsupported Transfer-Encoding {transfer[:40]!r} (chunked only)")
            pending.chunked = True
        elif length_text is not None and _plain_number(length_text):
            pending.length = int(length_text)  # the usual case: one plain number
            if pending.length > self.server.max_body_bytes:
                raise BadRequest(413, "")
        elif length_text is not None:
            values = {v.strip() for v in length_text.replace(REPEATED, ",").split(",")}
            text = values.pop() if len(values) == 1 else ""
            if not _LENGTH.fullmatch(text):
                raise BadRequest(400, f"malformed Content-Length {length_text[:40]!r}")
            pending.length = int(text)
            if pending.length > self.server.max_body_bytes:
                raise BadRequest(413, "")
        if (
            found is not None
            and len(head) <= MAX_KNOWN_HEAD_BYTES
            and expect is None
            and transfer is None
            and "content-encoding" not in headers  # a known head's body is taken as it comes
            and length_text == found.group(1).decode("ascii")  # that line was the only Content-Length
        ):
            heads = self.server.heads
            if len(heads) >= MAX_KNOWN_HEADS:
                heads.clear()
            fields = {k: v for k, v in headers.items() if k != "content-length"}
            pending.memo = {}
            heads[head[: found.start()] + head[found.end() :]] = (
                method,
                path,
                query,
                version,
                fields,
                keep,
                pending.memo,
            )
        return self._body_next(pending, end, expect, old)

    def _body_next(self, pending: _Pending, end: int, expect: str | None, old: bool) -> _Pending:
        """The head (up to `end`) is read: drop it from the buffer, start the body's deadline and answer
        ``Expect: 100-continue`` when the client waits for it."""
        if pending.length:
            self._reserve(pending.length)
        buffer = self.buffer
        del buffer[: end + 4]
        self.pending = pending
        self.head_since = None
        self.body_since = self.loop.time()  # the body's deadline counts from here (`_next` arms it)
        waiting = expect is not None and not old and not buffer and (pending.chunked or pending.length)
        if waiting and self.transport is not None:  # the client waits for this before sending the body
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return pending

    def _read_chunks(self, pending: _Pending) -> bool:
        """Read chunks from the buffer into the body; True once the last chunk and trailers are in."""
        buffer, body = self.buffer, pending.body
        while True:
            stage = pending.stage
            if stage == "data":
                take = min(pending.length, len(buffer))
                if take:
                    body += buffer[:take]
                    del buffer[:take]
                    pending.length -= take
                if pending.length:
                    return False
                pending.stage = "crlf"
            elif stage == "crlf":
                if len(buffer) < 2:
                    return False
                if buffer[:2] != b"\r\n":
                    raise BadRequest(400, "a chunk is not followed by CRLF")
                del buffer[:2]
                pending.stage = "size"
            elif stage == "size":
                end = buffer.find(b"\r\n")
                if end < 0:
                    if len(buffer) > MAX_CHUNK_LINE:
                        raise BadRequest(400, f"a chunk-size line longer than {MAX_CHUNK_LINE} bytes")
                    return False
                line = bytes(buffer[:end])
                if _CHUNK_LINE.fullmatch(line) is None:
                    raise BadRequest(
                        400,
                        f"malformed chunk-size line {line[:40]!r}: expected hexadecimal digits, then "
                        "optional ;extensions",
                    )
                size = int(line.split(b";", 1)[0].strip(), 16)
                del buffer[: end + 2]
                if len(body) + size > self.server.max_body_bytes:
                    raise BadRequest(413, "")
                if size:
                    self._reserve(size)
                pending.length = size
                pending.stage = "data" if size else "trailers"
            else:  # trailers: header lines up to an empty line, checked and dropped
                if buffer[:2] == b"\r\n":
                    del buffer[:2]
                    return True
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(buffer) > MAX_HEAD:
                        raise BadRequest(431, f"trailers longer than {MAX_HEAD} bytes")
                    return False
                _fields(bytes(buffer[: end + 2]), 0, "trailer line")
                del buffer[: end + 4]
                return True

    # --- answering -------------------------------------------------------------------------------

    async def _answer(self, request: Request, keep: bool) -> None:
        try:
            reply = await self.server.handler(request)
        except Exception:  # the handler's own errors are JSON already; this is a last resort
            logger.exception("HTTP handler failed on %s %s", request.method, request.path)
            reply = _internal_error()
        keep = keep and not self.server.closing
        try:
            if isinstance(reply, StreamResponse):
                keep = await self._stream(reply, keep, request.version)
            else:
                self._write(reply, keep, request.version)
        finally:
            self.busy = False
            self.task = None
            self._release()
            if self.reading_paused and self.transport is not None:
                self.reading_paused = False
                self.transport.resume_reading()
        if not keep or self.closed:
            self._close()
            return
        self.last_data = self.loop.time()
        if self.buffer:
            self.head_since = self.last_data
            self._next()
        elif self.eof:
            self._close()
        if not self.busy and not self.closed:
            self._arm()

    def _head(self, status: int, headers: dict[str, str], keep: bool, version: str, extra: bytes) -> bytes:
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Unknown"))]
        if "Date" not in headers and "date" not in headers:  # an upstream's own Date passes through
            lines.append(_date())
        for name, value in headers.items():
            if REPEATED in value:  # a header sent more than once: one line each
                lines += [f"{name}: {v}\r\n".encode("latin-1", "replace") for v in value.split(REPEATED)]
            else:
                lines.append(f"{name}: {value}\r\n".encode("latin-1", "replace"))
        lines.append(extra)
        if not keep:
            lines.append(b"Connection: close\r\n")
        elif version == "HTTP/1.0":
            lines.append(b"Connection: keep-alive\r\n")
        lines.append(b"\r\n")
        return b"".join(lines)

    def _write(self, reply: Response, keep: bool, version: str) -> None:
        transport = self.transport
        if transport is None or self.closed or transport.is_closing():
            return
        body = reply.body
        head = self._head(reply.status, reply.headers, keep, version, b"Content-Length: %d\r\n" % len(body))
        if len(body) < 65536:
            transport.write(head + body)
        else:
            transport.write(head)
            transport.write(body)

    async def _stream(self, reply: StreamResponse, keep: bool, version: str) -> bool:
        """Write a streamed reply; returns whether the connection may be kept."""
        chunks, transport = reply.chunks, self.transport
        chunked = version == "HTTP/1.1"
        keep = keep and chunked  # HTTP/1.0: the body ends when the connection does
        try:
            if transport is None or self.closed:
                return False
            extra = b"Transfer-Encoding: chunked\r\n" if chunked else b""
            transport.write(self._head(reply.status, reply.headers, keep, version, extra))
            async for data in chunks:
                if self.closed or transport.is_closing():
                    return False
                if data:
                    transport.write(b"%x\r\n%b\r\n" % (len(data), data) if chunked else data)
                if self.paused:
                    self.drain = self.loop.create_future()
                    await self.drain
            if not self.closed and chunked:
                transport.write(b"0\r\n\r\n")
            return keep
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()

    def _reserve(self, size: int) -> None:
        """Count `size` more bytes of this request's body against the server's in-flight budget; past the
        budget the request is refused (503) before its body is read."""
        server = self.server
        if server.inflight + size > server.max_inflight_body_bytes:
            raise BadRequest(
                503,
                f"the proxy holds {server.inflight} bytes of request bodies in flight and this request "
                f"would add {size} more, past its budget of {server.max_inflight_body_bytes} bytes "
                "(--max-inflight-body-bytes, ProxySettings.max_inflight_body_bytes); nothing of it was "
                "read or forwarded. Send it again shortly (Retry-After).",
                "bodies_over_budget",
            )
        server.inflight += size
        self.reserved += size

    def _release(self) -> None:
        if self.reserved:
            self.server.inflight -= self.reserved
            self.reserved = 0

    def _refuse(self, status: int, message: str, code: str = "") -> None:
        """A request that cannot be read: the server's error reply, then the connection closes."""
        self.buffer.clear()
        self.pending = None
        self.busy = True  # nothing more is read from this connection
        self._release()
        reply = self.server.refusal(status, message, code)
        self._write(reply, False, "HTTP/1.1")
        self._linger()

    def _linger(self) -> None:
        """Close after an early reply without losing it: half-close (the reply, then FIN), then read and
        discard what the client still sends (up to twice `max_body_bytes`, `LINGER_S` in all and
        `LINGER_IDLE_S` without a byte) before closing, so the client is never reset while it sends."""
        transport = self.transport
        self.buffer.clear()
        can_write_eof = getattr(transport, "can_write_eof", None)  # a transport may not half-close
        if transport is None or transport.is_closing() or self.eof or not (can_write_eof and can_write_eof()):
            self._close()
            return
        self.linger = 2 * self.server.max_body_bytes
        if self.reading_paused:
            transport.resume_reading()
            self.reading_paused = False
        try:
            transport.write_eof()
        except OSError:  # pragma: no cover - the client is gone already
            self._close()
            return
        if self.timer is not None:
            self.timer.cancel()
        self.last_data = now = self.loop.time()
        self.timer = self.loop.call_at(now + LINGER_IDLE_S, self._linger_tick, now + LINGER_S)

    def _linger_tick(self, end: float) -> None:
        """Close a lingering connection once it was quiet for `LINGER_IDLE_S` or at `end`."""
        now = self.loop.time()
        due = min(end, self.last_data + LINGER_IDLE_S)
        if now >= due:
            self.timer = None
            self._close()
        else:
            self.timer = self.loop.call_at(due, self._linger_tick, end)

    def _close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # --- deadlines -------------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Waiting for a next request that has not begun (may be closed at any time: RFC 9112 9.8), or
        lingering after an early reply (its reply is written: closing it early risks only that reply)."""
        if self.linger is not None:
            return not self.closed
        return not self.busy and self.pending is None and not self.buffer and not self.closed

    def _arm(self) -> None:
        """(Re)schedule the deadline check at the nearest deadline."""
        due = self._due()
        if due is None:
            return
        if self.timer is not None:
            if self.timer.when() <= due:
                return
            self.timer.cancel()
        self.timer = self.loop.call_at(due, self._tick)

    def _due(self) -> float | None:
        if self.busy or self.closed:
            return None  # re-armed when the reply is written
        if self.pending is None and self.head_since is not None:
            return self.head_since + self.server.head_timeout_s
        if self.pending is not None:
            return self.body_since + self.server.body_timeout_s
        return self.last_data + self.server.keepalive_s

    def _tick(self) -> None:
        self.timer = None
        due = self._due()
        if due is None:
            return
        if self.loop.time() < due:
            self.timer = self.loop.call_at(due, self._tick)
            return
        if self.pending is None and self.head_since is not None and self.buffer:
            self._refuse(
                408,
                f"the request head did not arrive whole within {self.server.head_timeout_s:g} s "
                "(head_timeout_s, --head-timeout)",
            )
            return
        pending = self.pending
        if pending is not None:
            got = len(pending.body) if pending.chunked else len(self.buffer)
            expected = "of a chunked body" if pending.chunked else f"of {pending.length}"
            self._refuse(
                408,
                f"the request body did not arrive whole within {self.server.body_timeout_s:g} s of its head "
                f"(body_timeout_s, --body-timeout): {got} bytes {expected} arrived",
            )
            return
        self._close()  # idle, or a fresh connection that sent nothing


def _bad_request_line(head: bytes) -> BadRequest:
    first = head[: head.find(b"\r\n")]
    if _CTL.search(first) is not None:
        return _bad_line(first, "request line")
    return BadRequest(400, f"malformed request line: {first[:100]!r} (expected `METHOD target HTTP/1.1`)")


class HTTPServer:
    """Serves `handler` on one or more addresses (see the module docstring).

    Args:
        handler: answers one request.
        refusal: the reply for a request the server answers itself (status, message, code: '' or
            ``bodies_over_budget`` for a 503 past `max_inflight_body_bytes`): 413 for a body
            over `max_body_bytes` (message empty), 400 / 415 / 417 / 431 / 501 / 505 for malformed or
            unsupported ones, 408 for a head or a body that took too long, 503 at the connection cap.
        max_body_bytes: largest request body accepted (decoded size, for a compressed one).
        keepalive_s: an idle connection is closed after this long.
        head_timeout_s: a request head must arrive whole within this long of its first byte.
        body_timeout_s: a request body must arrive whole within this long of the end of its head.
        max_connections: open connections at most.
        single_headers: lower-case names of headers that must not be repeated (a repeat is a 400).
        max_inflight_body_bytes: request bodies held at once, from the end of a request's head (its
            Content-Length, or its chunks as they come) until its reply is written; a request that would
            pass it is refused (503) before its body is read. None: `max_body_bytes` times 8.
        fast: tried first on each request, synchronously in the connection's callback: a reply it
            returns is written at once (no task, no event-loop round), None hands the request to
            `handler` in a task.
    """

    def __init__(
        self,
        handler: Handler,
        refusal: Callable[[int, str, str], Response],
        *,
        max_body_bytes: int,
        keepalive_s: float = 75.0,
        head_timeout_s: float = 30.0,
        body_timeout_s: float = 60.0,
        max_connections: int = 1000,
        single_headers: frozenset[str] = frozenset(),
        max_inflight_body_bytes: int | None = None,
        fast: FastHandler | None = None,
    ) -> None:
        self.handler = handler
        self.fast = fast
        self.max_inflight_body_bytes = max_inflight_body_bytes or 8 * max_body_bytes
        self.inflight = 0
        """Bytes of request bodies held now (see `max_inflight_body_bytes`)."""
        self.single_headers = single_headers
        self.refusal = refusal
        self.max_body_bytes = max_body_bytes
        self.keepalive_s = keepalive_s
        self.head_timeout_s = head_timeout_s
        self.body_timeout_s = body_timeout_s
        self.max_connections = max_connections
        self.connections: set[_Protocol] = set()
        self.heads: dict[bytes, tuple[str, str, str, str, dict[str, str], bool, dict[str, Any]]] = {}
        """What a head read before gave (method, path, query, version, headers, keep-alive, and the
        `Request.memo` its requests share), by its bytes without the Content-Length line: the same
        bytes always read the same (see `MAX_KNOWN_HEADS`)."""
        self.closing = False
        self._hurry: asyncio.Future[None] | None = None
        self.urls: list[str] = []
        self._servers: list[asyncio.Server] = []

    async def start(self, host: str | list[str], port: int) -> str:
        """Listen on host:port (0: a free port; several hosts: each, on the same port); returns the base
        URL ending in /v1 (of the first address)."""
        loop = asyncio.get_running_loop()
        hosts = [host] if isinstance(host, str) else list(host)
        urls = []
        for name in hosts:
            server = await loop.create_server(lambda: _Protocol(self), name, port)
            self._servers.append(server)
            bound = server.sockets[0].getsockname()
            port = bound[1]  # the next hosts listen on the port the first one got
            shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
            urls.append(f"http://{shown}:{bound[1]}/v1")
        self.urls = urls
        return urls[0]

    def make_room(self) -> bool:
        """At the connection cap: close the longest-idle kept-alive connection; False if none is idle."""
        idle = [c for c in self.connections if c.idle]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.last_data)
        self.connections.discard(oldest)
        oldest._close()
        return True

    async def close(self, grace_s: float = 10.0) -> int:
        """Stop listening, close idle connections, give handlers in flight `grace_s` to deliver their
        replies (each then closes its connection), then cancel what is left and close everything.
        `hurry` cuts the grace short. Returns how many handlers had to be cancelled."""
        self.closing = True
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            if not conn.busy:
                conn._close()
        late: set[asyncio.Future[Any]] = {c.task for c in self.connections if c.task is not None}
        if late:
            loop = asyncio.get_running_loop()
            hurry = self._hurry = loop.create_future()
            deadline = loop.time() + grace_s
            while late and not hurry.done() and loop.time() < deadline:
                done, _ = await asyncio.wait(
                    {*late, hurry}, timeout=deadline - loop.time(), return_when=asyncio.FIRST_COMPLETED
                )
                late -= done
            self._hurry = None
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=1)
        for conn in list(self.connections):
            conn._close()
        self._servers = []
        return len(late)

    def hurry(self) -> None:
        """During `close`: stop waiting for handlers in flight (a second Ctrl-C or SIGTERM)."""
        if self._hurry is not None and not self._hurry.done():
            self._hurry.set_result(None)

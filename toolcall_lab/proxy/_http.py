"""A lean pooled HTTP/1.1 client for the proxy's one upstream: bytes out, bytes (or a byte stream) back.

The proxy forwards request bodies it already has as bytes and needs the reply's status, headers and
body as they came; a general client library spends most of a loopback hop on what the proxy does not
use (cookie jars, URL objects, tracing, redirects). This one writes the request itself and parses the
reply with the RFC 9112 framing rules: ``Content-Length``, ``Transfer-Encoding: chunked`` (extensions
and trailers skipped), or read to the end; 1xx interim replies skipped; ``Connection: close`` and
HTTP/1.0 replies not kept alive; gzip / deflate decoded (it asks for ``identity``). Header values go
out as the bytes they came in as (latin-1 text, one character per byte); a reply header holding a
control character is refused (a 502), never passed on. https uses the standard library's default TLS
context (certificates verified against the system's CAs, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``) or the
one given; a certificate that does not verify is a `HTTPFailure` marked `permanent`. With a forward
proxy (`proxy`), https goes through a ``CONNECT`` tunnel and http in absolute form.

**Kept-alive connections and the one retry.** Connections are kept alive, at most `max_connections`
at a time, and dropped when the server closes them, after `keepalive_s` unused, or past the
``Keep-Alive: timeout=N`` the server announced (less a second). A server may close an idle connection
just as a request is sent on it; the client tells the cases apart so that a request is never sent
twice once the upstream may have read it:

- Before a pooled connection is reused, the socket itself is checked (a zero-timeout poll): readable
  means the server closed it (or sent something unasked) while asyncio had not yet seen it. It is
  dropped and another taken; nothing was sent on it.
- After the request was written on a reused connection, if the connection is **reset** (ECONNRESET
  or EPIPE, when reading or at the end of the stream) before any byte of the reply arrived, the
  request is sent once more, on a new connection. A reset means the server's TCP stack threw the
  request away: its socket was already closed when the request arrived, or it was closed with the
  request still unread. A server that read the request and then closed sends a normal end of stream
  (FIN), not a reset.
- Any other failure (a normal end of stream with no reply, a failure on a new connection, a failure
  after part of the reply) is final: the upstream may have read the request, so it is not sent again.

Timeouts are *idle* timeouts: an error when the server sends nothing for `idle_timeout_s` (waiting for
the reply, or between two pieces of a stream), so a long generation that keeps streaming is never cut.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import re
import select
import socket
import ssl
import zlib
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import unquote, urlsplit

MAX_HEAD = 256 * 1024
"""Largest status line + headers accepted from the upstream."""
HIGH_WATER = 1024 * 1024
"""A streamed body buffered beyond this pauses reading until the consumer catches up."""

_RESET = (errno.ECONNRESET, errno.EPIPE)
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_REPLY_CTL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)")
"""Control characters a reply head must not hold (line ends aside)."""
_HEAD_BYTES = bytes(range(0x20, 0x7F)) + bytes(range(0x80, 0x100)) + b"\t\r\n"
"""What a reply head may hold (visible characters, obs-text, tab, line ends): deleting them leaves nothing."""
_REQUEST_CTL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_KEEP_ALIVE_TIMEOUT = re.compile(r"timeout\s*=\s*(\d+)", re.I)


_SPACE = " \t\x0b\x0c"
"""What bytes.strip() took away around a header name or a folded line (CR and LF cannot occur there)."""


def _plain_number(text: str) -> bool:
    """ASCII digits only, at most 18 (``str.isdigit`` alone takes ``²``, a latin-1 character)."""
    return text.isascii() and text.isdigit() and len(text) < 19


REPEATED = "\n"
"""Between the values of a header sent more than once (see `_httpd.REPEATED`): each goes on as a line."""


_FIELDS = re.compile(r"(?:[^\s:](?:[^:\r\n]*[^\s:])?:[^\r\n]*\r\n)*")
"""Header lines that need no closer look: a name without surrounding whitespace, a colon, a value, CRLF
(no folded line, no bare LF; control characters are refused before)."""
_FIELD = re.compile(r"([^:\r\n]+):[ \t]*([^\r\n]*?)[ \t]*\r\n")
_NAME = re.compile(r"^([^:\r\n]+):", re.M)


def _fields_fast(block: str) -> tuple[dict[str, str] | None, dict[str, str] | None]:
    """(headers, lower-case name -> name) of plain header lines (`block`: lines ending in CRLF), read with
    a few regular-expression passes; (None, None) when a line needs a closer look or a name repeats."""
    if _FIELDS.fullmatch(block) is None:
        return None, None
    pairs = _FIELD.findall(block)
    headers = dict(pairs)
    names = _NAME.findall(block.lower())
    lower = dict(zip(names, headers, strict=False))
    if len(lower) != len(pairs) or len(headers) != len(pairs):
        return None, None
    return headers, lower


def _fields_slow(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """(headers, lower-case name -> name) of a reply head line by line: bare LF line ends, obsolete folded
    lines (joined with a space), repeated names (values joined by `REPEATED`); a malformed line is a
    `HTTPFailure`."""
    headers: dict[str, str] = {}
    lower: dict[str, str] = {}
    last = ""
    for raw in text.replace("\r\n", "\n").split("\n")[1:]:
        if raw[:1] in (" ", "\t") and last:  # obsolete line folding
            headers[last] += " " + raw.strip(_SPACE)
            continue
        key, sep, value = raw.partition(":")
        if not sep or not key or key != key.strip(_SPACE):
            shown = raw[:80].encode("latin-1")
            raise HTTPFailure(f"a header line of the reply is malformed: {shown!r}")
        value = value.strip(" \t")
        low = key.lower()
        known = lower.get(low)
        if known is not None:  # repeated: each value goes on as a line of its own (Set-Cookie)
            headers[known] = f"{headers[known]}{REPEATED}{value}"
            last = known
        else:
            lower[low] = last = key
            headers[key] = value
    return headers, lower


class HTTPFailure(Exception):
    """The request failed without a complete reply; `timeout` tells a silent server from a broken one,
    `permanent` a failure no retry can change (an untrusted certificate, a proxy that refuses)."""

    def __init__(self, message: str, *, timeout: bool = False, permanent: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout
        self.permanent = permanent


class _Unread(Exception):
    """A reused connection was reset before any byte of the reply: the request was not read."""

    def __init__(self, failure: HTTPFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


@dataclass(slots=True)
class Reply:
    """A parsed reply: status, headers (names as sent; a repeated one's values joined by `REPEATED`), body."""

    status: int
    headers: dict[str, str]
    body: bytes = b""
    stream: AsyncIterator[bytes] | None = None
    _conn: _Connection | None = field(default=None, repr=False)

    async def release(self) -> None:
        """Give the connection back (when the reply was read to its end) or close it."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.finish()


def _readable(sock: socket.socket | None, poller: Any = None) -> bool:
    """Whether the kernel holds something to read on an idle connection (an end of stream, a reset, or
    bytes nobody asked for), asyncio not having looked yet. `poller`: a ``select.poll`` object that
    watches this socket already (made once per connection)."""
    try:
        if poller is not None:
            return bool(poller.poll(0))
        if sock is None:
            return False
        return bool(select.select([sock.fileno()], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: writes a request, parses its reply as bytes arrive."""

    def __init__(self, client: HTTPClient) -> None:
        self.client = client
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.open = False
        self.reused = False
        self.idle_since = 0.0
        self.expires_at = float("inf")
        """When the server said it would close the connection (Keep-Alive: timeout=N), less a second."""
        self.last_data = 0.0
        # the reply being read
        self.buffer = bytearray()
        self.stage = (
            "idle"  # idle | head | length | chunk-size | chunk-data | chunk-end | trailers | close | done
        )
        self.received = False
        """Whether any byte came for the request being answered."""
        self.reset = False
        """Whether the connection was reset (ECONNRESET / EPIPE)."""
        self.status = 0
        self.headers: dict[str, str] = {}
        self.remaining = 0
        self.keep_alive = True
        self.decoder: zlib._Decompress | None = None
        self.body = bytearray()
        self.streaming = False
        self.pieces: deque[bytes] = deque()
        self.buffered = 0
        self.paused = False
        self.error: HTTPFailure | None = None
        self.head_ready: asyncio.Future[None] | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        """The idle-timeout check: armed when a request is sent and left pending after its reply (it
        re-arms itself while a request is under way), so a request costs no timer of its own."""
        self.poller: Any = None

    # --- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        self.open = True
        if hasattr(select, "poll"):
            sock = self.socket()
            if sock is not None:
                with contextlib.suppress(OSError, ValueError):
                    poller = select.poll()
                    poller.register(sock.fileno(), select.POLLIN)
                    self.poller = poller

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        self._disarm()
        if isinstance(exc, OSError) and exc.errno in _RESET:
            self.reset = True
        if self.stage == "close":  # a body read to the end of the connection is complete now
            self._complete()
        elif self.stage not in ("idle", "done"):
            why = f": {exc}" if exc else ""
            self._fail(HTTPFailure(f"the connection closed before the reply was complete{why}"))
        self.client._forget(self)

    def eof_received(self) -> bool | None:
        """The server ended its side; a reset that came with it says the request was thrown away."""
        if self.stage not in ("idle", "done", "close") and not self.received:
            sock = self.socket()
            try:
                error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) if sock is not None else 0
            except OSError:  # pragma: no cover - the socket is gone already
                error = 0
            self.reset = self.reset or error in _RESET
        return None  # close the transport; connection_lost decides what it means

    def data_received(self, data: bytes) -> None:
        self.last_data = self.loop.time()
        if self.stage == "idle" or self.stage == "done":
            self.open = False  # bytes nobody asked for: the connection cannot be trusted any more
            if self.transport is not None:
                self.transport.close()
            return
        self.received = True
        self.buffer += data
        try:
            self._parse()
        except HTTPFailure as exc:
            self._fail(exc)
            if self.transport is not None:
                self.transport.close()

    def pause_writing(self) -> None: ...

    def resume_writing(self) -> None: ...

    def socket(self) -> socket.socket | None:
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        return sock

    def stale(self) -> bool:
        """Whether a pooled connection must not carry another request (see the module docstring)."""
        if not self.open or self.loop.time() >= self.expires_at:
            return True
        return _readable(self.socket(), self.poller)

    # --- the request -----------------------------------------------------------------------------

    def send(self, head: bytes, body: bytes, *, streaming: bool) -> None:
        self.stage = "head"
        self.status, self.headers, self.keep_alive = 0, {}, True
        self.decoder, self.error = None, None
        self.received = self.reset = False
        self.body = bytearray()
        self.streaming = streaming
        self.pieces.clear()
        self.buffered = 0
        self.head_ready = self.loop.create_future()
        self.last_data = self.loop.time()
        assert self.transport is not None
        self.transport.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            self.transport.write(body)
        self._arm()

    async def reply(self) -> Reply:
        """Wait for the head (and, unless streaming, the whole body); idle timeout applies."""
        assert self.head_ready is not None
        await self.head_ready
        if self.streaming:  # a success asked for as a stream (pieces may all be here already)
            return Reply(self.status, self.headers, stream=self._pieces(), _conn=self)
        if self.stage != "done":
            self.waiter = self.loop.create_future()
            await self.waiter
        if self.error is not None:
            raise self.error
        return Reply(self.status, self.headers, body=bytes(self.body), _conn=self)

    async def _pieces(self) -> AsyncIterator[bytes]:
        while True:
            if self.pieces:
                piece = self.pieces.popleft()
                self.buffered -= len(piece)
                if self.paused and self.buffered < HIGH_WATER // 2 and self.transport is not None:
                    self.paused = False
                    self.transport.resume_reading()
                yield piece
                continue
            if self.error is not None:
                raise self.error
            if self.stage == "done":
                return
            self.waiter = self.loop.create_future()
            await self.waiter

    def finish(self) -> None:
        """The caller is done with the reply: keep the connection for the next request, or close it."""
        if self.stage == "done" and self.keep_alive and self.open and not self.buffer and not self.paused:
            self.stage = "idle"
            self.idle_since = self.loop.time()
            self.client._put_back(self)
            return
        self.open = False
        self.stage = "done"
        self._disarm()
        if self.transport is not None:
            self.transport.close()
        self.client._release_busy()

    # --- timeouts --------------------------------------------------------------------------------

    def _arm(self) -> None:
        due = self.last_data + self.client.idle_timeout_s
        timer = self.timer
        if timer is not None:
            if timer.when() <= due:  # a check from an earlier request: when it fires, it re-arms itself
                return
            timer.cancel()
        self.timer = self.loop.call_at(due, self._check_idle)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _check_idle(self) -> None:
        self.timer = None
        if self.stage in ("idle", "done"):
            return
        due = self.last_data + self.client.idle_timeout_s
        if self.paused or self.loop.time() < due:  # data came since (or the consumer is slow): wait on
            self.timer = self.loop.call_at(max(due, self.loop.time() + 0.05), self._check_idle)
            return
        self._fail(
            HTTPFailure(f"the upstream sent nothing for {self.client.idle_timeout_s:g} s", timeout=True)
        )
        if self.transport is not None:
            self.transport.close()

    # --- parsing ---------------------------------------------------------------------------------

    def _parse(self) -> None:
        buffer = self.buffer
        while True:
            stage = self.stage
            if stage == "head":
                end, skip = buffer.find(b"\r\n\r\n"), 4
                if end < 0:
                    found = _HEAD_END.search(buffer)  # a server ending its lines with a bare LF
                    if found is None:
                        if len(buffer) > MAX_HEAD:
                            raise HTTPFailure(f"the reply's head is longer than {MAX_HEAD} bytes")
                        return
                    end, skip = found.start(), found.end() - found.start()
                head = bytes(buffer[:end])
                del buffer[: end + skip]
                if self._head(head):
                    continue
                return
            if stage == "length":
                take = min(self.remaining, len(buffer))
                if take:
                    self._piece(bytes(buffer[:take]))
                    del buffer[:take]
                    self.remaining -= take
                if self.remaining == 0:
                    self._complete()
                return
            if stage == "close":
                if buffer:
                    self._piece(bytes(buffer))
                    buffer.clear()
                return
            if stage == "chunk-size":
                end = buffer.find(b"\r\n")
                if end < 0:
                    if len(buffer) > 4096:
                        raise HTTPFailure("a chunk-size line of the reply is malformed")
                    return
                line = bytes(buffer[:end]).split(b";", 1)[0].strip()
                del buffer[: end + 2]
                if not line or len(line) > 15 or line.strip(b"0123456789abcdefABCDEF"):
                    raise HTTPFailure(f"a chunk size of the reply is not hexadecimal: {line[:40]!r}")
                size = int(line, 16)
                self.remaining = size
                self.stage = "chunk-data" if size else "trailers"
                continue
            if stage == "chunk-data":
                take = min(self.remaining, len(buffer))
                if take:
                    self._piece(bytes(buffer[:take]))
                    del buffer[:take]
                    self.remaining -= take
                if self.remaining:
                    return
                self.stage = "chunk-end"
                continue
            if stage == "chunk-end":
                if len(buffer) < 2:
                    return
                if buffer[:2] != b"\r\n":
                    raise HTTPFailure("a chunk of the reply is not followed by CRLF")
                del buffer[:2]
                self.stage = "chunk-size"
                continue
            if stage == "trailers":
                end = buffer.find(b"\r\n")
                if end < 0:
                    return
                del buffer[: end + 2]
                if end == 0:
                    self._complete()
                    return
                continue
            return

    def _head(self, head: bytes) -> bool:
        """Read a status line and headers; True when the body (or the next head) follows in the buffer."""
        clean = not head.translate(None, _HEAD_BYTES) and head.count(b"\r") == head.count(b"\r\n")
        bad = None if clean else _REPLY_CTL.search(head)  # two C passes, a search only to say where
        if bad is not None:
            line = head[head.rfind(b"\n", 0, bad.start()) + 1 :].split(b"\n", 1)[0]
            raise HTTPFailure(
                f"the reply's head holds a control character {bad.group()!r} in {line[:80]!r}; "
                "the proxy does not pass such a header on"
            )
        text = head.decode("latin-1")  # latin-1: byte for byte
        first = text.find("\r\n")
        status_line = text[:first] if first >= 0 else text.split("\n", 1)[0]
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not _plain_number(parts[1]):
            shown = status_line[:80].encode("latin-1")
            raise HTTPFailure(f"the upstream did not answer with HTTP/1.x: {shown!r}")
        status = int(parts[1])
        if 100 <= status < 200 and status != 101:  # interim reply (100 Continue, 103 Early Hints)
            return True
        block = text[first + 2 :] + "\r\n" if first >= 0 else ""
        headers, lower = _fields_fast(block) if first >= 0 else (None, None)
        if headers is None or lower is None:
            headers, lower = _fields_slow(text)
        self.status, self.headers = status, headers
        self.streaming = self.streaming and 200 <= status < 300  # an error's body is read whole

        def get(name: str) -> str:
            key = lower.get(name)
            return headers[key].lower().replace(REPEATED, ", ") if key is not None else ""

        if "connection" in lower:
            tokens = {t.strip() for t in get("connection").split(",")}
        else:
            tokens = set()
        self.keep_alive = "close" not in tokens if parts[0] != "HTTP/1.0" else "keep-alive" in tokens
        if "keep-alive" in lower:
            hint = _KEEP_ALIVE_TIMEOUT.search(get("keep-alive"))
            if hint is not None:  # the server closes idle connections after this: stop reusing one before
                self.expires_at = self.loop.time() + max(0.0, int(hint.group(1)) - 1.0)
        encoding = get("content-encoding") if "content-encoding" in lower else ""
        if encoding in ("gzip", "x-gzip"):
            self.decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self.decoder = zlib.decompressobj()
        elif encoding not in ("", "identity"):
            raise HTTPFailure(f"the reply is encoded as {encoding!r} although the proxy asked for identity")
        transfer = get("transfer-encoding") if "transfer-encoding" in lower else ""
        length = headers[lower["content-length"]] if "content-length" in lower else ""
        if status in (204, 304):
            self.stage = "done"
        elif transfer:
            if transfer.rsplit(",", 1)[-1].strip() != "chunked":
                self.stage, self.keep_alive = "close", False
            else:
                self.stage = "chunk-size"
        elif length and length.isdigit() and length.isascii() and len(length) < 19:  # one plain number
            self.remaining = int(length)
            self.stage = "length" if self.remaining else "done"
        elif length:
            values = {v.strip() for v in length.replace(REPEATED, ",").split(",")}
            if len(values) != 1 or not _plain_number(next(iter(values))):
                raise HTTPFailure(f"the reply's Content-Length is not one number: {length[:40]!r}")
            self.remaining = int(values.pop())
            self.stage = "length" if self.remaining else "done"
        else:
            self.stage, self.keep_alive = "close", False
        if self.head_ready is not None and not self.head_ready.done():
            self.head_ready.set_result(None)
        if self.stage == "done":
            self._complete()
            return False
        return True

    def _piece(self, data: bytes) -> None:
        if self.decoder is not None:
            try:
                data = self.decoder.decompress(data)
            except zlib.error as exc:
                raise HTTPFailure(f"the reply's compressed body is corrupt: {exc}") from None
            if not data:
                return
        if not self.streaming:
            self.body += data
            return
        self.pieces.append(data)
        self.buffered += len(data)
        if self.buffered > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def _complete(self) -> None:
        if self.decoder is not None:
            rest = self.decoder.flush()
            self.decoder = None
            if rest:
                self._piece(rest)
        self.stage = "done"  # the idle check stays pending: it finds the connection idle, or re-arms
        if self.head_ready is not None and not self.head_ready.done():
            self.head_ready.set_result(None)
        self._wake()

    def _fail(self, exc: HTTPFailure) -> None:
        self.error = exc
        self.stage = "done"
        self.keep_alive = False
        self._disarm()
        if self.head_ready is not None and not self.head_ready.done():
            self.head_ready.set_exception(exc)
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            if self.streaming:
                waiter.set_result(None)  # the stream raises `error` when it gets there
            else:
                waiter.set_exception(exc)

    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _TunnelReply(asyncio.Protocol):
    """Reads a forward proxy's answer to CONNECT (its head), nothing more."""

    def __init__(self, done: asyncio.Future[bytes]) -> None:
        self.done = done
        self.buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end >= 0 and not self.done.done():
            if end + 4 < len(self.buffer):
                self.done.set_exception(HTTPFailure("the forward proxy sent bytes after its CONNECT reply"))
            else:
                self.done.set_result(bytes(self.buffer[:end]))
        elif len(self.buffer) > MAX_HEAD and not self.done.done():
            self.done.set_exception(HTTPFailure("the forward proxy's CONNECT reply is too long"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(
                HTTPFailure(f"the forward proxy closed the connection during CONNECT ({exc})")
            )


@dataclass(frozen=True, slots=True)
class ForwardProxy:
    """A forward proxy (``http://[user:password@]host:port``) the client goes through."""

    host: str
    port: int
    authorization: str = ""
    """The ``Proxy-Authorization`` value (Basic, from the URL's user and password), or empty."""

    @classmethod
    def parse(cls, url: str) -> ForwardProxy:
        try:
            parts = urlsplit(url if "://" in url else "http://" + url)
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"proxy URL {url!r}: {exc}") from None
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(
                f"proxy URL {url!r}: only http:// forward proxies (with CONNECT for https) are supported"
            )
        auth = ""
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            auth = "Basic " + base64.b64encode(pair.encode()).decode()
        return cls(parts.hostname, port or 80, auth)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{'***@' if self.authorization else ''}{host}:{self.port}"


class HTTPClient:
    """Pooled HTTP/1.1 POSTs to one URL (see the module docstring).

    Args:
        url: the full URL requests go to (http or https; its query string is kept).
        max_connections: at most this many connections at a time; more requests wait for one.
        idle_timeout_s: a request fails when the server sends nothing for this long.
        keepalive_s: an unused connection is closed after this long.
        ssl_context: for https, instead of the standard library's default (e.g. a company CA).
        proxy: a forward proxy to go through (`ForwardProxy.parse` of an ``http://`` URL), or None.
    """

    def __init__(
        self,
        url: str,
        *,
        max_connections: int = 100,
        idle_timeout_s: float = 120.0,
        keepalive_s: float = 15.0,
        ssl_context: ssl.SSLContext | None = None,
        proxy: ForwardProxy | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL with a host: {url!r}")
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = parts.scheme == "https"
        self.proxy = proxy
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = (parts.scheme, self.port) in (("http", 80), ("https", 443))
        authority = host if default else f"{host}:{self.port}"
        self._authority = f"{host}:{self.port}"
        line = f"POST {target} HTTP/1.1\r\nHost: {authority}\r\n"
        if proxy is not None and not self.tls:  # plain http through a proxy: absolute form
            line = f"POST {parts.scheme}://{authority}{target} HTTP/1.1\r\nHost: {authority}\r\n"
            if proxy.authorization:
                line += f"Proxy-Authorization: {proxy.authorization}\r\n"
        self._line = line.encode("latin-1")
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.keepalive_s = keepalive_s
        self.retries = 0
        """Requests sent again on a new connection after a reused one was reset unread."""
        self._idle: list[_Connection] = []
        self._busy = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._all: set[_Connection] = set()
        self._ssl: ssl.SSLContext | None = ssl_context

    def request_head(self, headers: Iterable[tuple[str, str]], length: int) -> bytes:
        """The request line and headers. Values go out as latin-1 bytes (how the proxy's server read
        them, so they leave as they came); a character beyond latin-1 (a caller's own text) as UTF-8.
        A control character in a name or value (a line break would start a header of its own) is a
        `ValueError`."""
        return self.head_prefix(headers) + b"Content-Length: %d\r\n\r\n" % length

    def head_prefix(self, headers: Iterable[tuple[str, str]]) -> bytes:
        """`request_head` up to its Content-Length line: the same for every request with these headers
        (a caller may keep it, `post`'s `prefix`)."""
        out = [self._line]
        for name, value in headers:
            for one in value.split(REPEATED) if REPEATED in value else (value,):  # repeated: one line each
                line = f"{name}: {one}\r\n"
                try:
                    out.append(line.encode("latin-1"))
                except UnicodeEncodeError:
                    out.append(line.encode("utf-8", "surrogateescape"))
        head = b"".join(out)
        if head.count(b"\r\n") != len(out) - 1 + self._line.count(b"\r\n") or _REQUEST_CTL.search(
            head.replace(b"\r\n", b"")
        ):
            shown = next((x for x in out[1:] if x.count(b"\r\n") != 1 or _REQUEST_CTL.search(x[:-2])), b"?")
            raise ValueError(f"header {shown[:80]!r} holds a control character; it cannot be sent")
        return head

    async def post(
        self, body: bytes, headers: Iterable[tuple[str, str]], *, stream: bool, prefix: bytes | None = None
    ) -> Reply:
        """Send one POST; the reply's body is read whole, or (`stream`, and a success) as a byte stream
        that the caller reads to its end and then `release`s. Sent a second time only when a reused
        connection was reset before any byte of the reply (see the module docstring). `prefix`: the
        `head_prefix` of `headers`, kept by the caller."""
        if prefix is None:
            prefix = self.head_prefix(headers)
        head = prefix + b"Content-Length: %d\r\n\r\n" % len(body)
        conn = await self._acquire()
        try:
            reply = await self._exchange(conn, head, body, stream)
        except _Unread:
            self.retries += 1
            conn = await self._acquire(fresh=True)
            try:
                reply = await self._exchange(conn, head, body, stream)
            except _Unread as again:  # pragma: no cover - a new connection is never `reused`
                raise again.failure from None
        if not stream or reply.stream is None:
            await reply.release()
        return reply

    async def _exchange(self, conn: _Connection, head: bytes, body: bytes, stream: bool) -> Reply:
        try:
            conn.send(head, body, streaming=stream)
            return await conn.reply()
        except HTTPFailure as exc:
            conn.open = False
            conn.finish()
            if conn.reused and conn.reset and not conn.received:
                raise _Unread(exc) from None
            raise
        except BaseException:
            conn.open = False
            conn.finish()
            raise

    async def _acquire(self, *, fresh: bool = False) -> _Connection:
        while True:
            while self._idle and not fresh:
                conn = self._idle.pop()
                if not conn.stale() and conn.loop.time() - conn.idle_since < self.keepalive_s:
                    self._busy += 1
                    conn.reused = True
                    return conn
                conn.open = False
                if conn.transport is not None:
                    conn.transport.close()
            if self._busy < self.max_connections:
                self._busy += 1
                try:
                    return await self._connect()
                except BaseException:
                    self._busy -= 1
                    self._wake_one()
                    raise
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
                raise

    async def _connect(self) -> _Connection:
        if self.tls and self._ssl is None:
            self._ssl = ssl.create_default_context()
        where = f"{self.proxy} (forward proxy)" if self.proxy is not None else f"{self.host}:{self.port}"
        try:
            async with asyncio.timeout(self.idle_timeout_s):
                conn = await (self._through_proxy() if self.proxy is not None else self._direct())
        except TimeoutError:
            raise HTTPFailure(
                f"no connection to {where} within {self.idle_timeout_s:g} s", timeout=True
            ) from None
        except ssl.SSLCertVerificationError as exc:
            raise HTTPFailure(
                f"the upstream's TLS certificate does not verify ({exc}); nothing was "
                "sent. Trust its CA with --ca-file FILE (or SSL_CERT_FILE), or fix the URL's host name",
                permanent=True,
            ) from None
        except OSError as exc:
            raise HTTPFailure(f"cannot connect to {where}: {exc}") from None
        self._all.add(conn)
        return conn

    async def _direct(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            lambda: _Connection(self),
            self.host,
            self.port,
            ssl=self._ssl if self.tls else None,
            server_hostname=self.host if self.tls else None,
        )
        return conn

    async def _through_proxy(self) -> _Connection:
        proxy = self.proxy
        assert proxy is not None
        loop = asyncio.get_running_loop()
        if not self.tls:
            _, conn = await loop.create_connection(lambda: _Connection(self), proxy.host, proxy.port)
            return conn
        done: asyncio.Future[bytes] = loop.create_future()
        transport, _ = await loop.create_connection(lambda: _TunnelReply(done), proxy.host, proxy.port)
        try:
            auth = f"Proxy-Authorization: {proxy.authorization}\r\n" if proxy.authorization else ""
            transport.write(
                f"CONNECT {self._authority} HTTP/1.1\r\nHost: {self._authority}\r\n{auth}\r\n".encode()
            )
            head = await done
            status_line = head.split(b"\r\n", 1)[0]
            parts = status_line.split(b" ", 2)
            status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            if not 200 <= status < 300:
                raise HTTPFailure(
                    f"the forward proxy {proxy} refused CONNECT {self._authority}: "
                    f"{status_line.decode('latin-1')[:120]!r}",
                    permanent=status in (403, 407),
                )
            conn = _Connection(self)
            context = self._ssl or ssl.create_default_context()
            tls = await loop.start_tls(transport, conn, context, server_hostname=self.host)
        except BaseException:
            transport.close()
            raise
        assert tls is not None
        conn.connection_made(tls)
        return conn

    def _put_back(self, conn: _Connection) -> None:
        self._busy -= 1
        self._idle.append(conn)
        self._wake_one()

    def _forget(self, conn: _Connection) -> None:
        self._all.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    def _release_busy(self) -> None:
        self._busy -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        for conn in list(self._all):
            conn.open = False
            if conn.transport is not None:
                conn.transport.close()
        self._idle.clear()
        self._all.clear()

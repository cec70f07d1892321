"""The proxy's HTTP/1.1 server side: a lean asyncio protocol, so a request costs the proxy little more
than its own work.

A general web framework spends a good part of a loopback hop on what the proxy does not use (routing
tables, middlewares, multidicts, request objects built field by field). This server reads a request
(RFC 9112: ``Content-Length`` or ``Transfer-Encoding: chunked`` bodies, ``Expect: 100-continue``,
keep-alive and ``Connection: close``, HTTP/1.0, pipelined requests answered in order), hands the whole
request to one handler, and writes its `Response` (``Content-Length``) or `StreamResponse` (chunked,
with flow control; close-delimited for HTTP/1.0). Malformed requests get a 400, an oversized body the
handler's 413, each with ``Connection: close``; idle connections close after `keepalive_s`. A handler
is never cancelled when its client goes away (the proxy finishes what it started: a retry finds the
reply kept); a stream stops when its client is gone.
"""

from __future__ import annotations

import asyncio
import http
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from email.utils import formatdate
from typing import Any

logger = logging.getLogger("toolcall_lab.proxy")

MAX_HEAD = 64 * 1024
"""Largest request line + headers accepted (a larger head gets a 431)."""
MAX_BUFFERED = 1024 * 1024
"""Bytes read ahead of the request being answered before reading pauses."""

_REASONS = {s.value: s.phrase.encode() for s in http.HTTPStatus}
_date_cache: list[Any] = [0, b""]


def _date() -> bytes:
    """The Date header line, formatted once per second."""
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache[0], _date_cache[1] = now, b"Date: " + formatdate(now, usegmt=True).encode() + b"\r\n"
    line: bytes = _date_cache[1]
    return line


class Request:
    """A request as read: method, path (query string apart), lower-case header names, the whole body."""

    __slots__ = ("body", "headers", "method", "path", "query", "version")

    def __init__(
        self, method: str, path: str, query: str, version: str, headers: dict[str, str], body: bytes
    ) -> None:
        self.method, self.path, self.query, self.version = method, path, query, version
        self.headers, self.body = headers, body


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


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Protocol(asyncio.Protocol):
    """One client connection: parse requests, call the handler one request at a time, write replies."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.busy = False
        self.closed = False
        self.last_data = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[None] | None = None
        self.drain: asyncio.Future[None] | None = None
        self.paused = False
        self.reading_paused = False
        self.continued = False
        # a chunked body being read
        self.chunked: tuple[str, str, str, dict[str, str], bool] | None = None
        self.chunk_body = bytearray()

    # --- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.connections.add(self)
        self.last_data = self.loop.time()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.drain is not None and not self.drain.done():
            self.drain.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.last_data = self.loop.time()
        self.buffer += data
        if not self.busy:
            self._next()
        elif len(self.buffer) > MAX_BUFFERED and self.transport is not None:
            self.transport.pause_reading()  # a client sending ahead while its request is answered
            self.reading_paused = True

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.drain is not None and not self.drain.done():
            self.drain.set_result(None)

    # --- reading requests ------------------------------------------------------------------------

    def _next(self) -> None:
        """Read the next complete request from the buffer and start answering it."""
        try:
            request = self._read()
        except BadRequest as exc:
            self._refuse(exc.status, str(exc))
            return
        if request is not None:
            self.busy = True
            self.task = self.loop.create_task(self._answer(request[0], request[1]))

    def _read(self) -> tuple[Request, bool] | None:
        if self.chunked is not None:
            return self._read_chunked()
        buffer = self.buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > MAX_HEAD:
                raise BadRequest(431, f"request head longer than {MAX_HEAD} bytes")
            if buffer.find(b"\n\n") >= 0:
                raise BadRequest(400, "request lines must end with CRLF")
            return None
        if end > MAX_HEAD:
            raise BadRequest(431, f"request head longer than {MAX_HEAD} bytes")
        lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[0].isalpha():
            raise BadRequest(400, f"malformed request line: {lines[0][:100]!r}")
        method, target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise BadRequest(
                505 if version.startswith("HTTP/") else 400, f"unsupported version {version[:20]!r}"
            )
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name[-1] in " \t" or line[0] in " \t":
                raise BadRequest(400, f"malformed header line: {line[:100]!r}")
            key = name.lower()
            value = value.strip(" \t")
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if target.startswith(("http://", "https://")):  # absolute form: keep the path
            target = "/" + target.split("/", 3)[3] if target.count("/") >= 3 else "/"
        path, _, query = target.partition("?")
        connection = headers.get("connection", "").lower()
        keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        transfer = headers.get("transfer-encoding")
        length_text = headers.get("content-length")
        if transfer is not None:
            if length_text is not None:
                raise BadRequest(400, "request has both Content-Length and Transfer-Encoding")
            if transfer.lower() != "chunked":
                raise BadRequest(501, f"unsupported Transfer-Encoding {transfer[:40]!r}")
            del buffer[: end + 4]
            self.chunked = (method, path, query, headers, keep)
            self.chunk_body = bytearray()
            self._continue(headers)
            return self._read_chunked()
        length = 0
        if length_text is not None:
            values = {v.strip() for v in length_text.split(",")}
            if len(values) != 1 or not (text := values.pop()).isdigit():
                raise BadRequest(400, f"malformed Content-Length {length_text[:40]!r}")
            length = int(text)
            if length > self.server.max_body_bytes:
                raise BadRequest(413, "")
        if len(buffer) < end + 4 + length:
            self._continue(headers)
            return None
        body = bytes(buffer[end + 4 : end + 4 + length])
        del buffer[: end + 4 + length]
        self.continued = False
        return Request(method, path, query, version, headers, body), keep

    def _continue(self, headers: dict[str, str]) -> None:
        """Answer ``Expect: 100-continue`` once, so the client sends the body."""
        if not self.continued and headers.get("expect", "").lower() == "100-continue":
            self.continued = True
            if self.transport is not None:
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _read_chunked(self) -> tuple[Request, bool] | None:
        assert self.chunked is not None
        buffer, body = self.buffer, self.chunk_body
        while True:
            end = buffer.find(b"\r\n")
            if end < 0:
                if len(buffer) > 4096 and not body:
                    raise BadRequest(400, "malformed chunk size line")
                return None
            line = bytes(buffer[:end]).split(b";", 1)[0].strip()
            try:
                size = int(line, 16)
            except ValueError:
                raise BadRequest(400, f"malformed chunk size {line[:40]!r}") from None
            if size == 0:  # the last chunk, then trailers up to an empty line
                trailer_end = buffer.find(b"\r\n\r\n", end) if buffer[end + 2 : end + 4] != b"\r\n" else end
                if trailer_end < 0:
                    return None
                del buffer[: trailer_end + 4]
                method, path, query, headers, keep = self.chunked
                self.chunked = None
                self.continued = False
                return Request(method, path, query, "HTTP/1.1", headers, bytes(body)), keep
            if len(buffer) < end + 2 + size + 2:
                return None
            if buffer[end + 2 + size : end + 4 + size] != b"\r\n":
                raise BadRequest(400, "a chunk is not followed by CRLF")
            body += buffer[end + 2 : end + 2 + size]
            del buffer[: end + 4 + size]
            if len(body) > self.server.max_body_bytes:
                raise BadRequest(413, "")

    # --- answering -------------------------------------------------------------------------------

    async def _answer(self, request: Request, keep: bool) -> None:
        try:
            reply = await self.server.handler(request)
        except Exception:  # the handler's own errors are JSON already; this is a last resort
            logger.exception("HTTP handler failed on %s %s", request.method, request.path)
            reply = Response(500, b'{"error": {"message": "internal error", "type": "server_error"}}', {})
            reply.headers["Content-Type"] = "application/json"
        try:
            if isinstance(reply, StreamResponse):
                keep = await self._stream(reply, keep and request.version == "HTTP/1.1", request.version)
            else:
                self._write(reply, keep)
        finally:
            self.busy = False
            self.task = None
            if self.reading_paused and self.transport is not None:
                self.reading_paused = False
                self.transport.resume_reading()
        if not keep or self.closed:
            self._close()
        elif self.buffer:
            self._next()

    def _head(self, status: int, headers: dict[str, str], keep: bool, extra: bytes) -> bytes:
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Unknown"))]
        if "Date" not in headers and "date" not in headers:  # an upstream's own Date passes through
            lines.append(_date())
        for name, value in headers.items():
            lines.append(f"{name}: {value}\r\n".encode("latin-1", "replace"))
        lines.append(extra)
        if not keep:
            lines.append(b"Connection: close\r\n")
        lines.append(b"\r\n")
        return b"".join(lines)

    def _write(self, reply: Response, keep: bool) -> None:
        transport = self.transport
        if transport is None or self.closed or transport.is_closing():
            return
        body = reply.body
        head = self._head(reply.status, reply.headers, keep, b"Content-Length: %d\r\n" % len(body))
        if len(body) < 65536:
            transport.write(head + body)
        else:
            transport.write(head)
            transport.write(body)

    async def _stream(self, reply: StreamResponse, keep: bool, version: str) -> bool:
        """Write a streamed reply; returns whether the connection may be kept."""
        chunks, transport = reply.chunks, self.transport
        chunked = version == "HTTP/1.1"
        try:
            if transport is None or self.closed:
                return False
            extra = b"Transfer-Encoding: chunked\r\n" if chunked else b""
            transport.write(self._head(reply.status, reply.headers, keep and chunked, extra))
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
            return keep and chunked
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()

    def _refuse(self, status: int, message: str) -> None:
        """A request that cannot be read: the server's error reply, then the connection closes."""
        self.buffer.clear()
        self.busy = True  # nothing more is read from this connection
        reply = self.server.refusal(status, message)
        self._write(reply, keep=False)
        self._close()

    def _close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # --- idle connections ------------------------------------------------------------------------

    def _arm(self) -> None:
        self.timer = self.loop.call_at(self.last_data + self.server.keepalive_s, self._idle)

    def _idle(self) -> None:
        self.timer = None
        if self.closed:
            return
        due = self.last_data + self.server.keepalive_s
        if self.busy or self.loop.time() < due:
            self.timer = self.loop.call_at(max(due, self.loop.time() + 1.0), self._idle)
            return
        self._close()


class HTTPServer:
    """Serves `handler` on host:port (see the module docstring).

    Args:
        handler: answers one request.
        refusal: the reply for a request that cannot be read (status, message); 413 for a body over
            `max_body_bytes` (message empty), 400 / 431 / 501 / 505 for malformed ones.
        max_body_bytes: largest request body accepted.
        keepalive_s: an idle connection is closed after this long.
    """

    def __init__(
        self,
        handler: Handler,
        refusal: Callable[[int, str], Response],
        *,
        max_body_bytes: int,
        keepalive_s: float = 75.0,
    ) -> None:
        self.handler = handler
        self.refusal = refusal
        self.max_body_bytes = max_body_bytes
        self.keepalive_s = keepalive_s
        self.connections: set[_Protocol] = set()
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> str:
        """Listen on host:port (0: a free port); returns the base URL ending in /v1."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Protocol(self), host, port)
        bound = self._server.sockets[0].getsockname()
        name = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        return f"http://{name}:{bound[1]}/v1"

    async def close(self) -> None:
        """Stop listening, close every connection and wait for handlers still running."""
        if self._server is not None:
            self._server.close()
        tasks = [c.task for c in self.connections if c.task is not None]
        for conn in list(self.connections):
            conn._close()
        if tasks:  # a request in flight gets a moment to finish (its upstream call may be under way)
            await asyncio.wait(tasks, timeout=2)
            for task in tasks:
                if not task.done():
                    task.cancel()
        self._server = None

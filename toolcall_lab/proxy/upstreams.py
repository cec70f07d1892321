"""Where the proxy sends requests: a real OpenAI-compatible endpoint (raw pooled HTTP) or a recorded trace.

`HTTPUpstream` forwards bytes over a pool of kept-alive HTTP/1.1 connections (`_http.HTTPClient`): no
client library parses, rebuilds or retries anything, so status, body and headers such as
``Retry-After`` come back exactly as the upstream sent them, and a 429 or 500 reaches the client
instead of being retried here.
`TraceUpstream` answers from a recorded trace in-process (no network, no key); `upstream_app` serves
any upstream as a plain endpoint (``toolcall-lab serve-trace``).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from aiohttp import web

from toolcall_lab.exceptions import ToolcallLabError, UsageError
from toolcall_lab.proxy._http import ForwardProxy, HTTPClient, HTTPFailure
from toolcall_lab.proxy._wire import JSONError, dumps, error_body, loads, sse_events
from toolcall_lab.trace import Trace

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "proxy-connection"}
)
"""Hop-by-hop headers (RFC 9110 7.6.1), never forwarded either way; so are the headers a message's own
``Connection`` names and every ``Proxy-*`` header."""
FRAMING = frozenset({"host", "content-length", "content-encoding", "accept-encoding", "expect"})
"""Headers about this hop's bytes: the proxy writes its own. ``Accept-Encoding`` among them: the proxy
must read the upstream's answer (to split it), decodes gzip / deflate only, and sends its clients
identity bodies, so it asks the upstream for what it can read, whatever the client accepts."""
PROXY_HEADERS: frozenset[str] = frozenset()
"""Headers meant for the proxy alone, not forwarded: none. ``x-session-id`` is read by the proxy and
forwarded too (gateways read it). The README lists every header the proxy consumes (`CONSUMED`)."""
CONSUMED = HOP_BY_HOP | FRAMING | PROXY_HEADERS | {"content-type"}
"""Every client header that does not reach the upstream as sent (besides ``Proxy-*`` and the headers
``Connection`` names): the README's proxy section lists each one and why."""


_PLANS: dict[tuple[frozenset[str], tuple[str, ...]], tuple[list[str], list[str]]] = {}
"""`end_to_end`'s decision for a set of header names (a client or an upstream sends the same names every
time): the names kept, and the names of ``Connection`` headers (whose values may name more to drop)."""


def end_to_end(headers: Mapping[str, str], *, drop: frozenset[str] = frozenset()) -> dict[str, str]:
    """`headers` without hop-by-hop ones (those its ``Connection`` names and ``Proxy-*`` included) and
    without `drop` (lower-case names). Decided once per set of names (`_PLANS`)."""
    key = (drop, tuple(headers))
    plan = _PLANS.get(key)
    if plan is None:
        skip = HOP_BY_HOP | drop
        lows = [name.lower() for name in key[1]]
        kept = [
            n for n, low in zip(key[1], lows, strict=True) if low not in skip and not low.startswith("proxy-")
        ]
        plan = (kept, [n for n, low in zip(key[1], lows, strict=True) if low == "connection"])
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        _PLANS[key] = plan
    kept, connection = plan
    out = {name: headers[name] for name in kept}
    if connection:
        named = {
            t.strip().lower() for name in connection for t in headers[name].replace("\n", ",").split(",")
        }
        out = {k: v for k, v in out.items() if k.lower() not in named}
    return out


class UpstreamError(ToolcallLabError):
    """The upstream could not be reached or did not answer in time; carries the status to report."""

    def __init__(self, message: str, status: int = 502, code: str = "upstream_unreachable") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


async def _nothing() -> None:
    return None


@dataclass(slots=True, kw_only=True)
class UpstreamResponse:
    """Status, forwardable headers and the body (whole, or a byte stream to pass through)."""

    status: int
    headers: dict[str, str]
    body: bytes = b""
    stream: AsyncIterator[bytes] | None = None
    release: Callable[[], Awaitable[None]] = field(default=_nothing)


class Upstream(Protocol):
    """Sends one chat-completions request body; `stream=True` returns the body as a byte stream."""

    async def send(self, body: bytes, headers: Mapping[str, str], *, stream: bool) -> UpstreamResponse: ...

    async def close(self) -> None: ...


def forward_headers(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    """The client's headers that go upstream: end-to-end ones only (no hop-by-hop, ``Proxy-*`` or
    ``Connection``-named header, no framing, content type or proxy-only header: the proxy sets its own)."""
    return list(end_to_end(headers, drop=_SKIP).items())


_SKIP = FRAMING | PROXY_HEADERS | {"content-type"}
_SKIP_KEYED = _SKIP | {"authorization"}
"""With a key of the proxy's own (`HTTPUpstream.api_key`), the client's Authorization is replaced."""
RESPONSE_SKIP = FRAMING | {"content-encoding"}


def env_proxy(url: str) -> str | None:
    """The forward proxy the environment names for `url` (``HTTPS_PROXY`` / ``HTTP_PROXY`` /
    ``ALL_PROXY``, lower case first, unless ``NO_PROXY`` matches its host); loopback hosts never go
    through one."""
    import ipaddress
    import urllib.request

    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        return None
    proxies = urllib.request.getproxies_environment()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if proxies.get("no") and bypass(f"{host}:{port}", proxies):
        return None
    return proxies.get(parts.scheme) or proxies.get("all") or None


class HTTPUpstream:
    """A real OpenAI-compatible endpoint, e.g. ``https://api.openai.com/v1``, over pooled raw HTTP/1.1
    (`_http.HTTPClient`).

    Args:
        base_url: the endpoint's base URL: ``/chat/completions`` is appended to its path, and its query
            string (Azure's ``?api-version=...``) is kept after it.
        api_key: sent as ``Authorization: Bearer``; None forwards the client's own Authorization.
        timeout_s: an *idle* timeout: the request fails (504) when the upstream sends nothing for this
            long, waiting for its answer or between two pieces of a stream; a stream that keeps
            flowing is never cut (`ProxySettings.upstream_total_timeout_s` caps the whole).
        max_connections: size of the connection pool.
        ssl_context: for https, instead of the standard library's default context (which verifies
            certificates against the system's CAs, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``).
        ca_file: a PEM bundle of CAs to trust instead of the system's (like ``curl --cacert``).
        proxy: a forward proxy (``http://[user:password@]host:port``; https goes through a CONNECT
            tunnel); None takes it from the environment (`env_proxy`) unless `trust_env` is False.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_connections: int = 100,
        ssl_context: ssl.SSLContext | None = None,
        ca_file: str | None = None,
        proxy: str | None = None,
        trust_env: bool = True,
    ) -> None:
        self.url = chat_url(base_url)
        if api_key is not None and (
            not api_key.isascii() or not api_key.isprintable() or " " in api_key.strip()
        ):
            raise UsageError(
                "the API key holds a character that cannot go in an HTTP header (a space, a line break, "
                "or a non-ASCII letter); check OPENAI_API_KEY"
            )
        if ca_file is not None:
            if ssl_context is not None:
                raise UsageError("give either ssl_context or ca_file, not both")
            try:
                ssl_context = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise UsageError(
                    f"--ca-file {ca_file}: not a readable PEM bundle of certificates ({exc})"
                ) from None
        self.api_key = api_key
        self.max_connections = max_connections
        chosen = proxy if proxy is not None else (env_proxy(self.url) if trust_env else None)
        try:
            forward = ForwardProxy.parse(chosen) if chosen else None
        except ValueError as exc:
            where = "" if proxy is not None else " (from HTTPS_PROXY / HTTP_PROXY / ALL_PROXY)"
            raise UsageError(f"{exc}{where}; unset it or give an http:// proxy") from None
        self.proxy = forward
        """The forward proxy requests go through, or None."""
        self._client = HTTPClient(
            self.url,
            max_connections=max_connections,
            idle_timeout_s=timeout_s,
            ssl_context=ssl_context,
            proxy=forward,
        )
        self._extra = [("Content-Type", "application/json"), ("Accept-Encoding", "identity")]
        if api_key:
            self._extra.append(("Authorization", f"Bearer {api_key}"))

    @property
    def timeout_s(self) -> float:
        return self._client.idle_timeout_s

    @timeout_s.setter
    def timeout_s(self, value: float) -> None:
        self._client.idle_timeout_s = value

    @property
    def retries(self) -> int:
        """Requests sent a second time because a reused connection was reset before reading them."""
        return self._client.retries

    async def send(
        self, body: bytes, headers: Mapping[str, str], *, stream: bool, memo: dict[Any, Any] | None = None
    ) -> UpstreamResponse:
        """Forward one request. `memo`: a dict shared by requests whose headers are the same (the proxy's
        `Request.memo`): the request head made from them is kept there and written once."""
        try:
            prefix = memo.get(self) if memo is not None else None
            if prefix is None:
                out = list(end_to_end(headers, drop=_SKIP_KEYED if self.api_key else _SKIP).items())
                prefix = self._client.head_prefix(out + self._extra)
                if memo is not None:
                    memo[self] = prefix
            reply = await self._client.post(body, (), stream=stream, prefix=prefix)
        except HTTPFailure as exc:
            raise self._error(exc) from None
        except ValueError as exc:  # a header that cannot be sent (from a caller, not from the server)
            raise UpstreamError(str(exc), 400, "invalid_header") from None
        kept = end_to_end(reply.headers, drop=RESPONSE_SKIP)
        if reply.stream is None:
            return UpstreamResponse(status=reply.status, headers=kept, body=reply.body)
        pieces = reply.stream

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for data in pieces:
                    yield data
            except HTTPFailure as exc:
                raise self._error(exc, "stream ") from None

        return UpstreamResponse(status=reply.status, headers=kept, stream=chunks(), release=reply.release)

    def _error(self, exc: HTTPFailure, what: str = "") -> UpstreamError:
        if exc.timeout:
            return UpstreamError(
                f"upstream {self.url} {what}stalled: {exc} (--upstream-timeout, an idle timeout)",
                504,
                "upstream_timeout",
            )
        if exc.permanent:
            return UpstreamError(f"upstream {self.url} {what}refused: {exc}", 502, "upstream_refused")
        return UpstreamError(f"upstream {self.url} {what}failed: {exc}")

    async def close(self) -> None:
        await self._client.close()


def chat_url(base_url: str) -> str:
    """``<base path>/chat/completions``, the base URL's query string kept after it; a `UsageError` for
    a URL that is not http(s) with a host, or that has a fragment."""
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise UsageError(f"upstream URL {base_url!r}: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise UsageError(f"upstream URL {base_url!r}: not an http:// or https:// URL")
    if not parts.hostname:
        raise UsageError(f"upstream URL {base_url!r}: the URL names no host (e.g. http://127.0.0.1:8081/v1)")
    if parts.fragment:
        raise UsageError(f"upstream URL {base_url!r}: a #fragment is never sent to a server; drop it")
    path = parts.path.rstrip("/") + "/chat/completions"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


MAX_DELAY_SCALE = 1000.0
"""The largest `TraceUpstream.delay_scale` (``--delay-scale``): a recorded second then takes about 17
minutes; more is a mistake (a huge scale meant no reply at all), never a useful pace."""


class TraceUpstream:
    """A recorded trace as the upstream: request k (k = assistant messages sent so far) gets the
    recorded response of round k. Stateless, so many conversations can replay the same trace.

    Replies carry the recorded ``created`` (else the time of the reply) and the recorded ``usage``;
    a trace that recorded no usage (the scripted scenarios) sends none: no figure is made up.

    Keeps `request_count` and the last `keep_requests` request bodies (`requests`), never all of them.

    `delay_scale` > 0 paces replies by the recording, scaled: a streaming request whose round was
    recorded as a stream with chunk offsets (``chunk_timing`` not ``none``) gets the recorded chunks,
    each at its recorded offset x `delay_scale` and ``[DONE]`` at the recorded latency x
    `delay_scale`, so a client that acts on chunks as they arrive (an ``eager`` run) can overlap
    with the stream; any other reply (non-streaming, or a round recorded whole) comes whole after
    the recorded latency x `delay_scale`. `delay_scale` is at most `MAX_DELAY_SCALE`.
    """

    def __init__(self, trace: Trace, *, delay_scale: float = 0.0, keep_requests: int = 100) -> None:
        from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator
        from toolcall_lab.importers import chat_body

        if not (isinstance(delay_scale, int | float) and 0 <= delay_scale <= MAX_DELAY_SCALE):
            raise UsageError(
                f"delay_scale={delay_scale!r}: must be a number from 0 to {MAX_DELAY_SCALE:g} (0: no pacing)"
            )
        self.trace = trace
        self.delay_scale = delay_scale
        self.requests: deque[dict[str, Any]] = deque(maxlen=keep_requests)
        self.request_count = 0
        self._offset = sum(1 for m in trace.initial_messages if m.get("role") == "assistant")
        self._bodies: list[dict[str, Any]] = []
        for r in trace.rounds:
            chunks = [c.payload for c in r.model_call.chunks]
            if len(chunks) == 1 and chunks[0].get("object") == "chat.completion":
                body = dict(chunks[0])
            else:
                acc = ChatCompletionAccumulator(batch=r.round_index)
                for c in chunks:
                    acc.feed(c)
                body = chat_body(acc.finish())
            created = next((c.get("created") for c in chunks if isinstance(c.get("created"), int)), None)
            if created is not None:
                body.setdefault("created", created)
            for key in ("system_fingerprint", "service_tier"):  # per chunk in a stream: kept whole too
                value = next((c.get(key) for c in chunks if c.get(key) is not None), None)
                if value is not None:
                    body.setdefault(key, value)
            if body.get("usage") is None and r.model_call.usage:  # the recorded usage, never a made-up one
                body["usage"] = dict(r.model_call.usage)
            self._bodies.append(body)
        self._latency = [r.model_call.latency_s for r in trace.rounds]
        self._paced: list[tuple[tuple[float, dict[str, Any]], ...] | None] = [
            _paced_chunks(r.model_call.chunks, r.model_call.chunk_timing) for r in trace.rounds
        ]

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """The recorded response for this conversation (raises `UpstreamError` 400 when there is none)."""
        return await self._reply(self._round_for(body))

    async def _reply(self, k: int) -> dict[str, Any]:
        """Round `k`'s recorded response, whole, after its recorded latency x `delay_scale`."""
        if self.delay_scale:
            await asyncio.sleep(self._latency[k] * self.delay_scale)
        copied: dict[str, Any] = json.loads(json.dumps(self._bodies[k]))  # callers may mutate it
        copied.setdefault("created", int(time.time()))  # a required field the recording may lack
        return copied

    def _round_for(self, body: dict[str, Any]) -> int:
        """Count and keep the request; the round whose recorded response answers it (an
        `UpstreamError` 400 when there is none)."""
        self.request_count += 1
        self.requests.append(body)
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise UpstreamError("request has no 'messages' list", 400, "invalid_request")
        if not messages and self.trace.initial_messages:  # a trace that recorded no request starts empty
            raise UpstreamError(
                "request's 'messages' is empty: send at least one message (this trace starts with "
                f"{len(self.trace.initial_messages)})",
                400,
                "invalid_request",
            )
        k = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant") - self._offset
        if not 0 <= k < len(self._bodies):
            raise UpstreamError(
                f"the recorded trace has no response for a conversation with {k} assistant "
                f"turn(s) (it has {len(self._bodies)} rounds)",
                400,
                "no_recorded_response",
            )
        return k

    async def send(self, body: bytes, headers: Mapping[str, str], *, stream: bool) -> UpstreamResponse:
        try:
            request = loads(body)
        except JSONError as exc:
            return _json_response(400, error_body(400, f"request body is not JSON: {exc}", "invalid_json"))
        if not isinstance(request, dict):
            return _json_response(400, error_body(400, "request body must be a JSON object", "invalid_json"))
        try:
            k = self._round_for(request)
        except UpstreamError as exc:
            return _json_response(exc.status, error_body(exc.status, str(exc), exc.code))
        include = bool((request.get("stream_options") or {}).get("include_usage"))
        paced = self._paced[k] if stream and self.delay_scale else None
        if paced is not None:  # chunk by chunk, at the recorded offsets
            return UpstreamResponse(
                status=200,
                headers={"Content-Type": "text/event-stream"},
                stream=self._paced_stream(k, paced, include),
            )
        response = await self._reply(k)
        if stream:
            data = b"".join(sse_events(response, include_usage=include))

            async def one() -> AsyncIterator[bytes]:
                yield data

            return UpstreamResponse(status=200, headers={"Content-Type": "text/event-stream"}, stream=one())
        return _json_response(200, response)

    async def _paced_stream(
        self, k: int, paced: tuple[tuple[float, dict[str, Any]], ...], include_usage: bool
    ) -> AsyncIterator[bytes]:
        """The recorded chunks of round `k`, each at its offset x `delay_scale` from the request."""
        loop = asyncio.get_running_loop()
        start, scale = loop.time(), self.delay_scale
        body = self._bodies[k]
        head = {"id": body.get("id", "chatcmpl-proxy"), "object": "chat.completion.chunk"}
        head["created"] = body.get("created", int(time.time()))
        head["model"] = body.get("model")
        usage_sent = False
        for offset, payload in paced:
            usage_only = not payload.get("choices") and "usage" in payload
            if usage_only and not include_usage:
                continue  # (the client did not ask for the usage chunk)
            usage_sent = usage_sent or usage_only
            delay = start + offset * scale - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            yield b"data: " + dumps({**head, **payload}) + b"\n\n"
        if include_usage and not usage_sent:  # (as `sse_events`: the recorded usage, null when none)
            yield b"data: " + dumps({**head, "choices": [], "usage": body.get("usage")}) + b"\n\n"
        delay = start + self._latency[k] * scale - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        yield b"data: [DONE]\n\n"

    async def close(self) -> None:
        return None


def _paced_chunks(chunks: Any, chunk_timing: str) -> tuple[tuple[float, dict[str, Any]], ...] | None:
    """A round's recorded stream as (offset, chunk) pairs to pace a reply by; None when the round
    was recorded whole (a single chunk, a chat.completion body, no chunk timing)."""
    if chunk_timing == "none" or len(chunks) < 2:
        return None
    if any(c.payload.get("object", "chat.completion.chunk") != "chat.completion.chunk" for c in chunks):
        return None
    return tuple((max(0.0, c.offset_s), c.payload) for c in chunks)


def _json_response(status: int, value: Any) -> UpstreamResponse:
    return UpstreamResponse(status=status, headers={"Content-Type": "application/json"}, body=dumps(value))


COUNTS = web.AppKey("counts", dict)
"""What an `upstream_app` counted (``requests``, ``answered``, ``disconnected``), also shown by its
/health."""
IN_FLIGHT: web.AppKey[set[asyncio.Task[Any]]] = web.AppKey("in_flight")
"""The tasks of an `upstream_app`'s requests still being answered (`cut_in_flight` stops them)."""


def upstream_app(upstream: Upstream, *, max_body_bytes: int = 32 * 1024 * 1024) -> web.Application:
    """Serve any `Upstream` (e.g. a recorded trace) as a plain OpenAI-compatible endpoint.

    A client that goes away before its reply has been sent whole (a stream paced by ``--delay-scale``,
    a ``record`` stopped with Ctrl-C) is a normal end, counted as ``disconnected``, not an error."""

    counts = {"requests": 0, "answered": 0, "disconnected": 0}
    in_flight: set[asyncio.Task[Any]] = set()

    async def handle(request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        in_flight.add(task)
        try:
            return await answer(request)
        finally:
            in_flight.discard(task)

    async def answer(request: web.Request) -> web.StreamResponse:
        counts["requests"] += 1
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return web.json_response(
                error_body(413, f"request body over {max_body_bytes} bytes", "body_too_large"), status=413
            )
        try:
            parsed = loads(raw)
        except JSONError:
            parsed = None
        stream = isinstance(parsed, dict) and parsed.get("stream") is True
        reply = await upstream.send(raw, request.headers, stream=stream)
        if 200 <= reply.status < 300:
            counts["answered"] += 1
        if reply.stream is None:
            return web.Response(status=reply.status, body=reply.body, headers=reply.headers)
        out = web.StreamResponse(status=reply.status, headers=reply.headers)
        try:
            await out.prepare(request)
            async for data in reply.stream:
                await out.write(data)
            await out.write_eof()
        except ConnectionError:  # the client went away mid-reply: a normal end, counted, no traceback
            counts["disconnected"] += 1  # (aiohttp then closes the connection quietly)
        finally:
            aclose = getattr(reply.stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return out

    async def health(request: web.Request) -> web.Response:
        """``requests``: every POST to the chat-completions path, whatever its body (bad JSON included);
        ``answered``: those answered 2xx; ``refused``: the others; ``disconnected``: replies the client
        went away from before their end. GET /health is not counted."""
        refused = counts["requests"] - counts["answered"]
        return web.json_response({"ok": True, **counts, "refused": refused})

    async def elsewhere(request: web.Request) -> web.Response:
        known = ("/v1/chat/completions", "/chat/completions", "/health")
        status = 405 if request.path in known else 404
        what = "method not allowed" if status == 405 else "no such endpoint"
        message = f"{what}: {request.method} {request.path} (POST /v1/chat/completions, GET /health)"
        return web.json_response(error_body(status, message, "http_error"), status=status)

    app = web.Application(client_max_size=max_body_bytes)
    app[COUNTS] = counts
    app[IN_FLIGHT] = in_flight
    app.router.add_post("/v1/chat/completions", handle)
    app.router.add_post("/chat/completions", handle)
    app.router.add_get("/health", health)
    app.router.add_route("*", "/{tail:.*}", elsewhere)
    return app


async def cut_in_flight(app: web.Application) -> int:
    """Stop, at once, every request an `upstream_app` is still answering (a stream paced by
    ``--delay-scale`` may have minutes to go): its connection closes without the rest of the reply.
    Returns how many were cut off."""
    in_flight = app[IN_FLIGHT]
    tasks = list(in_flight)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return len(tasks)


async def serve(
    app: web.Application | Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    max_body_bytes: int = 32 * 1024 * 1024,
    shutdown_timeout: float = 60.0,
) -> tuple[web.BaseRunner, str]:
    """Start an aiohttp app, or a bare request handler on aiohttp's low-level server (no router or
    middleware machinery: the proxy's per-request cost); returns the runner and base URL ending in /v1.
    The runner's ``cleanup()`` waits up to `shutdown_timeout` seconds for requests in flight."""
    runner: web.BaseRunner
    if isinstance(app, web.Application):
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
    else:
        loop = asyncio.get_running_loop()

        def make_request(
            message: Any, payload: Any, protocol: Any, writer: Any, task: Any
        ) -> web.BaseRequest:
            return web.BaseRequest(
                message, payload, protocol, writer, task, loop, client_max_size=max_body_bytes
            )

        runner = web.ServerRunner(
            web.Server(app, request_factory=make_request, access_log=None), shutdown_timeout=shutdown_timeout
        )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    assert server is not None and getattr(server, "sockets", None)
    bound = server.sockets[0].getsockname()  # type: ignore[attr-defined]
    return runner, f"http://{bound[0]}:{bound[1]}/v1"

"""How the HTTP proxy talks to its upstream and answers its clients: its own errors as OpenAI-style
JSON, upstream errors passed through with their status, body and ``Retry-After``, requests forwarded
as bytes (an answer that is not a chat completion becomes a 502), replies rendered as JSON or SSE."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from toolcall_lab.proxy._httpd import Reply as HTTPReply
from toolcall_lab.proxy._httpd import Request, Response, StreamResponse
from toolcall_lab.proxy._wire import (
    NO_RETRY,
    RETRYABLE,
    WRITERS,
    JSONError,
    TooDeep,
    dumps,
    error_body,
    loads,
    same_but_spacing,
    spans,
    splice,
    sse_events,
)
from toolcall_lab.proxy.upstreams import HTTPUpstream, Upstream, UpstreamError, UpstreamResponse


class HTTPError(Exception):
    """A reply the proxy makes itself: an OpenAI-style error with a status and a code. Unless the code
    is one a retry may cure (`_wire.RETRYABLE`), it says ``x-should-retry: false``."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code

    def response(self) -> Response:
        headers = None if self.code in RETRYABLE else NO_RETRY
        return json_reply(self.status, error_body(self.status, str(self), self.code), headers)


class Reply(Exception):
    """A finished response to send as it is (an upstream error passed through)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.response = response


CALL_SKIP = frozenset(
    {
        "content-type",
        "date",
        "etag",
        "last-modified",
        "content-md5",
        "digest",
        "content-digest",
        "repr-digest",
        "content-range",
        "accept-ranges",
    }
)
"""Upstream reply headers about its body's bytes, not the call: a reply the proxy writes itself drops
them (and writes its own Date)."""


def call_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The upstream reply's headers that describe the upstream call (``x-request-id``,
    ``x-ratelimit-*``, ``openai-*``, ``retry-after``, ...): all end-to-end headers but `CALL_SKIP`."""
    return {k: v for k, v in headers.items() if k.lower() not in CALL_SKIP}


_CALL_PLANS: dict[tuple[str, ...], tuple[list[str], str | None]] = {}


def _call_plan(names: tuple[str, ...]) -> tuple[list[str], str | None]:
    """For the names of a reply's headers: those `call_headers` keeps, and the first Content-Type's name
    (decided once per set of names: an upstream sends the same names every time)."""
    plan = _CALL_PLANS.get(names)
    if plan is None:
        kind = next((n for n in names if n.lower() == "content-type"), None)
        plan = ([n for n in names if n.lower() not in CALL_SKIP], kind)
        if len(_CALL_PLANS) >= 1024:
            _CALL_PLANS.clear()
        _CALL_PLANS[names] = plan
    return plan


class Answer:
    """A chat completion from the upstream: parsed, as sent (bytes and content type), and the headers
    that describe the call."""

    __slots__ = ("content_type", "headers", "raw", "response")

    def __init__(
        self, response: dict[str, Any], raw: bytes, headers: dict[str, str], content_type: str
    ) -> None:
        self.response, self.raw, self.headers, self.content_type = response, raw, headers, content_type


def json_reply(status: int, value: Any, headers: Mapping[str, str] | None = None) -> Response:
    out = {"Content-Type": "application/json"}
    if headers:
        out.update(headers)
    return Response(status, dumps(value), out)


class Forwarder:
    """The proxy's side of the upstream: one request out, one reply back, never retried.

    Args:
        upstream: where requests go.
        idle_timeout_s: an upstream request fails (504) when nothing comes for this long: no answer
            yet, or no next piece of a stream. An upstream with a ``timeout_s`` of its own
            (`HTTPUpstream`) enforces it itself, byte by byte; for any other the forwarder does.
        total_timeout_s: time allowed for one upstream request from start to the end of its answer,
            stream included (a 504 past it); None: no cap.
        model: model name sent upstream instead of the client's (None: the client's).
        stats: the server's counters (``upstream_calls``, ``passed_through``, ``upstream_error_replies``,
            ``streams_cut``).
    """

    def __init__(
        self,
        upstream: Upstream,
        *,
        idle_timeout_s: float,
        total_timeout_s: float | None,
        model: str | None,
        stats: dict[str, int],
    ) -> None:
        self.upstream = upstream
        own = getattr(upstream, "timeout_s", None)
        self.idle_timeout_s: float | None = None if isinstance(own, int | float) else idle_timeout_s
        self.total_timeout_s = total_timeout_s
        self.model = model
        self.stats = stats
        self.keeps_heads = isinstance(upstream, HTTPUpstream)
        """Whether the upstream keeps the request head it makes from a client's headers (`Request.memo`)."""

    def upstream_body(
        self, raw: bytes, body: dict[str, Any], messages: list[dict[str, Any]], *, stream: bool
    ) -> bytes:
        """The client's body `raw` with the upstream's `messages` (and the model override; without
        `stream`, no ``stream`` / ``stream_options``). Everything else keeps its bytes: unknown
        fields, numbers as written, repeated keys, and every message the proxy did not change."""
        replace = {"model": dumps(self.model)} if self.model else {}
        drop = frozenset() if stream else frozenset({"stream", "stream_options"})
        # Most clients write JSON that the parsed body writes back to the same tokens (no repeated keys,
        # numbers and escapes as orjson writes them), compact or spaced (Python's json.dumps, pretty
        # printers): then writing the new body from the parsed one keeps every token the client wrote
        # (only the spacing between tokens may change), found with two C-speed passes, not a scan.
        ascii_only = raw.isascii()
        originals = body.get("messages")
        if not (isinstance(originals, list) and len(raw) >= PIECEWISE_BYTES * max(len(originals), 1)):
            originals = None  # written whole (see PIECEWISE_BYTES)
        for write in WRITERS:
            if originals is not None:
                new = _rewritten(write, raw, body, originals, messages, self.model, drop, ascii_only)
                if new is not None:
                    return new
                continue
            written = write(body)
            if (
                written is not None
                and (not ascii_only or written.isascii())
                and same_but_spacing(written, raw)
            ):
                out = {**body, "messages": messages, **({"model": self.model} if self.model else {})}
                new = write({k: v for k, v in out.items() if k not in drop})
                if new is not None:
                    return new
        found = spans(raw)
        if found is None:  # pragma: no cover - the body parsed as an object
            out = {**body, "messages": messages, **({"model": self.model} if self.model else {})}
            return dumps({k: v for k, v in out.items() if k not in drop})
        return splice(raw, found, replace, drop=drop, messages=messages, originals=body.get("messages"))

    async def send(
        self, data: bytes, headers: Mapping[str, str], *, stream: bool, memo: dict[Any, Any] | None = None
    ) -> UpstreamResponse:
        self.stats["upstream_calls"] += 1
        idle, total = self.idle_timeout_s, self.total_timeout_s
        if idle is None and total is None:  # the upstream keeps its own idle timeout (the usual case)
            try:
                if memo is not None and self.keeps_heads:
                    return await self.upstream.send(data, headers, stream=stream, memo=memo)  # type: ignore[call-arg]
                return await self.upstream.send(data, headers, stream=stream)
            except UpstreamError as exc:
                raise HTTPError(exc.status, str(exc), exc.code) from None
        now = asyncio.get_running_loop().time()
        deadline = now + total if total is not None else None
        try:
            async with asyncio.timeout_at(_first(deadline, now + idle if idle is not None else None)):
                reply = await self.upstream.send(data, headers, stream=stream)
        except TimeoutError:
            raise HTTPError(
                504, self._timeout_message(deadline, "did not answer"), "upstream_timeout"
            ) from None
        except UpstreamError as exc:
            raise HTTPError(exc.status, str(exc), exc.code) from None
        if reply.stream is not None:
            reply.stream = self._timed(reply.stream, deadline)
        return reply

    def _timeout_message(self, deadline: float | None, what: str) -> str:
        if deadline is not None and asyncio.get_running_loop().time() >= deadline - 1e-3:
            return (
                f"upstream {what} within {self.total_timeout_s:g} s "
                "(--upstream-total-timeout, a cap on the whole request)"
            )
        return f"upstream sent nothing for {self.idle_timeout_s:g} s (--upstream-timeout, an idle timeout)"

    async def _timed(self, stream: AsyncIterator[bytes], deadline: float | None) -> AsyncIterator[bytes]:
        """The stream, ending with an `UpstreamError` (504) when a piece takes longer than the idle
        timeout or the total cap is reached."""
        iterator = aiter(stream)
        idle = self.idle_timeout_s
        while True:
            now = asyncio.get_running_loop().time()
            try:
                async with asyncio.timeout_at(_first(deadline, now + idle if idle is not None else None)):
                    data = await anext(iterator)
            except StopAsyncIteration:
                return
            except TimeoutError:
                what = "did not finish its stream"
                raise UpstreamError(self._timeout_message(deadline, what), 504, "upstream_timeout") from None
            yield data

    async def call_upstream(
        self,
        request: Request,
        body: dict[str, Any],
        messages: list[dict[str, Any]],
        *,
        unchanged: bool = False,
    ) -> Answer:
        """One non-streamed upstream request whose reply the proxy must read (a serial client's).

        `unchanged`: the client's messages go upstream as they are, so its body is sent as it came
        when nothing else changes (no model override, no streaming to turn off).
        """
        raw = request.body
        if not (unchanged and not self.model and "stream" not in body and "stream_options" not in body):
            raw = self.upstream_body(raw, body, messages, stream=False)
        reply = await self.send(raw, request.headers, stream=False, memo=request.memo)
        if reply.status >= 400:
            raise Reply(self.upstream_error(reply))
        response = self.chat_completion(reply)
        if reply.body.count(b"[") + reply.body.count(b"{") > 254:  # deep enough that orjson cannot write it
            try:
                dumps(response)  # what handing out its calls will do: a failure is the upstream's, a 502
            except TooDeep as exc:
                why = f"upstream answered with {exc}; the proxy cannot hand it out"
                raise HTTPError(502, why, "upstream_bad_response") from None
        headers = reply.headers
        kept_names, kind_name = _call_plan(tuple(headers))
        kind = headers[kind_name] if kind_name is not None else "application/json"
        return Answer(response, reply.body, {name: headers[name] for name in kept_names}, kind)

    def chat_completion(self, reply: UpstreamResponse) -> dict[str, Any]:
        """The upstream's body as a chat completion, or a 502 JSON error saying what came instead."""
        try:
            response = loads(reply.body)
        except TooDeep as exc:
            raise HTTPError(
                502, f"upstream answered {reply.status} with {exc}", "upstream_bad_response"
            ) from None
        except JSONError:
            response = None
        if not isinstance(response, dict) or not isinstance(response.get("choices"), list):
            kind = reply.headers.get("Content-Type") or reply.headers.get("content-type") or "no content type"
            raise HTTPError(
                502,
                f"upstream answered {reply.status} ({kind}) with a body that is not a chat completion: "
                f"{reply.body[:300].decode('utf-8', 'replace')!r}",
                "upstream_bad_response",
            )
        return response

    def upstream_error(self, reply: UpstreamResponse) -> Response:
        """An upstream error as the client must see it: same status, body and Retry-After; a body that
        is not JSON (an HTML 500 page) is quoted in an OpenAI-style JSON error, the status kept."""
        self.stats["upstream_error_replies"] += 1
        what = "a non-JSON body"
        try:
            parsed = loads(reply.body)
        except TooDeep as exc:
            parsed, what = None, str(exc)
        except JSONError:
            parsed = None
        headers = {k: v for k, v in reply.headers.items() if k.lower() != "content-type"}
        if isinstance(parsed, dict):
            return Response(reply.status, reply.body, {"Content-Type": "application/json", **headers})
        text = reply.body[:2000].decode("utf-8", "replace")
        message = f"upstream answered {reply.status} with {what}: {text!r}"
        return json_reply(reply.status, error_body(reply.status, message, "upstream_error"), headers)

    async def pass_through(
        self, request: Request, body: dict[str, Any], raw: bytes, messages: list[dict[str, Any]] | None
    ) -> HTTPReply:
        """Forward a request the proxy need not serialize: bytes in, bytes (or a stream) out.
        `messages`: the upstream's form of the conversation when it differs from the client's."""
        self.stats["passed_through"] += 1
        stream = body.get("stream") is True
        if messages is not None or self.model:
            raw = self.upstream_body(
                raw, body, messages if messages is not None else body["messages"], stream=True
            )
        reply = await self.send(raw, request.headers, stream=stream, memo=request.memo)
        if reply.status >= 400:
            if reply.stream is not None:  # pragma: no cover - upstreams read error bodies whole
                await reply.release()
            return self.upstream_error(reply)
        if reply.stream is not None and not _is_event_stream(reply.headers):
            try:  # asked to stream, answered with something else: read it whole and check it
                reply.body = b"".join([data async for data in reply.stream])
            except UpstreamError as exc:
                raise HTTPError(exc.status, str(exc), exc.code) from None
            finally:
                await reply.release()
            reply.stream = None
        if reply.stream is None:
            if 200 <= reply.status < 300:
                self.chat_completion(reply)  # a 502 unless it is one
            return Response(reply.status, reply.body, reply.headers)
        return StreamResponse(reply.status, reply.headers, self._relay(reply))

    async def _relay(self, reply: UpstreamResponse) -> AsyncIterator[bytes]:
        """The upstream's stream as it comes; if it breaks off, an error event says so in the stream.
        The connection goes back to the pool (or closes) however the stream ends."""
        assert reply.stream is not None
        try:
            async for data in reply.stream:
                yield data
        except UpstreamError as exc:
            self.stats["streams_cut"] += 1
            yield b"data: " + dumps(error_body(exc.status, str(exc), exc.code)) + b"\n\n"
        finally:
            await reply.release()

    def render(
        self,
        body: dict[str, Any],
        response: dict[str, Any],
        headers: Mapping[str, str] | None = None,
        *,
        raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> Response:
        """A reply as the client asked for it: JSON (`raw`: the upstream's own bytes, sent as they
        came), or the same as server-sent events; `headers`: those of the upstream call it answers."""
        out = dict(headers or {})
        if body.get("stream") is True:
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            out.update({"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            return Response(200, b"".join(sse_events(response, include_usage=include)), out)
        out["Content-Type"] = content_type if raw is not None else "application/json"
        return Response(200, raw if raw is not None else dumps(response), out)


PIECEWISE_BYTES = 4096
"""Bodies whose messages average at least this many bytes are written message by message (`_rewritten`:
one write of the large ones instead of two); others whole, twice (a write per message costs Python work
per message, which many small messages would make more than a second write of the whole)."""
_SLOT = "\x00toolcall-lab messages\x00"
"""Stands for the message list while the rest of a body is written (found once, or not used)."""


def _rewritten(
    write: Any,
    raw: bytes,
    body: dict[str, Any],
    originals: list[Any],
    messages: list[dict[str, Any]],
    model: str | None,
    drop: frozenset[str],
    ascii_only: bool,
) -> bytes | None:
    """The new body written by `write` when `write` gives back the client's tokens (`same_but_spacing`),
    else None. Each message is written once: a message the proxy did not change goes upstream as the
    bytes written for the check, a result it only re-homed under the upstream's call id (same content
    object) as those bytes with that one id replaced; only the messages it built are written anew.
    So the proxy writes a large body once, not twice."""
    pieces: dict[int, bytes] = {}
    by_content: dict[int, dict[str, Any]] = {}
    for message in originals:
        piece = write(message)
        if piece is None or (ascii_only and not piece.isascii()):  # other tokens: not the same
            return None
        pieces[id(message)] = piece
        if isinstance(message, dict) and "tool_call_id" in message and "content" in message:
            by_content[id(message["content"])] = message
    shell = write({**body, "messages": _SLOT})
    slot = write(_SLOT)
    if shell is None or slot is None or shell.count(slot) != 1:
        return None
    before, after = shell.split(slot)
    written = [pieces[id(m)] for m in originals]
    if not _same_bytes(raw, before, written, after) and not same_but_spacing(
        _joined(before, [(w,) for w in written], after), raw
    ):
        return None
    parts: list[tuple[bytes | memoryview, ...]] = []
    for message in messages:
        piece = pieces.get(id(message))
        if piece is not None:
            parts.append((piece,))
            continue
        segments = _rehomed(write, message, by_content, pieces)
        if segments is None:
            piece = write(message)
            if piece is None:
                return None
            segments = (piece,)
        parts.append(segments)
    out = {**body, "messages": _SLOT, **({"model": model} if model else {})}
    shell = write({k: v for k, v in out.items() if k not in drop})
    if shell is None or shell.count(slot) != 1:  # pragma: no cover - written once above
        return None
    before, after = shell.split(slot)
    return _joined(before, parts, after)


def _joined(before: bytes, pieces: list[tuple[bytes | memoryview, ...]], after: bytes) -> bytes:
    """``before[piece,piece,...]after`` (each piece given as its segments) in one copy: a large body is
    not copied twice."""
    out: list[bytes | memoryview] = [before, b"["]
    for segments in pieces:
        out += segments
        out.append(b",")
    if pieces:
        out.pop()
    out += (b"]", after)
    return b"".join(out)


def _same_bytes(raw: bytes, before: bytes, pieces: list[bytes], after: bytes) -> bool:
    """Whether `raw` is exactly ``before[piece,...]after``, compared in place (no copy of the body)."""
    size = len(before) + 2 + sum(map(len, pieces)) + max(len(pieces) - 1, 0) + len(after)
    if len(raw) != size or not raw.startswith(before) or not raw.startswith(b"[", len(before)):
        return False
    at = len(before) + 1
    for k, piece in enumerate(pieces):
        if k and not raw.startswith(b",", at):
            return False
        at += 1 if k else 0
        if not raw.startswith(piece, at):
            return False
        at += len(piece)
    return raw.startswith(b"]", at) and raw.endswith(after)


def _rehomed(
    write: Any, message: Any, by_content: dict[int, dict[str, Any]], pieces: dict[int, bytes]
) -> tuple[bytes | memoryview, ...] | None:
    """The bytes of a client's tool message moved under another ``tool_call_id`` (every other field the
    same object), from the bytes written for the original (as segments: its text is not copied); None
    when `message` is not such a copy."""
    if not isinstance(message, dict) or "content" not in message:
        return None
    original = by_content.get(id(message["content"]))
    if (
        original is None
        or list(original) != list(message)  # the same keys in the same order
        or any(message[k] is not v for k, v in original.items() if k != "tool_call_id")
    ):
        return None
    old_key, new_key = (
        write({"tool_call_id": original["tool_call_id"]}),
        write({"tool_call_id": message["tool_call_id"]}),
    )
    if old_key is None or new_key is None:
        return None
    old_key, new_key = old_key[1:-1], new_key[1:-1]
    piece = pieces[id(original)]
    at = piece.find(old_key)
    if at < 0 or piece.find(old_key, at + 1) >= 0:  # the key's bytes elsewhere too: write it anew
        return None
    view = memoryview(piece)
    return view[:at], new_key, view[at + len(old_key) :]


def _first(a: float | None, b: float | None) -> float | None:
    """The earlier of two deadlines (None: none)."""
    if a is None:
        return b
    return a if b is None else min(a, b)


def _is_event_stream(headers: Mapping[str, str]) -> bool:
    kind = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    return kind.lower().startswith("text/event-stream")

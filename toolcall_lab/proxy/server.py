"""The serialized proxy as an OpenAI-compatible HTTP server (aiohttp).

For a request with ``parallel_tool_calls: false`` whose upstream answer holds N > 1 tool calls, the
client receives only the first call; each tool result it sends back is answered with the next call
without calling upstream; once all N are answered, one upstream request carries the original
assistant message with all N calls and the N results in order. Everything else passes through as
bytes over a pooled connection.

How each request is recognised (see `batches` for the matching itself):

- **First request** (no tool results at the end): always a new conversation; it goes upstream, even
  when another client sent identical messages. It is a *retry* only when the client says so: the same
  ``Idempotency-Key`` header replays the stored reply byte for byte (a different body under a used
  key is a 409), and under an ``x-session-id`` the same messages while that session's batch for them
  is still open get its first call again. A repeated first message after the batch finished is a new
  conversation.
- **Continuation** (ends with tool results): matched by the ids of the calls it answers, which the
  upstream issued, plus the conversation before them (prefix hash, same ``x-session-id``). The next
  result is recorded and the next call handed out; a repeat of an earlier continuation gets the same
  reply as before (idempotent); the last result triggers the single upstream request, and its reply is
  kept so a retry of that request gets it again.
- **Conflict**: a result for a call that was already answered with *different* content is a 409
  naming the call and its position; a result for a call not handed out yet is a 409 (out of order).
  Nothing is recorded from a refused request.
- **Expired / evicted batch**: the proxy keeps a tombstone (call ids, progress) for a day, so a
  continuation gets a 410 naming the calls never handed out and what to do; a partial batch is never
  forwarded. With ``--state FILE`` (SQLite) open batches survive a restart.
- **Interrupted batch**: a request in which a batch's pairs are followed by anything other than the
  next tool result (typically a new user message) proceeds upstream; the batch is closed as
  ``interrupted`` and the upstream sees the full assistant message, the results given, and for each
  call never handed out a tool message saying it was not executed because the user interrupted.
- **Later turns**: every known batch in the history is merged back into the form the upstream
  produced (one assistant message with N calls), so the upstream never sees the split form.

Errors are OpenAI-style JSON bodies; upstream errors keep their status, body and ``Retry-After``;
the proxy never retries by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from toolcall_lab.exceptions import UsageError
from toolcall_lab.formats.openai_chat import parse_chat_completion
from toolcall_lab.proxy._wire import (
    JSONError,
    dumps,
    error_body,
    hand_out_reply,
    loads,
    sse_events,
    template_of,
)
from toolcall_lab.proxy.batches import (
    Batch,
    CallInfo,
    PrefixHashes,
    Run,
    find_runs,
    same_content,
    single_call,
    translate,
    upstream_tool_messages,
)
from toolcall_lab.proxy.session import hand_out_message
from toolcall_lab.proxy.store import MemoryStore, SQLiteStore, StoredReply, StoreLimits
from toolcall_lab.proxy.upstreams import Upstream, UpstreamError, UpstreamResponse, serve

SESSION_HEADER = "x-session-id"
IDEMPOTENCY_HEADER = "Idempotency-Key"


class HTTPError(Exception):
    """A reply the proxy makes itself: an OpenAI-style error with a status and a code."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code

    def response(self) -> web.Response:
        return json_reply(self.status, error_body(self.status, str(self), self.code))


class Reply(Exception):
    """A finished response to send as it is (an upstream error passed through)."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.status)
        self.response = response


def json_reply(status: int, value: Any, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=dumps(value), content_type="application/json", headers=headers)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxySettings:
    """Settings of a `ProxyServer`; validated on creation."""

    ttl_s: float = 600.0
    """A batch unused this long expires (its tombstone answers late continuations with 410)."""
    max_batches: int = 10_000
    max_bytes: int = 256 * 1024 * 1024
    tombstone_ttl_s: float = 24 * 3600.0
    max_body_bytes: int = 32 * 1024 * 1024
    """Largest request body accepted (a larger one gets a JSON 413)."""
    upstream_timeout_s: float = 120.0
    model: str | None = None
    """Model name sent upstream instead of the client's (None: the client's)."""
    sweep_s: float = 1.0
    """How often expired batches are swept (so /health is current)."""

    def __post_init__(self) -> None:
        if not self.max_body_bytes >= 1024:
            raise UsageError(f"ProxySettings.max_body_bytes={self.max_body_bytes!r}: must be >= 1024")
        if not self.upstream_timeout_s > 0:
            raise UsageError(
                f"ProxySettings.upstream_timeout_s={self.upstream_timeout_s!r}: must be > 0 seconds"
            )
        if not self.sweep_s > 0:
            raise UsageError(f"ProxySettings.sweep_s={self.sweep_s!r}: must be > 0 seconds")

    def limits(self) -> StoreLimits:
        return StoreLimits(
            ttl_s=self.ttl_s,
            max_batches=self.max_batches,
            max_bytes=self.max_bytes,
            tombstone_ttl_s=self.tombstone_ttl_s,
        )


def _not_routed(request: web.BaseRequest) -> web.Response:
    """Unknown paths and methods get OpenAI-style JSON errors too (404 / 405), not aiohttp's text."""
    if request.path.rstrip("/") in ("/v1/chat/completions", "/chat/completions", "/health"):
        status, reason = 405, f"method {request.method} not allowed on {request.path}"
    else:
        status, reason = 404, f"no such endpoint: {request.method} {request.path}"
    return json_reply(status, error_body(status, reason, "http_error"))


class ProxyServer:
    """The serialized proxy (see the module docstring). `state` names a SQLite file for durable state."""

    def __init__(
        self,
        upstream: Upstream,
        settings: ProxySettings | None = None,
        *,
        state: str | Path | None = None,
        clock: Callable[[], float] = time.time,
        **overrides: Any,
    ) -> None:
        if overrides:
            settings = ProxySettings(**{**_fields(settings or ProxySettings()), **overrides})
        self.settings = settings or ProxySettings()
        self.upstream = upstream
        limits = self.settings.limits()
        self.store: MemoryStore = (
            SQLiteStore(state, limits, clock=clock) if state else MemoryStore(limits, clock=clock)
        )
        self.clock = clock
        self.stats = {
            "requests": 0,
            "upstream_calls": 0,
            "served_from_queue": 0,
            "passed_through": 0,
            "batches_opened": 0,
            "batches_finished": 0,
            "batches_interrupted": 0,
            "retries_replayed": 0,
            "conflicts": 0,
            "gone": 0,
            "errors": 0,
        }
        self._locks: dict[str, asyncio.Lock] = {}
        self._key_locks: dict[str, asyncio.Lock] = {}
        self._runner: web.BaseRunner | None = None
        self._sweeper: asyncio.Task[None] | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on host:port (port 0 picks a free one); returns the base URL ending in /v1."""
        self._runner, url = await serve(
            self.dispatch, host, port, max_body_bytes=self.settings.max_body_bytes
        )
        self._sweeper = asyncio.create_task(self._sweep_forever())
        return url

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.upstream.close()
        self.store.close()

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.sweep_s)
            self.sweep()

    def sweep(self) -> int:
        """Expire idle batches now (the server also does it every `sweep_s`)."""
        expired = self.store.sweep()
        if expired:
            for batch_id in [k for k, lock in self._locks.items() if not lock.locked()]:
                if self.store.get(batch_id) is None:
                    del self._locks[batch_id]
        return expired

    async def dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        """The routes: POST /v1/chat/completions (or /chat/completions), GET /health; else JSON 404/405."""
        if request.path in ("/v1/chat/completions", "/chat/completions") and request.method == "POST":
            return await self.handle(request)
        if request.path == "/health" and request.method == "GET":
            return await self.health(request)
        return _not_routed(request)

    async def health(self, request: web.BaseRequest) -> web.Response:
        self.sweep()
        return json_reply(200, {"ok": True, **self.store.summary(), **self.stats})

    # --- requests --------------------------------------------------------------------------------

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        self.stats["requests"] += 1
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            self.stats["errors"] += 1
            return HTTPError(
                413,
                f"request body is larger than the proxy's limit of {self.settings.max_body_bytes} bytes "
                "(ProxySettings.max_body_bytes, --max-body-bytes)",
                "body_too_large",
            ).response()
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if not key:
            return await self._answer(request, raw)
        lock = self._key_locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                return await self._idempotent(key, request, raw)
        finally:
            if not lock.locked() and self._key_locks.get(key) is lock:
                del self._key_locks[key]

    async def _idempotent(self, key: str, request: web.BaseRequest, raw: bytes) -> web.StreamResponse:
        digest = hashlib.sha256(raw).hexdigest()
        stored = self.store.reply_for(key)
        if stored is not None:
            if stored.request_hash != digest:
                self.stats["conflicts"] += 1
                return HTTPError(
                    409,
                    f"Idempotency-Key {key!r} was already used for a different request body; use a new key "
                    "for a new request",
                    "idempotency_key_reused",
                ).response()
            self.stats["retries_replayed"] += 1
            return web.Response(
                status=stored.status, body=stored.body, headers={"Content-Type": stored.content_type}
            )
        response = await self._answer(request, raw)
        if isinstance(response, web.Response) and 200 <= response.status < 300 and response.body is not None:
            body = response.body if isinstance(response.body, bytes) else bytes(response.body)  # type: ignore[arg-type]
            self.store.keep_reply(
                key,
                StoredReply(
                    request_hash=digest,
                    status=response.status,
                    content_type=response.headers.get("Content-Type", "application/json"),
                    body=body,
                    at=self.clock(),
                ),
            )
        return response

    async def _answer(self, request: web.BaseRequest, raw: bytes) -> web.StreamResponse:
        try:
            return await self.respond(request, raw)
        except HTTPError as exc:
            self.stats["errors"] += 1
            if exc.status == 409:
                self.stats["conflicts"] += 1
            elif exc.status == 410:
                self.stats["gone"] += 1
            return exc.response()
        except Reply as reply:
            self.stats["errors"] += 1
            return reply.response

    async def respond(self, request: web.BaseRequest, raw: bytes) -> web.StreamResponse:
        try:
            body = loads(raw)
        except JSONError as exc:
            raise HTTPError(400, f"request body is not valid JSON: {exc}", "invalid_json") from None
        if not isinstance(body, dict):
            raise HTTPError(400, "request body must be a JSON object", "invalid_json")
        messages = body.get("messages")
        serial = body.get("parallel_tool_calls") is False
        session = request.headers.get(SESSION_HEADER, "")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            if serial:
                raise HTTPError(400, "'messages' must be a list of message objects", "invalid_messages")
            return await self.pass_through(request, body, raw, changed=False)
        hashes = PrefixHashes(messages, session)
        runs = find_runs(messages, hashes, self.store.starting, self.store.has_call)
        n = len(messages)
        ends_with_result = bool(messages) and messages[-1].get("role") == "tool"
        if runs and runs[-1].end == n and ends_with_result:
            return await self.continue_batch(request, body, messages, runs, hashes, session)
        if ends_with_result:
            self.check_trailing_results(messages, hashes, session)
        if session and serial and not runs:
            retry = [
                b for b in self.store.with_prefix(hashes[n]) if b.session == session and b.state == "open"
            ]
            if retry:
                self.stats["served_from_queue"] += 1
                self.store.touch(retry[-1])
                return self.render(body, self.hand_out(retry[-1], 0))
        for run in runs:
            self.close_interrupted(run)
        upstream_messages = translate(messages, runs) if runs else messages
        if not serial:
            return await self.pass_through(
                request, {**body, "messages": upstream_messages}, raw, changed=bool(runs)
            )
        response = await self.call_upstream(request, body, upstream_messages)
        return self.render(body, self.after_upstream(response, messages, hashes, session))

    # --- batches ---------------------------------------------------------------------------------

    def hand_out(self, batch: Batch, position: int) -> dict[str, Any]:
        from toolcall_lab.messages import ToolCall

        info = batch.calls[position]
        call = ToolCall(
            tool_call_id=info.tool_call_id, name=info.name, arguments=info.arguments, index=position
        )
        return hand_out_reply(batch.template, hand_out_message(batch.assistant, call, position), position)

    def close_interrupted(self, run: Run) -> None:
        """A batch whose pairs are followed by something else: the user moved on (see module docstring)."""
        batch = run.batch
        if batch.state == "open":
            batch.state = "finished" if run.answered >= len(batch.calls) else "interrupted"
            self.stats["batches_interrupted" if batch.state == "interrupted" else "batches_finished"] += 1
            self.store.save(batch)
        else:
            self.store.touch(batch)

    async def continue_batch(
        self,
        request: web.BaseRequest,
        body: dict[str, Any],
        messages: list[dict[str, Any]],
        runs: Sequence[Run],
        hashes: PrefixHashes,
        session: str,
    ) -> web.StreamResponse:
        tail = runs[-1]
        lock = self._locks.setdefault(tail.batch.batch_id, asyncio.Lock())
        async with lock:
            batch = self.store.get(tail.batch.batch_id)
            if batch is None:  # expired while this request waited
                raise HTTPError(
                    410, self.gone_message(tail.batch.calls, tail.batch.answered, "expired"), "batch_expired"
                )
            results, n_calls = tail.results, len(batch.calls)
            for j in range(min(len(results), batch.answered)):
                if not same_content(results[j], batch.results[j]):
                    call = batch.calls[j]
                    raise HTTPError(
                        409,
                        f"conflict: tool call {call.tool_call_id!r} ({call.name}, position {j} of "
                        f"{n_calls}) was "
                        f"already answered with different content (message {tail.start + 2 * j + 1}); a "
                        "result "
                        "cannot be changed once given. Resend the conversation with the original result, "
                        "or start "
                        "a new turn.",
                        "result_conflict",
                    )
            if batch.state == "interrupted":
                raise HTTPError(
                    409,
                    f"the batch holding {batch.calls[0].tool_call_id!r} was closed because a later request "
                    "in this conversation moved on (a new user message) before it was finished",
                    "batch_interrupted",
                )
            k = len(results)
            if k > batch.answered + 1:
                early = batch.calls[batch.answered + 1]
                raise HTTPError(
                    409,
                    f"result for {early.tool_call_id!r} arrived out of order: the proxy has handed "
                    "out calls up "
                    f"to position {batch.answered} ({batch.calls[batch.answered].tool_call_id!r})",
                    "out_of_order",
                )
            if k == batch.answered + 1:
                batch.results.append(results[-1])
                self.store.save(batch)
            else:
                self.store.touch(batch)
            if k < n_calls:
                self.stats["served_from_queue"] += 1
                return self.render(body, self.hand_out(batch, k))
            if batch.final is not None:  # a retry of the request that completed the batch
                self.stats["retries_replayed"] += 1
                return self.render(body, batch.final)
            history = translate(messages[: tail.start], runs[:-1])
            upstream_messages = [*history, batch.assistant, *upstream_tool_messages(batch, results)]
            response = await self.call_upstream(request, body, upstream_messages)
            reply = self.after_upstream(response, messages, hashes, session)
            batch.final, batch.state = reply, "finished"
            self.stats["batches_finished"] += 1
            self.store.save(batch)
            return self.render(body, reply)

    def check_trailing_results(
        self, messages: list[dict[str, Any]], hashes: PrefixHashes, session: str
    ) -> None:
        """Tool results at the end that match no live batch: refuse them when they belong to a batch this
        proxy forgot (410) or continue a live batch wrongly (409); otherwise they pass through."""
        n = len(messages)
        start = n
        while start >= 2 and messages[start - 1].get("role") == "tool":
            call = single_call(messages[start - 2])
            if call is None:
                break
            if call.get("id") != messages[start - 1].get("tool_call_id"):
                if self.store.with_call(str(call.get("id"))):
                    raise HTTPError(
                        400,
                        f"message {start - 1} (tool) answers {messages[start - 1].get('tool_call_id')!r} "
                        "but the "
                        f"assistant message before it called {call.get('id')!r}",
                        "tool_call_mismatch",
                    )
                break
            start -= 2
        if start == n:
            return
        ids = [single_call(messages[i])["id"] for i in range(start, n, 2)]  # type: ignore[index]
        for tomb in self.store.tombstones_with_call(ids[0]):
            if (
                tomb.session == session
                and tomb.prefix_hash == hashes[start]
                and list(tomb.call_ids[: len(ids)]) == ids
            ):
                calls = [
                    CallInfo(tool_call_id=c, name=nm, arguments="")
                    for c, nm in zip(tomb.call_ids, tomb.names, strict=True)
                ]
                raise HTTPError(
                    410,
                    self.gone_message(calls, tomb.answered, tomb.reason, given=len(ids)),
                    f"batch_{tomb.reason}",
                )
        for pos, cid in enumerate(ids):
            for batch in self.store.with_call(cid):
                if batch.session != session or batch.prefix_hash != hashes[start]:
                    continue
                expected = batch.calls[pos] if pos < len(batch.calls) else None
                want = f"{expected.tool_call_id!r} ({expected.name})" if expected else "no further call"
                raise HTTPError(
                    409,
                    f"result for {cid!r} arrived out of order: message {start + 2 * pos + 1} answers "
                    f"it, but position {pos} of the batch this "
                    f"conversation is waiting on is {want}; the proxy hands out calls in order and "
                    "has handed out "
                    f"{min(batch.answered + 1, len(batch.calls))} of {len(batch.calls)}",
                    "out_of_order",
                )

    def gone_message(
        self, calls: Sequence[CallInfo], answered: int, reason: str, *, given: int | None = None
    ) -> str:
        handed = min(answered + 1, len(calls))
        never = [f"{c.tool_call_id} ({c.name})" for c in calls[handed:]]
        why = (
            f"expired after {self.settings.ttl_s:g} s without use"
            if reason == "expired"
            else "was evicted to stay within the proxy's memory bound"
        )
        return (
            f"this batch of {len(calls)} tool calls {why}; the proxy no longer holds the "
            "model's full answer, so "
            "it will not forward a partial batch. "
            + (
                f"Calls never handed out: {', '.join(never)}. "
                if never
                else "All calls had been handed out. "
            )
            + (f"This request carries {given} result(s). " if given is not None else "")
            + "To continue, resend the conversation without this batch's tool calls and "
            "results (ending at the "
            "message before the assistant message that holds the first of them) so the model is asked again."
        )

    def after_upstream(
        self,
        response: dict[str, Any],
        client_messages: list[dict[str, Any]],
        hashes: PrefixHashes,
        session: str,
    ) -> dict[str, Any]:
        """Open a batch when a serial client got N > 1 calls; reply with its first call."""
        choices = response.get("choices")
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            return response
        message = choices[0].get("message")
        if not isinstance(message, dict) or not isinstance(message.get("tool_calls"), list):
            return response
        if len(message["tool_calls"]) < 2:
            return response
        calls = parse_chat_completion(response).tool_calls
        if len(calls) < 2:
            return response
        assistant: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        for key in ("refusal", "name"):
            if message.get(key) is not None:
                assistant[key] = message[key]
        assistant["tool_calls"] = [c.to_openai() for c in calls]
        now = self.clock()
        batch = Batch(
            batch_id=uuid.uuid4().hex,
            session=session,
            prefix_hash=hashes[len(client_messages)],
            prefix_len=len(client_messages),
            assistant=assistant,
            calls=[CallInfo(tool_call_id=c.tool_call_id, name=c.name, arguments=c.arguments) for c in calls],
            template=template_of(response),
            created_at=now,
            touched_at=now,
        )
        self.store.save(batch)
        self.stats["batches_opened"] += 1
        first = hand_out_message({**message, "tool_calls": assistant["tool_calls"]}, calls[0], 0)
        return hand_out_reply(batch.template, first, 0)

    # --- upstream --------------------------------------------------------------------------------

    def upstream_body(self, body: dict[str, Any], messages: list[dict[str, Any]], *, stream: bool) -> bytes:
        out = {**body, "messages": messages}
        if self.settings.model:
            out["model"] = self.settings.model
        if not stream:
            out.pop("stream", None)
            out.pop("stream_options", None)
        return dumps(out)

    async def send(self, data: bytes, headers: Mapping[str, str], *, stream: bool) -> UpstreamResponse:
        self.stats["upstream_calls"] += 1
        try:
            return await asyncio.wait_for(
                self.upstream.send(data, headers, stream=stream), self.settings.upstream_timeout_s
            )
        except TimeoutError:
            raise HTTPError(
                504,
                f"upstream did not answer within {self.settings.upstream_timeout_s:g} s",
                "upstream_timeout",
            ) from None
        except UpstreamError as exc:
            raise HTTPError(exc.status, str(exc), exc.code) from None

    async def call_upstream(
        self, request: web.BaseRequest, body: dict[str, Any], messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """One non-streamed upstream request whose reply the proxy must read (a serial client's)."""
        reply = await self.send(
            self.upstream_body(body, messages, stream=False), request.headers, stream=False
        )
        if reply.status >= 400:
            raise Reply(self.upstream_error(reply))
        try:
            response = loads(reply.body)
        except JSONError:
            response = None
        if not isinstance(response, dict) or not isinstance(response.get("choices"), list):
            raise HTTPError(
                502,
                f"upstream answered {reply.status} with a body that is not a chat completion: "
                f"{reply.body[:300].decode('utf-8', 'replace')!r}",
                "upstream_bad_response",
            )
        return response

    def upstream_error(self, reply: UpstreamResponse) -> web.Response:
        """An upstream error as the client must see it: same status, body and Retry-After."""
        try:
            parsed = loads(reply.body)
        except JSONError:
            parsed = None
        headers = {k: v for k, v in reply.headers.items() if k.lower() != "content-type"}
        if isinstance(parsed, dict):
            return web.Response(
                status=reply.status, body=reply.body, content_type="application/json", headers=headers
            )
        text = reply.body[:2000].decode("utf-8", "replace")
        message = f"upstream answered {reply.status} with a non-JSON body: {text!r}"
        return json_reply(reply.status, error_body(reply.status, message, "upstream_error"), headers)

    async def pass_through(
        self, request: web.BaseRequest, body: dict[str, Any], raw: bytes, *, changed: bool
    ) -> web.StreamResponse:
        """Forward a request the proxy need not serialize: bytes in, bytes (or a stream) out."""
        self.stats["passed_through"] += 1
        stream = body.get("stream") is True
        if changed or self.settings.model:
            raw = self.upstream_body(body, body["messages"], stream=True)
        reply = await self.send(raw, request.headers, stream=stream)
        if reply.status >= 400:
            if reply.stream is not None:  # pragma: no cover - upstreams read error bodies whole
                await reply.release()
            return self.upstream_error(reply)
        if reply.stream is None:
            return web.Response(status=reply.status, body=reply.body, headers=reply.headers)
        out = web.StreamResponse(status=reply.status, headers=reply.headers)
        try:
            await out.prepare(request)
            async for data in reply.stream:
                await out.write(data)
        except UpstreamError as exc:  # the upstream broke off mid-stream: say so in the stream
            self.stats["errors"] += 1
            await out.write(b"data: " + dumps(error_body(exc.status, str(exc), exc.code)) + b"\n\n")
        finally:
            await reply.release()
        await out.write_eof()
        return out

    def render(self, body: dict[str, Any], response: dict[str, Any]) -> web.Response:
        """A reply as the client asked for it: JSON, or the same as server-sent events."""
        if body.get("stream") is True:
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return web.Response(
                status=200,
                body=b"".join(sse_events(response, include_usage=include)),
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
            )
        return json_reply(200, response)


def _fields(settings: ProxySettings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in ProxySettings.__dataclass_fields__}

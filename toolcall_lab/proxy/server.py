"""The serialized proxy as an OpenAI-compatible HTTP server.

For a request with ``parallel_tool_calls: false`` whose upstream answer holds N > 1 tool calls, the
client receives only the first call; each tool result it sends back is answered with the next call
without calling upstream; once all N are answered, one upstream request carries the upstream's own
assistant message with all N calls and the N results in order. Everything else passes through as
bytes over a pooled connection.

**The proxy owns the ids it hands out** (see `ids`): each call goes to the client under an opaque proxy
id (a random batch tag, its position, the batch size; at most 33 characters); every request sent
upstream carries the upstream's ids again, from the batch record or, once the batch is forgotten, its
tombstone (a call the upstream sent without an id goes back under its proxy id). A batch is therefore
recognised by ids only it ever had, whatever the upstream's ids are (repeated, empty, missing,
long), whatever ``x-session-id`` is sent, and however the conversation before the batch changes
between round trips (a system prompt with the current time). How each request is handled:

- **First request** (it answers no call handed out by the proxy): always a new conversation; it goes
  upstream, even when another client sent identical messages. It is a *retry* only when the client
  says so: the same ``Idempotency-Key`` with the same JSON body replays the stored reply byte for byte
  (another body under a used key is a 409), and under an ``x-session-id`` the same messages while the
  batch they opened is still open get its first call again. The same first message after that batch
  finished is a new conversation. Copies in flight at once under either marker share one upstream
  call: the later ones wait for the first and get its answer (`_Flights`).
- **Scope**: everything kept (Idempotency-Key replies, ``x-session-id`` retries, batches, tombstones)
  is keyed by `batches.scope_of` the caller's credentials (a digest of ``Authorization``, ``api-key``,
  ``x-api-key``, ``x-goog-api-key``, ``OpenAI-Organization``, ``OpenAI-Project``; '' without them):
  another caller's Idempotency-Key or session is its own, and a request carrying other credentials for
  a batch's ids is a 403 naming the call (`check_scope`).
- **Continuation** (ends with the result of a call handed out by the proxy): the batch is the one the
  id names. The next result is recorded and the next call handed out; a repeat of an earlier request
  gets the same reply (idempotent); the last result triggers the one upstream request, whose reply is
  kept so a retry of that request gets it again: matched on the batch's ids, calls and results and on
  every request field but the messages and ``stream`` / ``stream_options`` (another ``model`` is a 409
  ``retry_differs`` naming it). A request served from the queue is read only as far
  as its batch's own messages at the end of the conversation (`queued_tail`); the rest is read when
  the conversation goes upstream.
- **Conflict**: a result for a call already answered with *different* content is a 409 naming the
  call and its position; a result for a call the proxy has not handed out yet is a 409
  ``out_of_order`` naming that call. Nothing is recorded from a refused request. Messages that break
  the shape the proxy handed out (a result without its call, a batch interleaved with other
  messages, ids changed, a call's name or arguments edited, other calls right after an unfinished
  batch) are a 400 naming the message.
- **A batch the proxy no longer holds** (expired after ``--ttl``, evicted by ``--max-batches`` /
  ``--max-bytes``, or a restart without ``--state``): its ids still say they are the proxy's. A
  continuation that holds the whole batch (all N calls and results) is rebuilt from the client's
  messages and forwarded, and the answer kept for its retries in a ``rebuilt`` record; any other is a
  410 naming the calls never handed out and where to cut the
  conversation: a partial batch is never forwarded. With ``--state FILE`` (SQLite) open batches
  survive a restart.
- **A completed batch never goes upstream twice**: once the request that completes a batch was
  answered, its retries get the kept reply; when that reply is gone (expired, evicted, too large to
  keep) the batch record or its tombstone still says the batch was completed, and a retry is a 409
  ``batch_reply_not_kept`` saying why and where to cut the conversation, never a second upstream call.
- **Interrupted batch**: a batch followed by anything other than its next result (typically a new
  user message) is closed as ``interrupted`` and the new turn proceeds. The upstream gets a valid
  conversation: the assistant message with all N calls, one tool message per call (the client's
  result; else "handed to the client, but the user sent a new message before its result came back";
  else "the user sent a new message before this call was handed to the client"), then the new message.
- **Later turns**: every batch in the history goes upstream in the upstream's form (one assistant
  message with N calls under its own ids, then N tool messages). When the proxy no longer holds the
  batch it is rebuilt from the client's messages; only the calls of an interrupted batch that were
  never handed out cannot be rebuilt then (they are left out, counted in ``/health`` and logged). A
  batch in the history is whole or absent: an edited result is a 409, a left-out pair or result the
  proxy received a 400 naming the call (`check_results`), never filled in.

Errors are OpenAI-style JSON bodies; the proxy's own refusals that a retry cannot change say
``x-should-retry: false``; upstream errors keep their status, body and ``Retry-After``; the proxy never
retries by itself. The first hand-out of a batch carries the upstream's usage and logprobs as sent
(absent if it sent none); replies served from the queue carry ``usage: null`` and ``logprobs: null``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

from toolcall_lab.proxy._forward import Answer, Forwarder, HTTPError, Reply, json_reply
from toolcall_lab.proxy._httpd import HTTPServer, Request, Response, StreamResponse
from toolcall_lab.proxy._httpd import Reply as HTTPReply
from toolcall_lab.proxy._wire import (
    JSONError,
    TooDeep,
    exact,
    hand_out_reply,
    loads,
    loads_lenient,
    request_digest,
    split_response,
)
from toolcall_lab.proxy.batches import (
    SCOPE_HEADERS,
    Batch,
    MalformedBatch,
    Split,
    Tombstone,
    check_unedited,
    differing_fields,
    holds_proxy_ids,
    merged,
    pairs_at_end,
    request_fields,
    result_digest,
    scan,
    scope_of,
    session_key,
    translate,
)
from toolcall_lab.proxy.ids import MAX_CALLS, new_tag, parse, proxy_id
from toolcall_lab.proxy.settings import ProxySettings, _Flights, _Locks
from toolcall_lab.proxy.store import MemoryStore, SQLiteStore, StoredReply, TooLarge
from toolcall_lab.proxy.upstreams import Upstream

logger = logging.getLogger("toolcall_lab.proxy")
SESSION_HEADER = "x-session-id"
IDEMPOTENCY_HEADER = "idempotency-key"
"""Header names as the server reads them (lower case)."""
SINGLE_HEADERS = frozenset({*SCOPE_HEADERS, IDEMPOTENCY_HEADER, SESSION_HEADER})
"""Headers a request may send once only (a repeat is a 400): the credentials and the two keys the proxy
keeps state under. Joined, two credentials would be forwarded as one value and scope nothing."""


_ROUTES = ("/v1/chat/completions", "/chat/completions", "/health")
_CHAT_PATHS = frozenset(_ROUTES[:2])
_REFUSALS = {
    408: "request_timeout",
    415: "unsupported_content_encoding",
    417: "expectation_failed",
    503: "too_many_connections",
}
"""Codes of the HTTP server's own refusals besides 413 and malformed requests (``invalid_http``)."""


def _not_routed(request: Request) -> Response:
    """Unknown paths and methods get OpenAI-style JSON errors too (404 / 405; a trailing slash is told)."""
    if request.path in _ROUTES:
        status, reason = 405, f"method {request.method} not allowed on {request.path}"
    elif request.path.rstrip("/") in _ROUTES:
        status = 404
        reason = (
            f"no such endpoint: {request.method} {request.path} (did you mean {request.path.rstrip('/')}?)"
        )
    else:
        status = 404
        reason = (
            f"no such endpoint: {request.method} {request.path}; the proxy serves chat completions only "
            "(POST /v1/chat/completions, GET /health)"
        )
        if request.path.rstrip("/").endswith("/responses"):
            reason += (
                ", not the Responses API: with the OpenAI Agents SDK use OpenAIChatCompletionsModel, or "
                "set_default_openai_api('chat_completions')"
            )
    return HTTPError(status, reason, "http_error").response()


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
            "retries_joined": 0,
            "conflicts": 0,
            "gone": 0,
            "batches_rebuilt_from_client": 0,
            "requests_with_rebuilt_batches": 0,
            "calls_left_out": 0,
            "not_split": 0,
            "error_replies_4xx": 0,
            "error_replies_5xx": 0,
            "upstream_error_replies": 0,
            "proxy_faults": 0,
            "streams_cut": 0,
        }
        """The counters ``/health`` shows (see the README's proxy section for what each counts)."""
        idle = getattr(upstream, "timeout_s", None)
        if isinstance(idle, int | float):  # the upstream keeps its own idle timeout, never a longer one
            upstream.timeout_s = min(idle, self.settings.upstream_timeout_s)  # type: ignore[attr-defined]
        self.forward = Forwarder(
            upstream,
            idle_timeout_s=self.settings.upstream_timeout_s,
            total_timeout_s=self.settings.upstream_total_timeout_s,
            model=self.settings.model,
            stats=self.stats,
        )
        self._rebuilt: OrderedDict[str, None] = OrderedDict()
        """Tags of batches rebuilt from a client's messages, counted once (bounded like the store)."""
        self._locks = _Locks()
        self._flights = _Flights()
        """Identical requests in flight at once under one retry marker: one upstream call for them all."""
        """One lock per batch tag and per Idempotency-Key: concurrent requests for one batch queue up."""
        self._http: HTTPServer | None = None
        self._sweeper: asyncio.Task[None] | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self, host: str | list[str] = "127.0.0.1", port: int = 0) -> str:
        """Serve on host:port (port 0 picks a free one; a list of hosts: each of them, on one port);
        returns the base URL ending in /v1. ``::`` listens on IPv6 only (asyncio sets IPV6_V6ONLY):
        give ``["::", "0.0.0.0"]`` (``--host :: --host 0.0.0.0``) for both."""
        settings = self.settings
        self._http = HTTPServer(
            self.dispatch,
            self.refusal,
            fast=self.fast,
            max_body_bytes=settings.max_body_bytes,
            keepalive_s=settings.keepalive_s,
            head_timeout_s=settings.head_timeout_s,
            body_timeout_s=settings.body_timeout_s,
            max_connections=settings.max_connections,
            single_headers=SINGLE_HEADERS,
            max_inflight_body_bytes=settings.max_inflight_body_bytes,
        )
        url = await self._http.start(host, port)
        self._sweeper = asyncio.create_task(self._sweep_forever())
        return url

    @property
    def urls(self) -> list[str]:
        """The base URLs the server listens on (one per host)."""
        return list(self._http.urls) if self._http is not None else []

    async def close(self) -> int:
        """Stop serving: requests in flight get `ProxySettings.close_grace_s` to deliver their replies
        (`hurry` cuts that short); then the upstream pool and the state file are closed. Returns how many
        requests were still in flight when the grace ended (cancelled)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        cut = 0
        if self._http is not None:
            cut = await self._http.close(self.settings.close_grace_s)
            self._http = None
        await self.upstream.close()
        self.store.close()
        return cut

    @property
    def in_flight(self) -> int:
        """Requests being answered now."""
        return sum(1 for c in self._http.connections if c.task is not None) if self._http else 0

    def hurry(self) -> None:
        """During `close`: stop waiting for requests in flight (a second Ctrl-C or SIGTERM)."""
        if self._http is not None:
            self._http.hurry()

    async def _sweep_forever(self) -> None:
        """Expire on a timer. A failing sweep is a proxy fault (logged, counted in /health), never the end
        of expiry: a sweep that raised used to end this task silently, and batches stopped expiring."""
        while True:
            await asyncio.sleep(self.settings.sweep_s)
            try:
                self.sweep()
            except Exception:
                logger.exception("proxy bug while expiring batches (the next sweep tries again)")
                self.stats["proxy_faults"] += 1

    def sweep(self) -> int:
        """Expire idle batches now (the server also does it every `sweep_s`)."""
        return self.store.sweep()

    async def dispatch(self, request: Request) -> HTTPReply:
        """The routes: POST /v1/chat/completions (or /chat/completions), GET /health; else JSON 404/405.

        A bug of the proxy's own still answers JSON (a 500 naming the exception; the traceback is logged).
        """
        polled = False  # GET /health is not counted in `requests`: a monitor polling it inflates nothing
        try:
            if request.path in ("/v1/chat/completions", "/chat/completions") and request.method == "POST":
                reply = await self.handle(request)
            elif request.path == "/health" and request.method == "GET":
                reply = await self.health(request)
                polled = True
            else:
                reply = _not_routed(request)
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception as exc:
            reply = self.fault(request, exc)
        if not polled:
            self.stats["requests"] += 1
            self.count_reply(reply.status)
        return reply

    def fault(self, request: Any, exc: Exception) -> Response:
        """A 500 for a bug of the proxy's own while answering `request` (logged and counted)."""
        logger.exception("proxy bug while answering %s %s", request.method, request.path)
        self.stats["proxy_faults"] += 1
        return HTTPError(
            500, f"the proxy failed on this request ({type(exc).__name__}: {exc})", "proxy_error"
        ).response()

    def count_reply(self, status: int) -> None:
        """Count an error reply by status class, whoever made it (the proxy or the upstream)."""
        if status >= 500:
            self.stats["error_replies_5xx"] += 1
        elif status >= 400:
            self.stats["error_replies_4xx"] += 1

    async def health(self, request: Request) -> Response:
        self.sweep()
        return json_reply(200, {"ok": True, **self.store.summary(), **self.stats})

    # --- requests --------------------------------------------------------------------------------

    def refusal(self, status: int, message: str, code: str = "") -> Response:
        """The reply to a request the HTTP server answers itself: too large (413), too slow (408), an
        expectation it cannot meet (417), an unsupported coding (415), at the connection cap or past the
        in-flight body budget (503, with Retry-After) or malformed (400, 431, 501, 505)."""
        self.stats["requests"] += 1
        self.count_reply(status)
        if status == 503:
            reply = HTTPError(503, message, code or _REFUSALS[503]).response()
            reply.headers["Retry-After"] = "1"
            return reply
        if status == 413:
            return HTTPError(
                413,
                f"request body is larger than the proxy's limit of {self.settings.max_body_bytes} bytes "
                "(ProxySettings.max_body_bytes, --max-body-bytes)",
                "body_too_large",
            ).response()
        code = _REFUSALS.get(status, "invalid_http")
        what = "malformed HTTP request: " if code == "invalid_http" else ""
        return HTTPError(status, what + message, code).response()

    async def handle(self, request: Request) -> HTTPReply:
        # (counted in `requests` by `dispatch`, which runs it)
        raw = request.body
        memo = request.memo  # what the request's head gives, worked out once per head seen
        scope = memo.get("scope")
        if scope is None:  # everything kept is keyed by it
            scope = memo["scope"] = scope_of(request.headers)
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if not key:
            return await self._answer(request, raw, scope)

        async def keyed() -> HTTPReply:
            async with self._locks.hold(f"key:{scope}:{key}"):
                return await self._idempotent(key, request, raw, scope)

        # the same request in flight at once under the same key shares the first one's reply, whatever
        # its status (a stream passed through cannot be shared: then the key's kept reply decides)
        reply, shared = await self._flights.run(f"key:{scope}:{key}:{request_digest(raw)}", keyed)
        if not shared:
            return reply
        if isinstance(reply, StreamResponse):
            return await keyed()
        self.stats["retries_joined"] += 1
        return Response(reply.status, reply.body, dict(reply.headers))

    async def _idempotent(self, key: str, request: Request, raw: bytes, scope: str) -> HTTPReply:
        """A request under an Idempotency-Key: the key is the caller's own (kept under `scope_of` its
        credentials), so another caller using the same key starts its own request."""
        digest = request_digest(raw)
        stored = self.store.reply_for(f"{scope}:{key}")
        if stored is not None:
            if stored.request_hash != digest:
                self.stats["conflicts"] += 1
                differ = differing_fields(stored.fields, _parsed(raw), frozenset()) if stored.fields else []
                named = f" (it differs in {', '.join(repr(f) for f in differ)})" if differ else ""
                return HTTPError(
                    409,
                    f"Idempotency-Key {key!r} was already used for a different request body{named}, "
                    "compared as JSON field by field (spacing and key order aside); use a new key for a "
                    "new request",
                    "idempotency_key_reused",
                ).response()
            if not stored.kept:
                self.stats["conflicts"] += 1
                return HTTPError(
                    409,
                    f"Idempotency-Key {key!r} was already answered, but that reply was not kept "
                    f"({stored.content_type}); the proxy will not send the request again under the "
                    "same key. Use a new key to ask again.",
                    "idempotent_reply_not_kept",
                ).response()
            self.stats["retries_replayed"] += 1
            return Response(
                stored.status, stored.body, {**stored.headers, "Content-Type": stored.content_type}
            )
        response = await self._answer(request, raw, scope)
        if 200 <= response.status < 300:
            streamed = isinstance(response, StreamResponse)
            body = response.body if isinstance(response, Response) else b""
            kind = response.content_type if isinstance(response, Response) else "a stream passed through"
            self.store.keep_reply(
                f"{scope}:{key}",
                StoredReply(
                    request_hash=digest,
                    status=response.status,
                    content_type=kind,
                    body=body,
                    at=self.clock(),
                    kept=not streamed,
                    headers={k: v for k, v in response.headers.items() if k.lower() != "content-type"},
                    fields=request_fields(_parsed(raw), frozenset()),
                ),
            )
        return response

    async def _answer(self, request: Request, raw: bytes, scope: str) -> HTTPReply:
        try:
            return await self.respond(request, raw, scope)
        except HTTPError as exc:
            return self.refused(exc)
        except Reply as reply:
            return reply.response
        except TooDeep as exc:  # the request's own JSON: what the upstream sent is checked where it is read
            return too_deep(exc).response()

    def refused(self, exc: HTTPError) -> Response:
        """The reply for a refusal of the proxy's own, counted (409 conflicts, 410 gone)."""
        if exc.status == 409:
            self.stats["conflicts"] += 1
        elif exc.status == 410:
            self.stats["gone"] += 1
        return exc.response()

    async def respond(self, request: Request, raw: bytes, scope: str) -> HTTPReply:
        known = request.parsed  # (body, its queued tail) when `fast` read it already
        if known is not None:
            body, queued = known
            messages = body["messages"]
            serial = body.get("parallel_tool_calls") is False
        else:
            try:
                body = loads(raw)
            except JSONError as exc:
                return await self.unreadable(request, raw, exc)
            queued, messages, serial = None, None, False
        if known is None:
            if not isinstance(body, dict):
                raise HTTPError(400, "request body must be a JSON object", "invalid_json")
            messages = body.get("messages")
            serial = body.get("parallel_tool_calls") is False
            if not isinstance(messages, list) or not all(map(isinstance, messages, repeat(dict))):
                if serial:
                    raise HTTPError(400, "'messages' must be a list of message objects", "invalid_messages")
                return await self.forward.pass_through(request, body, raw, None)
            queued = self.queued_tail(messages)
        assert isinstance(messages, list)
        if queued is not None:  # the next result of a batch the proxy holds: served from its queue
            return await self.continue_batch(request, body, messages, [], {}, queued, scope)
        body = exact(raw, body)  # what goes upstream is written again: keep every number as it came
        messages = body["messages"]
        splits = self.completing_tail(messages)
        if splits is None:
            try:
                splits = scan(messages)
            except MalformedBatch as exc:
                raise HTTPError(400, str(exc), "invalid_batch_messages") from None
        tail = splits[-1] if splits and splits[-1].end == len(messages) else None
        if tail is not None and (messages[-1].get("role") != "tool" or tail.answered < tail.handed):
            index, call = tail.calls[tail.handed - 1]
            raise HTTPError(
                400,
                f"the conversation ends with call {call.get('id')!r} (message {index}), which the proxy "
                "handed out, but without its result; send its tool message to continue",
                "missing_tool_result",
            )
        history = splits[:-1] if tail is not None else splits
        if any(self.forgotten(split.tag) for split in history):
            self.stats["requests_with_rebuilt_batches"] += 1
        forms = {split.tag: self.history_form(split, messages, scope) for split in history}
        if tail is not None:
            return await self.continue_batch(request, body, messages, history, forms, tail, scope)
        session = request.headers.get(SESSION_HEADER, "")
        key = session_key(session, messages, scope, request_fields(body)) if session and serial else ""
        upstream_messages = translate(messages, history, forms)
        if not serial:
            return await self.forward.pass_through(request, body, raw, upstream_messages if splits else None)
        if key:
            return await self.session_first(request, body, upstream_messages, bool(splits), key, scope)
        answer = await self.forward.call_upstream(request, body, upstream_messages, unchanged=not splits)
        with upstream_json():
            return self.answer_serial(body, answer, key, scope)

    async def session_first(
        self,
        request: Request,
        body: dict[str, Any],
        upstream_messages: list[dict[str, Any]],
        changed: bool,
        key: str,
        scope: str,
    ) -> HTTPReply:
        """A first request under ``x-session-id`` (`key`: its `session_key`): the same request while the
        batch it opened is open gets that batch's first call again; while it is still in flight, the
        later copies wait for it and get its answer (the same batch, or its answer as sent, or its
        error): one upstream call, however many copies a client's retries send."""
        retry = self.store.open_for(key)
        if retry is not None:  # the same request again under the same x-session-id
            self.stats["served_from_queue"] += 1
            self.store.touch(retry)
            return self.forward.render(
                body, hand_out_reply(retry.template, retry.choice, retry.hand_out(0), 0), retry.headers
            )

        async def first() -> tuple[Answer, str | None]:
            answer = await self.forward.call_upstream(request, body, upstream_messages, unchanged=not changed)
            with upstream_json():
                opened = self.new_batch(answer, key, scope)
            return answer, opened.tag if opened is not None else None

        (answer, tag), shared = await self._flights.run("session:" + key, first)
        batch = self.store.get(tag) if tag is not None else None
        if shared:
            self.stats["retries_joined"] += 1
            if batch is not None:
                self.store.touch(batch)
        if batch is not None:
            return self.forward.render(
                body, hand_out_reply(batch.template, batch.choice, batch.hand_out(0), 0), answer.headers
            )
        if tag is not None:  # pragma: no cover - opened a moment ago: only a flood of new batches evicts it
            raise HTTPError(
                503,
                f"the batch this request opened ({tag}) was evicted before this copy of the request was "
                "answered (--max-batches, --max-bytes); send it again",
                "batch_evicted",
            )
        return self.forward.render(
            body, answer.response, answer.headers, raw=answer.raw, content_type=answer.content_type
        )

    async def unreadable(self, request: Request, raw: bytes, exc: Exception) -> HTTPReply:
        """A body the proxy cannot read exactly (a number beyond a double, ``1e400``): forwarded as it
        came when nothing in it needs changing (no serialization, no batch of the proxy's, no model
        override), else a 400 saying why; a body that is not JSON at all, or nested too deep, is a 400."""
        if isinstance(exc, TooDeep):
            raise too_deep(exc)
        try:
            body = loads_lenient(raw)
        except ValueError:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                raise HTTPError(
                    400,
                    f"request body is not valid UTF-8 at byte {bad.start} ({bad.reason}: "
                    f"{raw[bad.start : bad.start + 4]!r}; counted in the body as decoded from any "
                    "Content-Encoding); JSON must be sent as UTF-8",
                    "invalid_json",
                ) from None
            raise HTTPError(400, f"request body is not valid JSON: {exc}", "invalid_json") from None
        messages = body.get("messages") if isinstance(body, dict) else None
        own = isinstance(messages, list) and any(
            isinstance(m, dict)
            and (
                parse(m.get("tool_call_id")) is not None
                or any(
                    isinstance(c, dict) and parse(c.get("id")) is not None for c in m.get("tool_calls") or ()
                )
            )
            for m in messages
        )
        if (
            isinstance(body, dict)
            and body.get("parallel_tool_calls") is not False
            and not own
            and not self.settings.model
        ):
            return await self.forward.pass_through(request, body, raw, None)
        raise HTTPError(
            400,
            f"request body holds a number a double cannot hold ({exc}); the proxy must write this request "
            "again (it is serialized, or holds calls the proxy handed out) and could not keep that number "
            "exactly",
            "invalid_json",
        )

    def answer_serial(self, body: dict[str, Any], answer: Answer, key: str, scope: str) -> Response:
        """A serial client's reply to an upstream answer: its first call when it opens a batch, else the
        upstream's answer as sent."""
        opened = self.open_batch(answer, key, scope)
        if opened is None:
            return self.forward.render(
                body, answer.response, answer.headers, raw=answer.raw, content_type=answer.content_type
            )
        return self.forward.render(body, opened, answer.headers)

    def queued_tail(self, messages: list[dict[str, Any]]) -> Split | None:
        """The fast path: `messages` end with a result for a batch the proxy holds, exactly as handed
        out, and the batch still has calls to hand out (so nothing goes upstream)."""
        last = messages[-1] if messages else None
        if last is None or last.get("role") != "tool":
            return None
        pid = parse(last.get("tool_call_id"))
        if pid is None or pid.position + 1 >= pid.n_calls:
            return None
        batch = self.store.get(pid.tag)
        if batch is None or batch.n_calls != pid.n_calls:
            return None
        return pairs_at_end(messages, pid.tag, batch.client_ids, pid.position)

    def completing_tail(self, messages: list[dict[str, Any]]) -> list[Split] | None:
        """The fast path for the request that completes a batch the proxy holds: `messages` end with the
        batch's pairs exactly as handed out (`pairs_at_end`) and hold no other id of the proxy's before
        them, so `scan` would find that batch alone: ``[its Split]`` without reading every message
        closely. None in every other case (then `scan` reads the list and names what is wrong)."""
        last = messages[-1] if messages else None
        if last is None or last.get("role") != "tool":
            return None
        pid = parse(last.get("tool_call_id"))
        if pid is None or pid.position + 1 != pid.n_calls:
            return None
        batch = self.store.get(pid.tag)
        if batch is None or batch.n_calls != pid.n_calls:
            return None
        given = pid.position + 1
        if not batch.rebuilt and _as_handed_out(messages, batch, given):
            tail = _verified_split(messages, batch, given)
        else:
            found = pairs_at_end(messages, pid.tag, batch.client_ids, pid.position)
            if found is None:
                return None
            tail = found
        if holds_proxy_ids(messages, tail.start):
            return None
        return [tail]

    # --- batches ---------------------------------------------------------------------------------

    def history_form(self, split: Split, messages: list[dict[str, Any]], scope: str) -> list[dict[str, Any]]:
        """The upstream's form of a batch followed by other messages; an open batch is closed here:
        finished when the client holds every result, else interrupted (see the module docstring)."""
        if split.answered < split.n_calls and split.end < len(messages):
            after = messages[split.end]
            if after.get("role") == "function":  # not an interruption: a result in the legacy form
                _, call = split.calls.get(split.answered, (0, {}))
                raise HTTPError(
                    400,
                    f"message {split.end} (role 'function', name {after.get('name')!r}) follows batch "
                    f"{split.tag}, which has {split.n_calls - split.answered} of its {split.n_calls} calls "
                    "without a result: the legacy 'function' role is not a result of a serialized call. "
                    + (
                        f"Answer call {call.get('id')!r} with a tool message (role 'tool', tool_call_id "
                        f"{call.get('id')!r})."
                        if call
                        else "Answer each call with a tool message (role 'tool', its tool_call_id)."
                    ),
                    "invalid_batch_messages",
                )
        batch = self.store.get(split.tag)
        if batch is not None:
            self.check_scope(batch.scope, scope, split, batch.name)
        if batch is None or batch.rebuilt:  # a rebuilt record only keeps a reply: read as forgotten
            tomb = self.store.tombstone(split.tag)
            if tomb is not None:
                self.check_scope(tomb.scope, scope, split, tomb.name)
            if tomb is None and batch is not None:
                tomb = batch.tombstone("expired", self.clock())
            if tomb is not None:
                self.check_handed(split, tomb.handed_out, tomb.n_calls, "when it forgot the batch")
            self.check_calls(split, None, tomb)
            if tomb is not None and tomb.n_calls == split.n_calls:
                self.check_results(split, tomb.result_digests, tomb.answered, tomb.name)
            form, left_out = merged(None, split, messages, tomb)
            if self.count_rebuilt(split.tag, left_out) and left_out:
                logger.warning(
                    "batch %s: the proxy no longer holds it and the client holds %d of its %d calls; the "
                    "upstream gets those %d (the %d never handed out are unknown now)",
                    split.tag,
                    split.handed,
                    split.n_calls,
                    split.handed,
                    left_out,
                )
            return form
        self.check_ids(batch, split)
        self.check_handed(split, batch.handed_out, batch.n_calls)
        self.check_calls(split, batch, None)
        self.check_results(split, batch.digests, batch.answered, batch.name)
        if batch.state == "open":
            batch.state = "finished" if split.answered >= batch.n_calls else "interrupted"
            self.stats["batches_finished" if batch.state == "finished" else "batches_interrupted"] += 1
            self.store.save(batch)
        else:
            self.store.touch(batch)
        return merged(batch, split, messages)[0]

    def forgotten(self, tag: str) -> bool:
        """Whether the proxy reads batch `tag` back from the client's messages (it holds no record of
        it, or only a rebuilt one)."""
        batch = self.store.get(tag)
        return batch is None or batch.rebuilt

    def count_rebuilt(self, tag: str, left_out: int) -> bool:
        """Count a batch rebuilt from the client's messages (and the calls it leaves out) once, however
        many later requests carry it; True the first time."""
        if tag in self._rebuilt:
            self._rebuilt.move_to_end(tag)
            return False
        self._rebuilt[tag] = None
        while len(self._rebuilt) > self.settings.max_batches:
            self._rebuilt.popitem(last=False)
        self.stats["batches_rebuilt_from_client"] += 1
        self.stats["calls_left_out"] += left_out
        return True

    def check_ids(self, batch: Batch, split: Split) -> None:
        """The client's copies of the batch's ids must be exactly the ones handed out."""
        if split.n_calls == batch.n_calls:
            ids = batch.client_ids
            if all(call.get("id") == ids[p] for p, (_, call) in split.calls.items()):
                return
        for position, (index, call) in split.calls.items():
            if split.n_calls != batch.n_calls or call.get("id") != batch.client_id(position):
                expected = batch.client_id(position) if position < batch.n_calls else "none"
                raise HTTPError(
                    400,
                    f"message {index}: call id {call.get('id')!r} is not the id the proxy handed out for "
                    f"position {position} of batch {batch.tag} (expected {expected!r}); send call ids "
                    "back exactly as received",
                    "invalid_batch_messages",
                )

    @staticmethod
    def check_scope(owner: str, scope: str, split: Split, name: Callable[[int], str]) -> None:
        """A batch is served only to the credentials that opened it (`scope_of`): another caller holding
        its ids gets a 403 naming the call, never its queue or its kept reply."""
        if owner == scope:
            return
        position = max(split.calls) if split.calls else 0
        index, call = split.calls.get(position, (-1, {}))
        try:
            what = name(position)
        except IndexError:
            what = "?"
        raise HTTPError(
            403,
            f"message {index}: call {call.get('id')!r} ({what}, position {position} of {split.n_calls}) "
            f"belongs to batch {split.tag}, which the proxy handed out to a client with other credentials "
            "(the credential headers, Authorization, api-key, x-api-key, x-goog-api-key, "
            "OpenAI-Organization and OpenAI-Project, differ from those of the request that opened it, or "
            "one of them sent none; a rotated key is other credentials). A batch's calls, queue and kept "
            "replies go only to the credentials that opened it: send this conversation with those "
            "credentials, or start a new one.",
            "batch_other_credentials",
        )

    @staticmethod
    def check_handed(split: Split, handed: int, n_calls: int, when: str = "so far") -> None:
        """The client cannot hold a call the proxy never handed out (a guessed id): a 409 naming it, before
        its copy is compared with anything (it has nothing to be compared with)."""
        if split.handed <= handed or split.n_calls != n_calls:
            return
        position = handed
        index, call = split.calls[position]
        raise HTTPError(
            409,
            f"message {index} holds call {call.get('id')!r} (position {position} of {n_calls}) of batch "
            f"{split.tag}, which the proxy never handed out: it hands out calls one at a time, in order, and "
            f"had handed out {handed} of {n_calls} {when}. Send only the calls you received, each with its "
            "result.",
            "out_of_order",
        )

    @staticmethod
    def check_results(
        split: Split, digests: Sequence[str], answered: int, name: Callable[[int], str]
    ) -> None:
        """A batch in a later turn's history holds every result the proxy received, each unchanged: an
        edited one is a 409 ``result_conflict``, a left-out one (the last pairs dropped, or a call kept
        without its result) a 400 naming the call, as a dropped pair in the middle is (`scan`). A batch
        is sent whole, as handed out and answered, or not at all: never repaired."""
        n_calls = split.n_calls
        for p in range(min(split.answered, len(digests))):
            index, message = split.results[p]
            if result_digest(message.get("content")) != digests[p]:
                what = f"{proxy_id(split.tag, p, n_calls)!r} ({name(p)}, position {p} of {n_calls})"
                raise _conflict(what, index)
        if split.answered >= answered:
            return
        p = split.answered
        left = "its result" if p in split.calls else "its call and its result"
        last = max(i for i, _ in [*split.calls.values(), *split.results.values()])
        raise HTTPError(
            400,
            f"call {proxy_id(split.tag, p, n_calls)!r} ({name(p)}, position {p} of {n_calls}) of batch "
            f"{split.tag} was handed out and answered, but this conversation leaves out {left} (the "
            f"batch's messages end at message {last} with {split.answered} of the {answered} results the "
            "proxy received); the proxy will not fill it in. Send a batch's messages whole, every call "
            "handed out with its result, or leave the whole batch out.",
            "invalid_batch_messages",
        )

    @staticmethod
    def check_calls(split: Split, batch: Batch | None, tomb: Tombstone | None) -> None:
        """The client's copies of the calls must be the calls handed out (a 400 names an edited one)."""
        try:
            check_unedited(split, batch, tomb)
        except MalformedBatch as exc:
            raise HTTPError(400, str(exc), "invalid_batch_messages") from None

    async def continue_batch(
        self,
        request: Request,
        body: dict[str, Any],
        messages: list[dict[str, Any]],
        history: list[Split],
        forms: dict[str, list[dict[str, Any]]],
        tail: Split,
        scope: str,
    ) -> HTTPReply:
        """A request ending with the next result of a batch (or a retry of an earlier one)."""
        name = "batch:" + tail.tag
        if tail.answered < tail.n_calls and name not in self._locks:
            # served from the queue without awaiting anything: nothing can interleave, no lock needed
            return await self._continue(request, body, messages, history, forms, tail, scope)
        async with self._locks.hold(name):
            return await self._continue(request, body, messages, history, forms, tail, scope)

    async def _continue(
        self,
        request: Request,
        body: dict[str, Any],
        messages: list[dict[str, Any]],
        history: list[Split],
        forms: dict[str, list[dict[str, Any]]],
        tail: Split,
        scope: str,
    ) -> HTTPReply:
        batch, reply = self.settle(body, tail, scope)
        if reply is not None:
            return reply
        if batch is None:
            held = self.store.get(tail.tag)
            return await self.rebuild_or_gone(request, body, messages, history, forms, tail, scope, held)
        forms = {**forms, tail.tag: merged(batch, tail, messages)[0]}
        fields = request_fields(body)  # read before the upstream call: what fails after it is the answer's
        answer = await self.forward.call_upstream(request, body, translate(messages, [*history, tail], forms))
        if batch.state == "open":
            self.stats["batches_finished"] += 1
        return self.finish(batch, body, answer, scope, fields)

    def settle(self, body: dict[str, Any], tail: Split, scope: str) -> tuple[Batch | None, Response | None]:
        """What a continuation of a batch the proxy holds gets without the upstream (nothing awaited):
        (batch, reply) when it is answered from the queue or the kept reply; (batch, None) when the
        request completes the batch and goes upstream (its last result recorded); (None, None) when the
        proxy does not hold the batch (`rebuild_or_gone`, nothing recorded). Refusals raise `HTTPError`."""
        batch = self.store.get(tail.tag)
        if batch is not None:
            self.check_scope(batch.scope, scope, tail, batch.name)
        if batch is None or (batch.rebuilt and tail.answered < batch.n_calls):
            return None, None
        n_calls, given = batch.n_calls, tail.answered
        digests = batch.digests
        if not tail.verified:  # else `_as_handed_out` found the ids, calls and known results as handed out
            self.check_ids(batch, tail)
            self.check_calls(tail, batch, None)
        for p in range(0 if tail.verified else min(given, batch.answered)):
            index, message = tail.results[p]
            if result_digest(message.get("content")) != digests[p]:
                raise _conflict(batch.describe(p), index)
        if batch.state == "interrupted":
            raise HTTPError(
                409,
                f"batch {batch.tag} (first call {batch.describe(0)}) was closed as interrupted: a request "
                "of this conversation moved on (a new message after its calls) before all its results "
                "came in, and the upstream was told which calls were not executed. Continue from that "
                "new message instead.",
                "batch_interrupted",
            )
        if given > batch.handed_out:
            early = batch.handed_out
            raise HTTPError(
                409,
                f"result for call {batch.describe(early)} (message {tail.results[early][0]}) arrived "
                f"before the proxy handed that call out: it hands out calls one at a time, in order, and "
                f"has handed out {batch.handed_out} of {n_calls}",
                "out_of_order",
            )
        if given == batch.answered + 1:
            digests.append(result_digest(tail.results[given - 1][1].get("content")))
            self.store.save(batch)
        else:  # a retry of an earlier request of this batch: the same reply again
            self.store.touch(batch)
        if given < n_calls:
            self.stats["served_from_queue"] += 1
            if body.get("stream") is True:
                reply = hand_out_reply(batch.template, batch.choice, batch.hand_out(given), given)
                return batch, self.forward.render(body, reply)
            return batch, Response(200, batch.rendered(given), {"Content-Type": "application/json"})
        if batch.completed:  # a retry of the request that completed the batch
            return batch, self.replay_final(batch, body, tail)
        return batch, None

    def from_queue(self, body: dict[str, Any], messages: list[dict[str, Any]], scope: str) -> Response | None:
        """The next call of an open batch for a request that is exactly what the proxy expects: it ends
        with the batch's pairs as handed out (each call's id, type and function as sent, each result under
        its id), nothing of the batch before them, earlier results unchanged, the caller's credentials.
        Checked with a few C-level passes over those messages; None (nothing recorded) for anything else,
        which `settle` then reads closely and names what is wrong (a re-serialised argument string, a
        conflict, a retry after the batch finished, ...)."""
        last = messages[-1]
        if last.get("role") != "tool":
            return None
        pid = parse(last.get("tool_call_id"))
        if pid is None:
            return None
        given, tag = pid.position + 1, pid.tag
        batch = self.store.get(tag)
        if (
            batch is None
            or given >= pid.n_calls
            or batch.state != "open"
            or batch.scope != scope
            or batch.rebuilt
            or given > len(batch.digests) + 1
            or "batch:" + tag in self._locks
        ):
            return None
        if len(batch.calls) != pid.n_calls or not _as_handed_out(messages, batch, given):
            return None
        digests = batch.digests
        if given > len(digests):
            digests.append(result_digest(messages[-1].get("content")))
            self.store.save(batch)
        else:
            self.store.touch(batch)
        stats = self.stats
        stats["requests"] += 1
        stats["served_from_queue"] += 1
        if body.get("stream") is True:
            return self.forward.render(
                body, hand_out_reply(batch.template, batch.choice, batch.hand_out(given), given)
            )
        return Response(200, batch.rendered(given), {"Content-Type": "application/json"})

    def fast(self, request: Request) -> Response | None:
        """The HTTP server's synchronous path: a continuation answered from a batch's queue, with no task
        and nothing awaited (the most common request of a serial client). None for any other request
        (the server then runs `dispatch` in a task of its own); the body parsed here is not parsed
        again (`Request.parsed`)."""
        if request.method != "POST" or request.path not in _CHAT_PATHS:
            return None
        headers = request.headers
        if IDEMPOTENCY_HEADER in headers:
            return None
        try:
            body = loads(request.body)
        except JSONError:
            return None
        if type(body) is not dict:
            return None
        messages = body.get("messages")
        if type(messages) is not list or not all(map(isinstance, messages, repeat(dict))) or not messages:
            return None
        memo = request.memo
        scope = memo.get("scope")
        if scope is None:
            scope = memo["scope"] = scope_of(headers)
        try:
            reply = self.from_queue(body, messages, scope)
            if reply is not None:
                return reply
            tail = self.queued_tail(messages)
            request.parsed = (body, tail)  # the task's path need not look again
            if tail is None or "batch:" + tail.tag in self._locks:
                return None
            reply = self.settle(body, tail, scope)[1]
            if reply is None:  # a rebuilt record: nothing was recorded, the task's path says what to do
                return None
        except HTTPError as exc:
            reply = self.refused(exc)
        except TooDeep as exc:
            reply = too_deep(exc).response()
        except Exception as exc:
            reply = self.fault(request, exc)
        self.stats["requests"] += 1
        self.count_reply(reply.status)
        return reply

    def replay_final(self, batch: Batch, body: dict[str, Any], tail: Split) -> Response:
        """The kept reply to the request that completed `batch`, for a retry of that request: matched by
        the batch's ids, calls and results (checked before), and by every request field that can change
        the answer (`request_fields`); one that differs is a 409 naming it."""
        differ = differing_fields(batch.final_fields, body) if batch.final_fields else []
        if differ:
            raise HTTPError(
                409,
                f"this request completes batch {batch.tag} (first call {batch.describe(0)}), which a request "
                f"with other {', '.join(repr(f) for f in differ)} already completed; its reply is kept for "
                "retries of that request only, and the proxy will not send the batch upstream a second time. "
                "Retry with the same fields, or continue the conversation from that reply.",
                "retry_differs",
            )
        if batch.final is None:  # answered, but the reply was too large to keep
            raise HTTPError(
                409,
                self.not_kept_message(batch.tag, "its reply was too large to keep (--max-bytes)", tail),
                "batch_reply_not_kept",
            )
        self.stats["retries_replayed"] += 1
        raw = batch.final_raw.encode("utf-8", "surrogatepass") if batch.final_raw is not None else None
        return self.forward.render(body, batch.final or {}, batch.final_headers, raw=raw)

    def finish(
        self, batch: Batch, body: dict[str, Any], answer: Answer, scope: str, fields: dict[str, str]
    ) -> Response:
        """Keep the upstream's answer to the request that completed `batch` (its retries get it again)
        and reply with it: the first call of a new batch when it opens one, else as sent. `fields`: the
        request's `request_fields`."""
        with upstream_json():
            opened = self.open_batch(answer, "", scope) if body.get("parallel_tool_calls") is False else None
            batch.final, batch.state = opened or answer.response, "finished"
            batch.final_headers = answer.headers
            batch.final_raw = None if opened is not None else answer.raw.decode("utf-8", "surrogatepass")
            batch.final_fields = fields
            try:
                self.store.save(batch)
            except TooLarge:  # a rebuilt record larger than the whole bound: kept as a tombstone alone,
                self.store.counts["finals_dropped"] += 1  # so its retries are told, never sent again
                batch.final_dropped = True
                self.store.keep_tombstone(batch.tombstone("too_large", self.clock()))
            if opened is not None:
                return self.forward.render(body, opened, answer.headers)
            return self.forward.render(
                body, answer.response, answer.headers, raw=answer.raw, content_type=answer.content_type
            )

    async def rebuild_or_gone(
        self,
        request: Request,
        body: dict[str, Any],
        messages: list[dict[str, Any]],
        history: list[Split],
        forms: dict[str, list[dict[str, Any]]],
        tail: Split,
        scope: str,
        rebuilt: Batch | None = None,
    ) -> HTTPReply:
        """A continuation of a batch the proxy does not hold (or holds only as the `rebuilt` record of its
        completing reply): forwarded when the client's messages hold the whole batch (every call and
        result) and no request completed it yet, else a 409 / 410 saying what happened (never a partial
        batch, never a completed batch a second time)."""
        tomb = self.store.tombstone(tail.tag)
        if rebuilt is not None and rebuilt.completed and (tomb is None or not tomb.completed):
            tomb = rebuilt.tombstone(tomb.reason if tomb is not None else "expired", self.clock())
        if tomb is not None:
            self.check_scope(tomb.scope, scope, tail, tomb.name)
        if tomb is not None and tomb.state == "interrupted":
            raise HTTPError(
                409,
                f"batch {tail.tag} was closed as interrupted (a request of this conversation moved on "
                "before all its results came in); continue from that new message instead",
                "batch_interrupted",
            )
        if tomb is not None:
            self.check_handed(tail, tomb.handed_out, tomb.n_calls, "when it forgot the batch")
        if tomb is not None and tomb.completed and tail.answered == tail.n_calls:
            why = {
                "expired": f"its reply expired after {self.settings.ttl_s:g} s without use (--ttl)",
                "evicted": "its reply was evicted to stay within the bounds (--max-batches, --max-bytes)",
                "too_large": "its reply was too large to keep (--max-bytes)",
            }[tomb.reason]
            raise HTTPError(409, self.not_kept_message(tail.tag, why, tail), "batch_reply_not_kept")
        if tail.answered < tail.n_calls:
            raise HTTPError(410, self.gone_message(tail, tomb), f"batch_{tomb.reason if tomb else 'unknown'}")
        self.check_calls(tail, None, tomb)
        if tomb is not None and tomb.n_calls == tail.n_calls:
            self.check_results(tail, tomb.result_digests, tomb.answered, tomb.name)
        form, _ = merged(None, tail, messages, tomb)
        self.count_rebuilt(tail.tag, 0)
        fields = request_fields(body)
        answer = await self.forward.call_upstream(
            request, body, translate(messages, [*history, tail], {**forms, tail.tag: form})
        )
        if not any(self.forgotten(split.tag) for split in history):  # else counted already
            self.stats["requests_with_rebuilt_batches"] += 1
        now = self.clock()
        record = Batch(  # kept like a held batch's reply: a retry of this request gets the same answer
            tag=tail.tag,
            message=form[0],
            template={},
            digests=[result_digest(tail.results[p][1].get("content")) for p in range(tail.n_calls)],
            state="finished",
            rebuilt=True,
            scope=scope,
            created_at=now,
            touched_at=now,
        )
        return self.finish(record, body, answer, scope, fields)

    @staticmethod
    def not_kept_message(tag: str, why: str, tail: Split) -> str:
        """Why a retry of a completing request whose reply is no longer kept is refused, and what to do."""
        return (
            f"this request completes batch {tag}, which an earlier request already completed: the upstream "
            f"answered it, but {why}, and the proxy will not send the batch upstream a second time (another "
            "answer, another bill). If you received that reply, continue the conversation from it; if not, "
            f"resend the conversation without this batch's calls and results ({_cut_at(tail)}) so the model "
            "is asked again."
        )

    def gone_message(self, tail: Split, tomb: Tombstone | None) -> str:
        if tomb is None:
            dropped = self.store.tombstones_dropped
            pressure = (
                f"; this proxy has also dropped {dropped} tombstones of evicted batches to stay within its "
                "bounds (--max-bytes, --max-batches), so it may have evicted this batch under memory "
                "pressure, its tombstone last"
                if dropped
                else ""
            )
            why = (
                "is not known to this proxy: it was restarted without --state, forgot the batch long ago, "
                f"or another proxy (not sharing its state) handed it out{pressure}"
            )
        elif tomb.reason == "expired":
            why = f"expired after {self.settings.ttl_s:g} s without use"
        else:
            why = "was evicted to stay within the proxy's bounds (--max-batches, --max-bytes)"
        given, n_calls = tail.answered, tail.n_calls

        def named(p: int) -> str:
            known = tomb is not None and p < len(tomb.names)
            return f"position {p}" + (f" ({tomb.names[p]})" if tomb is not None and known else "")

        if tomb is not None and tomb.completed:
            what = (
                f"All {n_calls} calls were handed out and the batch was completed (its results went "
                "upstream); this request repeats an earlier step of it, whose reply cannot be made again. "
                "Continue from the reply to the request that completed the batch, or"
            )
        else:
            handed = max(tomb.handed_out if tomb is not None else 0, tail.handed)
            never = [named(p) for p in range(max(given, handed), n_calls)]
            unanswered = [named(p) for p in range(given, min(handed, n_calls))]
            parts = []
            if unanswered:
                parts.append(f"handed out but without a result in this request: {', '.join(unanswered)}")
            if never:
                parts.append(f"never handed out to the client: {', '.join(never)}")
            what = f"Calls {'; '.join(parts)}. To continue,"
        return (
            f"this request answers {given} of the {n_calls} tool calls of batch {tail.tag}, which {why}. "
            "The proxy no longer holds the model's full answer, so it will not forward a partial batch. "
            f"{what} resend the conversation without this batch's calls and results ({_cut_at(tail)}) so "
            "the model is asked again."
        )

    def open_batch(self, answer: Answer, key: str, scope: str) -> dict[str, Any] | None:
        """Open a batch when a serial client got N > 1 calls the proxy can split; returns the first
        hand-out, or None when the answer goes to the client as sent (one call or none, several
        choices, or calls that are not well-formed function calls)."""
        batch = self.new_batch(answer, key, scope)
        return None if batch is None else hand_out_reply(batch.template, batch.choice, batch.hand_out(0), 0)

    def new_batch(self, answer: Answer, key: str, scope: str) -> Batch | None:
        """The batch `open_batch` opens (kept in the store), or None."""
        response = answer.response
        choices = response.get("choices")
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            return None
        message = choices[0].get("message")
        if not isinstance(message, dict) or not isinstance(message.get("tool_calls"), list):
            return None
        calls = message["tool_calls"]
        if len(calls) < 2:
            return None
        for call in calls:  # `splittable`, inline: this runs for every answer with calls
            fn = call.get("function") if type(call) is dict else None
            if (
                type(fn) is not dict
                or call.get("type", "function") != "function"
                or type(fn.get("name")) is not str
                or type(fn.get("arguments")) is not str
            ):
                self.stats["not_split"] += 1
                return None
        if len(calls) > MAX_CALLS:
            raise HTTPError(
                507,
                f"the model answered with {len(calls)} tool calls; the proxy hands out at most {MAX_CALLS} "
                "calls of one answer one at a time. Nothing was kept and no call was handed out.",
                "batch_too_large",
            )
        tag = new_tag()
        while self.store.in_use(tag):  # pragma: no cover - 48 random bits
            tag = new_tag()
        now = self.clock()
        template, choice = split_response(response)
        batch = Batch(
            tag=tag,
            message=message,  # parsed from the upstream's bytes for this request alone; never mutated
            template=template,
            choice=choice,
            headers=answer.headers,
            session_key=key,
            scope=scope,
            created_at=now,
            touched_at=now,
            _size=400 + len(answer.raw) + sum(len(k) + len(v) + 6 for k, v in answer.headers.items()),
        )  # its size: the upstream's bytes it was read from (message, template and choice are those)
        try:
            self.store.save(batch)
        except TooLarge as exc:
            raise HTTPError(
                507,
                f"the model answered with {len(calls)} tool calls whose record takes {exc.size} bytes, more "
                f"than the proxy may hold in all ({exc.limit} bytes, --max-bytes / ProxySettings.max_bytes); "
                "nothing was kept and no call was handed out. Raise the bound and send the request again.",
                "batch_too_large",
            ) from None
        self.stats["batches_opened"] += 1
        return batch


def _as_handed_out(messages: list[dict[str, Any]], batch: Batch, given: int) -> bool:
    """Whether `messages` end with the first `given` pairs of `batch` exactly as the proxy expects them
    (roles, each result under its call's id, each call's id, type and function as handed out, nothing of
    the batch before them) and the results the proxy has keep their content: a few C-level passes. False
    says nothing is wrong, only that `pairs_at_end` and `settle` must read the messages closely."""
    start = len(messages) - 2 * given
    if start < 0:
        return False
    pairs = messages[start:]
    ids = batch.client_ids
    answers = pairs[1::2]
    if (
        list(map(dict.get, pairs, repeat("role"))) != ["assistant", "tool"] * given
        or list(map(dict.get, answers, repeat("tool_call_id"))) != ids[:given]
    ):
        return False
    calls = batch.calls
    for j, held in enumerate(map(dict.get, pairs[::2], repeat("tool_calls"))):
        if type(held) is not list or len(held) != 1:
            return False
        call, mine = held[0], calls[j]
        if (
            type(call) is not dict
            or call.get("id") != ids[j]
            or call.get("function") != mine["function"]
            or call.get("type", "function") != mine.get("type", "function")
        ):
            return False
    if start and _mentions(messages[start - 1], batch.tag):
        return False
    digests = batch.digests
    return all(
        result_digest(answers[j].get("content")) == digests[j] for j in range(min(given, len(digests)))
    )


def _conflict(call: str, index: int) -> HTTPError:
    """The 409 for a result that differs from the one the proxy received for `call` (described)."""
    return HTTPError(
        409,
        f"conflict: tool call {call} was already answered with different content (message {index} "
        "differs); a result cannot be changed once given. Resend the conversation with the original "
        "result, or start a new turn.",
        "result_conflict",
    )


def _verified_split(messages: list[dict[str, Any]], batch: Batch, given: int) -> Split:
    """The `Split` of the pairs `_as_handed_out` accepted (marked verified: `settle` need not check them
    again)."""
    start = len(messages) - 2 * given
    split = Split(batch.tag, batch.n_calls, start=start, end=len(messages))
    for j in range(given):
        i = start + 2 * j
        split.calls[j] = (i, messages[i]["tool_calls"][0])
        split.results[j] = (i + 1, messages[i + 1])
    split.verified = True
    return split


def _mentions(message: dict[str, Any], tag: str) -> bool:
    """Whether `message` holds an id (a call's, or a result's) of batch `tag`, as far as a quick look can
    tell (an id that only contains the tag counts too: then the closer reading decides)."""
    cid = message.get("tool_call_id")
    if type(cid) is str and tag in cid:
        return True
    calls = message.get("tool_calls")
    if type(calls) is list:
        for call in calls:
            cid = call.get("id") if type(call) is dict else None
            if type(cid) is str and tag in cid:
                return True
    return False


def _parsed(raw: bytes) -> dict[str, Any]:
    """A request body as an object, for naming its fields ({} when it is not a JSON object)."""
    try:
        value = loads(raw)
    except JSONError:
        return {}
    return value if isinstance(value, dict) else {}


def _cut_at(tail: Split) -> str:
    """Where a client cuts its conversation to ask the model again without batch `tail`."""
    first_index, first_call = tail.calls[0]
    if first_index > 0:
        return (
            f"end it at message {first_index - 1}, the one before message {first_index} that holds "
            f"{first_call.get('id')!r}"
        )
    return "start the conversation again"


def too_deep(exc: TooDeep) -> HTTPError:
    """The 400 for a request whose JSON nests deeper than the proxy can read or write."""
    return HTTPError(
        400,
        f"request body holds {exc}; the proxy reads every request to route it, so it cannot take this "
        "one. Nest the data less deeply (or send it as a string).",
        "json_too_deep",
    )


class _UpstreamJSON:
    """While the proxy writes an upstream answer again (hands out its calls, keeps it): JSON it cannot
    write is the upstream's (a 502 `upstream_bad_response`), not the request's. A plain context manager
    (a generator-based one costs more per use)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, TooDeep):
            raise HTTPError(
                502, f"upstream answered with {exc}; the proxy cannot hand it out", "upstream_bad_response"
            ) from None


_UPSTREAM_JSON = _UpstreamJSON()


def upstream_json() -> _UpstreamJSON:
    """`_UpstreamJSON` (one object serves every use)."""
    return _UPSTREAM_JSON


def splittable(call: Any) -> bool:
    """Whether the proxy can hand a call out on its own: a function call (``type`` function or absent)
    with a ``function`` object holding a string name and string arguments."""
    if not isinstance(call, dict) or call.get("type", "function") != "function":
        return False
    fn = call.get("function")
    return isinstance(fn, dict) and isinstance(fn.get("name"), str) and isinstance(fn.get("arguments"), str)


def _fields(settings: ProxySettings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in ProxySettings.__dataclass_fields__}

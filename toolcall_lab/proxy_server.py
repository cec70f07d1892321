"""An OpenAI-compatible HTTP proxy that serializes tool calls for ``parallel_tool_calls: false`` clients.

When such a client's request gets N > 1 calls from the upstream, the client receives only the first;
each tool result it sends back is recorded and answered with the next call, without calling
upstream; once all N are answered the complete message list (the original assistant message with
all N calls, then the N results in order) goes upstream in one request. Requests without
``parallel_tool_calls: false`` pass through.

Conversations are recognised by a hash chain over their messages (the longest known prefix wins),
namespaced by the optional ``x-session-id`` header; conversations with identical messages must send
that header to stay apart. Retrying a request returns the same answer; state expires after a TTL and
the store is bounded (least recently used conversations go first). The upstream is always called
without streaming (the proxy must see the whole batch); streamed replies to the client are
synthesised from the complete response.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from toolcall_lab.exceptions import ProxyProtocolError, ToolcallLabError
from toolcall_lab.formats.openai_chat import parse_chat_completion
from toolcall_lab.models import response_chunks
from toolcall_lab.proxy import SerializedSession
from toolcall_lab.trace import Trace

SESSION_HEADER = "x-session-id"


class UpstreamError(ToolcallLabError):
    """The upstream model failed; carries the HTTP status to report (502 by default)."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


class Upstream(Protocol):
    """Where the proxy sends complete conversations: returns a whole ``chat.completion`` body."""

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]: ...


class TraceUpstream:
    """A recorded trace as the upstream: request k (k = assistant messages sent so far) gets the
    recorded response of round k. Stateless, so many conversations can replay the same trace."""

    def __init__(self, trace: Trace, *, delay_scale: float = 0.0) -> None:
        from toolcall_lab.importers import chat_body

        self.trace = trace
        self.delay_scale = delay_scale
        self.requests: list[dict[str, Any]] = []
        self._offset = sum(1 for m in trace.initial_messages if m.get("role") == "assistant")
        self._bodies = []
        for r in trace.rounds:
            chunks = [c.payload for c in r.model_call.chunks]
            if len(chunks) == 1 and chunks[0].get("object") == "chat.completion":
                self._bodies.append(chunks[0])
            else:
                from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator

                acc = ChatCompletionAccumulator(batch=r.round_index)
                for c in chunks:
                    acc.feed(c)
                self._bodies.append(chat_body(acc.finish()))
        self._latency = [r.model_call.latency_s for r in trace.rounds]

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        k = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant") - self._offset
        if not 0 <= k < len(self._bodies):
            raise UpstreamError(
                f"the recorded trace has no response for a conversation with {k} assistant "
                f"turn(s) (it has {len(self._bodies)} rounds)"
            )
        if self.delay_scale:
            await asyncio.sleep(self._latency[k] * self.delay_scale)
        copied: dict[str, Any] = json.loads(json.dumps(self._bodies[k]))  # callers may mutate it
        return copied


class OpenAIUpstream:
    """A real OpenAI-compatible endpoint through the ``openai`` client (called without streaming)."""

    def __init__(self, client: Any, *, model: str | None = None) -> None:
        self.client = client
        self.model = model

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        import openai

        kwargs = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        if self.model:
            kwargs["model"] = self.model
        try:
            response = await self.client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            raise UpstreamError(f"upstream returned {exc.status_code}: {exc.message}", 502) from exc
        except openai.APIError as exc:
            raise UpstreamError(f"upstream failed: {exc}", 502) from exc
        return response.to_dict(mode="json")  # type: ignore[no-any-return]


def _normal(message: dict[str, Any]) -> Any:
    calls = [
        (c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
        for c in message.get("tool_calls") or []
    ]
    return [message.get("role"), message.get("content") or None, calls, message.get("tool_call_id")]


def prefix_keys(messages: Sequence[dict[str, Any]], namespace: str = "") -> list[str]:
    """One key per prefix length (1..n): a hash chain over the normalised messages."""
    h = hashlib.sha256(namespace.encode()).digest()
    out = []
    for m in messages:
        h = hashlib.sha256(h + json.dumps(_normal(m), sort_keys=True, ensure_ascii=False).encode()).digest()
        out.append(h.hex())
    return out


@dataclass(slots=True)
class Conversation:
    """What the proxy knows about one conversation prefix (as the client sees it)."""

    client_len: int
    upstream_messages: list[dict[str, Any]]
    """The same conversation as the upstream saw it (batches merged)."""
    session: SerializedSession | None = None
    template: dict[str, Any] | None = None
    final: dict[str, Any] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    touched: float = field(default_factory=time.monotonic)


class ConversationStore:
    """Conversations by prefix key: expires after `ttl_s` unused, keeps at most `max_entries` (LRU)."""

    def __init__(self, *, ttl_s: float = 600.0, max_entries: int = 10_000) -> None:
        self.ttl_s, self.max_entries = ttl_s, max_entries
        self._items: OrderedDict[str, Conversation] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> Conversation | None:
        item = self._items.get(key)
        if item is None:
            return None
        if time.monotonic() - item.touched > self.ttl_s:
            del self._items[key]
            return None
        item.touched = time.monotonic()
        self._items.move_to_end(key)
        return item

    def put(self, key: str, item: Conversation) -> None:
        self._items[key] = item
        self._items.move_to_end(key)
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)

    def longest_prefix(self, keys: Sequence[str]) -> tuple[str, Conversation] | None:
        for key in reversed(keys):
            item = self.get(key)
            if item is not None:
                return key, item
        return None


class HTTPError(Exception):
    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def error_response(status: int, message: str, code: str) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "upstream_error"
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": None, "code": code}}, status=status
    )


class ProxyServer:
    """The serialized proxy as an aiohttp application (see the module docstring)."""

    def __init__(
        self,
        upstream: Upstream,
        *,
        ttl_s: float = 600.0,
        max_conversations: int = 10_000,
        upstream_timeout_s: float = 120.0,
    ) -> None:
        self.upstream = upstream
        self.store = ConversationStore(ttl_s=ttl_s, max_entries=max_conversations)
        self.upstream_timeout_s = upstream_timeout_s
        self.stats = {"requests": 0, "upstream_calls": 0, "served_from_queue": 0, "errors": 0}
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.handle)
        self.app.router.add_post("/chat/completions", self.handle)
        self.app.router.add_get("/health", self.health)
        self._runner: web.AppRunner | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on host:port (port 0 picks a free one); returns the base URL ending in /v1."""
        self._runner, url = await serve(self.app, host, port)
        return url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "conversations": len(self.store), **self.stats})

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.stats["requests"] += 1
        try:
            try:
                body = await request.json()
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise HTTPError(400, f"request body is not valid JSON: {exc}", "invalid_json") from None
            messages = body.get("messages") if isinstance(body, dict) else None
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
                raise HTTPError(400, "'messages' must be a list of message objects", "invalid_messages")
            response = await self.respond(body, messages, request.headers.get(SESSION_HEADER, ""))
        except HTTPError as exc:
            self.stats["errors"] += 1
            return error_response(exc.status, str(exc), exc.code)
        if body.get("stream"):
            return await self.stream_reply(request, response)
        return web.json_response(response)

    async def respond(
        self, body: dict[str, Any], messages: list[dict[str, Any]], namespace: str
    ) -> dict[str, Any]:
        serial = body.get("parallel_tool_calls") is False
        keys = prefix_keys(messages, namespace)
        found = self.store.longest_prefix(keys)
        if found is None:
            return await self.forward(body, messages, messages, namespace, serial, translated=False)
        _, conv = found
        async with conv.lock:
            tail = messages[conv.client_len :]
            if conv.session is not None:
                return await self.continue_session(conv, body, messages, tail, namespace, serial)
            return await self.forward(
                body, messages, conv.upstream_messages + tail, namespace, serial, translated=True
            )

    async def call_upstream(
        self, body: dict[str, Any], upstream_messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        self.stats["upstream_calls"] += 1
        try:
            return await asyncio.wait_for(
                self.upstream.complete({**body, "messages": upstream_messages}), self.upstream_timeout_s
            )
        except TimeoutError:
            raise HTTPError(
                504, f"upstream did not answer within {self.upstream_timeout_s} s", "upstream_timeout"
            ) from None
        except UpstreamError as exc:
            raise HTTPError(exc.status, str(exc), "upstream_error") from None

    async def forward(
        self,
        body: dict[str, Any],
        client_messages: list[dict[str, Any]],
        upstream_messages: list[dict[str, Any]],
        namespace: str,
        serial: bool,
        *,
        translated: bool,
    ) -> dict[str, Any]:
        response = await self.call_upstream(body, upstream_messages)
        return self.after_upstream(
            response, client_messages, upstream_messages, namespace, serial, translated
        )

    def after_upstream(
        self,
        response: dict[str, Any],
        client_messages: list[dict[str, Any]],
        upstream_messages: list[dict[str, Any]],
        namespace: str,
        serial: bool,
        translated: bool,
    ) -> dict[str, Any]:
        parsed = parse_chat_completion(response)
        assistant = parsed.first.to_message()
        calls = parsed.tool_calls
        if serial and len(calls) > 1:
            conv = Conversation(
                client_len=len(client_messages),
                upstream_messages=list(upstream_messages),
                session=SerializedSession(assistant, calls),
                template=response,
            )
            self.store.put(prefix_keys(client_messages, namespace)[-1], conv)
            return self.queued_reply(conv)
        if translated:
            client_view = [*client_messages, assistant]
            self.store.put(
                prefix_keys(client_view, namespace)[-1],
                Conversation(client_len=len(client_view), upstream_messages=[*upstream_messages, assistant]),
            )
        return response

    def queued_reply(self, conv: Conversation) -> dict[str, Any]:
        session, template = conv.session, conv.template or {}
        assert session is not None
        session.next_call()
        position = session.answered
        return {
            "id": f"{template.get('id', 'chatcmpl-proxy')}-{position}",
            "object": "chat.completion",
            "created": template.get("created", int(time.time())),
            "model": template.get("model"),
            "choices": [{"index": 0, "message": session.client_message(), "finish_reason": "tool_calls"}],
            "usage": template.get("usage") if position == 0 else None,
        }

    async def continue_session(
        self,
        conv: Conversation,
        body: dict[str, Any],
        messages: list[dict[str, Any]],
        tail: list[dict[str, Any]],
        namespace: str,
        serial: bool,
    ) -> dict[str, Any]:
        session = conv.session
        assert session is not None
        pairs = self.read_pairs(tail)
        answered = session.answered
        for i, (call_id, _) in enumerate(pairs[:answered]):
            if call_id != session.calls[i].tool_call_id:
                raise HTTPError(
                    409,
                    f"message {conv.client_len + 2 * i} answers {call_id!r} but this conversation "
                    f"recorded {session.calls[i].tool_call_id!r} there",
                    "conflict",
                )
        if len(pairs) < answered:
            missing = session.calls[len(pairs)].tool_call_id
            raise HTTPError(
                409,
                f"tool_call_id {missing!r} was already answered; this request is older than the conversation",
                "already_answered",
            )
        if len(pairs) == answered:  # a retry of a request already served
            self.stats["served_from_queue"] += 1
            if session.done:
                return await self.finish_batch(conv, body, messages, namespace, serial)
            return self.queued_reply(conv)
        if len(pairs) > answered + 1:
            early = pairs[answered + 1][0]
            raise HTTPError(
                409,
                f"result for {early!r} arrived out of order: the client was given "
                f"{session.current.tool_call_id if session.current else None!r} and must answer it "
                "first",
                "out_of_order",
            )
        call_id, content = pairs[answered]
        try:
            session.submit(call_id, content)
        except ProxyProtocolError as exc:
            known = {c.tool_call_id for c in session.calls}
            raise HTTPError(400 if call_id not in known else 409, str(exc), "tool_call_mismatch") from None
        if not session.done:
            self.stats["served_from_queue"] += 1
            return self.queued_reply(conv)
        return await self.finish_batch(conv, body, messages, namespace, serial)

    async def finish_batch(
        self,
        conv: Conversation,
        body: dict[str, Any],
        messages: list[dict[str, Any]],
        namespace: str,
        serial: bool,
    ) -> dict[str, Any]:
        if conv.final is not None:
            return conv.final
        assert conv.session is not None
        upstream_messages = conv.session.rebuild(conv.upstream_messages)
        response = await self.call_upstream(body, upstream_messages)
        conv.final = self.after_upstream(
            response, messages, upstream_messages, namespace, serial, translated=True
        )
        return conv.final

    @staticmethod
    def read_pairs(tail: list[dict[str, Any]]) -> list[tuple[str, str]]:
        """The client's (assistant with one call, tool result) pairs after the queued prefix."""
        if len(tail) % 2:
            raise HTTPError(
                400,
                "expected pairs of (assistant message with the one call handed out, its tool "
                "result) after the conversation so far",
                "invalid_messages",
            )
        pairs = []
        for i in range(0, len(tail), 2):
            asst, tool = tail[i], tail[i + 1]
            calls = asst.get("tool_calls") or []
            if asst.get("role") != "assistant" or len(calls) != 1 or tool.get("role") != "tool":
                raise HTTPError(
                    400,
                    f"message pair {i // 2}: expected an assistant message with exactly one tool "
                    "call followed by its tool message",
                    "invalid_messages",
                )
            if tool.get("tool_call_id") != calls[0].get("id"):
                raise HTTPError(
                    400,
                    f"tool message answers {tool.get('tool_call_id')!r} but the assistant message "
                    f"before it called {calls[0].get('id')!r}",
                    "tool_call_mismatch",
                )
            content = tool.get("content")
            pairs.append(
                (str(tool.get("tool_call_id")), content if isinstance(content, str) else json.dumps(content))
            )
        return pairs

    async def stream_reply(self, request: web.Request, response: dict[str, Any]) -> web.StreamResponse:
        choice = (response.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        calls = [
            (c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls") or []
        ]
        chunks = response_chunks(
            content=message.get("content"),
            calls=calls,
            finish_reason=choice.get("finish_reason") or ("tool_calls" if calls else "stop"),
            usage=response.get("usage"),
            response_id=str(response.get("id", "chatcmpl-proxy")),
            model=str(response.get("model")),
        )
        out = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
        await out.prepare(request)
        for chunk in chunks:
            chunk.setdefault("created", response.get("created", int(time.time())))
            await out.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await out.write(b"data: [DONE]\n\n")
        await out.write_eof()
        return out


def upstream_app(upstream: Upstream) -> web.Application:
    """Serve any `Upstream` (e.g. a recorded trace) as a plain OpenAI-compatible endpoint."""

    async def handle(request: web.Request) -> web.Response:
        try:
            return web.json_response(await upstream.complete(await request.json()))
        except UpstreamError as exc:
            return error_response(exc.status, str(exc), "upstream_error")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    return app


async def serve(app: web.Application, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, str]:
    """Start an aiohttp app; returns its runner (for cleanup) and base URL ending in /v1."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()  # type: ignore[union-attr]
    return runner, f"http://{bound[0]}:{bound[1]}/v1"

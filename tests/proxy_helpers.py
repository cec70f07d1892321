"""A checking upstream for the proxy tests: an OpenAI-compatible endpoint on loopback that issues batches
of calls and verifies every request that completes one.

For a conversation ending in a user message it answers with a batch of N calls whose arguments carry
a fresh nonce (``{"query": "<tool>/<question>#<nonce>"}``), so every batch is unique even when its
call ids are not. The call ids follow the request's model name: ``m`` unique ids (``call_<uuid>``),
``m-repeat`` the same ids every time (``call_fixed_0``...), ``m-empty`` empty ids, ``m-missing`` no
``id`` key at all (providers do all of these). For a conversation ending in tool results it finds the
batch by the nonce and checks that the last assistant message holds exactly the N calls it issued
(ids, names, argument strings byte for byte; a call issued without an id must come back with a
non-empty id of its own, the proxy's) followed by the N results in call order under those ids, each
the one the tool computes from its own arguments. A request that fails the check is
answered 400 and recorded in `problems`; a good one gets a final answer quoting the results, so a
client can see it received its own.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from toolcall_lab.proxy import serve

TOOL_NAMES = ("get_weather", "get_news", "get_stock")
ID_STYLES = ("unique", "repeat", "empty", "missing")


def tool_result(name: str, arguments: str) -> str:
    """What the test clients' tools return: derived from the arguments, so the upstream can check it."""
    return f"{name} says {json.loads(arguments)['query']}"


def tool_schemas() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"Look up {name.removeprefix('get_')}.",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                    "required": ["query"],
                    "additionalProperties": False,
                },
            },
        }
        for name in TOOL_NAMES
    ]


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def model_for(style: str) -> str:
    """The model name that asks the checking upstream for this id style."""
    return "m" if style == "unique" else f"m-{style}"


def _nonce(call: dict[str, Any]) -> str | None:
    try:
        return str(json.loads(call["function"]["arguments"])["query"]).rsplit("#", 1)[1]
    except (KeyError, TypeError, ValueError, IndexError):
        return None


class CheckingUpstream:
    def __init__(self, n_calls: int = 3, *, exact_ids: bool = True) -> None:
        self.n_calls = n_calls
        self.exact_ids = exact_ids
        """False: a batch may come back under other ids (the proxy's own, after it forgot the batch),
        as long as each call has a unique id and its result answers it."""
        self.issued: dict[str, list[dict[str, Any]]] = {}
        """Batches issued, by nonce."""
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        """The headers of each request in `requests` (lower-case names)."""
        self.completed: list[list[dict[str, Any]]] = []
        """The message lists of requests that completed a batch (checked)."""
        self.problems: list[str] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner, self.url = await serve(app)
        return self.url

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    def problem(self, text: str) -> web.Response:
        self.problems.append(text)
        return web.json_response({"error": {"message": text, "type": "invalid_request_error"}}, status=400)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        messages = body["messages"]
        last = messages[-1]
        if last["role"] == "tool":
            end = len(messages)
            start = end
            while start > 0 and messages[start - 1]["role"] == "tool":
                start -= 1
            assistant = messages[start - 1]
            calls = assistant.get("tool_calls") or []
            issued = self.issued.get(_nonce(calls[0]) or "") if calls else None
            if issued is None:
                return self.problem(
                    f"the assistant message before the results is not a batch I issued: {assistant}"
                )
            if not self.exact_ids or any(not c.get("id") for c in issued):  # ids of the proxy's own
                sent_ids = [c.get("id") for c in calls]
                if not all(isinstance(i, str) and i for i in sent_ids) or len(set(sent_ids)) != len(calls):
                    return self.problem(f"calls issued without ids came back without unique ids: {sent_ids}")
                calls = [{k: v for k, v in c.items() if k != "id"} for c in calls]
                mine = [{k: v for k, v in c.items() if k != "id"} for c in issued]
            else:
                sent_ids, mine = [c["id"] for c in calls], issued
            if calls != mine:
                return self.problem(f"rebuilt assistant message differs: got {calls}, issued {issued}")
            results = messages[start:end]
            expected = [
                (cid, tool_result(c["function"]["name"], c["function"]["arguments"]))
                for cid, c in zip(sent_ids, issued, strict=True)
            ]
            seen = [(m.get("tool_call_id"), text_of(m.get("content"))) for m in results]
            if seen != expected:
                return self.problem(f"results differ: got {seen}, expected {expected}")
            self.completed.append(messages)
            reply = {"role": "assistant", "content": "All done: " + " | ".join(r for _, r in seen)}
        else:
            question = text_of(last.get("content"))
            style = str(body.get("model", "m")).removeprefix("m-") if body.get("model") != "m" else "unique"
            nonce = uuid.uuid4().hex[:16]
            calls = []
            for i, name in enumerate(TOOL_NAMES[: self.n_calls]):
                call: dict[str, Any] = {
                    "id": {
                        "unique": f"call_{uuid.uuid4().hex[:20]}",
                        "repeat": f"call_fixed_{i}",
                        "empty": "",
                    }.get(style, f"call_{uuid.uuid4().hex[:20]}"),
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": json.dumps({"query": f"{name}/{question}#{nonce}"}),
                    },
                }
                if style == "missing":
                    del call["id"]
                calls.append(call)
            self.issued[nonce] = calls
            reply = {"role": "assistant", "content": "Let me look those up.", "tool_calls": calls}
        response = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "m"),
            "system_fingerprint": "fp_checking",
            "choices": [
                {
                    "index": 0,
                    "message": reply,
                    "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop",
                }
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
        if body.get("stream"):
            from toolcall_lab.proxy._wire import sse_events

            include = bool((body.get("stream_options") or {}).get("include_usage"))
            data = b"".join(sse_events(response, include_usage=include))
            return web.Response(body=data, content_type="text/event-stream")
        return web.json_response(response)


class LoopbackUpstream:
    """A fake upstream on loopback: `start` serves its `handle` at /v1/chat/completions and returns the
    base URL, `close` stops it."""

    runner: web.BaseRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner, url = await serve(app)
        return url

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


class ScriptedHTTP(LoopbackUpstream):
    """An upstream on loopback that answers with scripted (status, headers, body) replies, in order,
    and records every request body it received."""

    def __init__(self, replies: list[tuple[int, dict[str, str], bytes]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(await request.json())
        status, headers, body = self.replies.pop(0)
        return web.Response(status=status, headers=headers, body=body)


def completion(message: dict[str, Any], **extra: Any) -> bytes:
    body = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "m",
        "system_fingerprint": "fp_scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        **extra,
    }
    return json.dumps(body).encode()


# --- the wire itself: an upstream and a forward proxy that control every byte ----------------------


@dataclass
class Act:
    """What `WireUpstream` does with a request: reply (`data`, then keep the connection or close it
    without saying so), end the connection without a reply (`close`: a FIN), or reset it (`reset`)."""

    data: bytes = b""
    kind: str = "reply"
    delay: float = 0.0
    close_after: bool = False


def http_reply(body: bytes, headers: dict[str, str] | None = None, status: int = 200) -> bytes:
    lines = [f"HTTP/1.1 {status} X", "Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class WireUpstream:
    """A raw asyncio upstream: reads each request itself (head, Content-Length body), records the raw
    head and body, counts connections, and answers as `behave(connection, k, head, body)` says (k: the
    request's position on its connection)."""

    def __init__(
        self,
        behave: Callable[[int, int, bytes, bytes], Act] | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.behave = behave or (lambda conn, k, head, body: Act(http_reply(DONE)))
        self.heads: list[bytes] = []
        self.bodies: list[bytes] = []
        self.connections = 0
        self.ssl_context = ssl_context
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = self.server.sockets[0].getsockname()[1]
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}/v1"

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn, k = self.connections, 0
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
                    return
                found = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                body = await reader.readexactly(int(found.group(1)) if found else 0)
                self.heads.append(head)
                self.bodies.append(body)
                act = self.behave(conn, k, head, body)
                k += 1
                if act.delay:
                    await asyncio.sleep(act.delay)
                if act.kind == "reset":
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                if act.kind == "close":
                    writer.close()
                    return
                writer.write(act.data)
                await writer.drain()
                if act.close_after:
                    writer.close()
                    return
        except (ConnectionError, asyncio.CancelledError):  # cancelled: the test's loop is shutting down
            return
        finally:
            if not writer.is_closing():
                writer.close()


DONE = json.dumps(
    {
        "id": "chatcmpl-wire",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}
        ],
    }
).encode()


class ForwardProxy:
    """A forward proxy on loopback: CONNECT tunnels and absolute-form requests, piped to their target.
    Records each request line (and Proxy-Authorization); `refuse` answers every request with that status."""

    def __init__(self, refuse: int = 0) -> None:
        self.lines: list[bytes] = []
        self.auth: list[bytes | None] = []
        self.refuse = refuse
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        line = head.split(b"\r\n", 1)[0]
        self.lines.append(line)
        found = re.search(rb"(?i)\r\nproxy-authorization: *([^\r]*)", head)
        self.auth.append(found.group(1) if found else None)
        if self.refuse:
            writer.write(b"HTTP/1.1 %d Refused\r\nContent-Length: 0\r\n\r\n" % self.refuse)
            writer.close()
            return
        method, target, _ = line.decode().split(" ")
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
        else:
            authority = target.split("/")[2]
            host, port = authority.rsplit(":", 1) if ":" in authority else (authority, "80")
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        else:
            up_writer.write(head)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def exchange(url: str, data: bytes, *, half_close: bool = False, quiet_s: float = 5) -> bytes:
    """Send raw bytes to a server (the host and port of `url`), optionally half-close, and read
    everything it sends until it closes (or `quiet_s` passes with nothing: then what came so far)."""
    host, port = url.split("//", 1)[1].split("/")[0].rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
    writer.write(data)
    await writer.drain()
    if half_close:
        writer.write_eof()
    out = b""
    try:
        while True:
            piece = await asyncio.wait_for(reader.read(65536), quiet_s)
            if not piece:
                break
            out += piece
    except (TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()
    return out

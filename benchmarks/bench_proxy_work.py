"""The proxy's own work per request, by hop type, measured so that a shared machine cannot blur it.

`bench_proxy.py` measures latency and CPU time of three processes; on a machine shared with other work
both move with the load. This script counts what the proxy itself executes: the proxy runs in a thread
of its own (its event loop, its HTTP server and client, its request logic), a stand-in upstream in a
second thread answers with fixed bytes, and the load generator (this thread) sends one request at a
time over loopback. For each request it reads

- the number of Python bytecode instructions the proxy's thread executed (``sys.settrace`` with
  opcode events, in that thread only): deterministic, the same on an idle or a busy machine, blind to
  work done in C (orjson, hashing, the kernel);
- or, without tracing, the CPU time of the proxy's thread (``pthread_getcpuclockid``): C work
  included, but inflated when other processes compete for the caches.

and reports the median per hop type: ``first`` (goes upstream and opens a batch), ``queued`` (answered
from the batch's queue), ``completing`` (the last result: goes upstream with the whole batch).

Run: ``python benchmarks/bench_proxy_work.py [--conversations N] [--cpu] [--profile] [--loop uvloop]``;
with ``PYTHONPATH=<another checkout>`` it measures that code (A/B runs). Opcodes leave out C work; for a
count of machine instructions (C and Python, no kernel), run the proxy under
``valgrind --tool=callgrind`` twice with different numbers of requests and take the difference.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import socket
import statistics
import sys
import threading
import time
from typing import Any

import orjson

CALLS = [
    {
        "id": f"call_up_{i}",
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps({"city": "Paris", "n": i}).decode()},
    }
    for i, name in enumerate(("get_weather", "get_news", "get_stock"))
]


def _reply(message: dict[str, Any]) -> bytes:
    body = orjson.dumps(
        {
            "id": "chatcmpl-work",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "m",
            "system_fingerprint": "fp_work",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
        }
    )
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nx-request-id: req_work\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    return head + body


BATCH = _reply({"role": "assistant", "content": None, "tool_calls": CALLS})
FINAL = _reply({"role": "assistant", "content": "It is sunny in Paris."})


class _Upstream(asyncio.Protocol):
    """Answers each request with fixed bytes: a 3-call batch, or (a request ending in tool results) a
    final answer."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            body = bytes(self.buffer[end + 4 : end + 4 + length])
            del self.buffer[: end + 4 + length]
            self.transport.write(FINAL if b'"role":"tool"' in body else BATCH)


def _thread(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def start_upstream() -> int:
    ready: list[int] = []

    def run() -> None:
        async def main() -> None:
            server = await asyncio.get_running_loop().create_server(_Upstream, "127.0.0.1", 0)
            ready.append(server.sockets[0].getsockname()[1])
            await asyncio.Event().wait()

        asyncio.run(main())

    _thread(run)
    while not ready:
        time.sleep(0.01)
    return ready[0]


class Counter:
    """Opcodes executed in the thread that installs it."""

    def __init__(self) -> None:
        self.count = 0

    def install(self) -> None:
        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "opcode":
                self.count += 1
            return local

        def tracer(frame: Any, event: str, arg: Any) -> Any:
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return local

        sys.settrace(tracer)


def start_proxy(
    upstream_port: int, mode: str, loop: str = "asyncio"
) -> tuple[int, Counter, Any, threading.Thread]:
    from toolcall_lab.proxy import HTTPUpstream, ProxyServer

    ready: list[int] = []
    counter = Counter()
    profile = cProfile.Profile() if mode == "profile" else None

    def run() -> None:
        if mode == "opcodes":
            counter.install()
        if profile is not None:
            profile.enable()

        async def main() -> None:
            server = ProxyServer(HTTPUpstream(f"http://127.0.0.1:{upstream_port}/v1"))
            url = await server.start("127.0.0.1", 0)
            ready.append(int(url.rsplit(":", 1)[1].split("/")[0]))
            await asyncio.Event().wait()

        factory = None
        if loop == "uvloop":
            import uvloop

            factory = uvloop.new_event_loop
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(main())

    thread = _thread(run)
    while not ready:
        time.sleep(0.01)
    return ready[0], counter, profile, thread


class Client:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer "
            "sk-work\r\nContent-Type: application/json\r\nUser-Agent: bench-work/1\r\nContent-Length: "
        ).encode()
        self.buffer = b""

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        data = orjson.dumps(body)
        self.sock.sendall(self.head + str(len(data)).encode() + b"\r\n\r\n" + data)
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
        while len(rest) < length:
            rest += self.sock.recv(65536)
        self.buffer = rest[length:]
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"{head[:40]!r}: {rest[:300]!r}")
        reply: dict[str, Any] = orjson.loads(rest[:length])
        return reply


def measure(conversations: int, mode: str, loop: str = "asyncio") -> dict[str, list[float]]:
    port, counter, profile, thread = start_proxy(start_upstream(), mode, loop)
    clock = time.pthread_getcpuclockid(thread.ident or 0)
    client = Client(port)
    hops: dict[str, list[float]] = {"first": [], "queued": [], "completing": []}

    def now() -> float:
        return float(counter.count) if mode == "opcodes" else time.clock_gettime(clock) * 1e6

    for k in range(conversations + 20):  # the first 20 warm up caches (heads, ids, JSON keys)
        body: dict[str, Any] = {
            "model": "m",
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": f"Weather, news and stock for Paris? ({k})"},
            ],
            "tools": [{"type": "function", "function": {"name": c["function"]["name"]}} for c in CALLS],
            "parallel_tool_calls": False,
        }
        for hop in range(4):
            time.sleep(0.0005)  # let the proxy's loop settle (its sweeper, the previous reply's write)
            before = now()
            reply = client.post(body)
            spent = now() - before
            message = reply["choices"][0]["message"]
            kind = "first" if hop == 0 else ("queued" if message.get("tool_calls") else "completing")
            if k >= 20:
                hops[kind].append(spent)
            calls = message.get("tool_calls")
            if not calls:
                break
            result = {"role": "tool", "tool_call_id": calls[0]["id"], "content": f"result {hop}"}
            body = {**body, "messages": [*body["messages"], message, result]}
    if profile is not None:
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(120)
        print(out.getvalue())
    return hops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--cpu", action="store_true", help="CPU µs of the proxy's thread instead of opcodes")
    parser.add_argument("--profile", action="store_true", help="cProfile the proxy's thread (tottime)")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio", help="the proxy's loop")
    args = parser.parse_args()
    mode = "profile" if args.profile else ("cpu" if args.cpu else "opcodes")
    hops = measure(args.conversations, mode, args.loop)
    unit = "opcodes" if mode == "opcodes" else "µs of CPU"
    per_conversation = sum(statistics.median(v) * (2 if k == "queued" else 1) for k, v in hops.items())
    import toolcall_lab

    print(
        f"proxy's own work per request ({unit}, median of {args.conversations} conversations, {args.loop} "
        f"loop; code from {toolcall_lab.__file__.rsplit('/', 2)[0]}):"
    )
    for kind, values in hops.items():
        print(f"  {kind:>10}: {statistics.median(values):8.0f}")
    print(f"  per request (4 per conversation): {per_conversation / 4:8.0f}")


if __name__ == "__main__":
    main()

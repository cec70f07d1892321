"""The serialized proxy on loopback, measured so that the figures are the proxy's, not the load generator's.

Three processes: the upstream (`toolcall-lab serve-trace`, a recorded 3-call trace, no model latency),
the proxy (`toolcall-lab proxy --upstream http://...`), and this one, the load generator. The load
generator speaks HTTP/1.1 itself over kept-alive asyncio connections (requests built and replies parsed
with orjson, no client library): a request costs it a few tens of microseconds, so it is not the
bottleneck, and the script prints the CPU share of every process in every phase to show it.

Workload (issue 12): 200 conversations x a 3-call batch. "direct": the conversations call the upstream
themselves (2 requests each: the batch, then the final answer). "via the proxy": the same with
``parallel_tool_calls: false`` (4 requests each: the first and the last go upstream, 2 are served from
the queue). Under load 20 clients (one connection each) run the 200 conversations; direct and proxied
phases alternate, 20 each (2 with ``--quick``; a phase lasts about 50-100 ms, so one phase's
noise moves its median a lot: the headline pools every phase). Unloaded: one client, one request at a time, direct and
proxied conversations interleaved. Targets: unloaded, a hop that goes upstream adds at most 1 ms at
the median and a queued hop is no slower than a direct call; under load the median latency through the
proxy is at most 1.3x direct. All ratios are against direct calls measured in the same run.

Besides the issue's headline (the median over every hop, a mix of cheap queued hops and costly upstream
hops), the script prints the median per hop type and per conversation (the time a client waits for the
whole conversation), and, unloaded, the request that completes a batch with a 100 KB and a 1 MB
conversation written compact and as Python's ``json.dumps`` writes it by default (spaces): how much
what the proxy adds moves with the client's spacing. The headline depends on the batch size: with a
3-call batch half of a proxied conversation's requests are queued hops (cheap) and half go upstream
(about twice a direct call under load), so its median falls between the two; a 2-call batch would
put it higher, a 6-call batch lower. Read it with the per-hop and per-conversation lines (a serialized
conversation makes twice the requests of a direct one, by design), which the script prints beside it. CPU time is read from ``/proc/<pid>/schedstat``
(nanoseconds; the 10 ms ticks of ``/proc/<pid>/stat`` would blur a phase of 100-200 ms). Not counted
in any figure: with ``parallel_tool_calls: false`` a streamed answer reaches the client in one burst
(time to first token = time of the whole answer, see the README).

Run: `python benchmarks/bench_proxy.py [--quick] [--clients N] [--conversations N] [--pairs N]
[--event-loop asyncio]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from toolcall_lab.scenarios import SCENARIOS
from toolcall_lab.trace_files import save

TICK = os.sysconf("SC_CLK_TCK")


# --- a lean HTTP/1.1 client ------------------------------------------------------------------------


class _Connection(asyncio.Protocol):
    """One kept-alive HTTP/1.1 connection, one request at a time; replies need a Content-Length."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.head_end = -1
        self.need = -1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        if self.head_end < 0:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            self.head_end = end + 4
            head = bytes(buffer[:end]).lower()
            at = head.find(b"\r\ncontent-length:")
            if at < 0:
                self._fail(RuntimeError(f"reply without Content-Length: {bytes(buffer[:300])!r}"))
                return
            stop = head.find(b"\r\n", at + 2)
            self.need = self.head_end + int(head[at + 17 : stop if stop > 0 else None])
        if len(buffer) >= self.need:
            status = int(buffer[9:12])
            body = bytes(buffer[self.head_end : self.need])
            del buffer[: self.need]
            self.head_end = self.need = -1
            waiter, self.waiter = self.waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result((status, body))

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionError(f"connection closed: {exc}"))


class Client:
    """A kept-alive connection to one server; `post` sends a JSON body, returns (status, parsed reply)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.head = (
            f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\nContent-Length: "
        ).encode()
        self.conn: _Connection | None = None

    async def connect(self) -> Client:
        loop = asyncio.get_running_loop()
        _, self.conn = await loop.create_connection(_Connection, self.host, self.port)
        return self

    async def post(self, body: dict, dump=orjson.dumps) -> dict:
        conn = self.conn
        assert conn is not None and conn.transport is not None
        data = dump(body)
        conn.waiter = asyncio.get_running_loop().create_future()
        conn.transport.write(self.head + str(len(data)).encode() + b"\r\n\r\n" + data)
        status, reply = await conn.waiter
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {reply[:300]!r}")
        return orjson.loads(reply)

    def close(self) -> None:
        if self.conn is not None and self.conn.transport is not None:
            self.conn.transport.close()


# --- the workload ----------------------------------------------------------------------------------


@dataclass
class Hops:
    upstream: list[float] = field(default_factory=list)
    """Requests that went to the upstream (all of them when direct)."""
    queued: list[float] = field(default_factory=list)
    """Requests the proxy answered from its queue."""
    conversations: list[float] = field(default_factory=list)
    """Each conversation's time, first request to final answer."""
    last: list[float] = field(default_factory=list)
    """Each conversation's last request (the final answer; via the proxy, the request completing the batch)."""

    @property
    def all(self) -> list[float]:
        return self.upstream + self.queued


async def conversation(
    client: Client, text: str, serial: bool, hops: Hops, *, system: str = "", dump=orjson.dumps
) -> None:
    messages = [{"role": "system", "content": system}] if system else []
    body: dict = {"model": "m", "messages": [*messages, {"role": "user", "content": text}]}
    if serial:
        body["parallel_tool_calls"] = False
    start = time.perf_counter()
    for hop in range(6):
        t0 = time.perf_counter()
        reply = await client.post(body, dump)
        dt = time.perf_counter() - t0
        message = reply["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        (hops.upstream if hop == 0 or not calls else hops.queued).append(dt)
        if not calls:
            hops.conversations.append(time.perf_counter() - start)
            hops.last.append(dt)
            return
        results = [
            {"role": "tool", "tool_call_id": c["id"], "content": f"result of {c['id']}"} for c in calls
        ]
        body = {**body, "messages": [*body["messages"], message, *results]}
    raise RuntimeError(f"conversation {text!r} did not end")


def cpu_seconds(pid: int) -> float:
    """CPU time of a process, all its threads: nanoseconds from /proc/<pid>/task/*/schedstat, else the
    10 ms ticks of /proc/<pid>/stat (user + system)."""
    try:
        return (
            sum(
                int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
                for task in os.listdir(f"/proc/{pid}/task")
            )
            / 1e9
        )
    except (OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK


@dataclass
class Phase:
    label: str
    hops: Hops
    wall: float
    cpu: dict[str, float]
    """Process name -> CPU seconds used during the phase."""

    @property
    def requests(self) -> int:
        return len(self.hops.all)


async def load_phase(url: str, n: int, clients: int, serial: bool, label: str, pids: dict[str, int]) -> Phase:
    hops = Hops()
    queue = list(range(n))
    conns = [await Client(url).connect() for _ in range(clients)]

    async def worker(client: Client) -> None:
        while queue:
            k = queue.pop()
            await conversation(client, f"{label} conversation {k}", serial, hops)

    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    c0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    wall, client_cpu = time.perf_counter() - t0, time.process_time() - c0
    cpu = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    cpu["load generator"] = client_cpu
    for c in conns:
        c.close()
    return Phase(label, hops, wall, cpu)


async def unloaded(
    upstream_url: str, proxy_url: str, n: int, *, system: str = "", dump=orjson.dumps
) -> tuple[Hops, Hops]:
    """One client per target, one request at a time; direct and proxied conversations alternate so
    machine noise hits both alike. `system`: a system prompt (a large conversation); `dump`: how the
    client writes its JSON."""
    direct, proxied = Hops(), Hops()
    d, p = await Client(upstream_url).connect(), await Client(proxy_url).connect()
    for k in range(n):
        await conversation(d, f"single {k}", False, direct, system=system, dump=dump)
        await conversation(p, f"single {k}", True, proxied, system=system, dump=dump)
    d.close()
    p.close()
    return direct, proxied


BODY_FORMS = {
    "compact": lambda body: json.dumps(body, separators=(",", ":")).encode(),
    "json.dumps default": lambda body: json.dumps(body).encode(),
}
"""How a client may write its JSON: compact (orjson, JavaScript, httpx), or spaced and ASCII-escaped
(Python's json.dumps defaults: requests, aiohttp's json=)."""


def start(args: list[str], log: Path) -> tuple[subprocess.Popen[str], str]:
    """Start a server (its stderr into `log`: shown only if it does not stop cleanly, see `stop`)."""
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolcall_lab", *args], stdout=subprocess.PIPE, stderr=err, text=True
        )
    line = proc.stdout.readline() if proc.stdout else ""
    url = next(w for w in line.split() if w.startswith("http://"))
    return proc, url


def stop(proc: subprocess.Popen[str], log: Path) -> None:
    """SIGTERM, then wait; a server that does not exit 0 has its stderr printed (its traceback)."""
    proc.terminate()
    code = proc.wait(timeout=10)
    if code != 0:
        print(f"{' '.join(map(str, proc.args))} exited {code}:\n{log.read_text()}", file=sys.stderr)


def proxy_loop(proc: subprocess.Popen[str]) -> str:
    """The event loop the proxy says it runs on (its second line: uvloop with the `fast` extra)."""
    line = proc.stdout.readline() if proc.stdout else ""
    return line.rsplit("event loop: ", 1)[1].strip() if "event loop: " in line else "unknown"


# --- report ----------------------------------------------------------------------------------------


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.3f} ms"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def verdict(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def describe(phases: list[Phase], what: str) -> str:
    wall = sum(p.wall for p in phases)
    requests = sum(p.requests for p in phases)
    names = phases[0].cpu.keys()
    shares = ", ".join(
        f"{name} {100 * sum(p.cpu[name] for p in phases) / wall:.0f} % "
        f"({1e6 * sum(p.cpu[name] for p in phases) / requests:.0f} µs per request)"
        for name in names
    )
    total = 100 * sum(sum(p.cpu.values()) for p in phases) / wall
    values = [v for p in phases for v in p.hops.all]
    return (
        f"  {what}: {requests} requests in {wall:.2f} s = {requests / wall:,.0f} req/s; median "
        f"{statistics.median(values) * 1e3:.2f} ms, p99 {pct(values, 0.99) * 1e3:.2f} ms\n"
        f"    CPU (share of one core): {shares}; all {total:.0f} % of the 200 % the 2 cores give"
    )


def cpu_per_request(phases: list[Phase]) -> dict[str, float]:
    requests = sum(p.requests for p in phases)
    return {name: 1e6 * sum(p.cpu[name] for p in phases) / requests for name in phases[0].cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="2 load phases each way, 50 unloaded conversations"
    )
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--conversations", type=int, default=200, help="per load phase")
    parser.add_argument("--pairs", type=int, default=20, help="pairs of load phases (direct, proxied)")
    parser.add_argument(
        "--event-loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="the proxy's (its own option)",
    )
    args = parser.parse_args()
    n, pairs = args.conversations, 2 if args.quick else args.pairs
    single = 50 if args.quick else 300
    big = 5 if args.quick else 15
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = save(SCENARIOS["three_tools_100ms"].record(), Path(tmp) / "three.json")
        logs = {"upstream": Path(tmp) / "upstream.err", "proxy": Path(tmp) / "proxy.err"}
        upstream, upstream_url = start(["serve-trace", str(trace_path), "--port", "0"], logs["upstream"])
        proxy, proxy_url = start(
            ["proxy", "--upstream", upstream_url, "--port", "0", "--event-loop", args.event_loop],
            logs["proxy"],
        )
        loop_name = proxy_loop(proxy)
        pids = {"upstream": upstream.pid, "proxy": proxy.pid}
        try:

            async def run() -> tuple[list[Phase], list[Phase], Hops, Hops, dict[str, tuple[Hops, Hops]]]:
                # warm up both servers (their caches, the proxy's known heads; each conversation of a
                # phase is a new conversation whatever its text)
                await load_phase(upstream_url, 40, 5, False, "warm-up", pids)
                await load_phase(proxy_url, 40, 5, True, "warm-up", pids)
                d1, p1 = await unloaded(upstream_url, proxy_url, single)
                large = {}
                for size in (100_000, 1_000_000):
                    system = "You are a helpful agent. " * (size // 25)
                    for form, dump in BODY_FORMS.items():
                        large[f"{size // 1000:,} KB {form}"] = await unloaded(
                            upstream_url, proxy_url, big, system=system, dump=dump
                        )
                direct, proxied = [], []
                for r in range(pairs):  # alternated so a burst of noise on the shared machine hits both sides
                    direct.append(await load_phase(upstream_url, n, args.clients, False, f"load {r}", pids))
                    proxied.append(await load_phase(proxy_url, n, args.clients, True, f"load {r}", pids))
                return direct, proxied, d1, p1, large

            direct, proxied, d1, p1, large = asyncio.run(run())
        finally:
            stop(proxy, logs["proxy"])
            stop(upstream, logs["upstream"])
    med = statistics.median
    print(
        f"{n} conversations x 3-call batch; upstream (serve-trace), proxy and load generator in 3 processes "
        f"on {os.cpu_count()} cores; load average {load_before:.1f} before the run, {os.getloadavg()[0]:.1f} after"
    )
    print(
        f"the proxy's event loop: {loop_name}"
        + (
            ""
            if loop_name == "uvloop" or args.event_loop == "asyncio"
            else " (uvloop, what the CLI proxy runs on with the `fast` extra, is not installed here: "
            "pip install -e '.[fast]'; these figures are asyncio's loop)"
        )
    )
    print()
    added = (med(p1.upstream) - med(d1.all)) * 1e3
    ratio_q = med(p1.queued) / med(d1.all)
    print(f"unloaded, one client, {single} conversations each way (interleaved):")
    print(f"  direct call median {ms(d1.all)}")
    print(
        f"  hop that goes upstream via the proxy: median {ms(p1.upstream)} -> added {added:+.3f} ms "
        f"(target <= 1 ms: {verdict(added <= 1.0)})"
    )
    print(
        f"  hop answered from the queue: median {ms(p1.queued)} = {ratio_q:.2f}x direct "
        f"(target <= 1.0x: {verdict(ratio_q <= 1.0)})"
    )
    print(
        f"  whole conversation: median {ms(d1.conversations)} direct (2 requests), {ms(p1.conversations)} via "
        "the proxy (4 requests: one call per response)"
    )
    print(
        f"  large conversations, {big} each way: the final request (via the proxy: the one completing the batch)"
    )
    for label, (d, p) in large.items():
        extra = (med(p.last) - med(d.last)) * 1e3
        print(f"    {label:>26}: direct {ms(d.last)}, via the proxy {ms(p.last)} -> added {extra:+.3f} ms")
    print()
    d_all = [v for p in direct for v in p.hops.all]
    p_up = [v for p in proxied for v in p.hops.upstream]
    p_queued = [v for p in proxied for v in p.hops.queued]
    ratio = med(p_up + p_queued) / med(d_all)
    print(
        f"under load, {args.clients} clients ({n} conversations per phase, {pairs} phases each way, alternated):"
    )
    print(describe(direct, "direct"))
    print(describe(proxied, "via the proxy"))
    print(
        f"    upstream hops median {ms(p_up)} = {med(p_up) / med(d_all):.2f}x direct; "
        f"queued hops median {ms(p_queued)} = {med(p_queued) / med(d_all):.2f}x direct"
    )
    d_conv = [v for p in direct for v in p.hops.conversations]
    p_conv = [v for p in proxied for v in p.hops.conversations]
    print(
        f"    per conversation: median {ms(d_conv)} direct (2 requests), {ms(p_conv)} via the proxy "
        f"(4 requests) = {med(p_conv) / med(d_conv):.2f}x"
    )
    print(
        f"  median latency via proxy / direct = {ratio:.2f}x (target <= 1.3x: {verdict(ratio <= 1.3)}; the "
        "issue's measure: the median over every request, which here pools 2 queued and 2 upstream hops per "
        "conversation, so it moves with the batch size: read it with the two lines above)"
    )
    per_pair = sorted(med(p.hops.all) / med(d.hops.all) for d, p in zip(direct, proxied, strict=True))
    print(
        f"    per pair of phases: median {med(per_pair):.2f}x, range {per_pair[0]:.2f}x-{per_pair[-1]:.2f}x "
        f"({', '.join(f'{r:.2f}' for r in per_pair)})"
    )
    d_cpu, p_cpu = cpu_per_request(direct), cpu_per_request(proxied)
    d_total = d_cpu["upstream"] + d_cpu["load generator"]
    p_total = p_cpu["upstream"] + p_cpu["proxy"] + p_cpu["load generator"]
    print(
        f"  CPU per request, all processes: direct {d_total:.0f} µs, via the proxy {p_total:.0f} µs "
        f"({p_total / d_total:.2f}x; the proxy's own share {p_cpu['proxy']:.0f} µs). When the machine's "
        "cores are busy with other work, a request's latency under load follows this CPU ratio more than the "
        "free-core one (and a conversation's, the per-conversation ratio below)."
    )
    d_reqs = sum(p.requests for p in direct) / (n * len(direct))  # requests per conversation (2 direct)
    p_reqs = sum(p.requests for p in proxied) / (n * len(proxied))  # (4 via the proxy: one call each)
    d_wall = sum(p.wall for p in direct) / (n * len(direct))
    p_wall = sum(p.wall for p in proxied) / (n * len(proxied))
    print(
        f"  per conversation ({d_reqs:.0f} requests direct, {p_reqs:.0f} via the proxy): CPU, all processes, "
        f"{d_total * d_reqs:.0f} µs direct vs {p_total * p_reqs:.0f} µs via the proxy "
        f"({p_total * p_reqs / (d_total * d_reqs):.2f}x); throughput {1 / d_wall:,.0f} vs {1 / p_wall:,.0f} "
        f"conversations/s ({d_wall and p_wall / d_wall:.2f}x the time)"
    )


if __name__ == "__main__":
    main()

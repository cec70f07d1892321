"""The serialized proxy under load on loopback (issue: proxy server).

Three processes: the upstream (`toolcall-lab serve-trace`, a recorded 3-call trace, no model latency),
the proxy (`toolcall-lab proxy --upstream http://...`), and this one with 20 concurrent clients.
Baseline "direct": the clients call the upstream themselves (2 requests per conversation: the batch,
then the final answer). "via proxy": the same conversations with parallel_tool_calls=false through the
proxy (4 requests each: the first and last go upstream, 2 are served from the queue). Targets (issue
12): unloaded, a hop that goes upstream adds at most 1 ms at the median and a queued hop is no slower
than a direct call; under load (200 conversations x 3 calls, 20 clients) the median latency through
the proxy is at most 1.3x direct. All ratios are against direct calls measured in the same run.
Run: `python benchmarks/bench_proxy.py [--quick]`.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from toolcall_lab.scenarios import SCENARIOS
from toolcall_lab.trace_files import save


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def start(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "toolcall_lab", *args], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    url = next(w for w in line.split() if w.startswith("http://"))
    return proc, url


async def one_conversation(
    http: httpx.AsyncClient,
    k: int,
    serial: bool,
    label: str,
    upstream_hops: list[float],
    queued_hops: list[float],
) -> None:
    body: dict = {"model": "m", "messages": [{"role": "user", "content": f"{label} {k}"}]}
    if serial:
        body["parallel_tool_calls"] = False
    for hop in range(6):
        t0 = time.perf_counter()
        reply = (await http.post("/chat/completions", json=body)).json()
        dt = time.perf_counter() - t0
        message = reply["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        (upstream_hops if hop == 0 or not calls else queued_hops).append(dt)
        if not calls:
            return
        answered = [{"role": "tool", "tool_call_id": c["id"], "content": f"r{k}"} for c in calls]
        body = {**body, "messages": [*body["messages"], message, *answered]}


async def conversations(
    url: str, n: int, concurrency: int, serial: bool, label: str = "conversation"
) -> tuple[float, list[float], list[float]]:
    upstream_hops: list[float] = []
    queued_hops: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:

        async def one(k: int) -> None:
            async with gate:
                await one_conversation(http, k, serial, label, upstream_hops, queued_hops)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(k) for k in range(n)))
        return time.perf_counter() - t0, upstream_hops, queued_hops


async def unloaded(upstream_url: str, proxy_url: str, n: int) -> tuple[list[float], list[float], list[float]]:
    """One client per target on kept-alive connections; direct and proxied conversations alternate so
    machine noise hits both alike."""
    direct: list[float] = []
    up: list[float] = []
    queued: list[float] = []
    async with (
        httpx.AsyncClient(base_url=upstream_url, timeout=60) as d_http,
        httpx.AsyncClient(base_url=proxy_url, timeout=60) as p_http,
    ):
        for k in range(n):
            await one_conversation(d_http, k, False, "single", direct, direct)
            await one_conversation(p_http, k, True, "single", up, queued)
    return direct, up, queued


def verdict(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def main() -> None:
    n = 50 if "--quick" in sys.argv else 200
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = save(SCENARIOS["three_tools_100ms"].record(), Path(tmp) / "three.json")
        upstream, upstream_url = start(["serve-trace", str(trace_path), "--port", "0"])
        proxy, proxy_url = start(["proxy", "--upstream", upstream_url, "--port", "0"])
        try:
            # warm up both servers (other texts: identical conversations would be the same conversation)
            asyncio.run(conversations(upstream_url, 10, 5, serial=False, label="warm-up"))
            asyncio.run(conversations(proxy_url, 10, 5, serial=True, label="warm-up"))
            # load phases alternate (3 each) so a burst of noise on the shared machine hits both sides
            d_time, p_time = 0.0, 0.0
            d_hops, p_up, p_queued = [], [], []
            for r in range(1 if "--quick" in sys.argv else 3):
                t, hops, _ = asyncio.run(conversations(upstream_url, n, 20, serial=False, label=f"load {r}"))
                d_time, d_hops = d_time + t, d_hops + hops
                t, up, queued = asyncio.run(conversations(proxy_url, n, 20, serial=True, label=f"load {r}"))
                p_time, p_up, p_queued = p_time + t, p_up + up, p_queued + queued
            d1, p1_up, p1_queued = asyncio.run(unloaded(upstream_url, proxy_url, n // 2))
        finally:
            for proc in (proxy, upstream):
                proc.terminate()
                proc.wait(timeout=10)
    med = statistics.median
    d_requests, p_requests = len(d_hops), len(p_up) + len(p_queued)
    print(f"{n} conversations x 3-call batch; upstream (serve-trace), proxy and clients in 3 processes")
    print()
    added = (med(p1_up) - med(d1)) * 1e3
    print(f"unloaded, one client, {n // 2} conversations each way (interleaved):")
    print(f"  direct call median {med(d1) * 1e3:.3f} ms")
    print(
        f"  hop that goes upstream via the proxy: median {med(p1_up) * 1e3:.3f} ms -> added {added:+.3f} ms "
        f"(target <= 1 ms: {verdict(added <= 1.0)})"
    )
    ratio_q = med(p1_queued) / med(d1)
    print(
        f"  hop answered from the queue: median {med(p1_queued) * 1e3:.3f} ms = {ratio_q:.2f}x direct "
        f"(target <= 1.0x: {verdict(ratio_q <= 1.0)})"
    )
    print()
    all_p = p_up + p_queued
    ratio_load = med(all_p) / med(d_hops)
    print(f"under load, 20 concurrent clients ({n} conversations per phase, phases alternated):")
    print(
        f"  direct: {d_requests} requests in {d_time:.2f} s = {d_requests / d_time:,.0f} req/s; "
        f"median {med(d_hops) * 1e3:.2f} ms, p99 {pct(d_hops, 0.99) * 1e3:.2f} ms"
    )
    print(
        f"  via the proxy: {p_requests} requests in {p_time:.2f} s = {p_requests / p_time:,.0f} req/s; "
        f"median {med(all_p) * 1e3:.2f} ms, p99 {pct(all_p, 0.99) * 1e3:.2f} ms"
    )
    print(
        f"    upstream hops median {med(p_up) * 1e3:.2f} ms, queued hops median {med(p_queued) * 1e3:.2f} ms"
    )
    print(
        f"  median latency via proxy / direct = {ratio_load:.2f}x (target <= 1.3x: {verdict(ratio_load <= 1.3)})"
    )


if __name__ == "__main__":
    main()

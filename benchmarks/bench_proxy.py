"""The serialized proxy under load on loopback (issue: proxy server).

Three processes: the upstream (`toolcall-lab serve-trace`, a recorded 3-call trace, no model latency),
the proxy (`toolcall-lab proxy --upstream http://...`), and this one with 20 concurrent clients.
Baseline "direct": the clients call the upstream themselves (2 requests per conversation: the batch,
then the final answer). "via proxy": the same conversations with parallel_tool_calls=false through the
proxy (4 requests each: 3 single-call hops, the last going upstream). Reports requests/s and per-hop
latency (median, p99); the proxy's added latency is hop latency minus direct latency.
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
                body = {"model": "m", "messages": [{"role": "user", "content": f"{label} {k}"}]}
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

        t0 = time.perf_counter()
        await asyncio.gather(*(one(k) for k in range(n)))
        return time.perf_counter() - t0, upstream_hops, queued_hops


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
            d_time, d_hops, _ = asyncio.run(conversations(upstream_url, n, 20, serial=False))
            p_time, p_up, p_queued = asyncio.run(conversations(proxy_url, n, 20, serial=True))
            _, d1, _ = asyncio.run(conversations(upstream_url, 40, 1, serial=False, label="single"))
            _, p1_up, p1_queued = asyncio.run(conversations(proxy_url, 40, 1, serial=True, label="single"))
        finally:
            for proc in (proxy, upstream):
                proc.terminate()
                proc.wait(timeout=10)
    d_requests, p_requests = len(d_hops), len(p_up) + len(p_queued)
    print(
        f"{n} conversations x 3-call batch, 20 concurrent clients; upstream, proxy and clients in 3 processes"
    )
    print(
        f"direct to upstream: {d_requests} requests in {d_time:.2f} s = {d_requests / d_time:,.0f} req/s; "
        f"latency median {statistics.median(d_hops) * 1e3:.2f} ms, p99 {pct(d_hops, 0.99) * 1e3:.2f} ms"
    )
    print(f"through the proxy:  {p_requests} requests in {p_time:.2f} s = {p_requests / p_time:,.0f} req/s")
    print(
        f"  hops that call upstream: median {statistics.median(p_up) * 1e3:.2f} ms, p99 {pct(p_up, 0.99) * 1e3:.2f} ms"
        f" -> added by the proxy: median {(statistics.median(p_up) - statistics.median(d_hops)) * 1e3:+.2f} ms, "
        f"p99 {(pct(p_up, 0.99) - pct(d_hops, 0.99)) * 1e3:+.2f} ms"
    )
    print(
        f"  hops answered from the queue (no upstream): median {statistics.median(p_queued) * 1e3:.2f} ms, "
        f"p99 {pct(p_queued, 0.99) * 1e3:.2f} ms"
    )
    added = (statistics.median(p1_up) - statistics.median(d1)) * 1e3
    print(
        f"unloaded (one client, 40 conversations): direct median {statistics.median(d1) * 1e3:.2f} ms; "
        f"via proxy: upstream hops median {statistics.median(p1_up) * 1e3:.2f} ms (added {added:+.2f} ms), "
        f"queued hops median {statistics.median(p1_queued) * 1e3:.2f} ms"
    )


if __name__ == "__main__":
    main()

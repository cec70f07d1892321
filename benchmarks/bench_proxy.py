"""The serialized proxy under load on loopback (issue: proxy server).

Upstream: a recorded 3-call trace served as an OpenAI-compatible endpoint (no model latency).
Baseline "direct": clients call that upstream themselves (2 requests per conversation: the batch,
then the final answer). "via proxy": the same conversations with parallel_tool_calls=false through
the proxy (4 requests each: 3 single-call hops, the last of which goes upstream). Reports requests/s
and per-hop latency (median, p99); the proxy's added latency is hop latency minus direct latency.
Run: `python benchmarks/bench_proxy.py [--quick]`.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

import httpx

from toolcall_lab.proxy_server import OpenAIUpstream, ProxyServer, TraceUpstream, serve, upstream_app
from toolcall_lab.scenarios import SCENARIOS


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def conversations(
    url: str, n: int, concurrency: int, serial: bool
) -> tuple[float, list[float], list[float]]:
    upstream_hops: list[float] = []
    queued_hops: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(
        base_url=url, timeout=60, limits=httpx.Limits(max_connections=concurrency)
    ) as http:

        async def one(k: int) -> None:
            async with gate:
                messages = [{"role": "user", "content": f"conversation {k}"}]
                body = {"model": "m", "messages": messages}
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


async def main() -> None:
    n = 50 if "--quick" in sys.argv else 200
    trace = SCENARIOS["three_tools_100ms"].record()
    runner, upstream_url = await serve(upstream_app(TraceUpstream(trace)))
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key="unused", base_url=upstream_url, max_retries=0)
    proxy = ProxyServer(OpenAIUpstream(client))
    proxy_url = await proxy.start()
    try:
        d_time, d_hops, _ = await conversations(upstream_url, n, 20, serial=False)
        p_time, p_up, p_queued = await conversations(proxy_url, n, 20, serial=True)
    finally:
        await proxy.close()
        await client.close()
        await runner.cleanup()
    d_requests, p_requests = len(d_hops), len(p_up) + len(p_queued)
    print(f"{n} conversations x 3-call batch, 20 concurrent clients, loopback")
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
        f"  hops served from the queue (no upstream): median {statistics.median(p_queued) * 1e3:.2f} ms, "
        f"p99 {pct(p_queued, 0.99) * 1e3:.2f} ms"
    )
    print(f"proxy stats: {proxy.stats}")


if __name__ == "__main__":
    asyncio.run(main())

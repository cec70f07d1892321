"""Virtual-clock replay throughput against looptime and a no-wait floor (issue: traces and replay).

Same coroutines on three loops, each round = one model wait then N tool calls in parallel, every
wait the recorded duration:
  looptime  looptime's event loop with its defaults (a virtual clock for tests)
  ours      toolcall_lab.clock.VirtualEventLoop
  floor     a plain asyncio loop with every sleep replaced by sleep(0) (no clock at all)
Targets: ours >= 10x looptime, ours <= 2x floor (time ratio). Also: the full replay machinery (loop,
modes, replay model) in rounds/s, a 10-round trace with seconds of latency, and real-clock agreement.
Run: `python benchmarks/bench_replay.py [--quick]` (needs the `bench` extra for looptime).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time

from toolcall_lab.clock import VirtualEventLoop
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import Scenario, ScriptedResponse, simulated


def rounds_coro(n_rounds: int, calls: int, sleep) -> object:
    rng = random.Random(1)
    plan = [(rng.uniform(0.4, 1.5), [rng.uniform(0.05, 0.8) for _ in range(calls)]) for _ in range(n_rounds)]

    async def main() -> None:
        for model_s, tools in plan:
            await sleep(model_s)
            async with asyncio.TaskGroup() as tg:
                for d in tools:
                    tg.create_task(sleep(d))

    return main()


async def zero_sleep(_: float) -> None:
    await asyncio.sleep(0)


def timed(loop: asyncio.AbstractEventLoop, coro) -> float:
    t0 = time.perf_counter()
    loop.run_until_complete(coro)
    return time.perf_counter() - t0


def measure(n_rounds: int, calls: int, repeat: int) -> dict[str, float]:
    import looptime

    out: dict[str, list[float]] = {"looptime": [], "ours": [], "floor": []}
    for _ in range(repeat):
        lt = looptime.new_event_loop()
        out["looptime"].append(timed(lt, rounds_coro(n_rounds, calls, asyncio.sleep)))
        lt.close()
        ours = VirtualEventLoop()
        out["ours"].append(timed(ours, rounds_coro(n_rounds, calls, asyncio.sleep)))
        ours.close()
        plain = asyncio.new_event_loop()
        out["floor"].append(timed(plain, rounds_coro(n_rounds, calls, zero_sleep)))
        plain.close()
    return {k: n_rounds / min(v) for k, v in out.items()}


def ten_round_trace():
    steps = [
        ScriptedResponse(tool_calls=tuple((f"t{r}_{c}", {"x": c}) for c in range(3)), latency_s=1.2)
        for r in range(10)
    ] + [ScriptedResponse(content="done", latency_s=1.2)]
    tools = tuple(simulated(f"t{r}_{c}", 0.3 + 0.2 * c) for r in range(10) for c in range(3))
    return Scenario(
        name="ten", title="10 rounds x 3 calls", prompt="go", steps=tuple(steps), tools=tools
    ).record()


def main() -> None:
    quick = "--quick" in sys.argv
    repeat = 2 if quick else 5
    n = 300 if quick else 2000
    print("rounds/s on each loop (higher is better)")
    for calls in (3, 64):
        rounds = n if calls == 3 else n // 10
        r = measure(rounds, calls, repeat)
        print(
            f"  {calls:>2}-call rounds: looptime {r['looptime']:>9,.0f}   ours {r['ours']:>9,.0f}   "
            f"floor {r['floor']:>9,.0f}   ours/looptime {r['ours'] / r['looptime']:5.1f}x (target >= 10x)   "
            f"floor/ours time ratio {r['floor'] / r['ours']:4.2f}x (target <= 2x)"
        )

    trace = ten_round_trace()
    times = []
    for _ in range(repeat * 3):
        t0 = time.perf_counter()
        result = replay(trace, "parallel")
        times.append(time.perf_counter() - t0)
    best = min(times)
    print(
        f"\nfull replay (loop + modes + replay model), parallel mode: 10 rounds x 3 calls, "
        f"{result.wall_time_s:.1f} s of recorded time replayed in {best * 1e3:.1f} ms "
        f"({len(result.rounds) / best:,.0f} rounds/s)"
    )

    short = ten_round_trace()
    from dataclasses import replace

    short = replace(short, rounds=short.rounds[:3] + short.rounds[-1:])
    virtual = replay(short, "parallel", check="off", max_rounds=3).wall_time_s
    reals = []
    for _ in range(1 if quick else 3):
        reals.append(replay(short, "parallel", virtual=False, check="off", max_rounds=3).wall_time_s)
    real = statistics.median(reals)
    print(
        f"real clock vs virtual on a {virtual:.2f} s trace: real {real:.4f} s, virtual {virtual:.4f} s, "
        f"difference {(real - virtual) * 1e3:.1f} ms ({(real / virtual - 1) * 100:.2f}%)"
    )


if __name__ == "__main__":
    main()

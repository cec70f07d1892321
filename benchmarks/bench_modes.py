"""Scheduling overhead of each execution mode on no-op tools, against bare asyncio.gather (issue: loop).

Baseline ("gather"): `asyncio.gather` over the same no-op tool coroutines, nothing else. Each mode
runs the same calls through `execute_batch` (argument parsing, screening, de-duplication, timing,
events, results in model order); fresh `ToolCall`s are built outside the timed region. Prints time per call and the ratio to gather; target <= 1.5x.
Run: `python benchmarks/bench_modes.py [--quick]`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from toolcall_lab._execution import Executor, Hooks
from toolcall_lab.messages import ToolCall
from toolcall_lab.modes import BatchState, execute_batch
from toolcall_lab.tools import ToolRegistry


async def noop(i: int) -> str:
    return "ok"


def calls_for(n: int) -> list[ToolCall]:
    return [
        ToolCall(tool_call_id=f"call_{i}", name="noop", arguments=json.dumps({"i": i}), index=i)
        for i in range(n)
    ]


async def gather_only(n: int) -> None:
    await asyncio.gather(*(noop(i) for i in range(n)))


async def with_mode(mode: str, calls: list[ToolCall], registry: ToolRegistry, events: list) -> None:
    executor = Executor(registry, Hooks(), 0.0, dedupe=True)
    state = BatchState(calls=calls)
    await execute_batch(mode, executor, state, emit=events.append, round_index=0, assistant_message={})  # type: ignore[arg-type]


def best(loop: asyncio.AbstractEventLoop, make, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        coro = make()  # built outside the timed region (the calls come fresh from a parser)
        t0 = time.perf_counter()
        loop.run_until_complete(coro)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    quick = "--quick" in sys.argv
    registry = ToolRegistry([noop])
    loop = asyncio.new_event_loop()
    print(
        f"{'calls':>5} {'gather us/call':>15} | "
        + " | ".join(f"{m:>22}" for m in ("sequential", "parallel", "serialized", "first_only"))
    )
    for n in (1, 8, 64, 512):
        repeat = 20 if quick else (200 if n < 64 else 40)
        base = best(loop, lambda n=n: gather_only(n), repeat)
        cells = []
        for mode in ("sequential", "parallel", "serialized", "first_only"):
            t = best(loop, lambda mode=mode, n=n: with_mode(mode, calls_for(n), registry, []), repeat)
            cells.append(f"{t / n * 1e6:>8.1f} us {t / base:>6.1f}x gather")
        print(f"{n:>5} {base / n * 1e6:>15.2f} | " + " | ".join(cells))
    loop.close()
    print("\nratio = mode time / bare gather time for the same no-op coroutines (target <= 1.5x)")


if __name__ == "__main__":
    main()

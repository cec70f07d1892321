"""Scheduling overhead of each built-in strategy on no-op tools, against bare asyncio.gather (issues 11, 14).

Baseline ("gather"): `asyncio.gather` over the same no-op tool coroutines, nothing else. Each strategy
runs the same calls through its `Batch` with everything a real batch gets: screening (arguments,
unknown tools, within-batch de-duplication), per-call timing on the run's clock, the harness's
exception handling (timeouts, tool exceptions, cancellation, hooks), ACTION/OBSERVATION events, and
results kept by position, in model order. That is the figure the target (<= 1.5x at 8, 64 and 512
calls) is about, measured as the issue measured it. A second figure ("+record") adds what the loop
does with a finished batch (`_Run.close_round`'s work: the executions, one tool message per call,
the cross-round history), to show the whole per-call cost of a round.

``eager`` runs as in a streamed round: the strategy starts first, each call arrives through the
batch's arrival path (`Batch._arrive`, as the stream hands them over), then the stream ends. The
stream's own cost (chunks, parsing) is the same for every strategy and is not counted; nor is the
completeness scan, which only ``eager`` runs (about one pass over each argument string: see
`bench_parse.py` for the parser's cost). The issue's target is eager within 1.5x of parallel.

Two arrival patterns. "burst": every call arrives before the strategy's task first runs (the
cheapest case for eager: one wake-up). "interleaved" (`--interleaved` table, printed too): one
event-loop iteration (``await asyncio.sleep(0)``) between arrivals, as a real stream's chunks are
spread over the loop; the same iterations precede parallel's batch and gather's, so the ratios
compare scheduling, not the waiting. There eager's per-call wake-up is what it costs.

The calls are built outside the timed region by the real parser (`ChatCompletionAccumulator` over a
streamed response), exactly as the loop receives them: the parser reads each call's arguments once,
and that cost belongs to parsing (see `bench_parse.py`), not to scheduling. The executor is the
run's (the loop makes one per run, before the first model call), so it is made outside the timed
region too. Results are checked after the timed region.

Prints time per call and the ratio to gather (best of several repeats; the machine is shared, so
read ratios measured in the same run, not absolute times).
Run: `python benchmarks/bench_modes.py [--quick]`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from toolcall_lab._execution import Executor, Hooks
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator
from toolcall_lab.messages import ToolCall
from toolcall_lab.models import response_chunks
from toolcall_lab.strategies import Batch, resolve
from toolcall_lab.tools import ToolRegistry

MODES = ("sequential", "parallel", "serialized", "first_only", "eager")


async def noop(i: int) -> str:
    return "ok"


def calls_for(n: int) -> list[ToolCall]:
    """n calls of `noop`, parsed from a streamed response by the real accumulator."""
    chunks = response_chunks(
        content=None,
        calls=[(f"call_{i}", "noop", json.dumps({"i": i})) for i in range(n)],
        finish_reason="tool_calls",
    )
    acc = ChatCompletionAccumulator(batch=0)
    for chunk in chunks:
        acc.feed(chunk)
    calls = list(acc.finish().first.tool_calls)
    assert len(calls) == n and all(c.args == {"i": i} for i, c in enumerate(calls))
    return calls


async def gather_only(n: int) -> None:
    await asyncio.gather(*(noop(i) for i in range(n)))


def batch_for(n: int) -> tuple[list[ToolCall], dict[str, Any]]:
    """The calls and the assistant message carrying them, as the loop has them after parsing."""
    calls = calls_for(n)
    return calls, {"role": "assistant", "content": None, "tool_calls": [c.to_openai() for c in calls]}


async def gather_interleaved(n: int) -> None:
    for _ in range(n):  # the stream's pacing: one loop iteration per arriving call
        await asyncio.sleep(0)
    await asyncio.gather(*(noop(i) for i in range(n)))


async def with_mode(
    mode: str,
    batch: tuple[list[ToolCall], dict[str, Any]],
    executor: Executor,
    record: bool = False,
    interleaved: bool = False,
) -> tuple[Batch, list[Any]]:
    calls, assistant = batch
    events: list[Any] = []
    strategy = resolve(mode)
    if strategy.streams:  # as in a streamed round: the strategy first, then the calls arrive
        state = Batch(executor, emit=events.append, strategy=strategy.name, streaming=True)
        task = asyncio.get_running_loop().create_task(strategy.run(state))
        for pos, call in enumerate(calls):
            state._arrive(pos, call)
            if interleaved:
                await asyncio.sleep(0)
        state._end_stream(calls, assistant, "recorded")
        await task
    else:
        if interleaved:
            for _ in calls:  # the same pacing before the batch
                await asyncio.sleep(0)
        state = Batch(
            executor, calls, emit=events.append, strategy=strategy.name, assistant_message=assistant
        )
        await strategy.run(state)
    if record:  # the round's record, as `_Run.close_round` builds it
        executions = state._close()
        state._tool_messages = state._tool_messages or [e.to_message() for e in executions if e.answered]
        executor.remember(executions, calls, 0)
    executor.close()
    return state, events


def checked(mode: str, n: int, result: tuple[Batch, list[Any]]) -> None:
    state, events = result
    ran = state._done[:1] if mode == "first_only" else state._done
    assert all(e is not None and e.status == "ok" and e.result == "ok" for e in ran), state._done
    assert len(events) == (2 if mode == "first_only" else 2 * n)


REGISTRY = ToolRegistry([noop])


def executor(loop: asyncio.AbstractEventLoop) -> Executor:
    """A fresh executor for one timed batch (as the loop makes one per run), made on `loop`."""

    async def make() -> Executor:
        return Executor(REGISTRY, Hooks(), loop.time())

    return loop.run_until_complete(make())


async def timed(
    mode: str,
    n: int,
    batch: tuple[list[ToolCall], dict[str, Any]],
    record: bool,
    executor: Executor,
    interleaved: bool = False,
) -> tuple[str, int, Any]:
    return mode, n, await with_mode(mode, batch, executor, record, interleaved)


def best(loop: asyncio.AbstractEventLoop, make: Callable[[], Coroutine[Any, Any, Any]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        coro = make()  # built outside the timed region (the calls come fresh from the parser)
        t0 = time.perf_counter()
        out = loop.run_until_complete(coro)
        times.append(time.perf_counter() - t0)
        if out is not None:
            checked(*out)
    return min(times)


def main() -> None:
    quick = "--quick" in sys.argv
    loop = asyncio.new_event_loop()
    print(f"{'calls':>5} {'gather us/call':>15} | " + " | ".join(f"{m:>28}" for m in MODES))
    worst: dict[str, float] = {}
    eager_vs_parallel = 0.0
    for n in (1, 8, 64, 512):
        repeat = 20 if quick else (200 if n < 64 else 40)
        base = best(loop, lambda n=n: gather_only(n), repeat)
        cells = []
        measured: dict[str, float] = {}
        for mode in MODES:
            batch = batch_for(n)
            t = best(loop, lambda mode=mode, n=n, b=batch: timed(mode, n, b, False, executor(loop)), repeat)
            full = best(loop, lambda mode=mode, n=n, b=batch: timed(mode, n, b, True, executor(loop)), repeat)
            measured[mode] = t
            if n >= 8:
                worst[mode] = max(worst.get(mode, 0.0), t / base)
            cells.append(f"{t / n * 1e6:>6.1f} us {t / base:>5.2f}x +record {full / base:>5.2f}x")
        print(f"{n:>5} {base / n * 1e6:>15.2f} | " + " | ".join(cells))
        if n >= 8:
            eager_vs_parallel = max(eager_vs_parallel, measured["eager"] / measured["parallel"])
    loop.close()
    print(
        "\nratio = mode time / bare gather time for the same no-op coroutines; target <= 1.5x at 8-512 calls"
    )
    print("worst ratio at 8-512 calls: " + ", ".join(f"{m} {r:.2f}x" for m, r in worst.items()))
    print(f"eager / parallel, worst at 8-512 calls: {eager_vs_parallel:.2f}x (target <= 1.5x)")
    print(f"eager / gather, worst at 8-512 calls: {worst['eager']:.2f}x")
    interleaved(quick)


def interleaved(quick: bool) -> None:
    """Arrivals spread over the event loop (one iteration each), for gather, parallel and eager."""
    loop = asyncio.new_event_loop()
    print("\ninterleaved arrivals (one loop iteration between calls, before the batch for gather/parallel):")
    print(f"{'calls':>5} {'gather us/call':>15} {'parallel':>18} {'eager':>18} {'eager/parallel':>15}")
    worst_p = worst_g = 0.0
    for n in (8, 64, 512):
        repeat = 20 if quick else (200 if n < 64 else 40)
        base = best(loop, lambda n=n: gather_interleaved(n), repeat)
        t: dict[str, float] = {}
        for mode in ("parallel", "eager"):
            batch = batch_for(n)
            t[mode] = best(
                loop, lambda mode=mode, n=n, b=batch: timed(mode, n, b, False, executor(loop), True), repeat
            )
        worst_p = max(worst_p, t["eager"] / t["parallel"])
        worst_g = max(worst_g, t["eager"] / base)
        print(
            f"{n:>5} {base / n * 1e6:>15.2f} {t['parallel'] / n * 1e6:>8.1f} us {t['parallel'] / base:>5.2f}x "
            f"{t['eager'] / n * 1e6:>8.1f} us {t['eager'] / base:>5.2f}x {t['eager'] / t['parallel']:>14.2f}x"
        )
    loop.close()
    print(
        f"interleaved, worst at 8-512 calls: eager / parallel {worst_p:.2f}x, eager / gather {worst_g:.2f}x"
    )


if __name__ == "__main__":
    main()

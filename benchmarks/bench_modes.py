"""Scheduling overhead of each built-in strategy on no-op tools, against bare asyncio.gather (issues 11, 14).

**Which path each figure covers.** The first table (the one the target, <= 1.5x at 8, 64 and 512
calls, is about) times the harness's fastest path only: ``async`` no-op tools *without*
``Tool.timeout_s``, no hooks, no run deadline, no sync tools (the executor awaits such a tool
directly: `Tool.plain`). Issue 14 asks every built-in strategy, eager included, within 1.5x of
gather, and eager within 1.5x of parallel: both are printed against their targets. The last table ("per-call timeout") times the path
most users meet first, the README's first example: the same no-op tools *with* ``Tool.timeout_s``,
under ``parallel``, against a like-for-like gather that wraps each call in ``asyncio.timeout`` (the
limit's own cost is asyncio's, paid by both sides), and against bare gather too (what the limit
costs a user in all). Hooks, a run deadline and sync tools (a worker thread per call) are not timed.

Baseline ("gather"): bare `asyncio.gather` over the same no-op tool coroutines, nothing else. Each
strategy runs the same calls through its `Batch` with everything a real batch gets: screening
(arguments, unknown tools, within-batch de-duplication), per-call timing on the run's clock, the
harness's exception handling (timeouts, tool exceptions, cancellation, hooks), ACTION/OBSERVATION
events, and results kept by position, in model order. That is the figure the target (<= 1.5x at 8,
64 and 512 calls) is about. A second figure ("+record", not the target) adds what the loop does with
a finished batch (`_Run.close_round`'s work: the executions, one tool message per call, the
cross-round history), to show the whole per-call cost of a round.

``eager`` runs as in a streamed round (`_Run.receive_dispatching`): the batch is made and set to
dispatch arrivals (`Batch._dispatch_arrivals`), as the loop does when it sends the request; each call
arrives through the batch's arrival path (`Batch._arrive`, as the stream hands them over), the
stream ends (`Batch._end_stream`), and the strategy (`Eager.run`, in the same task, as the loop calls
it once the stream has ended) dispatches what is still waiting and joins the batch. All of it is
timed, the batch's making too: a run makes it before any call exists, but it is work the loop does
every round, as it makes every other mode's batch (timed with theirs). (Until a tester's check on
2026-11-28 it was made outside the timed region: 0.03-0.05x less at 8 calls.) The stream's own cost (chunks, parsing) is the
same for every strategy and is not counted; nor is the completeness scan, which only ``eager`` runs
(about one pass over each argument string: see `bench_parse.py` for the parser's cost). The issue's
target is eager within 1.5x of parallel, and within 1.5x of gather like every built-in strategy.

Two arrival patterns. "burst" (the first table): every call arrives at once and the stream ends in
the same step of the event loop, as when a response's chunks come in one read: since the 2026-11-28
(second) pass `run` receives the stream in the run's own task under every strategy, eager included,
so it sees the stream's end at once, and no mode and no gather gets a loop iteration before its
batch. "interleaved" (printed too): one loop iteration (``await asyncio.sleep(0)``) after each
arrival, as a real stream's chunks are spread over the loop; there eager dispatches each call at the
loop's next step after it arrives, and every mode, and gather, gets the same iterations before its
batch, so the ratios compare scheduling, not the waiting.

Until that pass eager ran its strategy in a task of its own, alongside a task receiving the stream;
the run learned of the stream's end one loop iteration late, so the first table gave every mode and
gather that iteration, and printed eager against bare gather separately (1.69x at 8 calls then).

The calls are built outside the timed region by the real parser (`ChatCompletionAccumulator` over a
streamed response), exactly as the loop receives them, fresh for every timed run: the parser reads
each call's arguments once, and that cost belongs to parsing (see `bench_parse.py`), not to
scheduling; what the batch then does with the parsed arguments is timed. The executor is the
run's (the loop makes one per run, before the first model call), so it is made outside the timed
region too. Results are checked after the timed region.

How it measures (changed in the runloop pass, so that the ratio is the one the target names):

- the time is taken *inside* the running event loop, around the awaited batch (or gather): before,
  each sample timed ``loop.run_until_complete``, whose own cost (a task for the coroutine, starting
  and stopping the loop: about 8-10 us here) is neither gather's nor a strategy's and was added to
  both, diluting the ratio towards 1 (most at 8 calls, where it was a fifth of gather's time);
- gather and every mode are sampled in turn within each round (rotating the order), instead of all
  of gather's repeats, then all of one mode's, then the next: on a shared machine the load changes
  over seconds, and interleaving puts every mode under the same load;
- each is warmed up first (`WARMUP` untimed runs: Python 3.11 specialises bytecode after a few runs);
- every timed run gets fresh calls from the parser: before, one batch of calls per size served every
  repeat, so from the second run on the calls carried what the first run had cached on them (their
  arguments already converted by the screening), which a real run never has;
- the young generations are collected before each sample (``gc.collect(1)``, outside the timed
  region), so each starts with no young objects pending: a collection inside a sample is then one
  its own allocations caused (which it pays, as in a run), not one the samples before it left due;
  otherwise the moment the collector fires depends on what ran before, and one mode can keep
  landing on it (gather's 64-call figure moved by 30 % with the other modes' allocations). Only the
  young generations: a full collection walks the whole heap and leaves the caches cold, which
  slowed the small samples most. (Until the 2026-11-28 second pass that collection came before the
  sample's set-up, whose parsing then left young objects due: a mode that allocated a little more in
  its timed region could tip a collection into it. The same tester check that had eager's batch
  timed found it: eager at 8 calls read 1.58x then, 1.4x once the collection came after the set-up.)
- the calls reach each mode as the loop hands them over: the parser's tuple (`Choice.tool_calls`,
  which the loop passes on as it is; until the 2026-11-28 fourth pass a list, which every mode copied
  into a tuple), and for eager through the batch's bound arrival method, held once (the parser holds
  it so: `ModelStream`), after a set-up done synchronously as the loop does it (until that pass it
  was awaited as a coroutine of its own, and the arrival method was looked up on each call: about
  0.5 us a batch that no run pays);
- the figure is the best of the repeats (noise on a shared machine only ever adds time).

Prints time per call and the ratio to gather (best of several repeats; the machine is shared, so
read ratios measured in the same run, not absolute times). The first line says which toolcall_lab was
imported (an A/B runs this same script with PYTHONPATH pointing at the other code).
Run: `python benchmarks/bench_modes.py [--quick]`.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import toolcall_lab
from toolcall_lab._execution import Executor, Hooks
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator
from toolcall_lab.messages import ToolCall
from toolcall_lab.models import response_chunks
from toolcall_lab.strategies import Batch, resolve
from toolcall_lab.tools import Tool, ToolRegistry

MODES = ("sequential", "parallel", "serialized", "first_only", "eager")


async def noop(i: int) -> str:
    return "ok"


_CHUNKS: dict[int, list[dict[str, Any]]] = {}


def calls_for(n: int) -> tuple[ToolCall, ...]:
    """n calls of `noop`, parsed from a streamed response by the real accumulator: fresh calls, as
    the loop gets them from the parser (the arguments parsed once, not yet read by anything else),
    in the tuple the parser hands over (`Choice.tool_calls`, which the loop passes on as it is)."""
    chunks = _CHUNKS.get(n)
    if chunks is None:
        chunks = _CHUNKS[n] = response_chunks(
            content=None,
            calls=[(f"call_{i}", "noop", json.dumps({"i": i})) for i in range(n)],
            finish_reason="tool_calls",
        )
    acc = ChatCompletionAccumulator(batch=0)
    for chunk in chunks:
        acc.feed(chunk)
    calls = acc.finish().first.tool_calls
    assert len(calls) == n and all(c.arguments == json.dumps({"i": i}) for i, c in enumerate(calls))
    return calls


async def gather_only(n: int) -> None:
    await asyncio.gather(*(noop(i) for i in range(n)))


def batch_for(n: int) -> tuple[tuple[ToolCall, ...], dict[str, Any]]:
    """The calls and the assistant message carrying them, as the loop has them after parsing."""
    calls = calls_for(n)
    return calls, {"role": "assistant", "content": None, "tool_calls": [c.to_openai() for c in calls]}


async def gather_interleaved(n: int) -> None:
    for _ in range(n):  # the stream's pacing: one loop iteration per arriving call
        await asyncio.sleep(0)
    await asyncio.gather(*(noop(i) for i in range(n)))


Ready = tuple[Batch, list[Any]]
"""A streaming strategy's batch, set to dispatch arrivals, and its events list."""


def ready_for(strategy: Any, executor: Executor) -> Ready:
    """What the loop does for built-in eager when it sends the request (`_Run.receive_dispatching`):
    the batch is made and set to dispatch the calls as they arrive (synchronously, as the loop does)."""
    events: list[Any] = []
    state = Batch(executor, emit=events.append, strategy=strategy.name, streaming=True)
    state._dispatch_arrivals(_never)
    return state, events


def _never(exc: BaseException) -> None:
    raise AssertionError(f"a call failed: {exc!r}")


Pacing = str
"""How the calls reach the loop: ``"burst"`` (all at once, the stream's end in the same step),
``"interleaved"`` (one loop iteration after each call, and the same iterations before the batch of
a mode that does not stream)."""


async def with_mode(
    mode: str,
    batch: tuple[tuple[ToolCall, ...], dict[str, Any]],
    executor: Executor,
    record: bool = False,
    pacing: Pacing = "burst",
    ready: Ready | None = None,
) -> tuple[Batch, list[Any]]:
    """One batch under `mode`. A strategy that streams gets its batch set to dispatch arrivals
    (`ready_for`, unless `ready` is given), then the calls arrive, the stream ends and the strategy
    runs. Every mode gets the same loop iterations (`Pacing`)."""
    calls, assistant = batch
    strategy = resolve(mode)
    if strategy.streams:  # as in a streamed round: the calls arrive, the stream ends, the strategy runs
        if ready is None:
            ready = ready_for(strategy, executor)
        state, events = ready
        arrive = state._arrive  # (the parser holds the bound method: `ModelStream`)
        if pacing == "interleaved":
            for pos, call in enumerate(calls):
                arrive(pos, call)
                await asyncio.sleep(0)
        else:
            for pos, call in enumerate(calls):
                arrive(pos, call)
        state._end_stream(calls, assistant, "recorded")
        await strategy.run(state)
    else:
        events = []
        for _ in calls if pacing == "interleaved" else ():
            await asyncio.sleep(0)  # the same pacing before the batch
        state = Batch(
            executor, calls, emit=events.append, strategy=strategy.name, assistant_message=assistant
        )
        await strategy.run(state)
    if record:  # the round's record, as `_Run.close_round` builds it
        executions = state._close()
        state._tool_messages = state._tool_messages or [e.to_message() for e in executions if e.answered]
        executor.remember(executions, calls, 0)
    return state, events


def checked(mode: str, n: int, result: tuple[Batch, list[Any]]) -> None:
    state, events = result
    ran = state._done[:1] if mode == "first_only" else state._done
    assert all(e is not None and e.status == "ok" and e.result == "ok" for e in ran), state._done
    assert len(events) == (2 if mode == "first_only" else 2 * n)


REGISTRY = ToolRegistry([noop])
LIMITED = ToolRegistry([Tool(name="noop", function=noop, timeout_s=5.0)])
"""The same tool under a per-call limit (`Tool.timeout_s`), as in the README's first example."""


async def gather_limited(n: int) -> None:
    """gather over the same calls, each wrapped in ``asyncio.timeout`` (like for like with a limit)."""

    async def one(i: int) -> str:
        async with asyncio.timeout(5.0):
            return await noop(i)

    await asyncio.gather(*(one(i) for i in range(n)))


def executor(loop: asyncio.AbstractEventLoop) -> Executor:
    """A fresh executor for one timed batch (as the loop makes one per run), made on `loop`."""

    async def make() -> Executor:
        return Executor(REGISTRY, Hooks(), loop.time())

    return loop.run_until_complete(make())


Work = Coroutine[Any, Any, Any]
"""What a maker returns: the coroutine to time."""


async def _inside(make: Callable[[], Work]) -> tuple[float, Any]:
    """Time the awaited work from inside the running loop (see the module docstring); the young
    generations are collected after its set-up, just before the clock starts."""
    work = make()  # built outside the timed region (the calls come fresh from the parser)
    gc.collect(1)  # (after the parser's allocations: the sample starts with no young objects due)
    t0 = time.perf_counter()
    out = await work
    return time.perf_counter() - t0, out


def sample(loop: asyncio.AbstractEventLoop, make: Callable[[], Work]) -> float:
    """One timed run of `make()`'s coroutine on `loop`, its result checked afterwards."""
    elapsed, out = loop.run_until_complete(_inside(make))
    if out is not None:
        checked(*out)
    return elapsed


def measure(
    loop: asyncio.AbstractEventLoop, makers: dict[str, Callable[[], Work]], repeat: int
) -> dict[str, float]:
    """Best time of each maker over `repeat` rounds, the makers interleaved in every round (in a
    rotating order), after a warm-up, so a change of load on the machine touches them all alike."""
    names = list(makers)
    for _ in range(WARMUP):
        for name in names:
            sample(loop, makers[name])
    best = dict.fromkeys(names, float("inf"))
    for k in range(repeat):
        for name in names[k % len(names) :] + names[: k % len(names)]:
            best[name] = min(best[name], sample(loop, makers[name]))
    return best


def _timed(
    loop: asyncio.AbstractEventLoop,
    mode: str,
    n: int,
    record: bool = False,
    pacing: Pacing = "burst",
    registry: ToolRegistry = REGISTRY,
) -> Callable[[], Work]:
    """A maker: fresh calls from the parser and a fresh executor (made outside the timed region, as
    the loop makes one per run), then the mode's batch on them."""

    def make() -> Work:  # (called inside the running loop, before the clock starts)
        batch = batch_for(n)
        ex = Executor(registry, Hooks(), loop.time())

        async def one(ready: Ready | None = None) -> tuple[str, int, Any]:
            return mode, n, await with_mode(mode, batch, ex, record, pacing, ready)

        return one()

    return make


WARMUP = 20
"""Untimed runs of each maker first: Python 3.11 specialises bytecode after a few runs, and the first
runs pay one-off costs (imports, caches)."""


def main() -> None:
    quick = "--quick" in sys.argv
    loop = asyncio.new_event_loop()
    print(f"toolcall_lab from {Path(toolcall_lab.__file__).parent}")
    print(f"{'calls':>5} {'gather us/call':>15} | " + " | ".join(f"{m:>28}" for m in MODES))
    worst: dict[str, float] = {}
    eager_vs_parallel = 0.0
    for n in (1, 8, 64, 512):
        repeat = 20 if quick else (200 if n < 64 else 40)
        makers: dict[str, Callable[[], Work]] = {"gather": lambda n=n: gather_only(n)}
        for mode in MODES:
            makers[mode] = _timed(loop, mode, n)
            makers[f"{mode}+record"] = _timed(loop, mode, n, record=True)
        t = measure(loop, makers, repeat)
        base = t["gather"]
        cells = []
        for mode in MODES:
            if n >= 8:
                worst[mode] = max(worst.get(mode, 0.0), t[mode] / base)
            cells.append(
                f"{t[mode] / n * 1e6:>6.1f} us {t[mode] / base:>5.2f}x +record {t[f'{mode}+record'] / base:>5.2f}x"
            )
        print(f"{n:>5} {base / n * 1e6:>15.2f} | " + " | ".join(cells))
        if n >= 8:
            eager_vs_parallel = max(eager_vs_parallel, t["eager"] / t["parallel"])
    loop.close()
    print(
        "\nratio = mode time / bare asyncio.gather's time for the same no-op coroutines (async tools "
        "without Tool.timeout_s, no hooks, no deadline: the fastest path), every call arriving at once "
        "and the stream ending in the same loop step; target <= 1.5x at 8-512 calls, eager included "
        "(issue 14)"
    )
    print(
        "worst ratio at 8-512 calls: "
        + ", ".join(f"{m} {r:.2f}x ({'met' if r <= 1.5 else 'MISSED'})" for m, r in worst.items())
    )
    print(
        f"eager / parallel, worst at 8-512 calls: {eager_vs_parallel:.2f}x "
        f"(target <= 1.5x: {'met' if eager_vs_parallel <= 1.5 else 'MISSED'}; scheduling only: "
        "the stream's chunks, the parser and eager's completeness tracking are not counted)"
    )
    interleaved(quick)
    per_call_timeout(quick)


def eager_table(
    quick: bool, pacing: Pacing, gather: Callable[[int], Coroutine[Any, Any, None]]
) -> tuple[float, float]:
    """gather, parallel and eager at 8-512 calls under `pacing`, one row each; the worst eager /
    parallel and eager / gather."""
    loop = asyncio.new_event_loop()
    print(f"{'calls':>5} {'gather us/call':>15} {'parallel':>18} {'eager':>18} {'eager/parallel':>15}")
    worst_p = worst_g = 0.0
    for n in (8, 64, 512):
        repeat = 20 if quick else (200 if n < 64 else 40)
        makers: dict[str, Callable[[], Work]] = {"gather": lambda n=n: gather(n)}
        for mode in ("parallel", "eager"):
            makers[mode] = _timed(loop, mode, n, pacing=pacing)
        t = measure(loop, makers, repeat)
        base = t["gather"]
        worst_p = max(worst_p, t["eager"] / t["parallel"])
        worst_g = max(worst_g, t["eager"] / base)
        print(
            f"{n:>5} {base / n * 1e6:>15.2f} {t['parallel'] / n * 1e6:>8.1f} us {t['parallel'] / base:>5.2f}x "
            f"{t['eager'] / n * 1e6:>8.1f} us {t['eager'] / base:>5.2f}x {t['eager'] / t['parallel']:>14.2f}x"
        )
    loop.close()
    return worst_p, worst_g


def interleaved(quick: bool) -> None:
    """Arrivals spread over the event loop (one iteration each), for gather, parallel and eager."""
    print("\ninterleaved arrivals (one loop iteration between calls, before the batch for gather/parallel):")
    worst_p, worst_g = eager_table(quick, "interleaved", gather_interleaved)
    print(
        f"interleaved, worst at 8-512 calls: eager / parallel {worst_p:.2f}x "
        f"({'met' if worst_p <= 1.5 else 'MISSED'}), eager / gather {worst_g:.2f}x "
        f"({'met' if worst_g <= 1.5 else 'MISSED'}; targets <= 1.5x)"
    )


def per_call_timeout(quick: bool) -> None:
    """`parallel` over the same no-op tools with ``Tool.timeout_s`` (the README's first example),
    against gather wrapping each call in ``asyncio.timeout`` (like for like: the target) and against
    bare gather (what the limit costs in all)."""
    loop = asyncio.new_event_loop()
    print(
        "\nper-call timeout (Tool.timeout_s=5 on every call, parallel; gather+timeout wraps each call in "
        "asyncio.timeout, the same limit):"
    )
    print(
        f"{'calls':>5} {'gather us/call':>15} {'gather+timeout':>18} {'parallel+timeout':>18} "
        f"{'/ gather+timeout':>17} {'/ bare gather':>14}"
    )
    worst = 0.0
    for n in (8, 64, 512):
        repeat = 20 if quick else (200 if n < 64 else 40)
        makers: dict[str, Callable[[], Work]] = {
            "gather": lambda n=n: gather_only(n),
            "gather+timeout": lambda n=n: gather_limited(n),
            "parallel+timeout": _timed(loop, "parallel", n, registry=LIMITED),
        }
        t = measure(loop, makers, repeat)
        ratio = t["parallel+timeout"] / t["gather+timeout"]
        worst = max(worst, ratio)
        print(
            f"{n:>5} {t['gather'] / n * 1e6:>15.2f} {t['gather+timeout'] / n * 1e6:>15.2f} us "
            f"{t['parallel+timeout'] / n * 1e6:>15.2f} us {ratio:>16.2f}x "
            f"{t['parallel+timeout'] / t['gather']:>13.2f}x"
        )
    loop.close()
    print(
        f"per-call timeout, worst at 8-512 calls: parallel / gather+timeout {worst:.2f}x "
        f"(target <= 1.5x: {'met' if worst <= 1.5 else 'MISSED'})"
    )


if __name__ == "__main__":
    main()

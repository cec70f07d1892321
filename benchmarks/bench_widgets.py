"""Building the notebook views: TraceView of the largest real trace any importer reads today and of
long synthetic sessions, CompareView of four modes. Target: under 0.3 s each.

Each figure comes with a ratio against a baseline measured in the same run (the machine is shared):
TraceView against writing the same trace as JSON (`trace_files.dumps`), CompareView against the four
replays it runs, and what is left once those replays are taken out (the view's own work). The
static copy a view prints when displayed is timed too. Run: `python benchmarks/bench_widgets.py`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolcall_lab.models import ScriptedResponse
from toolcall_lab.scenarios import Scenario, simulated
from toolcall_lab.trace import Trace

REALDATA = Path(__file__).resolve().parent.parent.parent / "shared" / "realdata"
TARGET_S = 0.3


def big_trace(rounds: int = 50, calls: int = 8) -> Trace:
    steps = [
        ScriptedResponse(
            content=f"round {r}",
            tool_calls=tuple((f"t{c}", {"r": r, "c": c}) for c in range(calls)),
            latency_s=0.6,
        )
        for r in range(rounds)
    ]
    steps.append(ScriptedResponse(content="done", latency_s=0.6))
    tools = tuple(simulated(f"t{c}", 0.05 + 0.04 * c) for c in range(calls))
    return Scenario(
        name="big",
        title=f"{rounds} rounds x {calls} calls",
        prompt="go",
        steps=tuple(steps),
        tools=tools,
        settings={"max_rounds": rounds + 1},
    ).record()


def largest_real_traces() -> list[tuple[str, Trace]]:
    """The imported real trace with the most rounds (then calls), over every file of
    ../shared/realdata that any importer reads (the views' file box: detection over
    `toolcall_lab.importers.KINDS`), and the largest of each kind."""
    if not (REALDATA / "PROVENANCE.md").is_file():
        return []
    from toolcall_lab.exceptions import ToolcallLabError
    from toolcall_lab.notebook.loading import open_source

    best: dict[str, Trace] = {}
    for p in sorted(REALDATA.rglob("*")):
        if not p.is_file() or p.name == "PROVENANCE.md":
            continue
        try:
            opened = open_source(p)
        except ToolcallLabError:
            continue  # answer files, a stream that ends in a provider error: nothing to view
        for t in opened.traces:
            if opened.kind not in best or (len(t.rounds), t.n_calls) > (
                len(best[opened.kind].rounds),
                best[opened.kind].n_calls,
            ):
                best[opened.kind] = t
    ranked = sorted(best.items(), key=lambda kv: (len(kv[1].rounds), kv[1].n_calls), reverse=True)
    for kind, t in ranked:
        print(
            f"  largest {kind:12s}: {len(t.rounds):3d} rounds, {t.n_calls:3d} calls  {t.metadata.title[:70]}"
        )
    return ranked


def best_of(fn: Callable[[], object], n: int = 5) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def compare_view_split(trace: Trace) -> tuple[float, float]:
    """One CompareView build: (total seconds, seconds inside its replays), timed in the same call
    (the replay function is wrapped while it runs), so the view's own work is not a difference of
    two noisy measurements taken at different moments."""
    import importlib

    replay_module = importlib.import_module(
        "toolcall_lab.replay"
    )  # the module (the package exports the function)
    from toolcall_lab.notebook.widgets import CompareView

    spent = [0.0]
    original = replay_module.replay

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0

    replay_module.replay = timed  # type: ignore[assignment]
    try:
        t0 = time.perf_counter()
        CompareView(trace)
        total = time.perf_counter() - t0
    finally:
        replay_module.replay = original
    return total, spent[0]


def main() -> None:
    from toolcall_lab.notebook.widgets import TraceView
    from toolcall_lab.trace_files import dumps

    cases = [
        ("synthetic 51 rounds x 8 calls", big_trace()),
        ("synthetic session, 171 rounds x 1 call", big_trace(170, 1)),
    ]
    real = largest_real_traces()
    if real:
        kind, trace = real[0]
        cases.insert(0, (f"largest real import ({kind}): {trace.metadata.title[:60]}", trace))
    else:
        print("(../shared/realdata absent: synthetic traces only)")
    print(f"target: each view built in under {TARGET_S * 1000:.0f} ms (medians of 5 interleaved runs)")
    for name, trace in cases:
        shape = f"{len(trace.rounds)} rounds, {trace.n_calls} calls"
        rows = []
        for _ in range(5):  # interleaved: noise from the shared machine hits every figure alike
            base = best_of(lambda t=trace: dumps(t), 1)
            view = best_of(lambda t=trace: TraceView(t), 1)
            built = TraceView(trace)
            static = best_of(built.static_html, 1)
            total, replays = compare_view_split(trace)
            rows.append((base, view, static, total, replays))
        base, view, static, total, replays = (statistics.median(col) for col in zip(*rows, strict=True))
        own = statistics.median(t - r for *_, t, r in rows)
        print(
            f"TraceView   {name} ({shape}): {view * 1e3:6.0f} ms = {view / base:5.1f}x writing it as JSON "
            f"({base * 1e3:.0f} ms) {'ok' if view < TARGET_S else 'OVER TARGET'}; static copy {static * 1e3:.0f} ms"
        )
        print(
            f"CompareView {name}, 4 modes: {total * 1e3:6.0f} ms, of which its 4 replays {replays * 1e3:.0f} ms "
            f"and the view's own work {own * 1e3:.0f} ms ({own / total:.0%}) "
            f"{'ok' if total < TARGET_S else 'OVER TARGET'}"
        )


if __name__ == "__main__":
    main()

"""Building the notebook views: TraceView of the largest real trace we can import today and of
long synthetic sessions, CompareView of four modes. Target: under 0.3 s each.

Each figure comes with a ratio against a baseline measured in the same run (the machine is shared):
TraceView against writing the same trace as JSON (`trace_files.dumps`), CompareView against the four
replays it runs. Run: `python benchmarks/bench_widgets.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

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


def largest_real_trace() -> Trace | None:
    """The imported real trace with the most rounds (Claude Code sessions when that importer exists)."""
    if not (REALDATA / "PROVENANCE.md").is_file():
        return None
    from toolcall_lab import importers

    found: list[Trace] = []
    for p in sorted(REALDATA.glob("*/claude-code_*.jsonl")):
        try:
            found += list(importers.import_claude_code(p))
        except Exception as exc:  # a benchmark input, not a test: say so and go on
            print(f"  (skipped {p.name}: {exc})")
    for p in sorted(REALDATA.glob("pydantic-ai/*.cassette.yaml")):
        try:
            found += list(importers.import_recording(p))
        except Exception as exc:
            print(f"  (skipped {p.name}: {exc})")
    found += importers.import_tau_bench(REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json")
    return max(found, key=lambda t: (len(t.rounds), t.n_calls), default=None)


def best_of(fn: Callable[[], object], n: int = 5) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    from toolcall_lab.notebook.widgets import CompareView, TraceView
    from toolcall_lab.records import MODES
    from toolcall_lab.replay import replay
    from toolcall_lab.trace_files import dumps

    cases = [
        ("synthetic 50 rounds x 8 calls", big_trace()),
        ("synthetic session, 170 rounds x 1 call", big_trace(170, 1)),
    ]
    real = largest_real_trace()
    if real is not None:
        cases.insert(0, (f"largest real import: {real.metadata.title}", real))
    else:
        print("(../shared/realdata absent: synthetic traces only)")
    print(f"target: each view built in under {TARGET_S * 1000:.0f} ms")
    for name, trace in cases:
        shape = f"{len(trace.rounds)} rounds, {trace.n_calls} calls"
        base = best_of(lambda t=trace: dumps(t))
        view = best_of(lambda t=trace: TraceView(t), 3)
        print(
            f"TraceView   {name} ({shape}): {view * 1e3:6.0f} ms = {view / base:5.1f}x writing it as JSON "
            f"({base * 1e3:.0f} ms) {'ok' if view < TARGET_S else 'OVER TARGET'}"
        )
        replays = best_of(lambda t=trace: [replay(t, m) for m in MODES], 3)
        compare = best_of(lambda t=trace: CompareView(t), 3)
        print(
            f"CompareView {name}, 4 modes: {compare * 1e3:6.0f} ms = {compare / replays:5.1f}x its 4 replays "
            f"({replays * 1e3:.0f} ms) {'ok' if compare < TARGET_S else 'OVER TARGET'}"
        )


if __name__ == "__main__":
    main()

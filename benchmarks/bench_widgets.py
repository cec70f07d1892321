"""Showing the notebook views: TraceView of the largest real trace any importer reads today and of
long synthetic sessions, CompareView of four modes. Target: under 0.3 s each, for what a user waits
for when the view is displayed: building it and the static copy it prints beside itself (the copy a
code host or an HTML export shows).

Each figure comes with a ratio against a baseline measured in the same run (the machine is shared):
TraceView against writing the same trace as JSON (`trace_files.dumps`), CompareView against the four
replays it runs, and what is left once those replays are taken out (the view's own work).
Run: `python benchmarks/bench_widgets.py`.
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


def displayed(view: Callable[[], Any]) -> tuple[float, float]:
    """A view as a user waits for it when a cell displays it: (seconds to build it, seconds to make
    the static copy it prints beside itself), timed back to back."""
    t0 = time.perf_counter()
    built = view()
    t1 = time.perf_counter()
    built._static_bundle()
    return t1 - t0, time.perf_counter() - t1


def compare_view_split(trace: Trace) -> tuple[float, float, float]:
    """One CompareView shown: (seconds to build it, seconds inside its replays, seconds for its static
    copy), timed in the same call (the replay function is wrapped while it runs), so the view's own
    work is not a difference of two noisy measurements taken at different moments."""
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
        build, static = displayed(lambda: CompareView(trace))
    finally:
        replay_module.replay = original
    return build, spent[0], static


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
    print(
        f"target: each view shown (built, and its static copy made) in under {TARGET_S * 1000:.0f} ms "
        "(medians of 5 interleaved runs)"
    )
    for name, trace in cases:
        shape = f"{len(trace.rounds)} rounds, {trace.n_calls} calls"
        rows = []
        for _ in range(5):  # interleaved: noise from the shared machine hits every figure alike
            base = best_of(lambda t=trace: dumps(t), 1)
            view, static = displayed(lambda t=trace: TraceView(t))
            build, replays, copy = compare_view_split(trace)
            rows.append((base, view, static, build, replays, copy))
        base, view, static, build, replays, copy = (statistics.median(col) for col in zip(*rows, strict=True))
        shown = statistics.median(v + s for _, v, s, *_ in rows)
        compare_shown = statistics.median(b + c for *_, b, _, c in rows)
        own = statistics.median(b - r for *_, b, r, _ in rows)
        print(
            f"TraceView   {name} ({shape}): shown in {shown * 1e3:6.0f} ms (built {view * 1e3:.0f} + static "
            f"copy {static * 1e3:.0f}) = {shown / base:5.1f}x writing it as JSON ({base * 1e3:.0f} ms) "
            f"{'ok' if shown < TARGET_S else 'OVER TARGET'}"
        )
        print(
            f"CompareView {name}, 4 modes: shown in {compare_shown * 1e3:6.0f} ms (built {build * 1e3:.0f} + "
            f"static copy {copy * 1e3:.0f}); its 4 replays {replays * 1e3:.0f} ms, the view's own work "
            f"{own * 1e3:.0f} ms ({own / build:.0%} of the build) "
            f"{'ok' if compare_shown < TARGET_S else 'OVER TARGET'}"
        )


if __name__ == "__main__":
    main()

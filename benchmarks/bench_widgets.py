"""Building the notebook views (issue: widgets): trace view of a 50-round x 8-call trace, and the
compare view for 4 modes. Target: under 0.5 s each. Run: `python benchmarks/bench_widgets.py`."""

from __future__ import annotations

import time

from toolcall_lab.models import ScriptedResponse
from toolcall_lab.scenarios import Scenario, simulated
from toolcall_lab.trace import Trace


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


def best_of(fn, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    from toolcall_lab.notebook.widgets import CompareView, TraceView

    trace = big_trace()
    t_view = best_of(lambda: TraceView(trace))
    t_compare = best_of(lambda: CompareView(trace), 3)
    print(f"TraceView, {len(trace.rounds)} rounds x 8 calls: {t_view * 1e3:.0f} ms (target < 500 ms)")
    print(
        f"CompareView, 4 modes of the same trace (4 virtual replays + render): {t_compare * 1e3:.0f} ms (target < 500 ms)"
    )


if __name__ == "__main__":
    main()

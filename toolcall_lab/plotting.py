"""Matplotlib views of mode comparisons; each returns the Figure and saves it on request.

Imported lazily (matplotlib is heavy); figures are built with ``matplotlib.figure.Figure`` rather
than pyplot, so nothing is drawn on global state and they show inline in Jupyter.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolcall_lab.analysis import DEFAULT_ROUND_TRIP_S, Comparison, run_rows
from toolcall_lab.records import MODES, Mode
from toolcall_lab.replay import replay
from toolcall_lab.trace import Trace

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

STATUS_COLOURS = {
    "ok": "#4c9a5b",
    "error": "#c8423b",
    "timeout": "#e08a2c",
    "unknown_tool": "#c8423b",
    "invalid_arguments": "#c8423b",
    "rejected": "#8a8a8a",
    "duplicate": "#b9b9b9",
    "cancelled": "#6d4c8f",
    "skipped": "#ffffff",
}
MODEL_COLOUR = "#3f6fb5"
TRIP_COLOUR = "#d9c25c"


def _save(fig: Figure, save: str | Path | None) -> Figure:
    if save is not None:
        fig.savefig(save, bbox_inches="tight", dpi=110)
    return fig


def lanes(calls: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Assign each call the lowest lane free at its start (overlapping calls stack)."""
    ends: list[float] = []
    out: dict[str, int] = {}
    for c in sorted(calls, key=lambda c: (c["start"], c["index"])):
        for lane, end in enumerate(ends):
            if end <= c["start"] + 1e-12:
                ends[lane] = c["end"]
                out[f"{c['round']}:{c['tool_call_id']}"] = lane
                break
        else:
            ends.append(c["end"])
            out[f"{c['round']}:{c['tool_call_id']}"] = len(ends) - 1
    return out


def draw_run(
    ax: Axes,
    rounds: Sequence[dict[str, Any]],
    calls: Sequence[dict[str, Any]],
    *,
    title: str,
    round_trip_s: float = 0.0,
    mode: str = "",
) -> None:
    """One run on one axis: model calls on the top lane, tool calls below, round trips hatched."""
    shown = [c for c in calls if c["status"] != "skipped"]
    lane = lanes(shown)
    for r in rounds:
        ax.barh(0, r["model_end"] - r["model_start"], left=r["model_start"], height=0.7, color=MODEL_COLOUR)
        if r["model_end"] - r["model_start"] > 0.15:
            ax.text(
                (r["model_start"] + r["model_end"]) / 2,
                0,
                f"model {r['model_end'] - r['model_start']:.2f}s",
                ha="center",
                va="center",
                fontsize=7,
                color="white",
            )
    for c in shown:
        y = 1 + lane[f"{c['round']}:{c['tool_call_id']}"]
        width = max(c["end"] - c["start"], 0.004)
        ax.barh(
            y,
            width,
            left=c["start"],
            height=0.7,
            color=STATUS_COLOURS.get(c["status"], "#999"),
            edgecolor="#333",
            linewidth=0.3,
        )
        if mode == "serialized" and round_trip_s:
            ax.barh(
                y,
                round_trip_s,
                left=c["start"] - round_trip_s,
                height=0.7,
                color=TRIP_COLOUR,
                hatch="///",
                edgecolor="#8a7a2a",
                linewidth=0.3,
            )
        if width > 0.12:
            ax.text(
                c["start"] + width / 2,
                y,
                f"{c['name'][:14]} {c['duration']:.2f}s",
                ha="center",
                va="center",
                fontsize=6.5,
            )
    skipped = [c for c in calls if c["status"] == "skipped"]
    n_lanes = 1 + (max(lane.values()) + 1 if lane else 0)
    ax.set_yticks(range(n_lanes), ["model"] + [f"tools {i + 1}" for i in range(n_lanes - 1)], fontsize=7)
    ax.invert_yaxis()
    note = f"  ({len(skipped)} call(s) skipped)" if skipped else ""
    ax.set_title(title + note, fontsize=9, loc="left")
    ax.grid(axis="x", alpha=0.3)


def gantt(
    trace: Trace,
    modes: Sequence[Mode] = MODES,
    *,
    round_trip_s: float = DEFAULT_ROUND_TRIP_S,
    concurrency: int | None = None,
    save: str | Path | None = None,
) -> Figure:
    """The trace replayed under each mode, one panel per mode on a shared time axis."""
    from matplotlib.figure import Figure

    runs = []
    for mode in modes:
        kwargs: dict[str, Any] = {"round_trip_s": round_trip_s} if mode == "serialized" else {}
        if concurrency is not None:
            kwargs["concurrency"] = concurrency
        result = replay(trace, mode, **kwargs)
        summary, rounds, calls = run_rows(trace.metadata.title, result, trace)
        runs.append((mode, summary, rounds, calls))
    heights = [1.2 + 0.28 * (1 + len({c["index"] for c in calls})) for _, _, _, calls in runs]
    fig = Figure(figsize=(10, sum(heights) + 0.6), layout="constrained")
    axes = fig.subplots(len(runs), 1, sharex=True, squeeze=False, height_ratios=heights)[:, 0]
    for ax, (mode, summary, rounds, calls) in zip(axes, runs, strict=True):
        draw_run(
            ax,
            rounds,
            calls,
            mode=mode,
            round_trip_s=round_trip_s,
            title=f"{mode}: {summary['wall_time_s']:.2f} s, {summary['upstream_calls']} model calls, "
            f"{summary['client_round_trips']} client round trips",
        )
    axes[-1].set_xlabel("seconds from the start of the run")
    fig.suptitle(trace.metadata.title, fontsize=10)
    return _save(fig, save)


def speedup_distribution(comparison: Comparison, *, save: str | Path | None = None) -> Figure:
    """Speedup against sequential over a corpus, one box per mode."""
    from matplotlib.figure import Figure

    runs = comparison.runs
    modes = [m for m in runs["mode"].unique() if m != "sequential"]
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.subplots()
    data = [runs.loc[runs["mode"] == m, "speedup_vs_sequential"].dropna() for m in modes]
    labels = [f"{m}\n(skips calls: not comparable)" if m == "first_only" else m for m in modes]
    ax.boxplot(data, tick_labels=labels, showfliers=True)
    ax.axhline(1.0, color="#888", linewidth=0.8, linestyle="--")
    ax.set_ylabel("speedup vs sequential (x)")
    ax.set_title(f"Speedup over {runs['trace'].nunique()} traces", fontsize=10)
    return _save(fig, save)


def time_breakdown(comparison: Comparison, *, save: str | Path | None = None) -> Figure:
    """Stacked total time per mode: model calls, tool phases, serialized client round trips."""
    from matplotlib.figure import Figure

    s = comparison.runs.groupby("mode", sort=False).agg(
        model=("model_time_s", "sum"), tools=("tool_phase_s", "sum"), trips=("round_trip_time_s", "sum")
    )
    trips = s["trips"]
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.subplots()
    ax.bar(s.index, s["model"], color=MODEL_COLOUR, label="model calls")
    ax.bar(s.index, s["tools"], bottom=s["model"], color=STATUS_COLOURS["ok"], label="tool phases")
    ax.bar(
        s.index,
        trips,
        bottom=s["model"] + s["tools"],
        color=TRIP_COLOUR,
        hatch="///",
        label="client round trips / other",
    )
    ax.set_ylabel("seconds (sum over traces)")
    ax.legend(fontsize=8)
    ax.set_title("Where the time goes", fontsize=10)
    return _save(fig, save)

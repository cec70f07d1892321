"""Matplotlib views of runs and mode comparisons; each shows itself in Jupyter and returns the Figure.

Imported lazily (matplotlib is heavy). Figures are built without pyplot, so nothing lands on global
state; to show inline in a fresh kernel whatever ran before (pyplot imported or not, any backend),
each function displays its figure itself when it runs in a Jupyter kernel, and the returned figure
does not display a second time in the same cell (it does when shown again in a later cell).
Timelines draw the same bars, lanes and labels as the notebook views' SVG timelines.
"""

from __future__ import annotations

import base64
import io
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure

from toolcall_lab.analysis import DEFAULT_ROUND_TRIP_S, Comparison
from toolcall_lab.notebook.theme import MODEL, PROVENANCE_NOTE, STATUS, TRIP, WAIT, status_style
from toolcall_lab.notebook.timeline import Axis, items_of, lane_names, place_label, round_end
from toolcall_lab.records import MODES
from toolcall_lab.replay import replay
from toolcall_lab.trace import Trace

if TYPE_CHECKING:
    from matplotlib.axes import Axes

STATUS_COLOURS = {name: s.fill for name, s in STATUS.items()}
MODEL_COLOUR = MODEL.fill
TRIP_COLOUR = TRIP.fill
DPI = 100


def _shell() -> Any:
    """The running IPython kernel's shell, or None (plain Python, the CLI, a terminal IPython)."""
    if "ipykernel" not in sys.modules:
        return None
    from IPython import get_ipython

    shell = get_ipython()
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


class LabFigure(Figure):
    """A Figure that displays as PNG in Jupyter itself (no pyplot, no backend needed), once per cell."""

    _tcl_shown_in: int | None = None

    def show_inline(self) -> None:
        shell = _shell()
        if shell is None:
            return
        from IPython.display import publish_display_data

        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
        publish_display_data(  # type: ignore[no-untyped-call]
            {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"), "text/plain": repr(self)}
        )
        self._tcl_shown_in = shell.execution_count

    def _ipython_display_(self) -> None:
        shell = _shell()
        if shell is not None and self._tcl_shown_in == shell.execution_count:
            return  # already shown by the function that made it, in this cell
        self.show_inline()


def _finish(fig: LabFigure, save: str | Path | None, show: bool | None) -> LabFigure:
    if save is not None:
        fig.savefig(save, bbox_inches="tight", dpi=110)
    if show is None or show:
        fig.show_inline()
    return fig


def draw_rounds(
    ax: Axes,
    rounds: Sequence[dict[str, Any]],
    *,
    title: str,
    round_trip_s: float = 0.0,
    end: float | None = None,
    plot_px: float = 800.0,
) -> set[str]:
    """One run (serialized rounds) on one axis; returns the kinds of bars drawn (for the legend)."""
    items = items_of(rounds, round_trip_s=round_trip_s)
    t1 = end if end is not None else max((round_end(r) for r in rounds), default=1.0)
    axis = Axis(0.0, max(t1, 1e-3), plot_px, 0.0)
    by_lane: dict[int, list[Any]] = {}
    for it in items:
        if it.kind != "wait":
            by_lane.setdefault(it.lane, []).append(it)
    for lane_items in by_lane.values():
        lane_items.sort(key=lambda i: (i.t0, i.t1))
    kinds: set[str] = set()
    for it in items:
        w = it.t1 - it.t0
        prov = it.provenance
        alpha = 0.6 if prov == "estimated" else (0.3 if prov == "placeholder" else 1.0)
        if it.kind == "wait":
            ax.barh(it.lane, w, left=it.t0, height=0.18, color=WAIT.fill)
        elif it.kind == "skipped":
            ax.barh(
                it.lane,
                axis.span * 0.008,
                left=it.t0,
                height=0.7,
                fill=False,
                edgecolor="#9ca3af",
                linestyle="--",
                linewidth=0.8,
            )
        else:
            ax.barh(
                it.lane,
                max(w, axis.span * 0.002),
                left=it.t0,
                height=0.7,
                color=it.fill,
                alpha=alpha,
                edgecolor="white",
                linewidth=0.8,
                hatch="///" if prov != "recorded" or it.kind == "trip" else None,
            )
        kinds.add(f"{it.kind}:{it.status}" if it.kind == "tool" else it.kind)
        if prov != "recorded":
            kinds.add(f"prov:{prov}")
        if it.kind in ("model", "tool"):
            lane = by_lane[it.lane]
            k = lane.index(it)
            before = next((o for o in reversed(lane[:k]) if o.t1 <= it.t0 + 1e-9), None)
            after = next((o for o in lane[k + 1 : k + 4] if o.t0 >= it.t1 - 1e-9), None)
            placed = place_label(it, before, after, axis)
            if placed:
                text, where = placed
                colour = it.on_fill if where == "in" and prov == "recorded" else "#1f2328"
                x = {
                    "in": it.t0 + axis.span * 0.004,
                    "right": it.t1 + axis.span * 0.004,
                    "left": it.t0 - axis.span * 0.004,
                }[where]
                ax.text(
                    x,
                    it.lane,
                    text,
                    ha="right" if where == "left" else "left",
                    va="center",
                    fontsize=8,
                    color=colour,
                    clip_on=True,
                )
    n_lanes = 1 + max((len(r["tool_calls"]) for r in rounds), default=0)
    ax.set_yticks(range(n_lanes), [n for n, _ in lane_names(rounds, n_lanes)], fontsize=8)
    ax.set_ylim(n_lanes - 0.5, -0.5)
    ax.set_xlim(0, axis.span)
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="x", labelsize=8)
    return kinds


def _legend(fig: Figure, kinds: set[str]) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=MODEL.fill, label="model call")]
    for k in sorted(kinds):
        if k.startswith("tool:"):
            st = status_style(k[5:])
            handles.append(Patch(color=st.fill, label=f"tool {st.label}"))
    if "trip" in kinds:
        handles.append(Patch(facecolor=TRIP.fill, hatch="///", edgecolor="white", label=TRIP.label))
    if "wait" in kinds:
        handles.append(Patch(color=WAIT.fill, label=WAIT.label))
    if "skipped" in kinds:
        handles.append(Patch(fill=False, edgecolor="#9ca3af", linestyle="--", label="skipped call"))
    for k in sorted(kinds):
        if k.startswith("prov:"):
            handles.append(
                Patch(
                    facecolor=MODEL.fill,
                    alpha=0.5,
                    hatch="///",
                    label=f"{k[5:]} timing: {PROVENANCE_NOTE.get(k[5:], k[5:])}",
                )
            )
    fig.legend(
        handles=handles, loc="outside lower center", ncols=min(4, len(handles)), fontsize=8, frameon=False
    )


def timeline_figure(
    panels: Sequence[tuple[str, Sequence[dict[str, Any]]]],
    *,
    round_trip_s: float = 0.0,
    suptitle: str = "",
    save: str | Path | None = None,
    show: bool | None = None,
) -> LabFigure:
    """Runs (title, serialized rounds) one panel each, on one shared time axis, with a legend."""
    panels = [(t, r) for t, r in panels if r]
    end = max(round_end(r) for _, rounds in panels for r in rounds) if panels else 1.0
    heights = [0.9 + 0.3 * (1 + max(len(r["tool_calls"]) for r in rounds)) for _, rounds in panels] or [1.0]
    fig = LabFigure(figsize=(10, sum(heights) + 1.0), layout="constrained")
    axes = fig.subplots(max(len(panels), 1), 1, sharex=True, squeeze=False, height_ratios=heights)[:, 0]
    kinds: set[str] = set()
    for ax, (title, rounds) in zip(axes, panels, strict=False):
        kinds |= draw_rounds(ax, rounds, title=title, round_trip_s=round_trip_s, end=end)
    axes[-1].set_xlabel("seconds from the start of the run", fontsize=9)
    _legend(fig, kinds)
    if suptitle:
        fig.suptitle(suptitle, fontsize=11)
    return _finish(fig, save, show)


def gantt(
    trace: Trace,
    modes: Sequence[Any] = MODES,
    *,
    round_trip_s: float = DEFAULT_ROUND_TRIP_S,
    concurrency: int | None = None,
    save: str | Path | None = None,
    show: bool | None = None,
) -> LabFigure:
    """The trace replayed under each mode or strategy (a name such as ``eager``, ``module:attribute``,
    or a strategy object), one panel per strategy on a shared time axis. Under ``eager`` tool bars
    start inside the model bar (the call ran while the model was still streaming); a call that waited
    for a slot shows the wait as a thin bar from when it was queued."""
    from toolcall_lab.analysis import run_rows
    from toolcall_lab.strategies import Serialized, resolve

    panels = []
    for mode in modes:
        strategy = resolve(mode)
        kwargs: dict[str, Any] = {"round_trip_s": round_trip_s} if isinstance(strategy, Serialized) else {}
        if concurrency is not None:
            kwargs["concurrency"] = concurrency
        result = replay(trace, strategy, **kwargs)
        summary = run_rows(trace.metadata.title, result, trace)[0]
        name = strategy.name
        why = summary.get("not_comparable_why") or ""
        skipped = f" · ⚠ not comparable: {why}" if why else ""
        notes = " ".join(n for r in result.rounds for n in r.strategy_notes)
        noted = ""
        if "ran as parallel" in notes:
            noted = " · ran as parallel (no chunk timing)"
        elif "modelled chunk timing" in notes:
            noted = " · overlap modelled (chunk offsets not recorded)"
        title = (
            f"{name}: {summary['wall_time_s']:.2f} s, {summary['upstream_calls']} model calls, "
            f"{summary['client_round_trips']} client round trips{skipped}{noted}"
        )
        panels.append((title, Trace.from_run(result, trace.metadata).to_dict()["rounds"]))
    return timeline_figure(
        panels,
        round_trip_s=round_trip_s,
        suptitle=f"{trace.metadata.title} ({trace.metadata.origin}, replayed on the virtual clock)",
        save=save,
        show=show,
    )


def _not_comparable(runs: Any) -> set[str]:
    """Modes that skipped calls somewhere: their speed is not comparable with the others'."""
    if "skipped" not in runs:
        return set()
    return {str(m) for m in runs.loc[runs["skipped"] > 0, "mode"].unique()}


def _origins(runs: Any) -> str:
    if "origin" not in runs:
        return ""
    counts = runs.drop_duplicates("trace")["origin"].value_counts()
    return "traces: " + ", ".join(f"{n} {o}" for o, n in counts.items())


def speedup_distribution(
    comparison: Comparison, *, save: str | Path | None = None, show: bool | None = None
) -> LabFigure:
    """Speedup against sequential over a corpus, one box per mode (modes that skip calls marked)."""
    runs = comparison.runs
    bad = _not_comparable(runs)
    modes = [m for m in runs["mode"].unique() if m != "sequential"]
    fig = LabFigure(figsize=(7, 3.8), layout="constrained")
    ax = fig.subplots()
    data = [runs.loc[runs["mode"] == m, "speedup_vs_sequential"].dropna() for m in modes]
    labels = [f"{m}\n⚠ skips calls:\nnot comparable" if m in bad else str(m) for m in modes]
    box = ax.boxplot(data, tick_labels=labels, showfliers=True, patch_artist=True)
    for patch, m in zip(box["boxes"], modes, strict=True):
        patch.set_facecolor("#e5e7eb" if m in bad else "#cfe0f5")
        if m in bad:
            patch.set_hatch("///")
    ax.axhline(1.0, color="#888", linewidth=0.8, linestyle="--")
    ax.set_ylabel("speedup vs sequential (x)", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.set_title(f"Speedup over {runs['trace'].nunique()} traces  ({_origins(runs)})", fontsize=10)
    return _finish(fig, save, show)


def time_breakdown(
    comparison: Comparison, *, save: str | Path | None = None, show: bool | None = None
) -> LabFigure:
    """Stacked total time per mode: model calls, tool phases, serialized client round trips."""
    s = comparison.runs.groupby("mode", sort=False).agg(
        model=("model_time_s", "sum"), tools=("tool_phase_s", "sum"), trips=("round_trip_time_s", "sum")
    )
    bad = _not_comparable(comparison.runs)
    labels = [f"{m}\n⚠ skips calls" if m in bad else str(m) for m in s.index]
    fig = LabFigure(figsize=(7, 3.8), layout="constrained")
    ax = fig.subplots()
    ax.bar(labels, s["model"], color=MODEL_COLOUR, label="model calls")
    ax.bar(labels, s["tools"], bottom=s["model"], color=STATUS_COLOURS["ok"], label="tool phases")
    ax.bar(
        labels,
        s["trips"],
        bottom=s["model"] + s["tools"],
        color=TRIP_COLOUR,
        hatch="///",
        label="client round trips (serialized)",
    )
    ax.set_ylabel("seconds (sum over traces)", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=8)
    ax.set_title(f"Where the time goes  ({_origins(comparison.runs)})", fontsize=10)
    return _finish(fig, save, show)

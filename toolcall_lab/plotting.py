"""Matplotlib views of runs and mode comparisons; each shows itself in Jupyter and returns the Figure.

Imported lazily (matplotlib is heavy). Figures are built without pyplot, so nothing lands on global
state; to show inline in a fresh kernel whatever ran before (pyplot imported or not, any backend),
each function displays its figure itself when it runs in a Jupyter kernel, and the returned figure
does not display a second time in the same cell (it does when shown again in a later cell). It is
shown as it is when the function returns: to change it first (``fig.suptitle(...)``), pass
``show=False`` and display ``fig`` yourself.
Timelines draw the same bars (every one an interval the record holds), lanes and labels as the
notebook views' SVG timelines. Corpus figures say how much of the time they rest on is estimated or
a placeholder (weighed by seconds), and leave runs that are not comparable out of speedups.
"""

from __future__ import annotations

import base64
import functools
import io
import re
import sys
import textwrap
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from toolcall_lab._rules import check_concurrency, check_round_trip
from toolcall_lab.analysis import DEFAULT_ROUND_TRIP_S, Comparison
from toolcall_lab.notebook.html import run_caption
from toolcall_lab.notebook.legend import legend_entries
from toolcall_lab.notebook.theme import MODEL, SKIPPED_STROKE, STATUS, TRIP, WAIT, plural
from toolcall_lab.notebook.timeline import (
    PAD,
    Axis,
    Panel,
    PanelLike,
    as_panel,
    items_of,
    lane_names,
    lay_out,
    round_end,
)
from toolcall_lab.records import MODES
from toolcall_lab.replay import replay
from toolcall_lab.trace import Trace

if TYPE_CHECKING:
    from matplotlib.axes import Axes

STATUS_COLOURS = {name: s.fill for name, s in STATUS.items()}
MODEL_COLOUR = MODEL.fill
TRIP_COLOUR = TRIP.fill
DPI = 100
WRAP_CHARS = 110
"""Titles wrap at this many characters (about the width of a 10-inch figure at 11 pt)."""
MIN_BAR_PX = 3.0
"""The narrowest a bar is drawn (its label says its true duration): a 2 ms call on a 30 s axis stays
visible."""
EDGE_MIN_PX = 8.0
"""Bars narrower than this get no white edge (an edge is drawn half outside, half over the fill, and
would cover a thin bar's colour)."""


def _shell() -> Any:
    """The running IPython kernel's shell, or None (plain Python, the CLI, a terminal IPython)."""
    if "ipykernel" not in sys.modules:
        return None
    from IPython import get_ipython

    shell = get_ipython()
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


FALLBACK_FAMILIES = (
    "Noto Sans CJK JP",
    "Noto Sans CJK SC",
    "Noto Sans CJK TC",
    "Noto Sans CJK KR",
    "Source Han Sans",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Droid Sans Fallback",
    "Microsoft YaHei",
    "Yu Gothic",
    "Meiryo",
    "Malgun Gothic",
    "Hiragino Sans",
    "PingFang SC",
    "Apple SD Gothic Neo",
    "Arial Unicode MS",
)
"""Fonts with Chinese, Japanese and Korean glyphs that usual systems install; those present are
fallbacks after the default font (matplotlib picks each glyph from the first font that has it), so
a tool or trace name in CJK text draws as text wherever such a font exists, with no download."""
GLYPH_MISSING = re.compile(r"Glyph (\d+) .*missing from font")


@functools.cache
def fallback_fonts() -> tuple[str, ...]:
    """The `FALLBACK_FAMILIES` installed on this machine (matplotlib's font list)."""
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    return tuple(f for f in FALLBACK_FAMILIES if f in installed)


class LabFigure(Figure):
    """A Figure that displays as PNG in Jupyter itself (no pyplot, no backend needed), once per cell.

    Its text falls back to an installed CJK font for glyphs the default font lacks; characters that
    no installed font has are said once per drawing, in one warning naming them and what to install
    (matplotlib's own warnings, one per glyph, are folded into it)."""

    _tcl_shown_in: int | None = None

    def savefig(self, *args: Any, **kwargs: Any) -> None:
        from matplotlib.text import Text

        if fallback_fonts():  # each text: its own family first, then the CJK fonts for what it lacks
            for text in self.findobj(Text):
                family = [f for f in text.get_fontfamily() if f not in FALLBACK_FAMILIES]
                text.set_fontfamily([*family, *fallback_fonts()])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            super().savefig(*args, **kwargs)
        missing: dict[str, None] = {}
        for w in caught:
            found = GLYPH_MISSING.search(str(w.message))
            if found:
                missing[chr(int(found.group(1)))] = None
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if missing:
            chars = "".join(missing)
            warnings.warn(
                f"{len(chars)} character(s) of this figure's text ({chars[:20]}"
                f"{'…' if len(chars) > 20 else ''}) are in no installed font and show as boxes: "
                "install a font that has them (Debian: apt-get install fonts-noto-cjk; any of "
                f"{', '.join(FALLBACK_FAMILIES[:6])}, ... is used without any setting)",
                UserWarning,
                stacklevel=2,
            )

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
    end: float | None = None,
    plot_px: float = 800.0,
) -> list[Any]:
    """One run (serialized rounds) on one axis; returns what was drawn (for the legend)."""
    items = items_of(rounds)
    t1 = end if end is not None else max((round_end(r) for r in rounds), default=1.0)
    axis = Axis(0.0, max(t1, 1e-3), plot_px, 0.0)
    layout = lay_out(items, axis, [plot_px])
    for it in items:
        w = it.t1 - it.t0
        prov = it.provenance
        faint = prov in ("estimated", "placeholder")
        if it.kind == "wait":
            ax.barh(it.lane, w, left=it.t0, height=0.18, color=WAIT.fill)
        elif it.kind == "skipped":
            ax.barh(
                it.lane,
                axis.span * 0.008,
                left=min(it.t0, axis.span * 0.992),
                height=0.7,
                fill=False,
                edgecolor=SKIPPED_STROKE,
                linestyle="--",
                linewidth=0.8,
            )
        else:
            px = axis.span / plot_px  # seconds per pixel, as the layout assumed
            shown = max(w, MIN_BAR_PX * px)
            edged = not faint and w >= EDGE_MIN_PX * px
            ax.barh(
                it.lane,
                shown,
                left=min(it.t0, axis.span - shown) if w < shown else it.t0,
                height=0.7,
                color=it.fill,
                alpha=(0.55 if prov == "estimated" else 0.2) if faint else 1.0,
                edgecolor="white" if edged else it.fill,
                linewidth=0.8 if edged else (1.2 if faint else 0.0),
                linestyle="-" if not faint else ("--" if prov == "estimated" else ":"),
            )
            if faint:  # the outline at full strength: visible whatever the fill's alpha
                ax.barh(
                    it.lane,
                    shown,
                    left=min(it.t0, axis.span - shown) if w < shown else it.t0,
                    height=0.7,
                    fill=False,
                    edgecolor=it.fill,
                    linewidth=1.2,
                    linestyle="--" if prov == "estimated" else ":",
                )
        if it.kind in ("model", "tool"):
            placed = layout[id(it)][0]
            if placed:
                text, where = placed
                colour = it.on_fill if where == "in" and not faint else "#1f2328"
                pad = axis.span * PAD / plot_px  # as the layout assumed
                x = {"in": it.t0 + pad, "right": it.t1 + pad, "left": it.t0 - pad}[where]
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
    ax.set_title("\n".join(textwrap.wrap(title, WRAP_CHARS)) or title, fontsize=10, loc="left")  # (wraps)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="x", labelsize=8)
    return items


def _legend(fig: Figure, items: Sequence[Any]) -> None:
    """The view's legend (`legend_entries`), each swatch drawn as the view draws it."""
    from matplotlib.patches import Patch

    handles = []
    for sw in legend_entries(items):
        style: Literal["-", "--", ":"] = (
            "--" if sw.dash == "dashed" else (":" if sw.dash == "dotted" else "-")
        )
        handles.append(
            Patch(
                facecolor=sw.fill if sw.fill != "none" else "none",
                alpha=None,
                edgecolor=sw.stroke or "none",
                linestyle=style,
                linewidth=1.2 if sw.stroke else 0.0,
                label=sw.label,
            )
        )
        if sw.opacity < 1:  # a faint fill, the outline at full strength
            handles[-1].set_facecolor(to_rgba(sw.fill, sw.opacity))
    fig.legend(
        handles=handles, loc="outside lower center", ncols=min(3, len(handles)), fontsize=8, frameon=False
    )


def timeline_figure(
    panels: Sequence[PanelLike],
    *,
    suptitle: str = "",
    notes: Sequence[str] = (),
    save: str | Path | None = None,
    show: bool | None = None,
) -> LabFigure:
    """Runs (title, serialized rounds) one panel each, on one shared time axis, with a legend;
    `notes` (runs that could not be drawn, and why) are printed under the title. Long titles wrap
    (they never widen the figure); runs without rounds get no panel, and a figure with none says so.

    Shown inline in a Jupyter kernel unless ``show=False``; returned either way.
    """
    drawn_panels = [p for p in (as_panel(x) for x in panels) if p.rounds]
    end = max(round_end(r) for p in drawn_panels for r in p.rounds) if drawn_panels else 1.0
    heights = [0.9 + 0.3 * (1 + max(len(r["tool_calls"]) for r in p.rounds)) for p in drawn_panels] or [1.0]
    fig = LabFigure(figsize=(10, sum(heights) + 1.2), layout="constrained")
    axes = fig.subplots(max(len(drawn_panels), 1), 1, sharex=True, squeeze=False, height_ratios=heights)[:, 0]
    drawn: list[Any] = []
    for ax, panel in zip(axes, drawn_panels, strict=False):
        drawn += draw_rounds(ax, panel.rounds, title=panel.title, end=end)
    axes[-1].set_xlabel("seconds from the start of the run", fontsize=9)
    if drawn:
        _legend(fig, drawn)
    lines = list(notes)
    if not drawn_panels:
        lines.append("no rounds to draw" if not notes else "no run to draw")
        axes[0].set_axis_off()
    if suptitle or lines:
        text = "\n".join(
            [*textwrap.wrap(suptitle, WRAP_CHARS), *(w for n in lines for w in textwrap.wrap(n, WRAP_CHARS))]
        )
        fig.suptitle(text, fontsize=11 if not lines else 9)
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
    for a slot shows the wait as a thin bar from when it was queued.

    Shown inline in a Jupyter kernel unless ``show=False``; returned either way.
    """
    from toolcall_lab.analysis import modes_list, run_capped, run_rows
    from toolcall_lab.exceptions import ToolcallLabError
    from toolcall_lab.strategies import Serialized, resolve

    check_concurrency(concurrency, "gantt(concurrency=...)")  # (every setting, before any replay)
    check_round_trip(round_trip_s, "gantt(round_trip_s=...)")
    modes = run_capped(modes_list(modes, "gantt(modes=...)"), concurrency, "gantt(modes=...)")
    strategies = [resolve(m, "gantt(modes=...)") for m in modes]
    panels, failed = [], []
    for strategy in strategies:
        kwargs: dict[str, Any] = {"round_trip_s": round_trip_s} if isinstance(strategy, Serialized) else {}
        if concurrency is not None:
            kwargs["concurrency"] = concurrency
        try:
            result = replay(trace, strategy, **kwargs)
        except ToolcallLabError as exc:  # as CompareView: the mode says why, the others are drawn
            failed.append(f"⚠ {strategy.name}: could not be replayed: {type(exc).__name__}: {exc}")
            continue
        summary = run_rows(trace.metadata.title, result, trace)[0]
        notes = sorted({n for r in result.rounds for n in r.strategy_notes})
        caption, warning = run_caption(summary, notes)  # what CompareView says beside the run
        replayed = replace(trace.metadata, origin="replayed")
        panels.append(
            Panel(strategy.name, Trace.from_run(result, replayed).to_dict()["rounds"], caption, warning)
        )
    return timeline_figure(
        panels,
        suptitle=f"{trace.metadata.title} ({trace.metadata.origin}, replayed on the virtual clock)",
        notes=failed,
        save=save,
        show=show,
    )


def _comparable(runs: Any) -> Any:
    """`compare`'s ``comparable`` column (a run that skipped calls did less work), or, for tables
    without it, no skipped call."""
    if "comparable" in runs:
        return runs["comparable"].astype(bool)
    if "skipped" in runs:
        return runs["skipped"] == 0
    return runs["mode"].notna()


def _weak_share(runs: Any) -> float:
    """The share of the seconds behind these runs that is estimated or a placeholder, weighed by
    seconds (a 0 s placeholder weighs nothing), from each run's ``measured_share``."""
    if "measured_share" not in runs:
        return 0.0
    parts = [c for c in ("model_time_s", "tool_time_s", "round_trip_time_s") if c in runs]
    seconds = runs[parts].sum(axis=1) if parts else runs["wall_time_s"]
    total = float(seconds.sum())
    if total <= 0:
        return 0.0
    return float(((1 - runs["measured_share"].fillna(1.0)) * seconds).sum()) / total


def _evidence(runs: Any) -> str:
    """What a figure rests on, in words: all measured, or the estimated/placeholder share of the
    seconds and how many traces rest on such numbers at all (a share of seconds hides a trace whose
    every tool duration is a placeholder beside long recorded ones)."""
    share = _weak_share(runs)
    column = "trace_timing_evidence" if "trace_timing_evidence" in runs else "timing_evidence"
    weak = (
        int(runs.loc[runs[column].isin(("estimated", "placeholder")), "trace"].nunique())
        if column in runs and "trace" in runs
        else 0
    )
    if share <= 0 and not weak:
        return "timings: all recorded or reported"
    pct = "<1" if 0 < share < 0.01 else f"{share * 100:.0f}"
    n = int(runs["trace"].nunique()) if "trace" in runs else 0
    traces = f"; {weak} of {plural(n, 'trace')} rest on estimated or placeholder durations" if weak else ""
    return f"⚠ {pct} % of these seconds are estimated or placeholders{traces}"


def _assumed(runs: Any) -> Any:
    """Per run: whether its speedup rests entirely or mostly on assumed numbers
    (`analysis.speedup_caveat`)."""
    from toolcall_lab.analysis import speedup_caveat

    return runs.apply(lambda r: speedup_caveat(r) is not None, axis=1) if len(runs) else runs["mode"].isna()


def _origins(runs: Any) -> str:
    if "origin" not in runs:
        return ""
    counts = runs.drop_duplicates("trace")["origin"].value_counts()
    return "traces: " + ", ".join(f"{n} {o}" for o, n in counts.items())


def _caveats(comparison: Comparison) -> str:
    """What a corpus figure leaves out and what a streaming strategy's bar rests on, wrapped for a
    title: strategies that failed on every trace (no run to draw), and per streaming strategy
    (``eager``) on how many runs the overlap is modelled (spread or estimated chunk offsets) or absent
    (no chunk timing: it ran as parallel)."""
    lines = []
    dead = comparison.modes_failed_everywhere
    if dead:
        lines.append(f"⚠ left out: {', '.join(dead)} (failed on every trace; see the errors table)")
    runs = comparison.runs
    if "streams" in runs and "chunk_timing" in runs:
        for mode, mine in runs[runs["streams"].astype(bool)].groupby("mode", sort=False):
            timing = mine["chunk_timing"]
            modelled = int(timing.isin(("spread", "estimated")).sum())
            none = int((timing == "none").sum())
            mixed = int(timing.str.startswith("mixed").sum())
            parts = [f"overlap modelled on {modelled} (offsets spread or estimated)"] if modelled else []
            parts += [f"ran as parallel on {none} (no chunk timing)"] if none else []
            parts += [f"mixed chunk timing on {mixed}"] if mixed else []
            if parts:
                lines.append(f"⚠ {mode}, of {len(mine)} runs: {'; '.join(parts)}")
    return "".join("\n" + w for line in lines for w in textwrap.wrap(line, 90))


def speedup_distribution(
    comparison: Comparison, *, save: str | Path | None = None, show: bool | None = None
) -> LabFigure:
    """Speedup against sequential over a corpus, one box per mode, from comparable runs only (a
    mode with runs that skipped calls says how many were left out). The title says how much of the
    time behind the figure is estimated or a placeholder.

    Shown inline in a Jupyter kernel unless ``show=False``; returned either way.
    """
    runs = comparison.runs
    ok = _comparable(runs)
    modes = [m for m in runs["mode"].unique() if m != "sequential"]
    fig = LabFigure(figsize=(7, 4.0), layout="constrained")
    ax = fig.subplots()
    data, labels, left_out = [], [], []
    guessed = _assumed(runs)
    for m in modes:
        mine = runs["mode"] == m
        kept = runs.loc[mine & ok, "speedup_vs_sequential"].dropna()
        out = int((mine & ~ok).sum())
        data.append(kept if len(kept) else [float("nan")])
        left_out.append(out)
        if out and not len(kept):
            labels.append(f"{m}\n⚠ not comparable:\nskips calls ({out} runs)")
        elif out:
            labels.append(f"{m}\n⚠ {out} of {int(mine.sum())} runs\nleft out (skipped calls)")
        else:
            labels.append(str(m))
        on_guesses = int((mine & ok & guessed & runs["speedup_vs_sequential"].notna()).sum())
        if on_guesses:  # marked as "not comparable" is: the speedup rests on assumed timings
            labels[-1] += f"\n⚠ {on_guesses} of {len(kept)} on\nassumed timings"
            xs = [len(data)] * on_guesses
            ys = runs.loc[mine & ok & guessed, "speedup_vs_sequential"].dropna()
            ax.scatter(xs, ys, marker="x", color="#9a3412", zorder=3, label="assumed timings")
    box = ax.boxplot(data, tick_labels=labels, showfliers=True, patch_artist=True)
    for patch, out in zip(box["boxes"], left_out, strict=True):
        patch.set_facecolor("#e5e7eb" if out else "#cfe0f5")
        if out:
            patch.set_hatch("///")
    ax.axhline(1.0, color="#888", linewidth=0.8, linestyle="--")
    if guessed.any():
        handles, _ = ax.get_legend_handles_labels()
        ax.legend(handles[:1], ["speedup on assumed timings"], fontsize=7, loc="best")
    ax.set_ylabel("speedup vs sequential (x)", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.set_title(
        f"Speedup over {plural(runs['trace'].nunique(), 'trace')}  ({_origins(runs)})\n{_evidence(runs)}"
        + _caveats(comparison),
        fontsize=10,
    )
    return _finish(fig, save, show)


def time_breakdown(
    comparison: Comparison, *, save: str | Path | None = None, show: bool | None = None
) -> LabFigure:
    """Stacked total time per mode: model calls, tool phases, serialized client round trips. Each
    bar says how much of its seconds is estimated or a placeholder; modes with runs that skipped
    calls are marked (they did less work).

    Shown inline in a Jupyter kernel unless ``show=False``; returned either way.
    """
    from toolcall_lab.analysis import nested_runs

    nested = nested_runs(comparison.runs)
    runs = comparison.runs[~nested]  # a sub-agent's run lies inside its parent's Task call: once
    s = runs.groupby("mode", sort=False).agg(
        model=("model_time_s", "sum"), tools=("tool_phase_s", "sum"), trips=("round_trip_time_s", "sum")
    )
    ok = _comparable(runs)
    bad = {str(m) for m in runs.loc[~ok, "mode"].unique()}
    labels = [f"{m}\n⚠ skips calls" if m in bad else str(m) for m in s.index]
    fig = LabFigure(figsize=(7, 4.2), layout="constrained")
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
    tops = s["model"] + s["tools"] + s["trips"]
    for x, mode in enumerate(s.index):
        share = _weak_share(runs[runs["mode"] == mode])
        if share > 0:
            pct = "<1" if share < 0.01 else f"{share * 100:.0f}"
            ax.annotate(
                f"{pct} % est./placeholder",
                (x, float(tops.iloc[x])),
                textcoords="offset points",
                xytext=(0, 3),
                ha="center",
                fontsize=7,
            )
    once = f"; {int(nested.sum())} sub-agent run(s) counted in their Task calls" if nested.any() else ""
    ax.set_ylabel(f"seconds (sum over traces{once})", fontsize=9)
    ax.set_ylim(0, float(tops.max()) * 1.12 if len(tops) else 1.0)
    ax.tick_params(labelsize=8)
    fig.legend(loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    title = f"Where the time goes  ({_origins(runs)})\n{_evidence(runs)}"
    ax.set_title(title + _caveats(comparison), fontsize=10)
    return _finish(fig, save, show)

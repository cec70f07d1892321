"""The compare view: one trace replayed under several modes or strategies, side by side."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import ipywidgets as widgets
import traitlets

from toolcall_lab._rules import check_concurrency, check_round_trip
from toolcall_lab.exceptions import UsageError
from toolcall_lab.notebook._controls import (
    ExportBar,
    OpenBox,
    StaticFallback,
    box_options,
    error_html,
    guarded,
    note,
    wrap,
)
from toolcall_lab.notebook.export import calls_rows
from toolcall_lab.notebook.html import (
    comparable,
    round_duration,
    round_html,
    run_caption,
    run_state,
    summary_table,
    timing_summary,
    with_speedups,
)
from toolcall_lab.notebook.legend import legend_html
from toolcall_lab.notebook.loading import Opened
from toolcall_lab.notebook.theme import article, e, plural, secs
from toolcall_lab.notebook.timeline import NARROWEST, Panel, items_of, round_end, timeline_svg
from toolcall_lab.records import MODES
from toolcall_lab.trace import Trace


def mode_name(mode: Any) -> str:
    """A mode's or a strategy's display name (a ``module:attribute`` spec shows its strategy's name)."""
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.strategies import name_of

    try:
        return name_of(mode)
    except UsageError:
        return str(getattr(mode, "name", mode))


class CompareView(StaticFallback, widgets.VBox):  # type: ignore[misc]
    """The same trace under several modes or strategies: a summary that marks runs which cannot be
    compared (they skipped calls), every run on one shared time axis with the selected round
    shaded, and the selected round of each run side by side (also on one axis).

    Changing the modes, the parallel concurrency cap or the client round trip re-runs the replays on
    the virtual clock (milliseconds). A mode that cannot replay the trace gets a line saying why;
    the others are still shown. `CompareView()` starts empty, with the file box; a file holding
    several traces gets a chooser.
    """

    modes = traitlets.Tuple(default_value=tuple(MODES))
    concurrency = traitlets.Int(
        None, allow_none=True, help="cap on calls at once (parallel, eager); None: no cap"
    )
    round_trip_ms = traitlets.Float(50.0, help="serialized mode's client round trip, milliseconds")
    selected_round = traitlets.Int(0, allow_none=True)
    trace_index = traitlets.Int(0, help="which trace of the opened file is compared")

    def __init__(
        self,
        trace: Trace | None = None,
        modes: Sequence[Any] = MODES,
        *,
        round_trip_s: float = 0.05,
        concurrency: int | None = None,
        **kwargs: Any,
    ) -> None:
        from toolcall_lab.analysis import check_distinct, modes_list, run_capped

        check_concurrency(concurrency, "CompareView(concurrency=...)")  # (compare's rules, up front)
        check_round_trip(round_trip_s, "CompareView(round_trip_s=...)")
        modes = modes_list(modes, "CompareView(modes=...)")
        run_capped(modes, None, "CompareView(modes=...)")  # (a spec that names no strategy: refused now)
        check_distinct([mode_name(m) for m in modes], "CompareView(modes=...)")
        self.trace = trace
        self.traces: list[Trace] = [trace] if trace is not None else []
        self._choosing = False
        self.errors = widgets.Output()
        options = [(mode_name(m), m) for m in modes]
        options += [(m, m) for m in MODES if m not in [v for _, v in options]]
        self.mode_box = widgets.SelectMultiple(
            options=options, value=tuple(modes), description="modes", rows=min(6, len(options))
        )
        self.cap_box = widgets.Text(
            value="" if concurrency is None else str(concurrency),
            placeholder="none",
            description="cap",
            tooltip="calls at once in parallel and eager modes: a number, blank for no cap",
            continuous_update=False,
            layout=widgets.Layout(width="14em"),
        )
        self.rtt_box = widgets.FloatSlider(
            value=round_trip_s * 1000,
            min=0,
            max=max(500.0, math.ceil(round_trip_s * 1000)),  # never clamp the value given
            step=5,
            description="round trip ms",
            readout_format=".0f",
            style={"description_width": "initial"},
        )
        self.round_box = widgets.Dropdown(description="round")
        self.trace_box = widgets.Dropdown(
            description="trace", layout=widgets.Layout(display="none", width="95%")
        )
        self.summary = widgets.HTML()
        self.timelines = widgets.HTML()
        self.details = widgets.HTML()
        self.open_box = OpenBox(guarded(self.errors, self._opened, "open"))
        self.export = ExportBar(
            lambda: f"{self.trace.metadata.title} compare" if self.trace else "compare",
            self.panels,
            lambda: {
                "summary": with_speedups(self.rows),
                "calls": [row for m, doc in self.results.items() for row in calls_rows(doc, m)],
            },
            what="this comparison",
        )
        controls = widgets.HBox(
            [self.mode_box, widgets.VBox([self.cap_box, self.rtt_box, self.round_box])],
            layout=widgets.Layout(flex_flow="row wrap"),
        )
        super().__init__(
            [
                self.open_box,
                self.trace_box,
                controls,
                self.summary,
                self.timelines,
                self.details,
                self.export,
                self.errors,
            ],
            **box_options(CompareView, kwargs),
        )
        self.add_class("tcl-view")
        self.add_class("tcl-compare-view")
        self.results: dict[str, dict[str, Any]] = {}
        self.rows: list[dict[str, Any]] = []
        self.failed: dict[str, str] = {}
        """Modes that could not replay the trace, with the reason."""
        self._round_options()
        self.modes, self.concurrency, self.round_trip_ms = tuple(modes), concurrency, round_trip_s * 1000
        widgets.link((self.mode_box, "value"), (self, "modes"))
        # blank or "none" in the box is no cap (None); both ways, by hand: a bad entry resets the box
        self.cap_box.observe(guarded(self.errors, self._cap_typed), names=["value"])
        self.observe(lambda change: setattr(self.cap_box, "value", self._cap_text()), names=["concurrency"])
        widgets.link((self.rtt_box, "value"), (self, "round_trip_ms"))
        widgets.link((self.round_box, "value"), (self, "selected_round"))
        self.observe(guarded(self.errors, self.rerun), names=["modes", "concurrency", "round_trip_ms"])
        self.observe(guarded(self.errors, self.render), names=["selected_round"])
        self.trace_box.observe(guarded(self.errors, self._chosen), names=["value"])
        self.rerun()

    @property
    def table(self) -> Any:
        """Every column `analysis.run_rows` gives per mode (the summary shows a few), as a DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.rows)

    def _cap_text(self) -> str:
        return "" if self.concurrency is None else str(self.concurrency)

    def _cap_typed(self, change: Any) -> None:
        """The cap box's text as a cap: blank or none is no cap; anything else must be a whole number
        of calls at once that `compare` takes (0 and 00 are refused as `compare(concurrency=0)` is,
        said in the view's error area; the box goes back to the cap in force)."""
        text = str(change["new"]).strip().lower()
        if text in ("", "none"):
            self.concurrency = None
            return
        try:
            if not text.isdigit():
                raise UsageError(
                    f"concurrency={text!r}: must be a whole number of calls at once >= 1 (blank: no cap)"
                )
            check_concurrency(int(text), "cap")  # compare's own rule
        except UsageError:
            self.cap_box.value = self._cap_text()
            raise
        self.concurrency = int(text)

    @traitlets.validate("concurrency")
    def _valid_cap(self, proposal: Any) -> int | None:
        """The rule `compare(concurrency=...)` applies (`strategies` check it): None or an integer >= 1."""
        check_concurrency(proposal["value"], "CompareView(concurrency=...)")
        return proposal["value"]  # type: ignore[no-any-return]

    @traitlets.validate("round_trip_ms")
    def _valid_rtt(self, proposal: Any) -> float:
        value = proposal["value"]
        check_round_trip(value / 1000, "CompareView.round_trip_ms (in seconds)")
        if value > self.rtt_box.max:  # a slider clamps what it cannot show: widen it instead
            self.rtt_box.max = math.ceil(value)
        return float(value)

    def _round_options(self) -> None:
        rounds = self.trace.rounds if self.trace is not None else ()
        options = [
            (f"round {r.round_index}: {plural(len(r.tool_calls), 'call')}", r.round_index) for r in rounds
        ]
        self.round_box.options = options
        self.round_box.value = options[0][1] if options else None

    def _opened(self, opened: Opened) -> None:
        self.traces = list(opened.traces)
        self._choosing = True
        try:
            self.trace_box.options = [(f"{i + 1}: {t.metadata.title}", i) for i, t in enumerate(self.traces)]
            self.trace_box.value = 0
        finally:
            self._choosing = False
        self.trace_box.layout.display = None if len(self.traces) > 1 else "none"
        self.trace_index = 0
        self.load(self.traces[0])

    def _chosen(self, change: Any) -> None:
        if self._choosing or change["new"] is None or not self.traces:
            return
        self.trace_index = int(change["new"])
        self.load(self.traces[self.trace_index])

    def load(self, trace: Trace) -> None:
        """Compare another trace (same settings)."""
        self.trace = trace
        self._round_options()
        self.selected_round = 0
        self.rerun()

    def rerun(self, _: Any = None) -> None:
        from toolcall_lab.analysis import run_rows, stream_timing
        from toolcall_lab.exceptions import ToolcallLabError
        from toolcall_lab.replay import replay

        if self.trace is None:
            self.summary.value = note("open a trace file, a recording or a transcript above to compare it")
            return
        try:
            results: dict[str, dict[str, Any]] = {}
            rows: list[dict[str, Any]] = []
            failed: dict[str, str] = {}
            origin = self.trace.metadata.origin
            streamed = stream_timing(self.trace)
            from toolcall_lab.strategies import Serialized, resolve

            for mode in self.modes:
                kwargs: dict[str, Any] = {}
                try:
                    strategy = resolve(mode)
                    if isinstance(strategy, Serialized):
                        kwargs["round_trip_s"] = self.round_trip_ms / 1000
                    if self.concurrency is not None:  # (strategies running calls one at a time ignore it)
                        kwargs["concurrency"] = self.concurrency
                    result = replay(self.trace, strategy, **kwargs)
                except ToolcallLabError as exc:
                    failed[mode_name(mode)] = f"{type(exc).__name__}: {exc}"
                    continue
                doc = Trace.from_run(result, replace(self.trace.metadata, origin="replayed")).to_dict()
                doc["metadata"].update(replayed_from=origin, mode=mode_name(mode))
                results[mode_name(mode)] = doc
                row = run_rows(self.trace.metadata.title, result, self.trace)[0]
                row["mode"] = mode_name(mode)
                row["chunk_timing"] = streamed  # what an overlap with the stream rests on
                rows.append(row)
        except Exception as exc:
            self.summary.value = error_html(
                exc, "the views below still show the previous settings"
            ) + self.summary.value.replace("class='tcl'", "class='tcl' style='opacity:.5'", 1)
            raise
        self.results, self.rows, self.failed = results, rows, failed
        self.render()

    @traitlets.validate("modes")
    def _distinct(self, proposal: Any) -> tuple[Any, ...]:
        from toolcall_lab.analysis import check_distinct, run_capped

        check_distinct([mode_name(m) for m in proposal["value"]], "CompareView.modes")
        run_capped(list(proposal["value"]), None, "CompareView.modes")
        return tuple(proposal["value"])

    def render(self, _: Any = None) -> None:
        if self.trace is None:
            return
        end = max(
            (max(round_end(r) for r in d["rounds"]) for d in self.results.values() if d["rounds"]),
            default=1.0,
        )
        meta = self.trace.metadata
        size = f"{plural(len(self.trace.rounds), 'round')}, {plural(self.trace.n_calls, 'call')}"
        failed = "".join(
            f"<div class='tcl-error'>⚠ {e(m)}: could not be replayed: {e(why)}</div>"
            for m, why in self.failed.items()
        )
        head = (
            f"<div class='tcl-head'><div class='tcl-title'>{e(meta.title)}</div><div class='tcl-facts'>"
            f"<span><span class='tcl-badge tcl-badge-warn'>replayed</span> on the virtual clock from "
            f"{article(meta.origin)} {e(meta.origin)} trace</span>"
            f"<span>{e(timing_summary(self.trace.to_dict()))}"
            f"</span><span>{size}</span></div></div>"
        )
        empty = "" if self.modes else "<div class='tcl-muted'>choose at least one mode</div>"
        self.summary.value = wrap(head + failed + empty + (summary_table(self.rows) if self.rows else ""))
        blocks: list[str] = []
        drawn: list[Any] = []
        for panel in self.panels():
            items = items_of(panel.rounds)
            drawn += items
            warn = f" · ⚠ {panel.warning}" if panel.warning else ""
            blocks.append(
                f"<div class='tcl-mode' data-mode='{e(panel.name)}'><b>{e(panel.name)}</b> "
                f"<span class='tcl-muted'>{e(panel.caption)}{e(warn)}</span>"
                + timeline_svg(
                    panel.rounds,
                    start=0.0,
                    end=end,
                    highlight=self.selected_round,
                    legend=False,
                    min_px=NARROWEST,
                    title=f"{meta.title}: {panel.name}, the whole run",
                    items=items,
                )
                + "</div>"
            )
        self.timelines.value = wrap(
            "<div class='tcl-muted'>all runs on one time axis; the selected round is shaded</div>"
            + "".join(blocks)
            + legend_html(drawn, band=True)
        )
        picked = {
            mode: [(i, r) for i, r in enumerate(doc["rounds"]) if r["round_index"] == self.selected_round]
            for mode, doc in self.results.items()
        }
        span = max((round_duration(r) for found in picked.values() for _, r in found), default=0.0)
        panels = []
        for mode, found in picked.items():
            doc = self.results[mode]
            if found:
                i, r = found[0]
                prev = doc["rounds"][i - 1] if i else None
                body = round_html(r, previous=prev, span=span)
            else:
                body = f"<i>no round {self.selected_round} in this run</i>"
            row = next((x for x in self.rows if x["mode"] == mode), {})
            why, state = comparable(row), run_state(row)
            flags = (f" · ⚠ ended {state}" if state else "") + (" · ⚠ not comparable" if why else "")
            tip = f" title='{e(why)}'" if why else ""
            panels.append(
                f"<div class='tcl-panel' data-mode='{e(mode)}'><b>{e(mode)}</b>"
                f"<span class='tcl-muted'{tip}>{e(flags)}</span>{body}</div>"
            )
        self.details.value = wrap(
            f"<div class='tcl-muted'>round {self.selected_round} under each mode, on one time axis "
            f"({secs(span)} from each round's start)</div>"
            f"<div class='tcl-grid-panels'>{''.join(panels)}</div>"
        )
        self.refresh_static()

    def panels(self) -> list[Panel]:
        """Each run as the view shows it (name, what it says beside it, its warning, its rounds):
        what the timeline exports save, so they say what the view says."""
        out = []
        for row, (mode, doc) in zip(self.rows, self.results.items(), strict=True):
            notes = sorted({n for r in doc["rounds"] for n in r.get("strategy_notes", ())})
            caption, warning = run_caption(row, notes)
            out.append(Panel(mode, doc["rounds"], caption, warning))
        return out

    def static_html(self) -> str:
        if self.trace is None:
            return note("CompareView: no trace opened")
        return str(self.summary.value + self.timelines.value + self.details.value)

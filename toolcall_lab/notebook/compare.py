"""The compare view: one trace replayed under several modes or strategies, side by side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import traitlets

from toolcall_lab.notebook._controls import ExportBar, OpenBox, StaticFallback, guarded, wrap
from toolcall_lab.notebook.export import calls_rows
from toolcall_lab.notebook.html import round_duration, round_html, summary_table, timing_summary
from toolcall_lab.notebook.theme import e
from toolcall_lab.notebook.timeline import items_of, legend_html, round_end, secs, timeline_svg
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
    """The same trace under several modes or strategies: a summary that marks modes which skip
    calls as not comparable, every run on one shared time axis, and the selected round of each
    run side by side (also on one axis).

    Changing the modes, the parallel concurrency cap or the client round trip re-runs the replays on
    the virtual clock (milliseconds).
    """

    modes = traitlets.Tuple(default_value=tuple(MODES))
    concurrency = traitlets.Int(0, help="cap on calls at once (parallel, eager); 0 = no cap")
    round_trip_ms = traitlets.Float(50.0)
    selected_round = traitlets.Int(0)

    def __init__(
        self,
        trace: Trace,
        modes: Sequence[Any] = MODES,
        *,
        round_trip_s: float = 0.05,
        concurrency: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.trace = trace
        self.errors = widgets.Output()
        options = [(mode_name(m), m) for m in modes]
        options += [(m, m) for m in MODES if m not in [v for _, v in options]]
        self.mode_box = widgets.SelectMultiple(
            options=options, value=tuple(modes), description="modes", rows=min(6, len(options))
        )
        self.cap_box = widgets.BoundedIntText(value=concurrency or 0, min=0, max=1000, description="cap")
        self.rtt_box = widgets.FloatSlider(
            value=round_trip_s * 1000,
            min=0,
            max=500,
            step=5,
            description="round trip",
            readout_format=".0f",
            style={"description_width": "initial"},
        )
        self.round_box = widgets.Dropdown(description="round")
        self.summary = widgets.HTML()
        self.timelines = widgets.HTML()
        self.details = widgets.HTML()
        self.open_box = OpenBox(guarded(self.errors, lambda traces, _: self.load(traces[0])))
        self.export = ExportBar(
            lambda: f"{self.trace.metadata.title}_compare",
            lambda: [(m, doc["rounds"]) for m, doc in self.results.items()],
            lambda: {
                "summary": self.rows,
                "calls": [row for m, doc in self.results.items() for row in calls_rows(doc, m)],
            },
            round_trip_s=lambda: self.round_trip_ms / 1000,
        )
        controls = widgets.HBox(
            [self.mode_box, widgets.VBox([self.cap_box, self.rtt_box, self.round_box])],
            layout=widgets.Layout(flex_flow="row wrap"),
        )
        super().__init__(
            [self.open_box, controls, self.summary, self.timelines, self.details, self.export, self.errors],
            **kwargs,
        )
        self.add_class("tcl-view")
        self.add_class("tcl-compare-view")
        self.results: dict[str, dict[str, Any]] = {}
        self.rows: list[dict[str, Any]] = []
        self._round_options()
        self.modes, self.concurrency, self.round_trip_ms = tuple(modes), concurrency or 0, round_trip_s * 1000
        widgets.link((self.mode_box, "value"), (self, "modes"))
        widgets.link((self.cap_box, "value"), (self, "concurrency"))
        widgets.link((self.rtt_box, "value"), (self, "round_trip_ms"))
        widgets.link((self.round_box, "value"), (self, "selected_round"))
        self.observe(guarded(self.errors, self.rerun), names=["modes", "concurrency", "round_trip_ms"])
        self.observe(guarded(self.errors, self.render), names=["selected_round"])
        self.rerun()

    def _round_options(self) -> None:
        options = [
            (f"round {r.round_index}: {len(r.tool_calls)} call(s)", r.round_index) for r in self.trace.rounds
        ]
        self.round_box.options = options
        self.round_box.value = options[0][1] if options else None

    def load(self, trace: Trace) -> None:
        """Compare another trace (same settings)."""
        self.trace = trace
        self._round_options()
        self.selected_round = 0
        self.rerun()

    def rerun(self, _: Any = None) -> None:
        from toolcall_lab.analysis import run_rows
        from toolcall_lab.replay import replay

        self.results, self.rows = {}, []
        origin = self.trace.metadata.origin
        from toolcall_lab.strategies import Serialized, resolve

        for mode in self.modes:
            strategy = resolve(mode)
            kwargs: dict[str, Any] = {}
            if isinstance(strategy, Serialized):
                kwargs["round_trip_s"] = self.round_trip_ms / 1000
            if self.concurrency:  # (strategies that run calls one at a time ignore it)
                kwargs["concurrency"] = self.concurrency
            result = replay(self.trace, strategy, **kwargs)
            doc = Trace.from_run(result, self.trace.metadata).to_dict()
            doc["metadata"].update(origin="replayed", replayed_from=origin, mode=mode_name(mode))
            self.results[mode_name(mode)] = doc
            row = run_rows(self.trace.metadata.title, result, self.trace)[0]
            row["mode"] = mode_name(mode)
            self.rows.append(row)
        self.render()

    def render(self, _: Any = None) -> None:
        end = max(
            (max(round_end(r) for r in d["rounds"]) for d in self.results.values() if d["rounds"]),
            default=1.0,
        )
        rtt = self.round_trip_ms / 1000
        meta = self.trace.metadata
        head = (
            f"<div class='tcl-head'><div class='tcl-title'>{e(meta.title)}</div><div class='tcl-facts'>"
            f"<span><span class='tcl-badge tcl-badge-warn'>replayed</span> on the virtual clock from a "
            f"{e(meta.origin)} trace</span><span>{e(timing_summary(self.trace.to_dict()))}</span>"
            f"<span>{len(self.trace.rounds)} rounds, {self.trace.n_calls} calls</span></div></div>"
        )
        self.summary.value = wrap(head + summary_table(self.rows))
        blocks, all_rounds = [], []
        for row, (mode, doc) in zip(self.rows, self.results.items(), strict=True):
            warn = f" · ⚠ skipped {row['skipped']} call(s): not comparable" if row["skipped"] else ""
            notes = sorted({n for r in doc["rounds"] for n in r.get("strategy_notes", ())})
            warn += "".join(f" · note: {n}" for n in notes)
            blocks.append(
                f"<div class='tcl-mode' data-mode='{e(mode)}'><b>{e(mode)}</b> <span class='tcl-muted'>"
                f"{doc['outcome']['wall_time_s']:.3f} s · {row['upstream_calls']} model calls · "
                f"{row['client_round_trips']} client round trips{e(warn)}</span>"
                + timeline_svg(
                    doc["rounds"],
                    start=0.0,
                    end=end,
                    highlight=self.selected_round,
                    round_trip_s=rtt,
                    legend=False,
                    min_px=480,
                    title=f"{mode}: timeline of the whole run",
                )
                + "</div>"
            )
            all_rounds += doc["rounds"]
        self.timelines.value = wrap(
            "<div class='tcl-muted'>all runs on one time axis; the selected round is highlighted</div>"
            + "".join(blocks)
            + legend_html(items_of(all_rounds, round_trip_s=rtt))
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
                body = round_html(r, round_trip_s=rtt, previous=prev, span=span)
            else:
                body = f"<i>no round {self.selected_round} in this run</i>"
            panels.append(f"<div class='tcl-panel' data-mode='{e(mode)}'><b>{e(mode)}</b>{body}</div>")
        self.details.value = wrap(
            f"<div class='tcl-muted'>round {self.selected_round} under each mode, on one time axis "
            f"({secs(span)} from each round's start)</div>"
            f"<div class='tcl-grid-panels'>{''.join(panels)}</div>"
        )

    def static_html(self) -> str:
        return wrap(self.summary.value + self.timelines.value + self.details.value)

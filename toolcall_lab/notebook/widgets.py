"""ipywidgets views: trace view and stream stepper here; compare, corpus and live views in their modules.

State lives in traitlets (testable from Python without a browser); every view renders from the
serialized trace (`Trace.to_dict()`) through `toolcall_lab.notebook.html` and `.timeline`. Callback
errors are shown in the view. Each view also prints a static HTML copy of itself, so notebooks read
on a code host, and in an HTML export without the widget JavaScript.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import traitlets

from toolcall_lab.formats.recordings import read_recording
from toolcall_lab.notebook._controls import (
    ExportBar,
    OpenBox,
    StaticFallback,
    box_options,
    guarded,
    note,
    wrap,
)
from toolcall_lab.notebook.compare import CompareView
from toolcall_lab.notebook.corpus import CorpusView
from toolcall_lab.notebook.export import calls_rows
from toolcall_lab.notebook.html import (
    header_html,
    mode_evidenced,
    prompt_html,
    round_html,
    round_spans,
    round_title,
    timing_summary,
)
from toolcall_lab.notebook.live import LiveView
from toolcall_lab.notebook.loading import Opened
from toolcall_lab.notebook.stream import StreamStates, read_stream, stepper_html
from toolcall_lab.notebook.theme import ORIGIN_NOTE, SUMMARY, e, exact, plural
from toolcall_lab.notebook.timeline import NARROWEST, Panel, timeline_svg
from toolcall_lab.runs import RunResult
from toolcall_lab.trace import Trace, TraceMetadata

__all__ = ["CompareView", "CorpusView", "LiveView", "StreamStepper", "TraceView", "as_doc"]


def as_doc(trace: Trace | RunResult | dict[str, Any]) -> dict[str, Any]:
    """The serialized form every view renders from. A bare `RunResult` is labelled with the origin
    it records (``recorded`` for a live model, ``scripted``, ``replayed``)."""
    if isinstance(trace, dict):
        return trace
    if isinstance(trace, RunResult):
        meta = TraceMetadata(title=f"run ({trace.mode})", origin=trace.origin)
        return Trace.from_run(trace, meta).to_dict()
    return trace.to_dict()


class TraceView(StaticFallback, widgets.VBox):  # type: ignore[misc]
    """A whole trace: run header, prompt and tools, whole-run timeline, then one folding panel per
    round (request as sent, assistant message, calls with their tool messages, round timeline): a
    ``<details>`` element, so Tab reaches its title and Enter or Space opens it; `selected_round` is
    the one open when shown.
    A file box opens another trace, a recording or a transcript (a file with several traces gets a
    chooser); an export bar saves the timeline and the calls."""

    show_raw = traitlets.Bool(False, help="show argument strings exactly as received")
    shared_scale = traitlets.Bool(False, help="draw every round on the longest round's time scale")
    selected_round = traitlets.Int(0, allow_none=True, help="the round shown open (None: all folded)")
    trace_index = traitlets.Int(0, help="which trace of the opened file is shown")

    def __init__(self, trace: Trace | RunResult | dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.errors = widgets.Output()
        self.header = widgets.HTML()
        self.choice = widgets.Dropdown(
            description="trace", layout=widgets.Layout(display="none", width="95%")
        )
        self.raw_box = widgets.Checkbox(value=False, description="raw argument strings", indent=False)
        self.scale_box = widgets.Checkbox(
            value=False, description="one time scale for every round", indent=False
        )
        self.rounds_html = widgets.HTML()
        """Every round panel, in one widget (a widget each cost about a millisecond per round)."""
        self.open_box = OpenBox(guarded(self.errors, self._opened, "open"))
        self.doc: dict[str, Any] = {}
        self._spans: list[float] = []
        self.export = ExportBar(
            lambda: str(self.doc.get("metadata", {}).get("title", "trace")),
            lambda: [self.panel()] if self.doc else [],
            lambda: {"calls": calls_rows(self.doc) if self.doc else []},
            what="this trace",
        )
        self.panels: list[str] = []
        """Each round's panel as shown (a ``<details>`` element)."""
        self._titles: list[str] = []
        self.traces: list[Trace] = []
        self._choosing = False
        super().__init__(
            [
                self.open_box,
                self.choice,
                self.header,
                widgets.HBox([self.raw_box, self.scale_box], layout=widgets.Layout(flex_flow="row wrap")),
                self.rounds_html,
                self.export,
                self.errors,
            ],
            **box_options(TraceView, kwargs),
        )
        self.add_class("tcl-view")
        self.add_class("tcl-trace-view")
        widgets.link((self.raw_box, "value"), (self, "show_raw"))
        widgets.link((self.scale_box, "value"), (self, "shared_scale"))
        self.observe(guarded(self.errors, self._opened_round), names=["selected_round"])
        self.observe(guarded(self.errors, self._rerender), names=["show_raw", "shared_scale"])
        self.choice.observe(guarded(self.errors, self._chosen), names=["value"])
        if trace is None:
            self.header.value = note("open a trace file, a recording, a transcript or a folder above")
        else:
            self.show(trace)

    def show(self, trace: Trace | RunResult | dict[str, Any]) -> None:
        """Display another trace in this view."""
        self.doc = as_doc(trace)
        rounds = self.doc["rounds"]
        self._spans = round_spans(rounds, shared=self.shared_scale)
        timeline = timeline_svg(rounds, min_px=NARROWEST)
        self.header.value = wrap(f"{header_html(self.doc)}{prompt_html(self.doc)}{timeline}")
        self._open = 0 if rounds else None
        known = mode_evidenced(self.doc) is not None
        self._titles = [round_title(r, mode=known) for r in rounds]
        self.panels = [self._panel(i) for i in range(len(rounds))]
        self._show_rounds()
        if self.selected_round != self._open:
            self.selected_round = self._open
        self.refresh_static()

    def _show_rounds(self) -> None:
        self.rounds_html.value = f"<div class='tcl tcl-rounds'>{''.join(self.panels)}</div>"

    def panel(self) -> Panel:
        """The whole run as the view's header states it: what the timeline exports save."""
        doc, rounds = self.doc, self.doc["rounds"]
        origin = doc["metadata"].get("origin")
        n_calls = sum(len(r["tool_calls"]) for r in rounds)
        caption = (
            f"{exact(doc['outcome']['wall_time_s'])} s · {plural(len(rounds), 'round')} · "
            f"{plural(n_calls, 'call')} · origin {origin}: {ORIGIN_NOTE.get(str(origin), origin)} · "
            f"{timing_summary(doc)}"
        )
        outcome = doc["outcome"]
        warning = (
            "" if outcome["status"] == "completed" else f"ended {outcome['status']} / {outcome['reason']}"
        )
        return Panel("the whole run", rounds, caption, warning)

    def _opened(self, opened: Opened) -> None:
        self.traces = list(opened.traces)
        self._choosing = True
        try:
            self.choice.options = [(f"{i + 1}: {t.metadata.title}", i) for i, t in enumerate(self.traces)]
            self.choice.value = 0
        finally:
            self._choosing = False
        self.choice.layout.display = None if len(self.traces) > 1 else "none"
        self.trace_index = 0
        self.show(self.traces[0])

    def _chosen(self, change: Any) -> None:
        if self._choosing or change["new"] is None or not self.traces:
            return
        self.trace_index = int(change["new"])
        self.show(self.traces[self.trace_index])

    @property
    def round_titles(self) -> list[str]:
        """Each round panel's title, as its summary line shows it."""
        return list(self._titles)

    def _panel(self, i: int) -> str:
        rounds = self.doc["rounds"]
        body = round_html(
            rounds[i],
            raw=self.show_raw,
            title=False,
            previous=rounds[i - 1] if i else None,
            span=self._spans[i],
        )
        opened = " open" if i == getattr(self, "_open", None) else ""
        return (  # (the stylesheet comes once, with the header)
            f"<details class='tcl-round-panel' data-round='{rounds[i]['round_index']}'{opened}>"
            f"{SUMMARY}<span class='tcl-round-title'>{e(self._titles[i])}</span></summary>"
            f"{body}</details>"
        )

    def _opened_round(self, change: Any) -> None:
        """Show round `selected_round` open (and the one open before folded)."""
        before, self._open = getattr(self, "_open", None), change["new"]
        for i in {before, self._open} - {None}:
            if i is not None and 0 <= i < len(self.panels):
                self.panels[i] = self._panel(i)
        self._show_rounds()
        self.refresh_static()

    def _rerender(self, _: Any = None) -> None:
        if not self.doc:
            return
        self._spans = round_spans(self.doc["rounds"], shared=self.shared_scale)
        self.panels = [self._panel(i) for i in range(len(self.panels))]
        self._show_rounds()
        self.refresh_static()

    def static_html(self) -> str:
        """The view as shown (header, then every round panel, the selected one open): the same
        markup, so printing it costs nothing more than joining it."""
        if not self.doc:
            return note("TraceView: no trace opened")
        return str(self.header.value + self.rounds_html.value)


def _streams(path: str | Path) -> tuple[list[tuple[str, StreamStates]], list[str]]:
    """The responses of a recording as the parser reads them, each as (label, steps), and what could
    not be stepped (whole responses, exchanges that could not be read, with why). A stream of several
    responses (Responses streams back to back, chat streams between ``[DONE]`` markers) gives one
    each, numbered as `toolcall-lab parse` numbers them."""
    from toolcall_lab.exceptions import UnknownFormatError, WireFormatError

    p = Path(path)
    if p.is_file() and p.stat().st_size == 0:
        raise WireFormatError(f"{p}: the file is empty (0 bytes): there is no stream to step through")
    try:
        exchanges = read_recording(p).exchanges
    except UnknownFormatError as exc:
        if "holds no payloads" not in str(exc):
            raise
        raise WireFormatError(
            f"{p}: no chunks to step through: the file holds no payloads (no `data:` line or JSON "
            "chunk; only blank lines, comments, event names or [DONE])"
        ) from None
    streams: list[tuple[str, StreamStates]] = []
    whole: list[str] = []
    batch = 0
    for k, ex in enumerate(exchanges):
        where = f"exchange {k + 1} of {len(exchanges)}" if len(exchanges) > 1 else "the stream"
        if ex.unreadable is not None:
            whole.append(f"exchange {k + 1}: could not be read: {ex.unreadable}")
            batch += 1
            continue
        if ex.payloads is None:
            what = f"the provider's error: {ex.error}" if ex.error else "a whole (non-streamed) response"
            whole.append(f"exchange {k + 1}: {what}, no chunks to step through")
            batch += 1
            continue
        items = ex.items if ex.items is not None else ex.payloads
        pieces = read_stream(items, lines=ex.lines, fmt=ex.format, batch=batch)
        batch += len(pieces)
        for j, states in enumerate(pieces):
            label = f"{where}, response {j + 1} of {len(pieces)}" if len(pieces) > 1 else where
            streams.append((label, states))
    return streams, whole


class StreamStepper(StaticFallback, widgets.VBox):  # type: ignore[misc]
    """Step through the chunks of one streamed response (chat completions, Anthropic Messages or
    Responses API): each chunk's delta, the calls assembled so far with what the chunk appended
    highlighted, and the findings as they occur, a provider error included (the parser stops
    there, and the stepper shows where). The controls (first, previous, play, next, last, a slider)
    run in the page, so a static export steps through the chunks without a kernel; setting `step`
    from Python shows that step. A file with several streams (exchanges of a cassette, Responses
    streams back to back) says so and offers a chooser (`stream`)."""

    step = traitlets.Int(0)
    stream = traitlets.Int(0, help="which stream of the file is shown")

    def __init__(
        self,
        source: Sequence[dict[str, Any]] | str | Path,
        *,
        batch: int = 0,
        stream: int = 0,
        format: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.batch = batch
        self.whole: list[str] = []
        if isinstance(source, str | Path):
            read, self.whole = _streams(source)
            if not read:
                why = "; ".join(self.whole) or "a whole (non-streamed) response"
                raise ValueError(f"{source}: no stream to step through ({why})")
        else:
            chunks = list(source)
            pieces = read_stream(chunks, fmt=format, batch=batch)
            read = [
                (f"response {j + 1} of {len(pieces)}" if len(pieces) > 1 else "the stream", states)
                for j, states in enumerate(pieces)
            ]
        self.read = read
        self.streams = [(label, list(states.chunks), states.format) for label, states in read]
        """Each response: (label, its chunks, its wire format)."""
        self.view = widgets.HTML()
        self.chooser = widgets.Dropdown(
            options=[
                (f"{label} ({states.counts()}, {states.format})", i) for i, (label, states) in enumerate(read)
            ],
            description="stream",
            layout=widgets.Layout(display=None if len(self.streams) > 1 else "none", width="95%"),
        )
        self.errors = widgets.Output()
        super().__init__([self.chooser, self.view, self.errors], **box_options(StreamStepper, kwargs))
        self.add_class("tcl-view")
        self.add_class("tcl-stream-stepper")
        widgets.link((self.chooser, "value"), (self, "stream"))
        self.observe(guarded(self.errors, self._render), names=["step"])
        self.observe(guarded(self.errors, self._load), names=["stream"])
        self.stream = max(0, min(stream, len(self.streams) - 1))
        self._load()

    @traitlets.validate("stream")
    def _valid_stream(self, proposal: Any) -> int:
        value = int(proposal["value"])
        if not 0 <= value < len(self.streams):
            raise traitlets.TraitError(f"stream={value}: this file has streams 0 to {len(self.streams) - 1}")
        return value

    def _load(self, _: Any = None) -> None:
        label, chunks, self.format = self.streams[self.stream]
        self.label = label
        self.chunks = chunks
        self.states = self.read[self.stream][1]
        self._data = self.states.data()
        if self.step != 0:
            self.step = 0  # renders
        else:
            self._render()

    @property
    def last_step(self) -> int:
        return len(self.states) - 1

    @traitlets.validate("step")
    def _valid_step(self, proposal: Any) -> int:
        states = getattr(self, "states", None)
        last = len(states) - 1 if states is not None else 0
        return max(0, min(int(proposal["value"]), last))

    def _which(self, *, page: bool) -> str:
        """Which stream of the file is shown: in the widget, the others are a choice above; a page
        (the static copy, `save_html`) holds this one stream only, and says how to get the others."""
        if len(self.streams) == 1 and not self.whole:
            return ""
        others = "".join(f"<li>{e(w)}</li>" for w in self.whole)
        n = len(self.streams)
        if not page:
            where = " (choose another above)" if n > 1 else ""
        elif n > 1:
            where = (
                f"; this page holds this one stream only (another: StreamStepper(path, stream=k) "
                f"with k from 0 to {n - 1}, then save_html)"
            )
        else:
            where = "; this page holds this one stream only"
        return (
            f"<div class='tcl-muted'>showing {e(self.label)}: stream {self.stream + 1} of {n} in this "
            f"file{e(where)}" + (f"; not stepped:<ul>{others}</ul>" if others else "") + "</div>"
        )

    def _render(self, _: Any = None) -> None:
        self._frame = stepper_html(self.states, self.step, data=self._data)
        self.view.value = self._which(page=False) + self._frame
        self.refresh_static()

    def static_html(self) -> str:
        return self._which(page=True) + self._frame

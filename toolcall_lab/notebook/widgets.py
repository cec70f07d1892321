"""ipywidgets views: trace view, compare view, stream stepper, live view (and the corpus view).

State lives in traitlets (testable from Python without a browser); every view renders from the
serialized trace (`Trace.to_dict()`) through `toolcall_lab.notebook.html` and `.timeline`. Callback
errors are shown in the view. Each view also carries a static HTML rendering, so notebooks read
on a code host without a kernel.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import traitlets

from toolcall_lab.events import (
    Action,
    FinalAnswer,
    ModelResponded,
    Observation,
    RoundStarted,
    RunEvent,
    RunFinished,
    Thought,
)
from toolcall_lab.formats.recordings import read_recording
from toolcall_lab.notebook._controls import ExportBar, OpenBox, StaticFallback, guarded, note, wrap
from toolcall_lab.notebook.compare import CompareView
from toolcall_lab.notebook.corpus import CorpusView
from toolcall_lab.notebook.export import calls_rows
from toolcall_lab.notebook.html import (
    header_html,
    prompt_html,
    round_duration,
    round_html,
    round_title,
    trace_html,
)
from toolcall_lab.notebook.stream import StreamStates, stepper_html
from toolcall_lab.notebook.theme import e
from toolcall_lab.notebook.timeline import round_end, timeline_svg
from toolcall_lab.runs import RunResult
from toolcall_lab.trace import Trace, TraceMetadata, call_to_dict

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
    """A whole trace: run header, prompt and tools, whole-run timeline, then one accordion panel per
    round (request as sent, assistant message, calls with their tool messages, round timeline).
    A file picker opens another trace or recording; an export bar saves the timeline and calls."""

    show_raw = traitlets.Bool(False, help="show argument strings exactly as received")
    selected_round = traitlets.Int(0, allow_none=True)

    def __init__(self, trace: Trace | RunResult | dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.errors = widgets.Output()
        self.header = widgets.HTML()
        self.choice = widgets.Dropdown(
            description="trace", layout=widgets.Layout(display="none", width="95%")
        )
        self.raw_box = widgets.Checkbox(value=False, description="raw argument strings", indent=False)
        self.accordion = widgets.Accordion()
        self.open_box = OpenBox(guarded(self.errors, self._opened))
        self.doc: dict[str, Any] = {}
        self._rtt = self._span = 0.0
        self.export = ExportBar(
            lambda: str(self.doc.get("metadata", {}).get("title", "trace")),
            lambda: [(str(self.doc["metadata"]["title"]), self.doc["rounds"])] if self.doc else [],
            lambda: {"calls": calls_rows(self.doc) if self.doc else []},
            round_trip_s=lambda: self._rtt,
        )
        self.panels: list[widgets.HTML] = []
        self.traces: list[Trace] = []
        super().__init__(
            [self.open_box, self.choice, self.header, self.raw_box, self.accordion, self.export, self.errors],
            **kwargs,
        )
        self.add_class("tcl-view")
        self.add_class("tcl-trace-view")
        widgets.link((self.raw_box, "value"), (self, "show_raw"))
        widgets.link((self.accordion, "selected_index"), (self, "selected_round"))
        self.observe(guarded(self.errors, self._rerender), names=["show_raw"])
        self.choice.observe(guarded(self.errors, self._chosen), names=["value"])
        if trace is None:
            self.header.value = note("open a trace file, a recording or a transcript above")
        else:
            self.show(trace)

    def show(self, trace: Trace | RunResult | dict[str, Any]) -> None:
        """Display another trace in this view."""
        self.doc = as_doc(trace)
        self._rtt = float(self.doc["metadata"].get("settings", {}).get("round_trip_s") or 0.0)
        rounds = self.doc["rounds"]
        self._span = max((round_duration(r) for r in rounds), default=0.0)
        timeline = timeline_svg(rounds, round_trip_s=self._rtt, min_px=480)
        self.header.value = wrap(f"{header_html(self.doc)}{prompt_html(self.doc)}{timeline}")
        self.panels = [widgets.HTML(self._panel(i)) for i in range(len(rounds))]
        self.accordion.children = self.panels
        self.accordion.titles = tuple(round_title(r) for r in rounds)
        self.accordion.selected_index = 0 if rounds else None

    def _opened(self, traces: list[Trace], label: str) -> None:
        self.traces = traces
        if len(traces) > 1:
            self.choice.options = [(f"{i}: {t.metadata.title}", i) for i, t in enumerate(traces)]
            self.choice.layout.display = None
        else:
            self.choice.layout.display = "none"
        self.show(traces[0])

    def _chosen(self, change: Any) -> None:
        if change["new"] is not None and self.traces:
            self.show(self.traces[change["new"]])

    def _panel(self, i: int) -> str:
        rounds = self.doc["rounds"]
        body = round_html(
            rounds[i],
            raw=self.show_raw,
            round_trip_s=self._rtt,
            title=False,
            previous=rounds[i - 1] if i else None,
            span=self._span,
        )
        return wrap(body)

    def _rerender(self, _: Any = None) -> None:
        for i, panel in enumerate(self.panels):
            panel.value = self._panel(i)

    def static_html(self) -> str:
        return trace_html(self.doc, raw=self.show_raw) if self.doc else ""


class StreamStepper(StaticFallback, widgets.VBox):  # type: ignore[misc]
    """Step through the chunks of one streamed response (chat completions, Anthropic Messages or
    Responses API): each chunk's delta, the calls assembled so far with what the chunk appended
    highlighted, and the findings as they occur. The controls (first, previous, play, next, last,
    a slider) run in the page, so a static export steps through the chunks without a kernel;
    setting `step` from Python shows that step. A file holding several Responses streams shows the
    first."""

    step = traitlets.Int(0)

    def __init__(
        self, source: Sequence[dict[str, Any]] | str | Path, *, batch: int = 0, **kwargs: Any
    ) -> None:
        self.format = "openai-chat"
        if isinstance(source, str | Path):
            exchange = read_recording(source).exchanges[0]
            if exchange.payloads is None:
                raise ValueError(f"{source}: a whole (non-streamed) response has no chunks to step through")
            source, self.format = exchange.payloads, exchange.format
        chunks = list(source)
        if self.format == "openai-responses":  # several consecutive responses: keep the first
            starts = [i for i, c in enumerate(chunks) if c.get("type") == "response.created"]
            if len(starts) > 1:
                chunks = chunks[: starts[1]]
        self.chunks = chunks
        self.stream = StreamStates.build(chunks, self.format, batch)
        self.states = [(s, list(f)) for s, f in zip(self.stream.snapshots, self.stream.findings, strict=True)]
        """Per step: (calls so far per choice and index, findings so far); the last is after finish()."""
        self.view = widgets.HTML()
        super().__init__([self.view], **kwargs)
        self.add_class("tcl-view")
        self.add_class("tcl-stream-stepper")
        self.observe(self._render, names=["step"])
        self._render()

    @property
    def last_step(self) -> int:
        return len(self.states) - 1

    @traitlets.validate("step")
    def _valid_step(self, proposal: Any) -> int:
        return max(0, min(int(proposal["value"]), len(self.states) - 1))

    def _render(self, _: Any = None) -> None:
        self.view.value = stepper_html(self.stream, self.step)

    def static_html(self) -> str:
        return self.view.value  # type: ignore[no-any-return]


class LiveView(StaticFallback, widgets.VBox):  # type: ignore[misc]
    """A trace view fed by a run's events: ``await run(..., on_event=live.on_event)``."""

    n_events = traitlets.Int(0)

    def __init__(
        self, title: str = "live run", mode: str = "", *, min_interval_s: float = 0.05, **kwargs: Any
    ) -> None:
        self.title, self.mode = title, mode
        self.rounds: dict[int, dict[str, Any]] = {}
        self.final: str | None = None
        self.finished: str | None = None
        self.min_interval_s = min_interval_s
        self._last = 0.0
        self.view = widgets.HTML(
            wrap(f"<b>{e(title)}</b> <span class='tcl-muted'>waiting for events…</span>")
        )
        super().__init__([self.view], **kwargs)
        self.add_class("tcl-view")
        self.add_class("tcl-live-view")

    def _round(self, index: int, at: float = 0.0) -> dict[str, Any]:
        return self.rounds.setdefault(
            index,
            {
                "round_index": index,
                "mode": self.mode or "?",
                "final": False,
                "tool_calls": [],
                "tool_executions": [],
                "findings": [],
                "assistant_message": {"role": "assistant", "content": None},
                "response": {"started_at": at, "ended_at": at, "latency_s": 0.0, "chunks": []},
            },
        )

    def on_event(self, event: RunEvent) -> None:
        self.n_events += 1
        if isinstance(event, RoundStarted):
            self._round(event.round_index, event.at)
        elif isinstance(event, ModelResponded):
            r = self._round(event.round_index)
            r["response"].update(
                ended_at=event.at, latency_s=event.latency_s, ttfc_s=event.ttfc_s, usage=event.usage
            )
        elif isinstance(event, Thought):
            self._round(event.round_index)["assistant_message"]["content"] = event.text
        elif isinstance(event, Action):
            self._round(event.round_index)["tool_calls"].append(call_to_dict(event.call))
        elif isinstance(event, Observation):
            x = event.execution
            self._round(event.round_index)["tool_executions"].append(
                {
                    "tool_call_id": x.tool_call_id,
                    "name": x.name,
                    "status": x.status,
                    "result": x.result,
                    "started_at": x.started_at,
                    "ended_at": x.ended_at,
                    "duration_s": x.duration_s,
                }
            )
        elif isinstance(event, FinalAnswer):
            self._round(event.round_index)["assistant_message"]["content"] = event.text
            self.final = event.text
        elif isinstance(event, RunFinished):
            self.finished = f"{event.status} / {event.reason}"
        now = time.monotonic()
        if (
            event.kind in ("run_finished", "final_answer", "model_response")
            or now - self._last >= self.min_interval_s
        ):
            self._last = now
            self.render()

    def html(self) -> str:
        rounds = [self.rounds[k] for k in sorted(self.rounds)]
        for r in rounds:
            r["response"]["ended_at"] = max(r["response"]["ended_at"], r["response"]["started_at"])
        last = max((round_end(r) for r in rounds), default=0.0)
        span = max((round_duration(r) for r in rounds), default=0.0)
        status = self.finished or ("running" if self.final is None else "final answer received")
        final = (
            f"<div><span class='tcl-role'>final answer</span>{e(self.final)}</div>"
            if self.final is not None
            else ""
        )
        panels = "".join(
            round_html(r, span=span, previous=rounds[i - 1] if i else None) for i, r in enumerate(rounds)
        )
        return (
            f"<div class='tcl-head'><div class='tcl-title'>{e(self.title)}</div><div class='tcl-facts'>"
            f"<span><span class='tcl-badge'>origin: live</span></span><span>{e(status)}</span>"
            f"<span>{self.n_events} events</span><span>{len(rounds)} rounds</span><span>{last:.2f} s</span>"
            f"</div></div>{final}<div class='tcl-live-timeline'>"
            f"{timeline_svg(rounds, min_px=420) if rounds else ''}"
            f"</div>{panels}"
        )

    def render(self) -> None:
        self.view.value = wrap(self.html())

    def static_html(self) -> str:
        return wrap(self.html())

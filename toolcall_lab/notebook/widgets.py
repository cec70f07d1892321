"""ipywidgets views: trace view, compare view, stream stepper and live view.

State lives in traitlets (testable from Python without a browser); every view renders from the
serialized trace (`Trace.to_dict()`) through `toolcall_lab.notebook.html`. Callback errors are shown
in an Output widget instead of disappearing into the browser console.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable, Sequence
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
    Thought,
)
from toolcall_lab.formats.anthropic import AnthropicStreamAccumulator
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator
from toolcall_lab.formats.openai_responses import ResponsesStreamAccumulator
from toolcall_lab.formats.recordings import read_recording
from toolcall_lab.notebook.html import (
    CSS,
    _e,
    header_html,
    round_duration,
    round_html,
    round_title,
    summary_table,
    timeline_svg,
)
from toolcall_lab.records import MODES, Mode
from toolcall_lab.runs import RunResult
from toolcall_lab.trace import Trace, TraceMetadata, call_to_dict


def as_doc(trace: Trace | RunResult | dict[str, Any]) -> dict[str, Any]:
    """The serialized form every view renders from."""
    if isinstance(trace, dict):
        return trace
    if isinstance(trace, RunResult):
        trace = Trace.from_run(trace, TraceMetadata(title="run", origin="recorded"))
    return trace.to_dict()


def _guarded(out: widgets.Output, fn: Callable[..., None]) -> Callable[..., None]:
    def wrapper(*args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # shown to the user in the view, not lost in the browser console
            with out:
                print(traceback.format_exc())

    return wrapper


class TraceView(widgets.VBox):  # type: ignore[misc]
    """One panel per round: title, the message tree (calls with matched results), the round timeline."""

    show_raw = traitlets.Bool(False, help="show argument strings exactly as received")
    selected_round = traitlets.Int(0, allow_none=True)

    def __init__(self, trace: Trace | RunResult | dict[str, Any], **kwargs: Any) -> None:
        self.doc = as_doc(trace)
        self._rtt = float(self.doc["metadata"].get("settings", {}).get("round_trip_s") or 0.0)
        self.errors = widgets.Output()
        self.header = widgets.HTML(self._header())
        self.raw_box = widgets.Checkbox(value=False, description="raw argument strings", indent=False)
        rounds = self.doc["rounds"]
        self.panels = [widgets.HTML(self._panel(r)) for r in rounds]
        self.accordion = widgets.Accordion(children=self.panels, titles=tuple(round_title(r) for r in rounds))
        self.accordion.selected_index = 0 if rounds else None
        super().__init__([self.header, self.raw_box, self.accordion, self.errors], **kwargs)
        self.add_class("tcl-trace-view")
        widgets.link((self.raw_box, "value"), (self, "show_raw"))
        widgets.link((self.accordion, "selected_index"), (self, "selected_round"))
        self.observe(_guarded(self.errors, self._rerender), names=["show_raw"])

    def _header(self) -> str:
        timeline = timeline_svg(self.doc["rounds"], round_trip_s=self._rtt)
        return f"<div class='tcl'>{CSS}{header_html(self.doc)}{timeline}</div>"

    def _panel(self, r: dict[str, Any]) -> str:
        body = round_html(r, raw=self.show_raw, round_trip_s=self._rtt, title=False)
        return f"<div class='tcl'>{CSS}{body}</div>"

    def _rerender(self, _: Any = None) -> None:
        for panel, r in zip(self.panels, self.doc["rounds"], strict=True):
            panel.value = self._panel(r)


class CompareView(widgets.VBox):  # type: ignore[misc]
    """The same trace under several modes: shared time axis, synchronized round, summary table.

    Changing the modes, the parallel concurrency cap or the client round trip re-runs the replays on
    the virtual clock (milliseconds).
    """

    modes = traitlets.Tuple(default_value=tuple(MODES))
    concurrency = traitlets.Int(0, help="parallel mode cap; 0 = no cap")
    round_trip_ms = traitlets.Float(50.0)
    selected_round = traitlets.Int(0)

    def __init__(
        self,
        trace: Trace,
        modes: Sequence[Mode] = MODES,
        *,
        round_trip_s: float = 0.05,
        concurrency: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.trace = trace
        self.errors = widgets.Output()
        self.mode_box = widgets.SelectMultiple(
            options=list(MODES), value=tuple(modes), description="modes", rows=4
        )
        self.cap_box = widgets.BoundedIntText(value=concurrency or 0, min=0, max=1000, description="cap")
        self.rtt_box = widgets.FloatSlider(
            value=round_trip_s * 1000, min=0, max=500, step=5, description="round trip ms"
        )
        n = len(trace.rounds)
        self.round_box = widgets.Dropdown(
            options=[(f"round {i}", i) for i in range(n)], value=0, description="round"
        )
        self.summary = widgets.HTML()
        self.timelines = widgets.HTML()
        self.details = widgets.HBox(layout=widgets.Layout(flex_flow="row wrap"))
        controls = widgets.HBox([self.mode_box, widgets.VBox([self.cap_box, self.rtt_box, self.round_box])])
        super().__init__([controls, self.summary, self.timelines, self.details, self.errors], **kwargs)
        self.add_class("tcl-compare-view")
        self.results: dict[str, dict[str, Any]] = {}
        self.rows: list[dict[str, Any]] = []
        self.modes, self.concurrency, self.round_trip_ms = tuple(modes), concurrency or 0, round_trip_s * 1000
        widgets.link((self.mode_box, "value"), (self, "modes"))
        widgets.link((self.cap_box, "value"), (self, "concurrency"))
        widgets.link((self.rtt_box, "value"), (self, "round_trip_ms"))
        widgets.link((self.round_box, "value"), (self, "selected_round"))
        self.observe(_guarded(self.errors, self.rerun), names=["modes", "concurrency", "round_trip_ms"])
        self.observe(_guarded(self.errors, self.render), names=["selected_round"])
        self.rerun()

    def rerun(self, _: Any = None) -> None:
        from toolcall_lab.analysis import run_rows
        from toolcall_lab.replay import replay

        self.results, self.rows = {}, []
        for mode in self.modes:
            kwargs: dict[str, Any] = {}
            if mode == "serialized":
                kwargs["round_trip_s"] = self.round_trip_ms / 1000
            if mode == "parallel" and self.concurrency:
                kwargs["concurrency"] = self.concurrency
            result = replay(self.trace, mode, **kwargs)
            self.results[mode] = Trace.from_run(result, self.trace.metadata).to_dict()
            self.rows.append(run_rows(self.trace.metadata.title, result, self.trace)[0])
        self.render()

    def render(self, _: Any = None) -> None:
        end = max((r["outcome"]["wall_time_s"] for r in self.results.values()), default=1.0)
        rtt = self.round_trip_ms / 1000
        self.summary.value = f"<div class='tcl'>{CSS}{summary_table(self.rows)}</div>"
        svgs = "".join(
            f"<div><b>{_e(mode)}</b> {doc['outcome']['wall_time_s']:.2f} s<br>"
            + timeline_svg(
                doc["rounds"], start=0.0, end=end, highlight=self.selected_round, label=mode, round_trip_s=rtt
            )
            + "</div>"
            for mode, doc in self.results.items()
        )
        self.timelines.value = f"<div class='tcl'>{svgs}</div>"
        panels = []
        for mode, doc in self.results.items():
            rounds = [r for r in doc["rounds"] if r["round_index"] == self.selected_round]
            body = round_html(rounds[0], round_trip_s=rtt) if rounds else "<i>no such round</i>"
            panels.append(
                widgets.HTML(f"<div class='tcl' style='width:420px'>{CSS}<b>{_e(mode)}</b>{body}</div>")
            )
        self.details.children = panels


class StreamStepper(widgets.VBox):  # type: ignore[misc]
    """Step through the chunks of one streamed response (chat completions, Anthropic Messages or
    Responses API): the chunk, the calls assembled so far per index (arguments growing), and
    findings as they appear. A file holding several Responses streams shows the first."""

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
        self.chunks = list(source)
        if self.format == "openai-responses":  # several consecutive responses: keep the first
            starts = [i for i, c in enumerate(self.chunks) if c.get("type") == "response.created"]
            if len(starts) > 1:
                self.chunks = self.chunks[: starts[1]]
        self.states = self._states(batch)
        self.slider = widgets.IntSlider(
            value=0,
            min=0,
            max=len(self.chunks),
            description="chunk",
            continuous_update=True,
            layout=widgets.Layout(width="90%"),
        )
        self.view = widgets.HTML()
        super().__init__([self.slider, self.view], **kwargs)
        self.add_class("tcl-stream-stepper")
        widgets.link((self.slider, "value"), (self, "step"))
        self.observe(self._render, names=["step"])
        self._render()

    def _states(self, batch: int) -> list[tuple[dict[int, dict[int, dict[str, Any]]], list[dict[str, Any]]]]:
        acc: ChatCompletionAccumulator | AnthropicStreamAccumulator | ResponsesStreamAccumulator
        if self.format == "anthropic":
            acc = AnthropicStreamAccumulator(batch=batch)
        elif self.format == "openai-responses":
            acc = ResponsesStreamAccumulator(batch=batch)
        else:
            acc = ChatCompletionAccumulator(batch=batch)
        states = []
        for chunk in self.chunks:
            acc.feed(chunk)
            states.append((acc.snapshot(), [f.to_dict() for f in acc.findings]))
        final = acc.finish()
        done = {
            c.index: {
                idx: {"id": t.tool_call_id, "name": t.name, "arguments": t.arguments}
                for idx, t in enumerate(c.tool_calls)
            }
            for c in final.choices
        }
        states.append((done, [f.to_dict() for f in final.findings]))
        return states

    def _render(self, _: Any = None) -> None:
        i = self.step
        snapshot, findings = self.states[i]
        chunk = (
            json.dumps(self.chunks[i], indent=1, ensure_ascii=False)
            if i < len(self.chunks)
            else "(end of stream)"
        )
        rows = "".join(
            f"<tr><td>{ci}</td><td>{idx}</td><td>{_e(c['id'])}</td><td>{_e(c['name'])}</td>"
            f"<td style='text-align:left'><code>{_e(c['arguments'])}</code></td></tr>"
            for ci, calls in snapshot.items()
            for idx, c in calls.items()
        )
        found = (
            "".join(
                f"<li>chunk {f['chunk_index']}: <b>{_e(f['kind'])}</b> {_e(f['message'])}</li>"
                for f in findings
            )
            or "<li class='tcl-muted'>none yet</li>"
        )
        label = (
            f"chunk {i} of {len(self.chunks)}" if i < len(self.chunks) else "after the last chunk (finish)"
        )
        self.view.value = (
            f"<div class='tcl'>{CSS}<b>{label}</b><pre style='max-height:14em;overflow:auto'>"
            f"{_e(chunk)}</pre><b>calls so far</b><table class='tcl-table'><tr><th>choice</th>"
            f"<th>index</th><th>id</th><th>name</th><th>arguments</th></tr>{rows}</table>"
            f"<b>findings</b><ul>{found}</ul></div>"
        )


class LiveView(widgets.VBox):  # type: ignore[misc]
    """A trace view fed by a run's events: ``await run(..., on_event=live.on_event)``."""

    n_events = traitlets.Int(0)

    def __init__(
        self, title: str = "live run", mode: str = "", *, min_interval_s: float = 0.05, **kwargs: Any
    ) -> None:
        self.title, self.mode = title, mode
        self.rounds: dict[int, dict[str, Any]] = {}
        self.final: str | None = None
        self.min_interval_s = min_interval_s
        self._last = 0.0
        self.view = widgets.HTML(f"<div class='tcl'>{CSS}<b>{_e(title)}</b> waiting for events…</div>")
        super().__init__([self.view], **kwargs)
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
            r["response"].update(ended_at=event.at, latency_s=event.latency_s)
        elif isinstance(event, Thought):
            self._round(event.round_index)["assistant_message"]["content"] = event.text
        elif isinstance(event, Action):
            self._round(event.round_index)["tool_calls"].append(call_to_dict(event.call))
        elif isinstance(event, Observation):
            e = event.execution
            self._round(event.round_index)["tool_executions"].append(
                {
                    "tool_call_id": e.tool_call_id,
                    "name": e.name,
                    "status": e.status,
                    "result": e.result,
                    "started_at": e.started_at,
                    "ended_at": e.ended_at,
                    "duration_s": e.duration_s,
                }
            )
        elif isinstance(event, FinalAnswer):
            self._round(event.round_index)["assistant_message"]["content"] = event.text
            self.final = event.text
        now = time.monotonic()
        if (
            event.kind in ("run_finished", "final_answer", "model_response")
            or now - self._last >= self.min_interval_s
        ):
            self._last = now
            self.render()

    def render(self) -> None:
        rounds = [self.rounds[k] for k in sorted(self.rounds)]
        for r in rounds:
            r["response"]["ended_at"] = max(r["response"]["ended_at"], r["response"]["started_at"])
        status = f"final answer: {_e(self.final)}" if self.final is not None else f"{self.n_events} events"
        last = max((round_duration(r) + r["response"]["started_at"] for r in rounds), default=0.0)
        self.view.value = (
            f"<div class='tcl'>{CSS}<b>{_e(self.title)}</b> <span class='tcl-muted'>{status} · "
            f"{last:.2f} s</span>{timeline_svg(rounds)}"
            f"{''.join(round_html(r) for r in rounds)}</div>"
        )

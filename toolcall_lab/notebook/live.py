"""The live view: a run drawn from its events as they arrive, each run apart from any other.

Events carry the run they belong to (`RunEvent.run_id`, set by the loop), so a view fed by two
runs at once (``asyncio.gather``) draws two runs, never one merged run. Events without a run id
(an older emitter, events made by hand) are followed one run at a time: a round 0 after the run
finished starts the next run, and a round that starts twice before (two such runs interleaved)
makes the view refuse to draw that run, saying why, instead of drawing a mixture.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets
import traitlets

from toolcall_lab.events import (
    Action,
    ErrorEvent,
    FinalAnswer,
    ModelResponded,
    Observation,
    RoundStarted,
    RunEvent,
    RunFinished,
    Thought,
)
from toolcall_lab.notebook._controls import StaticFallback, box_options, wrap
from toolcall_lab.notebook.html import round_html, round_spans, timing_summary
from toolcall_lab.notebook.round_state import round_status
from toolcall_lab.notebook.theme import SUMMARY, e, plural, secs
from toolcall_lab.notebook.timeline import NARROWEST, round_end, timeline_svg
from toolcall_lab.records import Round
from toolcall_lab.trace import call_to_dict

TANGLED = (
    "events of two runs without a run id are interleaved (round {index} started twice): this view "
    "cannot tell them apart, so it does not draw this run; give each run its own LiveView, or emit "
    "events with a run_id"
)


def new_step() -> dict[str, Any]:
    """A round's progress before any event said more of it."""
    return {"responded": False, "expected": 0, "started": [], "answered": False}


@dataclass(slots=True)
class LiveRun:
    """What the events of one run said so far."""

    key: str
    mode: str = ""
    rounds: dict[int, dict[str, Any]] = field(default_factory=dict)
    final: str | None = None
    finished: str | None = None
    finished_at: float | None = None
    warnings: list[str] = field(default_factory=list)
    events: int = 0
    tangled: str | None = None
    """Why the view refuses to draw this run (events of two runs without ids interleaved)."""
    now: float = 0.0
    """The latest time an event of this run carried: how far a round in progress is drawn."""
    errors: list[str] = field(default_factory=list)
    """What the run's error events said (why it stopped), as a trace view shows its error."""
    notes: list[str] = field(default_factory=list)
    """What the view says of how it drew the run (not a problem: those are `warnings`)."""
    progress: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Per round, what the events said of its progress: whether the model responded, how many calls
    it announced, when each call started, whether the final answer came."""

    def round(self, index: int, at: float = 0.0) -> dict[str, Any]:
        return self.rounds.setdefault(
            index,
            {
                "round_index": index,
                "mode": self.mode,  # "" when not given: a live view cannot know it from the events
                "final": False,
                "tool_calls": [],
                "tool_executions": [],
                "round_trips": [],
                "findings": [],
                "assistant_message": {"role": "assistant", "content": None},
                "response": {
                    "started_at": at,
                    "ended_at": at,
                    "latency_s": 0.0,
                    "chunks": [],
                    "n_chunks": None,
                    "chunk_timing": None,
                },
            },
        )

    def take(self, event: RunEvent) -> None:
        """One event of this run."""
        if self.finished is not None:
            self.warnings.append(f"a {event.kind} event arrived after the run finished")
        self.events += 1
        self.now = max(self.now, event.at)
        index = getattr(event, "round_index", None)
        step = self.progress.setdefault(index, new_step()) if isinstance(index, int) else {}
        if isinstance(event, RoundStarted):
            self.round(event.round_index, event.at)
        elif isinstance(event, ModelResponded):
            step.update(responded=True, expected=event.n_tool_calls)
            r = self.round(event.round_index)
            timing = getattr(event, "timing", None)
            # one source for the bar and the text: the model call's own times (an older emitter
            # without them: the call ended when the event says, `latency_s` before)
            ended = event.ended_at if event.ended_at is not None else event.at
            started = event.started_at if event.started_at is not None else ended - event.latency_s
            r["response"].update(
                started_at=started,
                ended_at=ended,
                latency_s=ended - started,
                ttfc_s=event.ttfc_s,
                usage=event.usage,
                n_chunks=getattr(event, "n_chunks", None),
                chunk_timing=getattr(event, "chunk_timing", None),
                **({"timing": timing.to_dict()} if timing is not None else {}),
            )
        elif isinstance(event, Thought):
            self.round(event.round_index)["assistant_message"]["content"] = event.text
        elif isinstance(event, Action):
            self.round(event.round_index)["tool_calls"].append(call_to_dict(event.call))
            step["started"].append(event.at)
        elif isinstance(event, Observation):
            x = event.execution
            self.round(event.round_index)["tool_executions"].append(
                {
                    "tool_call_id": x.tool_call_id,
                    "name": x.name,
                    "status": x.status,
                    "result": x.result,
                    "queued_at": getattr(x, "queued_at", None),
                    "started_at": x.started_at,
                    "ended_at": x.ended_at,
                    "duration_s": x.duration_s,
                    "timing": x.timing.to_dict(),
                }
            )
        elif isinstance(event, FinalAnswer):
            self.round(event.round_index)["assistant_message"]["content"] = event.text
            self.final = event.text
            step["answered"] = True
        elif isinstance(event, RunFinished):
            self.finished = f"{event.status} / {event.reason}"
            self.finished_at = event.at
            if event.rounds is not None:
                self.settle(event.rounds)
        elif isinstance(event, ErrorEvent):
            self.errors.append(event.message)

    def settle(self, rounds: tuple[Round, ...]) -> None:
        """End on the run's record: its rounds replace what the events said, so the view shows
        every call the result holds (a call cut off before it started had no event) with its
        status and tool message, as a trace view of the result does."""
        announced = sum(len(r["tool_calls"]) for r in self.rounds.values())
        drawn = set(self.rounds)
        self.rounds = {r.round_index: r.to_dict() for r in rounds}
        unseen = sum(len(r.tool_calls) for r in rounds) - announced
        if unseen > 0:
            self.notes.append(
                f"{plural(unseen, 'call')} never started (no event announced "
                f"{'them' if unseen > 1 else 'it'}): drawn from the run's record at its end"
            )
        gone = sorted(drawn - set(self.rounds))
        if gone:  # (a model call cut off before its response could be recorded)
            self.notes.append(
                f"round {', '.join(map(str, gone))}, begun in the events, is not in the run's record "
                "(the error says why)"
            )

    def shown(self, index: int) -> dict[str, Any]:
        """Round `index` as the view draws it: as recorded once complete; while it is in progress
        (the run's last round, the run not finished) marked so (`round_state`), each call that
        started and has not finished as ``running`` up to the latest event, and the model call
        still awaited drawn up to the latest event."""
        r = self.rounds[index]
        r["response"]["ended_at"] = max(r["response"]["ended_at"], r["response"]["started_at"])
        step = self.progress.get(index) or new_step()
        if self.finished is not None or index != max(self.rounds):
            if step["expected"] > len(r["tool_calls"]):  # (events with no record at the end)
                return {**r, "expected_calls": step["expected"]}
            return r
        shown = {**r, "response": dict(r["response"]), "tool_executions": list(r["tool_executions"])}
        ended: dict[str, int] = {}
        for x in r["tool_executions"]:
            ended[x["tool_call_id"]] = ended.get(x["tool_call_id"], 0) + 1
        for call, at in zip(r["tool_calls"], step["started"], strict=False):
            if ended.get(call["tool_call_id"]):
                ended[call["tool_call_id"]] -= 1
                continue
            shown["tool_executions"].append(
                {
                    "tool_call_id": call["tool_call_id"],
                    "name": call["name"],
                    "status": "running",
                    "result": "",
                    "queued_at": None,
                    "started_at": at,
                    "ended_at": max(self.now, at),
                    "duration_s": max(self.now, at) - at,
                    "timing": {},
                }
            )
        running = any(x["status"] == "running" for x in shown["tool_executions"])
        shown["expected_calls"] = step["expected"]
        if not step["responded"]:
            shown["live"] = "model"
            shown["response"]["ended_at"] = max(self.now, r["response"]["started_at"])
        elif step["expected"] and (running or len(r["tool_calls"]) < step["expected"]):
            shown["live"] = "calls"
        elif not step["expected"] and not step["answered"]:
            shown["live"] = "answer"
        return shown

    def status(self, rounds: list[dict[str, Any]]) -> str:
        """How the run stands: its end, or what its round in progress is doing."""
        if self.finished:
            return self.finished
        if self.final is not None:
            return "final answer received"
        last = rounds[-1] if rounds else None
        if last is not None and last.get("live"):
            return f"running · round {last['round_index']}: {round_status(last)}"
        return "running"

    def html(self, title: str, label: str, *, folded: bool = False) -> str:
        name = f"<div class='tcl-title'>{e(title)}{' · ' + e(label) if label else ''}</div>"
        if self.tangled is not None:  # the events of two runs: no counts, they would merge them
            body = f"<div class='tcl-error'>⚠ {e(self.tangled)}</div>"
            return (
                f"<div class='tcl-live-run' data-run='{e(self.key)}'><div class='tcl-head'>{name}"
                f"<div class='tcl-facts'><span><span class='tcl-badge'>live</span> not drawn</span></div>"
                f"</div>{body}</div>"
            )
        rounds = [self.shown(k) for k in sorted(self.rounds)]
        last = max((round_end(r) for r in rounds), default=0.0)
        status = self.status(rounds)
        head = (
            f"<div class='tcl-head'>{name}"
            f"<div class='tcl-facts'><span><span class='tcl-badge'>live</span> events of a run as "
            f"they arrive</span><span>{e(status)}</span><span>{plural(self.events, 'event')}</span>"
            f"<span>{plural(len(rounds), 'round')}</span>"
            + (
                f"<span>wall <b>{secs(self.finished_at)}</b></span>"
                if self.finished_at is not None
                # the run's clock at its latest event: the view draws no time between events, so
                # it says which time this is rather than "so far" (v15: it read like elapsed time)
                else f"<span title='the run clock at the latest event this view received'>"
                f"{secs(max(self.now, last))} at the last event</span>"
            )
            + (f"<span>{e(timing_summary({'rounds': rounds, 'metadata': {}}))}</span>" if rounds else "")
            + "</div></div>"
        )
        spans = round_spans(rounds)
        final = (
            f"<div><span class='tcl-role'>final answer</span>{e(self.final)}</div>"
            if self.final is not None
            else ""
        )
        warnings = "".join(f"<div class='tcl-warn'>⚠ {e(w)}</div>" for w in dict.fromkeys(self.warnings))
        warnings += "".join(f"<div class='tcl-error'>error: {e(m)}</div>" for m in self.errors)
        warnings += "".join(f"<div class='tcl-muted'>{e(n)}</div>" for n in self.notes)
        panels = "".join(
            round_html(r, span=spans[i], previous=rounds[i - 1] if i else None) for i, r in enumerate(rounds)
        )
        body = (
            f"{warnings}{final}<div class='tcl-live-timeline'>"
            f"{timeline_svg(rounds, min_px=NARROWEST) if rounds else ''}</div>{panels}"
        )
        if folded:
            return (
                f"<details class='tcl-earlier-run' data-run='{e(self.key)}'>{SUMMARY}{head}</summary>"
                f"{body}</details>"
            )
        return f"<div class='tcl-live-run' data-run='{e(self.key)}'>{head}{body}</div>"


class LiveView(StaticFallback, widgets.VBox):  # type: ignore[misc]
    """A trace view fed by runs' events: ``await run(..., on_event=live.on_event)``.

    It shows what the events say and no more: each number with the timing label the run gave it,
    chunk counts as reported, no origin it cannot know. Each run is drawn apart, by the run id its
    events carry: runs one after another (the earlier ones folded above), or at once (each open).
    Events without a run id are never merged: two such runs interleaved are refused, saying why.
    """

    n_events = traitlets.Int(0)

    def __init__(
        self, title: str = "live run", mode: str = "", *, min_interval_s: float = 0.05, **kwargs: Any
    ) -> None:
        self.title, self.mode = title, mode
        self.min_interval_s = min_interval_s
        self.runs: dict[str, LiveRun] = {}
        """Every run fed to this view, in the order its first event came."""
        self._anonymous = 0
        self._last = 0.0
        self._pending = False
        """Events taken but not drawn yet (the throttle holds them until `flush`)."""
        self._timer: Any = None
        self.view = widgets.HTML(
            wrap(f"<b>{e(title)}</b> <span class='tcl-muted'>waiting for events…</span>")
        )
        super().__init__([self.view], **box_options(LiveView, kwargs))
        self.add_class("tcl-view")
        self.add_class("tcl-live-view")

    def reset(self) -> None:
        """Forget every run shown so far (the view waits for the next run's events)."""
        self.runs = {}
        self.n_events = 0
        self.view.value = wrap(f"<b>{e(self.title)}</b> <span class='tcl-muted'>waiting for events…</span>")
        self.refresh_static()

    @property
    def current(self) -> LiveRun:
        """The run whose events came last began (an empty one before any event)."""
        return next(reversed(self.runs.values()), None) or LiveRun("", self.mode)

    # the current run's state, as the view's earlier versions had it
    @property
    def rounds(self) -> dict[int, dict[str, Any]]:
        return self.current.rounds

    @property
    def final(self) -> str | None:
        return self.current.final

    @property
    def finished(self) -> str | None:
        return self.current.finished

    @property
    def warnings(self) -> list[str]:
        return [w for run in self.runs.values() for w in run.warnings]

    @property
    def earlier(self) -> list[str]:
        """Runs before the current one that have finished, as shown (folded)."""
        runs = list(self.runs.values())[:-1]
        return [r.html(self.title, f"run {k + 1}", folded=True) for k, r in enumerate(runs) if r.finished]

    def _run_of(self, event: RunEvent) -> LiveRun:
        run_id = getattr(event, "run_id", "")
        if run_id:
            return self.runs.setdefault(run_id, LiveRun(run_id, self.mode))
        key = f"(no run id) {self._anonymous}"
        run = self.runs.get(key)
        if isinstance(event, RoundStarted) and run is not None and run.tangled is None:
            if event.round_index == 0 and run.finished:  # the next run begins
                self._anonymous += 1
                key = f"(no run id) {self._anonymous}"
                run = None
            elif event.round_index in run.rounds:
                run.tangled = TANGLED.format(index=event.round_index)
        if run is None:
            run = self.runs[key] = LiveRun(key, self.mode)
        return run

    def on_event(self, event: RunEvent) -> None:
        """Take one event; draw it now, or (within `min_interval_s` of the last drawing) once the
        interval is over, so the last event of a burst is always drawn."""
        run = self._run_of(event)
        self.n_events += 1
        run.take(event)
        now = time.monotonic()
        if (
            event.kind in ("run_finished", "final_answer", "model_response")
            or now - self._last >= self.min_interval_s
        ):
            self._draw()
        else:
            self._pending = True
            self._later(self._last + self.min_interval_s - now)

    def _later(self, delay: float) -> None:
        """A trailing redraw after `delay` seconds (one at a time): on the running event loop when
        there is one (a run in a notebook), else on a timer thread."""
        if self._timer is not None:
            return
        try:
            self._timer = asyncio.get_running_loop().call_later(max(delay, 0.0), self.flush)
        except RuntimeError:  # events fed from plain code, no loop running
            timer = threading.Timer(max(delay, 0.0), self.flush)
            timer.daemon = True
            self._timer = timer
            timer.start()

    def flush(self) -> None:
        """Draw the events not drawn yet (the throttle calls it after each burst)."""
        self._timer = None
        if self._pending:
            self._draw()

    def _draw(self) -> None:
        self._last, self._pending = time.monotonic(), False
        self.render()

    def html(self) -> str:
        runs = list(self.runs.values())
        if not runs:
            return f"<b>{e(self.title)}</b> <span class='tcl-muted'>waiting for events…</span>"
        at_once = sum(1 for r in runs if r.finished is None) > 1
        note = (
            f"<div class='tcl-muted'>{len(runs)} runs fed to this view at once: each drawn apart "
            "(by the run id their events carry)</div>"
            if at_once
            else ""
        )
        parts = []
        for k, run in enumerate(runs):
            label = f"run {k + 1}" if len(runs) > 1 else ""
            folded = run.finished is not None and k < len(runs) - 1
            parts.append(run.html(self.title, label, folded=folded))
        return note + "".join(parts)

    def render(self) -> None:
        self.view.value = wrap(self.html())
        final = all(r.finished is not None for r in self.runs.values())
        self.refresh_static(min_interval_s=0.0 if final else 1.0)

    def static_html(self) -> str:
        return wrap(self.html())

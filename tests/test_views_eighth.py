"""Views, eighth pass (issue 15, the v15 tester's findings): the live view ends on what the run's
result holds (a call cut off before it started had no event, and was lost), one validation rule for
the options of the views and the functions they mirror, the live view's time says what it is, and
a call an imported recording never ran shows no tool message as if recorded."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from html import unescape
from typing import Any

import pytest

from tests.test_widgets import visible_text
from toolcall_lab import AbortHandle, Hooks, ScriptedModel, ScriptedResponse, ToolRegistry, run
from toolcall_lab.clock import run_virtual
from toolcall_lab.events import RunEvent
from toolcall_lab.notebook.widgets import LiveView, TraceView

# --- 1: the live view ends equal to a trace view of the result ------------------------------------------


def _calls_shown(html: str) -> list[tuple[str, str, str]]:
    """Each call card drawn: (status, call id, its tool message or what stands in for it)."""
    html = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
    cards = re.findall(
        r"<li class='tcl-call tcl-status-([\w-]+)' data-call-id='([^']*)'.*?</pre>(.*?)</li>",
        html,
        flags=re.S,
    )
    return [(status, unescape(cid), visible_text(body).strip()) for status, cid, body in cards]


def _round_statuses(html: str) -> list[str]:
    """Each round panel's title without the mode and the duration (a live view does not know the
    mode; the round's end is the same): `Round 0 · 3 calls: wait ×3 · 1 ok, 2 cancelled`."""
    titles = re.findall(r"<(?:div|span) class='tcl-round-title'>([^<]*)</(?:div|span)>", html)
    out = []
    for t in titles:
        parts = unescape(t).split(" · ")
        out.append(" · ".join(p for p in parts if p not in ("sequential", "parallel", "eager")))
    return [re.sub(r" · [\d.]+ (?:s|ms|µs)(?= · )", "", t) for t in out]


def _tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    async def wait(s: float) -> str:
        """Sleeps `s` seconds (virtual clock)."""
        await asyncio.sleep(s)
        return f"waited {s}"

    return tools


def _three_calls(latency_s: float = 0.0) -> ScriptedModel:
    calls = (("wait", {"s": 0.3}), ("wait", {"s": 0.31}), ("wait", {"s": 0.32}))
    return ScriptedModel([ScriptedResponse(tool_calls=calls, latency_s=latency_s), "done"])


def _abort(mode: str, at: float, **kwargs: Any) -> Callable[[Callable[[RunEvent], None]], Any]:
    async def go(on_event: Callable[[RunEvent], None]) -> Any:
        handle = AbortHandle()
        model = _three_calls(kwargs.pop("latency_s", 0.0))
        task = asyncio.create_task(
            run(model, _tools(), "go", mode=mode, on_event=on_event, abort=handle, **kwargs)
        )
        await asyncio.sleep(at)
        handle.abort()
        return await task

    return go


def _deadline(mode: str) -> Callable[[Callable[[RunEvent], None]], Any]:
    async def go(on_event: Callable[[RunEvent], None]) -> Any:
        return await run(_three_calls(), _tools(), "go", mode=mode, on_event=on_event, timeout_s=0.45)

    return go


def _hook_interrupts() -> Callable[[Callable[[RunEvent], None]], Any]:
    """An on_tool_start hook raising a BaseException at the second call: the run is interrupted,
    the third call never starts, the record is the exception's partial_result."""

    async def go(on_event: Callable[[RunEvent], None]) -> Any:
        def start(call: Any) -> None:
            if call.tool_call_id == "call_0_1":
                raise KeyboardInterrupt

        try:
            await run(
                _three_calls(),
                _tools(),
                "go",
                mode="sequential",
                on_event=on_event,
                hooks=Hooks(on_tool_start=start),
            )
        except KeyboardInterrupt as exc:
            return exc.partial_result  # type: ignore[attr-defined]
        raise AssertionError("the hook did not interrupt the run")

    return go


def _hook_rejects() -> Callable[[Callable[[RunEvent], None]], Any]:
    """approve_call raises on the second call (rejected), fail_fast skips the calls after it."""

    async def go(on_event: Callable[[RunEvent], None]) -> Any:
        def approve(call: Any) -> bool:
            if call.tool_call_id == "call_0_1":
                raise RuntimeError("approval service down")
            return True

        return await run(
            _three_calls(),
            _tools(),
            "go",
            mode="sequential",
            on_event=on_event,
            error_policy="fail_fast",
            hooks=Hooks(approve_call=approve),
        )

    return go


FAULTS = {
    "abort mid-batch, sequential": _abort("sequential", 0.4),
    "abort mid-batch, parallel with a cap of 1": _abort("parallel", 0.4, concurrency=1),
    "abort mid-batch, parallel": _abort("parallel", 0.1),
    "abort while eager streams": _abort("eager", 0.3, latency_s=0.5),
    "abort after eager's stream": _abort("eager", 0.5, latency_s=0.2),
    "deadline, sequential": _deadline("sequential"),
    "deadline, eager": _deadline("eager"),
    "a hook interrupts the run": _hook_interrupts(),
    "a hook fails, fail_fast": _hook_rejects(),
}


@pytest.mark.parametrize("case", sorted(FAULTS))
def test_the_live_view_ends_with_every_call_of_the_result(case: str) -> None:
    """v15 #1: aborted at 0.4 s under sequential, the live view ended on "2 calls … 1 ok, 1
    cancelled": the third call, cut off before it started, had no event and was lost from the
    count, the cards and the timeline, while a trace view of the result said "3 calls … 1 ok, 2
    cancelled". Whatever cuts the run, the live view ends with the calls, statuses and tool
    messages a trace view of the result shows."""
    live = LiveView("live", min_interval_s=0.0)
    result = run_virtual(FAULTS[case](live.on_event))
    assert result is not None
    trace_html = TraceView(result).static_html()
    live_html = live.view.value
    expected = _calls_shown(trace_html)
    assert expected, trace_html  # (each case makes calls)
    assert _calls_shown(live_html) == expected, case
    assert _round_statuses(live_html) == _round_statuses(trace_html), case
    n = sum(len(r.tool_calls) for r in result.rounds)
    assert f"{n} tool call" in visible_text(live_html)  # (the timeline's caption counts them all)


def test_the_sequential_abort_keeps_the_call_that_never_started() -> None:
    """The tester's own case, word for word."""
    live = LiveView("live", min_interval_s=0.0)
    run_virtual(_abort("sequential", 0.4)(live.on_event))
    text = visible_text(live.view.value)
    assert re.search(r"Round 0 · sequential · 3 calls: wait ×3 · [^·]+ · 1 ok, 2 cancelled", text), text
    assert "aborted (aborted by the user) before this call started" in text
    assert "1 call never started (no event announced it): drawn from the run's record at its end" in text


def test_events_without_the_record_still_count_the_calls_that_never_started() -> None:
    """An emitter whose run_finished carries no record (events made by hand): the calls the response
    announced and no ACTION started are counted as never started, not dropped."""
    from toolcall_lab.events import ModelResponded, RoundStarted, RunFinished, make_action, make_observation
    from toolcall_lab.messages import ToolCall
    from toolcall_lab.records import ToolExecution

    live = LiveView("by hand", min_interval_s=0.0)
    live.on_event(RoundStarted(at=0.0, round_index=0))
    live.on_event(ModelResponded(at=0.1, round_index=0, ttfc_s=None, latency_s=0.1, n_tool_calls=3))
    call = ToolCall(tool_call_id="a", name="wait", arguments="{}")
    live.on_event(make_action("action", 0.1, 0, call))
    ex = ToolExecution(
        tool_call_id="a",
        name="wait",
        arguments="{}",
        index=0,
        status="ok",
        result="x",
        started_at=0.1,
        ended_at=0.2,
    )
    live.on_event(make_observation("observation", 0.2, 0, ex))
    live.on_event(RunFinished(at=0.3, status="aborted", reason="aborted"))
    title = re.findall(r"Round 0[^<]*", live.view.value)[0]
    assert "3 calls" in title and title.endswith("1 ok, 2 never started"), title


def test_a_round_the_record_lacks_is_not_drawn_and_the_error_says_why() -> None:
    """Aborted while eager's model call streamed, before any call arrived: the record holds no
    round (the model call is not in it, the error says so). The live view, which drew round 0 from
    its events, ends with no round, the error, and a note of the round it dropped."""
    live = LiveView("live", min_interval_s=0.0)
    result = run_virtual(_abort("eager", 0.2, latency_s=0.5)(live.on_event))
    assert result.rounds == () and result.error
    text = visible_text(live.view.value)
    assert "0 rounds" in text and f"error: {result.error}" in text, text
    assert "round 0, begun in the events, is not in the run's record (the error says why)" in text
    assert "Round 0" not in text


# --- 2: one rule for the cap and the round trip, in views and functions alike --------------------------


def _option_takers() -> dict[str, Callable[..., Any]]:
    from toolcall_lab.analysis import compare
    from toolcall_lab.notebook.widgets import CompareView, CorpusView
    from toolcall_lab.plotting import gantt

    return {
        "compare": lambda t, **kw: compare([t], modes=("sequential",), **kw),
        "gantt": lambda t, **kw: gantt(t, modes=("sequential",), show=False, **kw),
        "CompareView": lambda t, **kw: CompareView(t, modes=("sequential",), **kw),
        "CorpusView": lambda t, **kw: CorpusView([t], modes=("sequential",), **kw),
    }


@pytest.mark.parametrize("value", [2.0, True, 0, -1, "2"])
@pytest.mark.parametrize("taker", ["compare", "gantt", "CompareView"])
def test_a_cap_is_refused_alike_by_compare_gantt_and_compare_view(taker: str, value: Any) -> None:
    """v15 #2: `CompareView(concurrency=2.0)` was taken (the box showed "2.0") while compare and
    gantt refused it; `gantt(modes=('sequential',), concurrency=0)` drew "could not be replayed"
    instead of refusing. One rule (an integer >= 1, never a bool), refused before any replay."""
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.scenarios import SCENARIOS

    trace = SCENARIOS["weather_news_stock"].record()
    with pytest.raises(
        UsageError, match=rf"concurrency={re.escape(repr(value))}: must be an integer >= 1, or None"
    ):
        _option_takers()[taker](trace, concurrency=value)


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), "0.05", True])
@pytest.mark.parametrize("taker", ["compare", "gantt", "CompareView", "CorpusView"])
def test_a_round_trip_is_refused_up_front_alike_even_without_serialized(taker: str, value: Any) -> None:
    """v15 #2: gantt drew the other modes and wrote the round trip's error into the figure;
    compare and gantt took a bad one silently when serialized was not among the modes."""
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.scenarios import SCENARIOS

    trace = SCENARIOS["weather_news_stock"].record()
    with pytest.raises(
        UsageError, match=rf"round_trip_s={re.escape(repr(value))}: must be >= 0 seconds \(finite\)"
    ):
        _option_takers()[taker](trace, round_trip_s=value)


def test_good_options_still_pass_everywhere_and_run_config_refuses_a_bool_cap() -> None:
    from toolcall_lab import RunConfig
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.scenarios import SCENARIOS

    trace = SCENARIOS["weather_news_stock"].record()
    for name, take in _option_takers().items():
        kwargs: dict[str, Any] = {"round_trip_s": 0}
        if name != "CorpusView":
            kwargs["concurrency"] = 2
        assert take(trace, **kwargs) is not None
    with pytest.raises(UsageError, match=r"RunConfig.concurrency=True: must be an integer >= 1"):
        RunConfig(concurrency=True)


# --- 3: the live view's time says what it is ------------------------------------------------------------


def test_the_live_time_is_the_run_clock_at_the_last_event_and_says_so() -> None:
    """v15 #3: "2.04 s so far" stood still between events (at 3.0 s and at 4.1 s of a run), reading
    like elapsed time: it is the run clock at the latest event, and now says that."""
    from toolcall_lab.events import ModelResponded, RoundStarted

    live = LiveView("by hand", min_interval_s=0.0)
    live.on_event(RoundStarted(at=0.0, round_index=0, run_id="r"))
    live.on_event(
        ModelResponded(at=2.04, round_index=0, ttfc_s=None, latency_s=2.04, n_tool_calls=1, run_id="r")
    )
    text = visible_text(live.view.value)
    assert "2.04 s at the last event" in text and "so far" not in text, text


# --- 4: the CLI's bench summary marks a speedup on assumed timings ---------------------------------------


def test_bench_marks_a_median_speedup_resting_on_assumed_timings(tmp_path, capsys) -> None:
    """v15 #4: `toolcall-lab bench` printed `parallel … median_speedup_vs_sequential 1.051` with no
    note, while every view marks that speedup "(assumed timings)"."""
    from tests.test_views_seventh import _assumed_trace
    from toolcall_lab.cli import main
    from toolcall_lab.trace_files import save

    save(_assumed_trace(), tmp_path / "assumed.json")
    assert main(["bench", str(tmp_path / "assumed.json"), "--modes", "sequential,parallel"]) == 0
    out = capsys.readouterr().out
    line = [x for x in out.splitlines() if "rests on assumed timings" in x]
    assert len(line) == 1 and line[0].startswith("parallel: median_speedup_vs_sequential 1."), out
    assert "in 1 of 1 comparable run(s)" in line[0]


def test_bench_does_not_mark_a_measured_speedup(tmp_path, capsys) -> None:
    from toolcall_lab.cli import main
    from toolcall_lab.scenarios import SCENARIOS
    from toolcall_lab.trace_files import save

    doc = SCENARIOS["weather_news_stock"].record().to_dict()
    for r in doc["rounds"]:  # every duration recorded
        r["response"]["timing"] = {"source": "recorded", "note": ""}
        for x in r["tool_executions"]:
            x["timing"] = {"source": "recorded", "note": ""}
    from toolcall_lab import Trace

    save(Trace.from_dict(doc), tmp_path / "measured.json")
    assert main(["bench", str(tmp_path / "measured.json"), "--modes", "sequential,parallel"]) == 0
    out = capsys.readouterr().out
    assert "median_speedup_vs_sequential" in out and "assumed timings" not in out, out


# --- 5: a tool message the recording does not hold is labelled --------------------------------------------


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    import json

    body = {"id": "r", "object": "chat.completion.chunk", "model": "gpt-x"}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]  # type: ignore[assignment]
    return f"data: {json.dumps(body)}\n\n"


CUT_MID_ARGUMENTS = "".join(
    [
        _chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_w",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ],
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_s",
                        "type": "function",
                        "function": {"name": "get_stock", "arguments": ""},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"ticker": "AA'}}]}),
    ]
)
"""A chat stream cut while the second call's arguments streamed: no finish, no [DONE]."""


def test_a_call_the_cut_recording_never_ran_shows_no_tool_message_as_recorded() -> None:
    """v15 #5: an .sse cut mid-arguments opened with a tool message "Error: invalid arguments …
    send valid JSON arguments" shown as if recorded: it is what toolcall_lab would send, the
    recording holds no such message. The call card, the next request and the import's trace and
    report say so."""
    from toolcall_lab.notebook.html import NOT_RECORDED_MESSAGE
    from toolcall_lab.notebook.loading import open_upload
    from toolcall_lab.records import NOT_IN_SOURCE

    opened = open_upload("cut.sse", CUT_MID_ARGUMENTS.encode())
    trace = opened.traces[0]
    screened = [x for r in trace.rounds for x in r.executions if x.status == "invalid_arguments"]
    assert [x.tool_call_id for x in screened] == ["call_s"]
    assert NOT_IN_SOURCE in screened[0].timing.note  # (the trace says so)
    report = " ".join(i.what for i in opened.report.issues) if getattr(opened, "report", None) else ""
    assert "its tool message in the trace is not in the recording: what toolcall_lab would send" in report
    html = TraceView(trace).static_html()
    card = re.search(
        r"<li class='tcl-call tcl-status-invalid_arguments' data-call-id='call_s'.*?</li>", html, re.S
    )
    assert card is not None
    assert f"tool message⚠ {NOT_RECORDED_MESSAGE}" in visible_text(card.group(0)), visible_text(card.group(0))
    messages = re.findall(r"<div class='tcl-msg tcl-msg-tool'>.*?</div>", html, re.S)
    answering = [visible_text(m) for m in messages if "answers call_s" in m]
    assert answering and all(NOT_RECORDED_MESSAGE in m for m in answering), answering
    # a recorded result is not labelled
    other = [visible_text(m) for m in messages if "answers call_w" in m]
    assert other and not any(NOT_RECORDED_MESSAGE in m for m in other)
    assert NOT_RECORDED_MESSAGE not in visible_text(
        re.search(r"<li class='tcl-call[^']*' data-call-id='call_w'.*?</li>", html, re.S).group(0)  # type: ignore[union-attr]
    )


def test_a_live_runs_invalid_arguments_message_is_not_labelled() -> None:
    """The loop's own run sent that message: it is recorded, no label."""
    from toolcall_lab.notebook.html import NOT_RECORDED_MESSAGE

    tools = _tools()
    model = ScriptedModel([ScriptedResponse(tool_calls=(("wait", '{"s": '),)), "done"])
    result = run_virtual(run(model, tools, "go"))
    assert result.rounds[0].executions[0].status == "invalid_arguments"
    assert NOT_RECORDED_MESSAGE not in TraceView(result).static_html()

"""Notebook views, tested from Python: traits drive what is rendered, no browser needed."""

from __future__ import annotations

import pytest

from tests.conftest import DATA, REALDATA
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import run
from toolcall_lab.notebook.html import trace_html
from toolcall_lab.notebook.widgets import CompareView, LiveView, StreamStepper, TraceView
from toolcall_lab.scenarios import SCENARIOS


@pytest.fixture(scope="module")
def failing():
    return SCENARIOS["failing_and_hanging"].record()


def test_trace_view_has_a_panel_per_round_with_status_and_results(failing) -> None:
    view = TraceView(failing)
    assert len(view.accordion.children) == len(failing.rounds) == 2
    assert view.accordion.get_title(0) == "Round 0 · parallel · 3 calls · 1.80 s · 2 failed"
    html = view.panels[0].value
    for status in ("tcl-status-ok", "tcl-status-error", "tcl-status-timeout"):
        assert status in html
    assert "RuntimeError: 503 Service Unavailable" in html and "tcl-timeline" in html
    assert "&quot;city&quot;: &quot;Lyon&quot;" in html  # pretty-printed arguments
    view.selected_round = 1
    assert view.accordion.selected_index == 1


def test_raw_toggle_shows_the_exact_argument_string(failing) -> None:
    view = TraceView(failing)
    assert "{&quot;city&quot;: &quot;Lyon&quot;}" not in view.panels[0].value
    view.raw_box.value = True
    assert view.show_raw and "{&quot;city&quot;: &quot;Lyon&quot;}" in view.panels[0].value


def test_long_results_are_folded_with_a_preview() -> None:
    trace = SCENARIOS["one_tool_round"].record()
    doc = trace.to_dict()
    doc["rounds"][0]["tool_executions"][0]["result"] = "x" * 5000
    html = trace_html(doc)
    assert "full result (5,000 characters)" in html and "<details>" in html


def test_compare_view_reruns_when_controls_change() -> None:
    view = CompareView(SCENARIOS["weather_news_stock"].record(), round_trip_s=0.05)
    walls = {r["mode"]: r["wall_time_s"] for r in view.rows}
    assert walls["serialized"] == pytest.approx(3.3) and walls["parallel"] == pytest.approx(2.4)
    view.rtt_box.value = 200
    assert {r["mode"]: r["wall_time_s"] for r in view.rows}["serialized"] == pytest.approx(
        0.8 + 1.6 + 2 * 0.2 + 0.8  # 3 calls: N-1 = 2 extra client round trips
    )
    assert "3.600 s" in view.summary.value
    view.mode_box.value = ("sequential", "parallel")
    assert [r["mode"] for r in view.rows] == ["sequential", "parallel"] and len(view.details.children) == 2
    view.round_box.value = 1
    assert "final answer" in view.details.children[0].value
    assert view.errors.outputs == ()


def test_compare_view_concurrency_cap() -> None:
    view = CompareView(SCENARIOS["multi_angle_search"].record(), modes=("parallel",))
    assert view.rows[0]["wall_time_s"] == pytest.approx(0.8 + 0.6 + 0.8)
    view.cap_box.value = 2
    assert view.rows[0]["wall_time_s"] == pytest.approx(0.8 + 1.2 + 0.8)


def test_stream_stepper_shows_arguments_growing_and_findings() -> None:
    stepper = StreamStepper(DATA / "recordings" / "scripted_weather_news_stock.sse")
    assert stepper.slider.max == len(stepper.chunks)
    stepper.step = 3  # states[i]: after chunk i; chunks 1-3 carry the three call headers
    assert stepper.states[3][0][0][0]["arguments"] == ""
    assert stepper.states[4][0][0][0]["arguments"] == '{"city"'
    assert "chunk 3 of" in stepper.view.value
    stepper.step = len(stepper.chunks) - 1
    late = stepper.states[len(stepper.chunks) - 1][0][0]
    assert late[0]["arguments"] == '{"city": "Paris", "unit": "celsius"}'
    assert "calls so far" in stepper.view.value and "get_news" in stepper.view.value
    no_ids = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]},
                }
            ]
        }
    ]
    s2 = StreamStepper(no_ids)
    s2.step = 1
    assert "missing_id" in s2.view.value and "call_0_0" in s2.view.value


def test_live_view_follows_a_run() -> None:
    live = LiveView("test", min_interval_s=0.0)
    s = SCENARIOS["weather_news_stock"]
    result = run_virtual(run(s.model(), s.registry(), s.prompt, on_event=live.on_event))
    assert live.n_events == len(result.events)
    assert len(live.rounds) == 2 and live.final == result.final_answer
    assert live.view.value.count("class='tcl-call ") == 3 and "final answer:" in live.view.value


def test_the_benchmark_trace_renders() -> None:
    """The widget benchmark's trace shape (speed is measured in benchmarks/bench_widgets.py)."""
    from benchmarks.bench_widgets import big_trace

    view = TraceView(big_trace(rounds=5, calls=8))
    assert len(view.panels) == 6 and view.panels[0].value.count("class='tcl-call ") == 8


@pytest.mark.skipif(not (REALDATA / "PROVENANCE.md").is_file(), reason="../shared/realdata is absent")
def test_stream_stepper_on_real_anthropic_and_responses_streams() -> None:
    anthropic = StreamStepper(
        REALDATA / "anthropic-sdk-python/messages_stream_claude-sonnet-4_text_then_1_tool_use.sse"
    )
    assert anthropic.format == "anthropic"
    assert anthropic.states[-1][0][0][0]["arguments"] == '{"location": "Paris"}'
    growing = [s[0].get(0, {}).get(0, {}).get("arguments", "") for s in anthropic.states]
    assert growing == sorted(growing, key=len)  # arguments only grow, chunk by chunk
    steps = StreamStepper(
        REALDATA / "vercel-ai/openai_responses_gpt-5.1-codex-max_stream_4steps_3_function_calls.chunks.jsonl"
    )
    assert steps.format == "openai-responses" and list(steps.states[-1][0][0]) == [
        0
    ]  # the first response only

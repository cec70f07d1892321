"""The design documents' termination rules, on the virtual clock (exact times), and serialized mode's
cost model."""

from __future__ import annotations

import pytest

from tests.scenario_tools import THREE, make_tools
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import run
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.runs import ALL_FAILED_NOTE, EMPTY_ANSWER_NOTE
from toolcall_lab.trace import Trace, TraceMetadata

FAILING = (("broken", {}), ("no_such_tool", {}))


def go(steps, **settings):
    model = ScriptedModel(steps)
    result = run_virtual(run(model, make_tools(), "Weather, news and stock?", **settings))
    return model, result


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized"])
def test_fail_fast_final_call_also_when_every_call_failed(mode) -> None:
    """RAG design: a failing round is followed by one final model call without tools."""
    model, result = go(
        [ScriptedResponse(tool_calls=FAILING, latency_s=0.5), "sorry"], error_policy="fail_fast", mode=mode
    )
    assert (result.status, result.reason, result.final_answer) == ("completed", "fail_fast", "sorry")
    assert model.requests[1].tools is None and result.rounds[-1].final_reason == "fail_fast"
    assert validate_messages(result.messages) == []


def test_fail_fast_after_a_partly_failing_round() -> None:
    model, result = go(
        [ScriptedResponse(tool_calls=(("broken", {}), ("get_weather", {"city": "X"}))), "partial"],
        error_policy="fail_fast",
    )
    assert (result.reason, len(model.requests)) == ("fail_fast", 2)


def test_continue_stops_with_the_designs_message_when_every_call_failed() -> None:
    """Dolphin design: all calls failed -> stop and append the assistant message."""
    model, result = go([ScriptedResponse(tool_calls=FAILING), "never used"])
    assert (result.status, result.reason) == ("failed", "all_calls_failed")
    assert result.messages[-1] == {"role": "assistant", "content": ALL_FAILED_NOTE}
    assert ALL_FAILED_NOTE == "All tool calls failed. Please check the error messages and try again."
    assert len(model.requests) == 1 and "every call of round 0 failed" in result.error
    assert validate_messages(result.messages) == []


def test_continue_goes_on_when_some_calls_succeed() -> None:
    model, result = go([ScriptedResponse(tool_calls=(("broken", {}), ("get_weather", {"city": "X"}))), "ok"])
    assert (result.status, result.reason, len(model.requests)) == ("completed", "final_answer", 2)


def test_an_empty_answer_after_tool_rounds_is_asked_for_once_more() -> None:
    """SiYuan design: an empty reply after tool rounds gets the [SYSTEM] note and one more call."""
    model, result = go(
        [
            ScriptedResponse(tool_calls=THREE, latency_s=0.2),
            ScriptedResponse(content=None, latency_s=0.2),
            "final",
        ]
    )
    assert (result.status, result.reason, result.final_answer) == ("completed", "final_answer", "final")
    retry = model.requests[2]
    assert retry.tools is None and retry.messages[-1] == {"role": "user", "content": EMPTY_ANSWER_NOTE}
    assert EMPTY_ANSWER_NOTE.startswith("[SYSTEM]")
    assert [r.final_reason for r in result.rounds] == [None, None, "empty_answer"]
    assert result.wall_time_s == pytest.approx(0.2 + 0.1 + 0.2 + 0.0)


def test_the_empty_answer_retry_happens_once() -> None:
    model, result = go(
        [
            ScriptedResponse(tool_calls=THREE),
            ScriptedResponse(content=None),
            ScriptedResponse(content=None),
            "x",
        ]
    )
    assert (result.status, result.reason) == ("failed", "empty_response")
    assert len(model.requests) == 3 and "again, after the empty-answer note" in result.error


def test_an_empty_first_answer_is_not_retried() -> None:
    model, result = go([ScriptedResponse(content=None), "unused"])
    assert (result.status, result.reason, len(model.requests)) == ("failed", "empty_response", 1)


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized", "first_only"])
def test_run_deadline_ends_with_timeout_and_a_consistent_record(mode) -> None:
    """SiYuan design's `timeout` status: the deadline cuts the run at exactly timeout_s."""
    calls = (
        ("sleep_for", {"seconds": 0.1}),
        ("sleep_for", {"seconds": 5.0}),
        ("sleep_for", {"seconds": 6.0}),
    )
    _model, result = go(
        [ScriptedResponse(tool_calls=calls, latency_s=0.4), "never"], mode=mode, timeout_s=1.5
    )
    if mode == "first_only":  # only the 0.1 s call runs; the answer comes at 0.9 s
        assert result.status == "completed"
        return
    assert (result.status, result.reason) == ("timeout", "deadline")
    assert result.wall_time_s == pytest.approx(1.5)
    ex = result.executions
    assert ex[0].status == "ok" and [e.status for e in ex[1:]] == ["cancelled", "cancelled"]
    assert all(e.ended_at <= 1.5 + 1e-9 for e in ex)
    assert (
        "deadline (timeout_s=1.5)" in ex[1].result
        and "deadline (timeout_s=1.5) passed at 1.500 s" in result.error
    )
    assert validate_messages(result.messages) == []
    trace = Trace.from_run(result, TraceMetadata(title="deadline", origin="scripted"))
    assert trace.outcome.status == "timeout" and trace.metadata.settings["timeout_s"] == 1.5


def test_run_deadline_during_a_model_call_says_so() -> None:
    _model, result = go(
        [ScriptedResponse(tool_calls=THREE), ScriptedResponse(content="late", latency_s=9)], timeout_s=2.0
    )
    assert (result.status, result.reason, result.wall_time_s) == ("timeout", "deadline", pytest.approx(2.0))
    assert "round 1's model call" in result.error and len(result.rounds) == 1
    assert validate_messages(result.messages) == []


@pytest.mark.parametrize("why", ["max_rounds", "fail_fast", "empty_answer"])
def test_calls_without_tools_carry_no_tool_only_parameters(why) -> None:
    """The OpenAI API rejects parallel_tool_calls / tool_choice without tools."""
    first = ScriptedResponse(tool_calls=(("broken", {}), ("get_weather", {"city": "X"})))
    steps = {
        "max_rounds": [first, "answer"],
        "fail_fast": [first, "answer"],
        "empty_answer": [first, ScriptedResponse(content=None), "answer"],
    }[why]
    settings = {"max_rounds": 1} if why == "max_rounds" else {}
    params = {"parallel_tool_calls": False, "tool_choice": "auto", "temperature": 0}
    policy = "fail_fast" if why == "fail_fast" else "continue"
    model, result = go(steps, params=params, error_policy=policy, **settings)
    assert result.final_answer == "answer" and result.rounds[-1].final_reason == why
    assert dict(model.requests[0].params) == params
    assert dict(model.requests[-1].params) == {"temperature": 0} and model.requests[-1].tools is None


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_serialized_costs_n_minus_1_extra_client_round_trips(n) -> None:
    """The first call comes with the model's response; the last result travels with the next request."""
    calls = tuple(("sleep_for", {"seconds": 0.1 * (i + 1)}) for i in range(n))
    _model, result = go(
        [ScriptedResponse(tool_calls=calls, latency_s=0.5), ScriptedResponse(content="ok", latency_s=0.5)],
        mode="serialized",
        round_trip_s=0.05,
    )
    tools = sum(0.1 * (i + 1) for i in range(n))
    assert result.wall_time_s == pytest.approx(0.5 + tools + (n - 1) * 0.05 + 0.5)
    rnd = result.rounds[0]
    assert (
        rnd.client_round_trips == n
        and len(rnd.round_trips) == n - 1
        and rnd.round_trip_s == pytest.approx((n - 1) * 0.05)
    )
    assert [t.position for t in rnd.round_trips] == list(range(1, n))
    for trip, ex in zip(rnd.round_trips, rnd.executions[1:], strict=True):
        assert trip.tool_call_id == ex.tool_call_id and trip.ended_at == pytest.approx(ex.started_at)
        assert trip.timing.source == "placeholder" and "round_trip_s" in trip.timing.note
    assert result.client_round_trips == n + 1 and result.model_calls == 2  # upstream once per batch


def test_serialized_round_trips_survive_save_and_load(tmp_path) -> None:
    from toolcall_lab.trace_files import load, save

    _, result = go([ScriptedResponse(tool_calls=THREE), "ok"], mode="serialized", round_trip_s=0.05)
    trace = Trace.from_run(result, TraceMetadata(title="rt", origin="scripted"))
    save(trace, tmp_path / "t.json")
    again = load(tmp_path / "t.json")
    assert again == trace and len(again.rounds[0].round_trips) == 2


def test_compare_charges_the_recorded_round_trips() -> None:
    """analysis reads the round trips the run recorded: N-1 per batch, not one per call."""
    from toolcall_lab.analysis import compare
    from toolcall_lab.scenarios import SCENARIOS

    table = compare([SCENARIOS["weather_news_stock"].record()], ["serialized", "parallel"], round_trip_s=0.05)
    runs = table.runs.set_index("mode")
    assert runs.loc["serialized", "round_trip_time_s"] == pytest.approx(2 * 0.05)
    assert runs.loc["serialized", "client_round_trips"] == 3 + 1  # 1 + (3-1) for the batch, 1 for the answer
    assert runs.loc["parallel", "round_trip_time_s"] == 0.0
    assert runs.loc["serialized", "tool_phase_s"] == pytest.approx(0.5 + 0.8 + 0.3)

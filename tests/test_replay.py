"""Replay: exact virtual timings per mode, determinism, divergence detection, real vs virtual clock."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from toolcall_lab.exceptions import ReplayDivergenceError
from toolcall_lab.loop import run
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.records import Timing
from toolcall_lab.replay import replay, replay_tools
from toolcall_lab.scenarios import SCENARIOS
from toolcall_lab.tools import ToolOutcome, ToolRegistry
from toolcall_lab.trace import Trace, TraceMetadata


def timings(result):
    return [
        (
            r.round_index,
            r.model_call.started_at,
            r.model_call.ended_at,
            tuple((e.tool_call_id, e.status, e.started_at, e.ended_at) for e in r.executions),
        )
        for r in result.rounds
    ]


@pytest.mark.parametrize(
    ("mode", "wall"),
    [
        ("parallel", 0.8 + 0.8 + 0.8),  # model, slowest of 0.5/0.8/0.3, final
        ("sequential", 0.8 + 1.6 + 0.8),  # design doc: 0.5 + 0.8 + 0.3 = 1.6 s of tools
        ("serialized", 0.8 + 1.6 + 2 * 0.05 + 0.8),  # N-1 extra client round trips
        ("first_only", 0.8 + 0.5 + 0.8),
    ],
)
def test_weather_news_stock_under_every_mode(mode, wall) -> None:
    trace = SCENARIOS["weather_news_stock"].record()
    result = replay(trace, mode, round_trip_s=0.05)
    assert result.wall_time_s == pytest.approx(wall)
    assert result.model_calls == 2


def test_virtual_replays_are_identical() -> None:
    trace = SCENARIOS["failing_and_hanging"].record()
    assert timings(replay(trace, "parallel")) == timings(replay(trace, "parallel"))
    assert timings(replay(trace, "serialized", round_trip_s=0.03)) == timings(
        replay(trace, "serialized", round_trip_s=0.03)
    )


def test_recorded_errors_and_timeouts_replay_verbatim() -> None:
    trace = SCENARIOS["failing_and_hanging"].record()
    result = replay(trace, "sequential")
    assert [e.status for e in result.executions] == ["ok", "error", "timeout"]
    assert [e.result for e in result.executions] == [e.result for e in trace.rounds[0].executions]
    assert result.executions[2].duration_s == pytest.approx(1.0)


def test_divergence_is_detected_and_shown() -> None:
    trace = SCENARIOS["weather_news_stock"].record()
    edited = replace(trace, initial_messages=({"role": "user", "content": "something else"},))
    with pytest.raises(
        ReplayDivergenceError, match=r"round 0: the conversation differs .*message 0 differs"
    ) as info:
        replay(edited)
    assert "something else" in str(info.value) and "Paris" in str(info.value)
    assert replay(edited, check="ids").status == "completed"  # lenient: only tool-call ids


def test_replaying_past_the_recording_fails_clearly() -> None:
    trace = SCENARIOS["one_tool_round"].record()
    short = replace(trace, rounds=trace.rounds[:1])
    with pytest.raises(ReplayDivergenceError, match="recording has only 1 response"):
        replay(short)


def test_first_only_replay_of_a_parallel_recording_is_flagged() -> None:
    result = replay(SCENARIOS["multi_angle_search"].record(), "first_only")
    assert len(validate_messages(result.messages)) == 3


def test_real_clock_agrees_with_the_virtual_clock() -> None:
    """A correctness check with wide slack, not a speed test: sleeps never return early."""
    trace = SCENARIOS["three_tools_100ms"].record()
    virtual = replay(trace, "sequential").wall_time_s
    start = time.perf_counter()
    real = replay(trace, "sequential", virtual=False).wall_time_s
    assert virtual == pytest.approx(0.3)
    assert virtual - 0.001 <= real <= time.perf_counter() - start + 0.001
    assert real == pytest.approx(virtual, rel=0.5, abs=0.25)


def test_real_tools_on_the_virtual_clock_warn() -> None:
    trace = SCENARIOS["one_tool_round"].record()
    with pytest.warns(RuntimeWarning, match="virtual clock"):
        replay(trace, tools=replay_tools(trace))


def test_replay_in_a_notebook_loop_uses_a_helper_thread() -> None:
    trace = SCENARIOS["straggler"].record()

    async def cell():
        return replay(trace, "sequential").wall_time_s

    assert asyncio.run(cell()) == pytest.approx(0.8 + 2.3 + 0.8)


def test_timing_labels_say_where_each_number_came_from() -> None:
    """Scripted latencies and simulated tools are placeholders; a replay keeps the recording's labels."""
    tools = ToolRegistry()

    @tools.register
    async def measured(x: int) -> str:
        return str(x)

    @tools.register
    async def reported(x: int) -> ToolOutcome:
        return ToolOutcome(
            text=str(x), duration_s=0.0, timing=Timing(source="reported", note="x-runtime header: 0 ms")
        )

    class LiveModel:  # a user's model: no labels of its own
        name = "live"

        def __init__(self) -> None:
            self.script = ScriptedModel(
                [ScriptedResponse(tool_calls=(("measured", {"x": 1}), ("reported", {"x": 2}))), "done"]
            )

        def stream(self, request):
            return self.script.stream(request)

    real = asyncio.run(run(LiveModel(), tools, "go"))  # real clock: measured here
    assert real.origin == "recorded"
    assert [r.model_call.timing.source for r in real.rounds] == ["recorded", "recorded"]
    assert [e.timing.source for e in real.rounds[0].executions] == ["recorded", "reported"]
    assert real.rounds[0].executions[1].timing.note == "x-runtime header: 0 ms"
    assert real.rounds[0].executions[1].duration_s == 0.0  # the tool's figure, not the clock's

    scripted = SCENARIOS["weather_news_stock"].record()  # virtual clock, scripted model
    assert set(scripted.timing_sources) == {"placeholder"}
    assert scripted.metadata.origin == "scripted"

    trace = Trace.from_run(real, TraceMetadata(title="live", origin="recorded"))
    again = replay(trace, "sequential")
    assert again.origin == "replayed"
    assert [r.model_call.timing for r in again.rounds] == [r.model_call.timing for r in trace.rounds]
    assert [e.timing for e in again.rounds[0].executions] == [e.timing for e in trace.rounds[0].executions]
    assert [r.model_call.chunk_timing for r in again.rounds] == ["recorded", "recorded"]


def _diverging_trace():
    trace = SCENARIOS["weather_news_stock"].record()
    first = trace.rounds[0]
    return replace(trace, rounds=(replace(first, executions=first.executions[1:]), *trace.rounds[1:]))


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized"])
def test_cli_replay_exits_non_zero_on_divergence(tmp_path, mode) -> None:
    import subprocess
    import sys

    from toolcall_lab.trace_files import save

    path = save(_diverging_trace(), tmp_path / "edited.json")
    out = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "replay", str(path), "--mode", mode],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1, out
    assert f"diverged from its recording under {mode}" in out.stderr and "no recorded execution" in out.stderr
    assert "replay_divergence" in out.stderr  # the partial run, with why it stopped


def test_divergence_in_parallel_mode_lands_in_compare_errors() -> None:
    from toolcall_lab.analysis import compare

    table = compare([_diverging_trace(), SCENARIOS["one_tool_round"].record()], ["sequential", "parallel"])
    assert sorted(table.errors["mode"]) == ["parallel", "sequential"]
    assert all("no recorded execution" in e for e in table.errors["error"])
    assert set(table.runs["title"]) == {SCENARIOS["one_tool_round"].title}


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized"])
def test_recorded_approval_decisions_are_replayed(mode) -> None:
    """A recording's rejected calls and withheld results come out the same (same text to the model)."""
    from pathlib import Path

    from toolcall_lab.trace_files import load

    trace = load(Path(__file__).parent / "fixtures" / "traces" / "v2_loop_records.json")
    result = replay(trace, mode, round_trip_s=0.05)
    recorded = trace.rounds[0].executions
    assert [(e.status, e.result) for e in result.rounds[0].executions] == [
        (e.status, e.result) for e in recorded
    ]
    assert result.status == "completed"
    # the recorded hook failures happen again, for the same calls (issue 11, seventh check)
    key = lambda f: (f.hook, f.error, f.effect, f.round_index, f.tool_call_id, f.position)  # noqa: E731
    assert [key(f) for f in result.hook_failures] == [key(f) for f in trace.outcome.hook_failures] != []
    if mode == "serialized":
        assert result.wall_time_s == pytest.approx(trace.wall_time_s)

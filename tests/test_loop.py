"""The round loop and the four modes, on the scripted model and the virtual clock (exact timings)."""

from __future__ import annotations

import asyncio

import pytest

from tests.scenario_tools import THREE, Gauge, make_tools
from toolcall_lab.clock import run_virtual
from toolcall_lab.events import Action, Observation
from toolcall_lab.exceptions import ScriptError, UsageError
from toolcall_lab.loop import AbortHandle, Hooks, RunConfig, run, run_sync
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.tools import ToolRegistry


def three_then_answer(latency: float = 0.0) -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedResponse(content="Checking.", tool_calls=THREE, latency_s=latency),
            ScriptedResponse(content="Sunny, quiet news, AIR at 100.", latency_s=latency),
        ]
    )


def go(model, tools=None, messages="Weather, news and stock for Paris?", **kw):
    return run_virtual(run(model, tools if tools is not None else make_tools(), messages, **kw))


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized"])
def test_modes_give_the_same_transcript(mode) -> None:
    baseline = go(three_then_answer(), mode="sequential")
    result = go(three_then_answer(), mode=mode, round_trip_s=0.02)
    assert result.messages == baseline.messages
    assert result.status == "completed" and result.reason == "final_answer"
    assert validate_messages(result.messages) == []


def test_three_100ms_tools_parallel_vs_sequential_vs_serialized() -> None:
    par = go(three_then_answer(), mode="parallel")
    seq = go(three_then_answer(), mode="sequential")
    ser = go(three_then_answer(), mode="serialized", round_trip_s=0.05)
    assert par.wall_time_s == pytest.approx(0.1)
    assert seq.wall_time_s == pytest.approx(0.3)
    assert ser.wall_time_s == pytest.approx(0.3 + 2 * 0.05)  # N-1 extra client round trips
    assert ser.client_round_trips == 3 + 1 and ser.model_calls == 2  # upstream called once per batch
    assert [e.started_at for e in seq.executions] == pytest.approx([0.0, 0.1, 0.2])


def test_design_doc_one_round_timing() -> None:
    """Model ~800 ms, one 200 ms tool, final call ~800 ms: about 1.8 s."""
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=(("sleep_for", {"seconds": 0.2}),), latency_s=0.8),
            ScriptedResponse(content="done", latency_s=0.8),
        ]
    )
    assert go(model).wall_time_s == pytest.approx(1.8)


def test_replays_are_deterministic() -> None:
    a = go(three_then_answer(0.3), mode="parallel")
    b = go(three_then_answer(0.3), mode="parallel")
    assert [(e.started_at, e.ended_at) for e in a.executions] == [
        (e.started_at, e.ended_at) for e in b.executions
    ]
    assert [ev.at for ev in a.events] == [ev.at for ev in b.events]


def test_concurrency_cap_is_never_exceeded() -> None:
    gauge = Gauge()
    calls = tuple(("sleep_for", {"seconds": 0.1 + i / 100}) for i in range(8))
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "ok"])
    result = go(model, make_tools(gauge), mode="parallel", concurrency=3)
    assert gauge.peak == 3
    assert len(result.executions) == 8
    uncapped = Gauge()
    go(ScriptedModel([ScriptedResponse(tool_calls=calls), "ok"]), make_tools(uncapped), mode="parallel")
    assert uncapped.peak == 8


def test_parallel_results_in_model_order_and_events_actions_first() -> None:
    gauge = Gauge()
    calls = (
        ("sleep_for", {"seconds": 0.3}),
        ("sleep_for", {"seconds": 0.1}),
        ("sleep_for", {"seconds": 0.2}),
    )
    result = go(ScriptedModel([ScriptedResponse(tool_calls=calls), "ok"]), make_tools(gauge))
    assert [e.result for e in result.executions] == ["slept 0.3", "slept 0.1", "slept 0.2"]
    tool_msgs = [m for m in result.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_0_0", "call_0_1", "call_0_2"]
    kinds = [type(e) for e in result.events if isinstance(e, Action | Observation)]
    assert kinds == [Action] * 3 + [Observation] * 3


def test_sequential_events_alternate() -> None:
    result = go(three_then_answer(), mode="sequential")
    kinds = [type(e).__name__ for e in result.events if isinstance(e, Action | Observation)]
    assert kinds == ["Action", "Observation"] * 3


def test_errors_are_isolated_and_each_call_answered_once() -> None:
    calls = (
        ("get_weather", {"city": "Paris"}),
        ("broken", {}),
        ("hangs", {}),
        ("no_such_tool", {}),
        ("get_news", '{"topic": "Par'),
        ("get_stock", {"ticker": "AIR"}),
    )
    result = go(ScriptedModel([ScriptedResponse(tool_calls=calls), "partial answer"]))
    status = {e.name: e.status for e in result.executions}
    assert status == {
        "get_weather": "ok",
        "broken": "error",
        "hangs": "timeout",
        "no_such_tool": "unknown_tool",
        "get_news": "invalid_arguments",
        "get_stock": "ok",
    }
    by_name = {e.name: e for e in result.executions}
    assert "RuntimeError: database unavailable" in by_name["broken"].result
    assert "timed out after 0.5 s" in by_name["hangs"].result
    assert "Available tools" in by_name["no_such_tool"].result
    assert by_name["hangs"].duration_s == pytest.approx(0.5)
    assert validate_messages(result.messages) == []
    assert result.status == "completed"


def test_all_calls_failing_stops_the_run() -> None:
    model = ScriptedModel([ScriptedResponse(tool_calls=(("broken", {}), ("no_such", {}))), "unused"])
    result = go(model)
    assert (result.status, result.reason) == ("failed", "all_calls_failed")
    assert "round 0" in (result.error or "")
    assert len(model.requests) == 1


def test_fail_fast_makes_a_final_call_without_tools() -> None:
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=(("broken", {}), ("get_weather", {"city": "X"}))), "final words"]
    )
    result = go(model, error_policy="fail_fast")
    assert (result.status, result.reason, result.final_answer) == ("completed", "fail_fast", "final words")
    assert model.requests[1].tools is None
    assert result.rounds[-1].final


def test_max_rounds_then_final_answer_without_tools() -> None:
    looping = ScriptedResponse(tool_calls=(("sleep_for", {"seconds": 0.01}),))
    steps = [ScriptedResponse(tool_calls=(("sleep_for", {"seconds": 0.01 * (i + 1)}),)) for i in range(3)]
    model = ScriptedModel([*steps, "here is my answer"])
    result = go(model, max_rounds=3)
    assert (result.status, result.reason) == ("completed", "max_rounds")
    assert result.final_answer == "here is my answer"
    final_request = model.requests[-1]
    assert final_request.tools is None
    assert (
        final_request.messages[-1]["role"] == "system"
        and "maximum number of tool rounds (3)" in final_request.messages[-1]["content"]
    )
    assert len(result.rounds) == 4 and result.rounds[-1].final
    del looping


def test_tool_calls_in_the_final_answer_are_ignored_with_a_finding() -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=(("get_weather", {"city": "A"}),)),
            ScriptedResponse(content="x", tool_calls=(("get_weather", {"city": "B"}),)),
        ]
    )
    result = go(model, max_rounds=1)
    assert result.reason == "max_rounds"
    assert result.rounds[-1].tool_calls == () and result.rounds[-1].findings


def test_duplicates_within_a_batch_by_default_across_rounds_on_request() -> None:
    same = ("get_weather", {"city": "Paris"})
    steps = [
        ScriptedResponse(tool_calls=(same, ("get_weather", {"city": "Paris"}))),
        ScriptedResponse(tool_calls=(("get_weather", {"city": "Paris"}),)),
        "done",
    ]
    result = go(ScriptedModel(steps))  # default: within the batch only (a polling tool runs again)
    assert [e.status for e in result.executions] == ["ok", "duplicate", "ok"]
    dup = result.executions[1]
    assert dup.duplicate_of == "call_0_0" and "duplicates call call_0_0" in dup.result
    assert "within-batch de-duplication" in dup.result
    across = go(ScriptedModel(steps), dedupe_across_rounds=True)
    assert [e.status for e in across.executions] == ["ok", "duplicate", "duplicate"]
    assert "of round 0" in across.executions[2].result
    assert "cross-round de-duplication is on for this run" in across.executions[2].result
    off = go(ScriptedModel(steps), dedupe=False)
    assert [e.status for e in off.executions] == ["ok", "ok", "ok"]


def test_idempotent_tools_are_deduplicated_across_rounds() -> None:
    tools = make_tools()
    calls = []

    @tools.register(idempotent=True)
    async def lookup(key: str) -> str:
        calls.append(key)
        return key.upper()

    @tools.register
    async def poll(job: str) -> str:
        calls.append(job)
        return "running"

    steps = [
        ScriptedResponse(tool_calls=(("lookup", {"key": "a"}), ("poll", {"job": "j"}))),
        ScriptedResponse(tool_calls=(("lookup", {"key": "a"}), ("poll", {"job": "j"}))),
        "done",
    ]
    result = go(ScriptedModel(steps), tools)
    assert [e.status for e in result.executions] == ["ok", "ok", "duplicate", "ok"]
    assert calls == ["a", "j", "j"]
    assert "'lookup' is marked idempotent" in result.executions[2].result


def test_hooks_approve_reject_rewrite_and_notify() -> None:
    started, completed, chunks = [], [], []

    def approve(call):
        return "stock lookups are not allowed" if call.name == "get_stock" else True

    async def approve_result(call, ex):
        return False if call.name == "get_news" else None

    def rewrite(messages):
        return [{"role": "system", "content": "be brief"}, *messages]

    hooks = Hooks(
        approve_call=approve,
        approve_result=approve_result,
        before_model_call=rewrite,
        on_tool_start=started.append,
        on_tool_complete=completed.append,
        on_model_chunk=chunks.append,
    )
    model = three_then_answer()
    result = go(model, hooks=hooks)
    status = {e.name: e.status for e in result.executions}
    assert status == {"get_weather": "ok", "get_news": "withheld", "get_stock": "rejected"}
    stock = next(e for e in result.executions if e.name == "get_stock")
    assert stock.result == "Rejected: stock lookups are not allowed. The call was not executed."
    assert all(r.messages[0]["content"] == "be brief" for r in model.requests)
    assert [c.name for c in started] == ["get_weather", "get_news"] and len(completed) == 2
    assert chunks and result.rounds[0].request_messages[0]["role"] == "system"


def test_abort_keeps_finished_results_and_cancels_the_rest() -> None:
    handle = AbortHandle()

    async def main():
        calls = (
            ("sleep_for", {"seconds": 0.1}),
            ("sleep_for", {"seconds": 5.0}),
            ("sleep_for", {"seconds": 9.0}),
        )
        model = ScriptedModel([ScriptedResponse(tool_calls=calls), "never"])
        task = asyncio.create_task(run(model, make_tools(), "go", abort=handle))
        await asyncio.sleep(1.0)
        handle.abort("user pressed stop")
        return await task

    result = run_virtual(main())
    assert (result.status, result.reason, result.error) == ("aborted", "aborted", "user pressed stop")
    assert [e.status for e in result.executions] == ["ok", "cancelled", "cancelled"]
    assert result.executions[1].started_at == pytest.approx(0.0)
    assert result.wall_time_s == pytest.approx(1.0)
    assert validate_messages(result.messages) == []  # cancelled calls are still answered


def test_empty_model_response_ends_with_a_clear_status() -> None:
    result = go(ScriptedModel([ScriptedResponse(content=None)]))
    assert (result.status, result.reason) == ("failed", "empty_response")


def test_model_adapter_failure_keeps_partial_rounds() -> None:
    def explode(request):
        raise ConnectionError("upstream went away")

    model = ScriptedModel([ScriptedResponse(tool_calls=(("get_weather", {"city": "A"}),)), explode])
    result = go(model)
    assert (result.status, result.reason) == ("failed", "model_error")
    assert "ConnectionError: upstream went away" in result.error
    assert len(result.rounds) == 1 and result.executions[0].status == "ok"


def test_script_running_out_raises_with_the_partial_result() -> None:
    model = ScriptedModel([ScriptedResponse(tool_calls=(("get_weather", {"city": "A"}),))])
    with pytest.raises(ScriptError, match="called a 2nd time") as info:
        go(model)
    assert len(info.value.partial_result.rounds) == 1


def test_unused_script_steps_are_reported() -> None:
    model = ScriptedModel(["hi", "unused"])
    go(model)
    with pytest.raises(ScriptError, match="1 scripted step"):
        model.assert_consumed()


def test_first_only_breaks_the_protocol_and_the_validator_says_where() -> None:
    result = go(three_then_answer(), mode="first_only")
    assert [e.status for e in result.executions] == ["ok", "skipped", "skipped"]
    violations = validate_messages(result.messages)
    assert [v.tool_call_id for v in violations] == ["call_0_1", "call_0_2"]
    assert "message 1 (assistant) made tool call 'call_0_1' (get_news) but no tool message answers it" in str(
        violations[0]
    )


def test_run_sync_outside_and_inside_a_loop() -> None:
    result = run_sync(ScriptedModel(["hello"]), make_tools(), "hi")
    assert result.final_answer == "hello"

    async def inside():
        with pytest.raises(UsageError, match=r"await run\(\.\.\.\)"):
            run_sync(ScriptedModel(["x"]), make_tools(), "hi")

    asyncio.run(inside())


def test_sync_tools_run_in_a_thread_without_blocking() -> None:
    import threading

    seen = []

    def blocking(x: int) -> int:
        seen.append(threading.current_thread().name)
        return x * 2

    model = ScriptedModel([ScriptedResponse(tool_calls=(("blocking", {"x": 21}),)), "42"])
    result = run_sync(model, [blocking], "double 21")
    assert result.executions[0].result == "42" and seen[0] != threading.main_thread().name


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"mode": "turbo"}, "choose one of sequential, parallel, serialized, first_only"),
        ({"max_rounds": 0}, "max_rounds=0"),
        ({"concurrency": 0}, "concurrency=0"),
        ({"error_policy": "ignore"}, "error_policy='ignore'"),
        ({"round_trip_s": -1.0}, "round_trip_s=-1.0"),
    ],
)
def test_bad_settings_name_the_field_and_the_fix(kw, match) -> None:
    with pytest.raises(UsageError, match=match):
        RunConfig(**kw)


def test_unknown_run_setting_is_refused() -> None:
    with pytest.raises(UsageError, match="unknown settings"):
        go(ScriptedModel(["x"]), max_round=3)


def test_usage_and_events_carry_timestamps() -> None:
    model = ScriptedModel(
        [ScriptedResponse(content="hi", latency_s=0.8, ttfc_s=0.2, usage={"total_tokens": 7})]
    )
    result = go(model)
    assert result.usage == {"total_tokens": 7}
    responded = next(e for e in result.events if e.kind == "model_response")
    assert (responded.ttfc_s, responded.latency_s) == pytest.approx((0.2, 0.8))
    assert result.events[-1].kind == "run_finished"


def test_blocking_sync_tools_all_run_at_once_in_parallel_mode() -> None:
    """16 blocking tools meet at a barrier: it only opens if all 16 run at the same time (a pool of
    6 workers, asyncio's default on 2 cores, would time the barrier out). Counted, not timed."""
    import threading

    barrier = threading.Barrier(16, timeout=10)
    threads = set()

    def blocking(i: int) -> str:
        threads.add(threading.current_thread().name)
        barrier.wait()
        return f"passed {i}"

    calls = tuple(("blocking", {"i": i}) for i in range(16))
    result = run_sync(ScriptedModel([ScriptedResponse(tool_calls=calls), "ok"]), [blocking], "go")
    assert [e.status for e in result.executions] == ["ok"] * 16
    assert len(threads) == 16


def test_a_stuck_sync_tool_neither_blocks_other_calls_nor_the_end_of_the_run() -> None:
    import threading

    release = threading.Event()
    still_running = []

    def stuck() -> str:
        still_running.append(True)
        release.wait(30)
        still_running.pop()
        return "late"

    def quick(i: int) -> str:
        return f"quick {i}"

    tools = ToolRegistry()
    tools.register(stuck, timeout_s=0.05)
    tools.register(quick)
    steps = [
        ScriptedResponse(tool_calls=(("stuck", {}), *(("quick", {"i": i}) for i in range(8)))),
        ScriptedResponse(tool_calls=(("stuck", {}), ("quick", {"i": 9}))),
        "done",
    ]
    try:
        for mode in ("parallel", "sequential"):
            result = run_sync(ScriptedModel(steps), tools, "go", mode=mode, concurrency=2, dedupe=False)
            assert [e.status for e in result.executions] == ["timeout", *["ok"] * 8, "timeout", "ok"]
            assert "thread cannot be stopped" in result.executions[0].result
            assert result.status == "completed" and still_running  # returned while the threads still block
    finally:
        release.set()


def test_sync_tools_on_the_virtual_clock_run_inline() -> None:
    seen = []

    def blocking(x: int) -> int:
        seen.append(x)
        return x * 2

    model = ScriptedModel([ScriptedResponse(tool_calls=(("blocking", {"x": 21}),)), "42"])
    result = go(model, [blocking], mode="parallel")
    assert result.executions[0].result == "42" and result.executions[0].duration_s == 0.0 and seen == [21]


def test_ctrl_c_during_run_sync_keeps_the_partial_record() -> None:
    """Ctrl-C cancels the run (as asyncio.run would) and comes out as a KeyboardInterrupt carrying the
    record of the run so far as `partial_result`, which says it was a KeyboardInterrupt."""
    import signal

    async def presses_ctrl_c() -> str:
        signal.raise_signal(signal.SIGINT)
        await asyncio.sleep(30)
        return "never"

    async def quick() -> str:
        return "fine"

    model = ScriptedModel([ScriptedResponse(tool_calls=(("quick", {}), ("presses_ctrl_c", {}))), "x"])
    with pytest.raises(KeyboardInterrupt) as info:
        run_sync(model, [quick, presses_ctrl_c], "go", mode="sequential")
    partial = info.value.partial_result
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    assert partial.error.startswith("KeyboardInterrupt (Ctrl-C); the run stopped")
    assert [e.status for e in partial.executions] == ["ok", "cancelled"]
    assert (
        "interrupted (KeyboardInterrupt: Ctrl-C) while this call was running" in partial.executions[1].result
    )
    assert validate_messages(partial.messages) == []


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized", "first_only"])
def test_the_mode_benchmark_measures_a_sound_batch(mode) -> None:
    """benchmarks/bench_modes.py times real work: every call is run and recorded (speed is not tested)."""
    from benchmarks.bench_modes import batch_for, checked, executor, with_mode

    loop = asyncio.new_event_loop()
    try:
        for n in (1, 3):
            ex = executor(loop)
            checked(mode, n, loop.run_until_complete(with_mode(mode, batch_for(n), ex, True)))
    finally:
        loop.close()

"""A call that must stop the run stops the batch's other calls at once, whatever the strategy does
with the exception: a strategy running calls with ``asyncio.gather(..., return_exceptions=True)``,
or catching the exception and joining, must not wait for its slowest call after a Ctrl-C (a
tester's finding, r22 #2: it waited 60 s for a sibling; under ``parallel`` the sibling is cancelled
at once, recorded as cut by the interrupt)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import Hooks, run
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.strategies import Batch, strategy
from toolcall_lab.tools import ToolRegistry


async def slow(key: str) -> str:
    await asyncio.sleep(60)
    return key


async def kbi(key: str) -> str:
    await asyncio.sleep(0.5)
    if key == "raise":
        raise KeyboardInterrupt
    return key


@strategy("gathered")
async def gathered(batch: Batch) -> None:
    await asyncio.gather(*(batch.run(p) for p in range(len(batch.calls))), return_exceptions=True)


@strategy("caught_then_joined")
async def caught_then_joined(batch: Batch) -> None:
    batch.start(0)
    with contextlib.suppress(BaseException):  # (it swallows the interrupt: the run must stop anyway)
        await batch.run(1)
    await batch.join()


@strategy("started_and_gathered")
async def started_and_gathered(batch: Batch) -> None:
    batch.start(1)  # the interrupting call in the batch's call group, the slow one through `run`
    await asyncio.gather(batch.run(0), batch.join(), return_exceptions=True)


STRATEGIES = {
    "gathered": gathered,
    "caught_then_joined": caught_then_joined,
    "started_and_gathered": started_and_gathered,
}


def _model(key: str) -> ScriptedModel:
    calls = (("slow", {"key": "a"}, "a"), ("kbi", {"key": key}, "k"))
    return ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])


def _settings(source: str) -> tuple[str, dict[str, Any]]:
    """Who raises KeyboardInterrupt for call k: the tool, its on_tool_start hook, or a listener at
    its ACTION."""
    if source == "tool":
        return "raise", {}

    def hook(call: Any) -> None:
        if call.tool_call_id == "k":
            raise KeyboardInterrupt

    def listener(event: Any) -> None:
        if event.kind == "action" and event.call.tool_call_id == "k":
            raise KeyboardInterrupt

    if source == "hook":
        return "x", {"hooks": Hooks(on_tool_start=hook)}
    return "x", {"on_event": listener}


@pytest.mark.parametrize("source", ["tool", "hook", "listener"])
@pytest.mark.parametrize("name", sorted(STRATEGIES))
@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_an_interrupt_stops_the_other_calls_at_once_whatever_the_strategy_does_with_it(
    clock: str, name: str, source: str
) -> None:
    key, settings = _settings(source)
    coro = run(_model(key), ToolRegistry([slow, kbi]), "go", mode=STRATEGIES[name], **settings)
    with pytest.raises(KeyboardInterrupt) as info:
        run_virtual(coro) if clock == "virtual" else asyncio.run(coro)
    partial = info.value.partial_result  # type: ignore[attr-defined]
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    a, _ = partial.rounds[0].executions
    assert a.status == "cancelled" and "the run was interrupted" in a.result, a.result  # (not waited for)
    if clock == "virtual":
        assert a.ended_at == pytest.approx(0.5 if source == "tool" else 0.0)
    assert validate_messages(partial.messages) == []


def _tampered(calls: list[tuple[str, dict[str, Any]]], pos: int) -> Any:
    """A recording of `calls` (under sequential) whose call at `pos` ran, it says, with other arguments:
    a replay of it diverges there."""
    from tests.test_strategies import Counting, play, scripted
    from toolcall_lab.trace import Trace, TraceMetadata

    recorded = play(scripted(calls), Counting().registry())
    data = Trace.from_run(recorded, TraceMetadata(title="tampered", origin="scripted")).to_dict()
    data["rounds"][0]["tool_executions"][pos]["arguments"] = "{}"
    return Trace.from_dict(data)


def test_a_replay_divergence_a_strategy_swallows_stops_the_run_as_under_parallel() -> None:
    """A replayed call whose arguments differ from the recording raises a divergence; a strategy
    gathering with ``return_exceptions=True`` swallows it: the run still stops with it (not a
    strategy failure), and the other call is stopped at once, as under ``parallel``."""
    from toolcall_lab.exceptions import ReplayDivergenceError
    from toolcall_lab.replay import replay

    tampered = _tampered([("search", {"key": "x", "seconds": 60}), ("read", {"key": "y", "seconds": 0.2})], 1)
    outcomes = []
    for mode in ("parallel", gathered):
        with pytest.raises(ReplayDivergenceError, match="the recording ran it with other arguments") as info:
            replay(tampered, mode)
        partial = info.value.partial_result  # type: ignore[attr-defined]
        outcomes.append([(e.status, e.ended_at) for e in partial.rounds[0].executions])
        diverged = partial.rounds[0].executions[1]  # (its record says it is the call that diverged: c23 #3)
        assert "the replay diverged from the recording here" in diverged.result
    assert outcomes[0] == outcomes[1] == [("cancelled", 0.0), ("cancelled", 0.0)]


@pytest.mark.parametrize("mode", ["parallel", "eager", "sequential"])
def test_a_cancelled_error_an_event_listener_raises_is_its_failure_not_an_abort(mode: str) -> None:
    """Called, not awaited, a listener is never cancelled: a CancelledError it raises is its own bug,
    recorded as a hook failure while the run goes on, as for any hook (a tester's finding, a23 #3:
    the run ended aborted/interrupted)."""
    from tests.test_strategies import Counting, scripted

    def listener(event: Any) -> None:
        if event.kind == "action":
            raise asyncio.CancelledError("the listener's own")

    model = scripted([("search", {"key": "x", "seconds": 0.2}), ("read", {"key": "y"})])
    result = run_virtual(run(model, Counting().registry(), "go", mode=mode, on_event=listener))
    assert (result.status, result.reason) == ("completed", "final_answer")
    assert [e.status for e in result.executions] == ["ok", "ok"]
    assert [f.hook for f in result.hook_failures] == ["on_event", "on_event"]
    assert all("CancelledError: the listener's own" in f.error for f in result.hook_failures)


async def _answers_the_cut_with_kbi(key: str) -> str:
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    return key


@pytest.mark.parametrize("cut", ["deadline", "abort"])
@pytest.mark.parametrize("mode", ["parallel", "eager"])
@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_a_tool_answering_the_cut_with_an_interrupt_leaves_the_cut_in_the_record(
    clock: str, mode: str, cut: str
) -> None:
    """The deadline (or an abort) cuts two calls; one answers its cancellation with KeyboardInterrupt.
    The run stops with it (the interrupt wins), and the record says what cut the calls: the deadline
    or the abort, and what the tool did on being cancelled (r22 #3: the deadline appeared nowhere,
    and the call was an ``error`` that a replay reproduced as ``cancelled``)."""
    from toolcall_lab.loop import AbortHandle
    from toolcall_lab.replay import replay
    from toolcall_lab.trace import Trace, TraceMetadata

    kbi_tool = _answers_the_cut_with_kbi
    kbi_tool.__name__ = "kbi"
    handle = AbortHandle()

    async def stopper(key: str) -> str:
        await asyncio.sleep(1.0)
        handle.abort("enough")
        return key

    tools = [slow, kbi_tool] + ([stopper] if cut == "abort" else [])
    calls = [("slow", {"key": "a"}, "a"), ("kbi", {"key": "k"}, "k")]
    if cut == "abort":
        calls.append(("stopper", {"key": "s"}, "s"))
    model = ScriptedModel([ScriptedResponse(tool_calls=tuple(calls)), "done"])
    settings: dict[str, Any] = {"timeout_s": 1.0} if cut == "deadline" else {"abort": handle}
    coro = run(model, ToolRegistry(tools), "go", mode=mode, **settings)
    with pytest.raises(KeyboardInterrupt) as info:
        run_virtual(coro) if clock == "virtual" else asyncio.run(coro)
    partial = info.value.partial_result  # type: ignore[attr-defined]
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    said = (
        "the run's deadline (timeout_s=1.0) passed" if cut == "deadline" else "the run was aborted (enough)"
    )
    assert f"raised KeyboardInterrupt on being cancelled as {said}" in partial.error
    a, k = partial.rounds[0].executions[:2]
    assert a.status == k.status == "cancelled"
    assert said in a.result and said in k.result
    assert "on being cancelled it raised KeyboardInterrupt" in k.result
    assert validate_messages(partial.messages) == []
    if clock == "virtual":  # a replay under its own strategy reproduces every call's status
        trace = Trace.from_run(partial, TraceMetadata(title="cut", origin="scripted"))
        again = replay(trace, mode)
        assert [e.status for e in again.rounds[0].executions] == [
            e.status for e in partial.rounds[0].executions
        ]


@pytest.mark.parametrize("mode", ["first_only", "parallel", "sequential", "eager", "serialized"])
def test_no_model_call_is_sent_after_an_abort_a_tool_asked_for(mode: str) -> None:
    """A tool asks for an abort and returns; under ``first_only`` the batch ended right there, and the
    next model call was sent at that instant, then cut (r22 #4): no round begins after an abort."""
    from toolcall_lab.loop import AbortHandle

    handle = AbortHandle()

    async def stopper(key: str) -> str:
        await asyncio.sleep(0.8)
        handle.abort("enough")
        return key

    async def other(key: str) -> str:
        return key

    first = ScriptedResponse(tool_calls=(("stopper", {"key": "a"}, "a"), ("other", {"key": "b"}, "b")))
    model = ScriptedModel([first, ScriptedResponse(content="never", latency_s=1.0), "done"])
    result = run_virtual(run(model, ToolRegistry([stopper, other]), "go", mode=mode, abort=handle))
    assert (result.status, result.reason, result.error) == ("aborted", "aborted", "enough")
    assert len(result.rounds) == 1 and len(model.requests) == 1
    assert not [e for e in result.events if e.kind == "round_started" and e.round_index == 1]


def test_a_recording_cut_off_shows_no_overlap_saved_in_compare() -> None:
    """Two calls overlap until an abort cuts the run: every mode's replay ends at the cut, so no mode
    saved time by overlapping them; ``compare`` says NaN, as for the bounds (a tester's finding, s22
    #3: "saved 9.65 s" for runs that all ended at the same instant), and the summary leaves it out."""
    import math

    from toolcall_lab.analysis import compare
    from toolcall_lab.loop import AbortHandle
    from toolcall_lab.trace import Trace, TraceMetadata

    handle = AbortHandle()

    async def stopper(key: str) -> str:
        await asyncio.sleep(2.0)
        handle.abort("enough")
        return key

    model = ScriptedModel(
        [ScriptedResponse(tool_calls=(("slow", {"key": "a"}, "a"), ("stopper", {"key": "s"}, "s"))), "done"]
    )
    result = run_virtual(run(model, ToolRegistry([slow, stopper]), "go", mode="parallel", abort=handle))
    assert result.status == "aborted"
    trace = Trace.from_run(result, TraceMetadata(title="cut", origin="scripted"))
    table = compare([trace], ["sequential", "parallel", "eager"])
    runs = table.runs.set_index("mode")
    assert all(math.isnan(v) for v in runs["overlap_saved_s"]), runs["overlap_saved_s"]
    assert all(math.isnan(v) for v in runs["stream_overlap_s"])
    assert (table.summary["overlap_saved_s"] == 0.0).all()


@strategy("task_grouped")
async def task_grouped(batch: Batch) -> None:
    async with asyncio.TaskGroup() as group:
        for p in range(len(batch.calls)):
            group.create_task(batch.run(p))


async def _quick(key: str) -> str:
    await asyncio.sleep(0.5)
    return key


@pytest.mark.parametrize("name", ["gathered", "task_grouped", "parallel"])
def test_calls_finishing_at_the_instant_of_an_interrupt_keep_their_results(name: str) -> None:
    """k raises KeyboardInterrupt at 0.5 s, as b and c return: they finished on their own as the run
    stopped, so they keep their results, under every strategy as under ``parallel`` (b23 #1: under
    ``batch.run`` strategies they were cancelled, their results lost); under a TaskGroup the run
    stops with the interrupt, not as the strategy's failure (b23 #3)."""
    _quick.__name__ = "quick"
    mode: Any = {"gathered": gathered, "task_grouped": task_grouped}.get(name, name)
    calls = (("kbi", {"key": "raise"}, "k"), ("quick", {"key": "b"}, "b"), ("quick", {"key": "c"}, "c"))
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
    with pytest.raises(KeyboardInterrupt) as info:
        run_virtual(run(model, ToolRegistry([kbi, _quick]), "go", mode=mode))
    partial = info.value.partial_result  # type: ignore[attr-defined]
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    by_id = {e.tool_call_id: e for e in partial.rounds[0].executions}
    assert by_id["k"].status == "error"
    assert [by_id["b"].status, by_id["c"].status] == ["ok", "ok"], [by_id["b"].result, by_id["c"].result]
    assert validate_messages(partial.messages) == []


def test_no_call_starts_after_a_replay_divergence_under_a_gathering_strategy() -> None:
    """The first call diverges at once, before the second has begun: the second never starts (it
    ran 20 s before the run could stop, b23 #2), as under ``parallel``."""
    from toolcall_lab.exceptions import ReplayDivergenceError
    from toolcall_lab.replay import replay

    tampered = _tampered([("search", {"key": "x", "seconds": 0.2}), ("read", {"key": "y", "seconds": 20})], 0)
    ends = []
    for mode in ("parallel", gathered):
        with pytest.raises(ReplayDivergenceError) as info:
            replay(tampered, mode)
        partial = info.value.partial_result  # type: ignore[attr-defined]
        ends.append((partial.ended_at, [e.status for e in partial.rounds[0].executions]))
    assert ends[0] == ends[1]
    assert ends[1][1] == ["cancelled", "cancelled"] and ends[1][0] < 1.0


def _waits_for_the_first(name: str, limit_s: float) -> Any:
    """A strategy: the first call under a limit of its own (``asyncio.wait_for``), then the others."""

    @strategy(name)
    async def waits(batch: Batch) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(batch.run(0), limit_s)
        for p in range(1, len(batch.calls)):
            await batch.run(p)

    return waits


waits_for_the_first = _waits_for_the_first("waits_for_the_first", 1.0)


def test_a_call_the_strategy_cancelled_replays_under_that_strategy() -> None:
    """The recording's strategy cancelled a call itself (``asyncio.wait_for``): its result is unknown,
    but under the same strategy the replay runs it until the strategy cancels it again, as recorded
    (b23 #5: the replay refused, naming the very strategy it ran under); under another strategy it
    still says the result is unknown."""
    from tests.test_strategies import Counting
    from toolcall_lab.exceptions import ReplayDivergenceError
    from toolcall_lab.replay import replay
    from toolcall_lab.trace import Trace, TraceMetadata

    calls = (("search", {"key": "x", "seconds": 30}, "x"), ("read", {"key": "b", "seconds": 0.2}, "b"))
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
    recorded = run_virtual(run(model, Counting().registry(), "go", mode=waits_for_the_first))
    assert [e.status for e in recorded.executions] == ["cancelled", "ok"]
    trace = Trace.from_run(recorded, TraceMetadata(title="wait_for", origin="scripted"))
    again = replay(trace, waits_for_the_first)
    assert (again.status, again.reason) == (recorded.status, recorded.reason)
    key = [(e.status, e.started_at, e.ended_at, e.result) for e in recorded.executions]
    assert [(e.status, e.started_at, e.ended_at, e.result) for e in again.executions] == key
    with pytest.raises(ReplayDivergenceError, match="its own decision"):
        replay(trace, "parallel")


@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_a_tool_answering_the_strategys_own_cancellation_with_an_interrupt(clock: str) -> None:
    """The strategy cancels a call itself (``asyncio.wait_for``) and the tool answers with
    KeyboardInterrupt: the run stops with it, and the call's record says the strategy cancelled it
    and what the tool did then (b23 #4: it said the tool's own interrupt cut it while it ran)."""
    from toolcall_lab.tools import Tool

    calls = (("answers", {"key": "x"}, "x"), ("quick", {"key": "b"}, "b"))
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
    tools = ToolRegistry(
        [Tool(name="answers", function=_answers_the_cut_with_kbi), Tool(name="quick", function=_quick)]
    )
    coro = run(model, tools, "go", mode=waits_for_the_first)
    with pytest.raises(KeyboardInterrupt) as info:
        run_virtual(coro) if clock == "virtual" else asyncio.run(coro)
    partial = info.value.partial_result  # type: ignore[attr-defined]
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    assert "raised KeyboardInterrupt on being cancelled; the run stopped" in partial.error
    x, b = partial.rounds[0].executions
    assert x.status == "cancelled"
    assert "the strategy 'waits_for_the_first' cancelled it" in x.result
    assert "(on being cancelled it raised KeyboardInterrupt)" in x.result
    assert b.status == "cancelled" and b.result.startswith("Not executed")
    assert validate_messages(partial.messages) == []


async def _answers_the_cut(key: str, how: str = "return") -> str:
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        if how == "raise":
            raise ValueError("boom on cancel") from None
        await asyncio.sleep(0.3)  # (cleans up a while, then returns)
        return "late"
    return key


@pytest.mark.parametrize("how", ["return", "raise"])
def test_a_call_the_strategy_cancelled_replays_with_how_its_tool_answered(how: str) -> None:
    """The strategy cancels a call itself and its tool answers (returns after cleaning up, or raises):
    a replay under that strategy does the same, so the next request, which carries the call's text,
    matches the recording (c23 #1: the replay said "result is unknown" and the conversation
    differed)."""
    from tests.test_strategies import Counting
    from toolcall_lab.replay import replay
    from toolcall_lab.tools import Tool
    from toolcall_lab.trace import Trace, TraceMetadata

    calls = (("answers", {"key": "x", "how": how}, "x"), ("read", {"key": "b", "seconds": 0.2}, "b"))
    tools = Counting().registry()
    tools.add(Tool(name="answers", function=_answers_the_cut))
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
    recorded = run_virtual(run(model, tools, "go", mode=waits_for_the_first))
    x = recorded.executions[0]
    assert x.status == "cancelled" and "the strategy 'waits_for_the_first' cancelled it" in x.result
    trace = Trace.from_run(recorded, TraceMetadata(title="answers", origin="scripted"))
    again = replay(trace, waits_for_the_first)
    key = [(e.status, e.started_at, e.ended_at, e.result) for e in recorded.executions]
    assert [(e.status, e.started_at, e.ended_at, e.result) for e in again.executions] == key
    assert (again.status, again.reason, again.wall_time_s) == (
        recorded.status,
        recorded.reason,
        recorded.wall_time_s,
    )


def test_a_call_answering_the_cut_at_once_replays_at_the_cut_under_another_strategy() -> None:
    """Recorded under eager (its calls start while the model streams), cut by the deadline, a tool
    answering the cancellation at once: replayed under parallel (the calls start later), the call
    answers at the cut, as recorded, not as long after its own start as it ran (c23 #2: the replay
    ran 0.2 s past the cut)."""
    from tests.test_strategies import ChunkModel, answer, chunk, header
    from toolcall_lab.replay import replay
    from toolcall_lab.tools import Tool
    from toolcall_lab.trace import Trace, TraceMetadata

    def stream() -> ChunkModel:
        return ChunkModel(
            [
                (0.1, header(0, "x", "answers", '{"key": "x", "how": "raise"}')),
                (0.3, header(1, "a", "slow", '{"key": "a"}')),
                (0.3, chunk({}, "tool_calls")),
            ],
            answer(),
        )

    tools = ToolRegistry([Tool(name="answers", function=_answers_the_cut), slow])
    recorded = run_virtual(run(stream(), tools, "go", mode="eager", timeout_s=1.0))
    assert (recorded.status, recorded.reason, recorded.wall_time_s) == ("timeout", "deadline", 1.0)
    trace = Trace.from_run(recorded, TraceMetadata(title="cut", origin="scripted"))
    for mode in ("parallel", "sequential", "eager"):
        again = replay(trace, mode)
        assert again.wall_time_s == pytest.approx(1.0), (mode, again.wall_time_s)
        assert all(e.ended_at <= 1.0 + 1e-9 for e in again.executions), mode


async def _cleans_up_then_stops(key: str) -> str:
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        await asyncio.sleep(0.5)  # (cleans up, then lets the cancellation through)
        raise
    return key


@pytest.mark.parametrize("cut", ["strategy", "deadline"])
def test_a_call_that_cleans_up_before_stopping_replays_with_its_cleanup(cut: str) -> None:
    """Cancelled (by its strategy, or by the run's deadline), a tool cleans up for 0.5 s and then
    lets the cancellation through: its record ends when it stopped, and a replay under the same
    strategy keeps that time, and the run's end (d23 #1: the replay stopped it at once and the run
    ended 0.5 s early, with no warning; d23 #2: the same after the deadline)."""
    from tests.test_strategies import Counting
    from toolcall_lab.replay import replay
    from toolcall_lab.tools import Tool
    from toolcall_lab.trace import Trace, TraceMetadata

    calls = (("lingers", {"key": "x"}, "x"), ("read", {"key": "b", "seconds": 0.2}, "b"))
    tools = Counting().registry()
    tools.add(Tool(name="lingers", function=_cleans_up_then_stops))
    mode: Any = waits_for_the_first if cut == "strategy" else "parallel"
    settings: dict[str, Any] = {} if cut == "strategy" else {"timeout_s": 1.0}
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
    recorded = run_virtual(run(model, tools, "go", mode=mode, **settings))
    x = recorded.executions[0]
    assert x.status == "cancelled" and x.ended_at == pytest.approx(1.5)
    trace = Trace.from_run(recorded, TraceMetadata(title="lingers", origin="scripted"))
    again = replay(trace, mode)
    key = [(e.status, e.started_at, e.ended_at) for e in recorded.executions]
    assert [(e.status, e.started_at, e.ended_at) for e in again.executions] == key
    assert again.wall_time_s == pytest.approx(recorded.wall_time_s)


waits_half_a_second = _waits_for_the_first("waits_half_a_second", 0.5)


def test_a_replay_strategy_cancelling_a_call_early_stops_it_then() -> None:
    """Recorded under eager and cut by the deadline at 2 s; replayed under a strategy that cancels
    the call after 0.5 s: the call stops then (it has no cleanup to do), and the next call runs, as a
    recording under that strategy shows (e23 #1: the call ran on until the recorded cut, and the next
    one never ran)."""
    from toolcall_lab.replay import replay
    from toolcall_lab.trace import Trace, TraceMetadata

    def model() -> ScriptedModel:
        calls = (("slow", {"key": "x"}, "x"), ("quick", {"key": "a"}, "a"))
        return ScriptedModel([ScriptedResponse(tool_calls=calls, latency_s=0.3), "done"])

    _quick.__name__ = "quick"
    tools = ToolRegistry([slow, _quick])
    recorded = run_virtual(run(model(), tools, "go", mode="eager", timeout_s=2.0))
    assert (recorded.status, recorded.reason) == ("timeout", "deadline")
    truth = run_virtual(run(model(), tools, "go", mode=waits_half_a_second, timeout_s=2.0))
    trace = Trace.from_run(recorded, TraceMetadata(title="cut", origin="scripted"))
    again = replay(trace, waits_half_a_second)
    assert [(e.status, e.started_at, e.ended_at) for e in again.rounds[0].executions] == [
        (e.status, e.started_at, e.ended_at) for e in truth.rounds[0].executions
    ]
    assert "the strategy 'waits_half_a_second' cancelled it" in again.rounds[0].executions[0].result


def test_a_call_the_recording_never_started_stops_at_the_replays_cut() -> None:
    """Recorded under sequential and cut by the deadline while the first call cleaned up until 1.5 s;
    the second call never started. Replayed under parallel, the second call runs from the start and
    is cut at the deadline, not at the recorded run's end (e23 #2)."""
    from tests.test_strategies import Counting
    from toolcall_lab.replay import replay
    from toolcall_lab.tools import Tool
    from toolcall_lab.trace import Trace, TraceMetadata

    calls = (("lingers", {"key": "x"}, "x"), ("slow", {"key": "a"}, "a"))
    tools = Counting().registry()
    tools.add(Tool(name="lingers", function=_cleans_up_then_stops))
    tools.add(Tool(name="slow", function=slow))
    model = ScriptedModel([ScriptedResponse(tool_calls=calls, latency_s=0.3), "done"])
    recorded = run_virtual(run(model, tools, "go", mode="sequential", timeout_s=1.0))
    assert [e.status for e in recorded.executions] == ["cancelled", "cancelled"]
    assert recorded.executions[1].result.startswith("Not executed")
    trace = Trace.from_run(recorded, TraceMetadata(title="cut", origin="scripted"))
    again = replay(trace, "parallel")
    x, a = again.rounds[0].executions
    assert (x.ended_at, a.ended_at) == (pytest.approx(1.5), pytest.approx(1.0))

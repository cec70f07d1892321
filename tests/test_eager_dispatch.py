"""Built-in eager without a task of its own (issue 14's speed target): the batch dispatches each call
as it arrives while the run's own task receives the stream, and the strategy is called once the
stream has ended. A strategy with its own ``run`` (even one calling ``Eager.run``) keeps a task that
runs alongside the stream; both behave alike.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.test_strategies import ChunkModel, Counting, answer, chunk, header, play, starts
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import AbortHandle, Hooks, run
from toolcall_lab.protocol import validate_messages
from toolcall_lab.strategies import Batch, Eager
from toolcall_lab.strategies._bulk import TASK_NAME
from toolcall_lab.tools import ToolRegistry


class Delegating(Eager):
    """Eager's own run, called from a strategy's own ``run``: the general path (a task of its own)."""

    name = "delegating"

    async def run(self, batch: Batch) -> None:
        await super().run(batch)


def _response() -> list[tuple[float, dict[str, Any]]]:
    return [
        (0.1, header(0, "a", "probe", '{"key": "x"}')),
        (0.2, header(1, "b", "probe", '{"key": "y"}')),
        (0.2, header(2, "c", "probe", '{"key": "z"}')),  # (b and c arrive at one step of the loop)
        (0.5, chunk({}, "tool_calls")),
    ]


def _probing() -> tuple[ToolRegistry, list[set[str]]]:
    """A tool that notes the names of the tasks other than the calls' own while it runs."""
    seen: list[set[str]] = []

    async def probe(key: str) -> str:
        seen.append({t.get_name() for t in asyncio.all_tasks() if t.get_name() != TASK_NAME})
        await asyncio.sleep(0.05)
        return key

    return ToolRegistry([probe]), seen


def _two_calls(end: float) -> ChunkModel:
    """a at 0.1, b at 0.2, the finish at `end` (0.2: in b's step of the loop)."""
    return ChunkModel(
        [
            (0.1, header(0, "a", "search", '{"key": "x"}')),
            (0.2, header(1, "b", "read", '{"key": "y"}')),
            (end, chunk({}, "tool_calls")),
        ],
        answer(),
    )


def _three_calls(a_arguments: str) -> ChunkModel:
    """a (search, `a_arguments`) alone at 0.1, b (read) and c (write) at one step at 0.3, the finish
    at 0.5."""
    return ChunkModel(
        [
            (0.1, header(0, "a", "search", a_arguments)),
            (0.3, header(1, "b", "read", '{"key": "b"}')),
            (0.3, header(2, "c", "write", '{"key": "c"}')),
            (0.5, chunk({}, "tool_calls")),
        ],
        answer(),
    )


def _interrupts_at_action(n: int) -> Any:
    """An event listener raising KeyboardInterrupt at the n-th ACTION."""
    actions = [0]

    def on_event(event: Any) -> None:
        if event.kind == "action":
            actions[0] += 1
            if actions[0] == n:
                raise KeyboardInterrupt

    return on_event


def _interrupted(coro: Any, clock: str = "virtual") -> Any:
    """Run `coro` on `clock`; it must stop with KeyboardInterrupt: the record it carries."""
    with pytest.raises(KeyboardInterrupt) as info:
        run_virtual(coro) if clock == "virtual" else asyncio.run(coro)
    return info.value.partial_result  # type: ignore[attr-defined]


@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_builtin_eager_adds_no_task_to_the_run_and_a_strategys_own_run_does(clock: str) -> None:
    def tasks_under(strategy: Any) -> tuple[list[set[str]], Any]:
        tools, seen = _probing()
        coro = run(ChunkModel(_response(), answer()), tools, "go", mode=strategy)
        result = run_virtual(coro) if clock == "virtual" else asyncio.run(coro)
        assert result.status == "completed", result.reason
        return seen, result

    parallel, _ = tasks_under("parallel")
    eager, result = tasks_under("eager")
    assert len(eager) == 3 and all(len(names) == len(parallel[0]) for names in eager + parallel)
    execs = result.rounds[0].executions
    assert [e.status for e in execs] == ["ok", "ok", "ok"]
    assert execs[0].started_at < result.rounds[0].model_call.ended_at  # (it did start early)
    delegating, _ = tasks_under(Delegating())
    assert all(len(names) == len(parallel[0]) + 2 for names in delegating)  # its task, the stream's


def test_a_strategy_calling_eagers_run_starts_each_call_when_eager_does() -> None:
    model = ChunkModel(_response(), answer())
    tools, _ = _probing()
    builtin = play(model, tools, mode="eager")
    model = ChunkModel(_response(), answer())
    tools, _ = _probing()
    delegating = play(model, tools, mode=Delegating())
    assert starts(delegating) == starts(builtin) == [0.1, 0.2, 0.2]  # (each complete at its header)
    events = [(e.kind, round(e.at, 6)) for e in delegating.events if e.kind in ("action", "observation")]
    assert events == [(e.kind, round(e.at, 6)) for e in builtin.events if e.kind in ("action", "observation")]
    assert validate_messages(delegating.messages) == []


def test_a_call_failing_mid_stream_leaves_the_run_task_with_no_cancellation_pending() -> None:
    """The run's task is cancelled to stop the stream (as a task group cancels its parent); that
    cancellation is taken back, so what the run records afterwards is not refused as "cut off"."""

    async def interrupts(key: str) -> str:  # (a Ctrl-C landing in the tool 0.1 s after it started)
        await asyncio.sleep(0.1)
        raise KeyboardInterrupt(key)

    tools = Counting().registry()
    tools.register(interrupts)
    a = header(0, "a", "search", '{"key": "x", "seconds": 0.05}')
    model = ChunkModel(
        [
            (0.1, a),
            (0.2, header(1, "b", "interrupts", '{"key": "y"}')),
            (0.35, header(2, "c", "read", '{"key": "z", "seconds": 5}')),
            (9.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )
    cancelling: list[int] = []

    async def main() -> Any:
        try:
            return await run(model, tools, "go", mode="eager")
        finally:
            task = asyncio.current_task()
            assert task is not None
            cancelling.append(task.cancelling())

    with pytest.raises(KeyboardInterrupt) as info:
        run_virtual(main())
    assert cancelling == [0]
    partial = info.value.partial_result  # type: ignore[attr-defined]
    rnd = partial.rounds[0]
    assert rnd.model_call.ended_at == pytest.approx(0.3)  # b raised at 0.3: the stream stopped then
    assert [c.tool_call_id for c in rnd.tool_calls] == ["a", "b"]  # (c had not appeared)
    assert [e.status for e in rnd.executions] == ["ok", "error"]
    assert validate_messages(partial.messages) == []


@pytest.mark.parametrize("clock", ["virtual", "real"])
@pytest.mark.parametrize("end", [0.2, 0.3])  # the stream's end in the same step as b's arrival, or later
def test_a_listener_interrupting_at_an_action_mid_stream_stops_the_run_as_itself(
    clock: str, end: float
) -> None:
    """The ACTION of a call that arrives is emitted in the run's own task, inside the stream's
    parsing: a listener's KeyboardInterrupt there stops the stream and comes out of `run` as itself
    (it came out as a CancelledError, recorded ``cancelled``, when b arrived with the stream's end)."""
    coro = run(_two_calls(end), Counting().registry(), "go", mode="eager", on_event=_interrupts_at_action(2))
    partial = _interrupted(coro, clock)
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    assert "the on_event listener raised KeyboardInterrupt" in (partial.error or "")
    execs = partial.rounds[0].executions
    assert [e.tool_call_id for e in execs] == ["a", "b"]
    assert execs[0].status == "cancelled" and "interrupted" in execs[0].result  # (a ran for 1 s)
    assert validate_messages(partial.messages) == []


@pytest.mark.parametrize("clock", ["virtual", "real"])
@pytest.mark.parametrize("mode", ["eager", "parallel", "delegating"])
@pytest.mark.parametrize("nth", [2, 3])  # b (the first to arrive in its step), c (after it, same step)
def test_a_listener_that_aborts_then_raises_at_an_action_stops_the_run_with_its_interrupt(
    clock: str, mode: str, nth: int
) -> None:
    """The interrupt is what stops the run, under every strategy as under parallel: the abort the
    listener asked for just before is delivered while the stream stops, and must not replace it."""
    handle = AbortHandle()
    actions = [0]

    def on_event(event: Any) -> None:
        if event.kind == "action":
            actions[0] += 1
            if actions[0] == nth:
                handle.abort("the listener's abort")
                raise KeyboardInterrupt

    model = _three_calls('{"key": "a", "seconds": 0.1}')
    strategy = Delegating() if mode == "delegating" else mode
    coro = run(model, Counting().registry(), "go", mode=strategy, on_event=on_event, abort=handle)
    partial = _interrupted(coro, clock)
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    assert validate_messages(partial.messages) == []


def test_a_stream_the_run_stopped_is_not_said_to_lack_a_finish_reason() -> None:
    """A listener stops the run at the ACTION of a call that arrives in the same step as the finish
    chunk: eager stops reading there, so the finish was never read; the round's note says the run cut
    the response, and no ``no_finish_reason`` finding blames the model for it."""
    with pytest.raises(KeyboardInterrupt) as info:
        run_virtual(
            run(_two_calls(0.2), Counting().registry(), "go", mode="eager", on_event=_interrupts_at_action(2))
        )
    rnd = info.value.partial_result.rounds[0]  # type: ignore[attr-defined]
    assert any("cut off" in note for note in rnd.strategy_notes)
    assert "no_finish_reason" not in {f.kind for f in rnd.findings}


@pytest.mark.parametrize("hook", ["approve_call", "on_tool_start"])
@pytest.mark.parametrize("mode", ["eager", "parallel", "delegating"])
def test_no_call_starts_after_a_hook_raised_keyboard_interrupt(hook: str, mode: str) -> None:
    """Once a hook raised KeyboardInterrupt, the run stops with it: a sibling whose turn comes while
    the interrupt is on its way to the run's task is recorded as never started, not run (under
    parallel and a strategy with its own task, c entered its tool after the interrupt)."""
    log: list[tuple[str, str]] = []

    def approve(call: Any) -> bool:
        log.append(("approve", call.tool_call_id))
        if hook == "approve_call" and call.tool_call_id == "b":
            raise KeyboardInterrupt
        return True

    def on_start(call: Any) -> None:
        log.append(("start", call.tool_call_id))
        if hook == "on_tool_start" and call.tool_call_id == "b":
            raise KeyboardInterrupt

    tools, entered = ToolRegistry(), []
    for name in ("search", "read", "write"):

        async def tool(key: str, name: str = name) -> str:
            entered.append(name)
            await asyncio.sleep(0.1)
            return key

        tools.register(tool, name=name)
    model = _three_calls('{"key": "a"}')
    hooks = Hooks(approve_call=approve) if hook == "approve_call" else Hooks(on_tool_start=on_start)
    strategy = Delegating() if mode == "delegating" else mode
    partial = _interrupted(run(model, tools, "go", mode=strategy, hooks=hooks))
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    assert "write" not in entered and ("approve", "c") not in log and ("start", "c") not in log
    c = partial.rounds[0].executions[2]
    assert c.status == "cancelled" and "before this call started" in c.result
    assert validate_messages(partial.messages) == []


@pytest.mark.parametrize("mode", ["eager", "parallel"])
def test_a_listener_stopping_the_run_at_a_hook_failure_is_named_and_the_call_never_ran(mode: str) -> None:
    """on_tool_start fails (ValueError: ignored, the call would run), then the listener raises
    KeyboardInterrupt at that failure's event: the record names the listener, not the hook, and the
    failure no longer says the call ran."""

    def on_start(call: Any) -> None:
        if call.tool_call_id == "b":
            raise ValueError("hook bug")

    def on_event(event: Any) -> None:
        if event.kind == "hook_failed":
            raise KeyboardInterrupt

    model = _two_calls(0.5)
    coro = run(
        model, Counting().registry(), "go", mode=mode, hooks=Hooks(on_tool_start=on_start), on_event=on_event
    )
    partial = _interrupted(coro)
    b = partial.rounds[0].executions[1]
    assert b.result == "Not executed: the on_event listener raised KeyboardInterrupt; the run stopped."
    (failure,) = partial.hook_failures
    assert (failure.hook, failure.error) == ("on_tool_start", "ValueError: hook bug")
    assert failure.effect.endswith("the call never ran") and "the call ran" not in failure.effect


def test_a_strategy_that_catches_exception_around_a_call_does_not_lose_a_keyboard_interrupt() -> None:
    """A hook's KeyboardInterrupt reaches a strategy as `Interrupted` (an ``Exception``): a strategy
    catching ``Exception`` around `batch.run` still has the run stop with the interrupt, not as
    "cancelled" (the calls after it are refused) nor as completed."""
    from toolcall_lab.strategies import strategy

    @strategy("catches_everything")
    async def catches_everything(batch: Batch) -> None:
        for pos in range(len(batch.calls)):
            try:
                await batch.run(pos)
            except Exception as exc:  # (defensive code a researcher may well write)
                batch.note(f"call {pos} failed: {exc}")

    def on_start(call: Any) -> None:
        if call.tool_call_id == "a":
            raise KeyboardInterrupt

    model = _two_calls(0.5)
    coro = run(
        model, Counting().registry(), "go", mode=catches_everything, hooks=Hooks(on_tool_start=on_start)
    )
    partial = _interrupted(coro)
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    assert [e.status for e in partial.rounds[0].executions] == ["cancelled", "cancelled"]
    assert "before this call started" in partial.rounds[0].executions[1].result


@pytest.mark.parametrize("mode", ["eager", "parallel", "delegating"])
def test_a_hook_that_blocks_past_the_deadline_then_raises_keyboard_interrupt_stops_the_run_with_it(
    mode: str,
) -> None:
    """On the real clock an on_tool_start hook holds the loop past the deadline, then raises
    KeyboardInterrupt: the run stops with the interrupt, not ``timeout/deadline`` (a strategy with its
    own task returned the timeout, its record saying the hook's interrupt stopped the call)."""
    import time

    def on_start(call: Any) -> None:
        if call.tool_call_id == "k":
            time.sleep(0.3)
            raise KeyboardInterrupt

    model = ChunkModel(
        [
            (0.01, header(0, "a", "search", '{"key": "a", "seconds": 5}')),
            (0.01, header(1, "k", "read", '{"key": "k"}')),
            (0.05, chunk({}, "tool_calls")),
        ],
        answer(),
    )
    strategy = Delegating() if mode == "delegating" else mode
    coro = run(
        model, Counting().registry(), "go", mode=strategy, timeout_s=0.2, hooks=Hooks(on_tool_start=on_start)
    )
    partial = _interrupted(coro, "real")
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    assert validate_messages(partial.messages) == []


def _screened_out(duplicate: bool) -> list[tuple[float, dict[str, Any]]]:
    """Each call the first to arrive at its step of the loop (the lean lead path): bad arguments, an
    unknown tool, an ordinary call, and (`duplicate`) first a duplicate of a call still running (after
    which de-duplication decides every call at its turn)."""
    second = '{"key": "x", "seconds": 0.5}' if duplicate else '{"key": "v", "seconds": 0.5}'
    return [
        (0.1, header(0, "a", "search", '{"key": "x", "seconds": 0.5}')),
        (0.2, header(1, "b", "search", second)),
        (0.3, header(2, "c", "read", '{"nope": 1}')),  # (bad arguments)
        (0.4, header(3, "d", "nosuch", '{"key": "z"}')),  # (unknown tool)
        (0.5, header(4, "e", "write", '{"key": "w", "seconds": 0.1}')),
        (0.6, chunk({}, "tool_calls")),
    ]


def _record(result: Any) -> tuple[Any, ...]:
    rnd = result.rounds[0]
    calls = [
        (e.tool_call_id, e.status, e.result, round(e.started_at, 6), round(e.ended_at, 6))
        for e in rnd.executions
    ]
    events = [(e.kind, round(e.at, 6)) for e in result.events if e.kind in ("action", "observation")]
    return result.status, calls, events


@pytest.mark.parametrize("duplicate", [True, False])
@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_calls_screened_out_as_they_arrive_are_answered_as_on_the_general_path(
    clock: str, duplicate: bool
) -> None:
    """Built-in eager dispatches the first call arriving at a step of the loop on a lean path; a
    duplicate (decided at its turn), bad arguments and an unknown tool take that path too, and come
    out exactly as they do on the general one (a strategy calling ``Eager.run`` from its own task)."""
    records = []
    for strategy in ("eager", Delegating()):
        coro = run(ChunkModel(_screened_out(duplicate), answer()), Counting().registry(), "go", mode=strategy)
        result = run_virtual(coro) if clock == "virtual" else asyncio.run(coro)
        assert validate_messages(result.messages) == []
        records.append(_record(result))
    builtin, general = records
    statuses = [c[1] for c in builtin[1]]
    assert statuses == ["ok", "duplicate" if duplicate else "ok", "invalid_arguments", "unknown_tool", "ok"]
    if clock == "virtual":
        assert builtin == general
        b_at = 0.6 if duplicate else 0.2  # (a duplicate is answered once its original finished)
        assert [c[3] for c in builtin[1]] == [0.1, b_at, 0.3, 0.4, 0.5]
    else:
        assert builtin[0] == general[0] and [c[:3] for c in builtin[1]] == [c[:3] for c in general[1]]
    kinds = [k for k, _ in builtin[2]]
    assert kinds.count("action") == kinds.count("observation") == 5  # (one each: none taken back)


@pytest.mark.parametrize("mode", ["eager", "delegating"])
def test_a_call_arriving_after_an_abort_was_asked_never_starts(mode: str) -> None:
    """The ``on_model_chunk`` hook asks for an abort on a chunk, and the next chunk (at the same
    instant: no await between them) completes a call, the first to arrive at that step of the loop:
    it is refused before it starts, its ACTION never emitted, on the lean path as on the general one."""
    handle = AbortHandle()

    def on_model_chunk(payload: dict[str, Any]) -> None:
        if payload["choices"][0]["delta"].get("content") == "stop now":
            handle.abort("asked on a chunk")

    model = ChunkModel(
        [
            (0.1, header(0, "a", "search", '{"key": "x", "seconds": 2}')),
            (0.2, chunk({"content": "stop now"})),
            (0.2, header(1, "b", "read", '{"key": "y"}')),
            (0.5, chunk({}, "tool_calls")),
        ],
        answer(),
    )
    tools = Counting()
    strategy = Delegating() if mode == "delegating" else mode
    hooks = Hooks(on_model_chunk=on_model_chunk)
    result = run_virtual(run(model, tools.registry(), "go", mode=strategy, hooks=hooks, abort=handle))
    assert (result.status, result.reason) == ("aborted", "aborted")
    assert [key for key, _ in tools.started] == ["x"]  # (b never started)
    actions = [e.call.tool_call_id for e in result.events if e.kind == "action"]
    assert actions == ["a"]
    assert validate_messages(result.messages) == []

"""Issue 11, seventh check: what a fresh-eyes tester (report t11) found in the run loop.

Each finding is fixed as a class of problem, and each test here failed before its fix:

1. a harness limit told from a tool's own ``TimeoutError`` wherever the harness waits (both clocks);
2. / 7. the words of a cut-off call follow from what the code observed (did this call's own task
   receive the cancellation? who cut: the deadline, a hook, the strategy?), the same live and in replay;
3. every field of a record kept on every path (``queued_at`` of a call cut off while it waited or ran);
8. every ``--out`` checked before any work, by one rule;
4. / 5. / 6. signals in every command that runs (real processes, real signals);
9. ``validate`` reports a trace that contradicts itself;
10. / 11. a withheld result kept in the record, hook failures carried through a replay;
14. trace files grow linearly with the rounds (schema 3);
12. / 13. / 15. messages and docs that say what happens.

Virtual clock unless a test needs real threads or a real process; no wall-clock thresholds.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from toolcall_lab import Hooks, ScriptedModel, ScriptedResponse, ToolRegistry, replay, run_sync
from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import UsageError
from toolcall_lab.loop import run
from toolcall_lab.runs import RunResult
from toolcall_lab.scenarios import simulated
from toolcall_lab.tools import ToolThreads
from toolcall_lab.trace import Trace, TraceMetadata
from toolcall_lab.trace_files import load, save


def as_trace(result: RunResult, title: str = "t11") -> Trace:
    return Trace.from_run(result, TraceMetadata(title=title, origin="scripted"))


def reloaded(result: RunResult, tmp_path: Path, name: str = "t.json") -> Trace:
    return load(save(as_trace(result), tmp_path / name))


def texts(result: RunResult) -> list[tuple[str, str]]:
    return [(e.status, e.result) for e in result.executions]


def what_happened(result: RunResult) -> list[tuple[str, str]]:
    """Each call's status and what its text says it did, without what cut the run off (a replay of
    a run cancelled from outside is cut by its own abort at the recorded end, and says so)."""
    return [(e.status, e.result.split(" while this call was running")[-1]) for e in result.executions]


# --- 1. the harness's limit vs the tool's own TimeoutError ------------------------------------------


def own_timeout_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register(timeout_s=5)
    def fetch(url: str) -> str:
        """A sync tool whose socket read times out (its own TimeoutError)."""
        raise TimeoutError("socket read timed out")

    @tools.register(timeout_s=5)
    async def afetch(url: str) -> str:
        """The same, async."""
        raise TimeoutError("read timed out")

    return tools


def own_timeout_model() -> ScriptedModel:
    return ScriptedModel(
        [ScriptedResponse(tool_calls=(("fetch", {"url": "x"}), ("afetch", {"url": "y"}))), "ok"]
    )


@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_a_tools_own_timeout_error_is_its_error_on_both_clocks(clock: str) -> None:
    tools = own_timeout_tools()
    if clock == "virtual":
        result = run_virtual(run(own_timeout_model(), tools, "go", mode="parallel"))
    else:
        result = run_sync(own_timeout_model(), tools, "go", mode="parallel")
    assert texts(result) == [
        ("error", "Error: tool 'fetch' raised TimeoutError: socket read timed out"),
        ("error", "Error: tool 'afetch' raised TimeoutError: read timed out"),
    ]


def test_tool_threads_wait_tells_its_limit_from_the_tools_timeout_error() -> None:
    from toolcall_lab.tools import LimitExpired

    threads = ToolThreads()
    release = threading.Event()

    def own() -> str:
        raise TimeoutError("mine")

    try:
        with pytest.raises(TimeoutError, match="mine") as raised:
            threads.wait(own, {}, 30)
        assert not isinstance(raised.value, LimitExpired)
        with pytest.raises(LimitExpired) as expired:
            threads.wait(release.wait, {}, 0.01)  # (blocks until released below)
        assert not isinstance(expired.value, TimeoutError)  # never confused with a tool's own
    finally:
        release.set()
        threads.shutdown()


def test_a_tool_that_raises_a_timeout_error_on_being_cancelled_at_its_limit_is_said_so() -> None:
    tools = ToolRegistry()

    @tools.register(timeout_s=1)
    async def slow(x: int) -> str:
        """Turns the limit's cancellation into a TimeoutError of its own."""
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            raise TimeoutError("gave up politely") from None
        return "never"

    model = ScriptedModel([ScriptedResponse(tool_calls=(("slow", {"x": 1}),)), "ok"])
    result = run_virtual(run(model, tools, "go", all_failed_policy="continue"))
    ex = result.executions[0]
    assert ex.status == "timeout" and ex.duration_s == 1.0
    assert "on being cancelled it raised TimeoutError: gave up politely" in ex.result


def test_from_limit_tells_an_asyncio_timeout_apart_from_a_timeout_error_raised_inside() -> None:
    from toolcall_lab._execution import from_limit

    async def main() -> tuple[BaseException, BaseException]:
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(1)
        except TimeoutError as exc:
            limit = exc
        try:
            async with asyncio.timeout(10):
                await asyncio.sleep(0)
                raise TimeoutError("own")
        except TimeoutError as exc:
            own = exc
        return limit, own

    limit, own = run_virtual(main())
    assert from_limit(limit) and not from_limit(own)


# --- 2. / 7. the words of a cut-off call follow from what happened ---------------------------------

LOG: list[tuple[str, str]] = []
HOLDER: list[asyncio.Task[Any]] = []


def cut_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    async def work(key: str, secs: float, fail: bool = False) -> str:
        """Sleeps, logging what it saw."""
        try:
            await asyncio.sleep(secs)
        except asyncio.CancelledError:
            LOG.append(("cancelled", key))
            raise
        LOG.append(("finished", key))
        if fail:
            raise ValueError("fail " + key)
        return "done " + key

    @tools.register
    async def arm(at: float) -> str:
        """Cancels the run's task `at` seconds from now (a timer set after `work`'s had started)."""
        asyncio.get_running_loop().call_later(at, HOLDER[0].cancel)
        await asyncio.sleep(60)
        return "never"

    return tools


async def cancelled_run(mode: str, fail: bool) -> RunResult:
    """`work` ends at 1.0 s by itself; the run's task is cancelled at that same instant, after `work`'s
    timer fired: the call finished before any cancellation reached its task."""
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=(("work", {"key": "a", "secs": 1.0, "fail": fail}), ("arm", {"at": 1.0}))
            ),
            "x",
        ]
    )
    task = asyncio.get_running_loop().create_task(run(model, cut_tools(), "go", mode=mode))
    HOLDER[:] = [task]
    try:
        await task
    except asyncio.CancelledError as exc:
        return exc.partial_result  # type: ignore[attr-defined,no-any-return]
    raise AssertionError("the run was not cancelled")


@pytest.mark.parametrize("mode", ["parallel", "eager", "parallel[cap=2]"])
@pytest.mark.parametrize("fail", [False, True])
def test_a_call_that_finished_as_the_run_was_cut_keeps_its_outcome(
    mode: str, fail: bool, tmp_path: Path
) -> None:
    LOG.clear()
    result = run_virtual(cancelled_run(mode, fail))
    assert ("finished", "a") in LOG and ("cancelled", "a") not in LOG  # what the tool saw
    work, armed = result.executions
    if fail:
        assert (work.status, work.result) == ("error", "Error: tool 'work' raised ValueError: fail a")
    else:
        assert (work.status, work.result, work.ended_at) == ("ok", "done a", 1.0)
    assert "caught the cancellation" not in work.result and "on being cancelled" not in work.result
    assert armed.status == "cancelled" and "the run was cancelled while this call was running" in armed.result
    again = replay(reloaded(result, tmp_path), mode)  # a replay says the same
    assert what_happened(again) == what_happened(result)


def caught_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    async def stubborn(secs: float, then: str) -> str:
        """Catches the cancellation, then returns (after a while) or raises."""
        try:
            await asyncio.sleep(secs)
        except asyncio.CancelledError:
            await asyncio.sleep(0.25)
            if then == "raise":
                raise ValueError("in cleanup") from None
            return "late"
        return "on time"

    return tools


@pytest.mark.parametrize("mode", ["sequential", "parallel", "eager"])
@pytest.mark.parametrize("then", ["return", "raise"])
def test_what_a_cut_off_call_did_is_said_only_when_it_received_the_cancellation_and_replays(
    mode: str, then: str, tmp_path: Path
) -> None:
    model = ScriptedModel([ScriptedResponse(tool_calls=(("stubborn", {"secs": 5, "then": then}),)), "x"])
    result = run_virtual(run(model, caught_tools(), "go", mode=mode, timeout_s=1.0))
    ex = result.executions[0]
    said = (
        "it caught the cancellation and returned at 1.250 s; that result is discarded"
        if then == "return"
        else "on being cancelled it raised ValueError: in cleanup"
    )
    assert ex.status == "cancelled" and said in ex.result
    again = replay(reloaded(result, tmp_path), mode)
    assert texts(again) == texts(result)
    assert [(e.started_at, e.ended_at) for e in again.executions] == [
        (e.started_at, e.ended_at) for e in result.executions
    ]


def stop_on_first(execution: Any) -> None:
    if execution.index == 0:
        raise KeyboardInterrupt


def exit_on_first(call: Any, execution: Any) -> None:
    if execution.index == 0:
        raise SystemExit(3)


@pytest.mark.parametrize("mode", ["parallel", "eager", "eager[cap=2]", "parallel[cap=2]"])
@pytest.mark.parametrize(
    ("hooks", "what"),
    [
        (Hooks(on_tool_complete=stop_on_first), "hook on_tool_complete raised KeyboardInterrupt"),
        (Hooks(approve_result=exit_on_first), "hook approve_result raised SystemExit"),
    ],
)
def test_a_cut_a_hook_caused_is_blamed_on_the_hook_in_every_mode(mode: str, hooks: Hooks, what: str) -> None:
    tools = ToolRegistry([simulated("work", 1.0), simulated("long", 2.0)])
    model = ScriptedModel([ScriptedResponse(tool_calls=(("work", {}), ("long", {}))), "x"])
    with pytest.raises((KeyboardInterrupt, SystemExit)) as stopped:
        run_virtual(run(model, tools, "go", mode=mode, hooks=hooks))
    partial = stopped.value.partial_result  # type: ignore[union-attr]
    other = partial.executions[1]
    assert other.status == "cancelled" and what in other.result
    assert "strategy" not in other.result


# --- 3. every field kept on every path ---------------------------------------------------------------


def queue_run(mode: str, **settings: Any) -> RunResult:
    tools = ToolRegistry([simulated("work", 1.0)])
    calls = tuple(("work", {"i": i}) for i in range(3))
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "ok"])
    return run_virtual(run(model, tools, "go", mode=mode, dedupe=False, **settings))


@pytest.mark.parametrize("mode", ["parallel[cap=1]", "eager[cap=1]", "parallel[work=1]"])
def test_queued_at_is_kept_when_the_run_is_cut_off(mode: str, tmp_path: Path) -> None:
    whole = queue_run(mode)
    assert [e.queued_at for e in whole.executions] == [None, 0.0, 0.0]
    cut = queue_run(mode, timeout_s=1.5)
    assert [(e.status, e.queued_at, e.started_at, e.ended_at) for e in cut.executions] == [
        ("ok", None, 0.0, 1.0),
        ("cancelled", 0.0, 1.0, 1.5),  # waited 1 s, ran 0.5 s
        ("cancelled", 0.0, 1.5, 1.5),  # waited 1.5 s, never started
    ]
    again = replay(reloaded(cut, tmp_path), mode)
    assert [e.queued_at for e in again.executions] == [None, 0.0, 0.0]


def test_queued_at_is_kept_when_the_run_task_is_cancelled() -> None:
    tools = ToolRegistry([simulated("work", 1.0)])
    calls = tuple(("work", {"i": i}) for i in range(3))

    async def main() -> RunResult:
        model = ScriptedModel([ScriptedResponse(tool_calls=calls), "ok"])
        task = asyncio.get_running_loop().create_task(run(model, tools, "go", mode="parallel[cap=1]"))
        await asyncio.sleep(1.5)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as exc:
            return exc.partial_result  # type: ignore[attr-defined,no-any-return]
        raise AssertionError

    result = run_virtual(main())
    assert [e.queued_at for e in result.executions] == [None, 0.0, 0.0]


# --- 10. / 11. the withheld result and the hook failures survive a replay ---------------------------


def test_a_withheld_result_keeps_what_the_tool_returned(tmp_path: Path) -> None:
    tools = ToolRegistry([simulated("secret", 0.5, lambda a: "the real answer")])
    model = ScriptedModel([ScriptedResponse(tool_calls=(("secret", {}),)), "ok"])
    hooks = Hooks(approve_result=lambda call, ex: "not for the model")
    result = run_virtual(run(model, tools, "go", hooks=hooks))
    ex = result.executions[0]
    assert (ex.status, ex.result, ex.withheld_result) == (
        "withheld",
        "Result withheld: not for the model.",
        "the real answer",
    )
    assert result.messages[-2]["content"] == "Result withheld: not for the model."  # the model's text
    trace = reloaded(result, tmp_path)
    assert trace.rounds[0].executions[0] == ex
    again = replay(trace, "parallel").executions[0]
    assert (again.status, again.result, again.withheld_result) == (ex.status, ex.result, ex.withheld_result)


def failing_hooks() -> Hooks:
    def approve_call(call: Any) -> Any:
        if call.index == 1:
            raise RuntimeError("quota service down")
        return 1 if call.index == 2 else None  # (meaningless: a hook failure too)

    def approve_result(call: Any, ex: Any) -> Any:
        if call.index == 3:
            raise ValueError("classifier crashed")

    def on_tool_start(call: Any) -> None:
        if call.index == 0:
            raise LookupError("no dashboard")

    def on_tool_complete(ex: Any) -> None:
        if ex.index == 3:
            raise OSError("log full")

    chunks = [0]

    def on_model_chunk(payload: Any) -> None:
        chunks[0] += 1
        if chunks[0] == 3:
            raise KeyError("chunk 2")

    return Hooks(
        approve_call=approve_call,
        approve_result=approve_result,
        on_tool_start=on_tool_start,
        on_tool_complete=on_tool_complete,
        on_model_chunk=on_model_chunk,
    )


def listener(event: Any) -> None:
    if event.kind == "observation" and event.execution.index == 0:
        raise RuntimeError("listener down")


def hooked_run(mode: str) -> RunResult:
    tools = ToolRegistry([simulated("t", 0.5, lambda a: f"r{a['i']}")])
    calls = tuple(("t", {"i": i}) for i in range(4))
    model = ScriptedModel([ScriptedResponse(tool_calls=calls, latency_s=0.4), "ok"])
    return run_virtual(run(model, tools, "go", mode=mode, hooks=failing_hooks(), on_event=listener))


def failure_keys(result: RunResult) -> list[tuple[Any, ...]]:
    return sorted(
        (f.hook, f.error, f.effect, f.round_index, f.tool_call_id, f.position) for f in result.hook_failures
    )


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized", "eager"])
def test_hook_failures_are_carried_through_a_replay(mode: str, tmp_path: Path) -> None:
    result = hooked_run("parallel")
    hooks = {f.hook for f in result.hook_failures}
    assert hooks == {
        "approve_call",
        "approve_result",
        "on_tool_start",
        "on_tool_complete",
        "on_model_chunk",
        "on_event",
    }
    again = replay(reloaded(result, tmp_path), mode)
    assert failure_keys(again) == failure_keys(result)
    assert texts(again) == texts(result)


# --- 12. / 13. / 15. messages and docs ----------------------------------------------------------------


def test_a_sync_tool_raising_generator_exit_keeps_its_message_on_both_clocks() -> None:
    tools = ToolRegistry()

    @tools.register
    def g(x: int) -> str:
        """Raises GeneratorExit (a BaseException: the run stops)."""
        raise GeneratorExit("ge")

    def model() -> ScriptedModel:
        return ScriptedModel([ScriptedResponse(tool_calls=(("g", {"x": 1}),)), "ok"])

    for go in (lambda: run_virtual(run(model(), tools, "go")), lambda: run_sync(model(), tools, "go")):
        with pytest.raises(GeneratorExit, match="ge") as stopped:
            go()
        ex = stopped.value.partial_result.executions[0]  # type: ignore[attr-defined]
        assert ex.result == "Error: tool 'g' raised GeneratorExit: ge; the run stopped."


def test_registering_a_tool_object_points_to_add() -> None:
    with pytest.raises(UsageError, match=r"registry\.add\(tool\)"):
        ToolRegistry().register(simulated("s", 1.0))


def test_an_on_model_chunk_failure_names_the_chunk() -> None:
    result = hooked_run("parallel")
    (chunk,) = [f for f in result.hook_failures if f.hook == "on_model_chunk"]
    assert chunk.effect == "ignored; the stream went on (the hook failed on chunk 2)"


def test_the_docs_say_what_a_hooks_cancelled_error_and_a_stuck_thread_at_exit_do() -> None:
    from toolcall_lab import tools as tools_module

    assert "CancelledError`` the hook raises of its own" in (Hooks.__doc__ or "")
    assert "its ``finally`` blocks and other cleanup never run" in (tools_module.__doc__ or "")

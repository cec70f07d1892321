"""Issue 11, second pass: what a fresh-eyes tester found the record getting wrong, one test each (the
faults x modes are in `test_fault_matrix.py`). Virtual clock unless a test needs real threads."""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import sys
import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from tests.conftest import REPO
from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import ReplayDivergenceError, UsageError
from toolcall_lab.loop import AbortHandle, Hooks, run, run_sync
from toolcall_lab.models import ModelRequest, ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.records import Timing
from toolcall_lab.replay import replay
from toolcall_lab.runs import RunConfig, RunResult
from toolcall_lab.tools import ToolOutcome, ToolRegistry, tool_from_function
from toolcall_lab.trace import Trace, TraceMetadata


def once(*calls: Any, then: Any = "done") -> ScriptedModel:
    return ScriptedModel([ScriptedResponse(tool_calls=calls), then])


def trace_of(result: RunResult, title: str = "t") -> Trace:
    return Trace.from_run(result, TraceMetadata(title=title, origin="scripted"))


class Stream:
    """A model streaming hand-written chunks (one list per model call), 0.1 s apart."""

    name = "stream"

    def __init__(self, *responses: list[Any]) -> None:
        self.responses = list(responses)
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        for item in self.responses[request.round_index]:
            await asyncio.sleep(0.1)
            yield item


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


# --- A1: StopIteration ----------------------------------------------------------------------------


@pytest.mark.parametrize("timeout_s", [None, 1.0])
def test_a_sync_tool_raising_stop_iteration_is_its_error_not_a_hang_or_a_timeout(timeout_s) -> None:
    """Real threads: asyncio cannot put StopIteration into a future (the run used to hang forever, or
    time out at the limit although the tool had raised at once)."""
    tools = ToolRegistry()

    @tools.register(timeout_s=timeout_s)
    def first_item() -> str:
        return next(iter(()))

    async def main() -> RunResult:
        return await asyncio.wait_for(run(once(("first_item", {})), tools, "go"), 10)

    started = time.perf_counter()
    result = asyncio.run(main())
    ex = result.executions[0]
    assert (ex.status, ex.result) == ("error", "Error: tool 'first_item' raised StopIteration")
    assert time.perf_counter() - started < 0.9  # at once, not at the 1 s limit


# --- A3: replaying the records of runs that were cut off ------------------------------------------


def _slow_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    async def w(i: int, d: float) -> str:
        await asyncio.sleep(d)
        return f"w{i}"

    return tools


BATCH = ScriptedResponse(
    tool_calls=(("w", {"i": 0, "d": 0.5}), ("w", {"i": 1, "d": 0.9}), ("w", {"i": 2, "d": 0.2})),
    latency_s=0.1,
)
DONE = ScriptedResponse(content="done", latency_s=0.5)


def _aborted(mode: str, at: float) -> RunResult:
    async def main() -> RunResult:
        handle = AbortHandle()
        asyncio.get_running_loop().call_later(at, handle.abort, "user pressed stop")
        return await run(ScriptedModel([BATCH, DONE]), _slow_tools(), "go", mode=mode, abort=handle)

    return run_virtual(main())


def _cancelled(mode: str, at: float) -> RunResult:
    async def main() -> RunResult:
        task = asyncio.create_task(run(ScriptedModel([BATCH, DONE]), _slow_tools(), "go", mode=mode))
        await asyncio.sleep(at)
        task.cancel()
        try:
            return await task
        except asyncio.CancelledError as exc:
            return exc.partial_result  # type: ignore[attr-defined, no-any-return]

    return run_virtual(main())


CUT_RUNS = {
    "deadline": lambda mode: run_virtual(
        run(ScriptedModel([BATCH, DONE]), _slow_tools(), "go", mode=mode, timeout_s=0.5)
    ),
    "abort": lambda mode: _aborted(mode, 0.4),
    "cancel": lambda mode: _cancelled(mode, 0.4),
    "abort_while_the_model_answers": lambda mode: _aborted(mode, 1.05),
}


@pytest.mark.parametrize("recorded_mode", ["sequential", "parallel"])
@pytest.mark.parametrize("cut", list(CUT_RUNS))
def test_runs_cut_off_replay_up_to_the_same_cut_in_every_mode(cut, recorded_mode) -> None:
    """The recording does not know what came after the cut: calls it cut off wait, and the replay
    stops where the recording did. Under its own mode, the replay gives the same record."""
    result = CUT_RUNS[cut](recorded_mode)
    assert result.status in ("timeout", "aborted")
    trace = trace_of(result, cut)
    for mode in ("sequential", "parallel", "serialized", "first_only"):
        again = replay(trace, mode)
        assert again.status == result.status and again.ended_at == pytest.approx(result.ended_at), mode
        assert validate_messages(again.messages) == [] or mode == "first_only"
        if mode == recorded_mode:
            assert [[e.status for e in r.executions] for r in again.rounds] == [
                [e.status for e in r.executions] for r in result.rounds
            ]
            finished = [e for e in again.executions if e.status == "ok"]
            assert finished == [e for e in result.executions if e.status == "ok"]


def test_a_parallel_recording_cut_at_a_deadline_shows_what_sequential_would_have_finished() -> None:
    trace = trace_of(CUT_RUNS["deadline"]("parallel"))
    assert [e.status for e in trace.rounds[0].executions] == ["cancelled", "cancelled", "ok"]
    sequential = replay(trace, "sequential")  # call 0 still running at 0.5 s: nothing finished
    assert [e.status for e in sequential.executions] == ["cancelled", "cancelled", "cancelled"]
    assert (sequential.status, sequential.reason) == ("timeout", "deadline")


def test_a_run_ended_by_a_model_error_or_a_failing_hook_replays_to_the_same_end() -> None:
    def down(request: ModelRequest) -> Any:
        raise ConnectionError("upstream went away")

    failed = run_virtual(run(ScriptedModel([BATCH, down]), _slow_tools(), "go"))
    assert (failed.status, failed.reason) == ("failed", "model_error")

    def refuse(messages: list[dict[str, Any]]) -> None:
        if len(messages) > 1:
            raise PermissionError("budget exhausted")

    stopped = run_virtual(
        run(ScriptedModel([BATCH, "x"]), _slow_tools(), "go", hooks=Hooks(before_model_call=refuse))
    )
    assert (stopped.status, stopped.reason) == ("failed", "hook_error")
    for result in (failed, stopped):
        trace = trace_of(result)
        for mode in ("sequential", "parallel", "serialized"):
            again = replay(trace, mode)
            assert (again.status, again.reason, len(again.rounds)) == (result.status, result.reason, 1)
            assert result.error.split(": ")[-1] in again.error  # the recorded error, carried over


def test_a_record_that_cannot_say_what_came_next_diverges_instead_of_waiting_forever() -> None:
    """A cancelled call in a run the recording says completed (a hand-edited file): no cut will come,
    so the replay must not wait for one."""
    trace = trace_of(CUT_RUNS["deadline"]("parallel"))
    edited = replace(trace, outcome=replace(trace.outcome, status="completed", reason="final_answer"))
    with pytest.raises(ReplayDivergenceError, match=r"call_0_0 .*cancelled: the recorded run was cut off"):
        replay(edited, "parallel")


def test_a_first_only_recording_says_why_it_cannot_replay_under_another_mode() -> None:
    result = run_virtual(run(ScriptedModel([BATCH, DONE]), _slow_tools(), "go", mode="first_only"))
    with pytest.raises(
        ReplayDivergenceError,
        match=r"call_0_1 .*skipped: the recording was made under first_only.*replay it under first_only",
    ):
        replay(trace_of(result), "parallel")


def test_a_skipping_user_strategy_is_the_one_named_to_replay_under() -> None:
    from toolcall_lab.strategies import strategy

    @strategy("only_last", skips_calls=True)
    async def only_last(batch):
        for pos in range(len(batch.calls) - 1):
            batch.skip(pos)
        await batch.run(len(batch.calls) - 1)

    result = run_virtual(run(ScriptedModel([BATCH, DONE]), _slow_tools(), "go", mode=only_last))
    with pytest.raises(
        ReplayDivergenceError, match=r"made under only_last.*replay it under only_last, the strategy"
    ):
        replay(trace_of(result), "parallel")


# --- A13: replay answers from the round it serves ---------------------------------------------------


def test_replay_never_answers_a_call_from_another_rounds_record() -> None:
    """Round 0's execution of call_0_1 is missing; round 1 makes the same call: the replay must not
    serve round 1's result to round 0, and must name the call it cannot answer."""
    tools = _slow_tools()
    same = ("w", {"i": 2, "d": 0.1})
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=(("w", {"i": 1, "d": 0.1}), same)),
            ScriptedResponse(tool_calls=(same,)),
            "ok",
        ]
    )
    trace = trace_of(run_virtual(run(model, tools, "go")))
    first = trace.rounds[0]
    edited = replace(trace, rounds=(replace(first, executions=first.executions[:1]), *trace.rounds[1:]))
    for mode in ("sequential", "parallel", "serialized"):
        with pytest.raises(
            ReplayDivergenceError, match=r"no recorded execution for call call_0_1 .* in round 0"
        ) as info:
            replay(edited, mode)
        partial = info.value.partial_result
        assert all(e.tool_call_id != "call_0_1" or e.status != "ok" for e in partial.executions)


# --- A4: what user code is handed is never the record ----------------------------------------------


def test_a_model_reusing_one_buffer_for_every_chunk_is_recorded_chunk_by_chunk() -> None:
    class Reuses:
        name = "reuses"

        async def stream(self, request: ModelRequest) -> Any:
            buf: dict[str, Any] = {
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]
            }
            yield buf
            buf["choices"][0]["delta"] = {"content": "lo"}
            yield buf
            buf["choices"][0]["delta"] = {}
            buf["choices"][0]["finish_reason"] = "stop"
            yield buf

    result = run_virtual(run(Reuses(), [], "go"))
    deltas = [c.payload["choices"][0]["delta"] for c in result.rounds[0].model_call.chunks]
    assert deltas == [{"role": "assistant", "content": "Hel"}, {"content": "lo"}, {}]
    assert replay(trace_of(result), "parallel").final_answer == "Hello"


def test_listeners_hooks_and_models_cannot_rewrite_the_record() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}

    def listener(event: Any) -> None:
        if event.kind == "model_response" and event.usage:
            event.usage["total_tokens"] = 999999

    def before(messages: list[dict[str, Any]]) -> None:
        messages[0]["content"] = "EDITED"  # in place: sent for this call only

    class Meddles:
        name = "meddles"

        def __init__(self) -> None:
            self.script = ScriptedModel(
                [ScriptedResponse(tool_calls=(("f", {"xs": [1]}),), usage=usage), "done"]
            )

        async def stream(self, request: ModelRequest) -> Any:
            async for payload in self.script.stream(request):
                yield payload
            request.messages[-1]["content"] = "MODEL WAS HERE"
            if request.tools:
                request.tools[0]["function"]["name"] = "renamed"
            request.params["temperature"] = 2  # type: ignore[index]

    def f(xs: list[int]) -> str:
        xs.append(99)  # a tool changing its own argument
        return "ok"

    tools = ToolRegistry([f])
    result = run_virtual(
        run(
            Meddles(),
            tools,
            "go",
            on_event=listener,
            hooks=Hooks(before_model_call=before),
            params={"temperature": 0},
        )
    )
    r0 = result.rounds[0]
    assert r0.model_call.usage == usage and r0.model_call.chunks[-1].payload["usage"] == usage
    assert r0.request_messages == ({"role": "user", "content": "EDITED"},)  # what was sent
    assert result.initial_messages == ({"role": "user", "content": "go"},)  # the conversation is untouched
    assert result.messages[0] == {"role": "user", "content": "go"}
    assert result.rounds[1].request_messages[-1]["content"] == "ok"  # not the model's edit
    assert tools.schemas()[0]["function"]["name"] == "f" and result.config.params == {"temperature": 0}
    assert r0.tool_calls[0].args == {"xs": [1]}  # the call as the model made it


# --- A5, A6, B7: what a tool is, and what it may be given -------------------------------------------


def test_a_schema_requirement_the_signature_does_not_enforce_is_checked_before_the_call() -> None:
    ran = []

    def search(**kwargs: Any) -> str:
        ran.append(kwargs)
        return "found"

    tools = ToolRegistry()
    tools.add(
        tool_from_function(
            search, parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
        )
    )
    result = run_virtual(run(once(("search", {"limit": 3}), ("search", {"q": "x"})), tools, "go"))
    assert [e.status for e in result.executions] == ["invalid_arguments", "ok"] and ran == [{"q": "x"}]
    assert "missing required argument 'q'" in result.executions[0].result


def test_a_tools_own_type_error_is_still_its_error() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    result = run_virtual(run(once(("add", {"a": 1, "b": "2"})), [add], "go"))
    ex = result.executions[0]
    assert ex.status == "error" and "raised TypeError: unsupported operand" in ex.result


def test_generator_functions_are_refused_and_callable_objects_and_partials_work() -> None:
    def gen(i: int) -> Any:
        yield i

    async def agen(i: int) -> Any:
        yield i

    for fn in (gen, agen):
        with pytest.raises(UsageError, match="is a generator function: its body would not run"):
            ToolRegistry([fn])

    class Counter:
        """Counts."""

        def __call__(self, step: int) -> str:
            return f"+{step}"

    class AsyncEcho:
        async def __call__(self, text: str) -> str:
            return text

    async def scale(x: float, factor: float = 1.0) -> float:
        """Scale a number."""
        return x * factor

    def later(x: int) -> Any:  # a sync function returning an awaitable: it is awaited
        async def inner() -> int:
            return x + 1

        return inner()

    tools = ToolRegistry()
    tools.register(Counter(), name="count")
    tools.register(AsyncEcho(), name="echo")
    tools.register(functools.partial(scale, factor=10.0))
    tools.register(later)
    assert tools.get("scale").description == "Scale a number." and tools.get("echo").is_async
    calls = (("count", {"step": 2}), ("echo", {"text": "hi"}), ("scale", {"x": 1.5}), ("later", {"x": 1}))
    result = run_sync(once(*calls), tools, "go")
    assert [e.result for e in result.executions] == ["+2", "hi", "15.0", "2"]
    with pytest.raises(UsageError, match="pass name="):
        tool_from_function(Counter())


@pytest.mark.parametrize(
    ("value", "status", "text"),
    [
        (b"caf\xc3\xa9", "ok", "café"),
        (b"\xff\xfe", "error", "returned 2 bytes that are not UTF-8 text"),
        ({"ratio": float("nan")}, "error", "which JSON cannot carry"),
        (object(), "error", "returned a object object, which has no text form"),
        ({"when": __import__("datetime").date(2025, 1, 2)}, "ok", '{"when": "2025-01-02"}'),
    ],
)
def test_return_values_become_text_faithfully_or_say_why_not(value, status, text) -> None:
    async def give() -> Any:
        return value

    ex = run_virtual(run(once(("give", {})), [give], "go")).executions[0]
    assert ex.status == status and text in ex.result


def test_a_value_whose_conversion_raises_is_not_blamed_on_the_tool_raising() -> None:
    class NoText:
        def __repr__(self) -> str:
            raise ValueError("no repr")

        __str__ = __repr__

    async def give() -> Any:
        return NoText()

    ex = run_virtual(run(once(("give", {})), [give], "go")).executions[0]
    assert ex.status == "error" and ex.result.startswith(
        "Error: tool 'give' returned a NoText whose conversion"
    )
    assert "raised" not in ex.result.split("returned")[0]


# --- A9, B2: ToolOutcome ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"text": "x", "status": "cancelled"}, "a tool reports one of ok, error, timeout"),
        ({"text": "x", "status": "weird"}, "status='weird'"),
        ({"text": 123}, "must be a str"),
        ({"text": None}, "must be a str"),
        ({"text": "x", "timing": Timing(source="reported", note="n")}, "give both or neither"),
        ({"text": "x", "duration_s": -1.0, "timing": Timing()}, "duration_s=-1.0"),
    ],
)
def test_a_bad_tool_outcome_is_refused_where_it_is_made(kwargs, match) -> None:
    with pytest.raises(UsageError, match=match):
        ToolOutcome(**kwargs)


def test_a_tool_can_supply_its_own_duration_but_never_more_than_it_took() -> None:
    server = Timing(source="reported", note="the server's x-runtime header")

    async def quick() -> ToolOutcome:
        await asyncio.sleep(0.5)
        return ToolOutcome(text="ok", duration_s=0.003, timing=server)

    async def boastful() -> ToolOutcome:
        await asyncio.sleep(0.5)
        return ToolOutcome(text="ok", duration_s=2.0, timing=server)

    result = run_virtual(run(once(("quick", {}), ("boastful", {})), [quick, boastful], "go", mode="parallel"))
    fast, slow = result.executions
    assert fast.duration_s == pytest.approx(0.003) and fast.timing == server
    assert slow.duration_s == pytest.approx(0.5) and slow.timing.source == "placeholder"  # the clock's label
    assert (
        "the tool reported 2.0 s (reported: the server's x-runtime header), more than the 0.5"
        in slow.timing.note
    )


# --- A10: chunk timing labels -----------------------------------------------------------------------


def test_chunks_of_a_plain_model_on_the_virtual_clock_are_timed_as_they_arrived() -> None:
    model = Stream([chunk({"role": "assistant", "content": "A"}), chunk({"content": "B"}), chunk({}, "stop")])
    mc = run_virtual(run(model, [], "go")).rounds[0].model_call
    assert mc.chunk_timing == "recorded" and mc.timing.source == "placeholder"  # simulated on this clock
    assert [c.offset_s for c in mc.chunks] == pytest.approx([0.1, 0.2, 0.3])


# --- A16: calls without tools -----------------------------------------------------------------------


def test_the_openai_adapter_sends_nothing_tool_shaped_without_tools() -> None:
    from toolcall_lab.openai_model import OpenAIModel

    model = OpenAIModel(
        "m", client=object(), parallel_tool_calls=True, tools=[{"x": 1}], functions=[{"y": 2}]
    )
    request = ModelRequest(
        messages=({"role": "user", "content": "hi"},),
        tools=None,
        round_index=1,
        batch=1,
        params={"tool_choice": "auto", "function_call": "auto", "temperature": 0},
    )
    kwargs = model.request_kwargs(request)
    assert not {"tools", "functions", "function_call", "tool_choice", "parallel_tool_calls"} & set(kwargs)
    assert kwargs["temperature"] == 0


@pytest.mark.parametrize("key", ["tools", "functions", "function_call", "messages"])
def test_request_parameters_the_loop_owns_are_refused(key) -> None:
    with pytest.raises(UsageError, match=rf"RunConfig.params sets \['{key}'\]"):
        RunConfig(params={key: []})


# --- B1: sync tools on the virtual clock -------------------------------------------------------------


def test_a_sync_tools_limit_holds_on_the_virtual_clock_in_real_seconds() -> None:
    release = threading.Event()
    tools = ToolRegistry()

    @tools.register(timeout_s=0.05)
    def stuck() -> str:
        release.wait(10)
        return "late"

    try:
        started = time.perf_counter()
        result = run_virtual(run(once(("stuck", {})), tools, "go"))
        assert time.perf_counter() - started < 5  # not the 10 s the tool would block
        ex = result.executions[0]
        assert (
            ex.status == "timeout"
            and "in real seconds: on the virtual clock a sync tool takes no" in ex.result
        )
        assert ex.duration_s == 0.0
    finally:
        release.set()


# --- B3: approval answers ---------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [1, 0, [], b"x", object(), "yes please"])
def test_an_approval_that_means_neither_yes_nor_no_is_a_hook_failure(answer) -> None:
    async def work() -> str:
        return "did it"

    result = run_virtual(run(once(("work", {})), [work], "go", hooks=Hooks(approve_call=lambda call: answer)))
    ex = result.executions[0]
    if isinstance(answer, str):  # a string is a reason: rejected with it, not a failure
        assert ex.result == "Rejected: yes please. The call was not executed." and not result.hook_failures
        return
    assert ex.status == "rejected" and "the approve_call hook failed (TypeError: returned" in ex.result
    assert result.hook_failures[0].error.startswith("TypeError: returned")


def test_an_empty_reason_rejects_by_policy() -> None:
    async def work() -> str:
        return "did it"

    result = run_virtual(run(once(("work", {})), [work], "go", hooks=Hooks(approve_result=lambda c, e: "")))
    assert result.executions[0].result == "Result withheld: rejected by policy." and not result.hook_failures


# --- B6: AbortHandle ----------------------------------------------------------------------------------


def test_an_abort_handle_that_stopped_a_run_is_refused_by_the_next_one() -> None:
    async def main() -> None:
        handle = AbortHandle()
        asyncio.get_running_loop().call_later(0.2, handle.abort, "stop")
        first = await run(ScriptedModel([BATCH, DONE]), _slow_tools(), "go", abort=handle)
        assert first.status == "aborted"
        with pytest.raises(UsageError, match=r"already aborted .* make a new AbortHandle for each run"):
            await run(ScriptedModel(["hi"]), [], "go", abort=handle)
        handle.reset()
        assert (await run(ScriptedModel(["hi"]), [], "go", abort=handle)).final_answer == "hi"
        again = await run(ScriptedModel(["hi"]), [], "go", abort=handle)  # not aborted: reusable
        assert again.final_answer == "hi"
        early = AbortHandle()
        early.abort("before it started")
        stopped = await run(ScriptedModel(["hi"]), [], "go", abort=early)
        assert (stopped.status, stopped.ended_at) == ("aborted", 0.0)

    run_virtual(main())


# --- B9: duplicates -------------------------------------------------------------------------------------


def test_a_duplicate_of_a_withheld_call_points_to_that_calls_answer() -> None:
    async def lookup(q: str) -> str:
        return "secret"

    hooks = Hooks(approve_result=lambda call, ex: "contains personal data")
    result = run_virtual(
        run(once(("lookup", {"q": "a"}), ("lookup", {"q": "a"})), [lookup], "go", hooks=hooks)
    )
    withheld, duplicate = result.executions
    assert withheld.status == "withheld" and duplicate.status == "duplicate"
    assert "The answer to that call stands for this one too." in duplicate.result
    assert "Use that call's result" not in duplicate.result


# --- C: small things --------------------------------------------------------------------------------------


def test_a_chunk_that_is_not_a_dict_is_a_model_error_that_says_so() -> None:
    result = run_virtual(run(Stream(["hello"]), [], "go"))
    assert (result.status, result.reason) == ("failed", "model_error")
    assert "chunk 0 is str 'hello', not a chat-completion chunk (a dict)" in result.error


def test_an_answer_of_only_whitespace_after_tool_rounds_is_asked_for_again() -> None:
    async def work() -> str:
        return "w"

    result = run_virtual(
        run(ScriptedModel([ScriptedResponse(tool_calls=(("work", {}),)), "  \n", "final"]), [work], "go")
    )
    assert (result.final_answer, result.rounds[-1].final_reason) == ("final", "empty_answer")
    alone = run_virtual(run(ScriptedModel([" "]), [], "go"))
    assert (alone.status, alone.reason) == ("failed", "empty_response") and "only whitespace" in alone.error


def test_worker_threads_are_named_apart_across_runs() -> None:
    names = []

    def who() -> str:
        names.append(threading.current_thread().name)
        return "me"

    for _ in range(2):
        run_sync(once(("who", {})), [who], "go")
    assert len(set(names)) == 2 and all(n.startswith("toolcall-lab-tool-") for n in names)


def test_invalid_arguments_read_as_a_sentence() -> None:
    async def f(x: int) -> str:
        return "x"

    ex = run_virtual(run(once(("f", "[1]")), [f], "go")).executions[0]
    assert ex.result.startswith("Error: invalid arguments for 'f': must be a JSON object, got list.")


# --- all_failed_policy, importers' setting ---------------------------------------------------------------


def test_all_failed_policy_continue_sends_the_errors_back_and_is_recorded() -> None:
    async def broken() -> str:
        raise RuntimeError("down")

    model = ScriptedModel([ScriptedResponse(tool_calls=(("broken", {}),)), "I could not do it."])
    result = run_virtual(run(model, [broken], "go", all_failed_policy="continue"))
    assert (result.status, result.final_answer) == ("completed", "I could not do it.")
    trace = trace_of(result)
    assert trace.metadata.settings["all_failed_policy"] == "continue"
    assert replay(trace, "sequential").final_answer == "I could not do it."  # the replay follows it
    with pytest.raises(UsageError, match="all_failed_policy='go on'"):
        RunConfig(all_failed_policy="go on")  # type: ignore[arg-type]


# --- B4, B5, A14: validate, replay and bench on the command line -------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolcall_lab", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def _tampered(tmp_path, name: str, edit: Any) -> Any:
    from toolcall_lab.scenarios import SCENARIOS
    from toolcall_lab.trace_files import save

    doc = SCENARIOS["weather_news_stock"].record().to_dict()
    edit(doc)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path, save


def test_validate_checks_every_round_by_position_and_the_whole_conversation(tmp_path) -> None:
    from toolcall_lab.trace_files import validate

    def other_result(doc: dict[str, Any]) -> None:
        doc["rounds"][0]["tool_executions"][0]["result"] = "not what was sent"

    path, _ = _tampered(tmp_path, "result", other_result)
    _, found = validate(path)
    assert found == [  # (answered, with another text: a contradiction, not an unanswered call)
        "contradiction: rounds[0] call call_0_0 (get_weather) (position 0): the next request answers it "
        "with 'Paris: 18°C, light rain', but the recorded result is 'not what was sent'"
    ]

    def orphan(doc: dict[str, Any]) -> None:
        doc["rounds"][1]["request"]["messages"].append(
            {"role": "tool", "tool_call_id": "ghost", "content": "x"}
        )

    path, _ = _tampered(tmp_path, "orphan", orphan)
    _, found = validate(path)
    assert any(w.startswith("protocol: message") and "'ghost'" in w for w in found)


def test_replay_on_the_command_line_says_when_it_did_not_check_the_conversation(tmp_path) -> None:
    def tamper(doc: dict[str, Any]) -> None:
        doc["rounds"][0]["tool_executions"][0]["result"] = "TAMPERED"

    path, _ = _tampered(tmp_path, "tampered", tamper)
    unchecked = _cli("replay", str(path), "--mode", "first_only")
    assert unchecked.returncode == 0
    assert unchecked.stdout.startswith("conversation check: off (first_only against a parallel recording")
    strict = _cli("replay", str(path), "--mode", "first_only", "--check", "strict")
    assert strict.returncode == 1 and "diverged from its recording" in strict.stderr


def test_bench_compares_modes_over_the_same_traces_and_refuses_missing_paths(tmp_path) -> None:
    """A trace that diverges under three modes (and not under first_only, unchecked) is left out of
    every mode's summary, not only of the three."""
    from toolcall_lab.scenarios import SCENARIOS
    from toolcall_lab.trace_files import save

    folder = tmp_path / "corpus"
    for name in ("weather_news_stock", "straggler"):
        save(SCENARIOS[name].record(), folder / f"{name}.json")

    def drop(doc: dict[str, Any]) -> None:
        del doc["rounds"][0]["tool_executions"][1]

    _tampered(folder, "dropped", drop)
    out = _cli("bench", str(folder), "--quiet")
    assert out.returncode == 1 and "3 trace(s) x 4 mode(s)" in out.stdout
    rows = {
        line.split()[0]: line.split()
        for line in out.stdout.splitlines()
        if line.split()[:1] in (["sequential"], ["parallel"], ["serialized"], ["first_only"])
        and line.split()[1].isdigit()
    }
    assert {mode: int(row[1]) for mode, row in rows.items()} == dict.fromkeys(rows, 2) and len(rows) == 4
    missing = _cli("bench", str(tmp_path / "nowhere"))
    assert (
        missing.returncode == 2
        and "no such file or folder" in missing.stderr
        and "trace(s) x" not in missing.stdout
    )


def test_a_replay_shares_the_recordings_payloads_but_hooks_still_get_copies() -> None:
    """The replay model only reads (`copy_free`), so the loop skips its copies for it; a hook rewriting
    what it is given must still leave the source trace as it was."""
    from toolcall_lab.replay import ReplayModel, replay_tools
    from toolcall_lab.scenarios import SCENARIOS

    trace = SCENARIOS["weather_news_stock"].record()
    before = json.dumps(trace.to_dict(), sort_keys=True)

    def rewrite(payload: dict[str, Any]) -> None:
        payload.clear()

    def before_call(messages: list[dict[str, Any]]) -> None:
        messages[0]["content"] = "EDITED"

    hooks = Hooks(on_model_chunk=rewrite, before_model_call=before_call)
    model = ReplayModel(trace, check="off")
    result = run_virtual(run(model, replay_tools(trace, model), trace.initial_messages, hooks=hooks))
    assert result.status == "completed" and json.dumps(trace.to_dict(), sort_keys=True) == before
    assert not getattr(ScriptedModel([]), "copy_free", False)  # any other model gets copies

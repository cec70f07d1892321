"""Strategies, third pass (issue 14): badly behaved user strategies, each a regression test.

A strategy cannot change the record through anything it reads; calls it cancels or leaves behind
are really cancelled and drained, with honest times; a cancellation or interruption it raises
itself is its own failure; one that never returns on the virtual clock is caught; decorated
strategies pickle; the messages name the strategy.
"""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import pytest

from tests.test_strategies import MIXED, Counting, play, scripted
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import run
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.strategies import Batch, strategy
from toolcall_lab.tools import ToolRegistry

# -- (1) nothing a strategy reads is the record ---------------------------------------------------------


def _assistant_edits(batch: Batch) -> list[str]:
    """Every edit of the assistant message a strategy might try; the kinds of error each raised."""
    am: Any = batch.assistant_message
    tries = [
        lambda: am.__setitem__("content", "HACKED"),
        lambda: am["tool_calls"][0]["function"].__setitem__("arguments", '{"key": "HACKED"}'),
        lambda: am["tool_calls"].append({"id": "x"}),
        lambda: am["tool_calls"].__setitem__(0, {"id": "x"}),
        lambda: am.pop("tool_calls"),
        lambda: am.update(content="HACKED"),
        lambda: am["tool_calls"][0].clear(),
    ]
    errors = []
    for attempt in tries:
        try:
            attempt()
        except (TypeError, AttributeError) as exc:
            errors.append(type(exc).__name__)
    return errors


@strategy("tamperer")
async def tamperer(batch: Batch) -> None:
    assert batch.assistant_message is not None and batch.assistant_message["content"] == "On it."
    refused = _assistant_edits(batch)
    batch.note(f"refused {len(refused)}")
    call = batch.calls[0]
    call.args["key"] = "HACKED"  # the strategy's own copy: neither the tool nor the record sees it
    batch.call(1).args["key"] = "HACKED"
    for name, value in [
        ("round_index", 7),
        ("strategy", "other"),
        ("chunk_timing", "recorded"),
        ("streaming", True),
        ("assistant_message", {}),
        ("concurrency", 1),
        ("client_round_trips", 9),
    ]:
        with pytest.raises(AttributeError):
            setattr(batch, name, value)
    for name in ("notes", "findings", "round_trips", "results", "calls"):
        with pytest.raises(AttributeError):
            getattr(batch, name).append("x")
    with pytest.raises(TypeError):
        batch.tool_limits["search"] = 1  # type: ignore[index]
    await batch.run_parallel()


def test_a_strategy_cannot_change_the_record_or_the_next_request() -> None:
    result = play(scripted(MIXED), Counting().registry(), mode=tamperer)
    assert result.status == "completed", result.error
    rnd = result.rounds[0]
    assert rnd.strategy_notes == ("refused 7",)
    assert rnd.assistant_message["content"] == "On it."
    assert len(rnd.assistant_message["tool_calls"]) == 4
    assert [json.loads(c["function"]["arguments"])["key"] for c in rnd.assistant_message["tool_calls"]] == [
        "a",
        "w1",
        "b",
        "w2",
    ]
    assert [e.arguments for e in rnd.executions] == [c.arguments for c in rnd.tool_calls]
    assert [c.args for c in rnd.tool_calls] == [{"key": k} for k in ("a", "w1", "b", "w2")]
    assert "HACKED" not in json.dumps([e.result for e in rnd.executions])
    sent = result.rounds[1].request_messages
    assert [m for m in sent if m["role"] == "assistant"] == [rnd.assistant_message]
    assert "HACKED" not in json.dumps(result.messages)


# -- (2, 3) calls a strategy fails or cancels are really cancelled and drained, with honest times ------


class Slow:
    """A tool that sleeps `seconds` and logs whether it finished or was cancelled, and when."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, float]] = []

    def registry(self) -> ToolRegistry:
        reg = ToolRegistry()

        async def slow(key: str, seconds: float = 5.0) -> str:
            """Sleeps."""
            try:
                await asyncio.sleep(seconds)
            except asyncio.CancelledError:
                self.log.append(("cancelled", key, asyncio.get_running_loop().time()))
                raise
            self.log.append(("finished", key, asyncio.get_running_loop().time()))
            return key

        reg.register(slow)
        return reg


TWO_SLOW = (("slow", {"key": "a"}), ("slow", {"key": "b"}))


async def _watched(coro: Any) -> tuple[Any, list[str], int]:
    """Run `coro`; what asyncio complained about meanwhile (and after a collection), and how many
    other tasks were left pending when it returned."""
    loop = asyncio.get_running_loop()
    noise: list[str] = []
    loop.set_exception_handler(lambda _loop, context: noise.append(str(context.get("message"))))
    try:
        result = await coro
        left = len(asyncio.all_tasks()) - 1
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    return result, noise, left


@strategy("gather_raise")
async def gather_raise(batch: Batch) -> None:
    async def boom() -> None:
        await asyncio.sleep(2.0)
        raise ValueError("inner")

    await asyncio.gather(batch.run_parallel(), boom())


@strategy("group_raise")
async def group_raise(batch: Batch) -> None:
    async def boom() -> None:
        await asyncio.sleep(2.0)
        raise ValueError("inner")

    async with asyncio.TaskGroup() as tg:
        tg.create_task(batch.run(0))
        tg.create_task(batch.run_parallel([1]))
        tg.create_task(boom())


@pytest.mark.parametrize("strat", [gather_raise, group_raise], ids=lambda s: s.name)
def test_a_strategy_that_fails_mid_call_cancels_and_drains_its_calls(strat: Any) -> None:
    tools = Slow()
    model = ScriptedModel([ScriptedResponse(tool_calls=TWO_SLOW, latency_s=0.5), "done"])
    result, noise, left = run_virtual(_watched(run(model, tools.registry(), "go", mode=strat)))
    assert (result.status, result.reason) == ("failed", "strategy_error")
    assert f"the strategy {strat.name!r} failed" in result.error and "ValueError" in result.error
    assert sorted(k for _, k, _ in tools.log) == ["a", "b"] and {s for s, _, _ in tools.log} == {"cancelled"}
    for ex in result.rounds[0].executions:
        assert ex.status == "cancelled" and (ex.started_at, ex.ended_at) == (0.5, 2.5), ex
        assert f"the strategy {strat.name!r}" in ex.result and "while this call was running" in ex.result
    assert left == 0 and noise == []
    assert validate_messages(result.messages) == []


@strategy("gives_up")
async def gives_up(batch: Batch) -> None:
    try:
        await asyncio.wait_for(batch.run(0), 1.0)
    except TimeoutError:
        batch.note("gave up on 0")
    await batch.run_parallel()


def test_a_call_the_strategy_cancels_ends_when_it_was_cancelled_and_says_so() -> None:
    tools = Slow()
    model = ScriptedModel([ScriptedResponse(tool_calls=TWO_SLOW, latency_s=0.5), "done"])
    result, noise, left = run_virtual(_watched(run(model, tools.registry(), "go", mode=gives_up)))
    assert result.status == "completed", result.error
    first, second = result.rounds[0].executions
    assert (first.status, first.started_at, first.ended_at) == ("cancelled", 0.5, 1.5)
    assert "the strategy 'gives_up' cancelled it while this call was running" in first.result
    assert (second.status, second.started_at, second.ended_at) == ("ok", 1.5, 6.5)
    assert tools.log == [("cancelled", "a", 1.5), ("finished", "b", 6.5)]
    observed = {e.execution.tool_call_id: e.at for e in result.events if e.kind == "observation"}
    assert observed[first.tool_call_id] == 1.5
    assert left == 0 and noise == []


@strategy("orphans")
async def orphans(batch: Batch) -> None:
    for pos in range(len(batch.calls)):
        asyncio.get_running_loop().create_task(batch.run(pos))


@strategy("half_orphans")
async def half_orphans(batch: Batch) -> None:
    asyncio.get_running_loop().create_task(batch.run(0))
    await asyncio.sleep(1.0)  # the call is running in a task the strategy never awaits


@pytest.mark.parametrize("strat", [orphans, half_orphans], ids=lambda s: s.name)
def test_tasks_a_strategy_leaves_behind_are_reaped_quietly(strat: Any) -> None:
    tools = Slow()
    model = ScriptedModel([ScriptedResponse(tool_calls=TWO_SLOW, latency_s=0.5), "done"])
    result, noise, left = run_virtual(_watched(run(model, tools.registry(), "go", mode=strat)))
    assert (result.status, result.reason) == ("failed", "strategy_error")
    assert left == 0 and noise == []
    assert all(s == "cancelled" for s, _, _ in tools.log)
    assert validate_messages(result.messages) == []


# -- (4) what a strategy raises is its failure; a cancellation from outside still cancels the run -------


class Raises(BaseException):
    """A BaseException of the user's own."""


@pytest.mark.parametrize("streams", [False, True])
@pytest.mark.parametrize(
    "exc",
    [asyncio.CancelledError(), KeyboardInterrupt(), SystemExit(3), GeneratorExit(), Raises("mine")],
    ids=lambda e: type(e).__name__,
)
def test_a_base_exception_the_strategy_raises_is_its_failure(exc: BaseException, streams: bool) -> None:
    @strategy("raises_base", streams=streams)
    async def raises_base(batch: Batch) -> None:
        if streams:
            async for pos in batch.arrivals():
                batch.start(pos)
        else:
            batch.start(0)
        await asyncio.sleep(1.0)
        raise exc

    tools = Slow()
    model = ScriptedModel([ScriptedResponse(tool_calls=TWO_SLOW, latency_s=0.5), "done"])
    result, noise, left = run_virtual(_watched(run(model, tools.registry(), "go", mode=raises_base)))
    assert (result.status, result.reason) == ("failed", "strategy_error"), result.error
    assert f"the strategy 'raises_base' failed: {type(exc).__name__}" in result.error
    assert "raised by the strategy's own code" in result.error and "in raises_base" in result.error
    assert left == 0 and noise == []
    assert validate_messages(result.messages) == []


@strategy("sleeper")
async def sleeper(batch: Batch) -> None:
    batch.start(0)
    await asyncio.sleep(100.0)
    await batch.run_parallel()


def test_a_cancellation_from_outside_still_cancels_the_run() -> None:
    tools = Slow()
    model = ScriptedModel([ScriptedResponse(tool_calls=TWO_SLOW, latency_s=0.5), "done"])

    async def main() -> Any:
        task = asyncio.get_running_loop().create_task(run(model, tools.registry(), "go", mode=sleeper))
        await asyncio.sleep(2.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        return caught.value.partial_result  # type: ignore[attr-defined]

    partial = run_virtual(main())
    assert (partial.status, partial.reason) == ("aborted", "cancelled")
    first = partial.rounds[0].executions[0]
    assert (first.status, first.ended_at) == ("cancelled", 2.0)
    assert tools.log == [("cancelled", "a", 2.0)]


# -- (5) a strategy that never returns on the virtual clock is caught -----------------------------------


@strategy("never_returns")
async def never_returns(batch: Batch) -> None:
    await batch.run_parallel()
    await asyncio.Event().wait()


@strategy("waits_before_running")
async def waits_before_running(batch: Batch) -> None:
    batch.start(0)
    await asyncio.Event().wait()


@pytest.mark.parametrize(
    ("strat", "waiting"),
    [
        (never_returns, "all 2 calls had finished"),
        (waits_before_running, "the calls at positions [1] had not been run"),
    ],
    ids=["finished", "pending"],
)
def test_a_strategy_that_never_returns_on_the_virtual_clock_fails(strat: Any, waiting: str) -> None:
    model = ScriptedModel([ScriptedResponse(tool_calls=TWO_SLOW, latency_s=0.5), "done"])
    result, noise, left = run_virtual(_watched(run(model, Slow().registry(), "go", mode=strat)))
    assert (result.status, result.reason) == ("failed", "strategy_error")
    assert f"the strategy {strat.name!r} failed: NeverReturned: it never returned" in result.error
    assert waiting in result.error and f"in {strat.name})" in result.error
    assert left == 0 and noise == []
    assert validate_messages(result.messages) == []


def test_under_a_deadline_the_timeout_says_the_strategy_never_returned() -> None:
    model = ScriptedModel([ScriptedResponse(tool_calls=TWO_SLOW, latency_s=0.5), "done"])
    result = run_virtual(run(model, Slow().registry(), "go", mode=never_returns, timeout_s=20.0))
    assert (result.status, result.reason) == ("timeout", "deadline")
    assert "the strategy 'never_returns' had not returned (all 2 calls had finished)" in result.error


def test_compare_reports_a_strategy_that_never_returns_and_goes_on() -> None:
    from toolcall_lab.analysis import compare
    from toolcall_lab.trace import Trace, TraceMetadata

    model = ScriptedModel([ScriptedResponse(tool_calls=TWO_SLOW, latency_s=0.5), "done"])
    recorded = run_virtual(run(model, Slow().registry(), "go", mode="parallel"))
    trace = Trace.from_run(recorded, TraceMetadata(title="two slow", origin="scripted"))
    table = compare([trace], ["parallel", never_returns])
    assert "parallel" in set(table.runs["mode"])
    errors = table.errors
    assert list(errors["mode"]) == ["never_returns"] and "never returned" in errors["error"].iloc[0]


# -- (6) decorated strategies pickle for process pools; what cannot is named ----------------------------


def test_a_decorated_strategy_from_a_module_pickles_by_reference() -> None:
    import pickle

    assert pickle.loads(pickle.dumps(never_returns)) is never_returns
    assert pickle.loads(pickle.dumps(tamperer)) is tamperer


def test_an_unpicklable_strategy_is_refused_by_name_before_a_process_pool_runs() -> None:
    from concurrent.futures import ProcessPoolExecutor

    from toolcall_lab.analysis import compare
    from toolcall_lab.exceptions import UsageError

    @strategy("made_in_a_cell")
    async def made_in_a_cell(batch: Batch) -> None:
        await batch.run_parallel()

    with ProcessPoolExecutor(1) as pool, pytest.raises(UsageError) as caught:
        compare(["never-read.json"], ["parallel", made_in_a_cell], executor=pool)
    assert "the strategy 'made_in_a_cell' cannot be sent to the worker processes" in str(caught.value)
    assert "importable module" in str(caught.value) and "module:attribute" in str(caught.value)


# -- (13) name checks say what is wrong with the name given ---------------------------------------------


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("", "strategy(name='')"),
        ("ｐａｒａｌｌｅｌ", "character width from the built-in strategy 'parallel'"),
        ("a\u200bb", "invisible format character"),
        ("a\nb", "control character"),
    ],
)
def test_name_checks_name_the_name_and_the_problem(name: str, says: str) -> None:
    from toolcall_lab.exceptions import UsageError

    async def f(batch: Batch) -> None:
        await batch.run_parallel()

    with pytest.raises(UsageError) as caught:
        strategy(name)(f)
    assert says in str(caught.value)

"""Strategies, eighth pass (issue 14): the fresh-eyes tester's findings f14, each fixed as a class.

1. A call is answered as a duplicate only of a call that ran and was answered: whatever the strategy
   (parallel, eager, sequential, a user strategy that skips, cancels or runs calls out of order) and
   however long a hook takes. The first copy that actually runs answers for the others.
3. Under eager, ``approve_call`` runs one call at a time, in arrival order (never two prompts at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest

from tests.test_strategies import ChunkModel, answer, chunk, header
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import Hooks, run
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.records import ToolExecution
from toolcall_lab.runs import RunResult
from toolcall_lab.strategies import Batch, strategy
from toolcall_lab.tools import ToolRegistry

ANSWERED = {"ok", "error", "timeout", "withheld", "invalid_arguments"}


def lookups(seconds: float = 0.2) -> tuple[ToolRegistry, list[str]]:
    """A `lookup(key)` tool that takes `seconds` on the run's clock, and the keys it ran for."""
    ran: list[str] = []
    reg = ToolRegistry()

    @reg.register
    async def lookup(key: str) -> str:
        """Look a key up."""
        ran.append(key)
        await asyncio.sleep(seconds)
        return f"v{key}"

    return reg, ran


def stream(*keys: str, gap: float = 0.1, end: float = 0.5) -> ChunkModel:
    """A response streaming ``lookup`` calls c0, c1, ... (one every `gap` s), ending at `end`."""
    chunks = [(gap * (i + 1), header(i, f"c{i}", "lookup", f'{{"key": "{k}"}}')) for i, k in enumerate(keys)]
    return ChunkModel([*chunks, (end, chunk({}, "tool_calls"))], answer())


def play(model: Any, tools: ToolRegistry, **settings: Any) -> RunResult:
    return run_virtual(run(model, tools, "go", **settings))


def duplicates_point_to_answered_calls(result: RunResult) -> None:
    """The invariant: every duplicate names a call of its round (or an earlier one) that ran and was
    answered, and is answered no earlier than that call."""
    seen: dict[str, ToolExecution] = {}
    for rnd in result.rounds:
        mine = {e.tool_call_id: e for e in rnd.executions}
        for ex in rnd.executions:
            if ex.status != "duplicate":
                continue
            original = mine.get(ex.duplicate_of or "") or seen.get(ex.duplicate_of or "")
            assert original is not None, ex
            assert original.status in ANSWERED, (ex.result, original.status, original.result)
            if original.tool_call_id in mine:
                assert ex.ended_at >= original.ended_at - 1e-9, (ex, original)
        seen.update(mine)
    assert validate_messages(result.messages) == [] or any(
        e.status == "skipped" for r in result.rounds for e in r.executions
    )


def statuses(result: RunResult, round_index: int = 0) -> list[str]:
    return [e.status for e in result.rounds[round_index].executions]


# -- (a) a strategy that skips the call another one duplicates ------------------------------------------


@strategy("skip first", skips_calls=True)
async def skip_first(batch: Batch) -> None:
    batch.skip(0, "not needed")
    await batch.run_parallel(range(1, len(batch.calls)))


@strategy("skip first (streaming)", skips_calls=True, streams=True)
async def skip_first_streaming(batch: Batch) -> None:
    async for pos in batch.arrivals():
        if pos == 0:
            batch.skip(0, "not needed")
        else:
            batch.start(pos)
    await batch.join()


@strategy("run second then skip first", skips_calls=True)
async def skip_after(batch: Batch) -> None:
    await batch.run(1)  # (the whole batch is screened here: call 1 is found equal to call 0)
    batch.skip(0, "not needed")
    await batch.run_parallel()


@pytest.mark.parametrize("chosen", [skip_first, skip_first_streaming, skip_after])
def test_a_skipped_call_is_never_the_original_of_a_duplicate(chosen: Any) -> None:
    tools, ran = lookups()
    result = play(stream("a", "a", "b"), tools, mode=chosen)
    assert statuses(result) == ["skipped", "ok", "ok"]
    assert sorted(ran) == ["a", "b"]
    duplicates_point_to_answered_calls(result)


# -- (b) a rejected original, whatever the hook's timing -------------------------------------------------


@pytest.mark.parametrize("mode", ["parallel", "eager", "sequential", "parallel[cap=1]", "eager[cap=1]"])
@pytest.mark.parametrize("c0_takes", [0.0, 0.05, 0.3, 2.0])
def test_a_rejected_original_leaves_its_duplicate_to_run_in_every_mode_and_hook_timing(
    mode: str, c0_takes: float
) -> None:
    asked: list[str] = []

    async def approve(call: Any) -> Any:
        asked.append(call.tool_call_id)
        await asyncio.sleep(c0_takes if call.tool_call_id == "c0" else 0.05)
        return "not c0" if call.tool_call_id == "c0" else True

    tools, ran = lookups()
    result = play(stream("a", "a", "b"), tools, mode=mode, hooks=Hooks(approve_call=approve))
    assert statuses(result) == ["rejected", "ok", "ok"]
    assert ran.count("a") == 1 and "c1" in asked  # the copy that runs was approved itself
    duplicates_point_to_answered_calls(result)


@pytest.mark.parametrize("mode", ["parallel", "eager", "sequential"])
def test_an_approved_original_answers_for_its_duplicate_which_waits_for_its_answer(mode: str) -> None:
    async def approve(call: Any) -> Any:
        await asyncio.sleep(0.3 if call.tool_call_id == "c0" else 0.01)
        return True

    tools, ran = lookups(1.0)
    result = play(stream("a", "a"), tools, mode=mode, hooks=Hooks(approve_call=approve))
    original, dup = result.rounds[0].executions
    assert (original.status, dup.status, dup.duplicate_of) == ("ok", "duplicate", "c0")
    assert ran == ["a"]
    assert dup.started_at == dup.ended_at >= original.ended_at  # answered once that answer existed
    duplicates_point_to_answered_calls(result)


# -- the original cancelled by the strategy, cut off by the run, or run later ------------------------------


@strategy("cancels the first")
async def cancels_first(batch: Batch) -> None:
    first = asyncio.ensure_future(batch.run(0))
    await asyncio.sleep(0.1)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    await batch.run_parallel()


def test_an_original_the_strategy_cancelled_leaves_its_duplicate_to_run() -> None:
    tools, ran = lookups(1.0)
    result = play(stream("a", "a"), tools, mode=cancels_first)
    assert statuses(result) == ["cancelled", "ok"]
    assert ran == ["a", "a"]
    duplicates_point_to_answered_calls(result)


@strategy("reversed")
async def reverse(batch: Batch) -> None:
    await batch.run_sequential(reversed(range(len(batch.calls))))


def test_the_first_copy_that_runs_answers_for_the_others() -> None:
    tools, ran = lookups()
    result = play(stream("a", "b", "a"), tools, mode=reverse)
    assert statuses(result) == ["duplicate", "ok", "ok"]
    assert result.rounds[0].executions[0].duplicate_of == "c2"
    assert sorted(ran) == ["a", "b"]
    duplicates_point_to_answered_calls(result)


@pytest.mark.parametrize("mode", ["parallel", "eager", "parallel[cap=1]"])
def test_a_duplicate_of_a_call_cut_off_by_the_deadline_is_cancelled_not_answered(mode: str) -> None:
    tools, _ = lookups(5.0)
    result = play(stream("a", "a"), tools, mode=mode, timeout_s=2.0)
    original, dup = result.rounds[0].executions
    assert original.status == "cancelled" and dup.status == "cancelled"
    assert "Not executed" in dup.result and "duplicates" not in dup.result


# -- across rounds: only a call that ran and was answered is remembered --------------------------------------


@pytest.mark.parametrize("first_round", ["rejected", "skipped"])
def test_across_rounds_a_call_that_did_not_run_is_no_original(first_round: str) -> None:
    tools, ran = lookups()
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=(("lookup", {"key": "a"}), ("lookup", {"key": "b"}))),
            ScriptedResponse(tool_calls=(("lookup", {"key": "a"}),)),
            "done",
        ]
    )
    rounds = [0]

    def approve(call: Any) -> Any:
        return "not now" if rounds[0] == 0 and call.args == {"key": "a"} else True

    @strategy("skip a once", skips_calls=True)
    async def skip_a_once(batch: Batch) -> None:
        if batch.round_index == 0:
            batch.skip(0, "later")
        await batch.run_parallel()
        rounds[0] += 1

    if first_round == "rejected":

        @strategy("counting rounds")
        async def counting(batch: Batch) -> None:
            await batch.run_parallel()
            rounds[0] += 1

        result = play(
            model, tools, mode=counting, hooks=Hooks(approve_call=approve), dedupe_across_rounds=True
        )
    else:
        result = play(model, tools, mode=skip_a_once, dedupe_across_rounds=True)
    assert statuses(result, 0) == [first_round, "ok"]
    assert statuses(result, 1) == ["ok"]
    assert ran == ["b", "a"]
    duplicates_point_to_answered_calls(result)


def test_across_rounds_a_call_that_ran_answers_for_its_repeat() -> None:
    tools, ran = lookups()
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=(("lookup", {"key": "a"}),)),
            ScriptedResponse(tool_calls=(("lookup", {"key": "a"}),)),
            "done",
        ]
    )
    result = play(model, tools, mode="eager", dedupe_across_rounds=True)
    assert statuses(result, 1) == ["duplicate"] and ran == ["a"]
    duplicates_point_to_answered_calls(result)


# -- 3: under eager, approve_call runs one call at a time, in arrival order --------------------------------


@pytest.mark.parametrize("mode", ["eager", "parallel", "eager[cap=1]"])
def test_approvals_never_overlap_and_come_in_arrival_order(mode: str) -> None:
    """A human-approval hook (``await asyncio.to_thread(input)``) must never get two prompts at once:
    three calls arriving 0.1 s apart, each approval taking 0.3 s."""
    asking: list[str] = []
    log: list[tuple[str, str, float]] = []

    async def approve(call: Any) -> Any:
        loop = asyncio.get_running_loop()
        asking.append(call.tool_call_id)
        log.append(("enter", call.tool_call_id, loop.time()))
        assert len(asking) == 1, f"approvals overlap: {asking}"
        await asyncio.sleep(0.3)
        asking.remove(call.tool_call_id)
        log.append(("exit", call.tool_call_id, loop.time()))
        return True

    tools, ran = lookups()
    result = play(stream("a", "b", "c", end=2.0), tools, mode=mode, hooks=Hooks(approve_call=approve))
    assert statuses(result) == ["ok", "ok", "ok"] and ran == ["a", "b", "c"]
    assert [cid for kind, cid, _ in log if kind == "enter"] == ["c0", "c1", "c2"]
    if mode.startswith("eager"):  # still overlapping the stream: each call starts once approved
        first = result.rounds[0].executions[0]
        assert first.started_at == pytest.approx(0.4)
        assert first.started_at < result.rounds[0].model_call.ended_at


# -- 2: traces that share a title are told apart in every table ----------------------------------------------


def _title_twins() -> tuple[Any, Any]:
    """A recorded scenario and its `as_streamed` copy: the copy keeps the title."""
    from toolcall_lab.generation import GenerationSpeed, as_streamed
    from toolcall_lab.scenarios import SCENARIOS

    trace = SCENARIOS["weather_news_stock"].record()
    streamed = as_streamed(trace, GenerationSpeed(tokens_per_s=56.8, ttft_s=2.25), tool_s=1.0)
    assert streamed.metadata.title == trace.metadata.title
    return trace, streamed


@pytest.mark.parametrize(
    "modes", [["sequential", "eager"], ["parallel", "eager"], ["sequential", "parallel"]]
)
def test_compare_keys_traces_that_share_a_title_apart(modes: list[str]) -> None:
    from toolcall_lab.analysis import compare, summary_text

    trace, streamed = _title_twins()
    title = trace.metadata.title
    alone = {
        t: compare([x], modes).runs.set_index("mode")["wall_time_s"]
        for t, x in (("a", trace), ("b", streamed))
    }
    both = compare([trace, streamed], modes)
    keys = [f"{title} #1", f"{title} #2"]
    assert sorted(set(both.runs["trace"])) == keys and set(both.runs["title"]) == {title}
    wide = both.runs.pivot(index="trace", columns="mode", values="wall_time_s")  # (notebook 06's `gains`)
    for key, which in zip(keys, ("a", "b"), strict=True):
        assert wide.loc[key].to_dict() == pytest.approx(alone[which].to_dict())
    for table in (both.rounds, both.calls):
        assert set(table["trace"]) == set(keys)
    if "sequential" in modes:
        assert both.runs["speedup_vs_sequential"].notna().all()
    assert int(both.summary["traces"].iloc[0]) == 2
    assert both.notes and "told apart" in both.notes[0] and keys[1] in both.notes[0]
    assert "told apart" in summary_text(both)


def test_trace_keys_leave_distinct_titles_alone_and_never_collide() -> None:
    from toolcall_lab.analysis import trace_keys

    trace, _ = _title_twins()
    assert trace_keys([trace]) == [trace.metadata.title]
    assert trace_keys(["a.json", "b.json"]) == ["a.json", "b.json"]
    assert trace_keys(["a.json", "a.json", "a.json #1"]) == ["a.json #2", "a.json #3", "a.json #1"]


def test_the_corpus_view_compares_traces_that_share_a_title_instead_of_refusing() -> None:
    from toolcall_lab.notebook.widgets import CorpusView

    trace, streamed = _title_twins()
    view = CorpusView([trace, streamed], ["parallel", "eager"])
    assert view.comparison is not None and len(set(view.comparison.runs["trace"])) == 2
    assert "told apart" in view.message.value
    opened = view.open_row(int(view.comparison.runs.index[-1]))  # the streamed copy's row opens that copy
    assert opened.trace is streamed


# -- 4: a strategy using a batch of an earlier round gets a UsageError (an Exception) ---------------------------


@pytest.mark.parametrize("streams", [False, True])
def test_a_strategy_reusing_an_earlier_rounds_batch_gets_a_usage_error(streams: bool) -> None:
    from toolcall_lab.exceptions import UsageError

    kept: list[Batch] = []
    caught: list[BaseException] = []

    @strategy("keeps batches", streams=streams)
    async def keeps(batch: Batch) -> None:
        kept.append(batch)
        if len(kept) > 1:
            try:
                await kept[0].run(0)
            except Exception as exc:  # (an Exception: the strategy can catch it)
                caught.append(exc)
        async for pos in batch.arrivals():
            batch.start(pos)
        await batch.join()

    tools, ran = lookups()
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=(("lookup", {"key": "a"}),)),
            ScriptedResponse(tool_calls=(("lookup", {"key": "b"}),)),
            "done",
        ]
    )
    result = play(model, tools, mode=keeps)
    assert result.status == "completed" and ran == ["a", "b"]
    assert len(caught) == 1 and type(caught[0]) is UsageError
    assert "round 0" in str(caught[0]) and "closed" in str(caught[0]) and "left behind" not in str(caught[0])


def test_a_task_the_strategy_left_behind_is_still_cancelled_quietly() -> None:
    seen: list[str] = []
    left: list[asyncio.Future[None]] = []

    @strategy("leaves a task")
    async def leaves(batch: Batch) -> None:
        async def later() -> None:
            await asyncio.sleep(1.0)
            try:
                await batch.run(0)
            except BaseException as exc:
                seen.append(type(exc).__name__)
                raise

        left.append(asyncio.ensure_future(later()))
        await batch.run_parallel()

    tools, _ = lookups()
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=(("lookup", {"key": "a"}),)),
            ScriptedResponse(content="done", latency_s=5.0),
        ]
    )
    result = play(model, tools, mode=leaves)
    assert result.status == "completed" and seen == ["CancelledError"]


# -- 5: on the virtual clock, a strategy waiting on real work of its own is told what happened -----------------


def test_a_strategy_waiting_on_its_own_thread_gets_a_true_message_on_the_virtual_clock() -> None:
    import threading

    release = threading.Event()

    @strategy("waits on its own thread")
    async def waits(batch: Batch) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str] = loop.create_future()

        def work() -> None:  # real work that outlasts the virtual loop's grace (released after the run)
            release.wait()
            with contextlib.suppress(RuntimeError):  # (the loop may be closed by then)
                loop.call_soon_threadsafe(done.set_result, "go")

        threading.Thread(target=work, daemon=True).start()
        await done
        await batch.run_parallel()

    tools, _ = lookups()
    try:
        result = play(stream("a"), tools, mode=waits)
    finally:
        release.set()
    assert (result.status, result.reason) == ("failed", "strategy_error")
    said = result.error or ""
    assert "NeverReturned" in said and "no virtual-clock event was pending" in said
    assert "a thread it started" in said and "asyncio.to_thread" in said and "virtual=False" in said
    assert "(it awaits something that never happens)" not in said


# -- 6: the base class, a class without a name, a class that is not a Strategy: clear messages -----------------


def test_the_base_class_or_a_nameless_class_is_refused_with_what_to_pass(tmp_path: Any) -> None:
    from toolcall_lab.analysis import compare
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.scenarios import SCENARIOS
    from toolcall_lab.strategies import Strategy, resolve

    module = tmp_path / "mystrats.py"
    module.write_text(
        "from toolcall_lab.strategies import Strategy\n\n"
        "class Nameless(Strategy):\n    async def run(self, batch):\n        await batch.run_parallel()\n\n"
        "class NotAStrategy:\n    name = 'x'\n\n    async def run(self, batch):\n        pass\n"
    )
    trace = SCENARIOS["weather_news_stock"].record()
    with pytest.raises(UsageError, match="Strategy is the base class, not a strategy: subclass it"):
        compare([trace], [f"{module}:Strategy"])
    with pytest.raises(UsageError, match="Strategy is the base class"):
        resolve(Strategy)
    with pytest.raises(UsageError, match="the class Nameless has no name: give it one"):
        resolve(f"{module}:Nameless")
    with pytest.raises(UsageError, match=r"NotAStrategy is a class, not a strategy: pass an instance"):
        resolve(f"{module}:NotAStrategy")


# -- 7: serve-trace --delay-scale streams chunks at their recorded offsets ------------------------------------


def _eager_recording() -> Any:
    """An eager run whose call 0 completes at 0.2 s of a 1.0 s stream (recorded chunk offsets)."""
    from toolcall_lab.trace import Trace, TraceMetadata

    tools, _ = lookups(0.3)
    result = play(stream("a", "b", gap=0.2, end=1.0), tools, mode="eager")
    return Trace.from_run(result, TraceMetadata(title="eager recording", origin=result.origin))


def test_a_served_trace_paces_its_stream_by_the_recorded_chunk_offsets() -> None:
    from toolcall_lab.proxy import TraceUpstream

    trace = _eager_recording()
    recorded = [c.offset_s for c in trace.rounds[0].model_call.chunks]
    latency = trace.rounds[0].model_call.latency_s

    async def served(scale: float, stream: bool) -> tuple[list[float], list[bytes]]:
        upstream = TraceUpstream(trace, delay_scale=scale)
        loop = asyncio.get_running_loop()
        start = loop.time()
        body = json.dumps({"model": "m", "messages": list(trace.initial_messages), "stream": stream})
        reply = await upstream.send(body.encode(), {}, stream=stream)
        if reply.stream is None:
            return [loop.time() - start], [reply.body or b""]
        times, data = [], []
        async for piece in reply.stream:
            times.append(loop.time() - start)
            data.append(piece)
        return times, data

    times, data = run_virtual(served(2.0, True))
    assert times[:-1] == pytest.approx([2.0 * t for t in recorded])  # each chunk at its offset x 2
    assert times[-1] == pytest.approx(2.0 * latency) and data[-1] == b"data: [DONE]\n\n"
    assert [json.loads(d[6:])["choices"] for d in data[:-1]] == [
        c.payload["choices"] for c in trace.rounds[0].model_call.chunks
    ]
    whole, _ = run_virtual(served(2.0, False))  # a non-streaming request: whole, after the latency
    assert whole == [pytest.approx(2.0 * latency)]
    instant, _ = run_virtual(served(0.0, True))  # no delay scale: everything at once, as before
    assert set(instant) == {0.0}


def test_a_live_eager_run_against_a_served_trace_overlaps_the_stream() -> None:
    """Real clock, ordering only: the first call starts before the served stream ends."""
    openai = pytest.importorskip("openai")
    from toolcall_lab.openai_model import OpenAIModel
    from toolcall_lab.proxy import TraceUpstream, serve, upstream_app

    trace = _eager_recording()

    async def go() -> RunResult:
        runner, url = await serve(upstream_app(TraceUpstream(trace, delay_scale=1.0)))
        client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        try:
            tools, _ = lookups(0.01)
            return await run(
                OpenAIModel("m", client=client), tools, list(trace.initial_messages), mode="eager"
            )
        finally:
            await client.close()
            await runner.cleanup()

    result = asyncio.run(go())
    first = result.rounds[0]
    assert result.status == "completed" and [e.status for e in first.executions] == ["ok", "ok"]
    assert first.executions[0].started_at < first.model_call.ended_at


@strategy("two at once")
async def two_at_once(batch: Batch) -> None:
    await asyncio.gather(batch.run(1), batch.run(0))


def test_approve_call_is_asked_once_per_call_whichever_copy_ends_up_running() -> None:
    """Call 1 takes call 0's place (call 0 not started yet) and is rejected: call 0, approved when the
    batch was screened, then runs without being asked again."""
    asked: list[str] = []

    async def approve(call: Any) -> Any:
        asked.append(call.tool_call_id)
        await asyncio.sleep(0.1)
        return "not c1" if call.tool_call_id == "c1" else True

    tools, ran = lookups()
    result = play(stream("a", "a"), tools, mode=two_at_once, hooks=Hooks(approve_call=approve))
    assert statuses(result) == ["ok", "rejected"] and ran == ["a"]
    assert sorted(asked) == ["c0", "c1"]
    duplicates_point_to_answered_calls(result)

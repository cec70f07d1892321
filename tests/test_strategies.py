"""Strategies (issue 14): the public interface, user strategies everywhere a mode name goes, per-tool
limits with queueing, eager execution overlapping tools with the model's stream, and the batch cut
off mid-way (every ACTION gets its OBSERVATION; serialized round trips in flight are recorded).

Everything runs on the virtual clock; concurrency is checked by counting active calls, not timing them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import UsageError
from toolcall_lab.loop import AbortHandle, Hooks, run
from toolcall_lab.messages import parse_arguments
from toolcall_lab.models import ModelRequest, ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.records import ChunkTiming, Timing
from toolcall_lab.replay import replay
from toolcall_lab.runs import RunResult
from toolcall_lab.scenarios import SCENARIOS
from toolcall_lab.strategies import Batch, Eager, Parallel, Strategy, resolve, strategy
from toolcall_lab.strategies._completion import ArgumentScan, CallTracker, completion_offsets
from toolcall_lab.tools import ToolRegistry
from toolcall_lab.trace import Trace, TraceMetadata

# -- helpers ------------------------------------------------------------------------------------------


class Counting:
    """Tools that count how many calls run at once, overall and per tool."""

    def __init__(self) -> None:
        self.active: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.total = 0
        self.peak_total = 0
        self.started: list[tuple[str, float]] = []

    def registry(self) -> ToolRegistry:
        reg = ToolRegistry()
        for name in ("search", "read", "write"):
            reg.register(self._tool(name))
        return reg

    def _tool(self, name: str) -> Any:
        async def tool(key: str, seconds: float = 1.0) -> str:
            self.active[name] = self.active.get(name, 0) + 1
            self.total += 1
            self.peak[name] = max(self.peak.get(name, 0), self.active[name])
            self.peak_total = max(self.peak_total, self.total)
            self.started.append((key, asyncio.get_running_loop().time()))
            try:
                await asyncio.sleep(seconds)
            finally:
                self.active[name] -= 1
                self.total -= 1
            return f"{name} {key}"

        tool.__name__ = name
        tool.__doc__ = f"The {name} tool."
        return tool


def scripted(calls: Sequence[tuple[Any, ...]], latency: float = 0.0, then: str = "done") -> ScriptedModel:
    return ScriptedModel(
        [ScriptedResponse(content="On it.", tool_calls=tuple(calls), latency_s=latency), then]
    )


def play(model: Any, tools: ToolRegistry, **settings: Any) -> RunResult:
    return run_virtual(run(model, tools, "go", **settings))


class ChunkModel:
    """Streams hand-made chunks at given offsets (seconds from the request), one response per call."""

    origin = "scripted"
    name = "chunks"

    def __init__(
        self, *responses: list[tuple[float, dict[str, Any]]], chunk_timing: ChunkTiming = "recorded"
    ):
        self.responses = list(responses)
        self.chunk_timing = chunk_timing
        self.served = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        chunks = self.responses[self.served]
        self.served += 1
        loop = asyncio.get_running_loop()
        start = loop.time()
        for offset, payload in chunks:
            delay = start + offset - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            yield payload

    def response_timing(self, request: ModelRequest) -> tuple[Timing, ChunkTiming]:
        return Timing(source="placeholder", note="hand-made chunks"), self.chunk_timing


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def header(index: int, cid: str, name: str, arguments: str = "") -> dict[str, Any]:
    fn = {"name": name, "arguments": arguments}
    return chunk({"tool_calls": [{"index": index, "id": cid, "type": "function", "function": fn}]})


def args(index: int, piece: str) -> dict[str, Any]:
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})


def answer(text: str = "done") -> list[tuple[float, dict[str, Any]]]:
    return [(0.1, chunk({"role": "assistant", "content": text})), (0.1, chunk({}, "stop"))]


def starts(result: RunResult, round_index: int = 0) -> list[float]:
    return [round(e.started_at, 6) for e in result.rounds[round_index].executions]


def answered_once_in_model_order(result: RunResult) -> None:
    assert validate_messages(result.messages) == []
    for rnd in result.rounds:
        ids = [m["tool_call_id"] for m in result.messages if m.get("role") == "tool"]
        mine = [c.tool_call_id for c in rnd.tool_calls]
        assert [i for i in ids if i in mine] == mine


# -- the completeness scan ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab{}[]"\\:, \n\u00e9'),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='k{}"\\ '), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    value=st.dictionaries(st.text(alphabet='k{}[]"\\ '), json_values, max_size=4),
    indent=st.sampled_from([None, 1]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    double=st.booleans(),
)
def test_the_scan_says_complete_exactly_when_the_arguments_first_parse(value, indent, cuts, double) -> None:
    text = json.dumps(value, indent=indent)
    if double:
        text = json.dumps(text)  # a JSON string holding the object (double-encoded; it runs)
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    pieces = [text[a:b] for a, b in itertools.pairwise(points) if b > a]
    scan = ArgumentScan()
    said = [scan.feed(piece) for piece in pieces]
    usable = ["".join(pieces[: k + 1]) for k in range(len(pieces))]
    first = next(k for k, prefix in enumerate(usable) if parse_arguments(prefix).kind == "ok")
    assert said.index(True) == first and said.count(True) == 1


def test_the_scan_handles_escapes_split_across_deltas_and_text_after_the_object() -> None:
    scan = ArgumentScan()
    assert [scan.feed(p) for p in ['{"a": "x\\', '"}', ' still in the string"', "}"]] == [False] * 3 + [True]
    scan = ArgumentScan()
    assert scan.feed('{"a": 1}') and not scan.feed('{"b": 2}') and scan.state == 3  # no longer one object
    scan = ArgumentScan()
    assert not scan.feed("[1, 2]") and scan.state == 3  # not an object: never complete early


def test_a_call_without_usable_arguments_waits_and_one_with_empty_arguments_completes_when_the_next_starts():
    from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator

    tracker = CallTracker(no_arguments={"now"})
    acc = ChatCompletionAccumulator(listener=tracker)
    tracker.listen(acc)
    acc.feed(header(0, "a", "now"))  # no arguments at all (a tool without parameters)
    assert tracker.take() == []
    acc.feed(header(1, "b", "read", '{"key": "x",,}'))  # closes, but is not valid JSON
    assert [(pos, c.tool_call_id, c.arguments) for pos, c in tracker.take()] == [(0, "a", "")]
    acc.feed(header(2, "c", "read", '{"key": "y"}'))
    assert [pos for pos, _ in tracker.take()] == [2]  # call 1 never completes: the parser decides at the end


def test_an_empty_argument_string_of_a_tool_that_takes_arguments_never_completes_early():
    """(bug 2) An interleaving stream (all headers first) may still send call 0's arguments after
    call 1 started: call 0 must not run with {} but wait for its object."""
    from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator

    tracker = CallTracker(no_arguments={"now"})
    acc = ChatCompletionAccumulator(listener=tracker)
    tracker.listen(acc)
    acc.feed(header(0, "a", "read"))
    acc.feed(header(1, "b", "read"))
    assert tracker.take() == []  # read takes arguments: call 0 waits
    acc.feed(args(1, '{"k": 2}'))
    assert [(pos, c.arguments) for pos, c in tracker.take()] == [(1, '{"k": 2}')]
    acc.feed(args(0, '{"k": 1}'))
    assert [(pos, c.arguments) for pos, c in tracker.take()] == [(0, '{"k": 1}')]


# -- the interface: user strategies everywhere -----------------------------------------------------------

READ_ONLY = {"search", "read"}


@strategy("read_only_parallel")
async def read_only_parallel(batch: Batch) -> None:
    """The README's example: read-only tools at once, everything else after, one by one."""
    reads = [i for i, c in enumerate(batch.calls) if c.name in READ_ONLY]
    await batch.run_parallel(reads)
    await batch.run_sequential(i for i in range(len(batch.calls)) if i not in reads)


MIXED = (("search", {"key": "a"}), ("write", {"key": "w1"}), ("read", {"key": "b"}), ("write", {"key": "w2"}))


def test_a_user_strategy_runs_through_the_batch_and_answers_in_model_order() -> None:
    tools = Counting()
    result = play(scripted(MIXED), tools.registry(), mode=read_only_parallel)
    assert result.mode == "read_only_parallel" and result.rounds[0].mode == "read_only_parallel"
    assert starts(result) == [0.0, 1.0, 0.0, 2.0]  # reads together, then the writes in order
    assert [e.status for e in result.executions] == ["ok"] * 4
    answered_once_in_model_order(result)
    kinds = [(e.kind, getattr(e, "call", None) or getattr(e, "execution", None)) for e in result.events]
    assert sum(k == "action" for k, _ in kinds) == 4 and sum(k == "observation" for k, _ in kinds) == 4


def test_a_user_strategy_works_in_replay_compare_the_views_and_a_saved_trace(tmp_path) -> None:
    from toolcall_lab.analysis import compare
    from toolcall_lab.notebook.widgets import CompareView
    from toolcall_lab.plotting import gantt
    from toolcall_lab.trace_files import load, save

    trace = SCENARIOS["weather_news_stock"].record()
    result = replay(trace, read_only_parallel)
    assert result.mode == "read_only_parallel"
    table = compare([trace], ["sequential", "parallel", read_only_parallel])
    assert list(table.runs["mode"]) == ["sequential", "parallel", "read_only_parallel"]
    assert "read_only_parallel" in table.summary.index
    view = CompareView(trace, ["sequential", read_only_parallel])
    assert "read_only_parallel" in view.static_html()
    fig = gantt(trace, ["parallel", read_only_parallel], show=False)
    assert any("read_only_parallel" in ax.get_title(loc="left") for ax in fig.axes)
    meta = TraceMetadata(title="weather, news, stock", origin="replayed")
    saved = load(save(Trace.from_run(result, meta), tmp_path / "t.json"))
    assert saved.metadata.mode == "read_only_parallel" and saved.rounds[0].mode == "read_only_parallel"
    with pytest.raises(
        UsageError, match="recorded under the strategy 'read_only_parallel', which is not a built-in"
    ):
        replay(saved)
    assert replay(saved, read_only_parallel).wall_time_s == pytest.approx(result.wall_time_s)


def test_a_strategy_named_by_module_attribute_and_by_file(tmp_path, monkeypatch) -> None:
    (tmp_path / "my_strategies.py").write_text(
        "from toolcall_lab.strategies import Strategy\n"
        "class Backwards(Strategy):\n"
        "    name = 'backwards'\n"
        "    async def run(self, batch):\n"
        "        await batch.run_sequential(reversed(range(len(batch.calls))))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    trace = SCENARIOS["weather_news_stock"].record()
    by_module = replay(trace, "my_strategies:Backwards")
    by_file = replay(trace, f"{tmp_path / 'my_strategies.py'}:Backwards")
    assert by_module.mode == by_file.mode == "backwards"
    ex = by_module.rounds[0].executions
    assert ex[2].started_at < ex[1].started_at < ex[0].started_at  # ran backwards, answered in order
    answered_once_in_model_order(by_module)


def test_the_cli_takes_strategy_specs_for_bench_and_replay(tmp_path) -> None:
    import subprocess
    import sys

    from tests.conftest import DATA, REPO

    (tmp_path / "my_strategies.py").write_text(
        "from toolcall_lab.strategies import strategy\n"
        "@strategy('one_by_one')\n"
        "async def one_by_one(batch):\n"
        "    await batch.run_sequential()\n"
    )
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin"}
    trace = str(DATA / "traces" / "weather_news_stock.json")
    out = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "replay", trace, "--strategy", "my_strategies:one_by_one"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "replayed as one_by_one" in out.stdout
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolcall_lab",
            "bench",
            trace,
            "--quiet",
            "--modes",
            "sequential,eager[cap=2]",
            "--strategy",
            "my_strategies:one_by_one",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "one_by_one" in out.stdout and "eager[cap=2]" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "replay", trace, "--strategy", "no_such_module:x"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert bad.returncode == 2 and "importing no_such_module failed" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_bad_strategies_are_refused_with_what_to_do() -> None:
    with pytest.raises(UsageError, match=r"'sequential' takes no options"):
        resolve("sequential[cap=2]")
    with pytest.raises(UsageError, match=r"option 'cap=two': use key=N"):
        resolve("eager[cap=two]")
    with pytest.raises(UsageError, match=r"tool_limits\['search'\]=0: must be an integer >= 1"):
        Parallel(tool_limits={"search": 0})
    with pytest.raises(UsageError, match=r"has no name"):
        resolve(type("Nameless", (), {"run": read_only_parallel.run})())
    with pytest.raises(UsageError, match=r"is not a strategy"):
        resolve(42)
    assert resolve("eager[cap=4,search=2]") == Eager(concurrency=4, tool_limits={"search": 2})
    assert resolve("eager[cap=4,search=2]").name == "eager[cap=4,search=2]"


def test_a_strategy_that_raises_or_forgets_calls_stops_the_run_with_a_consistent_record() -> None:
    class Broken(Strategy):
        name = "broken"

        async def run(self, batch: Batch) -> None:
            await batch.run(0)
            raise ValueError("oops")

    class Forgetful(Strategy):
        name = "forgetful"

        async def run(self, batch: Batch) -> None:
            await batch.run(0)

    for strat, what in (
        (Broken(), "ValueError: oops"),
        (Forgetful(), "positions [1, 2] neither run nor skipped"),
    ):
        result = play(scripted(MIXED[:3]), Counting().registry(), mode=strat)
        assert (result.status, result.reason) == ("failed", "strategy_error")
        assert what in (result.error or "")
        assert [e.status for e in result.executions] == ["ok", "cancelled", "cancelled"]
        assert "not executed" in result.executions[1].result.lower()
        assert validate_messages(result.messages) == []
        kinds = [e.kind for e in result.events]
        assert kinds.count("action") == kinds.count("observation")


def test_a_strategy_that_returns_with_calls_still_running_is_a_bug_too() -> None:
    class Leaky(Strategy):
        name = "leaky"

        async def run(self, batch: Batch) -> None:
            batch.start(0)  # never joined

    result = play(scripted(MIXED[:1]), Counting().registry(), mode=Leaky())
    assert result.reason == "strategy_error" and "had not finished" in (
        result.error or ""
    )  # (dispatched, never started)
    assert result.executions[0].status == "cancelled"


# -- per-tool limits and queueing -------------------------------------------------------------------


def test_per_tool_limits_cap_a_tool_and_record_the_wait() -> None:
    calls = [("search", {"key": f"s{i}"}) for i in range(5)] + [("read", {"key": f"r{i}"}) for i in range(3)]
    tools = Counting()
    result = play(scripted(calls), tools.registry(), mode=Parallel(tool_limits={"search": 2}))
    assert tools.peak == {"search": 2, "read": 3}
    ex = result.rounds[0].executions
    assert [e.queued_at for e in ex] == [None, None, 0.0, 0.0, 0.0, None, None, None]
    assert [e.started_at for e in ex[:5]] == [0.0, 0.0, 1.0, 1.0, 2.0]  # in model order as slots free
    assert result.wall_time_s == pytest.approx(3.0)
    answered_once_in_model_order(result)
    tools = Counting()
    result = play(scripted(calls), tools.registry(), mode="parallel[cap=3,search=1]")
    assert tools.peak_total == 3 and tools.peak["search"] == 1
    assert result.mode == "parallel[cap=3,search=1]"


def test_the_timeline_draws_waits_from_queued_at_only() -> None:
    from toolcall_lab.notebook.timeline import items_of

    calls = [("search", {"key": f"s{i}"}) for i in range(3)]
    capped = play(scripted(calls), Counting().registry(), mode="parallel[search=1]")
    rounds = Trace.from_run(capped, TraceMetadata(title="t", origin="scripted")).to_dict()["rounds"]
    waits = [(i.lane, i.t0, i.t1) for i in items_of(rounds) if i.kind == "wait"]
    assert waits == [(2, 0.0, 1.0), (3, 0.0, 2.0)]
    sequential = play(scripted(calls), Counting().registry(), mode="sequential")
    rounds = Trace.from_run(sequential, TraceMetadata(title="t", origin="scripted")).to_dict()["rounds"]
    assert not [i for i in items_of(rounds) if i.kind == "wait"]  # its calls never waited for a slot


@pytest.mark.parametrize("spec", ["parallel[cap=2]", "eager[cap=2]", "eager[search=1,read=1]"])
def test_caps_are_never_exceeded_and_waits_never_overtake(spec: str) -> None:
    calls = [
        (("search", "read", "write")[i % 3], {"key": f"k{i}", "seconds": 0.5 + (i % 4) / 4})
        for i in range(12)
    ]
    tools = Counting()
    result = play(scripted(calls, latency=2.0), tools.registry(), mode=spec)
    strat = resolve(spec)
    if strat.concurrency:
        assert tools.peak_total <= strat.concurrency
    for tool, k in (strat.tool_limits or {}).items():
        assert tools.peak[tool] <= k
    for e in result.executions:
        assert e.queued_at is None or e.queued_at < e.started_at
    answered_once_in_model_order(result)


# -- eager ----------------------------------------------------------------------------------------------


def test_eager_starts_each_call_when_its_arguments_are_complete_and_waits_for_the_stream() -> None:
    model = ChunkModel(
        [
            (0.5, header(0, "a", "search", '{"key": ')),
            (1.0, args(0, '"x", "seconds": 0.2}')),  # complete at 1.0
            (1.5, header(1, "b", "read", '{"key": "y", "seconds": 3}')),  # complete at 1.5
            (2.0, header(2, "c", "write", '{"key"')),
            (4.0, args(2, ': "z", "seconds": 0.5}')),  # complete at 4.0
            (5.0, chunk({}, "tool_calls")),  # the stream ends at 5.0
        ],
        answer(),
    )
    result = play(model, Counting().registry(), mode="eager")
    rnd = result.rounds[0]
    assert starts(result) == [1.0, 1.5, 4.0]
    assert [e.ended_at for e in rnd.executions] == [1.2, 4.5, 4.5]
    assert rnd.model_call.ended_at == 5.0
    assert result.rounds[1].model_call.started_at == 5.0  # after the stream ended (and every call)
    events = [(e.kind, e.at) for e in result.events if e.kind in ("action", "observation", "model_response")]
    assert events[:3] == [("action", 1.0), ("observation", 1.2), ("action", 1.5)]
    assert ("model_response", 5.0) in events
    answered_once_in_model_order(result)
    parallel = play(ChunkModel(*model.responses), Counting().registry(), mode="parallel")
    assert starts(parallel) == [5.0, 5.0, 5.0] and parallel.wall_time_s == pytest.approx(8.1)
    assert result.wall_time_s == pytest.approx(5.1)


def test_eager_leaves_calls_that_never_complete_to_the_parser_and_waits_for_the_last() -> None:
    model = ChunkModel(
        [
            (1.0, header(0, "a", "search", '{"key": "x", "seconds": 0.2}')),
            (1.5, header(1, "b", "read", '{"key": "y",,')),
            (2.0, header(2, "c", "write", "")),
            (3.0, header(3, "d", "read", '{"key": "w"}')),  # c's tool takes arguments: c still waits
            (4.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )
    result = play(model, Counting().registry(), mode="eager")
    ex = result.rounds[0].executions
    # c: `key` is missing: screened out as invalid arguments, the tool never runs
    assert [e.status for e in ex] == ["ok", "invalid_arguments", "invalid_arguments", "ok"]
    assert [e.started_at for e in ex] == [1.0, 4.0, 4.0, 3.0]  # c: settled when the stream ended
    answered_once_in_model_order(result)


def whole_bodies(trace: Trace) -> Trace:
    """The trace as if recorded without streaming: each response one ``chat.completion`` body."""
    from dataclasses import replace

    from toolcall_lab.records import TimedChunk

    def body(r: Any) -> TimedChunk:
        message = r.assistant_message
        doc = {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
        return TimedChunk(offset_s=r.model_call.latency_s, payload=doc)

    return replace(
        trace,
        rounds=tuple(
            replace(r, model_call=replace(r.model_call, chunk_timing="none", chunks=(body(r),)))
            for r in trace.rounds
        ),
    )


def test_eager_on_traces_without_chunk_timing_runs_as_parallel_and_says_so() -> None:
    from toolcall_lab.analysis import compare

    flat = whole_bodies(SCENARIOS["weather_news_stock"].record())
    eager, parallel = replay(flat, "eager"), replay(flat, "parallel")
    assert starts(eager) == starts(parallel) and eager.wall_time_s == parallel.wall_time_s
    assert "eager ran as parallel" in eager.rounds[0].strategy_notes[0]
    runs = compare([flat], ["parallel", "eager"]).runs.set_index("mode")
    assert runs.loc["eager", "chunk_timing"] == "none" and runs.loc["eager", "strategy_notes"] == 1
    assert runs.loc["eager", "eager_bound_s"] == runs.loc["eager", "lower_bound_s"]
    assert runs.loc["eager", "stream_overlap_s"] == 0.0
    rounds = compare([flat], ["eager"]).rounds
    assert "ran as parallel" in rounds.loc[0, "strategy_notes"]


def test_a_user_streaming_strategy_without_chunk_timing_gets_the_note_eager_gets() -> None:
    from toolcall_lab.strategies import strategy

    @strategy("as_they_come", streams=True)
    async def as_they_come(batch):
        async for pos in batch.arrivals():
            batch.start(pos)
        await batch.join()

    flat = whole_bodies(SCENARIOS["weather_news_stock"].record())
    notes = replay(flat, as_they_come).rounds[0].strategy_notes
    assert len(notes) == 1 and notes[0].startswith("as_they_come: the response has no chunk timing")
    assert replay(flat, "eager").rounds[0].strategy_notes[0].startswith("eager ran as parallel")  # one note
    assert len(replay(flat, "eager").rounds[0].strategy_notes) == 1
    spread = SCENARIOS["weather_news_stock"].record()  # a script's offsets: a model, and said so
    assert spread.rounds[0].model_call.chunk_timing == "spread"
    notes = replay(spread, as_they_come).rounds[0].strategy_notes
    assert len(notes) == 1 and "as_they_come: on modelled chunk timing (chunk_timing 'spread'" in notes[0]
    assert len(replay(spread, "eager").rounds[0].strategy_notes) == 1


def test_spread_offsets_are_labelled_a_model_and_the_eager_bound_holds() -> None:
    from toolcall_lab.analysis import compare

    trace = SCENARIOS["weather_news_stock"].record()  # scripted: chunk offsets spread evenly
    result = replay(trace, "eager")
    assert "a model, not a measurement" in result.rounds[0].strategy_notes[0]
    runs = compare([trace], ["parallel", "eager"]).runs.set_index("mode")
    eager = runs.loc["eager"]
    assert eager["chunk_timing"] == "spread"
    assert eager["eager_bound_s"] < eager["lower_bound_s"]
    assert eager["wall_time_s"] == pytest.approx(eager["eager_bound_s"])  # no cap: eager meets its bound
    assert eager["stream_overlap_s"] > 0 and runs.loc["parallel", "stream_overlap_s"] == 0.0
    assert eager["eager_saving_bound_s"] == pytest.approx(
        runs.loc["parallel", "wall_time_s"] - eager["wall_time_s"]
    )


def test_completion_offsets_read_recorded_chunks_like_the_live_stream() -> None:
    from toolcall_lab.records import TimedChunk

    chunks = [
        TimedChunk(offset_s=0.2, payload=header(0, "a", "search", '{"key":')),
        TimedChunk(offset_s=0.4, payload=args(0, '"x"}')),
        TimedChunk(offset_s=0.9, payload=header(1, "b", "read", "")),
        TimedChunk(offset_s=1.0, payload=chunk({}, "tool_calls")),
    ]
    assert completion_offsets(chunks, 1.5) == {0: 0.4, 1: 1.5}  # b completes at the end (1.5 s)


def test_eager_cut_off_mid_stream_records_the_response_as_far_as_it_came() -> None:
    stream = [
        (0.5, header(0, "a", "search", '{"key": "x", "seconds": 0.2}')),
        (1.0, header(1, "b", "read", '{"key": "y", "seconds": 10}')),
        (3.0, header(2, "c", "write", '{"key": "z"')),
        (9.0, args(2, "}")),
        (10.0, chunk({}, "tool_calls")),
    ]
    for drive in ("deadline", "abort", "cancel"):
        tools = Counting()
        model = ChunkModel(stream, answer())

        async def main(drive: str = drive, model: ChunkModel = model, tools: Counting = tools) -> RunResult:
            if drive == "deadline":
                return await run(model, tools.registry(), "go", mode="eager", timeout_s=5.0)
            handle = AbortHandle()
            task = asyncio.create_task(run(model, tools.registry(), "go", mode="eager", abort=handle))
            await asyncio.sleep(5.0)
            handle.abort("stop") if drive == "abort" else task.cancel()
            try:
                return await task
            except asyncio.CancelledError as exc:
                return exc.partial_result  # type: ignore[attr-defined,no-any-return]

        result = run_virtual(main())
        rnd = result.rounds[0]
        assert [c.tool_call_id for c in rnd.tool_calls] == ["a", "b", "c"], drive
        assert [e.status for e in rnd.executions] == ["ok", "cancelled", "cancelled"], drive
        assert "while this call was running" in rnd.executions[1].result
        assert "before this call started" in rnd.executions[2].result  # its arguments never completed
        assert rnd.model_call.ended_at == 5.0 and len(rnd.model_call.chunks) == 3
        assert "cut off after 5.000 s" in rnd.strategy_notes[0]
        assert tools.total == 0  # nothing left running
        assert validate_messages(result.messages) == []
        kinds = [e.kind for e in result.events]
        assert kinds.count("action") == kinds.count("observation") == 2
        assert "recorded as far as it came" in (result.error or "")


def test_a_model_failing_mid_stream_with_eager_calls_running_keeps_them_in_the_record() -> None:
    class Failing(ChunkModel):
        async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
            async for payload in super().stream(request):
                yield payload
            raise ConnectionError("upstream went away")

    model = Failing(
        [
            (0.5, header(0, "a", "search", '{"key": "x", "seconds": 0.2}')),
            (1.0, header(1, "b", "read", '{"key')),
        ]
    )
    result = play(model, Counting().registry(), mode="eager")
    assert (result.status, result.reason) == ("failed", "model_error")
    assert [e.status for e in result.rounds[0].executions] == ["ok", "cancelled"]
    assert validate_messages(result.messages) == []


def test_a_stream_that_changes_a_started_call_is_reported_and_the_record_keeps_what_ran() -> None:
    model = ChunkModel(
        [
            (0.5, header(0, "a", "search", '{"key": "x", "seconds": 0.2}')),
            (1.0, args(0, '{"key": "other"}')),  # text after the object: the final arguments are invalid
            (2.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )
    result = play(model, Counting().registry(), mode="eager")
    rnd = result.rounds[0]
    assert rnd.executions[0].status == "ok" and rnd.executions[0].arguments == '{"key": "x", "seconds": 0.2}'
    assert rnd.tool_calls[0].arguments.endswith('{"key": "other"}')
    found = [f for f in rnd.findings if f.kind == "changed_after_start"]
    assert len(found) == 1 and "the record keeps what ran" in found[0].message


def test_eager_stops_early_dispatch_at_out_of_order_indices_and_survives_a_negative_one() -> None:
    model = ChunkModel(
        [
            (0.5, header(0, "a", "search", '{"key": "x"}')),
            (1.0, header(2, "b", "read", '{"key": "y"}')),  # sparse: known at the end
            (1.5, header(-1, "c", "write", '{"key": "z"}')),  # sorts first: a's position moves
            (2.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )
    result = play(model, Counting().registry(), mode="eager")
    rnd = result.rounds[0]
    # where a negative index sorts is the parser's rule (reported as a finding); the batch follows it
    order = [c.tool_call_id for c in rnd.tool_calls]
    assert sorted(order) == ["a", "b", "c"] and [e.tool_call_id for e in rnd.executions] == order
    started = {e.tool_call_id: e.started_at for e in rnd.executions}
    assert started == {"a": 0.5, "b": 2.0, "c": 2.0}  # only a was dispatched early
    answered_once_in_model_order(result)


@pytest.mark.parametrize("hooked", [False, True])
def test_eager_calls_that_move_before_their_tasks_first_run_land_at_their_final_positions(
    hooked: bool,
) -> None:
    """Two calls are dispatched as they arrive, and the stream ends with a negative index that moves
    them one place on (0 -> 1, 1 -> 2) before their tasks first ran: each task finds its call's final
    position once (its start, its approval, its record), with or without an ``approve_call`` hook; a
    position mapped twice put a call's start or record where the next call belongs."""
    from toolcall_lab._execution import Executor
    from toolcall_lab.messages import ToolCall

    asked: list[str] = []
    running: list[float | None] = []

    def approve(call: Any) -> bool:
        asked.append(call.tool_call_id)
        return True

    async def main() -> Batch:
        executor = Executor(Counting().registry(), Hooks(approve_call=approve if hooked else None), 0.0)
        batch = Batch(executor, emit=None, strategy="eager", streaming=True)
        early = [
            ToolCall(tool_call_id="a", name="search", arguments='{"key": "x", "seconds": 2}', index=0),
            ToolCall(tool_call_id="b", name="read", arguments='{"key": "y", "seconds": 1}', index=1),
        ]

        async def streaming() -> None:
            if await batch._first_arrival():
                await resolve("eager").run(batch)

        task = asyncio.get_running_loop().create_task(streaming())
        await asyncio.sleep(0)  # the strategy waits for the first call
        batch._arrive(0, early[0])
        await asyncio.sleep(0)  # it dispatches a (its task not run yet), and takes the next at arrival
        batch._arrive(1, early[1])
        last = ToolCall(tool_call_id="c", name="write", arguments='{"key": "z", "seconds": 0.5}', index=-1)
        batch._end_stream([last, *early], None, "recorded")  # moves a and b on, before their tasks ran
        await asyncio.sleep(0.1)  # every call has started (the shortest runs 0.5 s)
        running.extend(batch._started)
        await task
        return batch

    batch = run_virtual(main())
    done = batch.results
    assert [e.tool_call_id for e in done] == ["c", "a", "b"]  # type: ignore[union-attr]
    assert [e.result for e in done] == ["write z", "search x", "read y"]  # type: ignore[union-attr]
    assert [e.ended_at - e.started_at for e in done] == [0.5, 2.0, 1.0]  # type: ignore[union-attr]
    assert running == [e.started_at for e in done] == [0.0, 0.0, 0.0]  # type: ignore[union-attr]
    assert not any(batch._open)
    assert sorted(asked) == (["a", "b", "c"] if hooked else [])


def burst(*calls: tuple[str, str, str]) -> ChunkModel:
    """Every call of one response, and its end, in chunks that all come at once (as in one read)."""
    chunks = [(0.0, header(i, cid, name, arguments)) for i, (cid, name, arguments) in enumerate(calls)]
    return ChunkModel([*chunks, (0.0, chunk({}, "tool_calls"))], answer())


def test_eager_over_a_burst_checks_every_call_then_starts_them_together_in_model_order() -> None:
    """Calls that arrive together are dispatched as `run_parallel` does a batch: each checked first,
    then every ACTION in model order (a call with bad arguments answered at its own), then the calls
    run; with a duplicate among them, each is decided at its turn (it waits for its original). The
    strategy is called while the stream is still open (the stream's end reaches the loop only after
    the task receiving it finished)."""
    seen: list[tuple[bool, int]] = []

    @strategy("spy_eager", streams=True)
    async def spy(batch: Batch) -> None:
        seen.append((batch.streaming, len(batch._arrivals)))
        await Eager().run(batch)

    def played(model: ChunkModel, mode: Any = "eager") -> tuple[RunResult, list[tuple[str, str]]]:
        events: list[Any] = []
        result = run_virtual(run(model, Counting().registry(), "go", mode=mode, on_event=events.append))
        answered_once_in_model_order(result)
        return result, [
            (e.kind, e.call.tool_call_id if e.kind == "action" else e.execution.tool_call_id)
            for e in events
            if e.kind in ("action", "observation")
        ]

    calls = [
        ("a", "search", '{"key": "x"}'),
        ("c", "read", '{"key": 1, "nope": 2}'),
        ("d", "write", '{"key": "y"}'),
    ]
    result, acts = played(burst(*calls))
    assert [e.status for e in result.executions] == ["ok", "invalid_arguments", "ok"]
    assert acts[:4] == [("action", "a"), ("action", "c"), ("observation", "c"), ("action", "d")]
    result, acts = played(burst(calls[0], ("b", "search", '{"key": "x"}'), *calls[1:]))
    assert [e.status for e in result.executions] == ["ok", "duplicate", "invalid_arguments", "ok"]
    assert [cid for kind, cid in acts if kind == "action"] == ["a", "b", "c", "d"]
    result, _ = played(burst(*calls), spy)
    assert result.status == "completed" and seen == [(True, 3)]


def test_an_abort_from_a_listener_at_the_first_action_of_a_burst_starts_no_other_call() -> None:
    handle = AbortHandle()
    tools = Counting()

    def listener(event: Any) -> None:
        if event.kind == "action":
            handle.abort("seen enough")

    model = burst(
        ("a", "search", '{"key": "x"}'), ("b", "read", '{"key": "y"}'), ("c", "write", '{"key": "z"}')
    )
    result = run_virtual(run(model, tools.registry(), "go", mode="eager", abort=handle, on_event=listener))
    assert (result.status, result.reason) == ("aborted", "aborted")
    assert tools.started == []  # (a's ACTION went out, then the abort: no tool is entered)
    assert [e.status for e in result.executions] == ["cancelled"] * 3
    assert all("aborted (seen enough) before this call started" in e.result for e in result.executions)
    assert validate_messages(result.messages) == []


def test_eager_with_an_approval_hook_and_duplicates() -> None:
    def approve(call: Any) -> Any:
        return "no writes" if call.name == "write" else True

    calls = [
        ("search", {"key": "a"}),
        ("search", {"key": "a"}),
        ("write", {"key": "w"}),
        ("read", {"key": "b"}),
    ]
    result = play(
        scripted(calls, latency=2.0), Counting().registry(), mode="eager", hooks=Hooks(approve_call=approve)
    )
    assert [e.status for e in result.executions] == ["ok", "duplicate", "rejected", "ok"]
    assert result.executions[0].started_at < result.rounds[0].model_call.ended_at
    answered_once_in_model_order(result)


# -- batches cut off (tester items A11, A12) ---------------------------------------------------------


@pytest.mark.parametrize("drive", ["deadline", "cancel"])
@pytest.mark.parametrize("mode", ["parallel", "parallel[cap=2]", "sequential", "eager", "serialized"])
def test_a_cut_batch_emits_an_observation_for_every_action(drive: str, mode: str) -> None:
    """A11: a parallel batch cut by the deadline or a cancel emitted no OBSERVATION for calls that had
    finished; now every ACTION gets its OBSERVATION, with the recorded outcome."""
    calls = [
        ("search", {"key": "a", "seconds": 0.2}),
        ("read", {"key": "b", "seconds": 0.5}),
        ("nope", {}),
        ("search", {"key": "a", "seconds": 0.2}),
        ("write", {"key": "c", "seconds": 5}),
    ]
    seen: list[Any] = []

    async def main() -> RunResult:
        task = asyncio.create_task(
            run(
                scripted(calls),
                Counting().registry(),
                "go",
                mode=mode,
                on_event=seen.append,
                timeout_s=0.7 if drive == "deadline" else None,
            )
        )
        if drive == "cancel":
            await asyncio.sleep(0.7)
            task.cancel()
        try:
            return await task
        except asyncio.CancelledError as exc:
            return exc.partial_result  # type: ignore[attr-defined,no-any-return]

    result = run_virtual(main())
    actions = [e.call.tool_call_id for e in seen if e.kind == "action"]
    observed = {e.execution.tool_call_id: e.execution for e in seen if e.kind == "observation"}
    assert sorted(actions) == sorted(observed)
    recorded = {e.tool_call_id: e for e in result.executions}
    for cid, ex in observed.items():
        assert ex == recorded[cid]
    assert recorded["call_0_0"].status == "ok" and observed["call_0_0"].status == "ok"


@pytest.mark.parametrize(("deadline", "trips"), [(0.55, [(0.5, 0.55)]), (1.15, [(0.5, 0.6), (1.1, 1.15)])])
def test_a_serialized_round_trip_in_flight_when_the_run_stops_is_recorded(
    deadline: float, trips: list[Any]
) -> None:
    """A12: the client round trip under way when the run stopped was dropped from the record."""
    calls = [("search", {"key": f"k{i}", "seconds": 0.5}) for i in range(3)]
    result = play(
        scripted(calls), Counting().registry(), mode="serialized", round_trip_s=0.1, timeout_s=deadline
    )
    rnd = result.rounds[0]
    assert [(round(t.started_at, 6), round(t.ended_at, 6)) for t in rnd.round_trips] == trips
    assert "cut off after 0.050 s when the run stopped" in rnd.round_trips[-1].timing.note
    assert rnd.client_round_trips == 1 + len(trips)
    assert result.status == "timeout"


# -- the record ----------------------------------------------------------------------------------------


def test_strategy_records_round_trip_through_a_trace_file(tmp_path) -> None:
    from toolcall_lab.trace_files import load, save, validate

    calls = [("search", {"key": f"s{i}"}) for i in range(3)]
    result = play(scripted(calls, latency=1.0), Counting().registry(), mode="eager[search=1]")
    trace = Trace.from_run(result, TraceMetadata(title="eager with a limit", origin="scripted"))
    path = save(trace, tmp_path / "t.json")
    assert load(path) == trace
    loaded, warnings = validate(path)
    assert warnings == []
    assert loaded.metadata.mode == "eager[search=1]"
    assert any(e.queued_at is not None for e in loaded.rounds[0].executions)
    assert loaded.rounds[0].strategy_notes
    assert replay(loaded).wall_time_s == pytest.approx(result.wall_time_s)  # its name is enough to replay


# -- real recordings -------------------------------------------------------------------------------------


@needs_realdata
def test_eager_on_real_claude_code_sessions_starts_tools_while_the_blocks_stream() -> None:
    """Quirk: Claude Code writes one log line per content block as it finishes streaming, and the
    importer keeps those times as chunk offsets (``recorded``): a 5-call batch whose blocks came
    out over 1.3 s. Eager starts each call at its block's line; parallel waits for the last."""
    from toolcall_lab.analysis import compare
    from toolcall_lab.importers import import_claude_code

    traces = [
        t
        for folder in ("claude-code-viewer", "claude-reliability")
        for t in import_claude_code(REALDATA / folder).traces
    ]
    table = compare(traces, ["parallel", "eager"])
    assert table.errors.empty
    runs = table.runs.pivot(index="trace", columns="mode", values="wall_time_s")
    assert (runs["eager"] <= runs["parallel"] + 1e-9).all()
    eager = table.runs[table.runs["mode"] == "eager"]
    assert (eager["chunk_timing"] == "recorded").sum() >= len(eager) - 1  # (one trace has no tool round)
    assert (eager["wall_time_s"] >= eager["eager_bound_s"] - 1e-9).all()
    assert (eager["eager_bound_s"] <= eager["lower_bound_s"] + 1e-9).all()
    assert eager["stream_overlap_s"].sum() > 1.0
    session = next(
        t
        for t in traces
        if "1af7fc5e" in t.metadata.title and t.rounds[1:] and len(t.rounds[1].tool_calls) == 5
    )
    rnd = replay(session, "eager").rounds[1]
    assert [round(e.started_at - rnd.model_call.started_at, 3) for e in rnd.executions] == [
        3.846,
        4.404,
        5.051,
        5.087,
        5.103,
    ]
    assert rnd.model_call.latency_s == pytest.approx(5.103, abs=1e-3)


def test_the_live_view_follows_an_eager_run_whose_actions_come_before_the_model_response() -> None:
    from toolcall_lab.notebook.widgets import LiveView

    live = LiveView("eager", mode="eager")
    calls = [("search", {"key": "a", "seconds": 0.2}), ("read", {"key": "b", "seconds": 0.2})]
    result = play(scripted(calls, latency=2.0), Counting().registry(), mode="eager", on_event=live.on_event)
    html = live.html()
    assert live.n_events == len(result.events) and "search" in html and "read" in html
    assert result.events.index(next(e for e in result.events if e.kind == "action")) < result.events.index(
        next(e for e in result.events if e.kind == "model_response")
    )


def test_a_keyboard_interrupt_from_an_eager_call_stops_the_stream_at_once_with_the_record() -> None:
    async def boom(key: str) -> str:
        await asyncio.sleep(0.1)
        raise KeyboardInterrupt

    tools = Counting().registry()
    tools.register(boom)
    model = ChunkModel(
        [
            (0.5, header(0, "a", "boom", '{"key": "x"}')),
            (1.0, header(1, "b", "read", '{"key": "y", "seconds": 5}')),
            (9.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )
    with pytest.raises(KeyboardInterrupt) as info:
        run_virtual(run(model, tools, "go", mode="eager"))
    partial = info.value.partial_result  # type: ignore[attr-defined]
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    rnd = partial.rounds[0]
    assert rnd.model_call.ended_at == pytest.approx(0.6)  # the stream stopped when the tool raised
    assert [c.tool_call_id for c in rnd.tool_calls] == ["a"]  # b had not appeared yet
    assert [e.status for e in rnd.executions] == ["error"]
    assert "raised KeyboardInterrupt" in rnd.executions[0].result
    assert validate_messages(partial.messages) == []


def test_eager_on_the_real_clock_starts_a_call_before_the_stream_ends() -> None:
    """Live runs: completeness is seen as chunks arrive (an ordering check, no time threshold)."""
    calls = [("search", {"key": "a", "seconds": 0.05}), ("read", {"key": "b", "seconds": 0.05})]
    result = asyncio.run(run(scripted(calls, latency=0.3), Counting().registry(), "go", mode="eager"))
    rnd = result.rounds[0]
    assert (
        rnd.model_call.chunk_timing == "recorded"
    )  # on the real clock, offsets are measured as chunks arrive
    assert rnd.executions[0].started_at < rnd.model_call.ended_at
    assert result.rounds[1].model_call.started_at >= max(e.ended_at for e in rnd.executions)
    answered_once_in_model_order(result)


def test_the_corpus_view_compares_a_user_strategy() -> None:
    from toolcall_lab.notebook.widgets import CorpusView

    view = CorpusView([SCENARIOS["weather_news_stock"].record()], ["parallel", read_only_parallel, "eager"])
    assert set(view.comparison.runs["mode"]) == {"parallel", "read_only_parallel", "eager"}
    assert "read_only_parallel" in list(view.mode_box.options)


def _record(result: RunResult) -> list[tuple[Any, ...]]:
    """What a round recorded of its calls, and the events' order, without run-specific ids."""
    calls = [
        (e.tool_call_id, e.status, e.result, e.started_at, e.ended_at, e.duplicate_of)
        for e in result.rounds[0].executions
    ]
    events = [  # (a streaming strategy's ACTIONs may come before the loop's model_response event)
        (ev.kind, getattr(ev, "tool_call_id", None), ev.at)
        for ev in result.events
        if ev.kind in ("action", "observation")
    ]
    return [*calls, *events]


@pytest.mark.parametrize("cap", [None, 2])
def test_eager_on_a_one_chunk_response_records_what_parallel_records(cap: int | None) -> None:
    """Every call of the batch in one chunk: eager starts them all at that instant. Its record, and its
    ACTION/OBSERVATION events in their order, are parallel's, also with a duplicate in the batch,
    broken arguments and a cap."""
    calls = [
        ("search", {"key": "a"}),
        ("read", {"key": "b", "seconds": 2.0}),
        ("search", {"key": "a"}),  # a duplicate of the first
        ("write", '{"key": '),  # broken arguments
        ("write", {"key": "c", "seconds": 0.5}),
    ]
    settings = {"concurrency": cap} if cap else {}
    deltas = [
        {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": a}}
        for i, (name, a) in enumerate((n, a if isinstance(a, str) else json.dumps(a)) for n, a in calls)
    ]
    model = lambda: ChunkModel([(1.0, chunk({"tool_calls": deltas}, "tool_calls"))], answer())  # noqa: E731
    eager = play(model(), Counting().registry(), mode="eager", **settings)
    parallel = play(model(), Counting().registry(), mode="parallel", **settings)
    assert eager.status == parallel.status == "completed"
    assert _record(eager) == _record(parallel)
    assert [e.status for e in eager.rounds[0].executions] == [
        "ok", "ok", "duplicate", "invalid_arguments", "ok"
    ]  # fmt: skip


def test_eager_on_a_one_chunk_response_asks_approve_call_per_call_then_starts_it() -> None:
    """An ``approve_call`` hook under eager: each call is approved, then starts (not the whole batch
    approved first, as under parallel), also when every call arrived in one chunk."""
    order: list[str] = []

    async def approve(call: Any) -> bool:
        order.append(f"approve {call.tool_call_id}")
        await asyncio.sleep(1.0)
        return True

    counting = Counting()
    deltas = [
        {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": "search", "arguments": a}}
        for i, a in enumerate(json.dumps({"key": str(i)}) for i in range(3))
    ]
    model = ChunkModel([(1.0, chunk({"tool_calls": deltas}, "tool_calls"))], answer())
    result = play(model, counting.registry(), mode="eager", hooks=Hooks(approve_call=approve))
    assert result.status == "completed"
    starts_at = sorted(t for _, t in counting.started)
    assert starts_at[0] < starts_at[-1]  # the first call started before the last was approved

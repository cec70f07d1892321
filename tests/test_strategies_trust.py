"""Strategies, second pass (issue 14): what a fresh-eyes tester broke, each a regression test.

A user strategy cannot run a call twice or run it without its events; eager never runs a call with
arguments it was not sent, and replay never serves a result recorded for other arguments; approval
follows one rule; positions and names are checked; cuts by a model error replay.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from tests.test_strategies import MIXED, ChunkModel, Counting, answer, args, chunk, header, play, scripted
from toolcall_lab.analysis import eager_bound_s
from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import ReplayDivergenceError, UsageError
from toolcall_lab.loop import Hooks, run
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.replay import replay
from toolcall_lab.runs import RunResult
from toolcall_lab.strategies import Batch, Strategy, resolve, strategy
from toolcall_lab.trace import Trace, TraceMetadata


def one_event_pair_per_call(result: RunResult) -> None:
    actions = [e.call.tool_call_id for e in result.events if e.kind == "action"]
    observations = [e.execution.tool_call_id for e in result.events if e.kind == "observation"]
    assert len(actions) == len(set(actions)) and sorted(actions) == sorted(observations)
    if not any(e.status == "skipped" for e in result.executions):  # (a skip is unanswered on purpose)
        assert validate_messages(result.messages) == []


# -- (1) each call runs at most once, whatever primitive the strategy uses ------------------------------


async def _start_twice(batch: Batch) -> None:
    batch.start(0)
    batch.start(0)
    await batch.join()


async def _start_then_run(batch: Batch) -> None:
    batch.start(0)
    await batch.run(0)


async def _parallel_with_a_repeat(batch: Batch) -> None:
    await batch.run_parallel([0, 0, 1])


async def _run_then_parallel_of_it(batch: Batch) -> None:
    await batch.run(1)
    await batch.run_parallel([1, 2])


async def _skip_then_run(batch: Batch) -> None:
    batch.skip(0)
    await batch.run(0)


@pytest.mark.parametrize(
    "body, says",
    [
        (_start_twice, r"start\(0\): the call at position 0 .* already run, started or skipped"),
        (_start_then_run, r"run\(0\): the call at position 0 .* already run, started or skipped"),
        (_parallel_with_a_repeat, r"run_parallel: position 0 is given twice"),
        (_run_then_parallel_of_it, r"run_parallel\(1\): the call at position 1 .* already run"),
        (_skip_then_run, r"run\(0\): the call at position 0 .* already run, started or skipped"),
    ],
)
def test_a_user_strategy_cannot_run_a_call_twice(body: Any, says: str) -> None:
    tools = Counting()
    declared = strategy(body.__name__.strip("_"), skips_calls="skip" in body.__name__)(body)
    result = play(scripted(MIXED[:3]), tools.registry(), mode=declared)
    assert (result.status, result.reason) == ("failed", "strategy_error")
    assert result.error is not None
    assert re.search(says, result.error), result.error
    keys = [k for k, _ in tools.started]
    assert len(keys) == len(set(keys))  # no tool ran twice
    ran = [e for e in result.executions if e.status == "ok"]
    assert len(ran) == len(keys)  # every run is recorded
    one_event_pair_per_call(result)


def test_the_low_level_primitives_are_private() -> None:
    """act / execute / observe / screen / verdict could run a call without events or twice: they are
    not part of the Batch a user strategy gets."""
    for name in ("act", "execute", "observe", "screen", "verdict", "drain", "close", "arrive", "executor"):
        assert not hasattr(Batch, name), name
    for name in ("run", "start", "join", "run_parallel", "run_sequential", "skip", "arrivals", "call"):
        assert hasattr(Batch, name), name


@pytest.mark.parametrize(
    "pos, says",
    [
        (-1, r"run\(-1\): no call at position -1; the batch has 3 call\(s\) \(positions 0 to 2\)"),
        (3, r"run\(3\): no call at position 3"),
        (True, r"run\(True\): a position is an int .* not bool"),
        ("0", r"run\('0'\): a position is an int .* not str"),
    ],
)
def test_bad_positions_are_refused_with_the_batch_size(pos: Any, says: str) -> None:
    async def bad(batch: Batch) -> None:
        await batch.run(pos)

    result = play(scripted(MIXED[:3]), Counting().registry(), mode=strategy("bad")(bad))
    assert result.reason == "strategy_error"
    assert re.search(says, result.error or ""), result.error
    assert "batch.py" not in (result.error or "") and "_StrategyFailed" not in (result.error or "")


def test_a_streaming_strategy_that_runs_a_call_before_it_arrived_is_told_to_use_arrivals() -> None:
    async def hasty(batch: Batch) -> None:
        await batch.run(1)  # (called when call 0 arrives: call 1 comes later)

    model = ChunkModel(
        [
            (0.5, header(0, "a", "search", '{"key": "x"}')),
            (0.8, header(1, "b", "search", '{"key": "y"}')),
            (1.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )
    result = play(model, Counting().registry(), mode=strategy("hasty", streams=True)(hasty))
    assert result.reason == "strategy_error"
    assert "has not arrived yet" in (result.error or "") and "arrivals()" in (result.error or "")

    async def all_at_once(batch: Batch) -> None:
        await batch.run_parallel()

    model = ChunkModel(
        [(0.5, header(0, "a", "search", '{"key": "x"}')), (1.0, chunk({}, "tool_calls"))], answer()
    )
    result = play(model, Counting().registry(), mode=strategy("all_at_once", streams=True)(all_at_once))
    assert "while the model is still streaming" in (result.error or "")
    assert "batch.arrivals()" in (result.error or "")


def test_a_user_skip_names_the_strategy_not_first_only() -> None:
    async def skip_rest(batch: Batch) -> None:
        await batch.run(0)
        for pos in range(1, len(batch.calls)):
            batch.skip(pos, "reads only the first")

    declared = strategy("skip_rest", skips_calls=True)(skip_rest)
    result = play(scripted(MIXED[:2]), Counting().registry(), mode=declared)
    skipped = result.executions[1]
    assert skipped.status == "skipped"
    assert "skip_rest" in skipped.result and "reads only the first" in skipped.result
    assert "first_only" not in skipped.result


def test_a_plain_def_or_a_missing_parenthesis_is_refused_when_declared() -> None:
    def plain(batch: Batch) -> None:
        pass

    with pytest.raises(UsageError, match="is not an `async def`"):
        strategy("plain")(plain)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"with parentheses"):
        strategy(plain)  # type: ignore[arg-type]


# -- (12) a built-in's name is the built-in's --------------------------------------------------------


def test_a_user_strategy_cannot_take_a_builtin_name() -> None:
    async def body(batch: Batch) -> None:
        await batch.run_sequential()

    for name in ("parallel", "eager[cap=2]", "sequential"):
        with pytest.raises(UsageError, match="built-in strategy"):
            resolve(strategy(name)(body))

    class Fake(Strategy):
        name = "first_only"

        async def run(self, batch: Batch) -> None:
            await batch.run_sequential()

    with pytest.raises(UsageError, match="give it a name of its own"):
        play(scripted(MIXED[:2]), Counting().registry(), mode=Fake())


def test_options_are_given_once_and_odd_tool_names_round_trip() -> None:
    with pytest.raises(UsageError, match="cap is given twice"):
        resolve("eager[cap=2,cap=3]")
    with pytest.raises(UsageError, match="limited twice"):
        resolve("parallel[search=2,search=3]")
    odd = resolve('parallel["cap"=2,"a,b=c]"=1]')
    assert odd.tool_limits == {"cap": 2, "a,b=c]": 1} and odd.concurrency is None  # type: ignore[attr-defined]
    assert resolve(odd.name) == odd
    assert resolve("parallel[cap=2]") != odd


# -- (9) one approval rule -------------------------------------------------------------------------


def test_approval_runs_for_the_whole_batch_before_any_call_starts_in_user_strategies_too() -> None:
    async def slow_approval(call: Any) -> bool:
        await asyncio.sleep(0.3)
        return True

    async def my_parallel(batch: Batch) -> None:
        await batch.run_parallel()

    async def my_sequential(batch: Batch) -> None:
        await batch.run_sequential()

    async def my_starts(batch: Batch) -> None:
        for pos in range(len(batch.calls)):
            batch.start(pos)
        await batch.join()

    calls = [("search", {"key": "a", "seconds": 0.1}), ("read", {"key": "b", "seconds": 0.1})]
    hooks = Hooks(approve_call=slow_approval)
    firsts = {}
    for mode in ("parallel", "sequential", my_parallel, my_sequential, my_starts):
        m = strategy(mode.__name__)(mode) if callable(mode) else mode
        result = play(scripted(calls), Counting().registry(), mode=m, hooks=hooks)
        firsts[getattr(m, "name", m)] = round(result.executions[0].started_at, 6)
        if mode in ("parallel", my_parallel, my_starts):  # every call starts at once, after approval
            assert {round(e.started_at, 6) for e in result.executions} == {0.6}
    assert set(firsts.values()) == {0.6}, firsts  # two approvals of 0.3 s, then the first call


# -- (2, 10) eager never runs a call with arguments it was not sent ---------------------------------


def interleaved() -> ChunkModel:
    return ChunkModel(
        [
            (0.05, header(0, "a", "search")),
            (0.10, header(1, "b", "search")),
            (0.15, args(0, '{"key":')),
            (0.20, args(1, '{"key": "y", "seconds": 0.5}')),
            (0.25, args(0, ' "x", "seconds": 0.5}')),
            (0.40, chunk({}, "tool_calls")),
        ],
        answer(),
    )


def test_eager_waits_for_the_arguments_of_an_interleaved_call() -> None:
    tools = Counting()
    result = play(interleaved(), tools.registry(), mode="eager")
    rnd = result.rounds[0]
    assert [(e.arguments, round(e.started_at, 6)) for e in rnd.executions] == [
        ('{"key": "x", "seconds": 0.5}', 0.25),
        ('{"key": "y", "seconds": 0.5}', 0.2),
    ]
    assert sorted(k for k, _ in tools.started) == ["x", "y"]
    assert not [f for f in rnd.findings if f.kind == "changed_after_start"]
    trace = Trace.from_run(result, TraceMetadata(title="interleaved", origin="scripted"))
    assert eager_bound_s(trace) == pytest.approx(result.wall_time_s)  # the same rule on the record
    for mode in ("eager", "parallel", "sequential"):
        again = replay(trace, mode)
        assert [e.result for e in again.executions] == [e.result for e in result.executions]


def test_a_no_argument_tool_completes_when_the_next_call_starts() -> None:
    from toolcall_lab.tools import ToolRegistry

    reg = Counting().registry()

    async def now() -> str:
        return "12:00"

    reg.register(now)
    model = ChunkModel(
        [
            (0.1, header(0, "a", "now")),
            (0.5, header(1, "b", "search", '{"key": "x"}')),
            (1.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )
    assert isinstance(reg, ToolRegistry)
    result = play(model, reg, mode="eager")
    assert [round(e.started_at, 6) for e in result.rounds[0].executions] == [0.5, 0.5]


def test_replay_never_serves_a_result_recorded_for_other_arguments() -> None:
    """A recording whose call ran with {} while the stream ended with other arguments (what the old
    eager did): a replay must say so, not serve f({})'s result for f({"k": 1})."""
    result = play(scripted([("search", {"key": "x", "seconds": 0.2})]), Counting().registry())
    trace = Trace.from_run(result, TraceMetadata(title="tampered", origin="scripted"))
    data = trace.to_dict()
    data["rounds"][0]["tool_executions"][0]["arguments"] = "{}"
    tampered = Trace.from_dict(data)
    for mode in ("parallel", "sequential", "eager"):
        with pytest.raises(ReplayDivergenceError, match=r"the recording ran it with other arguments"):
            (replay(tampered, mode))


def test_a_call_cut_off_after_its_header_is_incomplete_and_the_error_counts_chunks() -> None:
    model = ChunkModel(
        [
            (0.1, header(0, "a", "search", '{"key": "x", "seconds": 0.1}')),
            (0.2, header(1, "b", "search")),
        ],
    )

    class Breaks(ChunkModel):
        async def stream(self, request: Any) -> Any:
            async for c in super().stream(request):
                yield c
            raise ConnectionError("reset")

    model = Breaks(*model.responses)
    result = play(model, Counting().registry(), mode="eager")
    assert (result.status, result.reason) == ("failed", "model_error")
    rnd = result.rounds[0]
    assert rnd.tool_calls[1].complete is False
    assert rnd.executions[0].status == "ok"
    assert rnd.executions[1].status != "ok"
    assert any(f.kind == "incomplete_arguments" and f.tool_call_id == "b" for f in rnd.findings)
    assert "chunk(s) received" in (result.error or "")


# -- (5) an eager run cut by a model error replays ---------------------------------------------------


def test_an_eager_run_cut_by_a_model_error_replays_in_every_mode() -> None:
    class Breaks(ChunkModel):
        async def stream(self, request: Any) -> Any:
            async for c in super().stream(request):
                yield c
            raise ConnectionError("reset")

    model = Breaks(
        [
            (0.1, header(0, "a", "search", '{"key": "x", "seconds": 0.2}')),
            (0.2, header(1, "b", "search", '{"key": "y", "seconds": 5}')),
            (0.5, header(2, "c", "search", '{"key": "z"}')),
        ],
    )
    result = play(model, Counting().registry(), mode="eager")
    assert result.reason == "model_error"
    assert [e.status for e in result.executions][:2] == ["ok", "cancelled"]
    trace = Trace.from_run(result, TraceMetadata(title="cut", origin="scripted"))
    same = replay(trace, "eager")
    assert (same.status, same.reason) == ("failed", "model_error")
    assert [e.status for e in same.executions] == [e.status for e in result.executions]
    assert same.ended_at == pytest.approx(result.ended_at)
    for mode in ("parallel", "sequential"):
        other = replay(trace, mode)
        assert other.reason == "model_error"
        assert validate_messages(other.messages) == []


# -- (3, 4) skipping and failing strategies are shown as what they are --------------------------------


@strategy("skip_rest", skips_calls=True)
async def skip_rest(batch: Batch) -> None:
    await batch.run(0)
    for pos in range(1, len(batch.calls)):
        batch.skip(pos, "reads only the first")


@strategy("crashes")
async def crashes(batch: Batch) -> None:
    raise RuntimeError("boom")


def test_compare_marks_any_skipping_strategy_not_comparable_and_a_failed_one_as_an_error() -> None:
    from pathlib import Path

    from toolcall_lab.analysis import compare, run_rows
    from toolcall_lab.trace_files import load

    folder = Path(__file__).resolve().parent.parent / "data" / "traces"
    traces = [load(folder / "three_tools_100ms.json"), load(folder / "two_tool_rounds.json")]
    result = compare(traces, ["sequential", "first_only", skip_rest, crashes])
    runs = result.runs.set_index("mode")
    for mode in ("first_only", "skip_rest"):
        rows = runs.loc[[mode]]
        skipped = rows[rows["skipped"] > 0]
        assert len(skipped) == 1  # three_tools_100ms: one batch of three (two_tool_rounds: one call each)
        assert not skipped["comparable"].any() and skipped["efficiency"].isna().all()
        assert skipped["not_comparable_why"].str.contains("skipped: the run did less work").all()
        assert rows[rows["skipped"] == 0]["comparable"].all()
    assert runs.loc[["sequential"]]["comparable"].all()
    assert (runs.loc[["sequential"]]["not_comparable_why"] == "").all()
    assert "crashes" not in runs.index  # a failed strategy has no figure ...
    errors = result.errors
    assert set(errors.loc[errors["mode"] == "crashes", "trace"]) == set(result.runs["trace"])  # ... an error
    assert errors.loc[errors["mode"] == "crashes", "error"].str.contains("boom").all()
    # what the views read (CompareView, gantt: run_rows) says the crash too
    failed = replay(traces[0], crashes)
    row = run_rows("t", failed, traces[0])[0]
    assert (row["status"], row["reason"], row["comparable"]) == ("failed", "strategy_error", False)
    assert "the strategy failed" in row["not_comparable_why"]


# -- (7; loop tester 8, 9) the CLI replays the recorded strategy and settings, and says what it wrote ------


def _saved(tmp_path: Any, mode: Any, **settings: Any) -> Any:
    from toolcall_lab.trace_files import save

    result = play(scripted(MIXED[:3], latency=0.1), Counting().registry(), mode=mode, **settings)
    return save(
        Trace.from_run(result, TraceMetadata(title="rec", origin="scripted")), tmp_path / "rec.json"
    ), result


def test_cli_replay_without_a_strategy_replays_the_recorded_one_with_its_round_trip(tmp_path, capsys) -> None:
    from toolcall_lab import cli
    from toolcall_lab.trace_files import load

    path, recorded = _saved(tmp_path, "serialized", round_trip_s=0.5)
    assert cli.main(["replay", str(path), "--out", str(tmp_path / "again.json")]) == 0
    out = capsys.readouterr().out
    assert "replayed as serialized" in out
    again = load(tmp_path / "again.json")
    assert again.outcome.wall_time_s == pytest.approx(recorded.wall_time_s)  # round_trip_s 0.5 kept
    assert again.metadata.origin == "replayed" and again.metadata.mode == "serialized"
    assert str(path) in (again.metadata.source or "") and "recorded under serialized" in again.metadata.notes
    assert again.metadata.recorded_wall_s is None
    # an explicit --round-trip overrides the recording's; another strategy is said in the trace
    assert (
        cli.main(
            [
                "replay",
                str(path),
                "--round-trip",
                "0",
                "--mode",
                "sequential",
                "--out",
                str(tmp_path / "s.json"),
            ]
        )
        == 0
    )
    seq = load(tmp_path / "s.json")
    assert seq.metadata.mode == "sequential" and all(r.mode == "sequential" for r in seq.rounds)
    assert seq.outcome.wall_time_s < recorded.wall_time_s
    assert repr(seq).startswith("<Trace 'rec' (replayed, sequential)")


def test_cli_replay_of_a_user_strategy_trace_asks_for_the_strategy(tmp_path, capsys) -> None:
    from toolcall_lab import cli

    async def mine(batch: Batch) -> None:
        await batch.run_sequential()

    path, _ = _saved(tmp_path, strategy("my_own")(mine))
    assert cli.main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "recorded under the strategy 'my_own'" in err and "--strategy module:attribute" in err
    path, _ = _saved(tmp_path, "eager[cap=2]")
    assert cli.main(["replay", str(path)]) == 0
    assert "replayed as eager[cap=2]" in capsys.readouterr().out


# -- (11) impossible chunk offsets are refused on load, naming the path --------------------------------


@pytest.mark.parametrize(
    "offsets, says",
    [
        ([-1.0, 0.2], r"chunks\[0\]\.offset_s: negative offset -1\.0"),
        ([0.2, 0.1], r"chunks\[1\]\.offset_s: 0\.1 comes before the previous chunk's 0\.2"),
        ([0.1, 50.0], r"chunks\[1\]\.offset_s: 50\.0 is after the response ended"),
        ([float("nan"), 0.1], r"chunks\[0\]\.offset_s: expected a finite number, got nan"),
        ([float("inf"), 0.1], r"chunks\[0\]\.offset_s: expected a finite number, got inf"),
    ],
)
def test_impossible_chunk_offsets_are_a_format_error_with_the_path(tmp_path, offsets, says, capsys) -> None:
    import json as json_

    from toolcall_lab import cli
    from toolcall_lab.exceptions import TraceFormatError

    model = ChunkModel(
        [(0.1, header(0, "a", "search", '{"key": "x"}')), (0.3, chunk({}, "tool_calls"))], answer()
    )
    result = play(model, Counting().registry(), mode="eager")
    doc = Trace.from_run(result, TraceMetadata(title="offsets", origin="scripted")).to_dict()
    chunks = doc["rounds"][0]["response"]["chunks"]
    for c, offset in zip(chunks, offsets, strict=False):
        c["offset_s"] = offset
    with pytest.raises(TraceFormatError, match=r"rounds\[0\]\.response\." + says):
        Trace.from_dict(doc)
    path = tmp_path / "bad.json"
    path.write_text(json_.dumps(doc))  # (NaN and inf as JSON's NaN / Infinity, as Python writes them)
    assert cli.main(["validate", str(path)]) == 2
    assert re.search(says, capsys.readouterr().err)


# -- (loop tester 2) KeyboardInterrupt / SystemExit inside eager's stream keep the partial record -------


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_an_interrupt_inside_eagers_stream_keeps_the_partial_record(exc: type, clock: str, caplog) -> None:
    import gc
    import logging

    class Interrupts(ChunkModel):
        async def stream(self, request: Any) -> Any:
            async for c in super().stream(request):
                yield c
            raise exc()

    model = Interrupts(
        [
            (0.01, header(0, "a", "search", '{"key": "x", "seconds": 0.01}')),
            (0.02, header(1, "b", "search", '{"key": "y", "seconds": 5}')),
            (0.05, header(2, "c", "search", '{"key": "z"}')),
        ],
    )
    tools = Counting()
    coro = run(model, tools.registry(), "go", mode="eager")
    caplog.set_level(logging.ERROR, logger="asyncio")
    with pytest.raises(exc) as raised:
        run_virtual(coro) if clock == "virtual" else asyncio.run(coro)
    gc.collect()
    partial = raised.value.partial_result  # type: ignore[attr-defined]
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    assert [e.status for e in partial.executions] == ["ok", "cancelled", "cancelled"]
    assert sorted(k for k, _ in tools.started) == ["x", "y", "z"]  # all three had started
    assert validate_messages(partial.messages) == []
    assert "Task was destroyed" not in caplog.text and "never retrieved" not in caplog.text


# -- (loop tester 3) a BaseException from the on_event listener propagates as itself, with the record ----


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized", "eager"])
@pytest.mark.parametrize("kind", ["action", "observation", "model_response", "final_answer", "run_finished"])
def test_an_interrupt_from_the_listener_propagates_as_itself_with_the_record(
    mode: str, kind: str, caplog
) -> None:
    import gc
    import logging

    from toolcall_lab.loop import run_sync

    caplog.set_level(logging.ERROR, logger="asyncio")

    for exc in (KeyboardInterrupt, SystemExit):

        def listener(event: Any, exc: type = exc) -> None:
            if event.kind == kind:
                raise exc()

        model = ChunkModel(
            [
                (0.1, header(0, "a", "search", '{"key": "x", "seconds": 0.1}')),
                (0.2, header(1, "b", "search", '{"key": "y", "seconds": 0.1}')),
                (0.3, chunk({}, "tool_calls")),
            ],
            answer(),
        )
        with pytest.raises(exc) as raised:
            run_virtual(run(model, Counting().registry(), "go", mode=mode, on_event=listener))
        partial = raised.value.partial_result  # type: ignore[attr-defined]
        assert partial is not None
        assert partial.status == ("completed" if kind == "run_finished" else "aborted")
        actions = [e.call.tool_call_id for e in partial.events if e.kind == "action"]
        observations = [e.execution.tool_call_id for e in partial.events if e.kind == "observation"]
        assert sorted(actions) == sorted(observations)
        assert validate_messages(partial.messages) == []
    if kind == "run_finished":  # the sync wrapper too
        with pytest.raises(KeyboardInterrupt) as raised:
            run_sync(scripted(MIXED[:1]), Counting().registry(), "go", mode=mode, on_event=_raise_at_finish)
        assert raised.value.partial_result.status == "completed"  # type: ignore[attr-defined]
    gc.collect()
    assert "Task was destroyed" not in caplog.text and "never retrieved" not in caplog.text


def _raise_at_finish(event: Any) -> None:
    if event.kind == "run_finished":
        raise KeyboardInterrupt()


# -- (loop tester 4) replays match duplicate provider ids by position ---------------------------------


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized", "eager"])
def test_a_replay_answers_a_duplicated_id_by_position(mode: str) -> None:
    calls = [
        ("search", {"key": "a", "seconds": 0.3}, "dup"),
        ("search", {"key": "b", "seconds": 0.05}, "dup"),
        ("read", {"key": "c", "seconds": 0.1}, "dup2"),
        ("read", {"key": "d", "seconds": 0.2}, "dup2"),
    ]

    def approve(call: Any) -> Any:
        return "not this one" if call.args.get("key") == "b" else True

    def withhold(call: Any, execution: Any) -> Any:
        return "secret" if call.args.get("key") == "c" else True

    hooks = Hooks(approve_call=approve, approve_result=withhold)
    recorded = play(scripted(calls), Counting().registry(), mode=mode, hooks=hooks)
    shape = [
        (e.tool_call_id, e.index, e.status, e.result, round(e.duration_s, 6)) for e in recorded.executions
    ]
    assert [s[2] for s in shape] == ["ok", "rejected", "withheld", "ok"]
    trace = Trace.from_run(recorded, TraceMetadata(title="dups", origin="scripted"))
    for again in (mode, "sequential", "parallel"):
        replayed = replay(trace, again)
        assert [
            (e.tool_call_id, e.index, e.status, e.result, round(e.duration_s, 6)) for e in replayed.executions
        ] == shape

    @strategy("reversed_order")
    async def reversed_order(batch: Batch) -> None:
        await batch.run_sequential(reversed(range(len(batch.calls))))

    replayed = replay(trace, reversed_order, check="ids")
    assert [(e.result, round(e.duration_s, 6)) for e in replayed.executions] == [(s[3], s[4]) for s in shape]


# -- (loop tester 10) bad recorded settings: validate says so, bench names the trace and compares the rest --


def test_bad_recorded_settings_are_named_by_validate_and_bench_compares_the_rest(tmp_path, capsys) -> None:
    import json as json_

    from tests.conftest import DATA
    from toolcall_lab import cli
    from toolcall_lab.exceptions import TraceFormatError

    good = DATA / "traces" / "three_tools_100ms.json"
    doc = json_.loads(good.read_text())
    bad = {
        "max_rounds": 0,
        "concurrency": 0,
        "error_policy": "bogus",
        "timeout_s": -1,
        "round_trip_s": "0.5",
        "dedupe": "yes",
    }
    paths = []
    for key, value in bad.items():
        d = json_.loads(json_.dumps(doc))
        d["metadata"]["settings"][key] = value
        path = tmp_path / f"bad_{key}.json"
        path.write_text(json_.dumps(d))
        paths.append(path)
        with pytest.raises(TraceFormatError, match=rf"metadata\.settings: {key}="):
            replay(Trace.from_dict(d), "sequential")
    assert cli.main(["validate", *map(str, paths)]) == 2
    err = capsys.readouterr().err
    for key, path in zip(bad, paths, strict=True):
        assert f"{path}: " in err and f"metadata.settings: {key}=" in err
    assert cli.main(["bench", str(tmp_path), str(good), "--quiet", "--modes", "sequential,parallel"]) == 1
    captured = capsys.readouterr()
    assert "parallel" in captured.out and "Empty DataFrame" not in captured.out  # the good trace compared
    for path in paths:
        assert f"not compared: {path}" in captured.err
    assert "[nan]" not in captured.err


# -- (loop tester 12) a failed recording: record says so and exits 1; its replay keeps the time ----------


def test_a_failed_recording_is_reported_and_replays_with_its_time(tmp_path, capsys, monkeypatch) -> None:
    from toolcall_lab import cli
    from toolcall_lab.trace_files import load

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (tmp_path / "few_tools.py").write_text(
        'def now() -> str:\n    """The time."""\n    return "12:00"\n\ntools = [now]\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "down.json"
    code = cli.main(
        [
            "record",
            "--model",
            "m",
            "--prompt",
            "hi",
            "--tools",
            "few_tools:tools",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--out",
            str(out),
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "the run ended failed/model_error" in err and "Connection" in err
    trace = load(out)
    assert (trace.outcome.status, trace.outcome.reason) == ("failed", "model_error")
    again = replay(trace)
    assert again.reason == "model_error"
    assert again.wall_time_s == pytest.approx(trace.outcome.wall_time_s)  # not 0: the call took that long
    assert again.wall_time_s > 0


def test_a_model_error_after_rounds_replays_at_its_recorded_time() -> None:
    class FailsSecond(ChunkModel):
        async def stream(self, request: Any) -> Any:
            if self.served == 1:
                await asyncio.sleep(0.7)
                raise ConnectionError("reset")
            async for c in super().stream(request):
                yield c

    model = FailsSecond(
        [(0.1, header(0, "a", "search", '{"key": "x", "seconds": 0.2}')), (0.2, chunk({}, "tool_calls"))]
    )
    recorded = play(model, Counting().registry(), mode="parallel")
    assert recorded.reason == "model_error" and recorded.wall_time_s == pytest.approx(1.1)
    trace = Trace.from_run(recorded, TraceMetadata(title="fails", origin="scripted"))
    for mode, wall in (
        ("parallel", 1.1),
        ("sequential", 1.1),
        ("eager", 1.0),
    ):  # (eager: the tool from 0.1 s)
        assert replay(trace, mode).wall_time_s == pytest.approx(wall)


# -- (loop tester 7) Ctrl-C on the CLI: one line, what was done so far written, exit 130 -----------------


def test_ctrl_c_during_bench_writes_what_was_compared_and_exits_130(tmp_path, capsys, monkeypatch) -> None:
    from tests.conftest import DATA
    from toolcall_lab import analysis, cli

    real = analysis.trace_rows
    seen = []

    def interrupted_at_the_third(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[0])
        if len(seen) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(analysis, "trace_rows", interrupted_at_the_third)
    out = tmp_path / "b.csv"
    code = cli.main(
        ["bench", str(DATA / "traces"), "--quiet", "--modes", "sequential,parallel", "--out", str(out)]
    )
    assert code == 130
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.err.strip().splitlines()[-1].startswith("toolcall-lab bench: interrupted (Ctrl-C)")
    assert "the 2 of" in captured.out and "(partial: interrupted)" in captured.out
    import pandas as pd

    assert pd.read_csv(out)["trace"].nunique() == 2


def test_ctrl_c_during_replay_is_one_line_and_exit_130(tmp_path, capsys, monkeypatch) -> None:
    import importlib

    from tests.conftest import DATA
    from toolcall_lab import cli

    replay_module = importlib.import_module("toolcall_lab.replay")

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(replay_module, "replay", interrupted)
    assert cli.main(["replay", str(DATA / "traces" / "three_tools_100ms.json")]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "toolcall-lab replay: interrupted (Ctrl-C)"


# -- (8) eager dispatches each arrival at once; what that dispatch raises still stops the run ---------


def test_eager_dispatches_on_arrival_and_a_listener_stopping_it_there_keeps_the_record() -> None:
    def stop_at_second_action(event: Any) -> None:
        if event.kind == "action" and event.call.tool_call_id == "b":
            raise KeyboardInterrupt

    model = ChunkModel(
        [
            (0.1, header(0, "a", "search", '{"key": "x", "seconds": 0.1}')),
            (0.2, header(1, "b", "search", '{"key": "y", "seconds": 0.1}')),
            (0.3, header(2, "c", "search", '{"key": "z", "seconds": 0.1}')),
            (0.4, chunk({}, "tool_calls")),
        ],
        answer(),
    )
    tools = Counting()
    with pytest.raises(KeyboardInterrupt) as raised:
        run_virtual(run(model, tools.registry(), "go", mode="eager", on_event=stop_at_second_action))
    partial = raised.value.partial_result  # type: ignore[attr-defined]
    assert [k for k, _ in tools.started] == ["x"]  # b's dispatch stopped the run before b ran
    assert [e.status for e in partial.executions][:2] == ["ok", "cancelled"]
    actions = [e.call.tool_call_id for e in partial.events if e.kind == "action"]
    observations = [e.execution.tool_call_id for e in partial.events if e.kind == "observation"]
    assert sorted(actions) == sorted(observations) == ["a", "b"]
    # and on an ordinary run each call starts at its own arrival time
    result = play(ChunkModel(*model.responses), Counting().registry(), mode="eager")
    assert [round(e.started_at, 6) for e in result.executions] == [0.1, 0.2, 0.3]


# -- (6) the stated tool-duration model applies to calls whose duration is not recorded (BFCL) -----------


def test_as_streamed_tool_model_applies_to_not_recorded_calls() -> None:
    from toolcall_lab.generation import GenerationSpeed, as_streamed

    result = play(scripted(MIXED[:3]), Counting().registry())
    doc = Trace.from_run(result, TraceMetadata(title="bfcl-like", origin="imported")).to_dict()
    for ex in doc["rounds"][0]["tool_executions"]:  # what the BFCL importer makes: no tool ran
        ex["status"], ex["ended_at"] = "not_recorded", ex["started_at"] + 0.1
        ex["duration_s"] = 0.1
    questions = Trace.from_dict(doc)
    speed = GenerationSpeed(tokens_per_s=50.0, ttft_s=0.5)
    constant = as_streamed(questions, speed, tool_s=1.0)
    assert [e.duration_s for e in constant.rounds[0].executions] == [1.0, 1.0, 1.0]
    drawn = as_streamed(questions, speed, tool_s=[2.0, 3.0], durations_from="elsewhere")
    assert {e.duration_s for e in drawn.rounds[0].executions} <= {2.0, 3.0}
    assert replay(constant, "parallel").rounds[0].executions[0].duration_s == 1.0  # replay uses it


# -- (loop tester 11) replays that diverge say so: tools offered, tools the trace does not list ----------


def test_a_replay_that_sends_a_request_without_tools_the_recording_had_diverges() -> None:
    from toolcall_lab.tools import ToolRegistry

    reg = ToolRegistry()

    async def lookup(key: str) -> str:
        """Look up."""
        if key == "bad":
            raise ValueError("no such key")
        return f"found {key}"

    reg.register(lookup)
    model = ScriptedModel(
        [
            ScriptedResponse(
                content=None, tool_calls=(("lookup", {"key": "bad"}), ("lookup", {"key": "ok"}))
            ),
            ScriptedResponse(content="Let me check c.", tool_calls=(("lookup", {"key": "c"}),)),
            "done",
        ]
    )
    recorded = play(model, reg)  # error_policy continue: round 1 offers tools again
    trace = Trace.from_run(recorded, TraceMetadata(title="policy", origin="scripted"))
    with pytest.raises(ReplayDivergenceError, match="this request offers no tools, the recorded one did"):
        replay(trace, "parallel", error_policy="fail_fast")
    assert replay(trace, "parallel").status == "completed"


def test_a_trace_whose_tools_do_not_list_a_tool_it_ran_is_reported(tmp_path, capsys) -> None:
    import json as json_

    from toolcall_lab import cli

    result = play(scripted(MIXED[:3]), Counting().registry())
    doc = Trace.from_run(result, TraceMetadata(title="tools", origin="scripted")).to_dict()
    doc["tools"] = [t for t in doc["tools"] if t["function"]["name"] != "write"]
    with pytest.raises(
        ReplayDivergenceError, match=r"ran tools its trace does not offer \(round 0 call \S+ \(write\)\)"
    ):
        replay(Trace.from_dict(doc), "parallel")
    path = tmp_path / "t.json"
    path.write_text(json_.dumps(doc))
    assert cli.main(["validate", "--strict", str(path)]) == 1
    assert "tool not offered: round 0 call" in capsys.readouterr().out


# -- (loop tester 5) an abort then the deadline: a tool still running is waited for, not abandoned --------


@pytest.mark.parametrize("mode", ["parallel", "parallel[cap=2]", "eager"])
def test_an_abort_then_the_deadline_waits_for_a_tool_that_caught_the_cancellation(mode: str, caplog) -> None:
    import gc
    import logging

    from toolcall_lab.loop import AbortHandle
    from toolcall_lab.tools import ToolRegistry

    log: list[tuple[str, float]] = []
    reg = ToolRegistry()

    async def stubborn(k: str) -> str:
        """Works on after it is cancelled."""
        try:
            await asyncio.sleep(0.06)
        except asyncio.CancelledError:
            log.append(("caught", asyncio.get_running_loop().time()))
            await asyncio.sleep(0.07)
            log.append(("returned", asyncio.get_running_loop().time()))
            return "stubborn"
        return "done"

    reg.register(stubborn)
    abort = AbortHandle()

    async def main() -> RunResult:
        asyncio.get_running_loop().call_later(0.04, abort.abort, "stop")
        return await run(
            scripted([("stubborn", {"k": "a"})]), reg, "go", mode=mode, abort=abort, timeout_s=0.05
        )

    caplog.set_level(logging.ERROR, logger="asyncio")
    result = run_virtual(main())
    gc.collect()
    assert [what for what, _ in log] == ["caught", "returned"]
    ex = result.executions[0]
    assert ex.status == "cancelled" and ex.ended_at == pytest.approx(0.11)
    assert "returned at 0.110 s" in ex.result and "unknown" not in ex.result  # (known, and discarded)
    assert result.ended_at == pytest.approx(0.11)
    assert "Task was destroyed" not in caplog.text


# -- (loop tester 13) a tool that reports a shorter duration: the record says when it returned -----------


def test_a_reported_shorter_duration_keeps_when_the_tool_returned_and_replays_as_recorded(tmp_path) -> None:
    from toolcall_lab.records import Timing
    from toolcall_lab.tools import ToolOutcome, ToolRegistry
    from toolcall_lab.trace_files import load, save

    reg = ToolRegistry()

    async def f(x: int) -> Any:
        """Takes 0.1 s, reports 0.01 s (e.g. the server's own figure)."""
        await asyncio.sleep(0.1)
        return ToolOutcome(text="t", duration_s=0.01, timing=Timing(source="reported", note="server says"))

    reg.register(f)
    recorded = play(scripted([("f", {"x": 1}), ("f", {"x": 2})]), reg, mode="sequential")
    a, b = recorded.executions
    assert (a.started_at, a.ended_at, a.returned_at) == (0.0, 0.01, pytest.approx(0.1))
    assert b.started_at == pytest.approx(0.1)  # explained: a held its place until it returned
    assert recorded.wall_time_s == pytest.approx(0.2)
    path = save(
        Trace.from_run(recorded, TraceMetadata(title="reported", origin="scripted")), tmp_path / "r.json"
    )
    trace = load(path)
    assert trace.rounds[0].executions[0].returned_at == pytest.approx(0.1)
    same = replay(trace, "sequential")
    assert same.wall_time_s == pytest.approx(0.2)
    assert [(e.started_at, e.ended_at) for e in same.executions] == [
        (e.started_at, e.ended_at) for e in recorded.executions
    ]
    assert replay(trace, "parallel").wall_time_s == pytest.approx(0.1)


def test_a_replay_of_a_run_whose_hook_edited_the_messages_says_what_to_do() -> None:
    def edit(messages: list[dict[str, Any]]) -> None:
        messages.append({"role": "user", "content": "(note added by the hook)"})

    recorded = play(scripted(MIXED[:1]), Counting().registry(), hooks=Hooks(before_model_call=edit))
    trace = Trace.from_run(recorded, TraceMetadata(title="edited", origin="scripted"))
    with pytest.raises(
        ReplayDivergenceError, match=r"before_model_call hook edited the messages.*check='ids'"
    ):
        replay(trace, "parallel")
    assert replay(trace, "parallel", check="ids").status == "completed"


def test_a_failing_listener_is_recorded_with_the_call_it_was_told_about() -> None:
    def listener(event: Any) -> None:
        if event.kind in ("action", "observation"):
            raise ValueError(f"bad {event.kind}")

    result = play(scripted(MIXED[:2]), Counting().registry(), on_event=listener)
    failures = [(f.hook, f.tool_call_id, f.position) for f in result.hook_failures]
    ids = [c.tool_call_id for c in result.rounds[0].tool_calls]
    assert sorted(failures) == sorted([("on_event", i, p) for p, i in enumerate(ids)] * 2)


def test_validate_warns_when_an_execution_is_not_its_calls(tmp_path, capsys) -> None:
    import json as json_

    from toolcall_lab import cli

    result = play(scripted(MIXED[:2]), Counting().registry())
    doc = Trace.from_run(result, TraceMetadata(title="swapped", origin="scripted")).to_dict()
    ex = doc["rounds"][0]["tool_executions"]
    ex[0]["index"], ex[1]["index"] = 1, 0
    path = tmp_path / "t.json"
    path.write_text(json_.dumps(doc))
    assert cli.main(["validate", "--strict", str(path)]) == 1
    out = capsys.readouterr().out
    assert "execution differs from its call: rounds[0].tool_executions[0] is search (index 1)" in out


def test_compare_view_and_gantt_show_a_failed_or_skipping_strategy_as_such() -> None:
    import html

    from toolcall_lab.notebook.widgets import CompareView
    from toolcall_lab.plotting import gantt
    from toolcall_lab.scenarios import SCENARIOS

    trace = SCENARIOS["weather_news_stock"].record()
    view = CompareView(trace, ["sequential", "parallel", crashes, skip_rest])
    page = html.unescape(view.static_html())
    assert "not comparable (the strategy failed (strategy_error)" in page
    assert "not comparable (skipped 2 of 3 calls)" in page
    fig = gantt(trace, ["parallel", crashes], show=False)
    titles = [" ".join(ax.get_title(loc="left").split()) for ax in fig.axes]  # (long titles wrap)
    assert any(t.startswith("crashes") and "the strategy failed" in t for t in titles), titles
    assert not any(t.startswith("parallel") and "not comparable" in t for t in titles)


def test_a_limit_for_a_tool_the_run_does_not_have_is_noted_once() -> None:
    result = play(scripted(MIXED[:2]), Counting().registry(), mode="parallel[typo=2]")
    notes = [n for r in result.rounds for n in r.strategy_notes]
    assert notes == [
        "parallel[typo=2]: per-tool limit(s) for 'typo', which no tool of this run is named: they limit nothing"
    ]
    assert not [
        n
        for r in play(scripted(MIXED[:2]), Counting().registry(), mode="parallel[search=2]").rounds
        for n in r.strategy_notes
    ]

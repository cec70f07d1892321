"""Strategies, sixth pass (issue 14): a fresh-eyes tester's eleven findings (t14), each fixed as a class.

An importer's placeholder round never becomes a timed model turn; a strategy's name always says what it
runs (every way a strategy is made, and a run-level cap); `results_in_model_order` checks what was
answered; the eager bound follows eager's own decisions and a divergence caused by a strategy's
decision says so; bench and plots say what eager's figure rests on and name what they leave out;
built-in ``parallel`` is ``batch.run_parallel()``, events and all; and the small items.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.test_strategies import ChunkModel, answer, args, chunk, header
from toolcall_lab import UsageError, load
from toolcall_lab.analysis import compare, eager_bound_s, run_rows
from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import ReplayDivergenceError
from toolcall_lab.generation import GenerationSpeed, as_streamed
from toolcall_lab.importers import import_bfcl
from toolcall_lab.loop import run
from toolcall_lab.replay import replay, replayed_trace
from toolcall_lab.runs import RunResult
from toolcall_lab.strategies import Batch, Eager, Parallel, Sequential, Strategy, resolve, strategy
from toolcall_lab.tools import ToolRegistry
from toolcall_lab.trace import Trace, TraceMetadata

TRACES = REPO / "data" / "traces"
SPEED = GenerationSpeed(tokens_per_s=50.0, ttft_s=0.5, source="stated for the test")


def tokens(text: str) -> int:
    """A stand-in tokenizer (no vocabulary to load): one token per four characters."""
    return max(1, len(text) // 4)


def timed_tools(seconds: dict[str, float]) -> ToolRegistry:
    """Tools named by `seconds`, each taking `k` and sleeping that long on the run's clock."""
    reg = ToolRegistry()
    for name, took in seconds.items():

        async def tool(k: int, took: float = took, name: str = name) -> str:
            await asyncio.sleep(took)
            return f"{name}{k}"

        tool.__name__ = name
        tool.__doc__ = f"The {name} tool."
        reg.register(tool)
    return reg


def play(model: Any, tools: ToolRegistry, **settings: Any) -> RunResult:
    return run_virtual(run(model, tools, "go", **settings))


def record(result: RunResult, title: str = "t") -> Trace:
    return Trace.from_run(result, TraceMetadata(title=title, origin=result.origin))


# -- 1: an importer's placeholder round is a marker, never a timed model turn ---------------------------


def bfcl_question(tmp_path: Path) -> Trace:
    """One BFCL-shaped parallel question and its answer (bytes written here), imported as BFCL is:
    one batch of two calls, then the importer's placeholder closing round."""
    question = {
        "id": "parallel_0",
        "question": [[{"role": "user", "content": "What is the weather in Paris and in Rome?"}]],
        "function": [
            {
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": {
                    "type": "dict",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            }
        ],
    }
    answer_line = {
        "id": "parallel_0",
        "ground_truth": [{"get_weather": {"city": ["Paris"]}}, {"get_weather": {"city": ["Rome"]}}],
    }
    (tmp_path / "BFCL_v4_parallel.jsonl").write_text(json.dumps(question) + "\n")
    (tmp_path / "possible_answer_BFCL_v4_parallel.jsonl").write_text(json.dumps(answer_line) + "\n")
    return import_bfcl(tmp_path / "BFCL_v4_parallel.jsonl").traces[0]


def test_as_streamed_keeps_an_importers_placeholder_round_a_marker_not_a_timed_turn(tmp_path) -> None:
    question = bfcl_question(tmp_path)
    marker = question.rounds[-1].placeholder
    assert marker and question.rounds[-1].model_call.latency_s == 0.0
    streamed = as_streamed(question, SPEED, tool_s=1.0, count=tokens)
    last = streamed.rounds[-1]
    assert last.placeholder == marker  # (before: None, the marker text tokenised as a generated answer)
    assert last.model_call.latency_s == 0.0
    assert (
        "kept as markers" in streamed.metadata.notes
        and "no final turn is invented" in streamed.metadata.notes
    )
    turn = streamed.rounds[0].model_call.latency_s
    for mode in ("sequential", "parallel", "eager"):
        again = replay(streamed, mode)
        assert (again.status, again.reason) == (replay(question, mode).status, replay(question, mode).reason)
        assert again.final_answer is None  # (before: the marker text, as a final answer)
    runs = compare([streamed], ["sequential", "parallel"]).runs.set_index("mode")
    assert runs.loc["parallel", "wall_time_s"] == pytest.approx(turn + 1.0)  # one turn and the tools
    assert runs.loc["sequential", "wall_time_s"] == pytest.approx(turn + 2.0)
    assert runs.loc["parallel", "one_call_per_response_s"] == pytest.approx(2 * turn + 2.0)


# -- 2/3: a strategy's name says what it runs -------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "runs_as"),
    [
        (lambda: Eager(name="parallel"), "eager"),
        (lambda: Parallel(name="eager"), "parallel"),
        (lambda: Parallel(name="sequential", concurrency=1), "parallel[cap=1]"),
        (lambda: Parallel(name="parallel", concurrency=2), "parallel[cap=2]"),
        (lambda: Eager(tool_limits={"A": 1}, name="eager[cap=4]"), "eager[A=1]"),
        (lambda: Eager(name="First Only"), "eager"),
    ],
)
def test_a_builtin_class_refuses_a_name_that_does_not_say_what_it_runs(make: Any, runs_as: str) -> None:
    with pytest.raises(
        UsageError, match=rf"does not say what this strategy runs \(it runs '{re.escape(runs_as)}'\)"
    ):
        make()


class QuietEager(Eager):
    """A subclass that changes nothing of how eager runs: it is eager, under eager's name."""


class NamedParallel(Eager):
    name = "parallel"


class OwnRun(Parallel):
    async def run(self, batch: Batch) -> None:
        await batch.run_sequential()


def test_every_way_of_making_a_strategy_follows_the_one_name_rule() -> None:
    assert Eager(name="eager").name == "eager"
    assert Parallel(name="parallel[cap=2]", concurrency=2).name == "parallel[cap=2]"
    assert Eager(name="fast", tool_limits={"A": 1}).name == "fast"  # a name of its own: fine
    assert QuietEager().name == "eager" and resolve(QuietEager()).name == "eager"  # (before: refused)
    assert replay(load(TRACES / "weather_news_stock.json"), QuietEager()).mode == "eager"
    with pytest.raises(UsageError, match="does not say what this strategy runs"):
        NamedParallel()
    with pytest.raises(UsageError, match="'parallel' is the built-in strategy 'parallel''s name"):
        OwnRun()  # (its own run, no name of its own: it is not parallel)
    renamed = Eager()
    renamed.name = "parallel"  # renamed after it was made: refused where it is used
    with pytest.raises(UsageError, match="does not say what this strategy runs"):
        replay(load(TRACES / "weather_news_stock.json"), renamed)


def test_a_run_level_cap_shows_in_the_names_and_every_row_records_its_cap() -> None:
    trace = load(TRACES / "weather_news_stock.json")
    own = Parallel(name="mine", concurrency=3)
    runs = compare([trace], ["sequential", "parallel", "eager", own], concurrency=1).runs.set_index("mode")
    assert list(runs.index) == ["sequential", "parallel[cap=1]", "eager[cap=1]", "mine"]  # (before: plain)
    assert runs.loc["parallel[cap=1]", "wall_time_s"] == pytest.approx(runs.loc["sequential", "wall_time_s"])
    assert runs.loc["parallel[cap=1]", "cap"] == 1 and runs.loc["mine", "cap"] == 3
    assert runs.loc["eager[cap=1]", "streams"] and not runs.loc["mine", "streams"]
    limited = compare([trace], [Eager(name="limited", tool_limits={"get_weather": 1})]).runs
    assert limited.loc[0, "tool_limits"] == "get_weather=1" and limited.loc[0, "cap"] is None
    with pytest.raises(UsageError, match=r"under concurrency=1, 'parallel' runs as 'parallel\[cap=1\]'"):
        compare([trace], ["parallel", "parallel[cap=1]"], concurrency=1)


def test_a_recorded_cap_is_in_the_cap_column(tmp_path) -> None:
    result = play(
        ChunkModel([(0.1, header(0, "a", "A", '{"k": 1}')), (0.2, chunk({}, "tool_calls"))], answer()),
        timed_tools({"A": 0.5}),
        mode="parallel",
        concurrency=2,
    )
    runs = compare([record(result)], ["parallel"]).runs
    assert (
        runs.loc[0, "mode"] == "parallel" and runs.loc[0, "cap"] == 2
    )  # (the name cannot say it: the column does)


def test_bench_with_a_run_level_cap_names_the_capped_rows_and_writes_the_cap(tmp_path, capsys) -> None:
    import pandas as pd

    from toolcall_lab import cli

    out = tmp_path / "b.csv"
    path = str(TRACES / "weather_news_stock.json")
    assert (
        cli.main(
            ["bench", path, "--modes", "parallel,eager", "--concurrency", "1", "--quiet", "--out", str(out)]
        )
        == 0
    )
    table = pd.read_csv(out)
    assert list(table["mode"]) == ["parallel[cap=1]", "eager[cap=1]"] and list(table["cap"]) == [1, 1]
    code = cli.main(["bench", path, "--modes", "parallel,parallel[cap=1]", "--concurrency", "1", "--quiet"])
    assert code == 2 and "'parallel' runs as 'parallel[cap=1]'" in capsys.readouterr().err


# -- 4: results in model order, whatever was skipped -----------------------------------------------------


@strategy("skip_first", skips_calls=True)
async def skip_first(batch: Batch) -> None:
    batch.skip(0, "testing")
    await batch.run_parallel()


def test_results_in_model_order_checks_what_was_answered_whatever_was_skipped() -> None:
    trace = load(TRACES / "weather_news_stock.json")
    runs = compare([trace], ["parallel", "first_only", skip_first]).runs.set_index("mode")
    assert runs["results_in_model_order"].all()  # (before: False for skip_first, in model order)
    result = replay(trace, "parallel")
    summary = run_rows("t", result, trace)[0]
    assert summary["results_in_model_order"]
    tools = [k for k, m in enumerate(result.messages) if m.get("role") == "tool"]
    messages = list(result.messages)
    messages[tools[0]], messages[tools[1]] = messages[tools[1]], messages[tools[0]]
    assert not run_rows("t", replace(result, messages=messages), trace)[0]["results_in_model_order"]


# -- 5: the eager bound follows eager's decisions; a strategy's decision is not a hook's edit -------------


def equal_calls_completing_out_of_order() -> ChunkModel:
    """Call 1 completes (0.2 s) before an identical call 0 (0.5 s): eager runs call 1, and call 0 is
    its duplicate; a strategy that waits for the stream runs call 0 and call 1 is the duplicate."""
    return ChunkModel(
        [
            (0.0, chunk({"role": "assistant", "content": ""})),
            (0.1, header(0, "a0", "A", '{"k": ')),
            (0.2, header(1, "a1", "A", '{"k": 1}')),
            (0.5, args(0, "1}")),
            (1.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )


def test_the_eager_bound_is_a_lower_bound_for_eager_given_its_own_decisions() -> None:
    parallel = play(equal_calls_completing_out_of_order(), timed_tools({"A": 1.0}), mode="parallel")
    eager = play(equal_calls_completing_out_of_order(), timed_tools({"A": 1.0}), mode="eager")
    assert [e.status for e in parallel.executions] == ["ok", "duplicate"]
    assert [e.status for e in eager.executions] == ["duplicate", "ok"]
    for recorded in (record(parallel), record(eager)):
        assert eager_bound_s(recorded) <= eager.wall_time_s + 1e-9  # (before: 1.7 s from parallel's, > 1.4)
        assert eager_bound_s(recorded) == pytest.approx(1.2 + 0.1)


def test_a_divergence_from_eagers_own_decision_says_so_not_the_hook_hint() -> None:
    parallel = record(play(equal_calls_completing_out_of_order(), timed_tools({"A": 1.0}), mode="parallel"))
    with pytest.raises(ReplayDivergenceError) as caught:
        replay(parallel, "eager")
    text = str(caught.value)
    assert "which of two equal calls runs is the strategy's own decision" in text
    assert "before_model_call hook" not in text
    changed = ChunkModel(
        [
            (0.1, header(0, "a0", "A", '{"k": 1}')),
            (0.3, args(0, '{"k": 5}')),  # text after the object: the final arguments are invalid
            (0.4, header(1, "b1", "B", '{"k": 2}')),
            (1.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )
    eager = record(play(changed, timed_tools({"A": 1.0, "B": 0.2}), mode="eager"))
    for mode in ("parallel", "sequential"):
        with pytest.raises(ReplayDivergenceError) as caught:
            replay(eager, mode)
        assert "started call a0 while the model streamed" in str(caught.value)
        assert "before_model_call hook" not in str(caught.value)


# -- 6: bench and plots say what eager's figure rests on and name what they leave out --------------------


@strategy("crashes")
async def crashes(batch: Batch) -> None:
    raise RuntimeError("my bug")


def whole_body_trace() -> Trace:
    """A recording whose response came as one whole body (no chunk timing): eager runs as parallel."""
    doc = json.loads((TRACES / "one_tool_round.json").read_text())
    response = doc["rounds"][0]["response"]
    response["chunk_timing"] = "none"
    doc["metadata"]["title"] = "whole body"
    return Trace.from_dict(doc)


def test_bench_says_what_eagers_figure_rests_on_and_writes_the_notes(tmp_path, capsys) -> None:
    import pandas as pd

    from toolcall_lab import cli
    from toolcall_lab.trace_files import save

    whole = save(whole_body_trace(), tmp_path / "whole.json")
    out = tmp_path / "b.csv"
    spread = str(TRACES / "weather_news_stock.json")
    assert (
        cli.main(["bench", spread, str(whole), "--modes", "parallel,eager", "--quiet", "--out", str(out)])
        == 0
    )
    said = capsys.readouterr().out
    assert "eager: what its overlap with the stream rests on, of its 2 run(s)" in said
    assert "1 on offsets spread evenly by a script or an importer (modelled, not measured)" in said
    assert "1 on no chunk timing: it ran as parallel there" in said
    rounds = pd.read_csv(tmp_path / "b_rounds.csv").fillna(
        ""
    )  # (before: no rounds table, the notes in no file)
    notes = rounds[rounds["mode"] == "eager"]["strategy_notes"]
    assert (
        notes.str.contains("eager ran as parallel").any()
        and notes.str.contains("modelled chunk timing").any()
    )


def test_corpus_plots_name_a_strategy_that_failed_everywhere_and_what_eager_rests_on() -> None:
    from toolcall_lab.plotting import speedup_distribution, time_breakdown

    table = compare(
        [load(TRACES / "weather_news_stock.json"), whole_body_trace()], ["sequential", "eager", crashes]
    )
    for draw in (speedup_distribution, time_breakdown):
        title = " ".join(draw(table, show=False).axes[0].get_title().split())
        assert "left out: crashes (failed on every trace" in title  # (before: silently left out)
        assert (
            "eager, of 2 runs: overlap modelled on 1 (offsets spread or estimated); ran as parallel on 1"
            in title
        )


def test_gantt_panel_titles_wrap_instead_of_running_off_the_figure() -> None:
    from toolcall_lab.plotting import WRAP_CHARS, gantt

    fig = gantt(load(TRACES / "weather_news_stock.json"), ["parallel", crashes], show=False)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert any("\n" in t for t in titles) and all(
        len(line) <= WRAP_CHARS for t in titles for line in t.split("\n")
    )


# -- 7: built-in parallel is batch.run_parallel(), events and all ----------------------------------------


def finishing_out_of_order() -> ChunkModel:
    return ChunkModel(
        [
            (0.1, header(0, "a", "A", '{"k": 1}')),
            (0.2, header(1, "b", "B", '{"k": 2}')),
            (0.3, header(2, "c", "C", '{"k": 3}')),
            (1.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )


@pytest.mark.parametrize("cap", [None, 2])
def test_builtin_parallel_emits_each_observation_when_its_call_finishes_as_run_parallel_does(
    cap: Any,
) -> None:
    durations = {"A": 0.5, "B": 0.2, "C": 0.1}
    built_in = Parallel(concurrency=cap)

    class Mine(Strategy):  # the public interface, under the same cap
        name = "mine"
        concurrency = cap

        async def run(self, batch: Batch) -> None:
            await batch.run_parallel()

    mine = Mine()
    seen = {}
    for s in (built_in, mine):
        result = play(finishing_out_of_order(), timed_tools(durations), mode=s)
        seen[s.name] = [
            (e.kind, round(e.at, 6), getattr(e, "execution", None) and e.execution.name)
            for e in result.events
            if e.kind in ("action", "observation")
        ]
        assert [m["tool_call_id"] for m in result.messages if m.get("role") == "tool"] == ["a", "b", "c"]
    assert seen[built_in.name] == seen["mine"]
    observed = [(at, name) for kind, at, name in seen[built_in.name] if kind == "observation"]
    if cap is None:  # (before: all three at 1.5 s, in batch order)
        assert observed == [(1.1, "C"), (1.2, "B"), (1.5, "A")]
    assert observed == sorted(observed)


def test_builtin_parallel_runs_on_the_public_batch_interface() -> None:
    import inspect

    from toolcall_lab.strategies import parallel

    source = inspect.getsource(parallel.Parallel.run)
    assert "batch.run_parallel()" in source and "batch._" not in source


# -- 8: errors from replay carry no "no running event loop" context --------------------------------------


@pytest.mark.parametrize("virtual", [True, False])
def test_an_error_from_replay_carries_no_unrelated_context(virtual: bool) -> None:
    with pytest.raises(UsageError) as caught:
        replay(load(TRACES / "one_tool_round.json"), "nonsense", virtual=virtual)
    assert caught.value.__context__ is None  # (before: RuntimeError: no running event loop)


# -- 10: a finding about a call eager ran says it ran --------------------------------------------------


def test_the_parsers_finding_about_a_call_eager_already_ran_says_it_ran() -> None:
    model = ChunkModel(
        [(0.1, header(0, "a0", "A", '{"k": 1}')), (0.3, args(0, '{"k": 5}')), (1.0, chunk({}, "tool_calls"))],
        answer(),
    )
    rnd = play(model, timed_tools({"A": 1.0}), mode="eager").rounds[0]
    assert rnd.executions[0].status == "ok"
    invalid = [f for f in rnd.findings if f.kind == "invalid_arguments"]
    assert len(invalid) == 1 and "will not be executed" not in invalid[0].message  # (before: it said so)
    assert "ran as started (see changed_after_start)" in invalid[0].message
    model = ChunkModel(  # the same stream under parallel: the call is not executed, and the finding says so
        [(0.1, header(0, "a0", "A", '{"k": 1}')), (0.3, args(0, '{"k": 5}')), (1.0, chunk({}, "tool_calls"))],
        answer(),
    )
    rnd = play(model, timed_tools({"A": 1.0}), mode="parallel").rounds[0]
    assert "will not be executed" in next(f for f in rnd.findings if f.kind == "invalid_arguments").message


# -- 11: small items ---------------------------------------------------------------------------------------


@strategy("raises_mid_stream", streams=True)
async def raises_mid_stream(batch: Batch) -> None:
    async for pos in batch.arrivals():
        batch.start(pos)
        if pos == 1:
            raise ValueError("bad at 1")
    await batch.join()


def three_calls_streaming() -> ChunkModel:
    return ChunkModel(
        [
            (0.1, header(0, "a", "A", '{"k": 1}')),
            (0.6, header(1, "b", "B", '{"k": 2}')),
            (0.7, header(2, "c", "C", '{"k": 3}')),
            (1.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )


def test_a_streaming_strategy_that_fails_mid_stream_stops_the_stream_then() -> None:
    result = play(
        three_calls_streaming(), timed_tools({"A": 1.0, "B": 0.2, "C": 0.1}), mode=raises_mid_stream
    )
    assert (result.status, result.reason) == ("failed", "strategy_error")
    rnd = result.rounds[0]
    assert rnd.model_call.ended_at == pytest.approx(0.6)  # (before: read on to 1.0)
    assert [round(e.ended_at, 6) for e in rnd.executions] == [0.6, 0.6]  # (before: call b cancelled at 1.0)
    assert all(e.status == "cancelled" for e in rnd.executions)
    assert "the strategy 'raises_mid_stream' failed" in rnd.strategy_notes[0]


@strategy("leaves_started")
async def leaves_started(batch: Batch) -> None:
    for pos in range(len(batch.calls)):
        batch.start(pos)


def test_calls_dispatched_and_never_started_are_not_called_running() -> None:
    from tests.test_strategies import scripted

    result = play(
        scripted([("A", {"k": 1}), ("B", {"k": 2})]), timed_tools({"A": 1.0, "B": 1.0}), mode=leaves_started
    )
    assert result.reason == "strategy_error"
    assert "positions [0, 1] dispatched but not started yet (they never ran)" in (result.error or "")
    assert "were still running" not in (result.error or "")


def test_an_async_generator_is_told_what_it_is() -> None:
    async def gen(batch: Batch) -> Any:
        yield 0

    with pytest.raises(UsageError, match="gen is an async generator"):
        strategy("y")(gen)


def test_a_replayed_trace_of_an_imported_trace_reads_an_imported() -> None:
    trace = load(TRACES / "one_tool_round.json")
    imported = replace(trace, metadata=replace(trace.metadata, origin="imported"))
    notes = replayed_trace(replay(imported, "parallel"), imported).metadata.notes
    assert "from an imported trace" in notes  # (before: "from a imported trace")


def test_a_strategy_module_that_exits_on_import_is_refused(tmp_path, capsys) -> None:
    from toolcall_lab import cli

    module = tmp_path / "hard_exit_on_import.py"
    module.write_text("import os\nos._exit(0)\n")
    with pytest.raises(SystemExit) as exited:  # (argparse's usage error; before: the process ended, exit 0)
        cli.main(["bench", str(TRACES / "one_tool_round.json"), "--strategy", f"{module}:x", "--quiet"])
    assert exited.value.code == 2
    assert "called os._exit(0)" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["eager[cap=-1]", "eager[cap=0]", "parallel[A=-2]", "parallel[A=0]"])
def test_a_cap_or_limit_below_one_gets_one_message(spec: str) -> None:
    with pytest.raises(UsageError, match=r"N must be an integer >= 1"):
        resolve(spec)


def test_strategies_that_are_not_built_ins_keep_their_names() -> None:
    class Mine(Strategy):
        name = "mine"

        async def run(self, batch: Batch) -> None:
            await batch.run_sequential()

    class Seq(Sequential):
        pass

    assert resolve(Mine()).name == "mine" and resolve(Seq()).name == "sequential"

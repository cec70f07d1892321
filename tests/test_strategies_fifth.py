"""Strategies, fifth pass (issue 14): a lost session's fourth-check fixes, checked and redone, and what
its "left out" list called wrong.

A failed replay still writes ``--out`` and says so; a subclass of a built-in keeps its own name
everywhere; a saving that is float noise reads 0; a name that passes for a built-in's is refused;
``note`` takes text; `StartedOnSnapshotError` is importable from the package.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolcall_lab
from tests.conftest import REPO
from toolcall_lab import UsageError, load
from toolcall_lab.analysis import compare, critical_path_s, eager_bound_s
from toolcall_lab.exceptions import ReplayDivergenceError
from toolcall_lab.notebook import CompareView
from toolcall_lab.plotting import gantt
from toolcall_lab.replay import replay
from toolcall_lab.strategies import Batch, Eager, Parallel, check_name, resolve, strategy
from toolcall_lab.trace import Trace

TRACES = REPO / "data" / "traces"


# -- a failed replay writes --out ---------------------------------------------------------------------


def test_a_replay_that_diverged_writes_the_failed_runs_record_and_says_so(tmp_path, capsys) -> None:
    from toolcall_lab import cli

    out = tmp_path / "out.json"
    args = ["replay", str(TRACES / "weather_news_stock.json"), "--mode", "first_only", "--check", "strict"]
    assert cli.main([*args, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "diverged from its recording under first_only" in err
    assert f"wrote {out}: the failed run's record up to the divergence" in err
    assert "not a complete replay" in err
    saved = load(out)
    assert (saved.outcome.status, saved.outcome.reason) == ("failed", "replay_divergence")
    assert saved.metadata.origin == "replayed" and saved.metadata.mode == "first_only"


BROKEN = """
from toolcall_lab.strategies import strategy


@strategy("breaks")
async def breaks(batch):
    raise RuntimeError("my bug")
"""


def test_a_replay_whose_strategy_failed_writes_the_failed_runs_record_and_says_so(tmp_path, capsys) -> None:
    from toolcall_lab import cli

    module = tmp_path / "l6_breaks.py"
    module.write_text(BROKEN)
    out = tmp_path / "out.json"
    code = cli.main(
        ["replay", str(TRACES / "one_tool_round.json"), "--strategy", f"{module}:breaks", "--out", str(out)]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert "RuntimeError: my bug" in captured.err
    assert f"wrote {out}: the failed run's record" in captured.err and "wrote" not in captured.out
    assert (load(out).outcome.status, load(out).outcome.reason) == ("failed", "strategy_error")


# -- a subclass of a built-in keeps its name ---------------------------------------------------------


class Mine(Parallel):
    name = "mine"


class MyEager(Eager):
    name = "my_eager"


def test_a_subclass_of_a_builtin_keeps_its_own_name_in_tables_views_and_plots() -> None:
    assert Mine().name == "mine" and Mine(concurrency=2).name == "mine"
    assert MyEager().name == "my_eager" and Mine(name="other").name == "other"
    assert Parallel().name == "parallel" and Parallel(concurrency=2).name == "parallel[cap=2]"
    assert resolve(Mine()).name == "mine"  # (before: 'parallel', refused as the built-in's name)
    trace = load(TRACES / "weather_news_stock.json")
    assert replay(trace, Mine()).mode == "mine"
    table = compare([trace], ["parallel", Mine(), MyEager()])
    assert list(table.runs["mode"]) == ["parallel", "mine", "my_eager"]
    assert "mine" in CompareView(trace, ["parallel", Mine()]).static_html()
    fig = gantt(trace, ["parallel", Mine()], show=False)
    assert any(ax.get_title(loc="left").startswith("mine:") for ax in fig.axes)


# -- a saving that is float noise is 0 ----------------------------------------------------------------


def _noisy_trace() -> Trace:
    """`one_tool_round` with the call's arguments complete a few femtoseconds before the stream ends
    (as imported timestamps come: 5.104999999999999 against a latency of 5.105000000000002)."""
    doc = json.loads((TRACES / "one_tool_round.json").read_text())
    response = doc["rounds"][0]["response"]
    response["chunks"][2]["offset_s"] = response["latency_s"] - 3.3e-15
    response["chunk_timing"] = "recorded"
    return Trace.from_dict(doc)


def test_an_eager_saving_that_is_float_noise_reads_exactly_zero() -> None:
    trace = _noisy_trace()
    assert critical_path_s(trace) - eager_bound_s(trace) != 0.0  # the noise the old subtraction showed
    runs = compare([trace], ["sequential", "parallel", "eager"]).runs.set_index("mode")
    assert (runs["eager_saving_bound_s"] == 0.0).all()
    assert runs.loc["eager", "overlap_saved_s"] == 0.0
    assert runs.loc["eager", "wall_time_s"] == pytest.approx(runs.loc["parallel", "wall_time_s"])


def test_a_real_saving_is_still_counted() -> None:
    runs = compare([load(TRACES / "course_search_two_rounds.json")], ["parallel", "eager"]).runs
    assert runs["eager_saving_bound_s"].tolist() == pytest.approx([0.4, 0.4])
    assert runs.set_index("mode").loc["eager", "overlap_saved_s"] == pytest.approx(0.4)


# -- names that pass for a built-in's -----------------------------------------------------------------


async def _body(batch: Batch) -> None:
    await batch.run_parallel()


@pytest.mark.parametrize(
    ("name", "builtin"),
    [("first-only", "first_only"), ("First Only", "first_only"), ("firstonly", "first_only"),
     ("para-llel", "parallel"), ("sequential.", "sequential"), ("ｅａｇｅｒ-", "eager")],
)  # fmt: skip
def test_a_name_differing_from_a_builtins_only_by_separators_is_refused(name, builtin) -> None:
    with pytest.raises(UsageError, match=f"reads as the name of the built-in strategy '{builtin}'"):
        check_name(name, "test")
    with pytest.raises(UsageError, match="reads as the name"):
        strategy(name)(_body)


def test_spaces_inside_a_name_are_fine_and_documented() -> None:
    assert resolve(strategy("a b")(_body)).name == "a b"
    assert resolve(strategy("read only (parallel)")(_body)).name == "read only (parallel)"
    readme = (REPO / "README.md").read_text()
    assert "Spaces inside a name are fine" in readme and "`first-only`" in readme


# -- note takes text ------------------------------------------------------------------------------------


@pytest.mark.parametrize("given", [None, 3, ["a"], "", "   "])
def test_a_note_that_is_not_text_fails_the_strategy_naming_the_value(given: Any) -> None:
    @strategy("noter")
    async def noter(batch: Batch) -> None:
        await batch.run_parallel()
        batch.note(given)

    result = replay(load(TRACES / "one_tool_round.json"), noter)
    assert (result.status, result.reason) == ("failed", "strategy_error")
    assert f"note({given!r})" in (result.error or "")
    assert all("None" not in n for r in result.rounds for n in r.strategy_notes)


def test_a_note_of_text_is_recorded_as_given() -> None:
    @strategy("noter")
    async def noter(batch: Batch) -> None:
        await batch.run_parallel()
        batch.note("cap was 4")

    result = replay(load(TRACES / "one_tool_round.json"), noter)
    assert result.rounds[0].strategy_notes == ("cap was 4",)


# -- the package exports StartedOnSnapshotError ---------------------------------------------------------


def test_started_on_snapshot_error_is_exported_from_the_package_and_the_hierarchy() -> None:
    from toolcall_lab.replay import StartedOnSnapshotError as from_replay

    assert toolcall_lab.StartedOnSnapshotError is from_replay
    assert "StartedOnSnapshotError" in toolcall_lab.__all__
    assert issubclass(toolcall_lab.StartedOnSnapshotError, ReplayDivergenceError)
    assert "StartedOnSnapshotError" in (toolcall_lab.exceptions.__doc__ or "")


# -- a strategy that blocks the event loop past the deadline ------------------------------------------


def test_a_strategy_that_blocks_past_the_deadline_starts_no_call_after_it_and_is_said() -> None:
    """Real clock (blocking code holds the real event loop). Before: both calls ran after the
    deadline, recorded ok, and the error said the run ended late 'when the calls cut off had
    stopped', though nothing had been cut off."""
    import time

    from toolcall_lab import ScriptedModel, ScriptedResponse, ToolRegistry
    from toolcall_lab.loop import run_sync

    ran: list[int] = []
    reg = ToolRegistry()

    @reg.register
    async def f(x: int) -> str:
        ran.append(x)
        return "ok"

    @strategy("sleepy")
    async def sleepy(batch: Batch) -> None:
        time.sleep(0.3)  # noqa: ASYNC251 (plain work that never yields: a planner, a blocking call)
        await batch.run_parallel()

    model = ScriptedModel([ScriptedResponse(tool_calls=(("f", {"x": 1}), ("f", {"x": 2}))), "done"])
    result = run_sync(model, reg, "go", mode=sleepy, timeout_s=0.1)
    assert (result.status, result.reason) == ("timeout", "deadline")
    assert ran == [] and [e.status for e in result.executions] == ["cancelled", "cancelled"]
    assert all(e.result.startswith("Not executed") for e in result.executions)
    error = result.error or ""
    assert "the event loop was held until" in error and "no call started after it" in error
    assert "calls cut off had stopped" not in error
    assert "the calls at positions [0, 1] had not been run" in error


def test_a_strategy_that_swallows_the_deadline_starts_no_call_after_it() -> None:
    """Virtual clock. Before: the strategy caught the deadline's cancellation and ran its next call
    after the deadline (it ran 1 s), recorded as 'cancelled while this call was running (it caught
    the cancellation and returned at 1.500 s)', which the tool never did."""
    import asyncio
    import contextlib

    from toolcall_lab import ScriptedModel, ScriptedResponse, ToolRegistry
    from toolcall_lab.clock import run_virtual
    from toolcall_lab.loop import run

    ran: list[int] = []
    reg = ToolRegistry()

    @reg.register
    async def slow(x: int) -> str:
        ran.append(x)
        await asyncio.sleep(1)
        return f"slow {x}"

    @strategy("stubborn")
    async def stubborn(batch: Batch) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # swallows the run's cut and goes on
            await batch.run(0)
        await batch.run(1)

    model = ScriptedModel([ScriptedResponse(tool_calls=(("slow", {"x": 1}), ("slow", {"x": 2}))), "done"])
    result = run_virtual(run(model, reg, "go", mode=stubborn, timeout_s=0.5))
    assert (result.status, result.reason) == ("timeout", "deadline")
    assert ran == [1]
    first, second = result.executions
    assert (first.status, first.started_at, first.ended_at) == ("cancelled", 0.0, 0.5)
    assert second.status == "cancelled" and second.result.startswith("Not executed")
    assert second.started_at == second.ended_at == 0.5
    assert result.ended_at == 0.5

"""Strategies, third pass (issue 14): what a second fresh-eyes tester broke, each a regression test.

Only a strategy that declares ``skips_calls`` may skip a call (live and replay then agree); a replay
of a stream whose arguments arrive as growing snapshots says that it cannot evaluate eager, and why;
a strategy's name must read back as itself (CLI lists, ``module:attribute``, options, built-ins).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REALDATA, needs_realdata
from tests.test_strategies import MIXED, ChunkModel, Counting, answer, args, chunk, header, play, scripted
from toolcall_lab.analysis import compare
from toolcall_lab.exceptions import ReplayDivergenceError, UsageError
from toolcall_lab.replay import StartedOnSnapshotError, replay
from toolcall_lab.strategies import BUILTINS, Batch, Strategy, check_name, resolve, strategy
from toolcall_lab.strategies.base import BUILTIN_NAMES
from toolcall_lab.trace import Trace, TraceMetadata

TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"

# -- (1) skip() needs skips_calls -------------------------------------------------------------------------


async def _skips_the_rest(batch: Batch) -> None:
    for pos in range(1, len(batch.calls)):
        batch.skip(pos, "only the first")
    if batch.calls:
        await batch.run(0)


def test_skip_without_declaring_skips_calls_fails_the_run_live() -> None:
    tools = Counting()
    result = play(scripted(MIXED[:2]), tools.registry(), mode=strategy("undeclared")(_skips_the_rest))
    assert (result.status, result.reason) == ("failed", "strategy_error")
    assert "does not declare that it skips calls" in (result.error or "")
    assert "skips_calls=True" in (result.error or "")
    assert tools.total == 0  # refused before anything ran

    class Undeclared(Strategy):
        name = "undeclared_class"

        async def run(self, batch: Batch) -> None:
            await _skips_the_rest(batch)

    result = play(scripted(MIXED[:2]), Counting().registry(), mode=Undeclared())
    assert result.reason == "strategy_error" and "skips_calls = True" in (result.error or "")


def test_skip_without_declaring_is_a_strategy_error_in_compare_too() -> None:
    """Live and replay agree: the undeclared strategy is in `errors` (never a completed run in one
    place and a divergence in the other); declared, its runs are rows marked not comparable."""
    from toolcall_lab.trace_files import load

    traces = [load(TRACES / "three_tools_100ms.json")]
    undeclared = strategy("undeclared")(_skips_the_rest)
    declared = strategy("declared", skips_calls=True)(_skips_the_rest)
    table = compare(traces, ["parallel", undeclared, declared])
    assert list(table.errors["mode"]) == ["undeclared"]
    assert "does not declare that it skips calls" in table.errors["error"].iloc[0]
    runs = table.runs.set_index("mode")
    assert runs.loc["declared", "skipped"] == 2 and not runs.loc["declared", "comparable"]
    assert runs.loc["parallel", "comparable"]


# -- (2) eager on a stream whose arguments arrive as growing snapshots ----------------------------------


def _snapshot_stream() -> ChunkModel:
    """Each chunk resends the whole arguments object (a provider's snapshots), so the first is
    already complete JSON and the call as streamed ends invalid."""
    return ChunkModel(
        [
            (0.1, header(0, "a", "search")),
            (0.2, args(0, '{"key": ""}')),
            (0.3, args(0, '{"key": "x"}')),
            (0.4, header(1, "b", "search", '{"key": "y", "seconds": 0.1}')),
            (0.6, chunk({}, "tool_calls")),
        ],
        answer(),
    )


def _recorded(mode: str) -> Trace:
    result = play(_snapshot_stream(), Counting().registry(), mode=mode)
    return Trace.from_run(result, TraceMetadata(title="snapshots", origin="scripted"))


def test_eager_replay_of_snapshot_arguments_says_the_trace_cannot_evaluate_eager() -> None:
    trace = _recorded("parallel")
    assert trace.rounds[0].executions[0].status == "invalid_arguments"  # what the recording did
    with pytest.raises(StartedOnSnapshotError) as info:
        replay(trace, "eager")
    text = str(info.value)
    assert isinstance(info.value, ReplayDivergenceError)
    assert (
        "cannot evaluate a strategy that starts calls while the model streams (eager, or a streaming strategy of yours)"
        in text
    )
    assert 'search({"key": ""})' in text and "earlier snapshot of its arguments" in text
    assert 'the recorded stream ended with search({"key": ""}{"key": "x"})' in text
    assert "(made under parallel)" in text and "changed_after_start" in text
    partial = info.value.partial_result  # type: ignore[attr-defined]
    assert partial.reason == "replay_divergence"

    table = compare([trace], ["sequential", "parallel", "eager"])
    assert list(table.errors["mode"]) == ["eager"]
    assert "cannot evaluate" in table.errors["error"].iloc[0]
    assert sorted(table.runs["mode"]) == ["parallel", "sequential"]  # the other modes still compare


def test_a_recording_made_under_eager_replays_its_early_call() -> None:
    """Live, eager ran the first snapshot (a changed_after_start finding); that recording holds the
    call's result, so replaying it under eager is served, not refused."""
    live = play(_snapshot_stream(), Counting().registry(), mode="eager")
    assert any(f.kind == "changed_after_start" for f in live.rounds[0].findings)
    trace = Trace.from_run(live, TraceMetadata(title="eager live", origin="scripted"))
    again = replay(trace, "eager")
    assert [e.status for e in again.rounds[0].executions] == [e.status for e in live.rounds[0].executions]
    assert again.rounds[0].executions[0].arguments == '{"key": ""}'


@needs_realdata
def test_cli_eager_replay_of_the_real_snapshot_stream(tmp_path: Path) -> None:
    (source,) = sorted((REALDATA / "watsonx-ai-java-sdk").glob("*PATHOLOGICAL_snapshot_args*"))
    cli = [sys.executable, "-m", "toolcall_lab"]
    made = subprocess.run(
        [*cli, "import", "recording", str(source), "--out", str(tmp_path / "rec")],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    (path,) = sorted((tmp_path / "rec").glob("*.json"))
    out = subprocess.run([*cli, "replay", str(path), "--mode", "eager"], capture_output=True, text=True)
    assert out.returncode == 1
    assert "cannot be replayed under eager" in out.stderr
    assert 'get_current_time({"country": ""})' in out.stderr and "earlier snapshot" in out.stderr
    assert "Traceback" not in out.stderr
    ok = subprocess.run([*cli, "replay", str(path), "--mode", "parallel"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


# -- (3) names that would be misread ---------------------------------------------------------------------


async def _body(batch: Batch) -> None:
    await batch.run_parallel()


@pytest.mark.parametrize(
    "name, says",
    [
        ("a,b", "a comma"),
        ("mine:mod", "a colon"),
        ("mine[2]", "a bracket"),
        ("mine]", "a bracket"),
        (" mine", "leading or trailing whitespace"),
        ("mine\n", "leading or trailing whitespace"),
        ("mi\tne", "a control character"),
        ("Parallel", "differs only by case from the built-in strategy 'parallel'"),
        ("EAGER", "differs only by case from the built-in strategy 'eager'"),
        ("First_Only", "differs only by case from the built-in strategy 'first_only'"),
        ("eager[cap=2]", "is read as the built-in strategy 'eager'"),
        ("Sequential[x=1]", "differs only by case from the built-in strategy 'sequential'"),
        ("parallel", "is the built-in strategy 'parallel'"),
        ("", "non-empty string"),
    ],
)
def test_names_that_would_be_misread_are_refused(name: str, says: str) -> None:
    with pytest.raises(UsageError) as info:
        strategy(name)(_body)
    assert says in str(info.value)

    class Named(Strategy):
        async def run(self, batch: Batch) -> None:
            await batch.run_parallel()

    named = Named()
    named.name = name
    for use in (lambda: resolve(named), lambda: play(scripted(MIXED[:1]), Counting().registry(), mode=named)):
        with pytest.raises(UsageError) as caught:
            use()
        assert says in str(caught.value) or "has no name" in str(caught.value)


def test_a_function_named_like_a_builtin_is_refused_when_declared() -> None:
    async def Eager(batch: Batch) -> None:
        await batch.run_parallel()

    with pytest.raises(UsageError, match="differs only by case from the built-in strategy 'eager'"):
        strategy()(Eager)


def test_names_that_read_back_are_accepted_and_the_builtins_are_theirs() -> None:
    for name in ("ro_par", "first-only-ish", "read only (parallel)", "a b", "x" * 200, "名前"):
        assert check_name(name, "test") == name
        assert resolve(strategy(name)(_body)).name == name
    assert set(BUILTINS) == BUILTIN_NAMES
    for spec in ("parallel[cap=2]", "eager[web_search=1]", "parallel", "first_only"):
        assert resolve(spec).name == spec  # the built-ins' own names (with options) stay theirs


def test_a_module_attribute_strategy_with_a_bad_name_is_refused(tmp_path: Path) -> None:
    module = tmp_path / "bad_names.py"
    module.write_text(
        "from toolcall_lab.strategies import Strategy\n"
        "class Mine(Strategy):\n"
        "    name = 'a,b'\n"
        "    async def run(self, batch):\n"
        "        await batch.run_parallel()\n"
        "mine = Mine()\n"
    )
    with pytest.raises(UsageError, match="a comma"):
        resolve(f"{module}:mine")

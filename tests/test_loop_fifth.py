"""Issue 11, fifth pass: what a fresh-eyes tester found in the run loop. Calls screened out before
they ran replay in every mode; blocking sync hooks keep the deadline; the CLI names a bad user-code
spec in one line; a bench cut short counts what it compared. Virtual clock unless a test needs a
real process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from toolcall_lab import Hooks, ScriptedModel, ScriptedResponse, ToolOutcome, ToolRegistry, replay
from toolcall_lab.analysis import compare
from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import ReplayDivergenceError
from toolcall_lab.loop import run
from toolcall_lab.records import DECIDED
from toolcall_lab.runs import RunResult
from toolcall_lab.tools import Tool
from toolcall_lab.trace import Trace, TraceMetadata
from toolcall_lab.trace_files import load, save

MODES = ["sequential", "parallel", "serialized", "eager", "first_only"]


def cli_run(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
    )
    return proc.returncode, proc.stdout, proc.stderr


# --- 1. calls screened out before they ran replay -------------------------------------------------


def screened_tools() -> tuple[ToolRegistry, dict[str, int]]:
    runs: dict[str, int] = {}
    reg = ToolRegistry()

    @reg.register
    def f(x: str) -> str:
        runs["f"] = runs.get("f", 0) + 1
        return "f" + x

    @reg.register
    def danger() -> str:
        runs["danger"] = runs.get("danger", 0) + 1
        return "boom"

    @reg.register
    def secret() -> str:
        return "s3cret"

    @reg.register
    def refuse(ref: str) -> ToolOutcome:  # the tool itself refuses its (well-formed) arguments
        return ToolOutcome(text=f"no variable {ref}", status="invalid_arguments")

    def h(y: str = "") -> str:  # the schema requires what the signature does not
        runs["h"] = runs.get("h", 0) + 1
        return "h"

    reg.add(Tool(name="h", function=h, parameters={"type": "object", "required": ["y"]}))

    @reg.register(idempotent=True)
    def poll() -> str:
        return "polled"

    return reg, runs


SCREENED_CALLS = (
    ("f", '{"x": '),  # invalid_arguments: broken JSON
    ("f", {}),  # invalid_arguments: a required argument missing
    ("f", {"x": "1", "z": 2}),  # invalid_arguments: an argument the function does not take
    ("h", {}),  # invalid_arguments: required by the schema only
    ("nosuch", {}),  # unknown_tool
    ("danger", {}),  # rejected
    ("secret", {}),  # withheld (ran)
    ("f", {"x": "1"}),  # ok
    ("f", {"x": "1"}),  # duplicate (within the batch)
    ("refuse", {"ref": "$A"}),  # invalid_arguments, said by the tool (ran)
    ("poll", {}),  # ok
)


def screened_run(mode: str) -> tuple[RunResult, dict[str, int]]:
    reg, runs = screened_tools()
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=SCREENED_CALLS, latency_s=0.1),
            ScriptedResponse(tool_calls=(("poll", {}),), latency_s=0.1),  # duplicate across rounds
            "done",
        ]
    )
    hooks = Hooks(
        approve_call=lambda c: "too risky" if c.name == "danger" else None,
        approve_result=lambda c, e: "private" if c.name == "secret" else None,
    )
    return run_virtual(run(model, reg, "go", mode=mode, hooks=hooks)), runs


def outcomes(result: RunResult) -> list[tuple[str, str, str]]:
    return [(e.tool_call_id, e.status, e.result) for r in result.rounds for e in r.executions]


@pytest.mark.parametrize("recorded_under", MODES)
def test_every_call_screened_out_before_it_ran_replays_in_every_mode(tmp_path, recorded_under) -> None:
    live, runs = screened_run(recorded_under)
    statuses = {e.status for r in live.rounds for e in r.executions}
    if recorded_under == "first_only":
        assert statuses == {"invalid_arguments", "skipped"}
    else:
        assert statuses == {"invalid_arguments", "unknown_tool", "rejected", "withheld", "ok", "duplicate"}
        assert runs == {"f": 1}  # nothing screened out ran: not danger, not h, not f({}) / f(z=2)
        bad_names = live.rounds[0].executions[1:4]
        assert all(e.status == "invalid_arguments" and e.timing == DECIDED for e in bad_names)
        assert live.rounds[0].executions[9].timing != DECIDED  # the tool refused: it ran
    path = save(Trace.from_run(live, TraceMetadata(title="screened", origin="scripted")), tmp_path / "s.json")
    for mode in MODES:
        if (mode == "first_only") != (recorded_under == "first_only"):
            continue  # (first_only leaves calls unanswered: documented to match only itself)
        again = replay(load(path), mode)
        assert outcomes(again) == outcomes(live), mode
        assert again.status == live.status
    code, _, err = cli_run("replay", str(path))
    assert code == 0 and "diverged" not in err, err
    if recorded_under != "first_only":
        table = compare([load(path)], ["sequential", "parallel", "serialized", "eager"])
        assert table.errors.empty, table.errors.to_string()
        assert len(table.runs) == 4


def test_a_call_the_recording_screened_out_that_the_replay_would_run_names_the_recorded_status() -> None:
    """An edited recording (the screened call now carries a different id) is a divergence that says
    what the recording did with the call, not just that it has no result."""
    live, _ = screened_run("sequential")
    trace = Trace.from_run(live, TraceMetadata(title="edited", origin="scripted"))
    first = trace.rounds[0]
    ex = first.executions[5]  # rejected
    assert ex.status == "rejected"
    from dataclasses import replace

    edited = replace(trace, rounds=(replace(first, executions=(*first.executions[:5], replace(
        ex, status="unknown_tool"), *first.executions[6:])), *trace.rounds[1:]))  # fmt: skip
    with pytest.raises(ReplayDivergenceError, match="the recording did not run it: it was unknown_tool"):
        replay(edited, "parallel")


# --- 2. a hook that blocks the event loop keeps the deadline --------------------------------------

HOOKS = ["approve_call", "approve_result", "before_model_call", "on_tool_start", "on_tool_complete",
         "on_model_chunk"]  # fmt: skip
LOOP_MODES = ["sequential", "parallel", "serialized", "eager"]


def hold_the_loop(seconds: float) -> None:
    """What a plain-function hook blocking in ``time.sleep`` or ``input()`` does, on the virtual
    clock: time passes while nothing else on the loop can run."""
    loop = asyncio.get_running_loop()
    loop._virtual_now += seconds  # type: ignore[attr-defined]


def deadline_run(hook: str, mode: str, *, blocking: bool) -> tuple[RunResult, list[float]]:
    started: list[float] = []
    reg = ToolRegistry()

    @reg.register
    async def f(x: int) -> str:
        started.append(asyncio.get_running_loop().time())
        return f"f{x}"

    def plain(*_: object) -> None:
        hold_the_loop(1.0)

    async def coroutine(*_: object) -> None:
        await asyncio.sleep(1.0)

    model = ScriptedModel([ScriptedResponse(tool_calls=(("f", {"x": 1}), ("f", {"x": 2}))), "done"])
    hooks = Hooks(**{hook: plain if blocking else coroutine})  # type: ignore[arg-type]
    result = run_virtual(run(model, reg, "go", mode=mode, hooks=hooks, timeout_s=0.5))
    return result, started


@pytest.mark.parametrize("hook", HOOKS)
def test_a_plain_hook_that_blocks_past_the_deadline_stops_the_run_there_the_same_in_every_mode(hook) -> None:
    records: dict[str, list[tuple[str, str]]] = {}
    for mode in [*LOOP_MODES, "first_only"]:
        result, started = deadline_run(hook, mode, blocking=True)
        assert (result.status, result.reason) == ("timeout", "deadline"), (mode, result.error)
        assert all(t < 0.5 for t in started), (mode, started)  # nothing started after the deadline
        assert result.ended_at == pytest.approx(1.0)  # when the hook gave the loop back
        assert f"the {hook} hook held the event loop until 1.000 s" in (result.error or ""), result.error
        assert "nothing started after the deadline" in (result.error or "")
        assert "when the calls cut off had stopped" not in (result.error or "")
        assert len(result.rounds) <= 1 and all(r.model_call.started_at < 0.5 for r in result.rounds)
        for ex in result.executions:
            assert ex.status in ("ok", "withheld", "cancelled", "skipped"), ex
            if ex.status == "cancelled":
                assert "before this call started" in ex.result or "hook" in ex.result, ex.result
        records[mode] = [(e.tool_call_id, e.status) for e in result.executions]
    assert all(records[m] == records["sequential"] for m in LOOP_MODES), records


@pytest.mark.parametrize("hook", HOOKS)
def test_a_coroutine_hook_past_the_deadline_is_cut_at_the_deadline_as_before(hook) -> None:
    records: dict[str, list[tuple[str, str]]] = {}
    for mode in LOOP_MODES:
        result, started = deadline_run(hook, mode, blocking=False)
        assert (result.status, result.reason, result.ended_at) == ("timeout", "deadline", 0.5)
        assert all(t < 0.5 for t in started)
        assert "held the event loop" not in (result.error or "")
        records[mode] = [(e.tool_call_id, e.status) for e in result.executions]
    # (calls overlap under parallel and eager: both may have run by the deadline)
    assert records["serialized"] == records["sequential"] and records["eager"] == records["parallel"]


def test_a_blocking_hook_on_the_real_clock_stops_the_run_when_it_returns() -> None:
    import time

    from toolcall_lab.loop import run_sync

    ran: list[int] = []
    reg = ToolRegistry()

    @reg.register
    def f(x: int) -> str:
        ran.append(x)
        return "ok"

    model = ScriptedModel([ScriptedResponse(tool_calls=(("f", {"x": 1}), ("f", {"x": 2}))), "done"])
    hooks = Hooks(approve_call=lambda c: (time.sleep(0.3), True)[1])  # a human at input()
    result = run_sync(model, reg, "go", mode="sequential", hooks=hooks, timeout_s=0.1)
    assert (result.status, result.reason) == ("timeout", "deadline")
    assert ran == [] and [e.status for e in result.executions] == ["cancelled", "cancelled"]
    assert len(result.rounds) == 1 and "approve_call hook held the event loop" in (result.error or "")


# --- 3. options that import the user's code: one clear line, exit 2 -------------------------------

USER_MODULES = {
    "l5_tools_ok": "from toolcall_lab.tools import ToolRegistry\nregistry = ToolRegistry()\nnumber = 5\n",
    "l5_raises": "raise RuntimeError('import boom')\n",
    "l5_exits": "import sys\nsys.exit(3)\n",
    "l5_needs_missing_dep": "import l5_no_such_dependency\n",
    "l5_syntax": "def f(:\n",
}


@pytest.fixture
def user_code(tmp_path, monkeypatch) -> Iterator[Path]:
    for name, text in USER_MODULES.items():
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.chdir(tmp_path)  # (importable from the current directory, as the CLI promises)
    yield tmp_path
    for name in USER_MODULES:
        sys.modules.pop(name, None)


def record_args(tools: str, out: Path) -> list[str]:
    """A recording against a port where no server listens (the model call fails; no network)."""
    return ["record", "--model", "m", "--prompt", "go", "--tools", tools, "--out", str(out),
            "--base-url", "http://127.0.0.1:9"]  # fmt: skip


BAD_SPECS = [
    ("l5_no_such_module:registry", "there is no module named 'l5_no_such_module'"),
    (
        "l5_tools_ok:nothing",
        "l5_tools_ok has no attribute 'nothing' (it has: ToolRegistry, number, registry)",
    ),
    ("l5_raises:registry", "importing l5_raises failed: RuntimeError: import boom"),
    ("l5_exits:registry", "importing l5_exits called sys.exit(3)"),
    ("l5_needs_missing_dep:x", "ModuleNotFoundError: No module named 'l5_no_such_dependency'"),
    ("l5_syntax:x", "importing l5_syntax failed: SyntaxError"),
    ("{dir}/nope.py:registry", "the file {dir}/nope.py does not exist"),
    ("{dir}/l5_tools_ok:registry", "a file is named by its path ending in .py"),
    ("{dir}/l5_raises.py:registry", "importing {dir}/l5_raises.py failed: RuntimeError: import boom"),
    ("l5_tools_ok", "use MODULE:ATTRIBUTE or path/to/file.py:ATTRIBUTE"),
]


@pytest.mark.parametrize(("spec", "said"), BAD_SPECS)
def test_a_bad_tools_spec_is_one_line_naming_the_spec_and_the_cause_exit_2(
    user_code, capsys, spec, said
) -> None:
    from toolcall_lab import cli

    spec, said = spec.format(dir=user_code), said.format(dir=user_code)
    code = cli.main(record_args(spec, user_code / "x.json"))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"--tools {spec!r}" in err and said in err, err
    assert not (user_code / "x.json").exists()


@pytest.mark.parametrize(("spec", "said"), BAD_SPECS[:-1])  # (a name without a colon: a mode's name)
def test_a_bad_strategy_spec_is_one_line_naming_the_spec_and_the_cause_exit_2(
    user_code, capsys, spec, said
) -> None:
    from toolcall_lab import cli

    spec, said = spec.format(dir=user_code), said.format(dir=user_code)
    trace = REPO / "data" / "traces" / "weather_news_stock.json"
    with pytest.raises(SystemExit) as stop:  # (argparse: a bad --mode is a usage error)
        cli.main(["replay", str(trace), "--mode", spec])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert "Traceback" not in err and f"strategy {spec!r}" in err and said in err, err


def test_tools_given_as_a_file_path_record(user_code, capsys) -> None:
    """``path/to/file.py:attribute`` works for --tools as it does for --strategy (the model call then
    fails: no server; the trace is saved)."""
    from toolcall_lab import cli

    spec = f"{user_code}/l5_tools_ok.py:registry"
    code = cli.main(record_args(spec, user_code / "x.json"))
    err = capsys.readouterr().err
    assert code == 1 and "model_error" in err and (user_code / "x.json").exists(), err
    code = cli.main(record_args("l5_tools_ok:number", user_code / "y.json"))
    assert code == 2 and "names int 5: expected a ToolRegistry" in capsys.readouterr().err


# --- 4. a bench stopped early counts what it compared ----------------------------------------------


def test_a_bench_stopped_after_one_of_four_traces_says_one_was_compared_and_three_left_out(
    tmp_path, capsys, monkeypatch
) -> None:
    import pandas as pd

    from toolcall_lab import analysis, cli

    folder = tmp_path / "traces"
    folder.mkdir()
    names = ["one_tool_round", "three_tools_100ms", "two_tool_rounds", "weather_news_stock"]
    for name in names:
        (folder / f"{name}.json").write_bytes((REPO / "data" / "traces" / f"{name}.json").read_bytes())
    real = analysis.trace_rows
    seen: list[object] = []

    def ctrl_c_on_the_second(item: object, *args: object) -> object:
        seen.append(item)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return real(item, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(analysis, "trace_rows", ctrl_c_on_the_second)
    out = tmp_path / "b.csv"
    code = cli.main(["bench", str(folder), "--quiet", "--modes", "sequential", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 130, captured.err
    assert "the 1 of 4 trace(s) compared so far; 3 not compared" in captured.out
    assert "\n1 trace(s) x 1 mode(s) in " in captured.out and "4 trace(s) x" not in captured.out
    assert "3 of 4 not compared (interrupted)" in captured.out
    assert len(pd.read_csv(tmp_path / "b_missing.csv")) == 3
    with pytest.raises(KeyboardInterrupt) as info:
        seen.clear()
        analysis.compare(sorted(folder.glob("*.json")), ["sequential"])
    comparison = info.value.partial_comparison  # type: ignore[attr-defined]
    assert len(comparison.not_compared) == 3
    assert comparison.summary["traces"].tolist() == [1]
    assert comparison.summary["traces_left_out"].tolist() == [3]


def test_traces_left_out_counts_a_trace_that_failed_in_every_mode(tmp_path) -> None:
    """Not only traces that failed in some mode: one that could not even be loaded is left out too."""
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    table = compare([REPO / "data" / "traces" / "one_tool_round.json", broken], ["sequential", "parallel"])
    assert set(table.errors["trace"]) == {str(broken)}
    assert table.summary["traces_left_out"].tolist() == [1, 1]


# --- 5. docs and small things ------------------------------------------------------------------------


def test_validate_warns_about_times_out_of_order_across_records(tmp_path) -> None:
    import json

    from toolcall_lab.trace_files import validate

    doc = json.loads((REPO / "data" / "traces" / "two_tool_rounds.json").read_text(encoding="utf-8"))
    response = doc["rounds"][1]["response"]
    for key in ("started_at", "first_chunk_at", "ended_at"):  # round 1's model call sent 0.1 s early
        response[key] -= 0.1
    ex = doc["rounds"][1]["tool_executions"][0]
    ex["started_at"], ex["ended_at"] = 0.85, 0.85 + ex["duration_s"]  # before its model call started
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    _, warnings = validate(path)  # each record's own times are consistent: it loads
    order = [w for w in warnings if w.startswith("out of order")]
    assert order == [
        "out of order: rounds[1].response starts at 0.900000 s, before round 0's tool executions ended "
        "(1.000000 s)",
        "out of order: rounds[1].tool_executions[0] (call_1_0) starts at 0.850000 s, before the model call "
        "that asked for it started (0.900000 s)",
    ]
    _, clean = validate(REPO / "data" / "traces" / "two_tool_rounds.json")
    assert not [w for w in clean if w.startswith("out of order")]


def test_the_readme_tool_outcome_example_runs_as_printed(capsys) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in readme.split("```python\n")[1:]]
    (example,) = [b for b in blocks if "ToolOutcome(text=" in b]
    exec(compile(example, "README.md", "exec"), {})  # the README's own code
    printed = capsys.readouterr().out.strip()
    assert printed == "[('ok', 'reported'), ('error', 'recorded')]"
    assert f"# {printed}" in example  # the comment says what it prints


def test_a_duration_the_clock_cannot_resolve_at_a_huge_time_is_noted_on_that_call() -> None:
    from toolcall_lab.scenarios import simulated

    reg = ToolRegistry([simulated("t", 0.001)])
    model = ScriptedModel([ScriptedResponse(tool_calls=(("t", {}),), latency_s=1e15), "done"])
    result = run_virtual(run(model, reg, "go"))
    ex = result.executions[0]
    assert ex.duration_s == 0.0 and "the clock resolves only 0.125 s" in ex.timing.note
    assert "resolves only" in result.rounds[0].model_call.timing.note
    again = replay(Trace.from_run(result, TraceMetadata(title="huge", origin="scripted")), "parallel")
    assert again.executions[0].timing == ex.timing  # noted once, kept by the replay
    small = run_virtual(run(ScriptedModel([ScriptedResponse(tool_calls=(("t", {}),)), "done"]), reg, "go"))
    assert "resolves only" not in small.executions[0].timing.note


@pytest.mark.parametrize(
    ("kwargs", "named"), [({"latency_s": -1.0}, "latency_s=-1.0"), ({"ttfc_s": -0.5}, "ttfc_s=-0.5")]
)
def test_a_negative_scripted_time_names_the_field_that_is_wrong(kwargs, named) -> None:
    from toolcall_lab.exceptions import UsageError

    with pytest.raises(UsageError) as info:
        ScriptedResponse(content="x", **kwargs)
    assert str(info.value) == f"ScriptedResponse {named}: must be a finite number of seconds >= 0"
    with pytest.raises(UsageError, match="need 0 <= ttfc_s <= latency_s"):
        ScriptedResponse(content="x", latency_s=0.1, ttfc_s=0.2)


def test_validate_names_an_empty_file_once_and_says_empty(tmp_path, capsys) -> None:
    from toolcall_lab import cli

    empty, blank = tmp_path / "empty.json", tmp_path / "blank.json"
    empty.write_bytes(b"")
    blank.write_text("  \n", encoding="utf-8")
    assert cli.main(["validate", str(empty), str(blank)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"ERROR {empty}: empty file (0 bytes): not a trace",
        f"ERROR {blank}: the file holds only whitespace: not a trace",
    ]


def test_record_says_ctrl_c_will_not_stop_it_when_sigint_is_ignored(user_code, capsys) -> None:
    import signal

    from toolcall_lab import cli

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell's background job inherits it
    try:
        cli.main(record_args("l5_tools_ok:registry", user_code / "x.json"))
    finally:
        signal.signal(signal.SIGINT, before)
    out = capsys.readouterr().out
    assert "SIGINT is ignored in this process" in out and "Ctrl-C stops" not in out

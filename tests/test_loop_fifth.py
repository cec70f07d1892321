"""Issue 11, fifth pass: what a fresh-eyes tester found in the run loop. Calls screened out before
they ran replay in every mode; blocking sync hooks keep the deadline; the CLI names a bad user-code
spec in one line; a bench cut short counts what it compared. Virtual clock unless a test needs a
real process."""

from __future__ import annotations

import subprocess
import sys

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

"""Issue 11, ninth check: what the verification report v11 found in the run loop.

1. a replay of a run aborted at the instant its first call arrived (or at 0 s) kept no round under a
   streaming strategy: the replay's cut at the recorded end, tied with the round's start, cancelled
   the run before the response due at that instant had arrived. A replay keeps every recorded round,
   and under the recording's strategy that instant goes as recorded: calls the recording started
   then start, and those it never started say so ("Not executed"), not "Cancelled";
2. a second signal just after a stopped run was saved killed the command by the signal: its own
   handling, once over, put Python's defaults back before the start-up guard came back (and Python's
   own shutdown puts them back too);
3. ``record`` had a start-up window (importing openai, loading --tools) with SIGTERM's default;
4. ``validate`` passed an outcome whose reason is another status's, a final answer of a run that did
   not complete, and an execution naming a call its round does not have;
5. the deadline's words for a call whose tool had returned while its hook ran.

Virtual clock unless a test needs real signals; no wall-clock thresholds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from toolcall_lab import Hooks, ScriptedModel, ScriptedResponse, ToolRegistry, replay
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import AbortHandle, run
from toolcall_lab.strategies import Batch, strategy
from toolcall_lab.trace import Trace, TraceMetadata


@strategy("start_as_they_arrive")
async def start_as_they_arrive(batch: Batch) -> None:
    """A user strategy that streams: each call starts as it arrives."""
    async for pos in batch.arrivals():
        batch.start(pos)
    await batch.join()


STRATEGIES = ["eager", "parallel", "sequential", start_as_they_arrive]


def name_of(mode: Any) -> str:
    return mode if isinstance(mode, str) else mode.name


def tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.register
    async def work(s: float, k: int) -> str:
        """Sleeps `s` seconds."""
        await asyncio.sleep(s)
        return "ok"

    return registry


def aborted_at_a_call(mode: Any, latency_s: float, hook: str, index: int) -> Trace:
    """A run whose `hook` for its call `index` aborts it: at 0 s (latency 0), or the instant that call
    arrived while the model streamed (eager, streaming strategies) or the response ended, or (call 1
    under sequential) when call 0 returned."""
    handle = AbortHandle()

    def aborts(call: Any) -> bool:
        if call.index == index:
            handle.abort("stop")
        return True

    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=(("work", {"s": 0.1, "k": 0}), ("work", {"s": 0.3, "k": 1})), latency_s=latency_s
            ),
            "done",
        ]
    )
    result = run_virtual(run(model, tools(), "go", mode=mode, abort=handle, hooks=Hooks(**{hook: aborts})))
    assert (result.status, result.reason) == ("aborted", "aborted")
    assert len(result.rounds) == 1
    return Trace.from_run(result, TraceMetadata(title="v11", origin="scripted"))


def shape(rounds: Any) -> list[Any]:
    return [
        (
            [c.tool_call_id for c in r.tool_calls],
            r.model_call.latency_s,
            len(r.model_call.chunks),
            [(e.status, e.started_at, e.ended_at, e.result.split(" (")[0]) for e in r.executions],
        )
        for r in rounds
    ]


@pytest.mark.parametrize("index", [0, 1], ids=["call_0", "call_1"])
@pytest.mark.parametrize("hook", ["on_tool_start", "approve_call"])
@pytest.mark.parametrize("latency_s", [0.0, 0.05], ids=["at_0s", "at_its_arrival"])
@pytest.mark.parametrize("recorded", STRATEGIES, ids=name_of)
def test_a_replay_of_a_run_aborted_at_a_call_keeps_the_round_as_recorded(
    recorded: Any, latency_s: float, hook: str, index: int
) -> None:
    trace = aborted_at_a_call(recorded, latency_s, hook, index)
    for mode in STRATEGIES:
        again = replay(trace, mode)
        assert (again.status, again.reason) == ("aborted", "aborted")
        assert len(again.rounds) == 1, f"{name_of(mode)} dropped the recorded round: {again!r}"
        (r,) = again.rounds
        recorded_round = trace.rounds[0]
        assert [c.tool_call_id for c in r.tool_calls] == [c.tool_call_id for c in recorded_round.tool_calls]
        assert r.model_call.chunks == recorded_round.model_call.chunks
        assert r.model_call.latency_s == pytest.approx(recorded_round.model_call.latency_s)
        for e in r.executions:  # (call 0 may have run to its end first, under sequential)
            assert e.status == "ok" or e.result.startswith(("Not executed: ", "Cancelled: ")), e
        if name_of(mode) == name_of(recorded):
            assert shape(again.rounds) == shape(trace.rounds)


# --- 2. / 3. the command line's signals -----------------------------------------------------------

AS_THE_COMMAND = """
import os, signal, sys
sys.argv[0] = os.path.join(os.path.dirname(sys.executable), "toolcall-lab")  # as the console script
import toolcall_lab
from toolcall_lab import _startup
"""

AFTER_ITS_OWN_HANDLING = (
    AS_THE_COMMAND
    + """
from toolcall_lab._stopping import Outside, catch_signals
from toolcall_lab._workers import StopOnce
_startup.release()  # (what cli.main does around the command)
if sys.argv[2] == "run":
    undo = catch_signals(Outside(), (signal.SIGINT, signal.SIGTERM))  # a run command's handling
    undo()  # ... over: the run was stopped and saved
else:
    with StopOnce("bench"):  # a command running synchronous work
        pass
signal.raise_signal(getattr(signal, sys.argv[1]))  # a second signal just after the save
print("went on")
sys.exit(143 if sys.argv[1] == "SIGTERM" else 130)  # the command's own status
"""
)

AS_IT_EXITS = (
    AS_THE_COMMAND
    + """
import atexit
_startup.release()
_startup.rearm()
# (exit handlers run last-registered first: this one runs before the guard's own, the other after it,
# where Python's shutdown follows and no Python handler runs any more)
atexit.register(lambda: signal.raise_signal(getattr(signal, sys.argv[1])))
_startup._exiting()
atexit.register(lambda: signal.raise_signal(getattr(signal, sys.argv[1])))
sys.exit(143 if sys.argv[1] == "SIGTERM" else 130)
"""
)


def python(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("handling", ["run", "bench"])
@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_after_the_commands_own_handling_ended_is_said(name: str, code: int, handling: str) -> None:
    done = python(AFTER_ITS_OWN_HANDLING, name, handling)
    assert done.returncode == code, done.stderr
    assert "as it exited; what it did is done" in done.stderr and "Traceback" not in done.stderr
    assert "went on" in done.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_while_python_shuts_down_keeps_the_commands_status(name: str, code: int) -> None:
    done = python(AS_IT_EXITS, name)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr


TOOLS_THAT_TAKE_A_WHILE = """
import signal
from toolcall_lab import ToolRegistry
signal.raise_signal(signal.{name})  # (a signal while `record` loads its --tools)
tools = ToolRegistry()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("name", "code", "words"), [
    ("SIGINT", 130, "interrupted (Ctrl-C)"),
    ("SIGTERM", 143, "terminated (SIGTERM)"),
])  # fmt: skip
def test_a_signal_while_record_loads_its_tools_exits_with_one_line(
    tmp_path: Path, name: str, code: int, words: str
) -> None:
    (tmp_path / "slow_tools.py").write_text(TOOLS_THAT_TAKE_A_WHILE.format(name=name))
    command = Path(sys.executable).parent / "toolcall-lab"
    done = subprocess.run(
        [
            str(command), "record", "--model", "m", "--prompt", "go",
            "--tools", f"{tmp_path / 'slow_tools.py'}:tools",
            "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "out.json"),
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**os.environ, "OPENAI_API_KEY": "x"},
    )  # fmt: skip
    assert done.returncode == code, done.stderr
    assert done.stderr == f"toolcall-lab record: {words}\n"
    assert not (tmp_path / "out.json").exists()


def slow_trace(path: Path) -> None:
    """A recording whose one call took an hour: its replay on the real clock waits for a signal."""
    registry = ToolRegistry()

    @registry.register
    async def wait(s: float) -> str:
        """Sleeps `s` seconds."""
        await asyncio.sleep(s)
        return "ok"

    model = ScriptedModel([ScriptedResponse(tool_calls=(("wait", {"s": 3600.0}),)), "done"])
    result = run_virtual(run(model, registry, "go"))
    trace = Trace.from_run(result, TraceMetadata(title="slow", origin="scripted"))
    path.write_text(json.dumps(trace.to_file_dict()))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_two_quick_sigterms_stop_a_real_time_replay_with_its_status(tmp_path: Path) -> None:
    trace = tmp_path / "slow.json"
    slow_trace(trace)
    command = Path(sys.executable).parent / "toolcall-lab"
    for gap in (0.0, 0.02, 0.05):  # (where the second one lands varies: stopping, saving, exiting)
        out = tmp_path / f"out{gap}.json"
        p = subprocess.Popen(
            [str(command), "replay", str(trace), "--real-time", "--out", str(out)],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            assert p.stdout is not None
            assert p.stdout.readline().startswith("replaying")  # (its handling is in place)
            p.send_signal(signal.SIGTERM)
            if gap:
                time.sleep(gap)
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 143, err
        assert "Traceback" not in err
        assert json.loads(out.read_text())["outcome"]["reason"] == "interrupted"


# --- 5. the deadline's words about a call whose hook was running ---------------------------------


@pytest.mark.parametrize("mode", ["parallel", "sequential", "eager"])
def test_the_deadline_says_a_call_was_in_its_hook_not_unfinished(mode: str) -> None:
    def on_tool_complete(ex: Any) -> None:
        if ex.index == 0:  # blocks the event loop for 0.6 s (as time.sleep would, on the virtual clock)
            asyncio.get_running_loop().advance(0.6)  # type: ignore[attr-defined]

    model = ScriptedModel(
        [ScriptedResponse(tool_calls=(("work", {"s": 0.1, "k": 0}), ("work", {"s": 0.2, "k": 1}))), "done"]
    )
    result = run_virtual(
        run(model, tools(), "go", mode=mode, timeout_s=0.4, hooks=Hooks(on_tool_complete=on_tool_complete))
    )
    assert (result.status, result.reason) == ("timeout", "deadline")
    first = result.executions[0]
    assert (first.status, first.ended_at) == ("ok", pytest.approx(0.1))
    error = result.error or ""
    assert "the calls at positions [0] had returned and were in their on_tool_complete hook" in error, error
    assert "[0] had started and not finished" not in error and "0, 1] had started" not in error


# --- 4. validate: more contradictions ------------------------------------------------------------


def test_validate_calls_a_reason_of_another_status_a_contradiction(tmp_path: Any) -> None:
    from tests.test_loop_eighth import tampered, two_rounds

    doc = two_rounds(tmp_path)
    doc["outcome"]["status"], doc["outcome"]["reason"] = "completed", "interrupted"
    code, out = tampered(tmp_path, doc)
    assert code == 1, out
    assert (
        "contradiction: outcome: completed/interrupted, but the reason 'interrupted' ends a run aborted"
        in out
    )


def test_validate_calls_a_final_answer_of_an_aborted_run_a_contradiction(tmp_path: Any) -> None:
    from tests.test_loop_eighth import tampered, two_rounds

    doc = two_rounds(tmp_path)
    doc["outcome"]["status"], doc["outcome"]["reason"] = "aborted", "aborted"
    assert doc["outcome"]["final_answer"] == "fin"
    code, out = tampered(tmp_path, doc)
    assert code == 1, out
    assert "contradiction: outcome: aborted/aborted, but it has a final answer 'fin'" in out
    assert "rounds[2]" in out  # (the round holding that answer)


def test_validate_calls_an_execution_naming_another_call_a_contradiction(tmp_path: Any) -> None:
    from tests.test_loop_eighth import tampered, two_rounds

    doc = two_rounds(tmp_path)
    ex = doc["rounds"][1]["tool_executions"][0]
    call_id, ex["tool_call_id"] = ex["tool_call_id"], "call_9_9"
    code, out = tampered(tmp_path, doc)
    assert code == 1, out
    assert (
        f"contradiction: rounds[1] call {call_id} (position 0): its execution names call_9_9, a call this "
        f"round does not have, and the next request answers {call_id} with that execution's result"
    ) in out

"""Issue 11, tenth check: what the verification report w11 found in the run loop.

2. ``bench`` died by SIGTERM / SIGINT (rc -15 / -2, nothing said) when the signal came in its last
   moments, after its output was written: the exit guard blocks the signal in the main thread only,
   and a thread still alive at exit (tqdm's progress-bar monitor) took it once Python's shutdown had
   put the default handling back. The guard now leaves the signals ignored for every thread.
3. a same-strategy replay of a recording cut by a signal (``aborted/interrupted``) ended
   ``aborted/aborted``: it keeps the recorded reason (another strategy's replay says ``aborted``).
4. validate passed executions that contradict themselves, their call, their round or the run.
5. option checks by one rule: a tool's ``timeout_s`` as RunConfig's, ``max_rounds=True``, and
   ``compare(timings=[...])`` are UsageErrors with RunConfig's words, not a TypeError or accepted.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolcall_lab import ScriptedModel, ScriptedResponse, ToolRegistry, load
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import AbortHandle, run
from toolcall_lab.replay import replay
from toolcall_lab.runs import RunResult
from toolcall_lab.trace import Trace, TraceMetadata

REPO = Path(__file__).resolve().parents[1]

A_THREAD_ALIVE_AT_EXIT = """
import os, signal, sys, threading, time
sys.argv[0] = os.path.join(os.path.dirname(sys.executable), "toolcall-lab")  # as the console script
import toolcall_lab
from toolcall_lab import _startup
_startup.release()
_startup.rearm()
threading.Thread(target=threading.Event().wait, daemon=True).start()  # alive at exit, as tqdm's monitor


class Late:
    def __del__(self, kill=os.kill, pid=os.getpid(), sig=getattr(signal, sys.argv[1]), sleep=time.sleep):
        kill(pid, sig)  # (in Python's shutdown, after it took its own handlers away)
        sleep(0.2)


late = Late()
_startup._exiting()  # (the guard's exit handler: what follows runs after it, as in the shutdown)
sys.exit(143 if sys.argv[1] == "SIGTERM" else 130)  # the command's own status
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_in_the_shutdown_does_not_kill_a_command_with_a_thread_alive(name: str, code: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", A_THREAD_ALIVE_AT_EXIT, name],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr


def _cut_by_a_signal(path: Path, reason: str) -> None:
    """A recording stopped at 0.15 s, saved as a signal (or a cancellation) would have cut it."""
    tools = ToolRegistry()

    @tools.register
    async def work(s: float) -> str:
        """Sleeps s seconds."""
        await asyncio.sleep(s)
        return "ok"

    abort = AbortHandle()
    model = ScriptedModel([ScriptedResponse(tool_calls=(("work", {"s": 0.1}), ("work", {"s": 0.2}))), "fin"])

    async def main() -> RunResult:
        asyncio.get_running_loop().call_later(0.15, abort.abort, "stop")
        return await run(model, tools, "go", mode="parallel", abort=abort)

    result = run_virtual(main())
    doc = Trace.from_run(result, TraceMetadata(title="cut", origin="scripted")).to_file_dict()
    assert (doc["outcome"]["status"], doc["outcome"]["reason"]) == ("aborted", "aborted")
    doc["outcome"]["reason"] = reason
    doc["outcome"]["error"] = "KeyboardInterrupt (Ctrl-C); the run stopped"
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("reason", ["interrupted", "cancelled", "aborted"])
def test_a_same_strategy_replay_of_a_cut_recording_keeps_its_reason(tmp_path: Path, reason: str) -> None:
    path = tmp_path / "cut.json"
    _cut_by_a_signal(path, reason)
    same = replay(load(path), "parallel")
    assert (same.status, same.reason) == ("aborted", reason)
    assert [e.status for e in same.executions] == ["ok", "cancelled"]
    other = replay(load(path), "sequential")
    assert (other.status, other.reason) == ("aborted", "aborted")


# --- 4. validate: an execution against itself, its call, its round and the run ---------------------


def _two_calls(tmp_path: Path) -> dict[str, object]:
    """A completed parallel run: round 0 asks for two calls (0.1 s and 0.05 s), round 1 answers."""
    from toolcall_lab.trace_files import save

    tools = ToolRegistry()

    @tools.register
    async def work(s: float) -> str:
        """Sleeps s seconds."""
        await asyncio.sleep(s)
        return "done"

    model = ScriptedModel([ScriptedResponse(tool_calls=(("work", {"s": 0.1}), ("work", {"s": 0.05}))), "fin"])
    result = run_virtual(run(model, tools, "go", mode="parallel"))
    path = save(Trace.from_run(result, TraceMetadata(title="two", origin="scripted")), tmp_path / "t.json")
    doc: dict[str, object] = json.loads(path.read_text())
    return doc


def _validate(tmp_path: Path, doc: dict[str, object]) -> tuple[int, str]:
    from tests.test_loop_eighth import tampered

    return tampered(tmp_path, doc)


def _executions(doc: dict[str, object], k: int) -> list[dict[str, object]]:
    return doc["rounds"][k]["tool_executions"]  # type: ignore[index,no-any-return]


def test_validate_the_untouched_run_is_fine(tmp_path: Path) -> None:
    code, out = _validate(tmp_path, _two_calls(tmp_path))
    assert code == 0, out


def test_validate_a_call_not_executed_that_ran_and_kept_its_result(tmp_path: Path) -> None:
    doc = _two_calls(tmp_path)
    ex = _executions(doc, 0)[1]
    ex["status"], ex["error"] = (
        "cancelled",
        "Not executed: the run was aborted (stop) before this call started.",
    )
    code, out = _validate(tmp_path, doc)
    assert code == 1, out
    assert "contradiction: rounds[0] call call_0_1 (position 1): 'Not executed', but it ran 0.050000 s" in out
    assert (
        "contradiction: rounds[0] call call_0_1 (position 1): 'Not executed', but it keeps a result 'done'"
        in out
    )
    assert "but the run completed (completed/final_answer)" in out


def test_validate_an_execution_under_another_name(tmp_path: Path) -> None:
    doc = _two_calls(tmp_path)
    _executions(doc, 0)[0]["name"] = "other"
    code, out = _validate(tmp_path, doc)
    assert code == 1, out
    assert (
        "contradiction: rounds[0] call call_0_0 (position 0): its execution ran 'other', the call is to 'work'"
        in out
    )


def test_validate_an_index_given_twice(tmp_path: Path) -> None:
    doc = _two_calls(tmp_path)
    _executions(doc, 0)[1]["index"] = 0
    code, out = _validate(tmp_path, doc)
    assert code == 1, out
    assert "contradiction: rounds[0]: the executions call_0_0, call_0_1 all have index 0" in out


def test_validate_an_execution_that_ended_after_the_request_carrying_its_result(tmp_path: Path) -> None:
    doc = _two_calls(tmp_path)
    ex = _executions(doc, 0)[0]
    ex["started_at"], ex["ended_at"] = 0.2, 0.3
    doc["outcome"]["wall_time_s"] = 0.3  # type: ignore[index]
    code, out = _validate(tmp_path, doc)
    assert code == 1, out
    assert (
        "contradiction: rounds[0] call call_0_0 (position 0): it ended at 0.300000 s, after rounds[1]'s request "
        "(0.100000 s), which carries its result"
    ) in out


# --- 5. options checked by one rule (toolcall_lab._rules) ------------------------------------------


@pytest.mark.parametrize("value", ["1", True, float("nan"), 0, -1.0])
def test_a_tools_timeout_follows_the_runs_rule(value: object) -> None:
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.runs import RunConfig

    with pytest.raises(
        UsageError, match=r"RunConfig\.timeout_s=.*: must be > 0 seconds, or None for no deadline"
    ):
        RunConfig(timeout_s=value)  # type: ignore[arg-type]
    tools = ToolRegistry()
    with pytest.raises(UsageError, match=r"Tool\.timeout_s=.*: must be > 0 seconds, or None for no limit"):
        tools.register(lambda: "x", name="f", timeout_s=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [True, 0, 2.0, "3"])
def test_max_rounds_is_an_integer_not_a_bool(value: object) -> None:
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.runs import RunConfig

    with pytest.raises(UsageError, match=r"RunConfig\.max_rounds=.*: must be an integer >= 1"):
        RunConfig(max_rounds=value)  # type: ignore[arg-type]


def test_compare_refuses_timings_that_are_not_a_name() -> None:
    from toolcall_lab.analysis import compare
    from toolcall_lab.exceptions import UsageError

    with pytest.raises(
        UsageError, match=r"compare\(timings=\['recorded'\]\): use one of any, measured, recorded"
    ):
        compare([], ["parallel"], timings=["recorded"])  # type: ignore[arg-type]

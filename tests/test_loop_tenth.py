"""Issue 11, tenth check: what the verification report w11 found in the run loop.

2. ``bench`` died by SIGTERM / SIGINT (rc -15 / -2, nothing said) when the signal came in its last
   moments, after its output was written: the exit guard blocks the signal in the main thread only,
   and a thread still alive at exit (tqdm's progress-bar monitor) took it once Python's shutdown had
   put the default handling back. The guard now leaves the signals ignored for every thread.
3. a same-strategy replay of a recording cut by a signal (``aborted/interrupted``) ended
   ``aborted/aborted``: it keeps the recorded reason (another strategy's replay says ``aborted``).
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

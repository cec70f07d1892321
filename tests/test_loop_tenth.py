"""Issue 11, tenth check: what the verification report w11 found in the run loop.

2. ``bench`` died by SIGTERM / SIGINT (rc -15 / -2, nothing said) when the signal came in its last
   moments, after its output was written: the exit guard blocks the signal in the main thread only,
   and a thread still alive at exit (tqdm's progress-bar monitor) took it once Python's shutdown had
   put the default handling back. The guard now leaves the signals ignored for every thread.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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

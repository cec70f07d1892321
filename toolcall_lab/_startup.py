"""The command line's signal guard from the process's first import until it exits: a Ctrl-C or
SIGTERM while the ``toolcall-lab`` command starts (importing the package, building its parser) exits
130 / 143 with one line, never a traceback and never dying by the signal; one that comes while a
command without handling of its own runs stops it as Ctrl-C does (`toolcall_lab.cli` says it in one
line, 130 / 143); one that comes after the command has finished (e.g. a second signal just after a
stopped run was saved) is said and the command exits with its own status. A command's own handling
(`toolcall_lab._stopping.catch_signals`, `toolcall_lab._workers.StopOnce`) replaces the guard in one
step (`guarding`) and hands it back in one step when it ends (`hand_back`): Python's defaults, which
die by SIGTERM, are never in place in between.

Installed only in a process started as the command (the ``toolcall-lab`` console script, or
``python -m toolcall_lab``), never when the library is imported or `toolcall_lab.cli.main` is called
from Python. Standard library only: it runs before anything heavy is imported."""

from __future__ import annotations

import atexit
import os
import signal
import sys

TYPE_CHECKING = False  # (not `typing`'s: this module runs before anything but os, signal and sys)
if TYPE_CHECKING:
    from typing import Any

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_DEFAULTS: dict[int, Any] = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
_phase = ["off"]  # off | starting | running | finished
_mine: list[int] = []


def _words(signum: int) -> tuple[str, int]:
    if signum == signal.SIGTERM:
        return "terminated (SIGTERM)", 143
    return "interrupted (Ctrl-C)", 130


class Terminated(KeyboardInterrupt):
    """SIGTERM while a command without handling of its own runs: stopped as by Ctrl-C (`toolcall_lab
    .cli` says it and exits 143)."""

    signal_name = "SIGTERM"


def _on_signal(signum: int, frame: Any) -> None:
    words, code = _words(signum)
    if _phase[0] == "finished":
        os.write(2, f"toolcall-lab: {words} as it exited; what it did is done\n".encode())
        return
    if _phase[0] == "running":  # (a command that has no handling of its own: as Ctrl-C stops it)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
    os.write(2, f"toolcall-lab: {words} while starting; nothing was done\n".encode())
    raise SystemExit(code)


def is_command() -> bool:
    """Whether this process was started as the ``toolcall-lab`` console script."""
    return bool(sys.argv) and os.path.basename(sys.argv[0]).startswith("toolcall-lab")


def install() -> None:
    """Guard the start-up (main thread only, and only where Python's default handling is in place)."""
    if _phase[0] != "off":
        return
    for s in _SIGNALS:
        if signal.getsignal(s) is _DEFAULTS[s]:
            try:
                signal.signal(s, _on_signal)
            except ValueError:  # not the main thread (signal handlers belong to it): no guard
                return
            _mine.append(s)
    _phase[0] = "starting"
    atexit.register(_exiting)


def _exiting() -> None:
    """(The last exit handler: Python's own shutdown follows, where no Python handler runs any more
    and it puts the defaults back, so SIGTERM would kill the process by the signal) from here on a
    signal is held back (blocked, then ignored in every thread) and dies with the process: the command
    exits with its own status. One that
    came just before is said here; until here the guard said it."""
    held = [s for s in _mine if signal.getsignal(s) is _on_signal]
    if not held:
        return
    block = getattr(signal, "pthread_sigmask", None)
    if block is None:  # (no POSIX signal masks: ignored, unsaid)
        for s in held:
            signal.signal(s, signal.SIG_IGN)
        return
    block(signal.SIG_BLOCK, held)
    for s in sorted(signal.sigpending() & set(held)):
        words, _ = _words(s)
        os.write(2, f"toolcall-lab: {words} as it exited; what it did is done\n".encode())
    for s in held:  # (the mask is this thread's: another thread still alive, e.g. a progress bar's
        signal.signal(s, signal.SIG_IGN)  # monitor, would take the signal once the shutdown has put
        # the default back, and die by it; an ignored signal is left ignored by the shutdown)


def active() -> bool:
    """Whether the guard is installed (this process is the command)."""
    return _phase[0] != "off"


def release() -> None:
    """The command starts: a signal stops it as Ctrl-C does (KeyboardInterrupt, or `Terminated`),
    until the command's own handling replaces the guard (`guarding`). The guard stays installed: a
    SIGTERM is never left to Python's default, which kills the process without a word."""
    if _phase[0] == "starting":
        _phase[0] = "running"


def guarding(signum: int) -> bool:
    """Whether the guard handles `signum` now: a command's own handling replaces it as it would
    replace Python's default, and gives it back with `hand_back` when it ends."""
    return _phase[0] != "off" and signal.getsignal(signum) is _on_signal


def hand_back(signum: int) -> None:
    """A command's own handling of `signum` (which had replaced the guard) has ended: the command
    has done its work, so a signal from now on is said and keeps its exit status."""
    _phase[0] = "finished"
    signal.signal(signum, _on_signal)


def rearm() -> None:
    """The command has finished: a signal from now on is said and does not change its exit status."""
    _phase[0] = "finished"
    for s in _mine:
        if signal.getsignal(s) is _DEFAULTS[s]:
            signal.signal(s, _on_signal)

"""The command line's signal guard from the process's first import on: a Ctrl-C or SIGTERM while the
``toolcall-lab`` command starts (importing the package, building its parser) exits 130 / 143 with one
line, never a traceback and never dying by the signal; one that comes after the command has
finished (e.g. a second signal just after a stopped run was saved) is said and the command exits
with its own status. While the command itself runs, the handling is the command's (`toolcall_lab
._stopping.catch_signals`, `toolcall_lab._workers.StopOnce`: they take over from Python's defaults).

Installed only in a process started as the command (the ``toolcall-lab`` console script, or
``python -m toolcall_lab``), never when the library is imported or `toolcall_lab.cli.main` is called
from Python. Standard library only: it runs before anything heavy is imported."""

from __future__ import annotations

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


def _on_signal(signum: int, frame: Any) -> None:
    words, code = _words(signum)
    if _phase[0] == "finished":
        os.write(2, f"toolcall-lab: {words} as it exited; what it did is done\n".encode())
        return
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


def active() -> bool:
    """Whether the guard is installed (this process is the command)."""
    return _phase[0] != "off"


def release() -> None:
    """The command starts: Python's defaults again, which the command's own handling replaces."""
    _phase[0] = "running"
    for s in _mine:
        signal.signal(s, _DEFAULTS[s])


def rearm() -> None:
    """The command has finished: a signal from now on is said and does not change its exit status."""
    _phase[0] = "finished"
    for s in _mine:
        if signal.getsignal(s) is _DEFAULTS[s]:
            signal.signal(s, _on_signal)

"""Worker processes for ``toolcall-lab bench --jobs N`` that never outlive the command, and Ctrl-C /
SIGTERM in a command that runs synchronous work (`StopOnce`).

A job scheduler (or ``kill -INT <pid>``) signals the bench process alone, not its process group, so
the workers never see the signal: left to themselves they would finish their traces (or hang on a
strategy that never returns) holding the caller's pipes open. A terminal's Ctrl-C, or a SIGTERM to the
process group, reaches every worker at once instead; a worker that died of it would leave the pool
broken while the parent was still cancelling what it had queued (a traceback from the pool's own
thread). So: workers ignore SIGINT and SIGTERM (the parent reports the signal once, and stops them),
the parent kills them when it is interrupted or fails, and each worker watches its parent and exits
when the parent is gone (also after a ``kill -9``).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import InvalidStateError, ProcessPoolExecutor
from types import TracebackType
from typing import Any

from toolcall_lab import _startup
from toolcall_lab._stopping import Terminated, signalled

__all__ = ["StopOnce", "Terminated", "process_pool", "stop_workers"]


class StopOnce:
    """Ctrl-C and SIGTERM in a command that runs synchronous work (``bench``), by one rule:

    1. the first raises KeyboardInterrupt (or `Terminated`) where the work is, so it stops and keeps
       what it did (the command reports and writes it, and exits 130 / 143);
    2. every later one is said on stderr and ignored: stopping the workers, reporting and writing
       the results finish (never cut in half, never a traceback);
    3. within `hold` (files being written), even the first is only said and remembered (`came`):
       the command acts on it once the files are whole.

    Installed in the main thread only, for each signal only where Python's default handling is in
    place. Messages are written with one system call (a signal can come while the command prints)."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.came: list[int] = []
        self.holding: str | None = None
        self._undo: list[tuple[int, Any]] = []

    def __enter__(self) -> StopOnce:
        if threading.current_thread() is threading.main_thread():
            defaults: dict[int, Any] = {
                signal.SIGINT: signal.default_int_handler,
                signal.SIGTERM: signal.SIG_DFL,
            }
            for s, default in defaults.items():
                if _startup.guarding(s):  # (the command's start-up guard: replaced in one step)
                    signal.signal(s, self._on_signal)
                    self._undo.append((s, None))
                elif signal.getsignal(s) is default:
                    signal.signal(s, self._on_signal)
                    self._undo.append((s, default))
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for s, default in self._undo:
            if default is None:  # (the guard again, in one step)
                _startup.hand_back(s)
            else:
                signal.signal(s, default)
        self._undo.clear()

    @contextlib.contextmanager
    def hold(self, doing: str) -> Iterator[None]:
        """Within the block, a signal does not stop `doing` (it is said, and remembered)."""
        before, self.holding = self.holding, doing
        try:
            yield
        finally:
            self.holding = before

    @property
    def first(self) -> KeyboardInterrupt | None:
        """What the first signal that came stands for (None: none came)."""
        if not self.came:
            return None
        return Terminated() if self.came[0] == signal.SIGTERM else KeyboardInterrupt()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.came.append(signum)
        name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
        if len(self.came) == 1 and self.holding is None:
            raise signalled(signum)
        again = " again" if len(self.came) > 1 else ""
        doing = self.holding or "stopping and writing what was done so far"
        text = f"toolcall-lab {self.command}: {name}{again}: still {doing}; it will be kept\n"
        os.write(2, text.encode("utf-8", "backslashreplace"))


def _worker_started() -> None:
    """Each worker: signals are the parent's to report and act on (no traceback per worker, and no
    worker dying under the pool while the parent stops it); it exits as soon as its parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is not None:
        watch = threading.Thread(target=_exit_with, args=(parent,), name="toolcall_lab parent watch")
        watch.daemon = True
        watch.start()


def _exit_with(parent: Any) -> None:
    parent.join()  # (returns when the parent process has ended: its end of a pipe closed)
    os._exit(1)


def process_pool(jobs: int) -> ProcessPoolExecutor:
    """A pool of `jobs` worker processes that end with the command (see the module docstring)."""
    return ProcessPoolExecutor(jobs, initializer=_worker_started)


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """Stop the pool now: pending work is dropped and running workers are killed and waited for,
    rather than left to finish (or hang) after the command has stopped. The pool's own thread, which
    then finds its workers gone, may try to fail work the command had already cancelled: that
    harmless `InvalidStateError` is not printed (nothing else it raises is hidden)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    before = threading.excepthook

    def quiet(args: threading.ExceptHookArgs) -> None:
        if args.thread is manager and isinstance(args.exc_value, InvalidStateError):
            return
        before(args)

    threading.excepthook = quiet
    try:
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            with contextlib.suppress(Exception):
                if process.is_alive():
                    process.kill()  # (SIGKILL: workers ignore SIGTERM, see `_worker_started`)
        for process in processes:
            with contextlib.suppress(Exception):
                process.join(5)
        if manager is not None and manager.is_alive():
            manager.join(10)
    finally:
        threading.excepthook = before

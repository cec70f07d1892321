"""Worker processes for ``toolcall-lab bench --jobs N`` that never outlive the command, and SIGTERM
handled like Ctrl-C.

A job scheduler (or ``kill -INT <pid>``) signals the bench process alone, not its process group, so
the workers never see the signal: left to themselves they would finish their traces (or hang on a
strategy that never returns) holding the caller's pipes open. So: workers ignore SIGINT (the parent
reports Ctrl-C once, and stops them), the parent terminates them when it is interrupted or fails,
and each worker watches its parent and exits when the parent is gone (also after a ``kill -9``).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, so a command stops the same way
    (partial results kept and written); the command exits 128 + 15 = 143."""

    signal_name = "SIGTERM"


def on_sigterm(signum: int, frame: Any) -> None:
    """The SIGTERM handler `sigterm_as_interrupt` installs."""
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises `Terminated` in the main thread (only where Python's default
    handling is in place: the main thread, SIGTERM not ignored or handled by someone else)."""
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _worker_started() -> None:
    """Each worker: Ctrl-C is the parent's to report (no traceback per worker); SIGTERM kills it
    (the parent's handler is not inherited through fork); it exits as soon as its parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
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
    """Stop the pool now: pending work is dropped and running workers are terminated (SIGTERM) and
    waited for, rather than left to finish (or hang) after the command has stopped."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            if process.is_alive():
                process.terminate()
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)

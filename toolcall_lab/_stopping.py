"""Stopping a run from outside: an `AbortHandle` (another cell, another thread), and Ctrl-C during
`run_sync`, caught so the record can say it was a KeyboardInterrupt."""

from __future__ import annotations

import asyncio
import contextvars
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from toolcall_lab.exceptions import UsageError

if TYPE_CHECKING:
    from toolcall_lab.runs import RunResult

T = TypeVar("T")


class AbortHandle:
    """Stop a run from elsewhere (e.g. another notebook cell): in-flight calls are cancelled and
    drained, finished results are kept, and the run ends with status ``aborted``. Thread-safe.

    One handle stops one run. `abort` before the run starts stops it as soon as it starts. A handle
    that was aborted cannot be passed to another run (`run` raises `UsageError`: that run would stop
    at 0 s); `reset` makes it usable again. A handle whose run ended without an abort can be reused.
    """

    def __init__(self) -> None:
        self.aborted = False
        self.reason = ""
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._used = False

    def _claim(self) -> None:
        """A run takes the handle (before it starts)."""
        with self._lock:
            if self._used and self.aborted:
                raise UsageError(
                    f"this AbortHandle was already aborted ({self.reason}) and has stopped a run; the run "
                    "given it would stop at once: make a new AbortHandle for each run, or call reset()"
                )
            self._used = True

    def _attach(self, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._task, self._loop = task, task.get_loop()
            if self.aborted:
                task.cancel()

    def reset(self) -> None:
        """Make the handle usable for another run (it forgets the abort)."""
        with self._lock:
            self.aborted, self.reason, self._used = False, "", False
            self._task = self._loop = None

    def abort(self, reason: str = "aborted by the user") -> None:
        with self._lock:
            self.aborted, self.reason = True, reason
            task, loop = self._task, self._loop
        if task is not None and loop is not None and not task.done():
            loop.call_soon_threadsafe(task.cancel)


class Outside:
    """What `run_sync` and `_run` share: the task running the run, the partial record of a run that
    was cancelled, and how many Ctrl-Cs arrived (`run_sync` catches SIGINT to say it was one)."""

    __slots__ = ("result", "sigint", "task")

    def __init__(self) -> None:
        self.result: RunResult | None = None
        self.sigint = 0
        self.task: asyncio.Task[Any] | None = None


def catch_sigint(outside: Outside) -> Callable[[], None]:
    """Ctrl-C during `run_sync` cancels the run (as ``asyncio.run`` would) and is remembered, so the
    record says it was a KeyboardInterrupt; a second Ctrl-C raises at once. Installed only where
    ``asyncio.run`` would install its own (main thread, Python's default handler); returns the undo."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        return lambda: None

    def on_sigint(signum: int, frame: Any) -> None:
        outside.sigint += 1
        task = outside.task
        if outside.sigint == 1 and task is None:
            return  # the run has not started: it stops as it starts (see `_run_state`)
        if outside.sigint == 1 and task is not None and not task.done():
            task.cancel()
            task.get_loop().call_soon_threadsafe(lambda: None)  # wake the loop
            return
        raise KeyboardInterrupt()

    def undo() -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)

    signal.signal(signal.SIGINT, on_sigint)
    return undo


CURRENT: contextvars.ContextVar[Outside | None] = contextvars.ContextVar("toolcall_lab_outside", default=None)
"""The `Outside` of `run_main`, which the first `run` inside it takes (see `loop.run`)."""


def run_main(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` where Ctrl-C stops the run `main` awaits as it stops `run_sync`'s: the
    record ends ``aborted/interrupted`` and the KeyboardInterrupt raised carries it as
    ``partial_result`` (the CLI's ``record`` and real-time ``replay`` save it). A Ctrl-C that comes
    before the run starts stops it as it starts; a second one raises at once."""
    outside = Outside()
    undo = catch_sigint(outside)
    token = CURRENT.set(outside)  # asyncio.run's task starts from a copy of this context
    try:
        result = asyncio.run(main)
    except asyncio.CancelledError:
        if not outside.sigint:
            raise
        interrupt = KeyboardInterrupt()  # what Ctrl-C raises; the run's record rides on it
        interrupt.partial_result = outside.result  # type: ignore[attr-defined]
        raise interrupt from None
    except KeyboardInterrupt as exc:  # a second Ctrl-C
        if outside.result is not None and getattr(exc, "partial_result", None) is None:
            exc.partial_result = outside.result  # type: ignore[attr-defined]
        raise
    finally:
        CURRENT.reset(token)
        undo()
    if outside.sigint and outside.task is None:  # Ctrl-C, and no run ever started to take it
        raise KeyboardInterrupt()
    return result

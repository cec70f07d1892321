"""Time for runs: the event loop's clock, and a virtual event loop on which waiting costs nothing.

The loop, the modes and the replay models only ever call ``asyncio.sleep`` and read
``loop.time()``. On `VirtualEventLoop`, ``time()`` is a counter that jumps straight to the next
scheduled timer whenever nothing is ready, so a replay with seconds of recorded latency runs in
milliseconds and gives identical timings run after run.

Limits of the virtual clock (it is for fully simulated runs):
- real I/O is not simulated: a socket read under a timeout can time out spuriously, because virtual
  time jumps over the wait, and sockets are only polled when no timer is pending. Do not mix network
  calls into a virtual run.
- sync tools (``asyncio.to_thread`` / ``run_in_executor``) run inline and take zero virtual time;
  a sync tool with a `Tool.timeout_s` runs in a worker thread instead, the loop blocking for at most
  that many *real* seconds (still no virtual time), so a stuck one times out rather than hanging
  the run.

Timers due at the same virtual instant run in the order they were scheduled (a real clock never
quite ties; a virtual one does all the time): a run's deadline, set when the run starts, cuts a call
that would have finished at that very instant, on every run and every replay alike.

A virtual run can deadlock: code waits for something nothing will ever do (an ``asyncio.Event``
never set), and the loop has no timer, nothing ready and no I/O to wait for. Real time would wait
forever; the virtual loop notices (after `STALL_GRACE_S` real seconds, in case a thread of the
user's own is about to wake it) and asks its stall handlers (`VirtualEventLoop.on_stall`, e.g. the
run loop, which ends a strategy that never returns) to act.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import heapq
import math
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def now() -> float:
    """The running loop's clock (virtual on `VirtualEventLoop`)."""
    return asyncio.get_running_loop().time()


class _VirtualSelector(selectors.DefaultSelector):
    """A selector that advances virtual time instead of waiting for the next timer.

    When a timer is pending (timeout > 0) it does not poll at all: callbacks from other threads land
    in the loop's ready queue and are seen on the next iteration, and real sockets are not part of a
    virtual run. With nothing scheduled (timeout None) it blocks on real I/O as usual.
    """

    loop: VirtualEventLoop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready: list[tuple[selectors.SelectorKey, int]]
        if timeout is None and self.loop.on_stall and not self._real_io():
            ready = super().select(STALL_GRACE_S)  # (a thread waking the loop lands here)
            if ready or not self.loop._stalled():
                return ready
            return []
        if timeout is None or timeout <= 0:
            ready = super().select(timeout)
            return ready
        self.loop.advance(timeout)
        return []

    def _real_io(self) -> bool:
        """Whether anything but the loop's own wake-up socket is registered (real I/O to wait for)."""
        own = getattr(self.loop, "_ssock", None)
        own_fd = own.fileno() if own is not None else -1
        return any(fd != own_fd for fd in self.get_map())


INSTANT_END_TRIES = 10_000
"""Turns of the loop `VirtualEventLoop.call_at_instant_end` waits at most for the instant to end."""

STALL_GRACE_S = 0.2
"""Real seconds a deadlocked virtual loop waits (for a thread of the user's own) before it calls its
stall handlers."""


class _Timer(asyncio.TimerHandle):
    """A timer ordered by its time, then by when it was scheduled (asyncio's own compare the time
    only, so the heap runs timers due at one instant in no set order)."""

    __slots__ = ("_seq",)

    def __init__(self, seq: int, when: float, callback: Any, args: Any, loop: Any, context: Any) -> None:
        super().__init__(when, callback, args, loop, context)
        self._seq = seq

    def __lt__(self, other: object) -> bool:
        if isinstance(other, _Timer):
            a, b = self._when, other._when  # type: ignore[attr-defined]
            return bool(a < b or (a == b and self._seq < other._seq))
        return NotImplemented

    def __gt__(self, other: object) -> bool:
        if isinstance(other, _Timer):
            a, b = self._when, other._when  # type: ignore[attr-defined]
            return bool(a > b or (a == b and self._seq > other._seq))
        return NotImplemented

    __hash__ = asyncio.TimerHandle.__hash__


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop whose clock is virtual: sleeping advances time instantly.

    `on_stall`: callbacks called when the loop is deadlocked (nothing ready, no timer, no I/O); each
    returns True when it did something about it (scheduled work), else the loop waits as any loop
    would."""

    on_stall: list[Callable[[], bool]]

    def __init__(self, start: float = 0.0) -> None:
        self.on_stall = []
        selector = _VirtualSelector()
        selector.loop = self
        super().__init__(selector)
        self._base_resolution: float = self._clock_resolution  # type: ignore[has-type]
        self._virtual_now = start
        self._timer_seq = 0
        self._set_resolution()

    def time(self) -> float:
        return self._virtual_now

    def call_at(  # type: ignore[override]
        self, when: float, callback: Callable[..., Any], *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        """asyncio's `call_at`, its timer ordered first-scheduled-first among those due at one
        instant (see the module docstring)."""
        if when is None:
            raise TypeError("when cannot be None")
        self._check_closed()  # type: ignore[attr-defined]
        self._timer_seq += 1
        timer = _Timer(self._timer_seq, when, callback, args, self, context)
        if timer._source_traceback:  # type: ignore[attr-defined]
            del timer._source_traceback[-1]  # type: ignore[attr-defined]
        heapq.heappush(self._scheduled, timer)  # type: ignore[attr-defined]
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    def call_at_instant_end(self, callback: Callable[[], Any]) -> None:
        """Call `callback` once everything due at this virtual instant has run: nothing ready, no
        timer due now (what a real clock, which never quite ties, would run first anyway). Gives up
        deferring after `INSTANT_END_TRIES` turns (code that keeps rescheduling itself at one instant)."""
        tries = [0]

        def check() -> None:
            scheduled = self._scheduled  # type: ignore[attr-defined]
            due = bool(scheduled) and scheduled[0]._when <= self._virtual_now
            if (self._ready or due) and tries[0] < INSTANT_END_TRIES:  # type: ignore[attr-defined]
                tries[0] += 1
                self.call_soon(check)
                return
            callback()

        self.call_soon_threadsafe(check)

    def _stalled(self) -> bool:
        """The loop is deadlocked: ask the stall handlers; True if one of them acted."""
        acted = False
        for handler in list(self.on_stall):
            acted = bool(handler()) or acted
        return acted

    def advance(self, seconds: float) -> None:
        """Move virtual time forward (to the next timer exactly when one is due)."""
        target = self._virtual_now + seconds
        scheduled = self._scheduled  # type: ignore[attr-defined]
        if scheduled and scheduled[0]._when > target:
            target = scheduled[0]._when
        self._virtual_now = target
        self._set_resolution()

    def _set_resolution(self) -> None:
        """The clock's resolution is at least the spacing of floats at the current time.

        asyncio runs a timer once ``when < time() + resolution``; far from zero (1e8 s and beyond) a
        float cannot hold ``time() + 1e-9``, the sum rounds back to ``time()``, a timer due exactly
        now never counts as due, and the loop would spin forever without advancing."""
        self._clock_resolution = max(self._base_resolution, 2 * math.ulp(self._virtual_now))

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        """Run sync work inline: zero virtual time, and no thread racing the virtual clock."""
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as exc:  # delivered to the awaiting coroutine, like an executor would
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            if isinstance(exc, StopIteration):  # no future can carry it (PEP 479 does the same)
                error = RuntimeError("the function raised StopIteration")
                error.__cause__ = exc
                exc = error
            future.set_exception(exc)
        return future


def in_running_loop() -> bool:
    """Whether this thread runs an event loop now (asked without leaving a ``RuntimeError`` as the
    context of whatever is raised next: an error from a run started after the check would otherwise
    print "no running event loop ... During handling of the above exception" before itself)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on a fresh `VirtualEventLoop`.

    Works from a notebook too: inside a running event loop it runs in a helper thread (virtual runs
    take milliseconds, so the cell blocks only that long).
    """
    if not in_running_loop():  # (outside the `except`: the run's own errors carry no "no running loop")
        return _run_on_virtual_loop(main)
    ctx = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="toolcall-lab-virtual") as pool:
        return pool.submit(ctx.run, _run_on_virtual_loop, main).result()


def _run_on_virtual_loop(main: Coroutine[Any, Any, T]) -> T:
    loop = VirtualEventLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

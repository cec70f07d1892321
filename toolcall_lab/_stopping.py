"""Stopping a run from outside: an `AbortHandle` (another cell, another thread), and signals (Ctrl-C;
SIGTERM too in a CLI command) during `run_sync`, `run_main` and the CLI's run commands, by one rule
(`catch_signals`): the first stops the run and keeps its record, a second stops waiting for calls
that do not stop, and nothing is ever raised into the event loop by either."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
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
        self._delivered = False
        self._held = False
        """An abort at an instant's end (`_abort`): its cancellation waits for that end, even when the
        run refuses to start a call meanwhile."""
        self._on_abort: Callable[[], None] | None = None
        self._ends_as: str | None = None
        """(A same-strategy replay of a run cut off otherwise than by an abort, e.g. a signal's
        ``interrupted``) the recorded reason the run ends with when this handle stops it."""
        self._wins_tie_at: tuple[float, str] | None = None
        """(A replay of a run aborted at its deadline's instant) that instant (s from the run's start)
        and the abort's reason: the run ends aborted even when the deadline's timer ran first."""

    def _claim(self) -> None:
        """A run takes the handle (before it starts)."""
        with self._lock:
            if self._used and self.aborted:
                raise UsageError(
                    f"this AbortHandle was already aborted ({self.reason}) and has stopped a run; the run "
                    "given it would stop at once: make a new AbortHandle for each run, or call reset()"
                )
            self._used = True

    def _attach(self, task: asyncio.Task[Any], on_abort: Callable[[], None] | None = None) -> None:
        """The run's task (an abort cancels it) and `on_abort`, called the moment `abort` is (from
        any thread): the run refuses to start any call from then on, before the cancellation
        reaches its task (`toolcall_lab._hooks.HookCalls.ask_stop`)."""
        with self._lock:
            self._task, self._loop, self._on_abort = task, task.get_loop(), on_abort
            aborted = self.aborted
        if aborted:
            if on_abort is not None:
                on_abort()
            self._deliver()

    def reset(self) -> None:
        """Make the handle usable for another run (it forgets the abort)."""
        with self._lock:
            self.aborted, self.reason, self._used, self._delivered = False, "", False, False
            self._held = False
            self._task = self._loop = self._on_abort = None

    def abort(self, reason: str = "aborted by the user") -> None:
        """Stop the run: from this call on no call of the run starts (also one the run was about to
        start in the same step of the event loop, e.g. the next call under ``sequential`` after the
        tool or hook calling `abort` returns); calls in flight are cancelled."""
        self._abort(reason)

    def _abort(self, reason: str, at_instant_end: bool = False) -> None:
        """`abort`; `at_instant_end`: on a virtual clock, the cancellation of calls in flight waits
        until everything due at this instant has run (a replay's cut at the recorded end of a run
        that was aborted: a call that finished at that instant finished, as recorded, and a response
        due at that instant arrives whole, as recorded, with the round it makes), while no call
        starts from now on (a call refused meanwhile does not bring the cancellation forward)."""
        with self._lock:
            task, loop = self._task, self._loop
            when_idle = getattr(loop, "call_at_instant_end", None) if at_instant_end else None
            held = when_idle is not None and task is not None and not task.done()
            self.aborted, self.reason, self._held = True, reason, held
            on_abort = self._on_abort
        if on_abort is not None:
            on_abort()
        if task is not None and loop is not None and not task.done():
            if held and when_idle is not None:
                when_idle(lambda: self._deliver(at_end=True))
            else:
                loop.call_soon_threadsafe(self._deliver)

    def _deliver(self, at_end: bool = False) -> None:
        """(On the run's loop) cancel the run's task, once: the abort's cancellation arrives either
        from `abort`'s callback or from the run itself, when it refuses to start a call (whichever
        comes first; for an abort at an instant's end, `at_end`: only from its callback)."""
        with self._lock:
            if self._delivered or (self._held and not at_end):
                return
            self._delivered = True
            task = self._task
        if task is not None and not task.done():
            task.cancel()


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, so a command stops the same way
    (partial results kept and written); the command exits 128 + 15 = 143."""

    signal_name = "SIGTERM"


def signalled(signum: int) -> KeyboardInterrupt:
    """What a handler of ours raises for `signum`: KeyboardInterrupt (SIGINT) or `Terminated`
    (SIGTERM), marked ``from_signal`` (raised from a handler's frame, it would otherwise look like a
    ``raise`` in the code it interrupted: see `toolcall_lab.loop`)."""
    exc = Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
    exc.from_signal = True  # type: ignore[attr-defined]
    return exc


class Outside:
    """What a run shares with whoever started it from outside the event loop (`run_sync`,
    `run_main`, the CLI): the task running the run, the partial record of a run that was stopped, and
    the signals that came (see `catch_signals` for what each one does)."""

    __slots__ = (
        "first",
        "gave_up",
        "give_up",
        "loop",
        "on_stop",
        "result",
        "saving",
        "say",
        "signals",
        "stopped",
        "task",
    )

    def __init__(self, say: Callable[[str, str], None] | None = None) -> None:
        self.result: RunResult | None = None
        self.signals = 0
        self.first: int | None = None
        """The first signal that came (SIGINT or SIGTERM)."""
        self.task: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.give_up: asyncio.Future[None] | None = None
        """Resolved by a second signal: stop waiting for calls that do not stop (`GIVE_UP`)."""
        self.gave_up = False
        self.saving = False
        """The run is over and its record is being written (a CLI command): signals are only said."""
        self.on_stop: Callable[[], None] | None = None
        """Called the moment the first signal comes (in the handler): the run refuses to start any
        call from then on, before the cancellation reaches its task (the loop sets it)."""
        self.stopped = False
        """The first signal's cancellation was delivered (`_stop`, once)."""
        self.say = say
        """Where a CLI command says what a signal does: ``say(event, signal name)`` with event one of
        ``stopping``, ``waiting``, ``gave_up``, ``saving``, ``now``."""

    @property
    def sigint(self) -> int:
        """How many signals came (the name is older than SIGTERM's handling)."""
        return self.signals

    @property
    def signal_name(self) -> str:
        return "SIGTERM" if self.first == signal.SIGTERM else "Ctrl-C"

    def interruption(self) -> KeyboardInterrupt:
        """What the first signal raises once the run is stopped: KeyboardInterrupt, or `Terminated`."""
        return Terminated() if self.first == signal.SIGTERM else KeyboardInterrupt()

    def _stop(self) -> None:
        """(On the loop) the first signal: cancel the run (once: the handler's callback, or the run
        itself refusing to start a call, whichever comes first)."""
        if self.stopped:
            return
        self.stopped = True
        task = self.task
        if task is not None and not task.done():
            task.cancel()

    def _hurry(self) -> None:
        """(On the loop) a second signal: stop waiting for calls that do not stop."""
        self.gave_up = True
        if self.give_up is not None and not self.give_up.done():
            self.give_up.set_result(None)


def catch_signals(outside: Outside, signals: tuple[int, ...] = (signal.SIGINT,)) -> Callable[[], None]:
    """Handle `signals` (Ctrl-C; a CLI command adds SIGTERM) by one rule, returning the undo:

    1. the first stops the run: its task is cancelled, calls in flight are cancelled and waited for,
       and the record of the run so far is kept (``partial_result`` of the KeyboardInterrupt, or
       `Terminated`, raised once the run has stopped; a CLI command saves it);
    2. a second one while the run is stopping stops the wait for calls that do not stop (a coroutine
       that ignores its cancellation): their records say so, and the record is kept all the same;
    3. while a CLI command saves the record (`Outside.saving`), any further one is said and ignored:
       the save finishes; otherwise a third raises at once (a way out of code that never yields).

    Nothing is raised into the event loop by the first two, so no task of the run is left half-way.
    Installed only where Python's default handling is in place (the main thread; SIGINT's default
    handler, SIGTERM's default action), so a caller's own handler is respected."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    from toolcall_lab import _startup

    defaults: dict[int, Any] = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    guarded = {s for s in signals if _startup.guarding(s)}  # (the command's start-up guard: replaced
    mine = [s for s in signals if s in guarded or signal.getsignal(s) is defaults.get(s)]  # in one step)

    count = itertools.count(1)
    said: dict[int, tuple[str, str]] = {}
    turn = [1]

    def in_order(n: int, event: str, name: str) -> None:
        """Say signal `n`'s message after those of the signals before it (a handler interrupted by
        the next one has not said its message yet: the later one's waits)."""
        said[n] = (event, name)
        while True:
            k = turn[0]
            item = said.pop(k, None)  # (one step: only one handler takes a message)
            if item is None:
                return
            turn[0] = k + 1
            if outside.say is not None:
                outside.say(*item)

    def on_signal(signum: int, frame: Any) -> None:
        # A second signal can run this handler again inside the first one (between any two of its
        # bytecodes): each takes its number in one step, and acts on that number alone.
        n = next(count)
        if n == 1:
            outside.first = signum
        outside.signals = max(outside.signals, n)
        name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"

        def say(event: str, name: str) -> None:
            in_order(n, event, name)

        if outside.saving:
            say("saving", name)
            return
        task = outside.task
        if n == 1:
            if task is None:
                say("stopping", name)  # the run has not started: it stops as it starts (`_run_state`)
                return
            if not task.done():
                if outside.on_stop is not None:
                    outside.on_stop()
                task.get_loop().call_soon_threadsafe(outside._stop)
                say("stopping", name)
                return
        if n == 2 and task is not None and not task.done():
            task.get_loop().call_soon_threadsafe(outside._hurry)
            say("gave_up", name)
            return
        if task is not None and task.done():  # the run is over: what follows keeps its record
            say("waiting", name)
            return
        say("now", name)
        raise signalled(signum)

    def undo() -> None:
        for s in mine:
            if s in guarded:  # (in one step: the command's process is never left to SIGTERM's default)
                _startup.hand_back(s)
            else:
                signal.signal(s, defaults[s])

    for s in mine:
        signal.signal(s, on_signal)
    return undo


def catch_sigint(outside: Outside) -> Callable[[], None]:
    """`catch_signals` for Ctrl-C alone (`run_sync`, `replay(..., virtual=False)`)."""
    return catch_signals(outside, (signal.SIGINT,))


CURRENT: contextvars.ContextVar[Outside | None] = contextvars.ContextVar("toolcall_lab_outside", default=None)
"""The `Outside` of `run_main`, which the first `run` inside it takes (see `loop.run`)."""


def run_main(main: Coroutine[Any, Any, T], outside: Outside | None = None) -> T:
    """``asyncio.run(main)`` where a signal stops the run `main` awaits by the rule of
    `catch_signals`: the record ends ``aborted/interrupted`` and the KeyboardInterrupt (or
    `Terminated`) raised carries it as ``partial_result`` (the CLI's ``record`` and real-time
    ``replay`` save it). A signal that comes before the run starts stops it as it starts. With an
    `outside` of its own (a CLI command, which handles the signals itself), that one is used."""
    outside = outside or Outside()
    undo = catch_sigint(outside)
    token = CURRENT.set(outside)  # the loop's tasks start from a copy of this context
    try:
        result = run_loop(main, outside)
    except asyncio.CancelledError:
        if not outside.signals:
            raise
        interrupt = outside.interruption()  # what the signal raises; the run's record rides on it
        interrupt.partial_result = outside.result  # type: ignore[attr-defined]
        raise interrupt from None
    except KeyboardInterrupt as exc:  # a third signal (or someone else's)
        if outside.result is not None and getattr(exc, "partial_result", None) is None:
            exc.partial_result = outside.result  # type: ignore[attr-defined]
        raise
    finally:
        CURRENT.reset(token)
        undo()
    if outside.signals and outside.task is None:  # a signal, and no run ever started to take it
        raise outside.interruption()
    return result


def run_loop(main: Coroutine[Any, Any, T], outside: Outside) -> T:
    """Run `main` to its end on a new event loop (as ``asyncio.run`` does), then cancel what is left
    and wait for it, unless a second signal gave up waiting (`Outside.gave_up`) or an exception
    broke out of the loop: then what is left is left (``asyncio.run`` would wait for it forever, and
    a command must never hang on a call that ignores its cancellation)."""
    loop = asyncio.new_event_loop()
    outside.loop = loop
    is_main = threading.current_thread() is threading.main_thread()
    if is_main:
        asyncio.set_event_loop(loop)
    try:
        task = loop.create_task(main)
        try:
            return loop.run_until_complete(task)
        except BaseException:
            if not task.done():
                outside.gave_up = True  # (raised out of the loop: the run's tasks are as they were)
            raise
    finally:
        try:
            _wind_down(loop, outside)
        finally:
            if is_main:
                asyncio.set_event_loop(None)
            loop.close()


def _wind_down(loop: asyncio.AbstractEventLoop, outside: Outside) -> None:
    left = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in left:
        t.cancel()
    if left and not outside.gave_up:
        loop.run_until_complete(_until_stopped(left, outside))
    left = [t for t in left if not t.done()]
    if left:  # given up: never reported as "destroyed but pending" (the record says they did not stop)
        loop.set_exception_handler(_quiet_about(set(left)))
        return
    loop.run_until_complete(loop.shutdown_asyncgens())
    if not outside.gave_up:
        loop.run_until_complete(loop.shutdown_default_executor())


async def _until_stopped(tasks: list[asyncio.Task[Any]], outside: Outside) -> None:
    """Wait for `tasks` to stop, or for a second signal to give up waiting."""
    loop = asyncio.get_running_loop()
    if outside.give_up is None or outside.give_up.get_loop() is not loop:
        outside.give_up = loop.create_future()
        if outside.gave_up:
            outside.give_up.set_result(None)
    pending: set[asyncio.Future[Any]] = set(tasks)
    while pending and not outside.give_up.done():
        await asyncio.wait({*pending, outside.give_up}, return_when=asyncio.FIRST_COMPLETED)
        pending = {t for t in pending if not t.done()}
    for t in tasks:
        if t.done() and not t.cancelled():
            t.exception()  # (retrieved: the run reported what mattered)


Handler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]


def _quiet_about(abandoned: set[asyncio.Task[Any]]) -> Handler:
    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("task") in abandoned:
            return
        loop.default_exception_handler(context)

    return handler

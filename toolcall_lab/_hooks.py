"""Hooks into a run, and calling them: a hook's failure is recorded (`HookFailure`) and handled by
policy, never a crash; a BaseException it raises is carried out of the run's tasks (`Interrupted`);
a cancellation it catches while the run is being cut off does not stop the cut.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from toolcall_lab._outcomes import error_text, verdict
from toolcall_lab.exceptions import UsageError
from toolcall_lab.messages import ToolCall
from toolcall_lab.records import HookFailure, HookName, Timing, ToolExecution

Approval = bool | str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Hooks:
    """Optional callbacks into a run; each may be a plain function or a coroutine function.

    approve_call(call) -> True/None to run it, False or a reason string to reject it.
    approve_result(call, execution) -> True/None to send the result, False/reason to withhold it.
    It sees only calls whose tool ran and returned (status ``ok``): never a call that raised or timed
    out (``error``, ``timeout``: their text is the error, not a result), nor one that did not run
    (``unknown_tool``, ``invalid_arguments``, ``rejected``, ``duplicate``, ``skipped``,
    ``cancelled``). A tool that *returns* an exception object (rather than raising it) returned a
    value: status ``ok``, its text the exception's ``str()`` as a JSON string, and
    ``approve_result`` sees it; raise it to make it an ``error``.
    before_model_call(messages) -> the message list to send, or None to send the list it was given
    (edited in place or not). It gets a copy: edits apply to this model call only, never to the
    conversation or the record of earlier calls.
    on_tool_start(call), on_tool_complete(execution), on_model_chunk(payload): notifications (the
    payload is a copy: the recorded chunk stays as the model sent it). ``on_model_chunk`` is called
    once the chunk is parsed: under a strategy that streams (``eager``) the calls that chunk completed
    have been dispatched by then (their ACTIONs emitted), so an abort it asks for finds them dispatched
    and not started: they are recorded as never started.

    An approval hook returning anything else (``1``, ``[]``, ``"yes"`` is a reason!) is a hook failure:
    only True, None, False and strings mean something. Where the time goes: ``approve_call`` runs for
    the whole batch, one call after another, before any call starts (every strategy, built-in or your
    own, whatever batch method it uses; ``first_only`` asks only about the call it runs), except under
    a strategy that streams (``eager``), where it runs per call as each arrives, before that call
    starts, still one call at a time in arrival order (a human approving calls never gets two
    prompts at once; calls that arrived meanwhile wait their turn, while the stream goes on). A
    duplicate is not asked about: the call it duplicates answers for it, unless that call does not
    run (rejected, skipped, cancelled), and then the duplicate is asked when it runs in its place;
    ``on_tool_start``
    runs before the call's start time, ``approve_result`` and ``on_tool_complete`` after its end time,
    so hook time is never part of a tool's duration; it shows as the gap between a call's end and the
    next event. A run cut off while a call's result hook runs keeps the call's outcome (a result not yet
    approved is ``withheld``).

    When a hook raises, the failure is recorded (`HookFailure`: the hook, the call, the error, what
    followed) and the run follows this policy:

    - approve_call: the call is rejected, with the error as the reason (it does not run);
    - approve_result: the result is withheld (the call ran; status ``withheld``);
    - before_model_call: the run stops before that model call (status ``failed``, reason ``hook_error``);
    - on_tool_start, on_tool_complete, on_model_chunk (and the ``on_event`` listener): notifications
      only; the failure is recorded and the run goes on unchanged.

    KeyboardInterrupt and other BaseExceptions from a hook propagate out of `run` (with the partial
    record attached as ``partial_result``), as they would from any Python call. The exception is an
    ``asyncio.CancelledError`` the hook raises of its own (nothing cancelled the task it runs in): that
    is a hook failure like any exception, handled by the policy above; a cancellation that reached the
    hook (the run being cut off) goes on as the cut.

    Hooks run on the event loop: a plain function that blocks (``time.sleep``, ``input()``) holds up
    everything, the run's deadline too. The deadline is checked when a hook returns (and before a hook
    or a call with per-call hooks starts): past it, the run ends ``timeout/deadline`` there, nothing
    starts after it, and the error names the hook and when it returned; a call that returns only after
    the deadline (the hook's hold kept its timer from firing) is cancelled like the calls still running. A
    coroutine hook that awaits (e.g. ``await asyncio.to_thread(input)``) is cut at the deadline itself.
    """

    approve_call: Callable[[ToolCall], Approval | Awaitable[Approval]] | None = None
    approve_result: Callable[[ToolCall, ToolExecution], Approval | Awaitable[Approval]] | None = None
    before_model_call: Callable[[list[dict[str, Any]]], Any] | None = None
    on_tool_start: Callable[[ToolCall], Any] | None = None
    on_tool_complete: Callable[[ToolExecution], Any] | None = None
    on_model_chunk: Callable[[dict[str, Any]], Any] | None = None

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            hook = getattr(self, name)
            if hook is not None and not callable(hook):
                raise UsageError(
                    f"Hooks.{name}={hook!r}: must be a function or coroutine function, or None for none"
                )


class Interrupted(Exception):
    """Carries a BaseException that is not an `Exception` (KeyboardInterrupt, SystemExit, ...) raised
    by a tool or hook through the run's tasks: asyncio would re-raise it straight out of the event
    loop, past the code that keeps the record. `run` re-raises ``original`` with the partial record."""

    def __init__(self, original: BaseException, where: str, execution: ToolExecution | None = None) -> None:
        super().__init__(f"{where} raised {type(original).__name__}")
        self.original = original
        self.where = where
        self.execution = execution
        """The record of the call that raised it, when a tool did."""
        self.on_cut: str | None = None
        """A tool raised it on being cancelled: ``"run"`` when the run was being cut (the deadline, an
        abort, a cancellation from outside), ``"task"`` when only its call's task was (the strategy's
        own cancellation, e.g. ``asyncio.wait_for``, or the harness's): the run stops with it, and the
        cut stands in the record (`toolcall_lab.loop`, `toolcall_lab.strategies.batch`)."""


GIVE_UP: contextvars.ContextVar[asyncio.Future[None] | None] = contextvars.ContextVar(
    "toolcall_lab_give_up", default=None
)
"""Resolved when whoever stopped the run from outside asks to stop waiting for calls that do not
stop (a second Ctrl-C: `toolcall_lab._stopping.catch_signals`); set by the loop for its tasks."""


async def wait_until_stopped(tasks: Any) -> None:
    """Wait until every one of `tasks` (already cancelled) has finished, even if this task is
    cancelled again meanwhile (an abort, then the deadline): a tool that catches its cancellation and
    goes on working is waited for, never abandoned with its record closed, unless a second signal
    gives up waiting (`GIVE_UP`: the records then say the call had not stopped). A cancellation that
    came in meanwhile is raised afterwards."""
    pending = {t for t in tasks if not t.done()}
    again = False
    give_up = GIVE_UP.get()
    while pending:
        try:
            if give_up is None:
                _, pending = await asyncio.wait(pending)
            else:
                if give_up.done():
                    break
                await asyncio.wait({*pending, give_up}, return_when=asyncio.FIRST_COMPLETED)
                pending = {t for t in pending if not t.done()}
        except asyncio.CancelledError:
            again = True
            pending = {t for t in pending if not t.done()}
    if again:
        raise asyncio.CancelledError


def being_cancelled() -> bool:
    """Whether the current task has a cancellation request pending (as opposed to a CancelledError
    that some code raised or let through on its own)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class HookCalls:
    """Calling a run's hooks; `toolcall_lab._execution.Executor` builds on it."""

    def __init__(self, hooks: Hooks, clock_timing: Timing) -> None:
        self.hooks = hooks
        self.clock_timing = clock_timing
        self.round_index: int | None = None
        """The round in progress (the loop sets it), for hook failure records."""
        self.hook_failures: list[HookFailure] = []
        self.on_hook_failure: Callable[[HookFailure], None] | None = None
        """Called with each failure as it is recorded (the loop emits an event)."""
        self._cancelling: Callable[[], int] = int  # (no run task: never; `int()` is 0)
        self.stop_asked = False
        """An abort or a first signal asked the run to stop (set the moment it came, from any
        thread): no call starts from then on, even before the cancellation reaches the run's task."""
        self._deliver_stop: Callable[[], None] | None = None
        self.interrupt: Interrupted | None = None
        """The first KeyboardInterrupt (or other BaseException) a tool, hook or listener raised
        (`interrupted`): the run stops with it, even if a strategy's code caught it on the way."""
        self.divergence: Exception | None = None
        """The first replay divergence a call raised (`toolcall_lab.replay`): the run stops with it,
        even if a strategy's code caught it on the way (``asyncio.gather(..., return_exceptions=True)``)."""
        self.before_start: Callable[[ToolCall], None] | None = None
        """(A replay of a cut-off run: `toolcall_lab.replay`) called as a call is about to enter its
        tool: it may stop the run there, as the recorded abort did (the call then never starts)."""
        self.deadline: asyncio.Timeout | None = None
        """The run's deadline (the loop sets it), checked when a hook returns (`_after_hook`)."""
        self.held_past_deadline: tuple[str, float] | None = None
        """(hook, when it returned): a hook that blocked the event loop past the deadline."""

    def now(self) -> float:
        raise NotImplementedError

    def watch(self, task: asyncio.Task[Any]) -> None:
        """The run's task (the loop sets it): a cancellation request on it means the run is being cut
        off, also inside a tool or hook that caught the CancelledError and went on."""
        self._cancelling = task.cancelling

    def _cut(self) -> bool:
        """Whether the run is being cut off (abort, cancellation, deadline), or was asked to stop."""
        return self._cancelling() > 0 or self.stop_asked

    def ask_stop(self, deliver: Callable[[], None]) -> None:
        """(An `AbortHandle` or a signal, the moment it comes) stop the run: `deliver` cancels its task
        (it is also scheduled on the loop by whoever asked; it acts once)."""
        if not self.stop_asked:
            self._deliver_stop = deliver
            self.stop_asked = True

    def interrupted(self, exc: BaseException, where: str) -> Interrupted:
        """A tool, a hook or a listener raised `exc` (KeyboardInterrupt, SystemExit, ...): the run
        stops with it, and from now on no call starts (nor a call's first hook) while the exception
        is on its way to the run's task, as after an abort (a sibling whose turn comes meanwhile is
        recorded as never started, not run)."""
        self.stop_asked = True  # (an abort's or a signal's delivery, if any came first, is kept)
        stopped = Interrupted(exc, where)
        if self.interrupt is None:
            self.interrupt = stopped
        return stopped

    def refuse_start(self) -> bool:
        """Whether nothing may start now (a call, a call's first hook): the run is being cut off, or
        an abort or a signal asked it to stop, whose cancellation is then delivered at once, so it
        takes effect here, before anything starts, not at the event loop's next turn."""
        if self._cancelling() > 0:
            return True
        if not self.stop_asked:
            return False
        deliver = self._deliver_stop
        if deliver is not None:
            deliver()
        return True

    def hook_failed(
        self,
        hook: HookName,
        exc: BaseException,
        effect: str,
        call: ToolCall | None,
        position: int | None,
        tool_call_id: str | None = None,
    ) -> HookFailure:
        failure = HookFailure(
            hook=hook,
            error=error_text(exc),
            effect=effect,
            at=self.now(),
            round_index=self.round_index,
            tool_call_id=tool_call_id if call is None else call.tool_call_id,
            position=position,
            timing=self.clock_timing,
        )
        self.hook_failures.append(failure)
        if self.on_hook_failure is not None:
            self.on_hook_failure(failure)
        return failure

    async def ask(
        self,
        hook: HookName,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        *,
        effect: str,
        call: ToolCall | None = None,
        position: int | None = None,
    ) -> tuple[bool, Any]:
        """Call a hook: (True, its value), or (False, the exception) after recording the failure."""
        if self.deadline is not None:  # (a hook before held the loop past it: this one never starts)
            await self._after_hook(None)
        try:
            value = fn(*args)
            if inspect.isawaitable(value):
                value = await value
        except asyncio.CancelledError as exc:
            if being_cancelled():  # (its task was cancelled: the cut, not a CancelledError of its own)
                raise
            self.hook_failed(hook, exc, effect, call, position)
            return False, exc
        except Exception as exc:  # a hook's bug is recorded and handled by policy, never a crash
            if being_cancelled():  # raised after its task received the cancellation: the cut goes on
                raise asyncio.CancelledError from exc
            self.hook_failed(hook, exc, effect, call, position)
            return False, exc
        except BaseException as exc:
            raise self.interrupted(exc, f"hook {hook}") from exc
        if being_cancelled():  # its task received the cancellation, and it returned: the cut goes on
            raise asyncio.CancelledError
        if self.deadline is not None:
            await self._after_hook(hook)
        return True, value

    async def _after_hook(self, hook: str | None) -> None:
        """A plain-function hook (or a coroutine that blocks, e.g. ``time.sleep`` or ``input()``)
        holds the event loop: the deadline's timer cannot fire meanwhile, and if nothing after it
        waits, the run would go on past its deadline. Past it, the deadline fires here, before
        anything else starts."""
        deadline = self.deadline
        when = deadline.when() if deadline is not None else None
        if deadline is None or when is None or deadline.expired():
            return
        loop = asyncio.get_running_loop()
        if loop.time() < when:
            return
        if self.held_past_deadline is None and hook is not None:
            self.held_past_deadline = (hook, self.now())
        deadline.reschedule(when)  # already past: its timer is now the next thing the loop runs
        # The deadline cancels the run's task; a call's own task (a strategy's) is cancelled by the
        # cut that follows. Either way nothing after this hook starts.
        await asyncio.get_running_loop().create_future()

    async def approval(
        self,
        hook: HookName,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        effect: str,
        call: ToolCall,
        position: int | None,
    ) -> str | None:
        """An approval hook's verdict: None to go ahead, else the reason for saying no (a hook that
        raises or answers something meaningless is recorded as failed, and says no)."""
        ok, value = await self.ask(hook, fn, args, effect=effect, call=call, position=position)
        if ok:
            try:
                return verdict(hook, value)
            except TypeError as exc:
                self.hook_failed(hook, exc, effect, call, position)
                value = exc
        return f"the {hook} hook failed ({error_text(value)})"

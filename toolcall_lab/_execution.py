"""Running one tool call: screening (arguments, unknown tools, duplicates, approval), timeouts,
exceptions as data, result approval, hooks. Every outcome is a `ToolExecution`; nothing raises but
cancellation, replay divergence and the BaseExceptions a tool or hook raises (carried as `Interrupted`).

This is the unit every execution strategy builds on: `Executor.screen_one`
decides whether a call may run, `Executor.execute` runs it on the run's clock. How a batch is
scheduled is the strategies' business (`toolcall_lab.strategies`); calling hooks is `toolcall_lab._hooks`'.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from toolcall_lab._copy import json_copy
from toolcall_lab._hooks import HookCalls, Hooks, Interrupted, being_cancelled
from toolcall_lab._outcomes import NotText, error_text, result_text
from toolcall_lab.clock import VirtualEventLoop
from toolcall_lab.exceptions import ReplayDivergenceError, UsageError
from toolcall_lab.messages import ParsedArguments, ToolCall, parse_arguments
from toolcall_lab.records import (
    DECIDED,
    MEASURED,
    SIMULATED,
    CallStatus,
    Timing,
    ToolExecution,
    make_execution,
)
from toolcall_lab.tools import (
    GeneratorExitInTool,
    LimitExpired,
    NeverStarted,
    Tool,
    ToolOutcome,
    ToolRegistry,
    ToolThreads,
)

__all__ = [  # (Hooks, Interrupted and being_cancelled live in `_hooks`; the modes import them here)
    "BatchDedupe",
    "Executor",
    "Hooks",
    "Interrupted",
    "being_cancelled",
    "being_closed",
    "canonical_json",
    "current_tool_call",
    "dedupe_key",
    "from_limit",
    "harness_decision",
]

current_tool_call: contextvars.ContextVar[ToolCall] = contextvars.ContextVar("current_tool_call")
"""The call a tool function is running for, set for tools made with ``uses_current_call=True``
(replayed tools: they answer by tool_call_id)."""
_set_current = current_tool_call.set
_RUNNING: dict[Any, asyncio.Task[Any]] | None = getattr(asyncio.tasks, "_current_tasks", None)
"""asyncio's own loop -> running task map: reading it costs a dict lookup per call, where
``asyncio.current_task()`` (a Python function in 3.11) costs two calls (a fifth of a call's
scheduling). Python versions without it use `asyncio.current_task`."""


def _own_task(loop: asyncio.AbstractEventLoop) -> asyncio.Task[Any] | None:
    """The task running on `loop` now (the one running this call)."""
    return _RUNNING.get(loop) if _RUNNING is not None else asyncio.current_task(loop)


def being_closed(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether a GeneratorExit is a coroutine of a run on `loop` being closed (no task of that loop
    is stepping it: e.g. the garbage collector closing a call a second signal gave up on, maybe while
    another loop runs), not one raised by code that runs."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:  # no running loop
        return True
    return running is not loop or asyncio.current_task() is None


class _HarnessTimeout(Exception):
    """The harness's limit (`Tool.timeout_s`) expired, as opposed to a TimeoutError the tool raised;
    `never_started`: a sync call no worker thread had taken up by then (withdrawn: it never runs)."""

    def __init__(self, detail: str = "", never_started: bool = False) -> None:
        super().__init__(detail)
        self.never_started = never_started


_LIMIT_EXIT = asyncio.timeouts.Timeout.__aexit__.__code__


def from_limit(exc: BaseException) -> bool:
    """Whether `exc` is the ``TimeoutError`` an ``asyncio.timeout`` block raised on expiring (raised
    in its ``__aexit__``), not one the code inside it raised: since Python 3.11 they share a type,
    so where it was raised decides."""
    if type(exc) is not TimeoutError:
        return False
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code is _LIMIT_EXIT


try:  # canonical JSON for de-duplication keys; orjson is 5-10x faster when installed
    import orjson

    _SORTED = orjson.OPT_SORT_KEYS
    _dumps = orjson.dumps

    def canonical_json(value: Any) -> str:
        """Sorted-key compact JSON: equal arguments give equal text (1, 1.0 and true stay apart)."""
        try:  # decoded at once: keeping orjson's bytes (over-allocated buffers) costs 10x in a batch
            return _dumps(value, option=_SORTED).decode()
        except TypeError:  # integers beyond 64 bits and the like
            return json.dumps(value, sort_keys=True, separators=(",", ":"))

except ImportError:  # pragma: no cover - the optional extra is absent

    def canonical_json(value: Any) -> str:
        """Sorted-key compact JSON: equal arguments give equal text (1, 1.0 and true stay apart)."""
        return json.dumps(value, sort_keys=True, separators=(",", ":"))


def dedupe_key(call: ToolCall) -> str | None:
    """Same tool + same arguments (canonical JSON) -> same key; None when arguments are unusable."""
    args = call.args
    if args is None:
        return None
    return f"{call.name}\x00{canonical_json(args)}"


_DUPLICATE = re.compile(r"Not executed: duplicates call (\S+) (?:\(position \d+ of this batch|of round \d+)")
_INVALID = re.compile(r"Error: (?:invalid arguments for ('.*?'|\".*?\"):|arguments for ('.*?'|\".*?\") are) ")


def harness_decision(text: str) -> str | None:
    """What the harness decided, for a tool-message text it wrote itself in any wording it has used
    (``duplicate of call_0_0``, ``invalid arguments for 'f'``); None for other texts. A replay compares
    these decisions, not their wording, so recordings made before a rewording still replay."""
    if text.startswith("Not executed: duplicates call "):
        m = _DUPLICATE.match(text)
        return f"duplicate of {m[1]}" if m else None
    if text.startswith(("Error: invalid arguments for ", "Error: arguments for ")):
        m = _INVALID.match(text)
        return f"invalid arguments for {m[1] or m[2]}" if m else None
    return None


_Key = tuple[str, str]
_CONTAINERS = (dict, list)


class BatchDedupe:
    """Within-batch de-duplication state of one batch (`Executor.new_batch`).

    `first`: key -> (id, position) of the call that answers for every equal call (the *original*);
    `keys`: position -> key of each call registered as an original; `of`: position -> the original's
    position, for each call screened as a duplicate. A duplicate found at screening is provisional:
    the batch answers it only once its original has run and been answered, and otherwise lets it
    run in the original's place (`toolcall_lab.strategies.batch`), so `first` can change hands.
    """

    __slots__ = ("first", "keys", "of")

    def __init__(self) -> None:
        self.first: dict[_Key, tuple[str, int]] = {}
        self.keys: dict[int, _Key] = {}
        self.of: dict[int, int] = {}

    def take_over(self, call: ToolCall, position: int, key: _Key) -> None:
        """The call at `position` becomes the original of `key` (the one that runs)."""
        self.first[key] = (call.tool_call_id, position)
        self.keys[position] = key

    def moved(self, moved: dict[int, int]) -> None:
        """Positions changed (`Batch._move`): follow them."""
        at = moved.get
        self.first = {k: (i, at(p, p)) for k, (i, p) in self.first.items()}
        self.keys = {at(p, p): k for p, k in self.keys.items()}
        self.of = {at(p, p): at(o, o) for p, o in self.of.items()}


Phase = tuple[str, float, ToolExecution | None]
"""Where a call stood when its hooks were involved, or it never started: (``queued`` |
``on_tool_start`` | ``running`` | ``no_worker`` (a sync call no worker thread had taken up when it
was cancelled) | ``approve_result`` | ``on_tool_complete``, since when, its record once the tool had
ended)."""


def _arguments(call: ToolCall) -> dict[str, Any] | None:
    """The call's parsed arguments (None when they are not a usable object), read without making a
    `ParsedArguments` when the parser left the plain dict it read (`ToolCall._outcome`: a valid
    object; converting it costs a tenth of a call's scheduling, once per call)."""
    value = call._outcome
    if type(value) is dict:
        return value
    outcome = call.parse_arguments()
    return outcome.value if type(outcome) is ParsedArguments else None


def _invalid(call: ToolCall, problem: str) -> str:
    return (
        f"Error: invalid arguments for {call.name!r}: {problem}. The call was not executed; send the "
        "arguments its schema asks for."
    )


class Executor(HookCalls):
    """Turns tool calls into executions against a registry, with the run's hooks, clock and threads.

    Args:
        tools: the registry; hooks: the run's `Hooks`; origin: the clock reading that is time 0.
        dedupe: within-batch de-duplication; dedupe_across_rounds: across rounds for every tool
            (tools marked `Tool.idempotent` get it anyway).
    """

    strategy_task: asyncio.Task[Any] | None = None
    """The task running the strategy now (the loop sets it): a batch of an earlier round tells the
    strategy's own use of it (a `UsageError`) from a task the strategy left behind."""

    def __init__(
        self,
        tools: ToolRegistry,
        hooks: Hooks,
        origin: float,
        *,
        dedupe: bool = True,
        dedupe_across_rounds: bool = False,
    ) -> None:
        self.tools = tools
        self._tool = tools._tools.get  # the registry's own dict: a lookup per call, kept cheap
        self.origin = origin
        self.dedupe = dedupe
        self.dedupe_across_rounds = dedupe_across_rounds
        self._loop = loop = asyncio.get_running_loop()
        self._clock = loop.time
        self.virtual = isinstance(loop, VirtualEventLoop)
        super().__init__(hooks, SIMULATED if self.virtual else MEASURED)  # (clock_timing: the label of a
        # duration measured on this run's clock, real or virtual)
        self._threads: ToolThreads | None = None
        self.history: dict[_Key, tuple[str, int]] = {}
        """Cross-round de-duplication: key -> (id, round) of the first successful call with that key."""
        self.hooked = (
            hooks.on_tool_start is not None
            or hooks.approve_result is not None
            or hooks.on_tool_complete is not None
        )
        """Whether calls have hooks of their own (then `_execute_hooked` runs them; where each call
        stands is kept in `phases`)."""
        if self.hooked:
            self.execute = self._execute_hooked  # type: ignore[method-assign]
        self.phases: dict[int, Phase] = {}
        """By position in the batch: where calls with hooks stood (kept only when hooks are set), so
        a cut-off run records a call by what had happened to it, not by what was running around it."""
        self.cut_notes: dict[int, str] = {}
        """By position: what a call did when the run cut it off (caught the cancellation, raised)."""
        self.stopped: set[int] = set()
        """Positions of calls whose tool stopped when cancelled (raised, or returned after catching
        it): a cut-off call not among them had not stopped when the wait for it was given up."""
        self.abandoned: list[str] = []
        """Ids of calls recorded as not stopped when a second signal gave up waiting for them."""
        self.give_up: asyncio.Future[None] | None = None
        """Resolved when a second signal gave up waiting for calls that do not stop (the loop sets it)."""

    def now(self) -> float:
        return self._clock() - self.origin

    def check_deadline_per_call(self) -> None:
        """Check the run's deadline before each call starts, as calls with per-call hooks do, also
        without hooks (the loop asks for it whenever the run has a deadline): code that blocks the
        event loop (an ``on_event`` listener, a strategy's or an async tool's blocking call) may hold
        it past the deadline, whose timer cannot fire meanwhile, and no call may start after it."""
        self.execute = self._execute_hooked  # type: ignore[method-assign]

    @property
    def threads(self) -> ToolThreads:
        """Worker threads for this run's sync tools (made on first use, shut down by `close`)."""
        if self._threads is None:
            self._threads = ToolThreads()
        return self._threads

    def close(self) -> None:
        """The run is over: idle tool threads exit; threads stuck in timed-out calls are left behind."""
        if self._threads is not None:
            self._threads.shutdown()

    # -- records the harness decides -----------------------------------------------------------------

    def _made(
        self,
        call: ToolCall,
        status: CallStatus,
        text: str,
        *,
        duplicate_of: str | None = None,
        timing: Timing = DECIDED,
    ) -> ToolExecution:
        """The record of an outcome decided without running the tool: it took no time."""
        now = self.now()
        error = None if status in ("ok", "skipped") else text
        return make_execution(
            call.tool_call_id, call.name, call.arguments, call.index, status, text, error, now, now,
            duplicate_of, timing,
        )  # fmt: skip

    def skipped(
        self, call: ToolCall, why: str = "only the first call of the batch runs (first_only)"
    ) -> ToolExecution:
        """A call left unexecuted and unanswered on purpose (`why`: by which strategy, and why)."""
        return self._made(call, "skipped", f"not executed: {why}")

    def cancelled(
        self, call: ToolCall, started_at: float | None, why: str, note: str = "", at: float | None = None
    ) -> ToolExecution:
        """A call cut off by an abort, a cancellation or the deadline (`why` says which), its
        cancellation taking effect at `at` (default: now)."""
        if started_at is None:
            return self._made(call, "cancelled", f"Not executed: {why} before this call started.")
        now = self.now() if at is None else at
        # (a note says what became of it, e.g. it returned after catching the cancellation: then its
        # result is known and discarded, not unknown)
        text = f"Cancelled: {why} while this call was running" + (
            f" ({note})." if note else "; its result is unknown."
        )
        tool = self._tool(call.name)
        if tool is not None and not tool.is_async and not self.virtual and not note:
            text += (
                " It runs in a worker thread, which cannot be stopped: it may still be running, and "
                "whatever it returns is discarded."
            )
        return make_execution(
            call.tool_call_id, call.name, call.arguments, call.index, "cancelled", text, text, started_at,
            max(now, started_at), None, self.clock_timing,
        )  # fmt: skip

    def cut_off(
        self, call: ToolCall, position: int, started_at: float | None, why: str, at: float | None = None
    ) -> ToolExecution:
        """The record of a call the run was cut off (`why`) before it settled: what had happened to it
        so far decides (its tool not started yet, running, or ended and waiting on a result hook);
        `at`: when the cancellation took effect (default: now)."""
        note = self.cut_notes.get(position, "")
        give_up = self.give_up
        gave_up = give_up is not None and give_up.done()  # (a second signal: no longer waited for)
        if started_at is not None and not note and gave_up and position not in self.stopped:
            note = (
                "it had not stopped when the run gave up waiting for it (a second Ctrl-C or SIGTERM): "
                "it may still be running, and what it does is not recorded"
            )
            kind = self.phases.get(position, ("running",))[0]
            if kind == "running":  # (a call settled, or never started, is not abandoned)
                self.abandoned.append(call.tool_call_id)
        phase = self.phases.get(position)
        stopped = at
        if phase is None:
            return self.cancelled(call, started_at, why, note, stopped)
        kind, at, ex = phase
        if kind in ("queued", "on_tool_start", "no_worker"):
            running = (
                " (its on_tool_start hook was running)"
                if kind == "on_tool_start"
                else " (no worker thread had taken it up yet: it never ran)"
                if kind == "no_worker"
                else ""
            )
            return self._made(call, "cancelled", f"Not executed: {why} before this call started{running}.")
        if ex is None:  # running
            return self.cancelled(call, at, why, note, stopped)
        if kind == "approve_result":
            return self._withheld(
                ex, f"{why} while the approve_result hook was deciding; the result was never approved"
            )
        return ex  # on_tool_complete: settled, only the notification was cut off

    # -- screening ----------------------------------------------------------------------------------

    def new_batch(self) -> BatchDedupe:
        """The within-batch de-duplication state of a new batch."""
        self.phases.clear()
        self.cut_notes.clear()
        self.stopped.clear()
        return BatchDedupe()

    async def screen_one(self, call: ToolCall, position: int, batch: BatchDedupe) -> ToolExecution | None:
        """Decide whether `call` may run (None) or what it is answered with instead."""
        pre = self.check(call, position, batch)
        if pre is not None:
            return pre
        return await self.approve(call, position, batch)

    async def approve(self, call: ToolCall, position: int, batch: BatchDedupe) -> ToolExecution | None:
        """Ask ``approve_call`` (if set) about a call that passed the checks: None = approved."""
        approve = self.hooks.approve_call
        if approve is not None:
            if (self.stop_asked or self._cancelling()) and self.refuse_start():
                raise asyncio.CancelledError  # (asked to stop: no hook is asked about a call that never runs)
            reason = await self.approval("approve_call", approve, (call,), "call rejected", call, position)
            if reason is not None:
                if self.dedupe:  # a rejected call is not the original of later duplicates
                    self._forget(call, position, batch)
                return self._made(call, "rejected", f"Rejected: {reason}. The call was not executed.")
        return None

    def duplicate(self, call: ToolCall, first: tuple[str, int]) -> ToolExecution:
        """The record of a within-batch duplicate of the call `first` (id, position)."""
        return self._made(
            call,
            "duplicate",
            f"Not executed: duplicates call {first[0]} (position {first[1]} of this batch; same "
            "tool and arguments; within-batch de-duplication). The answer to that call stands for "
            "this one too.",
            duplicate_of=first[0],
        )

    async def screen(self, calls: Sequence[ToolCall]) -> list[ToolExecution | None]:
        """`screen_one` for a whole batch, in model order (None = runnable)."""
        batch = self.new_batch()
        if self.hooks.approve_call is None:
            check = self.check
            return [check(call, i, batch) for i, call in enumerate(calls)]
        return [await self.screen_one(call, i, batch) for i, call in enumerate(calls)]

    def check(self, call: ToolCall, position: int, batch: BatchDedupe) -> ToolExecution | None:
        """The checks that need no hook: arguments, tool, duplicates (None = may run)."""
        value = call._outcome  # a plain dict: the parser read a valid object (`_arguments`)
        if type(value) is not dict or not call.complete:
            outcome = call.parse_arguments()
            if type(outcome) is not ParsedArguments or not call.complete:
                reason = "incomplete" if type(outcome) is ParsedArguments else outcome.reason  # type: ignore[union-attr]
                return self._made(
                    call,
                    "invalid_arguments",
                    f"Error: invalid arguments for {call.name!r}: {reason}. "
                    "The call was not executed; send valid JSON arguments.",
                )
            value = outcome.value
        tool = self._tool(call.name)
        if tool is None:
            known = ", ".join(self.tools.names()) or "none"
            return self._made(
                call, "unknown_tool", f"Error: unknown tool {call.name!r}. Available tools: {known}."
            )
        exact = tool.exact
        if exact is None or value.keys() != exact:  # (the exact names: nothing else to check)
            accepted = tool.accepted
            if not value.keys() >= tool.screened or (accepted is not None and not value.keys() <= accepted):
                why = tool.argument_problem(value) or ""
                return self._made(call, "invalid_arguments", _invalid(call, why))
            if tool.screen_call is not None:
                problem = tool.screen_call(call)
                if problem is not None:
                    return self._made(call, "invalid_arguments", _invalid(call, problem))
        dedupe = self.dedupe
        across = self.dedupe_across_rounds or tool.idempotent
        if not (dedupe or across):
            return None
        key = (call.name, canonical_json(value))
        if dedupe:
            first = batch.first.get(key)
            if first is not None:  # (provisional: the batch answers it once `first` was answered)
                batch.of[position] = first[1]
                return self.duplicate(call, first)
        if across:
            earlier = self.history.get(key)
            if earlier is not None:
                rule = (
                    f"{call.name!r} is marked idempotent"
                    if tool.idempotent
                    else "cross-round de-duplication is on for this run"
                )
                return self._made(
                    call,
                    "duplicate",
                    f"Not executed: duplicates call {earlier[0]} of round {earlier[1]} (same tool and "
                    f"arguments; {rule}). Use that call's result.",
                    duplicate_of=earlier[0],
                )
        if dedupe:
            batch.first[key] = (call.tool_call_id, position)
            batch.keys[position] = key
        return None

    def _forget(self, call: ToolCall, position: int, batch: BatchDedupe) -> None:
        key = batch.keys.get(position)
        if key is not None and batch.first.get(key) == (call.tool_call_id, position):
            del batch.first[key]

    # -- running ------------------------------------------------------------------------------------

    async def execute(
        self, call: ToolCall, position: int | None = None, started: float | None = None
    ) -> ToolExecution:
        """Run one screened call on the run's clock; tool exceptions and timeouts become results.

        `position` is the call's place in its batch (for hook failure records); `started` the time
        its turn came, when the caller already read the clock (re-read after an ``on_tool_start``
        hook). Raises only when the run must stop: cancellation, replay divergence, and
        `Interrupted` (carrying a KeyboardInterrupt or other BaseException a tool or hook raised).

        This is the path without per-call hooks; with them, `_execute_hooked` takes its place (set
        on the instance in ``__init__``), so a run without hooks never checks for them per call.
        """
        tool = self._tool(call.name)
        args = _arguments(call)
        if tool is None or args is None:
            raise UsageError(f"execute() got call {call.tool_call_id} that screening would not let run")
        for value in args.values():  # nested values: the tool gets its own (the call keeps what was sent)
            if type(value) in _CONTAINERS:
                args = json_copy(args)
                break
        clock, origin = self._clock, self.origin
        if started is None:
            started = clock() - origin
        # The run is being cut off (something that caught the cancellation goes on: a strategy's code),
        # or an abort or a signal asked it to stop just now (e.g. the tool or hook before this call
        # did): no call starts now.
        if self.before_start is not None:
            self.before_start(call)
        if self.stop_asked or self._cancelling():
            self._refused(position, started)
        status: CallStatus = "ok"
        timing = self.clock_timing
        job: concurrent.futures.Future[Any] | None = None
        try:
            if tool.plain:
                value = await tool.function(**args)
            else:
                if tool.uses_current_call:  # only when asked: setting a context variable costs per call
                    _set_current(call)
                if tool.timeout_s is not None:
                    value = await self._limited(tool, args, started, position)
                elif tool.is_async:
                    value = await tool.function(**args)
                elif self.virtual:  # (inline: no virtual time passes)
                    value = await self.threads.run(tool.function, args)
                else:
                    pending, job = self.threads.start(tool.function, args)
                    value = await pending
            if type(value) is not str and inspect.isawaitable(value):  # e.g. a callable object's coroutine
                value = await value
        except _HarnessTimeout as expired:
            status, text, value = "timeout", self._timed_out(call, tool, expired), None
        except asyncio.CancelledError as exc:
            if being_cancelled():  # (this call's own task was cancelled: not a CancelledError of its own)
                if position is not None:
                    if job is not None and job.cancel():  # no worker thread had taken it: it never runs
                        self.phases[position] = ("no_worker", started, None)
                    self._stopped(position)
                raise
            status, text, value = "error", f"Error: tool {call.name!r} raised {error_text(exc)}", None
        except ReplayDivergenceError as exc:
            if self.divergence is None:  # the run stops with it, whatever the strategy does with it,
                self.divergence = exc  # and no call starts from now on (as after an interrupt)
            self.stop_asked = True
            if position is not None:  # (its record names it as the call the replay could not answer)
                self.cut_notes.setdefault(
                    position, "the replay diverged from the recording here: no recorded result"
                )
            raise
        except Exception as exc:  # a tool's exception is data for the model, not a crash of the run
            if type(exc) is GeneratorExitInTool:  # (a sync tool's, carried out of its thread whole)
                raise self._stops_the_run(call, exc.original, started, timing) from exc.original
            if being_cancelled():  # it raised after its task received the cancellation (its cleanup)
                if position is not None:
                    self._stopped(position, f"on being cancelled it raised {error_text(exc)}")
                raise asyncio.CancelledError from exc
            problem = tool.argument_problem(args) if type(exc) is TypeError and tool.check_arguments else None
            if problem is not None:  # the call itself failed (its body never ran): not the tool's error
                status, text, value, timing = "invalid_arguments", _invalid(call, problem), None, DECIDED
            else:
                status, text, value = "error", f"Error: tool {call.name!r} raised {error_text(exc)}", None
        except BaseException as exc:
            if type(exc) is GeneratorExit and being_closed(self._loop):  # an abandoned call's coroutine being
                raise  # closed (its loop went away after a second signal gave up on it): not the tool's
            if position is not None and being_cancelled():  # it raised this on being cancelled: the cut
                by_run = self._cut()  # stands (its record says so), and the run stops with what it
                self._stopped(position, f"on being cancelled it raised {error_text(exc)}")  # raised (the
                stopped = self.interrupted(exc, f"tool {call.name!r}")  # cut: the run's, or its task's
                stopped.on_cut = "run" if by_run else "task"  # alone, e.g. the strategy's wait_for)
                raise stopped from exc
            raise self._stops_the_run(call, exc, started, timing) from exc
        ended = clock() - origin
        deadline = self.deadline
        if deadline is not None and position is not None and self.held_past_deadline is not None:
            when = deadline.when()
            if when is not None and ended + origin >= when and not deadline.expired():
                # It returned after the run's deadline, whose timer had not run yet: a hook (or the
                # on_event listener) held the event loop past it, so the call's end, and its duration,
                # would include that hold. Cut off like every call still running at the deadline. (A
                # tool that blocks the loop itself keeps its result: its duration is its own.)
                self._stopped(
                    position,
                    f"it returned only at {ended:.3f} s, after the deadline, as a hook had held the event "
                    "loop past it; that result is discarded",
                )
                await self._after_hook(None)  # (the deadline fires now: nothing after it)
                raise asyncio.CancelledError
        # This call's own task (not the run's) was cancelled: the tool received the cancellation,
        # caught it and returned. A call that finished on its own while the run was being cut (at the
        # same instant, or before its task's turn came) keeps its outcome: no cancellation reached it.
        own = _RUNNING.get(self._loop) if _RUNNING is not None else _own_task(self._loop)
        if own.cancelling():  # type: ignore[union-attr]
            if position is not None:
                self._stopped(
                    position,
                    f"it caught the cancellation and returned at {ended:.3f} s; that result is discarded",
                )
            raise asyncio.CancelledError
        if type(value) is str:
            text = value
        elif status == "ok":
            if isinstance(value, ToolOutcome):
                status, text = value.status, value.text
                if value.duration_s is not None:
                    returned = ended
                    ended, timing = self._supplied(value, started, ended, timing)
                    if ended < returned - 1e-9:  # the reported span is shorter: say when it returned
                        return replace(
                            make_execution(
                                call.tool_call_id, call.name, call.arguments, call.index, status, text,
                                None if status == "ok" else text, started, ended, None, timing,
                            ),
                            returned_at=returned,
                        )  # fmt: skip
            else:
                try:
                    text = result_text(value)
                except NotText as exc:
                    status = "error"
                    text = (
                        f"Error: tool {call.name!r} returned {exc}; a tool returns a str, or data JSON "
                        "can carry (dict, list, str, number, bool, None)."
                    )
        return make_execution(
            call.tool_call_id, call.name, call.arguments, call.index, status, text,
            None if status == "ok" else text, started, ended, None, timing,
        )  # fmt: skip

    def _refused(self, position: int | None, at: float) -> None:
        """No call may start now (`HookCalls.refuse_start`, which delivers an abort's or a signal's
        cancellation not delivered yet): the call at `position` is recorded as never started."""
        if self.refuse_start():
            if position is not None:
                self.phases[position] = ("queued", at, None)
            raise asyncio.CancelledError

    def _stopped(self, position: int, note: str | None = None) -> None:
        """The call at `position` stopped on being cancelled (`note`: how, if not simply). Once a second
        signal gave up waiting for the calls, one that stops afterwards (e.g. on a further
        cancellation) is not counted: when the run gave up, it had not stopped, and its record says so."""
        give_up = self.give_up
        if give_up is not None and give_up.done():
            return
        self.stopped.add(position)
        if note is not None:
            self.cut_notes[position] = note

    def _never_ran(self, call: ToolCall, position: int | None, why: str) -> None:
        """The on_tool_start hook of the call at `position` failed and its failure was recorded as
        "ignored; the call ran", then the run stopped before the call ran (`why`: e.g. the event
        listener raised at the failure's event): the record says so instead."""
        failures = self.hook_failures
        if failures:
            last = failures[-1]
            if (
                last.hook == "on_tool_start"
                and last.round_index == self.round_index
                and last.position == position
                and last.tool_call_id == call.tool_call_id
            ):
                failures[-1] = replace(
                    last, effect=f"{last.effect.split(';')[0]}; but {why}: the call never ran"
                )

    def _stops_the_run(
        self, call: ToolCall, exc: BaseException, started: float, timing: Timing
    ) -> Interrupted:
        """The tool raised a BaseException (KeyboardInterrupt, SystemExit, GeneratorExit): its record,
        carried out of the run's tasks with it."""
        text = f"Error: tool {call.name!r} raised {error_text(exc)}; the run stopped."
        ex = make_execution(
            call.tool_call_id, call.name, call.arguments, call.index, "error", text, text, started,
            self.now(), None, timing,
        )  # fmt: skip
        stopped = self.interrupted(exc, f"tool {call.name!r}")
        stopped.execution = ex
        return stopped

    async def _execute_hooked(
        self, call: ToolCall, position: int | None = None, started: float | None = None
    ) -> ToolExecution:
        """`execute` with the per-call hooks around it (on_tool_start, approve_result,
        on_tool_complete), keeping where the call stands in `phases` for a run cut off meanwhile."""
        hooks = self.hooks
        phases = self.phases if position is not None else None
        if self.stop_asked or self._cancelling():  # (an abort just now: not even its first hook starts)
            self._refused(position, self.now() if started is None else started)
        if self.deadline is not None:  # a sibling's hook may have held the loop past it: not started
            if phases is not None:
                phases[position] = ("queued", self.now(), None)  # type: ignore[index]
            await self._after_hook(None)
        if hooks.on_tool_start is not None:
            if phases is not None:
                phases[position] = ("on_tool_start", self.now(), None)  # type: ignore[index]
            try:
                await self.ask(
                    "on_tool_start",
                    hooks.on_tool_start,
                    (call,),
                    effect="ignored; the call ran",
                    call=call,
                    position=position,
                )
            except Interrupted as stop:  # the tool never started
                what = type(stop.original).__name__
                who = "the on_tool_start hook" if stop.where == "hook on_tool_start" else stop.where
                stop.execution = self._made(
                    call, "cancelled", f"Not executed: {who} raised {what}; the run stopped."
                )
                if stop.where != "hook on_tool_start":  # (the hook failed, then a listener stopped the run)
                    self._never_ran(call, position, f"{who} raised {what} meanwhile")
                raise
            started = None
        if started is None:
            started = self.now()
        if phases is not None:
            phases[position] = ("running", started, None)  # type: ignore[index]
        ex = await Executor.execute(self, call, position, started)
        if hooks.approve_result is not None and ex.status == "ok":
            if phases is not None:
                phases[position] = ("approve_result", ex.ended_at, ex)  # type: ignore[index]
            try:
                reason = await self.approval(
                    "approve_result", hooks.approve_result, (call, ex), "result withheld", call, position
                )
            except Interrupted as stop:  # the tool ran; its result was never approved
                what = type(stop.original).__name__
                stop.execution = self._withheld(ex, f"the approve_result hook raised {what}; the run stopped")
                raise
            if reason is not None:
                ex = self._withheld(ex, reason)
        if hooks.on_tool_complete is not None:
            if phases is not None:
                phases[position] = ("on_tool_complete", ex.ended_at, ex)  # type: ignore[index]
            try:
                await self.ask(
                    "on_tool_complete",
                    hooks.on_tool_complete,
                    (ex,),
                    effect="ignored; the result stands",
                    call=call,
                    position=position,
                )
            except Interrupted as stop:  # the call is settled; its record stands
                stop.execution = ex
                raise
        return ex

    @staticmethod
    def _withheld(ex: ToolExecution, reason: str) -> ToolExecution:
        """The call ran; the model gets `reason` instead of its result, which the record keeps
        (`ToolExecution.withheld_result`), with every other field of the call's record."""
        text = f"Result withheld: {reason}."
        return replace(ex, status="withheld", result=text, error=text, withheld_result=ex.result)

    def _timed_out(self, call: ToolCall, tool: Tool, expired: _HarnessTimeout) -> str:
        real = self.virtual and not tool.is_async
        text = f"Error: tool {call.name!r} timed out after {tool.timeout_s} s (the harness's limit" + (
            ", in real seconds: on the virtual clock a sync tool takes no virtual time)." if real else ")."
        )
        if expired.never_started:
            return text + (
                " No worker thread had started it by then (the machine was busy): it was withdrawn "
                "and never ran."
            )
        if expired.args and expired.args[0]:
            text += f" {expired.args[0]}"
        if not tool.is_async:
            text += " Its thread cannot be stopped and may still be running; its result is discarded."
        return text

    def _supplied(
        self, value: ToolOutcome, started: float, ended: float, clock: Timing
    ) -> tuple[float, Timing]:
        """The end and label of a duration the tool supplied (`ToolOutcome.duration_s`): used when it
        fits within the time the call took here, else the measurement stands and the note says why."""
        d, label = value.duration_s, value.timing
        assert d is not None and label is not None  # (ToolOutcome checks they come together)
        measured = ended - started
        if d <= measured + 1e-9:
            return started + d, label
        note = (
            f"{clock.note}; the tool reported {d} s ({label.source}: {label.note}), more than the "
            f"{measured:.6f} s the call took here, so the measurement is kept"
        )
        return ended, Timing(source=clock.source, note=note)

    async def _limited(self, tool: Tool, args: dict[str, Any], started: float, position: int | None) -> Any:
        """The tool under its own limit; the harness's expiry is told apart from the tool's own
        TimeoutError, also when the tool caught the cancellation or its cleanup raised or took time."""
        timeout_s = tool.timeout_s
        assert timeout_s is not None
        if not tool.is_async and self.virtual:  # no virtual time passes: hold it to real seconds
            try:
                return self.threads.wait(tool.function, args, timeout_s)
            except NeverStarted:
                raise _HarnessTimeout(never_started=True) from None
            except LimitExpired:
                raise _HarnessTimeout from None
        limit = asyncio.Timeout(started + self.origin + timeout_s)  # (the limit counts from the call's start)
        job: concurrent.futures.Future[Any] | None = None
        try:
            async with limit:
                if tool.is_async:
                    value = await tool.function(**args)
                else:
                    pending, job = self.threads.start(tool.function, args)
                    value = await pending
        except asyncio.CancelledError:
            if job is not None and position is not None and being_cancelled() and job.cancel():
                self.phases[position] = ("no_worker", started, None)  # (no worker had taken it up)
            raise
        except Exception as exc:
            if limit.expired() and from_limit(exc):  # the limit's own TimeoutError: the tool stopped
                never = job is not None and job.cancel()  # (True: no worker had taken it: it never runs)
                raise _HarnessTimeout("" if never else self._late(started, timeout_s), never) from None
            if limit.expired():  # raised on being cancelled at the limit (e.g. in its cleanup; also a
                raise _HarnessTimeout(  # TimeoutError of its own: by type the two are the same)
                    self._late(started, timeout_s, f"on being cancelled it raised {error_text(exc)}")
                ) from None
            raise
        if limit.expired():  # it caught the cancellation and returned anyway
            raise _HarnessTimeout(
                self._late(started, timeout_s, "it caught the cancellation and returned")
                + " That result is discarded."
            )
        return value

    def _late(self, started: float, timeout_s: float, what: str | None = None) -> str:
        """What the tool did at the limit, when it did not simply stop there (`what`: what it did)."""
        ended = self.now()
        if what is not None:
            return f"At the limit {what} at {ended:.3f} s."
        if ended - started <= timeout_s + 0.01:
            return ""
        return f"It stopped only at {ended:.3f} s (its cleanup took the rest)."

    def remember(
        self, executions: Sequence[ToolExecution], calls: Sequence[ToolCall], round_index: int
    ) -> None:
        """Add this batch's successful calls to the cross-round history (for the tools it applies to)."""
        if not (self.dedupe_across_rounds or self.tools.any_idempotent):
            return
        for call, ex in zip(calls, executions, strict=True):
            if ex.status != "ok":
                continue
            tool = self.tools.get(call.name)
            if tool is None or not (self.dedupe_across_rounds or tool.idempotent):
                continue
            outcome = parse_arguments(
                call.arguments
            )  # the string: what the model sent, whatever the tool did
            if type(outcome) is ParsedArguments:
                self.history.setdefault(
                    (call.name, canonical_json(outcome.value)), (call.tool_call_id, round_index)
                )

"""The round loop: ask the model, run its tool calls under a strategy, repeat, record everything.

Reads like the protocol it implements: each round sends the conversation with the tools, executes the
batch of calls the model answered with (the strategy decides when each call runs; see
`toolcall_lab.strategies`), and appends the assistant message and one tool message per call. A
strategy that streams (``eager``) gets each call as soon as it is complete, while the model is still
streaming; the next model request waits until the stream has ended and every call has finished.
Such a strategy runs in a task of its own beside the stream's; built-in ``eager`` needs neither: its
batch dispatches each call as it arrives while the run's own task receives the stream, and the
strategy is called once the stream has ended (`_Run.receive_dispatching`), so a round costs it no
more tasks or loop steps than ``parallel``. Termination rules:

- the model answers without tools: done (``final_answer``); an *empty* answer after tool rounds is
  followed by the `EMPTY_ANSWER_NOTE` and one more call without tools, once (``final_reason`` of that
  round: ``empty_answer``);
- ``max_rounds`` used up: a system note and one final call without tools;
- ``fail_fast``: a round with any failed call is followed by one final call without tools (also when
  every call failed);
- ``continue``: a round where every call failed (a duplicate of a failed call counting as failed)
  ends the run, with `ALL_FAILED_NOTE` appended as the assistant's message (``all_failed_policy="stop"``,
  the default) or goes on like any other round (``"continue"``);
- the deadline ``timeout_s`` passes: status ``timeout``; abort (`AbortHandle`): status ``aborted``
  (an abort at the deadline's very instant wins, under every strategy);
- ``before_model_call`` raises: ``hook_error``; the model fails: ``model_error``; the strategy raises
  (or returns with calls neither run nor skipped): ``strategy_error``.

Calls made without tools never carry tool-only parameters (`TOOL_ONLY_PARAMS`). Whatever ends a run,
the record is closed consistently: finished calls keep their outcome, calls cut off are recorded as
cancelled (a call whose tool had ended keeps that outcome, even if a result hook was still running),
and every call that was made is answered in the transcript (a response cut off while calls it had
already started were running is recorded as far as it came). A task cancellation or a
KeyboardInterrupt (or other BaseException) propagates out of `run`, with that record as the
exception's ``partial_result``.

What the loop hands to user code is never what it records: the model and ``before_model_call`` get
copies of the conversation, hooks and listeners copies of chunks and usage (`toolcall_lab._copy`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dis
import inspect
import itertools
import math
import os
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any, cast

from toolcall_lab._copy import json_copy
from toolcall_lab._execution import Executor, Hooks, Interrupted, being_cancelled, being_closed, from_limit
from toolcall_lab._hooks import GIVE_UP, wait_until_stopped
from toolcall_lab._model_call import ModelFailed, ModelStream, repeated_ids, unclash
from toolcall_lab._outcomes import error_text
from toolcall_lab._stopping import CURRENT, AbortHandle, Outside, run_main
from toolcall_lab.clock import STALL_GRACE_S, VirtualEventLoop
from toolcall_lab.events import (
    ErrorEvent,
    EventListener,
    FinalAnswer,
    HookFailed,
    ModelRequested,
    ModelResponded,
    RoundStarted,
    RunEvent,
    RunFinished,
    Thought,
)
from toolcall_lab.exceptions import ReplayDivergenceError, ScriptError, UsageError
from toolcall_lab.messages import Finding, ParsedResponse, ToolCall
from toolcall_lab.models import Model, ModelRequest
from toolcall_lab.records import FinalReason, HookFailure, ModelCall, Round, Timing, count_failed
from toolcall_lab.runs import TOOL_ONLY_PARAMS, Reason, RunConfig, RunResult, Status
from toolcall_lab.strategies import Batch, StrategySpec
from toolcall_lab.strategies.eager import runs_without_task
from toolcall_lab.tools import Tool, ToolFunction, ToolRegistry

__all__ = ["AbortHandle", "Hooks", "RunConfig", "RunResult", "as_messages", "as_registry", "run", "run_sync"]


def _unfinished(batch: Batch) -> str:
    """Which of a batch's calls a strategy left unfinished, and how far each got: running, or
    dispatched (`Batch.start`) but not started yet (its task had not run when the strategy returned)."""
    n = len(batch._done)
    running = [p for p in range(n) if batch._done[p] is None and batch._started[p] is not None]
    waiting = [p for p in range(n) if batch._done[p] is None and batch._started[p] is None and batch._open[p]]
    parts = [f"{running} running"] if running else []
    parts += [f"{waiting} dispatched but not started yet (they never ran)"] if waiting else []
    return f": the calls at positions {' and '.join(parts)}" if parts else ""


class NeverReturned(Exception):
    """A strategy had not returned when no virtual-clock event was pending (the virtual loop waited
    `STALL_GRACE_S` real seconds): it waits for something that never happens (a deadlock), or for
    real work of its own, such as a thread it started, that took longer than that."""


class _StrategyFailed(Exception):
    """The strategy raised (``__cause__``), or returned with calls unsettled: a bug in the strategy."""


class _Carried(Exception):
    """A KeyboardInterrupt or SystemExit raised inside a helper task of the run (the model's stream
    or the strategy under ``eager``): asyncio would re-raise it out of the event loop, leaving the run
    unfinished and its tasks pending; carried as an ordinary exception to the run's own task, which
    raises the original there (with the partial record, like anywhere else)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(repr(exc))
        self.exc = exc


class _StreamStopped(BaseException):
    """Raised through the stream's parsing when what must stop the run happened in the run's own task
    as a call arrived under built-in ``eager`` (`_Run.receive_dispatching` raises that instead)."""


def _stopping(exc: BaseException) -> BaseException:
    """What a failure that stopped built-in ``eager``'s stream raises in the run's task: what a
    strategy's run lets through stays as it is (`run_strategy`); anything else is the harness's own
    failure, reported as the strategy's."""
    if isinstance(exc, Exception) and not isinstance(exc, _STOPS_THE_RUN):
        failed = _StrategyFailed(exc)
        failed.__cause__ = exc
        return failed
    return exc


async def _carrying(awaitable: Any) -> Any:
    try:
        return await awaitable
    except (KeyboardInterrupt, SystemExit) as exc:
        raise _Carried(exc) from None


_RAISE = dis.opmap["RAISE_VARARGS"]


def _raised_by_code(exc: BaseException) -> bool:
    """Whether `exc` came from a ``raise`` statement, rather than from a signal handler (Python's
    Ctrl-C handler raises KeyboardInterrupt wherever the code happens to be: in a call, a loop)."""
    if getattr(exc, "from_signal", False):  # (a handler of ours raised it: `_stopping.signalled`)
        return False
    tb = exc.__traceback__
    if tb is None:
        return True
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code.co_code
    return 0 <= tb.tb_lasti < len(code) and code[tb.tb_lasti] == _RAISE


_STOPS_THE_RUN = (Interrupted, ReplayDivergenceError, ScriptError, asyncio.CancelledError)
"""What a strategy's run lets through as is: these end the run as they would anywhere else."""
_INTERRUPTS = (Interrupted, KeyboardInterrupt, SystemExit)
"""What a tool, hook or listener raised that `run` re-raises as itself, also when an abort or the
deadline cut the run at the same time (under every strategy, as under ``parallel``)."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_NOT_USER_CODE = (_PACKAGE, os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep)
"""Frames of this package and of asyncio: where a strategy's failure is said to be is its own code."""


def _where(exc: BaseException) -> str:
    """Where `exc` was raised: the last frame outside this package (the user's strategy, not the
    batch method that refused what it asked), else the last frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    outside = [f for f in frames if not os.path.abspath(f.filename).startswith(_NOT_USER_CODE)]
    if not outside and isinstance(exc, UsageError):
        return ""  # the loop's or the batch's own verdict on the strategy: it says what was wrong
    last = (outside or frames)[-1]
    return f" (at {last.filename}:{last.lineno} in {last.name})"


def _described(exc: BaseException) -> str:
    """`exc` in words, with where it was raised; an exception group by what it holds (a task
    group's ``unhandled errors`` says nothing about them)."""
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []
        stack: list[BaseException] = [exc]
        while stack:
            e = stack.pop(0)
            if isinstance(e, BaseExceptionGroup):
                stack[:0] = list(e.exceptions)
            else:
                leaves.append(e)
        inner = "; ".join(_described(e) for e in leaves[:3]) + ("; ..." if len(leaves) > 3 else "")
        return f"{type(exc).__name__} of {len(leaves)} ({inner})"
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if not isinstance(exc, Exception):
        text += (
            " (raised by the strategy's own code: recorded as its failure, not as a cancellation or "
            "interruption of the run)"
        )
    return f"{text}{_where(exc)}"


_RUN_IDS = itertools.count(1)


class _Run:
    """One run's mutable state; `RunResult` is its frozen summary."""

    def __init__(
        self,
        model: Model,
        tools: ToolRegistry,
        messages: list[dict[str, Any]],
        config: RunConfig,
        hooks: Hooks,
        listener: EventListener | None,
    ) -> None:
        self.model, self.tools, self.config, self.hooks = model, tools, config, hooks
        self.listener = listener
        self.initial = tuple(messages)
        self.messages = list(messages)
        self.rounds: list[Round] = []
        self.events: list[RunEvent] = []
        self.run_id = f"run-{next(_RUN_IDS)}"
        """Stamped on every event this run emits (`RunEvent.run_id`): unique in this process."""
        self.batch = 0
        self.origin = asyncio.get_running_loop().time()
        self.executor = Executor(
            tools,
            hooks,
            self.origin,
            dedupe=config.dedupe,
            dedupe_across_rounds=config.dedupe_across_rounds,
        )
        self.executor.on_hook_failure = self.hook_failed
        self.executor.before_start = getattr(model, "before_start", None)  # (a replay's cut: `replay`)
        if config.timeout_s is not None:  # (code that blocks the loop may hold it past the deadline)
            self.executor.check_deadline_per_call()
        self.deadline_fired_at: float | None = None
        """When the deadline's timer actually ran (later than the deadline when the loop was held)."""
        self.status: Status = "completed"
        self.reason: Reason = "final_answer"
        self.error: str | None = None
        self.final_answer: str | None = None
        self.partial: dict[str, Any] = {}
        self.streaming: ModelStream | None = None
        """The model call in progress, if any."""
        self.retried_empty = False
        self.ids_seen: dict[str, int] = {}
        """Tool-call ids of the recorded rounds -> the first round that carried each."""
        self.deadline: asyncio.Timeout | None = None
        self.copy: Callable[[Any], Any] = _same if getattr(model, "copy_free", False) else json_copy
        """What the model is handed: copies, unless it promises to leave requests alone (`Model`)."""
        self.strategy = config.strategy
        self.strategy_name: str = self.strategy.name
        self.streams = bool(getattr(self.strategy, "streams", False))
        self.dispatching = self.streams and runs_without_task(self.strategy)
        """Built-in eager: the batch dispatches calls while the stream is received in the run's task."""
        self.concurrency: int | None = getattr(self.strategy, "concurrency", None) or config.concurrency
        self.strategy_runner: asyncio.Task[Any] | None = None
        """The task running the strategy, while it runs."""
        self.stall: str | None = None
        """Why a strategy that never returns was stopped (set by `stalled`)."""
        self.strategy_cut: str | None = None
        """What the strategy was waiting for when the run was cut off."""
        self.warned_return = False
        self.tool_limits: Mapping[str, int] = MappingProxyType(
            dict(getattr(self.strategy, "tool_limits", None) or {})
        )

    def now(self) -> float:
        return asyncio.get_running_loop().time() - self.origin

    def emit(self, event: RunEvent) -> None:
        if not event.run_id:  # (a new event, seen by no one yet: stamped in place, no copy per event)
            object.__setattr__(event, "run_id", self.run_id)
        self.events.append(event)
        if self.listener is not None:
            try:
                returned = self.listener(event)
                if inspect.isawaitable(returned):  # nothing would ever await it
                    if inspect.iscoroutine(returned):
                        returned.close()
                    raise TypeError("returned an awaitable; event listeners are called synchronously")
            except (Exception, asyncio.CancelledError) as exc:  # a listener's bug is recorded; the run goes
                # on (a CancelledError too: called, not awaited, a listener is never cancelled, so one it
                # raises is its own, as for any hook: `Hooks`)
                call = getattr(event, "call", None)  # (an action's call; an observation's execution)
                ex = getattr(event, "execution", None)
                self.executor.hook_failed(
                    "on_event",
                    exc,
                    f"ignored; the {event.kind} event stands",
                    call if isinstance(call, ToolCall) else None,
                    ex.index if ex is not None else call.index if isinstance(call, ToolCall) else None,
                    tool_call_id=ex.tool_call_id if ex is not None else None,
                )
            except BaseException as exc:  # (KeyboardInterrupt, ...): the run stops; the listener
                self.listener = None  # hears no more (the cut's events are still recorded)
                raise self.executor.interrupted(exc, "the on_event listener") from exc
            if self.deadline is not None:
                self.listener_returned(self.deadline)

    def listener_returned(self, deadline: asyncio.Timeout) -> None:
        """A listener is called, not awaited: one that blocks (``time.sleep``, ``input()``) holds the
        event loop, the deadline's timer too. When it returned past the deadline, say so (the run's
        error names it); the deadline fires at the run's next await, and no call starts after it
        (`Executor.check_deadline_per_call`)."""
        when = deadline.when()
        executor = self.executor
        if when is None or executor.held_past_deadline is not None or deadline.expired():
            return
        if asyncio.get_running_loop().time() >= when:
            executor.held_past_deadline = ("on_event", self.now())

    def hook_failed(self, failure: HookFailure) -> None:
        event = HookFailed(
            at=failure.at, round_index=failure.round_index, failure=failure, run_id=self.run_id
        )
        if failure.hook == "on_event":  # not back to the listener that just failed
            self.events.append(event)
        else:
            self.emit(event)

    async def guarded(self) -> None:
        """`main` under the run's deadline; BaseExceptions carried out of the task (see `Interrupted`)."""
        self.executor.watch(asyncio.current_task())  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        virtual = isinstance(loop, VirtualEventLoop)
        if virtual:
            loop.on_stall.append(self.stalled)  # type: ignore[attr-defined]
        try:
            if self.config.timeout_s is None:
                await self.main()
                return
            async with asyncio.timeout(self.config.timeout_s) as self.deadline:
                self.executor.deadline = self.deadline
                when = self.deadline.when()
                watch = loop.call_at(when, self.deadline_reached) if when is not None else None
                try:
                    await self.main()
                finally:
                    if watch is not None:
                        watch.cancel()
        except (Exception, asyncio.CancelledError):
            raise
        except BaseException as exc:
            if isinstance(exc, GeneratorExit) and being_closed(loop):
                raise  # the coroutine is being closed (its loop went away): nothing to carry
            raise Interrupted(exc, "the run") from exc
        finally:
            if virtual:
                loop.on_stall.remove(self.stalled)  # type: ignore[attr-defined]

    def deadline_reached(self) -> None:
        """(A timer at the deadline) when it ran: code that blocks the event loop past the deadline
        (a plain-function hook or listener, blocking code in a strategy or a tool) delays it."""
        self.deadline_fired_at = self.now()

    async def main(self) -> None:
        cfg = self.config
        for round_index in range(cfg.max_rounds):
            rnd = await self.round(round_index, offer_tools=True)
            if rnd is None:
                return
            if not rnd.tool_calls:
                await self.finish(rnd, "final_answer")
                return
            answered = [e for e in rnd.executions if e.answered]
            failed = count_failed(answered)
            if failed and cfg.error_policy == "fail_fast":
                await self.final_round(round_index + 1, "fail_fast")
                return
            if answered and failed == len(answered) and cfg.all_failed_policy == "stop":
                self.messages.append({"role": "assistant", "content": cfg.all_failed_note})
                unanswered = len(rnd.executions) - len(answered)  # first_only's skips: never run
                which = (
                    f"every call of round {round_index} that ran failed ({len(answered)} ran, "
                    f"{unanswered} skipped without running)"
                    if unanswered
                    else f"every call of round {round_index} failed"
                )
                self.stop(
                    "failed",
                    "all_calls_failed",
                    f"{which}; the loop answered with its own assistant message ({cfg.all_failed_note!r}) "
                    "and stopped",
                )
                return
        self.messages.append({"role": "system", "content": cfg.final_note.format(max_rounds=cfg.max_rounds)})
        await self.final_round(cfg.max_rounds, "max_rounds")

    async def final_round(self, round_index: int, why: FinalReason) -> None:
        rnd = await self.round(round_index, offer_tools=False, final_reason=why)
        if rnd is not None:
            await self.finish(rnd, cast(Reason, why))

    async def finish(self, rnd: Round, reason: Reason) -> None:
        """The model answered without tool calls: its text ends the run (an empty one is retried once
        when tool rounds came before it, with the empty-answer note)."""
        text = rnd.assistant_message.get("content")
        if not (text and text.strip()) and not rnd.tool_calls:  # whitespace says nothing either
            after_tools = any(r.tool_calls for r in self.rounds)
            if after_tools and not self.retried_empty:
                self.retried_empty = True
                self.messages.append({"role": "user", "content": self.config.empty_answer_note})
                again = await self.round(rnd.round_index + 1, offer_tools=False, final_reason="empty_answer")
                if again is not None:
                    await self.finish(again, reason)
                return
            ignored = [f for f in rnd.findings if f.kind == "unexpected_event"] if rnd.final else []
            why = (
                "only tool calls, which were ignored (no tools offered)"
                if ignored
                else "no text and no tool calls"
                if not text
                else f"only whitespace ({text!r}) and no tool calls"
            )
            retried = " again, after the empty-answer note" if rnd.final_reason == "empty_answer" else ""
            self.stop(
                "failed", "empty_response", f"round {rnd.round_index}: the model returned {why}{retried}"
            )
            return
        self.final_answer = text
        self.reason = reason
        self.emit(FinalAnswer(at=self.now(), round_index=rnd.round_index, text=text or ""))

    def stop(self, status: Status, reason: Reason, message: str | None = None) -> None:
        self.status, self.reason = status, reason
        if message:
            self.error = message
            self.emit(
                ErrorEvent(
                    at=self.now(), round_index=len(self.rounds) - 1 if self.rounds else None, message=message
                )
            )

    async def round(
        self, round_index: int, *, offer_tools: bool, final_reason: FinalReason | None = None
    ) -> Round | None:
        """One model call and its batch; None when the run stopped before the batch (hook, model)."""
        executor = self.executor
        if executor.stop_asked and executor.refuse_start():  # an abort just now (a tool's, as the batch
            raise asyncio.CancelledError  # ended): no round begins, no model call is sent (r22 #4)
        self.partial = {"round_index": round_index, "final_reason": final_reason}
        self.executor.round_index = round_index
        self.emit(RoundStarted(at=self.now(), round_index=round_index))
        sent = list(self.messages)
        hook = self.hooks.before_model_call
        if hook is not None:
            effect = "the run stopped before this model call"
            given = json_copy(sent)  # its edits, in place or returned, apply to this call only
            ok, value = await self.executor.ask("before_model_call", hook, (given,), effect=effect)
            if ok and value is None:
                value = given
            if ok:
                if isinstance(value, list | tuple) and all(isinstance(m, dict) for m in value):
                    sent = json_copy(list(value))  # the record: as sent, whatever the hook keeps doing
                else:
                    value = TypeError(f"returned {type(value).__name__}, expected a list of messages or None")
                    self.executor.hook_failed("before_model_call", value, effect, None, None)
                    ok = False
            if not ok:
                self.stop(
                    "failed",
                    "hook_error",
                    f"round {round_index}: the before_model_call hook failed "
                    f"({error_text(value)}); the run stopped before this model call",
                )
                return None
        params = self.config.params
        if not offer_tools and TOOL_ONLY_PARAMS.intersection(params):
            params = {k: v for k, v in params.items() if k not in TOOL_ONLY_PARAMS}
        copy = self.copy  # copies: the model may do as it likes with them
        request = ModelRequest(
            messages=tuple(copy(sent)),
            tools=tuple(copy(self.tools.schemas())) if offer_tools else None,
            round_index=round_index,
            batch=self.batch,
            params=copy(params),
        )
        self.batch += 1
        self.partial["request"] = request
        self.partial["sent"] = tuple(sent)
        self.emit(
            ModelRequested(
                at=self.now(), round_index=round_index, n_messages=len(sent), tools_offered=offer_tools
            )
        )
        streams = self.streams and offer_tools
        batch: Batch | None = None
        strategy_task: asyncio.Task[None] | None = None
        dispatching = streams and self.dispatching
        if streams:  # the strategy starts with the stream, and calls arrive as each is complete
            batch = self.new_batch(round_index, (), None, streaming=True)
            self.partial["batch"] = batch
        stream = self.streaming = ModelStream(
            self.model, request, self.executor, batch._arrive if batch is not None else None
        )
        try:
            if dispatching and batch is not None:
                model_call, parsed = await self.receive_dispatching(stream, batch)
            elif batch is not None:
                strategy_task = asyncio.get_running_loop().create_task(_carrying(self.run_streaming(batch)))
                model_call, parsed = await self.stream_alongside(stream, strategy_task, batch)
            else:
                model_call, parsed = await stream.receive(self.hooks.on_model_chunk)
        except ModelFailed as exc:
            cause = exc.__cause__
            where = f" ({stream.unrecorded('when it failed')})" if stream.chunks else ""
            why = f"the model call failed ({type(cause).__name__}: {cause})"
            if batch is not None and (strategy_task is not None or dispatching):
                await self.stop_strategy(strategy_task, batch)
                if batch._began():
                    self.close_cut_stream(why, model_failed=True)
                    where = f" ({stream!r} when it failed; recorded as far as it came)"
            self.streaming = None
            self.stop(
                "failed",
                "model_error",
                f"round {round_index}: the model call failed: {type(cause).__name__}: {cause}{where}",
            )
            return None
        except _StrategyFailed as exc:  # a streaming strategy failed while the model streamed
            self.strategy_failed(exc, round_index, mid_stream=True)
            return None
        try:
            calls, assistant, findings = self.received(round_index, model_call, parsed, offer_tools)
        except BaseException:  # (an event listener stopping the run): the strategy's calls stop too
            if batch is not None and (strategy_task is not None or dispatching):
                await self.stop_strategy(strategy_task, batch)
            raise
        self.streaming = None  # (left set when the run is cut off mid-stream: `cut` says so)
        self.messages.append(assistant)
        if batch is None:
            batch = self.new_batch(round_index, calls, assistant)
        else:
            batch._end_stream(calls, assistant, model_call.chunk_timing)
            held = stream.tracker.out_of_order if stream.tracker is not None and calls else None
            if held is not None:  # (else eager saving nothing would go unexplained)
                batch.note(
                    f"{self.strategy_name}: calls from the first out-of-order index on could start only when "
                    f"the stream ended: the stream's call indices did not run 0, 1, 2, ... ({held}); a call "
                    "starts early only while they do (otherwise its position in the batch is known only at "
                    "the end)"
                )
        self.partial.update(model_call=model_call, assistant=assistant, batch=batch, findings=findings)
        try:
            if strategy_task is not None:
                try:
                    await strategy_task
                except _Carried as carried:
                    raise carried.exc from None
            elif calls or (dispatching and batch._indices):  # (eager: it joins the calls it dispatched)
                await self.run_strategy(batch)
            left = batch._unsettled()
            if left and self.executor.refuse_start():  # (an abort came as the strategy returned: the
                raise asyncio.CancelledError  # calls it had not run never start; the cut records them)
            if left:
                hint = (
                    "; a strategy that streams gets its calls from `async for pos in batch.arrivals()`"
                    if self.streams
                    else "; did it await batch.run(...) / run_parallel(...) / join()?"
                )
                unsettled = UsageError(
                    f"returned with the calls at positions {left} neither run nor skipped{hint}"
                )
                raise _StrategyFailed(unsettled) from unsettled
        except _StrategyFailed as exc:
            self.strategy_failed(exc, round_index)
            return None
        return self.close_round()

    def new_batch(
        self,
        round_index: int,
        calls: Sequence[ToolCall],
        assistant: dict[str, Any] | None,
        *,
        streaming: bool = False,
    ) -> Batch:
        return Batch(
            self.executor,
            calls,
            round_index=round_index,
            emit=self.events.append if self.listener is None else self.emit,
            strategy=self.strategy_name,
            assistant_message=assistant,
            concurrency=self.concurrency,
            tool_limits=self.tool_limits,
            round_trip_s=self.config.round_trip_s,
            streaming=streaming,
            skips_calls=bool(getattr(self.strategy, "skips_calls", False)),
            run_id=self.run_id,
        )

    def received(
        self, round_index: int, model_call: ModelCall, parsed: ParsedResponse, offer_tools: bool
    ) -> tuple[tuple[ToolCall, ...], dict[str, Any], list[Finding]]:
        """The calls to run, the assistant message and the findings of a response that has ended."""
        choice = parsed.first
        findings = list(parsed.findings)
        calls: tuple[ToolCall, ...] = choice.tool_calls
        assistant = choice.to_message()
        if calls and not offer_tools:
            findings.append(
                Finding(
                    kind="unexpected_event",
                    severity="warning",
                    message=f"round {round_index}: {len(calls)} tool call(s) in the final "
                    "answer made without tools; ignored",
                )
            )
            calls = ()
            assistant.pop("tool_calls", None)
        calls, renamed = unclash(calls, round_index)
        if renamed:
            findings += renamed
            assistant["tool_calls"] = [c.to_openai() for c in calls]
        findings += repeated_ids(calls, round_index, self.ids_seen)
        self.emit(
            ModelResponded(
                at=self.now(),
                round_index=round_index,
                ttfc_s=model_call.ttfc_s,
                latency_s=model_call.latency_s,
                n_tool_calls=len(calls),
                usage=json_copy(model_call.usage),  # the listener's own: the record keeps its copy
                timing=model_call.timing,
                chunk_timing=model_call.chunk_timing,
                n_chunks=len(model_call.chunks),
                started_at=model_call.started_at,
                ended_at=model_call.ended_at,
            )
        )
        if choice.reasoning:
            self.emit(Thought(at=self.now(), round_index=round_index, text=choice.reasoning))
        if choice.content and calls:
            self.emit(Thought(at=self.now(), round_index=round_index, text=choice.content))
        return calls, assistant, findings

    async def run_streaming(self, batch: Batch) -> None:
        """A streaming strategy's run, once the response holds a call: when the first call becomes
        complete while the model streams, or at the stream's end for calls complete only then. A
        response without calls (the final answer) is no batch: the strategy is not called for it."""
        if await batch._first_arrival():
            await self.run_strategy(batch)

    async def run_strategy(self, batch: Batch) -> None:
        """The strategy's run over `batch`. What it raises is its bug (`_StrategyFailed`), except what
        stops a run anywhere (cancellation, interruptions, replay divergence, a spent script); calls
        it left running are cancelled and drained (and that is its bug too)."""
        runner = self.strategy_runner = self.executor.strategy_task = asyncio.current_task()
        try:
            returned: Any = await cast(Any, self.strategy).run(batch)  # (None, unless it misbehaves)
            self.raise_interrupt()
            if batch._running():
                raise UsageError(
                    f"returned while calls it started had not finished{_unfinished(batch)} (await "
                    "batch.join() after batch.start, and every task running batch.run, before returning)"
                )
            if returned is not None and not self.warned_return:
                self.warned_return = True
                batch.note(
                    f"the strategy {self.strategy_name!r} returned {type(returned).__name__} (a strategy "
                    "returns None; what it returns is not used)"
                )
        except _STOPS_THE_RUN as exc:
            if not isinstance(exc, Interrupted):
                self.raise_interrupt()
            if isinstance(exc, asyncio.CancelledError):
                stall = self.stall
                if stall is not None and runner is not None:
                    self.stall = None
                    runner.uncancel()  # (our own cancellation, to end the wait: not the run's)
                    never = NeverReturned(stall).with_traceback(exc.__traceback__)  # (where it waited)
                    raise _StrategyFailed(never) from never
                if not self.cut_from_outside(batch):
                    raise _StrategyFailed(exc) from exc  # raised by the strategy's own code
                self.strategy_cut = self.waiting_on(batch)
            raise
        except BaseException as exc:  # (KeyboardInterrupt, SystemExit, GeneratorExit raised by the
            closing = being_closed(self.executor._loop)  # strategy itself: a tool's or
            if isinstance(exc, GeneratorExit) and closing:
                raise  # a hook's is `Interrupted`), unless the coroutine is being closed, or it is
            if isinstance(exc, KeyboardInterrupt) and not _raised_by_code(exc):  # a real Ctrl-C that
                raise  # landed while the strategy's own code ran
            self.raise_interrupt()  # (a tool's interrupt wrapped by the strategy, e.g. in a TaskGroup's
            raise _StrategyFailed(exc) from exc  # ExceptionGroup: what stopped the run, not its failure)
        finally:
            self.strategy_runner = self.executor.strategy_task = None
            await batch._drain()

    def raise_interrupt(self) -> None:
        """A tool, hook or listener raised KeyboardInterrupt (or another BaseException) and it did not
        come out of the strategy (its code caught `Interrupted`, an ``Exception``; the calls refused
        after it then raise a cancellation): the run stops with the interrupt, not as cancelled. So
        too with a replay divergence a call raised (not the strategy's failure)."""
        interrupt = self.executor.interrupt
        if interrupt is not None:
            raise interrupt
        divergence = self.executor.divergence
        if divergence is not None:
            raise divergence

    def waiting_on(self, batch: Batch) -> str:
        """What a strategy that has not returned was waiting for, in words."""
        n = len(batch._calls) if not batch._streaming else len(batch._indices)
        left = [p for p in range(n) if batch._done[p] is None]
        calls = "its call" if n == 1 else f"all {n} calls"
        if not left:
            return f"{calls} had finished" if n else "the batch had no calls"
        phases = self.executor.phases  # (a call waiting on the deadline check or its on_tool_start
        waiting = ("queued", "on_tool_start", "no_worker")  # hook had its turn: its tool never started)
        hooked = ("approve_result", "on_tool_complete")  # (its tool had returned: its record stands)
        started = [
            p for p in left if batch._started[p] is not None and phases.get(p, ("",))[0] not in waiting
        ]
        in_hook = [p for p in started if phases.get(p, ("",))[0] in hooked]
        running = [p for p in started if p not in in_hook]
        idle = [p for p in left if p not in started]
        parts = []
        if running:
            parts.append(f"the calls at positions {running} had started and not finished")
        if in_hook:
            parts.append(
                f"the calls at positions {in_hook} had returned and were in their "
                f"{' / '.join(sorted({phases[p][0] for p in in_hook}))} hook"
            )
        if idle:
            parts.append(f"the calls at positions {idle} had not been run")
        return " and ".join(parts)

    def stalled(self) -> bool:
        """(The virtual loop's stall handler) nothing is left to run and the strategy has not
        returned: it never will. End its wait; `run_strategy` reports it."""
        runner, batch = self.strategy_runner, self.partial.get("batch")
        if runner is None or runner.done() or batch is None or self.stall is not None:
            return False
        self.stall = (
            f"it never returned: at {self.now():.3f} s on the virtual clock no virtual-clock event was "
            f"pending (nothing ready to run, no timer, no I/O) for {STALL_GRACE_S} s of real time, and "
            f"{self.waiting_on(batch)}. Either it awaits something that never happens, or real work of "
            f"its own (a thread it started) was still going on: the virtual loop waits only "
            f"{STALL_GRACE_S} s of real time for a thread to wake it. Run such work with "
            "`await asyncio.to_thread(...)` (on the virtual clock it runs inline, taking no virtual "
            "time), or replay on the real clock (virtual=False)"
        )
        runner.cancel()
        return True

    def cut_from_outside(self, batch: Batch) -> bool:
        """Whether a cancellation reaching the strategy came from outside it: the run's task (or, for
        a strategy that streams, its own task) was cancelled (the deadline, an abort, ``task.cancel()``,
        Ctrl-C) or the harness is stopping the batch; not a ``CancelledError`` its own code raised."""
        return being_cancelled() or batch._draining or self.executor._cut()

    async def stream_alongside(
        self, stream: ModelStream, strategy_task: asyncio.Task[None], batch: Batch
    ) -> tuple[ModelCall, ParsedResponse]:
        """Receive the response while the (streaming) strategy runs the calls that are complete.
        A strategy that fails in a way that stops the run stops the stream too."""
        loop = asyncio.get_running_loop()
        receive = loop.create_task(_carrying(stream.receive(self.hooks.on_model_chunk)))
        try:
            await asyncio.wait((receive, strategy_task), return_when=asyncio.FIRST_COMPLETED)
            if not receive.done() and not strategy_task.cancelled():
                stopped = strategy_task.exception()
                if stopped is not None:  # (its failure, or what stops the run: the stream stops now)
                    raise stopped  # (its calls are drained; the stream is cancelled below)
            received: tuple[ModelCall, ParsedResponse] = await receive
            return received
        except BaseException as exc:
            if not receive.done():
                receive.cancel()
                await wait_until_stopped((receive,))
            await self.stop_strategy(strategy_task, batch)
            if isinstance(exc, _Carried):
                raise exc.exc from None
            if (
                isinstance(exc, asyncio.CancelledError)
                and strategy_task.done()
                and not strategy_task.cancelled()
            ):
                stopped = strategy_task.exception()  # (it stopped with an interrupt as the cut came: the
                if isinstance(stopped, _Carried):  # interrupt wins, as under `parallel`)
                    raise stopped.exc from None
                if isinstance(stopped, Interrupted):
                    raise stopped from None
            raise

    async def receive_dispatching(
        self, stream: ModelStream, batch: Batch
    ) -> tuple[ModelCall, ParsedResponse]:
        """Receive the response in the run's own task while the batch dispatches each call as it
        becomes complete (built-in ``eager``: `Batch._dispatch_arrivals`), with no task for the
        strategy or the stream, so the round goes on as soon as the stream has ended. What must stop
        the run meanwhile (a call's failure, a listener's) stops the stream at once, as under a
        strategy's task (`stream_alongside`), and is raised instead: from another task, this one is
        cancelled for it (as a task group cancels its parent; the cancellation is taken back), and
        from this one (a listener at the ACTION of a call as it arrives) it stops the stream's parsing
        there (`_StreamStopped`). The calls are stopped either way."""
        task = asyncio.current_task()
        failure: list[BaseException] = []
        cancelled: list[bool] = []

        def failed(exc: BaseException) -> None:
            if task is None or failure or isinstance(exc, asyncio.CancelledError):
                return  # (an abort: the run's own cancellation reaches this task)
            batch._stop_dispatching()
            failure.append(exc)
            if asyncio.current_task() is task:  # (a cancellation of the running task would only land at
                raise _StreamStopped  # its next await, after what it does until then: stop it here)
            cancelled.append(True)
            task.cancel()

        batch._dispatch_arrivals(failed)
        try:
            received: tuple[ModelCall, ParsedResponse] = await stream.receive(self.hooks.on_model_chunk)
        except BaseException as exc:
            outside = isinstance(exc, asyncio.CancelledError)  # (else the model's, or a signal's)
            interrupt = bool(failure) and isinstance(failure[0], _INTERRUPTS)  # (it wins: `run` raises it)
            if cancelled and task is not None:  # this task's cancellation was ours: taken back (one from
                left = task.uncancel()  # outside too, the deadline's, an abort's: it wins)
                outside = outside and left > 0
            if not failure:  # the calls complete before the stream stopped start, as each would have
                batch._on_fail = None  # (at the loop's next step; what stops the run is this already)
                batch._flush()
            batch._stop_dispatching()
            try:
                try:  # calls whose turn has come at this instant take it (one that finishes now, finished)
                    await asyncio.sleep(0)
                finally:
                    await self.stop_strategy(None, batch)
            except asyncio.CancelledError:
                if not failure or (outside and not interrupt):
                    raise
                # (else one that came meanwhile, e.g. an abort a listener asked for before it raised:
                # what stops the run is the failure, as under `parallel`, where nothing is awaited then)
            if failure and (interrupt or not outside):
                raise _stopping(failure[0])  # noqa: B904  (it is what stopped the stream)
            raise
        batch._stop_dispatching()
        if failure:  # (a model that swallowed the cancellation and ended its stream)
            if cancelled and task is not None:
                task.uncancel()
            await self.stop_strategy(None, batch)
            raise _stopping(failure[0])
        return received

    async def stop_strategy(self, strategy_task: asyncio.Task[None] | None, batch: Batch) -> None:
        """Cancel the strategy and every call it runs, and wait until they have stopped (without a
        strategy task: built-in ``eager``'s calls)."""
        batch._draining = True  # (the harness cancels its calls, not the strategy)
        if strategy_task is None:
            await batch._drain()
            return
        if not strategy_task.done():
            strategy_task.cancel()
            await wait_until_stopped((strategy_task,))
        if strategy_task.done() and not strategy_task.cancelled():  # (not done: a second signal gave up)
            strategy_task.exception()  # (retrieved: what it raised is the run's business, not asyncio's)
        await batch._drain()

    def strategy_failed(self, exc: _StrategyFailed, round_index: int, mid_stream: bool = False) -> None:
        """End the run ``failed/strategy_error``; `mid_stream`: the strategy failed while the model
        streamed, so the stream stopped then and the round is recorded as far as it came."""
        cause = exc.__cause__ or exc
        what = _described(cause)
        why = f"the strategy {self.strategy_name!r} failed"
        if mid_stream and self.streaming is not None and self.partial.get("batch") is not None:
            self.close_cut_stream(why)
        else:
            self.close_round(why)
        self.stop(
            "failed",
            "strategy_error",
            f"round {round_index}: the strategy {self.strategy_name!r} failed: {what}; the run stopped",
        )

    def close_cut_stream(self, why: str, model_failed: bool = False) -> None:
        """A streaming strategy had started calls when the response was cut off: record the round as
        far as the response came (its calls as parsed so far), with every call answered. Cut off by
        the run (not `model_failed`), the stream had not ended: the parser's ``no_finish_reason``
        would blame the model for a finish the run never read (the round's note says why it stopped)."""
        stream, batch = self.streaming, self.partial.get("batch")
        if stream is None or batch is None:
            return
        round_index = stream.request.round_index
        model_call, parsed = stream.partial()
        calls = parsed.first.tool_calls
        assistant = parsed.first.to_message()
        found = (
            parsed.findings if model_failed else [f for f in parsed.findings if f.kind != "no_finish_reason"]
        )
        findings = [*found, *repeated_ids(calls, round_index, self.ids_seen)]
        batch._end_stream(calls, assistant, model_call.chunk_timing)
        ran = "while calls that were already complete ran" if batch._began() else "before any call started"
        batch.note(
            f"the model's response was cut off after {model_call.latency_s:.3f} s ({why}) {ran}; the "
            "response is recorded as far as it came"
        )
        self.messages.append(assistant)
        self.partial.update(model_call=model_call, assistant=assistant, findings=findings)
        self.close_round(why)

    def close_round(self, cut: str | None = None) -> Round:
        """Freeze the round in progress. After a cut (abort, cancellation, deadline, interruption),
        finished results are kept, calls that had not finished are recorded as cancelled (`cut` says
        why), every ACTION gets its OBSERVATION, and every call that was made is answered in the
        transcript."""
        p = self.partial
        batch: Batch = p["batch"]
        executions = batch._close(cut)
        tool_messages = (
            batch._tool_messages
            if batch._tool_messages is not None and cut is None
            else [e.to_message() for e in executions if e.answered]
        )
        self.messages.extend(tool_messages)
        self.executor.remember(executions, batch._calls, p["round_index"])
        final_reason = p["final_reason"]
        rnd = Round(
            round_index=p["round_index"],
            mode=self.strategy_name,
            request_messages=p["sent"],
            model_call=p["model_call"],
            assistant_message=p["assistant"],
            tool_calls=batch._calls,
            executions=tuple(executions),
            findings=(*batch._amend(p["findings"]), *batch._findings),
            final=final_reason is not None,
            final_reason=final_reason,
            client_round_trips=batch._client_round_trips,
            round_trips=tuple(batch._round_trips),
            strategy_notes=tuple(batch._notes),
        )
        self.rounds.append(rnd)
        for call in batch._calls:  # (a later round reusing one of these ids gets a finding)
            self.ids_seen.setdefault(call.tool_call_id, rnd.round_index)
        self.partial = {}
        return rnd

    def cut(self, why: str) -> str:
        """Close whatever was in progress when the run was cut off; say where that was."""
        where = ""
        batch: Batch | None = self.partial.get("batch")
        if self.partial.get("model_call") is not None:
            self.close_round(why)
        elif batch is not None and batch._began():
            where = f" ({self.streaming!r} when it was cut off; recorded as far as it came)"
            self.close_cut_stream(why)
        elif self.streaming is not None:
            where = f" ({self.streaming.unrecorded('when it was cut off')})"
        self.partial = {}
        self.streaming = None
        return where

    def result(self) -> RunResult:
        end = self.now()
        rounds = tuple(self.rounds) if end + self.origin < FINE_UNTIL_S else coarse(self.rounds, self.origin)
        self.emit(RunFinished(at=end, status=self.status, reason=self.reason, rounds=rounds))
        return RunResult(
            status=self.status,
            reason=self.reason,
            mode=self.strategy_name,
            rounds=rounds,
            messages=tuple(self.messages),
            initial_messages=self.initial,
            tools=tuple(self.tools.schemas()),
            events=tuple(self.events),
            final_answer=self.final_answer,
            error=self.error,
            ended_at=end,
            config=self.config,
            origin=getattr(self.model, "origin", "recorded"),
            hook_failures=tuple(self.executor.hook_failures),
        )


def _same(value: Any) -> Any:
    return value


FINE_UNTIL_S = 2.0**33
"""Clock readings below this (about 272 years) are resolved to a microsecond or better."""


def coarse(rounds: Iterable[Round], origin: float) -> tuple[Round, ...]:
    """The rounds, each time read where the clock resolves less than a microsecond (a virtual
    clock far from zero: at 1e15 s floats are 0.125 s apart) noted on its record, since a duration
    shorter than that reads 0.0 and any other is rounded to it."""

    def noted(timing: Timing, at: float) -> Timing:
        step = math.ulp(at + origin)
        if step <= 1e-6 or "the clock resolves only" in timing.note:  # (a replay keeps the recorded one)
            return timing
        return replace(
            timing,
            note=f"{timing.note}; at {at:.3g} s the clock resolves only {step:.3g} s: this duration is exact "
            "only to that (a shorter one reads 0.0)",
        )

    out = []
    for r in rounds:
        mc = r.model_call
        out.append(
            replace(
                r,
                model_call=replace(mc, timing=noted(mc.timing, mc.ended_at)),
                executions=tuple(replace(e, timing=noted(e.timing, e.ended_at)) for e in r.executions),
            )
        )
    return tuple(out)


def as_registry(tools: ToolRegistry | Iterable[Tool | ToolFunction] | None) -> ToolRegistry:
    if isinstance(tools, ToolRegistry):
        return tools
    return ToolRegistry(tools or ())


def as_messages(messages: str | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return [json_copy(dict(m)) for m in messages]


async def run(
    model: Model,
    tools: ToolRegistry | Iterable[Tool | ToolFunction] | None,
    messages: str | Sequence[dict[str, Any]],
    *,
    mode: StrategySpec | None = None,
    config: RunConfig | None = None,
    hooks: Hooks | None = None,
    abort: AbortHandle | None = None,
    on_event: EventListener | None = None,
    **settings: Any,
) -> RunResult:
    """Run the tool-calling loop to its end and return what happened.

    Args:
        model: a `Model` (scripted, replay, or the ``openai`` adapter).
        tools: a `ToolRegistry` or plain functions / `Tool` objects.
        messages: the conversation so far (OpenAI chat format), or a user prompt string.
        mode: the execution strategy (overrides ``config.mode``): ``sequential``, ``parallel``,
            ``serialized``, ``first_only``, ``eager`` (options: ``parallel[cap=4]``), a
            ``module:attribute`` spec, or a strategy object (see `toolcall_lab.strategies`).
        config: a `RunConfig`; keyword `settings` (e.g. ``max_rounds=3``) override its fields.
        hooks: approval and notification callbacks; abort: an `AbortHandle`; on_event: event listener.
    """
    outside = CURRENT.get()
    if outside is None or outside.task is not None:  # only `run_main`'s first run takes its Ctrl-C
        outside = Outside()
    return await _run(model, tools, messages, mode, config, hooks, abort, on_event, outside, settings)


async def _run(
    model: Model,
    tools: ToolRegistry | Iterable[Tool | ToolFunction] | None,
    messages: str | Sequence[dict[str, Any]],
    mode: StrategySpec | None,
    config: RunConfig | None,
    hooks: Hooks | None,
    abort: AbortHandle | None,
    on_event: EventListener | None,
    outside: Outside,
    settings: dict[str, Any],
) -> RunResult:
    """`run`, leaving the partial record in `outside` when the run is cancelled (`run_sync` reads it
    after a Ctrl-C, which it turns into a cancellation and then into a KeyboardInterrupt)."""
    if on_event is not None and (not callable(on_event) or inspect.iscoroutinefunction(on_event)):
        raise UsageError(
            f"on_event={on_event!r}: must be a plain function called with each event (it is called "
            "synchronously; from a coroutine function nothing would be awaited)"
        )
    cfg = config or RunConfig()
    if mode is not None:
        settings["mode"] = mode
    if settings:
        unknown = set(settings) - set(RunConfig.__dataclass_fields__)
        if unknown:
            raise UsageError(
                f"run() got unknown settings {sorted(unknown)}; "
                f"known: {sorted(RunConfig.__dataclass_fields__)}"
            )
        cfg = replace(cfg, **settings)
    if abort is not None:
        abort._claim()
    state = _Run(model, as_registry(tools), as_messages(messages), cfg, hooks or Hooks(), on_event)
    try:
        return await _run_state(state, cfg, abort, outside)
    except Interrupted as carrier:  # the on_event listener raised outside the run's task (run_finished)
        original = carrier.original
        original.partial_result = state.result()  # type: ignore[attr-defined]
        original.add_note("toolcall_lab: the record of the run so far is this exception's partial_result")
        raise original from None


def _cut_first(carrier: Interrupted, state: _Run, cfg: RunConfig, abort: AbortHandle | None) -> str | None:
    """What cut the run first when a tool raised `carrier`'s exception on being cancelled (None when
    it did not, or the cut was the harness's own, e.g. for a sibling's failure): the deadline or an
    abort, as the calls' records then say."""
    if carrier.on_cut != "run":
        return None
    deadline = state.deadline
    if deadline is not None and deadline.expired():
        return f"the run's deadline (timeout_s={cfg.timeout_s}) passed"
    if abort is not None and abort.aborted:
        return f"the run was aborted ({abort.reason})"
    return None


def _abort_reason(abort: AbortHandle) -> Reason:
    """``aborted``, or the recorded reason a same-strategy replay's cut stands for."""
    ends_as = abort._ends_as
    return ends_as if ends_as in ("interrupted", "cancelled") else "aborted"  # type: ignore[return-value]


async def _run_state(state: _Run, cfg: RunConfig, abort: AbortHandle | None, outside: Outside) -> RunResult:
    """`_run`'s body once the run is set up."""
    loop = asyncio.get_running_loop()
    outside.task = asyncio.current_task()
    if outside.give_up is None or outside.give_up.get_loop() is not loop:
        outside.give_up = loop.create_future()  # (a second signal resolves it: `catch_signals`)
        if outside.gave_up:
            outside.give_up.set_result(None)
    state.executor.give_up = outside.give_up
    token = GIVE_UP.set(outside.give_up)  # (the run's tasks start from a copy of this context)
    if outside.sigint and outside.task is not None:  # a signal came before the run started
        outside._stop()
    task = asyncio.create_task(state.guarded())
    GIVE_UP.reset(token)
    GIVE_UP.set(outside.give_up)  # (and this task waits by it below)
    executor = state.executor
    aborted_at: list[float] = []  # (when the abort came: at the deadline's instant, the abort wins)

    def on_abort() -> None:
        if abort is not None and not aborted_at:
            aborted_at.append(loop.time())
            executor.ask_stop(abort._deliver)

    if abort is not None:
        abort._attach(task, on_abort)
    outside.on_stop = lambda: executor.ask_stop(outside._stop)
    if outside.sigint:  # (a signal before the run started: it stops as it starts, nothing runs)
        executor.ask_stop(outside._stop)
        task.cancel()
    try:
        # Waited for, not awaited: cancelled from outside (Ctrl-C, SIGTERM, task.cancel()), this task
        # hears it at once and cuts the run below, where a second signal can give up waiting for it
        # (awaiting the run's task would pass the cancellation on and wait for it to stop, however
        # long a call that ignores its cancellation keeps it running: under sequential, forever).
        await asyncio.wait((task,))
        if executor.interrupt is not None and (
            task.cancelled() or isinstance(task.exception(), TimeoutError)
        ):  # a tool, hook or listener raised KeyboardInterrupt (...) as the deadline or an abort cut the
            raise executor.interrupt  # run (e.g. a hook that blocked past the deadline): the interrupt wins
        task.result()
    except asyncio.CancelledError as exc:
        if being_cancelled() or abort is None or not abort.aborted:  # cancelled from outside
            task.cancel()  # the run stops as at an abort: its calls are cancelled and waited for
            with contextlib.suppress(asyncio.CancelledError):  # (cancelled again: it is stopping)
                await wait_until_stopped((task,))
            left = not task.done()  # (given up while the run's own task had not stopped)
            if not left and not task.cancelled():  # (it ended with an exception: e.g. a tool answering
                task.exception()  # the cut with KeyboardInterrupt; retrieved, the record says it all)
            if outside.sigint:
                name = outside.signal_name
                what = "KeyboardInterrupt: Ctrl-C" if name == "Ctrl-C" else name
                where = state.cut(f"the run was interrupted ({what})")
                said = "KeyboardInterrupt (Ctrl-C)" if name == "Ctrl-C" else name
                gave_up = _gave_up(outside, state.executor, left)
                state.stop("aborted", "interrupted", f"{said}; the run stopped{where}{gave_up}")
            else:
                where = state.cut("the run was cancelled")
                gave_up = _gave_up(outside, state.executor, left)
                state.stop("aborted", "cancelled", f"the run was cancelled{where}{gave_up}")
            outside.result = partial = state.result()
            exc.partial_result = partial  # type: ignore[attr-defined]
            raise
        where = state.cut(f"the run was aborted ({abort.reason})")
        state.stop("aborted", _abort_reason(abort), f"{abort.reason}{where}")
    except Interrupted as carrier:
        original = carrier.original
        what = f"{carrier.where} raised {type(original).__name__}"
        if carrier.on_cut == "task":  # (its call's task alone was cancelled: the strategy's own doing)
            what += " on being cancelled"
        cut = _cut_first(carrier, state, cfg, abort)
        if cut is not None:  # it came on being cancelled: the cut stands in the record (r22 #3)
            where = state.cut(cut)
            state.stop(
                "aborted", "interrupted", f"{what} on being cancelled as {cut}; the run stopped{where}"
            )
        else:
            where = state.cut(f"the run was interrupted ({what})")
            state.stop("aborted", "interrupted", f"{what}; the run stopped{where}")
        original.partial_result = state.result()  # type: ignore[attr-defined]
        original.add_note("toolcall_lab: the record of the run so far is this exception's partial_result")
        raise original from None
    except TimeoutError as exc:
        deadline = state.deadline
        if deadline is None or not deadline.expired() or not from_limit(exc):
            raise  # (not the deadline's: the type alone cannot tell since Python 3.11)
        due = deadline.when() or 0.0
        tie = abort._wins_tie_at if abort is not None else None
        if abort is not None and tie is not None and abs(due - state.origin - tie[0]) <= 1e-9:
            abort._abort(tie[1], True)  # (a replay's recorded abort at the deadline)
        if abort is not None and abort.aborted and aborted_at and aborted_at[0] <= due + 1e-9:
            # One rule under every strategy: an abort that came at the deadline's instant (or before
            # it, its cancellation not yet delivered) wins; which one the event loop ran first at that
            # instant depends on the strategy's scheduling, not on what happened.
            where = state.cut(f"the run was aborted ({abort.reason})")
            state.stop("aborted", _abort_reason(abort), f"{abort.reason}{where}")
            return state.result()
        why = f"the run's deadline (timeout_s={cfg.timeout_s}) passed"
        waiting = state.strategy_cut
        where = state.cut(why)
        if waiting is not None:
            where += f"; the strategy {state.strategy_name!r} had not returned ({waiting})"
        when = (deadline.when() or 0.0) - state.origin
        late = state.now() - when
        held = state.executor.held_past_deadline
        fired = state.deadline_fired_at
        if held is not None:  # a hook held the event loop: the deadline could only act when it returned
            what = "on_event listener" if held[0] == "on_event" else f"{held[0]} hook"
            where += (
                f"; the {what} held the event loop until {held[1]:.3f} s (a plain function, or a "
                "coroutine that blocks, stops everything else while it runs), so the run stopped then, "
                "and nothing started after the deadline"
            )
        elif fired is not None and fired - when > 0.01:  # something else held it (strategy, tool)
            where += (
                f"; the event loop was held until {fired:.3f} s (code that blocks it ran: blocking "
                "code in the strategy or in an async tool, or a plain-function hook), so the deadline "
                "took effect only then, and no call started after it"
            )
            late = state.now() - fired
        if held is None and late > 0.01:  # calls that caught the cancellation, or cleaned up slowly
            where += f"; the run ended at {state.now():.3f} s, when the calls cut off had stopped"
        state.stop("timeout", "deadline", f"{why} at {when:.3f} s{where}")
    except (ScriptError, ReplayDivergenceError) as exc:
        where = state.cut(f"the run stopped ({type(exc).__name__})")
        reason: Reason = "model_error" if isinstance(exc, ScriptError) else "replay_divergence"
        state.stop("failed", reason, f"{type(exc).__name__}: {exc}{where}")
        exc.partial_result = state.result()
        raise
    finally:
        state.executor.close()
    return state.result()


def _gave_up(outside: Outside, executor: Executor, left: bool) -> str:
    """What a second signal did, for the run's error (after the cut recorded the calls): gave up
    waiting for the calls named (their records say they had not stopped), or only for the run's own
    code (`left`: still stopping), or nothing: every call had stopped."""
    if not outside.gave_up:
        return ""
    abandoned = executor.abandoned
    if abandoned:
        shown = ", ".join(abandoned[:5]) + (f" and {len(abandoned) - 5} more" if len(abandoned) > 5 else "")
        return (
            f"; a second signal gave up waiting for calls that had not stopped ({shown}: their records "
            "say so)"
        )
    if left:  # (e.g. a hook or the model call ignoring its cancellation, or just not done unwinding)
        return (
            "; a second signal came after every call had stopped, while the run itself was still "
            "stopping: it stopped waiting for the run (no call was abandoned)"
        )
    return "; a second signal came after every call had stopped (nothing was left running)"


def run_sync(
    model: Model,
    tools: ToolRegistry | Iterable[Tool | ToolFunction] | None,
    messages: str | Sequence[dict[str, Any]],
    **kwargs: Any,
) -> RunResult:
    """`run` for scripts. Inside a running event loop (a notebook) use ``await run(...)`` instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise UsageError(
            "run_sync() was called inside a running event loop (a notebook or async code); "
            "use `await run(...)` there instead"
        )
    known = {"mode", "config", "hooks", "abort", "on_event"}
    named = {k: kwargs.pop(k) for k in known & set(kwargs)}
    outside = Outside()
    main = _run(
        model,
        tools,
        messages,
        named.get("mode"),
        named.get("config"),
        named.get("hooks"),
        named.get("abort"),
        named.get("on_event"),
        outside,
        kwargs,
    )
    return run_main(main, outside)  # (Ctrl-C by the rule of `toolcall_lab._stopping.catch_signals`)

"""The round loop: ask the model, run its tool calls under a mode, repeat, record everything.

Reads like the protocol it implements: each round sends the conversation with the tools, executes the
batch of calls the model answered with, and appends the assistant message and one tool message per
call. Termination rules:

- the model answers without tools: done (``final_answer``); an *empty* answer after tool rounds is
  followed by the `EMPTY_ANSWER_NOTE` and one more call without tools, once (``final_reason`` of that
  round: ``empty_answer``);
- ``max_rounds`` used up: a system note and one final call without tools;
- ``fail_fast``: a round with any failed call is followed by one final call without tools (also when
  every call failed);
- ``continue``: a round where every call failed ends the run, with `ALL_FAILED_NOTE` appended as the
  assistant's message;
- the deadline ``timeout_s`` passes: status ``timeout``; abort (`AbortHandle`): status ``aborted``;
- ``before_model_call`` raises: ``hook_error``; the model fails: ``model_error``.

Calls made without tools never carry tool-only parameters (`TOOL_ONLY_PARAMS`). Whatever ends a run,
the record is closed consistently: finished calls keep their outcome, calls cut off are recorded as
cancelled, and every call that was made is answered in the transcript. A task cancellation or a
KeyboardInterrupt (or other BaseException) propagates out of `run`, with that record as the
exception's ``partial_result``.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, cast

from toolcall_lab._execution import Executor, Hooks, Interrupted, being_cancelled
from toolcall_lab._model_call import ModelFailed, ModelStream, repeated_ids
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
from toolcall_lab.messages import Finding, ToolCall
from toolcall_lab.models import Model, ModelRequest
from toolcall_lab.modes import BatchState, execute_batch
from toolcall_lab.records import FinalReason, HookFailure, Mode, Round
from toolcall_lab.runs import TOOL_ONLY_PARAMS, Reason, RunConfig, RunResult, Status
from toolcall_lab.tools import Tool, ToolFunction, ToolRegistry


class AbortHandle:
    """Stop a run from elsewhere (e.g. another notebook cell): in-flight calls are cancelled and
    drained, finished results are kept, and the run ends with status ``aborted``. Thread-safe."""

    def __init__(self) -> None:
        self.aborted = False
        self.reason = ""
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _attach(self, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._task, self._loop = task, task.get_loop()
            if self.aborted:
                task.cancel()

    def abort(self, reason: str = "aborted by the user") -> None:
        with self._lock:
            self.aborted, self.reason = True, reason
            task, loop = self._task, self._loop
        if task is not None and loop is not None and not task.done():
            loop.call_soon_threadsafe(task.cancel)


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
        self.status: Status = "completed"
        self.reason: Reason = "final_answer"
        self.error: str | None = None
        self.final_answer: str | None = None
        self.partial: dict[str, Any] = {}
        self.streaming: ModelStream | None = None
        """The model call in progress, if any."""
        self.retried_empty = False
        self.deadline: asyncio.Timeout | None = None

    def now(self) -> float:
        return asyncio.get_running_loop().time() - self.origin

    def emit(self, event: RunEvent) -> None:
        self.events.append(event)
        if self.listener is not None:
            try:
                returned = self.listener(event)
                if inspect.isawaitable(returned):  # nothing would ever await it
                    if inspect.iscoroutine(returned):
                        returned.close()
                    raise TypeError("returned an awaitable; event listeners are called synchronously")
            except Exception as exc:  # a listener's bug is recorded; the run goes on
                self.executor.hook_failed(
                    "on_event", exc, f"ignored; the {event.kind} event stands", None, None
                )
            except BaseException as exc:
                raise Interrupted(exc, "the on_event listener") from exc

    def hook_failed(self, failure: HookFailure) -> None:
        event = HookFailed(at=failure.at, round_index=failure.round_index, failure=failure)
        if failure.hook == "on_event":  # not back to the listener that just failed
            self.events.append(event)
        else:
            self.emit(event)

    async def guarded(self) -> None:
        """`main` under the run's deadline; BaseExceptions carried out of the task (see `Interrupted`)."""
        try:
            if self.config.timeout_s is None:
                await self.main()
                return
            async with asyncio.timeout(self.config.timeout_s) as self.deadline:
                await self.main()
        except (Exception, asyncio.CancelledError):
            raise
        except BaseException as exc:
            raise Interrupted(exc, "the run") from exc

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
            failed = sum(e.failed for e in answered)
            if failed and cfg.error_policy == "fail_fast":
                await self.final_round(round_index + 1, "fail_fast")
                return
            if answered and failed == len(answered):
                self.messages.append({"role": "assistant", "content": cfg.all_failed_note})
                self.stop(
                    "failed",
                    "all_calls_failed",
                    f"every call of round {round_index} failed; the loop answered with its own "
                    f"assistant message ({cfg.all_failed_note!r}) and stopped",
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
        if not text and not rnd.tool_calls:
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
        self.partial = {"round_index": round_index, "final_reason": final_reason}
        self.executor.round_index = round_index
        self.emit(RoundStarted(at=self.now(), round_index=round_index))
        sent = list(self.messages)
        hook = self.hooks.before_model_call
        if hook is not None:
            effect = "the run stopped before this model call"
            ok, value = await self.executor.ask("before_model_call", hook, (list(sent),), effect=effect)
            if ok and value is not None:
                if isinstance(value, list | tuple) and all(isinstance(m, dict) for m in value):
                    sent = list(value)
                else:
                    value = TypeError(f"returned {type(value).__name__}, expected a list of messages or None")
                    self.executor.hook_failed("before_model_call", value, effect, None, None)
                    ok = False
            if not ok:
                self.stop(
                    "failed",
                    "hook_error",
                    f"round {round_index}: the before_model_call hook failed "
                    f"({type(value).__name__}: {value}); the run stopped before this model call",
                )
                return None
        params = self.config.params
        if not offer_tools and TOOL_ONLY_PARAMS.intersection(params):
            params = {k: v for k, v in params.items() if k not in TOOL_ONLY_PARAMS}
        request = ModelRequest(
            messages=tuple(sent),
            tools=tuple(self.tools.schemas()) if offer_tools else None,
            round_index=round_index,
            batch=self.batch,
            params=params,
        )
        self.batch += 1
        self.partial["request"] = request
        self.emit(
            ModelRequested(
                at=self.now(), round_index=round_index, n_messages=len(sent), tools_offered=offer_tools
            )
        )
        stream = self.streaming = ModelStream(self.model, request, self.executor)
        try:
            model_call, parsed = await stream.receive(self.hooks.on_model_chunk)
        except ModelFailed as exc:
            self.streaming = None
            cause = exc.__cause__
            self.stop(
                "failed",
                "model_error",
                f"round {round_index}: the model call failed: {type(cause).__name__}: {cause}",
            )
            return None
        self.streaming = None  # (left set when the run is cut off mid-stream: `cut` says so)
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
        findings += repeated_ids(calls, round_index)
        self.emit(
            ModelResponded(
                at=self.now(),
                round_index=round_index,
                ttfc_s=model_call.ttfc_s,
                latency_s=model_call.latency_s,
                n_tool_calls=len(calls),
                usage=model_call.usage,
                timing=model_call.timing,
                chunk_timing=model_call.chunk_timing,
                n_chunks=len(model_call.chunks),
            )
        )
        if choice.reasoning:
            self.emit(Thought(at=self.now(), round_index=round_index, text=choice.reasoning))
        if choice.content and calls:
            self.emit(Thought(at=self.now(), round_index=round_index, text=choice.content))
        self.messages.append(assistant)
        state = BatchState(calls=calls)
        self.partial.update(model_call=model_call, assistant=assistant, state=state, findings=findings)
        if calls:
            await execute_batch(
                self.config.mode,
                self.executor,
                state,
                emit=self.events.append if self.listener is None else self.emit,
                round_index=round_index,
                assistant_message=assistant,
                concurrency=self.config.concurrency,
                round_trip_s=self.config.round_trip_s,
            )
        return self.close_round()

    def close_round(self, cut: str | None = None) -> Round:
        """Freeze the round in progress. After a cut (abort, cancellation, deadline, interruption),
        finished results are kept, calls that had not finished are recorded as cancelled (`cut` says
        why), and every call that was made is answered in the transcript."""
        p = self.partial
        state: BatchState = p["state"]
        executions = []
        first_only = self.config.mode == "first_only"
        for pos, call in enumerate(state.calls):
            ex = state.done[pos]
            if ex is None:
                if first_only and pos:
                    ex = self.executor.skipped(call)
                else:
                    ex = self.executor.cancelled(call, state.started[pos], cut or "the batch was cut off")
            executions.append(ex)
        tool_messages = (
            state.tool_messages
            if state.tool_messages is not None and cut is None
            else [e.to_message() for e in executions if e.answered]
        )
        self.messages.extend(tool_messages)
        self.executor.remember(executions, state.calls, p["round_index"])
        final_reason = p["final_reason"]
        rnd = Round(
            round_index=p["round_index"],
            mode=self.config.mode,
            request_messages=p["request"].messages,
            model_call=p["model_call"],
            assistant_message=p["assistant"],
            tool_calls=tuple(state.calls),
            executions=tuple(executions),
            findings=tuple(p["findings"]),
            final=final_reason is not None,
            final_reason=final_reason,
            client_round_trips=state.client_round_trips,
            round_trips=tuple(state.round_trips),
        )
        self.rounds.append(rnd)
        self.partial = {}
        return rnd

    def cut(self, why: str) -> str:
        """Close whatever was in progress when the run was cut off; say where that was."""
        where = ""
        if self.partial.get("state") is not None:
            self.close_round(why)
        elif self.streaming is not None:
            where = f" ({self.streaming!r} when it was cut off; it is not in the record)"
        self.partial = {}
        self.streaming = None
        return where

    def result(self) -> RunResult:
        end = self.now()
        self.emit(RunFinished(at=end, status=self.status, reason=self.reason))
        return RunResult(
            status=self.status,
            reason=self.reason,
            mode=self.config.mode,
            rounds=tuple(self.rounds),
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


def as_registry(tools: ToolRegistry | Iterable[Tool | ToolFunction] | None) -> ToolRegistry:
    if isinstance(tools, ToolRegistry):
        return tools
    return ToolRegistry(tools or ())


def as_messages(messages: str | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return [dict(m) for m in messages]


async def run(
    model: Model,
    tools: ToolRegistry | Iterable[Tool | ToolFunction] | None,
    messages: str | Sequence[dict[str, Any]],
    *,
    mode: Mode | None = None,
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
        mode: ``sequential``, ``parallel``, ``serialized`` or ``first_only`` (overrides ``config.mode``).
        config: a `RunConfig`; keyword `settings` (e.g. ``max_rounds=3``) override its fields.
        hooks: approval and notification callbacks; abort: an `AbortHandle`; on_event: event listener.
    """
    return await _run(model, tools, messages, mode, config, hooks, abort, on_event, [], settings)


async def _run(
    model: Model,
    tools: ToolRegistry | Iterable[Tool | ToolFunction] | None,
    messages: str | Sequence[dict[str, Any]],
    mode: Mode | None,
    config: RunConfig | None,
    hooks: Hooks | None,
    abort: AbortHandle | None,
    on_event: EventListener | None,
    box: list[RunResult],
    settings: dict[str, Any],
) -> RunResult:
    """`run`, leaving the partial record in `box` when the run is cancelled (`run_sync` reads it after
    a Ctrl-C, which asyncio turns into a cancellation and then into a fresh KeyboardInterrupt)."""
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
    state = _Run(model, as_registry(tools), as_messages(messages), cfg, hooks or Hooks(), on_event)
    task = asyncio.create_task(state.guarded())
    if abort is not None:
        abort._attach(task)
    try:
        await task
    except asyncio.CancelledError as exc:
        if being_cancelled() or abort is None or not abort.aborted:  # cancelled from outside
            task.cancel()
            where = state.cut("the run was cancelled")
            state.stop("aborted", "cancelled", f"the run was cancelled{where}")
            box.append(partial := state.result())
            exc.partial_result = partial  # type: ignore[attr-defined]
            raise
        where = state.cut(f"the run was aborted ({abort.reason})")
        state.stop("aborted", "aborted", f"{abort.reason}{where}")
    except Interrupted as carrier:
        original = carrier.original
        what = f"{carrier.where} raised {type(original).__name__}"
        where = state.cut(f"the run was interrupted ({what})")
        state.stop("aborted", "interrupted", f"{what}; the run stopped{where}")
        original.partial_result = state.result()  # type: ignore[attr-defined]
        original.add_note("toolcall_lab: the record of the run so far is this exception's partial_result")
        raise original from None
    except TimeoutError:
        if state.deadline is None or not state.deadline.expired():
            raise
        why = f"the run's deadline (timeout_s={cfg.timeout_s}) passed"
        where = state.cut(why)
        state.stop("timeout", "deadline", f"{why} at {state.now():.3f} s{where}")
    except (ScriptError, ReplayDivergenceError) as exc:
        where = state.cut(f"the run stopped ({type(exc).__name__})")
        reason: Reason = "model_error" if isinstance(exc, ScriptError) else "replay_divergence"
        state.stop("failed", reason, f"{type(exc).__name__}: {exc}{where}")
        exc.partial_result = state.result()
        raise
    finally:
        state.executor.close()
    return state.result()


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
    box: list[RunResult] = []
    try:
        return asyncio.run(
            _run(
                model,
                tools,
                messages,
                named.get("mode"),
                named.get("config"),
                named.get("hooks"),
                named.get("abort"),
                named.get("on_event"),
                box,
                kwargs,
            )
        )
    except KeyboardInterrupt as exc:  # Ctrl-C: asyncio cancelled the run, then raised a new exception
        if box and getattr(exc, "partial_result", None) is None:
            exc.partial_result = box[-1]  # type: ignore[attr-defined]
        raise

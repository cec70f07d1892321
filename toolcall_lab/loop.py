"""The round loop: ask the model, run its tool calls under a mode, repeat, record everything.

Reads like the protocol it implements: each round sends the conversation with the tools, executes the
batch of calls the model answered with, and appends the assistant message and one tool message per
call. It stops when the model answers without tools, when `max_rounds` is used up (then one final call
without tools), on abort, on `fail_fast` after a failing round, or when every call of a round failed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from toolcall_lab._execution import Executor, Hooks, call_hook
from toolcall_lab.events import (
    ErrorEvent,
    EventListener,
    FinalAnswer,
    ModelRequested,
    ModelResponded,
    RoundStarted,
    RunEvent,
    RunFinished,
    Thought,
)
from toolcall_lab.exceptions import ReplayDivergenceError, ScriptError, UsageError
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator, parse_chat_completion
from toolcall_lab.messages import Finding, ParsedResponse, ToolCall
from toolcall_lab.models import Model, ModelRequest, response_timing
from toolcall_lab.modes import BatchState, execute_batch
from toolcall_lab.records import Mode, ModelCall, Round, TimedChunk
from toolcall_lab.runs import Reason, RunConfig, RunResult, Status
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
        self.executor = Executor(tools, hooks, self.origin, dedupe=config.dedupe)
        self.status: Status = "completed"
        self.reason: Reason = "final_answer"
        self.error: str | None = None
        self.final_answer: str | None = None
        self.partial: dict[str, Any] = {}

    def now(self) -> float:
        return asyncio.get_running_loop().time() - self.origin

    def emit(self, event: RunEvent) -> None:
        self.events.append(event)
        if self.listener is not None:
            self.listener(event)

    async def main(self) -> None:
        cfg = self.config
        for round_index in range(cfg.max_rounds):
            rnd = await self.round(round_index, offer_tools=True)
            if not rnd.tool_calls:
                self.finish_with_answer(rnd)
                return
            runnable = [e for e in rnd.executions if e.answered]
            if runnable and all(e.failed for e in runnable):
                self.stop("failed", "all_calls_failed", f"every call of round {round_index} failed")
                return
            if cfg.error_policy == "fail_fast" and any(e.failed for e in runnable):
                self.reason = "fail_fast"
                await self.final_round(round_index + 1)
                return
        self.reason = "max_rounds"
        self.messages.append({"role": "system", "content": cfg.final_note.format(max_rounds=cfg.max_rounds)})
        await self.final_round(cfg.max_rounds)

    async def final_round(self, round_index: int) -> None:
        reason = self.reason
        rnd = await self.round(round_index, offer_tools=False)
        self.finish_with_answer(rnd)
        if self.status == "completed":
            self.reason = reason

    def finish_with_answer(self, rnd: Round) -> None:
        text = rnd.assistant_message.get("content")
        if not text and not rnd.tool_calls:
            why = (
                "only tool calls, which were ignored (no tools offered)"
                if rnd.findings and rnd.final
                else ("no text and no tool calls")
            )
            self.stop("failed", "empty_response", f"round {rnd.round_index}: the model returned {why}")
            return
        self.final_answer = text
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

    async def round(self, round_index: int, *, offer_tools: bool) -> Round:
        self.partial = {"round_index": round_index}
        self.emit(RoundStarted(at=self.now(), round_index=round_index))
        sent = list(self.messages)
        rewritten = await call_hook(self.hooks.before_model_call, sent)
        if rewritten is not None:
            sent = list(rewritten)
        request = ModelRequest(
            messages=tuple(sent),
            tools=tuple(self.tools.schemas()) if offer_tools else None,
            round_index=round_index,
            batch=self.batch,
            params=self.config.params,
        )
        self.batch += 1
        self.partial["request"] = request
        self.emit(
            ModelRequested(
                at=self.now(), round_index=round_index, n_messages=len(sent), tools_offered=offer_tools
            )
        )
        model_call, parsed = await self.call_model(request)
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
        self.emit(
            ModelResponded(
                at=self.now(),
                round_index=round_index,
                ttfc_s=model_call.ttfc_s,
                latency_s=model_call.latency_s,
                n_tool_calls=len(calls),
                usage=model_call.usage,
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
                emit=self.emit,
                round_index=round_index,
                assistant_message=assistant,
                concurrency=self.config.concurrency,
                round_trip_s=self.config.round_trip_s,
            )
        return self.close_round(final=not offer_tools)

    def close_round(self, *, final: bool = False, aborted: bool = False) -> Round:
        """Freeze the round in progress (after an abort: finished results kept, the rest cancelled)."""
        p = self.partial
        state: BatchState = p["state"]
        executions = []
        for call in state.calls:
            ex = state.done.get(call.tool_call_id)
            if ex is None:
                ex = self.executor.cancelled(call, state.started.get(call.tool_call_id))
            executions.append(ex)
        tool_messages = (
            state.tool_messages
            if state.tool_messages is not None and not aborted
            else [e.to_message() for e in executions if e.answered]
        )
        self.messages.extend(tool_messages)
        self.executor.remember(executions, state.calls)
        rnd = Round(
            round_index=p["round_index"],
            mode=self.config.mode,
            request_messages=p["request"].messages,
            model_call=p["model_call"],
            assistant_message=p["assistant"],
            tool_calls=tuple(state.calls),
            executions=tuple(executions),
            findings=tuple(p["findings"]),
            final=final,
            client_round_trips=max(state.client_round_trips, 1),
        )
        self.rounds.append(rnd)
        self.partial = {}
        return rnd

    async def call_model(self, request: ModelRequest) -> tuple[ModelCall, ParsedResponse]:
        start = self.now()
        acc = ChatCompletionAccumulator(batch=request.batch)
        chunks: list[TimedChunk] = []
        first: float | None = None
        whole: ParsedResponse | None = None
        async for payload in self.model.stream(request):
            t = self.now()
            if first is None:
                first = t
            chunks.append(TimedChunk(offset_s=t - start, payload=payload))
            if payload.get("object") == "chat.completion":
                whole = parse_chat_completion(payload, batch=request.batch)
            else:
                acc.feed(payload)
            if self.hooks.on_model_chunk is not None:
                await call_hook(self.hooks.on_model_chunk, payload)
        parsed = whole if whole is not None else acc.finish()
        end = self.now()
        timing, chunk_timing = response_timing(self.model, request, self.executor.clock_timing)
        call = ModelCall(
            started_at=start,
            ended_at=end,
            first_chunk_at=first,
            chunks=tuple(chunks),
            tools_offered=request.tools is not None,
            usage=parsed.usage,
            timing=timing,
            chunk_timing="none" if whole is not None or not chunks else chunk_timing,
        )
        return call, parsed

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
    task = asyncio.create_task(state.main())
    if abort is not None:
        abort._attach(task)
    try:
        await task
    except asyncio.CancelledError:
        if abort is None or not abort.aborted:
            task.cancel()
            raise
        if state.partial.get("state") is not None:
            state.close_round(aborted=True)
        state.stop("aborted", "aborted", abort.reason)
    except (ScriptError, ReplayDivergenceError) as exc:
        exc.partial_result = state.result()
        raise
    except Exception as exc:  # the model adapter failed: keep what the run did so far
        if state.partial.get("state") is not None:
            state.close_round(aborted=True)
        state.stop("failed", "model_error", f"{type(exc).__name__}: {exc}")
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
        return asyncio.run(run(model, tools, messages, **kwargs))
    raise UsageError(
        "run_sync() was called inside a running event loop (a notebook or async code); "
        "use `await run(...)` there instead"
    )

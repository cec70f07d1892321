"""One model call: stream the response, time every chunk on the run's clock, parse it, label it.

Every model gets the same treatment (scripted, replayed, the ``openai`` adapter): the payloads it
streams are fed to the chat-completions accumulator (or parsed whole), and the call is recorded as a
`ModelCall` with its timing label. Each payload is copied as it arrives, before anyone else sees it:
the record is what the model sent then, whatever the model (reusing a buffer), the ``on_model_chunk``
hook or an event listener does to it later. What goes wrong inside the model or its wire data is a
`ModelFailed`; what must stop the run (scripts running out, replay divergence, cancellation,
interruptions) passes through untouched.

For strategies that stream (``eager``), each call of choice 0 is handed over (`on_call`) as soon as
it is complete, at the time its chunk arrived (`toolcall_lab.strategies._completion`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from toolcall_lab._copy import json_copy
from toolcall_lab._execution import Executor, Interrupted
from toolcall_lab.exceptions import ReplayDivergenceError, ScriptError
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator, parse_chat_completion
from toolcall_lab.messages import Finding, ParsedResponse, ToolCall
from toolcall_lab.models import Model, ModelRequest, response_timing
from toolcall_lab.records import ModelCall, TimedChunk
from toolcall_lab.strategies._completion import CallTracker, takes_no_arguments

OnCall = Callable[[int, ToolCall], None]


class ModelFailed(Exception):
    """The model adapter (or the wire data it produced) failed during a model call; the cause is
    ``__cause__``."""


class ModelStream:
    """One model call in progress; it knows how far it got, so a run cut off mid-stream can say so."""

    def __init__(
        self, model: Model, request: ModelRequest, executor: Executor, on_call: OnCall | None = None
    ) -> None:
        self.model, self.request, self.executor = model, request, executor
        self.copy = not getattr(model, "copy_free", False)
        """Copy each payload as it arrives (all but `Model.copy_free` models)."""
        self.started_at = executor.now()
        self.chunks: list[TimedChunk] = []
        self.on_call = on_call
        """Called with (position, call) as each call becomes complete while streaming (or None)."""
        self.acc: ChatCompletionAccumulator | None = None
        self.tracker: CallTracker | None = None

    def no_arguments(self) -> frozenset[str]:
        """The run's tools that take no arguments (only their empty argument strings complete early)."""
        tools = self.executor.tools
        return frozenset(
            name for name in tools.names() if takes_no_arguments(getattr(tools.get(name), "parameters", None))
        )

    def __repr__(self) -> str:
        return (
            f"round {self.request.round_index}'s model call, sent at {self.started_at:.3f} s, "
            f"{len(self.chunks)} chunk(s) received"
        )

    def unrecorded(self, when: str) -> str:
        """Where the call stood `when` the run stopped, and that it is not in the record."""
        return f"{self!r} {when}; it is not in the record"

    async def receive(
        self, on_chunk: Callable[[dict[str, Any]], Any] | None
    ) -> tuple[ModelCall, ParsedResponse]:
        """Stream the whole response; `on_chunk` is the run's ``on_model_chunk`` hook (a notification)."""
        request, now, start, chunks, copy = (
            self.request,
            self.executor.now,
            self.started_at,
            self.chunks,
            self.copy,
        )
        on_call = self.on_call
        tracker = self.tracker = CallTracker(self.no_arguments()) if on_call is not None else None
        acc = self.acc = ChatCompletionAccumulator(batch=request.batch)  # (the tracker polls it)
        if tracker is not None:
            tracker.listen(acc)
        first: float | None = None
        whole: ParsedResponse | None = None
        try:
            async for payload in self.model.stream(request):
                t = now()
                if type(payload) is not dict:
                    raise TypeError(
                        f"chunk {len(chunks)} is {type(payload).__name__} {payload!r:.80}, not a "
                        "chat-completion chunk (a dict)"
                    )
                kept = (
                    json_copy(payload) if copy else payload
                )  # the record: as sent now, whatever comes later
                if first is None:
                    first = t
                chunks.append(TimedChunk(offset_s=t - start, payload=kept))
                if kept.get("object") == "chat.completion":
                    whole = parse_chat_completion(kept, batch=request.batch)
                else:
                    acc.feed(kept)
                    if tracker is not None and tracker.poll():
                        for pos, complete in tracker.take():
                            on_call(pos, complete)  # type: ignore[misc]
                if on_chunk is not None:
                    await self.executor.ask(
                        "on_model_chunk",
                        on_chunk,
                        (json_copy(kept),),
                        effect=f"ignored; the stream went on (the hook failed on chunk {len(chunks) - 1})",
                    )
            parsed = whole if whole is not None else acc.finish()
        except (ScriptError, ReplayDivergenceError, Interrupted, asyncio.CancelledError):
            raise
        except Exception as exc:  # the adapter, the network or the wire data: the model failed
            raise ModelFailed from exc
        timing, chunk_timing = response_timing(self.model, request, self.executor.clock_timing)
        call = ModelCall(
            started_at=start,
            ended_at=now(),
            first_chunk_at=first,
            chunks=tuple(chunks),
            tools_offered=request.tools is not None,
            usage=json_copy(parsed.usage),
            timing=timing,
            chunk_timing="none" if whole is not None or not chunks else chunk_timing,
        )
        return call, parsed

    def partial(self) -> tuple[ModelCall, ParsedResponse]:
        """The response as far as it came, for a run cut off mid-stream: the chunks received (the
        call ends now) and what they parse to (arguments cut off are marked incomplete)."""
        acc = self.acc or ChatCompletionAccumulator(batch=self.request.batch)
        try:
            timing, chunk_timing = response_timing(self.model, self.request, self.executor.clock_timing)
        except Exception:  # a model that cannot say (its stream failed): the run's clock
            timing, chunk_timing = self.executor.clock_timing, "recorded"
        first = self.chunks[0].offset_s + self.started_at if self.chunks else None
        parsed = acc.finish()
        call = ModelCall(
            started_at=self.started_at,
            ended_at=self.executor.now(),
            first_chunk_at=first,
            chunks=tuple(self.chunks),
            tools_offered=self.request.tools is not None,
            usage=None,
            timing=timing,
            chunk_timing="none" if not self.chunks else chunk_timing,
        )
        return call, self._unfinished(parsed)

    def _unfinished(self, parsed: ParsedResponse) -> ParsedResponse:
        """A response cut off mid-stream: a call of choice 0 whose argument string is empty is
        incomplete (its arguments may have been on the way), unless eager already took it as complete
        (its tool takes none and a later call had started); what the parser marked stays marked."""
        first = parsed.first
        started = self.tracker.dispatched if self.tracker is not None else {}
        cut = [
            c
            for c in first.tool_calls
            if c.complete and not c.arguments.strip() and c.index not in started and c.kind == "function"
        ]
        if not cut:
            return parsed
        marked = {id(c) for c in cut}
        calls = tuple(replace(c, complete=False) if id(c) in marked else c for c in first.tool_calls)
        findings = [
            Finding(
                kind="incomplete_arguments",
                severity="error",
                call_index=c.index,
                tool_call_id=c.tool_call_id,
                message=f"call {c.tool_call_id} ({c.name}): the response was cut off after the call's "
                "header, before any arguments; call marked incomplete (never executed)",
            )
            for c in cut
        ]
        choices = (replace(first, tool_calls=calls), *parsed.choices[1:])
        return replace(parsed, choices=choices, findings=(*parsed.findings, *findings))


def repeated_ids(
    calls: tuple[ToolCall, ...], round_index: int, earlier: Mapping[str, int] | None = None
) -> list[Finding]:
    """A finding per tool-call id that more than one call of the batch carries (buggy servers), and
    per call reusing the id of a call of an earlier round (`earlier`: id -> its round)."""
    positions: dict[str, list[int]] = {}
    for pos, call in enumerate(calls):
        positions.setdefault(call.tool_call_id, []).append(pos)
    reused = [
        Finding(
            kind="duplicate_tool_call_id",
            severity="warning",
            message=f"round {round_index}: the call at position {where[0]} reuses the id {cid!r} of a "
            f"call of round {earlier[cid]}; it is run and answered, but the conversation then holds two "
            "calls, and two tool messages, with one id",
            tool_call_id=cid,
            call_index=calls[where[0]].index,
        )
        for cid, where in positions.items()
        if earlier and cid in earlier
    ]
    return reused + [
        Finding(
            kind="duplicate_tool_call_id",
            severity="warning",
            message=f"round {round_index}: the calls at positions {where} share the id {cid!r}; each "
            "is run (or screened) and answered by position, so the tool messages repeat the id",
            tool_call_id=cid,
            call_index=where[1],
        )
        for cid, where in positions.items()
        if len(where) > 1
    ]


def unclash(calls: tuple[ToolCall, ...], round_index: int) -> tuple[tuple[ToolCall, ...], list[Finding]]:
    """Calls sent without an id get a fallback id (``call_{batch}_{index}``); when another call of the
    batch carries that same id, the harness would be the one repeating an id. Such a fallback id is
    replaced by a free one (``{id}_{n}``), with a finding. Ids the provider repeated are left alone
    (`repeated_ids` reports them)."""
    ids = [c.tool_call_id for c in calls]
    if len(set(ids)) == len(ids):
        return calls, []
    taken = set(ids)
    out, findings = list(calls), []
    for pos, call in enumerate(calls):
        if call.id_source != "fallback" or ids.count(call.tool_call_id) == 1:
            continue
        n = 1
        while f"{call.tool_call_id}_{n}" in taken:
            n += 1
        new_id = f"{call.tool_call_id}_{n}"
        taken.add(new_id)
        ids[pos] = new_id
        out[pos] = replace(call, tool_call_id=new_id)
        findings.append(
            Finding(
                kind="missing_id",
                severity="warning",
                message=f"round {round_index}: call {call.index} came with no id and its fallback id "
                f"{call.tool_call_id!r} is another call's id in this batch; using {new_id!r}",
                tool_call_id=new_id,
                call_index=call.index,
            )
        )
    return tuple(out), findings

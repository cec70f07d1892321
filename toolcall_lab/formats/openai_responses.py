"""OpenAI Responses API: ``function_call`` output items, streamed or whole.

Streams announce a call with ``response.output_item.added`` (call_id + name), send its arguments as
``response.function_call_arguments.delta`` events and repeat them in ``.done``; some servers send no
deltas at all, so ``.done`` (or ``output_item.done``) is used when no delta came. The tool call id is
the item's ``call_id`` (what a ``function_call_output`` must answer), not its ``fc_`` item id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from toolcall_lab.formats.base import (
    ArgumentsDelta,
    CallFinished,
    CallStarted,
    PendingCall,
    StreamAccumulator,
    StreamListener,
    calls_snapshot,
    single_choice,
)
from toolcall_lab.messages import Finding, ParsedResponse, ToolCall


class ResponsesStreamAccumulator(StreamAccumulator):
    """Assemble function calls and text from the events of one Responses API stream."""

    def __init__(self, *, batch: int = 0, listener: StreamListener | None = None) -> None:
        super().__init__(batch=batch, listener=listener)
        self.status: str | None = None
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._items: dict[str, PendingCall] = {}
        self._done_args: dict[int, str] = {}
        self._calls: list[PendingCall] = []

    def _item(self, event: Mapping[str, Any]) -> PendingCall | None:
        key = event.get("item_id") or f"#{event.get('output_index')}"
        return self._items.get(key)

    def feed(self, event: Mapping[str, Any]) -> None:
        n = self.chunk_count
        self.chunk_count = n + 1
        kind = event.get("type")
        if kind == "response.function_call_arguments.delta":
            call = self._item(event)
            piece = event.get("delta") or ""
            if call is None:
                self.findings.append(
                    Finding(kind="orphan_delta", chunk_index=n, message="arguments delta for an unknown item")
                )
            elif piece:
                call.pieces.append(piece)
                if self.listener is not None:
                    self.listener(
                        ArgumentsDelta(chunk_index=n, choice_index=0, call_index=call.index, delta=piece)
                    )
        elif kind == "response.output_text.delta":
            self._text.append(event.get("delta") or "")
        elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            self._reasoning.append(event.get("delta") or "")
        elif kind == "response.output_item.added":
            item = event.get("item") or {}
            if item.get("type") == "function_call":
                call = PendingCall.announced(0, len(self._calls), n, item.get("call_id"), item.get("name"))
                if item.get("arguments"):
                    call.pieces.append(item["arguments"])
                self._items[item.get("id") or f"#{event.get('output_index')}"] = call
                self._items.setdefault(f"#{event.get('output_index')}", call)
                self._calls.append(call)
                if self.listener is not None:
                    self.listener(
                        CallStarted(
                            chunk_index=n,
                            choice_index=0,
                            call_index=call.index,
                            tool_call_id=call.tool_call_id,
                            name=call.name,
                        )
                    )
        elif kind == "response.function_call_arguments.done":
            call = self._item(event)
            if call is not None and isinstance(event.get("arguments"), str):
                self._done_args.setdefault(call.index, event["arguments"])
        elif kind == "response.output_item.done":
            item = event.get("item") or {}
            call = self._items.get(item.get("id") or f"#{event.get('output_index')}")
            if call is not None and isinstance(item.get("arguments"), str):
                self._done_args.setdefault(call.index, item["arguments"])
        elif kind in (
            "response.created",
            "response.in_progress",
            "response.completed",
            "response.incomplete",
        ):
            response = event.get("response") or {}
            self.response_id = response.get("id") or self.response_id
            self.model = response.get("model") or self.model
            self.status = response.get("status") or self.status
            if response.get("usage"):
                self.usage = response["usage"]

    def snapshot(self) -> dict[int, dict[int, dict[str, Any]]]:
        """The calls assembled so far (for stepping through a stream)."""
        return calls_snapshot(self._calls)

    def finish(self) -> ParsedResponse:
        findings = list(self.findings)
        calls: list[ToolCall] = []
        cut = "length" if self.status == "incomplete" else None
        for pending in self._calls:
            raw = None if pending.pieces else self._done_args.get(pending.index, "")
            call = pending.finalize(batch=self.batch, findings=findings, finish_reason=cut, raw=raw)
            calls.append(call)
            if self.listener is not None:
                self.listener(CallFinished(call=call))
        if self.status is None:
            findings.append(
                Finding(
                    kind="no_finish_reason",
                    severity="info",
                    message="stream ended without response.completed",
                )
            )
        return single_choice(
            "openai-responses-stream",
            text=self._text,
            reasoning=self._reasoning,
            calls=calls,
            finish_reason=self.status,
            findings=findings,
            usage=self.usage,
            response_id=self.response_id,
            model=self.model,
        )


def split_responses(events: Iterable[Mapping[str, Any]], *, batch: int = 0) -> list[ParsedResponse]:
    """Parse a file holding one or more consecutive Responses streams (a new one at ``response.created``)."""
    responses: list[ParsedResponse] = []
    acc = ResponsesStreamAccumulator(batch=batch)
    for event in events:
        if event.get("type") == "response.created" and acc.chunk_count:
            responses.append(acc.finish())
            acc = ResponsesStreamAccumulator(batch=batch + len(responses))
        acc.feed(event)
    if acc.chunk_count:
        responses.append(acc.finish())
    return responses


def parse_responses_output(body: Mapping[str, Any], *, batch: int = 0) -> ParsedResponse:
    """Read a whole Responses API ``response`` object (its ``output`` items)."""
    findings: list[Finding] = []
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for item in body.get("output") or []:
        kind = item.get("type")
        if kind == "function_call":
            pending = PendingCall.announced(0, len(calls), 0, item.get("call_id"), item.get("name"))
            args = item.get("arguments")
            calls.append(
                pending.finalize(batch=batch, findings=findings, raw=args if isinstance(args, str) else "")
            )
        elif kind == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    text.append(part.get("text") or "")
        elif kind == "reasoning":
            for part in item.get("summary") or []:
                reasoning.append(part.get("text") or "")
    return single_choice(
        "openai-responses",
        text=text,
        reasoning=reasoning,
        calls=calls,
        finish_reason=body.get("status"),
        findings=findings,
        usage=body.get("usage"),
        response_id=body.get("id"),
        model=body.get("model"),
    )

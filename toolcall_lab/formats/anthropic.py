"""Anthropic Messages API: ``tool_use`` content blocks, streamed (``input_json_delta``) or whole.

A streamed tool_use whose deltas are all empty takes its ``input`` from ``content_block_start``
(``{}`` for tools without parameters). Whole messages carry ``input`` as an object: it is shown as
compact JSON so every format yields an argument *string*.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolcall_lab.exceptions import ProviderStreamError
from toolcall_lab.formats.base import (
    ArgumentsDelta,
    CallFinished,
    CallStarted,
    PendingCall,
    StreamAccumulator,
    StreamListener,
    calls_snapshot,
    compact_json,
    single_choice,
)
from toolcall_lab.messages import Finding, ParsedResponse, ToolCall


class AnthropicStreamAccumulator(StreamAccumulator):
    """Assemble tool calls and text from Anthropic stream events (``message_start`` ... ``message_stop``)."""

    def __init__(self, *, batch: int = 0, listener: StreamListener | None = None) -> None:
        super().__init__(batch=batch, listener=listener)
        self.stop_reason: str | None = None
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._blocks: dict[int, PendingCall] = {}
        self._start_input: dict[int, Any] = {}
        self._calls: list[PendingCall] = []

    def feed(self, event: Mapping[str, Any]) -> None:
        n = self.chunk_count
        self.chunk_count = n + 1
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            dkind = delta.get("type")
            if dkind == "input_json_delta":
                call = self._blocks.get(event.get("index", -1))
                piece = delta.get("partial_json") or ""
                if call is None:
                    self.findings.append(
                        Finding(
                            kind="orphan_delta",
                            chunk_index=n,
                            message="input_json_delta for an unknown block",
                        )
                    )
                elif piece:
                    call.pieces.append(piece)
                    if self.listener is not None:
                        self.listener(
                            ArgumentsDelta(chunk_index=n, choice_index=0, call_index=call.index, delta=piece)
                        )
            elif dkind == "text_delta":
                self._text.append(delta.get("text") or "")
            elif dkind == "thinking_delta":
                self._thinking.append(delta.get("thinking") or "")
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") in ("tool_use", "server_tool_use"):
                call = PendingCall.announced(0, len(self._calls), n, block.get("id"), block.get("name"))
                self._blocks[event.get("index", -1)] = call
                self._start_input[call.index] = block.get("input")
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
            elif block.get("type") == "text" and block.get("text"):
                self._text.append(block["text"])
        elif kind == "message_start":
            message = event.get("message") or {}
            self.response_id = message.get("id")
            self.model = message.get("model")
            self.usage = {**(self.usage or {}), **(message.get("usage") or {})}
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            self.usage = {**(self.usage or {}), **(event.get("usage") or {})}
        elif kind == "error":
            error = event.get("error") or {}
            raise ProviderStreamError(
                str(error.get("message") or error), payload=dict(event), line_number=None
            )
        elif kind not in ("ping", "content_block_stop", "message_stop"):
            self.findings.append(
                Finding(
                    kind="unexpected_event",
                    severity="info",
                    chunk_index=n,
                    message=f"unknown Anthropic event type {kind!r} ignored",
                )
            )

    def snapshot(self) -> dict[int, dict[int, dict[str, Any]]]:
        """The calls assembled so far (for stepping through a stream)."""
        return calls_snapshot(self._calls)

    def finish(self) -> ParsedResponse:
        findings = list(self.findings)
        calls: list[ToolCall] = []
        for pending in self._calls:
            raw = None
            if not pending.pieces:
                start = self._start_input.get(pending.index)
                raw = compact_json(start if start is not None else {})
            call = pending.finalize(
                batch=self.batch,
                findings=findings,
                finish_reason="length" if self.stop_reason == "max_tokens" else None,
                raw=raw,
            )
            calls.append(call)
            if self.listener is not None:
                self.listener(CallFinished(call=call))
        if self.stop_reason is None:
            findings.append(
                Finding(
                    kind="no_finish_reason", severity="info", message="stream ended without a stop_reason"
                )
            )
        return single_choice(
            "anthropic-stream",
            text=self._text,
            reasoning=self._thinking,
            calls=calls,
            finish_reason=self.stop_reason,
            findings=findings,
            usage=self.usage or None,
            response_id=self.response_id,
            model=self.model,
        )


def parse_anthropic_message(body: Mapping[str, Any], *, batch: int = 0) -> ParsedResponse:
    """Read a whole Anthropic ``message`` body (``content`` blocks with ``tool_use``)."""
    findings: list[Finding] = []
    text: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    for block in body.get("content") or []:
        kind = block.get("type")
        if kind in ("tool_use", "server_tool_use"):
            pending = PendingCall.announced(0, len(calls), 0, block.get("id"), block.get("name"))
            raw = block.get("input")
            calls.append(
                pending.finalize(
                    batch=batch,
                    findings=findings,
                    raw=raw if isinstance(raw, str) else compact_json(raw if raw is not None else {}),
                )
            )
        elif kind == "text":
            text.append(block.get("text") or "")
        elif kind == "thinking":
            thinking.append(block.get("thinking") or "")
    return single_choice(
        "anthropic",
        text=text,
        reasoning=thinking,
        calls=calls,
        finish_reason=body.get("stop_reason"),
        findings=findings,
        usage=body.get("usage"),
        response_id=body.get("id"),
        model=body.get("model"),
    )

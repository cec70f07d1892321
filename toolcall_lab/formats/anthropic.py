"""Anthropic Messages API: ``tool_use`` content blocks, streamed (``input_json_delta``) or whole.

A streamed tool_use whose deltas are all empty takes its ``input`` from ``content_block_start``
(``{}`` for tools without parameters) once its block is closed or the message has a stop reason; a
block cut before either, with no deltas, is incomplete (nothing says ``{}`` was meant). When the
start's ``input`` is not empty and deltas follow, the deltas are kept and a difference reported; a
delta after ``content_block_stop`` is appended and reported. Whole messages carry ``input`` as an
object: it is shown as compact JSON so every format yields an argument *string*.
``stop_reason: "refusal"`` marks every call incomplete.

Blocks the provider runs itself (``server_tool_use``, ``mcp_tool_use``) and their ``*_tool_result``
blocks are reported in ``server_tool_calls``, never as client calls. An ``error`` event
(``overloaded_error`` mid-stream) ends the stream with the provider's message; blocks that were
not closed by ``content_block_stop`` are marked incomplete.
"""

from __future__ import annotations

import json
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
    capped,
    compact_json,
    error_response,
    finding,
    provider_ids,
    single_choice,
)
from toolcall_lab.formats.errors import describe_error
from toolcall_lab.messages import Finding, ParsedResponse, ServerToolCall, ToolCall

_SERVER_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})
_QUIET = frozenset({"ping", "message_stop"})


def _result_of(block: Mapping[str, Any]) -> tuple[str, str | None]:
    """(type, error code) of a ``*_tool_result`` block."""
    content = block.get("content")
    error = None
    if isinstance(content, Mapping) and str(content.get("type", "")).endswith("_error"):
        error = str(content.get("error_code") or content.get("type"))
    elif block.get("is_error"):
        error = "is_error"
    return str(block.get("type")), error


def _server_calls(
    pending: list[PendingCall],
    inputs: dict[int, Any],
    results: dict[str, tuple[str, str | None]],
    findings: list[Finding],
) -> tuple[ServerToolCall, ...]:
    out = []
    for call in pending:
        raw = "".join(call.pieces) if call.pieces else compact_json(inputs.get(call.index) or {})
        tid = call.tool_call_id or ""
        result_type, result_error = results.get(tid, (None, None))
        out.append(
            ServerToolCall(
                tool_call_id=tid,
                name=call.name or "",
                arguments=raw,
                result_type=result_type,
                result_error=result_error,
            )
        )
        findings.append(
            finding(
                "server_tool_call",
                f"server-side tool call {tid} ({call.name}) reported separately; not a client call",
                chunk_index=call.first_chunk,
                tool_call_id=tid or None,
            )
        )
    return tuple(out)


class AnthropicStreamAccumulator(StreamAccumulator):
    """Assemble tool calls and text from Anthropic stream events (``message_start`` ... ``message_stop``)."""

    __slots__ = (
        "_blocks",
        "_calls",
        "_inputs",
        "_results",
        "_server",
        "_server_inputs",
        "_text",
        "_thinking",
        "stop_reason",
    )

    def __init__(self, *, batch: int = 0, listener: StreamListener | None = None) -> None:
        super().__init__(batch=batch, listener=listener)
        self.stop_reason: str | None = None
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._blocks: dict[Any, tuple[PendingCall, bool]] = {}  # block index -> (call, is client call)
        self._inputs: dict[int, Any] = {}
        self._server_inputs: dict[int, Any] = {}
        self._calls: list[PendingCall] = []
        self._server: list[PendingCall] = []
        self._results: dict[str, tuple[str, str | None]] = {}

    def feed(self, event: Mapping[str, Any]) -> None:
        n = self.chunk_count
        self.chunk_count = n + 1
        if type(event) is not dict:
            mapped = self._event_mapping(event, n)
            if mapped is None:
                return
            event = mapped
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            dkind = delta.get("type") if isinstance(delta, Mapping) else None
            if dkind == "input_json_delta":
                self._input_delta(event, delta, n)
            elif dkind == "text_delta":
                self._text.append(delta.get("text") or "")
            elif dkind == "thinking_delta":
                self._thinking.append(delta.get("thinking") or "")
        elif kind == "content_block_start":
            self._block_start(event, n)
        elif kind == "content_block_stop":
            entry = self._blocks.get(event.get("index", -1))
            if entry is not None:
                entry[0].done = True
        elif kind == "message_start":
            message = event.get("message") or {}
            self.response_id = message.get("id")
            self.model = message.get("model")
            self.usage = {**(self.usage or {}), **(message.get("usage") or {})}
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            self.usage = {**(self.usage or {}), **(event.get("usage") or {})}
        elif kind == "error" or (kind not in _QUIET and event.get("error")):
            self.fail(describe_error(event.get("error") or event), dict(event), n)
        elif kind not in _QUIET:
            self.note("unknown_event", f"unknown Anthropic event type {kind!r} ignored", chunk_index=n)

    def _input_delta(self, event: Mapping[str, Any], delta: Mapping[str, Any], n: int) -> None:
        entry = self._blocks.get(event.get("index", -1))
        piece = delta.get("partial_json") or ""
        if entry is None:
            self.note(
                "orphan_delta",
                f"chunk {n}: input_json_delta for unknown block {event.get('index')!r}; skipped",
                chunk_index=n,
            )
            return
        call, client = entry
        if call.done and piece and not call.late:
            call.late = True
            self.note(
                "late_delta",
                f"chunk {n}: input_json_delta for block {event.get('index')!r} after its content_block_stop; "
                f"appended to call {call.tool_call_id}",
                chunk_index=n,
                tool_call_id=call.tool_call_id,
            )
        if piece:
            call.pieces.append(piece)
            if client and self.listener is not None:
                self.listener(
                    ArgumentsDelta(chunk_index=n, choice_index=0, call_index=call.index, delta=piece)
                )

    def _block_start(self, event: Mapping[str, Any], n: int) -> None:
        block = event.get("content_block") or {}
        btype = block.get("type")
        held = self._blocks.get(event.get("index", -1))
        if held is not None and (btype == "tool_use" or btype in _SERVER_BLOCKS):
            self.note(
                "index_reused",
                f"chunk {n}: content_block_start reuses block index {event.get('index')!r} (held call "
                f"{held[0].tool_call_id}) for {block.get('id')!r}; kept as a new call, later deltas at "
                "that index go to it",
                chunk_index=n,
                tool_call_id=block.get("id") if isinstance(block.get("id"), str) else None,
            )
        if btype == "tool_use":
            call = PendingCall.announced(0, len(self._calls), n, block.get("id"), block.get("name"))
            self._blocks[event.get("index", -1)] = (call, True)
            self._inputs[call.index] = block.get("input")
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
        elif btype in _SERVER_BLOCKS:
            call = PendingCall.announced(0, len(self._server), n, block.get("id"), block.get("name"))
            self._blocks[event.get("index", -1)] = (call, False)
            self._server_inputs[call.index] = block.get("input")
            self._server.append(call)
        elif isinstance(btype, str) and btype.endswith("_tool_result"):
            self._results[str(block.get("tool_use_id"))] = _result_of(block)
        elif btype == "text" and block.get("text"):
            self._text.append(block["text"])

    @staticmethod
    def _start_and_deltas(pending: PendingCall, start: dict[str, Any], findings: list[Finding]) -> None:
        """A block start with a non-empty ``input`` and deltas too: the deltas are kept; say so
        when they say something else."""
        joined = "".join(pending.pieces)
        try:
            same = json.loads(joined) == start
        except (ValueError, RecursionError):
            same = False
        if not same:
            findings.append(
                finding(
                    "arguments_mismatch",
                    f"call {pending.tool_call_id}: content_block_start carried input "
                    f"{compact_json(start)[:80]} and input_json_delta events followed; kept the deltas",
                    chunk_index=pending.first_chunk,
                    tool_call_id=pending.tool_call_id,
                )
            )

    def pending_calls(self) -> list[PendingCall]:
        return [*self._calls, *self._server]

    def snapshot(self) -> dict[int, dict[int, dict[str, Any]]]:
        """The calls assembled so far (for stepping through a stream)."""
        return calls_snapshot(self._calls)

    def _result(self, error: str | None) -> ParsedResponse:
        findings = list(self.findings)
        calls: list[ToolCall] = []
        cut = "length" if self.stop_reason == "max_tokens" else None
        refused = self.stop_reason == "refusal"
        taken = provider_ids(self._calls)
        for pending in self._calls:
            raw = None
            ended = pending.done or self.stop_reason is not None
            start = self._inputs.get(pending.index)
            if not pending.pieces:
                if start or ended:  # (an empty start input of a block cut before its end says nothing)
                    raw = compact_json(start if start is not None else {})
            elif start and isinstance(start, dict):
                self._start_and_deltas(pending, start, findings)
            call = pending.finalize(
                self.batch,
                findings,
                cut,
                raw,
                (error is not None and not pending.done) or refused,
                ended,
                taken,
            )
            calls.append(call)
            if self.listener is not None:
                self.listener(CallFinished(call=call))
        server = _server_calls(self._server, self._server_inputs, self._results, findings)
        if self.stop_reason is None and error is None:
            findings.append(finding("no_finish_reason", "stream ended without a stop_reason"))
        elif cut:
            findings.append(
                finding("length_finish", "stop_reason 'max_tokens' (output cut at the token limit)")
            )
        elif refused and error is None:
            findings.append(
                finding(
                    "filtered_finish",
                    f"stop_reason 'refusal' (the model's output was stopped); {len(calls)} call(s) marked "
                    "incomplete",
                )
            )
        return single_choice(
            "anthropic-stream",
            text=self._text,
            reasoning=self._thinking,
            calls=calls,
            finish_reason=self.stop_reason,
            findings=capped(findings, self._limit),
            usage=self.usage or None,
            response_id=self.response_id,
            model=self.model,
            server_calls=server,
            error=error,
        )


def parse_anthropic_message(body: Mapping[str, Any], *, batch: int = 0) -> ParsedResponse:
    """Read a whole Anthropic ``message`` body (``content`` blocks with ``tool_use``).

    An error body (``{"type": "error", "error": {...}}``) raises `ProviderStreamError` quoting it.
    """
    if body.get("type") == "error" or (body.get("error") and not body.get("content")):
        message = describe_error(body.get("error") or body)
        exc = ProviderStreamError(message, payload=dict(body), line_number=None)
        exc.partial_responses = (error_response(message, "anthropic"),)
        raise exc
    findings: list[Finding] = []
    text: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    server: list[PendingCall] = []
    server_inputs: dict[int, Any] = {}
    results: dict[str, tuple[str, str | None]] = {}
    cut = "length" if body.get("stop_reason") == "max_tokens" else None
    refused = body.get("stop_reason") == "refusal"
    content = body.get("content") or []
    content = content if isinstance(content, list) else []
    given = [b.get("id") for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"]
    taken = {str(i) for i in given if i} if not all(given) else None
    for pos, block in enumerate(content):
        if not isinstance(block, Mapping):
            findings.append(finding("malformed_chunk", f"content block {pos} is not an object; skipped"))
            continue
        kind = block.get("type")
        if kind == "tool_use":
            pending = PendingCall.announced(0, len(calls), 0, block.get("id"), block.get("name"))
            raw = block.get("input")
            calls.append(
                pending.finalize(
                    batch,
                    findings,
                    cut,
                    raw if isinstance(raw, str) else compact_json(raw if raw is not None else {}),
                    refused,
                    True,
                    taken,
                )
            )
        elif kind in _SERVER_BLOCKS:
            pending = PendingCall.announced(0, len(server), 0, block.get("id"), block.get("name"))
            server_inputs[pending.index] = block.get("input")
            server.append(pending)
        elif isinstance(kind, str) and kind.endswith("_tool_result"):
            results[str(block.get("tool_use_id"))] = _result_of(block)
        elif kind == "text":
            text.append(block.get("text") or "")
        elif kind == "thinking":
            thinking.append(block.get("thinking") or "")
    if refused:
        findings.append(
            finding(
                "filtered_finish",
                f"stop_reason 'refusal' (the model's output was stopped); {len(calls)} call(s) marked "
                "incomplete",
            )
        )
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
        server_calls=_server_calls(server, server_inputs, results, findings),
    )

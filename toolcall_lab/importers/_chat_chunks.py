"""Anthropic Messages and Responses API stream events -> the equivalent chat-completion chunks.

A trace holds chat-completion chunks only (the loop reads every model through the chat accumulator),
so a streamed Anthropic or Responses recording is converted event by event: each source event becomes
one chat chunk carrying what that event added to the response (a call's header, a piece of its
arguments, text), in the event's place. An imported trace so keeps one chunk per recorded event, with
the same offset rule as a chat stream, and a replay under ``eager`` sees each call's arguments complete
at the event where they completed in the source.

What each event added is read from the format's own parser (its accumulator, stepped one event at a
time), not re-implemented here. Where the parser's final arguments are not the deltas joined (an
Anthropic block whose ``input`` came whole, a Responses ``.done`` that replaced the deltas), the
remainder is sent at the event that closed the call (``content_block_stop``, ``.done``), or at the last
event. The chunks are checked to parse to the same message as the converted body; when they do not,
the caller keeps the body (and says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolcall_lab.formats.dispatch import WireFormat, new_accumulator
from toolcall_lab.formats.sse import DONE
from toolcall_lab.importers._shapes import chat_body, parse_turn
from toolcall_lab.messages import ParsedResponse

_NEW_RESPONSE = {"openai-responses": "response.created", "anthropic": "message_start"}


def split_events(items: Sequence[Any], fmt: WireFormat) -> list[list[dict[str, Any]]]:
    """The events of each response of a stream, split where the parser splits them (``[DONE]``, a
    new ``message_start`` / ``response.created``)."""
    boundary = _NEW_RESPONSE.get(fmt)
    out: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    for item in items:
        if item is DONE:
            if current:
                out.append(current)
                current = []
        elif type(item) is dict:
            if current and boundary is not None and item.get("type") == boundary:
                out.append(current)
                current = []
            current.append(item)
    if current:
        out.append(current)
    return out


def _signature(parsed: ParsedResponse) -> tuple[Any, ...]:
    first = parsed.first
    return (
        first.to_message(),
        tuple((c.id_source, c.complete) for c in first.tool_calls),
        parsed.usage,
        parsed.model,
    )


def chat_chunks(
    events: Sequence[dict[str, Any]], fmt: WireFormat, parsed: ParsedResponse, batch: int
) -> list[dict[str, Any]] | None:
    """One chat-completion chunk per event of one response (`parsed`, as the format's parser read
    these events), or None when such chunks would not parse to the same message as the converted
    body (the caller then keeps the body)."""
    if fmt == "openai-chat" or not events:
        return None
    acc = new_accumulator(fmt, batch)
    so_far: list[dict[int, str]] = []  # per event: announce index -> arguments received so far
    done: list[set[int]] = []  # per event: announce indices of the calls closed so far
    texts: list[str] = []
    try:
        for event in events:
            acc.feed(event)
            snapshot = acc.snapshot().get(0, {})  # type: ignore[attr-defined]
            so_far.append({i: c["arguments"] for i, c in snapshot.items()})
            pending = acc.pending_calls()
            done.append({i for i in snapshot if i < len(pending) and pending[i].done})
            texts.append(_text_of(event, fmt))
        order = acc.pending_calls()  # announce order; `finish` gives each its final position
        acc.finish()
    except Exception:  # a provider error or damage mid-stream: the caller keeps the body
        return None
    calls = parsed.first.tool_calls
    final_of = {i: order[i].index for i in so_far[-1] if i < len(order)}
    if sorted(final_of.values()) != list(range(len(calls))):
        return None
    sent = dict.fromkeys(final_of, "")
    headed: set[int] = set()
    rid = parsed.response_id or "imported"
    chunks: list[dict[str, Any]] = []
    last = len(events) - 1
    for k in range(len(events)):
        entries = []
        for i, pos in final_of.items():
            if i not in so_far[k]:
                continue
            final = calls[pos].arguments
            have = so_far[k][i]
            piece = ""
            if have.startswith(sent[i]) and final.startswith(have):
                piece = have[len(sent[i]) :]
            if (i in done[k] or k == last) and final != sent[i] + piece:
                piece = final[len(sent[i]) :]  # the parser's final form, at the event that closed it
            if i in headed and not piece:
                continue
            entry: dict[str, Any] = {"index": pos, "function": {"arguments": piece}}
            if i not in headed:
                headed.add(i)
                call = calls[pos]
                if call.id_source == "provider":
                    entry["id"] = call.tool_call_id
                entry["type"] = "function"
                entry["function"] = {"name": call.name, "arguments": piece}
            sent[i] += piece
            entries.append(entry)
        delta: dict[str, Any] = {"role": "assistant"} if k == 0 else {}
        if texts[k]:
            delta["content"] = texts[k]
        if entries:
            delta["tool_calls"] = sorted(entries, key=lambda e: e["index"])
        chunk: dict[str, Any] = {
            "id": rid,
            "object": "chat.completion.chunk",
            "model": parsed.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        }
        chunks.append(chunk)
    body = chat_body(parsed, keep_fallback_ids=False)
    chunks[-1]["choices"][0]["finish_reason"] = body["choices"][0]["finish_reason"]
    if parsed.usage:
        chunks[-1]["usage"] = parsed.usage
    if _signature(parse_turn(chunks, batch)) != _signature(parse_turn([body], batch)):
        return None
    return chunks


def _text_of(event: dict[str, Any], fmt: WireFormat) -> str:
    """The answer text an event adds (reasoning is not part of the chat message a trace keeps)."""
    kind = event.get("type")
    if fmt == "anthropic":
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            if isinstance(delta, dict) and delta.get("type") == "text_delta":
                return str(delta.get("text") or "")
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if isinstance(block, dict) and block.get("type") == "text":
                return str(block.get("text") or "")
        return ""
    if kind == "response.output_text.delta":
        return str(event.get("delta") or "")
    return ""

"""The tool-calling message protocol: a validator, and conversion to and from Anthropic's format.

Rule checked: every tool call of an assistant message is answered by exactly one ``tool`` message
with its id before the next assistant or user turn, and no tool message answers a call that was not
made (or was already answered). A buggy server may repeat an id within one message: that is flagged
(``duplicate_call_id``), and each of those calls still expects its own answer (answers are matched
in order, as the loop sends them), so answering both is not a second violation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

ViolationKind = Literal[
    "unanswered_call", "orphan_tool_message", "duplicate_answer", "duplicate_call_id", "missing_tool_call_id"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolViolation:
    """Where a message list breaks the protocol: message position, tool_call_id and what is wrong."""

    kind: ViolationKind
    message_index: int
    tool_call_id: str | None
    message: str

    def __str__(self) -> str:
        return self.message


def validate_messages(messages: Sequence[dict[str, Any]]) -> list[ProtocolViolation]:
    """All protocol violations of an OpenAI-format message list (empty when it is valid)."""
    out: list[ProtocolViolation] = []
    open_calls: dict[str, list[tuple[int, str]]] = {}
    answered: set[str] = set()
    seen_ids: set[str] = set()
    closed: dict[str, tuple[int, int]] = {}
    """Calls left unanswered: id -> (the message that made it, the message that came before an answer)."""

    def close(before: int) -> None:
        for cid, pending in open_calls.items():
            for at, name in pending:
                closed[cid] = (at, before)
                out.append(
                    ProtocolViolation(
                        kind="unanswered_call",
                        message_index=at,
                        tool_call_id=cid,
                        message=f"message {at} (assistant) made tool call {cid!r} ({name}) but no tool "
                        f"message answers it before message {before}",
                    )
                )
        open_calls.clear()

    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role == "tool":
            cid = msg.get("tool_call_id")
            if not cid:
                out.append(
                    ProtocolViolation(
                        kind="missing_tool_call_id",
                        message_index=i,
                        tool_call_id=None,
                        message=f"message {i} (tool) has no tool_call_id",
                    )
                )
            elif cid in open_calls:
                pending = open_calls[cid]
                pending.pop(0)
                if not pending:
                    del open_calls[cid]
                answered.add(cid)
            elif cid in answered:
                out.append(
                    ProtocolViolation(
                        kind="duplicate_answer",
                        message_index=i,
                        tool_call_id=cid,
                        message=f"message {i} (tool) answers {cid!r} a second time",
                    )
                )
            else:
                late = closed.get(cid)
                text = (
                    f"message {i} (tool) answers {cid!r}, made in message {late[0]}, but message {late[1]} "
                    "came between them: a result must come before the next assistant or user message"
                    if late is not None
                    else f"message {i} (tool) answers {cid!r}, which no earlier assistant call made"
                )
                out.append(
                    ProtocolViolation(
                        kind="orphan_tool_message", message_index=i, tool_call_id=cid, message=text
                    )
                )
            continue
        if role in ("assistant", "user"):
            close(i)
        if role == "assistant":
            for call in msg.get("tool_calls") or []:
                cid = call.get("id")
                name = (call.get("function") or {}).get("name", "?")
                if cid in seen_ids:
                    out.append(
                        ProtocolViolation(
                            kind="duplicate_call_id",
                            message_index=i,
                            tool_call_id=cid,
                            message=f"message {i} reuses tool call id {cid!r}",
                        )
                    )
                seen_ids.add(cid)
                open_calls.setdefault(cid, []).append((i, name))
    close(len(messages))
    return out


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def to_anthropic(messages: Sequence[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """OpenAI chat messages -> (system prompt, Anthropic messages with tool_use / tool_result blocks)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for msg in messages:
        role = msg.get("role")
        if role == "system":
            system.append(_text_of(msg.get("content")))
        elif role == "user":
            add("user", [{"type": "text", "text": _text_of(msg.get("content"))}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if msg.get("content"):
                blocks.append({"type": "text", "text": _text_of(msg["content"])})
            for call in msg.get("tool_calls") or []:
                fn = call.get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except json.JSONDecodeError:
                    args = {"_raw_arguments": fn.get("arguments")}
                blocks.append(
                    {"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": args}
                )
            add("assistant", blocks)
        elif role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": msg.get("tool_call_id"),
                        "content": _text_of(msg.get("content")),
                    }
                ],
            )
    return ("\n\n".join(system) if system else None), out


def from_anthropic(system: str | None, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic messages (+ system prompt) -> OpenAI chat messages; tool_result blocks -> tool messages."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for msg in messages:
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        if msg.get("role") == "assistant":
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            calls = [
                {
                    "id": b.get("id"),
                    "type": "function",
                    "function": {
                        "name": b.get("name"),
                        "arguments": json.dumps(b.get("input") or {}, separators=(",", ":")),
                    },
                }
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            item: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                item["tool_calls"] = calls
            out.append(item)
            continue
        texts = []
        for b in blocks:
            if b.get("type") == "tool_result":
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": b.get("tool_use_id"),
                        "content": _text_of(b.get("content")),
                    }
                )
            elif b.get("type") == "text":
                texts.append(b.get("text", ""))
        if texts:
            out.append({"role": "user", "content": "".join(texts)})
    return out

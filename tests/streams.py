"""Builders for synthetic chat-completion chunks and SSE bodies (bytes we write ourselves)."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any


def chunk(
    *calls: dict[str, Any],
    content: str | None = None,
    finish: str | None = None,
    choice: int = 0,
    reasoning: str | None = None,
) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    if calls:
        delta["tool_calls"] = list(calls)
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": choice, "delta": delta, "finish_reason": finish}],
    }


def tc(
    index: int | None = 0, id: str | None = None, name: str | None = None, args: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if index is not None:
        out["index"] = index
    if id is not None:
        out["id"] = id
        out["type"] = "function"
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    out["function"] = fn
    return out


def stream_of(
    calls: list[tuple[str, str, str]], splits: list[list[int]] | None = None, interleave: bool = False
) -> list[dict[str, Any]]:
    """Chunks for calls (id, name, args), each argument string cut at the given split points."""
    per_call: list[list[dict[str, Any]]] = []
    for i, (cid, name, args) in enumerate(calls):
        cuts = sorted(set(splits[i])) if splits else []
        bounds = [0, *[c for c in cuts if 0 < c < len(args)], len(args)]
        pieces = [args[a:b] for a, b in pairwise(bounds)]
        chunks = [chunk(tc(i, id=cid, name=name, args=""))]
        chunks += [chunk(tc(i, args=p)) for p in pieces if p]
        per_call.append(chunks)
    out: list[dict[str, Any]] = [chunk(content=None)]
    if interleave:
        while any(per_call):
            for lst in per_call:
                if lst:
                    out.append(lst.pop(0))
    else:
        for lst in per_call:
            out.extend(lst)
    out.append(chunk(finish="tool_calls"))
    return out


def sse_body(payloads: list[dict[str, Any]], done: bool = True) -> bytes:
    text = "".join(f"data: {json.dumps(p)}\n\n" for p in payloads)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()

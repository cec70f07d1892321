"""OpenAI wire details the proxy needs: fast JSON, error bodies, hand-out replies and synthesised SSE."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

try:  # orjson (the `fast` extra) parses and writes request bodies several times faster
    import orjson

    def loads(data: bytes | str) -> Any:
        return orjson.loads(data)

    def dumps(value: Any) -> bytes:
        try:
            return orjson.dumps(value)
        except TypeError:  # integers beyond 64 bits and the like
            return json.dumps(value, ensure_ascii=False).encode()

    JSONError: tuple[type[Exception], ...] = (orjson.JSONDecodeError, UnicodeDecodeError)

except ImportError:  # pragma: no cover - the optional extra is absent

    def loads(data: bytes | str) -> Any:
        return json.loads(data)

    def dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False).encode()

    JSONError = (json.JSONDecodeError, UnicodeDecodeError)


ZERO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
"""Usage of a reply served from the queue: no model was called, so no tokens were spent."""

_TEMPLATE_KEYS = ("id", "created", "model", "system_fingerprint", "service_tier")


def error_body(status: int, message: str, code: str, *, param: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body; `type` follows OpenAI's names for the status."""
    kind = {
        400: "invalid_request_error",
        404: "not_found_error",
        405: "invalid_request_error",
        409: "conflict_error",
        410: "invalid_request_error",
        413: "invalid_request_error",
        429: "rate_limit_error",
    }.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def template_of(response: Mapping[str, Any]) -> dict[str, Any]:
    """The response fields every reply of a batch repeats (id, created, model, fingerprint, tier, usage)."""
    out = {k: response[k] for k in _TEMPLATE_KEYS if response.get(k) is not None}
    out.setdefault("created", int(time.time()))
    if response.get("usage") is not None:
        out["usage"] = response["usage"]
    return out


def hand_out_reply(template: Mapping[str, Any], message: dict[str, Any], position: int) -> dict[str, Any]:
    """The chat.completion a client receives for hand-out `position` of a batch.

    Position 0 is the upstream response itself with one call and its real usage; later positions are
    served from the queue: same created / model / system_fingerprint, id suffixed ``-k``, zero usage.
    """
    base = str(template.get("id") or "chatcmpl-proxy")
    reply: dict[str, Any] = {
        "id": base if position == 0 else f"{base}-{position}",
        "object": "chat.completion",
        "created": template.get("created", int(time.time())),
        "model": template.get("model"),
    }
    for key in ("system_fingerprint", "service_tier"):
        if key in template:
            reply[key] = template[key]
    reply["choices"] = [{"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls"}]
    reply["usage"] = template.get("usage", ZERO_USAGE) if position == 0 else dict(ZERO_USAGE)
    return reply


def sse_events(response: Mapping[str, Any], *, include_usage: bool) -> Iterator[bytes]:
    """A whole chat.completion as the ``data:`` events of a stream, ending with ``[DONE]``.

    Every chunk carries the response's id, created, model and system_fingerprint; a final usage chunk
    (``choices: []``) is sent only when the client asked for it with ``stream_options.include_usage``.
    """
    head: dict[str, Any] = {
        "id": response.get("id", "chatcmpl-proxy"),
        "object": "chat.completion.chunk",
        "created": response.get("created", int(time.time())),
        "model": response.get("model"),
    }
    for key in ("system_fingerprint", "service_tier"):
        if response.get(key) is not None:
            head[key] = response[key]

    def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return b"data: " + dumps({**head, "choices": choices, **extra}) + b"\n\n"

    for pos, choice in enumerate(response.get("choices") or []):
        index = choice.get("index", pos)
        message = choice.get("message") or {}
        first: dict[str, Any] = {"role": message.get("role", "assistant"), "content": message.get("content")}
        if first["content"] is None:
            first["content"] = ""
        for key in ("reasoning_content", "refusal"):
            if message.get(key) is not None:
                first[key] = message[key]
        yield event([{"index": index, "delta": first, "logprobs": None, "finish_reason": None}])
        for i, call in enumerate(message.get("tool_calls") or []):
            fn = call.get("function") or {}
            delta = {
                "index": i,
                "id": call.get("id"),
                "type": call.get("type", "function"),
                "function": {"name": fn.get("name"), "arguments": fn.get("arguments") or ""},
            }
            yield event(
                [{"index": index, "delta": {"tool_calls": [delta]}, "logprobs": None, "finish_reason": None}]
            )
        finish = choice.get("finish_reason") or ("tool_calls" if message.get("tool_calls") else "stop")
        yield event([{"index": index, "delta": {}, "logprobs": None, "finish_reason": finish}])
    if include_usage:
        yield event([], usage=response.get("usage"))
    yield b"data: [DONE]\n\n"

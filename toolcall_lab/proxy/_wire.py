"""OpenAI wire details the proxy needs: fast JSON, error bodies, hand-out replies and synthesised SSE."""

from __future__ import annotations

import hashlib
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

    def dumps_sorted(value: Any) -> bytes:
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()

    JSONError: tuple[type[Exception], ...] = (orjson.JSONDecodeError, UnicodeDecodeError)

except ImportError:  # pragma: no cover - the optional extra is absent

    def loads(data: bytes | str) -> Any:
        return json.loads(data)

    def dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False).encode()

    def dumps_sorted(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()

    JSONError = (json.JSONDecodeError, UnicodeDecodeError)


_DIGITS = bytes(0x39 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_LONG_RUN = b"9" * 19


def exact(raw: bytes, value: Any) -> Any:
    """`value` parsed from `raw`, parsed again with the standard library when `raw` holds a run of 19 or
    more digits: orjson reads an integer beyond 64 bits as a float, and the proxy must not change a
    number it forwards. The check costs about a microsecond and a half per kilobyte."""
    if _LONG_RUN not in raw.translate(_DIGITS):
        return value
    try:
        return json.loads(raw)
    except ValueError:  # pragma: no cover - orjson read it, the standard library reads a superset
        return value


def request_digest(raw: bytes) -> str:
    """A request body's identity for ``Idempotency-Key``: the same JSON is the same request, however it
    is spaced or its keys ordered; a body that is not JSON is compared byte for byte."""
    try:
        canonical = b"json\x00" + dumps_sorted(loads(raw))
    except JSONError:
        canonical = b"raw\x00" + raw
    return hashlib.sha256(canonical).hexdigest()


RETRYABLE = frozenset({"upstream_unreachable", "upstream_timeout", "upstream_bad_response"})
"""Codes of the proxy's own errors that a retry may cure; every other one says ``x-should-retry: false``."""
NO_RETRY = {"x-should-retry": "false"}
"""The header the `openai` client (and other Stainless clients) obey: it would otherwise retry 409 and
every 5xx, and a 507 or a conflict would only come back, after costing time (or upstream calls)."""

_QUEUED_KEYS = ("id", "object", "created", "model", "system_fingerprint", "service_tier")
_CHOICE_KEYS = frozenset({"index", "message", "finish_reason"})


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


def split_response(response: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(template, choice): an upstream response's top-level fields without its choices, exactly as
    sent (``created`` is added, as the time of the reply, only when the upstream sent none: clients
    require it), and the fields of its one choice besides index, message and finish_reason."""
    template = {k: v for k, v in response.items() if k != "choices"}
    if not isinstance(template.get("created"), int):
        template["created"] = int(time.time())
    choice = response["choices"][0]
    return template, {k: v for k, v in choice.items() if k not in _CHOICE_KEYS}


def hand_out_reply(
    template: Mapping[str, Any], choice: Mapping[str, Any], message: dict[str, Any], position: int
) -> dict[str, Any]:
    """The chat.completion a client receives for hand-out `position` of a batch.

    Position 0 is the upstream's response itself with only the first call: every field it sent, its
    usage included (absent if it sent none), and every field of its choice (logprobs, ...). Later
    positions are served from the queue, no model was called for them: same created / model /
    system_fingerprint / service_tier, id suffixed ``-k``, ``usage`` null and ``logprobs`` null (the
    upstream's usage and logprobs belong to the response the first position carries).
    """
    if position == 0:
        reply = dict(template)
        reply.setdefault("object", "chat.completion")
        reply["choices"] = [{"index": 0, "message": message, **choice, "finish_reason": "tool_calls"}]
        return reply
    reply = {k: template[k] for k in _QUEUED_KEYS if k in template}
    reply["id"] = f"{template.get('id') or 'chatcmpl-proxy'}-{position}"
    reply["object"] = "chat.completion"
    reply["choices"] = [{"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls"}]
    reply["usage"] = None
    return reply


def sse_events(response: Mapping[str, Any], *, include_usage: bool) -> Iterator[bytes]:
    """A whole chat.completion as the ``data:`` events of a stream, ending with ``[DONE]``.

    Every chunk carries the response's id, created, model, system_fingerprint and any other top-level
    field it has; a choice's logprobs ride on its first chunk, its other fields on its last. A final
    usage chunk (``choices: []``, the response's usage, null when it has none) is sent only when the
    client asked for it with ``stream_options.include_usage``.
    """
    head: dict[str, Any] = {
        k: v for k, v in response.items() if k not in ("choices", "usage", "object") and v is not None
    }
    head.setdefault("id", "chatcmpl-proxy")
    head["object"] = "chat.completion.chunk"
    head.setdefault("created", int(time.time()))
    head.setdefault("model", None)

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
        logprobs = choice.get("logprobs")
        yield event([{"index": index, "delta": first, "logprobs": logprobs, "finish_reason": None}])
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
        extra = {k: v for k, v in choice.items() if k not in _CHOICE_KEYS and k != "logprobs"}
        yield event([{"index": index, "delta": {}, "logprobs": None, **extra, "finish_reason": finish}])
    if include_usage:
        yield event([], usage=response.get("usage"))
    yield b"data: [DONE]\n\n"

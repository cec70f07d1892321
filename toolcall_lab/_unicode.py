"""Strings UTF-8 cannot encode: lone surrogates (``"\\ud800"``), which JSON text and Python strings
allow and a tool or a model can produce. Every file we write goes through here.

JSON keeps them losslessly as ``\\uXXXX`` escapes (``json.loads`` gives the same string back), except
a high surrogate followed by a low one: JSON reads that escape pair as one character, so such a
string cannot be written as JSON and be read back the same; `unwritable` finds it so the writer can
say where. Text meant for people (reports, CSV cells, SVG, HTML) shows them as ``\\udXXX``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def escape(text: str) -> str:
    """`text` with every surrogate written as a ``\\uXXXX`` escape.

    In JSON text a raw surrogate can only stand inside a string literal, where the escape means the
    same code point, so on JSON this is lossless (see `unwritable` for the one exception)."""
    if not LONE_SURROGATE.search(text):
        return text
    return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def has_surrogates(value: Any) -> bool:
    """Whether any string in a JSON-like value (keys included) holds a surrogate."""
    return next(_surrogate_paths(value, ""), None) is not None


def unwritable(value: Any) -> str | None:
    """The JSON path of the first string JSON cannot keep as it is (a high surrogate followed by a
    low one), or None."""
    for path, text in _surrogate_paths(value, ""):
        if _PAIR.search(text):
            return path
    return None


def _surrogate_paths(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        if LONE_SURROGATE.search(value):
            yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            p = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and LONE_SURROGATE.search(k):
                yield p, k
            yield from _surrogate_paths(v, p)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _surrogate_paths(v, f"{path}[{i}]")


def describe(doc: Any, path: str) -> str:
    """`path` in a trace document with the round and the tool call it is in, when it is in one."""
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    node, where = doc, []
    for part in parts:
        try:
            node = node[int(part[1:-1])] if part.startswith("[") else node[part]
        except (KeyError, IndexError, TypeError, ValueError):
            break
        if isinstance(node, dict):
            if isinstance(node.get("round_index"), int) and "response" in node:
                where.append(f"round {node['round_index']}")
            if isinstance(node.get("tool_call_id"), str):
                where.append(f"call {escape(node['tool_call_id'])}")
    return f"{path} ({', '.join(where)})" if where else path


_EXTENDS = re.compile(
    "[\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u0610-\u061a\u064b-\u065f\u0900-\u0903\u093a-\u094f"
    "\u1160-\u11ff\u1ab0-\u1aff\u1dc0-\u1dff\u200c\u200d\u20d0-\u20ff\ufe00-\ufe0f\ufe20-\ufe2f"
    "\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f\U000e0100-\U000e01ef]"
)
"""Characters that never start a grapheme cluster (a cut before one splits a character the reader sees
as one): combining marks of the common scripts, Hangul vowel and final jamo, joiners (ZWJ), variation
selectors, emoji skin-tone modifiers and tag characters. Other marks are found by category."""
_REGIONAL = re.compile("[\U0001f1e6-\U0001f1ff]")


def grapheme_cut(text: str, limit: int) -> str:
    """The longest prefix of `text` of at most `limit` characters that does not end inside a grapheme
    cluster: never between a character and a combining mark, variation selector or skin-tone modifier,
    never next to a zero-width joiner (👩‍💻 stays whole or goes whole), never inside a flag (a pair of
    regional indicators). An approximation of UAX #29 with the standard library only."""
    if len(text) <= limit:
        return text
    cut = max(limit, 0)
    while cut > 0 and (_extends(text[cut]) or text[cut - 1] == "\u200d"):
        cut -= 1
    if cut > 0 and _REGIONAL.match(text[cut]) and _REGIONAL.match(text[cut - 1]):
        run = cut
        while run > 0 and _REGIONAL.match(text[run - 1]):
            run -= 1
        if (cut - run) % 2:  # an odd number of indicators before the cut: it splits a flag
            cut -= 1
    return text[:cut]


def _extends(char: str) -> bool:
    return bool(_EXTENDS.match(char)) or unicodedata.category(char) in ("Mn", "Me", "Mc")

"""Edit the values of a JSON text in place: where each value lies in the raw text, and how to rewrite one
string literal so that only some of its characters change (the others keep their escapes byte for
byte). `toolcall_lab.redaction` uses it to take a secret out of a tool call's raw argument string
without touching the escape of the quote that follows it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(r"-?(?:Infinity|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|NaN|true|false|null")
_SPACE = frozenset(" \t\n\r")


@dataclass(frozen=True, slots=True)
class Token:
    """One value of a JSON text: where it lies (``text[start:end]``, quotes included for a string),
    its path (``a.b[2]``), and the object key it is the value of (None in an array or at the top)."""

    start: int
    end: int
    path: str
    key: str | None
    string: bool


class _Frame:
    __slots__ = ("index", "key", "obj", "path")

    def __init__(self, path: str, obj: bool) -> None:
        self.path, self.obj = path, obj
        self.key: str | None = None
        """An object's key whose value comes next (None: a key comes next)."""
        self.index = 0


def tokens(text: str) -> Iterator[Token]:
    """Every scalar value of `text`, a valid JSON document (check with `json.loads` first), in order.

    Object keys are not values and are not yielded.
    """
    stack: list[_Frame] = []
    i, n = 0, len(text)

    def where() -> tuple[str, str | None]:
        if not stack:
            return "", None
        top = stack[-1]
        if top.obj:
            return (f"{top.path}.{top.key}" if top.path else str(top.key)), top.key
        return f"{top.path}[{top.index}]", None

    def done() -> None:
        if stack:
            stack[-1].key = None
            stack[-1].index += 1

    while i < n:
        c = text[i]
        if c in _SPACE or c in ",:":
            i += 1
        elif c in "{[":
            stack.append(_Frame(where()[0], c == "{"))
            i += 1
        elif c in "}]":
            stack.pop()
            done()
            i += 1
        elif c == '"':
            m = _STRING.match(text, i)
            if m is None:
                raise ValueError(f"not a JSON text: unterminated string at {i}")
            if stack and stack[-1].obj and stack[-1].key is None:
                stack[-1].key = json.loads(m.group(0))
            else:
                path, key = where()
                yield Token(start=i, end=m.end(), path=path, key=key, string=True)
                done()
            i = m.end()
        else:
            m = _SCALAR.match(text, i)
            if m is None:
                raise ValueError(f"not a JSON text: unexpected {c!r} at {i}")
            path, key = where()
            yield Token(start=i, end=m.end(), path=path, key=key, string=False)
            done()
            i = m.end()


def char_spans(literal: str) -> list[tuple[int, int]] | None:
    """For each character of the decoded string literal `literal` (quotes included), the span of
    `literal` that writes it (an escape such as ``\\"``, ``\\u00e9`` or a surrogate pair is one
    character); None when the count does not agree with `json.loads` (then rewrite it whole)."""
    spans: list[tuple[int, int]] = []
    i, end = 1, len(literal) - 1
    while i < end:
        if literal[i] != "\\":
            spans.append((i, i + 1))
            i += 1
            continue
        if literal[i + 1] != "u":
            spans.append((i, i + 2))
            i += 2
            continue
        code = int(literal[i + 2 : i + 6], 16)
        pair = (
            0xD800 <= code <= 0xDBFF
            and literal[i + 6 : i + 8] == "\\u"
            and 0xDC00 <= int(literal[i + 8 : i + 12] or "0", 16) <= 0xDFFF
        )
        step = 12 if pair else 6
        spans.append((i, i + step))
        i += step
    return spans if len(spans) == len(json.loads(literal)) else None


def rewrite_literal(literal: str, new: str, origin: Sequence[int]) -> tuple[str, list[int]]:
    """The string literal `literal` rewritten to decode to `new`, where ``origin[k]`` is the index in
    the decoded old string of ``new[k]`` (-1 for an inserted character): characters that stayed keep
    the bytes that wrote them; inserted ones are escaped as `json.dumps` does. Also returns, for each
    character of the new literal, its index in `literal` (-1 when new)."""
    spans = char_spans(literal)
    if spans is None:
        out = json.dumps(new, ensure_ascii=False)
        return out, [-1] * len(out)
    parts = ['"']
    where = [0]
    for k, ch in enumerate(new):
        j = origin[k]
        if j >= 0:
            a, b = spans[j]
            parts.append(literal[a:b])
            where.extend(range(a, b))
        else:
            escaped = json.dumps(ch, ensure_ascii=False)[1:-1]
            parts.append(escaped)
            where.extend([-1] * len(escaped))
    parts.append('"')
    where.append(len(literal) - 1)
    return "".join(parts), where

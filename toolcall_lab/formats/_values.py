"""Values as the wire gives them, made into the strings a response holds: text pieces joined (split
surrogate pairs joined, values of the wrong type kept as compact JSON with a finding), argument
objects shown as compact JSON. One place, so every format and path treats them alike."""

from __future__ import annotations

import json
import re
from typing import Any

from toolcall_lab.formats._findings import finding
from toolcall_lab.messages import Finding

_LONE = re.compile("[\ud800-\udfff]")


def fix_surrogates(text: str) -> tuple[str, bool, bool]:
    """Join surrogate pairs that arrived split over two chunks; report lone surrogates.

    Returns (text, joined, lone). Text without surrogates is returned as is (the common case).
    """
    if text.isascii():
        return text, False, False
    try:
        text.encode("utf-8")
        return text, False, False
    except UnicodeEncodeError:
        pass
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return fixed, fixed != text, _LONE.search(fixed) is not None


def join_text(pieces: list[str], findings: list[Finding], what: str) -> str | None:
    """Join text deltas (content, reasoning), joining split surrogate pairs; None when empty."""
    if not pieces:
        return None
    text = "".join(pieces)
    if not text:
        return None
    text, joined, lone = fix_surrogates(text)
    if joined:
        findings.append(
            finding("split_surrogate_pair", f"{what}: a surrogate pair split across chunks was joined")
        )
    if lone:
        findings.append(finding("lone_surrogate", f"{what}: holds a lone surrogate; kept as is"))
    return text


def compact_json(value: Any) -> str:
    """Serialise an argument object the way it is shown for object-valued inputs (no spaces).

    Total: a value too deeply nested to serialise gives a text that is not JSON (so the call is
    reported as having invalid arguments), never an exception."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (RecursionError, ValueError, TypeError) as exc:
        return f"<arguments that cannot be shown as JSON: {type(exc).__name__}>"

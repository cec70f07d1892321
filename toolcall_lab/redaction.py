"""Credentials out of traces: strip them wherever they occur, mark what was removed, warn about the rest.

Two kinds of secret are recognised:

- a value under a credential-bearing key (``Authorization``, ``Cookie``, ``api_key``, ``x-api-key``,
  ``secret``, ``password``, ``access_token``...), when the value is a string or number: a header, a
  setting, an argument (also inside a tool call's raw argument string). A plain ``token`` key is not
  one: log-probabilities name their tokens that way.
  A key whose value is an object is not a secret by its name: a JSON-schema property named
  ``api_key`` (``{"type": "string"}``) describes a parameter, it holds none;
- a key-shaped value anywhere in text: ``sk-...``, ``sk-ant-...``, ``AIza...``, ``Bearer ...``,
  ``ghp_...`` / ``github_pat_...``, ``xox?-...``, ``AKIA...``, ``hf_...``, Langfuse ``pk-lf-`` /
  ``sk-lf-`` keys, JWTs. Inside a string (a message, a tool result, a tool call's raw argument
  string) only the key itself is replaced; the rest of the text stays byte for byte.

Each removal leaves ``[REDACTED: what]`` in place and a line in the trace's
``metadata.redactions`` (JSON path and what), so a reader knows something was there. A secret split
over several streamed chunks is found in the joined text (`redact_stream`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

SECRET_KEYS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "api-key",
        "api_key",
        "apikey",
        "x-api-key",
        "openai-api-key",
        "openai_api_key",
        "anthropic-api-key",
        "anthropic_api_key",
        "access_token",
        "refresh_token",
        "client_secret",
        "secret",
        "secret_key",
        "password",
        "auth_token",
        "x-goog-api-key",
    }
)
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an Anthropic key", re.compile(r"sk-ant-[A-Za-z0-9_-]{16,}")),
    ("a Langfuse key", re.compile(r"(?:sk|pk)-lf-[A-Za-z0-9-]{16,}")),
    ("an OpenAI-style key", re.compile(r"sk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{16,}")),
    ("a Google API key", re.compile(r"AIza[0-9A-Za-z_-]{30,}")),
    ("a bearer token", re.compile(r"Bearer\s+[A-Za-z0-9._~+/=-]{12,}")),
    ("a GitHub token", re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("a Slack token", re.compile(r"xox[baprs]-[A-Za-z0-9-]{10,}")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("a JWT", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
)
_MASKED = re.compile(r"^[*xX•.\s-]*$|^<[^>]*>$|^\$\{?[A-Z_][A-Z0-9_]*\}?$|^\[REDACTED: [^\]]*\]$")
"""Values that hide a secret already (``*****``, ``<YOUR_KEY>``, ``$OPENAI_API_KEY``, our own mark)."""
MARK = "[REDACTED: {what}]"


def _secret_key(key: Any, value: Any) -> bool:
    if str(key).lower() not in SECRET_KEYS:
        return False
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, str) and bool(value.strip()) and not _MASKED.match(value.strip())


def scrub_text(text: str) -> tuple[str, list[str]]:
    """`text` with key-shaped values replaced by marks, and what was removed."""
    found: list[str] = []
    for what, pattern in _PATTERNS:
        if pattern.search(text):
            text = pattern.sub(MARK.format(what=what), text)
            found.append(what)
    return text, found


def redact(value: Any, path: str = "") -> tuple[Any, list[str]]:
    """A copy of `value` with credentials replaced by marks, and ``path: what`` for each removal."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        notes: list[str] = []
        for k, v in value.items():
            p = f"{path}.{k}" if path else str(k)
            if _secret_key(k, v):
                out[k] = MARK.format(what=f"the value of {k!r}")
                notes.append(f"{p}: the value of {k!r}")
                continue
            out[k], more = redact(v, p)
            notes += more
        return out, notes
    if isinstance(value, list):
        items, notes = [], []
        for i, v in enumerate(value):
            item, more = redact(v, f"{path}[{i}]")
            items.append(item)
            notes += more
        return items, notes
    if isinstance(value, str):
        text, notes = _redact_json_text(value, path)
        text, found = scrub_text(text)
        return text, notes + [f"{path}: {what}" for what in found]
    return value, []


def _redact_json_text(text: str, path: str) -> tuple[str, list[str]]:
    """A string holding a JSON object (a tool call's raw arguments): secret-named values replaced in
    place, the rest of the string unchanged."""
    if not text.lstrip().startswith("{"):
        return text, []
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text, []
    notes = []
    for p, key, v in _walk(doc):
        if key is not None and _secret_key(key, v):
            literal = re.escape(json.dumps(key)) + r"\s*:\s*" + re.escape(json.dumps(v, ensure_ascii=False))
            mark = json.dumps(key) + ": " + json.dumps(MARK.format(what=f"the value of {key!r}"))
            text, n = re.subn(literal, mark.replace("\\", "\\\\"), text)
            if n == 0:  # the value is escaped differently in the raw string: replace the value alone
                text = text.replace(str(v), MARK.format(what=f"the value of {key!r}"))
            notes.append(f"{path} (JSON {p}): the value of {key!r}")
    return text, notes


def redact_stream(payloads: list[dict[str, Any]], path: str) -> list[str]:
    """Credentials split over several streamed chunks (in place, on chat-completion chunk payloads).

    Each text a stream builds up (a choice's content or reasoning, a call's arguments) is joined; if
    the whole holds a credential, its cleaned text goes into the first fragment and the others become
    empty strings, so no chunk keeps a piece of the secret and the stream still parses the same.
    """
    pieces: dict[tuple[Any, ...], list[tuple[dict[str, Any], str]]] = {}
    for payload in payloads:
        for choice in payload.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            ci = choice.get("index", 0)
            delta = choice.get("delta") or {}
            for name in ("content", "reasoning_content", "reasoning"):
                if isinstance(delta.get(name), str):
                    pieces.setdefault((ci, name), []).append((delta, name))
            for pos, call in enumerate(delta.get("tool_calls") or []):
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    key = (ci, "arguments", call.get("index", pos))
                    pieces.setdefault(key, []).append((fn, "arguments"))
    notes = []
    for key, parts in pieces.items():
        if len(parts) < 2:
            continue
        joined = "".join(holder[name] for holder, name in parts)
        cleaned, json_notes = _redact_json_text(joined, "") if key[1] == "arguments" else (joined, [])
        cleaned, found = scrub_text(cleaned)
        if cleaned == joined:
            continue
        parts[0][0][parts[0][1]] = cleaned
        for holder, name in parts[1:]:
            holder[name] = ""
        what = ", ".join([*found, *(n.split(": ", 1)[-1] for n in json_notes)])
        notes.append(
            f"{path}: {what} in the {key[1]} of choice {key[0]}, split over {len(parts)} chunks "
            "(their text now sits in the first)"
        )
    return notes


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, key, value) for every entry of nested dicts and lists (key None for list items)."""
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{path}.{k}" if path else str(k)
            yield p, k, v
            yield from _walk(v, p)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            p = f"{path}[{i}]"
            yield p, None, v
            yield from _walk(v, p)


def secret_warnings(value: Any, path: str = "") -> list[str]:
    """Places that look like credentials (what `redact` would remove), for ``validate``."""
    out: list[str] = []
    for p, key, v in _walk(value, path):
        if key is not None and _secret_key(key, v):
            out.append(f"{p}: a {key!r} value (credentials must not be stored)")
        elif isinstance(v, str):
            if _redact_json_text(v, p)[1]:
                out.append(f"{p}: a credential-named value inside a JSON string")
            for what, pattern in _PATTERNS:
                m = pattern.search(v)
                if m:
                    out.append(f"{p}: looks like {what} ({m.group(0)[:8]}…)")
                    break
    return out

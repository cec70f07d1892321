"""Credentials out of traces: strip them wherever they occur, mark what was removed, warn about the rest.

Two kinds of secret are recognised:

- a value under a credential-bearing key (``Authorization``, ``Cookie``, ``api_key``, ``x-api-key``,
  ``secret``, ``password``, ``access_token``...), when the value is a string or number: a header, a
  setting, an argument (also inside a tool call's raw argument string). A plain ``token`` key is not
  one: log-probabilities name their tokens that way.
  A key whose value is an object is not a secret by its name: a JSON-schema property named
  ``api_key`` (``{"type": "string"}``) describes a parameter, it holds none;
- a key-shaped value anywhere in text: ``sk-...``, ``sk-ant-...``, ``AIza...``, ``Bearer ...``,
  ``ghp_...`` / ``github_pat_...`` (fine-grained), ``xox?-...``, ``AKIA...``, ``hf_...``, Langfuse
  ``pk-lf-`` / ``sk-lf-`` keys, Stripe-style ``sk_live_`` / ``rk_test_`` keys, Google OAuth
  ``ya29.`` tokens, GitLab ``glpat-``, npm ``npm_``, Groq ``gsk_`` and SendGrid ``SG.`` keys, JWTs,
  PEM private key blocks (``-----BEGIN ... PRIVATE KEY-----`` to its end), and in header lines a
  text holds, ``Authorization: Basic ...`` credentials and ``Cookie:`` / ``Set-Cookie:`` values;
- the password of a URL (``postgres://admin:<password>@host``; the rest of the URL stays);
- the value of an assignment in free text whose name is credential-like (``OPENAI_API_KEY=...``,
  ``password=...``, ``token: ...``, ``aws_secret_access_key = ...``, ``"client_secret": "..."``):
  ``.env`` files a tool printed, configuration shown in a result. A name is credential-like when it
  ends in ``api_key``, ``secret``, ``secret_key``, ``access_key``, ``password``, ``passwd``,
  ``token``, ``private_key``, ``credentials``...; the value must be a literal (not
  ``os.environ[...]``, a call or a placeholder like ``<your key>``, ``$VAR``, ``none``), and
  outside ``NAME=value`` lines in capitals it must look like a secret (letters with digits or
  symbols, or 20 characters and more), so ``max_tokens: 1024`` or "the password must be long"
  stay as they are.

Inside a string (a message, a tool result, a tool call's raw argument string) only the secret
itself is replaced; the rest of the text stays byte for byte.

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
    ("a Stripe-style key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("an npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("a Groq key", re.compile(r"\bgsk_[A-Za-z0-9]{40,}")),
    ("a SendGrid key", re.compile(r"\bSG\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}")),
    (
        "basic credentials",
        re.compile(r"(?i)(?:(?<=authorization: )|(?<=authorization:))basic\s+[A-Za-z0-9+/]{8,}={0,2}"),
    ),
    ("a cookie", re.compile(r"(?im)(?:(?<=^cookie: )|(?<=^set-cookie: ))(?!\[REDACTED)\S[^\n]*")),
    ("a Google OAuth token", re.compile(r"\bya29\.[A-Za-z0-9_-]{20,}")),
    (
        "a private key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"
        ),
    ),
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


_URL_PASSWORD = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@'\"<>]+:)([^\s/@'\"<>]+)(@)")
_CREDENTIAL_NAME = (
    r"(?:[A-Za-z0-9]+[_.-])*?(?:api[_-]?key|apikey|secret(?:[_-]?(?:access[_-]?)?key)?|access[_-]?key|"
    r"client[_-]?secret|password|passwd|passphrase|pwd|token|auth[_-]?token|access[_-]?token|"
    r"refresh[_-]?token|session[_-]?token|private[_-]?key|credentials?)"
)
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<q>[\"']?)(?P<name>" + _CREDENTIAL_NAME + r")(?P=q)(?P<sep>\s*[=:]\s*)"
    r"(?:(?P<quote>[\"'])(?P<quoted>[^\"'\n]*)(?P=quote)|(?P<bare>[^\s'\"`,;()\[\]{}<>]+)(?=$|[\s,;'\"]))",
    re.IGNORECASE,
)
_NAME_ONLY = re.compile(_CREDENTIAL_NAME, re.IGNORECASE)
"""A value that is itself a credential's name (``secret: aws_secret_access_key = ...``): not a value."""
_NOT_SECRETS = frozenset(
    {"none", "null", "nil", "true", "false", "undefined", "required", "optional", "string", "str"}
    | {"int", "bool", "object", "yes", "no", "secret", "password", "token", "redacted", "hidden", "masked"}
)


def _secret_value(name: str, sep: str, value: str) -> bool:
    """Whether an assignment's value is a credential (see the module notes)."""
    v = value.strip()
    if not v or _MASKED.match(v) or v.lower() in _NOT_SECRETS or v[0] in "$%" or v.startswith("{{"):
        return False
    if "=" in sep and name.isupper() and len(v) >= 3:  # NAME=value: an environment line
        return True
    if re.search(r"\s", v) or len(v) < 6:
        return False
    has_letter = bool(re.search(r"[A-Za-z]", v))
    return len(v) >= 20 or (has_letter and bool(re.search(r"[^A-Za-z]", v)))


def _assignments(text: str) -> tuple[str, list[str]]:
    found: list[str] = []
    out: list[str] = []
    pos = 0
    while (m := _ASSIGNMENT.search(text, pos)) is not None:
        quoted = m.group("quoted") is not None
        value = m.group("quoted") if quoted else m.group("bare")
        name = m.group("name")
        if value is None or not _secret_value(name, m.group("sep"), value) or _NAME_ONLY.fullmatch(value):
            out.append(text[pos : m.end("sep")])  # look for another assignment inside the value
            pos = m.end("sep")
            continue
        start, end = m.span("quoted") if quoted else m.span("bare")
        out.append(text[pos:start] + MARK.format(what=f"the value of {name}"))
        found.append(f"the value of {name}")
        pos = end
    out.append(text[pos:])
    return "".join(out), found


def _url_passwords(text: str) -> tuple[str, list[str]]:
    found: list[str] = []

    def mark(m: re.Match[str]) -> str:
        if _MASKED.match(m.group(2)):
            return m.group(0)
        found.append("a password in a URL")
        return m.group(1) + MARK.format(what="a password in a URL") + m.group(3)

    return _URL_PASSWORD.sub(mark, text), found


def scrub_text(text: str) -> tuple[str, list[str]]:
    """`text` with key-shaped values, URL passwords and credential assignments replaced by marks,
    and what was removed."""
    found: list[str] = []
    for what, pattern in _PATTERNS:
        if pattern.search(text):
            text = pattern.sub(MARK.format(what=what), text)
            found.append(what)
    for rule in (_url_passwords, _assignments):
        text, more = rule(text)
        found += list(dict.fromkeys(more))
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
            else:
                found = [*_url_passwords(v)[1], *_assignments(v)[1]]
                if found:
                    out.append(f"{p}: looks like {found[0]}")
    return out

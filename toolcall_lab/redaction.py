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
- a password or key given on a command line: ``curl -u user:<password>`` (``--user``, wget's
  ``--user=``), ``mysql -p<password>`` / ``-p'<password>'`` (a bare ``-p`` asks for one: nothing to
  remove), ``sshpass -p``, openssl's ``-pass pass:``, and options such as ``--password=``,
  ``--password <value>``, ``--api-key``, ``--token``; a ``$VAR`` or ``<placeholder>`` value stays;
- the value of an assignment in free text whose name is credential-like (``OPENAI_API_KEY=...``,
  ``password=...``, ``token: ...``, ``aws_secret_access_key = ...``, ``"client_secret": "..."``):
  ``.env`` files a tool printed, configuration shown in a result. A name is credential-like when it
  ends in ``api_key``, ``secret``, ``secret_key``, ``access_key``, ``password``, ``passwd``,
  ``token``, ``private_key``, ``credentials``... (an environment name in capitals may glue it on:
  ``PGPASSWORD``); the value must be a literal (not
  ``os.environ[...]``, a call or a placeholder like ``<your key>``, ``$VAR``, ``none``), and
  outside ``NAME=value`` lines in capitals it must look like a secret (letters with digits or
  symbols, or 20 characters and more), so ``max_tokens: 1024`` or "the password must be long"
  stay as they are.

Inside a string (a message, a tool result, a tool call's raw argument string) only the secret
itself is replaced; the rest of the text stays byte for byte.

Each removal leaves ``[REDACTED: what]`` in place and a line in the trace's
``metadata.redactions`` (JSON path and what), so a reader knows something was there. A secret split
over several streamed chunks is found in the joined text and taken out of each chunk in place
(`redact_stream`): the chunks still join to the text the trace stores. Nothing here changes the
value it is given.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from toolcall_lab._json_text import rewrite_literal, tokens

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
    r"(?:(?-i:[A-Z][A-Z0-9]*)(?=(?-i:PASSWORD|PASSWD|SECRET|TOKEN)))?"  # PGPASSWORD, GHTOKEN (env names)
    r"(?:[A-Za-z0-9]+[_.-])*?(?:api[_-]?key|apikey|secret(?:[_-]?(?:access[_-]?)?key)?|access[_-]?key|"
    r"client[_-]?secret|password|passwd|passphrase|pwd|token|auth[_-]?token|access[_-]?token|"
    r"refresh[_-]?token|session[_-]?token|private[_-]?key|credentials?)"
)
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<q>\\?[\"']|)(?P<name>" + _CREDENTIAL_NAME + r")(?P=q)(?P<sep>\s*[=:]\s*)"
    r"(?:(?P<quote>[\"'])(?P<quoted>[^\"'\n\\]*)(?P=quote)|\\(?P<equote>[\"'])(?P<equoted>[^\"'\n\\]*)\\(?P=equote)"
    r"|(?P<bare>[^\s'\"`,;()\[\]{}<>\\]+)(?=$|[\s,;'\"\\]))",
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


Edit = tuple[int, int, str, str]
"""(start, end, replacement, what was removed): one removal in a text."""


def _assignments(text: str) -> list[Edit]:
    edits: list[Edit] = []
    if not _NAME_HINT.search(text):
        return edits
    pos = 0
    while (m := _ASSIGNMENT.search(text, pos)) is not None:
        group = next((g for g in ("quoted", "equoted", "bare") if m.group(g) is not None), None)
        value = m.group(group) if group else None
        name = m.group("name")
        if (
            group is None
            or value is None
            or not _secret_value(name, m.group("sep"), value)
            or _NAME_ONLY.fullmatch(value)
        ):
            pos = m.end("sep")  # look for another assignment inside the value
            continue
        what = f"the value of {name}"
        start, end = m.span(group)
        edits.append((start, end, MARK.format(what=what), what))
        pos = end
    return edits


def _url_passwords(text: str) -> list[Edit]:
    what = "a password in a URL"
    if "://" not in text:
        return []
    return [
        (m.start(2), m.end(2), MARK.format(what=what), what)
        for m in _URL_PASSWORD.finditer(text)
        if not _MASKED.match(m.group(2))
    ]


_QUOTED = r"""(?:"(?P<{0}d>[^"\n]+)"|'(?P<{0}s>[^'\n]+)'|(?P<{0}b>[^\s"'`;|&)]+))"""
"""A command-line value: double-quoted, single-quoted or bare (group names prefixed by {0})."""
_COMMAND_SECRETS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (  # curl -u user:pass, --user=user:pass, --proxy-user (wget takes --user= and --password=)
        "a password in a command's user:password",
        re.compile(
            r"\b(?:curl|wget|http|httpie)\b[^\n|;&]*?\s(?:-u\s*|--user[=\s]\s*|--proxy-user[=\s]\s*|-U\s*)"
            r"""(?:"[^":\n]*:(?P<vd>[^"\n]+)"|'[^':\n]*:(?P<vs>[^'\n]+)'|[^\s:"']+:(?P<vb>[^\s"'`;|&)]+))"""
        ),
    ),
    (  # mysql -pPASS, -p'PASS' (a bare -p asks for it: no value)
        "a password in a command's -p",
        re.compile(
            r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb|mariadb-dump)\b"
            r"[^\n|;&]*?\s-p" + _QUOTED.format("v")
        ),
    ),
    (  # sshpass -p PASS, openssl -pass pass:PASS / -passin / -passout
        "a password in a command's -p",
        re.compile(r"(?:\bsshpass\s+-p\s*|\s-pass(?:in|out)?\s+pass:)" + _QUOTED.format("v")),
    ),
    (  # --password=PASS / --password PASS, and other credential flags
        "a credential in a command's option",
        re.compile(
            r"(?<![\w-])--(?:password|passwd|db-password|http-password|proxy-password|api-key|api_key|"
            r"apikey|token|auth-token|access-token|client-secret|secret-key)(?:=|(?P<space>\s+))(?!-)"
            + _QUOTED.format("v")
        ),
    ),
)


def _command_options(text: str) -> list[Edit]:
    """Passwords and keys given on a command line (see `_COMMAND_SECRETS`): only the value goes."""
    if "-" not in text:
        return []
    edits: list[Edit] = []
    for what, pattern in _COMMAND_SECRETS:
        for m in pattern.finditer(text):
            group = next(g for g in ("vd", "vs", "vb") if m.group(g) is not None)
            value = m.group(group).strip()
            if not value or _MASKED.match(value) or value[0] in "$%<{[" or value.lower() in _NOT_SECRETS:
                continue
            if "space" in pattern.groupindex and m.group("space") and not _secret_value("", ":", value):
                continue  # `--token flag` in prose: after a space, only a value shaped like a secret
            edits.append((m.start(group), m.end(group), MARK.format(what=what), what))
    edits.sort()
    kept: list[Edit] = []
    for e in edits:  # (two rules on one value: the first)
        if not kept or e[0] >= kept[-1][1]:
            kept.append(e)
    return kept


def _pattern_rule(what: str, pattern: re.Pattern[str]) -> Callable[[str], list[Edit]]:
    def rule(text: str) -> list[Edit]:
        return [(m.start(), m.end(), MARK.format(what=what), what) for m in pattern.finditer(text)]

    return rule


_ANCHORS = re.compile(
    r"sk-|pk-lf-|AIza|Bearer|gh[pousr]_|github_pat_|xox[baprs]-|AKIA|ASIA|_live_|_test_|glpat-|npm_|gsk_|"
    r"SG\.|(?i:authorization|cookie)|ya29\.|PRIVATE KEY|hf_|eyJ"
)
"""What every match of `_PATTERNS` holds: a text without any of these holds none (a quick first look)."""
_NAME_HINT = re.compile(r"key|secret|pass|pwd|token|credential", re.IGNORECASE)
"""What every credential name holds (a quick first look for `_assignments`)."""
_KEY_SHAPES = tuple(_pattern_rule(what, pattern) for what, pattern in _PATTERNS)


def _apply(text: str, origin: Sequence[int], edits: list[Edit]) -> tuple[str, list[int]]:
    """`text` with `edits` (in order, not overlapping) made, and where each character came from."""
    parts: list[str] = []
    where: list[int] = []
    pos = 0
    for start, end, replacement, _ in edits:
        parts += [text[pos:start], replacement]
        where += [*origin[pos:start], *[-1] * len(replacement)]
        pos = end
    parts.append(text[pos:])
    where += origin[pos:]
    return "".join(parts), where


def _scrub(text: str) -> tuple[str, Sequence[int], list[str]]:
    """`scrub_text`, also giving for each character of the result its index in `text` (-1 for the
    characters of a mark)."""
    origin: Sequence[int] = range(len(text))
    found: list[str] = []
    shapes = _KEY_SHAPES if _ANCHORS.search(text) else ()
    rules = (*shapes, _url_passwords, _command_options, _assignments)
    for rule in rules:  # each on the text the ones before it left
        edits = rule(text)
        if edits:
            text, origin = _apply(text, origin, edits)
            found += list(dict.fromkeys(e[3] for e in edits))
    return text, origin, found


def scrub_text(text: str) -> tuple[str, list[str]]:
    """`text` with key-shaped values, URL passwords and credential assignments replaced by marks,
    and what was removed."""
    cleaned, _, found = _scrub(text)
    return cleaned, found


def _clean(text: str, path: str) -> tuple[str, Sequence[int], list[str]]:
    """`text` with every credential replaced by a mark, where each character of the result came from
    (its index in `text`, -1 for a mark's), and ``path: what`` for each removal.

    A text holding a JSON document (a tool call's raw arguments, a result a tool printed as JSON) is
    cleaned value by value, each string decoded first, so a secret is found whatever escapes write
    it and its mark never takes the backslash of the ``\\"`` after it: the text stays valid JSON and
    only the secrets change, every other byte (escapes included) as it was.
    """
    head = text.lstrip()[:1]
    if head in ("{", "[", '"'):
        try:
            json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            pass
        else:
            return _clean_json(text, path)
    cleaned, origin, found = _scrub(text)
    return cleaned, origin, [f"{path}: {what}" for what in found]


def _clean_json(text: str, path: str) -> tuple[str, Sequence[int], list[str]]:
    edits: list[Edit] = []
    notes: list[str] = []
    origins: dict[int, list[int]] = {}
    for token in tokens(text):
        literal = text[token.start : token.end]
        inner = f"JSON {token.path or 'value'}"
        at = f"{path} ({inner})" if path else f"({inner})"
        value = json.loads(literal)
        if token.key is not None and _secret_key(token.key, value):
            what = f"the value of {token.key!r}"
            mark = json.dumps(MARK.format(what=what), ensure_ascii=False)
            edits.append((token.start, token.end, mark, what))
            notes.append(f"{at}: {what}")
            continue
        if not token.string:
            continue
        cleaned, origin, more = _clean(value, at)
        if cleaned == value:
            continue
        rewritten, where = rewrite_literal(literal, cleaned, origin)
        edits.append((token.start, token.end, rewritten, ""))
        origins[token.start] = [token.start + w if w >= 0 else -1 for w in where]
        notes += more
    if not edits:
        return text, range(len(text)), []
    parts: list[str] = []
    origin_out: list[int] = []
    pos = 0
    for start, end, replacement, _ in edits:
        parts += [text[pos:start], replacement]
        origin_out += [*range(pos, start), *origins.get(start, [-1] * len(replacement))]
        pos = end
    parts.append(text[pos:])
    origin_out += range(pos, len(text))
    return "".join(parts), origin_out, notes


def redact(value: Any, path: str = "", keep: Collection[str] = ()) -> tuple[Any, list[str]]:
    """A copy of `value` with credentials replaced by marks, and ``path: what`` for each removal.

    Strings at the JSON paths in `keep` are left as they are (the pieces of a streamed text
    `redact_stream` has cleaned as a whole). `value` itself is never changed."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        notes: list[str] = []
        for k, v in value.items():
            p = f"{path}.{k}" if path else str(k)
            if _secret_key(k, v) and p not in keep:
                out[k] = MARK.format(what=f"the value of {k!r}")
                notes.append(f"{p}: the value of {k!r}")
                continue
            out[k], more = redact(v, p, keep)
            notes += more
        return out, notes
    if isinstance(value, list):
        items, notes = [], []
        for i, v in enumerate(value):
            item, more = redact(v, f"{path}[{i}]", keep)
            items.append(item)
            notes += more
        return items, notes
    if isinstance(value, str) and path not in keep:
        text, _, notes = _clean(value, path)
        return text, notes
    return value, []


Piece = tuple[int, tuple[Any, ...]]
"""Where one streamed fragment of text lies: the payload's index and the keys leading to it."""


def _fragments(payloads: Sequence[Any]) -> dict[tuple[Any, ...], list[Piece]]:
    """The fragments of every text a stream builds up, by text: a chat choice's content or
    reasoning and each call's arguments; an Anthropic content block's text, thinking or tool input
    (``partial_json``); a Responses output item's text or function-call arguments."""
    out: dict[tuple[Any, ...], list[Piece]] = {}
    for j, payload in enumerate(payloads):
        if not isinstance(payload, dict):
            continue
        kind = payload.get("type")
        delta = payload.get("delta")
        if kind == "content_block_delta" and isinstance(delta, dict):  # Anthropic
            for name in ("text", "thinking", "partial_json"):
                if isinstance(delta.get(name), str):
                    out.setdefault(("block", payload.get("index"), name), []).append((j, ("delta", name)))
            continue
        if isinstance(kind, str) and kind.startswith("response.") and kind.endswith(".delta"):
            if isinstance(delta, str):  # Responses: output_text / function_call_arguments / reasoning
                where = (payload.get("output_index"), payload.get("content_index"))
                out.setdefault(("item", *where, kind), []).append((j, ("delta",)))
            continue
        for c, choice in enumerate(payload.get("choices") or []):
            if not isinstance(choice, dict) or not isinstance(choice.get("delta"), dict):
                continue
            ci = choice.get("index", 0)
            d = choice["delta"]
            for name in ("content", "reasoning_content", "reasoning"):
                if isinstance(d.get(name), str):
                    out.setdefault((ci, name), []).append((j, ("choices", c, "delta", name)))
            calls = d.get("tool_calls")
            for pos, call in enumerate(calls if isinstance(calls, list) else []):
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    key = (ci, "arguments", call.get("index", pos))
                    place = ("choices", c, "delta", "tool_calls", pos, "function", "arguments")
                    out.setdefault(key, []).append((j, place))
    return out


def _get(payload: Any, keys: tuple[Any, ...]) -> Any:
    for k in keys:
        payload = payload[k]
    return payload


def _set(payload: Any, keys: tuple[Any, ...], value: str) -> None:
    _get(payload, keys[:-1])[keys[-1]] = value


def _json_path(keys: tuple[Any, ...]) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys)


def spread(parts: Sequence[str], cleaned: str, origin: Sequence[int]) -> list[str]:
    """`cleaned`, made from the join of `parts` (``origin[k]``: the index in the join of
    ``cleaned[k]``, -1 for a character of a mark), cut back into one piece per part: every kept
    character stays in the part it came from, a mark goes where the text it replaces began. So the
    pieces join to `cleaned`, and a stream's text is complete at the same piece as before."""
    owner = [k for k, part in enumerate(parts) for _ in part]
    last = max(len(parts) - 1, 0)
    out: list[list[str]] = [[] for _ in parts]
    after = 0  # where in the join the text not yet placed begins
    for ch, o in zip(cleaned, origin, strict=True):
        if o >= 0:
            k, after = owner[o], o + 1
        else:
            k = owner[after] if after < len(owner) else last
        out[k].append(ch)
    return ["".join(x) for x in out]


def redact_stream(
    payloads: Sequence[dict[str, Any]], path: str
) -> tuple[list[dict[str, Any]], list[str], set[str]]:
    """Credentials split over several streamed chunks: the payloads with them removed (copies
    where something changed; `payloads` is never changed), ``path: what`` notes, and the JSON paths
    of every fragment of a text built up over several chunks (`redact` leaves those as they are).

    Each text a stream builds up (see `_fragments`) is cleaned as a whole and cut back into its
    fragments (`spread`): each chunk keeps its own characters, a mark stands in the chunk where its
    secret began and the rest of the secret leaves the chunks after it. So the chunks still join to
    the text the trace stores (cleaned the same way), every chunk keeps its offset, and a call's
    arguments become complete at the same chunk as before (when `eager` would start it).
    """
    out = list(payloads)
    copied: set[int] = set()
    notes: list[str] = []
    keep: set[str] = set()
    for key, parts in _fragments(payloads).items():
        if len(parts) < 2:
            continue
        keep.update(f"{path}[{j}].payload{_json_path(keys)}" for j, keys in parts)
        texts = [_get(payloads[j], keys) for j, keys in parts]
        joined = "".join(texts)
        cleaned, origin, found = _clean(joined, "")
        if cleaned == joined:
            continue
        for (j, keys), piece in zip(parts, spread(texts, cleaned, origin), strict=True):
            if j not in copied:
                out[j] = copy.deepcopy(out[j])
                copied.add(j)
            _set(out[j], keys, piece)
        what = ", ".join(dict.fromkeys(n.rsplit(": ", 1)[-1] for n in found))
        text = f"the {key[1]} of choice {key[0]}" if isinstance(key[0], int) else f"a streamed {key[-1]}"
        notes.append(
            f"{path}: {what} in {text}, split over {len(parts)} chunks (each chunk keeps its own "
            "characters; the mark stands where the secret began)"
        )
    return out, notes, keep


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
    """Places that look like credentials (what `redact` would remove), for ``validate``: one line per
    field naming every kind of secret found in it, never the secret itself (not even its start)."""
    out: list[str] = []
    for p, key, v in _walk(value, path):
        if key is not None and _secret_key(key, v):
            out.append(f"{p}: a {key!r} value (credentials must not be stored)")
        elif isinstance(v, str):
            notes = _clean(v, p)[2]
            kinds = list(dict.fromkeys(_kind_words(n.rsplit(": ", 1)[-1]) for n in notes))
            if kinds:
                listed = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} and {kinds[-1]}"
                out.append(f"{p}: looks like {listed}")
    return out


def _kind_words(what: str) -> str:
    """What a removal note names, as a kind of secret (a credential-named JSON value says so)."""
    if what.startswith("the value of '"):
        return f"a credential-named value ({what.removeprefix('the value of ')}) inside a JSON string"
    return what

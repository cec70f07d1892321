"""Traces on disk: stable JSON (sorted keys, indent), atomic saves, clear errors, secret checks."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from toolcall_lab.exceptions import TraceError, TraceFormatError
from toolcall_lab.trace import Trace

SECRET_KEYS = frozenset(
    {
        "authorization",
        "api-key",
        "api_key",
        "x-api-key",
        "cookie",
        "set-cookie",
        "proxy-authorization",
        "openai-api-key",
        "anthropic-api-key",
    }
)
_SECRET_VALUE = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|sk-ant-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}"
    r"|Bearer\s+[A-Za-z0-9._~+/=-]{12,}|xox[baprs]-[A-Za-z0-9-]{10,})"
)


_UMASK = os.umask(0)
os.umask(_UMASK)


def dumps(trace: Trace) -> str:
    """The canonical text of a trace: sorted keys, 1-space indent, trailing newline."""
    return json.dumps(trace.to_dict(), sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def save(trace: Trace, path: str | Path) -> Path:
    """Write atomically (temp file in the same folder + rename): a crash never leaves half a file."""
    target = Path(path)
    text = dumps(trace)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load(path: str | Path) -> Trace:
    """Read and check a trace file; errors name the file and the JSON path of the bad field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{p}: cannot read: {exc}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = " (file looks truncated)" if exc.pos >= len(text.rstrip()) else ""
        raise TraceFormatError(
            f"not valid JSON{truncated}: {exc.msg} at line {exc.lineno} column {exc.colno}", source=str(p)
        ) from None
    return Trace.from_dict(doc, source=str(p))


def iter_trace_paths(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Files named directly, and ``*.json`` files found (sorted) in folders."""
    for item in paths:
        p = Path(item)
        if p.is_dir():
            yield from sorted(q for q in p.rglob("*.json") if not q.name.startswith("."))
        else:
            yield p


def scrub(value: Any) -> Any:
    """A copy without credential-bearing keys (Authorization, api-key, cookies) at any depth."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if str(k).lower() not in SECRET_KEYS}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def secret_warnings(value: Any, path: str = "") -> list[str]:
    """Places that look like credentials: secret-named keys, or values shaped like API keys/tokens."""
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{path}.{k}" if path else str(k)
            if str(k).lower() in SECRET_KEYS:
                out.append(f"{p}: a '{k}' field (credentials must not be stored)")
            out.extend(secret_warnings(v, p))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(secret_warnings(v, f"{path}[{i}]"))
    elif isinstance(value, str) and (m := _SECRET_VALUE.search(value)):
        out.append(f"{path}: looks like a credential ({m.group(0)[:8]}…)")
    return out


def validate(path: str | Path) -> tuple[Trace, list[str]]:
    """Load a trace and list warnings (possible secrets, protocol breaks); raises on unusable files."""
    from toolcall_lab.protocol import validate_messages

    trace = load(path)
    doc = trace.to_dict()
    warnings = secret_warnings(doc)
    if trace.rounds:
        last = trace.rounds[-1]
        messages = [*last.request_messages, last.assistant_message]
        warnings += [
            f"rounds[{last.round_index}].request.messages: {v}"
            for v in validate_messages(messages)
            if v.kind != "unanswered_call"
        ]
    return trace, warnings

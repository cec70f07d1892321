"""Values as the wire gives them, made into the strings a response holds: text pieces joined (split
surrogate pairs joined, values of the wrong type kept as compact JSON with a finding), argument
objects shown as compact JSON. One place, so every format and path treats them alike."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
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


def join_text(pieces: list[Any], findings: list[Finding], what: str) -> str | None:
    """Join text pieces (content, reasoning), joining split surrogate pairs; None when empty.

    The one place where text of every format and path is joined: a piece that is not a string (a
    number, an object: a server bug) is kept as compact JSON with one ``wrong_type`` finding, never
    dropped and never a crash; ``null`` pieces add nothing."""
    if not pieces:
        return None
    try:
        text = "".join(pieces)
    except TypeError:
        text = _join_mixed(pieces, findings, what)
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


def _join_mixed(pieces: list[Any], findings: list[Finding], what: str) -> str:
    out: list[str] = []
    odd = 0
    first: Any = None
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
        elif piece is not None:
            if not odd:
                first = piece
            odd += 1
            out.append(compact_json(piece))
    if not odd:  # only nulls: nothing to say
        return "".join(out)
    findings.append(
        finding(
            "wrong_type",
            f"{what}: {odd} piece(s) of text that are not strings (the first {a_json_type(first)}: "
            f"{compact_json(first)[:60]}); kept as compact JSON in the text",
        )
    )
    return "".join(out)


def join_blocks(pieces: list[Any], keep: int) -> int:
    """Join the text pieces after the first `keep` into blocks, in place (memory compaction of a
    long stream: each piece is copied once), and return how many leading entries are joined blocks
    now. A piece that is not a string stays as it is, between blocks, for `join_text` to report."""
    tail = pieces[keep:]
    try:
        pieces[keep:] = ["".join(tail)]
    except TypeError:
        out: list[Any] = []
        run: list[str] = []
        for piece in tail:
            if isinstance(piece, str):
                run.append(piece)
            else:
                if run:
                    out.append("".join(run))
                    run = []
                out.append(piece)
        if run:
            out.append("".join(run))
        pieces[keep:] = out
    return len(pieces)


def a_json_type(value: Any) -> str:
    """The JSON type of a decoded value, with its article (for messages): "an object", "a number"..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def as_text(value: Any) -> str:
    """A value that should have been a string, as text: itself, or its compact JSON."""
    return value if isinstance(value, str) else compact_json(value)


def content_parts(parts: list[Any]) -> tuple[list[Any], list[Any]]:
    """The (text, reasoning) pieces of a chat ``content`` sent as a list of typed parts: ``text``
    parts are text, ``thinking`` parts (Mistral's reasoning models: ``{"type": "thinking",
    "thinking": [{"type": "text", "text": ...}]}``) reasoning; any other part is kept whole, as a
    text piece that is not a string (`join_text` shows it as JSON and reports it)."""
    text: list[Any] = []
    thought: list[Any] = []
    for part in parts:
        if isinstance(part, dict):
            kind = part.get("type")
            inner = part.get("thinking")
            if kind in ("text", "output_text") and isinstance(part.get("text"), str):
                text.append(part["text"])
                continue
            if kind == "thinking" and isinstance(inner, str):
                thought.append(inner)
                continue
            if (
                kind == "thinking"
                and isinstance(inner, list)
                and all(isinstance(x, dict) and isinstance(x.get("text"), str) for x in inner)
            ):
                thought.extend(x["text"] for x in inner)
                continue
        text.append(part)
    return text, thought


def as_key(value: Any) -> Any:
    """A type name or index as a lookup key: None, a string or an integer as is; any other value
    (an array, an object: unhashable) as its JSON text, so it is reported as unknown, never a crash."""
    return value if value is None or type(value) is str or type(value) is int else as_text(value)


def as_index(value: Any) -> int | None:
    """An index as the wire gives it: an integer, a decimal string (``"0"``, some servers) or a whole
    number written with a fraction (``0.0``) read as that integer; None for anything else (a bool,
    ``0.5``, other text)."""
    if type(value) is int:
        return value
    if type(value) is str and value.isascii() and value.isdecimal() and len(value) < 10:
        return int(value)
    if type(value) is float and value.is_integer() and 0 <= value < 1e9:
        return int(value)
    return None


def index_gaps(indices: Iterable[int]) -> list[tuple[int, int]]:
    """The numbers from 0 up to the largest of `indices` that are none of them, as inclusive ranges
    (first, last). Work grows with how many indices there are, never with their values: an index is
    a number in the input, and one of 10**12 must cost no more than one of 2."""
    gaps: list[tuple[int, int]] = []
    expected = 0
    for index in sorted(set(indices)):
        if index < 0:
            continue
        if index > expected:
            gaps.append((expected, index - 1))
        expected = index + 1
    return gaps


def describe_gaps(gaps: list[tuple[int, int]], shown: int = 10) -> str:
    """Gap ranges for a message, the first `shown` only:
    ``"1, 3-5 and 2 more range(s) (30 missing indices)"``."""
    parts = [str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}-{b}" for a, b in gaps[:shown]]
    text = ", ".join(parts)
    if len(gaps) > shown:
        text += f" and {len(gaps) - shown} more range(s)"
    count = sum(b - a + 1 for a, b in gaps)
    if count > len(gaps):
        text += f" ({count} missing indices)"
    return text


def compact_json(value: Any) -> str:
    """Serialise an argument object the way it is shown for object-valued inputs (no spaces).

    Total: a value too deeply nested to serialise gives a text that is not JSON (so the call is
    reported as having invalid arguments), never an exception."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (RecursionError, ValueError, TypeError) as exc:
        return f"<arguments that cannot be shown as JSON: {type(exc).__name__}>"


def refusal_note(pieces: list[Any], what: str) -> Finding | None:
    """The ``refusal`` finding quoting a refusal's text (joined pieces), None when there is none."""
    text = "".join(p if isinstance(p, str) else compact_json(p) for p in pieces if p is not None)
    if not text:
        return None
    shown = text if len(text) <= 1000 else text[:1000] + f"... ({len(text)} characters)"
    return finding(
        "refusal", f"{what}the model refused: {json.dumps(shown, ensure_ascii=False)} (not part of content)"
    )


_CALL_KEYS = frozenset(
    {
        "tool_calls",
        "tool_call",
        "function_call",
        "functionCall",
        "function",
        "tool_use",
        "toolUse",
        "arguments",
        "partial_json",
    }
)
_CALL_WORDS = ("tool_call", "function", "arguments", "partial_json", "tool_use", "functionCall")


def may_hold_calls(value: Any, depth: int = 0) -> bool:
    """Might a part of a payload that could not be read (of an unknown shape) hold a tool call's data:
    a key such as ``tool_calls`` / ``functionCall`` / ``arguments`` anywhere in it, or text naming
    them (a delta sent as a JSON string)? Only asked on the path that reports such a part."""
    if isinstance(value, str):
        return any(word in value for word in _CALL_WORDS)
    if depth > 8:
        return False
    if isinstance(value, dict):
        return any(
            key in _CALL_KEYS or may_hold_calls(item, depth + 1) for key, item in list(value.items())[:200]
        )
    if isinstance(value, list):
        return any(may_hold_calls(item, depth + 1) for item in value[:200])
    return False


ANTHROPIC_EVENTS = frozenset(  # the `type`s of Anthropic's Messages stream events
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
    }
)
STARTS = frozenset({"message_start", "response.created"})
"""Event types that start a response of their format (a chat stream has no such event)."""


def wire_format_of(payload: Mapping[str, Any]) -> str | None:
    """The wire format an event plainly belongs to ("openai-chat", "anthropic", "openai-responses"),
    None when it does not say: how a reader tells an event of another format in its stream."""
    if "choices" in payload or str(payload.get("object", "")).startswith("chat.completion"):
        return "openai-chat"
    kind = payload.get("type")
    if type(kind) is str:
        if kind.startswith("response."):
            return "openai-responses"
        if kind in ANTHROPIC_EVENTS:
            return "anthropic"
    return None


def event_type_from_line(event: str) -> bool:
    """Is an SSE ``event:`` name an Anthropic or Responses event type (usable as a payload's missing
    ``type``)? Chat streams have no typed events, so a chat chunk is never given one."""
    return event in ANTHROPIC_EVENTS or (event.startswith("response.") and len(event) < 80)


def unknown_shape(doc: Mapping[str, Any], what: str) -> str:
    """Why `doc` has no known wire format: its keys, and the API it looks like when that is clear."""
    hint = ""
    output = doc.get("output")
    if "stopReason" in doc or (isinstance(output, Mapping) and "message" in output):
        hint = " (it looks like an AWS Bedrock Converse body, a format this parser does not read)"
    elif "bytes" in doc or (isinstance(doc.get("chunk"), Mapping) and "bytes" in doc["chunk"]):
        hint = (
            " (it looks like an AWS Bedrock InvokeModelWithResponseStream event, base64 `bytes` around the "
            "model's own events, a container this parser does not read: decode each `bytes` and save the "
            "events as JSON lines)"
        )
    elif doc.keys() & {"contentBlockDelta", "contentBlockStart", "messageStart", "messageStop"}:
        hint = " (it looks like an AWS Bedrock ConverseStream event, a format this parser does not read)"
    elif "candidates" in doc:
        hint = (
            " (it looks like a Gemini native generateContent / streamGenerateContent body, a format this "
            "parser does not read; Gemini's OpenAI-compatible endpoint is read)"
        )
    elif "message" in doc and "done" in doc:
        hint = (
            " (it looks like an Ollama native /api/chat body or NDJSON line, a format this parser does "
            "not read; Ollama's OpenAI-compatible /v1 endpoint is read)"
        )
    elif doc.keys() & {"event_type", "generation_id"} or as_key(doc.get("type")) in _COHERE_EVENTS:
        hint = " (it looks like a Cohere chat body or stream event, a format this parser does not read)"
    return f"cannot tell the wire format of a {what} with keys {sorted(doc)[:8]}{hint}"


_COHERE_EVENTS = frozenset(("message-start", "content-delta", "tool-call-start", "tool-plan-delta"))


CHAT_METADATA = frozenset(
    {
        "id",
        "object",
        "created",
        "model",
        "system_fingerprint",
        "usage",
        "service_tier",
        "provider",
        "x_groq",
        "prompt_filter_results",
        "obfuscation",
        "timings",
        "citations",
    }
)
"""Keys a chat chunk or body without ``choices`` may hold and still be one (usage, metadata); any
other key beside no choices is a part of an unknown shape, reported."""

"""OpenAI wire details the proxy needs: fast JSON, error bodies, hand-out replies and synthesised SSE."""

from __future__ import annotations

import hashlib
import json
import json.decoder
import json.scanner
import math
import operator
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

MAX_DEPTH_TEXT = "about 1,000 levels"
"""How deep JSON may nest for the proxy to read and write it (orjson reads 1,024 levels, the standard
library's reader and writer stop near the interpreter's recursion limit, 1,000 frames)."""


class TooDeep(ValueError):
    """JSON nested deeper than the proxy can read or write (`MAX_DEPTH_TEXT`): for a request a 400, for an
    upstream answer a 502, never a proxy fault."""

    def __init__(self, what: str = "") -> None:
        super().__init__(f"JSON nested deeper than the proxy can {what or 'read'} ({MAX_DEPTH_TEXT})")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"the number {text[:40]} is too large for a double")
    return value


def _std_loads(data: bytes | str) -> Any:
    """The standard library's reading, for what orjson refuses but JSON allows (a lone surrogate escape
    such as ``\\ud800``); numbers a double cannot hold (``1e400``) are still refused (`loads_lenient`)."""
    try:
        return json.loads(data, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise TooDeep() from None


def loads_lenient(data: bytes | str) -> Any:
    """Any JSON, numbers beyond a double (``1e400``, read as infinity) included: for deciding where a
    request goes when it is forwarded as it came, never for what is written again."""
    try:
        return json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise TooDeep() from None


def _std_dumps(value: Any, **options: Any) -> bytes:
    """The standard library's writing (for what orjson will not write: integers beyond 64 bits, lone
    surrogates, more than 254 levels); non-ASCII as escapes only when the text cannot be UTF-8."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, **options)
        try:
            return text.encode()
        except UnicodeEncodeError:
            return json.dumps(value, allow_nan=False, **options).encode()
    except RecursionError:
        raise TooDeep("write") from None


try:  # orjson (the `fast` extra) parses and writes request bodies several times faster
    import orjson

    def loads(data: bytes | str) -> Any:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            if str(exc).startswith("depth limit exceeded"):  # the standard library stops sooner still
                raise TooDeep() from None
            try:
                return _std_loads(data)
            except TooDeep:
                raise
            except ValueError:
                pass
            raise

    def dumps(value: Any) -> bytes:
        try:
            return orjson.dumps(value)
        except TypeError:  # integers beyond 64 bits, lone surrogates, more than 254 levels
            return _std_dumps(value)

    def dumps_sorted(value: Any) -> bytes:
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            return _std_dumps(value, sort_keys=True, separators=(",", ":"))

    def dumps_one_way(value: Any) -> bytes | None:
        """`value` written by orjson alone (None when it cannot): two texts written this way write every
        number and string the same way, which `dumps` (falling back to the standard library) does not."""
        try:
            return orjson.dumps(value)
        except TypeError:
            return None

    JSONError: tuple[type[Exception], ...] = (orjson.JSONDecodeError, UnicodeDecodeError, TooDeep)

except ImportError:  # pragma: no cover - the optional extra is absent

    def loads(data: bytes | str) -> Any:
        return _std_loads(data)

    def dumps(value: Any) -> bytes:
        return _std_dumps(value)

    def dumps_sorted(value: Any) -> bytes:
        return _std_dumps(value, sort_keys=True, separators=(",", ":"))

    def dumps_one_way(value: Any) -> bytes | None:
        try:
            return _std_dumps(value, separators=(",", ":"))
        except TooDeep:
            return None

    JSONError = (json.JSONDecodeError, UnicodeDecodeError, TooDeep)


# --- writing a request again, byte for byte where the proxy changes nothing ------------------------

_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]', re.S)
"""A string (its body matched in runs, not character by character) or a structural character."""
_SPACE = b" \t\n\r"
_SKIP_SPACE = re.compile(r"[ \t\n\r]*")
_COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
_SCAN: Any = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]
"""The standard library's C scanner: reads one JSON value at a position and returns where it ends."""


def dumps_ascii(value: Any) -> bytes | None:
    """`value` as the standard library writes it by default (non-ASCII as ``\\u`` escapes, floats by
    ``repr``), compact; None when it cannot. Python clients (``json.dumps``, ``requests``, ``aiohttp``)
    write bodies this way, spaced."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("ascii")
    except (RecursionError, ValueError):
        return None


WRITERS = (dumps_one_way, dumps_ascii)
"""The ways a parsed body can be written again whose tokens `same_but_spacing` compares with the
client's: orjson's (most clients: compact, UTF-8) and the standard library's (Python clients)."""


def same_but_spacing(written: bytes, raw: bytes) -> bool:
    """Whether `written` (a parse of `raw` written again) differs from `raw` in whitespace between tokens
    at most: with all spaces, tabs and line breaks taken out both are the same bytes. Whitespace inside
    a string is taken out of both alike, a raw tab or line break cannot be in a JSON string, and any other
    difference (an escape written otherwise, ``1E5``, a repeated key) leaves other bytes, so equal means
    every token is the same bytes. Two C-speed passes, whatever the client's spacing."""
    return written == raw or written.translate(None, _SPACE) == raw.translate(None, _SPACE)


class Spans:
    """Where a JSON object's top-level members sit in its bytes, and the elements of its ``messages``.

    Offsets count bytes of the body, or (`text` given) characters of `text`, the body decoded: a body
    read by the C scanner keeps character offsets, and only the pieces kept are encoded again."""

    __slots__ = ("elements", "members", "text")

    def __init__(
        self,
        members: list[tuple[str, bytes, int, int]],
        elements: list[tuple[int, int]] | None,
        text: str | None = None,
    ) -> None:
        self.members = members
        """(name, the key as written, value start, value end), in order, repeated keys included."""
        self.elements = elements
        """(start, end) of each element of the (last) top-level ``messages`` array."""
        self.text = text

    def piece(self, raw: bytes, start: int, end: int) -> bytes:
        """The body's bytes from `start` to `end`, surrounding whitespace stripped."""
        if self.text is None:
            return raw[start:end].strip()
        return self.text[start:end].strip(" \t\n\r").encode("utf-8", "surrogatepass")


def spans(raw: bytes) -> Spans | None:
    """The `Spans` of a JSON object already known to parse (None when `raw` is not an object).

    Read with the standard library's C scanner, one call per top-level value and per message, so the
    cost does not grow with the client's spacing or the number of strings in a message; a body the
    scanner cannot read that way (not UTF-8 text, nested deeper than it recurses) is read token by token
    instead."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _token_spans(raw)
    try:
        found = _scan_spans(text)
    except RecursionError:
        return _token_spans(raw)
    except (StopIteration, ValueError, IndexError):  # pragma: no cover - raw is known to parse
        return _token_spans(raw)
    if found is not None and not raw.isascii():
        found.text = text  # character offsets: the same as byte offsets only for ASCII
    return found


def _after_space(text: str, i: int) -> int:
    match = _SKIP_SPACE.match(text, i)
    assert match is not None  # it matches the empty string
    return match.end()


def _scan_spans(text: str) -> Spans | None:
    skip, scan = _after_space, _SCAN
    i = skip(text, 0)
    if text[i : i + 1] != "{":
        return None
    members: list[tuple[str, bytes, int, int]] = []
    elements: list[tuple[int, int]] | None = None
    i = skip(text, i + 1)
    if text[i] == "}":
        return Spans(members, elements)
    while True:
        key_start = i
        name, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
        written = text[key_start:i]
        i = skip(text, skip(text, i) + 1)  # past the colon
        start = i
        if name == "messages" and text[i] == "[":
            found: list[tuple[int, int]] = []
            append = found.append
            i = skip(text, i + 1)
            if text[i] != "]":
                comma = _COMMA.match
                while True:  # per message: one C call, and one regex match for what follows it
                    element_start = i
                    i = scan(text, i)[1]
                    append((element_start, i))
                    after = comma(text, i)
                    if after is None:
                        break
                    i = after.end()
                i = skip(text, i)  # at the closing bracket
            i += 1
            elements = found
        else:
            _, i = scan(text, i)
        members.append((name, written.encode("utf-8", "surrogatepass"), start, i))
        i = skip(text, i)
        if text[i] == "}":
            return Spans(members, elements)
        i = skip(text, i + 1)  # past the comma


def _token_spans(raw: bytes) -> Spans | None:
    """`spans` token by token (strings and structural characters), for any depth."""
    members: list[tuple[str, bytes, int, int]] = []
    elements: list[tuple[int, int]] | None = None
    current: list[tuple[int, int]] | None = None
    depth, key, value_start, element_start = 0, b"", -1, -1
    for token in _JSON_TOKEN.finditer(raw):
        at = token.start()
        char = raw[at]
        if char == 0x22:  # a string
            if depth == 1 and value_start < 0:
                key = token.group()
            continue
        if char == 0x3A:  # :
            if depth == 1:
                value_start = token.end()
            continue
        if char == 0x2C:  # ,
            if depth == 1:
                members.append((_key(key), key, value_start, at))
                value_start = -1
            elif depth == 2 and current is not None:
                current.append((element_start, at))
                element_start = token.end()
            continue
        if char in (0x7B, 0x5B):  # { [
            if depth == 0 and char != 0x7B:
                return None
            depth += 1
            if depth == 2 and char == 0x5B and _key(key) == "messages":
                current, element_start = [], token.end()
            continue
        if depth == 2 and current is not None:  # ] closing the messages array
            if raw[element_start:at].strip():
                current.append((element_start, at))
            elements, current = current, None
        depth -= 1
        if depth == 0:
            if value_start >= 0:
                members.append((_key(key), key, value_start, at))
            return Spans(members, elements)
    return None


def _key(written: bytes) -> str:
    if b"\\" not in written:
        return written[1:-1].decode("utf-8", "surrogateescape")
    name: str = json.loads(written)
    return name


def splice(
    raw: bytes,
    found: Spans,
    replace: dict[str, bytes],
    *,
    drop: frozenset[str] = frozenset(),
    messages: list[Any] | None = None,
    originals: list[Any] | None = None,
) -> bytes:
    """`raw` written again with the values of `replace` (raw JSON) put in, the members in `drop` left
    out, and every other member byte for byte (unknown fields, numbers as written, repeated keys).
    With `messages`: the new ``messages`` array, where each element that is one of `originals` (the
    parsed elements of `raw`'s array, by identity) keeps its bytes; the others are written anew."""
    out = [b"{"]
    seen: set[str] = set()
    for name, written, start, end in found.members:
        if name in drop:
            continue
        seen.add(name)
        if name == "messages" and messages is not None:
            value = _array(raw, found, messages, originals)
        elif name in replace:
            value = replace[name]
        else:
            value = found.piece(raw, start, end)
        out += [b"," if len(out) > 1 else b"", written, b":", value]
    for name, value in replace.items():
        if name not in seen:
            out += [b"," if len(out) > 1 else b"", dumps(name), b":", value]
    out.append(b"}")
    return b"".join(out)


def _array(raw: bytes, found: Spans, messages: list[Any], originals: list[Any] | None) -> bytes:
    """The new messages array: the run of messages that are the client's own from the start kept as one
    slice of its bytes (found by identity in C), then each later message by its own bytes or anew."""
    elements = found.elements
    if originals is None or elements is None or len(elements) != len(originals):
        return b"[" + b",".join([dumps(m) for m in messages]) + b"]"
    same = list(map(operator.is_, messages, originals))
    kept = same.index(False) if False in same else len(same)
    parts = [found.piece(raw, elements[0][0], elements[kept - 1][1])] if kept else []
    if kept < len(messages):
        where = {id(m): span for m, span in zip(originals[kept:], elements[kept:], strict=True)}
        for message in messages[kept:]:
            span = where.get(id(message))
            parts.append(found.piece(raw, *span) if span is not None else dumps(message))
    return b"[" + b",".join(parts) + b"]"


_DIGITS = bytes(0x39 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_LONG_RUN = b"9" * 19


def exact(raw: bytes, value: Any) -> Any:
    """`value` parsed from `raw`, parsed again with the standard library when `raw` holds a run of 19 or
    more digits and `value` a float that may be such an integer: orjson reads an integer beyond 64 bits
    as a float (integral, of size at least 2**63), and the proxy must not change a number it forwards.
    The parsed value is looked at first (its containers and numbers, not its strings: a request's text
    costs nothing), the body's bytes only when it holds such a float."""
    if not _may_hold_big_integer(value) or _LONG_RUN not in raw.translate(_DIGITS):
        return value
    try:
        return json.loads(raw)
    except RecursionError:  # orjson reads a little deeper than the standard library
        raise TooDeep() from None
    except ValueError:  # pragma: no cover - orjson read it, the standard library reads a superset
        return value


def _may_hold_big_integer(value: Any) -> bool:
    """Whether `value` holds a float orjson may have read from an integer beyond 64 bits."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float and abs(item) >= _TWO_63 and item.is_integer():
            return True
    return False


_TWO_63 = float(2**63)


def request_digest(raw: bytes) -> str:
    """A request body's identity for ``Idempotency-Key``: the same JSON is the same request, however it
    is spaced or its keys ordered; a body that is not JSON is compared byte for byte."""
    try:
        canonical = b"json\x00" + dumps_sorted(loads(raw))
    except JSONError:
        canonical = b"raw\x00" + raw
    return hashlib.sha256(canonical).hexdigest()


RETRYABLE = frozenset(
    {
        "upstream_unreachable",
        "upstream_timeout",
        "upstream_bad_response",
        "request_timeout",
        "too_many_connections",
        "bodies_over_budget",
        "batch_evicted",
    }
)
"""Codes of the proxy's own errors that a retry may cure; every other one says ``x-should-retry: false``."""
NO_RETRY = {"x-should-retry": "false"}
"""The header the `openai` client (and other Stainless clients) obey: it would otherwise retry 409 and
every 5xx, and a 507 or a conflict would only come back, after costing time (or upstream calls)."""

_QUEUED_KEYS = ("id", "object", "created", "model", "system_fingerprint", "service_tier")
_CHOICE_KEYS = frozenset({"index", "message", "finish_reason"})


def error_body(status: int, message: str, code: str, *, param: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body; `type` follows OpenAI's names for the status."""
    kind = {
        400: "invalid_request_error",
        404: "not_found_error",
        405: "invalid_request_error",
        409: "conflict_error",
        410: "invalid_request_error",
        413: "invalid_request_error",
        415: "invalid_request_error",
        417: "invalid_request_error",
        429: "rate_limit_error",
    }.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def split_response(response: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(template, choice): an upstream response's top-level fields exactly as sent, ``choices`` kept as
    a place-holder (None) so the first hand-out has the fields in the upstream's order, and the fields
    of its one choice besides index, message and finish_reason."""
    template = {k: (None if k == "choices" else v) for k, v in response.items()}
    choice = response["choices"][0]
    return template, {k: v for k, v in choice.items() if k not in _CHOICE_KEYS}


def hand_out_reply(
    template: Mapping[str, Any], choice: Mapping[str, Any], message: dict[str, Any], position: int
) -> dict[str, Any]:
    """The chat.completion a client receives for hand-out `position` of a batch.

    Position 0 is the upstream's response itself with only the first call: every field it sent (and
    none it did not), its usage included (absent if it sent none), and every field of its choice
    (logprobs, ...). Later positions are served from the queue, no model was called for them: same
    created (the time of the reply when the upstream sent none) / model / system_fingerprint /
    service_tier, id suffixed ``-k``, ``usage`` null and ``logprobs`` null (the upstream's usage and
    logprobs belong to the response the first position carries).
    """
    if position == 0:
        reply = dict(template)
        reply["choices"] = [{"index": 0, "message": message, **choice, "finish_reason": "tool_calls"}]
        return reply
    reply = {k: template[k] for k in _QUEUED_KEYS if k in template}
    reply["id"] = f"{template.get('id') or 'chatcmpl-proxy'}-{position}"
    reply["object"] = "chat.completion"
    if not isinstance(reply.get("created"), int):
        reply["created"] = int(time.time())
    reply["choices"] = [{"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls"}]
    reply["usage"] = None
    return reply


def sse_events(response: Mapping[str, Any], *, include_usage: bool) -> Iterator[bytes]:
    """A whole chat.completion as the ``data:`` events of a stream, ending with ``[DONE]``.

    Every chunk carries the response's id, created, model, system_fingerprint and any other top-level
    field it has; a choice's logprobs ride on its first chunk, its other fields on its last. A final
    usage chunk (``choices: []``, the response's usage, null when it has none) is sent only when the
    client asked for it with ``stream_options.include_usage``.
    """
    head: dict[str, Any] = {
        k: v for k, v in response.items() if k not in ("choices", "usage", "object") and v is not None
    }
    head.setdefault("id", "chatcmpl-proxy")
    head["object"] = "chat.completion.chunk"
    head.setdefault("created", int(time.time()))
    head.setdefault("model", None)

    def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return b"data: " + dumps({**head, "choices": choices, **extra}) + b"\n\n"

    for pos, choice in enumerate(response.get("choices") or []):
        index = choice.get("index", pos)
        message = choice.get("message") or {}
        first: dict[str, Any] = {"role": message.get("role", "assistant"), "content": message.get("content")}
        if first["content"] is None:
            first["content"] = ""
        for key in ("reasoning_content", "refusal"):
            if message.get(key) is not None:
                first[key] = message[key]
        logprobs = choice.get("logprobs")
        yield event([{"index": index, "delta": first, "logprobs": logprobs, "finish_reason": None}])
        for i, call in enumerate(message.get("tool_calls") or []):
            fn = call.get("function") or {}
            delta = {
                "index": i,
                "id": call.get("id"),
                "type": call.get("type", "function"),
                "function": {"name": fn.get("name"), "arguments": fn.get("arguments") or ""},
            }
            yield event(
                [{"index": index, "delta": {"tool_calls": [delta]}, "logprobs": None, "finish_reason": None}]
            )
        finish = choice.get("finish_reason") or ("tool_calls" if message.get("tool_calls") else "stop")
        extra = {k: v for k, v in choice.items() if k not in _CHOICE_KEYS and k != "logprobs"}
        yield event([{"index": index, "delta": {}, "logprobs": None, **extra, "finish_reason": finish}])
    if include_usage:
        yield event([], usage=response.get("usage"))
    yield b"data: [DONE]\n\n"

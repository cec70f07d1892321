"""Recordings on disk -> exchanges -> parsed responses, whatever container and wire format.

Containers: ``.sse`` (raw event stream), ``.chunks.jsonl`` (one SSE payload per line, vercel/ai
style), ``.json`` (a response body, or a list of recorded HTTP exchanges), ``.yaml`` (VCR cassettes
with several request/response interactions). Wire formats are detected from the payloads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from toolcall_lab.exceptions import SSEDecodeError, UnknownFormatError, WireFormatError
from toolcall_lab.formats.anthropic import AnthropicStreamAccumulator, parse_anthropic_message
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator, parse_chat_completion
from toolcall_lab.formats.openai_responses import parse_responses_output, split_responses
from toolcall_lab.formats.sse import decode_payload, iter_sse_payloads
from toolcall_lab.messages import ParsedResponse

WireFormat = Literal["openai-chat", "anthropic", "openai-responses"]
_ANTHROPIC_EVENTS = frozenset(
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


def detect_payload_format(payload: Mapping[str, Any]) -> WireFormat:
    """The wire format of one stream payload or whole response body."""
    kind = payload.get("type")
    if "choices" in payload or str(payload.get("object", "")).startswith("chat.completion"):
        return "openai-chat"
    if isinstance(kind, str) and kind.startswith("response."):
        return "openai-responses"
    if kind in _ANTHROPIC_EVENTS or (kind == "message" and "content" in payload):
        return "anthropic"
    if payload.get("object") == "response" or "output" in payload:
        return "openai-responses"
    raise UnknownFormatError(f"cannot tell the wire format of a payload with keys {sorted(payload)[:8]}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One recorded model call: what was asked (if recorded) and what came back."""

    format: WireFormat
    payloads: tuple[dict[str, Any], ...] | None = None
    """Streamed payloads in order, for streamed responses."""
    body: dict[str, Any] | None = None
    """The whole response body, for non-streamed responses."""
    request: dict[str, Any] | None = None
    response_headers: dict[str, str] = field(default_factory=dict)

    @property
    def streamed(self) -> bool:
        return self.payloads is not None

    def parse(self, *, batch: int = 0) -> list[ParsedResponse]:
        """Parse this exchange (a Responses stream may hold several responses)."""
        if self.payloads is not None:
            if self.format == "openai-responses":
                return split_responses(self.payloads, batch=batch)
            acc: ChatCompletionAccumulator | AnthropicStreamAccumulator
            if self.format == "openai-chat":
                acc = ChatCompletionAccumulator(batch=batch)
            else:
                acc = AnthropicStreamAccumulator(batch=batch)
            for payload in self.payloads:
                acc.feed(payload)
            return [acc.finish()]
        body = self.body or {}
        if self.format == "openai-chat":
            return [parse_chat_completion(body, batch=batch)]
        if self.format == "anthropic":
            return [parse_anthropic_message(body, batch=batch)]
        return [parse_responses_output(body, batch=batch)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Recording:
    """A recording file: its container kind and the exchanges it holds."""

    path: str
    container: Literal["sse", "chunks-jsonl", "json", "exchanges", "cassette"]
    exchanges: tuple[Exchange, ...]

    def parse(self) -> list[ParsedResponse]:
        """Every response in the file, in order; fallback ids numbered by position."""
        out: list[ParsedResponse] = []
        for exchange in self.exchanges:
            out.extend(exchange.parse(batch=len(out)))
        return out


def _stream_exchange(payloads: Sequence[dict[str, Any]], **extra: Any) -> Exchange:
    if not payloads:
        raise UnknownFormatError("the stream holds no payloads")
    fmt = next((_try_detect(p) for p in payloads if _try_detect(p)), None)
    if fmt is None:
        raise UnknownFormatError("no payload of the stream has a known wire format")
    return Exchange(format=fmt, payloads=tuple(payloads), **extra)


def _try_detect(payload: Mapping[str, Any]) -> WireFormat | None:
    try:
        return detect_payload_format(payload)
    except UnknownFormatError:
        return None


def _body_exchange(text_or_body: str | Mapping[str, Any], **extra: Any) -> Exchange:
    """A recorded response that is either an SSE text or a JSON body."""
    if isinstance(text_or_body, str):
        stripped = text_or_body.lstrip()
        if stripped.startswith("{"):
            return _body_exchange(json.loads(stripped), **extra)
        return _stream_exchange(list(iter_sse_payloads(text_or_body)), **extra)
    body = dict(text_or_body)
    return Exchange(format=detect_payload_format(body), body=body, **extra)


def _headers(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k).lower(): str(v[0] if isinstance(v, list) and v else v) for k, v in raw.items()}


def _jsonl_payloads(lines: Iterable[str]) -> list[dict[str, Any]]:
    out = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            out.append(decode_payload(line, line_number=number))
    return out


def read_recording(path: str | Path) -> Recording:
    """Read a recording file; raises `WireFormatError` subclasses naming the file when unreadable."""
    p = Path(path)
    try:
        return _read(p)
    except WireFormatError as exc:
        if not str(exc).startswith(str(p)):
            exc.args = (f"{p}: {exc}",)
        raise


def _read(p: Path) -> Recording:
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UnknownFormatError(f"{p}: cannot read: {exc}") from exc
    name = p.name
    if name.endswith(".sse"):
        return Recording(
            path=str(p), container="sse", exchanges=(_stream_exchange(list(iter_sse_payloads(text))),)
        )
    if name.endswith(".jsonl"):
        return Recording(
            path=str(p),
            container="chunks-jsonl",
            exchanges=(_stream_exchange(_jsonl_payloads(text.splitlines())),),
        )
    if name.endswith((".yaml", ".yml")):
        import yaml

        doc = yaml.safe_load(text)
        interactions = doc.get("interactions") if isinstance(doc, dict) else None
        if not isinstance(interactions, list):
            raise UnknownFormatError(f"{p}: YAML without a cassette 'interactions' list")
        items: list[Exchange] = []
        for item in interactions:
            response, request = item.get("response") or {}, item.get("request") or {}
            raw = response.get("parsed_body")
            if raw is None:
                raw = (response.get("body") or {}).get("string", "")
            items.append(
                _body_exchange(
                    raw,
                    request=request.get("parsed_body"),
                    response_headers=_headers(response.get("headers")),
                )
            )
        return Recording(path=str(p), container="cassette", exchanges=tuple(items))
    if name.endswith(".json"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SSEDecodeError(
                f"{p}: not JSON ({exc.msg})",
                line_number=exc.lineno,
                line=text.splitlines()[exc.lineno - 1] if text else "",
            ) from None
        if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "response" in doc[0]:
            exchanges = tuple(
                _body_exchange(
                    (x["response"] or {}).get("body") or {},
                    request=(x.get("request") or {}).get("body"),
                    response_headers=_headers((x["response"] or {}).get("headers")),
                )
                for x in doc
            )
            return Recording(path=str(p), container="exchanges", exchanges=exchanges)
        if isinstance(doc, dict):
            return Recording(path=str(p), container="json", exchanges=(_body_exchange(doc),))
        raise UnknownFormatError(f"{p}: JSON is neither a response body nor a list of exchanges")
    raise UnknownFormatError(
        f"{p}: unknown file type (expected .sse, .chunks.jsonl, .json or a .yaml cassette)"
    )

"""OTLP JSON spans as this importer reads them: attribute values, timed spans (with their damage
reported), and the messages, responses and tool schemas their attributes hold, in the GenAI
conventions, OpenInference and OpenLLMetry forms (see `toolcall_lab.importers.otlp`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from toolcall_lab.importers._build import Issue, call_entry, completion, text_of

MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})


def attribute_value(v: dict[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [attribute_value(x) for x in (v["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in v:
        return {
            kv["key"]: attribute_value(kv.get("value") or {})
            for kv in (v["kvlistValue"] or {}).get("values") or []
        }
    return None


class BadAttribute(ValueError):
    """A span attribute that should hold JSON does not (cut by an exporter's length limit, say)."""

    def __init__(self, key: str, exc: Exception) -> None:
        detail = f"{exc.msg}: column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        super().__init__(f"attribute {key} is not valid JSON ({detail})")
        self.key = key


def json_attribute(attrs: dict[str, Any], key: str) -> Any:
    """An attribute that holds JSON text (or the value itself when it is not text); raises
    `BadAttribute` naming the attribute."""
    raw = attrs.get(key)
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadAttribute(key, exc) from None


@dataclass(slots=True)
class Span:
    trace_id: str
    span_id: str
    name: str
    start: float | None
    end: float | None
    attrs: dict[str, Any]
    error: str | None
    parent_id: str | None = None

    @property
    def kind(self) -> str | None:
        oi = self.attrs.get("openinference.span.kind")
        op = self.attrs.get("gen_ai.operation.name")
        if oi == "LLM" or op in MODEL_OPERATIONS:
            return "model"
        if oi == "TOOL" or op == "execute_tool":
            return "tool"
        return None

    @property
    def timed(self) -> bool:
        return self.start is not None and self.end is not None

    @property
    def duration_s(self) -> float:
        return 0.0 if self.start is None or self.end is None else self.end - self.start


def _nanos(value: Any) -> float | None:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n / 1e9 if n > 0 else None


def spans_of(doc: Any, where: str, issues: list[Issue]) -> Iterable[Span]:
    batches = doc if isinstance(doc, list) else [doc]
    for batch in batches:
        if not isinstance(batch, dict):
            continue
        for rs in batch.get("resourceSpans") or []:
            for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
                for sp in ss.get("spans") or []:
                    if not isinstance(sp, dict):
                        continue
                    attrs: dict[str, Any] = {}
                    for a in sp.get("attributes") or []:
                        if not (isinstance(a, dict) and "key" in a):
                            continue
                        try:
                            attrs[str(a["key"])] = attribute_value(a.get("value") or {})
                        except (ValueError, TypeError, AttributeError) as exc:
                            issues.append(
                                Issue(
                                    kind="damaged",
                                    where=f"{where} span {sp.get('spanId')} ({sp.get('name')})",
                                    what=f"attribute {a['key']} holds a value that is not of its type "
                                    f"({str(a.get('value'))[:60]}: {exc}): that attribute is left out",
                                )
                            )
                    status = sp.get("status") or {}
                    error = None
                    if status.get("code") in ("STATUS_CODE_ERROR", 2):
                        error = status.get("message") or "error"
                    start, end = _nanos(sp.get("startTimeUnixNano")), _nanos(sp.get("endTimeUnixNano"))
                    span = Span(
                        trace_id=str(sp.get("traceId")),
                        span_id=str(sp.get("spanId")),
                        name=str(sp.get("name")),
                        start=start,
                        end=end,
                        attrs=attrs,
                        error=error or (str(attrs["error.type"]) if "error.type" in attrs else None),
                        parent_id=str(sp["parentSpanId"]) if sp.get("parentSpanId") else None,
                    )
                    if span.kind is not None and (start is None or end is None or end < start):
                        issues.append(
                            Issue(
                                kind="damaged",
                                where=f"{where} span {span.span_id} ({span.name})",
                                what=f"no valid start and end (startTimeUnixNano "
                                f"{sp.get('startTimeUnixNano')!r}, endTimeUnixNano "
                                f"{sp.get('endTimeUnixNano')!r}): the durations resting on it are "
                                "placeholders",
                            )
                        )
                        if start is not None and end is not None:  # ends before it starts
                            span.start = span.end = None
                    yield span


def indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.N.rest`` attributes -> a list of dicts keyed by ``rest``."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix + "."):
            continue
        head, _, rest = key[len(prefix) + 1 :].partition(".")
        if head.isdigit():
            items.setdefault(int(head), {})[rest] = value
    return [items[k] for k in sorted(items)]


def _oi_message(flat: dict[str, Any]) -> dict[str, Any]:
    role = flat.get("message.role")
    texts = [v for k, v in sorted(flat.items()) if k.endswith("message_content.text")]
    content = flat.get("message.content")
    message: dict[str, Any] = {"role": role, "content": content if content is not None else "".join(texts)}
    calls = indexed({k.removeprefix("message."): v for k, v in flat.items()}, "tool_calls")
    if calls:
        message["tool_calls"] = [
            call_entry(
                c.get("tool_call.id"),
                str(c.get("tool_call.function.name")),
                str(c.get("tool_call.function.arguments") or "{}"),
            )
            for c in calls
        ]
        message["content"] = message["content"] or None
    if flat.get("message.tool_call_id"):
        message["tool_call_id"] = flat["message.tool_call_id"]
    return message


def _genai_messages(attrs: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = json_attribute(attrs, key)
    out = []
    for m in items or []:
        texts, calls, responses = [], [], []
        for part in m.get("parts") or []:
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("content", "")))
            elif kind == "tool_call":
                args = part.get("arguments")
                calls.append(
                    call_entry(
                        part.get("id"),
                        str(part.get("name")),
                        args if isinstance(args, str) else json.dumps(args or {}),
                    )
                )
            elif kind == "tool_call_response":
                responses.append(part)
        if responses:
            out += [
                {"role": "tool", "tool_call_id": r.get("id"), "content": text_of(r.get("response"))}
                for r in responses
            ]
            continue
        message: dict[str, Any] = {"role": m.get("role"), "content": "".join(texts) or None}
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out


def request_messages(span: Span) -> list[dict[str, Any]]:
    a = span.attrs
    raw = a.get("input.value")
    if isinstance(raw, str) and raw.lstrip().startswith("{"):
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
            return [dict(m) for m in doc["messages"]]
    if "gen_ai.input.messages" in a:
        head = []
        if a.get("gen_ai.system_instructions"):
            parts = json_attribute(a, "gen_ai.system_instructions")
            head = [{"role": "system", "content": "".join(str(p.get("content", "")) for p in parts or [])}]
        return head + _genai_messages(a, "gen_ai.input.messages")
    flat = indexed(a, "llm.input_messages")
    if flat:
        return [_oi_message(m) for m in flat]
    return [{"role": m.get("role"), "content": m.get("content")} for m in indexed(a, "gen_ai.prompt")]


def response_body(span: Span, n: int) -> tuple[dict[str, Any], bool]:
    a = span.attrs
    raw = a.get("output.value")
    if isinstance(raw, str) and raw.lstrip().startswith("{"):
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and doc.get("choices"):
            doc.setdefault("object", "chat.completion")
            return doc, True
    model = a.get("gen_ai.response.model") or a.get("llm.model_name") or a.get("gen_ai.request.model")
    rid = str(a.get("gen_ai.response.id") or f"otlp-{span.span_id}-{n}")
    message: dict[str, Any]
    if "gen_ai.output.messages" in a:
        messages = _genai_messages(a, "gen_ai.output.messages")
        message = messages[0] if messages else {"role": "assistant", "content": None}
    elif indexed(a, "llm.output_messages"):
        message = _oi_message(indexed(a, "llm.output_messages")[0])
    else:
        comp = (indexed(a, "gen_ai.completion") or [{}])[0]
        message = {"role": "assistant", "content": comp.get("content")}
        calls = indexed(comp, "tool_calls")
        if calls:
            message["tool_calls"] = [
                call_entry(c.get("id"), str(c.get("name")), str(c.get("arguments") or "{}")) for c in calls
            ]
    message["role"] = "assistant"
    return completion(message, response_id=rid, model=model), False


def tool_schemas(span: Span) -> list[dict[str, Any]]:
    a = span.attrs
    out = []
    for item in indexed(a, "llm.tools"):
        doc = json_attribute(item, "tool.json_schema")
        if isinstance(doc, dict) and "function" in doc:
            out.append({"type": "function", "function": doc["function"]})
    for d in json_attribute(a, "gen_ai.tool.definitions") or []:
        if isinstance(d, dict) and d.get("name"):
            fn = d.get("function") or {k: d.get(k) for k in ("name", "description", "parameters")}
            out.append({"type": "function", "function": fn})
    return out

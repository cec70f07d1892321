"""OTLP JSON spans as this importer reads them: attribute values, timed spans (with their damage
reported), and the messages, responses and tool schemas their attributes hold, in the GenAI
conventions, OpenInference and OpenLLMetry forms (see `toolcall_lab.importers.otlp`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from toolcall_lab.exceptions import ToolcallLabError
from toolcall_lab.formats.dispatch import parse_body
from toolcall_lab.importers._build import Issue, call_entry, chat_body, completion, text_of, with_choices
from toolcall_lab.importers._figures import token_counts
from toolcall_lab.records import clock_time

MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
LLM_REQUEST_TYPES = frozenset({"chat", "completion"})
"""OpenLLMetry's ``llm.request.type`` of a model call (its Anthropic instrumentation says
``completion`` for Messages API calls too; ``embedding`` / ``rerank`` are not model calls here)."""


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

    def __init__(self, key: str, exc: Exception, *, length: int | None = None) -> None:
        detail = f"{exc.msg}: column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        cut = f"; {length} characters: cut short?" if length is not None else ""
        super().__init__(f"attribute {key} is not valid JSON ({detail}{cut})")
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
    order: float | None = None
    """Where the span stands in time (epoch seconds): its start, even when its end is not valid (a
    span ending before it starts keeps its place in the conversation), else its end; None when the
    export gives neither (`in_time_order` then keeps it where the file has it)."""
    lone_start: float | None = None
    """The start of a span that ends before it starts (its `start` and `end` are then None): which of
    the two is wrong is not known, so no duration rests on it; the gap before it may, when the start
    fits the order of the spans (`otlp`)."""
    copy: int = 0
    """Which of the spans sharing this traceId and spanId it is (0: the first in the file): spans that
    differ are all read (`otlp._once`), so the ids alone do not name one."""
    rest: str = ""
    """The span's other fields (kind, status, events, links...) as read, for telling a repeat from
    another span: everything but its ids, times, attributes and the export's bookkeeping counts."""

    @property
    def kind(self) -> str | None:
        """``model``, ``tool`` or None, from whichever convention the span follows: GenAI
        (``gen_ai.operation.name``), OpenInference (``openinference.span.kind``) or OpenLLMetry
        (``llm.request.type`` on instrumented client calls, ``traceloop.span.kind`` on the SDK's
        decorated functions: ``tool``, and ``llm``; its ``workflow`` / ``task`` / ``agent`` spans only
        group others). pydantic-ai's tool spans (Logfire) carry ``gen_ai.tool.name`` and
        ``gen_ai.tool.call.id`` but no operation name."""
        a = self.attrs
        oi, op = a.get("openinference.span.kind"), a.get("gen_ai.operation.name")
        tl = a.get("traceloop.span.kind")
        if oi == "TOOL" or op == "execute_tool" or tl == "tool":
            return "tool"
        if oi == "LLM" or op in MODEL_OPERATIONS or tl == "llm":
            return "model"
        if op is None and oi is None and a.get("llm.request.type") in LLM_REQUEST_TYPES:
            return "model"
        if op is None and oi is None and a.get("gen_ai.tool.name") and a.get("gen_ai.tool.call.id"):
            return "tool"  # pydantic-ai (Logfire): 'running tool' / 'execute_tool X', no operation name
        return None

    @property
    def timed(self) -> bool:
        return self.start is not None and self.end is not None

    @property
    def duration_s(self) -> float:
        return 0.0 if self.start is None or self.end is None else clock_time(self.end - self.start)


def _nanos(value: Any) -> float | None:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n / 1e9 if n > 0 else None


_READ_APART = frozenset(
    {
        "traceId",
        "spanId",
        "startTimeUnixNano",
        "endTimeUnixNano",
        "attributes",
        "droppedAttributesCount",
        "droppedEventsCount",
        "droppedLinksCount",
        "flags",
    }
)
"""Span fields `Span.rest` leaves out: those read into the span's own fields, and the export's
bookkeeping (counts of what the SDK dropped, trace flags), which two sends of one span may differ in."""


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
                    rest = {k: v for k, v in sp.items() if k not in _READ_APART}
                    span = Span(
                        trace_id=str(sp.get("traceId")),
                        span_id=str(sp.get("spanId")),
                        name=str(sp.get("name")),
                        start=start,
                        end=end,
                        attrs=attrs,
                        error=error or (str(attrs["error.type"]) if "error.type" in attrs else None),
                        parent_id=str(sp["parentSpanId"]) if sp.get("parentSpanId") else None,
                        order=start if start is not None else end,
                        rest=json.dumps(rest, sort_keys=True, default=str),
                    )
                    if span.kind is not None and (start is None or end is None or end < start):
                        backwards = start is not None and end is not None
                        issues.append(
                            Issue(
                                kind="damaged",
                                where=f"{where} span {span.span_id} ({span.name})",
                                what=f"no valid start and end (startTimeUnixNano "
                                f"{sp.get('startTimeUnixNano')!r}, endTimeUnixNano "
                                f"{sp.get('endTimeUnixNano')!r}"
                                + (", it ends before it starts" if backwards else "")
                                + "): the durations resting on it are placeholders"
                                + (
                                    "; it keeps its place in time by its "
                                    + ("start" if start is not None else "end")
                                    if span.order is not None
                                    else "; it keeps its place in the file"
                                ),
                            )
                        )
                        if start is not None and end is not None:  # ends before it starts
                            span.start = span.end = None
                            span.lone_start = start
                    yield span


def in_time_order(spans: list[Span]) -> list[Span]:
    """`spans` by `Span.order` (stable); a span without any time stays after the span before it in
    the file, rather than at the end (where it would split its conversation)."""
    keyed: list[tuple[float, int, Span]] = []
    last = float("-inf")
    for position, span in enumerate(spans):
        if span.order is not None:
            last = span.order
        keyed.append((span.order if span.order is not None else last, position, span))
    keyed.sort(key=lambda item: (item[0], item[1]))
    return [span for _, _, span in keyed]


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


def _json_value(a: dict[str, Any], key: str) -> tuple[Any, BadAttribute | None]:
    """OpenInference's ``input.value`` / ``output.value`` read as JSON when it holds a JSON object
    (None otherwise), and the error when it starts as JSON but does not parse (cut by an exporter's
    attribute length limit)."""
    raw = a.get(key)
    if not (isinstance(raw, str) and raw.lstrip().startswith("{")):
        return None, None
    try:
        return json.loads(raw), None
    except json.JSONDecodeError as exc:
        return None, BadAttribute(key, exc, length=len(raw))


def _event_list(a: dict[str, Any]) -> list[dict[str, Any]] | None:
    """pydantic-ai's first instrumentation (Logfire): the request's messages and the choice as one
    JSON list in the ``events`` attribute, one dict per message (``role``, ``content``,
    ``tool_calls``; a tool return has ``id``), the choice as ``{"index": 0, "message": {...}}``."""
    if "events" not in a or "gen_ai.input.messages" in a:
        return None
    items = json_attribute(a, "events")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else None


def _event_message(item: dict[str, Any]) -> dict[str, Any] | None:
    role = item.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        return None
    content = item.get("content")
    message: dict[str, Any] = {
        "role": role,
        "content": content if isinstance(content, str) or content is None else text_of(content),
    }
    if role == "tool":
        message["tool_call_id"] = item.get("id") or item.get("tool_call_id")
    calls = [
        call_entry(c.get("id"), str((c.get("function") or {}).get("name")), _arguments_text(c))
        for c in item.get("tool_calls") or []
        if isinstance(c, dict)
    ]
    if calls:
        message["tool_calls"] = calls
    return message


def _arguments_text(call: dict[str, Any]) -> str:
    args = (call.get("function") or {}).get("arguments")
    return args if isinstance(args, str) else json.dumps(args or {})


def request_messages(span: Span, damage: list[str] | None = None) -> list[dict[str, Any]]:
    """The span's request messages; a cut ``input.value`` is named in `damage` and the flattened
    messages are read instead (raises `BadAttribute` when there are none: the request is unknown)."""
    doc, cut = _json_value(span.attrs, "input.value")
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        return [dict(m) for m in doc["messages"]]
    messages = _flattened_request(span)
    if cut is not None:
        if not messages:
            raise cut
        if damage is not None:
            damage.append(f"{cut}: the request is read from the flattened input messages instead")
    return messages


def _flattened_request(span: Span) -> list[dict[str, Any]]:
    a = span.attrs
    events = _event_list(a)
    if events is not None:
        return [m for e in events if "message" not in e and (m := _event_message(e)) is not None]
    if "gen_ai.input.messages" in a:
        head = []
        if a.get("gen_ai.system_instructions"):
            parts = json_attribute(a, "gen_ai.system_instructions")
            head = [{"role": "system", "content": "".join(str(p.get("content", "")) for p in parts or [])}]
        return head + _genai_messages(a, "gen_ai.input.messages")
    flat = indexed(a, "llm.input_messages")
    if flat:
        return [_oi_message(m) for m in flat]
    return [m for item in indexed(a, "gen_ai.prompt") for m in _openllmetry_messages(item)]


def _blocks(content: Any) -> Any:
    """A flattened message content: OpenLLMetry writes a list of content blocks as JSON text."""
    if isinstance(content, str) and content.lstrip().startswith("["):
        try:
            doc = json.loads(content)
        except json.JSONDecodeError:
            return content
        if isinstance(doc, list) and all(isinstance(b, dict) and "type" in b for b in doc):
            return doc
    return content


def _flat_calls(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        call_entry(c.get("id"), str(c.get("name")), str(c.get("arguments") or "{}"))
        for c in indexed(item, "tool_calls")
    ]


def _openllmetry_messages(item: dict[str, Any]) -> list[dict[str, Any]]:
    """One ``gen_ai.prompt.N.*`` message (OpenLLMetry's flattened form) as chat messages.

    OpenAI instrumentation: ``role``, ``content`` (blocks as JSON text), ``tool_call_id`` and
    ``tool_calls.K.{id,name,arguments}``. Anthropic instrumentation: the content blocks as JSON text,
    so a user message answering tool calls holds ``tool_result`` blocks (one tool message each here)
    and an assistant message its ``tool_use`` blocks (also written as ``tool_calls.K.*``). The legacy
    text-completion form is ``gen_ai.prompt.0.user``."""
    if "role" not in item and "user" in item:
        return [{"role": "user", "content": item["user"]}]
    role, content = item.get("role"), _blocks(item.get("content"))
    calls = _flat_calls(item)
    out: list[dict[str, Any]] = []
    if isinstance(content, list):
        results = [b for b in content if b.get("type") == "tool_result"]
        uses = [b for b in content if b.get("type") == "tool_use"]
        rest = [b for b in content if b.get("type") not in ("tool_result", "tool_use")]
        out += [
            {"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": text_of(b.get("content"))}
            | ({"is_error": True} if b.get("is_error") else {})
            for b in results
        ]
        if not calls:
            calls = [
                call_entry(b.get("id"), str(b.get("name")), json.dumps(b.get("input") or {})) for b in uses
            ]
        if results and not rest:
            return out
        content = rest if rest else None
    message: dict[str, Any] = {"role": role, "content": content}
    if item.get("tool_call_id"):
        message["tool_call_id"] = item["tool_call_id"]
    if calls:
        message["tool_calls"] = calls
    return [*out, message]


def response_body(span: Span, n: int, damage: list[str] | None = None) -> tuple[dict[str, Any], bool]:
    """The span's response as a chat-completion body, and whether it is the provider's own; a cut
    ``output.value`` is named in `damage` and the flattened output read instead (raises
    `BadAttribute` when there is none: the response, and so its tool calls, are unknown)."""
    a = span.attrs
    doc, cut = _json_value(a, "output.value")
    if isinstance(doc, dict) and doc.get("choices"):
        doc.setdefault("object", "chat.completion")
        return doc, True
    if cut is not None:
        if not (
            "gen_ai.output.messages" in a
            or indexed(a, "llm.output_messages")
            or indexed(a, "gen_ai.completion")
        ):
            raise cut
        if damage is not None:
            damage.append(f"{cut}: the response is rebuilt from the flattened output messages instead")
    model = a.get("gen_ai.response.model") or a.get("llm.model_name") or a.get("gen_ai.request.model")
    rid = str(a.get("gen_ai.response.id") or f"otlp-{span.span_id}-{n}")
    message: dict[str, Any]
    others: list[dict[str, Any]] = []  # n > 1: one output message per choice, in both conventions
    events = _event_list(a)
    if events is not None:
        choices = [
            _event_message({"role": "assistant", **(e.get("message") or {})})
            for e in events
            if "message" in e
        ]
        found = [c for c in choices if c is not None] or [{"role": "assistant", "content": None}]
        message, *others = found
    elif "gen_ai.output.messages" in a:
        messages = _genai_messages(a, "gen_ai.output.messages")
        message = messages[0] if messages else {"role": "assistant", "content": None}
        others = messages[1:]
    elif indexed(a, "llm.output_messages"):
        message, *others = [_oi_message(m) for m in indexed(a, "llm.output_messages")]
    elif not indexed(a, "gen_ai.completion") and isinstance(doc, dict):
        # the provider's body of another format (an Anthropic message, a Responses output): read by
        # that format's parser, converted to a chat-completion body
        try:
            converted = chat_body(parse_body(doc), keep_fallback_ids=False)
        except (ToolcallLabError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"output.value holds a body of no known shape ({exc})") from None
        tokens = usage(a, damage)
        if tokens is not None and "usage" not in converted:
            converted["usage"] = tokens
        return converted, False
    elif not indexed(a, "gen_ai.completion") and isinstance(a.get("output.value"), str) and cut is None:
        message = {"role": "assistant", "content": a["output.value"]}  # a plain-text output
    elif not indexed(a, "gen_ai.completion"):
        # no output in any convention: never read as an empty answer (its tool calls are unknown)
        if span.error:
            raise ValueError(f"the model call failed ({span.error}): the span holds no response")
        raise ValueError(
            "the span holds no output (message content not captured, e.g. "
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT off, or kept in log events the export "
            "lacks)"
        )
    else:
        # OpenLLMetry: completion.N is choice N, but its Anthropic instrumentation writes a thinking
        # block as completion.0 (role "thinking") and the message itself as completion.1
        items = indexed(a, "gen_ai.completion")
        comp = next((c for c in items if c.get("role") != "thinking"), {})
        content = comp.get("content")
        message = {"role": "assistant", "content": text_of(_blocks(content)) if content is not None else None}
        if comp.get("refusal") is not None:
            message["refusal"] = comp["refusal"]
        calls = _flat_calls(comp)
        if calls:
            message["tool_calls"] = calls
            message["content"] = message["content"] or None
    message["role"] = "assistant"
    body = completion(message, response_id=rid, model=model, usage=usage(a, damage))
    return with_choices(body, others), False  # n > 1: each other choice a trace (_build.other_choices)


def usage(a: dict[str, Any], damage: list[str] | None = None) -> dict[str, int] | None:
    """Token counts the span records (GenAI ``gen_ai.usage.input/output_tokens``, their older
    ``prompt/completion_tokens`` names, OpenLLMetry's ``llm.usage.total_tokens``, OpenInference's
    ``llm.token_count.*``) as a chat-completion ``usage``; None when it records none. A count that is
    not a whole number >= 0 (``-5``, ``"x"``) is left out and named in `damage` (`token_count`)."""
    found = token_counts(
        {
            k: a[k]
            for k in (
                "gen_ai.usage.input_tokens",
                "gen_ai.usage.prompt_tokens",
                "llm.token_count.prompt",
                "gen_ai.usage.output_tokens",
                "gen_ai.usage.completion_tokens",
                "llm.token_count.completion",
                "llm.usage.total_tokens",
                "gen_ai.usage.total_tokens",
                "llm.token_count.total",
            )
            if a.get(k) is not None
        },
        damage if damage is not None else [],
    )

    def first(*keys: str) -> int | None:
        return next((n for k in keys if (n := found.get(k)) is not None), None)

    prompt = first("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
    output = first(
        "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"
    )
    total = first("llm.usage.total_tokens", "gen_ai.usage.total_tokens", "llm.token_count.total")
    if prompt is None and output is None and total is None:
        return None
    if total is None and prompt is not None and output is not None:
        total = prompt + output
    return {
        k: v
        for k, v in (("prompt_tokens", prompt), ("completion_tokens", output), ("total_tokens", total))
        if v is not None
    }


def tool_schemas(span: Span) -> list[dict[str, Any]]:
    a = span.attrs
    out = []
    for item in indexed(a, "llm.tools"):
        doc = json_attribute(item, "tool.json_schema")
        if isinstance(doc, dict) and "function" in doc:
            out.append({"type": "function", "function": doc["function"]})
    for k, item in enumerate(indexed(a, "llm.request.functions")):
        # OpenLLMetry: name, description and the schema as JSON text (``parameters`` from its OpenAI
        # instrumentation, ``input_schema`` from its Anthropic one)
        key = "parameters" if "parameters" in item else "input_schema"
        full = f"llm.request.functions.{k}.{key}"
        schema = json_attribute({full: item.get(key)}, full)
        fn: dict[str, Any] = {"name": item.get("name")}
        if item.get("description") is not None:
            fn["description"] = item["description"]
        fn["parameters"] = schema if isinstance(schema, dict) else {"type": "object", "properties": {}}
        if item.get("name"):
            out.append({"type": "function", "function": fn})
    for d in json_attribute(a, "gen_ai.tool.definitions") or []:
        if isinstance(d, dict) and d.get("name"):
            fn = d.get("function") or {k: d.get(k) for k in ("name", "description", "parameters")}
            out.append({"type": "function", "function": fn})
    return out

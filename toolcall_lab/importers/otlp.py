"""OpenTelemetry traces as OTLP JSON -> traces: GenAI semantic conventions and OpenInference.

Accepts what Phoenix, Logfire, OpenLLMetry and other exporters write: an object with
``resourceSpans``, a list of them, or one per line. A model call is a span with
``gen_ai.operation.name`` ``chat`` / ``text_completion`` / ``generate_content`` (GenAI conventions),
``openinference.span.kind`` ``LLM`` (OpenInference), or, from OpenLLMetry (Traceloop), which sets
neither before its 0.54 releases, ``llm.request.type`` ``chat`` / ``completion`` (``openai.chat``,
``anthropic.chat``) or ``traceloop.span.kind`` ``llm``; a tool execution is ``execute_tool``, ``TOOL``
or ``traceloop.span.kind`` ``tool`` (its ``workflow`` / ``task`` / ``agent`` spans only group others).
A model span around another model span (one call instrumented twice, e.g. LangChain's and OpenAI's
instrumentations) is counted once, the inner one, with a note.

Messages, in order of preference: OpenInference ``input.value`` / ``output.value`` when they hold the
provider's request and chat-completion response (kept as they are); GenAI ``gen_ai.input.messages`` /
``gen_ai.output.messages`` / ``gen_ai.system_instructions`` (parts converted to chat messages);
flattened ``llm.input_messages.N.message.*`` / ``llm.output_messages.N.message.*`` (OpenInference)
and ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` (OpenLLMetry: tool calls as ``tool_calls.K.*``,
Anthropic content blocks as JSON text, ``tool_result`` blocks read as tool messages, a thinking block as
a ``thinking`` completion that is not the message). Converted responses are rebuilt bodies (the notes
say so); their token counts are the span's (``gen_ai.usage.*``, ``llm.usage.total_tokens``,
``llm.token_count.*``). Tool schemas: ``llm.tools``, ``gen_ai.tool.definitions`` or OpenLLMetry's
``llm.request.functions.N.*``.

Model calls are grouped into conversations within an OTLP trace: a call continues a conversation
whose last response returned tool calls when its input messages extend that response's request (the
same messages first, then more) or answer one of its calls by id; otherwise it starts a new one
(agents that re-prompt, planning calls). Conversations without any tool call are reported and
skipped unless ``include_no_calls``.

Where each number comes from:

- model latency (``recorded``): the model span's duration (the instrumented client call);
- tool duration (``recorded``): the tool span's duration, the span matched to its call by the
  strongest evidence, for the whole batch at once (`_otlp_tools`): the result the next model span's
  input sends back for the call's id (what the model saw), when one span of that tool shows it; else
  the call id (``gen_ai.tool.call.id``, ``tool_call.id``); else the arguments the span shows
  (``gen_ai.tool.call.arguments``, ``tool_arguments``, OpenInference ``input.value``, OpenLLMetry
  ``traceloop.entity.input``); else the tool's name and the order within the batch, which the report
  says may cross two calls of one tool. The note says which. A span whose call id, arguments or result
  contradict the call it is matched to is damage (the line names the span, what each says and what
  decided). The trace is placed as recorded, so tool spans that overlapped overlap and the mode is
  what the spans show;
- without tool spans, the tool time is not in the export: the gap from the end of the model span to
  the start of the conversation's next model span holds the batch and the agent's own work. For one
  call it is the call's duration, an upper bound (``recorded``, the note says so); for a batch of N
  it is ``estimated`` as gap / N per call, one after another (the export cannot tell which ran when).

Results: what the next model call's input sends back for the call's id (an ``is_error`` one is an
error), the tool span's own result (``gen_ai.tool.call.result``, ``output.value``) when the next
request holds none (a span result that differs from what the model was sent is reported);
else OpenLLMetry's ``traceloop.entity.output`` (the function's return value as JSON); else, for a
single call, the messages the agent sent back after echoing the response (e.g. smolagents'
``Observation:`` user message); else ``not_recorded``. A tool span with status ERROR is an error. A
span without valid start and end times is reported; numbers resting on it are placeholders. A model
span whose output cannot be read (an attribute cut by a length limit, content not captured) is
rebuilt from the next model span whose input extends its request (that input holds the assistant
message it returned), else from the tool spans that ran after it when each shows its call id, name
and arguments (its text is then unknown): DAMAGED, saying which. Token counts that are not whole
numbers >= 0 are left out, each with a DAMAGED line. A span sent twice (identical but for the
export's bookkeeping counts) is read once; an id alone never makes two spans one: spans sharing a
traceId and spanId that differ in anything read from them are each read (DAMAGED), model spans
included, so no call they hold vanishes from the counts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    MODEL_PLACEHOLDER,
    MODEL_S,
    ImportResult,
    Issue,
    Result,
    ResultStatus,
    Segment,
    SourceError,
    Turn,
    build_result,
    call_entry,
    completion,
    slugify,
    text_of,
)
from toolcall_lab.importers._files import import_folder, json_error, not_empty, read_text, wrong_kind
from toolcall_lab.importers._otlp_spans import (
    BadAttribute,
    Span,
    in_time_order,
    request_messages,
    response_body,
    spans_of,
    tool_schemas,
    usage,
)
from toolcall_lab.importers._otlp_tools import (
    UNREADABLE,
    SpanKey,
    loads,
    match_batch,
    span_arguments_text,
    span_key,
    tool_call_id,
    tool_name,
)
from toolcall_lab.records import Timing
from toolcall_lab.trace import RESULT_NOT_RECORDED


def _read(path: Path, issues: list[Issue]) -> list[Span]:
    """The spans of a JSON export, or of one export per line (an unreadable line is reported)."""
    text = read_text(path, issues)
    not_empty(path, text, "OTLP")
    whole: json.JSONDecodeError | None = None
    try:
        docs: list[Any] = [json.loads(text)]
    except json.JSONDecodeError as exc:
        whole = exc
        docs = []
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError as exc:
                issues.append(
                    Issue(
                        kind="failed",
                        where=f"{path.name} line {number}",
                        what=f"not valid JSON ({json_error(exc, with_line=False)}): its spans are not "
                        "imported",
                        unreadable=True,
                    )
                )
    if not any(
        isinstance(d, dict) and "resourceSpans" in d
        for d in docs
        for d in (d if isinstance(d, list) else [d])
    ):
        if whole is not None and "resourceSpans" in text:  # an export cut short, not another kind
            raise SourceError(
                f"{path}: not valid JSON ({json_error(whole)}): the file is cut short or damaged"
            )
        raise wrong_kind(path, "otlp", "no 'resourceSpans' (an OTLP JSON export has them)")
    return _once([s for d in docs for s in spans_of(d, path.name, issues)], path.name, issues)


def _content(span: Span) -> tuple[Any, ...]:
    """What tells two spans sharing ids apart: everything read from them but the ids and the export's
    bookkeeping counts (`_otlp_spans.Span.rest`)."""
    return (
        span.name,
        span.parent_id,
        span.start,
        span.end,
        span.lone_start,
        span.attrs,
        span.error,
        span.rest,
    )


def _differences(span: Span, first: Span) -> str:
    """How `span` differs from `first` (both share ids), for the DAMAGED line."""
    found = [
        what
        for what, a, b in (
            ("name", span.name, first.name),
            ("parent", span.parent_id, first.parent_id),
            ("times", (span.start, span.end, span.lone_start), (first.start, first.end, first.lone_start)),
            ("attributes", span.attrs, first.attrs),
            ("status", span.error, first.error),
            ("other fields", span.rest, first.rest),
        )
        if a != b
    ]
    if "times" in found and span.start is not None and first.start is not None:
        found[found.index("times")] = f"times (starts {span.start - first.start:+.3f} s from it)"
    return ", ".join(found)


def _once(spans: list[Span], where: str, issues: list[Issue]) -> list[Span]:
    """Each span once: a span exported twice (same traceId and spanId, identical but for the export's
    bookkeeping counts: exporters retry) is read once, and reported. An id alone never makes two
    spans one: spans sharing ids that differ in anything read from them (name, parent, times,
    attributes, status, events...) are each read (DAMAGED), each with its own `Span.copy`, so no call
    they hold vanishes; children naming the shared id follow the first."""
    kept: list[Span] = []
    holders: dict[tuple[str, str], list[Span]] = {}
    repeats: dict[tuple[str, str, int], int] = {}
    for span in spans:
        key = (span.trace_id, span.span_id)
        same_ids = holders.setdefault(key, [])
        twin = next((s for s in same_ids if _content(s) == _content(span)), None)
        if twin is not None:
            repeats[(*key, twin.copy)] = repeats.get((*key, twin.copy), 1) + 1
            continue
        if same_ids:
            first = same_ids[0]
            span.copy = len(same_ids)
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{where} trace {span.trace_id} span {span.span_id} ({span.name}, "
                    f"copy {span.copy + 1})",
                    what=f"has the traceId and spanId of another span ({first.name}): both are read (they "
                    f"differ in {_differences(span, first)}; a shared id is no evidence that they are one "
                    "span); children naming the id follow the first",
                )
            )
        same_ids.append(span)
        kept.append(span)
    for (trace_id, span_id, copy), n in repeats.items():
        span = holders[(trace_id, span_id)][copy]
        issues.append(
            Issue(
                kind="damaged",
                where=f"{where} trace {trace_id} span {span_id} ({span.name})",
                what=f"exported {n} times (same traceId and spanId, identical but for the export's "
                "bookkeeping counts): read once",
            )
        )
    return kept


def _outermost_removed(models: list[Span], spans: list[Span], issues: list[Issue], where: str) -> list[Span]:
    """The model spans less those that wrap another model span of their trace: one call instrumented
    twice (a framework's span around the client library's, e.g. OpenLLMetry's LangChain and OpenAI
    instrumentations together). The inner span is the client call; the wrapper is reported."""
    by_id: dict[tuple[str, str], Span] = {}
    for s_ in spans:  # (spans sharing ids: the first holds them, as `_once` says)
        by_id.setdefault((s_.trace_id, s_.span_id), s_)
    wrappers: dict[SpanKey, Span] = {}
    for s in models:
        parent = s.parent_id
        seen: set[str] = set()
        while parent is not None and parent not in seen:
            seen.add(parent)
            above = by_id.get((s.trace_id, parent))
            if above is not None and above is not s and above.kind == "model":
                wrappers[span_key(above)] = s
                break
            parent = above.parent_id if above is not None else None
    for key, inner in wrappers.items():
        outer = by_id[key[:2]]
        issues.append(
            Issue(
                kind="note",
                where=f"{where} trace {outer.trace_id} span {outer.span_id} ({outer.name})",
                what=f"a model span around another model span ({inner.span_id}, {inner.name}): the same "
                "call instrumented twice; the inner one (the client call) is imported, this one is not "
                "counted",
            )
        )
    return [s for s in models if span_key(s) not in wrappers]


def _signature(messages: list[dict[str, Any]]) -> list[tuple[Any, str]]:
    return [(m.get("role"), text_of(m.get("content")).strip()) for m in messages]


def _calls(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(((body.get("choices") or [{}])[0].get("message") or {}).get("tool_calls") or [])


@dataclass(slots=True)
class _Conversation:
    spans: list[tuple[Span, dict[str, Any], bool, list[dict[str, Any]]]] = field(default_factory=list)
    """(span, response body, body is the provider's, input messages)"""

    def continued_by(self, request: list[dict[str, Any]]) -> bool:
        """Whether `request` goes on from this conversation's last response (see the module notes)."""
        _, body, _, last = self.spans[-1]
        calls = _calls(body)
        if not calls:
            return False
        ids = {c.get("id") for c in calls if c.get("id")}
        if any(m.get("role") == "tool" and m.get("tool_call_id") in ids for m in request):
            return True
        return len(request) > len(last) and _signature(request[: len(last)]) == _signature(last)


def _span_result(span: Span) -> tuple[Any, str]:
    """A tool span's result and where it came from ('' when it holds none)."""
    for key in ("gen_ai.tool.call.result", "output.value", "tool_response"):  # (the last: pydantic-ai)
        if span.attrs.get(key) is not None:
            return span.attrs[key], ""
    raw = span.attrs.get("traceloop.entity.output")
    if raw is None:
        return None, ""
    value = loads(raw)
    if value is UNREADABLE:
        return raw, (
            "; result: the span's traceloop.entity.output, which is not valid JSON (cut by a length "
            "limit?): kept as it is"
        )
    return value, "; result: the span's traceloop.entity.output (the function's return value)"


def _ancestors(span: Span, by_id: dict[tuple[str, str], Span]) -> list[str]:
    """The span ids above `span` in its trace, nearest first."""
    out: list[str] = []
    parent = span.parent_id
    while parent is not None and parent not in out:
        out.append(parent)
        above = by_id.get((span.trace_id, parent))
        parent = above.parent_id if above is not None else None
    return out


def _results(
    conv: _Conversation,
    k: int,
    tools: list[Span],
    used: set[SpanKey],
    where: str,
    by_id: dict[tuple[str, str], Span],
    issues: list[Issue],
) -> list[Result]:
    span, body, _, request = conv.spans[k]
    nxt = conv.spans[k + 1] if k + 1 < len(conv.spans) else None
    window_end = nxt[0].start if nxt and nxt[0].start is not None else float("inf")
    calls = _calls(body)
    later = nxt[3] if nxt else []
    own = [t for t in tools if t.trace_id == span.trace_id]  # a tool span belongs to its own trace
    above = _ancestors(span, by_id)
    agent = above[0] if above else None

    def closeness(t: Span) -> int:
        """How near the tool span hangs to the model span's own agent span (0: under the same one)."""
        chain = _ancestors(t, by_id)
        return min((chain.index(a) + above.index(a) for a in above if a in chain), default=len(by_id))

    def in_window(t: Span) -> bool:
        return span.start is not None and t.start is not None and span.start <= t.start < window_end

    candidates = [t for t in own if span_key(t) not in used]

    def answer_to(cid: Any) -> dict[str, Any] | None:
        """The tool message of the next model call answering call `cid` (what the model was sent)."""
        found = (m for m in later if m.get("role") == "tool" and cid and m.get("tool_call_id") == cid)
        return next(found, None)

    answers = [answer_to(c.get("id")) for c in calls]
    matched = match_batch(
        calls,
        candidates,
        in_window,
        closeness if agent is not None else lambda t: 0,
        where,
        span.span_id,
        issues,
        answers=[None if a is None else text_of(a.get("content")) for a in answers],
        result_of=lambda t: None if (v := _span_result(t)[0]) is None else text_of(v),
    )
    taken = {span_key(m.span) for m in matched if m is not None}
    out: list[Result | None] = []
    for call, found, answer in zip(calls, matched, answers, strict=True):
        cid = call.get("id")
        match, how_matched = (found.span, found.how) if found is not None else (None, "")
        twins = [  # another span of this call in this batch's time, not another call's: exported twice
            t
            for t in candidates
            if match is not None
            and cid
            and span_key(t) not in taken
            and tool_call_id(t) == cid
            and tool_name(t) == tool_name(match)
            and (in_window(t) or t.start is None)
        ]
        differ = any((t.start, t.end) != (match.start, match.end) for t in twins if match is not None)
        if match is not None:
            used.add(span_key(match))
            value, whence = _span_result(match)
            sent = None if answer is None else text_of(answer.get("content"))
            if answer is not None and (value is None or whence or sent != text_of(value)):
                # what the model was sent back beats the function's serialized return value, and a
                # span's own result that is not what the model saw (the disagreement is reported)
                value, whence = answer.get("content"), "; result: the tool message of the next model call"
            failed = match.error or (answer is not None and answer.get("is_error"))
            status: ResultStatus = "error" if failed else "ok" if value is not None else "not_recorded"
            shown = (
                text_of(value)
                if value is not None
                else str(match.error)
                if match.error
                else RESULT_NOT_RECORDED
            )
            if not match.timed:
                out.append(
                    Result(
                        text=shown,
                        duration_s=0.0,
                        status=status,
                        where=f"{where} span {match.span_id}",
                        timing=Timing(source="placeholder", note="the tool span has no valid times: 0 s"),
                    )
                )
                continue
            out.append(
                Result(
                    text=shown,
                    duration_s=match.duration_s,
                    status=status,
                    end=match.end,
                    start_known=not differ,
                    where=f"{where} span {match.span_id}",
                    timing=Timing(
                        source="recorded",
                        note=f"the tool span's duration ({match.name}, {how_matched})"
                        + whence
                        + ("" if value is not None or match.error else "; the span holds no result")
                        + (
                            "; another span of this call id has other times (dropped as a duplicate): "
                            "not evidence of the mode"
                            if differ
                            else ""
                        ),
                    ),
                )
            )
            continue
        out.append(None)
    unmatched = [i for i, r in enumerate(out) if r is None]
    if not unmatched:
        return [r for r in out if r is not None]
    gap = None
    next_start = None if nxt is None else nxt[0].start if nxt[0].start is not None else nxt[0].lone_start
    lone_note = ""
    if span.end is not None and next_start is not None and next_start >= span.end:
        gap = next_start - span.end
        if nxt is not None and nxt[0].start is None:  # (it ends before it starts: its start fits here)
            lone_note = (
                f"; the next model span ({nxt[0].span_id}) ends before it starts: its start, which comes "
                "after this span's end, is used"
            )
    n = len(unmatched)
    for j, i in enumerate(unmatched):
        call = calls[i]
        cid = call.get("id")
        answer = next(
            (m for m in later if m.get("role") == "tool" and cid and m.get("tool_call_id") == cid), None
        )
        text: str | None = None
        how = ""
        status = "error" if answer is not None and answer.get("is_error") else "ok"
        if answer is not None:
            text = text_of(answer.get("content"))
            how = "; result: the tool message of the next model call"
        elif nxt is not None and len(calls) == 1:
            tail = later[len(request) + 1 :] if len(later) > len(request) else []
            if tail:
                text = "\n\n".join(text_of(m.get("content")) for m in tail)
                how = "; result: the messages the agent sent back after the response (no tool message)"
        if text is None:
            out[i] = Result.missing(
                f"{where} span {span.span_id} call {cid or i}",
                why="no tool span and no tool message holds this call's result: 0 s",
            )
            continue
        if gap is None:
            out[i] = Result(
                text=text,
                status=status,
                duration_s=0.0,
                where=f"{where} span {span.span_id}",
                timing=Timing(
                    source="placeholder",
                    note="no tool span, and the model spans' times do not give a gap: 0 s",
                ),
            )
            continue
        assert nxt is not None and next_start is not None
        if n == 1:
            out[i] = Result(
                text=text,
                status=status,
                duration_s=gap,
                end=next_start,
                start_known=False,
                where=f"{where} span {span.span_id}",
                timing=Timing(
                    source="recorded",
                    note=f"no tool span: the gap between this model span and the next ({gap:.3f} s), an "
                    "upper bound that includes the agent's own work" + how + lone_note,
                    covers="upper_bound",
                ),
            )
        else:
            out[i] = Result(
                text=text,
                status=status,
                duration_s=gap / n,
                end=next_start - (n - 1 - j) * gap / n,
                start_known=False,
                where=f"{where} span {span.span_id}",
                timing=Timing(
                    source="estimated",
                    note=f"no tool span: the {gap:.3f} s gap to the next model span holds all {n} calls and "
                    f"the agent's own work; gap / {n} each, placed one after another (the export does not "
                    "say which ran when)" + how + lone_note,
                    covers="upper_bound",
                ),
            )
    return [r for r in out if r is not None]


def _rebuilt(
    span: Span, n: int, models: list[Span], tools: list[Span], why: str, damage: list[str]
) -> tuple[dict[str, Any], str] | None:
    """The response of a model span whose output cannot be read (cut by an exporter's length limit),
    from the other evidence the export holds, with what the DAMAGED line says: the next model span
    of its trace whose input extends this span's request holds the assistant message the model gave
    (what the agent sent back); else the tool spans that ran after it give its calls (their ids,
    names and arguments; its text is then unknown). None when neither does."""
    try:
        request = request_messages(span)
    except (ValueError, TypeError, AttributeError, KeyError):
        return None
    later = [m for m in models if m.trace_id == span.trace_id and (m.order or 0.0) > (span.order or 0.0)]
    a = span.attrs
    model = a.get("gen_ai.response.model") or a.get("llm.model_name") or a.get("gen_ai.request.model")
    rid = str(a.get("gen_ai.response.id") or f"otlp-{span.span_id}-{n}")
    for nxt in later:
        try:
            seen = request_messages(nxt)
        except (ValueError, TypeError, AttributeError, KeyError):
            continue
        k = len(request)
        extends = len(seen) > k and _signature(seen[:k]) == _signature(request)
        if extends and seen[k].get("role") == "assistant":
            message = {"role": "assistant", "content": seen[k].get("content")}
            if seen[k].get("tool_calls"):
                message["tool_calls"] = [dict(c) for c in seen[k]["tool_calls"]]
            body = completion(message, response_id=rid, model=model, usage=usage(a, damage))
            return body, (
                f"{why}: the response is rebuilt from the input messages of the next model span "
                f"({nxt.span_id}), which hold the assistant message this call returned"
            )
    end = next((m.start for m in later if m.start is not None), float("inf"))
    ran = [
        t
        for t in tools
        if t.trace_id == span.trace_id and t.start is not None and (span.start or 0.0) <= t.start < end
    ]
    if not ran or any(span_arguments_text(t) is None for t in ran):
        return None  # (a call whose arguments no span shows is not known)
    calls = [
        call_entry(
            str(tool_call_id(t)) if tool_call_id(t) else None,
            str(tool_name(t)),
            str(span_arguments_text(t)),
        )
        for t in ran
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    body = completion(message, response_id=rid, model=model, usage=usage(a, damage))
    return body, (
        f"{why}: the response is rebuilt from the {len(ran)} tool span(s) that ran after it (their call "
        "ids, names and arguments; whatever text it held is not known)"
    )


def _file(path: Path, *, include_no_calls: bool) -> ImportResult:
    issues: list[Issue] = []
    spans = in_time_order(_read(path, issues))
    models = _outermost_removed([s for s in spans if s.kind == "model"], spans, issues, path.name)
    tools = [s for s in spans if s.kind == "tool"]
    if not models:
        raise wrong_kind(
            path,
            "otlp",
            f"{len(spans)} span(s) but no model call span (gen_ai.operation.name chat / "
            "text_completion / generate_content, openinference.span.kind LLM, or OpenLLMetry's "
            "llm.request.type chat / completion or traceloop.span.kind llm)",
        )
    conversations: list[_Conversation] = []
    open_: dict[str, list[_Conversation]] = {}
    source_calls = 0
    by_id: dict[tuple[str, str], Span] = {}
    for s_ in spans:  # (spans sharing ids: the first holds them, as `_once` says)
        by_id.setdefault((s_.trace_id, s_.span_id), s_)
    unreadable: list[tuple[Span, str]] = []
    for n, span in enumerate(models):
        part = "output"
        damage: list[str] = []
        body: dict[str, Any] | None = None
        try:
            try:
                body, own = response_body(span, n, damage)
            except (ValueError, TypeError, AttributeError, KeyError) as cut:
                rebuilt = _rebuilt(span, n, models, tools, str(cut), damage)
                if rebuilt is None:
                    raise
                body, own = rebuilt[0], False
                damage.append(rebuilt[1])
            part = "input messages"
            request = request_messages(span, damage)
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            why = (
                str(exc)
                if isinstance(exc, BadAttribute) or (part == "output" and isinstance(exc, ValueError))
                else f"its {part} could not be read ({exc!r})"
            )
            unreadable.append((span, why))
            known = len(_calls(body)) if body is not None else None  # the output was read: calls known
            source_calls += known or 0
            issues.append(
                Issue(
                    kind="failed",
                    where=f"{path.name} trace {span.trace_id} span {span.span_id} ({span.name})",
                    what=f"{why}: this model call is not imported ("
                    + (
                        "its tool calls are unknown"
                        if known is None
                        else "its response was read: it holds no tool call"
                        if known == 0
                        else f"its response was read, but its {known} tool call(s) cannot be placed in a "
                        "conversation without its request"
                    )
                    + "); the rest of the export is",
                    model_calls=1,
                    calls=known or 0,
                    unreadable=known is None,
                )
            )
            continue
        issues += [
            Issue(
                kind="damaged",
                where=f"{path.name} trace {span.trace_id} span {span.span_id} ({span.name})",
                what=d,
            )
            for d in damage
        ]
        source_calls += len(_calls(body))
        candidates = [c for c in open_.get(span.trace_id, []) if c.continued_by(request)]
        if candidates:
            conv = candidates[-1]
        else:
            conv = _Conversation()
            conversations.append(conv)
            open_.setdefault(span.trace_id, []).append(conv)
        conv.spans.append((span, body, own, request))
    segments: list[Segment] = []
    used: set[SpanKey] = set()
    name = slugify(path.stem)
    for c, conv in enumerate(conversations):
        calls = sum(len(_calls(b)) for _, b, _, _ in conv.spans)
        first = conv.spans[0][0]
        where = f"trace {first.trace_id} conversation {c + 1} (from span {first.span_id})"
        if not calls and not include_no_calls:
            issues.append(
                Issue(
                    kind="skipped",
                    where=where,
                    what=f"{len(conv.spans)} model call(s) without tool calls (nothing to execute; "
                    "include_no_calls=True imports them)",
                    model_calls=len(conv.spans),
                )
            )
            continue
        turns = []
        for k, (span, body, _own, _req) in enumerate(conv.spans):
            results = _results(conv, k, tools, used, path.name, by_id, issues)
            if span.timed:
                assert span.start is not None and span.end is not None
                latency, timing, end = (
                    span.duration_s,
                    Timing(source="recorded", note=f"the model span's duration ({span.name})"),
                    span.end,
                )
            else:
                latency, end = MODEL_S, None
                timing = Timing(
                    source="placeholder", note=f"the model span has no valid times: {MODEL_PLACEHOLDER.note}"
                )
            ends = [r.end for r in results if r.end is not None]
            turns.append(
                Turn(
                    payloads=[body],
                    latency_s=latency,
                    timing=timing,
                    results=results,
                    recorded_start=span.start,
                    recorded_end=max([t for t in [end, *ends] if t is not None], default=None),
                    model_end=end,
                )
            )
        owned = all(own for _, _, own, _ in conv.spans)
        a = first.attrs
        last = conv.spans[-1][0]
        lost = next(
            (
                (bad, why)
                for bad, why in unreadable
                if bad.trace_id == last.trace_id
                and (bad.start or 0.0) >= (last.start or 0.0)
                and _calls(conv.spans[-1][1])
            ),
            None,
        )
        try:
            schemas = tool_schemas(first)
        except BadAttribute as exc:
            schemas = []
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{path.name} trace {first.trace_id} span {first.span_id} ({first.name})",
                    what=f"{exc}: the tool schemas are inferred from the calls instead",
                )
            )
        segment = Segment(
            title=f"{path.name} {where}",
            slug=f"{name}__conv{c + 1:02d}",
            source=f"{path}#trace={first.trace_id}&span={first.span_id}",
            initial=conv.spans[0][3],
            tools=schemas,
            turns=turns,
            provider=str(
                a.get("gen_ai.provider.name") or a.get("gen_ai.system") or a.get("llm.provider") or "otlp"
            ),
            model=str(
                a.get("gen_ai.response.model") or a.get("llm.model_name") or a.get("gen_ai.request.model")
            ),
            notes="OTLP spans: model latency from each model span's duration; tool durations from tool "
            "spans, or without them from the gap to the next model span (one call: an upper bound; "
            "a batch: estimated, gap / N each); "
            + (
                "responses are the providers' bodies (output.value)"
                if owned
                else "responses rebuilt from the span attributes (not verbatim)"
            ),
        )
        if lost is not None:
            segment.status, segment.reason = "incomplete", "next_round_not_representable"
            segment.error = f"the next model span of this trace ({lost[0].span_id}) is unreadable: {lost[1]}"
            segment.closing = f"{segment.error}: no model response follows here"
        segments.append(segment)
    ran = {(t.trace_id, str(tool_call_id(t))): t for t in tools if span_key(t) in used}
    asked = {str(c.get("id")) for conv in conversations for _, b, _, _ in conv.spans for c in _calls(b)}
    asking: dict[tuple[str, str], tuple[str, ...]] = {}  # (trace, call id) -> the ids of the message asking
    for conv in conversations:
        for span, _, _, request in conv.spans:
            for m in request:
                ids = tuple(str(c.get("id")) for c in m.get("tool_calls") or [] if isinstance(c, dict))
                for cid in ids if m.get("role") == "assistant" else ():
                    asking.setdefault((span.trace_id, cid), ids)
    lost_messages: set[tuple[str, tuple[str, ...]]] = set()
    lost_model_calls = 0
    for t in tools:
        twin = ran.get((t.trace_id, str(tool_call_id(t)))) if tool_call_id(t) else None
        if span_key(t) not in used and twin is not None:
            other = (tool_name(t), span_arguments_text(t), _span_result(t)[0]) != (
                tool_name(twin),
                span_arguments_text(twin),
                _span_result(twin)[0],
            )
            source_calls += other
            issues.append(
                Issue(
                    kind="failed",
                    where=f"tool span {t.span_id} ({t.name})",
                    what=f"another span of tool call {tool_call_id(t)} (span {twin.span_id} has it) with "
                    "another name, arguments or result: a call runs once in a trace, so this one is not "
                    "represented (the one the model call matched is imported)",
                    calls=1,
                )
                if other
                else Issue(
                    kind="damaged",
                    where=f"tool span {t.span_id} ({t.name})",
                    what=f"another span of tool call {tool_call_id(t)} (span {twin.span_id} has it): a call "
                    "runs once, so this duplicate is dropped and one execution imported",
                )
            )
        elif span_key(t) not in used:
            lost_with = next(
                (
                    (bad, why)
                    for bad, why in reversed(unreadable)
                    if bad.trace_id == t.trace_id and (bad.order or 0.0) <= (t.order or 0.0)
                ),
                None,
            )
            message = asking.get((t.trace_id, str(tool_call_id(t)))) if tool_call_id(t) else None
            if lost_with is None and message is not None and str(tool_call_id(t)) not in asked:
                new = (t.trace_id, message) not in lost_messages
                lost_messages.add((t.trace_id, message))
                source_calls += 1
                lost_model_calls += new
                issues.append(
                    Issue(
                        kind="failed",
                        where=f"tool span {t.span_id} ({t.name})",
                        what=f"ran call {tool_call_id(t)}, which a later model span's input shows the model "
                        "asked for, but the model span that returned it is not in the export: not imported; "
                        + (
                            "the model call that made it is counted in the source's model calls"
                            if new
                            else "made by the same lost model call as call "
                            + next((c for c in message if c != str(tool_call_id(t))), "")
                        ),
                        calls=1,
                        model_calls=int(new),
                    )
                )
                continue
            issues.append(
                Issue(
                    kind="skipped",
                    where=f"tool span {t.span_id} ({t.name})",
                    what=f"no imported model call's tool call matched it: the model span before it "
                    f"({lost_with[0].span_id}) could not be read ({lost_with[1]}), so the call it ran is "
                    "not known"
                    if lost_with is not None
                    else "no model call's tool call matched it (ran outside a model's request)",
                )
            )
    return build_result(
        "otlp",
        str(path),
        segments,
        source_calls=source_calls,
        source_model_calls=len(models) + lost_model_calls,
        issues=issues,
    )


def import_otlp(path: str | Path, *, include_no_calls: bool = False) -> ImportResult:
    """An OTLP JSON export (``.json`` / ``.jsonl``), or a folder of them, -> traces."""
    p = Path(path)
    if p.is_dir():
        return import_folder(
            "otlp", p, (".json", ".jsonl"), lambda f: _file(f, include_no_calls=include_no_calls)
        )
    return _file(p, include_no_calls=include_no_calls)

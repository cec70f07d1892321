"""inspect_ai eval logs (JSON format) -> one trace per sample (more where the agent starts over).

A sample's ``events`` hold ``model`` events (the input messages, the output, and with ``call`` the raw
provider request and response) and ``tool`` events (call id, function, arguments, result or error).
A model event continues a conversation when its input answers one of that conversation's last calls
or repeats its last input and adds to it; otherwise it starts a new trace from its input (the solver
asked again; or an agent run as a tool, whose model events sit inside the tool's span or time: a
sub-agent, titled so, never merged into the main agent's rounds). A sample inspect stopped (an error,
a message/token/time limit) says so in the report and in the trace's outcome. Long strings are
stored once in ``attachments`` and referenced as ``attachment://``; they are resolved. Binary
``.eval`` logs (inspect's default: a zip of ``header.json`` and one JSON file per sample) are read
as they are.

Where each number comes from (``recorded``):

- model latency: the event's ``working_time`` (inspect's time for the generate call, without time
  spent waiting for a connection slot); the note gives ``completed - timestamp`` too;
- tool duration: the tool event's ``working_time`` (likewise).

Responses: the raw ``call.response`` when it is a chat-completion body (the OpenAI SDK's dump: values
exact, layout not the wire's), else rebuilt from inspect's ``output`` message (arguments serialised
from the object). A tool event with an ``error`` is an error (``timeout`` errors are timeouts).
Each trace is placed on the events' timeline (each call ends at its event's ``completed``). An event
without valid times is reported; numbers resting on it are placeholders; repeated model and tool
events are read once and model events out of time order are read in time order (all reported).
A call's tool event is found by the strongest evidence, for the whole response at once: the call id
where the event ran the call's function (a provider reusing ids in a later round: the first unused
event after the response), else the function and arguments (the event's id is then wrong: damage);
an event matched by its id whose arguments are not the call's is damage too; several events that
could be one call's, or an event no call is left for, are reported.
"""

from __future__ import annotations

import itertools
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    MODEL_S,
    TOLERANCE_S,
    ImportResult,
    Issue,
    Result,
    Segment,
    SourceError,
    Turn,
    build_result,
    call_entry,
    completion,
    slugify,
    stamp_or_none,
    text_of,
    with_choices,
    zone_less_note,
)
from toolcall_lab.importers._figures import usable_figure
from toolcall_lab.importers._files import import_folder, load_json, not_empty, read_text, wrong_kind
from toolcall_lab.records import Timing

_ATTACHMENT = "attachment://"


def _resolve(value: Any, attachments: dict[str, str]) -> Any:
    if isinstance(value, str) and value.startswith(_ATTACHMENT):
        return attachments.get(value[len(_ATTACHMENT) :], value)
    if isinstance(value, dict):
        return {k: _resolve(v, attachments) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, attachments) for v in value]
    return value


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(
            str(c.get("text", "")) for c in content if isinstance(c, dict) and c.get("type") == "text"
        )
    return text_of(content)


def _chat_message(m: dict[str, Any]) -> dict[str, Any]:
    """An inspect ChatMessage -> an OpenAI chat message."""
    role = m.get("role")
    out: dict[str, Any] = {"role": role, "content": _text(m.get("content"))}
    if role == "assistant":
        out["content"] = out["content"] or None
        calls = [
            call_entry(c.get("id"), str(c.get("function")), json.dumps(c.get("arguments") or {}))
            for c in m.get("tool_calls") or []
        ]
        if calls:
            out["tool_calls"] = calls
    if role == "tool":
        out["tool_call_id"] = m.get("tool_call_id")
    return out


def _response(event: dict[str, Any], n: int) -> tuple[dict[str, Any], bool]:
    """The response body, and whether it is the provider's own (True) or rebuilt (False)."""
    raw = (event.get("call") or {}).get("response")
    if isinstance(raw, dict) and raw.get("object") == "chat.completion" and raw.get("choices"):
        return json.loads(json.dumps(raw)), True
    output = event.get("output") or {}
    choices = [c for c in output.get("choices") or [] if isinstance(c, dict)] or [{}]
    first, *others = [_chat_message(c.get("message") or {"role": "assistant"}) for c in choices]
    body = completion(first, response_id=f"inspect-{n}", model=output.get("model"))
    return with_choices(body, others), False  # n > 1: each other choice a trace (_build.other_choices)


def _tools(event: dict[str, Any]) -> list[dict[str, Any]]:
    raw = ((event.get("call") or {}).get("request") or {}).get("tools")
    if isinstance(raw, list) and raw:
        return [t for t in raw if isinstance(t, dict) and "function" in t]
    return [
        {
            "type": "function",
            "function": {
                "name": t.get("name"),
                "description": t.get("description", ""),
                "parameters": t.get("parameters") or {},
            },
        }
        for t in event.get("tools") or []
        if isinstance(t, dict)
    ]


def _input(event: dict[str, Any]) -> list[dict[str, Any]]:
    raw = ((event.get("call") or {}).get("request") or {}).get("messages")
    if isinstance(raw, list) and raw:
        return [dict(m) for m in raw]
    return [_chat_message(m) for m in event.get("input") or [] if isinstance(m, dict)]


def _span(event: dict[str, Any]) -> tuple[float | None, float | None]:
    """An event's start and end; (None, None) when an end is not valid. Logs of inspect versions
    before ``completed`` existed stamp an event when it was logged, after the call: no span."""
    start = stamp_or_none(event.get("timestamp"))
    done = stamp_or_none(event.get("completed"))
    if start is None or done is None or done < start - TOLERANCE_S:
        return None, None
    return start, done


def _duration(
    event: dict[str, Any], what: str, where: str, issues: list[Issue]
) -> tuple[float | None, Timing]:
    """An event's working_time (or completed - timestamp), with its label; None when not trusted."""
    start, done = _span(event)
    working = event.get("working_time")
    if event.get("completed") is None and stamp_or_none(event.get("timestamp")) is not None:
        return _without_completed(event, what, where, issues)
    if start is None or done is None:
        issues.append(
            Issue(
                kind="damaged",
                where=where,
                what=f"{what} event without valid times (timestamp {event.get('timestamp')!r}, completed "
                f"{event.get('completed')!r}): its duration is a placeholder",
            )
        )
        return None, Timing(source="placeholder", note=f"the {what} event has no valid times")
    seconds = usable_figure(
        working,
        name="working_time",
        where=where,
        issues=issues,
        at_most=done - start,
        instead="completed - timestamp is used",
    )
    if seconds is not None:
        return seconds, Timing(
            source="recorded", note=f"{what} event working_time (completed - timestamp: {done - start:.3f} s)"
        )
    return done - start, Timing(
        source="recorded",
        note=f"{what} event completed - timestamp"
        + (f" (working_time {working!r} is not usable: not used)" if working is not None else ""),
    )


def _without_completed(
    event: dict[str, Any], what: str, where: str, issues: list[Issue]
) -> tuple[float | None, Timing]:
    """An event of a log written before inspect recorded ``completed`` (its ``timestamp`` is when it
    was logged, after the call): its ``working_time``, else a model output's ``time`` (inspect's own
    measurement of the generate call), unchecked against timestamps; else a placeholder."""
    for key, value in (
        ("working_time", event.get("working_time")),
        ("output.time", (event.get("output") or {}).get("time") if what == "model" else None),
    ):
        seconds = usable_figure(value, name=key, where=where, issues=issues)
        if seconds is not None:
            return seconds, Timing(
                source="recorded",
                note=f"{what} event {key}: inspect's measurement (the event has no completed time, so "
                "the figure is not checked against timestamps and the call is not placed on the log's "
                "timeline)",
            )
    issues.append(
        Issue(
            kind="gap",
            where=where,
            what=f"{what} event without a completed time or working_time (an older inspect log): its "
            "duration is a placeholder",
        )
    )
    return None, Timing(source="placeholder", note=f"the {what} event has no completed time or working_time")


def _in_order(label: str, model_events: list[dict[str, Any]], issues: list[Issue]) -> list[dict[str, Any]]:
    """Model events read once each, in time order (repeats and events out of order are reported)."""
    seen: dict[str, int] = {}
    kept = []
    for k, e in enumerate(model_events):
        key = json.dumps(
            [e.get("timestamp"), e.get("completed"), e.get("output")], sort_keys=True, default=str
        )
        if key in seen:
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{label} model event {k}",
                    what=f"repeats model event {seen[key]} (same times and output): read once",
                )
            )
            continue
        seen[key] = k
        kept.append(e)
    starts = [stamp_or_none(e.get("timestamp")) for e in kept]
    if all(t is not None for t in starts) and any(
        b < a - TOLERANCE_S for a, b in itertools.pairwise(starts) if a is not None and b is not None
    ):
        issues.append(
            Issue(
                kind="damaged",
                where=label,
                what="model events out of time order: read in the order of their timestamps",
            )
        )
        kept = [e for _, e in sorted(zip(starts, kept, strict=True), key=lambda x: x[0] or 0.0)]
    return kept


def _signature(messages: list[dict[str, Any]]) -> list[tuple[Any, str]]:
    return [(m.get("role"), text_of(m.get("content")).strip()) for m in messages]


@dataclass(slots=True)
class _Conversation:
    """One agent's conversation in a sample: its segment, and its last request and response calls."""

    segment: Segment
    request: list[dict[str, Any]]
    calls: list[str]
    answered: bool

    def continued_by(self, request: list[dict[str, Any]]) -> bool:
        """Whether `request` goes on from this conversation: it answers one of the last response's
        calls, or repeats the last request and adds to it."""
        if not self.calls:
            return False
        if any(m.get("role") == "tool" and m.get("tool_call_id") in self.calls for m in request):
            return True
        n = len(self.request)
        return len(request) > n and _signature(request[:n]) == _signature(self.request)


def _tool_spans(events: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, str | None]]:
    """inspect's spans: id -> its span_begin event, and id -> parent id."""
    begins = {str(e.get("id")): e for e in events if e.get("event") == "span_begin"}
    return begins, {k: (str(v["parent_id"]) if v.get("parent_id") else None) for k, v in begins.items()}


def _inside_tool(
    e: dict[str, Any],
    spans: tuple[dict[str, dict[str, Any]], dict[str, str | None]],
    tool_events: list[dict[str, Any]],
) -> str | None:
    """The tool a model event ran inside (an agent run as a tool): by inspect's spans when the log
    has them (a span of type ``tool`` above the event's span), else by time (inside a tool event)."""
    begins, parents = spans
    span, seen = e.get("span_id"), set()
    while isinstance(span, str) and span not in seen:
        seen.add(span)
        begin = begins.get(span)
        if begin is not None and begin.get("type") == "tool":
            return f"tool span {begin.get('name')} ({span})"
        span = parents.get(span)
    start, done = _span(e)
    if start is None or done is None:
        return None
    for te in tool_events:
        t_start, t_done = _span(te)
        if t_start is not None and t_done is not None and t_start <= start and done <= t_done:
            return f"tool call {te.get('id')} ({te.get('function')})"
    return None


def _tool_events_once(label: str, events: list[dict[str, Any]], issues: list[Issue]) -> list[dict[str, Any]]:
    """The tool events, an exact copy of an earlier one (same id, function, arguments, result and
    times) read once and reported."""
    seen: dict[str, int] = {}
    out = []
    for k, e in enumerate(events):
        fields = ("id", "function", "arguments", "result", "error", "timestamp", "completed", "working_time")
        key = json.dumps([e.get(f) for f in fields], sort_keys=True, default=str)
        if key in seen:
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{label} tool event {e.get('id')}",
                    what=f"repeats tool event {seen[key]} of the sample (the same call, arguments, result "
                    "and times): read once",
                )
            )
            continue
        seen[key] = k
        out.append(e)
    starts = [stamp_or_none(e.get("timestamp")) for e in out]
    late = next(
        (
            j
            for j, (a, b) in enumerate(itertools.pairwise(starts))
            if a is not None and b is not None and b < a - TOLERANCE_S
        ),
        None,
    )
    if late is not None:
        issues.append(
            Issue(
                kind="note",  # (no number rests on the list's order)
                where=label,
                what=f"tool events out of time order (tool event {out[late + 1].get('id')} comes after tool "
                f"event {out[late].get('id')} but starts before it): each is matched to its call by id and "
                "timed by its own timestamps",
            )
        )
    return out


def _matched_events(
    label: str,
    calls: list[dict[str, Any]],
    events: list[dict[str, Any]],
    used: set[int],
    after: float | None,
    issues: list[Issue],
) -> list[dict[str, Any] | None]:
    """The tool event that ran each call of one response, by the strongest evidence, for the whole
    batch at once: the call id where the event ran the call's function (the earliest unused one
    after the response, when a provider reuses ids), else the function and arguments (an event whose
    id is wrong is damage), else nothing (the call is not_recorded). Several events that could be a
    call's are said, never silently picked from."""
    out: list[dict[str, Any] | None] = [None] * len(calls)
    names = [str((c.get("function") or {}).get("name")) for c in calls]
    ids = [str(c.get("id")) for c in calls]
    arguments = [_loads_arguments(c) for c in calls]

    def free(e: dict[str, Any]) -> bool:
        return id(e) not in used

    def before(e: dict[str, Any]) -> bool:
        """Stamped before the response started (a provider reusing ids: an earlier round's call)."""
        at = stamp_or_none(e.get("timestamp"))
        return after is not None and at is not None and at < after - TOLERANCE_S

    events = sorted(events, key=before)  # (stable: the events after the response first, in order)
    for i in range(len(calls)):  # 1. the call id, the event having run the call's function
        same = [e for e in events if free(e) and str(e.get("id")) == ids[i] and e.get("function") == names[i]]
        exact = [e for e in same if e.get("arguments") == arguments[i]] or same
        if not exact:
            continue
        out[i] = exact[0]
        used.add(id(exact[0]))
        if exact is same and arguments[i] is not None and exact[0].get("arguments") != arguments[i]:
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{label} tool event {ids[i]}",
                    what=f"carries call id {ids[i]} and ran its function ({names[i]}), but with other "
                    "arguments than the call's: read as that call's execution by its id (the arguments "
                    "kept are the call's, as the model gave them)",
                )
            )
        if len(same) > 1:
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{label} tool event {ids[i]}",
                    what=f"{len(same)} tool events carry call id {ids[i]} ({names[i]}) and differ: the first "
                    + ("with the call's arguments" if exact is not same else "after the response")
                    + " is used (ended "
                    f"{exact[0].get('completed')}); the others are not this call's",
                )
            )
    for i in range(len(calls)):  # 2. the function and the arguments (the event's id is wrong)
        if out[i] is not None:
            continue
        found = next(
            (
                e
                for e in events
                if free(e)
                and e.get("function") == names[i]
                and e.get("arguments") == arguments[i]
                and str(e.get("id")) not in ids[i + 1 :]
            ),
            None,
        )
        if found is None:
            continue
        out[i] = found
        used.add(id(found))
        issues.append(
            Issue(
                kind="damaged",
                where=f"{label} tool event {found.get('id')}",
                what=f"ran {names[i]} with the arguments of call {ids[i]}, but carries the id "
                f"{found.get('id')}"
                + (
                    f" of another call ({names[ids.index(str(found.get('id')))]})"
                    if str(found.get("id")) in ids
                    else ""
                )
                + f": its id is wrong; it is read as call {ids[i]}'s execution",
            )
        )
    return out


def _loads_arguments(call: dict[str, Any]) -> Any:
    try:
        return json.loads((call.get("function") or {}).get("arguments") or "{}")
    except json.JSONDecodeError:
        return None


LOST_MODEL_EVENT = "whose model event is not in the log"
"""Says a tool event proves a call (and the model call that made it) the log lost: counted."""


def _sample(path: Path, log: dict[str, Any], sample: dict[str, Any], issues: list[Issue]) -> list[Segment]:
    attachments = sample.get("attachments") or {}
    events = [_resolve(e, attachments) for e in sample.get("events") or [] if isinstance(e, dict)]
    label = f"sample {sample.get('id')} epoch {sample.get('epoch', 1)}"
    tool_events = _tool_events_once(label, [e for e in events if e.get("event") == "tool"], issues)
    used: set[int] = set()
    spans = _tool_spans(events)
    model_name = (log.get("eval") or {}).get("model")
    conversations: list[_Conversation] = []
    model_events = _in_order(label, [e for e in events if e.get("event") == "model"], issues)
    for n, e in enumerate(model_events):
        body, own = _response(e, n)
        message = (body.get("choices") or [{}])[0].get("message") or {}
        calls = message.get("tool_calls") or []
        start, done = _span(e)
        where = f"{label} model event {n}"
        latency, timing = _duration(e, "model", f"{path.name} {where}", issues)
        results = []
        ends = [done] if done is not None else []
        matched = _matched_events(label, calls, tool_events, used, start, issues)
        for call, te in zip(calls, matched, strict=True):
            if te is None:
                results.append(
                    Result.missing(
                        f"{where} call {call.get('id')}",
                        damaged=n < len(model_events) - 1,
                        why="no tool event for this call: 0 s",
                    )
                )
                continue
            error = te.get("error")
            _, t_done = _span(te)
            seconds, t_timing = _duration(
                te, "tool", f"{path.name} {label} tool event for call {call.get('id')}", issues
            )
            if t_done is not None:
                ends.append(t_done)
            results.append(
                Result(
                    text=_text(te.get("result"))
                    if not error
                    else str((error or {}).get("message") if isinstance(error, dict) else error),
                    duration_s=seconds if seconds is not None else 0.0,
                    status=(
                        "timeout" if isinstance(error, dict) and error.get("type") == "timeout" else "error"
                    )
                    if error
                    else "ok",
                    end=t_done if seconds is not None else None,
                    where=f"{label} tool event {te.get('id')}",
                    timing=t_timing,
                )
            )
        request = _input(e)
        open_ = [c for c in conversations if c.calls]
        current = next((c for c in reversed(open_) if request and c.continued_by(request)), None)
        if current is None and not request:  # no input recorded: the last one whose calls were answered
            current = next((c for c in reversed(open_) if c.answered), None)
        if current is None:
            inside = _inside_tool(e, spans, tool_events)
            title = f"{path.name} {label}" + (f" sub-agent in {inside}" if inside else "")
            current = _Conversation(
                segment=Segment(
                    title=title,
                    slug=f"{slugify(path.stem)}__{slugify(label)}"
                    + (f"__sub_{slugify(inside)}" if inside else ""),
                    source=f"{path}#sample={sample.get('id')}&epoch={sample.get('epoch', 1)}&model_event={n}",
                    initial=request,
                    tools=_tools(e),
                    turns=[],
                    provider=str(model_name).split("/", 1)[0] if model_name else None,
                    model=(e.get("output") or {}).get("model") or model_name,
                    created=str(e.get("timestamp")),
                    notes="inspect_ai log: model latency and tool durations from each event's working_time; "
                    + (
                        "responses are the provider's bodies as inspect kept them (call.response, the SDK's "
                        "dump: values exact, not the wire bytes)"
                        if own
                        else "responses rebuilt from inspect's output messages (not verbatim)"
                    )
                    + (
                        f"; an agent that ran inside {inside} of another conversation of this sample "
                        "(a sub-agent): its model calls are its own trace"
                        if inside
                        else ""
                    ),
                ),
                request=request,
                calls=[],
                answered=False,
            )
            conversations.append(current)
        current.segment.turns.append(
            Turn(
                payloads=[body],
                latency_s=latency if latency is not None else MODEL_S,
                timing=timing,
                results=results,
                recorded_start=start,
                recorded_end=max(ends, default=None),
                model_end=done if latency is not None else None,
            )
        )
        current.request = request
        current.calls = [str(c.get("id")) for c in calls]
        current.answered = all(te is not None for te in matched)
    segments = [c.segment for c in conversations]
    _ended_early(sample, label, segments, issues)
    asked = {
        str(c.get("id"))
        for s in segments
        for t in s.turns
        for c in ((t.payloads[0].get("choices") or [{}])[0].get("message") or {}).get("tool_calls") or []
    }
    seen_asking: dict[str, tuple[str, ...]] = {}  # call id -> the ids of the assistant message asking it
    for e in model_events:  # (a message the model generated: a solver's own, source "input", is not)
        for m in e.get("input") or []:
            if not isinstance(m, dict) or m.get("role") != "assistant" or m.get("source") == "input":
                continue
            ids = tuple(str(c.get("id")) for c in m.get("tool_calls") or [] if isinstance(c, dict))
            for cid in ids:
                seen_asking.setdefault(cid, ids)
    lost_responses: set[tuple[str, ...]] = set()
    for te in tool_events:
        if id(te) in used:
            continue
        tid = str(te.get("id"))
        if tid not in asked and tid in seen_asking:
            new = seen_asking[tid] not in lost_responses
            lost_responses.add(seen_asking[tid])
            issues.append(
                Issue(
                    kind="failed",
                    where=f"{label} tool event {tid}",
                    what=f"a tool event of call {tid} ({te.get('function')}) {LOST_MODEL_EVENT}: a later "
                    "model event's input holds the assistant message that asked for it; not imported"
                    + (
                        "; the model call that made it is counted in the source's model calls"
                        if new
                        else "; made by the same lost model call as call "
                        + next(c for c in seen_asking[tid] if c != tid)
                    ),
                    calls=1,
                    model_calls=1 if new else 0,
                )
            )
            continue
        issues.append(
            Issue(
                kind="damaged",
                where=f"{label} tool event {tid}",
                what=f"another tool event with call id {tid} ({te.get('function')}): no call of a model "
                "response is left for it, so it is not imported",
            )
            if tid in asked
            else Issue(
                kind="skipped",
                where=f"{label} tool event {tid}",
                what="a tool the solver ran itself (no model response asked for it): not a model's call",
            )
        )
    return segments


def _ended_early(sample: dict[str, Any], label: str, segments: list[Segment], issues: list[Issue]) -> None:
    """A sample inspect stopped (an error, a limit: messages, tokens, time...) says so: reported, and
    the sample's main conversation ends with that reason instead of "the recording ends"."""
    error, limit = sample.get("error"), sample.get("limit")
    if not error and not limit:
        return
    message = (error.get("message") if isinstance(error, dict) else error) if error else None
    if isinstance(limit, dict) and limit:
        why = f"inspect stopped the sample at its {limit.get('type')} limit ({limit.get('limit')})"
        why += f" (its error: {message})" if message else ""
        reason = f"{limit.get('type')}_limit"
    else:
        why, reason = f"the sample ended with an error: {message}", "sample_error"
    issues.append(Issue(kind="gap", where=label, what=f"{why}: the run stops there"))
    main = next((s for s in segments if "sub-agent" not in s.title), None)
    if main is None:
        return
    main.notes += f"; {why}"
    last = main.turns[-1].payloads[0] if main.turns else {}
    asked = ((last.get("choices") or [{}])[0].get("message") or {}).get("tool_calls")
    if asked:
        main.status, main.reason, main.error = "incomplete", reason, why
        main.closing = f"{why}: no model response follows"


def _read_eval(path: Path, issues: list[Issue]) -> dict[str, Any]:
    """A binary ``.eval`` log (a zip: ``header.json``, one ``samples/<id>_epoch_<n>.json`` per
    sample) as the JSON log's shape. A log still being written (no header yet) is read from its
    ``_journal/start.json``, said in a note; a sample that cannot be read costs only itself."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SourceError(
            f"{path}: not a readable .eval log (an .eval log is a zip archive: {exc})"
        ) from None
    with archive:
        names = archive.namelist()

        def member(name: str) -> Any:
            try:
                return json.loads(archive.read(name).decode("utf-8", errors="replace"))
            except (zipfile.BadZipFile, NotImplementedError, OSError, ValueError, EOFError) as exc:
                raise SourceError(f"{name}: {type(exc).__name__}: {exc}") from None

        if "header.json" in names:
            header = member("header.json")
        elif "_journal/start.json" in names:
            header = member("_journal/start.json")
            issues.append(
                Issue(
                    kind="note",
                    where=path.name,
                    what="no header.json (the log was still being written, or its run was stopped): "
                    "read from _journal/start.json and the samples it holds",
                )
            )
        else:
            raise wrong_kind(path, "inspect", "a zip without header.json or _journal/start.json")
        if not isinstance(header, dict):
            raise SourceError(f"{path}: header.json is not an object")
        samples: list[Any] = []
        for name in sorted(n for n in names if n.startswith("samples/") and n.endswith(".json")):
            try:
                samples.append(member(name))
            except SourceError as exc:
                issues.append(
                    Issue(
                        kind="failed",
                        where=f"{path.name} {name}",
                        what=f"a sample that could not be read ({exc}): not imported",
                        unreadable=True,
                    )
                )
    return {**header, "samples": samples}


def _file(path: Path) -> ImportResult:
    issues: list[Issue] = []
    if path.suffix == ".eval":
        log = _read_eval(path, issues)
    else:
        text = read_text(path, issues)
        not_empty(path, text, "inspect_ai")
        log = load_json(path, text, "inspect")
    if not isinstance(log, dict) or not isinstance(log.get("samples"), list):
        raise wrong_kind(path, "inspect", "not an inspect_ai eval log (no 'samples' list)")
    segments: list[Segment] = []
    source_calls = source_model_calls = 0
    stamps: list[Any] = []
    for sample in log["samples"]:
        if not isinstance(sample, dict):
            continue
        events = [e for e in sample.get("events") or [] if isinstance(e, dict)]
        stamps += [e.get(k) for e in events for k in ("timestamp", "completed")]
        source_model_calls += sum(1 for e in events if e.get("event") == "model")
        source_calls += sum(
            len(
                (((e.get("output") or {}).get("choices") or [{}])[0].get("message") or {}).get("tool_calls")
                or []
            )
            for e in events
            if e.get("event") == "model"
        )
        before = len(issues)
        segments += _sample(path, log, sample, issues)
        lost = [i for i in issues[before:] if i.kind == "failed" and LOST_MODEL_EVENT in i.what]
        source_calls += sum(i.calls for i in lost)
        source_model_calls += sum(i.model_calls for i in lost)
    return build_result(
        "inspect",
        str(path),
        segments,
        source_calls=source_calls,
        source_model_calls=source_model_calls,
        issues=issues,
        zone_less=zone_less_note(stamps),
    )


def import_inspect(path: str | Path) -> ImportResult:
    """An inspect_ai eval log (``.json`` or ``.eval``), or a folder of them (each file on its own), ->
    traces."""
    p = Path(path)
    if p.is_dir():
        return import_folder("inspect", p, (".json", ".eval"), _file)
    return _file(p)

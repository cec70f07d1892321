"""inspect_ai eval logs (JSON format) -> one trace per sample (more where the agent starts over).

A sample's ``events`` hold ``model`` events (the input messages, the output, and with ``call`` the raw
provider request and response) and ``tool`` events (call id, function, arguments, result or error).
A model event continues the trace when the previous response's calls were all answered by tool
events; otherwise (the response had no calls and the solver asked again) a new trace starts from that
event's input. Long strings are stored once in ``attachments`` and referenced as ``attachment://``;
they are resolved. Binary ``.eval`` logs: convert them first (``inspect log convert --to json``).

Where each number comes from (``recorded``):

- model latency: the event's ``working_time`` (inspect's time for the generate call, without time
  spent waiting for a connection slot); the note gives ``completed - timestamp`` too;
- tool duration: the tool event's ``working_time`` (likewise).

Responses: the raw ``call.response`` when it is a chat-completion body (the OpenAI SDK's dump: values
exact, layout not the wire's), else rebuilt from inspect's ``output`` message (arguments serialised
from the object). A tool event with an ``error`` is an error (``timeout`` errors are timeouts).
Each trace is placed on the events' timeline (each call ends at its event's ``completed``). An event
without valid times is reported; numbers resting on it are placeholders; repeated model events are
read once and model events out of time order are read in time order (both reported).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    MODEL_S,
    TOLERANCE_S,
    ImportResult,
    Issue,
    Result,
    Segment,
    Turn,
    build_result,
    call_entry,
    completion,
    slugify,
    stamp_or_none,
    text_of,
)
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
    choice = (output.get("choices") or [{}])[0]
    message = _chat_message(choice.get("message") or {"role": "assistant"})
    return completion(message, response_id=f"inspect-{n}", model=output.get("model")), False


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
    start = stamp_or_none(event.get("timestamp"))
    done = stamp_or_none(event.get("completed")) if event.get("completed") is not None else start
    if start is None or done is None or done < start - TOLERANCE_S:
        return None, None
    return start, done


def _duration(
    event: dict[str, Any], what: str, where: str, issues: list[Issue]
) -> tuple[float | None, Timing]:
    """An event's working_time (or completed - timestamp), with its label; None when not trusted."""
    start, done = _span(event)
    working = event.get("working_time")
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
    if (
        isinstance(working, int | float)
        and not isinstance(working, bool)
        and 0 <= working <= done - start + TOLERANCE_S
    ):
        return float(working), Timing(
            source="recorded", note=f"{what} event working_time (completed - timestamp: {done - start:.3f} s)"
        )
    return done - start, Timing(
        source="recorded",
        note=f"{what} event completed - timestamp"
        + (f" (working_time {working!r} does not fit: not used)" if working is not None else ""),
    )


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


def _sample(path: Path, log: dict[str, Any], sample: dict[str, Any], issues: list[Issue]) -> list[Segment]:
    attachments = sample.get("attachments") or {}
    events = [_resolve(e, attachments) for e in sample.get("events") or [] if isinstance(e, dict)]
    tool_events = {str(e.get("id")): e for e in events if e.get("event") == "tool"}
    label = f"sample {sample.get('id')} epoch {sample.get('epoch', 1)}"
    model_name = (log.get("eval") or {}).get("model")
    segments: list[Segment] = []
    current: Segment | None = None
    answered = False
    model_events = _in_order(label, [e for e in events if e.get("event") == "model"], issues)
    for n, e in enumerate(model_events):
        body, own = _response(e, n)
        message = (body.get("choices") or [{}])[0].get("message") or {}
        calls = message.get("tool_calls") or []
        start, done = _span(e)
        where = f"{label} model event {n}"
        latency, timing = _duration(e, "model", where, issues)
        results = []
        ends = [done] if done is not None else []
        for call in calls:
            te = tool_events.get(str(call.get("id")))
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
            seconds, t_timing = _duration(te, "tool", f"{label} tool event {te.get('id')}", issues)
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
        if current is None or not answered:
            if current is not None:
                segments.append(current)
            current = Segment(
                title=f"{path.name} {label}",
                slug=f"{slugify(path.stem)}__{slugify(label)}",
                source=f"{path}#sample={sample.get('id')}&epoch={sample.get('epoch', 1)}&model_event={n}",
                initial=_input(e),
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
                ),
            )
        current.turns.append(
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
        answered = bool(calls)
        if not calls:
            segments.append(current)
            current = None
    if current is not None:
        segments.append(current)
    orphan = set(tool_events) - {
        str(c.get("id"))
        for s in segments
        for t in s.turns
        for c in ((t.payloads[0].get("choices") or [{}])[0].get("message") or {}).get("tool_calls") or []
    }
    for tid in sorted(orphan):
        issues.append(
            Issue(
                kind="skipped",
                where=f"{label} tool event {tid}",
                what="a tool the solver ran itself (no model response asked for it): not a model's call",
            )
        )
    return segments


def _file(path: Path) -> ImportResult:
    if path.suffix == ".eval":
        raise wrong_kind(
            path, "inspect", "a binary .eval log; convert it with `inspect log convert --to json` first"
        )
    issues: list[Issue] = []
    text = read_text(path, issues)
    not_empty(path, text, "inspect_ai")
    log = load_json(path, text, "inspect")
    if not isinstance(log, dict) or not isinstance(log.get("samples"), list):
        raise wrong_kind(path, "inspect", "not an inspect_ai eval log (no 'samples' list)")
    segments: list[Segment] = []
    source_calls = source_model_calls = 0
    for sample in log["samples"]:
        if not isinstance(sample, dict):
            continue
        events = [e for e in sample.get("events") or [] if isinstance(e, dict)]
        source_model_calls += sum(1 for e in events if e.get("event") == "model")
        source_calls += sum(
            len(
                (((e.get("output") or {}).get("choices") or [{}])[0].get("message") or {}).get("tool_calls")
                or []
            )
            for e in events
            if e.get("event") == "model"
        )
        segments += _sample(path, log, sample, issues)
    return build_result(
        "inspect",
        str(path),
        segments,
        source_calls=source_calls,
        source_model_calls=source_model_calls,
        issues=issues,
    )


def import_inspect(path: str | Path) -> ImportResult:
    """An inspect_ai eval log (``.json``), or a folder of them (each file on its own), -> traces."""
    p = Path(path)
    if p.is_dir():
        return import_folder("inspect", p, (".json", ".eval"), _file)
    return _file(p)

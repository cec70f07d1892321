"""Langfuse trace exports (``{trace, observations}``) -> traces.

Model calls are the leaf ``GENERATION`` observations (a generation with generation children, such as
the AI SDK's ``ai.streamText`` around its ``ai.streamText.doStream`` steps, is a wrapper); the calls
under one parent are one run, in time order. Tool executions are ``TOOL`` observations (or spans
named ``ai.toolCall``), assigned to the step they started in; id, name, arguments and result come from
the observation (``ai.toolCall.*`` metadata attributes, else its input and output).

A step whose output was not recorded (the AI SDK leaves ``doStream`` outputs empty) is rebuilt: its
tool calls from the tool observations of that step, its text for the last step from the parent's
output. The notes say which responses were rebuilt.

Where each number comes from (``recorded``):

- model latency: the generation's start to end, except when a tool of the step started while the
  generation was still open: the AI SDK runs a tool as soon as its call has streamed and keeps the
  step open until the tool returns, so the model's part ends when the (last) tool started; the rest of
  the span is the tool. Time to first token (``completionStartTime``) is given in the note;
- tool duration: the tool observation's start to end.

An observation without a valid start or end (``endTime: null``: still running when exported) is
reported by id; numbers resting on it are placeholders. The time to first token of a generation
(``completionStartTime``) is kept as its first chunk's time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    MODEL_S,
    ImportResult,
    Issue,
    Result,
    ResultStatus,
    Segment,
    Turn,
    build_result,
    call_entry,
    completion,
    conversation,
    placeholder_payload,
    slugify,
    stamp_or_none,
    text_of,
)
from toolcall_lab.importers._files import import_folder, load_json, not_empty, read_text, wrong_kind
from toolcall_lab.records import Timing


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _attrs(o: dict[str, Any]) -> dict[str, Any]:
    meta = _json(o.get("metadata")) or {}
    return (meta.get("attributes") or {}) if isinstance(meta, dict) else {}


def _is_tool(o: dict[str, Any]) -> bool:
    return o.get("type") == "TOOL" or (o.get("type") == "SPAN" and o.get("name") == "ai.toolCall")


def _messages(value: Any) -> list[dict[str, Any]]:
    """Prompt messages (OpenAI chat, or the AI SDK's parts) -> chat messages."""
    items = _json(value)
    if isinstance(items, dict) and isinstance(items.get("messages"), list):
        items = items["messages"]
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    out: list[dict[str, Any]] = []
    for m in items or []:
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if not isinstance(content, list):
            out.append(dict(m))
            continue
        texts = [str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"]
        calls = [
            call_entry(
                p.get("toolCallId"), str(p.get("toolName")), json.dumps(p.get("input", p.get("args")) or {})
            )
            for p in content
            if isinstance(p, dict) and p.get("type") == "tool-call"
        ]
        results = [p for p in content if isinstance(p, dict) and p.get("type") == "tool-result"]
        if results:
            out += [
                {
                    "role": "tool",
                    "tool_call_id": r.get("toolCallId"),
                    "content": text_of(r.get("output", r.get("result"))),
                }
                for r in results
            ]
            continue
        message: dict[str, Any] = {"role": m.get("role"), "content": "".join(texts) or None}
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out


def _tool_schemas(o: dict[str, Any]) -> list[dict[str, Any]]:
    meta = _json(o.get("metadata")) or {}
    out = []
    for t in (meta.get("tools") if isinstance(meta, dict) else None) or []:
        d = _json(t)
        if isinstance(d, dict) and d.get("name"):
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": d["name"],
                        "description": d.get("description", ""),
                        "parameters": d.get("parameters") or d.get("inputSchema") or {},
                    },
                }
            )
    return out


def _export(path: Path, doc: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if isinstance(doc, dict) and isinstance(doc.get("observations"), list):
        trace = doc.get("trace")
        observations = [o for o in doc["observations"] if isinstance(o, dict)]
        return (trace if isinstance(trace, dict) else doc), observations
    raise wrong_kind(path, "langfuse", "expected an object with an 'observations' list")


def _times(o: dict[str, Any], issues: list[Issue]) -> tuple[float | None, float | None]:
    """An observation's start and end, or None for a missing or inconsistent one (reported)."""
    start, end = stamp_or_none(o.get("startTime")), stamp_or_none(o.get("endTime"))
    bad = start is None or end is None or end < start
    if bad:
        issues.append(
            Issue(
                kind="damaged",
                where=f"observation {o.get('id')} ({o.get('name')})",
                what=f"startTime {o.get('startTime')!r}, endTime {o.get('endTime')!r}: no valid duration; "
                "the numbers resting on it are placeholders",
            )
        )
    if start is not None and end is not None and end < start:
        return None, None
    return start, end


def _file(path: Path) -> ImportResult:
    issues: list[Issue] = []
    raw = read_text(path, issues)
    not_empty(path, raw, "Langfuse")
    doc = load_json(path, raw, "langfuse")
    exports = doc if isinstance(doc, list) else [doc]
    segments: list[Segment] = []
    source_calls = source_model_calls = 0
    for e, export in enumerate(exports):
        trace, observations = _export(path, export)
        times = {
            id(o): _times(o, issues) for o in observations if o.get("type") == "GENERATION" or _is_tool(o)
        }

        def start_of(o: dict[str, Any], times: dict[int, tuple[float | None, float | None]] = times) -> float:
            start = times[id(o)][0]
            return float("inf") if start is None else start

        gens = [o for o in observations if o.get("type") == "GENERATION"]
        parents = {o.get("parentObservationId") for o in gens}
        leaves = sorted((g for g in gens if g.get("id") not in parents), key=start_of)
        tools = sorted((o for o in observations if _is_tool(o)), key=start_of)
        source_model_calls += len(leaves)
        by_id = {o.get("id"): o for o in observations}
        runs: dict[Any, list[dict[str, Any]]] = {}
        for g in leaves:
            runs.setdefault(g.get("parentObservationId"), []).append(g)
        used: set[Any] = set()
        for r, (parent_id, steps) in enumerate(runs.items()):
            parent = by_id.get(parent_id) or {}
            turns: list[Turn] = []
            cuts: list[int] = []
            rebuilt = 0
            for k, g in enumerate(steps):
                unknown_step = False
                g_start, g_end = times[id(g)]
                nxt = start_of(steps[k + 1]) if k + 1 < len(steps) else float("inf")
                lo = g_start if g_start is not None else float("-inf")
                mine = [t for t in tools if t.get("id") not in used and lo <= start_of(t) < nxt]
                used.update(t.get("id") for t in mine)
                output = _json(g.get("output"))
                if isinstance(output, dict) and output.get("choices"):
                    body = dict(output)
                    body.setdefault("object", "chat.completion")
                else:
                    rebuilt += 1
                    calls = []
                    for obs in mine:
                        a = _attrs(obs)
                        calls.append(
                            call_entry(
                                a.get("ai.toolCall.id"),
                                str(a.get("ai.toolCall.name") or obs.get("name")),
                                str(
                                    a.get("ai.toolCall.args")
                                    or (
                                        obs.get("input")
                                        if isinstance(obs.get("input"), str)
                                        else json.dumps(obs.get("input") or {})
                                    )
                                ),
                            )
                        )
                    text = output if isinstance(output, str) else None
                    if text is None and not calls and k == len(steps) - 1:
                        text = text_of(_json(parent.get("output")))
                    message: dict[str, Any] = {"role": "assistant", "content": text}
                    if calls:
                        message["tool_calls"] = calls
                    if text is None and not calls and k < len(steps) - 1:  # a step we know nothing of
                        body = placeholder_payload(
                            "(response not recorded)",
                            why="the step's output was not recorded and no tool observation started in it",
                            response_id=str(g.get("id")),
                            model=g.get("model"),
                        )
                        unknown_step = True
                    else:
                        body = completion(message, response_id=str(g.get("id")), model=g.get("model"))
                usage = _json(g.get("usageDetails"))
                if isinstance(usage, dict) and usage and "usage" not in body:
                    body["usage"] = {
                        "prompt_tokens": usage.get("input"),
                        "completion_tokens": usage.get("output"),
                        "total_tokens": usage.get("total"),
                    }
                ttft_at = stamp_or_none(g.get("completionStartTime"))
                first_token = None
                model_end: float | None = None
                if g_start is None or g_end is None:
                    latency, timing = (
                        MODEL_S,
                        Timing(
                            source="placeholder",
                            note=f"the generation has no valid start and end: {MODEL_S} s assumed",
                        ),
                    )
                else:
                    inside = [start_of(t) for t in mine if start_of(t) < g_end]
                    if inside:
                        latency = max(inside) - g_start
                        note = (
                            f"from the generation's start to its tool's start ({latency:.3f} s): the AI SDK "
                            f"ran the tool while the step was open (the span's own {g_end - g_start:.3f} s "
                            "include the tool)"
                        )
                    else:
                        latency, note = g_end - g_start, "the generation's start to end"
                    if ttft_at is not None and g_start <= ttft_at <= g_start + latency:
                        first_token = ttft_at - g_start
                        note += f"; first token after {first_token:.3f} s (completionStartTime)"
                    timing = Timing(source="recorded", note=note)
                    model_end = g_start + latency
                results = []
                calls_here = (body.get("choices") or [{}])[0].get("message", {}).get("tool_calls") or []
                source_calls += len(calls_here)
                pool = list(mine)
                for call in calls_here:
                    t: dict[str, Any] | None = next(
                        (
                            x
                            for x in pool
                            if _attrs(x).get("ai.toolCall.id") == call.get("id") and call.get("id")
                        ),
                        None,
                    )
                    if t is None:
                        name = (call.get("function") or {}).get("name")
                        t = next(
                            (x for x in pool if (_attrs(x).get("ai.toolCall.name") or x.get("name")) == name),
                            None,
                        )
                    if t is None:
                        results.append(Result.missing(f"observation {g.get('id')} call {call.get('id')}"))
                        continue
                    pool.remove(t)
                    a = _attrs(t)
                    out = a.get("ai.toolCall.result", t.get("output"))
                    shown = out if isinstance(out, str) else text_of(_json(out))
                    status: ResultStatus = "error" if t.get("level") == "ERROR" else "ok"
                    t_start, t_end = times[id(t)]
                    if t_start is None or t_end is None:
                        results.append(
                            Result(
                                text=shown,
                                duration_s=0.0,
                                status=status,
                                where=f"observation {t.get('id')}",
                                timing=Timing(
                                    source="placeholder",
                                    note="the tool observation has no valid start and end: 0 s",
                                ),
                            )
                        )
                        continue
                    results.append(
                        Result(
                            text=shown,
                            duration_s=t_end - t_start,
                            status=status,
                            end=t_end,
                            where=f"observation {t.get('id')}",
                            timing=Timing(source="recorded", note="the tool observation's start to end"),
                        )
                    )
                for t in pool:
                    source_calls += 1
                    issues.append(
                        Issue(
                            kind="failed",
                            where=f"observation {t.get('id')}",
                            what="a tool call whose step's recorded output does not hold it",
                            calls=1,
                        )
                    )
                ends = [x for x in [g_end, *(times[id(t)][1] for t in mine)] if x is not None]
                turns.append(
                    Turn(
                        payloads=[body],
                        latency_s=max(latency, 0.0),
                        timing=timing,
                        results=results,
                        recorded_start=g_start,
                        recorded_end=max(ends, default=None),
                        model_end=model_end,
                        first_token_s=first_token,
                    )
                )
                if unknown_step:  # the conversation cannot be followed past it: the rest is another
                    cuts.append(len(turns))
            first = steps[0]
            initial = _messages(first.get("input")) or _messages(trace.get("input"))
            label = f"export {e + 1} run {r + 1}" if len(exports) > 1 or len(runs) > 1 else "run"
            for lo, hi in zip([0, *cuts], [*cuts, len(turns)], strict=True):
                if lo == hi:
                    continue
                segments.append(
                    Segment(
                        title=f"{path.name} {trace.get('name') or ''} {label}".replace("  ", " "),
                        slug=f"{slugify(path.stem)}__{slugify(label)}",
                        source=f"{path}#trace={trace.get('id')}&observation={parent_id or first.get('id')}",
                        initial=initial + conversation(turns[:lo]),
                        tools=_tool_schemas(first),
                        turns=turns[lo:hi],
                        status="incomplete" if hi in cuts else "completed",
                        reason="response_not_recorded" if hi in cuts else "final_answer",
                        provider="langfuse",
                        model=first.get("model"),
                        created=str(first.get("startTime")),
                        notes="Langfuse export: model latency from each generation (up to its tool's start "
                        "when the tool ran inside it), tool durations from the tool observations; "
                        + (
                            f"{rebuilt} of {len(turns)} responses rebuilt from the tool observations and the "
                            "parent's output (their outputs were not recorded)"
                            if rebuilt
                            else "responses as recorded"
                        ),
                    )
                )
        for t in tools:
            if t.get("id") not in used:
                source_calls += 1
                issues.append(
                    Issue(
                        kind="failed",
                        where=f"observation {t.get('id')}",
                        what="a tool observation outside every generation step",
                        calls=1,
                    )
                )
    return build_result(
        "langfuse",
        str(path),
        segments,
        source_calls=source_calls,
        source_model_calls=source_model_calls,
        issues=issues,
    )


def import_langfuse(path: str | Path) -> ImportResult:
    """A Langfuse trace export (``.json``), or a folder of them (each file on its own), -> traces."""
    p = Path(path)
    if p.is_dir():
        return import_folder("langfuse", p, (".json",), _file)
    return _file(p)

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
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    ImportResult,
    Issue,
    Result,
    Segment,
    Turn,
    build_result,
    call_entry,
    completion,
    epoch,
    merge_results,
    slugify,
    text_of,
)
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


def _export(doc: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if isinstance(doc, dict) and isinstance(doc.get("observations"), list):
        trace = doc.get("trace")
        observations = [o for o in doc["observations"] if isinstance(o, dict)]
        return (trace if isinstance(trace, dict) else doc), observations
    raise ValueError("not a Langfuse export: expected an object with 'observations'")


def _file(path: Path) -> ImportResult:
    doc = json.loads(path.read_text(encoding="utf-8"))
    exports = doc if isinstance(doc, list) else [doc]
    segments: list[Segment] = []
    issues: list[Issue] = []
    source_calls = source_model_calls = 0
    for e, export in enumerate(exports):
        trace, observations = _export(export)
        gens = [o for o in observations if o.get("type") == "GENERATION"]
        parents = {o.get("parentObservationId") for o in gens}
        leaves = sorted((g for g in gens if g.get("id") not in parents), key=lambda o: epoch(o["startTime"]))
        tools = sorted((o for o in observations if _is_tool(o)), key=lambda o: epoch(o["startTime"]))
        source_model_calls += len(leaves)
        by_id = {o.get("id"): o for o in observations}
        runs: dict[Any, list[dict[str, Any]]] = {}
        for g in leaves:
            runs.setdefault(g.get("parentObservationId"), []).append(g)
        used: set[Any] = set()
        for r, (parent_id, steps) in enumerate(runs.items()):
            parent = by_id.get(parent_id) or {}
            turns: list[Turn] = []
            rebuilt = 0
            for k, g in enumerate(steps):
                g_start, g_end = epoch(g["startTime"]), epoch(g["endTime"])
                nxt = epoch(steps[k + 1]["startTime"]) if k + 1 < len(steps) else float("inf")
                mine = [
                    t for t in tools if t.get("id") not in used and g_start <= epoch(t["startTime"]) < nxt
                ]
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
                    body = completion(message, response_id=str(g.get("id")), model=g.get("model"))
                usage = _json(g.get("usageDetails"))
                if isinstance(usage, dict) and usage and "usage" not in body:
                    body["usage"] = {
                        "prompt_tokens": usage.get("input"),
                        "completion_tokens": usage.get("output"),
                        "total_tokens": usage.get("total"),
                    }
                inside = [epoch(t["startTime"]) for t in mine if epoch(t["startTime"]) < g_end]
                ttft = g.get("completionStartTime")
                ttft_note = f"; first token after {epoch(ttft) - g_start:.3f} s" if ttft else ""
                if inside:
                    latency = max(inside) - g_start
                    note = (
                        f"from the generation's start to its tool's start ({latency:.3f} s): the AI SDK "
                        f"ran the tool while the step was open (the span's own {g_end - g_start:.3f} s "
                        "include the tool)"
                    )
                else:
                    latency, note = g_end - g_start, "the generation's start to end"
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
                        results.append(Result.missing())
                        continue
                    pool.remove(t)
                    a = _attrs(t)
                    text = a.get("ai.toolCall.result", t.get("output"))
                    results.append(
                        Result(
                            text=text if isinstance(text, str) else text_of(_json(text)),
                            duration_s=max(epoch(t["endTime"]) - epoch(t["startTime"]), 0.0),
                            status="error" if t.get("level") == "ERROR" else "ok",
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
                turns.append(
                    Turn(
                        payloads=[body],
                        latency_s=max(latency, 0.0),
                        timing=Timing(source="recorded", note=note + ttft_note),
                        results=results,
                        recorded_start=g_start,
                        recorded_end=max([g_end, *(epoch(t["endTime"]) for t in mine)]),
                    )
                )
            first = steps[0]
            initial = _messages(first.get("input")) or _messages(trace.get("input"))
            label = f"export {e + 1} run {r + 1}" if len(exports) > 1 or len(runs) > 1 else "run"
            segments.append(
                Segment(
                    title=f"{path.name} {trace.get('name') or ''} {label}".replace("  ", " "),
                    slug=f"{slugify(path.stem)}__{slugify(label)}",
                    source=f"{path}#trace={trace.get('id')}&observation={parent_id or first.get('id')}",
                    initial=initial,
                    tools=_tool_schemas(first),
                    turns=turns,
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
    """A Langfuse trace export (``.json``), or a folder of them, -> traces."""
    p = Path(path)
    if p.is_dir():
        return merge_results("langfuse", str(p), [_file(f) for f in sorted(p.glob("*.json"))])
    return _file(p)

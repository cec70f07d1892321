"""Turn real public recordings into traces (they stay in ../shared; importers read them at run time).

Each imported trace says where it came from and which timings are recorded and which modelled:

- VCR cassettes / recorded exchanges (OpenAI chat streamed or not, DeepSeek, Groq, Ollama, Gemini
  compat, Anthropic Messages, OpenAI Responses): the model's responses as recorded; model latency
  from the ``openai-processing-ms`` header where present, else modelled; tool results from the
  next request's tool messages; tool durations modelled (``TOOL_S``). Non-chat formats are
  converted to chat-completion bodies (the loop speaks the chat format).
- tau-bench airline trajectories: one trace per user turn that led to tool calls; every timing
  modelled (``tau_latency``).
- BFCL parallel / parallel_multiple: the question plus the calls of its first possible answer, as a
  scripted one-round-plus-final trace with modelled timings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolcall_lab.formats.recordings import Exchange, read_recording
from toolcall_lab.messages import ParsedResponse, ToolCall
from toolcall_lab.models import ScriptedResponse
from toolcall_lab.protocol import from_anthropic
from toolcall_lab.records import CallStatus, ModelCall, Round, TimedChunk, Timing, ToolExecution
from toolcall_lab.replay import replay
from toolcall_lab.trace import Trace, TraceMetadata

TOOL_S = 0.1
"""Modelled duration of a tool call whose timing was not recorded."""
MODEL_S = 0.8
"""Modelled model latency where none was recorded."""
TOOL_PLACEHOLDER = Timing(source="placeholder", note=f"tool duration not recorded: {TOOL_S} s assumed")
MODEL_PLACEHOLDER = Timing(source="placeholder", note=f"model latency not recorded: {MODEL_S} s assumed")


@dataclass(slots=True)
class Turn:
    """One model response to import, and the results its calls got."""

    payloads: list[dict[str, Any]]
    latency_s: float
    ttfc_s: float | None = None
    results: dict[str, tuple[str, float, str]] = field(default_factory=dict)
    """tool_call_id -> (result text, duration in seconds, status)."""
    timing: Timing = MODEL_PLACEHOLDER
    """Where `latency_s` comes from."""
    tool_timing: Timing = TOOL_PLACEHOLDER
    """Where the durations in `results` come from."""


def spread(n: int, latency_s: float, ttfc_s: float | None) -> list[float]:
    """Arrival offsets for `n` chunks: first at ttfc, the rest evenly up to the latency."""
    return ScriptedResponse(latency_s=latency_s, ttfc_s=ttfc_s).offsets(n)


def chat_body(parsed: ParsedResponse) -> dict[str, Any]:
    """A chat-completion body equivalent to a parsed response of any format."""
    choice = parsed.first
    message = choice.to_message()
    finish = {"tool_use": "tool_calls", "end_turn": "stop", "completed": "stop"}.get(
        choice.finish_reason or "", choice.finish_reason or ("tool_calls" if choice.tool_calls else "stop")
    )
    if choice.tool_calls:
        finish = "tool_calls"
    return {
        "id": parsed.response_id or "imported",
        "object": "chat.completion",
        "model": parsed.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        **({"usage": parsed.usage} if parsed.usage else {}),
    }


def build_trace(
    metadata: TraceMetadata,
    tools: Sequence[dict[str, Any]],
    initial: Sequence[dict[str, Any]],
    turns: Sequence[Turn],
) -> Trace:
    """Run the loop over recorded turns (virtual clock) so requests are exactly what the loop sends."""
    from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator, parse_chat_completion

    rounds = []
    for k, turn in enumerate(turns):
        offsets = spread(len(turn.payloads), turn.latency_s, turn.ttfc_s)
        chunks = tuple(TimedChunk(offset_s=o, payload=p) for o, p in zip(offsets, turn.payloads, strict=True))
        if len(turn.payloads) == 1 and turn.payloads[0].get("object") == "chat.completion":
            parsed = parse_chat_completion(turn.payloads[0], batch=k)
        else:
            acc = ChatCompletionAccumulator(batch=k)
            for p in turn.payloads:
                acc.feed(p)
            parsed = acc.finish()
        calls = parsed.tool_calls
        executions = []
        by_position = list(turn.results.values())
        for pos, call in enumerate(calls):
            found = turn.results.get(call.tool_call_id)
            if found is None:  # some recorders rename ids between a response and the next request
                found = (
                    by_position[pos] if pos < len(by_position) else ("(result not recorded)", TOOL_S, "ok")
                )
            text, seconds, status = found
            executions.append(
                ToolExecution(
                    tool_call_id=call.tool_call_id,
                    name=call.name,
                    arguments=call.arguments,
                    index=call.index,
                    status=_STATUS.get(status, "ok"),
                    result=text,
                    error=None if status == "ok" else text,
                    started_at=0.0,
                    ended_at=seconds,
                    timing=turn.tool_timing,
                )
            )
        rounds.append(
            Round(
                round_index=k,
                mode="sequential",
                request_messages=(),
                model_call=ModelCall(
                    started_at=0.0,
                    ended_at=turn.latency_s,
                    first_chunk_at=None,
                    chunks=chunks,
                    timing=turn.timing,
                    chunk_timing="spread" if len(chunks) > 1 else "none",
                ),
                assistant_message=parsed.first.to_message(),
                tool_calls=calls,
                executions=tuple(executions),
            )
        )
    known = {(t.get("function") or {}).get("name") for t in tools}
    extra: dict[str, dict[str, Any]] = {}
    for r in rounds:
        for c in r.tool_calls:
            if c.name not in known and c.name not in extra:
                extra[c.name] = {
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "description": "(not in the recorded request)",
                        "parameters": {"type": "object", "properties": {}},
                    },
                }
    draft = Trace(
        metadata=metadata,
        tools=(*tools, *extra.values()),
        initial_messages=tuple(initial),
        rounds=tuple(rounds),
        outcome=_draft_outcome(),
    )
    tool_rounds = sum(1 for r in rounds if r.tool_calls)
    result = replay(draft, "sequential", check="off", max_rounds=tool_rounds + 1, dedupe=False)
    meta = TraceMetadata(
        **{**{k: getattr(metadata, k) for k in metadata.__dataclass_fields__}, "mode": None, "settings": {}}
    )
    return Trace.from_run(result, meta)


def _draft_outcome() -> Any:
    from toolcall_lab.trace import TraceOutcome

    return TraceOutcome(status="completed", reason="final_answer")


_STATUS: dict[str, CallStatus] = {"ok": "ok", "error": "error", "timeout": "timeout"}
_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def safe_tool_name(name: str) -> str:
    """OpenAI tool names allow letters, digits, '_' and '-' only (BFCL uses dots)."""
    return _SAFE.sub("_", name)[:64] or "tool"


def _request_messages(exchange: Exchange) -> list[dict[str, Any]]:
    body = exchange.request or {}
    if exchange.format == "anthropic":
        system = body.get("system")
        return from_anthropic(system if isinstance(system, str) else None, body.get("messages") or [])
    if exchange.format == "openai-responses":
        out: list[dict[str, Any]] = []
        if body.get("instructions"):
            out.append({"role": "system", "content": body["instructions"]})
        for item in body.get("input") or []:
            if item.get("type") == "function_call_output":
                out.append(
                    {"role": "tool", "tool_call_id": item.get("call_id"), "content": str(item.get("output"))}
                )
            elif item.get("role") in ("user", "system", "developer"):
                content = item.get("content")
                out.append(
                    {
                        "role": "user" if item["role"] == "user" else "system",
                        "content": content if isinstance(content, str) else json.dumps(content),
                    }
                )
        return out
    return [dict(m) for m in body.get("messages") or []]


def _request_tools(exchange: Exchange) -> list[dict[str, Any]]:
    tools = (exchange.request or {}).get("tools") or []
    out = []
    for t in tools:
        if t.get("type") == "function" and "function" in t:
            out.append({"type": "function", "function": t["function"]})
        elif "input_schema" in t or t.get("type") == "function":  # Anthropic, or Responses flat form
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": t.get("name"),
                        "description": t.get("description", ""),
                        "parameters": t.get("input_schema") or t.get("parameters") or {},
                    },
                }
            )
    return out


def import_recording(path: str | Path) -> Trace:
    """A multi-exchange recording (cassette or exchange list) as one trace."""
    p = Path(path)
    recording = read_recording(p)
    exchanges = list(recording.exchanges)
    first = exchanges[0]
    initial = _request_messages(first)
    tools = _request_tools(first)
    turns: list[Turn] = []
    recorded_latency = 0
    responses = [ex.parse(batch=k)[0] for k, ex in enumerate(exchanges)]  # parsed once, used below
    for k, (ex, parsed) in enumerate(zip(exchanges, responses, strict=True)):
        if ex.format == "openai-chat" and ex.payloads is not None:
            payloads = list(ex.payloads)
        else:
            payloads = [chat_body(parsed)]
        ms = ex.response_headers.get("openai-processing-ms")
        reported = bool(ms and ms.isdigit())
        latency = int(ms) / 1000 if ms and reported else MODEL_S
        timing = (
            Timing(
                source="reported",
                note="openai-processing-ms response header: the server's processing time, "
                "without network transfer",
            )
            if reported
            else MODEL_PLACEHOLDER
        )
        recorded_latency += reported
        results: dict[str, tuple[str, float, str]] = {}
        if k + 1 < len(exchanges):
            for m in _request_messages(exchanges[k + 1]):
                if m.get("role") == "tool":
                    results[str(m.get("tool_call_id"))] = (str(m.get("content")), TOOL_S, "ok")
        turns.append(Turn(payloads=payloads, latency_s=latency, results=results, timing=timing))
    ends_with_calls = bool(responses[-1].tool_calls)
    if ends_with_calls:  # the recording stops after a tool call: close it so the loop can finish
        turns.append(
            Turn(
                payloads=[
                    {
                        "object": "chat.completion",
                        "id": "synthetic-end",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": "(the recording ends here)"},
                            }
                        ],
                    }
                ],
                latency_s=0.0,
                timing=Timing(source="placeholder", note="synthetic final answer closing the recording"),
            )
        )
    provider = p.name.split("_")[0]
    timing_note = (
        f"model latency from openai-processing-ms in {recorded_latency} of {len(exchanges)} exchanges, "
        f"otherwise {MODEL_S} s"
        if recorded_latency
        else f"model latency modelled ({MODEL_S} s)"
    )
    meta = TraceMetadata(
        title=p.name,
        origin="imported",
        provider=provider,
        model=responses[0].model,
        source=str(p),
        notes=f"{timing_note}; tool durations modelled ({TOOL_S} s); tool results from the next "
        "request; "
        + (
            "non-chat responses converted to chat-completion bodies"
            if first.format != "openai-chat"
            else "chat chunks verbatim"
        )
        + (
            "; the recording stops after a tool call: a synthetic final answer closes it"
            if ends_with_calls
            else ""
        ),
    )
    return build_trace(meta, tools, initial, turns)


def tau_latency(text: str) -> float:
    """Modelled model latency for tau-bench: 0.5 s + 10 ms per output token (4 characters a token)."""
    return round(0.5 + 0.01 * len(text) / 4, 3)


def tau_tool_s(name: str) -> float:
    """Modelled tool time for tau-bench: reads 0.15 s, writes (book/update/cancel/send...) 0.4 s."""
    return 0.15 if name.split("_")[0] in ("get", "search", "list", "calculate", "think") else 0.4


TAU_MODEL = Timing(source="estimated", note="tau-bench has no timings: 0.5 s + 10 ms per output token")
TAU_TOOL = Timing(source="placeholder", note="tau-bench has no timings: reads 0.15 s, writes 0.4 s")


def import_tau_bench(path: str | Path, *, limit: int | None = None) -> list[Trace]:
    """tau-bench trajectories -> one trace per user turn that led to tool calls."""
    p = Path(path)
    data = json.loads(p.read_text(encoding="utf-8"))
    out: list[Trace] = []
    for item in data[:limit]:
        traj = item["traj"]
        tools = _tau_tools(traj)
        for i, msg in enumerate(traj):
            if msg.get("role") != "user":
                continue
            j = i + 1
            turns: list[Turn] = []
            while j < len(traj) and traj[j].get("role") == "assistant":
                a = traj[j]
                calls = a.get("tool_calls") or []
                results: dict[str, tuple[str, float, str]] = {}
                k = j + 1
                while k < len(traj) and traj[k].get("role") == "tool":
                    t = traj[k]
                    results[t.get("tool_call_id")] = (
                        str(t.get("content")),
                        tau_tool_s(t.get("name") or ""),
                        "ok",
                    )
                    k += 1
                message = {
                    "role": "assistant",
                    "content": a.get("content"),
                    **({"tool_calls": calls} if calls else {}),
                }
                text = (a.get("content") or "") + json.dumps(calls)
                turns.append(
                    Turn(
                        payloads=[
                            {
                                "object": "chat.completion",
                                "id": f"tau-{item['task_id']}-{j}",
                                "choices": [
                                    {
                                        "index": 0,
                                        "message": message,
                                        "finish_reason": "tool_calls" if calls else "stop",
                                    }
                                ],
                            }
                        ],
                        latency_s=tau_latency(text),
                        results=results,
                        timing=TAU_MODEL,
                        tool_timing=TAU_TOOL,
                    )
                )
                j = k
                if not calls:
                    break
            if (
                len(turns) > 1
                and turns[-1].results == {}
                and "tool_calls" not in turns[-1].payloads[0]["choices"][0]["message"]
            ):
                meta = TraceMetadata(
                    title=f"tau-bench airline task {item['task_id']} trial {item.get('trial', 0)} turn {i}",
                    origin="imported",
                    provider="openai",
                    model="gpt-4o",
                    source=f"{p}#task={item['task_id']}",
                    notes="no timings in tau-bench: model 0.5 s + 10 ms/token; tools 0.15 s (reads), 0.4 s",
                )
                out.append(build_trace(meta, tools, traj[: i + 1], turns))
    return out


def _tau_tools(traj: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    names: dict[str, set[str]] = {}
    for m in traj:
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            try:
                keys = set(json.loads(fn.get("arguments") or "{}"))
            except json.JSONDecodeError:
                keys = set()
            names.setdefault(str(fn.get("name")), set()).update(keys)
    return [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": "tau-bench airline tool (schema inferred)",
                "parameters": {"type": "object", "properties": {k: {} for k in sorted(ks)}},
            },
        }
        for n, ks in names.items()
        if n
    ]


def _bfcl_schema(fn: dict[str, Any]) -> dict[str, Any]:
    params = json.loads(json.dumps(fn.get("parameters") or {}).replace('"type": "dict"', '"type": "object"'))
    return {
        "type": "function",
        "function": {
            "name": safe_tool_name(fn["name"]),
            "description": fn.get("description", ""),
            "parameters": params,
        },
    }


def import_bfcl(questions: str | Path, answers: str | Path, *, limit: int | None = None) -> list[Trace]:
    """BFCL parallel tasks -> one round plus a final per question, calls from the first possible answer."""
    qs = [
        json.loads(line) for line in Path(questions).read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    ans = {
        a["id"]: a
        for a in (
            json.loads(line)
            for line in Path(answers).read_text(encoding="utf-8").splitlines()
            if line.strip()
        )
    }
    out = []
    for q in qs[:limit]:
        truth = ans.get(q["id"], {}).get("ground_truth") or []
        calls = []
        for i, entry in enumerate(truth):
            ((name, params),) = entry.items()
            args = {k: v[0] for k, v in params.items() if v and v[0] != ""}
            calls.append(
                ToolCall(
                    tool_call_id=f"call_0_{i}", name=safe_tool_name(name), arguments=json.dumps(args), index=i
                )
            )
        messages = [m for turn in q["question"] for m in turn]
        body = {
            "object": "chat.completion",
            "id": q["id"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [c.to_openai() for c in calls],
                    },
                }
            ],
        }
        final = {
            "object": "chat.completion",
            "id": f"{q['id']}-final",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "(BFCL has no final answer; scripted)"},
                }
            ],
        }
        turns = [
            Turn(
                payloads=[body],
                latency_s=MODEL_S,
                results={c.tool_call_id: (f"(result of {c.name})", TOOL_S, "ok") for c in calls},
            ),
            Turn(payloads=[final], latency_s=MODEL_S),
        ]
        meta = TraceMetadata(
            title=f"BFCL {q['id']}",
            origin="imported",
            provider="bfcl",
            source=f"{questions}#{q['id']}",
            notes=f"calls from the first acceptable value of each parameter; "
            f"model {MODEL_S} s, tools {TOOL_S} s; dotted names use '_'",
        )
        out.append(build_trace(meta, [_bfcl_schema(f) for f in q["function"]], messages, turns))
    return out

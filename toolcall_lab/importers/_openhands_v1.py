"""OpenHands' V1 event stream (the software-agent-sdk: typed events with a ``kind``) read as the V0
events `toolcall_lab.importers.openhands` imports.

V1 writes one event per file (``events/event-<n>-<id>.json``) or a JSON list of them. Each event has
a string ``id``, a ``timestamp`` (local time, no zone) and a ``kind``: ``SystemPromptEvent`` (the
system prompt and the tools), ``MessageEvent`` (``llm_message``: a user message or the agent's
answer), ``ActionEvent`` (one tool call: ``tool_call`` {id, name, arguments}, ``thought``, and
``llm_response_id``, which groups the calls of one model response), ``ObservationEvent`` (its
result: ``observation``, ``action_id``, ``tool_call_id``), ``AgentErrorEvent`` and
``UserRejectObservation`` (a call answered with an error or a rejection). Other kinds (state
updates, pauses, condensations) are not model calls or tool calls. V1 records no model latency:
times come from the events, as for V0 streams without ``metrics``.
"""

from __future__ import annotations

import json
from typing import Any

from toolcall_lab.importers._build import Issue, call_entry, text_of

V1_KINDS = frozenset(
    {
        "SystemPromptEvent",
        "MessageEvent",
        "ActionEvent",
        "ObservationEvent",
        "AgentErrorEvent",
        "UserRejectObservation",
    }
)
_ANSWERS = frozenset({"ObservationEvent", "AgentErrorEvent", "UserRejectObservation"})


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def is_v1(doc: Any) -> bool:
    """Whether `doc` (a list of events) is a V1 event stream."""
    return isinstance(doc, list) and any(isinstance(e, dict) and e.get("kind") in V1_KINDS for e in doc)


def _tools(raw: Any) -> list[dict[str, Any]]:
    out = []
    for t in raw if isinstance(raw, list) else []:
        if not isinstance(t, dict):
            continue
        if isinstance(t.get("function"), dict):
            out.append({"type": "function", "function": t["function"]})
        elif t.get("name"):
            schema = t.get("parameters") or t.get("input_schema") or {"type": "object", "properties": {}}
            fn = {"name": t["name"], "description": t.get("description", ""), "parameters": schema}
            out.append({"type": "function", "function": fn})
    return out


def _arguments(call: dict[str, Any]) -> str:
    args = call.get("arguments")
    return args if isinstance(args, str) else json.dumps(args if args is not None else {})


def _observation(e: dict[str, Any]) -> tuple[str, bool, Any]:
    """An answer's text, whether it is an error, and the command's exit code (if any)."""
    kind = e.get("kind")
    if kind == "AgentErrorEvent":
        return str(e.get("error") or ""), True, None
    if kind == "UserRejectObservation":
        return f"Action rejected: {e.get('rejection_reason') or 'rejected'}", True, None
    obs = _obj(e.get("observation"))
    content = obs.get("content")
    text = text_of(content) if content is not None else json.dumps(obs, ensure_ascii=False)
    code = obs.get("exit_code")
    if code is None:
        code = _obj(obs.get("metadata")).get("exit_code")
    return text, bool(obs.get("is_error")), code


def to_v0(events: list[dict[str, Any]], where: str, issues: list[Issue]) -> list[dict[str, Any]]:
    """The V1 `events` as V0 events (integer ids in order; an action's ``tool_call_metadata``
    holds a chat-completion body with every call of its model response, so the calls of one
    response stay one batch). Events of other kinds are left out; an answer whose action is not
    in the stream is reported."""
    batches: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("kind") == "ActionEvent":
            batches.setdefault(str(e.get("llm_response_id") or e.get("id")), []).append(e)
    bodies: dict[str, dict[str, Any]] = {}
    for rid, actions in batches.items():
        thought = text_of(actions[0].get("thought") or []) or None
        calls = [
            call_entry(
                str(c.get("id") or a.get("tool_call_id")),
                str(c.get("name") or a.get("tool_name")),
                _arguments(c),
            )
            for a in actions
            for c in [_obj(a.get("tool_call"))]
        ]
        bodies[rid] = {
            "id": rid,
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": thought, "tool_calls": calls},
                    "finish_reason": "tool_calls",
                }
            ],
        }
    out: list[dict[str, Any]] = []
    number_of: dict[str, int] = {}
    by_call: dict[str, int] = {}
    for n, e in enumerate(events, start=1):
        kind = e.get("kind")
        base = {"id": n, "timestamp": e.get("timestamp"), "source": e.get("source")}
        if kind == "SystemPromptEvent":
            prompt = e.get("system_prompt")
            text = text_of([prompt] if isinstance(prompt, dict) else prompt)
            out.append(
                {**base, "action": "system", "args": {"content": text, "tools": _tools(e.get("tools"))}}
            )
        elif kind == "MessageEvent":
            message = _obj(e.get("llm_message"))
            role = message.get("role") or e.get("source")
            text = text_of(message.get("content"))
            source = "user" if role == "user" else "agent"
            out.append({**base, "source": source, "action": "message", "args": {"content": text}})
        elif kind == "ActionEvent":
            rid = str(e.get("llm_response_id") or e.get("id"))
            number_of[str(e.get("id"))] = n
            by_call[str(e.get("tool_call_id"))] = n
            out.append(
                {
                    **base,
                    "source": "agent",
                    "action": e.get("tool_name"),
                    "tool_call_metadata": {
                        "function_name": e.get("tool_name"),
                        "tool_call_id": e.get("tool_call_id"),
                        "model_response": bodies[rid],
                        "total_calls_in_response": len(batches[rid]),
                    },
                }
            )
        elif kind in _ANSWERS:
            cause = number_of.get(str(e.get("action_id"))) or by_call.get(str(e.get("tool_call_id")))
            if cause is None:
                issues.append(
                    Issue(
                        kind="damaged",
                        where=f"{where} event {e.get('id')}",
                        what=f"a {kind} for call {e.get('tool_call_id')} whose action is not in the stream: "
                        "not imported",
                    )
                )
                continue
            text, error, code = _observation(e)
            meta = {"exit_code": code} if code is not None else {}
            out.append(
                {
                    **base,
                    "cause": cause,
                    "observation": "error" if error else "run",
                    "content": text,
                    "extras": {"metadata": meta},
                }
            )
        elif isinstance(kind, str) and "Condensation" in kind and kind != "CondensationRequest":
            out.append({**base, "source": "agent", "action": "condensation"})
    return out

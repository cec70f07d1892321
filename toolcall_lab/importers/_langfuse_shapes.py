"""The shapes Langfuse exporters write into an observation's input and output, read as chat messages
(see `toolcall_lab.importers.langfuse`).

A generation's output is, depending on the integration: an OpenAI-compatible completion
(``choices``), a bare assistant message (``{"role": "assistant", "content", "tool_calls"}``, as
Langfuse's OpenAI wrapper and LangChain handler write it), a LangChain message (``tool_calls`` of
``{name, args, id}``, or ``additional_kwargs.tool_calls`` in OpenAI form; serialised
``{"lc": 1, "kwargs": {...}}``), Anthropic content blocks (``tool_use``), the AI SDK's parts
(``tool-call``), Gemini's ``{"role": "model", "parts": [{"functionCall": ...}]}``, a list of
messages, or plain text. Inputs are lists of such messages (the
LangChain handler appends the offered tools as ``{"role": "tool", "content": <schema>}`` entries).
"""

from __future__ import annotations

import json
from typing import Any

from toolcall_lab.importers._build import call_entry, text_of


def loads(value: Any) -> Any:
    """JSON text decoded (Langfuse stores some fields as JSON strings); anything else as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _arguments(value: Any) -> str:
    value = loads(value) if isinstance(value, str) and value.lstrip().startswith("{") else value
    return value if isinstance(value, str) else json.dumps(value if value is not None else {})


def tool_call(entry: Any) -> dict[str, Any] | None:
    """One tool-call entry in any of the known forms -> an OpenAI ``tool_calls`` entry."""
    if not isinstance(entry, dict):
        return None
    fn = entry.get("function")
    if isinstance(fn, dict) and fn.get("name"):  # OpenAI
        return call_entry(entry.get("id"), str(fn["name"]), _arguments(fn.get("arguments")))
    if entry.get("type") == "tool_use" and entry.get("name"):  # Anthropic block
        return call_entry(entry.get("id"), str(entry["name"]), _arguments(entry.get("input")))
    if entry.get("type") == "tool-call" and entry.get("toolName"):  # AI SDK part
        return call_entry(
            entry.get("toolCallId"), str(entry["toolName"]), _arguments(entry.get("input", entry.get("args")))
        )
    if entry.get("name") and ("args" in entry or "arguments" in entry):  # LangChain ToolCall
        return call_entry(
            entry.get("id"), str(entry["name"]), _arguments(entry.get("args", entry.get("arguments")))
        )
    return None


def _langchain(doc: dict[str, Any]) -> dict[str, Any]:
    """A serialised LangChain object (``{"lc": 1, "kwargs": {...}}``) -> its fields."""
    if doc.get("lc") and isinstance(doc.get("kwargs"), dict):
        kind = (doc.get("id") or [""])[-1] if isinstance(doc.get("id"), list) else ""
        role = {
            "AIMessage": "assistant",
            "HumanMessage": "user",
            "SystemMessage": "system",
            "ToolMessage": "tool",
        }
        return {**doc["kwargs"], "role": doc["kwargs"].get("role") or role.get(str(kind), kind)}
    return doc


_ROLES = {"ai": "assistant", "human": "user", "AIMessageChunk": "assistant", "model": "assistant"}


def message(doc: Any) -> dict[str, Any] | None:
    """A message in any of the known forms -> an OpenAI chat message (None: not a message)."""
    if not isinstance(doc, dict):
        return None
    doc = _langchain(doc)
    if isinstance(doc.get("parts"), list) and "content" not in doc:  # Gemini: parts, functionCall
        doc = {**doc, "content": [_gemini_part(p) for p in doc["parts"]]}
    role = doc.get("role") or _ROLES.get(str(doc.get("type")), doc.get("type"))
    role = _ROLES.get(str(role), role)
    if role not in ("assistant", "user", "system", "tool", "developer"):
        return None
    content = doc.get("content")
    entries = doc.get("tool_calls") or (doc.get("additional_kwargs") or {}).get("tool_calls") or []
    if isinstance(content, list):
        entries = [
            *entries,
            *(b for b in content if isinstance(b, dict) and b.get("type") in ("tool_use", "tool-call")),
        ]
        texts = [
            str(b.get("text", "")) if isinstance(b, dict) else str(b)
            for b in content
            if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
        ]
        results = [
            b for b in content if isinstance(b, dict) and b.get("type") in ("tool_result", "tool-result")
        ]
        if results and role in ("user", "tool"):
            return None  # several tool messages: see `messages`
        content = "".join(texts) or None
    elif content is not None and not isinstance(content, str):
        content = text_of(content)
    out: dict[str, Any] = {"role": role, "content": content}
    calls = [c for c in (tool_call(e) for e in entries) if c is not None]
    if calls and role == "assistant":
        out["tool_calls"] = calls
    if role == "tool":
        out["tool_call_id"] = doc.get("tool_call_id") or doc.get("toolCallId")
    return out


def _gemini_part(part: Any) -> Any:
    """A Gemini content part as the block this module reads (text, or a tool-call part)."""
    if isinstance(part, dict) and isinstance(part.get("functionCall"), dict):
        fc = part["functionCall"]
        return {
            "type": "tool-call",
            "toolCallId": fc.get("id"),
            "toolName": fc.get("name"),
            "input": fc.get("args"),
        }
    if isinstance(part, dict) and "text" in part:
        return {"type": "text", "text": part["text"]}
    return part


def _is_schema(doc: Any) -> bool:
    doc = loads(doc)
    return isinstance(doc, dict) and (
        doc.get("type") == "function" or ("name" in doc and ("parameters" in doc or "input_schema" in doc))
    )


def messages(value: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Prompt messages in any of the known forms -> (chat messages, tool schemas found among them)."""
    items = loads(value)
    if isinstance(items, dict) and isinstance(items.get("messages"), list):
        items = items["messages"]
    if isinstance(items, str):
        return [{"role": "user", "content": items}], []
    if isinstance(items, list) and items and all(isinstance(i, list) for i in items):
        items = [m for batch in items for m in batch]  # LangChain's list of prompts
    out: list[dict[str, Any]] = []
    schemas: list[dict[str, Any]] = []
    for m in items if isinstance(items, list) else []:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "tool" and _is_schema(m.get("content")) and not m.get("tool_call_id"):
            schemas.append(schema(loads(m.get("content"))))
            continue
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") in ("tool-result", "tool_result") for p in content
        ):
            out += [
                {
                    "role": "tool",
                    "tool_call_id": p.get("toolCallId", p.get("tool_use_id")),
                    "content": text_of(p.get("output", p.get("result", p.get("content")))),
                }
                for p in content
                if isinstance(p, dict) and p.get("type") in ("tool-result", "tool_result")
            ]
            continue
        found = message(m)
        if found is not None:
            out.append(found)
    return out, schemas


def schema(doc: Any) -> dict[str, Any]:
    """A tool definition in OpenAI or plain form -> an OpenAI tool schema."""
    if isinstance(doc, dict) and doc.get("type") == "function" and isinstance(doc.get("function"), dict):
        return {"type": "function", "function": doc["function"]}
    d = doc if isinstance(doc, dict) else {}
    return {
        "type": "function",
        "function": {
            "name": d.get("name"),
            "description": d.get("description", ""),
            "parameters": d.get("parameters") or d.get("inputSchema") or d.get("input_schema") or {},
        },
    }


def other_choices(value: Any) -> list[dict[str, Any]]:
    """The assistant messages of an output's choices beyond the first (``n > 1``; usually none)."""
    doc = loads(value)
    if not (isinstance(doc, dict) and isinstance(doc.get("choices"), list)):
        return []
    out = []
    for choice in doc["choices"][1:]:
        found = message({"role": "assistant", **((choice or {}).get("message") or {})})
        out.append(found or {"role": "assistant", "content": None})
    return out


def output_message(value: Any) -> tuple[dict[str, Any] | None, bool]:
    """A generation's output -> (its assistant message, whether the output was recorded at all).

    (None, True): recorded, but in a form this importer does not read (the caller reports it)."""
    doc = loads(value)
    if doc is None or doc == "" or doc == {}:
        return None, False
    if isinstance(doc, str):
        return {"role": "assistant", "content": doc}, True
    if isinstance(doc, list):
        said = [m for m in (message(d) for d in doc) if m is not None and m["role"] == "assistant"]
        return (said[-1] if said else None), True
    if isinstance(doc, dict):
        if isinstance(doc.get("choices"), list) and doc["choices"]:
            choice = doc["choices"][0] if isinstance(doc["choices"][0], dict) else {}
            return message({"role": "assistant", **(choice.get("message") or {})}), True
        if isinstance(doc.get("tool_calls"), list) and "role" not in doc and "type" not in doc:
            doc = {"role": "assistant", **doc}  # LangChain's bare additional_kwargs
        if doc.get("role") is None and doc.get("type") is None and "content" in doc:
            doc = {"role": "assistant", **doc}
        found = message(doc)
        if found is not None and found["role"] == "assistant":
            return found, True
    return None, True

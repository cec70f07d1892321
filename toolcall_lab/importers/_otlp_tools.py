"""Which tool span ran which call of a model span's response (see `toolcall_lab.importers.otlp`).

The strongest evidence decides, for the whole batch at once, so a weak match never takes a span a
stronger one ties to another call: first the call id (``gen_ai.tool.call.id`` / ``tool_call.id``)
where the span's tool is the call's tool; then the call's arguments, which most instrumentations put
on the tool span (GenAI ``gen_ai.tool.call.arguments``, pydantic-ai ``tool_arguments``,
OpenInference ``input.value``, which smolagents writes as ``{"args": [...], "kwargs": {...}}``,
OpenLLMetry ``traceloop.entity.input``); last the tool's name and the order within the batch (spans
under the model span's own agent span first). Only name-and-order matches can cross two calls of
one tool: when they decide between such calls the import says so. A span whose call id names
another tool's call is damage (its id is wrong): it is matched by its tool and arguments, and said.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolcall_lab.importers._build import Issue
from toolcall_lab.importers._otlp_spans import Span

SpanKey = tuple[str, str]
_ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "tool_arguments", "input.value", "traceloop.entity.input")


def span_key(span: Span) -> SpanKey:
    return span.trace_id, span.span_id


def tool_name(span: Span) -> Any:
    return (
        span.attrs.get("gen_ai.tool.name")
        or span.attrs.get("tool.name")
        or span.attrs.get("traceloop.entity.name")
        or span.name.removeprefix("execute_tool ").removesuffix(".tool")
    )


def tool_call_id(span: Span) -> Any:
    return span.attrs.get("gen_ai.tool.call.id") or span.attrs.get("tool_call.id")


UNREADABLE = object()


def loads(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return UNREADABLE


def span_arguments(span: Span) -> tuple[Any, str | None]:
    """The arguments a tool span shows (parsed), and the attribute holding them (None: none)."""
    for key in _ARGUMENT_KEYS:
        if span.attrs.get(key) is not None:
            return loads(span.attrs[key]), key
    return None, None


def same_arguments(span: Span, call: dict[str, Any]) -> bool:
    """Whether the span's arguments are the call's: the same object, or a decorated function's
    ``{"args": [...], "kwargs": {...}}`` holding them (other keys, such as smolagents'
    ``sanitize_inputs_outputs``, aside)."""
    args = loads((call.get("function") or {}).get("arguments"))
    got, _ = span_arguments(span)
    if not isinstance(args, dict) or not isinstance(got, dict):
        return False
    if got == args:
        return True
    kwargs, positional = got.get("kwargs"), got.get("args")
    return (isinstance(kwargs, dict) and kwargs == args and not positional) or (
        positional == [args] and not kwargs
    )


@dataclass(frozen=True, slots=True)
class Match:
    span: Span
    how: str
    """How it was matched, for the timing note."""


def match_batch(
    calls: list[dict[str, Any]],
    candidates: list[Span],
    in_window: Callable[[Span], bool],
    closeness: Callable[[Span], int],
    where: str,
    model_span: str,
    issues: list[Issue],
) -> list[Match | None]:
    """For each call of one response, the tool span that ran it (None: none found), by the strongest
    evidence first (see the module notes). `candidates`: the unused tool spans of the trace, in time
    order; `in_window`: a span started between this model span and the next."""
    out: list[Match | None] = [None] * len(calls)
    taken: set[SpanKey] = set()
    names = [(c.get("function") or {}).get("name") for c in calls]
    ids = [c.get("id") for c in calls]
    tool_of_id = {cid: names[i] for i, cid in enumerate(ids) if cid}

    def free(t: Span) -> bool:
        return span_key(t) not in taken

    def wrong_id(t: Span) -> bool:
        """The span's call id names a call of this batch, but the span ran another call's tool."""
        sid, ran = tool_call_id(t), tool_name(t)
        return bool(sid) and sid in tool_of_id and tool_of_id[sid] != ran and ran in names

    def take(i: int, t: Span, how: str) -> None:
        out[i] = Match(span=t, how=how)
        taken.add(span_key(t))
        if wrong_id(t):
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{where} span {t.span_id} ({t.name})",
                    what=f"the span names call {tool_call_id(t)}, a {tool_of_id[tool_call_id(t)]} call, but "
                    f"ran {tool_name(t)}: its call id is wrong; it is the {names[i]} call "
                    f"{ids[i] or i} by its tool{' and arguments' if 'arguments' in how else ''}",
                )
            )

    for i, cid in enumerate(ids):  # 1. the call id (unless the span ran another call's tool)
        if not cid:
            continue
        same = [t for t in candidates if free(t) and tool_call_id(t) == cid and not wrong_id(t)]
        pick = next((t for t in same if in_window(t)), same[0] if same else None)
        if pick is not None:
            take(i, pick, "matched by call id")
    window = sorted((t for t in candidates if in_window(t)), key=closeness)  # (stable: time order kept)

    def eligible(t: Span, i: int) -> bool:
        sid = tool_call_id(t)
        return free(t) and tool_name(t) == names[i] and (not (ids[i] and sid) or wrong_id(t))

    for i in range(len(calls)):  # 2. the arguments the span shows
        if out[i] is None:
            pick = next((t for t in window if eligible(t, i) and same_arguments(t, calls[i])), None)
            if pick is not None:
                take(i, pick, "matched by name and arguments (the span shows no call id of this call)")
    by_order: dict[Any, list[int]] = {}
    for i in range(len(calls)):  # 3. the tool's name and the order within the batch
        if out[i] is None:
            pick = next((t for t in window if eligible(t, i)), None)
            if pick is not None:
                _, shown = span_arguments(pick)
                take(
                    i,
                    pick,
                    "matched by name and order within the batch (the span has no call id of this call "
                    + (
                        f"and its {shown} is not the call's arguments)"
                        if shown
                        else "and does not show its arguments)"
                    ),
                )
                by_order.setdefault(names[i], []).append(i)
    for name, picked in by_order.items():
        rivals = [i for i in range(len(calls)) if names[i] == name]
        if len(rivals) > 1:
            issues.append(
                Issue(
                    kind="note",
                    where=f"{where} model span {model_span}",
                    what=f"{len(rivals)} calls of {name} in one batch "
                    f"({', '.join(str(ids[i] or i) for i in rivals)}): "
                    f"{', '.join(str(ids[i] or i) for i in picked)} matched to tool spans by order only "
                    "(no call id, no arguments to tell them apart): their results and durations may be "
                    "crossed",
                )
            )
    return out

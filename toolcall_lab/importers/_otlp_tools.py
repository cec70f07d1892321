"""Which tool span ran which call of a model span's response (see `toolcall_lab.importers.otlp`).

The strongest evidence decides, for the whole batch at once, so a weak match never takes a span a
stronger one ties to another call: first what the model saw, the source's own next model request:
it sends back a result for each call id, and the one span of the call's tool showing that result
ran that call; then the call id (``gen_ai.tool.call.id`` / ``tool_call.id``) where the span's tool
is the call's tool; then the call's arguments, which most instrumentations put on the tool span
(GenAI ``gen_ai.tool.call.arguments``, pydantic-ai ``tool_arguments``, OpenInference
``input.value``, which smolagents writes as ``{"args": [...], "kwargs": {...}}``, OpenLLMetry
``traceloop.entity.input``); last the tool's name and the order within the batch (spans under the
model span's own agent span first). Only name-and-order matches can cross two calls of one tool:
when they decide between such calls the import says so. A matched span whose own evidence
disagrees (its call id names another call, its arguments are another call's, the next request sends
back another result for its call) is damage: the DAMAGED line names the span, says what each piece
of evidence says and what decided; the call's result is then what the model was sent back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolcall_lab.importers._build import Issue
from toolcall_lab.importers._otlp_spans import Span

SpanKey = tuple[str, str, int]
_ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "tool_arguments", "input.value", "traceloop.entity.input")


def span_key(span: Span) -> SpanKey:
    """One span: its ids, and which of the different spans sharing them it is (`Span.copy`)."""
    return span.trace_id, span.span_id, span.copy


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


def span_arguments_text(span: Span) -> str | None:
    """A tool span's arguments as a JSON text (the call's own form), None when it shows none."""
    value, key = span_arguments(span)
    if key is None or value is UNREADABLE:
        return None
    if isinstance(value, dict) and isinstance(value.get("kwargs"), dict) and not value.get("args"):
        value = value["kwargs"]  # a decorated function's {"args": [], "kwargs": {...}}
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else None


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
    answers: list[str | None] | None = None,
    result_of: Callable[[Span], str | None] = lambda t: None,
) -> list[Match | None]:
    """For each call of one response, the tool span that ran it (None: none found), by the strongest
    evidence first (see the module notes). `candidates`: the unused tool spans of the trace, in time
    order; `in_window`: a span started between this model span and the next; `answers`: for each
    call, the result the next model request sent back for its id (None: it holds none);
    `result_of`: the result a span shows."""
    out: list[Match | None] = [None] * len(calls)
    taken: set[SpanKey] = set()
    names = [(c.get("function") or {}).get("name") for c in calls]
    ids = [c.get("id") for c in calls]
    said: list[str | None] = list(answers) if answers is not None else [None] * len(calls)
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

    # 0. what the model saw: the next request gives a result as this call's answer, and exactly one
    # span of the call's tool shows that result (and it answers no other call of the batch)
    window = sorted((t for t in candidates if in_window(t)), key=closeness)  # (stable: time order kept)
    for i, answer in enumerate(said):
        if answer is None or said.count(answer) > 1:
            continue
        same = [t for t in window if free(t) and tool_name(t) == names[i] and result_of(t) == answer]
        if len(same) == 1:
            t = same[0]
            agrees = "; the next model request sent back its result as this call's"
            if ids[i] and tool_call_id(t) == ids[i]:
                how = "matched by call id" + agrees
            elif same_arguments(t, calls[i]):
                how = "matched by name and arguments" + agrees
            else:
                how = "matched by its result, which the next model request sent back as this call's"
            take(i, t, how)
    for i, cid in enumerate(ids):  # 1. the call id (unless the span ran another call's tool)
        if not cid or out[i] is not None:
            continue
        same = [t for t in candidates if free(t) and tool_call_id(t) == cid and not wrong_id(t)]
        pick = next((t for t in same if in_window(t)), same[0] if same else None)
        if pick is not None:
            take(i, pick, "matched by call id")

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
    for i, m in enumerate(out):
        if m is not None:
            _contradictions(i, m, calls, ids, said, result_of, tool_of_id, where, issues)
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


def _owner(calls: list[dict[str, Any]], test: Callable[[int], bool]) -> str | None:
    """The id (or position) of the call of the batch `test` picks out, if exactly one."""
    found = [i for i in range(len(calls)) if test(i)]
    return str(calls[found[0]].get("id") or found[0]) if len(found) == 1 else None


def _contradictions(
    i: int,
    m: Match,
    calls: list[dict[str, Any]],
    ids: list[Any],
    said: list[str | None],
    result_of: Callable[[Span], str | None],
    tool_of_id: dict[Any, Any],
    where: str,
    issues: list[Issue],
) -> None:
    """Report a span matched to call `i` whose own evidence disagrees (its call id, its arguments,
    the result the next request sent back for that call): DAMAGED, naming the span, what each piece
    of evidence says, and what decided."""
    t, cid = m.span, ids[i]
    this = str(cid or i)
    sid = tool_call_id(t)
    args, shown = span_arguments(t)
    result = result_of(t)
    found: list[str] = []
    if sid and cid and sid != cid:
        ran = tool_of_id.get(sid)
        other_tool = ran is not None and ran != tool_name(t)
        tail = f", a {ran} call, but ran {tool_name(t)}" if other_tool else ""
        found.append(f"it names call {sid}{tail}")
    if shown is not None and isinstance(args, dict) and not same_arguments(t, calls[i]):
        other = _owner(calls, lambda k: same_arguments(t, calls[k]))
        found.append(f"its arguments ({shown}) are " + (f"call {other}'s" if other else "not this call's"))
    if said[i] is not None and result is not None and result != said[i]:
        other = _owner(calls, lambda k: said[k] == result)
        found.append(
            "the next model request sends back its result as "
            + (f"call {other}'s answer" if other else "no call's answer")
            + f" and {_clip(said[i])} as {this}'s"
        )
    if not found:
        return
    agree: list[str] = []
    if sid == cid and cid:
        agree.append("its call id")
    if shown is not None and same_arguments(t, calls[i]):
        agree.append("its arguments")
    if said[i] is not None and result == said[i]:
        agree.append("the next model request")
    if said[i] is None:
        kept = "its result is the span's (the next model request does not send one back for it)"
    elif said[i] == result or result is None:
        kept = "its result is what the next model request sent back for it"
    else:
        kept = (
            "its result is what the next model request sent back for it; the span's own "
            f"{_clip(result)} is not"
        )
    issues.append(
        Issue(
            kind="damaged",
            where=f"{where} span {t.span_id} ({t.name})",
            what=f"the span's evidence disagrees: {'; '.join(found)}. It is imported as the "
            f"{(calls[i].get('function') or {}).get('name')} call {this} ({_decided(m.how)}"
            + (f"; {' and '.join(agree)} agree" if agree else "")
            + f"); {kept}",
        )
    )


def _decided(how: str) -> str:
    """What decided a match, from its note ("matched by call id; the next model request ...")."""
    return how.split(" (")[0].split("; ")[0]


def _clip(text: str | None) -> str:
    value = repr(text)
    return value if len(value) <= 40 else value[:37] + "..."

"""Langfuse trace exports (``{trace, observations}``) -> traces.

The export is a tree of observations (``parentObservationId``). Model calls are the leaf
``GENERATION`` observations (a generation with generations below it, such as the AI SDK's
``ai.streamText`` around its ``ai.streamText.doStream`` steps, is a wrapper). One agent run is what
hangs under one wrapper generation, or else under one top-level observation (LangGraph puts each
model call under its own ``agent`` span and the tools under ``tools`` spans, all under the graph's
root; a LangChain AgentExecutor puts them side by side): its model calls in time order, its tools
matched to the calls that asked for them.

Tool executions are ``TOOL`` observations, spans named ``ai.toolCall``, and spans that are tools by
their place: named as a tool a model call asked for, with nothing below them, and either hanging
under a ``tools`` / ``ToolNode`` span or given that call's arguments as input (older LangChain
handlers record tools as plain spans). A span named like a tool that neither says so is reported,
not guessed. Id, name, arguments and result come from the observation (``ai.toolCall.*`` metadata
attributes, a LangChain ToolMessage output's ``tool_call_id``, else its name, input and output).

A generation's output is read in every shape exporters write (`_langfuse_shapes`): a completion
with ``choices``, a bare assistant message with ``tool_calls`` (the OpenAI wrapper, LangChain), a
LangChain message, Anthropic blocks, AI SDK parts, text. Its tool calls are matched to the run's
tool observations by call id, else by name and arguments, else by name, among the tools that started
during that step (before the run's next model call), each test tried on every call of the step
before the next, weaker one (a name-only match that decides between calls of one tool is
reported). An output that was not recorded (the AI SDK leaves ``doStream`` outputs empty) is
rebuilt: its tool calls from the tools that started in that step, its text for the last step from
the wrapper's output; an output in a shape this importer does not read is reported and rebuilt the
same way. The notes say which responses were rebuilt or converted.

Where each number comes from (``recorded``):

- model latency: the generation's start to end, except when a tool of the step started while the
  generation was still open: the AI SDK runs a tool as soon as its call has streamed and keeps the
  step open until the tool returns, so the model's part ends when the (last) tool started; the rest of
  the span is the tool. Time to first token (``completionStartTime``) is kept as the first chunk's
  time;
- tool duration: the tool observation's start to end.

An observation without a valid start or end (``endTime: null``: still running when exported, an
end before the start, a zone-less start hours off) is reported by id; numbers resting on it are
placeholders (the model latency of a step whose tool it is included: the model's part ends where the
tool started), and it keeps its place in time by the stamp that lies inside its parent's time, so it
stays in its step. An observation exported twice is read once; when the copies differ, the report
names the fields and the copy used. A tool observation whose parent chain names an observation the
export lacks (an intermediate span dropped) is damage: it is read as a tool of the run whose model
calls' time holds its start. A tool observation no model call asked for is reported as not
represented. Token counts (``usageDetails``) that are not whole numbers >= 0 are left out, each
with a DAMAGED line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
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
    with_choices,
    zone_less_note,
)
from toolcall_lab.importers._figures import token_counts
from toolcall_lab.importers._files import import_folder, load_json, not_empty, read_text, wrong_kind
from toolcall_lab.importers._langfuse_shapes import loads, messages, other_choices, output_message, schema
from toolcall_lab.importers._matching import match_passes
from toolcall_lab.records import Timing

_TOOL_PARENTS = frozenset({"tools", "tool", "toolnode", "tool_node", "action", "actions", "tool_calls"})
"""Names of the spans agent frameworks hang tool executions under (LangGraph's ``tools`` node)."""

Obs = dict[str, Any]


def _attrs(o: Obs) -> dict[str, Any]:
    meta = loads(o.get("metadata")) or {}
    return (meta.get("attributes") or {}) if isinstance(meta, dict) else {}


def _calls_of(message: dict[str, Any] | None) -> list[dict[str, Any]]:
    return list((message or {}).get("tool_calls") or [])


def _tool_id(o: Obs) -> str | None:
    a, meta, out = _attrs(o), loads(o.get("metadata")), loads(o.get("output"))
    for value in (
        a.get("ai.toolCall.id"),
        meta.get("tool_call_id") if isinstance(meta, dict) else None,
        out.get("tool_call_id") if isinstance(out, dict) else None,
    ):
        if isinstance(value, str) and value:
            return value
    return None


def _tool_name(o: Obs) -> str:
    return str(_attrs(o).get("ai.toolCall.name") or o.get("name"))


def _tool_args(o: Obs) -> str:
    a = _attrs(o)
    if a.get("ai.toolCall.args") is not None:
        return str(a["ai.toolCall.args"])
    given = o.get("input")
    return given if isinstance(given, str) else json.dumps(given or {})


def _tool_result(o: Obs) -> str:
    out = _attrs(o).get("ai.toolCall.result", o.get("output"))
    doc = loads(out)
    if isinstance(doc, dict) and "content" in doc and (doc.get("tool_call_id") or doc.get("type") == "tool"):
        return text_of(doc["content"])  # a LangChain ToolMessage
    return out if isinstance(out, str) else text_of(doc)


def _same_arguments(a: str, b: str) -> bool:
    return a == b or (loads(a) == loads(b) and isinstance(loads(a), dict))


class _Tree:
    """The observations of one export, with their places in the tree."""

    def __init__(self, observations: Sequence[Obs]) -> None:
        self.every = list(observations)
        self.by_id: dict[Any, Obs] = {}
        for o in observations:  # (different observations sharing an id: the first holds the place)
            self.by_id.setdefault(o.get("id"), o)
        self.children: dict[Any, list[Obs]] = {}
        for o in observations:
            self.children.setdefault(o.get("parentObservationId"), []).append(o)

    def parent(self, o: Obs) -> Obs | None:
        return self.by_id.get(o.get("parentObservationId"))

    def ancestors(self, o: Obs) -> list[Obs]:
        out: list[Obs] = []
        p = self.parent(o)
        while p is not None and all(p is not q for q in out):
            out.append(p)
            p = self.parent(p)
        return out

    def below(self, o: Obs) -> list[Obs]:
        out: list[Obs] = []
        todo = list(self.children.get(o.get("id"), []))
        while todo:
            c = todo.pop()
            if any(c is x for x in out):
                continue
            out.append(c)
            todo += self.children.get(c.get("id"), [])
        return out

    def missing_above(self, o: Obs) -> Any:
        """The id of an observation above `o` that the export lacks (a parentObservationId naming no
        observation of it: the tree is cut there), None when its chain is whole."""
        top = ([o, *self.ancestors(o)])[-1]
        parent = top.get("parentObservationId")
        return parent if parent is not None and parent not in self.by_id else None

    def run_of(self, o: Obs) -> Any:
        """The run an observation belongs to: its nearest wrapper generation, else its top ancestor."""
        above = self.ancestors(o)
        wrapper = next((a for a in above if a.get("type") == "GENERATION"), None)
        if wrapper is not None:
            return wrapper.get("id")
        return above[-1].get("id") if above else "(trace)"


def _tools(tree: _Tree, requested: dict[str, list[str]], issues: list[Issue]) -> list[Obs]:
    """The tool executions of an export (see the module notes); spans named like a tool that do not
    say they ran one are reported."""
    out = []
    for o in tree.every:
        kind, name = o.get("type"), str(o.get("name"))
        if kind == "TOOL" or (kind == "SPAN" and name == "ai.toolCall"):
            out.append(o)
            continue
        if kind != "SPAN" or name not in requested:
            continue
        if any(b.get("type") == "GENERATION" for b in tree.below(o)):
            continue
        parent = tree.parent(o)
        under_tools = parent is not None and str(parent.get("name")).lower() in _TOOL_PARENTS
        given = _tool_args(o)
        asked = any(_same_arguments(given, args) for args in requested[name])
        if under_tools or asked or _tool_id(o):
            out.append(o)
        else:
            issues.append(
                Issue(
                    kind="skipped",
                    where=f"observation {o.get('id')} ({name})",
                    what="a span named like a tool a model call asked for, but neither its parent nor its "
                    "input says it ran that call: not read as a tool execution",
                )
            )
    return _one_per_call(out, issues)


_TWIN = "\x00toolcall_lab duplicate"
"""Set (by the importer, on its parsed copy) on a tool observation whose call id another observation
with other times repeats."""


def _one_per_call(tools: list[Obs], issues: list[Issue]) -> list[Obs]:
    """One tool observation per call id (the earliest): a call runs once, so another observation of
    the same call id is a duplicate of the export, dropped with a DAMAGED line (never a second
    execution, never evidence of parallelism)."""
    first: dict[str, Obs] = {}
    out = []
    for o in sorted(tools, key=lambda o: (str(o.get("startTime") or ""), str(o.get("id")))):
        cid = _tool_id(o)
        if cid and cid in first:
            kept = first[cid]
            if (_tool_name(o), _tool_args(o), _tool_result(o)) != (
                _tool_name(kept),
                _tool_args(kept),
                _tool_result(kept),
            ):  # another name, arguments or result: not a copy of the same execution
                issues.append(
                    Issue(
                        kind="failed",
                        where=f"observation {o.get('id')} ({_tool_name(o)})",
                        what=f"another observation of tool call {cid} (observation {kept.get('id')} has it) "
                        "with another name, arguments or result: a call runs once in a trace, so this one "
                        "is not represented (the earlier one is imported)",
                        calls=1,
                    )
                )
                continue
            if (o.get("startTime"), o.get("endTime")) != (kept.get("startTime"), kept.get("endTime")):
                kept[_TWIN] = str(o.get("id"))  # which copy is right is unknown: not evidence of the mode
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"observation {o.get('id')} ({_tool_name(o)})",
                    what=f"another observation of tool call {cid} (observation {kept.get('id')} has it): "
                    "a call runs once, so this duplicate is dropped and one execution imported",
                )
            )
            continue
        if cid:
            first[cid] = o
        out.append(o)
    return out


def _export(path: Path, doc: Any) -> tuple[dict[str, Any], list[Obs]]:
    if isinstance(doc, dict) and isinstance(doc.get("observations"), list):
        trace = doc.get("trace")
        observations = [o for o in doc["observations"] if isinstance(o, dict)]
        return (trace if isinstance(trace, dict) else doc), observations
    raise wrong_kind(path, "langfuse", "expected an object with an 'observations' list")


def _read_once(observations: list[Obs], issues: list[Issue]) -> list[Obs]:
    """Each observation id once; a repeat is reported, not read again. When the copies differ, the
    one with valid times and the most fields (the first of those) is used, and the report says which
    fields differ and which copy."""
    copies: dict[Any, list[Obs]] = {}
    out: list[Obs] = []
    for o in observations:
        oid = o.get("id")
        if oid is None:
            out.append(o)
            continue
        if oid not in copies:
            out.append(o)
        copies.setdefault(oid, []).append(o)
    for oid, group in copies.items():
        if len(group) == 1:
            continue
        kinds = list(dict.fromkeys((c.get("type"), c.get("name")) for c in group))
        if len(kinds) > 1:  # another type or name: different observations, not copies of one
            first = {kinds[0]}
            out += [c for c in group if (c.get("type"), c.get("name")) not in first]
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"observation {oid}",
                    what=f"{len(group)} different observations share this id "
                    f"({'; '.join(f'{t} {n}' for t, n in kinds)}): each is read (an id is no evidence "
                    "that they are one); the tree under the id follows the first",
                )
            )
            group = [c for c in group if (c.get("type"), c.get("name")) in first]
            if len(group) == 1:
                continue
        differ = sorted({k for c in group for k in {*c, *group[0]} if c.get(k) != group[0].get(k)})
        if not differ:
            issues.append(
                Issue(
                    kind="damaged", where=f"observation {oid}", what=f"exported {len(group)} times: read once"
                )
            )
            continue

        def rank(c: Obs) -> tuple[bool, int]:
            start, end = stamp_or_none(c.get("startTime")), stamp_or_none(c.get("endTime"))
            return (
                start is not None and end is not None and end >= start,
                len([v for v in c.values() if v is not None]),
            )

        best = max(range(len(group)), key=lambda k: (rank(group[k]), -k))
        out[next(i for i, o in enumerate(out) if o.get("id") == oid)] = group[best]
        issues.append(
            Issue(
                kind="damaged",
                where=f"observation {oid}",
                what=f"exported {len(group)} times and the copies differ (in {', '.join(differ)}): copy "
                f"{best + 1} is used (valid times and the most fields"
                + "".join(f"; {k} {group[best].get(k)!r}" for k in differ if k in ("startTime", "endTime"))
                + ")",
            )
        )
    return out


def _times(o: Obs, issues: list[Issue], tree: _Tree) -> tuple[float | None, float | None, float | None]:
    """An observation's start and end (None for a missing or inconsistent one, reported), and its
    place in time: its start, or for bad times whichever of its stamps lies inside its parent's time
    (a zone-less start hours off, an end before the start): so one bad number costs only itself, and
    the observation keeps its step."""
    start, end = stamp_or_none(o.get("startTime")), stamp_or_none(o.get("endTime"))
    if start is not None and end is not None and end >= start:
        return start, end, start
    parent = tree.parent(o)
    lo, hi = (
        (stamp_or_none(parent.get("startTime")), stamp_or_none(parent.get("endTime")))
        if parent
        else (None, None)
    )
    inside = [
        (x, name)
        for x, name in ((start, "start"), (end, "end"))
        if x is not None and lo is not None and hi is not None and lo <= x <= hi
    ]
    place, by = inside[0] if inside else (start, "start") if start is not None else (end, "end")
    issues.append(
        Issue(
            kind="damaged",
            where=f"observation {o.get('id')} ({o.get('name')})",
            what=f"startTime {o.get('startTime')!r}, endTime {o.get('endTime')!r}: no valid duration; "
            "the numbers resting on it are placeholders"
            + (f"; it keeps its place in time by its {by}" if place is not None else ""),
        )
    )
    if start is not None and end is not None:  # ends before it starts
        return None, None, place
    return start, end, place


def _sent_back(g: Obs | None, ids: list[Any]) -> list[str | None]:
    """For each call id, the tool message the next model call's input holds for it (what the model
    was sent back), None where it holds none (or there is no next model call)."""
    if g is None:
        return [None] * len(ids)
    doc = loads(g.get("input"))
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    answers: dict[Any, str] = {}
    for m in messages if isinstance(messages, list) else []:
        if isinstance(m, dict) and m.get("role") == "tool" and m.get("tool_call_id"):
            answers.setdefault(m["tool_call_id"], text_of(m.get("content")))
    return [answers.get(cid) if cid else None for cid in ids]


def _match(
    calls: list[dict[str, Any]],
    pool: list[Obs],
    window: tuple[float, float],
    start_of: Any,
    where: str,
    issues: list[Issue],
    said: list[str | None] | None = None,
) -> list[Obs | None]:
    """The tool observation that ran each call of one step, by the strongest evidence for the whole
    step at once: what the model saw (the next model call's input sends back, for the call's id, the
    result exactly one tool of its name in the step shows); the same id; else, among the tools that
    started in the step's window, the same name and arguments, else the same name (in order; when that
    decides between calls of one tool, the report says their results may be crossed). A match whose
    own evidence disagrees (another id, another call's arguments, another result than the model was
    sent) is DAMAGED, saying what decided."""
    ids = [c.get("id") for c in calls]
    names = [(c.get("function") or {}).get("name") for c in calls]
    args = [str((c.get("function") or {}).get("arguments") or "") for c in calls]
    answers = said or [None] * len(calls)

    def near(i: int, j: int) -> bool:
        t = pool[j]
        other = ids[i] and _tool_id(t) and _tool_id(t) != ids[i]
        return window[0] <= start_of(t) < window[1] and _tool_name(t) == names[i] and not other

    def seen(i: int, j: int) -> bool:
        t = pool[j]
        if answers[i] is None or answers.count(answers[i]) > 1:
            return False
        alike = [u for u in pool if _tool_name(u) == names[i] and _tool_result(u) == answers[i]]
        in_step = window[0] <= start_of(t) < window[1] and _tool_name(t) == names[i]
        return in_step and len(alike) == 1 and alike[0] is t

    matched = match_passes(
        len(calls),
        len(pool),
        [
            seen,
            lambda i, j: bool(ids[i]) and _tool_id(pool[j]) == ids[i],
            lambda i, j: near(i, j) and _same_arguments(_tool_args(pool[j]), args[i]),
            near,
        ],
    )
    how = ("the next model call's input", "call id", "name and arguments", "name and order")
    for i, (j, p) in enumerate(matched):
        if j is None:
            continue
        t = pool[j]
        found = []
        if ids[i] and _tool_id(t) and _tool_id(t) != ids[i]:
            found.append(f"it names call {_tool_id(t)}")
        shows = _attrs(t).get("ai.toolCall.args") is not None or t.get("input") is not None
        if shows and not _same_arguments(_tool_args(t), args[i]):
            found.append("its arguments are not the call's")
        if answers[i] is not None and _tool_result(t) != answers[i]:
            found.append("the next model call's input sends back another result for it (that one is used)")
        if found:
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"observation {t.get('id')} ({_tool_name(t)})",
                    what=f"the tool observation's evidence disagrees: {'; '.join(found)}. It is imported as "
                    f"call {ids[i] or i} of {where}, matched by {how[p]}",
                )
            )
    by_order = [i for i, (_, how_) in enumerate(matched) if how_ == 3]
    for name in dict.fromkeys(names[i] for i in by_order):
        rivals = [i for i, n in enumerate(names) if n == name]
        if len(rivals) > 1:
            issues.append(
                Issue(
                    kind="note",
                    where=where,
                    what=f"{len(rivals)} calls of {name} in one step: "
                    f"{', '.join(str(ids[i] or i) for i in by_order if names[i] == name)} matched to tool "
                    "observations by order only (no call id, no arguments to tell them apart): their "
                    "results and durations may be crossed",
                )
            )
    return [pool[j] if j is not None else None for j, _ in matched]


def _as_sent(result: Result, answer: str | None) -> Result:
    """The result the model was sent back (the next model call's input), when it differs from the
    tool observation's output (reported by `_match`)."""
    if answer is None or answer == result.text:
        return result
    return replace(
        result,
        text=answer,
        timing=replace(result.timing, note=f"{result.timing.note}; result: the next model call's input"),
    )


def _result(t: Obs, times: dict[int, tuple[float | None, float | None]]) -> Result:
    status: ResultStatus = "error" if t.get("level") == "ERROR" else "ok"
    t_start, t_end = times[id(t)]
    if t_start is None or t_end is None:
        return Result(
            text=_tool_result(t),
            duration_s=0.0,
            status=status,
            where=f"observation {t.get('id')}",
            timing=Timing(source="placeholder", note="the tool observation has no valid start and end: 0 s"),
        )
    return Result(
        text=_tool_result(t),
        duration_s=t_end - t_start,
        status=status,
        end=t_end,
        start_known=_TWIN not in t,
        where=f"observation {t.get('id')}",
        timing=Timing(
            source="recorded",
            note="the tool observation's start to end"
            + (
                f"; observation {t[_TWIN]} repeats this call with other times (dropped as a duplicate): "
                "not evidence of the mode"
                if _TWIN in t
                else ""
            ),
        ),
    )


def _file(path: Path) -> ImportResult:
    issues: list[Issue] = []
    raw = read_text(path, issues)
    not_empty(path, raw, "Langfuse")
    doc = load_json(path, raw, "langfuse")
    exports = doc if isinstance(doc, list) else [doc]
    segments: list[Segment] = []
    source_calls = source_model_calls = 0
    stamps: list[Any] = []
    for e, export in enumerate(exports):
        trace, observations = _export(path, export)
        stamps += [o.get(k) for o in observations for k in ("startTime", "endTime", "completionStartTime")]
        observations = _read_once(observations, issues)
        tree = _Tree(observations)
        gens = [o for o in observations if o.get("type") == "GENERATION"]
        wrappers = {id(g) for g in gens if any(b.get("type") == "GENERATION" for b in tree.below(g))}
        outputs = {id(g): output_message(g.get("output")) for g in gens if id(g) not in wrappers}
        requested: dict[str, list[str]] = {}
        for message, _ in outputs.values():
            for c in _calls_of(message):
                fn = c.get("function") or {}
                requested.setdefault(str(fn.get("name")), []).append(str(fn.get("arguments") or ""))
        before = len(issues)
        tools = _tools(tree, requested, issues)
        source_calls += sum(i.calls for i in issues[before:] if i.kind == "failed")
        timed = {id(o): _times(o, issues, tree) for o in [*gens, *tools] if id(o) not in wrappers}
        times = {k: (a, b) for k, (a, b, _) in timed.items()}
        places = {k: c for k, (_, _, c) in timed.items()}

        def start_of(o: Obs, places: dict[int, float | None] = places) -> float:
            place = places[id(o)]
            return float("inf") if place is None else place

        leaves = sorted((g for g in gens if id(g) not in wrappers), key=start_of)
        source_model_calls += len(leaves)
        runs: dict[Any, list[Obs]] = {}
        for g in leaves:
            runs.setdefault(tree.run_of(g), []).append(g)
        tools_of: dict[Any, list[Obs]] = {}
        for t in sorted(tools, key=start_of):
            run = tree.run_of(t)
            cut = tree.missing_above(t)
            if cut is not None and run not in runs:  # the tree is cut above it: its run by its time
                run = _run_by_time(t, runs, start_of, times, issues, cut)
            tools_of.setdefault(run, []).append(t)
        for r, (run_id, steps) in enumerate(runs.items()):
            label = f"export {e + 1} run {r + 1}" if len(exports) > 1 or len(runs) > 1 else "run"
            segs, calls = _run(
                path,
                trace,
                tree,
                run_id,
                steps,
                tools_of.pop(run_id, []),
                outputs,
                times,
                places,
                label,
                issues,
            )
            segments += segs
            source_calls += calls
        for t in (t for left in tools_of.values() for t in left):
            source_calls += 1
            issues.append(
                Issue(
                    kind="failed",
                    where=f"observation {t.get('id')} ({_tool_name(t)})",
                    what="a tool observation outside every run with a model call: not imported",
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
        zone_less=zone_less_note(stamps),
    )


def _run_by_time(
    t: Obs,
    runs: dict[Any, list[Obs]],
    start_of: Callable[[Obs], float],
    times: dict[int, tuple[float | None, float | None]],
    issues: list[Issue],
    cut: Any,
) -> Any:
    """The run of a tool observation whose parent chain names an observation the export lacks: the
    run whose model calls' time holds its start (the only run when there is one); reported."""
    at = start_of(t)

    def holds(steps: list[Obs]) -> bool:
        first = start_of(steps[0])
        ends = [e for g in steps if (e := times[id(g)][1]) is not None]
        last = max(ends, default=start_of(steps[-1]))
        return first <= at <= last

    fits = [r for r, steps in runs.items() if holds(steps)] if len(runs) > 1 else list(runs)
    where = f"observation {t.get('id')} ({_tool_name(t)})"
    if len(fits) != 1:
        return "(trace)"
    issues.append(
        Issue(
            kind="damaged",
            where=where,
            what=f"its parent chain names observation {cut}, which the export does not hold: read as a "
            "tool of the run whose model calls' time holds its start"
            + (f" (run of {fits[0]})" if len(runs) > 1 else " (the export's only run)"),
        )
    )
    return fits[0]


def _run(
    path: Path,
    trace: dict[str, Any],
    tree: _Tree,
    run_id: Any,
    steps: list[Obs],
    tools: list[Obs],
    outputs: dict[int, tuple[dict[str, Any] | None, bool]],
    times: dict[int, tuple[float | None, float | None]],
    places: dict[int, float | None],
    label: str,
    issues: list[Issue],
) -> tuple[list[Segment], int]:
    """The segments of one run, and the tool calls of the source it holds."""

    def start_of(o: Obs) -> float:
        place = places[id(o)]
        return float("inf") if place is None else place

    parent = tree.by_id.get(run_id) or {}
    pool = list(tools)
    turns: list[Turn] = []
    cuts: list[int] = []
    rebuilt = converted = source_calls = 0
    for k, g in enumerate(steps):
        metadata_only = 0
        g_start, g_end = times[id(g)]
        nxt = steps[k + 1] if k + 1 < len(steps) else None
        sent: list[str | None] = []
        window = (
            g_start if g_start is not None else float("-inf"),
            start_of(steps[k + 1]) if k + 1 < len(steps) else float("inf"),
        )
        message, recorded = outputs[id(g)]
        unknown_step = False
        if message is None and recorded:
            issues.append(
                Issue(
                    kind="gap",
                    where=f"observation {g.get('id')} ({g.get('name')})",
                    what="its output is in a shape this importer does not read "
                    f"({str(g.get('output'))[:80]!r}): the response is rebuilt from the tools that ran in "
                    "its step",
                )
            )
        if message is not None:
            converted += not (
                isinstance(loads(g.get("output")), dict) and loads(g.get("output")).get("choices")
            )
            body = with_choices(  # n > 1: each other choice a trace (see _build.other_choices)
                completion(message, response_id=str(g.get("id")), model=g.get("model")),
                other_choices(g.get("output")),
            )
            asked = _calls_of(message)
            sent = _sent_back(nxt, [c.get("id") for c in asked])
            mine = _match(asked, pool, window, start_of, f"observation {g.get('id')}", issues, sent)
            for t in mine:
                if t is not None:
                    pool.remove(t)
        else:
            rebuilt += 1
            started = [t for t in pool if window[0] <= start_of(t) < window[1]]
            for t in started:
                pool.remove(t)
            mine = list(started)
            calls = [call_entry(_tool_id(t), _tool_name(t), _tool_args(t)) for t in started]
            for c in _metadata_calls(g, started):
                calls.append(c)
                mine.append(None)
                metadata_only += 1
                issues.append(
                    Issue(
                        kind="damaged",
                        where=f"observation {g.get('id')} ({g.get('name')})",
                        what=f"its metadata (ai.response.toolCalls) holds call {c['id']} "
                        f"({c['function']['name']}), but no tool observation of the export is that call: "
                        "imported without a result (not_recorded); the generation's time is an upper bound "
                        "(the AI SDK keeps a step open while its tools run)",
                    )
                )
            text = None
            if not calls and k == len(steps) - 1:
                text = text_of(loads(parent.get("output")))
            rebuilt_message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                rebuilt_message["tool_calls"] = calls
            if text is None and not calls and k < len(steps) - 1:  # a step we know nothing of
                body = placeholder_payload(
                    "(response not recorded)",
                    why="the step's output was not recorded and no tool observation started in it",
                    response_id=str(g.get("id")),
                    model=g.get("model"),
                )
                unknown_step = True
            else:
                body = completion(rebuilt_message, response_id=str(g.get("id")), model=g.get("model"))
        usage = loads(g.get("usageDetails"))
        if isinstance(usage, dict) and usage:
            damage: list[str] = []
            fields = {f"usageDetails.{k}": usage.get(k) for k in ("input", "output", "total")}
            counts = token_counts(fields, damage)
            here = f"observation {g.get('id')} ({g.get('name')})"
            issues += [Issue(kind="damaged", where=here, what=d) for d in damage]
            body["usage"] = {
                "prompt_tokens": counts["usageDetails.input"],
                "completion_tokens": counts["usageDetails.output"],
                "total_tokens": counts["usageDetails.total"],
            }
        ran = [t for t in mine if t is not None]
        latency, timing, model_end, first_token = _model_timing(g, ran, times, places, issues)
        untied = sum(t is None for t in mine)
        if untied and (metadata_only or str(g.get("name")).startswith("ai.")) and timing.measured:
            timing = replace(
                timing,
                covers="upper_bound",
                note=f"{timing.note}; an upper bound: {untied} call(s) of this step have no tool "
                "observation, and the AI SDK keeps the step open while its tools run",
            )
        source_calls += len(mine)
        if message is None:
            sent = [None] * len(mine)  # (a rebuilt step: its calls' ids are the tools' own)
        results = [
            _as_sent(_result(t, times), answer)
            if t is not None
            else Result.missing(
                f"observation {g.get('id')} call {i}",
                damaged=message is None,
                why="in the generation's metadata (ai.response.toolCalls) only: its tool observation is "
                "not in the export; 0 s"
                if message is None
                else "",
            )
            for i, (t, answer) in enumerate(zip(mine, sent, strict=False))
        ]
        ends = [x for x in [g_end, *(times[id(t)][1] for t in ran)] if x is not None]
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
    for t in pool:
        source_calls += 1
        issues.append(
            Issue(
                kind="failed",
                where=f"observation {t.get('id')} ({_tool_name(t)})",
                what="a tool observation of this run that no model call's recorded output asked for: "
                "not imported",
                calls=1,
            )
        )
    left_out = _left_out(pool, turns, times, stamp_or_none(parent.get("startTime")))
    first = steps[0]
    given, schemas = messages(first.get("input"))
    if not given:
        given, more = messages(trace.get("input"))
        schemas += more
    tool_schemas = [*_metadata_tools(first), *schemas]
    notes = (
        "Langfuse export: model latency from each generation (up to its tool's start when the tool ran "
        "inside it), tool durations from the tool observations; "
        + (
            f"{rebuilt} of {len(turns)} responses rebuilt from the tool observations and the wrapper's "
            "output (their outputs were not recorded or not readable)"
            if rebuilt
            else "responses as recorded"
        )
        + (f"; {converted} converted from chat messages to completion bodies" if converted else "")
        + left_out
    )
    out = []
    for lo, hi in zip([0, *cuts], [*cuts, len(turns)], strict=True):
        if lo == hi:
            continue
        out.append(
            Segment(
                title=f"{path.name} {trace.get('name') or ''} {label}".replace("  ", " "),
                slug=f"{slugify(path.stem)}__{slugify(label)}",
                source=f"{path}#trace={trace.get('id')}&observation={run_id}",
                initial=given + conversation(turns[:lo]),
                tools=tool_schemas,
                turns=turns[lo:hi],
                status="incomplete" if hi in cuts else "completed",
                reason="response_not_recorded" if hi in cuts else "final_answer",
                provider="langfuse",
                model=first.get("model"),
                created=str(first.get("startTime")),
                notes=notes,
            )
        )
    return out, source_calls


def _left_out(
    lost: list[Obs],
    turns: list[Turn],
    times: dict[int, tuple[float | None, float | None]],
    wrapper_start: float | None,
) -> str:
    """What the notes say when tool observations of the run that no recorded model call asked for
    (NOT REPRESENTED) ran before the trace's first model call or after its last record: that part of
    the run, which the export shows, is not in the trace, so its recorded wall time leaves it out
    ('' when none did)."""
    first = next((t.recorded_start for t in turns if t.recorded_start is not None), None)
    last = max((t.recorded_end for t in turns if t.recorded_end is not None), default=None)
    before = [(s, t) for t in lost if (s := times[id(t)][0]) is not None and first is not None and s < first]
    after = [(e, t) for t in lost if (e := times[id(t)][1]) is not None and last is not None and e > last]
    out = ""
    if before and first is not None:
        ids = ", ".join(str(t.get("id")) for _, t in before)
        begin = min(s for s, _ in before)
        if wrapper_start is not None and wrapper_start < begin:
            begin = wrapper_start
        out += (
            f"; the first {first - begin:.3f} s of this run (from "
            + ("the run's wrapper's start" if begin == wrapper_start else f"tool observation {ids}'s start")
            + f") are not in this trace: tool observation(s) {ids} ran then, and the generation that "
            "asked for them is not in the export (NOT REPRESENTED); the recorded wall time leaves them out"
        )
    if after and last is not None:
        ids = ", ".join(str(t.get("id")) for _, t in after)
        out += (
            f"; the last {max(e for e, _ in after) - last:.3f} s of this run are not in this trace: tool "
            f"observation(s) {ids} no recorded model call asked for (NOT REPRESENTED) ran then; the "
            "recorded wall time leaves them out"
        )
    return out


def _model_timing(
    g: Obs,
    ran: list[Obs],
    times: dict[int, tuple[float | None, float | None]],
    places: dict[int, float | None],
    issues: list[Issue],
) -> tuple[float, Timing, float | None, float | None]:
    """(latency, its label, when the model's part ended, time to first token) of one generation. A
    ``completionStartTime`` that is not a time is reported (DAMAGED) and not used."""
    given = g.get("completionStartTime")
    if given not in (None, "None", "") and stamp_or_none(given) is None:
        issues.append(
            Issue(
                kind="damaged",
                where=f"observation {g.get('id')} ({g.get('name')})",
                what=f"completionStartTime {given!r} is not a timestamp: not used, the first token time is "
                "unknown",
            )
        )
    g_start, g_end = times[id(g)]
    if g_start is None or g_end is None:
        return (
            MODEL_S,
            Timing(
                source="placeholder", note=f"the generation has no valid start and end: {MODEL_S} s assumed"
            ),
            None,
            None,
        )
    unsure = [
        t
        for t in ran
        if times[id(t)][0] is None and (at := places[id(t)]) is not None and g_start <= at <= g_end
    ]
    if unsure:  # the model's part ends where its tool started, and that start is not trusted
        return (
            MODEL_S,
            Timing(
                source="placeholder",
                note=f"its tool (observation {unsure[0].get('id')}) ran inside the generation's "
                f"{g_end - g_start:.3f} s but has no valid times, so where the model's part ended is not "
                f"in the export: {MODEL_S} s assumed",
            ),
            None,
            None,
        )
    inside = [s for t in ran if (s := times[id(t)][0]) is not None and s < g_end]
    if inside:
        latency = max(inside) - g_start
        note = (
            f"from the generation's start to its tool's start ({latency:.3f} s): the AI SDK ran the tool "
            f"while the step was open (the span's own {g_end - g_start:.3f} s include the tool)"
        )
    else:
        latency, note = g_end - g_start, "the generation's start to end"
    first_token = None
    ttft_at = stamp_or_none(g.get("completionStartTime"))
    if ttft_at is not None and g_start <= ttft_at <= g_start + latency:
        first_token = ttft_at - g_start
        note += f"; first token after {first_token:.3f} s (completionStartTime)"
    elif ttft_at is not None:
        note += (
            f"; completionStartTime {g.get('completionStartTime')} lies outside the call "
            f"({ttft_at - g_start:+.3f} s from its start): not used, first token time unknown"
        )
    return latency, Timing(source="recorded", note=note), g_start + latency, first_token


def _metadata_calls(g: Obs, started: list[Obs]) -> list[dict[str, Any]]:
    """The calls a generation's metadata (the AI SDK's ``ai.response.toolCalls``) holds that none of
    the tool observations `started` in its step is (by call id, else by name and arguments)."""
    found = loads(_attrs(g).get("ai.response.toolCalls"))
    out = []
    for c in found if isinstance(found, list) else []:
        if not isinstance(c, dict) or not isinstance(c.get("toolName"), str):
            continue
        given = c.get("input", c.get("args"))
        args = given if isinstance(given, str) else json.dumps(given if given is not None else {})
        cid = c.get("toolCallId")
        if any(
            (cid is not None and _tool_id(t) == cid)
            or (
                _tool_id(t) is None
                and _tool_name(t) == c["toolName"]
                and _same_arguments(_tool_args(t), args)
            )
            for t in started
        ):
            continue
        out.append(call_entry(cid if isinstance(cid, str) else None, c["toolName"], args))
    return out


def _metadata_tools(o: Obs) -> list[dict[str, Any]]:
    meta = loads(o.get("metadata")) or {}
    return [
        schema(d)
        for t in (meta.get("tools") if isinstance(meta, dict) else None) or []
        if isinstance(d := loads(t), dict) and (d.get("name") or d.get("function"))
    ]


def import_langfuse(path: str | Path) -> ImportResult:
    """A Langfuse trace export (``.json``), or a folder of them (each file on its own), -> traces."""
    p = Path(path)
    if p.is_dir():
        return import_folder("langfuse", p, (".json",), _file)
    return _file(p)

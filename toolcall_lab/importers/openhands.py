"""OpenHands event streams and evaluation outputs -> traces.

Accepts a saved trajectory (a JSON list of events) or an evaluation ``output.jsonl`` (one record per
line with ``history`` and ``metrics``); OpenHands V1 (software-agent-sdk) event streams, as a JSON
list or as a conversation's ``events/`` folder, are read through `_openhands_v1`. Events carry
``id``, ``timestamp`` (local time, no zone),
``source`` and an ``action`` or an ``observation`` (``cause`` = the action's id). Tool-call actions
carry ``tool_call_metadata`` with the provider's ``model_response`` (a chat-completion dump, kept as
the response body) and ``total_calls_in_response``.

Traces: one per user message (the system prompt from the ``system`` action, its ``tools`` as the tool
schemas). A model response OpenHands rejected before it became an action (an ``error`` observation
without a ``cause``: the response is in ``metrics`` but its body is not in the log) ends the trace
with a round that says so (``response_not_recorded``); the next trace starts after the error, which
OpenHands sends back as a user message. The ``finish`` action is a tool call that gets no
observation: the trace ends ``completed``/``finish_call``.

Where each number comes from (``recorded``):

- model latency: ``metrics.response_latencies`` (OpenHands' own measurement of each completion call,
  matched by ``response_id``; an id the metrics list twice, or several responses share, is paired by
  the order of the calls where that tells, else not used, and reported: `_openhands_responses`) where
  present; otherwise from the event that completed the request (the previous observation or user
  message) to the action, which includes OpenHands' step overhead. When that event's timestamp is
  not trusted, the start is not in the log: a placeholder (never a gap measured from an earlier
  event, which would hold the tool's time). A latency measured across a record the log lost (an
  action whose observation is missing, an observation whose action is missing) is an
  ``upper_bound`` saying so;
- tool duration: from the action to its observation. Actions of one response run one after another,
  so a later call is timed from the previous call's observation.

Results are the observation's ``content`` (with the ``prefix``/``suffix`` OpenHands stores beside a
command's output); OpenHands' other framing of observations (and recalled workspace context) is not
in the log. An ``error`` observation is an error result, and so is a command that exited with a
non-zero code (as Claude Code logs mark them); exit code -1 (OpenHands' no-output limit) is a
timeout. An action whose observation is missing while the
episode goes on is imported with status ``not_recorded`` and reported as damage.

Events are read in ``id`` order: events out of that order, repeated ids and timestamps that
contradict the order are reported (a timestamp that does not fit is not trusted: numbers resting on
it become placeholders). The trace is placed on the events' timeline (see `_build`). An action
whose ``args`` ran another value than its call in ``model_response`` asks for (a key both hold,
OpenHands' own ``thought`` and flags aside) is DAMAGED, the values shown with credentials masked: the
call is imported as the model gave it, its result is what the action returned.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    MODEL_S,
    TOLERANCE_S,
    ImportResult,
    Issue,
    Result,
    ResultStatus,
    Segment,
    Turn,
    build_result,
    completion,
    conversation,
    placeholder_payload,
    slugify,
    stamp_or_none,
    text_of,
    zone_less_note,
)
from toolcall_lab.importers._figures import usable_figure
from toolcall_lab.importers._files import (
    import_folder,
    json_error,
    load_json,
    not_empty,
    read_text,
    wrong_kind,
)
from toolcall_lab.importers._openhands_responses import pair_latencies, response_key, responses
from toolcall_lab.importers._openhands_v1 import is_v1, to_v0
from toolcall_lab.records import Timing
from toolcall_lab.redaction import scrub_text


@dataclass(slots=True)
class _Response:
    response_id: str
    body: dict[str, Any] | None
    actions: list[dict[str, Any]] = field(default_factory=list)
    text: str | None = None
    """For a response without a logged body (a final message action): its text."""


def _result_text(obs: dict[str, Any]) -> str:
    meta = (obs.get("extras") or {}).get("metadata") or {}
    content = text_of(obs.get("content"))
    if isinstance(meta, dict) and (meta.get("prefix") or meta.get("suffix")):
        return f"{meta.get('prefix') or ''}{content}{meta.get('suffix') or ''}"
    return content


def _status(obs: dict[str, Any]) -> tuple[ResultStatus, str]:
    """An observation's status, and why (an error observation, a non-zero exit code)."""
    if obs.get("observation") == "error":
        return "error", "an error observation"
    meta = (obs.get("extras") or {}).get("metadata") or {}
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    if code == -1:  # OpenHands' no-output timeout: the command did not finish in time
        return "timeout", "exit code -1: no output within OpenHands' time limit"
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return "error", f"exit code {code}"
    return "ok", ""


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two events are one event logged twice only when they are identical."""
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _distinct(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`events` without identical repeats (different events sharing an id are all kept)."""
    seen: set[str] = set()
    out = []
    for e in events:
        key = json.dumps(e, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def _call_id(e: dict[str, Any]) -> str | None:
    meta = e.get("tool_call_metadata")
    cid = meta.get("tool_call_id") if isinstance(meta, dict) else None
    return str(cid) if cid else None


_ORPHAN = "whose action is not in the log"
"""Says an observation proves a call the log lost (counted as a call of the source)."""


def _lost_note(lost: list[str]) -> str:
    """What a latency measured across records the log lost holds besides the model call ('' when
    nothing was lost)."""
    if not lost:
        return ""
    return (
        "; "
        + "; ".join(lost)
        + ": the model call that made "
        + ("it" if len(lost) == 1 else "them")
        + " and "
        + ("its" if len(lost) == 1 else "their")
        + " run fall in this time too"
    )


def _join(
    events: list[dict[str, Any]], where: str, issues: list[Issue], orphans: dict[int, str] | None = None
) -> dict[int, dict[str, Any]]:
    """Each tool-call action's observation (by the action's ``id()``), joined by the strongest key:
    the observation's ``tool_call_metadata.tool_call_id`` when one action holds it, else its ``cause``
    when one action has that id. An observation the keys do not tie to one action, and a second
    observation for an action, are reported (their content is not imported).

    An observation whose action is not in the log (`_ORPHAN`) proves a call and the model call that
    made it: NOT REPRESENTED, counted in the source's calls and, unless a logged response holds the
    call, model calls (one per response the observations name, else one per run of such observations
    with no action between them). `orphans` gets each one's ``id()`` -> what it proves, for the
    figures measured across it."""
    actions = [e for e in events if "action" in e and e.get("tool_call_metadata")]
    logged = {k for a in actions if (k := response_key(a)) is not None}
    lost: dict[Any, Any] = {}  # a lost response (its key, or a run of observations) -> its first event
    run: Any = None
    by_call: dict[str, list[dict[str, Any]]] = {}
    by_eid: dict[Any, list[dict[str, Any]]] = {}
    for a in actions:
        if (cid := _call_id(a)) is not None:
            by_call.setdefault(cid, []).append(a)
        by_eid.setdefault(a.get("id"), []).append(a)
    joined: dict[int, dict[str, Any]] = {}
    for o in events:
        if "observation" not in o:
            if "action" in o:
                run = None
            continue
        cid, cause = _call_id(o), o.get("cause")
        by_id = by_eid.get(cause, []) if cause is not None else []
        if cid is not None and len(by_call.get(cid, [])) == 1:
            target = by_call[cid][0]
            if cause is None:
                issues.append(
                    Issue(
                        kind="note",
                        where=f"{where} event {o.get('id')}",
                        what=f"an observation without its cause: joined to action {target.get('id')} by "
                        f"its tool_call_id {cid}",
                    )
                )
            elif target not in by_id:
                issues.append(
                    Issue(
                        kind="damaged",
                        where=f"{where} event {o.get('id')}",
                        what=f"the observation's cause {cause} is not the action that holds its tool_call_id "
                        f"{cid} (event {target.get('id')}): joined by the tool_call_id",
                    )
                )
        elif len(by_id) == 1 and (cid is None or _call_id(by_id[0]) in (None, cid)):
            target = by_id[0]
        elif cid is not None and not by_call.get(cid) and not by_id and o.get("observation") != "error":
            own = response_key(o)
            if own is None and run is None:
                run = ("run", o.get("id"))
            key = own if own is not None else run
            first = lost.setdefault(key, o.get("id")) if key not in logged else None
            named = f" (response {own[0]})" if own is not None else ""
            model = (
                ""
                if first is None
                else f"; the model call that made it{named} is counted in the source's model calls, not "
                "imported"
                if first == o.get("id")
                else f"; made by the same lost model call as event {first}'s"
            )
            issues.append(
                Issue(
                    kind="failed",
                    where=f"{where} event {o.get('id')}",
                    what=f"an observation of call {cid} {_ORPHAN} (cause {cause!r}): the call ran, but which "
                    f"call the model made is not known; not imported{model}",
                    calls=1,
                    model_calls=1 if first is not None and first == o.get("id") else 0,
                )
            )
            if orphans is not None:
                orphans[id(o)] = (
                    f"the action of call {cid} is not in the log (its observation, event {o.get('id')}, is)"
                )
            continue
        elif cid is not None or by_id:
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{where} event {o.get('id')}",
                    what=f"an observation (cause {cause!r}, tool_call_id {cid!r}) no key ties to one action "
                    f"({len(by_call.get(cid or '', []))} action(s) hold the call id, {len(by_id)} the id "
                    "of its cause): its content is not imported",
                )
            )
            continue
        else:
            continue
        if id(target) in joined:
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{where} event {o.get('id')}",
                    what=f"a second observation for action {target.get('id')} (call {_call_id(target)}; the "
                    f"first is event {joined[id(target)].get('id')}, which is used): its content is not "
                    f"imported ({text_of(o.get('content'))[:80]!r})",
                )
            )
            continue
        joined[id(target)] = o
    return joined


def _ordered(
    events: list[dict[str, Any]], where: str, issues: list[Issue]
) -> tuple[list[dict[str, Any]], dict[int, float | None]]:
    """Events in id order (an identical repeat read once; different events sharing an id both kept,
    reported), and each event's trusted time (by position)."""
    seen: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
    kept: list[dict[str, Any]] = []
    shared: set[Any] = set()
    for k, e in enumerate(events):
        eid = e.get("id")
        earlier = seen.get(eid, []) if eid is not None else []
        twin = next((j for j, f in earlier if _same(f, e)), None)
        if twin is not None:
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{where} event {eid}",
                    what=f"the id {eid} is repeated (events {twin} and {k} of the list, identical): "
                    "read once",
                )
            )
            continue
        if earlier:
            shared.add(eid)
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{where} event {eid}",
                    what=f"events {earlier[0][0]} and {k} of the list share the id {eid} but differ: both "
                    "are kept (an id is no evidence that they are one event); results are joined by "
                    "tool_call_id, and numbers resting on the id are not trusted",
                )
            )
        seen.setdefault(eid, []).append((k, e))
        kept.append(e)
    ids = [e.get("id") for e in kept if e.get("id") not in shared]
    if all(isinstance(i, int) for i in ids) and ids != sorted(ids):  # type: ignore[type-var]
        late = next(i for i, (x, y) in enumerate(itertools.pairwise(ids)) if y < x)  # type: ignore[operator]
        issues.append(
            Issue(
                kind="damaged",
                where=where,
                what=f"events out of id order (event {ids[late + 1]} comes after event {ids[late]}): "
                "read in id order",
            )
        )
        kept.sort(key=lambda e: e["id"] if isinstance(e.get("id"), int) else -1)
    at: dict[int, float | None] = {}
    for k, e in enumerate(kept):
        at[k] = stamp_or_none(e.get("timestamp"))
        if at[k] is None:
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{where} event {e.get('id')}",
                    what=f"no valid timestamp ({e.get('timestamp')!r}): the times resting on it are "
                    "placeholders",
                )
            )
    known = [k for k in range(len(kept)) if at[k] is not None]
    best = {k: 1 for k in known}
    back: dict[int, int] = {}
    for i, k in enumerate(known):
        for j in known[max(0, i - 400) : i]:
            if at[j] <= at[k] + TOLERANCE_S and best[j] + 1 > best[k]:  # type: ignore[operator]
                best[k], back[k] = best[j] + 1, j
    if known and max(best.values()) < len(known):
        k = max(known, key=lambda x: (best[x], -x))
        keep = {k}
        while k in back:
            k = back[k]
            keep.add(k)
        for k in known:
            if k not in keep:
                issues.append(
                    Issue(
                        kind="damaged",
                        where=f"{where} event {kept[k].get('id')}",
                        what=f"timestamp {kept[k].get('timestamp')} contradicts the order of the events: "
                        "not trusted; the times resting on it are placeholders",
                    )
                )
                at[k] = None
    return kept, at


def _history(
    path: Path,
    label: str,
    slug: str,
    raw_events: list[dict[str, Any]],
    entries: list[tuple[str, Any]],
    unlogged: list[str],
    issues: list[Issue],
    model_name: str | None,
) -> list[Segment]:
    events, at_of = _ordered(raw_events, label, issues)
    position = {id(e): k for k, e in enumerate(events)}

    def when(e: dict[str, Any]) -> float | None:
        return at_of.get(position.get(id(e), -1))

    by_id = {e.get("id"): e for e in events}
    orphans: dict[int, str] = {}
    observation_of = _join(events, label, issues, orphans)
    answers = {id(o) for o in observation_of.values()}
    last_event = events[-1] if events else None
    initial: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    segments: list[Segment] = []
    history: list[dict[str, Any]] = []
    current: Segment | None = None
    ready_at: float | None = None
    unlogged_queue = list(unlogged)

    def close(**outcome: Any) -> None:
        nonlocal current
        if current is not None:
            for k, v in outcome.items():
                setattr(current, k, v)
            history.extend(conversation(current.turns))
            segments.append(current)
            current = None

    def open_segment(at_event: dict[str, Any]) -> Segment:
        return Segment(
            title=label,
            slug=slug,
            source=f"{path}#{label.split(' ', 1)[-1]}&event={at_event.get('id')}",
            initial=[*initial, *history],
            tools=tools,
            turns=[],
            provider="openhands",
            model=model_name,
            created=str(at_event.get("timestamp")),
            notes="OpenHands events: model latency from metrics.response_latencies where present, else "
            "from the event that completed the request to the action; tool durations from each action to "
            "its observation; responses as OpenHands logged them (model_response)",
        )

    order = responses(events, label, issues)
    actions_of: dict[tuple[str, str], list[dict[str, Any]]] = {}  # one response's actions, wherever
    for e in events:
        if "action" in e and e.get("tool_call_metadata") and (k := response_key(e)) is not None:
            actions_of.setdefault(k, []).append(e)
    paired = pair_latencies(order, entries, label, issues)
    first_of = {rid: v for rid, v in reversed(entries)}  # (a rejected response: its first entry)
    done: set[tuple[str, str]] = set()
    unanswered: Any = None
    """The action whose observation is missing, when that observation would have completed the next
    request: the next model call's start is then not in the log."""
    untrusted: Any = None
    """The event that completed the next request, when its timestamp is not trusted (its start is
    then not in the log)."""
    lost_between: list[str] = []
    """What the log lost since the last event that completed a request (an action whose observation
    is there): the model call that made it and its run fall inside the next model latency."""
    for e in events:
        at = when(e)
        action = e.get("action")
        if action == "system":
            args = e.get("args") or {}
            initial = [{"role": "system", "content": text_of(args.get("content"))}]
            tools = [t for t in args.get("tools") or [] if isinstance(t, dict)]
            continue
        if action == "message" and e.get("source") == "user":
            if current is not None:
                close(status="incomplete", reason="recording_ends_after_tool_results")
            history.append({"role": "user", "content": text_of((e.get("args") or {}).get("content"))})
            ready_at = at
            untrusted = e.get("id") if at is None else None
            lost_between = []
            continue
        if "observation" in e:
            if id(e) in orphans:
                lost_between.append(orphans[id(e)])
            elif e.get("observation") == "error" and e.get("cause") is None:
                rid = unlogged_queue.pop(0) if unlogged_queue else None
                text = text_of(e.get("content"))
                fitted = _fitting(
                    first_of.get(rid or ""),
                    at - ready_at if at is not None and ready_at is not None else None,
                    f"{label} event {e.get('id')} response {rid}",
                    issues,
                )
                if fitted is not None:
                    latency, timing = (
                        fitted,
                        Timing(
                            source="recorded",
                            note="metrics.response_latencies (OpenHands' measurement of the call)",
                        ),
                    )
                elif at is not None and ready_at is not None and at >= ready_at:
                    latency, timing = (
                        at - ready_at,
                        Timing(
                            source="recorded",
                            note="from the event that completed the request to the error event"
                            + _lost_note(lost_between),
                            covers="upper_bound" if lost_between else "execution",
                        ),
                    )
                else:
                    latency, timing = (
                        MODEL_S,
                        Timing(
                            source="placeholder",
                            note=f"the events' times are not trusted here: {MODEL_S} s assumed",
                        ),
                    )
                if current is None:
                    current = open_segment(e)
                current.turns.append(
                    Turn(
                        payloads=[
                            placeholder_payload(
                                f"(response not recorded: OpenHands rejected it: {text})",
                                why=f"OpenHands rejected this model response before logging it "
                                f"({text[:200]})",
                                response_id=rid or f"unlogged-{e.get('id')}",
                                model=model_name,
                            )
                        ],
                        latency_s=latency,
                        timing=timing,
                        recorded_start=ready_at,
                        recorded_end=at,
                        model_end=at,
                    )
                )
                issues.append(
                    Issue(
                        kind="gap",
                        where=f"{label} event {e.get('id')}",
                        what=f"model response {rid or '(id unknown)'} is not in the log (OpenHands rejected "
                        f"it: {text[:100]}); a placeholder round marks it",
                    )
                )
                close(status="incomplete", reason="response_not_recorded", error=text)
                history.append({"role": "user", "content": text})
                ready_at = at
                untrusted = e.get("id") if at is None else None
                lost_between = []
            elif id(e) in answers or (
                e.get("cause") is not None and e.get("cause") in by_id and _call_id(e) is None
            ):
                if at is None:
                    untrusted = e.get("id")  # the next request's start rests on it: not in the log
                else:
                    ready_at = at if ready_at is None else max(ready_at, at)
            continue
        if e.get("source") != "agent" or action in ("recall", "change_agent_state", "condensation"):
            if action == "condensation":
                issues.append(
                    Issue(
                        kind="gap",
                        where=f"{label} event {e.get('id')}",
                        what="a condensation: later "
                        "requests held a condensed history, the traces show it whole",
                    )
                )
            continue
        meta = e.get("tool_call_metadata") or {}
        body = meta.get("model_response")
        key = response_key(e) if e.get("tool_call_metadata") else None
        rid = str((body or {}).get("id") or f"event-{e.get('id')}")
        if key is not None and key in done:  # a later action of a response already imported
            continue
        if key is not None:
            done.add(key)
        group = actions_of.get(key, [e]) if body is not None and key is not None else [e]
        response = _Response(response_id=rid, body=body if isinstance(body, dict) else None, actions=group)
        if response.body is None:
            response.text = text_of((e.get("args") or {}).get("content")) or str(e.get("message") or "")
        if current is None:
            current = open_segment(e)
        first_at = when(group[0])
        start = None if untrusted is not None else ready_at if ready_at is not None else first_at
        gap = f"{first_at - start:.3f} s" if first_at is not None and start is not None else "not known"
        fitted = _fitting(
            paired.get(key) if key is not None else first_of.get(rid),
            first_at - start if first_at is not None and start is not None else None,
            f"{label} event {e.get('id')} response {rid}",
            issues,
        )
        if fitted is not None:
            latency, timing = (
                fitted,
                Timing(
                    source="recorded",
                    note=f"metrics.response_latencies: {fitted:.3f} s (OpenHands' measurement of the "
                    f"completion call; request-to-action gap {gap})",
                ),
            )
        elif unanswered is not None and first_at is not None and start is not None and first_at >= start:
            latency, timing = (
                first_at - start,
                Timing(
                    source="recorded",
                    covers="upper_bound",
                    note=f"an upper bound: the observation of action {unanswered} (which completed this "
                    "request) is not in the log, so the time from the last event before it to this action "
                    "holds that tool's run too" + _lost_note(lost_between),
                ),
            )
        elif lost_between and first_at is not None and start is not None and first_at >= start:
            latency, timing = (
                first_at - start,
                Timing(
                    source="recorded",
                    covers="upper_bound",
                    note="an upper bound: from the event that completed the request to the action, a time "
                    + _lost_note(lost_between).removeprefix("; "),
                ),
            )
        elif first_at is not None and start is not None and first_at >= start:
            latency, timing = (
                first_at - start,
                Timing(
                    source="recorded",
                    note="from the event that completed the request to the action (includes OpenHands' "
                    "step overhead)"
                    + ("; its response_latencies figure is not used" if rid in dict(entries) else ""),
                ),
            )
        elif untrusted is not None:
            latency, timing = (
                MODEL_S,
                Timing(
                    source="placeholder",
                    note=f"the request was completed by event {untrusted}, whose timestamp is not trusted: "
                    f"the start of this model call is not in the log; {MODEL_S} s assumed",
                ),
            )
        else:
            latency, timing = (
                MODEL_S,
                Timing(
                    source="placeholder", note=f"the events' times are not trusted here: {MODEL_S} s assumed"
                ),
            )
        results: list[Result] = []
        previous_obs_at: float | None = None
        called = [g for g in group if g.get("tool_call_metadata")]
        last_at = first_at
        for g in called:
            obs = observation_of.get(id(g))
            g_at = when(g)
            where = f"{label} event {g.get('id')}"
            if obs is None:
                finish = g.get("action") == "finish"
                results.append(
                    Result.missing(
                        where,
                        damaged=not finish and g is not last_event,
                        why="the finish action gets no observation (OpenHands ends the run): 0 s"
                        if finish
                        else "no observation for this action in the log: 0 s",
                    )
                )
                continue
            obs_at = when(obs)
            status, why = _status(obs)
            started = max(g_at, previous_obs_at) if previous_obs_at is not None and g_at is not None else g_at
            if obs_at is None or started is None or obs_at < started - TOLERANCE_S:
                results.append(
                    Result(
                        text=_result_text(obs),
                        duration_s=0.0,
                        status=status,
                        where=where,
                        timing=Timing(
                            source="placeholder", note="the events' times are not trusted here: 0 s"
                        ),
                    )
                )
                continue
            if obs_at < started:  # (within the tolerance: never a clamped 0 labelled recorded)
                results.append(
                    Result(
                        text=_result_text(obs),
                        duration_s=0.0,
                        status=status,
                        where=where,
                        timing=Timing(
                            source="placeholder",
                            note=f"the observation is dated {started - obs_at:.3f} s before the action: no "
                            "duration in the log, 0 s",
                        ),
                    )
                )
                continue
            results.append(
                Result(
                    text=_result_text(obs),
                    duration_s=obs_at - started,
                    status=status,
                    end=obs_at,
                    where=where,
                    timing=Timing(
                        source="recorded",
                        note="from the action to its observation"
                        + (" (after the previous call's observation)" if previous_obs_at else "")
                        + (f"; {why}" if why else ""),
                    ),
                )
            )
            previous_obs_at = obs_at
            last_at = obs_at if last_at is None else max(last_at, obs_at)
        if response.body is not None:
            payload = json.loads(json.dumps(response.body))
            payload.setdefault("object", "chat.completion")
        else:
            payload = completion(
                {"role": "assistant", "content": response.text}, response_id=rid, model=model_name
            )
        issues += _args_contradictions(payload, called, label)
        turn_calls = len(payload.get("choices", [{}])[0].get("message", {}).get("tool_calls") or [])
        if turn_calls != len(results):
            issues.append(
                Issue(
                    kind="failed",
                    where=f"{label} event {e.get('id')}",
                    what=f"response {rid} has {turn_calls} tool call(s) but {len(results)} action(s) "
                    "carry them; this response is not imported",
                    calls=len(results),
                    model_calls=1,
                )
            )
            continue
        current.turns.append(
            Turn(
                payloads=[payload],
                latency_s=latency,
                timing=timing,
                results=results,
                recorded_start=start,
                recorded_end=last_at,
                model_end=first_at if timing.source == "recorded" else None,
            )
        )
        untrusted = None
        lost_between = []
        unanswered = next(
            (
                g.get("id")
                for g, r in zip(called, results, strict=True)
                if r.status == "not_recorded" and g.get("action") != "finish"
            ),
            None,
        )
        if last_at is not None:
            ready_at = last_at
        if not results:
            close()
        elif any(g.get("action") == "finish" for g in called):
            close(
                status="completed",
                reason="finish_call",
                closing="the agent ended the run with its finish tool: no model response follows",
            )
    if current is not None:
        close(status="incomplete", reason="recording_ends_after_tool_results")
    return segments


def _args_contradictions(payload: dict[str, Any], actions: list[dict[str, Any]], label: str) -> list[Issue]:
    """An action whose ``args`` ran another value than the model's call (in ``model_response``) asks
    for, argument by argument (the keys both hold; OpenHands' own keys such as ``thought`` aside):
    DAMAGED. The call is imported as the model gave it, its result is what the action returned;
    the values are shown with credentials masked."""
    message = (payload.get("choices") or [{}])[0].get("message") or {}
    calls = {c.get("id"): c for c in message.get("tool_calls") or [] if isinstance(c, dict)}
    out: list[Issue] = []
    for g in actions:
        cid = (g.get("tool_call_metadata") or {}).get("tool_call_id")
        call = calls.get(cid)
        ran = g.get("args")
        if call is None or not isinstance(ran, dict):
            continue
        try:
            asked = json.loads((call.get("function") or {}).get("arguments") or "{}")
        except (json.JSONDecodeError, TypeError):
            continue
        if not isinstance(asked, dict):
            continue
        plain = (str, int, float)
        differ = [
            k
            for k, v in asked.items()
            if k in ran
            and k not in _OWN_ARGS
            and isinstance(v, plain)
            and isinstance(ran[k], plain)
            and ran[k] != v
        ]
        if differ:
            shown = "; ".join(
                f"{k}: ran {_masked(ran[k])}, the call asks {_masked(asked[k])}" for k in differ
            )
            out.append(
                Issue(
                    kind="damaged",
                    where=f"{label} event {g.get('id')}",
                    what=f"the action's args contradict its call {cid} in model_response ({shown}): the "
                    "call is imported as the model gave it, its result is what the action returned",
                )
            )
    return out


_OWN_ARGS = frozenset({"thought", "is_input", "blocking", "hidden", "confirmation_state", "security_risk"})
"""Keys OpenHands writes into an action's ``args`` itself (``thought`` holds the response's text as
well as a think tool's argument): not the model's arguments, not compared."""


def _masked(value: Any) -> str:
    text = scrub_text(str(value))[0]
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _fitting(value: Any, gap: float | None, where: str, issues: list[Issue]) -> float | None:
    """A response_latencies figure when it is usable and fits the gap between the event that
    completed the request and the response's event (the fit rule of `_figures`); else None.
    (Unusable values were reported when the metrics were read.)"""
    if value is None:
        return None
    return usable_figure(
        value,
        name="metrics.response_latencies",
        where=where,
        issues=issues,
        at_most=gap if gap is not None and gap >= 0 else None,
        instead="the response is timed from the events",
    )


def _is_event(e: Any) -> bool:
    return isinstance(e, dict) and ("action" in e or "observation" in e)


def _events(path: Path, issues: list[Issue]) -> list[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """(label, events, record) per episode in the file; an unreadable line is reported and skipped."""
    text = read_text(path, issues)
    not_empty(path, text, "OpenHands")
    if text.lstrip().startswith("["):
        doc = load_json(path, text, "openhands")
        if is_v1(doc):
            events = [e for e in doc if isinstance(e, dict)]
            return [("trajectory", to_v0(events, path.name, issues), {})]
        if not isinstance(doc, list) or not any(_is_event(e) for e in doc):
            raise wrong_kind(
                path, "openhands", "a JSON list, but not of OpenHands events (action/observation)"
            )
        return [("trajectory", [e for e in doc if isinstance(e, dict)], {})]
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            issues.append(
                Issue(
                    kind="failed",
                    where=f"{path.name} line {number}",
                    what=f"not valid JSON ({json_error(exc, with_line=False)}): this episode is not imported",
                )
            )
            continue
        if not isinstance(record, dict) or not isinstance(record.get("history"), list):
            issues.append(
                Issue(
                    kind="failed",
                    where=f"{path.name} line {number}",
                    what="not an OpenHands evaluation record (no 'history' list): not imported",
                )
            )
            continue
        label = str(record.get("instance_id") or f"line {number}")
        out.append((f"episode {label}", [e for e in record["history"] if isinstance(e, dict)], record))
    if not out:
        raise wrong_kind(
            path, "openhands", "no line is an OpenHands evaluation record (an object with a 'history' list)"
        )
    return out


def _file(
    path: Path,
    *,
    episodes: list[tuple[str, list[dict[str, Any]], dict[str, Any]]] | None = None,
    issues: list[Issue] | None = None,
) -> ImportResult:
    """One file's episodes (or `episodes` already read, e.g. a V1 events folder, named `path`)."""
    segments: list[Segment] = []
    issues = [] if issues is None else issues
    source_calls = source_model_calls = 0
    stamps: list[Any] = []
    for label, all_events, record in episodes if episodes is not None else _events(path, issues):
        stamps += [e.get("timestamp") for e in all_events]
        events = _distinct(all_events)
        metrics = record.get("metrics") or {}
        raw_entries = [r for r in metrics.get("response_latencies") or [] if isinstance(r, dict)]
        entries: list[tuple[str, Any]] = []  # (response id, the figure; None when not usable), in order
        for n, r in enumerate(raw_entries):
            entries.append((str(r.get("response_id")), r.get("latency")))
            if r.get("latency") is None:
                issues.append(
                    Issue(
                        kind="damaged",
                        where=f"{path.name} {label}",
                        what=f"metrics.response_latencies[{n}] (response {r.get('response_id')}) has no "
                        "latency: the response is timed from the events",
                    )
                )
            elif (
                usable_figure(
                    r.get("latency"),
                    name=f"metrics.response_latencies[{n}].latency (response {r.get('response_id')})",
                    where=f"{path.name} {label}",
                    issues=issues,
                    instead="the response is timed from the events",
                )
                is None
            ):
                entries[-1] = (entries[-1][0], None)
        logged = {rid for rid, _ in responses(events)}
        unlogged = [rid for rid in dict.fromkeys(rid for rid, _ in entries) if rid not in logged]
        calls = sum(1 for e in events if "action" in e and e.get("tool_call_metadata"))
        texts = sum(
            1
            for e in events
            if e.get("source") == "agent" and e.get("action") == "message" and not e.get("tool_call_metadata")
        )
        rejected = sum(1 for e in events if e.get("observation") == "error" and e.get("cause") is None)
        source_calls += calls
        # every response the events show, and every one OpenHands rejected before logging it
        source_model_calls += len(responses(events)) + texts + rejected
        extra = unlogged[rejected + texts :]
        if extra:
            issues.append(
                Issue(
                    kind="note",
                    where=f"{path.name} {label}",
                    what=f"metrics.response_latencies lists {len(extra)} response(s) the events do not show "
                    f"({', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''}) and no rejected response "
                    "or final message accounts for: not counted as model calls (which calls they were is "
                    "not in the log)",
                )
            )
        model = (metrics.get("response_latencies") or [{}])[0].get("model") if metrics else None
        if model is None:
            model = next(
                (
                    ((e.get("tool_call_metadata") or {}).get("model_response") or {}).get("model")
                    for e in events
                    if e.get("tool_call_metadata")
                ),
                None,
            )
        slug = slugify(path.name.rsplit(".", 1)[0]) + "__" + slugify(label.split(" ", 1)[-1])
        before = len(issues)
        episode = _history(path, f"{path.name} {label}", slug, all_events, entries, unlogged, issues, model)
        orphaned = [i for i in issues[before:] if i.kind == "failed" and _ORPHAN in i.what]
        source_calls += sum(i.calls for i in orphaned)
        source_model_calls += sum(i.model_calls for i in orphaned)  # the calls that made lost actions
        segments += episode
        if record.get("error"):
            error = str(record["error"])
            issues.append(Issue(kind="gap", where=label, what=f"the episode ended with an error: {error}"))
            last = episode[-1] if episode else None
            if last is not None and last.reason == "recording_ends_after_tool_results":
                limit = "maximum iteration" in error.lower()
                last.reason = "max_iterations" if limit else "agent_error"
                last.error = error
                last.closing = (
                    f"OpenHands stopped the episode here ({error}): no model response follows"
                    if limit
                    else f"the episode ended with an error ({error}): no model response follows"
                )
    return build_result(
        "openhands",
        str(path),
        segments,
        source_calls=source_calls,
        source_model_calls=source_model_calls,
        issues=issues,
        zone_less=zone_less_note(stamps),
    )


def _event_folder(folder: Path) -> ImportResult:
    """A V1 conversation's ``events/`` folder (one ``event-<n>-<id>.json`` per event) as one stream."""
    issues: list[Issue] = []
    events: list[dict[str, Any]] = []
    for f in sorted(folder.glob("event-*.json")):
        try:
            doc = json.loads(read_text(f, issues))
        except json.JSONDecodeError as exc:
            issues.append(
                Issue(
                    kind="failed",
                    where=f.name,
                    what=f"not valid JSON ({json_error(exc)}): whatever event it held is not imported",
                    unreadable=True,
                )
            )
            continue
        if isinstance(doc, dict):
            events.append(doc)
    stream = folder / "events.json"
    return _file(stream, episodes=[("trajectory", to_v0(events, folder.name, issues), {})], issues=issues)


def import_openhands(path: str | Path) -> ImportResult:
    """An OpenHands trajectory (``.json``: V0 events, or V1 events with a ``kind``), evaluation output
    (``.jsonl``), a V1 conversation's ``events/`` folder, or a folder of files (each on its own: one
    that cannot be read is reported by name and costs only itself)."""
    p = Path(path)
    if p.is_dir() and any(p.glob("event-*.json")):
        return _event_folder(p)
    if p.is_dir():
        return import_folder("openhands", p, (".json", ".jsonl"), _file)
    return _file(p)

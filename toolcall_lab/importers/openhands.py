"""OpenHands event streams and evaluation outputs -> traces.

Accepts a saved trajectory (a JSON list of events) or an evaluation ``output.jsonl`` (one record per
line with ``history`` and ``metrics``). Events carry ``id``, ``timestamp`` (local time, no zone),
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
  matched by ``response_id``) where present; otherwise from the event that completed the request (the
  previous observation or user message) to the action, which includes OpenHands' step overhead;
- tool duration: from the action to its observation. Actions of one response run one after another,
  so a later call is timed from the previous call's observation.

Results are the observation's ``content`` (with the ``prefix``/``suffix`` OpenHands stores beside a
command's output); OpenHands' other framing of observations (and recalled workspace context) is not
in the log. An ``error`` observation is an error result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    ImportResult,
    Issue,
    Result,
    Segment,
    Turn,
    build_result,
    completion,
    conversation,
    epoch,
    merge_results,
    slugify,
    text_of,
)
from toolcall_lab.records import Timing


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


def _history(
    path: Path,
    label: str,
    slug: str,
    events: list[dict[str, Any]],
    latencies: dict[str, float],
    unlogged: list[str],
    issues: list[Issue],
    model_name: str | None,
) -> list[Segment]:
    by_id = {e.get("id"): e for e in events}
    observation_of: dict[Any, dict[str, Any]] = {}
    for e in events:
        if "observation" in e and e.get("cause") is not None:
            observation_of.setdefault(e["cause"], e)
    initial: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    segments: list[Segment] = []
    history: list[dict[str, Any]] = []
    current: Segment | None = None
    ready_at: float | None = None
    unlogged_queue = list(unlogged)
    part = 0

    def close(**outcome: Any) -> None:
        nonlocal current
        if current is not None:
            for k, v in outcome.items():
                setattr(current, k, v)
            history.extend(conversation(current.turns))
            segments.append(current)
            current = None

    def open_segment(at_event: dict[str, Any]) -> Segment:
        nonlocal part
        part += 1
        return Segment(
            title=f"{label} part {part}",
            slug=f"{slug}_part{part:02d}",
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

    responses: list[tuple[_Response, dict[str, Any]]] = []
    actions_of: dict[str, list[dict[str, Any]]] = {}  # one response's actions, wherever they are
    for e in events:
        rid_ = ((e.get("tool_call_metadata") or {}).get("model_response") or {}).get("id")
        if "action" in e and rid_:
            actions_of.setdefault(str(rid_), []).append(e)
    done: set[str] = set()
    i = 0
    while i < len(events):
        e = events[i]
        i += 1
        at = epoch(str(e.get("timestamp")))
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
            continue
        if "observation" in e:
            if e.get("observation") == "error" and e.get("cause") is None:
                rid = unlogged_queue.pop(0) if unlogged_queue else None
                latency = latencies.get(rid or "", max(at - (ready_at or at), 0.0))
                text = text_of(e.get("content"))
                if current is None:
                    current = open_segment(e)
                current.turns.append(
                    Turn(
                        payloads=[
                            completion(
                                {
                                    "role": "assistant",
                                    "content": f"(response not recorded: OpenHands rejected it: {text})",
                                },
                                response_id=rid or f"unlogged-{e.get('id')}",
                                model=model_name,
                            )
                        ],
                        latency_s=latency,
                        timing=Timing(
                            source="recorded",
                            note="metrics.response_latencies (OpenHands' measurement of the call)"
                            if rid in latencies
                            else "from the event that completed the request to the error event",
                        ),
                        recorded_start=ready_at,
                        recorded_end=at,
                    )
                )
                issues.append(
                    Issue(
                        kind="gap",
                        where=f"{label} event {e.get('id')}",
                        what=f"model response {rid or '(id unknown)'} is not in the log (OpenHands rejected "
                        f"it: {text[:100]}); a round marks it",
                    )
                )
                close(status="incomplete", reason="response_not_recorded", error=text)
                history.append({"role": "user", "content": text})
                ready_at = at
            elif e.get("cause") is not None and e.get("cause") in by_id:
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
        rid = str((body or {}).get("id") or f"event-{e.get('id')}")
        if rid in done:  # a later action of a response already imported (they run one at a time)
            continue
        done.add(rid)
        group = actions_of.get(rid, [e]) if body is not None else [e]
        response = _Response(response_id=rid, body=body if isinstance(body, dict) else None, actions=group)
        if response.body is None:
            response.text = text_of((e.get("args") or {}).get("content")) or str(e.get("message") or "")
        responses.append((response, e))
        if current is None:
            current = open_segment(e)
        first_at = epoch(str(group[0].get("timestamp")))
        start = ready_at if ready_at is not None else first_at
        if rid in latencies:
            latency, timing = (
                latencies[rid],
                Timing(
                    source="recorded",
                    note=f"metrics.response_latencies: {latencies[rid]:.3f} s (OpenHands' measurement of the "
                    f"completion call; request-to-action gap {first_at - start:.3f} s)",
                ),
            )
        else:
            latency, timing = (
                max(first_at - start, 0.0),
                Timing(
                    source="recorded",
                    note="from the event that completed the request to the action (includes OpenHands' "
                    "step overhead)",
                ),
            )
        results: list[Result] = []
        previous_obs_at: float | None = None
        called = [g for g in group if g.get("tool_call_metadata")]
        last_at = first_at
        for g in called:
            obs = observation_of.get(g.get("id"))
            g_at = epoch(str(g.get("timestamp")))
            if obs is None:
                results.append(Result.missing())
                continue
            obs_at = epoch(str(obs.get("timestamp")))
            started = max(g_at, previous_obs_at) if previous_obs_at is not None else g_at
            results.append(
                Result(
                    text=_result_text(obs),
                    duration_s=max(obs_at - started, 0.0),
                    status="error" if obs.get("observation") == "error" else "ok",
                    timing=Timing(
                        source="recorded",
                        note="from the action to its observation"
                        + (" (after the previous call's observation)" if previous_obs_at else ""),
                    ),
                )
            )
            previous_obs_at = obs_at
            last_at = max(last_at, obs_at)
        if response.body is not None:
            payload = json.loads(json.dumps(response.body))
            payload.setdefault("object", "chat.completion")
        else:
            payload = completion(
                {"role": "assistant", "content": response.text}, response_id=rid, model=model_name
            )
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
            )
        )
        ready_at = last_at
        if not results:
            close()
        elif any(g.get("action") == "finish" for g in called):
            close(status="completed", reason="finish_call")
    if current is not None:
        close(status="incomplete", reason="recording_ends_after_tool_results")
    return segments


def _events(path: Path, issues: list[Issue]) -> list[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """(label, events, record) per episode in the file; an unreadable line is reported and skipped."""
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        return [("trajectory", json.loads(text), {})]
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            issues.append(
                Issue(
                    kind="failed",
                    where=f"{path.name} line {number}",
                    what=f"not valid JSON ({exc.msg} at column {exc.colno}): this episode is not imported",
                )
            )
            continue
        label = str(record.get("instance_id") or f"line {number}")
        out.append((f"episode {label}", list(record.get("history") or []), record))
    return out


def _file(path: Path) -> ImportResult:
    segments: list[Segment] = []
    issues: list[Issue] = []
    source_calls = source_model_calls = 0
    for label, events, record in _events(path, issues):
        metrics = record.get("metrics") or {}
        latencies = {
            str(r.get("response_id")): float(r["latency"])
            for r in metrics.get("response_latencies") or []
            if isinstance(r, dict) and isinstance(r.get("latency"), int | float)
        }
        logged = {
            str(((e.get("tool_call_metadata") or {}).get("model_response") or {}).get("id"))
            for e in events
            if e.get("tool_call_metadata")
        }
        unlogged = [rid for rid in latencies if rid not in logged]
        calls = sum(1 for e in events if "action" in e and e.get("tool_call_metadata"))
        texts = sum(
            1
            for e in events
            if e.get("source") == "agent" and e.get("action") == "message" and not e.get("tool_call_metadata")
        )
        source_calls += calls
        source_model_calls += len(latencies) if latencies else len(logged) + texts
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
        segments += _history(path, f"{path.name} {label}", slug, events, latencies, unlogged, issues, model)
        if record.get("error"):
            issues.append(
                Issue(kind="gap", where=label, what=f"the episode ended with an error: {record['error']}")
            )
    return build_result(
        "openhands",
        str(path),
        segments,
        source_calls=source_calls,
        source_model_calls=source_model_calls,
        issues=issues,
    )


def import_openhands(path: str | Path) -> ImportResult:
    """An OpenHands trajectory (``.json``) or evaluation output (``.jsonl``), or a folder of them."""
    p = Path(path)
    if p.is_dir():
        files = sorted([*p.glob("*.json"), *p.glob("*.jsonl")])
        return merge_results("openhands", str(p), [_file(f) for f in files])
    return _file(p)

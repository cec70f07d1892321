"""SWE-agent trajectories (``.traj``, function calling) -> traces.

The ``history`` holds the messages the model saw (system, user, assistant with ``tool_calls``, tool);
the ``trajectory`` holds one step per action with ``execution_time``. The n-th assistant message with
tool calls is the n-th step, checked by the ``action`` both record (a step the history lacks is
reported and skipped). A trajectory made without function calling (SWE-agent's thought_action
parser, every 0.x run) has actions parsed from the model's text, not tool calls: it is reported
and not imported. A user message after the first starts a new trace. The episode ends with
``info.exit_status`` (e.g. ``submitted``): the trace's outcome reason.

Where each number comes from:

- tool duration: the step's ``execution_time`` (``recorded``: SWE-agent's measurement of running the
  action in its environment; split evenly over a step's calls when it has several, ``estimated``);
- model latency: SWE-agent records none (only token counts and costs): ``placeholder`` (`MODEL_S`).
  A replayed trajectory (``replay_config`` set, ``model_stats`` at zero) made no model calls at all.

Results are the tool messages that follow each assistant message: the one naming a call's id in its
``tool_call_ids`` answers that call; the others are taken in order (their ids do not always repeat
the call's: demonstration trajectories reuse ids), and the notes count them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    MODEL_PLACEHOLDER,
    MODEL_S,
    ImportResult,
    Issue,
    Result,
    Segment,
    Turn,
    build_result,
    completion,
    conversation,
    slugify,
    text_of,
)
from toolcall_lab.importers._figures import usable_figure
from toolcall_lab.importers._files import import_folder, load_json, not_empty, read_text, wrong_kind
from toolcall_lab.importers._matching import match_passes
from toolcall_lab.records import Timing


def _file(path: Path) -> ImportResult:
    issues: list[Issue] = []
    text = read_text(path, issues)
    not_empty(path, text, "SWE-agent")
    doc = load_json(path, text, "swe-agent")
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        raise wrong_kind(path, "swe-agent", "not a SWE-agent trajectory (no 'history' list)")
    history_in: list[dict[str, Any]] = [m for m in doc.get("history") or [] if isinstance(m, dict)]
    steps = [s for s in doc.get("trajectory") or [] if isinstance(s, dict)]
    info = doc.get("info") or {}
    replayed = bool(doc.get("replay_config")) and not any(
        v for k, v in (info.get("model_stats") or {}).items() if k != "api_calls"
    )
    segments: list[Segment] = []
    history: list[dict[str, Any]] = []
    current: Segment | None = None
    step = 0
    source_calls = sum(len(m.get("tool_calls") or []) for m in history_in if m.get("role") == "assistant")
    source_model_calls = sum(1 for m in history_in if m.get("role") == "assistant")
    name = slugify(path.name.removesuffix(".traj"))
    mismatched = 0
    if not source_calls and any(s.get("action") for s in steps):
        # SWE-agent without function calling (its thought_action parser, and every 0.x run): each
        # action is parsed from the model's text, not sent as a tool call
        actions = sum(1 for s in steps if s.get("action"))
        issues.append(
            Issue(
                kind="failed",
                where=path.name,
                what=f"its {actions} action(s) were parsed by SWE-agent from the model's text (no function "
                "calling: no tool_calls in the history), so they are not tool calls the loop can "
                "replay: nothing of this trajectory is imported",
                calls=actions,
                model_calls=source_model_calls,
            )
        )
        return build_result(
            "swe-agent",
            str(path),
            [],
            source_calls=actions,
            source_model_calls=source_model_calls,
            issues=issues,
        )

    def close(**outcome: Any) -> None:
        nonlocal current
        if current is not None:
            for k, v in outcome.items():
                setattr(current, k, v)
            history.extend(conversation(current.turns))
            segments.append(current)
            current = None

    i = 0
    while i < len(history_in):
        m = history_in[i]
        i += 1
        role = m.get("role")
        if role in ("system", "user"):
            if current is not None:
                close(status="incomplete", reason="recording_ends_after_tool_results")
            history.append({"role": role, "content": text_of(m.get("content"))})
            continue
        if role != "assistant":
            issues.append(
                Issue(kind="gap", where=f"history[{i - 1}]", what=f"a {role!r} message out of place")
            )
            continue
        calls = [c for c in m.get("tool_calls") or [] if isinstance(c, dict)]
        results: list[Result] = []
        tool_messages = []
        while i < len(history_in) and history_in[i].get("role") == "tool":
            tool_messages.append(history_in[i])
            i += 1
        seconds = None
        if calls:
            where = f"{path.name} history[{i - 1}] calls " + ", ".join(str(c.get("id")) for c in calls)
            found = _step_of(steps, step, m.get("action"))
            if found is None:
                issues.append(
                    Issue(
                        kind="damaged",
                        where=where,
                        what=f"no trajectory step from {step} on has this message's action "
                        f"({str(m.get('action'))[:80]!r}): its execution_time is not known, 0 s placeholder",
                    )
                )
            else:
                if found > step:
                    issues.append(
                        Issue(
                            kind="damaged",
                            where=where,
                            what=f"trajectory steps {step}-{found - 1} have no assistant message with tool "
                            f"calls in the history: this message is step {found} (same action)",
                        )
                    )
                step = found
                seconds = usable_figure(
                    steps[step].get("execution_time"),
                    name=f"trajectory[{step}].execution_time",
                    where=where,
                    issues=issues,
                    instead="0 s placeholder",
                )
                step += 1
        for call, (k, how) in zip(calls, _answers(calls, tool_messages), strict=True):
            if k is None:
                results.append(
                    Result.missing(
                        f"{path.name} history[{i - 1}] call {call.get('id')}",
                        damaged=i < len(history_in),
                        why="no tool message for this call in the history: 0 s",
                    )
                )
                continue
            t = tool_messages[k]
            if how > 0:
                mismatched += 1
            results.append(
                Result(
                    text=text_of(t.get("content")),
                    duration_s=(seconds or 0.0) / len(calls),
                    timing=Timing(
                        source="recorded",
                        note="trajectory step execution_time (SWE-agent's measurement of the action)",
                    )
                    if seconds is not None and len(calls) == 1
                    else Timing(
                        source="estimated",
                        note=f"the step's execution_time ({seconds:.3f} s, SWE-agent's measurement of all "
                        f"{len(calls)} calls) split evenly over them",
                    )
                    if seconds is not None
                    else Timing(source="placeholder", note="no execution_time for this step: 0 s"),
                )
            )
        message = {
            "role": "assistant",
            "content": text_of(m.get("content")) or None,
            **({"tool_calls": calls} if calls else {}),
        }
        if current is None:
            current = Segment(
                title=f"SWE-agent {path.name}",
                slug=name,
                source=f"{path}#history={i - 1}",
                initial=list(history),
                tools=[],
                turns=[],
                provider="swe-agent",
                model=((doc.get("replay_config") or {}).get("agent") or {}).get("model", {}).get("name")
                if isinstance(doc.get("replay_config"), dict)
                else None,
                notes="SWE-agent trajectory: tool durations from each step's execution_time; no model "
                f"latency is recorded ({MODEL_S} s placeholder)"
                + ("; a replay of earlier actions: no model was called" if replayed else ""),
            )
        current.turns.append(
            Turn(
                payloads=[completion(message, response_id=f"swe-agent-step-{step}")],
                latency_s=MODEL_S,
                timing=MODEL_PLACEHOLDER,
                results=results,
            )
        )
        if not calls:
            close()
    if current is not None:
        status = info.get("exit_status")
        close(
            status="completed" if status == "submitted" else "incomplete",
            reason=str(status or "recording_ends_after_tool_results"),
        )
    steps_of: dict[str, list[int]] = {}
    for k, m in enumerate(m for m in history_in if m.get("role") == "assistant" and m.get("tool_calls")):
        for c in m.get("tool_calls") or []:
            if isinstance(c, dict) and c.get("id"):
                steps_of.setdefault(str(c["id"]), []).append(k)
    repeated = {cid: ks for cid, ks in steps_of.items() if len(ks) > 1}
    if repeated:
        listed = "; ".join(f"{cid} in steps {', '.join(map(str, ks))}" for cid, ks in repeated.items())
        issues.append(
            Issue(
                kind="note",
                where=path.name,
                what=f"{len(repeated)} call id(s) repeat across steps (the source's own ids, kept as they "
                f"are; each call is answered from its own round): {listed}",
            )
        )
        for seg in segments:
            seg.notes += f"; call ids repeat across steps (the source's own, kept): {listed}"
    if mismatched:
        for seg in segments:
            seg.notes += (
                f"; {mismatched} tool message(s) name no call id of the response they follow (matched "
                "by position among those; a message naming a call's id answers that call)"
            )
    return build_result(
        "swe-agent",
        str(path),
        segments,
        source_calls=source_calls,
        source_model_calls=source_model_calls,
        issues=issues,
    )


def _answers(calls: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[tuple[int | None, int]]:
    """Each call's tool message: the one naming its id, then, in order, those naming no call's id,
    then any left (pass 0 is the id)."""
    asked = {c.get("id") for c in calls}
    return match_passes(
        len(calls),
        len(messages),
        [
            lambda a, b: calls[a].get("id") in _ids(messages[b]),
            lambda a, b: not set(_ids(messages[b])) & asked,
            lambda a, b: True,
        ],
    )


def _ids(message: dict[str, Any]) -> list[Any]:
    """The call ids a tool message says it answers."""
    return list(message.get("tool_call_ids") or [message.get("tool_call_id")])


def _step_of(steps: list[dict[str, Any]], start: int, action: Any) -> int | None:
    """The trajectory step of an assistant message: the next one (`start`), unless both name their
    action and differ; then the first later step with the same action (None: none has it)."""
    if start >= len(steps):
        return None
    if not action or not steps[start].get("action") or steps[start].get("action") == action:
        return start
    return next((k for k in range(start + 1, len(steps)) if steps[k].get("action") == action), None)


def import_swe_agent(path: str | Path) -> ImportResult:
    """A SWE-agent ``.traj`` file, or a folder of them (searched recursively, each file on its own)."""
    p = Path(path)
    if p.is_dir():
        return import_folder("swe-agent", p, (".traj",), _file, recursive=True)
    return _file(p)

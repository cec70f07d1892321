"""tau-bench trajectories -> one trace per user turn that led to tool calls.

A trajectory is one OpenAI message list (system, user, assistant with ``tool_calls``, tool, ...). Each
user message starts a segment: the assistant's responses until it answers in text (or the trajectory
ends). A segment that ends in tool messages (the conversation stopped after, e.g., a transfer to a
human agent) is still a trace; its outcome says so. The initial messages of a segment are the
trajectory up to and including its user message.

tau-bench records no timings, so every number is modelled and labelled so:

- model latency ``estimated``: 0.5 s + 10 ms per output token, counting 4 characters a token over the
  message text and the serialised calls (`tau_latency`);
- tool durations ``placeholder``: reads (get/search/list/calculate/think) 0.15 s, writes 0.4 s.

A tool message starting with ``Error:`` is an error: that is how tau-bench's environment reports a
tool that raised (``observation = f"Error: {e}"``); ``Unknown action ...`` likewise.
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
    completion,
    inferred_tools,
    slugify,
)
from toolcall_lab.importers._files import import_folder, load_json, not_empty, read_text, wrong_kind
from toolcall_lab.importers._matching import match_passes, shared
from toolcall_lab.records import Timing

TAU_MODEL = Timing(
    source="estimated", note="tau-bench has no timings: 0.5 s + 10 ms per output token (4 characters a token)"
)
TAU_TOOL = Timing(source="placeholder", note="tau-bench has no timings: reads 0.15 s, writes 0.4 s")


def tau_latency(text: str) -> float:
    """Estimated model latency for tau-bench: 0.5 s + 10 ms per output token (4 characters a token)."""
    return round(0.5 + 0.01 * len(text) / 4, 3)


def tau_tool_s(name: str) -> float:
    """Placeholder tool time for tau-bench: reads 0.15 s, writes (book/update/cancel/send...) 0.4 s."""
    return 0.15 if name.split("_")[0] in ("get", "search", "list", "calculate", "think") else 0.4


def _status(text: str) -> Any:
    return "error" if text.startswith(("Error:", "Unknown action")) else "ok"


def _answers(
    calls: list[dict[str, Any]], answers: list[dict[str, Any]], where: str, issues: list[Issue]
) -> list[dict[str, Any] | None]:
    """The tool message answering each call: by call id and tool name, then by call id (the first
    not yet taken, so two calls sharing an id are answered in order, and said); a tool message no
    call takes is reported."""
    ids = [str(c.get("id")) for c in calls]
    names = [(c.get("function") or {}).get("name") for c in calls]
    matched = match_passes(
        len(calls),
        len(answers),
        [
            lambda i, j: str(answers[j].get("tool_call_id")) == ids[i] and answers[j].get("name") == names[i],
            lambda i, j: str(answers[j].get("tool_call_id")) == ids[i],
        ],
    )
    for cid in shared(ids):
        issues.append(
            Issue(
                kind="note",
                where=where,
                what=f"{ids.count(str(cid))} calls of one response share the id {cid}: each takes the first "
                "tool message with that id (and its tool's name) not yet taken",
            )
        )
    taken = {j for j, _ in matched if j is not None}
    for j, t in enumerate(answers):
        if j not in taken:
            issues.append(
                Issue(
                    kind="damaged",
                    where=where,
                    what=f"a tool message for {t.get('tool_call_id')} ({t.get('name')}) answers no call of "
                    "the response that is left (a second answer, or an id no call has): not imported",
                )
            )
    return [answers[j] if j is not None else None for j, _ in matched]


def import_tau_bench(
    path: str | Path, *, limit: int | None = None, include_no_calls: bool = False
) -> ImportResult:
    """tau-bench trajectories (a JSON file, or a folder of them, each on its own) -> one trace per
    user turn that led to tool calls.

    Args:
        limit: import only the first `limit` trajectories of each file (input items, not output
            traces: one trajectory gives a trace per user turn with calls; the rest are reported as
            skipped).
        include_no_calls: also import user turns the assistant answered without tools.
    """
    p = Path(path)
    if p.is_dir():
        return import_folder(
            "tau-bench",
            p,
            (".json",),
            lambda f: import_tau_bench(f, limit=limit, include_no_calls=include_no_calls),
        )
    issues: list[Issue] = []
    text = read_text(p, issues)
    not_empty(p, text, "tau-bench")
    data = load_json(p, text, "tau-bench")
    if not isinstance(data, list):
        raise wrong_kind(
            p, "tau-bench", f"expected a JSON list of trajectories, got a JSON {type(data).__name__}"
        )
    if data and not any(isinstance(item, dict) and isinstance(item.get("traj"), list) for item in data):
        raise wrong_kind(p, "tau-bench", "no item of the list is a trajectory (an object with a 'traj' list)")
    segments: list[Segment] = []
    source_calls = source_model_calls = 0
    for n, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("traj"), list):
            issues.append(
                Issue(
                    kind="failed",
                    where=f"trajectory {n}",
                    what="not a trajectory (an object with a 'traj' list): not imported",
                )
            )
            continue
        traj = [m for m in item["traj"] if isinstance(m, dict)]
        calls_here = sum(len(m.get("tool_calls") or []) for m in traj)
        responses_here = sum(1 for m in traj if m.get("role") == "assistant")
        source_calls += calls_here
        source_model_calls += responses_here
        for j, m in enumerate(traj):
            for c in m.get("tool_calls") or []:
                given = (c.get("function") or {}).get("arguments") if isinstance(c, dict) else None
                if given is not None and not isinstance(given, str):
                    issues.append(
                        Issue(
                            kind="note",
                            where=f"trajectory {n} message {j} call {c.get('id')}",
                            what=f"arguments given as JSON ({type(given).__name__}), not as a string: kept, "
                            "serialised compactly (the trace's finding arguments_not_string says so too)",
                        )
                    )
        if limit is not None and n >= limit:
            issues.append(
                Issue(
                    kind="skipped",
                    where=f"trajectory {n}",
                    what=f"beyond limit={limit}",
                    calls=calls_here,
                    model_calls=responses_here,
                )
            )
            continue
        tools = inferred_tools(
            (
                (
                    str((c.get("function") or {}).get("name") or ""),
                    _argument_text((c.get("function") or {}).get("arguments")),
                )
                for m in traj
                for c in m.get("tool_calls") or []
            ),
            "tau-bench trajectories do not store the tool schemas",
        )
        task = item.get("task_id")
        for i, msg in enumerate(traj):
            if msg.get("role") != "user":
                continue
            turns: list[Turn] = []
            j = i + 1
            while j < len(traj) and traj[j].get("role") == "assistant":
                a = traj[j]
                calls = a.get("tool_calls") or []
                k = j + 1
                while k < len(traj) and traj[k].get("role") == "tool":
                    k += 1
                answers = traj[j + 1 : k]
                matched = _answers(calls, answers, f"trajectory {n} message {j}", issues)
                results = []
                for t in matched:
                    if t is None:
                        results.append(
                            Result.missing(
                                f"trajectory {n} message {j}",
                                damaged=k < len(traj),
                                why="no tool message answers this call: 0 s",
                            )
                        )
                        continue
                    text = str(t.get("content"))
                    results.append(
                        Result(
                            text=text,
                            duration_s=tau_tool_s(t.get("name") or ""),
                            timing=TAU_TOOL,
                            status=_status(text),
                        )
                    )
                message = {
                    "role": "assistant",
                    "content": a.get("content"),
                    **({"tool_calls": calls} if calls else {}),
                }
                turns.append(
                    Turn(
                        payloads=[completion(message, response_id=f"tau-{task}-{n}-{j}", model="gpt-4o")],
                        latency_s=tau_latency((a.get("content") or "") + json.dumps(calls)),
                        timing=TAU_MODEL,
                        results=results,
                    )
                )
                j = k
                if not calls:
                    break
            where = f"trajectory {n} (task {task}) message {i}"
            n_calls = sum(len(t.results) for t in turns)
            if not turns:
                continue
            if not n_calls and not include_no_calls:
                issues.append(
                    Issue(
                        kind="skipped",
                        where=where,
                        what=f"{len(turns)} model call(s) without tool calls (nothing to execute; "
                        "include_no_calls=True imports them)",
                        model_calls=len(turns),
                    )
                )
                continue
            segments.append(
                Segment(
                    title=f"tau-bench trajectory {n} task {task} trial {item.get('trial', 0)} turn {i}",
                    slug=f"{slugify(p.stem)}__traj{n:04d}_task{task}_msg{i:03d}",
                    source=f"{p}#trajectory={n}&message={i}",
                    initial=[dict(m) for m in traj[: i + 1]],
                    tools=tools,
                    turns=turns,
                    provider="openai",
                    model="gpt-4o",
                    notes="tau-bench has no timings: model latency estimated (0.5 s + 10 ms per output "
                    "token), tool durations placeholders (reads 0.15 s, writes 0.4 s); 'Error:' results "
                    "are errors; tool schemas inferred from the calls",
                )
            )
    return build_result(
        "tau-bench",
        str(p),
        segments,
        source_calls=source_calls,
        source_model_calls=source_model_calls,
        issues=issues,
    )


def _argument_text(given: Any) -> str:
    """A call's arguments as text (a dict given as JSON is serialised, never its Python repr)."""
    if isinstance(given, str):
        return given or "{}"
    return "{}" if given is None else json.dumps(given, separators=(",", ":"))

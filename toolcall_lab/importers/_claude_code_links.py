"""What links the parts of Claude Code transcripts: a sub-agent to the Task call it ran inside, and a
resumed session's file to the file whose lines it repeats (see `toolcall_lab.importers.claude_code`).

A sub-agent (an ``isSidechain`` thread) names no Task call. What the log does hold: its root line's
text is the Task's ``prompt``, its lines lie between the Task's ``tool_use`` line and its result
line, and its final answer is the Task's result. Prompts repeat (two Tasks with the same prompt, a
retried Task), so the prompt only narrows the candidates; the time window and the final answer
decide, and a sub-agent the log does not tie to one Task says so instead of guessing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import TOLERANCE_S, Issue, text_of
from toolcall_lab.importers._claude_code_lines import Line
from toolcall_lab.importers._files import decoded

TASK_TOOLS = frozenset({"Task", "Agent"})
"""The tool that runs a sub-agent (``Task``; ``Agent`` in later Claude Code versions)."""


@dataclass(frozen=True, slots=True)
class Task:
    """A Task call (a sub-agent's run) as the log holds it."""

    call_id: str
    description: str
    prompt: str | None
    thread: int
    at: float | None
    """When its tool_use line was written."""
    result_at: float | None
    result_text: str | None
    agent_id: str | None = None
    """The sub-agent's id its result names (``toolUseResult.agentId``, later versions)."""
    tool_uses: int | None = None
    """How many tool calls its result says the sub-agent made (``toolUseResult.totalToolUseCount``)."""
    ran: bool = False
    """Its result is a sub-agent's (it names one, or its calls, tokens or run time)."""
    result_where: str = ""


@dataclass(frozen=True, slots=True)
class Link:
    """Which Task call a sub-agent thread ran inside: one, several it could be (ambiguous), or none."""

    tasks: tuple[Task, ...]

    @property
    def task(self) -> Task | None:
        return self.tasks[0] if len(self.tasks) == 1 else None


def _norm(text: str | None) -> str:
    return " ".join((text or "").split())


def tasks_of(
    threads: Sequence[Sequence[Line]], results: dict[int, tuple[Line, dict[str, Any]]]
) -> list[Task]:
    """Every Task call of every thread, with its result when the log holds one."""
    out = []
    for k, thread in enumerate(threads):
        for ln in thread:
            if ln.doc.get("type") != "assistant":
                continue
            for b in ln.blocks:
                if b.get("type") != "tool_use" or b.get("name") not in TASK_TOOLS:
                    continue
                given = b.get("input")
                args: dict[str, Any] = given if isinstance(given, dict) else {}
                found = results.get(id(b))  # (`_claude_code_calls.key`: ids may be shared)
                prompt = args.get("prompt")
                out.append(
                    Task(
                        call_id=str(b.get("id")),
                        description=str(args.get("description") or ""),
                        prompt=prompt if isinstance(prompt, str) else None,
                        thread=k,
                        at=ln.at,
                        result_at=found[0].at if found else None,
                        result_text=text_of(found[1].get("content")) if found else None,
                        agent_id=_agent_id(found[0].doc) if found else None,
                        tool_uses=_tool_uses(found[0].doc) if found else None,
                        ran=_ran(found[0].doc) if found else False,
                        result_where=found[0].where() if found else "",
                    )
                )
    return out


def _agent_id(doc: dict[str, Any]) -> str | None:
    extra = doc.get("toolUseResult")
    value = extra.get("agentId") if isinstance(extra, dict) else None
    return str(value) if value else None


def _tool_uses(doc: dict[str, Any]) -> int | None:
    extra = doc.get("toolUseResult")
    value = extra.get("totalToolUseCount") if isinstance(extra, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


_SUB_AGENT_FIGURES = ("agentId", "totalToolUseCount", "totalDurationMs", "totalTokens")


def _ran(doc: dict[str, Any]) -> bool:
    extra = doc.get("toolUseResult")
    return isinstance(extra, dict) and any(extra.get(k) is not None for k in _SUB_AGENT_FIGURES)


def missing_subagents(tasks: Sequence[Task], links: dict[int, Link], session: str) -> list[Issue]:
    """A gap for every Task whose result comes from a sub-agent (it names one, or counts its calls)
    whose lines are in no transcript read (the session file alone, a sub-agent file deleted): its
    calls are counted from the result's ``totalToolUseCount`` where it has one, never silent."""
    linked = {t.call_id for link in links.values() for t in link.tasks}
    out = []
    for task in tasks:
        if not task.ran or task.call_id in linked:
            continue
        who = f"sub-agent {task.agent_id}" if task.agent_id else "a sub-agent"
        calls = (
            f"{task.tool_uses} tool call(s) by its totalToolUseCount"
            if task.tool_uses is not None
            else "how many tool calls it made is not said"
        )
        where = (
            f"{session}/subagents/agent-{task.agent_id}.jsonl (or agent-{task.agent_id}.jsonl beside the "
            "session)"
            if task.agent_id
            else "this file (its isSidechain lines) or a sub-agent file beside it"
        )
        out.append(
            Issue(
                kind="gap",
                where=task.result_where,
                what=f"the result of Task {task.call_id} ({task.description}) comes from {who} ({calls}) "
                f"whose transcript is not found: looked for {where}; its calls are counted in the "
                "source and not imported (import the session with its folder to read them)",
                calls=task.tool_uses or 0,
                unreadable=task.tool_uses is None,  # (how many calls it held is not known)
            )
        )
    return out


def _final_text(thread: Sequence[Line]) -> str | None:
    """The text of the thread's last response (a sub-agent's answer, which its Task returns)."""
    last = [ln for ln in thread if ln.doc.get("type") == "assistant"]
    if not last:
        return None
    mid = (last[-1].doc.get("message") or {}).get("id")
    lines = [ln for ln in last if (ln.doc.get("message") or {}).get("id") == mid]
    if any(b.get("type") == "tool_use" for ln in lines for b in ln.blocks):
        return None
    return "".join(str(b.get("text", "")) for ln in lines for b in ln.blocks if b.get("type") == "text")


def _fits(thread: Sequence[Line], k: int, task: Task) -> bool:
    """Whether the sub-agent thread `k` can have run inside `task` (prompt and times agree)."""
    if task.thread == k or task.prompt is None:
        return False
    root = thread[0]
    if root.doc.get("type") == "user" and root.doc.get("parentUuid") is None:
        prompt = text_of((root.doc.get("message") or {}).get("content"))
        if _norm(prompt) != _norm(task.prompt):
            return False
    times = [ln.at for ln in thread if ln.at is not None]
    if times and task.at is not None and min(times) < task.at - TOLERANCE_S:
        return False
    return not (times and task.result_at is not None and max(times) > task.result_at + TOLERANCE_S)


def link_subagents(
    threads: Sequence[Sequence[Line]], tasks: Sequence[Task], declared: dict[str, str] | None = None
) -> dict[int, Link]:
    """For every sub-agent thread (index >= 1), the Task call(s) it can have run inside.

    A sub-agent kept in its own file says which Task it is: its lines' ``agentId`` is the one the
    Task's result names, or its ``.meta.json`` names the Task's ``toolUseId`` (`declared`: file ->
    call id). Otherwise candidates must fit (same prompt, inside the Task's time); among them a Task
    whose result is the sub-agent's final answer wins; each Task is taken once, so settling one
    sub-agent can settle another. What stays ambiguous keeps all its candidates."""
    links: dict[int, Link] = {}
    taken: set[str] = set()
    by_call = {t.call_id: t for t in tasks}
    for k in range(1, len(threads)):
        root = threads[k][0]
        agent = root.doc.get("agentId")
        named = (declared or {}).get(root.file)
        said = [by_call[named]] if named in by_call else [t for t in tasks if agent and t.agent_id == agent]
        if len(said) == 1 and said[0].call_id not in taken:
            links[k] = Link(tasks=(said[0],))
            taken.add(said[0].call_id)
    candidates = {
        k: [t for t in tasks if _fits(threads[k], k, t)] for k in range(1, len(threads)) if k not in links
    }
    finals = {k: _norm(_final_text(threads[k])) for k in candidates}
    changed = True
    while changed:
        changed = False
        for k, cands in candidates.items():
            if k in links:
                continue
            free = [t for t in cands if t.call_id not in taken]
            answered = [t for t in free if finals[k] and _norm(t.result_text) == finals[k]]
            pick = answered or free
            if len(pick) == 1:
                links[k] = Link(tasks=(pick[0],))
                taken.add(pick[0].call_id)
                changed = True
    for k, cands in candidates.items():
        if k not in links:
            links[k] = Link(tasks=tuple(t for t in cands if t.call_id not in taken))
    return links


COMPACTION_AGENT = "acompact"
"""How Claude Code 2.1 names its own compaction run's agent (``subagents/agent-acompact-<id>.jsonl``,
``agentId`` ``acompact-<id>``): a model call summarising the conversation, not a Task's sub-agent."""


def compaction_agent(thread: Sequence[Line]) -> str | None:
    """The agent id of a thread that is Claude Code's compaction run (by its ``agentId`` or its
    file's name), None for any other thread."""
    for ln in thread[:1]:
        agent = ln.doc.get("agentId")
        if isinstance(agent, str) and agent.startswith(COMPACTION_AGENT):
            return agent
        name = Path(ln.file).name
        if name.startswith(f"agent-{COMPACTION_AGENT}"):
            return name.removeprefix("agent-").removesuffix(".jsonl")
    return None


def session_of(path: Path) -> str | None:
    """The ``sessionId`` a transcript's first lines name (a quick read of its head)."""
    with path.open("rb") as f:
        head = f.read(256 * 1024)
    for raw in decoded(head).split("\n")[:50]:
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("sessionId"), str):
            return str(doc["sessionId"])
    return None


def sub_agent_files(path: Path) -> list[Path]:
    """The sub-agent transcripts Claude Code keeps beside a session's file ``<id>.jsonl``: in
    ``<id>/subagents/`` (2.1 and later; also under its ``workflows/``), or, as 2.0 did, as
    ``agent-<agentId>.jsonl`` next to it, whose lines name the session."""
    nested = path.parent / path.name.removesuffix(".jsonl") / "subagents"
    found = sorted(f for f in nested.rglob("agent-*.jsonl") if f.is_file()) if nested.is_dir() else []
    session = path.name.removesuffix(".jsonl")
    flat = [
        f
        for f in sorted(path.parent.glob("agent-*.jsonl"))
        if f != path and not path.name.startswith("agent-") and session_of(f) == session
    ]
    return found + flat


def declared_tasks(files: Sequence[Path], names: Sequence[str]) -> dict[str, str]:
    """For each sub-agent file (by the name its lines carry) the Task call its ``.meta.json`` names
    (``toolUseId``), where it has one."""
    out: dict[str, str] = {}
    for f, name in zip(files, names, strict=True):
        meta = f.with_name(f.name.removesuffix(".jsonl") + ".meta.json")
        try:
            doc = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("toolUseId"), str):
            out[name] = doc["toolUseId"]
    return out


def file_uuids(path: Path) -> set[str]:
    """The uuids of a transcript's lines (a quick read: unreadable lines are left out)."""
    out: set[str] = set()
    for raw in decoded(path.read_bytes()).split("\n"):
        if '"uuid"' not in raw:
            continue
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("uuid"), str):
            out.add(doc["uuid"])
    return out


Holder = Callable[[set[str]], str | None]
"""For a set of line uuids of one file: the name of another file that holds them all and is read in
its place (None: none is)."""


def holders(files: Sequence[Path]) -> dict[Path, Holder]:
    """For each file of a folder, who else holds its lines: a resumed session's file repeats the
    lines of the file it resumed (same uuids) and goes on, so a trace whose every line is also in a
    file with more lines (ties: the earlier name) is read from there, once."""
    uuids = {f: file_uuids(f) for f in files}
    rank = sorted(files, key=lambda f: (-len(uuids[f]), f.name))

    def holder_for(f: Path) -> Holder:
        preferred = rank[: rank.index(f)]

        def holder(lines: set[str]) -> str | None:
            if not lines:
                return None
            return next((g.name for g in preferred if lines <= uuids[g]), None)

        return holder

    return {f: holder_for(f) for f in files}

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

from toolcall_lab.importers._build import TOLERANCE_S, text_of
from toolcall_lab.importers._claude_code_lines import Line
from toolcall_lab.importers._files import decoded


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
    threads: Sequence[Sequence[Line]], results: dict[str, tuple[Line, dict[str, Any]]]
) -> list[Task]:
    """Every Task call of every thread, with its result when the log holds one."""
    out = []
    for k, thread in enumerate(threads):
        for ln in thread:
            if ln.doc.get("type") != "assistant":
                continue
            for b in ln.blocks:
                if b.get("type") != "tool_use" or b.get("name") != "Task":
                    continue
                given = b.get("input")
                args: dict[str, Any] = given if isinstance(given, dict) else {}
                found = results.get(str(b.get("id")))
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


def link_subagents(threads: Sequence[Sequence[Line]], tasks: Sequence[Task]) -> dict[int, Link]:
    """For every sub-agent thread (index >= 1), the Task call(s) it can have run inside.

    Candidates must fit (same prompt, inside the Task's time); among them a Task whose result is the
    sub-agent's final answer wins; each Task is taken once, so settling one sub-agent can settle
    another. What stays ambiguous keeps all its candidates."""
    candidates = {k: [t for t in tasks if _fits(threads[k], k, t)] for k in range(1, len(threads))}
    finals = {k: _norm(_final_text(threads[k])) for k in candidates}
    links: dict[int, Link] = {}
    taken: set[str] = set()
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

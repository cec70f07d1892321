"""Reading a Claude Code transcript's lines: what each holds, in the order they were written, with
every sign of damage reported by line (see `toolcall_lab.importers.claude_code`)."""

from __future__ import annotations

import heapq
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import TOLERANCE_S, Issue, stamp_or_none
from toolcall_lab.importers._files import json_error, not_empty, read_text, wrong_kind

_WINDOW = 400
"""Lines looked back when finding the timestamps that agree with the order of the lines."""


@dataclass(slots=True)
class Line:
    """One user or assistant line: its number in the file, its JSON, and its time (None: not trusted)."""

    number: int
    doc: dict[str, Any]
    at: float | None
    skip: set[int] = field(default_factory=set)
    """Indexes of content blocks read elsewhere already (a repeated call id)."""
    file: str = ""
    """The file the line is in (its name; `where` names it)."""
    not_utf8: int = 0
    """U+FFFD characters the line holds in place of bytes that are not UTF-8."""

    def where(self) -> str:
        """``<file> line <number>``: where the line is, for issues and notes."""
        return f"{self.file} line {self.number}"

    @property
    def uuid(self) -> str | None:
        return self.doc.get("uuid")

    @property
    def blocks(self) -> list[dict[str, Any]]:
        content = (self.doc.get("message") or {}).get("content")
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        return [b for i, b in enumerate(content or []) if isinstance(b, dict) and i not in self.skip]


@dataclass(slots=True)
class Transcript:
    """What `read_lines` found: the message lines, the damage, and what else the log says."""

    lines: list[Line]
    issues: list[Issue]
    boundaries: dict[str, Line] = field(default_factory=dict)
    """Compaction boundaries (``system`` lines of subtype ``compact_boundary``) by uuid."""
    not_utf8: dict[int, int] = field(default_factory=dict)
    """Line number -> U+FFFD characters put in place of bytes that are not UTF-8."""
    unreadable: list[tuple[int, str]] = field(default_factory=list)
    """(line number, raw text) of lines that are not JSON."""
    passed: dict[str, str | None] = field(default_factory=dict)
    """uuid -> parentUuid of the lines that are not messages (progress, hooks, snapshots): a message
    whose parent is one of them follows that line's parent (`threads_of`)."""


_MESSAGE_ID = re.compile(r'"message"\s*:\s*\{\s*"id"\s*:\s*"([^"]+)"')
_TOOL_USE_ID = re.compile(r'"type"\s*:\s*"tool_use"\s*,\s*"id"\s*:\s*"([^"]+)"')


def peek(raw: str) -> tuple[str | None, list[str]]:
    """What an unreadable (cut) line still shows: its message id and the ids of its tool_use blocks."""
    message = _MESSAGE_ID.search(raw)
    return (message.group(1) if message else None), _TOOL_USE_ID.findall(raw)


def read_lines(path: Path, name: str | None = None) -> Transcript:
    """The message lines in the order they were written (``parentUuid`` order when the file's order
    disagrees), each read once, and every sign of damage by line; `name` is how issues and lines
    name the file (default: its name)."""
    label = name or path.name
    issues: list[Issue] = []
    read = Transcript(lines=[], issues=issues)
    text = read_text(path, issues, read.not_utf8)
    not_empty(path, text, "Claude Code")
    lines = read.lines
    uuids: dict[str, int] = {}
    first_of: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    parents: dict[int, str] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError as exc:
            read.unreadable.append((number, raw))
            issues.append(
                Issue(
                    kind="failed",
                    where=f"{label} line {number}",
                    what=f"not valid JSON ({json_error(exc, with_line=False)}); whatever it held is not "
                    "imported",
                    unreadable=True,
                )
            )
            continue
        if not isinstance(doc, dict):
            continue
        uuid = doc.get("uuid")
        if isinstance(uuid, str):
            twin = next((n for n, d in first_of.get(uuid, []) if _same_line(d, doc)), None)
            if twin is not None:
                issues.append(
                    Issue(
                        kind="damaged",
                        where=f"{label} line {number}",
                        what=f"repeats line {twin} (same uuid {uuid}, same content): read once",
                    )
                )
                continue
            if uuid in uuids:
                issues.append(
                    Issue(
                        kind="damaged",
                        where=f"{label} line {number}",
                        what=f"has the uuid of line {uuids[uuid]} ({uuid}) but other content: both are read "
                        "(a shared uuid is no evidence that they are one line); lines naming that uuid as "
                        f"their parent follow line {uuids[uuid]}",
                    )
                )
            first_of.setdefault(uuid, []).append((number, doc))
            uuids.setdefault(uuid, number)
        message = doc.get("message")
        role = message.get("role") if isinstance(message, dict) else None
        if (
            doc.get("type") not in ("user", "assistant")
            and role in ("user", "assistant")
            and "type" not in doc
        ):
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{label} line {number}",
                    what=f"a message line without its 'type' (damaged key?): read as its message's role "
                    f"({role})",
                )
            )
            doc = {**doc, "type": role}
        if doc.get("type") == "system" and doc.get("subtype") == "compact_boundary" and isinstance(uuid, str):
            read.boundaries[uuid] = Line(
                number=number, doc=doc, at=stamp_or_none(doc.get("timestamp")), file=label
            )
            continue
        if doc.get("type") not in ("user", "assistant") or not isinstance(message, dict | str):
            if isinstance(uuid, str):
                parent = doc.get("parentUuid")
                read.passed[uuid] = parent if isinstance(parent, str) else None
            continue
        at = stamp_or_none(doc.get("timestamp"))
        if at is None:
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{label} line {number}",
                    what=f"no valid timestamp ({doc.get('timestamp')!r}): the line is imported, the "
                    "times resting on it are placeholders",
                )
            )
        lines.append(Line(number=number, doc=doc, at=at, file=label, not_utf8=read.not_utf8.get(number, 0)))
        if isinstance(doc.get("parentUuid"), str):
            parents[number] = doc["parentUuid"]
    if not lines:
        raise wrong_kind(path, "claude-code", "no line is a Claude Code user or assistant message")
    first = lines[0].number
    for ln in lines:
        parent = parents.get(ln.number)
        if parent is not None and parent not in uuids and ln.number != first:
            issues.append(
                Issue(
                    kind="damaged",
                    where=ln.where(),
                    what=f"follows a line (uuid {parent}) that is not in the file: something before it "
                    "is missing",
                )
            )
    late = [
        (ln.number, uuids[p])
        for ln in lines
        if (p := parents.get(ln.number)) in uuids and uuids[p] > ln.number
    ]
    if late:
        issues.append(
            Issue(
                kind="damaged",
                where=label,
                what=f"{len(late)} line(s) come before the line they follow (e.g. line {late[0][0]} "
                f"before line {late[0][1]}): read in parentUuid order",
            )
        )
        read.lines = _in_chain_order(lines, uuids, parents)
    return read


_BOOKKEEPING = frozenset({"sessionId", "version", "cwd", "gitBranch", "userType", "entrypoint", "slug"})
"""Keys Claude Code writes about the session, not the message: a line copied with other values of
these (a resumed session) is still the same line."""


def _same_line(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two lines with one uuid are one line logged twice only when their content is identical."""

    def content(d: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in d.items() if k not in _BOOKKEEPING}, sort_keys=True, default=str)

    return content(a) == content(b)


def _in_chain_order(lines: list[Line], uuids: dict[str, int], parents: dict[int, str]) -> list[Line]:
    """Lines ordered so every line comes after the line it follows; otherwise by time, then position."""
    by_number = {ln.number: ln for ln in lines}
    children: dict[int, list[int]] = {}
    waiting: dict[int, int] = {}
    for ln in lines:
        parent = uuids.get(parents.get(ln.number, ""))
        if parent in by_number:
            children.setdefault(parent, []).append(ln.number)
            waiting[ln.number] = 1

    def key(number: int) -> tuple[float, int]:
        at = by_number[number].at
        return (float("inf") if at is None else at, number)

    ready = [(key(ln.number), ln.number) for ln in lines if ln.number not in waiting]
    heapq.heapify(ready)
    out = []
    while ready:
        _, number = heapq.heappop(ready)
        out.append(by_number[number])
        for child in children.get(number, []):
            heapq.heappush(ready, (key(child), child))
    return out


def _batches_in_time_order(thread: list[Line]) -> list[Line]:
    """The thread with each run of consecutive result lines of one response put in time order.

    Claude Code stamps each result line of a batch when its call returned but does not write them in
    time order (nor always in the calls' order): a slow call's result line can come before its
    faster siblings' and carry a later time. Within such a run the order of the lines says nothing
    about time."""
    owner = {
        str(b.get("id")): str((ln.doc.get("message") or {}).get("id"))
        for ln in thread
        if ln.doc.get("type") == "assistant"
        for b in ln.blocks
        if b.get("type") == "tool_use"
    }
    out: list[Line] = []
    run: list[Line] = []
    run_owner: str | None = None

    def flush() -> None:
        out.extend(sorted(run, key=lambda ln: (ln.at is None, ln.at or 0.0)))
        run.clear()

    for ln in thread:
        blocks = ln.blocks
        owners = {owner.get(str(b.get("tool_use_id"))) for b in blocks}
        results_only = (
            ln.doc.get("type") == "user"
            and bool(blocks)
            and all(b.get("type") == "tool_result" for b in blocks)
            and len(owners) == 1
            and None not in owners
        )
        if results_only:
            (this,) = owners
            if run and this != run_owner:
                flush()
            run.append(ln)
            run_owner = this
            continue
        flush()
        out.append(ln)
    flush()
    return out


def distrust_times(path: Path, thread: list[Line], issues: list[Issue]) -> None:
    """Keep the longest run of timestamps that agrees with the order of the lines (within the
    tolerance; the results of one batch in any order among themselves); the others are not
    trusted (set to None) and reported."""
    known = [ln for ln in _batches_in_time_order(thread) if ln.at is not None]
    n = len(known)
    latest = float("-inf")
    for ln in known:  # the usual case, in one pass: no line earlier than the lines before it
        assert ln.at is not None
        if ln.at < latest - TOLERANCE_S:
            break
        latest = max(latest, ln.at)
    else:
        return
    best = [1] * n
    back = [-1] * n
    for i in range(n):
        ai = known[i].at
        assert ai is not None
        for j in range(max(0, i - _WINDOW), i):
            aj = known[j].at
            assert aj is not None
            if aj <= ai + TOLERANCE_S and best[j] + 1 > best[i]:
                best[i], back[i] = best[j] + 1, j
    if not n or max(best) == n:
        return
    i = max(range(n), key=lambda k: (best[k], -k))
    keep = set()
    while i >= 0:
        keep.add(i)
        i = back[i]
    previous: Line | None = None
    for k, ln in enumerate(known):
        if k in keep:
            previous = ln
            continue
        around = f"after line {previous.number} ({previous.doc.get('timestamp')})" if previous else "first"
        issues.append(
            Issue(
                kind="damaged",
                where=ln.where(),
                what=f"timestamp {ln.doc.get('timestamp')} contradicts the order of the lines (it comes "
                f"{around}): not trusted; the times resting on it are placeholders",
            )
        )
        ln.at = None


def sidechain_contradictions(
    lines: list[Line], passed: dict[str, str | None], keys: dict[int, str], issues: list[Issue]
) -> None:
    """Lines whose ``isSidechain`` contradicts the log, read as the log shows (each DAMAGED): a root
    user line (no parent) whose text is the prompt of a Task call still waiting for its result is
    that sub-agent's prompt; a line that follows a sub-agent line belongs to that sub-agent (the main
    thread never follows one), and one that follows a main-thread line to the main thread (a
    sub-agent's first line follows none); the lines of one response are one piece. Without this, one flipped
    flag splits a thread and gives a response a 0 s latency from its own line."""
    prompts: dict[str, tuple[Line, int | None]] = {}
    answered: dict[str, int] = {}
    for ln in lines:
        for b in ln.blocks:
            if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str):
                answered.setdefault(b["tool_use_id"], ln.number)
    for ln in lines:
        if ln.doc.get("type") == "assistant" and not ln.doc.get("isSidechain"):
            for b in ln.blocks:
                given = b.get("input") if b.get("type") == "tool_use" else None
                prompt = given.get("prompt") if isinstance(given, dict) else None
                if isinstance(prompt, str) and prompt.strip():
                    prompts[prompt.strip()] = (ln, answered.get(str(b.get("id"))))
    side: dict[tuple[str, str], bool] = {}
    """Each line's side by (file, uuid): a parent is looked for in the line's own file."""

    def flip(ln: Line, why: str) -> None:
        ln.doc = {**ln.doc, "isSidechain": True}
        issues.append(
            Issue(
                kind="damaged",
                where=ln.where(),
                what=f"isSidechain is false, but {why}: read as a sub-agent line",
            )
        )

    def parent_side(ln: Line) -> bool | None:
        parent = ln.doc.get("parentUuid")
        seen: set[str] = set()
        while (
            isinstance(parent, str)
            and (ln.file, parent) not in side
            and parent in passed
            and parent not in seen
        ):
            seen.add(parent)
            parent = passed[parent]
        return side.get((ln.file, parent)) if isinstance(parent, str) else None

    by_response: dict[str, list[Line]] = {}
    for ln in lines:
        if ln.doc.get("type") == "assistant" and id(ln) in keys:
            by_response.setdefault(keys[id(ln)], []).append(ln)
    for ln in lines:
        if not ln.doc.get("isSidechain"):
            text = "".join(str(b.get("text") or "") for b in ln.blocks if b.get("type") == "text").strip()
            task = (
                prompts.get(text)
                if ln.doc.get("parentUuid") is None and ln.doc.get("type") == "user"
                else None
            )
            if task is not None and task[0].number < ln.number and (task[1] is None or task[1] > ln.number):
                flip(
                    ln,
                    f"it is the prompt of the Task call on line {task[0].number}, still waiting for its "
                    "result",
                )
            elif parent_side(ln):
                flip(ln, "it follows a sub-agent line (parentUuid), which the main thread never does")
        elif parent_side(ln) is False:
            ln.doc = {**ln.doc, "isSidechain": False}
            issues.append(
                Issue(
                    kind="damaged",
                    where=ln.where(),
                    what="isSidechain is true, but it follows a main-thread line (parentUuid; a sub-agent's "
                    "first line follows none): read as a main-thread line",
                )
            )
        if ln.uuid:
            side.setdefault((ln.file, ln.uuid), bool(ln.doc.get("isSidechain")))
    for rid, group in by_response.items():
        flags = [bool(o.doc.get("isSidechain")) for o in group]
        if len(set(flags)) > 1:
            major = flags.count(True) > len(flags) / 2
            for o in group:
                if bool(o.doc.get("isSidechain")) != major:
                    o.doc = {**o.doc, "isSidechain": major}
                    issues.append(
                        Issue(
                            kind="damaged",
                            where=o.where(),
                            what=f"isSidechain is {not major}, but most lines of its response ({rid}) say "
                            f"{major}: read as {'a sub-agent' if major else 'a main-thread'} line (one "
                            "response is one piece)",
                        )
                    )


def threads_of(lines: list[Line], passed: dict[str, str | None] | None = None) -> list[list[Line]]:
    """The main thread first, then one list per sub-agent (chained through parentUuid; a parent
    that is not a message, such as a progress line, is followed to its own parent)."""
    thread_of: dict[str, int] = {}
    threads: list[list[Line]] = [[]]
    for ln in lines:
        if not ln.doc.get("isSidechain"):
            threads[0].append(ln)
            continue
        parent = ln.doc.get("parentUuid")
        seen: set[str] = set()
        while isinstance(parent, str) and passed and parent in passed and parent not in seen:
            seen.add(parent)
            parent = passed[parent]
        k = thread_of.get(parent) if parent else None
        if k is None:
            threads.append([])
            k = len(threads) - 1
        threads[k].append(ln)
        if ln.uuid:
            thread_of[ln.uuid] = k
    return threads


def response_keys(lines: list[Line], issues: list[Issue]) -> dict[int, str]:
    """Which response each assistant line belongs to (by `id` of the line), by the strongest key the
    line holds: its ``message.id``; else its ``requestId``, which every line of one response shares;
    else the line it follows (``parentUuid``), when that is a line of a response (the blocks of one
    response chain one after another). A line tied by a weaker key is DAMAGED (the line says which
    key joined it), never a model call of its own; one no key ties is read as a response of its own,
    said so."""
    out: dict[int, str] = {}
    by_request: dict[str, str] = {}
    requests_of: dict[str, list[str]] = {}
    for ln in lines:
        message = ln.doc.get("message") or {}
        rid = ln.doc.get("requestId")
        if ln.doc.get("type") == "assistant" and message.get("id") and isinstance(rid, str):
            seen = requests_of.setdefault(str(message["id"]), [])
            if rid not in seen:
                seen.append(rid)
    for mid, rids in requests_of.items():  # one message id, several requests: several responses
        for n, rid in enumerate(rids, start=1):
            by_request.setdefault(rid, mid if n == 1 else f"{mid}_{n}")
        if len(rids) > 1:
            issues.append(
                Issue(
                    kind="damaged",
                    where=next(
                        ln.where()
                        for ln in lines
                        if isinstance(ln.doc.get("message"), dict) and ln.doc["message"].get("id") == mid
                    ),
                    what=f"the message id {mid} is held by lines of {len(rids)} requests "
                    f"({', '.join(rids)}): an id alone does not make them one response; read as "
                    f"{len(rids)} responses ({mid}, {mid}_2, ...)",
                )
            )
    by_uuid: dict[str, Line] = {}
    for ln in lines:  # (lines sharing a uuid: the first holds it, as parentUuid links read it)
        if ln.uuid:
            by_uuid.setdefault(ln.uuid, ln)
    for ln in lines:
        if ln.doc.get("type") != "assistant":
            continue
        message = ln.doc.get("message") or {}
        if message.get("id"):
            rid = ln.doc.get("requestId")
            shared = len(requests_of.get(str(message["id"]), [])) > 1
            out[id(ln)] = by_request[rid] if shared and isinstance(rid, str) else str(message["id"])
            continue
        rid = ln.doc.get("requestId")
        above = by_uuid.get(str(ln.doc.get("parentUuid")))
        if isinstance(rid, str) and rid in by_request:
            out[id(ln)] = key = by_request[rid]
            how = f"joined to response {key} by its requestId {rid}"
        elif above is not None and id(above) in out:
            out[id(ln)] = key = out[id(above)]
            how = f"joined to response {key} by the line it follows (line {above.number}, parentUuid)"
        else:
            out[id(ln)] = f"line{ln.number}"
            how = "no requestId or parent line ties it to a response either: read as a response of its own"
        what = f"an assistant line without message.id: {how}"
        issues.append(Issue(kind="damaged", where=ln.where(), what=what))
    return out

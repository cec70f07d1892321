"""Which call a Claude Code ``tool_result`` answers (see `toolcall_lab.importers.claude_code`).

A call id names one call, except where the log repeats it. A line copied (the same block of the same
response, on another line) is one call read once: damage. A provider that reuses ids (models served
through claude-code-router repeat them from round to round) gives calls of their own that share an
id: each is imported, with a note, and each result is matched to its call by the strongest evidence
the log holds: the line the result names (``sourceToolAssistantUUID``, later versions), else the line
it follows (its ``parentUuid`` chain reaches that call's line before any other's), else the order (the
latest call with that id before it that has no result yet). The note says which decided.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolcall_lab.importers._build import Issue, text_of
from toolcall_lab.importers._claude_code_lines import Line

Use = tuple[Line, dict[str, Any]]
"""A tool_use block and the line holding it."""


def key(block: dict[str, Any]) -> int:
    """What tells one tool_use block from another: the block itself (its id may be shared)."""
    return id(block)


@dataclass(slots=True)
class Calls:
    """The tool_use blocks of a transcript, by id (several when a provider reused the id)."""

    by_id: dict[str, list[Use]] = field(default_factory=dict)
    count: int = 0

    @property
    def first(self) -> dict[str, Line]:
        """The first line holding each id."""
        return {tid: uses[0][0] for tid, uses in self.by_id.items()}


def _message_id(ln: Line) -> Any:
    return (ln.doc.get("message") or {}).get("id")


def _same(a: Use, b: Use) -> bool:
    """The same block of the same response (a copied line), not another call reusing its id."""
    return (
        _message_id(a[0]) == _message_id(b[0])
        and a[1].get("name") == b[1].get("name")
        and a[1].get("input") == b[1].get("input")
    )


def _object_text(text: str) -> bool:
    """Whether `text` is the JSON text of an object (an input logged as a string)."""
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


def read_uses(lines: list[Line], issues: list[Issue]) -> Calls:
    """Every tool_use block, a copied one read once (its line skips it), a reused id kept."""
    calls = Calls()
    for ln in lines:
        if ln.doc.get("type") != "assistant":
            continue
        content = (ln.doc.get("message") or {}).get("content")
        for i, b in enumerate(content if isinstance(content, list) else []):
            if not (isinstance(b, dict) and b.get("type") == "tool_use"):
                continue
            tid = str(b.get("id"))
            if not isinstance(b.get("input"), dict) and b.get("input") is not None:
                given = b["input"]
                spelled = isinstance(given, str) and _object_text(given)
                issues.append(
                    Issue(
                        kind="damaged",
                        where=ln.where(),
                        what=f"tool_use {tid} ({b.get('name')}): its input is a {type(given).__name__}, not "
                        "an object"
                        + (
                            ": read as the argument string it spells"
                            if spelled
                            else ": kept as its JSON text (the call's arguments are not an object: the "
                            "trace's parser finding says so)"
                        ),
                    )
                )
            earlier = calls.by_id.setdefault(tid, [])
            copy = next((u for u in earlier if _same(u, (ln, b))), None)
            if copy is not None:
                issues.append(
                    Issue(
                        kind="damaged",
                        where=ln.where(),
                        what=f"tool_use {tid} ({b.get('name')}) was already on line {copy[0].number} (the "
                        "same call of the same response): read once",
                    )
                )
                ln.skip.add(i)
                continue
            if earlier:
                first = earlier[0]
                issues.append(
                    Issue(
                        kind="note",
                        where=ln.where(),
                        what=f"tool_use {tid} ({b.get('name')}) has the id of the call on line "
                        f"{first[0].number} ({first[1].get('name')}, "
                        + (
                            "another response"
                            if _message_id(first[0]) != _message_id(ln)
                            else "the same response, other arguments"
                        )
                        + "): a call of its own, its id kept as the source wrote it; each result is "
                        "matched to its call by the line it names or follows",
                    )
                )
            earlier.append((ln, b))
            calls.count += 1
    return calls


def match_results(
    lines: list[Line], calls: Calls, passed: dict[str, str | None], issues: list[Issue]
) -> tuple[dict[int, tuple[Line, dict[str, Any]]], list[Line]]:
    """Each call's result line and block (by `key` of its tool_use block), and the results that
    answer no call in the log, by line (each a failed issue: that call is lost)."""
    results: dict[int, tuple[Line, dict[str, Any]]] = {}
    orphans: list[Line] = []
    by_uuid: dict[str, Line] = {}
    for ln in lines:  # (lines sharing a uuid: the first holds it, as parentUuid links read it)
        if ln.uuid:
            by_uuid.setdefault(ln.uuid, ln)
    position = {id(ln): n for n, ln in enumerate(lines)}
    unnamed: list[tuple[Line, dict[str, Any]]] = []
    for ln in lines:
        if ln.doc.get("type") != "user":
            continue
        for b in ln.blocks:
            if b.get("type") != "tool_result":
                continue
            if not isinstance(b.get("tool_use_id"), str) or not b["tool_use_id"]:
                unnamed.append((ln, b))  # (matched once every named result has its call)
                continue
            tid = str(b.get("tool_use_id"))
            uses = calls.by_id.get(tid)
            if not uses:
                orphans.append(ln)
                issues.append(
                    Issue(
                        kind="failed",
                        where=ln.where(),
                        what=f"a tool_result for {tid}, whose tool_use is missing or unreadable: that "
                        "call is lost (the response that held it is not counted as a model call: the log "
                        "does not say whether it was one of the responses it holds)",
                        calls=1,
                    )
                )
                continue
            use, how = (
                (uses[0], "") if len(uses) == 1 else _answered(ln, uses, results, by_uuid, passed, position)
            )
            if how:
                issues.append(
                    Issue(
                        kind="note",
                        where=ln.where(),
                        what=f"the result for {tid} (an id {len(uses)} calls share, lines "
                        f"{', '.join(str(u[0].number) for u in uses)}) is matched to the call on line "
                        f"{use[0].number} {how}",
                    )
                )
            k = key(use[1])
            if k in results:
                first_line, first_block = results[k]
                same = text_of(first_block.get("content")) == text_of(b.get("content"))
                issues.append(
                    Issue(
                        kind="damaged",
                        where=ln.where(),
                        what=f"a second tool_result for {tid} (the first is on line {first_line.number}, "
                        f"{'the same text' if same else 'another text'}): the first is used",
                    )
                )
                continue
            results[k] = (ln, b)
    for ln, b in unnamed:
        _by_elimination(ln, b, calls, results, position, issues)
    return results, orphans


def _by_elimination(
    ln: Line,
    b: dict[str, Any],
    calls: Calls,
    results: dict[int, tuple[Line, dict[str, Any]]],
    position: dict[int, int],
    issues: list[Issue],
) -> None:
    """A tool_result without its ``tool_use_id``: the call it answers by the next-strongest key, the
    line it names (``sourceToolAssistantUUID``), else the response before it: the one call there
    still without a result. DAMAGED either way; when several calls are left, none is guessed."""
    every = [u for uses in calls.by_id.values() for u in uses]
    named = ln.doc.get("sourceToolAssistantUUID")
    here = position.get(id(ln), len(position))
    if isinstance(named, str) and any(u[0].uuid == named for u in every):
        pool, how = [u for u in every if u[0].uuid == named], "the line its sourceToolAssistantUUID names"
    else:
        before = [u for u in every if position.get(id(u[0]), 0) < here]
        last = _message_id(max(before, key=lambda u: position.get(id(u[0]), 0))[0]) if before else None
        pool = [u for u in before if _message_id(u[0]) == last]
        how = "the response before it"
    left = [u for u in pool if key(u[1]) not in results]
    if len(left) == 1:
        (use,) = left
        results[key(use[1])] = (ln, b)
        issues.append(
            Issue(
                kind="damaged",
                where=ln.where(),
                what=f"a tool_result without its tool_use_id: matched to call {use[1].get('id')} "
                f"({use[1].get('name')}, line {use[0].number}), the only call of {how} still without a "
                "result",
            )
        )
        return
    ids = ", ".join(str(u[1].get("id")) for u in left) or "none"
    issues.append(
        Issue(
            kind="damaged",
            where=ln.where(),
            what=f"a tool_result without its tool_use_id, and {len(left)} calls of {how} it could answer "
            f"({ids}): not matched (its text is not imported); those calls stay without a result",
        )
    )


def _answered(
    ln: Line,
    uses: list[Use],
    results: dict[int, tuple[Line, dict[str, Any]]],
    by_uuid: dict[str, Line],
    passed: dict[str, str | None],
    position: dict[int, int],
) -> tuple[Use, str]:
    """The call a result answers among calls sharing its id, and what decided (see the module notes)."""
    named = ln.doc.get("sourceToolAssistantUUID")
    for use in uses:
        if isinstance(named, str) and use[0].uuid == named:
            return use, "(the line its sourceToolAssistantUUID names)"
    holders = {id(u[0]): u for u in uses}
    parent = ln.doc.get("parentUuid")
    seen: set[str] = set()
    while isinstance(parent, str) and parent not in seen:
        seen.add(parent)
        above = by_uuid.get(parent)
        if above is None:
            parent = passed.get(parent)
            continue
        if id(above) in holders:
            return holders[id(above)], "(the nearest of them on the chain of lines it follows, parentUuid)"
        parent = above.doc.get("parentUuid")
    here = position.get(id(ln), len(position))
    before = [u for u in uses if position.get(id(u[0]), 0) < here]
    open_ = [u for u in before if key(u[1]) not in results]
    pick = (open_ or before or uses)[-1]
    return pick, "(by order: the latest of them before it still without a result; the log ties it to none)"

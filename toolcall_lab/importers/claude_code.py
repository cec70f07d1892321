"""Claude Code session transcripts (``~/.claude/projects/*/*.jsonl``) -> traces.

The log has one JSON line per content block: a response with text and three ``tool_use`` blocks is
four ``assistant`` lines with the same ``message.id``, each stamped when that block finished
streaming; each result is a ``user`` line with a ``tool_result`` block, stamped when the result was
written, sometimes with ``toolUseResult.durationMs`` (Glob, Grep, Read...) or ``totalDurationMs``
(Task sub-agents). Every line names the line it follows (``parentUuid``).

Traces: the main thread gives one trace per user message (the conversation before it becomes the
initial messages; Claude Code's system prompt is not in the log). A sub-agent's trace links to the
trace holding its Task call (``metadata.parent``): that call's duration is the sub-agent's whole run,
so corpus totals count it once. Claude Code 2.1's own compaction run
(``subagents/agent-acompact-*.jsonl``) is read as what it is, a model call summarising the
conversation, not a sub-agent whose Task is missing. Sub-agents (``isSidechain`` lines,
chained through ``parentUuid``) give one trace each, titled with the Task call they ran inside, which
the log ties to them by structure, not by prompt text alone (`_claude_code_links`: the Task's prompt,
its time window and its result, which is the sub-agent's final answer); a sub-agent the log does not
tie to one Task says so. In the main trace that Task call is one tool call whose duration is the
sub-agent's whole run. Each trace is placed on the log's timeline, so calls that overlapped overlap
and calls that waited wait. A file holding several sessions numbers each session's turns on its own.

Compaction (a ``system`` line of subtype ``compact_boundary``, then a user line with
``isCompactSummary``): the model's later calls saw the summary in place of the messages before, so
the next trace starts from the summary (its initial messages), never from the full conversation.
When it cut a turn, the part before ends ``incomplete/context_compacted`` (its closing round says so)
and the turn goes on in a trace titled "(after compaction)". The report notes each compaction.

In a folder, a resumed session's file repeats the lines of the file it resumed (same uuids) and goes
on: a turn whose every line is in a file with more lines is read once, from there, and noted.

Where each number comes from (the notes give the raw figures):

- model latency (``recorded``): from the line that completed the request (the user line, or the last
  result of the previous batch) to the last line of the response. It includes Claude Code's own work
  to build the request. When a line that completed the request has a timestamp that is not trusted,
  the start is not in the log: the latency is a placeholder; so is a response whose last line is
  dated before the line that completed its request (never a clamped 0 labelled recorded). Chunk
  offsets: when each content block's line was written (a block arrives whole, so the first chunk's
  time is when the first block was complete, not the first token).
- tool duration: ``toolUseResult.durationMs`` / ``totalDurationMs`` where present (``recorded``:
  Claude Code's own measurement of the run), unless it is longer than the time between the call's
  ``tool_use`` line and its result line (then the log contradicts itself: reported, not used).
  Otherwise from the end of the response to the result line (``recorded``, ``covers`` an upper
  bound: scheduling and any wait at the permission prompt are in it; a call the user declined or
  Claude Code refused, where no tool ran, ``covers`` a ``wait``): a ``tool_use`` line is written
  when its block streamed, not when the tool started; in these logs tools start when the whole
  response is in (the Task sub-agents' ``totalDurationMs`` match result − end of response within 40
  ms). When an earlier call of the same response had already returned, the call may have waited for
  it (Claude Code runs tools that are not concurrency-safe one after another) or run alongside it:
  its start is not in the log. Its duration is then ``estimated`` from that earlier result to its
  own (the note gives the figure from the end of the response too).

Damage is reported per line and never repaired silently: a line missing a field is joined by the
next-strongest key the log holds, and said (an assistant line without ``message.id`` by its
``requestId``, else by the line it follows, never a model call of its own; a ``tool_result`` without
its ``tool_use_id`` by the line it names, else as the one call of the response before it still
without a result; a result line without its ``parentUuid`` stays in its turn, tied to its call by
``tool_use_id``, never a new turn); a ``tool_use`` input logged as the JSON text of an object is
read as the argument string it spells; lines out of ``parentUuid`` order are read in that order; a
repeated line (same ``uuid``, or the same call of the same response on another line) is read once; a
call id another response reuses (some providers repeat ids) is a call of its own, its result matched
by the line it names or follows (`_claude_code_calls`), with a note; a timestamp that contradicts
the order of the lines around it is not trusted (numbers resting on it become placeholders). Each
result line of a batch is stamped when its call returned, but the lines are not written in time
order, nor always in the order of the calls (a real 1.0.98 log has Glob, Glob, Bash, Glob, Glob
after calls Bash, Glob x4, the Bash line dated 17 ms after the two Globs that follow it), so among
the result lines of one batch the order says nothing about time. A Task whose result comes from a
sub-agent (it names one, ``agentId``, or counts its calls) that no transcript read holds (the
session file imported without its ``subagents/`` folder) is a gap, its ``totalToolUseCount`` counted
in the source (calls in no trace: the command exits 1). Bytes that are not UTF-8 are read as
U+FFFD, counted exactly, and the response or
result holding them says so in its timing note (and the trace's notes); a call whose result line is
missing while the session goes on is imported with status ``not_recorded`` (a user interrupt,
``[Request interrupted by user]``, before a call's result is the run's outcome,
``interrupted_by_user``, not damage); a line cut short is reported with what is left of it (a
message id or tool_use ids no other line holds are counted in the source).

Arguments are the ``tool_use`` input object serialised compactly (the log stores an object, not the
streamed string); text blocks of one response are joined with a blank line; ``is_error: true``
results are errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    ImportResult,
    Issue,
    NotThisKind,
    Result,
    Segment,
    SourceError,
    Turn,
    build_result,
    conversation,
    slugify,
    text_of,
    zone_less_note,
)
from toolcall_lab.importers._claude_code_calls import key, match_results, read_uses
from toolcall_lab.importers._claude_code_lines import Line as _Line
from toolcall_lab.importers._claude_code_lines import (
    Transcript,
    distrust_times,
    peek,
    read_lines,
    response_keys,
    sidechain_contradictions,
    threads_of,
)
from toolcall_lab.importers._claude_code_links import (
    Holder,
    compaction_agent,
    declared_tasks,
    holders,
    link_subagents,
    missing_subagents,
    session_of,
    sub_agent_files,
    tasks_of,
)
from toolcall_lab.importers._claude_code_numbers import (
    INTERRUPTED,
    SYNTHETIC_MODEL,
    Response,
    chunks_of,
    latency_of,
    tool_result,
)
from toolcall_lab.importers._files import READ_ERRORS, import_folder


@dataclass(slots=True)
class _Thread:
    """How one thread of the log is imported: its label and file name, and what the notes add."""

    label: str
    slug: str
    notes: str
    sessions: tuple[str, ...] = ()
    """Session ids of the thread's roots, when the file holds more than one session."""
    parent_call: str | None = None
    """A sub-agent's: the Task call it ran inside (its traces link to the trace holding it)."""


@dataclass(slots=True)
class _Open:
    """The segment being read and the uuids of the lines it rests on (for resumed sessions)."""

    segment: Segment
    uuids: set[str] = field(default_factory=set)
    not_utf8: list[str] = field(default_factory=list)


def _group(
    path: Path, thread: list[_Line], keys: dict[int, str], issues: list[Issue]
) -> list[tuple[str, Any]]:
    """The thread as events: ("response", the lines of one response, `keys` saying which) or
    ("user", a user line)."""
    responses: list[Response] = []
    events: list[tuple[str, Any]] = []
    for ln in thread:  # group the assistant lines of one response; keep user lines as they come
        if ln.doc.get("type") == "assistant":
            mid = keys.get(id(ln), f"line{ln.number}")
            if responses and responses[-1].message_id == mid:  # (results may come between its lines)
                responses[-1].lines.append(ln)
            else:
                seen = next((r for r in responses if r.message_id == mid), None)
                if seen is not None:
                    issues.append(
                        Issue(
                            kind="damaged",
                            where=ln.where(),
                            what=f"continues response {mid} of line {seen.lines[0].number} after other "
                            "lines: read as a model call of its own",
                        )
                    )
                responses.append(Response(message_id=mid, lines=[ln]))
                events.append(("response", responses[-1]))
        else:
            events.append(("user", ln))
    return events


def _interrupted(events: list[tuple[str, Any]]) -> dict[int, str]:
    """The responses (by `id`) the user interrupted before their calls' results: the next user text
    after them is Claude Code's ``[Request interrupted by user...]`` line (its place, for the notes).
    A call without a result there is the run's outcome, not damage."""
    out: dict[int, str] = {}
    pending: Response | None = None
    for kind, item in events:
        if kind == "response":
            pending = item
            continue
        texts = [b for b in item.blocks if b.get("type") != "tool_result"]
        if pending is not None and texts and text_of(texts).strip().startswith(INTERRUPTED):
            out[id(pending)] = item.where()
        if texts:
            pending = None
    return out


def _compaction(path: Path, summary: _Line, read: Transcript) -> tuple[str, str]:
    """Where and how Claude Code compacted the conversation: (line words, what happened)."""
    boundary = read.boundaries.get(str(summary.doc.get("parentUuid")))
    meta = (boundary.doc.get("compactMetadata") or {}) if boundary is not None else {}
    how = ", ".join(
        x
        for x in (
            f"trigger {meta['trigger']}" if meta.get("trigger") else "",
            f"{meta['preTokens']} tokens before" if meta.get("preTokens") else "",
        )
        if x
    )
    if boundary is None:
        return f"line {summary.number}", (
            f"Claude Code compacted the conversation here: the model's later calls saw its summary (line "
            f"{summary.number}) in place of the messages before"
        )
    where = f"line {boundary.number}"
    return where, (
        f"Claude Code compacted the conversation here ({where}{', ' + how if how else ''}): the model's "
        f"later calls saw its summary (line {summary.number}) in place of the messages before"
    )


def _thread_segments(
    path: Path,
    thread: list[_Line],
    spec: _Thread,
    *,
    results: dict[int, tuple[_Line, dict[str, Any]]],
    orphans: list[_Line],
    read: Transcript,
    keys: dict[int, str],
    issues: list[Issue],
) -> list[_Open]:
    out: list[_Open] = []
    history: list[dict[str, Any]] = []
    current: _Open | None = None
    request: list[_Line] = []
    """The lines that completed the request of the next response (its user message, or the results
    of the previous batch)."""
    ready_at: float | None = None
    pending_user: list[_Line] = []
    used = {id(ln) for ln, _ in results.values()}
    unanswered: list[str] = []
    """Calls of the last response without a result line: the next request's start is not evidenced."""
    unused: list[_Line] = []
    """Result lines since the last response whose results are not used (a second result for a call):
    they contradict the used ones, so the next request's start is not evidenced by them."""
    events = _group(path, thread, keys, issues)
    last_response = next((item for kind, item in reversed(events) if kind == "response"), None)
    interrupted = _interrupted(events)
    turn_no = session_no = 0
    session: str | None = None
    compacted: str | None = None
    """Set after a compaction: the next segment starts from its summary (the words say where)."""
    continues = False
    """The compaction cut a turn: the next segment goes on with that turn."""

    def close() -> None:
        nonlocal current
        if current is not None:
            seg = current.segment
            history.extend(conversation(seg.turns))
            if current.not_utf8:
                seg.notes += "; bytes that are not UTF-8, read as U+FFFD: " + "; ".join(current.not_utf8)
            out.append(current)
            current = None

    def marked(ln: _Line, what: str) -> str | None:
        n = ln.not_utf8
        if not n:
            return None
        at = f"line {ln.number}" if ln.file == path.name else ln.where()
        return f"{at} ({what}: {n} U+FFFD character(s) in place of bytes that are not UTF-8)"

    for kind, item in events:
        if kind == "user":
            ln = item
            if current is not None and ln.uuid:
                current.uuids.add(ln.uuid)
            if ln.doc.get("isCompactSummary"):
                where, what = _compaction(path, ln, read)
                continues = current is not None
                if current is not None:
                    seg = current.segment
                    seg.status, seg.reason = "incomplete", "context_compacted"
                    seg.closing = (
                        f"{what}; the run goes on in the next trace (turn {turn_no}, after compaction)"
                    )
                    close()
                issues.append(
                    Issue(
                        kind="note",
                        where=f"{path.name} {where}",
                        what=what
                        + (
                            f"; {spec.label} turn {turn_no} is cut there and goes on in its own trace "
                            "(after compaction)"
                            if continues
                            else "; the next turn starts from the summary"
                        ),
                    )
                )
                history.clear()
                summary = text_of((ln.doc.get("message") or {}).get("content"))
                history.append({"role": "user", "content": summary})
                compacted = where
                request = [ln]
                continue
            results_only = bool(ln.blocks) and all(b.get("type") == "tool_result" for b in ln.blocks)
            if ln.doc.get("parentUuid") is None and results_only and current is not None:
                # a result answers a call of the turn: it roots no new turn (its parent was lost)
                issues.append(
                    Issue(
                        kind="damaged",
                        where=ln.where(),
                        what="a tool_result line without its parentUuid ("
                        + ("null" if "parentUuid" in ln.doc else "missing")
                        + "): a result starts no new turn; read in its turn, tied to its call by "
                        "tool_use_id",
                    )
                )
            elif ln.doc.get("parentUuid") is None and not ln.doc.get("isSidechain"):
                sid = ln.doc.get("sessionId")
                if spec.sessions and sid != session and sid in spec.sessions:
                    close()
                    history.clear()
                    session, session_no, turn_no = sid, spec.sessions.index(sid) + 1, 0
                elif history:
                    close()
                    history.clear()  # a new root: a fresh conversation (e.g. after /clear)
            texts = [b for b in ln.blocks if b.get("type") != "tool_result"]
            said = text_of(texts).strip()
            if texts and said.startswith(INTERRUPTED) and current is not None:
                seg = current.segment
                last = seg.turns[-1] if seg.turns else None
                seg.status, seg.reason = "incomplete", "interrupted_by_user"
                seg.error = f"{said} ({ln.where()})"
                if last is not None and last.results:
                    seg.closing = (
                        f"the user interrupted the run here ({said}, line {ln.number}): no model "
                        "response follows"
                    )
            if texts:
                close()
                unanswered = []  # (the request starts from what the user wrote: that is in the log)
                history.append({"role": "user", "content": text_of(texts)})
                pending_user.append(ln)
                request.append(ln)
                continues = False
            elif any(b.get("type") == "tool_result" for b in ln.blocks) and ln not in request:
                if results_only and id(ln) not in used:
                    unused.append(ln)
                    continue
                request.append(ln)
            if ln.at is not None and (ready_at is None or ln.at > ready_at):
                ready_at = ln.at
            continue
        response: Response = item
        model = (response.lines[-1].doc.get("message") or {}).get("model")
        if model == SYNTHETIC_MODEL:
            issues.append(
                Issue(
                    kind="skipped",
                    where=response.lines[0].where(),
                    what="an assistant message Claude Code wrote itself (model <synthetic>), "
                    "not a model call",
                )
            )
            continue
        untrusted = [ln for ln in request if ln.at is None]
        trusted = [ln for ln in request if ln.at is not None]
        ready_line = max(reversed(trusted), key=lambda ln: ln.at or 0.0) if trusted else None
        if untrusted:
            start = None
        elif ready_line is not None:
            start = ready_line.at
        else:
            start = ready_at if ready_at is not None else response.lines[0].at
        end = response.lines[-1].at
        payloads, offsets, model = chunks_of(response, start, issues)
        turn_results: list[Result] = []
        result_times: list[float] = []
        result_lines: list[_Line] = []
        for use_line, block in response.uses:
            found = results.get(key(block))
            if found is None:
                stop = interrupted.get(id(response))
                turn_results.append(
                    Result.missing(
                        use_line.where(),
                        damaged=response is not last_response and stop is None,
                        why="no tool_result line for this call in the log: 0 s"
                        if stop is None
                        else f"the user interrupted the run before this call's result ({stop}): 0 s",
                    )
                )
                continue
            res_line, res_block = found
            earlier = [t for t in result_times if res_line.at is not None and t < res_line.at]
            waited = max(earlier) if earlier else None
            result = tool_result(path, res_block, res_line, use_line, end, waited, issues)
            mark = marked(res_line, f"the result of {block.get('id')}")
            if mark is not None:
                result.timing = replace(result.timing, note=f"{result.timing.note}; {mark}")
            turn_results.append(result)
            result_lines.append(res_line)
            if res_line.at is not None:
                result_times.append(res_line.at)
        if current is None:
            if not continues:
                turn_no += 1
            first_user = pending_user[-1] if pending_user else response.lines[0]
            where = f" session {session_no}" if spec.sessions else ""
            after = f" (after compaction at {compacted})" if compacted else ""
            current = _Open(
                segment=Segment(
                    title=f"{path.name}{where} {spec.label} turn {turn_no}{after}",
                    slug=f"{spec.slug}{f'_s{session_no}' if spec.sessions else ''}_turn{turn_no:02d}"
                    + ("_compacted" if compacted else ""),
                    source=f"{path if first_user.file == path.name else path.parent / first_user.file}"
                    f"#line={first_user.number}",
                    initial=list(history),
                    tools=[],
                    turns=[],
                    provider="anthropic",
                    model=model,
                    created=str(first_user.doc.get("timestamp")),
                    parent_call=spec.parent_call,
                    notes=spec.notes
                    + (
                        f"; Claude Code compacted the conversation before this trace ({compacted}): its "
                        "first message is the summary the model saw in place of the earlier messages"
                        if compacted
                        else ""
                    ),
                ),
                uuids={u.uuid for u in pending_user if u.uuid},
            )
            pending_user.clear()
            compacted = None
            continues = False
        current.uuids.update(ln.uuid for ln in (*response.lines, *result_lines) if ln.uuid)
        for ln in response.lines:
            mark = marked(ln, f"the response {response.message_id}")
            if mark is not None:
                current.not_utf8.append(mark)
        current.not_utf8 += [m for ln in result_lines if (m := marked(ln, "a tool result")) is not None]
        latency, timing = latency_of(response, start, end, ready_line, untrusted)
        if unanswered and timing.measured:
            timing = replace(
                timing,
                covers="upper_bound",
                note=f"{timing.note}; an upper bound: the result of {', '.join(unanswered)} is not in the "
                "log, so the request may have been sent later (the time may hold that tool's run)",
            )
        elif unused and timing.measured:
            lost = [u for u in unused if any(u is o for o in orphans)]
            second = [u for u in unused if not any(u is o for o in orphans)]
            why = [
                *(
                    [
                        f"line(s) {', '.join(str(u.number) for u in second)} hold a second, unused result "
                        "for a call of the request, so when the request was sent is not certain (it may "
                        "have waited for them)"
                    ]
                    if second
                    else []
                ),
                *(
                    [
                        f"line(s) {', '.join(str(u.number) for u in lost)} hold the result of a call whose "
                        "tool_use is not in the log (NOT REPRESENTED): that call's run, and the model call "
                        "that made it if it was not one of the responses here, fall in this time too"
                    ]
                    if lost
                    else []
                ),
            ]
            timing = replace(
                timing, covers="upper_bound", note=f"{timing.note}; an upper bound: {'; '.join(why)}"
            )
        unused.clear()
        if timing.source != "recorded":
            end = None
        model_mark = [m for ln in response.lines if (m := marked(ln, "this response")) is not None]
        if model_mark:
            timing = replace(timing, note=f"{timing.note}; {'; '.join(model_mark)}")
        current.segment.turns.append(
            Turn(
                payloads=payloads,
                offsets=offsets,
                chunk_timing=None if offsets is not None or len(payloads) == 1 else "spread",
                latency_s=latency,
                timing=timing,
                results=turn_results,
                recorded_start=start,
                recorded_end=max([t for t in [end, *result_times] if t is not None], default=None),
                model_end=end,
            )
        )
        if end is not None and (ready_at is None or end > ready_at):
            ready_at = end
        for t in result_times:
            ready_at = max(ready_at or t, t)
        request = list(result_lines)
        unanswered = [
            str(block.get("id"))
            for (_, block), r in zip(response.uses, turn_results, strict=True)
            if r.status == "not_recorded"
        ]
        if not response.uses:
            close()
    close()
    return out


def _unreadable(
    path: Path, read: Transcript, uses: dict[str, _Line], message_ids: set[Any], name: str | None = None
) -> tuple[int, int]:
    """What the unreadable lines still show (a cut line's message id, its tool_use ids): the issues
    say so and count them; returns the (tool calls, model calls) found that no other line holds."""
    calls = models = 0
    for number, raw in read.unreadable:
        mid, tids = peek(raw)
        new_model = mid is not None and mid not in message_ids
        new_calls = [t for t in dict.fromkeys(tids) if t not in uses]
        if not new_model and not new_calls:
            continue
        where = f"{name or path.name} line {number}"
        for i, issue in enumerate(read.issues):
            if issue.where == where and issue.unreadable:
                shows = ", ".join(
                    x
                    for x in (
                        f"a model call (message {mid}) that no other line holds" if new_model else "",
                        f"{len(new_calls)} tool call(s) ({', '.join(new_calls)})" if new_calls else "",
                    )
                    if x
                )
                read.issues[i] = replace(
                    issue,
                    what=f"{issue.what}; what is left of it shows {shows}: counted in the source, "
                    "not imported",
                    calls=len(new_calls),
                    model_calls=int(new_model),
                )
        calls += len(new_calls)
        models += int(new_model)
    return calls, models


def _file(path: Path, *, include_no_calls: bool, holder: Holder | None = None) -> ImportResult:
    read = read_lines(path)
    lines, issues = read.lines, read.issues
    companions: list[tuple[Path, Transcript]] = []
    for f in sub_agent_files(path):
        name = str(f.relative_to(path.parent))
        try:
            companions.append((f, read_lines(f, name)))
        except NotThisKind as exc:
            issues.append(Issue(kind="skipped", where=name, what=str(exc).removeprefix(f"{f}: ")))
        except (SourceError, *READ_ERRORS) as exc:
            issues.append(
                Issue(
                    kind="failed",
                    where=name,
                    what=f"a sub-agent transcript of this session that could not be read ({exc}): its "
                    "calls are not imported",
                    unreadable=True,
                )
            )
    for _f, more in companions:
        lines += more.lines
        read.boundaries.update(more.boundaries)
        read.passed.update(more.passed)
    if companions:
        issues.append(
            Issue(
                kind="note",
                where=path.name,
                what=f"{len(companions)} sub-agent transcript(s) Claude Code keeps beside the session "
                f"are read with it ({', '.join(str(f.relative_to(path.parent)) for f, _ in companions[:3])}"
                f"{', ...' if len(companions) > 3 else ''})",
            )
        )
    source_uses = read_uses(lines, issues)
    uses = source_uses.first
    keys = response_keys(lines, issues)
    message_ids = {
        keys[id(ln)]
        for ln in lines
        if ln.doc.get("type") == "assistant" and (ln.doc.get("message") or {}).get("model") != SYNTHETIC_MODEL
    }
    cut_calls, cut_models = _unreadable(path, read, uses, message_ids)
    for f, more in companions:
        more_calls, more_models = _unreadable(f, more, uses, message_ids, str(f.relative_to(path.parent)))
        cut_calls, cut_models = cut_calls + more_calls, cut_models + more_models
        issues += more.issues
    results, orphans = match_results(lines, source_uses, read.passed, issues)
    sidechain_contradictions(lines, read.passed, keys, issues)
    threads = threads_of(lines, read.passed)
    for thread in threads:
        distrust_times(path, thread, issues)
    name = slugify(path.name.removesuffix(".jsonl"))
    base_notes = (
        "Claude Code transcript: model latency from the line that completed the request to the "
        "response's last line; tool durations from toolUseResult.durationMs where present, else from "
        "the end of the response to the result line (estimated from the previous call's result where "
        "the call may have waited for it); responses rebuilt as chat-completion chunks, one per content "
        "block, each at the time its line was written; arguments are the tool_use input serialised "
        "compactly; Claude Code's system prompt and tool schemas are not in the log (schemas inferred)"
    )
    sessions = tuple(
        dict.fromkeys(
            str(ln.doc.get("sessionId"))
            for ln in threads[0]
            if ln.doc.get("parentUuid") is None and ln.doc.get("type") == "user" and ln.doc.get("sessionId")
        )
    )
    if len(sessions) > 1:
        issues.append(
            Issue(
                kind="note",
                where=path.name,
                what=f"the file holds {len(sessions)} sessions ({', '.join(_short(sessions))}): each "
                "is read on its own, its turns numbered from 1 (titles say 'session N')",
            )
        )
    several = sessions if len(sessions) > 1 else ()
    specs = [_Thread(label="main", slug=f"{name}__main", notes=base_notes, sessions=several)]
    declared = declared_tasks(
        [f for f, _ in companions], [str(f.relative_to(path.parent)) for f, _ in companions]
    )
    tasks = tasks_of(threads, results)
    links = link_subagents(threads, tasks, declared)
    lost = missing_subagents(tasks, links, path.name.removesuffix(".jsonl"))
    issues += lost
    for k in range(1, len(threads)):
        link = links[k]
        task = link.task
        if task is not None:
            specs.append(
                _Thread(
                    label=f"sub-agent of Task {task.call_id} ({task.description})",
                    slug=f"{name}__agent_{task.call_id[-8:]}",
                    notes=base_notes + f"; a sub-agent: it ran inside Task call {task.call_id} (that call's "
                    "duration is this whole run, so totals count its time once: metadata.parent; linked by "
                    "its prompt, its time and its final answer)",
                    parent_call=task.call_id,
                )
            )
            continue
        compactor = compaction_agent(threads[k])
        if compactor is not None and not link.tasks:
            specs.append(
                _Thread(
                    label=f"compaction ({compactor})",
                    slug=f"{name}__compaction{k}",
                    notes=base_notes + f"; Claude Code's own compaction run ({compactor}): its model call "
                    "summarised the conversation; it ran inside no Task call",
                )
            )
            issues.append(
                Issue(
                    kind="note",
                    where=threads[k][0].where(),
                    what=f"Claude Code's compaction agent ({compactor}): a model call summarising the "
                    "conversation, not a Task's sub-agent; read as a trace of its own (counted)",
                )
            )
            continue
        ids = ", ".join(t.call_id for t in link.tasks)
        specs.append(
            _Thread(
                label=f"sub-agent {k} (of Task {ids.replace(', ', ' or ')}: the log does not say which)"
                if link.tasks
                else f"sub-agent {k} (its Task call not found)",
                slug=f"{name}__agent{k}",
                notes=base_notes
                + (
                    f"; a sub-agent that ran inside one of the Task calls {ids}: they have its prompt and "
                    "its time, and the log does not tie it to one"
                    if link.tasks
                    else "; a sub-agent whose Task call is not in this file"
                ),
            )
        )
        if link.tasks:
            issues.append(
                Issue(
                    kind="note",
                    where=threads[k][0].where(),
                    what=f"a sub-agent that can have run inside any of the Task calls {ids} (same prompt, "
                    "same time, no distinct final answer): not tied to one",
                )
            )
    opened: list[_Open] = []
    for thread, spec in zip(threads, specs, strict=True):
        opened += _thread_segments(
            path, thread, spec, results=results, orphans=orphans, read=read, keys=keys, issues=issues
        )
    kept: list[Segment] = []
    repeated_calls = repeated_models = 0
    for part in opened:
        seg = part.segment
        elsewhere = holder(part.uuids) if holder is not None else None
        if elsewhere is not None:
            calls = sum(len(t.results) for t in seg.turns)
            repeated_calls += calls
            repeated_models += len(seg.turns)
            issues.append(
                Issue(
                    kind="note",
                    where=seg.title,
                    what=f"every line of it is in {elsewhere} too (same uuids: a session resumed there): "
                    f"read once, from {elsewhere}; its {calls} tool call(s) and {len(seg.turns)} model "
                    "call(s) are counted there",
                )
            )
            continue
        if not any(t.results for t in seg.turns) and not include_no_calls:
            issues.append(
                Issue(
                    kind="skipped",
                    where=seg.title,
                    what=f"{len(seg.turns)} model call(s) without tool calls (nothing to execute; "
                    "include_no_calls=True imports them)",
                    model_calls=len(seg.turns),
                )
            )
            continue
        kept.append(seg)
    return build_result(
        "claude-code",
        str(path),
        kept,
        source_calls=source_uses.count
        + len(orphans)
        + cut_calls
        - repeated_calls
        + sum(i.calls for i in lost),
        source_model_calls=len(message_ids) + cut_models - repeated_models,
        issues=issues,
        zone_less=zone_less_note(ln.doc.get("timestamp") for ln in lines),
    )


def import_claude_code(path: str | Path, *, include_no_calls: bool = False) -> ImportResult:
    """A Claude Code transcript (``.jsonl``), or a folder of them, -> traces (see the module notes).

    In a folder each file is imported on its own: one that cannot be read is reported by name and
    costs only itself; a resumed session's file repeats the lines of the file it resumed, and what
    two files share is read once (from the file with more lines)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(".jsonl"))
        sessions = {f.name.removesuffix(".jsonl") for f in files if not f.name.startswith("agent-")}

        def read_with_its_session(f: Path) -> bool:
            """A session's sub-agent files and folder: read with the session's file (`_file`)."""
            if f.is_dir():
                return f.name in sessions
            return f.name.startswith("agent-") and session_of(f) in sessions

        files = [f for f in files if not read_with_its_session(f)]
        held = holders(files)
        return import_folder(
            "claude-code",
            p,
            (".jsonl",),
            lambda f: _file(f, include_no_calls=include_no_calls, holder=held.get(f)),
            companion=read_with_its_session,
        )
    return _file(p, include_no_calls=include_no_calls)


def _short(ids: tuple[str, ...]) -> list[str]:
    """The ids cut to 8 characters, or to as many as it takes to tell them all apart."""
    n = 8
    while len({i[:n] for i in ids}) < len(set(ids)) and n < max(map(len, ids)):
        n += 1
    return [i[:n] for i in ids]

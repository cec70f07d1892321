"""The builder every importer shares: `Segment`s (the source-neutral shape of a run, `_shapes`) become
traces and a report (`_report`); placement on the source's timeline is `_timeline`.

An importer reads its source into `Segment`s (one conversation the loop can replay: initial messages,
then model responses each with the results its calls got) and hands them to `build_result`. The
builder replays each draft through the loop on the virtual clock, so the request messages in a trace
are exactly what the loop sends; the timing labels of the source survive the replay.

**Placed as recorded.** Where the source has timestamps (every response's end, every result's end),
the rounds of the trace are then placed on the source's own timeline: a model call ends when the
source says its response was complete, a tool call when its result came, each lasting its duration.
So a trace shows what the agent did (calls that overlapped overlap, calls that waited wait, gaps the
source does not explain stay gaps) and its wall time is the recorded one; replays under any mode use
the durations only. The trace's mode is what the source shows: ``parallel`` when the recorded calls
of some batch overlapped, ``sequential`` when every batch with timings ran one call after another;
the notes say which batches showed what (and when nothing did).

The recorded agent decided when to stop, not toolcall_lab's loop: imported traces are built and
replayed with ``all_failed_policy="continue"`` (recorded in their settings), so a round whose calls
all failed is followed by the next recorded model call, as it was. A segment whose recording stops
after tool calls gets one closing round, a placeholder marked as such (`Round.placeholder`, 0 s),
and the trace's outcome says why it is incomplete. A call whose result the source does not hold has
status ``not_recorded``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import PurePath
from typing import Any

from toolcall_lab.exceptions import ToolcallLabError
from toolcall_lab.importers._figures import check_segment
from toolcall_lab.importers._report import (
    ImportReport,
    ImportResult,
    Issue,
    IssueKind,
    NotThisKind,
    SourceError,
    merge_results,
)
from toolcall_lab.importers._shapes import (
    CLOSING,
    CLOSING_TEXT,
    MIXED_ZONES,
    MODEL_PLACEHOLDER,
    MODEL_S,
    NOT_RECORDED,
    TOLERANCE_S,
    TOOL_PLACEHOLDER,
    TOOL_S,
    Result,
    ResultStatus,
    Segment,
    Turn,
    call_entry,
    chat_body,
    completion,
    epoch,
    inferred_tools,
    parse_turn,
    placeholder_payload,
    safe_tool_name,
    slugify,
    stamp_or_none,
    text_of,
    with_choices,
    zone_less_note,
)
from toolcall_lab.importers._timeline import Unplaced, first_chunk, mode_evidence, place
from toolcall_lab.models import ScriptedResponse
from toolcall_lab.records import (
    DECIDED,
    MODE_NOT_EVIDENCED,
    NOT_BATCH_EVIDENCE,
    NOT_IN_SOURCE,
    SCREENED_ON_IMPORT,
    ChunkTiming,
    Mode,
    ModelCall,
    Round,
    TimedChunk,
    Timing,
    ToolExecution,
    clock_time,
)
from toolcall_lab.replay import replay
from toolcall_lab.trace import RESULT_NOT_RECORDED, Trace, TraceMetadata, TraceOutcome

__all__ = [
    "CLOSING",
    "CLOSING_TEXT",
    "MODEL_PLACEHOLDER",
    "MODEL_S",
    "NOT_RECORDED",
    "TOLERANCE_S",
    "TOOL_PLACEHOLDER",
    "TOOL_S",
    "ImportBuildError",
    "ImportReport",
    "ImportResult",
    "Issue",
    "IssueKind",
    "NotThisKind",
    "Result",
    "ResultStatus",
    "Segment",
    "SourceError",
    "Turn",
    "build_result",
    "build_trace",
    "call_entry",
    "chat_body",
    "completion",
    "conversation",
    "epoch",
    "inferred_tools",
    "merge_results",
    "other_choices",
    "parse_turn",
    "placeholder_payload",
    "safe_tool_name",
    "slugify",
    "stamp_or_none",
    "text_of",
    "with_choices",
    "zone_less_note",
]


FINISHING_TOOLS = frozenset({"submit", "finish", "final_answer", "attempt_completion", "task_complete"})
"""Tools with which agents end their own run (SWE-agent ``submit``, OpenHands ``finish``, smolagents
``final_answer``, Cline ``attempt_completion``): a recording that ends with one completed, though no
model response follows."""


class ImportBuildError(ToolcallLabError):
    """A segment could not be turned into a trace (the message says which and why)."""


# ---------------------------------------------------------------------------------------------
# building


def conversation(turns: Sequence[Turn], *, first_batch: int = 0) -> list[dict[str, Any]]:
    """The messages the loop appends for these turns: each assistant message, then its results."""
    out: list[dict[str, Any]] = []
    for k, turn in enumerate(turns):
        parsed = parse_turn(turn.payloads, first_batch + k)
        out.append(parsed.first.to_message())
        for call, result in zip(parsed.tool_calls, turn.results, strict=False):
            out.append({"role": "tool", "tool_call_id": call.tool_call_id, "content": result.text})
    return out


def _chunks(turn: Turn, where: str, issues: list[Issue]) -> tuple[tuple[TimedChunk, ...], ChunkTiming]:
    n = len(turn.payloads)
    if turn.offsets is not None and len(turn.offsets) != n:
        raise ImportBuildError(f"{n} payloads but {len(turn.offsets)} offsets")
    if turn.offsets is not None and all(
        -TOLERANCE_S <= o <= turn.latency_s + TOLERANCE_S for o in turn.offsets
    ):
        offsets = [min(max(o, 0.0), turn.latency_s) for o in turn.offsets]
        timing: ChunkTiming = turn.chunk_timing or "recorded"
    else:
        if turn.offsets is not None:
            issues.append(
                Issue(
                    kind="damaged",
                    where=where,
                    what="chunk times outside the response's own time ("
                    + ", ".join(f"{o:.3f}" for o in turn.offsets)
                    + f" s for a {turn.latency_s:.3f} s response): spread evenly instead, labelled 'spread'",
                )
            )
        offsets = ScriptedResponse(latency_s=turn.latency_s, ttfc_s=turn.ttfc_s).offsets(n)
        timing = "spread" if n > 1 else "none"
        if turn.offsets is None and turn.chunk_timing is not None:
            timing = turn.chunk_timing
    return tuple(
        TimedChunk(offset_s=o, payload=p) for o, p in zip(offsets, turn.payloads, strict=True)
    ), timing


def _closing(turns: list[Turn], reason: str, said: str | None = None) -> tuple[Turn, str]:
    """The placeholder round after a recording's last tool calls, and the outcome reason it implies."""
    last = turns[-1].results
    missing = sum(r.status == "not_recorded" for r in last)
    why = (
        "recording_ends_before_tool_results"
        if missing == len(last)
        else "recording_ends_before_some_tool_results"
        if missing
        else "recording_ends_after_tool_results"
    )
    text = {
        "recording_ends_before_tool_results": "the recording ends before the results of these tool calls",
        "recording_ends_before_some_tool_results": f"the recording ends with {missing} of "
        f"{len(last)} results of these tool calls missing",
        "recording_ends_after_tool_results": "the recording ends after these tool calls' results",
    }[why]
    turn = Turn(
        payloads=[
            placeholder_payload(
                CLOSING_TEXT,
                why=said or f"{text}: no model response follows",
                response_id="closing-round",
            )
        ],
        latency_s=0.0,
        timing=CLOSING,
        synthetic=True,
    )
    return turn, why


def build_trace(
    segment: Segment, issues: list[Issue] | None = None, parent: dict[str, str] | None = None
) -> Trace:
    """Replay one segment through the loop (virtual clock) into a trace; raises `ImportBuildError`.

    Issues found on the way (chunk times that do not fit, timestamps that do not fit together) are
    appended to `issues`; `parent`: a sub-agent's link to the call it ran inside (`build_result`)."""
    found: list[Issue] = [] if issues is None else issues
    segment = check_segment(segment, found)
    turns = list(segment.turns)
    if not turns:
        raise ImportBuildError("no model response to import")
    last = parse_turn(turns[-1].payloads, len(turns) - 1)
    status, reason, error = segment.status, segment.reason, segment.error
    said = segment.closing
    if last.tool_calls:
        finisher = next((c.name for c in last.tool_calls if c.name.lower() in FINISHING_TOOLS), None)
        if reason == "final_answer" and finisher is not None:  # the agent ended the run itself
            status, reason = "completed", "finish_call"
            said = said or f"the agent ended the run with its {finisher} tool: no model response follows"
        closing, why = _closing(turns, reason, said)
        turns.append(closing)
        if reason == "final_answer":  # the source said nothing more specific
            status, reason = "incomplete", why
    evidenced, evidence = mode_evidence(turns)
    mode: Mode = segment.mode or evidenced or "sequential"
    rounds = []
    for k, turn in enumerate(turns):
        parsed = parse_turn(turn.payloads, k)
        calls = parsed.tool_calls
        if calls and k == len(turns) - 1:
            raise ImportBuildError(f"round {k}: the last response still has tool calls")
        if not calls and k < len(turns) - 1:
            raise ImportBuildError(
                f"round {k}: a response without tool calls before the end (the loop would stop there)"
            )
        if len(turn.results) != len(calls):
            raise ImportBuildError(
                f"round {k}: {len(calls)} tool call(s) but {len(turn.results)} result(s) matched to them"
            )
        chunks, chunk_timing = _chunks(turn, f"{segment.title} round {k}", found)
        rounds.append(
            Round(
                round_index=k,
                mode=mode,
                request_messages=(),
                model_call=ModelCall(
                    started_at=0.0,
                    ended_at=turn.latency_s,
                    first_chunk_at=None,
                    chunks=chunks,
                    timing=turn.timing,
                    chunk_timing=chunk_timing,
                ),
                assistant_message=parsed.first.to_message(),
                tool_calls=calls,
                executions=tuple(
                    ToolExecution(
                        tool_call_id=c.tool_call_id,
                        name=c.name,
                        arguments=c.arguments,
                        index=c.index,
                        status=r.status,
                        result=r.text,
                        error=None if r.status == "ok" else r.text,
                        started_at=0.0,
                        ended_at=r.duration_s,
                        timing=_batch_evidence(r),
                    )
                    for c, r in zip(calls, turn.results, strict=True)
                ),
            )
        )
    known = {(t.get("function") or {}).get("name") for t in segment.tools}
    extra = inferred_tools(
        ((c.name, c.arguments) for r in rounds for c in r.tool_calls if c.name not in known),
        "the source does not record this tool's schema",
    )
    draft = Trace(
        metadata=TraceMetadata(title=segment.title, origin=segment.origin),
        tools=(*segment.tools, *extra),
        initial_messages=tuple(segment.initial),
        rounds=tuple(rounds),
        outcome=TraceOutcome(status="completed", reason="final_answer"),
    )
    tool_rounds = sum(1 for r in rounds if r.tool_calls)
    try:
        result = replay(
            draft,
            mode,
            check="off",
            max_rounds=tool_rounds + 1,
            dedupe=False,
            all_failed_policy="continue",  # the recorded agent went on; so does its replay
        )
    except ToolcallLabError as exc:
        raise ImportBuildError(f"the loop could not replay it: {exc}") from exc
    if len(result.rounds) != len(rounds):
        raise ImportBuildError(
            f"the loop replayed {len(result.rounds)} of {len(rounds)} rounds "
            f"({result.status}/{result.reason}: {result.error})"
        )
    for got, want in zip(result.rounds, rounds, strict=True):
        for ex, recorded in zip(got.executions, want.executions, strict=False):
            screened = ex.status == "invalid_arguments" and recorded.result == RESULT_NOT_RECORDED
            if not screened and (ex.result != recorded.result or ex.status != recorded.status):
                raise ImportBuildError(
                    f"round {want.round_index}: call {recorded.tool_call_id} ({recorded.name}) came out "
                    f"{ex.status} instead of its recorded {recorded.status} result ({ex.result[:120]!r})"
                )
    try:
        placed, not_placed = place(result.rounds, turns, mode)
    except Unplaced as exc:
        placed, not_placed = list(result.rounds), f"the source's timestamps do not fit together: {exc}"
        found.append(
            Issue(
                kind="damaged",
                where=segment.title,
                what=f"{not_placed}; the rounds are placed as the loop schedules them, not as recorded",
            )
        )
    stored: str = segment.mode or evidenced or MODE_NOT_EVIDENCED  # (never a mode the source does not show)
    placed = [
        replace(
            r,
            mode=stored,
            model_call=replace(r.model_call, first_chunk_at=first_chunk(r, t)),
            executions=tuple(_screened_on_import(e) for e in r.executions),
        )
        for r, t in zip(map(_on_clock, placed), turns, strict=True)
    ]
    wall = max([r.ended_at for r in placed], default=0.0)
    real = [t for t in segment.turns if not t.synthetic]
    starts = [t.recorded_start for t in real if t.recorded_start is not None]
    ends = [t.recorded_end for t in real if t.recorded_end is not None]
    recorded_wall = clock_time(max(ends) - min(starts)) if starts and ends else None
    if recorded_wall is not None and (real[0].recorded_start is None or real[-1].recorded_end is None):
        # the run's first start or last end is a time the import did not trust (or the source lacks):
        # the span of the others would be a shorter run, not this one's wall time
        found.append(
            Issue(
                kind="note",
                where=segment.title,
                what="no recorded wall time: the run's "
                + ("first start" if real[0].recorded_start is None else "last end")
                + " is not a time the import trusts (or the source does not give it)",
            )
        )
        recorded_wall = None
    if recorded_wall is not None and recorded_wall < 0:
        found.append(
            Issue(
                kind="damaged",
                where=segment.title,
                what=f"the source's last timestamp is {-recorded_wall:.3f} s before its first: no "
                "recorded wall time",
            )
        )
        recorded_wall = None
    placement = (
        "rounds placed as recorded (each call ends when the source says it did)"
        if not not_placed
        else f"rounds placed as the loop schedules them under '{mode}' ({not_placed})"
    )
    shown = segment.mode or evidenced
    mode_note = (
        f"mode {mode}: {evidence}"
        if segment.mode is None and evidenced is not None
        else f"mode not evidenced (metadata.mode is empty; replays default to {mode}): {evidence}"
        if shown is None
        else f"mode {mode} (as the source's agent runs calls); {evidence}"
    )
    reused = _reused_ids(rounds)
    if reused and "call ids repeat across" not in segment.notes:  # (an importer may have said it)
        found.append(
            Issue(
                kind="note",
                where=segment.title,
                what=f"call ids repeat across rounds (the "
                f"source's own ids, kept as they are; each call is answered from its own round): "
                f"{reused}",
            )
        )
        mode_note += f"; call ids repeat across rounds (the source's own, kept): {reused}"
    meta = TraceMetadata(
        title=segment.title,
        origin=segment.origin,
        provider=segment.provider,
        model=segment.model,
        created=segment.created,
        source=segment.source,
        notes=f"{segment.notes}; {mode_note}; {placement}",
        recorded_wall_s=recorded_wall,
        parent=parent,
    )
    trace = Trace.from_run(result, meta)
    trace = replace(trace, metadata=replace(trace.metadata, mode=shown))
    if result.status not in ("completed", "incomplete") and reason == "final_answer":
        status, reason, error = result.status, result.reason, result.error  # the loop ended it
    return replace(
        trace,
        rounds=tuple(placed),
        outcome=TraceOutcome(
            status=status,
            reason=reason,
            final_answer=result.final_answer if status == "completed" else None,
            error=error,
            wall_time_s=wall,
        ),
    )


def _on_clock(r: Round) -> Round:
    """`r` with every time to the microsecond (`clock_time`): one rounding rule whether the rounds
    were placed as recorded or, when the source's times do not allow it, scheduled by the loop (whose
    sums of durations would otherwise carry float noise: 3.4098970000000004)."""
    mc = r.model_call
    chunks = tuple(
        c if (o := clock_time(c.offset_s)) == c.offset_s else replace(c, offset_s=o) for c in mc.chunks
    )
    return replace(
        r,
        model_call=replace(
            mc,
            started_at=clock_time(mc.started_at),
            ended_at=clock_time(mc.ended_at),
            first_chunk_at=None if mc.first_chunk_at is None else clock_time(mc.first_chunk_at),
            chunks=chunks,
        ),
        executions=tuple(
            replace(e, started_at=clock_time(e.started_at), ended_at=clock_time(e.ended_at))
            for e in r.executions
        ),
    )


def _batch_evidence(r: Result) -> Timing:
    """A result's timing, its note saying when its span is no evidence of how the batch ran (the
    source gives no start, or the tool did not run): `analysis.recorded_batch` reads it, as
    `_timeline.mode_evidence` reads `Result.start_known`."""
    if r.start_known or r.status == "not_recorded" or NOT_BATCH_EVIDENCE in r.timing.note:
        return r.timing
    return replace(r.timing, note=f"{r.timing.note}; {NOT_BATCH_EVIDENCE}")


def _screened_on_import(ex: ToolExecution) -> ToolExecution:
    """A call the import's own loop screened out (its arguments are not a complete JSON object): the
    source holds no result for it, so what the recorded client did with it, and how long that took,
    is unknown. Its 0 s is a placeholder, not a recorded figure (the loop labels its live verdicts
    `DECIDED`, 'recorded': true of a live run, not of an import)."""
    if ex.timing != DECIDED:
        return ex
    return replace(
        ex,
        timing=Timing(
            source="placeholder",
            note=f"{ex.status}: {SCREENED_ON_IMPORT}; the source holds no result, so whether the "
            f"recorded client ran it, and for how long, is unknown: 0 s; {NOT_IN_SOURCE}",
        ),
    )


def _reused_ids(rounds: list[Round]) -> str:
    """The call ids that appear in more than one round, each with its rounds ('' when none)."""
    rounds_of: dict[str, list[int]] = {}
    for r in rounds:
        for cid in dict.fromkeys(c.tool_call_id for c in r.tool_calls):
            rounds_of.setdefault(cid, []).append(r.round_index)
    return "; ".join(
        f"{cid} in rounds {', '.join(map(str, ks))}" for cid, ks in rounds_of.items() if len(ks) > 1
    )


_NEVER_RUN = frozenset({"invalid_arguments", "unknown_tool"})


def _missing_issues(trace: Trace, segment: Segment) -> tuple[int, list[Issue]]:
    """How many calls of the trace have no result in the source, and the issues listing them."""
    out = []
    count = 0
    turns = [t for t in segment.turns if not t.synthetic]
    for k, turn in enumerate(turns):
        rnd = trace.rounds[k]
        # a call the loop screened out (arguments not a complete JSON object, unknown tool) was never
        # run, so no result is missing: the trace records it as what the loop did with it
        screened = (
            {i for i, e in enumerate(rnd.executions) if e.status in _NEVER_RUN}
            if len(rnd.executions) == len(rnd.tool_calls)
            else set()
        )
        for i, (r, call) in enumerate(zip(turn.results, rnd.tool_calls, strict=False)):
            if r.status != "not_recorded":
                continue
            if i in screened:
                out.append(
                    Issue(
                        kind="note",
                        where=r.where or f"{trace.metadata.title} round {k}",
                        what=f"call {call.tool_call_id} ({call.name}) is {rnd.executions[i].status}: "
                        "never run, so no result is missing (the trace says why); its tool message in "
                        "the trace is not in the recording: what toolcall_lab would send",
                    )
                )
                continue
            count += 1
            if not r.listed:
                continue
            after = " though the recording goes on after it" if r.damaged else ""
            out.append(
                Issue(
                    kind="damaged" if r.damaged else "gap",
                    where=r.where or f"{trace.metadata.title} round {k}",
                    what=f"no result for {call.name} ({call.tool_call_id}){after}: imported with status "
                    "not_recorded",
                )
            )
    return count, out


def other_choices(part: Segment) -> tuple[list[Segment], int]:
    """A trace for each choice beyond the first of the segment's ``n > 1`` responses (the agent went
    on with choice 0, the one the loop reads: the others are alternatives it did not take, their
    calls without results), and how many tool calls those choices hold (the importer counted choice
    0's only). Never silently dropped."""
    out: list[Segment] = []
    calls = 0
    if part.choices_split:
        return out, calls
    for k, turn in enumerate(part.turns):
        if turn.synthetic or turn.alternative:
            continue
        parsed = parse_turn(turn.payloads, k)
        n = len(parsed.choices)
        for c in range(1, n):
            where = f"{part.title} response {k} choice {c}"
            calls += len(parsed.choices[c].tool_calls)
            alt = Turn(
                payloads=[chat_body(parsed, keep_fallback_ids=False, choice_index=c)],
                latency_s=turn.latency_s,
                timing=turn.timing,
                results=[
                    Result.missing(
                        where,
                        why=f"choice {c} of an n={n} response: the agent went on with choice 0, so this "
                        "choice's calls got no result: 0 s",
                    )
                    for _ in parsed.choices[c].tool_calls
                ],
                alternative=True,
            )
            out.append(
                replace(
                    part,
                    title=where,
                    slug=f"{part.slug}__r{k}_choice{c}",
                    source=f"{part.source}#response={k}&choice={c}",
                    initial=[*part.initial, *conversation(part.turns[:k])],
                    turns=[alt],
                    status="completed",
                    reason="final_answer",
                    error=None,
                    closing=None,
                    mode=None,
                    notes=f"choice {c} of a response with {n} choices (n > 1): an alternative the agent "
                    f"did not go on with; its calls have no results; model latency as for the whole "
                    f"response ({turn.timing.source}); {part.notes}",
                    choices_split=True,
                )
            )
    return out, calls


def _call_holders(parts: Sequence[Segment]) -> dict[str, str]:
    """For each call id a sub-agent segment names as the call it ran inside, the source of the
    segment whose responses hold that call (its trace's ``metadata.source``)."""
    wanted = {p.parent_call for p in parts if p.parent_call is not None}
    out: dict[str, str] = {}
    if not wanted:
        return out
    for part in parts:
        for k, turn in enumerate(part.turns):
            if turn.synthetic:
                continue
            for call in parse_turn(turn.payloads, k).tool_calls:
                if call.tool_call_id in wanted:
                    out.setdefault(call.tool_call_id, part.source)
    return out


def _build_isolating(
    part: Segment, found: list[Issue], parent: dict[str, str] | None = None
) -> list[tuple[Segment, Trace]]:
    """Build `part`; when it cannot be built, find the first round that cannot and lose only that
    round: the rounds before it and after it become traces of their own (``before round k``,
    ``after round k``)."""
    try:
        return [(part, build_trace(part, found, parent))]
    except ImportBuildError as exc:
        error = exc
    bad = next(
        (k for k in range(len(part.turns)) if not _builds(replace(part, turns=part.turns[: k + 1]))),
        len(part.turns) - 1,
    )
    turn = part.turns[bad]
    found.append(
        Issue(
            kind="failed",
            where=f"{part.title} round {bad}",
            what=f"{error}; this round's {len(turn.results)} call(s) are not imported"
            + ("; the rounds around it are" if len(part.turns) > 1 else ""),
            calls=len(turn.results),
            model_calls=0 if turn.synthetic else 1,
        )
    )
    out: list[tuple[Segment, Trace]] = []
    pieces = []
    if bad > 0:
        pieces.append(
            replace(
                part,
                turns=part.turns[:bad],
                status="incomplete",
                reason="next_round_not_representable",
                error=f"round {bad} could not be represented ({error})",
            )
        )
    if bad + 1 < len(part.turns):
        pieces.append(
            replace(
                part,
                initial=[*part.initial, *conversation(part.turns[: bad + 1])],
                turns=part.turns[bad + 1 :],
            )
        )
    for piece in pieces:
        where = "before" if piece.turns[0] is part.turns[0] else "after"
        named = replace(
            piece, title=f"{piece.title} ({where} round {bad})", slug=f"{piece.slug}_{where}{bad}"
        )
        out += _build_isolating(named, found, parent)
    return out


def _builds(segment: Segment) -> bool:
    try:
        build_trace(segment, [])
    except ImportBuildError:
        return False
    return True


def build_result(
    kind: str,
    source: str,
    segments: Iterable[Segment],
    *,
    source_calls: int,
    source_model_calls: int,
    issues: Iterable[Issue] = (),
    zone_less: str = "",
) -> ImportResult:
    """Build every segment, number segments that share a name, collect the report.

    `zone_less`: the note (`_shapes.zone_less_note`) saying the source's timestamps without a zone
    were read as UTC; every trace's notes carry it."""
    found = list(issues)
    if zone_less:
        segments = [replace(part, notes=f"{part.notes}; {zone_less}") for part in segments]
    if zone_less.startswith(MIXED_ZONES):
        found.append(Issue(kind="damaged", where=PurePath(source).name, what=zone_less))
    not_utf8 = [i.where for i in found if i.kind == "damaged" and "U+FFFD" in i.what]
    parts = [
        replace(
            part,
            notes=f"{part.notes}; the source has bytes that are not UTF-8 ({', '.join(not_utf8[:5])}), read "
            "as U+FFFD: a text holding U+FFFD is not the source's",
        )
        if not_utf8 and "U+FFFD" not in part.notes
        else part
        for part in segments
    ]
    for part in list(parts):
        extra, extra_calls = other_choices(part)
        parts += extra
        source_calls += extra_calls
    per_slug: dict[str, int] = {}
    for part in parts:
        per_slug[part.slug] = per_slug.get(part.slug, 0) + 1
    numbered: dict[str, int] = {}
    traces: list[Trace] = []
    slugs: list[str] = []
    taken: set[str] = set()
    imported_calls = imported_model_calls = missing = 0
    holders = _call_holders(parts)
    for part in parts:
        if not part.turns:  # (every response of it failed on its own, each reported with its calls)
            continue
        part = check_segment(part, found)
        total = per_slug[part.slug]
        if total > 1:
            n = numbered[part.slug] = numbered.get(part.slug, 0) + 1
            width = len(str(total))
            part = replace(part, title=f"{part.title} (part {n})", slug=f"{part.slug}_part{n:0{width}d}")
        parent = None
        if part.parent_call is not None and part.parent_call in holders:
            parent = {"source": holders[part.parent_call], "tool_call_id": part.parent_call}
        for piece, trace in _build_isolating(part, found, parent):
            slug, n = piece.slug, 2
            while slug in taken:
                slug, n = f"{piece.slug}_{n}", n + 1
            taken.add(slug)
            traces.append(trace)
            slugs.append(slug)
            imported_calls += trace.n_calls
            imported_model_calls += sum(1 for t in piece.turns if not t.synthetic and not t.alternative)
            count, gaps = _missing_issues(trace, piece)
            missing += count
            found += gaps
    name = PurePath(source).name
    found = [i if name in i.where else replace(i, where=f"{name} {i.where}") for i in found]
    # (every issue names its file, also when a folder's report lists many files' issues together)
    report = ImportReport(
        kind=kind,
        source=source,
        source_calls=source_calls,
        imported_calls=imported_calls,
        source_model_calls=source_model_calls,
        imported_model_calls=imported_model_calls,
        traces=len(traces),
        issues=tuple(found),
        missing_results=missing,
    )
    accounted = sum(i.calls for i in found)
    if imported_calls + accounted != source_calls:
        diff = source_calls - imported_calls - accounted
        report = replace(
            report,
            issues=(
                *found,
                Issue(
                    kind="failed",
                    where=source,
                    what=f"{diff} tool call(s) of the source are neither imported nor accounted for"
                    if diff > 0
                    else f"{-diff} more tool call(s) imported than the source holds",
                ),
            ),
        )
    return ImportResult(traces=tuple(traces), slugs=tuple(slugs), report=report)

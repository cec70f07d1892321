"""What every importer shares: the source-neutral shape of a run, and the builder (report: `_report`).

An importer reads its source into `Segment`s (one conversation the loop can replay: initial messages,
then model responses each with the results its calls got) and hands them to `build_result`. The
builder replays each draft through the loop on the virtual clock, so the request messages in a trace
are exactly what the loop sends; the timing labels of the source survive the replay.

The recorded agent decided when to stop, not toolcall_lab's loop: imported traces are built and
replayed with ``all_failed_policy="continue"`` (recorded in their settings), so a round whose calls
all failed is followed by the next recorded model call, as it was. A segment whose recording stops
after tool calls gets one closing round that says so (``placeholder`` timing, 0 s), and the trace's
outcome says why it is incomplete.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from toolcall_lab.exceptions import ToolcallLabError
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator, parse_chat_completion
from toolcall_lab.importers._report import ImportReport, ImportResult, Issue, IssueKind, merge_results
from toolcall_lab.messages import ParsedResponse
from toolcall_lab.models import ScriptedResponse
from toolcall_lab.records import (
    ChunkTiming,
    Mode,
    ModelCall,
    Origin,
    Round,
    TimedChunk,
    Timing,
    ToolExecution,
)
from toolcall_lab.replay import replay
from toolcall_lab.trace import RESULT_NOT_RECORDED, Trace, TraceMetadata, TraceOutcome

__all__ = [
    "ImportReport",
    "ImportResult",
    "Issue",
    "IssueKind",
    "merge_results",
]

TOOL_S = 0.1
"""Placeholder duration of a tool call whose timing the source did not record."""
MODEL_S = 0.8
"""Placeholder model latency where the source recorded none."""
TOOL_PLACEHOLDER = Timing(source="placeholder", note=f"tool duration not recorded: {TOOL_S} s assumed")
MODEL_PLACEHOLDER = Timing(source="placeholder", note=f"model latency not recorded: {MODEL_S} s assumed")
NOT_RECORDED = Timing(source="placeholder", note="the source holds no result for this call: 0 s")
CLOSING = Timing(
    source="placeholder", note="no model call: the recording ends after the tool calls; 0 s closing round"
)
CLOSING_TEXT = "(the recording ends here: no model response after these tool calls)"

ResultStatus = Literal["ok", "error", "timeout"]


class ImportBuildError(ToolcallLabError):
    """A segment could not be turned into a trace (the message says which and why)."""


class SourceError(ToolcallLabError):
    """The source is not what the importer reads (the message names the file and the problem)."""


@dataclass(slots=True)
class Result:
    """What one tool call got back, and how long it took (with where that figure comes from)."""

    text: str
    duration_s: float
    timing: Timing
    status: ResultStatus = "ok"

    @classmethod
    def missing(cls) -> Result:
        """A call whose result the source does not hold."""
        return cls(text=RESULT_NOT_RECORDED, duration_s=0.0, timing=NOT_RECORDED)


@dataclass(slots=True)
class Turn:
    """One model response (chat chunks, or one ``chat.completion`` body) and its calls' results.

    `results` are aligned with the response's tool calls in index order (the order the loop runs
    them); `offsets` are the recorded arrival of each payload (None: spread evenly, or one body).
    `recorded_start` / `recorded_end` are source timestamps (epoch seconds) of the request and of
    the last result, used for the recorded wall time of a trace.
    """

    payloads: list[dict[str, Any]]
    latency_s: float
    timing: Timing
    results: list[Result] = field(default_factory=list)
    offsets: list[float] | None = None
    ttfc_s: float | None = None
    chunk_timing: ChunkTiming | None = None
    recorded_start: float | None = None
    recorded_end: float | None = None
    synthetic: bool = False


@dataclass(slots=True)
class Segment:
    """One conversation the loop can replay: what the model was given, then its responses.

    `status`/`reason`/`error` become the trace's outcome; `slug` names its file.
    """

    title: str
    slug: str
    source: str
    initial: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    turns: list[Turn]
    notes: str
    provider: str | None = None
    model: str | None = None
    created: str | None = None
    origin: Origin = "imported"
    mode: Mode = "sequential"
    status: str = "completed"
    reason: str = "final_answer"
    error: str | None = None


# ---------------------------------------------------------------------------------------------
# helpers the importers share


def completion(
    message: dict[str, Any],
    *,
    response_id: str,
    model: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion`` body holding one assistant message (finish reason from its calls)."""
    return {
        "object": "chat.completion",
        "id": response_id,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        **({"usage": usage} if usage else {}),
    }


def chat_body(parsed: ParsedResponse, *, keep_fallback_ids: bool = True) -> dict[str, Any]:
    """A chat-completion body equivalent to a parsed response of any format.

    With ``keep_fallback_ids=False`` calls the provider sent without an id carry none in the body, so
    parsing it again labels their ids ``fallback`` again (importers); a client-facing body (the
    proxy) keeps them, because clients must echo an id.
    """
    choice = parsed.first
    message = choice.to_message()
    if not keep_fallback_ids and choice.tool_calls:
        message["tool_calls"] = [
            call_entry(c.tool_call_id if c.id_source == "provider" else None, c.name, c.arguments)
            for c in choice.tool_calls
        ]
    finish = {"tool_use": "tool_calls", "end_turn": "stop", "completed": "stop"}.get(
        choice.finish_reason or "", choice.finish_reason or ("tool_calls" if choice.tool_calls else "stop")
    )
    if choice.tool_calls:
        finish = "tool_calls"
    return {
        "id": parsed.response_id or "imported",
        "object": "chat.completion",
        "model": parsed.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        **({"usage": parsed.usage} if parsed.usage else {}),
    }


def call_entry(tool_call_id: str | None, name: str, arguments: str) -> dict[str, Any]:
    """An OpenAI ``tool_calls`` entry (no ``id`` key when the source has none: the parser then gives
    it a fallback id, labelled ``fallback``)."""
    entry: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if tool_call_id:
        entry["id"] = tool_call_id
    return entry


def parse_turn(payloads: Sequence[dict[str, Any]], batch: int) -> ParsedResponse:
    """The response a turn's payloads make (as the loop will parse them)."""
    if len(payloads) == 1 and payloads[0].get("object") == "chat.completion":
        return parse_chat_completion(payloads[0], batch=batch)
    acc = ChatCompletionAccumulator(batch=batch)
    for p in payloads:
        acc.feed(p)
    return acc.finish()


def epoch(stamp: str) -> float:
    """Seconds since the epoch for an ISO 8601 timestamp (``Z`` accepted; a stamp without a zone
    is read as is, which is fine for differences within one source)."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def text_of(content: Any) -> str:
    """Text of a message content: a string, or blocks (text joined; other blocks as JSON)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, str):
                parts.append(block)
            else:
                parts.append(json.dumps(block, ensure_ascii=False))
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False)


_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def safe_tool_name(name: str) -> str:
    """OpenAI tool names allow letters, digits, '_' and '-' only (BFCL uses dots)."""
    return _SAFE.sub("_", name)[:64] or "tool"


def slugify(text: str) -> str:
    """A file-name-safe form of `text` (dots, spaces and the like become '_')."""
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9+-]", "_", text)).strip("_") or "trace"


def inferred_tools(calls: Iterable[tuple[str, str]], why: str) -> list[dict[str, Any]]:
    """Tool schemas inferred from (name, arguments) pairs: one property per argument key seen."""
    keys: dict[str, set[str]] = {}
    for name, arguments in calls:
        try:
            value = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            value = {}
        keys.setdefault(name, set()).update(value if isinstance(value, dict) else {})
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"(schema inferred from the calls: {why})",
                "parameters": {"type": "object", "properties": {k: {} for k in sorted(ks)}},
            },
        }
        for name, ks in keys.items()
        if name
    ]


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


def _chunks(turn: Turn) -> tuple[tuple[TimedChunk, ...], ChunkTiming]:
    n = len(turn.payloads)
    if turn.offsets is not None:
        if len(turn.offsets) != n:
            raise ImportBuildError(f"{n} payloads but {len(turn.offsets)} offsets")
        offsets = [min(max(o, 0.0), turn.latency_s) for o in turn.offsets]
        timing: ChunkTiming = turn.chunk_timing or "recorded"
    else:
        offsets = ScriptedResponse(latency_s=turn.latency_s, ttfc_s=turn.ttfc_s).offsets(n)
        timing = turn.chunk_timing or ("spread" if n > 1 else "none")
    return tuple(
        TimedChunk(offset_s=o, payload=p) for o, p in zip(offsets, turn.payloads, strict=True)
    ), timing


def build_trace(segment: Segment) -> Trace:
    """Replay one segment through the loop (virtual clock) into a trace; raises `ImportBuildError`."""
    turns = list(segment.turns)
    if not turns:
        raise ImportBuildError("no model response to import")
    last = parse_turn(turns[-1].payloads, len(turns) - 1)
    status, reason = segment.status, segment.reason
    if last.tool_calls:
        turns.append(
            Turn(
                payloads=[
                    completion({"role": "assistant", "content": CLOSING_TEXT}, response_id="closing-round")
                ],
                latency_s=0.0,
                timing=CLOSING,
                synthetic=True,
            )
        )
        if reason == "final_answer":  # the source said nothing more specific
            status, reason = (
                "incomplete",
                (
                    "recording_ends_before_tool_results"
                    if any(r.text == RESULT_NOT_RECORDED for r in turns[-2].results)
                    else "recording_ends_after_tool_results"
                ),
            )
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
        chunks, chunk_timing = _chunks(turn)
        rounds.append(
            Round(
                round_index=k,
                mode=segment.mode,
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
                        timing=r.timing,
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
            segment.mode,
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
    starts = [t.recorded_start for t in segment.turns if t.recorded_start is not None]
    ends = [t.recorded_end for t in segment.turns if t.recorded_end is not None]
    meta = TraceMetadata(
        title=segment.title,
        origin=segment.origin,
        provider=segment.provider,
        model=segment.model,
        created=segment.created,
        source=segment.source,
        notes=segment.notes,
        recorded_wall_s=round(max(ends) - min(starts), 6) if starts and ends else None,
    )
    trace = Trace.from_run(result, meta)
    error = segment.error
    if result.status != "completed" and reason == "final_answer":  # the loop ended it
        status, reason, error = result.status, result.reason, result.error
    return replace(
        trace,
        outcome=TraceOutcome(
            status=status,
            reason=reason,
            final_answer=result.final_answer if status == "completed" else None,
            error=error,
            wall_time_s=result.wall_time_s,
        ),
    )


def build_result(
    kind: str,
    source: str,
    segments: Iterable[Segment],
    *,
    source_calls: int,
    source_model_calls: int,
    issues: Iterable[Issue] = (),
) -> ImportResult:
    """Build every segment, collect the report."""
    traces: list[Trace] = []
    slugs: list[str] = []
    found = list(issues)
    taken: set[str] = set()
    imported_calls = imported_model_calls = 0
    for segment in segments:
        try:
            trace = build_trace(segment)
        except ImportBuildError as exc:
            n_calls = sum(len(t.results) for t in segment.turns)
            found.append(
                Issue(
                    kind="failed",
                    where=segment.title,
                    what=str(exc),
                    calls=n_calls,
                    model_calls=len(segment.turns),
                )
            )
            continue
        slug, n = segment.slug, 2
        while slug in taken:
            slug, n = f"{segment.slug}_{n}", n + 1
        taken.add(slug)
        traces.append(trace)
        slugs.append(slug)
        imported_calls += trace.n_calls
        imported_model_calls += sum(1 for t in segment.turns if not t.synthetic)
    report = ImportReport(
        kind=kind,
        source=source,
        source_calls=source_calls,
        imported_calls=imported_calls,
        source_model_calls=source_model_calls,
        imported_model_calls=imported_model_calls,
        traces=len(traces),
        issues=tuple(found),
    )
    accounted = sum(i.calls for i in found)
    if imported_calls + accounted != source_calls:
        report = replace(
            report,
            issues=(
                *found,
                Issue(
                    kind="failed",
                    where=source,
                    what=f"{source_calls - imported_calls - accounted} tool call(s) of the source are "
                    "neither imported nor accounted for (an importer bug: please report it)",
                ),
            ),
        )
    return ImportResult(traces=tuple(traces), slugs=tuple(slugs), report=report)

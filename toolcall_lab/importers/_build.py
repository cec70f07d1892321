"""What every importer shares: the source-neutral shape of a run, and the builder (report: `_report`).

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

Where the loop would end a run the recorded agent continued (every call of a round failed), the
segment is split there and the next model call starts a new trace holding the conversation so far:
no call is dropped. A segment whose recording stops after tool calls gets one closing round, a
placeholder marked as such (`Round.placeholder`, 0 s), and the trace's outcome says why it is
incomplete. A call whose result the source does not hold has status ``not_recorded``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from toolcall_lab.analysis import how_batch_ran
from toolcall_lab.exceptions import ToolcallLabError
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator, parse_chat_completion
from toolcall_lab.importers._report import (
    ImportReport,
    ImportResult,
    Issue,
    IssueKind,
    NotThisKind,
    SourceError,
    merge_results,
)
from toolcall_lab.messages import ParsedResponse
from toolcall_lab.models import ScriptedResponse
from toolcall_lab.records import (
    PLACEHOLDER_KEY,
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
    "NotThisKind",
    "SourceError",
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
TOLERANCE_S = 0.1
"""How far recorded timestamps may disagree (clock resolution, log write delays) before the import
calls them inconsistent."""

ResultStatus = Literal["ok", "error", "timeout", "not_recorded"]


class ImportBuildError(ToolcallLabError):
    """A segment could not be turned into a trace (the message says which and why)."""


@dataclass(slots=True)
class Result:
    """What one tool call got back, and how long it took (with where that figure comes from).

    `end` is the source's timestamp (epoch seconds) of the result, when it has one: the call is then
    placed ending there. `start_known` says whether the start is in the source too (false when it
    was inferred, e.g. "after the previous call"): only calls with both count as evidence of the
    agent's mode.
    """

    text: str
    duration_s: float
    timing: Timing
    status: ResultStatus = "ok"
    end: float | None = None
    start_known: bool = True
    where: str = ""
    """Where the call is in the source (file, line), for issues."""
    damaged: bool = False
    """For a missing result: the source goes on after it (a result lost, not a recording's end)."""
    listed: bool = True
    """For a missing result: list it as an issue (False: the importer reports the whole class once)."""

    @classmethod
    def missing(
        cls,
        where: str = "",
        *,
        damaged: bool = False,
        why: str = "",
        duration_s: float = 0.0,
        timing: Timing | None = None,
        listed: bool = True,
    ) -> Result:
        """A call whose result the source does not hold (status ``not_recorded``)."""
        return cls(
            text=RESULT_NOT_RECORDED,
            duration_s=duration_s,
            timing=timing or (Timing(source="placeholder", note=why) if why else NOT_RECORDED),
            status="not_recorded",
            where=where,
            damaged=damaged,
            listed=listed,
        )


@dataclass(slots=True)
class Turn:
    """One model response (chat chunks, or one ``chat.completion`` body) and its calls' results.

    `results` are aligned with the response's tool calls in index order (the order the loop runs
    them); `offsets` are the recorded arrival of each payload (None: spread evenly, or one body).
    `recorded_start` / `recorded_end` are source timestamps (epoch seconds) of the request and of
    the last result, used for the recorded wall time of a trace; `model_end` is when the source says
    the response was complete (with every result's `end`, the trace is placed as recorded).
    `first_token_s` is a recorded time to first token; without it and without recorded chunk
    offsets, the trace says the first chunk's time is unknown.
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
    model_end: float | None = None
    first_token_s: float | None = None
    synthetic: bool = False
    alternative: bool = False
    """Another choice of a model call already counted (``n > 1``): not counted again."""


@dataclass(slots=True)
class Segment:
    """One conversation the loop can replay: what the model was given, then its responses.

    `status`/`reason`/`error` become the trace's outcome; `slug` names its file and `title` the
    trace (segments of one slug are numbered ``part 1``, ``part 2``... only when there are several).
    `mode` None: the mode the recorded timings show (see the module notes), else as given.
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
    mode: Mode | None = None
    status: str = "completed"
    reason: str = "final_answer"
    error: str | None = None
    closing: str | None = None
    """Why no model response follows the last tool calls, when the source says (else worked out)."""


def placeholder_payload(text: str, *, why: str, response_id: str, model: str | None = None) -> dict[str, Any]:
    """A response body an importer writes where the source has none, marked so (`PLACEHOLDER_KEY`)."""
    body = completion({"role": "assistant", "content": text}, response_id=response_id, model=model)
    body[PLACEHOLDER_KEY] = why
    return body


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


def chat_body(
    parsed: ParsedResponse, *, keep_fallback_ids: bool = True, choice_index: int = 0
) -> dict[str, Any]:
    """A chat-completion body equivalent to a parsed response of any format (one choice: the first,
    or `choice_index`, as choice 0).

    With ``keep_fallback_ids=False`` calls the provider sent without an id carry none in the body, so
    parsing it again labels their ids ``fallback`` again (importers); a client-facing body (the
    proxy) keeps them, because clients must echo an id.
    """
    choice = parsed.choices[choice_index] if choice_index else parsed.first
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


def stamp_or_none(value: Any) -> float | None:
    """`epoch` of a timestamp string, or None when it is missing or not a timestamp."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return epoch(value)
    except ValueError:
        return None


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


def _all_failed(turn: Turn, batch: int = 0) -> bool:
    """Whether the loop will count every call of this turn as failed (a recorded error, or arguments
    it will not run: the loop then ends the run). A result the source does not hold is no failure."""
    if not turn.results:
        return False
    calls = parse_turn(turn.payloads, batch).tool_calls
    return all(
        r.status in ("error", "timeout")
        or (k < len(calls) and (calls[k].args is None or not calls[k].complete))
        for k, r in enumerate(turn.results)
    )


def conversation(turns: Sequence[Turn], *, first_batch: int = 0) -> list[dict[str, Any]]:
    """The messages the loop appends for these turns: each assistant message, then its results."""
    out: list[dict[str, Any]] = []
    for k, turn in enumerate(turns):
        parsed = parse_turn(turn.payloads, first_batch + k)
        out.append(parsed.first.to_message())
        for call, result in zip(parsed.tool_calls, turn.results, strict=False):
            out.append({"role": "tool", "tool_call_id": call.tool_call_id, "content": result.text})
    return out


def split_on_failed_rounds(segment: Segment) -> list[Segment]:
    """Split where every call of a round failed and the recording goes on (the loop would stop).

    The parts keep the segment's title and slug; `build_result` numbers them."""
    parts: list[Segment] = []
    current = segment
    while True:
        cut = next((k for k, t in enumerate(current.turns[:-1]) if _all_failed(t, k)), None)
        if cut is None:
            parts.append(current)
            break
        head_turns, tail_turns = current.turns[: cut + 1], current.turns[cut + 1 :]
        parts.append(
            replace(
                current,
                turns=head_turns,
                status="incomplete",
                reason="continued_in_next_part",
                error=(
                    f"every call of round {len(head_turns) - 1} failed; toolcall_lab's loop ends a run "
                    "there but the recorded agent went on: the rest is the next part"
                ),
            )
        )
        current = replace(current, initial=[*current.initial, *conversation(head_turns)], turns=tail_turns)
    return parts


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


def _known(result: Result) -> tuple[float, float] | None:
    if result.end is None or not result.start_known or result.status == "not_recorded":
        return None
    return result.end - result.duration_s, result.end


def mode_evidence(turns: Sequence[Turn]) -> tuple[Mode | None, str]:
    """What the recorded batches show: the mode (None: no batch of two or more calls has recorded
    starts and ends) and a sentence saying which batches showed what."""
    seen: dict[str, list[str]] = {"overlapped": [], "partly overlapped": [], "ran one after another": []}
    for k, turn in enumerate(turns):
        spans = [x for r in turn.results if (x := _known(r)) is not None]
        how = how_batch_ran(spans)
        if how == "not evidenced":
            continue
        seen["ran one after another" if how == "one after another" else how].append(
            f"{k} ({len(spans)} calls)"
        )
    found = [
        f"round {', '.join(v)} {key}" if len(v) == 1 else f"rounds {', '.join(v)} {key}"
        for key, v in seen.items()
        if v
    ]
    if not found:
        return None, "no batch of two or more calls has a recorded start and end: the mode is not evidenced"
    mode: Mode = "parallel" if seen["overlapped"] or seen["partly overlapped"] else "sequential"
    return mode, "calls with a recorded start and end: " + "; ".join(found)


class _Unplaced(Exception):
    """The source's timestamps contradict each other (the message says where)."""


def _place(rounds: Sequence[Round], turns: Sequence[Turn], mode: Mode) -> tuple[list[Round], str | None]:
    """The rounds placed on the source's timeline (see the module notes), or unchanged with the
    reason when the source has no timestamps for some of them; raises `_Unplaced` when they do not
    fit together."""
    real = [t for t in turns if not t.synthetic]
    if any(t.model_end is None for t in real):
        return list(rounds), "the source has no end time for some response"
    if any(r.end is None for t in real for r in t.results if r.status != "not_recorded"):
        return list(rounds), "the source has no end time for some result"
    t0 = min(
        [t.model_end - t.latency_s for t in real if t.model_end is not None]
        + [t.recorded_start for t in real if t.recorded_start is not None]
        + [r.end - r.duration_s for t in real for r in t.results if r.end is not None]
    )
    out: list[Round] = []
    done = 0.0
    for k, (rnd, turn) in enumerate(zip(rounds, turns, strict=True)):
        if turn.synthetic or turn.model_end is None:
            started = done
        else:
            started = turn.model_end - turn.latency_s - t0
            if started < done - TOLERANCE_S and out:
                previous = max(e.ended_at for e in out[-1].executions) if out[-1].executions else done
                if started < previous - TOLERANCE_S:
                    raise _Unplaced(
                        f"round {k}'s model call would start {previous - started:.3f} s before the results "
                        "it answers came in"
                    )
        ended = started + turn.latency_s
        execs = []
        for ex, res in zip(rnd.executions, turn.results, strict=True):
            if res.end is None:
                execs.append(replace(ex, started_at=ended, ended_at=ended))
                continue
            end = res.end - t0
            if end - res.duration_s < ended - TOLERANCE_S and not _inside(turn, res):
                raise _Unplaced(
                    f"round {k}: call {ex.tool_call_id} would start {ended - end + res.duration_s:.3f} s "
                    "before its response ended"
                )
            execs.append(replace(ex, started_at=end - res.duration_s, ended_at=end))
        shift = started - rnd.model_call.started_at
        mc = rnd.model_call
        out.append(
            replace(
                rnd,
                mode=mode,
                model_call=replace(
                    mc,
                    started_at=started,
                    ended_at=ended,
                    first_chunk_at=None if mc.first_chunk_at is None else mc.first_chunk_at + shift,
                ),
                executions=tuple(execs),
            )
        )
        done = max([done, ended, *(e.ended_at for e in execs)])
    return out, None


def _inside(turn: Turn, result: Result) -> bool:
    """A tool that started while its response was still streaming (the AI SDK runs a tool as soon as
    its call has streamed): the importer then ends the model's part at the tool's start."""
    return (
        turn.model_end is not None
        and result.end is not None
        and (result.end - result.duration_s >= turn.model_end - TOLERANCE_S)
    )


def _first_chunk(rnd: Round, turn: Turn) -> float | None:
    """When the first chunk came, if the source says: a recorded time to first token, or recorded
    chunk offsets; otherwise unknown (None), never the whole latency."""
    mc = rnd.model_call
    if turn.first_token_s is not None:
        return mc.started_at + turn.first_token_s
    if mc.chunk_timing == "recorded" and mc.chunks:
        return mc.started_at + mc.chunks[0].offset_s
    return None


def build_trace(segment: Segment, issues: list[Issue] | None = None) -> Trace:
    """Replay one segment through the loop (virtual clock) into a trace; raises `ImportBuildError`.

    Issues found on the way (chunk times that do not fit, timestamps that do not fit together) are
    appended to `issues`."""
    found: list[Issue] = [] if issues is None else issues
    turns = list(segment.turns)
    if not turns:
        raise ImportBuildError("no model response to import")
    last = parse_turn(turns[-1].payloads, len(turns) - 1)
    status, reason, error = segment.status, segment.reason, segment.error
    if last.tool_calls and not _all_failed(turns[-1], len(turns) - 1):  # (then the loop stops itself)
        closing, why = _closing(turns, reason, segment.closing)
        turns.append(closing)
        if reason == "final_answer":  # the source said nothing more specific
            status, reason = "incomplete", why
    evidenced, evidence = mode_evidence(turns)
    mode: Mode = segment.mode or evidenced or "sequential"
    rounds = []
    for k, turn in enumerate(turns):
        parsed = parse_turn(turn.payloads, k)
        calls = parsed.tool_calls
        if calls and k == len(turns) - 1 and not _all_failed(turn, k):
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
        result = replay(draft, mode, check="off", max_rounds=tool_rounds + 1, dedupe=False)
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
        placed, not_placed = _place(result.rounds, turns, mode)
    except _Unplaced as exc:
        placed, not_placed = list(result.rounds), f"the source's timestamps do not fit together: {exc}"
        found.append(
            Issue(
                kind="damaged",
                where=segment.title,
                what=f"{not_placed}; the rounds are placed as the loop schedules them, not as recorded",
            )
        )
    placed = [
        replace(r, model_call=replace(r.model_call, first_chunk_at=_first_chunk(r, t)))
        for r, t in zip(placed, turns, strict=True)
    ]
    wall = max([r.ended_at for r in placed], default=0.0)
    starts = [t.recorded_start for t in segment.turns if t.recorded_start is not None]
    ends = [t.recorded_end for t in segment.turns if t.recorded_end is not None]
    recorded_wall = round(max(ends) - min(starts), 6) if starts and ends else None
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
    mode_note = (
        f"mode {mode}: {evidence}"
        if segment.mode is None
        else f"mode {mode} (as the source's agent runs calls); {evidence}"
    )
    meta = TraceMetadata(
        title=segment.title,
        origin=segment.origin,
        provider=segment.provider,
        model=segment.model,
        created=segment.created,
        source=segment.source,
        notes=f"{segment.notes}; {mode_note}; {placement}",
        recorded_wall_s=recorded_wall,
    )
    trace = Trace.from_run(result, meta)
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


def _missing_issues(trace: Trace, segment: Segment) -> tuple[int, list[Issue]]:
    """How many calls of the trace have no result in the source, and the issues listing them."""
    out = []
    count = 0
    turns = [t for t in segment.turns if not t.synthetic]
    for k, turn in enumerate(turns):
        for r, call in zip(turn.results, trace.rounds[k].tool_calls, strict=False):
            if r.status != "not_recorded":
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


def _build_isolating(part: Segment, found: list[Issue]) -> list[tuple[Segment, Trace]]:
    """Build `part`; when it cannot be built, find the first round that cannot and lose only that
    round: the rounds before it and after it become traces of their own (``before round k``,
    ``after round k``)."""
    try:
        return [(part, build_trace(part, found))]
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
        out += _build_isolating(named, found)
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
) -> ImportResult:
    """Build every segment (splitting where the loop would stop), number the parts, collect the report."""
    found = list(issues)
    parts = [part for segment in segments for part in split_on_failed_rounds(segment)]
    per_slug: dict[str, int] = {}
    for part in parts:
        per_slug[part.slug] = per_slug.get(part.slug, 0) + 1
    numbered: dict[str, int] = {}
    traces: list[Trace] = []
    slugs: list[str] = []
    taken: set[str] = set()
    imported_calls = imported_model_calls = missing = 0
    for part in parts:
        total = per_slug[part.slug]
        if total > 1:
            n = numbered[part.slug] = numbered.get(part.slug, 0) + 1
            width = len(str(total))
            part = replace(part, title=f"{part.title} (part {n})", slug=f"{part.slug}_part{n:0{width}d}")
        for piece, trace in _build_isolating(part, found):
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

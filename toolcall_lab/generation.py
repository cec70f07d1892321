"""A stated generation-speed model: responses re-timed as if streamed at a given speed, and that speed
measured from recordings whose chunks were timed.

What eager execution saves depends on when each call's arguments are complete in the stream. Traces
recorded without streaming (BFCL's expected calls, whole response bodies) say nothing about that;
`as_streamed` rebuilds each response as chat-completion chunks (its text, then each call's header
and arguments in pieces of a few tokens) arriving at ``ttft_s + tokens so far / tokens_per_s``. The
model calls are then labelled ``estimated`` with that formula in their note, and their chunk offsets
``estimated``, so no table takes them for measurements. `measured_speed` reads a speed from traces
whose chunk offsets were recorded (Claude Code writes one log line per content block as it finishes:
the tokens of a block over the time since the previous block's line).
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolcall_lab.exceptions import UsageError
from toolcall_lab.records import (
    NOT_BATCH_EVIDENCE,
    ClientRoundTrip,
    ModelCall,
    Round,
    TimedChunk,
    Timing,
    ToolExecution,
)
from toolcall_lab.trace import Trace

Counter = Callable[[str], int]


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationSpeed:
    """How fast a model streams: the first token after `ttft_s`, then `tokens_per_s`; `source` says
    where the figures came from (it goes into every note)."""

    tokens_per_s: float
    ttft_s: float
    source: str = "stated"

    def __post_init__(self) -> None:
        if not self.tokens_per_s > 0:
            raise UsageError(f"GenerationSpeed.tokens_per_s={self.tokens_per_s!r}: must be > 0")
        if not self.ttft_s >= 0:
            raise UsageError(f"GenerationSpeed.ttft_s={self.ttft_s!r}: must be >= 0 seconds")

    @property
    def formula(self) -> str:
        rate = f"{self.tokens_per_s:.1f} tokens/s"
        return f"{self.ttft_s:g} s to the first token + tokens / {rate} ({self.source})"


@functools.cache
def _counter() -> tuple[str, Counter]:
    """The offline tokenizer (loaded once: loading a vocabulary takes a while)."""
    from toolcall_lab.compression import token_counter

    return token_counter()


def chunk_text(payload: dict[str, Any]) -> str:
    """What a chat-completion chunk carries that the model generated: text, reasoning, call names
    and argument pieces."""
    choices = payload.get("choices") or []
    delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
    if not isinstance(delta, dict):
        return ""
    out = [str(delta.get("content") or ""), str(delta.get("reasoning_content") or "")]
    for call in delta.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            out += [str(fn.get("name") or ""), str(fn.get("arguments") or "")]
    return "".join(out)


def measured_speed(
    traces: Iterable[Trace], *, min_gap_s: float = 0.05, min_tokens: int = 5, count: Counter | None = None
) -> GenerationSpeed:
    """The median generation speed between consecutive chunks of responses whose chunk offsets were
    ``recorded``: the tokens of a chunk over the seconds since the previous chunk (pairs closer than
    `min_gap_s` or carrying fewer than `min_tokens` are left out: lines written together). The time
    to the first token is the median of each response's first offset less its first chunk's
    tokens at that speed. Tokens are counted with an offline tokenizer (its name is in ``source``)."""
    label, count_tokens = _counter() if count is None else ("given counter", count)
    rates: list[float] = []
    firsts: list[tuple[float, int]] = []
    for trace in traces:
        for r in trace.rounds:
            mc = r.model_call
            if mc.chunk_timing != "recorded" or not mc.chunks or r.placeholder is not None:
                continue  # (an importer's marker is no response: its chunks say nothing of a speed)
            firsts.append((mc.chunks[0].offset_s, count_tokens(chunk_text(mc.chunks[0].payload))))
            for a, b in zip(mc.chunks, mc.chunks[1:], strict=False):
                gap = b.offset_s - a.offset_s
                n = count_tokens(chunk_text(b.payload))
                if gap >= min_gap_s and n >= min_tokens:
                    rates.append(n / gap)
    if not rates:
        raise UsageError("measured_speed: no response with recorded chunk offsets far enough apart")
    rate = statistics.median(rates)
    ttft = max(0.0, statistics.median(offset - n / rate for offset, n in firsts))
    return GenerationSpeed(
        tokens_per_s=rate,
        ttft_s=round(ttft, 3),
        source=f"median of {len(rates)} chunk gaps in {len(firsts)} recorded responses, tokens by {label}",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DurationPool:
    """Tool durations recorded at their source, to draw from (``as_streamed(tool_s=pool.durations)``),
    and what was left out of them and why (`recorded_tool_durations`)."""

    durations: tuple[float, ...]
    upper_bounds: int
    """How many of `durations` run from an assumed start (the source gives the call's end, not its
    start: Claude Code's log), so they hold the harness's scheduling and any wait for the user's
    permission too: upper bounds of the tool's run."""
    sub_agent_calls: int
    """Calls left out whose duration is a sub-agent's whole run (Claude Code's ``Task``)."""
    never_ran: int
    """Calls left out that never ran (refused input, declined at a permission prompt): a wait, no run."""

    def describe(self) -> str:
        """The pool in words, for a label: what it holds and what it leaves out."""
        return (
            f"{len(self.durations)} recorded tool executions ({self.upper_bounds} of them from an assumed "
            "start, so their harness's scheduling and any permission wait are in them: upper bounds); left "
            f"out: {self.sub_agent_calls} sub-agent call(s) (a whole agent run each), {self.never_ran} "
            "call(s) that never ran (a wait, no run)"
        )


def recorded_tool_durations(traces: Iterable[Trace]) -> DurationPool:
    """The durations of tool executions recorded in `traces` (status ``ok`` or ``error``, ``recorded``
    timing), for a stated tool model that draws from them.

    Left out: a call whose duration is a sub-agent's whole run (its sub-agent's trace is among `traces`:
    `toolcall_lab.analysis.sub_agent_of`; give the sub-agents' traces too, as an import of a session
    does), and a call that never ran (its record says no tool ran: the time was a wait). Kept, and
    counted in `DurationPool.upper_bounds`: calls whose start the source does not give (timed from the
    end of their response)."""
    from toolcall_lab.analysis import sub_agent_of

    items = list(traces)
    nested = {cid for t in items if (cid := sub_agent_of(t)) is not None}
    kept: list[float] = []
    bounds = sub_agents = waits = 0
    for t in items:
        for r in t.rounds:
            for e in r.executions:
                if e.status not in ("ok", "error") or e.timing.source != "recorded":
                    continue
                covers = _covers(e)
                if e.tool_call_id in nested:
                    sub_agents += 1
                elif covers == "wait":
                    waits += 1
                else:
                    kept.append(e.duration_s)
                    bounds += covers == "upper_bound"
    return DurationPool(
        durations=tuple(kept), upper_bounds=bounds, sub_agent_calls=sub_agents, never_ran=waits
    )


def _covers(e: ToolExecution) -> str:
    """What a tool execution's duration covers: ``execution`` (the run), ``upper_bound`` (from an assumed
    start), ``wait`` (no tool ran). Read from its timing's ``covers`` when that says other than
    ``execution`` (the default, also what a file from before ``covers`` existed loads as), else from the
    importer's notes (``no tool ran``; the mark of a start it assumed)."""
    said = e.timing.covers
    if said != "execution":
        return said
    if "no tool ran" in e.timing.note:
        return "wait"
    return "upper_bound" if NOT_BATCH_EVIDENCE in e.timing.note else "execution"


def _pieces(text: str, tokens: int, per_chunk: int) -> list[tuple[str, int]]:
    """`text` cut into pieces of about `per_chunk` tokens (by characters), with each piece's tokens."""
    if not text:
        return []
    n = max(1, math.ceil(tokens / per_chunk))
    size = math.ceil(len(text) / n)
    cuts = [text[i : i + size] for i in range(0, len(text), size)]
    share = [tokens * len(c) / len(text) for c in cuts]
    return list(zip(cuts, [max(1, round(s)) for s in share], strict=True))


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def streamed_response(
    message: dict[str, Any], speed: GenerationSpeed, *, per_chunk: int = 8, count: Counter | None = None
) -> tuple[list[TimedChunk], float]:
    """An assistant message as timed chat-completion chunks at `speed`, and the latency (last offset)."""
    count_tokens = count or _counter()[1]
    steps: list[tuple[dict[str, Any], int]] = [({"role": "assistant", "content": ""}, 0)]
    for text, n in _pieces(
        str(message.get("content") or ""), count_tokens(str(message.get("content") or "")), per_chunk
    ):
        steps.append(({"content": text}, n))
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call.get("function") or {}
        name, arguments = str(fn.get("name") or ""), str(fn.get("arguments") or "")
        head = {
            "index": i,
            "id": call.get("id"),
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        steps.append(({"tool_calls": [head]}, max(1, count_tokens(name))))
        for text, n in _pieces(arguments, count_tokens(arguments), per_chunk):
            steps.append(({"tool_calls": [{"index": i, "function": {"arguments": text}}]}, n))
    chunks, tokens = [], 0
    for delta, n in steps:
        tokens += n
        chunks.append(TimedChunk(offset_s=speed.ttft_s + tokens / speed.tokens_per_s, payload=_chunk(delta)))
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    latency = chunks[-1].offset_s
    chunks.append(TimedChunk(offset_s=latency, payload=_chunk({}, finish)))
    return chunks, latency


def as_streamed(
    trace: Trace,
    speed: GenerationSpeed,
    *,
    tool_s: float | Sequence[float] | None = None,
    durations_from: str = "",
    seed: int = 0,
    per_chunk: int = 8,
    count: Counter | None = None,
) -> Trace:
    """`trace` with every response re-timed as streamed at `speed` (see the module docstring).

    `tool_s`: every call that ran, or whose duration the trace does not know (``not_recorded``: BFCL
    executes no tools), takes that long instead (a stated constant), or a duration drawn
    (seeded by `seed` and the trace's title) from a list of durations, e.g. tool durations recorded
    elsewhere (`durations_from` says where, for the label; `recorded_tool_durations` picks them from
    recordings); None keeps the trace's durations.

    The result is a timeline of its own, as consistent as a recording (it loads, and `load`'s checks
    hold): each round starts when the previous one ended (the source's gaps between rounds, which no
    replay reproduces, are dropped), its response takes the re-timed latency, and its calls follow
    the response: with their own durations, each keeps its delay after the end of its response (a call
    that started while the recorded model streamed starts no earlier than the re-timed response);
    with stated or drawn durations, they run one after another in model order from the response's
    end (a layout, not a claim about a strategy: replays re-time calls under their own strategy).
    The source's wall figures describe another timeline: ``outcome.wall_time_s`` is this one's end
    (a recorded run's tail after its last round, e.g. a model call that failed, is kept), and
    ``metadata.recorded_wall_s`` is dropped (the notes say what it was).
    """
    label, count_tokens = _counter() if count is None else ("given counter", count)
    timing = Timing(
        source="estimated", note=f"streamed at a stated speed: {speed.formula}; tokens by {label}"
    )
    draw: Callable[[], float] | None = None
    if isinstance(tool_s, bool):
        raise UsageError(f"as_streamed(tool_s={tool_s!r}): give seconds, a list of durations, or None")
    if isinstance(tool_s, int | float):
        constant = float(tool_s)
        if not (math.isfinite(constant) and constant >= 0):
            raise UsageError(f"as_streamed(tool_s={tool_s!r}): a duration is a finite number of seconds >= 0")
        draw, what = (lambda: constant), f"every call assumed to take {constant} s"
    elif tool_s is not None:
        pool = [float(d) for d in tool_s]
        if not pool:
            raise UsageError("as_streamed(tool_s=[]): give durations to draw from")
        bad = [d for d in pool if not (math.isfinite(d) and d >= 0)]
        if bad:
            raise UsageError(f"as_streamed(tool_s=[...]): {bad[0]!r} is not a duration (finite seconds >= 0)")
        rng = random.Random(f"{seed}:{trace.metadata.title}")
        draw = lambda: rng.choice(pool)  # noqa: E731
        what = (
            f"each call's duration drawn (seed {seed}) from {len(pool)} durations {durations_from}".rstrip()
        )
    else:
        what = ""
    tool_timing = Timing(source="placeholder", note=what)
    rounds: list[Round] = []
    shifts: dict[int, float] = {}
    markers = 0
    at = 0.0  # where the next round starts on the new timeline
    source_end = 0.0  # where the source's rounds ended
    for r in trace.rounds:
        old = r.model_call
        source_end = max(source_end, r.ended_at, *(t.ended_at for t in r.round_trips))
        if r.placeholder is not None:  # an importer's marker, not a model response: never a timed turn
            markers += 1
            call = _shifted_call(old, at - old.started_at)
        else:
            chunks, latency = streamed_response(
                r.assistant_message, speed, per_chunk=per_chunk, count=count_tokens
            )
            call = ModelCall(
                started_at=at,
                ended_at=at + latency,
                first_chunk_at=at + chunks[0].offset_s,
                chunks=tuple(chunks),
                tools_offered=old.tools_offered,
                usage=old.usage,
                timing=timing,
                chunk_timing="estimated",
            )
        shifts[r.round_index] = call.started_at - old.started_at
        if draw is not None:
            executions = _one_after_another(r.executions, call.ended_at, draw, tool_timing)
            trips: tuple[ClientRoundTrip, ...] = ()
        else:
            executions, trips = _after_response(r, call)
        moved = replace(r, model_call=call, executions=executions, round_trips=trips)
        rounds.append(moved)
        at = max([moved.ended_at, *(t.ended_at for t in trips)])
    tail = max(0.0, trace.outcome.wall_time_s - source_end)
    outcome = replace(
        trace.outcome,
        wall_time_s=at + tail,
        hook_failures=tuple(
            replace(f, at=max(0.0, f.at + shifts[f.round_index]))
            if f.round_index is not None and f.round_index in shifts
            else f
            for f in trace.outcome.hook_failures
        ),
    )
    kept = (
        f" ({markers} placeholder round(s) an importer wrote where the recording holds no response are "
        "kept as markers, 0 s: no final turn is invented)"
        if markers
        else ""
    )
    layout = (
        "calls laid out one after another from each response's end"
        if draw is not None
        else "calls keep their delay after their response's end"
    )
    wall = trace.metadata.recorded_wall_s
    dropped = (
        f"; the source's recorded wall time ({wall} s) describes the source's timeline, not this one: dropped"
        if wall is not None
        else ""
    )
    meta = replace(
        trace.metadata,
        recorded_wall_s=None,
        notes=f"{trace.metadata.notes}; responses re-timed: {speed.formula}{kept}; each round starts when "
        f"the previous one ended, {layout}{dropped}".lstrip("; "),
    )
    return replace(trace, rounds=tuple(rounds), metadata=meta, outcome=outcome)


def _shifted_call(call: ModelCall, by: float) -> ModelCall:
    """`call` moved by `by` seconds on the run's timeline (its chunk offsets are from its request)."""
    first = call.first_chunk_at
    return replace(
        call,
        started_at=call.started_at + by,
        ended_at=call.ended_at + by,
        first_chunk_at=None if first is None else first + by,
    )


def _one_after_another(
    executions: Sequence[ToolExecution], start: float, draw: Callable[[], float], timing: Timing
) -> tuple[ToolExecution, ...]:
    """The calls in model order, each from the previous one's end (the first from `start`): a call
    that ran, or whose duration is unknown, takes a duration from `draw`; any other keeps its own."""
    out = []
    at = start
    for e in executions:
        took = draw() if e.status in _TIMED else e.duration_s
        out.append(
            replace(
                e,
                started_at=at,
                ended_at=at + took,
                queued_at=None,
                returned_at=None,
                timing=timing if e.status in _TIMED else e.timing,
            )
        )
        if e.status != "skipped":
            at += took
    return tuple(out)


_TIMED = frozenset({"ok", "error", "timeout", "withheld", "not_recorded"})
"""Statuses of calls that ran, or whose run the source does not know: a stated duration replaces theirs."""


def _after_response(
    r: Round, call: ModelCall
) -> tuple[tuple[ToolExecution, ...], tuple[ClientRoundTrip, ...]]:
    """The round's calls and round trips with their own durations, each keeping its delay after the end
    of its response, and never starting before the re-timed response started."""
    by = call.ended_at - r.model_call.ended_at
    floor = call.started_at

    def start(t: float) -> float:
        return max(floor, t + by)

    executions = []
    for e in r.executions:
        began = start(e.started_at)
        ended = began + e.duration_s
        executions.append(
            replace(
                e,
                started_at=began,
                ended_at=ended,
                queued_at=None if e.queued_at is None else min(start(e.queued_at), began),
                returned_at=None if e.returned_at is None else ended + (e.returned_at - e.ended_at),
            )
        )
    trips = []
    for t in r.round_trips:
        began = start(t.started_at)
        trips.append(replace(t, started_at=began, ended_at=began + t.duration_s))
    return tuple(executions), tuple(trips)

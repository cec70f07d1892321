"""Compare execution modes and strategies on traces: tidy tables, critical-path bounds (also the
eager bound: tools overlapping the model's stream), missed parallelism.

The per-trace work (`trace_rows`) returns plain dicts so it can run in any `concurrent.futures`
executor (processes, or a Dask/Ray executor for corpora beyond one machine); `compare` turns the
rows into pandas DataFrames (pandas is imported only here, lazily). Every table names a trace's
rows by a key of its own (`trace_keys`: its title or path, with `` #1``, `` #2``, ... where several
share one), so two traces' rows never mix.

Every run row says what its times rest on (``timing_evidence``: the weakest label among the
durations that add up to it, ``measured_share``: the share of those seconds that was recorded or
reported by a server, ``rests_on_estimates``), and `compare(..., timings="recorded")` keeps only
traces whose every duration was recorded. Per-mode summaries cover the same traces in every mode
(a trace that could not be replayed in one mode is left out of all, and counted). A run that skipped
calls (``first_only``, or any strategy with ``skips_calls``) did less work, and a replay of a run that
was cut off (deadline, abort) ends at the cut in every mode: such rows are marked ``comparable=False``
(``not_comparable_why`` says why) and summaries leave them out of speedups. A strategy that failed
(``strategy_error``) has no row in ``runs``: it is in ``errors``. Missed parallelism rests on
dependency evidence (`toolcall_lab.dependencies`): only rounds every pair of which is
``likely_independent`` count, and the figure is an upper bound.

Any strategy can be compared (a built-in name, ``module:attribute``, or a strategy object: the
``mode`` column shows its name; ``cap``, ``tool_limits`` and ``streams`` what it ran under, and under
a run-level ``concurrency`` plain ``parallel`` / ``eager`` are named ``parallel[cap=N]``). Per trace,
``eager_bound_s`` is the wall time if every call started the moment its arguments were complete in
the recorded stream and all calls overlapped (of equal calls, the first to complete runs, as under
eager), and
``eager_saving_bound_s`` what that saves over ``lower_bound_s`` (calls starting at the stream's end);
``chunk_timing`` says what the completion times rest on (``none``: no chunk timing, the two bounds are
equal and ``eager`` runs as ``parallel``). Per run, ``stream_overlap_s`` is the tool time that ran while
the model was still streaming, and ``strategy_notes`` counts what the strategy noted (e.g. ``eager``
falling back to parallel), the texts being in the rounds table; `stream_evidence` says in words what a
streaming strategy's figures rest on (``summary_text`` adds it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from toolcall_lab._execution import dedupe_key
from toolcall_lab._rules import check_concurrency, check_round_trip
from toolcall_lab.dependencies import RoundPair, dependency_evidence, independent_groups
from toolcall_lab.exceptions import ReplayDivergenceError, TraceError, TraceFormatError, UsageError
from toolcall_lab.records import (
    MODES,
    NOT_BATCH_EVIDENCE,
    TIMING_SOURCES,
    Round,
    Timing,
    TimingCovers,
    TimingSource,
)
from toolcall_lab.replay import check_recorded_settings, recorded_cut, replay
from toolcall_lab.runs import RunResult
from toolcall_lab.strategies import Serialized, StrategySpec, capped, resolve
from toolcall_lab.strategies._completion import completion_offsets, no_argument_tools
from toolcall_lab.strategies.base import strategy_name
from toolcall_lab.trace import Trace

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_ROUND_TRIP_S = 0.05
"""Client<->proxy round trip assumed for serialized mode unless given."""


def critical_path_s(trace: Trace) -> float:
    """Lower bound: per round, model latency plus the slowest call of its batch (all calls overlap)."""
    total = 0.0
    for r in trace.rounds:
        slowest = max((e.duration_s for e in r.executions if e.status != "skipped"), default=0.0)
        total += r.model_call.latency_s + slowest
    return total


OVERLAP_S = 0.002
"""How far apart one call's start and another's end must be for their order to be told: logs stamp to
the millisecond and durations come in whole milliseconds, so each start and end is uncertain by
about a millisecond; within this margin two calls may have overlapped or not."""
BatchRun = Literal["overlapped", "partly overlapped", "one after another", "cannot tell", "not evidenced"]


def how_batch_ran(spans: Iterable[tuple[float, float]]) -> BatchRun:
    """How calls of one batch ran, from their (start, end) where both are known: each call (in start
    order) overlapped the ones before it, or started after they had all ended, or started within
    `OVERLAP_S` of that, where the timestamps cannot tell. ``overlapped``: every one overlapped;
    ``partly overlapped``: some did; ``one after another``: none did and each is clearly after;
    ``cannot tell``: none clearly overlapped and some are within the margin; ``not evidenced``:
    fewer than two."""
    known = sorted(spans)
    if len(known) < 2:
        return "not evidenced"
    latest, overlapping, unsure = known[0][1], 0, 0
    for start, end in known[1:]:
        if start < latest - OVERLAP_S:
            overlapping += 1
        elif start <= latest + OVERLAP_S:
            unsure += 1
        latest = max(latest, end)
    if overlapping == len(known) - 1:
        return "overlapped"
    if overlapping:
        return "partly overlapped"
    return "cannot tell" if unsure else "one after another"


_DID_NOT_RUN = frozenset(
    {"not_recorded", "skipped", "duplicate", "rejected", "unknown_tool", "invalid_arguments"}
)


def recorded_batch(r: Round) -> BatchRun:
    """How a recorded round's calls ran, from the calls that really ran and whose start and end the
    source gives (``recorded`` timing, a result recorded, no start an importer assumed, no call the
    harness refused before it ran: `NOT_BATCH_EVIDENCE`): evidence of the agent's mode, or ``not
    evidenced``."""
    return how_batch_ran(
        (e.started_at, e.ended_at)
        for e in r.executions
        if e.timing.source == "recorded"
        and e.status not in _DID_NOT_RUN
        and NOT_BATCH_EVIDENCE not in e.timing.note
    )


def _tool_phase(r: Round) -> float:
    """Time from the end of the model's stream to the end of the round's last call (0 when every
    call finished while the model was still streaming)."""
    ran = [e for e in r.executions if e.status != "skipped"]
    if not ran:
        return 0.0
    return max(0.0, max(e.ended_at for e in ran) - r.model_call.ended_at)


def _stream_overlap(r: Round) -> float:
    """Tool time that ran while the model was still streaming (the union of the calls' intervals
    within the model call)."""
    mc = r.model_call
    spans = sorted(
        (max(e.started_at, mc.started_at), min(e.ended_at, mc.ended_at))
        for e in r.executions
        if e.status != "skipped" and e.started_at < mc.ended_at
    )
    total, reach = 0.0, mc.started_at
    for t0, t1 in spans:
        t0 = max(t0, reach)
        if t1 > t0:
            total += t1 - t0
            reach = t1
    return total


def eager_bound_s(trace: Trace) -> float:
    """Lower bound with eager execution: per round, the later of the stream's end and, for each call
    eager runs, the time its arguments were complete in the recorded stream plus its recorded
    duration (every call starts the moment it can, all overlap, no cap). With no chunk timing
    (``none``) every call completes at the stream's end, and the bound equals `critical_path_s`.

    It follows eager's own decisions: of equal calls (same tool and arguments, when the trace's run
    de-duplicated), eager runs the first to *complete* and answers the others as its duplicates,
    whichever of them the recording ran (a recording made under another strategy ran the first in
    model order): the group costs its earliest completion plus the duration the recording gives it."""
    no_arguments = no_argument_tools(trace.tools)
    dedupe = trace.metadata.settings.get("dedupe", True) is not False
    return sum(_eager_round_s(r, no_arguments, dedupe) for r in trace.rounds)


def _eager_round_s(r: Round, no_arguments: frozenset[str], dedupe: bool = True) -> float:
    """One round's part of `eager_bound_s`."""
    mc = r.model_call
    latency = mc.latency_s
    pairs = [(c, e) for c, e in zip(r.tool_calls, r.executions, strict=False) if e.status != "skipped"]
    if len(r.tool_calls) != len(r.executions) or mc.chunk_timing == "none":
        offsets: dict[int, float] = {}
    else:
        offsets = completion_offsets(mc.chunks, latency, no_arguments)
    groups: dict[str, tuple[float, float]] = {}  # equal calls: (earliest completion, duration)
    end = latency
    for call, ex in pairs:
        done = min(offsets.get(call.index, latency), latency)
        key = dedupe_key(call) if dedupe else None
        if key is None:
            end = max(end, done + ex.duration_s)
        else:
            first, took = groups.get(key, (done, 0.0))
            groups[key] = (min(first, done), max(took, ex.duration_s))
    for done, took in groups.values():
        end = max(end, done + took)
    return end


NOISE_S = 1e-9
"""A difference of recorded times below this is float noise, not time (no source records finer than a
nanosecond): a saving that small is 0."""


def eager_saving_bound_s(trace: Trace) -> float:
    """What eager execution would save at most over `critical_path_s`: per round, the bound's round
    minus eager's, summed (a round where the last call completes at the stream's end saves exactly 0,
    not the float noise of subtracting two sums, such as ``2.8e-14``)."""
    total = 0.0
    no_arguments = no_argument_tools(trace.tools)
    dedupe = trace.metadata.settings.get("dedupe", True) is not False
    for r in trace.rounds:
        slowest = max((e.duration_s for e in r.executions if e.status != "skipped"), default=0.0)
        saving = r.model_call.latency_s + slowest - _eager_round_s(r, no_arguments, dedupe)
        if saving >= NOISE_S:
            total += saving
    return total


def stream_timing(trace: Trace) -> str:
    """What the completion times of a trace's calls rest on: the chunk timing of its tool rounds
    (``recorded``, ``spread`` or ``none``), or ``mixed (...)`` when they differ."""
    kinds = sorted({r.model_call.chunk_timing for r in trace.rounds if r.tool_calls})
    if not kinds:
        return "none"
    return kinds[0] if len(kinds) == 1 else f"mixed ({', '.join(kinds)})"


@dataclass(frozen=True, slots=True, kw_only=True)
class MissedParallelism:
    """Consecutive tool rounds with no evidence of using each other: one batch might have done.

    ``saved_upper_bound_s`` is what merging them would save at most: the evidence shows no data flow
    and no reference between the rounds (every pair ``likely_independent``), but the model still saw
    the earlier results before it chose the later calls.
    """

    first_round: int
    last_round: int
    saved_upper_bound_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "first_round": self.first_round,
            "last_round": self.last_round,
            "saved_upper_bound_s": self.saved_upper_bound_s,
        }


def missed_parallelism(trace: Trace, pairs: Sequence[RoundPair] | None = None) -> list[MissedParallelism]:
    """Groups of consecutive tool rounds whose every pair is ``likely_independent``, and an upper bound
    of the time one batch would have saved: the model calls of the later rounds, plus the sum of the
    rounds' slowest calls minus the slowest of all (they would have overlapped)."""
    out = []
    for group in independent_groups(trace, pairs if pairs is not None else dependency_evidence(trace)):
        slowest = [max((e.duration_s for e in r.executions if e.answered), default=0.0) for r in group]
        saved = sum(r.model_call.latency_s for r in group[1:]) + sum(slowest) - max(slowest)
        out.append(
            MissedParallelism(
                first_round=group[0].round_index, last_round=group[-1].round_index, saved_upper_bound_s=saved
            )
        )
    return out


TimingFilter = Literal["any", "measured", "recorded"]
TIMING_FILTERS: dict[str, frozenset[TimingSource]] = {
    "any": frozenset(TIMING_SOURCES),
    "measured": frozenset({"recorded", "reported"}),
    "recorded": frozenset({"recorded"}),
}
_STRENGTH = {source: rank for rank, source in enumerate(TIMING_SOURCES)}


def timing_seconds(rounds: Iterable[Round]) -> dict[TimingSource, float]:
    """Seconds of model latency and tool time per timing label (what a wall time adds up from)."""
    out: dict[TimingSource, float] = {}
    for r in rounds:
        mc = r.model_call
        out[mc.timing.source] = out.get(mc.timing.source, 0.0) + mc.latency_s
        for e in r.executions:
            if e.answered:
                out[e.timing.source] = out.get(e.timing.source, 0.0) + e.duration_s
    return out


_COVERS_WORDS = {"upper_bound": "an upper bound", "wait": "a wait, no tool ran"}


def _timed(rounds: Iterable[Round]) -> Iterable[tuple[Timing, float]]:
    """Every duration a wall time adds up from (model latencies, answered calls) with its label."""
    for r in rounds:
        yield r.model_call.timing, r.model_call.latency_s
        for e in r.executions:
            if e.answered:
                yield e.timing, e.duration_s


def not_execution_seconds(rounds: Iterable[Round]) -> dict[TimingCovers, float]:
    """Seconds recorded or reported at the source that are not the time of the thing itself, by what
    they cover (`Timing.covers`: a wait at a permission prompt, an upper bound such as a start an
    importer assumed): real time, but not measured tool or model time."""
    out: dict[TimingCovers, float] = {}
    for t, seconds in _timed(rounds):
        if t.source in ("recorded", "reported") and t.covers != "execution" and seconds > 0:
            out[t.covers] = out.get(t.covers, 0.0) + seconds
    return out


def unknown_durations(rounds: Sequence[Round]) -> dict[TimingSource, int]:
    """Durations set to 0 s for want of a figure (estimated or placeholder), anywhere in the run:
    something may have taken time there that no number accounts for (a call whose result the source
    does not hold, a response it did not time). A round an importer wrote where the source holds no
    response (`Round.placeholder`, e.g. a recording's closing round) is a marker, not a duration: its
    0 s model call is left out (the run's status says the recording is incomplete)."""
    out: dict[TimingSource, int] = {}
    for r in rounds:
        items = [r.model_call.timing] if r.model_call.latency_s == 0 and r.placeholder is None else []
        items += [e.timing for e in r.executions if e.answered and e.duration_s == 0]
        for t in items:
            if t.source in ("estimated", "placeholder"):
                out[t.source] = out.get(t.source, 0) + 1
    return out


def timing_columns(
    seconds: dict[TimingSource, float],
    extra_placeholder_s: float = 0.0,
    unknown: dict[TimingSource, int] | None = None,
    not_execution: dict[TimingCovers, float] | None = None,
) -> dict[str, Any]:
    """``timing_evidence`` (weakest label carrying time, or standing for an unknown duration),
    ``measured_share`` (of the seconds: recorded or reported, and the time of the thing itself),
    ``not_execution_s`` (recorded or reported seconds that are a wait or an upper bound, not the
    thing itself: `not_execution_seconds`), ``rests_on_estimates``."""
    seconds = dict(seconds)
    if extra_placeholder_s:
        seconds["placeholder"] = seconds.get("placeholder", 0.0) + extra_placeholder_s
    carrying = {s for s, v in seconds.items() if v > 0} | set(unknown or {})
    total = sum(seconds.values())
    bounds = sum((not_execution or {}).values())
    measured = seconds.get("recorded", 0.0) + seconds.get("reported", 0.0) - bounds
    return {
        "timing_evidence": max(carrying, key=_STRENGTH.__getitem__) if carrying else "none",
        "measured_share": measured / total if total else 1.0,
        "not_execution_s": bounds,
        "rests_on_estimates": bool(carrying & {"estimated", "placeholder"}),
    }


ASSUMED = "assumed timings"
"""How a speedup resting on assumed numbers is marked wherever one is shown (`speedup_caveat`)."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:  # NaN
        return None
    return float(value)


def speedup_caveat(row: Any) -> str | None:
    """``"assumed timings"`` when a run's speedup over sequential rests entirely or mostly on
    estimated or placeholder numbers, else None (a row of `Comparison.runs`, or a view's row).

    Seconds-weighted shares hide it (a 0.1 s placeholder tool saving 0.1 s beside 1.8 s of recorded
    model time is "<1 %"), so the test is on the saving itself: the speedup rests on assumed numbers
    when the time it saves (or loses; none at all for a 1.00x) is no more than the run's estimated or
    placeholder seconds
    (``(1 - measured_share)`` of its model, tool and round-trip seconds), or when it overlaps tools
    with a stream whose chunk offsets were spread or estimated (``stream_overlap_s`` on
    ``chunk_timing`` ``spread``/``estimated``)."""
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    speed, wall = _number(get("speedup_vs_sequential")), _number(get("wall_time_s"))
    if speed is None or wall is None or get("mode") == "sequential":  # (sequential: 1.00x by definition)
        return None
    overlap = _number(get("stream_overlap_s")) or 0.0
    if overlap > 0 and str(get("chunk_timing") or "") in ("spread", "estimated"):
        return ASSUMED
    if get("timing_evidence") not in ("estimated", "placeholder"):
        return None
    share = _number(get("measured_share"))
    share = 1.0 if share is None else share
    seconds = sum(_number(get(c)) or 0.0 for c in ("model_time_s", "tool_time_s", "round_trip_time_s"))
    saving = abs(wall * speed - wall)
    return ASSUMED if saving <= (1 - share) * seconds + 1e-9 else None


def timing_gap(trace: Trace, allowed: frozenset[TimingSource]) -> str | None:
    """Why `trace` does not rest only on `allowed` timing labels (None when it does)."""
    seconds = timing_seconds(trace.rounds)
    weak = {s: v for s, v in seconds.items() if s not in allowed and v > 0}
    unknown = {s: n for s, n in unknown_durations(trace.rounds).items() if s not in allowed}
    # a wait or an upper bound is real time, but not measured time of the thing itself
    bounds = not_execution_seconds(trace.rounds) if "placeholder" not in allowed else {}
    if not weak and not unknown and not bounds:
        return None
    total = sum(seconds.values())
    parts = [f"{v:.2f} s {s}" for s, v in sorted(weak.items(), key=lambda kv: _STRENGTH[kv[0]])]
    parts += [f"{v:.2f} s recorded that is {_COVERS_WORDS[c]}, not execution" for c, v in bounds.items()]
    parts += [f"{n} unknown duration(s) counted as 0 s ({s})" for s, n in unknown.items()]
    return f"rests partly on {', '.join(parts)} (of {total:.2f} s)"


def one_call_per_response_s(trace: Trace) -> float:
    """What-if: the provider itself returns one call per response (``parallel_tool_calls: false``
    honoured upstream): N calls cost N model turns, run one after another."""
    total = 0.0
    for r in trace.rounds:
        ran = [e for e in r.executions if e.status != "skipped"]
        turns = max(len(ran), 1)
        total += turns * r.model_call.latency_s + sum(e.duration_s for e in ran)
    return total


def run_rows(
    trace_id: str, result: RunResult, trace: Trace
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Summary row, per-round rows and per-call rows of one replay."""
    calls, rounds = [], []
    for r in result.rounds:
        rounds.append(
            {
                "trace": trace_id,
                "mode": result.mode,
                "round": r.round_index,
                "final": r.final,
                "n_calls": len(r.tool_calls),
                "model_start": r.model_call.started_at,
                "model_end": r.model_call.ended_at,
                "round_end": r.ended_at,
                "client_round_trips": r.client_round_trips if len(r.tool_calls) else 0,
                "model_timing": r.model_call.timing.source,
                "chunk_timing": r.model_call.chunk_timing,
                "stream_overlap_s": _stream_overlap(r),
                "strategy_notes": " | ".join(r.strategy_notes),
            }
        )
        for e in r.executions:
            calls.append(
                {
                    "trace": trace_id,
                    "mode": result.mode,
                    "round": r.round_index,
                    "tool_call_id": e.tool_call_id,
                    "name": e.name,
                    "index": e.index,
                    "status": e.status,
                    "start": e.started_at,
                    "end": e.ended_at,
                    "duration": e.duration_s,
                    "timing": e.timing.source,
                    "covers": e.timing.covers,
                    "queued_at": e.queued_at,
                    "waited_s": e.waited_s,
                }
            )
    ran = [e for e in result.executions if e.status != "skipped"]
    model_time = sum(r.model_call.latency_s for r in result.rounds)
    tool_time = sum(e.duration_s for e in ran)
    trips_time = sum(r.round_trip_s for r in result.rounds)  # serialized: the N-1 recorded per batch
    phases = sum(_tool_phase(r) for r in result.rounds) - trips_time
    answered = _tool_message_ids(result)
    order_ok = all(answered(r) == _answered_in_model_order(r) for r in result.rounds if r.tool_calls)
    usage = result.usage
    summary = {
        "trace": trace_id,
        "mode": result.mode,
        **strategy_options(result),
        "status": result.status,
        "reason": result.reason,
        "wall_time_s": result.wall_time_s,
        "model_time_s": model_time,
        "tool_time_s": tool_time,
        "tool_phase_s": phases,
        "round_trip_time_s": trips_time,
        "overlap_saved_s": saved if (saved := tool_time - phases) >= NOISE_S else 0.0,
        "stream_overlap_s": sum(_stream_overlap(r) for r in result.rounds),
        "strategy_notes": sum(len(r.strategy_notes) for r in result.rounds),
        "upstream_calls": result.model_calls,
        "client_round_trips": sum(r.client_round_trips for r in result.rounds if r.tool_calls)
        + sum(1 for r in result.rounds if not r.tool_calls),
        "tokens": usage.get("total_tokens"),
        "n_calls": len(result.executions),
        "skipped": sum(e.status == "skipped" for e in result.executions),
        "failures": sum(e.failed for e in result.executions),
        "results_in_model_order": order_ok,
        **timing_columns(
            timing_seconds(result.rounds),
            trips_time,
            unknown_durations(result.rounds),
            not_execution_seconds(result.rounds),
        ),
    }
    why = not_comparable_why(result)
    summary.update(comparable=why is None, not_comparable_why=why or "")
    return summary, rounds, calls


def strategy_options(result: RunResult) -> dict[str, Any]:
    """What the run's strategy ran under besides its name: ``cap`` (calls at once: the strategy's own
    cap, else the run's ``concurrency`` setting, a recorded one included; None for no cap),
    ``tool_limits`` (``tool=K`` per limited tool, comma-separated) and ``streams`` (it saw calls as
    they became complete while the model streamed). A strategy named by you (``Parallel(name="mine",
    concurrency=2)``) or a run-level cap (recorded in a trace's settings) does not show in the name:
    these columns say it, so no row is read as running uncapped when it did not."""
    strategy = result.config.strategy
    limits = getattr(strategy, "tool_limits", None) or {}
    return {
        "cap": getattr(strategy, "concurrency", None) or result.config.concurrency,
        "tool_limits": ",".join(f"{tool}={k}" for tool, k in sorted(limits.items())),
        "streams": bool(getattr(strategy, "streams", False)),
    }


def not_comparable_why(result: RunResult) -> str | None:
    """Why the run's wall time cannot be set beside other strategies' (None: it can). A run cut off
    (timeout, abort) took the cut's time; a run whose strategy failed stopped at its crash; a run
    that skipped calls (``first_only``, or any strategy with ``skips_calls``) did less work."""
    if result.status in ("timeout", "aborted"):
        return (
            f"the run was cut off ({result.status}): its wall time is the cut's; a replay of a recording "
            "cut off there ends at its cut in every mode, so lower_bound_s and eager_bound_s are left empty "
            "(summed over what the recording holds, they would count time past the cut)"
        )
    if result.reason == "strategy_error":
        return "the strategy failed (strategy_error): the run stopped at its crash"
    skipped = sum(e.status == "skipped" for e in result.executions)
    if skipped:
        return f"{skipped} call(s) skipped: the run did less work"
    return None


def _answered_in_model_order(r: Round) -> list[str]:
    """The ids of the round's calls that were answered (every one but those skipped, wherever they
    sit in the batch), in model order: what the transcript's tool messages must read."""
    return [c.tool_call_id for c, e in zip(r.tool_calls, r.executions, strict=False) if e.answered]


def _tool_message_ids(result: RunResult) -> Callable[[Round], list[str]]:
    """For a round, the ids of the transcript's tool messages answering its calls, in transcript
    order (indexed once per run: a long session would otherwise rescan its transcript per round)."""
    where: dict[str, list[int]] = {}
    for k, m in enumerate(result.messages):
        if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
            where.setdefault(m["tool_call_id"], []).append(k)

    def ids(r: Round) -> list[str]:
        keys = {c.tool_call_id for c in r.tool_calls}
        found = sorted(k for key in keys for k in where.get(key, ()))
        return [result.messages[k]["tool_call_id"] for k in found]

    return ids


def trace_key(item: Trace | str | Path) -> str:
    """What names a trace's rows in `compare`'s tables (column ``trace``): a `Trace`'s title, a
    file's path (`trace_keys` tells apart several that share one)."""
    return item.metadata.title if isinstance(item, Trace) else str(item)


def trace_keys(items: Sequence[Trace | str | Path]) -> list[str]:
    """The key of each trace in `compare`'s tables, in the order given: `trace_key`, and where
    several traces share one (a trace and its `as_streamed` copy keep their title), each of them gets
    `` #1``, `` #2``, ... in the order given, so no two traces' rows ever mix under one key (a pivot
    by ``trace`` stays one row per trace); the ``title`` column keeps the title itself."""
    from collections import Counter

    bases = [trace_key(item) for item in items]
    shared = {b for b, n in Counter(bases).items() if n > 1}
    if not shared:
        return bases
    taken = set(bases) - shared
    out, counts = [], Counter[str]()
    for base in bases:
        key = base
        if base in shared:
            while key == base or key in taken:  # (a suffix another trace's title already has is skipped)
                counts[base] += 1
                key = f"{base} #{counts[base]}"
        taken.add(key)
        out.append(key)
    return out


def shared_keys_note(items: Sequence[Trace | str | Path], keys: Sequence[str]) -> str:
    """What `trace_keys` did, in words ('' when every trace kept its own title or path)."""
    renamed = [
        f"{trace_key(item)!r} -> {key!r}"
        for item, key in zip(items, keys, strict=True)
        if key != trace_key(item)
    ]
    if not renamed:
        return ""
    return (
        "traces sharing a title (or path) are told apart in every table by a suffix on the trace key "
        f"(the title column keeps the title): {', '.join(renamed)}"
    )


def trace_rows(
    item: Trace | str | Path,
    modes: Sequence[StrategySpec],
    settings: dict[str, Any],
    virtual: bool = True,
    timings: TimingFilter = "any",
    key: str | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Replay one trace under each mode; plain rows (picklable) for `compare`, its rows named `key`
    (default: `trace_key`; `compare` gives every trace a key of its own, `trace_keys`).

    A trace that cannot be loaded or replayed yields an ``errors`` row naming it (and the mode), so
    one broken file never costs the rest of a corpus; a trace whose timings are weaker than `timings`
    allows yields an ``excluded`` row instead of runs.
    """
    out: dict[str, list[dict[str, Any]]] = {
        "runs": [],
        "rounds": [],
        "calls": [],
        "missed": [],
        "errors": [],
        "excluded": [],
        "dependencies": [],
    }
    trace_id = trace_key(item) if key is None else key
    if isinstance(item, Trace):
        trace = item
    else:
        from toolcall_lab.trace_files import load

        try:
            trace = load(item)
        except TraceError as exc:
            out["errors"].append({"trace": trace_id, "mode": None, "error": str(exc)})
            return out
    gap = timing_gap(trace, TIMING_FILTERS[timings])
    if gap is not None:
        out["excluded"].append(
            {"trace": trace_id, "title": trace.metadata.title, "reason": f"timings={timings!r}: {gap}"}
        )
        return out
    try:  # settings the recording holds that no run can have: the trace, not a mode, is at fault
        check_recorded_settings(trace, keep=set(settings))
    except TraceFormatError as exc:
        out["errors"].append({"trace": trace_id, "mode": None, "error": str(exc)})
        return out
    # a recording that stops at a cut (deadline, abort) holds no bound: its replays end at the cut in
    # every mode, and a bound summed over what it holds would count time past it no run can show
    cut = recorded_cut(trace) is not None
    bound = float("nan") if cut else critical_path_s(trace)
    eager_bound = float("nan") if cut else eager_bound_s(trace)
    eager_saving = float("nan") if cut else eager_saving_bound_s(trace)
    pairs = dependency_evidence(trace)
    missed = missed_parallelism(trace, pairs)
    trace_timing = timing_columns(timing_seconds(trace.rounds), unknown=unknown_durations(trace.rounds))
    for mode in modes:
        strategy = resolve(mode)
        mode_settings = dict(settings)
        if not isinstance(strategy, Serialized):
            mode_settings.pop("round_trip_s", None)
        try:
            result = replay(trace, strategy, virtual=virtual, **mode_settings)
        except (ReplayDivergenceError, TraceFormatError) as exc:
            out["errors"].append({"trace": trace_id, "mode": strategy.name, "error": str(exc)})
            continue
        if result.reason == "strategy_error":  # a bug in the strategy: no figure to compare
            out["errors"].append({"trace": trace_id, "mode": strategy.name, "error": result.error or ""})
            continue
        summary, r_rows, c_rows = run_rows(trace_id, result, trace)
        if cut:  # every mode ends at the cut: calls overlapping until it saved no time (NaN, as the bounds)
            summary["overlap_saved_s"] = summary["stream_overlap_s"] = float("nan")
        summary.update(
            lower_bound_s=bound,
            # a run that skipped calls (first_only) did less than the bound counts: no efficiency
            efficiency=(bound / summary["wall_time_s"] if summary["wall_time_s"] else 1.0)
            if summary["comparable"] and not cut
            else float("nan"),
            eager_bound_s=eager_bound,
            eager_saving_bound_s=eager_saving,
            chunk_timing=stream_timing(trace),
            title=trace.metadata.title,
            source=trace.metadata.source or "",
            parent=_parent_text(trace),
            origin=trace.metadata.origin,
            source_status=trace.outcome.status,
            recorded_wall_s=trace.metadata.recorded_wall_s,
            trace_timing_evidence=trace_timing["timing_evidence"],
            missed_parallelism_upper_bound_s=sum(m.saved_upper_bound_s for m in missed),
            one_call_per_response_s=one_call_per_response_s(trace),
        )
        out["runs"].append(summary)
        out["rounds"].extend(r_rows)
        out["calls"].extend(c_rows)
    out["missed"] = [{"trace": trace_id, **m.to_dict()} for m in missed]
    out["dependencies"] = [
        {
            "trace": trace_id,
            "earlier_round": p.earlier,
            "later_round": p.later,
            "classification": p.classification,
            "strong_evidence": sum(e.strong for e in p.evidence),
            "weak_evidence": sum(not e.strong for e in p.evidence),
            "summary": p.summary,
        }
        for p in pairs
    ]
    return out


def _parent_text(trace: Trace) -> str:
    """A sub-agent trace's link (`TraceMetadata.parent`) as ``<source> <tool_call_id>``, else ''."""
    parent = trace.metadata.parent
    return f"{parent['source']} {parent['tool_call_id']}" if parent else ""


def nested_runs(runs: pd.DataFrame) -> pd.Series:
    """Which runs are a sub-agent's whose parent trace is in the same table: the parent's call
    (a Task) already lasts this whole run, so its seconds are in the parent's totals. Totals count
    them once (`Comparison.summary` leaves these rows out of its sums; medians keep them)."""
    import pandas as pd

    if runs.empty or "parent" not in runs or "source" not in runs:
        return pd.Series(False, index=runs.index)
    sources = set(runs["source"])
    return runs["parent"].map(lambda p: bool(p) and p.rsplit(" ", 1)[0] in sources)


_TABLES = ("runs", "rounds", "calls", "missed", "errors", "excluded", "dependencies")
_COLUMNS = {
    "missed": ["trace", "first_round", "last_round", "saved_upper_bound_s"],
    "errors": ["trace", "mode", "error"],
    "excluded": ["trace", "title", "reason"],
    "dependencies": [
        "trace",
        "earlier_round",
        "later_round",
        "classification",
        "strong_evidence",
        "weak_evidence",
        "summary",
    ],
}


@dataclass(frozen=True, slots=True)
class Comparison:
    """Tidy results of replaying traces under several modes."""

    runs: pd.DataFrame
    """One row per (trace, mode): what the strategy ran under besides its name (``cap``,
    ``tool_limits``, ``streams``: `strategy_options`), wall time, model/tool time, overlap (with each other:
    ``overlap_saved_s``; with the model's stream: ``stream_overlap_s``), upstream calls, round trips,
    tokens, failures, lower bound, the eager bound and what it would save (``eager_bound_s``,
    ``eager_saving_bound_s``, resting on ``chunk_timing``), efficiency, speedup vs sequential,
    ``strategy_notes`` (how many the strategy made); what the times rest on
    (``timing_evidence``, ``measured_share``, ``rests_on_estimates``); ``comparable`` (False, with
    ``not_comparable_why``, for a run that skipped calls, whose ``efficiency`` is NaN: the bound counts
    what it skipped; for a replay that ended at a recorded cut: deadline, abort; for a run whose
    strategy failed); ``efficiency`` is ``lower_bound_s / wall_time_s``, where the bound has every
    call start at its stream's end: a strategy that overlaps the stream (``eager``) can exceed 1, up
    to ``lower_bound_s / eager_bound_s``; for a recording cut off (deadline, abort) the bounds are
    empty (NaN): its replays end at the cut in every mode, and a bound summed over what it holds would
    count time past the cut that no run can show; so are ``overlap_saved_s`` and ``stream_overlap_s``
    (calls that overlapped until the cut saved no time: every mode ends there; the summary's sums
    leave them out); ``in_all_modes`` (False when the
    trace failed in some mode); ``status`` ``incomplete`` when the replay ended on an importer's
    placeholder round (the recording holds no response there; ``completed/agent_finished`` when the
    recorded agent ended its run with its own finishing tool)."""
    rounds: pd.DataFrame
    calls: pd.DataFrame
    """One row per (trace, mode, round, call) with start/end times and the duration's timing label."""
    missed: pd.DataFrame
    """Groups of rounds with no evidence of using each other; ``saved_upper_bound_s`` is an upper bound."""
    errors: pd.DataFrame
    """Traces (and modes) that could not be compared, and why; the rest are in the other tables."""
    excluded: pd.DataFrame
    """Traces left out by the ``timings`` restriction, and what their timings rest on."""
    dependencies: pd.DataFrame
    """One row per (trace, earlier round, later round): the class and a summary of the evidence."""
    not_compared: tuple[str, ...] = ()
    """Traces a comparison stopped early (Ctrl-C: `compare`'s ``partial_comparison``) never reached."""
    notes: tuple[str, ...] = ()
    """What the comparison says about its input, e.g. traces that share a title, keyed apart
    (`trace_keys`); `summary_text` prints them."""

    @property
    def modes_failed_everywhere(self) -> list[str]:
        """Modes with no run at all, only errors (e.g. a strategy of yours that fails on every trace)."""
        if self.errors.empty:
            return []
        ran = set(self.runs["mode"]) if not self.runs.empty else set()
        return sorted({m for m in self.errors["mode"].dropna() if m not in ran})

    @property
    def summarised_runs(self) -> pd.DataFrame:
        """The runs `summary` is made of: those of the traces every mode (but one that failed on
        every trace) replayed."""
        if self.runs.empty:
            return self.runs
        dead = self.modes_failed_everywhere
        if dead:
            errors = self.errors
            failed = set(errors.loc[errors["mode"].notna() & ~errors["mode"].isin(dead), "trace"])
            return self.runs[~self.runs["trace"].isin(failed)]
        return self.runs[self.runs["in_all_modes"]]

    @property
    def summary(self) -> pd.DataFrame:
        """Per mode, over the traces replayed in every mode: totals, medians, what they rest on.

        ``traces_left_out`` counts the traces given that the summary leaves out: some mode failed on
        them, they could not be loaded, or a comparison stopped early never reached them (the
        ``excluded`` table's, left out by the ``timings`` restriction, are not counted); speedups are the
        medians of comparable runs only (``comparable_runs`` says how many). Sums (times, calls, round
        trips) count a sub-agent's run once: when the trace holding its Task call is in the table too,
        that call already lasts the whole sub-agent run, so the sub-agent's own row is left out of the
        sums (`nested_runs`; ``sub_agent_runs_in_parents`` counts them) and kept in the medians.
        ``wall_time_s`` totals every run, so a total that holds runs which skipped calls (less work) can read
        faster than sequential: ``comparable_wall_time_s`` totals the comparable runs only. A mode
        that failed on every trace (`modes_failed_everywhere`) is left out of the summary rather than
        emptying it: the other modes are summarised over the traces they all replayed.
        """
        import pandas as pd

        if self.runs.empty:
            return pd.DataFrame()
        runs = self.summarised_runs
        given = set(self.runs["trace"]) | set(self.errors["trace"]) | set(self.not_compared)
        left_out = len(given - set(runs["trace"]))
        if runs.empty:
            return pd.DataFrame()
        g = runs.groupby("mode", sort=False)
        out = g.agg(
            traces=("trace", "count"),
            median_wall_s=("wall_time_s", "median"),
            median_efficiency=("efficiency", "median"),
            comparable_runs=("comparable", "sum"),
            runs_resting_on_estimates=("rests_on_estimates", "sum"),
            median_measured_share=("measured_share", "median"),
        )
        nested = nested_runs(runs)
        once = runs[~nested]  # a sub-agent's run is inside its parent's Task call: summed once
        sums = once.groupby("mode", sort=False).agg(
            wall_time_s=("wall_time_s", "sum"),
            model_time_s=("model_time_s", "sum"),
            tool_time_s=("tool_time_s", "sum"),
            overlap_saved_s=("overlap_saved_s", "sum"),
            stream_overlap_s=("stream_overlap_s", "sum"),
            upstream_calls=("upstream_calls", "sum"),
            client_round_trips=("client_round_trips", "sum"),
            failures=("failures", "sum"),
            skipped=("skipped", "sum"),
        )
        for column in sums.columns:
            out[column] = sums[column].reindex(out.index).fillna(0)
        out["sub_agent_runs_in_parents"] = nested.groupby(runs["mode"], sort=False).sum().reindex(out.index)
        out = out[
            [
                "traces",
                "wall_time_s",
                "median_wall_s",
                "model_time_s",
                "tool_time_s",
                "overlap_saved_s",
                "stream_overlap_s",
                "upstream_calls",
                "client_round_trips",
                "failures",
                "skipped",
                "median_efficiency",
                "comparable_runs",
                "runs_resting_on_estimates",
                "median_measured_share",
                "sub_agent_runs_in_parents",
            ]
        ]
        comparable_wall = once[once["comparable"]].groupby("mode", sort=False)["wall_time_s"].sum()
        out["comparable_wall_time_s"] = comparable_wall.reindex(out.index).fillna(0.0)
        out["traces_left_out"] = left_out
        if "speedup_vs_sequential" in runs:
            comparable = runs[runs["comparable"]]
            out["median_speedup_vs_sequential"] = comparable.groupby("mode", sort=False)[
                "speedup_vs_sequential"
            ].median()
        return out


def modes_list(modes: Any, where: str) -> list[Any]:
    """`modes` as a list, or a one-line `UsageError` (a bare string would be read letter by letter; an
    empty list would compare nothing, and say so only by its empty tables)."""
    if isinstance(modes, str | bytes):
        raise UsageError(f"{where}: give a list of modes, e.g. [{modes!r}], not one string")
    try:
        out = list(modes)
    except TypeError:
        raise UsageError(f"{where}: give a list of modes, not {type(modes).__name__} {modes!r}") from None
    if not out:
        raise UsageError(f"{where}: no mode given; give at least one, e.g. ['sequential', 'eager']")
    return out


def check_distinct(names: Sequence[str], where: str) -> None:
    """A one-line `UsageError` when two modes share a name (their rows and panels would merge)."""
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise UsageError(
            f"{where}: two strategies share a name ({list(names)}); {', '.join(map(repr, twice))} is "
            "given twice: give each strategy once, and two different strategies names of their own"
        )


def run_capped(modes: Sequence[Any], concurrency: int | None, where: str) -> list[Any]:
    """`modes` as they run under a run-level `concurrency`: built-in ``parallel`` / ``eager`` with no
    cap of their own take it into their name (`toolcall_lab.strategies.capped`: ``parallel`` becomes
    ``parallel[cap=2]``), the others are kept as given (specs stay specs, for worker processes); a
    `UsageError` when two of them then share a name (``parallel`` and ``parallel[cap=2]`` under
    ``concurrency=2`` are one strategy)."""
    out, names, was = [], [], []
    for mode in modes:
        strategy = resolve(mode, where)
        run_as = capped(strategy, concurrency)
        out.append(mode if run_as is strategy else run_as)
        names.append(run_as.name)
        was.append(strategy.name)
    if concurrency is not None and len(set(names)) != len(names):
        renamed = [f"{a!r} runs as {b!r}" for a, b in zip(was, names, strict=True) if a != b]
        raise UsageError(
            f"{where}: under concurrency={concurrency}, {', '.join(renamed)}: two strategies are then the "
            f"same ({names}); leave one out"
        )
    check_distinct(names, where)
    return out


def compare(
    traces: Iterable[Trace | str | Path],
    modes: Sequence[StrategySpec] = MODES,
    *,
    round_trip_s: float = DEFAULT_ROUND_TRIP_S,
    concurrency: int | None = None,
    virtual: bool = True,
    timings: TimingFilter = "any",
    executor: Executor | None = None,
    progress: bool | Callable[[Iterable[Any]], Iterable[Any]] = False,
) -> Comparison:
    """Replay every trace under every mode and return tidy DataFrames.

    Args:
        traces: `Trace` objects or paths to trace files (paths are cheaper to ship to processes).
        modes: the modes or strategies to compare (names such as ``eager`` or ``parallel[cap=4]``,
            ``module:attribute`` specs, or strategy objects; with a process `executor`, pass specs
            or importable objects); ``sequential`` is needed for speedups.
        round_trip_s: client round trip in serialized mode (a constant: serialized rows rest on a
            placeholder when it is above 0); concurrency: parallel mode's cap.
        virtual: replay on the virtual clock (default) or in real time.
        timings: ``"recorded"`` keeps only traces whose every duration was recorded at the source,
            ``"measured"`` also admits server-reported figures, ``"any"`` (default) keeps all; the
            rest are listed in ``excluded``.
        executor: any ``concurrent.futures.Executor`` (``ProcessPoolExecutor``, a Dask or Ray
            executor); None runs in this process.
        progress: True for a tqdm bar (notebook-aware), or a callable wrapping an iterable.
    """

    if not isinstance(timings, str) or timings not in TIMING_FILTERS:
        raise UsageError(f"compare(timings={timings!r}): use one of {', '.join(TIMING_FILTERS)}")
    check_concurrency(concurrency, "compare(concurrency=...)")  # (every setting, before any replay)
    check_round_trip(round_trip_s, "compare(round_trip_s=...)")
    modes = modes_list(modes, "compare(modes=...)")
    modes = run_capped(modes, concurrency, "compare(modes=...)")  # bad specs fail before any replay
    settings: dict[str, Any] = {"round_trip_s": round_trip_s}
    if concurrency is not None:
        settings["concurrency"] = concurrency
    items = list(traces)
    keys = trace_keys(items)  # (traces sharing a title get a key each: their rows never mix)
    said = shared_keys_note(items, keys)
    notes = (said,) if said else ()
    if executor is None:
        parts: Iterable[dict[str, list[dict[str, Any]]]] = (
            trace_rows(t, modes, settings, virtual, timings, k) for t, k in zip(items, keys, strict=True)
        )
    else:
        _check_picklable(modes, executor)
        chunk = max(1, len(items) // 64)
        parts = executor.map(
            _rows_star,
            [(t, tuple(modes), settings, virtual, timings, k) for t, k in zip(items, keys, strict=True)],
            chunksize=chunk,
        )
    if progress:
        wrap = progress if callable(progress) else _tqdm
        parts = wrap(parts, total=len(items))  # type: ignore[call-arg]
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in _TABLES}
    done = 0
    try:
        for part in parts:
            for name in _TABLES:
                tables[name] += part[name]
            done += 1
        return _comparison(tables, notes=notes)
    except KeyboardInterrupt as exc:  # Ctrl-C, also while the tables are built: what was compared so far
        reached = {row["trace"] for name in ("runs", "errors", "excluded") for row in tables[name]}
        never = tuple(k for k in keys if k not in reached)
        exc.partial_comparison = _comparison(tables, never, notes)  # type: ignore[attr-defined]
        exc.add_note(f"toolcall_lab: {done} of {len(items)} trace(s) compared; see partial_comparison")
        raise


def _check_picklable(modes: Sequence[StrategySpec], executor: Executor) -> None:
    """A process pool sends every strategy to its workers by pickling it: one that cannot be pickled
    is refused up front, named, with the fix (rather than a bare PicklingError from the pool)."""
    from concurrent.futures import ProcessPoolExecutor

    if not isinstance(executor, ProcessPoolExecutor):
        return  # (Dask, Ray: cloudpickle sends more than pickle does; they say what fails themselves)
    import pickle

    for mode in modes:
        try:
            pickle.dumps(mode)
        except Exception as exc:
            raise UsageError(
                f"compare(executor=ProcessPoolExecutor(...)): the strategy {strategy_name(mode)!r} cannot "
                f"be sent to the worker processes ({type(exc).__name__}: {exc}); define it in an "
                "importable module (a .py file, not a notebook cell or the __main__ script) and pass "
                "it, or its 'module:attribute' / 'path/to/file.py:attribute' spec, or compare without "
                "the executor"
            ) from exc


def _comparison(
    tables: dict[str, list[dict[str, Any]]], not_compared: tuple[str, ...] = (), notes: tuple[str, ...] = ()
) -> Comparison:
    import pandas as pd

    runs_df = pd.DataFrame(tables["runs"])
    if not runs_df.empty:
        failed = {e["trace"] for e in tables["errors"] if e["mode"] is not None}
        runs_df["in_all_modes"] = ~runs_df["trace"].isin(failed)
        if "sequential" in set(runs_df["mode"]):
            seq = runs_df[runs_df["mode"] == "sequential"].set_index("trace")["wall_time_s"]
            speedup = runs_df["trace"].map(seq) / runs_df["wall_time_s"]
            # a run that did less work (first_only skipping calls) has no speedup, as no efficiency
            runs_df["speedup_vs_sequential"] = speedup.where(runs_df["comparable"])
    return Comparison(
        runs=runs_df,
        rounds=pd.DataFrame(tables["rounds"]),
        calls=pd.DataFrame(tables["calls"]),
        **{name: pd.DataFrame(tables[name], columns=_COLUMNS[name]) for name in _COLUMNS},
        not_compared=not_compared,
        notes=notes,
    )


def _rows_star(args: tuple[Any, ...]) -> dict[str, list[dict[str, Any]]]:
    return trace_rows(*args)


def _tqdm(iterable: Iterable[Any], total: int) -> Iterable[Any]:
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, unit="trace")  # type: ignore[no-any-return]


def summary_text(comparison: Comparison) -> str:
    """The per-mode summary as a plain-text table (for the CLI)."""
    s = comparison.summary
    dead = comparison.modes_failed_everywhere
    left = (
        [f"(left out of the summary: {', '.join(dead)} failed on every trace; see the errors table)"]
        if dead
        else []
    )
    left += list(comparison.notes)
    if s.empty:
        none = "(no trace was replayed in every mode, so there is no summary: see what was not compared)"
        return "\n".join([*left, none])
    text = "\n".join([*left, str(s.to_string(float_format=lambda v: f"{v:,.3f}"))])
    notes = [
        f"{mode}: {int(n)} run(s) not comparable (calls skipped, or cut off): "
        "wall_time_s includes them, comparable_wall_time_s and the speedups leave them out"
        for mode, n in (s["traces"] - s["comparable_runs"]).items()
        if n > 0
    ]
    return "\n".join([text, *notes, *assumed_speedups(comparison), *stream_evidence(comparison)])


def assumed_speedups(comparison: Comparison) -> list[str]:
    """One line per mode whose median speedup rests, on some of its runs, on assumed timings
    (`speedup_caveat`), as the views mark such a speedup: the CLI's summary table cannot mark a
    number, so a line under it does."""
    s, runs = comparison.summary, comparison.summarised_runs
    if s.empty or "median_speedup_vs_sequential" not in s or "speedup_vs_sequential" not in runs:
        return []
    out = []
    for mode, speedup in s["median_speedup_vs_sequential"].items():
        mine = runs[(runs["mode"] == mode) & runs["comparable"]]
        if speedup != speedup or mine.empty:  # (NaN: no comparable run, no speedup shown)
            continue
        k = sum(speedup_caveat(row) is not None for _, row in mine.iterrows())
        if k:
            out.append(
                f"{mode}: median_speedup_vs_sequential {speedup:,.3f} rests on {ASSUMED} in {k} of "
                f"{len(mine)} comparable run(s): the time it saves (or loses) is no more than their "
                "estimated or placeholder seconds, so it is a figure of those assumptions, not a measurement"
            )
    return out


_CHUNK_WORDS = {
    "recorded": "recorded chunk offsets (measured)",
    "spread": "offsets spread evenly by a script or an importer (modelled, not measured)",
    "estimated": "offsets from a stated generation-speed formula (modelled, not measured)",
    "none": "no chunk timing: it ran as parallel there (no call could be seen complete early)",
}


def stream_evidence(comparison: Comparison) -> list[str]:
    """What each streaming strategy's figures (``eager``'s overlap with the model's stream) rest on,
    one line per such strategy: on how many of its runs the trace's chunk offsets were recorded,
    spread, estimated or absent (where it ran as parallel). The rounds table holds each round's note."""
    runs = comparison.runs
    if runs.empty or "streams" not in runs:
        return []
    out = []
    for mode, mine in runs[runs["streams"].astype(bool)].groupby("mode", sort=False):
        counts = mine["chunk_timing"].map(lambda k: k if k in _CHUNK_WORDS else "mixed").value_counts()
        order = [k for k in (*_CHUNK_WORDS, "mixed") if k in counts]
        words = {**_CHUNK_WORDS, "mixed": "chunk timing that differs between rounds (see the rounds table)"}
        parts = "; ".join(f"{int(counts[k])} on {words[k]}" for k in order)
        out.append(f"{mode}: what its overlap with the stream rests on, of its {len(mine)} run(s): {parts}")
    return out


_SUB_AGENT_TITLE = re.compile(r"\bsub-agent of Task (\S+) ")
"""How the Claude Code importer titles a sub-agent's trace (the Task call it ran inside comes first)."""


def sub_agent_of(trace: Trace) -> str | None:
    """The ``tool_call_id`` of the call whose run this trace is, for a sub-agent's trace (Claude Code's
    ``Task``: that call's duration already holds the whole sub-agent run), else None.

    A total over a corpus holding both counts a sub-agent's seconds twice (in its own trace and in its
    parent's call), and a pool of tool durations holding that call holds a whole agent run: the one
    place that says which traces are sub-agents. It reads a trace's ``metadata.parent`` link when the
    trace carries one, else the title the Claude Code importer gives a sub-agent's trace
    (``... sub-agent of Task <id> (<description>) ...``)."""
    parent = getattr(trace.metadata, "parent", None)
    if isinstance(parent, dict) and isinstance(parent.get("tool_call_id"), str):
        return str(parent["tool_call_id"])
    m = _SUB_AGENT_TITLE.search(trace.metadata.title)
    return m[1] if m else None

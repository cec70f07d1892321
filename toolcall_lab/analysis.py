"""Compare execution modes on traces: tidy tables, critical-path bounds, missed parallelism.

The per-trace work (`trace_rows`) returns plain dicts so it can run in any `concurrent.futures`
executor (processes, or a Dask/Ray executor for corpora beyond one machine); `compare` turns the
rows into pandas DataFrames (pandas is imported only here, lazily).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolcall_lab.exceptions import ReplayDivergenceError, TraceError
from toolcall_lab.records import MODES, Mode, Round
from toolcall_lab.replay import replay
from toolcall_lab.runs import RunResult
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


def _tool_phase(r: Round) -> float:
    ran = [e for e in r.executions if e.status != "skipped"]
    if not ran:
        return 0.0
    return max(e.ended_at for e in ran) - r.model_call.ended_at


_TOKEN = re.compile(r"[A-Za-z0-9_./:-]{3,}")


def _uses_results(later: Round, earlier: Round) -> bool:
    """Whether any argument value of `later` appears in a result of `earlier` (a data dependency)."""
    results = " ".join(e.result for e in earlier.executions)
    for call in later.tool_calls:
        for value in _leaf_values(call.args or {}):
            if len(value) >= 3 and value in results:
                return True
    return False


def _leaf_values(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaf_values(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaf_values(v)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class MissedParallelism:
    """Consecutive tool rounds that used nothing from each other: one batch would have done."""

    first_round: int
    last_round: int
    saved_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"first_round": self.first_round, "last_round": self.last_round, "saved_s": self.saved_s}


def missed_parallelism(trace: Trace) -> list[MissedParallelism]:
    """Groups of consecutive independent tool rounds and the time one batch would have saved.

    Saving of merging rounds k..m into one batch: the model calls of rounds k+1..m, plus the sum of
    their slowest calls minus the slowest call of all (they would have overlapped).
    """
    tool_rounds = [r for r in trace.rounds if r.tool_calls and not r.final]
    out: list[MissedParallelism] = []
    group: list[Round] = []

    def flush() -> None:
        if len(group) > 1:
            slowest = [max((e.duration_s for e in r.executions), default=0.0) for r in group]
            saved = sum(r.model_call.latency_s for r in group[1:]) + sum(slowest) - max(slowest)
            out.append(
                MissedParallelism(
                    first_round=group[0].round_index, last_round=group[-1].round_index, saved_s=saved
                )
            )

    for r in tool_rounds:
        if group and (r.round_index != group[-1].round_index + 1 or any(_uses_results(r, g) for g in group)):
            flush()
            group = []
        group.append(r)
    flush()
    return out


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
                }
            )
    ran = [e for e in result.executions if e.status != "skipped"]
    model_time = sum(r.model_call.latency_s for r in result.rounds)
    tool_time = sum(e.duration_s for e in ran)
    trips_time = sum(r.round_trip_s for r in result.rounds)  # serialized: the N-1 recorded per batch
    phases = sum(_tool_phase(r) for r in result.rounds) - trips_time
    order_ok = all(
        [m["tool_call_id"] for m in _tool_messages_after(result, r)]
        == [c.tool_call_id for c in r.tool_calls][: len(_tool_messages_after(result, r))]
        for r in result.rounds
        if r.tool_calls
    )
    usage = result.usage
    summary = {
        "trace": trace_id,
        "mode": result.mode,
        "status": result.status,
        "reason": result.reason,
        "wall_time_s": result.wall_time_s,
        "model_time_s": model_time,
        "tool_time_s": tool_time,
        "tool_phase_s": phases,
        "round_trip_time_s": trips_time,
        "overlap_saved_s": max(tool_time - phases, 0.0),
        "upstream_calls": result.model_calls,
        "client_round_trips": sum(r.client_round_trips for r in result.rounds if r.tool_calls)
        + sum(1 for r in result.rounds if not r.tool_calls),
        "tokens": usage.get("total_tokens"),
        "n_calls": len(result.executions),
        "skipped": sum(e.status == "skipped" for e in result.executions),
        "failures": sum(e.failed for e in result.executions),
        "results_in_model_order": order_ok,
    }
    return summary, rounds, calls


def _tool_messages_after(result: RunResult, r: Round) -> list[dict[str, Any]]:
    ids = {c.tool_call_id for c in r.tool_calls}
    return [m for m in result.messages if m.get("role") == "tool" and m.get("tool_call_id") in ids]


def trace_rows(
    item: Trace | str | Path, modes: Sequence[Mode], settings: dict[str, Any], virtual: bool = True
) -> dict[str, list[dict[str, Any]]]:
    """Replay one trace under each mode; plain rows (picklable) for `compare`.

    A trace that cannot be loaded or replayed yields an ``errors`` row naming it (and the mode), so
    one broken file never costs the rest of a corpus.
    """
    empty: dict[str, list[dict[str, Any]]] = {
        "runs": [],
        "rounds": [],
        "calls": [],
        "missed": [],
        "errors": [],
    }
    if isinstance(item, Trace):
        trace, trace_id = item, item.metadata.title
    else:
        from toolcall_lab.trace_files import load

        trace_id = str(item)
        try:
            trace = load(item)
        except TraceError as exc:
            return {**empty, "errors": [{"trace": trace_id, "mode": None, "error": str(exc)}]}
    bound = critical_path_s(trace)
    missed = missed_parallelism(trace)
    runs, rounds, calls = [], [], []
    for mode in modes:
        mode_settings = dict(settings)
        if mode != "serialized":
            mode_settings.pop("round_trip_s", None)
        try:
            result = replay(trace, mode, virtual=virtual, **mode_settings)
        except ReplayDivergenceError as exc:
            empty["errors"].append({"trace": trace_id, "mode": mode, "error": str(exc)})
            continue
        summary, r_rows, c_rows = run_rows(trace_id, result, trace)
        summary.update(
            lower_bound_s=bound,
            efficiency=bound / summary["wall_time_s"] if summary["wall_time_s"] else 1.0,
            title=trace.metadata.title,
            origin=trace.metadata.origin,
            missed_parallelism_s=sum(m.saved_s for m in missed),
            one_call_per_response_s=one_call_per_response_s(trace),
        )
        runs.append(summary)
        rounds.extend(r_rows)
        calls.extend(c_rows)
    return {
        "runs": runs,
        "rounds": rounds,
        "calls": calls,
        "missed": [{"trace": trace_id, **m.to_dict()} for m in missed],
        "errors": empty["errors"],
    }


@dataclass(frozen=True, slots=True)
class Comparison:
    """Tidy results of replaying traces under several modes."""

    runs: pd.DataFrame
    """One row per (trace, mode): wall time, model/tool time, overlap, upstream calls, round trips,
    tokens, failures, lower bound, efficiency, speedup vs sequential."""
    rounds: pd.DataFrame
    calls: pd.DataFrame
    """One row per (trace, mode, round, call) with start/end times."""
    missed: pd.DataFrame
    errors: pd.DataFrame
    """Traces (and modes) that could not be compared, and why; the rest are in the other tables."""

    @property
    def summary(self) -> pd.DataFrame:
        """Per mode: totals and medians over the traces (empty when nothing could be compared)."""
        import pandas as pd

        if self.runs.empty:
            return pd.DataFrame()
        g = self.runs.groupby("mode", sort=False)
        out = g.agg(
            traces=("trace", "count"),
            wall_time_s=("wall_time_s", "sum"),
            median_wall_s=("wall_time_s", "median"),
            model_time_s=("model_time_s", "sum"),
            tool_time_s=("tool_time_s", "sum"),
            overlap_saved_s=("overlap_saved_s", "sum"),
            upstream_calls=("upstream_calls", "sum"),
            client_round_trips=("client_round_trips", "sum"),
            failures=("failures", "sum"),
            skipped=("skipped", "sum"),
            median_efficiency=("efficiency", "median"),
        )
        if "speedup_vs_sequential" in self.runs:
            out["median_speedup_vs_sequential"] = g["speedup_vs_sequential"].median()
        return out


def compare(
    traces: Iterable[Trace | str | Path],
    modes: Sequence[Mode] = MODES,
    *,
    round_trip_s: float = DEFAULT_ROUND_TRIP_S,
    concurrency: int | None = None,
    virtual: bool = True,
    executor: Executor | None = None,
    progress: bool | Callable[[Iterable[Any]], Iterable[Any]] = False,
) -> Comparison:
    """Replay every trace under every mode and return tidy DataFrames.

    Args:
        traces: `Trace` objects or paths to trace files (paths are cheaper to ship to processes).
        modes: the modes to compare; ``sequential`` is needed for speedups.
        round_trip_s: client round trip in serialized mode; concurrency: parallel mode's cap.
        virtual: replay on the virtual clock (default) or in real time.
        executor: any ``concurrent.futures.Executor`` (``ProcessPoolExecutor``, a Dask or Ray
            executor); None runs in this process.
        progress: True for a tqdm bar (notebook-aware), or a callable wrapping an iterable.
    """
    import pandas as pd

    settings: dict[str, Any] = {"round_trip_s": round_trip_s}
    if concurrency is not None:
        settings["concurrency"] = concurrency
    items = list(traces)
    if executor is None:
        parts: Iterable[dict[str, list[dict[str, Any]]]] = (
            trace_rows(t, modes, settings, virtual) for t in items
        )
    else:
        chunk = max(1, len(items) // 64)
        parts = executor.map(
            _rows_star, [(t, tuple(modes), settings, virtual) for t in items], chunksize=chunk
        )
    if progress:
        wrap = progress if callable(progress) else _tqdm
        parts = wrap(parts, total=len(items))  # type: ignore[call-arg]
    runs, rounds, calls, missed, errors = [], [], [], [], []
    for part in parts:
        runs += part["runs"]
        rounds += part["rounds"]
        calls += part["calls"]
        missed += part["missed"]
        errors += part["errors"]
    runs_df = pd.DataFrame(runs)
    if not runs_df.empty and "sequential" in set(runs_df["mode"]):
        seq = runs_df[runs_df["mode"] == "sequential"].set_index("trace")["wall_time_s"]
        runs_df["speedup_vs_sequential"] = runs_df["trace"].map(seq) / runs_df["wall_time_s"]
    return Comparison(
        runs=runs_df,
        rounds=pd.DataFrame(rounds),
        calls=pd.DataFrame(calls),
        missed=pd.DataFrame(missed, columns=["trace", "first_round", "last_round", "saved_s"]),
        errors=pd.DataFrame(errors, columns=["trace", "mode", "error"]),
    )


def _rows_star(args: tuple[Any, ...]) -> dict[str, list[dict[str, Any]]]:
    return trace_rows(*args)


def _tqdm(iterable: Iterable[Any], total: int) -> Iterable[Any]:
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, unit="trace")  # type: ignore[no-any-return]


def summary_text(comparison: Comparison) -> str:
    """The per-mode summary as a plain-text table (for the CLI)."""
    s = comparison.summary
    return str(s.to_string(float_format=lambda v: f"{v:,.3f}"))

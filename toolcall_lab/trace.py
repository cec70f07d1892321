"""Traces: a run (recorded, imported or scripted) as a versioned, self-describing value.

`Trace.to_dict()` / `Trace.from_dict()` are the JSON contract; `toolcall_lab.trace_files` does the
disk I/O. Loading checks every field and names the JSON path of a bad one; nothing in a file is ever
executed. Schema versions (one line each)::

    1  metadata, tool schemas, initial messages, outcome; per round the request, the response as
       received (timed chunks or a whole body), parsed calls, findings and timed tool executions
    2  as 1, plus where every duration came from: ``timing`` {source, note} on each response and tool
       execution, ``chunk_timing`` on each response; metadata ``timings`` dropped (derived from the
       rounds), origin ``replayed`` added; per round ``final_reason`` and serialized mode's timed
       ``round_trips``; ``outcome.hook_failures``; execution status ``withheld``; metadata
       ``recorded_wall_s`` (an imported run's wall time as its source recorded it) and ``redactions``
       (credentials removed on saving); ``mode`` (metadata and rounds) names any execution strategy
       (a built-in such as ``eager`` or ``parallel[cap=4]``, or a user strategy's name); per round
       ``strategy_notes`` and per execution ``queued_at`` (when it waited for a slot) and
       ``returned_at`` (when a tool that reported a shorter duration actually returned), written only
       when present
    3  as 2, and a round's request may be stored as a delta: ``kept`` (how many of the previous
       round's request messages it starts with; for the first round, of ``initial_messages``) and
       ``added`` (the messages after them), instead of ``messages`` whole; per execution
       ``withheld_result`` (what a tool returned when ``approve_result`` withheld it); what a duration
       covers (``timing.covers``: ``upper_bound`` or ``wait``, written only when it is not
       ``execution``) and a sub-agent's link to the call it ran inside (``metadata.parent``: the
       ``source`` of the trace holding that call and its ``tool_call_id``, written only when set)

Migration to version 3: a version-2 file loads as it is (its requests are whole, which version 3
still reads) and gives the same objects as before; `save` writes version 3, every request but those
that share nothing with the previous one as a delta, so a file grows linearly with its rounds, not
with their square (100 rounds of 3 calls returning 2 KB each: 36 MB as version 2, under 2 MB as
version 3). `Trace.to_dict` stays the whole form (what views render); `Trace.to_file_dict` is the
form written.

Version 1 files still load: their one trace-wide ``timings`` label is spread onto every number, and
where it cannot say which number was recorded (``mixed``, ``modelled``) the numbers are labelled
``placeholder`` with a note saying so. Their ``dedupe`` setting covered repeats across rounds too,
so it is read as ``dedupe_across_rounds`` as well.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from toolcall_lab.exceptions import TraceFormatError, TraceVersionError, UsageError
from toolcall_lab.messages import Finding, ToolCall
from toolcall_lab.records import (
    CALL_STATUSES,
    CHUNK_TIMINGS,
    FINAL_REASONS,
    HOOK_NAMES,
    ORIGINS,
    TIMING_COVERS,
    TIMING_SOURCES,
    ChunkTiming,
    ClientRoundTrip,
    HookFailure,
    ModelCall,
    Origin,
    Round,
    StrategyName,
    TimedChunk,
    Timing,
    TimingSource,
    ToolExecution,
    call_to_dict,
)

if TYPE_CHECKING:
    from toolcall_lab.runs import RunResult

__all__ = [
    "RESULT_NOT_RECORDED",
    "SCHEMA_VERSION",
    "SCHEMA_VERSIONS",
    "Trace",
    "TraceMetadata",
    "TraceOutcome",
    "call_to_dict",
    "round_to_dict",
]

SCHEMA_VERSION = 3
_OFFSET_SLACK = 1e-6
"""Seconds of rounding allowed in chunk offsets (times are stored as decimal floats)."""
SCHEMA_VERSIONS: dict[int, str] = {
    1: "metadata, tools, initial messages, outcome; rounds with request, timed response chunks, calls, "
    "findings and timed tool executions",
    2: "as 1, plus timing provenance (timing {source, note}) on every response and tool execution, "
    "chunk_timing on every response, final_reason and timed serialized round_trips per round, "
    "outcome.hook_failures, execution status withheld; metadata recorded_wall_s and redactions; mode "
    "names any strategy; optional strategy_notes per round and queued_at / returned_at per execution",
    3: "as 2, plus a round's request stored as a delta over the previous round's (kept: how many of its "
    "messages come first, added: the messages after them) and withheld_result per execution; version 2 "
    "files load unchanged",
}
RESULT_NOT_RECORDED = "(result not recorded)"
"""The result text of a call whose result the source does not hold (a recording that stops before it, a
dataset of expected calls without tool outputs). Analyses treat such a result as missing evidence."""
V1_TIMINGS = ("recorded", "modelled", "mixed")
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceMetadata:
    """Where a trace came from and how much of its timing is real."""

    title: str
    origin: Origin
    provider: str | None = None
    model: str | None = None
    created: str | None = None
    source: str | None = None
    notes: str = ""
    mode: StrategyName | None = None
    """The execution strategy the trace was recorded under (a built-in mode's name or a user
    strategy's)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Run settings at recording time (max_rounds, dedupe, params, ...)."""
    recorded_wall_s: float | None = None
    """For an imported run: its wall time as the source recorded it (first to last timestamp), to
    set beside the replayed times. None when the source has no timestamps."""
    redactions: tuple[str, ...] = ()
    """Where credentials were removed when the trace was saved or recorded (JSON paths and what)."""
    parent: dict[str, str] | None = None
    """For a sub-agent's trace: the call it ran inside, ``{"source": <that trace's metadata.source>,
    "tool_call_id": ...}``. That call's duration already holds this whole run, so corpus totals count
    its seconds once (`toolcall_lab.analysis.nested_runs`). None for every other trace."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceOutcome:
    status: str
    reason: str
    final_answer: str | None = None
    error: str | None = None
    wall_time_s: float = 0.0
    hook_failures: tuple[HookFailure, ...] = ()
    """Every hook (or event listener) that raised during the run, with what followed."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "final_answer": self.final_answer,
            "error": self.error,
            "wall_time_s": self.wall_time_s,
            "hook_failures": [f.to_dict() for f in self.hook_failures],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Trace:
    """A whole run as data: replayable under any mode, comparable, saved as stable JSON."""

    metadata: TraceMetadata
    tools: tuple[dict[str, Any], ...]
    initial_messages: tuple[dict[str, Any], ...]
    rounds: tuple[Round, ...]
    outcome: TraceOutcome
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def from_run(cls, result: RunResult, metadata: TraceMetadata) -> Trace:
        """The run as a trace, labelled by `metadata`.

        Raises:
            UsageError: `metadata` says ``origin="recorded"`` (live from a model) for a run that was
                not (a scripted model's, a replay's): `result.origin` says what it was.
        """
        if metadata.origin == "recorded" and result.origin != "recorded":
            raise UsageError(
                f"TraceMetadata(origin='recorded') for a run whose origin is {result.origin!r}: 'recorded' "
                f"means recorded live from a model; label it origin={result.origin!r} (a replay: "
                "replay.replayed_trace(result, trace) also says what it was replayed from)"
            )
        meta = metadata
        if meta.mode is None or not meta.settings:
            cfg = result.config
            settings = {
                "max_rounds": cfg.max_rounds,
                "concurrency": cfg.concurrency,
                "error_policy": cfg.error_policy,
                "all_failed_policy": cfg.all_failed_policy,
                "dedupe": cfg.dedupe,
                "dedupe_across_rounds": cfg.dedupe_across_rounds,
                "round_trip_s": cfg.round_trip_s,
                "timeout_s": cfg.timeout_s,
                "params": dict(cfg.params),
            }
            meta = TraceMetadata(
                **{**_fields(metadata), "mode": result.mode, "settings": metadata.settings or settings}
            )
        return cls(
            metadata=meta,
            tools=result.tools,
            initial_messages=result.initial_messages,
            rounds=result.rounds,
            outcome=TraceOutcome(
                status=result.status,
                reason=result.reason,
                final_answer=result.final_answer,
                error=result.error,
                wall_time_s=result.wall_time_s,
                hook_failures=result.hook_failures,
            ),
        )

    @property
    def wall_time_s(self) -> float:
        return self.outcome.wall_time_s

    @property
    def n_calls(self) -> int:
        return sum(len(r.tool_calls) for r in self.rounds)

    @property
    def timing_sources(self) -> dict[TimingSource, int]:
        """How many model calls and tool executions rest on each kind of timing evidence."""
        counts: dict[TimingSource, int] = {}
        for r in self.rounds:
            items = [r.model_call.timing, *(e.timing for e in r.executions if e.answered)]
            for t in items:
                counts[t.source] = counts.get(t.source, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """The trace's JSON form with every request whole (what views render from)."""
        meta = {**_fields(self.metadata), "redactions": list(self.metadata.redactions)}
        if meta["parent"] is None:  # (written only when set)
            del meta["parent"]
        return {
            "schema_version": self.schema_version,
            "metadata": meta,
            "tools": list(self.tools),
            "initial_messages": list(self.initial_messages),
            "outcome": self.outcome.to_dict(),
            "rounds": [r.to_dict() for r in self.rounds],
        }

    def to_file_dict(self) -> dict[str, Any]:
        """The JSON form a trace file holds (schema 3): `to_dict` with each round's request written
        as a delta over the previous round's (``kept``, ``added``), so the file grows linearly with
        the rounds. `from_dict` reads it back to the same trace."""
        doc = self.to_dict()
        previous: tuple[dict[str, Any], ...] = self.initial_messages
        for r, out in zip(self.rounds, doc["rounds"], strict=True):
            sent = r.request_messages
            kept = _common_prefix(previous, sent)
            out["request"] = {
                "kept": kept,
                "added": list(sent[kept:]),
                "tools_offered": r.model_call.tools_offered,
            }
            previous = sent
        doc["schema_version"] = SCHEMA_VERSION
        return doc

    @classmethod
    def from_dict(cls, doc: Any, *, source: str | None = None) -> Trace:
        """Build a trace from its JSON form, checking every field (errors name the JSON path)."""
        return _Reader(source).trace(doc)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from toolcall_lab.notebook.html import trace_html

        return {"text/plain": repr(self), "text/html": trace_html(self.to_dict())}

    def __repr__(self) -> str:
        m = self.metadata
        return (
            f"<Trace {m.title!r} ({m.origin}, {m.mode or '?'}): {len(self.rounds)} rounds, "
            f"{self.n_calls} calls, {self.wall_time_s:.3f}s, {self.outcome.status}/{self.outcome.reason}>"
        )


def format_errors(doc: Any, *, source: str | None = None) -> list[TraceFormatError]:
    """Every field of `doc` whose type is wrong (each read as an empty value so the rest is checked),
    then the first other problem the reading meets: what `Trace.from_dict` raises on, all at once
    (`trace_files.validate`)."""
    reader = _Reader(source)
    reader.collected = []
    try:
        reader.trace(doc)
    except TraceFormatError as exc:
        if all(str(exc) != str(e) for e in reader.collected):
            reader.collected.append(exc)
    except Exception:  # (an empty value stood in for a bad one: what follows is no error of the file)
        pass
    return reader.collected


def _same_time(a: float, b: float, magnitude: float) -> bool:
    """Two figures for one duration agree: to the microsecond (times are stored as decimal floats),
    or to a few float steps where the times are so large that a microsecond is below their step."""
    return abs(a - b) <= max(1e-6, 4 * math.ulp(abs(magnitude)))


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items `a` and `b` share (the same object, or equal)."""
    n = min(len(a), len(b))
    for i in range(n):
        x, y = a[i], b[i]
        if x is not y and x != y:
            return i
    return n


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__ if not name.startswith("_")}


def round_to_dict(r: Round) -> dict[str, Any]:
    """A round's JSON form (`Round.to_dict`); kept here because the trace file is its contract."""
    return r.to_dict()


def v1_timing(origin: str, timings: str) -> tuple[Timing, ChunkTiming]:
    """The label a version-1 file's numbers get: it had one trace-wide word for all of them."""
    if origin == "scripted":
        return Timing(source="placeholder", note="v1 scripted trace: latencies set by the script"), "spread"
    if timings == "recorded":
        return Timing(source="recorded", note="v1 trace marked 'recorded'"), "recorded"
    return (
        Timing(
            source="placeholder",
            note=f"v1 trace marked {timings!r}: which of its numbers were recorded is unknown",
        ),
        "spread",
    )


def _kind(value: Any) -> str:
    return (
        "null"
        if value is None
        else {
            dict: "an object",
            list: "a list",
            str: "a string",
            bool: "a boolean",
            int: "a number",
            float: "a number",
        }.get(type(value), type(value).__name__)
    )


class _Reader:
    """Checks a decoded trace document field by field, with JSON paths in its errors."""

    def __init__(self, source: str | None) -> None:
        self.source = source
        self.version = SCHEMA_VERSION
        self.v1_timing: tuple[Timing, ChunkTiming] | None = None
        """Version 1 files: the one label every number gets (they had no per-number provenance)."""

    collected: list[TraceFormatError] | None = None
    """When a list (`format_errors`): a field of the wrong type is added to it and read as an empty
    value of its type, so the rest of the file is checked too."""

    def fail(self, path: str, problem: str) -> TraceFormatError:
        return TraceFormatError(problem, path=path, source=self.source)

    def bad(self, path: str, problem: str, default: Any) -> Any:
        """A field of the wrong type: raised, or (collecting) noted and read as `default`."""
        error = self.fail(path, problem)
        if self.collected is None:
            raise error
        self.collected.append(error)
        return default

    def contradiction(self, path: str, problem: str) -> None:
        """Fields that contradict each other: raised, unless (collecting) a field at `path` was
        already found of the wrong type: then it follows from the empty value read in its place."""
        if self.collected is not None and any(e.path == path for e in self.collected):
            return
        raise self.fail(path, problem)

    def obj(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            return cast(Mapping[str, Any], self.bad(path, f"expected an object, got {_kind(value)}", {}))
        return value

    def get(
        self, d: Mapping[str, Any], key: str, path: str, check: Callable[[Any, str], T], default: Any = ...
    ) -> T:
        p = f"{path}.{key}" if path else key
        if key not in d:
            if default is ...:
                raise self.fail(p, "missing")
            return cast(T, default)
        return check(d[key], p)

    def num(self, value: Any, path: str) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool) and not math.isfinite(value):
            return float(self.bad(path, f"expected a finite number, got {value!r}", 0.0))
        if isinstance(value, bool) or not isinstance(value, int | float):
            return float(
                self.bad(
                    path,
                    f"expected a number, got {value!r}"
                    if isinstance(value, str)
                    else f"expected a number, got {_kind(value)}",
                    0.0,
                )
            )
        return value

    def opt_num(self, value: Any, path: str) -> float | None:
        return None if value is None else self.num(value, path)

    def int_(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            return int(self.bad(path, f"expected an integer, got {value!r}", 0))
        return value

    def str_(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            return str(self.bad(path, f"expected a string, got {_kind(value)}", ""))
        return value

    def opt_str(self, value: Any, path: str) -> str | None:
        return None if value is None else self.str_(value, path)

    def bool_(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            return bool(self.bad(path, f"expected true or false, got {value!r}", False))
        return value

    def dict_(self, value: Any, path: str) -> dict[str, Any]:
        return dict(self.obj(value, path))

    def opt_dict(self, value: Any, path: str) -> dict[str, Any] | None:
        return None if value is None else self.dict_(value, path)

    def list_(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            return list(self.bad(path, f"expected a list, got {_kind(value)}", []))
        return value

    def name(self, value: Any, path: str) -> str:
        """A strategy's name: any non-empty string."""
        if not isinstance(value, str) or not value.strip():
            return str(self.bad(path, f"expected a strategy name (a non-empty string), got {value!r}", "?"))
        return value

    def choice(self, allowed: tuple[str, ...]) -> Callable[[Any, str], Any]:
        def check(value: Any, path: str) -> Any:
            if value not in allowed:
                return self.bad(path, f"expected one of {', '.join(allowed)}, got {value!r}", allowed[0])
            return value

        return check

    def trace(self, doc: Any) -> Trace:
        d = self.obj(doc, "")
        if "schema_version" not in d:
            raise TraceVersionError(
                f"{self.source or 'trace'}: no schema_version; supported versions: "
                + "; ".join(f"{v}: {s}" for v, s in SCHEMA_VERSIONS.items())
            )
        version = d["schema_version"]
        if version not in SCHEMA_VERSIONS:
            newer = (
                " (newer than this toolcall_lab; upgrade it)"
                if isinstance(version, int) and version > SCHEMA_VERSION
                else ""
            )
            raise TraceVersionError(
                f"{self.source or 'trace'}: schema_version {version!r} is not supported"
                f"{newer}; supported: " + "; ".join(f"{v}: {s}" for v, s in SCHEMA_VERSIONS.items())
            )
        m = self.get(d, "metadata", "", self.obj)
        origins = ORIGINS if version >= 2 else ("recorded", "imported", "scripted")
        origin = self.get(m, "origin", "metadata", self.choice(origins))
        if version == 1:
            label = self.get(m, "timings", "metadata", self.choice(V1_TIMINGS), "recorded")
            self.v1_timing = v1_timing(origin, label)
        meta = TraceMetadata(
            title=self.get(m, "title", "metadata", self.str_),
            origin=origin,
            provider=self.get(m, "provider", "metadata", self.opt_str, None),
            model=self.get(m, "model", "metadata", self.opt_str, None),
            created=self.get(m, "created", "metadata", self.opt_str, None),
            source=self.get(m, "source", "metadata", self.opt_str, None),
            notes=self.get(m, "notes", "metadata", self.str_, ""),
            mode=self.get(m, "mode", "metadata", lambda v, p: None if v is None else self.name(v, p), None),
            settings=self.get(m, "settings", "metadata", self.dict_, {}),
            recorded_wall_s=self.get(m, "recorded_wall_s", "metadata", self.opt_num, None),
            redactions=tuple(
                self.str_(v, f"metadata.redactions[{i}]")
                for i, v in enumerate(self.get(m, "redactions", "metadata", self.list_, []))
            ),
            parent=self.get(m, "parent", "metadata", self.parent, None),
        )
        if version == 1 and isinstance(meta.settings.get("dedupe"), bool):
            meta.settings.setdefault("dedupe_across_rounds", meta.settings["dedupe"])
        o = self.get(d, "outcome", "", self.obj)
        outcome = TraceOutcome(
            status=self.get(o, "status", "outcome", self.str_),
            reason=self.get(o, "reason", "outcome", self.str_),
            final_answer=self.get(o, "final_answer", "outcome", self.opt_str, None),
            error=self.get(o, "error", "outcome", self.opt_str, None),
            wall_time_s=self.get(o, "wall_time_s", "outcome", self.num, 0.0),
            hook_failures=tuple(
                self.hook_failure(f, f"outcome.hook_failures[{i}]")
                for i, f in enumerate(self.get(o, "hook_failures", "outcome", self.list_, []))
            ),
        )
        tools = self.get(d, "tools", "", self.list_)
        initial = self.get(d, "initial_messages", "", self.list_)
        for i, t in enumerate(tools):
            self.obj(t, f"tools[{i}]")
        for i, msg in enumerate(initial):
            self.obj(msg, f"initial_messages[{i}]")
        self.version = version
        previous: tuple[dict[str, Any], ...] = tuple(initial)
        read: list[Round] = []
        for i, r in enumerate(self.get(d, "rounds", "", self.list_)):
            rnd = self.round(r, f"rounds[{i}]", previous)
            read.append(rnd)
            previous = rnd.request_messages
        rounds = tuple(read)
        self.wall_time(o, outcome.wall_time_s, rounds)
        return Trace(
            metadata=meta,
            tools=tuple(tools),
            initial_messages=tuple(initial),
            rounds=rounds,
            outcome=outcome,
            schema_version=SCHEMA_VERSION,  # older versions are migrated on reading
        )

    def wall_time(self, o: Mapping[str, Any], wall: float, rounds: tuple[Round, ...]) -> None:
        """The run's wall time is never negative and never ends before what it recorded did (a
        model call, a tool execution, a client round trip): `compare` reads it as the run's time."""
        if wall < 0:
            self.contradiction("outcome.wall_time_s", f"negative duration {wall!r}")
        last, where = 0.0, ""
        for r in rounds:
            ends = [(r.model_call.ended_at, f"rounds[{r.round_index}]'s model call")]
            ends += [
                (e.ended_at, f"rounds[{r.round_index}] call {e.tool_call_id}")
                for e in r.executions
                if e.status != "skipped"
            ]
            ends += [
                (t.ended_at, f"rounds[{r.round_index}]'s round trip for {t.tool_call_id}")
                for t in r.round_trips
            ]
            for end, what in ends:
                if end > last:
                    last, where = end, what
        if "wall_time_s" not in o and not rounds:
            return
        if wall < last and not _same_time(wall, last, last):
            self.contradiction(
                "outcome.wall_time_s",
                f"{wall} ends before {where} does ({last}): the run's wall time contradicts its rounds",
            )

    def parent(self, value: Any, path: str) -> dict[str, str] | None:
        if value is None:
            return None
        d = self.obj(value, path)
        out = {k: self.get(d, k, path, self.str_) for k in ("source", "tool_call_id")}
        extra = set(d) - set(out)
        if extra:
            self.contradiction(
                path, f"unexpected key(s) {', '.join(sorted(extra))} (source and tool_call_id only)"
            )
        return out

    def timing(self, d: Mapping[str, Any], path: str) -> Timing:
        if self.v1_timing is not None:
            return self.v1_timing[0]
        t = self.get(d, "timing", path, self.obj)
        p = f"{path}.timing"
        return Timing(
            source=self.get(t, "source", p, self.choice(TIMING_SOURCES)),
            note=self.get(t, "note", p, self.str_, ""),
            covers=self.get(t, "covers", p, self.choice(TIMING_COVERS), "execution"),
        )

    def chunk_timing(self, d: Mapping[str, Any], path: str) -> ChunkTiming:
        if self.v1_timing is not None:
            chunks: ChunkTiming = self.v1_timing[1]
            return chunks if d.get("chunks") else "none"
        return cast(ChunkTiming, self.get(d, "chunk_timing", path, self.choice(CHUNK_TIMINGS)))

    def offsets(self, chunks: Sequence[TimedChunk], latency_s: float, path: str) -> None:
        """Chunk offsets are seconds from the request, never negative, never decreasing, never past
        the response's end: a replay times the stream (and eager its calls) by them, so an impossible
        one would silently stretch or squeeze the numbers."""
        previous = 0.0
        for i, c in enumerate(chunks):
            p = f"{path}.chunks[{i}].offset_s"
            if c.offset_s < 0:
                self.contradiction(p, f"negative offset {c.offset_s!r} (seconds from the request)")
            if c.offset_s < previous - _OFFSET_SLACK:
                self.contradiction(p, f"{c.offset_s!r} comes before the previous chunk's {previous!r}")
            if c.offset_s > latency_s + _OFFSET_SLACK:
                self.contradiction(
                    p, f"{c.offset_s!r} is after the response ended ({latency_s:.6g} s after the request)"
                )
            previous = max(previous, c.offset_s)

    def model_times(self, resp: Mapping[str, Any], mc: ModelCall, path: str) -> None:
        """A model call's times agree with each other, as a tool execution's do (`execution`): a
        replay sleeps the latency, so a contradiction would silently become a wrong number. The
        derived ``latency_s`` and ``ttfc_s`` are written for readers; on load they must match."""
        if mc.started_at < 0:
            self.contradiction(
                f"{path}.started_at", f"negative time {mc.started_at!r} (seconds from the run's start)"
            )
        if mc.ended_at < mc.started_at:
            self.contradiction(f"{path}.ended_at", f"ends ({mc.ended_at}) before it starts ({mc.started_at})")
        first = mc.first_chunk_at
        if first is not None and not mc.started_at - _OFFSET_SLACK <= first <= mc.ended_at + _OFFSET_SLACK:
            self.contradiction(
                f"{path}.first_chunk_at",
                f"{first} is outside the call (started_at {mc.started_at}, ended_at {mc.ended_at})",
            )
        for key, derived, what in (
            ("latency_s", mc.latency_s, "ended_at - started_at"),
            ("ttfc_s", mc.ttfc_s, "first_chunk_at - started_at"),
        ):
            given = self.get(resp, key, path, self.opt_num, None)
            if given is None and derived is not None and key in resp and resp[key] is None:
                self.contradiction(f"{path}.{key}", f"null, but {what} is {derived}")
            if given is not None and (derived is None or not _same_time(given, derived, mc.ended_at)):
                self.contradiction(
                    f"{path}.{key}",
                    f"{given} does not match {what} ({mc.ended_at if key == 'latency_s' else first} - "
                    f"{mc.started_at})",
                )

    def request(
        self, req: Mapping[str, Any], path: str, previous: tuple[dict[str, Any], ...]
    ) -> tuple[Any, ...]:
        """A round's request messages: whole (``messages``), or (version 3) the first ``kept`` of the
        previous round's request (the first round: of ``initial_messages``) and the ``added`` ones."""
        p = f"{path}.request"
        if "messages" in req or self.version < 3 or "kept" not in req:
            messages = self.get(req, "messages", p, self.list_)
            for i, msg in enumerate(messages):
                self.obj(msg, f"{p}.messages[{i}]")
            return tuple(messages)
        kept = self.get(req, "kept", p, self.int_)
        if not 0 <= kept <= len(previous):
            before = "initial_messages hold" if path == "rounds[0]" else "the previous round's request holds"
            self.contradiction(f"{p}.kept", f"{kept} messages kept, but {before} {len(previous)}")
        added = self.get(req, "added", p, self.list_)
        for i, msg in enumerate(added):
            self.obj(msg, f"{p}.added[{i}]")
        return (*previous[:kept], *added)

    def round(self, value: Any, path: str, previous: tuple[dict[str, Any], ...] = ()) -> Round:
        d = self.obj(value, path)
        req = self.get(d, "request", path, self.obj)
        resp = self.get(d, "response", path, self.obj)
        rp = f"{path}.response"
        chunks = []
        for i, c in enumerate(self.get(resp, "chunks", rp, self.list_)):
            c = self.obj(c, f"{rp}.chunks[{i}]")
            chunks.append(
                TimedChunk(
                    offset_s=self.get(c, "offset_s", f"{rp}.chunks[{i}]", self.num),
                    payload=self.get(c, "payload", f"{rp}.chunks[{i}]", self.dict_),
                )
            )
        model_call = ModelCall(
            started_at=self.get(resp, "started_at", rp, self.num),
            ended_at=self.get(resp, "ended_at", rp, self.num),
            first_chunk_at=self.get(resp, "first_chunk_at", rp, self.opt_num, None),
            chunks=tuple(chunks),
            tools_offered=self.get(req, "tools_offered", f"{path}.request", self.bool_, True),
            usage=self.get(resp, "usage", rp, self.opt_dict, None),
            timing=self.timing(resp, rp),
            chunk_timing=self.chunk_timing(resp, rp),
        )
        self.model_times(resp, model_call, rp)
        self.offsets(chunks, model_call.latency_s, rp)
        messages = self.request(req, path, previous)
        calls = tuple(
            self.call(c, f"{path}.tool_calls[{i}]")
            for i, c in enumerate(self.get(d, "tool_calls", path, self.list_, []))
        )
        findings = tuple(
            self.finding(f, f"{path}.findings[{i}]")
            for i, f in enumerate(self.get(d, "findings", path, self.list_, []))
        )
        executions = tuple(
            self.execution(e, f"{path}.tool_executions[{i}]")
            for i, e in enumerate(self.get(d, "tool_executions", path, self.list_, []))
        )
        return Round(
            round_index=self.get(d, "round_index", path, self.int_),
            mode=self.get(d, "mode", path, self.name),
            request_messages=messages,
            model_call=model_call,
            assistant_message=self.get(d, "assistant_message", path, self.dict_),
            tool_calls=calls,
            executions=executions,
            findings=findings,
            final=self.get(d, "final", path, self.bool_, False),
            final_reason=self.get(
                d,
                "final_reason",
                path,
                lambda v, p: None if v is None else self.choice(FINAL_REASONS)(v, p),
                None,
            ),
            client_round_trips=self.get(d, "client_round_trips", path, self.int_, 1),
            round_trips=tuple(
                self.round_trip(t, f"{path}.round_trips[{i}]")
                for i, t in enumerate(self.get(d, "round_trips", path, self.list_, []))
            ),
            strategy_notes=tuple(
                self.str_(v, f"{path}.strategy_notes[{i}]")
                for i, v in enumerate(self.get(d, "strategy_notes", path, self.list_, []))
            ),
        )

    def round_trip(self, value: Any, path: str) -> ClientRoundTrip:
        d = self.obj(value, path)
        started = self.get(d, "started_at", path, self.num)
        ended = self.get(d, "ended_at", path, self.num)
        if ended < started:
            self.contradiction(f"{path}.ended_at", f"ends ({ended}) before it starts ({started})")
        return ClientRoundTrip(
            tool_call_id=self.get(d, "tool_call_id", path, self.str_),
            position=self.get(d, "position", path, self.int_),
            started_at=started,
            ended_at=ended,
            timing=self.timing(d, path),
        )

    def hook_failure(self, value: Any, path: str) -> HookFailure:
        d = self.obj(value, path)
        opt_int = lambda v, p: None if v is None else self.int_(v, p)  # noqa: E731
        return HookFailure(
            hook=self.get(d, "hook", path, self.choice(HOOK_NAMES)),
            error=self.get(d, "error", path, self.str_),
            effect=self.get(d, "effect", path, self.str_),
            at=self.get(d, "at", path, self.num),
            round_index=self.get(d, "round_index", path, opt_int, None),
            tool_call_id=self.get(d, "tool_call_id", path, self.opt_str, None),
            position=self.get(d, "position", path, opt_int, None),
            timing=self.timing(d, path),
        )

    def call(self, value: Any, path: str) -> ToolCall:
        d = self.obj(value, path)
        return ToolCall(
            tool_call_id=self.get(d, "tool_call_id", path, self.str_),
            name=self.get(d, "name", path, self.str_),
            arguments=self.get(d, "arguments", path, self.str_),
            index=self.get(d, "index", path, self.int_, 0),
            choice_index=self.get(d, "choice_index", path, self.int_, 0),
            id_source=self.get(d, "id_source", path, self.choice(("provider", "fallback")), "provider"),
            complete=self.get(d, "complete", path, self.bool_, True),
        )

    def finding(self, value: Any, path: str) -> Finding:
        d = self.obj(value, path)
        return Finding(
            kind=self.get(d, "kind", path, self.str_),  # type: ignore[arg-type]
            message=self.get(d, "message", path, self.str_),
            severity=self.get(d, "severity", path, self.choice(("info", "warning", "error")), "warning"),
            chunk_index=self.get(
                d, "chunk_index", path, lambda v, p: None if v is None else self.int_(v, p), None
            ),
            choice_index=self.get(
                d, "choice_index", path, lambda v, p: None if v is None else self.int_(v, p), None
            ),
            call_index=self.get(
                d, "call_index", path, lambda v, p: None if v is None else self.int_(v, p), None
            ),
            tool_call_id=self.get(d, "tool_call_id", path, self.opt_str, None),
        )

    def execution(self, value: Any, path: str) -> ToolExecution:
        statuses = cast(tuple[str, ...], CALL_STATUSES)
        d = self.obj(value, path)
        started = self.get(d, "started_at", path, self.num)
        ended = self.get(d, "ended_at", path, self.num)
        duration = self.get(d, "duration_s", path, self.num, ended - started)
        if started < 0:
            self.contradiction(
                f"{path}.started_at", f"negative time {started!r} (seconds from the run's start)"
            )
        if ended < started or not _same_time(duration, ended - started, ended):
            self.contradiction(
                f"{path}.duration_s", f"{duration} does not match ended_at - started_at ({ended} - {started})"
            )
        queued = self.get(d, "queued_at", path, self.opt_num, None)
        if queued is not None and queued > started:
            self.contradiction(f"{path}.queued_at", f"{queued} is after started_at ({started})")
        returned = self.get(d, "returned_at", path, self.opt_num, None)
        if returned is not None and returned < ended:
            self.contradiction(f"{path}.returned_at", f"{returned} is before ended_at ({ended})")
        return ToolExecution(
            tool_call_id=self.get(d, "tool_call_id", path, self.str_),
            name=self.get(d, "name", path, self.str_),
            arguments=self.get(d, "arguments", path, self.str_),
            index=self.get(d, "index", path, self.int_, 0),
            status=self.get(d, "status", path, self.choice(statuses)),
            result=self.get(d, "result", path, self.str_),
            error=self.get(d, "error", path, self.opt_str, None),
            started_at=started,
            ended_at=ended,
            duplicate_of=self.get(d, "duplicate_of", path, self.opt_str, None),
            timing=self.timing(d, path),
            queued_at=queued,
            returned_at=returned,
            withheld_result=self.get(d, "withheld_result", path, self.opt_str, None),
        )

"""What a run leaves behind: per round, the model call (with timed chunks) and every tool execution.

All times are seconds from the start of the run, read from the run's clock, so the same records come
out of real time and of the virtual clock. Chunk offsets are seconds from the model request.

Every model call and tool execution says where its timing came from (`Timing`): a number measured
or recorded at the source is not the same evidence as a server-reported figure, a formula or a
constant, and tables and plots must be able to tell them apart. `to_dict()` on each record is its
JSON form (the trace file contract, `toolcall_lab.trace`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import Any, Literal, TypeVar, get_args

from toolcall_lab.messages import Finding, ToolCall

CallStatus = Literal[
    "ok",
    "error",
    "timeout",
    "unknown_tool",
    "invalid_arguments",
    "rejected",
    "withheld",
    "duplicate",
    "cancelled",
    "skipped",
    "not_recorded",
]
"""What happened to one call. Ran: ``ok``, ``error`` (the tool raised or reported an error), ``timeout``
(the harness's limit, `Tool.timeout_s`), ``withheld`` (it ran, `approve_result` kept its result
from the model). Did not run: ``unknown_tool``, ``invalid_arguments``, ``rejected`` (by
`approve_call`), ``duplicate``, ``skipped`` (first_only). ``cancelled``: cut off by an abort, a
cancellation or the run's deadline (the text says whether it had started). ``not_recorded``: an
imported call whose result the source does not hold (what it returned, and whether it ran, is
unknown; the model was sent `RESULT_NOT_RECORDED`)."""
CALL_STATUSES: tuple[CallStatus, ...] = get_args(CallStatus)
FAILED_STATUSES: frozenset[str] = frozenset({"error", "timeout", "unknown_tool", "invalid_arguments"})
HookName = Literal[
    "approve_call",
    "approve_result",
    "before_model_call",
    "on_tool_start",
    "on_tool_complete",
    "on_model_chunk",
    "on_event",
]
HOOK_NAMES: tuple[HookName, ...] = get_args(HookName)
FinalReason = Literal["max_rounds", "fail_fast", "empty_answer"]
"""Why a round was made without tools: the round budget was used up, `fail_fast` after a failing
round, or the model's answer after tool rounds was empty and it was asked once more."""
FINAL_REASONS: tuple[FinalReason, ...] = get_args(FinalReason)
Mode = Literal["sequential", "parallel", "serialized", "first_only"]
"""The four classic execution modes (the default set `compare` and ``bench`` run). Since issue 14 a
mode is one of the built-in strategies (`toolcall_lab.strategies`, which adds ``eager``); a record
names its strategy by any name (`StrategyName`)."""
MODES: tuple[Mode, ...] = get_args(Mode)
StrategyName = str
"""The name a round or trace records for the strategy it ran under: a built-in's (``parallel``,
``eager[cap=4]``) or a user strategy's own."""
MODE_NOT_EVIDENCED = "not evidenced"
"""What an imported round stores as its mode when its source shows none (no batch with a recorded
start and end for every call tells how the agent ran them): never a mode the source does not show.
Replays take their mode from ``metadata.mode`` (None then: sequential by default, said)."""

Origin = Literal["recorded", "imported", "scripted", "replayed"]
"""Where a run or trace came from: a live run recorded here, an import of someone else's log, a
scripted run, or a replay of a trace under some mode."""
ORIGINS: tuple[Origin, ...] = ("recorded", "imported", "scripted", "replayed")

TimingSource = Literal["recorded", "reported", "estimated", "placeholder"]
"""Where a duration came from:

- ``recorded``: timestamps taken at the source (measured by toolcall_lab on the real clock, or
  timestamps in an imported log);
- ``reported``: a figure a server reported about itself (e.g. ``openai-processing-ms``); the note says
  what it covers;
- ``estimated``: a stated formula (e.g. tokens x a rate); the note gives the formula;
- ``placeholder``: a constant (scripted latencies, simulated tools, modelled defaults).
"""
TIMING_SOURCES: tuple[TimingSource, ...] = ("recorded", "reported", "estimated", "placeholder")
TimingCovers = Literal["execution", "upper_bound", "wait"]
"""What a duration covers, whatever its source:

- ``execution``: the thing itself (a model request to its response, a tool's run);
- ``upper_bound``: the thing and time the source does not separate from it: a start an importer
  assumed (Claude Code: from the end of the response to the result line, so scheduling and any wait
  at a permission prompt are in it), the gap between two model spans (the agent's own work too);
- ``wait``: no tool ran; the time passed waiting for the user's decision at a permission prompt, or
  in a check that refused the call.

Only ``execution`` figures are measured tool or model time: `analysis` counts the others neither in
``measured_share`` nor under ``compare(timings="recorded")``."""
TIMING_COVERS: tuple[TimingCovers, ...] = ("execution", "upper_bound", "wait")
ChunkTiming = Literal["recorded", "spread", "estimated", "none"]
"""Chunk arrival offsets: ``recorded`` as they arrived, ``spread`` evenly over the latency by a script or
an importer (not evidence of when each chunk came), ``estimated`` by a stated formula (e.g. tokens at
a generation speed, `toolcall_lab.generation`; the response's timing note gives it), ``none`` for a
whole (non-streamed) response."""
CHUNK_TIMINGS: tuple[ChunkTiming, ...] = ("recorded", "spread", "estimated", "none")
PLACEHOLDER_KEY = "toolcall_lab_placeholder"
"""Key an importer puts in a response payload it wrote itself because the source holds no response
there (a recording that ends after tool calls, a response the agent rejected before logging it); the
value says why. Such a round is a marker, not a model call: a replay that ends on it is
``incomplete``, not a final answer (`Round.placeholder`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """Where one duration came from, and in a few words how (the formula, the header, the source)."""

    source: TimingSource = "recorded"
    note: str = ""
    covers: TimingCovers = "execution"
    """What the figure covers (see `TimingCovers`): only an ``execution`` figure is the time of the
    thing itself. Written to trace files only when it is not ``execution`` (schema version 3)."""

    @property
    def measured(self) -> bool:
        """Recorded or server-reported, and the time of the thing itself (not a wait, not a bound)."""
        return self.source in ("recorded", "reported") and self.covers == "execution"

    def to_dict(self) -> dict[str, str]:
        if self.covers != "execution":
            return {"source": self.source, "note": self.note, "covers": self.covers}
        return {"source": self.source, "note": self.note}


NOT_BATCH_EVIDENCE = "not evidence of how its batch ran"
"""Ends a tool execution's timing note when its span is not both recorded: the source gives its end
but not its start (an importer assumed one), or the tool did not run (its input was rejected, the
user declined it). `analysis.recorded_batch` leaves such calls out."""
SCREENED_ON_IMPORT = "screened out by toolcall_lab's loop when importing"
"""In the timing note of an imported call the import's own loop screened out (arguments not a
complete JSON object, an unknown tool, a duplicate): the source holds no result for it, so its tool
message is the one toolcall_lab would send, not one the source holds (the views label it so)."""
NOT_IN_SOURCE = "its tool message is not in the recording: what toolcall_lab would send"
MEASURED = Timing(source="recorded", note="measured by toolcall_lab on the real clock")
SIMULATED = Timing(source="placeholder", note="simulated on the virtual clock")
DECIDED = Timing(source="recorded", note="decided by the harness; no tool ran")

R = TypeVar("R")


CLOCK_DIGITS = 6
"""Times and durations an import derives from a source's clock are kept to the microsecond: an
epoch-second float (1.7e9 s) holds a time to about 0.2 us, so the digits below a microsecond of a
difference of two such floats are float noise (2.751540184 for 2.75154). One rule on every path:
placed as recorded, scheduled by the loop when the source's times do not fit, and every fallback
(`clock_time`)."""


def clock_time(value: float) -> float:
    """`value` (seconds, from a source's clock) to the microsecond (see `CLOCK_DIGITS`)."""
    return round(value, CLOCK_DIGITS)


def span(start: float, end: float) -> float:
    """`end` - `start` rounded to the nanosecond: a difference of two binary floats is not a decimal
    (12.345678 - 7.242678 is 5.103000000000001), and a duration derived from times stored to the
    microsecond must read as one (5.103). Below a nanosecond nothing toolcall_lab records is real."""
    return round(end - start, 9)


def positional_constructor(cls: type[R]) -> Callable[..., R]:
    """A constructor taking every field of a frozen slots dataclass positionally, in field order.

    Hot paths only (one execution record and two events per tool call): the generated ``__init__``
    of a frozen dataclass pays an ``object.__setattr__`` per field (1.6 us for `ToolExecution`).
    This builds the same values in a mutable twin class with the very same slots and then switches
    the instance's class, as the parser's constructors do (`toolcall_lab.messages`; CPython allows it
    between classes of identical layout): a plain attribute store per field, about a third of the
    time of setting each slot through its descriptor (and a sixth of ``__init__``'s). The result is an
    ordinary, equal, immutable instance. Every field must be passed, except a trailing run of fields
    with plain defaults (fields added later, so older call sites stay valid); there is no
    ``__post_init__``.
    """
    all_fields = list(fields(cls))  # type: ignore[arg-type]
    names = [f.name for f in all_fields]
    slots = tuple(getattr(cls, "__slots__", ()))
    if slots != tuple(names):  # (a twin must have the very same slots, in the same order)
        raise TypeError(f"{cls.__name__}: slots {slots} are not its fields {names}")
    twin = type(f"_{cls.__name__}Builder", (), {"__slots__": slots})
    env: dict[str, Any] = {"_new": object.__new__, "_twin": twin, "_cls": cls}
    params = list(names)
    for k in range(len(all_fields) - 1, -1, -1):
        default = all_fields[k].default
        if default is MISSING:
            break
        env[f"_default_{names[k]}"] = default
        params[k] = f"{names[k]}=_default_{names[k]}"
    lines = [f"def make({', '.join(params)}):", "    o = _new(_twin)"]
    lines += [f"    o.{name} = {name}" for name in names]
    lines += ["    o.__class__ = _cls", "    return o"]
    exec("\n".join(lines), env)  # the same technique dataclasses uses to build __init__
    make: Callable[..., R] = env["make"]
    make.__qualname__ = f"{cls.__name__}.positional"
    return make


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecution:
    """One tool call's outcome: the text the model sees, its status, and when it ran."""

    tool_call_id: str
    name: str
    arguments: str
    index: int
    status: CallStatus
    result: str
    """The content of the tool message sent back (an error text for failures)."""
    error: str | None = None
    started_at: float
    ended_at: float
    duplicate_of: str | None = None
    timing: Timing = MEASURED
    queued_at: float | None = None
    """When the strategy dispatched the call, if it then waited for a slot (the concurrency cap or a
    per-tool limit) until ``started_at``; None when it started as soon as it was dispatched."""
    returned_at: float | None = None
    """When the tool actually returned, if it reported a shorter duration than it took
    (`ToolOutcome.duration_s`): the record's span is the reported one, and from ``ended_at`` to
    ``returned_at`` the call still held its place (a sequential batch's next call starts then); a
    replay holds it as long. None otherwise."""
    withheld_result: str | None = None
    """For a ``withheld`` call: what the tool actually returned (the model was sent `result`, the
    ``approve_result`` hook's reason, instead). None for every other status."""

    @property
    def duration_s(self) -> float:
        return span(self.started_at, self.ended_at)

    @property
    def waited_s(self) -> float:
        """Seconds spent queued for a slot (0 when it never waited)."""
        return 0.0 if self.queued_at is None else self.started_at - self.queued_at

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES

    @property
    def answered(self) -> bool:
        """Whether a tool message goes back for this call (skipped calls get none)."""
        return self.status != "skipped"

    def to_message(self) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": self.tool_call_id, "content": self.result}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "arguments": self.arguments,
            "index": self.index,
            "status": self.status,
            "result": self.result,
            "error": self.error,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_s": self.duration_s,
            "duplicate_of": self.duplicate_of,
            "timing": self.timing.to_dict(),
        }
        if self.queued_at is not None:  # written only when the call waited (older files stay as they were)
            out["queued_at"] = self.queued_at
        if self.returned_at is not None:  # written only when the tool reported a shorter duration
            out["returned_at"] = self.returned_at
        if self.withheld_result is not None:  # written only for a withheld result
            out["withheld_result"] = self.withheld_result
        return out


make_execution = positional_constructor(ToolExecution)
"""`ToolExecution` from all its fields, positionally (see `positional_constructor`)."""


def count_failed(executions: tuple[ToolExecution, ...] | list[ToolExecution]) -> int:
    """Failed calls of one batch; a duplicate of a failed call counts as failed (it got no result
    either: the answer it points to is that call's error)."""
    failed = [e for e in executions if e.failed]
    if not failed:
        return 0
    ids = {e.tool_call_id for e in failed}
    return len(failed) + sum(e.status == "duplicate" and e.duplicate_of in ids for e in executions)


@dataclass(frozen=True, slots=True, kw_only=True)
class HookFailure:
    """A hook (or the event listener) raised: which one, for which call, what it raised, what the
    loop did about it (the policy in `toolcall_lab._execution.Hooks`)."""

    hook: HookName
    error: str
    """``ExceptionType: message`` as raised."""
    effect: str
    """What followed, e.g. "call rejected", "result withheld", "ignored; the run went on"."""
    at: float
    round_index: int | None = None
    tool_call_id: str | None = None
    position: int | None = None
    """The call's position in its batch (ids can repeat within a batch; positions cannot)."""
    timing: Timing = MEASURED
    """Where ``at`` came from (the run's clock: measured, or simulated on the virtual clock)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "hook": self.hook,
            "error": self.error,
            "effect": self.effect,
            "at": self.at,
            "round_index": self.round_index,
            "tool_call_id": self.tool_call_id,
            "position": self.position,
            "timing": self.timing.to_dict(),
        }


ROUND_TRIP_PLACEHOLDER = "RunConfig.round_trip_s, a constant: serialized mode does not measure a client"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientRoundTrip:
    """One extra client<->proxy round trip of serialized mode: the client sends a result back and
    receives the next call. A batch of N calls costs N-1 of them (the first call arrives with the
    model's response; the last result travels with the next model request)."""

    tool_call_id: str
    """The call handed out at the end of this round trip."""
    position: int
    started_at: float
    ended_at: float
    timing: Timing

    @property
    def duration_s(self) -> float:
        return span(self.started_at, self.ended_at)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool_call_id": self.tool_call_id,
            "position": self.position,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_s": self.duration_s,
            "timing": self.timing.to_dict(),
        }


make_round_trip = positional_constructor(ClientRoundTrip)


@dataclass(frozen=True, slots=True, kw_only=True)
class TimedChunk:
    """A streamed payload and when it arrived, in seconds after the request was sent."""

    offset_s: float
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    """One request to the model and the response as received."""

    started_at: float
    ended_at: float
    first_chunk_at: float | None
    chunks: tuple[TimedChunk, ...] = ()
    tools_offered: bool = True
    usage: dict[str, Any] | None = None
    timing: Timing = MEASURED
    chunk_timing: ChunkTiming = "recorded"

    @property
    def latency_s(self) -> float:
        return span(self.started_at, self.ended_at)

    @property
    def ttfc_s(self) -> float | None:
        return None if self.first_chunk_at is None else span(self.started_at, self.first_chunk_at)


@dataclass(frozen=True, slots=True, kw_only=True)
class Round:
    """One model call and the batch of tool calls it returned, as executed under one strategy."""

    round_index: int
    mode: StrategyName
    """The strategy the batch ran under (a built-in mode's name, or a user strategy's); an imported
    round whose source shows no mode stores `MODE_NOT_EVIDENCED`."""
    request_messages: tuple[dict[str, Any], ...]
    model_call: ModelCall
    assistant_message: dict[str, Any]
    tool_calls: tuple[ToolCall, ...] = ()
    executions: tuple[ToolExecution, ...] = ()
    """One per call, position by position (``executions[i]`` answers ``tool_calls[i]``; ids can repeat)."""
    findings: tuple[Finding, ...] = ()
    final: bool = False
    """A call made without tools (see `final_reason`)."""
    final_reason: FinalReason | None = None
    """Why this round offered no tools (None for rounds that offered them)."""
    client_round_trips: int = 1
    """Client<->proxy round trips this round cost: 1, and in serialized mode 1 + (N-1) for N calls."""
    round_trips: tuple[ClientRoundTrip, ...] = ()
    """Serialized mode: the N-1 extra client round trips of the batch, timed and labelled."""
    strategy_notes: tuple[str, ...] = ()
    """What the strategy said about this batch (e.g. ``eager`` running as parallel for want of chunk
    timing), so a table or plot can say how the figure came about."""

    @property
    def started_at(self) -> float:
        return self.model_call.started_at

    @property
    def ended_at(self) -> float:
        ends = [e.ended_at for e in self.executions if e.status != "skipped"]
        return max([self.model_call.ended_at, *ends])

    @property
    def duration_s(self) -> float:
        return span(self.started_at, self.ended_at)

    @property
    def round_trip_s(self) -> float:
        """Time spent on serialized mode's extra client round trips in this round."""
        return sum(t.duration_s for t in self.round_trips)

    @property
    def placeholder(self) -> str | None:
        """Why this round's response was written by an importer, not a model (None: a real response;
        see `PLACEHOLDER_KEY`)."""
        for chunk in self.model_call.chunks[:1]:
            why = chunk.payload.get(PLACEHOLDER_KEY)
            if why is not None:
                return str(why)
        return None

    @property
    def status(self) -> str:
        if not self.executions:
            return "final" if self.final or not self.tool_calls else "no_calls"
        failed = count_failed(self.executions)
        if failed == 0:
            return "ok"
        return "failed" if failed == len([e for e in self.executions if e.answered]) else "partial"

    def to_dict(self) -> dict[str, Any]:
        """The round's JSON form, as stored in trace files and rendered by the notebook views."""
        mc = self.model_call
        out: dict[str, Any] = {
            "round_index": self.round_index,
            "mode": self.mode,
            "final": self.final,
            "final_reason": self.final_reason,
            "client_round_trips": self.client_round_trips,
            "round_trips": [t.to_dict() for t in self.round_trips],
            "request": {"messages": list(self.request_messages), "tools_offered": mc.tools_offered},
            "response": {
                "started_at": mc.started_at,
                "ended_at": mc.ended_at,
                "first_chunk_at": mc.first_chunk_at,
                "ttfc_s": mc.ttfc_s,
                "latency_s": mc.latency_s,
                "usage": mc.usage,
                "timing": mc.timing.to_dict(),
                "chunk_timing": mc.chunk_timing,
                "chunks": [{"offset_s": c.offset_s, "payload": c.payload} for c in mc.chunks],
            },
            "assistant_message": self.assistant_message,
            "tool_calls": [call_to_dict(c) for c in self.tool_calls],
            "findings": [f.to_dict() for f in self.findings],
            "tool_executions": [e.to_dict() for e in self.executions],
        }
        if self.strategy_notes:  # written only when there are some (older files stay as they were)
            out["strategy_notes"] = list(self.strategy_notes)
        return out

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from toolcall_lab.notebook.display import round_bundle

        return round_bundle(self)

    def __repr__(self) -> str:
        return (
            f"<Round {self.round_index} {self.mode}: {len(self.tool_calls)} calls, "
            f"{self.duration_s:.3f}s, {self.status}>"
        )


def call_to_dict(call: ToolCall) -> dict[str, Any]:
    """A tool call's JSON form in trace files (arguments byte-exact)."""
    return {
        "tool_call_id": call.tool_call_id,
        "name": call.name,
        "arguments": call.arguments,
        "index": call.index,
        "choice_index": call.choice_index,
        "id_source": call.id_source,
        "complete": call.complete,
    }

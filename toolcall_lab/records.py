"""What a run leaves behind: per round, the model call (with timed chunks) and every tool execution.

All times are seconds from the start of the run, read from the run's clock, so the same records come
out of real time and of the virtual clock. Chunk offsets are seconds from the model request.

Every model call and tool execution says where its timing came from (`Timing`): a number measured
or recorded at the source is not the same evidence as a server-reported figure, a formula or a
constant, and tables and plots must be able to tell them apart. `to_dict()` on each record is its
JSON form (the trace file contract, `toolcall_lab.trace`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from toolcall_lab.messages import Finding, ToolCall

CallStatus = Literal[
    "ok",
    "error",
    "timeout",
    "unknown_tool",
    "invalid_arguments",
    "rejected",
    "duplicate",
    "cancelled",
    "skipped",
]
FAILED_STATUSES: frozenset[str] = frozenset({"error", "timeout", "unknown_tool", "invalid_arguments"})
Mode = Literal["sequential", "parallel", "serialized", "first_only"]
MODES: tuple[Mode, ...] = ("sequential", "parallel", "serialized", "first_only")

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
ChunkTiming = Literal["recorded", "spread", "none"]
"""Chunk arrival offsets: ``recorded`` as they arrived, ``spread`` evenly over the latency by a script or
an importer (not evidence of when each chunk came), ``none`` for a whole (non-streamed) response."""
CHUNK_TIMINGS: tuple[ChunkTiming, ...] = ("recorded", "spread", "none")


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """Where one duration came from, and in a few words how (the formula, the header, the source)."""

    source: TimingSource = "recorded"
    note: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "note": self.note}


MEASURED = Timing(source="recorded", note="measured by toolcall_lab on the real clock")
SIMULATED = Timing(source="placeholder", note="simulated on the virtual clock")
DECIDED = Timing(source="recorded", note="decided by the harness; no tool ran")


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

    @property
    def duration_s(self) -> float:
        return self.ended_at - self.started_at

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
        return {
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
        return self.ended_at - self.started_at

    @property
    def ttfc_s(self) -> float | None:
        return None if self.first_chunk_at is None else self.first_chunk_at - self.started_at


@dataclass(frozen=True, slots=True, kw_only=True)
class Round:
    """One model call and the batch of tool calls it returned, as executed under one mode."""

    round_index: int
    mode: Mode
    request_messages: tuple[dict[str, Any], ...]
    model_call: ModelCall
    assistant_message: dict[str, Any]
    tool_calls: tuple[ToolCall, ...] = ()
    executions: tuple[ToolExecution, ...] = ()
    findings: tuple[Finding, ...] = ()
    final: bool = False
    """The closing call made without tools (after max_rounds or fail_fast)."""
    client_round_trips: int = 1
    """Client<->proxy round trips this round cost (serialized mode: one per call)."""

    @property
    def started_at(self) -> float:
        return self.model_call.started_at

    @property
    def ended_at(self) -> float:
        ends = [e.ended_at for e in self.executions if e.status != "skipped"]
        return max([self.model_call.ended_at, *ends])

    @property
    def duration_s(self) -> float:
        return self.ended_at - self.started_at

    @property
    def status(self) -> str:
        if not self.executions:
            return "final" if self.final or not self.tool_calls else "no_calls"
        failed = sum(e.failed for e in self.executions)
        if failed == 0:
            return "ok"
        return "failed" if failed == len([e for e in self.executions if e.answered]) else "partial"

    def to_dict(self) -> dict[str, Any]:
        """The round's JSON form, as stored in trace files and rendered by the notebook views."""
        mc = self.model_call
        return {
            "round_index": self.round_index,
            "mode": self.mode,
            "final": self.final,
            "client_round_trips": self.client_round_trips,
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

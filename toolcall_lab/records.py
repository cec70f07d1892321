"""What a run leaves behind: per round, the model call (with timed chunks) and every tool execution.

All times are seconds from the start of the run, read from the run's clock, so the same records come
out of real time and of the virtual clock. Chunk offsets are seconds from the model request.
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

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from toolcall_lab.notebook.html import CSS, round_html
        from toolcall_lab.trace import round_to_dict

        return {
            "text/plain": repr(self),
            "text/html": f"<div class='tcl'>{CSS}{round_html(round_to_dict(self))}</div>",
        }

    def __repr__(self) -> str:
        return (
            f"<Round {self.round_index} {self.mode}: {len(self.tool_calls)} calls, "
            f"{self.duration_s:.3f}s, {self.status}>"
        )

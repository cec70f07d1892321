"""What a run is asked to do (`RunConfig`) and what it did (`RunResult`): value types, no machinery.

The loop produces a `RunResult`; traces, replay and analysis read it. Keeping both here (and not in
`loop.py`) keeps the import graph one-way: records <- runs <- trace, runs <- loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from toolcall_lab.events import RunEvent
from toolcall_lab.exceptions import UsageError
from toolcall_lab.records import MODES, Mode, Origin, Round, ToolExecution

Status = Literal["completed", "aborted", "failed"]
Reason = Literal[
    "final_answer", "max_rounds", "fail_fast", "all_calls_failed", "aborted", "model_error", "empty_response"
]
FINAL_NOTE = (
    "You have reached the maximum number of tool rounds ({max_rounds}). "
    "Do not call any more tools; give your final answer now from what you have."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """Settings of a run; validated on creation."""

    mode: Mode = "parallel"
    max_rounds: int = 10
    concurrency: int | None = None
    """Parallel mode: at most this many calls at once (None: no cap)."""
    error_policy: Literal["continue", "fail_fast"] = "continue"
    dedupe: bool = True
    round_trip_s: float = 0.0
    """Serialized mode: client<->proxy round-trip latency paid once per call handed out."""
    final_note: str = FINAL_NOTE
    params: dict[str, Any] = field(default_factory=dict)
    """Extra request parameters passed to the model (e.g. ``parallel_tool_calls``)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"RunConfig.mode={self.mode!r}: choose one of {', '.join(MODES)}")
        if not isinstance(self.max_rounds, int) or self.max_rounds < 1:
            raise UsageError(f"RunConfig.max_rounds={self.max_rounds!r}: must be an integer >= 1")
        if self.concurrency is not None and (not isinstance(self.concurrency, int) or self.concurrency < 1):
            raise UsageError(
                f"RunConfig.concurrency={self.concurrency!r}: must be an integer >= 1, or None for no cap"
            )
        if self.error_policy not in ("continue", "fail_fast"):
            raise UsageError(f"RunConfig.error_policy={self.error_policy!r}: use 'continue' or 'fail_fast'")
        if not self.round_trip_s >= 0:
            raise UsageError(f"RunConfig.round_trip_s={self.round_trip_s!r}: must be >= 0 seconds")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """Everything a run did: status and why, the rounds, the final transcript and the events."""

    status: Status
    reason: Reason
    mode: Mode
    rounds: tuple[Round, ...]
    messages: tuple[dict[str, Any], ...]
    initial_messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    events: tuple[RunEvent, ...]
    final_answer: str | None = None
    error: str | None = None
    ended_at: float = 0.0
    config: RunConfig = field(default_factory=RunConfig)
    origin: Origin = "recorded"
    """``scripted`` / ``replayed`` when the model was scripted or a replay, else ``recorded``."""

    @property
    def wall_time_s(self) -> float:
        return self.ended_at

    @property
    def executions(self) -> tuple[ToolExecution, ...]:
        return tuple(e for r in self.rounds for e in r.executions)

    @property
    def model_calls(self) -> int:
        return len(self.rounds)

    @property
    def client_round_trips(self) -> int:
        return sum(r.client_round_trips for r in self.rounds)

    @property
    def usage(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for r in self.rounds:
            for k, v in (r.model_call.usage or {}).items():
                if isinstance(v, int):
                    total[k] = total.get(k, 0) + v
        return total

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from toolcall_lab.notebook.display import run_result_bundle

        return run_result_bundle(self)

    def __repr__(self) -> str:
        calls = sum(len(r.tool_calls) for r in self.rounds)
        return (
            f"<RunResult {self.status}/{self.reason} mode={self.mode} rounds={len(self.rounds)} "
            f"calls={calls} wall={self.wall_time_s:.3f}s>"
        )

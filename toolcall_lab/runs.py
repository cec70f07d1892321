"""What a run is asked to do (`RunConfig`) and what it did (`RunResult`): value types, no machinery.

The loop produces a `RunResult`; traces, replay and analysis read it. Keeping both here (and not in
`loop.py`) keeps the import graph one-way: records <- runs <- trace, runs <- loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from toolcall_lab._rules import (
    CAP_RULE,
    COUNT_RULE,
    LIMIT_RULE,
    ROUND_TRIP_RULE,
    valid_cap,
    valid_count,
    valid_limit,
    valid_round_trip,
)
from toolcall_lab.events import RunEvent
from toolcall_lab.exceptions import UsageError
from toolcall_lab.records import HookFailure, Origin, Round, StrategyName, ToolExecution
from toolcall_lab.strategies.base import StrategyLike
from toolcall_lab.strategies.registry import StrategySpec, resolve

Status = Literal["completed", "aborted", "failed", "timeout", "incomplete"]
Reason = Literal[
    "final_answer",
    "max_rounds",
    "fail_fast",
    "all_calls_failed",
    "aborted",
    "cancelled",
    "interrupted",
    "deadline",
    "model_error",
    "hook_error",
    "empty_response",
    "replay_divergence",
    "recording_incomplete",
    "strategy_error",
    "agent_finished",
    "stopped_as_recorded",
]
"""Why a run ended. Completed: ``final_answer``, ``max_rounds`` / ``fail_fast`` (answered by the final
call without tools), ``agent_finished`` (a replay of a recording whose agent ended its own run with
its submit or finish tool: no model response follows it). Failed: ``all_calls_failed`` (``continue``
policy with ``all_failed_policy="stop"``), ``model_error``,
``hook_error`` (``before_model_call`` raised), ``empty_response``, ``replay_divergence`` (only in the
``partial_result`` of a `ReplayDivergenceError`), ``strategy_error`` (the strategy raised, or returned
with calls neither run nor skipped: a bug in the strategy). Incomplete: ``recording_incomplete`` (a
replay that ended on a round an importer wrote where the recording holds no response,
`Round.placeholder`), ``stopped_as_recorded`` (such a replay where the recording says what stopped the
run: an iteration or message limit, a compaction; the error gives the recorded reason).
Aborted: ``aborted`` (`AbortHandle`),
``cancelled`` (the task was cancelled), ``interrupted`` (KeyboardInterrupt or another BaseException;
the exception propagates with the record as ``partial_result``). Timeout: ``deadline`` (``timeout_s``)."""
FINAL_NOTE = (
    "You have reached the maximum number of tool rounds ({max_rounds}). "
    "Do not call any more tools; give your final answer now from what you have."
)
EMPTY_ANSWER_NOTE = (
    "[SYSTEM] Your last reply was empty. Reply to the user now with your final answer, "
    "based on the tool results above."
)
"""Sent (as a user message) when the model answers with nothing after tool rounds (SiYuan design)."""
ALL_FAILED_NOTE = "All tool calls failed. Please check the error messages and try again."
"""Appended as the assistant's message when every call of a round failed under ``continue`` (Dolphin)."""
TOOL_ONLY_PARAMS = frozenset({"parallel_tool_calls", "tool_choice", "tools", "functions", "function_call"})
"""Request parameters that only make sense with ``tools`` (and the legacy ``functions`` API): dropped
from calls made without tools, which must offer none (the OpenAI API rejects the first two there)."""
LOOP_PARAMS = frozenset({"messages", "tools", "functions", "function_call"})
"""Request parameters the loop sends itself (the conversation, the registry's tools): not settable
through `RunConfig.params`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """Settings of a run; validated on creation."""

    mode: StrategySpec = "parallel"
    """The execution strategy: a built-in name (``sequential``, ``parallel``, ``serialized``,
    ``first_only``, ``eager``, with options such as ``parallel[cap=4]``), a ``module:attribute``
    spec, or a strategy object (see `toolcall_lab.strategies`)."""
    max_rounds: int = 10
    concurrency: int | None = None
    """At most this many calls at once, for strategies that run calls concurrently and set no cap of
    their own (``parallel``, ``eager``; None: no cap)."""
    error_policy: Literal["continue", "fail_fast"] = "continue"
    """``continue``: failed calls are results; a round where every call failed is handled by
    `all_failed_policy`. ``fail_fast``: a round with any failed call is followed by one final call
    without tools."""
    all_failed_policy: Literal["stop", "continue"] = "stop"
    """Under ``error_policy="continue"``, a round where every call failed (a duplicate of a failed call
    counts as failed): ``stop`` (the Dolphin design, default) ends the run (``failed/all_calls_failed``)
    with `ALL_FAILED_NOTE` as the assistant's message; ``continue`` sends the errors back to the model
    like any other results (imported traces use it: the recorded agent went on)."""
    dedupe: bool = True
    """Within a batch: a call with the same tool and arguments as an earlier call of the same batch is
    answered "not executed: duplicates call ..." instead of running."""
    dedupe_across_rounds: bool = False
    """Also across rounds: a call repeating a successful call of an earlier round is not run. Off by
    default (a polling tool must run again); per tool, `Tool.idempotent` turns it on for that tool."""
    round_trip_s: float = 0.0
    """Serialized mode: one client<->proxy round trip, charged N-1 times for a batch of N calls (a
    placeholder constant in the record, never a measurement)."""
    timeout_s: float | None = None
    """Deadline for the whole run: past it, calls in flight are cancelled and the run ends with status
    ``timeout`` and a consistent partial record."""
    final_note: str = FINAL_NOTE
    empty_answer_note: str = EMPTY_ANSWER_NOTE
    all_failed_note: str = ALL_FAILED_NOTE
    params: dict[str, Any] = field(default_factory=dict)
    """Extra request parameters passed to the model (e.g. ``parallel_tool_calls``; `TOOL_ONLY_PARAMS`
    are left out of calls made without tools; `LOOP_PARAMS` are the loop's own and refused)."""

    def __post_init__(self) -> None:
        resolve(self.mode, "RunConfig.mode")
        if not valid_count(self.max_rounds):
            raise UsageError(f"RunConfig.max_rounds={self.max_rounds!r}: {COUNT_RULE}")
        if not valid_cap(self.concurrency):
            raise UsageError(f"RunConfig.concurrency={self.concurrency!r}: {CAP_RULE}")
        if self.error_policy not in ("continue", "fail_fast"):
            raise UsageError(f"RunConfig.error_policy={self.error_policy!r}: use 'continue' or 'fail_fast'")
        if self.all_failed_policy not in ("stop", "continue"):
            raise UsageError(
                f"RunConfig.all_failed_policy={self.all_failed_policy!r}: use 'stop' (end the run) or "
                "'continue' (send the errors back to the model)"
            )
        if not isinstance(self.params, dict):
            raise UsageError(f"RunConfig.params={self.params!r}: must be a dict of request parameters")
        owned = sorted(LOOP_PARAMS.intersection(self.params))
        if owned:
            raise UsageError(
                f"RunConfig.params sets {owned}: the loop sends the conversation and the registry's tools "
                "itself; pass messages to run() and register the tools instead"
            )
        if not valid_round_trip(self.round_trip_s):
            raise UsageError(f"RunConfig.round_trip_s={self.round_trip_s!r}: {ROUND_TRIP_RULE}")
        if not valid_limit(self.timeout_s):
            raise UsageError(f"RunConfig.timeout_s={self.timeout_s!r}: {LIMIT_RULE}, or None for no deadline")
        for name in ("dedupe", "dedupe_across_rounds"):
            if not isinstance(getattr(self, name), bool):
                raise UsageError(f"RunConfig.{name}={getattr(self, name)!r}: use True or False")

    @property
    def strategy(self) -> StrategyLike:
        """The strategy `mode` names."""
        return resolve(self.mode, "RunConfig.mode")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """Everything a run did: status and why, the rounds, the final transcript and the events."""

    status: Status
    reason: Reason
    mode: StrategyName
    """The name of the strategy the run used."""
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
    hook_failures: tuple[HookFailure, ...] = ()
    """Every hook (and event listener) that raised during the run, in order, with what followed."""

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

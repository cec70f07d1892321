"""The typed event stream of a run; every event carries the run clock's timestamp (`at`).

Under every strategy, built-in or not, a call's ACTION comes when it starts and its OBSERVATION when
it finishes (a call screened out, e.g. a duplicate, is observed at once): under ``parallel`` the
batch's ACTIONs all come at one instant once the response has ended and the OBSERVATIONs in the order
the calls finish; under ``eager`` an ACTION may come while the model still streams (before the round's
``model_response``). Results still go back to the model in model order, once the batch has finished.
Whatever ends a run, every ACTION gets its OBSERVATION (a call cut off is observed with its
``cancelled`` record). A call cut off before it started has neither (it never started): the
``run_finished`` event carries the run's record (`RunFinished.rounds`), which holds it.
A listener that raises is recorded as a hook failure (``on_event``) and the run goes on.
Every event of one run carries the same `run_id` (the loop sets it as it emits the event), so a
listener fed by two runs at once (``asyncio.gather``) can tell them apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from toolcall_lab.messages import ToolCall
from toolcall_lab.records import (
    ChunkTiming,
    HookFailure,
    Round,
    Timing,
    ToolExecution,
    positional_constructor,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundStarted:
    kind: Literal["round_started"] = "round_started"
    at: float
    round_index: int
    run_id: str = ""
    """The run the event belongs to (set by the loop as it emits the event)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequested:
    kind: Literal["model_request"] = "model_request"
    at: float
    round_index: int
    n_messages: int
    tools_offered: bool
    run_id: str = ""
    """The run the event belongs to (set by the loop as it emits the event)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponded:
    kind: Literal["model_response"] = "model_response"
    at: float
    round_index: int
    ttfc_s: float | None
    latency_s: float
    n_tool_calls: int
    usage: dict[str, Any] | None = None
    timing: Timing | None = None
    """Where the latency came from (the `ModelCall` label), so a live view labels it as a trace would."""
    chunk_timing: ChunkTiming | None = None
    n_chunks: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    """The model call's own times (`ModelCall.started_at`/`ended_at`): `at` is when the event was
    sent, after the response was parsed, so a view draws the call from these."""
    run_id: str = ""
    """The run the event belongs to (set by the loop as it emits the event)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Thought:
    kind: Literal["thought"] = "thought"
    at: float
    round_index: int
    text: str
    run_id: str = ""
    """The run the event belongs to (set by the loop as it emits the event)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    kind: Literal["action"] = "action"
    at: float
    round_index: int
    call: ToolCall
    run_id: str = ""
    """The run the event belongs to (set by the loop as it emits the event)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    kind: Literal["observation"] = "observation"
    at: float
    round_index: int
    execution: ToolExecution
    run_id: str = ""
    """The run the event belongs to (set by the loop as it emits the event)."""

    @property
    def duration_s(self) -> float:
        return self.execution.duration_s


make_action = positional_constructor(Action)
make_observation = positional_constructor(Observation)


@dataclass(frozen=True, slots=True, kw_only=True)
class HookFailed:
    """A hook raised; `failure` says which, for which call, and what the loop did about it."""

    kind: Literal["hook_failed"] = "hook_failed"
    at: float
    round_index: int | None
    failure: HookFailure
    run_id: str = ""
    """The run the event belongs to (set by the loop as it emits the event)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalAnswer:
    kind: Literal["final_answer"] = "final_answer"
    at: float
    round_index: int
    text: str
    run_id: str = ""
    """The run the event belongs to (set by the loop as it emits the event)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent:
    kind: Literal["error"] = "error"
    at: float
    round_index: int | None
    message: str
    run_id: str = ""
    """The run the event belongs to (set by the loop as it emits the event)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    kind: Literal["run_finished"] = "run_finished"
    at: float
    status: str
    reason: str
    run_id: str = ""
    """The run the event belongs to (set by the loop as it emits the event)."""
    rounds: tuple[Round, ...] | None = field(default=None, repr=False, compare=False)
    """The run's record as it ends (the result's `rounds`): every call, including those a cut
    (abort, deadline, hook failure) stopped before they started, which no ACTION announced. A live
    view ends on it, so it shows what the result holds; None from an emitter that does not give it."""


RunEvent = (
    RoundStarted
    | ModelRequested
    | ModelResponded
    | Thought
    | Action
    | Observation
    | HookFailed
    | FinalAnswer
    | ErrorEvent
    | RunFinished
)
EventListener = Callable[[RunEvent], Any]

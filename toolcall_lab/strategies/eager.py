"""``eager``: each call starts as soon as its arguments are complete, while the model still streams.

A call is complete once its accumulated arguments form a complete JSON object, or, failing that,
once a later call starts or the stream ends, whichever comes first (`toolcall_lab.strategies
._completion`). Calls whose arguments never complete are not executed (the parser's verdict at the
end of the stream, as under every strategy). The next model request is sent once the stream has
ended and every call of the batch has finished. Honours the concurrency cap and per-tool limits
(a call that waits for a slot records when it was queued).

A run drives `Eager` (and a subclass that keeps its `run`) without a task of its own
(`runs_without_task`): the batch dispatches each call as it arrives while the run's task receives the
stream, and `Eager.run` is called once the stream has ended, to dispatch what still waits and join.

On the real clock, completeness is seen as chunks arrive. In a replay on the virtual clock, the
recorded chunk offsets say when each call became complete, so the evidence matters and each round
says what it rests on (`Round.strategy_notes`):

- ``chunk_timing == "recorded"``: offsets as the chunks arrived (or as an imported log stamped
  them, e.g. Claude Code's per-block lines): the overlap is evidence.
- ``"spread"``: offsets spread evenly over the response by a script or an importer, or
  ``"estimated"`` by a stated formula (a generation speed, `toolcall_lab.generation`): when each call
  became complete is a model of the stream, so the overlap is modelled, not measured.
- ``"none"`` (a whole, non-streamed body or a single chunk): no call can be seen complete before
  the response ends, so every call starts then: ``eager`` behaves as ``parallel``, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from toolcall_lab.strategies._slots import check_limits
from toolcall_lab.strategies.base import Strategy, check_strategy_name, unchanged
from toolcall_lab.strategies.batch import Batch
from toolcall_lab.strategies.parallel import made_as, option_name

FALLBACK_NOTE = (
    "eager ran as parallel: the response has no chunk timing (chunk_timing 'none': a whole body or a "
    "single chunk), so no call could be seen complete before it ended; every call started then"
)
SPREAD_NOTE = (
    "eager on modelled chunk timing: the offsets are spread evenly over the response (chunk_timing "
    "'spread', by a script or an importer), so when each call became complete, and the overlap "
    "with the stream, is a model, not a measurement"
)
ESTIMATED_NOTE = (
    "eager on modelled chunk timing: the offsets come from a stated formula (chunk_timing 'estimated'; "
    "the response's timing note gives it), so when each call became complete, and the overlap with "
    "the stream, is a model, not a measurement"
)

_NOTES = {"none": FALLBACK_NOTE, "spread": SPREAD_NOTE, "estimated": ESTIMATED_NOTE}
"""The note a round under eager gets, by its chunk timing (``recorded``: none)."""


class Eager(Strategy):
    """Start each call as soon as its arguments are complete, overlapping tools with the stream.

    Args:
        concurrency: cap on calls at once (None: a subclass's own ``concurrency`` attribute, else the
            run's ``concurrency`` setting).
        tool_limits: per tool, the most calls at once, e.g. ``{"web_search": 2}`` (None: a subclass's
            own ``tool_limits`` attribute, else none).
        name: defaults to a subclass's own ``name`` (``class Mine(Eager): name = "mine"``),
            else ``eager`` with the options, e.g. ``eager[cap=4,web_search=2]``.
    """

    streams = True

    def __init__(
        self,
        *,
        concurrency: int | None = None,
        tool_limits: Mapping[str, int] | None = None,
        name: str | None = None,
    ) -> None:
        if concurrency is None:  # (a subclass's own ``concurrency = 1`` / ``tool_limits = {...}``)
            concurrency = type(self).concurrency
        if tool_limits is None:
            tool_limits = type(self).tool_limits
        self.tool_limits = check_limits(made_as(self, name), concurrency, tool_limits)
        self.concurrency = concurrency
        self.name = type(self).name or self.runs_as() or "eager" if name is None else name
        check_strategy_name(self, made_as(self, name))

    def runs_as(self) -> str | None:
        return unchanged(self, Eager, option_name("eager", self.concurrency, self.tool_limits or {}))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))

    async def run(self, batch: Batch) -> None:
        # `async for pos in batch.arrivals(): batch.start(pos)`, without the generator and the
        # per-call checks: calls that arrive together are dispatched at one clock reading, as
        # `run_parallel` does a batch (each checked first, then their ACTIONs, then their tasks).
        # A run calls this once the stream has ended (`toolcall_lab.loop`: the batch dispatched what
        # arrived before, with no task for the strategy); called while the model streams (a subclass's
        # ``super().run(batch)``), it hands the arrivals to the batch until the stream's end.
        if batch._arrive_error is not None:  # (dispatching an arrival raised: the run stops)
            raise batch._arrive_error
        group = batch._group_for()
        queue = batch._arrivals
        group.dispatch_queued(queue)  # what arrived and waits, at one clock reading
        if batch._streaming:
            batch._dispatch_arrivals()
            try:
                while await batch._next_arrivals():  # (the stream's end: the calls complete only then)
                    group.dispatch_queued(queue)
            finally:
                batch._stop_dispatching()
        if batch._driven:  # the run's own task, once the stream has ended: nothing else waits for the
            if batch._group is group:  # batch (`join`, without its bookkeeping of the tasks waiting in it)
                batch._group = None
            await group.wait()
        else:
            await batch.join()
        if batch._calls:
            note = _NOTES.get(batch._chunk_timing)  # type: ignore[arg-type]
            if note is not None:
                batch.note(note)


def runs_without_task(strategy: object) -> bool:
    """Whether a run may drive `strategy` as the built-in ``eager`` (`Eager` or a subclass that keeps
    its `Eager.run`): the batch dispatches the calls as they arrive (`Batch._dispatch_arrivals`) and
    the strategy is called once the stream has ended, in the run's own task, with no task of its own
    and none for the stream. A strategy with its own ``run`` gets a task that runs alongside the
    stream (`toolcall_lab.loop`)."""
    return isinstance(strategy, Eager) and type(strategy).run is Eager.run

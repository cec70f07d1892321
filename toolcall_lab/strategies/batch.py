"""The batch a strategy schedules: the tool calls of one model response, and the means to run them.

A `Batch` is what `Strategy.run` receives. It owns everything a strategy must not get wrong, so a
strategy only decides *when* each call runs:

- each call runs at most once, and every run is recorded: `run`, `start`, `run_parallel`,
  `run_sequential` and `skip` refuse a position that was already run, started or skipped (a
  `UsageError` naming it), and a position that is not a call of the batch (or, while the model
  streams, has not arrived yet); there is no other way to run a call (the executor, the events and
  the records are the batch's own, private);
- running a call goes through the run's executor: screening (arguments, unknown tools,
  de-duplication, ``approve_call``), the tool's timeout, exceptions as data, ``approve_result`` and
  the other hooks under the run's hook policy, timing on the run's clock (real or virtual);
- every call that runs gets one ACTION and one OBSERVATION event; the concurrency cap and the
  per-tool limits apply to `run`, `start` and `run_parallel` (a call that waits for a slot records
  when it was queued, `ToolExecution.queued_at`);
- results are kept by position and go back to the model in model order, whatever order the
  strategy ran them in; when the run is cut off (abort, cancellation, the deadline, an
  interruption) finished calls keep their outcome, the others are recorded as cancelled, and every
  ACTION gets its OBSERVATION.

**Screening and approval, one rule for every strategy.** Once the model's response has ended, the
first call a strategy runs (by any means) screens the whole batch in model order first: the checks,
and ``approve_call`` for every call, one after another, before any call starts (built-in or not;
``first_only`` looks only at the call it runs). Under a strategy that streams (``eager``), calls are
screened one by one as each arrives: ``approve_call`` runs per call, before that call starts, one
call at a time in arrival order (never two approvals at once).

**De-duplication: the first copy that actually runs answers for the others.** A call equal to an
earlier one of the batch (same tool, same arguments) is answered "duplicates call ..." only once
that call has run and been answered (it may be an error; the answer stands for both): until then it
waits (its record is made when that answer exists). If that call does not run (skipped, rejected by
``approve_call``, cancelled) or the strategy has not started it when the duplicate's turn comes, the
duplicate runs in its place (``approve_call`` is asked about it then) and the other, if it runs
later, is its duplicate. A run cut off meanwhile records the waiting duplicate as cancelled, not
started. So the outcome is the same under every strategy and whatever a hook's timing.

While the model streams (strategies with ``streams = True``), calls arrive one by one as each
becomes complete (`arrivals`); ``calls`` stays empty until the stream has ended (read an arrived call
with `call`), and then holds the final batch.
"""

from __future__ import annotations

import asyncio
import operator
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from toolcall_lab._copy import read_only
from toolcall_lab._execution import Executor, Interrupted
from toolcall_lab._hooks import wait_until_stopped
from toolcall_lab.events import RunEvent, make_action, make_observation
from toolcall_lab.exceptions import ReplayDivergenceError, UsageError
from toolcall_lab.messages import Finding, ToolCall
from toolcall_lab.records import ClientRoundTrip, ToolExecution
from toolcall_lab.strategies._bulk import TASK_NAME, run_all
from toolcall_lab.strategies._slots import Slots

Emit = Callable[[RunEvent], None]
_INDEX = operator.attrgetter("index")
_Task = asyncio.Task  # (one lookup less per call dispatched)


def _drop(event: RunEvent) -> None:
    return None


_NO_LIMITS: Mapping[str, int] = MappingProxyType({})
_NOT_STREAMING: deque[int] = deque(maxlen=0)
"""The arrivals of every batch that does not stream: always empty (it holds nothing)."""
_NO_CALLS: Mapping[int, ToolCall] = MappingProxyType({})
_NO_MOVES: Mapping[int, int] = MappingProxyType({})
_UNANSWERED = frozenset({"skipped", "rejected", "cancelled", "duplicate", "unknown_tool"})
"""Outcomes of a call that did not run and answer: a duplicate of it must not claim its answer."""


_UNMEASURED_CHUNKS = {
    "none": "the response has no chunk timing (chunk_timing 'none': a whole body or a single chunk), so "
    "every call arrived at its end: nothing could start while the model streamed",
    "spread": "on modelled chunk timing (chunk_timing 'spread': offsets spread evenly over the "
    "response), so when each call arrived, and any overlap with the stream, is a model, not a measurement",
    "estimated": "on modelled chunk timing (chunk_timing 'estimated': offsets from a stated formula), so "
    "when each call arrived, and any overlap with the stream, is a model, not a measurement",
}
"""Why a streaming strategy's overlap with the stream is not measured, by `chunk_timing`."""


class Batch:
    """One batch of tool calls as a strategy sees it (see the module docstring).

    What a strategy reads: `calls` (model order; empty while the model streams, final once the
    stream has ended), `call(pos)` (also an arrived call while streaming), `round_index`,
    `strategy`, `streaming`, `concurrency`, `tool_limits`, `chunk_timing`, `results`, `now()`.

    What it does: `run(pos)` (one call, awaited), `start(pos)` + `join()` (concurrently, in the
    batch's tasks), `run_sequential()` / `run_parallel()` (the classic modes), `skip(pos, why)`
    (never answered, like the legacy first-only bug), `note(text)` (recorded with the round),
    `arrivals()` (positions as calls become complete while the model streams). Each call runs at
    most once; a position is an ``int`` from 0 to ``len(calls) - 1``.
    """

    # Class-level defaults for what most batches never change (a batch is made per model response;
    # setting fewer attributes keeps that cost off small batches). Lists are made per batch.
    _tool_messages: list[dict[str, Any]] | None = None
    """Set by strategies that build the tool messages themselves (serialized: from the session)."""
    _client_round_trips = 1
    _chunk_timing: str | None = None
    _streaming = False
    _assistant: dict[str, Any] | None = None  # the record's own: strategies get `_view` of it
    _view: Mapping[str, Any] | None = None
    _views: tuple[ToolCall, ...] | None = None  # what `calls` hands out (copies of the record's)
    _concurrency: int | None = None
    _tool_limits: Mapping[str, int] = _NO_LIMITS
    _round_trip_s = 0.0
    _screened = 0  # positions below this are screened (in model order)
    _checked: list[bool] | None = None  # streaming: screened one by one
    _lock: asyncio.Lock | None = None  # one approval (or whole-batch screening) at a time
    _settling: asyncio.Future[None] | None = None  # a duplicate waits here for its original
    _took_over: set[int] | None = None  # duplicates whose turn made them the copy that runs
    _approved: set[int] | None = None  # approved originals that became duplicates (asked only once)
    _slots: Slots | None = None
    _group: _Group | None = None
    _wake: asyncio.Future[None] | None = None
    _final = True
    _arrivals: deque[int] = _NOT_STREAMING
    _indices: Mapping[int, ToolCall] = _NO_CALLS  # streaming: position -> the call as it arrived early
    _moved: Mapping[int, int] = _NO_MOVES
    _runners: dict[int, asyncio.Task[Any]] | None = None  # `run` in progress: position -> its task
    _groups: list[_Group] | None = None  # every group the batch made (drained when it closes)
    _joiners: set[asyncio.Task[Any]] | None = None  # tasks waiting in `join`
    _stopped_at: dict[int, float] | None = None  # calls the harness cancelled: when that took effect
    _queued: dict[int, float] | None = None  # calls that waited for a slot: since when (kept on
    # every path, a call cut off while it waited or ran too)
    _draining = False  # the harness is cancelling the batch's calls (not the strategy)
    _stopping: set[asyncio.Task[Any]] | None = None  # call tasks the harness cancelled (a call that
    # must stop the run stops its siblings): their cancellation is the run's, not the strategy's
    _closed = False  # the round is recorded: the batch runs nothing more
    _flushing = 0  # eager (`_dispatch_arrivals`): 0 no; 1 each arrival at once; 2 arrivals wait
    # for the task of the call dispatched first at this step of the loop (until it first runs)
    _on_fail: Callable[[BaseException], None] | None = None  # told what must stop the run mid-stream
    _arrive_error: BaseException | None = None  # what dispatching an arrival raised (re-raised)
    _driven = False  # the run dispatches arrivals, and calls the strategy in its own task
    _changed: frozenset[int] = frozenset()  # call indices that started early, then changed
    _run_id = ""  # the run's id, on every event the batch makes (`RunEvent.run_id`)

    def __init__(
        self,
        executor: Executor,
        calls: Sequence[ToolCall] = (),
        *,
        round_index: int = 0,
        emit: Emit | None = None,
        strategy: str = "",
        assistant_message: dict[str, Any] | None = None,
        concurrency: int | None = None,
        tool_limits: Mapping[str, int] | None = None,
        round_trip_s: float = 0.0,
        streaming: bool = False,
        skips_calls: bool = False,
        run_id: str = "",
    ) -> None:
        self._executor = executor
        if run_id:  # (stamped on the events the batch makes: the loop may append them as they are)
            self._run_id = run_id
        self._skips_calls = skips_calls
        self._round_index = round_index
        self._strategy = strategy
        if assistant_message is not None:
            self._assistant = assistant_message
        if concurrency is not None or tool_limits:
            self._concurrency = concurrency
            if tool_limits:
                if type(tool_limits) is not MappingProxyType:
                    tool_limits = MappingProxyType(dict(tool_limits))
                self._tool_limits = tool_limits
            self._slots = Slots(concurrency, self._tool_limits)
        if round_trip_s:
            self._round_trip_s = round_trip_s
        self._calls: tuple[ToolCall, ...] = tuple(calls)
        # while streaming, room for the calls to come: 8 at first (a list of 8 costs what an empty
        # one does), doubled as needed (`_ensure`); `_end_stream` trims it to the final batch
        n = max(len(self._calls), 8) if streaming else len(self._calls)
        self._done: list[ToolExecution | None] = [None] * n  # each call's record once settled
        self._started: list[float | None] = [None] * n  # when each call started running
        self._claimed = [False] * n  # run, started or skipped through the public API
        self._round_trips: list[ClientRoundTrip] = []
        self._notes: list[str] = []
        if tool_limits and round_index == 0:  # (said once per run: a typo limits nothing)
            unknown = sorted(k for k in tool_limits if k not in executor.tools)
            if unknown:
                self._notes.append(
                    f"{strategy}: per-tool limit(s) for {', '.join(map(repr, unknown))}, which no tool "
                    "of this run is named: they limit nothing"
                )
        self._findings: list[Finding] = []
        self._emit: Emit = emit or _drop
        self._open = [False] * n  # an ACTION was emitted and its OBSERVATION not yet
        self._pre: list[ToolExecution | None] = [None] * n
        self._dedupe = executor.new_batch()
        self._streamed = streaming
        if streaming:
            self._streaming = True
            self._final = False
            self._assistant = self._chunk_timing = None  # (set at the stream's end: made here, stored
            # among the attributes every batch has, that store costs what any other does)
            self._checked = [False] * n
            self._arrivals = deque()
            self._indices = {}

    def __repr__(self) -> str:
        settled = sum(d is not None for d in self._done)
        return f"<Batch round {self._round_index} {self._strategy}: {settled}/{len(self._done)} settled>"

    # -- reading -------------------------------------------------------------------------------------

    # Everything a strategy reads is read-only, or its own copy: what it does to it never reaches
    # the record, the next model request or the tools (`ToolCall.args` is a dict: each call handed
    # out is a copy, whose arguments parse afresh).

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """The batch's calls in model order (empty while the model streams: see `call`); copies of
        the recorded calls (their ``args`` dicts are the strategy's own)."""
        views = self._views
        if views is None or len(views) != len(self._calls):
            views = self._views = tuple(replace(c, _outcome=None) for c in self._calls)
        return views

    def call(self, pos: int) -> ToolCall:
        """The call at `pos` (also while the model streams, once it has arrived); a copy, as in
        `calls`."""
        pos = self._position(pos, "call")
        if self._final:
            return self.calls[pos]
        return replace(self._indices[pos], _outcome=None)

    @property
    def assistant_message(self) -> Mapping[str, Any] | None:
        """The assistant message carrying the calls (None while the model streams), as a read-only
        view (nested dicts read-only, lists as tuples): a strategy may read it, never change it."""
        view = self._view
        if view is None and self._assistant is not None:
            view = self._view = read_only(self._assistant)  # type: ignore[assignment]
        return view

    @property
    def chunk_timing(self) -> str | None:
        """Once the stream has ended: what its chunk offsets rest on (``recorded``, ``spread``,
        ``estimated``, ``none``; see `toolcall_lab.records.ChunkTiming`); None before."""
        return self._chunk_timing

    @property
    def streaming(self) -> bool:
        """True while the model is still streaming this batch's response."""
        return self._streaming

    @property
    def round_index(self) -> int:
        """The round this batch belongs to."""
        return self._round_index

    @property
    def strategy(self) -> str:
        """The name of the strategy running the batch."""
        return self._strategy

    @property
    def concurrency(self) -> int | None:
        """At most this many calls at once (None: no cap), for `run`, `start` and `run_parallel`."""
        return self._concurrency

    @property
    def tool_limits(self) -> Mapping[str, int]:
        """At most ``tool_limits[name]`` calls of tool `name` at once (read-only)."""
        return self._tool_limits

    @property
    def round_trip_s(self) -> float:
        """The modelled cost of one extra client round trip (``serialized``)."""
        return self._round_trip_s

    @property
    def notes(self) -> tuple[str, ...]:
        """The remarks recorded with this batch so far (add one with `note`)."""
        return tuple(self._notes)

    @property
    def findings(self) -> tuple[Finding, ...]:
        """What the batch found wrong so far (e.g. a call that changed after it started)."""
        return tuple(self._findings)

    @property
    def round_trips(self) -> tuple[ClientRoundTrip, ...]:
        """The extra client round trips made so far (``serialized``)."""
        return tuple(self._round_trips)

    @property
    def client_round_trips(self) -> int:
        """How many client round trips the batch cost so far."""
        return self._client_round_trips

    def now(self) -> float:
        """The run's clock: seconds since the run started (real or virtual)."""
        return self._executor.now()

    @property
    def results(self) -> tuple[ToolExecution | None, ...]:
        """Each call's record so far, by position (None: not settled yet)."""
        return tuple(self._done)

    def note(self, text: str) -> None:
        """Record a remark about this batch with its round (`Round.strategy_notes`): text, not empty
        (anything else is a `UsageError`: ``note(None)`` would otherwise record the word 'None')."""
        if not isinstance(text, str):
            raise UsageError(
                f"note({text!r}): a note is text (a str), not {type(text).__name__}; to record a value, "
                "say what it is, e.g. note(f'cap was {cap}')"
            )
        if not text.strip():
            raise UsageError(f"note({text!r}): an empty note says nothing; give the remark's text")
        self._notes.append(str(text))

    # -- positions -----------------------------------------------------------------------------------

    def _position(self, given: Any, what: str) -> int:
        """`given` as a position of this batch, or a `UsageError` saying what is wrong with it."""
        pos: int
        if type(given) is int:
            pos = given
        else:
            if isinstance(given, bool) or not hasattr(type(given), "__index__"):
                raise UsageError(
                    f"{what}({given!r}): a position is an int (the call's place in the batch, from 0), "
                    f"not {type(given).__name__}"
                )
            pos = operator.index(given)
        if self._final:
            n = len(self._calls)
            if not 0 <= pos < n:
                has = f"positions 0 to {n - 1}" if n else "no calls"
                raise UsageError(
                    f"{what}({pos}): no call at position {pos}; the batch has {n} call(s) ({has})"
                )
        elif pos not in self._indices:
            raise UsageError(
                f"{what}({pos}): the call at position {pos} has not arrived yet (the model is still "
                "streaming); take positions from `async for pos in batch.arrivals()`"
            )
        return pos

    def _taken(self, pos: int) -> bool:
        return (
            self._claimed[pos]
            or self._open[pos]
            or self._done[pos] is not None
            or self._started[pos] is not None
        )

    def _refuse_taken(self, pos: int, what: str) -> None:
        if self._taken(pos):
            call = self._calls[pos] if self._final else self._indices[pos]
            raise UsageError(
                f"strategy {self._strategy!r}: {what}({pos}): the call at position {pos} "
                f"({call.tool_call_id}, {call.name}) was already run, started or skipped; each call "
                "runs at most once"
            )

    def _refuse_closed(self, what: str) -> None:
        """A task the strategy left behind calls the batch after its round was recorded: it is
        cancelled (quietly: its round's record already says what became of every call). The
        strategy itself, running on a later batch, gets a `UsageError` (an ``Exception``, naming
        what it did): it used a batch it kept from an earlier round."""
        if self._closed:
            runner = self._executor.strategy_task
            if runner is not None and asyncio.current_task() is runner:
                raise UsageError(
                    f"strategy {self._strategy!r}: {what} on the batch of round {self._round_index}, "
                    "which is closed (its round is recorded): a strategy runs only the calls of the "
                    "batch it was called with; use that one (do not keep batches across rounds)"
                )
            raise asyncio.CancelledError(
                f"strategy {self._strategy!r}: {what}: the batch of round {self._round_index} is closed "
                "(its round is recorded); a task the strategy left behind was cancelled"
            )

    def _claim(self, given: Any, what: str) -> int:
        """Validate `given` and mark it taken (a second run, start or skip of it is refused)."""
        self._refuse_closed(what)
        pos = self._position(given, what)
        self._refuse_taken(pos, what)
        self._claimed[pos] = True
        return pos

    def _claim_all(self, positions: Iterable[int] | None, what: str) -> list[int]:
        """Positions for `run_sequential` / `run_parallel`, all checked before any runs, then taken.
        None: every call not yet run, started or skipped."""
        self._refuse_closed(what)
        if positions is None:
            if not self._final:
                raise UsageError(
                    f"{what}() with no positions while the model is still streaming: the batch's calls "
                    "are not known until the stream ends (batch.calls is empty until then); run each "
                    "call as it arrives: `async for pos in batch.arrivals(): batch.start(pos)`, then "
                    "`await batch.join()`"
                )
            n = len(self._calls)
            untouched = (  # nothing run, started or skipped yet (the common case, checked at C speed)
                True not in self._claimed
                and True not in self._open
                and self._done.count(None) == n
                and self._started.count(None) == n
            )
            chosen = list(range(n)) if untouched else [p for p in range(n) if not self._taken(p)]
        else:
            if isinstance(positions, int | str | bytes):
                raise UsageError(
                    f"{what}({positions!r}): give positions as a list (e.g. [0, 2]) or leave them out"
                )
            chosen, seen = [], set()
            for p in positions:
                p = self._position(p, what)
                if p in seen:
                    raise UsageError(f"{what}: position {p} is given twice; each call runs at most once")
                seen.add(p)
                self._refuse_taken(p, what)
                chosen.append(p)
        for p in chosen:
            self._claimed[p] = True
        return chosen

    @contextmanager
    def _running_in(self, positions: Iterable[int]) -> Iterator[None]:
        """Note which task runs the calls at `positions` (a task the strategy left running is
        cancelled when the batch closes, and the strategy's bug is reported)."""
        task = asyncio.current_task()
        runners = self._runners
        if runners is None:
            runners = self._runners = {}
        mine = list(positions)
        if task is not None:
            for p in mine:
                runners[p] = task
        try:
            yield
        finally:
            for p in mine:
                runners.pop(p, None)

    # -- events --------------------------------------------------------------------------------------

    def _act(self, pos: int, at: float | None = None) -> None:
        """Emit the ACTION event of the call at `pos` (the strategy dispatched it)."""
        self._open[pos] = True
        call = self._calls[pos] if self._final else self._indices[pos]
        at = self.now() if at is None else at
        self._emit(make_action("action", at, self._round_index, call, self._run_id))

    def _observe(self, pos: int, at: float | None = None) -> None:
        """Emit the OBSERVATION event of the call at `pos` (it must be settled)."""
        ex = self._done[pos]
        assert ex is not None, f"observe({pos}) before the call settled"
        self._open[pos] = False
        at = self.now() if at is None else at
        self._emit(make_observation("observation", at, self._round_index, ex, self._run_id))

    # -- screening -----------------------------------------------------------------------------------

    def _screen_now(self) -> bool:
        """Screen every call now if that needs no await (no ``approve_call`` hook); False when
        `_screen` must be awaited instead."""
        executor = self._executor
        if executor.hooks.approve_call is not None:
            return False
        n = len(self._calls)
        if self._screened < n:
            check, calls, pre, dedupe = executor.check, self._calls, self._pre, self._dedupe
            for pos in range(self._screened, n):
                pre[pos] = check(calls[pos], pos, dedupe)
            self._screened = n
        return True

    async def _screen(self, upto: int | None = None) -> None:
        """Screen the calls in model order up to position `upto` (exclusive; default: all): bad
        arguments, unknown tools, duplicates, ``approve_call``. Runs each call's checks once."""
        n = len(self._calls) if upto is None else min(upto, len(self._calls))
        if self._screened >= n:
            return
        executor, calls, pre, dedupe = self._executor, self._calls, self._pre, self._dedupe
        if executor.hooks.approve_call is None:
            check = executor.check
            for pos in range(self._screened, n):
                pre[pos] = check(calls[pos], pos, dedupe)
            self._screened = n
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # concurrent callers: still one by one, in model order
            for pos in range(self._screened, n):
                pre[pos] = await executor.screen_one(calls[pos], pos, dedupe)
                self._screened = pos + 1

    async def _verdict(self, given: int, early: bool) -> ToolExecution | None:
        """None when the call dispatched at `given` may run; else the record it is answered with
        instead. The whole batch is screened first (model order), or, under streaming, this call as it
        arrived (``approve_call`` one call at a time, in arrival order). A duplicate is decided last
        (`_duplicate_turn`): it may wait for its original, or run in its place. `early`: it was
        dispatched while the model streamed (so it may have moved since: `_at`)."""
        checked = self._checked
        pos = self._at(given, early)
        if checked is None:
            if self._screened < len(self._calls):
                await self._screen()
        elif not checked[pos]:
            checked[pos] = True
            executor = self._executor
            call = self._calls[pos] if self._final else self._indices[pos]
            if executor.hooks.approve_call is None:
                self._pre[pos] = executor.check(call, pos, self._dedupe)
            else:
                if self._lock is None:
                    self._lock = asyncio.Lock()
                async with self._lock:  # (a human approving calls never gets two prompts at once)
                    verdict = await executor.screen_one(call, pos, self._dedupe)
                self._pre[self._at(given, early)] = verdict
        if self._dedupe.of:
            return await self._resolved(given, early)
        return self._pre[self._at(given, early)]

    # -- de-duplication ------------------------------------------------------------------------------

    # A call equal to an earlier one (same tool, same arguments) is screened as its duplicate, but
    # only provisionally: it is answered as a duplicate once that call has run and been answered
    # (the answer stands for both). Until then it waits; if that call does not run (skipped,
    # rejected, cancelled) or the strategy has not taken it up when the duplicate's turn comes, the
    # duplicate runs in its place (asking ``approve_call`` for itself) and the other becomes its
    # duplicate. So the rule is the same under every strategy and hook timing: the first copy that
    # actually runs answers for the others.

    def _duplicate_turn(self, pos: int) -> ToolExecution | str | None:
        """De-duplication at the turn of the call at `pos` (its screening done): its record (None:
        it runs); ``"wait"`` while the call it duplicates is under way; ``"approve"`` when it runs in
        that call's place and ``approve_call`` must be asked first."""
        dedupe, pre = self._dedupe, self._pre[pos]
        call = self._calls[pos] if self._final else self._indices[pos]
        if pre is None:  # an original: is it still the copy that runs?
            key = dedupe.keys.get(pos)
            if key is None:
                return None
            owner = dedupe.first.get(key)
            if owner is None:  # (the copy that held it was rejected)
                dedupe.take_over(call, pos, key)
                return None
            if owner[1] == pos:
                return None
            dedupe.of[pos] = owner[1]  # another copy ran first: this one is its duplicate
            pre = self._pre[pos] = self._executor.duplicate(call, owner)
            approved = self._approved
            if approved is None:
                approved = self._approved = set()
            approved.add(pos)  # (screened and approved already: never asked twice should it run after all)
        original = dedupe.of.get(pos)
        if original is None or pre.status != "duplicate":
            return pre
        key = dedupe.keys[original]
        owner = dedupe.first.get(key)
        if owner is not None and owner[1] != original:  # another copy took its place: follow it
            original = dedupe.of[pos] = owner[1]
            pre = self._pre[pos] = self._executor.duplicate(call, owner)
        ex = self._done[original]
        if ex is None:
            if (
                self._open[original]
                or self._started[original] is not None
                or (self._took_over is not None and original in self._took_over)
            ):
                return "wait"
        elif ex.status not in _UNANSWERED:
            return pre  # it ran and was answered: that answer stands for this call too
        dedupe.take_over(call, pos, key)  # it did not run (yet): this call runs in its place
        took = self._took_over
        if took is None:
            took = self._took_over = set()
        took.add(pos)
        self._pre[pos] = None
        asked = self._approved is not None and pos in self._approved  # (approved when screened)
        return "approve" if self._executor.hooks.approve_call is not None and not asked else None

    async def _resolved(self, given: int, early: bool) -> ToolExecution | None:
        """`_duplicate_turn` until decided: waiting for the original to settle, asking
        ``approve_call`` for a call that runs in its original's place (`given`: the call's position
        when it was dispatched; `early`: while the model streamed, see `_at`)."""
        while True:
            pos = self._at(given, early)
            turn = self._duplicate_turn(pos)
            if turn == "wait":
                waiting = self._settling
                if waiting is None or waiting.done():
                    waiting = self._settling = asyncio.get_running_loop().create_future()
                await waiting
            elif turn == "approve":
                if self._lock is None:
                    self._lock = asyncio.Lock()
                call = self._calls[pos] if self._final else self._indices[pos]
                async with self._lock:
                    verdict = await self._executor.approve(call, pos, self._dedupe)
                self._pre[self._at(given, early)] = verdict
                return verdict
            else:
                return turn  # type: ignore[return-value]

    def _tell_settled(self) -> None:
        """A call settled: duplicates waiting for their original look again."""
        waiting = self._settling
        if waiting is not None:
            self._settling = None
            if not waiting.done():
                waiting.set_result(None)

    def _check_now(self, pos: int) -> ToolExecution | None:
        """`_verdict` without awaiting, when no ``approve_call`` hook is set (the checks are sync)."""
        checked = self._checked
        if checked is None:
            if self._screened <= pos:
                executor, calls, pre, dedupe = self._executor, self._calls, self._pre, self._dedupe
                check = executor.check
                for k in range(self._screened, pos + 1):
                    pre[k] = check(calls[k], k, dedupe)
                self._screened = pos + 1
        elif not checked[pos]:
            checked[pos] = True
            call = self._calls[pos] if self._final else self._indices[pos]
            self._pre[pos] = self._executor.check(call, pos, self._dedupe)
        return self._pre[pos]

    # -- running -------------------------------------------------------------------------------------

    def _settled(self) -> bool:
        """Whether nothing runs between a tool's end and its observation (no result hooks)."""
        hooks = self._executor.hooks
        return hooks.approve_result is None and hooks.on_tool_complete is None

    def _answer(self, pos: int, pre: ToolExecution, at: float) -> ToolExecution:
        """A call decided at screening is answered when its turn comes (it takes no time)."""
        ex = pre if pre.started_at == at else replace(pre, started_at=at, ended_at=at)
        self._done[pos] = ex
        if self._settling is not None:
            self._tell_settled()
        return ex

    def _cancelled(self, pos: int) -> None:
        """A cancellation reached the call at `pos` while the batch ran it. When the harness cuts the
        run or drains the batch, the round's close records it (cancelled at this time, for the reason
        the run stopped); else the strategy cancelled it itself (``asyncio.wait_for``, a task it
        cancelled, a task group): recorded now, as cancelled by the strategy."""
        if pos >= len(self._done) or self._done[pos] is not None:
            return
        executor = self._executor
        at = executor.now()
        stopping = self._stopping
        if self._draining or executor._cut() or (stopping and asyncio.current_task() in stopping):
            stopped = self._stopped_at
            if stopped is None:
                stopped = self._stopped_at = {}
            stopped[pos] = at
            return
        self._cancelled_by_strategy(pos)

    def _cancelled_by_strategy(self, pos: int) -> None:
        """The strategy cancelled the call at `pos` itself: recorded now, as cancelled by it."""
        if pos >= len(self._done) or self._done[pos] is not None:
            return
        executor = self._executor
        at = executor.now()
        call = self._calls[pos] if self._final else self._indices[pos]
        why = f"the strategy {self._strategy!r} cancelled it"
        self._done[pos] = self._with_queue(pos, executor.cut_off(call, pos, self._started[pos], why, at))
        self._tell_settled()
        if self._open[pos]:
            self._observe(pos, at)

    def _wait_from(self, pos: int, at: float) -> None:
        """The call at `pos` waits for a slot from `at` on (`ToolExecution.queued_at`)."""
        queued = self._queued
        if queued is None:
            queued = self._queued = {}
        queued[pos] = at

    def _with_queue(self, pos: int, ex: ToolExecution) -> ToolExecution:
        """`ex` with the time its call began to wait for a slot, if it waited: on every path (run,
        interrupted, cut off, cancelled), so no waiting vanishes from the record."""
        queued = self._queued.get(pos) if self._queued else None
        if queued is None or ex.queued_at is not None:
            return ex
        return replace(ex, queued_at=min(queued, ex.started_at))

    async def _execute(self, pos: int, at: float | None = None) -> ToolExecution:
        """The screened call at `pos` through the executor, started at `at` (default: now), its
        record kept; no events, no slots (for built-ins that emit events themselves)."""
        if at is None:
            at = self._executor.now()
        pre = self._pre[pos]
        if pre is not None:
            return self._answer(pos, pre, at)
        early = not self._final
        call = self._calls[pos] if self._final else self._indices[pos]
        self._started[pos] = at
        try:
            ex = await self._executor.execute(call, pos, at)
        except Interrupted as exc:
            if exc.execution is not None:
                self._done[self._at(pos, early)] = exc.execution
            raise
        except asyncio.CancelledError:
            self._cancelled(self._at(pos, early))
            raise
        self._done[self._at(pos, early)] = ex
        if self._settling is not None:
            self._tell_settled()
        return ex

    async def run(self, pos: int) -> ToolExecution:
        """Run the call at `pos` now and return its record: screening (the whole batch first, see
        the module docstring), ACTION, a slot (under the cap and the per-tool limits), the tool
        through the executor, OBSERVATION. A position already run, started or skipped is refused."""
        pos = self._claim(pos, "run")
        with self._running_in((pos,)):
            return await self._run_one(pos)

    async def _run_one(self, pos: int) -> ToolExecution:
        early = not self._final
        try:
            return await self._run_claimed(pos, early)
        except asyncio.CancelledError:
            self._cancelled(self._at(pos, early))
            raise
        except (Interrupted, ReplayDivergenceError) as exc:  # the run must stop: so do the others
            if isinstance(exc, Interrupted) and exc.on_cut == "task" and not self._draining:
                stopping = self._stopping  # its tool raised it on being cancelled by the strategy
                if not (stopping and asyncio.current_task() in stopping):  # (not by the harness)
                    self._cancelled_by_strategy(self._at(pos, early))
            self._stop_others(exc)
            raise

    async def _run_claimed(self, given: int, early: bool) -> ToolExecution:
        """`run`'s steps for the call claimed at `given` (where it sits now: ``_at(given, early)``)."""
        pre = await self._verdict(given, early)
        pos = self._at(given, early)
        executor = self._executor
        at = executor.now()
        self._act(pos, at)
        if pre is not None:
            ex = self._answer(pos, pre, at)
            self._observe(pos, at)
            return ex
        call = self._calls[pos] if self._final else self._indices[pos]
        slots = self._slots
        queued: float | None = None
        if slots is not None and not slots.take(call.name):
            loop = asyncio.get_running_loop()
            granted: asyncio.Future[Any] = loop.create_future()
            self._wait_from(pos, at)
            slots.wait(pos, call.name, at, granted.set_result)
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    slots.release(call.name)  # it had its slot, but never used it
                else:
                    slots.forget(pos)
                raise
            queued, at = at, executor.now()
        self._started[self._at(given, early)] = at
        try:
            ex = await executor.execute(call, pos, at)
        except Interrupted as exc:
            if exc.execution is not None:
                at_pos = self._at(given, early)
                self._done[at_pos] = self._with_queue(at_pos, exc.execution)
            raise
        finally:
            if slots is not None:
                slots.release(call.name)
        if queued is not None:
            ex = replace(ex, queued_at=queued)
        pos = self._at(given, early)
        self._done[pos] = ex
        if self._settling is not None:
            self._tell_settled()
        self._observe(pos, ex.ended_at if self._settled() else executor.now())
        return ex

    def _stop_others(self, exc: BaseException) -> None:
        """A call `run` runs must stop the run (a tool's or hook's KeyboardInterrupt, a replay
        divergence): the batch's other calls running in tasks of their own are stopped at the loop's
        next step, as a call group stops its own (`_Group.wait`: a call finishing at this same
        instant keeps its result), recorded as stopped by the run; none starts meanwhile (the
        executor refuses). Else a strategy that does not hear it (``asyncio.gather(...,
        return_exceptions=True)``, a ``try`` that goes on and joins) would wait for every one of
        them. A group the strategy started (`start`) fails with `exc`, so its `join` raises it. The
        strategy's own task is not cancelled: the exception reaches it (and the run raises what it
        recorded, whatever the strategy does with it)."""
        for group in self._groups or ():
            if not group.failure and any(not t.done() for t in group.tasks):
                group.failure = (exc,)  # (its `wait` drains them and raises: the run must stop)
                group.wake()
        asyncio.get_running_loop().call_soon(self._cancel_others)

    def _cancel_others(self) -> None:
        """(`_stop_others`, a step later) cancel the batch's calls still running in tasks of their own."""
        keep = self._executor.strategy_task
        others = {t for t in (self._runners or {}).values() if t is not keep and not t.done()}
        for group in self._groups or ():
            others.update(t for t in group.tasks if not t.done())
        if others:
            self._stopping = {*(self._stopping or ()), *others}
            for t in others:
                t.cancel()

    async def run_sequential(self, positions: Iterable[int] | None = None) -> None:
        """Run the calls at `positions` one after another, in the order given (default: every call
        not yet run, started or skipped, in model order). All positions are checked first."""
        chosen = self._claim_all(positions, "run_sequential")
        with self._running_in(chosen):
            for pos in chosen:
                await self._run_one(pos)

    async def run_parallel(self, positions: Iterable[int] | None = None) -> None:
        """Run the calls at `positions` concurrently (default: every call not yet run, started or
        skipped), under the cap and the per-tool limits; returns when they (and any call `start`
        dispatched before) have finished. The whole batch is screened first; then the ACTIONs all
        at once, and each OBSERVATION when its call finishes (built-in ``parallel`` is this call)."""
        chosen = self._claim_all(positions, "run_parallel")
        if not chosen:
            return
        if (
            self._group is None
            and self._slots is None
            and self._checked is None
            and self._screen_now()
            and not self._dedupe.of  # (duplicates are decided at their turn: `_duplicate_turn`)
        ):
            task, joiners = self._joining()  # (the common case, on a lean path)
            try:
                await run_all(self, chosen)
            finally:
                joiners.discard(task)
            return
        if self._checked is None and self._screened < len(self._calls):
            with self._running_in(chosen):
                try:
                    await self._screen()  # approval for the whole batch before any call starts
                except asyncio.CancelledError:
                    for pos in chosen:
                        self._cancelled(pos)
                    raise
        group = self._group_for()
        at = self._executor.now()
        for pos in chosen:
            group.dispatch(pos, at)
        await self.join()

    def start(self, pos: int) -> None:
        """Dispatch the call at `pos` to run in a task of the batch (at once, or when a slot frees);
        `join` waits for every call started. If one must stop the run (cancellation aside), the
        others are cancelled and drained and the exception propagates from `join`."""
        pos = self._claim(pos, "start")
        self._group_for().dispatch(pos, self._executor.now())

    def _group_for(self, observe: bool = True) -> _Group:
        group = self._group
        if group is None:
            group = self._group = _Group(self, observe)
            groups = self._groups
            if groups is None:
                self._groups = [group]
            else:
                groups.append(group)
        return group

    async def _joined(self, waiting: Coroutine[Any, Any, None]) -> None:
        """Await `waiting` as a task waiting for the batch's calls (`join`'s bookkeeping: a task the
        strategy left behind in it is found and cancelled when the batch closes)."""
        task, joiners = self._joining()
        try:
            await waiting
        finally:
            joiners.discard(task)

    def _joining(self) -> tuple[asyncio.Task[Any] | None, set[asyncio.Task[Any]]]:
        """The current task, now among the batch's joiners (`_joined`), and that set."""
        task = asyncio.current_task()
        joiners = self._joiners
        if joiners is None:
            joiners = self._joiners = set()
        if task is not None:
            joiners.add(task)
        return task, joiners

    async def join(self) -> None:
        """Wait for every call `start` dispatched to finish."""
        if self._closed:
            self._refuse_closed("join()")
        group = self._group
        if group is not None:
            self._group = None
            if group.left or group.failure:  # (else every call it dispatched has finished)
                task, joiners = self._joining()  # (`_joined` without its coroutine: one less per batch)
                try:
                    await group.wait()
                finally:
                    joiners.discard(task)

    def skip(self, pos: int, why: str | None = None) -> None:
        """Leave the call at `pos` unexecuted and unanswered (status ``skipped``, its text naming
        this strategy and `why`), as the legacy bug of reading only ``tool_calls[0]`` does. The
        protocol validator flags such a transcript, and `compare` marks the run not comparable.

        Only a strategy that declares ``skips_calls`` may skip (anything else is refused with a
        `UsageError`): a replay and `compare` treat a strategy that skips differently from one that
        answers every call, and they know which from the declaration, before any call runs."""
        if not self._skips_calls:
            raise UsageError(
                f"strategy {self._strategy!r}: skip({pos!r}): this strategy does not declare that it "
                "skips calls; declare it (`@strategy(..., skips_calls=True)`, or `skips_calls = True` "
                "on a Strategy) so that replay and compare treat its runs as runs that left calls "
                "unanswered, or run the call"
            )
        pos = self._claim(pos, "skip")
        reason = f"the strategy {self._strategy!r} skipped it" + (f" ({why})" if why else "")
        call = self._calls[pos] if self._final else self._indices[pos]
        self._done[pos] = self._executor.skipped(call, reason)

    def _skip(self, pos: int) -> None:
        """``first_only``'s skip (its own words in the record)."""
        if self._done[pos] is None:
            self._done[pos] = self._executor.skipped(self._calls[pos])

    # -- streaming -----------------------------------------------------------------------------------

    async def arrivals(self) -> AsyncIterator[int]:
        """Positions of calls as each becomes complete while the model streams, ending when the
        stream has ended and every call has arrived. Without streaming: every position, in order.
        A streaming strategy is called once the first call has arrived (or the stream ended with
        calls), never for a response without calls, so its first ``async for`` step yields a call.

        Positions are final: a call arrives early only while the stream's call indices run 0, 1,
        2, ... (anything else, e.g. sparse indices, and the remaining calls arrive at its end).
        """
        if self._checked is None:
            for pos in range(len(self._calls)):
                yield pos
            return
        queue = self._arrivals
        loop = asyncio.get_running_loop()
        while True:
            while queue:
                yield queue.popleft()
            if not self._streaming:
                return
            self._wake = loop.create_future()
            await self._wake  # (raises what stopped a call the batch runs: the run must stop)

    async def _first_arrival(self) -> bool:
        """(The loop) wait until a call has arrived or the stream has ended; whether the batch holds a
        call (a streaming strategy is called only then: `toolcall_lab.loop`)."""
        while not self._arrivals and self._streaming:
            self._wake = asyncio.get_running_loop().create_future()
            await self._wake
        return bool(self._arrivals) or bool(self._indices)

    def _failed(self, exc: BaseException) -> None:
        """A call the batch runs must stop the run: a strategy waiting for arrivals hears it now, and
        so does the loop while the batch dispatches arrivals itself (`_dispatch_arrivals`)."""
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_exception(exc)
        on_fail = self._on_fail
        if on_fail is not None:
            self._on_fail = None
            on_fail(exc)

    def _dispatch_arrivals(self, on_fail: Callable[[BaseException], None] | None = None) -> None:
        """(Built-in ``eager``) from now until the stream ends, the batch dispatches the calls that
        arrive, without waking a strategy for each: the first call to arrive in a step of the event
        loop at once, and those arriving after it in that step together when its task first runs
        (the loop's next step, where their tasks would first run too: one clock reading, each checked
        first and then started, as `run_parallel` does a batch); what is still waiting when the
        stream ends is the strategy's (`Eager.run`). What must stop the run meanwhile (a call's
        failure, a listener's) is raised by the strategy from its wait, and told to `on_fail` (the
        loop, which then has no strategy task: `toolcall_lab.loop`)."""
        self._flushing = 1
        if on_fail is not None:
            self._on_fail = on_fail
            self._driven = True

    def _stop_dispatching(self) -> None:
        """Arrivals wait in ``_arrivals`` again (the stream ended, or the batch is being drained)."""
        self._flushing = 0
        self._on_fail = None

    def _flush(self) -> None:
        """Dispatch the calls waiting in ``_arrivals`` together (the first call dispatched at this
        step of the loop has started its task: `_Group.plain`; or the stream stopped)."""
        if not self._flushing or self._draining or not self._arrivals:
            return
        try:
            self._group_for().dispatch_queued(self._arrivals)
        except BaseException as exc:  # (a listener stopping the run, an abort): the run hears it
            self._dispatch_failed(exc)

    def _led(self) -> None:
        """The task of the call dispatched first at this step of the loop first runs: the calls that
        arrived after it in that step are dispatched now, together (`_dispatch_arrivals`)."""
        if self._flushing == 2:
            self._flushing = 1
            if self._arrivals:
                self._flush()

    def _dispatch_failed(self, exc: BaseException) -> None:
        self._flushing = 0
        self._arrive_error = exc
        self._failed(exc)

    def _ensure(self, n: int) -> None:
        """Room for `n` calls (while streaming it doubles; `_end_stream` trims it)."""
        grow = n - len(self._done)
        if grow > 0:
            if self._streaming:
                grow = max(grow, len(self._done))
            self._done += [None] * grow
            self._started += [None] * grow
            self._claimed += [False] * grow
            self._open += [False] * grow
            self._pre += [None] * grow
            if self._checked is not None:
                self._checked += [False] * grow

    async def _next_arrivals(self) -> bool:
        """Wait until calls have arrived (in ``_arrivals``) or the stream has ended; False when the
        stream has ended and every call has arrived (what `arrivals` does, without a generator)."""
        if self._arrive_error is not None:
            raise self._arrive_error
        if self._arrivals:
            return True
        if not self._streaming:
            return False
        self._wake = asyncio.get_running_loop().create_future()
        await self._wake
        return bool(self._arrivals) or self._streaming

    def _arrive(self, pos: int, call: ToolCall) -> None:
        """(The loop) the call at `pos` became complete while the model streams."""
        flushing = self._flushing  # (not 0 only while streaming: `_dispatch_arrivals`)
        if flushing and pos < len(self._done):  # built-in eager (the hot path)
            self._indices[pos] = call  # type: ignore[index]  # (a dict while streaming)
            if flushing == 2:  # it waits for the task of the call dispatched first at this step
                self._arrivals.append(pos)
                return
            try:  # at once: the first call to arrive at this step of the loop
                (self._group or self._group_for()).lead(pos, call)
            except BaseException as exc:  # (a listener stopping the run, an abort): the run hears it
                self._dispatch_failed(exc)
            return
        if self._final:
            raise UsageError(f"arrive({pos}): the batch is not streaming (its calls are final)")
        if pos >= len(self._done):
            self._ensure(pos + 1)
        if flushing:  # (the hot path, now that there is room)
            self._arrive(pos, call)
            return
        self._indices[pos] = call  # type: ignore[index]
        self._arrivals.append(pos)
        wake = self._wake
        if wake is not None:  # (once: the arrivals after it until the strategy waits again need not)
            self._wake = None
            if not wake.done():
                wake.set_result(None)

    def _end_stream(
        self,
        calls: Sequence[ToolCall],
        assistant_message: dict[str, Any] | None,
        chunk_timing: str | None = None,
    ) -> None:
        """(The loop) the stream ended with these calls (choice 0, model order): calls that arrived
        early are checked against what the stream ended with, and the rest arrive now."""
        early = self._indices
        if self._flushing:  # (what has arrived and waits is the strategy's now: `_stop_dispatching`)
            self._flushing = 0
            self._on_fail = None
        self._calls = final_calls = tuple(calls)
        self._assistant = assistant_message
        if self._view is not None or self._views is not None:  # (handed out while streaming: stale now)
            self._view = self._views = None
        self._chunk_timing = chunk_timing
        n = len(final_calls)
        differ = self._in_place(early, final_calls) if early else []
        if differ is None:  # some sit elsewhere in the final batch: move them
            final = {c.index: p for p, c in enumerate(final_calls)}
            moved = {pos: final[c.index] for pos, c in early.items() if final.get(c.index, pos) != pos}
            if moved:
                self._move(moved)
                early = self._indices
            differ = [pos for pos, call in early.items() if call is not final_calls[pos]]
        self._streaming = False
        if n > len(self._done):
            self._ensure(n)
        elif len(self._done) > n:  # the room made while streaming, beyond the final batch (all empty)
            del self._done[n:], self._started[n:], self._claimed[n:], self._open[n:], self._pre[n:]
            if self._checked is not None:
                del self._checked[n:]
        for pos in differ:
            self._compare(pos, early[pos], final_calls[pos])
        if len(early) < n:
            arrivals = self._arrivals
            for pos in range(n):
                if pos not in early:
                    arrivals.append(pos)
        self._final = True
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    @staticmethod
    def _in_place(early: Mapping[int, ToolCall], final: Sequence[ToolCall]) -> list[int] | None:
        """When every call that arrived early sits at its own position in the final batch (the common
        case: no call index sorting before them came later, and indices are unique), the positions of
        those the stream ended with as another object (the parser hands over the same object when
        nothing changed: usually none); else None (`_end_stream` maps them)."""
        n = len(final)
        differ: list[int] | None = None
        for pos, call in early.items():
            if pos >= n:
                return None
            final_call = final[pos]
            if final_call is not call:
                if final_call.index != call.index:
                    return None
                if differ is None:
                    differ = []
                differ.append(pos)
        if differ is None:  # every one is the very call at its position: nothing can have moved
            return []
        return differ if n == 1 or len(set(map(_INDEX, final))) == n else None  # (same index, same call)

    def _move(self, moved: dict[int, int]) -> None:
        """Calls that arrived early sit elsewhere in the final batch: only a call index that sorts
        before them appearing later (a negative index) does that. Move their state; calls still
        running find their new position through `_moved`."""
        n = max(len(self._calls), len(self._done))
        lists: list[list[Any]] = [
            self._done,
            self._started,
            self._claimed,
            self._open,
            self._pre,
            self._checked if self._checked is not None else [],
        ]
        blank: list[Any] = [None, None, False, False, None, False]
        fresh: list[list[Any]] = [[b] * n for b in blank]
        order = [p for p in range(len(self._done)) if p not in moved] + list(moved)  # moved ones last
        for pos in order:
            for src, dst in zip(lists, fresh, strict=True):
                if pos < len(src):
                    dst[moved.get(pos, pos)] = src[pos]
        for src, dst in zip(lists, fresh, strict=True):  # in place: a `_Group` holds the lists
            src[:] = dst
        self._indices = {moved.get(p, p): c for p, c in self._indices.items()}
        if self._runners:
            self._runners = {moved.get(p, p): t for p, t in self._runners.items()}
        if self._stopped_at:
            self._stopped_at = {moved.get(p, p): t for p, t in self._stopped_at.items()}
        if self._queued:
            self._queued = {moved.get(p, p): t for p, t in self._queued.items()}
        waiting = [moved.get(p, p) for p in self._arrivals]  # (in place: strategies hold the deque)
        self._arrivals.clear()
        self._arrivals.extend(waiting)
        self._moved = moved
        self._dedupe.moved(moved)

    def _at(self, pos: int, early: bool = True) -> int:
        """Where a call dispatched at `pos` sits now: the same, except for a call dispatched while
        the model streamed (`early`) that `_move` moved."""
        return self._moved.get(pos, pos) if early and self._moved else pos

    def _compare(self, pos: int, early: ToolCall, final: ToolCall) -> None:
        """A call that started before the stream ended must be the call the stream ended with."""
        if early is final or (
            early.arguments == final.arguments
            and early.name == final.name
            and early.tool_call_id == final.tool_call_id
        ):
            return
        if early.name == final.name and early.args is not None and early.args == final.args:
            return  # the same call (e.g. an id the loop made unique, whitespace after the object)
        self._changed |= {final.index}
        self._findings.append(
            Finding(
                kind="changed_after_start",
                severity="error",
                call_index=final.index,
                tool_call_id=final.tool_call_id,
                message=f"call {final.tool_call_id} (position {pos}) started as {early.name}"
                f"({early.arguments}) when its arguments were complete, but the stream "
                f"ended with {final.name}({final.arguments}); the record keeps what ran",
            )
        )

    def _amend(self, findings: Sequence[Finding]) -> list[Finding]:
        """The parser's findings, with those about a call that ran before the stream changed it
        (`_compare`) saying so: its final arguments were not executed, but the call was, as started."""
        if not self._changed:
            return list(findings)
        ran = (
            "its final arguments were not executed, but the call had started while the model streamed, "
            "on the complete arguments it held then, and ran as started (see changed_after_start)"
        )
        return [
            replace(f, message=f.message.replace("call marked incomplete and will not be executed", ran))
            if f.call_index in self._changed and f.kind != "changed_after_start"
            else f
            for f in findings
        ]

    # -- closing (the loop) --------------------------------------------------------------------------

    def _began(self) -> bool:
        """Whether any call has started, been settled, or had its ACTION emitted."""
        return (
            any(t is not None for t in self._started)
            or any(d is not None for d in self._done)
            or any(self._open)
        )

    def _running(self) -> bool:
        """Whether calls the strategy started (`start`, or `run` in a task of its own) have not all
        finished, or a task of its own still waits for them (`join`, `run_parallel`)."""
        for group in self._groups or ():
            if any(not t.done() for t in group.tasks):
                return True
        me = asyncio.current_task()
        for task in (*(self._runners or {}).values(), *(self._joiners or ())):
            if task is not me and not task.done():
                return True
        return False

    def _pending(self) -> list[asyncio.Task[Any]]:
        """Every task of the batch not done: its calls' tasks, and tasks (other than this one)
        running a call or waiting for calls through the batch."""
        pending = [t for group in self._groups or () for t in group.tasks if not t.done()]
        me = asyncio.current_task()
        others = {*(self._runners or {}).values(), *(self._joiners or ())}
        pending += [t for t in others if t is not me and not t.done()]
        return pending

    async def _drain(self) -> None:
        """Cancel every call still running (dispatched by `start` or `run_parallel`, or `run` in a
        task the strategy left behind) and every task still waiting for calls through the batch,
        and wait until they all stopped: no tool keeps running once the round is recorded (a sync
        tool in a worker thread cannot be stopped: its record says so)."""
        self._group = None
        if self._flushing:
            self._stop_dispatching()
        pending = self._pending() if self._groups or self._runners or self._joiners else []
        if not pending:
            return
        self._draining = True
        for t in pending:
            t.cancel()
        await wait_until_stopped(pending)
        for t in pending:
            if t.done() and not t.cancelled():  # (not done: a second signal gave up waiting for it)
                t.exception()  # retrieved: the run reports the strategy's failure, not asyncio

    def _unsettled(self) -> list[int]:
        """Positions of calls neither run nor skipped (after the strategy returned: its bug)."""
        return [pos for pos, ex in enumerate(self._done) if ex is None]

    def _note_chunk_timing(self) -> None:
        """A streaming strategy's times rest on the chunk offsets: say so when those are not measured
        (built-in ``eager`` words its own note; a user's streaming strategy gets this one)."""
        timing = self._chunk_timing
        if not self._streamed or not self._calls or timing not in _UNMEASURED_CHUNKS:
            return
        if any("chunk_timing '" in note for note in self._notes):
            return
        self._notes.append(f"{self._strategy}: {_UNMEASURED_CHUNKS[timing]}")

    def _close(self, cut: str | None = None) -> list[ToolExecution]:
        """The batch's records, by position. After a cut (`cut` says why), calls that had not
        finished are recorded as cancelled; every ACTION without its OBSERVATION gets one now."""
        executor = self._executor
        out: list[ToolExecution] = []
        early = self._indices
        self._closed = True
        self._note_chunk_timing()
        stopped = self._stopped_at or {}
        for pos, call in enumerate(self._calls):
            ex = self._done[pos]
            if ex is None:
                why = cut or "the batch was cut off"
                ex = executor.cut_off(call, pos, self._started[pos], why, stopped.get(pos))
                ex = self._done[pos] = self._with_queue(pos, ex)
            elif early and (ex.tool_call_id != call.tool_call_id or ex.arguments != call.arguments):
                ran = early.get(pos)
                if ran is not None and ran.args == call.args and ran.name == call.name:
                    ex = replace(ex, tool_call_id=call.tool_call_id, arguments=call.arguments)
                    self._done[pos] = ex
            out.append(ex)
        if any(self._open):
            at = executor.now()
            for pos, is_open in enumerate(self._open):
                if is_open:
                    self._observe(pos, stopped.get(pos, at))
        return out


class _Group:
    """The calls a batch runs concurrently (`Batch.start`): one task per call.

    A hand-rolled task group: each task counts itself out and the last one wakes the batch, so a
    call costs one task and one loop iteration (`asyncio.TaskGroup` adds a done-callback and another
    iteration per task). The semantics are a task group's: the first exception that must stop the
    run (cancellation aside) cancels the others, which are drained before it propagates; cancelling
    the batch cancels and drains every call. A call screened out (a duplicate, bad arguments, ...)
    is answered at once, without a task or a slot. When nothing is awaited before a tool (no
    ``approve_call``, no slots), a call's task is the lean `plain`, which reads what it needs from the
    group's own fields (it is the hot path of ``eager``); else `one`.
    """

    __slots__ = (
        "batch",
        "check",
        "checked",
        "clock",
        "dedupe",
        "done",
        "emit",
        "executor",
        "failure",
        "fast",
        "finished",
        "is_open",
        "left",
        "loop",
        "observe",
        "origin",
        "pre",
        "round_index",
        "run_id",
        "screened",
        "settled",
        "spawn",
        "started",
        "tasks",
    )

    def __init__(self, batch: Batch, observe: bool = True) -> None:
        self.batch = batch
        self.observe = observe
        """Emit each call's OBSERVATION when it finishes (else the strategy does, e.g. all at the end)."""
        # what the lean path reads per call, held here (the lists' identities never change during a
        # batch: `Batch._ensure` extends them, `_end_stream` trims them, `_move` moves them, in place)
        self.executor = executor = batch._executor
        self.loop = loop = executor._loop  # (the run's loop: the executor is made in it)
        self.finished: asyncio.Future[None] | None = None  # made when `wait` waits
        self.failure: tuple[BaseException, ...] = ()  # (a call that must stop the run: rare)
        self.left = 0
        self.tasks: list[asyncio.Task[None]] = []
        hooks = executor.hooks
        self.settled = hooks.approve_result is None and hooks.on_tool_complete is None  # (`Batch._settled`)
        self.screened = screened = hooks.approve_call is None  # the checks need no await
        self.fast = screened and batch._slots is None  # nothing to await before the tool
        self.emit = batch._emit
        self.check = executor.check
        self.round_index = batch._round_index
        self.run_id = batch._run_id
        # asyncio.Task directly when no task factory is installed (what loop.create_task does then,
        # minus its Python wrapper): a tenth of a call's cost here. A task factory is respected.
        self.spawn = loop.create_task if loop.get_task_factory() is not None else None
        self.clock, self.origin = executor._clock, executor.origin
        self.done, self.started, self.is_open = batch._done, batch._started, batch._open
        self.pre, self.checked, self.dedupe = batch._pre, batch._checked, batch._dedupe

    def dispatch_queued(self, queue: deque[int]) -> None:
        """Dispatch every position waiting in `queue` (taken off it as it goes), at one clock reading:
        calls that arrived together. With several waiting and nothing to await before a tool, as
        `run_parallel` does a whole batch: every one screened first (in order), then each ACTION (a
        call screened out is answered then), then their tasks; else one `dispatch` each."""
        if not queue:
            return
        at = self.clock() - self.origin
        if not self.fast or len(queue) == 1:
            dispatch = self.dispatch
            while queue:
                dispatch(queue.popleft(), at)
            return
        batch, executor, dedupe = self.batch, self.executor, self.dedupe
        final = batch._final
        calls = batch._calls if final else batch._indices
        checked, screened, check = self.checked, self.pre, self.check
        for pos in queue:  # the checks first, in arrival (= model) order
            if checked is None:
                batch._check_now(pos)
            elif not checked[pos]:
                checked[pos] = True
                screened[pos] = check(calls[pos], pos, dedupe)
        if dedupe.of:  # de-duplication decides at each call's turn: one by one
            while queue:
                self.dispatch(queue.popleft(), at)
            return
        is_open, emit, round_index, observe, run_id = (
            self.is_open,
            self.emit,
            self.round_index,
            self.observe,
            self.run_id,
        )
        runnable: list[int] = []
        while queue:
            if executor.stop_asked and executor.refuse_start():  # an abort just now: the rest never start
                raise asyncio.CancelledError  # (the run's cut, delivered now, records them as not started)
            pos = queue.popleft()
            is_open[pos] = True
            emit(make_action("action", at, round_index, calls[pos], run_id))
            pre = screened[pos]
            if pre is None:
                runnable.append(pos)
            else:
                batch._answer(pos, pre, at)
                if observe:
                    batch._observe(pos, at)
        if not runnable:
            return
        self.left += len(runnable)
        plain, loop, spawn, early, name = self.plain, self.loop, self.spawn, not final, TASK_NAME
        if spawn is None:
            self.tasks += [_Task(plain(pos, calls[pos], early), loop=loop, name=name) for pos in runnable]
        else:
            self.tasks += [spawn(plain(pos, calls[pos], early), name=name) for pos in runnable]

    async def plain(self, given: int, call: ToolCall, early: bool, lead: bool = False) -> None:
        """`one` for a screened call with no slots to wait for (the common case, kept lean). `given`:
        the call's position when it was dispatched; where it sits now is ``batch._at(given, early)``
        (a call dispatched while the model streamed may move once, at the stream's end: `_move`).
        `lead`: the first call dispatched at its step while the batch dispatches arrivals: the calls
        that arrived after it in that step are dispatched now (`Batch._dispatch_arrivals`)."""
        batch = self.batch
        clock, origin = self.clock, self.origin
        pos = given
        if lead and batch._flushing == 2:  # what arrived after this call at its step goes now
            batch._led()
        try:
            if early and batch._moved:  # (moved before this task first ran)
                pos = batch._moved.get(given, given)
            self.started[pos] = started = clock() - origin
            ex = await self.executor.execute(call, pos, started)
            if early and batch._moved:
                pos = batch._moved.get(given, given)
            self.done[pos] = ex
            if batch._settling is not None:
                batch._tell_settled()
            if self.observe:
                self.is_open[pos] = False
                end = ex.ended_at if self.settled else clock() - origin
                self.emit(make_observation("observation", end, self.round_index, ex, self.run_id))
        except asyncio.CancelledError:
            batch._cancelled(batch._at(given, early))
            raise
        except BaseException as exc:  # the run must stop: wake the batch, which re-raises it
            self.failed(exc, batch._at(given, early))
            return
        self.left -= 1
        if not self.left:
            self.wake()

    def lead(self, pos: int, call: ToolCall) -> None:
        """`dispatch` of the first call to arrive at this step of the loop while the batch dispatches
        arrivals (`Batch._dispatch_arrivals`), on a lean path when nothing is awaited before a tool:
        built-in eager's hot path, a call at a time when the stream's chunks are spread over the loop.
        """
        checked = self.checked
        if not self.fast or checked is None or checked[pos] or self.spawn is not None:
            self.dispatch(pos, None, True)
            return
        executor = self.executor
        if executor.stop_asked and executor.refuse_start():  # an abort just now: it never starts
            raise asyncio.CancelledError  # (the run's cut, delivered now, records it as not started)
        at = self.clock() - self.origin
        self.is_open[pos] = True
        self.emit(make_action("action", at, self.round_index, call, self.run_id))
        checked[pos] = True
        dedupe = self.dedupe
        pre = self.pre[pos] = self.check(call, pos, dedupe)
        batch = self.batch
        if dedupe.of:  # de-duplication decides at the call's turn (`Batch._verdict`)
            coro = self.one(pos, call, at, False, True, True)
        elif pre is not None:  # answered at once
            batch._answer(pos, pre, at)
            if self.observe:
                batch._observe(pos, at)
            return
        else:
            coro = self.plain(pos, call, True, True)
        self.left += 1
        if batch._flushing:  # (until its task first runs, arrivals wait for it: `Batch._arrive`)
            batch._flushing = 2
        self.tasks.append(_Task(coro, loop=self.loop, name=TASK_NAME))

    def dispatch(self, pos: int, at: float | None = None, lead: bool = False) -> None:
        """ACTION at `at` (None: now); then the call runs in a task of the group (waiting for its
        slots if it must). A call screened out is answered at once; without anything to await before
        a tool, the call takes the lean task (`plain`), else `one` (approval, de-duplication at its
        turn, slots). `lead`: see `plain`."""
        executor = self.executor
        if executor.stop_asked and executor.refuse_start():  # an abort just now: it never starts
            raise asyncio.CancelledError  # (the run's cut, delivered now, records it as not started)
        if at is None:
            at = self.clock() - self.origin
        batch = self.batch
        final = batch._final
        call = batch._calls[pos] if final else batch._indices[pos]
        self.is_open[pos] = True
        self.emit(make_action("action", at, self.round_index, call, self.run_id))
        screened = self.screened
        if screened:
            checked = self.checked
            if checked is None:
                pre = batch._check_now(pos)
            elif checked[pos]:
                pre = self.pre[pos]
            else:
                checked[pos] = True
                pre = self.pre[pos] = self.check(call, pos, self.dedupe)
            if self.dedupe.of:  # de-duplication decides at the call's turn (`Batch._verdict`)
                screened = False
            elif pre is not None:
                batch._answer(pos, pre, at)
                if self.observe:
                    batch._observe(pos, at)
                return
        self.left += 1
        if lead and batch._flushing:  # (until its task first runs, arrivals wait for it: `Batch._arrive`)
            batch._flushing = 2
        if screened and self.fast:
            coro = self.plain(pos, call, not final, lead)
        else:
            coro = self.one(pos, call, at, screened, not final, lead)
        spawn = self.spawn
        task = _Task(coro, loop=self.loop, name=TASK_NAME) if spawn is None else spawn(coro, name=TASK_NAME)
        self.tasks.append(task)

    def failed(self, exc: BaseException, pos: int) -> None:
        if isinstance(exc, Interrupted) and exc.execution is not None:
            self.batch._done[pos] = self.batch._with_queue(pos, exc.execution)
            self.batch._tell_settled()
        self.failure = (*self.failure, exc)
        self.wake()
        if self.batch._runners:  # (calls `run` runs in tasks of their own stop now too)
            self.batch._stop_others(exc)
        self.batch._failed(exc)

    def wake(self) -> None:
        """Every call has finished, or one must stop the run: `wait` (if it waits) goes on."""
        finished = self.finished
        if finished is not None and not finished.done():
            finished.set_result(None)

    async def one(
        self, given: int, call: ToolCall, at: float, screened: bool, early: bool, lead: bool = False
    ) -> None:
        """A dispatched call's task: its verdict (unless `screened`), a slot, the tool, its record.
        `given`: its position when dispatched; where it sits now is ``batch._at(given, early)``
        (a call dispatched while the model streamed may move once, at the stream's end: `_move`).
        `lead`: see `plain`."""
        batch = self.batch
        executor = batch._executor
        pos = given
        if lead:  # (as in `plain`)
            batch._led()
        try:
            pre = None if screened else await batch._verdict(given, early)
            if early and batch._moved:
                pos = batch._at(given)
            if pre is not None:
                now = executor.now()
                batch._answer(pos, pre, now)
                if self.observe:
                    batch._observe(pos, now)
            else:
                slots = batch._slots
                queued: float | None = None
                if slots is not None and not slots.take(call.name):
                    granted: asyncio.Future[Any] = self.loop.create_future()
                    batch._wait_from(pos, at)
                    slots.wait(pos, call.name, at, granted.set_result)
                    try:
                        await granted
                    except asyncio.CancelledError:
                        if granted.done() and not granted.cancelled():
                            slots.release(call.name)  # it had its slots, but never used them
                        else:
                            slots.forget(pos)
                        raise
                    queued = at
                    if early and batch._moved:
                        pos = batch._at(given)
                started = executor._clock() - executor.origin
                batch._started[pos] = started
                try:
                    ex = await executor.execute(call, pos, started)
                finally:
                    if slots is not None:
                        slots.release(call.name)
                if queued is not None:
                    ex = replace(ex, queued_at=queued)
                if early and batch._moved:
                    pos = batch._at(given)
                batch._done[pos] = ex
                if batch._settling is not None:
                    batch._tell_settled()
                if self.observe:
                    batch._open[pos] = False
                    self.emit(
                        make_observation(
                            "observation",
                            ex.ended_at if self.settled else executor._clock() - executor.origin,
                            batch._round_index,
                            ex,
                            self.run_id,
                        )
                    )
        except asyncio.CancelledError:
            batch._cancelled(batch._at(given, early))
            raise
        except BaseException as exc:  # the run must stop: wake the batch, which re-raises it
            self.failed(exc, batch._at(given, early))
            return
        self.left -= 1
        if not self.left:
            self.wake()

    async def wait(self) -> None:
        if not self.left and not self.failure:
            return
        try:
            while self.left and not self.failure:  # (calls may have counted down to 0 before, and
                finished = self.finished  # more been dispatched since: wait for those too)
                if finished is None or finished.done():
                    finished = self.finished = self.loop.create_future()
                await finished
        finally:
            if self.left or self.failure:  # (when every call counted itself out, every task returned)
                pending = [t for t in self.tasks if not t.done()]
                if pending:
                    if self.failure:  # a call must stop the run: the harness stops the others, not
                        batch = self.batch  # the strategy (their records say why the run stopped)
                        batch._stopping = {*(batch._stopping or ()), *pending}
                    for t in pending:
                        t.cancel()
                    await wait_until_stopped(pending)
        if self.failure:
            raise self.failure[0]

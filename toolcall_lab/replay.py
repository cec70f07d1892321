"""Replay a trace: the recorded model responses and tool results, re-timed as recorded, under any
mode or strategy.

The model's responses are reused (each chunk at its recorded offset, so a strategy that streams,
like ``eager``, sees calls complete when the recording says they did), the tools' recorded
durations are reused, and only the execution strategy changes: that is what makes strategies
comparable on the same trace. On the virtual clock (default) a replay takes milliseconds and is
exactly reproducible.

A run that was cut off (deadline, abort, cancellation, Ctrl-C) is replayed up to the same cut: calls
whose outcome the recording does not know (cancelled) wait, and the replay stops at the recorded cut
(the recorded deadline, or an abort at the recorded end), so under another strategy it shows what
that strategy would have finished by then. An abort's instant goes as recorded: what was due then
happens (a response arrives whole, keeping its round; calls the recording started then start), the
first call the recording never started stops the run as it is about to start, and the cut comes
when the instant is over. A live run that went on past its deadline (a call that
ignored its cancellation, a hook that held the event loop) ended later than that: the replay does not
reproduce the wait. A run that ended because the model failed (between rounds,
or mid-stream while an ``eager`` batch ran: the response then breaks off where it did), or because
``before_model_call`` failed, ends the same way. Anything else the recording cannot answer raises
`ReplayDivergenceError`, also a call whose arguments differ from those its recorded result was for,
and (`StartedOnSnapshotError`) a call a streaming strategy such as ``eager`` started on an earlier
snapshot of its arguments than the one the stream ended with: the recording never ran that call, so
the trace cannot evaluate that strategy.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Any, Literal

from toolcall_lab._execution import Hooks, current_tool_call, dedupe_key, harness_decision
from toolcall_lab._outcomes import Recorded
from toolcall_lab._stopping import run_main
from toolcall_lab.clock import in_running_loop, run_virtual
from toolcall_lab.events import EventListener, RunEvent
from toolcall_lab.exceptions import ModelError, ReplayDivergenceError, TraceFormatError, UsageError
from toolcall_lab.exceptions import StartedOnSnapshotError as StartedOnSnapshotError  # (raised here)
from toolcall_lab.loop import AbortHandle, run
from toolcall_lab.messages import ParsedArguments, ToolCall, parse_arguments
from toolcall_lab.models import ModelRequest
from toolcall_lab.records import DECIDED, ChunkTiming, HookFailure, Round, Timing, ToolExecution
from toolcall_lab.runs import RunConfig, RunResult
from toolcall_lab.strategies import StrategySpec, resolve
from toolcall_lab.tools import Tool, ToolOutcome, ToolRegistry
from toolcall_lab.trace import Trace, TraceMetadata

Check = Literal["strict", "ids", "off"]

CUT_STATUSES = frozenset({"timeout", "aborted"})
"""Outcome statuses of runs cut off from outside (deadline; abort, cancellation, interruption)."""


def recorded_cut(trace: Trace) -> float | None:
    """When the recorded run was cut off (its end), or None when it was not."""
    return trace.outcome.wall_time_s if trace.outcome.status in CUT_STATUSES else None


def failed_mid_stream(trace: Trace) -> bool:
    """Whether the recorded run's model failed during the response of its last recorded round (a
    strategy that streams had started calls, so the round was recorded as far as the response came;
    the loop's error names that round), rather than in a model call after it."""
    outcome = trace.outcome
    if outcome.reason != "model_error" or not trace.rounds:
        return False
    return (outcome.error or "").startswith(f"round {trace.rounds[-1].round_index}: ")


def failed_call_s(trace: Trace) -> float:
    """How long the recorded model call that failed between rounds took: from the end of what the
    recording holds (its last round's response and tools) to the run's recorded end."""
    last = 0.0
    for r in trace.rounds:
        last = max(last, r.model_call.ended_at, *(e.ended_at for e in r.executions if e.status != "skipped"))
    return max(0.0, trace.outcome.wall_time_s - last)


async def _until_cut() -> None:
    """Wait for the cut that ends a replay of a cut-off run (the recording knows nothing past it)."""
    await asyncio.get_running_loop().create_future()


def _normal(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content") or None
    if message.get("role") == "tool" and isinstance(content, str):
        content = harness_decision(content) or content  # the harness's own words: compared by decision
    out: dict[str, Any] = {"role": message.get("role"), "content": content}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            (c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
            for c in message["tool_calls"]
        ]
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _ids(messages: Sequence[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        out += [c.get("id") for c in m.get("tool_calls") or []]
        if m.get("role") == "tool":
            out.append(f"<-{m.get('tool_call_id')}")
    return out


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def divergence(
    sent: Sequence[dict[str, Any]], recorded: Sequence[dict[str, Any]], check: Check
) -> str | None:
    """How the conversation sent differs from the recorded one (None when it matches under `check`)."""
    if check == "off":
        return None
    if check == "ids":
        a, b = _ids(sent), _ids(recorded)
        return None if a == b else f"tool-call ids differ: sent {a}, recorded {b}"
    for i in range(max(len(sent), len(recorded))):
        if i >= len(sent):
            return f"message {i} is missing; the recording has {_short(_normal(recorded[i]))}"
        if i >= len(recorded):
            return f"message {i} is extra: {_short(_normal(sent[i]))}"
        if sent[i] == recorded[i]:
            continue  # equal as sent, so equal once normalised (the common case, at C speed)
        x, y = _normal(sent[i]), _normal(recorded[i])
        if x != y:
            return f"message {i} differs:\n  sent:     {_short(x)}\n  recorded: {_short(y)}"
    return None


_STRATEGY_WORDS = re.compile(
    r"the strategy ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\") (cancelled it|skipped it|failed)"
)
"""How the harness words what a strategy did to a call in the call's own text (cancelled it while it ran
or before it started, withheld a result the approval hook was deciding, skipped it, failed)."""


def strategy_said(text: str) -> tuple[str, str] | None:
    """The strategy (its name as the text quotes it) and what it did, when `text` is the harness's record
    of a strategy's own decision about a call; None for any other text."""
    m = _STRATEGY_WORDS.search(text)
    return (m[1], m[2].removesuffix(" it")) if m else None


def strategy_decision(
    sent: Sequence[dict[str, Any]], recorded: Sequence[dict[str, Any]], trace: Trace, k: int
) -> str | None:
    """Why the first difference between `sent` and `recorded` is a decision the record shows, not a
    hook's edit (None when the record shows none: then a hook may explain it).

    Classified by what the record holds, for any strategy: a tool message in the harness's words for a
    strategy's own decision (it cancelled the call, cancelled it while a result hook decided, failed),
    on either side; a call answered on one side only (a strategy that skips calls left it unanswered:
    here every unanswered call is one, in the recording its execution says ``skipped``); a call the
    recording started on arguments the stream then changed; which of two equal calls ran; another
    screening decision of the harness (invalid arguments, ...)."""
    under = trace.metadata.mode or "an unknown strategy"
    for i in range(max(len(sent), len(recorded))):
        a = sent[i] if i < len(sent) else None
        b = recorded[i] if i < len(recorded) else None
        if a == b or (a is not None and b is not None and _normal(a) == _normal(b)):
            continue
        return _decided(a, b, sent, recorded, trace, k, under)
    return None


def _tool_text(message: dict[str, Any] | None) -> str:
    if message is None or message.get("role") != "tool" or not isinstance(message.get("content"), str):
        return ""
    return str(message["content"])


def _decided(
    a: dict[str, Any] | None,
    b: dict[str, Any] | None,
    sent: Sequence[dict[str, Any]],
    recorded: Sequence[dict[str, Any]],
    trace: Trace,
    k: int,
    under: str,
) -> str | None:
    """`strategy_decision` for the first pair of messages that differ (`a` sent, `b` recorded)."""
    cid = (b or {}).get("tool_call_id") or (a or {}).get("tool_call_id")
    for text, where in ((_tool_text(a), "here"), (_tool_text(b), f"in the recording (made under {under})")):
        said = strategy_said(text)
        if said is not None:
            name, did = said
            what = f"failed while call {cid} ran" if did == "failed" else f"{did} call {cid}"
            return (
                f"; the strategy {name} {what} {where} (the harness's words for it are in the message): "
                "that strategy's own decision, not a hook's edit of the messages. A strategy that cancels or "
                "skips calls cannot follow a recording in which they ran, nor the other way round: compare "
                "it on recordings made under it, or replay with check='off' (--check off) to measure it "
                "anyway"
            )
    answered_here = {m.get("tool_call_id") for m in sent if m.get("role") == "tool"}
    answered_there = {m.get("tool_call_id") for m in recorded if m.get("role") == "tool"}
    if b is not None and b.get("role") == "tool" and b.get("tool_call_id") not in answered_here:
        return (
            f"; call {cid} is not answered here, and the recording (made under {under}) answers it: this "
            "replay's strategy skipped it (only a strategy that skips calls leaves one unanswered), its own "
            "decision, not a hook's edit. Compare a strategy that skips calls on recordings made under it, "
            "or replay with check='off' (--check off)"
        )
    if a is not None and a.get("role") == "tool" and a.get("tool_call_id") not in answered_there:
        skipped = any(
            e.tool_call_id == a.get("tool_call_id") and e.status == "skipped"
            for r in trace.rounds[: max(k, 1)]
            for e in r.executions
        )
        if skipped:
            return (
                f"; the recording (made under {under}) skipped call {a.get('tool_call_id')} (its execution "
                "says skipped: that strategy left it unanswered) and this replay answers it: a decision of "
                "the recording's strategy, not a hook's edit. Compare this trace under strategies that skip "
                "as it did, or replay with check='off' (--check off)"
            )
        return None
    if a is None or b is None or a.get("role") != "tool" or b.get("role") != "tool":
        return None
    here, there = (harness_decision(m.get("content") or "") for m in (a, b))
    if here is None and there is None:
        return None
    changed = any(
        f.kind == "changed_after_start" and f.tool_call_id == cid
        for r in trace.rounds[: max(k, 1)]
        for f in r.findings
    )
    if changed:
        return (
            f"; the recording (made under {under}) started call {cid} while the model streamed, on "
            "arguments the stream then changed (its changed_after_start finding), and answers it with "
            "what ran; a strategy that starts calls at the stream's end sees the final arguments "
            f"({here or 'it runs'}): the strategies decide differently, no hook edited the messages. "
            f"This recording compares only under a strategy that starts calls as {under} did"
        )
    if "duplicate of" in f"{here} {there}":
        return (
            f"; which of two equal calls runs is the strategy's own decision: the first copy a "
            "strategy starts runs and answers for the other (a streaming strategy such as eager starts "
            "the first to become complete; the others, as a rule, the first in model order); the "
            f"recording (made under {under}) decided "
            f"otherwise for call {cid} ({here or 'run'} here, {there or 'run'} in the recording), no "
            "hook edited the messages. Compare this trace under strategies that decide as "
            f"{under} does, or measure the others on recordings made under them"
        )
    return (
        f"; the harness decided otherwise for call {cid} ({here or 'run'} here, {there or 'run'} in the "
        f"recording, made under {under}): a decision the strategies make differently, not a hook edit"
    )


class ReplayModel:
    """Serves a trace's recorded responses in order, re-emitting each chunk at its recorded offset.

    Args:
        trace: the trace to replay.
        check: ``strict`` compares every message sent with the recording, ``ids`` only the
            sequence of tool-call ids, ``off`` nothing (for replays whose conversation differs on
            purpose, e.g. first_only against a parallel recording).
    """

    origin = "replayed"
    copy_free = True
    """It only reads requests and yields the trace's own payloads: the loop need not copy them."""

    def __init__(self, trace: Trace, *, check: Check = "strict") -> None:
        self.trace = trace
        self.check = check
        self.name = f"replay:{trace.metadata.title}"
        self.served = 0
        self.cut_now: Callable[[], bool] | None = None
        """Whether the replay is being cut now, by its own cut (the recorded deadline, or its abort at
        the recorded end): `replay_async` sets it."""
        self.run_started_at: float | None = None
        """The replayed run's start on the loop's clock (`replay_async` sets it): a call answering a
        cut does so at the run time it did in the recording (`_as_when_cut`)."""
        """Model calls served so far (the round in progress is ``served - 1``)."""
        self.before_start: Any = None
        """(`replay_async`) called as each call is about to enter its tool (`HookCalls.before_start`)."""

    def response_timing(self, request: ModelRequest) -> tuple[Timing, ChunkTiming]:
        """A replayed response is timed as recorded, so it carries the recording's labels."""
        recorded = self.trace.rounds[self.served - 1].model_call
        return recorded.timing, recorded.chunk_timing

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        rounds = self.trace.rounds
        k = self.served
        if k >= len(rounds):
            outcome = self.trace.outcome
            if k == len(rounds) and outcome.reason == "model_error":
                took = failed_call_s(self.trace)
                if took > 0:  # as long as the recorded call took to fail (a timeout, a refused connection)
                    await asyncio.sleep(took)
                raise ModelError(f"the recording's model call {k + 1} failed here: {outcome.error}")
            if k == len(rounds) and recorded_cut(self.trace) is not None:
                await _until_cut()  # the recorded run was cut off during this model call
            raise ReplayDivergenceError(
                f"{self.trace.metadata.title}: model call {k + 1} asked for, but the "
                f"recording has only {len(rounds)} response(s)"
            )
        recorded: Round = rounds[k]
        fails = k == len(rounds) - 1 and failed_mid_stream(self.trace)
        self.served += 1
        diff = divergence(request.messages, recorded.request_messages, self.check)
        if (
            diff is None
            and self.check != "off"
            and (request.tools is not None) != recorded.model_call.tools_offered
        ):
            diff = (
                "this request offers no tools, the recorded one did (e.g. a final call without tools "
                "that the recording did not make)"
                if request.tools is None
                else "this request offers tools, the recorded one offered none"
            )
        if diff is not None:
            hint = ""
            if self.check == "strict" and "tools" not in diff:
                hint = strategy_decision(request.messages, recorded.request_messages, self.trace, k) or (
                    "; if the recorded run's before_model_call hook edited the messages, the recording "
                    "holds the edited ones: replay with check='ids' (--check ids)"
                )
            raise ReplayDivergenceError(
                f"{self.trace.metadata.title}: round {k}: the conversation differs from "
                f"the recording ({self.check} check): {diff}{hint}"
            )
        loop = asyncio.get_running_loop()
        start = loop.time()
        call = recorded.model_call
        for chunk in call.chunks:
            delay = start + chunk.offset_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            yield chunk.payload
        rest = start + call.latency_s - loop.time()
        if rest > 0:
            await asyncio.sleep(rest)
        if fails:  # the recorded response broke off here
            raise ModelError(
                f"the recording's model call {k + 1} failed here, mid-stream: {self.trace.outcome.error}"
            )


_OUTCOME: dict[str, Literal["ok", "error", "timeout", "not_recorded", "invalid_arguments"]] = {
    "error": "error",
    "timeout": "timeout",
    "not_recorded": "not_recorded",
    "invalid_arguments": "invalid_arguments",  # a tool that refused its arguments (valid JSON) itself
}


_RAN = frozenset({"ok", "error", "timeout", "withheld", "not_recorded"})
_INVALID_PREFIX = "Error: invalid arguments for {name!r}: "
_INVALID_SUFFIX = ". The call was not executed; send the arguments its schema asks for."


def ran_tool(ex: ToolExecution) -> bool:
    """Whether the recorded call reached its tool: ``invalid_arguments`` only when the tool itself
    refused them (a `ToolOutcome`); the harness's own verdict (timing `DECIDED`) ran nothing."""
    return ex.status in _RAN or (ex.status == "invalid_arguments" and ex.timing != DECIDED)


def replay_tools(
    trace: Trace, model: ReplayModel | None = None, *, same_strategy: bool = False
) -> ToolRegistry:
    """Tools that return the recorded results after the recorded durations, answering by tool_call_id
    (or, for calls the recording does not know by id, by name and arguments in recorded order).

    With the replay's `model`, a call is only answered from the round the model is serving (ids and
    arguments repeat across rounds). A call the recorded run was cut off in (``cancelled``) has no
    known result: it waits for the replay's own cut, when the recording was cut off (or when its
    model failed mid-stream in that round). A recorded result is only ever served for the arguments
    it was recorded with: a call whose id matches a recorded run of other arguments (e.g. a call
    started early with arguments the stream then changed) raises `ReplayDivergenceError`.

    Calls the recording's harness screened out before they ran (``invalid_arguments`` for argument
    names the tool does not take or a required one missing) are screened out again, with the recorded
    reason (`Tool.screen_call`): the replay has no signature to check them against. A call the
    recording did not run (any such status) that this replay's screening lets through raises
    `ReplayDivergenceError` naming the recorded status. Tools whose repeats the recording answered as
    duplicates because they were marked idempotent are marked idempotent again.

    A call the recording's strategy cancelled itself (``asyncio.wait_for``, a task it cancelled) has
    no known result either: under that same strategy (`same_strategy`) it runs until the strategy
    cancels it again; under another it raises `ReplayDivergenceError`.
    """
    recorded: list[ToolExecution] = []
    streamed: dict[tuple[int, str], ToolCall] = {}
    """(round, id and position, or id alone): each call as the recorded stream ended with it."""
    by_place: dict[tuple[int, str], deque[int]] = defaultdict(deque)
    """(round, id and position in the batch): one provider id may be sent twice in a batch."""
    by_id: dict[tuple[int, str], deque[int]] = defaultdict(deque)
    by_key: dict[tuple[int, str], deque[int]] = defaultdict(deque)
    unknown: dict[tuple[int, str], str] = {}
    """Calls the recording has no result for: (round, id) -> why."""
    by_strategy: dict[tuple[int, str], deque[ToolExecution]] = defaultdict(deque)
    """(round, id and position): calls the recording's strategy cancelled itself, for what each did
    on being cancelled."""
    invalid: dict[tuple[int, str], deque[tuple[ToolExecution, str]]] = defaultdict(deque)
    """(round, id and position): the call the recording's harness screened out before it ran, and why."""
    idempotent: set[str] = set()
    on_cut: dict[tuple[int, str], deque[ToolExecution]] = defaultdict(deque)
    """(round, id and position): calls the recorded run was cut off in, for what each did then."""
    cut = recorded_cut(trace) is not None
    broke_in = len(trace.rounds) - 1 if failed_mid_stream(trace) else None
    for k, r in enumerate(trace.rounds):
        for call in r.tool_calls:
            streamed.setdefault((k, _place(call.tool_call_id, call.index)), call)
            streamed.setdefault((k, call.tool_call_id), call)
        for call, ex in zip(r.tool_calls, r.executions, strict=False):
            if ran_tool(ex):  # the tool ran
                recorded.append(ex)
                by_place[k, _place(ex.tool_call_id, call.index)].append(len(recorded) - 1)
                by_id[k, ex.tool_call_id].append(len(recorded) - 1)
                ran = replace(call, arguments=ex.arguments, _outcome=None)  # (what ran: its arguments)
                key = dedupe_key(ran) if call.tool_call_id == ex.tool_call_id else None
                if key:
                    by_key[k, key].append(len(recorded) - 1)
            elif ex.status == "cancelled" and not cut and (said := strategy_said(ex.result)) is not None:
                by_strategy[k, _place(ex.tool_call_id, call.index)].append(ex)
                unknown.setdefault(
                    (k, ex.tool_call_id),
                    f"the recording's strategy {said[0]} {said[1]} it (its own decision), so its result is "
                    f"unknown: replay this trace under {said[0]}, or compare the others on recordings made "
                    "under them",
                )
            elif ex.status == "cancelled":
                unknown.setdefault((k, ex.tool_call_id), "cancelled: the recorded run was cut off")
                on_cut[k, _place(ex.tool_call_id, call.index)].append(ex)
            elif ex.status == "skipped":
                mode = trace.metadata.mode or "first_only"
                unknown.setdefault(
                    (k, ex.tool_call_id),
                    f"skipped: the recording was made under {mode}, which never ran it, so its result is "
                    f"unknown (replay it under {mode}, the strategy that skipped it)",
                )
            else:  # screened out before it ran: unknown_tool, invalid_arguments, rejected, duplicate
                if ex.status == "invalid_arguments":
                    problem = _between(ex.result, _INVALID_PREFIX.format(name=ex.name), _INVALID_SUFFIX)
                    invalid[k, _place(ex.tool_call_id, call.index)].append((ex, problem or ex.result))
                elif ex.status == "duplicate" and f"{ex.name!r} is marked idempotent" in ex.result:
                    idempotent.add(ex.name)
                unknown.setdefault(
                    (k, ex.tool_call_id),
                    f"the recording did not run it: it was {ex.status} ({_short_text(ex.result, 160)}), "
                    "but this replay's screening let it run",
                )
    used: set[int] = set()

    def take(queue: deque[int] | None) -> int | None:
        while queue and queue[0] in used:
            queue.popleft()
        return queue.popleft() if queue else None

    def find(table: dict[tuple[int, str], deque[int]], key: str) -> int | None:
        if model is not None:
            return take(table.get((model.served - 1, key)))
        for k in range(len(trace.rounds)):  # no model to say which round: the first that has it
            pos = take(table.get((k, key)))
            if pos is not None:
                return pos
        return None

    def _refuse_snapshot(call: ToolCall, name: str, k: int) -> None:
        """The replay's chunks are the recording's, so a call that runs with other arguments than
        those its stream ended with was started early, on an earlier snapshot of them."""
        final = streamed.get((k, _place(call.tool_call_id, call.index))) or streamed.get(
            (k, call.tool_call_id)
        )
        if final is None or final.arguments == call.arguments or final.args == call.args is not None:
            return
        under = f" (made under {trace.metadata.mode})" if trace.metadata.mode else ""
        raise StartedOnSnapshotError(
            f"{trace.metadata.title}: round {k}: this trace cannot evaluate a strategy that starts calls "
            "while the model streams (eager, or a streaming strategy of yours): it would have started "
            f"call {call.tool_call_id} as "
            f"{name}({_short_text(call.arguments)}), an earlier snapshot of its arguments that already "
            f"formed a complete JSON object, but the recorded stream ended with "
            f"{final.name}({_short_text(final.arguments)}), and the recording{under} never ran the call "
            "with the earlier arguments: a replay cannot invent that result. That is eager's true "
            "behaviour on this stream (live, the call runs as started, with a changed_after_start "
            "finding); compare the other strategies on this trace, and measure eager live or on a "
            "recording made under eager"
        )

    def screen(call: ToolCall) -> str | None:
        place = _place(call.tool_call_id, call.index)
        rounds = [model.served - 1] if model is not None else range(len(trace.rounds))
        for k in rounds:
            reasons = invalid.get((k, place))
            if reasons and _same_arguments(call, reasons[0][0]):  # (not an earlier snapshot of them)
                return reasons.popleft()[1]
        return None

    def make(name: str) -> Any:
        async def replayed(**_: Any) -> ToolOutcome:
            call = current_tool_call.get()
            pos = find(by_place, _place(call.tool_call_id, call.index))
            if pos is None:
                pos = find(by_id, call.tool_call_id)
            if pos is None:
                pos = find(by_key, dedupe_key(call) or "")
            where = f" in round {model.served - 1}" if model is not None else ""
            if model is not None and (pos is None or not _same_arguments(call, recorded[pos])):
                _refuse_snapshot(call, name, model.served - 1)
            if pos is None:
                why = unknown.get((model.served - 1, call.tool_call_id)) if model is not None else None
                place = (model.served - 1, _place(call.tool_call_id, call.index)) if model else None
                if same_strategy and place in by_strategy:
                    # (the strategy cancelled it, and will again: it runs until then, and answers the
                    # cancellation as recorded)
                    began = asyncio.get_running_loop().time()
                    answers = by_strategy[place]
                    try:
                        await asyncio.get_running_loop().create_future()
                    except asyncio.CancelledError:
                        if answers and model is not None:
                            return await _as_when_cut(answers.popleft(), began, model.run_started_at, True)
                        raise
                if (
                    why is not None
                    and why.startswith("cancelled")
                    and (cut or (model is not None and model.served - 1 == broke_in))
                ):
                    began = asyncio.get_running_loop().time()
                    k = model.served - 1 if model is not None else broke_in
                    queue = on_cut.get((k or 0, _place(call.tool_call_id, call.index)))
                    try:
                        await _until_cut()  # (the replay's cut, or its model failing, cancels it)
                    except asyncio.CancelledError:
                        if queue:  # what the recorded call did on being cancelled, done again
                            ex = queue.popleft()
                            linger = same_strategy or (  # (the cancellation is the recorded one:
                                model is not None and model.cut_now is not None and model.cut_now()
                            )  # any, under the recording's strategy; else only the replay's own cut)
                            return await _as_when_cut(
                                ex, began, model.run_started_at if model else None, linger
                            )
                        raise
                raise ReplayDivergenceError(
                    f"{trace.metadata.title}: no recorded execution for call "
                    f"{call.tool_call_id} {name}({call.arguments}){where}" + (f" ({why})" if why else "")
                )
            ex = recorded[pos]
            if not _same_arguments(call, ex):
                raise ReplayDivergenceError(
                    f"{trace.metadata.title}: call {call.tool_call_id} {name}({call.arguments}){where}: "
                    f"the recording ran it with other arguments, {name}({ex.arguments}), so the recorded "
                    "result is not this call's (e.g. the call started before its arguments were complete "
                    "and the stream then changed them)"
                )
            used.add(pos)
            await asyncio.sleep(
                (ex.returned_at if ex.returned_at is not None else ex.ended_at) - ex.started_at
            )
            return ToolOutcome(
                text=ex.result if ex.withheld_result is None else ex.withheld_result,
                status=_OUTCOME.get(ex.status, "ok"),
                duration_s=ex.duration_s,
                timing=ex.timing,
            )

        replayed.__name__ = name
        return replayed

    registry = ToolRegistry()
    for schema in trace.tools:
        fn = schema.get("function") or {}
        name = fn.get("name")
        if name and name not in registry:
            registry.add(
                Tool(
                    name=name,
                    function=make(name),
                    description=fn.get("description") or "",
                    parameters=fn.get("parameters") or {},
                    uses_current_call=True,
                    check_arguments=False,
                    screen_call=screen if invalid else None,
                    idempotent=name in idempotent,
                )
            )
    return registry


_CAUGHT = re.compile(
    r" while this call was running \(it caught the cancellation and returned at ([0-9.]+) s;"
)
_RAISED = re.compile(r" while this call was running \(on being cancelled it raised (.*)\)\.", re.S)


async def _as_when_cut(
    ex: ToolExecution, began: float, origin: float | None = None, linger: bool = False
) -> ToolOutcome:
    """Do again what the recorded call `ex` did when the run was cut off while it ran (its text
    says): return when it did (the replay's executor then records that it caught the cancellation
    and returned), or raise what it raised; else stop (CancelledError), as a call whose result is
    unknown. When: at the run time it did in the recording (`origin`: the replayed run's start), not
    as long after its own start (under another strategy it started at another time: a call that
    answered the cut at once would run past the cut; c23 #2), or at once if that time has passed.
    A call that simply stopped stops at once, unless `linger` (the cancellation now is the one the
    recording's was: its strategy's, or the replay's own cut): then when it did (it may have cleaned
    up first; d23 #1, #2). Another cancellation (the replay's strategy cancelling it before the
    recorded cut) or a call the recording never started (``Not executed``) stops at once (e23 #1, #2)."""
    now = asyncio.get_running_loop().time()
    caught = _CAUGHT.search(ex.result)
    raised = _RAISED.search(ex.result) if caught is None else None
    if (
        caught is None
        and raised is None
        and (origin is None or not linger or ex.result.startswith("Not executed"))
    ):
        raise asyncio.CancelledError
    if caught is not None:
        at = float(caught[1])  # (written to the millisecond; the record's end, when it agrees, exactly)
        end = ex.ended_at if abs(ex.ended_at - at) <= 5e-4 else at
    else:  # (raised, or stopped: the record's end is when the cancellation came out of it, after any
        end = ex.ended_at  # cleanup it did first; d23 #1, #2)
    delay = end - (now - origin) if origin is not None else end - ex.started_at - (now - began)
    if delay > 0:
        await asyncio.sleep(delay)
    if raised is not None:
        raise Recorded(raised[1])
    if caught is None:
        raise asyncio.CancelledError
    return ToolOutcome(text="")  # (discarded: the executor records the cancellation)


def tools_not_offered(trace: Trace) -> list[str]:
    """Calls the recording ran whose tool the trace's ``tools`` do not offer (a replay would answer
    them as unknown tools, where the recording has their results): ``round k call ID (name)``."""
    offered = {(s.get("function") or {}).get("name") for s in trace.tools}
    return [
        f"round {k} call {ex.tool_call_id} ({ex.name})"
        for k, r in enumerate(trace.rounds)
        for ex in r.executions
        if ran_tool(ex) and ex.name not in offered
    ]


def _place(tool_call_id: str, index: int) -> str:
    """A call's id and its index in the response: what tells apart two calls sent with one id."""
    return f"{tool_call_id}\x00{index}"


def _same_arguments(call: ToolCall, ex: ToolExecution) -> bool:
    """Whether `call` asks for what the recorded execution ran: the same text, or the same JSON
    object (an id the loop made unique, whitespace after the object, key order)."""
    if call.arguments == ex.arguments:
        return True
    ran = parse_arguments(ex.arguments)
    return type(ran) is ParsedArguments and ran.value == call.args


def _short_text(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _between(text: str, prefix: str, suffix: str) -> str | None:
    if text.startswith(prefix) and text.endswith(suffix):
        return text[len(prefix) : len(text) - len(suffix)]
    return None


def replay_hooks(trace: Trace, model: ReplayModel | None = None) -> Hooks:
    """The recording's approval decisions, made again: calls it rejected are rejected with the
    recorded reason, results it withheld are withheld with the recorded reason, so the conversation
    (and the record) matches the recording's. Calls are matched by tool_call_id and position in the
    response (one id can be sent twice in a batch), in the round the replay's `model` serves (without
    it: in recorded order).

    The recorded hook failures (``outcome.hook_failures``) happen again: where a recorded hook
    raised (or answered something meaningless), the replay's raises the recorded error (`Recorded`),
    for the same call or chunk, so the replay's ``hook_failures`` are the recording's (the
    ``on_event`` listener's: `replay_listener`)."""
    rejected: dict[tuple[int, str], deque[str]] = defaultdict(deque)
    withheld: dict[tuple[int, str], deque[str]] = defaultdict(deque)
    for k, r in enumerate(trace.rounds):
        k = k if model is not None else 0
        for call, ex in zip(r.tool_calls, r.executions, strict=False):
            place = _place(ex.tool_call_id, call.index)
            if ex.status == "rejected":
                reason = _between(ex.result, "Rejected: ", ". The call was not executed.")
                rejected[k, place].append(reason or ex.result)
            elif ex.status == "withheld":
                reason = _between(ex.result, "Result withheld: ", ".")
                withheld[k, place].append(reason or ex.result)
    failures: dict[tuple[str, int | None, str | None], deque[str]] = defaultdict(deque)
    """(hook, round, tool_call_id): the errors a recorded hook raised for that call, in order."""
    chunk_failures: dict[tuple[int, int], deque[str]] = defaultdict(deque)
    """(round, chunk number): the errors the recorded ``on_model_chunk`` hook raised for that chunk."""
    for f in trace.outcome.hook_failures:
        at: int | None = f.round_index if model is not None else 0
        if f.hook == "on_model_chunk" and f.round_index is not None and f.round_index < len(trace.rounds):
            chunk_failures[at or 0, _failed_chunk(trace.rounds[f.round_index], f)].append(f.error)
        elif f.hook != "on_event":
            failures[f.hook, at, f.tool_call_id].append(f.error)

    def here() -> int:
        return model.served - 1 if model is not None else 0

    def decided(table: dict[tuple[int, str], deque[str]], call: ToolCall) -> str | None:
        queue = table.get((here(), _place(call.tool_call_id, call.index)))
        return queue.popleft() if queue else None

    def fail(hook: str, round_index: int | None, tool_call_id: str | None) -> None:
        """Raise what the recorded hook raised here, if it raised."""
        queue = failures.get((hook, round_index, tool_call_id))
        if queue:
            raise Recorded(queue.popleft())

    def approve_call(call: ToolCall) -> str | None:
        reason = decided(rejected, call)
        fail("approve_call", here(), call.tool_call_id)
        return reason

    def approve_result(call: ToolCall, execution: ToolExecution) -> str | None:
        reason = decided(withheld, call)
        fail("approve_result", here(), call.tool_call_id)
        return reason

    def on_tool_start(call: ToolCall) -> None:
        fail("on_tool_start", here(), call.tool_call_id)

    def on_tool_complete(execution: ToolExecution) -> None:
        fail("on_tool_complete", here(), execution.tool_call_id)

    seen = [-1, 0]  # (the round being streamed, chunks of it so far)

    def on_model_chunk(payload: dict[str, Any]) -> None:
        k = here()
        if seen[0] != k:
            seen[:] = [k, 0]
        n, seen[1] = seen[1], seen[1] + 1
        queue = chunk_failures.get((k, n))
        if queue:
            raise Recorded(queue.popleft())

    outcome = trace.outcome
    model_calls = [0]

    def before_model_call(messages: list[dict[str, Any]]) -> None:
        """The recorded run stopped before its next model call: this replay stops there too, with
        the recorded hook's error (or, for a recording that holds none, a note)."""
        k, model_calls[0] = model_calls[0], model_calls[0] + 1
        fail("before_model_call", k if model is not None else 0, None)
        if k == len(trace.rounds) and outcome.reason == "hook_error":
            raise RuntimeError(f"the recording's before_model_call hook failed here: {outcome.error}")

    hooks = {hook for hook, _, _ in failures}
    return Hooks(
        approve_call=approve_call if rejected or "approve_call" in hooks else None,
        approve_result=approve_result if withheld or "approve_result" in hooks else None,
        before_model_call=before_model_call
        if outcome.reason == "hook_error" or "before_model_call" in hooks
        else None,
        on_tool_start=on_tool_start if "on_tool_start" in hooks else None,
        on_tool_complete=on_tool_complete if "on_tool_complete" in hooks else None,
        on_model_chunk=on_model_chunk if chunk_failures else None,
    )


_CHUNK = re.compile(r"\(the hook failed on chunk (\d+)\)")


def _failed_chunk(r: Round, failure: HookFailure) -> int:
    """The chunk of round `r` a recorded ``on_model_chunk`` failure was for: as its effect names it,
    or (recordings made before it did) the last chunk that had arrived when the hook failed."""
    named = _CHUNK.search(failure.effect)
    if named is not None:
        return int(named[1])
    mc = r.model_call
    arrived = [j for j, c in enumerate(mc.chunks) if mc.started_at + c.offset_s <= failure.at + 1e-9]
    return arrived[-1] if arrived else 0


def replay_listener(trace: Trace, model: ReplayModel | None = None) -> EventListener | None:
    """An ``on_event`` listener that fails where the recorded run's listener failed (the same event
    kind, call and round; its effect names the kind), so those failures are in the replay's record
    too; None when the recording holds none."""
    failed: dict[tuple[str, str | None], deque[tuple[int | None, str]]] = defaultdict(deque)
    for f in trace.outcome.hook_failures:
        kind = _EVENT_KIND.search(f.effect) if f.hook == "on_event" else None
        if kind is not None:
            failed[kind[1], f.tool_call_id].append((f.round_index if model is not None else None, f.error))
    if not failed:
        return None

    def listener(event: RunEvent) -> None:
        ex = getattr(event, "execution", None)
        call = getattr(event, "call", None)
        tool_call_id = ex.tool_call_id if ex is not None else getattr(call, "tool_call_id", None)
        queue = failed.get((event.kind, tool_call_id))
        if not queue:
            return
        round_index, error = queue[0]
        at = getattr(event, "round_index", None)
        if round_index is None or at is None or at == round_index:
            queue.popleft()
            raise Recorded(error)

    return listener


_EVENT_KIND = re.compile(r"the (\w+) event stands")


def replay_config(trace: Trace, mode: StrategySpec | None = None, **settings: Any) -> RunConfig:
    """The trace's recorded settings, with the mode or strategy (and any setting) overridden."""
    recorded = {k: v for k, v in trace.metadata.settings.items() if k in RunConfig.__dataclass_fields__}
    check_recorded_settings(trace, keep=set(settings))
    chosen = mode if mode is not None else trace.metadata.mode or "sequential"
    merged = {**recorded, **settings, "mode": chosen}
    try:
        return RunConfig(**merged)
    except UsageError:
        if mode is not None or "mode" in settings:
            raise
        raise UsageError(
            f"{trace.metadata.title}: recorded under the strategy {trace.metadata.mode!r}, which is not a "
            "built-in; pass it to replay it under the same strategy (replay(trace, my_strategy), or "
            "--strategy module:attribute), or name another"
        ) from None


def check_recorded_settings(trace: Trace, keep: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    """A `TraceFormatError` naming the trace and the setting when the recorded settings (except those
    in `keep`, which the replay overrides) are not a valid run's: a replay cannot run under them."""
    recorded = {
        k: v
        for k, v in trace.metadata.settings.items()
        if k in RunConfig.__dataclass_fields__ and k not in keep and k != "mode"
    }
    try:
        RunConfig(**recorded, mode="sequential")
    except UsageError as exc:
        what = str(exc).replace("RunConfig.", "")
        raise TraceFormatError(
            f"{trace.metadata.title}: metadata.settings: {what} (the recorded settings are not a valid "
            "run's; override the setting to replay it)"
        ) from None


def _skips_calls(spec: Any) -> bool:
    try:
        return bool(getattr(resolve(spec), "skips_calls", False))
    except UsageError:  # a recording's user strategy, unknown here
        return False


def default_check(trace: Trace, mode: StrategySpec) -> Check:
    """``strict``, or ``off`` when the replay's strategy or the recording's leaves calls unanswered
    on purpose (``first_only``) and they differ: such a conversation cannot match the recording."""
    recorded = trace.metadata.mode or "sequential"
    if resolve(mode).name == recorded:
        return "strict"
    return "off" if _skips_calls(mode) or _skips_calls(recorded) else "strict"


async def replay_async(
    trace: Trace,
    mode: StrategySpec | None = None,
    *,
    check: Check | None = None,
    tools: ToolRegistry | None = None,
    **settings: Any,
) -> RunResult:
    """Replay on the running loop's clock (real time in a notebook: ``await replay_async(...)``)."""
    cfg = replay_config(trace, mode, **settings)
    if tools is None:
        missing = tools_not_offered(trace)
        if missing:
            raise ReplayDivergenceError(
                f"{trace.metadata.title}: the recording ran tools its trace does not offer "
                f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}): a replay would answer "
                "them as unknown tools; the trace's tools list is incomplete"
            )
    model = ReplayModel(trace, check=check or default_check(trace, cfg.mode))
    hooks = replay_hooks(trace, model)
    listener = replay_listener(trace, model)
    cut_at = recorded_cut(trace)
    tie = (
        cut_at is not None
        and trace.outcome.status == "aborted"
        and cfg.timeout_s is not None
        and cfg.timeout_s >= cut_at - 1e-9
    )
    if cut_at is None or (cfg.timeout_s is not None and cfg.timeout_s <= cut_at + 1e-9 and not tie):
        abort = None  # (a recorded deadline cuts the replay by itself; an abort at it wins, as it did)
        timer = None
    else:
        abort = AbortHandle()
        why = (
            f"the replay stops where the recorded run was cut off ({trace.outcome.status}/"
            f"{trace.outcome.reason} at {cut_at:.3f} s)"
        )
        # (at the recorded end: no call starts from then on, and a call that finished at that very
        # instant, as recorded, finishes before the cut reaches the calls still running)
        if tie:
            abort._wins_tie_at = (cut_at, why)
        if _same_strategy(trace, cfg.mode):  # (a signal's cut stays interrupted, a cancellation cancelled)
            abort._ends_as = trace.outcome.reason
        loop = asyncio.get_running_loop()
        at_end = getattr(loop, "call_at_instant_end", None)
        unstarted = _never_started(trace)
        if at_end is not None and unstarted:  # (virtual clock) that instant in the recorded order: the
            # calls the recording started then start, and the first one it never started stops the run
            # as it is about to enter its tool (as the recorded abort did); the cut ends the instant
            model.before_start = _stopping_at(unstarted, model, cut_at, abort, why)
            timer = loop.call_later(cut_at, at_end, lambda: abort._abort(why, True))
        else:
            timer = loop.call_later(cut_at, abort._abort, why, True)
    model.run_started_at = started = asyncio.get_running_loop().time()  # (the run starts now)
    timeout_s = cfg.timeout_s

    def cut_now() -> bool:
        if abort is not None and abort.aborted:
            return True
        return timeout_s is not None and asyncio.get_running_loop().time() - started >= timeout_s - 1e-9

    model.cut_now = cut_now
    try:
        result = await run(
            model,
            tools or replay_tools(trace, model, same_strategy=_same_strategy(trace, cfg.mode)),
            trace.initial_messages,
            config=cfg,
            hooks=hooks,
            abort=abort,
            on_event=listener,
        )
    finally:
        if timer is not None:
            timer.cancel()
    if cut_at is not None and len(result.rounds) < len(trace.rounds) and _same_strategy(trace, cfg.mode):
        dropped = ReplayDivergenceError(  # (a safety net: the cut at the recorded end keeps every round)
            f"{trace.metadata.title}: the replay under the recording's own strategy kept "
            f"{len(result.rounds)} of the {len(trace.rounds)} recorded rounds of a run cut off at "
            f"{cut_at:.3f} s ({trace.outcome.status}/{trace.outcome.reason}): it would drop recorded rounds"
        )
        dropped.partial_result = result
        raise dropped
    return _first_chunks_as_recorded(_ends_on_placeholder(result, trace, model.served), trace)


def _same_strategy(trace: Trace, mode: StrategySpec) -> bool:
    try:
        return resolve(mode).name == (trace.metadata.mode or "sequential")
    except UsageError:
        return False


def _never_started(trace: Trace) -> set[tuple[int, str]]:
    """(round, id and position) of the calls a cut-off recording answered as never started."""
    return {
        (k, _place(ex.tool_call_id, call.index))
        for k, r in enumerate(trace.rounds)
        for call, ex in zip(r.tool_calls, r.executions, strict=False)
        if ex.status == "cancelled" and ex.result.startswith("Not executed: ")
    }


def _stopping_at(
    unstarted: set[tuple[int, str]], model: ReplayModel, cut_at: float, abort: AbortHandle, why: str
) -> Any:
    """What the replay does as a call is about to enter its tool: a call the recording never started,
    at the recorded cut or later, stops the run there (it does not start, as recorded)."""

    def before_start(call: ToolCall) -> None:
        now = asyncio.get_running_loop().time()
        if now >= cut_at - 1e-12 and (model.served - 1, _place(call.tool_call_id, call.index)) in unstarted:
            abort._abort(why, True)

    return before_start


_RECORDING_GAPS = frozenset({"response_not_recorded", "next_round_not_representable"})
"""Recorded outcome reasons that say the recording lacks what came next (not why the run stopped)."""


def _ends_on_placeholder(result: RunResult, trace: Trace, served: int) -> RunResult:
    """A run whose last response was an importer's stand-in (`Round.placeholder`) did not end with a
    model's answer, so it ends as the recording did: ``completed/agent_finished`` when the recorded
    agent ended its own run (its submit or finish tool), ``incomplete/stopped_as_recorded`` when the
    recording says what stopped it (an iteration or message limit, a compaction), otherwise
    ``incomplete/recording_incomplete``; never a made-up final answer."""
    why = trace.rounds[served - 1].placeholder if 0 < served <= len(trace.rounds) else None
    if why is None or result.status != "completed":
        return result
    recorded = trace.outcome
    at_end = served == len(trace.rounds)
    if at_end and recorded.status == "completed":
        return replace(result, reason="agent_finished", final_answer=recorded.final_answer, error=None)
    if (
        at_end
        and recorded.status == "incomplete"
        and recorded.reason not in _RECORDING_GAPS
        and not recorded.reason.startswith("recording_")
    ):
        return replace(
            result,
            status="incomplete",
            reason="stopped_as_recorded",
            final_answer=None,
            error=f"the recorded run stopped here ({recorded.reason}: {recorded.error or why})",
        )
    return replace(
        result,
        status="incomplete",
        reason="recording_incomplete",
        final_answer=None,
        error=f"round {served - 1} is a placeholder, not a model response: {why}",
    )


def _first_chunks_as_recorded(result: RunResult, trace: Trace) -> RunResult:
    """A replay keeps the recording's labels, the first chunk's time included: as long after the
    model call's start as recorded (a time to first token an importer kept, a live run's first
    chunk), and unknown where the recording does not know it (`ModelCall.first_chunk_at` None). The
    loop would otherwise take the time it emitted the recorded body, often the whole latency."""

    def first(k: int, r: Round) -> float | None:
        recorded = trace.rounds[k].model_call
        if recorded.first_chunk_at is None:
            return None
        return r.model_call.started_at + (recorded.first_chunk_at - recorded.started_at)

    rounds = tuple(
        replace(r, model_call=replace(r.model_call, first_chunk_at=first(k, r)))
        if k < len(trace.rounds) and first(k, r) != r.model_call.first_chunk_at
        else r
        for k, r in enumerate(result.rounds)
    )
    return result if rounds == result.rounds else replace(result, rounds=rounds)


def replayed_trace(
    result: RunResult, trace: Trace, *, source: str | None = None, clock: str = "virtual"
) -> Trace:
    """A replay of `trace` as a trace of its own: origin ``replayed``, its strategy and settings (not
    the recording's), where it came from in ``source`` and ``notes``; the recording's wall time and
    notes are not carried over (they describe another run)."""
    meta = trace.metadata
    made_from = source or meta.source or meta.title
    return Trace.from_run(
        result,
        TraceMetadata(
            title=meta.title,
            origin="replayed",
            provider=meta.provider,
            model=meta.model,
            source=made_from,
            notes=(
                f"replayed as {result.mode} on the {clock} clock from "
                f"{'an' if meta.origin[:1] in 'aeiou' else 'a'} {meta.origin} trace ({made_from}) "
                f"recorded under {meta.mode or 'an unknown strategy'}"
            ),
            redactions=meta.redactions,
        ),
    )


def replay(
    trace: Trace,
    mode: StrategySpec | None = None,
    *,
    virtual: bool = True,
    check: Check | None = None,
    tools: ToolRegistry | None = None,
    **settings: Any,
) -> RunResult:
    """Replay a trace under `mode` (a mode or strategy name, ``module:attribute``, or a strategy
    object; default: the recording's) and return the run; on the virtual clock unless ``virtual=False``.

    Passing real `tools` on the virtual clock warns: virtual time jumps over real waits.
    """
    if virtual and tools is not None:
        warnings.warn(
            "replaying with real tools on the virtual clock: their real waits are skipped and "
            "timeouts may fire spuriously; use virtual=False for real tools",
            RuntimeWarning,
            stacklevel=2,
        )
    coro = replay_async(trace, mode, check=check, tools=tools, **settings)
    if virtual:
        return run_virtual(coro)
    if not in_running_loop():  # Ctrl-C: a KeyboardInterrupt carrying the run so far (``partial_result``)
        return run_main(coro)
    coro.close()
    from toolcall_lab.exceptions import UsageError

    raise UsageError("replay(virtual=False) inside a running event loop: use `await replay_async(...)`")

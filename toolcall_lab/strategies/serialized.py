"""``serialized``: one call per client round trip through a `SerializedSession` (a proxy in process).

Cost model: a batch of N calls costs N-1 extra client round trips of ``round_trip_s`` each (the
first call arrives with the model's response; the last result travels with the next model
request), recorded as `ClientRoundTrip`s labelled ``placeholder``. A round trip cut off by the end
of the run (deadline, abort, cancellation) is recorded up to that moment, its timing note saying so.
The complete message list is rebuilt from the session once every call is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from toolcall_lab._execution import Interrupted
from toolcall_lab.events import make_action, make_observation
from toolcall_lab.messages import ToolCall
from toolcall_lab.proxy.session import SerializedSession
from toolcall_lab.records import ROUND_TRIP_PLACEHOLDER, Timing, make_round_trip
from toolcall_lab.strategies.base import Strategy, unchanged
from toolcall_lab.strategies.batch import Batch


def _session(assistant_message: dict[str, Any], calls: Sequence[ToolCall]) -> tuple[SerializedSession, bool]:
    """A session keyed by position: calls whose id repeats in the batch get a unique stand-in id
    (``id#position``) inside the session (True: stand-ins were needed; map the results back).

    In process, the session only hands out calls and collects results (the loop keeps the
    conversation and never asks it to rebuild the upstream request), so it gets the assistant message
    without its tool calls: the session deep-copies the message, and copying N calls per batch costs
    more than scheduling them."""
    message = {k: v for k, v in assistant_message.items() if k != "tool_calls"}
    if len({c.tool_call_id for c in calls}) == len(calls):
        return SerializedSession(message, calls), False
    seen: set[str] = set()
    unique = []
    for pos, call in enumerate(calls):
        if call.tool_call_id in seen:
            call = replace(call, tool_call_id=f"{call.tool_call_id}#{pos}")
        seen.add(call.tool_call_id)
        unique.append(call)
    return SerializedSession(message, unique), True


class Serialized(Strategy):
    """One call per client round trip: the first comes with the model's response, each later one
    costs a round trip (the client sends the previous result, the proxy answers with the next call)."""

    name = "serialized"

    def runs_as(self) -> str | None:
        return unchanged(self, Serialized, "serialized")

    async def run(self, batch: Batch) -> None:
        if not batch._screen_now():
            await batch._screen()
        calls, done, started = batch._calls, batch._done, batch._started
        screened, is_open = batch._pre, batch._open
        session, stand_ins = _session(batch._assistant or {"role": "assistant"}, calls)
        round_trip_s = batch.round_trip_s
        timing = Timing(source="placeholder", note=f"{ROUND_TRIP_PLACEHOLDER} ({round_trip_s} s)")
        executor = batch._executor
        now, execute = executor.now, executor.execute
        emit, round_index, run_id = batch._emit, batch.round_index, batch._run_id
        settled = batch._settled()
        pos = 0
        at = now()
        while (handed := session.next_call()) is not None:
            if executor.stop_asked and executor.refuse_start():  # an abort just now: no further round
                raise asyncio.CancelledError  # trip, no further call
            call = calls[pos]
            if pos:
                if round_trip_s:
                    try:
                        await asyncio.sleep(round_trip_s)
                    except BaseException:  # the run stopped during this round trip: it counts up to here
                        cut = Timing(
                            source="placeholder",
                            note=f"{timing.note}; cut off after {now() - at:.3f} s when the run stopped",
                        )
                        batch._round_trips.append(make_round_trip(call.tool_call_id, pos, at, now(), cut))
                        batch._client_round_trips += 1
                        raise
                    ended = now()
                else:
                    ended = at
                batch._round_trips.append(make_round_trip(call.tool_call_id, pos, at, ended, timing))
                batch._client_round_trips += 1
                at = ended
            started[pos] = at
            is_open[pos] = True
            emit(make_action("action", at, round_index, call, run_id))
            pre = screened[pos]
            if pre is None:
                try:
                    done[pos] = ex = await execute(call, pos, at)
                except Interrupted as exc:
                    done[pos] = exc.execution
                    raise
                at = ex.ended_at if settled else now()
            else:
                done[pos] = ex = pre if pre.started_at == at else replace(pre, started_at=at, ended_at=at)
            session.submit(handed.tool_call_id, ex.result)
            is_open[pos] = False
            emit(make_observation("observation", at, round_index, ex, run_id))
            pos += 1
        messages = session.tool_messages()
        if stand_ins:  # back to the ids the model sent
            messages = [{**m, "tool_call_id": c.tool_call_id} for c, m in zip(calls, messages, strict=True)]
        batch._tool_messages = messages

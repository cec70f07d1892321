"""Serialized mode's state machine: hand a client one tool call per round trip, then rebuild.

A client that sets ``parallel_tool_calls: false`` may only receive one call at a time, but the
upstream model returned N. `SerializedSession` keeps the batch: it hands out the first call, records
each result, hands out the next, and once all N are answered rebuilds the complete message list
(the original assistant message with all N calls, then the N results in the original order) for the
single upstream call that follows. The run loop's in-process serialized mode uses it (one batch, one
client, the upstream's ids unchanged); the HTTP proxy, which serves many clients, keeps its batches
as `batches.Batch` records under ids of its own (see `ids`).

Results are kept **by position**, not by id: calls are handed out one at a time, so the result that
arrives answers the call that was handed out, and a batch in which the provider repeated an id
(``[call_a, call_a]``) gets one result per call, in order. `submit` still checks the id against the
call handed out, so a result for a different call is refused instead of being filed under the wrong one.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from toolcall_lab.exceptions import ProxyProtocolError
from toolcall_lab.messages import ToolCall


class SerializedSession:
    """The queue of one upstream batch: the calls, the position handed out, and results so far."""

    def __init__(self, assistant_message: dict[str, Any], calls: Sequence[ToolCall]) -> None:
        if not calls:
            raise ProxyProtocolError("a serialized session needs at least one tool call")
        self.assistant_message = copy.deepcopy(assistant_message)
        self.calls = tuple(calls)
        self._results: list[str] = []
        self.handed_out = 0
        """How many times a call was handed to the client (retries of the same call count again)."""

    @property
    def done(self) -> bool:
        return len(self._results) >= len(self.calls)

    @property
    def answered(self) -> int:
        """How many calls of the batch have a result (= the position of the current call)."""
        return len(self._results)

    @property
    def results(self) -> tuple[str, ...]:
        """The results received so far, by position."""
        return tuple(self._results)

    @property
    def current(self) -> ToolCall | None:
        """The call the client must answer next (None when all are answered)."""
        return None if self.done else self.calls[len(self._results)]

    def next_call(self) -> ToolCall | None:
        """Hand out the current call; asking again before answering returns the same call (retries)."""
        call = self.current
        if call is not None:
            self.handed_out += 1
        return call

    def client_message(self) -> dict[str, Any]:
        """The assistant message the client sees this round trip: the same message, one call."""
        call = self.current
        if call is None:
            raise ProxyProtocolError("all calls of this batch are answered; nothing to hand out")
        return hand_out_message(self.assistant_message, call, len(self._results))

    def submit(self, tool_call_id: str, content: str, *, position: int | None = None) -> None:
        """Record the client's result for the call handed out; anything else is a protocol error.

        Args:
            tool_call_id: the id of the call answered; must be the id of the call handed out.
            content: the tool result.
            position: optionally, the position the caller believes it answers; must be the current
                one (lets a caller whose batch repeats an id say which of the calls it means).
        """
        current = self.current
        if current is None:
            raise ProxyProtocolError(
                f"tool_call_id {tool_call_id!r} was already answered: all {len(self.calls)} calls of "
                "this batch have results"
            )
        at = len(self._results)
        if position is not None and position != at:
            raise ProxyProtocolError(
                f"result for position {position} ({tool_call_id!r}) arrived out of order; the call "
                f"handed out is position {at} ({current.tool_call_id!r})"
            )
        if tool_call_id != current.tool_call_id:
            ids = [c.tool_call_id for c in self.calls]  # only on the error path: submit is per call
            if tool_call_id not in ids:
                raise ProxyProtocolError(
                    f"tool_call_id {tool_call_id!r} is not part of this batch (expected one of "
                    f"{sorted(set(ids))})"
                )
            if tool_call_id in ids[:at]:
                raise ProxyProtocolError(
                    f"tool_call_id {tool_call_id!r} was already answered; the call handed out now is "
                    f"{current.tool_call_id!r}"
                )
            raise ProxyProtocolError(
                f"result for {tool_call_id!r} arrived out of order; the client was given "
                f"{current.tool_call_id!r} and must answer it first"
            )
        self._results.append(content)

    def tool_messages(self) -> list[dict[str, Any]]:
        """The N tool messages in the original call order (only once all are answered)."""
        if not self.done:
            raise ProxyProtocolError(f"{len(self.calls) - len(self._results)} call(s) still unanswered")
        return [
            {"role": "tool", "tool_call_id": c.tool_call_id, "content": r}
            for c, r in zip(self.calls, self._results, strict=True)
        ]

    def rebuild(self, history: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        """The complete message list for the upstream: history, the full assistant message, N results."""
        return [*history, copy.deepcopy(self.assistant_message), *self.tool_messages()]


def hand_out_message(assistant_message: dict[str, Any], call: ToolCall, position: int) -> dict[str, Any]:
    """The assistant message with only `call`; the text goes out with the first call only."""
    message = {k: v for k, v in assistant_message.items() if k != "tool_calls"}
    if position:
        message["content"] = None
    message["tool_calls"] = [call.to_openai()]
    return message

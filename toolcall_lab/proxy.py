"""Serialized mode's state machine: hand a client one tool call per round trip, then rebuild.

A client that sets ``parallel_tool_calls: false`` may only receive one call at a time, but the
upstream model returned N. `SerializedSession` keeps the batch: it hands out the first call, records
each result, hands out the next, and once all N are answered rebuilds the complete message list
(the original assistant message with all N calls, then the N results in the original order) for the
single upstream call that follows. The in-process serialized mode and the HTTP proxy both use it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from toolcall_lab.exceptions import ProxyProtocolError
from toolcall_lab.messages import ToolCall


class SerializedSession:
    """The queue of one upstream batch: pending calls, the current call, and results so far."""

    def __init__(self, assistant_message: dict[str, Any], calls: Sequence[ToolCall]) -> None:
        if not calls:
            raise ProxyProtocolError("a serialized session needs at least one tool call")
        self.assistant_message = copy.deepcopy(assistant_message)
        self.calls = tuple(calls)
        self._ids = frozenset(c.tool_call_id for c in self.calls)
        self._position = 0
        self._results: dict[str, str] = {}
        self.handed_out = 0
        """How many times a call was handed to the client (retries of the same call count again)."""

    @property
    def done(self) -> bool:
        return self._position >= len(self.calls)

    @property
    def answered(self) -> int:
        """How many calls of the batch have a result."""
        return self._position

    @property
    def current(self) -> ToolCall | None:
        """The call the client must answer next (None when all are answered)."""
        return None if self.done else self.calls[self._position]

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
        message = {k: v for k, v in self.assistant_message.items() if k != "tool_calls"}
        if self._position:
            message["content"] = None  # the text went out with the first call
        message["tool_calls"] = [call.to_openai()]
        return message

    def submit(self, tool_call_id: str, content: str) -> None:
        """Record the client's result for the current call; anything else is a protocol error."""
        if tool_call_id in self._results:
            raise ProxyProtocolError(f"tool_call_id {tool_call_id!r} was already answered")
        if tool_call_id not in self._ids:
            raise ProxyProtocolError(
                f"tool_call_id {tool_call_id!r} is not part of this batch "
                f"(expected one of {sorted(self._ids)})"
            )
        current = self.current
        assert current is not None  # every known id is answered before done
        if tool_call_id != current.tool_call_id:
            raise ProxyProtocolError(
                f"result for {tool_call_id!r} arrived out of order; the client was "
                f"given {current.tool_call_id!r} and must answer it first"
            )
        self._results[tool_call_id] = content
        self._position += 1

    def tool_messages(self) -> list[dict[str, Any]]:
        """The N tool messages in the original call order (only once all are answered)."""
        if not self.done:
            raise ProxyProtocolError(f"{len(self.calls) - self._position} call(s) still unanswered")
        return [
            {"role": "tool", "tool_call_id": c.tool_call_id, "content": self._results[c.tool_call_id]}
            for c in self.calls
        ]

    def rebuild(self, history: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        """The complete message list for the upstream: history, the full assistant message, N results."""
        return [*history, copy.deepcopy(self.assistant_message), *self.tool_messages()]

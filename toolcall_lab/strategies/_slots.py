"""Slots: the concurrency cap and per-tool limits of one batch, and who waits for them, in order.

A call takes one slot of the batch's cap and one of its tool's limit; when either is full it waits
in a queue. A call holds its slots until its record is settled (the tool, then its result hooks:
``approve_result``, ``on_tool_complete``); a finished call frees its slots and the first waiting
call (in the order calls were dispatched, model order for every built-in) that can run now takes
them. Waiting is recorded: the
call's ``queued_at`` (`ToolExecution.queued_at`) is when it was dispatched, so timelines draw the
wait ("waiting for a slot").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from toolcall_lab._rules import check_concurrency
from toolcall_lab.exceptions import UsageError


def check_limits(owner: str, concurrency: Any, tool_limits: Any) -> dict[str, int]:
    """Validate a strategy's cap and per-tool limits; return the limits as a plain dict."""
    check_concurrency(concurrency, owner)
    if tool_limits is None:
        return {}
    if not isinstance(tool_limits, Mapping):
        raise UsageError(
            f"{owner}: tool_limits={tool_limits!r}: must be a mapping of tool name to the most calls "
            "of that tool at once, e.g. {'web_search': 2}"
        )
    out: dict[str, int] = {}
    for name, k in tool_limits.items():
        if not isinstance(name, str) or not name:
            raise UsageError(f"{owner}: tool_limits key {name!r}: must be a tool name (a non-empty string)")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UsageError(
                f"{owner}: tool_limits[{name!r}]={k!r}: must be an integer >= 1 (calls of {name!r} at once)"
            )
        out[name] = k
    return out


Waiting = tuple[int, str, float, Callable[[Any], None]]
"""(position, tool name, when it was dispatched, what to call when it gets its slots)."""


class Slots:
    """The free slots of one batch: `take` one now or `wait` for it; `release` hands it on."""

    __slots__ = ("free", "limits", "running", "waiting")

    def __init__(self, concurrency: int | None, limits: Mapping[str, int]) -> None:
        self.free = concurrency
        """Slots left under the cap (None: no cap)."""
        self.limits = dict(limits)
        self.running: dict[str, int] = dict.fromkeys(self.limits, 0)
        self.waiting: deque[Waiting] = deque()
        """Calls waiting for a slot, in the order they were dispatched."""

    def take(self, name: str) -> bool:
        """Take a slot for a call of `name` if one is free now.

        Never overtakes a waiting call that could use the slot: after every `release` no waiting
        call can run (the first that could took the freed slots), so a free slot here is one no
        waiting call can use (e.g. the cap has room while the waiting calls' tools are at their
        limits).
        """
        free = self.free
        if free is not None and free <= 0:
            return False
        limit = self.limits.get(name)
        if limit is not None:
            if self.running[name] >= limit:
                return False
            self.running[name] += 1
        if free is not None:
            self.free = free - 1
        return True

    def wait(self, position: int, name: str, at: float, wake: Callable[[Waiting], None]) -> None:
        """Queue the call at `position` (dispatched at `at`); `wake` is called when it has its slots."""
        self.waiting.append((position, name, at, wake))

    def forget(self, position: int) -> None:
        """A waiting call was cancelled: it no longer waits."""
        for k, entry in enumerate(self.waiting):
            if entry[0] == position:
                del self.waiting[k]
                return

    def release(self, name: str) -> None:
        """Free a slot of `name`; the first waiting call that can run now takes the slots and is woken."""
        if self.free is not None:
            self.free += 1
        if name in self.running:
            self.running[name] -= 1
        waiting = self.waiting
        for k, entry in enumerate(waiting):
            if self.take(entry[1]):
                del waiting[k]
                entry[3](entry)
                return
            if self.free is not None and self.free <= 0:
                return  # the cap is full: nobody behind can run either

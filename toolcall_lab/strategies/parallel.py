"""``parallel``: every call of a batch at once, with an optional concurrency cap and per-tool limits.

It is ``await batch.run_parallel()``, the public interface a strategy of your own uses: the batch's
ACTION events at one instant, each OBSERVATION when its call finishes; results go back in model order
whatever order calls finish in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from toolcall_lab.strategies._slots import check_limits
from toolcall_lab.strategies.base import Strategy, check_strategy_name, unchanged
from toolcall_lab.strategies.batch import Batch

_PLAIN = re.compile(r"[A-Za-z0-9_.\-]+")
"""Tool names written bare in an option name; any other (and ``cap``) is written as a JSON string."""


def option_name(base: str, concurrency: int | None, tool_limits: Mapping[str, int]) -> str:
    """``parallel``, ``parallel[cap=4]``, ``eager[cap=4,web_search=2]``: a name that says the options
    (and that `toolcall_lab.strategies.resolve` reads back)."""
    options = ([f"cap={concurrency}"] if concurrency is not None else []) + [
        f"{tool if _PLAIN.fullmatch(tool) and tool != 'cap' else json.dumps(tool)}={k}"
        for tool, k in sorted(tool_limits.items())
    ]
    return f"{base}[{','.join(options)}]" if options else base


def made_as(strategy: Strategy, name: str | None) -> str:
    """How a built-in class's instance was made, for its errors (``Parallel(name='x')``)."""
    return f"{type(strategy).__name__}(name={name!r})" if name is not None else f"{type(strategy).__name__}()"


class Parallel(Strategy):
    """All calls at once (at most `concurrency` at a time, at most ``tool_limits[name]`` of a tool).

    Args:
        concurrency: cap on calls at once (None: a subclass's own ``concurrency`` attribute, else the
            run's ``concurrency`` setting).
        tool_limits: per tool, the most calls at once, e.g. ``{"web_search": 2}`` (None: a subclass's
            own ``tool_limits`` attribute, else none).
        name: defaults to a subclass's own ``name`` (``class Mine(Parallel): name = "mine"``),
            else ``parallel`` with the options, e.g. ``parallel[cap=4,web_search=2]``.
    """

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
        self.name = type(self).name or self.runs_as() or "parallel" if name is None else name
        check_strategy_name(self, made_as(self, name))

    def runs_as(self) -> str | None:
        return unchanged(self, Parallel, option_name("parallel", self.concurrency, self.tool_limits or {}))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))

    async def run(self, batch: Batch) -> None:
        await batch.run_parallel()

"""Execution strategies: how the tool calls of one model response (a batch) are scheduled.

A strategy has a ``name`` and an ``async run(batch)``; the loop gives it a `Batch` and the batch
does everything a strategy must not get wrong (screening, timeouts, approval, de-duplication, hook
policy, timing on the run's clock, ACTION/OBSERVATION events, results in model order, a
consistent record when the run is cut off). A strategy only decides when each call runs::

    from toolcall_lab.strategies import strategy

    READ_ONLY = {"get_weather", "web_search"}

    @strategy("read_only_parallel")
    async def read_only_parallel(batch):
        reads = [i for i, c in enumerate(batch.calls) if c.name in READ_ONLY]
        await batch.run_parallel(reads)                      # the reads at once
        await batch.run_sequential(i for i in range(len(batch.calls)) if i not in reads)

    result = await run(model, tools, "...", mode=read_only_parallel)

Built-ins (one module each): ``sequential``, ``parallel`` (optional cap and per-tool limits),
``serialized`` (one call per client round trip through the in-process proxy), ``first_only`` (the
legacy bug) and ``eager`` (each call starts as soon as its arguments are complete, while the model
still streams; `toolcall_lab.strategies.eager`). Names and ``module:attribute`` specs are read by
`resolve` (`toolcall_lab.strategies.registry`).
"""

from toolcall_lab.strategies.base import (
    FunctionStrategy,
    Strategy,
    StrategyLike,
    check_name,
    check_strategy_name,
    strategy,
    strategy_name,
)
from toolcall_lab.strategies.batch import Batch
from toolcall_lab.strategies.eager import Eager
from toolcall_lab.strategies.first_only import FirstOnly
from toolcall_lab.strategies.parallel import Parallel
from toolcall_lab.strategies.registry import (
    BUILTINS,
    STRATEGIES,
    StrategySpec,
    capped,
    load,
    name_of,
    resolve,
)
from toolcall_lab.strategies.sequential import Sequential
from toolcall_lab.strategies.serialized import Serialized

__all__ = [
    "BUILTINS",
    "STRATEGIES",
    "Batch",
    "Eager",
    "FirstOnly",
    "FunctionStrategy",
    "Parallel",
    "Sequential",
    "Serialized",
    "Strategy",
    "StrategyLike",
    "StrategySpec",
    "capped",
    "check_name",
    "check_strategy_name",
    "load",
    "name_of",
    "resolve",
    "strategy",
    "strategy_name",
]

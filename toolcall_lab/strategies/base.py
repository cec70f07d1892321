"""The strategy interface: what the loop asks of anything that schedules a batch of tool calls.

A strategy has a `name` (it shows in traces, tables and plots) and an ``async run(batch)`` that
runs the calls of one batch through the `Batch` it gets, and returns when every call is settled
(run, or skipped on purpose). Everything else (screening, timeouts, hooks, timing, events, results
in model order, a consistent record when the run is cut off) is the batch's job. Subclass
`Strategy`, or pass any object with ``name`` and ``run``, or a plain ``async def`` taking the batch
(its ``__name__`` is its name).
"""

from __future__ import annotations

import importlib
import inspect
import re
import unicodedata
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from toolcall_lab.exceptions import UsageError
from toolcall_lab.strategies._slots import check_limits

if TYPE_CHECKING:
    from toolcall_lab.strategies.batch import Batch

BUILTIN_NAMES = frozenset({"sequential", "parallel", "serialized", "first_only", "eager"})
"""The built-in strategies' names (the registry holds the strategies; a test keeps the two equal)."""
_MISREAD = {
    ",": "a comma (the CLI's --modes list is split on commas)",
    ":": "a colon (a name with one reads as 'module:attribute' and is imported)",
    "[": "a bracket (brackets are the built-ins' options, as in 'eager[cap=4]')",
    "]": "a bracket (brackets are the built-ins' options, as in 'eager[cap=4]')",
}


_INVISIBLE = {
    "Cc": "a control character (a newline, a tab, ...)",
    "Cf": "an invisible format character (a zero-width space or joiner, a direction mark, ...)",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Zs": "a space other than ' '",
}


_SEPARATORS = re.compile(r"[\s\-_.]+")
_BUILTIN_SKELETONS = {_SEPARATORS.sub("", name): name for name in BUILTIN_NAMES}


def check_name(name: Any, where: str) -> str:
    """`name` if a strategy of your own may go by it, else a `UsageError` saying why: it must be
    read back as itself wherever names are read (the CLI's ``--modes`` list, ``module:attribute``
    specs, the built-ins' options, a trace's ``metadata.mode``, tables and plots), and must not pass
    for a built-in's in a table or a plot (``first-only``, ``First Only``, ``firstonly`` differ from
    ``first_only`` only by case, width or separators).

    Spaces inside a name are fine (``read only (parallel)``): a name is a label in tables, plots and
    traces, and is never parsed from the command line, which names a strategy of your own by its
    ``module:attribute`` spec."""
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"{where}: a strategy's name is a non-empty string, not {name!r}")
    if name != name.strip():
        raise UsageError(
            f"{where}: the strategy name {name!r} has leading or trailing whitespace (it would be "
            f"read back as {name.strip()!r}); name it {name.strip()!r}"
        )
    base = name.split("[", 1)[0]
    folded = unicodedata.normalize("NFKC", base).casefold()  # (full-width 'ｐａｒａｌｌｅｌ' too)
    if folded in BUILTIN_NAMES:
        builtin = folded
        same = (
            "is"
            if name == builtin
            else "is read as"
            if base == builtin
            else "differs only by case from"
            if base.casefold() == builtin
            else "differs only by case or character width from"
        )
        raise UsageError(
            f"{where}: the strategy name {name!r} {same} the built-in strategy {builtin!r}'s name; give "
            "it a name of its own (tables, plots and traces tell strategies apart by name)"
        )
    builtin_like = _BUILTIN_SKELETONS.get(_SEPARATORS.sub("", folded))
    if builtin_like is not None:
        raise UsageError(
            f"{where}: the strategy name {name!r} reads as the name of the built-in strategy "
            f"{builtin_like!r} (it differs only by case, character width or the separators ' ', '-', "
            "'_', '.'); give it a name of its own (tables, plots and traces tell strategies apart by name)"
        )
    for char, why in _MISREAD.items():
        if char in name:
            raise UsageError(f"{where}: the strategy name {name!r} holds {why}; choose a name without it")
    odd = [ch for ch in name if not ch.isprintable()]
    if odd:
        kinds = sorted({_INVISIBLE.get(unicodedata.category(ch), "an unprintable character") for ch in odd})
        raise UsageError(
            f"{where}: the strategy name {name!r} holds {' and '.join(kinds)} "
            f"({', '.join(f'U+{ord(ch):04X}' for ch in odd)}); choose a name of printable characters"
        )
    return name


@runtime_checkable
class StrategyLike(Protocol):
    """What the loop needs of a strategy: a name and an ``async run(batch)``."""

    name: str

    def run(self, batch: Batch) -> Awaitable[None]: ...


class Strategy:
    """Base class of strategies (optional: any object with ``name`` and ``async run(batch)`` will do).

    Attributes:
        name: shown in traces (`Round.mode`, ``metadata.mode``), tables and plots; unique among the
            strategies you compare.
        streams: False (default): `run` is called once the model's response has ended, with every
            call in ``batch.calls``. True: `run` is called while the model streams, as soon as the
            first call is complete (or at the stream's end, if no call completed before), and
            calls arrive one by one as each becomes complete (``async for pos in
            batch.arrivals()``); the next model request waits until the stream has ended and
            every call has finished. Either way `run` is called only for a response that holds
            calls (never for the final answer).
        skips_calls: True for a strategy that leaves calls unanswered on purpose (``first_only``):
            a replay under it cannot follow a recording made under another strategy, so its
            divergence check is off by default.
        concurrency: at most this many calls at once under `Batch.start` / `run_parallel` (None:
            the run's ``concurrency`` setting, itself None for no cap).
        tool_limits: at most ``tool_limits[name]`` calls of tool `name` at once (real APIs rate-limit);
            a call that waits for a slot records when it was queued.
    """

    name: str = ""
    streams: bool = False
    skips_calls: bool = False
    concurrency: int | None = None
    tool_limits: Mapping[str, int] | None = None

    async def run(self, batch: Batch) -> None:
        """Run every call of `batch` (see `Batch`)."""
        raise NotImplementedError(f"{type(self).__name__}.run(batch) is not written")

    def runs_as(self) -> str | None:
        """The built-in name that says what this strategy runs, options included (``parallel[cap=2]``):
        for a built-in, or a subclass of one that changes nothing of how it runs; None for a strategy
        of your own (see `check_strategy_name`)."""
        return None

    def __repr__(self) -> str:
        return f"<strategy {self.name}>"


def unchanged(strategy: Strategy, base: type[Strategy], name: str) -> str | None:
    """`name` when `strategy` runs exactly as the built-in class `base` (same `run`, same streaming
    and skipping), else None (a subclass that changes how it runs is a strategy of its own)."""
    if (
        type(strategy).run is base.run
        and strategy.streams == base.streams
        and strategy.skips_calls == base.skips_calls
    ):
        return name
    return None


def check_strategy_name(strategy: Any, where: str) -> str:
    """The one name rule, applied wherever a strategy is made or named (the decorator, a `Strategy`
    subclass, the built-in classes' ``name=``, `resolve`): a strategy's name says what it runs.

    A built-in (or a subclass of one that changes nothing of how it runs) may only go by the name of
    what it runs, options included (``Parallel(concurrency=2)`` is ``parallel[cap=2]``), or by a name
    of its own; anything else must pass `check_name` (no built-in's name, nothing the CLI or the
    resolver would misread). A `UsageError` says which name to use instead."""
    name = getattr(strategy, "name", None)
    runs_as = strategy.runs_as() if isinstance(strategy, Strategy) else None
    if runs_as is not None and name == runs_as:
        return runs_as
    if runs_as is not None and isinstance(name, str) and _reads_as_builtin(name) is not None:
        raise UsageError(
            f"{where}: the name {name!r} does not say what this strategy runs (it runs {runs_as!r}): "
            "tables, plots and traces would show its figures under another strategy's name; leave the "
            f"name out (it is then {runs_as!r}), or give it a name of its own"
        )
    return check_name(name, where)


def _reads_as_builtin(name: str) -> str | None:
    """The built-in whose name `name` reads as (options, case, width or separators aside), or None."""
    folded = unicodedata.normalize("NFKC", name.split("[", 1)[0]).casefold()
    if folded in BUILTIN_NAMES:
        return folded
    return _BUILTIN_SKELETONS.get(_SEPARATORS.sub("", folded))


class FunctionStrategy(Strategy):
    """A strategy made from an ``async def strategy(batch)`` (the function's name is its name)."""

    def __init__(
        self,
        function: Callable[[Batch], Awaitable[None]],
        name: str | None = None,
        *,
        streams: bool = False,
        skips_calls: bool = False,
    ) -> None:
        if inspect.isasyncgenfunction(function):
            what = getattr(function, "__name__", repr(function))
            raise UsageError(
                f"strategy {name or what!r}: {what} is an async generator (an `async def` with `yield`); a "
                "strategy's function is an `async def f(batch)` that awaits the batch's calls and returns "
                "(take positions from `async for pos in batch.arrivals()`; do not yield them)"
            )
        if not _is_async(function):
            what = getattr(function, "__name__", repr(function))
            raise UsageError(
                f"strategy {name or what!r}: {what} is not an `async def`; a strategy's function is "
                "an `async def f(batch)` (it awaits the batch's calls)"
            )
        for flag, value in (("streams", streams), ("skips_calls", skips_calls)):
            if not isinstance(value, bool):
                raise UsageError(
                    f"strategy {name or getattr(function, '__name__', '?')!r}: {flag}={value!r}: must be "
                    f"True or False (a {type(value).__name__} would be read as {bool(value)})"
                )
        self.function = function
        self.name = check_name(
            function.__name__ if name is None else name,
            f"strategy(name={function.__name__ if name is None else name!r})",
        )
        self.streams = streams
        self.skips_calls = skips_calls

    async def run(self, batch: Batch) -> None:
        return await cast(Any, self.function)(batch)  # type: ignore[no-any-return]  # (the loop notes a value)

    def __reduce__(self) -> str | tuple[Any, ...]:
        """Pickled by reference (``module:qualname``) when the decorated function is importable
        under its own name (``@strategy`` in a module: what process pools need); else by value,
        which needs the function itself to pickle."""
        module = getattr(self.function, "__module__", None)
        qualname = getattr(self.function, "__qualname__", None)
        if isinstance(module, str) and isinstance(qualname, str) and module != "__main__":
            try:
                found = _lookup(module, qualname)
            except Exception:
                found = None
            if found is self:
                return (_lookup, (module, qualname))
        return (
            FunctionStrategy,
            (self.function, self.name),
            {"streams": self.streams, "skips_calls": self.skips_calls},
        )

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FunctionStrategy)
            and other.function is self.function
            and other.name == self.name
            and other.streams == self.streams
            and other.skips_calls == self.skips_calls
        )

    def __hash__(self) -> int:
        return hash((self.name, id(self.function)))


def _lookup(module: str, qualname: str) -> Any:
    """The object at ``module.qualname`` (how a pickled `FunctionStrategy` is found again)."""
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _is_async(function: Any) -> bool:
    """An ``async def`` (or an object whose ``__call__`` is one)."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 (the method itself, not callable())
    )


def strategy(
    name: str | None = None, *, streams: bool = False, skips_calls: bool = False
) -> Callable[[Callable[[Batch], Awaitable[None]]], FunctionStrategy]:
    """Decorator: ``@strategy("read_only_parallel")`` over an ``async def f(batch)``.

    ``streams=True``: the function is called while the model streams, once the first call is
    complete (never for a response without calls), and gets calls as they become complete
    (``async for pos in batch.arrivals()``). ``skips_calls=True``: it leaves
    calls unanswered on purpose (``batch.skip``), so `compare` marks its runs not comparable."""
    given: Any = name
    if callable(given):
        raise UsageError("write @strategy() or @strategy('its_name') (with parentheses) over the async def")

    def wrap(function: Callable[[Batch], Awaitable[None]]) -> FunctionStrategy:
        return FunctionStrategy(function, name, streams=streams, skips_calls=skips_calls)

    return wrap


def checked(obj: Any, where: str) -> StrategyLike:
    """`obj` as a strategy, or a `UsageError` that says what is missing."""
    if obj is Strategy:
        raise UsageError(
            f"{where}: Strategy is the base class, not a strategy: subclass it (`class Mine(Strategy): "
            "name = 'mine'` with `async def run(self, batch)`) and pass the subclass or an instance, or "
            "decorate an `async def f(batch)` with @strategy('mine')"
        )
    if isinstance(obj, type) and not issubclass(obj, Strategy):
        raise UsageError(
            f"{where}: {obj.__name__} is a class, not a strategy: pass an instance ({obj.__name__}(...)), "
            "or subclass Strategy (a subclass with a name may be passed as is)"
        )
    made_from = obj.__name__ if isinstance(obj, type) else None
    if isinstance(obj, type) and issubclass(obj, Strategy):
        try:
            obj = obj()
        except TypeError as exc:
            raise UsageError(
                f"{where}: the class {obj.__name__} needs arguments ({exc}); pass an instance"
            ) from None
    if inspect.iscoroutinefunction(obj):
        return FunctionStrategy(obj)
    run = getattr(obj, "run", None)
    name = getattr(obj, "name", None)
    if run is None or not callable(run):
        raise UsageError(
            f"{where}: {obj!r} is not a strategy: give a built-in name, a Strategy (an object with "
            "`name` and `async def run(self, batch)`), an `async def f(batch)`, or 'module:attribute'"
        )
    if not isinstance(name, str) or not name.strip():
        if made_from is not None:
            raise UsageError(
                f"{where}: the class {made_from} has no name: give it one (`name = 'mine'` in the class "
                "body) and pass the class, or pass an instance that has a name"
            )
        raise UsageError(f"{where}: the strategy {obj!r} has no name (set its `name` to a non-empty string)")
    if not inspect.iscoroutinefunction(run):
        raise UsageError(f"{where}: {name!r}.run must be an `async def` taking the batch")
    check_options(obj, f"{where}: strategy {name!r}")
    return obj  # type: ignore[no-any-return]


def check_options(obj: Any, where: str) -> None:
    """Every option a strategy declares, by any route (a class attribute, one set on the instance, the
    constructor, the decorator), as the loop will read it: ``streams`` and ``skips_calls`` are True or
    False (``"no"`` would read as True), ``concurrency`` an integer >= 1 or None, ``tool_limits`` a
    mapping of tool names to integers >= 1. Anything else is a `UsageError` naming the option."""
    for flag in ("streams", "skips_calls"):
        value = getattr(obj, flag, False)
        if not isinstance(value, bool):
            raise UsageError(
                f"{where}: {flag}={value!r}: must be True or False (a {type(value).__name__} would be "
                f"read as {bool(value)})"
            )
    check_limits(where, getattr(obj, "concurrency", None), getattr(obj, "tool_limits", None))


def strategy_name(spec: Any) -> str:
    """The name a mode, strategy or spec shows under (without resolving it)."""
    name = getattr(spec, "name", None)
    if isinstance(name, str):
        return name
    fn_name = getattr(spec, "__name__", None)
    if inspect.iscoroutinefunction(spec) and isinstance(fn_name, str):
        return fn_name
    return str(spec)

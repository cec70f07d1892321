"""Names -> strategies: the built-ins (with options in the name), and ``module:attribute`` specs.

Everywhere a mode name is accepted (``run(mode=...)``, `replay`, `compare`, the views, the CLI's
``--modes`` / ``--strategy``) a strategy may be given as:

- a built-in name: ``sequential``, ``parallel``, ``serialized``, ``first_only``, ``eager``; ``parallel``
  and ``eager`` take options in brackets: ``parallel[cap=4]``, ``eager[cap=4,web_search=2]`` (``cap``:
  calls at once; any other key: a tool and the most calls of it at once; a tool named ``cap``, or
  whose name holds other characters than letters, digits, ``_ - .``, is written as a JSON string:
  ``parallel["cap"=2]``); each key at most once;
- ``module:attribute`` or ``path/to/file.py:attribute``, naming a strategy object, a `Strategy`
  subclass (made with no arguments) or an ``async def f(batch)``;
- the object itself (in Python).

A strategy's name says what it runs (`check_strategy_name`, applied here too): a built-in goes by the
name of what it runs, options included, or by a name of its own; a strategy of your own named
``parallel`` (or ``Parallel``, or ``eager[cap=2]``) is refused, since tables, plots and traces tell
strategies apart by name; so is a name the CLI or this resolver would misread (a comma, a colon,
brackets, surrounding whitespace, a control character: `check_name`). Under a run-level cap, `capped`
gives plain ``parallel`` / ``eager`` the cap's name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from toolcall_lab._user_code import load_attribute
from toolcall_lab.exceptions import UsageError
from toolcall_lab.strategies.base import StrategyLike, check_strategy_name, checked
from toolcall_lab.strategies.eager import Eager
from toolcall_lab.strategies.first_only import FirstOnly
from toolcall_lab.strategies.parallel import Parallel
from toolcall_lab.strategies.sequential import Sequential
from toolcall_lab.strategies.serialized import Serialized

StrategySpec = str | StrategyLike | Callable[..., Awaitable[None]]
"""What ``mode=`` accepts: a name or spec string, a strategy, or an ``async def f(batch)``."""

BUILTINS: dict[str, StrategyLike] = {
    "sequential": Sequential(),
    "parallel": Parallel(),
    "serialized": Serialized(),
    "first_only": FirstOnly(),
    "eager": Eager(),
}
"""The built-in strategies under their plain names (stateless: one instance each serves every run)."""
STRATEGIES: tuple[str, ...] = tuple(BUILTINS)
_WITH_OPTIONS = {"parallel": Parallel, "eager": Eager}
_TYPES = tuple(type(s) for s in BUILTINS.values())
_WITH_CAP = (Parallel, Eager)
_OPTIONS = re.compile(r"^(\w+)\[(.*)\]$", re.DOTALL)
_OPTION = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[^,=\s"]+)\s*=\s*([^,]*?)\s*(?:,|$)')
_SIGNED = re.compile(r"[+-]?\d+")
_loaded: dict[str, StrategyLike] = {}


def _own_name(strategy: StrategyLike, where: str) -> StrategyLike:
    """`strategy`, if its name says what it runs (`check_strategy_name`: a built-in under the name of
    what it runs, options included; anything else under a name of its own that is not misread: no
    built-in's name in any case, no comma, colon, brackets, surrounding whitespace, control character)."""
    _runs_as_declared(strategy, f"{where}: the strategy {type(strategy).__name__}")
    if type(strategy) not in _TYPES or strategy.name != strategy.runs_as():  # type: ignore[attr-defined]
        check_strategy_name(strategy, f"{where}: the strategy {type(strategy).__name__}")
    return strategy


_RUN_NEEDS = {
    "streams": {
        True: "it takes calls as they arrive while the model streams",
        False: "it runs the batch once the model's response has ended and batch.calls holds it",
    },
    "skips_calls": {
        True: "it leaves calls unanswered on purpose",
        False: "it answers every call",
    },
}


def _runs_as_declared(strategy: StrategyLike, where: str) -> None:
    """A subclass of a built-in that keeps the built-in's `run` keeps what that `run` needs: a
    ``streams`` or ``skips_calls`` of its own would be honoured by the loop, replay and `compare`,
    but not by the `run` it inherits (``Eager.run`` with ``streams = False`` would run no call). A
    `UsageError` says which option, and what to do."""
    for base in _TYPES:
        if isinstance(strategy, base) and type(strategy).run is base.run:
            for flag, why in _RUN_NEEDS.items():
                want = getattr(base, flag)
                got = getattr(strategy, flag, want)
                if got != want:
                    raise UsageError(
                        f"{where}: {flag}={got!r}, but it runs {base.__name__}.run, which needs "
                        f"{flag}={want!r} ({why[want]}); leave {flag} out, or write a `run` of its own"
                    )
            return


def capped(strategy: StrategyLike, concurrency: int | None) -> StrategyLike:
    """`strategy` as it runs under a run-level cap (`compare`'s and ``bench``'s ``concurrency``): a
    built-in ``parallel`` or ``eager`` with no cap of its own takes the cap into its name
    (``parallel[cap=2]``), so no table or plot shows a capped run under the uncapped name; any other
    strategy keeps its name (the runs table's ``cap`` column says what cap it ran under)."""
    if concurrency is None or not isinstance(strategy, Parallel | Eager) or type(strategy) not in _WITH_CAP:
        return strategy
    if strategy.concurrency is not None or strategy.name != strategy.runs_as():
        return strategy  # (its own cap wins; a name of its own stays)
    return type(strategy)(concurrency=concurrency, tool_limits=strategy.tool_limits)


def resolve(spec: Any, where: str = "mode") -> StrategyLike:
    """The strategy a name, spec or object stands for; `UsageError` naming `where` otherwise."""
    if isinstance(spec, str):
        text = spec.strip()
        found = BUILTINS.get(text)
        if found is not None:
            return found
        m = _OPTIONS.match(text)
        if m is not None:
            return _with_options(m.group(1), m.group(2), text, where)
        if ":" in text:
            return load(text, where)
        raise UsageError(
            f"{where}={spec!r}: unknown mode or strategy; choose one of {', '.join(STRATEGIES)} "
            "(parallel and eager take options, e.g. 'eager[cap=4,web_search=2]'), a 'module:attribute' "
            "naming your own, or pass the strategy object"
        )
    return _own_name(checked(spec, f"{where}={spec!r}"), f"{where}={spec!r}")


def _with_options(base: str, options: str, text: str, where: str) -> StrategyLike:
    make = _WITH_OPTIONS.get(base)
    if make is None:
        takes = " and ".join(_WITH_OPTIONS)
        raise UsageError(f"{where}={text!r}: {base!r} takes no options (only {takes} do)")
    concurrency: int | None = None
    limits: dict[str, int] = {}
    pos, rest = 0, options.strip()
    how = 'use key=N (cap=N for calls at once, TOOL=N or "TOOL"=N for the most calls of a tool at once)'
    while pos < len(rest):
        m = _OPTION.match(rest, pos)
        item = rest[pos:].split(",", 1)[0].strip()
        if m is not None and _SIGNED.fullmatch(m.group(2)) and int(m.group(2)) < 1:  # (0, -1: one message)
            raise UsageError(
                f"{where}={text!r}: option {m.group(0).strip(', ')!r}: N must be an integer >= 1 (cap: calls "
                "at once; a tool: the most calls of it at once); for no cap or limit, leave the option out"
            )
        if m is None or not m.group(2).isdigit():
            raise UsageError(f"{where}={text!r}: option {(m.group(0) if m else item).strip(', ')!r}: {how}")
        raw, value = m.group(1), int(m.group(2))
        pos = m.end()
        if raw.startswith('"'):
            try:
                key = json.loads(raw)
            except ValueError:
                raise UsageError(f"{where}={text!r}: option key {raw}: not a JSON string") from None
            if key in limits:
                raise UsageError(f"{where}={text!r}: the tool {key!r} is limited twice; give each key once")
            limits[key] = value
        elif raw == "cap":
            if concurrency is not None:
                raise UsageError(f"{where}={text!r}: cap is given twice; give each key once")
            concurrency = value
        else:
            if raw in limits:
                raise UsageError(f"{where}={text!r}: the tool {raw!r} is limited twice; give each key once")
            limits[raw] = value
    strategy: StrategyLike = make(concurrency=concurrency, tool_limits=limits)
    return strategy


def load(spec: str, where: str = "strategy") -> StrategyLike:
    """The strategy named by ``module:attribute`` or ``path/to/file.py:attribute`` (imported once)."""
    cached = _loaded.get(spec)
    if cached is not None:
        return cached
    found = load_attribute(spec, where, "mypkg.strategies:read_only_first")
    strategy = _own_name(checked(found, f"{where}={spec!r}"), f"{where}={spec!r}")
    _loaded[spec] = strategy
    return strategy


def name_of(spec: Any) -> str:
    """The name a spec runs under (resolving strings, so ``mod:attr`` shows its strategy's name)."""
    return resolve(spec).name

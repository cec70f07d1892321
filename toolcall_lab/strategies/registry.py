"""Names -> strategies: the built-ins (with options in the name), and ``module:attribute`` specs.

Everywhere a mode name is accepted (``run(mode=...)``, `replay`, `compare`, the views, the CLI's
``--modes`` / ``--strategy``) a strategy may be given as:

- a built-in name: ``sequential``, ``parallel``, ``serialized``, ``first_only``, ``eager``; ``parallel``
  and ``eager`` take options in brackets: ``parallel[cap=4]``, ``eager[cap=4,web_search=2]`` (``cap``:
  calls at once; any other key: a tool and the most calls of it at once);
- ``module:attribute`` or ``path/to/file.py:attribute``, naming a strategy object, a `Strategy`
  subclass (made with no arguments) or an ``async def f(batch)``;
- the object itself (in Python).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toolcall_lab.exceptions import UsageError
from toolcall_lab.strategies.base import StrategyLike, checked
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
_OPTIONS = re.compile(r"^(\w+)\[(.*)\]$")
_loaded: dict[str, StrategyLike] = {}


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
    return checked(spec, f"{where}={spec!r}")


def _with_options(base: str, options: str, text: str, where: str) -> StrategyLike:
    make = _WITH_OPTIONS.get(base)
    if make is None:
        takes = " and ".join(_WITH_OPTIONS)
        raise UsageError(f"{where}={text!r}: {base!r} takes no options (only {takes} do)")
    concurrency: int | None = None
    limits: dict[str, int] = {}
    for item in filter(None, (o.strip() for o in options.split(","))):
        key, eq, value = (part.strip() for part in item.partition("="))
        if not eq or not key or not value.isdigit():
            raise UsageError(
                f"{where}={text!r}: option {item!r}: use key=N (cap=N for calls at once, "
                "TOOL=N for the most calls of a tool at once)"
            )
        if key == "cap":
            concurrency = int(value)
        else:
            limits[key] = int(value)
    strategy: StrategyLike = make(concurrency=concurrency, tool_limits=limits)
    return strategy


def load(spec: str, where: str = "strategy") -> StrategyLike:
    """The strategy named by ``module:attribute`` or ``path/to/file.py:attribute`` (imported once)."""
    cached = _loaded.get(spec)
    if cached is not None:
        return cached
    module_name, _, attribute = spec.rpartition(":")
    if not module_name or not attribute:
        raise UsageError(f"{where}={spec!r}: use MODULE:ATTRIBUTE (e.g. mypkg.strategies:read_only_first)")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise UsageError(f"{where}={spec!r}: no such file {path}")
            name = f"toolcall_lab_user_{abs(hash(str(path.resolve())))}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise UsageError(f"{where}={spec!r}: cannot import {path}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(
            f"{where}={spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not hasattr(module, attribute):
        raise UsageError(f"{where}={spec!r}: {module_name} has no attribute {attribute!r}")
    strategy = checked(getattr(module, attribute), f"{where}={spec!r}")
    _loaded[spec] = strategy
    return strategy


def name_of(spec: Any) -> str:
    """The name a spec runs under (resolving strings, so ``mod:attr`` shows its strategy's name)."""
    return resolve(spec).name

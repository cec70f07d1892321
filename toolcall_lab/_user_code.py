"""Importing the user's code named on the command line or in a setting: ``module:attribute`` or
``path/to/file.py:attribute``. Every way it can fail is one `UsageError` naming the spec and the
cause (no such module or file, the module raising on import, no such attribute), never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

from toolcall_lab.exceptions import UsageError

_files: dict[Path, ModuleType] = {}
"""Files imported by path, once each (a strategy and the tools may share one)."""


class _HardExit(Exception):
    """The module called ``os._exit`` while being imported (refused: see `_no_hard_exit`)."""

    def __init__(self, code: Any) -> None:
        super().__init__(f"os._exit({code!r})")
        self.code = code


@contextmanager
def _no_hard_exit() -> Iterator[None]:
    """``os._exit`` raises instead of ending the process while the user's module is imported: it
    skips every handler, so toolcall-lab would end at once with the module's exit code and without a
    word (``bench`` exiting 0 with no output); refused, it is a `UsageError` naming the module."""
    real = os._exit

    def refused(status: int) -> NoReturn:
        raise _HardExit(status)

    os._exit = refused
    try:
        yield
    finally:
        os._exit = real


def load_attribute(spec: str, where: str, example: str) -> Any:
    """The object `spec` names. `where` names the option or setting in messages (``--tools``),
    `example` shows a good spec (``mypkg.tools:registry``).

    A module name is imported as Python would from the current directory (which the ``toolcall-lab``
    script, unlike ``python -m``, does not put on ``sys.path`` itself)."""
    source, _, attribute = spec.rpartition(":")
    if not source or not attribute or not attribute.isidentifier():
        raise UsageError(
            f"{where} {spec!r}: use MODULE:ATTRIBUTE or path/to/file.py:ATTRIBUTE (e.g. {example})"
        )
    module = _import_file(spec, where, source) if source.endswith(".py") else _import(spec, where, source)
    try:
        return getattr(module, attribute)
    except AttributeError:
        names = sorted(n for n in vars(module) if not n.startswith("_"))
        has = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "") if names else "nothing public"
        raise UsageError(
            f"{where} {spec!r}: {source} has no attribute {attribute!r} (it has: {has})"
        ) from None


def _import(spec: str, where: str, name: str) -> ModuleType:
    here = os.getcwd()
    added = here not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        with _no_hard_exit():
            return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            path_like = "/" in name or "\\" in name
            hint = (
                "; a file is named by its path ending in .py (path/to/file.py:ATTRIBUTE)"
                if path_like
                else f"; not found in {here} or the installed packages"
            )
            raise UsageError(
                f"{where} {spec!r}: importing {name} failed: there is no module named {exc.name!r}{hint}"
            ) from None
        raise _failed(spec, where, name, exc) from None  # (a module it imports is missing)
    except (Exception, SystemExit) as exc:
        raise _failed(spec, where, name, exc) from None
    finally:
        if added and here in sys.path:
            sys.path.remove(here)


def _import_file(spec: str, where: str, source: str) -> ModuleType:
    path = Path(source).expanduser()
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise UsageError(f"{where} {spec!r}: the file {path} {what}")
    key = path.resolve()
    module = _files.get(key)
    if module is not None:
        return module
    name = f"toolcall_lab_user_{abs(hash(str(key)))}"
    module_spec = importlib.util.spec_from_file_location(name, key)
    if module_spec is None or module_spec.loader is None:
        raise UsageError(f"{where} {spec!r}: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        with _no_hard_exit():
            module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        raise _failed(spec, where, str(path), exc) from None
    _files[key] = module
    return module


def _failed(spec: str, where: str, what: str, exc: BaseException) -> UsageError:
    if isinstance(exc, SystemExit):
        return UsageError(f"{where} {spec!r}: importing {what} called sys.exit({exc.code!r})")
    if isinstance(exc, _HardExit):
        return UsageError(
            f"{where} {spec!r}: importing {what} called os._exit({exc.code!r}), which would end "
            "toolcall-lab at once, without a word; a module named here must not exit when imported"
        )
    text = str(exc).replace("\n", " ") or "(no message)"
    return UsageError(f"{where} {spec!r}: importing {what} failed: {type(exc).__name__}: {text}")

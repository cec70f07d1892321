"""What a call's outcome looks like as text: a tool's return value as the model reads it, an exception
as ``Type: message``, an approval hook's answer as a verdict. Each says clearly when it cannot: a value
with no faithful text form is never sent as a memory address or a silently changed number.
"""

from __future__ import annotations

import inspect
import json
from typing import Any


class NotText(Exception):
    """A tool's return value has no faithful text form (the message says what it was)."""


def preview(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


_OBJECT_STR, _OBJECT_REPR = object.__str__, object.__repr__


def _as_text(value: Any) -> str:
    """JSON's fallback for values it cannot encode: their own text, when they have one."""
    kind = type(value)
    if inspect.isgenerator(value) or inspect.isasyncgen(value):
        raise NotText(f"a {kind.__name__} object, whose body has not run (return the items, e.g. a list)")
    if inspect.isawaitable(value):
        raise NotText(f"a {kind.__name__} object that nobody awaited")
    if getattr(kind, "__str__", None) is _OBJECT_STR and getattr(kind, "__repr__", None) is _OBJECT_REPR:
        raise NotText(f"a {kind.__name__} object, which has no text form (only its memory address)")
    try:
        return str(value)
    except Exception as exc:
        raise NotText(f"a {kind.__name__} whose conversion to text raised {error_text(exc)}") from None


def result_text(value: Any) -> str:
    """The text the model reads for a tool's return value: a str as is, bytes decoded as UTF-8,
    anything else as JSON (values JSON cannot encode by their own ``str()``: dates, decimals, paths).

    Raises `NotText` for values with no faithful text form: NaN or infinite floats (not JSON),
    bytes that are not UTF-8, generators and coroutines, objects whose only text is a memory address,
    and values whose conversion raises.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise NotText(f"{len(value)} bytes that are not UTF-8 text") from None
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=_as_text)
    except NotText:
        raise
    except ValueError as exc:  # NaN / Infinity, circular references
        raise NotText(f"{preview(value)}, which JSON cannot carry ({exc})") from None
    except Exception as exc:
        raise NotText(f"a {type(value).__name__} whose conversion to text raised {error_text(exc)}") from None


def verdict(hook: str, value: Any) -> str | None:
    """None to go ahead, or the reason for saying no; TypeError for a value that means neither."""
    if value is None or value is True:
        return None
    if value is False:
        return "rejected by policy"
    if isinstance(value, str):
        return value or "rejected by policy"
    raise TypeError(
        f"returned {preview(value)} ({type(value).__name__}); {hook} returns True or None to go ahead, "
        "False or a reason string to say no"
    )


_STOPPED = ("raised StopIteration", "raised StopAsyncIteration")


class Recorded(Exception):
    """An exception a recording holds only as text (``Type: message``), raised again by a replay
    where the recorded code raised it (a hook, a tool that raised on being cancelled), so the
    replay's record reads as the recording's: `error_text` gives the recorded text back."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def error_text(exc: BaseException) -> str:
    """``Type: message`` (an exception whose ``str()`` itself fails is shown by its ``repr``).

    A StopIteration the tool raised is shown as such, not as the RuntimeError Python (PEP 479) or the
    harness wraps it in on its way out of a coroutine or a worker thread. A `Recorded` exception
    is its recorded text."""
    if type(exc) is Recorded:
        return exc.text
    cause = exc.__cause__
    if isinstance(exc, RuntimeError) and isinstance(cause, StopIteration | StopAsyncIteration):
        try:
            if str(exc).endswith(_STOPPED):
                exc = cause
        except Exception:
            pass
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not turn a tool's error into a harness crash
        text = "(its str() raised an error too)"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

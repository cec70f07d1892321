"""Copies of JSON-like values, so that what the harness hands to user code (models, hooks, event
listeners, tools) is never the object it records: whatever they do to it, the record stays as it was.

A hand-rolled copy of dicts, lists and tuples (immutable leaves are shared): 3-5x faster than
`copy.deepcopy` on chat-completion chunks, which matters because the loop copies every chunk.
"""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import TypeVar

T = TypeVar("T")

_LEAVES = frozenset({str, int, float, bool, type(None)})


def json_copy(value: T) -> T:
    """A deep copy of a JSON-like value: dicts, lists and tuples are copied, immutable leaves shared;
    anything else is deep-copied (or shared, if it cannot be copied)."""
    kind = type(value)
    if kind is dict:
        new = value.copy()  # type: ignore[attr-defined]
        for k, v in value.items():  # type: ignore[attr-defined]
            if type(v) not in _LEAVES:
                new[k] = json_copy(v)
        return new  # type: ignore[no-any-return]
    if kind is list:
        return [v if type(v) in _LEAVES else json_copy(v) for v in value]  # type: ignore[attr-defined, return-value]
    if kind in _LEAVES:
        return value
    if kind is tuple:
        return tuple(json_copy(v) for v in value)  # type: ignore[attr-defined, return-value]
    try:
        return copy.deepcopy(value)
    except Exception:  # an object that cannot be copied is shared, as it would be without us
        return value


def read_only(value: object) -> object:
    """A read-only deep view of a JSON-like value: dicts become `MappingProxyType` views of their own
    (read-only) copies, lists and tuples tuples; leaves are shared. What a strategy may read of the
    record (the assistant message) without being able to change it: an edit raises ``TypeError``."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is dict:
        return MappingProxyType({k: read_only(v) for k, v in value.items()})  # type: ignore[attr-defined]
    if kind is list or kind is tuple:
        return tuple(read_only(v) for v in value)  # type: ignore[attr-defined]
    return json_copy(value)

"""The rules a run's cap and client round trip follow, in one place: `RunConfig`, the strategies,
`compare`, `plotting.gantt` and the views (CompareView, CorpusView) all check them here, so a value
one of them refuses is refused by all, with the same words, before anything is replayed."""

from __future__ import annotations

import math
from typing import Any

from toolcall_lab.exceptions import UsageError

CAP_RULE = "must be an integer >= 1, or None for no cap"
ROUND_TRIP_RULE = "must be >= 0 seconds (finite)"
COUNT_RULE = "must be an integer >= 1"
LIMIT_RULE = "must be > 0 seconds"


def valid_cap(value: Any) -> bool:
    """None (no cap) or an int >= 1; never a bool, nor a float that happens to be whole (2.0)."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)


def valid_count(value: Any) -> bool:
    """An int >= 1 (``max_rounds``); never a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def valid_limit(value: Any) -> bool:
    """None (no limit) or a number of seconds > 0 (a run's ``timeout_s``, a tool's); never a bool,
    a string or nan."""
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool) and value > 0)


def valid_round_trip(value: Any) -> bool:
    """A finite number of seconds >= 0 (an int or a float; never a bool, a string, nan or inf)."""
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )


def check_concurrency(value: Any, where: str) -> int | None:
    """`value` as a cap, or a `UsageError` naming `where` (``compare(...)``, ``CompareView(...)``)."""
    if not valid_cap(value):
        raise UsageError(f"{where}: concurrency={value!r}: {CAP_RULE}")
    return value  # type: ignore[no-any-return]


def check_round_trip(value: Any, where: str) -> float:
    """`value` as a client round trip in seconds, or a `UsageError` naming `where`. Checked whether
    or not a serialized mode is among those run: a bad value is the caller's mistake either way."""
    if not valid_round_trip(value):
        raise UsageError(f"{where}: round_trip_s={value!r}: {ROUND_TRIP_RULE}")
    return value  # type: ignore[no-any-return]

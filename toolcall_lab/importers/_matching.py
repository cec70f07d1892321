"""Which answer (a tool message, a step) belongs to which call of one response, by the strongest
evidence first, for the whole response at once: each test is tried on every call before the next,
weaker one, so a weak match never takes an answer a stronger one ties to another call. Importers
whose sources are not spans or events with their own rules (`_otlp_tools`, inspect, Claude Code)
use this: tau-bench, SWE-agent, recorded exchanges."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence


def match_passes(
    calls: int, answers: int, passes: Sequence[Callable[[int, int], bool]]
) -> list[tuple[int | None, int]]:
    """For each call (by index), the index of its answer (None: none) and the pass that matched it
    (-1 when none did). Within a pass, calls take the first answer not yet taken, in order."""
    out: list[tuple[int | None, int]] = [(None, -1)] * calls
    taken: set[int] = set()
    for p, test in enumerate(passes):
        for i in range(calls):
            if out[i][0] is not None:
                continue
            j = next((j for j in range(answers) if j not in taken and test(i, j)), None)
            if j is not None:
                out[i] = (j, p)
                taken.add(j)
    return out


def shared(keys: Sequence[Hashable]) -> list[Hashable]:
    """The keys (call ids) that several items share, in order of first appearance."""
    counts = Counter(k for k in keys if k not in (None, "", "None"))
    return [k for k in dict.fromkeys(keys) if counts.get(k, 0) > 1]

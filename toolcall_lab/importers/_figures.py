"""The one gate every imported number passes: a figure read from a source (a latency, a duration, a
working time, a time to first token) is used only when it is a real, finite, non-negative number of
plausible size that fits the timestamps around it; otherwise it is *not used*, and a DAMAGED issue
says where, which figure, its value and why. The importer then falls back to the next source of its
documented derivation (timestamps, then a placeholder), labelled as what it is.

**The fit rule** (the same in every importer): a figure reported beside timestamps (OpenHands
``response_latencies``, Claude Code ``durationMs``, inspect ``working_time``) that exceeds the gap
between the timestamps enclosing it by more than `TOLERANCE_S` is not used: a measurement of a part
cannot be longer than the whole. A figure larger than `MAX_FIGURE_S` is not used even where no
timestamps bound it.

`check_segment` is the builder's last line of defence (`_build`): any number an importer still
hands over that the core would reject (NaN, infinite, negative, first token after the end) becomes a
placeholder with a DAMAGED issue, so one bad number costs only itself, never a file, episode or batch.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from toolcall_lab.importers._report import Issue
from toolcall_lab.importers._shapes import MODEL_S, TOLERANCE_S, Segment, Turn
from toolcall_lab.records import Timing, clock_time

MAX_FIGURE_S = 7 * 24 * 3600.0
"""The longest duration an imported figure may state (a week): anything longer is damage."""


def figure_problem(value: Any, *, scale: float = 1.0, at_most: float | None = None) -> str | None:
    """Why `value` (in the source's unit; times `scale` gives seconds) is not a usable duration, or
    None when it is. `at_most`: the enclosing timestamps' gap in seconds (the fit rule)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"a {type(value).__name__}, not a number"
    seconds = float(value) * scale
    if not math.isfinite(seconds):
        return "not a finite number"
    if seconds < 0:
        return "negative"
    if seconds > MAX_FIGURE_S:
        return f"{seconds:.0f} s, longer than any plausible run ({MAX_FIGURE_S:.0f} s)"
    if at_most is not None and seconds > at_most + TOLERANCE_S:
        return f"{seconds:.3f} s, longer than the {at_most:.3f} s between the timestamps around it"
    return None


def usable_figure(
    value: Any,
    *,
    name: str,
    where: str,
    issues: list[Issue],
    scale: float = 1.0,
    at_most: float | None = None,
    instead: str = "",
    unit: str = "",
) -> float | None:
    """`value` in seconds when it is usable (see `figure_problem`); else None, with a DAMAGED issue
    at `where` naming the figure (`name`), its value (in `unit`, e.g. " ms"), the reason and what is
    used `instead`. A missing figure (None) is not damage: None, no issue."""
    if value is None:
        return None
    problem = figure_problem(value, scale=scale, at_most=at_most)
    if problem is None:
        return float(value) if scale == 1 else round(float(value) * scale, 9)
    issues.append(
        Issue(
            kind="damaged",
            where=where,
            what=f"{name} {value!r}{unit} is {problem}: the figure is not used"
            + (f"; {instead}" if instead else ""),
        )
    )
    return None


def token_count(value: Any) -> tuple[int | None, str | None]:
    """A token count as a whole number >= 0, or None and why it is not one (None, None when the
    source gives none). Accepted: an integer, a float with no fraction, a string of digits (some
    exporters write numbers as text); anything else (a negative number, a fraction, "x", a boolean)
    is refused: the importer leaves it out with a DAMAGED line, never stores it as a count."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        return None, "a boolean, not a count"
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        n = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        n = int(value.strip())
    else:
        return None, f"a {type(value).__name__}, not a whole number"
    if n < 0:
        return None, "negative"
    return n, None


def token_counts(fields: dict[str, Any], damage: list[str]) -> dict[str, int | None]:
    """Each of `fields` (``source name -> value``) through `token_count`; a sentence in `damage` for
    every one refused (the importer makes it a DAMAGED line where the usage is)."""
    out: dict[str, int | None] = {}
    for name, value in fields.items():
        out[name], problem = token_count(value)
        if problem is not None:
            damage.append(f"token count {name} {value!r} is {problem}: left out (not a count)")
    return out


def _with(turn: Turn, attr: str, value: float | None) -> Turn:
    out = replace(turn)
    setattr(out, attr, value)
    return out


def _without(turn: Turn, attr: str) -> Turn:
    return _with(turn, attr, None)


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _latest(times: Any) -> float | None:
    return max((x for x in times if x is not None), default=None)


def _rounded(x: Any) -> Any:
    return clock_time(x) if _finite(x) else x


def _to_the_microsecond(turn: Turn) -> Turn:
    """`turn` with every figure to the microsecond (`clock_time`, the one rounding rule): a duration
    an importer took as a difference of two epoch floats carries float noise below that (a latency
    of 2.751540184 for 2.75154), whichever path, placed or not, the trace then takes."""
    changed = {
        attr: _rounded(getattr(turn, attr))
        for attr in ("latency_s", "ttfc_s", "first_token_s")
        if _rounded(getattr(turn, attr)) != getattr(turn, attr)
    }
    offsets = None if turn.offsets is None else [_rounded(o) for o in turn.offsets]
    if offsets != turn.offsets:
        changed["offsets"] = offsets
    results = [
        r if _rounded(r.duration_s) == r.duration_s else replace(r, duration_s=_rounded(r.duration_s))
        for r in turn.results
    ]
    if any(a is not b for a, b in zip(results, turn.results, strict=True)):
        changed["results"] = results
    return replace(turn, **changed) if changed else turn


def check_segment(segment: Segment, issues: list[Issue]) -> Segment:
    """`segment` with every number the core would reject replaced (see the module notes)."""
    changed = False
    turns = []
    for k, turn in enumerate(segment.turns):
        where = f"{segment.title} round {k}"
        t = _to_the_microsecond(turn)
        if not _finite(t.latency_s) or t.latency_s < 0 or t.latency_s > MAX_FIGURE_S:
            issues.append(
                Issue(
                    kind="damaged",
                    where=where,
                    what=f"model latency {t.latency_s!r} ({t.timing.source}: {t.timing.note}) is not a "
                    f"usable duration: not used, {MODEL_S} s placeholder",
                )
            )
            t = replace(
                t,
                latency_s=MODEL_S,
                timing=Timing(
                    source="placeholder",
                    note=f"the source's model latency {turn.latency_s!r} is not usable: {MODEL_S} s assumed",
                ),
                offsets=None,
                ttfc_s=None,
                first_token_s=None,
                model_end=None,
                recorded_start=None,  # (the times it was measured from: the same trust decision)
                recorded_end=_latest(r.end for r in t.results),
                chunk_timing=None if t.chunk_timing == "recorded" else t.chunk_timing,
            )
        for attr in ("ttfc_s", "first_token_s"):
            v = getattr(t, attr)
            if v is not None and (not _finite(v) or v < 0 or v > t.latency_s + TOLERANCE_S):
                issues.append(
                    Issue(
                        kind="damaged",
                        where=where,
                        what=f"time to first token {v!r} s does not fit the {t.latency_s:.3f} s response: "
                        "not used (first token time unknown)",
                    )
                )
                t = _without(t, attr)
            elif v is not None and v > t.latency_s:
                t = _with(t, attr, t.latency_s)
        if t.offsets is not None and not all(_finite(o) for o in t.offsets):
            issues.append(
                Issue(kind="damaged", where=where, what="chunk times that are not numbers: spread evenly")
            )
            t = replace(t, offsets=None, chunk_timing=None)
        for attr in ("model_end", "recorded_start", "recorded_end"):
            if getattr(t, attr) is not None and not _finite(getattr(t, attr)):
                t = _without(t, attr)
        results = []
        for r in t.results:
            res = r
            if not _finite(res.duration_s) or res.duration_s < 0 or res.duration_s > MAX_FIGURE_S:
                issues.append(
                    Issue(
                        kind="damaged",
                        where=res.where or where,
                        what=f"tool duration {res.duration_s!r} ({res.timing.note}) is not a usable "
                        "duration: not used, 0 s placeholder",
                    )
                )
                res = replace(
                    res,
                    duration_s=0.0,
                    end=None,
                    timing=Timing(
                        source="placeholder",
                        note=f"the source's duration {r.duration_s!r} is not usable: 0 s assumed",
                    ),
                )
            if res.end is not None and not _finite(res.end):
                res = replace(res, end=None)
            changed = changed or res is not r
            results.append(res)
        if any(r.end is None and old.end is not None for r, old in zip(results, t.results, strict=True)):
            # a result's end was not used: the turn's recorded end rests on the others only
            t = replace(t, recorded_end=_latest([t.model_end, *(r.end for r in results)]))
        if changed or t is not turn:
            t = replace(t, results=results)
        changed = changed or t is not turn
        turns.append(t)
    return replace(segment, turns=turns) if changed else segment

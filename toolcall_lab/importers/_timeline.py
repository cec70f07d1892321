"""Imported traces placed on their source's timeline, and the mode the recorded timings show.

A model call ends when the source says its response was complete, a tool call when its result came,
each lasting its duration; the mode is ``parallel`` when the recorded calls of some batch overlapped,
``sequential`` when every batch with timings ran one call after another (see `_build`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from toolcall_lab.analysis import how_batch_ran
from toolcall_lab.importers._shapes import TOLERANCE_S, Result, Turn
from toolcall_lab.records import Mode, Round, clock_time


def known_span(result: Result) -> tuple[float, float] | None:
    if result.end is None or not result.start_known or result.status == "not_recorded":
        return None
    return result.end - result.duration_s, result.end


def mode_evidence(turns: Sequence[Turn]) -> tuple[Mode | None, str]:
    """What the recorded batches show: the mode (None: not evidenced, when no batch of two or more
    calls has recorded starts and ends that tell) and a sentence saying which batches showed what."""
    seen: dict[str, list[str]] = {
        "overlapped": [],
        "partly overlapped": [],
        "ran one after another": [],
        "cannot tell (starts and ends within the timestamps' resolution)": [],
    }
    for k, turn in enumerate(turns):
        spans = [x for r in turn.results if (x := known_span(r)) is not None]
        how = how_batch_ran(spans)
        if how == "not evidenced":
            continue
        key = {
            "one after another": "ran one after another",
            "cannot tell": "cannot tell (starts and ends within the timestamps' resolution)",
        }.get(how, how)
        seen[key].append(f"{k} ({len(spans)} calls)")
    found = [
        f"round {', '.join(v)} {key}" if len(v) == 1 else f"rounds {', '.join(v)} {key}"
        for key, v in seen.items()
        if v
    ]
    if not found:
        return None, "no batch of two or more calls has a recorded start and end"
    if seen["overlapped"] or seen["partly overlapped"]:
        mode: Mode | None = "parallel"
    elif seen["ran one after another"]:
        mode = "sequential"
    else:
        mode = None
    return mode, "calls with a recorded start and end: " + "; ".join(found)


class Unplaced(Exception):
    """The source's timestamps contradict each other (the message says where)."""


def place(rounds: Sequence[Round], turns: Sequence[Turn], mode: Mode) -> tuple[list[Round], str | None]:
    """The rounds placed on the source's timeline (see the module notes), or unchanged with the
    reason when the source has no timestamps for some of them; raises `_Unplaced` when they do not
    fit together."""
    real = [t for t in turns if not t.synthetic]
    if any(t.model_end is None for t in real):
        return list(rounds), "the source has no end time for some response"
    if any(r.end is None for t in real for r in t.results if r.status != "not_recorded"):
        return list(rounds), "the source has no end time for some result"
    t0 = min(
        [t.model_end - t.latency_s for t in real if t.model_end is not None]
        + [t.recorded_start for t in real if t.recorded_start is not None]
        + [r.end - r.duration_s for t in real for r in t.results if r.end is not None]
    )
    out: list[Round] = []
    done = 0.0
    for k, (rnd, turn) in enumerate(zip(rounds, turns, strict=True)):
        if turn.synthetic or turn.model_end is None:
            started = done
        else:
            started = clock_time(turn.model_end - turn.latency_s - t0)
            if started < done - TOLERANCE_S and out:
                previous = max(e.ended_at for e in out[-1].executions) if out[-1].executions else done
                if started < previous - TOLERANCE_S:
                    raise Unplaced(
                        f"round {k}'s model call would start {previous - started:.3f} s before the results "
                        "it answers came in"
                    )
        ended = clock_time(started + turn.latency_s)
        execs = []
        for ex, res in zip(rnd.executions, turn.results, strict=True):
            if res.end is None:
                execs.append(replace(ex, started_at=ended, ended_at=ended))
                continue
            end = clock_time(res.end - t0)
            if end - res.duration_s < ended - TOLERANCE_S and not _inside(turn, res):
                raise Unplaced(
                    f"round {k}: call {ex.tool_call_id} would start {ended - end + res.duration_s:.3f} s "
                    "before its response ended"
                )
            execs.append(replace(ex, started_at=clock_time(end - res.duration_s), ended_at=end))
        shift = started - rnd.model_call.started_at
        mc = rnd.model_call
        out.append(
            replace(
                rnd,
                mode=mode,
                model_call=replace(
                    mc,
                    started_at=started,
                    ended_at=clock_time(ended),
                    first_chunk_at=(
                        None if mc.first_chunk_at is None else clock_time(mc.first_chunk_at + shift)
                    ),
                ),
                executions=tuple(execs),
            )
        )
        done = max([done, ended, *(e.ended_at for e in execs)])
    return out, None


def _inside(turn: Turn, result: Result) -> bool:
    """A tool that started while its response was still streaming (the AI SDK runs a tool as soon as
    its call has streamed): the importer then ends the model's part at the tool's start."""
    return (
        turn.model_end is not None
        and result.end is not None
        and (result.end - result.duration_s >= turn.model_end - TOLERANCE_S)
    )


def first_chunk(rnd: Round, turn: Turn) -> float | None:
    """When the first chunk came, if the source says: a recorded time to first token, or recorded
    chunk offsets; otherwise unknown (None), never the whole latency."""
    mc = rnd.model_call
    if turn.first_token_s is not None:
        return clock_time(mc.started_at + turn.first_token_s)
    if mc.chunk_timing == "recorded" and mc.chunks:
        return clock_time(mc.started_at + mc.chunks[0].offset_s)
    return None

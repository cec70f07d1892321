"""Timelines as SVG: every bar is an interval the record holds, nothing re-derived.

Model calls come from each round's response, tool bars from its executions, client round trips
from the round's `round_trips` (serialized mode records N-1 per batch of N, timed and labelled),
and "waiting for a slot" only from an execution's recorded `queued_at`: a gap the record does not
explain stays empty. Lanes come from the data: the model on top, then one lane per call position
of a batch, so sequential calls form a staircase and parallel calls a stack; tool bars may start
inside the model bar (``eager``: the call ran while the model was still streaming). In a page the
SVG takes its container's width (x in percent, text in pixels) and its labels are laid out again
for wider containers (CSS container queries), so a label is inside its bar, beside it, or absent
(the tooltip and the table have it), never cut.
`timeline_file` draws the same bars at a fixed width for saving.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from toolcall_lab.notebook.legend import bars_table, legend_entries, legend_html
from toolcall_lab.notebook.round_state import answer_kind
from toolcall_lab.notebook.theme import (
    MODEL,
    PROVENANCE_NOTE,
    SKIPPED_STROKE,
    SVG_FILE_STYLE,
    TRIP,
    WAIT,
    WARN,
    e,
    exact,
    plural,
    secs,
    status_style,
)

ROW = 20
BAR = 14
AXIS = 18
CHAR_PX = 6.4
"""Average width of a character of the 11 px font, for lane names and the legend of a saved file."""
NARROWEST = 200
"""The narrowest plot the views lay labels out for: an 800 px window with JupyterLab's file browser
open leaves an output area of about 350 px, lane names take up to about 100, a panel's padding 20."""
RANGES = (0, 420, 560, 840, 1120)
"""Container widths (px) from which labels are laid out again (CSS container queries in theme.CSS)."""


def layout_widths(min_px: float) -> list[float]:
    """The plot width each range of `RANGES` is laid out for: its lower bound, at least `min_px` (the
    narrowest plot drawn; a layout holds at any wider width, so a range is laid out at its start)."""
    return [float(min_px), *(float(max(w, min_px)) for w in RANGES[1:])]


FAINT = ("estimated", "placeholder")


@dataclass(slots=True)
class Item:
    """One thing drawn on a lane, in seconds."""

    lane: int
    t0: float
    t1: float
    kind: str  # model | tool | trip | wait | skipped
    fill: str
    on_fill: str
    label: str
    short: str
    tip: str
    round_index: int = 0
    provenance: str = "recorded"
    status: str = ""
    what: str = ""
    """Who the bar is about (model, a tool's name), for the table."""


def _timing(block: dict[str, Any] | None) -> tuple[str, str]:
    timing = (block or {}).get("timing")
    if not isinstance(timing, dict):
        return "recorded", ""
    source = timing.get("source")
    return (source if isinstance(source, str) else "recorded"), str(timing.get("note") or "")


def _prov_note(block: dict[str, Any] | None) -> str:
    source, note = _timing(block)
    if not isinstance((block or {}).get("timing"), dict):
        return ""
    return f"; {PROVENANCE_NOTE.get(source, source)}" + (f" ({note})" if note else "")


def ttfc_text(response: dict[str, Any]) -> str | None:
    """Time to first chunk, only where the chunks' arrival was recorded (a spread or a whole
    response would make it the latency or a placeholder), with what it rests on."""
    ttfc = response.get("ttfc_s")
    if not isinstance(ttfc, int | float) or response.get("chunk_timing") != "recorded":
        return None
    source, _ = _timing(response)
    return f"first chunk after {exact(ttfc)} s" + (f" ({source} timing)" if source != "recorded" else "")


def paired(r: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any], dict[str, Any] | None]]:
    """(position, call, its execution or None): position by position (ids can repeat in a batch),
    by id where the record does not keep one execution per call."""
    calls, runs = r["tool_calls"], r["tool_executions"]
    if len(runs) == len(calls) and all(
        c["tool_call_id"] == x["tool_call_id"] for c, x in zip(calls, runs, strict=True)
    ):
        yield from ((i, c, x) for i, (c, x) in enumerate(zip(calls, runs, strict=True)))
        return
    left = list(runs)
    for i, c in enumerate(calls):
        x = next((x for x in left if x["tool_call_id"] == c["tool_call_id"]), None)
        if x is not None:
            left.remove(x)
        yield i, c, x


def round_end(r: dict[str, Any]) -> float:
    ends = [x["ended_at"] for x in r["tool_executions"] if x["status"] != "skipped"]
    ends += [t["ended_at"] for t in r.get("round_trips") or ()]
    return float(max([r["response"]["ended_at"], *ends]))


def items_of(rounds: Sequence[dict[str, Any]]) -> list[Item]:
    """The bars of some rounds (lane 0 = model, lane i = the i-th call of each round's batch)."""
    out: list[Item] = []
    for r in rounds:
        resp, index = r["response"], r["round_index"]
        latency = resp["ended_at"] - resp["started_at"]
        kind = answer_kind(r)
        first = ttfc_text(resp)
        out.append(
            Item(
                lane=0,
                t0=resp["started_at"],
                t1=resp["ended_at"],
                kind="model",
                fill=MODEL.fill,
                on_fill=MODEL.on_fill,
                label=f"model {secs(latency)}",
                short=secs(latency),
                tip=f"round {index} model call ({kind}): {exact(latency)} s, "
                f"{exact(resp['started_at'])} → {exact(resp['ended_at'])} s"
                + (f"; {first}" if first else "")
                + _prov_note(resp),
                round_index=index,
                provenance=_timing(resp)[0],
                what="model",
            )
        )
        for trip in r.get("round_trips") or ():
            dur = trip["ended_at"] - trip["started_at"]
            out.append(
                Item(
                    lane=int(trip["position"]) + 1,
                    t0=trip["started_at"],
                    t1=trip["ended_at"],
                    kind="trip",
                    fill=TRIP.fill,
                    on_fill=TRIP.on_fill,
                    label="",
                    short="",
                    tip=f"client round trip handing out {trip['tool_call_id']} (position "
                    f"{trip['position'] + 1}): {exact(dur)} s, {exact(trip['started_at'])} → "
                    f"{exact(trip['ended_at'])} s" + _prov_note(trip),
                    round_index=index,
                    provenance=_timing(trip)[0],
                    what="client round trip",
                )
            )
        for pos, call, x in paired(r):
            lane, name = pos + 1, call["name"]
            if x is None or x["status"] == "skipped":
                out.append(
                    Item(
                        lane=lane,
                        t0=resp["ended_at"],
                        t1=resp["ended_at"],
                        kind="skipped",
                        fill="none",
                        on_fill="",
                        label=f"{name} skipped",
                        short="skipped",
                        tip=f"{name} ({call['tool_call_id']}): "
                        + (
                            "skipped, never executed and never answered"
                            if x is not None
                            else "no execution in the record"
                        ),
                        round_index=index,
                        status="skipped",
                        what=name,
                    )
                )
                continue
            queued = x.get("queued_at")
            if isinstance(queued, int | float) and x["started_at"] - queued > 1e-9:
                out.append(
                    Item(
                        lane=lane,
                        t0=float(queued),
                        t1=x["started_at"],
                        kind="wait",
                        fill=WAIT.fill,
                        on_fill="",
                        label="",
                        short="",
                        tip=f"{name} ({call['tool_call_id']}) waited {exact(x['started_at'] - queued)} s "
                        f"for a slot, {exact(queued)} → {exact(x['started_at'])} s",
                        round_index=index,
                        provenance=_timing(x)[0],
                        what=name,
                    )
                )
            st = status_style(x["status"])
            dur = x["ended_at"] - x["started_at"]
            out.append(
                Item(
                    lane=lane,
                    t0=x["started_at"],
                    t1=x["ended_at"],
                    kind="tool",
                    fill=st.fill,
                    on_fill=st.on_fill,
                    label=f"{name} {secs(dur)}" if x["status"] == "ok" else f"{st.icon} {name} {secs(dur)}",
                    # (a failed call keeps its mark and its tool even in the short label)
                    short=secs(dur) if x["status"] == "ok" else f"{st.icon} {name}",
                    tip=(
                        f"{name} ({call['tool_call_id']}): {st.icon} running since "
                        f"{exact(x['started_at'])} s, not finished (drawn to the last event, "
                        f"{exact(x['ended_at'])} s)"
                        if x["status"] == "running"
                        else f"{name} ({call['tool_call_id']}): {st.icon} {x['status']}, {exact(dur)} s, "
                        f"{exact(x['started_at'])} → {exact(x['ended_at'])} s" + _prov_note(x)
                    ),
                    round_index=index,
                    provenance=_timing(x)[0],
                    status=x["status"],
                    what=name,
                )
            )
    return out


def lane_names(rounds: Sequence[dict[str, Any]], n_lanes: int) -> list[tuple[str, str]]:
    """(name, tooltip) per lane: a lone round numbers its calls and names their tools (a tool called
    twice gets two lanes, #1 and #2), a run names lanes by batch position, and by the tool too
    where a lane only ever holds one tool (the tooltip lists the tools a lane holds)."""
    names = [("model", "model calls, one per round")]
    if len(rounds) == 1:
        names += [
            (f"#{i + 1} {c['name']}", f"call {c['tool_call_id']} (position {i + 1} in the batch)")
            for i, c in enumerate(rounds[0]["tool_calls"])
        ]
    else:
        for i in range(1, n_lanes):
            tools = {r["tool_calls"][i - 1]["name"] for r in rounds if len(r["tool_calls"]) >= i}
            where = f"the call at position {i} of each round's batch"
            if len(tools) == 1:  # the lane says the tool when it only ever holds that one
                (tool,) = tools
                names.append((f"call {i} {tool}", f"{where}: always {tool}"))
            else:
                names.append((f"call {i}", f"{where}: {', '.join(sorted(tools))}"))
    return names[:n_lanes]


def _tick_step(span: float, px: float) -> float:
    want = max(3, min(10, int(px // 55)))
    for step in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500):
        if span / step <= want:
            return float(step)
    return span / want


class Axis:
    """Maps seconds to x: percent of the plot (in a page) or pixels (in a file)."""

    def __init__(self, t0: float, t1: float, plot_px: float, offset_px: float | None) -> None:
        self.t0, self.span, self.plot_px, self.offset = t0, max(t1 - t0, 1e-9), plot_px, offset_px

    def at_width(self, plot_px: float) -> Axis:
        return Axis(self.t0, self.t0 + self.span, plot_px, self.offset)

    def frac(self, t: float) -> float:
        return min(max((t - self.t0) / self.span, 0.0), 1.0)

    def _out(self, f: float) -> str:
        return f"{f * 100:.3f}%" if self.offset is None else f"{self.offset + f * self.plot_px:.1f}"

    def x(self, t: float) -> str:
        return self._out(self.frac(t))

    def box(self, t0: float, t1: float, min_px: float) -> tuple[str, str]:
        """x and width of a bar at least `min_px` wide, kept inside the plot (a marker at the very
        end of the axis moves left rather than spill over the edge)."""
        x, w = self.fracs(t0, t1, min_px)
        width = f"{w * 100:.3f}%" if self.offset is None else f"{w * self.plot_px:.1f}"
        return self._out(x), width

    def fracs(self, t0: float, t1: float, min_px: float) -> tuple[float, float]:
        """`box` as fractions of the plot: the same at every container width."""
        w = max(self.frac(t1) - self.frac(t0), min_px / self.plot_px)
        return min(self.frac(t0), max(0.0, 1.0 - w)), w

    def px(self, t0: float, t1: float) -> float:
        return (self.frac(t1) - self.frac(t0)) * self.plot_px


_ADVANCE = (
    0.318,
    0.401,
    0.46,
    0.838,
    0.636,
    0.95,
    0.78,
    0.275,
    0.39,
    0.39,
    0.5,
    0.838,
    0.318,
    0.361,
    0.318,
    0.337,
    0.636,
    0.636,
    0.636,
    0.636,
    0.636,
    0.636,
    0.636,
    0.636,
    0.636,
    0.636,
    0.337,
    0.337,
    0.838,
    0.838,
    0.838,
    0.531,
    1.0,
    0.684,
    0.686,
    0.698,
    0.77,
    0.632,
    0.575,
    0.775,
    0.752,
    0.295,
    0.295,
    0.656,
    0.557,
    0.863,
    0.748,
    0.787,
    0.603,
    0.787,
    0.695,
    0.635,
    0.611,
    0.732,
    0.684,
    0.989,
    0.685,
    0.611,
    0.685,
    0.39,
    0.337,
    0.39,
    0.838,
    0.5,
    0.5,
    0.613,
    0.635,
    0.55,
    0.635,
    0.615,
    0.352,
    0.635,
    0.634,
    0.278,
    0.278,
    0.579,
    0.278,
    0.974,
    0.634,
    0.612,
    0.635,
    0.635,
    0.411,
    0.521,
    0.392,
    0.634,
    0.592,
    0.818,
    0.592,
    0.592,
    0.525,
    0.636,
    0.337,
    0.636,
    0.838,
)
"""Advance widths (em) of printable ASCII in DejaVu Sans, the widest of the usual sans-serif fonts
(what Chromium on Linux draws the labels with; Helvetica, Arial and Segoe UI are narrower), so an
estimate from it is never short. Any other character counts as 1 em."""
FONT_PX = 11.0
"""The label font size (theme.CSS, SVG_FILE_STYLE; the matplotlib views use 8 pt at 100 dpi ≈ 11 px)."""
PAD = 4.0
"""A label's distance from its bar's edge."""
GAP = 6.0
"""The least free space between a label and any other label or bar on its lane: never touching."""


def text_px(text: str) -> float:
    """Width of a label in pixels, at least what the browser draws."""
    return FONT_PX * sum(_ADVANCE[o - 32] if 32 <= (o := ord(ch)) < 127 else 1.0 for ch in text)


Placement = tuple[str, str] | None
"""(text, where) with where one of in | right | left; None: no label (the tooltip has it)."""


def drawn_px(it: Item, axis: Axis, px: float) -> tuple[float, float]:
    """x0 and x1 (pixels, plot of width `px`) of a bar as `_bars` draws it (`Axis.box`): minimum
    widths are set at the axis's own width, so in a page a marker grows with its container."""
    min_px = {"wait": 1.0, "skipped": 10.0}.get(it.kind, 2.0)
    x, w = axis.fracs(it.t0, it.t0 if it.kind == "skipped" else it.t1, min_px)
    return x * px, (x + w) * px


def _texts(lane: Sequence[Item]) -> list[list[tuple[str, float]]]:
    """Each bar's candidate labels (full, then short) with their widths, measured once per lane."""
    return [
        [(t, text_px(t)) for t in dict.fromkeys(t for t in (it.label, it.short) if t)]
        if it.kind in ("model", "tool")
        else []
        for it in lane
    ]


class _Lane:
    """One lane's bars, sorted, with what every width's layout shares: each bar's candidate labels
    and their widths, and its extent as fractions of the plot (`drawn_px` at a width of 1; the
    minimum widths are the axis's, so a layout at any width only scales them)."""

    def __init__(self, lane: list[Item], axis: Axis) -> None:
        lane.sort(key=lambda i: (i.t0, i.t1))
        self.items = lane
        self.texts = _texts(lane)
        self.spans = [drawn_px(it, axis, 1.0) for it in lane]
        self.order = sorted(range(len(lane)), key=lambda j: self.spans[j][0])
        reach: list[float] = []  # running max of x1 over `order`
        for j in self.order:
            reach.append(max(reach[-1], self.spans[j][1]) if reach else self.spans[j][1])
        self.reach = reach


def _lane_at(lane: _Lane, px: float) -> dict[int, tuple[Placement, float, float]]:
    """Labels of one lane in a plot `px` wide, left to right: each the first of full label inside,
    beside (right, left), short label inside, beside, that keeps `GAP` from every other bar and label
    on the lane and stays in the plot; else none. Returns id → (placement, x0, x1 of the text)."""
    texts, order = lane.texts, lane.order
    ext = [(a * px, b * px) for a, b in lane.spans]
    x0s = [ext[j][0] for j in order]
    reach = [r * px for r in lane.reach]
    items = lane.items
    starts: list[float] = []  # placed labels, never overlapping: sorted by start and by end
    ends: list[float] = []

    def hits_bar(a: float, b: float, own: int, gap: float) -> bool:
        j = bisect_left(x0s, b + gap) - 1
        while j >= 0 and reach[j] > a - gap:
            if order[j] != own and ext[order[j]][1] > a - gap:
                return True
            j -= 1
        return False

    def hits_label(a: float, b: float) -> bool:
        i = bisect_left(starts, b + GAP)
        return i > 0 and ends[i - 1] > a - GAP

    out: dict[int, tuple[Placement, float, float]] = {}
    for k, it in enumerate(items):
        if it.kind not in ("model", "tool"):
            continue
        x0, x1 = ext[k]  # where `_label_svg` anchors the text: the bar as drawn
        chosen: tuple[Placement, float, float] = (None, 0.0, 0.0)
        for text, w in texts[k]:
            candidates = (
                ("in", x0 + PAD, x0 + PAD + w, 0.0),
                ("right", x1 + PAD, x1 + PAD + w, GAP),
                ("left", x0 - PAD - w, x0 - PAD, GAP),
            )
            for where, a, b, gap in candidates:
                if where == "in" and w + 2 * PAD > x1 - x0:
                    continue
                if a < 0 or b > px or hits_label(a, b) or hits_bar(a, b, k, gap):
                    continue
                # in a page, bars are fractions of the plot and text is pixels: the wider the plot,
                # the closer a label beside its bar sits to it, so nothing may lie between them
                # either. Inside, the text keeps its place from the bar's start: a mark ending
                # within 0.4 of the padding of it (the client round trip or the wait that ends where
                # the call starts, drawn a little wider) stays clear of the text up to 2.5 times the
                # width it was laid out for (a range spans at most 2.1 times its start).
                near = (x1, b) if where == "right" else ((a, x0) if where == "left" else (x0 + PAD * 0.4, b))
                if hits_bar(*near, k, 0.0):
                    continue
                chosen = ((text, where), a, b)
                break
            if chosen[0] is not None:
                break
        if chosen[0] is not None:
            i = bisect_left(starts, chosen[1])
            starts.insert(i, chosen[1])
            ends.insert(i, chosen[2])
        out[id(it)] = chosen
    return out


def lay_out(items: Sequence[Item], axis: Axis, widths: Sequence[float]) -> dict[int, list[Placement]]:
    """Where each model and tool bar's label goes, for a plot of each width in `widths` (id → one
    placement per width). Each lane is laid out as a whole, so a label never overlaps or touches
    a neighbour's label or bar (see `label_boxes`)."""
    by_lane: dict[int, list[Item]] = {}
    for it in items:
        by_lane.setdefault(it.lane, []).append(it)
    out: dict[int, list[Placement]] = {id(it): [] for it in items if it.kind in ("model", "tool")}
    for bars in by_lane.values():
        lane = _Lane(bars, axis)
        done: dict[float, dict[int, tuple[Placement, float, float]]] = {}
        for px in widths:
            if px not in done:
                done[px] = _lane_at(lane, px)
            for key, (placed, _, _) in done[px].items():
                out[key].append(placed)
    return out


def label_boxes(items: Sequence[Item], axis: Axis, px: float) -> list[tuple[int, float, float, str]]:
    """The labels drawn in a plot `px` wide, as (lane, x0, x1, text) in pixels: what a test checks
    for overlaps (the same layout `_bars` draws)."""
    by_lane: dict[int, list[Item]] = {}
    for it in items:
        by_lane.setdefault(it.lane, []).append(it)
    boxes = []
    for lane_no, bars in by_lane.items():
        for placed, a, b in _lane_at(_Lane(bars, axis), px).values():
            if placed is not None:
                boxes.append((lane_no, a, b, placed[0]))
    return boxes


def _label_svg(it: Item, placed: tuple[str, str], axis: Axis, y: float, classes: str) -> str:
    text, where = placed
    ty = y + BAR - 3.5
    x, w = axis.fracs(it.t0, it.t1, 2)  # the bar as drawn, as the layout measured it
    if where == "in":
        colour = it.on_fill if it.provenance not in FAINT else ""
        fill = f" style='fill:{colour}'" if colour else ""
        return f"<text class='tcl-in{classes}' x='{axis._out(x)}' dx='4' y='{ty}'{fill}>{e(text)}</text>"
    if where == "right":
        return f"<text class='tcl-out{classes}' x='{axis._out(x + w)}' dx='4' y='{ty}'>{e(text)}</text>"
    return (
        f"<text class='tcl-out{classes}' x='{axis._out(x)}' dx='-4' y='{ty}' text-anchor='end'>"
        f"{e(text)}</text>"
    )


def _bars(items: Sequence[Item], axis: Axis, widths: Sequence[float]) -> list[str]:
    """SVG for the bars; labels laid out once per width in `widths` (one: a file; several: a page,
    where CSS shows the layout of the range the container is in)."""
    parts: list[str] = []
    layout = lay_out(items, axis, widths)
    for it in items:
        y = it.lane * ROW + (ROW - BAR) / 2
        tip = f"<title>{e(it.tip)}</title>"
        if it.kind == "wait":
            x, w = axis.box(it.t0, it.t1, 1)
            parts.append(
                f"<rect class='tcl-bar-wait' x='{x}' y='{y + BAR / 2 - 2}' width='{w}' height='4' "
                f"fill='{it.fill}'>{tip}</rect>"
            )
            continue
        if it.kind == "skipped":
            x, w = axis.box(it.t0, it.t0, 10)
            parts.append(
                f"<rect class='tcl-bar-skipped' x='{x}' y='{y}' width='{w}' height='{BAR}' fill='none' "
                f"stroke='{SKIPPED_STROKE}' stroke-dasharray='3 2'>{tip}</rect>"
            )
            continue
        x, w = axis.box(it.t0, it.t1, 2)
        faint = it.provenance in FAINT
        style = (
            f" style='stroke:{it.fill};stroke-width:1.5' "
            f"fill-opacity='{0.55 if it.provenance == 'estimated' else 0.2}' "
            f"stroke-dasharray='{'5 2' if it.provenance == 'estimated' else '2 2'}'"
            if faint
            else ""
        )
        parts.append(
            f"<rect class='tcl-bar tcl-bar-{it.kind}{' tcl-faint' if faint else ''}' "
            f"data-provenance='{e(it.provenance)}' x='{x}' y='{y}' width='{w}' height='{BAR}' rx='2' "
            f"fill='{it.fill}'{style}>{tip}</rect>"
        )
        if it.kind not in ("model", "tool"):
            continue
        placements = layout[id(it)]
        if len(set(placements)) == 1:
            if placements[0]:
                parts.append(_label_svg(it, placements[0], axis, y, ""))
            continue
        for placed in dict.fromkeys(placements):
            if placed:
                ranges = "".join(f" tcl-r{k}" for k, p in enumerate(placements) if p == placed)
                parts.append(_label_svg(it, placed, axis, y, f" tcl-lbl{ranges}"))
    return parts


def _band(rounds: Sequence[dict[str, Any]], highlight: int | None, axis: Axis, height: float) -> str:
    """The selected round's time span, shaded behind the bars (the other rounds keep full colour)."""
    picked = [r for r in rounds if r["round_index"] == highlight]
    if highlight is None or not picked:
        return ""
    t0 = min(r["response"]["started_at"] for r in picked)
    t1 = max(round_end(r) for r in picked)
    x, w = axis.box(t0, t1, 2)
    return (
        f"<rect class='tcl-band' x='{x}' y='0' width='{w}' height='{height}'>"
        f"<title>round {highlight}: {exact(t0)} → {exact(t1)} s</title></rect>"
    )


def _ranged_ticks(axis: Axis, height: float, relative: bool, widths: Sequence[float]) -> str:
    """Ticks for a page: as many as each width range has room for (a step chosen per range, shown
    by the same container queries as the labels), so a wide plot is not left with 3 ticks."""
    by_step: dict[float, list[int]] = {}
    for k, w in enumerate(widths):
        by_step.setdefault(_tick_step(axis.span, w), []).append(k)
    if len(by_step) == 1:
        return "".join(_ticks(axis, height, relative))
    return "".join(
        f"<g class='tcl-lbl{''.join(f' tcl-r{k}' for k in ranges)}'>"
        f"{''.join(_ticks(axis.at_width(widths[ranges[0]]), height, relative))}</g>"
        for ranges in by_step.values()
    )


def _ticks(axis: Axis, height: float, relative: bool) -> list[str]:
    """Grid lines and their times: counted from the axis's start (`relative`, ``+0.5 s``), or at
    round multiples of the step on the clock (a run starting at 0.0148 s gets ticks at 0.05, 0.10...,
    never a "0.06 s" drawn at 0.0648 s)."""
    out = []
    step = _tick_step(axis.span, axis.plot_px)
    first = 0.0 if relative else math.ceil(axis.t0 / step - 1e-9) * step - axis.t0
    n = int((axis.span - first) / step + 1e-9)
    for k in range(n + 1):
        t = axis.t0 + first + k * step
        f = axis.frac(t)
        anchor = "start" if f < 0.04 else ("end" if f > 0.96 else "middle")
        value = k * step if relative else round(t / step) * step
        text = f"{'+' if relative and k else ''}{value:.{_decimals(step)}f} s"
        out.append(
            f"<line class='tcl-gridline' x1='{axis.x(t)}' x2='{axis.x(t)}' y1='0' y2='{height - AXIS + 2}'/>"
            f"<text class='tcl-tick' x='{axis.x(t)}' y='{height - 4}' text-anchor='{anchor}'>{text}</text>"
        )
    return out


def _decimals(step: float) -> int:
    return 0 if step >= 1 else (1 if step >= 0.1 else (2 if step >= 0.01 else 3))


def bounds(rounds: Sequence[dict[str, Any]], start: float | None, end: float | None) -> tuple[float, float]:
    t0 = min(r["response"]["started_at"] for r in rounds) if start is None else start
    t1 = max(round_end(r) for r in rounds) if end is None else end
    return t0, max(t1, t0 + 1e-3)


def timeline_svg(
    rounds: Sequence[dict[str, Any]],
    *,
    start: float | None = None,
    end: float | None = None,
    highlight: int | None = None,
    relative: bool = False,
    legend: bool = True,
    table: bool = False,
    min_px: int = 420,
    title: str = "",
    items: Sequence[Item] | None = None,
) -> str:
    """A timeline that fills its container: lane names, bars, time axis, legend (HTML + SVG).

    Pass `start`/`end` to share one axis between several timelines; `relative` labels ticks from
    `start`; `highlight` shades one round's span; `table` adds the bars as a table. `min_px` is the
    narrowest plot the labels are laid out for (the timeline scrolls rather than spill when its
    container is narrower). `items`: the rounds' bars when the caller has them (`items_of`).
    """
    if not rounds:
        return "<div class='tcl-tl tcl-muted'>(no rounds)</div>"
    t0, t1 = bounds(rounds, start, end)
    axis = Axis(t0, t1, float(min_px), None)
    items = items_of(rounds) if items is None else items
    n_lanes = 1 + max((len(r["tool_calls"]) for r in rounds), default=0)
    height = n_lanes * ROW + AXIS
    names = lane_names(rounds, n_lanes)
    lanes = "".join(f"<div class='tcl-lane' title='{e(tip)}'>{e(name)}</div>" for name, tip in names)
    n_calls = sum(len(r["tool_calls"]) for r in rounds)
    summary = title or (
        f"Timeline of {plural(len(rounds), 'round')}, {plural(n_calls, 'tool call')}, "
        + f"{exact(t0)} to {exact(t1)} s"
    )
    widths = layout_widths(min_px)
    svg = (
        f"<svg class='tcl-timeline' role='img' aria-label='{e(summary)}' height='{height}' "
        f"xmlns='http://www.w3.org/2000/svg'><title>{e(summary)}</title>"
        f"{_band(rounds, highlight, axis, height - AXIS)}{_ranged_ticks(axis, height, relative, widths)}"
        f"{''.join(_bars(items, axis, widths))}</svg>"
    )
    return (
        f"<div class='tcl-tl'><div class='tcl-scroll'><div class='tcl-tl-grid'><div class='tcl-lanes'>"
        f"{lanes}</div><div class='tcl-plot' style='min-width:{min_px}px'>{svg}</div></div></div>"
        f"{legend_html(items, band=highlight is not None) if legend else ''}"
        f"{bars_table(items, names) if table else ''}</div>"
    )


@dataclass(frozen=True, slots=True)
class Panel:
    """One run as a view shows it and its exports save it (SVG, PNG): its name, what the view says
    beside it (wall time, model calls...), a warning when it cannot be compared or did not end
    normally, and its rounds. Built once by the view, so the export says what the view says."""

    name: str
    rounds: Sequence[dict[str, Any]]
    caption: str = ""
    warning: str = ""

    @property
    def title(self) -> str:
        """Name, caption and warning on one line (a figure's panel title)."""
        return " · ".join(
            x for x in (f"{self.name}: {self.caption}" if self.caption else self.name, self.warning) if x
        )


PanelLike = Panel | tuple[str, Sequence[dict[str, Any]]]


def as_panel(panel: PanelLike) -> Panel:
    return panel if isinstance(panel, Panel) else Panel(panel[0], panel[1])


def _svg_lines(x: float, y: float, parts: Sequence[tuple[str, str]], width: float) -> tuple[str, float]:
    """Text runs (text, style) wrapped to `width` pixels from (x, y); returns the SVG and the next y."""
    out, line, used = [], "", 0.0
    for text, style in parts:
        for word in text.split(" "):
            w = text_px(word + " ")
            if used + w > width and used:
                out.append(f"<text x='{x:.0f}' y='{y:.0f}'>{line}</text>")
                line, used, y = "", 0.0, y + 15
            line += f"<tspan style='{style}'>{e(word)} </tspan>" if style else e(word + " ")
            used += w
    if line:
        out.append(f"<text x='{x:.0f}' y='{y:.0f}'>{line}</text>")
        y += 15
    return "".join(out), y


def timeline_file(panels: Sequence[PanelLike], *, title: str = "", width: int = 960) -> str:
    """A standalone SVG document: the title once, one panel per run (its name, what the view says
    beside it, its warning), all on one time axis, and the view's legend drawn as the view draws
    it (faint and dashed swatches included)."""
    drawn_panels = [p for p in (as_panel(x) for x in panels) if p.rounds]
    if not drawn_panels:
        raise ValueError("nothing to draw: no rounds in any panel")
    t0 = min(bounds(p.rounds, None, None)[0] for p in drawn_panels)
    t1 = max(bounds(p.rounds, None, None)[1] for p in drawn_panels)
    all_names = [
        n
        for p in drawn_panels
        for n, _ in lane_names(p.rounds, 1 + max(len(x["tool_calls"]) for x in p.rounds))
    ]
    label_px = min(160, 12 + CHAR_PX * max(len(n) for n in all_names))
    axis = Axis(t0, t1, width - label_px - 16, label_px)
    heading = title or " / ".join(p.name for p in drawn_panels)
    head, y = _svg_lines(4, 18, [(heading, "font-weight:600;font-size:14px")], width - 8)
    parts, drawn = [head], []
    for panel in drawn_panels:
        n_lanes = 1 + max(len(r["tool_calls"]) for r in panel.rounds)
        items = items_of(panel.rounds)
        drawn += items
        height = n_lanes * ROW + AXIS
        lanes = "".join(
            f"<text x='4' y='{i * ROW + ROW - 6}'>{e(n)}</text>"
            for i, (n, _) in enumerate(lane_names(panel.rounds, n_lanes))
        )
        named = panel.name != heading or len(drawn_panels) > 1
        runs = [(panel.name, "font-weight:600;font-size:13px")] if named else []
        runs += [(panel.caption, "")] if panel.caption else []
        runs += [(f"⚠ {panel.warning}", f"fill:{WARN}")] if panel.warning else []
        caption, y = _svg_lines(4, y + 4, runs, width - 8) if runs else ("", y)
        parts.append(
            f"{caption}<g transform='translate(0,{y - 8:.0f})'>{lanes}{''.join(_ticks(axis, height, False))}"
            f"{''.join(_bars(items, axis, [axis.plot_px]))}</g>"
        )
        y += height + 6
    x = 4.0
    y += 4
    for sw in legend_entries(drawn):
        if x + 24 + text_px(sw.label) > width:
            x, y = 4.0, y + 16
        parts.append(f"{sw.svg(x, y + 2)}<text x='{x + 18:.0f}' y='{y + 11}'>{e(sw.label)}</text>")
        x += 30 + text_px(sw.label)
    y += 22
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{y:.0f}' "
        f"viewBox='0 0 {width} {y:.0f}'><title>{e(heading)}</title>"
        f"{SVG_FILE_STYLE}<rect width='100%' height='100%' fill='#ffffff'/>{''.join(parts)}</svg>"
    )

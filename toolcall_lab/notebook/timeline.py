"""Timelines as SVG: model calls and tool calls of serialized rounds on one time axis.

Lanes come from the data: the model on top, then one lane per call position of a batch (a lone
round names its lanes after the tools), so sequential calls form a staircase and parallel calls a
stack; tool bars may start inside the model bar (``eager``: the call ran while the model was still
streaming). A call that waited for a slot (a concurrency cap or a per-tool limit) shows the wait as a
thin bar from when it was queued (its recorded ``queued_at``) to when it started. In a page the SVG
takes its container's width (x in percent, text in pixels), so it never spills out of a panel and its
text stays readable;
`timeline_file` draws the same bars at a fixed width for saving.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolcall_lab.notebook.theme import MODEL, PROVENANCE_NOTE, SVG_FILE_STYLE, TRIP, WAIT, e, status_style

ROW = 20
BAR = 14
AXIS = 18
CHAR_PX = 6.4
"""Average width of a character of the 11 px label font, to decide whether a label fits."""


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
    dim: bool = False
    provenance: str = "recorded"
    status: str = ""


def _prov(block: dict[str, Any] | None) -> str:
    timing = (block or {}).get("timing")
    source = timing.get("source") if isinstance(timing, dict) else None
    return source if isinstance(source, str) else "recorded"


def _prov_note(block: dict[str, Any] | None) -> str:
    timing = (block or {}).get("timing")
    if not isinstance(timing, dict):
        return ""
    source = timing.get("source")
    note = timing.get("note")
    text = PROVENANCE_NOTE.get(str(source), str(source)) if source else ""
    return f"; timing {text}" + (f" ({note})" if note else "")


def secs(value: float) -> str:
    """Seconds as people read them: 3 significant places, never float noise like 3.55e-15."""
    if abs(value) < 0.0005:
        return "0 s"
    if abs(value) < 10:
        return f"{value:.2f} s" if abs(value) >= 0.995 else f"{value * 1000:.0f} ms"
    return f"{value:.1f} s"


def round_end(r: dict[str, Any]) -> float:
    ends = [x["ended_at"] for x in r["tool_executions"] if x["status"] != "skipped"]
    return float(max([r["response"]["ended_at"], *ends]))


def items_of(
    rounds: Sequence[dict[str, Any]], *, round_trip_s: float = 0.0, highlight: int | None = None
) -> list[Item]:
    """The bars of some rounds (lane 0 = model, lane i = the i-th call of each round's batch)."""
    out: list[Item] = []
    for r in rounds:
        resp = r["response"]
        dim = highlight is not None and r["round_index"] != highlight
        latency = resp["ended_at"] - resp["started_at"]
        ttfc = resp.get("ttfc_s")
        kind = "final answer" if not r["tool_calls"] else f"{len(r['tool_calls'])} call(s)"
        prov = _prov(resp)
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
                tip=f"round {r['round_index']} model call ({kind}): {latency:.3f} s, "
                f"{resp['started_at']:.3f} → {resp['ended_at']:.3f} s"
                + (f"; first chunk after {ttfc:.3f} s" if isinstance(ttfc, int | float) else "")
                + _prov_note(resp),
                dim=dim,
                provenance=prov,
            )
        )
        found = _executions_by_position(r)
        trip = round_trip_s if r.get("mode") == "serialized" else 0.0
        for pos, call in enumerate(r["tool_calls"]):
            lane = pos + 1
            x = found[pos]
            name = call["name"]
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
                        tip=f"{name} ({call['tool_call_id']}): skipped, never executed and never answered",
                        dim=dim,
                    )
                )
                continue
            st = status_style(x["status"])
            queued = x.get("queued_at")
            dispatch = float(queued) if isinstance(queued, int | float) else None
            if dispatch is not None and x["started_at"] - trip - dispatch > 1e-6:
                out.append(
                    Item(
                        lane=lane,
                        t0=dispatch,
                        t1=x["started_at"] - trip,
                        kind="wait",
                        fill=WAIT.fill,
                        on_fill="",
                        label="",
                        short="",
                        tip=f"{name} ({call['tool_call_id']}) waited "
                        f"{x['started_at'] - trip - dispatch:.3f} s for a slot, "
                        f"{dispatch:.3f} → {x['started_at'] - trip:.3f} s",
                        dim=dim,
                    )
                )
            if trip:
                out.append(
                    Item(
                        lane=lane,
                        t0=x["started_at"] - trip,
                        t1=x["started_at"],
                        kind="trip",
                        fill=TRIP.fill,
                        on_fill=TRIP.on_fill,
                        label="",
                        short="",
                        tip=f"client round trip before {name}: {trip:.3f} s",
                        dim=dim,
                    )
                )
            dur = x["ended_at"] - x["started_at"]
            out.append(
                Item(
                    lane=lane,
                    t0=x["started_at"],
                    t1=x["ended_at"],
                    kind="tool",
                    fill=st.fill,
                    on_fill=st.on_fill,
                    label=f"{name} {secs(dur)}",
                    short=secs(dur),
                    tip=f"{name} ({call['tool_call_id']}): {x['status']}, {dur:.3f} s, "
                    f"{x['started_at']:.3f} → {x['ended_at']:.3f} s" + _prov_note(x),
                    dim=dim,
                    provenance=_prov(x),
                    status=x["status"],
                )
            )
    return out


def _executions_by_position(r: dict[str, Any]) -> list[dict[str, Any] | None]:
    """The execution answering each call, by position (ids can repeat in a batch); a view built from
    events (executions in the order they finished) is matched by id instead, in order."""
    calls, execs = r["tool_calls"], r["tool_executions"]
    if len(execs) == len(calls) and all(
        x["tool_call_id"] == c["tool_call_id"] for x, c in zip(execs, calls, strict=True)
    ):
        return list(execs)
    by_id: dict[str, list[dict[str, Any]]] = {}
    for x in execs:
        by_id.setdefault(x["tool_call_id"], []).append(x)
    return [by_id[c["tool_call_id"]].pop(0) if by_id.get(c["tool_call_id"]) else None for c in calls]


def lane_names(rounds: Sequence[dict[str, Any]], n_lanes: int) -> list[tuple[str, str]]:
    """(name, tooltip) per lane: a lone round names lanes after its tools, a run by batch position."""
    names = [("model", "model calls, one per round")]
    if len(rounds) == 1:
        calls = rounds[0]["tool_calls"]
        names += [
            (c["name"], f"call {c['tool_call_id']} (position {i + 1} in the batch)")
            for i, c in enumerate(calls)
        ]
    else:
        names += [(f"call {i}", f"the call at position {i} of each round's batch") for i in range(1, n_lanes)]
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

    def frac(self, t: float) -> float:
        return min(max((t - self.t0) / self.span, 0.0), 1.0)

    def x(self, t: float) -> str:
        f = self.frac(t)
        return f"{f * 100:.3f}%" if self.offset is None else f"{self.offset + f * self.plot_px:.1f}"

    def w(self, t0: float, t1: float, min_px: float) -> str:
        f = max(self.frac(t1) - self.frac(t0), min_px / self.plot_px)
        return f"{f * 100:.3f}%" if self.offset is None else f"{f * self.plot_px:.1f}"

    def px(self, t0: float, t1: float) -> float:
        return (self.frac(t1) - self.frac(t0)) * self.plot_px


def _bars(items: Sequence[Item], axis: Axis, n_lanes: int) -> list[str]:
    parts: list[str] = []
    by_lane: dict[int, list[Item]] = {}
    for it in items:
        if it.kind != "wait":
            by_lane.setdefault(it.lane, []).append(it)
    neighbours: dict[int, tuple[Item | None, Item | None]] = {}
    for lane_items in by_lane.values():
        lane_items.sort(key=lambda i: (i.t0, i.t1))
        for k, it in enumerate(lane_items):
            before = next((o for o in reversed(lane_items[:k]) if o.t1 <= it.t0 + 1e-9), None) if k else None
            after = next((o for o in lane_items[k + 1 : k + 4] if o.t0 >= it.t1 - 1e-9), None)
            neighbours[id(it)] = (before, after)
    for it in items:
        y = it.lane * ROW + (ROW - BAR) / 2
        op = " opacity='0.35'" if it.dim else ""
        tip = f"<title>{e(it.tip)}</title>"
        if it.kind == "wait":
            parts.append(
                f"<rect class='tcl-bar-wait' x='{axis.x(it.t0)}' y='{y + BAR / 2 - 2}' "
                f"width='{axis.w(it.t0, it.t1, 1)}' height='4' fill='{it.fill}'{op}>{tip}</rect>"
            )
            continue
        if it.kind == "skipped":
            parts.append(
                f"<rect class='tcl-bar-skipped' x='{axis.x(it.t0)}' y='{y}' "
                f"width='{axis.w(it.t0, it.t0, 10)}' "
                f"height='{BAR}' fill='none' stroke='#9ca3af' stroke-dasharray='3 2'{op}>{tip}</rect>"
            )
            continue
        style = ""
        if it.provenance in ("estimated", "placeholder"):
            style = (
                " fill-opacity='0.6' stroke-dasharray='4 2'"
                if it.provenance == "estimated"
                else " fill-opacity='0.3' stroke-dasharray='2 2'"
            )
        parts.append(
            f"<rect class='tcl-bar tcl-bar-{it.kind}' data-provenance='{e(it.provenance)}' "
            f"x='{axis.x(it.t0)}' y='{y}' width='{axis.w(it.t0, it.t1, 2)}' height='{BAR}' rx='2' "
            f"fill='{it.fill}'{style}{op}>{tip}</rect>"
        )
        if it.kind not in ("model", "tool") or it.dim:
            continue  # dimmed bars carry no text: it would be unreadable
        label = place_label(it, *neighbours[id(it)], axis)
        if label:
            text, where = label
            ty = y + BAR - 3.5
            if where == "in":
                colour = it.on_fill if it.provenance not in ("estimated", "placeholder") else ""
                fill = f" style='fill:{colour}'" if colour else ""
                parts.append(
                    f"<text class='tcl-in' x='{axis.x(it.t0)}' dx='4' y='{ty}'{fill}{op}>{e(text)}</text>"
                )
            elif where == "right":
                parts.append(
                    f"<text class='tcl-out' x='{axis.x(it.t1)}' dx='4' y='{ty}'{op}>{e(text)}</text>"
                )
            else:
                parts.append(
                    f"<text class='tcl-out' x='{axis.x(it.t0)}' dx='-4' y='{ty}' text-anchor='end'{op}>"
                    f"{e(text)}</text>"
                )
    return parts


def place_label(it: Item, before: Item | None, after: Item | None, axis: Axis) -> tuple[str, str] | None:
    """Inside the bar if it fits, else beside it where the lane is free (up to the neighbouring bars
    `before` and `after`), else nothing (the tooltip still has it): a label is never cut."""
    width = axis.px(it.t0, it.t1)
    for text in (it.label, it.short):
        if len(text) * CHAR_PX + 8 <= width:
            return text, "in"
    right_free = axis.px(it.t1, after.t0 if after else axis.t0 + axis.span)
    left_free = axis.px(before.t1 if before else axis.t0, it.t0)
    for text in (it.label, it.short):
        need = len(text) * CHAR_PX + 10
        if need <= right_free:
            return text, "right"
        if need <= left_free:
            return text, "left"
    return None


def _ticks(axis: Axis, height: float, relative: bool) -> list[str]:
    out = []
    step = _tick_step(axis.span, axis.plot_px)
    n = int(axis.span / step + 1e-9)
    for k in range(n + 1):
        t = axis.t0 + k * step
        f = axis.frac(t)
        anchor = "start" if f < 0.04 else ("end" if f > 0.96 else "middle")
        value = k * step if relative else t
        text = f"{'+' if relative and k else ''}{value:.{_decimals(step)}f} s"
        out.append(
            f"<line class='tcl-gridline' x1='{axis.x(t)}' x2='{axis.x(t)}' y1='0' y2='{height - AXIS + 2}'/>"
            f"<text class='tcl-tick' x='{axis.x(t)}' y='{height - 4}' text-anchor='{anchor}'>{text}</text>"
        )
    return out


def _decimals(step: float) -> int:
    return 0 if step >= 1 else (1 if step >= 0.1 else (2 if step >= 0.01 else 3))


def _bounds(rounds: Sequence[dict[str, Any]], start: float | None, end: float | None) -> tuple[float, float]:
    t0 = min(r["response"]["started_at"] for r in rounds) if start is None else start
    t1 = max(round_end(r) for r in rounds) if end is None else end
    return t0, max(t1, t0 + 1e-3)


def legend_html(items: Sequence[Item]) -> str:
    """Swatch, icon and words for every kind of bar drawn (and nothing else)."""
    kinds = {it.kind for it in items}
    entries = [(MODEL.fill, "", MODEL.label, "")]
    statuses: list[str] = []
    for it in items:
        if it.kind == "tool" and it.status not in statuses:
            statuses.append(it.status)
    for s in statuses:
        st = status_style(s)
        entries.append((st.fill, st.icon, f"tool {st.label}", ""))
    if "trip" in kinds:
        entries.append((TRIP.fill, "", TRIP.label, ""))
    if "wait" in kinds:
        entries.append((WAIT.fill, "", WAIT.label, "height:4px"))
    if "skipped" in kinds:
        entries.append(("transparent", "", "skipped call (dashed)", "border:1px dashed #9ca3af"))
    provs = {it.provenance for it in items} - {"recorded"}
    for p in sorted(provs):
        extra = "opacity:.6;border:1px dashed currentColor" if p == "estimated" else "opacity:.3"
        entries.append((MODEL.fill, "", f"{p} timing (faded, dashed): {PROVENANCE_NOTE.get(p, p)}", extra))
    spans = "".join(
        f"<span><span class='tcl-swatch' style='background:{fill};{extra}'></span>"
        f"{f'{icon} ' if icon else ''}{e(text)}</span>"
        for fill, icon, text, extra in entries
    )
    return f"<div class='tcl-legend' aria-label='legend'>{spans}</div>"


def timeline_svg(
    rounds: Sequence[dict[str, Any]],
    *,
    start: float | None = None,
    end: float | None = None,
    highlight: int | None = None,
    round_trip_s: float = 0.0,
    relative: bool = False,
    legend: bool = True,
    min_px: int = 420,
    title: str = "",
) -> str:
    """A timeline that fills its container: lane names, bars, time axis and legend (HTML + SVG).

    Pass `start`/`end` to share one axis between several timelines; `relative` labels ticks from
    `start`. `min_px` is the narrowest plot the labels are laid out for (the timeline scrolls
    rather than spill when its container is narrower).
    """
    if not rounds:
        return "<div class='tcl-tl tcl-muted'>(no rounds)</div>"
    t0, t1 = _bounds(rounds, start, end)
    axis = Axis(t0, t1, float(min_px), None)
    items = items_of(rounds, round_trip_s=round_trip_s, highlight=highlight)
    n_lanes = 1 + max((len(r["tool_calls"]) for r in rounds), default=0)
    height = n_lanes * ROW + AXIS
    names = "".join(
        f"<div class='tcl-lane' title='{e(tip)}'>{e(name)}</div>" for name, tip in lane_names(rounds, n_lanes)
    )
    n_calls = sum(len(r["tool_calls"]) for r in rounds)
    summary = title or f"Timeline of {len(rounds)} round(s), {n_calls} tool call(s), {t0:.2f} to {t1:.2f} s"
    svg = (
        f"<svg class='tcl-timeline' role='img' aria-label='{e(summary)}' height='{height}' "
        f"style='min-width:{min_px}px' xmlns='http://www.w3.org/2000/svg'><title>{e(summary)}</title>"
        f"{''.join(_ticks(axis, height, relative))}{''.join(_bars(items, axis, n_lanes))}</svg>"
    )
    return (
        f"<div class='tcl-tl'><div class='tcl-scroll'><div class='tcl-tl-grid'><div class='tcl-lanes'>"
        f"{names}</div>{svg}</div></div>{legend_html(items) if legend else ''}</div>"
    )


def timeline_file(
    panels: Sequence[tuple[str, Sequence[dict[str, Any]]]],
    *,
    round_trip_s: float = 0.0,
    width: int = 960,
) -> str:
    """A standalone SVG document: one titled panel per run, all on one time axis (for saving)."""
    panels = [(name, rounds) for name, rounds in panels if rounds]
    if not panels:
        return "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'></svg>"
    t0 = min(_bounds(r, None, None)[0] for _, r in panels)
    t1 = max(_bounds(r, None, None)[1] for _, r in panels)
    all_names = [n for _, r in panels for n, _ in lane_names(r, 1 + max(len(x["tool_calls"]) for x in r))]
    label_px = min(160, 12 + CHAR_PX * max(len(n) for n in all_names))
    axis = Axis(t0, t1, width - label_px - 16, label_px)
    parts, y = [], 0.0
    for name, rounds in panels:
        n_lanes = 1 + max(len(r["tool_calls"]) for r in rounds)
        items = items_of(rounds, round_trip_s=round_trip_s)
        height = n_lanes * ROW + AXIS
        lanes = "".join(
            f"<text x='4' y='{i * ROW + ROW - 6}'>{e(n)}</text>"
            for i, (n, _) in enumerate(lane_names(rounds, n_lanes))
        )
        parts.append(
            f"<text x='4' y='{y + 14}' style='font-weight:600;font-size:13px'>{e(name)}</text>"
            f"<g transform='translate(0,{y + 20})'>{lanes}{''.join(_ticks(axis, height, False))}"
            f"{''.join(_bars(items, axis, n_lanes))}</g>"
        )
        y += height + 28
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{y:.0f}' "
        f"viewBox='0 0 {width} {y:.0f}'><title>{e(' / '.join(n for n, _ in panels))}</title>"
        f"{SVG_FILE_STYLE}<rect width='100%' height='100%' fill='#ffffff'/>{''.join(parts)}</svg>"
    )

"""What a timeline draws, in words: its legend, and its bars as a table with exact times (for
keyboards and screen readers, which cannot reach an SVG's tooltips)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from toolcall_lab.notebook.theme import (
    BAND,
    MODEL,
    PROVENANCE_NOTE,
    SKIPPED_STROKE,
    TRIP,
    WAIT,
    e,
    exact,
    status_style,
)


class Item(Protocol):
    """A drawn bar as the legend and the table read it (a timeline `Item`)."""

    lane: int
    t0: float
    t1: float
    kind: str
    status: str
    provenance: str
    round_index: int
    what: str


def legend_entries(items: Sequence[Item], *, band: bool = False) -> list[tuple[str, str, str, str]]:
    """(swatch colour, icon, words, extra swatch style) for every kind of bar drawn, and nothing else."""
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
        entries.append((TRIP.fill, TRIP.icon, TRIP.label, ""))
    if "wait" in kinds:
        entries.append((WAIT.fill, WAIT.icon, WAIT.label, "height:4px"))
    if "skipped" in kinds:
        entries.append(
            ("transparent", "", "skipped call (dashed box)", f"border:1px dashed {SKIPPED_STROKE}")
        )
    provs = {it.provenance for it in items if it.kind != "skipped"} - {"recorded", "reported"}
    for p in sorted(provs):
        extra = (
            f"opacity:.55;border:1.5px dashed {MODEL.fill}"
            if p == "estimated"
            else f"background:transparent;border:1.5px dotted {MODEL.fill}"
        )
        shape = "pale, dashed outline" if p == "estimated" else "faint, dotted outline"
        entries.append((MODEL.fill, "", f"{PROVENANCE_NOTE.get(p, p)} ({shape})", extra))
    if band:
        entries.append((BAND, "", "selected round (shaded)", "opacity:.35"))
    return entries


def legend_html(items: Sequence[Item], *, band: bool = False) -> str:
    spans = "".join(
        f"<span><span class='tcl-swatch' style='background:{fill};{extra}'></span>"
        f"{f'{icon} ' if icon else ''}{e(text)}</span>"
        for fill, icon, text, extra in legend_entries(items, band=band)
    )
    return f"<div class='tcl-legend' aria-label='legend'>{spans}</div>"


def bars_table(items: Sequence[Item], names: Sequence[tuple[str, str]], *, open_: bool = False) -> str:
    """The bars as a table with exact times: what the tooltips say, reachable by keyboard and by
    screen readers (an SVG with role='img' hides its children's titles)."""
    kinds = {"model": "model call", "tool": "tool", "trip": "client round trip", "wait": "waiting for a slot"}
    rows = "".join(
        f"<tr><td>{it.round_index}</td>"
        f"<td class='tcl-left'>{e(names[it.lane][0] if it.lane < len(names) else it.lane)}</td>"
        f"<td class='tcl-left'>{e(kinds.get(it.kind, it.kind))}</td><td class='tcl-left'>{e(it.what)}</td>"
        f"<td class='tcl-left'>{e(status_style(it.status).icon + ' ' + it.status if it.status else '')}</td>"
        + (
            "<td>—</td><td>—</td><td>—</td><td class='tcl-left'>never ran</td>"
            if it.kind == "skipped"
            else f"<td>{exact(it.t0)}</td><td>{exact(it.t1)}</td><td>{exact(it.t1 - it.t0)}</td>"
            f"<td class='tcl-left'>{e(it.provenance)}</td>"
        )
        + "</tr>"
        for it in items
    )
    return (
        f"<details class='tcl-bars'{' open' if open_ else ''}><summary>the bars as a table "
        f"({len(items)} rows, exact times)</summary><div class='tcl-scroll'><table class='tcl-table'><tr>"
        "<th>round</th><th class='tcl-left'>lane</th><th class='tcl-left'>bar</th>"
        "<th class='tcl-left'>of</th>"
        "<th class='tcl-left'>status</th><th>start s</th><th>end s</th><th>duration s</th>"
        f"<th class='tcl-left'>timing</th></tr>{rows}</table></div></details>"
    )

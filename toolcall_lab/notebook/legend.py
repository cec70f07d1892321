"""What a timeline draws, in words: its legend, and its bars as a table with exact times (for
keyboards and screen readers, which cannot reach an SVG's tooltips)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from toolcall_lab.notebook.theme import (
    BAND,
    MODEL,
    PROVENANCE_NOTE,
    SKIPPED_STROKE,
    SUMMARY,
    TRIP,
    WAIT,
    e,
    exact,
    plural,
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


class Swatch(NamedTuple):
    """One legend entry: how its bars are drawn and what they are. One description, drawn three
    ways (CSS in a page, SVG in a saved file, a matplotlib patch in a figure), so a view and its
    exports say the same."""

    fill: str
    """The bar's colour ("none": an outline only)."""
    icon: str
    text: str
    stroke: str = ""
    """Outline colour ("" for none)."""
    dash: str = ""
    """The outline's pattern: "", "dashed" or "dotted"."""
    opacity: float = 1.0
    """Of the fill (a faint bar: estimated or placeholder timing)."""
    thin: bool = False
    """A thin bar (waiting for a slot)."""

    @property
    def label(self) -> str:
        return f"{self.icon} {self.text}".strip()

    def css(self) -> str:
        """The swatch's inline style in a page."""
        parts = [f"background:{self.fill if self.fill != 'none' else 'transparent'}"]
        if self.stroke:
            parts.append(f"border:1.5px {self.dash or 'solid'} {self.stroke}")
        if self.opacity < 1 and self.fill.startswith("#") and len(self.fill) == 7:
            # the fill faint, the outline at full strength (as the bars are drawn)
            r, g, b = (int(self.fill[k : k + 2], 16) for k in (1, 3, 5))
            parts[0] = f"background:rgba({r},{g},{b},{self.opacity:g})"
        if self.thin:
            parts.append("height:4px")
        return ";".join(parts)

    def svg(self, x: float, y: float) -> str:
        """The swatch as a 14 x 10 SVG rect at (x, y) (a saved file)."""
        height, top = (4, y + 3) if self.thin else (10, y)
        attrs = f"fill='{self.fill}'"
        if self.opacity < 1:
            attrs += f" fill-opacity='{self.opacity}'"
        if self.stroke:
            dash = {"dashed": "3 2", "dotted": "2 2"}.get(self.dash, "")
            attrs += f" stroke='{self.stroke}' stroke-width='1.5'" + (
                f" stroke-dasharray='{dash}'" if dash else ""
            )
        return f"<rect x='{x:.0f}' y='{top:.0f}' width='14' height='{height}' {attrs}/>"


def legend_entries(items: Sequence[Item], *, band: bool = False) -> list[Swatch]:
    """A swatch for every kind of bar drawn, and nothing else."""
    kinds = {it.kind for it in items}
    entries = [Swatch(MODEL.fill, "", MODEL.label)]
    statuses: list[str] = []
    for it in items:
        if it.kind == "tool" and it.status not in statuses:
            statuses.append(it.status)
    for s in statuses:
        st = status_style(s)
        entries.append(Swatch(st.fill, st.icon, f"tool {st.label}"))
    if "trip" in kinds:
        entries.append(Swatch(TRIP.fill, TRIP.icon, TRIP.label))
    if "wait" in kinds:
        entries.append(Swatch(WAIT.fill, "", WAIT.label, thin=True))
    if "skipped" in kinds:
        entries.append(Swatch("none", "", "skipped call (dashed box)", SKIPPED_STROKE, "dashed"))
    provs = {it.provenance for it in items if it.kind != "skipped"} - {"recorded", "reported"}
    for p in sorted(provs):
        estimated = p == "estimated"
        shape = "pale, dashed outline" if estimated else "faint, dotted outline"
        entries.append(
            Swatch(
                MODEL.fill,
                "",
                f"{PROVENANCE_NOTE.get(p, p)} ({shape})",
                MODEL.fill,
                "dashed" if estimated else "dotted",
                0.55 if estimated else 0.2,
            )
        )
    if band:
        entries.append(Swatch(BAND, "", "selected round (shaded)", opacity=0.35))
    return entries


def legend_html(items: Sequence[Item], *, band: bool = False) -> str:
    spans = "".join(
        f"<span><span class='tcl-swatch' style='{sw.css()}'></span>{e(sw.label)}</span>"
        for sw in legend_entries(items, band=band)
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
        f"<details class='tcl-bars'{' open' if open_ else ''}>{SUMMARY}the bars as a table "
        f"({plural(len(items), 'row')}, exact times)</summary><div class='tcl-scroll'>"
        "<table class='tcl-table'><tr>"
        "<th>round</th><th class='tcl-left'>lane</th><th class='tcl-left'>bar</th>"
        "<th class='tcl-left'>of</th>"
        "<th class='tcl-left'>status</th><th>start s</th><th>end s</th><th>duration s</th>"
        f"<th class='tcl-left'>timing</th></tr>{rows}</table></div></details>"
    )

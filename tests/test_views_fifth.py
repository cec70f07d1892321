"""Views, fifth pass (issue 15): forced colours, what a corpus folder holds besides traces, the
stream stepper's edges (an empty file, a stream a provider error broke off, a saved page of one
stream), round-trip marks that no longer push a label out of its bar, CJK text in figures, the
live view's round titles and wall time, and clock ticks that fall where they say."""

from __future__ import annotations

import re

import pytest

from toolcall_lab.notebook.theme import CSS
from toolcall_lab.notebook.timeline import Axis, drawn_px, items_of, lay_out, text_px, timeline_svg
from toolcall_lab.notebook.widgets import as_doc
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import SCENARIOS

# --- timelines ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("round_trip_s", [0.005, 0.02])
def test_a_client_round_trip_mark_never_pushes_a_label_out_of_its_bar(round_trip_s: float) -> None:
    """Serialized mode draws the round trip that hands a call out right before it; drawn at its
    2 px minimum it reached into the call's bar, and a label that fits inside went beside it."""
    trace = SCENARIOS["straggler"].record()
    rounds = as_doc(replay(trace, "serialized", round_trip_s=round_trip_s))["rounds"]
    items = items_of(rounds)
    assert any(it.kind == "trip" for it in items)
    checked = 0
    for px in (420.0, 560.0, 840.0):
        axis = Axis(min(r["response"]["started_at"] for r in rounds), 4.5, px, None)
        layout = lay_out(items, axis, [px])
        for it in items:
            x0, x1 = drawn_px(it, axis, px)
            if it.kind == "tool" and text_px(it.label) + 8 <= x1 - x0:
                checked += 1
                assert layout[id(it)] == [(it.label, "in")], (px, it.label, layout[id(it)])
    assert checked >= 3


def test_clock_ticks_fall_on_the_times_they_name() -> None:
    """A whole-run axis starting at 0.0148 s had ticks labelled "0.06 s" drawn at 0.0648 s."""
    rounds = as_doc(replay(SCENARIOS["three_tools_100ms"].record(), "sequential"))["rounds"]
    shift = 0.0148
    for r in rounds:
        for block in (r["response"], *r["tool_executions"]):
            block["started_at"] += shift
            block["ended_at"] += shift
    svg = timeline_svg(rounds, min_px=420)
    ticks = re.findall(r"<line class='tcl-gridline' x1='([\d.]+)%'.*?class='tcl-tick'[^>]*>([\d.]+) s<", svg)
    assert len(ticks) >= 3
    t0 = rounds[0]["response"]["started_at"]
    t1 = max(x["ended_at"] for r in rounds for x in [r["response"], *r["tool_executions"]])
    for x, label in ticks:
        at = t0 + float(x) / 100 * (t1 - t0)
        assert abs(at - float(label)) < 1e-3 * (t1 - t0) + 1e-6, (label, at)


# --- forced colours --------------------------------------------------------------------------------


def test_forced_colours_keep_the_timeline_palette_and_give_its_text_the_system_colour() -> None:
    """Windows high contrast forces page colours but leaves SVG fills alone: the timeline's text
    must take the system's text colour (it stayed dark on the forced black page), and the legend's
    swatches and status icons must keep their colours (forced backgrounds painted them over). The
    browser check (tests/test_browser.py, forced colours + dark) measures the result."""
    block = CSS[CSS.index("@media (forced-colors:active)") :]
    block = block[: block.index("\n}\n")]
    assert "--tcl-fg:CanvasText" in block and "--tcl-bg:Canvas" in block
    adjusted = re.search(r"([^{}]+)\{\s*forced-color-adjust:none\}", block)
    assert adjusted is not None
    for kept in (".tcl svg.tcl-timeline", ".tcl .tcl-swatch", ".tcl .tcl-icon", ".tcl .tcl-added"):
        assert kept in adjusted.group(1)
    # the timeline's text is drawn in the variable the block sets (not a fixed colour)
    assert ".tcl svg.tcl-timeline text{fill:var(--tcl-fg)" in CSS

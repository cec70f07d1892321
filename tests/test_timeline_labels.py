"""Timeline labels never overlap or touch, at every container width the page layout supports.

The check reads the SVG the views emit (what a browser shows: labels always visible plus those of
the width range in question), turns each text into a pixel box with the layout's own font metrics,
and asserts that on every lane any two labels keep `GAP` apart and no label crosses another bar.
"""

from __future__ import annotations

import itertools
import re

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab.notebook.timeline import (
    GAP,
    ROW,
    Axis,
    Item,
    label_boxes,
    lay_out,
    layout_widths,
    text_px,
    timeline_svg,
)
from toolcall_lab.notebook.widgets import as_doc
from toolcall_lab.records import MODES
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import SCENARIOS

CLAUDE = (
    REALDATA
    / "claude-code-viewer"
    / "claude-code_v1.0.98_sonnet-4_session-fe5e1c67_170calls_sidechains_parallel2+3+2.jsonl"
)
TEXT = re.compile(
    r"<text class='(tcl-(?:in|out)[^']*)' x='([\d.]+)%' dx='(-?\d+)' y='([\d.]+)'( text-anchor='end')?[^>]*>"
    r"([^<]*)<"
)
RECT = re.compile(r"<rect class='(tcl-bar[^']*)'[^>]* x='([\d.]+)%' y='([\d.]+)' width='([\d.]+)%'")


def widths_of(min_px: int) -> list[float]:
    return layout_widths(min_px)


def drawn(svg: str, k: int, px: float) -> tuple[list[tuple[int, float, float, str, str]], list[tuple]]:
    """Labels shown in width range `k` and bars, as pixel boxes in a plot `px` wide."""
    from html import unescape

    labels = []
    for cls, x, dx, y, end, text in TEXT.findall(svg):
        if "tcl-lbl" in cls and f"tcl-r{k}" not in cls.split():
            continue
        text = unescape(text)
        at = float(x) / 100 * px + int(dx)
        w = text_px(text)
        a, b = (at - w, at) if end else (at, at + w)
        labels.append((int(float(y) // ROW), a, b, text, cls.split()[0]))
    bars = [
        (int(float(y) // ROW), float(x) / 100 * px, (float(x) + float(w)) / 100 * px, cls)
        for cls, x, y, w in RECT.findall(svg)
    ]
    return labels, bars


def assert_apart(svg: str, min_px: int) -> int:
    """Every width range, at both ends of the range: no two labels on a lane closer than GAP, no
    label over another bar. Returns how many labels were checked (so a test cannot pass empty)."""
    widths = widths_of(min_px)
    checked = 0
    for k, low in enumerate(widths):
        high = widths[k + 1] - 1 if k + 1 < len(widths) and widths[k + 1] > low else low * 1.5
        for px in (low, high):
            labels, bars = drawn(svg, k, px)
            checked += len(labels)
            lanes: dict[int, list[tuple[float, float, str]]] = {}
            for lane, a, b, text, _ in labels:
                lanes.setdefault(lane, []).append((a, b, text))
                assert a >= -0.5 and b <= px + 0.5, f"{text!r} leaves the plot at {px} px"
            for lane, boxes in lanes.items():
                boxes.sort()
                for (_a0, b0, t0), (a1, _b1, t1) in itertools.pairwise(boxes):
                    assert a1 - b0 >= GAP - 0.01, (
                        f"lane {lane}, {px:.0f} px (range {k}): {t0!r} and {t1!r} "
                        f"{'overlap' if a1 < b0 else 'touch'} ({a1 - b0:.1f} px apart)"
                    )
            for lane, a, b, text, cls in labels:
                for bar_lane, x0, x1, _ in bars:
                    if bar_lane != lane or x1 <= a or x0 >= b:
                        continue
                    inside_own = cls == "tcl-in" and x0 <= a and b <= x1
                    assert inside_own, (
                        f"{text!r} ({cls} {a:.1f}-{b:.1f}) crosses a bar {x0:.1f}-{x1:.1f} {_} on lane {lane} at {px:.0f} px"
                    )
    return checked


@needs_realdata
@pytest.mark.parametrize("min_px", [200, 260, 420, 480])
def test_claude_code_labels_never_touch_at_any_width(min_px: int) -> None:
    from toolcall_lab.importers import import_source

    trace = import_source("claude-code", CLAUDE).traces[0]
    rounds = [trace.to_dict()["rounds"]] + [as_doc(replay(trace, mode))["rounds"] for mode in MODES]
    end = max(r["response"]["ended_at"] for doc in rounds for r in doc) * 1.05
    checked = 0
    for doc in rounds:  # CompareView: all modes on one axis; TraceView: the whole run
        checked += assert_apart(timeline_svg(doc, start=0.0, end=end, min_px=min_px), min_px)
        checked += assert_apart(timeline_svg(doc, min_px=min_px), min_px)
    assert checked > 100


def dense_lane(n: int, seed: int) -> list[Item]:
    """Bars of every size packed on two lanes, with long names: labels compete for the same room."""
    import random

    rng = random.Random(seed)
    out, t = [], 0.0
    for _i in range(n):
        dur = rng.choice([0.0005, 0.004, 0.02, 0.05, 0.2, 1.0])
        name = rng.choice(["Bash", "TodoWrite", "get_weather_forecast", "x"])
        for lane in (0, 1):
            out.append(
                Item(
                    lane=lane,
                    t0=t,
                    t1=t + dur,
                    kind="model" if lane == 0 else "tool",
                    fill="#000",
                    on_fill="#fff",
                    label=f"{name} {dur * 1000:.0f} ms",
                    short=f"{dur * 1000:.0f} ms",
                    tip="",
                )
            )
        t += dur + rng.choice([0.0, 0.0, 0.001, 0.01, 0.1])
    return out


@pytest.mark.parametrize("seed", range(6))
def test_dense_synthetic_lanes_keep_labels_apart(seed: int) -> None:
    items = dense_lane(60, seed)
    t1 = max(i.t1 for i in items)
    shown = 0
    for px in (260.0, 420.0, 560.0, 840.0, 1120.0, 3000.0):
        axis = Axis(0.0, t1, px, None)
        boxes = label_boxes(items, axis, px)
        shown += len(boxes)
        for lane in (0, 1):
            spans = sorted((a, b, t) for ln, a, b, t in boxes if ln == lane)
            for (_, b0, t0), (a1, _, t1_) in itertools.pairwise(spans):
                assert a1 - b0 >= GAP, (t0, t1_, a1 - b0)
    assert shown > 20
    # and the SVG a page gets holds the same promise at every range
    rounds_free = timeline_svg(SCENARIOS["weather_news_stock"].record().to_dict()["rounds"], min_px=260)
    assert assert_apart(rounds_free, 260) > 0


def test_the_tool_name_is_shown_when_it_fits_beside_the_bar() -> None:
    """A bar too short for "get_news 500 ms" inside gets the whole label beside it when the lane has
    room there, not the bare duration inside."""
    items = [
        Item(
            lane=1,
            t0=0.0,
            t1=0.5,
            kind="tool",
            fill="#000",
            on_fill="#fff",
            label="get_news 500 ms",
            short="500 ms",
            tip="",
        ),
    ]
    axis = Axis(0.0, 4.0, 800.0, None)
    assert lay_out(items, axis, [800.0])[id(items[0])] == [("get_news 500 ms", "right")]


def test_labels_that_would_touch_are_dropped_not_drawn_over_each_other() -> None:
    """Two short bars a few pixels apart: one label beside each would collide, so one goes."""
    mk = lambda t0, t1, name: Item(  # noqa: E731
        lane=0,
        t0=t0,
        t1=t1,
        kind="model",
        fill="#000",
        on_fill="#fff",
        label=f"model {name}",
        short=name,
        tip="",
    )
    items = [mk(0.0, 0.01, "12.5 s"), mk(0.02, 0.03, "4.69 s"), mk(0.04, 0.05, "9.35 s")]
    axis = Axis(0.0, 1.0, 900.0, None)
    placed = lay_out(items, axis, [900.0])
    shown = [p for ps in placed.values() for p in ps if p]
    assert 1 <= len(shown) < 3
    boxes = sorted(label_boxes(items, axis, 900.0))
    for (_, _, b0, _), (_, a1, _, _) in itertools.pairwise(boxes):
        assert a1 - b0 >= GAP

"""Views, fifth pass (issue 15): forced colours, what a corpus folder holds besides traces, the
stream stepper's edges (an empty file, a stream a provider error broke off, a saved page of one
stream), round-trip marks that no longer push a label out of its bar, CJK text in figures, the
live view's round titles and wall time, and clock ticks that fall where they say."""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from pathlib import Path

import pytest

from tests.conftest import DATA, REPO
from tests.test_widgets import visible_text
from toolcall_lab.exceptions import WireFormatError
from toolcall_lab.notebook.theme import CSS
from toolcall_lab.notebook.timeline import Axis, drawn_px, items_of, lay_out, text_px, timeline_svg
from toolcall_lab.notebook.widgets import CorpusView, LiveView, StreamStepper, TraceView, as_doc
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


# --- CorpusView: every file of the folder is accounted for ----------------------------------------


@pytest.fixture
def mixed_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    (folder / "sub").mkdir(parents=True)
    for name in ("one_tool_round", "straggler"):
        (folder / f"{name}.json").write_bytes((DATA / "traces" / f"{name}.json").read_bytes())
    (folder / "notes.json").write_text('{"title": "my notes", "items": [1, 2]}\n')
    (folder / "sub" / "session.jsonl").write_text(
        '{"type": "user", "sessionId": "s1", "uuid": "u1", "message": {"role": "user", "content": "hi"}}\n'
    )
    (folder / "weather.sse").write_bytes(
        (DATA / "recordings" / "scripted_weather_news_stock.sse").read_bytes()
    )
    (folder / ".hidden.jsonl").write_text("{}\n")
    return folder


def test_corpus_view_names_every_file_of_the_folder_it_did_not_read(mixed_folder: Path) -> None:
    view = CorpusView(mixed_folder, ["sequential", "parallel"])
    told = visible_text(view.message.value)
    assert "of 3 traces compared" in told and "2 files of the folder not read" in told
    problems = visible_text(view.problems.value)
    assert "sub/session.jsonl: not a trace file: it looks like claude-code" in problems
    assert (
        f"toolcall-lab import claude-code {mixed_folder / 'sub' / 'session.jsonl'} --out traces/" in problems
    )
    assert "weather.sse: not a trace file: it looks like recording" in problems
    assert ".hidden" not in problems  # hidden files are not the user's data
    # the static copy (and a saved page) says the same
    assert "sub/session.jsonl" in visible_text(view.static_html())


def test_a_json_file_that_is_not_a_trace_says_to_import_it(mixed_folder: Path) -> None:
    view = CorpusView(mixed_folder, ["sequential"])
    problems = visible_text(view.problems.value)
    assert "could not compare 1" in problems and "notes.json" in problems
    assert "1 of these is not a trace file: import them first (`toolcall-lab import KIND FILE" in problems
    row = next(r for r in re.findall(r"<tr[^>]*>(.*?)</tr>", view.problems.value) if "notes.json" in r)
    assert "not a trace file, and no import kind recognises it" in visible_text(row)
    assert "open one from the file box of a TraceView or CompareView" in problems


def test_a_folder_with_no_trace_file_still_lists_what_it_holds(mixed_folder: Path) -> None:
    view = CorpusView(mixed_folder / "sub")
    assert "no trace files (*.json)" in visible_text(view.message.value)
    assert "session.jsonl: not a trace file: it looks like claude-code" in visible_text(view.problems.value)
    assert "session.jsonl" in visible_text(view.static_html())


def test_the_readme_names_the_views_that_have_a_file_box() -> None:
    """The README's file-box paragraph names exactly the views that have one."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    said = re.search(r"\*\*File box\*\* \(([^)]*)\)", readme)
    assert said is not None
    have = {
        name
        for name, view in {
            "TraceView": TraceView(),
            "CompareView": __import__(
                "toolcall_lab.notebook.compare", fromlist=["CompareView"]
            ).CompareView(),
            "CorpusView": CorpusView(),
            "LiveView": LiveView(),
        }.items()
        if hasattr(view, "open_box")
    }
    named = set(re.findall(r"[A-Z][a-z]+View", said.group(1).split(";")[0]))
    assert named == have == {"TraceView", "CompareView"}


# --- opening a folder as traces ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["detect", "trace"])
def test_a_folder_opens_as_traces_when_one_json_in_it_is_not_a_trace(mixed_folder: Path, kind: str) -> None:
    """One `.json` that is not a trace made the whole folder fail to open as `trace`; it costs only
    itself now, named with its error (as `compare` and CorpusView do)."""
    from toolcall_lab.notebook.loading import open_source, report_html

    (mixed_folder / "third.json").write_bytes((DATA / "traces" / "duplicate_call.json").read_bytes())
    opened = open_source(mixed_folder, kind)  # detected: the traces outvote the other kinds
    assert opened.kind == "trace" and len(opened.traces) == 3
    notes = [x for x in opened.left_out if x.startswith("notes.json")]
    assert len(notes) == 1 and "not read as a trace: no schema_version" in notes[0]
    assert any(x.startswith("weather.sse") for x in opened.left_out)
    shown = visible_text(report_html(opened))
    assert (
        shown.startswith("✔ opened runs as trace: 3 traces")
        and "⚠ 3 file(s) of the folder were not read" in shown
    )
    assert "notes.json" in shown


def test_a_folder_of_nothing_but_broken_traces_says_why(tmp_path: Path) -> None:
    from toolcall_lab.exceptions import TraceError
    from toolcall_lab.notebook.loading import open_source

    (tmp_path / "a.json").write_text('{"rounds": [], "schema_version": 99}')
    with pytest.raises(TraceError, match=r"no trace files in it that load \(a\.json: schema_version 99"):
        open_source(tmp_path, "trace")


# --- the stream stepper's edges ---------------------------------------------------------------------


def test_an_empty_file_says_it_is_empty(tmp_path: Path) -> None:
    (tmp_path / "empty.sse").write_bytes(b"")
    with pytest.raises(WireFormatError, match=r"empty\.sse: the file is empty \(0 bytes\)"):
        StreamStepper(tmp_path / "empty.sse")
    (tmp_path / "done.sse").write_text("\n: keep-alive\n\ndata: [DONE]\n\n")
    with pytest.raises(
        WireFormatError, match=r"done\.sse: no chunks to step through: the file holds no payloads"
    ):
        StreamStepper(tmp_path / "done.sse")


BROKEN = (
    'data: {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": '
    '"assistant", "content": "Looking."}}]}\n\n'
    'data: {"error": {"message": "upstream overloaded", "type": "server_error", "code": 529}}\n\n'
)


def test_the_last_step_after_a_provider_error_says_the_stream_broke_off(tmp_path: Path) -> None:
    (tmp_path / "broken.sse").write_text(BROKEN)
    stepper = StreamStepper(tmp_path / "broken.sse")
    stepper.step = stepper.last_step
    shown = " ".join(visible_text(stepper.view.value.split("<textarea")[0]).split())
    frame = " ".join(visible_text(stepper.view.value.split("</textarea>")[1]).split())
    assert "the stream ends in a provider error" in shown
    assert frame.startswith("after the provider error at chunk 1: finish() (2 chunks)")
    assert "the stream did not end normally: the provider reported an error at chunk 1" in frame
    assert "no tool calls" in frame and "no tool calls yet" not in frame and "end of stream" not in frame
    data = json.loads(stepper.states.data())  # the page's script shows the same heading
    assert data["s"][-1]["t"] == "after the provider error at chunk 1: finish() (2 chunks)"
    clean = StreamStepper(DATA / "recordings" / "scripted_weather_news_stock.sse")
    assert json.loads(clean.states.data())["s"][-1]["t"].startswith("after the last chunk: finish()")


def _responses(rid: str) -> str:
    events = [
        {"type": "response.created", "response": {"id": rid, "status": "in_progress", "output": []}},
        {"type": "response.completed", "response": {"id": rid, "status": "completed", "output": []}},
    ]
    return "".join(f"event: {ev['type']}\ndata: {json.dumps(ev)}\n\n" for ev in events)


def test_a_saved_stepper_page_says_it_holds_one_stream(tmp_path: Path) -> None:
    (tmp_path / "two.sse").write_text(_responses("resp_1") + _responses("resp_2"))
    stepper = StreamStepper(tmp_path / "two.sse")
    assert len(stepper.streams) == 2
    widget = visible_text(stepper.view.value.split("<textarea")[0])
    assert "(choose another above)" in widget
    page = stepper.save_html(tmp_path / "page.html").read_text(encoding="utf-8")
    text = visible_text(page.split("<textarea")[0])
    assert "this page holds this one stream only" in text and "choose another above" not in text
    assert "StreamStepper(path, stream=k)" in text


# --- LiveView -----------------------------------------------------------------------------------------


def test_live_view_round_titles_name_no_mode_it_was_not_told_and_give_the_wall_time() -> None:
    from toolcall_lab.loop import run

    live = LiveView("no mode given")
    s = SCENARIOS["three_tools_100ms"]
    result = asyncio.run(run(s.model(), s.registry(), s.prompt, mode="sequential", on_event=live.on_event))
    text = visible_text(live.html())
    # (at the end the view draws the run's record, which names the mode the rounds ran under)
    assert "Round 0 · sequential · 3 calls" in text and "?" not in text
    assert f"wall {result.wall_time_s * 1000:.0f} ms" in text or "wall 0." in text
    told = LiveView("told", mode="sequential")
    asyncio.run(run(s.model(), s.registry(), s.prompt, mode="sequential", on_event=told.on_event))
    assert "Round 0 · sequential · 3 calls" in visible_text(told.html())


# --- CJK text in figures -------------------------------------------------------------------------------


def _cjk_rounds() -> list[dict]:
    doc = SCENARIOS["weather_news_stock"].record().to_dict()
    for r in doc["rounds"]:
        for block in (*r["tool_calls"], *r["tool_executions"]):
            block["name"] = "天気_" + block["name"]
    return doc["rounds"]


def test_cjk_text_no_installed_font_has_is_said_once_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolcall_lab import plotting

    monkeypatch.setattr(plotting, "fallback_fonts", lambda: ())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plotting.timeline_figure([("実行", _cjk_rounds())], suptitle="天気", show=False).savefig(
            __import__("io").BytesIO(), format="png"
        )
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages  # not one matplotlib warning per glyph
    assert "character(s) of this figure's text (天気実行)" in messages[0]
    assert "apt-get install fonts-noto-cjk" in messages[0]


def test_cjk_text_uses_an_installed_cjk_font() -> None:
    from toolcall_lab import plotting

    if not plotting.fallback_fonts():
        pytest.skip("no CJK font installed here (e.g. apt-get install fonts-noto-cjk)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no glyph is missing
        plotting.timeline_figure([("実行", _cjk_rounds())], suptitle="天気", show=False).savefig(
            __import__("io").BytesIO(), format="png"
        )


def test_the_file_box_hint_reads_whole_at_a_projectors_width() -> None:
    """The path box's placeholder was cut ("...a transcript or a f") in a 1280 px window: it is
    short enough for the box (about 45 characters at 13 px), the details are in its tooltip."""
    box = TraceView().open_box.path
    assert len(box.placeholder) <= 45 and "Enter" in box.placeholder
    assert "recording" in box.tooltip and "transcript" in box.tooltip


def test_summary_ratios_have_two_places_like_the_runs_they_summarise() -> None:
    """`readable(table.summary)` showed median_speedup_vs_sequential as ``1`` beside ``1.23`` and
    median_efficiency as ``1`` beside ``0.81``: a summary's median of a ratio is a ratio."""
    import pandas as pd

    from toolcall_lab.notebook.tables import readable

    summary = pd.DataFrame(
        {
            "median_speedup_vs_sequential": [1.0, 1.234],
            "median_efficiency": [1.0, 0.81],
            "median_measured_share": [0.0, 0.5],
            "share_comparable": [1.0, 0.071],
            "median_wall_s": [5.709, 4.5],
            "traces": [211, 211],
        }
    )
    shown = readable(summary).to_dict("list")
    assert shown["median_speedup_vs_sequential"] == ["1.00", "1.23"]
    assert shown["median_efficiency"] == ["1.00", "0.81"]
    assert shown["median_measured_share"] == ["0.00", "0.50"] and shown["share_comparable"] == [
        "1.00",
        "0.07",
    ]
    assert shown["median_wall_s"] == ["5.709", "4.500"] and shown["traces"] == [211, 211]


def test_a_wide_timeline_keeps_its_ticks_when_the_narrow_floor_is_low() -> None:
    """Lowering the narrowest layout to 260 px left a 900 px plot with ticks at 0, 2 and 4 s: each
    width range now gets the ticks it has room for (shown by the same container queries)."""
    from toolcall_lab.notebook.timeline import RANGES

    svg = timeline_svg(SCENARIOS["straggler"].record().to_dict()["rounds"], min_px=260)
    groups = dict(re.findall(r"<g class='tcl-lbl([^']*)'>(.*?)</g>", svg))
    widest = next(body for ranges, body in groups.items() if f"tcl-r{len(RANGES) - 1}" in ranges.split())
    narrowest = next(body for ranges, body in groups.items() if "tcl-r0" in ranges.split())
    assert widest.count("class='tcl-tick'") >= 8 and narrowest.count("class='tcl-tick'") <= 5

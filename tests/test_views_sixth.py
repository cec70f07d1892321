"""Views, sixth pass (issue 15, the t15 tester's findings): the stream stepper reads as the parser
reads (every line, unreadable ones too, findings where they occur), exports carry what the view
shows, a live view never merges two runs, labels say the truth (timing, mode, origin, source),
the file box detects by content, corpus names tell traces apart, and plural forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, REPO
from tests.test_widgets import visible_text
from toolcall_lab.formats.recordings import RecordingReader
from toolcall_lab.notebook.widgets import StreamStepper

# --- 1, 13: the stepper reads every line as the parser does ------------------------------------------

CHUNK = {
    "id": "x",
    "object": "chat.completion.chunk",
    "choices": [
        {
            "index": 0,
            "delta": {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a": 1}'},
                    }
                ]
            },
            "finish_reason": None,
        }
    ],
}
CUT = 'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_ca\n'


def _parsed_findings(path: Path) -> list[list[dict]]:
    """What `toolcall-lab parse` reports per response (its reader, errors kept), duplicates once."""
    out = []
    for response in RecordingReader(path, errors="keep"):
        found: list[dict] = []
        for f in response.findings:
            if f.to_dict() not in found:
                found.append(f.to_dict())
        out.append(found)
    return out


def test_a_cut_off_last_line_is_a_step_with_the_findings_parse_gives(tmp_path: Path) -> None:
    """t15 #1: a stream whose last `data:` line was cut showed "1 chunks" and only no_finish_reason;
    `toolcall-lab parse` reports unreadable_data and sse_unterminated_event."""
    path = tmp_path / "cut.sse"
    path.write_text(f"data: {json.dumps(CHUNK)}\n\n{CUT}")
    stepper = StreamStepper(path)
    states = stepper.states
    assert [line.kind for line in states.lines] == ["chunk", "unreadable"]
    assert states.counts() == "1 chunk, 1 unreadable line"
    assert "1 chunk, 1 unreadable line" in visible_text(stepper.view.value)
    assert "⚠ the stream holds data the parser could not read" in visible_text(stepper.view.value)
    stepper.step = 1  # the cut line: its text, why, and the finding at this step
    frame = visible_text(stepper.view.value.split("</textarea>")[1])
    assert frame.startswith("line 3: unreadable data") and '"finish_reason":"tool_ca' in frame
    assert "unreadable_data" in frame and "the parser cannot read this line" in frame
    kinds = [f["kind"] for f in states.findings_at(len(states) - 1)]
    assert {"unreadable_data", "sse_unterminated_event"} <= set(kinds)
    assert [states.findings_at(len(states) - 1)] == _parsed_findings(path)
    stepper.step = stepper.last_step
    assert "⚠ incomplete: never run" in visible_text(stepper.view.value)  # the parser's verdict


def _recordings() -> list[Path]:
    roots = [DATA / "recordings", REPO / "tests" / "conformance"]
    return sorted(p for r in roots for p in r.rglob("*") if p.suffix in (".sse", ".jsonl") and p.is_file())


def test_every_recording_steps_to_what_parse_reports() -> None:
    """The class of #1: for every stream of the bundled recordings and the conformance corpus, the
    stepper's last step of each response holds the calls and the findings `toolcall-lab parse`
    gives for it (one reader, never a second one), and every line the parser read is a step."""
    checked = 0
    for path in _recordings():
        try:
            stepper = StreamStepper(path)
        except Exception:  # no stream to step (a whole body, no payloads): said by the stepper itself
            continue
        parsed = list(RecordingReader(path, errors="keep"))
        assert len(stepper.read) == len(parsed), path
        assert [s.findings_at(len(s) - 1) for _, s in stepper.read] == _parsed_findings(path), path
        for (_, states), response in zip(stepper.read, parsed, strict=True):
            final = states.snapshot(len(states) - 1)
            want = {
                c.index: {t.index: (t.tool_call_id, t.name, t.arguments) for t in c.tool_calls}
                for c in response.choices
                if c.tool_calls
            }
            got = {
                ci: {k: (v["id"], v["name"], v["arguments"]) for k, v in calls.items()}
                for ci, calls in final.items()
            }
            assert got == want, path
        checked += 1
    assert checked > 80


def test_a_repeated_header_shows_at_the_chunk_that_repeats_it() -> None:
    """t15 #13: OpenRouter's repeated id/name was reported only at the finish step. The parser knows
    it at the chunk that repeats the header, and the stepper shows it there."""
    from toolcall_lab.notebook.stream import read_stream

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"id": "g", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    head = {"index": 0, "id": "0", "type": "function", "function": {"name": "llm_version", "arguments": ""}}
    again = {
        "index": 0,
        "id": "0",
        "type": "function",
        "function": {"name": "llm_version", "arguments": "{}"},
    }
    states = read_stream(
        [
            chunk({"role": "assistant"}),
            chunk({"tool_calls": [head]}),
            chunk({"tool_calls": [again]}),
            chunk({}, "tool_calls"),
        ]
    )[0]
    kinds = [[f["kind"] for f in states.findings_at(i)] for i in range(len(states))]
    assert kinds[1] == [] and "repeated_header" in kinds[2] and "repeated_header" in kinds[-1]


def test_a_done_marker_is_a_step_and_responses_are_numbered_as_parse_numbers_them(tmp_path: Path) -> None:
    """Two chat streams in one file, [DONE] between them: a step per marker, one response each, the
    second's fallback ids numbered as the parser numbers them (batch 1)."""
    call = {"index": 0, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    body = "".join(
        f"data: {json.dumps({'id': rid, 'choices': [{'index': 0, 'delta': {'tool_calls': [call]}, 'finish_reason': 'tool_calls'}]})}\n\ndata: [DONE]\n\n"
        for rid in ("a", "b")
    )
    (tmp_path / "two.sse").write_text(body)
    stepper = StreamStepper(tmp_path / "two.sse")
    assert [s.counts() for _, s in stepper.read] == ["1 chunk, 1 [DONE] line"] * 2
    second = stepper.read[1][1]
    assert second.snapshot(len(second) - 1)[0][0]["id"] == "call_1_0"
    assert second.label(1) == "[DONE] (after line 5): the end marker"


# --- 2: every export carries what the view shows -----------------------------------------------------


def _compare_view():
    from toolcall_lab.notebook.widgets import CompareView
    from toolcall_lab.scenarios import SCENARIOS

    return CompareView(SCENARIOS["weather_news_stock"].record())


def test_timeline_exports_carry_the_views_captions_marks_and_legend(tmp_path: Path) -> None:
    """t15 #2: the exported compare timeline had bare mode names (no wall times, nothing saying
    first_only is not comparable), and its legend drew the placeholder and skipped swatches solid."""
    import csv
    import re

    from matplotlib.colors import to_rgba

    from toolcall_lab.notebook.legend import legend_entries
    from toolcall_lab.notebook.timeline import items_of
    from toolcall_lab.plotting import timeline_figure

    view = _compare_view()
    view.export.folder.value = str(tmp_path)
    panels = view.panels()
    shown = visible_text(view.timelines.value)
    for panel in panels:  # the view prints what the export saves: one source
        assert panel.caption in shown
    first_only = next(p for p in panels if p.name == "first_only")
    assert first_only.warning.startswith("not comparable") and f"⚠ {first_only.warning}" in shown
    (svg_path,) = view.export.save("svg")
    svg = svg_path.read_text(encoding="utf-8")
    text = " ".join(visible_text(svg).split())
    assert "not comparable: skipped 2 of 3 calls" in text
    for panel in panels:
        assert " ".join(panel.caption.split()) in text
    swatches = dict(re.findall(r"(<rect x='\d+' y='\d+' width='14'[^>]*/>)<text[^>]*>([^<]+)</text>", svg))
    by_label = {label: rect for rect, label in swatches.items()}
    placeholder = next(r for lab, r in by_label.items() if lab.startswith("placeholder timing"))
    assert "stroke-dasharray='2 2'" in placeholder and "fill-opacity='0.2'" in placeholder
    skipped = by_label["skipped call (dashed box)"]
    assert "fill='none'" in skipped and "stroke-dasharray='3 2'" in skipped
    fig = timeline_figure(panels, show=False)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert any(t.startswith("first_only: ") and "not comparable" in t for t in titles)
    drawn = [it for p in panels for it in items_of(p.rounds)]
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == [sw.label for sw in legend_entries(drawn)]
    handle = legend.legend_handles[[t.get_text() for t in legend.get_texts()].index(placeholder_label(drawn))]
    dots = handle._dash_pattern[1]  # (the legend copies the dash pattern, not the style's name)
    assert dots and dots[0] < dots[1] and handle.get_facecolor()[3] == pytest.approx(0.2)
    assert to_rgba(handle.get_edgecolor())[3] == 1.0
    (summary, _calls) = view.export.save("csv")
    rows = {r["mode"]: r for r in csv.DictReader(summary.read_text(encoding="utf-8").splitlines())}
    assert rows["first_only"]["speedup_vs_sequential"] == "" and rows["first_only"]["comparable"] == "False"
    assert float(rows["parallel"]["speedup_vs_sequential"]) == pytest.approx(3.2 / 2.4)


def placeholder_label(items: list) -> str:
    from toolcall_lab.notebook.legend import legend_entries

    return next(sw.label for sw in legend_entries(items) if sw.text.startswith("placeholder"))


def test_a_trace_views_svg_export_prints_its_title_once(tmp_path: Path) -> None:
    """t15 #2: the TraceView SVG export printed its title twice (heading, then the panel's name)."""
    from toolcall_lab.notebook.widgets import TraceView
    from toolcall_lab.scenarios import SCENARIOS

    view = TraceView(SCENARIOS["weather_news_stock"].record())
    view.export.folder.value = str(tmp_path)
    (path,) = view.export.save("svg")
    text = visible_text(path.read_text(encoding="utf-8").split("</title>", 1)[1])
    assert text.count("Weather, news and stock in one batch") == 1
    assert "the whole run" in text and "2 rounds · 3 calls" in text


def test_the_corpus_exports_only_tables_with_the_marks_the_table_shows(tmp_path: Path) -> None:
    """t15 #10: the corpus's own export bar offered a timeline it does not have ("the view shows no
    rounds"); two unlabelled bars stacked once a row was open. Its CSV keeps no speedup for a run
    that is not comparable, as the table on screen."""
    import csv

    from toolcall_lab.notebook.widgets import CorpusView

    view = CorpusView(DATA / "traces", ["sequential", "first_only"])
    assert view.export.csv.description == "tables CSV"
    assert not {view.export.svg, view.export.png} & set(view.export.children[0].children)
    assert "export the corpus table" in visible_text(view.export.label.value)
    opened = view.open_row(int(view.comparison.runs.index[0]))
    assert "export this comparison" in visible_text(opened.export.label.value)
    view.export.folder.value = str(tmp_path)
    runs = view.export.save("csv")[0]
    rows = list(csv.DictReader(runs.read_text(encoding="utf-8").splitlines()))
    bad = [r for r in rows if r["comparable"] == "False"]
    assert bad and all(r["speedup_vs_sequential"] == "" for r in bad)


# --- 3: a live view never merges two runs ------------------------------------------------------------


def test_two_runs_fed_to_one_live_view_at_once_are_drawn_apart() -> None:
    """t15 #3: two runs gathered into one LiveView were drawn as one run (six calls in round 0, two
    calls sharing an id, the other run's final answer), the other run "running" forever."""
    import asyncio

    from toolcall_lab.loop import run
    from toolcall_lab.notebook.widgets import LiveView
    from toolcall_lab.scenarios import SCENARIOS

    live = LiveView("two runs at once", min_interval_s=0.0)
    a, b = SCENARIOS["weather_news_stock"], SCENARIOS["three_tools_100ms"]

    async def both():
        return await asyncio.gather(
            run(a.model(), a.registry(), a.prompt, on_event=live.on_event),
            run(b.model(), b.registry(), b.prompt, on_event=live.on_event),
        )

    first, second = asyncio.run(both())
    ids = {e.run_id for e in first.events}, {e.run_id for e in second.events}
    assert len(ids[0]) == len(ids[1]) == 1 and ids[0] != ids[1]  # every event says its run
    runs = list(live.runs.values())
    assert len(runs) == 2 and not live.warnings
    for shown, result in zip(runs, (first, second), strict=True):
        assert shown.finished == f"{result.status} / {result.reason}" and shown.final == result.final_answer
        assert [len(r["tool_calls"]) for _, r in sorted(shown.rounds.items())] == [
            len(r.tool_calls) for r in result.rounds
        ]
    page = visible_text(live.view.value)
    assert "run 1" in page and "run 2" in page and "running" not in page


def test_interleaved_runs_without_run_ids_are_refused_not_merged() -> None:
    """Events without a run id (an older emitter, made by hand) cannot be told apart: when two such
    runs interleave, the view says so and does not draw a mixture."""
    from toolcall_lab.events import RoundStarted
    from toolcall_lab.notebook.widgets import LiveView

    live = LiveView("by hand", min_interval_s=0.0)
    for k in (0, 1, 0, 1):  # two runs, neither finished: round 0 of the second starts twice
        live.on_event(RoundStarted(at=float(k), round_index=k))
    text = visible_text(live.view.value)
    assert "cannot tell them apart" in text and "round 0 started twice" in text
    assert "Round 1" not in text  # no panel of a mixed run


# --- 5, 6, 12: labels say the truth ------------------------------------------------------------------


def test_a_scripted_model_on_the_real_clock_is_measured_not_a_placeholder() -> None:
    """t15 #5: a scripted run on the real clock said "placeholder (a constant, not measured)" for a
    model time of 165 µs that was measured (the script's constant was 0), with chunk offsets
    "spread" though they were the measured arrivals."""
    import asyncio

    from toolcall_lab.clock import run_virtual
    from toolcall_lab.loop import run
    from toolcall_lab.notebook.widgets import LiveView, TraceView
    from toolcall_lab.scenarios import SCENARIOS

    s = SCENARIOS["three_tools_100ms"]
    live = LiveView("real clock", min_interval_s=0.0)
    real = asyncio.run(run(s.model(), s.registry(), s.prompt, mode="sequential", on_event=live.on_event))
    assert {r.model_call.timing.source for r in real.rounds} == {"recorded"}
    assert {r.model_call.chunk_timing for r in real.rounds} == {"recorded"}
    assert "measured on the real clock" in real.rounds[0].model_call.timing.note
    for text in (visible_text(live.view.value), visible_text(TraceView(real).header.value)):
        assert "placeholder" not in text, text
    virtual = run_virtual(run(s.model(), s.registry(), s.prompt, mode="sequential"))
    assert {r.model_call.timing.source for r in virtual.rounds} == {"placeholder"}  # the script's constant


PARALLEL_NO_RESULTS = (
    "".join(
        f"data: {json.dumps(c)}\n\n"
        for c in [
            {
                "id": "r",
                "object": "chat.completion.chunk",
                "model": "gpt-x",
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "role": "assistant",
                            "tool_calls": [
                                {
                                    "index": k,
                                    "id": f"call_{k}",
                                    "type": "function",
                                    "function": {"name": n, "arguments": "{}"},
                                }
                                for k, n in enumerate(("get_weather", "get_stock"))
                            ],
                        },
                        "finish_reason": None,
                    }
                ],
            },
            {
                "id": "r",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
            },
        ]
    )
    + "data: [DONE]\n\n"
)


def test_an_uploaded_recording_is_labelled_by_what_was_read() -> None:
    """t15 #6: an uploaded .sse with two parallel calls and no results said "tool durations a 0.1 s
    placeholder; tool results from the next request; ... (a cassette keeps no arrival times)", the
    header said "mode sequential" (the trace's mode is empty) and "source:" named a deleted
    temporary file."""
    from toolcall_lab.notebook.loading import open_upload
    from toolcall_lab.notebook.widgets import TraceView

    opened = open_upload("my_stream.sse", PARALLEL_NO_RESULTS.encode())
    (trace,) = opened.traces
    notes = trace.metadata.notes
    assert "placeholder" not in notes.split("otherwise")[1].split(";")[2]  # the results part
    assert "tool results from the next request" not in notes and "cassette" not in notes
    assert "an event-stream file keeps no arrival times" in notes and "every call is not recorded" in notes
    assert trace.metadata.mode is None and trace.metadata.source == "my_stream.sse"
    view = TraceView(trace)
    head = visible_text(view.header.value)
    assert "mode not evidenced" in head and "mode sequential" not in head
    assert "source: my_stream.sse" in head and "toolcall-lab-upload" not in head
    assert "sequential" not in view.round_titles[0]
    assert "toolcall-lab-upload" not in json.dumps([str(i) for i in opened.report.issues])


def test_a_replay_cannot_be_labelled_recorded() -> None:
    """t15 #12: Trace.from_run(replay(...), TraceMetadata(origin='recorded')) was accepted and the
    view said "recorded live from a model"."""
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.replay import replay
    from toolcall_lab.scenarios import SCENARIOS
    from toolcall_lab.trace import Trace, TraceMetadata

    result = replay(SCENARIOS["weather_news_stock"].record(), "sequential")
    with pytest.raises(UsageError, match=r"origin='recorded'.*whose origin is 'replayed'"):
        Trace.from_run(result, TraceMetadata(title="r", origin="recorded"))
    assert Trace.from_run(result, TraceMetadata(title="r", origin="replayed")).metadata.origin == "replayed"


# --- 7, 8: the file box reads content, and Enter opens again --------------------------------------------


def test_the_file_box_detects_by_content_and_says_what_a_file_is(tmp_path: Path) -> None:
    """t15 #7: a trace file cut at 5,000 bytes was detected as a recording ("line 59: not JSON ...
    (a line of a response body recorded in it)"); that suffix came with every non-.sse failure, an
    empty .json, random bytes, notes.txt or a Markdown file included."""
    from toolcall_lab.exceptions import TraceError
    from toolcall_lab.notebook.loading import TRACE, detect, open_source

    whole = (DATA / "traces" / "two_tool_rounds.json").read_bytes()
    (tmp_path / "cut.json").write_bytes(whole[:5000])
    assert detect(tmp_path / "cut.json") == [TRACE]
    with pytest.raises(
        TraceError, match=r"a trace file that does not load: not valid JSON \(file looks truncated\)"
    ):
        open_source(tmp_path / "cut.json")
    (tmp_path / "notes.txt").write_text("not json at all\n")
    (tmp_path / "README.md").write_text("# Provenance\n\nwhere these came from\n")
    (tmp_path / "random.json").write_bytes(bytes(range(256)) * 4)
    for name, what in (
        ("notes.txt", "plain text"),
        ("README.md", "plain text"),
        ("random.json", "binary data"),
    ):
        assert detect(tmp_path / name) == []
        with pytest.raises(TraceError) as caught:
            open_source(tmp_path / name)
        message = str(caught.value)
        assert f"no kind reads this file: it is {what}" in message, message
        assert "response body" not in message and "recording" not in message.split(": it is")[0]


def test_a_recordings_error_does_not_depend_on_its_file_name(tmp_path: Path) -> None:
    from toolcall_lab.exceptions import ToolcallLabError
    from toolcall_lab.importers import import_source

    (tmp_path / "body.json").write_text('{"id": "x", "choices": [')
    with pytest.raises(ToolcallLabError) as caught:
        import_source("recording", tmp_path / "body.json")
    assert "line 1" in str(caught.value) and "a line of a response body" not in str(caught.value)


def test_enter_opens_the_path_again_and_a_new_kind_reads_it_again(tmp_path: Path) -> None:
    """t15 #8: Enter on an unchanged path did nothing (a file changed on disk could not be reloaded),
    and after choosing another kind the view still showed what the old kind read."""
    from toolcall_lab.notebook._controls import OpenBox

    opened = []
    box = OpenBox(opened.append)
    path = tmp_path / "t.json"
    path.write_bytes((DATA / "traces" / "two_tool_rounds.json").read_bytes())
    box.path.value = str(path)
    assert len(opened) == 1
    doc = json.loads(path.read_text())
    doc["metadata"]["title"] = "changed on disk"
    path.write_text(json.dumps(doc))
    box._message(box.path, {"event": "submit"})  # Enter, the text unchanged
    assert len(opened) == 2 and opened[-1].traces[0].metadata.title == "changed on disk"
    box.kind.value = "recording"  # read it again as that kind: it is no recording, and says so
    assert len(opened) == 2 and "cannot open" in visible_text(box.message.value)
    box.kind.value = "trace"
    assert len(opened) == 3 and "as trace" in visible_text(box.message.value)


# --- 9, 10: the corpus view --------------------------------------------------------------------------

SESSION = "claude-code_v1.0.98_sonnet-4_session-fe5e1c67_170calls_sidechains"
SHARED = "claude-code_v1.0.98_sonnet-4_session-fe5e1c67_170calls_"


def _session_folder(tmp_path: Path) -> Path:
    """Four traces of one session: long names that differ only at the end, an import report beside them."""
    folder = tmp_path / "session"
    folder.mkdir()
    sources = ["two_tool_rounds", "straggler", "weather_news_stock", "one_tool_round"]
    for k, (name, end) in enumerate(
        zip(
            sources,
            ("__main_turn01", "__main_turn02", "__agent_XNTkoP55_turn01", "__agent_f9xMKasf_turn01"),
            strict=True,
        )
    ):
        doc = json.loads((DATA / "traces" / f"{name}.json").read_text())
        doc["metadata"]["title"] = f"{SESSION}{end} (#{k})"
        (folder / f"{SESSION}{end}.json").write_text(json.dumps(doc))
    (folder / "import_report.txt").write_text("import claude-code ...: 0 issues\n")
    return folder


def test_corpus_names_tell_traces_apart_in_every_list_and_cell(tmp_path: Path) -> None:
    """t15 #9: the "open" list cut names after ~50 characters (six rows read the same), table cells
    cut them again by the page, and ratios read "1x" in some rows and "1.00x" in others."""
    import re

    from toolcall_lab.notebook.widgets import CorpusView

    view = CorpusView(_session_folder(tmp_path), ["sequential", "parallel"])
    labels = [label for label, _ in view.picker.options]
    assert len({label.split(" · ")[1] for label in labels}) == 4  # four traces, four names
    for label in labels:
        assert SESSION not in label and re.search(
            r"(\d+\.\d\dx( \(assumed timings\))?|not comparable)$", label
        ), label
    assert any("…sidechains__main_turn02.json" in label for label in labels)
    ends = re.findall(r"<span class='tcl-mid-b'>([^<]*)</span>", view.table.value)
    assert any(e.endswith("__main_turn01.json") for e in ends)
    assert any(e.endswith("__main_turn02.json") for e in ends)
    assert f"every trace name begins {SHARED}…" in visible_text(view.table.value)


def test_corpus_view_folder_box_reports_counts_and_row_bounds(tmp_path: Path) -> None:
    """t15 #10: the folder box stayed empty, the import report was flagged "not read: import them
    first", counts mixed traces and runs, bad files were listed twice, an empty folder said "sorted
    by None", the row box clamped 99 to the last row silently and "next row" at the end said nothing."""
    import re

    from toolcall_lab.notebook.widgets import CorpusView

    folder = _session_folder(tmp_path)
    (folder / "broken.json").write_text("{not json")
    (folder / "notes.json").write_text('{"hello": 1}')
    view = CorpusView(folder, ["sequential", "parallel"])
    assert view.folder.value == str(folder)
    told = visible_text(view.message.value)
    assert told.startswith("4 of 6 traces compared under 2 modes: 8 runs; 2 traces could not be read"), told
    problems = visible_text(view.problems.value)
    assert "import_report.txt" in problems and "not read: " not in problems  # a report, not data
    rows = [visible_text(r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", view.problems.value)]
    assert sum("notes.json" in r for r in rows) == 1 and sum("broken.json" in r for r in rows) == 1
    assert "<li>notes.json" not in view.problems.value  # listed once: in the table, with what it is
    last = max(view.comparison.runs.index)
    view.row_box.value = 99
    assert view.selected == -1 and f"no row #99: the table's rows are #0 to #{last}" in visible_text(
        view.row_message.value
    )
    view.row_box.value = -1
    assert view.selected == -1 and "no row #-1" in visible_text(view.row_message.value)
    order = [int(i) for i in view.rows().index]
    view.row_box.value = order[-1]
    assert view.selected == order[-1]
    view.next_button.click()
    assert view.selected == order[-1] and "is the last row in this order" in visible_text(
        view.row_message.value
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    quiet = CorpusView(empty)
    assert "sorted by None" not in visible_text(quiet.table.value + quiet.message.value)


# --- 15: words, legends, scales ----------------------------------------------------------------------


def test_counts_are_said_in_the_right_form() -> None:
    """t15 #15: "1 rows", "1 chunks", "Speedup over 1 traces", "1 rounds", "prompt: 0 initial
    messages ()"."""
    from toolcall_lab.analysis import compare
    from toolcall_lab.notebook.html import prompt_html
    from toolcall_lab.notebook.legend import bars_table
    from toolcall_lab.notebook.timeline import items_of, lane_names
    from toolcall_lab.notebook.widgets import CorpusView, TraceView, as_doc
    from toolcall_lab.plotting import speedup_distribution
    from toolcall_lab.scenarios import SCENARIOS

    trace = SCENARIOS["one_tool_round"].record()
    doc = as_doc(trace)
    one = [doc["rounds"][0]]
    one_item = items_of(one)[:1]
    assert "(1 row, exact times)" in bars_table(one_item, lane_names(one, 2))
    corpus = CorpusView([trace], ["sequential"])
    assert "1 row, sorted by" in visible_text(corpus.table.value)
    fig = speedup_distribution(compare([trace], ["sequential", "parallel"]), show=False)
    assert fig.axes[0].get_title().startswith("Speedup over 1 trace ")
    bare = {**doc, "initial_messages": []}
    assert "prompt: no initial messages recorded" in visible_text(prompt_html(bare))
    single = {**doc, "rounds": one}
    assert "1 round, 1 call" in visible_text(TraceView(single).header.value)


def test_every_call_status_has_its_own_legend_entry_and_figures_carry_no_text_icons() -> None:
    """t15 #15: not_recorded calls showed as "• tool other" in legends; the matplotlib legend read
    "-- waiting for a slot" (a text icon drawn beside a swatch that already shows the bar)."""
    from toolcall_lab.notebook.legend import legend_entries
    from toolcall_lab.notebook.theme import UNKNOWN_STATUS, status_style
    from toolcall_lab.records import CALL_STATUSES

    assert all(status_style(s) is not UNKNOWN_STATUS for s in CALL_STATUSES)

    class Bar:
        lane, t0, t1, round_index, what = 1, 0.0, 1.0, 0, "t"
        provenance = "recorded"

        def __init__(self, kind: str, status: str = "") -> None:
            self.kind, self.status = kind, status

    labels = [sw.label for sw in legend_entries([Bar("tool", "not_recorded"), Bar("wait")])]
    assert "∅ tool result not recorded (the imported source does not hold it)" in labels
    assert "waiting for a slot (recorded queueing)" in labels and not any("other" in x for x in labels)


def test_token_usage_says_what_of_the_prompt_was_cached() -> None:
    """t15 #15: "prompt 15,553 … input 3" did not say that Anthropic's input is the uncached part."""
    from toolcall_lab.notebook.html import _usage_text

    usage = {
        "prompt_tokens": 18768,
        "input_tokens": 4,
        "cache_creation_input_tokens": 18764,
        "cache_read_input_tokens": 0,
        "completion_tokens": 263,
        "output_tokens": 263,
        "total_tokens": 19031,
    }
    assert (
        _usage_text(usage)
        == "prompt 18,768 (18,764 written to cache, 4 uncached), completion 263, total 19,031"
    )
    assert _usage_text({"prompt_tokens": 10, "completion_tokens": 2}) == "prompt 10, completion 2"


def test_a_short_round_of_a_long_session_is_drawn_on_its_own_scale() -> None:
    """t15 #15: a 4.4 s round was drawn on a 14 s axis (a twentieth of a 280 s round)."""
    from toolcall_lab.notebook.html import round_spans

    def rnd(seconds: float) -> dict:
        return {
            "response": {"started_at": 0.0, "ended_at": seconds},
            "tool_executions": [],
            "round_trips": [],
        }

    assert round_spans([rnd(4.4), rnd(280.0), rnd(0.0)]) == [4.4, 280.0, pytest.approx(2.8)]


# --- 14: what a user waits for when a view is displayed -------------------------------------------------


def tree(widget):
    """A widget and every widget inside it."""
    yield widget
    for child in getattr(widget, "children", ()):
        yield from tree(child)


def test_a_trace_views_widgets_and_static_copy_do_not_grow_with_its_rounds() -> None:
    """t15 #14: a displayed TraceView of a long session cost a widget per round and a second
    rendering of every round for its static copy (counted, not timed: the number of widgets made,
    and round titles rendered, must not grow faster than the rounds)."""
    from benchmarks.bench_widgets import big_trace
    from toolcall_lab.notebook import html, widgets

    def made(rounds: int) -> tuple[int, int]:
        trace = big_trace(rounds, 1)
        titles = [0]
        original = widgets.round_title

        def counted(*args, **kwargs):
            titles[0] += 1
            return original(*args, **kwargs)

        widgets.round_title = counted
        try:
            view = widgets.TraceView(trace)
            page = view._static_bundle()["text/html"]
        finally:
            widgets.round_title = original
        assert page.count("class='tcl-round-panel'") == len(trace.rounds)
        return len(list(tree(view))), titles[0]

    few, many = made(3), made(40)
    assert few[0] == many[0]  # the same widgets, whatever the number of rounds
    assert many[1] == 41 and few[1] == 4  # one title per round
    assert html.round_title is widgets.round_title


@pytest.mark.parametrize(
    "mode", ["sequential", "parallel", "serialized", "first_only", "eager", "parallel[cap=1]"]
)
@pytest.mark.parametrize("listener", ["none", "quiet", "failing"])
def test_every_event_of_a_run_carries_its_run_id_with_or_without_a_listener(mode: str, listener: str) -> None:
    """x14 #1: without an ``on_event`` listener the loop appends the batch's ACTION/OBSERVATION events
    as they are made, and they carried no run id (nor did a failing listener's ``hook_failed``): two
    runs' events could not be told apart, and a LiveView fed them drew a run that never happened."""
    import asyncio

    from toolcall_lab.clock import run_virtual
    from toolcall_lab.loop import run
    from toolcall_lab.notebook.widgets import LiveView
    from toolcall_lab.scenarios import SCENARIOS

    def failing(event: Any) -> None:
        if event.kind == "action":
            raise ValueError("a listener's bug")

    on_event = {"none": None, "quiet": lambda e: None, "failing": failing}[listener]
    a, b = SCENARIOS["weather_news_stock"], SCENARIOS["three_tools_100ms"]

    async def both() -> Any:
        return await asyncio.gather(
            run(a.model(), a.registry(), a.prompt, mode=mode, on_event=on_event),
            run(b.model(), b.registry(), b.prompt, mode=mode, on_event=on_event),
        )

    first, second = run_virtual(both())
    for result in (first, second):
        kinds = {e.kind for e in result.events}
        assert {"action", "observation"} <= kinds and (listener != "failing" or "hook_failed" in kinds)
        assert {e.run_id for e in result.events} == {result.events[0].run_id} != {""}
    assert first.events[0].run_id != second.events[0].run_id
    live = LiveView("replayed events", min_interval_s=0.0)
    for event in first.events:
        live.on_event(event)
    assert len(live.runs) == 1 and not live.warnings

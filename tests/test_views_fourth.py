"""Views, fourth pass: what a fresh tester found (issue 15): large trace files detected as traces,
folders listing only what they did not read, bars that never vanish, sub-millisecond times, and
one-line errors for bad settings."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from tests.conftest import DATA
from toolcall_lab.trace import Trace
from toolcall_lab.trace_files import save


def _big_trace(title: str, size: int = 1_200_000) -> Trace:
    """A real bundled trace grown past `size` bytes (a long prompt), so its sorted keys put
    ``schema_version`` far beyond any head a detector reads."""
    doc = json.loads((DATA / "traces" / "two_tool_rounds.json").read_text())
    doc["metadata"]["title"] = title
    doc["initial_messages"] = [
        *doc["initial_messages"],
        {"role": "user", "content": 'lorem ipsum {"schema": [1, 2]} ünïcødé ' * (size // 36)},
    ]
    return Trace.from_dict(doc)


@pytest.fixture(scope="module")
def big_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("big")
    for i in range(3):
        save(_big_trace(f"big {i}"), folder / f"big_{i}.json")
    (folder / "import_report.txt").write_text("claude-code: 3 trace(s)\n  tool calls: 6 in the source\n")
    return folder


def test_a_trace_file_of_any_size_is_detected_as_a_trace(big_folder: Path) -> None:
    from toolcall_lab.notebook.loading import HEAD_BYTES, detect, open_source

    path = big_folder / "big_0.json"
    text = path.read_text()
    assert path.stat().st_size > 1_000_000 and text.index('"schema_version"') > HEAD_BYTES
    assert detect(path)[0] == "trace"
    opened = open_source(path, "detect")
    assert opened.kind == "trace" and [t.metadata.title for t in opened.traces] == ["big 0"]
    # an object that merely mentions the words in its head is not a trace
    fake = big_folder.parent / "fake.json"
    fake.write_text(json.dumps({"rounds": [], "note": '"schema_version" "rounds"', "choices": []}))
    assert detect(fake)[0] != "trace"


def test_a_folder_of_large_traces_opens_and_lists_only_files_it_did_not_read(big_folder: Path) -> None:
    from toolcall_lab.notebook.loading import open_source, report_html
    from toolcall_lab.notebook.widgets import CompareView, CorpusView, TraceView

    opened = open_source(big_folder, "detect")
    assert opened.kind == "trace" and len(opened.traces) == 3
    assert opened.left_out == ("import_report.txt (not read: no kind recognises it)",)
    assert "big_" not in report_html(opened)
    for view in (TraceView(), CompareView()):
        view.open_box.open_path(big_folder)
        assert "big_" not in view.open_box.message.value and "✔" in view.open_box.message.value
    corpus = CorpusView(big_folder)
    assert len(corpus.items) == 3


def test_files_a_folder_import_read_are_never_listed_as_left_out(tmp_path: Path) -> None:
    """A folder of recordings opened as recordings, with one trace beside them: the trace alone is
    listed (as a trace), never a recording the importer read."""
    from toolcall_lab.notebook.loading import open_source

    src = DATA / "recordings" / "scripted_weather_news_stock.sse"
    for i in range(2):
        (tmp_path / f"rec_{i}.sse").write_bytes(src.read_bytes())
    save(_big_trace("beside"), tmp_path / "beside.json")
    opened = open_source(tmp_path, "recording")
    assert opened.traces
    assert opened.left_out == ("beside.json (looks like trace)",)


def _long_run_with_blink_calls(tool_s: float = 0.002) -> Trace:
    """Two tool rounds on a ~35 s run, each tool call lasting `tool_s` (a real trace's 2 ms Glob)."""
    doc = json.loads((DATA / "traces" / "two_tool_rounds.json").read_text())
    times = [(0.0, 20.0), (20.0 + tool_s, 30.0), (30.0 + tool_s, 35.0)]
    for r, (m0, m1) in zip(doc["rounds"], times, strict=True):
        resp = r["response"]
        resp["timing"] = {"source": "recorded", "note": ""}  # drawn at full strength
        resp.update(started_at=m0, ended_at=m1, latency_s=m1 - m0, first_chunk_at=m0 + 1, ttfc_s=1.0)
        for x in r["tool_executions"]:
            x["timing"] = {"source": "recorded", "note": ""}
            x.update(started_at=m1, ended_at=m1 + tool_s, duration_s=tool_s)
    doc["outcome"]["wall_time_s"] = 35.0
    return Trace.from_dict(doc)


def _pixel(fig, ax, x: float, y: float) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    import numpy as np

    rgba = np.asarray(fig.canvas.buffer_rgba())
    px, py = ax.transData.transform((x, y))
    return tuple(int(c) for c in rgba[int(rgba.shape[0] - py), int(px), :3])  # type: ignore[return-value]


@pytest.mark.parametrize("tool_s", [0.002, 0.034, 0.0001])
def test_matplotlib_bars_with_a_label_never_vanish(tool_s: float) -> None:
    """Each tool bar's own position shows its status colour, in the parallel and eager panels
    alike, whatever sub-pixel position it falls on; its label says the true duration."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgb

    from toolcall_lab import plotting
    from toolcall_lab.notebook.theme import STATUS, secs

    trace = _long_run_with_blink_calls(tool_s)
    fig = plotting.gantt(trace, ["parallel", "eager"], show=False)
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    green = tuple(round(c * 255) for c in to_rgb(STATUS["ok"].fill))
    panels = fig.axes[:2]
    for ax in panels:
        texts = [t.get_text() for t in ax.texts]
        assert sum(secs(tool_s) in t for t in texts) == 2, texts
        tools = [p for p in ax.patches if p.get_facecolor()[:3] == pytest.approx(to_rgb(STATUS["ok"].fill))]
        assert len(tools) == 2
        for patch in tools:
            mid = patch.get_x() + patch.get_width() / 2
            got = _pixel(fig, ax, mid, 1.0)
            assert max(abs(a - b) for a, b in zip(got, green, strict=True)) < 40, (ax.get_title(), got)


def _scaled(factor: float) -> Trace:
    """two_tool_rounds with every time multiplied by `factor` (1e-4: a fast scripted run, µs)."""
    doc = json.loads((DATA / "traces" / "two_tool_rounds.json").read_text())
    for r in doc["rounds"]:
        resp = r["response"]
        for k in ("started_at", "ended_at", "first_chunk_at", "latency_s", "ttfc_s"):
            if isinstance(resp.get(k), float):
                resp[k] *= factor
        for c in resp["chunks"]:
            for k in ("at", "offset_s", "t"):
                if isinstance(c.get(k), float):
                    c[k] *= factor
        for x in r["tool_executions"]:
            for k in ("started_at", "ended_at", "duration_s"):
                x[k] *= factor
    doc["outcome"]["wall_time_s"] *= factor
    return Trace.from_dict(doc)


def test_one_time_format_never_reads_zero_for_a_real_duration() -> None:
    from toolcall_lab.notebook.html import fmt
    from toolcall_lab.notebook.theme import exact, secs

    assert [secs(v) for v in (3.7428e-05, 0.000230563, 0.034, 0.9996, 2.5, 21.118, 4e-8, 3.55e-15)] == [
        "37.4 µs",
        "231 µs",
        "34 ms",
        "1.00 s",
        "2.50 s",
        "21.1 s",
        "40 ns",
        "0 s",
    ]
    assert [exact(v) for v in (3.7428e-05, 0.000230563, 4.392, 0.5, 3.55e-15, 0.0)] == [
        "0.0000374",
        "0.000231",
        "4.392",
        "0.500",
        "0.000",
        "0.000",
    ]
    assert fmt(0.000230563, "wall_time_s") == "0.000231" and fmt(1234.5, "tool_time_s") == "1,234.500"
    assert fmt(3.55e-15, "wall_time_s") == "0.000"


def test_sub_millisecond_runs_show_their_times_in_tables_tooltips_and_labels() -> None:
    from toolcall_lab import plotting
    from toolcall_lab.notebook.widgets import CompareView, TraceView

    trace = _scaled(1e-4)  # model calls of 80 µs, tool calls of 20 µs
    html = TraceView(trace).static_html()
    table = html[html.index("the bars as a table") :]
    cells = re.findall(r"<tr><td>\d+</td>.*?</tr>", table)
    assert cells and all("0.000</td></tr>" not in c for c in cells)
    durations = [re.findall(r"<td>([\d.e-]+)</td>", c)[-1] for c in cells if "never ran" not in c]
    assert all(float(d) > 0 for d in durations), durations
    assert "✔ ok, 0.0000200 s, 0.0000800 → 0.000100 s" in html
    assert "0.000 → 0.000 s" not in html and "model 0 s" not in html and "model 80 µs" in html
    assert "<td>0.000 s</td>" not in CompareView(trace, ["sequential"]).static_html()
    fig = plotting.gantt(trace, ["sequential"], show=False)
    labels = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert labels and not any(t.endswith(" 0 s") for t in labels), labels


def test_matplotlib_labels_say_a_failed_status_by_icon_not_colour_alone() -> None:
    import warnings

    from toolcall_lab import plotting
    from toolcall_lab.trace_files import load

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a glyph the font cannot draw warns
        fig = plotting.gantt(load(DATA / "traces" / "failing_and_hanging.json"), ["parallel"], show=False)
        fig.savefig(io.BytesIO(), format="png")
    labels = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any(t.startswith("✖ flaky_api") for t in labels), labels
    assert any(t.startswith("◔ slow_service") for t in labels), labels
    assert any(t.startswith("get_weather") for t in labels), labels


@pytest.mark.parametrize(
    ("modes", "says"),
    [
        (["parallel", "parallel"], "two strategies share a name (['parallel', 'parallel'])"),
        (["sequential", "parallel[cap=4]", "sequential"], "two strategies share a name"),
        ("parallel", "give a list of modes, e.g. ['parallel'], not one string"),
        (3, "give a list of modes, not int 3"),
    ],
)
def test_compare_view_refuses_a_bad_modes_list_up_front_as_compare_does(modes, says) -> None:  # type: ignore[no-untyped-def]
    from toolcall_lab import plotting
    from toolcall_lab.analysis import compare
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.notebook.widgets import CompareView

    trace = Trace.from_dict(json.loads((DATA / "traces" / "two_tool_rounds.json").read_text()))
    for where, make in (
        ("CompareView(modes=...)", lambda: CompareView(trace, modes)),
        ("compare(modes=...)", lambda: compare([trace], modes)),
        ("gantt(modes=...)", lambda: plotting.gantt(trace, modes, show=False)),
    ):
        with pytest.raises(UsageError) as caught:
            make()
        assert str(caught.value).startswith(f"{where}: {says}") and "\n" not in str(caught.value)
    view = CompareView(trace, ["parallel"])
    with pytest.raises(UsageError, match="share a name"):
        view.modes = ("parallel", "parallel")
    assert view.modes == ("parallel",)


def test_gantt_of_a_trace_that_cannot_replay_says_why_as_compare_view_does() -> None:
    from toolcall_lab import plotting
    from toolcall_lab.notebook.widgets import CompareView

    doc = json.loads((DATA / "traces" / "two_tool_rounds.json").read_text())
    doc["rounds"], doc["outcome"]["wall_time_s"] = [], 0.0
    trace = Trace.from_dict(doc)
    fig = plotting.gantt(trace, ["sequential", "parallel"], show=False)
    title = fig._suptitle.get_text()  # type: ignore[union-attr]
    assert "⚠ sequential: could not be replayed: ReplayDivergenceError" in title
    assert "⚠ parallel: could not be replayed" in title and "no run to draw" in title
    assert "sequential: could not be replayed: ReplayDivergenceError" in CompareView(trace).summary.value


def test_a_long_title_wraps_instead_of_widening_the_gantt() -> None:
    from toolcall_lab import plotting

    doc = json.loads((DATA / "traces" / "two_tool_rounds.json").read_text())
    doc["metadata"]["title"] = "claude-code session " * 20
    fig = plotting.gantt(Trace.from_dict(doc), ["parallel"], show=False)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=100)
    from matplotlib.image import imread

    buf.seek(0)
    assert imread(buf).shape[1] <= 1.05 * 10 * 100  # the 10-inch figure, not the title's length


def test_corpus_export_holds_every_row_with_names_that_keep_their_distinguishing_end(tmp_path: Path) -> None:
    from toolcall_lab.notebook.html import fmt
    from toolcall_lab.notebook.widgets import CorpusView

    base = json.loads((DATA / "traces" / "two_tool_rounds.json").read_text())
    stem = "claude-code_v1_0_108_sonnet-4_session-5c0375b4_20calls_sidechains_parallel3x2"
    for i in range(12):
        base["metadata"]["title"] = f"run {i}"
        save(Trace.from_dict(base), tmp_path / f"{stem}__agent_{i:02d}_turn01.json")
    view = CorpusView(tmp_path, page_size=5)
    assert len(view.comparison.runs) == 48
    page = view.static_html()
    rows = re.findall(r"<tr class=", page)
    assert len(rows) == 48 and "all 48 rows" in page
    cells = re.findall(r"<td class='tcl-left tcl-name'[^>]*>(.*?)</td>", page)
    shown = [text for text in (re.sub(r"<[^>]+>", "", c) for c in cells) if "turn01" in text]
    assert {s[-len("agent_00_turn01.json") :] for s in shown} == {
        f"agent_{i:02d}_turn01.json" for i in range(12)
    }
    assert all(len(s) <= 44 for s in shown)
    assert fmt(1.0, "speedup_vs_sequential") == "1.00" == fmt(1.0, "efficiency")
    assert fmt(3.0, "upstream_calls") == "3"


def test_the_file_box_words_source_and_imported_counts_as_the_cli_does() -> None:
    from toolcall_lab.importers import ImportReport
    from toolcall_lab.notebook.loading import Opened, report_html

    report = ImportReport(
        kind="bfcl",
        source="BFCL_v4_parallel.jsonl",
        source_calls=540,
        imported_calls=540,
        source_model_calls=0,
        imported_model_calls=200,
        traces=200,
    )
    html = report_html(Opened(traces=[], source="BFCL_v4_parallel.jsonl", kind="bfcl", report=report))
    assert "tool calls: 540 in the source, 540 imported; model calls: 0 in the source, 200 imported" in html

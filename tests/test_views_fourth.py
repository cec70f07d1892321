"""Views, fourth pass: what a fresh tester found (issue 15): large trace files detected as traces,
folders listing only what they did not read, bars that never vanish, sub-millisecond times, and
one-line errors for bad settings."""

from __future__ import annotations

import json
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
        {"role": "user", "content": "lorem ipsum {\"schema\": [1, 2]} ünïcødé " * (size // 36)},
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

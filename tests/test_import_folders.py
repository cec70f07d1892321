"""tau-bench reads a folder like every other importer, and the CLI's shortened lists point at a file
holding every issue (nothing an import reports is out of reach)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab import cli
from toolcall_lab.importers import import_tau_bench

TAU = REALDATA / "tau-bench" / "historical_trajectories_gpt-4o-airline.json"


def _trajectory(task: int) -> dict[str, object]:
    call = {"id": f"call_{task}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    return {
        "task_id": task,
        "traj": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{task}", "content": "found"},
            {"role": "assistant", "content": "done"},
        ],
    }


def test_a_folder_of_trajectory_files_imports_each_and_names_what_it_skipped(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps([_trajectory(1), _trajectory(2)]), encoding="utf-8")
    (tmp_path / "b.json").write_text(json.dumps([_trajectory(3)]), encoding="utf-8")
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    result = import_tau_bench(tmp_path)
    assert len(result) == 3
    assert sum(len(r.tool_calls) for t in result for r in t.rounds) == 3
    said = "\n".join(str(i) for i in result.report.issues)
    assert "bad.json" in said and "notes.txt" in said


@needs_realdata
def test_the_cli_writes_every_issue_where_its_summary_shortens_the_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    shutil.copy(TAU, folder / TAU.name)
    (folder / "bad.json").write_text("{}", encoding="utf-8")
    out = tmp_path / "out"
    assert cli.main(["import", "tau-bench", str(folder), "--out", str(out), "--limit", "2"]) == 0
    printed = capsys.readouterr().out
    report = (out / "import_report.txt").read_text(encoding="utf-8")
    assert f"(every one is listed in {out / 'import_report.txt'})" in printed
    assert "bad.json" not in printed.split("skipped")[0]  # shortened on screen ...
    assert "bad.json: not a file of kind tau-bench" in report  # ... never lost
    assert "more" not in report.splitlines()[-1]
    assert report.count("beyond limit=2") == 198  # 200 trajectories in the file, 2 imported


@needs_realdata
def test_a_call_the_loop_never_runs_is_not_reported_as_a_missing_result() -> None:
    from toolcall_lab.importers import import_recording

    path = (
        REALDATA
        / "watsonx-ai-java-sdk"
        / ("watsonx_mistral-large-2512_chat_stream_parallel2_PATHOLOGICAL_snapshot_args.sse")
    )
    result = import_recording(path)
    (trace,) = result.traces
    assert [e.status for e in trace.rounds[0].executions] == ["invalid_arguments"] * 2
    assert result.report.missing_results == 0
    notes = [str(i) for i in result.report.issues if i.kind == "note" and "never run" in str(i)]
    assert len(notes) == 2 and all("invalid_arguments" in n for n in notes)

"""One bad number costs only itself, in every importer (issue 13, fifth pass).

A latency, duration or working time that is of the wrong type, not finite, negative, absurdly large
or longer than the timestamps around it allow is *not used*: the import keeps every call, falls back
to the next figure of its derivation, says so in a DAMAGED line naming file, place and call, and the
command exits 1. The builder's own gate (`_figures.check_segment`) catches whatever an importer lets
through. The real files are damaged in each test (never stored)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab import cli
from toolcall_lab.importers import (
    Result,
    Segment,
    Turn,
    build_result,
    import_claude_code,
    import_inspect,
    import_langfuse,
    import_openhands,
    import_otlp,
)
from toolcall_lab.importers._figures import MAX_FIGURE_S, figure_problem
from toolcall_lab.importers._shapes import completion
from toolcall_lab.records import Timing

OPENHANDS_EVAL = (
    REALDATA
    / "OpenHands/openhands_codeact_llama-4-maverick_multi-swe-bench_3episodes_response_latencies.jsonl"
)
CC_5CALLS = (
    REALDATA / "claude-code-viewer/claude-code_v1.0.98_sonnet-4_session-1af7fc5e_7calls_parallel5+3.jsonl"
)
INSPECT = (
    REALDATA / "inspect_ai/inspect_log_gpt-4o-mini_browser_agent_5_model_calls_with_raw_api_and_timings.json"
)
BAD_VALUES = [-1.0, float("nan"), float("inf"), 1e12, "3.2", True, {"s": 1}]


def damaged(result) -> list[str]:
    return [str(i) for i in result.report.issues if i.kind == "damaged"]


# --- the rule itself ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", BAD_VALUES)
def test_figure_problem_names_every_unusable_value(value) -> None:
    assert figure_problem(value) is not None


def test_figure_problem_accepts_a_fitting_figure_and_applies_the_fit_rule() -> None:
    assert figure_problem(2.5) is None and figure_problem(0) is None
    assert figure_problem(2500, scale=0.001, at_most=2.5) is None
    assert "longer than the 2.992 s" in (figure_problem(50.0, at_most=2.992) or "")
    assert figure_problem(MAX_FIGURE_S + 1) is not None


def _segment(latency: float, duration: float) -> Segment:
    body = completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        response_id="r1",
    )
    return Segment(
        title="t",
        slug="t",
        source="s",
        initial=[{"role": "user", "content": "hi"}],
        tools=[],
        turns=[
            Turn(
                payloads=[body],
                latency_s=latency,
                ttfc_s=0.5,
                timing=Timing(source="recorded", note="x"),
                results=[
                    Result(
                        text="ok",
                        duration_s=duration,
                        timing=Timing(source="recorded", note="y"),
                        where="f:3",
                    )
                ],
            ),
            Turn(
                payloads=[completion({"role": "assistant", "content": "done"}, response_id="r2")],
                latency_s=1.0,
                timing=Timing(source="recorded", note="z"),
            ),
        ],
        notes="",
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -2.0])
def test_the_builder_never_loses_a_segment_to_a_bad_number(bad) -> None:
    result = build_result("x", "s", [_segment(bad, bad)], source_calls=1, source_model_calls=2)
    (trace,) = result
    assert trace.n_calls == 1 and result.report.imported_calls == 1
    r0 = trace.rounds[0]
    assert r0.model_call.timing.source == "placeholder" and math.isfinite(r0.model_call.latency_s)
    assert r0.executions[0].timing.source == "placeholder" and r0.executions[0].duration_s == 0.0
    where = [i.where for i in result.report.issues if i.kind == "damaged"]
    assert where == ["s t round 0", "s f:3"]  # (each names its source file first)
    assert not result.report.clean


def test_a_first_token_after_the_end_is_dropped_with_a_line() -> None:
    seg = _segment(1.0, 0.2)
    seg.turns[0].ttfc_s = 5.0
    result = build_result("x", "s", [seg], source_calls=1, source_model_calls=2)
    assert len(result) == 1 and any("first token" in d for d in damaged(result))


# --- OpenHands response_latencies -----------------------------------------------------------------


def _openhands_with(tmp_path: Path, line: int, entry: int, value) -> tuple[Path, str]:
    lines = OPENHANDS_EVAL.read_text(encoding="utf-8").splitlines()
    doc = json.loads(lines[line])
    rid = doc["metrics"]["response_latencies"][entry]["response_id"]
    doc["metrics"]["response_latencies"][entry]["latency"] = value
    lines[line] = json.dumps(doc)
    path = tmp_path / "oh.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, rid


def _model_timing(result, rid: str) -> Timing:
    for trace in result:
        for r in trace.rounds:
            if rid in {ch.payload.get("id") for ch in r.model_call.chunks}:
                return r.model_call.timing
    raise AssertionError(f"response {rid} not imported")


@needs_realdata
@pytest.mark.parametrize("value", BAD_VALUES)
def test_openhands_one_bad_latency_costs_only_itself(tmp_path, value) -> None:
    path, rid = _openhands_with(tmp_path, 1, 2, value)
    result = import_openhands(path)
    assert result.report.imported_calls == result.report.source_calls == 105
    assert result.report.source_model_calls == result.report.imported_model_calls == 107
    (line,) = damaged(result)
    assert "oh.jsonl episode" in line and rid in line and "not used" in line
    timing = _model_timing(result, rid)
    assert "response_latencies" not in timing.note.split(";")[0]
    assert all(math.isfinite(r.model_call.latency_s) for t in result for r in t.rounds)


@needs_realdata
def test_openhands_latency_longer_than_its_event_gap_is_not_recorded(tmp_path) -> None:
    path, rid = _openhands_with(tmp_path, 0, 3, 50.0)
    result = import_openhands(path)
    (line,) = damaged(result)
    assert rid in line and "longer than the 2.992 s" in line
    timing = _model_timing(result, rid)
    assert timing.note.startswith("from the event that completed the request") and "not used" in timing.note
    for trace in result:
        assert all(r.model_call.latency_s < 50 for r in trace.rounds)


@needs_realdata
def test_openhands_a_missing_latency_entry_is_counted_and_noted(tmp_path) -> None:
    lines = OPENHANDS_EVAL.read_text(encoding="utf-8").splitlines()
    doc = json.loads(lines[0])
    del doc["metrics"]["response_latencies"][3]
    lines[0] = json.dumps(doc)
    path = tmp_path / "oh.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = import_openhands(path).report
    assert report.source_model_calls == report.imported_model_calls
    assert any("no metrics.response_latencies entry" in i.what for i in report.issues)


@needs_realdata
def test_openhands_bad_latency_exits_1_from_the_cli(tmp_path, capsys) -> None:
    path, _ = _openhands_with(tmp_path, 1, 2, float("nan"))
    assert cli.main(["import", "openhands", str(path), "--out", str(tmp_path / "out")]) == 1
    assert "DAMAGED" in capsys.readouterr().out


# --- Claude Code durationMs -----------------------------------------------------------------------


@needs_realdata
@pytest.mark.parametrize("value", BAD_VALUES)
def test_claude_code_bad_duration_keeps_the_batch(tmp_path, value) -> None:
    lines = CC_5CALLS.read_text(encoding="utf-8").splitlines()
    k = next(i for i, ln in enumerate(lines) if '"tool_result"' in ln and "durationMs" in ln)
    doc = json.loads(lines[k])
    doc["toolUseResult"]["durationMs"] = value
    call_id = next(b["tool_use_id"] for b in doc["message"]["content"] if b.get("type") == "tool_result")
    lines[k] = json.dumps(doc)
    path = tmp_path / "cc.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = import_claude_code(path)
    assert len(result) == 1 and result.report.imported_calls == result.report.source_calls == 12
    (line,) = damaged(result)
    assert line.startswith(f"cc.jsonl line {k + 1}:") and call_id in line and "not used" in line
    (ex,) = [e for r in result[0].rounds for e in r.executions if e.tool_call_id == call_id]
    assert "durationMs" not in ex.timing.note.split("(")[0] and math.isfinite(ex.duration_s)


# --- inspect working_time -------------------------------------------------------------------------


@needs_realdata
@pytest.mark.parametrize("value", [-3, float("nan"), 1e6, "2"])
def test_inspect_bad_working_time_is_damage(tmp_path, value) -> None:
    doc = json.loads(INSPECT.read_text(encoding="utf-8"))
    tool = next(e for e in doc["samples"][0]["events"] if e.get("event") == "tool")
    tool["working_time"] = value
    path = tmp_path / "log.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = import_inspect(path)
    (line,) = damaged(result)
    assert line.startswith("log.json ") and str(tool["id"]) in line and "not used" in line
    assert result.report.imported_calls == result.report.source_calls


# --- the command: --out, exit codes, the report file ----------------------------------------------


@needs_realdata
@pytest.mark.parametrize("exists", [False, True])
def test_zero_traces_exit_2_whatever_the_out_folder(tmp_path, capsys, exists) -> None:
    out = tmp_path / "new" / "deeper"
    if exists:
        out.mkdir(parents=True)
    assert cli.main(["import", "otlp", str(REALDATA / "inspect_ai"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "nothing of kind otlp was imported" in err and "Errno" not in err
    assert (out / "import_report.txt").exists()


def test_an_empty_langfuse_export_exits_2(tmp_path, capsys) -> None:
    src = tmp_path / "lf.json"
    src.write_text(json.dumps({"trace": {"id": "t"}, "observations": []}), encoding="utf-8")
    (tmp_path / "o").mkdir()
    assert cli.main(["import", "langfuse", str(src), "--out", str(tmp_path / "o")]) == 2


def test_out_naming_a_file_is_a_usage_error(tmp_path, capsys) -> None:
    (tmp_path / "f").write_text("x", encoding="utf-8")
    assert cli.main(["import", "openhands", str(tmp_path), "--out", str(tmp_path / "f")]) == 2
    assert "a file, not a folder" in capsys.readouterr().err


@needs_realdata
def test_a_second_import_keeps_the_first_report(tmp_path, capsys) -> None:
    out = str(tmp_path / "out")
    cli.main(["import", "openhands", str(OPENHANDS_EVAL), "--out", out])
    stream = REALDATA / "OpenHands/openhands_claude-3-5-sonnet_basic_gui_mode_event_stream.json"
    cli.main(["import", "openhands", str(stream), "--out", out])
    text = (tmp_path / "out" / "import_report.txt").read_text(encoding="utf-8")
    headers = [ln for ln in text.splitlines() if ln.startswith("=== toolcall-lab import openhands")]
    assert len(headers) == 2 and OPENHANDS_EVAL.name in headers[0] and stream.name in headers[1]
    assert "max_iterations" in text or "maximum iteration" in text  # the first import's issues


# --- duplicates of one call (Langfuse, OTLP) ------------------------------------------------------

LANGFUSE = REALDATA / "agent-prism/langfuse_trace_export_vercel-ai_gpt-5_tool_call_inside_stream.json"


@needs_realdata
@pytest.mark.parametrize("new_id", [False, True])
def test_langfuse_a_tool_observation_exported_twice_is_one_execution(tmp_path, new_id) -> None:
    doc = json.loads(LANGFUSE.read_text(encoding="utf-8"))
    tool = next(o for o in doc["observations"] if o["type"] == "TOOL")
    copy = json.loads(json.dumps(tool))
    if new_id:
        copy["id"] = "zzzz"
    doc["observations"].append(copy)
    path = tmp_path / "lf.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = import_langfuse(path)
    assert (result.report.source_calls, result.report.imported_calls) == (1, 1)
    (trace,) = result
    assert [len(r.executions) for r in trace.rounds if r.executions] == [1]
    assert trace.metadata.mode != "parallel"
    (line,) = damaged(result)
    assert ("zzzz" in line and tool["id"] in line) if new_id else (tool["id"] in line and "read once" in line)


@needs_realdata
def test_langfuse_a_duplicate_with_other_times_is_no_evidence_of_parallelism(tmp_path) -> None:
    doc = json.loads(LANGFUSE.read_text(encoding="utf-8"))
    tool = next(o for o in doc["observations"] if o["type"] == "TOOL")
    copy = json.loads(json.dumps(tool))
    copy["id"], copy["startTime"] = "zzzz", tool["startTime"].replace("20:20:06", "20:20:05")
    doc["observations"].append(copy)
    path = tmp_path / "lf.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = import_langfuse(path)
    (trace,) = result
    (ex,) = [e for r in trace.rounds for e in r.executions]
    assert "not evidence of the mode" in ex.timing.note and trace.metadata.mode != "parallel"


def test_otlp_a_second_span_of_one_call_id_is_a_dropped_duplicate(tmp_path) -> None:
    from tests.test_import_damage import genai

    path = genai(tmp_path, system=True, tools="sequential")
    doc = json.loads(path.read_text())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    dup = json.loads(json.dumps(spans[-1]))
    dup["spanId"], dup["startTimeUnixNano"] = "toolX", spans[-3]["startTimeUnixNano"]  # overlaps c1
    spans.append(dup)
    path.write_text(json.dumps(doc))
    result = import_otlp(path)
    (trace,) = result
    assert trace.n_calls == 3 and trace.metadata.mode == "sequential"
    (line,) = damaged(result)
    assert (
        line.startswith(f"{path.name} tool span ")
        and "tool call c3" in line
        and "tool2" in line
        and "toolX" in line
    )
    (c3,) = [e for e in trace.rounds[0].executions if e.tool_call_id == "c3"]
    assert "not evidence of the mode" in c3.timing.note


# --- smaller: truncated files name themselves, zone-less stamps -----------------------------------

OTLP_REAL = REALDATA / "agent-prism/otlp_json_openinference_smolagents_o1_6_llm_spans.json"


@needs_realdata
def test_a_cut_otlp_export_says_not_valid_json_with_line_and_column(tmp_path, capsys) -> None:
    text = OTLP_REAL.read_text(encoding="utf-8")
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) * 2 // 3], encoding="utf-8")
    assert cli.main(["import", "otlp", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON (" in err and "line " in err and "column " in err and "resourceSpans" not in err


@needs_realdata
def test_a_cut_recording_error_names_the_file(tmp_path, capsys) -> None:
    src = REALDATA / "openai-python/chat_stream_gpt-4o_parallel_2_tools_weather_stock.sse"
    lines = src.read_text(encoding="utf-8").splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith("data: {") and "tool_calls" in ln)
    lines[k] = lines[k][:60]
    path = tmp_path / "cut.sse"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert cli.main(["import", "recording", str(path), "--out", str(tmp_path / "o")]) == 2
    assert f"{path}: line {k + 1}" in capsys.readouterr().err


def test_a_zone_less_stamp_is_utc_whatever_the_machine_zone(monkeypatch) -> None:
    import time

    from toolcall_lab.importers._shapes import epoch

    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is not available on this platform")
    try:
        for tz in ("UTC", "America/New_York", "Asia/Kolkata"):
            monkeypatch.setenv("TZ", tz)
            time.tzset()
            assert epoch("2025-01-01T00:00:00") == epoch("2025-01-01T00:00:00Z") == 1735689600.0
    finally:
        monkeypatch.undo()
        time.tzset()


@needs_realdata
def test_langfuse_a_first_token_before_the_start_is_said_not_used(tmp_path) -> None:
    doc = json.loads(LANGFUSE.read_text(encoding="utf-8"))
    gen = next(o for o in doc["observations"] if o.get("completionStartTime"))
    gen["completionStartTime"] = "2025-09-18T20:00:00.000Z"
    path = tmp_path / "lf.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    (trace,) = import_langfuse(path)
    notes = [r.model_call.timing.note for r in trace.rounds]
    assert any("completionStartTime" in n and "not used" in n for n in notes)

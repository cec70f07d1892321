"""Numbers that rest on what the source shows, and replays that end as the recording did (a second
fresh-eyes tester's cases, issue 13): untrusted request times, a batch's results written out of time
order, bytes that are not UTF-8, what 1 ms timestamps can tell about overlap, unknown first chunks,
recordings ended by the agent's own finishing tool or by a limit. Variants are made in each test
from the real files (never stored)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab import cli
from toolcall_lab.analysis import compare, how_batch_ran, recorded_batch, summary_text
from toolcall_lab.importers import (
    import_claude_code,
    import_langfuse,
    import_openhands,
    import_otlp,
    import_swe_agent,
)
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import SCENARIOS
from toolcall_lab.trace import Trace, TraceMetadata

CC = REALDATA / "claude-code-viewer"
CC_5CALLS = CC / "claude-code_v1.0.98_sonnet-4_session-1af7fc5e_7calls_parallel5+3.jsonl"
CC_BIG = CC / "claude-code_v1.0.98_sonnet-4_session-fe5e1c67_170calls_sidechains_parallel2+3+2.jsonl"
CC_V2 = (
    REALDATA / "claude-reliability/claude-code_v2.1.14_opus-4-5_coverage-test-fix_14calls_parallel2x2.jsonl"
)
OPENHANDS_STREAM = REALDATA / "OpenHands/openhands_claude-3-5-sonnet_basic_gui_mode_event_stream.json"
OPENHANDS_EVAL = (
    REALDATA
    / "OpenHands/openhands_codeact_llama-4-maverick_multi-swe-bench_3episodes_response_latencies.jsonl"
)
OTLP = REALDATA / "agent-prism/otlp_json_openinference_smolagents_o1_6_llm_spans.json"
LANGFUSE = REALDATA / "agent-prism/langfuse_trace_export_vercel-ai_gpt-5_tool_call_inside_stream.json"
BASH_RESULT = 13
"""Line 13 of the 5-call session: the Bash result of round 1's batch, written before its four Glob
siblings' lines though Claude Code stamped it 17 ms after them (results in call order)."""


def docs(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_lines(tmp_path: Path, name: str, items: list[dict]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(d) + "\n" for d in items), encoding="utf-8")
    return path


def shifted(stamp: str, seconds: float) -> str:
    t = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


# --- Claude Code ------------------------------------------------------------------------------------


@needs_realdata
def test_a_batchs_results_in_call_order_are_not_damage(tmp_path) -> None:
    """The real log writes the Bash result before its Globs' though it is 17 ms later; with that Bash
    made 10 s slower (every later line shifted), the log is still consistent: no damage, the Bash is
    10 s longer, and the next model call still starts when the last result came."""
    items = docs(CC_5CALLS)
    assert '"tool_use_id":"toolu_01UwiR8tuGvGJN2J7BW4KbPx"' in json.dumps(
        items[BASH_RESULT - 1], separators=(",", ":")
    )
    for d in items[BASH_RESULT - 1 :]:
        d["timestamp"] = shifted(d["timestamp"], 10.0)
    for d in items[BASH_RESULT : BASH_RESULT + 2]:  # the last two Globs' results keep their times
        d["timestamp"] = shifted(d["timestamp"], -10.0)
    original = import_claude_code(CC_5CALLS)
    result = import_claude_code(write_lines(tmp_path, "slow_bash.jsonl", items))
    assert result.report.clean, result.report.summary()
    (before,), (after,) = original, result
    bash = [(b, a) for b, a in zip(before.rounds[1].executions, after.rounds[1].executions, strict=True)]
    assert after.rounds[1].executions[0].name == "Bash"
    assert bash[0][1].duration_s == pytest.approx(bash[0][0].duration_s + 10.0, abs=1e-6)
    assert all(a.duration_s == pytest.approx(b.duration_s) for b, a in bash[1:])
    assert after.rounds[2].model_call.latency_s == pytest.approx(
        before.rounds[2].model_call.latency_s, abs=1e-6
    )
    assert after.rounds[2].model_call.timing.source == "recorded"


@needs_realdata
def test_a_latency_resting_on_an_untrusted_timestamp_is_not_recorded(tmp_path) -> None:
    """The tester's case: the Bash result that completed round 2's request has a timestamp that
    contradicts the lines around it. That result's duration and round 2's model latency are not in
    the log: placeholders (never 'recorded' from an earlier line), and a recorded-only comparison
    leaves the trace out."""
    items = docs(CC_5CALLS)
    items[BASH_RESULT - 1]["timestamp"] = shifted(items[BASH_RESULT - 1]["timestamp"], -450.0)
    result = import_claude_code(write_lines(tmp_path, "bad_ts.jsonl", items))
    (damaged,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert damaged.where == f"bad_ts.jsonl line {BASH_RESULT}"
    (trace,) = result
    bash = trace.rounds[1].executions[0]
    assert (bash.name, bash.timing.source) == ("Bash", "placeholder")
    model = trace.rounds[2].model_call
    assert model.timing.source == "placeholder" and f"line {BASH_RESULT}, whose timestamp is not trusted" in (
        model.timing.note
    )
    assert all(r.model_call.timing.source == "recorded" for k, r in enumerate(trace.rounds[:-1]) if k != 2)
    table = compare([trace], ["parallel"], timings="recorded")
    assert table.runs.empty and len(table.excluded) == 1


@needs_realdata
def test_bytes_that_are_not_utf8_are_counted_exactly_and_marked_in_the_trace(tmp_path) -> None:
    raw = CC_5CALLS.read_bytes().split(b"\n")
    line = raw[BASH_RESULT - 1]
    cut = line.index(b'"tool_result"')
    raw[BASH_RESULT - 1] = line[:cut] + line[cut:].replace(b'"content":"', b'"content":"\xff\xfe', 1)
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(b"\n".join(raw))
    result = import_claude_code(path)
    (damaged,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert "2 byte(s) are not UTF-8" in damaged.what and "2 U+FFFD" in damaged.what
    (trace,) = result
    bash = trace.rounds[1].executions[0]
    assert bash.result.startswith("\ufffd\ufffd") and f"line {BASH_RESULT}" in bash.timing.note
    assert "2 U+FFFD" in bash.timing.note and "not UTF-8" in trace.metadata.notes
    # a lone continuation byte and a cut multi-byte sequence: one U+FFFD each, bytes counted apart
    raw[BASH_RESULT - 1] = line[:cut] + line[cut:].replace(b'"content":"', b'"content":"\x80\xe2\x82', 1)
    path.write_bytes(b"\n".join(raw))
    (damaged,) = [i for i in import_claude_code(path).report.issues if i.kind == "damaged"]
    assert "3 byte(s) are not UTF-8" in damaged.what and "2 U+FFFD" in damaged.what


@needs_realdata
def test_a_cut_line_that_shows_a_model_call_is_counted(tmp_path) -> None:
    """The last line cut short: what is left of it shows a message id no other line holds, so the
    source counts that model call (and the summary says an unreadable part was not counted)."""
    text = CC_5CALLS.read_text(encoding="utf-8").splitlines()
    last = text[-1]
    text[-1] = last[: last.index('"content"') + 20]
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    result = import_claude_code(path)
    (failed,) = [i for i in result.report.issues if i.kind == "failed"]
    assert failed.model_calls == 1 and "a model call (message msg_" in failed.what
    assert "Unterminated string starting at: column" in failed.what and "at at" not in failed.what
    original = import_claude_code(CC_5CALLS)
    assert result.report.source_model_calls == original.report.source_model_calls
    text[-1] = last[:40]  # nothing left to tell
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    assert "+ whatever 1 unreadable part(s) held" in import_claude_code(path).report.summary()


# --- what the timestamps can tell --------------------------------------------------------------------


def test_overlap_within_the_timestamps_resolution_cannot_be_told() -> None:
    """1 ms timestamps and whole-ms durations: a 1 ms overlap (or gap) cannot tell."""
    assert how_batch_ran([(35.609, 35.613), (35.612, 35.616)]) == "cannot tell"
    assert how_batch_ran([(35.609, 35.613), (35.614, 35.616)]) == "cannot tell"
    assert how_batch_ran([(35.609, 35.613), (35.610, 35.616)]) == "overlapped"
    assert how_batch_ran([(35.609, 35.613), (35.620, 35.630)]) == "one after another"
    assert how_batch_ran([(0.0, 1.0), (0.5, 2.0), (2.001, 3.0)]) == "partly overlapped"
    assert how_batch_ran([(0.0, 1.0)]) == "not evidenced"


@needs_realdata
def test_the_tester_batches_that_rest_on_one_millisecond() -> None:
    """fe5e1c67's first batch (Glob [35.609, 35.613] and Glob [35.612, 35.616]) cannot tell; a trace
    whose only evidence cannot tell has no mode (metadata.mode empty, the notes say why)."""
    main = next(t for t in import_claude_code(CC_BIG) if t.metadata.title.endswith("main turn 1"))
    assert recorded_batch(main.rounds[0]) == "cannot tell"
    assert "round 0 (2 calls) cannot tell" in main.metadata.notes
    turn2 = next(t for t in import_claude_code(CC_V2) if t.metadata.title.endswith("main turn 2"))
    assert turn2.metadata.mode is None and "mode not evidenced" in turn2.metadata.notes
    assert replay(turn2).status == "completed"  # replays default to sequential, as the notes say


# --- replays keep the recording's labels and its end ----------------------------------------------


@needs_realdata
def test_an_unknown_first_chunk_stays_unknown_in_a_replay(tmp_path) -> None:
    """The tester's case: OpenHands records no first-chunk time; its replay (and a trace saved from
    it) said the whole latency. A known one stays as far after the start as recorded."""
    result = import_openhands(OPENHANDS_STREAM)
    for trace in result:
        unknown = [r.model_call.first_chunk_at is None for r in trace.rounds]
        assert any(unknown)
        for mode in ("sequential", "parallel"):
            again = replay(trace, mode)
            assert [r.model_call.first_chunk_at is None for r in again.rounds] == unknown
        saved = Trace.from_run(again, TraceMetadata(title="replayed", origin="replayed"))
        assert [r.model_call.first_chunk_at is None for r in saved.rounds] == unknown
    # a known time to first token (Langfuse's completionStartTime) stays as long after the start
    (lf,) = import_langfuse(LANGFUSE)
    again = replay(lf, "parallel")
    for rec, rep in zip(lf.rounds, again.rounds, strict=True):
        assert rec.model_call.first_chunk_at is not None
        assert rep.model_call.first_chunk_at - rep.model_call.started_at == pytest.approx(
            rec.model_call.first_chunk_at - rec.model_call.started_at
        )
    path = tmp_path / "t.json"
    from toolcall_lab.trace_files import save

    save(result[0], path)
    assert cli.main(["replay", str(path), "--mode", "parallel", "--out", str(tmp_path / "r.json")]) == 0
    stored = json.loads((tmp_path / "r.json").read_text())
    assert [r["response"]["first_chunk_at"] is None for r in stored["rounds"]] == [
        r.model_call.first_chunk_at is None for r in result[0].rounds
    ]


@needs_realdata
def test_recordings_ended_by_the_agents_own_tool_replay_as_completed() -> None:
    """SWE-agent's submit, OpenHands' finish, smolagents' final_answer: the agent ended its run, so
    the trace is completed and every mode's replay is completed/agent_finished (no made-up answer);
    OpenHands' iteration limit is the recorded stop, never the loop's all-failed rule."""
    swe = import_swe_agent(REALDATA / "SWE-agent")
    finished = [*swe, *(t for t in import_openhands(OPENHANDS_EVAL) if t.outcome.reason == "finish_call")]
    finished += list(import_otlp(OTLP))
    assert len(finished) == 4
    for trace in finished:
        assert trace.outcome.status == "completed" and trace.rounds[-1].placeholder
        for mode in ("sequential", "parallel", "first_only"):
            run = replay(trace, mode)
            assert (run.status, run.reason, run.final_answer) == ("completed", "agent_finished", None), mode
    (limited,) = [t for t in import_openhands(OPENHANDS_EVAL) if t.outcome.reason == "max_iterations"]
    assert "maximum iteration" in (limited.outcome.error or "")
    assert "maximum iteration" in (limited.rounds[-1].placeholder or "")
    run = replay(limited, "parallel")
    assert (run.status, run.reason) == ("incomplete", "stopped_as_recorded")
    assert "max_iterations" in (run.error or "") and "All tool calls failed" not in (run.error or "")


def test_the_summary_totals_comparable_runs_apart() -> None:
    """first_only skips calls (less work): its total can read faster than sequential; the summary
    keeps a total of the comparable runs and the text says which runs are not comparable."""
    traces = [s.record() for s in SCENARIOS.values()]
    table = compare(traces, ["sequential", "first_only"])
    s = table.summary
    skipped = s.loc["first_only", "traces"] - s.loc["first_only", "comparable_runs"]
    assert skipped > 0
    runs = table.runs[table.runs["in_all_modes"] & table.runs["comparable"]]
    assert s.loc["first_only", "comparable_wall_time_s"] == pytest.approx(
        runs[runs["mode"] == "first_only"]["wall_time_s"].sum()
    )
    assert f"first_only: {skipped} run(s) not comparable" in summary_text(table)


@needs_realdata
def test_bytes_that_are_not_utf8_are_marked_in_every_importers_traces(tmp_path) -> None:
    """Where an importer cannot tie the bytes to one text, its traces still say the source had them."""
    data = OPENHANDS_STREAM.read_bytes()
    cut = data.index(b'"content": "') + len(b'"content": "')
    path = tmp_path / "stream.json"
    path.write_bytes(data[:cut] + b"\xff" + data[cut:])
    result = import_openhands(path)
    (damaged,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert "1 byte(s) are not UTF-8" in damaged.what
    assert all("not UTF-8" in t.metadata.notes and damaged.where in t.metadata.notes for t in result)

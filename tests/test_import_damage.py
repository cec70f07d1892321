"""Damaged and odd input, made in each test from the real files (never stored): every problem is
reported by file and line, every good line still imported, no invented call, no negative time, and
a number that cannot be trusted is not labelled ``recorded``.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab import cli
from toolcall_lab.analysis import compare
from toolcall_lab.importers import (
    KINDS,
    import_claude_code,
    import_langfuse,
    import_openhands,
    import_otlp,
    import_recording,
    import_source,
    import_swe_agent,
)
from toolcall_lab.replay import replay

pytestmark = needs_realdata
CC = REALDATA / "claude-code-viewer"
CC_5CALLS = CC / "claude-code_v1.0.98_sonnet-4_session-1af7fc5e_7calls_parallel5+3.jsonl"
OPENHANDS_STREAM = REALDATA / "OpenHands/openhands_claude-3-5-sonnet_basic_gui_mode_event_stream.json"
OPENHANDS_EVAL = (
    REALDATA
    / "OpenHands/openhands_codeact_llama-4-maverick_multi-swe-bench_3episodes_response_latencies.jsonl"
)
LANGFUSE = REALDATA / "agent-prism/langfuse_trace_export_vercel-ai_gpt-5_tool_call_inside_stream.json"
OTLP = REALDATA / "agent-prism/otlp_json_openinference_smolagents_o1_6_llm_spans.json"


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def line_with(lines: list[str], *needles: str) -> int:
    return next(i for i, line in enumerate(lines) if all(n in line for n in needles))


def kinds(result) -> Counter[str]:
    return Counter(i.kind for i in result.report.issues)


def sane(result) -> None:
    """No negative time anywhere, and every number resting on a damaged line says so."""
    for trace in result:
        for r in trace.rounds:
            mc = r.model_call
            assert mc.started_at >= 0 and mc.latency_s >= 0
            assert all(c.offset_s >= 0 for c in mc.chunks)
            assert all(e.started_at >= 0 and e.duration_s >= 0 for e in r.executions)
        assert trace.metadata.recorded_wall_s is None or trace.metadata.recorded_wall_s >= 0


def shape(result) -> list[tuple[str, int, tuple[str, ...]]]:
    return [(t.metadata.title.split(" main ")[-1], len(t.rounds), tuple(t.timing_sources)) for t in result]


# --- Claude Code ------------------------------------------------------------------------------------


def test_shuffled_lines_are_read_in_parent_order_and_reported(tmp_path) -> None:
    """Every line names the line it follows (parentUuid): the order is rebuilt, never invented."""
    original = import_claude_code(CC_5CALLS)
    lines = lines_of(CC_5CALLS)
    random.Random(7).shuffle(lines)
    result = import_claude_code(write(tmp_path, "shuffled.jsonl", lines))
    report = result.report
    assert (report.source_calls, report.imported_calls, report.imported_model_calls) == (12, 12, 7)
    assert kinds(result) == {"damaged": 1} and "read in parentUuid order" in report.issues[0].what
    assert [t.wall_time_s for t in result] == pytest.approx([t.wall_time_s for t in original])
    assert [t.metadata.recorded_wall_s for t in result] == [t.metadata.recorded_wall_s for t in original]
    sane(result)
    assert (
        cli.main(["import", "claude-code", str(tmp_path / "shuffled.jsonl"), "--out", str(tmp_path / "o")])
        == 1
    )


def test_repeated_lines_are_read_once(tmp_path) -> None:
    lines = lines_of(CC_5CALLS)
    use = line_with(lines, '"tool_use"', '"Glob"')
    result_line = line_with(lines, '"tool_result"', "durationMs")
    dup = [
        *lines[: use + 1],
        lines[use],
        *lines[use + 1 : result_line + 1],
        lines[result_line],
        *lines[result_line + 1 :],
    ]
    result = import_claude_code(write(tmp_path, "dup.jsonl", dup))
    report = result.report
    assert (report.source_calls, report.imported_calls) == (12, 12) and report.ok
    repeated = [i for i in report.issues if i.kind == "damaged"]
    assert [i.where for i in repeated] == [f"dup.jsonl line {use + 2}", f"dup.jsonl line {result_line + 3}"]
    assert all("repeats line" in i.what for i in repeated)
    assert all(
        len({c.tool_call_id for c in r.tool_calls}) == len(r.tool_calls) for t in result for r in t.rounds
    )


def test_a_repeated_call_id_on_another_line_is_one_call(tmp_path) -> None:
    lines = lines_of(CC_5CALLS)
    use = line_with(lines, '"tool_use"', '"Glob"')
    doc = json.loads(lines[use])
    doc["uuid"] = "0000-another-line"
    lines.insert(use + 1, json.dumps(doc))
    result = import_claude_code(write(tmp_path, "again.jsonl", lines))
    assert (result.report.source_calls, result.report.imported_calls) == (12, 12)
    assert any("was already on line" in i.what for i in result.report.issues if i.kind == "damaged")


def test_timestamps_that_contradict_the_order_are_not_trusted(tmp_path) -> None:
    """A response line dated 27 s before its request, a result dated before its tool_use: reported by
    line; what rests on them is a placeholder or spread, never a clamped 0 labelled recorded."""
    lines = lines_of(CC_5CALLS)
    text_line = line_with(lines, '"assistant"', '"type":"text"', "msg_01")  # a response's first line
    k = [i for i, line in enumerate(lines) if '"type":"assistant"' in line][3]
    docs = [json.loads(line) for line in lines]
    docs[k]["timestamp"] = "2025-09-03T00:47:10.000Z"  # far before the line it follows
    result_k = line_with(lines, '"tool_result"', "durationMs")
    docs[result_k]["timestamp"] = "2025-09-03T00:47:20.000Z"
    result = import_claude_code(write(tmp_path, "ts.jsonl", [json.dumps(d) for d in docs]))
    damaged = [i for i in result.report.issues if i.kind == "damaged"]
    assert f"ts.jsonl line {k + 1}" in {i.where for i in damaged}
    assert f"ts.jsonl line {result_k + 1}" in {i.where for i in damaged}
    assert all("contradicts the order" in i.what for i in damaged if "line" in i.where)
    sane(result)
    assert result.report.imported_calls == 12 and text_line >= 0
    for trace in result:  # a chunk resting on the bad line is not "recorded"
        for r in trace.rounds:
            if any(c.payload.get("id") == docs[k]["message"]["id"] for c in r.model_call.chunks):
                assert r.model_call.chunk_timing != "recorded" or r.model_call.timing.source != "recorded"


def test_a_duration_longer_than_the_log_allows_is_not_used(tmp_path) -> None:
    lines = lines_of(CC_5CALLS)
    k = line_with(lines, '"tool_result"', "durationMs")
    doc = json.loads(lines[k])
    doc["toolUseResult"]["durationMs"] = 50_000
    lines[k] = json.dumps(doc)
    result = import_claude_code(write(tmp_path, "long.jsonl", lines))
    (issue,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert issue.where == f"long.jsonl line {k + 1}" and "50000 ms" in issue.what and "not used" in issue.what
    durations = [e.duration_s for t in result for r in t.rounds for e in r.executions]
    assert max(durations) < 50


def test_a_missing_result_mid_session_is_not_ok_and_is_counted(tmp_path) -> None:
    """The tester's `sed 13d`: the Bash result line is gone while the session goes on."""
    lines = lines_of(CC_5CALLS)
    k = line_with(lines, '"tool_result"', "W4KbPx")
    result = import_claude_code(write(tmp_path, "dropped.jsonl", lines[:k] + lines[k + 1 :]))
    report = result.report
    assert report.missing_results == 1 and "1 without a result in the source" in report.summary()
    (bash,) = [e for t in result for r in t.rounds for e in r.executions if e.tool_call_id.endswith("W4KbPx")]
    assert bash.status == "not_recorded" and bash.timing.source == "placeholder"
    assert any("goes on after it" in i.what for i in report.issues if i.kind == "damaged")
    assert (
        cli.main(["import", "claude-code", str(tmp_path / "dropped.jsonl"), "--out", str(tmp_path / "o")])
        == 1
    )
    for trace in result:  # compare(timings="recorded") does not keep a trace resting on it
        table = compare([trace], ["sequential"], timings="recorded")
        assert table.runs.empty == any(e.status == "not_recorded" for r in trace.rounds for e in r.executions)


def test_a_recording_cut_after_two_of_five_results(tmp_path) -> None:
    lines = lines_of(CC_5CALLS)
    k = line_with(lines, '"tool_result"', "Hs81PK")
    (trace,) = import_claude_code(write(tmp_path, "cut.jsonl", lines[: k + 1]))
    batch = trace.rounds[1]
    assert Counter(e.status for e in batch.executions) == {"not_recorded": 3, "ok": 2}
    assert trace.outcome.reason == "recording_ends_before_some_tool_results"
    assert trace.rounds[-1].placeholder and "3 of 5 results" in trace.rounds[-1].placeholder
    replayed = replay(trace, "parallel")
    assert (replayed.status, replayed.reason, replayed.final_answer) == (
        "incomplete",
        "recording_incomplete",
        None,
    )


def _with_a_damaged_result_line(path, old: bytes, new: bytes):
    """The 5-call session written to `path` with `old` -> `new` in one tool-result line (W4KbPx's);
    its import and that line's 0-based number."""
    raw = CC_5CALLS.read_bytes().split(b"\n")
    k = next(i for i, line in enumerate(raw) if b'"tool_result"' in line and b"W4KbPx" in line)
    raw[k] = raw[k].replace(old, new, 1)
    path.write_bytes(b"\n".join(raw))
    return import_claude_code(path), k


def test_a_bad_byte_costs_one_character_not_the_file(tmp_path) -> None:
    result, k = _with_a_damaged_result_line(
        tmp_path / "bytes.jsonl", b'"is_error":false', b'"is_error":false,"x":"\xff"'
    )
    (issue,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert issue.where == f"bytes.jsonl line {k + 1}" and "0xff" in issue.what
    assert result.report.imported_calls == 12 and result.report.missing_results == 0


def test_a_bad_byte_in_a_key_is_reported_and_the_line_still_read(tmp_path) -> None:
    """The tester's zz_bad.jsonl: the byte lands in the "type" key of a result line."""
    result, k = _with_a_damaged_result_line(
        tmp_path / "key.jsonl", b'"type":"user"', b'"ty\xff\xfepe":"user"'
    )
    assert result.report.imported_calls == 12 and result.report.missing_results == 0
    assert [i.where for i in result.report.issues if i.kind == "damaged"] == [f"key.jsonl line {k + 1}"] * 2


def test_a_folder_keeps_every_good_file(tmp_path) -> None:
    """Three real sessions, a copy of one with a bad byte, one of another kind, one empty, one text
    file. The copy repeats the lines of its original (same uuids): they are read once."""
    for path in sorted(CC.glob("*.jsonl")):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    (tmp_path / "zz_bytes.jsonl").write_bytes(CC_5CALLS.read_bytes().replace(b"Glob", b"Gl\xffob", 1))
    (tmp_path / "other.jsonl").write_bytes(OPENHANDS_EVAL.read_bytes())
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("hello")
    result = import_claude_code(tmp_path)
    report = result.report
    assert report.source_calls == 12 + 21 + 167 and report.imported_calls >= 12 + 21 + 167
    by_where = {i.where: i for i in report.issues}
    assert by_where["zz_bytes.jsonl main turn 1"].kind == "note"
    assert "read once, from claude-code_v1.0.98" in by_where["zz_bytes.jsonl main turn 1"].what
    assert "looks like openhands" in by_where["other.jsonl"].what
    assert "empty file" in by_where["empty.jsonl"].what and by_where["notes.txt"].kind == "skipped"
    assert by_where["zz_bytes.jsonl line 7"].kind == "damaged"


def test_wrong_kind_and_empty_files_exit_2_naming_the_file(tmp_path, capsys) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("")
    for kind in KINDS:
        assert cli.main(["import", kind, str(empty), "--out", str(tmp_path / "o")]) == 2, kind
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "empty.json" in err, (kind, err)
    assert cli.main(["import", "claude-code", str(OPENHANDS_EVAL), "--out", str(tmp_path / "o")]) == 2
    assert "looks like openhands" in capsys.readouterr().err
    assert cli.main(["import", "otlp", str(OPENHANDS_STREAM), "--out", str(tmp_path / "o")]) == 2
    assert "looks like openhands" in capsys.readouterr().err
    assert cli.main(["import", "openhands", str(CC_5CALLS), "--out", str(tmp_path / "o")]) == 2
    assert "looks like claude-code" in capsys.readouterr().err


# --- OpenHands --------------------------------------------------------------------------------------


def test_openhands_shuffled_events_are_read_in_id_order(tmp_path) -> None:
    events = json.loads(OPENHANDS_STREAM.read_text())
    random.Random(3).shuffle(events)
    path = tmp_path / "shuffled.json"
    path.write_text(json.dumps(events))
    result, original = import_openhands(path), import_openhands(OPENHANDS_STREAM)
    assert kinds(result) == {"damaged": 1} and "read in id order" in result.report.issues[0].what
    assert [t.wall_time_s for t in result] == pytest.approx([t.wall_time_s for t in original])
    sane(result)


def test_openhands_dropped_observation_and_bad_timestamp(tmp_path) -> None:
    events = json.loads(OPENHANDS_STREAM.read_text())
    dropped = next(e for e in events if e.get("observation") == "edit")
    events = [e for e in events if e is not dropped]
    action = next(e for e in events if e.get("action") == "run")
    action["timestamp"] = None
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(events))
    result = import_openhands(path)
    report = result.report
    assert report.missing_results == 1 and report.imported_calls == 4
    damaged = [i.what for i in report.issues if i.kind == "damaged"]
    assert any("goes on after it" in w for w in damaged) and any("no valid timestamp" in w for w in damaged)
    sane(result)


def test_openhands_folder_with_an_unreadable_file(tmp_path) -> None:
    (tmp_path / "good.json").write_bytes(OPENHANDS_STREAM.read_bytes())
    (tmp_path / "cut.json").write_bytes(OPENHANDS_STREAM.read_bytes()[:5000])
    result = import_openhands(tmp_path)
    (failed,) = [i for i in result.report.issues if i.kind == "failed"]
    assert failed.where == "cut.json" and "not valid JSON" in failed.what and "line" in failed.what
    assert result.report.imported_calls == 4


# --- OTLP (GenAI conventions, generated here) -------------------------------------------------------

T0 = 1_700_000_000


def _span(span_id: str, name: str, start: float, end: float | None, attrs: dict[str, str]) -> dict:
    return {
        "traceId": "AAAAAAAAAAAAAAAAAAAAAA==",
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": str(int((T0 + start) * 1e9)),
        "endTimeUnixNano": None if end is None else str(int((T0 + end) * 1e9)),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }


def genai(tmp_path: Path, *, system: bool, tools: str, end_missing: bool = False) -> Path:
    """Chat 0-2 s with 3 calls, tool spans (`tools`: "parallel" 2.1-3.0 each, "sequential" one after
    another, "none"), chat 5-6 s with the answer; no system message unless `system`."""
    head = [{"role": "system", "parts": [{"type": "text", "content": "Be brief."}]}] if system else []
    user = [
        *head,
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris, London, Rome?"}]},
    ]
    cities = [("c1", "Paris"), ("c2", "London"), ("c3", "Rome")]
    out1 = [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": i, "name": "get_weather", "arguments": {"city": c}}
                for i, c in cities
            ],
        }
    ]
    answers = [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": i, "response": f"{c}: 20C"}]}
        for i, c in cities
    ]
    out2 = [{"role": "assistant", "parts": [{"type": "text", "content": "All 20C."}]}]
    spans = [
        _span(
            "chat1",
            "chat gpt-4o",
            0,
            2,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(user),
                "gen_ai.output.messages": json.dumps(out1),
            },
        ),
        _span(
            "chat2",
            "chat gpt-4o",
            5,
            None if end_missing else 6,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(user + out1 + answers),
                "gen_ai.output.messages": json.dumps(out2),
            },
        ),
    ]
    for k, (cid, _) in enumerate(cities):
        if tools == "none":
            break
        start = 2.1 if tools == "parallel" else 2.1 + 0.95 * k
        spans.append(
            _span(
                f"tool{k}",
                "execute_tool get_weather",
                start,
                start + 0.9,
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.id": cid,
                },
            )
        )
    path = tmp_path / f"genai_{tools}_{system}_{end_missing}.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    return path


def test_otlp_a_conversation_without_a_system_prompt_is_one_trace(tmp_path) -> None:
    for system in (False, True):
        result = import_otlp(genai(tmp_path, system=system, tools="parallel"))
        (trace,) = result
        assert result.report.clean and (result.report.imported_model_calls, trace.n_calls) == (2, 3)
        assert trace.outcome.final_answer == "All 20C." and trace.metadata.recorded_wall_s == pytest.approx(
            6.0
        )


def test_otlp_tool_spans_that_overlapped_stay_overlapped(tmp_path) -> None:
    """The mode is what the spans show: calls that ran together are placed together, calls that ran
    one after another are placed so; the two files give different traces."""
    (par,) = import_otlp(genai(tmp_path, system=False, tools="parallel"))
    (seq,) = import_otlp(genai(tmp_path, system=False, tools="sequential"))
    assert (par.metadata.mode, seq.metadata.mode) == ("parallel", "sequential")
    assert [(round(e.started_at, 3), round(e.ended_at, 3)) for e in par.rounds[0].executions] == [
        (2.1, 3.0)
    ] * 3
    assert [round(e.started_at, 3) for e in seq.rounds[0].executions] == [2.1, 3.05, 4.0]
    assert par.wall_time_s == seq.wall_time_s == pytest.approx(6.0)
    assert "overlapped" in par.metadata.notes and "one after another" in seq.metadata.notes


def test_otlp_without_tool_spans_the_gap_is_not_charged_to_every_call(tmp_path) -> None:
    """3 s between the model spans hold 3 calls: 1 s each, estimated (not recorded), placed one after
    another inside the gap; a recorded-only comparison leaves the trace out."""
    (trace,) = import_otlp(genai(tmp_path, system=True, tools="none"))
    calls = trace.rounds[0].executions
    assert [e.duration_s for e in calls] == pytest.approx([1.0, 1.0, 1.0])
    assert {e.timing.source for e in calls} == {"estimated"} and "gap / 3" in calls[0].timing.note
    assert calls[-1].ended_at == pytest.approx(5.0) and trace.wall_time_s == pytest.approx(6.0)
    assert replay(trace, "sequential").wall_time_s == pytest.approx(6.0)
    table = compare([trace], ["sequential", "parallel"], timings="recorded")
    assert table.runs.empty and "estimated" in table.excluded["reason"][0]


def test_otlp_a_span_without_an_end_is_reported(tmp_path) -> None:
    result = import_otlp(genai(tmp_path, system=True, tools="parallel", end_missing=True))
    (issue,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert "span chat2" in issue.where and "no valid start and end" in issue.what
    (trace,) = result
    assert trace.rounds[1].model_call.timing.source == "placeholder"


def test_otlp_real_smolagents_incomplete_recording_is_marked(tmp_path) -> None:
    """final_answer's result is not in the export: not_recorded and a marked closing round; the agent
    ended its own run with its final_answer tool, so the trace and its replays are completed
    (agent_finished), never with a made-up final answer; a recorded-only comparison leaves it out."""
    (trace,) = import_otlp(OTLP)
    final = trace.rounds[1].executions[0]
    assert (final.name, final.status) == ("final_answer", "not_recorded")
    assert trace.rounds[-1].placeholder and trace.outcome.final_answer is None
    assert (trace.outcome.status, trace.outcome.reason) == ("completed", "finish_call")
    table = compare([trace], ["sequential", "parallel"])
    assert set(table.runs["status"]) == {"completed"} and set(table.runs["reason"]) == {"agent_finished"}
    assert replay(trace, "parallel").final_answer is None
    assert compare([trace], ["parallel"], timings="recorded").runs.empty


# --- Langfuse, recordings, first chunk ----------------------------------------------------------------


def test_langfuse_an_observation_still_running(tmp_path) -> None:
    doc = json.loads(LANGFUSE.read_text())
    tool = next(o for o in doc["observations"] if o.get("name") == "ai.toolCall")
    tool["endTime"] = None
    path = tmp_path / "running.json"
    path.write_text(json.dumps(doc))
    result = import_langfuse(path)
    (issue,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert tool["id"] in issue.where and "endTime None" in issue.what
    (trace,) = result
    assert trace.rounds[0].executions[0].timing.source == "placeholder"


def test_first_chunk_is_recorded_or_unknown_never_the_whole_latency() -> None:
    """Langfuse records the first token (completionStartTime): 1.188 s, not the 9.111 s the model's
    part lasted; sources without it (OpenHands, OTLP, inspect bodies) leave it unknown."""
    (trace,) = import_langfuse(LANGFUSE)
    first = trace.rounds[0].model_call
    assert first.ttfc_s == pytest.approx(1.188, abs=0.001) and first.latency_s == pytest.approx(
        9.111, abs=0.001
    )
    (otlp,) = import_otlp(OTLP)
    assert all(r.model_call.first_chunk_at is None for r in otlp.rounds)
    assert all(
        r.model_call.first_chunk_at is None for t in import_openhands(OPENHANDS_STREAM) for r in t.rounds
    )
    cc = import_claude_code(CC_5CALLS)[0]
    assert all(r.model_call.ttfc_s == pytest.approx(r.model_call.chunks[0].offset_s) for r in cc.rounds)


def test_every_choice_of_an_n2_stream_is_imported() -> None:
    result = import_recording(
        REALDATA / "watsonx-ai-java-sdk/watsonx_gpt-oss-120b_chat_stream_n2_choices_1_tool_each.sse"
    )
    assert (result.report.source_calls, result.report.imported_calls) == (2, 2)
    assert (result.report.source_model_calls, result.report.imported_model_calls) == (1, 1)
    alternative = next(t for t in result if "choice 1" in t.metadata.title)
    assert (
        alternative.rounds[0].tool_calls[0].tool_call_id == "chatcmpl-tool-3a69f4eceb9d46278c883fe887e05d7f"
    )


def test_a_recordings_folder_keeps_every_readable_file() -> None:
    """pydantic-ai holds one stream that ends with a provider error: it is named, the rest imported."""
    result = import_recording(REALDATA / "pydantic-ai")
    (failed,) = [i for i in result.report.issues if i.kind == "failed"]
    assert (
        failed.where.startswith("groq_chat_stream_gpt-oss-120b_midstream_error") and "line 190" in failed.what
    )
    assert len(result) > 30


def test_a_client_id_for_a_call_without_one_is_noted() -> None:
    (trace,) = import_recording(
        REALDATA / "pydantic-ai/gemini_openai_compat_nonstream_empty_tool_call_id.cassette.yaml"
    )
    assert "call_0_0 (sent as 'pyd_ai_cee885c699414386a7e14b7ec43cadbc')" in trace.metadata.notes
    assert "request messages are the loop's" in trace.metadata.notes


# --- names, limits, BFCL ----------------------------------------------------------------------------


def test_parts_are_numbered_only_when_there_are_several(tmp_path) -> None:
    (swe,) = import_swe_agent(REALDATA / "SWE-agent")
    swe_result = import_swe_agent(REALDATA / "SWE-agent")
    assert "part" not in swe_result.slugs[0] and "part" not in swe.metadata.title
    result = import_openhands(OPENHANDS_EVAL)
    slugs = [s for s in result.slugs if "4588" in s]
    width = len(str(len(slugs)))  # parts are zero-padded to the width of their count
    assert len(slugs) >= 2 and slugs[0].endswith(f"_part{1:0{width}d}")
    assert slugs[-1].endswith(f"_part{len(slugs):0{width}d}")


def test_limit_must_be_a_positive_count(tmp_path, capsys) -> None:
    tau = REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json"
    for bad in ("0", "-1"):
        assert cli.main(["import", "tau-bench", str(tau), "--out", str(tmp_path), "--limit", bad]) == 2
        assert "whole number >= 1" in capsys.readouterr().err
    result = import_source("tau-bench", tau, limit=2)
    assert (
        {  # (each issue names its file first)
            tuple(i.where.split(" ")[:2])
            for i in result.report.issues
            if i.kind == "skipped" and "limit" in i.what
        }
        == {(tau.name, "trajectory")}
    )


def test_bfcl_folder_and_answer_file(tmp_path, capsys) -> None:
    result = import_source("bfcl", REALDATA / "bfcl", limit=2)
    assert len(result) == 8 and result.report.ok
    assert {e.status for t in result for r in t.rounds for e in r.executions} == {"not_recorded"}
    answers = REALDATA / "bfcl/possible_answer_BFCL_v4_parallel.jsonl"
    assert cli.main(["import", "bfcl", str(answers), "--out", str(tmp_path)]) == 2
    assert (
        "an answer file; give the question file beside it (BFCL_v4_parallel.jsonl)" in capsys.readouterr().err
    )
    readme = tmp_path / "README.md"
    readme.write_text("# not json\n")
    assert cli.main(["import", "bfcl", str(readme), "--out", str(tmp_path)]) == 2
    assert "line 1 is not valid JSON" in capsys.readouterr().err


def test_replays_of_recordings_that_stop_never_claim_a_final_answer() -> None:
    """The tester's case: OpenHands responses rejected before logging, and episodes ending after tool
    results, replayed under every mode, are incomplete with the placeholder named, never
    completed/final_answer; traces that ended with a real answer still complete."""
    result = import_openhands(OPENHANDS_EVAL)
    table = compare(list(result), ["sequential", "parallel"])
    for trace in result:
        rows = table.runs[table.runs["trace"] == trace.metadata.title]
        if trace.rounds[-1].placeholder is not None:
            expected = {
                "finish_call": ("completed", "agent_finished"),  # the agent's own finish tool
                "max_iterations": ("incomplete", "stopped_as_recorded"),  # OpenHands' iteration limit
            }.get(trace.outcome.reason, ("incomplete", "recording_incomplete"))
            assert {(s, r) for s, r in zip(rows["status"], rows["reason"], strict=True)} == {expected}
            assert replay(trace, "parallel").final_answer is None
        else:
            assert "incomplete" not in set(rows["status"])


def test_inspect_repeated_and_reordered_model_events(tmp_path) -> None:
    from toolcall_lab.importers import import_inspect

    source = (
        REALDATA
        / "inspect_ai/inspect_log_gpt-4o-mini_browser_agent_5_model_calls_with_raw_api_and_timings.json"
    )
    log = json.loads(source.read_text())
    events = log["samples"][0]["events"]
    models = [k for k, e in enumerate(events) if e.get("event") == "model"]
    events.insert(models[1] + 1, json.loads(json.dumps(events[models[1]])))  # a repeated model event
    a, b = models[2] + 1, models[3] + 1  # (shifted by the insert) two model events swapped
    events[a], events[b] = events[b], events[a]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    result = import_inspect(path)
    damaged = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert any("repeats model event" in w for w in damaged) and any("out of time order" in w for w in damaged)
    (trace,) = result
    (original,) = import_inspect(source)
    assert (trace.n_calls, len(trace.rounds)) == (original.n_calls, len(original.rounds))
    assert trace.wall_time_s == pytest.approx(original.wall_time_s)


def test_a_bfcl_folder_with_a_broken_question_file(tmp_path) -> None:
    for name in ("BFCL_v4_parallel.jsonl", "possible_answer_BFCL_v4_parallel.jsonl"):
        (tmp_path / name).write_bytes((REALDATA / "bfcl" / name).read_bytes())
    (tmp_path / "BFCL_v4_broken.jsonl").write_text(
        '{"id": "x", "question": [[{"role": "user", "content": "hi"}]], "function": []}\n{not json\n'
    )
    result = import_source("bfcl", tmp_path, limit=3)
    (failed,) = [i for i in result.report.issues if i.kind == "failed"]
    assert failed.where == "BFCL_v4_broken.jsonl" and "line 2 is not valid JSON" in failed.what
    assert len(result) == 3 and not any("possible_answer" in i.where for i in result.report.issues)

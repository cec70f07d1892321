"""Importers on the real files in ../shared/realdata: every call imported, every number labelled."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab import cli
from toolcall_lab.importers import (
    KINDS,
    import_bfcl,
    import_claude_code,
    import_inspect,
    import_langfuse,
    import_openhands,
    import_otlp,
    import_recording,
    import_source,
    import_swe_agent,
    import_tau_bench,
)
from toolcall_lab.replay import replay
from toolcall_lab.trace import RESULT_NOT_RECORDED
from toolcall_lab.trace_files import load

pytestmark = needs_realdata
FIXTURES = Path(__file__).parent / "fixtures"
CC = REALDATA / "claude-code-viewer"
CC_5CALLS = CC / "claude-code_v1.0.98_sonnet-4_session-1af7fc5e_7calls_parallel5+3.jsonl"
CC_SIDECHAINS = CC / "claude-code_v1.0.108_sonnet-4_session-5c0375b4_20calls_sidechains_parallel3x2.jsonl"
CC_BIG = CC / "claude-code_v1.0.98_sonnet-4_session-fe5e1c67_170calls_sidechains_parallel2+3+2.jsonl"
CC_V2 = (
    REALDATA / "claude-reliability/claude-code_v2.1.14_opus-4-5_coverage-test-fix_14calls_parallel2x2.jsonl"
)
OPENHANDS_EVAL = (
    REALDATA
    / "OpenHands/openhands_codeact_llama-4-maverick_multi-swe-bench_3episodes_response_latencies.jsonl"
)
OPENHANDS_STREAM = REALDATA / "OpenHands/openhands_claude-3-5-sonnet_basic_gui_mode_event_stream.json"
LANGFUSE = REALDATA / "agent-prism/langfuse_trace_export_vercel-ai_gpt-5_tool_call_inside_stream.json"
OTLP = REALDATA / "agent-prism/otlp_json_openinference_smolagents_o1_6_llm_spans.json"
TAU = REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json"


def by_title(result, text: str):
    (trace,) = [t for t in result if t.metadata.title.endswith(text)]
    return trace


def execution(trace, name: str):
    return next(e for r in trace.rounds for e in r.executions if e.name == name)


# --- Claude Code --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "calls", "model_calls"),
    [(CC_5CALLS, 12, 7), (CC_SIDECHAINS, 21, 20), (CC_BIG, 167, 170), (CC_V2, 13, 14)],
)
def test_claude_code_imports_every_call_with_recorded_timings(path, calls, model_calls) -> None:
    """The counts PROVENANCE.md gives for each transcript; every number from the log's timestamps,
    except the start of a call that may have waited for a sibling (not in the log: estimated); each
    trace placed as the log has it, so its wall time is the recorded one."""
    result = import_claude_code(path)
    report = result.report
    assert report.clean and (report.source_calls, report.imported_calls) == (calls, calls)
    assert (report.source_model_calls, report.imported_model_calls) == (model_calls, model_calls)
    for trace in result:
        assert {r.model_call.timing.source for r in trace.rounds} == {"recorded"}
        for e in (e for r in trace.rounds for e in r.executions):
            assert e.timing.source == "recorded" or (
                e.timing.source == "estimated" and "start not in the log" in e.timing.note
            )
        assert trace.wall_time_s == pytest.approx(trace.metadata.recorded_wall_s, abs=1e-6)
    assert all(r.model_call.chunk_timing == "recorded" for t in result for r in t.rounds)
    assert len(set(result.slugs)) == len(result)


def test_claude_code_parallel_batch_spread_over_lines() -> None:
    """Quirk: the 5 tool_use blocks of one response are 5 lines 1.26 s apart; the tools start after the
    last one. Glob durations come from toolUseResult.durationMs; Bash has none: timed from the end of
    the response to its result line (0.042 s), not from its own tool_use line (1.299 s)."""
    trace = import_claude_code(CC_5CALLS)[0]
    batch = trace.rounds[1]
    assert [c.name for c in batch.tool_calls] == ["Bash", "Glob", "Glob", "Glob", "Glob"]
    offsets = [c.offset_s for c in batch.model_call.chunks]
    assert offsets == sorted(offsets) and offsets[-1] - offsets[0] == pytest.approx(1.257, abs=0.001)
    bash, *globs = batch.executions
    assert [g.duration_s for g in globs] == pytest.approx([0.006, 0.004, 0.004, 0.003])
    assert all("toolUseResult.durationMs" in g.timing.note for g in globs)
    assert bash.duration_s == pytest.approx(0.042, abs=0.001) and "end of the response" in bash.timing.note
    assert "1.299 s" in bash.timing.note  # the raw figure is kept in the note
    assert trace.metadata.mode == "parallel"


def test_claude_code_sidechains_and_waiting_siblings() -> None:
    """Task sub-agents become their own traces; a Task call lasts the sub-agent's totalDurationMs; the
    TodoWrite whose result came 21 s after the response, right after a Task's, has no start in the
    log: its 0.018 s from that Task's result are estimated (the note keeps the 21 s), and it is
    placed where the log has it: ending at 45.158 s, after the Task; is_error results are errors; the
    Edit that failed alone does not end the trace: the recorded agent went on, and so does the replay
    (imported traces are built with all_failed_policy="continue")."""
    result = import_claude_code(CC_SIDECHAINS)
    main = by_title(result, "main turn 1")
    task_batch = main.rounds[2]
    failed_task, task, todo = task_batch.executions
    assert failed_task.status == "error" and "InputValidationError" in failed_task.result
    assert task.duration_s == pytest.approx(21.194) and "totalDurationMs" in task.timing.note
    assert todo.duration_s == pytest.approx(0.018, abs=0.002) and todo.timing.source == "estimated"
    assert "start not in the log" in todo.timing.note and "21.26" in todo.timing.note
    assert todo.ended_at == pytest.approx(45.158, abs=0.001) and todo.started_at >= task.ended_at - 1e-9
    alone = main.rounds[5]
    assert [e.status for e in alone.executions] == ["error"] and alone.executions[0].name == "Edit"
    assert (main.outcome.status, len(main.rounds)) == ("completed", 10)
    assert main.wall_time_s == pytest.approx(main.metadata.recorded_wall_s)
    assert main.metadata.settings["all_failed_policy"] == "continue"
    again = replay(main, "parallel")  # the replay follows the recording past the failed round
    assert (again.status, len(again.rounds)) == ("completed", 10)
    assert not any(t.metadata.title.endswith("(part 2)") for t in result)
    agent = [t for t in result if "sub-agent of Task toolu_014YF9TXhDRR7BnpasNJ7gjC" in t.metadata.title]
    assert len(agent) == 1 and agent[0].n_calls == 2 and "ran inside Task call" in agent[0].metadata.notes


def test_claude_code_replay_under_its_own_mode_matches_the_recorded_wall_time() -> None:
    """The timing derivation checked against the log: the Task sub-agents of the 170-call session's
    main thread overlapped in the log, so the trace's mode is parallel (evidence, not an assumption),
    and replayed that way it takes what the log says, within 0.1 %."""
    main = by_title(import_claude_code(CC_BIG), "main turn 1")
    assert main.metadata.recorded_wall_s == pytest.approx(531.63, abs=0.01)
    assert main.metadata.mode == "parallel" and "overlapped" in main.metadata.notes
    tasks = [e for r in main.rounds for e in r.executions if e.name == "Task"]
    assert any(
        a.started_at < b.ended_at and b.started_at < a.ended_at for a in tasks for b in tasks if a is not b
    )
    assert replay(main, "parallel").wall_time_s == pytest.approx(main.metadata.recorded_wall_s, rel=1e-3)
    assert replay(main, "sequential").wall_time_s > 1.5 * main.metadata.recorded_wall_s


# --- OpenHands, SWE-agent, inspect, OTLP, Langfuse ---------------------------------------------


def test_openhands_evaluation_output() -> None:
    """response_latencies give each model call; a response OpenHands rejected is not in the log: it
    ends a trace with a placeholder round saying so; finish is a call without an observation (status
    not_recorded, counted); a command with a non-zero exit code is an error (19 of them)."""
    result = import_openhands(OPENHANDS_EVAL)
    report = result.report
    assert report.clean and (report.source_calls, report.imported_calls) == (105, 105)
    assert (report.source_model_calls, report.imported_model_calls) == (107, 107)
    assert report.missing_results == 2 and Counter(i.kind for i in report.issues) == {"gap": 5}
    first = result[0]
    assert first.rounds[0].model_call.latency_s == pytest.approx(3.0569519996643066)
    assert "response_latencies" in first.rounds[0].model_call.timing.note
    finished = [t for t in result if t.outcome.reason == "finish_call"]
    assert len(finished) == 2
    for t in finished:
        finish = t.rounds[-2].executions[0]
        assert (finish.name, finish.status, finish.result) == ("finish", "not_recorded", RESULT_NOT_RECORDED)
        assert t.rounds[-1].placeholder and "finish tool" in t.rounds[-1].placeholder
    rejected = [t for t in result if t.outcome.reason == "response_not_recorded"]
    assert len(rejected) == 2 and "OpenHands rejected" in str(rejected[0].rounds[-1].placeholder)
    assert rejected[0].rounds[-1].model_call.timing.source == "recorded"
    failed = [e for t in result for r in t.rounds for e in r.executions if e.status == "error"]
    assert len(failed) == 19 and all("exit code" in e.timing.note for e in failed)


def test_openhands_event_stream() -> None:
    """The last command hit OpenHands' 30 s no-output limit (exit code -1): a timeout; every call of
    that round failed, and the agent went on to its final answer, so the trace goes on too
    (all_failed_policy="continue"): one trace."""
    (trace,) = import_openhands(OPENHANDS_STREAM)
    assert trace.n_calls == 4 and trace.outcome.status == "completed"
    last_run = trace.rounds[3].executions[0]
    assert last_run.duration_s == pytest.approx(30.580, abs=0.01) and last_run.status == "timeout"
    assert set(trace.timing_sources) == {"recorded"}


def test_swe_agent_execution_time_and_no_model_latency() -> None:
    (trace,) = import_swe_agent(REALDATA / "SWE-agent")
    assert trace.n_calls == 11 and trace.outcome.reason == "submitted"
    assert trace.rounds[0].executions[0].duration_s == 0.238734  # 0.238733730999229 s, to the microsecond
    assert {r.model_call.timing.source for r in trace.rounds} == {"placeholder"}
    assert "no model was called" in trace.metadata.notes


def test_inspect_log() -> None:
    (trace,) = import_inspect(REALDATA / "inspect_ai")
    assert trace.n_calls == 4 and trace.outcome.status == "completed" and len(trace.rounds) == 5
    assert trace.rounds[0].model_call.latency_s == pytest.approx(1.1010224996134639)
    assert trace.rounds[0].executions[0].duration_s == pytest.approx(4.317574)
    assert "working_time" in trace.rounds[0].executions[0].timing.note
    assert trace.tools[0]["function"]["description"].startswith("Navigate")  # attachment resolved


def test_otlp_openinference_smolagents() -> None:
    """No TOOL spans: web_search's result is the Observation the agent sent back, its duration the gap
    to the next LLM span; the four LLM spans without tool calls are reported, not silently dropped."""
    result = import_otlp(OTLP)
    report = result.report
    assert report.ok and report.imported_calls == 2 and report.source_model_calls == 6
    assert sum(i.model_calls for i in report.issues if i.kind == "skipped") == 4
    (trace,) = result
    search = trace.rounds[0].executions[0]
    assert search.result.startswith("Observation:") and search.duration_s == pytest.approx(1.207596)
    assert "upper bound" in search.timing.note
    assert trace.rounds[0].model_call.latency_s == pytest.approx(10.932165, abs=1e-5)  # span end - start
    assert len(import_otlp(OTLP, include_no_calls=True)) == 5


def test_otlp_genai_semantic_conventions() -> None:
    """Project-made fixture (tests/fixtures/otlp/README.md): chat spans with gen_ai.input/output
    messages, a parallel batch of two execute_tool spans (one failing), matched by call id."""
    result = import_otlp(FIXTURES / "otlp" / "genai_semconv_parallel_tools.json")
    assert result.report.ok
    (trace,) = result
    weather, stock = trace.rounds[0].executions
    assert (weather.name, weather.status, weather.duration_s) == ("get_weather", "ok", pytest.approx(0.4))
    assert (stock.status, stock.duration_s) == ("error", pytest.approx(1.2))
    assert trace.rounds[0].model_call.latency_s == pytest.approx(0.9)
    assert trace.outcome.final_answer == "Paris is rainy; the stock lookup failed."
    assert replay(trace, "parallel").wall_time_s == pytest.approx(0.9 + 1.2 + 0.7)


def test_langfuse_tool_inside_the_stream() -> None:
    """Quirk: the AI SDK ran the tool while the first step was streaming; the model's part ends when
    the tool started (9.111 s of the span's 12.085 s), so the replay matches the recorded 20.27 s."""
    (trace,) = import_langfuse(LANGFUSE)
    first = trace.rounds[0]
    assert first.model_call.latency_s == pytest.approx(9.111, abs=0.001)
    assert first.executions[0].duration_s == pytest.approx(2.968, abs=0.001)
    assert "12.085 s include the tool" in first.model_call.timing.note
    assert "rebuilt" in trace.metadata.notes
    assert replay(trace, "sequential").wall_time_s == pytest.approx(trace.metadata.recorded_wall_s, abs=0.02)


# --- recordings, tau-bench, BFCL ----------------------------------------------------------------

RECORDINGS = sorted(
    p
    for d in (
        "pydantic-ai",
        "anthropic-sdk-python",
        "openai-python",
        "simonw-llm",
        "vercel-ai",
        "watsonx-ai-java-sdk",
        "shediao-ai.cli",
    )
    for p in (REALDATA / d).iterdir()
    if "midstream_error" not in p.name
)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name[:60])
def test_every_recording_imports_every_call_and_replays_in_every_mode(path) -> None:
    result = import_recording(path)
    assert result.report.ok, result.report.summary()
    for trace in result:
        own = replay(trace, trace.metadata.mode)
        assert len(own.rounds) == len(trace.rounds)
        for mode in ("sequential", "parallel", "serialized"):
            got = replay(trace, mode)
            assert (got.status, got.reason, len(got.rounds)) == (own.status, own.reason, len(trace.rounds))


def test_streamed_three_call_cassette_keeps_its_calls() -> None:
    result = import_recording(
        REALDATA / "pydantic-ai/openai_chat_stream_gpt-4o_multiple_agents_parallel3.cassette.yaml"
    )
    (trace,) = result
    assert [c.name for c in trace.rounds[0].tool_calls] == ["get_country", "get_product_name", "get_image"]
    assert trace.outcome.reason == "recording_ends_before_tool_results"
    assert {e.status for e in trace.rounds[0].executions} == {"not_recorded"}
    assert result.report.missing_results == 3
    # the other agent's call had no tools; the three results are counted as not in the source
    assert Counter(i.kind for i in result.report.issues) == {"skipped": 1, "gap": 3}


def test_recorded_errors_fallback_ids_and_rebuilt_bodies_are_labelled() -> None:
    errors = import_recording(
        REALDATA / "anthropic-sdk-python/tool_runner_2rounds_nonstream_claude-haiku-4-5.json"
    )
    assert errors[0].rounds[0].executions[0].status == "error"  # is_error: true in the next request
    gemini = import_recording(
        REALDATA / "pydantic-ai/gemini_openai_compat_nonstream_empty_tool_call_id.cassette.yaml"
    )
    call = gemini[0].rounds[0].tool_calls[0]
    assert call.id_source == "fallback" and gemini[0].rounds[0].executions[0].result == "Noon"
    converted = import_recording(
        REALDATA / "pydantic-ai/anthropic_nonstream_parallel4_tool_use_2rounds.cassette.yaml"
    )
    notes = converted[0].metadata.notes
    assert "rebuilt, not verbatim" in notes and "verbatim" not in notes.replace("not verbatim", "")


def test_cassette_server_timings_are_reported_not_recorded() -> None:
    (trace,) = import_recording(
        REALDATA / "pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml"
    )
    assert [r.model_call.latency_s for r in trace.rounds[:3]] == pytest.approx([0.906, 0.379, 0.682], abs=0.3)
    assert [r.model_call.timing.source for r in trace.rounds[:3]] == ["reported"] * 3
    assert "openai-processing-ms" in trace.rounds[0].model_call.timing.note
    assert trace.rounds[0].model_call.chunk_timing == "spread"
    assert trace.rounds[0].model_call.chunks[0].payload.get("obfuscation") is not None  # chunks as recorded


def test_tau_bench_imports_every_call() -> None:
    """95 calls sat in segments that end in tool messages: they are traces too, and say so."""
    result = import_tau_bench(TAU)
    report = result.report
    assert report.ok and report.imported_calls == report.source_calls == 1164
    reasons = Counter(t.outcome.reason for t in result)
    assert reasons == {"final_answer": 518, "recording_ends_after_tool_results": 51}  # none split, none cut
    ending = [t for t in result if t.outcome.reason == "recording_ends_after_tool_results"]
    assert sum(t.n_calls for t in ending) >= 51
    assert all(set(t.timing_sources) <= {"estimated", "placeholder"} for t in result)
    errors = [e for t in result for r in t.rounds for e in r.executions if e.status == "error"]
    assert errors and all(e.result.startswith(("Error:", "Unknown action")) for e in errors)
    limited = import_tau_bench(TAU, limit=5)
    assert limited.report.ok and any("limit=5" in i.what for i in limited.report.issues)
    reused = [t for t in result if "call ids repeat across rounds" in (t.metadata.notes or "")]
    assert reused, "tau-bench reuses call ids across rounds (a tester counted 17 traces): noted on each"
    noted = [i for i in report.issues if i.what.startswith("call ids repeat across rounds")]
    assert len(noted) == len(reused)
    for t in reused:
        seen: dict[str, int] = {}
        for r in t.rounds:
            for cid in {c.tool_call_id for c in r.tool_calls}:
                seen[cid] = seen.get(cid, 0) + 1
        assert any(n > 1 for n in seen.values())


def test_bfcl_is_scripted_with_fallback_ids() -> None:
    result = import_bfcl(REALDATA / "bfcl/BFCL_v4_parallel_multiple.jsonl", limit=30)
    assert result.report.ok and len(result) == 30
    first = result[0]
    assert first.metadata.origin == "scripted" and first.outcome.reason == "dataset_has_no_final_answer"
    assert {c.id_source for c in first.rounds[0].tool_calls} == {"fallback"}
    assert "." not in json.dumps([t["function"]["name"] for t in first.tools])


# --- the command line -----------------------------------------------------------------------------


def test_cli_import_prints_a_summary_and_names_files_apart(tmp_path, capsys) -> None:
    """The four gpt-5.5 rounds share a name prefix: their files must not overwrite each other."""
    for path in sorted((REALDATA / "simonw-llm").glob("openai_responses_gpt-5.5_*.json")):
        assert cli.main(["import", "recording", str(path), "--out", str(tmp_path)]) == 0
    assert len(list(tmp_path.glob("*.json"))) == 4
    assert cli.main(["import", "claude-code", str(CC_5CALLS), "--out", str(tmp_path / "cc")]) == 0
    out = capsys.readouterr().out
    assert "tool calls:  12 in the source, 12 imported" in out and "wrote 1 trace file(s)" in out
    assert {load(p).metadata.source for p in (tmp_path / "cc").glob("*.json")}


def test_cli_import_never_overwrites_another_sources_file(tmp_path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        (folder / CC_5CALLS.name).write_bytes(CC_5CALLS.read_bytes())
    out = tmp_path / "out"
    assert cli.main(["import", "claude-code", str(a / CC_5CALLS.name), "--out", str(out)]) == 0
    assert cli.main(["import", "claude-code", str(b / CC_5CALLS.name), "--out", str(out)]) == 0
    assert len(list(out.glob("*.json"))) == 2  # same file name, different sources: suffixed, not replaced
    assert cli.main(["import", "claude-code", str(a / CC_5CALLS.name), "--out", str(out)]) == 0
    assert len(list(out.glob("*.json"))) == 2  # re-importing the same source replaces its own files


def test_cli_import_exits_non_zero_when_a_call_is_lost(tmp_path, capsys) -> None:
    lines = CC_5CALLS.read_text().splitlines()
    broken = next(i for i, line in enumerate(lines) if '"tool_use"' in line and '"Glob"' in line)
    lines[broken] = lines[broken][:120]  # a cut-off line holding a tool call
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert cli.main(["import", "claude-code", str(path), "--out", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    assert f"session.jsonl line {broken + 1}: not valid JSON" in captured.out
    assert "not every call" in captured.err
    assert list((tmp_path / "out").glob("*.json"))  # what could be imported is kept


def test_cli_import_bad_input_is_one_line(tmp_path, capsys) -> None:
    bad = tmp_path / "not_openhands.json"
    bad.write_text('{"hello": 1}')
    assert cli.main(["import", "swe-agent", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a file of kind swe-agent" in err and str(bad) in err
    assert cli.main(["import", "claude-code", str(CC_5CALLS), "--out", str(tmp_path), "--limit", "3"]) == 2
    assert "limit does not apply" in capsys.readouterr().err


def test_every_kind_has_a_real_source() -> None:
    sources = {
        "claude-code": CC_5CALLS,
        "openhands": OPENHANDS_STREAM,
        "swe-agent": REALDATA / "SWE-agent",
        "otlp": OTLP,
        "langfuse": LANGFUSE,
        "inspect": REALDATA / "inspect_ai",
        "recording": REALDATA / "openai-python/chat_stream_gpt-4o_parallel_2_tools_weather_stock.sse",
        "tau-bench": TAU,
        "bfcl": REALDATA / "bfcl/BFCL_v4_parallel.jsonl",
    }
    assert set(sources) == set(KINDS)
    for kind, source in sources.items():
        result = import_source(kind, source, limit=3 if "limit" in KINDS[kind].options else None)
        assert result.report.ok and len(result) > 0, kind


def test_openhands_unreadable_line_costs_only_its_episode(tmp_path) -> None:
    lines = OPENHANDS_EVAL.read_text().splitlines()
    lines[1] = lines[1][:200]
    path = tmp_path / "output.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = import_openhands(path)
    assert not result.report.ok
    (failed,) = [i for i in result.report.issues if i.kind == "failed"]
    assert failed.where == "output.jsonl line 2" and "not valid JSON" in failed.what
    assert {t.metadata.title.split(" episode ")[1].split(" (part")[0] for t in result} == {
        "ponylang__ponyc-4595",
        "ponylang__ponyc-4588",
    }


def test_claude_code_results_between_the_lines_of_one_response(tmp_path) -> None:
    """Newer Claude Code runs a tool while the response still streams: its result line can come before
    the response's next tool_use line. Made from the real v2.1.14 transcript by moving the first
    Read's result line up between the two Read lines; still one response with two calls."""
    lines = CC_V2.read_text().splitlines()
    second_read = next(i for i, line in enumerate(lines) if "ufNPZ9" in line and '"tool_use"' in line)
    first_result = next(i for i, line in enumerate(lines) if '"tool_result"' in line and "BUUJJE" in line)
    lines.insert(second_read, lines.pop(first_result))
    path = tmp_path / "interleaved.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = import_claude_code(path)
    assert result.report.ok and result.report.imported_model_calls == 14
    trace = by_title(result, "main turn 1")
    assert [c.name for c in trace.rounds[1].tool_calls] == ["Read", "Read"]


def test_openhands_actions_of_one_response_between_observations(tmp_path) -> None:
    """OpenHands runs the actions of one response one at a time: action, observation, action,
    observation. A two-call response written that way (a hand-made event stream) is one round."""

    def meta(call_id: str) -> dict:
        calls = [
            {
                "id": cid,
                "type": "function",
                "function": {"name": "execute_bash", "arguments": json.dumps({"command": c})},
            }
            for cid, c in (("toolu_a", "ls"), ("toolu_b", "pwd"))
        ]
        body = {
            "id": "resp-1",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": "Two.", "tool_calls": calls},
                }
            ],
        }
        return {
            "function_name": "execute_bash",
            "tool_call_id": call_id,
            "model_response": body,
            "total_calls_in_response": 2,
        }

    events = [
        {
            "id": 0,
            "timestamp": "2025-01-01T10:00:00.000",
            "source": "agent",
            "action": "system",
            "args": {"content": "sys", "tools": []},
        },
        {
            "id": 1,
            "timestamp": "2025-01-01T10:00:00.100",
            "source": "user",
            "action": "message",
            "args": {"content": "go"},
        },
        {
            "id": 2,
            "timestamp": "2025-01-01T10:00:02.000",
            "source": "agent",
            "action": "run",
            "tool_call_metadata": meta("toolu_a"),
            "args": {},
        },
        {
            "id": 3,
            "timestamp": "2025-01-01T10:00:02.500",
            "source": "agent",
            "observation": "run",
            "cause": 2,
            "content": "a.txt",
            "tool_call_metadata": meta("toolu_a"),
        },
        {
            "id": 4,
            "timestamp": "2025-01-01T10:00:02.600",
            "source": "agent",
            "action": "run",
            "tool_call_metadata": meta("toolu_b"),
            "args": {},
        },
        {
            "id": 5,
            "timestamp": "2025-01-01T10:00:03.600",
            "source": "agent",
            "observation": "run",
            "cause": 4,
            "content": "/w",
            "tool_call_metadata": meta("toolu_b"),
        },
        {
            "id": 6,
            "timestamp": "2025-01-01T10:00:05.000",
            "source": "agent",
            "action": "message",
            "args": {"content": "done"},
        },
    ]
    path = tmp_path / "stream.json"
    path.write_text(json.dumps(events))
    result = import_openhands(path)
    assert result.report.ok and result.report.imported_calls == 2
    (trace,) = result
    first, second = trace.rounds[0].executions
    assert (first.result, second.result) == ("a.txt", "/w")
    assert first.duration_s == pytest.approx(0.5) and second.duration_s == pytest.approx(1.0)
    assert trace.rounds[0].model_call.latency_s == pytest.approx(1.9)
    assert trace.outcome.final_answer == "done"

"""Issue 13, ninth pass: what the f13 tester found. Records told apart by an id alone (a repeated
OpenHands event id, Claude Code lines sharing a uuid, BFCL questions sharing an id, observations
sharing an id) are a repeat only when identical; figures whose evidence is missing or contradicts
are no longer ``recorded``; calls that exist in the source but had no record of their own are
imported. The tests over ``../shared/realdata`` damage copies in ``tmp_path``."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab.importers import import_source

OH_GUI = REALDATA / "OpenHands" / "openhands_claude-3-5-sonnet_basic_gui_mode_event_stream.json"


def _oh_events() -> list[dict[str, Any]]:
    return json.loads(OH_GUI.read_text())


def _import(kind: str, tmp_path: Path, doc: Any, name: str = "x.json") -> Any:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return import_source(kind, path)


def _calls(result: Any) -> dict[str, Any]:
    return {e.tool_call_id: e for t in result for r in t.rounds for e in r.executions}


def _damage(result: Any) -> list[str]:
    return [str(i) for i in result.report.issues if i.kind == "damaged"]


# --- A: OpenHands, a repeated event id -------------------------------------------------------------


@needs_realdata
def test_openhands_different_events_sharing_an_id_are_both_kept(tmp_path) -> None:
    """f13 finding 1: event 11 (another edit action, toolu_01GpJj...) given event 9's id lost its call
    and R2's latency spanned another model call plus a tool run, labelled recorded."""
    clean = _calls(import_source("openhands", OH_GUI))
    events = _oh_events()
    events[11]["id"] = 9
    result = _import("openhands", tmp_path, events)
    calls = _calls(result)
    assert set(calls) == set(clean) and result.report.source_calls == len(clean) == 4
    for cid, e in clean.items():
        assert (calls[cid].duration_s, calls[cid].status, calls[cid].result) == (
            e.duration_s,
            e.status,
            e.result,
        )
    latencies = [r.model_call.latency_s for r in result[0].rounds]
    assert latencies == [r.model_call.latency_s for r in import_source("openhands", OH_GUI)[0].rounds]
    assert any("share the id 9 but differ: both are kept" in d for d in _damage(result))


@needs_realdata
def test_openhands_an_identical_repeat_is_read_once(tmp_path) -> None:
    events = _oh_events()
    events.insert(12, copy.deepcopy(events[11]))
    result = _import("openhands", tmp_path, events)
    assert result.report.source_calls == 4 and len(_calls(result)) == 4
    assert any("identical): read once" in d for d in _damage(result))


# --- B: OpenHands, a missing observation, a weaker key --------------------------------------------


@needs_realdata
def test_openhands_a_latency_whose_request_completion_is_missing_is_an_upper_bound(tmp_path) -> None:
    """f13 finding 2: without observation 14 (the 30.58 s run) the next latency (36.1 s) held the
    tool's run and was labelled recorded."""
    events = [e for e in _oh_events() if e.get("id") != 14]
    result = _import("openhands", tmp_path, events)
    last = result[0].rounds[-1].model_call
    assert last.timing.covers == "upper_bound" and not last.timing.measured
    assert "action 13" in last.timing.note and "upper bound" in last.timing.note
    assert _calls(result)["toolu_01DwihWr4ooPZS1CGTLAWrFP"].status == "not_recorded"
    # the figures resting on other, valid evidence are kept
    assert [r.model_call.timing.measured for r in result[0].rounds[:-1]] == [True] * 4


@needs_realdata
def test_openhands_an_observation_without_its_cause_is_joined_by_its_tool_call_id(tmp_path) -> None:
    """f13 finding 2: observation 8 without `cause` still names toolu_01W9Z8... in tool_call_metadata;
    it was dropped and R1's latency took in the tool's 0.658 s."""
    events = _oh_events()
    del events[8]["cause"]
    result = _import("openhands", tmp_path, events)
    clean = import_source("openhands", OH_GUI)
    call = _calls(result)["toolu_01W9Z8jBctr8X2frZV9p1RYs"]
    assert call.status == "ok" and call.duration_s == pytest.approx(0.658357)
    assert [r.model_call.latency_s for r in result[0].rounds] == [
        r.model_call.latency_s for r in clean[0].rounds
    ]
    assert any("joined to action 7 by its tool_call_id" in str(i) for i in result.report.issues)


@needs_realdata
def test_openhands_a_second_observation_for_a_call_is_reported(tmp_path) -> None:
    """f13 finding 8: a second, different observation for action 7 was discarded without a line."""
    events = _oh_events()
    extra = {**copy.deepcopy(events[8]), "id": 99, "content": "DIFFERENT"}
    events.insert(9, extra)
    result = _import("openhands", tmp_path, events)
    assert any("a second observation for action 7" in d and "DIFFERENT" in d for d in _damage(result))
    assert _calls(result)["toolu_01W9Z8jBctr8X2frZV9p1RYs"].result != "DIFFERENT"


@needs_realdata
def test_openhands_an_observation_no_key_ties_to_one_action_is_reported(tmp_path) -> None:
    events = _oh_events()
    events[11]["id"] = 9  # two actions with the id 9; observation 12 names neither by a call id
    events[12]["cause"] = 9
    del events[12]["tool_call_metadata"]
    result = _import("openhands", tmp_path, events)
    assert any("no key ties to one action" in d for d in _damage(result))
    assert _calls(result)["toolu_01GpJj2ShdFjb9ZTY4CVxi9C"].status == "not_recorded"


@needs_realdata
def test_openhands_an_observation_whose_action_is_missing_counts_its_call(tmp_path) -> None:
    """Class C: the observation of a call whose action is not in the log proves a call ran; it was
    neither counted nor said."""
    events = [e for e in _oh_events() if e.get("id") != 11]
    result = _import("openhands", tmp_path, events)
    report = result.report
    (failed,) = [i for i in report.issues if i.kind == "failed"]
    assert "toolu_01GpJj2ShdFjb9ZTY4CVxi9C" in failed.what and failed.calls == 1
    assert (report.source_calls, report.imported_calls) == (4, 3) and not report.ok


# --- A/B: Claude Code, lines sharing a uuid, a contradictory isSidechain, an unused second result ----

CC_1AF = (
    REALDATA / "claude-code-viewer" / "claude-code_v1.0.98_sonnet-4_session-1af7fc5e_7calls_parallel5+3.jsonl"
)
CC_5C0 = (
    REALDATA
    / "claude-code-viewer"
    / "claude-code_v1.0.108_sonnet-4_session-5c0375b4_20calls_sidechains_parallel3x2.jsonl"
)


def _cc_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _cc_import(tmp_path: Path, docs: list[dict[str, Any]], name: str) -> Any:
    return _import("claude-code", tmp_path, "\n".join(json.dumps(d) for d in docs) + "\n", name)


def _shape(result: Any) -> list[tuple[str, list[Any]]]:
    """Each trace's rounds: latency, label and calls (id, status, duration, result)."""
    return sorted(
        (
            str(t.metadata.title).split(" ", 1)[-1],
            [
                (
                    r.model_call.latency_s,
                    r.model_call.timing.source,
                    r.model_call.timing.covers,
                    [(e.tool_call_id, e.status, e.duration_s, e.result) for e in r.executions],
                )
                for r in t.rounds
            ],
        )
        for t in result
    )


@needs_realdata
def test_claude_code_different_lines_sharing_a_uuid_are_both_read(tmp_path) -> None:
    """f13 finding 3: line 12 (the Glob result for toolu_0164...) given line 11's uuid was dropped as
    a repeat, and its call reported 'without a result in the source'."""
    docs = _cc_lines(CC_1AF)
    docs[11]["uuid"] = docs[10]["uuid"]
    result = _cc_import(tmp_path, docs, "dup.jsonl")
    clean = import_source("claude-code", CC_1AF)
    assert (
        _calls(result)["toolu_0164LbCjQenEQzr3pHHs81PK"].result
        == _calls(clean)["toolu_0164LbCjQenEQzr3pHHs81PK"].result
    )
    assert all(e.status != "not_recorded" for e in _calls(result).values())
    assert any("has the uuid of line 11" in d and "both are read" in d for d in _damage(result))


@needs_realdata
def test_claude_code_an_identical_line_is_read_once(tmp_path) -> None:
    docs = _cc_lines(CC_1AF)
    docs.insert(12, copy.deepcopy(docs[11]))
    result = _cc_import(tmp_path, docs, "twice.jsonl")
    assert _shape(result) == _shape(import_source("claude-code", CC_1AF))
    assert any("same content): read once" in d for d in _damage(result))


@needs_realdata
def test_claude_code_an_unused_second_result_makes_the_next_latency_an_upper_bound(tmp_path) -> None:
    """f13 finding 8: a second, different tool_result for a call ('the first is used') moved the
    next model call's start to its own time (R2 4.282 -> 4.213 s, recorded)."""
    docs = _cc_lines(CC_1AF)
    extra = copy.deepcopy(docs[11])
    extra["uuid"] = "aaaaaaaa-0000-0000-0000-000000000000"
    extra["message"]["content"][0]["content"] = "OTHER TEXT"
    extra["timestamp"] = docs[14]["timestamp"]
    docs.insert(15, extra)
    result = _cc_import(tmp_path, docs, "second.jsonl")
    clean = import_source("claude-code", CC_1AF)
    rounds, clean_rounds = result[0].rounds, clean[0].rounds
    assert rounds[2].model_call.latency_s == clean_rounds[2].model_call.latency_s
    assert rounds[2].model_call.timing.covers == "upper_bound" and "second, unused result" in (
        rounds[2].model_call.timing.note
    )
    others = [r.model_call.timing.measured for k, r in enumerate(rounds) if k != 2]
    assert others == [True] * (len(rounds) - 1)


@needs_realdata
@pytest.mark.parametrize(
    ("flip", "value", "said"),
    [
        ((15, 16), False, "the prompt of the Task call on line 13"),  # f13 finding 4
        ((29,), False, "follows a sub-agent line"),
        ((12,), True, "follows a main-thread line"),
    ],
)
def test_claude_code_an_is_sidechain_flag_the_log_contradicts_is_damage_and_read_as_the_log_shows(
    tmp_path, flip, value, said
) -> None:
    """f13 finding 4: isSidechain=false on a sub-agent's prompt and first line split the main thread
    (a phantom turn) and gave the sub-agent a 0.0 s latency labelled recorded; exit 0."""
    docs = _cc_lines(CC_5C0)
    for k in flip:
        docs[k]["isSidechain"] = value
    result = _cc_import(tmp_path, docs, "flip.jsonl")
    clean = import_source("claude-code", CC_5C0)
    assert [s for _, s in _shape(result)] == [s for _, s in _shape(clean)]
    assert any(said in d for d in _damage(result))


# --- A/D: BFCL, questions sharing an id; a cut line in the answers file ----------------------------


def _bfcl_copy(tmp_path: Path, n: int = 5) -> tuple[list[dict[str, Any]], list[str]]:
    src = REALDATA / "bfcl"
    qs = [json.loads(x) for x in (src / "BFCL_v4_parallel.jsonl").read_text().splitlines()[:n]]
    answers = (src / "possible_answer_BFCL_v4_parallel.jsonl").read_text().splitlines()[:n]
    return qs, answers


def _bfcl_write(tmp_path: Path, qs: list[dict[str, Any]], answers: list[str]) -> Path:
    (tmp_path / "possible_answer_BFCL_v4_parallel.jsonl").write_text("\n".join(answers) + "\n")
    path = tmp_path / "BFCL_v4_parallel.jsonl"
    path.write_text("\n".join(json.dumps(q) for q in qs) + "\n")
    return path


def _bfcl_calls(result: Any) -> dict[str, list[str]]:
    return {
        t.rounds[0].request_messages[0]["content"][:40]: [c.name for c in t.rounds[0].tool_calls]
        for t in result
    }


@needs_realdata
def test_bfcl_questions_sharing_an_id_never_get_each_other_s_answer(tmp_path) -> None:
    """f13 finding 6: question 3 given id parallel_1 got parallel_1's calls (calculate_em_force) for
    its own question (a wire's resistance); parallel_2's answer went unused; exit 0."""
    qs, answers = _bfcl_copy(tmp_path)
    clean = _bfcl_calls(import_source("bfcl", _bfcl_write(tmp_path, qs, answers)))
    qs[2]["id"] = "parallel_1"
    answers[0], answers[1] = answers[1], answers[0]  # (the answers' order is no key either)
    result = import_source("bfcl", _bfcl_write(tmp_path, qs, answers))
    assert _bfcl_calls(result) == clean
    assert len([d for d in _damage(result) if "held by 2 questions" in d]) == 2
    assert result.report.source_calls == result.report.imported_calls == 11


@needs_realdata
def test_bfcl_an_answer_no_key_ties_is_not_given_to_a_question(tmp_path) -> None:
    qs, answers = _bfcl_copy(tmp_path)
    qs[2]["id"] = "parallel_1"
    qs[2]["function"] = qs[1]["function"]  # both questions offer the same function now
    answers = [a for a in answers if '"parallel_2"' not in a]
    result = import_source("bfcl", _bfcl_write(tmp_path, qs, answers))
    failed = [str(i) for i in result.report.issues if i.kind == "failed"]
    assert len([f for f in failed if "no one answer can be told to be its own" in f]) == 2
    assert not any("parallel_1" in str(t.metadata.title) for t in result)
    report = result.report
    assert report.imported_calls + sum(i.calls for i in report.issues) == report.source_calls


@needs_realdata
def test_bfcl_a_cut_answer_line_costs_only_its_question(tmp_path) -> None:
    """f13 finding 8: one cut line in possible_answer_*.jsonl made the whole file fail (exit 2)."""
    qs, answers = _bfcl_copy(tmp_path)
    answers[2] = answers[2][:60]
    result = import_source("bfcl", _bfcl_write(tmp_path, qs, answers))
    assert len(result) == 4 and "parallel_2" not in {t.metadata.title.split()[-1] for t in result}
    failed = [str(i) for i in result.report.issues if i.kind == "failed"]
    assert any("line 3: not valid JSON" in f for f in failed)
    assert any("question parallel_2" in f for f in failed)


# --- A/C/D: Langfuse, a call only in the generation's metadata; observations sharing an id -------

LF = REALDATA / "agent-prism" / "langfuse_trace_export_vercel-ai_gpt-5_tool_call_inside_stream.json"


def _lf() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    doc = json.loads(LF.read_text())
    export = doc[0] if isinstance(doc, list) else doc
    return doc, export["observations"]


def _by_name(observations: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in observations if o["name"] == name)


@needs_realdata
def test_langfuse_a_call_only_in_the_generation_s_metadata_is_imported_not_recorded(tmp_path) -> None:
    """f13 finding 5: without its TOOL observation the call vanished ('0 in the source', exit 0) and
    the run was split in two, although the doStream's metadata holds ai.response.toolCalls."""
    doc, observations = _lf()
    observations.remove(_by_name(observations, "ai.toolCall"))
    result = _import("langfuse", tmp_path, doc)
    (trace,) = result
    (call,) = _calls(result).values()
    assert call.tool_call_id == "call_Wgy5Y139OQnSh7grDUUE0iil" and call.status == "not_recorded"
    assert result.report.source_calls == result.report.imported_calls == 1
    first = trace.rounds[0].model_call
    assert first.timing.covers == "upper_bound" and not first.timing.measured
    assert trace.rounds[1].model_call.timing.measured  # the other step rests on its own evidence
    assert any("ai.response.toolCalls" in d for d in _damage(result))


@needs_realdata
@pytest.mark.parametrize("other", ["ai.streamText.doStream", "create-mcp-client"])
def test_langfuse_different_observations_sharing_an_id_are_both_read(tmp_path, other) -> None:
    """f13 finding 5: the TOOL observation given a generation's id was lost ('0 in the source')."""
    doc, observations = _lf()
    tool = _by_name(observations, "ai.toolCall")
    tool["id"] = next(o["id"] for o in observations if o["name"] == other)
    result = _import("langfuse", tmp_path, doc)
    assert _shape(result) == _shape(import_source("langfuse", LF))
    assert any("different observations share this id" in d for d in _damage(result))


@needs_realdata
def test_langfuse_a_second_different_observation_of_a_call_is_not_represented(tmp_path) -> None:
    doc, observations = _lf()
    tool = _by_name(observations, "ai.toolCall")
    meta = json.loads(tool["metadata"])
    meta["attributes"]["ai.toolCall.result"] = "ANOTHER RESULT"
    observations.append({**tool, "id": "f" * 16, "output": "ANOTHER RESULT", "metadata": json.dumps(meta)})
    result = _import("langfuse", tmp_path, doc)
    report = result.report
    assert any("not represented" in str(i) for i in report.issues if i.kind == "failed")
    assert (report.source_calls, report.imported_calls) == (2, 1)
    assert _calls(result)["call_Wgy5Y139OQnSh7grDUUE0iil"].result != "ANOTHER RESULT"


@needs_realdata
def test_langfuse_a_completion_start_time_that_is_not_a_time_is_damage(tmp_path) -> None:
    """f13 finding 8: completionStartTime 1758226809.975 (a number): ttfc silently None, exit 0."""
    doc, observations = _lf()
    gen = next(
        o for o in observations if o["name"] == "ai.streamText.doStream" and o.get("completionStartTime")
    )
    gen["completionStartTime"] = 1758226809.975
    result = _import("langfuse", tmp_path, doc)
    assert any("completionStartTime 1758226809.975 is not a timestamp" in d for d in _damage(result))


# --- A/B: OTLP, spans sharing an id; a gap next to a span that ends before it starts ---------------

OT = REALDATA / "agent-prism" / "otlp_json_openinference_smolagents_o1_6_llm_spans.json"


def _ot_spans(doc: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if "spanId" in x and "startTimeUnixNano" in x:
                out.append(x)
            else:
                for v in x.values():
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    return out


@needs_realdata
def test_otlp_a_gap_next_to_a_span_ending_before_it_starts_keeps_its_own_evidence(tmp_path) -> None:
    """f13 finding 8: model span 03LeOf... given an end 1 ns before its start turned the earlier
    call's gap (1.207596 s, from that span's start and the previous span's end) into a 0 s
    placeholder."""
    clean = _calls(import_source("otlp", OT))
    doc = json.loads(OT.read_text())
    span = next(s for s in _ot_spans(doc) if s["spanId"] == "03LeOf1yQXI=")
    span["endTimeUnixNano"] = str(int(span["startTimeUnixNano"]) - 1000)
    result = _import("otlp", tmp_path, doc)
    call = _calls(result)["call_TzKWLXOFTa6np870KErcqInF"]
    assert call.duration_s == clean["call_TzKWLXOFTa6np870KErcqInF"].duration_s == pytest.approx(1.207596)
    assert call.timing.covers == "upper_bound" and "ends before it starts" in call.timing.note
    assert any("it ends before it starts" in d for d in _damage(result))


@needs_realdata
def test_otlp_different_spans_sharing_an_id_are_both_read(tmp_path) -> None:
    doc = json.loads(OT.read_text())
    spans = _ot_spans(doc)
    end = next(s for s in spans if s["name"] == "quotient.end_of_trace")
    end["spanId"] = "03LeOf1yQXI="
    result = _import("otlp", tmp_path, doc)
    assert _shape(result) == _shape(import_source("otlp", OT))
    assert any(
        "has the traceId and spanId of another span (ChatCompletion): both are read" in d
        for d in _damage(result)
    )


# --- D: inspect tool events out of list order ------------------------------------------------------

INSPECT = (
    REALDATA
    / "inspect_ai"
    / "inspect_log_gpt-4o-mini_browser_agent_5_model_calls_with_raw_api_and_timings.json"
)


@needs_realdata
def test_inspect_tool_events_out_of_time_order_are_noted_and_change_no_number(tmp_path) -> None:
    """f13 finding 8: tool events swapped in list order: exit 0 and no note."""
    log = json.loads(INSPECT.read_text())
    events = log["samples"][0]["events"]
    tools = [k for k, e in enumerate(events) if e.get("event") == "tool"]
    events[tools[0]], events[tools[-1]] = events[tools[-1]], events[tools[0]]
    result = _import("inspect", tmp_path, log)
    assert _shape(result) == _shape(import_source("inspect", INSPECT))
    assert any("tool events out of time order" in str(i) for i in result.report.issues if i.kind == "note")


# --- D: tau-bench arguments given as a dict are counted in the import summary ----------------------


def test_tau_bench_arguments_given_as_a_dict_are_said_in_the_summary(tmp_path) -> None:
    """f13 finding 20 (t13b): a dict in place of the arguments string only got a finding inside
    the trace; the import said nothing."""
    call = {"id": "c1", "type": "function", "function": {"name": "find_user", "arguments": {"zip": "02139"}}}
    traj = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "name": "find_user", "content": "u1"},
        {"role": "assistant", "content": "done"},
    ]
    result = _import("tau-bench", tmp_path, [{"task_id": 0, "traj": traj, "reward": 1.0}])
    (note,) = [i for i in result.report.issues if "not as a string" in i.what]
    assert note.kind == "note" and "call c1" in note.where and "not as a string" in str(result.report)
    (trace,) = result
    assert trace.rounds[0].tool_calls[0].arguments == '{"zip":"02139"}'


# --- D: two source files with one name into one --out --------------------------------------------


@needs_realdata
def test_two_source_files_with_one_name_never_look_like_one_session(tmp_path) -> None:
    """f13 finding 8: na/s.jsonl then nb/s.jsonl into one --out gave s__main_turn01.json (A) beside
    s__main_turn01-2.json (B): nothing overwritten, but the names suggested one session."""
    from toolcall_lab.importers import write_result

    for folder in ("na", "nb"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "s.jsonl").write_bytes(CC_1AF.read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    said: list[str] = []
    first = write_result(import_source("claude-code", tmp_path / "na" / "s.jsonl"), out, said=said)
    assert [p.name for p in first] == ["s__main_turn01.json"] and not said
    second = write_result(import_source("claude-code", tmp_path / "nb" / "s.jsonl"), out, said=said)
    assert [p.name for p in second] == ["nb__s__main_turn01.json"] and "named after their folder" in said[0]
    again = write_result(import_source("claude-code", tmp_path / "na" / "s.jsonl"), out)
    assert [p.name for p in again] == ["s__main_turn01.json"]  # re-importing replaces its own file


# --- D: validate lists every error of a trace -------------------------------------------------------


def test_validate_lists_every_error_of_a_trace_not_only_the_first(tmp_path, capsys) -> None:
    """f13 finding 8: latency_s "1.1" hid the bad timing.source after it."""
    from toolcall_lab import cli

    good = Path(__file__).parent / "fixtures" / "traces" / "v2_api_key_property_and_a_key_in_a_message.json"
    doc = json.loads(good.read_text())
    doc["rounds"][0]["response"]["latency_s"] = str(doc["rounds"][0]["response"]["latency_s"])
    doc["rounds"][-1]["response"]["timing"] = {"source": "measured-ish", "note": ""}
    path = tmp_path / "two.json"
    path.write_text(json.dumps(doc))
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "2 problems" in err and "rounds[0].response.latency_s: expected a number" in err
    assert f"rounds[{len(doc['rounds']) - 1}].response.timing.source: expected one of" in err
    doc["rounds"][-1]["response"]["timing"] = json.loads(good.read_text())["rounds"][-1]["response"].get(
        "timing", {"source": "recorded", "note": ""}
    )
    path.write_text(json.dumps(doc))
    assert cli.main(["validate", str(path)]) == 2
    assert "problems" not in capsys.readouterr().err  # one problem: said as before


@needs_realdata
def test_claude_code_two_responses_sharing_a_message_id_stay_two(tmp_path) -> None:
    """The same class as f13 finding 3, found in the audit: two responses (two requestIds) given one
    message.id were merged into one model call (6 of 7), the first batch's call timed from the
    second response."""
    docs = _cc_lines(CC_1AF)
    second = docs[5]["message"]["id"]
    for d in docs:
        if d.get("type") == "assistant" and d["message"].get("id") == second:
            d["message"]["id"] = docs[2]["message"]["id"]
    result = _cc_import(tmp_path, docs, "msgid.jsonl")
    assert result.report.source_model_calls == result.report.imported_model_calls == 7
    assert [s for _, s in _shape(result)] == [s for _, s in _shape(import_source("claude-code", CC_1AF))]
    assert any("is held by lines of 2 requests" in d for d in _damage(result))


def test_otlp_a_second_span_of_one_call_with_another_result_is_not_represented(tmp_path) -> None:
    """Audit (class A): a second tool span of one call id with another result was dropped as a
    duplicate (DAMAGED); its content is not a copy of the first, so it is NOT REPRESENTED."""
    from tests.test_import_damage import genai

    path = genai(tmp_path, system=True, tools="sequential")
    doc = json.loads(path.read_text())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    dup = json.loads(json.dumps(spans[-1]))
    dup["spanId"] = "toolX"
    dup["attributes"].append({"key": "gen_ai.tool.call.result", "value": {"stringValue": "ANOTHER RESULT"}})
    spans.append(dup)
    path.write_text(json.dumps(doc))
    result = import_source("otlp", path)
    report = result.report
    (failed,) = [i for i in report.issues if i.kind == "failed"]
    assert "toolX" in failed.where and "not represented" in failed.what and failed.calls == 1
    assert (report.source_calls, report.imported_calls) == (4, 3)


@needs_realdata
def test_langfuse_an_ai_sdk_step_whose_call_has_no_tool_observation_is_an_upper_bound(tmp_path) -> None:
    """Class B: the AI SDK keeps a step open while its tools run; without the tool observation the
    step's span may hold the tool's run, so its time is no measured model latency."""
    doc, observations = _lf()
    observations.remove(_by_name(observations, "ai.toolCall"))
    step = next(o for o in observations if o["name"] == "ai.streamText.doStream" and "tools" in o["metadata"])
    call = {"id": "call_Wgy5Y139OQnSh7grDUUE0iil", "type": "function"}
    call["function"] = {"name": "searchLangfuseDocs", "arguments": '{"query": "datasets"}'}
    step["output"] = json.dumps({"role": "assistant", "content": None, "tool_calls": [call]})
    result = _import("langfuse", tmp_path, doc)
    first = result[0].rounds[0]
    assert first.executions[0].status == "not_recorded"
    assert (
        first.model_call.timing.covers == "upper_bound"
        and "no tool observation" in first.model_call.timing.note
    )


@needs_realdata
def test_claude_code_a_latency_after_a_missing_result_is_an_upper_bound(tmp_path) -> None:
    """Class B, as OpenHands' finding 2: without the Bash result line (toolu_01UwiR8...) the next
    request's start is not in the log; its latency was 'recorded' from the other results."""
    docs = [
        d
        for d in _cc_lines(CC_1AF)
        if "toolu_01UwiR8tuGvGJN2J7BW4KbPx" not in json.dumps(d.get("message"))
        or d.get("type") == "assistant"
    ]
    result = _cc_import(tmp_path, docs, "nores.jsonl")
    rounds = result[0].rounds
    assert rounds[1].executions[0].status == "not_recorded"
    assert rounds[2].model_call.timing.covers == "upper_bound"
    assert "toolu_01UwiR8tuGvGJN2J7BW4KbPx" in rounds[2].model_call.timing.note
    assert [r.model_call.timing.measured for k, r in enumerate(rounds) if k != 2] == [True] * (
        len(rounds) - 1
    )

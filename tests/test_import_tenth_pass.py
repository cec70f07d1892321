"""Issue 13, tenth pass: what the v13 verifier found. An OTLP spanId alone never makes two spans one
(model spans included); a figure measured across a gap a missing record falls into is an upper
bound (an OpenHands action missing while its observation is there), and the model call that made the
missing action is counted; a Langfuse trace without the generation that asked for a tool says what
part of the run it leaves out. The tests over ``../shared/realdata`` damage copies in ``tmp_path``."""

from __future__ import annotations

import copy
import json

import pytest

from tests.conftest import REALDATA, needs_realdata
from tests.test_import_ninth_pass import _calls, _damage, _import, _ot_spans, _shape
from toolcall_lab.importers import import_source

OT = REALDATA / "agent-prism" / "otlp_json_openinference_smolagents_o1_6_llm_spans.json"


# --- A: OTLP, spans sharing a traceId and spanId ---------------------------------------------------


@needs_realdata
def test_otlp_two_model_spans_sharing_an_id_are_both_read(tmp_path) -> None:
    """v13 finding A: model span 03LeOf... given the spanId of model span qlOes2... (12 s earlier,
    another output) was dropped as an export copy: the web_search call and its 10.93 s model call
    vanished from the counts."""
    clean = import_source("otlp", OT)
    doc = json.loads(OT.read_text())
    span = next(s for s in _ot_spans(doc) if s["spanId"] == "03LeOf1yQXI=")
    span["spanId"] = "qlOes2yQJ+I="
    result = _import("otlp", tmp_path, doc)
    assert _shape(result) == _shape(clean)
    assert "call_TzKWLXOFTa6np870KErcqInF" in _calls(result)
    report = result.report
    assert (report.source_calls, report.imported_calls) == (clean.report.source_calls, 2)
    assert (report.source_model_calls, report.imported_model_calls) == (6, clean.report.imported_model_calls)
    (line,) = [d for d in _damage(result) if "qlOes2yQJ+I=" in d]
    assert "both are read" in line and "differ in times" in line and "exported" not in line


@needs_realdata
def test_otlp_a_span_sent_twice_is_read_once_even_with_other_bookkeeping_counts(tmp_path) -> None:
    """Only a repeat (identical but for the export's bookkeeping counts) is read once."""
    clean = import_source("otlp", OT)
    doc = json.loads(OT.read_text())
    span = next(s for s in _ot_spans(doc) if s["spanId"] == "03LeOf1yQXI=")
    again = copy.deepcopy(span)
    again["droppedAttributesCount"] = 3
    doc.append({"resourceSpans": [{"scopeSpans": [{"spans": [again]}]}]})
    result = _import("otlp", tmp_path, doc)
    assert _shape(result) == _shape(clean)
    assert result.report.source_model_calls == clean.report.source_model_calls == 6
    assert any("03LeOf1yQXI=" in d and "exported 2 times" in d for d in _damage(result))


@needs_realdata
def test_otlp_a_copy_whose_status_differs_is_another_span(tmp_path) -> None:
    """A second span with the same ids and times but another status is not a copy either."""
    doc = json.loads(OT.read_text())
    span = next(s for s in _ot_spans(doc) if s["spanId"] == "03LeOf1yQXI=")
    other = copy.deepcopy(span)
    other["status"] = {"code": "STATUS_CODE_ERROR", "message": "boom"}
    doc.append({"resourceSpans": [{"scopeSpans": [{"spans": [other]}]}]})
    result = _import("otlp", tmp_path, doc)
    assert result.report.source_model_calls == 7
    assert any("03LeOf1yQXI=" in d and "differ in status" in d for d in _damage(result))


def test_otlp_two_tool_spans_sharing_an_id_each_run_their_call(tmp_path) -> None:
    """Tool spans told apart by their ids alone: the second of two spans sharing a spanId was taken as
    used once the first was matched, so its call lost its recorded duration."""
    from tests.test_import_damage import genai

    path = genai(tmp_path, system=True, tools="sequential")
    doc = json.loads(path.read_text())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    clean = import_source("otlp", path)
    spans[3]["spanId"] = spans[2]["spanId"]  # tool1 gets tool0's id
    result = _import("otlp", tmp_path, doc, "tools.json")
    assert _shape(result) == _shape(clean)
    assert all(e.timing.source == "recorded" for e in _calls(result).values())
    assert (result.report.source_calls, result.report.imported_calls) == (3, 3)
    assert any("both are read" in d for d in _damage(result))


# --- B: OpenHands, an action missing while its observation is there ---------------------------------

OH_GUI = REALDATA / "OpenHands" / "openhands_claude-3-5-sonnet_basic_gui_mode_event_stream.json"


@needs_realdata
def test_openhands_a_latency_spanning_a_missing_action_is_an_upper_bound(tmp_path) -> None:
    """v13 finding B: without action 11 (its observation 12 still there) R2's latency (10.31 s) held
    another model call and a tool run (clean: 7.93 + 0.034 + 2.35 s), labelled plain recorded, and the
    model call that made the action was not counted."""
    from toolcall_lab.analysis import compare

    clean = import_source("openhands", OH_GUI)
    events = [e for e in json.loads(OH_GUI.read_text()) if e.get("id") != 11]
    result = _import("openhands", tmp_path, events)
    (trace,) = result
    r2 = trace.rounds[2].model_call
    assert r2.latency_s == pytest.approx(10.314379)
    assert r2.timing.covers == "upper_bound" and not r2.timing.measured
    assert "toolu_01GpJj2ShdFjb9ZTY4CVxi9C" in r2.timing.note and "event 12" in r2.timing.note
    # the other figures rest on their own evidence and stay recorded
    assert [r.model_call.timing.measured for r in trace.rounds] == [True, True, False, True]
    report = result.report
    assert report.source_model_calls == clean.report.source_model_calls == 5
    assert (report.imported_model_calls, report.source_calls, report.imported_calls) == (4, 4, 3)
    (failed,) = [i for i in report.issues if i.kind == "failed"]
    assert failed.model_calls == 1 and "chatcmpl-34fef176" in failed.what and "model calls" in failed.what
    assert not compare(list(clean), ["sequential"], timings="recorded").runs.empty
    assert compare([trace], ["sequential"], timings="recorded").runs.empty


@needs_realdata
def test_openhands_observations_of_one_lost_response_count_one_model_call(tmp_path) -> None:
    """Two observations naming the same lost response prove one model call, not two; without a
    response in their metadata a run of them proves one."""
    events = [e for e in json.loads(OH_GUI.read_text()) if e.get("id") != 11]
    twelve = next(k for k, e in enumerate(events) if e.get("id") == 12)
    second = copy.deepcopy(events[twelve])
    second["tool_call_metadata"]["tool_call_id"] = "toolu_SECOND"
    events[twelve]["id"] = 11  # (the lost action's id is free: the two stay in id order)
    events.insert(twelve + 1, second)
    result = _import("openhands", tmp_path, events)
    assert (result.report.source_model_calls, result.report.source_calls) == (5, 5)
    for e in events[twelve : twelve + 2]:
        del e["tool_call_metadata"]["model_response"]
    result = _import("openhands", tmp_path, events, "y.json")
    assert (result.report.source_model_calls, result.report.source_calls) == (5, 5)
    assert result[0].rounds[2].model_call.timing.covers == "upper_bound"


# --- C: Langfuse, a run without the generation that asked for its tool ------------------------------

LF = REALDATA / "agent-prism" / "langfuse_trace_export_vercel-ai_gpt-5_tool_call_inside_stream.json"


@needs_realdata
def test_langfuse_a_trace_missing_the_start_of_its_run_says_so(tmp_path) -> None:
    """v13 (minor): without generation a44bd8... (the one that asked for the tool) the trace claimed a
    recorded wall of 8.184 s for a run whose wrapper spans 20.29 s, its notes silent about the first
    12 s."""
    doc = json.loads(LF.read_text())
    doc["observations"] = [o for o in doc["observations"] if o.get("id") != "a44bd80c743afa87"]
    result = _import("langfuse", tmp_path, doc)
    (trace,) = result
    assert trace.metadata.recorded_wall_s == pytest.approx(8.184)
    notes = trace.metadata.notes
    assert "the first 12.097 s of this run (from the run's wrapper's start) are not in this trace" in notes
    assert "9a6a16a257c88b0a" in notes and "NOT REPRESENTED" in notes
    assert "are not in this trace" not in import_source("langfuse", LF)[0].metadata.notes


# --- B's class in Claude Code: a tool_use line missing while its result is there --------------------

CC_1AF = (
    REALDATA / "claude-code-viewer" / "claude-code_v1.0.98_sonnet-4_session-1af7fc5e_7calls_parallel5+3.jsonl"
)


@needs_realdata
def test_claude_code_a_latency_spanning_a_lost_tool_use_says_why_it_is_an_upper_bound(tmp_path) -> None:
    """Without line 22 (the tool_use of toolu_01PbUv..., its result on line 23 still there) the next
    latency was an upper bound whose note called line 23 'a second, unused result for a call of the
    request'; it is the result of a call the log lost."""
    lines = CC_1AF.read_text().splitlines(keepends=True)
    del lines[21]
    result = _import("claude-code", tmp_path, "".join(lines), "lost.jsonl")
    report = result.report
    (failed,) = [i for i in report.issues if i.kind == "failed"]
    assert "toolu_01PbUvZLKxR3ysWR9vhm6PSH" in failed.what and "not counted as a model call" in failed.what
    assert (report.source_calls, report.imported_calls) == (12, 11)
    spanning = result[0].rounds[3].model_call.timing
    assert spanning.covers == "upper_bound"
    assert "line(s) 22 hold the result of a call whose tool_use is not in the log" in spanning.note
    assert "second, unused result" not in spanning.note


# --- B's class in inspect: a model event missing while its tool event is there ----------------------

INSPECT = (
    REALDATA
    / "inspect_ai"
    / "inspect_log_gpt-4o-mini_browser_agent_5_model_calls_with_raw_api_and_timings.json"
)


@needs_realdata
def test_inspect_a_tool_event_whose_model_event_is_missing_is_counted(tmp_path) -> None:
    """Without model event 23 (the one that asked for call_53eN...) its tool event was skipped as 'a tool
    the solver ran itself', exit 0, and neither the call nor the model call was counted; the next
    model event's input holds the assistant message (source "generate") that asked for it."""
    clean = import_source("inspect", INSPECT)
    log = json.loads(INSPECT.read_text())
    events = log["samples"][0]["events"]
    (k,) = [
        k
        for k, e in enumerate(events)
        if e.get("event") == "model" and "call_53eNweGanOHt6jGWAo2UuNCG" in json.dumps(e.get("output"))
    ]
    del events[k]
    result = _import("inspect", tmp_path, log)
    report = result.report
    assert (report.source_calls, report.imported_calls) == (clean.report.source_calls, 3) == (4, 3)
    assert (report.source_model_calls, report.imported_model_calls) == (5, 4)
    (failed,) = [i for i in report.issues if i.kind == "failed"]
    assert "call_53eNweGanOHt6jGWAo2UuNCG" in failed.where and failed.model_calls == 1 and not report.ok
    # a message a solver put in the conversation itself (source "input") proves no model call
    for e in events:
        for m in e.get("input") or [] if isinstance(e.get("input"), list) else []:
            if isinstance(m, dict) and m.get("role") == "assistant":
                m["source"] = "input"
    result = _import("inspect", tmp_path, log, "solver.json")
    assert not [i for i in result.report.issues if i.kind == "failed"]
    assert result.report.source_model_calls == 4


def test_otlp_tool_spans_whose_model_span_is_missing_are_counted(tmp_path) -> None:
    """B's class in OTLP: without the model span that asked for three calls, their tool spans were
    skipped as 'ran outside a model's request' (exit 0) though the next model span's input shows the
    model asked for them: NOT REPRESENTED, with one lost model call."""
    from tests.test_import_damage import genai

    path = genai(tmp_path, system=True, tools="sequential")
    doc = json.loads(path.read_text())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[:] = [s for s in spans if s["spanId"] != "chat1"]
    result = _import("otlp", tmp_path, doc, "lost.json")
    report = result.report
    failed = [i for i in report.issues if i.kind == "failed"]
    assert len(failed) == 3 and [i.model_calls for i in failed] == [1, 0, 0] and not report.ok
    assert (report.source_calls, report.imported_calls) == (3, 0)
    assert report.source_model_calls == 2

"""How importers follow the structure a source records (a second fresh-eyes tester's cases, issue 13):
Langfuse's observation tree, OTLP traces and parents, Claude Code's sub-agents, compactions, sessions
and resumed files, inspect's agents run as tools and stopped samples. Variants are made in each test
from the real files (never stored); the shapes no real file here holds (LangGraph, AgentExecutor)
are written out below as the exporters write them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab import cli
from toolcall_lab.importers import (
    import_claude_code,
    import_inspect,
    import_langfuse,
    import_otlp,
    import_swe_agent,
)
from toolcall_lab.replay import replay

CC = REALDATA / "claude-code-viewer"
CC_5CALLS = CC / "claude-code_v1.0.98_sonnet-4_session-1af7fc5e_7calls_parallel5+3.jsonl"
CC_TASKS = CC / "claude-code_v1.0.108_sonnet-4_session-5c0375b4_20calls_sidechains_parallel3x2.jsonl"
CC_V2 = (
    REALDATA / "claude-reliability/claude-code_v2.1.14_opus-4-5_coverage-test-fix_14calls_parallel2x2.jsonl"
)
LANGFUSE = REALDATA / "agent-prism/langfuse_trace_export_vercel-ai_gpt-5_tool_call_inside_stream.json"
OTLP = REALDATA / "agent-prism/otlp_json_openinference_smolagents_o1_6_llm_spans.json"
INSPECT = (
    REALDATA / "inspect_ai/inspect_log_gpt-4o-mini_browser_agent_5_model_calls_with_raw_api_and_timings.json"
)


def docs(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_lines(tmp_path: Path, name: str, items: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(d) + "\n" for d in items), encoding="utf-8")
    return path


def notes(result) -> list[str]:
    return [f"{i.where}: {i.what}" for i in result.report.issues if i.kind == "note"]


# --- Langfuse: the tree, every output shape, tool-like spans ----------------------------------------


def _obs(oid: str, kind: str, name: str, parent: str | None, start: float, end: float, **more: Any) -> dict:
    def at(s: float) -> str:
        return f"2025-09-18T20:00:{s:06.3f}Z"

    return {
        "id": oid,
        "traceId": "tr1",
        "type": kind,
        "name": name,
        "parentObservationId": parent,
        "startTime": at(start),
        "endTime": at(end),
        "level": "DEFAULT",
        **more,
    }


OPENAI_CALLS = [
    {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    },
    {
        "id": "call_2",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
    },
]
COMPARE = {
    "id": "call_3",
    "type": "function",
    "function": {"name": "compare", "arguments": '{"a": "Paris", "b": "Rome"}'},
}


def _langchain(calls: list[dict]) -> list[dict]:
    return [
        {
            "name": c["function"]["name"],
            "args": json.loads(c["function"]["arguments"]),
            "id": c["id"],
            "type": "tool_call",
        }
        for c in calls
    ]


# How exporters record an assistant message that asks for tools (each must keep the ids call_1..3):
OUTPUT_SHAPES = {
    "openai message (Langfuse's OpenAI wrapper)": lambda calls: {
        "role": "assistant",
        "content": "",
        "tool_calls": calls,
    },
    "langchain message (the LangChain handler)": lambda calls: {
        "role": "assistant",
        "content": "",
        "tool_calls": _langchain(calls),
        "additional_kwargs": {"tool_calls": calls},
    },
    "langchain additional_kwargs only": lambda calls: {"tool_calls": calls},
    "langchain serialised object": lambda calls: {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "AIMessage"],
        "kwargs": {"content": "", "tool_calls": _langchain(calls)},
    },
    "anthropic blocks": lambda calls: {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": c["id"],
                "name": c["function"]["name"],
                "input": json.loads(c["function"]["arguments"]),
            }
            for c in calls
        ],
    },
    "completion with choices": lambda calls: {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": calls}}]
    },
    "a list of messages": lambda calls: [{"role": "assistant", "content": "", "tool_calls": calls}],
    "gemini parts": lambda calls: {
        "role": "model",
        "parts": [
            {
                "functionCall": {
                    "id": c["id"],
                    "name": c["function"]["name"],
                    "args": json.loads(c["function"]["arguments"]),
                }
            }
            for c in calls
        ],
    },
}


def langgraph(shape, *, tool_kind: str = "TOOL", flat: bool = False, tools_parent: str = "tools") -> dict:
    """A LangGraph run as Langfuse exports it: each model call under its own `agent` span, the tools
    under `tools` spans, all under the graph's root (`flat`: an AgentExecutor, all under the root)."""

    def node(oid: str, name: str, start: float, end: float) -> list[dict]:
        return [] if flat else [_obs(oid, "SPAN", name, "root", start, end)]

    def parent(oid: str) -> str:
        return "root" if flat else oid

    user = [{"role": "user", "content": "weather in Paris and Rome, then compare"}]
    observations = [
        _obs("root", "SPAN", "LangGraph", None, 0.0, 12.0),
        *node("n1", "agent", 0.1, 2.1),
        _obs(
            "g1",
            "GENERATION",
            "ChatOpenAI",
            parent("n1"),
            0.2,
            2.0,
            model="gpt-4o",
            input=user,
            output=shape(OPENAI_CALLS),
            completionStartTime="2025-09-18T20:00:00.700Z",
        ),
        *node("n2", tools_parent, 2.2, 4.3),
        _obs(
            "t1",
            tool_kind,
            "get_weather",
            parent("n2"),
            2.3,
            3.3,
            input={"city": "Paris"},
            output="Paris: 18C",
        ),
        _obs(
            "t2", tool_kind, "get_weather", parent("n2"), 2.3, 4.2, input={"city": "Rome"}, output="Rome: 25C"
        ),
        *node("n3", "agent", 4.4, 6.5),
        _obs(
            "g2",
            "GENERATION",
            "ChatOpenAI",
            parent("n3"),
            4.5,
            6.4,
            model="gpt-4o",
            input=user,
            output=shape([COMPARE]),
        ),
        *node("n4", tools_parent, 6.6, 7.7),
        _obs(
            "t3",
            tool_kind,
            "compare",
            parent("n4"),
            6.7,
            7.6,
            input={"a": "Paris", "b": "Rome"},
            output="Paris cooler",
        ),
        *node("n5", "agent", 7.8, 11.9),
        _obs(
            "g3",
            "GENERATION",
            "ChatOpenAI",
            parent("n5"),
            7.9,
            11.8,
            model="gpt-4o",
            input=user,
            output={"role": "assistant", "content": "Paris is cooler."},
        ),
    ]
    return {"trace": {"id": "tr1", "name": "langgraph", "input": user}, "observations": observations}


def _one_run(path: Path):
    result = import_langfuse(path)
    assert result.report.clean, result.report.summary()
    (trace,) = result
    return result, trace


@pytest.mark.parametrize("shape", list(OUTPUT_SHAPES), ids=list(OUTPUT_SHAPES))
def test_langfuse_reads_every_output_shape_and_keeps_the_providers_ids(tmp_path, shape) -> None:
    """The tester's LangGraph case: outputs recorded as chat messages were thrown away (ids became
    fallbacks, the final text was lost, run 3 'failed/empty_response')."""
    path = tmp_path / "lf.json"
    path.write_text(json.dumps(langgraph(OUTPUT_SHAPES[shape])))
    result, trace = _one_run(path)
    assert [[e.tool_call_id for e in r.executions] for r in trace.rounds] == [
        ["call_1", "call_2"],
        ["call_3"],
        [],
    ]
    assert all(c.id_source == "provider" for r in trace.rounds for c in r.tool_calls)
    assert (trace.outcome.status, trace.outcome.final_answer) == ("completed", "Paris is cooler.")
    assert "rebuilt" not in trace.metadata.notes
    assert (result.report.source_calls, result.report.imported_calls) == (3, 3)


def test_langfuse_tools_belong_to_the_model_call_of_their_run(tmp_path) -> None:
    """Generations under their own `agent` spans are one run (not one run each), and compare belongs
    to the second model call, not to the first (no invented 3-call batch)."""
    for flat in (False, True):
        path = tmp_path / f"lf_{flat}.json"
        path.write_text(
            json.dumps(langgraph(OUTPUT_SHAPES["openai message (Langfuse's OpenAI wrapper)"], flat=flat))
        )
        _, trace = _one_run(path)
        assert [[e.name for e in r.executions] for r in trace.rounds] == [
            ["get_weather"] * 2,
            ["compare"],
            [],
        ]
        assert [e.result for e in trace.rounds[0].executions] == ["Paris: 18C", "Rome: 25C"]
        assert trace.metadata.mode == "parallel" and trace.rounds[0].model_call.timing.source == "recorded"


def test_langfuse_tool_spans_are_tools_when_their_place_says_so(tmp_path) -> None:
    """Older LangChain handlers export tools as plain SPANs: under a `tools` node (or given the call's
    arguments) they are the calls' executions; a span merely named like a tool is reported."""
    shape = OUTPUT_SHAPES["langchain message (the LangChain handler)"]
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(langgraph(shape, tool_kind="SPAN")))
    result, trace = _one_run(path)
    assert trace.n_calls == 3 and trace.rounds[0].executions[1].result == "Rome: 25C"
    # under an unnamed node, the arguments still say which call each span ran
    path.write_text(json.dumps(langgraph(shape, tool_kind="SPAN", tools_parent="step")))
    _, trace = _one_run(path)
    assert trace.n_calls == 3
    # a span named like a tool, given other input, under no tools node: not guessed, reported
    doc = langgraph(shape, tool_kind="SPAN", tools_parent="step")
    doc["observations"].append(_obs("x1", "SPAN", "compare", "root", 11.95, 11.99, input="cache lookup"))
    path.write_text(json.dumps(doc))
    result = import_langfuse(path)
    (skipped,) = [i for i in result.report.issues if i.kind == "skipped"]
    assert (
        skipped.where == "spans.json observation x1 (compare)"
        and "not read as a tool execution" in skipped.what
    )
    assert result.report.imported_calls == 3


def test_langfuse_a_tool_no_call_asked_for_is_reported(tmp_path) -> None:
    doc = langgraph(OUTPUT_SHAPES["openai message (Langfuse's OpenAI wrapper)"])
    doc["observations"].append(
        _obs("t9", "TOOL", "get_weather", "n2", 2.35, 2.4, input={"city": "Oslo"}, output="x")
    )
    path = tmp_path / "extra.json"
    path.write_text(json.dumps(doc))
    result = import_langfuse(path)
    (failed,) = [i for i in result.report.issues if i.kind == "failed"]
    assert failed.where == "extra.json observation t9 (get_weather)" and failed.calls == 1
    assert not result.report.clean and result.report.source_calls == 4


@needs_realdata
def test_langfuse_real_ai_sdk_export_with_recorded_step_outputs(tmp_path) -> None:
    """The real AI SDK export leaves the steps' outputs empty (rebuilt); recorded as the OpenAI
    wrapper records them, the same steps keep the provider's id and say they were converted."""
    doc = json.loads(LANGFUSE.read_text())
    (rebuilt,) = import_langfuse(LANGFUSE)
    call = rebuilt.rounds[0].tool_calls[0]
    for o in doc["observations"]:
        if o["name"] == "ai.streamText.doStream" and o["startTime"] < "2025-09-18T20:20:09":
            o["output"] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.tool_call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                ],
            }
    path = tmp_path / "lf_real_variant.json"
    path.write_text(json.dumps(doc))
    result = import_langfuse(path)
    (trace,) = result
    assert result.report.clean and trace.rounds[0].executions[0].tool_call_id == call.tool_call_id
    assert trace.rounds[0].executions[0].result == rebuilt.rounds[0].executions[0].result
    assert "1 of 2 responses rebuilt" in trace.metadata.notes and "1 converted" in trace.metadata.notes


# --- OTLP: each span once, tools of their own trace, a bad attribute costs its span ----------------


def _spans(doc: dict | list) -> list[dict]:
    exports = doc if isinstance(doc, list) else [doc]
    return [s for d in exports for rs in d["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


@needs_realdata
def test_otlp_a_span_exported_twice_is_read_once(tmp_path) -> None:
    """Retrying exporters send a span again: no invented conversation or call, and it is reported."""
    original = import_otlp(OTLP)
    doc = json.loads(OTLP.read_text())
    spans = _spans(doc)
    doc.append({"resourceSpans": [{"scopeSpans": [{"spans": copy.deepcopy(spans[:3])}]}]})
    path = tmp_path / "dup.json"
    path.write_text(json.dumps(doc))
    result = import_otlp(path)
    assert [t.to_dict()["rounds"] for t in result] == [t.to_dict()["rounds"] for t in original]
    assert result.report.source_model_calls == original.report.source_model_calls
    damaged = [i for i in result.report.issues if i.kind == "damaged"]
    assert len(damaged) == 3 and all("exported 2 times" in i.what for i in damaged)
    assert {i.where.rsplit(" span ", 1)[1].split(" ")[0] for i in damaged} == {s["spanId"] for s in spans[:3]}


def _two_traces(tmp_path: Path, with_ids: bool) -> Path:
    """Two agent runs of one service at the same time, both using ids call_0/call_1 (or none)."""
    from tests.test_import_damage import T0

    def span(
        trace: str, sid: str, name: str, start: float, end: float, attrs: dict, parent: str | None
    ) -> dict:
        return {
            "traceId": trace,
            "spanId": sid,
            "parentSpanId": parent,
            "name": name,
            "startTimeUnixNano": str(int((T0 + start) * 1e9)),
            "endTimeUnixNano": str(int((T0 + end) * 1e9)),
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
        }

    spans = []
    for trace, offset, cities in (("TA", 5.0, ("Paris", "Rome")), ("TB", 0.0, ("Oslo", "Lima"))):
        user = [
            {
                "role": "user",
                "parts": [{"type": "text", "content": f"weather in {cities[0]} and {cities[1]}"}],
            }
        ]
        asked = [
            {
                "role": "assistant",
                "parts": [
                    {
                        "type": "tool_call",
                        **({"id": f"call_{k}"} if with_ids else {}),
                        "name": "get_weather",
                        "arguments": {"city": c},
                    }
                    for k, c in enumerate(cities)
                ],
            }
        ]
        answers = [
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": f"call_{k}", "response": f"{c}: 20C"}],
            }
            for k, c in enumerate(cities)
        ]
        root = f"{trace}root"
        spans.append(span(trace, root, "invoke_agent", offset, offset + 5, {}, None))
        spans.append(
            span(
                trace,
                f"{trace}c1",
                "chat gpt-4o",
                offset + 0.1,
                offset + 1.0,
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.input.messages": json.dumps(user),
                    "gen_ai.output.messages": json.dumps(asked),
                },
                root,
            )
        )
        for k, c in enumerate(cities):
            spans.append(
                span(
                    trace,
                    f"{trace}t{k}",
                    "execute_tool get_weather",
                    offset + 1.1 + 0.05 * k,
                    offset + 2.1 + k,
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "get_weather",
                        **({"gen_ai.tool.call.id": f"call_{k}"} if with_ids else {}),
                        "gen_ai.tool.call.result": f"{c}: 20C",
                    },
                    root,
                )
            )
        spans.append(
            span(
                trace,
                f"{trace}c2",
                "chat gpt-4o",
                offset + 3.3,
                offset + 4.3,
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.input.messages": json.dumps(user + asked + answers),
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]
                    ),
                },
                root,
            )
        )
    path = tmp_path / f"two_{with_ids}.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    return path


@pytest.mark.parametrize("with_ids", [True, False], ids=["same ids", "no ids"])
def test_otlp_tools_are_matched_within_their_own_trace(tmp_path, with_ids) -> None:
    """Concurrent traces with the same call ids (or none) never get each other's results."""
    result = import_otlp(_two_traces(tmp_path, with_ids))
    assert result.report.clean, result.report.summary()
    by_trace = {t.metadata.source.split("trace=")[1].split("&")[0]: t for t in result}
    assert [e.result for e in by_trace["TA"].rounds[0].executions] == ["Paris: 20C", "Rome: 20C"]
    assert [e.result for e in by_trace["TB"].rounds[0].executions] == ["Oslo: 20C", "Lima: 20C"]
    assert [round(e.duration_s, 3) for e in by_trace["TA"].rounds[0].executions] == [1.0, 1.95]


@needs_realdata
def test_otlp_an_attribute_of_the_wrong_type_costs_only_itself(tmp_path) -> None:
    from tests.test_import_damage import genai

    path = genai(tmp_path, system=False, tools="parallel")
    doc = json.loads(path.read_text())
    chat1 = next(s for s in _spans(doc) if s["spanId"] == "chat1")
    chat1["attributes"].append({"key": "gen_ai.usage.input_tokens", "value": {"intValue": "many"}})
    path.write_text(json.dumps(doc))
    result = import_otlp(path)
    (damaged,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert "span chat1" in damaged.where and "attribute gen_ai.usage.input_tokens" in damaged.what
    (trace,) = result
    assert trace.n_calls == 3 and trace.outcome.final_answer == "All 20C."


@needs_realdata
def test_otlp_a_cut_attribute_costs_only_its_span(tmp_path) -> None:
    """An exporter's attribute length limit cuts a JSON attribute: the span and the attribute are
    named, that model call is lost, the rest of the export is imported."""
    from tests.test_import_damage import genai

    path = genai(tmp_path, system=False, tools="parallel")
    doc = json.loads(path.read_text())
    chat2 = next(s for s in _spans(doc) if s["spanId"] == "chat2")
    attr = next(a for a in chat2["attributes"] if a["key"] == "gen_ai.input.messages")
    attr["value"]["stringValue"] = attr["value"]["stringValue"][:60]
    path.write_text(json.dumps(doc))
    result = import_otlp(path)
    (failed,) = [i for i in result.report.issues if i.kind == "failed"]
    assert "span chat2" in failed.where and "attribute gen_ai.input.messages is not valid JSON" in failed.what
    # its output was read (the final answer, no tool call): what it held is known, not unreadable
    assert not failed.unreadable and (failed.model_calls, failed.calls) == (1, 0)
    assert "it holds no tool call" in failed.what
    (trace,) = result
    assert trace.n_calls == 3 and trace.outcome.reason == "next_round_not_representable"
    assert "chat2" in trace.rounds[-1].placeholder
    assert "unreadable part" not in result.report.summary()
    assert cli.main(["import", "otlp", str(path), "--out", str(tmp_path / "out")]) == 1


# --- Claude Code: sub-agents by structure, compaction, sessions, resumed files ---------------------


def _same_prompt_variant(tmp_path: Path) -> Path:
    """The real session's two Task calls given the same prompt (and their sub-agents' roots too)."""
    items = docs(CC_TASKS)
    prompt = "Look at the project and report what you find."
    for d in items:
        content = (d.get("message") or {}).get("content")
        if d.get("isSidechain") and d.get("parentUuid") is None:
            d["message"]["content"] = prompt
        for b in content if isinstance(content, list) else []:
            if b.get("type") == "tool_use" and b.get("name") == "Task" and "prompt" in b["input"]:
                b["input"]["prompt"] = prompt
    return write_lines(tmp_path, "same_prompt.jsonl", items)


@needs_realdata
def test_claude_code_subagents_are_linked_by_structure_not_prompt_text(tmp_path) -> None:
    """Two Tasks with one prompt: each sub-agent is tied to its own Task by its time and its final
    answer (the Task's result), as in the unchanged file."""

    def linked(result) -> dict[str, str]:
        return {
            t.metadata.title.split("sub-agent of Task ")[1].split(" ")[0]: t.outcome.final_answer[:40]
            for t in result
            if "sub-agent of Task" in t.metadata.title
        }

    original = import_claude_code(CC_TASKS)
    variant = import_claude_code(_same_prompt_variant(tmp_path))
    assert linked(variant) == linked(original) and len(linked(original)) == 2
    assert not notes(variant)


def test_claude_code_a_retried_task_with_the_same_prompt(tmp_path) -> None:
    """A Task retried with its prompt unchanged: the first sub-agent belongs to the first Task (its
    time), the second to the retry; one sub-agent the log cannot tie to one Task says so."""

    def line(uuid, parent, t, kind, content, side=False, mid=None, result=None):
        d = {
            "uuid": uuid,
            "parentUuid": parent,
            "isSidechain": side,
            "sessionId": "s",
            "type": kind,
            "timestamp": f"2025-09-03T00:00:{t:06.3f}Z",
        }
        d["message"] = {"role": kind, "content": content}
        if mid:
            d["message"].update(id=mid, model="claude-sonnet-4")
        if result is not None:
            d["toolUseResult"] = result
        return d

    def task(tid, prompt):
        return [
            {"type": "tool_use", "id": tid, "name": "Task", "input": {"description": tid, "prompt": prompt}}
        ]

    def answer(tid, text):
        return [{"type": "tool_result", "tool_use_id": tid, "content": text}]

    items = [
        line("u1", None, 0, "user", "count"),
        line("u2", "u1", 2, "assistant", task("T1", "Count files"), mid="m1"),
        line("s1", None, 2.1, "user", "Count files", side=True),
        line(
            "s2", "s1", 9, "assistant", [{"type": "text", "text": "I could not count"}], side=True, mid="ms1"
        ),
        line("u3", "u2", 9.05, "user", answer("T1", "I could not count"), result={"totalDurationMs": 6950}),
        line("u4", "u3", 11, "assistant", task("T2", "Count files"), mid="m2"),
        line("s3", None, 11.1, "user", "Count files", side=True),
        line("s4", "s3", 16, "assistant", [{"type": "text", "text": "57 files"}], side=True, mid="ms2"),
        line("u5", "u4", 16.05, "user", answer("T2", "57 files"), result={"totalDurationMs": 4950}),
        line("u6", "u5", 18, "assistant", [{"type": "text", "text": "57"}], mid="m3"),
    ]
    result = import_claude_code(write_lines(tmp_path, "retry.jsonl", items), include_no_calls=True)
    titles = {t.outcome.final_answer: t.metadata.title for t in result}
    assert (
        "sub-agent of Task T1" in titles["I could not count"] and "sub-agent of Task T2" in titles["57 files"]
    )
    # the two sub-agents at the same time with the same answer: the log cannot tell which is which
    both = [*items[:2], line("u2b", "u2", 2.5, "assistant", task("T2", "Count files"), mid="m1")]
    both += [
        line("s1", None, 2.6, "user", "Count files", side=True),
        line("s2", "s1", 8, "assistant", [{"type": "text", "text": "3"}], side=True, mid="ms1"),
        line("s3", None, 2.7, "user", "Count files", side=True),
        line("s4", "s3", 8.5, "assistant", [{"type": "text", "text": "3"}], side=True, mid="ms2"),
        line("u3", "u2b", 9, "user", answer("T1", "3")),
        line("u5", "u3", 9.1, "user", answer("T2", "3")),
        line("u6", "u5", 10, "assistant", [{"type": "text", "text": "3"}], mid="m3"),
    ]
    result = import_claude_code(write_lines(tmp_path, "both.jsonl", both), include_no_calls=True)
    subs = [t.metadata.title for t in result if "sub-agent" in t.metadata.title]
    assert len(subs) == 2 and all("of Task T1 or T2: the log does not say which" in s for s in subs)
    assert len(notes(result)) == 2


def _compacted(items: list[dict], after: int, *, with_boundary: bool = True) -> list[dict]:
    """Claude Code's compaction inserted after line `after` (1-based): a compact_boundary system line
    (a new root), the summary as a user line, and the next line following the summary."""
    before, rest = items[:after], copy.deepcopy(items[after:])
    stamp = before[-1]["timestamp"]
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
        "uuid": "cb-1",
        "parentUuid": None,
        "logicalParentUuid": before[-1]["uuid"],
        "timestamp": stamp,
        "compactMetadata": {"trigger": "auto", "preTokens": 150000},
        "sessionId": before[-1]["sessionId"],
    }
    summary = {
        "type": "user",
        "uuid": "cs-1",
        "parentUuid": "cb-1" if with_boundary else None,
        "isCompactSummary": True,
        "isVisibleInTranscriptOnly": True,
        "timestamp": stamp,
        "sessionId": before[-1]["sessionId"],
        "message": {
            "role": "user",
            "content": "This session is being continued from a previous "
            "conversation. Summary: multiply_numbers was added and tested.",
        },
    }
    rest[0]["parentUuid"] = "cs-1"
    return [
        *before,
        *([boundary] if with_boundary else [{"type": "summary", "summary": "x", "leafUuid": "y"}]),
        summary,
        *rest,
    ]


@needs_realdata
def test_claude_code_compaction_inside_a_turn(tmp_path) -> None:
    """After line 19 (a Bash result in turn 2), the model's next call saw only the summary: turn 2 is
    cut there (context_compacted, not 'the recording ends') and goes on from the summary."""
    original = import_claude_code(CC_V2)
    result = import_claude_code(write_lines(tmp_path, "compact_mid.jsonl", _compacted(docs(CC_V2), 19)))
    assert result.report.clean and result.report.imported_calls == original.report.imported_calls
    titles = [t.metadata.title.split(".jsonl ")[1] for t in result]
    assert titles == [
        "main turn 1",
        "main turn 2",
        "main turn 2 (after compaction at line 20)",
        "main turn 3",
    ]
    cut, after = result[1], result[2]
    assert (cut.outcome.status, cut.outcome.reason) == ("incomplete", "context_compacted")
    assert (
        "compacted the conversation here (line 20, trigger auto, 150000 tokens before)"
        in cut.rounds[-1].placeholder
    )
    assert [m["role"] for m in after.initial_messages] == ["user"]
    assert after.initial_messages[0]["content"].startswith("This session is being continued")
    assert after.outcome.status == "completed"
    assert result[3].initial_messages[0]["content"].startswith("This session is being continued")
    assert (replay(cut).status, replay(cut).reason) == ("incomplete", "stopped_as_recorded")
    (note,) = notes(result)
    assert "line 20" in note and "main turn 2 is cut there" in note


@needs_realdata
def test_claude_code_compaction_between_turns(tmp_path) -> None:
    """Between turns (old format too: a summary line, no boundary): the next turn starts from the
    summary, never from the conversation the model no longer saw."""
    for with_boundary in (True, False):
        items = _compacted(docs(CC_V2), 15, with_boundary=with_boundary)
        result = import_claude_code(write_lines(tmp_path, f"between_{with_boundary}.jsonl", items))
        turn2 = result[1]
        assert "after compaction" in turn2.metadata.title
        assert [m["role"] for m in turn2.initial_messages] == ["user", "user"]
        assert "Stop hook feedback" in turn2.initial_messages[1]["content"]
        assert len(notes(result)) == 1 and result.report.clean


@needs_realdata
def test_claude_code_two_sessions_in_one_file(tmp_path) -> None:
    items = docs(CC_5CALLS) + docs(CC_V2)
    result = import_claude_code(write_lines(tmp_path, "two.jsonl", items))
    assert [t.metadata.title.split(".jsonl ")[1] for t in result] == [
        "session 1 main turn 1",
        "session 2 main turn 1",
        "session 2 main turn 2",
        "session 2 main turn 3",
    ]
    (note,) = notes(result)
    assert "holds 2 sessions" in note


@needs_realdata
def test_claude_code_a_resumed_session_is_read_once(tmp_path) -> None:
    """A resumed session's file repeats the lines of the file it resumed (same uuids) and goes on:
    the folder counts each call once and says so."""
    items = docs(CC_V2)
    (tmp_path / "s1.jsonl").write_text("".join(json.dumps(d) + "\n" for d in items[:15]))
    write_lines(tmp_path, "s2.jsonl", items)
    result = import_claude_code(tmp_path)
    original = import_claude_code(CC_V2)
    assert (result.report.source_calls, result.report.imported_calls) == (original.report.source_calls,) * 2
    assert result.report.source_model_calls == original.report.source_model_calls
    assert [t.metadata.title for t in result] == [
        t.metadata.title.replace(CC_V2.name, "s2.jsonl") for t in original
    ]
    (note,) = notes(result)
    assert note.startswith("s1.jsonl main turn 1:") and "read once, from s2.jsonl" in note


# --- inspect: agents run as tools, stopped samples -------------------------------------------------


def _inspect_doc() -> dict:
    return json.loads(INSPECT.read_text())


@needs_realdata
def test_inspect_a_subagent_run_as_a_tool_is_its_own_trace(tmp_path) -> None:
    """A sub-agent's model calls inside the main agent's first tool call (inspect puts them in the
    tool's span): the main trace is what it was without them, and the sub-agent is a trace of its
    own, never the main agent's rounds."""
    doc = _inspect_doc()
    events = doc["samples"][0]["events"]
    k = next(i for i, e in enumerate(events) if e["event"] == "tool")
    tool = events[k]
    sub = copy.deepcopy(next(e for e in events if e["event"] == "model"))
    sub.pop("call", None)
    sub.update(timestamp=tool["timestamp"], completed=tool["timestamp"], working_time=0.0, span_id="sub-span")
    sub["input"] = [{"role": "user", "content": "find the link on the page"}]
    sub["output"] = {
        "model": "gpt-4o-mini",
        "choices": [{"message": {"role": "assistant", "content": "151"}}],
    }
    begin = {
        "event": "span_begin",
        "id": "sub-span",
        "parent_id": tool.get("span_id"),
        "type": "tool",
        "name": "researcher",
        "timestamp": tool["timestamp"],
    }
    events[k + 1 : k + 1] = [begin, sub]
    path = tmp_path / "inspect_sub.json"
    path.write_text(json.dumps(doc))
    result = import_inspect(path)
    original = import_inspect(INSPECT)
    main = [t for t in result if "sub-agent" not in t.metadata.title]
    assert [t.to_dict()["rounds"] for t in main] == [t.to_dict()["rounds"] for t in original]
    (subagent,) = [t for t in result if "sub-agent" in t.metadata.title]
    assert "sub-agent in tool span researcher" in subagent.metadata.title
    assert subagent.outcome.final_answer == "151" and len(subagent.rounds) == 1
    assert result.report.source_model_calls == original.report.source_model_calls + 1


@needs_realdata
def test_inspect_a_sample_stopped_at_a_limit_says_so(tmp_path) -> None:
    doc = _inspect_doc()
    sample = doc["samples"][0]
    last_model = max(i for i, e in enumerate(sample["events"]) if e["event"] == "model")
    sample["events"] = sample["events"][:last_model]  # inspect stopped before the last model call
    sample["limit"] = {"type": "message", "limit": 8}
    path = tmp_path / "limited.json"
    path.write_text(json.dumps(doc))
    result = import_inspect(path)
    (trace,) = result
    (gap,) = [i for i in result.report.issues if "limit" in i.what]
    assert gap.kind == "gap" and "message limit (8)" in gap.what
    assert (trace.outcome.status, trace.outcome.reason) == ("incomplete", "message_limit")
    assert "message limit" in trace.rounds[-1].placeholder
    assert (replay(trace).status, replay(trace).reason) == ("incomplete", "stopped_as_recorded")


# --- folders, wrong kinds, the source's own quirks ---------------------------------------------------


@needs_realdata
def test_a_folder_says_what_it_did_not_read(tmp_path, capsys) -> None:
    """A subfolder is listed (not skipped silently); a one-record OpenHands output among Claude Code
    files says what it looks like; a Claude Code file given to `import inspect` says so too."""
    (tmp_path / "a.jsonl").write_bytes(CC_5CALLS.read_bytes())
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.jsonl").write_bytes(CC_5CALLS.read_bytes())
    record = json.loads(
        (
            REALDATA
            / "OpenHands/openhands_codeact_llama-4-maverick_multi-swe-bench_3episodes_response_latencies.jsonl"
        )
        .read_text()
        .splitlines()[0]
    )
    (tmp_path / "one_episode.jsonl").write_text(json.dumps(record) + "\n")
    result = import_claude_code(tmp_path)
    by_where = {i.where: i for i in result.report.issues}
    assert by_where["sub/"].kind == "skipped" and "toolcall-lab import claude-code" in by_where["sub/"].what
    assert "it looks like openhands" in by_where["one_episode.jsonl"].what
    assert cli.main(["import", "inspect", str(CC_5CALLS), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "it looks like claude-code" in err and "Extra data: line 2 column 1" in err


@needs_realdata
def test_swe_agent_repeated_call_ids_are_noted() -> None:
    """The trajectory reuses call ids across steps (its own): kept, and the report and notes say so
    (as the Claude Code importer reports repeated ids)."""
    result = import_swe_agent(REALDATA / "SWE-agent")
    (note,) = notes(result)
    assert "call_5iDdbOYybq7L19vqXmR0DPaU in steps 2, 3, 8, 9" in note
    (trace,) = result
    assert "call ids repeat across steps" in trace.metadata.notes and result.report.clean

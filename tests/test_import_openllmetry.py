"""OTLP exports written by OpenLLMetry (Traceloop), and the shared reader's encodings (issue 13, a
third fresh-eyes tester's cases). Fixtures: tests/fixtures/otlp/README.md (modelled on OpenLLMetry
0.53.0's openai / anthropic instrumentations and traceloop-sdk decorators)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolcall_lab import cli
from toolcall_lab.importers import import_claude_code, import_otlp
from toolcall_lab.replay import replay

FIXTURES = Path(__file__).parent / "fixtures" / "otlp"
T0 = 1_751_474_439_000_000_000
MS = 1_000_000


def _span(sid: str, name: str, a: int, b: int, attrs: dict[str, Any]) -> dict[str, Any]:
    return {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": sid,
        "name": name,
        "startTimeUnixNano": str(T0 + a * MS),
        "endTimeUnixNano": str(T0 + b * MS),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }


def _tester_shape(tmp_path: Path, *, operation: bool) -> Path:
    """The tester's case: two openai.chat spans in OpenLLMetry's flattened form, a parallel batch of
    two get_weather calls, two traceloop tool spans (no call id, raw inputs), the results sent back as
    tool messages in the second span's prompt; `operation` adds gen_ai.operation.name=chat."""
    op = {"gen_ai.operation.name": "chat"} if operation else {}
    base = {**op, "gen_ai.system": "OpenAI", "llm.request.type": "chat", "gen_ai.request.model": "gpt-4o"}
    user = {"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "weather in Paris and Rome?"}
    calls: dict[str, str] = {}
    for i, (cid, city) in enumerate([("call_A", "Paris"), ("call_B", "Rome")]):
        calls |= {
            f"tool_calls.{i}.id": cid,
            f"tool_calls.{i}.name": "get_weather",
            f"tool_calls.{i}.arguments": json.dumps({"city": city}),
        }
    s1 = {
        **base,
        **user,
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.finish_reason": "tool_calls",
    }
    s1 |= {f"gen_ai.completion.0.{k}": v for k, v in calls.items()}
    s2 = {**base, **user, "gen_ai.prompt.1.role": "assistant"}
    s2 |= {f"gen_ai.prompt.1.{k}": v for k, v in calls.items()}
    s2 |= {
        "gen_ai.prompt.2.role": "tool",
        "gen_ai.prompt.2.content": "18C",
        "gen_ai.prompt.2.tool_call_id": "call_A",
        "gen_ai.prompt.3.role": "tool",
        "gen_ai.prompt.3.content": "25C",
        "gen_ai.prompt.3.tool_call_id": "call_B",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "Paris 18C, Rome 25C",
    }

    def tool(sid: str, city: str, out: str, a: int, b: int) -> dict[str, Any]:
        attrs = {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "get_weather",
            "traceloop.entity.input": json.dumps({"city": city}),
            "traceloop.entity.output": out,
        }
        return _span(sid, "get_weather.tool", a, b, attrs)

    spans = [
        _span("00f067aa0ba902b7", "openai.chat", 0, 1200, s1),
        tool("00f067aa0ba902b8", "Paris", "18C", 1210, 1710),
        tool("00f067aa0ba902b9", "Rome", "25C", 1215, 2015),
        _span("00f067aa0ba902ba", "openai.chat", 2030, 2930, s2),
    ]
    path = tmp_path / f"traceloop_{operation}.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    return path


@pytest.mark.parametrize("operation", [False, True])
def test_openllmetry_tester_shape_imports_results_and_tool_spans(tmp_path, operation) -> None:
    """Without gen_ai.operation.name the spans are model calls by llm.request.type; either way the
    results come from the next prompt's tool messages and the durations from the tool spans."""
    path = tmp_path / "x"
    src = _tester_shape(tmp_path, operation=operation)
    assert cli.main(["import", "otlp", str(src), "--out", str(path)]) == 0
    result = import_otlp(src)
    assert result.report.ok and result.report.imported_calls == 2 and not result.report.issues
    (trace,) = result
    paris, rome = trace.rounds[0].executions
    assert (paris.result, paris.status, paris.duration_s) == ("18C", "ok", pytest.approx(0.5, abs=1e-6))
    assert (rome.result, rome.status, rome.duration_s) == ("25C", "ok", pytest.approx(0.8, abs=1e-6))
    assert paris.timing.source == "recorded" and "get_weather.tool" in paris.timing.note
    assert "name and arguments" in paris.timing.note
    assert trace.rounds[0].model_call.latency_s == pytest.approx(1.2, abs=1e-6)
    assert trace.outcome.final_answer == "Paris 18C, Rome 25C"


def test_openllmetry_openai_tool_spans_matched_by_arguments_not_order() -> None:
    """Rome's tool span starts before Paris's: its input's kwargs pair it with Rome's call; the
    function's JSON return value is not preferred over what the model was sent back; tool schemas
    come from llm.request.functions.N.*; tokens from gen_ai.usage.* / llm.usage.total_tokens."""
    result = import_otlp(FIXTURES / "openllmetry_openai_tool_spans.json")
    assert result.report.ok and not result.report.issues
    (trace,) = result
    paris, rome = trace.rounds[0].executions
    assert (json.loads(paris.arguments), paris.result, paris.duration_s) == (
        {"city": "Paris"},
        "Paris: 18C, cloudy",
        pytest.approx(0.5, abs=1e-6),
    )
    assert (rome.result, rome.duration_s) == ("Rome: 25C, sunny", pytest.approx(0.8, abs=1e-6))
    assert trace.tools[0]["function"]["parameters"]["required"] == ["city"]
    assert trace.tools[0]["function"]["description"] == "Current weather in a city"
    assert trace.rounds[0].model_call.usage == {
        "prompt_tokens": 72,
        "completion_tokens": 46,
        "total_tokens": 118,
    }
    # the recorded overlap is kept: 1.2 s model + Rome 1.215-2.015 (ends last) + gap + 0.9 s model
    assert replay(trace, "parallel").wall_time_s == pytest.approx(1.2 + 0.8 + 0.9, abs=0.02)


def test_openllmetry_anthropic_blocks_thinking_and_errors() -> None:
    """Anthropic via OpenLLMetry: llm.request.type 'completion' on a Messages call, thinking as
    completion.0 and the tool_use calls on completion.1, tool_result blocks (one is_error) in the next
    prompt's user message, no tool spans: durations are the gap / 2 each, estimated."""
    result = import_otlp(FIXTURES / "openllmetry_anthropic.json")
    assert result.report.ok and result.report.imported_calls == 2
    (trace,) = result
    oslo, lima = trace.rounds[0].executions
    assert [c.tool_call_id for c in (oslo, lima)] == ["toolu_01Oslo", "toolu_02Lima"]
    assert (oslo.result, oslo.status) == ("Oslo: -3C, snow", "ok")
    assert (lima.result, lima.status) == ("weather service unavailable", "error")
    assert oslo.timing.source == "estimated" and oslo.duration_s == pytest.approx(0.6, abs=1e-6)
    assert trace.rounds[0].model_call.latency_s == pytest.approx(2.5, abs=1e-6)
    assert trace.tools[0]["function"]["parameters"]["properties"] == {"city": {"type": "string"}}
    assert trace.outcome.final_answer == "Oslo is -3C with snow; Lima's lookup failed."


def test_mixed_conventions_in_one_file() -> None:
    """One export per line: OpenLLMetry/OpenAI with tool spans lacking inputs (matched by the result
    the next model request sent back for each call, since the eighth pass; by name and order before,
    and the note says so), OpenLLMetry/Anthropic, GenAI conventions (matched by call id)."""
    result = import_otlp(FIXTURES / "mixed_conventions.jsonl")
    assert result.report.ok and result.report.imported_calls == 6 and result.report.source_model_calls == 6
    notes = {t.rounds[0].executions[0].timing.note for t in result}
    assert any(
        "matched by its result, which the next model request sent back as this call's" in n for n in notes
    )
    assert any("matched by call id" in n for n in notes)
    assert any(t.rounds[0].executions[0].timing.source == "estimated" for t in result)


def test_a_model_span_wrapping_another_is_one_call(tmp_path) -> None:
    """A framework span (LangChain via OpenLLMetry, llm.request.type chat) around the OpenAI client's
    span: one call instrumented twice, imported once and reported."""
    doc = json.loads(_tester_shape(tmp_path, operation=False).read_text())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    outer = json.loads(json.dumps(spans[0]))
    outer |= {"spanId": "aaaaaaaaaaaaaaaa", "name": "ChatOpenAI.chat", "startTimeUnixNano": str(T0 - 5 * MS)}
    spans[0]["parentSpanId"] = "aaaaaaaaaaaaaaaa"
    spans.append(outer)
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps(doc))
    result = import_otlp(path)
    assert result.report.imported_calls == 2 and result.report.source_model_calls == 2
    assert any("instrumented twice" in i.what for i in result.report.issues)
    (trace,) = result
    assert trace.rounds[0].model_call.latency_s == pytest.approx(1.2, abs=1e-6)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_a_utf16_file_is_read_and_said_so(tmp_path, encoding) -> None:
    """A file with a UTF-16 / UTF-32 byte order mark is decoded as such, with a note naming it."""
    text = _tester_shape(tmp_path, operation=False).read_text()
    path = tmp_path / "u.json"
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    path.write_bytes(data)
    result = import_otlp(path)
    assert result.report.imported_calls == 2
    (note,) = [i for i in result.report.issues if i.kind == "note"]
    assert encoding.upper().replace("-BE", "") in note.what.upper() and "byte order mark" in note.what


def test_claude_code_utf16_and_session_ids_sharing_a_prefix(tmp_path) -> None:
    """Two sessions whose ids share their first 8 characters: the note tells them apart; the file is
    UTF-16 and read as such."""
    lines = []
    for k, sid in enumerate(["1234abcd-0000-4000-8000-00000000000a", "1234abcd-0000-4000-8000-00000000000b"]):
        ts = f"2025-07-01T10:0{k}:00.000Z"
        lines += [
            {
                "type": "user",
                "uuid": f"u{k}",
                "parentUuid": None,
                "sessionId": sid,
                "timestamp": ts,
                "message": {"role": "user", "content": "list files"},
            },
            {
                "type": "assistant",
                "uuid": f"a{k}",
                "parentUuid": f"u{k}",
                "sessionId": sid,
                "timestamp": ts.replace(":00.000", ":01.000"),
                "message": {
                    "id": f"msg{k}",
                    "role": "assistant",
                    "model": "claude",
                    "content": [
                        {"type": "tool_use", "id": f"toolu_{k}", "name": "Bash", "input": {"command": "ls"}}
                    ],
                },
            },
            {
                "type": "user",
                "uuid": f"r{k}",
                "parentUuid": f"a{k}",
                "sessionId": sid,
                "timestamp": ts.replace(":00.000", ":02.000"),
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": "a.txt"}],
                },
            },
        ]
    path = tmp_path / "s.jsonl"
    path.write_bytes("\n".join(json.dumps(x) for x in lines).encode("utf-16"))
    result = import_claude_code(path)
    whats = [i.what for i in result.report.issues]
    assert any("UTF-16" in w for w in whats)
    (sessions,) = [w for w in whats if "sessions (" in w]
    assert "1234abcd-0000-4000-8000-00000000000a" in sessions and "00000000000b" in sessions

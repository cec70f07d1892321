"""Every real recording in ../shared/realdata parses to exactly the calls PROVENANCE.md lists."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REALDATA, needs_realdata
from tests.provenance import expected_calls
from toolcall_lab.exceptions import ProviderStreamError
from toolcall_lab.formats import iter_responses, read_recording

pytestmark = [needs_realdata, pytest.mark.realdata]

EXPECTED = expected_calls(REALDATA / "PROVENANCE.md") if (REALDATA / "PROVENANCE.md").is_file() else {}


def test_provenance_lists_the_recordings() -> None:
    # 47 recordings list calls; guards against the PROVENANCE reader silently matching nothing
    assert len(EXPECTED) >= 45
    assert sum(len(c) for r in EXPECTED.values() for x in r for c in x.choices.values()) >= 80


@pytest.mark.parametrize("relpath", sorted(EXPECTED))
def test_recording_yields_exactly_the_listed_calls(relpath: str) -> None:
    responses = read_recording(REALDATA / relpath).parse()
    expected = EXPECTED[relpath]
    assert len(responses) == len(expected), [r.tool_calls for r in responses]
    for number, (got, want) in enumerate(zip(responses, expected, strict=True)):
        got_choices = {c.index: c.tool_calls for c in got.choices} or {0: ()}
        for choice, want_calls in want.choices.items():
            calls = got_choices.get(choice, ())
            assert len(calls) == len(want_calls), f"response {number} choice {choice}: {calls}"
            for call, exp in zip(calls, want_calls, strict=True):
                assert call.name == exp.name
                if exp.prefix_only:
                    assert call.arguments.startswith(exp.arguments)
                else:
                    assert call.arguments == exp.arguments  # byte-exact raw string
                if exp.tool_call_id is None:  # provider sent no usable id: fallback, and said so
                    assert call.id_source == "fallback"
                    assert call.tool_call_id == f"call_{number}_{call.index}" + (
                        f"_c{choice}" if choice else ""
                    )
                    assert {f.kind for f in got.findings} & {"missing_id", "empty_id"}
                else:
                    assert call.tool_call_id == exp.tool_call_id
                    assert call.id_source == "provider"
                assert call.complete == exp.valid_json


def test_pathological_snapshot_arguments_are_reported_not_repaired() -> None:
    """Quirk: mistral-large on watsonx sends a complete JSON object in every delta."""
    path = (
        REALDATA
        / "watsonx-ai-java-sdk/watsonx_mistral-large-2512_chat_stream_parallel2_PATHOLOGICAL_snapshot_args.sse"
    )
    (response,) = read_recording(path).parse()
    assert all(not c.complete for c in response.tool_calls)
    kinds = [f.kind for f in response.findings]
    assert kinds.count("invalid_arguments") == 2
    assert response.tool_calls[0].arguments.startswith('{"country": ""}{"country": "Italy"}')


def test_midstream_error_event_raises_with_the_provider_message() -> None:
    """Quirk: Groq ends an HTTP 200 stream with `event: error` instead of tool calls."""
    path = REALDATA / "pydantic-ai/groq_chat_stream_gpt-oss-120b_midstream_error_event_tool_use_failed.sse"
    with pytest.raises(ProviderStreamError, match="Tool call validation failed") as info:
        read_recording(path).parse()
    assert info.value.line_number is not None
    (partial,) = info.value.partial_responses  # the reasoning streamed before the error is kept
    assert partial.error and "Tool call validation failed" in partial.error
    assert partial.first.reasoning and "provider_error" in {f.kind for f in partial.findings}
    with pytest.raises(ProviderStreamError) as streamed:
        list(iter_responses(path))
    assert streamed.value.line_number == info.value.line_number
    (kept,) = read_recording(path).parse(errors="keep")
    assert kept.error == partial.error


def test_repeated_id_and_name_are_not_concatenated() -> None:
    """Quirk: OpenRouter/Novita repeats id "0" and the name on every delta."""
    path = (
        REALDATA
        / "simonw-llm/openrouter_novita_kimi-k2_chat_stream_variant_a_id_and_name_repeated_every_delta.sse"
    )
    (response,) = read_recording(path).parse()
    (call,) = response.tool_calls
    assert (call.tool_call_id, call.name) == ("0", "llm_version")
    assert {"repeated_header", "no_finish_reason"} <= {f.kind for f in response.findings}


def test_n2_choices_are_keyed_by_choice_and_index() -> None:
    """Quirk: watsonx n=2 interleaves two choices, each with a call at index 0."""
    path = REALDATA / "watsonx-ai-java-sdk/watsonx_gpt-oss-120b_chat_stream_n2_choices_1_tool_each.sse"
    (response,) = read_recording(path).parse()
    assert [c.index for c in response.choices] == [0, 1]
    assert all(len(c.tool_calls) == 1 and c.reasoning for c in response.choices)


def test_streamed_and_whole_forms_agree() -> None:
    """The same Qwen response, streamed and whole, gives the same call name and arguments."""
    stream = read_recording(REALDATA / "vercel-ai/qwen3-max_dashscope_chat_stream_1_tool.chunks.jsonl")
    whole = read_recording(REALDATA / "vercel-ai/qwen3-max_dashscope_chat_nonstream_1_tool.json")
    (s,), (w,) = stream.parse()[0].tool_calls, whole.parse()[0].tool_calls
    assert (s.name, s.args) == (w.name, w.args)


@pytest.mark.parametrize(
    "relpath",
    [
        "openai-python/chat_stream_gpt-4o_parallel_2_tools_weather_stock.sse",
        "vercel-ai/mistral-small_chat_stream_1_tool_no_index.chunks.jsonl",
        "pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml",
    ],
)
def test_cli_parse_prints_the_calls(relpath: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "parse", str(REALDATA / relpath)],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(out.stdout)
    first = doc.get("responses", [doc])[0]
    want = EXPECTED[relpath]
    assert [t["arguments"] for t in first["choices"][0]["tool_calls"]] == [
        c.arguments for c in want[0].choices[0]
    ]


def test_cli_parse_unreadable_input_exits_2(tmp_path) -> None:
    bad = tmp_path / "bad.sse"
    bad.write_text("data: {not json\n\n")
    out = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "parse", str(bad)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert "line 1" in out.stderr and out.stderr.count("\n") == 1

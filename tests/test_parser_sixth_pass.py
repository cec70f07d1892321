"""Issue 10, sixth pass: the fifteen findings of a fresh-eyes tester (each test names its number),
fixed by class, not by example. Bytes are written here; every input is read whole
(`read_recording`) and streamed (`iter_responses`), and both must agree.

The one rule for how a response ended lives in `toolcall_lab/formats/_endings.py`; the tests of
findings 1, 3 and 4 run it through every reader."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolcall_lab.conformance import load_cases, run_corpus, unpaired_inputs
from toolcall_lab.exceptions import ProviderStreamError, ToolcallLabError, UnknownFormatError
from toolcall_lab.formats import ChatCompletionAccumulator, iter_responses, read_recording
from toolcall_lab.formats._endings import ending_of
from toolcall_lab.formats.recordings import RecordingReader
from toolcall_lab.messages import InvalidArguments, ParsedArguments, ParsedResponse, parse_arguments


# -- helpers ----------------------------------------------------------------------------------------
def ev(payload: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"{head}data: {data}\n\n"


def chat(delta: Any, finish: Any = None, **choice: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-6",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **choice}],
    }


def tc(index: Any, tid: Any = None, name: Any = None, args: Any = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if tid is not None:
        entry["id"], entry["type"] = tid, "function"
    if name is not None:
        entry["function"]["name"] = name
    return {"tool_calls": [entry]}


DONE = "data: [DONE]\n\n"
WEATHER = '{"city":"Paris"}'
HEADER = ev(chat(tc(0, "call_1", "get_weather")))
ARGS = ev(chat(tc(0, args=WEATHER)))
A_START = ev({"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {}}})
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
R_START = ev({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}})
FC = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}


def a_end(stop: Any = "tool_use") -> str:
    return ev({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {}}) + ev(
        {"type": "message_stop"}
    )


def a_block(index: Any, block: Any = TOOL_USE, **extra: Any) -> str:
    event: dict[str, Any] = {"type": "content_block_start", "content_block": block, **extra}
    if index is not None:
        event["index"] = index
    return ev(event)


def a_json(index: Any, partial: str) -> str:
    return ev(
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": partial},
        }
    )


def a_stop(index: Any) -> str:
    return ev({"type": "content_block_stop", "index": index})


def r_added(item: Any, index: int = 0) -> str:
    return ev({"type": "response.output_item.added", "output_index": index, "item": item})


def r_delta(delta: str, item_id: str = "fc_1", index: int = 0) -> str:
    return ev(
        {
            "type": "response.function_call_arguments.delta",
            "item_id": item_id,
            "output_index": index,
            "delta": delta,
        }
    )


def r_item_done(item: dict[str, Any], index: int = 0) -> str:
    return ev({"type": "response.output_item.done", "output_index": index, "item": item})


def r_end(status: str = "completed", output: Any = None, kind: str = "response.completed") -> str:
    response: dict[str, Any] = {"id": "resp_1", "status": status}
    if output is not None:
        response["output"] = output
    return ev({"type": kind, "response": response})


def parse(tmp_path: Path, data: str | bytes, name: str = "x.sse") -> list[ParsedResponse]:
    """Every response of the file, read whole and streamed (which must agree), errors kept."""
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    whole = read_recording(path).parse(errors="keep")
    streamed = list(iter_responses(path, errors="keep"))
    assert [r.to_dict() for r in whole] == [r.to_dict() for r in streamed]
    for response in whole:
        named_incomplete(response)
    return streamed


def one(tmp_path: Path, data: str | bytes, name: str = "x.sse") -> ParsedResponse:
    (response,) = parse(tmp_path, data, name)
    return response


def named_incomplete(response: ParsedResponse) -> None:
    """The invariant behind findings 1-4 and 14: every call that will not run has a finding naming it."""
    named = {f.tool_call_id for f in response.findings if f.severity == "error"}
    for choice in response.choices:
        for call in choice.tool_calls:
            if not call.complete:
                assert call.tool_call_id in named, (call, response.findings)


def kinds(response: ParsedResponse) -> list[str]:
    return sorted(f.kind for f in response.findings)


def calls(response: ParsedResponse) -> list[tuple[str, str, str, bool]]:
    return [(c.tool_call_id, c.name, c.arguments, c.complete) for c in response.tool_calls]


def said(response: ParsedResponse, kind: str) -> str:
    return " | ".join(f.message for f in response.findings if f.kind == kind)


def body(finish: Any, tool_calls: list[dict[str, Any]]) -> str:
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
    )


FN = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": WEATHER}}
EMPTY_FN = {"id": "call_1", "type": "function", "function": {"name": "delete_files", "arguments": ""}}
CUSTOM = {"id": "call_c", "type": "custom", "custom": {"name": "shell", "input": "rm -rf /tmp/build"}}
ENDING_KIND = {
    "length": "length_finish",
    "max_tokens": "length_finish",
    "MAX_TOKENS": "length_finish",
    "SAFETY": "filtered_finish",
    "content_filter": "filtered_finish",
    "abort": "abnormal_finish",
    "cancelled": "abnormal_finish",
    "timeout": "abnormal_finish",
    "malformed_function_call": "abnormal_finish",
    "some_new_reason": "abnormal_finish",
}
NOT_NORMAL = list(ENDING_KIND)
NORMAL = ["stop", "tool_calls", "function_call", "STOP", "eos_token"]


# -- 1, 3, 4: one rule for what "ended normally" means ----------------------------------------------
def test_the_rule_lists_the_normal_reasons_and_nothing_else() -> None:
    assert [ending_of(r) for r in ("stop", "tool_calls", "end_turn", "tool_use", "STOP", "completed")] == [
        "normal"
    ] * 6
    assert ending_of(None) == "none"
    assert {r: ending_of(r) for r in ("length", "MAX_TOKENS", "model_length")} == dict.fromkeys(
        ("length", "MAX_TOKENS", "model_length"), "limit"
    )
    assert ending_of("SAFETY") == ending_of("refusal") == "filtered"
    assert ending_of("abort") == ending_of("pause_turn") == ending_of("") == ending_of("xyz") == "abnormal"


@pytest.mark.parametrize("reason", NOT_NORMAL)
def test_1_chat_stream_a_reason_that_is_not_normal_never_runs_empty_arguments(
    tmp_path: Path, reason: str
) -> None:
    """vLLM ends an engine-aborted stream with finish_reason "abort" then [DONE]: the header's call ran
    with {} before (vllm-project/vllm#57082)."""
    r = one(tmp_path, HEADER + ev(chat({}, reason)) + DONE)
    assert calls(r) == [("call_1", "get_weather", "", False)]
    assert kinds(r) == sorted(["incomplete_arguments", ENDING_KIND[reason]])
    assert f"finish_reason {reason!r}" in said(r, "incomplete_arguments") + said(r, "filtered_finish")
    assert "empty_arguments" not in kinds(r)


@pytest.mark.parametrize("reason", NOT_NORMAL)
def test_1_chat_stream_arguments_that_parse_are_not_shown_finished(tmp_path: Path, reason: str) -> None:
    r = one(tmp_path, HEADER + ARGS + ev(chat({}, reason)) + DONE)
    assert calls(r) == [("call_1", "get_weather", WEATHER, False)]
    assert kinds(r) == sorted(["unfinished_call", ENDING_KIND[reason]])
    assert said(r, "unfinished_call").startswith("call call_1 (get_weather): ")


@pytest.mark.parametrize("reason", NORMAL)
def test_1_normal_reasons_end_normally(tmp_path: Path, reason: str) -> None:
    r = one(tmp_path, HEADER + ARGS + ev(chat({}, reason)) + DONE)
    assert calls(r) == [("call_1", "get_weather", WEATHER, True)] and kinds(r) == []
    empty = one(tmp_path, HEADER + ev(chat({}, reason)) + DONE)
    assert calls(empty) == [("call_1", "get_weather", "", True)] and kinds(empty) == ["empty_arguments"]


def test_1_no_finish_reason_at_all_keeps_whole_json(tmp_path: Path) -> None:
    """OpenRouter/Novita send no finish_reason at all (a real recording): JSON that closes is whole,
    an empty string is not `{}`."""
    r = one(tmp_path, HEADER + ARGS + DONE)
    assert calls(r) == [("call_1", "get_weather", WEATHER, True)] and kinds(r) == ["no_finish_reason"]
    empty = one(tmp_path, HEADER + DONE)
    assert calls(empty)[0][3] is False and "incomplete_arguments" in kinds(empty)


@pytest.mark.parametrize("reason", NOT_NORMAL)
def test_1_chat_body_a_reason_that_is_not_normal(tmp_path: Path, reason: str) -> None:
    """No chat body got a finding for `length` before, and its calls ran."""
    r = one(tmp_path, body(reason, [FN]), "x.json")
    assert calls(r)[0][3] is False and ENDING_KIND[reason] in kinds(r)
    empty = one(tmp_path, body(reason, [EMPTY_FN]), "x.json")
    assert calls(empty)[0][3] is False and "empty_arguments" not in kinds(empty)


@pytest.mark.parametrize("reason", ["max_tokens", "pause_turn", "abort", "some_new_reason"])
def test_1_anthropic_stream_a_block_not_closed_under_such_a_reason_is_incomplete(
    tmp_path: Path, reason: str
) -> None:
    cut = one(tmp_path, A_START + a_block(0) + a_json(0, WEATHER) + a_end(reason))
    assert calls(cut) == [("toolu_1", "get_weather", WEATHER, False)] and "unfinished_call" in kinds(cut)
    text = a_block(1, {"type": "text", "text": ""}) + a_stop(1)
    closed = one(tmp_path, A_START + a_block(0) + a_json(0, WEATHER) + a_stop(0) + text + a_end(reason))
    assert calls(closed) == [("toolu_1", "get_weather", WEATHER, True)]  # a block after it shows it ended
    assert kinds(closed) == [ENDING_KIND.get(reason, "abnormal_finish")]
    # the last block: its content_block_stop shows nothing (the API closes a cut block too), as in a
    # whole body (issue 10, ninth pass)
    last = one(tmp_path, A_START + a_block(0) + a_json(0, WEATHER) + a_stop(0) + a_end(reason))
    assert calls(last) == [("toolu_1", "get_weather", WEATHER, False)] and "unfinished_call" in kinds(last)


def test_1_anthropic_stream_cut_before_its_stop_reason(tmp_path: Path) -> None:
    r = one(tmp_path, A_START + a_block(0) + a_json(0, WEATHER))
    assert calls(r) == [("toolu_1", "get_weather", WEATHER, False)]
    assert kinds(r) == ["no_finish_reason", "unfinished_call"]


@pytest.mark.parametrize("status", ["cancelled", "some_new_status"])
def test_1_responses_a_status_that_is_not_normal(tmp_path: Path, status: str) -> None:
    r = one(tmp_path, R_START + r_added(FC) + r_delta(WEATHER) + r_end(status))
    assert calls(r) == [("call_1", "get_weather", WEATHER, False)]
    assert kinds(r) == ["abnormal_finish", "unfinished_call"]
    done = one(tmp_path, R_START + r_added(FC) + r_item_done({**FC, "arguments": WEATHER}) + r_end(status))
    assert calls(done)[0][3] is True  # its item finished


def test_1_responses_stream_cut_before_response_completed(tmp_path: Path) -> None:
    """Arguments that parse but whose item never finished ran before."""
    r = one(tmp_path, R_START + r_added(FC) + r_delta(WEATHER))
    assert calls(r) == [("call_1", "get_weather", WEATHER, False)]
    assert kinds(r) == ["no_finish_reason", "unfinished_call"]


def test_1_vllm_abort_through_the_cli(tmp_path: Path) -> None:
    """The tester's command: rc 0 and `complete: true` before."""
    path = tmp_path / "abort.sse"
    path.write_text(HEADER + ev(chat({"content": ""}, "abort")) + DONE)
    out = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "parse", str(path)], capture_output=True, text=True
    )
    doc = json.loads(out.stdout)
    assert doc["choices"][0]["tool_calls"][0]["complete"] is False
    assert {"incomplete_arguments", "abnormal_finish"} <= {f["kind"] for f in doc["findings"]}


def test_3_a_custom_call_cut_at_the_token_limit_never_runs(tmp_path: Path) -> None:
    streamed = one(
        tmp_path, ev(chat({"tool_calls": [{"index": 0, **CUSTOM}]})) + ev(chat({}, "length")) + DONE
    )
    whole = one(tmp_path, body("length", [CUSTOM]), "x.json")
    for r in (streamed, whole):
        (call,) = r.tool_calls
        assert (call.kind, call.arguments, call.complete) == ("custom", "rm -rf /tmp/build", False)
        assert kinds(r) == ["custom_tool_call", "length_finish", "unfinished_call"]
        assert "call call_c (shell)" in said(r, "unfinished_call")
    ended = one(tmp_path, body("stop", [CUSTOM]), "x.json")
    assert ended.tool_calls[0].complete and kinds(ended) == ["custom_tool_call"]


def test_4_anthropic_body_cut_at_max_tokens_holds_its_last_tool_use(tmp_path: Path) -> None:
    """Anthropic: a response cut at max_tokens may end in an incomplete tool_use block (its `input`
    parses whatever was cut from it). It ran with no finding before."""
    first = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}}
    last = {"type": "tool_use", "id": "toolu_2", "name": "write_file", "input": {"path": "notes.txt"}}
    message = {"type": "message", "role": "assistant", "stop_reason": "max_tokens", "content": [first, last]}
    r = one(tmp_path, json.dumps(message), "x.json")
    assert [(c.tool_call_id, c.complete) for c in r.tool_calls] == [("toolu_1", True), ("toolu_2", False)]
    assert kinds(r) == ["length_finish", "unfinished_call"] and "toolu_2" in said(r, "unfinished_call")
    then_text = {**message, "content": [first, {"type": "text", "text": "cut"}]}
    assert one(tmp_path, json.dumps(then_text), "x.json").tool_calls[0].complete  # a block came after it


# -- 2: bytes that are not UTF-8 in arguments -------------------------------------------------------
LATIN1 = (
    ev(chat(tc(0, "call_1", "write_file", ""))).encode()
    + b'data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"path\\": \\"caf\xe9.txt\\"}"}}]},"finish_reason":null}]}\n\n'
    + ev(chat({}, "tool_calls")).encode()
    + DONE.encode()
)


def test_2_arguments_holding_replaced_bytes_never_run(tmp_path: Path) -> None:
    r = one(tmp_path, LATIN1)
    assert calls(r) == [("call_1", "write_file", '{"path": "caf\ufffd.txt"}', False)]
    assert kinds(r) == ["call_held_back", "invalid_utf8"]
    held = next(f for f in r.findings if f.kind == "call_held_back")
    assert held.tool_call_id == "call_1" and "line 3" in held.message


def test_2_the_same_in_json_lines_and_in_a_cassette_body(tmp_path: Path) -> None:
    lines = b"\n".join(line[6:] for line in LATIN1.split(b"\n\n") if line.startswith(b"data: {")) + b"\n"
    r = one(tmp_path, lines, "x.chunks.jsonl")
    assert calls(r)[0][3] is False and "call_held_back" in kinds(r)
    message = {
        "role": "assistant",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f"}}],
    }
    raw = json.dumps(
        {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        }
    ).replace('"name": "f"}', '"name": "f", "arguments": "{\\"a\\": \\"\xe9\\"}"}')
    cassette = (
        "interactions:\n- request: {}\n  response:\n    status: {code: 200}\n"
        "    headers: {Content-Type: [application/json]}\n"
        f"    body: {{string: !!binary '{__import__('base64').b64encode(raw.encode('latin-1')).decode()}'}}\n"
    )
    (c,) = parse(tmp_path, cassette, "x.yaml")
    assert calls(c)[0][3] is False and kinds(c) == ["call_held_back", "invalid_utf8"]


def test_2_a_real_replacement_character_or_bad_bytes_elsewhere_hold_nothing(tmp_path: Path) -> None:
    real = one(tmp_path, HEADER + ev(chat(tc(0, args='{"s":"\ufffd"}'))) + ev(chat({}, "stop")) + DONE)
    assert calls(real)[0][3] is True  # valid UTF-8 bytes EF BF BD: what the model sent
    text = ev(chat({"content": "x"})).replace('"x"', '"caf\xe9"').encode("latin-1")
    elsewhere = one(tmp_path, text + (HEADER + ARGS + ev(chat({}, "stop")) + DONE).encode())
    assert calls(elsewhere)[0][3] is True and kinds(elsewhere) == ["invalid_utf8"]


# -- 5, 11: Anthropic block indexes ---------------------------------------------------------------
def test_5_arguments_at_another_index_hold_the_call_back(tmp_path: Path) -> None:
    """The block at index 1 ran with `{}` and its real arguments (at index 0) were dropped."""
    r = one(tmp_path, A_START + a_block(1) + a_json(0, '{"confirm": false}') + a_stop(1) + a_end())
    assert calls(r) == [("toolu_1", "get_weather", "{}", False)]
    assert kinds(r) == ["call_held_back", "orphan_delta"]
    assert '{"confirm": false}' in said(r, "orphan_delta")


@pytest.mark.parametrize("start", [{}, {"index": None}, {"index": [0]}], ids=["absent", "null", "array"])
def test_5_a_block_start_without_a_usable_index(tmp_path: Path, start: dict[str, Any]) -> None:
    block = ev({"type": "content_block_start", "content_block": TOOL_USE, **start})
    r = one(tmp_path, A_START + block + a_json(0, '{"a":1}') + a_stop(0) + a_end())
    assert calls(r)[0][3] is False
    assert kinds(r) == ["call_held_back", "malformed_chunk", "orphan_delta"]
    assert "content_block_start" in said(r, "malformed_chunk")


@pytest.mark.parametrize("index", [0.0, "0"])
def test_11_an_index_of_another_type_is_read_and_reported(tmp_path: Path, index: Any) -> None:
    r = one(tmp_path, A_START + a_block(index) + a_json(index, '{"a":1}') + a_stop(index) + a_end())
    assert calls(r) == [("toolu_1", "get_weather", '{"a":1}', True)]
    assert set(kinds(r)) == {"wrong_type"} and f"index {json.dumps(index)}" in said(r, "wrong_type")


def test_11_an_integer_index_is_no_finding_on_any_delta(tmp_path: Path) -> None:
    odd = ev({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta_v2"}})
    r = one(tmp_path, A_START + a_block(0) + odd + a_stop(0) + a_end())
    assert kinds(r) == ["call_held_back", "unknown_event"]


def test_11_a_null_content_block_or_item_is_malformed(tmp_path: Path) -> None:
    r = one(
        tmp_path, A_START + ev({"type": "content_block_start", "index": 0, "content_block": None}) + a_end()
    )
    assert kinds(r) == ["finish_without_calls", "malformed_chunk"]  # stop_reason tool_use, no call read
    assert "`content_block` is null" in said(r, "malformed_chunk")
    resp = one(tmp_path, R_START + ev({"type": "response.output_item.added", "output_index": 0}) + r_end())
    assert kinds(resp) == ["malformed_chunk"] and "`item` is missing" in said(resp, "malformed_chunk")


# -- 6, 11, 12: chat payloads and parts of an unexpected shape --------------------------------------
OLLAMA = {
    "model": "llama3.1",
    "message": {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "get_time", "arguments": {}}}],
    },
    "done": False,
}
GEMINI = {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {}}}]}}]}


@pytest.mark.parametrize("stray", [OLLAMA, GEMINI], ids=["ollama", "gemini"])
def test_6_a_payload_of_another_format_carrying_a_call_holds_the_calls_back(
    tmp_path: Path, stray: Any
) -> None:
    r = one(tmp_path, HEADER + ARGS + ev(stray) + ev(chat({}, "tool_calls")) + DONE)
    assert calls(r) == [("call_1", "get_weather", WEATHER, False)]
    assert kinds(r) == ["call_held_back", "malformed_chunk"]
    assert "not a chat-completion chunk" in said(r, "malformed_chunk")


@pytest.mark.parametrize(  # (`{"detail": ...}` alone is FastAPI's error shape: a provider error, v10 item 7)
    "stray", [{"detail": "Internal Server Error", "status": 500}, {"foo": 1}]
)
def test_6_a_payload_of_unknown_shape_is_reported_never_dropped(tmp_path: Path, stray: Any) -> None:
    r = one(tmp_path, HEADER + ARGS + ev(stray) + ev(chat({}, "tool_calls")) + DONE)
    assert calls(r)[0][3] is True  # it holds no call data: nothing to hold back
    assert kinds(r) == ["malformed_chunk"] and json.dumps(stray, separators=(",", ":")) in said(
        r, "malformed_chunk"
    )


def test_6_a_usage_chunk_without_choices_is_no_finding(tmp_path: Path) -> None:
    usage = {"id": "chatcmpl-6", "object": "chat.completion.chunk", "usage": {"total_tokens": 3}}
    r = one(tmp_path, HEADER + ARGS + ev(chat({}, "tool_calls")) + ev(usage) + DONE)
    assert kinds(r) == [] and r.usage == {"total_tokens": 3}
    bare = one(
        tmp_path, HEADER + ARGS + ev(chat({}, "tool_calls")) + ev({"usage": {"total_tokens": 3}}) + DONE
    )
    assert kinds(bare) == []


def test_6_a_choice_with_tool_calls_and_no_delta(tmp_path: Path) -> None:
    nodelta = {"id": "chatcmpl-6", "choices": [{"index": 0, "tool_calls": [{"index": 1, "id": "call_z"}]}]}
    r = one(tmp_path, HEADER + ARGS + ev(nodelta) + ev(chat({}, "tool_calls")) + DONE)
    assert calls(r)[0][3] is False and kinds(r) == ["call_held_back", "malformed_chunk"]
    assert "has no `delta`" in said(r, "malformed_chunk")


def test_12_choices_as_one_object_is_read(tmp_path: Path) -> None:
    one_object = chat(tc(0, "call_1", "get_weather", WEATHER))
    one_object["choices"] = one_object["choices"][0]
    r = one(tmp_path, ev(one_object) + ev(chat({}, "tool_calls")) + DONE)
    assert calls(r) == [("call_1", "get_weather", WEATHER, True)]
    assert kinds(r) == ["wrong_type"] and "choices is one object" in said(r, "wrong_type")


@pytest.mark.parametrize(
    "delta", [json.dumps(tc(0, "call_2", "f", "{}")), ["x"], 5], ids=["json string", "array", "number"]
)
def test_12_a_delta_that_is_not_an_object(tmp_path: Path, delta: Any) -> None:
    """Dropped with a warning before, the stream then ended `tool_calls` with the calls it had."""
    r = one(tmp_path, HEADER + ARGS + ev(chat(delta)) + ev(chat({}, "tool_calls")) + DONE)
    held = isinstance(delta, str)  # only the string names tool calls
    assert calls(r) == [("call_1", "get_weather", WEATHER, not held)]
    assert kinds(r) == (["call_held_back", "malformed_chunk"] if held else ["malformed_chunk"])


@pytest.mark.parametrize("choice", [{}, {"index": None}], ids=["absent", "null"])
def test_11_a_choice_index_absent_or_null_is_reported(tmp_path: Path, choice: dict[str, Any]) -> None:
    chunk = {"id": "chatcmpl-6", "choices": [{"delta": {"content": "hi"}, "finish_reason": "stop", **choice}]}
    r = one(tmp_path, ev(chunk) + DONE)
    assert r.first.content == "hi" and kinds(r) == ["wrong_type"]
    assert "read as choice 0" in said(r, "wrong_type")
    message = {"role": "assistant", "content": "hi"}
    whole = {
        "object": "chat.completion",
        "choices": [{"message": message, "finish_reason": "stop", **choice}],
    }
    w = one(tmp_path, json.dumps(whole), "x.json")
    assert w.first.content == "hi" and kinds(w) == ["wrong_type"]
    assert "numbered by its position" in said(w, "wrong_type")


# -- 10: ids, names and indexes of the wrong type: the README and the messages agree ----------------
def test_10_ids_and_names_of_another_type(tmp_path: Path) -> None:
    r = one(
        tmp_path,
        ev(chat(tc(0, 123, "f", "{}")))
        + ev(chat(tc(1, {"x": 1}, "g", "{}")))
        + ev(chat(tc(2, "call_c", 42, "{}")))
        + ev(chat(tc(3, "call_d", ["h"], "{}")))
        + ev(chat({}, "tool_calls"))
        + DONE,
    )
    assert [(c.tool_call_id, c.name, c.complete) for c in r.tool_calls] == [
        ("123", "f", True),
        ("call_0_1", "g", True),
        ("call_c", "42", True),
        ("call_d", "", False),
    ]
    assert kinds(r) == ["missing_id", "missing_name", "wrong_type", "wrong_type", "wrong_type", "wrong_type"]
    notes = said(r, "wrong_type")
    assert "id 123 is a number, not a string; read as '123'" in notes
    assert 'id {"x":1} is an object, not a string; read as absent' in notes
    assert 'name ["h"] is an array, not a string; read as absent' in notes


def test_10_index_messages_do_not_contradict_themselves(tmp_path: Path) -> None:
    r = one(tmp_path, ev(chat(tc(0.0, "call_1", "f", "{}"))) + ev(chat(tc(-1, "call_2", "g", "{}"))) + DONE)
    notes = [f.message for f in r.findings if f.kind in ("wrong_type", "malformed_chunk")]
    assert notes == [
        "chunk 0: tool call index 0.0 is a number; read as 0",
        "chunk 1: tool call index -1 is negative; numbered as call 1",
    ]
    assert not any("skipped" in m for m in notes)


# -- 7: response.completed is authoritative ----------------------------------------------------------
def test_7_an_item_never_finished_and_not_in_completed_is_incomplete(tmp_path: Path) -> None:
    r = one(tmp_path, R_START + r_added(FC) + r_delta(WEATHER) + r_end(output=[]))
    assert calls(r) == [("call_1", "get_weather", WEATHER, False)]
    assert kinds(r) == ["not_in_completed", "unfinished_call"] and "never finished" in said(
        r, "not_in_completed"
    )


def test_7_a_finished_item_not_in_completed_is_kept_and_no_output_is_no_verdict(tmp_path: Path) -> None:
    done = one(tmp_path, R_START + r_added(FC) + r_item_done({**FC, "arguments": WEATHER}) + r_end(output=[]))
    assert calls(done)[0][3] is True and "kept as streamed" in said(done, "not_in_completed")
    unlisted = one(tmp_path, R_START + r_added(FC) + r_delta(WEATHER) + r_end())  # completed has no output
    assert calls(unlisted)[0][3] is True and kinds(unlisted) == []


# -- 8: JSON text is one document or JSON lines by its structure --------------------------------------
class Trickle(io.RawIOBase):
    """Standard input that gives at most `size` bytes per read, whatever is asked."""

    def __init__(self, data: bytes, size: int) -> None:
        self.data, self.size, self.pos = data, size, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:  # the rest, as a file gives it
            chunk = self.data[self.pos :]
            self.pos = len(self.data)
            return chunk
        chunk = self.data[self.pos : self.pos + self.size]
        self.pos += len(chunk)
        return chunk


CONTENT = chat({"content": "x" * 5000 + '\\"} {\\\\'})
CALL = {
    "id": "c",
    "choices": [{"index": 0, "delta": tc(0, "call_1", "f", "{}"), "finish_reason": "tool_calls"}],
}


@pytest.mark.parametrize("eol", ["\n", "\r", "\r\n"], ids=["LF", "CR", "CRLF"])
@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 20])
def test_8_json_lines_on_stdin_whatever_the_line_ends_and_read_sizes(eol: str, size: int) -> None:
    """CR-only lines with a first line over 4 KB, or any line end with one over 1 MiB, were read as one
    JSON document ("Extra data")."""
    data = (json.dumps(CONTENT) + eol + json.dumps(CALL) + eol).encode()
    reader = RecordingReader("-", stdin=Trickle(data, size))  # type: ignore[arg-type]
    (r,) = list(reader)
    assert reader.container == "chunks-jsonl" and calls(r) == [("call_1", "f", "{}", True)]


def test_8_a_first_line_over_a_read_block(tmp_path: Path) -> None:
    big = chat({"content": "y" * (1 << 21)})
    data = json.dumps(big) + "\n" + json.dumps(CALL) + "\n"
    assert calls(one(tmp_path, data, "x.sse")) == [("call_1", "f", "{}", True)]
    reader = RecordingReader("-", stdin=io.BytesIO(data.encode()))
    assert [calls(r) for r in reader] == [
        [("call_1", "f", "{}", True)]
    ] and reader.container == "chunks-jsonl"


@pytest.mark.parametrize("size", [1, 5, 1 << 20])
def test_8_one_document_stays_one_document(size: int) -> None:
    doc = json.dumps(json.loads(body("tool_calls", [FN])), indent=2).replace("\n", "\r\n")
    reader = RecordingReader("-", stdin=Trickle(doc.encode(), size))  # type: ignore[arg-type]
    assert [calls(r) for r in reader] == [[("call_1", "get_weather", WEATHER, True)]]
    assert reader.container == "json"


# -- 9: duplicate keys ---------------------------------------------------------------------------------
def test_9_duplicate_keys_never_run(tmp_path: Path) -> None:
    """The last value won silently: {"dest": "/tmp/safe", "dest": "/"} moved to /."""
    dup = '{"dest": "/tmp/safe", "dest": "/"}'
    r = one(tmp_path, HEADER + ev(chat(tc(0, args=dup))) + ev(chat({}, "tool_calls")) + DONE)
    assert calls(r) == [("call_1", "get_weather", dup, False)] and kinds(r) == ["duplicate_keys"]
    note = next(f for f in r.findings if f.kind == "duplicate_keys")
    assert note.tool_call_id == "call_1" and "'dest' appears twice" in note.message
    outcome = r.tool_calls[0].parse_arguments()
    assert isinstance(outcome, InvalidArguments) and outcome.duplicate_key == "dest"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ('{"a": {"b": 1, "b": 2}}', "b"),
        ('{"a": [{"k": 1, "k": 1}]}', "k"),
        ('{"u\\u003a": 1, "u:": 2}', "u:"),
        ('{"t": "1:2", "t": "3"}', "t"),
        ('"{\\"a\\": 1, \\"a\\": 2}"', "a"),
    ],
    ids=["nested", "equal values", "escaped colon", "colon in value", "double-encoded"],
)
def test_9_duplicates_anywhere_are_found(raw: str, key: str) -> None:
    outcome = parse_arguments(raw)
    assert isinstance(outcome, InvalidArguments) and outcome.duplicate_key == key


@pytest.mark.parametrize(
    "raw", ['{"url": "http://x:80", "t": "12:30"}', '{"a": {"b": 1}, "c": [{"d": "e:f"}]}', '{"k\\u003a": 1}']
)
def test_9_colons_in_strings_are_no_duplicates(raw: str) -> None:
    outcome = parse_arguments(raw)
    assert isinstance(outcome, ParsedArguments) and outcome.value == json.loads(raw)


def test_9_streamed_calls_take_the_same_checks(tmp_path: Path) -> None:
    """The accumulator's fast path checks keys as `parse_arguments` does (colons in strings, nesting)."""
    good = '{"url": "http://x:80/a", "opts": {"t": "12:30"}}'
    bad = '{"opts": {"t": 1, "t": 2}, "url": "http://x:80"}'
    r = one(
        tmp_path,
        ev(chat(tc(0, "call_1", "f", good)))
        + ev(chat(tc(1, "call_2", "g", bad)))
        + ev(chat({}, "tool_calls"))
        + DONE,
    )
    assert calls(r) == [("call_1", "f", good, True), ("call_2", "g", bad, False)]
    assert kinds(r) == ["duplicate_keys"] and "'t' appears twice" in said(r, "duplicate_keys")
    assert r.tool_calls[0].args == json.loads(good)


# -- 13: Groq's failed_generation is not lost ------------------------------------------------------
GROQ = ev(
    {
        "error": {
            "message": "Tool call validation failed: parameters did not match schema",
            "type": "invalid_request_error",
            "code": "tool_use_failed",
            "failed_generation": '{"name": "get_weather", "arguments": {"town": "Paris"}}',
        }
    },
    "error",
)


def test_13_the_rejected_generation_is_kept_in_keep_mode_and_printed(tmp_path: Path) -> None:
    r = one(tmp_path, ev(chat({"reasoning": "let me call it"})) + GROQ)
    assert r.error is not None and "Tool call validation failed" in r.error
    assert "failed_generation" in said(r, "provider_error") and "town" in said(r, "provider_error")
    path = tmp_path / "groq.sse"
    path.write_text(ev(chat({"reasoning": "x"})) + GROQ)
    out = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "parse", str(path)], capture_output=True, text=True
    )
    assert out.returncode == 1 and "town" in out.stdout


def test_13_an_error_body_keeps_it_too(tmp_path: Path) -> None:
    error_body = json.loads(GROQ.split("data: ", 1)[1])
    r = one(tmp_path, json.dumps(error_body), "x.json")
    assert "town" in said(r, "provider_error")


# -- 14: messages that say the truth -----------------------------------------------------------------
def test_14_indexes_out_of_order_are_not_sparse(tmp_path: Path) -> None:
    r = one(
        tmp_path,
        ev(chat(tc(1, "call_b", "g", "{}")))
        + ev(chat(tc(0, "call_a", "f", "{}")))
        + ev(chat({}, "tool_calls"))
        + DONE,
    )
    assert [c.index for c in r.tool_calls] == [0, 1] and kinds(r) == []
    gap = one(tmp_path, ev(chat(tc(2, "call_c", "h", "{}"))) + ev(chat({}, "tool_calls")) + DONE)
    assert kinds(gap) == ["sparse_index"] and "skip 0, 1" in said(gap, "sparse_index")


def test_14_a_provider_error_names_the_calls_it_left_incomplete(tmp_path: Path) -> None:
    custom = {"index": 1, "id": "call_c", "type": "custom", "custom": {"name": "sh", "input": "ls"}}
    error = ev({"error": {"message": "Provider disconnected unexpectedly"}})
    r = one(tmp_path, HEADER + ARGS + ev(chat({"tool_calls": [custom]})) + error)
    assert [c.complete for c in r.tool_calls] == [False, False]
    assert "2 call(s) in progress marked incomplete (call_1, call_c)" in said(r, "provider_error")
    assert kinds(r).count("unfinished_call") == 2


def test_14_a_file_of_html_quotes_it(tmp_path: Path) -> None:
    path = tmp_path / "x.sse"
    path.write_text("<html>\n<body>502 Bad Gateway</body>\n</html>\n")
    for read in (lambda: read_recording(path), lambda: list(iter_responses(path))):
        with pytest.raises(UnknownFormatError, match=r"holds no payloads; line 1: .*'<html>'"):
            read()


def test_14_a_directory_is_named_as_one(tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "folder.sse"):
        path.mkdir(exist_ok=True)
        out = subprocess.run(
            [sys.executable, "-m", "toolcall_lab", "parse", str(path)], capture_output=True, text=True
        )
        assert out.returncode == 2 and "a directory, not a recording file" in out.stderr


# -- 15: the conformance runner names an input without its expectation --------------------------------
def test_15_an_input_without_expect_json_is_a_failed_case(tmp_path: Path) -> None:
    (tmp_path / "lonely.sse").write_text(HEADER + ARGS + DONE)
    (tmp_path / "notes.md").write_text("not an input")
    assert unpaired_inputs(tmp_path) == [tmp_path / "lonely.sse"]
    (result,) = run_corpus(tmp_path)
    assert not result.passed and "no lonely.expect.json beside it" in result.problems[0]
    out = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "conformance", str(tmp_path)], capture_output=True, text=True
    )
    assert out.returncode == 1 and "lonely.sse" in out.stderr


def test_15_the_repository_corpus_has_no_unpaired_input() -> None:
    assert unpaired_inputs() == []


# -- the fast path of a chat response gives what the full path gives --------------------------------
class _Counting(ChatCompletionAccumulator):
    __slots__ = ()
    plain = 0

    def _plain(self, st: Any) -> ParsedResponse:
        type(self).plain += 1
        return super()._plain(st)


def _chat_streams() -> list[list[dict[str, Any]]]:
    """Chat streams of every shape the corpus holds, and a few plain ones."""
    streams = []
    for case in load_cases():
        try:
            exchanges = read_recording(case.path).exchanges
        except ToolcallLabError:
            continue
        streams += [list(x.payloads) for x in exchanges if x.payloads and x.format == "openai-chat"]
    plain = [
        json.loads(line[6:]) for line in (HEADER + ARGS + ev(chat({}, "tool_calls"))).split("\n") if line
    ]
    text = [chat({"content": "a"}), chat({"reasoning_content": "b"}), *plain]
    no_id = [chat(tc(0, None, "f", "{}")), chat(tc(1, "call_b", "g", "")), chat({}, "stop")]
    return [*streams, plain, text, no_id]


def test_the_plain_result_is_the_full_result() -> None:
    """`_plain` skips the checks of `_full_result` for the usual response (its fixed cost); wherever
    it is taken, both give the same response, findings and calls."""
    _Counting.plain = 0
    for payloads in _chat_streams():
        fast, full = _Counting(), ChatCompletionAccumulator()
        try:
            for payload in payloads:
                fast.feed(payload)
                full.feed(payload)
        except ProviderStreamError:
            continue
        got, want = fast._result(None), full._full_result(None)
        assert got == want and got.to_dict() == want.to_dict()
        assert [c.parse_arguments() for c in got.tool_calls] == [c.parse_arguments() for c in want.tool_calls]
    assert _Counting.plain >= 20  # the corpus exercises it


def _realdata_chat_streams() -> list[list[dict[str, Any]]]:
    from tests.conftest import REALDATA

    streams = []
    for path in sorted(REALDATA.rglob("*")) if REALDATA.is_dir() else ():
        if not path.is_file() or path.suffix not in (".sse", ".yaml", ".yml", ".json", ".txt", ".jsonl"):
            continue
        try:
            exchanges = read_recording(path).exchanges
        except (ToolcallLabError, OSError, ValueError):
            continue
        streams += [list(x.payloads) for x in exchanges if x.payloads and x.format == "openai-chat"]
    return streams


def _fed(acc: ChatCompletionAccumulator, payloads: list[dict[str, Any]]) -> Any:
    try:
        for payload in payloads:
            acc.feed(json.loads(json.dumps(payload)))  # (each its own copy: neither path may see the other's)
    except ProviderStreamError as exc:
        return ("error", str(exc), [r.to_dict() for r in exc.partial_responses])
    response = acc.finish()
    return response.to_dict(), [c.parse_arguments() for c in response.tool_calls]


def test_the_fast_feed_gives_what_the_general_feed_gives_on_every_chat_stream_we_have() -> None:
    """An accumulator with a listener takes the general path for every chunk; without one the common
    chunks take the fast path. On every chat stream of the corpus and of ../shared/realdata (when
    present), both give the same response: calls, text, findings, or the same provider error."""
    streams = _chat_streams() + _realdata_chat_streams()
    assert len(streams) >= 20
    for payloads in streams:
        heard: list[Any] = []
        assert _fed(ChatCompletionAccumulator(), payloads) == _fed(
            ChatCompletionAccumulator(listener=heard.append), payloads
        )


_EVENTS_DIFFER = {
    "header_and_arguments_at_different_indexes.sse": "pieces sent at another index than their call's header",
    "surrogate_pair_split_across_chunks.sse": "a surrogate pair split across deltas: the pieces are not text",
}
"""Corpus streams whose listener events are known not to retell the response exactly (README, Stream events)."""


def _event_problems(payloads: list[dict[str, Any]]) -> list[str] | None:
    from toolcall_lab.formats.base import ArgumentsDelta, CallFinished, CallStarted

    events: list[Any] = []
    acc = ChatCompletionAccumulator(listener=events.append)
    try:
        for payload in payloads:
            acc.feed(json.loads(json.dumps(payload)))
        response = acc.finish()
    except ProviderStreamError:
        return None
    started = [(e.choice_index, e.call_index) for e in events if isinstance(e, CallStarted)]
    finished = [e.call for e in events if isinstance(e, CallFinished)]
    calls = [c for choice in response.choices for c in choice.tool_calls]
    joined: dict[tuple[int, int], str] = {}
    for e in events:
        if isinstance(e, ArgumentsDelta):
            key = (e.choice_index, e.call_index)
            assert key in started, f"ArgumentsDelta for {key} before its CallStarted"
            joined[key] = joined.get(key, "") + e.delta
    problems = []
    ended = sorted((c.choice_index, c.index) for c in finished)
    if sorted(started) != ended or len(set(started)) != len(started):
        problems.append(f"started {started}, finished {[(c.choice_index, c.index) for c in finished]}")
    if finished != calls:
        problems.append("the calls CallFinished carries are not the response's")
    problems += [
        f"call {c.index}: its deltas joined are not its arguments"
        for c in calls
        if joined.get((c.choice_index, c.index), "") != c.arguments
    ]
    return problems


def test_listener_events_retell_the_response_on_every_chat_stream_we_have() -> None:
    """One CallStarted and one CallFinished per call of the response, every ArgumentsDelta after its
    call's CallStarted, a call's deltas joined are its arguments: on every chat stream of the corpus
    and of ../shared/realdata, but the known limits (`_EVENTS_DIFFER`, said in the README)."""
    seen_limits = set()
    for case in load_cases():
        try:
            exchanges = read_recording(case.path).exchanges
        except ToolcallLabError:
            continue
        for x in exchanges:
            if x.payloads and x.format == "openai-chat":
                problems = _event_problems(list(x.payloads))
                if case.path.name in _EVENTS_DIFFER:
                    seen_limits.add(case.path.name)
                    continue
                assert not problems, (case.path.name, problems)
    assert seen_limits == set(_EVENTS_DIFFER)  # (a renamed case must be renamed here too)
    for payloads in _realdata_chat_streams():
        assert not _event_problems(payloads)
    empty_at_new_index = [  # a delta with nothing but an index makes no call: never announced
        {"id": "r", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]},
        {"id": "r", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": ""}}]}}]},
        {"id": "r", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]  # fmt: skip
    assert _event_problems(empty_at_new_index) == []


@pytest.mark.parametrize(
    "where, value",
    [("call", False), ("call", True), ("call", 0.0), ("call", 1.0), ("choice", False), ("choice", 0.0)],
)
def test_an_index_of_another_type_equal_to_an_int_is_reported_on_the_fast_path_too(
    where: str, value: Any
) -> None:
    """x10 #1: a continuation delta's ``index`` false / true / 0.0 / 1.0, or a choice's index false or
    0.0, equals an int as a key (False == 0), so the fast path found the call or choice by it and read
    the delta silently; with a listener (the general path) it is reported. Both paths agree now: the
    value is reported as what it is (and read by the general path's rule: a number as the integer it
    equals, a boolean as a delta without index; a choice index false skipped)."""

    def chunk(tool_calls: list[dict[str, Any]] | None = None, ci: Any = 0, finish: str | None = None) -> Any:
        delta = {"tool_calls": tool_calls} if tool_calls else {}
        return {"id": "r", "model": "m", "choices": [{"index": ci, "delta": delta, "finish_reason": finish}]}

    def header(i: int, cid: str, args: str) -> dict[str, Any]:
        return {"index": i, "id": cid, "type": "function", "function": {"name": "move", "arguments": args}}

    target = 1 if value is True or value == 1.0 else 0
    odd_call = {"index": value if where == "call" else target, "function": {"arguments": '"/a"}'}}
    payloads = [
        chunk([header(0, "call_a", '{"dest":' if target == 0 else '{"dest":"/a"}')]),
        chunk([header(1, "call_b", '{"dest":' if target == 1 else '{"dest":"/b"}')]),
        chunk([odd_call], ci=value if where == "choice" else 0),
        chunk(finish="tool_calls"),
    ]
    fast = _fed(ChatCompletionAccumulator(), payloads)
    assert fast == _fed(ChatCompletionAccumulator(listener=lambda e: None), payloads)
    said = [f["message"] for f in fast[0]["findings"] if f["kind"] in ("wrong_type", "malformed_chunk")]
    assert len(said) == 1 and f"index {json.dumps(value)} " in said[0], said


def test_a_late_id_with_blank_arguments_names_the_call_and_a_usage_not_an_object_is_reported() -> None:
    """x10 #2, #3: a late id whose delta carries only blanks as arguments named a new, nameless call
    (``bool(" ")``; elsewhere blanks are no arguments) and the finding called the blanks an empty
    string; a ``usage`` that is not an object was dropped without a word. Fast and general paths alike."""

    def chunk(delta: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
        return {
            "id": "r",
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **top,
        }

    no_id = {"tool_calls": [{"index": 0, "function": {"name": "move", "arguments": '{"dest": "/a"}'}}]}
    late_id = {"tool_calls": [{"index": 0, "id": "x", "function": {"arguments": " "}}]}
    payloads = [chunk(no_id), chunk(late_id), chunk({}, "tool_calls", usage="x")]
    fast = _fed(ChatCompletionAccumulator(), payloads)
    assert fast == _fed(ChatCompletionAccumulator(listener=lambda e: None), payloads)
    response = fast[0]
    calls = response["choices"][0]["tool_calls"]
    assert [(c["id"], c["name"], c["arguments"]) for c in calls] == [("x", "move", '{"dest": "/a"} ')]
    said = {f["kind"]: f["message"] for f in response["findings"]}
    assert 'usage "x" is a string, not an object; not kept' in said["wrong_type"]
    assert response.get("usage") is None
    blank = [
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c", "type": "function", "function": {"name": "f", "arguments": "  "}}
                ]
            }
        ),
        chunk({}, "tool_calls"),
    ]
    found = _fed(ChatCompletionAccumulator(), blank)[0]["findings"]
    assert any("argument string of only whitespace" in f["message"] for f in found), found


def test_the_fast_paths_shortcut_to_the_last_call_agrees_with_the_general_path_past_small_ints() -> None:
    """The fast path finds a continuation's call as the call it started last when the delta's index is
    that call's own int object (decoded small ints are shared), else by index: past 256 calls the
    objects differ and the lookup takes over; interleaved deltas, a parked call and a late name go
    through the general path, after which the shortcut is off. Both paths give the same response."""

    def chunk(*tool_calls: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        delta = {"tool_calls": list(tool_calls)} if tool_calls else {}
        return {"id": "r", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def header(i: int) -> dict[str, Any]:
        return {
            "index": i,
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "f", "arguments": '{"k":'},
        }

    def more(i: int, text: str) -> dict[str, Any]:
        return {"index": i, "function": {"arguments": text}}

    many = [c for i in range(300) for c in (chunk(header(i)), chunk(more(i, f" {i}}}")))]
    interleaved = [chunk(header(0)), chunk(header(1)), chunk(more(0, " 0}")), chunk(more(1, " 1}"))]
    parked = [
        chunk(header(0)),
        chunk(more(0, " 0}")),
        chunk({"index": 0, "function": {"name": "f"}}),
        chunk(more(0, "")),
    ]
    for payloads in (many, interleaved, parked):
        payloads = [*payloads, chunk(finish="tool_calls")]
        fast = _fed(ChatCompletionAccumulator(), payloads)
        assert fast == _fed(ChatCompletionAccumulator(listener=lambda e: None), payloads)
    calls = _fed(ChatCompletionAccumulator(), [*many, chunk(finish="tool_calls")])[0]["choices"][0][
        "tool_calls"
    ]
    assert [c["arguments"] for c in calls] == [f'{{"k": {i}}}' for i in range(300)]


def test_a_responses_call_without_id_recovered_from_completed_is_named_by_its_output_item() -> None:
    """x10 #4: a call only in ``response.completed``'s output, without a call_id, was named
    ``call None`` (or ``call `` for an empty id) in the finding."""
    from toolcall_lab.formats import ResponsesStreamAccumulator

    items = [
        {"type": "function_call", "name": "f", "arguments": "{}", "status": "completed"},
        {"type": "function_call", "call_id": "", "name": "g", "arguments": "{}", "status": "completed"},
    ]
    acc = ResponsesStreamAccumulator()
    acc.feed(
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}
    )
    acc.feed(
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": items}}
    )
    said = [f.message for f in acc.finish().findings if f.kind == "recovered_from_completed"]
    assert [m.split(" only in")[0] for m in said] == [
        "a call without id (output item 0) (f)",
        "a call without id (output item 1) (g)",
    ]


@pytest.mark.parametrize("odd", [None, False, [0], "0", -1, 2**70])
def test_a_responses_item_whose_output_index_is_not_a_usable_integer_is_reported_and_keeps_its_place(
    odd: Any,
) -> None:
    """y21 #1: an item announced with output_index null (false, a list, a huge or negative number)
    sorted after every other item, silently: the calls came out reversed. It is reported and keeps
    its place in the stream ("0" is read as 0, reported)."""
    from toolcall_lab.formats import ResponsesStreamAccumulator

    def added(index: Any, cid: str) -> dict[str, Any]:
        item = {"type": "function_call", "id": f"fc_{cid}", "call_id": cid, "name": "f", "arguments": ""}
        return {"type": "response.output_item.added", "output_index": index, "item": item}

    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        added(odd, "a"),
        added(1, "b"),
        {
            "type": "response.function_call_arguments.delta",
            "output_index": odd,
            "item_id": "fc_a",
            "delta": '{"x": 1}',
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 1,
            "item_id": "fc_b",
            "delta": "{}",
        },
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
    ]
    for listener in (None, lambda e: None):
        acc = ResponsesStreamAccumulator(listener=listener)
        for event in events:
            acc.feed(json.loads(json.dumps(event)))
        response = acc.finish()
        assert [(c.tool_call_id, c.arguments) for c in response.tool_calls] == [
            ("a", '{"x": 1}'),
            ("b", "{}"),
        ]
        said = [f.message for f in response.findings if f.kind == "wrong_type"]
        assert len(said) == 1 and "item 'fc_a' (call a) has output_index" in said[0], said


def test_a_negative_choice_index_a_usage_of_another_type_and_a_guessed_index_are_reported() -> None:
    """y21 #2-#4: a chunk for choice -1 became the choice the run used (choice 0's call dropped);
    a usage that is not an object was dropped silently in the Anthropic and Responses readers and a
    whole chat body; a continuation without index among several calls was read as the last call's
    with nothing said."""
    from toolcall_lab.formats import (
        AnthropicStreamAccumulator,
        ResponsesStreamAccumulator,
        parse_chat_completion,
    )

    def chunk(ci: Any, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "r", "model": "m", "choices": [{"index": ci, "delta": delta, "finish_reason": finish}]}

    def header(i: int, cid: str, args: str) -> dict[str, Any]:
        return {
            "tool_calls": [
                {"index": i, "id": cid, "type": "function", "function": {"name": "f", "arguments": args}}
            ]
        }

    payloads = [chunk(0, header(0, "a", "{}")), chunk(-1, {"content": "hi"}), chunk(0, {}, "tool_calls")]
    response = _fed(ChatCompletionAccumulator(), payloads)
    assert response == _fed(ChatCompletionAccumulator(listener=lambda e: None), payloads)
    assert [c["id"] for c in response[0]["choices"][0]["tool_calls"]] == ["a"]
    assert [c["index"] for c in response[0]["choices"]] == [0]
    assert any("choice index -1 is negative" in f["message"] for f in response[0]["findings"])
    body = {
        "id": "r",
        "choices": [{"index": -2, "message": {"role": "assistant", "content": "x"}}],
        "usage": "x",
    }
    whole = parse_chat_completion(body)
    assert [c.index for c in whole.choices] == [0]
    assert len([f for f in whole.findings if f.kind == "wrong_type"]) == 2, whole.findings
    anthropic = AnthropicStreamAccumulator()
    anthropic.feed({"type": "message_start", "message": {"id": "m", "usage": 5}})
    anthropic.feed({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": [1]})
    assert [f.message for f in anthropic.finish().findings] == [
        "chunk 0: usage 5 is a number, not an object; not kept",
        "chunk 1: usage [1] is an array, not an object; not kept",
    ]
    responses = ResponsesStreamAccumulator()
    responses.feed(
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "usage": "x"}}
    )
    assert [f.message for f in responses.finish().findings] == [
        'response.completed: usage "x" is a string, not an object; not kept'
    ]
    guessed = [
        chunk(0, header(0, "a", '{"a":')),
        chunk(0, header(1, "b", '{"a":')),
        chunk(0, {"tool_calls": [{"function": {"arguments": "1}"}}]}),
        chunk(0, {"tool_calls": [{"function": {"arguments": " "}}]}),
        chunk(0, {}, "tool_calls"),
    ]
    fast = _fed(ChatCompletionAccumulator(), guessed)
    assert fast == _fed(ChatCompletionAccumulator(listener=lambda e: None), guessed)
    said = [f["message"] for f in fast[0]["findings"] if f["kind"] == "missing_index"]
    assert said == [
        "chunk 2: tool call delta without index; read as part of call 1 (b), the last of 2 calls to start"
    ]
    single = [
        chunk(0, header(0, "a", '{"a":')),
        chunk(0, {"tool_calls": [{"function": {"arguments": "1}"}}]}),
        chunk(0, {}, "tool_calls"),
    ]
    assert not [
        f for f in _fed(ChatCompletionAccumulator(), single)[0]["findings"] if f["kind"] == "missing_index"
    ]


@pytest.mark.parametrize("odd", [-1, None, True, "0", "absent"])
def test_a_body_choice_without_a_usable_index_never_stands_in_for_another_choice(odd: Any) -> None:
    """z21 #1: in a whole chat body, a choice with index -1 (null, true, "0" when another choice holds
    0, or none) was numbered by its position, 0, beside the real choice 0: the response's calls were
    the wrong choice's and the real choice 0's calls never ran."""
    from toolcall_lab.formats import parse_chat_completion

    def choice(index: Any, cid: str) -> dict[str, Any]:
        call = {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        made = {
            "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            "finish_reason": "tool_calls",
        }
        return made if index == "absent" else {"index": index, **made}

    response = parse_chat_completion({"id": "r", "choices": [choice(odd, "x"), choice(0, "a")]})
    assert [(c.index, [t.tool_call_id for t in c.tool_calls]) for c in response.choices] == [
        (0, ["a"]),
        (1, ["x"]),
    ]
    assert [t.tool_call_id for t in response.tool_calls] == ["a"]
    said = [f.message for f in response.findings if f.kind == "wrong_type"]
    assert (
        len(said) == 1
        and said[0].startswith("choice 0: ")
        and said[0].endswith(
            "numbered by the first number above every index the choices give (its position 0 is not), 1"
        )
    )


def test_a_responses_event_naming_its_item_by_an_output_index_that_is_no_integer_is_reported() -> None:
    """z21 #2: a delta or .done naming its item by output_index "1" (or 1.0), without item_id, was read
    as 1 with nothing said (the same value on output_item.added was reported)."""
    from toolcall_lab.formats import ResponsesStreamAccumulator

    acc = ResponsesStreamAccumulator()
    item = {"type": "function_call", "id": "fc_b", "call_id": "b", "name": "f", "arguments": ""}
    for event in (
        {"type": "response.output_item.added", "output_index": 1, "item": item},
        {"type": "response.function_call_arguments.delta", "output_index": "1", "delta": "{}"},
        {"type": "response.function_call_arguments.done", "output_index": 1.0, "arguments": "{}"},
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
    ):
        acc.feed(event)
    response = acc.finish()
    assert [(c.tool_call_id, c.arguments, c.complete) for c in response.tool_calls] == [("b", "{}", True)]
    assert [f.message for f in response.findings if f.kind == "wrong_type"] == [
        'chunk 1: output_index "1" (a string) is not an integer; read as 1',
        "chunk 2: output_index 1.0 (a number) is not an integer; read as 1",
    ]


@pytest.mark.parametrize("odd", [-1, 2**70, -(2**70)])
def test_an_anthropic_block_index_out_of_range_is_reported(odd: int) -> None:
    """z21 #3: a content block started, streamed and stopped at index -1 (or a huge one) was read with
    nothing said; it is reported, and the block keeps its place in the stream."""
    from toolcall_lab.formats import AnthropicStreamAccumulator

    acc = AnthropicStreamAccumulator()
    block = {"type": "tool_use", "id": "b", "name": "g", "input": {}}
    for event in (
        {"type": "message_start", "message": {"id": "m", "usage": {}}},
        {"type": "content_block_start", "index": odd, "content_block": block},
        {
            "type": "content_block_delta",
            "index": odd,
            "delta": {"type": "input_json_delta", "partial_json": "{}"},
        },
        {"type": "content_block_stop", "index": odd},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
    ):
        acc.feed(event)
    response = acc.finish()
    assert [(c.tool_call_id, c.arguments, c.complete) for c in response.tool_calls] == [("b", "{}", True)]
    assert [f.message for f in response.findings] == [
        f"chunk 1: content_block_start index {odd} is out of range (a block index counts from 0); kept as the "
        "name its deltas use, the block in its place in the stream"
    ]


def test_body_choice_numbers_are_given_to_valid_indices_first_and_repeats_are_reported() -> None:
    """w21 #1, #2: an odd choice before one whose 0 is written "0" took 0 first (the run used the odd
    choice's calls); two choices giving the same index both kept it, and nothing said so."""
    from toolcall_lab.formats import parse_chat_completion

    def choice(index: Any, cid: str) -> dict[str, Any]:
        call = {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"index": index, "message": message, "finish_reason": "tool_calls"}

    for choices, used, numbered in (
        ([choice(-1, "x"), choice("0", "y")], "y", [(0, "y"), (1, "x")]),
        ([choice(None, "x"), choice("0", "y")], "y", [(0, "y"), (1, "x")]),
        ([choice(0, "a"), choice(0, "b")], "a", [(0, "a"), (1, "b")]),
        ([choice(1, "b1"), choice(1, "b2"), choice(0, "a")], "a", [(0, "a"), (1, "b1"), (2, "b2")]),
    ):
        response = parse_chat_completion({"id": "r", "choices": choices})
        assert [t.tool_call_id for t in response.tool_calls] == [used]
        assert [(c.index, c.tool_calls[0].tool_call_id) for c in response.choices] == numbered
        assert [f for f in response.findings if f.kind == "wrong_type"]


def test_a_body_choice_numbered_by_the_parser_never_comes_before_one_that_claimed_its_number() -> None:
    """v21 #1: with no valid index 0, a choice with index -1 (or a repeated index) took its position,
    0, and the run used its calls instead of the choice that gave itself index 1."""
    from toolcall_lab.formats import parse_chat_completion

    def choice(index: Any, cid: str) -> dict[str, Any]:
        call = {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"index": index, "message": message, "finish_reason": "tool_calls"}

    said = parse_chat_completion({"id": "r", "choices": [choice(-1, "x"), choice(0, "a"), choice(0, "b")]})
    assert [(c.index, c.tool_calls[0].tool_call_id) for c in said.choices] == [(0, "a"), (1, "x"), (2, "b")]
    assert [f.message.split(";")[0] for f in said.findings if f.kind == "wrong_type"] == [
        "choice 0: index -1 is negative",
        "choice 2: index 0 is an earlier choice's too",
    ]  # (the repeat numbered once: it was numbered twice, the second time as "negative")
    for indices, used in (((-1, 1), "b"), ((2, 2), "a"), ((2, -1), "a"), ((None, 1), "b"), (("1", 1), "b")):
        ids = ["a", "b"] if used == "a" else ["z", "b"]
        response = parse_chat_completion(
            {"id": "r", "choices": [choice(i, cid) for i, cid in zip(indices, ids, strict=True)]}
        )
        assert [t.tool_call_id for t in response.tool_calls] == [used], (indices, response.choices)
        assert len({c.index for c in response.choices}) == 2

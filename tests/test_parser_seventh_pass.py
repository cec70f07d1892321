"""Issue 10, seventh pass: the findings of the fresh-eyes report f10, fixed by class (each test names
its item of the brief). Bytes are written here; files are read whole and streamed, which must agree
(`parse` of the sixth pass)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_parser_sixth_pass import (
    A_START,
    R_START,
    a_block,
    a_end,
    a_json,
    a_stop,
    body,
    chat,
    ev,
    kinds,
    one,
    parse,
    r_added,
    r_delta,
    r_end,
    r_item_done,
    said,
    tc,
)
from toolcall_lab.exceptions import UnknownFormatError
from toolcall_lab.formats import (
    AnthropicStreamAccumulator,
    ChatCompletionAccumulator,
    ResponsesStreamAccumulator,
    parse_anthropic_message,
    parse_chat_completion,
    parse_responses_output,
    read_recording,
)
from toolcall_lab.formats._values import describe_gaps, index_gaps

HUGE = 10**12
DONE = "data: [DONE]\n\n"


# -- 1: nothing costs in proportion to a number in the input ----------------------------------------
def test_1_gaps_are_ranges_found_from_the_indices_present() -> None:
    assert index_gaps([HUGE]) == [(0, HUGE - 1)]
    assert index_gaps([0, 2, 3, 7, 7]) == [(1, 1), (4, 6)]
    assert index_gaps([0, 1, 2]) == []
    gaps = index_gaps(range(0, 50, 2))
    assert describe_gaps(gaps) == "1, 3, 5, 7, 9, 11, 13, 15, 17, 19 and 14 more range(s)"
    assert describe_gaps([(0, HUGE - 1)]) == f"0-{HUGE - 1} ({HUGE} missing indices)"


def test_1_a_tool_call_index_of_10_to_the_12_in_a_chat_stream(tmp_path: Path) -> None:
    header = chat(
        {
            "tool_calls": [
                {"index": HUGE, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]
        }
    )
    r = one(tmp_path, ev(header) + ev(chat({}, "tool_calls")) + DONE)
    assert [(c.tool_call_id, c.index, c.complete) for c in r.tool_calls] == [("c1", HUGE, True)]
    assert f"skip 0-{HUGE - 1} ({HUGE} missing indices)" in said(r, "sparse_index")


def test_1_huge_indices_with_many_gaps_keep_the_message_short() -> None:
    acc = ChatCompletionAccumulator()
    for k in range(1, 40):
        acc.feed(chat(tc(k * HUGE, f"c{k}", "f", "{}")))
    acc.feed(chat({}, "tool_calls"))
    r = acc.finish()
    assert len(r.tool_calls) == 39 and all(c.complete for c in r.tool_calls)
    (note,) = [f for f in r.findings if f.kind == "sparse_index"]
    assert "and 29 more range(s)" in note.message and len(note.message) < 400


def test_1_huge_numbers_in_every_reader() -> None:
    chat_choice = ChatCompletionAccumulator()
    chat_choice.feed({"id": "x", "choices": [{"index": HUGE, "delta": tc(0, "c1", "f", "{}")}]})
    chat_choice.feed({"id": "x", "choices": [{"index": HUGE, "delta": {}, "finish_reason": "tool_calls"}]})
    assert chat_choice.finish().choices[0].index == HUGE
    whole = parse_chat_completion(
        json.loads(
            body(
                "tool_calls",
                [
                    {
                        "index": HUGE,
                        "id": "c",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
            )
        )
    )
    assert [c.complete for c in whole.tool_calls] == [True]
    anthropic = AnthropicStreamAccumulator()
    for event in (
        {"type": "message_start", "message": {"id": "m", "usage": {}}},
        {
            "type": "content_block_start",
            "index": HUGE,
            "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": HUGE,
            "delta": {"type": "input_json_delta", "partial_json": '{"a":1}'},
        },
        {"type": "content_block_stop", "index": HUGE},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
    ):
        anthropic.feed(event)
    assert [c.arguments for c in anthropic.finish().tool_calls] == ['{"a":1}']
    responses = ResponsesStreamAccumulator()
    item = {"type": "function_call", "id": "fc", "call_id": "c", "name": "f", "arguments": ""}
    for event in (
        {"type": "response.output_item.added", "output_index": HUGE, "item": item},
        {"type": "response.function_call_arguments.delta", "output_index": HUGE, "delta": "{}"},
        {"type": "response.completed", "response": {"status": "completed"}},
    ):
        responses.feed(event)
    assert [c.complete for c in responses.finish().tool_calls] == [True]


# -- 2: one completeness rule for every reader, streamed and whole ----------------------------------
CUSTOM_ITEM = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "shell", "input": ""}


def test_2_a_custom_call_cut_at_max_output_tokens_and_listed_in_the_output_is_not_complete(
    tmp_path: Path,
) -> None:
    listed = {**CUSTOM_ITEM, "input": "rm -rf /tmp/x"}  # a custom_tool_call has no `status` field
    delta = ev(
        {
            "type": "response.custom_tool_call_input.delta",
            "item_id": "ctc_1",
            "output_index": 0,
            "delta": "rm -rf /tmp/x",
        }
    )
    incomplete = ev(
        {
            "type": "response.incomplete",
            "response": {
                "id": "resp_1",
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [listed],
            },
        }
    )
    r = one(tmp_path, R_START + r_added(CUSTOM_ITEM) + delta + incomplete)
    assert [c.complete for c in r.tool_calls] == [False] and "unfinished_call" in kinds(r)
    assert "1 of 1 call(s) incomplete" in said(r, "incomplete_response")
    whole = parse_responses_output(
        {
            "id": "r",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [listed],
        }
    )
    assert [c.complete for c in whole.tool_calls] == [False] and "unfinished_call" in kinds(whole)


def test_2_a_function_item_without_status_in_an_incomplete_body_is_not_complete() -> None:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_a",
        "name": "write",
        "arguments": '{"path":"a.txt"}',
    }
    r = parse_responses_output(
        {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": [item]}
    )
    assert [c.complete for c in r.tool_calls] == [False]
    done = parse_responses_output({"status": "incomplete", "output": [{**item, "status": "completed"}]})
    assert [c.complete for c in done.tool_calls] == [True]  # its own item finished


def test_2_an_item_with_status_incomplete_in_a_completed_response(tmp_path: Path) -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "f", "arguments": '{"x":1}'}
    cut = {**item, "status": "incomplete"}
    r = one(
        tmp_path,
        R_START
        + r_added({**item, "arguments": ""})
        + r_delta('{"x":1}')
        + r_item_done(cut)
        + r_end("completed", [cut]),
    )
    assert [c.complete for c in r.tool_calls] == [False]
    assert "its item has status 'incomplete' although the response completed" in said(r, "unfinished_call")
    whole = parse_responses_output({"status": "completed", "output": [cut]})
    assert [c.complete for c in whole.tool_calls] == [False] and "unfinished_call" in kinds(whole)


def test_2_whole_bodies_without_any_finish_reason_are_not_ended_normally() -> None:
    for fn in ({"name": "f", "arguments": ""}, {"name": "f", "arguments": None}, {"name": "f"}):
        r = parse_chat_completion(json.loads(body(None, [{"id": "c", "type": "function", "function": fn}])))
        assert [c.complete for c in r.tool_calls] == [False], fn
        assert "no_finish_reason" in kinds(r) and "incomplete_arguments" in kinds(r)
        assert "empty_arguments" not in kinds(r)
    legacy = parse_chat_completion({"choices": [{"index": 0, "message": {"function_call": {"name": "f"}}}]})
    assert [c.complete for c in legacy.tool_calls] == [False]
    custom = {"id": "c", "type": "custom", "custom": {"name": "sh", "input": "rm -rf /tmp/a"}}
    r = parse_chat_completion(json.loads(body(None, [custom])))
    assert [c.complete for c in r.tool_calls] == [False] and "unfinished_call" in kinds(r)
    whole_json = {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    r = parse_chat_completion(json.loads(body(None, [whole_json])))  # as streamed: whole JSON is whole
    assert [c.complete for c in r.tool_calls] == [True] and "no_finish_reason" in kinds(r)


def test_2_anthropic_body_with_stop_reason_null() -> None:
    r = parse_anthropic_message(
        {
            "type": "message",
            "stop_reason": None,
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "f"}],
        }
    )
    assert [c.complete for c in r.tool_calls] == [False]
    assert kinds(r) == ["incomplete_arguments", "no_finish_reason"]


def test_2_responses_body_in_progress_never_says_it_ended_normally() -> None:
    items = [
        {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "f", "arguments": ""},
        {**CUSTOM_ITEM, "input": "rm -rf /tmp/a"},
    ]
    r = parse_responses_output({"status": "in_progress", "output": items})
    assert [c.complete for c in r.tool_calls] == [False, False]
    assert "empty_arguments" not in kinds(r) and "abnormal_finish" in kinds(r)
    assert not any("ended normally" in f.message for f in r.findings)


def test_2_a_responses_body_without_status_is_read_as_a_chat_body_without_finish_reason() -> None:
    items = [
        {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "f", "arguments": '{"a":1}'},
        {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "g", "arguments": ""},
    ]
    r = parse_responses_output({"output": items})
    assert [c.complete for c in r.tool_calls] == [True, False]  # whole JSON is whole, "" is not {}
    assert "the body has no final status" in said(r, "no_finish_reason")
    assert "incomplete_arguments" in kinds(r) and "empty_arguments" not in kinds(r)


def test_2_a_closed_block_of_a_cut_message_does_not_claim_a_normal_end(tmp_path: Path) -> None:
    bare = {"type": "tool_use", "id": "toolu_1", "name": "ping"}  # no `input`: read as {} once closed
    # (at max_tokens the block is followed by another, else it is the cut message's last block, which
    # its content_block_stop does not show finished: issue 10, ninth pass)
    text = a_block(1, {"type": "text", "text": ""}) + a_stop(1)
    for n, (stop, after) in enumerate((("max_tokens", text), (None, ""))):
        r = one(tmp_path, A_START + a_block(0, bare) + a_stop(0) + after + a_end(stop), f"{n}.sse")
        assert [c.complete for c in r.tool_calls] == [True]  # its block closed
        assert "in a block that was closed (content_block_stop)" in said(r, "empty_arguments")
        assert not any("ended normally" in f.message for f in r.findings)


# -- 3: an event without type, or of another wire format, is never dropped unseen ------------------
A_DELTA_NO_TYPE = {"index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"confirm": false}'}}
DELETE = {"type": "tool_use", "id": "toolu_1", "name": "delete", "input": {}}


def test_3_a_payload_without_type_takes_the_name_of_its_event_line(tmp_path: Path) -> None:
    r = one(
        tmp_path,
        A_START + a_block(0, DELETE) + ev(A_DELTA_NO_TYPE, "content_block_delta") + a_stop(0) + a_end(),
    )
    assert [(c.arguments, c.complete) for c in r.tool_calls] == [('{"confirm": false}', True)]
    assert "read as the type its SSE event line names, 'content_block_delta'" in said(r, "malformed_chunk")
    fc = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "delete", "arguments": ""}
    delta = {"item_id": "fc_1", "output_index": 0, "delta": '{"confirm": false}'}
    r = one(
        tmp_path,
        R_START + r_added(fc) + ev(delta, "response.function_call_arguments.delta") + r_end(),
        "r.sse",
    )
    assert [(c.arguments, c.complete) for c in r.tool_calls] == [('{"confirm": false}', True)]


def test_3_a_payload_without_type_and_no_event_line_holds_its_call_back(tmp_path: Path) -> None:
    r = one(tmp_path, A_START + a_block(0, DELETE) + ev(A_DELTA_NO_TYPE) + a_stop(0) + a_end())
    assert [c.complete for c in r.tool_calls] == [False]
    assert "call_held_back" in kinds(r) and "without `type`" in said(r, "malformed_chunk")
    fc = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "delete", "arguments": ""}
    delta = {"item_id": "fc_1", "output_index": 0, "delta": '{"confirm": false}'}
    r = one(
        tmp_path,
        R_START + r_added(fc) + ev(delta) + r_item_done({**fc, "status": "completed"}) + r_end(),
        "r.sse",
    )
    assert [c.complete for c in r.tool_calls] == [False] and "call_held_back" in kinds(r)


def test_3_a_chat_chunk_with_a_call_inside_an_anthropic_response(tmp_path: Path) -> None:
    stray = chat(tc(0, "c9", "rm", "{}"))
    r = one(tmp_path, A_START + a_block(0, DELETE) + a_json(0, "{}") + ev(stray) + a_stop(0) + a_end())
    assert [c.complete for c in r.tool_calls] == [False] and "call_held_back" in kinds(r)
    assert "a chat-completion chunk, not an Anthropic event, inside this response" in said(r, "mixed_formats")
    assert '"id":"c9"' in said(r, "mixed_formats")  # quoted, never unseen


def test_3_a_file_of_two_recordings_of_different_formats_keeps_both(tmp_path: Path) -> None:
    anthropic = A_START + a_block(0, DELETE) + a_json(0, "{}") + a_stop(0) + a_end()
    chat_stream = ev(chat(tc(0, "call_9", "get_weather", '{"city":"Rome"}'))) + ev(chat({}, "tool_calls"))
    first, second = parse(tmp_path, anthropic + chat_stream + DONE + anthropic)[:2]
    assert [c.tool_call_id for c in first.tool_calls] == ["toolu_1"]
    assert "mixed_formats" in kinds(first)
    assert second.format == "openai-chat-stream" and [c.tool_call_id for c in second.tool_calls] == ["call_9"]
    responses = (
        R_START
        + r_added(
            {"type": "function_call", "id": "fc_1", "call_id": "call_r", "name": "f", "arguments": "{}"}
        )
        + r_end()
    )
    got = parse(tmp_path, chat_stream + responses, "c.sse")
    assert [[c.tool_call_id for c in r.tool_calls] for r in got] == [["call_9"], ["call_r"]]


# -- 4: an Anthropic block of an unknown type is reported ------------------------------------------
FUTURE = {"type": "future_tool_use", "id": "x_1", "name": "f", "input": {"a": 1}}


def test_4_an_unknown_block_streamed_and_whole(tmp_path: Path) -> None:
    r = one(tmp_path, A_START + a_block(0, FUTURE) + a_json(0, '{"b":2}') + a_stop(0) + a_end())
    assert r.tool_calls == () and "orphan_delta" not in kinds(r)
    note = said(r, "unknown_block")
    assert "a call-like content block of unknown type 'future_tool_use'" in note and "was not read" in note
    assert "input_json_delta for block 0, a 'future_tool_use' block" in note
    assert "no content_block_start opened it" not in note
    whole = parse_anthropic_message({"type": "message", "stop_reason": "tool_use", "content": [FUTURE]})
    assert "call-like content block of unknown type 'future_tool_use'" in said(whole, "unknown_block")
    quiet = parse_anthropic_message(
        {"type": "message", "stop_reason": "end_turn", "content": [{"type": "mystery", "data": 1}]}
    )
    assert (
        said(quiet, "unknown_block") == "content block 0: a content block of unknown type 'mystery'; not read"
    )


def test_4_a_call_like_responses_item_of_an_unknown_type_is_a_warning(tmp_path: Path) -> None:
    future = {
        "type": "future_function_call",
        "id": "ff",
        "call_id": "call_z",
        "name": "delete",
        "arguments": "",
    }
    delta = ev(
        {
            "type": "response.future_function_call_arguments.delta",
            "item_id": "ff",
            "output_index": 0,
            "delta": '{"all": true}',
        }
    )
    r = one(tmp_path, R_START + r_added(future) + delta + r_end())
    notes = [f for f in r.findings if f.kind == "malformed_chunk"]
    assert r.tool_calls == () and [f.severity for f in notes] == ["warning", "warning"]
    assert "a call-like output item of unknown type 'future_function_call'" in notes[0].message
    assert "for an output item of a type this parser does not read" in notes[1].message
    whole = parse_responses_output({"status": "completed", "output": [future]})
    assert "call-like output item of unknown type" in said(whole, "malformed_chunk")


# -- 5: an unwrapped error object mid-stream; an empty `error` ----------------------------------------
def test_5_an_unwrapped_error_object_mid_stream_is_a_provider_error(tmp_path: Path) -> None:
    error = {
        "object": "error",
        "message": "The model ran out of KV cache",
        "type": "InternalServerError",
        "param": None,
        "code": 500,
    }
    r = one(tmp_path, ev(chat(tc(0, "c1", "f", '{"a":1}'))) + ev(error) + DONE)
    assert r.error is not None and "The model ran out of KV cache" in r.error
    assert [c.complete for c in r.tool_calls] == [False] and "provider_error" in kinds(r)
    a = one(tmp_path, A_START + a_block(0, DELETE) + a_json(0, "{}") + ev(error), "a.sse")
    assert a.error is not None and "KV cache" in a.error and [c.complete for c in a.tool_calls] == [False]


def test_5_an_empty_error_is_reported_not_silently_read_as_none(tmp_path: Path) -> None:
    for empty in ({}, ""):
        chunk = {**chat(tc(0, "c1", "f", "{}")), "error": empty}
        r = one(tmp_path, ev(chunk) + ev(chat({}, "tool_calls")) + DONE)
        assert f"`error` is {json.dumps(empty)}" in said(r, "malformed_chunk")
        assert "read as no error" in said(r, "malformed_chunk")
    assert "error" not in kinds(r)
    quiet = one(
        tmp_path, ev({**chat(tc(0, "c1", "f", "{}")), "error": False}) + ev(chat({}, "tool_calls")) + DONE
    )
    assert kinds(quiet) == []  # false (like null) says there is no error


def test_8_a_nested_error_message_is_shown_as_json(tmp_path: Path) -> None:
    r = one(tmp_path, ev(chat({"content": "hi"})) + ev({"error": {"message": {"detail": "deep"}}}))
    assert r.error == '{"detail": "deep"}'


# -- 6: the same provider id on two calls of one response -------------------------------------------
def test_6_the_same_provider_id_on_two_calls_is_reported_in_every_reader(tmp_path: Path) -> None:
    stream = ev(chat(tc(0, "call_0", "f", '{"x":1}'))) + ev(chat(tc(1, "call_0", "g", '{"y":2}')))
    r = one(tmp_path, stream + ev(chat({}, "tool_calls")) + DONE)
    assert "share the provider id 'call_0'" in said(r, "duplicate_tool_call_id")
    fn = {"type": "function", "id": "call_0", "function": {"name": "f", "arguments": "{}"}}
    whole = parse_chat_completion(json.loads(body("tool_calls", [fn, fn])))
    assert kinds(whole) == ["duplicate_tool_call_id"]
    a = one(
        tmp_path, A_START + a_block(0, DELETE) + a_stop(0) + a_block(1, DELETE) + a_stop(1) + a_end(), "a.sse"
    )
    assert "duplicate_tool_call_id" in kinds(a)
    fc = {"type": "function_call", "call_id": "call_r", "name": "f", "arguments": "{}", "status": "completed"}
    rs = parse_responses_output(
        {"status": "completed", "output": [{**fc, "id": "fc_1"}, {**fc, "id": "fc_2"}]}
    )
    assert kinds(rs) == ["duplicate_tool_call_id"]


# -- 7: a dropped call never with only an info finding ---------------------------------------------
def test_7_a_capitalised_data_field_is_a_warning_that_says_data_was_ignored(tmp_path: Path) -> None:
    line = "Data: " + json.dumps(chat(tc(0, "c1", "f", "{}"))) + "\n\n"
    r = one(tmp_path, line + ev(chat({}, "tool_calls")) + DONE)
    (note,) = [f for f in r.findings if f.kind == "sse_ignored_data"]
    assert note.severity == "warning" and "a field that looks like data ('Data') was ignored" in note.message
    assert "finish_without_calls" in kinds(r)  # the call it held is gone, and that is said too


def test_7_a_finish_that_promises_calls_with_none_read(tmp_path: Path) -> None:
    r = one(tmp_path, ev(chat({"content": "I'll call get_weather"})) + ev(chat({}, "tool_calls")) + DONE)
    assert said(r, "finish_without_calls") == "choice 0: finish_reason 'tool_calls' but no tool call was read"
    whole = parse_chat_completion({"choices": [{"index": 0, "message": None, "finish_reason": "tool_calls"}]})
    assert kinds(whole) == ["finish_without_calls", "malformed_chunk"]
    assert "message is null" in said(whole, "malformed_chunk")
    a = parse_anthropic_message({"type": "message", "stop_reason": "tool_use", "content": []})
    assert kinds(a) == ["finish_without_calls"]
    fine = parse_chat_completion(
        {"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
    )
    assert kinds(fine) == []


# -- 8: minor -----------------------------------------------------------------------------------------
def test_8_tool_calls_and_a_different_function_call_in_one_delta(tmp_path: Path) -> None:
    delta = {**tc(0, "a", "f", "{}"), "function_call": {"name": "g", "arguments": "{}"}}
    r = one(tmp_path, ev(chat(delta)) + ev(chat({}, "tool_calls")) + DONE)
    assert [c.name for c in r.tool_calls] == ["f", "g"]
    assert "function_call ('g') and the tool_calls ('f') say different calls" in said(
        r, "conflicting_legacy_call"
    )
    message = {
        "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        "function_call": {"name": "g", "arguments": "{}"},
    }
    whole = parse_chat_completion(
        {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    )
    assert "conflicting_legacy_call" in kinds(whole)
    same = {**message, "function_call": {"name": "f", "arguments": "{}"}}
    once = parse_chat_completion({"choices": [{"index": 0, "message": same, "finish_reason": "tool_calls"}]})
    assert "conflicting_legacy_call" not in kinds(once) and "duplicate_legacy_call" in kinds(once)


def test_8_a_gzipped_stream_file_is_named_as_gzip(tmp_path: Path) -> None:
    path = tmp_path / "x.sse"
    path.write_bytes(gzip.compress((ev(chat(tc(0, "c1", "f", "{}"))) + DONE).encode()))
    with pytest.raises(UnknownFormatError, match="the file is gzip data"):
        read_recording(path).parse()


# -- 9: `toolcall-lab parse` imports only what reading recordings needs ------------------------------
def test_9_parse_imports_neither_the_loop_nor_the_importers_nor_asyncio(tmp_path: Path) -> None:
    path = tmp_path / "x.sse"
    path.write_text(ev(chat(tc(0, "c1", "f", "{}"))) + ev(chat({}, "tool_calls")) + DONE)
    code = (
        "import sys, io, contextlib\n"
        "from toolcall_lab.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['parse', {str(path)!r}]) == 0\n"
        "heavy = ['toolcall_lab.loop', 'toolcall_lab._execution', 'toolcall_lab.importers', 'asyncio']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_9_the_package_names_resolve_lazily_and_replay_stays_the_function() -> None:
    code = (
        "import sys, toolcall_lab\n"
        "assert 'toolcall_lab.loop' not in sys.modules\n"
        "import toolcall_lab.replay\n"
        "from toolcall_lab import replay, run, Trace\n"
        "assert callable(replay) and replay.__module__ == 'toolcall_lab.replay', replay\n"
        "assert all(getattr(toolcall_lab, n) is not None for n in toolcall_lab.__all__)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok", out.stderr

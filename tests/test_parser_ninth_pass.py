"""Issue 10, ninth pass: the findings of the re-check w10, fixed by class -- a call is never marked
complete when the evidence does not show it finished, and a part that may carry a call or text is
never skipped with no finding (stream and whole body agree). Each test names its item of the brief.
Bytes are written here; files are read whole and streamed, which must agree (`one`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_parser_sixth_pass import (
    A_START,
    FC,
    R_START,
    TOOL_USE,
    a_block,
    a_end,
    a_json,
    a_stop,
    ev,
    one,
    r_added,
    r_delta,
    r_end,
    r_item_done,
    said,
)
from toolcall_lab.formats import parse_anthropic_message, parse_responses_output

ARGS = '{"x":1}'
NOT_FINISHED = ["failed", "in_progress", "queued", "searching"]


# -- 1: a Responses item's own status other than "completed" is not finished --------------------------
@pytest.mark.parametrize("status", NOT_FINISHED)
def test_1_a_body_item_whose_status_is_not_completed_is_incomplete(status: str) -> None:
    item = {**FC, "arguments": ARGS, "status": status}
    r = parse_responses_output({"status": "completed", "output": [item]})
    (call,) = r.tool_calls
    assert not call.complete
    assert f"its item has status {status!r}" in said(r, "unfinished_call")


@pytest.mark.parametrize("status", NOT_FINISHED)
def test_1_a_streamed_item_listed_with_such_a_status_is_incomplete(tmp_path: Path, status: str) -> None:
    listed = {**FC, "arguments": ARGS, "status": status}
    r = one(tmp_path, R_START + r_added(FC) + r_delta(ARGS) + r_end(output=[listed]))
    (call,) = r.tool_calls
    assert not call.complete
    assert f"its item has status {status!r}" in said(r, "unfinished_call")


def test_1_an_item_done_with_such_a_status_is_incomplete(tmp_path: Path) -> None:
    done = {**FC, "arguments": ARGS, "status": "failed"}
    r = one(tmp_path, R_START + r_added(FC) + r_delta(ARGS) + r_item_done(done) + r_end())
    assert not r.tool_calls[0].complete


def test_1_completed_and_absent_statuses_still_finish(tmp_path: Path) -> None:
    done = {**FC, "arguments": ARGS, "status": "completed"}
    r = one(tmp_path, R_START + r_added(FC) + r_delta(ARGS) + r_item_done(done) + r_end(output=[done]))
    assert r.tool_calls[0].complete and r.findings == ()
    plain: dict[str, Any] = {**FC, "arguments": ARGS}
    assert parse_responses_output({"status": "completed", "output": [plain]}).tool_calls[0].complete


# -- 2: Anthropic max_tokens: the stream and the body agree -------------------------------------------
TEXT = {"type": "text", "text": ""}


@pytest.mark.parametrize("before", [[], ["text"]])
def test_2_a_closed_last_tool_use_at_max_tokens_is_incomplete_as_in_the_body(
    tmp_path: Path, before: list[str]
) -> None:
    head = a_block(0, TEXT) + a_stop(0) if before else ""
    i = len(before)
    r = one(tmp_path, A_START + head + a_block(i) + a_json(i, ARGS) + a_stop(i) + a_end("max_tokens"))
    (call,) = r.tool_calls
    assert not call.complete
    assert "the message's last block" in said(r, "unfinished_call")
    content: list[Any] = [TEXT] * len(before) + [{**TOOL_USE, "input": {"x": 1}}]
    body = parse_anthropic_message({"content": content, "stop_reason": "max_tokens"})
    assert [c.complete for c in body.tool_calls] == [False]
    assert "the message's last block" in said(body, "unfinished_call")


def test_2_a_tool_use_followed_by_another_block_at_max_tokens_is_finished(tmp_path: Path) -> None:
    r = one(
        tmp_path, A_START + a_block(0) + a_json(0, ARGS) + a_stop(0) + a_block(1, TEXT) + a_end("max_tokens")
    )
    assert r.tool_calls[0].complete
    r = one(tmp_path, A_START + a_block(0) + a_json(0, ARGS) + a_stop(0) + a_end("end_turn"))
    assert r.tool_calls[0].complete


def test_2_a_closed_last_block_followed_by_a_provider_error_is_incomplete(tmp_path: Path) -> None:
    error = ev({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    r = one(tmp_path, A_START + a_block(0) + a_json(0, ARGS) + a_stop(0) + error)
    (call,) = r.tool_calls
    assert not call.complete
    assert "provider error" in said(r, "unfinished_call")


# -- 3: Responses text: the final forms are authoritative over the deltas; no text is dropped ---------
def _message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "m1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def _text_delta(text: str) -> str:
    return ev({"type": "response.output_text.delta", "item_id": "m1", "output_index": 0, "delta": text})


def test_3_final_text_wins_over_the_deltas_with_a_finding(tmp_path: Path) -> None:
    done = ev(
        {"type": "response.output_text.done", "item_id": "m1", "output_index": 0, "text": "hello world"}
    )
    data = R_START + r_added(_message("")) + _text_delta("hello") + done
    r = one(tmp_path, data + r_item_done(_message("hello world")) + r_end(output=[_message("hello world")]))
    assert r.first.content == "hello world"
    assert "the text deltas (5 characters) differ from the response.completed text (11" in said(
        r, "text_mismatch"
    )
    whole = parse_responses_output({"status": "completed", "output": [_message("hello world")]})
    assert whole.first.content == "hello world" and whole.findings == ()
    same = one(tmp_path, R_START + _text_delta("hello") + r_end(output=[_message("hello")]), "same.sse")
    assert same.first.content == "hello" and same.findings == ()


def test_3_text_only_in_content_part_done_or_output_item_added_is_read(tmp_path: Path) -> None:
    part = ev(
        {
            "type": "response.content_part.done",
            "item_id": "m1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "text": "part text"},
        }
    )
    r = one(tmp_path, R_START + r_added(_message("")) + part + r_end(output=[]), "part.sse")
    assert r.first.content == "part text"
    r = one(tmp_path, R_START + r_added(_message("added text")) + r_end(output=[]), "added.sse")
    assert r.first.content == "added text"


# -- 4: chat: a choice with both `delta` and `message`; the legacy `choices[].text` -------------------
CALL = {"id": "c1", "type": "function", "function": {"name": "delete", "arguments": "{}"}}


def test_4_a_streamed_choice_with_delta_and_message_reports_the_message(tmp_path: Path) -> None:
    both = {"index": 0, "delta": {"content": "hi"}, "message": {"role": "assistant", "tool_calls": [CALL]}}
    end = {"index": 0, "delta": {}, "finish_reason": "stop"}
    r = one(tmp_path, ev({"choices": [both]}) + ev({"choices": [end]}) + "data: [DONE]\n\n")
    assert r.first.content == "hi"
    assert "has both `delta` and `message`; its message is not read" in said(r, "malformed_chunk")
    assert "may hold tool call data" in said(r, "malformed_chunk")


def test_4_a_body_choice_with_message_and_delta_reports_the_delta(tmp_path: Path) -> None:
    delta = {"tool_calls": [{"index": 0, **CALL}]}
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "hi"},
        "delta": delta,
        "finish_reason": "stop",
    }
    r = one(tmp_path, json.dumps({"object": "chat.completion", "choices": [choice]}), "x.json")
    assert r.first.content == "hi"
    assert "delta (beside the message)" in said(r, "malformed_chunk")
    text_delta = {**choice, "delta": {"content": "other"}}
    r = one(tmp_path, json.dumps({"object": "chat.completion", "choices": [text_delta]}), "y.json")
    assert "has both `message` and `delta`; its delta is not read" in said(r, "malformed_chunk")


def test_4_a_body_with_legacy_choice_text_and_null_content_reads_the_text(tmp_path: Path) -> None:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": None},
        "text": "legacy",
        "finish_reason": "stop",
    }
    r = one(tmp_path, json.dumps({"object": "chat.completion", "choices": [choice]}), "x.json")
    assert r.first.content == "legacy" and r.findings == ()
    other = {**choice, "message": {"role": "assistant", "content": "new"}}
    r = one(tmp_path, json.dumps({"object": "chat.completion", "choices": [other]}), "y.json")
    assert r.first.content == "new" and "`text` (legacy) beside a message" in said(r, "malformed_chunk")


# -- 5: `.done` equal to the deltas, response.completed different: one finding that says so ----------
def test_5_completed_differing_from_done_and_deltas_gives_one_true_finding(tmp_path: Path) -> None:
    done = ev(
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": ARGS,
        }
    )
    other = {**FC, "arguments": '{"x":2}', "status": "completed"}
    r = one(tmp_path, R_START + r_added(FC) + r_delta(ARGS) + done + r_end(output=[other]))
    assert r.tool_calls[0].arguments == '{"x":2}'
    (note,) = [f.message for f in r.findings if f.kind == "arguments_mismatch"]
    assert "earlier final arguments of function_call_arguments.done (7 characters), which equal the" in note
    # deltas that differ from both are named in the same finding
    r = one(tmp_path, R_START + r_added(FC) + r_delta('{"x":3}') + done + r_end(output=[other]), "y.sse")
    (note,) = [f.message for f in r.findings if f.kind == "arguments_mismatch"]
    assert "and from the concatenated deltas (7 characters)" in note


# -- 6: Anthropic content where the API sends none; a text_delta for a block never opened -------------
DELETE_BLOCK = {"type": "tool_use", "id": "t9", "name": "delete", "input": {}}


@pytest.mark.parametrize(
    ("event", "where"),
    [
        (
            {"type": "message_delta", "delta": {"stop_reason": "end_turn", "content": [DELETE_BLOCK]}},
            "delta.content",
        ),
        ({"type": "content_block_stop", "index": 0, "content_block": DELETE_BLOCK}, "content_block"),
        ({"type": "message_stop", "message": {"content": [DELETE_BLOCK]}}, "message"),
    ],
)
def test_6_content_in_other_events_is_reported_and_holds_calls_back(
    tmp_path: Path, event: dict[str, Any], where: str
) -> None:
    data = A_START + a_block(0) + a_json(0, ARGS) + a_stop(0) + ev(event) + a_end("end_turn")
    r = one(tmp_path, data)
    assert f"carries {where}, where the API sends no content" in said(r, "malformed_chunk")
    assert not r.tool_calls[0].complete  # which call the content belongs to is unknown


def test_6_a_text_delta_for_a_block_never_opened_is_kept_and_reported(tmp_path: Path) -> None:
    text = ev({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hello"}})
    r = one(tmp_path, A_START + text + a_end("end_turn"))
    assert r.first.content == "hello"
    assert "text_delta for block 0, which was never opened" in said(r, "orphan_delta")
    opened = one(tmp_path, A_START + a_block(0, TEXT) + text + a_stop(0) + a_end("end_turn"), "y.sse")
    assert opened.first.content == "hello" and opened.findings == ()

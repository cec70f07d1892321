"""Issue 10, eighth pass: the findings of the verification report v10, fixed by class -- a part of
the input that may carry a call or text is never skipped with no finding. Each test names its item
of the brief. Bytes are written here; files are read whole and streamed, which must agree (`parse`
of the sixth pass)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_parser_sixth_pass import (
    A_START,
    FC,
    R_START,
    a_end,
    ev,
    kinds,
    one,
    r_added,
    r_delta,
    r_end,
    r_item_done,
    said,
)
from toolcall_lab.exceptions import ProviderStreamError
from toolcall_lab.formats import (
    ChatCompletionAccumulator,
    parse_anthropic_message,
    parse_chat_completion,
    parse_responses_output,
    read_recording,
)
from toolcall_lab.formats.openai_chat import MAX_CHOICES

DONE = "data: [DONE]\n\n"
DELETE = {"type": "function_call", "id": "fc_9", "call_id": "call_9", "name": "delete", "arguments": "{}"}


# -- 1: every item of response.completed's output is read or reported -------------------------------
def test_1_a_completed_item_without_type_is_reported_as_the_body_reader_does(tmp_path: Path) -> None:
    item = {k: v for k, v in DELETE.items() if k != "type"}
    r = one(tmp_path, R_START + r_end(output=[item]))
    assert r.tool_calls == ()
    note = said(r, "malformed_chunk")
    assert "response.completed output item 0: a call-like output item of unknown type None" in note
    assert "call_id 'call_9', name 'delete'" in note
    whole = parse_responses_output({"status": "completed", "output": [item]})
    assert "call-like output item of unknown type None" in said(whole, "malformed_chunk")


def test_1_a_completed_item_of_an_unknown_type_or_not_an_object_is_reported(tmp_path: Path) -> None:
    future = {**DELETE, "type": "future_call"}
    r = one(tmp_path, R_START + r_end(output=[future, json.dumps(DELETE), 7]))
    assert r.tool_calls == ()
    note = said(r, "malformed_chunk")
    assert "unknown type 'future_call'" in note
    assert "response.completed: output item 1 is a string, not an object; skipped" in note
    assert "output item 2 is a number, not an object" in note
    incomplete = one(tmp_path, R_START + r_end("incomplete", [future], kind="response.incomplete"))
    assert "response.incomplete output item 0: a call-like output item" in said(incomplete, "malformed_chunk")


def test_1_an_item_streamed_with_an_unknown_type_is_reported_once(tmp_path: Path) -> None:
    future = {**DELETE, "type": "future_call"}
    r = one(tmp_path, R_START + r_added(future) + r_item_done(future) + r_end(output=[future]))
    assert r.tool_calls == () and kinds(r) == ["malformed_chunk"]


def test_1_an_output_item_done_of_an_unknown_type_never_announced_is_reported(tmp_path: Path) -> None:
    item = {k: v for k, v in DELETE.items() if k != "type"}
    r = one(tmp_path, R_START + r_item_done(item) + r_end())
    assert "chunk 1: a call-like output item of unknown type None" in said(r, "malformed_chunk")


def test_1_the_text_of_message_items_that_only_finish_is_kept(tmp_path: Path) -> None:
    message = {"type": "message", "id": "m", "content": [{"type": "output_text", "text": "hello"}]}
    r = one(tmp_path, R_START + r_item_done(message) + r_end())
    assert r.choices[0].content == "hello" and r.findings == ()


def test_1_items_in_the_output_of_response_created_are_reported(tmp_path: Path) -> None:
    start = ev(
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": [DELETE]}}
    )
    r = one(tmp_path, start + r_end())
    assert r.tool_calls == ()
    assert "response.created: its `output` holds 1 item(s), call(s) call_9 (delete); not read" in said(
        r, "malformed_chunk"
    )


# -- 2: blocks in message_start.message.content ------------------------------------------------------
def _start_with(content: Any) -> str:
    return ev(
        {"type": "message_start", "message": {"id": "m", "model": "c", "content": content, "usage": {}}}
    )


def test_2_a_tool_use_in_message_start_is_read(tmp_path: Path) -> None:
    block = {"type": "tool_use", "id": "toolu_9", "name": "delete", "input": {"confirm": False}}
    r = one(tmp_path, _start_with([block]) + a_end("end_turn"))
    (call,) = r.tool_calls
    assert (call.tool_call_id, call.arguments, call.complete) == ("toolu_9", '{"confirm":false}', True)
    assert kinds(r) == ["content_in_start"]
    cut = one(tmp_path, _start_with([block]) + a_end("max_tokens"))
    assert not cut.tool_calls[0].complete  # a block never closed, in a message cut short


def test_2_text_in_message_start_is_kept_and_odd_content_reported(tmp_path: Path) -> None:
    r = one(tmp_path, _start_with([{"type": "text", "text": "hello"}]) + a_end("end_turn"))
    assert r.choices[0].content == "hello" and kinds(r) == ["content_in_start"]
    odd = one(
        tmp_path, _start_with({"type": "tool_use", "id": "t", "name": "f", "input": {}}) + a_end("end_turn")
    )
    assert "message_start's `content` is an object, not a list of blocks" in said(odd, "malformed_chunk")
    empty = one(tmp_path, A_START + a_end("end_turn"))
    assert empty.findings == ()


# -- 3: a chat chunk with no (or empty) choices that holds other keys --------------------------------
def _chunk(**keys: Any) -> str:
    return ev({"id": "x", "object": "chat.completion.chunk", **keys})


STOP = _chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
CALLS = [{"id": "c1", "index": 0, "type": "function", "function": {"name": "delete", "arguments": "{}"}}]


def test_3_chat_chunk_without_choices_holding_call_data_is_reported(tmp_path: Path) -> None:
    for extra in ({"delta": {"tool_calls": CALLS}}, {"tool_calls": CALLS}):
        r = one(tmp_path, _chunk(**extra) + STOP + DONE)
        note = said(r, "malformed_chunk")
        assert f"a chat-completion chunk with no choices holds keys {sorted(extra)}" in note
        assert "it may hold tool call data" in note


def test_3_empty_choices_with_a_top_level_message_is_reported_and_holds_calls_back(tmp_path: Path) -> None:
    header = _chunk(choices=[{"index": 0, "delta": {"tool_calls": CALLS}}])
    r = one(tmp_path, header + _chunk(choices=[], message={"tool_calls": CALLS}) + STOP + DONE)
    assert "no choices holds keys ['message']" in said(r, "malformed_chunk")
    assert not r.tool_calls[0].complete and "call_held_back" in kinds(r)


def test_3_usage_and_metadata_chunks_stay_quiet(tmp_path: Path) -> None:
    usage = _chunk(choices=[], usage={"prompt_tokens": 1}, model="m", system_fingerprint="fp")
    r = one(
        tmp_path, _chunk(choices=[{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]) + usage
    )
    assert r.findings == () and r.choices[0].content == "hi"


def test_3_chat_body_without_choices_holding_a_message_is_reported() -> None:
    r = parse_chat_completion({"id": "x", "object": "chat.completion", "message": {"tool_calls": CALLS}})
    assert "the body has no choices and holds keys ['message']" in said(r, "malformed_chunk")
    quiet = parse_chat_completion({"id": "x", "object": "chat.completion", "choices": [], "usage": {}})
    assert quiet.findings == ()


# -- 4: an empty final `arguments` never overrides non-empty deltas silently --------------------------
def _done(arguments: str) -> str:
    return ev(
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": arguments,
        }
    )


def test_4_an_empty_done_after_deltas_keeps_them_and_holds_the_call_back(tmp_path: Path) -> None:
    r = one(tmp_path, R_START + r_added(FC) + r_delta('{"confirm":false}') + _done("") + r_end())
    (call,) = r.tool_calls
    assert call.arguments == '{"confirm":false}' and not call.complete
    note = said(r, "arguments_mismatch")
    assert (
        "function_call_arguments.done gives empty arguments (0 characters) but the concatenated deltas held 17"
        in note
    )
    assert "call_held_back" in kinds(r) and "empty_arguments" not in kinds(r)


def test_4_a_later_non_empty_final_form_settles_it(tmp_path: Path) -> None:
    done_item = {**FC, "arguments": '{"confirm":false}', "status": "completed"}
    r = one(
        tmp_path,
        R_START + r_added(FC) + r_delta('{"confirm":false}') + _done("") + r_item_done(done_item) + r_end(),
    )
    (call,) = r.tool_calls
    assert call.complete and call.arguments == '{"confirm":false}'
    assert kinds(r) == ["arguments_mismatch"]


def test_4_an_empty_completed_output_does_not_erase_the_done(tmp_path: Path) -> None:
    done_item = {**FC, "arguments": '{"a":1}', "status": "completed"}
    r = one(
        tmp_path, R_START + r_added(FC) + r_item_done(done_item) + r_end(output=[{**FC, "arguments": ""}])
    )
    (call,) = r.tool_calls
    assert call.arguments == '{"a":1}' and not call.complete
    assert "response.completed gives empty arguments (0 characters) but an earlier final form held 7" in said(
        r, "arguments_mismatch"
    )


def test_4_the_mismatch_numbers_say_which_is_which(tmp_path: Path) -> None:
    r = one(tmp_path, R_START + r_added(FC) + r_delta('{"a":12}') + _done('{"a":1}') + r_end())
    assert r.tool_calls[0].arguments == '{"a":1}' and r.tool_calls[0].complete
    assert "the final arguments (7 characters) differ from the concatenated deltas (8 characters)" in said(
        r, "arguments_mismatch"
    )


# -- 6: a server_tool_use and a tool_use sharing one id ----------------------------------------------
def test_6_a_client_call_sharing_its_id_with_a_server_call_is_reported(tmp_path: Path) -> None:
    server = {"type": "server_tool_use", "id": "toolu_1", "name": "web_search", "input": {"query": "q"}}
    client = {"type": "tool_use", "id": "toolu_1", "name": "g", "input": {"y": 2}}
    stream = (
        A_START
        + ev({"type": "content_block_start", "index": 0, "content_block": server})
        + ev({"type": "content_block_stop", "index": 0})
        + ev({"type": "content_block_start", "index": 1, "content_block": client})
        + ev({"type": "content_block_stop", "index": 1})
        + a_end()
    )
    r = one(tmp_path, stream)
    assert "call 'toolu_1' (g) at index 0 shares its provider id with a server-side tool call" in said(
        r, "duplicate_tool_call_id"
    )
    whole = parse_anthropic_message(
        {"type": "message", "stop_reason": "tool_use", "content": [server, client]}
    )
    assert "shares its provider id with a server-side tool call" in said(whole, "duplicate_tool_call_id")


# -- 7: FastAPI's {"detail": ...} -------------------------------------------------------------------
def test_7_a_fastapi_detail_body_is_a_provider_error_quoting_it(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"detail": "Not Found"}')
    with pytest.raises(ProviderStreamError, match="Not Found"):
        read_recording(tmp_path / "x.json").parse()
    (tmp_path / "v.json").write_text('{"detail": [{"loc": ["body"], "msg": "field required"}]}')
    (r,) = read_recording(tmp_path / "v.json").parse(errors="keep")
    assert r.error is not None and "field required" in r.error and "provider_error" in kinds(r)


def test_7_a_detail_mid_stream_ends_it_and_the_call_in_progress_is_incomplete(tmp_path: Path) -> None:
    header = _chunk(choices=[{"index": 0, "delta": {"tool_calls": CALLS}}])
    r = one(tmp_path, header + ev({"detail": "upstream timeout"}) + DONE)
    assert r.error == "upstream timeout" and not r.tool_calls[0].complete
    anthropic = one(tmp_path, A_START + ev({"detail": "boom"}))
    assert anthropic.error == "boom"
    responses = one(tmp_path, R_START + ev({"detail": "boom"}))
    assert responses.error == "boom"


def test_7_detail_beside_other_keys_is_not_an_error() -> None:
    body = {"id": "x", "object": "chat.completion", "detail": "fine", "choices": []}
    assert parse_chat_completion(body).error is None


# -- 8: the benchmark's --help ----------------------------------------------------------------------
def test_8_bench_parse_help_prints_usage_and_runs_nothing() -> None:
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_parse.py"
    done = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.startswith("usage: bench_parse.py")
    assert "--e2e-only" in done.stdout and "in process" not in done.stdout.lower()
    bad = subprocess.run(
        [sys.executable, str(script), "--bogus"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "unrecognized arguments: --bogus" in bad.stderr


# -- 9: the command's signal guard is the package's first import ------------------------------------
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX console script")
def test_9_the_start_up_guard_is_installed_before_any_other_import_of_the_package() -> None:
    command = Path(sys.executable).with_name("toolcall-lab")
    if not command.exists():
        pytest.skip("the console script is not installed beside this Python")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(command), "findings"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    names = [
        line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
    ]
    after_site = names[names.index("site") + 1 :]
    guard = after_site.index("toolcall_lab._startup")
    # nothing but the small standard-library modules the guard itself imports (atexit, os, signal, sys)
    assert set(after_site[:guard]) <= {"atexit", "signal"}, after_site[: guard + 1]


# -- 5: chunks that each name a new choice keep no state beyond a bound -------------------------------
def test_5_entries_of_choices_beyond_the_bound_that_hold_nothing_are_only_counted() -> None:
    acc = ChatCompletionAccumulator()
    for ci in range(MAX_CHOICES + 1000):
        acc.feed({"id": "x", "choices": [{"index": ci, "delta": {}, "finish_reason": None}]})
    extra = {"index": MAX_CHOICES + 5000, "delta": {"tool_calls": CALLS}, "finish_reason": "tool_calls"}
    acc.feed({"id": "x", "choices": [extra]})  # one that holds a call is kept
    assert len(acc._choices) == MAX_CHOICES + 1  # the state kept: bounded, whatever the chunk count
    r = acc.finish()
    assert len(r.choices) == MAX_CHOICES + 1 and r.choices[-1].tool_calls[0].tool_call_id == "c1"
    note = said(r, "extra_choices")
    assert f"1000 entr(y/ies) for choices beyond the first {MAX_CHOICES} (indices 128-1127)" in note


# -- the class, audited in every reader: a part that is not an object but may hold a call ------------
def test_a_call_sent_as_a_json_string_holds_back_the_calls_in_every_reader(tmp_path: Path) -> None:
    entry = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    as_string = json.dumps(
        {"id": "c2", "type": "function", "function": {"name": "delete", "arguments": "{}"}}
    )
    message = {"role": "assistant", "tool_calls": [entry, as_string]}
    chat = parse_chat_completion(
        {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]}
    )
    assert not chat.tool_calls[0].complete and "call_held_back" in kinds(chat)
    assert "tool call 1 is a string, not an object; skipped" in said(chat, "malformed_chunk")

    tool_use = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    block = json.dumps({"type": "tool_use", "id": "t2", "name": "delete", "input": {}})
    body = parse_anthropic_message(
        {"type": "message", "stop_reason": "tool_use", "content": [tool_use, block]}
    )
    assert not body.tool_calls[0].complete and "content block 1 is a string" in said(body, "malformed_chunk")
    stream = one(
        tmp_path,
        A_START
        + ev({"type": "content_block_start", "index": 0, "content_block": tool_use})
        + ev({"type": "content_block_stop", "index": 0})
        + ev({"type": "content_block_start", "index": 1, "content_block": block})
        + a_end(),
    )
    assert not stream.tool_calls[0].complete and "call_held_back" in kinds(stream)

    done = {**DELETE, "status": "completed"}
    responses = one(
        tmp_path, R_START + r_added(done) + r_item_done(done) + r_added(json.dumps(DELETE), 1) + r_end()
    )
    assert not responses.tool_calls[0].complete and "call_held_back" in kinds(responses)
    whole = parse_responses_output({"status": "completed", "output": [done, json.dumps(DELETE)]})
    assert not whole.tool_calls[0].complete and "output item 1 is a string" in said(whole, "malformed_chunk")


def test_1_the_output_of_response_failed_is_read_as_the_body_reader_reads_it(tmp_path: Path) -> None:
    done = {**DELETE, "status": "completed"}
    failed = {
        "id": "r",
        "status": "failed",
        "error": {"message": "boom"},
        "output": [done, {"id": "x", "call_id": "c"}],
    }
    (stream,) = read_recording_keep(tmp_path, R_START + ev({"type": "response.failed", "response": failed}))
    whole = parse_responses_output_keep(failed)
    assert (
        [c.tool_call_id for c in stream.tool_calls]
        == [c.tool_call_id for c in whole.tool_calls]
        == ["call_9"]
    )
    assert "only in response.failed output; taken from there" in said(stream, "recovered_from_completed")
    assert "response.failed output item 1: a call-like output item of unknown type None" in said(
        stream, "malformed_chunk"
    )
    assert stream.error == whole.error == "boom"


def read_recording_keep(tmp_path: Path, data: str) -> list[Any]:
    (tmp_path / "f.sse").write_text(data)
    return read_recording(tmp_path / "f.sse").parse(errors="keep")


def parse_responses_output_keep(body: dict[str, Any]) -> Any:
    with pytest.raises(ProviderStreamError) as info:
        parse_responses_output(body)
    return info.value.partial_responses[0]


def test_call_data_under_keys_the_chat_reader_does_not_read_is_reported_and_holds_calls_back(
    tmp_path: Path,
) -> None:
    header = _chunk(choices=[{"index": 0, "delta": {"tool_calls": CALLS}}])
    odd_delta = _chunk(choices=[{"index": 0, "delta": {"tool_call": CALLS[0]}}])
    beside = _chunk(choices=[{"index": 0, "delta": {"role": "assistant"}, "tool_calls": CALLS}])
    for odd, where in (
        (odd_delta, "choice 0's delta holds keys ['tool_call']"),
        (beside, "beside its delta"),
    ):
        r = one(tmp_path, header + odd + STOP + DONE)
        assert where in said(r, "malformed_chunk") and not r.tool_calls[0].complete
    quiet = one(
        tmp_path, header + _chunk(choices=[{"index": 0, "delta": {"content": "a", "annotations": []}}]) + STOP
    )
    assert "malformed_chunk" not in kinds(quiet)  # other keys (metadata) pass
    message = {"role": "assistant", "tool_calls": CALLS, "tool_call": CALLS[0]}
    body = parse_chat_completion(
        {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]}
    )
    assert "the message holds keys ['tool_call']" in said(body, "malformed_chunk")
    assert not body.tool_calls[0].complete
    choice = {
        "index": 0,
        "finish_reason": "tool_calls",
        "message": {"tool_calls": CALLS},
        "tool_calls": CALLS,
    }
    assert not parse_chat_completion({"choices": [choice]}).tool_calls[0].complete

"""Issue 10, fifth pass: the fixes a lost session had made (its closing note lists them), redone and
each pinned here, plus what its fourth and fifth testers left open. Bytes are written here; every
input is read whole (`read_recording`) and streamed (`iter_responses`), and both must agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolcall_lab.formats import iter_responses, read_recording
from toolcall_lab.messages import ParsedResponse, parse_arguments


# -- helpers ----------------------------------------------------------------------------------------
def ev(payload: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"{head}data: {data}\n\n"


def chat(
    delta: dict[str, Any], finish: Any = None, index: Any = 0, cid: str = "chatcmpl-1"
) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


def tc(index: Any, tid: str | None = None, name: str | None = None, args: Any = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if tid is not None:
        entry["id"], entry["type"] = tid, "function"
    if name is not None:
        entry["function"]["name"] = name
    return {"tool_calls": [entry]}


DONE = "data: [DONE]\n\n"
A_START = ev(
    {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {}}}, "message_start"
)
A_END = ev({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}}) + ev(
    {"type": "message_stop"}
)
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}


def a_block(index: int, block: Any) -> str:
    return ev({"type": "content_block_start", "index": index, "content_block": block})


def a_delta(index: Any, delta: Any) -> str:
    event: dict[str, Any] = {"type": "content_block_delta", "delta": delta}
    if index is not None:
        event["index"] = index
    return ev(event)


def a_stop(index: int) -> str:
    return ev({"type": "content_block_stop", "index": index})


def a_json(index: Any, partial: Any) -> str:
    return a_delta(index, {"type": "input_json_delta", "partial_json": partial})


def parse(tmp_path: Path, data: str | bytes, name: str = "x.sse") -> list[ParsedResponse]:
    """Every response of the file, read whole and streamed (which must agree), errors kept."""
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    whole = read_recording(path).parse(errors="keep")
    streamed = list(iter_responses(path, errors="keep"))
    assert [r.to_dict() for r in whole] == [r.to_dict() for r in streamed]
    return streamed


def one(tmp_path: Path, data: str | bytes, name: str = "x.sse") -> ParsedResponse:
    (response,) = parse(tmp_path, data, name)
    return response


def kinds(response: ParsedResponse) -> list[str]:
    return sorted(f.kind for f in response.findings)


def calls(response: ParsedResponse) -> list[tuple[str, str, str, bool]]:
    return [(c.tool_call_id, c.name, c.arguments, c.complete) for c in response.tool_calls]


def said(response: ParsedResponse, kind: str) -> str:
    return " | ".join(f.message for f in response.findings if f.kind == kind)


# -- values of the wrong type never crash nor vanish ------------------------------------------------
@pytest.mark.parametrize(
    ("partial", "shown"), [(5, "5"), ({"city": "Paris"}, '{"city":"Paris"}'), ([1], "[1]")]
)
def test_anthropic_partial_json_not_a_string_is_kept_as_json(
    tmp_path: Path, partial: Any, shown: str
) -> None:
    """A traceback before: the join of the argument pieces met a number or an object."""
    r = one(tmp_path, A_START + a_block(0, TOOL_USE) + a_json(0, "") + a_json(0, partial) + a_stop(0) + A_END)
    assert r.tool_calls[0].arguments == shown
    assert r.tool_calls[0].complete == shown.startswith("{")
    note = next(f for f in r.findings if f.kind == "arguments_not_string")
    assert note.chunk_index == 3 and "first at chunk 3" in note.message


def test_anthropic_partial_json_null_is_reported(tmp_path: Path) -> None:
    r = one(
        tmp_path, A_START + a_block(0, TOOL_USE) + a_json(0, None) + a_json(0, '{"a":1}') + a_stop(0) + A_END
    )
    assert calls(r) == [("toolu_1", "get_weather", '{"a":1}', True)]
    assert "without `partial_json` (or null)" in said(r, "malformed_chunk")


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (A_START + a_block(0, {"type": "text", "text": 5}) + a_stop(0) + A_END, "x.sse"),
        (
            A_START
            + a_block(0, {"type": "text", "text": ""})
            + a_delta(0, {"type": "text_delta", "text": 5})
            + A_END,
            "x.sse",
        ),
        (
            json.dumps(
                {
                    "type": "message",
                    "id": "m",
                    "content": [{"type": "text", "text": 5}],
                    "stop_reason": "end_turn",
                }
            ),
            "x.json",
        ),
        (
            json.dumps(
                {
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"content": 5}, "finish_reason": "stop"}],
                }
            ),
            "x.json",
        ),
        (ev(chat({"content": 5})) + ev(chat({}, "stop")) + DONE, "x.sse"),
        (
            json.dumps(
                {
                    "object": "response",
                    "status": "completed",
                    "output": [{"type": "message", "content": [{"type": "output_text", "text": 5}]}],
                }
            ),
            "x.json",
        ),
        (
            ev({"type": "response.created", "response": {"status": "in_progress"}})
            + ev({"type": "response.output_text.delta", "delta": 5})
            + ev({"type": "response.completed", "response": {"status": "completed"}}),
            "x.sse",
        ),
    ],
    ids=[
        "anthropic block start",
        "anthropic text_delta",
        "anthropic body",
        "chat body",
        "chat stream",
        "responses body",
        "responses stream",
    ],
)
def test_text_that_is_not_a_string_is_kept_as_json_with_a_finding(
    tmp_path: Path, data: str, name: str
) -> None:
    """A traceback before (the text join), or dropped without a word (chat bodies): every path goes
    through the one text join, which keeps the value as JSON and says so."""
    r = one(tmp_path, data, name)
    assert r.first.content == "5"
    assert "not strings (the first a number: 5)" in said(r, "wrong_type")


def test_chat_content_as_a_list_of_parts(tmp_path: Path) -> None:
    """Mistral's reasoning models send content as typed parts; text and thinking are both kept."""
    parts = [
        {"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]},
        {"type": "text", "text": "hi"},
    ]
    streamed = one(
        tmp_path,
        ev(chat({"content": parts}))
        + ev(chat({"content": [{"type": "text", "text": "!"}]}))
        + ev(chat({}, "stop"))
        + DONE,
    )
    assert (streamed.first.content, streamed.first.reasoning) == ("hi!", "hmm")
    assert kinds(streamed) == ["content_parts"] and "in 2 chunk(s)" in said(streamed, "content_parts")
    body = {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"content": [*parts, {"type": "image_url", "image_url": {"url": "u"}}]},
                "finish_reason": "stop",
            }
        ],
    }
    whole = one(tmp_path, json.dumps(body), "x.json")
    assert (
        whole.first.reasoning == "hmm"
        and whole.first.content == 'hi{"type":"image_url","image_url":{"url":"u"}}'
    )
    assert kinds(whole) == ["content_parts", "wrong_type"]


def test_late_content_after_finish_reason_is_reported(tmp_path: Path) -> None:
    r = one(
        tmp_path,
        ev(chat({"content": "a"}))
        + ev(chat({}, "stop"))
        + ev(chat({"content": "b"}))
        + ev(chat({"content": "c"}))
        + DONE,
    )
    assert r.first.content == "abc"
    assert kinds(r) == ["late_delta"] and "chunk 2: text after choice 0's finish_reason 'stop'" in said(
        r, "late_delta"
    )


@pytest.mark.parametrize(("finish", "shown"), [({"type": "stop"}, '{"type":"stop"}'), (5, "5")])
def test_finish_reason_that_is_not_a_string(tmp_path: Path, finish: Any, shown: str) -> None:
    """Printed as a Python repr (`{'type': 'stop'}`) with no finding before, in streams and bodies."""
    streamed = one(tmp_path, ev(chat({"content": "x"})) + ev(chat({}, finish)) + DONE)
    body = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"content": "x"}, "finish_reason": finish}],
    }
    whole = one(tmp_path, json.dumps(body), "x.json")
    for r in (streamed, whole):  # (sixth pass: a reason that is not a normal one is reported as such)
        assert r.first.finish_reason == shown
        assert sorted(kinds(r)) == ["abnormal_finish", "wrong_type"]
        assert "not a string; kept as its JSON text" in said(r, "wrong_type")
    anthropic = one(tmp_path, json.dumps({"type": "message", "content": [], "stop_reason": finish}), "x.json")
    assert anthropic.first.finish_reason == shown and sorted(kinds(anthropic)) == [
        "abnormal_finish",
        "wrong_type",
    ]


# -- Anthropic: what may not be the call's arguments holds it back ------------------------------------
@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (a_delta(0, {"type": "text_delta", "text": "hello"}), "a text_delta arrived in its tool_use block"),
        (
            a_delta(0, {"type": "input_json_delta_v2", "json": "{}"}),
            "a delta of unknown type 'input_json_delta_v2'",
        ),
        (a_delta(0, '{"city":"Paris"}'), "a delta that is not an object"),
        (a_json(None, '{"city":"Paris"}'), "came without index while its block was open"),
    ],
    ids=["text_delta", "unknown delta type", "delta is a string", "delta without index"],
)
def test_a_delta_the_call_cannot_take_holds_it_back(tmp_path: Path, bad: str, why: str) -> None:
    """The call ran with `{}` before: what the block was to receive is unknown, so it never runs."""
    r = one(tmp_path, A_START + a_block(0, TOOL_USE) + bad + a_stop(0) + A_END)
    (call,) = r.tool_calls
    assert call.arguments == "{}" and not call.complete
    assert why in said(r, "call_held_back")


def test_a_text_delta_in_a_text_block_holds_nothing_back(tmp_path: Path) -> None:
    data = (
        A_START
        + a_block(0, {"type": "text", "text": ""})
        + a_delta(0, {"type": "text_delta", "text": "hi"})
        + a_stop(0)
        + a_block(1, TOOL_USE)
        + a_json(1, '{"a":1}')
        + a_stop(1)
        + a_delta(2, {"type": "signature_delta", "signature": "x"})
        + A_END
    )
    r = one(tmp_path, data)
    assert calls(r) == [("toolu_1", "get_weather", '{"a":1}', True)] and r.first.content == "hi"
    assert kinds(r) == []


def test_anthropic_ids_and_names_that_are_not_strings(tmp_path: Path) -> None:
    block = {"type": "tool_use", "id": 7, "name": {"n": "f"}, "input": {}}
    streamed = one(tmp_path, A_START + a_block(0, block) + a_stop(0) + A_END)
    whole = one(
        tmp_path, json.dumps({"type": "message", "content": [block], "stop_reason": "tool_use"}), "x.json"
    )
    for r in (streamed, whole):
        assert calls(r) == [("7", "", "{}", False)]
        assert kinds(r) == ["missing_name", "wrong_type", "wrong_type"]
        assert "id 7 is a number, not a string; read as '7'" in said(r, "wrong_type")


@pytest.mark.parametrize(
    ("block", "what"),
    [
        ({"type": "tool_use", "id": "t", "name": "f"}, "missing"),
        ({"type": "tool_use", "id": "t", "name": "f", "input": None}, "null"),
    ],
)
def test_anthropic_body_without_input_is_reported(tmp_path: Path, block: dict[str, Any], what: str) -> None:
    r = one(
        tmp_path, json.dumps({"type": "message", "content": [block], "stop_reason": "tool_use"}), "x.json"
    )
    assert calls(r) == [("t", "f", "", True)]
    assert f"`input` {what} in a response that ended normally, read as {{}}" in said(r, "empty_arguments")


def test_pings_before_message_start_make_no_empty_response(tmp_path: Path) -> None:
    ping = ev({"type": "ping"}, "ping")
    r = one(tmp_path, ping + ping + A_START + a_block(0, TOOL_USE) + a_json(0, "{}") + a_stop(0) + A_END)
    assert (
        calls(r) == [("toolu_1", "get_weather", "{}", True)] and kinds(r) == [] and r.response_id == "msg_1"
    )


def test_content_before_message_start_is_reported(tmp_path: Path) -> None:
    r = one(tmp_path, a_block(0, TOOL_USE) + a_json(0, '{"a":1}') + a_stop(0) + A_START + A_END)
    assert calls(r) == [("toolu_1", "get_weather", '{"a":1}', True)]
    assert kinds(r) == ["event_before_start"] and r.response_id == "msg_1"


def test_two_messages_still_split_at_message_start(tmp_path: Path) -> None:
    """The rule for pings must not merge two real messages (even when the first lacks message_start)."""
    first = a_block(0, TOOL_USE) + a_json(0, "{}") + a_stop(0) + A_END
    second = A_START + a_block(0, {**TOOL_USE, "id": "toolu_2"}) + a_json(0, "{}") + a_stop(0) + A_END
    a, b = parse(tmp_path, first + second)
    assert [c.tool_call_id for c in a.tool_calls] == ["toolu_1"] and [
        c.tool_call_id for c in b.tool_calls
    ] == ["toolu_2"]
    assert kinds(a) == ["event_before_start"] and kinds(b) == []


# -- chat: shapes some servers send -------------------------------------------------------------------
def test_tool_calls_as_one_object(tmp_path: Path) -> None:
    """Dropped before (`tool_calls is not a list; skipped`), in streams and bodies."""
    entry = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    streamed = one(tmp_path, ev(chat({"tool_calls": entry})) + ev(chat({}, "tool_calls")) + DONE)
    body = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"tool_calls": entry}, "finish_reason": "tool_calls"}],
    }
    whole = one(tmp_path, json.dumps(body), "x.json")
    for r in (streamed, whole):
        assert calls(r) == [("call_1", "f", "{}", True)]
        assert kinds(r) == ["wrong_type"] and "tool_calls is one object, not a list" in said(r, "wrong_type")


def test_decimal_string_indexes(tmp_path: Path) -> None:
    """A tool call index "1" was read as a delta without index; a choice index "0" dropped the choice."""
    data = (
        ev(chat(tc("0", "call_a", "f"), index="0"))
        + ev(chat(tc("1", "call_b", "g"), index="0"))
        + ev(chat(tc("0", args='{"x":1}'), index="0"))
        + ev(chat(tc("1", args='{"y":2}'), index="0"))
        + ev(chat({}, "tool_calls", index="0"))
        + DONE
    )
    r = one(tmp_path, data)
    assert calls(r) == [("call_a", "f", '{"x":1}', True), ("call_b", "g", '{"y":2}', True)]
    assert set(kinds(r)) == {"wrong_type"} and "tool call index '1' is a string; read as 1" in said(
        r, "wrong_type"
    )
    assert "choice index '0' is a string; read as 0" in said(r, "wrong_type")
    body = {
        "object": "chat.completion",
        "choices": [{"index": "0", "message": {"content": "x"}, "finish_reason": "stop"}],
    }
    whole = one(tmp_path, json.dumps(body), "x.json")
    assert whole.first.content == "x" and "index '0' is a string; read as 0" in said(whole, "wrong_type")


def test_repeated_name_then_empty_arguments_then_real_ones_is_a_second_call(tmp_path: Path) -> None:
    """An empty `arguments: ""` delta decided the parked name before: two calls merged into one
    invalid string. Only a delta with real arguments (or an id, or another name) decides."""
    data = (
        ev(chat(tc(0, "call_1", "f", '{"a":1}')))
        + ev(chat(tc(0, name="f")))
        + ev(chat(tc(0, args="")))
        + ev(chat(tc(0, args=None)))
        + ev(chat(tc(0, args='{"b":2}')))
        + ev(chat({}, "tool_calls"))
        + DONE
    )
    r = one(tmp_path, data)
    assert [(c.name, c.arguments, c.complete) for c in r.tool_calls] == [
        ("f", '{"a":1}', True),
        ("f", '{"b":2}', True),
    ]
    assert "invalid_arguments" not in kinds(r) and "index_reused" in kinds(r)


def test_repeated_name_with_nothing_after_it_is_a_repeat(tmp_path: Path) -> None:
    data = (
        ev(chat(tc(0, "call_1", "f", '{"a":1}')))
        + ev(chat(tc(0, name="f")))
        + ev(chat(tc(0, args="")))
        + ev(chat({}, "tool_calls"))
        + DONE
    )
    r = one(tmp_path, data)
    assert calls(r) == [("call_1", "f", '{"a":1}', True)]
    without_index = data.replace('"index": 0, ', "")
    r = one(tmp_path, without_index)
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("f", '{"a":1}')]


def test_arguments_not_string_points_at_the_chunk_it_came_in(tmp_path: Path) -> None:
    data = (
        ev(chat(tc(0, "call_1", "f", "")))
        + ev(chat({"content": "."}))
        + ev(chat(tc(0, args={"a": 1})))
        + ev(chat({}, "tool_calls"))
        + DONE
    )
    r = one(tmp_path, data)
    note = next(f for f in r.findings if f.kind == "arguments_not_string")
    assert note.chunk_index == 2 and "first at chunk 2" in note.message


@pytest.mark.parametrize(
    "raw", ['{"a": NaN}', '{"a": -Infinity}', '{"a": 1e999}', '{"a": [1, {"b": -1e400}]}', '"{\\"a\\": NaN}"']
)
def test_arguments_json_does_not_allow_are_invalid(tmp_path: Path, raw: str) -> None:
    """Python's reader hands a tool nan or inf for these; JSON has no such numbers."""
    outcome = parse_arguments(raw)
    assert outcome.kind == "invalid"
    r = one(tmp_path, ev(chat(tc(0, "call_1", "f", raw))) + ev(chat({}, "tool_calls")) + DONE)
    assert not r.tool_calls[0].complete and r.tool_calls[0].arguments == raw
    assert parse_arguments('{"a": 1e308, "b": 123456789012345678901234567890}').kind == "ok"


# -- Responses API --------------------------------------------------------------------------------------
R_START = ev({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}})
FC = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}


def r_added(item: dict[str, Any], output_index: int = 0) -> str:
    return ev({"type": "response.output_item.added", "output_index": output_index, "item": item})


def r_delta(delta: Any, item_id: str | None = "fc_1", output_index: int = 0) -> str:
    event: dict[str, Any] = {
        "type": "response.function_call_arguments.delta",
        "output_index": output_index,
        "delta": delta,
    }
    if item_id is not None:
        event["item_id"] = item_id
    return ev(event)


def r_completed(output: Any = None, status: str = "completed") -> str:
    response: dict[str, Any] = {"id": "resp_1", "status": status}
    if output is not None:
        response["output"] = output
    return ev({"type": f"response.{status}", "response": response})


@pytest.mark.parametrize(("delta", "shown"), [(5, "5"), ({"city": "Paris"}, '{"city":"Paris"}')])
def test_responses_delta_not_a_string_is_kept_as_json(tmp_path: Path, delta: Any, shown: str) -> None:
    """A traceback before (the join of the argument pieces)."""
    r = one(tmp_path, R_START + r_added(FC) + r_delta(delta) + r_completed())
    assert calls(r) == [("call_1", "get_weather", shown, shown.startswith("{"))]
    assert "first at chunk 2" in said(r, "arguments_not_string")
    orphan = one(tmp_path, R_START + r_delta(delta, "fc_9") + r_added({**FC, "id": "fc_9"}) + r_completed())
    assert orphan.tool_calls[0].arguments == shown and "arguments_not_string" in kinds(orphan)


def test_responses_delta_null_is_reported(tmp_path: Path) -> None:
    r = one(tmp_path, R_START + r_added(FC) + r_delta(None) + r_delta('{"a":1}') + r_completed())
    assert calls(r) == [("call_1", "get_weather", '{"a":1}', True)]
    assert "without `delta` (or null); nothing appended" in said(r, "malformed_chunk")


@pytest.mark.parametrize(
    ("where", "data"),
    [
        (
            "arguments.done",
            R_START
            + r_added(FC)
            + ev(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": "fc_1",
                    "output_index": 0,
                    "arguments": {"a": 1},
                }
            )
            + r_completed(),
        ),
        (
            "output_item.done",
            R_START
            + r_added(FC)
            + ev(
                {
                    "type": "response.output_item.done",
                    "output_index": 0,
                    "item": {**FC, "arguments": {"a": 1}},
                }
            )
            + r_completed(),
        ),
        ("response.completed", R_START + r_added(FC) + r_completed([{**FC, "arguments": {"a": 1}}])),
    ],
)
def test_responses_final_arguments_as_an_object(tmp_path: Path, where: str, data: str) -> None:
    """Ignored before (the call kept its streamed arguments, or ran with `{}`)."""
    r = one(tmp_path, data)
    assert calls(r) == [("call_1", "get_weather", '{"a":1}', True)]
    assert "arguments_not_string" in kinds(r)


@pytest.mark.parametrize(
    ("args", "shown", "note"), [({"a": 1}, '{"a":1}', "arguments_not_string"), (None, "", "empty_arguments")]
)
def test_responses_body_arguments_object_or_missing(tmp_path: Path, args: Any, shown: str, note: str) -> None:
    """A body's `arguments` object was read as `{}` before, with no finding."""
    item = {k: v for k, v in FC.items() if k != "arguments"}
    if args is not None:
        item["arguments"] = args
    r = one(tmp_path, json.dumps({"object": "response", "status": "completed", "output": [item]}), "x.json")
    assert calls(r) == [("call_1", "get_weather", shown, True)]
    assert kinds(r) == [note]
    if args is None:
        assert "`arguments` missing in a response that ended normally" in said(r, note)


def test_responses_completed_output_not_a_list(tmp_path: Path) -> None:
    done = ev(
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": "{}",
        }
    )
    r = one(tmp_path, R_START + r_added(FC) + done + r_completed({"oops": 1}))
    assert calls(r) == [("call_1", "get_weather", "{}", True)]
    assert kinds(r) == ["malformed_chunk"] and "`output` is an object, not a list of items" in said(
        r, "malformed_chunk"
    )


def test_responses_completed_without_its_response_object(tmp_path: Path) -> None:
    """Read as "stream ended without response.completed (status 'in_progress')" before."""
    done = ev(
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": "{}",
        }
    )
    r = one(tmp_path, R_START + r_added(FC) + done + ev({"type": "response.completed"}))
    assert calls(r) == [("call_1", "get_weather", "{}", True)] and r.first.finish_reason == "completed"
    assert kinds(r) == ["malformed_chunk"] and "without its `response` object" in said(r, "malformed_chunk")


def test_two_responses_items_at_one_output_index(tmp_path: Path) -> None:
    second = {**FC, "id": "fc_2", "call_id": "call_2", "name": "get_time"}
    r = one(tmp_path, R_START + r_added(FC) + r_added(second) + r_delta("{}", None) + r_completed([]))
    # (sixth pass: an item never finished and not in response.completed's output is not complete)
    assert calls(r) == [("call_1", "get_weather", "", False), ("call_2", "get_time", "{}", False)]
    assert "output_index 0, which item 'fc_1' (call call_1) already holds" in said(r, "index_reused")


def test_responses_incomplete_counts_the_calls_it_left_incomplete(tmp_path: Path) -> None:
    """A body whose call is cut (not marked incomplete by its item) said "0 call(s) not finished"."""
    body = {
        "object": "response",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{**FC, "arguments": '{"a":'}],
    }
    r = one(tmp_path, json.dumps(body), "x.json")
    assert not r.tool_calls[0].complete
    assert "1 of 1 call(s) incomplete, never run" in said(r, "incomplete_response")


# -- any value of the wrong type anywhere: never a traceback ---------------------------------------------
SAMPLES = {
    "chat.sse": ev(chat(tc(0, "call_1", "f", '{"a":')))
    + ev(chat({"content": "x", **tc(0, args="1}")}))
    + ev(chat({}, "tool_calls"))
    + DONE,
    "anthropic.sse": A_START
    + a_block(0, {"type": "text", "text": ""})
    + a_delta(0, {"type": "text_delta", "text": "hi"})
    + a_block(1, TOOL_USE)
    + a_json(1, '{"a":1}')
    + a_stop(1)
    + A_END,
    "responses.sse": R_START
    + r_added(FC)
    + r_delta('{"a":1}')
    + ev({"type": "response.output_item.done", "output_index": 0, "item": {**FC, "arguments": '{"a":1}'}})
    + r_completed([{**FC, "arguments": '{"a":1}'}]),
    "chat.json": json.dumps(
        {
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "content": "x",
                        "tool_calls": [
                            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
        }
    ),
    "anthropic.json": json.dumps(
        {
            "type": "message",
            "id": "m",
            "content": [{"type": "text", "text": "x"}, TOOL_USE],
            "stop_reason": "tool_use",
            "usage": {},
        }
    ),
    "responses.json": json.dumps(
        {
            "object": "response",
            "status": "completed",
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "x"}]}, FC],
        }
    ),
}
ODD_VALUES = [None, 7, "s", [], {}, [1], {"k": 1}, True]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _leaves(item, (*path, key))
    elif isinstance(value, list):
        for pos, item in enumerate(value):
            out += _leaves(item, (*path, pos))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    here = copy
    for step in path[:-1]:
        here = here[step]
    here[path[-1]] = new
    return copy


def _variants(name: str) -> list[str]:
    text = SAMPLES[name]
    if name.endswith(".json"):
        doc = json.loads(text)
        return [json.dumps(_replaced(doc, path, new)) for path in _leaves(doc) for new in ODD_VALUES]
    out = []
    payloads = [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: {")]
    for i, payload in enumerate(payloads):
        for path in _leaves(payload):
            for new in ODD_VALUES:
                changed = [_replaced(p, path, new) if j == i else p for j, p in enumerate(payloads)]
                out.append("".join(ev(p) for p in changed))
    return out


@pytest.mark.parametrize("name", list(SAMPLES))
def test_a_value_of_any_other_type_anywhere_is_never_a_traceback(tmp_path: Path, name: str) -> None:
    """Every field of a few streams and bodies replaced, one at a time, by a value of each JSON type:
    the parser gives responses whose text fields are text (or a `ToolcallLabError` for a file it
    refuses), never another exception."""
    from toolcall_lab.exceptions import ToolcallLabError

    path = tmp_path / name
    for data in _variants(name):
        path.write_text(data)
        try:
            responses = list(iter_responses(path, errors="keep"))
        except ToolcallLabError:
            continue
        for r in responses:
            for choice in r.choices:
                assert all(
                    v is None or type(v) is str
                    for v in (choice.content, choice.reasoning, choice.finish_reason)
                ), data
                for call in choice.tool_calls:
                    assert (
                        type(call.arguments) is str
                        and type(call.name) is str
                        and type(call.tool_call_id) is str
                    ), data
            assert r.usage is None or isinstance(r.usage, dict), data
            assert r.response_id is None or type(r.response_id) is str, data


# -- files and framing --------------------------------------------------------------------------------
def _cassette(tmp_path: Path, body: bytes, coding: str | None, status: int = 200) -> Path:
    import base64

    headers = f"{{content-encoding: [{coding}]}}" if coding else "{}"
    text = (
        "interactions:\n- request: {body: null, headers: {}, method: POST, uri: 'https://x/v1/chat/completions'}\n"
        f"  response:\n    body: {{string: !!binary '{base64.b64encode(body).decode()}'}}\n"
        f"    headers: {headers}\n    status: {{code: {status}, message: X}}\nversion: 1\n"
    )
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_zstd_body_of_several_frames_is_read_whole(tmp_path: Path) -> None:
    """Only the first frame was read (silently): a server compressing as it streams writes several."""
    zstandard = pytest.importorskip("zstandard")
    body = (
        ev(chat({"content": "hello "})) + ev(chat({"content": "world"})) + ev(chat({}, "stop")) + DONE
    ).encode()
    packer = zstandard.ZstdCompressor()
    frames = b"".join(packer.compress(body[i : i + 40]) for i in range(0, len(body), 40))
    (r,) = iter_responses(_cassette(tmp_path, frames, "zstd"))
    assert r.first.content == "hello world" and r.first.finish_reason == "stop"
    (cut,) = iter_responses(_cassette(tmp_path, frames[:-3], "zstd"), errors="keep")
    assert cut.error is not None and "cut off?" in cut.error


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"])
@pytest.mark.parametrize("name", ["x.sse", "x.chunks.jsonl"])
def test_utf16_and_utf32_stream_files_are_refused_saying_so(tmp_path: Path, encoding: str, name: str) -> None:
    """ "the stream holds no payloads" before (UTF-16 is what Windows PowerShell 5's `>` writes)."""
    from toolcall_lab.exceptions import UnknownFormatError

    text = ev(chat({"content": "x"})) if name.endswith(".sse") else json.dumps(chat({"content": "x"})) + "\n"
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    with pytest.raises(UnknownFormatError, match=r"the file is UTF-(16|32)(LE|BE) text, not UTF-8.*iconv"):
        list(iter_responses(path))
    with pytest.raises(UnknownFormatError, match="not UTF-8"):
        read_recording(path)


def test_a_recorded_http_error_quotes_its_status(tmp_path: Path) -> None:
    body = json.dumps({"error": {"message": "Rate limit reached", "type": "requests"}}).encode()
    (r,) = iter_responses(_cassette(tmp_path, body, None, 429), errors="keep")
    assert r.error == "HTTP 429: Rate limit reached (requests)"
    gemini = json.dumps([{"error": {"code": 503, "message": "The model is overloaded."}}]).encode()
    (r,) = iter_responses(_cassette(tmp_path, gemini, None, 503), errors="keep")
    assert r.error is not None and r.error.startswith("HTTP 503: The model is overloaded.")
    (ok,) = iter_responses(
        _cassette(tmp_path, json.dumps({"error": {"message": "m"}}).encode(), None, 200), errors="keep"
    )
    assert ok.error == "m"  # (no status to quote below 400)


def test_data_lines_without_blank_lines_ending_in_done(tmp_path: Path) -> None:
    """The final `data: [DONE]` was unreadable data before: the response failed, exit 2."""
    lines = [json.dumps(chat({"content": "a"})), json.dumps(chat({}, "stop")), "[DONE]"]
    r = one(tmp_path, "".join(f"data: {line}\n" for line in lines) + "\n")
    assert r.error is None and r.first.content == "a" and r.first.finish_reason == "stop"
    assert kinds(r) == ["sse_nonstandard_line"]


def test_parse_reads_standard_input(tmp_path: Path) -> None:
    """`toolcall-lab parse -` said "unknown file type"; stdin is told apart by its bytes."""
    import io
    import subprocess
    import sys

    from toolcall_lab.formats import RecordingReader

    stream = ev(chat(tc(0, "call_1", "f", "{}"))) + ev(chat({}, "tool_calls")) + DONE
    out = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "parse", "-"], input=stream.encode(), capture_output=True
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["container"] == "sse" and doc["choices"][0]["tool_calls"][0]["id"] == "call_1"
    jsonl = "".join(json.dumps(p) + "\n" for p in (chat(tc(0, "call_1", "f", "{}")), chat({}, "tool_calls")))
    body = json.dumps(
        {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}],
        },
        indent=2,
    )
    cassette = _cassette(tmp_path, stream.encode(), None).read_bytes()
    for data, container in ((jsonl, "chunks-jsonl"), (body, "json"), (cassette, "cassette")):
        reader = RecordingReader("-", stdin=io.BytesIO(data if isinstance(data, bytes) else data.encode()))
        (r,) = list(reader)
        assert reader.container == container and (r.tool_calls or r.first.content == "hi")
    refused = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "parse", "-"], input=b"", capture_output=True
    )
    assert refused.returncode == 2 and b"<stdin>: the stream holds no payloads" in refused.stderr


@pytest.mark.parametrize("fmt", ["chat", "anthropic", "responses"])
def test_memory_does_not_grow_with_text_chunks(tmp_path: Path, fmt: str, monkeypatch: Any) -> None:
    """Text deltas were kept one by one (about 70 bytes each): they are joined in blocks as they
    come, like argument pieces. The peak for 2N text chunks is the peak for N plus their text.
    (Small reads and compaction every 256 payloads, so the plateau comes after a few thousand.)"""
    import tracemalloc

    import toolcall_lab.formats.dispatch as dispatch_module
    import toolcall_lab.formats.recordings as recordings_module
    import toolcall_lab.formats.sse as sse_module

    monkeypatch.setattr(dispatch_module, "_COMPACT_EVERY", 256)
    monkeypatch.setattr(sse_module, "READ_SIZE", 1 << 14)
    monkeypatch.setattr(recordings_module, "READ_SIZE", 1 << 14)

    def stream(n: int) -> bytes:
        if fmt == "chat":
            body = (ev(chat({"content": "ab"})) * n) + ev(chat({}, "stop")) + DONE
        elif fmt == "anthropic":
            text = (
                a_block(0, {"type": "text", "text": ""})
                + a_delta(0, {"type": "text_delta", "text": "ab"}) * n
            )
            body = A_START + text + A_END
        else:
            body = R_START + ev({"type": "response.output_text.delta", "delta": "ab"}) * n + r_completed()
        return body.encode()

    peaks = []
    for n in (6_000, 12_000):
        path = tmp_path / f"{n}.sse"
        path.write_bytes(stream(n))
        tracemalloc.start()
        (r,) = iter_responses(path)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert r.first.content == "ab" * n
    assert peaks[1] - peaks[0] < 6_000 * 2 * 4 + 100_000, peaks  # (kept one by one: ~400 kB more)


# -- more provider quirks (each also a conformance case; the finer rules here) -------------------------
def test_azure_empty_type_in_a_whole_body(tmp_path: Path) -> None:
    entry = {"id": "call_1", "type": "", "function": {"name": "f", "arguments": "{}"}}
    body = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"tool_calls": [entry]}, "finish_reason": "tool_calls"}],
    }
    r = one(tmp_path, json.dumps(body), "x.json")
    assert calls(r) == [("call_1", "f", "{}", True)] and kinds(r) == []


def test_header_and_arguments_apart_only_when_the_header_is_above_them(tmp_path: Path) -> None:
    """A call without parameters, then arguments of a call whose header was lost: two calls, as
    before (the fragment's index is above the header's, so it is not the header's)."""
    data = (
        ev(chat(tc(0, "c0", "now", ""))) + ev(chat(tc(1, args='{"q":1}'))) + ev(chat({}, "tool_calls")) + DONE
    )
    r = one(tmp_path, data)
    assert [(c.name, c.arguments, c.complete) for c in r.tool_calls] == [
        ("now", "", True),
        ("", '{"q":1}', False),
    ]
    assert "split_call" not in kinds(r)


def test_two_headers_above_one_fragment_are_held_back(tmp_path: Path) -> None:
    data = (
        ev(chat(tc(2, "c2", "a", "")))
        + ev(chat(tc(3, "c3", "b", "")))
        + ev(chat(tc(0, args='{"q":1}')))
        + ev(chat({}, "tool_calls"))
        + DONE
    )
    r = one(tmp_path, data)
    assert [(c.name, c.complete) for c in r.tool_calls] == [("", False), ("a", False), ("b", False)]
    assert said(r, "call_held_back").count("which are its arguments is unknown") == 2


def test_an_empty_headerless_delta_beside_calls_makes_no_call(tmp_path: Path) -> None:
    data = (
        ev(chat(tc(2, "c2", "a", '{"x":1}')))
        + ev(chat(tc(3, "c3", "b", '{"y":2}')))
        + ev(chat(tc(0, args="")))
        + ev(chat({}, "tool_calls"))
        + DONE
    )
    r = one(tmp_path, data)
    assert [(c.tool_call_id, c.complete) for c in r.tool_calls] == [("c2", True), ("c3", True)]
    assert "index 0 (chunk 2) had no id, name or arguments; it made no call" in said(r, "malformed_chunk")


def test_refusal_in_a_chat_body_and_a_responses_body(tmp_path: Path) -> None:
    chat_body = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"content": None, "refusal": "No."}, "finish_reason": "stop"}],
    }
    responses_body = {
        "object": "response",
        "status": "completed",
        "output": [{"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}],
    }
    for body in (chat_body, responses_body):
        r = one(tmp_path, json.dumps(body), "x.json")
        assert kinds(r) == ["refusal"] and 'the model refused: "No."' in said(r, "refusal")


def test_anthropic_max_tokens_cuts_an_unclosed_tool_use(tmp_path: Path) -> None:
    """A tool_use block never closed, at max_tokens, ran with `{}` (its start input) before."""
    end = ev({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}) + ev({"type": "message_stop"})
    r = one(tmp_path, A_START + a_block(0, TOOL_USE) + end)
    assert calls(r) == [("toolu_1", "get_weather", "", False)]
    closed = one(tmp_path, A_START + a_block(0, TOOL_USE) + a_stop(0) + end)
    # closed, but the last block of a message cut at max_tokens: nothing shows it finished (the API
    # closes a cut block too), as in a whole body (issue 10, ninth pass)
    assert calls(closed) == [("toolu_1", "get_weather", "{}", False)]


def test_an_anthropic_body_caps_its_findings_per_kind(tmp_path: Path) -> None:
    """Like every other reader: the first 20 of a kind, then one finding counting the rest."""
    from toolcall_lab.formats.base import FINDINGS_PER_KIND

    blocks = [{"type": "tool_use", "id": i, "name": "f", "input": {}} for i in range(FINDINGS_PER_KIND + 10)]
    r = one(tmp_path, json.dumps({"type": "message", "content": blocks, "stop_reason": "tool_use"}), "x.json")
    notes = [f for f in r.findings if f.kind == "wrong_type"]
    assert len(r.tool_calls) == FINDINGS_PER_KIND + 10 and len(notes) == FINDINGS_PER_KIND + 1
    assert "10 more finding(s)" in notes[-1].message

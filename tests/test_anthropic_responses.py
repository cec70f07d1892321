"""Anthropic Messages and OpenAI Responses readers: server-side tools, custom tools, errors, and the
final forms of a Responses stream taking precedence over its deltas."""

from __future__ import annotations

import pytest

from toolcall_lab.exceptions import ProviderStreamError
from toolcall_lab.formats import (
    AnthropicStreamAccumulator,
    ResponsesStreamAccumulator,
    parse_anthropic_message,
    parse_responses_output,
)


def feed(acc, events):
    for event in events:
        acc.feed(event)
    return acc.finish()


def kinds(response):
    return {f.kind for f in response.findings}


def block_start(index, block):
    return {"type": "content_block_start", "index": index, "content_block": block}


def json_delta(index, text):
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": text},
    }


def stop(index):
    return {"type": "content_block_stop", "index": index}


START = {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 3}}}
END = {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}


def test_server_tool_use_is_reported_apart_from_client_calls() -> None:
    r = feed(
        AnthropicStreamAccumulator(batch=4),
        [
            START,
            block_start(0, {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}),
            json_delta(0, '{"query": "x"}'),
            stop(0),
            block_start(1, {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []}),
            stop(1),
            block_start(2, {"type": "tool_use", "id": "toolu_1", "name": "save", "input": {}}),
            json_delta(2, '{"a": 1}'),
            stop(2),
            block_start(
                3,
                {
                    "type": "mcp_tool_use",
                    "id": "mcp_1",
                    "name": "lookup",
                    "server_name": "s",
                    "input": {"k": 1},
                },
            ),
            stop(3),
            END,
        ],
    )
    assert [(c.tool_call_id, c.name, c.arguments, c.index) for c in r.tool_calls] == [
        ("toolu_1", "save", '{"a": 1}', 0)
    ]
    assert [(s.tool_call_id, s.name, s.arguments, s.result_type) for s in r.server_tool_calls] == [
        ("srv_1", "web_search", '{"query": "x"}', "web_search_tool_result"),
        ("mcp_1", "lookup", '{"k":1}', None),
    ]
    assert r.first.to_message()["tool_calls"] == [
        r.tool_calls[0].to_openai()
    ]  # the loop sees client calls only
    assert "server_tool_call" in kinds(r)


def test_whole_message_with_server_tool_error_result() -> None:
    r = parse_anthropic_message(
        {
            "content": [
                {"type": "server_tool_use", "id": "srv_2", "name": "web_fetch", "input": {"url": "u"}},
                {
                    "type": "web_fetch_tool_result",
                    "tool_use_id": "srv_2",
                    "content": {"type": "web_fetch_tool_result_error", "error_code": "url_not_accessible"},
                },
            ],
            "stop_reason": "end_turn",
        }
    )
    assert r.tool_calls == ()
    (server,) = r.server_tool_calls
    assert (server.name, server.arguments, server.result_error) == (
        "web_fetch",
        '{"url":"u"}',
        "url_not_accessible",
    )


def test_error_event_keeps_finished_blocks_and_marks_the_open_one_incomplete() -> None:
    acc = AnthropicStreamAccumulator()
    for event in [
        START,
        block_start(0, {"type": "tool_use", "id": "t1", "name": "a", "input": {}}),
        json_delta(0, "{}"),
        stop(0),
        block_start(1, {"type": "tool_use", "id": "t2", "name": "b", "input": {}}),
        json_delta(1, '{"x": 1}'),
    ]:
        acc.feed(event)
    with pytest.raises(ProviderStreamError, match="Overloaded") as info:
        acc.feed({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    (partial,) = info.value.partial_responses
    assert [(c.tool_call_id, c.complete) for c in partial.tool_calls] == [("t1", True), ("t2", False)]
    assert partial.error == "Overloaded (overloaded_error)"


def test_anthropic_error_body_raises() -> None:
    with pytest.raises(ProviderStreamError, match="invalid x-api-key"):
        parse_anthropic_message(
            {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
        )


def added(index, item):
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def item_done(index, item):
    return {"type": "response.output_item.done", "output_index": index, "item": item}


def args_delta(index, delta, item_id=None):
    """An arguments delta; without `item_id` it is keyed by output_index only."""
    event = {"type": "response.function_call_arguments.delta", "output_index": index, "delta": delta}
    return event if item_id is None else {**event, "item_id": item_id}


def fc(item_id, call_id, name, arguments="", status="completed"):
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


CREATED = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "model": "m"}}


def completed(output, status="completed", **extra):
    kind = {"completed": "response.completed", "incomplete": "response.incomplete"}[status]
    return {"type": kind, "response": {"id": "resp_1", "status": status, "output": output, **extra}}


def test_custom_tool_call_input_is_text_not_json() -> None:
    item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "shell", "input": ""}
    r = feed(
        ResponsesStreamAccumulator(),
        [
            CREATED,
            added(0, item),
            {
                "type": "response.custom_tool_call_input.delta",
                "output_index": 0,
                "item_id": "ctc_1",
                "delta": "ls ",
            },
            {
                "type": "response.custom_tool_call_input.delta",
                "output_index": 0,
                "item_id": "ctc_1",
                "delta": "-la",
            },
            {
                "type": "response.custom_tool_call_input.done",
                "output_index": 0,
                "item_id": "ctc_1",
                "input": "ls -la",
            },
            completed([{**item, "input": "ls -la", "status": "completed"}]),
        ],
    )
    (call,) = r.tool_calls
    assert (call.kind, call.arguments, call.complete, call.args) == ("custom", "ls -la", True, None)
    assert "invalid_arguments" not in kinds(r) and "custom_tool_call" in kinds(r)
    whole = parse_responses_output({"status": "completed", "output": [{**item, "input": "pwd"}]})
    assert (whole.tool_calls[0].kind, whole.tool_calls[0].arguments) == ("custom", "pwd")


def test_completed_output_recovers_missed_calls_and_corrects_arguments() -> None:
    r = feed(
        ResponsesStreamAccumulator(),
        [
            CREATED,
            added(0, fc("fc_1", "call_1", "f")),
            args_delta(0, '{"a":', item_id="fc_1"),
            completed([fc("fc_1", "call_1", "f", '{"a":1}'), fc("fc_2", "call_2", "g", "{}")]),
        ],
    )
    assert [(c.tool_call_id, c.arguments, c.complete) for c in r.tool_calls] == [
        ("call_1", '{"a":1}', True),
        ("call_2", "{}", True),
    ]
    assert {"recovered_from_completed", "arguments_mismatch"} <= kinds(r)


def test_done_arguments_win_over_deltas_and_interleaved_calls_stay_apart() -> None:
    r = feed(
        ResponsesStreamAccumulator(),
        [
            CREATED,
            added(3, fc("fc_b", "call_b", "g")),
            added(1, fc("fc_a", "call_a", "f")),
            args_delta(3, '{"b":', item_id="fc_b"),
            args_delta(1, '{"a":1}'),
            args_delta(3, "2}", item_id="fc_b"),
            {
                "type": "response.function_call_arguments.done",
                "output_index": 1,
                "item_id": "fc_a",
                "arguments": '{"a":10}',
            },
            item_done(3, fc("fc_b", "call_b", "g", '{"b":2}')),
        ],
    )
    assert [(c.tool_call_id, c.arguments, c.index) for c in r.tool_calls] == [
        ("call_a", '{"a":10}', 0),
        ("call_b", '{"b":2}', 1),
    ]
    assert "arguments_mismatch" in kinds(r) and "no_finish_reason" in kinds(r)


def test_item_done_without_announcement_gives_the_call() -> None:
    r = feed(ResponsesStreamAccumulator(), [CREATED, item_done(0, fc("fc_1", "call_1", "f", '{"a":1}'))])
    assert [(c.tool_call_id, c.arguments) for c in r.tool_calls] == [("call_1", '{"a":1}')]
    assert "unannounced_item" in kinds(r)


def test_response_failed_and_error_event_raise() -> None:
    acc = ResponsesStreamAccumulator()
    acc.feed(CREATED)
    acc.feed(added(0, fc("fc_1", "call_1", "f")))
    with pytest.raises(ProviderStreamError, match="model crashed") as info:
        acc.feed(
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "server_error", "message": "model crashed"},
                },
            }
        )
    assert info.value.partial_responses[0].tool_calls[0].complete is False
    with pytest.raises(ProviderStreamError, match="slow down"):
        ResponsesStreamAccumulator().feed({"type": "error", "code": "rate_limit", "message": "slow down"})
    with pytest.raises(ProviderStreamError, match="broken"):
        parse_responses_output({"status": "failed", "error": {"message": "broken"}, "output": []})


def test_response_incomplete_marks_unfinished_calls() -> None:
    r = feed(
        ResponsesStreamAccumulator(),
        [
            CREATED,
            added(0, fc("fc_1", "call_1", "f")),
            args_delta(0, '{"a":1}', item_id="fc_1"),
            completed([], "incomplete", incomplete_details={"reason": "max_output_tokens"}),
        ],
    )
    assert r.tool_calls[0].complete is False and r.first.finish_reason == "incomplete"
    assert "incomplete_response" in kinds(r)


def test_server_items_are_not_client_calls() -> None:
    r = parse_responses_output(
        {
            "status": "completed",
            "output": [
                {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "q"}},
                {"type": "computer_call", "id": "cu_1", "call_id": "c", "action": {}},
                fc("fc_1", "call_1", "f", "{}"),
            ],
        }
    )
    # the computer tool is run by the client: a call of kind "builtin", its action as arguments
    assert [(c.tool_call_id, c.name, c.kind, c.arguments) for c in r.tool_calls] == [
        ("c", "computer", "builtin", '{"action":{}}'),
        ("call_1", "f", "function", "{}"),
    ]
    assert [(s.tool_call_id, s.name) for s in r.server_tool_calls] == [("ws_1", "web_search")]
    assert "builtin_tool_call" in kinds(r) and "unknown_event" not in kinds(r)


def test_error_payloads_without_the_usual_type_still_end_the_stream() -> None:
    acc = ResponsesStreamAccumulator()
    acc.feed(CREATED)
    with pytest.raises(ProviderStreamError, match="quota"):
        acc.feed({"error": {"message": "quota exhausted"}})
    with pytest.raises(ProviderStreamError, match="bad gateway"):
        ResponsesStreamAccumulator().feed({"type": "response.error", "error": {"message": "bad gateway"}})
    anthropic = AnthropicStreamAccumulator()
    anthropic.feed(START)
    with pytest.raises(ProviderStreamError, match="api_error"):
        anthropic.feed({"error": {"type": "api_error", "message": "Internal"}})

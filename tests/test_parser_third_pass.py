"""Issue 10, third pass: regression tests for what a second fresh-eyes tester found (custom chat tool
calls, entries of unknown types, a name after the arguments, refusals naming keys, early Responses
deltas, chat deltas after finish_reason). Bytes are written here."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.streams import chunk, tc
from toolcall_lab.exceptions import UnknownFormatError
from toolcall_lab.formats import (
    ChatCompletionAccumulator,
    ResponsesStreamAccumulator,
    parse_chat_completion,
    read_recording,
)


def feed(chunks: list[Any]) -> Any:
    acc = ChatCompletionAccumulator()
    for c in chunks:
        acc.feed(c)
    return acc.finish()


def kinds(response: Any) -> set[str]:
    return {f.kind for f in response.findings}


def custom(index: int, id: str | None = None, name: str | None = None, text: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"index": index}
    body: dict[str, Any] = {"input": text}
    if id is not None:
        entry["id"], entry["type"] = id, "custom"
    if name is not None:
        body["name"] = name
    entry["custom"] = body
    return entry


# -- 1. custom tool calls and entries of unknown types -------------------------------------------
def test_streamed_custom_tool_call_is_read_as_custom() -> None:
    r = feed(
        [
            chunk(custom(0, "call_c", "code_exec", "")),
            chunk(custom(0, text="print(")),
            chunk(custom(0, text="1)")),
            chunk(finish="tool_calls"),
        ]
    )
    (call,) = r.tool_calls
    assert (call.tool_call_id, call.name, call.arguments, call.kind, call.complete) == (
        "call_c",
        "code_exec",
        "print(1)",
        "custom",
        True,
    )
    assert "custom_tool_call" in kinds(r) and "missing_name" not in kinds(r)


def test_custom_tool_call_cut_without_finish_is_incomplete() -> None:
    r = feed([chunk(custom(0, "call_c", "code_exec", "print("))])
    assert not r.tool_calls[0].complete


def test_custom_tool_call_in_a_body() -> None:
    body = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_c",
                            "type": "custom",
                            "custom": {"name": "code_exec", "input": "print(1)"},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    (call,) = parse_chat_completion(body).tool_calls
    assert (call.name, call.arguments, call.kind, call.complete) == ("code_exec", "print(1)", "custom", True)


@pytest.mark.parametrize(
    "entry",
    [
        {"index": 0, "id": "call_x", "type": "plugin", "plugin": {"slug": "maps"}},
        {"index": 0, "id": "call_x", "type": "plugin", "function": {"name": "f", "arguments": "{}"}},
        {"index": 0, "id": "call_x", "plugin": {"slug": "maps"}},  # no type, an unknown payload key
    ],
)
def test_unknown_entry_type_is_kept_raw_and_never_complete(entry: dict[str, Any]) -> None:
    streamed = feed([chunk(entry), chunk(finish="tool_calls")])
    body = parse_chat_completion(
        {"choices": [{"index": 0, "message": {"tool_calls": [entry]}, "finish_reason": "tool_calls"}]}
    )
    for r in (streamed, body):
        (call,) = r.tool_calls
        assert not call.complete
        assert call.arguments  # what it held, raw
        (note,) = [f for f in r.findings if f.kind == "unknown_call_type"]
        assert "plugin" in note.message


def test_unknown_type_continuations_are_kept() -> None:
    r = feed(
        [
            chunk({"index": 0, "id": "call_x", "type": "plugin", "plugin": {"q": "a"}}),
            chunk({"index": 0, "plugin": {"q": "b"}}),
            chunk(finish="tool_calls"),
        ]
    )
    (call,) = r.tool_calls
    assert call.arguments == '{"q":"a"}{"q":"b"}' and not call.complete


# -- 2. the name/id rule table -------------------------------------------------------------------
def test_name_after_arguments_names_the_call() -> None:
    r = feed(
        [
            chunk(tc(0, "call_a", args='{"a": 1}')),
            chunk({"index": 0, "function": {"name": "f"}}),
            chunk(finish="tool_calls"),
        ]
    )
    assert [(c.tool_call_id, c.name, c.arguments, c.complete) for c in r.tool_calls] == [
        ("call_a", "f", '{"a": 1}', True)
    ]
    assert "late_name" in kinds(r) and "index_reused" not in kinds(r)


def test_name_first_then_arguments_has_no_late_name() -> None:
    r = feed([chunk(tc(0, "call_a")), chunk(tc(0, name="f")), chunk(tc(0, args="{}")), chunk(finish="stop")])
    assert r.tool_calls[0].name == "f" and "late_name" not in kinds(r)


def _documented_new_call(
    c_id: str | None, c_name: str | None, complete: bool, d_id: str | None, d_name: str | None, d_args: bool
) -> bool:
    """The README's rule table (Chat Completions: how a delta finds its call), as a function."""
    if d_id is None:
        if d_name is None or c_name is None:
            return False
        if d_name == c_name:
            return complete and d_args  # the name alone, repeated, waits; finish says it was a repeat
        return complete
    if c_id is None:
        if d_name is not None and c_name is None:
            return False
        return (d_name is not None or d_args) and complete
    if d_id == c_id:
        if d_name is None or c_name is None or d_name.startswith(c_name):
            return False
        return complete
    if d_name is not None and c_name is not None and d_name != c_name:
        return True
    return complete


@pytest.mark.parametrize(
    ("c_id", "c_name", "complete", "d_id", "d_name", "d_args"),
    list(
        itertools.product(
            ["a", None], ["f", None], [True, False], [None, "a", "b"], [None, "f", "g"], [True, False]
        )
    ),
)
def test_every_id_name_arguments_combination_follows_the_rule_table(
    c_id: str | None, c_name: str | None, complete: bool, d_id: str | None, d_name: str | None, d_args: bool
) -> None:
    first = tc(0, c_id, c_name, '{"x": 1}' if complete else '{"x": ')
    second = tc(0, d_id, d_name, '{"y": 2}' if d_args else None)
    r = feed([chunk(first), chunk(second), chunk(finish="tool_calls")])
    expected = 2 if _documented_new_call(c_id, c_name, complete, d_id, d_name, d_args) else 1
    assert len(r.tool_calls) == expected, [(c.tool_call_id, c.name, c.arguments) for c in r.tool_calls]


def test_readme_holds_the_rule_table() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "How a chat delta finds its call" in readme and "late_name" in readme


# -- 3. refusals name the keys they saw -----------------------------------------------------------
GEMINI = {
    "candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {}}}]}}],
    "modelVersion": "g",
}
OLLAMA = {"model": "q", "created_at": "t", "message": {"role": "assistant", "content": ""}, "done": True}


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("g.sse", f"data: {json.dumps(GEMINI)}\n\n", ["candidates", "Gemini native"]),
        ("g.json", json.dumps([GEMINI]), ["candidates", "Gemini native"]),
        ("o.chunks.jsonl", json.dumps(OLLAMA) + "\n", ["'done'", "'message'", "Ollama native"]),
        ("o.json", json.dumps(OLLAMA), ["'done'", "Ollama native"]),
    ],
)
def test_refusals_name_the_keys_and_the_api(tmp_path: Path, name: str, text: str, words: list[str]) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UnknownFormatError) as info:
        read_recording(path)
    for word in words:
        assert word in str(info.value)


# -- 4. a Responses delta before its item ---------------------------------------------------------
def _responses(events: list[dict[str, Any]]) -> Any:
    acc = ResponsesStreamAccumulator()
    for e in events:
        acc.feed(e)
    return acc.finish()


ITEM = {"type": "function_call", "id": "fc_9", "call_id": "call_Z", "name": "zed", "arguments": ""}


def test_delta_before_item_added_is_recovered_not_a_mismatch() -> None:
    r = _responses(
        [
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_9",
                "output_index": 0,
                "delta": '{"z":',
            },
            {"type": "response.output_item.added", "output_index": 0, "item": ITEM},
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_9",
                "output_index": 0,
                "delta": "9}",
            },
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_9",
                "output_index": 0,
                "arguments": '{"z":9}',
            },
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {**ITEM, "arguments": '{"z":9}'},
            },
            {
                "type": "response.completed",
                "response": {"status": "completed", "output": [{**ITEM, "arguments": '{"z":9}'}]},
            },
        ]
    )
    assert r.tool_calls[0].arguments == '{"z":9}' and r.tool_calls[0].complete
    assert "recovered_delta" in kinds(r)
    assert not kinds(r) & {"orphan_delta", "arguments_mismatch", "not_in_completed"}


def test_delta_for_an_item_never_announced_is_an_orphan() -> None:
    r = _responses(
        [
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_x",
                "output_index": 4,
                "delta": "{}",
            },
            {"type": "response.completed", "response": {"status": "completed", "output": []}},
        ]
    )
    (note,) = [f for f in r.findings if f.kind == "orphan_delta"]
    assert "fc_x" in note.message and "kept as call 0" in note.message
    (kept,) = r.tool_calls  # what it said is kept, as a call that is never run
    assert (kept.arguments, kept.name, kept.complete, kept.id_source) == ("{}", "", False, "fallback")


def test_not_in_completed_names_response_incomplete() -> None:
    r = _responses(
        [
            {"type": "response.output_item.added", "output_index": 0, "item": ITEM},
            {"type": "response.output_item.done", "output_index": 0, "item": {**ITEM, "arguments": "{}"}},
            {"type": "response.incomplete", "response": {"status": "incomplete", "output": []}},
        ]
    )
    (note,) = [f for f in r.findings if f.kind == "not_in_completed"]
    assert "response.incomplete output" in note.message and "response.completed" not in note.message


# -- 5. chat deltas after finish_reason -----------------------------------------------------------
def test_chat_arguments_after_finish_are_a_late_delta() -> None:
    r = feed([chunk(tc(0, "call_a", "f", '{"a":')), chunk(finish="tool_calls"), chunk(tc(0, args=" 1}"))])
    assert r.tool_calls[0].arguments == '{"a": 1}'
    assert "late_delta" in kinds(r)


def test_an_ordinary_stream_has_no_late_delta() -> None:
    r = feed([chunk(tc(0, "call_a", "f", '{"a":')), chunk(tc(0, args=" 1}"), finish="tool_calls")])
    assert "late_delta" not in kinds(r)


# -- nitpicks: an Anthropic block index reused; a lone surrogate only in the decoded arguments ----
def test_anthropic_block_index_reused_is_reported() -> None:
    from toolcall_lab.formats import AnthropicStreamAccumulator

    def start(tool_id: str, name: str) -> dict[str, Any]:
        block = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
        return {"type": "content_block_start", "index": 0, "content_block": block}

    def delta(text: str) -> dict[str, Any]:
        return {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": text},
        }

    acc = AnthropicStreamAccumulator()
    for e in [
        {"type": "message_start", "message": {"id": "m", "model": "c", "content": []}},
        start("toolu_1", "f"),
        delta('{"a": 1}'),
        {"type": "content_block_stop", "index": 0},
        start("toolu_2", "g"),
        delta('{"b": 2}'),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]:
        acc.feed(e)
    r = acc.finish()
    assert [(c.tool_call_id, c.arguments) for c in r.tool_calls] == [
        ("toolu_1", '{"a": 1}'),
        ("toolu_2", '{"b": 2}'),
    ]
    (note,) = [f for f in r.findings if f.kind == "index_reused"]
    assert "toolu_2" in note.message


@pytest.mark.parametrize(("args", "lone"), [('{"s": "\\ud83d"}', True), ('{"s": "\\ud83d\\ude00"}', False)])
def test_lone_surrogate_in_the_decoded_arguments(args: str, lone: bool) -> None:
    r = feed([chunk(tc(0, "call_a", "f", args)), chunk(finish="tool_calls")])
    assert r.tool_calls[0].arguments == args
    assert ("lone_surrogate" in kinds(r)) is lone

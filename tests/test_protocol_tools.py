"""The serialized session, the Anthropic converter, and schemas derived from functions."""

from __future__ import annotations

from typing import Literal

import pytest

from toolcall_lab.exceptions import ProxyProtocolError, UsageError
from toolcall_lab.messages import ToolCall
from toolcall_lab.protocol import from_anthropic, to_anthropic, validate_messages
from toolcall_lab.proxy import SerializedSession
from toolcall_lab.tools import ToolRegistry, tool_from_function

CALLS = [ToolCall(tool_call_id=f"c{i}", name="f", arguments=f'{{"i":{i}}}', index=i) for i in range(3)]
ASSISTANT = {"role": "assistant", "content": "three at once", "tool_calls": [c.to_openai() for c in CALLS]}


def test_session_hands_out_one_call_per_round_trip_then_rebuilds() -> None:
    s = SerializedSession(ASSISTANT, CALLS)
    seen = []
    while (call := s.next_call()) is not None:
        msg = s.client_message()
        assert len(msg["tool_calls"]) == 1
        seen.append(msg["tool_calls"][0]["id"])
        assert s.next_call() is call  # a retry gets the same call
        s.submit(call.tool_call_id, f"result {call.tool_call_id}")
    assert seen == ["c0", "c1", "c2"]
    rebuilt = s.rebuild([{"role": "user", "content": "q"}])
    assert rebuilt[1] == ASSISTANT and [m["tool_call_id"] for m in rebuilt[2:]] == ["c0", "c1", "c2"]
    assert validate_messages(rebuilt) == []


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        ("zz", "not part of this batch"),
        ("c1", "out of order"),
    ],
)
def test_session_rejects_bad_results_without_corrupting_the_queue(answer, match) -> None:
    s = SerializedSession(ASSISTANT, CALLS)
    with pytest.raises(ProxyProtocolError, match=match):
        s.submit(answer, "x")
    assert s.current.tool_call_id == "c0"
    s.submit("c0", "ok")
    with pytest.raises(ProxyProtocolError, match="already answered"):
        s.submit("c0", "again")
    with pytest.raises(ProxyProtocolError, match="still unanswered"):
        s.tool_messages()


def test_anthropic_round_trip() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        ASSISTANT,
        *[{"role": "tool", "tool_call_id": c.tool_call_id, "content": f"r{c.index}"} for c in CALLS],
        {"role": "assistant", "content": "done"},
    ]
    system, converted = to_anthropic(messages)
    assert system == "be brief"
    assert [m["role"] for m in converted] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in converted[2]["content"]] == ["tool_result"] * 3
    assert converted[1]["content"][1] == {"type": "tool_use", "id": "c0", "name": "f", "input": {"i": 0}}
    back = from_anthropic(system, converted)
    assert [m["role"] for m in back] == [m["role"] for m in messages]
    assert [m.get("tool_call_id") for m in back] == [m.get("tool_call_id") for m in messages]


def test_validator_finds_orphans_and_double_answers() -> None:
    msgs = [
        {"role": "user", "content": "x"},
        {"role": "tool", "tool_call_id": "nope", "content": ""},
        ASSISTANT,
        *[{"role": "tool", "tool_call_id": c.tool_call_id, "content": ""} for c in CALLS],
        {"role": "tool", "tool_call_id": "c0", "content": "again"},
    ]
    kinds = [v.kind for v in validate_messages(msgs)]
    assert kinds == ["orphan_tool_message", "duplicate_answer"]


def test_schema_from_hints_and_docstring() -> None:
    def search(
        query: str, limit: int = 5, kind: Literal["web", "news"] = "web", tags: list[str] | None = None
    ):
        """Search the web.

        Args:
            query: what to look for
            limit: how many results
        """

    schema = tool_from_function(search).schema()["function"]
    assert schema["description"] == "Search the web."
    props = schema["parameters"]["properties"]
    assert props["query"] == {"type": "string", "description": "what to look for"}
    assert props["limit"]["type"] == "integer" and props["kind"] == {"enum": ["web", "news"]}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert schema["parameters"]["required"] == ["query"]


def test_registry_rejects_duplicates_and_bad_names() -> None:
    reg = ToolRegistry()

    @reg.register(name="lookup", parameters={"type": "object", "properties": {}}, timeout_s=1.0)
    def f() -> None: ...

    assert (
        reg.get("lookup").timeout_s == 1.0 and reg.schemas()[0]["function"]["parameters"]["properties"] == {}
    )
    with pytest.raises(UsageError, match="already registered"):
        reg.register(f, name="lookup")
    with pytest.raises(UsageError, match="must be 1-64"):
        tool_from_function(f, name="bad name!")
    with pytest.raises(UsageError, match="timeout_s=0"):
        tool_from_function(f, timeout_s=0)

"""Strategies, third pass (issue 14): badly behaved user strategies, each a regression test.

A strategy cannot change the record through anything it reads; calls it cancels or leaves behind
are really cancelled and drained, with honest times; a cancellation or interruption it raises
itself is its own failure; one that never returns on the virtual clock is caught; decorated
strategies pickle; the messages name the strategy.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.test_strategies import MIXED, Counting, play, scripted
from toolcall_lab.strategies import Batch, strategy

# -- (1) nothing a strategy reads is the record ---------------------------------------------------------


def _assistant_edits(batch: Batch) -> list[str]:
    """Every edit of the assistant message a strategy might try; the kinds of error each raised."""
    am: Any = batch.assistant_message
    tries = [
        lambda: am.__setitem__("content", "HACKED"),
        lambda: am["tool_calls"][0]["function"].__setitem__("arguments", '{"key": "HACKED"}'),
        lambda: am["tool_calls"].append({"id": "x"}),
        lambda: am["tool_calls"].__setitem__(0, {"id": "x"}),
        lambda: am.pop("tool_calls"),
        lambda: am.update(content="HACKED"),
        lambda: am["tool_calls"][0].clear(),
    ]
    errors = []
    for attempt in tries:
        try:
            attempt()
        except (TypeError, AttributeError) as exc:
            errors.append(type(exc).__name__)
    return errors


@strategy("tamperer")
async def tamperer(batch: Batch) -> None:
    assert batch.assistant_message is not None and batch.assistant_message["content"] == "On it."
    refused = _assistant_edits(batch)
    batch.note(f"refused {len(refused)}")
    call = batch.calls[0]
    call.args["key"] = "HACKED"  # the strategy's own copy: neither the tool nor the record sees it
    batch.call(1).args["key"] = "HACKED"
    for name, value in [
        ("round_index", 7),
        ("strategy", "other"),
        ("chunk_timing", "recorded"),
        ("streaming", True),
        ("assistant_message", {}),
        ("concurrency", 1),
        ("client_round_trips", 9),
    ]:
        with pytest.raises(AttributeError):
            setattr(batch, name, value)
    for name in ("notes", "findings", "round_trips", "results", "calls"):
        with pytest.raises(AttributeError):
            getattr(batch, name).append("x")
    with pytest.raises(TypeError):
        batch.tool_limits["search"] = 1  # type: ignore[index]
    await batch.run_parallel()


def test_a_strategy_cannot_change_the_record_or_the_next_request() -> None:
    result = play(scripted(MIXED), Counting().registry(), mode=tamperer)
    assert result.status == "completed", result.error
    rnd = result.rounds[0]
    assert rnd.strategy_notes == ("refused 7",)
    assert rnd.assistant_message["content"] == "On it."
    assert len(rnd.assistant_message["tool_calls"]) == 4
    assert [json.loads(c["function"]["arguments"])["key"] for c in rnd.assistant_message["tool_calls"]] == [
        "a",
        "w1",
        "b",
        "w2",
    ]
    assert [e.arguments for e in rnd.executions] == [c.arguments for c in rnd.tool_calls]
    assert [c.args for c in rnd.tool_calls] == [{"key": k} for k in ("a", "w1", "b", "w2")]
    assert "HACKED" not in json.dumps([e.result for e in rnd.executions])
    sent = result.rounds[1].request_messages
    assert [m for m in sent if m["role"] == "assistant"] == [rnd.assistant_message]
    assert "HACKED" not in json.dumps(result.messages)

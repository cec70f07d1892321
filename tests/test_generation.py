"""The stated generation-speed model: responses re-timed as streamed, and the speed measured from
recordings with timed chunks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab.exceptions import UsageError
from toolcall_lab.generation import GenerationSpeed, as_streamed, measured_speed, streamed_response
from toolcall_lab.records import TimedChunk
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import SCENARIOS


def words(text: str) -> int:
    """A stand-in tokenizer for exact arithmetic: one token per 4 characters, rounded up."""
    return -(-len(text) // 4)


def test_a_response_streams_at_the_stated_speed() -> None:
    speed = GenerationSpeed(tokens_per_s=10.0, ttft_s=0.5)
    message = {
        "role": "assistant",
        "content": "abcdefgh",  # 2 tokens
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get", "arguments": '{"a": 1}'}}
        ],
    }
    chunks, latency = streamed_response(message, speed, per_chunk=8, count=words)
    offsets = [round(c.offset_s, 6) for c in chunks]
    # role (0 tokens), text (2), call header "get" (1), arguments (2), then the finish chunk
    assert offsets == [0.5, 0.7, 0.8, 1.0, 1.0]
    assert latency == pytest.approx(1.0)
    assert chunks[-1].payload["choices"][0]["finish_reason"] == "tool_calls"


def test_a_streamed_trace_replays_the_same_conversation_and_says_its_timing_is_estimated() -> None:
    trace = SCENARIOS["weather_news_stock"].record()
    speed = GenerationSpeed(tokens_per_s=20.0, ttft_s=0.3, source="a test")
    streamed = as_streamed(trace, speed, tool_s=1.0, count=words)
    mc = streamed.rounds[0].model_call
    assert mc.chunk_timing == "estimated" and mc.timing.source == "estimated"
    assert "tokens / 20.0 tokens/s (a test)" in mc.timing.note
    assert {e.duration_s for e in streamed.rounds[0].executions} == {1.0}
    assert streamed.rounds[0].executions[0].timing.note == "every call assumed to take 1.0 s"
    eager, parallel = replay(streamed, "eager"), replay(streamed, "parallel")
    assert [m for m in eager.messages] == [m for m in parallel.messages]
    assert "stated formula" in eager.rounds[0].strategy_notes[0]
    first = eager.rounds[0].executions[0]
    assert first.started_at < eager.rounds[0].model_call.ended_at  # started while the model streamed


def test_drawn_durations_are_seeded_and_labelled() -> None:
    trace = SCENARIOS["weather_news_stock"].record()
    speed = GenerationSpeed(tokens_per_s=20.0, ttft_s=0.3)
    a = as_streamed(trace, speed, tool_s=[0.1, 2.0, 5.0], durations_from="of a test", seed=3, count=words)
    b = as_streamed(trace, speed, tool_s=[0.1, 2.0, 5.0], durations_from="of a test", seed=3, count=words)
    assert [e.duration_s for e in a.rounds[0].executions] == [e.duration_s for e in b.rounds[0].executions]
    assert (
        a.rounds[0].executions[0].timing.note
        == "each call's duration drawn (seed 3) from 3 durations of a test"
    )
    with pytest.raises(UsageError, match="give durations to draw from"):
        as_streamed(trace, speed, tool_s=[], count=words)


def test_bad_speeds_are_refused() -> None:
    with pytest.raises(UsageError, match="tokens_per_s=0"):
        GenerationSpeed(tokens_per_s=0, ttft_s=0.1)
    with pytest.raises(UsageError, match="ttft_s=-1"):
        GenerationSpeed(tokens_per_s=10, ttft_s=-1)


def test_the_speed_is_read_from_recorded_chunk_gaps() -> None:
    trace = SCENARIOS["weather_news_stock"].record()
    rnd = trace.rounds[0]
    text = "x" * 40  # 10 tokens
    payload = {"choices": [{"index": 0, "delta": {"content": text}}]}
    chunks = (TimedChunk(offset_s=1.0, payload=payload), TimedChunk(offset_s=1.5, payload=payload))
    timed = replace(rnd, model_call=replace(rnd.model_call, chunks=chunks, chunk_timing="recorded"))
    speed = measured_speed([replace(trace, rounds=(timed,))], count=words)
    assert speed.tokens_per_s == pytest.approx(20.0)  # 10 tokens in 0.5 s
    assert speed.ttft_s == pytest.approx(0.5)  # 1.0 s to the first chunk, less its 10 tokens at 20/s
    with pytest.raises(UsageError, match="no response with recorded chunk offsets"):
        measured_speed([trace], count=words)  # scripted: spread offsets are not evidence


@needs_realdata
def test_the_speed_of_the_real_claude_code_streams() -> None:
    """Quirk: Claude Code stamps each content block's log line when the block finished streaming, so
    the gap between two lines is the time the later block took to generate."""
    from toolcall_lab.importers import import_claude_code

    sessions = [
        t
        for f in ("claude-code-viewer", "claude-reliability")
        for t in import_claude_code(REALDATA / f).traces
    ]
    speed = measured_speed(sessions)
    assert 20 < speed.tokens_per_s < 150 and "chunk gaps" in speed.source

"""Invariants of parsing (hypothesis): split points, interleaving, streamed == whole, garbage input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REALDATA
from tests.streams import sse_body, stream_of
from toolcall_lab.exceptions import ToolcallLabError
from toolcall_lab.formats import (
    ChatCompletionAccumulator,
    iter_sse_payloads,
    parse_chat_completion,
    read_recording,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
arg_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=4)
calls_strategy = st.lists(
    st.tuples(st.text("abcxyz_", min_size=1, max_size=6), arg_objects), min_size=1, max_size=4
)


def parse(chunks: list[dict[str, Any]]):
    acc = ChatCompletionAccumulator()
    for c in chunks:
        acc.feed(c)
    return acc.finish()


def triples(calls):
    return [(f"id{i}", name, json.dumps(args, ensure_ascii=False)) for i, (name, args) in enumerate(calls)]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(calls=calls_strategy, data=st.data(), interleave=st.booleans())
def test_any_split_and_interleaving_gives_the_same_calls(calls, data, interleave) -> None:
    spec = triples(calls)
    splits = [data.draw(st.lists(st.integers(0, max(len(a), 1)), max_size=8)) for _, _, a in spec]
    got = parse(stream_of(spec, splits, interleave)).tool_calls
    want = parse(stream_of(spec)).tool_calls
    assert got == want
    assert [(c.tool_call_id, c.name, c.arguments) for c in got] == spec


@settings(max_examples=100)
@given(calls=calls_strategy, data=st.data())
def test_streamed_equals_whole_body(calls, data) -> None:
    spec = triples(calls)
    splits = [data.draw(st.lists(st.integers(0, max(len(a), 1)), max_size=5)) for _, _, a in spec]
    body = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                        for i, n, a in spec
                    ],
                },
            }
        ]
    }
    assert parse(stream_of(spec, splits)).tool_calls == parse_chat_completion(body).tool_calls


@settings(max_examples=60)
@given(calls=calls_strategy)
def test_sse_round_trip_end_to_end(calls) -> None:
    chunks = stream_of(triples(calls))
    assert parse(list(iter_sse_payloads(sse_body(chunks)))).tool_calls == parse(chunks).tool_calls


@settings(max_examples=300)
@given(chunks=st.lists(json_values, max_size=6))
def test_garbage_chunks_never_raise(chunks) -> None:
    parse(chunks)  # findings, never exceptions


@settings(max_examples=300)
@given(body=st.binary(max_size=200) | st.text(max_size=200))
def test_garbage_sse_raises_only_library_errors(body) -> None:
    try:
        for payload in iter_sse_payloads(body):
            parse([payload])
    except ToolcallLabError:
        pass
    except UnicodeDecodeError:
        pass  # undecodable bytes: the caller's input is not text at all


def _chat_recordings() -> list[str]:
    if not REALDATA.is_dir():
        return []
    return sorted(
        str(p.relative_to(REALDATA))
        for p in REALDATA.glob("*/*")
        if p.name.endswith((".sse", ".chunks.jsonl"))
        and "PATHOLOGICAL" not in p.name
        and "midstream_error" not in p.name
    )


@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
@pytest.mark.parametrize("relpath", _chat_recordings())
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_real_recordings_rechunked_give_the_same_calls(relpath, data) -> None:
    (exchange,) = read_recording(REALDATA / relpath).exchanges
    if exchange.format != "openai-chat":
        return
    original = exchange.parse()[0]
    spec = [(c.tool_call_id, c.name, c.arguments) for c in original.tool_calls if c.id_source == "provider"]
    splits = [data.draw(st.lists(st.integers(0, max(len(a), 1)), max_size=6)) for _, _, a in spec]
    rechunked = parse(stream_of(spec, splits, interleave=data.draw(st.booleans())))
    assert [(c.tool_call_id, c.name, c.arguments) for c in rechunked.tool_calls] == spec

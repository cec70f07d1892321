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


def _framed(payloads: list[dict[str, Any]], data: Any) -> bytes:
    """The payloads as an SSE body in a randomly drawn but valid framing."""
    eol = data.draw(st.sampled_from(["\n", "\r", "\r\n"]), label="eol")
    parts = ["\ufeff"] if data.draw(st.booleans(), label="bom") else []
    for payload in [*payloads, None]:
        if data.draw(st.booleans(), label="comment"):
            parts.append(data.draw(st.sampled_from([": keep-alive", ":", ": OPENROUTER PROCESSING"])) + eol)
        if data.draw(st.booleans(), label="keep-alive event"):
            parts.append(
                data.draw(st.sampled_from(["event: ping", "data:", "retry: 10", "id: 4"])) + eol + eol
            )
        sep = data.draw(st.sampled_from(["data: ", "data:"]), label="field")
        if payload is None:
            parts.append(sep + "[DONE]")
        elif data.draw(st.booleans(), label="multi-line"):  # pretty JSON, one data: line per text line
            parts.extend(f"{sep}{line}{eol}" for line in json.dumps(payload, indent=1).split("\n"))
            parts[-1] = parts[-1][: -len(eol)]
        else:
            parts.append(sep + json.dumps(payload, ensure_ascii=data.draw(st.booleans(), label="ascii")))
        parts.append(eol + eol)
    body = "".join(parts)
    if data.draw(st.booleans(), label="no final newline"):
        body = body.rstrip("\r\n")
    return body.encode("utf-8")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=calls_strategy, data=st.data())
def test_any_sse_framing_and_chunking_gives_the_same_calls(calls, data) -> None:
    """CR/LF/CRLF, BOM, comments, keep-alives, multi-line data and byte pieces cut anywhere
    (inside UTF-8 sequences and CRLF pairs included) all give the calls of the plain stream."""
    from toolcall_lab.formats.dispatch import iter_stream_responses
    from toolcall_lab.formats.sse import payload_items, sse_frames

    spec = triples(calls)
    chunks = stream_of(spec)
    body = _framed(chunks, data)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(body)), max_size=12), label="cuts")))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    want = parse(chunks).tool_calls
    assert parse(list(iter_sse_payloads(pieces, chunked=True))).tool_calls == want
    (response,) = iter_stream_responses(payload_items(sse_frames(iter(pieces))))
    assert response.tool_calls == want
    assert [(c.tool_call_id, c.name, c.arguments) for c in want] == spec


@st.composite
def odd_chunks(draw: Any) -> dict[str, Any]:
    """One chat chunk of any shape a quirky provider sends: text, a finish reason anywhere, tool call
    deltas with or without id, type, name or index reuse, arguments as pieces, objects or null."""
    choice: dict[str, Any] = {
        "index": draw(st.sampled_from([0, 0, 0, 1])),
        "delta": {},
        "finish_reason": None,
    }
    kind = draw(st.integers(0, 9))
    if kind == 0:
        choice["finish_reason"] = draw(st.sampled_from(["tool_calls", "stop", "length"]))
    elif kind == 1:
        choice["delta"] = {"content": draw(st.sampled_from(["hi", " ", "", None]))}
    else:
        entry: dict[str, Any] = {"index": draw(st.sampled_from([0, 0, 1, 1, 2, 3]))}
        if draw(st.booleans()):
            entry["id"] = draw(st.sampled_from(["a", "b", "c", ""]))
            if draw(st.booleans()):
                entry["type"] = "function"
        fn: dict[str, Any] = {}
        if draw(st.integers(0, 2)) == 0:
            fn["name"] = draw(st.sampled_from(["f", "get_", "weather"]))
        fn["arguments"] = draw(st.sampled_from(["{", "}", '"x":1', "", '{"a":1}', None, "1", {"o": 1}]))
        entry["function"] = fn
        choice["delta"] = {"tool_calls": [entry]}
        if draw(st.integers(0, 9)) == 0:
            choice["delta"]["content"] = "t"
    return {"id": "r", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}


def _outcome(payloads: list[dict[str, Any]], listening: bool) -> Any:
    acc = ChatCompletionAccumulator(listener=(lambda event: None) if listening else None)
    try:
        for payload in payloads:
            acc.feed(json.loads(json.dumps(payload)))
    except ToolcallLabError as exc:
        return type(exc).__name__, str(exc)
    return acc.finish().to_dict()


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_fast_path_and_the_general_path_agree_on_any_quirky_stream(data: Any) -> None:
    """Without a listener the common chunks take the fast path; with one, every chunk takes the general
    path. On any stream of odd chunks both give the same response: calls, text, findings and where
    each finding points."""
    payloads = data.draw(st.lists(odd_chunks(), min_size=1, max_size=9))
    assert _outcome(payloads, False) == _outcome(payloads, True)

"""The chat-completions accumulator on synthetic streams: one test per quirk of the issue list."""

from __future__ import annotations

import json

from tests.streams import chunk, tc
from toolcall_lab.formats import ChatCompletionAccumulator, parse_chat_completion
from toolcall_lab.formats.base import ArgumentsDelta, CallFinished, CallStarted
from toolcall_lab.messages import InvalidArguments, ParsedArguments


def run(chunks, batch=0):
    acc = ChatCompletionAccumulator(batch=batch)
    for c in chunks:
        acc.feed(c)
    return acc.finish()


def kinds(response):
    return [f.kind for f in response.findings]


def test_interleaved_calls_by_index() -> None:
    r = run(
        [
            chunk(tc(0, "a", "f", ""), tc(1, "b", "g", "")),
            chunk(tc(1, args='{"y":')),
            chunk(tc(0, args='{"x":1}')),
            chunk(tc(1, args="2}")),
            chunk(finish="tool_calls"),
        ]
    )
    assert [(c.tool_call_id, c.name, c.arguments) for c in r.tool_calls] == [
        ("a", "f", '{"x":1}'),
        ("b", "g", '{"y":2}'),
    ]
    assert kinds(r) == []


def test_sparse_indices_are_kept_and_reported() -> None:
    r = run([chunk(tc(1, "a", "f", "{}")), chunk(tc(3, "b", "g", "{}")), chunk(finish="tool_calls")])
    assert [c.index for c in r.tool_calls] == [1, 3]
    assert kinds(r).count("sparse_index") == 1  # one finding, at the end, naming the gaps
    assert "tool call indices skip 0, 2" in next(f.message for f in r.findings if f.kind == "sparse_index")


def test_missing_or_null_index_new_id_starts_a_new_call() -> None:
    r = run(
        [
            chunk(tc(None, "a", "f", '{"q":')),
            chunk(tc(None, args="1}")),
            chunk({"index": None, "id": "b", "function": {"name": "g", "arguments": "{}"}}),
            chunk(finish="tool_calls"),
        ]
    )
    assert [(c.tool_call_id, c.arguments) for c in r.tool_calls] == [("a", '{"q":1}'), ("b", "{}")]
    assert kinds(r).count("missing_index") == 2


def test_two_entries_with_the_same_index_in_one_chunk() -> None:
    r = run([chunk(tc(0, "a", "f", "{}"), tc(0, "b", "g", "{}")), chunk(finish="tool_calls")])
    assert [c.tool_call_id for c in r.tool_calls] == ["a", "b"]
    assert "duplicate_index_in_chunk" in kinds(r)
    r2 = run([chunk(tc(0, "a", "f", '{"x":'), tc(0, args="1}")), chunk(finish="tool_calls")])
    assert r2.tool_calls[0].arguments == '{"x":1}'
    assert "duplicate_index_in_chunk" in kinds(r2)


def test_id_and_name_repeated_or_empty_on_continuations_are_not_concatenated() -> None:
    r = run(
        [
            chunk(tc(0, "a", "f", '{"x"')),
            chunk(tc(0, "a", "f", ":1}")),
            chunk({"index": 0, "id": "", "function": {"name": "", "arguments": ""}}),
            chunk(finish="tool_calls"),
        ]
    )
    (call,) = r.tool_calls
    assert (call.tool_call_id, call.name, call.arguments) == ("a", "f", '{"x":1}')
    assert "repeated_header" in kinds(r)


def test_no_id_gets_a_reproducible_fallback_id_per_batch() -> None:
    chunks = [chunk(tc(0, name="f", args="{}"), tc(1, name="g", args="{}")), chunk(finish="tool_calls")]
    r = run(chunks, batch=3)
    assert [c.tool_call_id for c in r.tool_calls] == ["call_3_0", "call_3_1"]
    assert all(c.id_source == "fallback" for c in r.tool_calls)
    assert run(chunks, batch=3).tool_calls == r.tool_calls
    r_empty = run([chunk({"index": 0, "id": "", "function": {"name": "f", "arguments": "{}"}})])
    assert r_empty.tool_calls[0].tool_call_id == "call_0_0" and "empty_id" in kinds(r_empty)


def test_provider_id_is_never_altered() -> None:
    r = run([chunk(tc(0, "  odd:id 0 ", "f", "{}"))])
    assert r.tool_calls[0].tool_call_id == "  odd:id 0 "


def test_arguments_split_mid_escape_and_mid_unicode() -> None:
    args = json.dumps({"q": 'he said "hi" \\ é 日本'}, ensure_ascii=False)
    pieces = [args[i : i + 1] for i in range(len(args))]
    r = run([chunk(tc(0, "a", "f"))] + [chunk(tc(0, args=p)) for p in pieces])
    assert r.tool_calls[0].arguments == args
    assert r.tool_calls[0].args == json.loads(args)


def test_double_encoded_arguments_decoded_once_more_and_reported() -> None:
    inner = json.dumps({"city": "Paris"})
    r = run([chunk(tc(0, "a", "f", json.dumps(inner)), finish="tool_calls")])
    call = r.tool_calls[0]
    assert call.arguments == json.dumps(inner)  # raw kept
    outcome = call.parse_arguments()
    assert isinstance(outcome, ParsedArguments) and outcome.double_encoded
    assert outcome.value == {"city": "Paris"}
    assert "double_encoded_arguments" in kinds(r)


def test_incomplete_json_at_length_finish_is_kept_and_marked() -> None:
    r = run([chunk(tc(0, "a", "f", '{"text": "a long sto')), chunk(finish="length")])
    call = r.tool_calls[0]
    assert call.arguments == '{"text": "a long sto' and not call.complete
    assert isinstance(call.parse_arguments(), InvalidArguments)
    assert call.parse_arguments().truncated
    assert {"incomplete_arguments", "length_finish"} <= set(kinds(r))


def test_invalid_json_is_reported_as_invalid_not_incomplete() -> None:
    r = run([chunk(tc(0, "a", "f", "{'x': 1}"), finish="tool_calls")])
    assert not r.tool_calls[0].complete and "invalid_arguments" in kinds(r)


def test_noise_chunks_are_ignored() -> None:
    r = run(
        [
            {"choices": [], "prompt_filter_results": []},  # Azure prelude
            chunk(reasoning="thinking..."),
            {**chunk(content="Let me check. "), "obfuscation": "xyz"},
            chunk(tc(0, "a", "f", "{}")),
            {"id": "x", "choices": [], "usage": {"total_tokens": 9}},
        ]
    )
    assert r.first.content == "Let me check. " and r.first.reasoning == "thinking..."
    assert r.usage == {"total_tokens": 9}
    assert "no_finish_reason" in kinds(r)
    assert len(r.tool_calls) == 1


def test_n_greater_than_1_choices_keyed_by_choice_and_index() -> None:
    r = run(
        [
            chunk(tc(0, "a", "f", '{"c":'), choice=0),
            chunk(tc(0, "b", "f", '{"c":'), choice=1),
            chunk(tc(0, args="0}"), choice=0),
            chunk(tc(0, args="1}"), choice=1),
        ]
    )
    assert [(c.index, c.tool_calls[0].arguments) for c in r.choices] == [(0, '{"c":0}'), (1, '{"c":1}')]


def test_malformed_chunks_become_findings_not_crashes() -> None:
    r = run(
        [
            "garbage",
            {"choices": "x"},
            {"choices": [{"delta": {"tool_calls": [5]}}]},
            chunk(tc(0, "a", "f", "{}")),
        ]
    )
    assert kinds(r).count("malformed_chunk") == 3 and len(r.tool_calls) == 1


def test_events_animate_deltas_into_calls() -> None:
    events = []
    acc = ChatCompletionAccumulator(listener=events.append)
    for c in [chunk(tc(0, "a", "f", "")), chunk(tc(0, args='{"x":')), chunk(tc(0, args="1}"))]:
        acc.feed(c)
    acc.finish()
    assert [type(e) for e in events] == [CallStarted, ArgumentsDelta, ArgumentsDelta, CallFinished]
    started = events[0]
    assert (started.tool_call_id, started.name, started.call_index) == ("a", "f", 0)  # known at once
    assert events[-1].call.arguments == '{"x":1}'


def test_a_listener_hears_every_delta_whenever_it_is_set_and_the_calls_are_the_same() -> None:
    """With a listener every chunk takes the general path (the fast path never checks for one): the
    response is the same as without, and a listener set after a few chunks hears every later delta
    (a call it had not heard of announced first); removed again, it hears nothing more."""
    stream = [
        chunk(tc(0, "a", "f", "")),
        chunk(tc(0, args='{"x":')),
        chunk(tc(0, args="1}")),
        chunk(tc(1, "b", "g", '{"y"')),
        chunk(tc(1, args=":2}")),
        chunk({}, finish="tool_calls"),
    ]
    plain, heard = ChatCompletionAccumulator(), ChatCompletionAccumulator(listener=[].append)
    late, events = ChatCompletionAccumulator(), []
    for k, c in enumerate(stream):
        if k == 2:
            late.listener = events.append
        if k == 4:
            late.listener = None
        for acc in (plain, heard, late):
            acc.feed(json.loads(json.dumps(c)))
    results = [acc.finish() for acc in (plain, heard, late)]
    assert results[0] == results[1] == results[2]
    assert [c.arguments for c in results[0].tool_calls] == ['{"x":1}', '{"y":2}']
    assert [(type(e).__name__, getattr(e, "delta", None) or e.tool_call_id) for e in events] == [
        ("CallStarted", "a"),  # (announced first: the listener had not heard of it)
        ("ArgumentsDelta", "1}"),
        ("CallStarted", "b"),
        ("ArgumentsDelta", '{"y"'),
    ]
    assert late.listener is None


def test_sdk_chunk_objects_are_accepted() -> None:
    from openai.types.chat import ChatCompletionChunk

    raw = [chunk(tc(0, "a", "f", '{"x":')), chunk(tc(0, args="1}"), finish="tool_calls")]
    for c in raw:
        c["created"] = 0
    sdk = [ChatCompletionChunk.model_validate(c) for c in raw]
    assert run(sdk).tool_calls == run(raw).tool_calls


def test_non_streamed_body_with_ollama_index() -> None:
    body = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"index": 1, "id": "b", "function": {"name": "g", "arguments": "{}"}},
                        {"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x":1}'}},
                    ],
                },
            }
        ]
    }
    r = parse_chat_completion(body)
    assert [c.tool_call_id for c in r.tool_calls] == ["a", "b"]


# -- issue 10: quirks real providers send -------------------------------------------------------
import dataclasses  # noqa: E402

import pytest  # noqa: E402

from toolcall_lab.exceptions import ProviderStreamError, UsageError  # noqa: E402
from toolcall_lab.messages import ToolCall, new_choice, new_response, new_tool_call  # noqa: E402


def calls_of(response):
    return [(c.tool_call_id, c.name, c.arguments, c.complete) for c in response.tool_calls]


def test_split_name_is_joined_and_repeated_full_name_is_not_doubled() -> None:
    split = run(
        [chunk(tc(0, "a", "get_", "")), chunk(tc(0, name="weather", args="{}")), chunk(finish="tool_calls")]
    )
    assert split.tool_calls[0].name == "get_weather" and "split_name" in kinds(split)
    # the name piece can come with argument pieces (one delta carrying both)
    mixed = run([chunk(tc(0, "a", "get_wea", '{"c')), chunk(tc(0, name="ther", args='":1}'))])
    assert (mixed.tool_calls[0].name, mixed.tool_calls[0].arguments) == ("get_weather", '{"c":1}')
    repeated = run([chunk(tc(0, "0", "get_weather", "")), chunk(tc(0, "0", "get_weather", "{}"))])
    assert repeated.tool_calls[0].name == "get_weather"
    assert "repeated_header" in kinds(repeated) and "split_name" not in kinds(repeated)
    snapshot = run([chunk(tc(0, "a", "get_", "")), chunk(tc(0, name="get_weather", args="{}"))])
    assert snapshot.tool_calls[0].name == "get_weather"


def test_new_id_at_a_used_index_in_a_later_chunk_starts_a_new_call() -> None:
    r = run(
        [
            chunk(tc(0, "a", "f", '{"x":1}')),
            chunk(tc(0, "b", "g", "")),
            chunk(tc(0, args='{"y":2}')),
            chunk(tc(0, "c", args='{"z":3}')),  # no name, but the call at index 0 is complete
            chunk(finish="tool_calls"),
        ]
    )
    assert calls_of(r) == [
        ("a", "f", '{"x":1}', True),
        ("b", "g", '{"y":2}', True),
        ("c", "", '{"z":3}', False),  # kept, but a call without a name cannot be run
    ]
    assert "missing_name" in kinds(r)
    assert kinds(r).count("index_reused") == 2 and "missing_name" in kinds(r)
    assert [c.index for c in r.tool_calls] == [0, 1, 2]


def test_other_ids_on_fragments_of_an_unfinished_call_are_reported_not_split() -> None:
    pieces = ['{"c', 'ity"', ':"Par', 'is"}']
    r = run(
        [chunk(tc(0, "id0", "f", ""))] + [chunk(tc(0, f"id{n + 1}", "", p)) for n, p in enumerate(pieces)]
    )
    assert calls_of(r) == [("id0", "f", '{"city":"Paris"}', True)]
    (changed,) = [f for f in r.findings if f.kind == "id_changed"]
    assert "4 later delta(s)" in changed.message and "id1" in changed.message


def test_legacy_function_call_stream_and_body() -> None:
    r = run(
        [
            chunk(),
            {"choices": [{"index": 0, "delta": {"function_call": {"name": "f", "arguments": ""}}}]},
            {"choices": [{"index": 0, "delta": {"function_call": {"arguments": '{"x":1}'}}}]},
            chunk(finish="function_call"),
        ],
        batch=2,
    )
    assert calls_of(r) == [("call_2_0", "f", '{"x":1}', True)]
    assert {"legacy_function_call", "missing_id"} <= set(kinds(r))
    body = {
        "choices": [{"message": {"function_call": {"name": "f", "arguments": "{}"}}, "finish_reason": "stop"}]
    }
    assert calls_of(parse_chat_completion(body)) == [("call_0_0", "f", "{}", True)]


def test_arguments_as_json_object_are_kept_serialised() -> None:
    r = run([chunk(tc(0, "a", "f", {"city": "Paris", "n": [1, 2]}))])
    assert calls_of(r) == [("a", "f", '{"city":"Paris","n":[1,2]}', True)]
    assert "arguments_not_string" in kinds(r) and "malformed_chunk" not in kinds(r)
    empty = run([chunk(tc(0, "a", "f", {}))])
    assert empty.tool_calls[0].arguments == "{}"
    body = {
        "choices": [
            {"message": {"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"x": 1}}}]}}
        ]
    }
    assert calls_of(parse_chat_completion(body)) == [("a", "f", '{"x":1}', True)]


def test_null_arguments_add_nothing() -> None:
    r = run([chunk(tc(0, "a", "f", None)), chunk(tc(0, args=None)), chunk(tc(0, args='{"x":1}'))])
    assert calls_of(r) == [("a", "f", '{"x":1}', True)]
    alone = run([chunk(tc(0, "a", "f", None), finish="tool_calls")])
    assert calls_of(alone) == [("a", "f", "", True)] and "empty_arguments" in kinds(alone)


def test_error_chunk_with_choices_raises_with_the_partial_response() -> None:
    acc = ChatCompletionAccumulator()
    acc.feed(chunk(tc(0, "a", "f", '{"x":')))
    error_chunk = {
        **chunk(content="", finish="error"),
        "error": {"code": 502, "message": "Provider disconnected"},
    }
    with pytest.raises(ProviderStreamError, match="Provider disconnected") as info:
        acc.feed(error_chunk)
    assert info.value.chunk_index == 1 and info.value.provider_message.startswith("Provider disconnected")
    (partial,) = info.value.partial_responses
    assert partial.error and calls_of(partial) == [("a", "f", '{"x":', False)]
    assert "provider_error" in kinds(partial)


def test_calls_complete_before_an_error_are_not_marked_complete() -> None:
    acc = ChatCompletionAccumulator()
    acc.feed(chunk(tc(0, "a", "f", '{"x":1}')))
    with pytest.raises(ProviderStreamError) as info:
        acc.feed({"error": {"message": "overloaded"}})
    assert not info.value.partial_responses[0].tool_calls[0].complete


def test_finish_reason_error_without_error_object_raises() -> None:
    acc = ChatCompletionAccumulator()
    with pytest.raises(ProviderStreamError, match="finish_reason 'error'"):
        acc.feed(chunk(finish="error"))


def test_whole_error_body_raises() -> None:
    with pytest.raises(ProviderStreamError, match="rate limited"):
        parse_chat_completion({"error": {"message": "rate limited", "type": "requests"}})


def test_split_surrogate_pair_is_joined_and_lone_one_reported() -> None:
    r = run([chunk(tc(0, "a", "f", '{"e":"\ud83d')), chunk(tc(0, args='\ude00"}'), content="\ud83d")])
    assert r.tool_calls[0].arguments == '{"e":"\U0001f600"}' and r.tool_calls[0].args == {"e": "\U0001f600"}
    assert {"split_surrogate_pair", "lone_surrogate"} <= set(kinds(r))
    assert r.first.content == "\ud83d"


def test_fast_constructors_build_equal_values() -> None:
    call = new_tool_call("a", "f", "{}", 1, 2, "fallback", False, "custom", None)
    assert call == ToolCall(
        tool_call_id="a",
        name="f",
        arguments="{}",
        index=1,
        choice_index=2,
        id_source="fallback",
        complete=False,
        kind="custom",
    )
    assert type(call) is ToolCall and dataclasses.asdict(call)["kind"] == "custom"
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.name = "g"  # type: ignore[misc]
    choice = new_choice(0, "t", None, (call,), "stop")
    response = new_response("x", (choice,), (), None, "id", "m", None)
    assert dataclasses.replace(response) == response and response.tool_calls == (call,)


def test_choice_zero_is_reported_only_when_a_chunk_had_it() -> None:
    assert run([{"id": "x", "choices": [], "usage": {"total_tokens": 1}}]).choices == ()
    only_one = run([chunk(tc(0, "a", "f", "{}"), choice=1)])
    assert [c.index for c in only_one.choices] == [1]
    role_only = run([chunk(content=None)])
    assert [c.index for c in role_only.choices] == [0] and "no_finish_reason" in kinds(role_only)


def test_a_repeated_name_after_complete_arguments_waits_for_the_next_delta() -> None:
    """No ids and index 0 for every call: the same name again starts a new call only when arguments
    follow; a trailing repeat (no arguments) is just a repeat."""
    header, ending = chunk(tc(0, name="f", args="")), chunk(finish="tool_calls")
    two = run([header, chunk(tc(0, args='{"a":1}')), header, chunk(tc(0, args='{"a":2}')), header, ending])
    assert calls_of(two) == [("call_0_0", "f", '{"a":1}', True), ("call_0_1", "f", '{"a":2}', True)]
    assert "index_reused" in kinds(two) and "invalid_arguments" not in kinds(two)
    unindexed = run(
        [
            chunk(tc(None, name="f", args='{"a":1}')),
            chunk(tc(None, name="f", args="")),
            chunk(tc(None, args='{"a":2}')),
        ]
    )
    assert [c.arguments for c in unindexed.tool_calls] == ['{"a":1}', '{"a":2}']
    repeater = run(
        [
            chunk(tc(0, name="f", args='{"a"')),
            chunk(tc(0, name="f", args=":1}")),
            chunk(tc(0, name="f", args=" ")),
        ]
    )
    assert calls_of(repeater) == [("call_0_0", "f", '{"a":1} ', True)]


@pytest.mark.parametrize("finish", ["stop", "tool_calls", "length"])
@pytest.mark.parametrize("listening", [False, True])
def test_a_new_call_after_the_finish_reason_is_reported_at_its_chunk_on_either_path(
    finish: str, listening: bool
) -> None:
    """A call header after the choice's finish_reason (the fast path used to take it silently when no
    listener was set): kept, as everything the model sent, and reported as `late_delta` naming its
    chunk, with and without a listener alike."""
    stream = [
        chunk(content="All done."),
        chunk(finish=finish),
        chunk(tc(0, "call_x", "delete_all", "{}")),
    ]
    acc = ChatCompletionAccumulator(listener=[].append if listening else None)
    for c in stream:
        acc.feed(c)
    r = acc.finish()
    late = [f for f in r.findings if f.kind == "late_delta"]
    assert len(late) == 1 and late[0].chunk_index == 2 and "after choice 0's finish_reason" in late[0].message
    assert [c.tool_call_id for c in r.tool_calls] == ["call_x"]


def test_a_listener_that_raises_loses_nothing_of_the_stream() -> None:
    """A listener's exception propagates (its own bug, not hidden), but the accumulator keeps what the
    chunk carried: raising on `CallStarted` does not lose the header's arguments, and raising on
    `CallFinished` does not lose the response (`finish()` again returns it)."""

    class Boom(Exception):
        pass

    def raising_on(kind: type) -> object:
        def listener(event: object) -> None:
            if type(event) is kind:
                raise Boom(kind.__name__)

        return listener

    stream = [chunk(tc(0, "call_a", "write", '{"path": "/tmp/x"}')), chunk(finish="tool_calls")]
    acc = ChatCompletionAccumulator(listener=raising_on(CallStarted))
    with pytest.raises(Boom):
        acc.feed(stream[0])
    acc.feed(stream[1])
    r = acc.finish()
    assert r.tool_calls[0].arguments == '{"path": "/tmp/x"}' and r.tool_calls[0].complete
    assert "empty_arguments" not in kinds(r)

    acc = ChatCompletionAccumulator(listener=raising_on(CallFinished))
    for c in stream:
        acc.feed(c)
    with pytest.raises(Boom):
        acc.finish()
    again = acc.finish()
    assert [c.arguments for c in again.tool_calls] == ['{"path": "/tmp/x"}']


def test_a_listener_that_is_not_callable_is_refused_when_given() -> None:
    with pytest.raises(UsageError, match="a listener is a function"):
        ChatCompletionAccumulator(listener=42)  # type: ignore[arg-type]
    acc = ChatCompletionAccumulator()
    with pytest.raises(UsageError, match="a listener is a function"):
        acc.listener = "x"  # type: ignore[assignment]
    assert acc.listener is None


def test_every_arguments_delta_comes_after_its_calls_call_started() -> None:
    """A call entry of an unknown type and the legacy `function_call` field: the listener hears
    `CallStarted` before the call's first `ArgumentsDelta` (the unknown type's came with none)."""
    unknown = {"index": 0, "id": "c1", "type": "mystery", "mystery": {"input": "x"}}
    legacy = {
        "id": "r",
        "choices": [{"index": 0, "delta": {"function_call": {"name": "f", "arguments": "{}"}}}],
    }
    for stream in ([chunk(unknown), chunk(finish="tool_calls")], [legacy, chunk(finish="function_call")]):
        events: list[object] = []
        acc = ChatCompletionAccumulator(listener=events.append)
        for c in stream:
            acc.feed(c)
        acc.finish()
        started: set[int] = set()
        for e in events:
            if isinstance(e, CallStarted):
                started.add(e.call_index)
            elif isinstance(e, ArgumentsDelta):
                assert e.call_index in started, events
        assert any(isinstance(e, ArgumentsDelta) for e in events), events


@pytest.mark.parametrize("raised", [RuntimeError, KeyboardInterrupt])
def test_a_listener_that_raises_mid_chunk_loses_nothing_of_that_chunk(raised: type) -> None:
    """What the listener raises is held until the chunk is read: the chunk's other calls, its text and
    its finish reason are all kept, then the exception comes out of `feed`."""

    def listener(event: object) -> None:
        if isinstance(event, CallStarted) and event.call_index == 0:
            raise raised("the listener's bug")

    both = [
        tc(0, "a", "f", "{}"),
        tc(1, "b", "rm", '{"p":1}'),
    ]
    acc = ChatCompletionAccumulator(listener=listener)
    with pytest.raises(raised):
        acc.feed(chunk(*both, content="hi", finish="tool_calls"))
    r = acc.finish()
    assert [c.tool_call_id for c in r.tool_calls] == ["a", "b"]
    assert (r.choices[0].content, r.choices[0].finish_reason, kinds(r)) == ("hi", "tool_calls", [])


def test_a_call_the_listener_never_heard_start_is_announced_before_it_finishes() -> None:
    """A listener set after a call's last delta, and a call made by a delta with nothing but an index:
    each gets its CallStarted (at `finish`) before its CallFinished, once."""
    late = ChatCompletionAccumulator()
    late.feed(chunk(tc(0, "a", "f", '{"x":1}')))
    events: list[object] = []
    late.listener = events.append
    late.feed(chunk(finish="tool_calls"))
    late.finish()
    assert [type(e).__name__ for e in events] == ["CallStarted", "CallFinished"]

    events = []
    bare = ChatCompletionAccumulator(listener=events.append)
    bare.feed(chunk({"index": 0, "function": {"arguments": ""}}))
    bare.feed(chunk(finish="tool_calls"))
    r = bare.finish()
    assert len(r.tool_calls) == 1
    assert [type(e).__name__ for e in events] == ["CallStarted", "CallFinished"]


def test_a_new_call_after_the_finish_is_named_as_new_in_its_finding() -> None:
    acc = ChatCompletionAccumulator()
    for c in (chunk(finish="stop"), chunk(tc(0, "call_x", "delete_all", "{}"))):
        acc.feed(c)
    (late,) = [f for f in acc.finish().findings if f.kind == "late_delta"]
    assert late.tool_call_id == "call_x" and "a new tool call call_x (call 0)" in late.message


@pytest.mark.parametrize(
    ("entry", "raw"),
    [
        ({"type": "custom", "function": {"name": "weather", "arguments": '{"x":1}'}}, "function"),
        ({"type": "function", "custom": {"name": "weather", "input": "abc"}}, "custom"),
    ],
)
def test_a_call_whose_payload_sits_under_the_other_types_key_is_kept_raw_and_reported(
    entry: dict, raw: str
) -> None:
    """The type names one key and the payload sits under the other: it is not read as either (its
    name and arguments were dropped), but kept raw as the call's text, reported as
    `unknown_call_type`, the call never run; streamed and whole alike."""
    streamed = ChatCompletionAccumulator()
    streamed.feed(chunk({"index": 0, "id": "c1", **entry}))
    streamed.feed(chunk(finish="tool_calls"))
    body = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "tool_calls": [{"id": "c1", **entry}]},
            }
        ]
    }
    for r in (streamed.finish(), parse_chat_completion(body)):
        (call,) = r.tool_calls
        assert json.loads(call.arguments) == entry[raw] and not call.complete
        (found,) = [f for f in r.findings if f.kind == "unknown_call_type"]
        assert f"payload is under `{raw}`" in found.message

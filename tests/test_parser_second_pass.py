"""Issue 10, second pass: one regression test per problem a fresh-eyes tester found in the parser
(numbered as in the report: real bugs 1-14, the two gaps, the nitpicks). Bytes are written here."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.streams import chunk, sse_body, tc
from toolcall_lab.cli import main
from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import ProviderStreamError, UnknownFormatError, UsageError, WireFormatError
from toolcall_lab.formats import (
    AnthropicStreamAccumulator,
    ChatCompletionAccumulator,
    ResponsesStreamAccumulator,
    iter_responses,
    iter_sse_payloads,
    parse_body,
    parse_chat_completion,
    read_recording,
)
from toolcall_lab.formats.base import (
    FINDINGS_PER_KIND,
    ArgumentsDelta,
    CallFinished,
    CallStarted,
    StreamEvent,
)
from toolcall_lab.loop import run
from toolcall_lab.tools import ToolRegistry

HEADER_A = chunk(tc(0, "call_a", "get_weather", ""))
ARGS_A = chunk(tc(0, args='{"city":"Oslo"}'))
HEADER_B = chunk(tc(1, "call_b", "get_time", ""))
FINISH = chunk(finish="tool_calls")


def feed(chunks: list[Any], **kw: Any) -> Any:
    acc = ChatCompletionAccumulator(**kw)
    for c in chunks:
        acc.feed(c)
    return acc.finish()


def calls(response: Any) -> list[tuple[str, str, str, bool]]:
    return [(c.tool_call_id, c.name, c.arguments, c.complete) for c in response.tool_calls]


def kinds(response: Any) -> list[str]:
    return [f.kind for f in response.findings]


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


# -- 1. an empty argument string is not "{}" when the stream did not end normally ---------------
@pytest.mark.parametrize("empty", ["", None])
def test_1_a_call_cut_after_its_header_is_incomplete(empty: str | None) -> None:
    header_b = chunk(tc(1, "call_b", "get_time", empty))
    r = feed([HEADER_A, ARGS_A, header_b])  # no finish_reason, no [DONE]
    assert calls(r) == [
        ("call_a", "get_weather", '{"city":"Oslo"}', True),  # complete JSON proves itself
        ("call_b", "get_time", "", False),
    ]
    assert "incomplete_arguments" in kinds(r) and "empty_arguments" not in kinds(r)
    said = next(f.message for f in r.findings if f.kind == "incomplete_arguments")
    assert "no arguments arrived before the stream ended without a finish reason" in said
    # the same call after a finish reason is a tool without parameters, read as {}, and says so
    done = feed([HEADER_A, ARGS_A, header_b, FINISH])
    assert calls(done)[1] == ("call_b", "get_time", "", True) and "empty_arguments" in kinds(done)
    # at the token limit an empty argument string is a cut, not {}
    cut = feed([HEADER_A, ARGS_A, header_b, chunk(finish="length")])
    assert calls(cut)[1][3] is False


def test_1_anthropic_and_responses_calls_cut_before_arguments_are_incomplete() -> None:
    acc = AnthropicStreamAccumulator()
    acc.feed({"type": "message_start", "message": {"id": "m", "model": "c"}})
    acc.feed(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "write_file", "input": {}},
        }
    )
    r = acc.finish()
    assert calls(r) == [("t1", "write_file", "", False)] and "incomplete_arguments" in kinds(r)
    acc = ResponsesStreamAccumulator()
    item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": ""}
    acc.feed({"type": "response.output_item.added", "output_index": 0, "item": item})
    r = acc.finish()
    assert calls(r) == [("c1", "f", "", False)] and "incomplete_arguments" in kinds(r)
    custom = ResponsesStreamAccumulator()  # free-form input: only the item's end says it is whole
    custom.feed(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "custom_tool_call", "id": "ct", "call_id": "c2", "name": "sql", "input": "SEL"},
        }
    )
    assert custom.finish().tool_calls[0].complete is False


def test_1_new_id_and_name_on_every_fragment_is_one_call() -> None:
    r = feed(
        [
            chunk(tc(0, "c1", "get_weather", "")),
            chunk(tc(0, "c2", "get_weather", '{"city":')),
            chunk(tc(0, "c3", "get_weather", '"Oslo"}')),
            FINISH,
        ]
    )
    assert calls(r) == [("c1", "get_weather", '{"city":"Oslo"}', True)]
    assert {"id_changed", "repeated_header"} <= set(kinds(r)) and "index_reused" not in kinds(r)
    # Ollama: a different id with a different name is a new call, even before the first is done
    ollama = feed([chunk(tc(0, "a", "f", '{"x":1}')), chunk(tc(0, "b", "g", "{}")), FINISH])
    assert [c[:2] for c in calls(ollama)] == [("a", "f"), ("b", "g")]


class _Chunks:
    """A model that streams given chat chunks, one list per round (for the run loop)."""

    name = "chunks"

    def __init__(self, *rounds: list[dict[str, Any]]) -> None:
        self.rounds = list(rounds)

    async def stream(self, request: Any) -> Any:
        for payload in self.rounds.pop(0):
            yield payload


def test_1_the_run_loop_never_executes_a_call_cut_before_its_arguments() -> None:
    ran: list[str] = []
    tools = ToolRegistry()

    @tools.register()
    async def get_weather(city: str = "?") -> str:
        """Weather."""
        ran.append(f"get_weather({city})")
        return "sunny"

    @tools.register()
    async def get_time(tz: str = "?") -> str:
        """Time."""
        ran.append(f"get_time({tz})")
        return "noon"

    answer = [chunk(content="done"), chunk(finish="stop")]
    result = run_virtual(run(_Chunks([HEADER_A, ARGS_A, HEADER_B], answer), tools, "q", max_rounds=3))
    assert ran == ["get_weather(Oslo)"]  # get_time was never run with its defaults
    (first, *_) = result.rounds
    assert "incomplete_arguments" in [f.kind for f in first.findings]


# -- 2. one bad interaction costs only itself ------------------------------------------------------
def _cassette(bodies: list[tuple[str, bytes | str]]) -> str:
    import base64

    lines = ["interactions:"]
    for encoding, body in bodies:
        lines += [
            "- request:",
            "    body: '{}'",
            "    method: POST",
            "    uri: https://x/v1/chat/completions",
        ]
        lines += ["  response:", "    body:"]
        if isinstance(body, bytes):
            lines += ["      string: !!binary |", "        " + base64.b64encode(body).decode()]
        else:
            lines += [f"      string: {json.dumps(body)}"]
        lines += ["    headers:", "      Content-Type:", "      - text/event-stream"]
        if encoding:
            lines += ["      Content-Encoding:", f"      - {encoding}"]
        lines += ["    status:", "      code: 200", "      message: OK"]
    return "\n".join([*lines, "version: 1", ""])


GOOD = sse_body([HEADER_A, ARGS_A, HEADER_B, chunk(tc(1, args="{}")), FINISH]).decode()
BAD_BODIES = {
    "not gzip": ("gzip", b'{"plain": "text"}'),
    "not UTF-8 after gzip": ("gzip", gzip.compress(b'data: {"choices": [\xff]}\n\n')),
    "truncated JSON": ("", '{"id": "x", "choices": ['),
    "unknown shape": ("", '{"foo": 1}'),
    "data that is not JSON": ("", "data: {oops\n\n"),
}


@pytest.mark.parametrize("bad", list(BAD_BODIES))
def test_2_a_bad_interaction_costs_only_itself(tmp_path: Path, capsys: Any, bad: str) -> None:
    path = write(tmp_path, "c.yaml", _cassette([("", GOOD), BAD_BODIES[bad], ("", GOOD)]))
    kept = read_recording(path).parse(errors="keep")
    assert len(kept) == 3 and [len(r.tool_calls) for r in (kept[0], kept[2])] == [2, 2]
    assert kept[1].error and kept[1].error.startswith("unreadable data: interaction 1")
    assert "unreadable_data" in kinds(kept[1])
    streamed = list(iter_responses(path, errors="keep"))
    assert [r.to_dict() for r in streamed] == [r.to_dict() for r in kept]
    with pytest.raises(WireFormatError) as info:
        read_recording(path).parse()
    assert "interaction 1" in str(info.value)
    assert len(info.value.partial_responses) >= 1 and info.value.partial_responses[0].tool_calls
    code, doc, err = cli(capsys, "parse", str(path))
    assert code == 2 and len(doc["responses"]) == 3 and "response 1 holds unreadable data" in err


def test_2_the_iterator_yields_what_comes_before_a_bad_interaction(tmp_path: Path) -> None:
    path = write(tmp_path, "c.yaml", _cassette([("", GOOD), BAD_BODIES["not gzip"]]))
    it = iter_responses(path)
    assert len(next(it).tool_calls) == 2  # read before the bad interaction raises
    with pytest.raises(UnknownFormatError, match="interaction 1: the body does not decompress as gzip"):
        next(it)


def test_2_an_exchange_list_keeps_its_good_exchanges(tmp_path: Path) -> None:
    good = {"response": {"status": 200, "body": {"string": GOOD}}}
    bad = {"response": {"status": 200, "body": {"string": '{"foo": 1}'}}}
    path = write(tmp_path, "x.json", json.dumps([good, bad, "not an exchange", good]))
    kept = read_recording(path).parse(errors="keep")
    assert [bool(r.error) for r in kept] == [False, True, True, False]
    assert kept[1].error and "exchange 1: cannot tell the wire format" in kept[1].error


def test_2_invalid_utf8_in_a_cassette_is_replaced_as_in_an_sse_file(tmp_path: Path) -> None:
    body = GOOD.encode().replace(b"Oslo", b"Osl\xff")
    (r,) = read_recording(write(tmp_path, "c.yaml", _cassette([("", body)]))).parse()
    (sse,) = read_recording(write(tmp_path, "c.sse", body)).parse()
    assert calls(r) == calls(sse) and r.tool_calls[0].arguments == '{"city":"Osl\ufffd"}'
    assert "invalid_utf8" in kinds(r) and "invalid_utf8" in kinds(sse)


# -- 3. OpenRouter's per-choice error object -----------------------------------------------------
OPENROUTER_ERROR = {
    "id": "gen-1",
    "object": "chat.completion.chunk",
    "choices": [
        {
            "index": 0,
            "delta": {"content": ""},
            "finish_reason": "error",
            "error": {"code": 502, "message": "Upstream provider returned 502"},
        }
    ],
}


def test_3_the_per_choice_error_message_is_quoted() -> None:
    acc = ChatCompletionAccumulator()
    acc.feed(HEADER_A)
    with pytest.raises(ProviderStreamError, match="Upstream provider returned 502") as info:
        acc.feed(OPENROUTER_ERROR)
    assert info.value.partial_responses[0].tool_calls[0].complete is False
    body = {**OPENROUTER_ERROR, "object": "chat.completion"}
    body["choices"] = [{**OPENROUTER_ERROR["choices"][0], "message": {"role": "assistant"}}]
    del body["choices"][0]["delta"]
    with pytest.raises(ProviderStreamError, match="Upstream provider returned 502"):
        parse_chat_completion(body)
    with pytest.raises(ProviderStreamError, match="Upstream provider returned 502"):
        list(iter_sse_payloads(sse_body([OPENROUTER_ERROR])))


def test_3_a_per_choice_error_without_a_finish_reason_still_ends_the_stream() -> None:
    """The error object alone is the signal (a fast path that only looked at it when a finish reason
    came would let the calls before it run)."""
    choice = {k: v for k, v in OPENROUTER_ERROR["choices"][0].items() if k != "finish_reason"}
    for delta in ({}, {"content": "x"}, {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}):
        acc = ChatCompletionAccumulator()
        acc.feed(HEADER_A)
        with pytest.raises(ProviderStreamError, match="Upstream provider returned 502") as info:
            acc.feed({**OPENROUTER_ERROR, "choices": [{**choice, "delta": delta}]})
        assert info.value.partial_responses[0].tool_calls[0].complete is False


# -- 4. same id, a new name, after complete arguments ---------------------------------------------
def test_4_same_id_and_a_new_name_after_complete_arguments_is_a_new_call() -> None:
    r = feed([chunk(tc(0, "c1", "f", '{"a": 1}')), chunk(tc(0, "c1", "g", "{}")), FINISH])
    assert calls(r) == [("c1", "f", '{"a": 1}', True), ("c1", "g", "{}", True)]
    assert "index_reused" in kinds(r) and "split_name" not in kinds(r)
    # the same id with a longer snapshot of the name is still that call
    grown = feed([chunk(tc(0, "c1", "web", '{"q": 1}')), chunk(tc(0, "c1", "web_search", "")), FINISH])
    assert calls(grown) == [("c1", "web_search", '{"q": 1}', True)] and "split_name" in kinds(grown)


# -- 5. an `output` key is not enough to be a Responses body --------------------------------------
@pytest.mark.parametrize(
    ("body", "hint"),
    [
        (
            {
                "output": {
                    "message": {"content": [{"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}]}
                },
                "stopReason": "tool_use",
            },
            "Bedrock Converse",
        ),
        ({"id": "x", "output": ["hello"], "status": "succeeded"}, "keys"),
        ({"output": "hello"}, "keys"),
        ({"output": []}, "keys"),
    ],
)
def test_5_bodies_with_an_output_key_of_another_shape_are_refused(
    tmp_path: Path, capsys: Any, body: dict[str, Any], hint: str
) -> None:
    with pytest.raises(UnknownFormatError, match=hint):
        parse_body(body)
    code, doc, err = cli(capsys, "parse", str(write(tmp_path, "b.json", json.dumps(body))))
    assert code == 2 and doc is None and "cannot tell the wire format" in err


def test_5_a_responses_body_without_its_object_field_is_still_read() -> None:
    item = {"type": "function_call", "id": "fc", "call_id": "c1", "name": "f", "arguments": "{}"}
    r = parse_body({"id": "resp_1", "status": "completed", "output": [item]})
    assert r.format == "openai-responses" and calls(r) == [("c1", "f", "{}", True)]


# -- 6. a saved chunk as a body --------------------------------------------------------------------
def test_6_a_chunk_saved_as_a_body_is_read_as_a_stream_of_one_chunk(tmp_path: Path) -> None:
    saved = chunk(tc(0, "call_a", "get_weather", '{"city":"Oslo"}'), finish="tool_calls")
    r = parse_body(saved)
    assert calls(r) == [("call_a", "get_weather", '{"city":"Oslo"}', True)] and "chunk_as_body" in kinds(r)
    cut = parse_body(chunk(tc(0, "call_a", "get_weather", "")))  # no finish reason: nothing says {}
    assert calls(cut) == [("call_a", "get_weather", "", False)]
    body_with_delta = {**saved, "object": "chat.completion"}
    (read,) = read_recording(write(tmp_path, "b.json", json.dumps(body_with_delta))).parse()
    assert calls(read) == calls(r)
    direct = parse_chat_completion(body_with_delta)  # the body parser alone says why it sees no calls
    assert direct.tool_calls == () and any("`delta`, not `message`" in f.message for f in direct.findings)


# -- 7 and 14. linear time and bounded memory (work counted, not timed) ---------------------------
def test_7_many_data_lines_in_one_event_are_joined_once() -> None:
    lines = 50_000
    body = (
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],\n'
        + b'data: "pad": [\n'
        + b"data: 1,\n" * lines
        + b"data: 1]}\n\n"
    )
    (payload,) = iter_sse_payloads(body)
    assert len(payload["pad"]) == lines + 1


def test_14_the_cli_output_does_not_grow_with_the_number_of_responses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracemalloc

    one = sse_body([HEADER_A, ARGS_A, FINISH])

    class Null(io.RawIOBase):  # stdout that keeps nothing
        def writable(self) -> bool:
            return True

        def write(self, data: Any) -> int:
            return len(data)

    def peak(responses: int) -> int:
        path = write(tmp_path, f"many{responses}.sse", one * responses)
        for module in ("toolcall_lab.formats.sse", "toolcall_lab.formats.recordings"):
            monkeypatch.setattr(f"{module}.READ_SIZE", 1 << 14)  # files larger than one read
        monkeypatch.setattr("sys.stdout", io.TextIOWrapper(io.BufferedWriter(Null()), encoding="utf-8"))
        tracemalloc.start()
        try:
            assert main(["parse", str(path)]) == 0
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            monkeypatch.undo()

    peak(20)  # (imports and caches first)
    small, large = peak(300), peak(3_000)
    assert large - small < 300_000  # 2,700 more responses: ~100 bytes each at most (they were ~8 KB)


# -- 8. [DONE] with any whitespace ------------------------------------------------------------------
@pytest.mark.parametrize("done", [b"data:  [DONE]", b"data:\t[DONE]", b"data: [DONE] ", b"data:[DONE]"])
def test_8_the_end_marker_with_any_whitespace(tmp_path: Path, done: bytes) -> None:
    body = sse_body([HEADER_A, ARGS_A, FINISH], done=False) + done + b"\n\n"
    (r,) = read_recording(write(tmp_path, "d.sse", body)).parse()
    assert calls(r) == [("call_a", "get_weather", '{"city":"Oslo"}', True)]
    assert "unreadable_data" not in kinds(r) and "sse_unterminated_event" not in kinds(r)


# -- 9. the conformance command never shows a traceback --------------------------------------------
def test_9_unusable_case_files_are_failed_cases(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "broken.expect.json").write_text("{not json")
    (tmp_path / "broken.sse").write_bytes(sse_body([HEADER_A, ARGS_A, FINISH]))
    (tmp_path / "lonely.expect.json").write_text(
        json.dumps({"quirk": "q", "category": "c", "provider": "p", "models": "m", "expect": {}})
    )
    good = {"quirk": "q", "category": "c", "provider": "p", "models": "m", "expect": {"responses": [{}]}}
    (tmp_path / "fine.expect.json").write_text(json.dumps(good))
    (tmp_path / "fine.sse").write_bytes(sse_body([chunk(content="hi"), chunk(finish="stop")]))
    code = main(["conformance", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 1 and "1/3 cases pass" in out and "Traceback" not in out + err
    assert "broken: " in err and "not JSON" in err and "lonely: " in err and "found 0" in err


# -- 10. a surrogate pair split across Responses deltas ---------------------------------------------
def test_10_a_split_surrogate_pair_is_not_an_arguments_mismatch() -> None:
    acc = ResponsesStreamAccumulator()
    item = {"type": "function_call", "id": "fc", "call_id": "c1", "name": "say", "arguments": ""}
    acc.feed({"type": "response.output_item.added", "output_index": 0, "item": item})
    for piece in ('{"t": "a\ud83d', '\ude00b"}'):
        acc.feed({"type": "response.function_call_arguments.delta", "item_id": "fc", "delta": piece})
    final = {**item, "arguments": '{"t": "a\U0001f600b"}'}
    acc.feed({"type": "response.output_item.done", "output_index": 0, "item": final})
    acc.feed({"type": "response.completed", "response": {"status": "completed", "output": [final]}})
    r = acc.finish()
    assert r.tool_calls[0].arguments == '{"t": "a\U0001f600b"}'
    assert "split_surrogate_pair" in kinds(r) and "arguments_mismatch" not in kinds(r)


# -- 11. provider error signals never dropped ------------------------------------------------------
@pytest.mark.parametrize(
    "tail", [b"event: error\n\n", b"event: error\ndata:\n\n", b"event: error", b'error: {"message": "x"}\n\n']
)
def test_11_error_events_without_data_end_the_stream(tmp_path: Path, tail: bytes) -> None:
    body = sse_body([HEADER_A, ARGS_A], done=False) + tail
    (r,) = read_recording(write(tmp_path, "e.sse", body)).parse(errors="keep")
    assert r.error and calls(r) == [("call_a", "get_weather", '{"city":"Oslo"}', False)]


def test_11_a_raw_error_line_mid_stream_is_the_provider_error(tmp_path: Path) -> None:
    body = (
        sse_body([HEADER_A, ARGS_A, HEADER_B], done=False) + b'{"error":{"message":"upstream overloaded"}}\n'
    )
    (r,) = read_recording(write(tmp_path, "e.sse", body)).parse(errors="keep")
    assert r.error == "upstream overloaded" and [c[3] for c in calls(r)] == [False, False]
    assert {"sse_raw_json", "provider_error"} <= set(kinds(r))
    with pytest.raises(ProviderStreamError, match="upstream overloaded"):
        read_recording(write(tmp_path, "e.sse", body)).parse()


def test_11_stray_text_is_reported_and_findings_per_kind_are_bounded(tmp_path: Path) -> None:
    stray = b"<html>502</html>\n" * (FINDINGS_PER_KIND + 5)
    body = stray + sse_body([HEADER_A, ARGS_A, FINISH])
    (r,) = read_recording(write(tmp_path, "s.sse", body)).parse()
    assert kinds(r).count("sse_stray_text") == FINDINGS_PER_KIND + 1  # 20 listed, then a count
    assert "5 more finding(s)" in r.findings[FINDINGS_PER_KIND].message


# -- 12. JSON lines whose first line kept its `data:` prefix ---------------------------------------
def test_12_jsonl_with_a_data_prefix_on_the_first_line_loses_no_payload(tmp_path: Path) -> None:
    lines = [json.dumps(p) for p in (HEADER_A, ARGS_A, HEADER_B, chunk(tc(1, args="{}")), FINISH)]
    for name, text in {
        "a.chunks.jsonl": "data: " + "\n".join(lines) + "\n",
        "b.chunks.jsonl": "\n".join(lines[:2]) + "\ndata: " + "\ndata: ".join(lines[2:]) + "\n",
    }.items():
        (r,) = read_recording(write(tmp_path, name, text)).parse()
        assert [c[:2] for c in calls(r)] == [("call_a", "get_weather"), ("call_b", "get_time")], name
        assert r.first.finish_reason == "tool_calls"


# -- 13. stream events: once per call, with the id and name, consistent with the result ------------
def _events(chunks: list[dict[str, Any]]) -> tuple[list[StreamEvent], Any]:
    events: list[StreamEvent] = []
    acc = ChatCompletionAccumulator(listener=events.append)
    for c in chunks:
        acc.feed(c)
    return events, acc.finish()


STREAMS = {
    "two calls": [HEADER_A, ARGS_A, HEADER_B, chunk(tc(1, args="{}")), FINISH],
    "split name": [chunk(tc(0, "a", "get_", "")), chunk(tc(0, name="weather", args="{}")), FINISH],
    "late id": [chunk(tc(0, None, "f", '{"x":')), chunk(tc(0, "late", None, "1}")), FINISH],
    "no index": [chunk(tc(None, "a", "f", "{}")), chunk(tc(None, "b", "g", "{}")), FINISH],
    "parked name": [
        chunk(tc(0, None, "f", '{"x":1}')),
        chunk(tc(0, None, "f", " ")),
        chunk(tc(0, None, None, '{"x":2}')),
        FINISH,
    ],
    "legacy": [
        chunk(),
        {**chunk(), "choices": [{"index": 0, "delta": {"function_call": {"name": "f", "arguments": "{}"}}}]},
        FINISH,
    ],
}


@pytest.mark.parametrize("name", list(STREAMS))
def test_13_call_started_once_per_call_with_what_is_known(name: str) -> None:
    events, response = _events(STREAMS[name])
    started = [e for e in events if isinstance(e, CallStarted)]
    finished = [e.call for e in events if isinstance(e, CallFinished)]
    assert len(started) == len(finished) == len(response.tool_calls)
    for event in started:
        later = [e for e in events[events.index(event) :] if isinstance(e, ArgumentsDelta)]
        assert all(d.call_index == event.call_index for d in later if d.call_index == event.call_index)
    for call in finished:
        deltas = [e.delta for e in events if isinstance(e, ArgumentsDelta) and e.call_index == call.index]
        assert "".join(deltas) == call.arguments  # the deltas of a call are its arguments
        first_delta = next(
            (i for i, e in enumerate(events) if isinstance(e, ArgumentsDelta) and e.call_index == call.index),
            None,
        )
        start = next(
            i for i, e in enumerate(events) if isinstance(e, CallStarted) and e.call_index == call.index
        )
        assert first_delta is None or start < first_delta
    if name == "two calls":
        assert [(e.tool_call_id, e.name) for e in started] == [
            ("call_a", "get_weather"),
            ("call_b", "get_time"),
        ]


# -- gap: Gemini's error bodies are JSON arrays ----------------------------------------------------
GEMINI = [{"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}}]


def test_gap_a_gemini_error_array_is_a_provider_error_everywhere(tmp_path: Path, capsys: Any) -> None:
    for name, data in {
        "g.json": json.dumps(GEMINI, indent=2),
        "g.sse": "data: " + json.dumps(GEMINI) + "\n\n",
        "g.yaml": _cassette([("", json.dumps(GEMINI))]),
        "g2.sse": "[{\n" + json.dumps(GEMINI[0], indent=2)[1:] + "\n]\n",
    }.items():
        (r,) = read_recording(write(tmp_path, name, data)).parse(errors="keep")
        assert r.error and "Resource has been exhausted" in r.error, name
        code, _, err = cli(capsys, "parse", str(tmp_path / name))
        assert code == 1 and "Resource has been exhausted" in err, name


# -- gap: the choice-0 rule is stated by a finding the run loop records ----------------------------
def test_gap_other_choices_are_reported_where_the_loop_reads_choice_0() -> None:
    second = {**chunk(tc(0, "c1", "get_time", "{}")), "choices": []}
    second["choices"] = [
        {"index": 1, "delta": {"tool_calls": [tc(0, "c1", "get_time", "{}")]}, "finish_reason": None}
    ]
    r = feed([chunk(tc(0, "c0", "get_weather", "{}")), second, FINISH])
    assert [c.tool_call_id for c in r.tool_calls] == ["c0"] and len(r.choices) == 2
    (note,) = [f for f in r.findings if f.kind == "extra_choices"]
    assert "choice 1: 1 call(s)" in note.message
    body = parse_chat_completion(
        {
            "choices": [
                {"index": 1, "message": {"content": "b"}, "finish_reason": "stop"},
                {"index": 0, "message": {"content": "a"}, "finish_reason": "stop"},
            ]
        }
    )
    assert body.first.content == "a" and "extra_choices" in kinds(body)  # sorted: choice 0 first
    answer = [chunk(content="done"), chunk(finish="stop")]
    result = run_virtual(run(_Chunks([chunk(tc(0, "c0", "f", "{}")), second, FINISH], answer), None, "q"))
    assert "extra_choices" in [f.kind for f in result.rounds[0].findings]


# -- the fallback id never repeats a provider id (at the source) -----------------------------------
def test_fallback_ids_do_not_collide_with_provider_ids() -> None:
    r = feed([chunk(tc(0, "call_0_1", "f", "{}")), chunk(tc(1, None, "g", "{}")), FINISH])
    assert [(c.tool_call_id, c.id_source) for c in r.tool_calls] == [
        ("call_0_1", "provider"),
        ("call_0_1_1", "fallback"),
    ]
    note = next(f for f in r.findings if f.kind == "missing_id")
    assert "'call_0_1' is another call's id" in note.message
    body = parse_chat_completion(
        {
            "choices": [
                {
                    "message": {
                        "tool_calls": [
                            {"function": {"name": "f", "arguments": "{}"}},
                            {"id": "call_0_0", "function": {"name": "g", "arguments": "{}"}},
                        ]
                    }
                }
            ]
        }
    )
    assert len({c.tool_call_id for c in body.tool_calls}) == 2


# -- nitpicks ----------------------------------------------------------------------------------------
def test_nit_content_filter_and_refusal_mark_calls_incomplete() -> None:
    r = feed([HEADER_A, ARGS_A, chunk(finish="content_filter")])
    assert calls(r)[0][3] is False and "filtered_finish" in kinds(r)
    from toolcall_lab.formats import parse_anthropic_message

    body = {
        "type": "message",
        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}],
        "stop_reason": "refusal",
    }
    m = parse_anthropic_message(body)
    assert calls(m) == [("t", "f", '{"a":1}', False)] and "filtered_finish" in kinds(m)


def test_nit_repairs_say_so() -> None:
    snapshot = feed(
        [
            chunk(tc(0, "c", "get", "")),
            chunk(tc(0, name="get_wea")),
            chunk(tc(0, name="get_weather", args="{}")),
            FINISH,
        ]
    )
    assert snapshot.tool_calls[0].name == "get_weather" and "snapshots" in " ".join(
        f.message for f in snapshot.findings
    )
    numeric = feed([chunk({"index": 0, "id": 5, "function": {"name": "f", "arguments": "{}"}}), FINISH])
    assert (
        numeric.tool_calls[0].tool_call_id == "5"
        and "is a number, not a string" in numeric.findings[0].message
    )
    negative = feed([chunk(tc(-1, "c", "f", "{}")), FINISH])
    assert (
        negative.tool_calls[0].index == 0
        and "is negative; numbered as call 0" in negative.findings[0].message
    )
    for odd in (1.5, True):
        r = feed([chunk({"index": odd, "id": "c", "function": {"name": "f", "arguments": "{}"}}), FINISH])
        assert "is not an integer" in r.findings[0].message and "missing_index" not in kinds(r)


def test_nit_feed_after_finish_is_refused_and_finish_is_repeatable() -> None:
    acc = ChatCompletionAccumulator()
    acc.feed(HEADER_A)
    first = acc.finish()
    assert acc.finish() is first
    with pytest.raises(UsageError, match="after the stream was finished"):
        acc.feed(ARGS_A)
    assert isinstance(acc, ChatCompletionAccumulator)


def test_nit_anthropic_start_input_and_late_deltas_are_reported() -> None:
    def stream(*events: dict[str, Any]) -> Any:
        acc = AnthropicStreamAccumulator()
        for e in events:
            acc.feed(e)
        return acc.finish()

    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {"x": 1}},
    }

    def delta(s: str) -> dict[str, Any]:
        return {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": s},
        }

    stop = {"type": "content_block_stop", "index": 0}
    end = {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}
    both = stream(start, delta('{"a":1}'), stop, end)
    assert both.tool_calls[0].arguments == '{"a":1}' and "arguments_mismatch" in kinds(both)
    same = stream(start, delta('{"x": 1}'), stop, end)
    assert "arguments_mismatch" not in kinds(same)
    late = stream(
        {**start, "content_block": {**start["content_block"], "input": {}}},
        delta('{"a":'),
        stop,
        delta("1}"),
        end,
    )
    assert late.tool_calls[0].arguments == '{"a":1}' and "late_delta" in kinds(late)


def test_nit_surrogates_in_names_and_ids() -> None:
    r = feed([chunk(tc(0, "c\ud800", "f\ud83d", "")), chunk(tc(0, name="\ude00", args="{}")), FINISH])
    (call,) = r.tool_calls
    assert call.name == "f\U0001f600" and call.tool_call_id == "c\ud800"
    assert {"split_surrogate_pair", "lone_surrogate"} <= set(kinds(r))


def test_nit_function_call_and_an_identical_tool_call_count_once() -> None:
    message = {
        "function_call": {"name": "f", "arguments": '{"a":1}'},
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
        ],
    }
    body = parse_chat_completion(
        {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    )
    assert [c.tool_call_id for c in body.tool_calls] == ["call_1"] and "duplicate_legacy_call" in kinds(body)
    streamed = feed([{**chunk(), "choices": [{"index": 0, "delta": message, "finish_reason": None}]}, FINISH])
    assert [c.tool_call_id for c in streamed.tool_calls] == ["call_1"]


def test_nit_responses_calls_missing_from_completed_and_builtin_tools() -> None:
    acc = ResponsesStreamAccumulator()
    item = {"type": "function_call", "id": "fc", "call_id": "c1", "name": "f", "arguments": "{}"}
    acc.feed({"type": "response.output_item.added", "output_index": 0, "item": item})
    acc.feed({"type": "response.output_item.done", "output_index": 0, "item": item})
    acc.feed({"type": "response.completed", "response": {"status": "completed", "output": []}})
    r = acc.finish()
    assert calls(r) == [("c1", "f", "{}", True)] and "not_in_completed" in kinds(r)
    computer = {
        "type": "computer_call",
        "id": "cu",
        "call_id": "c2",
        "status": "completed",
        "action": {"type": "click"},
    }
    b = parse_body({"object": "response", "status": "completed", "output": [computer]})
    assert [(c.name, c.kind, c.arguments) for c in b.tool_calls] == [
        ("computer", "builtin", '{"action":{"type":"click"}}')
    ]


def test_nit_wording_and_exit_codes(tmp_path: Path, capsys: Any) -> None:
    bom = (
        b"data: "
        + json.dumps(FINISH).encode()
        + b"\n\n\xef\xbb\xbfdata: "
        + json.dumps(FINISH).encode()
        + b"\n\n"
    )
    (r, *_) = read_recording(write(tmp_path, "b.sse", bom)).parse()
    assert any("byte order mark" in f.message for f in r.findings)
    empty = write(tmp_path, "e.yaml", "interactions: []\nversion: 1\n")
    code, doc, err = cli(capsys, "parse", str(empty))
    assert code == 2 and doc is None and "holds no interactions" in err
    anthropic = ChatCompletionAccumulator()
    for kind in (
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_stop",
    ):
        anthropic.feed({"type": kind})
    out = anthropic.finish()
    assert "an Anthropic event ('message_start'), not a chat-completion chunk" in out.findings[0].message
    assert [f.kind for f in out.findings] == ["mixed_formats"] * 5  # each reported (capped per kind)

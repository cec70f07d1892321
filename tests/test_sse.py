"""The SSE reader: framing variants, [DONE], provider error events, non-JSON lines."""

from __future__ import annotations

import pytest

from toolcall_lab.exceptions import ProviderStreamError, SSEDecodeError
from toolcall_lab.formats import iter_sse_events, iter_sse_payloads


def test_data_with_and_without_space_and_leading_space() -> None:
    body = ' data: {"a":1}\n\ndata:{"a":2}\r\n\r\nevent: x\nid: 7\ndata: {"a":3}\n\n: comment\n\ndata: [DONE]\n\ndata: {"a":4}\n\n'
    assert [p["a"] for p in iter_sse_payloads(body)] == [1, 2, 3]
    events = list(iter_sse_events(body))
    assert (events[2].event, events[2].id) == ("x", "7")


def test_lines_iterable_of_bytes() -> None:
    lines = [b'data: {"a":', b"", b'data: {"b":2}', b""]
    with pytest.raises(SSEDecodeError, match="line 1"):
        list(iter_sse_payloads(lines))


def test_multiline_data_is_joined() -> None:
    assert list(iter_sse_payloads('data: {"a":\ndata: 1}\n\n')) == [{"a": 1}]


def test_error_event_raises_with_the_provider_message() -> None:
    body = 'data: {"choices":[]}\n\nevent: error\ndata: {"error":{"message":"boom","code":"x"}}\n\n'
    with pytest.raises(ProviderStreamError, match="boom") as info:
        list(iter_sse_payloads(body))
    assert info.value.line_number == 4


def test_error_payload_without_event_line() -> None:
    with pytest.raises(ProviderStreamError, match="overloaded"):
        list(
            iter_sse_payloads(
                'data: {"type":"error","error":{"type":"overloaded_error","message":"overloaded"}}\n\n'
            )
        )


def test_non_json_line_names_its_line_number() -> None:
    with pytest.raises(SSEDecodeError, match="line 3"):
        list(iter_sse_payloads('data: {"a":1}\n\ndata: nope\n\n'))


def test_null_error_field_is_not_an_error() -> None:
    assert list(iter_sse_payloads('data: {"choices":[], "error": null}\n\n')) == [
        {"choices": [], "error": None}
    ]

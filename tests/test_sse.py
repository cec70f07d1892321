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


# -- WHATWG framing (issue 10, item 1) ----------------------------------------------------------
ONE = b'data: {"a":1}\n\n'


def payloads(source, **kw):
    return list(iter_sse_payloads(source, **kw))


def test_bom_only_at_the_start_is_dropped() -> None:
    assert payloads(b"\xef\xbb\xbf" + ONE) == [{"a": 1}]
    assert payloads([b"\xef", b"\xbb", b"\xbf" + ONE], chunked=True) == [{"a": 1}]


def test_cr_lf_and_crlf_end_lines_even_split_between_pieces() -> None:
    for eol in (b"\r", b"\n", b"\r\n"):
        body = ONE.replace(b"\n", eol) + b'data: {"a":2}' + eol + eol
        assert payloads(body) == [{"a": 1}, {"a": 2}]
        pieces = [body[i : i + 1] for i in range(len(body))]  # every boundary, incl. inside CRLF
        assert payloads(pieces, chunked=True) == [{"a": 1}, {"a": 2}]


def test_unicode_line_separators_inside_json_are_text() -> None:
    text = "a\u2028b\u2029c\u0085d"
    body = ('data: {"t":"' + text + '"}\n\n').encode()
    assert payloads(body) == [{"t": text}]
    assert payloads(body.decode()) == [{"t": text}]
    (event,) = iter_sse_events("data: v\x0bf\x0cs\x1cg\u2028\n\n")  # str.splitlines would cut all of these
    assert event.data == "v\x0bf\x0cs\x1cg\u2028"


def test_empty_data_and_data_less_events_carry_no_payload() -> None:
    body = b"data:\n\ndata: \n\nevent: ping\n\nid: 3\n\n" + ONE
    assert payloads(body) == [{"a": 1}]


def test_retry_id_and_comments_are_ignored_and_unknown_fields_reported() -> None:
    findings = []
    body = b'retry: 100\n: keep-alive\nid: 9\nfoo: bar\ndata: {"a":1}\n\n'
    assert payloads(body, findings=findings) == [{"a": 1}]
    assert [f.kind for f in findings] == ["sse_unknown_field"]
    assert "line 4" in findings[0].message


def test_whitespace_before_a_field_is_read_and_reported() -> None:
    findings = []
    assert payloads(b' data: {"a":1}\n\n', findings=findings) == [{"a": 1}]
    assert [f.kind for f in findings] == ["sse_nonstandard_line"]


def test_last_event_without_blank_line_is_read_and_reported() -> None:
    findings = []
    assert payloads(b'data: {"a":1}\n\ndata: {"a":2}', findings=findings) == [{"a": 1}, {"a": 2}]
    assert [f.kind for f in findings] == ["sse_unterminated_event"]
    assert payloads(b'data: {"a":1}\n\ndata: [DONE]') == [{"a": 1}]  # [DONE] without newline: no finding


def test_llamacpp_error_field_raises_with_the_message() -> None:
    body = b'data: {"choices":[]}\n\nerror: {"code":400,"message":"context too long","type":"invalid_request_error"}\n\n'
    with pytest.raises(ProviderStreamError, match="context too long") as info:
        payloads(body)
    assert info.value.line_number == 3


def test_event_error_with_plain_text_data() -> None:
    with pytest.raises(ProviderStreamError, match="upstream timed out"):
        payloads(b"event: error\ndata: upstream timed out\n\n")


def test_error_payload_that_also_has_choices_raises() -> None:
    body = (
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"error"}],"error":{"message":"gone"}}\n\n'
    )
    with pytest.raises(ProviderStreamError, match="gone"):
        payloads(body)


def test_lone_surrogate_escape_is_read_by_the_standard_library() -> None:
    assert payloads(b'data: {"t":"\\ud83d"}\n\n') == [{"t": "\ud83d"}]


def test_invalid_utf8_is_replaced_and_reported() -> None:
    findings = []
    assert payloads(b'data: {"t":"\xff"}\n\n', findings=findings) == [{"t": "\ufffd"}]
    assert [f.kind for f in findings] == ["invalid_utf8"]


def test_events_keep_name_id_and_joined_data() -> None:
    (event,) = iter_sse_events(b"event: x\nid: 7\ndata: a\ndata: b\r\n\r\n")
    assert (event.event, event.id, event.data, event.line_number) == ("x", "7", "a\nb", 3)


def test_a_bom_before_a_later_field_is_read_and_reported() -> None:
    findings = []
    assert payloads(b'data: {"a":1}\n\n\xef\xbb\xbfdata: {"a":2}\n\n', findings=findings) == [
        {"a": 1},
        {"a": 2},
    ]
    assert [f.kind for f in findings] == ["sse_nonstandard_line"]

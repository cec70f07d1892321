"""Issue 10, fourth pass: regression tests for what a third fresh-eyes tester found (bounded findings
on every bad-chunk shape, CR-only JSON lines, chat streams without [DONE], zstd bodies, smaller
quirks). Bytes are written here; the conformance corpus holds the per-quirk cases."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolcall_lab.formats import iter_responses
from toolcall_lab.formats.base import FINDINGS_PER_KIND


def ev(payload: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"{head}data: {data}\n\n".encode()


def chat(delta: dict[str, Any], finish: str | None = None, cid: str = "chatcmpl-1") -> dict[str, Any]:
    return {"id": cid, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


HEADER = ev(
    chat(
        {
            "tool_calls": [
                {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
            ]
        }
    )
)
TAIL = ev(chat({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})) + ev(chat({}, "tool_calls"))
AN_START = ev({"type": "message_start", "message": {"id": "m", "model": "x", "usage": {}}}, "message_start")
RS_START = ev(
    {"type": "response.created", "response": {"id": "r", "status": "in_progress"}}, "response.created"
)


def _chat_bad(line: bytes) -> Callable[[int], bytes]:
    return lambda n: HEADER + line * n + TAIL


BAD_SHAPES: dict[str, Callable[[int], bytes]] = {
    "tool_calls entry not an object": _chat_bad(ev(chat({"tool_calls": [5]}))),
    "choices entry not an object": _chat_bad(ev({"id": "chatcmpl-1", "choices": [5]})),
    "two entries with one index": _chat_bad(
        ev(chat({"tool_calls": [{"index": 0, "function": {"arguments": ""}}] * 2}))
    ),
    "bytes that are not UTF-8": _chat_bad(b'data: {"id": "chatcmpl-1", "choices": [], "x": "\xff"}\n\n'),
    "data that is a JSON array": _chat_bad(b"data: [1, 2]\n\n"),
    "data that is not JSON": _chat_bad(b"data: {bad\n\n"),
    "unknown SSE field": _chat_bad(b"foo: 1\n"),
    "Anthropic unknown event": lambda n: AN_START + ev({"type": "weird"}, "weird") * n,
    "Anthropic orphan delta": lambda n: (
        AN_START
        + ev(
            {
                "type": "content_block_delta",
                "index": 7,
                "delta": {"type": "input_json_delta", "partial_json": "x"},
            }
        )
        * n
    ),
    "Responses unknown event": lambda n: RS_START + ev({"type": "response.weird"}) * n,
    "Responses orphan delta": lambda n: (
        RS_START
        + b"".join(
            ev({"type": "response.function_call_arguments.delta", "item_id": f"fc_{i}", "delta": "x"})
            for i in range(n)
        )
    ),
}


def _findings(tmp_path: Path, data: bytes, name: str = "x.sse") -> int:
    path = tmp_path / name
    path.write_bytes(data)
    return sum(len(r.findings) for r in iter_responses(path, errors="keep"))


@pytest.mark.parametrize("shape", list(BAD_SHAPES))
def test_findings_do_not_grow_with_bad_chunks(tmp_path: Path, shape: str) -> None:
    """Every finding kind is capped per response: the count is the same for N and 2N bad chunks."""
    make = BAD_SHAPES[shape]
    few = _findings(tmp_path, make(3 * FINDINGS_PER_KIND))
    many = _findings(tmp_path, make(6 * FINDINGS_PER_KIND))
    assert few == many, (few, many)
    assert many < 6 * FINDINGS_PER_KIND


def test_capped_findings_say_how_many_more(tmp_path: Path) -> None:
    path = tmp_path / "x.sse"
    path.write_bytes(BAD_SHAPES["tool_calls entry not an object"](FINDINGS_PER_KIND + 7))
    (r,) = iter_responses(path, errors="keep")
    malformed = [f for f in r.findings if f.kind == "malformed_chunk"]
    assert len(malformed) == FINDINGS_PER_KIND + 1
    assert "7 more finding(s)" in malformed[-1].message
    assert r.tool_calls[0].arguments == "{}"  # the call itself is unaffected


def test_invalid_utf8_in_jsonl_is_capped(tmp_path: Path) -> None:
    line = b'{"id": "chatcmpl-1", "choices": [], "x": "\xff"}\n'
    few = _findings(tmp_path, line * 40, "x.chunks.jsonl")
    many = _findings(tmp_path, line * 80, "x.chunks.jsonl")
    assert few == many


# -- 5. JSON lines with CR-only line ends ---------------------------------------------------------
JSONL_LINES = [
    json.dumps(
        chat(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a":'},
                    }
                ]
            }
        )
    ),
    json.dumps(chat({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]})),
    json.dumps(chat({}, "tool_calls")),
]


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize(
    ("name", "cut"),  # (a .sse file is sniffed from its first block, which must hold a whole line)
    [
        ("x.chunks.jsonl", None),
        ("x.chunks.jsonl", 1),
        ("x.chunks.jsonl", 7),
        ("x.chunks.jsonl", 40),
        ("x.sse", None),
    ],
)
def test_json_lines_split_on_cr_lf_and_crlf(
    tmp_path: Path, eol: str, name: str, cut: int | None, monkeypatch: Any
) -> None:
    """CR, LF and CRLF line ends give the same calls, also with a CRLF split across a read boundary."""
    import toolcall_lab.formats.recordings as recordings_module
    import toolcall_lab.formats.sse as sse_module

    if cut is not None:  # tiny reads: line ends land on every boundary
        monkeypatch.setattr(sse_module, "READ_SIZE", cut)
        monkeypatch.setattr(recordings_module, "READ_SIZE", cut)
    data = ("\ufeff" + eol.join(JSONL_LINES) + eol).encode()
    path = tmp_path / name
    path.write_bytes(data)
    (r,) = iter_responses(path)
    assert [(c.tool_call_id, c.name, c.arguments, c.complete) for c in r.tool_calls] == [
        ("c1", "f", '{"a":1}', True)
    ]
    assert not [f for f in r.findings if f.kind in ("unreadable_data", "malformed_chunk")]


# -- 7. zstd bodies that do not decompress ----------------------------------------------------------
def _cassette(tmp_path: Path, body: bytes, coding: str) -> Path:
    import base64

    encoded = base64.b64encode(body).decode()
    text = (
        "interactions:\n- request: {body: null, headers: {}, method: POST, uri: 'https://x/v1/chat/completions'}\n"
        "  response:\n    body: {string: !!binary '" + encoded + "'}\n"
        f"    headers: {{content-encoding: [{coding}]}}\n    status: {{code: 200, message: OK}}\nversion: 1\n"
    )
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("damage", ["cut", "garbage"])
def test_zstd_body_that_does_not_decompress_says_so(tmp_path: Path, damage: str) -> None:
    zstandard = pytest.importorskip("zstandard")
    payload = json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"content": "hi " * 50}}],
        }
    ).encode()
    packed = zstandard.ZstdCompressor().compress(payload)
    body = packed[: len(packed) * 2 // 3] if damage == "cut" else packed[:4] + b"abc"
    (r,) = iter_responses(_cassette(tmp_path, body, "zstd"), errors="keep")
    assert r.error is not None and "does not decompress as zstd" in r.error and "interaction 0" in r.error
    whole = _cassette(tmp_path, packed, "zstd")
    (ok,) = iter_responses(whole)
    assert ok.choices[0].content == "hi " * 50

"""Reading recordings: streamed in bounded memory, cassette bodies decoded, errors that keep what
was read, and the `parse` command's output and exit codes."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import pytest

from tests.streams import chunk, sse_body, stream_of, tc
from toolcall_lab.exceptions import ProviderStreamError, SSEDecodeError, UnknownFormatError
from toolcall_lab.formats import RecordingReader, iter_responses, read_recording

SPEC = [("call_1", "get_weather", '{"city":"Paris"}'), ("call_2", "get_time", '{"tz":"CET"}')]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolcall_lab", *args], capture_output=True, text=True)


def test_streamed_and_whole_reads_agree(tmp_path: Path) -> None:
    path = tmp_path / "two.sse"
    path.write_bytes(sse_body(stream_of(SPEC, [[3, 9], [4]], interleave=True)))
    whole = read_recording(path).parse()
    streamed = list(iter_responses(path))
    assert [r.to_dict() for r in whole] == [r.to_dict() for r in streamed]
    assert [(c.tool_call_id, c.name, c.arguments) for c in streamed[0].tool_calls] == SPEC


def test_memory_does_not_grow_with_the_number_of_chunks(tmp_path: Path) -> None:
    """40,000 one-character argument chunks: the reader holds the arguments, not the chunks."""
    args = json.dumps({"text": "x" * 40_000})
    path = tmp_path / "long.sse"
    path.write_bytes(sse_body(stream_of([("call_1", "f", args)], [list(range(1, len(args)))])))
    assert path.stat().st_size > 4_000_000
    tracemalloc.start()
    try:
        (response,) = iter_responses(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.tool_calls[0].arguments == args
    # holding every decoded chunk would take > 20 MB; joined pieces + one read block stay small
    assert peak < 6_000_000, peak


def test_data_after_done_is_a_second_response(tmp_path: Path) -> None:
    path = tmp_path / "twice.sse"
    first = sse_body(stream_of(SPEC[:1]))
    second = sse_body(stream_of(SPEC[1:]))
    path.write_bytes(first + second)
    responses = list(iter_responses(path))
    assert [r.tool_calls[0].tool_call_id for r in responses] == ["call_1", "call_2"]
    assert "data_after_done" in {f.kind for f in responses[1].findings}
    assert [r.to_dict() for r in read_recording(path).parse()] == [r.to_dict() for r in responses]


def test_unreadable_data_keeps_what_was_read(tmp_path: Path) -> None:
    path = tmp_path / "cut.sse"
    path.write_bytes(sse_body([chunk(tc(0, "call_1", "f", '{"a":1}'))], done=False) + b"data: {not json\n\n")
    for read in (lambda: list(iter_responses(path)), lambda: read_recording(path).parse()):
        with pytest.raises(SSEDecodeError, match="line 3") as info:
            read()
        (partial,) = info.value.partial_responses
        assert partial.tool_calls[0].arguments == '{"a":1}' and not partial.tool_calls[0].complete
        assert str(path) in str(info.value)


def _cassette(body_yaml: str, headers: str, status: int = 200) -> str:
    return (
        "interactions:\n- request:\n    body: '{}'\n    method: POST\n    uri: https://x/v1/chat/completions\n"
        f"  response:\n    body:\n      string: {body_yaml}\n    headers:\n{headers}"
        f"    status:\n      code: {status}\n      message: OK\nversion: 1\n"
    )


def _binary(data: bytes) -> str:
    return "!!binary |\n        " + base64.encodebytes(data).decode().strip().replace("\n", "\n        ")


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", lambda b: gzip.compress(b, mtime=0)),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, no zlib header
        (None, lambda b: b),
    ],
)
def test_binary_cassette_bodies_are_decoded_by_content_encoding(tmp_path: Path, encoding, encode) -> None:
    body = sse_body(stream_of(SPEC))
    headers = (
        f"      Content-Encoding:\n      - {encoding}\n"
        if encoding
        else "      Content-Type:\n      - text/event-stream\n"
    )
    path = tmp_path / "c.yaml"
    path.write_text(_cassette(_binary(encode(body)), headers))
    (response,) = read_recording(path).parse()
    assert [(c.tool_call_id, c.name, c.arguments) for c in response.tool_calls] == SPEC


def test_undecodable_binary_bodies_say_why(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(_cassette(_binary(b"\x00\x01 not gzip"), "      Content-Encoding:\n      - gzip\n"))
    with pytest.raises(UnknownFormatError, match="interaction 0: the body does not decompress as gzip"):
        read_recording(path).parse()
    path.write_text(_cassette(_binary(gzip.compress(b"data: {}\n\n")), "      Content-Type:\n      - x\n"))
    with pytest.raises(UnknownFormatError, match="no content-encoding was recorded"):
        read_recording(path).parse()
    path.write_text(_cassette(_binary(b"abc"), "      Content-Encoding:\n      - compress\n"))
    with pytest.raises(UnknownFormatError, match="unknown content-encoding 'compress'"):
        read_recording(path).parse()
    (kept,) = read_recording(path).parse(errors="keep")  # the bad interaction costs only itself
    assert kept.error and "unknown content-encoding 'compress'" in kept.error
    assert [f.kind for f in kept.findings] == ["unreadable_data"]


def test_http_error_interaction_is_an_error_response(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        _cassette('"<html>502 Bad Gateway</html>"', "      Content-Type:\n      - text/html\n", 502)
    )
    (response,) = read_recording(path).parse(errors="keep")
    assert response.error == "HTTP 502: <html>502 Bad Gateway</html>"
    with pytest.raises(ProviderStreamError, match="HTTP 502"):
        read_recording(path).parse()


def test_cli_parse_prints_lone_surrogates_escaped(tmp_path: Path) -> None:
    path = tmp_path / "s.sse"
    path.write_bytes(sse_body([chunk(tc(0, "a", "f", '{"t":"\ud83d"}'))]))  # written as a \\ud83d escape
    out = cli("parse", str(path))
    assert out.returncode == 0, out.stderr
    assert "\\ud83d" in out.stdout
    assert json.loads(out.stdout)["choices"][0]["tool_calls"][0]["arguments"] == '{"t":"\ud83d"}'


def test_cli_parse_provider_error_exit_1_with_output(tmp_path: Path) -> None:
    path = tmp_path / "e.sse"
    path.write_bytes(sse_body([chunk(tc(0, "a", "f", '{"x":')), {"error": {"message": "boom"}}], done=False))
    out = cli("parse", str(path))
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert doc["error"] == "boom" and doc["choices"][0]["tool_calls"][0]["complete"] is False
    assert out.stderr.strip() == "toolcall-lab parse: response 0 is a provider error: boom"


def test_cli_parse_unreadable_keeps_partial_output_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "u.sse"
    path.write_bytes(sse_body([chunk(tc(0, "a", "f", "{}"))], done=False) + b"data: [1, 2\n\n")
    out = cli("parse", str(path))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "line 3" in out.stderr
    assert "Traceback" not in out.stderr
    assert json.loads(out.stdout)["choices"][0]["tool_calls"][0]["id"] == "a"


@pytest.mark.parametrize(
    "content",
    [b"", b"\xff\xfe\x00garbage", b"{", b"[1,2]", b"interactions: 3", b"data: {}\n\n" * 70],
    ids=["empty", "binary", "truncated-json", "json-list", "not-a-cassette", "undetectable"],
)
@pytest.mark.parametrize("suffix", [".sse", ".json", ".yaml", ".chunks.jsonl"])
def test_cli_never_prints_a_traceback(tmp_path: Path, capsys, content: bytes, suffix: str) -> None:
    from toolcall_lab.cli import main

    path = tmp_path / f"x{suffix}"
    path.write_bytes(content)
    assert main(["parse", str(path)]) == 2  # an exception of ours would propagate here instead
    err = capsys.readouterr().err
    assert err.startswith("toolcall-lab parse: ") and err.count("\n") == 1


def test_reader_reports_its_container(tmp_path: Path) -> None:
    path = tmp_path / "x.chunks.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in stream_of(SPEC)))
    reader = RecordingReader(path)
    assert reader.container == "chunks-jsonl" and len(list(reader)) == 1


def test_cli_findings_reference() -> None:
    out = cli("findings", "--markdown")
    assert out.returncode == 0 and "| `provider_error` | error |" in out.stdout

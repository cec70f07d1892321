"""Streamed recordings keep their chunks whatever the wire format: an Anthropic or Responses stream
becomes one chat chunk per recorded event, so ``eager`` starts each call when its arguments completed
in the source, and ``parallel`` replays exactly as from one converted body."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab.exceptions import ToolcallLabError
from toolcall_lab.formats import read_recording
from toolcall_lab.formats.dispatch import new_accumulator
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator
from toolcall_lab.importers import recordings
from toolcall_lab.importers._chat_chunks import split_events
from toolcall_lab.importers.recordings import SUFFIXES, import_recording
from toolcall_lab.replay import StartedOnSnapshotError, replay
from toolcall_lab.trace import Trace


def _streamed() -> list[Path]:
    if not REALDATA.is_dir():
        return []
    out = []
    for p in sorted(REALDATA.rglob("*")):
        if not p.is_file() or not p.name.endswith(SUFFIXES) or p.name.endswith(".json"):
            continue
        try:
            recording = read_recording(p)
        except Exception:
            continue
        if any(e.streamed for e in recording.exchanges):
            out.append(p)
    return out


STREAMED = _streamed()
SNAPSHOT_ARGS = "watsonx_mistral-large-2512_chat_stream_parallel2_PATHOLOGICAL_snapshot_args.sse"
"""Each delta repeats the whole argument string so far: eager starts a call on an early snapshot
that is already a JSON object, and the replay rightly refuses (no recorded run of those arguments)."""


def _completed_at(trace: Trace, k: int) -> dict[int, int]:
    """Per call position: the chunk of round k after which the chat parser holds its arguments as a
    JSON value (read with the chat accumulator, whatever the stream's quirks)."""
    acc = ChatCompletionAccumulator()
    done: dict[int, int] = {}
    for n, chunk in enumerate(trace.rounds[k].model_call.chunks):
        if chunk.payload.get("object") == "chat.completion":
            return {}
        acc.feed(chunk.payload)
        for i, call in acc.snapshot().get(0, {}).items():
            args = call["arguments"]
            if i in done or not args.strip():
                continue
            try:
                json.loads(args)
            except ValueError:
                continue
            done[i] = n
    return done


def _source_completion(events: list[dict[str, Any]], fmt: Any) -> dict[int, int]:
    """Per announce index: the source event after which the parser holds the call's final arguments
    and (for a call whose arguments are empty so far) has closed it: read from the source alone."""
    acc = new_accumulator(fmt, 0)
    seen: list[dict[int, str]] = []
    closed: list[set[int]] = []
    for e in events:
        acc.feed(e)
        seen.append({i: c["arguments"] for i, c in acc.snapshot().get(0, {}).items()})
        pending = acc.pending_calls()
        closed.append({i for i in seen[-1] if pending[i].done})
    order = acc.pending_calls()
    final = {order[i].index: None for i in seen[-1]}
    parsed = acc.finish()
    out = {}
    for i in seen[-1]:
        args = parsed.tool_calls[order[i].index].arguments
        for n in range(len(events)):
            have = seen[n].get(i)
            if have is None:
                continue
            try:
                json.loads(have)
                ok = have == args
            except ValueError:
                ok = False
            if ok or (i in closed[n] and not have.strip()):
                out[order[i].index] = n
                break
    assert set(out) <= set(final)
    return out


@needs_realdata
@pytest.mark.skipif(not STREAMED, reason="no streamed recordings found")
@pytest.mark.parametrize(
    "path",
    STREAMED,
    ids=[p.name for p in STREAMED],
)
def test_eager_starts_each_call_at_the_chunk_where_its_arguments_completed(path: Path) -> None:
    try:
        result = import_recording(path)
    except ToolcallLabError as exc:  # a stream that ends in a provider error: not this test's concern
        pytest.skip(f"{path.name} does not import as a whole: {exc}")
    exchanges = read_recording(path).exchanges
    events_by_fmt = [
        (e.format, split_events(e.items or e.payloads or (), e.format))  # type: ignore[arg-type]
        for e in exchanges
        if e.streamed and e.format in ("anthropic", "openai-responses")
    ]
    for trace in result.traces:
        if "choice=" in (trace.metadata.source or ""):
            continue  # another choice of an n > 1 response: kept as one body (see the report)
        if path.name == SNAPSHOT_ARGS:  # every delta repeats the whole argument string: eager would
            # start a call on an early snapshot the recording never ran, and the replay says so
            with pytest.raises(StartedOnSnapshotError, match="earlier snapshot"):
                replay(trace, "eager")
            continue
        eager = replay(trace, "eager")
        for k, (recorded, ran) in enumerate(zip(trace.rounds, eager.rounds, strict=False)):
            mc = recorded.model_call
            if recorded.placeholder:
                continue
            # every streamed response keeps its chunks, labelled as the chat path labels them
            assert len(mc.chunks) > 1 or not recorded.tool_calls, (path.name, k)
            assert mc.chunk_timing in ("spread", "recorded"), (path.name, k, mc.chunk_timing)
            if mc.chunk_timing != "spread":
                continue
            completed = _completed_at(trace, k)
            for ex in ran.executions:
                if ex.started_at is None or ex.index not in completed:
                    continue
                want = mc.chunks[completed[ex.index]].offset_s
                assert ex.started_at - ran.model_call.started_at == pytest.approx(want, abs=1e-9), (
                    path.name,
                    k,
                    ex.index,
                )
    # Anthropic / Responses: one chunk per source event, each call complete at its source event
    if events_by_fmt:
        rounds = [r for t in result.traces for r in t.rounds if not r.placeholder]
        groups = [(fmt, g) for fmt, gs in events_by_fmt for g in gs]
        counts = sorted(len(g) for _, g in groups)
        assert sorted(len(r.model_call.chunks) for r in rounds) == counts, path.name
        for fmt, events in groups:
            (match,) = [
                (t, k)
                for t in result.traces
                for k, r in enumerate(t.rounds)
                if not r.placeholder and len(r.model_call.chunks) == len(events)
            ][:1] or [(None, None)]
            if match[0] is None:
                continue
            t, k = match
            assert _completed_at(t, k) == _source_completion(events, fmt), (path.name, k)


def _timeline(trace: Trace, mode: str) -> list[Any]:
    run = replay(trace, mode)
    return [
        (
            r.model_call.started_at,
            r.model_call.ended_at,
            [(e.tool_call_id, e.status, e.result, e.started_at, e.ended_at) for e in r.executions],
        )
        for r in run.rounds
    ]


@needs_realdata
@pytest.mark.parametrize(
    "name",
    [
        "simonw-llm/anthropic_claude-haiku-4-5_stream_parallel2_tool_use_no_args_padded.sse",
        "vercel-ai/openai_responses_gpt-5.1-codex-max_stream_4steps_3_function_calls.chunks.jsonl",
        "vercel-ai/anthropic_claude-sonnet-4-5_stream_parallel3_tool_use_padded.chunks.jsonl",
    ],
)
def test_parallel_and_sequential_replays_are_those_of_the_converted_body(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = REALDATA / name
    chunked = import_recording(path).traces
    assert all(len(r.model_call.chunks) > 1 for t in chunked for r in t.rounds if not r.placeholder)
    assert all("converted one for one to chat-completion chunks" in t.metadata.notes for t in chunked)
    monkeypatch.setattr(recordings, "chat_chunks", lambda *a, **k: None)
    whole = import_recording(path).traces
    assert all(len(r.model_call.chunks) == 1 for t in whole for r in t.rounds)
    for a, b in zip(chunked, whole, strict=True):
        assert [r.tool_calls for r in a.rounds] == [r.tool_calls for r in b.rounds]
        assert [r.request_messages for r in a.rounds] == [r.request_messages for r in b.rounds]
        for mode in ("parallel", "sequential"):
            assert _timeline(a, mode) == _timeline(b, mode), (name, mode)


def test_an_anthropic_stream_keeps_one_chunk_per_event(tmp_path: Path) -> None:
    """Without real data too: six events, six chunks, the call complete at its last delta."""
    events = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 1}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": 1}'},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]
    good = tmp_path / "anthropic_ok.sse"
    good.write_text("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events))
    (trace,) = import_recording(good).traces
    first = trace.rounds[0]
    assert len(first.model_call.chunks) == len(events)
    assert first.model_call.chunk_timing == "spread"
    assert [c.arguments for c in first.tool_calls] == ['{"a": 1}']
    assert _completed_at(trace, 0) == {0: 2}
    assert "converted one for one" in trace.metadata.notes


@needs_realdata
def test_claude_code_times_keep_the_sources_millisecond_precision() -> None:
    """Epoch floats subtracted lose digits (2.246999979 for 2.247): times are rounded to the
    microsecond, so a millisecond source reads back exactly."""
    from toolcall_lab.importers.claude_code import import_claude_code

    folder = REALDATA / "claude-code-viewer"
    path = sorted(folder.glob("*.jsonl"))[0]
    times = []
    for trace in import_claude_code(path).traces:
        for r in trace.rounds:
            times += [r.model_call.started_at, r.model_call.ended_at]
            times += [t for e in r.executions for t in (e.started_at, e.ended_at) if t is not None]
    assert times
    assert all(round(t, 6) == t for t in times), [t for t in times if round(t, 6) != t][:5]

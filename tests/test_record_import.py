"""Recording through the real `openai` client (served real bytes with delays), and the importers."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab.importers import import_bfcl, import_recording, import_tau_bench
from toolcall_lab.openai_model import OpenAIModel
from toolcall_lab.record import public_url, record
from toolcall_lab.replay import replay
from toolcall_lab.trace_files import dumps, load, save, secret_warnings

CASSETTE = REALDATA / "pydantic-ai/openai_chat_stream_gpt-4o_parallel2_noargs_from_agent_run.sse"
PAUSE = 0.02


def delayed_sse_transport(bodies: list[str], seen: list[httpx.Request]) -> httpx.MockTransport:
    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = bodies[min(len(seen), len(bodies)) - 1]
        events = [e + "\n\n" for e in body.split("\n\n") if e.strip()]

        async def stream():
            for event in events:
                await asyncio.sleep(PAUSE)
                yield event.encode()

        return httpx.Response(200, content=stream(), headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


@needs_realdata
def test_record_a_live_run_through_the_real_openai_client(tmp_path) -> None:
    from openai import AsyncOpenAI

    final = (
        'data: {"id":"c2","object":"chat.completion.chunk","created":0,"model":"gpt-4o","choices":[{"index":0,'
        '"delta":{"role":"assistant","content":"Mexico; Pydantic AI"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    seen: list[httpx.Request] = []
    client = AsyncOpenAI(
        api_key="sk-test-secret-key-1234567890",
        base_url="http://user:pw@recorded.invalid/v1",
        http_client=httpx.AsyncClient(transport=delayed_sse_transport([CASSETTE.read_text(), final], seen)),
    )

    async def get_country() -> str:
        await asyncio.sleep(0.03)
        return "Mexico"

    def get_product_name() -> str:
        return "Pydantic AI"

    async def go():
        try:
            return await record(
                OpenAIModel("gpt-4o", client),
                [get_country, get_product_name],
                "country and product?",
                title="recorded via MockTransport",
                provider="openai",
                source=str(client.base_url) + "?api_key=x",
            )
        finally:
            await client.close()

    trace = asyncio.run(go())
    assert "authorization" in seen[0].headers  # credentials were sent, but are not stored:
    text = dumps(trace)
    assert "sk-test-secret" not in text and "pw@" not in text and secret_warnings(trace.to_dict()) == []
    assert trace.metadata.source == "http://recorded.invalid/v1/"
    first = trace.rounds[0]
    offsets = [c.offset_s for c in first.model_call.chunks]
    assert (
        offsets == sorted(offsets) and offsets[0] >= PAUSE * 0.9 and offsets[-1] >= PAUSE * (len(offsets) - 1)
    )
    assert [c.tool_call_id for c in first.tool_calls] == [
        "call_q2UyBRP7eXNTzAoR8lEhjc9Z",
        "call_b51ijcpFkDiTQG1bQzsrmtW5",
    ]
    assert first.executions[0].duration_s >= 0.03
    assert trace.outcome.final_answer == "Mexico; Pydantic AI"
    path = save(trace, tmp_path / "recorded.json")
    again = replay(load(path), "sequential")  # a recorded trace replays deterministically
    assert again.final_answer == "Mexico; Pydantic AI"


def test_public_url_drops_credentials() -> None:
    assert public_url("https://u:secret@host/v1?key=abc") == "https://host/v1"


@needs_realdata
@pytest.mark.parametrize("path", sorted(p.name for p in (REALDATA / "pydantic-ai").glob("*.cassette.yaml")))
def test_cassettes_import_and_replay_under_every_mode(path) -> None:
    trace = import_recording(REALDATA / "pydantic-ai" / path)
    assert trace.metadata.origin == "imported" and trace.metadata.source.endswith(path)
    assert trace.outcome.status == "completed"
    for mode in ("sequential", "parallel", "serialized"):
        assert replay(trace, mode).status == "completed"


@needs_realdata
def test_cassette_uses_recorded_server_timings() -> None:
    trace = import_recording(
        REALDATA / "pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml"
    )
    assert [r.model_call.latency_s for r in trace.rounds[:3]] == pytest.approx([0.906, 0.379, 0.682], abs=0.3)
    assert "openai-processing-ms in 3 of 3" in trace.metadata.notes
    # the server-reported figures keep their label through the import's replay; tool times are placeholders
    assert [r.model_call.timing.source for r in trace.rounds[:3]] == ["reported"] * 3
    assert all(e.timing.source == "placeholder" for r in trace.rounds for e in r.executions)
    assert trace.rounds[0].model_call.chunk_timing == "spread"
    assert (
        trace.rounds[0].model_call.chunks[0].payload.get("obfuscation") is not None
    )  # real chunks, verbatim


@needs_realdata
def test_anthropic_exchanges_import() -> None:
    trace = import_recording(
        REALDATA / "anthropic-sdk-python/tool_runner_2rounds_stream_claude-haiku-4-5_padded_sse_bodies.json"
    )
    assert trace.rounds[0].tool_calls[0].tool_call_id == "toolu_018acGYLtfR52q9yDbWaEdQZ"
    assert "converted to chat-completion bodies" in trace.metadata.notes


@needs_realdata
def test_tau_bench_import() -> None:
    traces = import_tau_bench(REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json", limit=20)
    assert traces and all(t.outcome.status == "completed" for t in traces)
    assert all(set(t.timing_sources) == {"estimated", "placeholder"} for t in traces)
    assert all(len(r.tool_calls) <= 1 for t in traces for r in t.rounds)  # tau-bench never batches calls
    assert replay(traces[0], "parallel").status == "completed"


@needs_realdata
def test_bfcl_import() -> None:
    traces = import_bfcl(
        REALDATA / "bfcl/BFCL_v4_parallel_multiple.jsonl",
        REALDATA / "bfcl/possible_answer_BFCL_v4_parallel_multiple.jsonl",
        limit=30,
    )
    assert len(traces) == 30
    first = traces[0]
    assert len(first.rounds[0].tool_calls) >= 2 and "." not in json.dumps(
        [t["function"]["name"] for t in first.tools]
    )
    assert replay(first, "parallel").wall_time_s < replay(first, "sequential").wall_time_s

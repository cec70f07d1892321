"""Recording through the real `openai` client (served real bytes with delays); credentials never stored."""

from __future__ import annotations

import asyncio

import httpx

from tests.conftest import REALDATA, needs_realdata
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


def test_record_strips_credentials_from_results_and_arguments() -> None:
    from toolcall_lab.models import ScriptedModel, ScriptedResponse

    def lookup(service: str, api_key: str) -> str:
        return f"{service}: ok (used key sk-proj-abcdefghijklmnopqrstuvwxyz)"

    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=(("lookup", {"service": "billing", "api_key": "hunter2-secret"}),)),
            "done",
        ]
    )
    trace = asyncio.run(record(model, [lookup], "check billing", title="leaky tools"))
    text = dumps(trace)
    assert "hunter2-secret" not in text and "sk-proj-abcdefghij" not in text
    assert "[REDACTED: an OpenAI-style key]" in trace.rounds[0].executions[0].result
    assert len(trace.metadata.redactions) >= 2 and secret_warnings(trace.to_dict()) == []
    schema = trace.tools[0]["function"]["parameters"]["properties"]
    assert "api_key" in schema  # a parameter named api_key is a schema, not a secret

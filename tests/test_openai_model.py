"""The openai client adapter, with the real `openai` client parsing real recorded bytes (MockTransport)."""

from __future__ import annotations

import asyncio
import json

import httpx
import yaml

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab.loop import run
from toolcall_lab.openai_model import OpenAIModel
from toolcall_lab.protocol import validate_messages

CASSETTE = "pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml"


def serve(bodies: list[str], seen: list[dict]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        if len(seen) > len(bodies):
            return httpx.Response(500, json={"error": {"message": "no more recorded responses"}})
        return httpx.Response(200, text=bodies[len(seen) - 1], headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


@needs_realdata
def test_real_client_on_recorded_agent_rounds() -> None:
    asyncio.run(_recorded_agent_rounds())


async def _recorded_agent_rounds() -> None:
    from openai import AsyncOpenAI

    doc = yaml.safe_load((REALDATA / CASSETTE).read_text())
    bodies = [it["response"]["body"]["string"] for it in doc["interactions"]]
    seen: list[dict] = []
    client = AsyncOpenAI(
        api_key="test-key",
        base_url="http://recorded.invalid/v1",
        http_client=httpx.AsyncClient(transport=serve(bodies, seen)),
        max_retries=0,
    )

    def get_country() -> str:
        return "Mexico"

    def get_product_name() -> str:
        return "Pydantic AI"

    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    model = OpenAIModel("gpt-4o", client, parallel_tool_calls=True)
    result = await run(
        model, [get_country, get_product_name, get_weather], "capital, weather, product?", max_rounds=2
    )
    await client.close()
    assert [c.tool_call_id for c in result.rounds[0].tool_calls] == [
        "call_q2UyBRP7eXNTzAoR8lEhjc9Z",
        "call_b51ijcpFkDiTQG1bQzsrmtW5",
    ]
    assert result.rounds[1].tool_calls[0].args == {"city": "Mexico City"}
    assert seen[0]["stream"] is True and seen[0]["parallel_tool_calls"] is True and "tools" in seen[0]
    tool_msgs = [m for m in seen[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == [
        "call_q2UyBRP7eXNTzAoR8lEhjc9Z",
        "call_b51ijcpFkDiTQG1bQzsrmtW5",
    ]
    assert "tools" not in seen[2]  # the final call after max_rounds goes without tools
    # the recorded third response is only a `final_result` tool call: ignored, so no final text;
    # after tool rounds an empty answer is asked for once more (the SiYuan rule), without tools
    assert result.rounds[2].findings and result.rounds[2].final_reason == "max_rounds"
    assert "tools" not in seen[3] and "parallel_tool_calls" not in seen[3]
    assert seen[3]["messages"][-1]["content"].startswith("[SYSTEM]")
    # the cassette has no fourth response (the transport answers 500): the run says so
    assert (result.status, result.reason) == ("failed", "model_error")
    assert "round 3: the model call failed" in result.error and "500" in result.error
    assert validate_messages(result.messages) == []
    assert result.usage.get("total_tokens", 0) > 0


def test_request_kwargs_without_tools_omit_parallel_flag() -> None:
    from toolcall_lab.models import ModelRequest

    model = OpenAIModel("m", client=object(), parallel_tool_calls=False, temperature=0, tool_choice="auto")
    kw = model.request_kwargs(
        ModelRequest(messages=({"role": "user", "content": "x"},), tools=None, round_index=0, batch=0)
    )
    assert "parallel_tool_calls" not in kw and kw["temperature"] == 0 and kw["stream"] is True
    assert "tool_choice" not in kw  # the OpenAI API rejects it without tools

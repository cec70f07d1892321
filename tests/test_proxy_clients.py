"""Compatibility suite: real clients with ``parallel_tool_calls=False`` through the proxy on loopback.

The `openai` client, the OpenAI Agents SDK (`Runner.run`, `ModelSettings(parallel_tool_calls=False)`)
and LangChain's `ChatOpenAI(...).bind_tools(tools, parallel_tool_calls=False)`, streaming and not,
against a checking upstream (tests/proxy_helpers.py) that issues unique call ids and verifies every
rebuilt request. For each: one call per response, N round trips, exactly one upstream request per
batch holding the assistant message with all N calls and the N results in order, and the final answer
delivered. No network, no keys: loopback and a dummy key; the Agents SDK's tracing export is disabled.
Plus the concurrency test: 200 conversations x a 3-call batch from 20 clients, in groups of identical
conversations, from an upstream that gives some of them unique call ids, repeated ids, empty ids or
none, with a system prompt that changes every round trip for half of them: zero crossed, zero lost.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.proxy_helpers import ID_STYLES, TOOL_NAMES, CheckingUpstream, model_for, tool_result, tool_schemas
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator
from toolcall_lab.proxy import HTTPUpstream, ProxyServer, ids

STREAMING = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
STYLES = pytest.mark.parametrize("style", ["unique", "repeat", "empty", "missing"])
"""The upstream's call ids: unique, the same every time, empty, or none (the client sees proxy ids)."""


async def through_proxy(drive):
    """Start the checking upstream and the proxy in front of it; run `drive(proxy_url)`."""
    up = CheckingUpstream()
    upstream_url = await up.start()
    server = ProxyServer(HTTPUpstream(upstream_url))
    url = await server.start()
    try:
        out = await drive(url)
    finally:
        await server.close()
        await up.close()
    return out, up, server


def check_one_batch(up: CheckingUpstream, final_text: str) -> None:
    """Exactly one upstream request per batch (the question, then the complete batch), all checked."""
    assert up.problems == []
    assert len(up.requests) == 2 and len(up.completed) == 1
    (calls,) = up.issued.values()
    complete = up.completed[0]
    sent = complete[-4]["tool_calls"]
    if all(c.get("id") for c in calls):
        assert sent == calls  # the upstream's own calls, ids included
    else:  # calls issued without ids come back as issued, each under an id of its own (the proxy's)
        assert [{k: v for k, v in c.items() if k != "id"} for c in sent] == [
            {k: v for k, v in c.items() if k != "id"} for c in calls
        ]
        assert all(ids.parse(c["id"]) is not None for c in sent)
    assert [m["tool_call_id"] for m in complete[-3:]] == [c["id"] for c in sent]
    expected = [tool_result(c["function"]["name"], c["function"]["arguments"]) for c in calls]
    assert final_text == "All done: " + " | ".join(expected)  # its own results, in order


@STYLES
@STREAMING
def test_openai_client(stream: bool, style: str) -> None:
    from openai import AsyncOpenAI

    async def drive(url: str):
        client = AsyncOpenAI(base_url=url, api_key="dummy", max_retries=0)
        messages: list[dict] = [{"role": "user", "content": "Weather, news and stock for Paris?"}]
        per_response = []
        try:
            for _ in range(6):
                kwargs = {
                    "model": model_for(style),
                    "messages": messages,
                    "tools": tool_schemas(),
                    "parallel_tool_calls": False,
                }
                if stream:
                    acc = ChatCompletionAccumulator(batch=len(per_response))
                    async for chunk in await client.chat.completions.create(
                        **kwargs, stream=True, stream_options={"include_usage": True}
                    ):
                        acc.feed(chunk)
                    parsed = acc.finish()
                    assert parsed.findings == ()
                    message = parsed.first.to_message()
                else:
                    response = await client.chat.completions.create(**kwargs)
                    message = response.choices[0].message.model_dump(exclude_none=True)
                calls = message.get("tool_calls") or []
                per_response.append(len(calls))
                messages.append(message)
                if not calls:
                    return per_response, message["content"]
                for call in calls:
                    fn = call["function"]
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": call["id"],
                            "content": tool_result(fn["name"], fn["arguments"]),
                        }
                    )
        finally:
            await client.close()
        raise AssertionError("no final answer")

    (per_response, final), up, server = asyncio.run(through_proxy(drive))
    assert per_response == [1, 1, 1, 0]
    check_one_batch(up, final)
    assert server.stats["served_from_queue"] == 2


@STYLES
@STREAMING
def test_openai_agents_sdk(stream: bool, style: str, monkeypatch) -> None:
    agents = pytest.importorskip("agents", reason="the `clients` extra (openai-agents) is not installed")
    from openai import AsyncOpenAI

    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    agents.set_tracing_disabled(True)

    def make(name: str):
        def tool(query: str) -> str:
            return tool_result(name, json.dumps({"query": query}))

        tool.__name__ = name
        tool.__doc__ = f"Look up {name.removeprefix('get_')}."
        return agents.function_tool(tool)

    async def drive(url: str):
        client = AsyncOpenAI(base_url=url, api_key="dummy", max_retries=0)
        agent = agents.Agent(
            name="assistant",
            instructions="Use the tools.",
            tools=[make(n) for n in TOOL_NAMES],
            model=agents.OpenAIChatCompletionsModel(model=model_for(style), openai_client=client),
            model_settings=agents.ModelSettings(parallel_tool_calls=False),
        )
        try:
            if stream:
                result = agents.Runner.run_streamed(agent, "Weather, news and stock for Paris?")
                async for _ in result.stream_events():
                    pass
            else:
                result = await agents.Runner.run(agent, "Weather, news and stock for Paris?")
        finally:
            await client.close()
        per_response = [
            sum(1 for item in r.output if getattr(item, "type", "") == "function_call")
            for r in result.raw_responses
        ]
        return per_response, str(result.final_output)

    (per_response, final), up, _ = asyncio.run(through_proxy(drive))
    assert per_response == [1, 1, 1, 0]
    check_one_batch(up, final)
    assert all(r.get("parallel_tool_calls") is False for r in up.requests)


@STYLES
@STREAMING
def test_langchain_chat_openai(stream: bool, style: str, monkeypatch) -> None:
    pytest.importorskip("langchain_openai", reason="the `clients` extra (langchain-openai) is not installed")
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    for var in ("LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING"):
        monkeypatch.delenv(var, raising=False)

    async def drive(url: str):
        llm = ChatOpenAI(
            model=model_for(style), base_url=url, api_key="dummy", max_retries=0, streaming=stream
        )
        bound = llm.bind_tools(tool_schemas(), parallel_tool_calls=False)
        messages: list = [HumanMessage("Weather, news and stock for Paris?")]
        per_response = []
        try:
            return await converse(bound, messages, per_response)
        finally:
            await llm.root_async_client.close()

    async def converse(bound, messages, per_response):
        for _ in range(6):
            if stream:
                ai = None
                async for chunk in bound.astream(messages):
                    ai = chunk if ai is None else ai + chunk
            else:
                ai = await bound.ainvoke(messages)
            per_response.append(len(ai.tool_calls))
            messages.append(ai)
            if not ai.tool_calls:
                return per_response, ai.content
            for call in ai.tool_calls:
                content = tool_result(call["name"], json.dumps(call["args"]))
                messages.append(ToolMessage(content=content, tool_call_id=call["id"]))
        raise AssertionError("no final answer")

    (per_response, final), up, _ = asyncio.run(through_proxy(drive))
    assert per_response == [1, 1, 1, 0]
    check_one_batch(up, final)


def test_concurrency_200_conversations_20_clients_identical_groups_zero_crossed_zero_lost() -> None:
    """200 conversations x a 3-call batch from 20 concurrent clients. Every 4 conversations send identical
    messages; a quarter get unique call ids from the upstream, a quarter the same ids every time, a
    quarter empty ids and a quarter none; every other conversation rebuilds its system prompt (with the
    current time) on every round trip."""
    from openai import AsyncOpenAI

    async def drive(url: str):
        clients = [AsyncOpenAI(base_url=url, api_key="dummy", max_retries=0) for _ in range(20)]
        queue: asyncio.Queue[int] = asyncio.Queue()
        for n in range(200):
            queue.put_nowait(n)
        outcomes: dict[int, tuple[list[str], list[str], str]] = {}

        async def conversation(client, n: int) -> None:
            style = ID_STYLES[(n // 4) % 4]  # the 4 identical conversations of a group share a style
            ticking = n % 2 == 1
            messages: list[dict] = [{"role": "user", "content": f"question {n // 4}"}]
            received: list[str] = []
            results: list[str] = []
            for _ in range(6):
                system = [{"role": "system", "content": f"Now: {time.time_ns()}"}] if ticking else []
                response = await client.chat.completions.create(
                    model=model_for(style),
                    messages=[*system, *messages],
                    tools=tool_schemas(),
                    parallel_tool_calls=False,
                )
                message = response.choices[0].message.model_dump(exclude_none=True)
                messages.append(message)
                calls = message.get("tool_calls") or []
                if not calls:
                    outcomes[n] = (received, results, message["content"])
                    return
                assert len(calls) == 1
                received.append(calls[0]["id"])
                fn = calls[0]["function"]
                results.append(tool_result(fn["name"], fn["arguments"]))
                messages.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": results[-1]})

        async def worker(client) -> None:
            while not queue.empty():
                await conversation(client, queue.get_nowait())

        try:
            await asyncio.gather(*(worker(c) for c in clients))
        finally:
            for c in clients:
                await c.close()
        return outcomes

    outcomes, up, server = asyncio.run(through_proxy(drive))
    assert len(outcomes) == 200  # zero lost: every conversation got its final answer
    assert up.problems == [] and len(up.completed) == 200 and len(up.requests) == 400
    issued = {
        tuple(tool_result(c["function"]["name"], c["function"]["arguments"]) for c in calls)
        for calls in up.issued.values()
    }
    seen = set()
    for received, results, final in outcomes.values():
        assert tuple(results) in issued  # one whole batch, as issued
        assert final == "All done: " + " | ".join(results)  # the upstream saw this conversation's results
        assert len({ids.parse(cid).tag for cid in received}) == 1  # handed out from one batch
        seen.add(tuple(results))
    assert len(seen) == 200  # zero crossed: no two conversations shared a batch
    assert (
        server.stats["error_replies_4xx"] == server.stats["error_replies_5xx"] == 0
        and server.stats["served_from_queue"] == 400
    )

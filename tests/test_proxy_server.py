"""The serialized proxy over HTTP on loopback: the real openai client, bad input, isolation, load."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from toolcall_lab.loop import run
from toolcall_lab.openai_model import OpenAIModel
from toolcall_lab.protocol import validate_messages
from toolcall_lab.proxy import (
    HTTPUpstream,
    ProxyServer,
    TraceUpstream,
    UpstreamError,
    ids,
    serve,
    upstream_app,
)
from toolcall_lab.proxy.batches import Batch
from toolcall_lab.proxy.store import MemoryStore, StoreLimits
from toolcall_lab.replay import replay_tools
from toolcall_lab.scenarios import SCENARIOS

TRACE = SCENARIOS["three_tools_100ms"].record()  # a 3-call batch, then a final answer; model time 0


def arun(coro):
    return asyncio.run(coro)


async def with_proxy(fn, upstream=None, **kwargs):
    upstream = upstream or TraceUpstream(TRACE, keep_requests=1000)
    server = ProxyServer(upstream, **kwargs)
    url = await server.start()
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            return await fn(http, upstream, server)
    finally:
        await server.close()


def prompt(text="Run a, b and c."):
    return [{"role": "user", "content": text}]


def call_of(body):
    message = body["choices"][0]["message"]
    return message, message.get("tool_calls") or []


def answer(messages, body, result):
    message, (call,) = call_of(body)
    return [
        *messages,
        {"role": "assistant", "content": message.get("content"), "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": result},
    ]


def test_real_openai_client_gets_one_call_per_response_and_upstream_one_complete_list() -> None:
    async def go(http, upstream, server):
        from openai import AsyncOpenAI

        client = AsyncOpenAI(api_key="unused", base_url=str(http.base_url))
        seen = []
        messages = prompt()
        for _ in range(5):
            response = await client.chat.completions.create(
                model="m", messages=messages, parallel_tool_calls=False, tools=list(TRACE.tools)
            )
            message = response.choices[0].message
            seen.append(len(message.tool_calls or []))
            if not message.tool_calls:
                break
            call = message.tool_calls[0]
            messages = [
                *messages,
                message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": f"result of {call.function.name}"},
            ]
        await client.close()
        return seen, upstream.requests, messages

    seen, upstream_requests, client_messages = arun(with_proxy(go))
    assert seen == [1, 1, 1, 0]  # three single-call responses, then the final answer
    assert len(upstream_requests) == 2  # upstream called once per batch
    full = upstream_requests[1]["messages"]
    assert [m["role"] for m in full] == ["user", "assistant", "tool", "tool", "tool"]
    assert [c["id"] for c in full[1]["tool_calls"]] == ["call_0_0", "call_0_1", "call_0_2"]
    assert [m["content"] for m in full[2:]] == ["result of tool_a", "result of tool_b", "result of tool_c"]
    assert validate_messages(full) == [] and validate_messages(client_messages) == []


def test_the_loop_as_a_streaming_client_through_the_proxy() -> None:
    async def go(http, upstream, server):
        from openai import AsyncOpenAI

        client = AsyncOpenAI(api_key="unused", base_url=str(http.base_url))
        result = await run(
            OpenAIModel("m", client, parallel_tool_calls=False),
            replay_tools(TRACE),
            TRACE.initial_messages,
            mode="sequential",
        )
        await client.close()
        return result, server.stats

    result, stats = arun(with_proxy(go))
    assert [len(r.tool_calls) for r in result.rounds] == [1, 1, 1, 0]
    assert result.final_answer == "done"
    assert stats["upstream_calls"] == 2 and stats["served_from_queue"] == 2


def test_without_the_flag_everything_passes_through() -> None:
    async def go(http, upstream, server):
        r = await http.post("/chat/completions", json={"model": "m", "messages": prompt()})
        return call_of(r.json())[1]

    assert len(arun(with_proxy(go))) == 3


def test_retries_are_idempotent() -> None:
    async def go(http, upstream, server):
        body = {"model": "m", "messages": prompt(), "parallel_tool_calls": False}
        key = {"Idempotency-Key": "first-1"}
        first = await http.post("/chat/completions", json=body, headers=key)
        again = await http.post("/chat/completions", json=body, headers=key)
        step2 = {**body, "messages": answer(body["messages"], first.json(), "ra")}
        second = (await http.post("/chat/completions", json=step2)).json()
        second_again = (await http.post("/chat/completions", json=step2)).json()
        return first, again, second, second_again, upstream.request_count

    first, again, second, second_again, calls = arun(with_proxy(go))
    assert first.content == again.content  # the same reply, byte for byte
    assert ids.parse(call_of(first.json())[1][0]["id"]).position == 0
    assert call_of(second)[1] == call_of(second_again)[1]
    assert ids.parse(call_of(second)[1][0]["id"]).position == 1
    assert second == second_again
    assert calls == 1


def test_bad_input_gets_openai_style_errors_and_the_queue_survives() -> None:
    async def go(http, upstream, server):
        out = {}
        r = await http.post(
            "/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
        )
        out["malformed"] = (r.status_code, r.json()["error"]["code"])
        base = {"model": "m", "messages": prompt(), "parallel_tool_calls": False}
        first = (await http.post("/chat/completions", json=base)).json()
        good = answer(base["messages"], first, "ra")
        unknown = json.loads(json.dumps(good))
        unknown[-2]["tool_calls"][0]["id"] = unknown[-1]["tool_call_id"] = "call_zz"
        r = await http.post("/chat/completions", json={**base, "messages": unknown})
        out["unknown"] = (r.status_code, call_of(r.json())[0]["content"])
        tag = ids.parse(good[-1]["tool_call_id"]).tag  # a result for call 1, which was never handed out:
        forged = ids.proxy_id(tag, 1, 3)
        skipping = [
            *good,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{**good[-2]["tool_calls"][0], "id": forged}],
            },
            {"role": "tool", "tool_call_id": forged, "content": "rb"},
        ]
        r = await http.post("/chat/completions", json={**base, "messages": skipping})
        out["out_of_order"] = (r.status_code, r.json()["error"]["message"], forged)
        second = (await http.post("/chat/completions", json={**base, "messages": good})).json()
        out["after_errors"] = call_of(second)[1][0]["function"]["name"]
        third = answer(good, second, "rb")
        stale = [
            *good,
            *third[len(good) : len(good) + 1],
            {"role": "tool", "tool_call_id": "call_0_0", "content": "x"},
        ]
        r = await http.post("/chat/completions", json={**base, "messages": stale})
        out["mismatch"] = r.status_code
        return out

    out = arun(with_proxy(go))
    assert out["malformed"] == (400, "invalid_json")
    # a result for a call no batch issued is not a continuation: it passes through (the trace answers)
    assert out["unknown"] == (200, "done")
    assert out["out_of_order"][0] == 409 and "before the proxy handed that call out" in out["out_of_order"][1]
    assert out["out_of_order"][2] in out["out_of_order"][1]
    assert "(tool_b, position 1 of 3)" in out["out_of_order"][1]
    assert out["after_errors"] == "tool_b"  # nothing was corrupted by the bad requests
    assert out["mismatch"] == 400


class Failing:
    async def send(self, body, headers, *, stream):
        raise UpstreamError("model unreachable", 502)

    async def close(self):
        pass


class Slow:
    async def send(self, body, headers, *, stream):
        await asyncio.sleep(5)

    async def close(self):
        pass


@pytest.mark.parametrize(
    ("upstream", "status", "text"),
    [
        (Failing(), 502, "model unreachable"),
        (Slow(), 504, "sent nothing for 0.2 s (--upstream-timeout, an idle timeout)"),
    ],
)
def test_upstream_errors_and_timeouts(upstream, status, text) -> None:
    async def go(http, up, server):
        r = await http.post("/chat/completions", json={"model": "m", "messages": prompt()})
        return r.status_code, r.json()["error"]["message"]

    code, message = arun(with_proxy(go, upstream=upstream, upstream_timeout_s=0.2))
    assert code == status and text in message


def test_http_upstream_through_a_served_trace() -> None:
    async def go():
        runner, upstream_url = await serve(upstream_app(TraceUpstream(TRACE)))
        try:

            async def inner(http, up, server):
                r = await http.post(
                    "/chat/completions",
                    json={"model": "m", "messages": prompt(), "parallel_tool_calls": False},
                )
                return r.json()

            return await with_proxy(inner, upstream=HTTPUpstream(upstream_url))
        finally:
            await runner.cleanup()

    body = arun(go())
    assert len(call_of(body)[1]) == 1


def _batch(n: int, size: int = 10) -> Batch:
    calls = [
        {"id": f"c{n}_{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for i in range(2)
    ]
    return Batch(
        tag=f"{n:012x}",
        message={"role": "assistant", "content": "x" * size, "tool_calls": calls},
        template={},
    )


def test_store_expires_on_sweep_and_is_bounded_by_count_and_bytes() -> None:
    now = [1000.0]
    store = MemoryStore(StoreLimits(ttl_s=10, max_batches=2), clock=lambda: now[0])
    for n in range(3):
        store.save(_batch(n))
    assert len(store) == 2 and store.get(f"{0:012x}") is None  # least recently used went first
    assert store.tombstone(f"{0:012x}").reason == "evicted"
    now[0] += 11
    assert store.sweep() == 2 and len(store) == 0
    # tombstones are bounded by the same count as batches, and count against the byte bound
    assert store.summary()["batches_expired"] == 2 and store.summary()["tombstones"] == 2
    by_bytes = MemoryStore(StoreLimits(max_bytes=6_000))  # a batch here takes about 2.6 KB
    for n in range(5):
        by_bytes.save(_batch(n, size=2_000))
    # tombstones go last (they are small, and let a 410 say why): 4 of them and one batch fit
    assert len(by_bytes) == 1 and by_bytes.total_bytes <= 6_000
    assert by_bytes.summary()["tombstones"] == 4 and by_bytes.tombstones_dropped == 0


def test_load_many_conversations_no_lost_or_crossed_results() -> None:
    """200 conversations x a 3-call batch from 20 concurrent clients (bounded: about 800 requests)."""

    async def go(http, upstream, server):
        gate = asyncio.Semaphore(20)

        async def conversation(n: int) -> list[str]:
            async with gate:
                messages = prompt(f"conversation {n}: run a, b and c")
                body = {"model": "m", "messages": messages, "parallel_tool_calls": False}
                for _ in range(4):
                    reply = (await http.post("/chat/completions", json=body)).json()
                    _, calls = call_of(reply)
                    if not calls:
                        return [m["content"] for m in body["messages"] if m["role"] == "tool"]
                    pos = ids.parse(calls[0]["id"]).position
                    body = {**body, "messages": answer(body["messages"], reply, f"conv {n} {pos}")}
                raise AssertionError("no final answer")

        results = await asyncio.gather(*(conversation(n) for n in range(200)))
        return results, list(upstream.requests), server.stats

    results, upstream_requests, stats = arun(with_proxy(go))
    for n, tool_results in enumerate(results):
        assert tool_results == [f"conv {n} {i}" for i in range(3)]
    complete = [r["messages"] for r in upstream_requests if len(r["messages"]) == 5]
    assert len(complete) == 200 and len(upstream_requests) == 400 and stats["upstream_calls"] == 400
    for messages in complete:  # every upstream list holds one conversation's own results, in order
        n = messages[0]["content"].split(":")[0].split()[1]
        assert [m["content"] for m in messages[2:]] == [f"conv {n} {i}" for i in range(3)]
        assert [m["tool_call_id"] for m in messages[2:]] == [f"call_0_{i}" for i in range(3)]
    assert stats["error_replies_4xx"] == stats["error_replies_5xx"] == 0


def test_already_answered_results_are_refused() -> None:
    async def go(http, upstream, server):
        base = {"model": "m", "messages": prompt(), "parallel_tool_calls": False}
        first = (await http.post("/chat/completions", json=base)).json()
        step1 = answer(base["messages"], first, "ra")
        second = (await http.post("/chat/completions", json={**base, "messages": step1})).json()
        step2 = answer(step1, second, "rb")
        await http.post("/chat/completions", json={**base, "messages": step2})
        stale = base["messages"]  # the conversation before any answer, but extended differently
        replayed_first = [
            *stale,
            step1[1],
            {"role": "tool", "tool_call_id": step1[2]["tool_call_id"], "content": "changed"},
        ]
        r1 = await http.post("/chat/completions", json={**base, "messages": replayed_first})
        return r1.status_code, r1.json()

    status, body = arun(with_proxy(go))
    assert status == 409 and "already answered with different content" in body["error"]["message"]
    assert "(tool_a, position 0 of 3)" in body["error"]["message"] and "call_tlp" in body["error"]["message"]


def test_identical_conversations_are_kept_apart_by_the_session_header() -> None:
    async def go(http, upstream, server):
        base = {"model": "m", "messages": prompt(), "parallel_tool_calls": False}
        a = (await http.post("/chat/completions", json=base, headers={"x-session-id": "A"})).json()
        step_a = answer(base["messages"], a, "from A")
        await http.post("/chat/completions", json={**base, "messages": step_a}, headers={"x-session-id": "A"})
        b = (await http.post("/chat/completions", json=base, headers={"x-session-id": "B"})).json()
        return ids.parse(call_of(a)[1][0]["id"]), ids.parse(call_of(b)[1][0]["id"])

    a, b = arun(with_proxy(go))
    assert a.position == b.position == 0  # B: its own queue
    assert a.tag != b.tag


def test_proxy_command_serves_a_trace_on_loopback(tmp_path) -> None:
    import subprocess
    import sys

    from toolcall_lab.trace_files import save

    path = save(TRACE, tmp_path / "three.json")
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolcall_lab", "proxy", "--upstream", str(path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("serialized proxy on http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split()[3]
        reply = httpx.post(
            f"{url}/chat/completions",
            json={"model": "m", "messages": prompt(), "parallel_tool_calls": False},
            timeout=10,
        ).json()
        assert len(call_of(reply)[1]) == 1
        assert httpx.get(url.removesuffix("/v1") + "/health", timeout=10).json()["open_batches"] == 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


def test_health_counts_each_request_once_whichever_path_answers_it() -> None:
    """``requests`` is the number of requests received: a serialized 3-call conversation is 4 (two go
    upstream through the task path, two are answered from the queue on the synchronous path), a
    pass-through request 1, a refused one 1; GET /health is not counted (as in serve-trace: a monitor
    polling it inflates nothing)."""

    async def go(http, upstream, server):
        async def health():
            return (await http.get(str(http.base_url).rstrip("/").removesuffix("/v1") + "/health")).json()

        messages = prompt()
        for _ in range(4):
            r = await http.post(
                "/chat/completions", json={"model": "m", "messages": messages, "parallel_tool_calls": False}
            )
            assert r.status_code == 200
            _, calls = call_of(r.json())
            if not calls:
                break
            messages = answer(messages, r.json(), "ok")
        h = await health()
        assert (h["requests"], h["upstream_calls"], h["served_from_queue"]) == (4, 2, 2)
        r = await http.post("/chat/completions", json={"model": "m", "messages": prompt("other")})
        assert r.status_code == 200  # passed through (no parallel_tool_calls: false)
        r = await http.post("/chat/completions", content=b"{not json")
        assert r.status_code == 400
        h = await health()
        assert h["requests"] == 4 + 1 + 1
        assert (await health())["requests"] == 4 + 1 + 1  # (the polls themselves are not counted)
        assert h["upstream_calls"] == 3

    arun(with_proxy(go))

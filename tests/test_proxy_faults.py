"""The proxy under faults: never cross, never lose, pass everything else through (issue 12).

Each test drives the proxy over HTTP on loopback against an upstream that checks what it receives;
expiry runs on an injected clock (no wall-clock thresholds).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.proxy_helpers import CheckingUpstream, ScriptedHTTP, completion, tool_result
from toolcall_lab.proxy import HTTPUpstream, ProxyServer, ProxySettings, TraceUpstream, ids
from toolcall_lab.proxy.batches import NEVER_HANDED_OUT
from toolcall_lab.scenarios import SCENARIOS

TRACE = SCENARIOS["three_tools_100ms"].record()


def arun(coro):
    return asyncio.run(coro)


async def proxied(fn, upstream, **kwargs):
    server = ProxyServer(upstream, **kwargs)
    url = await server.start()
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            return await fn(http, server)
    finally:
        await server.close()


async def checking(fn, **kwargs):
    up = CheckingUpstream()
    url = await up.start()
    try:
        return await proxied(lambda http, server: fn(http, server, up), HTTPUpstream(url), **kwargs), up
    finally:
        await up.close()


def body(messages, **extra):
    return {"model": "m", "messages": messages, "parallel_tool_calls": False, **extra}


def the_call(reply):
    (call,) = reply["choices"][0]["message"]["tool_calls"]
    return call


def answered(messages, reply, content=None):
    """The client's next message list: the one call it received, then its result."""
    message = reply["choices"][0]["message"]
    call = the_call(reply)
    result = (
        content
        if content is not None
        else tool_result(call["function"]["name"], call["function"]["arguments"])
    )
    return [*messages, message, {"role": "tool", "tool_call_id": call["id"], "content": result}]


async def converse(http, messages, headers=None, content=None):
    """Drive one conversation to its final answer; returns (final reply, client messages)."""
    for _ in range(10):
        reply = (await http.post("/chat/completions", json=body(messages), headers=headers or {})).json()
        if not reply["choices"][0]["message"].get("tool_calls"):
            return reply, messages
        messages = answered(messages, reply, content)
    raise AssertionError("no final answer")


def test_identical_conversations_without_a_header_never_cross() -> None:
    async def go(http, server, up):
        first = [{"role": "user", "content": "same question"}]
        a = (await http.post("/chat/completions", json=body(first))).json()
        b = (await http.post("/chat/completions", json=body(first))).json()  # identical, another client
        ma, mb = answered(first, a), answered(first, b)
        for _ in range(2):  # interleave the two conversations
            ra = (await http.post("/chat/completions", json=body(ma))).json()
            rb = (await http.post("/chat/completions", json=body(mb))).json()
            ma, mb = answered(ma, ra), answered(mb, rb)
        fa = (await http.post("/chat/completions", json=body(ma))).json()
        fb = (await http.post("/chat/completions", json=body(mb))).json()
        return the_call(a)["id"], the_call(b)["id"], ma, mb, fa, fb

    (ida, idb, ma, mb, fa, fb), up = arun(checking(go))
    assert ida != idb  # two upstream requests, two batches
    assert up.problems == [] and len(up.completed) == 2
    tags = {ids.parse(m["tool_call_id"]).tag for m in ma + mb if m["role"] == "tool"}
    assert len(tags) == 2  # each conversation's results name its own batch
    sent = [[m.get("tool_call_id") for m in c if m["role"] == "tool"] for c in up.completed]
    issued = [[c["id"] for c in calls] for calls in up.issued.values()]
    assert sent == issued and not set(sent[0]) & set(sent[1])  # the upstream's own ids, never crossed
    assert fa["choices"][0]["message"]["content"] != fb["choices"][0]["message"]["content"]


def test_identical_conversations_from_an_upstream_that_repeats_ids_keep_their_own_results() -> None:
    """A deterministic upstream gives both conversations the same call ids; results still never cross."""

    async def go(http, server):
        first = [{"role": "user", "content": "Run a, b and c."}]
        a = (await http.post("/chat/completions", json=body(first))).json()
        b = (await http.post("/chat/completions", json=body(first))).json()
        ma, mb = answered(first, a, "from A"), answered(first, b, "from B")
        for _ in range(3):
            ra = (await http.post("/chat/completions", json=body(ma))).json()
            rb = (await http.post("/chat/completions", json=body(mb))).json()
            if not ra["choices"][0]["message"].get("tool_calls"):
                break
            ma, mb = answered(ma, ra, "from A"), answered(mb, rb, "from B")
        return server.upstream.requests

    upstream = TraceUpstream(TRACE)
    requests = arun(proxied(go, upstream))
    complete = [
        [m["content"] for m in r["messages"] if m["role"] == "tool"]
        for r in requests
        if len(r["messages"]) == 5
    ]
    assert sorted(complete) == [["from A"] * 3, ["from B"] * 3]


def test_a_changed_result_is_a_conflict_naming_the_call_and_nothing_is_recorded() -> None:
    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        m1 = answered(first, r0)
        r1 = (await http.post("/chat/completions", json=body(m1))).json()
        changed = json.loads(json.dumps(m1))
        changed[-1]["content"] = "something else"
        conflict = await http.post("/chat/completions", json=body(changed))
        final, _ = await converse(http, answered(m1, r1))
        return the_call(r0), conflict, final, server.stats

    (call0, conflict, final, stats), up = arun(checking(go))
    assert conflict.status_code == 409
    error = conflict.json()["error"]
    assert (
        error["code"] == "result_conflict"
        and call0["id"] in error["message"]
        and "get_weather" in error["message"]
    )
    assert up.problems == [] and len(up.completed) == 1  # the original result went upstream
    assert final["choices"][0]["message"]["content"].startswith("All done")
    assert stats["conflicts"] == 1


def test_session_header_retry_while_open_and_a_new_conversation_after_it_finished() -> None:
    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        h = {"x-session-id": "S"}
        r0 = (await http.post("/chat/completions", json=body(first), headers=h)).json()
        retry = (await http.post("/chat/completions", json=body(first), headers=h)).json()
        calls_after_retry = len(up.requests)
        await converse(http, answered(first, r0), headers=h)
        again = await http.post("/chat/completions", json=body(first), headers=h)
        return r0, retry, calls_after_retry, again, len(up.requests)

    (r0, retry, calls_after_retry, again, total), _ = arun(checking(go))
    assert retry == r0 and calls_after_retry == 1  # a retry, served from the queue
    assert again.status_code == 200 and the_call(again.json())["id"] != the_call(r0)["id"]  # not refused
    assert total == 3


def test_expired_batch_is_gone_with_the_calls_never_handed_out_and_nothing_forwarded() -> None:
    now = [1_000_000.0]

    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        m1 = answered(first, r0)
        r1 = (await http.post("/chat/completions", json=body(m1))).json()
        now[0] += 61
        health = (await http.get(str(http.base_url).replace("/v1/", "/health"))).json()
        late = await http.post("/chat/completions", json=body(answered(m1, r1)))
        return late, health, len(up.requests)

    (late, health, upstream_requests), _ = arun(checking(go, ttl_s=60, clock=lambda: now[0]))
    assert health["open_batches"] == 0 and health["batches_expired"] == 1 and health["tombstones"] == 1
    assert late.status_code == 410
    message = late.json()["error"]["message"]
    assert "expired after 60 s" in message and "position 2 (get_stock)" in message
    assert "resend the conversation without" in message
    assert upstream_requests == 1  # the partial batch was never forwarded


def test_evicted_batch_is_gone_too() -> None:
    async def go(http, server, up):
        a = [{"role": "user", "content": "a"}]
        ra = (await http.post("/chat/completions", json=body(a))).json()
        await http.post("/chat/completions", json=body([{"role": "user", "content": "b"}]))
        return await http.post("/chat/completions", json=body(answered(a, ra)))

    late, _ = arun(checking(go, max_batches=1))
    assert late.status_code == 410 and late.json()["error"]["code"] == "batch_evicted"
    assert "evicted to stay within the proxy's bounds" in late.json()["error"]["message"]


def test_durable_state_resumes_an_open_batch_after_a_restart(tmp_path) -> None:
    state = tmp_path / "proxy.sqlite"

    async def go():
        up = CheckingUpstream()
        url = await up.start()
        try:
            first = [{"role": "user", "content": "q"}]

            async def part1(http, server):
                r0 = (await http.post("/chat/completions", json=body(first))).json()
                m1 = answered(first, r0)
                r1 = (await http.post("/chat/completions", json=body(m1))).json()
                return answered(m1, r1)

            m2 = await proxied(part1, HTTPUpstream(url), state=state)
            final, _ = await proxied(lambda http, server: converse(http, m2), HTTPUpstream(url), state=state)
            return final, up
        finally:
            await up.close()

    final, up = arun(go())
    assert up.problems == [] and len(up.completed) == 1 and len(up.requests) == 2
    assert final["choices"][0]["message"]["content"].startswith("All done")


def test_a_new_user_message_mid_batch_answers_the_pending_calls_as_not_executed() -> None:
    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        m1 = answered(first, r0)
        turn = [*m1, {"role": "user", "content": "never mind, something else"}]
        r = await http.post("/chat/completions", json=body(turn))
        return r, up.requests[-1]["messages"], server.store.summary()

    (r, sent, summary), _ = arun(checking(go))
    assert r.status_code == 200  # the new turn proceeds
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "tool", "user"]
    assert len(sent[1]["tool_calls"]) == 3
    assert sent[2]["content"].startswith("get_weather says")
    assert sent[3]["content"] == sent[4]["content"] == NEVER_HANDED_OUT  # result 0 came with the new turn
    assert summary["interrupted_batches"] == 1 and summary["open_batches"] == 1  # the new turn's batch


def test_unknown_fields_reach_the_upstream_unchanged() -> None:
    async def go():
        up = ScriptedHTTP([(200, {}, completion({"role": "assistant", "content": "hi"}))] * 2)
        url = await up.start()
        try:

            async def send(http, server):
                extra = {"top_k": 3, "vendor": {"x": [1, 2]}, "min_p": 0.1}
                plain = await http.post(
                    "/chat/completions", json={**body([{"role": "user", "content": "q"}]), **extra}
                )
                passed = await http.post(
                    "/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "q"}], **extra},
                )
                return plain.status_code, passed.status_code

            return await proxied(send, HTTPUpstream(url)), up.requests
        finally:
            await up.close()

    statuses, requests = arun(go())
    assert statuses == (200, 200)
    for r in requests:
        assert r["top_k"] == 3 and r["vendor"] == {"x": [1, 2]} and r["min_p"] == 0.1


@pytest.mark.parametrize("serial", [True, False])
def test_upstream_errors_keep_status_body_and_retry_after_and_are_not_retried(serial) -> None:
    limited = json.dumps(
        {"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit"}}
    ).encode()

    async def go():
        up = ScriptedHTTP(
            [
                (429, {"Retry-After": "7", "Content-Type": "application/json"}, limited),
                (500, {"Content-Type": "text/html"}, b"<html>boom</html>"),
                (200, {"Content-Type": "application/json"}, b"not json at all"),
            ]
        )
        url = await up.start()
        try:

            async def send(http, server):
                q = (
                    body([{"role": "user", "content": "q"}])
                    if serial
                    else {"model": "m", "messages": [{"role": "user", "content": "q"}]}
                )
                return [await http.post("/chat/completions", json=q) for _ in range(3)]

            return await proxied(send, HTTPUpstream(url)), up.requests
        finally:
            await up.close()

    (r429, r500, r200), requests = arun(go())
    assert len(requests) == 3  # one upstream request per client request: no retries inside the proxy
    assert r429.status_code == 429 and r429.headers["retry-after"] == "7" and r429.content == limited
    assert r500.status_code == 500 and "<html>boom</html>" in r500.json()["error"]["message"]
    assert r200.status_code == 502 and r200.json()["error"]["code"] == "upstream_bad_response"
    assert "not json at all" in r200.json()["error"]["message"]


def test_every_proxy_error_is_json_including_a_too_large_body_and_unknown_paths() -> None:
    async def go(http, server):
        big = await http.post(
            "/chat/completions", content=b"x" * 5000, headers={"content-type": "application/json"}
        )
        missing = await http.post("/nope", json={})
        wrong = await http.get("/chat/completions")
        return big, missing, wrong

    big, missing, wrong = arun(proxied(go, TraceUpstream(TRACE), max_body_bytes=4096))
    assert (
        big.status_code == 413
        and "larger than the proxy's limit of 4096 bytes" in big.json()["error"]["message"]
    )
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    assert wrong.status_code == 405 and "error" in wrong.json()
    assert ProxySettings().max_body_bytes >= 32 * 1024 * 1024


def test_queued_and_streamed_replies_keep_fingerprint_created_and_usage() -> None:
    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        m1 = answered(first, r0)
        r1 = (await http.post("/chat/completions", json=body(m1))).json()
        streamed = await http.post("/chat/completions", json=body(answered(m1, r1), stream=True))
        s_plain = await http.post("/chat/completions", json=body(m1, stream=True))
        s_usage = await http.post(
            "/chat/completions", json=body(m1, stream=True, stream_options={"include_usage": True})
        )
        return r0, r1, streamed.text, s_plain.text, s_usage.text

    (r0, r1, streamed, s_plain, s_usage), _ = arun(checking(go))
    assert r0["system_fingerprint"] == r1["system_fingerprint"] == "fp_checking"
    assert r0["created"] == r1["created"] and r1["id"] == r0["id"] + "-1"
    assert r0["usage"]["total_tokens"] == 18 and r1["usage"] is None  # served from the queue: no figure

    def events(text):
        return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]

    assert all(
        e["system_fingerprint"] == "fp_checking" and e["created"] == r0["created"] for e in events(streamed)
    )
    assert not any("usage" in e for e in events(s_plain))
    assert events(s_usage)[-1]["choices"] == [] and events(s_usage)[-1]["usage"] is None


def test_a_batch_that_repeats_a_call_id_gets_one_result_per_call_in_order() -> None:
    calls = [
        {"id": "dup", "type": "function", "function": {"name": "f", "arguments": '{"i": 0}'}},
        {"id": "dup", "type": "function", "function": {"name": "f", "arguments": '{"i": 1}'}},
    ]

    async def go():
        up = ScriptedHTTP(
            [
                (200, {}, completion({"role": "assistant", "content": None, "tool_calls": calls})),
                (200, {}, completion({"role": "assistant", "content": "ok"})),
            ]
        )
        url = await up.start()
        try:

            async def send(http, server):
                first = [{"role": "user", "content": "q"}]
                r0 = (await http.post("/chat/completions", json=body(first))).json()
                m1 = answered(first, r0, "first")
                r1 = (await http.post("/chat/completions", json=body(m1))).json()
                final = (await http.post("/chat/completions", json=body(answered(m1, r1, "second")))).json()
                return the_call(r0), the_call(r1), final

            return await proxied(send, HTTPUpstream(url)), up.requests
        finally:
            await up.close()

    (c0, c1, final), requests = arun(go())
    assert c0["function"]["arguments"] == '{"i": 0}' and c1["function"]["arguments"] == '{"i": 1}'
    sent = requests[-1]["messages"]
    assert sent[1]["tool_calls"] == calls and [m["content"] for m in sent[2:]] == ["first", "second"]
    assert final["choices"][0]["message"]["content"] == "ok"


def test_trace_upstream_keeps_counts_not_every_body() -> None:
    upstream = TraceUpstream(TRACE, keep_requests=5)
    for _ in range(50):
        arun(upstream.complete({"messages": [{"role": "user", "content": "q"}]}))
    assert upstream.request_count == 50 and len(upstream.requests) == 5

"""The proxy on the wire (issue 12, third pass): what a second fresh-eyes tester found, each pinned over
HTTP on loopback. No figure is invented (usage, logprobs), streams are cut only when idle, clients are
told not to retry refusals that will not change, idempotent retries compare JSON, one proxy per state
file, handed-out ids stay short, edited calls are refused.

Timeouts here are behaviour, not speed: each test leaves a wide margin (a stream piece every 0.05 s
against an idle timeout of 0.5 s) and asserts what arrived, never how long it took.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web

from tests.proxy_helpers import ScriptedHTTP, completion
from tests.test_proxy_faults import answered, arun, body, checking, converse, proxied
from toolcall_lab.exceptions import UsageError
from toolcall_lab.proxy import HTTPUpstream, ProxyServer, ids
from toolcall_lab.proxy.store import SQLiteStore
from toolcall_lab.proxy.upstreams import serve


def call(cid: Any, name: str, arguments: str) -> dict:
    out: dict = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if cid is not None:
        out["id"] = cid
    return out


async def with_app(app: web.Application, fn, **kwargs):
    """`fn(http, server, requests)` against a proxy in front of `app`; requests: bodies the app got."""
    runner, url = await serve(app)
    try:
        return await proxied(fn, HTTPUpstream(url), **kwargs)
    finally:
        await runner.cleanup()


async def with_scripted(replies, fn, **kwargs):
    up = ScriptedHTTP(replies)
    url = await up.start()
    try:
        return await proxied(fn, HTTPUpstream(url), **kwargs), up.requests
    finally:
        await up.close()


def events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


# --- A5: no invented figures, other fields kept ------------------------------------------------------

TWO = [call("call_a", "f", '{"i": 0}'), call("call_b", "g", '{"i": 1}')]
LOGPROBS = {"content": [{"token": "x", "logprob": -0.1, "bytes": [120], "top_logprobs": []}]}


@pytest.mark.parametrize("with_usage", [False, True])
def test_usage_the_upstream_did_not_send_is_absent_and_queued_replies_carry_none(with_usage) -> None:
    message = {"role": "assistant", "content": "Two lookups.", "tool_calls": TWO}
    first = json.loads(completion(message))
    if not with_usage:
        del first["usage"]
    first["choices"][0]["logprobs"] = LOGPROBS
    first["choices"][0]["stop_reason"] = "vendor field"
    first["provider"] = "some-router"

    async def go(http, server):
        start = [{"role": "user", "content": "q"}]
        r0 = (await http.post("/chat/completions", json=body(start))).json()
        r1 = (await http.post("/chat/completions", json=body(answered(start, r0, "r")))).json()
        return r0, r1

    (r0, r1), _ = arun(with_scripted([(200, {}, json.dumps(first).encode())], go))
    if with_usage:
        assert r0["usage"] == first["usage"]  # the upstream's own figures, on the reply that carries its text
    else:
        assert "usage" not in r0  # never a made-up zero
    assert r1["usage"] is None  # served from the queue: no model ran, no figure
    choice0, choice1 = r0["choices"][0], r1["choices"][0]
    assert choice0["logprobs"] == LOGPROBS and choice0["stop_reason"] == "vendor field"
    assert r0["provider"] == "some-router" and choice0["message"]["content"] == "Two lookups."
    assert choice1["logprobs"] is None and "stop_reason" not in choice1 and "provider" not in r1


def test_streamed_hand_outs_carry_the_upstreams_usage_and_logprobs_on_the_first_reply_only() -> None:
    message = {"role": "assistant", "content": "Two lookups.", "tool_calls": TWO}
    first = json.loads(completion(message))
    first["choices"][0]["logprobs"] = LOGPROBS
    ask = {"stream": True, "stream_options": {"include_usage": True}}

    async def go(http, server):
        start = [{"role": "user", "content": "q"}]
        r0 = (await http.post("/chat/completions", json=body(start, **ask))).text
        held = events(r0)
        call0 = held[1]["choices"][0]["delta"]["tool_calls"][0]
        reply = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call0]}}]}
        r1 = (await http.post("/chat/completions", json=body(answered(start, reply, "r"), **ask))).text
        return held, events(r1)

    (e0, e1), _ = arun(with_scripted([(200, {}, json.dumps(first).encode())], go))
    assert e0[0]["choices"][0]["logprobs"] == LOGPROBS and e0[-1]["usage"] == first["usage"]
    assert e1[0]["choices"][0]["logprobs"] is None and e1[-1]["choices"] == [] and e1[-1]["usage"] is None


# --- A6: idle timeouts, not total ones ---------------------------------------------------------------


def streaming_app(pieces: int, pause_s: float, stall_after: int | None = None) -> web.Application:
    """An upstream that streams `pieces` content chunks `pause_s` apart (and, with `stall_after`, goes
    silent for 1.5 s after that many)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await out.prepare(request)
        for i in range(pieces):
            if stall_after is not None and i == stall_after:
                await asyncio.sleep(1.5)
            chunk = {"id": "s", "object": "chat.completion.chunk", "created": 1, "model": "m"}
            chunk["choices"] = [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}]
            await out.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            await asyncio.sleep(pause_s)
        await out.write(b"data: [DONE]\n\n")
        return out

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    return app


def stream_through(app: web.Application, **settings):
    async def go(http, server):
        ask = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
        return (await http.post("/chat/completions", json=ask)).text

    return arun(with_app(app, go, **settings))


def test_a_stream_that_keeps_flowing_is_never_cut_by_the_idle_timeout() -> None:
    """A6: 20 pieces 0.05 s apart (about a second in all) against an idle timeout of 0.5 s."""
    text = stream_through(streaming_app(20, 0.05), upstream_timeout_s=0.5)
    assert [e["choices"][0]["delta"]["content"] for e in events(text)] == [f"w{i} " for i in range(20)]
    assert text.endswith("data: [DONE]\n\n") and "error" not in text


def test_a_stream_that_stops_sending_is_cut_with_an_error_event_naming_the_idle_timeout() -> None:
    text = stream_through(streaming_app(5, 0.01, stall_after=2), upstream_timeout_s=0.3)
    got = events(text)
    assert [e["choices"][0]["delta"]["content"] for e in got[:-1]] == ["w0 ", "w1 "]
    error = got[-1]["error"]
    assert error["code"] == "upstream_timeout" and "sent nothing for 0.3 s" in error["message"]
    assert "--upstream-timeout, an idle timeout" in error["message"]


def test_an_optional_total_cap_cuts_even_a_flowing_stream() -> None:
    text = stream_through(streaming_app(40, 0.05), upstream_timeout_s=5, upstream_total_timeout_s=0.4)
    error = events(text)[-1]["error"]
    assert error["code"] == "upstream_timeout" and "--upstream-total-timeout" in error["message"]


# --- A7: refusals that will not change say so --------------------------------------------------------


def test_the_openai_client_does_not_retry_a_507_or_a_conflict() -> None:
    """A7: `x-should-retry: false` on deterministic refusals; the client's max_retries=2 would otherwise
    send each three times (and a 507 costs an upstream call each time)."""
    from openai import APIStatusError, AsyncOpenAI

    huge = {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("a", "f", "x" * 20_000), call("b", "g", "y")],
    }

    async def go(http, server):
        client = AsyncOpenAI(base_url=str(http.base_url), api_key="dummy", max_retries=2)
        try:
            with pytest.raises(APIStatusError) as refused:
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "q"}], parallel_tool_calls=False
                )
            gone = "call_tlp0123456789ab_0of2"
            stale = [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [call(gone, "f", "{}")]},
                {"role": "tool", "tool_call_id": gone, "content": "r"},
            ]
            raw = await http.post("/chat/completions", json=body(stale))
            return refused.value, raw
        finally:
            await client.close()

    (refused, raw), requests = arun(with_scripted([(200, {}, completion(huge))] * 3, go, max_bytes=10_000))
    assert refused.status_code == 507 and refused.response.headers["x-should-retry"] == "false"
    assert len(requests) == 1  # one upstream call, not three
    assert raw.status_code == 410 and raw.headers["x-should-retry"] == "false"


def test_errors_a_retry_may_cure_leave_the_client_free_to_retry() -> None:
    async def go(http, server):
        return await http.post("/chat/completions", json=body([{"role": "user", "content": "q"}]))

    reply, _ = arun(with_scripted([(200, {"Content-Type": "text/html"}, b"<html>gateway</html>")], go))
    assert reply.status_code == 502 and "x-should-retry" not in reply.headers


# --- B9, B10: idempotent retries --------------------------------------------------------------------


def test_a_serialized_streamed_reply_is_kept_whole_and_replayed_byte_for_byte() -> None:
    """B9: with parallel_tool_calls false the proxy builds the stream itself, so it keeps it."""

    async def go(http, server, up):
        ask = body([{"role": "user", "content": "q"}], stream=True)
        key = {"Idempotency-Key": "k-stream"}
        return [await http.post("/chat/completions", json=ask, headers=key) for _ in range(2)]

    (first, again), up = arun(checking(go))
    assert first.status_code == again.status_code == 200 and first.content == again.content
    assert len(up.requests) == 1


def test_an_idempotency_key_compares_json_not_bytes() -> None:
    """B10: the same JSON with other spacing or key order is the same request; other values are not."""

    async def go(http, server, up):
        ask = body([{"role": "user", "content": "q"}], temperature=0.5)
        key = {"Idempotency-Key": "k-json", "Content-Type": "application/json"}
        first = await http.post("/chat/completions", content=json.dumps(ask), headers=key)
        spaced = json.dumps(dict(reversed(list(ask.items()))), indent=2)
        again = await http.post("/chat/completions", content=spaced, headers=key)
        other = await http.post(
            "/chat/completions", content=json.dumps({**ask, "temperature": 0.6}), headers=key
        )
        return first, again, other

    (first, again, other), up = arun(checking(go))
    assert again.status_code == 200 and again.content == first.content and len(up.requests) == 1
    assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency_key_reused"


# --- B11: one proxy per state file -------------------------------------------------------------------


def test_two_proxies_cannot_share_one_state_file(tmp_path) -> None:
    path = tmp_path / "state.sqlite"
    first = SQLiteStore(path)
    with pytest.raises(UsageError, match="another process \\(another proxy\\?\\) has this state file open"):
        ProxyServer(HTTPUpstream("http://127.0.0.1:9/v1"), state=path)
    first.close()
    SQLiteStore(path).close()  # free again once the first one is gone


# --- B13: short ids, and the mapping kept -----------------------------------------------------------


@pytest.mark.parametrize(
    "upstream_ids",
    [
        ["call_" + "A" * 24, "call_" + "B" * 24],  # OpenAI's 29 characters
        ["c" * 5000, "d" * 5000],  # absurdly long
        ["", ""],  # Gemini's OpenAI compatibility
        [None, None],  # no id at all
    ],
    ids=["openai-29", "long", "empty", "missing"],
)
def test_handed_out_ids_are_at_most_40_characters_and_upstream_ids_come_back(upstream_ids) -> None:
    """B13, C23: whatever the upstream's ids, the client sees ids of at most 40 characters; the
    upstream gets its own back (a call sent without an id gets the proxy's, in the call and its
    result, never an empty tool_call_id)."""
    calls = [call(upstream_ids[0], "f", '{"i": 0}'), call(upstream_ids[1], "g", '{"i": 1}')]
    replies = [
        (200, {}, completion({"role": "assistant", "content": None, "tool_calls": calls})),
        (200, {}, completion({"role": "assistant", "content": "done"})),
    ]

    async def go(http, server):
        _, messages = await converse(http, [{"role": "user", "content": "q"}], content="r")
        return messages

    messages, requests = arun(with_scripted(replies, go))
    handed = [c["id"] for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    assert len(handed) == 2 and all(len(i) <= 40 and ids.parse(i) for i in handed)
    sent = requests[-1]["messages"]
    sent_calls = sent[1]["tool_calls"]
    if upstream_ids[0]:
        assert sent_calls == calls
    else:
        assert [c["id"] for c in sent_calls] == handed  # filled in with the proxy's ids
    assert [m["tool_call_id"] for m in sent[2:]] == [c["id"] for c in sent_calls]
    assert all(m["tool_call_id"] for m in sent[2:])


def test_after_expiry_the_tombstone_restores_the_upstreams_ids_in_later_turns() -> None:
    """B13: the mapping outlives the batch (in its tombstone), so a later turn still goes up under the
    upstream's own ids."""
    now = [1_000_000.0]

    async def go(http, server, up):
        final, messages = await converse(http, [{"role": "user", "content": "q"}])
        now[0] += 61
        server.sweep()
        later = [*messages, final["choices"][0]["message"], {"role": "user", "content": "and now?"}]
        await http.post("/chat/completions", json=body(later))
        return up.requests[-1]["messages"]

    sent, up = arun(checking(go, ttl_s=60, clock=lambda: now[0]))
    issued = next(iter(up.issued.values()))
    assert sent[1]["tool_calls"] == issued and [m["tool_call_id"] for m in sent[2:5]] == [
        c["id"] for c in issued
    ]


# --- B14: edited calls -------------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["held", "expired"])
def test_a_call_the_client_edited_is_refused_while_the_proxy_knows_it(when) -> None:
    """B14: the client's copy of a call must be the call handed out (re-serialised arguments are fine);
    the proxy checks it against its record, or after expiry against the tombstone."""
    now = [1_000_000.0]

    async def go(http, server, up):
        start = [{"role": "user", "content": "q"}]
        m1 = answered(start, (await http.post("/chat/completions", json=body(start))).json())
        if when == "expired":
            m2 = answered(m1, (await http.post("/chat/completions", json=body(m1))).json())
            m3 = answered(m2, (await http.post("/chat/completions", json=body(m2))).json())
            now[0] += 61
            server.sweep()
            edited = json.loads(json.dumps(m3))
        else:
            edited = json.loads(json.dumps(m1))
        fn = edited[1]["tool_calls"][0]["function"]
        respaced = json.loads(json.dumps(edited))
        if when == "held":  # after expiry the client's copy is what goes up, so it must be the model's bytes
            respaced[1]["tool_calls"][0]["function"]["arguments"] = json.dumps(
                json.loads(fn["arguments"]), indent=1
            )
        fn["arguments"] = json.dumps({"query": "something else"})
        refused = await http.post("/chat/completions", json=body(edited))
        accepted = await http.post("/chat/completions", json=body(respaced))
        return refused, accepted

    (refused, accepted), up = arun(checking(go, ttl_s=60, clock=lambda: now[0]))
    assert refused.status_code == 400 and refused.headers["x-should-retry"] == "false"
    message = refused.json()["error"]["message"]
    assert "message 1: call 'call_tlp" in message and "(position 0 of 3) differs" in message
    assert accepted.status_code == 200, accepted.text
    assert up.problems == []


# --- C16 and the HTTP side --------------------------------------------------------------------------


def test_a_trailing_slash_is_a_404_that_names_the_route() -> None:
    async def go(http, server, up):
        return await http.post("/chat/completions/", json=body([{"role": "user", "content": "q"}]))

    reply, _ = arun(checking(go))
    assert (
        reply.status_code == 404 and "did you mean /v1/chat/completions?" in reply.json()["error"]["message"]
    )


async def raw_exchange(url: str, data: bytes, *, read_until: bytes = b"}") -> bytes:
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(data)
    await writer.drain()
    out = b""
    try:
        while True:
            piece = await asyncio.wait_for(reader.read(65536), 5)
            if not piece:
                break
            out += piece
            if out.count(read_until) >= 1 and out.rstrip().endswith(read_until):
                break
    finally:
        writer.close()
    return out


def test_the_server_reads_chunked_bodies_expect_continue_http10_and_pipelined_requests() -> None:
    payload = json.dumps(body([{"role": "user", "content": "q"}])).encode()
    chunked = b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in (payload[:10], payload[10:])) + b"0\r\n\r\n"
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"

    async def go(http, server, up):
        url = str(http.base_url)
        one = await raw_exchange(url, head + b"Transfer-Encoding: chunked\r\n\r\n" + chunked)
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(head + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(payload))
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        writer.write(payload)
        expect = interim + await asyncio.wait_for(reader.readuntil(b"}]}"), 5)
        writer.close()
        old = await raw_exchange(
            url,
            b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload,
        )
        health = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        piped = await raw_exchange(url, health + health, read_until=b"}")
        bad = await raw_exchange(url, b"NONSENSE\r\n\r\n")
        return one, expect, old, piped, bad

    (one, expect, old, piped, bad), up = arun(checking(go))
    assert one.startswith(b"HTTP/1.1 200 OK") and b'"tool_calls"' in one
    assert expect.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK")
    assert old.startswith(b"HTTP/1.1 200 OK") and b"Connection: close" in old
    assert piped.count(b"HTTP/1.1 200 OK") == 2
    assert bad.startswith(b"HTTP/1.1 400") and b'"code":"invalid_http"' in bad
    assert len(up.requests) == 3


def test_the_upstream_client_reads_chunked_gzip_and_close_delimited_replies() -> None:
    import gzip

    final = completion({"role": "assistant", "content": "done"})

    async def chunked(request: web.Request) -> web.StreamResponse:
        await request.read()
        out = web.StreamResponse(headers={"Content-Type": "application/json"})
        out.enable_chunked_encoding()
        await out.prepare(request)
        for i in range(0, len(final), 7):
            await out.write(final[i : i + 7])
        return out

    async def gzipped(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(
            body=gzip.compress(final),
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )

    async def closing(request: web.Request) -> web.StreamResponse:
        await request.read()
        out = web.StreamResponse(headers={"Content-Type": "application/json", "Connection": "close"})
        out.force_close()
        await out.prepare(request)
        await out.write(final)
        return out

    app = web.Application()
    for path, handler in (("/a", chunked), ("/b", gzipped), ("/c", closing)):
        app.router.add_post(path + "/chat/completions", handler)

    async def go():
        runner, url = await serve(app)
        base = url.removesuffix("/v1")
        try:
            out = []
            for path in ("/a", "/b", "/c"):
                upstream = HTTPUpstream(base + path)
                try:
                    for _ in range(2):  # the second request reuses the connection (or opens a new one)
                        reply = await upstream.send(b"{}", {}, stream=False)
                        out.append((reply.status, json.loads(reply.body)["choices"][0]["message"]["content"]))
                finally:
                    await upstream.close()
            return out
        finally:
            await runner.cleanup()

    assert arun(go()) == [(200, "done")] * 6


def test_a_client_that_goes_away_mid_stream_leaves_the_proxy_serving() -> None:
    async def go(http, server):
        ask = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
        async with http.stream("POST", "/chat/completions", json=ask) as reply:
            async for _ in reply.aiter_bytes():
                break  # leave after the first piece
        await asyncio.sleep(0.2)
        health = (await http.get(str(http.base_url).removesuffix("/v1/") + "/health")).json()
        after = await http.post("/chat/completions", json=ask)
        return health, after

    health, after = arun(with_app(streaming_app(10, 0.05), go))
    assert health["ok"] and after.status_code == 200 and after.text.endswith("data: [DONE]\n\n")


def test_cli_state_file_in_use_is_a_clear_error(tmp_path, capsys) -> None:
    from toolcall_lab.cli import main

    path = tmp_path / "state.sqlite"
    held = SQLiteStore(path)
    try:
        assert (
            main(["proxy", "--upstream", "http://127.0.0.1:9/v1", "--state", str(path), "--port", "0"]) == 2
        )
    finally:
        held.close()
    assert "has this state file open" in capsys.readouterr().err


def test_ids_parse_only_what_the_proxy_makes() -> None:
    made = ids.proxy_id("0123456789ab", 4, 5)
    assert made == "call_tlp0123456789ab_4of5" and ids.parse(made) == ids.ProxyId("0123456789ab", 4, 5)
    for other in ("call_tlp0123456789ab_5of5", "call_tlp0123456789ab_01of5", "x" + made, made + "x", 7, None):
        assert ids.parse(other) is None
    assert len(ids.proxy_id("f" * 12, ids.MAX_CALLS - 1, ids.MAX_CALLS)) <= 40


def test_a_pooled_connection_the_upstream_closed_is_not_reused() -> None:
    """Servers close idle keep-alive connections (uvicorn after 5 s); the pool sees the close and opens
    a new connection instead of sending the next request into a dead one."""

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=completion({"role": "assistant", "content": "done"}))

    async def go():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        runner = web.AppRunner(app, keepalive_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        upstream = HTTPUpstream(f"http://127.0.0.1:{port}/v1")
        try:
            first = await upstream.send(b"{}", {}, stream=False)
            await asyncio.sleep(0.5)  # the server has closed the kept-alive connection by now
            second = await upstream.send(b"{}", {}, stream=False)
            return first.status, second.status
        finally:
            await upstream.close()
            await runner.cleanup()

    assert arun(go()) == (200, 200)


def test_numbers_beyond_64_bits_reach_the_upstream_exactly() -> None:
    """The proxy rewrites the body of a request that completes a batch; an integer orjson would read as a
    float (over 64 bits) must still go upstream digit for digit."""
    big = 123456789012345678901234567890

    async def go(http, server, up):
        start = [{"role": "user", "content": "q"}]
        messages = start
        for _ in range(3):
            reply = (await http.post("/chat/completions", json=body(messages))).json()
            messages = answered(messages, reply)
        raw = json.dumps(body(messages, metadata={"trace": big})).encode()
        await http.post("/chat/completions", content=raw, headers={"Content-Type": "application/json"})
        return up.completed[-1]

    _, up = arun(checking(go))
    assert up.requests[-1]["metadata"] == {"trace": big}


def test_https_upstreams_are_verified_and_spoken_to_over_tls(tmp_path) -> None:
    """The upstream client's TLS: a certificate the context does not trust is refused (502 naming the
    verification failure); one it trusts carries the request."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed (needed to make a test certificate)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=completion({"role": "assistant", "content": "over tls"}))

    async def go():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=served)
        await site.start()
        base = f"https://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"
        trusting = ssl.create_default_context(cafile=str(cert))
        default, trusted = HTTPUpstream(base), HTTPUpstream(base, ssl_context=trusting)
        try:
            with pytest.raises(Exception) as refused:
                await default.send(b"{}", {}, stream=False)
            reply = await trusted.send(b"{}", {}, stream=False)
            return refused.value, json.loads(reply.body)
        finally:
            await default.close()
            await trusted.close()
            await runner.cleanup()

    refused, reply = arun(go())
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused) and getattr(refused, "status", None) == 502
    assert reply["choices"][0]["message"]["content"] == "over tls"


def test_tombstones_keep_the_upstream_ids_and_call_digests_across_a_restart(tmp_path) -> None:
    """The id mapping and the edit check outlive the batch, in --state too."""
    from toolcall_lab.proxy.batches import Batch, call_digest
    from toolcall_lab.proxy.store import StoreLimits

    calls = [call("call_" + "A" * 24, "f", '{"i": 0}'), call(None, "g", '{"i": 1}')]

    def batch(tag: str) -> Batch:
        return Batch(
            tag=tag, message={"role": "assistant", "content": None, "tool_calls": calls}, template={}
        )

    path = tmp_path / "state.sqlite"
    store = SQLiteStore(path, StoreLimits(max_batches=1))
    store.save(batch("0123456789ab"))
    store.save(batch("ba9876543210"))  # evicts the first
    store.close()
    again = SQLiteStore(path, StoreLimits(max_batches=1))
    tomb = again.tombstone("0123456789ab")
    again.close()
    assert tomb is not None and tomb.reason == "evicted"
    assert tomb.upstream_ids == ("call_" + "A" * 24, ids.proxy_id("0123456789ab", 1, 2))
    assert tomb.call_digests == tuple(call_digest(c) for c in calls)


def test_a_passed_through_reply_has_one_date_and_no_framing_headers_of_the_upstreams() -> None:
    async def go(http, server):
        ask = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
        return await raw_exchange(
            str(http.base_url),
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
            % len(json.dumps(ask))
            + json.dumps(ask).encode(),
        )

    reply, _ = arun(
        with_scripted(
            [(200, {"Content-Type": "application/json"}, completion({"role": "assistant", "content": "hi"}))],
            go,
        )
    )
    head = reply.split(b"\r\n\r\n")[0].lower()
    assert head.count(b"\r\ndate:") == 1 and head.count(b"\r\ncontent-length:") == 1
    assert b"transfer-encoding" not in head

"""Issue 12, sixth check: credentials in every header a provider uses scope what the proxy keeps, a
credential sent twice is refused, and JSON nested too deep is the sender's error, never a proxy fault.

A sixth tester found that ``api-key`` (Azure) and ``x-api-key`` did not count as credentials, so tenant B
got tenant A's kept reply and queued calls; that a repeated ``Authorization`` was joined and forwarded;
and that JSON nested past the parser's depth was a 500 "proxy fault" both ways.
"""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from tests.proxy_helpers import DONE, Act, ScriptedHTTP, WireUpstream, completion, exchange, http_reply
from tests.test_proxy_faults import answered, arun, body, checking, converse, proxied, the_call
from toolcall_lab.proxy import HTTPUpstream
from toolcall_lab.proxy.batches import scope_of
from toolcall_lab.proxy.upstreams import UpstreamError

CREDENTIAL_HEADERS = ("api-key", "x-api-key", "x-goog-api-key")


@pytest.mark.parametrize("header", CREDENTIAL_HEADERS)
def test_provider_key_headers_scope_kept_replies_sessions_and_queues(header: str) -> None:
    """Tenant B, sending its own key in the same header, never gets A's kept reply, A's session or A's
    queued calls; A still gets all three."""
    alice, bob = {header: "key-alice-0001"}, {header: "key-bob-0002"}
    first = [{"role": "user", "content": "my calendar"}]
    key = {"Idempotency-Key": hashlib.sha256(b"my calendar").hexdigest()}
    session = {"x-session-id": "S"}

    async def go(http, server, up):
        a = await http.post("/chat/completions", json=body(first), headers={**key, **alice})
        b = await http.post("/chat/completions", json=body(first), headers={**key, **bob})
        a_again = await http.post("/chat/completions", json=body(first), headers={**key, **alice})
        sa = await http.post("/chat/completions", json=body(first), headers={**session, **alice})
        sb = await http.post("/chat/completions", json=body(first), headers={**session, **bob})
        sa_again = await http.post("/chat/completions", json=body(first), headers={**session, **alice})
        queued_by_bob = await http.post(
            "/chat/completions", json=body(answered(first, a.json())), headers=bob
        )
        final, _ = await converse(http, answered(first, a.json()), headers=alice)
        return a, b, a_again, sa, sb, sa_again, queued_by_bob, final

    (a, b, a_again, sa, sb, sa_again, queued_by_bob, final), up = arun(checking(go))
    assert a_again.content == a.content  # the owner's retry is replayed
    assert the_call(b.json())["id"] != the_call(a.json())["id"]  # bob made his own request
    assert sa_again.json() == sa.json() and the_call(sb.json())["id"] != the_call(sa.json())["id"]
    assert queued_by_bob.status_code == 403
    assert queued_by_bob.json()["error"]["code"] == "batch_other_credentials"
    assert final["choices"][0]["message"]["content"].startswith("All done")
    assert up.problems == [] and len(up.completed) == 1
    assert len(up.requests) == 5  # a, b, sa, sb, and a's completing request: nothing of bob's crossed


@pytest.mark.parametrize("header", CREDENTIAL_HEADERS)
def test_provider_key_headers_scope_completing_replies_and_tombstones(header: str) -> None:
    alice, bob = {header: "key-alice-0001"}, {header: "key-bob-0002"}
    now = [1_000_000.0]
    first = [{"role": "user", "content": "q"}]

    async def go(http, server, up):
        r0 = (await http.post("/chat/completions", json=body(first), headers=alice)).json()
        final, messages = await converse(http, answered(first, r0), headers=alice)
        retry_by_bob = await http.post("/chat/completions", json=body(messages), headers=bob)
        second = (await http.post("/chat/completions", json=body(first), headers=alice)).json()
        now[0] += 61
        server.sweep()  # the second batch expires: only its tombstone is left
        gone_for_bob = await http.post("/chat/completions", json=body(answered(first, second)), headers=bob)
        gone_for_alice = await http.post(
            "/chat/completions", json=body(answered(first, second)), headers=alice
        )
        return final, retry_by_bob, gone_for_bob, gone_for_alice

    (final, retry_by_bob, gone_for_bob, gone_for_alice), up = arun(
        checking(go, ttl_s=60, clock=lambda: now[0])
    )
    assert final["choices"][0]["message"]["content"].startswith("All done")
    assert retry_by_bob.status_code == 403 and gone_for_bob.status_code == 403
    assert gone_for_alice.status_code == 410  # the owner hears what happened to its batch
    assert len(up.requests) == 3  # alice's two first requests and her completing one


def test_every_credential_header_changes_the_scope_and_old_scopes_keep_their_digest() -> None:
    """A digest made from Authorization / OpenAI-Organization / OpenAI-Project alone is the one state
    files of schema 4 hold (computed here as it was), so a restart keeps their batches."""
    old = hashlib.sha256(b"toolcall-lab proxy scope")
    for value in ("Bearer k", "o", ""):
        old.update(b"\x00" + value.encode("latin-1"))
    assert scope_of({"authorization": "Bearer k", "openai-organization": "o"}) == old.hexdigest()[:32]
    base = scope_of({"authorization": "Bearer k"})
    scopes = {scope_of({"authorization": "Bearer k", h: "x"}) for h in CREDENTIAL_HEADERS}
    assert len(scopes) == 3 and base not in scopes
    alone = {scope_of({h: "x"}) for h in CREDENTIAL_HEADERS}
    assert len(alone) == 3 and "" not in alone


@pytest.mark.parametrize(
    "name", ["Authorization", "api-key", "X-Api-Key", "x-goog-api-key", "OpenAI-Project", "Idempotency-Key"]
)
def test_a_credential_header_sent_twice_is_a_400_and_nothing_is_forwarded(name: str) -> None:
    payload = json.dumps(body([{"role": "user", "content": "q"}])).encode()

    async def go(http, server):
        url = str(http.base_url)
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n{name}: one\r\n{name}: two\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        ).encode()
        return await exchange(url, head + payload, quiet_s=2)

    upstream = WireUpstream()

    async def run():
        url = await upstream.start()
        try:
            return await proxied(go, HTTPUpstream(url))
        finally:
            await upstream.close()

    raw = arun(run())
    status, _, rest = raw.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 400")
    error = json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]
    assert f"the {name} header is sent more than once" in error["message"]
    assert error["code"] == "invalid_http"
    assert upstream.bodies == []  # never joined and forwarded


def test_a_repeated_list_header_is_still_forwarded_one_line_each() -> None:
    payload = json.dumps({"model": "m", "messages": [{"role": "user", "content": "q"}]}).encode()

    async def go(http, server):
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Tag: a\r\nX-Tag: b\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        ).encode()
        return await exchange(str(http.base_url), head + payload, quiet_s=2)

    upstream = WireUpstream()

    async def run():
        url = await upstream.start()
        try:
            return await proxied(go, HTTPUpstream(url))
        finally:
            await upstream.close()

    raw = arun(run())
    assert raw.startswith(b"HTTP/1.1 200")
    assert b"\r\nx-tag: a\r\nx-tag: b\r\n" in upstream.heads[0]  # as sent (seventh pass: not joined)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("serial", [False, True])
@pytest.mark.parametrize("depth", [1025, 100_000])
def test_a_request_nested_too_deep_is_a_400_never_a_proxy_fault(serial: bool, depth: int) -> None:
    flag = ',"parallel_tool_calls":false' if serial else ""
    raw = f'{{"model":"m","x":{nested(depth)},"messages":[{{"role":"user","content":"q"}}]{flag}}}'.encode()

    async def go(http, server):
        plain = await http.post(
            "/chat/completions", content=raw, headers={"Content-Type": "application/json"}
        )
        keyed = await http.post(
            "/chat/completions",
            content=raw,
            headers={"Content-Type": "application/json", "Idempotency-Key": "k"},
        )
        return plain, keyed, dict(server.stats)

    upstream = ScriptedHTTP([])
    plain, keyed, health = arun(_with(upstream, go))
    for reply in (plain, keyed):
        assert reply.status_code == 400
        error = reply.json()["error"]
        assert error["code"] == "json_too_deep" and "nested deeper" in error["message"]
    assert health["proxy_faults"] == 0 and upstream.requests == []


def test_a_tool_result_the_proxy_must_write_again_too_deep_is_a_400() -> None:
    """Within orjson's reach (1,010 levels) but beyond what the proxy can write again: the request's
    fault, a 400, and the batch keeps waiting for a result it can use."""
    first = [{"role": "user", "content": "q"}]

    async def go(http, server, up):
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        messages = answered(first, r0, content="@deep@")
        deep = '[{"type":"data","value":' + nested(1010) + "}]"
        raw = json.dumps(body(messages)).replace('"@deep@"', deep).encode()
        refused = await http.post(
            "/chat/completions", content=raw, headers={"Content-Type": "application/json"}
        )
        final, _ = await converse(http, answered(first, r0))
        return refused, final, dict(server.stats)

    (refused, final, health), up = arun(checking(go))
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "json_too_deep"
    assert final["choices"][0]["message"]["content"].startswith("All done")
    assert health["proxy_faults"] == 0 and up.problems == []


@pytest.mark.parametrize("serial", [False, True])
@pytest.mark.parametrize("depth", [1010, 1025, 100_000])
def test_an_upstream_answer_nested_too_deep_is_a_502(serial: bool, depth: int) -> None:
    """1,010 levels: orjson reads it but the proxy could not write it again (a serial answer must be);
    passed through it is forwarded as sent. Deeper: nobody can read it, a 502 either way."""
    choice = '{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}'
    deep = f'{{"id":"c","object":"chat.completion","choices":[{choice}],"deep":{nested(depth)}}}'.encode()
    upstream = ScriptedHTTP([(200, {"Content-Type": "application/json"}, deep)])
    messages = [{"role": "user", "content": "q"}]

    async def go(http, server):
        payload = body(messages) if serial else {"model": "m", "messages": messages}
        reply = await http.post("/chat/completions", json=payload)
        return reply, dict(server.stats)

    reply, health = arun(_with(upstream, go))
    if depth == 1010 and not serial:
        assert reply.status_code == 200 and reply.content == deep
    else:
        assert reply.status_code == 502
        error = reply.json()["error"]
        assert error["code"] == "upstream_bad_response" and "nested deeper" in error["message"]
    assert health["proxy_faults"] == 0


def test_an_upstream_error_nested_too_deep_keeps_its_status_in_a_json_error() -> None:
    deep = f'{{"error":{nested(5000)}}}'.encode()
    upstream = ScriptedHTTP([(429, {"Content-Type": "application/json", "Retry-After": "7"}, deep)])

    async def go(http, server):
        reply = await http.post("/chat/completions", json=body([{"role": "user", "content": "q"}]))
        return reply, dict(server.stats)

    reply, health = arun(_with(upstream, go))
    assert reply.status_code == 429 and reply.headers["retry-after"] == "7"
    error = reply.json()["error"]
    assert (
        error["code"] == "upstream_error"
        and "upstream answered 429 with JSON nested deeper" in error["message"]
    )
    assert health["proxy_faults"] == 0


def test_call_arguments_nested_too_deep_are_handed_out_and_compared_as_written() -> None:
    """A model may write arguments no JSON reader takes; the proxy compares them as text (reading them
    crashed the sweep that turns an expired batch into a tombstone, and an ``x-session-id`` request
    holding them), hands them out and sends them back upstream byte for byte."""
    arguments = nested(5000)
    calls = [
        {"id": f"up_{i}", "type": "function", "function": {"name": "f", "arguments": arguments}}
        for i in range(2)
    ]
    batch = completion({"role": "assistant", "content": None, "tool_calls": calls})
    upstream = ScriptedHTTP(
        [
            (200, {}, batch),
            (200, {}, completion({"role": "assistant", "content": "done"})),
            (200, {}, completion({"role": "assistant", "content": "later"})),
            (200, {}, batch),
        ]
    )
    first = [{"role": "user", "content": "q"}]
    now = [1_000_000.0]

    async def go(http, server):
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        m1 = answered(first, r0, content="r0")
        r1 = (await http.post("/chat/completions", json=body(m1))).json()
        m2 = answered(m1, r1, content="r1")
        final = await http.post("/chat/completions", json=body(m2))
        later = [*m2, final.json()["choices"][0]["message"], {"role": "user", "content": "more"}]
        session = await http.post("/chat/completions", json=body(later), headers={"x-session-id": "S"})
        other = (await http.post("/chat/completions", json=body(first))).json()
        now[0] += 61
        server.sweep()  # the open batch becomes a tombstone holding a digest of each call
        gone = await http.post("/chat/completions", json=body(answered(first, other, content="r0")))
        return r0, final, session, gone, dict(server.stats)

    async def run():
        url = await upstream.start()
        try:
            return await proxied(go, HTTPUpstream(url), ttl_s=60, clock=lambda: now[0])
        finally:
            await upstream.close()

    r0, final, session, gone, health = arun(run())
    assert the_call(r0)["function"]["arguments"] == arguments
    assert final.status_code == 200 and final.json()["choices"][0]["message"]["content"] == "done"
    sent = upstream.requests[1]["messages"][1]["tool_calls"]
    assert [c["function"]["arguments"] for c in sent] == [arguments, arguments]
    assert session.status_code == 200 and session.json()["choices"][0]["message"]["content"] == "later"
    assert gone.status_code == 410 and "expired" in gone.json()["error"]["message"]
    assert health["proxy_faults"] == 0


def test_after_a_key_rotation_a_conversation_the_proxy_remembers_is_refused_and_new_ones_work() -> None:
    """What the README's "Key rotation" paragraph says: the later turn of a conversation whose batch the
    proxy holds is a 403 under the new key; a new conversation under the new key goes through."""
    old, new = {"Authorization": "Bearer sk-old"}, {"Authorization": "Bearer sk-new"}
    first = [{"role": "user", "content": "q"}]

    async def go(http, server, up):
        r0 = (await http.post("/chat/completions", json=body(first), headers=old)).json()
        final, messages = await converse(http, answered(first, r0), headers=old)
        later = [*messages, final["choices"][0]["message"], {"role": "user", "content": "and then?"}]
        rotated = await http.post("/chat/completions", json=body(later), headers=new)
        fresh, _ = await converse(http, first, headers=new)
        return rotated, fresh

    (rotated, fresh), up = arun(checking(go))
    assert rotated.status_code == 403 and rotated.json()["error"]["code"] == "batch_other_credentials"
    assert "a rotated key is other credentials" in rotated.json()["error"]["message"]
    assert fresh["choices"][0]["message"]["content"].startswith("All done")
    assert up.problems == [] and len(up.completed) == 2


async def _with(upstream, fn):
    url = await upstream.start()
    try:
        return await proxied(fn, HTTPUpstream(url))
    finally:
        await upstream.close()


# --- found while making the hop cheaper (issue 12, speed) -----------------------------------------

ASK = json.dumps({"model": "m", "messages": [{"role": "user", "content": "q"}]}).encode()


async def _against(behave, fn, **kwargs):
    up = WireUpstream(behave)
    url = await up.start()
    upstream = HTTPUpstream(url, **kwargs)
    try:
        return await fn(upstream, up)
    finally:
        await upstream.close()
        await up.close()


@pytest.mark.parametrize(
    "head",
    [
        "HTTP/1.1 200 OK\r\nContent-Length: \u00b2\r\n\r\n",  # '²' is a digit to str.isdigit
        "HTTP/1.1 2\u00b200 OK\r\nContent-Length: 2\r\n\r\n",
    ],
)
def test_a_reply_head_with_a_non_ascii_digit_is_refused_clearly(head: str) -> None:
    """``str.isdigit`` takes latin-1 '²': int() then failed inside the reply parser, the connection was
    torn down and the error said only that it closed early."""
    bad = head.encode("latin-1") + b"{}"

    async def go(upstream, up):
        with pytest.raises(UpstreamError) as failed:
            await upstream.send(ASK, {}, stream=False)
        return str(failed.value)

    message = arun(_against(lambda c, k, h, b: Act(bad), go))
    assert "Content-Length is not one number" in message or "did not answer with HTTP/1.x" in message


def test_the_idle_timeout_holds_for_a_request_on_a_reused_connection() -> None:
    """A connection's idle check is armed once and left pending after a reply (no timer per request):
    the next request on the same connection must still time out, and a timeout shortened in between
    must apply at once."""

    def behave(conn, k, head, body):
        return Act(http_reply(DONE), delay=0 if k < 2 else 30)

    async def go(upstream, up):
        first = await upstream.send(ASK, {}, stream=False)
        second = await upstream.send(ASK, {}, stream=False)  # the first one's check is still pending
        upstream.timeout_s = 0.2  # shorter than that pending check
        with pytest.raises(UpstreamError) as stalled:
            await upstream.send(ASK, {}, stream=False)
        return first.status, second.status, stalled.value, up.connections

    first, second, stalled, connections = arun(_against(behave, go, timeout_s=60))
    assert (first, second, connections) == (200, 200, 1)
    assert stalled.status == 504 and stalled.code == "upstream_timeout"


class _LoopTransport:
    """A transport that is not an `asyncio.Transport` subclass (uvloop's are not), recording writes."""

    def __init__(self) -> None:
        self.written = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default=None):
        return default

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


def test_the_server_and_the_client_take_transports_of_other_event_loops() -> None:
    """Under uvloop both sides failed an isinstance assertion in connection_made: the server dropped
    every connection and the client every upstream request."""
    from toolcall_lab.proxy._http import HTTPClient
    from toolcall_lab.proxy._http import _Connection as ClientConnection
    from toolcall_lab.proxy._httpd import HTTPServer, Response, _Protocol

    async def go():
        async def handler(request):
            return Response(200, b"{}", {"Content-Type": "application/json"})

        server = HTTPServer(handler, lambda status, message: Response(status, b"", {}), max_body_bytes=1024)
        served = _Protocol(server)
        transport = _LoopTransport()
        served.connection_made(transport)
        served.data_received(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        await asyncio.sleep(0.05)
        client = ClientConnection(HTTPClient("http://127.0.0.1:9/v1/chat/completions"))
        client.connection_made(_LoopTransport())
        return transport.written, client.open

    written, client_open = arun(go())
    assert written.startswith(b"HTTP/1.1 200 OK\r\n") and written.endswith(b"\r\n\r\n{}")
    assert client_open


def test_the_completing_fast_path_finds_what_scan_finds_or_leaves_it_to_scan() -> None:
    """The request that completes a batch skips `scan` when the batch's pairs end the conversation and no
    other id of the proxy's comes before them. On every request of multi-turn conversations (each turn
    a new batch, later turns holding earlier ones), the fast path's answer, when it gives one, is the
    split `scan` finds, and it gives none when the history holds a batch."""
    from toolcall_lab.proxy.batches import scan

    seen = {"fast": 0, "scan": 0}

    async def go(http, server, up):
        original = server.completing_tail

        def checked(messages):
            fast = original(messages)
            full = scan(messages)
            if fast is None:
                seen["scan"] += 1
                return None
            seen["fast"] += 1
            (tail,) = fast
            assert len(full) == 1
            assert (tail.tag, tail.n_calls, tail.start, tail.end) == (
                full[0].tag,
                full[0].n_calls,
                full[0].start,
                full[0].end,
            )
            assert tail.calls == full[0].calls and tail.results == full[0].results
            return fast

        server.completing_tail = checked
        messages = [{"role": "user", "content": "first"}]
        for turn in range(3):
            final, messages = await converse(http, messages)
            messages = [
                *messages,
                final["choices"][0]["message"],
                {"role": "user", "content": f"turn {turn}"},
            ]
        return messages

    _, up = arun(checking(go))
    assert up.problems == [] and len(up.completed) == 3
    assert (
        seen["fast"] == 1 and seen["scan"] >= 2
    )  # the first turn's completion only: later ones hold a batch


def test_a_head_read_before_is_reused_for_its_content_length_only() -> None:
    """A client's successive heads differ only in Content-Length, so the server keeps what a head read
    (by its bytes without that line) and reads the next one's length alone. A head that differs in any
    other byte is read in full: a second Content-Length is still a 400, a length over the limit a 413,
    and each request gets exactly its own body."""
    from toolcall_lab.proxy._httpd import HTTPServer, Response, _Protocol

    async def go():
        seen = []

        async def handler(request):
            seen.append((request.headers.get("content-length"), request.body))
            return Response(200, b"{}", {"Content-Type": "application/json"})

        refused = []

        def refusal(status, message, code=""):
            refused.append((status, message))
            return Response(status, b"", {})

        server = HTTPServer(handler, refusal, max_body_bytes=10)
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nX-A: 1\r\n\r\n"
        transport = _LoopTransport()
        served = _Protocol(server)
        served.connection_made(transport)
        for data in (b"{}", b'{"a":1}', b"[]"):  # one connection, pipelined, three lengths
            served.data_received(head % len(data) + data)
            await asyncio.sleep(0.02)
        cached = len(server.heads)
        outcomes = []
        for extra in (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nX-A: 1\r\nContent-Length: 3\r\n\r\n{}",
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nX-A: 1\r\n\r\n",
        ):
            other = _Protocol(server)
            wire = _LoopTransport()
            other.connection_made(wire)
            other.data_received(extra)
            await asyncio.sleep(0.02)
            outcomes.append(wire.written.split(b"\r\n", 1)[0])
        return seen, cached, outcomes, refused

    seen, cached, outcomes, refused = arun(go())
    assert seen == [("2", b"{}"), ("7", b'{"a":1}'), ("2", b"[]")]
    assert cached == 1
    assert outcomes == [b"HTTP/1.1 400 Bad Request", b"HTTP/1.1 413 Request Entity Too Large"]
    assert refused[0][0] == 400 and "Content-Length" in refused[0][1]


def test_a_sweep_that_fails_is_a_counted_fault_and_expiry_goes_on() -> None:
    """The sweeper task ended on the first exception (deeply nested call arguments raised one), and no
    batch expired after that, silently."""
    calls = {"n": 0}

    async def go(http, server):
        real = server.store.sweep

        def flaky():
            calls["n"] += 1
            if calls["n"] == 1:
                raise RuntimeError("boom")
            return real()

        server.store.sweep = flaky
        for _ in range(100):
            await asyncio.sleep(0.02)
            if calls["n"] >= 3:
                break
        return dict(server.stats)

    stats = arun(proxied(go, HTTPUpstream("http://127.0.0.1:9/v1"), sweep_s=0.01))
    assert calls["n"] >= 3 and stats["proxy_faults"] == 1

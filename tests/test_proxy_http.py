"""The proxy's own HTTP layer, held to what a well-kept server and client do (issue 12, fourth pass).

Server side (`proxy/_httpd.py`): half-closed clients, strict request heads, byte-exact header values,
hop-by-hop headers, expectations, chunk sizes, HTTP/1.0 keep-alive, compressed bodies, the head
deadline, the connection cap and a graceful close. Client side (`proxy/_http.py`): stale pooled
connections, the one retry a reset allows and no other, Keep-Alive hints, base URLs with a query,
forward proxies, TLS refusals. Every test drives real sockets on loopback against `WireUpstream`, which
records the raw bytes it receives.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import ssl
import subprocess
import zlib

import pytest

from tests.proxy_helpers import DONE, Act, ForwardProxy, WireUpstream, exchange, http_reply
from toolcall_lab.exceptions import UsageError
from toolcall_lab.proxy import HTTPUpstream, ProxyServer, UpstreamError
from toolcall_lab.proxy.upstreams import env_proxy

ASK = json.dumps({"model": "m", "messages": [{"role": "user", "content": "q"}]}).encode()
"""A request the proxy passes through."""
SERIAL = json.dumps(
    {"model": "m", "messages": [{"role": "user", "content": "q"}], "parallel_tool_calls": False}
).encode()


def arun(coro):
    return asyncio.run(coro)


def post(body: bytes = ASK, extra: bytes = b"", version: bytes = b"HTTP/1.1", *, close: bool = True) -> bytes:
    head = b"POST /v1/chat/completions " + version + b"\r\n"
    if version == b"HTTP/1.1":
        head += b"Host: x\r\n"
    head += extra + b"Content-Length: %d\r\n" % len(body)
    if close and version == b"HTTP/1.1":
        head += b"Connection: close\r\n"
    return head + b"\r\n" + body


async def behind(fn, behave=None, **settings):
    """`fn(url, server, upstream)` against a proxy in front of a `WireUpstream`."""
    up = WireUpstream(behave)
    upstream_url = await up.start()
    server = ProxyServer(HTTPUpstream(upstream_url), **settings)
    url = await server.start()
    try:
        return await fn(url, server, up)
    finally:
        await server.close()
        await up.close()


def status(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0


def head_of(reply: bytes) -> bytes:
    return reply.split(b"\r\n\r\n", 1)[0].lower()


# --- server: connections ---------------------------------------------------------------------------


def test_a_client_that_half_closes_after_its_request_still_gets_the_reply() -> None:
    """Found: EOF after a complete request closed the transport, so the reply of an upstream call
    already made (tokens spent) was lost. Pass-through, serialized, HTTP/1.0 and pipelined."""

    async def go(url, server, up):
        plain = await exchange(url, post(close=False), half_close=True)
        serial = await exchange(url, post(SERIAL, close=False), half_close=True)
        old = await exchange(url, post(version=b"HTTP/1.0"), half_close=True)
        piped = await exchange(url, post(close=False) + post(close=False), half_close=True)
        cut = await exchange(url, post(close=False)[:-5], half_close=True)
        return plain, serial, old, piped, cut, len(up.bodies)

    plain, serial, old, piped, cut, sent = arun(behind(go))
    assert status(plain) == 200 and plain.endswith(DONE)
    assert status(serial) == 200 and serial.endswith(DONE)
    assert status(old) == 200 and old.endswith(DONE)
    assert piped.count(b"HTTP/1.1 200") == 2
    assert status(cut) == 400 and b"closed its side after" in cut  # a truncated body is told, not sent
    assert sent == 5


def test_http10_keep_alive_is_answered_as_kept_and_honoured() -> None:
    async def go(url, server, up):
        kept = post(version=b"HTTP/1.0", extra=b"Connection: keep-alive\r\n")
        two = await exchange(url, kept + kept, quiet_s=0.5)
        once = await exchange(url, post(version=b"HTTP/1.0"))
        return two, once

    two, once = arun(behind(go))
    assert two.count(b"HTTP/1.1 200") == 2 and two.count(b"Connection: keep-alive") == 2
    assert b"Connection: close" in once and b"keep-alive" not in once


# --- server: strict heads --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (b"X-A: foo\nX-Injected: yes\r\n", b"a bare LF"),
        (b"X-A: foo\rX-Injected: yes\r\n", b"a bare CR"),
        (b"X-A: a\x00b\r\n", b"NUL"),
        (b"X-A: a\x01b\r\n", b"control characters are refused"),
        (b"X-A: a\x7fb\r\n", b"control characters are refused"),
        (b"X-A: a\r\n  folded\r\n", b"folded header lines"),
        (b"X-A : a\r\n", b"the name must be a token"),
        (b"X(A): a\r\n", b"the name must be a token"),
        (b"NoColon\r\n", b"has no colon"),
        (b"Host: y\r\n", b"exactly one Host header (2 sent)"),
    ],
)
def test_malformed_heads_are_refused_and_never_forwarded(extra, why) -> None:
    async def go(url, server, up):
        return await exchange(url, post(extra=extra)), len(up.heads)

    reply, forwarded = arun(behind(go))
    assert status(reply) == 400 and why in reply and b'"code":"invalid_http"' in reply
    assert b"x-should-retry: false" in reply and forwarded == 0


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"x" * 50, 400),  # a TLS hello: at once
        (b"GET /health\r\n", 400),  # HTTP/0.9: no version
        (b"POST /v1/chat/completions HTTP/1.1\r\nX: 1\r\n\r\n", 400),  # no Host
        (b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        (b"POST /v1/chat/completions HTTP/1.1\nHost: x\n\n", 400),
    ],
)
def test_what_is_not_an_http11_request_is_refused_at_once(data, code) -> None:
    async def go(url, server, up):
        return await exchange(url, data, quiet_s=2)

    assert status(arun(behind(go))) == code


def test_header_values_reach_the_upstream_as_the_bytes_received() -> None:
    """Found: values were decoded as latin-1 and re-encoded as UTF-8 (``Café`` arrived mangled)."""
    utf8 = "X-Title: Café ☃ Zoë\r\n".encode()
    latin1 = b"X-Raw: \xff\xfe caf\xe9\r\n"

    async def go(url, server, up):
        await exchange(url, post(extra=utf8 + latin1))
        return up.heads[0]

    head = arun(behind(go))
    assert "x-title: Café ☃ Zoë\r\n".encode() in head and b"x-raw: \xff\xfe caf\xe9\r\n" in head


def test_hop_by_hop_headers_are_not_forwarded_either_way() -> None:
    hop = (
        b"Connection: X-Secret, keep-alive\r\nX-Secret: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n"
        b"Trailer: X-T\r\nUpgrade: h2c\r\nProxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\n"
        b"X-Kept: yes\r\n"
    )

    def behave(conn, k, head, body):
        return Act(
            http_reply(
                DONE,
                {
                    "Connection": "X-Hop",
                    "X-Hop": "1",
                    "Keep-Alive": "timeout=50",
                    "Proxy-Authenticate": "Basic",
                    "X-Request-Id": "req_1",
                },
            )
        )

    async def go(url, server, up):
        reply = await exchange(url, post(extra=hop))
        return reply, up.heads[0].lower()

    reply, sent = arun(behind(go, behave))
    for name in (b"x-secret", b"keep-alive:", b"te:", b"trailer", b"upgrade", b"proxy-"):
        assert name not in sent, name
    assert b"x-kept: yes" in sent
    assert status(reply) == 200
    got = head_of(reply)
    assert b"x-request-id: req_1" in got and b"x-hop" not in got and b"proxy-authenticate" not in got
    assert b"keep-alive" not in got


def test_an_expectation_other_than_100_continue_is_a_417() -> None:
    async def go(url, server, up):
        return await exchange(url, post(extra=b"Expect: something-else\r\n")), len(up.heads)

    reply, forwarded = arun(behind(go))
    assert status(reply) == 417 and b'"code":"expectation_failed"' in reply and forwarded == 0


@pytest.mark.parametrize("size", [b"-5", b"+5", b"0x5", b"5_0", b" 5", b"f" * 20, b"5;\x00"])
def test_chunk_sizes_are_checked_as_they_are_read(size) -> None:
    data = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"

    async def go(url, server, up):
        return await exchange(url, data + size + b"\r\nabcde\r\n0\r\n\r\n", quiet_s=2)

    reply = arun(behind(go))
    assert status(reply) == 400 and b"chunk-size line" in reply


def test_a_chunk_that_would_pass_the_body_limit_is_refused_before_it_is_sent() -> None:
    data = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"

    async def go(url, server, up):
        return await exchange(url, data + b"%x\r\n" % (40 * 1024 * 1024), quiet_s=2)  # no data sent

    reply = arun(behind(go))
    assert status(reply) == 413 and b"body_too_large" in reply


def test_compressed_request_bodies_are_decoded_or_refused_clearly() -> None:
    async def go(url, server, up):
        gz = await exchange(url, post(gzip.compress(ASK), b"Content-Encoding: gzip\r\n"))
        deflated = await exchange(url, post(zlib.compress(ASK), b"Content-Encoding: deflate\r\n"))
        br = await exchange(url, post(ASK, b"Content-Encoding: br\r\n"))
        corrupt = await exchange(url, post(b"not gzip", b"Content-Encoding: gzip\r\n"))
        bomb = await exchange(url, post(gzip.compress(b" " * 3000), b"Content-Encoding: gzip\r\n"))
        return gz, deflated, br, corrupt, bomb, up.bodies

    gz, deflated, br, corrupt, bomb, bodies = arun(behind(go, max_body_bytes=2048))
    assert status(gz) == 200 and status(deflated) == 200 and bodies == [ASK, ASK]
    assert status(br) == 415 and b"Content-Encoding 'br' is not supported" in br
    assert status(corrupt) == 400 and b"not valid gzip data" in corrupt
    assert status(bomb) == 413  # the decoded size counts


# --- server: deadlines, the cap, closing -----------------------------------------------------------


def test_a_head_that_trickles_gets_a_408_and_a_silent_connection_is_closed() -> None:
    async def go(url, server, up):
        host, port = url.split("//")[1].split("/")[0].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        reading = asyncio.create_task(reader.read(65536))  # the reply, read as soon as it comes
        for _ in range(6):  # a header line every 0.1 s: the connection is never idle, the head never done
            await asyncio.sleep(0.1)
            if reading.done():
                break
            writer.write(b"X-Slow: 1\r\n")
        trickled = await asyncio.wait_for(reading, 5)
        writer.close()
        silent = await exchange(url, b"")
        return trickled, silent

    trickled, silent = arun(behind(go, head_timeout_s=0.3))
    assert status(trickled) == 408 and b'"code":"request_timeout"' in trickled
    assert silent == b""  # nothing was asked, so nothing is answered: the connection just closes


def test_at_the_connection_cap_an_idle_connection_makes_room_and_a_full_house_gets_503() -> None:
    slow = lambda conn, k, head, body: Act(http_reply(DONE), delay=0.4)  # noqa: E731

    async def go(url, server, up):
        host, port = url.split("//")[1].split("/")[0].split(":")
        idle = []
        for _ in range(2):  # two kept-alive connections, idle after their reply
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(post(close=False))
            await reader.readuntil(b'"stop"}]}')
            idle.append((reader, writer))
        fresh = await exchange(url, post())  # the cap is 2: the longest-idle one makes room
        busy = [asyncio.create_task(exchange(url, post(extra=b"X-Busy: 1\r\n"))) for _ in range(2)]
        await asyncio.sleep(0.15)  # both are waiting for the slow upstream now
        refused = await exchange(url, post())
        answered = await asyncio.gather(*busy)
        closed = await idle[0][0].read()
        for _, writer in idle:
            writer.close()
        return fresh, refused, answered, closed

    def behave(conn, k, head, body):
        return slow(conn, k, head, body) if b"x-busy" in head.lower() else Act(http_reply(DONE))

    fresh, refused, answered, closed = arun(behind(go, behave, max_connections=2))
    assert status(fresh) == 200 and closed == b""
    assert status(refused) == 503 and b"too_many_connections" in refused
    assert b"x-should-retry" not in head_of(refused)  # a retry may well succeed
    assert [status(a) for a in answered] == [200, 200]


def test_close_lets_a_request_in_flight_deliver_its_reply() -> None:
    """Found: connections were closed before the grace period, so the client got no reply."""

    async def go(url, server, up):
        pending = asyncio.create_task(exchange(url, post(close=False)))
        await asyncio.sleep(0.1)  # the request is at the (slow) upstream now
        await server.close()
        return await pending

    reply = arun(behind(go, lambda conn, k, head, body: Act(http_reply(DONE), delay=0.3)))
    assert status(reply) == 200 and reply.endswith(DONE) and b"Connection: close" in reply


# --- client: pooled connections and the one retry --------------------------------------------------


async def against(behave, fn, **kwargs):
    up = WireUpstream(behave)
    url = await up.start()
    upstream = HTTPUpstream(url, **kwargs)
    try:
        return await fn(upstream, up)
    finally:
        await upstream.close()
        await up.close()


def test_an_upstream_that_closes_after_each_reply_without_saying_so_loses_nothing() -> None:
    """Found: 7 of 50 conversations got a 502 (the next request went into the closed connection)."""

    async def go(upstream, up):
        statuses = []
        for _ in range(30):
            statuses.append((await upstream.send(ASK, {}, stream=False)).status)
        return statuses, len(up.bodies), upstream.retries

    statuses, received, _ = arun(
        against(lambda conn, k, head, body: Act(http_reply(DONE), close_after=True), go)
    )
    assert statuses == [200] * 30 and received == 30  # each request reached the upstream once


def test_a_reused_connection_reset_before_any_reply_byte_is_retried_once_on_a_new_one() -> None:
    def behave(conn, k, head, body):
        return Act(kind="reset") if (conn, k) == (0, 1) else Act(http_reply(DONE))

    async def go(upstream, up):
        first = await upstream.send(ASK, {}, stream=False)
        second = await upstream.send(ASK, {}, stream=False)
        return first.status, second.status, upstream.retries, up.connections

    assert arun(against(behave, go)) == (200, 200, 1, 2)


def test_a_clean_close_after_the_request_is_never_sent_again() -> None:
    """A FIN with no reply: the upstream may have read the request, so it is not resent (a 502)."""

    def behave(conn, k, head, body):
        return Act(kind="close") if k == 1 else Act(http_reply(DONE))

    async def go(upstream, up):
        await upstream.send(ASK, {}, stream=False)
        with pytest.raises(UpstreamError) as failed:
            await upstream.send(ASK, {}, stream=False)
        return failed.value, len(up.bodies), upstream.retries

    failed, received, retries = arun(against(behave, go))
    assert failed.status == 502 and "closed before the reply was complete" in str(failed)
    assert received == 2 and retries == 0


def test_a_reset_on_a_new_connection_is_never_retried() -> None:
    async def go(upstream, up):
        with pytest.raises(UpstreamError):
            await upstream.send(ASK, {}, stream=False)
        return len(up.bodies), up.connections, upstream.retries

    assert arun(against(lambda conn, k, head, body: Act(kind="reset"), go)) == (1, 1, 0)


def test_a_keep_alive_timeout_hint_stops_reuse_before_the_server_closes() -> None:
    async def go(upstream, up):
        for _ in range(3):
            await upstream.send(ASK, {}, stream=False)
        return up.connections

    hinted = arun(against(lambda c, k, h, b: Act(http_reply(DONE, {"Keep-Alive": "timeout=1"})), go))
    plain = arun(against(lambda c, k, h, b: Act(http_reply(DONE)), go))
    assert (hinted, plain) == (3, 1)


def test_a_reply_head_with_a_control_character_is_refused() -> None:
    bad = b"HTTP/1.1 200 OK\r\nX-Evil: a\rb\r\nContent-Length: 2\r\n\r\n{}"

    async def go(upstream, up):
        with pytest.raises(UpstreamError) as failed:
            await upstream.send(ASK, {}, stream=False)
        return str(failed.value)

    assert "control character" in arun(against(lambda c, k, h, b: Act(bad), go))


def test_a_base_url_with_a_query_keeps_it_after_the_path() -> None:
    """Found: Azure's ``?api-version=`` ended up in the middle of the path."""

    async def go(upstream, up):
        await upstream.send(ASK, {}, stream=False)
        return up.heads[0].split(b"\r\n", 1)[0]

    up = WireUpstream()

    async def main():
        url = await up.start()
        base = url.removesuffix("/v1") + "/openai/deployments/gpt4o?api-version=2024-10-21"
        upstream = HTTPUpstream(base)
        try:
            return await go(upstream, up)
        finally:
            await upstream.close()
            await up.close()

    line = arun(main())
    assert line == b"POST /openai/deployments/gpt4o/chat/completions?api-version=2024-10-21 HTTP/1.1"
    with pytest.raises(UsageError, match="Invalid IPv6 URL"):
        HTTPUpstream("http://[::1")
    with pytest.raises(UsageError, match="fragment"):
        HTTPUpstream("http://h/v1#x")


# --- client: forward proxies and TLS ---------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed (needed to make a test certificate)")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    return cert, served


def test_https_goes_through_a_forward_proxy_in_a_connect_tunnel_and_http_in_absolute_form(
    certificate,
) -> None:
    cert, served = certificate

    async def go():
        forward = ForwardProxy()
        proxy_url = await forward.start()
        secure, plain = WireUpstream(ssl_context=served), WireUpstream()
        secure_url, plain_url = await secure.start(), await plain.start()
        # loopback never goes through a proxy from the environment; an explicit one is used as given
        via_tls = HTTPUpstream(secure_url, ca_file=str(cert), proxy=proxy_url.replace("//", "//u:p%40ss@"))
        via_plain = HTTPUpstream(plain_url, proxy=proxy_url)
        try:
            one = await via_tls.send(ASK, {}, stream=False)
            two = await via_plain.send(ASK, {}, stream=False)
            return one.status, two.status, forward.lines, forward.auth, secure.port, secure.heads
        finally:
            for thing in (via_tls, via_plain, secure, plain, forward):
                await thing.close()

    one, two, lines, auth, port, secure_heads = arun(go())
    assert (one, two) == (200, 200)
    assert lines[0] == b"CONNECT 127.0.0.1:%d HTTP/1.1" % port
    assert auth[0] == b"Basic dTpwQHNz"  # u:p@ss
    assert lines[1].startswith(b"POST http://127.0.0.1:") and lines[1].endswith(
        b"/v1/chat/completions HTTP/1.1"
    )
    assert secure_heads[0].startswith(b"POST /v1/chat/completions HTTP/1.1")


def test_a_forward_proxy_that_refuses_is_a_refusal_a_retry_cannot_change() -> None:
    async def go():
        forward = ForwardProxy(refuse=407)
        proxy_url = await forward.start()
        upstream = HTTPUpstream("https://api.example.com/v1", proxy=proxy_url)
        try:
            with pytest.raises(UpstreamError) as failed:
                await upstream.send(ASK, {}, stream=False)
            return failed.value
        finally:
            await upstream.close()
            await forward.close()

    failed = arun(go())
    assert failed.code == "upstream_refused" and "refused CONNECT api.example.com:443" in str(failed)


def test_the_environment_names_the_forward_proxy_unless_no_proxy_or_loopback(monkeypatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", "internal.corp,.svc")
    assert env_proxy("https://api.openai.com/v1/chat/completions") == "http://proxy.corp:3128"
    assert env_proxy("https://internal.corp/v1") is None and env_proxy("https://a.svc/v1") is None
    assert env_proxy("https://127.0.0.1:8443/v1") is None and env_proxy("https://localhost/v1") is None
    assert env_proxy("http://api.example.com/v1") is None  # HTTP_PROXY is not set
    assert str(HTTPUpstream("https://api.openai.com/v1").proxy) == "http://proxy.corp:3128"
    assert HTTPUpstream("https://api.openai.com/v1", trust_env=False).proxy is None
    monkeypatch.setenv("HTTPS_PROXY", "socks5://proxy.corp:1080")
    with pytest.raises(UsageError, match="only http:// forward proxies"):
        HTTPUpstream("https://api.openai.com/v1")


def test_an_untrusted_certificate_is_a_502_the_client_is_told_not_to_retry(certificate) -> None:
    cert, served = certificate

    async def go():
        tls = WireUpstream(ssl_context=served)
        url = await tls.start()
        server = ProxyServer(HTTPUpstream(url))
        trusting = HTTPUpstream(url, ca_file=str(cert))
        proxy_url = await server.start()
        try:
            refused = await exchange(proxy_url, post())
            trusted = await trusting.send(ASK, {}, stream=False)
            return refused, trusted.status, len(tls.heads)
        finally:
            await server.close()
            await trusting.close()
            await tls.close()

    refused, trusted, received = arun(go())
    assert status(refused) == 502 and b"x-should-retry: false" in refused.lower()
    assert b"CERTIFICATE_VERIFY_FAILED" in refused and b"--ca-file" in refused
    assert trusted == 200 and received == 1  # only the trusting client's request got through
    with pytest.raises(UsageError, match="not a readable PEM bundle"):
        HTTPUpstream("https://h/v1", ca_file=__file__)

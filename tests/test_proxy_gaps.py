"""Issue 12: the gaps a fresh-eyes tester found besides tenancy (test12f items 4 to 8).

Headers pass through unless the README lists them as consumed (``x-session-id`` now reaches the
upstream); a body that stalls after its head gets a 408 within ``body_timeout_s`` and frees its slot;
under memory pressure finished batches go before open ones and tombstones last, and a 410 for a batch
evicted that way says so; an invalid UTF-8 body is named with its byte offset; a legacy ``function``
message after an unfinished batch is a 400 naming the message.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from tests.proxy_helpers import exchange
from tests.test_proxy_faults import answered, arun, body, checking, converse, the_call
from tests.test_proxy_http import behind, post, status
from toolcall_lab.proxy.batches import Batch
from toolcall_lab.proxy.store import MemoryStore, StoredReply, StoreLimits
from toolcall_lab.proxy.upstreams import CONSUMED

README = Path(__file__).resolve().parent.parent / "README.md"


# --- headers ---------------------------------------------------------------------------------------


def test_session_id_and_other_headers_reach_the_upstream_and_every_consumed_header_is_listed() -> None:
    first = [{"role": "user", "content": "q"}]
    h = {"x-session-id": "S-1", "X-Gateway-Tag": "t", "Accept-Encoding": "gzip, br"}

    async def go(http, server, up):
        reply = (await http.post("/chat/completions", json=body(first), headers=h)).json()  # serialized
        await converse(http, answered(first, reply), headers=h)  # ... and the request completing it
        await http.post("/chat/completions", json={"model": "m", "messages": first}, headers=h)  # passed
        return up.headers

    seen, _ = arun(checking(go))
    assert len(seen) == 3
    for headers in seen:
        assert headers["x-session-id"] == "S-1" and headers["x-gateway-tag"] == "t"
        assert headers["accept-encoding"] == "identity"  # consumed, and listed as such
    listed = re.search(r"\*\*Headers the proxy consumes\*\*(.*?)\n\n", README.read_text(), re.S)
    assert listed is not None, "the README's proxy section lists the headers it consumes"
    for name in CONSUMED:
        assert f"`{name}`" in listed.group(1).lower(), name


# --- a body that stalls ----------------------------------------------------------------------------


def test_a_stalled_body_gets_a_408_and_frees_its_connection_slot() -> None:
    """The tester's case: heads with Content-Length 100 and 4 bytes of body held every slot for 75 s and
    were closed without a reply. Now each gets a 408 at the body deadline, and the slots are free."""

    async def go(url, server, up):
        host, port = url.split("//")[1].split("/")[0].split(":")
        stalled = []
        for data in (
            post(b"x" * 100)[:-96],  # Content-Length 100, 4 bytes sent
            post(b"", extra=b"Transfer-Encoding: chunked\r\n").replace(b"Content-Length: 0\r\n", b"")
            + b"a\r\n12345",  # a chunk of 10, 5 bytes sent
        ):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(data)
            stalled.append((reader, writer))
        at_cap = await asyncio.gather(*(r.read() for r, _ in stalled))  # until the proxy closes them
        for _, writer in stalled:
            writer.close()
        after = await exchange(url, post())
        return at_cap, after

    at_cap, after = arun(behind(go, body_timeout_s=0.3, max_connections=2))
    for reply in at_cap:
        assert status(reply) == 408 and b'"code":"request_timeout"' in reply
        assert b"body did not arrive whole within 0.3 s" in reply and b"--body-timeout" in reply
    assert b"4 bytes of 100 arrived" in at_cap[0] and b"of a chunked body" in at_cap[1]
    assert status(after) == 200


# --- memory pressure -------------------------------------------------------------------------------


def _batch(n: int, state: str = "open", size: int = 10) -> Batch:
    calls = [
        {"id": f"c{n}_{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for i in range(2)
    ]
    message = {"role": "assistant", "content": "x" * size, "tool_calls": calls}
    return Batch(tag=f"{n:012x}", message=message, template={}, state=state)  # type: ignore[arg-type]


def test_under_pressure_finished_batches_and_kept_replies_go_before_open_batches() -> None:
    """It was plain LRU: an open batch in use (its calls still to hand out) went before a finished one
    kept only for retries."""
    now = [1000.0]
    store = MemoryStore(StoreLimits(max_batches=3), clock=lambda: now[0])
    for n, state in enumerate(("open", "finished", "open", "open")):  # the open batch 0 is the oldest
        now[0] += 1
        store.save(_batch(n, state))
    assert store.get(f"{1:012x}") is None and store.tombstone(f"{1:012x}").reason == "evicted"
    assert all(store.get(f"{n:012x}") is not None for n in (0, 2, 3))

    by_bytes = MemoryStore(StoreLimits(max_bytes=9_000), clock=lambda: now[0])
    by_bytes.save(_batch(10, size=2_000))  # open, the oldest
    now[0] += 1
    reply = StoredReply(
        request_hash="h", status=200, content_type="application/json", body=b"r" * 2_000, at=now[0]
    )
    by_bytes.keep_reply("scope:key", reply)
    now[0] += 1
    by_bytes.save(_batch(11, size=2_000))
    by_bytes.save(_batch(12, size=2_000))  # over the bound: the kept reply goes, not the open batch 10
    stub = by_bytes.reply_for("scope:key")  # its body went; its key stays, so a retry is told (a 409)
    assert stub is not None and not stub.kept and stub.body == b"" and by_bytes.get(f"{10:012x}") is not None


def test_a_410_for_a_batch_whose_tombstone_went_under_pressure_says_so() -> None:
    """It listed a restart, old age and another proxy, none of them the cause."""

    async def go(http, server, up):
        first = [{"role": "user", "content": "a"}]
        ra = (await http.post("/chat/completions", json=body(first))).json()
        for q in ("b", "c"):  # max_batches=1: b evicts a (its tombstone kept), c evicts b and a's tombstone
            await http.post("/chat/completions", json=body([{"role": "user", "content": q}]))
        late = await http.post("/chat/completions", json=body(answered(first, ra)))
        health = (await http.get(str(http.base_url).replace("/v1/", "/health"))).json()
        return late, health

    (late, health), up = arun(checking(go, max_batches=1))
    assert late.status_code == 410 and late.json()["error"]["code"] == "batch_unknown"
    message = late.json()["error"]["message"]
    assert "dropped 1 tombstones of evicted batches" in message and "memory pressure" in message
    assert "position 1 (get_news)" not in message and "position 1" in message  # the calls never handed out
    assert health["tombstones_dropped"] == 1 and health["batches_evicted"] == 2
    assert len(up.requests) == 3  # the partial batch was never forwarded


# --- nitpicks: invalid UTF-8, a legacy function message ---------------------------------------------


def test_an_invalid_utf8_body_is_named_with_its_byte_offset() -> None:
    async def go(http, server, up):
        raw = b'{"model": "m", "messages": [{"role": "user", "content": "caf\xff"}]}'
        plain = await http.post(
            "/chat/completions", content=raw, headers={"Content-Type": "application/json"}
        )
        return plain

    plain, up = arun(checking(go))
    assert plain.status_code == 400 and plain.json()["error"]["code"] == "invalid_json"
    message = plain.json()["error"]["message"]
    assert "not valid UTF-8 at byte 60" in message and "surrogates" not in message
    assert up.requests == []


def test_a_function_message_after_an_unfinished_batch_is_a_400_naming_it() -> None:
    """It closed the batch as interrupted and told the model "the user sent a new message", untrue."""
    first = [{"role": "user", "content": "q"}]

    async def go(http, server, up):
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        legacy = [
            *first,
            r0["choices"][0]["message"],
            {"role": "function", "name": "get_weather", "content": "R"},
        ]
        refused = await http.post("/chat/completions", json=body(legacy))
        final, _ = await converse(http, answered(first, r0))  # nothing was closed: the batch goes on
        return r0, refused, final

    (r0, refused, final), up = arun(checking(go))
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_batch_messages"
    message = refused.json()["error"]["message"]
    assert "message 2 (role 'function', name 'get_weather')" in message
    assert "not a result of a serialized call" in message and repr(the_call(r0)["id"]) in message
    assert final["choices"][0]["message"]["content"].startswith("All done") and up.problems == []


def test_the_responses_api_is_a_404_saying_the_proxy_serves_chat_completions_only() -> None:
    """The Agents SDK's default model calls /v1/responses; its 404 said only "no such endpoint"."""

    async def go(http, server, up):
        return await http.post("/responses", json={"model": "m", "input": "hi"})

    reply, _ = arun(checking(go))
    message = reply.json()["error"]["message"]
    assert reply.status_code == 404 and "the proxy serves chat completions only" in message
    assert "OpenAIChatCompletionsModel" in message and "set_default_openai_api('chat_completions')" in message

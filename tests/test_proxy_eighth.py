"""Issue 12, eighth check: regressions for what the f12 fresh-eyes tester found.

Identical requests in flight at once under one retry marker share one upstream call; an early reply
(a 503 past the body budget, a 413) reaches real HTTP clients; later turns that drop or edit a finished
batch's messages are refused the same documented way. No wall-clock thresholds: a gated upstream holds
its answer until every copy of a request is in flight.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from aiohttp import web

from tests.proxy_helpers import LoopbackUpstream, completion
from tests.test_proxy_faults import answered, arun, body, checking, converse, proxied, the_call
from toolcall_lab.proxy import HTTPUpstream

# --- 1. identical requests in flight under one retry marker: one upstream call --------------------


def _batch_reply(n: int) -> bytes:
    calls = [
        {
            "id": f"call_up_{n}_{p}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": f"c{p}", "n": n})},
        }
        for p in range(3)
    ]
    return completion({"role": "assistant", "content": None, "tool_calls": calls})


class GatedUpstream(LoopbackUpstream):
    """Answers every request only once `gate` opens: a 3-call batch (distinct per request, so copies that
    went upstream each would get other calls), or `status` with an error body."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.gate = asyncio.Event()
        self.requests: list[dict[str, Any]] = []
        self.runner: web.BaseRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(await request.json())
        n = len(self.requests)
        await self.gate.wait()
        if self.status != 200:
            error = {"error": {"message": f"slow down ({n})", "type": "rate_limit"}}
            return web.json_response(error, status=self.status, headers={"Retry-After": "7"})
        return web.Response(body=_batch_reply(n), content_type="application/json")


async def _copies_in_flight(marker: str, *, stream: bool, keys: list[str], status: int = 200):
    """Send one request per entry of `keys` (its credential) at once, all under the same `marker`
    header; open the upstream's gate only when every copy is in flight at the proxy."""
    up = GatedUpstream(status)
    url = await up.start()

    async def go(http, server):
        request = body([{"role": "user", "content": "same question"}], stream=stream)
        sent = [
            asyncio.ensure_future(
                http.post(
                    "/chat/completions",
                    json=request,
                    headers={"Authorization": f"Bearer {k}", marker: "SAME"},
                )
            )
            for k in keys
        ]
        for _ in range(3000):  # until every copy is in flight (no time limit is asserted)
            if server.in_flight == len(keys) and up.requests:
                break
            await asyncio.sleep(0.01)
        up.gate.set()
        replies = await asyncio.gather(*sent)
        return replies, dict(server.stats)

    try:
        replies, stats = await proxied(go, HTTPUpstream(url))
    finally:
        await up.close()
    return replies, stats, up


def _first_call_id(reply: httpx.Response) -> str:
    if reply.headers["content-type"].startswith("text/event-stream"):
        for line in reply.text.splitlines():
            if line.startswith("data: {") and '"tool_calls"' in line:
                return str(json.loads(line[6:])["choices"][0]["delta"]["tool_calls"][0]["id"])
        raise AssertionError(f"no call in the stream: {reply.text[:300]}")
    return str(the_call(reply.json())["id"])


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("marker", ["x-session-id", "Idempotency-Key"])
def test_identical_requests_in_flight_under_a_retry_marker_share_one_upstream_call(marker, stream) -> None:
    """The tester's r8.py: three copies under x-session-id each went upstream (three batches, three bills);
    Idempotency-Key already merged them. Now both wait for the first copy and get its batch."""
    replies, stats, up = arun(_copies_in_flight(marker, stream=stream, keys=["k", "k", "k"]))
    assert len(up.requests) == 1
    assert [r.status_code for r in replies] == [200, 200, 200]
    ids = {_first_call_id(r) for r in replies}
    assert len(ids) == 1 and next(iter(ids)).endswith("_0of3")
    assert stats["batches_opened"] == 1 and stats["retries_joined"] + stats["retries_replayed"] >= 2


@pytest.mark.parametrize("marker", ["x-session-id", "Idempotency-Key"])
def test_identical_requests_in_flight_share_one_upstream_call_per_credential(marker) -> None:
    """The tester's four copies under two credentials: one upstream call per credential, never one
    caller's batch for the other."""
    replies, stats, up = arun(_copies_in_flight(marker, stream=False, keys=["k0", "k1", "k0", "k1"]))
    assert len(up.requests) == 2 and stats["batches_opened"] == 2
    ids = [_first_call_id(r) for r in replies]
    assert ids[0] == ids[2] and ids[1] == ids[3] and ids[0] != ids[1]


@pytest.mark.parametrize("marker", ["x-session-id", "Idempotency-Key"])
def test_copies_in_flight_share_the_first_ones_error_too(marker) -> None:
    """An upstream 429 for the first copy is the answer the others get (status, body, Retry-After): they
    do not each ask the upstream again while it is busy."""
    replies, _, up = arun(_copies_in_flight(marker, stream=False, keys=["k", "k", "k"], status=429))
    assert len(up.requests) == 1
    assert [r.status_code for r in replies] == [429, 429, 429]
    assert {r.headers["retry-after"] for r in replies} == {"7"}
    assert {r.json()["error"]["message"] for r in replies} == {"slow down (1)"}


# --- 3. an early reply reaches httpx and the openai client -----------------------------------------


def _big_request(size: int) -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * size}]}).encode()


async def _refused_while_sending(
    send, *, max_body_bytes: int = 10_000_000, inflight: int = 15_000_000, hold: int = 8_000_000
):
    """A raw connection announces a `hold`-byte body and sends part of it (its bytes count against the
    in-flight budget); then `send(http, base_url)` runs against the real proxy."""
    payload = _big_request(hold)
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(payload)}\r\n\r\n".encode()

    async def go(http, server):
        host, port = str(http.base_url).split("//")[1].split("/")[0].rsplit(":", 1)
        _, writer = await asyncio.open_connection(host, int(port))
        writer.write(head + payload[:1000])
        await writer.drain()
        for _ in range(3000):  # until the proxy counted the held body (no time limit is asserted)
            if server._http.inflight:
                break
            await asyncio.sleep(0.01)
        try:
            return await send(http, str(http.base_url)), dict(server.stats)
        finally:
            writer.close()

    up = GatedUpstream()
    up.gate.set()
    url = await up.start()
    try:
        return await proxied(
            go, HTTPUpstream(url), max_body_bytes=max_body_bytes, max_inflight_body_bytes=inflight
        )
    finally:
        await up.close()


def test_an_httpx_client_sending_a_big_body_gets_the_503_past_the_body_budget_not_a_reset() -> None:
    """The tester: three 8 MB bodies at once against --max-inflight-body-bytes 15000000 gave httpx
    [200, ReadError, ReadError] and the openai client APIConnectionError: the proxy answered before reading
    the body and closed while the client was still sending, so the client's TCP stack got a reset and threw
    the reply away. Now the proxy half-closes and reads the rest of the body (bounded) before it closes."""

    async def send(http, base):
        async with httpx.AsyncClient(timeout=30) as fresh:  # its own connection, as a new client's
            return await fresh.post(base + "chat/completions", content=_big_request(8_000_000))

    reply, stats = arun(_refused_while_sending(send))
    assert reply.status_code == 503 and reply.json()["error"]["code"] == "bodies_over_budget"
    assert reply.headers["retry-after"] == "1"
    assert stats["error_replies_5xx"] == 1


def test_the_openai_client_gets_the_503_too_and_retries_on_it() -> None:
    """The openai client raised APIConnectionError('Connection error.'); now it sees the 503 as an
    APIStatusError (with max_retries=0), the budget named in the message."""
    from openai import APIStatusError, AsyncOpenAI

    async def send(http, base):
        client = AsyncOpenAI(base_url=base, api_key="k", max_retries=0)
        try:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x" * 8_000_000}]
            )
        except APIStatusError as exc:
            return exc
        finally:
            await client.close()
        raise AssertionError("no error")

    error, _ = arun(_refused_while_sending(send))
    assert error.status_code == 503 and "--max-inflight-body-bytes" in str(error)


def test_a_413_for_a_body_over_the_limit_reaches_httpx_whole() -> None:
    """The other early reply: a body over --max-body-bytes is refused from its Content-Length."""

    async def send(http, base):
        async with httpx.AsyncClient(timeout=30) as fresh:
            return await fresh.post(base + "chat/completions", content=_big_request(12_000_000))

    reply, _ = arun(_refused_while_sending(send, inflight=100_000_000))
    assert reply.status_code == 413 and reply.json()["error"]["code"] == "body_too_large"


# --- 5. a later turn that drops or edits a finished batch's messages ---------------------------------


async def _finished(http):
    """A conversation whose 3-call batch is finished: its messages, final answer included."""
    final, messages = await converse(http, [{"role": "user", "content": "q"}])
    return [*messages, final["choices"][0]["message"], {"role": "user", "content": "next"}]


def _variants(history):
    """The tester's r23.py variants of a later turn (the batch is messages 1-6)."""
    edited = json.loads(json.dumps(history))
    edited[4]["content"] = "EDITED"
    last_dropped = history[:5] + history[7:]
    middle_dropped = history[:3] + history[5:]
    result_dropped = history[:6] + history[7:]  # call 2 kept, its result left out
    return {"edited": edited, "last": last_dropped, "middle": middle_dropped, "result": result_dropped}


@pytest.mark.parametrize("forgotten", [False, True], ids=["held", "expired"])
def test_a_later_turn_that_edits_or_drops_a_finished_batchs_messages_is_refused_the_same_way(
    forgotten,
) -> None:
    """The tester's r23.py: with the last pair dropped the upstream got all 3 calls and a made-up
    "Result left out" for call 2 (200, not counted), the middle pair dropped was a 400, and an edited
    result went upstream (200). Now a batch in the history is whole or absent: an edited result is a 409
    naming the call, a left-out pair or result a 400 naming it, held or forgotten (from the tombstone),
    and nothing goes upstream."""
    now = [1_000_000.0]

    async def go(http, server, up):
        history = await _finished(http)
        if forgotten:
            now[0] += 61
            server.sweep()
        sent = len(up.requests)
        replies = {
            name: await http.post("/chat/completions", json=body(messages))
            for name, messages in _variants(history).items()
        }
        whole = await http.post("/chat/completions", json=body(history))
        without = await http.post("/chat/completions", json=body([history[0], *history[7:]]))
        return replies, whole, without, len(up.requests) - sent

    (replies, whole, without, forwarded), up = arun(checking(go, ttl_s=60, clock=lambda: now[0]))
    assert forwarded == 2 and up.problems == []  # only the whole batch, and the history without it
    assert whole.status_code == 200 and without.status_code == 200
    edited = replies["edited"]
    assert edited.status_code == 409 and edited.json()["error"]["code"] == "result_conflict"
    assert "_1of3" in _error(edited) and "message 4 differs" in _error(edited)
    for name in ("last", "middle", "result"):
        reply = replies[name]
        assert reply.status_code == 400, (name, reply.text)
        assert reply.json()["error"]["code"] == "invalid_batch_messages"
        assert "or leave the whole batch out" in _error(reply)
    assert "_2of3" in _error(replies["last"]) and "its call and its result" in _error(replies["last"])
    assert "not the call at position 1" in _error(replies["middle"])
    assert "_2of3" in _error(replies["result"]) and "leaves out its result" in _error(replies["result"])


def test_an_interrupted_batch_whose_unanswered_call_the_client_dropped_still_goes_on() -> None:
    """What stays allowed: a call handed out but never answered (the user moved on) may be left out of
    the history; the proxy knows it was handed out and tells the upstream it was not executed."""

    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        m1 = answered(first, r0)
        await http.post("/chat/completions", json=body(m1))  # call 1 handed out, never answered
        return await http.post("/chat/completions", json=body([*m1, {"role": "user", "content": "stop"}]))

    reply, up = arun(checking(go))
    assert reply.status_code == 200
    tools = [m for m in up.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(tools) == 3 and tools[1]["content"].startswith("Not executed")


def _error(reply: httpx.Response) -> str:
    return str(reply.json()["error"]["message"])


# --- 4. what a rewritten request costs: written once, the same bytes --------------------------------


def _history(text: str) -> dict:
    calls = [
        {
            "id": f"call_tlpabcdefabcdef_{p}of3",
            "type": "function",
            "function": {"name": "f", "arguments": "{}"},
        }
        for p in range(3)
    ]
    messages: list[dict] = [{"role": "user", "content": "q"}]
    for p, call in enumerate(calls):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": f"{p}:" + text},
        ]
    messages += [
        {"role": "tool", "tool_call_id": "x", "content": "ok"},  # a short, interned content shared below
        {"role": "tool", "tool_call_id": "y", "content": "ok"},
    ]
    return {"model": "m", "temperature": 0.5, "messages": messages, "parallel_tool_calls": False}


_WRITTEN = {
    "orjson": lambda b: __import__("orjson").dumps(b),
    "json compact": lambda b: json.dumps(b, separators=(",", ":")).encode(),
    "json default": lambda b: json.dumps(b).encode(),
    "json utf-8 indent": lambda b: json.dumps(b, ensure_ascii=False, indent=2).encode(),
}


@pytest.mark.parametrize("form", list(_WRITTEN))
@pytest.mark.parametrize("text", ["line\n" * 20_000, 'q"uote' * 15_000, "é✓" * 30_000])
def test_a_large_body_written_message_by_message_is_the_body_written_whole(form, text) -> None:
    """Item 4: a completing request or a later turn with large results was written twice (once to check
    that writing it again keeps the client's tokens, once with the new messages) and each result
    re-serialised although only its tool_call_id changed. Now each message is written once, and a result
    re-homed under the upstream's id keeps its bytes with that id replaced: the body sent upstream is
    exactly the body written whole."""
    from toolcall_lab.proxy._forward import PIECEWISE_BYTES, Forwarder
    from toolcall_lab.proxy._wire import dumps_ascii, dumps_one_way, loads, same_but_spacing

    body = _history(text)
    raw = _WRITTEN[form](body)
    parsed = loads(raw)
    assert len(raw) >= PIECEWISE_BYTES * len(parsed["messages"])  # the message-by-message path
    old = parsed["messages"]
    calls = [m["tool_calls"][0] for m in old[1:7:2]]
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{**c, "id": f"up{p}"} for p, c in enumerate(calls)],
    }
    rehomed = [{**old[2 + 2 * p], "tool_call_id": f"up{p}"} for p in range(3)]
    swapped = {**old[8], "tool_call_id": "y"}  # same content object as message 9: still its own bytes
    messages = [old[0], assistant, *rehomed, swapped, old[8], {"role": "user", "content": "next"}]
    forward = Forwarder(None, idle_timeout_s=1, total_timeout_s=None, model=None, stats={})  # type: ignore[arg-type]
    sent = forward.upstream_body(raw, parsed, messages, stream=False)
    expected = {**parsed, "messages": messages}
    assert loads(sent) == expected
    writer = next(w for w in (dumps_one_way, dumps_ascii) if same_but_spacing(w(parsed), raw))
    whole = writer(expected)  # what writing the new body whole gave
    assert sent == whole


@pytest.mark.parametrize("big", [2**64, -(2**63) - 1, 10**25, -(10**30)])
def test_integers_beyond_64_bits_are_still_read_exactly_when_the_body_is_not_scanned(big) -> None:
    """Item 4: `exact` translated the whole body's bytes on every rewritten request (4.5 ms for 3.8 MB of
    results with line breaks, 19.5 ms for 9 MB of escaped é); now it looks at the parsed value first and
    reads the bytes only when a float there may be such an integer."""
    from toolcall_lab.proxy._wire import exact, loads

    raw = json.dumps(
        {"messages": [{"role": "user", "content": "9" * 40}], "metadata": {"n": [big, 0.5, 2**63]}}
    )
    data = raw.encode()
    assert exact(data, loads(data))["metadata"]["n"] == [big, 0.5, 2**63]
    text = {"messages": [{"role": "user", "content": "1" * 40}], "temperature": 1e19}
    assert exact(json.dumps(text).encode(), loads(json.dumps(text).encode())) == text


# --- 8. --out of a command that writes a folder -----------------------------------------------------


@pytest.mark.parametrize("command", ["import", "generate"])
@pytest.mark.parametrize("name", ["rec.json", "rec.JSONL"])
def test_an_out_folder_named_like_a_json_file_is_refused_before_any_work(
    tmp_path, capsys, command, name
) -> None:
    """Found: `toolcall-lab import recording X.sse --out rec.json` made a folder called rec.json, and
    `serve-trace rec.json` then said "no such trace file". A folder output named like a file is refused
    with a message saying it is a folder and what name to give; an existing folder of that name is used."""
    from pathlib import Path

    from toolcall_lab import cli

    trace = str(Path(__file__).parent.parent / "data" / "traces" / "one_tool_round.json")
    out = tmp_path / name
    args = {
        "import": ["import", "recording", trace, "--out", str(out)],
        "generate": ["generate", "--n", "1", "--out", str(out)],
    }[command]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "writes a folder of trace files" in err and f"--out {tmp_path / 'rec'}" in err
    assert not out.exists()
    if command == "generate":
        out.mkdir()
        assert cli.main(args) == 0  # an existing folder is a folder, whatever its name
        assert any(out.iterdir())

"""The third tester's findings outside the HTTP layer (issue 12, fourth pass): serialized replies keep
the upstream call's headers, a batch rebuilt from the client counts its left-out calls once, answers
the proxy cannot split pass as sent, untouched request bytes stay as sent."""

from __future__ import annotations

import asyncio
import json

import httpx

from tests.proxy_helpers import Act, WireUpstream, http_reply
from toolcall_lab.proxy import HTTPUpstream, ProxyServer

CALL_HEADERS = {
    "X-Request-Id": "req_first",
    "X-Ratelimit-Remaining-Requests": "99",
    "Openai-Processing-Ms": "12",
    "Openai-Organization": "org-x",
}
FINAL_HEADERS = {"X-Request-Id": "req_final", "X-Ratelimit-Remaining-Requests": "98"}


def tool_reply(calls: list[dict], **extra) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-t",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": calls},
                    "finish_reason": "tool_calls",
                }
            ],
            **extra,
        }
    ).encode()


def call(cid: str, name: str = "f") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


FINAL = json.dumps(
    {
        "id": "chatcmpl-f",
        "object": "chat.completion",
        "created": 1_700_000_001,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "all done"}, "finish_reason": "stop"}
        ],
    }
).encode()


def batch_then_final(conn, k, head, body) -> Act:
    """Two calls for a first message, the final answer once the results came."""
    if b'"tool"' in body:
        return Act(http_reply(FINAL, FINAL_HEADERS))
    return Act(http_reply(tool_reply([call("up_a"), call("up_b")]), CALL_HEADERS))


async def behind(fn, behave, **settings):
    up = WireUpstream(behave)
    url = await up.start()
    server = ProxyServer(HTTPUpstream(url), **settings)
    proxy_url = await server.start()
    try:
        async with httpx.AsyncClient(base_url=proxy_url, timeout=20) as http:
            return await fn(http, server, up)
    finally:
        await server.close()
        await up.close()


def ask(messages, **extra):
    return {"model": "m", "messages": messages, "parallel_tool_calls": False, **extra}


def answer(messages, reply, content="ok"):
    message = reply["choices"][0]["message"]
    (one,) = message["tool_calls"]
    return [*messages, message, {"role": "tool", "tool_call_id": one["id"], "content": content}]


def test_serialized_replies_keep_the_headers_of_the_upstream_call_they_come_from() -> None:
    """Found: x-request-id, x-ratelimit-*, openai-* were dropped on serialized 200 replies. The first
    hand-out carries the first upstream call's headers, the completion the completing call's; a queued
    hand-out (no upstream call) carries none of them."""

    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        r0 = await http.post("/chat/completions", json=ask(first))
        m1 = answer(first, r0.json())
        r1 = await http.post("/chat/completions", json=ask(m1))
        m2 = answer(m1, r1.json())
        r2 = await http.post("/chat/completions", json=ask(m2))
        streamed = await http.post(
            "/chat/completions", json=ask([{"role": "user", "content": "s"}], stream=True)
        )
        return r0, r1, r2, streamed

    r0, r1, r2, streamed = asyncio.run(behind(go, batch_then_final))
    for name, value in CALL_HEADERS.items():
        assert r0.headers.get(name) == value and streamed.headers.get(name) == value
    assert "x-request-id" not in r1.headers  # served from the queue: no upstream call to describe
    assert r2.headers.get("x-request-id") == "req_final"
    assert r2.headers.get("x-ratelimit-remaining-requests") == "98"
    assert r2.json()["choices"][0]["message"]["content"] == "all done"


def test_the_first_hand_out_gains_no_fields_the_upstream_did_not_send() -> None:
    bare = json.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call("a"), call("b")]}}]}
    ).encode()

    async def go(http, server, up):
        return (await http.post("/chat/completions", json=ask([{"role": "user", "content": "q"}]))).json()

    reply = asyncio.run(behind(go, lambda c, k, h, b: Act(http_reply(bare))))
    assert set(reply) == {"choices"}  # no created, object, id or usage invented
    assert len(reply["choices"][0]["message"]["tool_calls"]) == 1


def test_an_answer_with_a_call_the_proxy_cannot_split_passes_as_sent() -> None:
    """Found: a call without ``function`` was handed out anyway, as ``{'id': 'call_..._1of2'}``."""
    odd = [
        [call("a"), {"id": "b"}],  # no function
        [call("a"), {"id": "b", "type": "custom", "custom": {"name": "x", "input": "y"}}],
        [call("a"), {"id": "b", "type": "function", "function": {"name": "g", "arguments": {"x": 1}}}],
    ]

    for calls in odd:
        raw = tool_reply(calls)

        async def go(http, server, up, raw=raw):
            r = await http.post("/chat/completions", json=ask([{"role": "user", "content": "q"}]))
            return r.status_code, r.content, server.store.summary()

        code, content, summary = asyncio.run(behind(go, lambda c, k, h, b, raw=raw: Act(http_reply(raw))))
        assert code == 200 and content == raw, calls  # byte for byte
        assert summary["open_batches"] == 0


def test_calls_left_out_counts_each_call_once_across_later_turns_and_restarts() -> None:
    """Found: /health calls_left_out grew 2 -> 4 -> 6 for the same 2 calls, once per later request."""
    three = tool_reply([call("u1"), call("u2"), call("u3")])

    def behave(conn, k, head, body):
        return Act(http_reply(FINAL if b"interrupt" in body or b'"tool"' in body else three))

    async def go(http, server, up):
        msgs = [{"role": "user", "content": "q"}]
        r = (await http.post("/chat/completions", json=ask(msgs))).json()
        msgs = [*answer(msgs, r, "first"), {"role": "user", "content": "interrupt"}]
        await http.post("/chat/completions", json=ask(msgs, parallel_tool_calls=True))
        return msgs

    async def later(msgs):
        async def turns(http, server, up):
            counts = []
            history = [*msgs, {"role": "assistant", "content": "ok"}]
            for k in range(3):
                history = [*history, {"role": "user", "content": f"more {k}"}]
                r = await http.post("/chat/completions", json=ask(history, parallel_tool_calls=True))
                assert r.status_code == 200
                history = [*history, {"role": "assistant", "content": "ok"}]
                health = str(http.base_url).split("/v1")[0] + "/health"
                counts.append((await http.get(health)).json()["calls_left_out"])
            return counts

        return await behind(turns, behave)

    msgs = asyncio.run(behind(go, behave))
    assert asyncio.run(later(msgs)) == [2, 2, 2]  # a new proxy (no --state) rebuilds it once


# --- the command line: bad paths and URLs are told, never a traceback -------------------------------


def _refused(capsys, *argv: str) -> str:
    from toolcall_lab.cli import main

    assert main(["proxy", *argv, "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_bad_state_paths_and_urls_are_refused_clearly(capsys, tmp_path) -> None:
    """Found: a missing folder or a directory as --state, and ``http://[::1``, gave tracebacks; another
    application's SQLite file was accepted and given the proxy's tables."""
    import sqlite3

    up = ["--upstream", "http://127.0.0.1:9/v1"]
    missing = _refused(capsys, *up, "--state", str(tmp_path / "no" / "x.sqlite"))
    assert "--state" in missing and "does not exist; create it first" in missing
    folder = _refused(capsys, *up, "--state", str(tmp_path))
    assert "--state" in folder and "is a folder; give a file in it" in folder
    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("create table users (id integer)")
    before = other.read_bytes()
    foreign = _refused(capsys, *up, "--state", str(other))
    assert "not a proxy state file" in foreign and other.read_bytes() == before
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert "not a SQLite file a proxy can use" in _refused(capsys, *up, "--state", str(text))
    assert text.read_text() == "hello"
    assert "Invalid IPv6 URL" in _refused(capsys, "--upstream", "http://[::1")


def test_a_proxy_that_adds_its_own_key_beyond_loopback_warns_at_start(tmp_path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolcall_lab", "proxy", "--upstream", "http://127.0.0.1:9/v1", "--host",
         "0.0.0.0", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        warning = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()
    assert "warning: listening on 0.0.0.0 (beyond loopback)" in warning and "OPENAI_API_KEY" in warning


# --- bytes the proxy does not need to touch stay as sent ------------------------------------------


def test_fields_the_proxy_does_not_touch_keep_their_bytes_on_pass_through_and_on_the_completion() -> None:
    """Found: a lone \\ud800 and 1e400 were refused even on pass-through; on the completing request the
    body was rebuilt (1e-400 -> 0.0, 1E5 -> 100000.0, duplicate keys collapsed)."""
    odd = b',"x":1e-400,"y":1E5,"y":2,"s":"\\ud800\\u00e9"}'
    huge = b',"big":1e400}'

    def behave(conn, k, head, body):
        return Act(http_reply(FINAL if b'"tool"' in body else tool_reply([call("a"), call("b")])))

    async def go(http, server, up):
        plain = json.dumps({"model": "m", "messages": [{"role": "user", "content": "p"}]}).encode()[:-1]
        plain = plain + odd[:-1] + huge
        passed = await http.post(
            "/chat/completions", content=plain, headers={"content-type": "application/json"}
        )
        first = [{"role": "user", "content": "q"}]
        m1 = answer(first, (await http.post("/chat/completions", json=ask(first))).json(), "r1")
        m2 = answer(m1, (await http.post("/chat/completions", json=ask(m1))).json(), "r2")
        last = json.dumps(ask(m2)).encode()[:-1]
        refused = await http.post(
            "/chat/completions", content=last + huge, headers={"content-type": "application/json"}
        )
        done = await http.post(
            "/chat/completions", content=last + odd, headers={"content-type": "application/json"}
        )
        return passed.status_code, (refused, done.status_code), up.bodies, plain

    passed, (refused, done), bodies, plain = asyncio.run(behind(go, behave))
    assert (passed, done) == (200, 200)
    # a request the proxy writes again, with a number no double holds: told, with why, nothing sent
    assert refused.status_code == 400 and "a double cannot hold" in refused.json()["error"]["message"]
    assert bodies[0] == plain  # pass-through: byte for byte
    assert bodies[-1].endswith(odd) and b'"tool_call_id":"b"' in bodies[-1].replace(b" ", b"")


def test_serve_trace_answers_health_and_unknown_paths_in_json_and_hints_at_importing(
    capsys, tmp_path
) -> None:
    """Found: serve-trace's GET /health was a plain-text 404; a .sse file got no "import it first" hint."""
    from toolcall_lab.cli import main
    from toolcall_lab.proxy import TraceUpstream, serve, upstream_app
    from toolcall_lab.scenarios import SCENARIOS

    async def go():
        runner, url = await serve(upstream_app(TraceUpstream(SCENARIOS["three_tools_100ms"].record())))
        try:
            async with httpx.AsyncClient(timeout=10) as http:
                root = url.removesuffix("/v1")
                return (await http.get(root + "/health")), (await http.get(root + "/nowhere"))
        finally:
            await runner.cleanup()

    health, nowhere = asyncio.run(go())
    assert health.status_code == 200 and health.json()["ok"] is True
    assert nowhere.status_code == 404 and "no such endpoint" in nowhere.json()["error"]["message"]
    recording = tmp_path / "r.sse"
    recording.write_text('data: {"x": 1}\n\n')
    assert main(["serve-trace", str(recording), "--port", "0"]) == 2
    assert "must be imported first: `toolcall-lab import recording" in capsys.readouterr().err


def test_a_compact_body_is_written_again_as_splicing_its_bytes_would() -> None:
    """The fast path (a body that writes back to its own bytes is written from the parsed form) gives
    the very bytes splicing gives; a body that does not write back (spacing, 1E5) is spliced."""
    from toolcall_lab.proxy._forward import Forwarder
    from toolcall_lab.proxy._wire import dumps, spans, splice

    forward = Forwarder(object(), idle_timeout_s=1, total_timeout_s=None, model="other", stats={})  # type: ignore[arg-type]
    for raw in (
        dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "é"}], "n": 1}),  # fast
        b'{"model":"m","stream":true,"messages":[{"role":"user","content":"q\\u00e9"},{"role":"user","content":"\xc3\xa9"}],"t":0.5}',
        b'{"model": "m", "messages": [{"role":"user","content":"q"}], "x": 1E5, "stream": true}',
    ):
        body = json.loads(raw)
        messages = [*body["messages"], {"role": "tool", "tool_call_id": "a", "content": "r"}]
        got = forward.upstream_body(raw, body, messages, stream=False)
        spliced = splice(
            raw, spans(raw), {"model": dumps("other")}, drop=frozenset({"stream", "stream_options"}),
            messages=messages, originals=body["messages"],
        )  # fmt: skip
        assert got == spliced and b'"stream"' not in got and b'"model":"other"' in got

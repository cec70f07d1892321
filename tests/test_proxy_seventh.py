"""Issue 12, seventh check: regressions for what a seventh fresh-eyes tester found.

A batch the proxy knows was completed never goes upstream a second time, whichever way its kept reply
was lost (expired, evicted, too large to keep, a restart); SIGTERM stops the proxy as gracefully as
Ctrl-C; every retry path compares the same request fields; the completing request costs the same
whatever the client's JSON spacing; repeated headers pass as separate lines; request bodies in flight
have a memory budget; and a handful of messages say what is true. Expiry runs on an injected clock.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.proxy_helpers import Act, ScriptedHTTP, WireUpstream, completion, http_reply
from tests.test_proxy_faults import answered, arun, body, checking, proxied, the_call
from tests.test_proxy_fifth import final_text, hand_out_all
from toolcall_lab.proxy import HTTPUpstream


def _code(reply: httpx.Response) -> str:
    return str(reply.json()["error"]["code"])


def _message(reply: httpx.Response) -> str:
    return str(reply.json()["error"]["message"])


# --- 1. a completed batch never goes upstream again --------------------------------------------------


def test_a_completed_batch_is_not_sent_again_after_its_kept_reply_expired() -> None:
    """The tester's repro1.py: --ttl 2, the conversation, its completing request repeated at once (kept
    reply), then after the TTL: it went upstream a second time (a new answer, a second bill)."""
    now = [1_000_000.0]

    async def go(http, server, up):
        messages = await hand_out_all(http, "q")
        first = await http.post("/chat/completions", json=body(messages))
        again = await http.post("/chat/completions", json=body(messages))
        now[0] += 61
        server.sweep()
        late = await http.post("/chat/completions", json=body(messages))
        return messages, first, again, late, len(up.requests)

    (messages, first, again, late, sent), up = arun(checking(go, ttl_s=60, clock=lambda: now[0]))
    assert up.problems == [] and len(up.completed) == 1 and sent == 2
    assert first.content == again.content
    assert late.status_code == 409 and _code(late) == "batch_reply_not_kept"
    assert late.headers["x-should-retry"] == "false"
    text = _message(late)
    tag = the_call({"choices": [{"message": messages[1]}]})["id"][8:20]
    assert tag in text and "expired" in text and "not send the batch upstream a second time" in text
    assert "message 0" in text or "start the conversation again" in text  # what to do


def test_a_completed_batch_is_not_sent_again_after_it_was_evicted() -> None:
    """--max-batches 3 and four new conversations: the finished batch goes first (it only keeps a reply),
    and its completing request's retry went upstream again."""

    async def go(http, server, up):
        messages = await hand_out_all(http, "q")
        await http.post("/chat/completions", json=body(messages))
        for k in range(4):
            await http.post("/chat/completions", json=body([{"role": "user", "content": f"other {k}"}]))
        assert server.store.get(the_call({"choices": [{"message": messages[1]}]})["id"][8:20]) is None
        late = await http.post("/chat/completions", json=body(messages))
        return late, len(up.requests)

    (late, sent), up = arun(checking(go, max_batches=3))
    assert up.problems == [] and len(up.completed) == 1 and sent == 6
    assert late.status_code == 409 and _code(late) == "batch_reply_not_kept"
    assert "evicted" in _message(late)


BATCH3 = completion(
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": f"f{i}", "arguments": "{}"}}
            for i in range(3)
        ],
    }
)
BIG_FINAL = completion({"role": "assistant", "content": "x" * 50_000})


async def _scripted(replies, fn, **settings):
    up = ScriptedHTTP(replies)
    url = await up.start()
    try:
        return await proxied(fn, HTTPUpstream(url), **settings), up
    finally:
        await up.close()


async def _to_completing(http) -> list[dict]:
    messages = [{"role": "user", "content": "q"}]
    for _ in range(3):
        reply = (await http.post("/chat/completions", json=body(messages))).json()
        messages = answered(messages, reply, "r")
    return messages


def test_a_completed_batch_whose_reply_is_too_large_to_keep_is_not_sent_again(tmp_path) -> None:
    """--max-bytes 20000 and a 50 KB final answer: two identical completing requests both reached the
    upstream (only batches_finals_dropped said so). Now the second is a 409, also after a restart."""
    state = tmp_path / "p.sqlite"

    async def go(http, server):
        messages = await _to_completing(http)
        first = await http.post("/chat/completions", json=body(messages))
        again = await http.post("/chat/completions", json=body(messages))
        other = await http.post("/chat/completions", json=body(messages, temperature=1.5))
        return messages, first, again, other, server.store.summary()

    (messages, first, again, other, summary), up = arun(
        _scripted([(200, {}, BATCH3), (200, {}, BIG_FINAL)], go, max_bytes=20_000, state=state)
    )
    assert first.status_code == 200 and final_text(first) == "x" * 50_000
    assert len(up.requests) == 2 and summary["batches_finals_dropped"] == 1
    assert again.status_code == 409 and _code(again) == "batch_reply_not_kept"
    assert "--max-bytes" in _message(again)
    assert other.status_code == 409  # another temperature: not a retry, and still never sent again

    async def after(http, server):
        return await http.post("/chat/completions", json=body(messages))

    late, up2 = arun(_scripted([], after, max_bytes=20_000, state=state))
    assert late.status_code == 409 and _code(late) == "batch_reply_not_kept" and up2.requests == []


def test_a_rebuilt_batchs_reply_too_large_to_keep_is_not_sent_again() -> None:
    """The proxy forgot the batch, the client sent it whole (forwarded once, rebuilt); its reply was too
    large for the record: a retry went upstream again, with no tombstone saying it was completed."""
    now = [1_000_000.0]

    async def go(http, server):
        messages = await _to_completing(http)
        now[0] += 61
        server.sweep()
        first = await http.post("/chat/completions", json=body(messages))
        again = await http.post("/chat/completions", json=body(messages))
        return first, again

    (first, again), up = arun(
        _scripted(
            [(200, {}, BATCH3), (200, {}, BIG_FINAL)], go, max_bytes=20_000, ttl_s=60, clock=lambda: now[0]
        )
    )
    assert first.status_code == 200 and len(up.requests) == 2
    assert again.status_code == 409 and _code(again) == "batch_reply_not_kept"


def test_an_earlier_step_of_a_completed_forgotten_batch_does_not_say_calls_were_never_handed_out() -> None:
    now = [1_000_000.0]

    async def go(http, server, up):
        messages = await hand_out_all(http, "q")
        await http.post("/chat/completions", json=body(messages))
        now[0] += 61
        server.sweep()
        return await http.post("/chat/completions", json=body(messages[:5]))

    earlier, _ = arun(checking(go, ttl_s=60, clock=lambda: now[0]))
    assert earlier.status_code == 410
    text = _message(earlier)
    assert "never handed out" not in text and "completed" in text


def test_an_idempotent_reply_evicted_under_pressure_is_refused_not_sent_again() -> None:
    """A reply kept for an Idempotency-Key and dropped to stay within --max-bytes: its retry went upstream
    as a new request. Now it is told the reply was not kept (as for a reply too large to keep)."""
    plain = completion({"role": "assistant", "content": "y" * 3_000})

    async def go(http, server):
        key = {"Idempotency-Key": "k-1"}
        first = await http.post("/chat/completions", json={"model": "m", "messages": []}, headers=key)
        for k in range(4):  # other keys push it out
            await http.post(
                "/chat/completions", json={"model": "m", "messages": []}, headers={"Idempotency-Key": f"o{k}"}
            )
        again = await http.post("/chat/completions", json={"model": "m", "messages": []}, headers=key)
        return first, again

    (first, again), up = arun(_scripted([(200, {}, plain)] * 5, go, max_bytes=8_000))
    assert first.status_code == 200 and len(up.requests) == 5
    assert again.status_code == 409 and _code(again) == "idempotent_reply_not_kept"


# --- 2. SIGTERM stops the proxy as gracefully as Ctrl-C ------------------------------------------------

BATCH2 = completion(
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": f"f{i}", "arguments": "{}"}}
            for i in range(2)
        ],
    }
)


def _slow_final(conn: int, k: int, head: bytes, data: bytes) -> Act:
    """A 2-call batch for a first request; the final answer, 1.5 s late, for a request with results."""
    if b'"role":"tool"' in data:
        return Act(http_reply(completion({"role": "assistant", "content": f"final {conn}.{k}"})), delay=1.5)
    return Act(http_reply(BATCH2))


async def _start_proxy(upstream: str, state, *, ignore_sigint: bool = False):
    import signal
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "toolcall_lab",
        "proxy",
        "--upstream",
        upstream,
        "--port",
        "0",
        "--state",
        str(state),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None,
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
    url = next(w for w in line.split() if w.startswith("http://"))
    return proc, url, line


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_signal_lets_the_request_in_flight_finish_keeps_its_reply_in_state_and_exits_0(
    tmp_path, name: str
) -> None:
    """The tester's t39.py: SIGTERM killed the proxy on the spot (exit -15): the completing request in
    flight got no reply, the upstream's billed answer was lost and the retry after a restart sent the
    batch again. Now SIGTERM does what Ctrl-C does: the request in flight is answered, the state keeps
    its reply, the proxy exits 0, and the retry after a restart gets the same bytes from the state."""
    import signal

    state = tmp_path / "p.sqlite"

    async def go():
        upstream = WireUpstream(_slow_final)
        up_url = await upstream.start()
        try:
            proc, url, _ = await _start_proxy(up_url, state)
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                messages = [{"role": "user", "content": "q"}]
                for _ in range(2):
                    reply = (await http.post("/chat/completions", json=body(messages))).json()
                    messages = answered(messages, reply, "r")
                in_flight = asyncio.ensure_future(http.post("/chat/completions", json=body(messages)))
                await asyncio.sleep(0.5)
                proc.send_signal(getattr(signal, name))
                done = await in_flight
            code = await asyncio.wait_for(proc.wait(), 30)
            err = (await proc.stderr.read()).decode()
            sent = len(upstream.bodies)
            proc2, url2, _ = await _start_proxy(up_url, state)
            try:
                async with httpx.AsyncClient(base_url=url2, timeout=30) as http:
                    again = await http.post("/chat/completions", json=body(messages))
            finally:
                proc2.send_signal(signal.SIGTERM)
                code2 = await asyncio.wait_for(proc2.wait(), 30)
            return done, code, err, sent, again, len(upstream.bodies), code2
        finally:
            await upstream.close()

    done, code, err, sent, again, sent_after, code2 = arun(go())
    assert done.status_code == 200 and final_text(done).startswith("final")
    assert code == 0 and code2 == 0
    assert f"{name} received" in err and "no request was cut off" in err and "Traceback" not in err
    assert again.status_code == 200 and again.content == done.content
    assert sent == sent_after == 2  # the batch, then its completing request: never sent again


def test_a_proxy_whose_sigint_is_ignored_says_how_to_stop_it_and_stops_on_sigterm(tmp_path) -> None:
    """A proxy started in the background by a script ignores SIGINT, yet printed "(Ctrl-C to stop)"."""
    import signal

    async def go():
        upstream = WireUpstream(_slow_final)
        up_url = await upstream.start()
        try:
            proc, _, line = await _start_proxy(up_url, tmp_path / "p.sqlite", ignore_sigint=True)
            proc.send_signal(signal.SIGINT)  # ignored
            await asyncio.sleep(0.5)
            alive = proc.returncode is None
            proc.send_signal(signal.SIGTERM)
            return line, alive, await asyncio.wait_for(proc.wait(), 30), proc.pid
        finally:
            await upstream.close()

    line, alive, code, pid = arun(go())
    assert "Ctrl-C" not in line and "SIGINT is ignored" in line and f"kill {pid}" in line
    assert alive and code == 0


# --- 3. every retry path compares the fields that change the answer ----------------------------------


def test_an_x_session_id_retry_with_another_model_temperature_or_tools_is_not_served_the_old_batch() -> None:
    """The tester: the same session and messages with another model, temperature and a tool list holding
    only zzz got the batch (call id) made for the first request."""

    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        session = {"x-session-id": "S"}
        a = (await http.post("/chat/completions", json=body(first, temperature=0.2), headers=session)).json()
        same = (
            await http.post("/chat/completions", json=body(first, temperature=0.2), headers=session)
        ).json()
        streamed = await http.post(
            "/chat/completions", json=body(first, temperature=0.2, stream=True), headers=session
        )
        other = {
            "model": "m-2",
            "temperature": 0.9,
            "tools": [{"type": "function", "function": {"name": "zzz"}}],
        }
        b = (await http.post("/chat/completions", json={**body(first), **other}, headers=session)).json()
        return a, same, streamed, b, len(up.requests)

    (a, same, streamed, b, sent), _ = arun(checking(go))
    assert the_call(same)["id"] == the_call(a)["id"]  # a retry: the same request again
    assert the_call(a)["id"] in streamed.text  # how the reply is delivered does not count
    assert the_call(b)["id"] != the_call(a)["id"] and sent == 2  # another request: its own upstream call


def test_an_idempotency_key_reused_for_another_body_names_the_fields_that_differ() -> None:
    async def go(http, server, up):
        key = {"Idempotency-Key": "k"}
        first = [{"role": "user", "content": "q"}]
        await http.post("/chat/completions", json=body(first), headers=key)
        return await http.post("/chat/completions", json=body(first, temperature=0.5), headers=key)

    reused, _ = arun(checking(go))
    assert reused.status_code == 409 and _code(reused) == "idempotency_key_reused"
    assert "'temperature'" in _message(reused) and "'messages'" not in _message(reused)


# --- 4. the completing request's cost does not depend on the client's JSON spacing -------------------


def _opcodes(fn) -> int:
    """Python bytecode instructions `fn()` executes (deterministic: no clock involved)."""
    import sys

    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "opcode":
            count += 1
        return local

    def tracer(frame, event, arg):
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return local

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def _big_body(size: int, **extra) -> dict:
    messages: list[dict] = [{"role": "system", "content": "You are a helpful agent. " * (size // 50)}]
    per = size // 2 // 600
    for i in range(per):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"q": "x y"}'}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": ["part a", {"type": "text", "text": "b " * 200}],
            },
        ]
    return {"model": "m", "messages": messages, "parallel_tool_calls": False, **extra}


FORMS = {
    "compact": lambda b: json.dumps(b, separators=(",", ":")).encode(),
    "json.dumps default": lambda b: json.dumps(b).encode(),
    "indent=2": lambda b: json.dumps(b, indent=2, ensure_ascii=False).encode(),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_writing_the_completing_request_again_costs_no_python_work_per_token_whatever_the_spacing(
    form,
) -> None:
    """The tester's t35.py: +4 ms per 100 KB and +92 ms per MB when the client's JSON had spaces (Python's
    json.dumps default), because such a body went through a pure-Python tokenizer. Counted here in
    bytecode instructions, not time: writing a 1 MB body again takes no more Python work than 100 KB."""
    from toolcall_lab.proxy._forward import Forwarder
    from toolcall_lab.proxy._wire import loads

    forward = Forwarder(None, idle_timeout_s=1, total_timeout_s=None, model=None, stats={})  # type: ignore[arg-type]
    work = {}
    for size in (100_000, 1_000_000):
        raw = FORMS[form](_big_body(size))
        body = loads(raw)
        messages = [*body["messages"], {"role": "user", "content": "next"}]
        out: list[bytes] = []

        def write(raw=raw, body=body, messages=messages, out=out) -> None:
            out.append(forward.upstream_body(raw, body, messages, stream=False))

        work[size] = _opcodes(write)
        assert loads(out[0]) == {**body, "messages": messages}
    assert work[1_000_000] < 2 * work[100_000] + 500, work


@pytest.mark.parametrize("form", list(FORMS))
def test_a_body_that_must_keep_its_bytes_is_read_per_message_not_per_token(form) -> None:
    """``1E5`` and a repeated key must reach the upstream as sent, so such a body is spliced; finding where
    its members and messages sit takes one C-scanner call per message, whatever a message holds."""
    from toolcall_lab.proxy._forward import Forwarder
    from toolcall_lab.proxy._wire import loads

    forward = Forwarder(None, idle_timeout_s=1, total_timeout_s=None, model=None, stats={})  # type: ignore[arg-type]
    raw = FORMS[form](_big_body(1_000_000))
    raw = raw[:-1] + b', "top_k": 1E5, "x": 1, "x": 2, "note": "caf\xc3\xa9 \\u00e9"}'
    body = loads(raw)
    messages = [*body["messages"], {"role": "user", "content": "next"}]
    out: list[bytes] = []
    work = _opcodes(lambda: out.append(forward.upstream_body(raw, body, messages, stream=False)))
    sent = out[0]
    assert b'"top_k":1E5' in sent and b'"x":1,"x":2' in sent  # as the client wrote them
    assert loads(sent)["messages"] == messages and loads(sent)["note"] == "caf\u00e9 \u00e9"
    assert work < 40 * len(messages) + 2_000, work  # per message, not per string


@pytest.mark.parametrize(
    "raw",
    [
        b'{"messages":[]}',
        b' { "a" : 1 , "messages" : [ ] , "b":[1,2] } ',
        b'{"messages":[{"role":"user","content":"\\"]}{,"}], "z": {"messages": [1]}}',
        '{"k\\u00e9": "\u00e9\u00e9", "messages": [{"c": "\u4e2d\u6587"}, 2 , "x"], "k\u00e9": 1E5}'.encode(),
        b'{"messages": {"not": "a list"}, "m": -0.0e-0}',
        b'{"a":' + b"[" * 30 + b"1" + b"]" * 30 + b"}",
    ],
)
def test_the_c_scanner_finds_the_same_spans_as_the_token_reader(raw: bytes) -> None:
    from toolcall_lab.proxy._wire import _token_spans, spans

    fast, slow = spans(raw), _token_spans(raw)
    assert fast is not None and slow is not None
    assert [(n, w, fast.piece(raw, a, b)) for n, w, a, b in fast.members] == [
        (n, w, raw[a:b].strip()) for n, w, a, b in slow.members
    ]
    fast_elements = [fast.piece(raw, a, b) for a, b in fast.elements or ()]
    assert fast_elements == [raw[a:b].strip() for a, b in slow.elements or ()]


# --- 5. repeated headers pass as separate lines -----------------------------------------------------


@pytest.mark.parametrize("serial", [False, True])
def test_repeated_headers_pass_through_as_separate_lines_both_ways(serial: bool) -> None:
    """The tester: the upstream's ``Set-Cookie: a=1`` and ``Set-Cookie: b=2`` reached the client as
    ``Set-Cookie: a=1, b=2`` (RFC 9110 5.3: never to be combined), and a client's ``X-Foo: 1`` and
    ``X-Foo: 2`` reached the upstream as ``x-foo: 1, 2``."""
    from tests.proxy_helpers import exchange

    reply = BATCH2 if serial else completion({"role": "assistant", "content": "hi"})
    head_lines = "Set-Cookie: a=1; Path=/\r\nSet-Cookie: b=2; Expires=Wed, 21 Oct 2015 07:28:00 GMT"

    def behave(conn, k, head, data):
        wire = http_reply(reply)
        return Act(wire.replace(b"\r\n\r\n", b"\r\n" + head_lines.encode() + b"\r\n\r\n", 1))

    upstream = WireUpstream(behave)
    payload = json.dumps(
        body([{"role": "user", "content": "q"}]) if serial else {"model": "m", "messages": []}
    )

    async def go(http, server):
        request = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Foo: 1\r\nX-Foo: 2\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n{payload}"
        ).encode()
        return await exchange(str(http.base_url), request, quiet_s=5)

    async def run():
        url = await upstream.start()
        try:
            return await proxied(go, HTTPUpstream(url))
        finally:
            await upstream.close()

    raw = arun(run())
    head = raw.split(b"\r\n\r\n", 1)[0]
    assert raw.startswith(b"HTTP/1.1 200")
    assert b"\r\nSet-Cookie: a=1; Path=/\r\n" in head
    assert b"\r\nSet-Cookie: b=2; Expires=Wed, 21 Oct 2015 07:28:00 GMT\r\n" in head + b"\r\n"
    sent = upstream.heads[0]
    assert b"\r\nx-foo: 1\r\nx-foo: 2\r\n" in sent and b"1, 2" not in sent


# --- 6. serve-trace keeps a streamed recording's system_fingerprint ----------------------------------

STREAMED = """\
data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_5050236cbd","service_tier":"default","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_5050236cbd","service_tier":"default","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\":\\"Paris\\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_5050236cbd","service_tier":"default","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"""


def test_a_trace_upstream_keeps_the_system_fingerprint_of_a_streamed_recording(tmp_path) -> None:
    """The tester: an imported streamed recording keeps "system_fingerprint" in every chunk, and serve-trace
    answered without it, streamed or not."""
    from toolcall_lab.importers import import_recording
    from toolcall_lab.proxy import TraceUpstream

    path = tmp_path / "r.sse"
    path.write_text(STREAMED)
    upstream = TraceUpstream(import_recording(path, include_no_calls=True).traces[0])
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "q"}]}
    plain = json.loads(arun(upstream.send(json.dumps(request).encode(), {}, stream=False)).body)

    async def streamed() -> bytes:
        reply = await upstream.send(json.dumps({**request, "stream": True}).encode(), {}, stream=True)
        return b"".join([piece async for piece in reply.stream])

    events = [
        json.loads(line[6:]) for line in arun(streamed()).decode().splitlines() if line.startswith("data: {")
    ]
    assert plain["system_fingerprint"] == "fp_5050236cbd" and plain["service_tier"] == "default"
    assert events and all(e["system_fingerprint"] == "fp_5050236cbd" for e in events)


# --- 8. a call never handed out is named so, on every path --------------------------------------------


def _guess(reply: dict, position: int, n: int, arguments: str = "{}") -> list[dict]:
    """The assistant message and result for a call of the same batch the client was never given."""
    cid = the_call(reply)["id"].replace("_0of", f"_{position}of").replace("_1of", f"_{position}of")
    call = {"id": cid, "type": "function", "function": {"name": "get_news", "arguments": arguments}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": cid, "content": "guessed"},
    ]


def test_a_result_for_a_call_never_handed_out_is_an_out_of_order_409_on_every_path() -> None:
    """The tester: sending call ..._1of3 with arguments {} got a 400 saying the call "differs from the call
    the proxy handed out", although it was never handed out. While the proxy holds the batch, after it
    forgot it (tombstone), and in a later turn's history, such a call is a 409 out_of_order naming it
    (a later turn used to send the guessed result upstream as the call's)."""
    now = [1_000_000.0]

    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        m1 = answered(first, r0)
        guessed = [*m1, *_guess(r0, 1, 3)]
        held = await http.post("/chat/completions", json=body(guessed))
        later = [*m1, *_guess(r0, 1, 3), *_guess(r0, 2, 3), {"role": "user", "content": "new question"}]
        in_history = await http.post("/chat/completions", json=body(later))
        now[0] += 61
        server.sweep()
        whole = [*m1, *_guess(r0, 1, 3), *_guess(r0, 2, 3)]
        forgotten = await http.post("/chat/completions", json=body(whole))
        forgotten_later = await http.post("/chat/completions", json=body(later))
        return held, in_history, forgotten, forgotten_later, len(up.requests)

    replies, up = arun(checking(go, ttl_s=60, clock=lambda: now[0]))
    *refused, sent = replies
    for reply in refused:
        assert reply.status_code == 409 and _code(reply) == "out_of_order", reply.text
        text = _message(reply)
        assert "_1of3" in text and ("never handed out" in text or "before the proxy handed" in text)
        assert "differs" not in _message(reply)
    assert sent == 1 and up.problems == []  # nothing guessed went upstream


# --- 10. the auth scheme's case does not change the caller --------------------------------------------


def test_the_authorization_scheme_is_case_insensitive_in_the_scope_and_bearer_keeps_its_digest() -> None:
    """The tester: a continuation with ``authorization: bearer keyC`` after ``Bearer keyC`` was a 403."""
    import hashlib

    from toolcall_lab.proxy.batches import scope_of

    old = hashlib.sha256(b"toolcall-lab proxy scope")
    for value in ("Bearer keyC", "", ""):
        old.update(b"\x00" + value.encode("latin-1"))
    assert scope_of({"authorization": "Bearer keyC"}) == old.hexdigest()[:32]  # state files stay valid
    same = {scope_of({"authorization": v}) for v in ("Bearer keyC", "bearer keyC", "BEARER  keyC")}
    assert len(same) == 1
    assert scope_of({"authorization": "Bearer keyc"}) not in same  # the credentials stay case-sensitive

    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        r0 = (
            await http.post("/chat/completions", json=body(first), headers={"Authorization": "Bearer keyC"})
        ).json()
        return await http.post(
            "/chat/completions", json=body(answered(first, r0)), headers={"authorization": "bearer keyC"}
        )

    reply, _ = arun(checking(go))
    assert reply.status_code == 200


# --- 11. messages that say what is true ---------------------------------------------------------------


def test_serve_trace_refuses_an_empty_message_list_and_its_health_counts_every_request() -> None:
    from toolcall_lab.proxy import TraceUpstream, serve, upstream_app
    from toolcall_lab.scenarios import SCENARIOS

    async def go():
        runner, url = await serve(upstream_app(TraceUpstream(SCENARIOS["three_tools_100ms"].record())))
        try:
            async with httpx.AsyncClient(base_url=url, timeout=10) as http:
                empty = await http.post("/chat/completions", json={"model": "m", "messages": []})
                bad = await http.post("/chat/completions", content=b"{not json")
                ok = await http.post("/chat/completions", json=body([{"role": "user", "content": "q"}]))
                health = (await http.get(url.removesuffix("/v1") + "/health")).json()
            return empty, bad, ok, health
        finally:
            await runner.cleanup()

    empty, bad, ok, health = arun(go())
    assert empty.status_code == 400 and "empty" in _message(empty)
    assert bad.status_code == 400 and ok.status_code == 200
    assert health == {"ok": True, "requests": 3, "answered": 1, "disconnected": 0, "refused": 2}


def test_small_cli_messages_say_what_is_true(capsys) -> None:
    from toolcall_lab.cli import main

    with pytest.raises(SystemExit):
        main(["proxy", "--upstream", "x.json", "--ttl", "inf"])
    assert "'inf': must be a finite number > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve-trace", "--help"])
    assert "recorded trace" in capsys.readouterr().out.split("positional arguments")[0].split("usage")[-1]


def test_a_slow_head_408_names_the_command_line_option() -> None:
    from tests.proxy_helpers import exchange

    async def go(http, server):
        return await exchange(
            str(http.base_url), b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", quiet_s=5
        )

    raw = arun(proxied(go, HTTPUpstream("http://127.0.0.1:9/v1"), head_timeout_s=0.3))
    assert raw.startswith(b"HTTP/1.1 408") and b"--head-timeout" in raw


# --- 7. counting tokens in pieces gives the whole's count -------------------------------------------

needs_bpe = pytest.mark.skipif(
    __import__("importlib").util.find_spec("bpe_openai") is None, reason="bpe-openai (the tokens extra)"
)


def _bpe():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        encoding = bpe_openai.get_encoding("o200k_base")
    return lambda text: len(encoding.encode_ordinary(text))


@needs_bpe
@pytest.mark.parametrize(
    "text",
    [
        "7" * 150_000,  # the tester's: 50,001 in pieces, 50,000 whole
        "QUJD+/xyz0123" * 15_000,  # base64-like: no space to cut at (136,657 vs 136,656)
        "word   \n\n  other's  it's  123456 7 " * 5_000,
        "中文文本，测试。" * 10_000,
        "Ⅻ²١٢٣" * 20_000 + "12345" * 10_000,  # numbers beyond 0-9
    ],
)
def test_counting_in_pieces_gives_exactly_the_whole_count(text: str) -> None:
    from toolcall_lab.compression.counting import in_pieces

    count = _bpe()
    assert in_pieces(count, text, piece=997) == count(text)
    assert in_pieces(count, text) == count(text)


@needs_bpe
def test_counting_in_pieces_is_exact_for_any_text_of_tricky_characters() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from toolcall_lab.compression.counting import in_pieces

    count = _bpe()
    alphabet = st.sampled_from(
        [*"aZ\u00e99\u0663\u00b2  \n\t'.,-_/+\"\u4e2d\u0301\U0001f600", "'s", "'re", "\r\n", "123"]
    )

    @settings(max_examples=300, deadline=None)
    @given(st.lists(alphabet, min_size=1, max_size=400).map("".join), st.integers(3, 40))
    def check(text: str, piece: int) -> None:
        assert in_pieces(count, text, piece=piece) == count(text)

    check()


def test_a_run_with_no_safe_cut_beyond_the_limit_is_refused_not_miscounted() -> None:
    from toolcall_lab.compression.counting import MAX_PIECE_CHARS, in_pieces

    assert in_pieces(len, "x" * 5000, piece=1000) == 5000  # counted whole: no safe place to cut
    with pytest.raises(ValueError, match="no place where"):
        in_pieces(len, "x" * (MAX_PIECE_CHARS + 2000), piece=1000)


# --- 9. a memory budget for request bodies in flight -------------------------------------------------


def test_request_bodies_in_flight_have_a_budget_past_which_a_request_gets_a_503_with_retry_after() -> None:
    """The tester: 20 connections each sending a 31 MB body took the proxy from 120 to 689 MB, and nothing
    bounded it (--max-connections 1000 x 32 MiB). Bodies are now counted from their head (Content-Length,
    or chunks as they come) until the reply is written; past the budget the request is refused before
    its body is read, with Retry-After, and the bytes are given back when a request is done."""
    payload = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 2_900}]}).encode()

    def head(length: int | None = None, chunked: bool = False) -> bytes:
        framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length or len(payload)}"
        return f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n{framing}\r\n\r\n".encode()

    async def go(http, server):
        host, port = str(http.base_url).split("//")[1].split("/")[0].rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(head() + payload[:100])  # A: 3 KB announced, 100 bytes sent so far
        await writer.drain()
        await asyncio.sleep(0.2)
        refused = await http.post("/chat/completions", content=payload)  # B: 3 KB more: past 5 KB

        async def pieces():
            yield payload[:1500]
            yield payload[1500:]

        chunked = await http.post("/chat/completions", content=pieces())  # chunked: counted as it comes
        health = (await http.get(str(http.base_url).removesuffix("/v1/") + "/health")).json()
        writer.write(payload[100:])
        await writer.drain()
        first = await reader.readuntil(b"\r\n\r\n")
        writer.close()
        await asyncio.sleep(0.1)
        again = await http.post("/chat/completions", content=payload)  # A is done: its bytes are back
        return refused, chunked, health, first, again, server._http.inflight

    async def run():
        up = ScriptedHTTP([(200, {}, completion({"role": "assistant", "content": "ok"}))] * 3)
        url = await up.start()
        try:
            return await proxied(go, HTTPUpstream(url), max_body_bytes=4_000, max_inflight_body_bytes=5_000)
        finally:
            await up.close()

    refused, chunked, health, first, again, inflight = arun(run())
    assert refused.status_code == 503 and _code(refused) == "bodies_over_budget"
    assert refused.headers["retry-after"] == "1" and "--max-inflight-body-bytes" in _message(refused)
    assert "x-should-retry" not in refused.headers  # a retry may cure it
    assert chunked.status_code == 503 and _code(chunked) == "bodies_over_budget"
    assert health["error_replies_5xx"] == 2
    assert first.startswith(b"HTTP/1.1 200") and again.status_code == 200 and inflight == 0


def test_the_inflight_budget_must_hold_one_body_of_the_largest_size() -> None:
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.proxy import ProxySettings

    with pytest.raises(
        UsageError, match="max_inflight_body_bytes=2048: must be an integer >= max_body_bytes"
    ):
        ProxySettings(max_body_bytes=4096, max_inflight_body_bytes=2048)


def test_a_second_sigterm_stops_at_once_and_says_what_was_cut_off(tmp_path) -> None:
    import signal

    async def go():
        upstream = WireUpstream(_slow_final)
        up_url = await upstream.start()
        try:
            proc, url, _ = await _start_proxy(up_url, tmp_path / "p.sqlite")
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                messages = [{"role": "user", "content": "q"}]
                for _ in range(2):
                    reply = (await http.post("/chat/completions", json=body(messages))).json()
                    messages = answered(messages, reply, "r")
                in_flight = asyncio.ensure_future(http.post("/chat/completions", json=body(messages)))
                await asyncio.sleep(0.5)
                proc.send_signal(signal.SIGTERM)
                await asyncio.sleep(0.2)
                proc.send_signal(signal.SIGTERM)
                code = await asyncio.wait_for(proc.wait(), 30)
                with pytest.raises(httpx.HTTPError):  # cut off: no reply
                    await in_flight
            return code, (await proc.stderr.read()).decode()
        finally:
            await upstream.close()

    code, err = arun(go())
    assert code == 0
    assert "1 request(s) still in flight were cut off" in err and "Traceback" not in err

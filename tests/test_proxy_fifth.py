"""Issue 12, fifth pass: regressions for what a fresh-eyes tester found.

A batch the proxy forgot after handing out every call is rebuilt from the client's messages when the
request that completes it arrives; that reply is now kept for its retries exactly like a held batch's
(same matching rules, same bounds, same ``--state`` durability). A retry of a completing request is
matched on the batch's ids, calls and results and on every request field that can change the answer
(a differing one is a 409 naming it). ``/health`` counts error replies by status class, upstream errors
passed on and the proxy's own faults apart. Expiry runs on an injected clock.
"""

from __future__ import annotations

import httpx

from tests.proxy_helpers import CheckingUpstream, ScriptedHTTP
from tests.test_proxy_faults import answered, arun, body, checking, proxied
from toolcall_lab.proxy import HTTPUpstream, ProxyServer, ids


async def hand_out_all(http, question: str, **extra):
    """Drive a conversation until the client holds every call and result of its batch (the completing
    request not sent yet); returns that request's messages."""
    messages = [{"role": "user", "content": question}]
    for _ in range(3):
        reply = (await http.post("/chat/completions", json=body(messages, **extra))).json()
        messages = answered(messages, reply)
    return messages


def final_text(reply: httpx.Response) -> str:
    return str(reply.json()["choices"][0]["message"]["content"])


def test_a_rebuilt_batchs_completing_reply_is_kept_for_its_retries() -> None:
    """The tester's ttl.py: TTL expired after every call was handed out; the completing request and two
    retries got three different upstream completions. Now: one upstream call, the same reply thrice."""
    now = [1_000_000.0]

    async def go(http, server, up):
        messages = await hand_out_all(http, "q")
        now[0] += 61
        server.sweep()
        first = await http.post("/chat/completions", json=body(messages))
        again = await http.post("/chat/completions", json=body(messages))
        streamed = await http.post("/chat/completions", json=body(messages, stream=True))  # rendered as asked
        health = (await http.get(str(http.base_url).rstrip("/").removesuffix("/v1") + "/health")).json()
        return first, again, streamed, health, len(up.completed)

    (first, again, streamed, health, completed), up = arun(checking(go, ttl_s=60, clock=lambda: now[0]))
    assert up.problems == [] and completed == 1  # the batch went upstream once
    assert first.status_code == again.status_code == 200 and first.content == again.content
    assert final_text(first).startswith("All done")
    assert first.json()["id"] in streamed.text and streamed.headers["content-type"] == "text/event-stream"
    assert health["batches_rebuilt_from_client"] == 1 and health["requests_with_rebuilt_batches"] == 1
    assert health["retries_replayed"] == 2


def test_a_rebuilt_completing_retry_keeps_the_rules_of_a_held_one() -> None:
    """Same key rules: a changed result is a 409 naming the call, an edited call a 400, a retry of an
    earlier request of the forgotten batch still a 410 (never a partial batch), a later turn goes upstream
    with the batch merged under the upstream's ids; and the kept reply expires with the record (its
    tombstone remembers the batch was completed: a retry then is a 409, seventh pass)."""
    now = [1_000_000.0]

    async def go(http, server, up):
        messages = await hand_out_all(http, "q")
        now[0] += 61
        server.sweep()
        ok = await http.post("/chat/completions", json=body(messages))
        changed = [*messages[:-1], {**messages[-1], "content": "another result"}]
        conflict = await http.post("/chat/completions", json=body(changed))
        edited_call = {**messages[5]["tool_calls"][0], "function": {"name": "rm", "arguments": "{}"}}
        edited = [*messages[:5], {**messages[5], "tool_calls": [edited_call]}, messages[6]]
        refused = await http.post("/chat/completions", json=body(edited))
        earlier = await http.post("/chat/completions", json=body(messages[:5]))
        later = [*messages, ok.json()["choices"][0]["message"], {"role": "user", "content": "and then?"}]
        turn = await http.post("/chat/completions", json=body(later))
        sent_later = up.requests[-1]["messages"]
        now[0] += 61  # the kept reply expires with its record, like a held batch's
        server.sweep()
        expired_retry = await http.post("/chat/completions", json=body(messages))
        return ok, conflict, refused, earlier, turn, sent_later, expired_retry, len(up.completed)

    out, up = arun(checking(go, ttl_s=60, clock=lambda: now[0]))
    _ok, conflict, refused, earlier, turn, sent_later, expired_retry, completed = out
    assert up.problems == []
    assert conflict.status_code == 409 and conflict.json()["error"]["code"] == "result_conflict"
    assert "position 2 of 3" in conflict.json()["error"]["message"]
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_batch_messages"
    assert earlier.status_code == 410 and "was completed" in earlier.json()["error"]["message"]
    assert turn.status_code == 200 and len(sent_later[1]["tool_calls"]) == 3
    assert all("_tlp" not in str(m.get("tool_call_id")) for m in sent_later)  # the upstream's own ids
    # after expiry the batch is known completed (its tombstone says so): never sent upstream again
    assert expired_retry.status_code == 409 and completed == 1
    assert expired_retry.json()["error"]["code"] == "batch_reply_not_kept"


def test_a_rebuilt_completing_reply_survives_a_restart_with_state(tmp_path) -> None:
    now = [1_000_000.0]
    state = tmp_path / "proxy.sqlite"

    async def go():
        up = CheckingUpstream()
        url = await up.start()
        try:

            async def before(http, server):
                messages = await hand_out_all(http, "q")
                now[0] += 61
                server.sweep()
                return messages, await http.post("/chat/completions", json=body(messages))

            settings = {"ttl_s": 60, "clock": lambda: now[0], "state": state}
            messages, first = await proxied(before, HTTPUpstream(url), **settings)

            async def after(http, server):
                return await http.post("/chat/completions", json=body(messages))

            again = await proxied(after, HTTPUpstream(url), **settings)
            return first, again, up
        finally:
            await up.close()

    first, again, up = arun(go())
    assert up.problems == [] and len(up.completed) == 1
    assert first.status_code == again.status_code == 200 and first.content == again.content


def test_a_completing_retry_that_differs_in_a_field_that_changes_the_answer_is_refused() -> None:
    """A retry is matched on every request field but the messages (the batch's ids, calls and results
    are checked instead) and how the reply is delivered (stream, stream_options); another model or
    temperature would have given another answer, so it is a 409 naming the field, never the kept reply."""

    async def go(http, server, up):
        messages = await hand_out_all(http, "q", temperature=0.2)
        first = await http.post("/chat/completions", json=body(messages, temperature=0.2))
        other_model = await http.post("/chat/completions", json=body(messages, temperature=0.2, model="m-2"))
        no_temperature = await http.post("/chat/completions", json=body(messages))
        reordered = {
            "temperature": 0.2,
            **body(messages, stream=True, stream_options={"include_usage": True}),
        }
        streamed = await http.post("/chat/completions", json=reordered)
        # the conversation before the batch is not compared (a system prompt with the time may change)
        timed = [{"role": "system", "content": "now: 12:01"}, *messages]
        with_time = await http.post("/chat/completions", json=body(timed, temperature=0.2))
        return first, other_model, no_temperature, streamed, with_time, len(up.completed)

    (first, other_model, no_temperature, streamed, with_time, completed), up = arun(checking(go))
    assert up.problems == [] and completed == 1
    assert other_model.status_code == 409 and other_model.json()["error"]["code"] == "retry_differs"
    assert "'model'" in other_model.json()["error"]["message"]
    assert other_model.headers["x-should-retry"] == "false"
    assert no_temperature.status_code == 409 and "'temperature'" in no_temperature.json()["error"]["message"]
    assert streamed.status_code == 200 and first.json()["id"] in streamed.text
    assert with_time.status_code == 200 and with_time.content == first.content


def test_health_counts_error_replies_by_class_and_upstream_errors_and_proxy_faults_apart() -> None:
    """The old ``errors`` counted every error reply as if the proxy had failed. An upstream's HTML 500
    is wrapped in a JSON error quoting it, its status kept, and counted as an upstream error reply."""
    replies = [
        (500, {"Content-Type": "text/html"}, b"<html>boom</html>"),
        (429, {"Content-Type": "application/json", "Retry-After": "7"}, b'{"error": {"message": "slow"}}'),
    ]

    async def go(http, server):
        html = await http.post("/chat/completions", json=body([{"role": "user", "content": "a"}]))
        limited = await http.post("/chat/completions", json={"model": "m", "messages": []})  # passed through
        gone = await http.post(
            "/chat/completions",
            json=body(
                [
                    {"role": "user", "content": "q"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [_call(ids.proxy_id("a" * 12, 0, 2))],
                    },
                    {"role": "tool", "tool_call_id": ids.proxy_id("a" * 12, 0, 2), "content": "r"},
                ]
            ),
        )
        missing = await http.get(str(http.base_url).rstrip("/").removesuffix("/v1") + "/nowhere")
        health = (await http.get(str(http.base_url).rstrip("/").removesuffix("/v1") + "/health")).json()
        return html, limited, gone, missing, health

    async def run():
        up = ScriptedHTTP(replies)
        url = await up.start()
        try:
            return await proxied(go, HTTPUpstream(url))
        finally:
            await up.close()

    html, limited, gone, missing, health = arun(run())
    assert html.status_code == 500 and html.headers["content-type"] == "application/json"
    assert "<html>boom</html>" in html.json()["error"]["message"]
    assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
    assert gone.status_code == 410 and missing.status_code == 404
    assert "errors" not in health
    assert health["error_replies_5xx"] == 1 and health["error_replies_4xx"] == 3
    assert health["upstream_error_replies"] == 2 and health["proxy_faults"] == 0 and health["gone"] == 1


def test_a_proxy_fault_is_counted_as_one() -> None:
    class Broken(ProxyServer):
        async def respond(self, request, raw):
            raise RuntimeError("bug")

    async def go():
        up = ScriptedHTTP([])
        url = await up.start()
        server = Broken(HTTPUpstream(url))
        base = await server.start()
        try:
            async with httpx.AsyncClient(base_url=base) as http:
                reply = await http.post("/chat/completions", json=body([{"role": "user", "content": "a"}]))
            return reply, dict(server.stats)
        finally:
            await server.close()
            await up.close()

    reply, stats = arun(go())
    assert reply.status_code == 500 and reply.json()["error"]["code"] == "proxy_error"
    assert (
        stats["proxy_faults"] == 1
        and stats["error_replies_5xx"] == 1
        and stats["upstream_error_replies"] == 0
    )


def test_positions_in_proxy_ids_are_zero_based() -> None:
    assert [ids.proxy_id("0" * 12, p, 3) for p in range(3)] == [
        "call_tlp000000000000_0of3",
        "call_tlp000000000000_1of3",
        "call_tlp000000000000_2of3",
    ]
    assert ids.parse("call_tlp000000000000_3of3") is None  # position N does not exist


def _call(cid: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}

"""The proxy owns the ids it hands out (issue 12, second pass): regressions for what a fresh-eyes tester
found, each driven over HTTP on loopback against an upstream that checks what it receives.

A batch is identified by proxy ids only it ever had, so the upstream's ids (repeated, empty, missing),
the ``x-session-id`` and the conversation before the batch cannot cross or lose anything; a batch the
proxy no longer holds is never forwarded partially; an interruption gives the upstream a valid
conversation. Expiry runs on an injected clock.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REALDATA, needs_realdata
from tests.proxy_helpers import CheckingUpstream, ScriptedHTTP, completion, model_for
from tests.test_proxy_faults import answered, arun, body, checking, converse, proxied, the_call
from toolcall_lab.cli import main
from toolcall_lab.protocol import validate_messages
from toolcall_lab.proxy import HTTPUpstream, TraceUpstream, ids
from toolcall_lab.proxy.batches import (
    HANDED_NOT_ANSWERED,
    NEVER_HANDED_OUT,
    Batch,
    MalformedBatch,
    merged,
    scan,
    translate,
)
from toolcall_lab.proxy.store import MemoryStore, SQLiteStore, StoreLimits
from toolcall_lab.scenarios import SCENARIOS


def call(cid: str, query: str) -> dict:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": "f", "arguments": json.dumps({"query": query})},
    }


def scripted(*messages: dict) -> list[tuple[int, dict, bytes]]:
    return [(200, {}, completion(m)) for m in messages]


async def with_scripted(replies, fn, **kwargs):
    up = ScriptedHTTP(replies)
    url = await up.start()
    try:
        return await proxied(fn, HTTPUpstream(url), **kwargs), up.requests
    finally:
        await up.close()


def tool_ids(messages: list[dict]) -> list:
    return [m.get("tool_call_id") for m in messages if m["role"] == "tool"]


@pytest.mark.parametrize("second", ["one call", "another batch"])
def test_a_batch_followed_by_a_single_call_or_another_batch_then_the_final_answer(second) -> None:
    """A1: the finished batch's pairs sit before the next call's pair; they are history, not a conflict."""
    follow = [call("c", "3")] if second == "one call" else [call("c", "3"), call("d", "4")]
    replies = scripted(
        {"role": "assistant", "content": None, "tool_calls": [call("a", "1"), call("b", "2")]},
        {"role": "assistant", "content": None, "tool_calls": follow},
        {"role": "assistant", "content": "ok"},
    )

    async def go(http, server):
        return await converse(http, [{"role": "user", "content": "q"}])

    (final, client_messages), requests = arun(with_scripted(replies, go))
    assert final["choices"][0]["message"]["content"] == "ok"
    assert len(requests) == 3  # one upstream request per batch, no refusals
    assert tool_ids(requests[1]["messages"]) == ["a", "b"]
    last = requests[2]["messages"]
    assert [len(m.get("tool_calls") or []) for m in last if m["role"] == "assistant"] == [2, len(follow)]
    assert tool_ids(last) == ["a", "b", *(c["id"] for c in follow)]
    assert validate_messages(last) == [] and validate_messages(client_messages) == []


@pytest.mark.parametrize("style", ["repeat", "empty", "missing"])
def test_identical_conversations_never_cross_whatever_ids_the_upstream_gives(style) -> None:
    """A2: repeated, empty or missing upstream ids, identical messages, and an abandoned open batch."""

    async def go(http, server, up):
        first = [{"role": "user", "content": "same question"}]
        ask = {**body(first), "model": model_for(style)}
        await http.post("/chat/completions", json=ask)  # opened and abandoned
        a = (await http.post("/chat/completions", json=ask)).json()
        b = (await http.post("/chat/completions", json=ask)).json()
        ma, mb = answered(first, a), answered(first, b)
        finals = {}
        for _ in range(3):  # interleave the two conversations
            for name in ("b", "a"):
                messages = mb if name == "b" else ma
                reply = (await http.post("/chat/completions", json={**ask, "messages": messages})).json()
                if not reply["choices"][0]["message"].get("tool_calls"):
                    finals[name] = reply["choices"][0]["message"]["content"]
                elif name == "b":
                    mb = answered(mb, reply)
                else:
                    ma = answered(ma, reply)
        return ma, mb, finals

    (ma, mb, finals), up = arun(checking(go))
    assert up.problems == [] and len(up.completed) == 2
    for messages, name in ((ma, "a"), (mb, "b")):
        results = [m["content"] for m in messages if m["role"] == "tool"]
        assert finals[name] == "All done: " + " | ".join(results)  # the upstream saw this conversation's own
    assert not {m["content"] for m in ma if m["role"] == "tool"} & {
        m["content"] for m in mb if m["role"] == "tool"
    }


def test_the_conversation_before_a_batch_and_the_session_header_may_change_between_round_trips() -> None:
    """A3: a system prompt with the time, and a batch opened under one x-session-id continued under none
    and under another: the batch is still found, never forwarded partially."""

    async def go(http, server, up):
        history: list[dict] = []
        user = {"role": "user", "content": "q"}
        for step, header in enumerate(["sess-A", None, "sess-B", "sess-A"]):
            system = {"role": "system", "content": f"You are helpful. Time: {step}"}
            headers = {"x-session-id": header} if header else {}
            reply = (
                await http.post("/chat/completions", json=body([system, user, *history]), headers=headers)
            ).json()
            if not reply["choices"][0]["message"].get("tool_calls"):
                return reply, history
            history = answered(history, reply)
        raise AssertionError("no final answer")

    (final, _), up = arun(checking(go))
    assert up.problems == [] and len(up.completed) == 1 and len(up.requests) == 2
    assert up.completed[0][0]["content"] == "You are helpful. Time: 3"  # the latest conversation went up
    assert final["choices"][0]["message"]["content"].startswith("All done")


def test_malformed_batch_messages_get_a_json_400_naming_the_message_and_nothing_is_recorded() -> None:
    """A4, A5: odd ids and results without their call are refused clearly; the batch stays intact."""

    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        good = answered(first, r0)
        a0, t0 = good[1], good[2]
        changed = a0["tool_calls"][0]["id"].replace("of3", "of4")  # still a proxy id, not the one handed out
        other = {**a0, "tool_calls": [{**a0["tool_calls"][0], "id": changed}]}
        cases = {
            "dict id": [*first, a0, {**t0, "tool_call_id": {"x": 1}}],
            "result without its call": [*first, t0],
            "result before its call": [*first, t0, a0],
            "ids changed": [*first, other, {**t0, "tool_call_id": other["tool_calls"][0]["id"]}],
            "call twice": [*first, a0, a0, t0],
            "interleaved": [*first, a0, {"role": "user", "content": "hm"}, t0],
            "ends without result": [*first, a0],
            "calls not handed out": [
                *good,
                {**other, "tool_calls": [call("call_guess", "x")]},
                {**t0, "tool_call_id": "call_guess"},
            ],
        }
        out = {}
        for name, messages in cases.items():
            r = await http.post("/chat/completions", json=body(messages))
            out[name] = (r.status_code, r.json()["error"])
        r1 = await http.post("/chat/completions", json=body(good))
        return out, the_call(r1.json()), len(up.requests)

    (out, next_call, upstream_requests), up = arun(checking(go))
    for name, (status, error) in out.items():
        assert status == 400, name
        assert error["code"] in ("invalid_batch_messages", "missing_tool_result"), name
        assert "message " in error["message"], name
    assert "no assistant message before it holds that call" in out["result without its call"][1]["message"]
    assert ids.parse(next_call["id"]).position == 1  # nothing was recorded from the refused requests
    assert upstream_requests == 1 and up.problems == []


def test_a_result_for_a_batch_the_proxy_never_had_is_gone_and_other_unknown_ids_pass_through() -> None:
    async def go(http, server):
        first = [{"role": "user", "content": "q"}]
        forged = ids.proxy_id("0123456789ab", 0, 2)
        ours = [*first, {"role": "assistant", "content": None, "tool_calls": [call(forged, "x")]}]
        gone = await http.post(
            "/chat/completions", json=body([*ours, {"role": "tool", "tool_call_id": forged, "content": "r"}])
        )
        foreign = [*first, {"role": "assistant", "content": None, "tool_calls": [call("call_z", "x")]}]
        passed = await http.post(
            "/chat/completions",
            json=body([*foreign, {"role": "tool", "tool_call_id": "call_z", "content": "r"}]),
        )
        return gone, passed

    (gone, passed), requests = arun(with_scripted(scripted({"role": "assistant", "content": "fine"}), go))
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "batch_unknown"
    assert (
        "position 1" in gone.json()["error"]["message"]
        and "start the conversation again" not in gone.json()["error"]["message"]
    )
    assert (
        passed.status_code == 200 and len(requests) == 1 and tool_ids(requests[0]["messages"]) == ["call_z"]
    )


@pytest.mark.parametrize("client_holds_the_handed_out_call", [True, False])
def test_interrupting_after_a_call_was_handed_out_gives_the_upstream_a_valid_conversation(
    client_holds_the_handed_out_call,
) -> None:
    """A6: all N calls, one tool message per call with a truthful text, then the user's message."""

    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        m1 = answered(first, r0)
        r1 = (await http.post("/chat/completions", json=body(m1))).json()  # call 1 handed out
        held = [r1["choices"][0]["message"]] if client_holds_the_handed_out_call else []
        turn = [*m1, *held, {"role": "user", "content": "stop, something else"}]
        interrupted = await http.post("/chat/completions", json=body(turn))
        sent = up.requests[-1]["messages"]
        stale = await http.post("/chat/completions", json=body(answered(m1, r1)))
        await converse(http, answered(turn, interrupted.json()))  # the new turn's batch, to its end
        return interrupted, sent, stale, up.requests[-1]["messages"]

    (interrupted, sent, stale, later_sent), up = arun(checking(go))
    assert up.problems == [] and len(up.completed) == 1  # the new turn's batch, checked
    assert interrupted.status_code == 200
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "tool", "user"]
    assert validate_messages(sent) == []
    assert sent[2]["content"].startswith("get_weather says")
    assert [sent[3]["content"], sent[4]["content"]] == [HANDED_NOT_ANSWERED, NEVER_HANDED_OUT]
    assert later_sent[:6] == sent and len(later_sent) == 10  # a later turn carries the same history
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "batch_interrupted"


def test_restart_without_state_never_forwards_a_partial_batch_but_a_whole_one_goes_through() -> None:
    """B10: after a restart without --state the proxy's ids still say they are its own."""

    async def go():
        up = CheckingUpstream(exact_ids=False)  # after the restart the batch goes up under the proxy ids
        url = await up.start()
        try:
            first = [{"role": "user", "content": "q"}]

            async def before(http, server):
                r0 = (await http.post("/chat/completions", json=body(first))).json()
                m1 = answered(first, r0)
                r1 = (await http.post("/chat/completions", json=body(m1))).json()
                m2 = answered(m1, r1)
                r2 = (await http.post("/chat/completions", json=body(m2))).json()
                return m2, answered(m2, r2)

            partial, whole = await proxied(before, HTTPUpstream(url))

            async def after(http, server):
                return (
                    await http.post("/chat/completions", json=body(partial)),
                    await http.post("/chat/completions", json=body(whole)),
                )

            gone, done = await proxied(after, HTTPUpstream(url))
            return gone, done, up
        finally:
            await up.close()

    gone, done, up = arun(go())
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "batch_unknown"
    message = gone.json()["error"]["message"]
    assert "restarted without --state" in message and "will not forward a partial batch" in message
    assert "end it at message 0" in message
    assert done.status_code == 200 and done.json()["choices"][0]["message"]["content"].startswith("All done")
    assert up.problems == [] and len(up.completed) == 1 and len(up.requests) == 2  # the partial never went up
    # nothing of the batch survived the restart: it went up whole, under the ids the client holds (the proxy's)
    assert all(ids.parse(c["id"]) is not None for c in up.completed[0][-4]["tool_calls"])


def test_after_expiry_a_retried_completion_is_refused_and_later_turns_go_upstream_merged() -> None:
    """B11: a finished batch the proxy forgot is rebuilt from the client's messages for later turns; its
    completing request, answered before, is not sent again (seventh pass: a 409, its reply not kept)."""
    now = [1_000_000.0]

    async def go(http, server, up):
        final, messages = await converse(http, [{"role": "user", "content": "q"}])
        now[0] += 61
        server.sweep()
        retried = await http.post("/chat/completions", json=body(messages))
        later = [*messages, final["choices"][0]["message"], {"role": "user", "content": "and tomorrow?"}]
        await http.post("/chat/completions", json=body(later))
        return retried, up.requests[-1]["messages"], server.stats

    (retried, later_sent, stats), up = arun(checking(go, ttl_s=60, clock=lambda: now[0]))
    assert retried.status_code == 409 and retried.json()["error"]["code"] == "batch_reply_not_kept"
    assert up.problems == [] and len(up.completed) == 1
    assert [m["role"] for m in later_sent] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert len(later_sent[1]["tool_calls"]) == 3 and validate_messages(later_sent) == []
    assert all("_tlp" not in str(m.get("tool_call_id")) for m in later_sent)  # the upstream's own ids
    assert stats["batches_rebuilt_from_client"] == 1  # one batch, counted once however often it is sent


def test_tombstones_are_bounded_by_count_and_bytes(tmp_path) -> None:
    """A7 and C20: nothing the store holds escapes its bounds; an oversized batch is refused."""
    calls = [call(f"c{i}", "x") for i in range(2)]

    def batch(n: int) -> Batch:
        return Batch(
            tag=f"{n:012x}", message={"role": "assistant", "content": None, "tool_calls": calls}, template={}
        )

    for store in (
        MemoryStore(StoreLimits(max_batches=3)),
        SQLiteStore(tmp_path / "s.sqlite", StoreLimits(max_batches=3)),
    ):
        for n in range(200):
            store.save(batch(n))
        summary = store.summary()
        assert summary["batches"] == 3 and summary["tombstones"] == 3 and summary["batches_evicted"] == 197
        if isinstance(store, SQLiteStore):
            rows = [
                store._db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("batches", "tombstones")
            ]
            assert rows == [3, 3]
        store.close()
    small = MemoryStore(StoreLimits(max_bytes=4_000))
    for n in range(50):
        small.save(batch(n))
        assert small.total_bytes <= 4_000
    assert small.summary()["tombstones"] < 50


def test_a_batch_larger_than_the_byte_bound_is_refused_not_kept() -> None:
    huge = {"role": "assistant", "content": None, "tool_calls": [call("a", "x" * 20_000), call("b", "y")]}

    async def go(http, server):
        r = await http.post("/chat/completions", json=body([{"role": "user", "content": "q"}]))
        return r, server.store.summary()

    (r, summary), _ = arun(with_scripted(scripted(huge), go, max_bytes=10_000))
    assert r.status_code == 507 and r.json()["error"]["code"] == "batch_too_large"
    assert "--max-bytes" in r.json()["error"]["message"]
    assert summary["batches"] == 0 and summary["batches_refused_too_large"] == 1


def test_an_upstream_that_streams_something_else_is_a_502() -> None:
    """B12: asked to stream, a 200 text/html answer is not passed through."""

    async def go(http, server):
        r = await http.post(
            "/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True},
        )
        return r

    r, _ = arun(with_scripted([(200, {"Content-Type": "text/html"}, b"<html>oops</html>")], go))
    assert r.status_code == 502 and "<html>oops</html>" in r.json()["error"]["message"]


def test_an_idempotent_streamed_reply_is_not_silently_sent_again() -> None:
    stream = b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}\n\ndata: [DONE]\n\n'

    async def go(http, server):
        ask = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
        key = {"Idempotency-Key": "k1"}
        return [await http.post("/chat/completions", json=ask, headers=key) for _ in range(2)]

    (first, again), requests = arun(with_scripted([(200, {"Content-Type": "text/event-stream"}, stream)], go))
    assert first.status_code == 200 and first.content == stream
    assert again.status_code == 409 and again.json()["error"]["code"] == "idempotent_reply_not_kept"
    assert len(requests) == 1


def test_trace_upstream_replies_carry_created_and_usage() -> None:
    """B14: `created` is required; usage is the recorded one, or absent when the trace recorded none
    (never a made-up zero)."""
    upstream = TraceUpstream(SCENARIOS["three_tools_100ms"].record())
    ask = {"messages": [{"role": "user", "content": "q"}], "stream_options": {"include_usage": True}}

    async def go():
        whole = await upstream.send(json.dumps(ask).encode(), {}, stream=False)
        streamed = await upstream.send(json.dumps(ask).encode(), {}, stream=True)
        return json.loads(whole.body), b"".join([c async for c in streamed.stream])

    whole, streamed = arun(go())
    assert isinstance(whole["created"], int) and "usage" not in whole
    events = [json.loads(line[6:]) for line in streamed.decode().splitlines() if line.startswith("data: {")]
    assert events[-1]["usage"] is None and all(isinstance(e["created"], int) for e in events)


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["proxy", "--upstream", "x", "--port", "99999"], "99999 is not a TCP port"),
        (["proxy", "--upstream", "x", "--port", "-1"], "-1 is not a TCP port"),
        (["serve-trace", "x", "--port", "70000"], "70000 is not a TCP port"),
        (["proxy", "--upstream", "x", "--ttl", "-1"], "--ttl: '-1': must be > 0"),
        (["proxy", "--upstream", "x", "--max-body-bytes", "10"], "must be >= 1024"),
    ],
)
def test_cli_rejects_bad_numbers_with_the_option_name(argv, text, capsys) -> None:
    """A8, B17: argparse errors (exit 2) naming the option, never a traceback."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and text in capsys.readouterr().err


@pytest.mark.parametrize(
    ("upstream", "extra", "text"),
    [
        ("localhost:8081/v1", [], "did you mean http://localhost:8081/v1"),
        ("http://", [], "the URL names no host"),
        (
            "http://127.0.0.1:8081/v1",
            ["--delay-scale", "2"],
            "--delay-scale applies to a trace upstream only",
        ),
        ("no_such_trace.json", [], "no such trace file"),
        ("ftp://x", [], "the scheme 'ftp' is not supported; give an http:// or https:// URL"),  # C15
        (  # C17: a raw recording must be imported first
            str(Path(__file__).parents[1] / "data/recordings/scripted_weather_news_stock.sse"),
            [],
            "must be imported first: `toolcall-lab import recording",
        ),
    ],
)
def test_cli_explains_an_unusable_upstream(upstream, extra, text, capsys) -> None:
    assert main(["proxy", "--upstream", upstream, *extra]) == 2
    assert text in capsys.readouterr().err


def test_cli_help_shows_defaults(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["proxy", "--help"])
    out = capsys.readouterr().out
    assert "(default: 600.0)" in out and "(default: 8080)" in out and "(default: None)" not in out


# --- reading a client's messages is total ------------------------------------------------------------

_TAGS = ("0123456789ab", "ba9876543210")
_ids = st.one_of(
    st.builds(ids.proxy_id, st.sampled_from(_TAGS), st.integers(0, 3), st.integers(1, 3)),
    st.sampled_from(["call_1", "", "call_tlp0123456789ab_9of2", "call_tlp0123456789ab_01of2", None, 7]),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
)
_calls = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"id": _ids, "type": st.just("function"), "function": st.just({"name": "f", "arguments": "{}"})}
        ),
        st.integers(),
        st.none(),
    ),
    max_size=3,
)
_messages = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "role": st.just("assistant"),
                "content": st.none(),
                "tool_calls": st.one_of(_calls, st.text(max_size=2)),
            }
        ),
        st.fixed_dictionaries(
            {"role": st.just("tool"), "tool_call_id": _ids, "content": st.text(max_size=3)}
        ),
        st.fixed_dictionaries({"role": st.sampled_from(["user", "system", None, 3])}),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(_messages)
def test_scan_and_merge_never_crash_on_any_message_list(messages) -> None:
    """A4's class: whatever the client sends, reading it is a result or a `MalformedBatch`, never a crash."""
    try:
        splits = scan(messages)
    except MalformedBatch:
        return
    forms = {s.tag: merged(None, s, messages)[0] for s in splits}
    translate(messages, splits, forms)
    for split in splits:  # with nothing known of a batch, it goes back under the ids the client holds
        assistant, *tools = forms[split.tag]
        sent = [c["id"] for c in assistant["tool_calls"]]
        assert len(sent) == split.handed and all(ids.parse(i).tag == split.tag for i in sent)
        assert [t["tool_call_id"] for t in tools] == sent


def test_concurrent_retries_of_the_completing_request_call_upstream_once() -> None:
    import asyncio

    async def go(http, server, up):
        first = [{"role": "user", "content": "q"}]
        r0 = (await http.post("/chat/completions", json=body(first))).json()
        m1 = answered(first, r0)
        m2 = answered(m1, (await http.post("/chat/completions", json=body(m1))).json())
        m3 = answered(m2, (await http.post("/chat/completions", json=body(m2))).json())
        replies = await asyncio.gather(*(http.post("/chat/completions", json=body(m3)) for _ in range(5)))
        return [r.json() for r in replies], len(server._locks)

    (replies, locks_left), up = arun(checking(go))
    assert len(up.completed) == 1 and all(r == replies[0] for r in replies)
    assert locks_left == 0


REAL = [
    "openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml",  # a batch of 2, then single calls
    "deepseek_chat_nonstream_thinking_parallel2_3rounds.cassette.yaml",  # reasoning_content beside the calls
    "ollama_openai_compat_nonstream_qwen2.5_parallel2_19calls.cassette.yaml",  # batches and singles mixed
    "huggingface_router_chat_nonstream_parallel2.cassette.yaml",  # no system or user message before the batch
]


@needs_realdata
@pytest.mark.parametrize("name", REAL)
def test_real_recordings_through_the_proxy_with_the_openai_client(name) -> None:
    """Recorded conversations replayed as the upstream, driven by the real `openai` client one call at a
    time: each recorded batch goes upstream whole, under the recorded ids, and the recorded answer arrives."""

    from toolcall_lab.importers import import_recording

    # a cassette may hold several conversations: drive each one that ends in an answer
    conversations = [
        t for t in import_recording(REALDATA / "pydantic-ai" / name) if not t.rounds[-1].tool_calls
    ]
    assert conversations, f"{name}: no conversation of the recording ends in an answer"
    for trace in conversations:
        check_through_proxy(trace)


def check_through_proxy(trace) -> None:
    from openai import AsyncOpenAI

    upstream = TraceUpstream(trace, keep_requests=1000)

    async def go(http, server):
        client = AsyncOpenAI(base_url=str(http.base_url), api_key="dummy", max_retries=0)
        messages, per_response = list(trace.initial_messages), []
        try:
            for _ in range(60):
                response = await client.chat.completions.create(
                    model="m", messages=messages, tools=list(trace.tools), parallel_tool_calls=False
                )
                message = response.choices[0].message.model_dump(exclude_none=True)
                calls = message.get("tool_calls") or []
                per_response.append(len(calls))
                messages.append(message)
                if not calls:
                    return per_response, message.get("content")
                messages.append(
                    {"role": "tool", "tool_call_id": calls[0]["id"], "content": f"result {len(messages)}"}
                )
        finally:
            await client.close()
        raise AssertionError("no final answer")

    per_response, final = arun(proxied(go, upstream))
    recorded = [len(r.assistant_message.get("tool_calls") or []) for r in trace.rounds]
    assert max(per_response) == 1 and sum(per_response) == sum(recorded)
    assert final == trace.rounds[-1].assistant_message.get("content")
    requests = list(upstream.requests)
    assert len(requests) == len(trace.rounds)  # one upstream request per recorded round
    last = requests[-1]["messages"]
    batches = [n for n in recorded if n]
    sent = [len(m.get("tool_calls") or []) for m in last if m["role"] == "assistant"]
    assert sent[-len(batches) :] == batches  # each recorded batch merged back into one assistant message
    recorded_ids = [c["id"] for r in trace.rounds for c in r.assistant_message.get("tool_calls") or []]
    assert tool_ids(last)[-len(recorded_ids) :] == recorded_ids  # the upstream's own ids, every one answered
    assert "_tlp" not in json.dumps(last)

"""Issue 12: everything the proxy keeps is scoped to the caller's credentials.

A fresh-eyes tester found that a reply kept for an ``Idempotency-Key`` was replayed to a request with
another ``Authorization`` (or none), that two clients deriving the key from the body shared one batch,
and that a continuation was served from the queue whatever credentials it carried. Now kept replies,
``x-session-id`` retries, batches and tombstones are keyed by a digest of ``Authorization`` /
``OpenAI-Organization`` / ``OpenAI-Project`` (never the secret, in memory or in ``--state``): another
caller's request with the same key is its own new request, and a request carrying another caller's
credentials for a batch's call ids is a 403 naming the call.
"""

from __future__ import annotations

import hashlib
import sqlite3

from tests.proxy_helpers import CheckingUpstream
from tests.test_proxy_faults import answered, arun, body, checking, converse, proxied, the_call
from toolcall_lab.proxy import HTTPUpstream
from toolcall_lab.proxy.batches import scope_of

ALICE = {"Authorization": "Bearer sk-alice-secret-0001"}
BOB = {"Authorization": "Bearer sk-bob-secret-0002"}


def test_a_kept_idempotent_reply_is_replayed_only_to_the_same_credentials() -> None:
    """The tester's order-1: another key, or none, used to get tenant A's reply (made and billed under
    A's key). Now each caller's key is its own: B and the keyless caller each get a new upstream call."""
    first = [{"role": "user", "content": "q"}]

    async def go(http, server, up):
        key = {"Idempotency-Key": "order-1"}
        a = await http.post("/chat/completions", json=body(first), headers={**key, **ALICE})
        b = await http.post("/chat/completions", json=body(first), headers={**key, **BOB})
        none = await http.post("/chat/completions", json=body(first), headers=key)
        a_again = await http.post("/chat/completions", json=body(first), headers={**key, **ALICE})
        org = {**key, **ALICE, "OpenAI-Organization": "org-2"}  # same key, another organisation
        a_org = await http.post("/chat/completions", json=body(first), headers=org)
        return a, b, none, a_again, a_org, up.headers

    (a, b, none, a_again, a_org, seen), up = arun(checking(go))
    assert all(r.status_code == 200 for r in (a, b, none, a_again, a_org))
    assert a_again.content == a.content  # the owner's retry is replayed byte for byte
    ids = [r.json()["id"] for r in (a, b, none, a_org)]
    assert len(set(ids)) == 4  # nobody else got A's reply
    assert len(up.requests) == 4  # each of the four callers made its own upstream call
    assert [h.get("authorization") for h in seen] == [
        ALICE["Authorization"],
        BOB["Authorization"],
        None,
        ALICE["Authorization"],
    ]


def test_two_clients_with_a_body_derived_key_never_share_a_batch() -> None:
    """The tester's idemcross.py: alice and bob send the same body under sha256(body) as the key; bob was
    handed alice's batch. Now each gets its own batch, its own results go upstream under its own key."""
    first = [{"role": "user", "content": "my calendar"}]
    key = {"Idempotency-Key": hashlib.sha256(b"my calendar").hexdigest()}

    async def go(http, server, up):
        ra = (await http.post("/chat/completions", json=body(first), headers={**key, **ALICE})).json()
        rb = (await http.post("/chat/completions", json=body(first), headers={**key, **BOB})).json()
        fa, _ = await converse(http, answered(first, ra), headers=ALICE)
        fb, _ = await converse(http, answered(first, rb), headers=BOB)
        return ra, rb, fa, fb

    (ra, rb, fa, fb), up = arun(checking(go))
    assert the_call(ra)["id"] != the_call(rb)["id"]
    assert up.problems == [] and len(up.completed) == 2
    assert fa["choices"][0]["message"]["content"].startswith("All done")
    assert fb["choices"][0]["message"]["content"].startswith("All done")
    completing = [
        h["authorization"]
        for r, h in zip(up.requests, up.headers, strict=True)
        if r["messages"][-1]["role"] == "tool"
    ]
    assert completing == [ALICE["Authorization"], BOB["Authorization"]]


def test_a_continuation_with_other_credentials_is_refused_naming_the_call_and_records_nothing() -> None:
    first = [{"role": "user", "content": "q"}]

    async def go(http, server, up):
        r0 = (await http.post("/chat/completions", json=body(first), headers=ALICE)).json()
        bobs = answered(first, r0, content="bob's result")
        by_bob = await http.post("/chat/completions", json=body(bobs), headers=BOB)
        by_nobody = await http.post("/chat/completions", json=body(bobs))
        # nothing was recorded from bob: alice's own (different) result is no conflict
        final, messages = await converse(http, answered(first, r0), headers=ALICE)
        retry_by_bob = await http.post("/chat/completions", json=body(messages), headers=BOB)
        later = [*messages, final["choices"][0]["message"], {"role": "user", "content": "and then?"}]
        later_by_bob = await http.post("/chat/completions", json=body(later), headers=BOB)
        return r0, by_bob, by_nobody, final, retry_by_bob, later_by_bob, len(up.requests)

    (r0, by_bob, by_nobody, final, retry_by_bob, later_by_bob, n), up = arun(checking(go))
    call = the_call(r0)
    for refused in (by_bob, by_nobody, retry_by_bob, later_by_bob):
        assert refused.status_code == 403
        assert refused.headers["x-should-retry"] == "false"
        error = refused.json()["error"]
        assert error["code"] == "batch_other_credentials"
        assert "other credentials" in error["message"] and call["id"][:-4] in error["message"]
    assert repr(call["id"]) in by_bob.json()["error"]["message"]
    assert "get_weather, position 0 of 3" in by_bob.json()["error"]["message"]
    assert final["choices"][0]["message"]["content"].startswith("All done")  # alice's own result was taken
    assert n == 2 and up.problems == []  # nothing from bob or nobody went upstream


def test_the_same_session_id_under_other_credentials_is_a_new_conversation() -> None:
    first = [{"role": "user", "content": "q"}]

    async def go(http, server, up):
        s = {"x-session-id": "S"}
        a = (await http.post("/chat/completions", json=body(first), headers={**s, **ALICE})).json()
        b = (await http.post("/chat/completions", json=body(first), headers={**s, **BOB})).json()
        a_again = (await http.post("/chat/completions", json=body(first), headers={**s, **ALICE})).json()
        return a, b, a_again, len(up.requests)

    (a, b, a_again, n), _ = arun(checking(go))
    assert a_again == a and the_call(b)["id"] != the_call(a)["id"] and n == 2


def test_a_forgotten_batchs_tombstone_answers_only_its_owner() -> None:
    now = [1_000_000.0]
    first = [{"role": "user", "content": "q"}]

    async def go(http, server, up):
        r0 = (await http.post("/chat/completions", json=body(first), headers=ALICE)).json()
        m1 = answered(first, r0)
        now[0] += 61
        server.sweep()
        by_bob = await http.post("/chat/completions", json=body(m1), headers=BOB)
        by_alice = await http.post("/chat/completions", json=body(m1), headers=ALICE)
        return by_bob, by_alice

    (by_bob, by_alice), _ = arun(checking(go, ttl_s=60, clock=lambda: now[0]))
    assert by_bob.status_code == 403 and by_bob.json()["error"]["code"] == "batch_other_credentials"
    assert by_alice.status_code == 410 and "expired" in by_alice.json()["error"]["message"]


def test_state_keeps_the_digest_of_the_credentials_never_the_secret(tmp_path) -> None:
    """Across a restart with --state: the owner continues its batch and gets its kept reply; another caller
    is refused; the file holds the digest, not the key."""
    state = tmp_path / "proxy.sqlite"
    first = [{"role": "user", "content": "q"}]
    key = {"Idempotency-Key": "k-1"}

    async def go():
        up = CheckingUpstream()
        url = await up.start()
        try:

            async def part1(http, server):
                r0 = await http.post("/chat/completions", json=body(first), headers={**key, **ALICE})
                return r0

            r0 = await proxied(part1, HTTPUpstream(url), state=state)
            raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())  # the file and its WAL, if any

            async def part2(http, server):
                replay = await http.post("/chat/completions", json=body(first), headers={**key, **ALICE})
                m1 = answered(first, r0.json())
                by_bob = await http.post("/chat/completions", json=body(m1), headers=BOB)
                final, _ = await converse(http, m1, headers=ALICE)
                return replay, by_bob, final

            return r0, raw, *(await proxied(part2, HTTPUpstream(url), state=state)), up
        finally:
            await up.close()

    r0, raw, replay, by_bob, final, up = arun(go())
    assert replay.status_code == 200 and replay.content == r0.content
    assert by_bob.status_code == 403
    assert final["choices"][0]["message"]["content"].startswith("All done")
    assert b"sk-alice-secret" not in raw and b"sk-alice-secret" not in state.read_bytes()
    digest = scope_of({"authorization": ALICE["Authorization"]})
    with sqlite3.connect(state) as db:
        keys = [k for (k,) in db.execute("SELECT key FROM replies")]
        scopes = [d for (d,) in db.execute("SELECT data FROM batches")]
    assert keys == [f"{digest}:k-1"]
    assert all(digest.encode() in d and b"sk-alice" not in d for d in scopes)
    assert up.problems == [] and len(up.requests) == 2


def test_scope_digest_covers_organisation_and_project_and_is_empty_without_credentials() -> None:
    a = scope_of({"authorization": "Bearer k"})
    assert scope_of({}) == "" and len(a) == 32 and int(a, 16) >= 0  # a hex digest, not the key
    assert scope_of({"authorization": "Bearer k", "openai-project": "p"}) != a
    assert scope_of({"authorization": "Bearer k", "openai-organization": "o"}) != a
    assert scope_of({"openai-organization": "o"}) != scope_of({"openai-project": "o"})

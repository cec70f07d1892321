"""Cells of notebook 05_serialized_proxy."""

from __future__ import annotations

from ._cells import SETUP, code, md

CELLS = [
        md("""
# The serialized proxy, step by step
A client that sets `parallel_tool_calls: false` can only take one call per response, but many models
return several anyway. A proxy between them keeps the batch: it hands the client one call per round
trip, records each result, and only when all are answered rebuilds the full message list (the
original assistant message with all N calls, then the N results in order) for one upstream call.
"""),
        code(SETUP),
        code("""
from toolcall_lab.messages import ToolCall
from toolcall_lab.proxy import SerializedSession
from toolcall_lab.protocol import validate_messages

calls = [ToolCall(tool_call_id=f"call_{i}", name=n, arguments=a, index=i) for i, (n, a) in enumerate(
    [("get_weather", '{"city": "Paris"}'), ("get_news", '{"topic": "Paris"}'), ("get_stock", '{"ticker": "AIR.PA"}')])]
assistant = {"role": "assistant", "content": "Three lookups.", "tool_calls": [c.to_openai() for c in calls]}
session = SerializedSession(assistant, calls)
trip = 0
while (call := session.next_call()) is not None:
    trip += 1
    shown = session.client_message()
    print(f"round trip {trip}: client receives {[c['function']['name'] for c in shown['tool_calls']]}")
    session.submit(call.tool_call_id, f"result of {call.name}")
rebuilt = session.rebuild([{"role": "user", "content": "Weather, news, stock?"}])
for m in rebuilt:
    print(f"  upstream gets {m['role']:>9}: {m.get('tool_call_id') or [c['id'] for c in m.get('tool_calls', [])] or m['content']}")
print("protocol violations:", validate_messages(rebuilt))
"""),
        md("A client that answers out of order, twice, or for an unknown id gets a clear error and the queue stays intact:"),
        code("""
from toolcall_lab.exceptions import ProxyProtocolError

s = SerializedSession(assistant, calls)
for bad in ("call_2", "nope"):
    try:
        s.submit(bad, "x")
    except ProxyProtocolError as exc:
        print("refused:", exc)
print("still waiting for:", s.current.tool_call_id)
"""),
        md("## What it costs\nEach call after the first now costs a client round trip, and the calls run one after another. Sweep the round-trip latency on a 3-call batch, and compare with a provider that itself returns one call per response (an extra model turn per call)."),
        code("""
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import SCENARIOS
from toolcall_lab.analysis import one_call_per_response_s

trace = SCENARIOS["weather_news_stock"].record()
rows = []
for rtt_ms in (0, 10, 50, 100, 200):
    rows.append({"round trip ms": rtt_ms,
                 "parallel s": replay(trace, "parallel").wall_time_s,
                 "serialized proxy s": replay(trace, "serialized", round_trip_s=rtt_ms / 1000).wall_time_s,
                 "one call per model response s": one_call_per_response_s(trace)})
cost = pd.DataFrame(rows).set_index("round trip ms")
cost
"""),
        md("""
### The serialized cost model
For a batch of N calls the client makes **N-1 extra round trips**: the first call arrives with the
model's response, and the last result travels with the next model request, so a 3-call batch costs
two. Each one is in the record (`Round.round_trips`), labelled `placeholder`: in process it is the
constant `round_trip_s`, not a measurement.
"""),
        code("""
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import SCENARIOS

served = replay(SCENARIOS["weather_news_stock"].record(), "serialized", round_trip_s=0.05)
batch = served.rounds[0]
print(f"{len(batch.tool_calls)} calls -> {len(batch.round_trips)} extra client round trips "
      f"({batch.round_trip_s:.2f} s); client round trips in this round: {batch.client_round_trips}")
pd.DataFrame([t.to_dict() for t in batch.round_trips])
"""),
        code("""
ax = cost.plot(marker="o", figsize=(6, 3.2), title="weather + news + stock: cost of serializing a 3-call batch")
ax.set_ylabel("wall time (s)")
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False);  # beside the lines, never over a point
"""),
        code("""
from toolcall_lab.plotting import gantt
gantt(trace, ["parallel", "serialized"], round_trip_s=0.1)
"""),
        md("""
## The proxy as an HTTP server
`toolcall-lab proxy --upstream URL|TRACE.json [--state FILE]` serves `POST /v1/chat/completions`. Here
it runs on loopback in front of a recorded trace, and the loop itself is the client: the real `openai`
client with `parallel_tool_calls=False`, streaming.
"""),
        code("""
from openai import AsyncOpenAI
from toolcall_lab.loop import run
from toolcall_lab.openai_model import OpenAIModel
from toolcall_lab.proxy import ProxyServer, TraceUpstream
from toolcall_lab.replay import replay_tools

recorded = SCENARIOS["three_tools_100ms"].record()
upstream = TraceUpstream(recorded)
server = ProxyServer(upstream)
url = await server.start()          # 127.0.0.1, a free port
client = AsyncOpenAI(api_key="not-needed", base_url=url)
result = await run(OpenAIModel("any", client, parallel_tool_calls=False), replay_tools(recorded),
                   recorded.initial_messages, mode="sequential")
await client.close()
print("calls per response the client saw:", [len(r.tool_calls) for r in result.rounds])
print("upstream requests:", upstream.request_count, "| messages in the second:", [m["role"] for m in upstream.requests[1]["messages"]])
"""),
        md("""
### How the proxy knows which batch a request belongs to
The proxy **owns the ids it hands out**: each call reaches the client as
`call_tlp<batch tag>_<position>of<N>` (at most 33 characters, whatever the upstream's id), and every
request it sends upstream carries the upstream's own ids again (the proxy keeps the mapping). A
request that carries a result is matched by that id alone, so nothing
else can cross it: not an upstream that repeats its ids (this recorded trace answers `call_0_0`,
`call_0_1`, `call_0_2` to everyone), not identical conversations, not a system prompt that changes
every round trip. Every first request goes upstream; only an `Idempotency-Key` (or, under an
`x-session-id`, the same messages while that batch is open) marks a retry. Below, two clients send
identical messages and get separate batches; a client that changes a result it already gave gets a
409 naming the call; a new user message in the middle of a batch closes it, and the upstream gets a
valid conversation saying which calls were not executed and why.
"""),
        code("""
import httpx

first = [{"role": "user", "content": "Run a, b and c."}]
body = {"model": "m", "messages": first, "parallel_tool_calls": False}
async with httpx.AsyncClient(base_url=url) as http:
    a = (await http.post("/chat/completions", json=body)).json()
    b = (await http.post("/chat/completions", json=body)).json()   # identical, from another client
    call = a["choices"][0]["message"]["tool_calls"][0]
    print("client A got", call["id"], "| client B got", b["choices"][0]["message"]["tool_calls"][0]["id"])
    print("usage on the first hand-out:", a.get("usage"), "(the upstream's; this recorded scenario has none, so none is sent)")
    answered = [*first, a["choices"][0]["message"], {"role": "tool", "tool_call_id": call["id"], "content": "result A"}]
    await http.post("/chat/completions", json={**body, "messages": answered})       # hands out call 2 of 3
    changed = [*answered[:-1], {**answered[-1], "content": "a different result"}]
    conflict = await http.post("/chat/completions", json={**body, "messages": changed})
    turn = [*answered, {"role": "user", "content": "Stop, do something else."}]  # the user interrupts
    await http.post("/chat/completions", json={**body, "messages": turn})
    health = (await http.get(url.removesuffix("/v1") + "/health")).json()
print("conflict:", conflict.status_code, conflict.json()["error"]["message"][:110], "...")
print("  the client is told not to retry it: x-should-retry =", conflict.headers.get("x-should-retry"))
print("the upstream got, for the interrupted turn:")
for m in upstream.requests[-1]["messages"]:
    print(f"  {m['role']:>9}: {[c['id'] for c in m.get('tool_calls', [])] or m.get('tool_call_id') or ''} {m.get('content') or ''}"[:140])
print({k: health[k] for k in ("batches_opened", "open_batches", "interrupted_batches", "served_from_queue", "conflicts")})
await server.close()
"""),
        md("""
A batch the proxy no longer holds (expired, evicted, or a restart without `--state FILE`) is still
recognised by its ids: a request holding the whole batch is rebuilt from the client's messages and
forwarded, any other gets a 410 naming the calls never handed out; a partial batch is never forwarded.
"""),
        md("""
## Storing finished tool chains compressed
A chat app (the SiYuan tool-chain design) keeps a finished tool chain as **one** assistant message: a
`<SYSTEM-CONTEXT>` block listing the executed tools with `$VAR_REF{{...}}` references, then the natural
flow with one `**[Tool Execution Log]**` block per call (truncated arguments, the status from the
recorded execution, a 200-character preview), then the final reply. Full arguments and results live in
a variable store the model reads back with the `ReadVar` tool.
"""),
        code("""
from toolcall_lab.compression import VariableStore, compress

traced = SCENARIOS["failing_and_hanging"].record()
store = VariableStore()
done = compress(traced, store)   # its final_transcript, statuses from its recorded executions
print(done.messages[-1]["content"])
print("\\nvariables:", list(store.values), "| protocol violations:", done.violations)
"""),
        md("""
`CompressionHook` does this before every model call and keeps **one** store for the whole
conversation, so a later turn can read an earlier result back. What a block quotes cannot break out of
it (the fence is longer than any run of backticks in it, arguments and reasons stay on their line), so
a tool result cannot fake a log block. Compressing a transcript that breaks the protocol flags it
instead of hiding it (here the legacy `first_only` bug left two calls unanswered):
"""),
        code("""
from toolcall_lab.replay import replay

broken = replay(SCENARIOS["weather_news_stock"].record(), "first_only")
flagged = compress(list(broken.messages), executions=broken)
print("\\n".join(line for line in flagged.messages[-1]["content"].splitlines() if "VIOLATION" in line or "Status:" in line))
"""),
        code("""
# what it saves, counted with a real tokenizer that works offline (bpe-openai's bundled o200k_base)
from toolcall_lab.compression import savings
from toolcall_lab.scenarios import generate_corpus

def totals(name, traces):
    rows = [savings(t) for t in traces]
    b, a = sum(r["chars_before"] for r in rows), sum(r["chars_after"] for r in rows)
    tb, ta = sum(r["tokens_before"] for r in rows), sum(r["tokens_after"] for r in rows)
    schema = sum(r["read_tool_tokens"] for r in rows)
    print(f"{name}: {len(rows)} traces: {tb:,} tokens before, {ta:,} after, of which {schema:,} for the "
          f"ReadVar schema ({100 * (1 - ta / tb):+.1f} % saved; {rows[0]['token_method']})")
    return {"corpus": name, "traces": len(rows), "tokens before": tb, "tokens after": ta,
            "of which schema": schema, "tokens saved %": round(100 * (1 - ta / tb), 1),
            "chars saved %": round(100 * (1 - a / b), 1), "token count": rows[0]["token_method"]}

corpora = [("generated corpus", generate_corpus(100, seed=7))]
if (REALDATA / "PROVENANCE.md").is_file():
    from toolcall_lab.importers import import_tau_bench
    corpora.append(("real: tau-bench (first 25 tasks)", import_tau_bench(REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json", limit=25)))
pd.DataFrame([totals(name, traces) for name, traces in corpora])
"""),
        md("""
The design's `<SYSTEM-CONTEXT>` block is a fixed cost per chain (about a hundred tokens), and the
`ReadVar` tool's schema that compression adds to the tools is counted on the after side too: on the
generated corpus, whose tool results are a few words, compressing costs more than it saves; on real
conversations with long results (tau-bench) it saves a share of the tokens. Counts are of what the
model reads (texts, tool names and arguments), not of the JSON around them.
"""),
]

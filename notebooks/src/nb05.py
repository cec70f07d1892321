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
        md("## What it costs\nEach call now costs a client round trip, and the calls run one after another. Sweep the round-trip latency on a 3-call batch, and compare with a provider that itself returns one call per response (an extra model turn per call)."),
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
        code("""
ax = cost.plot(marker="o", figsize=(6, 3.2), title="weather + news + stock: cost of serializing a 3-call batch")
ax.set_ylabel("wall time (s)");
"""),
        code("""
from toolcall_lab.plotting import gantt
gantt(trace, ["parallel", "serialized"], round_trip_s=0.1)
"""),
        md("""
## The proxy as an HTTP server
`toolcall-lab proxy --upstream URL|TRACE.json` serves `POST /v1/chat/completions`. Here it runs on
loopback in front of a recorded trace, and the loop itself is the client: the real `openai` client
with `parallel_tool_calls=False`, streaming.
"""),
        code("""
from openai import AsyncOpenAI
from toolcall_lab.loop import run
from toolcall_lab.openai_model import OpenAIModel
from toolcall_lab.proxy_server import ProxyServer, TraceUpstream
from toolcall_lab.replay import replay_tools

recorded = SCENARIOS["three_tools_100ms"].record()
upstream = TraceUpstream(recorded)
server = ProxyServer(upstream)
url = await server.start()          # 127.0.0.1, a free port
client = AsyncOpenAI(api_key="not-needed", base_url=url)
result = await run(OpenAIModel("any", client, parallel_tool_calls=False), replay_tools(recorded),
                   recorded.initial_messages, mode="sequential")
await client.close()
await server.close()
print("calls per response the client saw:", [len(r.tool_calls) for r in result.rounds])
print("upstream requests:", len(upstream.requests), "| messages in the second:", [m["role"] for m in upstream.requests[1]["messages"]])
print(server.stats)
"""),
]

"""Writes the notebooks in this folder from the cell lists below (outputs cleared).

Run `python notebooks/make_notebooks.py` after editing; CI executes every notebook with nbval.
Keeping the source here makes notebook diffs reviewable.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
SETUP = """from pathlib import Path
import json
import pandas as pd
pd.set_option("display.width", 160)
ROOT = Path.cwd() if (Path.cwd() / "data").is_dir() else Path.cwd().parent
DATA = ROOT / "data"
REALDATA = ROOT.parent / "shared" / "realdata\""""


def md(text: str):
    return new_markdown_cell(text.strip())


def code(text: str):
    return new_code_cell(text.strip())


NOTEBOOKS = {
    "01_how_tool_calling_works": [
        md("""
# How tool calling works

A model that may call tools answers with an assistant message carrying **tool calls** (an id, a
function name and an argument string). The client runs them and sends back one `tool` message per
call id, then asks the model again. This notebook walks through that protocol on bundled data:
the request with tools, a streamed response with three interleaved calls, the message rules, what
the legacy *first call only* bug breaks, and how calls without ids get reproducible fallback ids.
"""),
        code(SETUP),
        md("## 1. A request with tools\nTools are plain Python functions; their JSON schema comes from the type hints and docstring."),
        code("""
from toolcall_lab.tools import ToolRegistry

tools = ToolRegistry()

@tools.register
def get_weather(city: str, unit: str = "celsius") -> str:
    \"\"\"Current weather for a city.

    Args:
        city: the city name
        unit: celsius or fahrenheit
    \"\"\"
    return f"{city}: 18 degrees, light rain"

request = {"model": "any", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": tools.schemas()}
print(json.dumps(request, indent=1))
"""),
        md("""
## 2. A streamed response, chunk by chunk
The bundled recording `data/recordings/scripted_weather_news_stock.sse` is a scripted stream (made by
`data/make_recordings.py`, not a provider capture): some text, then three calls whose deltas are
interleaved by `index`; ids and names only on each call's first delta; arguments split mid-string.
Move the slider to see the calls assemble.
"""),
        code("""
from toolcall_lab.notebook.widgets import StreamStepper

recording = DATA / "recordings" / "scripted_weather_news_stock.sse"
stepper = StreamStepper(recording)
stepper
"""),
        code("""
# the same states, printed (what the slider shows), at a few steps
for step in (4, 9, 13, len(stepper.chunks)):
    snapshot, findings = stepper.states[step]
    print(f"after chunk {step}:", {idx: c["arguments"] for idx, c in snapshot[0].items()})
"""),
        code("""
from toolcall_lab import read_recording

response = read_recording(recording).parse()[0]
for call in response.tool_calls:
    print(call.index, call.tool_call_id, call.name, call.arguments, "->", call.parse_arguments())
print("text before the calls:", repr(response.first.content))
"""),
        md("""
## 3. The message protocol
Every tool call of an assistant message must be answered by exactly one `tool` message with its id
before the next assistant or user turn. A run of the loop on a scripted model shows the shape; the
validator checks it.
"""),
        code("""
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import run
from toolcall_lab.protocol import validate_messages
from toolcall_lab.scenarios import SCENARIOS

scenario = SCENARIOS["weather_news_stock"]
result = run_virtual(run(scenario.model(), scenario.registry(), scenario.prompt, mode="parallel"))
for m in result.messages:
    calls = [c["id"] for c in m.get("tool_calls", [])]
    print(f"{m['role']:>9}: {(m.get('content') or '')[:60]!r} {calls or ''} {m.get('tool_call_id', '')}")
print("violations:", validate_messages(result.messages))
"""),
        md("""
## 4. What *first call only* breaks
Frameworks that read `tool_calls[0]` run one call and drop the rest. The assistant message still
holds all three calls, so two are never answered: real APIs reject the next request, and the model
never sees the weather and the news. The validator says exactly where.
"""),
        code("""
legacy = run_virtual(run(scenario.model(), scenario.registry(), scenario.prompt, mode="first_only"))
print([(e.name, e.status) for e in legacy.executions])
for violation in validate_messages(legacy.messages):
    print(violation)
"""),
        md("""
## 5. Fallback ids
Some providers send no id (or `""`). The accumulator then uses `call_{batch}_{index}`, where `batch`
counts the model calls of the run from 0: reproducible for the same responses and unique within a
run. A provider's id is never altered. Each substitution is reported as a finding.
"""),
        code("""
from toolcall_lab import ChatCompletionAccumulator

def chunk(tool_calls):
    return {"choices": [{"index": 0, "delta": {"tool_calls": tool_calls}, "finish_reason": None}]}

acc = ChatCompletionAccumulator(batch=2)   # the third model call of a run
acc.feed(chunk([{"index": 0, "function": {"name": "sum", "arguments": '{"a": 2'}}]))
acc.feed(chunk([{"index": 0, "function": {"arguments": ', "b": 2}'}}, {"index": 1, "id": "", "function": {"name": "sub", "arguments": "{}"}}]))
parsed = acc.finish()
print([(c.tool_call_id, c.id_source, c.name, c.arguments) for c in parsed.tool_calls])
for f in parsed.findings:
    print(f.kind, "-", f.message)
"""),
        md("## 6. The run as a trace\nA finished run becomes a `Trace`; its rich display shows each round's message tree and timing."),
        code("""
from toolcall_lab.trace import Trace, TraceMetadata

Trace.from_run(result, TraceMetadata(title="weather, news and stock (parallel)", origin="scripted"))
"""),
    ],
    "02_explore_strategies": [
        md("""
# Exploring execution strategies
Run the loop on scripted scenarios and switch what matters: the execution mode, de-duplication,
approval hooks, `max_rounds` with its final call without tools, and the error policy. Scenario runs
use the virtual clock (`run_virtual`), so seconds of model and tool time take milliseconds; the live
view at the end runs on the real clock with top-level `await`.
"""),
        code(SETUP),
        code("""
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import Hooks, run
from toolcall_lab.scenarios import SCENARIOS
from toolcall_lab.notebook.widgets import LiveView, TraceView

def play(name, **settings):
    s = SCENARIOS[name]
    return run_virtual(run(s.model(), s.registry(), s.prompt, **settings))

rows = []
for mode in ["sequential", "parallel", "serialized", "first_only"]:
    r = play("weather_news_stock", mode=mode, round_trip_s=0.05)
    rows.append({"mode": mode, "wall_s": round(r.wall_time_s, 3), "model_calls": r.model_calls,
                 "client_round_trips": r.client_round_trips, "statuses": [e.status for e in r.executions]})
pd.DataFrame(rows)
"""),
        md("## The trace view\nOne panel per round: the assistant message, its calls with arguments and matched results, colour-coded status, and a timeline."),
        code("""
view = TraceView(play("failing_and_hanging", mode="parallel"))
view
"""),
        md("## De-duplication\nIdentical calls (same tool, same canonical arguments) within a batch or across the run are answered with a note instead of running again; it can be switched off."),
        code("""
for dedupe in (True, False):
    r = play("duplicate_call", dedupe=dedupe)
    print(f"dedupe={dedupe}:", [(e.tool_call_id, e.status) for e in r.executions], f"{r.wall_time_s:.2f} s")
print(r.executions[0].result)
print(play("duplicate_call").executions[1].result)
"""),
        md("## Approval hooks\nA hook can reject a call before it runs, or withhold a result; the model gets a tool message saying so."),
        code("""
def no_news(call):
    return "news lookups need approval" if call.name == "get_news" else True

r = play("weather_news_stock", hooks=Hooks(approve_call=no_news))
for e in r.executions:
    print(f"{e.name:12} {e.status:9} {e.result}")
"""),
        md("## `max_rounds` and the final answer without tools\nWhen the round budget is used up, the loop adds a system note and makes one last call without tools."),
        code("""
r = play("two_tool_rounds", max_rounds=1)
print(r.status, r.reason, "| rounds:", len(r.rounds), "| last round final:", r.rounds[-1].final)
print("note sent:", r.rounds[-1].request_messages[-1]["content"])
print("final answer:", r.final_answer)
"""),
        md("## Error policies\n`continue` (default) treats errors as results; `fail_fast` stops after a failing round and asks for the final answer without tools."),
        code("""
for policy in ("continue", "fail_fast"):
    r = play("failing_and_hanging", error_policy=policy)
    print(f"{policy:9}: {r.status}/{r.reason}, {[e.status for e in r.executions]}, final: {r.final_answer!r}")
"""),
        md("""
## Storing finished tool chains compressed
A chat app can keep a finished tool chain as **one** assistant message: a system hint listing the
executed tools with variable references, a `[Tool Execution Log]` block per call (truncated
arguments, status, a 200-character preview), then the final answer. Full results live in a variable
store the model can read back with the `read_variable` tool.
"""),
        code("""
from toolcall_lab.compression import CompressionHook, compress_messages, final_transcript, savings, VariableStore

store = VariableStore()
compressed = compress_messages(final_transcript(SCENARIOS["failing_and_hanging"].record()), store)
print(compressed[-1]["content"])
print("\\nvariables:", list(store.values))
"""),
        code("""
# what it saves: bundled scenarios + a generated corpus, and imported real traces when ../shared is present
from toolcall_lab.scenarios import generate_corpus
from toolcall_lab.trace_files import load

def totals(name, traces):
    rows = [savings(final_transcript(t)) for t in traces]
    b, a = sum(r["chars_before"] for r in rows), sum(r["chars_after"] for r in rows)
    tb, ta = sum(r["tokens_before"] for r in rows), sum(r["tokens_after"] for r in rows)
    return {"corpus": name, "traces": len(rows), "chars before": b, "chars after": a, "chars saved %": round(100 * (1 - a / b), 1),
            "tokens before": tb, "tokens after": ta, "tokens saved %": round(100 * (1 - ta / tb), 1), "token count": rows[0]["token_method"]}

corpora = [("bundled scenarios", [load(p) for p in sorted((DATA / "traces").glob("*.json"))]),
           ("generated corpus", generate_corpus(100, seed=7))]
if (REALDATA / "PROVENANCE.md").is_file():
    from toolcall_lab.importers import import_recording, import_tau_bench
    corpora.append(("real: pydantic-ai cassettes", [import_recording(p) for p in sorted((REALDATA / "pydantic-ai").glob("*.cassette.yaml"))]))
    corpora.append(("real: tau-bench (first 25 tasks)", import_tau_bench(REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json", limit=25)))
pd.DataFrame([totals(name, traces) for name, traces in corpora])
"""),
        md("## A live run\nThe live view updates from the run's events as it progresses (real clock here: about 0.3 s)."),
        code("""
live = LiveView("three 100 ms tools, sequential", mode="sequential")
display(live)
s = SCENARIOS["three_tools_100ms"]
result = await run(s.model(), s.registry(), s.prompt, mode="sequential", on_event=live.on_event)
print(result, "| events seen by the view:", live.n_events)
"""),
    ],
    "03_benchmark_modes": [
        md("""
# Benchmarking execution modes
Every trace is replayed under every mode on the virtual clock: the model's recorded responses and
the tools' recorded durations are reused, only the execution strategy changes. Bundled data: the
design-document scenarios in `data/traces` and a corpus generated from a seed.
"""),
        code(SETUP),
        code("""
from toolcall_lab.analysis import compare
from toolcall_lab.scenarios import SCENARIOS, generate_corpus
from toolcall_lab.trace_files import load
from toolcall_lab import plotting

scenarios = [load(p) for p in sorted((DATA / "traces").glob("*.json"))]
corpus = generate_corpus(200, seed=7)
table = compare(scenarios + corpus, round_trip_s=0.05)
table.summary
"""),
        code("""
table.runs[["title", "mode", "wall_time_s", "lower_bound_s", "efficiency", "speedup_vs_sequential",
            "upstream_calls", "client_round_trips"]].head(12)
"""),
        md("## One trace, four modes\nModel calls (blue), tool calls by status, and the serialized proxy's client round trips (hatched), on a shared time axis."),
        code("""
plotting.gantt(SCENARIOS["weather_news_stock"].record(), round_trip_s=0.05)
"""),
        code("plotting.speedup_distribution(table)"),
        code("plotting.time_breakdown(table)"),
        md("""
## Missed parallelism
Consecutive tool rounds whose calls use nothing from the previous round's results could have been
one batch. The saving: the later rounds' model calls, plus the overlap of their tool calls.
"""),
        code("""
missed = table.missed
print(f"{missed['trace'].nunique()} of {table.runs['trace'].nunique()} traces; {missed['saved_s'].sum():.1f} s in total")
missed.sort_values("saved_s", ascending=False).head(5)
"""),
        md("## The design documents' numbers, reproduced"),
        code("""
from toolcall_lab.replay import replay

t = {name: s.record() for name, s in SCENARIOS.items()}
ser = replay(t["serialized_three"], "serialized", round_trip_s=0.05)
claims = [
    ("three 0.1 s tools, parallel", "under 0.2 s", replay(t["three_tools_100ms"], "parallel").wall_time_s),
    ("three 0.1 s tools, sequential", "0.3 s", replay(t["three_tools_100ms"], "sequential").wall_time_s),
    ("sequential tools 0.5 + 0.8 + 0.3 s", "1.6 s", sum(e.duration_s for e in replay(t["weather_news_stock"], "sequential").executions)),
    ("one round: 0.8 s model, 0.2 s tool, 0.8 s final", "~1.8 s", replay(t["one_tool_round"], "sequential").wall_time_s),
    ("two rounds, worst case (two one-round exchanges)", "~3.6 s", 2 * replay(t["one_tool_round"], "sequential").wall_time_s),
    ("two dependent tool rounds sharing one final call", "(not in the docs)", replay(t["two_tool_rounds"], "sequential").wall_time_s),
    ("3-call batch via serialized proxy: client round trips", "3", ser.rounds[0].client_round_trips),
    ("3-call batch via serialized proxy: upstream calls per batch", "1", sum(1 for r in ser.rounds if r.tool_calls)),
]
pd.DataFrame(claims, columns=["claim", "design documents", "measured (virtual clock)"])
"""),
        md("## Compare view\nChange the modes, the parallel cap or the client round trip; the replays re-run instantly."),
        code("""
from toolcall_lab.notebook.widgets import CompareView

CompareView(SCENARIOS["straggler"].record(), round_trip_s=0.05)
"""),
    ],
    "04_real_recordings": [
        md("""
# What real providers send
The parser over real recordings from `../shared/realdata` (public test fixtures of SDKs and
frameworks; see its `PROVENANCE.md`). When that folder is absent, this notebook falls back to the
bundled **scripted** sample `data/recordings/` and says so.
"""),
        code(SETUP),
        code("""
from toolcall_lab import read_recording
from toolcall_lab.exceptions import ToolcallLabError

HAVE_REAL = (REALDATA / "PROVENANCE.md").is_file()
DATASETS = {"bfcl", "tau-bench", "inspect_ai"}  # datasets, not provider responses (imported further below)
files = sorted(p for p in REALDATA.glob("*/*") if p.suffix in {".sse", ".jsonl", ".json", ".yaml"}
               and p.parent.name not in DATASETS) if HAVE_REAL else sorted((DATA / "recordings").glob("*.sse"))
print("source:", "real recordings in ../shared/realdata" if HAVE_REAL else "BUNDLED SCRIPTED SAMPLE (no real data found)")
rows = []
for path in files:
    try:
        responses = read_recording(path).parse()
    except ToolcallLabError as exc:
        rows.append({"file": path.name[:60], "provider dir": path.parent.name, "responses": 0, "calls": 0,
                     "findings": f"error: {type(exc).__name__}"})
        continue
    kinds = sorted({f.kind for r in responses for f in r.findings})
    rows.append({"file": path.name[:60], "provider dir": path.parent.name, "responses": len(responses),
                 "calls": sum(len(c.tool_calls) for r in responses for c in r.choices), "findings": ", ".join(kinds)})
table = pd.DataFrame(rows)
table
"""),
        code("""
# findings per provider folder: which quirks each source shows
table.assign(findings=table["findings"].str.split(", ")).explode("findings").query("findings != ''") \\
    .groupby("findings")["provider dir"].agg(lambda s: ", ".join(sorted(set(s))))
"""),
        md("## Stepping through a real stream\nThe Anthropic SDK's recorded `tool_use` stream: `input_json_delta` pieces growing into the arguments (the scripted sample when real data is absent)."),
        code("""
from toolcall_lab.notebook.widgets import StreamStepper

source = REALDATA / "anthropic-sdk-python/messages_stream_claude-sonnet-4_text_then_1_tool_use.sse" if HAVE_REAL \\
    else DATA / "recordings/scripted_weather_news_stock.sse"
StreamStepper(source)
"""),
        md("## Real recordings as traces\nA recorded three-round agent run (OpenAI, streamed) imported as a trace, with the server's `openai-processing-ms` as model latency, replayed under each mode."),
        code("""
from toolcall_lab.importers import import_recording, import_bfcl, import_tau_bench
from toolcall_lab.analysis import compare
from toolcall_lab.notebook.widgets import TraceView

if HAVE_REAL:
    agent = import_recording(REALDATA / "pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml")
else:
    from toolcall_lab.scenarios import SCENARIOS
    agent = SCENARIOS["weather_news_stock"].record()
print(agent.metadata.notes)
compare([agent], round_trip_s=0.05).runs[["mode", "wall_time_s", "speedup_vs_sequential", "client_round_trips"]]
"""),
        code("TraceView(agent)"),
        md("## Public datasets: tau-bench and BFCL\ntau-bench trajectories never batch calls (one per assistant turn); BFCL parallel tasks always do. Timings are modelled (the notes in each trace say how)."),
        code("""
if HAVE_REAL:
    tau = import_tau_bench(REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json", limit=40)
    bfcl = import_bfcl(REALDATA / "bfcl/BFCL_v4_parallel.jsonl", REALDATA / "bfcl/possible_answer_BFCL_v4_parallel.jsonl", limit=60)
    for name, traces in (("tau-bench", tau), ("BFCL parallel", bfcl)):
        c = compare(traces, ["sequential", "parallel"])
        speedup = c.runs[c.runs["mode"] == "parallel"]["speedup_vs_sequential"].median()
        print(f"{name}: {len(traces)} traces, median speedup of parallel {speedup:.2f}x, "
              f"{c.missed['trace'].nunique()} traces with missed parallelism ({c.missed['saved_s'].sum():.1f} s)")
else:
    print("real datasets not available here")
"""),
    ],
    "05_serialized_proxy": [
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
from matplotlib.figure import Figure

fig = Figure(figsize=(6, 3.2), layout="constrained")
ax = fig.subplots()
cost.plot(ax=ax, marker="o")
ax.set_ylabel("wall time (s)")
ax.set_title("weather + news + stock: cost of serializing a 3-call batch")
fig
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
    ],
}


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells, metadata={
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}})
        nbformat.write(nb, HERE / f"{name}.ipynb")


if __name__ == "__main__":
    main()

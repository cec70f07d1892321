"""Cells of notebook 03_benchmark_modes."""

from __future__ import annotations

from ._cells import SETUP, code, md

CELLS = [
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
from toolcall_lab.notebook.tables import readable   # rounded for reading, modes that skip calls marked

scenarios = [load(p) for p in sorted((DATA / "traces").glob("*.json"))]
corpus = generate_corpus(200, seed=7)
table = compare(scenarios + corpus, round_trip_s=0.05)
readable(table.summary).T   # one column per mode: every figure in view, the speedup included
"""),
        code("""
readable(table.runs[["title", "mode", "wall_time_s", "lower_bound_s", "efficiency",
                     "speedup_vs_sequential", "skipped"]].head(12))
"""),
        md("## One trace, four modes\nModel calls (blue), tool calls by status, and the serialized proxy's client round trips (gold: N-1 per batch of N, as the run recorded them), on a shared time axis. Placeholder timings are faint with a dotted outline."),
        code("""
plotting.gantt(SCENARIOS["weather_news_stock"].record(), round_trip_s=0.05)
"""),
        code("plotting.speedup_distribution(table)"),
        code("plotting.time_breakdown(table)"),
        md("""
## What the numbers rest on
Every duration in a trace says where it came from. The scenarios and the generated corpus are
scripted: their latencies are constants (`placeholder`), so every row here says
`rests_on_estimates`. `compare(..., timings="recorded")` keeps only traces whose every duration was
recorded at the source (notebook 04 does that on real sessions). Serialized mode's client round trip
is a constant too, so its rows rest on a placeholder whenever `round_trip_s` is above 0. A
`first_only` run that skipped calls did less work: `comparable` is False, it has no efficiency
against the lower bound (which counts the calls it skipped), and summaries leave it out of speedups.
"""),
        code("""
readable(table.runs.groupby("mode").agg(
    evidence=("timing_evidence", lambda s: ", ".join(sorted(set(s)))),
    share_resting_on_estimates=("rests_on_estimates", "mean"),
    share_comparable=("comparable", "mean"),
))
"""),
        md("""
## Missed parallelism (an upper bound)
Consecutive tool rounds can only have been one batch if the later round used nothing from the
earlier ones. `dependency_evidence` looks, for every pair of rounds, for argument values that came
from an earlier result (exact, normalised, contained or numeric matches), for the model's text
quoting a result, for retries of a failed tool, and classifies the pair `dependent`, `unknown` (weak
or missing evidence) or `likely_independent`. Only groups of `likely_independent` rounds count, and
the saving is an upper bound: the model still saw the earlier results before it chose.
"""),
        code("""
missed = table.missed
print(f"{missed['trace'].nunique()} of {table.runs['trace'].nunique()} traces; "
      f"at most {missed['saved_upper_bound_s'].sum():.1f} s in total")
table.dependencies["classification"].value_counts()
"""),
        code("""
from toolcall_lab.dependencies import dependency_evidence

for name in ("course_search_two_rounds", "search_then_read"):
    for pair in dependency_evidence(SCENARIOS[name].record()):
        print(f"{name}: rounds {pair.earlier} -> {pair.later}: {pair.classification} ({pair.summary})")
"""),
        md("""
## The design documents' numbers, explained
The RAG design assumes a model call of 0.8 s and a tool call of 0.2 s. Under this loop a tool round
costs its model call plus its tool, and the answer costs one more model call: **one round**
= 0.8 + 0.2 + 0.8 = **1.8 s**, and **two rounds** = 0.8 + (0.2 + 0.8) + (0.2 + 0.8) = **2.8 s**,
not 3.6 s. 3.6 s needs a third model call on top of the two rounds' (2.8 + 0.8 s: a planning or
checking call), or two one-round exchanges back to back (2 x 1.8 s). An average of about 2.0 s then
says how many queries need the second round: with 1.8 s and 2.8 s, 1.8 + p x 1.0 = 2.0 gives
p = 20 %; with the design's 3.6 s, 1.8 + p x 1.8 = 2.0 gives p = 11 %. What the design supports:
1.8 s for one round, 2.8 s for two, and 2.0 s on average if one query in five needs a second round.
The table computes these from replays of the scenarios, not from the text.
"""),
        code("""
from toolcall_lab.replay import replay

t = {name: s.record() for name, s in SCENARIOS.items()}
one = replay(t["one_tool_round"], "sequential").wall_time_s
two = replay(t["two_tool_rounds"], "sequential").wall_time_s
model_s = t["one_tool_round"].rounds[0].model_call.latency_s
share = lambda two_round_s: (2.0 - one) / (two_round_s - one)

def tool_phase(trace, mode):  # from the end of the model's response to the end of the batch's last call
    batch = replay(trace, mode).rounds[0]
    return max(e.ended_at for e in batch.executions) - batch.model_call.ended_at

claims = [
    ("three 0.1 s tools, parallel", "under 0.2 s", replay(t["three_tools_100ms"], "parallel").wall_time_s),
    ("three 0.1 s tools, sequential", "0.3 s", replay(t["three_tools_100ms"], "sequential").wall_time_s),
    ("tool phase of 0.5 + 0.8 + 0.3 s tools, sequential", "1.6 s", tool_phase(t["weather_news_stock"], "sequential")),
    ("the same tools, parallel (the slowest one)", "0.8 s", tool_phase(t["weather_news_stock"], "parallel")),
    ("one round: 0.8 s model, 0.2 s tool, 0.8 s answer", "1.8 s", one),
    ("two rounds under this loop", "3.6 s (worst case)", two),
    ("two rounds plus one more model call", "3.6 s", two + model_s),
    ("two-round share behind a 2.0 s average (rounds of 2.8 s)", "(implied)", share(two)),
    ("two-round share behind a 2.0 s average (rounds of 3.6 s)", "(implied)", share(3.6)),
]
readable(pd.DataFrame(claims, columns=["claim", "design documents", "this loop (virtual clock)"]).round(3))
"""),
        md("""
### "3-call batch: 3 client round trips, 1 upstream call", counted at the proxy
Counted from requests, not from round counts: the proxy runs on loopback in front of the recorded
three-call trace, the loop is its client (the real `openai` client with `parallel_tool_calls=False`),
and the upstream's request log is read.
"""),
        code("""
from openai import AsyncOpenAI
from toolcall_lab.loop import run
from toolcall_lab.openai_model import OpenAIModel
from toolcall_lab.proxy import ProxyServer, TraceUpstream
from toolcall_lab.replay import replay_tools

batch = t["serialized_three"]
upstream = TraceUpstream(batch)
server = ProxyServer(upstream)
url = await server.start()
client = AsyncOpenAI(api_key="not-needed", base_url=url)
through_proxy = await run(OpenAIModel("any", client, parallel_tool_calls=False), replay_tools(batch),
                          batch.initial_messages, mode="sequential")
await client.close()
await server.close()
results_per_request = [sum(1 for m in req["messages"] if m.get("role") == "tool") for req in upstream.requests]
pd.DataFrame([
    ("client requests that each received one call of the batch", "3",
     sum(1 for r in through_proxy.rounds if r.tool_calls)),
    ("upstream requests before any result came back (they produced the batch)", "1",
     sum(1 for n in results_per_request if n == 0)),
    ("results carried by the next upstream request (all three at once)", "3", results_per_request[-1]),
    ("upstream requests in all (the batch, then the answer)", "-", len(upstream.requests)),
    ("client requests in all (3 calls, then the answer)", "-", len(through_proxy.rounds)),
], columns=["counted", "design", "measured"])
"""),
        md("""
## Compare view
One trace under every mode: the summary marks modes that skip calls as not comparable, every run
sits on one shared time axis (hover a bar for its exact times), and the selected round of each run
is shown side by side. Change the modes, the parallel cap or the client round trip; the replays
re-run instantly. The box at the top opens your own trace file or recording; the buttons at the
bottom save the timelines (SVG, PNG) and the tables (CSV).
"""),
        code("""
from toolcall_lab.notebook.widgets import CompareView

CompareView(SCENARIOS["straggler"].record(), round_trip_s=0.05)
"""),
        md("""
## Corpus view: overview, then drill down
The `compare` table of a whole corpus, every column it returns, sortable and filterable by mode;
pick a row to open that trace's comparison below. `CorpusView("path/to/folder")` does the same for
a folder of trace files.
"""),
        code("""
from toolcall_lab.notebook.widgets import CorpusView

corpus_view = CorpusView(scenarios + corpus[:30], round_trip_s=0.05)
corpus_view.sort_by = "speedup_vs_sequential"
corpus_view.open_row(int(corpus_view.rows().index[0]))   # the most parallel trace, opened below
corpus_view
"""),
]

"""Cells of notebook 06_eager_execution."""

from __future__ import annotations

from ._cells import SETUP, code, md

CELLS = [
    md("""
# Eager execution: tools that start while the model is still streaming
Under `parallel`, every call of a batch starts when the model's response has ended. Under `eager`,
each call starts as soon as its arguments are complete (they form a complete JSON object; a call of a
tool that takes no arguments, once a later call starts), while the model is still streaming the rest; the next model request still waits for the
stream's end and every call. This notebook measures `eager` against `parallel` and `sequential` on
the real Claude Code sessions, on the bundled corpus, and on BFCL's parallel categories under a stated
generation-speed model, and sets the gains beside LLMCompiler's and AsyncLM's.

When each call became complete is evidence too, and every figure says what it rests on
(`chunk_timing`): `recorded` (chunks timed as they arrived, or log lines stamped per content block),
`spread` / `estimated` (a model of the stream), `none` (a whole body: `eager` runs as `parallel` and
says so).
"""),
    code(SETUP),
    code("""
from dataclasses import replace

from toolcall_lab import plotting
from toolcall_lab.analysis import compare, sub_agent_of
from toolcall_lab.notebook.tables import readable
from toolcall_lab.scenarios import SCENARIOS, generate_corpus
from toolcall_lab.trace_files import load

STRATEGIES = ["sequential", "parallel", "eager"]
COLUMNS = ["traces", "wall_time_s", "median_speedup_vs_sequential", "stream_overlap_s"]

def gains(table, runs=None):
    \"\"\"Eager against sequential, parallel and one model call per tool call (ReAct-like), per trace
    (`runs`: some of the table's rows, e.g. a corpus without its sub-agents).\"\"\"
    runs = table.runs if runs is None else runs
    w = runs.pivot(index="trace", columns="mode", values="wall_time_s")
    react = runs[runs["mode"] == "eager"].set_index("trace")["one_call_per_response_s"]
    rows = []
    for name, base in (("sequential", w["sequential"]), ("parallel", w["parallel"]),
                       ("one call per response (ReAct-like)", react)):
        ratio = base / w["eager"]
        rows.append({"eager vs": name, "median": ratio.median(), "max": ratio.max(),
                     "all traces": base.sum() / w["eager"].sum()})
    return pd.DataFrame(rows).set_index("eager vs").round(3)
"""),
    md("""
## One batch, three strategies
A scripted batch (weather, news, stock; 0.8 s of model time): under `eager` the tool bars start
*inside* the model bar. The scenario's chunk offsets are spread evenly by the script, so this
overlap is a model of a stream, and the round's note says so.
"""),
    code("""
trace = SCENARIOS["weather_news_stock"].record()
plotting.gantt(trace, STRATEGIES)
"""),
    code("""
from toolcall_lab.replay import replay

eager_run = replay(trace, "eager")
print(eager_run.rounds[0].strategy_notes[0])
[(e.name, round(e.started_at, 3), round(e.ended_at, 3)) for e in eager_run.rounds[0].executions], \\
    "model stream ends at", eager_run.rounds[0].model_call.ended_at
"""),
    md("""
## Real Claude Code sessions
Claude Code writes one log line per content block as it finishes streaming; the importer keeps
those times as chunk offsets (`recorded`). So a batch whose `tool_use` blocks came out over a second
or more shows when each call could have started. When `../shared/realdata` is absent, the bundled
scenarios stand in, **clearly labelled**: their offsets are spread by a script, not recorded.
"""),
    code("""
from toolcall_lab.importers import import_claude_code

if (REALDATA / "PROVENANCE.md").is_file():
    sessions = [t for folder in ("claude-code-viewer", "claude-reliability")
                for t in import_claude_code(REALDATA / folder).traces]
    source = f"real: {len(sessions)} traces from 4 Claude Code sessions (chunk offsets recorded per block)"
else:
    sessions = [load(p) for p in sorted((DATA / "traces").glob("*.json"))]
    source = "BUNDLED STAND-IN (real data absent): scripted scenarios, chunk offsets spread evenly (a model)"
print(source)
cc = compare(sessions, STRATEGIES)
subagents = {t.metadata.title for t in sessions if sub_agent_of(t) is not None}
own = cc.runs[~cc.runs["title"].isin(subagents)]  # the sessions' own turns
nested = cc.runs[cc.runs["title"].isin(subagents)]
print(f"{own['trace'].nunique()} turns of the sessions themselves, {nested['trace'].nunique()} sub-agent runs "
      "(each also inside its parent's Task call, whose recorded duration is the whole sub-agent run)")
readable(replace(cc, runs=own).summary[COLUMNS])
"""),
    md("""
**A sub-agent's time is counted once.** A `Task` call in a session's turn runs a sub-agent; its recorded
duration is that whole sub-agent run, which the import also gives as a trace of its own. Totals over
every trace would count those seconds twice (and the sub-agents, which ran no batch of two or more
calls, would pull every ratio toward 1). So the headline covers the sessions' own turns, with each
sub-agent inside its parent's `Task` call as recorded; the sub-agent runs are measured on their own
below (`analysis.sub_agent_of` says which traces are sub-agents).
"""),
    code("""
parts = {"the sessions' own turns": gains(cc, own)}
if not nested.empty:  # (the bundled stand-in has no sub-agents)
    parts["sub-agent runs, on their own"] = gains(cc, nested)
pd.concat(parts)
"""),
    md("""
The overlap is real but small on these sessions: most batches hold one call, and in the multi-call
batches the last `tool_use` block ends the response, so a batch ends at the same time unless an early
call is the slowest. `eager_bound_s` is the best eager could do on each trace (every call started the
moment it was complete, all overlapping); `eager_saving_bound_s` what that saves over the parallel
bound. The traces with the most tool time overlapping the stream:
"""),
    code("""
runs = own[own["mode"] == "eager"]
readable(runs.sort_values("stream_overlap_s", ascending=False)[
    ["title", "wall_time_s", "lower_bound_s", "eager_bound_s", "eager_saving_bound_s", "stream_overlap_s", "chunk_timing"]
].head(5))
"""),
    md("The trace (under two minutes) where eager would have saved the most, parallel against eager:"),
    code("""
short = runs[runs["wall_time_s"] < 120].sort_values("eager_saving_bound_s", ascending=False)
best = next(t for t in sessions if t.metadata.title == short["title"].iloc[0])
plotting.gantt(best, ["parallel", "eager"])
"""),
    md("""
## The bundled corpus
The generated corpus (scripted, offsets spread evenly over each response: a model of the stream).
"""),
    code("""
corpus = [load(p) for p in sorted((DATA / "traces").glob("*.json"))] + generate_corpus(150, seed=7)
bundled = compare(corpus, STRATEGIES)
readable(bundled.summary[COLUMNS])
"""),
    code("gains(bundled)"),
    md("""
## BFCL's parallel categories, with a stated generation-speed model
BFCL holds questions and the calls a correct answer makes, not timed runs (its traces have no chunk
timing: `eager` would run as `parallel`). `toolcall_lab.generation` re-times each response as if
streamed: the first token after `ttft_s`, then `tokens_per_s`, the text and each call's arguments in
pieces of about 8 tokens. **The speed is measured from the real Claude Code streams** (tokens of a
block over the time since the previous block's line, median over block pairs; tokens counted with
o200k_base, not Claude's own tokenizer); the time to the first token from the same logs includes
Claude Code's own work before the request. Tools: BFCL executes none (its calls are `not_recorded`;
the importer's own placeholder gives each 0.1 s), so two stated tool models replace that: every call
1 s, and durations drawn (seeded) from the tool executions recorded in the same sessions
(`generation.recorded_tool_durations`): calls that ran, not the `Task` calls whose duration is a whole
sub-agent run, not calls that never ran (a refused input, a declined permission: a wait). Most of
those durations run from the end of the response to the result line (Claude Code logs no start), so
they hold its scheduling and any wait for the user's permission: upper bounds of the tools' runs.
Without the real data, a stated speed (50 tokens/s, 0.5 s to the first token) and the bundled
scenarios stand in, labelled.

**The final turn.** BFCL holds the calls a correct answer makes, not what the model says once their
results are back: the importer closes each question with a placeholder round (`Round.placeholder`, a
0 s marker), and `as_streamed` keeps it a marker, never a timed turn. So each BFCL figure covers one
model turn (the calls, streamed at the stated speed) and the tools, and no final answer: a real run
adds one more turn after the tools, the same under every strategy, which would bring every ratio
below closer to 1. Each replay ends as the recording does (`incomplete` / `stopped_as_recorded`).
"""),
    code("""
from toolcall_lab.generation import GenerationSpeed, as_streamed, measured_speed, recorded_tool_durations
from toolcall_lab.importers import import_bfcl

if (REALDATA / "PROVENANCE.md").is_file():
    speed = measured_speed(sessions)
    drawn = recorded_tool_durations(sessions)
    print(drawn.describe())
    durations = drawn.durations
    questions = [t for name in ("BFCL_v4_parallel", "BFCL_v4_parallel_multiple",
                                "BFCL_v4_live_parallel", "BFCL_v4_live_parallel_multiple")
                 for t in import_bfcl(REALDATA / "bfcl" / f"{name}.jsonl").traces]
    where = f"real: {len(questions)} BFCL questions (parallel, parallel_multiple, live_parallel, live_parallel_multiple)"
    pool = "tool executions recorded in the Claude Code sessions (no sub-agent call, no wait)"
else:
    speed = GenerationSpeed(tokens_per_s=50.0, ttft_s=0.5, source="stated, not measured: real data absent")
    durations = [e.duration_s for t in corpus for r in t.rounds for e in r.executions]
    questions = [load(p) for p in sorted((DATA / "traces").glob("*.json"))]
    where = "BUNDLED STAND-IN (real data absent): scripted scenarios"
    pool = "durations of the generated corpus (scripted placeholders)"
print(where)
print(f"speed: {speed.tokens_per_s:.1f} tokens/s, {speed.ttft_s} s to the first token ({speed.source})")
results = {}
for label, tool_s in (("every call 1 s", 1.0), (f"durations drawn from {len(durations)} {pool}", durations)):
    streamed = [as_streamed(t, speed, tool_s=tool_s, durations_from=pool) for t in questions]
    results[label] = compare(streamed, STRATEGIES)
pd.concat({label: gains(table) for label, table in results.items()})
"""),
    md("""
**What the ReAct-like column is on BFCL.** `one_call_per_response_s` charges every call a model turn of
the question's latency and runs the calls one after another. With every tool at 1 s, eager (like
parallel) takes one turn and the 1 s of the tools, and the formula takes N turns and N s: the ratio is
exactly N, the number of calls of the question (below; on BFCL's one-turn questions: the bundled
stand-in's traces have several rounds, so there it is not). It measures how many calls BFCL's
parallel questions hold, not an overlap.
"""),
    code("""
ones = results["every call 1 s"].runs
calls = ones[ones["mode"] == "eager"].set_index("trace")["n_calls"]
ratio = gains(results["every call 1 s"]).loc["one call per response (ReAct-like)"]
print(f"calls per question: median {calls.median():.1f}, max {calls.max()}; "
      f"ReAct-like / eager: median {ratio['median']:.2f}, max {ratio['max']:.2f}")
"""),
    md("""
## Beside the papers
- **LLMCompiler** (Kim et al., ICML 2024): up to **3.7x** lower latency than ReAct and **1.35x** than
  OpenAI's parallel function calling. ReAct makes one model call per function call; LLMCompiler's
  planner streams a whole task graph (dependent tasks included, with placeholders for earlier
  results) and its task-fetching unit dispatches each task as soon as it is parsed.
- **AsyncLM** (Gim et al., 2024): **1.6x–5.4x** lower end-to-end latency than synchronous function
  calling on BFCL tasks. The model keeps decoding while functions run and is interrupted when one
  returns (a fine-tuned model and an in-context protocol for it).

What differs here, so the figures above are not the same quantity:
- *Within one batch only.* `eager` overlaps a response's calls with the rest of that response. It
  does not let the model go on generating after a call (AsyncLM) nor plan dependent calls ahead
  (LLMCompiler), so it saves at most the stream time left after a call's arguments are complete,
  and nothing when the last call is the slowest. Against `parallel` (the analogue of OpenAI's
  parallel function calling) that is the eager-vs-parallel rows above (their range is printed
  below), not 1.35x.
- *The ReAct-like baseline is a formula*: `one_call_per_response_s` charges each call a full model
  turn of the recorded latency and runs the calls one after another; real ReAct turns are shorter
  (one call each) and think between calls. The eager-vs-ReAct column is in the papers' range for
  that reason, not because of the overlap; on BFCL with every tool at 1 s it is the number of calls.
- *Sub-agents once*: the Claude Code figures cover the sessions' own turns, each sub-agent inside its
  parent's `Task` call; the sub-agent runs, measured on their own, ran no batch of two or more calls.
- *No final turn on BFCL*: the figures cover the turn that makes the calls and the tools, not the
  answer after them (the recording holds none; see above); the papers' end-to-end figures include it.
- *Stated tool and speed models*: BFCL has no tool runs; the durations and the generation speed are
  the assumptions stated above (speed measured on Claude Sonnet 4 / Opus 4.5 sessions, tokens counted
  with o200k_base). The papers measured their own models, tools and hardware.
- *The Claude Code figures rest on recorded block times*, but Claude Code itself starts tools only
  after the whole response; the eager runs say what it would have saved, on the recorded durations.
- *Efficiency above 1*: `lower_bound_s` has every call start at its stream's end, so an eager run can
  beat it (`efficiency` > 1, up to `lower_bound_s / eager_bound_s`); `eager_bound_s` is eager's own bound.
"""),
    code("""
tables = {"Claude Code (own turns)": (cc, own), "bundled corpus": (bundled, None),
          **{f"BFCL, {k}": (v, None) for k, v in results.items()}}
vs_parallel = pd.DataFrame({name: gains(t, r).loc["parallel"] for name, (t, r) in tables.items()}).T
print(f"eager vs parallel: all traces {vs_parallel['all traces'].min():.3f}x to {vs_parallel['all traces'].max():.3f}x, "
      f"best single trace {vs_parallel['max'].max():.3f}x")
vs_parallel
"""),
]

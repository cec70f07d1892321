"""Cells of notebook 04_real_recordings."""

from __future__ import annotations

from ._cells import SETUP, code, md

CELLS = [
        md("""
# What real providers send
The parser over real recordings from `../shared/realdata` (public test fixtures of SDKs and
frameworks; see its `PROVENANCE.md`). When that folder is absent, this notebook falls back to the
bundled **scripted** sample `data/recordings/` and says so.

> **The copy of this notebook in the repository shows no real data, on purpose.** It is executed by
> `make notebooks` with `../shared/realdata` hidden from the kernel, so that nothing from those
> recordings lands in the repository: the outputs you see here come from the bundled scripted
> sample, the tables of real sessions are empty and the conclusions cell says nothing. Run it
> yourself with the repository checked out beside `../shared` (real recordings in
> `../shared/realdata`) to get what this notebook is for: the real recordings parsed, the real agent
> sessions (Claude Code, OpenHands, inspect, OTLP, Langfuse, SWE-agent) imported with their timing
> provenance, the four execution modes benchmarked on them, and what they say about parallel vs
> sequential execution.
"""),
        code(SETUP),
        md("""
## The conformance corpus: one quirk, one provider, one case
Small recordings this project wrote, one per provider quirk (`tests/conformance/`), each naming the
public issue or documentation it models. Every case is parsed whole and streamed; the table shows what
the parser gives. Run the same from a shell with `toolcall-lab conformance`.
"""),
        code("""
from toolcall_lab.conformance import run_corpus

results = run_corpus(ROOT / "tests" / "conformance")
print(f"{sum(r.passed for r in results)}/{len(results)} cases pass")
quirks = pd.DataFrame([r.row() for r in results]).drop(columns=["case"])
with pd.option_context("display.max_colwidth", 70, "display.max_rows", 100):
    display(quirks.sort_values(["category", "provider"]).set_index(["category", "quirk"]))
quirks.pivot_table(index="category", columns="result", values="quirk", aggfunc="count", fill_value=0)
"""),
        code("""
from toolcall_lab import read_recording
from toolcall_lab.exceptions import ToolcallLabError
from toolcall_lab.importers import looks_like
from toolcall_lab.notebook.theme import middle   # a long name cut in the middle: its end tells files apart

HAVE_REAL = (REALDATA / "PROVENANCE.md").is_file()
DATASETS = {"bfcl", "tau-bench", "inspect_ai"}  # datasets, not provider responses (imported further below)
files = sorted(p for p in REALDATA.glob("*/*") if p.suffix in {".sse", ".jsonl", ".json", ".yaml"}
               and p.parent.name not in DATASETS) if HAVE_REAL else sorted((DATA / "recordings").glob("*.sse"))
print("source:", "real recordings in ../shared/realdata" if HAVE_REAL else "BUNDLED SCRIPTED SAMPLE (no real data found)")
rows = []
for path in files:
    kind = looks_like(path)
    if kind not in (None, "recording"):  # an agent's own log, not a provider's response: imported below
        rows.append({"file": middle(path.name, 44), "provider dir": path.parent.name, "responses": 0, "calls": 0,
                     "findings": f"agent log ({kind}): imported below"})
        continue
    try:
        responses = read_recording(path).parse()
    except ToolcallLabError as exc:
        rows.append({"file": middle(path.name, 44), "provider dir": path.parent.name, "responses": 0, "calls": 0,
                     "findings": f"error: {type(exc).__name__}"})
        continue
    kinds = sorted({f.kind for r in responses for f in r.findings})
    rows.append({"file": middle(path.name, 44), "provider dir": path.parent.name, "responses": len(responses),
                 "calls": sum(len(c.tool_calls) for r in responses for c in r.choices), "findings": ", ".join(kinds)})
table = pd.DataFrame(rows)
table
"""),
        code("""
# findings per provider folder: which quirks each source shows
table[~table["findings"].str.startswith("agent log")] \\
    .assign(findings=lambda t: t["findings"].str.split(", ")).explode("findings").query("findings != ''") \\
    .groupby("findings")["provider dir"].agg(lambda s: ", ".join(sorted(set(s))))
"""),
        md("## Stepping through a real stream\nThe Anthropic SDK's recorded `tool_use` stream: `input_json_delta` pieces growing into the arguments (the scripted sample when real data is absent)."),
        code("""
from toolcall_lab.notebook.widgets import StreamStepper

source = REALDATA / "anthropic-sdk-python/messages_stream_claude-sonnet-4_text_then_1_tool_use.sse" if HAVE_REAL \\
    else DATA / "recordings/scripted_weather_news_stock.sse"
StreamStepper(source)
"""),
        md("""
## Real agent sessions as traces
Agent runs where they already live, imported with `toolcall_lab.importers` (one module per source):
Claude Code transcripts, OpenHands event streams and evaluation outputs, an inspect_ai eval log, an
OTLP export (OpenInference spans of a smolagents run), a Langfuse export and a SWE-agent trajectory.
Every import reports the source's tool calls and model calls against what it imported, anything
skipped, anything the source does not hold (a result never recorded: status `not_recorded`) and any
damage it found in the source.
"""),
        code("""
from toolcall_lab.importers import (import_claude_code, import_inspect, import_langfuse, import_openhands,
                                    import_otlp, import_swe_agent)

if HAVE_REAL:
    imports = {
        "Claude Code": [import_claude_code(REALDATA / "claude-code-viewer"), import_claude_code(REALDATA / "claude-reliability")],
        "OpenHands": [import_openhands(REALDATA / "OpenHands")],
        "inspect": [import_inspect(REALDATA / "inspect_ai")],
        "OTLP": [import_otlp(REALDATA / "agent-prism/otlp_json_openinference_smolagents_o1_6_llm_spans.json")],
        "Langfuse": [import_langfuse(REALDATA / "agent-prism/langfuse_trace_export_vercel-ai_gpt-5_tool_call_inside_stream.json")],
        "SWE-agent": [import_swe_agent(REALDATA / "SWE-agent")],
    }
else:
    imports = {}
    print("real sessions not available here: ../shared/realdata is absent")
reports = pd.DataFrame([
    {"source": name, "traces": len(res), "calls (imported / in source)": f"{res.report.imported_calls} / {res.report.source_calls}",
     "model calls": f"{res.report.imported_model_calls} / {res.report.source_model_calls}",
     "results not in the source": res.report.missing_results,
     "skipped": sum(i.kind == "skipped" for i in res.report.issues),
     "damaged": sum(i.kind == "damaged" for i in res.report.issues), "all represented": res.report.ok}
    for name, results in imports.items() for res in results])
reports
"""),
        md("""
### Where every number comes from
Each model call and tool execution carries a timing label. Claude Code, OpenHands, inspect, OTLP and
Langfuse numbers are `recorded` (timestamps or durations in the log; each module's docstring says how
each is derived), with two exceptions the labels show: a Claude Code call whose result came only
after a sibling's has no start in the log (its duration from that sibling's result is `estimated`),
and a call whose result the source does not hold is `not_recorded` (0 s, `placeholder`). A label
also says what a recorded figure covers when it is not the run itself: a Claude Code call without its
own `durationMs` is timed from the end of the response (an upper bound: scheduling and any wait for
permission are in it), a call the user declined is a wait. SWE-agent records no model latency
(`placeholder`). Each imported trace is placed on its log's timeline, so its
own wall time is the recorded one; the check below replays each trace under the mode its timings
show (sequential where they show none: its `metadata.mode` is then empty) and sets that beside the
log.
"""),
        code("""
from toolcall_lab.replay import replay

sessions = [t for results in imports.values() for res in results for t in res]
source_of = {t.metadata.title: name for name, results in imports.items() for res in results for t in res}
group_of = {t.metadata.title: source_of[t.metadata.title] + (" sub-agents" if "sub-agent" in t.metadata.title else "")
            for t in sessions}
sources = {t.metadata.source for t in sessions}
nested = {t.metadata.title[-58:] for t in sessions if t.metadata.parent and t.metadata.parent["source"] in sources}
check = pd.DataFrame([
    {"group": group_of[t.metadata.title], "trace": t.metadata.title[-58:], "mode the timings show": t.metadata.mode or "not evidenced",
     "timing labels": dict(t.timing_sources), "recorded wall s": t.metadata.recorded_wall_s,
     "trace wall s": t.wall_time_s, "replayed wall s": replay(t).wall_time_s}
    for t in sessions if t.metadata.recorded_wall_s])
if len(check):
    check["replay / recorded"] = (check["replayed wall s"] / check["recorded wall s"]).round(4)
check.groupby("group")[["recorded wall s", "trace wall s", "replayed wall s"]].sum().round(2) if len(check) else check
"""),
        md("""
### How the recorded batches ran
A batch's calls are compared where the log gives both their start and their end: did they overlap,
or run one after another? Logs stamp to the millisecond and durations come in whole milliseconds, so
calls whose start and end lie within 2 ms of each other `cannot tell`. Only calls that really ran
and whose start and end are both in the log are evidence: a call whose start the importer assumed
(Claude Code writes no start: without its own `durationMs` a call is timed from the end of the
response), whose start is `estimated`, whose result is not in the source (`not_recorded`), or that
never ran (Claude Code rejected its input, the user declined it) is not evidence either way.
"""),
        code("""
from toolcall_lab.analysis import recorded_batch
from toolcall_lab.records import NOT_BATCH_EVIDENCE

def no_evidence(e):
    return e.timing.source != "recorded" or e.status == "not_recorded" or NOT_BATCH_EVIDENCE in e.timing.note

batches = pd.DataFrame([
    {"source": source_of[t.metadata.title], "trace": t.metadata.title[-45:], "round": r.round_index,
     "calls": " + ".join(e.name for e in r.executions), "how they ran": recorded_batch(r),
     "not evidence (start not in the log, or never ran)": ", ".join(e.name for e in r.executions if no_evidence(e)),
     "longest call s": max(e.duration_s for e in r.executions),
     "overlap would save s": sum(e.duration_s for e in r.executions) - max(e.duration_s for e in r.executions)}
    for t in sessions for r in t.rounds if len(r.executions) > 1])
batches.round(3)
"""),
        md("""
### The four modes on the real sessions, and what each figure rests on
`compare(..., timings="recorded")` keeps only traces whose every duration was recorded and is the
time of the thing itself: a model latency that is a placeholder, a call whose result is not in the
log, and a recorded figure that is not the run of the tool (an upper bound: a Claude Code call timed
from the end of the response, an OTLP gap; a wait: a call the user declined) all leave a trace out,
and the list below says why. So the tables compare every session, and their `timing_evidence`,
`measured_share` and `not_execution_s` columns show what each row rests on; serialized mode adds a
client round trip per call, a constant (`placeholder`). A replay that ends on a recording's closing
placeholder ends as the recording did: `completed/agent_finished` when the agent ended its run with
its own finishing tool, `incomplete` otherwise, never a made-up final answer. A sub-agent's run lies
inside its parent's Task call, so sums over all sessions count it once (`analysis.nested_runs`).
"""),
        code("""
from toolcall_lab.analysis import compare, nested_runs

strict = compare(sessions, ["sequential"], timings="recorded")
if sessions:
    print(f"timings='recorded' keeps {strict.runs['trace'].nunique() if len(strict.runs) else 0} of {len(sessions)} traces; left out:",
          *(f"{r.trace[-60:]}: {r.reason}" for r in strict.excluded.itertuples()), sep="\\n  ")
real = compare(sessions, round_trip_s=0.05)
if len(real.runs):
    runs = real.runs.assign(group=real.runs["title"].map(group_of))
    by_source = runs.pivot_table(index="group", columns="mode", values="wall_time_s", aggfunc="sum").round(1)
    by_source["parallel / sequential"] = (by_source["parallel"] / by_source["sequential"]).round(3)
    shares = runs[runs["mode"] == "sequential"].groupby("group").agg(
        measured_share=("measured_share", "median"), not_execution_s=("not_execution_s", "sum"))
    by_source = by_source.join(shares.round(3))
    skipped = runs[(runs["mode"] == "first_only") & ~runs["comparable"]]
    if len(skipped):  # first_only skipped calls: less work, so its time is not comparable
        by_source = by_source.rename(columns={"first_only": "first_only (skipped calls: not comparable)"})
else:
    runs = by_source = pd.DataFrame()
    print("no real session to compare here (../shared/realdata is absent)")
by_source
"""),
        code("""
runs[["group", "mode", "status", "wall_time_s", "timing_evidence", "measured_share", "comparable"]].groupby(["group", "mode"]).agg(
    wall_s=("wall_time_s", "sum"), statuses=("status", lambda s: ", ".join(sorted(set(s)))),
    evidence=("timing_evidence", lambda s: ", ".join(sorted(set(s)))),
    measured_share=("measured_share", "median"), comparable=("comparable", "all")) if len(runs) else runs
"""),
        md("""
### What the real recordings say about parallel and sequential execution
Computed from the tables above (the sentences are filled in from the data):
"""),
        code("""
rounds = [r for t in sessions for r in t.rounds if r.tool_calls]
multi = [r for r in rounds if len(r.tool_calls) > 1]
batching = sorted({source_of[t.metadata.title] for t in sessions if any(len(r.tool_calls) > 1 for r in t.rounds)})
one_call = sorted({source_of[t.metadata.title] for t in sessions} - set(batching))
deps = real.dependencies.assign(source=real.dependencies["trace"].map(source_of))
adjacent = deps[deps["later_round"] - deps["earlier_round"] == 1]["classification"].value_counts()
if HAVE_REAL:
    ran = batches.groupby("how they ran")
    counts = ran.size()
    print(f"1. {len(multi)} of {len(rounds)} tool rounds carried more than one call, all in {', '.join(batching)} sessions; "
          f"{', '.join(one_call)} made one call per response, so for them sequential and parallel execution "
          f"take exactly the same time.")
    overlapped = batches[batches["how they ran"].isin(["overlapped", "partly overlapped"])]
    told = {k: int(counts.get(k, 0)) for k in ("overlapped", "partly overlapped", "one after another", "cannot tell", "not evidenced")}
    waited = sorted(set(", ".join(batches["not evidence (start not in the log, or never ran)"]).split(", ")) - {""})
    together, apart = told["overlapped"] + told["partly overlapped"], told["one after another"]
    so = ("So the agent ran some batches' calls together and others one after another: none of the four modes is "
          "exactly what it did." if together and apart else
          "Every batch whose timestamps tell ran its calls together, at least partly; the others cannot tell." if together else
          "Every batch whose timestamps tell ran its calls one after another." if apart else
          "No batch's timestamps tell how its calls ran.")
    print(f"2. How the {len(batches)} batches ran, by their timestamps: {told['overlapped']} overlapped and "
          f"{told['partly overlapped']} partly overlapped ({', '.join(sorted(set(overlapped['calls'])))}), "
          f"{apart} ran one call after another, {told['cannot tell']} cannot tell (starts and ends within the "
          f"timestamps' resolution), {told['not evidenced']} have fewer than two calls that ran with a start and an end in "
          f"the log. {(batches['not evidence (start not in the log, or never ran)'] != '').sum()} batches hold a call that "
          f"is no evidence ({', '.join(waited)}): its start is not in the log (assumed at the end of the response, or "
          f"after a sibling's result it may have waited for), or it never ran. {so} "
          f"Of what running every batch together would save, {overlapped['overlap would save s'].sum():.1f} s is in the "
          f"batches that did overlap, and {batches[~batches.index.isin(overlapped.index)]['overlap would save s'].sum():.3f} s "
          f"in all the others.")
    cc = by_source.loc["Claude Code"]
    cc_check = check[check.group == "Claude Code"]
    print(f"3. Replayed, the Claude Code main threads ({runs[(runs.group == 'Claude Code') & (runs['mode'] == 'parallel')].shape[0]} traces) take "
          f"{cc['parallel']:.1f} s in parallel and {cc['sequential']:.1f} s sequentially ({cc['sequential'] / cc['parallel']:.2f}x); "
          f"serialized execution costs sequential time plus a round trip per call ({cc['serialized']:.1f} s at 50 ms). "
          f"Their figures are measured for a median {cc['measured_share']:.1%} of the seconds; {cc['not_execution_s']:.1f} s "
          f"are recorded but not a tool's run (calls timed from the end of the response: upper bounds; calls the user "
          f"declined: waits), so timings='recorded' leaves every one of them out.")
    once = ~check["trace"].isin(nested)  # a sub-agent's run lies inside its Task call: counted there
    print(f"4. Replayed under the mode its timings show, each trace set beside its log: Claude Code main threads "
          f"{cc_check['replayed wall s'].sum():.1f} s against {cc_check['recorded wall s'].sum():.1f} s recorded; "
          f"all sessions {check[once]['replayed wall s'].sum():.1f} s against {check[once]['recorded wall s'].sum():.1f} s "
          f"(the {(~once).sum()} sub-agent runs, {check[~once]['recorded wall s'].sum():.1f} s recorded, counted once: inside "
          f"their Task calls). The difference is what no single mode reproduces (calls that waited for a sibling) and "
          f"time between the steps the logs do not attribute (OpenHands' step overhead, inspect's time outside working_time).")
    print(f"5. Between consecutive tool rounds the evidence found: {adjacent.get('dependent', 0)} dependent, "
          f"{adjacent.get('unknown', 0)} unknown, {adjacent.get('likely_independent', 0)} likely independent. "
          f"Merging the likely independent ones would save at most {real.missed['saved_upper_bound_s'].sum():.1f} s "
          f"over all the sessions (an upper bound: the model saw each result before its next call).")
"""),
        code("""
from toolcall_lab.notebook.widgets import TraceView

fan_out = next((t for t in sessions if "main turn 1" in t.metadata.title and "fe5e1c67" in t.metadata.title), None) if HAVE_REAL else None
if fan_out is None:
    from toolcall_lab.scenarios import SCENARIOS
    fan_out = SCENARIOS["straggler"].record()
print(fan_out.metadata.title)
TraceView(fan_out)
"""),
        md("## Recorded exchanges and public datasets\nCassettes keep the responses but not their timing: model latency is the server's own `openai-processing-ms` where recorded (`reported`), otherwise a placeholder, and every tool duration is a placeholder. tau-bench trajectories have no timings at all (`estimated` model latency, `placeholder` tools) and never batch calls; BFCL items are expected answers, not runs (`scripted`: 0.8 s model and 0.1 s per call, constants). Restricting to recorded timings leaves all of them out, and no speedup is shown for them: parallel only overlaps tool time, and theirs is a constant."),
        code("""
from toolcall_lab.importers import import_recording, import_bfcl, import_tau_bench

if HAVE_REAL:
    agent = import_recording(REALDATA / "pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml")
    tau = import_tau_bench(REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json", limit=40)
    bfcl = import_bfcl(REALDATA / "bfcl/BFCL_v4_parallel.jsonl", limit=60)
    print(f"tau-bench: {tau.report.imported_calls} calls imported from the first 40 trajectories "
          f"(the other {tau.report.source_calls - tau.report.imported_calls} calls reported as skipped by the limit)")
    for name, traces in (("cassette", agent), ("tau-bench", tau), ("BFCL parallel", bfcl)):
        c = compare(traces, ["sequential", "parallel"])
        tools = c.calls[c.calls["mode"] == "sequential"]["timing"]
        # parallel only overlaps tools: with every tool duration a placeholder constant (0.1 s), its
        # speedup would restate the constants ((0.8 + N x 0.1) / (0.8 + 0.1)), not measure anything
        only_constants = len(tools) and set(tools) <= {"placeholder", "estimated"}
        speedup = c.runs[c.runs["mode"] == "parallel"]["speedup_vs_sequential"].median()
        said = ("no parallel speedup shown: every tool duration is a placeholder, so any figure would only restate "
                "the constants" if only_constants else f"median speedup of parallel {speedup:.2f}x")
        print(f"{name}: {len(traces)} traces, timings {', '.join(sorted(set(c.runs['timing_evidence'])))}; "
              f"{said}; missed parallelism at most {c.missed['saved_upper_bound_s'].sum():.1f} s in "
              f"{c.missed['trace'].nunique()} traces (on the same durations); "
              f"{len(compare(traces, ['sequential'], timings='recorded').excluded)} left out by timings='recorded'")
else:
    print("real datasets not available here")
"""),
]

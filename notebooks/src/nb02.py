"""Cells of notebook 02_explore_strategies."""

from __future__ import annotations

from ._cells import SETUP, code, md

CELLS = [
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
        md("""
## The trace view
Everything the trace holds: the run header (model, origin, timing provenance, token usage, outcome),
the prompt and the tools offered, a whole-run timeline (model on top, one lane per call position;
hover a bar for exact times), then one panel per round: the request as sent, the assistant message,
each call with its id, arguments, status (icon and word), duration and tool message. The box at
the top opens another trace file or recording; the buttons at the bottom export the timeline and
the calls table.
"""),
        code("""
from toolcall_lab.trace import Trace, TraceMetadata

result = play("failing_and_hanging", mode="parallel")
view = TraceView(Trace.from_run(result, TraceMetadata(title="one failing and one hanging tool", origin="scripted")))
view
"""),
        md("## De-duplication\nIdentical calls (same tool, same canonical arguments) within one batch are answered with a note instead of running again. Across rounds it is opt-in (a polling tool must run again): per tool with `register(idempotent=True)`, or for the whole run with `dedupe_across_rounds=True`. The note says which rule applied."),
        code("""
for settings in ({}, {"dedupe_across_rounds": True}, {"dedupe": False}):
    r = play("duplicate_call", **settings)
    print(f"{str(settings or 'default'):30}", [(e.tool_call_id, e.status) for e in r.executions], f"{r.wall_time_s:.2f} s")
r = play("duplicate_call", dedupe_across_rounds=True)
print(r.executions[1].result)
print(r.executions[2].result)
"""),
        md("## Approval hooks\nA hook can reject a call before it runs, or withhold a result; the model gets a tool message saying so."),
        code("""
def no_news(call):
    return "news lookups need approval" if call.name == "get_news" else True

r = play("weather_news_stock", hooks=Hooks(approve_call=no_news))
for e in r.executions:
    print(f"{e.name:12} {e.status:9} {e.result}")
"""),
        md("A hook that raises is not hidden: the failure is recorded with the hook, the call and what followed. A failing `approve_call` rejects that call, a failing `approve_result` withholds that result, a failing `before_model_call` stops the run, and a failing notification hook changes nothing else."),
        code("""
def policy_service_down(call):
    raise ConnectionError("policy service down")

r = play("weather_news_stock", hooks=Hooks(approve_call=policy_service_down))
print([e.status for e in r.executions], "|", r.status, r.reason)
r.hook_failures[0]
"""),
        md("## `max_rounds` and the final answer without tools\nWhen the round budget is used up, the loop adds a system note and makes one last call without tools."),
        code("""
r = play("two_tool_rounds", max_rounds=1)
print(r.status, r.reason, "| rounds:", len(r.rounds), "| last round final:", r.rounds[-1].final)
print("note sent:", r.rounds[-1].request_messages[-1]["content"])
print("final answer:", r.final_answer)
"""),
        md("## Error policies\n`continue` (default) treats errors as results, and stops with the design's message when every call of a round failed; `fail_fast` follows a failing round with one final call without tools."),
        code("""
for policy in ("continue", "fail_fast"):
    r = play("failing_and_hanging", error_policy=policy)
    print(f"{policy:9}: {r.status}/{r.reason}, {[e.status for e in r.executions]}, final: {r.final_answer!r}")
"""),
        md("A deadline for the whole run (`timeout_s`) ends it with status `timeout`: calls in flight are cancelled (their text says whether they had started) and the record stays consistent."),
        code("""
r = play("straggler", timeout_s=2.0)
print(r.status, r.reason, f"{r.wall_time_s:.2f} s |", r.error)
for e in r.executions:
    print(f"  {e.tool_call_id} {e.status:9} {e.result[:90]}")
"""),
        md("""
## Write your own strategy
The four modes above are built-in strategies (`toolcall_lab.strategies`), and so is `eager` (calls
start while the model is still streaming; notebook 06). A strategy of your own is a name and an
`async` function of the batch: the batch screens calls (arguments, unknown tools, duplicates,
approval), runs them with their timeouts and hooks on the run's clock, emits the events, and sends the
results back in model order. The strategy only says **when** each call runs, with `batch.run(i)`,
`batch.run_sequential(...)`, `batch.run_parallel(...)`, or `batch.start(i)` + `batch.join()`.

This one follows a rule agents use (Claude Code, for one, overlaps only the tools it considers safe to
overlap): tools that only read run together, every other call after them, one at a time.
"""),
        code("""
from toolcall_lab.strategies import strategy

READ_ONLY = {"Read", "Grep", "Glob", "LS", "WebFetch", "get_weather", "get_news", "get_stock", "web_search"}

@strategy("read_only_parallel")
async def read_only_parallel(batch):
    \"\"\"Read-only tools at once; then every other call, one after another, in model order.\"\"\"
    reads = [i for i, call in enumerate(batch.calls) if call.name in READ_ONLY]
    await batch.run_parallel(reads)
    await batch.run_sequential(i for i in range(len(batch.calls)) if i not in reads)
"""),
        md("A coding agent's batch (scripted): two reads and a search, then an edit and a test run that must not overlap."),
        code("""
from toolcall_lab import plotting
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.scenarios import simulated
from toolcall_lab.trace import Trace, TraceMetadata

coding_tools = [simulated("Read", 0.3), simulated("Grep", 0.5), simulated("Edit", 0.2), simulated("Bash", 1.5)]
batch = ScriptedResponse(content="Looking first.", latency_s=1.0, tool_calls=(
    ("Read", {"file_path": "app.py"}), ("Grep", {"pattern": "def main"}), ("Read", {"file_path": "test_app.py"}),
    ("Edit", {"file_path": "app.py", "old": "x", "new": "y"}), ("Bash", {"command": "pytest -q"})))
coding = Trace.from_run(
    run_virtual(run(ScriptedModel([batch, "Fixed."]), coding_tools, "Fix the bug", mode="sequential")),
    TraceMetadata(title="a coding agent's batch", origin="scripted"))
plotting.gantt(coding, ["sequential", "parallel", read_only_parallel])
"""),
        md("""
It works everywhere a mode name does: `replay`, `compare` (its name is a row), `CompareView`,
`plotting.gantt`, and `toolcall-lab bench --strategy module:attribute` / `replay --strategy ...` once it
lives in a module. On the corpus (the bundled scenarios, the generated corpus, and the real Claude Code
sessions when `../shared/realdata` is present) it sits where its rule puts it: with parallel where every
call reads, with sequential where none does. On the real sessions it stays close to sequential: most of
what parallel saves there comes from batches of sub-agent (`Task`) calls (nearly all of it: batches of
`Bash` calls save almost nothing there), which this rule runs one at a time.
"""),
        code("""
from toolcall_lab.analysis import compare
from toolcall_lab.scenarios import generate_corpus
from toolcall_lab.trace_files import load

corpora = {"bundled scenarios + generated corpus (scripted)":
           [load(p) for p in sorted((DATA / "traces").glob("*.json"))] + generate_corpus(60, seed=7)}
if (REALDATA / "PROVENANCE.md").is_file():
    from toolcall_lab.importers import import_claude_code
    corpora["real Claude Code sessions"] = [t for folder in ("claude-code-viewer", "claude-reliability")
                                            for t in import_claude_code(REALDATA / folder).traces]
modes = ["sequential", "parallel", read_only_parallel, "eager"]
pd.concat({name: compare(traces, modes).summary[["traces", "wall_time_s", "median_speedup_vs_sequential"]]
           for name, traces in corpora.items()}).round(3)
"""),
        md("""
### Per-tool limits
Real APIs rate-limit. `Parallel(tool_limits={"web_search": 2})` (or the name `parallel[web_search=2]`,
also for `eager`) runs at most two searches at once; the others wait for a slot, and each records
when it was queued (`queued_at`): the timeline draws the wait as a thin bar. A built-in's name says
its options (`parallel[web_search=2]`); one you name yourself (`Parallel(name="mine", ...)`) must
not pass for a built-in, and the `cap` and `tool_limits` columns of `compare` say what every row ran
under.
"""),
        code("""
from toolcall_lab.strategies import Parallel

searches = SCENARIOS["multi_angle_search"].record()
plotting.gantt(searches, ["parallel", Parallel(tool_limits={"web_search": 2}), "parallel[cap=1]"])
"""),
        md("""
## Storing finished tool chains compressed
A chat app can keep a finished tool chain as **one** assistant message: a system hint listing the
executed tools with variable references, a `[Tool Execution Log]` block per call (truncated
arguments, status, a 200-character preview), then the final answer. Full results live in a variable
store the model can read back with the `read_variable` tool.
"""),
        code("""
from toolcall_lab.compression import CompressionHook, compress, savings, VariableStore

store = VariableStore()
# a Trace (or RunResult) brings its executions, so each call's status is the recorded one
compressed = compress(SCENARIOS["failing_and_hanging"].record(), store).messages
print(compressed[-1]["content"])
print("\\nvariables:", list(store.values))
"""),
        code("""
# what it saves: bundled scenarios + a generated corpus, and imported real traces when ../shared is present
from toolcall_lab.scenarios import generate_corpus
from toolcall_lab.trace_files import load

def totals(name, traces):
    rows = [savings(t) for t in traces]
    b, a = sum(r["chars_before"] for r in rows), sum(r["chars_after"] for r in rows)
    tb, ta = sum(r["tokens_before"] for r in rows), sum(r["tokens_after"] for r in rows)
    return {"corpus": name, "traces": len(rows), "chars before": b, "chars after": a, "chars saved %": round(100 * (1 - a / b), 1),
            "tokens before": tb, "tokens after": ta, "tokens saved %": round(100 * (1 - ta / tb), 1), "token count": rows[0]["token_method"]}

corpora = [("bundled scenarios", [load(p) for p in sorted((DATA / "traces").glob("*.json"))]),
           ("generated corpus", generate_corpus(100, seed=7))]
if (REALDATA / "PROVENANCE.md").is_file():
    from toolcall_lab.importers import import_recording, import_tau_bench
    corpora.append(("real: pydantic-ai cassettes", [t for p in sorted((REALDATA / "pydantic-ai").glob("*.cassette.yaml")) for t in import_recording(p)]))
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
]

"""Cells of notebook 04_real_recordings."""

from __future__ import annotations

from ._cells import SETUP, code, md

CELLS = [
        md("""
# What real providers send
The parser over real recordings from `../shared/realdata` (public test fixtures of SDKs and
frameworks; see its `PROVENANCE.md`). When that folder is absent, this notebook falls back to the
bundled **scripted** sample `data/recordings/` and says so.
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
]

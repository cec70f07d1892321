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
readable(table.summary)
"""),
        code("""
readable(table.runs[["title", "mode", "wall_time_s", "lower_bound_s", "efficiency", "speedup_vs_sequential",
                     "upstream_calls", "client_round_trips", "skipped"]].head(12))
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

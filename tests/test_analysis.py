"""Mode comparison: exact virtual timings, bounds, missed parallelism, the design documents' numbers."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

import pandas as pd
import pytest

from tests.conftest import DATA
from toolcall_lab.analysis import compare, critical_path_s, missed_parallelism, one_call_per_response_s
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import SCENARIOS, generate_corpus

RTT = 0.05


@pytest.fixture(scope="module")
def scenarios():
    return {name: s.record() for name, s in SCENARIOS.items()}


@pytest.fixture(scope="module")
def table(scenarios):
    return compare(scenarios.values(), round_trip_s=RTT)


def wall(table, title, mode):
    runs = table.runs
    return runs.loc[(runs["title"] == title) & (runs["mode"] == mode), "wall_time_s"].item()


# hand-computed: model calls 0.8 s each unless stated; tool times as each scenario states
EXPECTED = {
    "weather_news_stock": {
        "sequential": 0.8 + 0.5 + 0.8 + 0.3 + 0.8,
        "parallel": 0.8 + 0.8 + 0.8,
        "serialized": 0.8 + 1.6 + 2 * RTT + 0.8,  # N-1 extra client round trips
        "first_only": 0.8 + 0.5 + 0.8,
    },
    "multi_angle_search": {
        "sequential": 0.8 + 4 * 0.6 + 0.8,
        "parallel": 0.8 + 0.6 + 0.8,
        "serialized": 0.8 + 4 * 0.6 + 3 * RTT + 0.8,
        "first_only": 0.8 + 0.6 + 0.8,
    },
    "straggler": {
        "sequential": 0.8 + 0.3 + 2.0 + 0.8,
        "parallel": 0.8 + 2.0 + 0.8,
        "serialized": 0.8 + 2.3 + 3 * RTT + 0.8,
        "first_only": 0.8 + 0.1 + 0.8,
    },
    "failing_and_hanging": {
        "sequential": 0.8 + 0.5 + 0.2 + 1.0 + 0.8,
        "parallel": 0.8 + 1.0 + 0.8,
        "serialized": 0.8 + 1.7 + 2 * RTT + 0.8,
        "first_only": 0.8 + 0.5 + 0.8,
    },
    "duplicate_call": {
        m: 0.8 + 0.5 + 0.8 + 0.8 + (RTT if m == "serialized" else 0)  # a batch of 2, then of 1
        for m in ("sequential", "parallel", "serialized")
    },
    "three_tools_100ms": {"sequential": 0.3, "parallel": 0.1, "serialized": 0.3 + 2 * RTT, "first_only": 0.1},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hand_computed_times_for_every_mode(table, name) -> None:
    title = SCENARIOS[name].title
    for mode, seconds in EXPECTED[name].items():
        assert wall(table, title, mode) == pytest.approx(seconds), mode


def test_design_document_numbers(scenarios) -> None:
    three = scenarios["three_tools_100ms"]
    assert replay(three, "parallel").wall_time_s < 0.2
    assert replay(three, "sequential").wall_time_s == pytest.approx(0.3)
    tools = [e.duration_s for e in replay(scenarios["weather_news_stock"], "sequential").executions]
    assert tools == pytest.approx([0.5, 0.8, 0.3]) and sum(tools) == pytest.approx(1.6)
    assert replay(scenarios["one_tool_round"], "sequential").wall_time_s == pytest.approx(1.8)
    # "two rounds, worst case ~3.6 s" is two one-round exchanges back to back (2 x 1.8 s); two dependent
    # tool rounds in one exchange share the final call: 0.8 + 0.2 + 0.8 + 0.2 + 0.8 = 2.8 s
    assert 2 * replay(scenarios["one_tool_round"], "sequential").wall_time_s == pytest.approx(3.6)
    assert replay(scenarios["two_tool_rounds"], "sequential").wall_time_s == pytest.approx(2.8)
    serialized = replay(scenarios["serialized_three"], "serialized", round_trip_s=RTT)
    first = serialized.rounds[0]
    assert (first.client_round_trips, serialized.model_calls) == (
        3,
        2,
    )  # 3 round trips, one upstream call per batch


def test_bounds_efficiency_and_speedup(table, scenarios) -> None:
    trace = scenarios["weather_news_stock"]
    assert critical_path_s(trace) == pytest.approx(0.8 + 0.8 + 0.8)
    runs = table.runs.set_index(["title", "mode"])
    row = runs.loc[(trace.metadata.title, "sequential")]
    assert row["efficiency"] == pytest.approx(2.4 / 3.2)
    assert runs.loc[(trace.metadata.title, "parallel"), "speedup_vs_sequential"] == pytest.approx(3.2 / 2.4)
    assert runs.loc[(trace.metadata.title, "serialized"), "client_round_trips"] == 3 + 1
    assert runs.loc[(trace.metadata.title, "parallel"), "overlap_saved_s"] == pytest.approx(1.6 - 0.8)
    assert bool(runs["results_in_model_order"].all())
    assert set(table.summary.index) == {"sequential", "parallel", "serialized", "first_only"}


def test_missed_parallelism(scenarios) -> None:
    (missed,) = missed_parallelism(scenarios["course_search_two_rounds"])
    assert (missed.first_round, missed.last_round) == (0, 1)
    # at most: one model call + the shorter of the two searches
    assert missed.saved_upper_bound_s == pytest.approx(0.8 + 0.4)
    assert missed_parallelism(scenarios["search_then_read"]) == []  # round 2 reads round 1's URL
    assert missed_parallelism(scenarios["two_tool_rounds"]) == []  # round 2 passes round 1's ticket


def test_what_if_provider_returns_one_call_per_response(scenarios) -> None:
    trace = scenarios["weather_news_stock"]
    assert one_call_per_response_s(trace) == pytest.approx(3 * 0.8 + 1.6 + 0.8)


def test_process_pool_gives_the_same_tables(tmp_path) -> None:
    traces = generate_corpus(6, seed=5)
    local = compare(traces)
    with ProcessPoolExecutor(2) as pool:
        spread = compare(traces, executor=pool)
    pd.testing.assert_frame_equal(local.runs, spread.runs)
    pd.testing.assert_frame_equal(local.calls, spread.calls)


def test_plots_return_figures_and_save(tmp_path, table, scenarios) -> None:
    from matplotlib.figure import Figure

    from toolcall_lab import plotting

    fig = plotting.gantt(scenarios["straggler"], save=tmp_path / "g.svg")
    assert isinstance(fig, Figure) and len(fig.axes) == 4 and (tmp_path / "g.svg").stat().st_size > 1000
    assert isinstance(plotting.speedup_distribution(table, save=tmp_path / "s.png"), Figure)
    assert isinstance(plotting.time_breakdown(table), Figure)
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_bench_writes_tables_and_plots(tmp_path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolcall_lab",
            "bench",
            str(DATA / "traces"),
            "--corpus",
            "5",
            "--modes",
            "sequential,parallel",
            "--out",
            str(tmp_path / "r.csv"),
            "--plot",
            str(tmp_path / "p.png"),
            "--quiet",
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "16 trace(s) x 2 mode(s)" in out.stdout and "missed parallelism (upper bound)" in out.stdout
    runs = pd.read_csv(tmp_path / "r.csv")
    assert len(runs) == 32 and {"wall_time_s", "lower_bound_s", "speedup_vs_sequential"} <= set(runs.columns)
    assert {"timing_evidence", "measured_share", "rests_on_estimates", "comparable"} <= set(runs.columns)
    for table in ("calls", "errors", "excluded", "missed", "dependencies"):
        assert (tmp_path / f"r_{table}.csv").exists(), table
    assert (tmp_path / "p_gantt.png").exists()
    floats = runs.select_dtypes("float")  # written at 1 ns: no float noise such as 21.118000000000002
    assert floats.fillna(0).eq(floats.fillna(0).round(9)).all().all()
    bad = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "bench", "--modes", "turbo"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "unknown mode" in bad.stderr


def test_a_broken_file_is_reported_and_the_rest_compared(tmp_path) -> None:
    good = DATA / "traces" / "straggler.json"
    bad = tmp_path / "broken.json"
    bad.write_text('{"schema_version": 1, "metadata": ')
    table = compare([good, bad], ["sequential", "parallel"])
    assert len(table.runs) == 2 and list(table.errors["trace"]) == [str(bad)]
    assert "not valid JSON (file looks truncated)" in table.errors["error"].item()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolcall_lab",
            "bench",
            str(good),
            str(bad),
            "--quiet",
            "--out",
            str(tmp_path / "r.csv"),
            "--plot",
            str(tmp_path / "p.png"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and f"not compared: {bad}" in out.stderr
    assert len(pd.read_csv(tmp_path / "r.csv")) == 4 and (tmp_path / "p_gantt.png").exists()
    errors = pd.read_csv(tmp_path / "r_errors.csv")  # the errors table is written next to --out
    assert list(errors["trace"]) == [str(bad)]


def test_rounds_and_runs_display_as_html(scenarios) -> None:
    result = replay(scenarios["weather_news_stock"], "parallel")
    bundle = result._repr_mimebundle_()
    assert (
        bundle["text/plain"].startswith("<RunResult completed/final_answer")
        and "tcl-round" in bundle["text/html"]
    )
    round_bundle = result.rounds[0]._repr_mimebundle_()
    assert (
        round_bundle["text/plain"].startswith("<Round 0 parallel: 3 calls")
        and "get_news" in round_bundle["text/html"]
    )
    assert "tcl-trace" in scenarios["straggler"]._repr_mimebundle_()["text/html"]


def test_timing_provenance_columns_and_the_recorded_only_restriction(scenarios) -> None:
    """Scripted traces rest on placeholders; a trace whose numbers were all recorded passes the filter."""
    from dataclasses import replace

    from toolcall_lab.records import Timing

    recorded = Timing(source="recorded", note="test: timestamps")
    base = scenarios["weather_news_stock"]
    real = replace(
        base,
        metadata=replace(base.metadata, title="all recorded"),
        rounds=tuple(
            replace(
                r,
                model_call=replace(r.model_call, timing=recorded),
                executions=tuple(replace(e, timing=recorded) for e in r.executions),
            )
            for r in base.rounds
        ),
    )
    table = compare([base, real], ["sequential", "parallel", "serialized"], round_trip_s=RTT)
    runs = table.runs.set_index(["title", "mode"])
    assert runs.loc[("all recorded", "parallel"), "timing_evidence"] == "recorded"
    assert runs.loc[("all recorded", "parallel"), "measured_share"] == pytest.approx(1.0)
    assert not runs.loc[("all recorded", "parallel"), "rests_on_estimates"]
    # serialized mode adds client round trips: a constant, so that row rests on a placeholder
    assert runs.loc[("all recorded", "serialized"), "timing_evidence"] == "placeholder"
    assert runs.loc[(base.metadata.title, "parallel"), "timing_evidence"] == "placeholder"
    assert set(table.calls["timing"]) == {"recorded", "placeholder"}
    only = compare([base, real], ["sequential", "parallel"], timings="recorded")
    assert set(only.runs["title"]) == {"all recorded"}
    (reason,) = only.excluded["reason"]
    assert reason.startswith("timings='recorded': rests partly on") and "placeholder" in reason
    with pytest.raises(Exception, match="use one of any, measured, recorded"):
        compare([base], timings="exact")  # type: ignore[arg-type]


def test_summaries_cover_the_same_traces_in_every_mode(scenarios) -> None:
    """A trace that cannot be replayed in one mode is flagged in all and left out of every summary."""
    from dataclasses import replace

    good = scenarios["weather_news_stock"]
    broken_base = scenarios["multi_angle_search"]
    first = broken_base.rounds[0]
    broken = replace(  # the 2nd call's recorded execution is missing: only first_only gets through
        broken_base,
        metadata=replace(broken_base.metadata, title="missing a result"),
        rounds=(replace(first, executions=first.executions[:1]), *broken_base.rounds[1:]),
    )
    table = compare([good, broken])
    assert {"sequential", "serialized"} <= set(table.errors["mode"])  # (parallel too, once it raises)
    assert "first_only" in set(table.runs.loc[table.runs["title"] == "missing a result", "mode"])
    flagged = table.runs.groupby("title")["in_all_modes"].agg(set)
    assert flagged["missing a result"] == {False} and flagged[good.metadata.title] == {True}
    summary = table.summary
    assert (summary["traces"] == 1).all() and (summary["traces_left_out"] == 1).all()


def test_first_only_is_marked_not_comparable(table) -> None:
    runs = table.runs
    fo = runs[runs["mode"] == "first_only"]
    assert not fo.loc[fo["skipped"] > 0, "comparable"].any()
    assert fo.loc[fo["skipped"] == 0, "comparable"].all()  # nothing skipped: the same work
    assert runs.loc[runs["mode"] != "first_only", "comparable"].all()
    summary = table.summary
    assert summary.loc["first_only", "comparable_runs"] == (fo["skipped"] == 0).sum()


def test_dependencies_table(table) -> None:
    deps = table.dependencies
    assert {"trace", "earlier_round", "later_round", "classification", "summary"} <= set(deps.columns)
    assert set(deps["classification"]) <= {"dependent", "likely_independent", "unknown"}


def test_bench_parquet_without_pyarrow_fails_before_the_run(tmp_path, monkeypatch, capsys) -> None:
    from toolcall_lab import cli

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "fastparquet", None)
    code = cli.main(["bench", str(DATA / "traces"), "--quiet", "--out", str(tmp_path / "r.parquet")])
    err = capsys.readouterr()
    assert code == 2 and "needs pyarrow" in err.err and "trace(s) x" not in err.out  # nothing was run
    assert not list(tmp_path.iterdir())


def test_a_zero_second_placeholder_before_the_end_counts_as_unknown(scenarios) -> None:
    """A result the source did not record, mid-run, is 0 s in the replay: that 0 is not a measurement."""
    from dataclasses import replace

    from toolcall_lab.analysis import timing_columns, timing_gap, timing_seconds, unknown_durations
    from toolcall_lab.records import PLACEHOLDER_KEY, Timing

    recorded = Timing(source="recorded", note="test")
    missing = Timing(source="placeholder", note="not recorded: 0 s")
    base = scenarios["two_tool_rounds"]
    rounds = [
        replace(
            r,
            model_call=replace(r.model_call, timing=recorded),
            executions=tuple(replace(e, timing=recorded) for e in r.executions),
        )
        for r in base.rounds
    ]
    first = rounds[0]
    rounds[0] = replace(
        first,
        executions=(replace(first.executions[0], ended_at=first.executions[0].started_at, timing=missing),),
    )
    trace = replace(base, rounds=tuple(rounds))
    assert unknown_durations(trace.rounds) == {"placeholder": 1}
    cols = timing_columns(timing_seconds(trace.rounds), unknown=unknown_durations(trace.rounds))
    assert (
        cols["timing_evidence"] == "placeholder"
        and cols["rests_on_estimates"]
        and cols["measured_share"] == 1.0
    )
    assert "1 unknown duration(s) counted as 0 s" in timing_gap(trace, frozenset({"recorded"}))
    # at the very end too: a last response whose latency the source did not give is unknown...
    last = rounds[-1]
    untimed = replace(last.model_call, ended_at=last.model_call.started_at, timing=missing)
    tail = replace(base, rounds=(*rounds[1:-1], replace(last, model_call=untimed)))
    assert unknown_durations(tail.rounds) == {"placeholder": 1}
    # ...but an importer's marker where the source holds no response is no duration at all
    marker = replace(
        untimed,
        chunks=tuple(
            replace(c, payload={**c.payload, PLACEHOLDER_KEY: "the recording ends here"})
            for c in untimed.chunks
        ),
    )
    closing = replace(base, rounds=(*rounds[1:-1], replace(last, model_call=marker)))
    assert closing.rounds[-1].placeholder == "the recording ends here"
    assert unknown_durations(closing.rounds) == {}


def test_written_tables_are_rounded_to_the_nanosecond_and_compare_keeps_full_precision() -> None:
    from toolcall_lab._cli_runs import _to_nanoseconds

    table = pd.DataFrame(
        {"trace": ["a", "b"], "lower_bound_s": [21.118000000000002, 0.5], "saving_s": [2.8e-14, -3e-15]}
    )
    written = _to_nanoseconds(table)
    assert written["lower_bound_s"].tolist() == [21.118, 0.5]
    assert written["saving_s"].tolist() == [0.0, 0.0] and str(written["saving_s"][1]) == "0.0"  # not -0.0
    assert table["lower_bound_s"][0] == 21.118000000000002  # the caller's table untouched
    assert written["trace"].tolist() == ["a", "b"]


def test_a_strategy_failing_on_every_trace_is_left_out_of_the_summary_not_emptying_it() -> None:
    from toolcall_lab.analysis import compare, summary_text
    from toolcall_lab.strategies import strategy

    @strategy("always_fails")
    async def always_fails(batch):
        raise RuntimeError("nope")

    traces = [SCENARIOS[name].record() for name in ("weather_news_stock", "serialized_three")]
    table = compare(traces, ["sequential", "parallel", always_fails])
    assert table.modes_failed_everywhere == ["always_fails"]
    assert set(table.summary.index) == {"sequential", "parallel"}
    assert (table.summary["traces"] == 2).all() and (table.summary["traces_left_out"] == 0).all()
    text = summary_text(table)
    assert "left out of the summary: always_fails failed on every trace" in text and "parallel" in text
    fine = compare(traces, ["sequential", "parallel"])
    assert fine.modes_failed_everywhere == [] and set(fine.summary.index) == {"sequential", "parallel"}

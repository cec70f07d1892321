"""Notebook views, tested from Python: traits drive what is rendered, no browser needed."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html import unescape

import pytest

from tests.conftest import DATA, REALDATA
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import run
from toolcall_lab.notebook.html import fmt, summary_table, trace_html
from toolcall_lab.notebook.timeline import timeline_svg
from toolcall_lab.notebook.widgets import CompareView, CorpusView, LiveView, StreamStepper, TraceView, as_doc
from toolcall_lab.scenarios import SCENARIOS
from toolcall_lab.trace_files import save


@pytest.fixture(scope="module")
def failing():
    return SCENARIOS["failing_and_hanging"].record()


def visible_text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def test_trace_view_shows_everything_the_trace_holds(failing) -> None:
    view = TraceView(failing)
    assert len(view.accordion.children) == len(failing.rounds) == 2
    assert view.accordion.get_title(0) == (
        "Round 0 · parallel · 3 calls: get_weather, flaky_api, slow_service · 1.80 s · 2 failed"
    )
    head = visible_text(view.header.value)
    # the run header: origin told truthfully, model, mode, outcome, timing provenance, first chunk
    assert "origin: scripted" in head and "fake model on the virtual clock" in head
    assert "model scripted" in head and "mode parallel" in head and "completed / final_answer" in head
    assert "timings: model calls 2 placeholder; tools 3 placeholder; chunk offsets 2 spread" in head
    assert "first chunk after 0.200 s" in head
    # the prompt and the tools offered
    assert "Check the weather, the flaky API and the slow service." in head
    assert "3 tools offered: get_weather, flaky_api, slow_service" in head
    panel = view.panels[0].value
    for status in ("ok", "error", "timeout"):  # icon and word, not colour alone
        assert f"data-status='{status}'" in panel and f"</span> {status}</span>" in panel
    assert "RuntimeError: 503 Service Unavailable" in panel and "tool message" in panel
    assert "&quot;city&quot;: &quot;Lyon&quot;" in panel  # pretty-printed arguments
    assert "request as sent: 1 message" in panel
    second = visible_text(view.panels[1].value)
    assert "request as sent: 5 messages (1 unchanged from round 0's request, 4 shown)" in second
    view.selected_round = 1
    assert view.accordion.selected_index == 1


def test_a_bare_run_result_is_labelled_with_its_own_origin() -> None:
    s = SCENARIOS["one_tool_round"]
    result = run_virtual(run(s.model(), s.registry(), s.prompt))
    doc = as_doc(result)
    assert doc["metadata"]["origin"] == "scripted"  # RunResult.origin comes from the model
    assert "origin: recorded" not in TraceView(result).header.value


def test_raw_toggle_shows_the_exact_argument_string(failing) -> None:
    view = TraceView(failing)
    assert "{&quot;city&quot;: &quot;Lyon&quot;}" not in view.panels[0].value
    view.raw_box.value = True
    assert view.show_raw and "{&quot;city&quot;: &quot;Lyon&quot;}" in view.panels[0].value


def test_long_results_are_folded_with_a_preview() -> None:
    doc = SCENARIOS["one_tool_round"].record().to_dict()
    doc["rounds"][0]["tool_executions"][0]["result"] = "x" * 5000
    html = trace_html(doc)
    assert "full result (5,000 characters)" in html and "<details>" in html


def test_timeline_fills_its_container_with_legend_lanes_and_exact_tooltips(failing) -> None:
    html = timeline_svg(failing.to_dict()["rounds"])
    svg = html[html.index("<svg") : html.index("</svg>") + 6]
    ET.fromstring(svg)  # well-formed
    xs = re.findall(r"<rect class='tcl-bar[^']*'[^>]* x='([^']+)'", svg)
    assert xs and all(x.endswith("%") for x in xs)  # x in percent: sized by the container
    assert re.search(r"<title>flaky_api \(call_0_1\): error, 0\.200 s, 0\.800 → 1\.000 s", svg)
    lanes = re.findall(r"class='tcl-lane'[^>]*>([^<]+)<", html)
    assert lanes == ["model", "call 1", "call 2", "call 3"]
    legend = visible_text(html[html.index("tcl-legend") :])
    assert "model call" in legend and "✖ tool error" in legend and "◔ tool timeout" in legend
    for text in re.findall(r"<text[^>]*>([^<]*)</text>", svg):
        assert "…" not in text and "..." not in text  # labels fit or move, never cut


def test_labels_move_outside_short_bars_and_never_overlap_the_next_bar() -> None:
    doc = SCENARIOS["weather_news_stock"].record().to_dict()
    html = timeline_svg(doc["rounds"], min_px=300)
    inside = re.findall(r"class='tcl-in'[^>]*>([^<]*)<", html)
    outside = re.findall(r"class='tcl-out'[^>]*>([^<]*)<", html)
    assert inside and outside  # long bars hold their label, short ones have it beside them


def test_timing_provenance_is_drawn_and_counted_when_the_trace_has_it(failing) -> None:
    doc = failing.to_dict()
    doc["rounds"][0]["response"]["timing"] = {"source": "estimated", "note": "tokens x 50 ms"}
    doc["rounds"][0]["response"]["chunk_timing"] = "spread"
    for x in doc["rounds"][0]["tool_executions"]:
        x["timing"] = {"source": "placeholder", "note": "0.1 s constant"}
    html = trace_html(doc)
    assert "data-provenance='estimated'" in html and "data-provenance='placeholder'" in html
    assert (
        "timings: model calls 1 estimated, 1 placeholder; tools 3 placeholder; chunk offsets 2 spread"
        in visible_text(html)
    )
    assert "placeholder timing" in visible_text(html) and "tokens x 50 ms" in html


def test_a_zero_second_round_is_a_sliver_not_a_full_width_bar() -> None:
    live = LiveView("t", min_interval_s=0.0)
    s = SCENARIOS["weather_news_stock"]
    run_virtual(run(s.model(), s.registry(), s.prompt, on_event=live.on_event))
    live.rounds[1]["response"]["ended_at"] = live.rounds[1]["response"]["started_at"]  # a ~0 s final round
    live.render()
    last = live.view.value[live.view.value.index("data-round='1'") :]
    width = re.search(r"tcl-bar-model'[^>]* width='([\d.]+)%'", last)
    assert width and float(width.group(1)) < 5


def test_compare_view_reruns_when_controls_change() -> None:
    view = CompareView(SCENARIOS["weather_news_stock"].record(), round_trip_s=0.05)
    walls = {r["mode"]: r["wall_time_s"] for r in view.rows}
    assert walls["serialized"] == pytest.approx(3.3) and walls["parallel"] == pytest.approx(2.4)
    view.rtt_box.value = 200
    assert {r["mode"]: r["wall_time_s"] for r in view.rows}["serialized"] == pytest.approx(
        0.8 + 1.6 + 2 * 0.2 + 0.8  # 3 calls: N-1 = 2 extra client round trips
    )
    assert "3.600 s" in view.summary.value
    view.mode_box.value = ("sequential", "parallel")
    assert [r["mode"] for r in view.rows] == ["sequential", "parallel"]
    assert view.details.value.count("class='tcl-panel'") == 2
    view.round_box.value = 1
    assert "final answer" in view.details.value
    assert view.errors.outputs == ()


def test_compare_view_shares_one_axis_and_marks_the_mode_that_skips_calls() -> None:
    view = CompareView(SCENARIOS["weather_news_stock"].record())
    ticks = re.findall(r"class='tcl-mode'.*?</svg>", view.timelines.value, flags=re.S)
    last_ticks = {re.findall(r"class='tcl-tick'[^>]*>([^<]+)<", t)[-1] for t in ticks}
    assert len(ticks) == 4 and len(last_ticks) == 1  # same axis for every mode
    summary = visible_text(view.summary.value)
    assert "not comparable (skipped 2 of 3 calls)" in summary and "2.29x" not in summary
    assert "replayed" in summary and "scripted trace" in summary
    assert view.details.value.count("class='tcl-panel'") == 4
    assert "width:420px" not in view.details.value and "tcl-grid-panels" in view.details.value


def test_compare_view_concurrency_cap() -> None:
    view = CompareView(SCENARIOS["multi_angle_search"].record(), modes=("parallel",))
    assert view.rows[0]["wall_time_s"] == pytest.approx(0.8 + 0.6 + 0.8)
    view.cap_box.value = 2
    assert view.rows[0]["wall_time_s"] == pytest.approx(0.8 + 1.2 + 0.8)
    assert "queued / waiting for a slot" in view.timelines.value


def test_numbers_are_rounded_for_reading() -> None:
    assert fmt(3.55e-15, "overlap_saved_s") == "0.000" and fmt(2.2857142, "speedup") == "2.29"
    assert fmt(float("nan")) == "—" and fmt(12) == "12" and fmt(True) == "yes"
    rows = [
        {
            "mode": "sequential",
            "wall_time_s": 3.2,
            "upstream_calls": 2,
            "client_round_trips": 2,
            "tool_time_s": 1.6,
            "failures": 0,
            "skipped": 0,
            "n_calls": 3,
        },
        {
            "mode": "my_strategy",
            "wall_time_s": 1.4,
            "upstream_calls": 2,
            "client_round_trips": 2,
            "tool_time_s": 0.5,
            "failures": 0,
            "skipped": 1,
            "n_calls": 3,
        },
    ]
    html = summary_table(rows)
    assert "not comparable (skipped 1 of 3 calls)" in html and "2.29x" not in html


def test_stream_stepper_frames_show_the_delta_what_it_appended_and_findings() -> None:
    stepper = StreamStepper(DATA / "recordings" / "scripted_weather_news_stock.sse")
    n = len(stepper.chunks)
    assert stepper.last_step == n and stepper.view.value.count("class='tcl-frame'") == n + 1
    assert stepper.states[3][0][0][0]["arguments"] == ""
    assert stepper.states[4][0][0][0]["arguments"] == '{"city"'
    stepper.step = 4
    visible = re.search(
        r"<div class='tcl-frame' data-frame='4'>(.*?)</div><div class='tcl-frame'", stepper.view.value, re.S
    )
    assert visible, "step 4 is the frame shown"
    frame = visible.group(1)
    assert (
        "choice 0 delta:" in frame
        and "<mark class='tcl-added' title='added by this chunk'>{&quot;city&quot;</mark>" in frame
    )
    assert stepper.view.value.count(" hidden>") == n  # every other frame hidden
    for control in ("tcl-first", "tcl-prev", "tcl-play", "tcl-next", "tcl-last"):
        assert f'class="{control}"' in stepper.view.value
    assert 'type="range"' in stepper.view.value and "onclick=" in stepper.view.value
    stepper.step = 10_000  # clamped to the last step: after finish()
    assert stepper.step == n and "after the last chunk" in stepper.view.value
    bundle = stepper._repr_mimebundle_()
    assert "text/html" in bundle and "application/vnd.jupyter.widget-view+json" in bundle


def test_stream_stepper_shows_findings_made_at_finish() -> None:
    no_ids = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]},
                }
            ]
        }
    ]
    s2 = StreamStepper(no_ids)
    s2.step = 1
    last = s2.view.value[s2.view.value.index("data-frame='1'") :]
    assert "missing_id" in last and "call_0_0" in last and "no findings yet" not in last


def test_live_view_follows_a_run() -> None:
    live = LiveView("test", min_interval_s=0.0)
    s = SCENARIOS["weather_news_stock"]
    result = run_virtual(run(s.model(), s.registry(), s.prompt, on_event=live.on_event))
    assert live.n_events == len(result.events)
    assert len(live.rounds) == 2 and live.final == result.final_answer
    assert live.view.value.count("class='tcl-call ") == 3 and "final answer" in live.view.value
    assert "completed / final_answer" in live.view.value
    assert "<div class='tcl-live-timeline'><div class='tcl-tl'>" in live.view.value  # its own block


def test_views_open_files_and_report_bad_ones(tmp_path, failing) -> None:
    view = TraceView()
    view.open_box.open_path(tmp_path / "nope.json")
    assert "cannot open" in view.open_box.message.value and "no such file" in view.open_box.message.value
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "metadata": {}}')
    view.open_box.open_path(bad)
    assert "metadata.origin: missing" in view.open_box.message.value and view.errors.outputs == ()
    good = save(failing, tmp_path / "good.json")
    view.open_box.open_path(good)
    assert len(view.panels) == 2 and "One failing and one hanging" in view.header.value
    view.open_box.open_path(DATA / "recordings" / "scripted_weather_news_stock.sse")  # a recording
    assert "opened" in view.open_box.message.value and "origin: imported" in view.header.value
    view.open_box._uploaded({"new": [{"name": "good.json", "content": good.read_bytes()}]})
    assert "opened good.json" in view.open_box.message.value
    compare = CompareView(SCENARIOS["one_tool_round"].record())
    compare.open_box.open_path(good)
    assert "One failing and one hanging" in compare.summary.value


def test_views_export_svg_png_and_csv(tmp_path, failing) -> None:
    view = CompareView(failing)
    view.export.folder.value = str(tmp_path)
    (svg,) = view.export.save("svg")
    ET.parse(svg)
    assert svg.read_text().count("<title>") >= 1
    (png,) = view.export.save("png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    summary, calls = view.export.save("csv")
    assert summary.read_text().splitlines()[0].startswith("trace,mode,")
    assert "flaky_api" in calls.read_text()
    trace_view = TraceView(failing)
    trace_view.export.folder.value = str(tmp_path)
    trace_view.export._save("csv")
    assert "saved" in trace_view.export.message.value


def test_corpus_view_sorts_every_column_and_opens_a_row(tmp_path) -> None:
    for name in ("weather_news_stock", "straggler", "one_tool_round"):
        save(SCENARIOS[name].record(), tmp_path / f"{name}.json")
    (tmp_path / "broken.json").write_text("{not json")
    view = CorpusView(tmp_path, ["sequential", "parallel", "first_only"])
    runs = view.comparison.runs
    assert set(runs.columns) <= set(view.sort_box.options) and len(runs) == 9
    assert "broken.json" in view.problems.value and "not valid JSON" in view.problems.value
    view.sort_box.value = "wall_time_s"
    view.order_box.value = True
    shown = [int(i) for i in re.findall(r"<tr class='[^']*'><td>(\d+)</td>", view.table.value)]
    walls = [runs.loc[i, "wall_time_s"] for i in shown]
    assert walls == sorted(walls, reverse=True)
    view.sort_box.value = "speedup_vs_sequential"
    top = int(re.findall(r"<tr class='[^']*'><td>(\d+)</td>", view.table.value)[0])
    assert runs.loc[top, "skipped"] == 0  # a mode that skipped calls never tops the speedup ranking
    view.mode_box.value = "first_only"
    skipping = runs[(runs["mode"] == "first_only") & (runs["skipped"] > 0)]
    assert len(skipping) == 2 and view.table.value.count("not comparable") == 2
    first = view.picker.options[0][1]
    view.picker.value = first
    opened = view.detail.children[-1]
    assert isinstance(opened, CompareView) and view.selected == first
    assert opened.trace.metadata.title == runs.loc[first, "title"]


def test_the_benchmark_trace_renders() -> None:
    """The widget benchmark's trace shape (speed is measured in benchmarks/bench_widgets.py)."""
    from benchmarks.bench_widgets import big_trace

    view = TraceView(big_trace(rounds=5, calls=8))
    assert len(view.panels) == 6 and view.panels[0].value.count("class='tcl-call ") == 8
    assert "text/html" in view._repr_mimebundle_()


def test_plots_display_once_in_a_fresh_kernel_whatever_ran_before() -> None:
    """The issue's bug: Figures made without pyplot showed as '<Figure size ...>' text."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook

    setup = (
        "from toolcall_lab import plotting\nfrom toolcall_lab.analysis import compare\n"
        "from toolcall_lab.scenarios import SCENARIOS\nt = SCENARIOS['weather_news_stock'].record()\n"
        "table = compare([t, SCENARIOS['straggler'].record()])"
    )
    cells = [
        setup,
        "plotting.gantt(t)",  # last expression: shown once, not twice
        "fig = plotting.time_breakdown(table)",  # assigned: still shown
        "fig",  # shown again in a later cell
        "import matplotlib.pyplot as plt\nplotting.speedup_distribution(table)",  # pyplot imported
    ]
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    images = [sum("image/png" in o.get("data", {}) for o in c.outputs) for c in nb.cells]
    assert images == [0, 1, 1, 1, 1], images
    assert all(o.output_type != "error" for c in nb.cells for o in c.outputs)
    text_only = [o for c in nb.cells for o in c.outputs if "image/png" not in o.get("data", {})]
    assert not any(o.get("data", {}).get("text/plain", "").startswith("<Figure") for o in text_only)


@pytest.mark.skipif(not (REALDATA / "PROVENANCE.md").is_file(), reason="../shared/realdata is absent")
def test_stream_stepper_on_real_anthropic_and_responses_streams() -> None:
    anthropic = StreamStepper(
        REALDATA / "anthropic-sdk-python/messages_stream_claude-sonnet-4_text_then_1_tool_use.sse"
    )
    assert anthropic.format == "anthropic"
    assert anthropic.states[-1][0][0][0]["arguments"] == '{"location": "Paris"}'
    growing = [s[0].get(0, {}).get(0, {}).get("arguments", "") for s in anthropic.states]
    assert growing == sorted(growing, key=len)  # arguments only grow, chunk by chunk
    assert "input_json_delta" in anthropic.view.value  # the delta of each event is shown
    steps = StreamStepper(
        REALDATA / "vercel-ai/openai_responses_gpt-5.1-codex-max_stream_4steps_3_function_calls.chunks.jsonl"
    )
    assert steps.format == "openai-responses" and list(steps.states[-1][0][0]) == [
        0
    ]  # the first response only


@pytest.mark.skipif(not (REALDATA / "PROVENANCE.md").is_file(), reason="../shared/realdata is absent")
def test_real_recording_opens_in_the_trace_view_with_its_model_and_usage() -> None:
    view = TraceView()
    view.open_box.open_path(
        REALDATA / "pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml"
    )
    head = visible_text(view.header.value)
    assert "origin: imported" in head and "gpt-4o" in head


def test_readable_tables_round_and_mark_modes_that_skip_calls() -> None:
    from toolcall_lab.analysis import compare
    from toolcall_lab.notebook.tables import readable

    table = compare([SCENARIOS["weather_news_stock"].record()])
    runs = readable(table.runs)
    first_only = runs[runs["mode"] == "first_only"].iloc[0]
    assert first_only["speedup_vs_sequential"] == "⚠ not comparable (skipped 2)"
    assert runs[runs["mode"] == "parallel"].iloc[0]["speedup_vs_sequential"] == "1.33"
    assert "e-" not in " ".join(runs["overlap_saved_s"]) and table.runs["wall_time_s"].dtype.kind == "f"
    summary = readable(table.summary)
    assert summary.loc["first_only", "median_speedup_vs_sequential"].startswith("⚠ not comparable")

"""Notebook views, tested from Python: traits drive what is rendered, no browser needed.

What only a browser can tell (sizes, contrast as rendered, the stepper's script) is in
tests/test_browser.py.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html import unescape

import pytest

from tests.conftest import DATA, REALDATA, REPO, needs_realdata
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import run, run_sync
from toolcall_lab.notebook.html import fmt, round_spans, summary_table, trace_html
from toolcall_lab.notebook.theme import MODEL, STATUS, TRIP, WAIT
from toolcall_lab.notebook.timeline import RANGES, Axis, items_of, lane_names, secs, timeline_svg
from toolcall_lab.notebook.widgets import CompareView, CorpusView, LiveView, StreamStepper, TraceView, as_doc
from toolcall_lab.records import MODES
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import SCENARIOS
from toolcall_lab.trace import Trace
from toolcall_lab.trace_files import save


@pytest.fixture(scope="module")
def failing():
    return SCENARIOS["failing_and_hanging"].record()


def visible_text(html: str) -> str:
    html = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", "", html))


def replayed(name: str, mode: str, **kwargs) -> dict:
    trace = SCENARIOS[name].record()
    return Trace.from_run(replay(trace, mode, **kwargs), trace.metadata).to_dict()


# --- what the record holds, and nothing else ---------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_bar_is_an_interval_the_record_holds(name, mode) -> None:
    """Model bars from responses, tool bars from executions, client round trips from each round's
    `round_trips` (N-1 per batch), waiting only from a recorded `queued_at`: nothing re-derived."""
    doc = replayed(name, mode, round_trip_s=0.05)
    expected = set()
    for r in doc["rounds"]:
        resp = r["response"]
        expected.add(("model", 0, resp["started_at"], resp["ended_at"]))
        for t in r["round_trips"]:
            expected.add(("trip", t["position"] + 1, t["started_at"], t["ended_at"]))
        for pos, x in enumerate(r["tool_executions"]):
            if x["status"] != "skipped":
                expected.add(("tool", pos + 1, x["started_at"], x["ended_at"]))
                if isinstance(x.get("queued_at"), float) and x["queued_at"] < x["started_at"]:
                    expected.add(("wait", pos + 1, x["queued_at"], x["started_at"]))
    drawn = {(i.kind, i.lane, i.t0, i.t1) for i in items_of(doc["rounds"]) if i.kind != "skipped"}
    assert drawn == expected
    trips = [i for i in items_of(doc["rounds"]) if i.kind == "trip"]
    assert len(trips) == sum(len(r["round_trips"]) for r in doc["rounds"])
    assert all(i.t0 >= 0 for i in items_of(doc["rounds"]))


def test_serialized_round_trips_drawn_as_charged_never_inside_the_model_call() -> None:
    """The tester's case: 4 calls cost 3 round trips (positions 1-3), none before the response."""
    doc = replayed("straggler", "serialized", round_trip_s=0.05)
    r0 = doc["rounds"][0]
    trips = [i for i in items_of([r0]) if i.kind == "trip"]
    assert [i.lane for i in trips] == [2, 3, 4] and len(r0["round_trips"]) == 3
    assert all(i.t0 >= r0["response"]["ended_at"] - 1e-9 for i in trips)
    svg = timeline_svg([r0])
    assert svg.count("tcl-bar-trip") == 3
    from toolcall_lab.plotting import draw_rounds, timeline_figure

    fig = timeline_figure([("serialized", doc["rounds"])], show=False)
    drawn = draw_rounds(fig.axes[0], doc["rounds"], title="again")
    assert sum(i.kind == "trip" for i in drawn) == sum(len(r["round_trips"]) for r in doc["rounds"])


def test_a_gap_nobody_recorded_is_not_drawn_as_queueing() -> None:
    """Uncapped parallel mode on the real clock starts calls a few ms after the response; without
    a recorded `queued_at` that gap stays empty (no 'waiting for a slot')."""
    doc = replayed("weather_news_stock", "parallel")
    for x in doc["rounds"][0]["tool_executions"]:
        x["started_at"] += 0.005
        x.pop("queued_at", None)
    html = timeline_svg(doc["rounds"])
    assert "tcl-bar-wait" not in html and "waiting for a slot" not in visible_text(html)
    doc["rounds"][0]["tool_executions"][2]["queued_at"] = doc["rounds"][0]["response"]["ended_at"]
    doc["rounds"][0]["tool_executions"][2]["started_at"] += 0.3
    html = timeline_svg(doc["rounds"])
    assert html.count("tcl-bar-wait") == 1 and "waiting for a slot (recorded queueing)" in visible_text(html)


def test_trace_view_shows_everything_the_trace_holds(failing) -> None:
    view = TraceView(failing)
    assert len(view.panels) == len(failing.rounds) == 2
    assert view.round_titles[0] == (
        "Round 0 · parallel · 3 calls: get_weather, flaky_api, slow_service · 1.80 s · 2 failed"
    )
    head = visible_text(view.header.value)
    origin = head[head.index("origin: scripted") : head.index("model scripted")]
    assert "a scripted model" in origin and "clock" not in origin  # the clock is not the origin's to say
    assert "model scripted" in head and "mode parallel" in head and "completed / final_answer" in head
    assert "timings: model calls 2 placeholder; tools 3 placeholder; chunk offsets 2 spread" in head
    assert "first chunk" not in head  # offsets spread by the script: no time to first chunk
    assert "Check the weather, the flaky API and the slow service." in head
    assert "3 tools offered: get_weather, flaky_api, slow_service" in head
    panel = view.panels[0]
    for status in ("ok", "error", "timeout"):  # icon and word, not colour alone
        assert f"data-status='{status}'" in panel and f"</span> {status}</span>" in panel
    assert "RuntimeError: 503 Service Unavailable" in panel and "tool message" in panel
    assert "&quot;city&quot;: &quot;Lyon&quot;" in panel  # pretty-printed arguments
    assert "request as sent: 1 message" in panel
    assert "class='tcl-bars'" in panel and "exact times" in panel  # the bars as a table, for keyboards
    second = visible_text(view.panels[1])
    assert "request as sent: 5 messages (1 unchanged from round 0's request, 4 shown)" in second
    view.selected_round = 1
    assert "<details class='tcl-round-panel' data-round='1' open>" in view.panels[1]
    assert " open>" not in view.panels[0].split("<summary")[0]


def test_a_scripted_run_on_the_real_clock_is_labelled_by_its_numbers_not_by_a_guess() -> None:
    s = SCENARIOS["one_tool_round"]
    result = run_sync(s.model(), s.registry(), s.prompt)  # real clock: the tools are measured
    doc = as_doc(result)
    assert doc["metadata"]["origin"] == "scripted"
    head = visible_text(TraceView(result).header.value)
    origin = head[head.index("origin: scripted") : head.index("model ")]
    assert "clock" not in origin and "virtual" not in head  # measured tools say so; nothing says virtual
    assert "model calls 2 recorded; tools 1 recorded" in head  # the script's delays, measured (t15 #5)
    from toolcall_lab.notebook.theme import ORIGIN_NOTE

    assert not [o for o, note in ORIGIN_NOTE.items() if "clock" in note]  # any origin runs on either clock


def test_time_to_first_chunk_only_where_chunk_timing_was_recorded(failing) -> None:
    doc = failing.to_dict()
    assert "first chunk" not in visible_text(trace_html(doc))  # spread by the script
    doc["rounds"][1]["response"]["chunk_timing"] = "recorded"
    html = visible_text(trace_html(doc))
    ttfc = doc["rounds"][1]["response"]["ttfc_s"]
    assert f"round 1: first chunk after {ttfc:.3f} s (placeholder timing)" in html
    doc["rounds"][1]["response"]["chunk_timing"] = "none"
    assert "a whole response (not streamed)" in visible_text(trace_html(doc))


def test_raw_toggle_shows_the_exact_argument_string(failing) -> None:
    view = TraceView(failing)
    assert "{&quot;city&quot;: &quot;Lyon&quot;}" not in view.panels[0]
    view.raw_box.value = True
    assert view.show_raw and "{&quot;city&quot;: &quot;Lyon&quot;}" in view.panels[0]


def test_long_results_are_folded_with_a_preview() -> None:
    doc = SCENARIOS["one_tool_round"].record().to_dict()
    doc["rounds"][0]["tool_executions"][0]["result"] = "x" * 5000
    html = trace_html(doc)
    assert "full result (5,000 characters)" in html and "<details>" in html


def test_call_cards_keep_id_and_duration_on_one_wrapping_line() -> None:
    doc = SCENARIOS["one_tool_round"].record().to_dict()
    doc["rounds"][0]["tool_calls"][0]["tool_call_id"] = "toolu_" + "x" * 80
    doc["rounds"][0]["tool_executions"][0]["tool_call_id"] = "toolu_" + "x" * 80
    card = re.search(r"<li class='tcl-call.*?</li>", trace_html(doc), re.S).group(0)
    head = card[card.index("tcl-call-head") : card.index("<pre class='tcl-args'>")]
    assert "tcl-id" in head and "tcl-dur" in head  # both in the head row, arguments below it


# --- timelines --------------------------------------------------------------------------------


def test_timeline_fills_its_container_with_legend_lanes_and_exact_tooltips(failing) -> None:
    html = timeline_svg(failing.to_dict()["rounds"])
    svg = html[html.index("<svg") : html.index("</svg>") + 6]
    ET.fromstring(svg)  # well-formed
    xs = re.findall(r"<rect class='tcl-bar[^']*'[^>]* x='([^']+)'", svg)
    assert xs and all(x.endswith("%") for x in xs)  # x in percent: sized by the container
    assert re.search(r"<title>flaky_api \(call_0_1\): ✖ error, 0\.200 s, 0\.800 → 1\.000 s", svg)
    lanes = re.findall(r"class='tcl-lane'[^>]*>([^<]+)<", html)
    assert lanes == ["model", "call 1 get_weather", "call 2 flaky_api", "call 3 slow_service"]
    legend = visible_text(html[html.index("tcl-legend") :])
    assert "model call" in legend and "✖ tool error" in legend and "◔ tool timeout" in legend
    for text in re.findall(r"<text[^>]*>([^<]*)</text>", svg):
        assert "…" not in text and "..." not in text  # labels fit or move, never cut


def test_a_lone_round_numbers_its_lanes_so_repeated_tools_stay_apart() -> None:
    r = SCENARIOS["straggler"].record().to_dict()["rounds"][0]
    names = [n for n, _ in lane_names([r], 5)]
    assert names == ["model", "#1 lookup", "#2 lookup", "#3 lookup", "#4 slow_lookup"]


def test_labels_are_laid_out_again_for_wider_containers() -> None:
    """A bar too short for its full label at the narrowest width gets it where the page is wider
    (CSS container queries pick the layout); a label is never cut."""
    doc = SCENARIOS["weather_news_stock"].record().to_dict()
    html = timeline_svg(doc["rounds"], min_px=300)
    texts = re.findall(r"<text class='(tcl-(?:in|out)[^']*)'[^>]*>([^<]*)<", html)
    last = len(RANGES) - 1
    by_range = {
        k: [t for cls, t in texts if f"tcl-r{k}" in cls or "tcl-lbl" not in cls] for k in range(last + 1)
    }
    assert len(by_range[last]) >= len(by_range[0])
    narrow_only = {t for cls, t in texts if "tcl-r0" in cls and f"tcl-r{last}" not in cls}
    wide_only = {t for cls, t in texts if f"tcl-r{last}" in cls and "tcl-r0" not in cls}
    assert narrow_only and wide_only  # some labels change with the width
    assert any(t.startswith("get_") for t in wide_only)  # the tool's name where there is room
    inside = [t for cls, t in texts if cls.startswith("tcl-in")]
    outside = [t for cls, t in texts if cls.startswith("tcl-out")]
    assert inside and outside  # long bars hold their label, short ones have it beside them


def test_a_marker_at_the_end_of_the_axis_stays_inside_the_plot() -> None:
    axis = Axis(0.0, 1.0, 260.0, None)
    x, w = axis.box(1.0, 1.0, 10)
    assert float(x[:-1]) + float(w[:-1]) <= 100.0 + 1e-6
    doc = replayed("weather_news_stock", "first_only")
    html = timeline_svg(doc["rounds"][:1], min_px=260)
    for x, w in re.findall(r"tcl-bar-skipped' x='([\d.]+)%' y='[^']+' width='([\d.]+)%'", html):
        assert float(x) + float(w) <= 100.0 + 1e-6


def test_every_bar_colour_reads_on_light_and_dark_pages() -> None:
    """Bars, outlines and markers at 3:1 against white and JupyterLab Dark's #111111 (WCAG 1.4.11);
    white labels on model and tool bars at 4.5:1."""

    def lum(h: str) -> float:
        c = [int(h[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        f = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * f[0] + 0.7152 * f[1] + 0.0722 * f[2]

    def ratio(a: str, b: str) -> float:
        x, y = sorted((lum(a), lum(b)), reverse=True)
        return (x + 0.05) / (y + 0.05)

    fills = [s.fill for s in STATUS.values()] + [MODEL.fill, TRIP.fill, WAIT.fill]
    for fill in fills:
        assert ratio(fill, "#ffffff") >= 3 and ratio(fill, "#111111") >= 3, fill
    for style in [*(s for k, s in STATUS.items() if k != "skipped"), MODEL]:
        assert ratio(style.fill, style.on_fill) >= 4.5, style


def test_placeholder_bars_keep_a_full_strength_outline_and_selection_is_a_band() -> None:
    doc = replayed("weather_news_stock", "parallel")
    html = timeline_svg(doc["rounds"], highlight=1)
    faint = re.findall(r"<rect class='tcl-bar[^']*tcl-faint'[^>]*>", html)
    assert faint and all("stroke:#" in r for r in faint)  # outline in the bar's own colour
    assert "opacity='0.35'" not in html  # other rounds are not dimmed into looking like placeholders
    assert html.count("class='tcl-band'") == 1
    legend = visible_text(html[html.index("tcl-legend") :])
    assert "selected round (shaded)" in legend
    assert "placeholder timing (a constant, not measured)" in legend and legend.count("placeholder") == 1


def test_round_panels_scale_to_the_round_but_a_zero_second_round_stays_a_sliver() -> None:
    doc = replayed("weather_news_stock", "parallel")
    spans = round_spans(doc["rounds"])
    longest = max(r["response"]["ended_at"] - r["response"]["started_at"] for r in doc["rounds"])
    assert all(s >= longest / 100 for s in spans)
    assert round_spans(doc["rounds"], shared=True) == [max(spans)] * len(spans)
    live = LiveView("t", min_interval_s=0.0)
    s = SCENARIOS["weather_news_stock"]
    run_virtual(run(s.model(), s.registry(), s.prompt, on_event=live.on_event))
    live.rounds[1]["response"]["ended_at"] = live.rounds[1]["response"]["started_at"]  # a ~0 s final round
    live.render()
    last = live.view.value[live.view.value.index("data-round='1'") :]
    width = re.search(r"tcl-bar-model[^>]* width='([\d.]+)%'", last)
    assert width and float(width.group(1)) < 5
    view = TraceView(SCENARIOS["two_tool_rounds"].record())
    view.scale_box.value = True
    assert view._spans == [max(view._spans)] * len(view._spans)


# --- compare view ---------------------------------------------------------------------------------


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
    assert "first_only: ⚠ not comparable (skipped 2 of 3 calls)" in summary and "2.29x" not in summary
    assert "replayed" in summary and "from a scripted trace" in summary
    assert view.details.value.count("class='tcl-panel'") == 4
    assert not re.search(r"style='[^']*\bwidth:420px", view.details.value)  # no fixed-width panels
    assert "tcl-grid-panels" in view.details.value


def test_compare_view_concurrency_cap_and_bad_settings() -> None:
    view = CompareView(SCENARIOS["multi_angle_search"].record(), modes=("parallel",))
    assert view.rows[0]["wall_time_s"] == pytest.approx(0.8 + 0.6 + 0.8)
    assert view.cap_box.value == "" and view.cap_box.placeholder == "none"  # no cap: not a 0
    view.cap_box.value = "2"
    assert view.rows[0]["wall_time_s"] == pytest.approx(0.8 + 1.2 + 0.8)
    queued = [
        x for r in view.results["parallel"]["rounds"] for x in r["tool_executions"] if x.get("queued_at")
    ]
    waits = view.timelines.value.count("tcl-bar-wait")
    assert waits == sum(x["queued_at"] < x["started_at"] for x in queued)  # drawn only where recorded
    before = view.summary.value
    with pytest.raises(Exception, match=r"concurrency=-1: must be an integer >= 1, or None for no cap"):
        view.concurrency = -1
    assert view.concurrency == 2 and view.summary.value == before and view.errors.outputs == ()


def test_compare_view_starts_empty_and_opens_any_file(tmp_path, failing) -> None:
    view = CompareView()
    assert "open a trace file" in visible_text(view.summary.value)
    view.open_box.path.value = str(save(failing, tmp_path / "t.json"))  # Enter in the box
    assert "One failing and one hanging" in view.summary.value and len(view.rows) == 4


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
            "comparable": False,
        },
    ]
    html = summary_table(rows)
    assert "not comparable (skipped 1 of 3 calls)" in html and "2.29x" not in html


# --- stream stepper -----------------------------------------------------------------------------


def test_stream_stepper_frames_show_the_delta_what_it_appended_and_findings() -> None:
    stepper = StreamStepper(DATA / "recordings" / "scripted_weather_news_stock.sse")
    n = len(stepper.chunks) + 1  # every chunk, then the [DONE] line: each a step
    assert stepper.states.lines[-1].kind == "done"
    assert stepper.last_step == n and stepper.view.value.count("class='tcl-frame'") == 1
    assert stepper.states.snapshot(3)[0][0]["arguments"] == ""
    assert stepper.states.snapshot(4)[0][0]["arguments"] == '{"city"'
    stepper.step = 4
    frame = stepper.view.value[stepper.view.value.index("<div class='tcl-frame'") :]
    assert "data-frame='4'" in frame[:60]
    assert (
        "choice 0 delta:" in frame
        and "<mark class='tcl-added' title='added by this chunk'>{&quot;city&quot;</mark>" in frame
    )
    for control in ("tcl-first", "tcl-prev", "tcl-play", "tcl-next", "tcl-last"):
        assert f'class="{control}"' in stepper.view.value
    assert 'type="range"' in stepper.view.value and "onclick=" in stepper.view.value
    stepper.step = 10_000  # clamped to the last step: after finish()
    assert stepper.step == n and "after the last chunk" in stepper.view.value


def test_the_stepper_edits_rebuild_every_state_of_the_accumulator() -> None:
    """The page rebuilds each step from the edits; replayed in Python (the same rules), they give
    the accumulator's own snapshot at every chunk."""
    from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator
    from toolcall_lab.formats.recordings import read_recording
    from toolcall_lab.notebook.stream import StreamStates

    chunks = list(
        read_recording(DATA / "recordings" / "scripted_weather_news_stock.sse").exchanges[0].payloads
    )
    states = StreamStates.build(chunks)
    acc = ChatCompletionAccumulator(batch=0)
    for i, chunk in enumerate(chunks):
        acc.feed(chunk)
        want = {  # (the parser's verdict, `state`, comes with the last step only)
            ci: {k: {**{f: v or "" for f, v in c.items()}, "state": ""} for k, c in calls.items()}
            for ci, calls in acc.snapshot().items()
        }
        assert states.snapshot(i) == {
            ci: calls for ci, calls in want.items() if calls or ci in states.snapshot(i)
        }


def test_stepper_output_grows_with_the_stream_not_its_square() -> None:
    """The tester's case: 1,000 chunks with ~20 KB of arguments made 12 MB of HTML."""

    def stream(n: int) -> list[dict]:
        head = {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "write", "arguments": ""},
        }
        piece = '"' + "x" * 18 + '",'
        return [{"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]}] + [
            {
                "choices": [
                    {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}}
                ]
            }
            for _ in range(n)
        ]

    small, large = (len(StreamStepper(stream(n)).view.value) for n in (250, 1000))
    assert large / small < 4.6  # linear: 4x the chunks, about 4x the bytes (quadratic would be 16x)
    assert large < 1_500_000


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


@needs_realdata
def test_stream_stepper_on_real_anthropic_and_responses_streams() -> None:
    anthropic = StreamStepper(
        REALDATA / "anthropic-sdk-python/messages_stream_claude-sonnet-4_text_then_1_tool_use.sse"
    )
    assert anthropic.format == "anthropic"
    states = anthropic.states
    assert states.snapshot(len(states) - 1)[0][0]["arguments"] == '{"location": "Paris"}'
    growing = [states.snapshot(i).get(0, {}).get(0, {}).get("arguments", "") for i in range(len(states))]
    assert growing == sorted(growing, key=len)  # arguments only grow, chunk by chunk
    assert "input_json_delta" in anthropic.view.value  # the delta of each event is shown
    steps = StreamStepper(
        REALDATA / "vercel-ai/openai_responses_gpt-5.1-codex-max_stream_4steps_3_function_calls.chunks.jsonl"
    )
    assert steps.format == "openai-responses" and len(steps.streams) == 4  # four responses, one chooser
    assert "stream 1 of 4" in visible_text(steps.view.value)
    steps.chooser.value = 2
    assert steps.stream == 2 and steps.step == 0 and "stream 3 of 4" in visible_text(steps.view.value)


@needs_realdata
def test_stream_stepper_on_a_cassette_with_several_exchanges_and_a_mid_stream_error() -> None:
    cassette = StreamStepper(
        REALDATA / "pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml"
    )
    assert len(cassette.streams) == 3 and "stream 1 of 3 in this file" in visible_text(cassette.view.value)
    cassette.stream = 1
    assert cassette.chunks == cassette.streams[1][1]
    groq = StreamStepper(
        REALDATA / "pydantic-ai/groq_chat_stream_gpt-oss-120b_midstream_error_event_tool_use_failed.sse"
    )
    assert groq.states.error and "Tool call validation failed" in groq.states.error
    groq.step = groq.last_step - 1  # the chunk that carried the error
    text = visible_text(groq.view.value)
    assert "the provider reported an error here" in text and "provider_error" in text


# --- live view ----------------------------------------------------------------------------------


def test_live_view_follows_a_run_with_the_labels_the_run_gave() -> None:
    live = LiveView("test", min_interval_s=0.0)
    s = SCENARIOS["weather_news_stock"]
    result = run_virtual(run(s.model(), s.registry(), s.prompt, on_event=live.on_event))
    assert live.n_events == len(result.events)
    assert len(live.rounds) == 2 and live.final == result.final_answer
    assert live.view.value.count("class='tcl-call ") == 3 and "final answer" in live.view.value
    assert "completed / final_answer" in live.view.value
    assert "<div class='tcl-live-timeline'><div class='tcl-tl'>" in live.view.value  # its own block
    text = visible_text(live.view.value)
    assert "origin: live" not in text  # events carry no origin
    chunks = [len(r.model_call.chunks) for r in result.rounds]
    assert f"{chunks[0]} chunks (offsets spread evenly, not recorded)" in text  # as many as recorded
    assert "first chunk" not in text  # spread offsets: no time to first chunk
    models = re.findall(r"tcl-bar-model[^']*' data-provenance='(\w+)'", live.view.value)
    assert models and set(models) == {"placeholder"}  # as the trace of the same run says
    assert "tcl-bar-wait" not in live.view.value


def test_a_second_run_fed_to_a_live_view_starts_a_new_display() -> None:
    live = LiveView("two", min_interval_s=0.0)
    s = SCENARIOS["weather_news_stock"]
    for _ in range(2):
        run_virtual(run(s.model(), s.registry(), s.prompt, on_event=live.on_event))
    assert len(live.earlier) == 1 and len(live.rounds) == 2
    text = visible_text(live.view.value)
    assert "two · run 1" in text and "two · run 2" in text
    assert live.view.value.count("class='tcl-call ") == 2 * 3  # each run's three calls, none merged
    assert live.view.value.count("class='tcl-earlier-run'") == 1
    live.reset()
    assert not live.earlier and not live.rounds and "waiting for events" in live.view.value


# --- opening files ---------------------------------------------------------------------------------


def test_views_open_files_and_report_bad_ones(tmp_path, failing) -> None:
    view = TraceView()
    view.open_box.open_path(tmp_path / "nope.json")
    msg = visible_text(view.open_box.message.value)
    assert "cannot open" in msg and "no such file or folder" in msg and msg.count("nope.json") == 1
    (tmp_path / "empty.json").write_text("")
    view.open_box.open_path(tmp_path / "empty.json")
    assert "the file is empty" in visible_text(view.open_box.message.value)
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "metadata": {}, "rounds": []}')
    view.open_box.open_path(bad)
    assert "metadata.origin: missing" in view.open_box.message.value and view.errors.outputs == ()
    good = save(failing, tmp_path / "good.json")
    view.open_box.path.value = str(good)  # Enter in the box opens it
    assert len(view.panels) == 2 and "One failing and one hanging" in view.header.value
    assert "opened good.json as trace: 1 trace" in visible_text(view.open_box.message.value)
    view.open_box.open_path(DATA / "recordings" / "scripted_weather_news_stock.sse")  # a recording
    assert "as recording" in visible_text(view.open_box.message.value)
    assert "origin: imported" in view.header.value
    view.open_box._uploaded({"new": [{"name": "good.json", "content": good.read_bytes()}]})
    assert "opened good.json" in view.open_box.message.value
    folder = TraceView()
    folder.open_box.open_path(DATA / "traces")  # a folder of trace files
    assert len(folder.traces) == len(list((DATA / "traces").glob("*.json"))) and folder.choice.value == 0
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    save(failing, mixed / "a.json")
    (mixed / "b.sse").write_bytes((DATA / "recordings" / "scripted_weather_news_stock.sse").read_bytes())
    folder.open_box.open_path(mixed)  # a folder of two kinds: the other one is named, not dropped
    msg = visible_text(folder.open_box.message.value)
    assert "opened mixed as trace: 1 trace" in msg and "b.sse (looks like recording)" in msg


def test_a_file_with_several_traces_gets_a_chooser_in_both_views(tmp_path) -> None:
    folder = tmp_path / "two"
    folder.mkdir()
    save(SCENARIOS["one_tool_round"].record(), folder / "a.json")
    save(SCENARIOS["straggler"].record(), folder / "b.json")
    view = TraceView()
    view.open_box.open_path(folder)
    assert view.choice.value == 0 and view.choice.layout.display is None
    view.choice.value = 1
    assert "A batch with one slow straggler" in view.header.value and view.trace_index == 1
    compare = CompareView()
    compare.open_box.open_path(folder)
    assert compare.trace_box.layout.display is None and compare.trace_box.value == 0
    compare.trace_box.value = 1
    assert compare.trace.metadata.title == "A batch with one slow straggler"
    assert "A batch with one slow straggler" in compare.summary.value


def test_the_otlp_fixture_is_detected_and_its_report_shown() -> None:
    view = TraceView()
    view.open_box.open_path(REPO / "tests" / "fixtures" / "otlp" / "genai_semconv_parallel_tools.json")
    msg = visible_text(view.open_box.message.value)
    assert "as otlp" in msg and "tool calls:" in msg and " imported" in msg and view.doc


@needs_realdata
@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (
            "claude-code-viewer/claude-code_v1.0.98_sonnet-4_session-fe5e1c67_170calls_sidechains_parallel2+3+2.jsonl",
            "claude-code",
        ),
        (
            "claude-reliability/claude-code_v2.1.14_opus-4-5_coverage-test-fix_14calls_parallel2x2.jsonl",
            "claude-code",
        ),
        ("OpenHands/openhands_claude-3-5-sonnet_basic_gui_mode_event_stream.json", "openhands"),
        (
            "OpenHands/openhands_codeact_llama-4-maverick_multi-swe-bench_3episodes_response_latencies.jsonl",
            "openhands",
        ),
        (
            "SWE-agent/sweagent_replay_marshmallow-1867_function_calling_11steps_execution_time.traj",
            "swe-agent",
        ),
        (
            "inspect_ai/inspect_log_gpt-4o-mini_browser_agent_5_model_calls_with_raw_api_and_timings.json",
            "inspect",
        ),
        ("agent-prism/otlp_json_openinference_smolagents_o1_6_llm_spans.json", "otlp"),
        ("agent-prism/langfuse_trace_export_vercel-ai_gpt-5_tool_call_inside_stream.json", "langfuse"),
        ("bfcl/BFCL_v4_live_parallel.jsonl", "bfcl"),
        ("tau-bench/historical_trajectories_gpt-4o-airline.json", "tau-bench"),
        ("pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml", "recording"),
        ("claude-code-viewer", "claude-code"),
    ],
)
def test_the_file_box_opens_what_the_importers_read(path, kind) -> None:
    from toolcall_lab.notebook.loading import open_source

    opened = open_source(REALDATA / path)
    assert (
        opened.kind == kind and opened.traces and opened.report.imported_calls == opened.report.source_calls
    )


@needs_realdata
def test_the_file_box_shows_what_an_import_lost_by_file_and_line(tmp_path) -> None:
    """The tester's truncated transcript: the CLI exits 1 naming the line; the view must too."""
    src = (
        REALDATA / "claude-code-viewer/claude-code_v1.0.98_sonnet-4_session-1af7fc5e_7calls_parallel5+3.jsonl"
    )
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = len(lines) // 2
    truncated = tmp_path / "truncated_cc.jsonl"
    truncated.write_text(
        "".join(lines[:cut]) + lines[cut][: len(lines[cut]) // 2] + "\n" + "".join(lines[cut + 1 :])
    )
    view = TraceView()
    view.open_box.open_path(truncated)
    msg = visible_text(view.open_box.message.value)
    assert "imported with losses" in msg and f"line {cut + 1}" in msg and "not represented" in msg


# --- export ---------------------------------------------------------------------------------------


def test_views_export_svg_png_and_csv_named_after_what_they_show(tmp_path, failing) -> None:
    view = CompareView(failing)
    view.export.folder.value = str(tmp_path)
    (svg,) = view.export.save("svg")
    root = ET.parse(svg).getroot()
    title = root.find("{http://www.w3.org/2000/svg}title").text
    assert "One failing and one hanging" in title and "compare" in svg.name
    (png,) = view.export.save("png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    summary, calls = view.export.save("csv")
    assert summary.read_text().splitlines()[0].startswith("trace,mode,")
    assert "flaky_api" in calls.read_text()
    assert not re.search(
        r"\d\.\d*9999999|\d\.\d*0000000\d", summary.read_text() + calls.read_text()
    )  # no float noise


def test_exports_never_overwrite_and_an_empty_view_saves_nothing(tmp_path) -> None:
    long_a = "claude-code session fe5e1c67 " + "x" * 80 + " main turn 1"
    long_b = "claude-code session fe5e1c67 " + "x" * 80 + " main turn 2"
    paths = []
    for title in (long_a, long_b, long_a):
        trace = SCENARIOS["one_tool_round"].record()
        view = TraceView(trace)
        view.doc["metadata"]["title"] = title
        view.export.folder.value = str(tmp_path)
        paths += view.export.save("csv")
    assert len({p.name for p in paths}) == 3 and all(p.exists() for p in paths)
    empty = TraceView()
    empty.export.folder.value = str(tmp_path / "empty")
    empty.export._save("svg")
    empty.export._save("csv")
    assert "nothing to save" in empty.export.message.value and not (tmp_path / "empty").exists()


# --- corpus view ---------------------------------------------------------------------------------


def test_corpus_view_sorts_every_column_and_opens_a_row(tmp_path) -> None:
    for name in ("weather_news_stock", "straggler", "one_tool_round"):
        save(SCENARIOS[name].record(), tmp_path / f"{name}.json")
    (tmp_path / "broken.json").write_text("{not json")
    view = CorpusView(tmp_path, ["sequential", "parallel", "first_only"])
    runs = view.comparison.runs
    assert set(runs.columns) <= set(view.sort_box.options) and len(runs) == 9
    assert "broken.json" in view.problems.value and "not valid JSON" in view.problems.value
    cells = [
        visible_text(c)
        for c in re.findall(r"<td class='tcl-left tcl-name' title='[^']*'>(.*?)</td>", view.table.value)
    ]
    assert "straggler.json" in cells and str(tmp_path) not in " ".join(cells)  # short, full in the tooltip
    view.sort_box.value = "wall_time_s"
    view.order_box.value = True
    shown = [int(i) for i in re.findall(r"<tr class='[^']*'><td>(\d+)</td>", view.table.value)]
    walls = [runs.loc[i, "wall_time_s"] for i in shown]
    assert walls == sorted(walls, reverse=True)
    view.sort_box.value = "speedup_vs_sequential"
    top = int(re.findall(r"<tr class='[^']*'><td>(\d+)</td>", view.table.value)[0])
    assert runs.loc[top, "comparable"]  # a run that is not comparable never tops the speedup ranking
    view.mode_box.value = "first_only"
    skipping = runs[(runs["mode"] == "first_only") & ~runs["comparable"]]
    assert len(skipping) == 2 and view.table.value.count("not comparable") == 2
    first = view.picker.options[0][1]
    view.picker.value = first
    opened = view.detail.children[-1]
    assert isinstance(opened, CompareView) and view.selected == first
    assert opened.trace.metadata.title == runs.loc[first, "title"]
    # keyboard: a row number (Enter) and next / previous in the order shown
    view.mode_box.value = "all modes"
    view.row_box.value = int(shown[0])
    assert view.selected == shown[0]
    view.next_button.click()
    order = [int(i) for i in view.rows().index]
    assert view.selected == order[order.index(shown[0]) + 1]


# --- static copies, plots in a real kernel, HTML export --------------------------------------------


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """One notebook run in a real kernel: plots, views, a live view fed after it was shown."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook

    setup = (
        "from toolcall_lab import plotting\nfrom toolcall_lab.analysis import compare\n"
        "from toolcall_lab.scenarios import SCENARIOS\nfrom toolcall_lab.loop import run\n"
        "from toolcall_lab.notebook.widgets import TraceView, LiveView\n"
        "t = SCENARIOS['weather_news_stock'].record()\n"
        "table = compare([t, SCENARIOS['straggler'].record()])"
    )
    cells = [
        setup,
        "plotting.gantt(t)",  # last expression: shown once, not twice
        "fig = plotting.time_breakdown(table)",  # assigned: still shown
        "fig",  # shown again in a later cell
        "import matplotlib.pyplot as plt\nplotting.speedup_distribution(table)",  # pyplot imported
        "TraceView(t)",
        "live = LiveView('live'); live",
        "s = SCENARIOS['one_tool_round']\nawait run(s.model(), s.registry(), s.prompt, on_event=live.on_event);",
    ]
    nb = new_notebook(
        cells=[new_code_cell(c) for c in cells],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=True).execute()
    return nb


def test_plots_display_once_in_a_fresh_kernel_whatever_ran_before(executed) -> None:
    """The issue's bug: Figures made without pyplot showed as '<Figure size ...>' text."""
    images = [sum("image/png" in o.get("data", {}) for o in c.outputs) for c in executed.cells[:5]]
    assert images == [0, 1, 1, 1, 1], images
    assert all(o.output_type != "error" for c in executed.cells for o in c.outputs)
    text_only = [o for c in executed.cells for o in c.outputs if "image/png" not in o.get("data", {})]
    assert not any(o.get("data", {}).get("text/plain", "").startswith("<Figure") for o in text_only)


def test_each_view_prints_a_current_static_copy_after_itself(executed) -> None:
    view_cell = executed.cells[5]
    kinds = [tuple(sorted(o.get("data", {}))) for o in view_cell.outputs]
    assert kinds == [
        ("application/vnd.jupyter.widget-view+json", "text/plain"),
        ("text/html", "text/plain"),
    ]
    assert "tcl-static" in view_cell.outputs[1]["data"]["text/html"]
    live_copy = executed.cells[6].outputs[1]["data"]["text/html"]
    assert "completed / final_answer" in live_copy and "waiting for events" not in live_copy  # kept current


def test_an_html_export_without_the_widget_javascript_shows_the_static_copies(executed) -> None:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(executed)
    assert body.count("tcl-static") >= 2 and "Weather, news and stock in one batch" in body
    # the page hides a static copy only next to a widget that rendered (`.tcl-view`)
    assert ".jp-OutputArea-child:has(.tcl-view)+.jp-OutputArea-child:has(.tcl-static)" in body


def test_the_benchmark_trace_renders() -> None:
    """The widget benchmark's trace shape (speed is measured in benchmarks/bench_widgets.py)."""
    from benchmarks.bench_widgets import big_trace

    view = TraceView(big_trace(rounds=5, calls=8))
    assert len(view.panels) == 6 and view.panels[0].count("class='tcl-call ") == 8
    assert view.static_html()


@needs_realdata
def test_real_recording_opens_in_the_trace_view_with_its_model_and_usage() -> None:
    view = TraceView()
    view.open_box.open_path(
        REALDATA / "pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml"
    )
    head = visible_text(view.header.value)
    assert "origin: imported" in head and "gpt-4o" in head


# --- tables and figures: rounded, comparable, honest about estimates -------------------------------


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


def test_corpus_figures_say_what_they_rest_on_weighed_by_seconds() -> None:
    from toolcall_lab import plotting
    from toolcall_lab.analysis import compare

    table = compare([SCENARIOS["weather_news_stock"].record(), SCENARIOS["straggler"].record()])
    fig = plotting.speedup_distribution(table, show=False)
    assert "100 % of these seconds are estimated or placeholders" in fig.axes[0].get_title()
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert any("first_only" in t and "not comparable" in t for t in labels)
    runs = table.runs.copy()
    runs["measured_share"] = 1.0  # every second recorded, but 0 s placeholders: the traces rest on them
    assert plotting._evidence(runs).endswith("2 of 2 traces rest on estimated or placeholder durations")
    runs["trace_timing_evidence"] = "recorded"
    assert plotting._evidence(runs) == "timings: all recorded or reported"
    fig = plotting.time_breakdown(table, show=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    legend = fig.legends[0].get_window_extent(renderer)
    assert not legend.overlaps(fig.axes[0].get_window_extent(renderer))  # never over the bars


def test_the_notebooks_match_their_sources() -> None:
    """`make notebooks` writes notebooks/*.ipynb from notebooks/src; they must not drift apart."""
    import importlib
    import sys

    sys.path.insert(0, str(REPO / "notebooks"))
    try:
        make = importlib.import_module("make_notebooks")
        for name, module in make.NOTEBOOKS.items():
            built = make.build(name, module)
            stored = json.loads((REPO / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
            sources = [
                c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in stored["cells"]
            ]
            want = [c["source"] for c in built.cells]
            if sources and want and make.OUTPUT_NOTE in sources[0]:
                sources[0] = sources[0].replace("\n\n" + make.OUTPUT_NOTE, "")
            assert sources == want, f"{name}: run `make notebooks`"
    finally:
        sys.path.remove(str(REPO / "notebooks"))


def test_stored_notebook_outputs_come_from_bundled_data_only() -> None:
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        assert "shared/realdata" not in text.replace("../shared/realdata", ""), path.name
        assert str(REPO) not in text and "/work/" not in text, f"{path.name} stores a machine path"


@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_live_view_draws_each_model_call_from_its_own_times_as_a_trace_view_does(clock) -> None:
    """The round text and the bar say the same duration, from the model call's recorded start and
    end (not from when the round started), and a trace of the same run draws the same bars."""
    import asyncio

    live = LiveView("live", mode="sequential", min_interval_s=0.0)
    s = SCENARIOS["three_tools_100ms"]
    go = run(s.model(), s.registry(), s.prompt, mode="sequential", on_event=live.on_event)
    result = run_virtual(go) if clock == "virtual" else asyncio.run(go)
    doc = as_doc(result)
    for r, recorded in zip((live.rounds[k] for k in sorted(live.rounds)), doc["rounds"], strict=True):
        for key in ("started_at", "ended_at"):
            assert r["response"][key] == recorded["response"][key]
    html = live.view.value
    bars = re.findall(r"<title>round (\d+) model call[^:]*: ([\d.]+) s, ([\d.]+) → ([\d.]+) s", html)
    assert bars
    for index, _dur, t0, t1 in bars:
        call = result.rounds[int(index)].model_call
        assert float(t0) == pytest.approx(call.started_at, abs=1e-3)
        assert float(t1) == pytest.approx(call.ended_at, abs=1e-3)
    said = re.findall(r"model (\d[\d.]* (?:ms|µs|ns|s))", visible_text(html))
    drawn = {f"model {secs(c.model_call.latency_s)}" for c in result.rounds}
    assert said and {f"model {t}" for t in said} <= drawn | {"model 0 s"}
    trace_view = TraceView(doc)
    starts = r"tcl-bar-model[^>]*x='([\d.]+)%'"  # both views' whole-run timelines, one axis
    mine = re.findall(starts, html.split("tcl-live-timeline")[1].split("tcl-round")[0])
    theirs = re.findall(starts, trace_view.header.value)
    assert mine and len(mine) == len(theirs)
    for a, b in zip(mine, theirs, strict=True):  # a marker at the very end moves left by its min width
        assert float(a) == pytest.approx(float(b), abs=0.5)


def test_a_view_saves_as_a_standalone_html_page(tmp_path) -> None:
    """`view.save_html(path)`: the static copy with its stylesheet, never over an earlier file; the
    stepper's page keeps its script, so it steps in a browser without a kernel."""
    view = TraceView(SCENARIOS["weather_news_stock"].record())
    first = view.save_html(tmp_path / "trace.html", title="weather")
    second = view.save_html(tmp_path / "trace.html")
    assert first.name == "trace.html" and second.name == "trace-2.html"
    page = first.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<title>weather</title>" in page
    assert "--tcl-fg" in page and "get_weather" in page and "tcl-timeline" in page
    stepper = StreamStepper(DATA / "recordings" / "scripted_weather_news_stock.sse")
    assert "onclick=" in stepper.save_html(tmp_path / "stepper.html").read_text(encoding="utf-8")


def test_the_stepper_last_step_says_only_what_finish_did() -> None:
    """Fallback ids are mentioned only when a call arrived without one, and name the ids given."""
    from toolcall_lab.notebook.stream import StreamStates, frame_html

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def stream(with_id: bool) -> list[dict]:
        call = {"index": 0, "type": "function", "function": {"name": "get_weather", "arguments": ""}}
        if with_id:
            call["id"] = "call_abc"
        return [
            chunk({"role": "assistant", "tool_calls": [call]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]}),
            chunk({}, "tool_calls"),
        ]

    with_id = StreamStates.build(stream(True))
    text = visible_text(frame_html(with_id, len(with_id) - 1))
    assert "finalised 1 call, each with the id the provider sent" in text and "fallback" not in text
    without = StreamStates.build(stream(False))
    text = visible_text(frame_html(without, len(without) - 1))
    assert "1 arrived without an id and got a fallback id" in text
    assert json.loads(without.data())["e"] == without.finish_note  # the page's script says the same


def test_compare_view_cap_box_reads_blank_as_no_cap_and_refuses_words() -> None:
    view = CompareView(SCENARIOS["multi_angle_search"].record(), modes=("parallel",), concurrency=2)
    assert view.cap_box.value == "2" and view.concurrency == 2
    view.cap_box.value = ""
    assert view.concurrency is None and view.rows[0]["wall_time_s"] == pytest.approx(0.8 + 0.6 + 0.8)
    view.cap_box.value = "three"
    assert view.concurrency is None and view.cap_box.value == ""
    with pytest.raises(Exception, match="whole number of calls at once >= 1"):  # what the error area shows
        view._cap_typed({"new": "-1"})
    view.concurrency = 3
    assert view.cap_box.value == "3"


def test_a_failed_strategy_run_says_how_it_ended_in_every_view() -> None:
    """`run_rows`' status, reason, comparable and not_comparable_why reach the summary table, the
    panel headers, the whole-run headers and the Gantt titles; the summary fits a 1280 px page by
    keeping reasons under it (all columns: `view.table`)."""
    from toolcall_lab.plotting import gantt
    from toolcall_lab.strategies import Batch, Strategy

    class Broken(Strategy):
        name = "broken"

        async def run(self, batch: Batch) -> None:
            await batch.run(0)
            raise ValueError("oops")

    trace = SCENARIOS["weather_news_stock"].record()
    view = CompareView(trace, modes=("sequential", Broken()))
    summary = visible_text(view.summary.value)
    assert "⚠ failed" in summary and "the strategy failed (strategy_error)" in summary
    assert "broken: ⚠ not comparable (" in summary
    timelines = visible_text(view.timelines.value)
    assert "ended failed / strategy_error" in timelines and "not comparable" in timelines
    assert "ended failed / strategy_error" in visible_text(view.details.value)
    table = view.table
    assert {"status", "reason", "comparable", "not_comparable_why"} <= set(table.columns)
    assert list(table["comparable"]) == [True, False]
    assert view.summary.value.count("<th") <= 9  # the few columns that fit; the rest in .table
    fig = gantt(trace, ("sequential", Broken()), show=False)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert any("ended failed / strategy_error" in t for t in titles)

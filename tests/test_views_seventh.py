"""Views, seventh pass (issue 15, the f15 tester's findings): a status is never derived from an
incomplete record as if it were complete (a live round in progress, a cut-off run, a closing round
an importer added), the live view's throttle always draws the last event, and its refusal of
interleaved runs shows no merged counts."""

from __future__ import annotations

import asyncio
import re

from tests.test_widgets import visible_text
from toolcall_lab import ScriptedModel, ScriptedResponse, ToolRegistry, Trace, TraceMetadata, run
from toolcall_lab.notebook.html import round_title
from toolcall_lab.notebook.widgets import LiveView, TraceView


def _titles(html: str) -> list[str]:
    return re.findall(r"Round \d+[^<]*", html)


def _gated_tools(gate: asyncio.Event) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    async def wait(n: int) -> str:
        """Waits until the test opens the gate."""
        await gate.wait()
        return f"done {n}"

    return tools


# --- 1: a round in progress says so -------------------------------------------------------------------


def test_a_live_round_in_progress_is_never_final_answer_ok_or_skipped() -> None:
    """f15 #1: at each event of a running round the view said "no calls · final answer", then
    "1 call · ok, 1 skipped", while both calls were still running."""
    seen: dict[str, str] = {}

    async def main() -> None:
        gate = asyncio.Event()
        live = LiveView("x", min_interval_s=0.0)

        def on(event):  # the title the view draws right after each event
            live.on_event(event)
            key = f"{event.kind}:{getattr(event, 'round_index', '')}"
            seen.setdefault(
                key, " | ".join(_titles(live.view.value)) + " || " + visible_text(live.view.value)
            )

        model = ScriptedModel(
            [ScriptedResponse(tool_calls=(("wait", {"n": 1}), ("wait", {"n": 2}))), "the answer"]
        )
        task = asyncio.create_task(run(model, _gated_tools(gate), "go", mode="parallel", on_event=on))
        for _ in range(50):
            await asyncio.sleep(0.01)
            if sum(k.startswith("action") for k in seen) and len(live.rounds[0]["tool_calls"]) == 2:
                break
        mid = visible_text(live.view.value)
        title = _titles(live.view.value)[0]
        assert "2 calls running" in title and not re.search(r"\bok\b|skipped|final answer", title), title
        assert "running · round 0: 2 calls running" in mid
        assert "running: no result yet" in mid
        gate.set()
        await task
        end = _titles(live.view.value)
        assert end[0].endswith("· ok") and end[1].endswith("final answer"), end

    asyncio.run(main())
    for key in ("round_started:0", "model_request:0", "round_started:1"):
        title = seen[key].split(" || ")[0].split(" | ")[-1]
        assert title.endswith("waiting for the model"), (key, title)
    assert "final answer" not in seen["model_request:0"].split(" || ")[0]
    assert "2 calls" in seen["model_response:0"].split(" | ")[0]


def test_sequential_calls_not_started_yet_are_counted_as_such() -> None:
    """Under sequential a call's ACTION comes when it starts: the second call is "not started yet",
    never "skipped"."""

    async def main() -> str:
        gate = asyncio.Event()
        live = LiveView("x", min_interval_s=0.0)
        model = ScriptedModel([ScriptedResponse(tool_calls=(("wait", {"n": 1}), ("wait", {"n": 2}))), "ok"])
        task = asyncio.create_task(
            run(model, _gated_tools(gate), "go", mode="sequential", on_event=live.on_event)
        )
        for _ in range(50):
            await asyncio.sleep(0.01)
            if live.rounds and live.rounds[0]["tool_calls"]:
                break
        title = _titles(live.view.value)[0]
        gate.set()
        await task
        return title

    title = asyncio.run(main())
    assert title.startswith("Round 0 · 2 calls") and title.endswith("1 call running, 1 not started yet"), (
        title
    )


def test_the_throttle_draws_the_last_event_of_a_burst() -> None:
    """f15 #1: with the default throttle the view stayed on "3 events … final answer" while the
    tools ran: the events of a burst after the first were never drawn. A trailing redraw comes
    `min_interval_s` after the burst."""

    async def main() -> tuple[str, str]:
        gate = asyncio.Event()
        live = LiveView("x", min_interval_s=0.05)
        model = ScriptedModel([ScriptedResponse(tool_calls=(("wait", {"n": 1}), ("wait", {"n": 2}))), "ok"])
        task = asyncio.create_task(
            run(model, _gated_tools(gate), "go", mode="parallel", on_event=live.on_event)
        )
        for _ in range(100):  # both calls started (their ACTIONs came in one burst)
            await asyncio.sleep(0.01)
            if live.rounds and len(live.rounds[0]["tool_calls"]) == 2:
                break
        await asyncio.sleep(0.3)  # the trailing redraw is due after 0.05 s
        mid = live.view.value
        gate.set()
        await task
        return mid, live.view.value

    mid, end = asyncio.run(main())
    assert "2 calls running" in _titles(mid)[0], _titles(mid)
    assert "completed / final_answer" in visible_text(end)


# --- 1: a cut-off run and an added closing round -------------------------------------------------------


def test_a_cut_off_round_with_a_cancelled_call_is_not_ok() -> None:
    """A run cancelled while one call ran: that call is ``cancelled``, the round is not "ok"."""

    async def main():
        gate = asyncio.Event()
        tools = _gated_tools(gate)

        @tools.register
        async def quick() -> str:
            """Returns at once."""
            return "q"

        model = ScriptedModel([ScriptedResponse(tool_calls=(("wait", {"n": 1}), ("quick", {}))), "ok"])
        task = asyncio.create_task(run(model, tools, "go", mode="parallel"))
        await asyncio.sleep(0.1)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as exc:
            return exc.partial_result  # type: ignore[attr-defined]
        raise AssertionError("the run was not cut off")

    result = asyncio.run(main())
    doc = Trace.from_run(result, TraceMetadata(title="cut", origin="scripted")).to_dict()
    assert [x["status"] for x in doc["rounds"][0]["tool_executions"]] == ["cancelled", "ok"]
    title = round_title(doc["rounds"][0])
    assert title.endswith("1 ok, 1 cancelled"), title
    assert "· ok" not in visible_text(TraceView(Trace.from_dict(doc)).static_html())


def test_an_added_closing_round_is_no_final_answer_and_no_model_call() -> None:
    """f15 #7: an .sse recording that ends after tool calls gets a 0 s closing round from the
    importer: it is neither a "final answer" nor a model call in the header's count."""
    from tests.test_views_sixth import PARALLEL_NO_RESULTS
    from toolcall_lab.notebook.html import header_html
    from toolcall_lab.notebook.loading import open_upload

    doc = open_upload("my_stream.sse", PARALLEL_NO_RESULTS.encode()).traces[0].to_dict()
    closing = [r for r in doc["rounds"] if "closing round" in round_title(r)]
    assert closing, [round_title(r) for r in doc["rounds"]]
    assert all("final answer" not in round_title(r) for r in closing)
    head = visible_text(header_html(doc))
    n_model = len(doc["rounds"]) - len(closing)
    assert f"model calls {n_model} " in head and "closing round added, no model call" in head, head


# --- 6: interleaved runs without ids: the refusal only ------------------------------------------------


def test_refused_interleaved_runs_show_no_merged_counts() -> None:
    """f15 #6: above the refusal the header counted the events and rounds of two runs as one."""
    from toolcall_lab.events import RoundStarted, RunFinished

    live = LiveView("by hand", min_interval_s=0.0)
    for k in (0, 1, 0, 1):
        live.on_event(RoundStarted(at=float(k), round_index=k))
    live.on_event(RunFinished(at=5.0, status="completed", reason="final_answer"))
    text = visible_text(live.view.value)
    assert "cannot tell them apart" in text
    assert not re.search(r"\d+ events|\d+ rounds?\b|wall|model calls", text), text


# --- 2: text colours that read in every theme ----------------------------------------------------------


def _lum(hex_colour: str) -> float:
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _ratio(a: str, b: str) -> float:
    x, y = sorted((_lum(a), _lum(b)), reverse=True)
    return (x + 0.05) / (y + 0.05)


def test_warning_and_error_text_never_take_jupyterlabs_orange() -> None:
    """f15 #2: `.tcl-warn` took --jp-warn-color1 (#f57c00 in JupyterLab Light: 2.70:1 on white, 2.33:1
    on a shaded row). Warnings and errors have text-safe colours per theme, at least 4.5:1 on every
    background the views draw text on (JupyterLab Light, Dark and its high contrast, nbconvert)."""
    from toolcall_lab.notebook.theme import CSS

    warn_rule = re.search(r"\.tcl \.tcl-warn\{color:([^}]*)\}", CSS).group(1)
    error_rule = re.search(r"\.tcl \.tcl-error\{color:([^;}]*)", CSS).group(1)
    assert "jp-warn-color" not in warn_rule and "jp-error-color" not in error_rule
    light = dict(re.findall(r"--tcl-(warn|error)-fg:(#[0-9a-f]{6})", CSS.split("[data-jp-theme-light")[0]))
    dark = dict(
        re.findall(
            r"--tcl-(warn|error)-fg:(#[0-9a-f]{6})", CSS.split("[data-jp-theme-light='false']")[1][:80]
        )
    )
    for colour in light.values():  # white page, JupyterLab's #eee and the views' #eef1f4 shaded rows
        assert min(_ratio(colour, bg) for bg in ("#ffffff", "#eeeeee", "#eef1f4", "#f6f8fa")) >= 4.5, colour
    for colour in dark.values():  # #111 page, #212121 cards, #424242 shaded rows, black (high contrast)
        assert min(_ratio(colour, bg) for bg in ("#111111", "#212121", "#424242", "#000000")) >= 4.5, colour
    assert set(light) == set(dark) == {"warn", "error"}


def test_muted_text_is_the_text_colour_mixed_towards_the_page_not_font_color2() -> None:
    """f15 #9: muted "—" cells were 4.23:1 (nbconvert dark) and 4.43:1 (light): --jp-ui-font-color2
    on a shaded row. Muted text is now the theme's text colour mixed a little towards the page."""
    from toolcall_lab.notebook.theme import CSS

    assert "--tcl-fg2:color-mix(in srgb,var(--tcl-fg) 78%,var(--tcl-bg))" in CSS
    # the mix in the worst case: JupyterLab Light's text (87 % black) on white, drawn on #eeeeee
    grey = round(255 * (1 - 0.78 * 0.87))
    assert _ratio(f"#{grey:02x}{grey:02x}{grey:02x}", "#eeeeee") >= 4.5


# --- 3: one validation rule for the cap and the round trip ---------------------------------------------


def test_compare_view_refuses_a_cap_of_zero_as_compare_does() -> None:
    """f15 #3: `compare(concurrency=0)` is refused, `CompareView(concurrency=0)` ran uncapped, and 0 or
    00 typed in the cap box was taken as "no cap" (the box kept showing 0)."""
    import pytest

    from toolcall_lab.analysis import compare
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.notebook.widgets import CompareView
    from toolcall_lab.scenarios import SCENARIOS

    trace = SCENARIOS["multi_angle_search"].record()
    with pytest.raises(UsageError, match=r"concurrency=0: must be an integer >= 1, or None for no cap"):
        compare([trace], modes=("parallel",), concurrency=0)
    with pytest.raises(UsageError, match=r"concurrency=0: must be an integer >= 1, or None for no cap"):
        CompareView(trace, modes=("parallel",), concurrency=0)
    view = CompareView(trace, modes=("parallel",), concurrency=2)
    capped = view.rows[0]["wall_time_s"]
    for typed in ("0", "00", " 0 "):
        with pytest.raises(UsageError, match=r"concurrency=0: must be an integer >= 1"):
            view._cap_typed({"new": typed})  # what the view's error area shows
        assert view.cap_box.value == "2" and view.concurrency == 2
        view.cap_box.value = typed  # through the box: refused, the box reset, the runs unchanged
        assert view.cap_box.value == "2" and view.concurrency == 2 and view.rows[0]["wall_time_s"] == capped
    with pytest.raises(UsageError, match=r"concurrency=0"):
        view.concurrency = 0
    view.cap_box.value = ""
    assert view.concurrency is None


def test_compare_view_never_clamps_a_round_trip_it_is_given() -> None:
    """A round trip of 600 ms was shown and run as 500 ms (the slider's end): a silent repair. An
    infinite one passed the view's check (compare refuses it)."""
    import pytest

    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.notebook.widgets import CompareView
    from toolcall_lab.scenarios import SCENARIOS

    trace = SCENARIOS["weather_news_stock"].record()
    view = CompareView(trace, modes=("serialized",), round_trip_s=0.6)
    assert view.round_trip_ms == 600 and view.rtt_box.value == 600
    view.round_trip_ms = 900
    assert view.rtt_box.value == 900
    for bad in (-0.05, float("inf"), float("nan")):
        with pytest.raises(UsageError, match=r"must be >= 0 seconds \(finite\)"):
            CompareView(trace, modes=("serialized",), round_trip_s=bad)


def test_corpus_view_refuses_a_page_size_below_one() -> None:
    import pytest

    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.notebook.widgets import CorpusView
    from toolcall_lab.scenarios import SCENARIOS

    with pytest.raises(UsageError, match=r"page_size=0: must be an integer >= 1"):
        CorpusView([SCENARIOS["weather_news_stock"].record()], page_size=0)


# --- 4: speedups on assumed numbers are marked wherever shown -------------------------------------------


def _assumed_trace() -> Trace:
    """Model time recorded, every tool duration a 0.1 s placeholder: parallel's saving is
    made entirely of placeholder seconds, a small share of the run's seconds."""
    from toolcall_lab.scenarios import SCENARIOS

    doc = SCENARIOS["weather_news_stock"].record().to_dict()
    for r in doc["rounds"]:
        r["response"]["timing"] = {"source": "recorded", "note": ""}
        for x in r["tool_executions"]:
            x["timing"] = {"source": "placeholder", "note": "tool duration not recorded: 0.1 s assumed"}
    return Trace.from_dict(doc)


def test_a_speedup_resting_on_placeholders_is_marked_in_every_view_and_export() -> None:
    """f15 #4: "parallel 1.05x" showed unmarked when every tool duration was an assumed 0.1 s, and
    the plot's title said "<1 % of these seconds are estimated"."""
    from toolcall_lab.analysis import compare, speedup_caveat
    from toolcall_lab.notebook.widgets import CompareView, CorpusView
    from toolcall_lab.plotting import speedup_distribution, time_breakdown

    trace = _assumed_trace()
    table = compare([trace], modes=("sequential", "parallel")).runs
    par = table[table["mode"] == "parallel"].iloc[0]
    assert par["speedup_vs_sequential"] > 1 and par["measured_share"] >= 0.5  # by seconds: half measured
    assert speedup_caveat(par) == "assumed timings"
    view = CompareView(trace, modes=("sequential", "parallel"))
    summary = visible_text(view.summary.value)
    assert re.search(r"\d\.\d\dx \(assumed timings\)", summary), summary
    exported = {r["mode"]: r for r in view.export.tables()["summary"]}
    assert exported["parallel"]["speedup_rests_on"] == "assumed timings"
    assert exported["sequential"]["speedup_rests_on"] == ""
    corpus = CorpusView([trace], modes=("sequential", "parallel"))
    assert "(assumed timings)" in visible_text(corpus.table.value)
    rows = {r["mode"]: r for r in corpus._records()}
    assert rows["parallel"]["speedup_rests_on"] == "assumed timings"
    comparison = compare([trace], modes=("sequential", "parallel"))
    fig = speedup_distribution(comparison, show=False)
    labels = " ".join(t.get_text() for t in fig.axes[0].get_xticklabels())
    assert "1 of 1 on\nassumed timings" in labels, labels
    for figure in (fig, time_breakdown(comparison, show=False)):
        assert "1 of 1 trace rest on estimated or placeholder durations" in figure.axes[0].get_title()


def test_a_measured_speedup_is_not_marked() -> None:
    from toolcall_lab.analysis import speedup_caveat

    row = {
        "speedup_vs_sequential": 1.5,
        "wall_time_s": 2.0,
        "timing_evidence": "recorded",
        "measured_share": 1.0,
        "model_time_s": 1.0,
        "tool_time_s": 2.0,
        "stream_overlap_s": 0.0,
        "chunk_timing": "recorded",
    }
    assert speedup_caveat(row) is None
    assert speedup_caveat({**row, "stream_overlap_s": 0.2, "chunk_timing": "spread"}) == "assumed timings"
    # a little placeholder time beside a large measured saving: the speedup does not rest on it
    assert speedup_caveat({**row, "timing_evidence": "placeholder", "measured_share": 0.95}) is None


# --- 9: the stepper names the chunk a finding is shown at ----------------------------------------------


def test_a_repeated_header_names_the_chunk_it_is_shown_at(tmp_path) -> None:
    """f15 #9: shown at the repeating chunk, the finding read "repeated_header (chunk 2)": its
    chunk_index points at the first header."""
    import json

    from toolcall_lab.notebook.stream import frame_html
    from toolcall_lab.notebook.widgets import StreamStepper

    def chunk(delta, finish=None):
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"id": "x", "object": "chat.completion.chunk", "choices": [choice]}

    def call(**kw):
        return {"tool_calls": [{"index": 0, **kw}]}

    header = {"id": "c1", "type": "function"}
    chunks = [
        chunk({"role": "assistant"}),
        chunk(call(**header, function={"name": "f", "arguments": ""})),
        chunk(call(function={"arguments": '{"a": '})),
        chunk(call(**header, function={"name": "f", "arguments": "1}"})),
        chunk({}, "tool_calls"),
    ]
    path = tmp_path / "repeated.sse"
    path.write_text("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n")
    states = StreamStepper(path).states
    assert [f["chunk_index"] for f in states.findings] == [1] and states.seen_at == (3,)
    text = visible_text(frame_html(states, 3))
    assert "repeated_header (first header at chunk 1, repeated at chunk 3)" in text, text
    assert "repeated_header" not in visible_text(frame_html(states, 2))


def test_a_call_without_an_execution_in_the_record_is_not_called_skipped() -> None:
    """A record that lacks a call's execution says so; "skipped" is for a call the run chose not to
    execute (first_only)."""
    from toolcall_lab.scenarios import SCENARIOS

    doc = SCENARIOS["weather_news_stock"].record().to_dict()
    r = next(r for r in doc["rounds"] if len(r["tool_calls"]) >= 2)
    n = len(r["tool_calls"])
    r["tool_executions"] = r["tool_executions"][:-1]
    title = round_title(r)
    assert title.endswith(f"{n - 1} ok, 1 with no execution in the record"), title
    assert "skipped" not in title

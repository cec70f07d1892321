"""Views refuse what they would otherwise ignore (w15): an unknown option, and a mode or strategy spec
that names no strategy, are a `UsageError` naming them before any replay, as `compare` refuses them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolcall_lab.exceptions import UsageError
from toolcall_lab.notebook.live import LiveView
from toolcall_lab.notebook.widgets import CompareView, CorpusView, StreamStepper, TraceView
from toolcall_lab.scenarios import SCENARIOS

RECORDING = Path(__file__).resolve().parents[1] / "data" / "recordings" / "scripted_weather_news_stock.sse"


def _trace() -> Any:
    return SCENARIOS["weather_news_stock"].record()


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda t: CompareView(t, timings="recorded"), "timings"),
        (lambda t: CorpusView([t], timings="recorded", concurrency=1), "concurrency"),
        (lambda t: TraceView(t, round_trip_s=-1), "round_trip_s"),
        (lambda t: LiveView("x", virtual=False), "virtual"),
        (lambda t: StreamStepper(RECORDING, bogus=1), "bogus"),
    ],
)
def test_an_option_a_view_does_not_have_is_refused_naming_it(make: Any, name: str) -> None:
    with pytest.raises(UsageError, match=rf"unknown option\(s\) .*'{name}'.*its options: "):
        make(_trace())


def test_a_widget_box_option_still_passes() -> None:
    view = TraceView(_trace(), layout={"width": "500px"})
    assert view.layout.width == "500px"


@pytest.mark.parametrize(
    "modes",
    [("bogus",), [None], ("sequential", "parallel[cap=0]"), ("eager[cap=2.0]",), ("parallel[cap=-1]",)],
)
def test_compare_view_refuses_the_mode_specs_compare_refuses(modes: Any) -> None:
    from toolcall_lab.analysis import compare

    trace = _trace()
    with pytest.raises(UsageError):
        compare([trace], list(modes))
    with pytest.raises(UsageError, match=r"CompareView\(modes=\.\.\.\)"):
        CompareView(trace, modes=modes)
    view = CompareView(trace, modes=("sequential",))
    with pytest.raises(UsageError, match=r"CompareView\.modes"):
        view.modes = tuple(modes)


def test_corpus_view_names_itself_and_refuses_one_string() -> None:
    with pytest.raises(UsageError, match=r"CorpusView\(modes=\.\.\.\): give a list of modes"):
        CorpusView([_trace()], "parallel")
    with pytest.raises(UsageError, match=r"CorpusView\(modes=\.\.\.\)='bogus'"):
        CorpusView([_trace()], ("bogus",))

"""The views import from the package's short path, and every status icon is drawable by
matplotlib's default font (a missing glyph is a warning and a box in every plot)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from matplotlib import font_manager
from matplotlib.ft2font import FT2Font

from toolcall_lab.notebook import theme


def test_the_views_import_from_the_package() -> None:
    from toolcall_lab.notebook import (
        CompareView,
        CorpusView,
        LiveView,
        StreamStepper,
        TraceView,
        save_html,
        widgets,
    )

    assert CompareView is widgets.CompareView and TraceView is widgets.TraceView
    assert {CorpusView, LiveView, StreamStepper} <= {
        widgets.CorpusView,
        widgets.LiveView,
        widgets.StreamStepper,
    }
    assert callable(save_html)
    with pytest.raises(ImportError, match="Nope"):
        from toolcall_lab.notebook import Nope  # noqa: F401


def test_importing_the_package_does_not_import_ipywidgets() -> None:
    code = "import sys, toolcall_lab, toolcall_lab.notebook; print('ipywidgets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_icon_is_in_matplotlibs_default_font() -> None:
    charmap = FT2Font(font_manager.findfont("DejaVu Sans")).get_charmap()
    styles = [*theme.STATUS.values(), theme.UNKNOWN_STATUS, theme.MODEL, theme.TRIP, theme.WAIT]
    missing = [(s.label, s.icon) for s in styles for ch in s.icon if ord(ch) not in charmap]
    assert not missing

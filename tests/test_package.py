"""The public surface: curated, sorted exports; the core never imports notebook code."""

from __future__ import annotations

import subprocess
import sys

import toolcall_lab


def test_all_is_sorted_and_importable() -> None:
    assert toolcall_lab.__all__ == sorted(toolcall_lab.__all__)
    for name in toolcall_lab.__all__:
        assert hasattr(toolcall_lab, name), name


def test_core_import_pulls_no_ui_or_dataframes() -> None:
    code = (
        "import sys, toolcall_lab; bad = [m for m in ('ipywidgets', 'matplotlib', 'pandas') "
        "if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

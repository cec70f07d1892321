"""Widgets are only real if they render: execute a notebook, export it with widget state to HTML,
open it in headless Chromium, and check the rendered DOM. Keeps a screenshot in artifacts/.

Needs Chromium and the widget JavaScript (`@jupyter-widgets/html-manager`, `requirejs` from npm,
installed by `.ci/run` into ~/.cache/toolcall-lab/widget-js). Skips with the reason when they are
missing, unless TOOLCALL_LAB_REQUIRE_BROWSER=1 (set by CI), where it fails instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDGET_JS = Path(
    os.environ.get("TOOLCALL_LAB_WIDGET_JS", Path.home() / ".cache" / "toolcall-lab" / "widget-js")
)
EMBED = WIDGET_JS / "node_modules" / "@jupyter-widgets" / "html-manager" / "dist" / "embed-amd.js"
REQUIRE = WIDGET_JS / "node_modules" / "requirejs" / "require.js"
REQUIRED = os.environ.get("TOOLCALL_LAB_REQUIRE_BROWSER") == "1"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",
    "--virtual-time-budget=20000",
]


def _missing() -> str | None:
    if CHROMIUM is None:
        return "chromium is not installed (apt-get install chromium; .ci/run does it)"
    if not EMBED.is_file() or not REQUIRE.is_file():
        return f"widget JavaScript not found under {WIDGET_JS} (npm install @jupyter-widgets/html-manager requirejs)"
    return None


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    reason = _missing()
    if reason:
        if REQUIRED:
            pytest.fail(f"browser check required but {reason}")
        pytest.skip(reason)
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(
        cells=[
            new_code_cell(
                "from toolcall_lab.scenarios import SCENARIOS\n"
                "from toolcall_lab.notebook.widgets import TraceView, CompareView, StreamStepper\n"
                "TraceView(SCENARIOS['failing_and_hanging'].record())"
            ),
            new_code_cell("CompareView(SCENARIOS['weather_news_stock'].record())"),
            new_code_cell(
                f"StreamStepper({str(REPO / 'data/recordings/scripted_weather_news_stock.sse')!r})"
            ),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}
    ).execute()
    assert "application/vnd.jupyter.widget-state+json" in nb.metadata["widgets"]
    exporter = HTMLExporter(require_js_url=REQUIRE.as_uri(), widget_renderer_url=EMBED.as_uri())
    body, _ = exporter.from_notebook_node(nb)
    page = tmp_path_factory.mktemp("browser") / "widgets.html"
    page.write_text(body, encoding="utf-8")
    profile = tmp_path_factory.mktemp("chromium-profile")
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
    ).stdout
    artifacts = REPO / "artifacts"
    artifacts.mkdir(exist_ok=True)
    subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--window-size=1100,1500",
            f"--screenshot={artifacts / 'widgets_in_chromium.png'}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=180,
    )
    return dom


def _section(dom: str, cls: str) -> str:
    start = dom.find(cls)
    assert start != -1, f"{cls} not rendered"
    return dom[start:]


def test_trace_view_renders_round_panels_call_rows_and_timeline(rendered) -> None:
    view = _section(rendered, "tcl-trace-view")
    view = view[: view.find("tcl-compare-view")]
    assert len(re.findall(r'class="tcl-round"', view)) >= 2
    assert {"tcl-status-ok", "tcl-status-error", "tcl-status-timeout"} <= set(
        re.findall(r"tcl-status-\w+", view)
    )
    assert view.count('class="tcl-timeline"') >= 2
    assert "widget-accordion" in view or "jupyter-widget-Accordion" in view or "lm-Widget" in view


def test_compare_view_and_stepper_render(rendered) -> None:
    compare = _section(rendered, "tcl-compare-view")
    assert "speedup vs sequential" in compare and compare.count('class="tcl-timeline"') >= 4
    assert "calls so far" in _section(rendered, "tcl-stream-stepper")


def test_screenshot_was_kept(rendered) -> None:
    shot = REPO / "artifacts" / "widgets_in_chromium.png"
    assert shot.is_file() and shot.read_bytes()[:4] == b"\x89PNG"

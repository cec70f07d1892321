"""A real JupyterLab on loopback driven by a real Chromium (Playwright, the system browser).

Used by tests/test_browser.py: copies the notebooks into a scratch folder (JupyterLab saves what it
runs; the repository's notebooks are never touched), starts `jupyter lab` headless with fresh
settings (no news, every cell attached to the page), opens a notebook, runs all cells from the Run
menu, saves it, and measures what a person would look at: error outputs, images in plotting cells,
rendered widgets, horizontal overflow and text contrast of the views in light and dark themes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.conftest import REALDATA, REPO

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/themes.jupyterlab-settings": {"theme": "JupyterLab Light"},
}

# Runs in the page: per-cell outputs, widgets, overflow and contrast of the toolcall_lab views.
MEASURE = r"""
() => {
  const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find(p => !p.classList.contains('lm-mod-hidden'));
  const cells = [...panel.querySelectorAll('.jp-Notebook .jp-Cell')];
  const rgba = s => { const m = s && s.match(/rgba?\(([^)]+)\)/); if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (t, b) => [0, 1, 2].map(i => t[i] * t[3] + b[i] * (1 - t[3])).concat([1]);
  const bgOf = el => { const layers = []; for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor); if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let acc = [255, 255, 255, 1]; for (let i = layers.length - 1; i >= 0; i--) acc = over(layers[i], acc); return acc; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const visible = el => el.getClientRects().length > 0 && !el.closest('details:not([open]) > :not(summary)')
    && getComputedStyle(el).visibility !== 'hidden';
  const describe = el => (el.tagName + '.' + [...el.classList].join('.') + ' "' + (el.textContent || '').trim().slice(0, 40) + '"');
  const result = { cells: [], overflow: [], contrast: [], lowest: 99, checked: 0, widgets: [], bars: [], barsChecked: 0,
                   statics: 0, staticsShown: [], squeezed: [], labels: [], labelsChecked: 0,
                   swatches: [], swatchesChecked: 0, timelineTexts: 0, timelineLowest: 99 };
  for (const cell of cells) {
    result.cells.push({
      images: cell.querySelectorAll('.jp-OutputArea-output img').length,
      widgets: [...cell.querySelectorAll('.jp-OutputArea-output')].filter(o => o.querySelector(':scope > .jupyter-widgets')).length,
    });
  }
  for (const out of [...panel.querySelectorAll('.jp-OutputArea-output')].filter(o => o.querySelector(':scope > .jupyter-widgets'))) {
    const text = out.innerText.trim();
    result.widgets.push({ chars: text.length, nodes: out.querySelectorAll('*').length,
      problem: /Error displaying widget|Loading widget|model not found/i.test(text) ? text.slice(0, 120) : '' });
  }
  for (const view of panel.querySelectorAll('.tcl-view, .jp-OutputArea-output > .tcl')) {
    const area = view.closest('.jp-OutputArea-output') || view.parentElement;
    const limit = area.getBoundingClientRect().right + 1;
    for (const el of [view, ...view.querySelectorAll('*')]) {
      if (el.parentElement && el.parentElement.closest('.tcl-scroll')) continue;  // may scroll inside its box
      const r = el.getBoundingClientRect();
      if (!r.width || !visible(el)) continue;
      if (r.right > limit) result.overflow.push(describe(el) + ' by ' + Math.round(r.right - limit) + 'px');
    }
    for (const box of view.querySelectorAll('.tcl-panel, .tcl-mode, .tcl-round')) {
      const right = box.getBoundingClientRect().right + 1;
      for (const svg of box.querySelectorAll('svg.tcl-timeline')) {
        const r = svg.getBoundingClientRect();
        if (r.width && visible(svg) && r.right > right) result.overflow.push('timeline spills out of ' + describe(box));
      }
    }
  }
  // every bar, outline and marker stands out from the page behind it (WCAG 1.4.11: 3:1); a faint
  // (estimated / placeholder) bar by its outline, a skipped call by its dashed box
  for (const rect of panel.querySelectorAll('svg.tcl-timeline rect:is(.tcl-bar, .tcl-bar-wait, .tcl-bar-skipped)')) {
    if (!visible(rect) || !rect.getBoundingClientRect().width) continue;
    const cs = getComputedStyle(rect);
    const outlined = rect.classList.contains('tcl-faint') || rect.classList.contains('tcl-bar-skipped');
    const colour = rgba(outlined ? cs.stroke : cs.fill);
    if (!colour) continue;
    const bg = bgOf(rect.closest('svg'));
    const r = ratio(over(colour, bg), bg);
    result.barsChecked++;
    if (r < 3) result.bars.push(describe(rect) + ' ' + (rect.querySelector('title') || {}).textContent + ' contrast ' + r.toFixed(2));
  }
  // bar labels as drawn at this width: on a lane (same text row), none overlaps or touches the next
  for (const svg of panel.querySelectorAll('svg.tcl-timeline')) {
    if (!visible(svg) || !svg.getBoundingClientRect().width) continue;
    const rows = {};
    for (const t of svg.querySelectorAll('text.tcl-in, text.tcl-out')) {
      const r = t.getBoundingClientRect();
      if (!r.width || getComputedStyle(t).display === 'none') continue;
      (rows[Math.round(r.top)] = rows[Math.round(r.top)] || []).push([r.left, r.right, t.textContent]);
    }
    for (const row of Object.values(rows)) {
      row.sort((a, b) => a[0] - b[0]);
      result.labelsChecked += row.length;
      for (let k = 1; k < row.length; k++)
        if (row[k][0] - row[k - 1][1] < 2)
          result.labels.push(row[k - 1][2] + ' | ' + row[k][2] + ' (' + (row[k][0] - row[k - 1][1]).toFixed(1) + ' px apart)');
    }
  }
  // the static copies printed after each view stay hidden where the widget itself rendered
  for (const copy of panel.querySelectorAll('.tcl-static')) {
    result.statics++;
    if (visible(copy) && copy.getBoundingClientRect().height > 0) result.staticsShown.push(describe(copy));
  }
  // call cards: the arguments keep the card's width (a long id wraps the head line, not the box)
  for (const card of panel.querySelectorAll('.tcl-view .tcl-call')) {
    const args = card.querySelector('.tcl-args');
    if (!args || !visible(card) || !card.getBoundingClientRect().width) continue;
    if (args.getBoundingClientRect().width < 0.8 * (card.getBoundingClientRect().width - 16))
      result.squeezed.push(describe(card));
  }
  // legend swatches and status icons keep the colour they were given (forced colours would paint
  // their backgrounds over with the page's): each computed colour equals its inline one
  for (const sw of panel.querySelectorAll('.tcl-view :is(.tcl-swatch, .tcl-icon)')) {
    if (!visible(sw) || !sw.getBoundingClientRect().width) continue;
    const own = sw.style.backgroundColor, cs = getComputedStyle(sw);
    const [want, got] = own && own !== 'transparent' ? [own, cs.backgroundColor] : [sw.style.borderTopColor, cs.borderTopColor];
    if (!want) continue;
    result.swatchesChecked++;
    const a = rgba(want), b = rgba(got);
    if (!a || !b || a.some((v, i) => Math.abs(v - b[i]) > 1)) result.swatches.push(describe(sw.parentElement) + ': ' + want + ' shown as ' + got);
  }
  const texts = panel.querySelectorAll('.tcl-view .tcl *, .tcl-trace *');
  for (const el of texts) {
    if (el.tagName === 'STYLE' || el.tagName === 'title' || el.closest('title')) continue;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own || !visible(el)) continue;
    let fg, bg;
    if (el instanceof SVGElement) {
      const cs = getComputedStyle(el);
      fg = rgba(cs.fill);
      bg = bgOf(el.closest('svg'));
      let bar = el.classList.contains('tcl-in') ? el.previousElementSibling : null;
      while (bar && bar.tagName !== 'rect') bar = bar.previousElementSibling;  // past other layouts' labels
      if (bar) { const c = rgba(getComputedStyle(bar).fill); const o = parseFloat(bar.getAttribute('fill-opacity') || '1');
        bg = over([c[0], c[1], c[2], o], bg); }
    } else {
      fg = rgba(getComputedStyle(el).color); bg = bgOf(el);
    }
    if (!fg) continue;
    fg = over(fg, bg);
    const r = ratio(fg, bg);
    result.checked++;
    result.lowest = Math.min(result.lowest, r);
    if (el instanceof SVGElement && el.closest('svg.tcl-timeline')) {
      result.timelineTexts++; result.timelineLowest = Math.min(result.timelineLowest, r); }
    if (r < 4.5) result.contrast.push(describe(el) + ' contrast ' + r.toFixed(2));
  }
  return result;
}
"""


# Runs in the page: timelines that need a sideways scroll to be seen whole (their box is narrower than
# the lanes and the narrowest plot their labels are laid out for).
SCROLLED = r"""
() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .tcl-tl > .tcl-scroll')]
  .filter(b => b.getClientRects().length && !b.closest('details:not([open]) > :not(summary)')
               && b.scrollWidth > b.clientWidth + 1)
  .map(b => { const box = b.closest('.tcl-mode, .tcl-round, .tcl-view, .tcl');
              return (box.getAttribute('data-mode') || box.getAttribute('data-round') || box.className)
                     + ': ' + b.scrollWidth + ' px in ' + b.clientWidth; })
"""

# Runs in the page: how far "Run All" got. A prompt reads "[3]:" once its cell ran, "[*]:" while it
# runs or waits its turn; the kernel's state is in the status bar.
PROGRESS = r"""
() => {
  const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find(p => !p.classList.contains('lm-mod-hidden'));
  const cells = [...panel.querySelectorAll('.jp-Notebook .jp-CodeCell')];
  const prompt = c => (c.querySelector('.jp-InputPrompt') || {}).textContent || '';
  const failed = cells.find(c => c.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"] .ansi-red-fg, .jp-OutputArea-child .jp-RenderedText[data-mime-type="application/vnd.jupyter.error"]'));
  const status = [...document.querySelectorAll('.jp-StatusBar-Widget')].map(w => w.textContent).join(' ');
  return {
    total: cells.length,
    done: cells.filter(c => /\[\d+\]/.test(prompt(c))).length,
    running: cells.filter(c => /\[\*\]/.test(prompt(c))).length,
    idle: /\|\s*Idle/.test(status),
    error: failed ? 'cell ' + cells.indexOf(failed) + ': ' + failed.innerText.trim().split('\n').slice(-3).join(' / ').slice(0, 400) : 'no error output seen',
  };
}
"""

# Off-screen cells must stay in the page (measured, screenshot): "windowingMode": "none" in SETTINGS.
WINDOWING = r"""
() => { const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
        return nb && nb.classList.contains('jp-mod-virtualScrollbar') ? 'virtual scrollbar' : ''; }
"""

KEEP_OUT = {".git", ".venv", ".venv-bench", "artifacts", "notebooks", "build"}


def mirror(work: Path) -> None:
    """A scratch copy of the repository's layout: notebooks copied without their stored outputs
    (JupyterLab saves what it runs, and a stored "[1]:" would look like a cell already run), every
    other top-level entry linked, so notebooks find `data/`, `tests/conformance/` and whatever else
    they read exactly as in the repository."""
    (work / "notebooks").mkdir(parents=True)
    for entry in sorted(REPO.iterdir()):
        if entry.name not in KEEP_OUT and not entry.name.endswith(".egg-info"):
            (work / entry.name).symlink_to(entry)
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"], cell["execution_count"] = [], None
        nb.get("metadata", {}).pop("widgets", None)
        (work / "notebooks" / path.name).write_text(json.dumps(nb), encoding="utf-8")
    for extra in sorted((REPO / "notebooks").iterdir()):
        if extra.suffix != ".ipynb" and not extra.name.startswith("."):
            (work / "notebooks" / extra.name).symlink_to(extra)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Lab:
    """JupyterLab + Chromium for one test session."""

    def __init__(self, root: Path, browser: Any, shots: Path) -> None:
        self.root, self.shots = root, shots
        work = root / "work"
        self.work = work
        mirror(work)
        if REALDATA.is_dir():
            (root / "shared").mkdir()
            (root / "shared" / "realdata").symlink_to(REALDATA)
        settings = root / "settings"
        for name, value in SETTINGS.items():
            (settings / name).parent.mkdir(parents=True, exist_ok=True)
            (settings / name).write_text(json.dumps(value))
        self.port = free_port()
        env = {
            **os.environ,
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(root / "workspaces"),
            "JUPYTER_RUNTIME_DIR": str(root / "runtime"),
            "JUPYTER_CONFIG_DIR": str(root / "config"),
        }
        self.log = (root / "jupyterlab.log").open("w")
        self.server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",
                "--IdentityProvider.token=",
                "--ServerApp.password=",
                f"--ServerApp.root_dir={work}",
                "--ServerApp.disable_check_xsrf=True",
                "--LabApp.news_url=None",
                "--ServerApp.terminals_enabled=False",
                "--ServerApp.allow_root=True",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=work,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        self._wait_for_server()
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})

    def _wait_for_server(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"jupyter lab exited: see {self.log.name}")
            try:
                with urllib.request.urlopen(f"{self.base}/api/status", timeout=2):
                    return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"jupyter lab did not answer within 60 s: see {self.log.name}")

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing down: the server must still stop
            self.page.close()
        self.server.terminate()
        try:
            self.server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.server.kill()
        self.log.close()

    def menu(self, top: str, *path: str) -> None:
        page = self.page
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$")).click()
        for i, item in enumerate(path):
            entry = page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).last
            if i < len(path) - 1:
                entry.hover()
            else:
                entry.click()

    def theme(self, name: str) -> None:
        """Switch the theme and wait until it is the one applied (its name on the page: dark to dark
        high contrast does not change the light flag, so that flag alone does not say it is done)."""
        self.menu("Settings", "Theme", name)
        want = "false" if "Dark" in name else "true"
        self.page.wait_for_function(
            f"document.body.dataset.jpThemeLight === '{want}' && document.body.dataset.jpThemeName === {name!r}",
            timeout=20_000,
        )
        self.page.wait_for_timeout(800)

    def narrow(self, width: int) -> dict[str, Any]:
        """The measurements in a window `width` px wide (the file browser stays as it is), with the
        width of the output area; the window is restored after."""
        size = self.page.viewport_size or {"width": 1400, "height": 1000}
        self.page.set_viewport_size({"width": width, "height": size["height"]})
        try:
            self.page.wait_for_timeout(800)
            measured = self.measure()
            measured["area"] = self.page.evaluate(
                "() => { const o = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) "
                ".jp-OutputArea-output'); return o ? o.getBoundingClientRect().width : 0; }"
            )
            measured["scrolled"] = self.page.evaluate(SCROLLED)
            return measured
        finally:
            self.page.set_viewport_size(size)
            self.page.wait_for_timeout(400)

    def forced_colors(self, on: bool) -> None:
        """Emulate forced colours (Windows high contrast: the system's colours replace the page's),
        with a dark colour scheme, or stop emulating it."""
        if on:
            self.page.emulate_media(forced_colors="active", color_scheme="dark")
        else:
            self.page.emulate_media(forced_colors="none", color_scheme="light")
        self.page.wait_for_function(
            f"matchMedia('(forced-colors: active)').matches === {'true' if on else 'false'}", timeout=10_000
        )
        self.page.wait_for_timeout(300)

    def run_notebook(self, name: str, quiet_s: float = 120, budget_s: float = 240) -> dict[str, Any]:
        """Open, run all, save; returns the saved notebook, how the run ended, and the measurements.

        Waits while cells keep finishing: the run is over when every code cell has an execution
        number, or when the kernel is idle with no cell queued (a cell failed and JupyterLab stopped
        running the rest: `halted` names it and its error). It gives up only when no cell finished
        for `quiet_s` seconds (a slow, loaded machine still makes progress) or after `budget_s`.
        """
        page = self.page
        page.goto(f"{self.base}/lab/tree/notebooks/{name}?reset", wait_until="domcontentloaded")
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
        # the kernel is up when the status bar says so ("Python 3 (ipykernel) | Idle")
        page.locator(".jp-StatusBar-Widget", has_text=re.compile(r"\|\s*Idle")).first.wait_for(timeout=60_000)
        windowing = page.evaluate(WINDOWING)
        if windowing:
            raise RuntimeError(
                f"{name}: JupyterLab renders the notebook windowed ({windowing}); see SETTINGS"
            )
        self.menu("Run", "Run All Cells")
        started = last_progress = time.monotonic()
        done, idle_polls, state = -1, 0, {}
        while True:
            page.wait_for_timeout(400)
            state = page.evaluate(PROGRESS)
            now = time.monotonic()
            if state["done"] > done:
                done, last_progress = state["done"], now
            if state["total"] and state["done"] == state["total"] and not state["running"]:
                break
            # stopped early: nothing running or queued, kernel idle, for a few polls in a row
            idle_polls = idle_polls + 1 if state["idle"] and not state["running"] and state["done"] else 0
            if idle_polls >= 5:
                break
            if now - last_progress > quiet_s or now - started > budget_s:
                raise RuntimeError(
                    f"{name}: {state['done']} of {state['total']} code cells finished, none for "
                    f"{now - last_progress:.0f} s (running: {state['running']}; kernel idle: {state['idle']}); "
                    f"see {self.log.name}"
                )
        run_s = time.monotonic() - started
        page.wait_for_timeout(1500)  # widget views attach after the last reply
        page.keyboard.press("Control+s")
        path = self.work / "notebooks" / name
        page.wait_for_function(
            "!document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-mod-dirty')", timeout=20_000
        )
        saved = self._read_saved(path)
        halted = None
        if state["done"] < state["total"]:
            halted = f"{state['done']} of {state['total']} code cells ran; stopped after: {state['error']}"
        return {"saved": saved, "run_s": run_s, "halted": halted, "light": page.evaluate(MEASURE)}

    @staticmethod
    def _read_saved(path: Path) -> dict[str, Any]:
        """The notebook as JupyterLab saved it (waits while the save is still being written)."""
        deadline = time.monotonic() + 30
        while True:
            try:
                saved = json.loads(path.read_text(encoding="utf-8"))
                if any(c.get("outputs") for c in saved["cells"] if c["cell_type"] == "code"):
                    return dict(saved)
            except (json.JSONDecodeError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path}: JupyterLab did not save the run outputs")
            time.sleep(0.3)

    def measure(self) -> dict[str, Any]:
        return dict(self.page.evaluate(MEASURE))

    def screenshots(self, stem: str, *, limit: int = 8) -> list[Path]:
        """One picture per view (and the notebook's top), for a person to look at."""
        self.shots.mkdir(parents=True, exist_ok=True)
        out = []
        top = self.shots / f"{stem}.png"
        self.page.screenshot(path=str(top))
        out.append(top)
        views = self.page.locator(
            ".jp-NotebookPanel:not(.lm-mod-hidden) "
            ":is(.tcl-view, .jp-OutputArea-output > .tcl:not(.tcl-static), .jp-OutputArea-output img) >> visible=true"
        )
        size = self.page.viewport_size or {"width": 1400, "height": 1000}
        for k in range(min(views.count(), limit)):
            target = self.shots / f"{stem}_{k}.png"
            view = views.nth(k)
            view.evaluate("e => e.scrollIntoView({block: 'start'})")
            height = view.evaluate("e => e.getBoundingClientRect().height")
            # a tall view is shot whole: make the window tall enough for it, then restore
            self.page.set_viewport_size(
                {"width": size["width"], "height": int(min(max(1000, height + 300), 6000))}
            )
            view.evaluate("e => e.scrollIntoView({block: 'start'})")
            view.screenshot(path=str(target))
            out.append(target)
        self.page.set_viewport_size(size)
        return out

    def step_through(self) -> list[tuple[str, str, str]]:
        """Use the first stream stepper's controls; (data-step, frame label, the frame's whole text)
        after each (the text is compared with the frame Python renders for that step)."""
        stepper = self.page.locator(
            ".jp-NotebookPanel:not(.lm-mod-hidden) .tcl-stepper >> visible=true"
        ).first
        stepper.scroll_into_view_if_needed()

        def state() -> tuple[str, str, str]:
            label = stepper.locator(".tcl-frame .tcl-frame-label").inner_text()
            text = str(stepper.locator(".tcl-frame").text_content())
            return str(stepper.get_attribute("data-step")), label, text

        seen = [state()]
        for button in ("tcl-next", "tcl-next", "tcl-prev", "tcl-last"):
            stepper.locator(f"button.{button}").click()
            seen.append(state())
        stepper.locator("button.tcl-first").click()
        stepper.locator("button.tcl-play").click()
        self.page.wait_for_timeout(1300)
        stepper.locator("button.tcl-play").click()  # pause
        seen.append(state())
        slider = stepper.locator("input[type=range]")
        slider.click()  # the slider jumps to where it is clicked ...
        seen.append(state())
        self.page.keyboard.press("ArrowRight")  # ... and the arrow keys move it on
        seen.append(state())
        return seen

    def open_corpus_row_by_keyboard(self) -> tuple[str, str]:
        """In the first corpus view: type a row number and press Enter, then Tab to "next row" and
        press Enter; the heading of the opened comparison after each."""
        view = self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .tcl-corpus-view").first
        view.scroll_into_view_if_needed()
        box = view.locator(".widget-inline-hbox", has_text="row #").locator("input").first
        box.click()
        box.fill("3")
        box.press("Enter")
        opened = view.locator("b", has_text=re.compile(r"^row #3:"))
        opened.first.wait_for(timeout=30_000)
        first = opened.first.inner_text()
        view.locator("button", has_text="next row").first.focus()
        self.page.keyboard.press("Enter")
        after = view.locator("b", has_text=re.compile(r"^row #(?!3:)\d+:"))
        after.first.wait_for(timeout=30_000)
        return first, after.first.inner_text()

    def tab_through_trace_view(self, presses: int = 60) -> dict[str, Any]:
        """In the first trace view: from its first control, press Tab and note where focus goes;
        then open a folded round panel from the keyboard (focus its title, press Enter). Returns the
        round panels (their titles' focusability), those Tab reached, the Accordion headers left
        (a stock Accordion's headers take no focus), and the panel's open state before and after Enter."""
        view = self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .tcl-trace-view").first
        view.scroll_into_view_if_needed()
        panels = view.locator("details.tcl-round-panel")
        n = panels.count()
        view.locator("input, button, select").first.focus()
        reached: list[str] = []
        for _ in range(presses):
            self.page.keyboard.press("Tab")
            where = self.page.evaluate(
                "() => { const a = document.activeElement; const d = a && a.closest('details.tcl-round-panel');"
                " return a && a.tagName === 'SUMMARY' && d && a.parentElement === d ? d.dataset.round : ''; }"
            )
            if where and where not in reached:
                reached.append(where)
        summary = panels.nth(n - 1).locator(":scope > summary")
        before = panels.nth(n - 1).evaluate("d => d.open")
        summary.focus()
        self.page.keyboard.press("Enter")
        self.page.wait_for_timeout(300)
        after = panels.nth(n - 1).evaluate("d => d.open")
        self.page.keyboard.press("Enter")
        self.page.wait_for_timeout(300)
        again = panels.nth(n - 1).evaluate("d => d.open")
        edit_mode = self.page.evaluate(
            "() => !!document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook.jp-mod-editMode')"
        )
        return {
            "panels": n,
            "reached": reached,
            "accordion_headers": view.locator(".jupyter-widget-Collapse-header").count(),
            "unreachable_summaries": view.locator("summary").evaluate_all(
                "els => els.filter(s => s.tabIndex < 0).map(s => s.textContent.slice(0, 40))"
            ),
            "toggled": (before, after, again),
            "edit_mode": edit_mode,
        }

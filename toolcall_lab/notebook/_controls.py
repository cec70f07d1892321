"""Pieces every view shares: guarded callbacks, a file picker, an export bar, a static fallback."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from toolcall_lab.exceptions import ToolcallLabError
from toolcall_lab.notebook import export
from toolcall_lab.notebook.loading import ACCEPT, open_traces, open_upload
from toolcall_lab.notebook.theme import CSS, e
from toolcall_lab.trace import Trace


def guarded(out: widgets.Output, fn: Callable[..., None]) -> Callable[..., None]:
    """A callback whose exceptions are shown in the view instead of lost in the browser console."""

    def wrapper(*args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            with out:
                print(traceback.format_exc())

    return wrapper


def wrap(body: str) -> str:
    """Content in the themed container (with its stylesheet)."""
    return f"<div class='tcl'>{CSS}{body}</div>"


def note(text: str, *, error: bool = False) -> str:
    cls = "tcl-error" if error else "tcl-muted"
    return f"<div class='tcl'>{CSS}<div class='{cls}'>{e(text)}</div></div>"


class OpenBox(widgets.VBox):  # type: ignore[misc]
    """A path box, an open button and an upload button; loads traces or recordings through
    `open_traces` and hands them to `on_traces`. Errors are one readable line under the box."""

    def __init__(self, on_traces: Callable[[list[Trace], str], None], *, what: str = "trace") -> None:
        self.on_traces = on_traces
        self.path = widgets.Text(
            placeholder=f"path to a {what} file, recording or transcript",
            description="open",
            layout=widgets.Layout(flex="1 1 260px", min_width="160px"),
        )
        self.button = widgets.Button(description="open", tooltip="open the file named in the box")
        self.upload = widgets.FileUpload(accept=ACCEPT, multiple=False, description="upload")
        self.message = widgets.HTML()
        self.button.on_click(lambda _: self.open_path(self.path.value))
        self.upload.observe(self._uploaded, names=["value"])
        row = widgets.HBox([self.path, self.button, self.upload], layout=widgets.Layout(flex_flow="row wrap"))
        super().__init__([row, self.message])
        self.add_class("tcl-open-box")

    def _deliver(self, load: Callable[[], list[Trace]], label: str) -> None:
        try:
            traces = load()
        except ToolcallLabError as exc:
            self.message.value = note(f"cannot open {label}: {exc}", error=True)
            return
        self.message.value = note(f"opened {label}: {len(traces)} trace(s)")
        self.on_traces(traces, label)

    def open_path(self, path: str | Path) -> None:
        text = str(path).strip()
        if not text:
            self.message.value = note("type a path first", error=True)
            return
        self._deliver(lambda: open_traces(text), text)

    def _uploaded(self, change: Any) -> None:
        files = change["new"]
        if not files:
            return
        f = files[0]
        name = f["name"] if isinstance(f, Mapping) else getattr(f, "name", "upload")
        content = f["content"] if isinstance(f, Mapping) else getattr(f, "content", b"")
        self._deliver(lambda: open_upload(name, bytes(content)), name)


class ExportBar(widgets.VBox):  # type: ignore[misc]
    """Buttons that save the view's timeline (SVG, PNG) and tables (CSV) into a folder."""

    def __init__(
        self,
        stem: Callable[[], str],
        panels: Callable[[], Sequence[tuple[str, Sequence[dict[str, Any]]]]],
        tables: Callable[[], Mapping[str, Sequence[Mapping[str, Any]]]],
        *,
        round_trip_s: Callable[[], float] = lambda: 0.0,
        folder: str = "exports",
    ) -> None:
        self.stem, self.panels, self.tables, self.rtt = stem, panels, tables, round_trip_s
        self.folder = widgets.Text(value=folder, description="save to", layout=widgets.Layout(width="260px"))
        self.svg = widgets.Button(description="timeline SVG", tooltip="save the timeline as SVG")
        self.png = widgets.Button(description="timeline PNG", tooltip="save the timeline as PNG")
        self.csv = widgets.Button(description="tables CSV", tooltip="save the view's tables as CSV")
        self.message = widgets.HTML()
        self.svg.on_click(lambda _: self._save("svg"))
        self.png.on_click(lambda _: self._save("png"))
        self.csv.on_click(lambda _: self._save("csv"))
        row = widgets.HBox(
            [self.folder, self.svg, self.png, self.csv], layout=widgets.Layout(flex_flow="row wrap")
        )
        super().__init__([row, self.message])
        self.add_class("tcl-export-bar")

    def save(self, kind: str) -> list[Path]:
        """Write the files of one kind ('svg', 'png' or 'csv'); returns their paths."""
        folder = Path(self.folder.value or ".").expanduser()
        stem = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in self.stem())[:80] or "view"
        if kind == "csv":
            return [
                export.write_csv(rows, folder / f"{stem}_{name}.csv") for name, rows in self.tables().items()
            ]
        if kind == "svg":
            return [export.write_svg(self.panels(), folder / f"{stem}_timeline.svg", round_trip_s=self.rtt())]
        return [export.write_png(self.panels(), folder / f"{stem}_timeline.png", round_trip_s=self.rtt())]

    def _save(self, kind: str) -> None:
        try:
            paths = self.save(kind)
        except OSError as exc:
            self.message.value = note(f"could not save: {exc}", error=True)
            return
        self.message.value = note("saved " + ", ".join(str(p) for p in paths))


class StaticFallback:
    """Adds a `text/html` rendering to a widget's display, for renderers without a kernel or widget
    state (a code host, nbconvert without saved state); live front ends still show the widget."""

    def static_html(self) -> str:
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        if isinstance(data, dict):
            data = {**data, "text/html": self.static_html()}
        return data

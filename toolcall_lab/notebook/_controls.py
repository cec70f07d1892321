"""Pieces every view shares: guarded callbacks, a file box, an export bar, the static copy."""

from __future__ import annotations

import asyncio
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import traitlets

import toolcall_lab.notebook.export as export
from toolcall_lab.exceptions import ToolcallLabError, UsageError
from toolcall_lab.notebook.loading import ACCEPT, DETECT, Opened, kinds, open_source, open_upload, report_html
from toolcall_lab.notebook.theme import CSS, SUMMARY, e
from toolcall_lab.notebook.timeline import PanelLike

SUBMIT_WAIT_S = 0.25
"""How long Enter waits for the box's new text before it opens the text already there."""
EXPECTED = (ToolcallLabError, traitlets.TraitError, ValueError, OSError)
"""Errors a user can cause from a view (bad input, a file that will not load): one line, no traceback."""


def error_html(exc: BaseException, what: str = "") -> str:
    """One readable line for an error a user caused; a harness bug keeps its traceback, folded."""
    line = f"{what}{': ' if what else ''}{type(exc).__name__}: {exc}"
    if isinstance(exc, EXPECTED):
        return f"<div class='tcl'>{CSS}<div class='tcl-error'>⚠ {e(line)}</div></div>"
    tb = "".join(traceback.format_exception(exc))
    return (
        f"<div class='tcl'>{CSS}<div class='tcl-error'>⚠ {e(line)}</div><details>{SUMMARY}traceback "
        f"(a bug in toolcall_lab: please report it)</summary><pre>{e(tb)}</pre></details></div>"
    )


def guarded(out: widgets.Output, fn: Callable[..., None], what: str = "") -> Callable[..., None]:
    """A callback whose exceptions are shown in the view (one line for a user's mistake) instead of
    lost in the browser console; a later success clears the message."""

    def wrapper(*args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            from IPython.display import HTML, display

            out.clear_output()
            with out:
                display(HTML(error_html(exc, what)))  # type: ignore[no-untyped-call]
        else:
            if out.outputs:
                out.clear_output()

    return wrapper


def wrap(body: str) -> str:
    """Content in the themed container (with its stylesheet)."""
    return f"<div class='tcl'>{CSS}{body}</div>"


def note(text: str, *, error: bool = False) -> str:
    cls = "tcl-error" if error else "tcl-muted"
    return f"<div class='tcl'>{CSS}<div class='{cls}'>{e(text)}</div></div>"


class OpenBox(widgets.VBox):  # type: ignore[misc]
    """A path box (Enter opens), a kind selector (detected by default), an open button and an
    upload button. Loads through `open_source` (trace files, and every kind the importers read),
    shows what was opened with the importer's report (losses as warnings), and hands the result to
    `on_open`. Errors are one readable line under the box."""

    def __init__(self, on_open: Callable[[Opened], None], *, what: str = "trace") -> None:
        self.on_open = on_open
        self.path = widgets.Text(
            # short enough to read whole in the box at a projector's width; the kind menu says the rest
            placeholder="path to a file or folder; Enter opens it",
            description="open",
            tooltip=f"a {what} file, a recording, a transcript or a folder of them",
            continuous_update=False,
            layout=widgets.Layout(flex="1 1 260px", min_width="160px"),
        )
        self.kind = widgets.Dropdown(
            options=[(name if name != DETECT else "detect kind", name) for name, _ in kinds()],
            value=DETECT,
            tooltip="how to read the file: detected from its content, or one importer",
            layout=widgets.Layout(width="150px"),
        )
        self.button = widgets.Button(description="open", tooltip="open the file named in the box")
        self.upload = widgets.FileUpload(accept=ACCEPT, multiple=False, description="upload")
        self.message = widgets.HTML()
        self._last: tuple[str, float] = ("", 0.0)
        self._typed_at = 0.0
        self.button.on_click(lambda _: self.open_path(self.path.value, again=False))
        self.path.observe(self._typed, names=["value"])
        self.path.on_msg(self._message)  # Enter sends "submit" even when the text did not change
        self.kind.observe(self._kind_chosen, names=["value"])
        self.upload.observe(self._uploaded, names=["value"])
        row = widgets.HBox(
            [self.path, self.kind, self.button, self.upload], layout=widgets.Layout(flex_flow="row wrap")
        )
        super().__init__([row, self.message])
        self.add_class("tcl-open-box")

    def _typed(self, change: Any) -> None:
        self._typed_at = time.monotonic()
        self.open_path(change["new"])

    def _message(self, _: Any, content: Mapping[str, Any], buffers: Any = None) -> None:
        """Enter in the path box: open the path again (a file changed on disk, a kind chosen since).
        The page sends this before the box's new text, so it waits a moment: when new text follows,
        its change opens it and this does nothing (one open per Enter)."""
        if content.get("event") != "submit":
            return
        pressed = time.monotonic()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (called directly): at once
            self._resubmit(pressed)
            return
        loop.call_later(SUBMIT_WAIT_S, self._resubmit, pressed)

    def _resubmit(self, pressed: float) -> None:
        if self._typed_at >= pressed:
            return  # new text came with this Enter and was opened
        self._last = ("", 0.0)
        self.open_path(self.path.value, again=False)

    def _kind_chosen(self, change: Any) -> None:
        """Another kind chosen for the path in the box (already opened): read it again as that kind,
        so what is shown is never of another kind than the menu says."""
        text = str(self.path.value).strip()
        if text and self._last[0] == text:
            self._last = ("", 0.0)
            self.open_path(text, again=False)

    def _deliver(self, load: Callable[[], Opened], label: str) -> Opened | None:
        try:
            opened = load()
        except ToolcallLabError as exc:
            self.message.value = note(f"cannot open {label}: {_without(str(exc), label)}", error=True)
            return None
        report = report_html(opened)
        if not opened.traces:
            self.message.value = wrap(
                f"<div class='tcl-error'>⚠ nothing to show: no traces in {e(label)}</div>{report}"
            )
            return opened
        self.message.value = wrap(report)
        self.on_open(opened)
        return opened

    def open_path(self, path: str | Path, *, again: bool = True) -> Opened | None:
        """Open a file or folder (what Enter and the open button do). The button right after Enter
        on the same path does not open it twice; pressed later, it opens it again."""
        text = str(path).strip()
        if not text:
            if again:  # the box was cleared: nothing to say
                return None
            self.message.value = note("type a path first", error=True)
            return None
        last, at = self._last
        if not again and last == text and time.monotonic() - at < 1.0:
            return None  # the click that followed the Enter (or the blur) that opened it
        self._last = (text, time.monotonic())
        return self._deliver(lambda: open_source(text, self.kind.value), text)

    def _uploaded(self, change: Any) -> None:
        files = change["new"]
        if not files:
            return
        f = files[0]
        name = f["name"] if isinstance(f, Mapping) else getattr(f, "name", "upload")
        content = f["content"] if isinstance(f, Mapping) else getattr(f, "content", b"")
        self._deliver(lambda: open_upload(name, bytes(content), self.kind.value), name)


def _without(message: str, label: str) -> str:
    """The error without the path it starts with (the message names the file once)."""
    expanded = str(Path(label).expanduser())
    for prefix in (f"{expanded}: ", f"{label}: "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


class ExportBar(widgets.VBox):  # type: ignore[misc]
    """Buttons that save what a view shows into a folder: its timeline (SVG, PNG: the view's own
    panels, with the names, captions, warnings and legend it shows) and its tables (CSV, with the
    marks it shows). The bar says what it exports (`what`), so a view inside another keeps its own.

    Files are named after what the view shows (a long title is shortened with a hash of the whole
    title) and never overwrite an earlier export; an empty view saves nothing and says so.
    """

    def __init__(
        self,
        stem: Callable[[], str],
        panels: Callable[[], Sequence[PanelLike]],
        tables: Callable[[], Mapping[str, Sequence[Mapping[str, Any]]]],
        *,
        folder: str = "exports",
        what: str = "this view",
        kinds: Sequence[str] = ("svg", "png", "csv"),
    ) -> None:
        self.stem, self.panels, self.tables = stem, panels, tables
        self.folder = widgets.Text(value=folder, description="save to", layout=widgets.Layout(width="260px"))
        self.svg = widgets.Button(description="timeline SVG", tooltip=f"save the timeline of {what} as SVG")
        self.png = widgets.Button(description="timeline PNG", tooltip=f"save the timeline of {what} as PNG")
        self.csv = widgets.Button(description="tables CSV", tooltip=f"save the tables of {what} as CSV")
        self.message = widgets.HTML()
        self.svg.on_click(lambda _: self._save("svg"))
        self.png.on_click(lambda _: self._save("png"))
        self.csv.on_click(lambda _: self._save("csv"))
        self.label = widgets.HTML(wrap(f"<span class='tcl-muted'>export {e(what)}:</span>"))
        buttons = [b for k, b in (("svg", self.svg), ("png", self.png), ("csv", self.csv)) if k in kinds]
        row = widgets.HBox(
            [self.label, self.folder, *buttons],
            layout=widgets.Layout(flex_flow="row wrap", align_items="center"),
        )
        super().__init__([row, self.message])
        self.add_class("tcl-export-bar")

    def save(self, kind: str) -> list[Path]:
        """Write the files of one kind ('svg', 'png' or 'csv'); returns their paths.

        Raises:
            UsageError: the view shows nothing to save.
        """
        folder = Path(self.folder.value or ".").expanduser()
        title = self.stem()
        stem = export.file_stem(title)
        if kind == "csv":
            tables = {name: rows for name, rows in self.tables().items() if rows}
            if not tables:
                raise UsageError("nothing to save: the view shows no table rows")
            return [export.write_csv(rows, folder / f"{stem}_{name}.csv") for name, rows in tables.items()]
        if kind == "svg":
            return [export.write_svg(self.panels(), folder / f"{stem}_timeline.svg", title=title)]
        return [export.write_png(self.panels(), folder / f"{stem}_timeline.png", title=title)]

    def _save(self, kind: str) -> None:
        try:
            paths = self.save(kind)
        except (OSError, ToolcallLabError) as exc:
            self.message.value = note(f"could not save: {exc}", error=True)
            return
        self.message.value = note("saved " + ", ".join(str(p) for p in paths))


def box_options(view: type, given: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments a view hands on to its `widgets.VBox` (``layout=``, ``tooltip=``, ...).
    Any other is refused, naming it and the view's own options: a view must never ignore an option
    it was given (``CorpusView(folder, timings="recorded")`` would show unfiltered numbers)."""
    known = {n for n in widgets.VBox.class_trait_names() if not n.startswith("_")} - {"children"}
    unknown = sorted(k for k in given if k not in known)
    if unknown:
        import inspect

        own = [
            p.name
            for p in inspect.signature(view).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]
        raise UsageError(
            f"{view.__name__}: unknown option(s) {', '.join(map(repr, unknown))}; its options: "
            f"{', '.join(own)} (and a widget box's, such as layout=)"
        )
    return given


class StaticFallback:
    """A view that also prints a static HTML copy of itself, for renderers without the widget's
    JavaScript (a code host, `jupyter nbconvert --to html` offline, a notebook opened without a
    kernel). The copy is its own output right after the widget, kept current as the view changes
    (a display id), and hidden by CSS wherever the widget rendered next to it."""

    _static_ids: list[str]
    _static_at: float = 0.0

    def static_html(self) -> str:
        raise NotImplementedError

    def save_html(self, path: str | Path, *, title: str = "") -> Path:
        """This view as a standalone HTML page (`export.save_html`): opens in any browser, no kernel."""
        return export.save_html(self, path, title=title)

    def _static_bundle(self) -> dict[str, str]:
        return {
            "text/html": f"<div class='tcl tcl-static'>{CSS}{self.static_html()}</div>",
            "text/plain": f"(static copy of the {type(self).__name__} above)",
        }

    def _ipython_display_(self) -> None:
        from IPython.display import display

        widget_bundle: dict[str, Any] = widgets.DOMWidget._repr_mimebundle_(self)
        display(widget_bundle, raw=True)  # type: ignore[no-untyped-call]
        display_id = uuid.uuid4().hex
        if not hasattr(self, "_static_ids") or self._static_ids is None:
            self._static_ids = []
        self._static_ids.append(display_id)
        display(self._static_bundle(), raw=True, display_id=display_id)  # type: ignore[no-untyped-call]

    def refresh_static(self, *, min_interval_s: float = 0.0) -> None:
        """Bring the printed static copies up to date (after the view changed)."""
        ids = getattr(self, "_static_ids", None)
        if not ids:
            return
        now = time.monotonic()
        if min_interval_s and now - self._static_at < min_interval_s:
            return
        self._static_at = now
        from IPython.display import update_display

        bundle = self._static_bundle()
        for display_id in ids:
            update_display(bundle, raw=True, display_id=display_id)  # type: ignore[no-untyped-call]

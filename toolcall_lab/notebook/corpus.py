"""The researcher's main loop as one view: a corpus compared under every mode, sorted as you like,
and the side-by-side comparison of whichever trace you pick."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import traitlets

from toolcall_lab.notebook._controls import ExportBar, StaticFallback, guarded, note, wrap
from toolcall_lab.notebook.compare import CompareView, mode_name
from toolcall_lab.notebook.html import comparable, fmt, table_html
from toolcall_lab.notebook.loading import IMPORT_FIRST, TRACE, import_hint, kind_of
from toolcall_lab.notebook.theme import e, middle
from toolcall_lab.records import MODES
from toolcall_lab.trace import Trace


def not_read(folder: Path, read: set[Path]) -> list[tuple[str, str]]:
    """(path inside `folder`, what it is and how to import it) for every file `compare` is not
    given: anything but ``*.json`` (a ``.jsonl`` transcript, a ``.sse`` recording), hidden files
    and folders aside."""
    out = []
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder)
        if f in read or not f.is_file() or any(part.startswith(".") for part in rel.parts):
            continue
        out.append((str(rel), import_hint(f, kind_of(f)) if f.stat().st_size else "an empty file"))
    return out


PREFERRED = ("trace", "mode", "wall_time_s", "speedup_vs_sequential", "efficiency", "lower_bound_s")


class CorpusView(StaticFallback, widgets.VBox):  # type: ignore[misc]
    """`compare` over a folder (or list) of traces as a sortable, paged table of every column it
    returns; picking a row opens that trace's `CompareView` below.

    Rows of modes that skipped calls are marked not comparable. Traces that could not be compared
    are listed with the reason, never dropped silently.
    """

    sort_by = traitlets.Unicode("", allow_none=True)
    descending = traitlets.Bool(True)
    mode_filter = traitlets.Unicode("all modes", allow_none=True)
    page = traitlets.Int(1)
    selected = traitlets.Int(-1, help="row (index into comparison.runs) whose trace is open; -1: none")

    def __init__(
        self,
        source: str | Path | Sequence[Trace | str | Path] | None = None,
        modes: Sequence[Any] = MODES,
        *,
        round_trip_s: float = 0.05,
        page_size: int = 20,
        **kwargs: Any,
    ) -> None:
        self.modes_arg, self.round_trip_s, self.page_size = tuple(modes), round_trip_s, page_size
        self.errors = widgets.Output()
        self.folder = widgets.Text(
            placeholder="folder of trace files (*.json); Enter compares it",
            description="corpus",
            continuous_update=False,
            layout=widgets.Layout(flex="1 1 260px", min_width="160px"),
        )
        self.folder_button = widgets.Button(description="compare folder")
        self._last_folder: tuple[str, float] = ("", 0.0)
        self.folder_button.on_click(guarded(self.errors, lambda _: self._load_folder(again=False)))
        self.folder.observe(guarded(self.errors, lambda _: self._load_folder()), names=["value"])
        self.message = widgets.HTML()
        self.sort_box = widgets.Dropdown(description="sort by")
        self.order_box = widgets.ToggleButtons(options=[("descending", True), ("ascending", False)])
        self.mode_box = widgets.Dropdown(description="mode")
        self.page_box = widgets.BoundedIntText(value=1, min=1, max=1, description="page")
        self.table = widgets.HTML()
        self.picker = widgets.Select(description="open", layout=widgets.Layout(width="98%"))
        # keyboard: JupyterLab keeps the arrow keys of a list box for moving between cells, so a row
        # number (typed, Enter) and previous / next buttons open rows too
        self.row_box = widgets.BoundedIntText(
            value=0,
            min=0,
            max=0,
            description="row #",
            continuous_update=False,
            layout=widgets.Layout(width="180px"),
        )
        self.open_button = widgets.Button(description="open row", tooltip="open the row numbered in the box")
        self.prev_button = widgets.Button(
            description="◀ previous row", tooltip="open the row above in this order"
        )
        self.next_button = widgets.Button(
            description="next row ▶", tooltip="open the row below in this order"
        )
        self.open_button.on_click(guarded(self.errors, lambda _: self._open(int(self.row_box.value))))
        self._syncing = False
        self.row_box.observe(
            guarded(self.errors, lambda c: None if self._syncing else self._open(int(c["new"]))),
            names=["value"],
        )
        self.prev_button.on_click(guarded(self.errors, lambda _: self._step(-1)))
        self.next_button.on_click(guarded(self.errors, lambda _: self._step(1)))
        self.detail = widgets.VBox()
        self.problems = widgets.HTML()
        self.export = ExportBar(
            lambda: f"corpus {self.source_label}",
            lambda: [],
            lambda: {"runs": self._records(), "errors": self._records("errors")},
            what="the corpus table",
            kinds=("csv",),  # the corpus has no timeline: an opened row's comparison has its own bar
        )
        controls = widgets.HBox(
            [self.sort_box, self.order_box, self.mode_box, self.page_box],
            layout=widgets.Layout(flex_flow="row wrap"),
        )
        super().__init__(
            [
                widgets.HBox([self.folder, self.folder_button], layout=widgets.Layout(flex_flow="row wrap")),
                self.message,
                controls,
                self.table,
                self.problems,
                self.picker,
                widgets.HBox(
                    [self.row_box, self.open_button, self.prev_button, self.next_button],
                    layout=widgets.Layout(flex_flow="row wrap"),
                ),
                self.detail,
                self.export,
                self.errors,
            ],
            **kwargs,
        )
        self.add_class("tcl-view")
        self.add_class("tcl-corpus-view")
        widgets.link((self.sort_box, "value"), (self, "sort_by"))
        widgets.link((self.order_box, "value"), (self, "descending"))
        widgets.link((self.mode_box, "value"), (self, "mode_filter"))
        widgets.link((self.page_box, "value"), (self, "page"))
        self.observe(
            guarded(self.errors, self.render), names=["sort_by", "descending", "mode_filter", "page"]
        )
        self.picker.observe(guarded(self.errors, self._picked), names=["value"])
        self.comparison: Any = None
        self.not_read: list[tuple[str, str]] = []
        """Files of the compared folder that were not read (not ``*.json``), and what they are."""
        self.hints: dict[str, str] = {}
        """Per trace that failed to load because it is not a trace file: how to import it."""
        self.items: dict[str, Trace | Path] = {}
        self.base: Path | None = None
        self.source_label = ""
        if source is not None:
            self.load(source)
        else:
            self.message.value = note("type a folder of trace files above, or pass traces to CorpusView(...)")

    def load(self, source: str | Path | Sequence[Trace | str | Path]) -> None:
        """Compare a folder, or a list of traces / trace paths, under the view's modes."""
        from toolcall_lab.analysis import compare
        from toolcall_lab.trace_files import iter_trace_paths

        if isinstance(source, str | Path):
            folder = Path(source).expanduser()
            if not folder.exists():
                self.message.value = note(f"cannot compare {folder}: no such file or folder", error=True)
                return
            if not folder.is_dir():
                self.message.value = note(
                    f"cannot compare {folder}: a file, not a folder "
                    "(open a file in a TraceView or CompareView)",
                    error=True,
                )
                return
            items: list[Trace | Path] = list(iter_trace_paths([folder]))
            self.base, self.source_label = folder, folder.name
            self.not_read = not_read(folder, {p for p in items if isinstance(p, Path)})
        else:
            items = [x if isinstance(x, Trace) else Path(x) for x in source]
            self.base, self.source_label = None, f"{len(items)} traces"
            self.not_read = []
        self.hints = {}
        if not items:
            self.comparison = None
            self.table.value = ""
            self.message.value = note(f"no trace files (*.json) in {source}", error=True)
            self.problems.value = wrap(self._not_read_html())
            self.refresh_static()
            return
        self.items = {(x.metadata.title if isinstance(x, Trace) else str(x)): x for x in items}
        if len(self.items) < len(items):  # compare names a Trace's rows by its title
            self.message.value = note(
                f"{len(items) - len(self.items)} trace(s) share a title with another: compare would mix "
                "their rows; give every trace a distinct title (or pass file paths)",
                error=True,
            )
            return
        self.comparison = compare(items, self.modes_arg, round_trip_s=self.round_trip_s)
        runs = self.comparison.runs
        errors = self.comparison.errors
        for trace in errors.loc[errors["mode"].isna(), "trace"] if len(errors) else ():
            path = Path(str(trace))
            kind = kind_of(path) if path.is_file() else TRACE
            if kind != TRACE:  # a recording, a transcript, any JSON: it has to be imported first
                self.hints[str(trace)] = import_hint(path, kind)
        n_bad = len(errors)
        n_unread = len(self.not_read)
        self.message.value = note(
            f"{len(items)} trace(s) × {len(self.modes_arg)} mode(s): {len(runs)} runs compared"
            + (f"; {n_bad} could not be compared" if n_bad else "")
            + (f"; {n_unread} file(s) of the folder not read (not *.json trace files)" if n_unread else "")
            + (" (listed below)" if n_bad or n_unread else "")
        )
        columns = list(runs.columns)
        self.sort_box.options = columns
        default = (
            "speedup_vs_sequential"
            if "speedup_vs_sequential" in columns
            else (columns[0] if columns else None)
        )
        self.mode_box.options = ["all modes", *[mode_name(m) for m in self.modes_arg]]
        self.mode_box.value = "all modes"
        self.page = 1
        if default is not None:
            if self.sort_box.value == default:
                self.render()
            self.sort_box.value = default
        else:
            self.render()

    def rows(self) -> Any:
        """The runs table as shown: filtered by mode, sorted (not paged)."""
        runs = self.comparison.runs
        if runs.empty:
            return runs
        if self.mode_filter not in (None, "all modes"):
            runs = runs[runs["mode"] == self.mode_filter]
        if self.sort_by in runs:
            key = runs[self.sort_by]
            if str(self.sort_by).startswith("speedup"):  # a run that is not comparable has no speedup to rank
                if "comparable" in runs:
                    key = key.where(runs["comparable"].astype(bool))
                elif "skipped" in runs:
                    key = key.where(runs["skipped"] == 0)
            order = key.sort_values(ascending=not self.descending, na_position="last", kind="stable").index
            runs = runs.loc[order]
        return runs

    def render(self, _: Any = None) -> None:
        if self.comparison is None:
            return
        runs = self.rows()
        pages = max(1, -(-len(runs) // self.page_size))
        self.page_box.max = pages
        page = min(max(self.page, 1), pages)
        shown = runs.iloc[(page - 1) * self.page_size : page * self.page_size]
        columns = [c for c in PREFERRED if c in shown] + [c for c in shown.columns if c not in PREFERRED]
        records = shown.to_dict("records")
        arrow = "▼" if self.descending else "▲"
        self.table.value = wrap(
            f"<div class='tcl-muted'>{len(runs)} rows, sorted by {e(self.sort_by)} {arrow}, page {page} of "
            f"{pages}; every column compare returned</div>"
            + table_html(records, columns, index=list(shown.index), labels=self._labels())
        )
        self.row_box.max = max(int(self.comparison.runs.index.max()), 0) if len(self.comparison.runs) else 0
        self.picker.options = [
            (self._label(i, row), int(i)) for i, row in zip(shown.index, records, strict=True)
        ]
        self.picker.rows = min(8, max(2, len(records)))
        self.picker.value = None
        errs = self.comparison.errors
        hints = "".join(f"<li>{e(self.short(t))}: {e(h)}</li>" for t, h in self.hints.items())
        problems = (
            f"<b>could not compare {len(errs)}:</b>"
            + table_html(errs.to_dict("records"), list(errs.columns), labels={"trace": self.cell})
            + (
                f"<div class='tcl-warn'>⚠ not trace files ({len(self.hints)}): {e(IMPORT_FIRST)}"
                f"</div><ul class='tcl-notes'>{hints}</ul>"
                if hints
                else ""
            )
            if len(errs)
            else ""
        ) + self._not_read_html()
        self.problems.value = wrap(problems) if problems else ""
        self.refresh_static()

    def _not_read_html(self) -> str:
        """The folder's files that are not trace files (``*.json``): named, with what they look like
        and how to bring them in, never left out silently."""
        if not self.not_read:
            return ""
        shown = "".join(f"<li>{e(name)}: {e(what)}</li>" for name, what in self.not_read[:50])
        more = f"<li>… and {len(self.not_read) - 50} more</li>" if len(self.not_read) > 50 else ""
        return (
            f"<div class='tcl-warn'>⚠ not read: {len(self.not_read)} file(s) of the folder are not trace "
            f"files (*.json), so nothing from them is in the table; {e(IMPORT_FIRST)}:</div>"
            f"<ul class='tcl-notes'>{shown}{more}</ul>"
        )

    def short(self, trace: Any) -> str:
        """A trace as the table shows it: its path inside the compared folder, or its file name
        (the whole path is in the cell's tooltip)."""
        text = str(trace)
        path = Path(text)
        if self.base is not None and path.is_relative_to(self.base):
            return str(path.relative_to(self.base))
        return path.name if path.suffix == ".json" else text

    def cell(self, trace: Any) -> str:
        """`short`, cut in the middle when long: the end (``__agent_WZQcJH44_turn01``) is what tells
        traces of one session apart."""
        return middle(self.short(trace), 44)

    def _labels(self) -> dict[str, Any]:
        return {"trace": self.cell, "title": lambda t: middle(str(t), 44) if isinstance(t, str) else fmt(t)}

    def _load_folder(self, *, again: bool = True) -> None:
        text = str(self.folder.value).strip()
        if not text:
            return
        last, at = self._last_folder
        if not again and last == text and time.monotonic() - at < 1.0:
            return  # the click right after the Enter that compared it
        self._last_folder = (text, time.monotonic())
        self.load(text)

    def _open(self, index: int) -> None:
        self.open_row(index)

    def _step(self, delta: int) -> None:
        """Open the row before or after the open one, in the order shown (sorted and filtered)."""
        order = [int(i) for i in self.rows().index]
        if not order:
            return
        at = order.index(self.selected) + delta if self.selected in order else 0
        self.open_row(order[max(0, min(at, len(order) - 1))])

    def _label(self, i: Any, row: dict[str, Any]) -> str:
        speed = row.get("speedup_vs_sequential")
        speed_text = "not comparable" if comparable(row) else f"{fmt(speed)}x"
        return (
            f"#{i} {str(row.get('title') or self.short(row.get('trace')))[:48]} · {row.get('mode')} · "
            f"{fmt(row.get('wall_time_s'), 'wall_time_s')} s · {speed_text}"
        )

    def _picked(self, change: Any) -> None:
        if change["new"] is None:
            return
        self.open_row(int(change["new"]))

    def open_row(self, index: int) -> CompareView:
        """Open the side-by-side comparison of the trace of row `index` of `comparison.runs`."""
        from toolcall_lab.exceptions import UsageError
        from toolcall_lab.trace_files import load

        if self.comparison is None or index not in self.comparison.runs.index:
            raise UsageError(f"no row #{index} in the table")
        row = self.comparison.runs.loc[index]
        item = self.items[str(row["trace"])]
        trace = item if isinstance(item, Trace) else load(item)
        view = CompareView(trace, self.modes_arg, round_trip_s=self.round_trip_s)
        self.detail.children = [
            widgets.HTML(wrap(f"<b>row #{index}: {e(self.short(row['trace']))}</b>")),
            view,
        ]
        self.selected = index
        if self.row_box.value != index:
            self._syncing = True
            try:
                self.row_box.value = index
            finally:
                self._syncing = False
        self.refresh_static()
        return view

    def _records(self, table: str = "runs") -> list[dict[str, Any]]:
        """A table as the view shows it: a run that is not comparable has no speedup (its reason is
        in ``not_comparable_why``), as in the table on screen."""
        if self.comparison is None:
            return []
        rows = list(getattr(self.comparison, table).to_dict("records"))
        if table == "runs":
            rows = [
                {k: (None if comparable(r) and str(k).startswith("speedup") else v) for k, v in r.items()}
                for r in rows
            ]
        return rows

    def static_html(self) -> str:
        """The static copy (and `save_html`): every row of the table as sorted and filtered, not
        only the page on screen (a page has no buttons to reach the others)."""
        if self.comparison is None:
            return wrap(self.message.value + self.table.value + self.problems.value)
        runs = self.rows()
        columns = [c for c in PREFERRED if c in runs] + [c for c in runs.columns if c not in PREFERRED]
        arrow = "▼" if self.descending else "▲"
        table = wrap(
            f"<div class='tcl-muted'>all {len(runs)} rows, sorted by {e(self.sort_by)} {arrow}; every "
            "column compare returned</div>"
            + table_html(
                runs.to_dict("records"), columns, index=list(runs.index), labels={"trace": self.cell}
            )
        )
        return wrap(self.message.value + table + self.problems.value)

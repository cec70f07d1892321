"""The researcher's main loop as one view: a corpus compared under every mode, sorted as you like,
and the side-by-side comparison of whichever trace you pick."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import traitlets

from toolcall_lab._rules import check_round_trip
from toolcall_lab.notebook._controls import ExportBar, StaticFallback, box_options, guarded, note, wrap
from toolcall_lab.notebook.compare import CompareView, mode_name
from toolcall_lab.notebook.html import assumed, comparable, fmt, speedup_text, table_html
from toolcall_lab.notebook.loading import IMPORT_FIRST, TRACE, import_hint, kind_of
from toolcall_lab.notebook.theme import e, middle, plural
from toolcall_lab.records import MODES
from toolcall_lab.trace import Trace

IMPORT_REPORT = "import_report.txt"
"""What `toolcall-lab import` writes beside the traces it imports: every issue of the import."""


def not_read(folder: Path, read: set[Path]) -> list[tuple[str, str]]:
    """(path inside `folder`, what it is and how to import it) for every file `compare` is not
    given: anything but ``*.json`` (a ``.jsonl`` transcript, a ``.sse`` recording), hidden files
    and folders aside, and the import's own report (`IMPORT_REPORT`: not data, see `reports`)."""
    out = []
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder)
        if f in read or not f.is_file() or any(part.startswith(".") for part in rel.parts):
            continue
        if f.name == IMPORT_REPORT:
            continue
        out.append((str(rel), import_hint(f, kind_of(f)) if f.stat().st_size else "an empty file"))
    return out


def reports(folder: Path) -> list[str]:
    """The import reports in `folder` (`toolcall-lab import` writes one beside its traces)."""
    return sorted(
        str(f.relative_to(folder))
        for f in folder.rglob(IMPORT_REPORT)
        if not any(part.startswith(".") for part in f.relative_to(folder).parts)
    )


def mid_cut(name: str, tail: int = 22) -> str:
    """A name whose start the page shrinks to an ellipsis when its cell is narrow, its last `tail`
    characters always shown (the end tells names of one session apart)."""
    tail = min(len(name), tail)
    return (
        f"<span class='tcl-mid'><span class='tcl-mid-a'>{e(name[:-tail] if tail < len(name) else '')}"
        f"</span><span class='tcl-mid-b'>{e(name[-tail:])}</span></span>"
    )


class Names(dict[str, str]):
    """Display names of a corpus's traces (full name -> shown), and the start they all share."""

    common: str = ""


SEPARATORS = "_-./ "


def display_names(traces: Sequence[str], short: Any) -> Names:
    """Each trace's name as lists and tables show it: the start every name shares (a session's, a
    model's: ``claude-code_v1.0.98_sonnet-4_session-fe5e1c67_170calls_``) cut at a separator and
    replaced by "…" (the last token they share stays, for context), so what tells them apart is what
    is shown, at any width."""
    shorts = {t: str(short(t)) for t in traces}
    out = Names(shorts)
    distinct = set(shorts.values())
    if len(distinct) < 2:
        return out
    first, last = min(distinct), max(distinct)  # (the sorted extremes share what all share)
    prefix = first[
        : next((k for k, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first))
    ]
    shared = prefix.rstrip(SEPARATORS)  # the last whole token they share stays, for context
    cut = max((shared.rfind(ch) for ch in SEPARATORS), default=-1) + 1
    if cut < 16:
        return out
    out.common = prefix[:cut]
    for t, name in shorts.items():
        out[t] = "…" + name[cut:]
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
        from toolcall_lab.exceptions import UsageError

        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise UsageError(
                f"CorpusView(page_size={page_size!r}): page_size={page_size!r}: must be an integer >= 1"
            )
        check_round_trip(round_trip_s, "CorpusView(round_trip_s=...)")  # (compare's rule, up front)
        from toolcall_lab.analysis import modes_list, run_capped

        modes = modes_list(modes, "CorpusView(modes=...)")
        run_capped(modes, None, "CorpusView(modes=...)")  # (bad specs refused before any replay)
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
        self.folder.observe(guarded(self.errors, self._folder_typed), names=["value"])
        self.folder.on_msg(guarded(self.errors, self._folder_message))  # Enter, the text unchanged
        self._filling = False
        self.message = widgets.HTML()
        self.sort_box = widgets.Dropdown(description="sort by")
        self.order_box = widgets.ToggleButtons(options=[("descending", True), ("ascending", False)])
        self.mode_box = widgets.Dropdown(description="mode")
        self.page_box = widgets.BoundedIntText(value=1, min=1, max=1, description="page")
        self.table = widgets.HTML()
        self.picker = widgets.Select(description="open", layout=widgets.Layout(width="98%"))
        # keyboard: JupyterLab keeps the arrow keys of a list box for moving between cells, so a row
        # number (typed, Enter) and previous / next buttons open rows too
        self.row_box = widgets.IntText(
            value=0,
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
        self.row_message = widgets.HTML()
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
                self.row_message,
                self.detail,
                self.export,
                self.errors,
            ],
            **box_options(CorpusView, kwargs),
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
        self._names: Names | None = None
        self.base: Path | None = None
        self.source_label = ""
        if source is not None:
            self.load(source)
        else:
            self.message.value = note("type a folder of trace files above, or pass traces to CorpusView(...)")

    def load(self, source: str | Path | Sequence[Trace | str | Path]) -> None:
        """Compare a folder, or a list of traces / trace paths, under the view's modes."""
        from toolcall_lab.analysis import compare, trace_keys
        from toolcall_lab.trace_files import iter_trace_paths

        if isinstance(source, str | Path):
            if str(self.folder.value) != str(source):  # the box shows what is compared
                self._filling = True
                try:
                    self.folder.value = str(source)
                finally:
                    self._filling = False
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
        # the keys compare names each trace's rows by (traces sharing a title get a suffix each)
        self.items = dict(zip(trace_keys(items), items, strict=True))
        self.comparison = compare(items, self.modes_arg, round_trip_s=self.round_trip_s)
        runs = self.comparison.runs
        errors = self.comparison.errors
        for trace in errors.loc[errors["mode"].isna(), "trace"] if len(errors) else ():
            item = self.items.get(str(trace))
            path = Path(str(trace if item is None or isinstance(item, Trace) else item))
            kind = kind_of(path) if path.is_file() else TRACE
            if kind != TRACE:  # a recording, a transcript, any JSON: it has to be imported first
                self.hints[str(trace)] = import_hint(path, kind)
        unread = errors[errors["mode"].isna()] if len(errors) else errors
        failed_runs = len(errors) - len(unread)
        n_ok = len(items) - len(unread)
        n_unread = len(self.not_read)
        self.message.value = note(
            f"{n_ok} of {plural(len(items), 'trace')} compared under {plural(len(self.modes_arg), 'mode')}: "
            f"{plural(len(runs), 'run')}"
            + (f"; {plural(len(unread), 'trace')} could not be read" if len(unread) else "")
            + (f"; {plural(failed_runs, 'run')} failed" if failed_runs else "")
            + (
                f"; {plural(n_unread, 'file')} of the folder not read (not *.json trace files)"
                if n_unread
                else ""
            )
            + (" (listed below)" if len(errors) or n_unread else "")
            + "".join(f"; {said}" for said in self.comparison.notes)
        )
        # names as the table shows them, from the traces compared (the start they all share cut)
        self._names = display_names(sorted({str(t) for t in runs["trace"]}) if len(runs) else [], self.short)

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
        if len(runs):
            head = (
                f"{plural(len(runs), 'row')}, sorted by {e(self.sort_by)} {arrow}, page {page} of {pages}; "
                "every column compare returned"
            )
        else:
            head = "no runs to show"
        common = self._names.common if self._names else ""
        if common:
            head += f"; every trace name begins {e(common)}… (cut here; hover a name for the whole path)"
        self.table.value = wrap(
            f"<div class='tcl-muted'>{head}</div>"
            + table_html(
                records,
                columns,
                index=list(shown.index),
                labels=self._labels(),
                html_cells={"trace": self._name_cell, "title": lambda t: mid_cut(str(t))},
            )
        )
        self.picker.options = [
            (self._label(i, row), int(i)) for i, row in zip(shown.index, records, strict=True)
        ]
        self.picker.rows = min(8, max(2, len(records)))
        self.picker.value = None
        self.problems.value = wrap(self._problems_html()) if self._problems_html() else ""
        self.refresh_static()

    def _problems_html(self) -> str:
        """Traces that could not be compared (each once, with what it is and how to bring it in when
        it is not a trace file), runs that failed, the folder's files that are not traces, and the
        import reports it holds."""
        errs = self.comparison.errors if self.comparison is not None else None
        out = ""
        if errs is not None and len(errs):
            rows = [
                {**r, "what it is": self.hints.get(str(r.get("trace")), "")} if self.hints else r
                for r in errs.to_dict("records")
            ]
            columns = [*errs.columns, *(["what it is"] if self.hints else [])]
            out += (
                f"<b>could not compare {plural(len(errs), 'row')}:</b>"
                + table_html(rows, columns, labels={"trace": self.cell})
                + (
                    f"<div class='tcl-warn'>⚠ {len(self.hints)} of these "
                    f"{'is not a trace file' if len(self.hints) == 1 else 'are not trace files'}: "
                    f"{e(IMPORT_FIRST)}</div>"
                    if self.hints
                    else ""
                )
            )
        out += self._not_read_html()
        if self.base is not None and (found := reports(self.base)):
            out += (
                f"<div class='tcl-muted'>import report{'s' if len(found) != 1 else ''} in the folder (what "
                f"each import left out or could not read; not data): {e(', '.join(found))}</div>"
            )
        return out

    def _name_cell(self, trace: Any) -> str:
        """A trace's name in a table cell: the part of the names they all share cut, and what is left
        cut in the middle by the page when it is too narrow (the end stays: it tells traces apart)."""
        return mid_cut(self._names.get(str(trace), self.short(trace)) if self._names else self.short(trace))

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

    def _folder_typed(self, change: Any) -> None:
        if not self._filling:
            self._load_folder()

    def _folder_message(self, _: Any, content: dict[str, Any], buffers: Any = None) -> None:
        """Enter in the folder box with its text unchanged: compare the folder again (files may have
        been added); new text is compared by its change instead."""
        if content.get("event") == "submit" and str(self.folder.value).strip() == self._last_folder[0]:
            self._last_folder = ("", 0.0)
            self._load_folder(again=False)

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
        if self.comparison is None or index not in self.comparison.runs.index:
            rows = self.comparison.runs.index if self.comparison is not None else []
            where = (
                f"the table's rows are #{min(rows)} to #{max(rows)}" if len(rows) else "the table has no rows"
            )
            self.row_message.value = note(f"no row #{index}: {where}", error=True)
            return
        self.open_row(index)

    def _step(self, delta: int) -> None:
        """Open the row before or after the open one, in the order shown (sorted and filtered)."""
        order = [int(i) for i in self.rows().index]
        if not order:
            self.row_message.value = note("no rows to open", error=True)
            return
        if self.selected not in order:
            self.open_row(order[0])
            return
        at = order.index(self.selected) + delta
        if not 0 <= at < len(order):
            end = "last" if delta > 0 else "first"
            self.row_message.value = note(f"row #{self.selected} is the {end} row in this order", error=True)
            return
        self.open_row(order[at])

    def _label(self, i: Any, row: dict[str, Any]) -> str:
        """A row in the list: number and mode first, then the trace's name as it tells traces apart
        (what they all share cut), its wall time and speedup (always two places)."""
        speed = row.get("speedup_vs_sequential")
        speed_text = "not comparable" if comparable(row) else speedup_text(row, speed)
        trace = str(row.get("trace"))
        name = self._names.get(trace, self.short(trace)) if self._names else self.short(trace)
        return (
            f"#{i} {row.get('mode')} · {middle(name, 40)} · {fmt(row.get('wall_time_s'), 'wall_time_s')} s · "
            f"{speed_text}"
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
        self.row_message.value = ""
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
                {
                    **{
                        k: (None if comparable(r) and str(k).startswith("speedup") else v)
                        for k, v in r.items()
                    },
                    "speedup_rests_on": "" if comparable(r) else assumed(r),
                }
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
            f"<div class='tcl-muted'>all {plural(len(runs), 'row')}, sorted by {e(self.sort_by)} {arrow}; "
            "every column compare returned</div>"
            + table_html(
                runs.to_dict("records"),
                columns,
                index=list(runs.index),
                labels=self._labels(),
                html_cells={"trace": self._name_cell, "title": lambda t: mid_cut(str(t))},
            )
        )
        return wrap(self.message.value + table + self.problems.value)

"""Saving what a view shows: timelines as SVG or PNG, tables as CSV, a whole view as an HTML page
(no widgets here: a view is anything with a `static_html()`).

Nothing is ever overwritten: a file name already taken gets a ``-2``, ``-3``... suffix, and a
long title is shortened with a hash of the whole title, so two views never save over each other.
An empty view saves nothing and says so.
"""

from __future__ import annotations

import csv
import hashlib
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from toolcall_lab._unicode import LONE_SURROGATE, escape
from toolcall_lab.exceptions import UsageError
from toolcall_lab.notebook.theme import CSS, e
from toolcall_lab.notebook.timeline import PanelLike, as_panel, paired, timeline_file

Panels = Sequence[PanelLike]
STEM_CHARS = 60


def calls_rows(doc: Mapping[str, Any], label: str = "") -> list[dict[str, Any]]:
    """One row per tool call of a serialized trace: round, id, name, status, times, arguments."""
    rows = []
    for r in doc["rounds"]:
        for position, c, x in paired(r):
            x = x or {}
            timing = x.get("timing") if isinstance(x.get("timing"), dict) else {}
            rows.append(
                {
                    **({"run": label} if label else {}),
                    "round": r["round_index"],
                    "position": position,
                    "mode": r["mode"],
                    "tool_call_id": c["tool_call_id"],
                    "name": c["name"],
                    "status": x.get("status", "skipped"),
                    "queued_at": x.get("queued_at"),
                    "started_at": x.get("started_at"),
                    "ended_at": x.get("ended_at"),
                    "duration_s": x.get("duration_s"),
                    "timing": (timing or {}).get("source", ""),
                    "arguments": c["arguments"],
                    "result": x.get("result", ""),
                }
            )
    return rows


def file_stem(title: str) -> str:
    """A file-name stem from a title: safe characters only; a title longer than the stem keeps its
    start and gets a hash of the whole title, so long titles that share a start stay apart."""
    safe = re.sub(r"_+", "_", "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in title)).strip("._")
    if len(safe) <= STEM_CHARS:
        return safe or "view"
    digest = hashlib.sha1(title.encode("utf-8")).hexdigest()[:8]
    return f"{safe[:STEM_CHARS].rstrip('._')}_{digest}"


def free_path(path: Path) -> Path:
    """`path`, or with a ``-2``, ``-3``... suffix if that name is taken: an export never overwrites."""
    n, candidate = 2, path
    while candidate.exists():
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
        n += 1
    return candidate


def _plain(value: Any) -> Any:
    """A float as people read it in a CSV: 3.8999999999999995 -> 3.9 (kept to the nanosecond, far
    below anything measured), NaN as an empty cell; everything else unchanged."""
    if isinstance(value, float) and not isinstance(value, bool):
        if math.isnan(value):
            return ""
        return round(value, 9) + 0.0  # + 0.0: no "-0.0"
    return value


def write_csv(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Rows (dicts) as CSV, columns in first-seen order, into a new file (returns where it went).

    Raises:
        UsageError: no rows (an empty file would look like a finished export).
    """
    if not rows:
        raise UsageError("nothing to save: the table has no rows")
    p = free_path(Path(path))
    p.parent.mkdir(parents=True, exist_ok=True)
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    cells = [{k: _plain(v) for k, v in row.items()} for row in rows]
    hits = [
        f"row {i} column {k}"
        for i, row in enumerate(cells)
        for k, v in row.items()
        if isinstance(v, str) and LONE_SURROGATE.search(v)
    ]
    if hits:  # a CSV file is UTF-8: such a cell cannot hold the code point itself
        warnings.warn(
            f"{p}: lone surrogates written as \\uXXXX escapes in {len(hits)} cell(s): "
            + ", ".join(hits[:10])
            + (" ..." if len(hits) > 10 else ""),
            UserWarning,
            stacklevel=2,
        )
        cells = [{k: escape(v) if isinstance(v, str) else v for k, v in row.items()} for row in cells]
    with p.open("x", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(cells)
    return p


def _check(panels: Panels) -> None:
    if not any(as_panel(p).rounds for p in panels):
        raise UsageError("nothing to save: the view shows no rounds")


def write_svg(panels: Panels, path: str | Path, *, title: str = "") -> Path:
    """The timeline of every panel as one SVG file, titled (returns where it went)."""
    _check(panels)
    p = free_path(Path(path))
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("x", encoding="utf-8", errors="backslashreplace") as fh:  # lone surrogates as \\udXXX
        fh.write(timeline_file(panels, title=title))
    return p


def write_png(panels: Panels, path: str | Path, *, title: str = "") -> Path:
    """The same timeline drawn by matplotlib (PNG needs a rasteriser; matplotlib is one)."""
    from toolcall_lab.plotting import timeline_figure

    _check(panels)
    p = free_path(Path(path))
    p.parent.mkdir(parents=True, exist_ok=True)
    timeline_figure(panels, suptitle=title, save=p, show=False)
    return p


class HasStaticHtml(Protocol):
    def static_html(self) -> str: ...


def save_html(view: HasStaticHtml, path: str | Path, *, title: str = "") -> Path:
    """One view as a standalone HTML page (returns where it went): its static copy, the one a
    notebook prints beside the widget, with the stylesheet; no kernel, no network, no widget
    JavaScript needed (the stream stepper still steps: its few lines of script come with it).

    Raises:
        UsageError: the view shows nothing yet (an empty page would look like a finished export).
    """
    body = view.static_html()
    if not body.strip():
        raise UsageError("nothing to save: the view shows nothing yet")
    name = title or type(view).__name__
    p = free_path(Path(path))
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("x", encoding="utf-8", errors="backslashreplace") as fh:  # lone surrogates as \\udXXX
        fh.write(
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{e(name)}</title></head><body style='margin:12px'>"
            f"<div class='tcl tcl-static'>{CSS}{body}</div></body></html>\n"
        )
    return p

"""Saving what a view shows: timelines as SVG or PNG, tables as CSV (no widgets here)."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from toolcall_lab.notebook.timeline import timeline_file

Panels = Sequence[tuple[str, Sequence[dict[str, Any]]]]


def calls_rows(doc: Mapping[str, Any], label: str = "") -> list[dict[str, Any]]:
    """One row per tool call of a serialized trace: round, id, name, status, times, arguments."""
    rows = []
    for r in doc["rounds"]:
        by_id = {x["tool_call_id"]: x for x in r["tool_executions"]}
        for c in r["tool_calls"]:
            x = by_id.get(c["tool_call_id"]) or {}
            timing = x.get("timing") if isinstance(x.get("timing"), dict) else {}
            rows.append(
                {
                    **({"run": label} if label else {}),
                    "round": r["round_index"],
                    "mode": r["mode"],
                    "tool_call_id": c["tool_call_id"],
                    "name": c["name"],
                    "status": x.get("status", "skipped"),
                    "started_at": x.get("started_at"),
                    "ended_at": x.get("ended_at"),
                    "duration_s": x.get("duration_s"),
                    "timing": (timing or {}).get("source", ""),
                    "arguments": c["arguments"],
                    "result": x.get("result", ""),
                }
            )
    return rows


def write_csv(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Rows (dicts) as CSV, columns in first-seen order; values exactly as computed (not rounded)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    with p.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return p


def write_svg(panels: Panels, path: str | Path, *, round_trip_s: float = 0.0) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(timeline_file(panels, round_trip_s=round_trip_s), encoding="utf-8")
    return p


def write_png(panels: Panels, path: str | Path, *, round_trip_s: float = 0.0, title: str = "") -> Path:
    """The same timeline drawn by matplotlib (PNG needs a rasteriser; matplotlib is one)."""
    from toolcall_lab.plotting import timeline_figure

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    timeline_figure(panels, round_trip_s=round_trip_s, suptitle=title, save=p, show=False)
    return p

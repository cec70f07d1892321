"""pandas tables as people read them: rounded numbers, and speedups of modes that skipped calls
replaced by a mark saying why they are not comparable (pandas is imported only when called)."""

from __future__ import annotations

from typing import Any

from toolcall_lab.notebook.html import fmt


def readable(table: Any) -> Any:
    """A display copy of a `compare` table (`runs`, `summary`, or any slice of them).

    Floats are rounded (seconds to the millisecond, ratios to two places; no float noise such as
    3.55e-15), and in rows with skipped calls every ``speedup`` column reads "not comparable
    (skipped N)". The numbers in the original table are untouched: use it for computing.
    """
    out = table.copy()
    skipped = out.get("skipped")
    for column in out.columns:
        values = out[column]
        if str(column).startswith(("speedup", "median_speedup")) and skipped is not None:
            out[column] = [
                f"⚠ not comparable (skipped {int(k)})" if k else fmt(v, str(column))
                for v, k in zip(values, skipped, strict=True)
            ]
        elif values.dtype.kind == "f":
            out[column] = [fmt(float(v), str(column)) for v in values]
    return out

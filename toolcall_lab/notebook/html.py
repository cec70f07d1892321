"""Static HTML for traces: what `Trace` shows as the last expression of a cell (no widgets needed)."""

from __future__ import annotations

import html
from typing import Any


def trace_html(doc: dict[str, Any]) -> str:
    meta = doc["metadata"]
    rows = []
    for r in doc["rounds"]:
        calls = ", ".join(html.escape(c["name"]) for c in r["tool_calls"]) or "—"
        rows.append(
            f"<tr><td>{r['round_index']}</td><td>{len(r['tool_calls'])}</td><td>{calls}</td>"
            f"<td>{r['response']['latency_s']:.3f}s</td></tr>"
        )
    return (
        f"<div class='tcl-trace'><b>{html.escape(meta['title'])}</b> "
        f"({html.escape(meta['origin'])}, mode {html.escape(str(meta.get('mode')))})"
        f"<table><tr><th>round</th><th>calls</th><th>tools</th><th>model latency</th></tr>"
        f"{''.join(rows)}</table></div>"
    )

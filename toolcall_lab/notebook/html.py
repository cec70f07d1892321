"""HTML and SVG for traces, rendered from the serialized form (`Trace.to_dict()`).

Pure string building, no widgets: `Trace` uses it for its rich display (so exported notebooks show
traces without a kernel), and the widgets embed it.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

STATUS = {  # status -> (icon, colour)
    "ok": ("✔", "#2e7d32"),
    "error": ("✖", "#c62828"),
    "timeout": ("◔", "#ef6c00"),
    "unknown_tool": ("?", "#c62828"),
    "invalid_arguments": ("⚠", "#c62828"),
    "rejected": ("⛔", "#616161"),
    "duplicate": ("⧉", "#9e9e9e"),
    "cancelled": ("⏹", "#6a1b9a"),
    "skipped": ("⤼", "#9e9e9e"),
}
MODEL_COLOUR = "#3f6fb5"
TRIP_COLOUR = "#d9c25c"
PREVIEW = 160

CSS = """<style>
.tcl{font-family:system-ui,-apple-system,Segoe UI,sans-serif;font-size:13px;line-height:1.35}
.tcl-round{border:1px solid #d0d7de;border-radius:6px;margin:6px 0;padding:6px 10px}
.tcl-round-title{font-weight:600;margin-bottom:4px}
.tcl-msg{margin:3px 0 3px 0}.tcl-role{font-weight:600;color:#555;margin-right:6px}
.tcl-calls{list-style:none;margin:4px 0 4px 14px;padding:0}
.tcl-call{border-left:4px solid #ccc;padding:3px 8px;margin:4px 0;background:#fafafa}
.tcl-call pre{margin:2px 0;padding:4px;background:#f3f3f3;white-space:pre-wrap;font-size:12px;
 max-height:16em;overflow:auto}
.tcl-id{color:#777;font-size:11px}.tcl-dur{float:right;color:#555}
.tcl-result{margin-top:2px}.tcl-muted{color:#888}
.tcl-table{border-collapse:collapse}
.tcl-table td,.tcl-table th{border:1px solid #ddd;padding:2px 8px;text-align:right}
</style>"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def pretty_arguments(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        return raw


def round_duration(r: dict[str, Any]) -> float:
    ends = [e["ended_at"] for e in r["tool_executions"] if e["status"] != "skipped"]
    return float(max([r["response"]["ended_at"], *ends]) - r["response"]["started_at"])


def round_status(r: dict[str, Any]) -> str:
    runs = [e for e in r["tool_executions"] if e["status"] != "skipped"]
    if not r["tool_calls"]:
        return "final answer"
    failed = sum(e["status"] in ("error", "timeout", "unknown_tool", "invalid_arguments") for e in runs)
    skipped = len(r["tool_executions"]) - len(runs)
    text = "ok" if not failed else ("failed" if failed == len(runs) else f"{failed} failed")
    return text + (f", {skipped} skipped" if skipped else "")


def round_title(r: dict[str, Any]) -> str:
    n = len(r["tool_calls"])
    kind = " (final, no tools)" if r.get("final") else ""
    return (
        f"Round {r['round_index']}{kind} · {r['mode']} · {n} call{'s' if n != 1 else ''} · "
        f"{round_duration(r):.2f} s · {round_status(r)}"
    )


def _result_block(text: str) -> str:
    if len(text) <= PREVIEW:
        return f"<div class='tcl-result'>→ {_e(text)}</div>"
    return (
        f"<div class='tcl-result'>→ {_e(text[:PREVIEW])}… <details><summary class='tcl-muted'>"
        f"full result ({len(text):,} characters)</summary><pre>{_e(text)}</pre></details></div>"
    )


def call_row(call: dict[str, Any], execution: dict[str, Any] | None, *, raw: bool = False) -> str:
    status = execution["status"] if execution else "skipped"
    icon, colour = STATUS.get(status, ("•", "#999"))
    dur = f"{execution['duration_s']:.2f} s" if execution and status != "skipped" else ""
    args = call["arguments"] if raw else pretty_arguments(call["arguments"])
    body = (
        _result_block(execution["result"])
        if execution and status != "skipped"
        else "<div class='tcl-result tcl-muted'>not executed (no tool message sent)</div>"
    )
    return (
        f"<li class='tcl-call tcl-status-{status}' data-call-id='{_e(call['tool_call_id'])}' "
        f"style='border-left-color:{colour}'><span style='color:{colour}' title='{status}'>{icon}</span> "
        f"<b>{_e(call['name'])}</b> <span class='tcl-id'>{_e(call['tool_call_id'])} · {status}</span>"
        f"<span class='tcl-dur'>{dur}</span><pre class='tcl-args'>{_e(args)}</pre>{body}</li>"
    )


def message_tree(r: dict[str, Any], *, raw: bool = False) -> str:
    """The assistant message of a round with its calls as children, each with its matched result."""
    msg = r["assistant_message"]
    by_id = {e["tool_call_id"]: e for e in r["tool_executions"]}
    parts = ["<div class='tcl-msg tcl-assistant'><span class='tcl-role'>assistant</span>"]
    reasoning = reasoning_text(r)
    if reasoning:
        parts.append(
            f"<details><summary class='tcl-muted'>reasoning ({len(reasoning):,} characters)</summary>"
            f"<pre>{_e(reasoning)}</pre></details>"
        )
    if msg.get("content"):
        parts.append(_e(msg["content"]))
    elif not r["tool_calls"]:
        parts.append("<span class='tcl-muted'>(empty)</span>")
    parts.append("</div>")
    if r["tool_calls"]:
        parts.append("<ul class='tcl-calls'>")
        parts += [call_row(c, by_id.get(c["tool_call_id"]), raw=raw) for c in r["tool_calls"]]
        parts.append("</ul>")
    if r.get("findings"):
        items = "".join(f"<li>{_e(f['kind'])}: {_e(f['message'])}</li>" for f in r["findings"])
        parts.append(
            f"<details><summary class='tcl-muted'>{len(r['findings'])} finding(s)</summary><ul>{items}</ul>"
            "</details>"
        )
    return "".join(parts)


def reasoning_text(r: dict[str, Any]) -> str:
    """Reasoning the model streamed in this round (``reasoning_content`` / ``reasoning`` deltas)."""
    out = []
    for chunk in r["response"]["chunks"]:
        payload = chunk["payload"]
        for choice in payload.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0):
                continue
            delta = choice.get("delta") or (choice.get("message") or {})
            if isinstance(delta, dict):
                piece = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(piece, str):
                    out.append(piece)
    return "".join(out)


def _lanes(executions: Sequence[dict[str, Any]]) -> list[int]:
    ends: list[float] = []
    out = []
    for e in executions:
        for lane, end in enumerate(ends):
            if end <= e["started_at"] + 1e-12:
                ends[lane] = e["ended_at"]
                out.append(lane)
                break
        else:
            ends.append(e["ended_at"])
            out.append(len(ends) - 1)
    return out


def timeline_svg(
    rounds: Sequence[dict[str, Any]],
    *,
    start: float | None = None,
    end: float | None = None,
    width: int = 640,
    highlight: int | None = None,
    round_trip_s: float = 0.0,
    label: str = "",
) -> str:
    """Model calls and tool calls as bars on one time axis (pass start/end to share an axis)."""
    if not rounds:
        return "<svg class='tcl-timeline' width='10' height='10'></svg>"
    t0 = rounds[0]["response"]["started_at"] if start is None else start
    t1 = max(round_duration(r) + r["response"]["started_at"] for r in rounds) if end is None else end
    span = max(t1 - t0, 1e-9)
    left, row = 70, 16
    scale = (width - left - 24) / span
    bars: list[str] = []
    lanes_needed = 1
    for r in rounds:
        resp = r["response"]
        x = left + (resp["started_at"] - t0) * scale
        w = max((resp["ended_at"] - resp["started_at"]) * scale, 1)
        opacity = "1" if highlight in (None, r["round_index"]) else "0.35"
        bars.append(
            f"<rect class='tcl-bar-model' x='{x:.1f}' y='4' width='{w:.1f}' height='{row - 4}' "
            f"fill='{MODEL_COLOUR}' opacity='{opacity}'><title>round {r['round_index']} model call "
            f"{resp['latency_s']:.3f} s</title></rect>"
        )
        ran = sorted(
            (e for e in r["tool_executions"] if e["status"] != "skipped"), key=lambda e: e["started_at"]
        )
        for e, lane in zip(ran, _lanes(ran), strict=True):
            lanes_needed = max(lanes_needed, lane + 2)
            y = 4 + (lane + 1) * row
            x = left + (e["started_at"] - t0) * scale
            w = max(e["duration_s"] * scale, 1.5)
            colour = STATUS.get(e["status"], ("", "#999"))[1]
            if round_trip_s and r["mode"] == "serialized":
                bars.append(
                    f"<rect class='tcl-bar-trip' x='{x - round_trip_s * scale:.1f}' y='{y}' "
                    f"width='{round_trip_s * scale:.1f}' height='{row - 4}' fill='{TRIP_COLOUR}' "
                    f"opacity='{opacity}'><title>client round trip {round_trip_s:.3f} s</title></rect>"
                )
            bars.append(
                f"<rect class='tcl-bar-tool' x='{x:.1f}' y='{y}' width='{w:.1f}' height='{row - 4}' "
                f"fill='{colour}' opacity='{opacity}'><title>{_e(e['name'])} {e['status']} "
                f"{e['duration_s']:.3f} s</title></rect>"
            )
            if w > 60:
                bars.append(
                    f"<text x='{x + 3:.1f}' y='{y + row - 7}' font-size='9' fill='white'>"
                    f"{_e(e['name'][:16])} {e['duration_s']:.2f}s</text>"
                )
    height = 8 + lanes_needed * row + 14
    ticks = []
    step = _tick_step(span)
    t = 0.0
    while t <= span + 1e-9:
        x = left + t * scale
        ticks.append(
            f"<line x1='{x:.1f}' x2='{x:.1f}' y1='2' y2='{height - 14}' stroke='#eee'/>"
            f"<text x='{x:.1f}' y='{height - 3}' font-size='9' text-anchor='middle' fill='#666'>"
            f"{t0 + t:.2f}s</text>"
        )
        t += step
    names = [f"<text x='4' y='{4 + row - 6}' font-size='10' fill='#333'>{_e(label) or 'model'}</text>"]
    names += [
        f"<text x='4' y='{4 + (i + 1) * row + row - 6}' font-size='10' fill='#666'>tools {i + 1}</text>"
        for i in range(lanes_needed - 1)
    ]
    return (
        f"<svg class='tcl-timeline' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'>"
        f"{''.join(ticks)}{''.join(names)}{''.join(bars)}</svg>"
    )


def _tick_step(span: float) -> float:
    for step in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500):
        if span / step <= 10:
            return float(step)
    return span / 10


def round_html(r: dict[str, Any], *, raw: bool = False, round_trip_s: float = 0.0, title: bool = True) -> str:
    """One round's panel: title (optional, e.g. when an accordion shows it), message tree, timeline."""
    heading = f"<div class='tcl-round-title'>{_e(round_title(r))}</div>" if title else ""
    return (
        f"<div class='tcl-round' data-round='{r['round_index']}'>{heading}{message_tree(r, raw=raw)}"
        f"{timeline_svg([r], round_trip_s=round_trip_s)}</div>"
    )


def header_html(doc: dict[str, Any]) -> str:
    """Title line of a trace: origin, mode, rounds, wall time, outcome, whether timings are real."""
    meta, outcome = doc["metadata"], doc["outcome"]
    return (
        f"<div><b>{_e(meta['title'])}</b> <span class='tcl-muted'>{_e(meta['origin'])} · mode "
        f"{_e(meta.get('mode'))} · {len(doc['rounds'])} rounds · {outcome['wall_time_s']:.2f} s · "
        f"{_e(outcome['status'])}/{_e(outcome['reason'])} · timings {_e(timing_summary(doc))}</span></div>"
    )


def timing_summary(doc: dict[str, Any]) -> str:
    """How many model calls and tool executions rest on each kind of timing evidence."""
    counts: dict[str, int] = {}
    for r in doc["rounds"]:
        items = [r["response"].get("timing")] + [
            e.get("timing") for e in r["tool_executions"] if e["status"] != "skipped"
        ]
        for t in items:
            source = (t or {}).get("source", "unlabelled")
            counts[source] = counts.get(source, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def trace_html(doc: dict[str, Any], *, raw: bool = False, max_rounds: int | None = None) -> str:
    """A whole trace: header, whole-run timeline, then one panel per round."""
    rounds = doc["rounds"][:max_rounds] if max_rounds else doc["rounds"]
    rtt = float(doc["metadata"].get("settings", {}).get("round_trip_s") or 0.0)
    header = header_html(doc)
    more = (
        f"<div class='tcl-muted'>… {len(doc['rounds']) - len(rounds)} more rounds</div>"
        if len(rounds) < len(doc["rounds"])
        else ""
    )
    return (
        f"<div class='tcl tcl-trace'>{CSS}{header}{timeline_svg(doc['rounds'], round_trip_s=rtt)}"
        f"{''.join(round_html(r, raw=raw, round_trip_s=rtt) for r in rounds)}{more}</div>"
    )


def summary_table(rows: Sequence[dict[str, Any]]) -> str:
    """Per-mode wall time, speedup, model calls and client round trips as an HTML table."""
    seq = next((r["wall_time_s"] for r in rows if r["mode"] == "sequential"), None)
    head = (
        "<tr><th>mode</th><th>wall time</th><th>speedup vs sequential</th><th>model calls</th>"
        "<th>client round trips</th><th>tool time</th><th>failures</th><th>skipped</th></tr>"
    )
    body = "".join(
        f"<tr><td style='text-align:left'>{_e(r['mode'])}</td><td>{r['wall_time_s']:.3f} s</td>"
        f"<td>{(seq / r['wall_time_s']) if seq and r['wall_time_s'] else float('nan'):.2f}x</td>"
        f"<td>{r['upstream_calls']}</td><td>{r['client_round_trips']}</td><td>{r['tool_time_s']:.3f} s</td>"
        f"<td>{r['failures']}</td><td>{r['skipped']}</td></tr>"
        for r in rows
    )
    return f"<table class='tcl-table'>{head}{body}</table>"

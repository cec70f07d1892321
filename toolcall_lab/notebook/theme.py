"""Colours, status icons and the stylesheet every view shares.

Text and backgrounds come from JupyterLab's CSS variables, with light fallbacks for the classic
notebook and static HTML; both always come from the same source, so text never lands on a background
of its own colour (white on white in a dark theme). Bar colours are fixed and chosen so that the
white labels drawn on them stay readable (WCAG contrast of 4.5 or more) and every bar, outline and
marker stands out from a white and from a near-black page (3 or more), so light, dark and
high-contrast themes all read (tests/test_widgets.py checks the numbers).
"""

from __future__ import annotations

import html
import math
from typing import Any, NamedTuple


class StatusStyle(NamedTuple):
    icon: str
    label: str
    fill: str
    """Bar and icon colour (labels on it are drawn in `on_fill`)."""
    on_fill: str = "#ffffff"


STATUS: dict[str, StatusStyle] = {
    "ok": StatusStyle("✔", "ok", "#2e7d32"),
    "error": StatusStyle("✖", "error", "#c62828"),
    "timeout": StatusStyle("◔", "timeout", "#b45309"),
    "unknown_tool": StatusStyle("?", "unknown tool", "#d81b60"),
    "invalid_arguments": StatusStyle("⚠", "invalid arguments", "#b026c0"),
    "rejected": StatusStyle("⊘", "rejected", "#6b6f76"),
    "duplicate": StatusStyle("❏", "duplicate (answered with a note)", "#6b7280"),
    "cancelled": StatusStyle("■", "cancelled", "#7e57c2"),
    "skipped": StatusStyle("↷", "skipped (not executed, no tool message)", "#8a8f98", "#111111"),
    "withheld": StatusStyle("◌", "withheld (ran; its result kept from the model)", "#5b6475"),
    "running": StatusStyle("▶", "running (started, not finished yet)", "#0f766e"),
    "not_recorded": StatusStyle("∅", "result not recorded (the imported source does not hold it)", "#6b6f76"),
}
UNKNOWN_STATUS = StatusStyle("•", "other", "#6b7280")
MODEL = StatusStyle("▬", "model call", "#3b6bb0")
TRIP = StatusStyle("↔", "client round trip (serialized proxy)", "#a67c00", "#111111")
WAIT = StatusStyle("┈", "waiting for a slot (recorded queueing)", "#8a8f98")
SKIPPED_STROKE = "#8a8f98"
WARN = "#b45309"
"""Warnings where no theme colour is at hand (a saved file, a figure): readable on white."""
BAND = "#1f6feb"
"""The selected round's shading (behind the bars, so every bar keeps its colour)."""
PROVENANCE_NOTE = {
    "recorded": "recorded timing",
    "reported": "timing reported by the server",
    "estimated": "estimated timing (a stated formula)",
    "placeholder": "placeholder timing (a constant, not measured)",
}
ORIGIN_NOTE = {
    "recorded": "recorded live from a model",
    "imported": "imported from a recording or dataset",
    "scripted": "a scripted model (no live model; each number says where it comes from)",
    "replayed": "a replay of a trace under some mode (each number says where it comes from)",
}


SUMMARY = "<summary data-lm-suppress-shortcuts>"
"""A `<details>` element's summary: reached with Tab and opened with Enter or Space, also in
JupyterLab, whose notebook shortcuts (Enter: edit the cell) stop at an element marked so."""

NOISE_S = 1e-9
"""Seconds below this are float noise (3.55e-15 from a subtraction), not a duration: shown as 0."""


def secs(value: float) -> str:
    """Seconds as people read them, for labels and headers: about 3 significant places in the unit
    that fits (``2.41 s``, ``34 ms``, ``37 µs``), so a non-zero duration never reads ``0 s``; float
    noise such as 3.55e-15 does."""
    v = abs(value)
    if v < NOISE_S:
        return "0 s"
    if v < 0.0009995:
        return f"{value * 1e6:.3g} µs" if v >= 0.9995e-6 else f"{value * 1e9:.3g} ns"
    if v < 0.995:
        return f"{value * 1000:.0f} ms"
    if v < 10:
        return f"{value:.2f} s"
    return f"{value:.1f} s"


def exact(value: float, sep: str = "") -> str:
    """Seconds for tooltips and "exact times" tables: to the millisecond (``4.392``), and with as
    many places as it takes to keep 3 significant digits below that (``0.000231``, ``3.74e-08``),
    so a non-zero time never reads ``0.000``; float noise does. `sep`: ``","`` for thousands."""
    v = abs(value)
    if v < NOISE_S:
        return "0.000"
    if v >= 0.1:
        return f"{value:{sep}.3f}"
    places = 2 - math.floor(math.log10(v))
    return f"{value:.{places}f}" if places <= 9 else f"{value:.3g}"


def plural(n: int, word: str, many: str = "") -> str:
    """``1 round``, ``2 rounds``: a count with its noun in the right form."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def middle(text: str, limit: int) -> str:
    """`text` cut to `limit` characters in the middle (``claude-code_v1_0…agent_WZQcJH44_turn01``):
    names of one session differ at the end, which an ellipsis at the end would hide."""
    if len(text) <= limit:
        return text
    keep = limit - 1
    return text[: keep // 3] + "…" + text[len(text) - (keep - keep // 3) :]


def status_style(status: str) -> StatusStyle:
    return STATUS.get(status, UNKNOWN_STATUS)


def article(word: str) -> str:
    """`a` or `an` before a word (an imported trace, a scripted trace)."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def e(value: Any) -> str:
    """HTML-escape any value (quotes too: safe inside attributes)."""
    return html.escape(str(value), quote=True)


def status_badge(status: str) -> str:
    """Icon and text, never colour alone."""
    s = status_style(status)
    return (
        f"<span class='tcl-status' data-status='{e(status)}'><span class='tcl-icon' "
        f"style='background:{s.fill};color:{s.on_fill}' aria-hidden='true'>{s.icon}</span> {e(status)}</span>"
    )


# One stylesheet, scoped to `.tcl`. Variables first: JupyterLab's when present, light otherwise.
CSS = """<style>
.tcl{--tcl-fg:var(--jp-ui-font-color1,#1f2328);--tcl-fg2:var(--jp-ui-font-color2,#4b5563);
 --tcl-bg:var(--jp-layout-color0,#ffffff);--tcl-bg1:var(--jp-layout-color1,#f6f8fa);
 --tcl-bg2:var(--jp-layout-color2,#eef1f4);--tcl-border:var(--jp-border-color1,#c9d1d9);
 --tcl-grid:var(--jp-border-color2,#e5e7eb);--tcl-accent:var(--jp-brand-color1,#1f6feb);
 --tcl-mark:#fff3c4;--tcl-mark-fg:#1f2328;
 --tcl-warn-fg:#9a3412;--tcl-error-fg:#b91c1c;
 color:var(--tcl-fg);background:var(--tcl-bg);font-family:var(--jp-ui-font-family,system-ui,-apple-system,
 'Segoe UI',sans-serif);font-size:13px;line-height:1.4;max-width:100%;box-sizing:border-box;min-width:0}
/* text colours that must read (4.5:1) on every background a view draws them on (the page, a call
   card, a shaded row) in every theme: JupyterLab's warning and error colours are not text-safe (its
   Light theme's --jp-warn-color1 #f57c00 is 2.7:1 on white), so warnings and errors take colours of
   their own per theme (a dark theme: data-jp-theme-light=false, also in nbconvert's dark export),
   and muted text is the theme's text colour mixed a little towards the page (never below 4.5:1,
   where --jp-ui-font-color2 is 4.2:1 on a shaded row) */
[data-jp-theme-light='false'] .tcl{--tcl-warn-fg:#fbbf24;--tcl-error-fg:#fca5a5}
@supports (color:color-mix(in srgb,red 50%,blue)){.tcl{
 --tcl-fg2:color-mix(in srgb,var(--tcl-fg) 78%,var(--tcl-bg))}}
/* marked text (a chunk's delta, what it appended): a tint of the theme's warning colour over the
   page, text in the page's colour, so it reads in light, dark and high-contrast themes alike */
@supports (background:color-mix(in srgb,red 50%,blue)){.tcl{
 --tcl-mark:color-mix(in srgb,var(--jp-warn-color1,#b45309) 22%,var(--tcl-bg));--tcl-mark-fg:var(--tcl-fg)}}
.tcl *{box-sizing:border-box}
.tcl-view .widget-html,.tcl-view .widget-html-content{min-width:0;max-width:100%}
.tcl pre,.tcl code{font-family:var(--jp-code-font-family,ui-monospace,SFMono-Regular,Menlo,monospace);
 font-size:12px;color:var(--tcl-fg)}
.tcl pre{margin:2px 0;padding:4px 6px;background:var(--tcl-bg1);border:1px solid var(--tcl-grid);
 border-radius:4px;white-space:pre-wrap;word-break:break-word;max-height:18em;overflow:auto}
.tcl details>summary{cursor:pointer;color:var(--tcl-fg2)}
.tcl .tcl-muted{color:var(--tcl-fg2)}
.tcl .tcl-head{margin:2px 0 6px 0}.tcl .tcl-title{font-weight:600;font-size:14px;overflow-wrap:anywhere}
.tcl .tcl-facts>span,.tcl .tcl-mode>b,.tcl .tcl-panel>b{overflow-wrap:anywhere;min-width:0}
.tcl .tcl-facts{display:flex;flex-wrap:wrap;gap:2px 14px;color:var(--tcl-fg2)}
.tcl .tcl-facts b{color:var(--tcl-fg);font-weight:600}
.tcl .tcl-icon{display:inline-block;min-width:1.4em;text-align:center;border-radius:3px;
 padding:0 2px;font-size:12px;line-height:1.35}
.tcl .tcl-badge{display:inline-block;border:1px solid var(--tcl-border);border-radius:10px;
 padding:0 7px;margin-right:4px;background:var(--tcl-bg1);color:var(--tcl-fg);font-size:12px}
.tcl .tcl-badge-warn{border-color:#b45309}
.tcl .tcl-round{border:1px solid var(--tcl-border);border-radius:6px;margin:6px 0;padding:6px 10px;
 background:var(--tcl-bg)}
.tcl .tcl-round-title{font-weight:600;margin-bottom:4px}
/* a trace view's round panels: a details element each (Tab reaches the title, Enter opens it) */
.tcl details.tcl-round-panel{border:1px solid var(--tcl-border);border-radius:6px;margin:3px 0;
 background:var(--tcl-bg)}
.tcl details.tcl-round-panel>summary{padding:4px 8px;color:var(--tcl-fg);background:var(--tcl-bg1);
 border-radius:6px;overflow-wrap:anywhere}
.tcl details.tcl-round-panel>summary .tcl-round-title{margin:0}
.tcl details.tcl-round-panel>.tcl-round{border:none;margin:0}
.tcl summary:focus-visible{outline:2px solid var(--tcl-accent);outline-offset:1px}
.tcl .tcl-msg{margin:3px 0;padding:2px 0}.tcl .tcl-role{font-weight:600;color:var(--tcl-fg2);margin-right:6px}
.tcl .tcl-calls{list-style:none;margin:4px 0 4px 10px;padding:0}
.tcl .tcl-call{border-left:4px solid var(--tcl-border);padding:3px 8px;margin:4px 0;background:var(--tcl-bg1)}
.tcl .tcl-call-head{display:flex;flex-wrap:wrap;align-items:baseline;gap:2px 8px}
/* names up to the 64 characters a tool name may have break anywhere rather than spill out */
.tcl .tcl-call-head>b,.tcl details>summary,.tcl .tcl-tools li,.tcl .tcl-msg{overflow-wrap:anywhere;
 min-width:0}
.tcl .tcl-id{color:var(--tcl-fg2);font-size:12px;overflow-wrap:anywhere;min-width:0}
.tcl .tcl-dur{margin-left:auto;color:var(--tcl-fg2);white-space:nowrap}
.tcl .tcl-result{margin-top:2px}
.tcl table.tcl-table{border-collapse:collapse;margin:4px 0}
.tcl .tcl-table td,.tcl .tcl-table th{border:1px solid var(--tcl-grid);padding:2px 8px;text-align:right;
 color:var(--tcl-fg);background:var(--tcl-bg)}
.tcl .tcl-table th{background:var(--tcl-bg1);font-weight:600}
.tcl .tcl-table td.tcl-left,.tcl .tcl-table th.tcl-left{text-align:left}
.tcl .tcl-table td,.tcl .tcl-table th{white-space:nowrap}
.tcl .tcl-table tr.tcl-nc td{background:var(--tcl-bg2)}
.tcl .tcl-summary th{white-space:normal;max-width:7.5em;vertical-align:bottom}
.tcl ul.tcl-notes{margin:2px 0 4px 18px;padding:0;font-size:12px;color:var(--tcl-fg2)}
.tcl .tcl-scroll{overflow-x:auto;max-width:100%}
.tcl .tcl-tl{margin:4px 0 2px 0;min-width:0}
.tcl .tcl-tl-grid{display:grid;grid-template-columns:max-content minmax(0,1fr);column-gap:6px}
.tcl .tcl-lanes{font-size:12px;color:var(--tcl-fg)}
.tcl .tcl-lane{height:20px;line-height:20px;white-space:nowrap;max-width:14em;overflow:hidden;
 text-overflow:ellipsis}
.tcl .tcl-plot{container-type:inline-size;min-width:0}
/* a narrow window (800 px with JupyterLab's file browser open leaves ~370 px): shorter lane names
   (cut with an ellipsis, whole in their tooltip) leave the plot its room */
@media (max-width:1000px){.tcl .tcl-lane{max-width:8em}}
.tcl svg.tcl-timeline{display:block;width:100%;overflow:visible}
.tcl svg.tcl-timeline text{fill:var(--tcl-fg);font-size:11px;font-family:inherit}
.tcl svg.tcl-timeline text.tcl-in{font-size:11px}
.tcl svg.tcl-timeline .tcl-gridline{stroke:var(--tcl-grid);stroke-width:1}
.tcl svg.tcl-timeline .tcl-bar:not(.tcl-faint){stroke:var(--tcl-bg);stroke-width:1}
.tcl svg.tcl-timeline .tcl-band{fill:var(--tcl-accent);fill-opacity:.09;stroke:var(--tcl-accent);
 stroke-opacity:.6;stroke-width:1}
/* labels laid out per container width (timeline.RANGES): each range hides the last and shows its own */
.tcl svg.tcl-timeline .tcl-lbl{display:none}.tcl svg.tcl-timeline .tcl-lbl.tcl-r0{display:inline}
@container (min-width:420px){.tcl svg.tcl-timeline .tcl-lbl.tcl-r0{display:none}
 .tcl svg.tcl-timeline .tcl-lbl.tcl-r1{display:inline}}
@container (min-width:560px){.tcl svg.tcl-timeline .tcl-lbl.tcl-r1{display:none}
 .tcl svg.tcl-timeline .tcl-lbl.tcl-r2{display:inline}}
@container (min-width:840px){.tcl svg.tcl-timeline .tcl-lbl.tcl-r2{display:none}
 .tcl svg.tcl-timeline .tcl-lbl.tcl-r3{display:inline}}
@container (min-width:1120px){.tcl svg.tcl-timeline .tcl-lbl.tcl-r3{display:none}
 .tcl svg.tcl-timeline .tcl-lbl.tcl-r4{display:inline}}
.tcl .tcl-legend{display:flex;flex-wrap:wrap;gap:2px 12px;font-size:12px;color:var(--tcl-fg);margin:2px 0 4px}
.tcl .tcl-swatch{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle;
 border-radius:2px}
.tcl .tcl-grid-panels{display:grid;grid-template-columns:repeat(auto-fit,minmax(340px,1fr));gap:8px}
.tcl .tcl-grid-panels>div{min-width:0}
.tcl pre.tcl-chunk-delta{background:var(--tcl-mark);color:var(--tcl-mark-fg);border-radius:2px}
.tcl .tcl-added{background:var(--tcl-mark);color:var(--tcl-mark-fg);font-weight:600}
/* the stepper's calls: a long id wraps in a narrow column, the arguments take the rest and wrap */
.tcl table.tcl-calls-so-far{width:100%}
.tcl .tcl-calls-so-far td.tcl-call-id{white-space:normal;overflow-wrap:anywhere;max-width:12em;min-width:6em}
.tcl .tcl-calls-so-far td.tcl-call-args{white-space:normal;width:60%}
.tcl .tcl-calls-so-far td.tcl-call-args code{white-space:pre-wrap;overflow-wrap:anywhere}
.tcl .tcl-controls{display:flex;flex-wrap:wrap;align-items:center;gap:6px;margin:4px 0}
.tcl .tcl-controls button{font:inherit;color:var(--tcl-fg);background:var(--tcl-bg1);
 border:1px solid var(--tcl-border);border-radius:4px;padding:2px 10px;cursor:pointer}
.tcl .tcl-controls button:focus-visible,.tcl .tcl-controls input:focus-visible{
 outline:2px solid var(--tcl-accent)}
.tcl .tcl-controls input[type=range]{flex:1 1 200px;min-width:120px}
.tcl .tcl-error{color:var(--tcl-error-fg);white-space:pre-wrap}
.tcl .tcl-warn{color:var(--tcl-warn-fg)}
.tcl .tcl-report{margin:2px 0 4px;font-size:12px}.tcl .tcl-report ul{margin:2px 0 2px 18px;padding:0}
.tcl .tcl-table td.tcl-long{max-width:22em;overflow:hidden;text-overflow:ellipsis}
/* a name cut in the middle by the page: its start shrinks to an ellipsis, its end (what tells names
   apart) always shows, at any width */
.tcl .tcl-table td.tcl-name{max-width:18em}
@media (max-width:1000px){.tcl .tcl-table td.tcl-name{max-width:10em}}
.tcl .tcl-mid{display:inline-flex;max-width:100%;min-width:0;vertical-align:bottom}
.tcl .tcl-mid-a{flex:0 1 auto;min-width:1.2em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.tcl .tcl-mid-a:empty{min-width:0}
.tcl .tcl-mid-b{flex:0 0 auto;white-space:nowrap}
.tcl details.tcl-bars>summary{font-size:12px}
/* forced colours (Windows high contrast): the browser swaps every colour for the user's system
   colours, but not an SVG's fills, so a timeline's text would stay dark on the forced black page,
   and backgrounds (legend swatches, status icons, marked text) would vanish. The timeline, the
   swatches and the icons keep their own palette (every bar colour stands out from black and white)
   and take the system colours for text, grid and page; marked text uses the system highlight. */
@media (forced-colors:active){
 .tcl{--tcl-fg:CanvasText;--tcl-fg2:CanvasText;--tcl-bg:Canvas;--tcl-bg1:Canvas;--tcl-bg2:Canvas;
  --tcl-border:CanvasText;--tcl-grid:GrayText;--tcl-accent:Highlight;--tcl-mark:Highlight;
  --tcl-mark-fg:HighlightText}
 .tcl svg.tcl-timeline,.tcl .tcl-swatch,.tcl .tcl-icon,.tcl .tcl-added,.tcl pre.tcl-chunk-delta{
  forced-color-adjust:none}
}
/* the static copy printed after a view is for renderers without the widget: hidden where it rendered */
.jp-OutputArea-child:has(.tcl-view)+.jp-OutputArea-child:has(.tcl-static),
.output_area:has(.tcl-view)+.output_area:has(.tcl-static){display:none}
</style>"""

# Colours for a standalone SVG file (no page around it to take variables from).
SVG_FILE_STYLE = """<style>
text{fill:#1f2328;font-size:11px;font-family:system-ui,-apple-system,'Segoe UI',sans-serif}
.tcl-gridline{stroke:#e5e7eb;stroke-width:1}.tcl-bar:not(.tcl-faint){stroke:#ffffff;stroke-width:1}
.tcl-band{fill:#1f6feb;fill-opacity:.12}
</style>"""

"""HTML for traces, rendered from the serialized form (`Trace.to_dict()`).

Pure string building, no widgets: `Trace` and `Round` use it for their rich display (so exported
notebooks show them without a kernel), and the widgets embed it. Everything a trace holds is shown:
the run header (model, origin, timing provenance, usage, outcome), the prompt and tools offered,
and per round the request as sent, the assistant message, each call with its tool message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolcall_lab.notebook.round_state import CLOSING, n_calls, placeholder_of, round_status
from toolcall_lab.notebook.theme import (
    CSS,
    ORIGIN_NOTE,
    SUMMARY,
    article,
    e,
    exact,
    plural,
    secs,
    status_badge,
    status_style,
)
from toolcall_lab.notebook.timeline import NARROWEST, paired, round_end, timeline_svg, ttfc_text
from toolcall_lab.records import SCREENED_ON_IMPORT

__all__ = [
    "CSS",
    "fmt",
    "header_html",
    "message_tree",
    "pretty_arguments",
    "round_duration",
    "round_html",
    "round_title",
    "run_state",
    "summary_table",
    "table_html",
    "timeline_svg",
    "trace_html",
]

_e = e  # older name, kept for callers
PREVIEW = 160


def pretty_arguments(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        return raw


RATIO_COLUMNS = frozenset({"efficiency", "measured_share", "overlap_ratio"})
"""Columns of ratios: always two places (``1.00`` beside ``1.07``, never ``1``), as are ``speedup*``
and ``*share*`` columns and a summary's ``median_`` of any of them."""


def fmt(value: Any, column: str = "") -> str:
    """A table value as people read it: seconds to the millisecond, ratios to 2 places, no float
    noise (3.55e-15 -> 0.000), NaN as an em dash."""
    if isinstance(value, bool) or value is None:
        return "—" if value is None else ("yes" if value else "no")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞"
        if column.endswith("_s") or column.endswith("seconds"):
            return exact(value, ",")
        ratio = column.removeprefix("median_")  # a summary's median of a ratio is a ratio
        if ratio.startswith(("speedup", "share")) or ratio.endswith("_share") or ratio in RATIO_COLUMNS:
            return f"{value:,.2f}"  # one format per column
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.2f}" if abs(value) >= 0.01 or value == 0 else f"{value:.3f}"
    return str(value)


def round_duration(r: dict[str, Any]) -> float:
    return round_end(r) - float(r["response"]["started_at"])


def tool_names(r: dict[str, Any], limit: int = 4) -> str:
    """`get_weather, get_news ×2, …`: which tools a round called, in order of first use."""
    counts: dict[str, int] = {}
    for c in r["tool_calls"]:
        counts[c["name"]] = counts.get(c["name"], 0) + 1
    parts = [f"{n} ×{k}" if k > 1 else n for n, k in counts.items()]
    return ", ".join(parts[:limit]) + (f", +{len(parts) - limit} more" if len(parts) > limit else "")


def mode_evidenced(doc: Mapping[str, Any]) -> str | None:
    """The mode the trace says it ran under (its metadata), or None when it does not say: an import
    whose source shows no batch's timing leaves it empty, and its rounds' own ``mode`` is only the
    loop's default, not evidence."""
    mode = (doc.get("metadata") or {}).get("mode")
    return str(mode) if mode else None


def round_title(r: dict[str, Any], *, mode: bool = True) -> str:
    """`Round 2 · parallel · 3 calls: get_weather, … · 1.80 s · ok`; `mode=False` leaves the round's
    mode out (a trace that does not evidence one)."""
    n = n_calls(r)
    kind = " (final, no tools)" if r.get("final") else ""
    names = tool_names(r)  # (none yet while a live round's calls have not started)
    calls = f"{n} call{'s' if n != 1 else ''}{': ' + names if names else ''}" if n else "no calls"
    shown = r.get("mode") if mode else ""
    return (
        f"Round {r['round_index']}{kind} · {shown + ' · ' if shown else ''}{calls} · "
        f"{secs(round_duration(r))} · "
        f"{round_status(r)}"
    )


NOT_RECORDED_MESSAGE = "not in the recording: what toolcall_lab would send"
"""How a view labels the tool message of an imported call the import's loop screened out: the source
holds none, so the text is toolcall_lab's, not the recorded agent's (`records.SCREENED_ON_IMPORT`)."""


def not_in_source(execution: Mapping[str, Any] | None) -> bool:
    """Whether this execution's tool message was written by the import's loop, not recorded."""
    note = ((execution or {}).get("timing") or {}).get("note") or ""
    return SCREENED_ON_IMPORT in note


def _result_block(text: str, *, written: bool = False) -> str:
    """The tool message; `written`: one the source does not hold (toolcall_lab's own text), so
    labelled, never shown as if recorded."""
    role = "<span class='tcl-role'>tool message</span>"
    if written:
        role += f"<span class='tcl-warn'>⚠ {e(NOT_RECORDED_MESSAGE)}</span> "
    if len(text) <= PREVIEW:
        return f"<div class='tcl-result'>{role}{e(text)}</div>"
    return (
        f"<div class='tcl-result'>{role}{e(text[:PREVIEW])}… <details>"
        f"{SUMMARY}full result ({len(text):,} characters)</summary><pre>{e(text)}</pre></details></div>"
    )


def call_row(call: dict[str, Any], execution: dict[str, Any] | None, *, raw: bool = False) -> str:
    """One call: status icon and word, name, id, duration and times on one line that wraps as a
    whole (a long id never squeezes the arguments), then the arguments and the tool message."""
    status = execution["status"] if execution else "skipped"
    colour = status_style(status).fill
    running = status == "running"  # a live view's call that started and has not finished
    ran = execution is not None and status not in ("skipped", "running")
    times = (
        f"{secs(execution['duration_s'])} <span class='tcl-muted'>({exact(execution['started_at'])} → "
        f"{exact(execution['ended_at'])} s)</span>"
        if ran and execution
        else (f"running since {exact(execution['started_at'])} s" if running and execution else "")
    )
    args = call["arguments"] if raw else pretty_arguments(call["arguments"])
    notes = []
    if call.get("id_source") not in (None, "provider"):
        notes.append(f"id from {call['id_source']}")
    if call.get("complete") is False:
        notes.append("arguments incomplete: never executed")
    if execution and execution.get("duplicate_of"):
        notes.append(f"duplicate of {execution['duplicate_of']}")
    if execution is None:
        notes.append("no execution in the record")
    covers = ((execution or {}).get("timing") or {}).get("covers")
    if covers in COVERS_WORDS:  # a duration that is not the tool's run (schema 3)
        notes.append(f"time: {COVERS_WORDS[covers]}")
    body = (
        _result_block(execution["result"], written=not_in_source(execution))
        if ran and execution
        else (
            "<div class='tcl-result tcl-muted'>running: no result yet</div>"
            if running
            else "<div class='tcl-result tcl-muted'>not executed (no tool message sent)</div>"
        )
    )
    return (
        f"<li class='tcl-call tcl-status-{e(status)}' data-call-id='{e(call['tool_call_id'])}' "
        f"style='border-left-color:{colour}'><div class='tcl-call-head'>{status_badge(status)} "
        f"<b>{e(call['name'])}</b> "
        f"<span class='tcl-id'>{e(call['tool_call_id'])}{' · ' + e('; '.join(notes)) if notes else ''}</span>"
        f"<span class='tcl-dur'>{times}</span></div><pre class='tcl-args'>{e(args)}</pre>{body}</li>"
    )


def _content(m: Mapping[str, Any]) -> str:
    c = m.get("content")
    if c is None:
        return ""
    return c if isinstance(c, str) else json.dumps(c, ensure_ascii=False)


def message_html(m: Mapping[str, Any], *, written: bool = False) -> str:
    """One chat message, whatever its role; `written`: a tool message the imported source does not
    hold (toolcall_lab's own text), labelled so."""
    role = str(m.get("role", "?"))
    extra = ""
    if m.get("tool_call_id"):
        extra = f" <span class='tcl-id'>answers {e(m['tool_call_id'])}</span>"
    if written:
        extra += f" <span class='tcl-warn'>⚠ {e(NOT_RECORDED_MESSAGE)}</span>"
    calls = m.get("tool_calls") or []
    if calls:
        extra += (
            " <span class='tcl-id'>calls "
            + e(", ".join(f"{(c.get('function') or {}).get('name')} ({c.get('id')})" for c in calls))
            + "</span>"
        )
    text = _content(m)
    body = (
        f"<pre>{e(text)}</pre>"
        if "\n" in text or len(text) > 200
        else (e(text) if text else "<span class='tcl-muted'>(no text)</span>")
    )
    return (
        f"<div class='tcl-msg tcl-msg-{e(role)}'><span class='tcl-role'>{e(role)}</span>{extra} {body}</div>"
    )


def request_html(r: dict[str, Any], previous: dict[str, Any] | None) -> str:
    """The request messages as sent, folded: messages unchanged from the previous request are
    counted, not repeated (a long session would otherwise repeat its history every round)."""
    msgs = (r.get("request") or {}).get("messages") or []
    offered = (r.get("request") or {}).get("tools_offered", True)
    same = 0
    if previous is not None:
        before = (previous.get("request") or {}).get("messages") or []
        while same < min(len(before), len(msgs)) and msgs[same] == before[same]:
            same += 1
    new = msgs[same:]
    kept = f"{same} unchanged from round {previous['round_index']}'s request, " if previous and same else ""
    summary = (
        f"request as sent: {len(msgs)} message{'s' if len(msgs) != 1 else ''} ({kept}{len(new)} shown)"
        f"{'' if offered else ' · tools not offered'}"
    )
    # a tool message answering a call the import's loop screened out is toolcall_lab's text
    written = {x["tool_call_id"] for x in (previous or {}).get("tool_executions") or () if not_in_source(x)}
    body = "".join(
        message_html(m, written=m.get("role") == "tool" and m.get("tool_call_id") in written) for m in new
    ) or ("<span class='tcl-muted'>(no messages recorded)</span>")
    return f"<details class='tcl-request'>{SUMMARY}{e(summary)}</summary>{body}</details>"


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


def finding_li(f: Mapping[str, Any], *, seen_at: int | None = None) -> str:
    """One finding as a list item: every field it carries, nothing assumed beyond `kind`/`message`.
    `seen_at`: the chunk a stepper shows it at, named beside its ``chunk_index`` when they differ
    (a repeated header's index points at the first header)."""
    at = f.get("chunk_index")
    if seen_at is not None and at is not None and seen_at != at:
        first = "first header" if f.get("kind") == "repeated_header" else "chunk_index points at"
        where = (
            f" (first header at chunk {e(at)}, repeated at chunk {seen_at})"
            if first == "first header"
            else f" (shown at chunk {seen_at}; its chunk_index points at chunk {e(at)})"
        )
    else:
        where = f" (chunk {e(at)})" if at is not None else ""
    return (
        f"<li><b>{e(f.get('kind', '?'))}</b>"
        + where
        + f": {e(f.get('message', ''))}"
        + "".join(
            f" <span class='tcl-id'>{e(k)}={e(v)}</span>"
            for k, v in f.items()
            if k not in ("kind", "message", "chunk_index") and v not in (None, "")
        )
        + "</li>"
    )


def findings_block(items: Sequence[str], *, open_: bool = False) -> str:
    """Rendered finding items (`finding_li`) in their folding block."""
    n = len(items)
    return (
        f"<details class='tcl-findings'{' open' if open_ else ''}>{SUMMARY}⚠ {n} finding"
        f"{'s' if n != 1 else ''} while parsing</summary><ul>{''.join(items)}</ul></details>"
    )


def findings_html(findings: Sequence[Mapping[str, Any]], *, open_: bool = False) -> str:
    """Findings of any kind: every field they carry, nothing assumed beyond `kind` and `message`."""
    if not findings:
        return ""
    return findings_block([finding_li(f) for f in findings], open_=open_)


def chunks_text(resp: dict[str, Any]) -> str:
    """How many chunks, and what their arrival offsets rest on."""
    timing = resp.get("chunk_timing")
    if timing == "none":
        return "a whole response (not streamed)"
    n = resp["n_chunks"] if "n_chunks" in resp else len(resp.get("chunks") or ())
    if n is None:
        return "chunks not reported"
    known = {"recorded": "offsets recorded", "spread": "offsets spread evenly, not recorded"}
    return f"{n} chunk{'s' if n != 1 else ''}" + (f" ({known[timing]})" if timing in known else "")


def _count(usage: Mapping[str, Any], key: str) -> int | None:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage_text(usage: Mapping[str, Any] | None) -> str:
    """Token usage in words: the prompt (with what of it was read from or written to a cache, and
    what was not: Anthropic's ``input_tokens`` are the uncached part), the completion, the total."""
    if not usage:
        return ""
    prompt, uncached = _count(usage, "prompt_tokens"), _count(usage, "input_tokens")
    read, written = _count(usage, "cache_read_input_tokens"), _count(usage, "cache_creation_input_tokens")
    cached = bool(read or written)
    parts = []
    cache = ", ".join(
        x
        for x in (
            f"{read:,} read from cache" if read else "",
            f"{written:,} written to cache" if written else "",
            f"{uncached:,} uncached" if uncached is not None and cached else "",
        )
        if x
    )
    if prompt is not None:
        parts.append(f"prompt {prompt:,}" + (f" ({cache})" if cache else ""))
    elif uncached is not None:
        parts.append(f"input {uncached:,}" + (f" uncached ({cache})" if cached else ""))
    completion = _count(usage, "completion_tokens")
    output = _count(usage, "output_tokens")
    if completion is not None or output is not None:
        parts.append(f"completion {completion if completion is not None else output:,}")
    total = _count(usage, "total_tokens")
    if total is not None:
        parts.append(f"total {total:,}")
    return ", ".join(parts)


def message_tree(r: dict[str, Any], *, raw: bool = False, previous: dict[str, Any] | None = None) -> str:
    """A round as a tree: the request as sent, the assistant message, each call with its tool message."""
    msg = r["assistant_message"]
    resp = r["response"]
    facts = [f"model {secs(resp['ended_at'] - resp['started_at'])}"]  # the bar's own interval
    first = ttfc_text(resp)
    if first:
        facts.append(first)
    facts.append(chunks_text(resp))
    if _usage_text(resp.get("usage")):
        facts.append(f"tokens: {_usage_text(resp.get('usage'))}")
    timing = resp.get("timing")
    if isinstance(timing, dict) and timing.get("source"):
        facts.append(f"timing {timing['source']}" + (f" ({timing['note']})" if timing.get("note") else ""))
    parts = [
        request_html(r, previous) if "request" in r else "",
        f"<div class='tcl-msg tcl-assistant'><span class='tcl-role'>assistant</span>"
        f"<span class='tcl-muted'>{e(' · '.join(facts))}</span>",
    ]
    reasoning = reasoning_text(r)
    if reasoning:
        parts.append(
            f"<details>{SUMMARY}reasoning ({len(reasoning):,} characters)</summary><pre>{e(reasoning)}</pre>"
            "</details>"
        )
    content = _content(msg)
    if content:
        parts.append(f"<div>{e(content)}</div>")
    elif not r["tool_calls"]:
        parts.append(" <span class='tcl-muted'>(empty)</span>")
    parts.append("</div>")
    if r["tool_calls"]:
        parts.append("<ul class='tcl-calls'>")
        parts += [call_row(c, x, raw=raw) for _, c, x in paired(r)]
        parts.append("</ul>")
    parts.append(findings_html(r.get("findings") or []))
    return "".join(parts)


def round_html(
    r: dict[str, Any],
    *,
    raw: bool = False,
    title: bool = True,
    previous: dict[str, Any] | None = None,
    span: float | None = None,
    table: bool = True,
    mode: bool = True,
) -> str:
    """One round's panel: title (optional, e.g. when an accordion shows it), message tree, timeline
    (with its bars as a table, for keyboards and screen readers).

    `span`: seconds the timeline covers from the round's start (share it across rounds or modes so
    bars compare; a round of ~0 s is then a sliver, not a full-width bar). `mode`: the title names the
    round's mode (False for a trace that does not evidence one).
    """
    heading = f"<div class='tcl-round-title'>{e(round_title(r, mode=mode))}</div>" if title else ""
    start = float(r["response"]["started_at"])
    end = start + max(span or 0.0, round_duration(r), 1e-3)
    tl = timeline_svg([r], start=start, end=end, relative=True, min_px=NARROWEST, table=table)
    return (
        f"<div class='tcl-round' data-round='{r['round_index']}'>{heading}"
        f"{message_tree(r, raw=raw, previous=previous)}{tl}</div>"
    )


def round_spans(rounds: Sequence[dict[str, Any]], *, shared: bool = False) -> list[float]:
    """Seconds each round's timeline covers. Shared: the longest round's, so bars compare across
    rounds. Otherwise each round's own (a 4.4 s round fills its width), but at least a hundredth of
    the longest, so a ~0 s round is still a sliver, not a full-width bar."""
    durations = [round_duration(r) for r in rounds]
    longest = max(durations, default=0.0)
    if shared:
        return [longest] * len(rounds)
    return [max(d, longest * SLIVER) for d in durations]


SLIVER = 0.01
"""The least a round's own time scale covers, as a share of the longest round's."""


COVERS_WORDS = {"upper_bound": "an upper bound, not only the run", "wait": "a wait, no tool ran"}
"""How a view names a duration that is not the thing itself (`toolcall_lab.records.TimingCovers`)."""


def timing_summary(doc: dict[str, Any]) -> str:
    """Where the run's numbers come from, counted from the data (per-call provenance when the trace
    carries it, the trace-level `timings` label otherwise)."""
    model: dict[str, int] = {}
    tools: dict[str, int] = {}
    chunks: dict[str, int] = {}
    closing = 0
    for r in doc["rounds"]:
        t = r["response"].get("timing")
        if placeholder_of(r) is not None:  # an importer's closing round: no model call to count
            closing += 1
        elif isinstance(t, dict) and t.get("source"):
            model[t["source"]] = model.get(t["source"], 0) + 1
        c = r["response"].get("chunk_timing")
        if isinstance(c, str):
            chunks[c] = chunks.get(c, 0) + 1
        for x in r["tool_executions"]:
            t = x.get("timing")
            if isinstance(t, dict) and t.get("source"):
                covers = COVERS_WORDS.get(t.get("covers", ""))
                label = t["source"] + (f" ({covers})" if covers else "")
                tools[label] = tools.get(label, 0) + 1
    if not model and not tools:
        label = doc["metadata"].get("timings")
        return f"timings: {label} (one label for the whole trace)" if label else "timings: not labelled"

    def part(name: str, counts: dict[str, int]) -> str:
        return f"{name} " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) if counts else ""

    pieces = [
        p for p in (part("model calls", model), part("tools", tools), part("chunk offsets", chunks)) if p
    ]
    if closing:
        pieces.append(CLOSING if closing == 1 else f"{closing} closing rounds added, no model call")
    return "timings: " + "; ".join(pieces)


def _first_model(doc: dict[str, Any]) -> str | None:
    for r in doc["rounds"]:
        for c in r["response"]["chunks"][:3]:
            m = c["payload"].get("model") if isinstance(c.get("payload"), dict) else None
            if isinstance(m, str) and m:
                return m
    return None


def header_html(doc: dict[str, Any]) -> str:
    """The run header: title, origin (truthfully), model, mode, size, wall time, outcome, timing
    provenance, token usage and time to first chunk."""
    meta, outcome, rounds = doc["metadata"], doc["outcome"], doc["rounds"]
    origin = str(meta.get("origin"))
    origin_note = ORIGIN_NOTE.get(origin, origin)
    if meta.get("replayed_from"):
        origin_note += f" from {article(str(meta['replayed_from']))} {meta['replayed_from']} trace"
    model = meta.get("model") or _first_model(doc)
    usage: dict[str, int] = {}
    for r in rounds:
        for k, v in (r["response"].get("usage") or {}).items():
            if isinstance(v, int) and not isinstance(v, bool):
                usage[k] = usage.get(k, 0) + v
    first = next((t for t in (ttfc_text(r["response"]) for r in rounds) if t), None)
    mode = mode_evidenced(doc)
    n_calls = sum(len(r["tool_calls"]) for r in rounds)
    status = f"{outcome['status']} / {outcome['reason']}"
    bad = outcome["status"] not in ("completed",)
    facts = [
        f"<span class='tcl-badge{' tcl-badge-warn' if origin != 'recorded' else ''}' "
        f"title='{e(origin_note)}'>"
        f"origin: {e(origin)}</span><span class='tcl-muted'>{e(origin_note)}</span>",
        f"model <b>{e(model) if model else '(not recorded)'}</b>"
        + (f" via {e(meta['provider'])}" if meta.get("provider") else ""),
        f"mode <b>{e(mode)}</b>"
        if mode
        else "<span title='the trace does not say how its calls were run (no batch with a recorded start "
        "and end)'>mode <b>not evidenced</b></span>",
        f"<b>{plural(len(rounds), 'round')}</b>, <b>{plural(n_calls, 'call')}</b>",
        f"wall <b>{exact(outcome['wall_time_s'])} s</b>",
        f"outcome <b>{'⚠ ' if bad else '✔ '}{e(status)}</b>",
        e(timing_summary(doc)),
    ]
    if usage:
        facts.append("tokens " + e(_usage_text(usage)))
    if first:
        facts.append(f"round {next(r['round_index'] for r in rounds if ttfc_text(r['response']))}: {first}")
    notes = []
    if outcome.get("error"):
        notes.append(f"<div class='tcl-error'>error: {e(outcome['error'])}</div>")
    if meta.get("notes"):
        notes.append(f"<div class='tcl-muted'>notes: {e(meta['notes'])}</div>")
    if meta.get("source"):
        notes.append(f"<div class='tcl-muted'>source: {e(meta['source'])}</div>")
    facts_html = "".join(f"<span>{f}</span>" for f in facts)
    return (
        f"<div class='tcl-head'><div class='tcl-title'>{e(meta['title'])}</div>"
        f"<div class='tcl-facts'>{facts_html}</div>{''.join(notes)}</div>"
    )


def prompt_html(doc: dict[str, Any]) -> str:
    """The initial messages (system and user prompt) and the tools offered, collapsible."""
    initial = doc.get("initial_messages") or []
    tools = doc.get("tools") or []
    roles = ", ".join(str(m.get("role")) for m in initial)
    msgs = "".join(message_html(m) for m in initial) or "<span class='tcl-muted'>(none recorded)</span>"
    rows = []
    for t in tools:
        fn = t.get("function") or t
        params = (fn.get("parameters") or {}).get("properties") or {}
        rows.append(
            f"<li><b>{e(fn.get('name'))}</b>({e(', '.join(params))}) "
            f"<span class='tcl-muted'>{e((fn.get('description') or '').strip()[:200])}</span></li>"
        )
    said = (
        f"{plural(len(initial), 'initial message')} ({e(roles)})"
        if initial
        else "no initial messages recorded"
    )
    return (
        f"<details class='tcl-prompt' open>{SUMMARY}prompt: {said}</summary>{msgs}</details>"
        f"<details class='tcl-tools'>{SUMMARY}{len(tools)} tool{'s' if len(tools) != 1 else ''} offered: "
        f"{e(', '.join(str((t.get('function') or t).get('name')) for t in tools[:8]))}"
        f"{' …' if len(tools) > 8 else ''}</summary><ul>{''.join(rows)}</ul></details>"
    )


def trace_html(
    doc: dict[str, Any], *, raw: bool = False, max_rounds: int | None = 60, shared_scale: bool = False
) -> str:
    """A whole trace: header, prompt and tools, whole-run timeline, then one panel per round."""
    rounds = doc["rounds"][:max_rounds] if max_rounds else doc["rounds"]
    spans = round_spans(doc["rounds"], shared=shared_scale)
    more = (
        f"<div class='tcl-muted'>… {len(doc['rounds']) - len(rounds)} more rounds (open it in a "
        "TraceView to see them all)</div>"
        if len(rounds) < len(doc["rounds"])
        else ""
    )
    known = mode_evidenced(doc) is not None
    panels = "".join(
        round_html(r, raw=raw, previous=doc["rounds"][i - 1] if i else None, span=spans[i], mode=known)
        for i, r in enumerate(rounds)
    )
    return (
        f"<div class='tcl tcl-trace'>{CSS}{header_html(doc)}{prompt_html(doc)}"
        f"{timeline_svg(doc['rounds'], min_px=NARROWEST)}{panels}{more}</div>"
    )


def comparable(row: Mapping[str, Any]) -> str | None:
    """Why a run cannot be compared with the others (it skipped calls, was cut off, or its strategy
    failed: `analysis.run_rows`'s ``comparable`` / ``not_comparable_why``), or None."""
    skipped = row.get("skipped") or 0
    n = row.get("n_calls")
    flag = row.get("comparable")
    if flag is None or isinstance(flag, float):  # absent, or NaN in a table that mixes sources
        flag = not skipped
    if bool(flag):
        return None
    if skipped:
        return f"skipped {skipped} of {n} calls" if n else f"skipped {skipped} calls"
    why = row.get("not_comparable_why")
    if isinstance(why, str) and why:
        return why
    return "did less work than the other runs"


def run_state(row: Mapping[str, Any]) -> str:
    """A run that did not end normally, in words (``error / strategy_error``), or "" when it did."""
    status, reason = row.get("status"), row.get("reason")
    if not isinstance(status, str) or status == "completed":
        return ""
    return f"{status} / {reason}" if isinstance(reason, str) and reason else status


def run_caption(row: Mapping[str, Any], notes: Sequence[str] = ()) -> tuple[str, str]:
    """What a view says beside a run, and its exports with it: wall time, model calls, client round
    trips and the strategy's notes; and the warning when the run did not end normally or cannot be
    compared ("" when neither)."""
    caption = (
        f"{exact(row['wall_time_s'])} s · {plural(int(row['upstream_calls']), 'model call')} · "
        f"{plural(int(row['client_round_trips']), 'client round trip')}"
    )
    caption += "".join(f" · note: {n}" for n in notes)
    why, state = comparable(row), run_state(row)
    warning = " · ".join(
        x for x in (f"ended {state}" if state else "", f"not comparable: {why}" if why else "") if x
    )
    return caption, warning


def with_speedups(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows with the speedup over sequential a summary shows: sequential's wall time over the
    run's, for comparable runs only (None for the others, whose reason is in `not_comparable_why`)."""
    seq = next((r["wall_time_s"] for r in rows if r["mode"] == "sequential" and not comparable(r)), None)
    out = []
    for r in rows:
        speed = seq / r["wall_time_s"] if seq and r["wall_time_s"] and not comparable(r) else None
        row = {**r, "speedup_vs_sequential": speed}
        out.append({**row, "speedup_rests_on": assumed(row)})
    return out


def assumed(row: Mapping[str, Any]) -> str:
    """``"assumed timings"`` when a row's speedup rests entirely or mostly on estimated or
    placeholder numbers (`analysis.speedup_caveat`), else ""."""
    from toolcall_lab.analysis import speedup_caveat

    return speedup_caveat(row) or ""


def speedup_text(row: Mapping[str, Any], value: Any) -> str:
    """A speedup as every view shows it: ``1.05x``, or ``1.05x (assumed timings)``."""
    why = assumed(row)
    return f"{fmt(value, 'speedup_vs_sequential')}x" + (f" ({why})" if why else "")


def summary_table(rows: Sequence[dict[str, Any]]) -> str:
    """Per-mode wall time, speedup, model calls and client round trips, and the tool time that ran
    while the model was still streaming (eager strategies; the column only when any did); a run that
    is not comparable (skipped calls, cut off, its strategy failed) is marked and gets no speedup, a
    run that did not end normally says its status and reason. Narrow enough for a 1280 px page: the
    headers wrap, the reasons are notes under the table (every column: the view's `rows`)."""
    streamed = any(r.get("stream_overlap_s") for r in rows)
    heads = [
        ("mode", "the mode or strategy, and how its run ended when not normally"),
        ("wall time", "seconds from the first request to the final answer"),
        ("speedup vs sequential", "sequential's wall time over this one's (comparable runs only)"),
        ("model calls", "requests to the model"),
        ("client round trips", "requests the client made (serialized: one per handed-out call)"),
        ("tool time", "seconds of tool execution, summed over calls"),
        *([("tools in stream", "tool seconds run while the model was still streaming")] if streamed else []),
        ("failed", "calls that failed"),
        ("skipped", "calls never executed"),
    ]
    head = "<tr>" + "".join(
        f"<th class='{'tcl-left' if k == 0 else ''}' title='{e(tip)}'>{e(h)}</th>"
        for k, (h, tip) in enumerate(heads)
    )
    body, notes = [], []
    for r in with_speedups(rows):
        why, state = comparable(r), run_state(r)
        if why:
            notes.append(f"<li><b>{e(r['mode'])}</b>: ⚠ not comparable ({e(why)})</li>")
            speed = f"<span title='{e(why)}'>⚠ not comparable</span>"
        elif r["speedup_vs_sequential"] is not None:
            speed = speedup_text(r, r["speedup_vs_sequential"])
            if r["speedup_rests_on"]:
                speed = (
                    f"<span class='tcl-warn' title='the time this saves is no more than the estimated or "
                    f"placeholder seconds behind it'>⚠ {e(speed)}</span>"
                )
                notes.append(
                    f"<li><b>{e(r['mode'])}</b>: ⚠ the speedup rests on {e(r['speedup_rests_on'])} "
                    "(estimated or placeholder durations, or chunk offsets spread evenly)</li>"
                )
        else:
            speed = "—"
        mode = e(r["mode"]) + (
            f" <span class='tcl-warn' title='{e(state)}'>⚠ {e(r['status'])}</span>" if state else ""
        )
        if state and r.get("reason") and f"({r.get('reason')})" not in (why or ""):
            notes.append(f"<li><b>{e(r['mode'])}</b>: the run ended {e(state)}</li>")
        stream = f"<td>{exact(r.get('stream_overlap_s', 0.0))} s</td>" if streamed else ""
        body.append(
            f"<tr class='{'tcl-nc' if why else ''}'><td class='tcl-left'>{mode}</td>"
            f"<td>{exact(r['wall_time_s'])} s</td><td>{speed}</td><td>{r['upstream_calls']}</td>"
            f"<td>{r['client_round_trips']}</td><td>{exact(r['tool_time_s'])} s</td>{stream}"
            f"<td>{r['failures']}</td><td>{r['skipped']}</td></tr>"
        )
    listed = f"<ul class='tcl-notes'>{''.join(notes)}</ul>" if notes else ""
    return (
        f"<div class='tcl-scroll'><table class='tcl-table tcl-summary'>{head}{''.join(body)}</table></div>"
        f"{listed}"
    )


def table_html(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    index: Sequence[int] | None = None,
    labels: Mapping[str, Callable[[Any], str]] | None = None,
    html_cells: Mapping[str, Callable[[Any], str]] | None = None,
) -> str:
    """Any table (e.g. whatever `compare` returns), values rounded for reading, rows that cannot be
    compared marked instead of a speedup, long text cut by the page (full text in its tooltip).
    `labels` maps a column to how its values are shown (e.g. a path as its file name); `html_cells`
    to the markup of its cells (escaped by the caller; the whole value is the tooltip)."""
    head = "".join(
        f"<th class='tcl-left'>{e(c)}</th>" for c in ["#", *columns] if index is not None or c != "#"
    )
    body = []
    for k, row in enumerate(rows):
        why = comparable(row)
        cells = []
        for c in columns:
            value = row.get(c)
            if why and c.startswith("speedup"):
                cells.append(f"<td class='tcl-left'>⚠ not comparable ({e(why)})</td>")
                continue
            if c == "speedup_vs_sequential" and isinstance(value, float) and assumed(row):
                cells.append(f"<td>⚠ {e(speedup_text(row, value))}</td>")
                continue
            if html_cells and c in html_cells:
                cells.append(f"<td class='tcl-left tcl-name' title='{e(value)}'>{html_cells[c](value)}</td>")
                continue
            text = labels[c](value) if labels and c in labels else fmt(value, c)
            if isinstance(value, str):
                long = len(text) > 40 or text != value
                cls = "tcl-left tcl-long" if long else "tcl-left"
                title = f" title='{e(value)}'" if long else ""
                cells.append(f"<td class='{cls}'{title}>{e(text)}</td>")
            else:
                cells.append(f"<td>{e(text)}</td>")
        num = f"<td>{index[k]}</td>" if index is not None else ""
        body.append(f"<tr class='{'tcl-nc' if why else ''}'>{num}{''.join(cells)}</tr>")
    return f"<div class='tcl-scroll'><table class='tcl-table'><tr>{head}</tr>{''.join(body)}</table></div>"

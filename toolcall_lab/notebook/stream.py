"""Stepping through a streamed response, as pre-rendered HTML frames (no widgets here).

Each frame shows one chunk's delta, the calls assembled so far with what this chunk appended
highlighted, and the findings up to that point (the last frame: after `finish()`). `stepper_html`
puts every frame in one block with buttons, a slider and play driven by a few lines of inline
script, so a static export (nbconvert HTML, a saved widget state) steps through the chunks without a
kernel.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolcall_lab.formats.anthropic import AnthropicStreamAccumulator
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator
from toolcall_lab.formats.openai_responses import ResponsesStreamAccumulator
from toolcall_lab.notebook.html import findings_html
from toolcall_lab.notebook.theme import CSS, e

Snapshot = dict[int, dict[int, dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class StreamStates:
    """The stream and, per step, the calls so far and the findings so far.

    Step ``i < len(chunks)`` is the state after chunk ``i``; the last step is after ``finish()``.
    """

    format: str
    chunks: tuple[dict[str, Any], ...]
    snapshots: tuple[Snapshot, ...]
    findings: tuple[tuple[dict[str, Any], ...], ...]

    @classmethod
    def build(
        cls, chunks: Sequence[dict[str, Any]], fmt: str = "openai-chat", batch: int = 0
    ) -> StreamStates:
        acc: ChatCompletionAccumulator | AnthropicStreamAccumulator | ResponsesStreamAccumulator
        if fmt == "anthropic":
            acc = AnthropicStreamAccumulator(batch=batch)
        elif fmt == "openai-responses":
            acc = ResponsesStreamAccumulator(batch=batch)
        else:
            acc = ChatCompletionAccumulator(batch=batch)
        snaps: list[Snapshot] = []
        found: list[tuple[dict[str, Any], ...]] = []
        for chunk in chunks:
            acc.feed(chunk)
            snaps.append(acc.snapshot())
            found.append(tuple(f.to_dict() for f in acc.findings))
        final = acc.finish()
        snaps.append(
            {
                c.index: {
                    idx: {"id": t.tool_call_id, "name": t.name, "arguments": t.arguments}
                    for idx, t in enumerate(c.tool_calls)
                }
                for c in final.choices
            }
        )
        found.append(tuple(f.to_dict() for f in final.findings))
        return cls(format=fmt, chunks=tuple(chunks), snapshots=tuple(snaps), findings=tuple(found))

    def __len__(self) -> int:
        return len(self.snapshots)


def delta_of(chunk: dict[str, Any], fmt: str) -> str:
    """The part of a chunk that carries news, as compact JSON (the whole chunk for other shapes)."""
    if fmt == "openai-chat" and isinstance(chunk.get("choices"), list) and chunk["choices"]:
        parts = []
        for c in chunk["choices"]:
            if not isinstance(c, dict):
                parts.append(json.dumps(c, ensure_ascii=False))
                continue
            delta = {k: v for k, v in (c.get("delta") or {}).items() if v is not None}
            extra = f", finish_reason: {c['finish_reason']}" if c.get("finish_reason") else ""
            parts.append(
                f"choice {c.get('index', '?')} delta: {json.dumps(delta, ensure_ascii=False)}{extra}"
            )
        return "\n".join(parts)
    if fmt == "anthropic" and "type" in chunk:
        body = {k: v for k, v in chunk.items() if k != "type"}
        return f"{chunk['type']}: {json.dumps(body, ensure_ascii=False)}"
    if fmt == "openai-responses" and "type" in chunk:
        body = {k: v for k, v in chunk.items() if k not in ("type", "response", "sequence_number")}
        return f"{chunk['type']}: {json.dumps(body, ensure_ascii=False)}"
    return json.dumps(chunk, ensure_ascii=False)


def _changed(before: str | None, after: str | None) -> str:
    """`after`, with what was appended to `before` marked (or all of it, if it was replaced)."""
    a, b = after or "", before or ""
    if a == b:
        return e(a) if a else "<span class='tcl-muted'>—</span>"
    if a.startswith(b):
        return f"{e(b)}<mark class='tcl-added' title='added by this chunk'>{e(a[len(b) :])}</mark>"
    return f"<mark class='tcl-added' title='changed by this chunk'>{e(a)}</mark>"


def calls_table(now: Snapshot, before: Snapshot | None) -> str:
    rows = []
    for ci, calls in now.items():
        for idx, c in calls.items():
            old: dict[str, Any] = (before or {}).get(ci, {}).get(idx) or {}
            new = not old and before is not None
            args = _changed(old.get("arguments"), c["arguments"])
            rows.append(
                f"<tr{' class=tcl-new-call' if new else ''}><td>{ci}</td><td>{idx}"
                f"{' <mark class=tcl-added>new</mark>' if new else ''}</td>"
                f"<td class='tcl-left'>{_changed(old.get('id'), c['id'])}</td>"
                f"<td class='tcl-left'>{_changed(old.get('name'), c['name'])}</td>"
                f"<td class='tcl-left'><code>{args}</code></td></tr>"
            )
    if not rows:
        return "<div class='tcl-muted'>no tool calls yet</div>"
    return (
        "<div class='tcl-scroll'><table class='tcl-table tcl-calls-so-far'><tr><th>choice</th><th>index</th>"
        f"<th class='tcl-left'>id</th><th class='tcl-left'>name</th><th class='tcl-left'>arguments</th></tr>"
        f"{''.join(rows)}</table></div>"
    )


def frame_html(states: StreamStates, i: int) -> str:
    """Step `i`: what the chunk says, the calls so far (appended text marked), the findings so far."""
    n = len(states.chunks)
    before = states.snapshots[i - 1] if i > 0 else None
    if i < n:
        label = f"chunk {i} of {n} (0-based)"
        chunk = states.chunks[i]
        delta = (
            f"<div class='tcl-muted'>what this chunk says</div><pre class='tcl-chunk-delta'>"
            f"{e(delta_of(chunk, states.format))}</pre><details><summary>whole chunk</summary>"
            f"<pre>{e(json.dumps(chunk, indent=1, ensure_ascii=False))}</pre></details>"
        )
    else:
        label = f"after the last chunk: finish() ({n} chunks)"
        delta = (
            "<div class='tcl-muted'>end of stream: calls finalised (fallback ids given, arguments "
            "checked)</div>"
        )
    found = states.findings[i]
    previous = len(states.findings[i - 1]) if i > 0 else 0
    new_found = len(found) - previous
    findings = (
        findings_html(list(found), open_=True)
        + (f"<div><mark class='tcl-added'>{new_found} new at this step</mark></div>" if new_found > 0 else "")
        if found
        else f"<div class='tcl-muted'>{'no findings yet' if i < n else 'no findings: a clean stream'}</div>"
    )
    return (
        f"<div class='tcl-frame-label'><b>{e(label)}</b></div>{delta}<div><b>calls so far</b></div>"
        f"{calls_table(states.snapshots[i], before)}<div><b>findings</b></div>{findings}"
    )


# A few lines of inline script: they run in JupyterLab, the classic notebook and static HTML exports
# alike (event-handler attributes need no script tag, which HTML widgets would not run).
_GO = (
    "var r=this.closest('.tcl-stepper'),f=r.querySelectorAll('.tcl-frame'),s=r.querySelector('input');"
    "function go(k){k=Math.max(0,Math.min(f.length-1,k));s.value=k;"
    "f.forEach(function(x,j){x.hidden=(j!=k)});r.setAttribute('data-step',k);"
    "r.querySelector('.tcl-step-of').textContent=k+' / '+(f.length-1);}"
)
_PLAY = (
    "var b=this;if(r.tclTimer){clearInterval(r.tclTimer);r.tclTimer=0;b.textContent='▶ play';return}"
    "b.textContent='⏸ pause';if(+s.value==f.length-1){go(0)}"
    "r.tclTimer=setInterval(function(){if(+s.value==f.length-1){clearInterval(r.tclTimer);r.tclTimer=0;"
    "b.textContent='▶ play';return}go(+s.value+1)},500);"
)


def stepper_html(states: StreamStates, step: int = 0) -> str:
    """Every frame, one visible, with first / previous / play / next / last and a slider."""
    last = len(states) - 1
    step = max(0, min(step, last))
    frames = "".join(
        f"<div class='tcl-frame' data-frame='{k}'{'' if k == step else ' hidden'}>"
        f"{frame_html(states, k)}</div>"
        for k in range(len(states))
    )

    def button(act: str, text: str, label: str) -> str:
        code = {"first": "go(0)", "prev": "go(+s.value-1)", "next": "go(+s.value+1)", "last": f"go({last})"}
        handler = _GO + (_PLAY if act == "play" else code[act])
        return (
            f'<button type="button" class="tcl-{act}" aria-label="{label}" onclick="{handler}">'
            f"{text}</button>"
        )

    controls = (
        # data-lm-suppress-shortcuts (on the slider itself): JupyterLab leaves it the arrow keys
        "<div class='tcl-controls'>"
        + button("first", "◀◀ first", "first chunk")
        + button("prev", "◀ previous", "previous chunk")
        + button("play", "▶ play", "play through the chunks")
        + button("next", "next ▶", "next chunk")
        + button("last", "last ▶▶", "after the last chunk")
        + f'<input type="range" min="0" max="{last}" value="{step}" aria-label="chunk" '
        'data-lm-suppress-shortcuts="true" '
        f'oninput="{_GO}go(+this.value)">' + f"<span class='tcl-step-of'>{step} / {last}</span></div>"
    )
    return (
        f"<div class='tcl tcl-stepper' data-step='{step}' data-format='{e(states.format)}'>{CSS}"
        f"<div class='tcl-muted'>{e(states.format)} stream, {len(states.chunks)} chunks: step through them "
        f"with the buttons, the slider or the arrow keys</div>{controls}{frames}</div>"
    )

"""Stepping through a streamed response in the page, in output that grows with the stream, not its square.

Each step shows one chunk's delta, the calls assembled so far with what this chunk appended
marked, and the findings up to that point (the last step: after `finish()`). Instead of one
pre-rendered frame per chunk (each repeating every call's arguments so far), the page gets the
stream once, as per-step edits (text appended to a call's field, or a field set), and a few lines
of inline script rebuild any step from them, so a static export (nbconvert HTML, saved widget
state) steps through the chunks without a kernel. `frame_html` renders a step in Python the same
way (the one shown before any script runs, and what the tests compare the script with).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolcall_lab.exceptions import ProviderStreamError
from toolcall_lab.formats.anthropic import AnthropicStreamAccumulator
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator
from toolcall_lab.formats.openai_responses import ResponsesStreamAccumulator
from toolcall_lab.notebook.html import finding_li, findings_block
from toolcall_lab.notebook.theme import CSS, e

Snapshot = dict[int, dict[int, dict[str, Any]]]
Key = tuple[int, int]
Op = tuple[int, int, str, str, str]
"""(choice, index, field, 'a' to append | 's' to set, text)."""
FIELDS = ("id", "name", "arguments")


@dataclass(frozen=True, slots=True)
class Step:
    """What one step changes: edits to the calls, the row order when it is not the previous order
    plus the calls this step created, the findings when they changed, and a note."""

    ops: tuple[Op, ...] = ()
    rows: tuple[Key, ...] | None = None
    found: tuple[int, ...] | None = None
    note: str = ""


@dataclass(slots=True)
class _State:
    calls: dict[Key, dict[str, str]] = field(default_factory=dict)
    rows: list[Key] = field(default_factory=list)
    found: list[int] = field(default_factory=list)

    def copy(self) -> _State:
        return _State({k: dict(v) for k, v in self.calls.items()}, list(self.rows), list(self.found))

    def apply(self, step: Step) -> None:
        """The same rules as the page's script (`_JS`)."""
        new: list[Key] = []
        for ci, idx, name, mode, text in step.ops:
            key = (ci, idx)
            call = self.calls.setdefault(key, {"id": "", "name": "", "arguments": ""})
            if key not in self.rows and key not in new:
                new.append(key)
            call[name] = call[name] + text if mode == "a" else text
        self.rows = list(step.rows) if step.rows is not None else self.rows + new
        if step.found is not None:
            self.found = list(step.found)

    def snapshot(self) -> Snapshot:
        out: Snapshot = {}
        for ci, idx in self.rows:
            out.setdefault(ci, {})[idx] = dict(self.calls[(ci, idx)])
        return out


def _plain_snapshot(snap: Snapshot) -> Snapshot:
    return {
        ci: {idx: {f: str(c.get(f) or "") for f in FIELDS} for idx, c in calls.items()}
        for ci, calls in snap.items()
    }


def _diff(before: _State, snap: Snapshot, found: list[int], note: str = "") -> Step:
    ops: list[Op] = []
    rows: list[Key] = []
    for ci, calls in snap.items():
        for idx, call in calls.items():
            key = (ci, idx)
            rows.append(key)
            old = before.calls.get(key)
            for name in FIELDS:
                was, now = (old or {}).get(name, ""), call[name]
                if old is not None and was == now:
                    continue
                if old is None and not now:
                    if name == "id":  # an empty new call still needs an edit to exist
                        ops.append((ci, idx, name, "s", ""))
                    continue
                if now.startswith(was):
                    ops.append((ci, idx, name, "a", now[len(was) :]))
                else:
                    ops.append((ci, idx, name, "s", now))
    step = Step(ops=tuple(ops))
    trial = before.copy()
    trial.apply(step)
    return Step(
        ops=tuple(ops),
        rows=None if trial.rows == rows else tuple(rows),
        found=None if found == before.found else tuple(found),
        note=note,
    )


@dataclass(frozen=True, slots=True)
class StreamStates:
    """The stream as steps: step ``i < len(chunks)`` is the state after chunk ``i``, the last one
    after ``finish()``. A provider error stops the parser where it came (its finding says so);
    later chunks are shown, marked as not read."""

    format: str
    chunks: tuple[dict[str, Any], ...]
    steps: tuple[Step, ...]
    findings: tuple[dict[str, Any], ...]
    """Every distinct finding, in the order first seen (steps refer to them by position)."""
    error: str | None = None
    finish_note: str = "end of stream: finish() ran"
    """What `finish()` did, only what happened (how many calls it finalised, which got fallback ids)."""
    last_label: str = ""
    """The last step's heading: after the last chunk, or after the provider error that ended it."""

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
        seen: dict[str, int] = {}
        unique: list[dict[str, Any]] = []

        def ids(found: Sequence[dict[str, Any]]) -> list[int]:
            out = []
            for f in found:
                key = json.dumps(f, sort_keys=True, default=str)
                if key not in seen:
                    seen[key] = len(unique)
                    unique.append(f)
                out.append(seen[key])
            return out

        state, steps, error, error_at = _State(), [], None, 0
        extra: list[dict[str, Any]] = []
        for k, chunk in enumerate(chunks):
            note = ""
            if error is None:
                try:
                    acc.feed(chunk)
                except ProviderStreamError as exc:
                    error, error_at = str(exc), k
                    note = f"the provider reported an error here; the parser stops: {exc.provider_message}"
                    if not any(f.kind == "provider_error" for f in acc.findings):
                        extra.append({"kind": "provider_error", "severity": "error", "message": error})
            else:
                note = "after the provider error: not read by the parser"
            found = ids([*(f.to_dict() for f in acc.findings), *extra])
            step = _diff(state, _plain_snapshot(acc.snapshot()), found, note)
            state.apply(step)
            steps.append(step)
        try:
            final = acc.finish()
            snap: Snapshot = {
                c.index: {
                    idx: {"id": t.tool_call_id, "name": t.name, "arguments": t.arguments}
                    for idx, t in enumerate(c.tool_calls)
                }
                for c in final.choices
            }
            found = ids([*(f.to_dict() for f in final.findings), *extra])
            note = ""
        except ProviderStreamError as exc:  # a reader that raises again at the end: keep what was read
            snap, found = state.snapshot(), ids([*(f.to_dict() for f in acc.findings), *extra])
            note = f"finish() raised: {exc}"
        streamed = state.snapshot()
        steps.append(_diff(state, _plain_snapshot(snap), found, note))
        n = len(chunks)
        if error is None:
            last = f"after the last chunk: finish() ({n} chunks)"
            told = _finish_note(streamed, _plain_snapshot(snap))
        else:  # the stream did not end: the provider's error ended it, and the parser stopped there
            last = f"after the provider error at chunk {error_at}: finish() ({n} chunks)"
            told = _broken_note(error_at, _plain_snapshot(snap))
        return cls(
            format=fmt,
            chunks=tuple(chunks),
            steps=tuple(steps),
            findings=tuple(unique),
            error=error,
            finish_note=told,
            last_label=last,
        )

    def label(self, i: int) -> str:
        """Step `i`'s heading."""
        n = len(self.chunks)
        if i < n:
            return f"chunk {i} of {n} (0-based)"
        return self.last_label or f"after the last chunk: finish() ({n} chunks)"

    def __len__(self) -> int:
        return len(self.steps)

    def _states(self, i: int) -> tuple[_State | None, _State]:
        state = _State()
        for step in self.steps[:i]:
            state.apply(step)
        before = state.copy() if i > 0 else None
        state.apply(self.steps[i])
        return before, state

    def snapshot(self, i: int) -> Snapshot:
        """The calls after step `i`, per choice and index (fields as text)."""
        return self._states(i)[1].snapshot()

    def findings_at(self, i: int) -> list[dict[str, Any]]:
        """The findings after step `i`."""
        return [self.findings[k] for k in self._states(i)[1].found]

    def data(self) -> str:
        """The stream for the page's script: per step the delta text, the chunk as shown, the edits."""
        items = []
        for i, step in enumerate(self.steps):
            item: dict[str, Any] = {"o": step.ops}
            if i < len(self.chunks):
                item["d"] = delta_of(self.chunks[i], self.format)
                item["c"] = json.dumps(self.chunks[i], indent=1, ensure_ascii=False, default=str)
            if step.rows is not None:
                item["r"] = step.rows
            if step.found is not None:
                item["f"] = step.found
            if step.note:
                item["x"] = step.note
            items.append(item)
        found = [finding_li(f) for f in self.findings]
        last = self.label(len(self.chunks))
        return json.dumps({"s": items, "F": found, "e": self.finish_note, "l": last}, ensure_ascii=False)


def _broken_note(at: int, final: Snapshot) -> str:
    """What the last step holds when a provider error ended the stream at chunk `at`."""
    n = sum(len(per) for per in final.values())
    kept = f"{n} call(s) (a call whose arguments are not complete is never run)" if n else "no tool calls"
    return (
        f"the stream did not end normally: the provider reported an error at chunk {at} and the parser "
        f"stopped there; finish() kept what had been read: {kept}"
    )


def _finish_note(streamed: Snapshot, final: Snapshot) -> str:
    """What `finish()` changed, in words: calls finalised and ids it had to make up (none: not said)."""
    calls = [(ci, idx, c) for ci, per in final.items() for idx, c in per.items()]
    if not calls:
        return "end of stream: finish() ran; no tool calls"
    made_up = [
        str(c.get("id") or "")
        for ci, idx, c in calls
        if c.get("id") and not (streamed.get(ci, {}).get(idx) or {}).get("id")
    ]
    text = f"end of stream: finish() finalised {len(calls)} call(s)"
    if made_up:
        text += f"; {len(made_up)} arrived without an id and got a fallback id ({', '.join(made_up)})"
    else:
        text += ", each with the id the provider sent"
    return text


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
    return json.dumps(chunk, ensure_ascii=False, default=str)


def _changed(before: str | None, after: str | None) -> str:
    """`after`, with what was appended to `before` marked (or all of it, if it was replaced)."""
    a, b = after or "", before or ""
    if a == b:
        return e(a) if a else "<span class='tcl-muted'>—</span>"
    if a.startswith(b):
        return f"{e(b)}<mark class='tcl-added' title='added by this chunk'>{e(a[len(b) :])}</mark>"
    return f"<mark class='tcl-added' title='changed by this chunk'>{e(a)}</mark>"


def calls_table(now: Snapshot, before: Snapshot | None, *, final: bool = False) -> str:
    rows = []
    for ci, calls in now.items():
        for idx, c in calls.items():
            old: dict[str, Any] = (before or {}).get(ci, {}).get(idx) or {}
            new = not old and before is not None
            tr = " class='tcl-new-call'" if new else ""
            mark = " <mark class='tcl-added'>new</mark>" if new else ""
            rows.append(
                f"<tr{tr}><td>{ci}</td><td>{idx}{mark}</td>"
                f"<td class='tcl-left'>{_changed(old.get('id'), c['id'])}</td>"
                f"<td class='tcl-left'>{_changed(old.get('name'), c['name'])}</td>"
                f"<td class='tcl-left'><code>{_changed(old.get('arguments'), c['arguments'])}</code>"
                "</td></tr>"
            )
    if not rows:
        return f"<div class='tcl-muted'>{'no tool calls' if final else 'no tool calls yet'}</div>"
    return (
        "<div class='tcl-scroll'><table class='tcl-table tcl-calls-so-far'><tr><th>choice</th><th>index</th>"
        "<th class='tcl-left'>id</th><th class='tcl-left'>name</th><th class='tcl-left'>arguments</th></tr>"
        f"{''.join(rows)}</table></div>"
    )


def frame_html(states: StreamStates, i: int) -> str:
    """Step `i`: what the chunk says, the calls so far (appended text marked), the findings so far."""
    n = len(states.chunks)
    before, now = states._states(i)
    if i < n:
        label = states.label(i)
        delta = (
            f"<div class='tcl-muted'>what this chunk says</div><pre class='tcl-chunk-delta'>"
            f"{e(delta_of(states.chunks[i], states.format))}</pre><details><summary>whole chunk</summary>"
            f"<pre>{e(json.dumps(states.chunks[i], indent=1, ensure_ascii=False, default=str))}</pre>"
            "</details>"
        )
    else:
        label = states.label(i)
        delta = f"<div class='tcl-muted'>{e(states.finish_note)}</div>"
    note = states.steps[i].note
    note_html = f"<div class='tcl-warn'>{e(note)}</div>" if note else ""
    found = now.found
    new_found = len(found) - (len(before.found) if before else 0)
    findings = (
        findings_block([finding_li(states.findings[k]) for k in found], open_=True)
        + (f"<div><mark class='tcl-added'>{new_found} new at this step</mark></div>" if new_found > 0 else "")
        if found
        else f"<div class='tcl-muted'>{'no findings yet' if i < n else 'no findings: a clean stream'}</div>"
    )
    return (
        f"<div class='tcl-frame-label'><b>{e(label)}</b></div>{delta}{note_html}"
        f"<div><b>calls so far</b></div>"
        f"{calls_table(now.snapshot(), before.snapshot() if before else None, final=i >= n)}"
        f"<div><b>findings</b></div>{findings}"
    )


# The page's side, in inline event handlers (they run in JupyterLab, the classic notebook and static
# HTML exports alike; HTML widgets would not run a script tag). It rebuilds step k from the edits of
# steps 0..k exactly as `_State.apply` does and renders it as `frame_html` does.
_JS = (
    "var r=this.closest('.tcl-stepper');if(!r.tcl){r.tcl={D:JSON.parse(r.querySelector('textarea.tcl-steps')"
    ".value),j:-1,S:{c:{},r:[],f:[]}}}var T=r.tcl,D=T.D,s=r.querySelector('input[type=range]'),"
    "L=D.s.length-1,n=L;"
    "function E(x){return String(x).replace(/&/g,'&amp;').replace(/</g,'&lt;').replace(/>/g,'&gt;')"
    ".replace(/\"/g,'&quot;').replace(/'/g,'&#x27;')}"
    "function cp(S){var c={};for(var k in S.c){var o=S.c[k];c[k]={id:o.id,name:o.name,arguments:o.arguments}}"
    "return{c:c,r:S.r.slice(),f:S.f.slice()}}"
    "function ap(S,st){var nw=[];st.o.forEach(function(o){var k=o[0]+','+o[1],c=S.c[k];"
    "if(!c){c=S.c[k]={id:'',name:'',arguments:''}}if(S.r.indexOf(k)<0&&nw.indexOf(k)<0)nw.push(k);"
    "c[o[2]]=o[3]=='a'?c[o[2]]+o[4]:o[4]});"
    "S.r=st.r?st.r.map(function(x){return x[0]+','+x[1]}):S.r.concat(nw);"
    "if(st.f)S.f=st.f.slice()}"
    "function ch(b,a){a=a||'';b=b||'';if(a==b)return a?E(a):\"<span class='tcl-muted'>—</span>\";"
    "if(a.indexOf(b)==0)return E(b)+\"<mark class='tcl-added' title='added by this chunk'>\""
    "+E(a.slice(b.length))"
    "+'</mark>';return \"<mark class='tcl-added' title='changed by this chunk'>\"+E(a)+'</mark>'}"
    "function tb(P,C,k){if(!C.r.length)return \"<div class='tcl-muted'>no tool calls\"+(k<n?' yet':'')"
    "+'</div>';"
    "var h=C.r.map(function(k){var c=C.c[k],o=P&&P.r.indexOf(k)>=0?P.c[k]:{},w=P&&P.r.indexOf(k)<0,"
    "q=k.split(',');return '<tr'+(w?\" class='tcl-new-call'\":'')+'><td>'+q[0]+'</td><td>'+q[1]"
    "+(w?\" <mark class='tcl-added'>new</mark>\":'')+\"</td><td class='tcl-left'>\"+ch(o.id,c.id)"
    "+\"</td><td class='tcl-left'>\"+ch(o.name,c.name)+\"</td><td class='tcl-left'><code>\""
    "+ch(o.arguments,c.arguments)+'</code></td></tr>'}).join('');"
    "return \"<div class='tcl-scroll'><table class='tcl-table tcl-calls-so-far'><tr><th>choice</th>"
    "<th>index</th><th class='tcl-left'>id</th><th class='tcl-left'>name</th><th class='tcl-left'>"
    "arguments</th></tr>\"+h+'</table></div>'}"
    "function fd(P,C,k){var m=C.f.length;if(!m)return \"<div class='tcl-muted'>\"+(k<n?'no findings yet'"
    ":'no findings: a clean stream')+'</div>';var w=m-(P?P.f.length:0);"
    "return \"<details class='tcl-findings' open><summary>⚠ \"+m+' finding'+(m!=1?'s':'')+' while parsing'"
    "+'</summary><ul>'+C.f.map(function(i){return D.F[i]}).join('')+'</ul></details>'"
    "+(w>0?\"<div><mark class='tcl-added'>\"+w+' new at this step</mark></div>':'')}"
    "function go(k){k=Math.max(0,Math.min(L,k));if(T.j>k-1){T.j=-1;T.S={c:{},r:[],f:[]}}"
    "while(T.j<k-1){T.j++;ap(T.S,D.s[T.j])}var P=k>0?T.S:null,C=cp(T.S),st=D.s[k];ap(C,st);"
    "var lab=k<n?'chunk '+k+' of '+n+' (0-based)':D.l,"
    "dl=k<n?\"<div class='tcl-muted'>what this chunk says</div><pre class='tcl-chunk-delta'>\"+E(st.d)"
    "+'</pre><details><summary>whole chunk</summary><pre>'+E(st.c)+'</pre></details>'"
    ":\"<div class='tcl-muted'>\"+E(D.e)+'</div>';"
    "r.querySelector('.tcl-frame').innerHTML=\"<div class='tcl-frame-label'><b>\"+E(lab)+'</b></div>'+dl"
    "+(st.x?\"<div class='tcl-warn'>\"+E(st.x)+'</div>':'')+'<div><b>calls so far</b></div>'+tb(P,C,k)"
    "+'<div><b>findings</b></div>'+fd(P,C,k);T.S=C;T.j=k;s.value=k;r.setAttribute('data-step',k);"
    "r.querySelector('.tcl-frame').setAttribute('data-frame',k);"
    "r.querySelector('.tcl-step-of').textContent=k+' / '+L}"
)
_CLICK = (
    "var b=event.target.closest('button');if(!b)return;var a=b.getAttribute('data-act');"
    "if(a=='first')go(0);else if(a=='prev')go(+s.value-1);else if(a=='next')go(+s.value+1);"
    "else if(a=='last')go(L);else if(a=='play'){if(r.tclTimer){clearInterval(r.tclTimer);r.tclTimer=0;"
    "b.textContent='▶ play';return}b.textContent='⏸ pause';if(+s.value==L)go(0);"
    "r.tclTimer=setInterval(function(){if(+s.value>=L){clearInterval(r.tclTimer);r.tclTimer=0;"
    "b.textContent='▶ play';return}go(+s.value+1)},500)}"
)
_INPUT = "if(event.target.type=='range')go(+event.target.value);"
# Arrow keys, Home and End on any control (buttons too, not just the slider, which steps itself).
_KEY = (
    "if(event.target.type=='range')return;"
    "var K={ArrowLeft:-1,ArrowDown:-1,ArrowRight:1,ArrowUp:1}[event.key];"
    "if(K){go(+s.value+K)}else if(event.key=='Home'){go(0)}else if(event.key=='End'){go(L)}else return;"
    "event.preventDefault();event.stopPropagation()"
)


def stepper_html(states: StreamStates, step: int = 0, *, data: str | None = None) -> str:
    """The stream (once), the frame of `step`, first / previous / play / next / last and a slider.
    Pass `data` (`states.data()`) when rendering several steps of one stream."""
    last = len(states) - 1
    step = max(0, min(step, last))

    def button(act: str, text: str, label: str) -> str:
        return (
            f'<button type="button" class="tcl-{act}" data-act="{act}" aria-label="{label}">{text}</button>'
        )

    controls = (
        f'<div class=\'tcl-controls\' onclick="{e(_JS + _CLICK)}" oninput="{e(_JS + _INPUT)}" '
        f'onkeydown="{e(_JS + _KEY)}" data-lm-suppress-shortcuts="true">'
        + button("first", "◀◀ first", "first chunk")
        + button("prev", "◀ previous", "previous chunk")
        + button("play", "▶ play", "play through the chunks")
        + button("next", "next ▶", "next chunk")
        + button("last", "last ▶▶", "after the last chunk")
        # data-lm-suppress-shortcuts (on the slider itself): JupyterLab leaves it the arrow keys
        + f'<input type="range" min="0" max="{last}" value="{step}" aria-label="chunk" '
        'data-lm-suppress-shortcuts="true">' + f"<span class='tcl-step-of'>{step} / {last}</span></div>"
    )
    error = (
        f"<div class='tcl-warn'>⚠ the stream ends in a provider error: {e(states.error)}</div>"
        if states.error
        else ""
    )
    return (
        f"<div class='tcl tcl-stepper' data-step='{step}' data-format='{e(states.format)}'>{CSS}"
        f"<div class='tcl-muted'>{e(states.format)} stream, {len(states.chunks)} chunks: step through them "
        f"with the buttons, the slider or the arrow keys</div>{error}{controls}"
        f"<textarea class='tcl-steps' hidden aria-hidden='true' readonly>{e(data or states.data())}"
        f"</textarea><div class='tcl-frame' data-frame='{step}' aria-live='polite'>"
        f"{frame_html(states, step)}</div></div>"
    )

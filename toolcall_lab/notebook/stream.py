"""Stepping through a streamed response in the page, in output that grows with the stream, not its square.

Each step is one line the parser read (a chunk, the ``[DONE]`` marker, data it could not read): what
it says, the calls assembled so far with what it appended marked, and the findings up to that point;
the last step is the response as the parser gives it (`finish()`), with the findings `toolcall-lab
parse` reports. The steps come from the parser's own reading (`read_stream` watches
`iter_stream_responses`), never from a second reader. Instead of one
pre-rendered frame per chunk (each repeating every call's arguments so far), the page gets the
stream once, as per-step edits (text appended to a call's field, or a field set), and a few lines
of inline script rebuild any step from them, so a static export (nbconvert HTML, saved widget
state) steps through the chunks without a kernel. `frame_html` renders a step in Python the same
way (the one shown before any script runs, and what the tests compare the script with).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast, runtime_checkable

from toolcall_lab.exceptions import UsageError
from toolcall_lab.formats.base import StreamAccumulator
from toolcall_lab.formats.dispatch import iter_stream_responses, try_detect
from toolcall_lab.formats.sse import DONE, Unreadable
from toolcall_lab.messages import Finding, ParsedResponse
from toolcall_lab.notebook.html import finding_li, findings_block
from toolcall_lab.notebook.theme import CSS, SUMMARY, e, plural

Snapshot = dict[int, dict[int, dict[str, Any]]]
Key = tuple[int, int]
Op = tuple[int, int, str, str, str]
"""(choice, index, field, 'a' to append | 's' to set, text)."""
FIELDS = ("id", "name", "arguments", "state")
"""A call's fields; ``state`` is set by the last step only (the parser's verdict: complete or not)."""


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
            call = self.calls.setdefault(key, {"id": "", "name": "", "arguments": "", "state": ""})
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


StepKind = Literal["chunk", "done", "unreadable", "end"]


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the stream as the parser read it: a payload (a chunk), the ``[DONE]`` marker, or
    data it could not read (its text, and why)."""

    kind: Literal["chunk", "done", "unreadable"]
    line: int | None = None
    """Where in the file (None for chunks handed in as a list)."""
    chunk: dict[str, Any] | None = None
    text: str = ""
    """What the line says: ``data: [DONE]``, or the text of the line that could not be read."""
    error: str = ""
    """Why the parser could not read it."""
    after: int | None = None
    """For ``[DONE]``: the line of the payload before it (the reader does not number markers)."""


def _plain_calls(response: ParsedResponse) -> Snapshot:
    """A parsed response's calls, keyed as the accumulators' snapshots are (choice, call index)."""
    out: Snapshot = {}
    for c in response.choices:
        calls = c.tool_calls
        keys = [t.index for t in calls]
        if len(set(keys)) < len(keys):  # indexes reused: by position
            keys = list(range(len(calls)))
        out[c.index] = {
            k: {"id": t.tool_call_id, "name": t.name, "arguments": t.arguments, "state": _verdict(t.complete)}
            for k, t in zip(keys, calls, strict=True)
        }
    return {ci: calls for ci, calls in out.items() if calls or ci == 0}


def _verdict(complete: bool) -> str:
    return "✔ complete" if complete else "⚠ incomplete: never run"


def _so_far(acc: StreamAccumulator) -> list[Finding]:
    """What the accumulator has found so far: its findings, and what the calls in progress will be
    reported for when they are finished (a repeated id or name, a split name...), from the parser's
    own rules, so a finding shows at the chunk the parser learned it."""
    out = list(acc.findings)
    for call in acc.pending_calls():
        if call.quirky:
            where = {
                "chunk_index": call.first_chunk,
                "choice_index": call.choice_index,
                "call_index": call.index,
            }
            call._quirks(call.tool_call_id or f"call {call.index}", call.name or "", out, where)
    return out


@runtime_checkable
class Snapshots(Protocol):
    """An accumulator that shows the calls it is assembling (every streaming accumulator does)."""

    def snapshot(self) -> Snapshot: ...


@dataclass(frozen=True, slots=True)
class _Seen:
    """The reading after one item: which response it is in, its calls and findings so far."""

    response: int
    calls: Snapshot
    findings: tuple[Finding, ...]
    reading: bool
    """A response is being read (an accumulator is open)."""
    held: bool = False
    """A response has ended (at ``[DONE]`` or an error) and the next has not begun."""
    ended_by: str | None = None
    """The error a response just ended with (a provider error), when one did."""


WIRE = ("openai-chat", "anthropic", "openai-responses")


def _detected(items: Sequence[Any]) -> str:
    return next((str(f) for c in items if type(c) is dict and (f := try_detect(c))), "openai-chat")


def read_stream(
    items: Sequence[Any], *, lines: Sequence[int] | None = None, fmt: str | None = None, batch: int = 0
) -> list[StreamStates]:
    """A stream as the parser reads it, one `StreamStates` per response it holds: every item (a
    payload, ``[DONE]``, unreadable data, a framing finding) goes through `iter_stream_responses`,
    the reader `toolcall-lab parse` uses, which is watched before each item; each response's last
    step is the response that reader gives, with its findings. `lines`: the file line of each
    payload (a recording's `Exchange.lines`)."""
    where = [0]
    seen: list[_Seen] = []
    received: list[ParsedResponse] = []

    def watch(acc: StreamAccumulator | None, last: ParsedResponse | None, notes: Sequence[Finding]) -> None:
        if acc is not None:
            assert isinstance(acc, Snapshots)
            seen.append(
                _Seen(acc.batch - batch, _plain_snapshot(acc.snapshot()), (*notes, *_so_far(acc)), True)
            )
        elif last is not None:
            calls, found = _plain_calls(last), (*last.findings, *notes)
            seen.append(_Seen(len(received), calls, found, False, True, last.error))
        else:
            seen.append(_Seen(len(received), {}, tuple(notes), False))

    payload_lines = iter(lines or ())

    def fed() -> Iterator[Any]:
        for item in items:
            if type(item) is dict and lines is not None:
                where[0] = next(payload_lines, 0)
            yield item

    wire = cast(Any, fmt if fmt in WIRE else None)
    for response in iter_stream_responses(
        fed(), fmt=wire, batch=batch, errors="keep", where=where, watch=watch
    ):
        received.append(response)
    steps: dict[int, list[tuple[Line, _Seen]]] = {}
    payloads = iter(lines or ())
    last_line: int | None = None
    for k, item in enumerate(items):
        after = seen[k + 1]
        if type(item) is dict:
            line = Line("chunk", next(payloads, None) if lines is not None else None, chunk=item)
            index, last_line = after.response, line.line
        elif item is DONE:
            line, index = Line("done", text="data: [DONE]", after=last_line), after.response
        elif type(item) is Unreadable:
            error = item.error
            line = Line(
                "unreadable",
                getattr(error, "line_number", None),
                text=getattr(error, "line", ""),
                error=str(error),
            )
            # outside a response it marks the next one (after a response that ended: the one after it)
            index = after.response + (not after.reading and after.held)
        else:
            continue  # a framing finding: shown from the next step on, as the reader reports it
        index = min(max(index, 0), len(received) - 1)
        steps.setdefault(index, []).append((line, after))
    out = []
    for j, response in enumerate(received):
        base = response.format.removesuffix("-stream")
        fmt_j = base if base in WIRE else (fmt or _detected(items))
        out.append(StreamStates.of(steps.get(j, []), response, fmt_j, last_piece=j == len(received) - 1))
    return out


@dataclass(frozen=True, slots=True)
class StreamStates:
    """One response of a stream as steps: one per line the parser read for it (a chunk, the
    ``[DONE]`` marker, unreadable data), each the reading after it, then the response as the parser
    gives it (what `toolcall-lab parse` reports). A provider error ends the response where it came
    (its finding says so); unreadable data marks it failed and reading goes on."""

    format: str
    lines: tuple[Line, ...]
    steps: tuple[Step, ...]
    findings: tuple[dict[str, Any], ...]
    """Every distinct finding, in the order first seen (steps refer to them by position)."""
    response: ParsedResponse | None = None
    """The response as the parser gives it (the last step)."""
    error: str | None = None
    finish_note: str = "end of stream: finish() ran"
    """What `finish()` did, only what happened (how many calls it finalised, which got fallback ids)."""
    last_label: str = ""
    """The last step's heading: after the last chunk, or after the provider error that ended it."""
    labels: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    seen_at: tuple[int | None, ...] = ()
    """Per finding, the chunk (0-based) at whose step it first shows (None: at finish()); a finding's
    own ``chunk_index`` may point elsewhere (repeated_header: the first header)."""

    def finding(self, k: int) -> str:
        """Finding `k` as a list item that names the chunk it is shown at."""
        return finding_li(self.findings[k], seen_at=self.seen_at[k] if k < len(self.seen_at) else None)

    @property
    def chunks(self) -> tuple[dict[str, Any], ...]:
        """The payloads of this response, in order."""
        return tuple(line.chunk for line in self.lines if line.chunk is not None)

    @classmethod
    def build(cls, chunks: Sequence[dict[str, Any]], fmt: str | None = None, batch: int = 0) -> StreamStates:
        """The steps of one response's chunks (see `read_stream` for a stream of several).

        Raises:
            UsageError: the chunks hold several responses.
        """
        pieces = read_stream(list(chunks), fmt=fmt, batch=batch)
        if len(pieces) != 1:
            raise UsageError(
                f"the chunks hold {len(pieces)} responses; read_stream(chunks) gives the steps of each"
            )
        return pieces[0]

    @classmethod
    def of(
        cls, read: Sequence[tuple[Line, _Seen]], response: ParsedResponse, fmt: str, *, last_piece: bool
    ) -> StreamStates:
        seen: dict[str, int] = {}
        unique: list[dict[str, Any]] = []

        def ids(found: Sequence[Finding]) -> list[int]:
            out = []
            for f in found:
                d = f.to_dict()
                key = json.dumps(d, sort_keys=True, default=str)
                if key not in seen:
                    seen[key] = len(unique)
                    unique.append(d)
                if seen[key] not in out:
                    out.append(seen[key])
            return out

        state, steps, labels, notes = _State(), [], [], []
        n = sum(1 for line, _ in read if line.kind == "chunk")
        k = 0
        seen_at: dict[int, int | None] = {}
        error_at: int | None = None
        unreadable_at: int | None = None
        for line, after in read:
            note = ""
            if line.kind == "chunk":
                label = f"chunk {k} of {n} (0-based)" + (f", line {line.line}" if line.line else "")
                if after.ended_by is not None and error_at is None:
                    error_at = k
                    note = "the provider reported an error here; the parser ends this response: "
                    note += after.ended_by
                k += 1
            elif line.kind == "done":
                label = "[DONE]" + (f" (after line {line.after})" if line.after else "") + ": the end marker"
                note = "the end marker: the parser finishes the response here (finish() runs)"
            else:
                label = f"line {line.line}: unreadable data" if line.line else "unreadable data"
                note = (
                    f"the parser cannot read this line ({line.error}); the response it falls in is marked "
                    "failed and its calls incomplete; reading goes on"
                )
                if unreadable_at is None:
                    unreadable_at = line.line or 0
            step = _diff(state, after.calls, ids(after.findings), note)
            for f in step.found or ():
                seen_at.setdefault(f, k - 1 if line.kind == "chunk" else None)
            state.apply(step)
            steps.append(step)
            labels.append(label)
            notes.append(note)
        streamed = state.snapshot()
        final = _plain_calls(response)
        steps.append(_diff(state, final, ids(response.findings), ""))
        s = "" if n == 1 else "s"
        if error_at is not None:
            last = f"after the provider error at chunk {error_at}: finish() ({n} chunk{s})"
            told = _broken_note(error_at, final)
        elif unreadable_at is not None:
            where = f" at line {unreadable_at}" if unreadable_at else ""
            last = f"after the unreadable data{where}: finish() ({n} chunk{s})"
            told = (
                f"the stream holds data the parser could not read{where}: the response is marked failed "
                f"({response.error}) and its calls incomplete"
            )
        else:
            last = f"after the last chunk: finish() ({n} chunk{s})"
            told = _finish_note(streamed, final)
        ended = read[-1][0].kind if read else ""
        if ended == "done":
            told += "; the response ended at [DONE]"
        elif not last_piece and error_at is None:
            told += "; the next response began after it"
        told += "; the findings are the ones `toolcall-lab parse` reports for this response"
        return cls(
            format=fmt,
            lines=tuple(line for line, _ in read),
            steps=tuple(steps),
            findings=tuple(unique),
            response=response,
            error=response.error,
            finish_note=told,
            last_label=last,
            labels=(*labels, last),
            notes=tuple(notes),
            seen_at=tuple(seen_at.get(i) for i in range(len(unique))),
        )

    def label(self, i: int) -> str:
        """Step `i`'s heading."""
        if self.labels:
            return self.labels[min(i, len(self.labels) - 1)]
        return self.last_label

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

    def said(self, i: int) -> str:
        """What the line of step `i` says: a chunk's delta, the marker or the unreadable text."""
        line = self.lines[i]
        if line.chunk is not None:
            return delta_of(line.chunk, self.format)
        return line.text

    def data(self) -> str:
        """The stream for the page's script: per step its heading, what its line says, the whole
        chunk, the edits."""
        items = []
        for i, step in enumerate(self.steps):
            item: dict[str, Any] = {"o": step.ops, "t": self.label(i)}
            if i < len(self.lines):
                line = self.lines[i]
                item["d"] = self.said(i)
                item["k"] = line.kind
                if line.chunk is not None:
                    item["c"] = json.dumps(line.chunk, indent=1, ensure_ascii=False, default=str)
            if step.rows is not None:
                item["r"] = step.rows
            if step.found is not None:
                item["f"] = step.found
            if step.note:
                item["x"] = step.note
            items.append(item)
        found = [self.finding(k) for k in range(len(self.findings))]
        return json.dumps({"s": items, "F": found, "e": self.finish_note}, ensure_ascii=False)

    def counts(self) -> str:
        """``12 chunks, 1 [DONE] line, 1 unreadable line``: what the steps are."""
        n = sum(1 for line in self.lines if line.kind == "chunk")
        parts = [f"{n} chunk{'s' if n != 1 else ''}"]
        done = sum(1 for line in self.lines if line.kind == "done")
        bad = sum(1 for line in self.lines if line.kind == "unreadable")
        if done:
            parts.append(f"{done} [DONE] line{'s' if done != 1 else ''}")
        if bad:
            parts.append(f"{bad} unreadable line{'s' if bad != 1 else ''}")
        return ", ".join(parts)


def _broken_note(at: int, final: Snapshot) -> str:
    """What the last step holds when a provider error ended the stream at chunk `at`."""
    n = sum(len(per) for per in final.values())
    kept = (
        f"{plural(n, 'call')} (a call whose arguments are not complete is never run)"
        if n
        else "no tool calls"
    )
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
    text = f"end of stream: finish() finalised {plural(len(calls), 'call')}"
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


JUDGED = "<th class='tcl-left'>parsed as</th>"


def calls_table(now: Snapshot, before: Snapshot | None, *, final: bool = False) -> str:
    rows = []
    judged = any(c.get("state") for calls in now.values() for c in calls.values())
    for ci, calls in now.items():
        for idx, c in calls.items():
            old: dict[str, Any] = (before or {}).get(ci, {}).get(idx) or {}
            new = not old and before is not None
            tr = " class='tcl-new-call'" if new else ""
            mark = " <mark class='tcl-added'>new</mark>" if new else ""
            state = f"<td class='tcl-left'>{e(c.get('state', ''))}</td>" if judged else ""
            rows.append(
                f"<tr{tr}><td>{ci}</td><td>{idx}{mark}</td>"
                f"<td class='tcl-left tcl-call-id'>{_changed(old.get('id'), c['id'])}</td>"
                f"<td class='tcl-left'>{_changed(old.get('name'), c['name'])}</td>"
                f"<td class='tcl-left tcl-call-args'><code>"
                f"{_changed(old.get('arguments'), c['arguments'])}</code></td>{state}</tr>"
            )
    if not rows:
        return f"<div class='tcl-muted'>{'no tool calls' if final else 'no tool calls yet'}</div>"
    return (
        "<div class='tcl-scroll'><table class='tcl-table tcl-calls-so-far'><tr><th>choice</th><th>index</th>"
        "<th class='tcl-left'>id</th><th class='tcl-left'>name</th><th class='tcl-left'>arguments</th>"
        f"{JUDGED if judged else ''}</tr>{''.join(rows)}</table></div>"
    )


def frame_html(states: StreamStates, i: int) -> str:
    """Step `i`: what its line says (a chunk's delta, the marker, unreadable text), the calls so far
    (appended text marked), the findings so far; the last step: the response as the parser gives it."""
    n = len(states.lines)
    before, now = states._states(i)
    label = states.label(i)
    if i < n:
        line = states.lines[i]
        if line.chunk is not None:
            delta = (
                f"<div class='tcl-muted'>what this chunk says</div><pre class='tcl-chunk-delta'>"
                f"{e(states.said(i))}</pre><details>{SUMMARY}whole chunk</summary>"
                f"<pre>{e(json.dumps(line.chunk, indent=1, ensure_ascii=False, default=str))}</pre>"
                "</details>"
            )
        else:
            delta = (
                f"<div class='tcl-muted'>what this line says</div><pre class='tcl-chunk-delta'>"
                f"{e(states.said(i))}</pre>"
            )
    else:
        delta = f"<div class='tcl-muted'>{e(states.finish_note)}</div>"
    note = states.steps[i].note
    note_html = f"<div class='tcl-warn'>{e(note)}</div>" if note else ""
    found = now.found
    new_found = len(found) - (len(before.found) if before else 0)
    findings = (
        findings_block([states.finding(k) for k in found], open_=True)
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
    "function cp(S){var c={};for(var k in S.c){var o=S.c[k];c[k]={id:o.id,name:o.name,arguments:o.arguments,"
    "state:o.state}}"
    "return{c:c,r:S.r.slice(),f:S.f.slice()}}"
    "function ap(S,st){var nw=[];st.o.forEach(function(o){var k=o[0]+','+o[1],c=S.c[k];"
    "if(!c){c=S.c[k]={id:'',name:'',arguments:'',state:''}}if(S.r.indexOf(k)<0&&nw.indexOf(k)<0)nw.push(k);"
    "c[o[2]]=o[3]=='a'?c[o[2]]+o[4]:o[4]});"
    "S.r=st.r?st.r.map(function(x){return x[0]+','+x[1]}):S.r.concat(nw);"
    "if(st.f)S.f=st.f.slice()}"
    "function ch(b,a){a=a||'';b=b||'';if(a==b)return a?E(a):\"<span class='tcl-muted'>—</span>\";"
    "if(a.indexOf(b)==0)return E(b)+\"<mark class='tcl-added' title='added by this chunk'>\""
    "+E(a.slice(b.length))"
    "+'</mark>';return \"<mark class='tcl-added' title='changed by this chunk'>\"+E(a)+'</mark>'}"
    "function tb(P,C,k){if(!C.r.length)return \"<div class='tcl-muted'>no tool calls\"+(k<n?' yet':'')"
    "+'</div>';var J=C.r.some(function(k){return C.c[k].state});"
    "var h=C.r.map(function(k){var c=C.c[k],o=P&&P.r.indexOf(k)>=0?P.c[k]:{},w=P&&P.r.indexOf(k)<0,"
    "q=k.split(',');return '<tr'+(w?\" class='tcl-new-call'\":'')+'><td>'+q[0]+'</td><td>'+q[1]"
    "+(w?\" <mark class='tcl-added'>new</mark>\":'')+\"</td><td class='tcl-left tcl-call-id'>\"+ch(o.id,c.id)"
    "+\"</td><td class='tcl-left'>\"+ch(o.name,c.name)+\"</td><td class='tcl-left tcl-call-args'><code>\""
    "+ch(o.arguments,c.arguments)+'</code></td>'+(J?\"<td class='tcl-left'>\"+E(c.state||'')+'</td>':'')"
    "+'</tr>'}).join('');"
    "return \"<div class='tcl-scroll'><table class='tcl-table tcl-calls-so-far'><tr><th>choice</th>"
    "<th>index</th><th class='tcl-left'>id</th><th class='tcl-left'>name</th><th class='tcl-left'>"
    "arguments</th>\"+(J?\"<th class='tcl-left'>parsed as</th>\":'')+'</tr>'+h+'</table></div>'}"
    "function fd(P,C,k){var m=C.f.length;if(!m)return \"<div class='tcl-muted'>\"+(k<n?'no findings yet'"
    ":'no findings: a clean stream')+'</div>';var w=m-(P?P.f.length:0);"
    "return \"<details class='tcl-findings' open>"
    + SUMMARY
    + "⚠ \"+m+' finding'+(m!=1?'s':'')+' while parsing'"
    "+'</summary><ul>'+C.f.map(function(i){return D.F[i]}).join('')+'</ul></details>'"
    "+(w>0?\"<div><mark class='tcl-added'>\"+w+' new at this step</mark></div>':'')}"
    "function go(k){k=Math.max(0,Math.min(L,k));if(T.j>k-1){T.j=-1;T.S={c:{},r:[],f:[]}}"
    "while(T.j<k-1){T.j++;ap(T.S,D.s[T.j])}var P=k>0?T.S:null,C=cp(T.S),st=D.s[k];ap(C,st);"
    "var lab=st.t,"
    "dl=k<n?(st.k=='chunk'?\"<div class='tcl-muted'>what this chunk says</div><pre class='tcl-chunk-delta'>\""
    "+E(st.d)+'</pre><details>" + SUMMARY + "whole chunk</summary><pre>'+E(st.c)+'</pre></details>'"
    ":\"<div class='tcl-muted'>what this line says</div><pre class='tcl-chunk-delta'>\"+E(st.d)+'</pre>')"
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
    unreadable = any(line.kind == "unreadable" for line in states.lines)
    what = "holds data the parser could not read" if unreadable else "ends in a provider error"
    error = f"<div class='tcl-warn'>⚠ the stream {what}: {e(states.error)}</div>" if states.error else ""
    return (
        f"<div class='tcl tcl-stepper' data-step='{step}' data-format='{e(states.format)}'>{CSS}"
        f"<div class='tcl-muted'>{e(states.format)} stream, {e(states.counts())}: step through them "
        f"with the buttons, the slider or the arrow keys</div>{error}{controls}"
        f"<textarea class='tcl-steps' hidden aria-hidden='true' readonly>{e(data or states.data())}"
        f"</textarea><div class='tcl-frame' data-frame='{step}' aria-live='polite'>"
        f"{frame_html(states, step)}</div></div>"
    )

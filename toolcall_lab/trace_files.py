"""Traces on disk: stable JSON (sorted keys, indent), atomic saves without credentials, clear errors,
and `validate`: possible secrets, unanswered tool calls, fields the schema does not know."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from toolcall_lab._unicode import LONE_SURROGATE, describe, escape, unwritable
from toolcall_lab.exceptions import TraceError, TraceFormatError
from toolcall_lab.records import ToolExecution, count_failed
from toolcall_lab.redaction import SECRET_KEYS, redact, redact_stream, secret_warnings
from toolcall_lab.trace import RESULT_NOT_RECORDED, Trace

__all__ = [
    "SECRET_KEYS",
    "dumps",
    "iter_trace_paths",
    "load",
    "redact_trace",
    "save",
    "scrub",
    "secret_warnings",
    "unknown_fields",
    "validate",
]

_UMASK = os.umask(0)
os.umask(_UMASK)


def dumps(trace: Trace, *, source: str | None = None) -> str:
    """The canonical text of a trace: sorted keys, 1-space indent, trailing newline.

    Lone surrogates (a tool's result, a model's arguments: ``"\\ud800"``) are written as ``\\uXXXX``
    escapes, so the file is UTF-8 and `load` gives the same strings back. A high surrogate followed
    by a low one cannot be kept apart from the character the pair encodes: that raises
    `TraceError` naming the field, round and call (`source`: the file, for the message).
    """
    doc = trace.to_file_dict()  # (schema 3: each request a delta over the previous one)
    text = json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    if LONE_SURROGATE.search(text):
        bad = unwritable(doc)
        if bad is not None:
            raise TraceError(
                f"{source or 'trace'}: cannot be saved: {describe(doc, bad)} holds a surrogate pair "
                "as two separate code points (e.g. from text decoded with surrogatepass); JSON would read "
                "it back as one character, so the record would change. Decode that text properly "
                "(or replace the pair) before the tool returns it"
            )
        text = escape(text)
    return text


def redact_trace(trace: Trace) -> Trace:
    """The trace with credentials replaced by ``[REDACTED: ...]`` marks wherever they occur, each
    removal listed in ``metadata.redactions`` (see `toolcall_lab.redaction`), by its JSON path in the
    file form (`Trace.to_file_dict`: a message is looked at once, where it is first sent). `trace` is never
    changed (a new trace is returned; `trace` itself when nothing was found).

    A text streamed over several chunks is cleaned as a whole and cut back into its chunks
    (`toolcall_lab.redaction.redact_stream`), so the chunks still join to the arguments and messages
    the trace stores, and every call's arguments complete at the chunk they did."""
    doc = trace.to_file_dict()  # (new containers down to the chunks; their payloads are the trace's own)
    kept = doc["metadata"].pop("redactions")
    notes: list[str] = []
    keep: set[str] = set()
    for i, r in enumerate(doc["rounds"]):
        chunks = r["response"]["chunks"]
        payloads, more, pieces = redact_stream([c["payload"] for c in chunks], f"rounds[{i}].response.chunks")
        notes += more
        keep |= pieces
        r["response"]["chunks"] = [{**c, "payload": p} for c, p in zip(chunks, payloads, strict=True)]
    cleaned, more = redact(doc, keep=keep)
    notes += more
    if not notes:
        return trace
    cleaned["metadata"]["redactions"] = [*kept, *notes]
    return Trace.from_dict(cleaned)


def save(trace: Trace, path: str | Path, *, removed: list[str] | None = None) -> Path:
    """Write atomically (temp file in the same folder + rename): a crash never leaves half a file.

    Credentials are stripped first (`redact_trace`): what was removed is marked in place and listed
    in ``metadata.redactions`` (and added to `removed` when given, so a caller can say so). A trace
    that `load` would refuse (times that contradict each other, ...) is not written: a `TraceError`
    says what `load` would say, and no file is left.
    """
    target = Path(path)
    clean = redact_trace(trace)
    if removed is not None:
        removed += clean.metadata.redactions[len(trace.metadata.redactions) :]
    text = dumps(clean, source=str(target))
    try:  # the checks `load` applies, on the text as written: never a file that cannot be read back
        Trace.from_dict(json.loads(text))
    except TraceError as exc:
        raise TraceError(
            f"{target}: not saved: the trace would not load back ({exc}); whatever built it made a record "
            "that contradicts itself"
        ) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load(path: str | Path) -> Trace:
    """Read and check a trace file; errors name the file and the JSON path of the bad field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{p}: cannot read: {exc}") from exc
    if not text.strip():
        what = "empty file (0 bytes)" if not text else "the file holds only whitespace"
        raise TraceFormatError(f"{what}: not a trace", source=str(p))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) or exc.msg == "Unterminated string starting at"
        raise TraceFormatError(
            f"not valid JSON{' (file looks truncated)' if truncated else ''}: {exc.msg}: line {exc.lineno} "
            f"column {exc.colno}{'' if truncated else not_a_trace_hint(p)}",
            source=str(p),
        ) from None
    if not isinstance(doc, dict) or "schema_version" not in doc:  # JSON, but not a trace
        try:
            return Trace.from_dict(doc, source=str(p))
        except TraceError as exc:
            raise type(exc)(f"{exc}{not_a_trace_hint(p)}") from None
    return Trace.from_dict(doc, source=str(p))


def not_a_trace_hint(path: Path) -> str:
    """What to do with a file that is not a trace: it may be a recording or a transcript to import."""
    return (
        f" (if {path.name} is a recording or a transcript, not a toolcall_lab trace, turn it into trace "
        f"files first: `toolcall-lab import KIND {path} --out traces/`; `toolcall-lab import --help` "
        "lists the kinds)"
    )


def iter_trace_paths(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Files named directly, and ``*.json`` files found (sorted) in folders."""
    for item in paths:
        p = Path(item)
        if p.is_dir():
            yield from sorted(q for q in p.rglob("*.json") if not q.name.startswith("."))
        else:
            yield p


def scrub(value: Any) -> Any:
    """A copy of any JSON value with credentials replaced by marks (see `toolcall_lab.redaction`)."""
    return redact(value)[0]


_FREE_FORM = frozenset(
    {
        "settings",
        "usage",
        "payload",
        "assistant_message",
        "messages",
        "tools",
        "initial_messages",
        "redactions",
    }
)
"""Keys whose values are not described by the schema (provider payloads, messages, settings)."""


def _sample_doc() -> dict[str, Any]:
    """A trace with one of everything, as written (both forms of a request, whole and a delta): the
    fields the current schema knows."""
    from toolcall_lab.messages import Finding, ToolCall
    from toolcall_lab.records import ModelCall, Round, TimedChunk, Timing, ToolExecution
    from toolcall_lab.trace import TraceMetadata, TraceOutcome

    call = ToolCall(tool_call_id="c", name="t", arguments="{}")
    rnd = Round(
        round_index=0,
        mode="sequential",
        request_messages=(),
        model_call=ModelCall(
            started_at=0.0, ended_at=1.0, first_chunk_at=0.5, chunks=(TimedChunk(offset_s=0.5, payload={}),)
        ),
        assistant_message={},
        tool_calls=(call,),
        executions=(
            ToolExecution(
                tool_call_id="c",
                name="t",
                arguments="{}",
                index=0,
                status="ok",
                result="",
                started_at=1.0,
                ended_at=2.0,
                queued_at=0.5,
                returned_at=2.5,
                withheld_result="",
                timing=Timing(source="recorded", covers="wait"),
            ),
        ),
        findings=(Finding(kind="missing_id", message=""),),
        strategy_notes=("",),
    )
    trace = Trace(
        metadata=TraceMetadata(title="", origin="scripted", parent={"source": "", "tool_call_id": ""}),
        tools=(),
        initial_messages=(),
        rounds=(rnd,),
        outcome=TraceOutcome(status="completed", reason="final_answer"),
    )
    whole, delta = trace.to_dict(), trace.to_file_dict()
    whole["rounds"].append(delta["rounds"][0])
    return whole


def _shape(value: Any, path: str = "") -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    if isinstance(value, dict):
        out[path] = set(value)
        for k, v in value.items():
            if k not in _FREE_FORM:
                for p, keys in _shape(v, f"{path}.{k}").items():
                    out.setdefault(p, set()).update(keys)
    elif isinstance(value, list):
        for v in value:
            for p, keys in _shape(v, f"{path}[]").items():
                out.setdefault(p, set()).update(keys)
    return out


_OLDER_FIELDS: dict[int, dict[str, set[str]]] = {1: {".metadata": {"timings"}}}
"""Fields earlier schema versions wrote that the current one dropped (read, then migrated)."""


def unknown_fields(doc: Any) -> list[str]:
    """JSON paths of fields the trace schema does not know (a typo, or a newer writer), in order."""
    known = _shape(_sample_doc())
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    for shape_path, keys in _OLDER_FIELDS.get(version if isinstance(version, int) else 0, {}).items():
        known[shape_path] = known.get(shape_path, set()) | keys
    out: list[str] = []

    def walk(value: Any, shape_path: str, path: str) -> None:
        if isinstance(value, dict):
            allowed = known.get(shape_path)
            for k, v in value.items():
                p = f"{path}.{k}" if path else str(k)
                if allowed is not None and k not in allowed:
                    out.append(p)
                elif k not in _FREE_FORM:
                    walk(v, f"{shape_path}.{k}", p)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{shape_path}[]", f"{path}[{i}]")

    walk(doc, "", "")
    return out


def unanswered_calls(trace: Trace, differing: list[tuple[bool, str]] | None = None) -> list[str]:
    """Tool calls without a result: no execution at their position, none sent back to the model in the
    next request, a different result sent than the one recorded (into `differing` when given, as
    (whether the text sent is a string, the warning): the call is answered, with another result), or
    none recorded by the source."""
    out: list[str] = []
    rounds = trace.rounds
    for k, r in enumerate(rounds):
        sent = (
            _answers_in(rounds[k + 1].request_messages, r.assistant_message) if k + 1 < len(rounds) else None
        )
        if sent is None and k + 1 < len(rounds) and r.tool_calls:
            out.append(
                f"rounds[{r.round_index}]: its assistant message is not in the next request, so what the "
                "model was sent for its calls cannot be checked"
            )
        answers: dict[str, list[dict[str, Any]]] = {}
        for m in sent or []:
            answers.setdefault(m.get("tool_call_id") or "", []).append(m)
        by_id: dict[str, list[ToolExecution]] = {}
        if len(r.executions) != len(r.tool_calls):  # not one per call: find each call's by id
            out.append(
                f"rounds[{r.round_index}]: {len(r.tool_calls)} call(s) but {len(r.executions)} execution(s)"
            )
            for e in r.executions:
                by_id.setdefault(e.tool_call_id, []).append(e)
        for pos, call in enumerate(r.tool_calls):
            where = f"rounds[{r.round_index}] call {call.tool_call_id} ({call.name})"
            if by_id or len(r.executions) != len(r.tool_calls):
                found = by_id.get(call.tool_call_id)
                ex = found.pop(0) if found else None
            else:
                ex = r.executions[pos]
            if ex is None or ex.tool_call_id != call.tool_call_id:
                other = f" (the execution at its position is for {ex.tool_call_id})" if ex is not None else ""
                out.append(f"{where}: no execution recorded{other}")
                continue
            if ex.status == "skipped":
                continue  # first_only: no result is sent back, on purpose
            if ex.result == RESULT_NOT_RECORDED:
                out.append(f"{where}: its result was not recorded by the source")
                continue
            if sent is None:
                continue
            given = answers.get(call.tool_call_id)
            answer = given.pop(0) if given else None
            if answer is None:
                out.append(f"{where}: the next request does not answer it")
            elif answer.get("content") != ex.result:
                said = (
                    f"{where} (position {pos}): the next request answers it with "
                    f"{_clip(answer.get('content'))}, but the recorded result is {_clip(ex.result)}"
                )
                if differing is None:
                    out.append(said)
                else:
                    differing.append((isinstance(answer.get("content"), str), said))
    return out


_SUCCEEDED = frozenset({"ok", "skipped"})
"""Statuses whose record carries no error (every other status's text is its error)."""


def status_contradictions(trace: Trace) -> list[str]:
    """Executions whose status contradicts their error: a call that succeeded (or was skipped) with
    an error, or one that did not with none (e.g. status ``error`` over a success result)."""
    out = []
    for r in trace.rounds:
        for pos, ex in enumerate(r.executions):
            where = f"rounds[{r.round_index}] call {ex.tool_call_id} (position {pos})"
            if ex.status in _SUCCEEDED and ex.error is not None:
                out.append(f"{where}: status {ex.status!r}, but it has an error {_clip(ex.error)}")
            elif ex.status not in _SUCCEEDED and ex.error is None:
                out.append(
                    f"{where}: status {ex.status!r}, but its error is null (its result is {_clip(ex.result)})"
                )
    return out


WALL_TIME_SLACK_S = 60.0
"""How much longer than its rounds' span a run made by this package (origin scripted or replayed)
may say it took (the work after its last record: closing, hooks, listeners) before `validate` calls
its ``wall_time_s`` a contradiction."""


def wall_time_contradiction(trace: Trace) -> str | None:
    """A completed run made here whose ``outcome.wall_time_s`` is far beyond its rounds' span (the
    end of its last record): its own clock cannot have run that long unrecorded. Recorded and
    imported runs are not checked (a source may count time the rounds do not show, e.g. a session
    left open)."""
    if trace.metadata.origin not in ("scripted", "replayed") or not trace.rounds:
        return None
    if trace.outcome.status != "completed":  # (a failed model call or hook ran after the last round)
        return None
    last = max(max([r.model_call.ended_at, *(e.ended_at for e in r.executions)]) for r in trace.rounds)
    wall = trace.outcome.wall_time_s
    if wall is None or wall - last <= max(WALL_TIME_SLACK_S, last):
        return None
    return (
        f"outcome.wall_time_s is {wall} s, but the rounds end at {last:.3f} s (rounds[0] to "
        f"rounds[{trace.rounds[-1].round_index}]): the run's wall time contradicts its rounds"
    )


def _clip(value: Any) -> str:
    """A short form of a message content or result for a warning, credentials masked (a warning
    must never print a secret)."""
    text = repr(redact(value)[0])
    return text if len(text) <= 60 else text[:57] + "..."


def _answers_in(
    request: tuple[dict[str, Any], ...], assistant: dict[str, Any]
) -> list[dict[str, Any]] | None:
    """The tool messages right after `assistant` in a request (None when it is not there)."""
    for i in range(len(request) - 1, -1, -1):
        if request[i] == assistant:
            out = []
            for m in request[i + 1 :]:
                if m.get("role") != "tool":
                    break
                out.append(m)
            return out
    return None


def final_conversation(trace: Trace) -> list[dict[str, Any]]:
    """The conversation as the run left it: the last request, the last response, its results."""
    if not trace.rounds:
        return list(trace.initial_messages)
    last = trace.rounds[-1]
    return [
        *last.request_messages,
        last.assistant_message,
        *(e.to_message() for e in last.executions if e.answered),
    ]


CONTRADICTION = "contradiction: "
"""How `validate` starts a warning that the trace contradicts itself (`contradictions`): the CLI exits
1 on those, --strict or not."""

_ORDER_SLACK_S = 1e-6
"""Imported timestamps are exact to the microsecond: closer than that is not out of order."""


def order_problems(trace: Trace) -> list[str]:
    """Times that contradict the order of a run (loading checks each record's own times; these
    span records): a tool execution that starts before the model call that asked for it started,
    and a model call that starts before the previous round's executions ended."""
    problems: list[str] = []
    previous_end: tuple[int, float] | None = None
    for k, r in enumerate(trace.rounds):
        asked = r.model_call.started_at
        if previous_end is not None and asked < previous_end[1] - _ORDER_SLACK_S:
            problems.append(
                f"rounds[{k}].response starts at {asked:.6f} s, before round {previous_end[0]}'s tool "
                f"executions ended ({previous_end[1]:.6f} s)"
            )
        for i, ex in enumerate(r.executions):
            if ex.started_at < asked - _ORDER_SLACK_S:
                problems.append(
                    f"rounds[{k}].tool_executions[{i}] ({ex.tool_call_id}) starts at {ex.started_at:.6f} s, "
                    f"before the model call that asked for it started ({asked:.6f} s)"
                )
        if r.executions:
            previous_end = (k, max(ex.ended_at for ex in r.executions))
        else:
            previous_end = None
    return problems


_ANSWERED_BY_THE_MODEL = frozenset({"final_answer", "max_rounds", "fail_fast"})
"""Outcome reasons of a run the model ended with an answer (its last round holds it)."""


def _same_arguments(a: str, b: str) -> bool:
    """The same argument text, or the same JSON object (whitespace, key order)."""
    if a == b:
        return True
    try:
        return bool(json.loads(a) == json.loads(b))
    except (ValueError, TypeError, RecursionError):
        return False


def _message_calls(message: dict[str, Any]) -> list[tuple[Any, Any, Any]] | None:
    """(id, name, arguments) of each tool call an assistant message carries (None: it carries none)."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return None
    out = []
    for c in calls:
        fn = c.get("function") if isinstance(c, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        out.append((c.get("id") if isinstance(c, dict) else None, fn.get("name"), fn.get("arguments")))
    return out


_STATUS_OF_REASON = {
    **dict.fromkeys(("final_answer", "max_rounds", "fail_fast", "agent_finished"), "completed"),
    **dict.fromkeys(("aborted", "cancelled", "interrupted"), "aborted"),
    "deadline": "timeout",
    **dict.fromkeys(
        (
            "all_calls_failed",
            "model_error",
            "hook_error",
            "empty_response",
            "replay_divergence",
            "strategy_error",
        ),
        "failed",
    ),
    **dict.fromkeys(("recording_incomplete", "stopped_as_recorded"), "incomplete"),
}
"""The status each reason the loop writes goes with (`toolcall_lab.runs.Reason`)."""


def _made_here(trace: Trace) -> list[str]:
    """A run made by this package (not imported): a reason the loop writes under another status, a
    final answer of a run that did not complete, and an execution naming a call its round does not
    have (answered, in the next request, under its call's id)."""
    out: list[str] = []
    outcome, rounds = trace.outcome, trace.rounds
    said = f"outcome: {outcome.status}/{outcome.reason}, but"
    status = _STATUS_OF_REASON.get(outcome.reason)
    if status is not None and status != outcome.status:
        out.append(f"{said} the reason {outcome.reason!r} ends a run {status}, not {outcome.status}")
    if outcome.status != "completed" and outcome.final_answer is not None:
        last = rounds[-1] if rounds else None
        final = ""
        if last is not None and not last.tool_calls:
            what = "the final call without tools" if last.final else "the model's answer"
            final = f" (and its last round, rounds[{last.round_index}], is {what})"
        out.append(
            f"{said} it has a final answer {_clip(outcome.final_answer)}{final}: only a completed run ends "
            "with the model's answer"
        )
    for k, r in enumerate(rounds):
        if len(r.executions) != len(r.tool_calls):
            continue  # (`unanswered_calls` says so)
        ids = {c.tool_call_id for c in r.tool_calls}
        sent = (
            _answers_in(rounds[k + 1].request_messages, r.assistant_message) if k + 1 < len(rounds) else None
        )
        for pos, (call, ex) in enumerate(zip(r.tool_calls, r.executions, strict=True)):
            if ex.tool_call_id == call.tool_call_id or ex.tool_call_id in ids:
                continue
            answered = [m for m in sent or () if m.get("tool_call_id") == call.tool_call_id]
            how = (
                f", and the next request answers {call.tool_call_id} with that execution's result"
                if any(m.get("content") == ex.result for m in answered)
                else ""
            )
            out.append(
                f"rounds[{r.round_index}] call {call.tool_call_id} (position {pos}): its execution names "
                f"{ex.tool_call_id}, a call this round does not have{how}"
            )
    return out + _executions_made_here(trace)


_NOT_EXECUTED = "Not executed: "
"""How the loop's record of a call that never started begins (its result and its error)."""


def _executions_made_here(trace: Trace) -> list[str]:
    """(A run made here) an execution against itself, its call and the run: a call "not executed"
    that ran for a while, kept a result, or sits in a completed run; an execution under another
    name than its call's; an index given twice in a round; an execution that ended after the next
    round's request, which carries its result, was sent."""
    out: list[str] = []
    rounds = trace.rounds
    for k, r in enumerate(rounds):
        where = f"rounds[{r.round_index}]"
        indexes = [ex.index for ex in r.executions]
        for index in sorted({i for i in indexes if indexes.count(i) > 1}):
            ids = [ex.tool_call_id for ex in r.executions if ex.index == index]
            out.append(
                f"{where}: the executions {', '.join(ids)} all have index {index} (each call has its own)"
            )
        nxt = rounds[k + 1] if k + 1 < len(rounds) else None
        sent = _answers_in(nxt.request_messages, r.assistant_message) if nxt is not None else None
        answered = {m.get("tool_call_id") for m in sent or ()}
        for pos, (call, ex) in enumerate(zip(r.tool_calls, r.executions, strict=False)):
            name = f"{where} call {ex.tool_call_id} (position {pos})"
            if ex.tool_call_id == call.tool_call_id and ex.name != call.name:
                out.append(f"{name}: its execution ran {ex.name!r}, the call is to {call.name!r}")
            if ex.status == "cancelled" and (ex.error or "").startswith(_NOT_EXECUTED):
                if ex.ended_at - ex.started_at > _ORDER_SLACK_S:
                    out.append(
                        f"{name}: 'Not executed', but it ran {ex.ended_at - ex.started_at:.6f} s "
                        f"({ex.started_at:.6f}-{ex.ended_at:.6f} s)"
                    )
                if not ex.result.startswith(_NOT_EXECUTED):
                    out.append(f"{name}: 'Not executed', but it keeps a result {_clip(ex.result)}")
                if trace.outcome.status == "completed":
                    out.append(
                        f"{name}: 'Not executed' because the run was cut off ({_clip(ex.error)}), but the "
                        f"run completed ({trace.outcome.status}/{trace.outcome.reason})"
                    )
            if nxt is not None and ex.tool_call_id in answered:
                asked = nxt.model_call.started_at
                if ex.ended_at > asked + _ORDER_SLACK_S:
                    out.append(
                        f"{name}: it ended at {ex.ended_at:.6f} s, after rounds[{nxt.round_index}]'s request"
                        f" ({asked:.6f} s), which carries its result"
                    )
    return out


def contradictions(trace: Trace) -> list[str]:
    """Where a trace contradicts itself (each record may be valid on its own, loading checks that):
    a round's calls against its assistant message, an execution's arguments against its call's, the
    outcome against the rounds (a run said to end with the model's answer whose last round is a batch
    of calls, or whose final answer is not that round's text; ``all_calls_failed`` with a call that
    did not fail; ``empty_response`` after a text). A replay of such a trace reports something else
    than it says; each item names the round and the call."""
    out: list[str] = []
    for r in trace.rounds:
        k = r.round_index
        changed = {f.tool_call_id for f in r.findings if f.kind == "changed_after_start"}
        carried = _message_calls(r.assistant_message)
        if carried is not None or r.tool_calls:
            mine = [(c.tool_call_id, c.name, c.arguments) for c in r.tool_calls]
            if carried is None:
                out.append(f"rounds[{k}]: {len(mine)} tool call(s), but its assistant message carries none")
            elif len(carried) != len(mine):
                out.append(
                    f"rounds[{k}]: {len(mine)} tool call(s), but its assistant message carries {len(carried)}"
                )
            else:
                for pos, ((cid, name, args), (mid, mname, margs)) in enumerate(
                    zip(mine, carried, strict=True)
                ):
                    if (
                        (cid, name) != (mid, mname)
                        or not isinstance(margs, str)
                        or not _same_arguments(args, margs)
                    ):
                        out.append(
                            f"rounds[{k}] call {cid} (position {pos}): the call is {name}({_clip(args)}), "
                            f"its assistant message says {mid} {mname}({_clip(margs)})"
                        )
        for pos, (call, ex) in enumerate(zip(r.tool_calls, r.executions, strict=False)):
            if ex.tool_call_id != call.tool_call_id or call.tool_call_id in changed:
                continue  # (another warning says so; a call that changed as it streamed has a finding)
            if not _same_arguments(ex.arguments, call.arguments):
                out.append(
                    f"rounds[{k}] call {call.tool_call_id} (position {pos}): its execution ran with "
                    f"{_clip(ex.arguments)}, the call holds {_clip(call.arguments)}"
                )
    outcome, rounds = trace.outcome, trace.rounds
    last = rounds[-1] if rounds else None
    said = f"outcome: {outcome.status}/{outcome.reason}, but"
    if trace.metadata.origin != "imported":  # (a run made here: its outcome is one the loop writes)
        out += _made_here(trace)
    final = f"the last round (rounds[{last.round_index}])" if last is not None else ""
    if outcome.reason in _ANSWERED_BY_THE_MODEL and outcome.status == "completed":
        if last is None:
            out.append(f"{said} the trace has no rounds")
        elif last.tool_calls:
            out.append(
                f"{said} {final} is a batch of {len(last.tool_calls)} tool call(s), not the model's answer: "
                "the round holding that answer is missing"
            )
        elif outcome.final_answer != last.assistant_message.get("content"):
            out.append(
                f"outcome.final_answer is {_clip(outcome.final_answer)}, but the last round "
                f"(rounds[{last.round_index}]) answered {_clip(last.assistant_message.get('content'))}"
            )
    if outcome.reason == "all_calls_failed" and last is not None:
        ran = [e for e in last.executions if e.answered]
        if not last.tool_calls:
            out.append(
                f"{said} {final} is the model's answer, not a batch of calls (such a run ends right after "
                "the batch whose every call failed)"
            )
        elif not ran:
            out.append(f"{said} {final} has no call that ran")
        elif count_failed(ran) != len(ran):
            failed_ids = {e.tool_call_id for e in ran if e.failed}
            fine = [
                f"{e.tool_call_id} ({e.status})"
                for e in ran
                if not e.failed and not (e.status == "duplicate" and e.duplicate_of in failed_ids)
            ]
            out.append(f"{said} in {final} these calls did not fail: {', '.join(fine)}")
    if outcome.reason == "empty_response" and last is not None:
        text = last.assistant_message.get("content")
        if last.tool_calls or (isinstance(text, str) and text.strip()):
            out.append(
                f"{said} {final} answered {_clip(text)}"
                + (f" with {len(last.tool_calls)} tool call(s)" if last.tool_calls else "")
            )
    return out


def _every_format_error(p: Path, first: TraceFormatError) -> None:
    """Raise one error listing every problem `format_errors` finds in the file `first` came from,
    when it finds more than `first` (an unusable file is then fixed in one pass, not one field a run)."""
    from toolcall_lab.exceptions import TraceFormatError
    from toolcall_lab.trace import format_errors

    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return
    errors = format_errors(doc, source=str(p))
    if len(errors) > 1:
        lines = "\n".join(f"  {e.path}: {e.problem}" if e.path else f"  {e.problem}" for e in errors)
        raise TraceFormatError(f"{len(errors)} problems:\n{lines}", source=str(p)) from None


def validate(path: str | Path) -> tuple[Trace, list[str]]:
    """Load a trace and list warnings: possible secrets (schema properties merely named like one are
    not), tool calls without a result (by position), unknown fields, and protocol breaks anywhere in
    the conversation (first_only's skipped calls, unanswered on purpose, excepted), times out of order
    across records (`order_problems`), and contradictions (`contradictions`; a call answered in the
    next request with another text than its recorded result, `status_contradictions`,
    `wall_time_contradiction`); raises on unusable files."""
    from toolcall_lab.exceptions import TraceFormatError
    from toolcall_lab.protocol import validate_messages
    from toolcall_lab.replay import check_recorded_settings, tools_not_offered
    from toolcall_lab.runs import RunConfig

    p = Path(path)
    try:
        trace = load(p)
    except TraceFormatError as exc:
        _every_format_error(p, exc)
        raise
    try:
        check_recorded_settings(trace)
    except TraceFormatError as exc:
        raise TraceFormatError(f"{p}: {exc}") from None
    doc = json.loads(p.read_text(encoding="utf-8"))
    warnings = [f"possible secret: {w}" for w in secret_warnings(doc)]
    differing: list[tuple[bool, str]] = []
    warnings += [f"unanswered tool call: {w}" for w in unanswered_calls(trace, differing)]
    warnings += [  # (answered, with another text than recorded: a contradiction when both are text)
        f"{CONTRADICTION}{w}" if text else f"result sent differs from the record: {w}"
        for text, w in differing
    ]
    warnings += [f"{CONTRADICTION}{w}" for w in status_contradictions(trace)]
    wall = wall_time_contradiction(trace)
    if wall is not None:
        warnings.append(f"{CONTRADICTION}{wall}")
    warnings += [f"unknown field: {f}" for f in unknown_fields(doc)]
    warnings += [
        f"tool not offered: {w} ran, but the trace's tools do not list it" for w in tools_not_offered(trace)
    ]
    for k, r in enumerate(trace.rounds):
        for pos, (call, ex) in enumerate(zip(r.tool_calls, r.executions, strict=False)):
            if ex.name != call.name or ex.index != call.index:
                warnings.append(
                    f"execution differs from its call: rounds[{k}].tool_executions[{pos}] is "
                    f"{ex.name} (index {ex.index}), the call at that position "
                    f"{call.name} (index {call.index})"
                )
    warnings += [f"out of order: {w}" for w in order_problems(trace)]
    warnings += [f"{CONTRADICTION}{w}" for w in contradictions(trace)]
    known = set(RunConfig.__dataclass_fields__) | {"mode"}
    warnings += [f"unknown setting: metadata.settings.{k}" for k in trace.metadata.settings if k not in known]
    skipped = [e.tool_call_id for r in trace.rounds for e in r.executions if e.status == "skipped"]
    for v in validate_messages(final_conversation(trace)):
        if v.kind == "unanswered_call" and v.tool_call_id in skipped:
            skipped.remove(v.tool_call_id)
            continue
        warnings.append(f"protocol: {v}")
    return trace, warnings

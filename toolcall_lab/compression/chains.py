"""Compressing a conversation: find its finished chains, read each with its recorded executions, and
replace it by one message; violations anywhere are reported."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolcall_lab.compression.render import (
    CallState,
    ChainView,
    CompressionConfig,
    LoggedCall,
    preview,
    text_of,
)
from toolcall_lab.compression.variables import VariableStore
from toolcall_lab.exceptions import UsageError
from toolcall_lab.protocol import ProtocolViolation, validate_messages
from toolcall_lab.records import ToolExecution

CallKey = tuple[str, str, str, str]
"""(call id, name, arguments, result): what a call is."""
Records = Mapping[tuple[int, str, str, str, str], ToolExecution]
"""The execution of each call of a conversation, by (position of the assistant message that made it,
call id, name, arguments, result)."""


@dataclass
class ExecutionRecords:
    """Recorded executions, by where they ran when that is known.

    Ids repeat across turns (a scripted model's ``call_0_0`` every run, upstreams that send ``call_0``),
    and a tool may answer the same text twice, once failing and once not: the 4-tuple (id, name,
    arguments, result) does not tell two such calls apart. An execution of a `RunResult` or `Trace` is
    therefore *anchored*: kept with the position, in that run's own transcript, of the assistant
    message that made the call, and it gives its status only to the call at that position (a later turn
    sends the earlier ones again, so positions stay). Executions whose position is unknown (given as
    bare `ToolExecution`s, or rounds not found in the transcript) are *loose*: matched by the 4-tuple,
    in order, and only when the conversation holds as many unanchored calls with that 4-tuple as there
    are such executions; otherwise those calls read "not recorded" rather than borrow another's status.
    """

    anchored: dict[tuple[int, str, str, str, str], ToolExecution] = field(default_factory=dict)
    loose: dict[CallKey, list[ToolExecution]] = field(default_factory=dict)

    def add(self, execution: ToolExecution, at: int | None = None) -> None:
        key = (execution.tool_call_id, execution.name, execution.arguments, execution.result)
        if at is not None:
            self.anchored[(at, *key)] = execution
            return
        kept = self.loose.setdefault(key, [])
        if not any(e is execution for e in kept):  # the same record given twice is one execution
            kept.append(execution)

    def update(self, other: ExecutionRecords) -> None:
        self.anchored.update(other.anchored)
        for executions in other.loose.values():
            for execution in executions:
                self.add(execution)

    def values(self) -> list[ToolExecution]:
        """Every execution kept (anchored ones first)."""
        return [*self.anchored.values(), *(e for kept in self.loose.values() for e in kept)]

    def __len__(self) -> int:
        return len(self.anchored) + sum(map(len, self.loose.values()))

    def resolve(self, calls: Iterable[tuple[int, CallKey]]) -> Records:
        """The execution of each call (position of its assistant message, its 4-tuple) of a conversation
        (see the class docstring); a call missing from the result is not recorded."""
        out: dict[tuple[int, str, str, str, str], ToolExecution] = {}
        unanchored: dict[CallKey, list[int]] = {}
        for at, key in calls:
            found = self.anchored.get((at, *key))
            if found is not None:
                out[(at, *key)] = found
            else:
                unanchored.setdefault(key, []).append(at)
        for key, places in unanchored.items():
            loose = self.loose.get(key, [])
            if len(loose) == len(places):
                out.update({(at, *key): e for at, e in zip(places, loose, strict=True)})
        return out


def execution_records(source: Any) -> ExecutionRecords:
    """Executions of a `RunResult`, a `Trace` (anchored where their rounds are found in the run's own
    transcript), an `ExecutionRecords`, or an iterable of `ToolExecution` (loose); see
    `ExecutionRecords`."""
    if isinstance(source, ExecutionRecords):
        return source
    records = ExecutionRecords()
    if source is None:
        return records
    if not hasattr(source, "rounds"):
        for execution in source:
            records.add(execution)
        return records
    if hasattr(source, "initial_messages"):
        messages = getattr(source, "messages", None)
        transcript = list(messages) if messages is not None else final_transcript(source)
        cursor = len(source.initial_messages)
    else:  # pragma: no cover - a bare list of rounds
        transcript, cursor = [], 0
    for round_ in source.rounds:
        at = None
        for i in range(cursor, len(transcript)):
            if transcript[i] == round_.assistant_message:
                at, cursor = i, i + 1
                break
        for execution in round_.executions:
            records.add(execution, at)
    return records


def finished_chains(messages: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    """(start, end) spans of finished chains: from an assistant message with calls to the next
    assistant message without calls (inclusive). Chains cut by a user message or the end stay out."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            if start is None:
                start = i
        elif role == "assistant" and start is not None:
            spans.append((start, i))
            start = None
        elif role == "user":
            start = None
    return spans


def chain_view(
    chain: Sequence[dict[str, Any]],
    store: VariableStore,
    records: Records,
    offset: int = 0,
    after: Sequence[dict[str, Any]] = (),
) -> ChainView:
    """What a finished chain holds, with variables stored for every call's arguments and result.

    A call's variables are named by what it is (id, name, arguments and result), not by where it sits
    in the conversation, so they keep their names when the history before the chain is trimmed.
    `after`: the messages that follow the chain (a call answered only there is told as answered out of
    order, not as never answered).
    """
    answers: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, m in enumerate(chain):
        if m.get("role") == "tool":
            answers.setdefault(str(m.get("tool_call_id")), []).append((i, m))
    used: set[int] = set()
    flow: list[str | LoggedCall] = []
    calls: list[LoggedCall] = []
    violations: list[str] = []
    for i, message in enumerate(chain):
        if message.get("role") != "assistant":
            continue
        text = text_of(message.get("content")).strip()
        if text:
            flow.append(text)
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            name, cid = str(fn.get("name")), str(call.get("id"))
            arguments = fn.get("arguments")
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
            pending = [(j, m) for j, m in answers.get(cid, []) if j > i and j not in used]
            if not pending:
                late = next(
                    (
                        offset + len(chain) + j
                        for j, m in enumerate(after)
                        if m.get("role") == "tool" and str(m.get("tool_call_id")) == cid
                    ),
                    None,
                )
                nxt = next(
                    (
                        offset + k
                        for k in range(i + 1, len(chain))
                        if chain[k].get("role") in ("assistant", "user")
                    ),
                    offset + len(chain),
                )
                if late is None:
                    violations.append(f"call {cid!r} ({name}) was never answered by a tool message")
                    detail, why = "", "never answered"
                else:
                    detail = f"its result came only in message {late}, after message {nxt}"
                    violations.append(
                        f"call {cid!r} ({name}) has no result before message {nxt}; its result came "
                        f"later, in message {late}, out of order"
                    )
                    why = ""  # a result came (it ran), only too late
                args_var = store.put(name, arguments, kind="args", key=(cid, name, arguments, ""))
                logged = LoggedCall(
                    name=name,
                    tool_call_id=cid,
                    arguments=arguments,
                    state="not_answered",
                    detail=detail,
                    args_var=args_var,
                    not_run=why,
                )
            else:
                j, answer = pending[0]
                used.add(j)
                result = text_of(answer.get("content"))
                key = (cid, name, arguments, "result:" + result)
                args_var = store.put(name, arguments, kind="args", key=key)
                result_var = store.put(name, result, kind="result", key=key)
                record = records.get((offset + i, cid, name, arguments, result))
                state, detail = _state(record)
                logged = LoggedCall(
                    name=name,
                    tool_call_id=cid,
                    arguments=arguments,
                    state=state,
                    detail=detail,
                    result=result,
                    args_var=args_var,
                    result_var=result_var,
                    not_run=_NOT_RUN.get(record.status, "") if record is not None else "",
                )
            flow.append(logged)
            calls.append(logged)
    for j, m in enumerate(chain):
        if m.get("role") == "tool" and j not in used:
            violations.append(
                f"message {offset + j} (tool) answers {m.get('tool_call_id')!r}, which no earlier "
                "call in this "
                f"chain left unanswered: {preview(text_of(m.get('content')), 120)!r}"
            )
    return ChainView(flow=tuple(flow), calls=tuple(calls), violations=tuple(violations))


_NOT_RUN = {
    "unknown_tool": "unknown tool",
    "invalid_arguments": "invalid arguments",
    "rejected": "rejected",
    "duplicate": "duplicate of another call",
    "skipped": "skipped",
}
"""Recorded statuses of calls that did not run, as the "Not executed" list says them."""


def _state(record: ToolExecution | None) -> tuple[CallState, str]:
    if record is None or record.status == "not_recorded":
        return "unrecorded", ""
    if record.status == "ok":
        return "success", ""
    if record.status in ("rejected", "duplicate", "withheld"):
        return "rejected", _reason(record.error or record.result, "rejected")
    if record.status == "skipped":
        return "not_answered", ""
    return "failed", _reason(record.error or record.result, "error", "failed")


def _reason(text: str, *words: str) -> str:
    """The reason without a leading word the status already says (``Rejected: rejected by policy``)."""
    text = text.strip()
    for word in words:
        if text.lower().startswith(word + ":"):
            return text[len(word) + 1 :].strip()
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class Compressed:
    """The compressed message list, and what compressing it found."""

    messages: list[dict[str, Any]]
    violations: tuple[str, ...]
    """Every protocol violation found: inside compressed chains (also flagged in their messages) and in
    the messages left as they were (a tool message before its call or after a user or final message,
    a call left unanswered before the next user message)."""
    chains: int
    outside: int = 0
    """How many of `violations` are in messages left uncompressed."""


def conversation(source: Any) -> tuple[list[dict[str, Any]], Any]:
    """(messages, executions) of what `compress` and `savings` accept: a message list (no executions),
    a `RunResult` (its messages) or a `Trace` (its `final_transcript`), the latter two with their own
    executions."""
    if isinstance(source, Sequence) and not isinstance(source, str | bytes):
        return list(source), None
    if hasattr(source, "rounds") and hasattr(source, "initial_messages"):
        messages = getattr(source, "messages", None)
        return (list(messages) if messages is not None else final_transcript(source)), source
    raise UsageError(
        f"cannot compress a {type(source).__name__}: pass a list of OpenAI-format messages, a RunResult "
        "or a Trace"
    )


def compress(
    messages: Sequence[dict[str, Any]] | Any,
    store: VariableStore | None = None,
    config: CompressionConfig | None = None,
    executions: Any = None,
) -> Compressed:
    """Replace every finished tool chain by one assistant message (see the module docstring).

    Args:
        messages: an OpenAI-format conversation, or a `RunResult` or `Trace` (whose transcript is
            compressed, with its own executions unless `executions` is given).
        store: where full arguments and results go (a new one if None).
        config: format settings.
        executions: the recorded executions (a `RunResult`, `Trace` or `ToolExecution`s) that give each
            call its status; without them a status reads "not recorded".
    """
    messages, own = conversation(messages)
    executions = executions if executions is not None else own
    store = store if store is not None else VariableStore()
    config = config or CompressionConfig()
    known = execution_records(executions)
    out: list[dict[str, Any]] = []
    violations: list[str] = []
    last = 0
    spans = finished_chains(messages)
    calls: list[tuple[int, CallKey]] = []  # what each chain's calls are, to match them to executions
    for start, end in spans:
        chain_view(messages[start : end + 1], VariableStore(), _Seen(calls), start, messages[end + 1 :])
    records = known.resolve(calls)
    for start, end in spans:
        out.extend(messages[last:start])
        view = chain_view(messages[start : end + 1], store, records, start, messages[end + 1 :])
        violations += view.violations
        out.append({"role": "assistant", "content": config.render(view)})
        last = end + 1
    out.extend(messages[last:])
    inside = {i for start, end in spans for i in range(start, end + 1)}
    outside = [
        v.message
        for v in validate_messages(messages)
        if v.message_index not in inside and v.kind != "duplicate_call_id" and not _pending(messages, v)
    ]
    return Compressed(
        messages=out, violations=tuple(violations + outside), chains=len(spans), outside=len(outside)
    )


class _Seen(dict[tuple[int, str, str, str, str], ToolExecution]):
    """The `records` of a first reading of the chains: it finds nothing and notes what was asked."""

    def __init__(self, asked: list[tuple[int, CallKey]]) -> None:
        super().__init__()
        self.asked = asked

    def get(self, key: Any, default: Any = None) -> Any:
        self.asked.append((key[0], key[1:]))
        return default


def _pending(messages: Sequence[dict[str, Any]], violation: ProtocolViolation) -> bool:
    """An unanswered call of the conversation's last turn is still pending (its results may come), not
    a violation: nothing but tool messages follows it."""
    return violation.kind == "unanswered_call" and all(
        m.get("role") == "tool" for m in messages[violation.message_index + 1 :]
    )


def compress_messages(
    messages: Sequence[dict[str, Any]],
    store: VariableStore | None = None,
    config: CompressionConfig | None = None,
    executions: Any = None,
) -> list[dict[str, Any]]:
    """`compress(...)`'s message list (violations are flagged inside the compressed messages)."""
    return compress(messages, store, config, executions).messages


@dataclass
class CompressionHook:
    """``Hooks(before_model_call=hook)``: earlier finished chains are sent compressed.

    One store serves the whole conversation (names are stable when the history is resent), so add
    ``hook.store.read_variable_tool()`` to the run's tools and the model can read any earlier result.
    Give it the executions for true statuses: ``hook.remember(result)`` after each run (every call,
    screened ones included), or ``Hooks(..., on_tool_complete=hook.record)`` (executed calls).
    """

    config: CompressionConfig = field(default_factory=CompressionConfig)
    store: VariableStore = field(default_factory=VariableStore)
    records: ExecutionRecords = field(default_factory=ExecutionRecords)
    violations: tuple[str, ...] = ()
    """What the last call found (also flagged inside the compressed messages)."""

    def __call__(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        done = compress(messages, self.store, self.config, self.records)
        self.violations = done.violations
        return done.messages

    def record(self, execution: ToolExecution) -> None:
        """Keep one execution (its position unknown: matched as `ExecutionRecords` says)."""
        self.records.add(execution)

    def remember(self, source: Any) -> None:
        """Keep the executions of a finished `RunResult` or `Trace`, each at the position where its run
        made the call."""
        self.records.update(execution_records(source))


def final_transcript(trace: Any) -> list[dict[str, Any]]:
    """The whole conversation of a trace: the last request plus the final assistant message
    (`compress(trace)` and `savings(trace)` use it)."""
    if not trace.rounds:
        return list(trace.initial_messages)
    last = trace.rounds[-1]
    return [*last.request_messages, last.assistant_message]

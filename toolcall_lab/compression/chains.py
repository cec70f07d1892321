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

Records = Mapping[tuple[str, str, str, str], ToolExecution]


def execution_records(source: Any) -> dict[tuple[str, str, str, str], ToolExecution]:
    """Executions of a `RunResult`, a `Trace` or an iterable of `ToolExecution`, keyed by
    (call id, name, arguments, result): ids repeat across turns (fallback ids), the 4-tuple does not."""
    if source is None:
        return {}
    if hasattr(source, "rounds"):
        executions: Iterable[ToolExecution] = [e for r in source.rounds for e in r.executions]
    else:
        executions = source
    return {(e.tool_call_id, e.name, e.arguments, e.result): e for e in executions}


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
                record = records.get((cid, name, arguments, result))
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
    records = execution_records(executions)
    out: list[dict[str, Any]] = []
    violations: list[str] = []
    last = 0
    spans = finished_chains(messages)
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
    records: dict[tuple[str, str, str, str], ToolExecution] = field(default_factory=dict)
    violations: tuple[str, ...] = ()
    """What the last call found (also flagged inside the compressed messages)."""

    def __call__(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        done = compress(messages, self.store, self.config, self.records.values())
        self.violations = done.violations
        return done.messages

    def record(self, execution: ToolExecution) -> None:
        self.records[(execution.tool_call_id, execution.name, execution.arguments, execution.result)] = (
            execution
        )

    def remember(self, source: Any) -> None:
        """Keep the executions of a finished `RunResult` or `Trace`."""
        self.records.update(execution_records(source))


def final_transcript(trace: Any) -> list[dict[str, Any]]:
    """The whole conversation of a trace: the last request plus the final assistant message
    (`compress(trace)` and `savings(trace)` use it)."""
    if not trace.rounds:
        return list(trace.initial_messages)
    last = trace.rounds[-1]
    return [*last.request_messages, last.assistant_message]

"""OpenAI chat completions, whole: the parser for non-streamed ``chat.completion`` bodies (Ollama's
``index`` inside calls, the deprecated ``function_call``, ``arguments`` sent as an object, error
bodies). The streaming accumulator is in `openai_chat`, which re-exports `parse_chat_completion`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from toolcall_lab.exceptions import ProviderStreamError
from toolcall_lab.formats.base import PendingCall, compact_json, finding, join_text
from toolcall_lab.formats.errors import error_message
from toolcall_lab.messages import Finding, ParsedResponse, ToolCall, new_choice, new_response


def _by_index(call: PendingCall) -> int:
    return call.index


def parse_chat_completion(body: Mapping[str, Any], *, batch: int = 0) -> ParsedResponse:
    """Read a whole (non-streamed) chat completion body, including Ollama's ``index`` inside calls.

    A body that is a provider error (``{"error": {...}}``, or ``finish_reason: "error"``) raises
    `ProviderStreamError` quoting the provider, with what could be read as ``partial_responses``.
    """
    findings: list[Finding] = []
    choices = []
    raw_choices = body.get("choices") or []
    if not isinstance(raw_choices, list):
        findings.append(finding("malformed_chunk", "choices is not a list; skipped"))
        raw_choices = []
    errored = False
    for pos, choice in enumerate(raw_choices):
        if not isinstance(choice, dict):
            findings.append(finding("malformed_chunk", f"choice {pos} is not an object; skipped"))
            continue
        ci = choice.get("index", pos)
        ci = ci if type(ci) is int else pos
        message = choice.get("message") or {}
        if not isinstance(message, dict):
            findings.append(finding("malformed_chunk", f"choice {ci}: message is not an object; skipped"))
            message = {}
        finish = choice.get("finish_reason")
        errored |= finish == "error"
        calls = _whole_calls(message, ci, batch, finish, findings)
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        content = message.get("content")
        choices.append(
            new_choice(
                ci,
                join_text([content], findings, f"choice {ci} content") if isinstance(content, str) else None,
                join_text([reasoning], findings, f"choice {ci} reasoning")
                if isinstance(reasoning, str)
                else None,
                tuple(calls),
                finish,
            )
        )
    error = error_message(body)
    if error is None and errored:
        error = "finish_reason 'error' without an error message"
    usage, rid, model = body.get("usage"), body.get("id"), body.get("model")
    response = new_response(
        "openai-chat",
        tuple(choices),
        tuple(findings),
        usage if isinstance(usage, dict) else None,
        rid if isinstance(rid, str) else None,
        model if isinstance(model, str) else None,
        error,
    )
    if error is not None:
        exc = ProviderStreamError(error, payload=dict(body), line_number=None)
        failed = finding("provider_error", f"provider error instead of a response: {error}")
        exc.partial_responses = (_mark_failed(response, failed),)
        raise exc
    return response


def _whole_calls(
    message: dict[str, Any], ci: int, batch: int, finish: Any, findings: list[Finding]
) -> list[ToolCall]:
    entries = message.get("tool_calls") or []
    if not isinstance(entries, list):
        findings.append(finding("malformed_chunk", f"choice {ci}: tool_calls is not a list; skipped"))
        entries = []
    given = [tc.get("index") if isinstance(tc, dict) else None for tc in entries]
    explicit = all(type(i) is int for i in given) and len(set(given)) == len(given)
    pendings: list[PendingCall] = []
    for pos, tc in enumerate(entries):
        if not isinstance(tc, dict):
            findings.append(
                finding("malformed_chunk", f"choice {ci}: tool call {pos} is not an object; skipped")
            )
            continue
        fn = tc.get("function") or {}
        fn = fn if isinstance(fn, dict) else {}
        index = given[pos] if explicit else pos
        index = index if type(index) is int else pos
        pending = PendingCall.announced(ci, index, 0, tc.get("id"), fn.get("name"))
        _whole_arguments(pending, fn.get("arguments"))
        pendings.append(pending)
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        pending = PendingCall.announced(ci, len(pendings), 0, None, legacy.get("name"))
        _whole_arguments(pending, legacy.get("arguments"))
        pendings.append(pending)
        findings.append(
            finding(
                "legacy_function_call",
                f"choice {ci}: deprecated function_call read as call {pending.index} (no id)",
                choice_index=ci,
                call_index=pending.index,
            )
        )
    pendings.sort(key=_by_index)
    return [p.finalize(batch=batch, findings=findings, finish_reason=finish) for p in pendings]


def _whole_arguments(pending: PendingCall, args: Any) -> None:
    if args is None:
        return
    if not isinstance(args, str):  # some servers send an object; keep it, and say so
        args = compact_json(args)
        pending.non_string_args = pending.quirky = True
    pending.pieces = [args]


def _mark_failed(response: ParsedResponse, failed: Finding) -> ParsedResponse:
    """The same response with every call marked incomplete and the provider error noted."""
    choices = tuple(
        replace(c, tool_calls=tuple(replace(t, complete=False) for t in c.tool_calls))
        for c in response.choices
    )
    return replace(response, choices=choices, findings=(*response.findings, failed))

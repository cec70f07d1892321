"""The numbers of a Claude Code transcript: a response's chunks and their times, its model latency,
and each tool call's duration, each with its label and the figures it rests on (see
`toolcall_lab.importers.claude_code`, whose module notes say how each is derived)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import MODEL_S, TOLERANCE_S, TOOL_S, Issue, Result, ResultStatus, text_of
from toolcall_lab.importers._claude_code_lines import Line
from toolcall_lab.importers._figures import token_counts, usable_figure
from toolcall_lab.records import Timing, clock_time

SYNTHETIC_MODEL = "<synthetic>"
"""The model name of assistant lines Claude Code writes itself (not model calls)."""


@dataclass(slots=True)
class Response:
    message_id: str
    lines: list[Line] = field(default_factory=list)

    @property
    def uses(self) -> list[tuple[Line, dict[str, Any]]]:
        return [(ln, b) for ln in self.lines for b in ln.blocks if b.get("type") == "tool_use"]


def _arguments(given: Any) -> str:
    """A tool_use input as the call's argument string: an object serialised compactly; an input the
    log holds as the JSON text of an object (damage, reported by `read_uses`) is that text as it is."""
    if isinstance(given, str):
        try:
            if isinstance(json.loads(given), dict):
                return given
        except json.JSONDecodeError:
            pass
    return json.dumps(given if given is not None else {}, separators=(",", ":"), ensure_ascii=False)


def chunks_of(
    response: Response, start: float | None, issues: list[Issue]
) -> tuple[list[dict[str, Any]], list[float] | None, str | None]:
    payloads: list[dict[str, Any]] = []
    offsets: list[float | None] = []
    index = 0
    seen_text = False
    last = response.lines[-1].doc.get("message") or {}

    def offset(ln: Line) -> float | None:
        return None if ln.at is None or start is None else clock_time(ln.at - start)

    for ln in response.lines:
        for block in ln.blocks:
            kind = block.get("type")
            delta: dict[str, Any]
            if kind == "text":
                text = str(block.get("text", ""))
                delta = {"content": ("\n\n" if seen_text else "") + text}
                seen_text = True
            elif kind == "thinking":
                delta = {"reasoning_content": str(block.get("thinking", ""))}
            elif kind == "tool_use":
                delta = {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": block.get("id"),
                            "type": "function",
                            "function": {
                                "name": block.get("name"),
                                "arguments": _arguments(block.get("input")),
                            },
                        }
                    ]
                }
                index += 1
            else:
                continue
            if not payloads:
                delta = {"role": "assistant", **delta}
            payloads.append(
                {
                    "object": "chat.completion.chunk",
                    "id": response.message_id,
                    "model": last.get("model"),
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                }
            )
            offsets.append(offset(ln))
    if not payloads:
        payloads.append(
            {
                "object": "chat.completion.chunk",
                "id": response.message_id,
                "model": last.get("model"),
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                ],
            }
        )
        offsets.append(offset(response.lines[-1]))
    payloads[-1]["choices"][0]["finish_reason"] = "tool_calls" if index else "stop"
    usage = last.get("usage")
    if isinstance(usage, dict):
        keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
        damage: list[str] = []
        counts = token_counts({f"usage.{k}": usage.get(k) for k in keys if k in usage}, damage)
        issues += [Issue(kind="damaged", where=response.lines[-1].where(), what=d) for d in damage]
        prompt = sum(counts.get(f"usage.{k}") or 0 for k in keys[:3])
        completion = counts.get("usage.output_tokens") or 0
        payloads[-1]["usage"] = {
            **usage,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    known = [o for o in offsets if o is not None]
    return payloads, known if len(known) == len(offsets) else None, last.get("model")


def tool_result(
    path: Path,
    block: dict[str, Any],
    line: Line,
    use_line: Line,
    response_end: float | None,
    waited_from: float | None,
    issues: list[Issue],
) -> Result:
    text = text_of(block.get("content"))
    status: ResultStatus = "error" if block.get("is_error") is True else "ok"
    where = line.where()
    extra = line.doc.get("toolUseResult")
    known = line.at is not None and use_line.at is not None
    from_use = line.at - use_line.at if line.at is not None and use_line.at is not None else None
    if from_use is not None and from_use < -TOLERANCE_S:
        issues.append(
            Issue(
                kind="damaged",
                where=where,
                what=f"the result of {block.get('tool_use_id')} is dated {-from_use:.3f} s before its "
                f"tool_use line (line {use_line.number}): its duration is a placeholder",
            )
        )
        known = False
    raw = (
        f"tool_use line to result line: {from_use:.3f} s"
        if from_use is not None
        else "timestamps not trusted"
    )
    for key, what in (("durationMs", "the tool's run"), ("totalDurationMs", "the sub-agent's whole run")):
        ms = extra.get(key) if isinstance(extra, dict) else None
        if ms is None:
            continue
        seconds = usable_figure(
            ms,
            name=f"toolUseResult.{key} of {block.get('tool_use_id')}",
            unit=" ms",
            where=where,
            issues=issues,
            scale=0.001,
            at_most=from_use if from_use is not None and known else None,
            instead=f"the result line was written {from_use:.3f} s after its tool_use line"
            if from_use is not None
            else "the log's timestamps are used",
        )
        if seconds is None:
            break
        return Result(
            text=text,
            duration_s=seconds,
            status=status,
            end=line.at if known else None,
            where=where,
            timing=Timing(
                source="recorded",
                note=f"toolUseResult.{key} {ms} ms: Claude Code's measurement of {what} ({raw})",
            ),
        )
    if not known or line.at is None or response_end is None:
        return Result(
            text=text,
            duration_s=TOOL_S,
            status=status,
            where=where,
            timing=Timing(
                source="placeholder",
                note=f"the log's timestamps for this call are not trusted: {TOOL_S} s assumed ({raw})",
            ),
        )
    if line.at < response_end:
        start, how = use_line.at, "its tool_use line (the result came before the response ended)"
    elif waited_from is not None and waited_from > response_end and not _never_ran(text, status):
        return Result(
            text=text,
            duration_s=clock_time(line.at - waited_from),
            status=status,
            end=line.at,
            start_known=False,
            where=where,
            timing=Timing(
                source="estimated",
                note="start not in the log: assumed when the previous call of the batch returned (Claude "
                "Code runs tools that are not concurrency-safe one after another); from the end of the "
                f"response it would be {line.at - response_end:.3f} s ({raw})",
                covers="upper_bound",
            ),
        )
    else:
        start, how = response_end, "the end of the response"
    assert start is not None
    if line.at < start:  # (within the tolerance: never a clamped 0 labelled recorded)
        return Result(
            text=text,
            duration_s=0.0,
            status=status,
            where=where,
            timing=Timing(
                source="placeholder",
                note=f"the result line is dated {start - line.at:.3f} s before {how}: no duration in the "
                f"log, 0 s ({raw})",
            ),
        )
    return Result(
        text=text,
        duration_s=clock_time(line.at - start),
        status=status,
        end=line.at,
        start_known=False,  # (the start is where the log says the call could start, not a record of it)
        where=where,
        timing=Timing(
            source="recorded",
            note=f"from {how} to the tool_result line (the start is not in the log: assumed there); "
            f"includes Claude Code's scheduling and any wait for the user's permission ({raw})"
            + _user_said(text, status),
            # no tool ran: the time is a wait (or a check); else the run and what the log does not
            # separate from it (the scheduling, a wait at a permission prompt)
            covers="wait" if _never_ran(text, status) else "upper_bound",
        ),
    )


REJECTED = "The user doesn't want to proceed with this tool use"
INVALID_INPUT = "InputValidationError"
INTERRUPTED = "[Request interrupted by user"
"""How Claude Code words a tool call the user declined at its permission prompt, and one the user
interrupted (Esc) while it ran; an interrupt also writes a user line holding only this text."""


def _never_ran(text: str, status: ResultStatus) -> bool:
    """Claude Code refused the call before any tool ran: its input failed validation, or the user
    declined it at the permission prompt."""
    head = text.lstrip().removeprefix("<tool_use_error>")
    return status == "error" and (head.startswith(INVALID_INPUT) or text.startswith(REJECTED))


def _user_said(text: str, status: ResultStatus) -> str:
    """What the note must add when the user or Claude Code, not the tool, ended the call."""
    if status != "error":
        return ""
    if text.lstrip().removeprefix("<tool_use_error>").startswith(INVALID_INPUT):
        return (
            "; Claude Code rejected the call's input (InputValidationError): no tool ran, the time is "
            "Claude Code's check"
        )
    if text.startswith(REJECTED):
        return (
            "; the user declined this call at the permission prompt: no tool ran, the time is the "
            "wait for that decision"
        )
    if text.startswith(INTERRUPTED):
        return "; the user interrupted this call: the time runs until the interrupt"
    return ""


def latency_of(
    response: Response,
    start: float | None,
    end: float | None,
    ready_line: Line | None,
    untrusted: list[Line],
) -> tuple[float, Timing]:
    """The model latency of a response and its label: recorded from the line that completed the
    request to the response's last line, or a placeholder when a timestamp it rests on is not
    trusted (the line that completed the request, or the response's own)."""
    span = f"lines {response.lines[0].number}-{response.lines[-1].number}"
    if untrusted:
        return MODEL_S, Timing(
            source="placeholder",
            note=f"the request was completed by line {untrusted[-1].number}, whose timestamp is not "
            f"trusted: the start of this model call is not in the log; {MODEL_S} s assumed",
        )
    if start is not None and end is not None and start - TOLERANCE_S <= end < start:
        return MODEL_S, Timing(
            source="placeholder",
            note=f"the response's last line (line {response.lines[-1].number}) is dated {start - end:.3f} s "
            "before the line that completed its request: no latency in the log (never a clamped 0 "
            f"labelled recorded); {MODEL_S} s assumed",
        )
    if start is not None and end is not None and end >= start:
        return clock_time(end - start), Timing(
            source="recorded",
            note=f"from the line that completed the request (line "
            f"{ready_line.number if ready_line else response.lines[0].number}) to the response's "
            f"last line (line {response.lines[-1].number}); includes Claude Code's request "
            "preparation",
        )
    return MODEL_S, Timing(
        source="placeholder",
        note=f"the log's timestamps for this response ({span}) are not trusted: {MODEL_S} s assumed",
    )

"""Claude Code session transcripts (``~/.claude/projects/*/*.jsonl``) -> traces.

The log has one JSON line per content block: a response with text and three ``tool_use`` blocks is
four ``assistant`` lines with the same ``message.id``, each stamped when that block finished
streaming; each result is a ``user`` line with a ``tool_result`` block, stamped when the result was
written, sometimes with ``toolUseResult.durationMs`` (Glob, Grep, Read...) or ``totalDurationMs``
(Task sub-agents).

Traces: the main thread gives one trace per user message (the conversation before it becomes the
initial messages; Claude Code's system prompt is not in the log). Sub-agents (``isSidechain`` lines,
chained through ``parentUuid`` from a root whose text is the Task's ``prompt``) give one trace each,
titled with the Task call they ran inside; in the main trace that Task call is one tool call whose
duration is the sub-agent's whole run. Where every call of a round failed and the agent went on,
the trace is split (the loop would stop there; see `toolcall_lab.importers._build`).

Where each number comes from (all ``recorded``, from the log's timestamps; the notes give the raw
figures):

- model latency: from the line that completed the request (the user line, or the last result of the
  previous batch) to the last line of the response. It includes Claude Code's own work to build the
  request. Chunk offsets: when each content block's line was written (a block arrives whole).
- tool duration: ``toolUseResult.durationMs`` / ``totalDurationMs`` where present (Claude Code's own
  measurement of the run). Otherwise from the later of (a) the end of the response and (b) the
  result of an earlier call of the same response that came in before this one, to this call's result
  line. A ``tool_use`` line is written when its block streamed, not when the tool started: in these
  logs tools start when the whole response is in (the Task sub-agents' ``totalDurationMs`` match
  result − end of response within 40 ms), and Claude Code runs tools that are not concurrency-safe one
  after another, so (b) keeps a call from being charged for waiting on a sibling. The figure still
  includes Claude Code's scheduling and any permission prompt; it can under-state a call that ran
  alongside an earlier sibling and finished after it.

Arguments are the ``tool_use`` input object serialised compactly (the log stores an object, not the
streamed string); text blocks of one response are joined with a blank line; ``is_error: true``
results are errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    ImportResult,
    Issue,
    Result,
    ResultStatus,
    Segment,
    Turn,
    build_result,
    conversation,
    epoch,
    merge_results,
    slugify,
    text_of,
)
from toolcall_lab.records import Timing

SYNTHETIC_MODEL = "<synthetic>"


@dataclass(slots=True)
class _Line:
    number: int
    doc: dict[str, Any]
    at: float

    @property
    def uuid(self) -> str | None:
        return self.doc.get("uuid")

    @property
    def blocks(self) -> list[dict[str, Any]]:
        content = (self.doc.get("message") or {}).get("content")
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        return [b for b in content or [] if isinstance(b, dict)]


@dataclass(slots=True)
class _Response:
    message_id: str
    lines: list[_Line] = field(default_factory=list)

    @property
    def uses(self) -> list[tuple[_Line, dict[str, Any]]]:
        return [(ln, b) for ln in self.lines for b in ln.blocks if b.get("type") == "tool_use"]


def _read(path: Path) -> tuple[list[_Line], list[Issue]]:
    lines: list[_Line] = []
    issues: list[Issue] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError as exc:
            issues.append(
                Issue(
                    kind="failed",
                    where=f"{path.name} line {number}",
                    what=f"not valid JSON ({exc.msg} at column {exc.colno}); whatever it held (a tool "
                    "call?) is not imported",
                )
            )
            continue
        if not isinstance(doc, dict) or doc.get("type") not in ("user", "assistant"):
            continue
        stamp = doc.get("timestamp")
        if not isinstance(stamp, str):
            issues.append(Issue(kind="gap", where=f"{path.name} line {number}", what="no timestamp; skipped"))
            continue
        lines.append(_Line(number=number, doc=doc, at=epoch(stamp)))
    return lines, issues


def _threads(lines: list[_Line]) -> list[list[_Line]]:
    """The main thread first, then one list per sub-agent (chained through parentUuid)."""
    thread_of: dict[str, int] = {}
    threads: list[list[_Line]] = [[]]
    for ln in lines:
        if not ln.doc.get("isSidechain"):
            threads[0].append(ln)
            continue
        parent = ln.doc.get("parentUuid")
        k = thread_of.get(parent) if parent else None
        if k is None:
            threads.append([])
            k = len(threads) - 1
        threads[k].append(ln)
        if ln.uuid:
            thread_of[ln.uuid] = k
    return threads


def _chunks(response: _Response, start: float) -> tuple[list[dict[str, Any]], list[float], str | None]:
    payloads: list[dict[str, Any]] = []
    offsets: list[float] = []
    index = 0
    seen_text = False
    last = response.lines[-1].doc.get("message") or {}
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
                                "arguments": json.dumps(
                                    block.get("input") or {}, separators=(",", ":"), ensure_ascii=False
                                ),
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
            offsets.append(max(ln.at - start, 0.0))
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
        offsets.append(max(response.lines[-1].at - start, 0.0))
    payloads[-1]["choices"][0]["finish_reason"] = "tool_calls" if index else "stop"
    usage = last.get("usage")
    if isinstance(usage, dict):
        prompt = sum(
            int(usage.get(k) or 0)
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        completion = int(usage.get("output_tokens") or 0)
        payloads[-1]["usage"] = {
            **usage,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    return payloads, offsets, last.get("model")


def _tool_result(
    block: dict[str, Any], line: _Line, use_line: _Line, response_end: float, waited_from: float | None
) -> Result:
    text = text_of(block.get("content"))
    status: ResultStatus = "error" if block.get("is_error") is True else "ok"
    extra = line.doc.get("toolUseResult")
    from_use = line.at - use_line.at
    for key, what in (("durationMs", "the tool's run"), ("totalDurationMs", "the sub-agent's whole run")):
        ms = extra.get(key) if isinstance(extra, dict) else None
        if isinstance(ms, int | float) and not isinstance(ms, bool) and ms >= 0:
            return Result(
                text=text,
                duration_s=ms / 1000,
                status=status,
                timing=Timing(
                    source="recorded",
                    note=f"toolUseResult.{key} {ms} ms: Claude Code's measurement of {what} "
                    f"(tool_use line to result line: {from_use:.3f} s)",
                ),
            )
    if line.at < response_end:
        start, how = use_line.at, "its tool_use line (the result came before the response ended)"
    elif waited_from is not None and waited_from > response_end:
        start, how = waited_from, "the previous call's result (it ran after that call)"
    else:
        start, how = response_end, "the end of the response"
    return Result(
        text=text,
        duration_s=max(line.at - start, 0.0),
        status=status,
        timing=Timing(
            source="recorded",
            note=f"from {how} to the tool_result line; includes Claude Code's scheduling "
            f"(tool_use line to result line: {from_use:.3f} s)",
        ),
    )


def _thread_segments(
    path: Path,
    thread: list[_Line],
    *,
    label: str,
    slug: str,
    results: dict[str, tuple[_Line, dict[str, Any]]],
    issues: list[Issue],
    notes: str,
) -> list[Segment]:
    segments: list[Segment] = []
    history: list[dict[str, Any]] = []
    current: Segment | None = None
    ready_at: float | None = None
    pending_user: list[_Line] = []
    responses: list[_Response] = []
    events: list[tuple[str, Any]] = []
    for ln in thread:  # group the assistant lines of one response; keep user lines as they come
        if ln.doc.get("type") == "assistant":
            mid = str((ln.doc.get("message") or {}).get("id") or f"line{ln.number}")
            if responses and responses[-1].message_id == mid:  # (results may come between its lines)
                responses[-1].lines.append(ln)
            else:
                responses.append(_Response(message_id=mid, lines=[ln]))
                events.append(("response", responses[-1]))
        else:
            events.append(("user", ln))

    def close() -> None:
        nonlocal current
        if current is not None:
            history.extend(conversation(current.turns))
            segments.append(current)
            current = None

    turn_no = 0
    for kind, item in events:
        if kind == "user":
            ln = item
            if ln.doc.get("parentUuid") is None and history and not ln.doc.get("isSidechain"):
                close()
                history.clear()  # a new root: a fresh conversation (e.g. after /clear)
            texts = [b for b in ln.blocks if b.get("type") != "tool_result"]
            if any(b.get("type") == "tool_result" for b in ln.blocks):
                ready_at = ln.at if ready_at is None else max(ready_at, ln.at)
            if texts:
                close()
                history.append({"role": "user", "content": text_of(texts)})
                pending_user.append(ln)
                ready_at = ln.at if ready_at is None else max(ready_at, ln.at)
            continue
        response: _Response = item
        model = (response.lines[-1].doc.get("message") or {}).get("model")
        if model == SYNTHETIC_MODEL:
            issues.append(
                Issue(
                    kind="skipped",
                    where=f"{path.name} line {response.lines[0].number}",
                    what="an assistant message Claude Code wrote itself (model <synthetic>), "
                    "not a model call",
                )
            )
            continue
        start = ready_at if ready_at is not None else response.lines[0].at
        end = max(ln.at for ln in response.lines)
        payloads, offsets, model = _chunks(response, start)
        turn_results: list[Result] = []
        result_times: list[float] = []
        waited: float | None = None
        for use_line, block in response.uses:
            found = results.get(str(block.get("id")))
            if found is None:
                turn_results.append(Result.missing())
                continue
            res_line, res_block = found
            earlier = [t for t in result_times if t < res_line.at]
            waited = max(earlier) if earlier else None
            turn_results.append(_tool_result(res_block, res_line, use_line, end, waited))
            result_times.append(res_line.at)
        if current is None:
            turn_no += 1
            first_user = pending_user[-1] if pending_user else response.lines[0]
            current = Segment(
                title=f"{path.name} {label} turn {turn_no}",
                slug=f"{slug}_turn{turn_no:02d}",
                source=f"{path}#line={first_user.number}",
                initial=list(history),
                tools=[],
                turns=[],
                provider="anthropic",
                model=model,
                created=str(first_user.doc.get("timestamp")),
                mode="parallel",
                notes=notes,
            )
            pending_user.clear()
        current.turns.append(
            Turn(
                payloads=payloads,
                offsets=offsets,
                latency_s=max(end - start, 0.0),
                timing=Timing(
                    source="recorded",
                    note="from the line that completed the request to the response's last line "
                    f"({len(response.lines)} line(s)); includes Claude Code's request preparation",
                ),
                results=turn_results,
                recorded_start=start,
                recorded_end=max([end, *result_times]),
            )
        )
        if result_times:
            ready_at = max(result_times if ready_at is None else [ready_at, *result_times])
        if not response.uses:
            close()
    close()
    return segments


def _file(path: Path, *, include_no_calls: bool) -> ImportResult:
    lines, issues = _read(path)
    uses = {
        str(b.get("id")): ln
        for ln in lines
        if ln.doc.get("type") == "assistant"
        for b in ln.blocks
        if b.get("type") == "tool_use"
    }
    message_ids = {
        (ln.doc.get("message") or {}).get("id")
        for ln in lines
        if ln.doc.get("type") == "assistant" and (ln.doc.get("message") or {}).get("model") != SYNTHETIC_MODEL
    }
    results: dict[str, tuple[_Line, dict[str, Any]]] = {}
    for ln in lines:
        if ln.doc.get("type") != "user":
            continue
        for b in ln.blocks:
            if b.get("type") == "tool_result":
                tid = str(b.get("tool_use_id"))
                if tid not in uses:
                    issues.append(
                        Issue(
                            kind="failed",
                            where=f"{path.name} line {ln.number}",
                            what=f"a tool_result for {tid}, whose tool_use is missing or unreadable: that "
                            "call is lost",
                        )
                    )
                results.setdefault(tid, (ln, b))
    threads = _threads(lines)
    prompts = {
        str((b.get("input") or {}).get("prompt")): (
            str(b.get("id")),
            str((b.get("input") or {}).get("description")),
        )
        for ln in threads[0]
        if ln.doc.get("type") == "assistant"
        for b in ln.blocks
        if b.get("type") == "tool_use" and b.get("name") == "Task"
    }
    name = slugify(path.name.removesuffix(".jsonl"))
    base_notes = (
        "Claude Code transcript: model latency from the line that completed the request to the "
        "response's last line; tool durations from toolUseResult.durationMs where present, else from "
        "the end of the response (or the previous call's result) to the result line; responses rebuilt "
        "as chat-completion chunks, one per content block, each at the time its line was written; "
        "arguments are the tool_use input serialised compactly; Claude Code's system prompt and tool "
        "schemas are not in the log (schemas inferred)"
    )
    segments = _thread_segments(
        path, threads[0], label="main", slug=f"{name}__main", results=results, issues=issues, notes=base_notes
    )
    for k, thread in enumerate(threads[1:], start=1):
        root = thread[0]
        prompt = text_of((root.doc.get("message") or {}).get("content"))
        task = prompts.get(prompt)
        label = (
            f"sub-agent of Task {task[0]} ({task[1]})" if task else f"sub-agent {k} (its Task call not found)"
        )
        slug = f"{name}__agent_{task[0][-8:] if task else k}"
        notes = base_notes + (
            f"; a sub-agent: it ran inside Task call {task[0]} of the main thread (that call's duration is "
            "this whole run)"
            if task
            else "; a sub-agent whose Task call is not in this file"
        )
        segments += _thread_segments(
            path, thread, label=label, slug=slug, results=results, issues=issues, notes=notes
        )
    kept: list[Segment] = []
    for seg in segments:
        if not any(t.results for t in seg.turns) and not include_no_calls:
            issues.append(
                Issue(
                    kind="skipped",
                    where=seg.title,
                    what=f"{len(seg.turns)} model call(s) without tool calls (nothing to execute; "
                    "include_no_calls=True imports them)",
                    model_calls=len(seg.turns),
                )
            )
            continue
        kept.append(seg)
    return build_result(
        "claude-code",
        str(path),
        kept,
        source_calls=len(uses),
        source_model_calls=len(message_ids),
        issues=issues,
    )


def import_claude_code(path: str | Path, *, include_no_calls: bool = False) -> ImportResult:
    """A Claude Code transcript (``.jsonl``), or a folder of them, -> traces (see the module notes)."""
    p = Path(path)
    files: Iterable[Path] = sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    results = [_file(f, include_no_calls=include_no_calls) for f in files]
    if len(results) == 1:
        return results[0]
    return merge_results("claude-code", str(p), results)

"""The source-neutral shape of a run that every importer fills in (`Segment`, `Turn`, `Result`), the
placeholders and constants they share, and small helpers for message bodies, timestamps and names.
`_build` turns these into traces."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator, parse_chat_completion
from toolcall_lab.messages import ParsedResponse
from toolcall_lab.records import PLACEHOLDER_KEY, ChunkTiming, Mode, Origin, Timing
from toolcall_lab.trace import RESULT_NOT_RECORDED

TOOL_S = 0.1
"""Placeholder duration of a tool call whose timing the source did not record."""
MODEL_S = 0.8
"""Placeholder model latency where the source recorded none."""
TOOL_PLACEHOLDER = Timing(source="placeholder", note=f"tool duration not recorded: {TOOL_S} s assumed")
MODEL_PLACEHOLDER = Timing(source="placeholder", note=f"model latency not recorded: {MODEL_S} s assumed")
NOT_RECORDED = Timing(source="placeholder", note="the source holds no result for this call: 0 s")
CLOSING = Timing(
    source="placeholder", note="no model call: the recording ends after the tool calls; 0 s closing round"
)
CLOSING_TEXT = "(the recording ends here: no model response after these tool calls)"
TOLERANCE_S = 0.1
"""How far recorded timestamps may disagree (clock resolution, log write delays) before the import
calls them inconsistent."""

ResultStatus = Literal["ok", "error", "timeout", "not_recorded"]


@dataclass(slots=True)
class Result:
    """What one tool call got back, and how long it took (with where that figure comes from).

    `end` is the source's timestamp (epoch seconds) of the result, when it has one: the call is then
    placed ending there. `start_known` says whether the start is in the source too (false when it
    was inferred, e.g. "after the previous call"): only calls with both count as evidence of the
    agent's mode.
    """

    text: str
    duration_s: float
    timing: Timing
    status: ResultStatus = "ok"
    end: float | None = None
    start_known: bool = True
    where: str = ""
    """Where the call is in the source (file, line), for issues."""
    damaged: bool = False
    """For a missing result: the source goes on after it (a result lost, not a recording's end)."""
    listed: bool = True
    """For a missing result: list it as an issue (False: the importer reports the whole class once)."""

    @classmethod
    def missing(
        cls,
        where: str = "",
        *,
        damaged: bool = False,
        why: str = "",
        duration_s: float = 0.0,
        timing: Timing | None = None,
        listed: bool = True,
    ) -> Result:
        """A call whose result the source does not hold (status ``not_recorded``)."""
        return cls(
            text=RESULT_NOT_RECORDED,
            duration_s=duration_s,
            timing=timing or (Timing(source="placeholder", note=why) if why else NOT_RECORDED),
            status="not_recorded",
            where=where,
            damaged=damaged,
            listed=listed,
        )


@dataclass(slots=True)
class Turn:
    """One model response (chat chunks, or one ``chat.completion`` body) and its calls' results.

    `results` are aligned with the response's tool calls in index order (the order the loop runs
    them); `offsets` are the recorded arrival of each payload (None: spread evenly, or one body).
    `recorded_start` / `recorded_end` are source timestamps (epoch seconds) of the request and of
    the last result, used for the recorded wall time of a trace; `model_end` is when the source says
    the response was complete (with every result's `end`, the trace is placed as recorded).
    `first_token_s` is a recorded time to first token; without it and without recorded chunk
    offsets, the trace says the first chunk's time is unknown.
    """

    payloads: list[dict[str, Any]]
    latency_s: float
    timing: Timing
    results: list[Result] = field(default_factory=list)
    offsets: list[float] | None = None
    ttfc_s: float | None = None
    chunk_timing: ChunkTiming | None = None
    recorded_start: float | None = None
    recorded_end: float | None = None
    model_end: float | None = None
    first_token_s: float | None = None
    synthetic: bool = False
    alternative: bool = False
    """Another choice of a model call already counted (``n > 1``): not counted again."""


@dataclass(slots=True)
class Segment:
    """One conversation the loop can replay: what the model was given, then its responses.

    `status`/`reason`/`error` become the trace's outcome; `slug` names its file and `title` the
    trace (segments of one slug are numbered ``part 1``, ``part 2``... only when there are several).
    `mode` None: the mode the recorded timings show (see the module notes), else as given.
    """

    title: str
    slug: str
    source: str
    initial: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    turns: list[Turn]
    notes: str
    provider: str | None = None
    model: str | None = None
    created: str | None = None
    origin: Origin = "imported"
    mode: Mode | None = None
    status: str = "completed"
    reason: str = "final_answer"
    error: str | None = None
    closing: str | None = None
    """Why no model response follows the last tool calls, when the source says (else worked out)."""
    choices_split: bool = False
    """The importer made a trace of each other choice of its ``n > 1`` responses itself (and counted
    their calls); otherwise `build_result` does (see `_build.other_choices`)."""
    parent_call: str | None = None
    """For a sub-agent's run: the id of the call (a Task) it ran inside; `build_result` links the
    trace to the trace holding that call (`TraceMetadata.parent`), so totals count its time once."""


def placeholder_payload(text: str, *, why: str, response_id: str, model: str | None = None) -> dict[str, Any]:
    """A response body an importer writes where the source has none, marked so (`PLACEHOLDER_KEY`)."""
    body = completion({"role": "assistant", "content": text}, response_id=response_id, model=model)
    body[PLACEHOLDER_KEY] = why
    return body


# ---------------------------------------------------------------------------------------------
# helpers the importers share


def completion(
    message: dict[str, Any],
    *,
    response_id: str,
    model: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion`` body holding one assistant message (finish reason from its calls)."""
    return {
        "object": "chat.completion",
        "id": response_id,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        **({"usage": usage} if usage else {}),
    }


def with_choices(body: dict[str, Any], others: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`body` (a ``chat.completion`` of one choice) with the assistant messages of an ``n > 1``
    response's other choices appended as choices 1, 2, ... (`_build.other_choices` makes each a trace)."""
    for k, other in enumerate(others, start=1):
        message = {**other, "role": "assistant"}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        body["choices"].append({"index": k, "message": message, "finish_reason": finish})
    return body


def chat_body(
    parsed: ParsedResponse, *, keep_fallback_ids: bool = True, choice_index: int = 0
) -> dict[str, Any]:
    """A chat-completion body equivalent to a parsed response of any format (one choice: the first,
    or `choice_index`, as choice 0).

    With ``keep_fallback_ids=False`` calls the provider sent without an id carry none in the body, so
    parsing it again labels their ids ``fallback`` again (importers); a client-facing body (the
    proxy) keeps them, because clients must echo an id.
    """
    choice = parsed.choices[choice_index] if choice_index else parsed.first
    message = choice.to_message()
    if not keep_fallback_ids and choice.tool_calls:
        message["tool_calls"] = [
            call_entry(c.tool_call_id if c.id_source == "provider" else None, c.name, c.arguments)
            for c in choice.tool_calls
        ]
    finish = {"tool_use": "tool_calls", "end_turn": "stop", "completed": "stop"}.get(
        choice.finish_reason or "", choice.finish_reason or ("tool_calls" if choice.tool_calls else "stop")
    )
    if choice.tool_calls:
        finish = "tool_calls"
    return {
        "id": parsed.response_id or "imported",
        "object": "chat.completion",
        "model": parsed.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        **({"usage": parsed.usage} if parsed.usage else {}),
    }


def call_entry(tool_call_id: str | None, name: str, arguments: str) -> dict[str, Any]:
    """An OpenAI ``tool_calls`` entry (no ``id`` key when the source has none: the parser then gives
    it a fallback id, labelled ``fallback``)."""
    entry: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if tool_call_id:
        entry["id"] = tool_call_id
    return entry


def parse_turn(payloads: Sequence[dict[str, Any]], batch: int) -> ParsedResponse:
    """The response a turn's payloads make (as the loop will parse them)."""
    if len(payloads) == 1 and payloads[0].get("object") == "chat.completion":
        return parse_chat_completion(payloads[0], batch=batch)
    acc = ChatCompletionAccumulator(batch=batch)
    for p in payloads:
        acc.feed(p)
    return acc.finish()


def epoch(stamp: str) -> float:
    """Seconds since the epoch for an ISO 8601 timestamp (``Z`` accepted). A stamp without a zone is
    read as UTC, whatever the machine's time zone, so an import gives the same numbers everywhere
    (differences between zone-less stamps of one source are right whatever their zone was)."""
    at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.timestamp()


def zone_less(value: Any) -> bool:
    """Whether `value` is a timestamp string without a time zone (`epoch` reads it as UTC)."""
    if not isinstance(value, str) or not value:
        return False
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is None
    except ValueError:
        return False


MIXED_ZONES = "some of the source's timestamps have a time zone and some do not"


def zone_less_note(values: Iterable[Any]) -> str:
    """What the traces of a source must say when some of its timestamps (`values`) have no time zone
    ('' when every one has): each trace's notes carry it, not only the README. When the others have
    one, a duration between the two kinds is off by the recorder's UTC offset: the note says so (and
    starts with `MIXED_ZONES`, which `_build` reports as damage)."""
    count = zoned = 0
    example = None
    for value in values:
        if zone_less(value):
            count += 1
            example = example or value
        elif isinstance(value, str) and stamp_or_none(value) is not None:
            zoned += 1
    if not count:
        return ""
    if zoned:
        return (
            f"{MIXED_ZONES}: {count} of {count + zoned} have none (e.g. {example!r}), read as UTC; a "
            "duration from one kind to the other is off by the recorder's UTC offset unless that was UTC "
            "(the order checks catch only an offset that reverses the order of the times)"
        )
    return (
        f"{count} timestamp(s) of the source have no time zone (e.g. {example!r}): read as UTC; durations "
        "are right whatever zone the recorder was in, unless its clock changed (daylight saving) during "
        "the run"
    )


def stamp_or_none(value: Any) -> float | None:
    """`epoch` of a timestamp string, or None when it is missing or not a timestamp."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return epoch(value)
    except ValueError:
        return None


def text_of(content: Any) -> str:
    """Text of a message content: a string, or blocks (text joined; other blocks as JSON)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, str):
                parts.append(block)
            else:
                parts.append(json.dumps(block, ensure_ascii=False))
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False)


_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def safe_tool_name(name: str) -> str:
    """OpenAI tool names allow letters, digits, '_' and '-' only (BFCL uses dots)."""
    return _SAFE.sub("_", name)[:64] or "tool"


def slugify(text: str) -> str:
    """A file-name-safe form of `text` (dots, spaces and the like become '_')."""
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9+-]", "_", text)).strip("_") or "trace"


def inferred_tools(calls: Iterable[tuple[str, str]], why: str) -> list[dict[str, Any]]:
    """Tool schemas inferred from (name, arguments) pairs: one property per argument key seen."""
    keys: dict[str, set[str]] = {}
    for name, arguments in calls:
        try:
            value = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            value = {}
        keys.setdefault(name, set()).update(value if isinstance(value, dict) else {})
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"(schema inferred from the calls: {why})",
                "parameters": {"type": "object", "properties": {k: {} for k in sorted(ks)}},
            },
        }
        for name, ks in keys.items()
        if name
    ]

"""Recorded HTTP exchanges -> traces: VCR cassettes, exchange lists, single response files.

One file may hold several conversations (a cassette of two agents, a retry): a request continues a
conversation when its last assistant message repeats that conversation's last response (same tool
names and arguments in order; clients may rename the ids, so ids are not compared). Anything else
starts a new conversation whose initial messages are the request's.

Where each number comes from:

- model latency: the ``openai-processing-ms`` response header where present (``reported``: the
  server's processing time, without network transfer); Groq's ``usage.total_time`` (``reported``: its
  prompt + completion time, without its queue time); otherwise ``placeholder`` (`MODEL_S`);
- chunk offsets: a cassette keeps no arrival times: streamed chunks are ``spread`` evenly;
- tool results: the tool messages of the conversation's next request, matched to the response's
  calls through the ids the client echoed (``is_error: true`` in an Anthropic ``tool_result`` is an
  error); the last response's calls have no recorded result; durations ``placeholder`` (`TOOL_S`).

OpenAI chat responses are kept verbatim (streamed chunks, or the body as the cassette parsed it: the
values are exact, the layout is the recorder's); Anthropic and Responses API bodies are converted to
chat-completion bodies, and streamed Anthropic / Responses events one for one to chat chunks
(`_chat_chunks`: each chunk is what its event added, at the event's place, so chunk offsets follow
the same rule as a chat stream's); the notes say so. The request messages of a trace are the loop's, rebuilt
from the responses and results, not the recorded requests: where the recorded client sent an id of
its own for a call the provider left without one (the trace keeps the parser's ``fallback`` id), the
notes say which. A response with several choices (``n > 1``) continues with choice 0 (the one the
loop reads); every other choice becomes a trace of its own, its calls without results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolcall_lab.exceptions import WireFormatError
from toolcall_lab.formats.recordings import Exchange, read_recording
from toolcall_lab.importers._build import (
    MODEL_PLACEHOLDER,
    MODEL_S,
    TOOL_PLACEHOLDER,
    TOOL_S,
    ImportResult,
    Issue,
    Result,
    Segment,
    SourceError,
    Turn,
    build_result,
    chat_body,
    conversation,
    slugify,
    text_of,
)
from toolcall_lab.importers._chat_chunks import chat_chunks, split_events
from toolcall_lab.importers._figures import usable_figure
from toolcall_lab.importers._files import import_folder
from toolcall_lab.importers._matching import match_passes
from toolcall_lab.messages import ParsedResponse
from toolcall_lab.protocol import from_anthropic
from toolcall_lab.records import Timing

SUFFIXES = (".cassette.yaml", ".chunks.jsonl", ".yaml", ".yml", ".sse", ".json", ".jsonl")


def stem(path: Path) -> str:
    """The file name without the container suffix (dots kept apart from the suffix)."""
    name = path.name
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


@dataclass(slots=True)
class _Request:
    messages: list[dict[str, Any]]
    errors: set[str]
    """tool_call_ids whose result the request marks ``is_error``."""


def _request(exchange: Exchange) -> _Request | None:
    body = exchange.request
    if not body:
        return None
    if exchange.format == "anthropic":
        system = body.get("system")
        raw = body.get("messages") or []
        errors = {
            str(b.get("tool_use_id"))
            for m in raw
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error") is True
        }
        return _Request(from_anthropic(system if isinstance(system, str) else text_of(system), raw), errors)
    if exchange.format == "openai-responses":
        out: list[dict[str, Any]] = []
        if body.get("instructions"):
            out.append({"role": "system", "content": body["instructions"]})
        for item in body.get("input") or []:
            kind = item.get("type")
            if kind == "function_call":
                call = {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""},
                }
                if out and out[-1].get("role") == "assistant" and "tool_calls" in out[-1]:
                    out[-1]["tool_calls"].append(call)
                elif out and out[-1].get("role") == "assistant":
                    out[-1]["tool_calls"] = [call]
                else:
                    out.append({"role": "assistant", "content": None, "tool_calls": [call]})
            elif kind == "function_call_output":
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": item.get("call_id"),
                        "content": text_of(item.get("output")),
                    }
                )
            elif item.get("role") in ("user", "system", "developer", "assistant"):
                role = {"developer": "system"}.get(item["role"], item["role"])
                out.append({"role": role, "content": text_of(item.get("content")) or None})
        return _Request(out, set())
    return _Request([dict(m) for m in body.get("messages") or []], set())


def _tools(exchange: Exchange) -> list[dict[str, Any]]:
    out = []
    for t in (exchange.request or {}).get("tools") or []:
        if t.get("type") == "function" and "function" in t:
            out.append({"type": "function", "function": t["function"]})
        elif "input_schema" in t or t.get("type") == "function":  # Anthropic, or Responses flat form
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": t.get("name"),
                        "description": t.get("description", ""),
                        "parameters": t.get("input_schema") or t.get("parameters") or {},
                    },
                }
            )
    return out


def _signature(message: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Names and arguments of a message's calls (arguments compared as JSON values: clients echo
    them re-serialised)."""
    out = []
    for c in message.get("tool_calls") or []:
        fn = c.get("function") or {}
        raw = fn.get("arguments")
        try:
            value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
        except json.JSONDecodeError:
            value = raw
        out.append((fn.get("name"), json.dumps(value, sort_keys=True)))
    return out


def _timing(
    exchange: Exchange, parsed: ParsedResponse, where: str, issues: list[Issue]
) -> tuple[float, Timing]:
    ms = exchange.response_headers.get("openai-processing-ms")
    if ms and ms.isdigit():
        return int(ms) / 1000, Timing(
            source="reported",
            note=f"openai-processing-ms: {ms} (the server's processing time, without network transfer)",
        )
    usage = parsed.usage or {}
    total = usable_figure(
        usage.get("total_time"),
        name="usage.total_time",
        where=where,
        issues=issues,
        instead=f"{MODEL_S} s placeholder",
    )
    if total is not None and total > 0:
        return total, Timing(
            source="reported",
            note=f"Groq usage.total_time {total} s (prompt + completion on the server; queue_time "
            f"{usage.get('queue_time')} s and network not included)",
        )
    return MODEL_S, MODEL_PLACEHOLDER


@dataclass(slots=True)
class _Conversation:
    initial: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    responses: list[tuple[Exchange, ParsedResponse]] = field(default_factory=list)
    events: list[list[dict[str, Any]] | None] = field(default_factory=list)
    """The stream events of each response (Anthropic, Responses streams), else None."""
    results: list[list[Result]] = field(default_factory=list)
    injected: bool = False
    """The next request added messages the model did not write after these results."""
    renamed: list[str] = field(default_factory=list)
    """Fallback ids the recorded client sent under ids of its own."""


def _results_for(parsed: ParsedResponse, request: _Request) -> tuple[list[Result], bool] | None:
    """The results a request gives the response's calls, and whether the request continues it as the
    loop would (the echoed response is its last assistant message); None if it does not echo it."""
    wanted = _signature(parsed.first.to_message())
    assistants = [i for i, m in enumerate(request.messages) if m.get("role") == "assistant"]
    i = next((i for i in reversed(assistants) if _signature(request.messages[i]) == wanted), None)
    if i is None:
        return None
    echoed = request.messages[i]
    answers: list[dict[str, Any]] = []
    for m in request.messages[i + 1 :]:
        if m.get("role") != "tool":
            break
        answers.append(m)
    calls = list(echoed.get("tool_calls") or [])
    matched = match_passes(  # by call id: two calls sharing one are answered in order, never both by one
        len(calls),
        len(answers),
        [lambda a, b: str(answers[b].get("tool_call_id")) == str(calls[a].get("id"))],
    )
    out = []
    for call, (k, _) in zip(calls, matched, strict=True):
        cid = str(call.get("id"))
        message = answers[k] if k is not None else None
        if message is None:
            out.append(Result.missing(why="the next request answers no call with this id: 0 s"))
            continue
        out.append(
            Result(
                text=text_of(message.get("content")),
                duration_s=TOOL_S,
                timing=TOOL_PLACEHOLDER,
                status="error" if cid in request.errors else "ok",
            )
        )
    return out, i == assistants[-1] and all(m.get("role") == "tool" for m in request.messages[i + 1 :])


def _renamed(parsed: ParsedResponse, request: _Request) -> list[str]:
    """Calls without a provider id that the recorded client answered under an id of its own."""
    wanted = _signature(parsed.first.to_message())
    echoed = next(
        (m for m in reversed(request.messages) if m.get("role") == "assistant" and _signature(m) == wanted),
        None,
    )
    if echoed is None:
        return []
    return [
        f"{c.tool_call_id} (sent as {e.get('id')!r})"
        for c, e in zip(parsed.tool_calls, echoed.get("tool_calls") or [], strict=False)
        if c.id_source != "provider" and e.get("id") and e.get("id") != c.tool_call_id
    ]


def import_recording(path: str | Path, *, include_no_calls: bool = False) -> ImportResult:
    """A recording file (cassette, exchange list, or one response), or a folder of them, -> one trace
    per conversation."""
    p = Path(path)
    if p.is_dir():
        return import_folder(
            "recording", p, SUFFIXES, lambda f: import_recording(f, include_no_calls=include_no_calls)
        )
    try:
        return _recording(p, include_no_calls)
    except WireFormatError as exc:  # the message names the line, this the file
        raise SourceError(f"{p}: {exc}") from exc


def _recording(p: Path, include_no_calls: bool) -> ImportResult:
    recording = read_recording(p)
    conversations: list[_Conversation] = []
    open_: list[_Conversation] = []
    batch = 0
    for exchange in recording.exchanges:
        parsed_all = exchange.parse(batch=batch)
        batch += len(parsed_all)
        groups: list[list[dict[str, Any]]] | None = None
        if exchange.streamed and exchange.format in ("anthropic", "openai-responses"):
            groups = split_events(exchange.items or exchange.payloads or (), exchange.format)
            if len(groups) != len(parsed_all):
                groups = None
        request = _request(exchange)
        target = None
        if request is not None:
            for conv in open_:
                found = _results_for(conv.responses[-1][1], request)
                if found is None:
                    continue
                conv.results.append(found[0])
                conv.renamed += _renamed(conv.responses[-1][1], request)
                if found[1]:
                    target = conv
                else:  # the client added messages the model did not write: a new conversation follows
                    conv.injected = True
                    open_.remove(conv)
                break
        if target is None:
            target = _Conversation(initial=request.messages if request else [], tools=_tools(exchange))
            conversations.append(target)
            open_.append(target)
        for k, parsed in enumerate(parsed_all):
            if k > 0:  # several responses in one stream (a multi-step Responses run): no requests between
                target.results.append(
                    [
                        Result.missing(why="the stream holds the next response but not the requests between")
                        for _ in target.responses[-1][1].tool_calls
                    ]
                )
            target.responses.append((exchange, parsed))
            target.events.append(groups[k] if groups is not None else None)
        if not parsed_all[-1].tool_calls and target in open_:
            open_.remove(target)
    source_calls = sum(
        len(choice.tool_calls)
        for c in conversations
        for _, parsed in c.responses
        for choice in parsed.choices
    )
    source_model_calls = sum(len(c.responses) for c in conversations)
    issues: list[Issue] = []
    segments: list[Segment] = []
    name = stem(p)
    for n, conv in enumerate(conversations):
        if len(conv.results) < len(conv.responses):
            conv.results.append(
                [
                    Result.missing(why="the recording ends before a request carrying this result: 0 s")
                    for _ in conv.responses[-1][1].tool_calls
                ]
            )
        calls = sum(len(choice.tool_calls) for _, parsed in conv.responses for choice in parsed.choices)
        where = f"conversation {n + 1}" if len(conversations) > 1 else "the recording"
        if not calls and not include_no_calls:
            issues.append(
                Issue(
                    kind="skipped",
                    where=where,
                    what=f"{len(conv.responses)} model call(s) without tool calls (nothing to execute; "
                    "include_no_calls=True imports them)",
                    model_calls=len(conv.responses),
                )
            )
            continue
        turns: list[Turn] = []
        alternatives: list[tuple[int, int, Turn]] = []
        reported = 0
        converted = unconverted = 0
        for (exchange, parsed), events, results in zip(
            conv.responses, conv.events, conv.results, strict=True
        ):
            if exchange.format == "openai-chat" and exchange.payloads is not None:
                payloads = list(exchange.payloads)
            elif exchange.format == "openai-chat" and exchange.body is not None:
                payloads = [exchange.body]
            else:
                chunks = None
                if exchange.streamed and exchange.format != "unknown":
                    chunks = chat_chunks(events or [], exchange.format, parsed, 0)
                    converted += chunks is not None
                    unconverted += chunks is None
                payloads = chunks or [chat_body(parsed, keep_fallback_ids=False)]
            latency, timing = _timing(exchange, parsed, f"{where} response {len(turns)}", issues)
            reported += timing.source == "reported"
            turns.append(Turn(payloads=payloads, latency_s=latency, timing=timing, results=results))
            for c in range(1, len(parsed.choices)):  # n > 1: the other choices, each a trace
                alternatives.append(
                    (
                        len(turns) - 1,
                        c,
                        Turn(
                            payloads=[chat_body(parsed, keep_fallback_ids=False, choice_index=c)],
                            latency_s=latency,
                            timing=timing,
                            results=[
                                Result.missing(
                                    f"{p.name} response {len(turns) - 1} choice {c}",
                                    why=f"choice {c} of an n={len(parsed.choices)} response: the client went "
                                    "on with choice 0, so no result was sent for this choice's calls: 0 s",
                                )
                                for _ in parsed.choices[c].tool_calls
                            ],
                            alternative=True,
                        ),
                    )
                )
        first = conv.responses[0][0]
        kept = (
            "chat chunks as recorded"
            if first.format == "openai-chat" and first.streamed
            else "chat body as recorded (values exact)"
            if first.format == "openai-chat"
            else f"{first.format} stream events converted one for one to chat-completion chunks (each "
            "chunk is what its event added to the message, at the event's place: rebuilt, not verbatim)"
            + (
                f"; {unconverted} streamed response(s) whose events did not convert kept as one "
                "chat-completion body (no chunk times)"
                if unconverted
                else ""
            )
            if first.streamed and converted
            else f"{first.format} responses converted to chat-completion bodies (rebuilt, not verbatim)"
            + ("; the stream's events did not convert to chat chunks (no chunk times)" if unconverted else "")
        )
        renamed = (
            "; request messages are the loop's, not the recorded requests: the recorded client answered "
            f"fallback id(s) {', '.join(conv.renamed)}"
            if conv.renamed
            else "; request messages are the loop's, rebuilt from the responses and results"
        )
        title = f"{p.name}" + (f" (conversation {n + 1})" if len(conversations) > 1 else "")
        slug = slugify(name) + (f"__conv{n + 1}" if len(conversations) > 1 else "")
        for k, c, alt in alternatives:
            segments.append(
                Segment(
                    title=f"{title} response {k} choice {c}",
                    slug=f"{slug}__r{k}_choice{c}",
                    source=f"{p}#response={k}&choice={c}",
                    initial=[*conv.initial, *conversation(turns[:k])],
                    tools=conv.tools,
                    turns=[alt],
                    provider=p.name.split("_")[0],
                    model=conv.responses[k][1].model,
                    notes=f"choice {c} of a response with {len(conv.responses[k][1].choices)} choices "
                    "(n > 1): an alternative the client did not go on with; its calls have no results; "
                    + (
                        "model latency as reported for the whole response"
                        if alt.timing.source == "reported"
                        else f"model latency a {MODEL_S} s placeholder"
                    )
                    + f"; {kept}",
                )
            )
        segments.append(
            Segment(
                title=title,
                slug=slug,
                source=f"{p}" + (f"#conversation={n + 1}" if len(conversations) > 1 else ""),
                initial=conv.initial,
                tools=conv.tools,
                turns=turns,
                provider=p.name.split("_")[0],
                model=conv.responses[0][1].model,
                choices_split=True,  # (its alternatives are made above, with this format's chunks)
                reason="client_added_messages" if conv.injected else "final_answer",
                status="incomplete" if conv.injected else "completed",
                error="the next request adds messages after these results that the model did not write "
                "(e.g. a harness's own tool round): it starts a new conversation"
                if conv.injected
                else None,
                notes=(
                    f"model latency reported by the server in {reported} of {len(turns)} responses, "
                    f"otherwise a {MODEL_S} s placeholder; "
                    f"{_offsets_note(conv, recording.container)}; {_results_note(conv)}; {kept}"
                    + ("" if conv.initial else "; the request was not recorded (no initial messages)")
                    + renamed
                ),
            )
        )
    return build_result(
        "recording",
        str(p),
        segments,
        source_calls=source_calls,
        source_model_calls=source_model_calls,
        issues=issues,
    )


_CONTAINERS = {
    "cassette": "a cassette",
    "exchanges": "an exchange list",
    "sse": "an event-stream file",
    "chunks-jsonl": "a JSON-lines file",
    "json": "a saved body",
}


def _offsets_note(conv: _Conversation, container: str) -> str:
    """What the chunk offsets of this conversation rest on, by what the file held."""
    streamed = sum(1 for exchange, _ in conv.responses if exchange.streamed)
    if not streamed:
        return "whole responses (not streamed): no chunk offsets"
    kept = f"{_CONTAINERS.get(container, 'the file')} keeps no arrival times"
    some = (
        ""
        if streamed == len(conv.responses)
        else f" ({streamed} of {len(conv.responses)} responses streamed)"
    )
    return f"chunk offsets spread evenly{some} ({kept})"


def _results_note(conv: _Conversation) -> str:
    """Where this conversation's tool results and durations come from, by what the file held."""
    results = [r for turn in conv.results for r in turn]
    answered = sum(1 for r in results if r.status != "not_recorded")
    missing = len(results) - answered
    if not answered:
        return (
            "no later request in the recording carries the calls' results: every call is not recorded "
            "(no result, 0 s)"
        )
    text = f"tool results from the next request; tool durations a {TOOL_S} s placeholder"
    if missing:
        text += f"; {missing} call(s) with no result in the recording (not recorded, 0 s)"
    return text


def count_calls(path: str | Path) -> int:
    """Tool calls the file's responses show (the parser's count), for checks."""
    return sum(len(r.tool_calls) for r in read_recording(path).parse())

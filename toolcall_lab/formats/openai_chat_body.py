"""OpenAI chat completions, whole: the parser for non-streamed ``chat.completion`` bodies (Ollama's
``index`` inside calls, the deprecated ``function_call``, ``arguments`` sent as an object, error
bodies, ``content_filter``, several choices). The streaming accumulator is in `openai_chat`, which
re-exports `parse_chat_completion`; a body that is a saved stream chunk is read by
`toolcall_lab.formats.parse_body` through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolcall_lab.exceptions import ProviderStreamError
from toolcall_lab.formats._endings import NORMAL, cut_reason, ending_of, how_it_ended
from toolcall_lab.formats._values import (
    CHAT_METADATA,
    a_json_type,
    as_index,
    as_text,
    content_parts,
    may_hold_calls,
    refusal_note,
)
from toolcall_lab.formats.base import (
    PendingCall,
    capped,
    compact_json,
    extra_choices_note,
    failure_clause,
    finding,
    join_text,
    promised_calls,
    provider_error_note,
    provider_ids,
    repeated_provider_ids,
    usage_problem,
)
from toolcall_lab.formats.errors import error_message
from toolcall_lab.messages import Finding, ParsedResponse, new_choice, new_response


def _by_index(call: PendingCall) -> int:
    return call.index


CHOICE_KEYS = frozenset(
    {
        "index",
        "message",
        "delta",
        "finish_reason",
        "logprobs",
        "native_finish_reason",
        "stop_reason",
        "matched_stop",
        "error",
        "content_filter_results",
        "content_filter_offsets",
    }
)
_MESSAGE_KEYS = frozenset(
    {"role", "content", "tool_calls", "function_call", "refusal", "reasoning_content", "reasoning"}
)


def _beside_no_choices(body: Mapping[str, Any], findings: list[Finding]) -> None:
    """A body without choices (or ``choices: []``) that holds keys a chat completion does not have
    (a top-level ``message``, ``tool_calls``): reported with what they held, never passed over."""
    extra = {k: v for k, v in body.items() if k not in CHAT_METADATA and k not in ("choices", "error")}
    if not extra:
        return
    keys = sorted(str(k) for k in extra)[:10]
    calls = "; it may hold tool call data: no call is made of it" if may_hold_calls(extra) else ""
    findings.append(
        finding(
            "malformed_chunk",
            f"the body has no choices and holds keys {keys} a chat completion does not have; not read "
            f"({as_text(extra)[:80]}){calls}",
        )
    )


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
    if not raw_choices:
        _beside_no_choices(body, findings)
    errored = False
    messages: list[tuple[int, dict[str, Any], Any]] = []
    numbers = _choice_indices(raw_choices, findings)
    for pos, choice in enumerate(raw_choices):
        if not isinstance(choice, dict):
            findings.append(finding("malformed_chunk", f"choice {pos} is not an object; skipped"))
            continue
        ci = numbers[pos]
        if "message" not in choice and "delta" in choice:
            findings.append(
                finding(
                    "malformed_chunk",
                    f"choice {ci} has `delta`, not `message`: a stream chunk, not a body; its delta is not "
                    "read here (parse_body reads such a body as a stream of one chunk)",
                    choice_index=ci,
                )
            )
        message = choice.get("message")
        if message is None:
            if "message" in choice or "delta" not in choice:
                said = "null" if "message" in choice else "missing"
                note = f"choice {ci}: message is {said}; nothing read"
                findings.append(finding("malformed_chunk", note, choice_index=ci))
            message = {}
        elif not isinstance(message, dict):
            findings.append(
                finding(
                    "malformed_chunk",
                    f"choice {ci}: message is {a_json_type(message)}, not an object; skipped",
                    choice_index=ci,
                )
            )
            message = {}
        finish = choice.get("finish_reason")
        if finish is not None and type(finish) is not str:
            findings.append(
                finding(
                    "wrong_type",
                    f"choice {ci}: finish_reason {as_text(finish)[:60]} is {a_json_type(finish)}, not a "
                    "string; kept as its JSON text",
                    choice_index=ci,
                )
            )
            finish = as_text(finish)
        errored |= finish == "error" or bool(choice.get("error"))
        beside = {k: v for k, v in choice.items() if k not in CHOICE_KEYS}
        delta = choice.get("delta")
        if (
            "message" in choice
            and delta
            and not (isinstance(delta, dict) and not any(v for k, v in delta.items() if k != "role"))
        ):
            if may_hold_calls(delta):  # reported with the keys beside the message, its calls held back
                beside["delta"] = delta
            else:
                findings.append(
                    finding(
                        "malformed_chunk",
                        f"choice {ci} has both `message` and `delta`; its delta is not read "
                        f"({as_text(delta)[:80]})",
                        choice_index=ci,
                    )
                )
        legacy = beside.get("text")
        if type(legacy) is str and legacy:  # the legacy completions field
            if not message.get("content"):
                message = {**message, "content": legacy}
                beside.pop("text")
            elif message.get("content") != legacy:
                findings.append(
                    finding(
                        "malformed_chunk",
                        f"choice {ci}: `text` ({as_text(legacy)[:60]}) beside a message with other "
                        "content; not read",
                        choice_index=ci,
                    )
                )
        if beside and may_hold_calls(beside):  # (`tool_calls` beside the message, not in it)
            message = {**message, **{f"{k} (beside the message)": v for k, v in beside.items()}}
        messages.append((ci, message, finish))
    error = error_message(body)
    if error is None and errored:
        error = "finish_reason 'error' without an error message"
    pendings = [_pending_calls(message, ci, findings) for ci, message, _ in messages]
    taken = provider_ids([p for ps in pendings for p in ps])
    for (ci, message, finish), pending in sorted(zip(messages, pendings, strict=True), key=lambda m: m[0][0]):
        failed = cut = None
        loose = False
        ending = "normal" if finish in NORMAL else ending_of(finish)
        if error is not None:
            failed = failure_clause(error)
        elif ending == "filtered":
            failed = f"the provider stopped or withheld the output (finish_reason {finish!r})"
        elif ending in ("limit", "abnormal"):  # a whole body's calls have no end of their own
            cut = cut_reason("finish_reason", str(finish))
        elif ending == "none":  # as in a stream: arguments that form a JSON object are whole, an
            # empty string or custom input is not (nothing says the response ended)
            findings.append(
                finding("no_finish_reason", f"choice {ci}: the body has no finish_reason", choice_index=ci)
            )
            cut, loose = "the response ended without a finish reason", True
        calls = [
            p.finalize(batch, findings, None, failed, cut, taken, loose)
            for p in sorted(pending, key=_by_index)
        ]
        if len(calls) > 1:
            repeated_provider_ids(calls, findings)
        elif not calls and error is None:
            promised_calls("finish_reason", finish, findings, f"choice {ci}: ", ci)
        if (failed or cut) and error is None and finish is not None:
            unfinished = sum(not c.complete for c in calls)
            findings.append(how_it_ended("finish_reason", str(finish), unfinished, f"choice {ci}: ", ci))
        text, thought = _message_text(message, ci, findings)
        refused = refusal_note([message.get("refusal")], f"choice {ci}: ")
        if refused is not None:
            findings.append(refused)
        choices.append(
            new_choice(
                ci,
                join_text(text, findings, f"choice {ci} content"),
                join_text(thought, findings, f"choice {ci} reasoning"),
                tuple(calls),
                finish,
            )
        )
    if len(choices) > 1:
        findings.append(extra_choices_note(choices))
    if error is not None:
        calls = [c for choice in choices for c in choice.tool_calls]
        findings.append(provider_error_note(error, body, calls, None, instead=True))
    usage, rid, model = body.get("usage"), body.get("id"), body.get("model")
    odd_usage = usage_problem(usage)
    if odd_usage is not None:
        findings.append(finding("wrong_type", odd_usage))
    response = new_response(
        "openai-chat",
        tuple(choices),
        tuple(capped(findings)),
        usage if isinstance(usage, dict) else None,
        rid if isinstance(rid, str) else None,
        model if isinstance(model, str) else None,
        error,
    )
    if error is not None:
        exc = ProviderStreamError(error, payload=dict(body), line_number=None)
        exc.partial_responses = (response,)
        raise exc
    return response


def _choice_indices(raw_choices: list[Any], findings: list[Finding]) -> list[int]:
    """Each choice's index (by position; 0 for an entry that is no object), so that no two choices
    share one and a choice never stands in for another (choice 0 is the one a run uses): the
    non-negative integers first, each kept by the first choice giving it; then a decimal string or a
    whole number written with a fraction, read as its number when no choice holds that; then every
    other choice (no index, negative, of another type, a number already held) gets its position, or,
    when a choice gave itself that number or a higher one, the first number above every index the
    choices give, so that it never comes before a choice that claimed its number (the lowest is the
    run's). Every choice not kept as given is reported."""
    numbers: list[int | None] = [None] * len(raw_choices)
    taken: set[int] = set()
    notes: list[tuple[int, str, int]] = []
    left: dict[int, str] = {}  # position -> why the parser numbers it
    for pos, choice in enumerate(raw_choices):
        ci = choice.get("index") if isinstance(choice, dict) else None  # (an entry that is no object is
        if type(ci) is int and ci >= 0:  # skipped: it holds no number)
            if ci in taken:
                left[pos] = f"index {ci} is an earlier choice's too"
            else:
                numbers[pos] = ci
                taken.add(ci)
    for pos, choice in enumerate(raw_choices):
        if numbers[pos] is not None or not isinstance(choice, dict) or pos in left:
            continue
        ci = choice.get("index")
        given = f"index {compact_json(ci)[:40]}"
        number = as_index(ci) if type(ci) is not int else None
        if number is not None and number not in taken:
            numbers[pos] = number
            taken.add(number)
            notes.append((pos, f"choice {pos}: index {ci!r} is {a_json_type(ci)}; read as {number}", number))
        elif "index" not in choice:
            left[pos] = "without `index`"
        elif type(ci) is int:
            left[pos] = f"{given} is negative"
        elif number is None:
            left[pos] = f"{given} is {a_json_type(ci)}, not an integer"
        else:
            left[pos] = f"{given} is {a_json_type(ci)}, read as {number}, which another choice holds"
    claimed = max(taken) + 1 if taken else 0  # (above every index a choice gave itself: a choice
    for pos, what in sorted(left.items()):  # numbered here never comes before one that claimed its number)
        own = max(pos, claimed)
        while own in taken:
            own += 1
        numbers[pos] = own
        taken.add(own)
        why = (
            "its position"
            if own == pos
            else f"the first number above every index the choices give (its position {pos} is not)"
        )
        notes.append((pos, f"choice {pos}: {what}; numbered by {why}, {own}", own))
    for _, message, number in sorted(notes):
        findings.append(finding("wrong_type", message, choice_index=number))
    return [0 if n is None else n for n in numbers]


def _message_text(message: dict[str, Any], ci: int, findings: list[Finding]) -> tuple[list[Any], list[Any]]:
    """A message's text and reasoning pieces: strings, a list of typed parts (``content_parts``), or
    values of another type (kept as JSON by `join_text`, reported)."""
    content = message.get("content")
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = message.get("reasoning")
    thought: list[Any] = [] if reasoning is None else [reasoning]
    if type(content) is list:
        text, more = content_parts(content)
        thought += more
        findings.append(
            finding(
                "content_parts",
                f"choice {ci}: content came as a list of {len(content)} part(s); their text joined",
                choice_index=ci,
            )
        )
        return text, thought
    return ([] if content is None else [content]), thought


def _pending_calls(message: dict[str, Any], ci: int, findings: list[Finding]) -> list[PendingCall]:
    entries = message.get("tool_calls") or []
    if isinstance(entries, dict):
        findings.append(
            finding(
                "wrong_type",
                f"choice {ci}: tool_calls is one object, not a list; read as a list of one call",
                choice_index=ci,
            )
        )
        entries = [entries]
    elif not isinstance(entries, list):
        findings.append(finding("malformed_chunk", f"choice {ci}: tool_calls is not a list; skipped"))
        entries = []
    given = [as_index(tc.get("index")) if isinstance(tc, dict) else None for tc in entries]
    explicit = all(type(i) is int for i in given) and len(set(given)) == len(given)
    pendings: list[PendingCall] = []
    stray: str | None = None  # a tool call entry that is not an object but may hold one's data
    extra = {k: v for k, v in message.items() if k not in _MESSAGE_KEYS}
    if extra and may_hold_calls(extra):  # (a `tool_call`, a `tool_calls` misspelt): never passed over
        keys = sorted(str(k) for k in extra)[:10]
        findings.append(
            finding(
                "malformed_chunk",
                f"choice {ci}: the message holds keys {keys} this reader does not read; skipped "
                f"({as_text(extra)[:80]}); it may hold tool call data, so every call of this choice is "
                "held back",
                choice_index=ci,
            )
        )
        stray = f"choice {ci}: the message holds keys {keys} that may hold tool call data"
    for pos, tc in enumerate(entries):
        if not isinstance(tc, dict):
            holds = may_hold_calls(tc)
            findings.append(
                finding(
                    "malformed_chunk",
                    f"choice {ci}: tool call {pos} is {a_json_type(tc)}, not an object; skipped "
                    f"({as_text(tc)[:80]})"
                    + (
                        "; it may hold tool call data, so every call of this choice is held back"
                        if holds
                        else ""
                    ),
                    choice_index=ci,
                )
            )
            if holds and stray is None:
                stray = f"choice {ci}: tool call {pos} is not an object and may hold tool call data"
            continue
        index = given[pos] if explicit else pos
        index = index if type(index) is int else pos
        ctype = tc.get("type")
        if ctype == "":  # ("type": "" as Azure sends it: no type)
            ctype = None
        fn = tc.get("function")
        shape = entry_shape(tc)
        if type(shape) is tuple:
            pending = PendingCall.announced(ci, index, 0, tc.get("id"), None)
            pending.unknown_type, raw = shape
            pending.quirky = True
            pending.pieces = [raw if isinstance(raw, str) else compact_json(raw)]
        elif ctype == "custom" or (ctype is None and fn is None and "custom" in tc):
            custom = tc.get("custom")
            custom = custom if isinstance(custom, dict) else {}
            pending = PendingCall.announced(ci, index, 0, tc.get("id"), custom.get("name"))
            pending.kind, pending.quirky = "custom", True  # free-form text input, not JSON
            _whole_arguments(pending, custom.get("input"), "input" in custom, "input")
        else:
            if shape is not None:  # name/arguments at the top level: read, reported
                fn = shape
            fn = fn if isinstance(fn, dict) else {}
            pending = PendingCall.announced(ci, index, 0, tc.get("id"), fn.get("name"))
            if shape is not None:
                pending.flat = pending.quirky = True
            _whole_arguments(pending, fn.get("arguments"), "arguments" in fn)
        pendings.append(pending)
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        pending = PendingCall.announced(ci, len(pendings), 0, None, legacy.get("name"))
        _whole_arguments(pending, legacy.get("arguments"))
        said = (pending.name, "".join(pending.pieces))
        twin = next((p for p in pendings if p.tool_call_id and (p.name, "".join(p.pieces)) == said), None)
        if twin is not None:
            findings.append(
                finding(
                    "duplicate_legacy_call",
                    f"choice {ci}: function_call duplicates tool call {twin.tool_call_id} (same name and "
                    "arguments); counted once",
                    choice_index=ci,
                )
            )
        else:
            if pendings:
                findings.append(legacy_differs_note(ci, pending, pendings))
            pendings.append(pending)
            findings.append(
                finding(
                    "legacy_function_call",
                    f"choice {ci}: deprecated function_call read as call {pending.index} (no id)",
                    choice_index=ci,
                    call_index=pending.index,
                )
            )
    if stray is not None:
        for pending in pendings:
            pending.hold(stray)
    return pendings


def legacy_differs_note(ci: int, legacy: PendingCall, others: list[PendingCall]) -> Finding:
    """The ``conflicting_legacy_call`` finding: a choice's deprecated ``function_call`` names a call
    no ``tool_calls`` entry of it says (another name or other arguments). Both are kept, as sent;
    which the model meant, one or both, is for the reader to judge."""
    names = ", ".join(repr(c.name) for c in others[:5])
    return finding(
        "conflicting_legacy_call",
        f"choice {ci}: the deprecated function_call ({legacy.name!r}) and the tool_calls ({names}) say "
        "different calls; both kept, as sent",
        choice_index=ci,
        call_index=legacy.index,
    )


_ENTRY_KEYS = frozenset(("index", "id", "type", "function", "custom", "extra_content"))
"""Keys a tool call entry may hold besides its payload; `extra_content` is Gemini's metadata
(``{"google": {"thought_signature": ...}}``), also sent alone on a delta of its own."""
_FLAT_KEYS = frozenset(("name", "arguments"))


def entry_shape(tc: dict[str, Any]) -> tuple[str, Any] | dict[str, Any] | None:
    """Where a tool call entry's payload is, when not in ``function`` (shared with the streaming
    accumulator): None for a function or custom entry; a ``{"name", "arguments"}`` dict for an
    entry of type function (or none) that holds nothing but ``name`` / ``arguments`` at the top
    level (unambiguous, read with ``flat_tool_call``); else ``(why, raw)``: the entry is not read,
    `raw` is what it holds (``tc[type]`` for an entry of another type that has it, the one unknown
    key's value for an entry without type, else the whole entry) and `why` says what was seen (its
    type, or its keys)."""
    ctype = tc.get("type")
    if ctype == "":  # ("type": "" as Azure sends it: no type, as null)
        ctype = None
    if ctype == "custom" and "custom" not in tc and "function" in tc:  # the type says one key, the
        return "a tool call of type 'custom' whose payload is under `function`", tc["function"]  # payload
    if ctype == "function" and "function" not in tc and "custom" in tc:  # sits under the other: not read
        return "a tool call of type 'function' whose payload is under `custom`", tc["custom"]  # as either
    if ctype == "custom" or (ctype is None and "function" not in tc and "custom" in tc):
        return None
    if ctype is None or ctype == "function":
        if "function" in tc:
            return None
        extra = tc.keys() - _ENTRY_KEYS
        if not extra:
            return None  # only an index/id/type: a header without payload, read as usual
        if extra <= _FLAT_KEYS:
            return {key: tc[key] for key in extra}
        keys = sorted(str(k) for k in tc)[:12]
        why = f"a tool call entry with no `function` object (keys {keys})"
        if ctype is None and len(extra) == 1:  # a continuation of an entry of another type: its payload
            (key,) = extra
            return why, tc[key]
        return why, tc
    if type(ctype) is str and ctype in tc:
        return f"a tool call of type {ctype!r} this parser does not read", tc[ctype]
    keys = sorted(str(k) for k in tc)[:12]
    return f"a tool call of type {ctype!r} this parser does not read (keys {keys})", tc


def _whole_arguments(pending: PendingCall, args: Any, present: bool = True, field: str = "arguments") -> None:
    if args is None:
        pending.args_absent = f"`{field}` {'null' if present else 'missing'}"
        return
    pending.pieces = [args if isinstance(args, str) else pending.not_string(args, 0)]  # an object: kept

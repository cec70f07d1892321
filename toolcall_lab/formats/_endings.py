"""How a response ended, one rule for every reader (chat streamed and whole, Anthropic streamed and
whole, Responses): which finish / stop reasons are a normal end, what every other one means, and
the finding that says so.

A response *ended normally* when its reason is one of `NORMAL` (compared as given, then lower-cased:
``STOP`` is ``stop``). Any other reason is not a normal end: the token limit (`TOKEN_LIMIT`), a
provider filter (`FILTERED`: its calls are never complete), and everything else, known or not
(``abort``, ``cancelled``, ``timeout``, ``malformed_function_call``, ``pause_turn``, values nobody
documented): the response was stopped before it ended. No reason at all is its own case (``none``).

What that means for a call is decided in `PendingCall.finalize`: after a normal end its arguments
decide; otherwise a call is complete only when its own structure shows it was finished (an
Anthropic ``content_block_stop`` or a later block, a Responses item's ``.done``), and never with an
empty argument string, free-form (custom) input, or arguments that merely parse.
"""

from __future__ import annotations

from typing import Literal

from toolcall_lab.formats._findings import finding
from toolcall_lab.messages import Finding

NORMAL = frozenset(
    {
        "stop",  # OpenAI and every OpenAI-compatible server
        "tool_calls",
        "function_call",  # the deprecated function_call's finish reason
        "end_turn",  # Anthropic
        "tool_use",
        "stop_sequence",
        "eos_token",  # text-generation-inference's OpenAI-compatible API
        "completed",  # a Responses status
    }
)
"""Finish / stop reasons (and the Responses status) that end a response normally."""

TOKEN_LIMIT = frozenset(
    {"length", "max_tokens", "model_length", "model_context_window_exceeded", "max_output_tokens"}
)
"""Reasons that say the output was cut at a token limit (Mistral's ``model_length``, Anthropic's
``model_context_window_exceeded``, the Responses ``incomplete_details.reason``)."""

FILTERED = frozenset(
    {"content_filter", "refusal", "safety", "recitation", "prohibited_content", "blocklist", "spii"}
)
"""Reasons that say the provider stopped or withheld the output itself (OpenAI / Azure
``content_filter``, Anthropic ``refusal``, Gemini's ``SAFETY``, ``RECITATION``...)."""

Ending = Literal["normal", "none", "limit", "filtered", "abnormal"]


def ending_of(reason: str | None) -> Ending:
    """What kind of end `reason` (a finish reason, stop reason or Responses status) is."""
    if reason is None:
        return "none"
    if reason in NORMAL:
        return "normal"
    key = reason.lower()
    if key in NORMAL:
        return "normal"
    if key in TOKEN_LIMIT:
        return "limit"
    if key in FILTERED:
        return "filtered"
    return "abnormal"


def cut_reason(field: str, reason: str) -> str:
    """Why a response that ended with `reason` (not normal, not filtered) may hold unfinished calls,
    as a clause for messages: "the response was cut at the token limit (finish_reason 'length')"."""
    if ending_of(reason) == "limit":
        return f"the response was cut at the token limit ({field} {reason!r})"
    return f"the response ended with {field} {reason!r}, not a normal end"


def how_it_ended(
    field: str, reason: str, calls: int, where: str = "", choice_index: int | None = None
) -> Finding:
    """The finding of a response (or choice) whose `field` (``finish_reason``, ``stop_reason``)
    is `reason`, a reason that is not a normal end: ``length_finish``, ``filtered_finish`` or
    ``abnormal_finish``; `calls` is how many of its calls that leaves incomplete."""
    kind = ending_of(reason)
    marked = f"; {calls} call(s) marked incomplete" if calls else ""
    if kind == "limit":
        return finding(
            "length_finish",
            f"{where}{field} {reason!r} (output cut at the token limit){marked}",
            choice_index=choice_index,
        )
    if kind == "filtered":
        return finding(
            "filtered_finish",
            f"{where}{field} {reason!r} (the provider stopped or withheld the output){marked}",
            choice_index=choice_index,
        )
    normal = ", ".join(sorted(NORMAL - {"completed"}))
    return finding(
        "abnormal_finish",
        f"{where}{field} {reason!r} is not a normal end ({normal}): the response was stopped before it "
        f"ended{marked}",
        choice_index=choice_index,
    )

"""The status words of a round, derived only from what its record holds.

A record can be incomplete: a live view draws a round while it runs (the model has not answered,
calls have started and not finished, calls are not started yet), a cut-off run keeps cancelled calls,
an importer adds a closing round for a recording that ends after tool calls. None of these is a
"final answer" or "ok": each says what it is. A live view marks the round it is still drawing with
``live`` (``"model"``: no response yet; ``"answer"``: a response without calls, no final answer yet;
``"calls"``: calls pending) and ``expected_calls`` (the calls the response announced), and gives a
call that started and has not finished an execution of status ``running``.
"""

from __future__ import annotations

from typing import Any

from toolcall_lab.notebook.theme import plural
from toolcall_lab.records import PLACEHOLDER_KEY

FAILED = ("error", "timeout", "unknown_tool", "invalid_arguments")
OTHER_WORDS = {
    "cancelled": "cancelled",
    "rejected": "rejected",
    "duplicate": "duplicate",
    "withheld": "withheld",
    "not_recorded": "result not recorded",
}
"""Ended calls that were neither ok nor failed, as a round's title counts them."""
CLOSING = "closing round added, no model call"


def placeholder_of(r: dict[str, Any]) -> str | None:
    """Why an importer wrote this round's response itself (no model call), or None for a real one."""
    for chunk in ((r.get("response") or {}).get("chunks") or ())[:1]:
        payload = chunk.get("payload") if isinstance(chunk, dict) else None
        if isinstance(payload, dict) and payload.get(PLACEHOLDER_KEY) is not None:
            return str(payload[PLACEHOLDER_KEY])
        break
    return None


def n_calls(r: dict[str, Any]) -> int:
    """Calls of the round: those in the record, or those the response announced if more (a live
    round whose calls have not all started)."""
    return max(len(r["tool_calls"]), int(r.get("expected_calls") or 0))


def answer_kind(r: dict[str, Any]) -> str:
    """What the round's model call gave, for a bar's tooltip: ``2 calls``, ``final answer``, or what
    stands in for it (no response yet, no model call)."""
    live = r.get("live")
    if live == "model":
        return "waiting for the model"
    if n_calls(r):
        return plural(n_calls(r), "call")
    if placeholder_of(r) is not None:
        return CLOSING
    return "response received, run going on" if live == "answer" else "final answer"


def round_status(r: dict[str, Any]) -> str:
    """`ok`, `1 failed, 1 skipped`, `final answer`; and for an incomplete record what it is:
    `waiting for the model`, `streaming, 1 call running`, `1 ok, 1 call running, 1 not started yet`,
    `1 ok, 1 cancelled`, `closing round added, no model call`, `1 ok, 2 never started` (calls a
    response announced in a live view whose run ended with no record given). Never `ok`, `skipped` or
    `final answer` for what has not happened."""
    live = r.get("live")
    execs = r["tool_executions"]
    running = sum(x["status"] == "running" for x in execs)
    if live == "model":
        return f"streaming, {plural(running, 'call')} running" if running else "waiting for the model"
    if not n_calls(r):
        return answer_kind(r)
    ended = [x for x in execs if x["status"] not in ("skipped", "running")]
    failed = sum(x["status"] in FAILED for x in ended)
    others: dict[str, int] = {}
    for x in ended:
        if x["status"] != "ok" and x["status"] not in FAILED:
            word = OTHER_WORDS.get(x["status"], x["status"])
            others[word] = others.get(word, 0) + 1
    n_ok = len(ended) - failed - sum(others.values())
    skipped = sum(x["status"] == "skipped" for x in execs)
    # a call with no execution at all in a finished record was not skipped: the record lacks it
    missing = max(len(r["tool_calls"]) - len(execs), 0) if live is None else 0
    not_started = n_calls(r) - len(r["tool_calls"])  # (announced, no record: a live view's)
    words: list[str] = []
    if others or running or not_started or missing:
        words += [f"{n_ok} ok"] if n_ok else []
        words += [f"{failed} failed"] if failed else []
    elif ended:
        words.append("ok" if not failed else ("failed" if failed == len(ended) else f"{failed} failed"))
    words += [f"{k} {w}" for w, k in others.items()]
    words += [f"{plural(running, 'call')} running"] if running else []
    if not_started:
        words.append(f"{not_started} not started yet" if live is not None else f"{not_started} never started")
    words += [f"{skipped} skipped"] if skipped else []
    words += [f"{missing} with no execution in the record"] if missing else []
    return ", ".join(words) or "no call ran"

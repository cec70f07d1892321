"""Did a later tool round use an earlier one? Evidence per pair of rounds, and a class that rests on it.

For each pair of tool rounds (earlier, later) of a trace the analysis looks for:

- ``exact``: an argument value of a later call equals a value in an earlier result (a JSON value, or
  the text at word boundaries);
- ``normalised``: equal after case, whitespace and surrounding punctuation are ignored;
- ``contained``: an earlier result value appears inside an argument ("Mexico" -> "Mexico City");
- ``numeric``: the same number (``42`` / ``"42"`` / ``42.0``), ``id=42`` included;
- ``text``: the model's text written before the later calls quotes an earlier result, or (weakly)
  refers to results at all ("the search returned ...");
- ``retry``: a later call repeats the tool of an earlier call that failed; or the first tool round
  after a failed call does something else (a fallback: "Let me create it in a new file" after an
  edit failed; in one batch that call would not have been made); or, after an earlier call found
  nothing (an empty result), asks the same again (every argument of that call, by name and value,
  perhaps of another tool: a one-stop search for the same route after an empty direct one);
- ``tool_named``: the later call's tool is named in an earlier result (a discovery step);
- ``line``: a line of a multi-line argument (an edit's old text) appears in an earlier result;
- ``shared_argument``: a later call repeats a specific argument value of an earlier call (the same
  file, record or list) and one of the two changes state: not data flow, but their order matters
  (two reads of one record, in either order, are not evidence);
- ``effect``: a control dependency: an earlier call changed state (wrote or edited a file, removed
  one, ran a command that changes things, booked or cancelled) and a later call runs something
  (a shell command, tests, a submit), reads what was changed, or writes into it (a file created in
  the folder an earlier ``mkdir`` made): the later call observes the effect, so the two cannot be
  one batch whatever their arguments say.

A value an earlier result merely repeats from its own call's arguments (a flight search's result
names the origin it was asked for) is not data from that result: it counts as a shared argument.
Every match says how it matched (``match``): ``exact`` only when the value occurs as written,
``normalised`` when it needed case folding or whitespace and punctuation trimming, ``numeric`` for
equal numbers. Text evidence looks for what the model's text between the rounds quotes from a
result: a code span or quoted string, an identifier, a run of words, a line number of a listing.

Evidence is strong or weak. Short strings, small numbers, words found somewhere in a long text and
plain words a result holds only in running text ("completed" in "Delivery completed.") are weak:
they turn up by chance. What an agent harness writes around every result (OpenHands' "[The command
completed with exit code 0.]") is not looked at. Each argument keeps the strongest match over all
earlier results, found in a fixed order, so the classes are the same in every process. A pair is
``dependent`` with any strong evidence; ``unknown`` with only weak evidence, or when the analysis
could not look (a result not recorded, arguments that do not parse); ``likely_independent`` only
when everything could be checked and nothing was found. Even then the model saw the earlier results
before it chose the later calls, so merging such rounds is an upper bound, never a certainty
(`missed_parallelism` says so).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from toolcall_lab._effects import changes_state, effect, writes_by_name
from toolcall_lab._evidence import (
    FAILED_STATUSES,
    Evidence,
    EvidenceKind,
    Index,
    MatchKind,
    bounded,
    leaves,
    match_argument,
    match_kind,
    normalise,
    shared_argument,
    text_evidence,
)
from toolcall_lab.records import Round
from toolcall_lab.trace import RESULT_NOT_RECORDED, Trace

__all__ = [
    "DependencyClass",
    "Evidence",
    "EvidenceKind",
    "MatchKind",
    "RoundPair",
    "dependency_evidence",
    "independent_groups",
    "normalise",
    "tool_rounds",
]

DependencyClass = Literal["dependent", "likely_independent", "unknown"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundPair:
    """The evidence found between two tool rounds, and the class it supports."""

    earlier: int
    later: int
    classification: DependencyClass
    evidence: tuple[Evidence, ...] = ()
    missing: tuple[str, ...] = ()
    """What could not be checked (why a pair without evidence is ``unknown``)."""

    @property
    def summary(self) -> str:
        if self.evidence:
            strong = [e for e in self.evidence if e.strong] or list(self.evidence)
            return "; ".join(e.describe() for e in strong[:3]) + (
                f" (+{len(self.evidence) - 3} more)" if len(self.evidence) > 3 else ""
            )
        return "; ".join(self.missing) or "nothing found"

    def to_dict(self) -> dict[str, Any]:
        return {
            "earlier_round": self.earlier,
            "later_round": self.later,
            "classification": self.classification,
            "evidence": [e.to_dict() for e in self.evidence],
            "missing": list(self.missing),
            "summary": self.summary,
        }


def _pair(earlier: Round, later: Round, indexes: list[Index], *, next_round: bool = False) -> RoundPair:
    """The evidence between two tool rounds; `next_round`: `later` is the first tool round after
    `earlier` (the one that reacted to its results)."""
    evidence: list[Evidence] = []
    missing: list[str] = []
    for ix in indexes:
        if ix.execution.result == RESULT_NOT_RECORDED:
            missing.append(f"the result of {ix.execution.name} ({ix.execution.tool_call_id}) is not recorded")
    failed = {ix.execution.name: ix.execution for ix in indexes if ix.execution.status in FAILED_STATUSES}
    recorded = [ix for ix in indexes if ix.execution.result != RESULT_NOT_RECORDED]
    empty = [ix.execution for ix in recorded if _found_nothing(ix.execution.result)]
    for call in later.tool_calls:
        fallback = next((ex for ex in empty if _asks_again(call, ex)), None)
        if fallback is not None and call.name not in failed:
            evidence.append(
                Evidence(
                    kind="retry",
                    strong=True,
                    value=f"{call.name} after {fallback.name} found nothing",
                    argument=call.name,
                    tool_call_id=call.tool_call_id,
                    source_call_id=fallback.tool_call_id,
                    source_tool=fallback.name,
                    match="none",
                )
            )
        if call.name in failed:
            src = failed[call.name]
            evidence.append(
                Evidence(
                    kind="retry",
                    strong=True,
                    value=call.name,
                    argument=call.name,
                    tool_call_id=call.tool_call_id,
                    source_call_id=src.tool_call_id,
                    source_tool=src.name,
                    match="none",
                )
            )
        elif failed and next_round:  # another way after a failure: the call exists because it failed
            src = next(iter(failed.values()))
            evidence.append(
                Evidence(
                    kind="retry",
                    strong=True,
                    value=f"{call.name} after {src.name} failed (a fallback)",
                    argument=call.name,
                    tool_call_id=call.tool_call_id,
                    source_call_id=src.tool_call_id,
                    source_tool=src.name,
                    match="none",
                )
            )
        effect_found = effect(earlier, call)
        if effect_found is not None:
            evidence.append(effect_found)
        for ix in recorded:
            # the tool's name in an earlier result: as a whole value (strong), or inside its text
            strong = call.name in ix.exact
            if strong or (bounded(call.name.lower(), ix.text) and len(call.name) >= 4):
                evidence.append(
                    Evidence(
                        kind="tool_named",
                        strong=strong,
                        value=call.name,
                        argument=call.name,
                        tool_call_id=call.tool_call_id,
                        source_call_id=ix.execution.tool_call_id,
                        source_tool=ix.execution.name,
                        match="exact" if strong else match_kind(call.name, ix.raw),
                    )
                )
        args = call.args
        if args is None:
            missing.append(f"the arguments of {call.name} ({call.tool_call_id}) do not parse")
            continue
        for path, value in leaves(args):
            found_all = [
                found
                for ix in recorded
                # (an earlier result repeating its own call's argument is not where it came from)
                if not _echoed(value, ix)
                and (found := match_argument(f"{call.name}.{path}", value, ix, call.tool_call_id)) is not None
            ]
            if found_all:  # the strongest match over every earlier result, not the first one found
                evidence.append(max(found_all, key=lambda e: e.strong))
            else:
                shared = shared_argument(path, value, call.name, call.tool_call_id, earlier)
                if shared is not None and _order_matters(shared, call, earlier):
                    evidence.append(shared)
    text = " ".join(
        t
        for t in (later.assistant_message.get("content"), later.assistant_message.get("reasoning_content"))
        if isinstance(t, str)
    )
    if text.strip():
        for ix in recorded:
            found = text_evidence(text, ix)
            if found is not None:
                evidence.append(found)
    if any(e.strong for e in evidence):
        cls: DependencyClass = "dependent"
    elif evidence or missing:
        cls = "unknown"
    else:
        cls = "likely_independent"
    return RoundPair(
        earlier=earlier.round_index,
        later=later.round_index,
        classification=cls,
        evidence=tuple(evidence),
        missing=tuple(dict.fromkeys(missing)),
    )


_NOTHING = frozenset({"", "[]", "{}", "null", "none", "[[]]"})


def _found_nothing(result: str) -> bool:
    """An empty result (``[]``, ``{}``, nothing): the next step is often another way to ask."""
    return normalise(result) in _NOTHING or result.strip() in _NOTHING


def _asks_again(call: Any, earlier: Any) -> bool:
    """Whether `call` asks what the earlier call asked (every argument of the earlier call, by name
    and value, again): after an empty result, a fallback (a one-stop search for the same route and
    date after an empty direct one). A tool that always answers with nothing (``think``) asked about
    something else is not one."""
    try:
        before = json.loads(earlier.arguments or "{}")
    except (json.JSONDecodeError, RecursionError):
        return False

    def pairs(args: Any) -> set[tuple[str, str]]:
        return {
            (path, normalise(str(v)))
            for path, v in leaves(args if isinstance(args, dict | list) else {})
            if isinstance(v, str | int | float) and not isinstance(v, bool) and len(normalise(str(v))) >= 3
        }

    asked, again = pairs(before), pairs(call.args or {})
    # (the same call once more, as a `think` tool that always answers nothing, is not a fallback)
    return bool(asked) and asked <= again and (call.name != earlier.name or asked != again)


def _echoed(value: Any, ix: Index) -> bool:
    """Whether `value` is one of the earlier call's own argument values (a result that repeats its
    request, as a search repeats its origin and date, is not where the later call got it)."""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return False
    wanted = normalise(str(value))
    try:
        own = json.loads(ix.execution.arguments or "{}")
    except (json.JSONDecodeError, RecursionError):
        return False
    return bool(wanted) and any(
        normalise(str(v)) == wanted
        for _, v in leaves(own if isinstance(own, dict | list) else {})
        if isinstance(v, str | int | float) and not isinstance(v, bool)
    )


def _order_matters(shared: Evidence, call: Any, earlier: Round) -> bool:
    """A shared argument ties two calls only when one of them changes what the other acts on (or
    both write it with the same tool, as two updates of one todo list): two reads of the same
    record, in either order, read the same thing."""
    prior = next((c for c in earlier.tool_calls if c.tool_call_id == shared.source_call_id), None)
    if prior is None:
        return True
    return changes_state(call) or changes_state(prior) or (prior.name == call.name and writes_by_name(call))


def tool_rounds(trace: Trace) -> list[Round]:
    """Rounds whose calls ran (the closing call without tools and empty rounds are left out)."""
    return [r for r in trace.rounds if r.tool_calls and not r.final]


def dependency_evidence(trace: Trace, *, window: int | None = None) -> list[RoundPair]:
    """Every pair of tool rounds (earlier, later), with the evidence found and its class.

    `window` limits pairs to rounds at most that many tool rounds apart (None: all pairs).
    """
    rounds = tool_rounds(trace)
    indexes = [[Index.of(e) for e in r.executions if e.answered] for r in rounds]
    out = []
    for j, later in enumerate(rounds):
        first = 0 if window is None else max(0, j - window)
        for i in range(first, j):
            out.append(_pair(rounds[i], later, indexes[i], next_round=i == j - 1))
    return out


def independent_groups(trace: Trace, pairs: Iterable[RoundPair] | None = None) -> list[list[Round]]:
    """Maximal runs of consecutive tool rounds in which every pair is ``likely_independent``."""
    rounds = tool_rounds(trace)
    cls = {
        (p.earlier, p.later): p.classification
        for p in (pairs if pairs is not None else dependency_evidence(trace))
    }
    groups: list[list[Round]] = []
    group: list[Round] = []
    for r in rounds:
        consecutive = bool(group) and r.round_index == group[-1].round_index + 1
        if consecutive and all(
            cls.get((g.round_index, r.round_index)) == "likely_independent" for g in group
        ):
            group.append(r)
            continue
        if len(group) > 1:
            groups.append(group)
        group = [r]
    if len(group) > 1:
        groups.append(group)
    return groups

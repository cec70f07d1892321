"""Did a later tool round use an earlier one? Evidence per pair of rounds, and a class that rests on it.

For each pair of tool rounds (earlier, later) of a trace the analysis looks for:

- ``exact``: an argument value of a later call equals a value in an earlier result (a JSON value, or
  the text at word boundaries);
- ``normalised``: equal after case, whitespace and surrounding punctuation are ignored;
- ``contained``: an earlier result value appears inside an argument ("Mexico" -> "Mexico City");
- ``numeric``: the same number (``42`` / ``"42"`` / ``42.0``), ``id=42`` included;
- ``text``: the model's text written before the later calls quotes an earlier result, or (weakly)
  refers to results at all ("the search returned ...");
- ``retry``: a later call repeats the tool of an earlier call that failed;
- ``tool_named``: the later call's tool is named in an earlier result (a discovery step);
- ``line``: a line of a multi-line argument (an edit's old text) appears in an earlier result;
- ``shared_argument``: a later call repeats a specific argument value of an earlier call (the same
  file, record or list): not data flow, but their order may matter;
- ``effect``: a control dependency: an earlier call changed state (wrote or edited a file, removed
  one, ran a command that changes things, booked or cancelled) and a later call runs something
  (a shell command, tests, a submit) or reads what was changed: the later call observes the
  effect, so the two cannot be one batch whatever their arguments say.

Every match says how it matched (``match``): ``exact`` only when the value occurs as written,
``normalised`` when it needed case folding or whitespace and punctuation trimming, ``numeric`` for
equal numbers. Text evidence looks for what the model's text between the rounds quotes from a
result: a code span or quoted string, an identifier, a run of words, a line number of a listing.

Evidence is strong or weak. Short strings, small numbers and words found somewhere in a long text
are weak: they turn up by chance. A pair is ``dependent`` with any strong evidence; ``unknown`` with
only weak evidence, or when the analysis could not look (a result not recorded, arguments that do not
parse); ``likely_independent`` only when everything could be checked and nothing was found. Even then
the model saw the earlier results before it chose the later calls, so merging such rounds is an
upper bound, never a certainty (`missed_parallelism` says so).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from toolcall_lab.messages import ToolCall
from toolcall_lab.records import Round, ToolExecution
from toolcall_lab.trace import RESULT_NOT_RECORDED, Trace

DependencyClass = Literal["dependent", "likely_independent", "unknown"]
EvidenceKind = Literal[
    "exact",
    "normalised",
    "contained",
    "line",
    "numeric",
    "text",
    "retry",
    "tool_named",
    "shared_argument",
    "effect",
]
MatchKind = Literal["exact", "normalised", "numeric", "none"]

_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])-?\d+(?:\.\d+)?(?![A-Za-z0-9_]|\.\d)")
_WORD_CHARS = re.compile(r"\w", re.UNICODE)
_SPACES = re.compile(r"\s+")
_SPECIFIC = re.compile(r"[A-Za-z0-9][\w./:@#+-]*[\w/]")
_CUES = re.compile(
    r"\b(results?|returned|returns|found|shows?|showed|output|based on|according to|appears|seems|"
    r"looks like|now|then|next|since|pass(?:es|ed)?|done|complete[sd]?|success(?:ful(?:ly)?)?|"
    r"succeeded|failed|errors?|empty|i (?:can )?see|great|perfect|no (?:files|results|matches)|notice[ds]?|"
    r"missing|still|again|instead|worked|didn't|doesn't|not found|no such)\b",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"[\w.-]+")
_LINE_MIN = 8
"""Lines of a multi-line argument this long or longer are looked up one by one (an edit's old text)."""
_FAILED = frozenset({"error", "timeout", "unknown_tool", "invalid_arguments"})
_TRIVIAL_NUMBERS = frozenset({0.0, 1.0, -1.0})
_WHOLE_TEXT_MAX = 200
"""A plain-text result up to this many characters counts as one value (e.g. ``Mexico``)."""


def normalise(text: str) -> str:
    """Lower case, whitespace collapsed, surrounding punctuation dropped."""
    return _SPACES.sub(" ", text.lower()).strip(" \t\n.,;:!?\"'()[]{}")


def _bounded(needle: str, hay: str) -> bool:
    """`needle` occurs in `hay` not glued to letters or digits on either side."""
    if not needle:
        return False
    start = hay.find(needle)
    while start >= 0:
        end = start + len(needle)
        before = hay[start - 1] if start else " "
        after = hay[end] if end < len(hay) else " "
        if not (_WORD_CHARS.match(before) and _WORD_CHARS.match(needle[0])) and not (
            _WORD_CHARS.match(after) and _WORD_CHARS.match(needle[-1])
        ):
            return True
        start = hay.find(needle, start + 1)
    return False


_CAMEL = re.compile(r"[a-z][A-Z]")


def _is_specific(value: str) -> bool:
    """An identifier-like string of 4+ characters: a digit, ``_ / . : @ #`` inside, or camelCase."""
    return len(value) >= 4 and (
        any(c.isdigit() for c in value)
        or any(c in "_/.:@#" for c in value.strip("."))
        or bool(_CAMEL.search(value))
    )


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    elif value is not None and not isinstance(value, bool) and value != "":
        yield path, value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and re.fullmatch(r"-?\d+(?:\.\d+)?", value.strip()):
        return float(value)
    return None


@dataclass(slots=True)
class _Index:
    """What one earlier call's result offers to match against."""

    execution: ToolExecution
    text: str
    """Normalised text of the result."""
    raw: str = ""
    """The result as written."""
    originals: dict[str, str] = field(default_factory=dict)
    """Normalised value -> the value as written (to tell an exact match from a normalised one)."""
    strings: set[str] = field(default_factory=set)
    """Normalised string values (JSON values, or the whole short text)."""
    exact: set[str] = field(default_factory=set)
    numbers: set[float] = field(default_factory=set)
    specific: set[str] = field(default_factory=set)
    """Identifier-like tokens and long values: quoting one is a reference."""
    echo: set[str] = field(default_factory=set)
    """Tokens of the call's own arguments: a result that repeats them (a path) proves little."""

    @classmethod
    def of(cls, execution: ToolExecution) -> _Index:
        raw = execution.result
        index = cls(execution=execution, text=normalise(raw), raw=raw)
        index.echo = {normalise(t) for t in _TOKEN.findall(execution.arguments)}
        try:
            doc = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            doc = None
        if isinstance(doc, dict | list):
            for _, leaf in _leaves(doc):
                if isinstance(leaf, str):
                    index.exact.add(leaf.strip())
                    index.strings.add(normalise(leaf))
                    index.originals.setdefault(normalise(leaf), leaf.strip())
                    if len(leaf) >= 4:
                        index.specific.add(normalise(leaf))
                elif (n := _number(leaf)) is not None:
                    index.numbers.add(n)
        elif len(raw) <= _WHOLE_TEXT_MAX and raw.strip():
            index.exact.add(raw.strip())
            index.strings.add(normalise(raw))
            index.originals.setdefault(normalise(raw), raw.strip())
            if len(raw.strip()) >= 4:
                index.specific.add(normalise(raw))
        index.numbers.update(float(m) for m in _NUMBER.findall(raw))
        index.specific.update(normalise(t) for t in _SPECIFIC.findall(raw) if _is_specific(t))
        index.strings.discard("")
        return index


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """One sign that a later call used an earlier result."""

    kind: EvidenceKind
    strong: bool
    value: str
    """The value that matched (shortened)."""
    argument: str
    """``tool.argument.path`` of the later call, or ``text`` for the model's text."""
    tool_call_id: str
    """The later call (empty for text evidence)."""
    source_call_id: str
    source_tool: str
    match: MatchKind = "exact"
    """How the value matched: as written, only after case folding and trimming, as a number, or not
    a value match at all (a retry, an effect)."""

    def describe(self) -> str:
        strength = "" if self.strong else " (weak)"
        how = (
            f", {self.match} match" if self.match not in ("exact", "none") and self.kind != self.match else ""
        )
        return (
            f"{self.kind}{strength}: {self.argument} = {self.value!r} "
            f"from {self.source_tool} ({self.source_call_id}){how}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "strong": self.strong,
            "value": self.value,
            "argument": self.argument,
            "tool_call_id": self.tool_call_id,
            "source_call_id": self.source_call_id,
            "source_tool": self.source_tool,
            "match": self.match,
        }


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


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Base(TypedDict):
    argument: str
    tool_call_id: str
    source_call_id: str
    source_tool: str


def _how(value: str, hay: str) -> MatchKind:
    """``exact`` when `value` occurs in `hay` as written, else ``normalised``."""
    return "exact" if _bounded(value, hay) else "normalised"


def _match_argument(path: str, value: Any, index: _Index, call_id: str) -> Evidence | None:
    ex = index.execution
    base: _Base = {
        "argument": path,
        "tool_call_id": call_id,
        "source_call_id": ex.tool_call_id,
        "source_tool": ex.name,
    }
    number = _number(value)
    if number is not None:
        if number in index.numbers and number not in _TRIVIAL_NUMBERS:
            strong = abs(number) >= 10 or not number.is_integer()
            return Evidence(kind="numeric", strong=strong, value=_short(value), match="numeric", **base)
        if number in index.numbers:
            return Evidence(kind="numeric", strong=False, value=_short(value), match="numeric", **base)
        return None
    if not isinstance(value, str):
        return None
    v = value.strip()
    n = normalise(v)
    if not n:
        return None
    long_enough = len(n) >= 3
    if v in index.exact:
        return Evidence(kind="exact", strong=long_enough, value=_short(v), **base)
    if n in index.strings:
        return Evidence(kind="normalised", strong=long_enough, value=_short(v), match="normalised", **base)
    for s in index.strings:
        if len(s) >= 3 and len(s) < len(n) and _bounded(s, n):
            return Evidence(
                kind="contained",
                strong=len(s) >= 4 or _is_specific(s),
                value=_short(s),
                match=_how(index.originals.get(s, s), v),
                **base,
            )
    if _bounded(n, index.text):
        strong = _is_specific(v) or len(n) >= 12 or (len(n) >= 6 and len(index.text) <= 2000)
        if _bounded(v, index.raw):
            return Evidence(kind="exact", strong=strong, value=_short(v), **base)
        return Evidence(kind="normalised", strong=strong, value=_short(v), match="normalised", **base)
    if "\n" in v:
        for line in v.splitlines():
            ln = normalise(line)
            if len(ln) >= _LINE_MIN and _bounded(ln, index.text):
                return Evidence(
                    kind="line",
                    strong=True,
                    value=_short(line.strip()),
                    match=_how(line.strip(), index.raw),
                    **base,
                )
    weak: Evidence | None = None
    for token in _TOKEN.findall(v):  # a path component, a word of a command: "ls src/libponyc"
        t = normalise(token)
        if len(t) >= 3 and _bounded(t, index.text):
            how = _how(token, index.raw)
            if (_is_specific(token) or len(t) >= 8) and t not in index.echo:
                return Evidence(kind="contained", strong=True, value=_short(token), match=how, **base)
            weak = weak or Evidence(kind="contained", strong=False, value=_short(token), match=how, **base)
    return weak


_QUOTED = re.compile(r"`([^`\n]{3,200})`|\"([^\"\n]{3,200})\"|'([^'\n]{3,80})'")
_LINE_REF = re.compile(r"\blines?\s+(\d+)", re.IGNORECASE)
_WORDS = re.compile(r"[A-Za-z0-9_]+")
_RUN = 5
"""Words in a row of the model's text found together in a result: a quotation, not a coincidence."""


def _text_evidence(text: str, index: _Index) -> Evidence | None:
    """What the model's text written before the later calls quotes from an earlier result."""
    ex = index.execution
    base: _Base = {
        "argument": "text",
        "tool_call_id": "",
        "source_call_id": ex.tool_call_id,
        "source_tool": ex.name,
    }
    hay = normalise(text)
    for m in _QUOTED.finditer(text):  # `pattern`, "Mexico City": the model quotes on purpose
        quoted = next(g for g in m.groups() if g).strip()
        if len(normalise(quoted)) >= 3 and _bounded(normalise(quoted), index.text):
            return Evidence(
                kind="text", strong=True, value=_short(quoted), match=_how(quoted, index.raw), **base
            )
    for raw in text.split():  # DECL(pattern), foo.bar(), src/x.c: code the model copied
        token = raw.strip(".,;:!?\"'`")
        codeish = (
            len(token) >= 6 and any(c in token for c in "()[]{}_/.:#=") and any(c.isalpha() for c in token)
        )
        if codeish and _bounded(token, index.raw):
            return Evidence(kind="text", strong=True, value=_short(token), **base)
    for token in sorted(index.specific, key=len, reverse=True):
        if len(token) >= 4 and _bounded(token, hay):
            original = next((t for t in _SPECIFIC.findall(text) if normalise(t) == token), token)
            return Evidence(
                kind="text", strong=True, value=_short(original), match=_how(original, index.raw), **base
            )
    for m in _LINE_REF.finditer(text):  # "declared on line 29" after a listing with "29:"
        if re.search(rf"(?m)^\s*{m.group(1)}\s*[:|\t-]", index.raw):
            return Evidence(kind="text", strong=True, value=m.group(0), match="numeric", **base)
    words = _WORDS.findall(text)
    for k in range(len(words) - _RUN + 1):
        run = " ".join(words[k : k + _RUN])
        if len(run) >= 24 and _bounded(run.lower(), index.text):
            return Evidence(kind="text", strong=True, value=_short(run), match=_how(run, index.raw), **base)
    for number in _NUMBER.findall(text):
        value = float(number)
        if value in index.numbers and (abs(value) >= 100 or not value.is_integer()):
            return Evidence(kind="text", strong=True, value=number, match="numeric", **base)
    cue = _CUES.search(text)
    if cue:
        return Evidence(kind="text", strong=False, value=cue.group(0), match="none", **base)
    return None


_CHANGES = frozenset(
    [
        "write",
        "edit",
        "multiedit",
        "create",
        "delete",
        "remove",
        "rm",
        "update",
        "insert",
        "replace",
        "patch",
        "apply",
        "move",
        "rename",
        "mkdir",
        "install",
        "book",
        "cancel",
        "modify",
        "append",
        "commit",
        "push",
        "upload",
        "save",
        "put",
        "set",
        "exchange",
    ]
)
_RUNS = frozenset(
    [
        "bash",
        "shell",
        "terminal",
        "run",
        "exec",
        "execute",
        "command",
        "cmd",
        "test",
        "tests",
        "submit",
        "build",
        "compile",
        "lint",
        "check",
        "verify",
        "deploy",
        "python",
        "ipython",
        "jupyter",
    ]
)
_LOOKS = frozenset(
    [
        "read",
        "view",
        "open",
        "cat",
        "get",
        "fetch",
        "list",
        "ls",
        "glob",
        "grep",
        "search",
        "find",
        "status",
        "show",
        "diff",
        "look",
    ]
)
_EDITOR_CHANGES = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "append"})
_SHELL_CHANGES = re.compile(
    r"(?:^|[;&|(]\s*|\s)(?:rm|mv|cp|mkdir|rmdir|touch|chmod|chown|ln|patch|tee|truncate|"
    r"git\s+(?:add|commit|checkout|apply|reset|restore|stash|rm|mv|merge|rebase|cherry-pick|switch)|"
    r"pip3?\s+install|npm\s+(?:install|i|ci)|yarn\s+add|apt(?:-get)?\s+install|make|sed\s+-i)\b"
    r"|>{1,2}\s*[\w./~$-]|<<",
)


def _words(name: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)}


def _command(call: ToolCall) -> str | None:
    """The command a call runs: its ``command`` / ``cmd`` argument, or for a shell-like tool its
    longest string argument."""
    args = call.args if isinstance(call.args, dict) else {}
    value = args.get("command", args.get("cmd"))
    if isinstance(value, str):
        return value
    if _words(call.name) & _RUNS:
        strings = [v for v in args.values() if isinstance(v, str)]
        return max(strings, key=len) if strings else None
    return None


def _changes_state(call: ToolCall) -> bool:
    """Whether a call changes something outside the model (a file, a record, the working tree)."""
    words = _words(call.name)
    if "todo" in words:
        return False  # the agent's own bookkeeping
    command = _command(call)
    if command is not None and command in _EDITOR_CHANGES | {"view"}:  # str_replace_editor and kin
        return command != "view"
    if command is not None and words & _RUNS:
        return bool(_SHELL_CHANGES.search(command))
    return bool(words & _CHANGES)


def _observes(call: ToolCall) -> tuple[bool, bool]:
    """(runs something, reads something): a call that would see an earlier call's effect."""
    words = _words(call.name)
    if "todo" in words:
        return False, False
    command = _command(call)
    if command == "view":
        return False, True
    runs = bool(words & _RUNS) and command not in _EDITOR_CHANGES
    return runs, bool(words & _LOOKS) or runs


def _paths(call: ToolCall) -> set[str]:
    return {
        normalise(v)
        for _, v in _leaves(call.args if isinstance(call.args, dict) else {})
        if isinstance(v, str) and ("/" in v or "." in v) and 3 <= len(v) <= 300 and "\n" not in v
    }


def _effect(earlier: Round, call: ToolCall) -> Evidence | None:
    """A control dependency: `call` runs, or reads what, an earlier call of `earlier` changed."""
    runs, reads = _observes(call)
    if not runs and not reads:
        return None
    for ex, prior in zip(earlier.executions, earlier.tool_calls, strict=False):
        if ex.status in ("unknown_tool", "invalid_arguments", "rejected", "duplicate", "skipped"):
            continue  # it did not run: it changed nothing
        if not _changes_state(prior):
            continue
        shared = _paths(prior) & _paths(call)
        if runs or shared:
            what = (
                f"runs after {prior.name} changed state"
                if runs and not shared
                else f"reads {sorted(shared)[0]!r}, which {prior.name} changed"
            )
            return Evidence(
                kind="effect",
                strong=True,
                value=_short(_command(call) or what),
                argument=f"{call.name} ({what})",
                tool_call_id=call.tool_call_id,
                source_call_id=prior.tool_call_id,
                source_tool=prior.name,
                match="none",
            )
    return None


def _shared(path: str, value: Any, tool: str, call_id: str, earlier: Round) -> Evidence | None:
    """The same specific argument value in an earlier call: the two act on the same thing (a file,
    a record, a todo list), so their order may matter."""
    if not isinstance(value, str):
        return None
    n = normalise(value)
    if len(n) < 4:
        return None
    for call in earlier.tool_calls:
        for _, other in _leaves(call.args or {}):
            if isinstance(other, str) and normalise(other) == n:
                return Evidence(
                    kind="shared_argument",
                    strong=_is_specific(value) or len(n) >= 12,
                    value=_short(value),
                    argument=f"{tool}.{path}",
                    tool_call_id=call_id,
                    source_call_id=call.tool_call_id,
                    source_tool=call.name,
                    match="exact" if other.strip() == value.strip() else "normalised",
                )
    return None


def _pair(earlier: Round, later: Round, indexes: list[_Index]) -> RoundPair:
    evidence: list[Evidence] = []
    missing: list[str] = []
    for ix in indexes:
        if ix.execution.result == RESULT_NOT_RECORDED:
            missing.append(f"the result of {ix.execution.name} ({ix.execution.tool_call_id}) is not recorded")
    failed = {ix.execution.name: ix.execution for ix in indexes if ix.execution.status in _FAILED}
    recorded = [ix for ix in indexes if ix.execution.result != RESULT_NOT_RECORDED]
    for call in later.tool_calls:
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
        effect = _effect(earlier, call)
        if effect is not None:
            evidence.append(effect)
        for ix in recorded:
            if call.name in ix.exact:
                evidence.append(
                    Evidence(
                        kind="tool_named",
                        strong=True,
                        value=call.name,
                        argument=call.name,
                        tool_call_id=call.tool_call_id,
                        source_call_id=ix.execution.tool_call_id,
                        source_tool=ix.execution.name,
                    )
                )
            elif _bounded(call.name.lower(), ix.text) and len(call.name) >= 4:
                evidence.append(
                    Evidence(
                        kind="tool_named",
                        strong=False,
                        value=call.name,
                        argument=call.name,
                        tool_call_id=call.tool_call_id,
                        source_call_id=ix.execution.tool_call_id,
                        source_tool=ix.execution.name,
                        match=_how(call.name, ix.raw),
                    )
                )
        args = call.args
        if args is None:
            missing.append(f"the arguments of {call.name} ({call.tool_call_id}) do not parse")
            continue
        for path, value in _leaves(args):
            for ix in recorded:
                found = _match_argument(f"{call.name}.{path}", value, ix, call.tool_call_id)
                if found is not None:
                    evidence.append(found)
                    break
            else:
                shared = _shared(path, value, call.name, call.tool_call_id, earlier)
                if shared is not None:
                    evidence.append(shared)
    text = " ".join(
        t
        for t in (later.assistant_message.get("content"), later.assistant_message.get("reasoning_content"))
        if isinstance(t, str)
    )
    if text.strip():
        for ix in recorded:
            found = _text_evidence(text, ix)
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


def tool_rounds(trace: Trace) -> list[Round]:
    """Rounds whose calls ran (the closing call without tools and empty rounds are left out)."""
    return [r for r in trace.rounds if r.tool_calls and not r.final]


def dependency_evidence(trace: Trace, *, window: int | None = None) -> list[RoundPair]:
    """Every pair of tool rounds (earlier, later), with the evidence found and its class.

    `window` limits pairs to rounds at most that many tool rounds apart (None: all pairs).
    """
    rounds = tool_rounds(trace)
    indexes = [[_Index.of(e) for e in r.executions if e.answered] for r in rounds]
    out = []
    for j, later in enumerate(rounds):
        first = 0 if window is None else max(0, j - window)
        for i in range(first, j):
            out.append(_pair(rounds[i], later, indexes[i]))
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

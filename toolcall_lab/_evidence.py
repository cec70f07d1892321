"""How a later round's call or text is matched against earlier results: the `Evidence` record, the
index of what a result offers, and the value and text matchers (`toolcall_lab.dependencies` uses
them; the module docstring there says what each kind of evidence means)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from toolcall_lab.records import Round, ToolExecution

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
    r"missing|still|again|instead|worked|didn't|doesn't|not found|no such|different approach|another way|"
    r"retry|retrying)\b",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"[\w.-]+")
_LINE_MIN = 8
"""Lines of a multi-line argument this long or longer are looked up one by one (an edit's old text)."""
FAILED_STATUSES = frozenset({"error", "timeout", "unknown_tool", "invalid_arguments"})
_TRIVIAL_NUMBERS = frozenset({0.0, 1.0, -1.0})
_FRAMING = re.compile(
    r"\[(?:The command (?:completed with exit code -?\d+|has no new output after \d+ seconds[^\]\n]*)"
    r"|Command finished with exit code -?\d+|Python Interpreter: [^\]\n]*)\.?\]"
)
"""What an agent harness writes around every result (OpenHands' "[The command completed with exit
code 0.]"): not the tool's output, so not where a later argument can come from."""
_WHOLE_TEXT_MAX = 200
"""A plain-text result up to this many characters counts as one value (e.g. ``Mexico``)."""
_PLAIN_WORD = re.compile(r"[a-z]+")


def plain_word(value: str) -> bool:
    """A single lower-case word as written ("completed", "src", "business"); names ("Paris"),
    identifiers and phrases are not."""
    return bool(_PLAIN_WORD.fullmatch(value.strip().strip(".,;:!?\"'`()[]{}")))


def vocabulary(value: str, index: Index) -> bool:
    """A plain word the result holds only inside running text ("Delivery completed.", "The command
    completed with exit code 0"): vocabulary that turns up anywhere, so finding it proves little
    however long it is. A plain word that is a whole value of the result, or stands in a line that is
    not prose (an entry of a listing: ``drwxr-xr-x 2 root root 4096 Apr 30 src``), is the result's
    own: not vocabulary."""
    word = value.strip().strip(".,;:!?\"'`()[]{}")
    if not plain_word(word) or word in index.exact:
        return False
    found = False
    for m in re.finditer(rf"(?<![\w-]){re.escape(word)}(?![\w-])", index.raw, re.IGNORECASE):
        found = True
        start = index.raw.rfind("\n", 0, m.start()) + 1
        end = index.raw.find("\n", m.end())
        if not _prose(index.raw[start : end if end >= 0 else len(index.raw)]):
            return False
    return found


def _prose(line: str) -> bool:
    """A line of running text: two words or more, most of its tokens plain words."""
    tokens = line.split()
    words = [t for t in tokens if re.fullmatch(r"[A-Za-z]+", t.strip(".,;:!?\"'`()[]"))]
    return len(words) >= 2 and len(words) >= 0.6 * len(tokens)


def normalise(text: str) -> str:
    """Lower case, whitespace collapsed, surrounding punctuation dropped."""
    return _SPACES.sub(" ", text.lower()).strip(" \t\n.,;:!?\"'()[]{}")


def bounded(needle: str, hay: str) -> bool:
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


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}[{i}]")
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
class Index:
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
    def of(cls, execution: ToolExecution) -> Index:
        raw = _FRAMING.sub("", execution.result)
        index = cls(execution=execution, text=normalise(raw), raw=raw)
        index.echo = {normalise(t) for t in _TOKEN.findall(execution.arguments)}
        try:
            doc = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            doc = None
        if isinstance(doc, dict | list):
            for _, leaf in leaves(doc):
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


def short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Base(TypedDict):
    argument: str
    tool_call_id: str
    source_call_id: str
    source_tool: str


def match_kind(value: str, hay: str) -> MatchKind:
    """``exact`` when `value` occurs in `hay` as written, else ``normalised``."""
    return "exact" if bounded(value, hay) else "normalised"


def match_argument(path: str, value: Any, index: Index, call_id: str) -> Evidence | None:
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
            return Evidence(kind="numeric", strong=strong, value=short(value), match="numeric", **base)
        if number in index.numbers:
            return Evidence(kind="numeric", strong=False, value=short(value), match="numeric", **base)
        return None
    if not isinstance(value, str):
        return None
    v = value.strip()
    n = normalise(v)
    if not n:
        return None
    long_enough = len(n) >= 3 and not vocabulary(v, index)
    if v in index.exact:
        return Evidence(kind="exact", strong=long_enough, value=short(v), **base)
    if n in index.strings:
        return Evidence(kind="normalised", strong=long_enough, value=short(v), match="normalised", **base)
    inside = [s for s in index.strings if len(s) >= 3 and len(s) < len(n) and bounded(s, n)]
    if inside:  # the strongest, then the longest: never whichever a set yields first
        s = max(inside, key=lambda s: (_contained_strong(s, index), len(s), s))
        return Evidence(
            kind="contained",
            strong=_contained_strong(s, index),
            value=short(s),
            match=match_kind(index.originals.get(s, s), v),
            **base,
        )
    if bounded(n, index.text):
        strong = not vocabulary(v, index) and (
            _is_specific(v) or len(n) >= 12 or (len(n) >= 6 and len(index.text) <= 2000)
        )
        if bounded(v, index.raw):
            return Evidence(kind="exact", strong=strong, value=short(v), **base)
        return Evidence(kind="normalised", strong=strong, value=short(v), match="normalised", **base)
    weak: Evidence | None = None
    if "\n" in v:
        for line in v.splitlines():
            ln = normalise(line)
            if len(ln) >= _LINE_MIN and bounded(ln, index.text):
                found = Evidence(
                    kind="line",
                    strong=not vocabulary(ln, index),  # (".completed {" is the word "completed")
                    value=short(line.strip()),
                    match=match_kind(line.strip(), index.raw),
                    **base,
                )
                if found.strong:
                    return found
                weak = weak or found
    for token in _TOKEN.findall(v):  # a path component, a word of a command: "ls src/libponyc"
        t = normalise(token)
        if len(t) >= 3 and bounded(t, index.text):
            kind_of = match_kind(token, index.raw)
            telling = _is_specific(token) or (len(t) >= 8 and not vocabulary(token, index))
            if telling and t not in index.echo:
                return Evidence(kind="contained", strong=True, value=short(token), match=kind_of, **base)
            weak = weak or Evidence(kind="contained", strong=False, value=short(token), match=kind_of, **base)
    return weak


def _contained_strong(s: str, index: Index) -> bool:
    """A result value found inside a later argument is strong when it is more than a plain word."""
    return (len(s) >= 4 or _is_specific(s)) and not vocabulary(index.originals.get(s, s), index)


_QUOTED = re.compile(r"`([^`\n]{3,200})`|\"([^\"\n]{3,200})\"|'([^'\n]{3,80})'")
_LINE_REF = re.compile(r"\blines?\s+(\d+)", re.IGNORECASE)
_WORDS = re.compile(r"[A-Za-z0-9_]+")
_RUN = 5
"""Words in a row of the model's text found together in a result: a quotation, not a coincidence."""


def text_evidence(text: str, index: Index) -> Evidence | None:
    """What the model's text written before the later calls quotes from an earlier result."""
    ex = index.execution
    base: _Base = {
        "argument": "text",
        "tool_call_id": "",
        "source_call_id": ex.tool_call_id,
        "source_tool": ex.name,
    }
    hay = normalise(text)
    plain: Evidence | None = None
    for m in _QUOTED.finditer(text):  # `pattern`, "Mexico City": the model quotes on purpose
        quoted = next(g for g in m.groups() if g).strip()
        if len(normalise(quoted)) >= 3 and bounded(normalise(quoted), index.text):
            found = Evidence(
                kind="text",
                strong=not vocabulary(quoted, index),  # a quoted word of running text proves little
                value=short(quoted),
                match=match_kind(quoted, index.raw),
                **base,
            )
            if found.strong:
                return found
            plain = plain or found
    for raw in text.split():  # DECL(pattern), foo.bar(), src/x.c: code the model copied
        token = raw.strip(".,;:!?\"'`")
        codeish = (
            len(token) >= 6 and any(c in token for c in "()[]{}_/.:#=") and any(c.isalpha() for c in token)
        )
        if codeish and bounded(token, index.raw):
            return Evidence(kind="text", strong=True, value=short(token), **base)
    for token in sorted(index.specific, key=lambda t: (-len(t), t)):
        if len(token) >= 4 and bounded(token, hay):
            original = next((t for t in _SPECIFIC.findall(text) if normalise(t) == token), token)
            return Evidence(
                kind="text", strong=True, value=short(original), match=match_kind(original, index.raw), **base
            )
    for m in _LINE_REF.finditer(text):  # "declared on line 29" after a listing with "29:"
        if re.search(rf"(?m)^\s*{m.group(1)}\s*[:|\t-]", index.raw):
            return Evidence(kind="text", strong=True, value=m.group(0), match="numeric", **base)
    words = _WORDS.findall(text)
    for k in range(len(words) - _RUN + 1):
        run = " ".join(words[k : k + _RUN])
        if len(run) >= 24 and bounded(run.lower(), index.text):
            return Evidence(
                kind="text", strong=True, value=short(run), match=match_kind(run, index.raw), **base
            )
    for number in _NUMBER.findall(text):
        value = float(number)
        if value in index.numbers and (abs(value) >= 100 or not value.is_integer()):
            return Evidence(kind="text", strong=True, value=number, match="numeric", **base)
    if plain is not None:
        return plain
    cue = _CUES.search(text)
    if cue:
        return Evidence(kind="text", strong=False, value=cue.group(0), match="none", **base)
    return None


def shared_argument(path: str, value: Any, tool: str, call_id: str, earlier: Round) -> Evidence | None:
    """The same specific argument value in an earlier call: the two act on the same thing (a file,
    a record, a todo list), so their order may matter."""
    if not isinstance(value, str):
        return None
    n = normalise(value)
    if len(n) < 4:
        return None
    for call in earlier.tool_calls:
        for _, other in leaves(call.args or {}):
            if isinstance(other, str) and normalise(other) == n:
                return Evidence(
                    kind="shared_argument",
                    strong=_is_specific(value) or len(n) >= 12,
                    value=short(value),
                    argument=f"{tool}.{path}",
                    tool_call_id=call_id,
                    source_call_id=call.tool_call_id,
                    source_tool=call.name,
                    match="exact" if other.strip() == value.strip() else "normalised",
                )
    return None

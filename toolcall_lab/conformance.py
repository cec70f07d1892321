"""The conformance corpus runner: one small recording per provider quirk, with the calls it must give.

A case is two files side by side: the input (``name.sse``, ``name.chunks.jsonl``, ``name.json``,
``name.yaml``) and ``name.expect.json``::

    {"quirk": "function name split across deltas", "category": "chat-completions",
     "provider": "Gemini (OpenAI-compatible)", "models": "https://github.com/...",
     "expect": {"responses": [{"calls": [{"id": "call_1", "name": "get_weather",
                                          "arguments": "{\\"city\\":\\"Paris\\"}"}],
                               "findings": ["split_name"]}]}}

``calls`` lists every client call (``id`` may be ``"fallback"``; ``complete`` defaults to true,
``kind`` to ``"function"``); ``findings`` is the exact multiset of finding kinds the response
carries (a false finding fails the case as a missing one does), ``absent`` kinds that must not be
reported; ``server_calls`` lists provider-run tools (id, name, result_type); ``content`` (optional)
the exact text of choice 0; ``error`` is a text the response's provider error must contain
(``null``: no error). ``raises`` (optional) names the
exception ``Recording.parse()`` must raise by default, with a text its message contains; a case
with ``raises`` and no ``responses`` is a file the parser must refuse as a whole (read whole and
streamed), such as a wire format it does not read.

Every case is read twice, whole (`read_recording`) and streamed (`iter_responses`), and both must
match. `run_corpus` returns one `CaseResult` per case (an input file with no ``.expect.json`` is a
failed one, `unpaired_inputs`); `quirk_table` lays them out by provider.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolcall_lab.exceptions import ToolcallLabError
from toolcall_lab.formats.recordings import iter_responses, read_recording
from toolcall_lab.messages import ParsedResponse

EXPECT = ".expect.json"
_INPUTS = (".sse", ".chunks.jsonl", ".jsonl", ".json", ".yaml", ".yml")


def default_corpus() -> Path:
    """``tests/conformance`` of the source checkout this package runs from."""
    return Path(__file__).resolve().parent.parent / "tests" / "conformance"


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One conformance case: the input file and what parsing it must give."""

    name: str
    path: Path
    quirk: str
    category: str
    provider: str
    models: str
    expect: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """What the parser did on one case, and whether that is what the case expects."""

    case: Case
    passed: bool
    outcome: str
    """A short account of what the parser gave (calls, error, findings)."""
    problems: tuple[str, ...] = ()

    def row(self) -> dict[str, str]:
        return {
            "category": self.case.category,
            "quirk": self.case.quirk,
            "provider": self.case.provider,
            "result": "pass" if self.passed else "FAIL",
            "parser gives": self.outcome,
            "models": self.case.models,
            "case": self.case.name,
        }


class CaseFileError(ValueError):
    """A case's ``.expect.json`` is unusable (not JSON, fields missing, no input file beside it)."""


def _specs(root: str | Path | None) -> tuple[Path, list[Path]]:
    base = Path(root) if root is not None else default_corpus()
    if not base.is_dir():
        raise FileNotFoundError(f"no conformance corpus at {base}")
    return base, sorted(base.rglob(f"*{EXPECT}"))


def load_case(spec: Path, base: Path) -> Case:
    """The case an ``.expect.json`` describes; `CaseFileError` saying what is wrong with it."""
    stem = spec.name[: -len(EXPECT)]
    inputs = [p for p in spec.parent.iterdir() if p.name.startswith(stem + ".") and p.name.endswith(_INPUTS)]
    inputs = [p for p in inputs if p.name[len(stem) :] in _INPUTS]
    if len(inputs) != 1:
        raise CaseFileError(
            f"{spec}: expected exactly one input file {stem}.<ext> beside it, found {len(inputs)}"
        )
    try:
        doc = json.loads(spec.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CaseFileError(f"{spec}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise CaseFileError(f"{spec}: a JSON object is expected, got {type(doc).__name__}")
    missing = [k for k in ("quirk", "category", "provider", "models", "expect") if k not in doc]
    if missing:
        raise CaseFileError(f"{spec}: missing {missing}")
    if not isinstance(doc["expect"], dict):
        raise CaseFileError(f"{spec}: 'expect' must be an object")
    return Case(
        name=str(spec.relative_to(base))[: -len(EXPECT)],
        path=inputs[0],
        quirk=str(doc["quirk"]),
        category=str(doc["category"]),
        provider=str(doc["provider"]),
        models=str(doc["models"]),
        expect=doc["expect"],
    )


def load_cases(root: str | Path | None = None) -> list[Case]:
    """Every case under `root` (default: the repository's ``tests/conformance``), sorted by name;
    `CaseFileError` at the first unusable case file (`run_corpus` reports each instead)."""
    base, specs = _specs(root)
    return [load_case(spec, base) for spec in specs]


def _summary(responses: Sequence[ParsedResponse]) -> str:
    parts = []
    for r in responses:
        calls = [c for ch in r.choices for c in ch.tool_calls]
        done = sum(c.complete for c in calls)
        text = f"{len(calls)} call(s)" + (f", {len(calls) - done} incomplete" if done < len(calls) else "")
        if r.server_tool_calls:
            text += f", {len(r.server_tool_calls)} server-side"
        if r.error:
            text += f", error: {r.error[:60]}"
        kinds = sorted({f.kind for f in r.findings})
        if kinds:
            text += f" [{', '.join(kinds[:4])}{', ...' if len(kinds) > 4 else ''}]"
        parts.append(text)
    return "; ".join(parts) or "no responses"


def _check_response(number: int, got: ParsedResponse, want: dict[str, Any]) -> list[str]:
    problems = []
    calls = [c for ch in got.choices for c in ch.tool_calls]
    wanted = want.get("calls", [])
    if len(calls) != len(wanted):
        problems.append(f"response {number}: {len(calls)} calls, expected {len(wanted)}")
    for call, exp in zip(calls, wanted, strict=False):
        exp_id = exp.get("id")
        if exp_id == "fallback":
            if call.id_source != "fallback":
                problems.append(
                    f"response {number}: call {call.index} id {call.tool_call_id!r}, expected a fallback id"
                )
        elif exp_id is not None and call.tool_call_id != exp_id:
            problems.append(f"response {number}: call id {call.tool_call_id!r}, expected {exp_id!r}")
        for key, value in (
            ("name", exp.get("name")),
            ("arguments", exp.get("arguments")),
            ("complete", exp.get("complete", True)),
            ("kind", exp.get("kind", "function")),
        ):
            if value is not None and getattr(call, key) != value:
                problems.append(
                    f"response {number}: call {call.index} {key} {getattr(call, key)!r}, expected {value!r}"
                )
    kinds = {f.kind for f in got.findings}
    got_kinds = sorted(f.kind for f in got.findings)
    want_kinds = sorted(want.get("findings", []))
    if got_kinds != want_kinds:  # the exact multiset: a false finding fails as a missing one does
        problems.append(f"response {number}: findings {got_kinds}, expected exactly {want_kinds}")
    for kind in want.get("absent", []):
        if kind in kinds:
            problems.append(f"response {number}: finding {kind!r} must not be reported")
    servers = [(s.tool_call_id, s.name, s.result_type) for s in got.server_tool_calls]
    wanted_servers = [
        (s.get("id"), s.get("name"), s.get("result_type")) for s in want.get("server_calls", [])
    ]
    if servers != wanted_servers:
        problems.append(f"response {number}: server calls {servers}, expected {wanted_servers}")
    if "content" in want and got.first.content != want["content"]:
        problems.append(f"response {number}: content {got.first.content!r}, expected {want['content']!r}")
    error = want.get("error")
    if error is None and got.error is not None:
        problems.append(f"response {number}: unexpected error {got.error!r}")
    elif error is not None and (got.error is None or error not in got.error):
        problems.append(f"response {number}: error {got.error!r}, expected one containing {error!r}")
    return problems


def run_case(case: Case) -> CaseResult:
    """Parse the case's input whole and streamed; compare both with what it expects."""
    try:
        return _run_case(case)
    except (ToolcallLabError, CaseFileError, KeyError, TypeError, AttributeError, ValueError) as exc:
        # an input the parser cannot read, or an expectation of the wrong shape: this case fails
        return CaseResult(
            case=case, passed=False, outcome=f"{type(exc).__name__}: {exc}", problems=(str(exc),)
        )


def _refused(case: Case, exc: ToolcallLabError) -> CaseResult:
    """A file the parser refuses as a whole: right only when the case expects exactly that, read
    whole and streamed alike."""
    raises = case.expect.get("raises") or {}
    outcome = f"refused: {type(exc).__name__}: {str(exc).removeprefix(str(case.path) + ': ')}"
    problems = []
    if case.expect.get("responses") or not raises:
        problems.append(f"{type(exc).__name__}: {exc}")
    elif type(exc).__name__ != raises.get("type") or raises.get("message", "") not in str(exc):
        problems.append(f"raised {type(exc).__name__}: {exc}; expected {raises}")
    else:
        try:
            list(iter_responses(case.path, errors="keep"))
            problems.append("read whole it is refused, streamed it is not")
        except ToolcallLabError as streamed:
            if type(streamed) is not type(exc):
                problems.append(f"streamed it raises {type(streamed).__name__}: {streamed}")
    return CaseResult(case=case, passed=not problems, outcome=outcome, problems=tuple(problems))


def _run_case(case: Case) -> CaseResult:
    problems: list[str] = []
    try:
        whole = read_recording(case.path).parse(errors="keep")
    except ToolcallLabError as exc:
        return _refused(case, exc)
    try:
        streamed = list(iter_responses(case.path, errors="keep"))
    except ToolcallLabError as exc:
        return CaseResult(
            case=case,
            passed=False,
            outcome=f"{type(exc).__name__}: {exc}",
            problems=(f"read whole it parses, streamed it raises {type(exc).__name__}: {exc}",),
        )
    if [r.to_dict() for r in whole] != [r.to_dict() for r in streamed]:
        problems.append("read whole and read streamed give different responses")
    wanted = case.expect.get("responses", [])
    if len(whole) != len(wanted):
        problems.append(f"{len(whole)} responses, expected {len(wanted)}")
    for number, (got, want) in enumerate(zip(whole, wanted, strict=False)):
        problems.extend(_check_response(number, got, want))
    raises = case.expect.get("raises")
    if raises is not None:
        try:
            read_recording(case.path).parse()
            problems.append(f"parse() did not raise {raises['type']}")
        except ToolcallLabError as exc:
            if type(exc).__name__ != raises["type"] or raises.get("message", "") not in str(exc):
                problems.append(f"parse() raised {type(exc).__name__}: {exc}; expected {raises}")
            elif not exc.partial_responses and whole:  # type: ignore[attr-defined]
                problems.append("the error does not carry the responses read before it")
    return CaseResult(case=case, passed=not problems, outcome=_summary(whole), problems=tuple(problems))


def _stem(path: Path) -> str | None:
    """The case name an input file would have (``name`` of ``name.chunks.jsonl``), None when the file
    is not an input (an ``.expect.json``, a script, a README)."""
    name = path.name
    if name.endswith(EXPECT):
        return None
    suffix = next((s for s in (".chunks.jsonl", *_INPUTS) if name.endswith(s)), None)
    return None if suffix is None else name[: -len(suffix)]


def unpaired_inputs(root: str | Path | None = None) -> list[Path]:
    """Input files of the corpus with no ``.expect.json`` beside them: not cases until they get one."""
    base, specs = _specs(root)
    stems = {(spec.parent, spec.name[: -len(EXPECT)]) for spec in specs}
    return sorted(
        path
        for path in base.rglob("*")
        if path.is_file() and (stem := _stem(path)) is not None and (path.parent, stem) not in stems
    )


def run_corpus(root: str | Path | None = None) -> list[CaseResult]:
    """Run every case of the corpus. An unusable case file, or an input file without its
    ``.expect.json``, is a failed case that says why; the others still run."""
    base, specs = _specs(root)
    results = []
    for path in unpaired_inputs(base):
        name = str(path.relative_to(base))
        lonely = Case(
            name=name,
            path=path,
            quirk="(input without .expect.json)",
            category="?",
            provider="?",
            models="",
            expect={},
        )
        stem = _stem(path)
        results.append(
            CaseResult(
                case=lonely,
                passed=False,
                outcome="not a case: no .expect.json",
                problems=(
                    f"{path}: an input file with no {stem}{EXPECT} beside it; add one (see "
                    "tests/conformance/README.md) or remove the file",
                ),
            )
        )
    for spec in specs:
        try:
            case = load_case(spec, base)
        except CaseFileError as exc:
            name = str(spec.relative_to(base))[: -len(EXPECT)]
            broken = Case(
                name=name,
                path=spec,
                quirk="(unusable case file)",
                category="?",
                provider="?",
                models="",
                expect={},
            )
            results.append(
                CaseResult(case=broken, passed=False, outcome="unusable case file", problems=(str(exc),))
            )
            continue
        results.append(run_case(case))
    return results


def quirk_table(results: Iterable[CaseResult], *, width: int = 48) -> str:
    """A plain-text table: one row per quirk, grouped by category, with the provider it models and
    what the parser gives."""
    rows = [r.row() for r in results]
    columns = ["category", "quirk", "provider", "result", "parser gives"]
    limits = {"quirk": width, "parser gives": width + 12, "provider": 28}

    def cell(row: dict[str, str], col: str) -> str:
        text = row[col]
        limit = limits.get(col)
        return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"

    widths = {c: max([len(c)] + [len(cell(r, c)) for r in rows]) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns), "  ".join("-" * widths[c] for c in columns)]
    for row in sorted(rows, key=lambda r: (r["category"], r["quirk"])):
        lines.append("  ".join(cell(row, c).ljust(widths[c]) for c in columns))
    passed = sum(r["result"] == "pass" for r in rows)
    lines.append(f"\n{passed}/{len(rows)} cases pass")
    return "\n".join(lines)

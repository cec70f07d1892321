"""BFCL parallel / parallel_multiple questions -> scripted one-batch traces.

BFCL holds questions and the calls a correct answer makes, not model runs: each trace is the question,
one response carrying the calls of the first acceptable answer (each parameter's first acceptable
value; an optional parameter whose first value is ``""`` is left out), and a closing round. Its
origin is ``scripted``: the calls are the dataset's expected answer, not a model's. BFCL has no call
ids (the ids are ``fallback``), no tool outputs (every call's status is ``not_recorded``) and no timings
(model `MODEL_S` and tools `TOOL_S`, both ``placeholder``). Dotted function names become ``_``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    MODEL_PLACEHOLDER,
    MODEL_S,
    TOOL_PLACEHOLDER,
    TOOL_S,
    ImportResult,
    Issue,
    Result,
    Segment,
    Turn,
    build_result,
    call_entry,
    completion,
    safe_tool_name,
    slugify,
)
from toolcall_lab.importers._files import import_folder, json_error, not_empty, read_text, wrong_kind
from toolcall_lab.importers._report import SourceError
from toolcall_lab.records import Timing


def _schema(fn: dict[str, Any]) -> dict[str, Any]:
    params = json.loads(json.dumps(fn.get("parameters") or {}).replace('"type": "dict"', '"type": "object"'))
    return {
        "type": "function",
        "function": {
            "name": safe_tool_name(fn["name"]),
            "description": fn.get("description", ""),
            "parameters": params,
        },
    }


def _jsonl(path: Path, issues: list[Issue], cut: list[int] | None = None) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) per line. A line that is not JSON fails the file, unless `cut` is given
    (the answers file): then it costs only itself, its number added to `cut`."""
    text = read_text(path, issues)
    not_empty(path, text, "BFCL")
    out: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            if cut is None:
                raise SourceError(
                    f"{path}: line {number} is not valid JSON ({json_error(exc, with_line=False)})"
                ) from None
            cut.append(number)
            issues.append(
                Issue(
                    kind="failed",
                    where=f"{path.name} line {number}",
                    what=f"not valid JSON ({json_error(exc, with_line=False)}): the answer it held is not "
                    "read; its question is not imported",
                    unreadable=True,
                )
            )
            continue
        if isinstance(doc, dict):
            out.append((number, doc))
    if cut and not out:
        raise SourceError(
            f"{path}: no line is valid JSON (line {cut[0]} is the first): nothing of it is read"
        )
    return out


def _fits(answer: dict[str, Any], question: dict[str, Any]) -> bool:
    """Every call of `answer` names a function `question` offers."""
    offered = {f.get("name") for f in question.get("function") or [] if isinstance(f, dict)}
    truth = answer.get("ground_truth") or []
    return bool(truth) and all(isinstance(e, dict) and set(e) <= offered for e in truth)


def _answers_of(
    qs: list[tuple[int, dict[str, Any]]],
    answers: list[tuple[int, dict[str, Any]]],
    qname: str,
    aname: str,
    issues: list[Issue],
) -> tuple[dict[int, dict[str, Any] | None], int]:
    """Each question's answer (by its position in `qs`) by the strongest key, and how many calls the
    answers no question took hold. The key is the id when one question and one answer hold it; for
    questions sharing an id (or an id several answers hold), the one answer among those with that id
    and those whose id no question holds whose calls name the question's functions (DAMAGED); else
    none (reported, never another question's calls). An answer no question took is reported."""
    q_ids: dict[Any, list[int]] = {}
    for k, (_, q) in enumerate(qs):
        q_ids.setdefault(q.get("id"), []).append(k)
    a_ids: dict[Any, list[int]] = {}
    for k, (_, a) in enumerate(answers):
        a_ids.setdefault(a.get("id"), []).append(k)
    loose = [k for k, (_, a) in enumerate(answers) if a.get("id") not in q_ids]
    out: dict[int, dict[str, Any] | None] = {}
    used: set[int] = set()
    for k, (_, q) in enumerate(qs):
        mine = a_ids.get(q.get("id"), [])
        if len(q_ids.get(q.get("id"), [])) == 1 and len(mine) <= 1:
            out[k] = answers[mine[0]][1] if mine else None
            used.update(mine)
    fits: dict[int, list[int]] = {}
    for k, (_, q) in enumerate(qs):
        if k not in out:
            pool = [j for j in [*a_ids.get(q.get("id"), []), *loose] if j not in used]
            fits[k] = [j for j in pool if _fits(answers[j][1], q)]
    claimed: dict[int, int] = {}
    for fit in fits.values():
        for j in fit:
            claimed[j] = claimed.get(j, 0) + 1
    for k, (number, q) in enumerate(qs):
        if k in out:
            continue
        qid = q.get("id")
        fit = fits[k]
        if len(fit) == 1 and claimed[fit[0]] > 1:
            fit = []  # the answer would fit another of these questions as well: not told apart
        held = len(a_ids.get(qid, []))
        shared = f"question id {qid!r} is held by {len(q_ids[qid])} questions and {held} answers"
        if len(fit) == 1:
            (j,) = fit
            out[k] = answers[j][1]
            used.add(j)
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{qname} line {number}",
                    what=f"{shared}: matched to the answer on line {answers[j][0]} of {aname} (id "
                    f"{answers[j][1].get('id')!r}), the only one it could be whose calls name this "
                    "question's functions",
                )
            )
            continue
        out[k] = None
        issues.append(
            Issue(
                kind="failed",
                where=f"{qname} line {number}",
                what=f"{shared}, and no one answer can be told to be its own (by the functions its calls "
                "name): not imported (never another question's calls)",
            )
        )
    left = 0
    for k, (number, a) in enumerate(answers):
        if k in used or (a.get("id") in q_ids and len(q_ids[a.get("id")]) == 1):
            continue
        n = len(a.get("ground_truth") or [])
        left += n
        issues.append(
            Issue(
                kind="failed",
                where=f"{aname} line {number}",
                what=f"an answer (id {a.get('id')!r}, {n} call(s)) no question is tied to: not imported",
                calls=n,
            )
        )
    return out, left


def _distinct(
    numbered: list[tuple[int, dict[str, Any]]], name: str, issues: list[Issue]
) -> list[tuple[int, dict[str, Any]]]:
    """The questions without identical repeats (DAMAGED, read once); different questions sharing an id
    are all kept (`_answers_of` tells their answers apart)."""
    seen: dict[str, int] = {}
    out = []
    for number, q in numbered:
        key = json.dumps(q, sort_keys=True)
        if key in seen:
            issues.append(
                Issue(
                    kind="damaged",
                    where=f"{name} line {number}",
                    what=f"repeats line {seen[key]} (question {q.get('id')!r}, identical): read once",
                )
            )
            continue
        seen[key] = number
        out.append((number, q))
    return out


def answers_path(questions: Path) -> Path:
    """Where BFCL keeps the answers of a question file: ``possible_answer_<name>`` beside it."""
    return questions.parent / f"possible_answer_{questions.name}"


def import_bfcl(
    questions: str | Path, answers: str | Path | None = None, *, limit: int | None = None
) -> ImportResult:
    """BFCL parallel tasks -> one batch plus a closing round per question (calls from the answers).

    `questions` is a question file (its answers beside it as ``possible_answer_<name>``) or a folder
    of them; `limit` counts questions (per file), not traces."""
    qpath = Path(questions)
    if qpath.is_dir():
        return import_folder(
            "bfcl",
            qpath,
            (".json", ".jsonl"),
            lambda f: import_bfcl(f, limit=limit),
            companion=lambda f: f.name.startswith("possible_answer_"),
        )
    if qpath.name.startswith("possible_answer_") and answers is None:
        raise wrong_kind(
            qpath,
            "bfcl",
            "an answer file; give the question file beside it "
            f"({qpath.with_name(qpath.name.removeprefix('possible_answer_')).name})",
        )
    apath = Path(answers) if answers is not None else answers_path(qpath)
    issues: list[Issue] = []
    numbered = _jsonl(qpath, issues)
    if not any("question" in q and "function" in q for _, q in numbered):
        raise wrong_kind(
            qpath, "bfcl", "no line is a BFCL question (an object with 'question' and 'function')"
        )
    if not apath.is_file():
        raise SourceError(f"{qpath}: its answers are not beside it (expected {apath.name})")
    cut: list[int] = []
    answer_lines = _jsonl(apath, issues, cut)
    numbered = _distinct(numbered, qpath.name, issues)
    qs = [q for _, q in numbered]
    ans, loose_calls = _answers_of(numbered, answer_lines, qpath.name, apath.name, issues)
    segments: list[Segment] = []
    source_calls = loose_calls
    issues.append(
        Issue(
            kind="gap",
            where=qpath.name,
            what="BFCL holds expected calls, not runs: no call has a result (status not_recorded)",
        )
    )
    for n, q in enumerate(qs):
        if "id" not in q or "question" not in q or "function" not in q:
            issues.append(
                Issue(kind="failed", where=f"{qpath.name} item {n}", what="not a BFCL question: not imported")
            )
            continue
        truth = (ans.get(n) or {}).get("ground_truth") or []
        source_calls += len(truth)
        if limit is not None and n >= limit:
            issues.append(
                Issue(
                    kind="skipped",
                    where=f"question {q['id']}",
                    what=f"beyond limit={limit}",
                    calls=len(truth),
                )
            )
            continue
        if not truth:
            if cut and not any(i.where == f"{qpath.name} line {numbered[n][0]}" for i in issues):
                issues.append(
                    Issue(
                        kind="failed",
                        where=f"question {q['id']}",
                        what=f"no answer read in {apath.name} (line(s) {', '.join(map(str, cut))} of it "
                        "are not JSON; its answer is probably there): not imported",
                    )
                )
            elif ans.get(n) is None and not any(
                i.where == f"{qpath.name} line {numbered[n][0]}" for i in issues
            ):
                issues.append(
                    Issue(kind="gap", where=f"question {q['id']}", what=f"no answer in {apath.name}")
                )
            continue
        calls = []
        for entry in truth:
            ((name, params),) = entry.items()
            args = {k: v[0] for k, v in params.items() if v and v[0] != ""}
            calls.append(call_entry(None, safe_tool_name(name), json.dumps(args)))
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        segments.append(
            Segment(
                title=f"BFCL {q['id']}",
                slug=f"{slugify(qpath.stem)}__{slugify(q['id'])}",
                source=f"{qpath}#{q['id']}",
                initial=[m for turn in q["question"] for m in turn],
                tools=[_schema(f) for f in q["function"]],
                turns=[
                    Turn(
                        payloads=[completion(message, response_id=q["id"])],
                        latency_s=MODEL_S,
                        timing=MODEL_PLACEHOLDER,
                        results=[
                            Result.missing(
                                duration_s=TOOL_S,
                                timing=Timing(
                                    source="placeholder",
                                    note=f"BFCL has no tool outputs or timings: {TOOL_S} s assumed",
                                ),
                                listed=False,
                            )
                            for _ in calls
                        ],
                    )
                ],
                origin="scripted",
                provider="bfcl",
                notes=f"BFCL expected calls (first acceptable value of each parameter), not a model run; "
                f"ids are fallback ids; no tool outputs; model {MODEL_S} s and tools {TOOL_S} s are "
                f"placeholders; dotted names use '_'",
                status="incomplete",
                reason="dataset_has_no_final_answer",
            )
        )
    return build_result(
        "bfcl", str(qpath), segments, source_calls=source_calls, source_model_calls=0, issues=issues
    )


__all__ = ["TOOL_PLACEHOLDER", "answers_path", "import_bfcl"]

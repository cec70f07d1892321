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


def _jsonl(path: Path, issues: list[Issue]) -> list[dict[str, Any]]:
    text = read_text(path, issues)
    not_empty(path, text, "BFCL")
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SourceError(
                f"{path}: line {number} is not valid JSON ({json_error(exc, with_line=False)})"
            ) from None
        if isinstance(doc, dict):
            out.append(doc)
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
    qs = _jsonl(qpath, issues)
    if not any("question" in q and "function" in q for q in qs):
        raise wrong_kind(
            qpath, "bfcl", "no line is a BFCL question (an object with 'question' and 'function')"
        )
    if not apath.is_file():
        raise SourceError(f"{qpath}: its answers are not beside it (expected {apath.name})")
    ans = {a.get("id"): a for a in _jsonl(apath, issues)}
    segments: list[Segment] = []
    source_calls = 0
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
        truth = ans.get(q["id"], {}).get("ground_truth") or []
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
            issues.append(Issue(kind="gap", where=f"question {q['id']}", what=f"no answer in {apath.name}"))
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

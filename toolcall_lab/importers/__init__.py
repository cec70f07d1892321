"""Import where agent runs already live: one module per source, one registry for the command line.

Every importer returns an `ImportResult`: the traces (it is a sequence of `Trace`), a file name for
each, and an `ImportReport` counting the source's tool calls and model calls against the imported
ones, with every call that was skipped, missing from the source, or could not be represented, every
result the source does not hold (status ``not_recorded``) and every place the source is damaged.
Each module's docstring says where each of its numbers comes from; every number in a trace carries a
`timing` label (``recorded`` / ``reported`` / ``estimated`` / ``placeholder``) with a note, and
traces are placed on their source's timeline where it has one (`toolcall_lab.importers._build`).
A folder is imported file by file (`_files.import_folder`); `looks_like` names the kind of a file.

``toolcall-lab import KIND SOURCE --out DIR`` runs `import_source` (kinds in `KINDS`).
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolcall_lab.importers._build import (
    MODEL_S,
    TOOL_S,
    ImportBuildError,
    ImportReport,
    ImportResult,
    Issue,
    NotThisKind,
    Result,
    Segment,
    SourceError,
    Turn,
    build_result,
    chat_body,
    slugify,
)
from toolcall_lab.importers._files import READ_ERRORS, looks_like
from toolcall_lab.importers.bfcl import import_bfcl
from toolcall_lab.importers.claude_code import import_claude_code
from toolcall_lab.importers.inspect_logs import import_inspect
from toolcall_lab.importers.langfuse import import_langfuse
from toolcall_lab.importers.openhands import import_openhands
from toolcall_lab.importers.otlp import import_otlp
from toolcall_lab.importers.recordings import import_recording
from toolcall_lab.importers.swe_agent import import_swe_agent
from toolcall_lab.importers.tau_bench import import_tau_bench


@dataclass(frozen=True, slots=True, kw_only=True)
class Kind:
    """One importable source: its function, what SOURCE is, and the options it takes."""

    name: str
    function: Callable[..., ImportResult]
    source: str
    options: frozenset[str] = frozenset()


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            name="claude-code",
            function=import_claude_code,
            source="a Claude Code transcript (~/.claude/projects/*/*.jsonl) or a folder of them",
            options=frozenset({"include_no_calls"}),
        ),
        Kind(
            name="openhands",
            function=import_openhands,
            source="an OpenHands trajectory (.json) or evaluation output (.jsonl), or a folder",
        ),
        Kind(
            name="swe-agent", function=import_swe_agent, source="a SWE-agent .traj file or a folder of them"
        ),
        Kind(
            name="otlp",
            function=import_otlp,
            source="an OTLP JSON export (GenAI conventions or OpenInference), or a folder",
            options=frozenset({"include_no_calls"}),
        ),
        Kind(
            name="langfuse", function=import_langfuse, source="a Langfuse trace export {trace, observations}"
        ),
        Kind(
            name="inspect",
            function=import_inspect,
            source="an inspect_ai eval log (.eval or .json) or a folder",
        ),
        Kind(
            name="recording",
            function=import_recording,
            source="a recorded response or exchange list (.sse, .chunks.jsonl, .json, VCR cassette .yaml) "
            "or a folder",
            options=frozenset({"include_no_calls"}),
        ),
        Kind(
            name="tau-bench",
            function=import_tau_bench,
            source="tau-bench trajectories (a JSON list of {task_id, traj, ...}) or a folder of them",
            options=frozenset({"limit", "include_no_calls"}),
        ),
        Kind(
            name="bfcl",
            function=import_bfcl,
            source="a BFCL question file (its possible_answer_<name> beside it) or a folder of them",
            options=frozenset({"limit"}),
        ),
    )
}


def _source_file(trace: Any) -> str:
    return str(trace.metadata.source).split("#", 1)[0]


def _other_source_there(result: ImportResult, out: Path) -> bool:
    """Whether `out` holds traces named like this import's (same file name before ``__``) that come
    from another source file: two different files with one name (``a/s.jsonl``, ``b/s.jsonl``)."""
    from toolcall_lab.exceptions import TraceError
    from toolcall_lab.trace_files import load

    mine = {_source_file(t) for t in result.traces}
    for stem in {slug.split("__", 1)[0] for slug in result.slugs}:
        for f in [out / f"{stem}.json", *out.glob(f"{glob.escape(stem)}__*.json")]:
            if not f.is_file():
                continue
            try:
                if _source_file(load(f)) not in mine:
                    return True
            except TraceError:
                continue
    return False


def write_result(
    result: ImportResult,
    folder: str | Path,
    *,
    removed: list[str] | None = None,
    said: list[str] | None = None,
) -> list[Path]:
    """Save every trace of `result` in `folder` as ``<name>.json``; never over another source's file.

    Names are unique within the import; a file already in `folder` is replaced only if it came from
    the same source (re-importing), otherwise the new trace gets a ``-2``, ``-3``... suffix. When
    `folder` holds traces of another source file with the same name (``a/s.jsonl`` then
    ``b/s.jsonl``), every name of this import starts with its source's folder (``b__s__...``), so
    the names never suggest one session; that is added to `said` (when given). Credentials are
    stripped on the way (`trace_files.save`); each removal is added to `removed` (when given) as
    ``file name: JSON path: what``.
    """
    from toolcall_lab.exceptions import TraceError
    from toolcall_lab.trace_files import load, save

    out = Path(folder)
    written: list[Path] = []
    slugs = list(result.slugs)
    if result.traces and _other_source_there(result, out):
        slugs = [
            f"{slugify(Path(_source_file(t)).parent.name) or 'source'}__{slug}"
            for t, slug in zip(result.traces, slugs, strict=True)
        ]
        if said is not None:
            said.append(
                f"{out} already holds traces of another source file with the same name: these are named "
                f"after their folder too ({slugs[0]}.json, ...)"
            )
    for trace, slug in zip(result.traces, slugs, strict=True):
        path, n = out / f"{slug}.json", 2
        while path.exists():
            try:
                same = load(path).metadata.source == trace.metadata.source
            except TraceError:
                same = False
            if same and path not in written:
                break
            path, n = out / f"{slug}-{n}.json", n + 1
        gone: list[str] = []
        written.append(save(trace, path, removed=gone))
        if removed is not None:
            removed += [f"{path.name}: {note}" for note in gone]
    return written


def import_source(kind: str, source: str | Path, **options: Any) -> ImportResult:
    """Import `source` as `kind` (see `KINDS`); options a kind does not take must be left unset."""
    from toolcall_lab.exceptions import UsageError

    if kind not in KINDS:
        raise UsageError(f"unknown import kind {kind!r}; choose one of {', '.join(KINDS)}")
    spec = KINDS[kind]
    given = {k: v for k, v in options.items() if v is not None and v is not False}
    unknown = set(given) - spec.options
    if unknown:
        raise UsageError(
            f"import {kind}: {', '.join(sorted(unknown))} does not apply "
            f"(it takes {', '.join(sorted(spec.options)) or 'no options'})"
        )
    limit = given.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise UsageError(
            f"import {kind}: limit={limit!r}: give a whole number >= 1 (how many input items to import), "
            "or leave it out to import all"
        )
    if not Path(source).exists():
        raise UsageError(f"import {kind}: {source} does not exist")
    try:
        return spec.function(source, **given)
    except READ_ERRORS as exc:
        raise SourceError(f"{source}: not a readable {kind} source ({type(exc).__name__}: {exc})") from exc


__all__ = [
    "KINDS",
    "MODEL_S",
    "READ_ERRORS",
    "TOOL_S",
    "ImportBuildError",
    "ImportReport",
    "ImportResult",
    "Issue",
    "Kind",
    "NotThisKind",
    "Result",
    "Segment",
    "SourceError",
    "Turn",
    "build_result",
    "chat_body",
    "import_bfcl",
    "import_claude_code",
    "import_inspect",
    "import_langfuse",
    "import_openhands",
    "import_otlp",
    "import_recording",
    "import_source",
    "import_swe_agent",
    "import_tau_bench",
    "looks_like",
    "write_result",
]

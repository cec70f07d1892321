"""What an import read and wrote: the issues, the report, and the result (a sequence of traces)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, overload

from toolcall_lab.exceptions import ToolcallLabError
from toolcall_lab.trace import Trace


class SourceError(ToolcallLabError):
    """The source cannot be read as this kind (the message names the file, the place and the problem)."""


class NotThisKind(SourceError):
    """The file is empty or of another kind: nothing of this kind is in it (in a folder: skipped)."""


IssueKind = Literal["note", "skipped", "gap", "damaged", "failed"]
ISSUE_TITLES: dict[IssueKind, str] = {
    "note": "notes",
    "skipped": "skipped",
    "gap": "not in the source",
    "damaged": "DAMAGED SOURCE",
    "failed": "NOT REPRESENTED",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Issue:
    """Something of the source that is not in the traces as it stands there, and why.

    ``note``: how the import read something the source holds (a compacted conversation, a session
    resumed in another file, two sessions in one file): nothing is lost, the traces say so too;
    ``skipped``: left out on purpose (a limit, an option, a file of another kind); ``gap``: the
    source itself lacks it (a response body, a result the recording stops before); ``damaged``: the
    source contradicts itself (lines out of order or repeated, impossible timestamps, bytes that are
    not text, a result missing in the middle of a run): the message says what the import did, and
    numbers it could not trust are not labelled ``recorded``; ``failed``: present in the source but
    could not be represented. The command exits non-zero on ``damaged`` and ``failed``, and on a
    ``gap`` that holds calls of the source (`ImportReport.left_out`).
    """

    kind: IssueKind
    where: str
    what: str
    calls: int = 0
    """Tool calls of the source this issue accounts for (not imported)."""
    model_calls: int = 0
    unreadable: bool = False
    """A part of the source that could not be read at all (a line, a span): what it held beyond
    `calls` / `model_calls` is unknown, so it is not in the source counts either."""

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportReport:
    """What an import read and wrote: counts of the source against the traces, and every issue."""

    kind: str
    source: str
    source_calls: int
    imported_calls: int
    source_model_calls: int
    imported_model_calls: int
    traces: int
    issues: tuple[Issue, ...] = ()
    missing_results: int = 0
    """Imported calls whose result the source does not hold (status ``not_recorded``)."""

    @property
    def ok(self) -> bool:
        """Every call of the source is in a trace, or accounted for by a skipped/gap issue."""
        accounted = sum(i.calls for i in self.issues if i.kind != "failed")
        return not any(i.kind == "failed" for i in self.issues) and (
            self.imported_calls + accounted == self.source_calls
        )

    @property
    def left_out(self) -> list[Issue]:
        """Gaps that hold calls of the source the traces do not: a sub-agent transcript not found,
        calls its Task's result counts (or an unknown number of them). Not damage, not a choice (a
        `skipped` call is left out on purpose): calls not represented, so the command exits 1."""
        return [i for i in self.issues if i.kind == "gap" and (i.calls or i.unreadable)]

    @property
    def complete(self) -> bool:
        """`ok`, and every call of the source is in a trace unless skipped on purpose (`left_out`)."""
        return self.ok and not self.left_out

    @property
    def clean(self) -> bool:
        """`complete`, and nothing in the source was damaged (the command exits 0 only then)."""
        return self.complete and not any(i.kind == "damaged" for i in self.issues)

    def summary(self, limit: int | None = 20, full_list: str | None = None) -> str:
        """A few lines for the command line: at most `limit` issues of each kind (None: every one),
        with where the complete list is (`full_list`) when some were left out here."""
        unreadable = sum(i.unreadable for i in self.issues)
        beyond = f" (+ whatever {unreadable} unreadable part(s) held)" if unreadable else ""
        lines = [
            f"{self.kind} {self.source}: {self.traces} trace(s)",
            f"  tool calls:  {self.source_calls} in the source{beyond}, {self.imported_calls} imported"
            + (
                f" ({self.missing_results} without a result in the source: status not_recorded)"
                if self.missing_results
                else ""
            ),
            f"  model calls: {self.source_model_calls} in the source{beyond}, "
            f"{self.imported_model_calls} imported",
        ]
        kinds: tuple[IssueKind, ...] = ("note", "skipped", "gap", "damaged", "failed")
        for kind in kinds:
            items = [i for i in self.issues if i.kind == kind]
            if items:
                lines.append(f"  {ISSUE_TITLES[kind]} ({len(items)}):")
                shown = items if limit is None else items[:limit]
                lines += [f"    {i}" for i in shown]
                if len(items) > len(shown):
                    where = f" (every one is listed in {full_list})" if full_list else ""
                    lines.append(f"    ... and {len(items) - len(shown)} more{where}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ImportResult(Sequence[Trace]):
    """The traces of one import (a sequence of `Trace`), their file names, and the report."""

    traces: tuple[Trace, ...]
    slugs: tuple[str, ...]
    report: ImportReport

    @overload
    def __getitem__(self, index: int) -> Trace: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Trace]: ...
    def __getitem__(self, index: int | slice) -> Trace | Sequence[Trace]:
        return self.traces[index]

    def __len__(self) -> int:
        return len(self.traces)

    def __iter__(self) -> Iterator[Trace]:
        return iter(self.traces)

    def __repr__(self) -> str:
        r = self.report
        return (
            f"<ImportResult {r.kind}: {len(self.traces)} traces, {r.imported_calls}/{r.source_calls} "
            f"calls, {'ok' if r.ok else 'NOT OK'}>"
        )


def merge_results(kind: str, source: str, results: Sequence[ImportResult]) -> ImportResult:
    """One result for a folder imported file by file."""
    traces = tuple(t for r in results for t in r.traces)
    slugs = tuple(s for r in results for s in r.slugs)
    reports = [r.report for r in results]
    return ImportResult(
        traces=traces,
        slugs=slugs,
        report=ImportReport(
            kind=kind,
            source=source,
            source_calls=sum(r.source_calls for r in reports),
            imported_calls=sum(r.imported_calls for r in reports),
            source_model_calls=sum(r.source_model_calls for r in reports),
            imported_model_calls=sum(r.imported_model_calls for r in reports),
            traces=len(traces),
            issues=tuple(i for r in reports for i in r.issues),
            missing_results=sum(r.missing_results for r in reports),
        ),
    )

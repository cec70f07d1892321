"""The findings collector every reader shares: a finding with its kind's severity, and the cap per kind
(the first `FINDINGS_PER_KIND` listed, the rest counted), so memory does not grow with bad chunks."""

from __future__ import annotations

from collections.abc import Iterator

from toolcall_lab.finding_kinds import FINDING_KINDS
from toolcall_lab.messages import Finding, FindingKind


def finding(
    kind: FindingKind,
    message: str,
    *,
    chunk_index: int | None = None,
    choice_index: int | None = None,
    call_index: int | None = None,
    tool_call_id: str | None = None,
) -> Finding:
    """A finding whose severity is the one `toolcall_lab.finding_kinds` gives its kind."""
    return Finding(
        kind=kind,
        message=message,
        severity=FINDING_KINDS[kind].severity,
        chunk_index=chunk_index,
        choice_index=choice_index,
        call_index=call_index,
        tool_call_id=tool_call_id,
    )


FINDINGS_PER_KIND = 20
"""Findings of one kind listed one by one per response (and per stream for framing); more are
counted in one summary finding, so memory does not grow with the number of bad chunks."""


class FindingLimit:
    """The cap on findings: the first `FINDINGS_PER_KIND` of each kind pass, the rest are counted
    and reported once by `summary`. Used by the framing readers, the stream reader and (through
    `StreamAccumulator.note` and `capped`) every accumulator and body parser."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def __call__(self, note: Finding) -> Finding | None:
        seen = self.counts.get(note.kind, 0) + 1
        self.counts[note.kind] = seen
        return note if seen <= FINDINGS_PER_KIND else None

    def summary(self) -> Iterator[Finding]:
        for kind, seen in self.counts.items():
            if seen > FINDINGS_PER_KIND:
                yield _more(kind, seen - FINDINGS_PER_KIND)


def _more(kind: str, more: int) -> Finding:
    return finding(
        kind,  # type: ignore[arg-type]
        f"{more} more finding(s) like the {FINDINGS_PER_KIND} above ({kind}), not listed one by one",
    )


def capped(findings: list[Finding], limit: FindingLimit | None = None) -> list[Finding]:
    """A response's findings with at most `FINDINGS_PER_KIND` of each kind, then one summary per
    kind saying how many more there were (also those `limit` already held back while streaming).
    Free for the usual response (a few findings, nothing held back)."""
    if limit is None and len(findings) <= FINDINGS_PER_KIND:
        return findings
    counts: dict[str, int] = {}
    out: list[Finding] = []
    for note in findings:
        seen = counts.get(note.kind, 0) + 1
        counts[note.kind] = seen
        if seen <= FINDINGS_PER_KIND:
            out.append(note)
    extra = {kind: seen - FINDINGS_PER_KIND for kind, seen in counts.items() if seen > FINDINGS_PER_KIND}
    if limit is not None:
        for kind, seen in limit.counts.items():
            if seen > FINDINGS_PER_KIND:
                extra[kind] = extra.get(kind, 0) + seen - FINDINGS_PER_KIND
    if not extra:
        return findings
    out.extend(_more(kind, more) for kind, more in extra.items())
    return out

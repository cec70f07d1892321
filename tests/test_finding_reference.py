"""The finding-kind reference is complete, matches the code, and the README carries it verbatim."""

from __future__ import annotations

import re
from typing import get_args

from tests.conftest import REPO
from toolcall_lab.conformance import load_cases
from toolcall_lab.finding_kinds import FINDING_KINDS, reference_markdown
from toolcall_lab.formats import read_recording
from toolcall_lab.messages import FindingKind


def test_registry_and_literal_name_the_same_kinds() -> None:
    assert list(get_args(FindingKind)) == list(FINDING_KINDS)


def test_every_kind_the_code_reports_is_in_the_reference() -> None:
    used: set[str] = set()
    for path in (REPO / "toolcall_lab").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        used |= set(re.findall(r'(?:finding|note)\(\s*"([a-z_0-9]+)"', text))
        used |= set(re.findall(r'Finding\(\s*kind="([a-z_0-9]+)"', text))
    assert len(used) >= 30 and used <= set(FINDING_KINDS), used - set(FINDING_KINDS)


def test_findings_carry_the_severity_of_their_kind() -> None:
    seen = set()
    for case in load_cases(REPO / "tests" / "conformance"):
        if "responses" not in case.expect:  # a file refused as a whole (a format not read)
            continue
        for response in read_recording(case.path).parse(errors="keep"):
            for finding in response.findings:
                assert finding.severity == FINDING_KINDS[finding.kind].severity, finding
                seen.add(finding.kind)
    assert len(seen) >= 20  # the corpus exercises most kinds


def test_readme_holds_the_generated_reference() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert reference_markdown() in readme, (
        "README finding table is stale: paste `toolcall-lab findings --markdown`"
    )

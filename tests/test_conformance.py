"""The conformance corpus: every quirk case parses to what it expects, whole and streamed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from toolcall_lab.conformance import load_cases, quirk_table, run_case, run_corpus

CORPUS = REPO / "tests" / "conformance"
CASES = load_cases(CORPUS)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_parses_to_what_it_expects(case) -> None:
    result = run_case(case)
    assert result.passed, result.problems


def test_every_category_of_the_issue_has_cases() -> None:
    categories = {c.category for c in CASES}
    assert categories >= {
        "sse-framing",
        "json-text",
        "provider-errors",
        "chat-completions",
        "anthropic",
        "responses",
        "cassettes",
    }
    assert all(c.models.strip() and c.provider.strip() for c in CASES)


def test_committed_files_are_what_the_generator_writes(tmp_path: Path) -> None:
    sys.path.insert(0, str(CORPUS))
    try:
        import make_cases
    finally:
        sys.path.remove(str(CORPUS))
    written = make_cases.write(tmp_path)
    for path in written:
        committed = CORPUS / path.relative_to(tmp_path)
        assert committed.read_bytes() == path.read_bytes(), f"{committed} differs from make_cases.py's output"


def test_a_case_that_is_not_met_fails(tmp_path: Path) -> None:
    """The runner can fail: a case whose expectation is wrong is reported with the difference."""
    source = CORPUS / "chat" / "name_split_across_deltas.sse"
    (tmp_path / "x.sse").write_bytes(source.read_bytes())
    (tmp_path / "x.expect.json").write_text(
        '{"quirk": "q", "category": "c", "provider": "p", "models": "m", "expect": {"responses": '
        '[{"calls": [{"id": "call_n1", "name": "get_wea", "arguments": "{}"}]}]}}'
    )
    (result,) = run_corpus(tmp_path)
    assert not result.passed
    assert any("name 'get_weather', expected 'get_wea'" in p for p in result.problems)
    assert "FAIL" in quirk_table([result])


def test_cli_prints_the_table() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "conformance", str(CORPUS)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert f"{len(CASES)}/{len(CASES)} cases pass" in out.stdout
    assert "llama.cpp" in out.stdout and "provider" in out.stdout.splitlines()[0]

"""Dependency evidence checked against hand-labelled pairs of rounds from real recordings.

Each label below was made by reading the two rounds in the source file (not the classifier's output);
the line of reasoning says what the later round took from the earlier one, or why it took nothing.
"""

from __future__ import annotations

from functools import cache

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab.analysis import missed_parallelism
from toolcall_lab.dependencies import dependency_evidence, normalise
from toolcall_lab.importers import (
    import_claude_code,
    import_inspect,
    import_openhands,
    import_recording,
    import_swe_agent,
    import_tau_bench,
)
from toolcall_lab.scenarios import SCENARIOS


@cache
def source(name: str):  # one import per file for the whole module
    loaders = {
        "agent3": lambda: import_recording(
            REALDATA / "pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2.cassette.yaml"
        ),
        "agent3_fragmented": lambda: import_recording(
            REALDATA
            / "pydantic-ai/openai_chat_stream_gpt-4o_agent_3rounds_parallel2_fragmented.cassette.yaml"
        ),
        "inspect": lambda: import_inspect(REALDATA / "inspect_ai"),
        "tau": lambda: import_tau_bench(
            REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json", limit=3
        ),
        "cc_v2": lambda: import_claude_code(
            REALDATA
            / "claude-reliability/claude-code_v2.1.14_opus-4-5_coverage-test-fix_14calls_parallel2x2.jsonl"
        ),
        "cc_sidechains": lambda: import_claude_code(
            REALDATA
            / "claude-code-viewer/claude-code_v1.0.108_sonnet-4_session-5c0375b4_20calls_sidechains_parallel3x2.jsonl"
        ),
        "swe": lambda: import_swe_agent(REALDATA / "SWE-agent"),
        "openhands": lambda: import_openhands(
            REALDATA
            / "OpenHands/openhands_codeact_llama-4-maverick_multi-swe-bench_3episodes_response_latencies.jsonl"
        ),
    }
    return loaders[name]()


def pair(name: str, title_end: str, earlier: int, later: int):
    (trace,) = [t for t in source(name) if t.metadata.title.endswith(title_end)]
    (found,) = [p for p in dependency_evidence(trace) if (p.earlier, p.later) == (earlier, later)]
    return found


# (source, trace title ends with, earlier round, later round, label, reasoning)
# fmt: off
LABELS = [
    ("agent3", "parallel2.cassette.yaml", 0, 1, "dependent",
     "get_weather(city='Mexico City') asks for the capital of the country get_country returned ('Mexico')"),
    ("agent3", "parallel2.cassette.yaml", 1, 2, "dependent",
     "final_result's answers quote the weather get_weather returned ('sunny')"),
    ("agent3_fragmented", "fragmented.cassette.yaml", 0, 1, "dependent",
     "get_weather(city='Mexico City') again builds on get_country's 'Mexico'"),
    ("inspect", "sample 1 epoch 1", 0, 1, "dependent",
     "web_browser_click(element_id=151) clicks a link id listed in the page web_browser_go returned"),
    ("inspect", "sample 1 epoch 1", 2, 3, "dependent",
     "element 903 is a link of the page the previous click opened"),
    ("tau", "task 2 trial 0 turn 3", 0, 1, "dependent",
     "get_reservation_details(JG7FMM): the id is one of the reservations get_user_details listed"),
    ("tau", "task 2 trial 0 turn 3", 1, 2, "likely_independent",
     "LQ940Q comes from round 0's reservation list, not from JG7FMM's details: one batch could have "
     "fetched all three reservations"),
    ("tau", "task 2 trial 0 turn 3", 2, 3, "likely_independent",
     "2FBBAH, likewise from round 0's list; nothing of LQ940Q's details is used"),
    ("cc_v2", "main turn 1", 0, 1, "dependent",
     "both Read calls open files the Glob listed"),
    ("cc_v2", "main turn 3", 1, 2, "dependent",
     "the Edit's old_string is text of the .gitignore the Read returned"),
    ("cc_sidechains", "main turn 1", 2, 3, "dependent",
     "the first Task call failed input validation; round 3 calls Task again (a retry)"),
    ("swe", "function_calling_11steps_execution_time.traj", 4, 5, "dependent",
     "open(src/marshmallow/fields.py) opens the file find_file found"),
    ("swe", "function_calling_11steps_execution_time.traj", 5, 6, "dependent",
     "the edit's search text is the line open displayed"),
    ("openhands", "ponylang__ponyc-4595 part 1", 1, 2, "dependent",
     "ls of src/libponyc, a directory the ls of src listed"),
    ("openhands", "ponylang__ponyc-4595 part 1", 7, 8, "dependent",
     "the model views parser.c after grep reported 'DEF(pattern);' at line 666, and says so"),
]

# Pairs whose dependency is real but the evidence found is weak: the classifier must say "unknown",
# never "likely_independent" (that would count them as missed parallelism).
WEAK = [
    ("openhands", "ponylang__ponyc-4595 part 1", 0, 1,
     "ls of .../src after the listing of the repository showed a 'src' directory: a 3-letter word"),
    ("swe", "function_calling_11steps_execution_time.traj", 0, 1,
     "insert writes into reproduce.py, the file create made: the model's text says 'Now let's paste'"),
]


@needs_realdata
@pytest.mark.parametrize(("name", "title", "earlier", "later", "label", "why"), LABELS, ids=[f"{x[0]}-{x[2]}-{x[3]}" for x in LABELS])
def test_hand_labelled_pairs(name, title, earlier, later, label, why) -> None:
    found = pair(name, title, earlier, later)
    assert found.classification == label, f"{why}\nevidence: {found.summary}"
    if label == "dependent":
        assert any(e.strong for e in found.evidence) and found.summary


@needs_realdata
@pytest.mark.parametrize(("name", "title", "earlier", "later", "why"), WEAK, ids=[f"{x[0]}-{x[2]}-{x[3]}" for x in WEAK])
def test_weak_evidence_is_unknown_never_independent(name, title, earlier, later, why) -> None:
    found = pair(name, title, earlier, later)
    assert found.classification == "unknown", why
    assert found.evidence and not any(e.strong for e in found.evidence)


@needs_realdata
def test_the_gpt4o_agent_run_is_not_reported_as_mergeable() -> None:
    """The old 3-character verbatim check missed "Mexico" -> "Mexico City" and called this run mergeable."""
    (trace,) = source("agent3")
    assert missed_parallelism(trace) == []


@needs_realdata
def test_missed_parallelism_counts_only_likely_independent_rounds() -> None:
    (trace,) = [t for t in source("tau") if t.metadata.title.endswith("task 2 trial 0 turn 3")]
    (group,) = missed_parallelism(trace)
    assert (group.first_round, group.last_round) == (1, 3)  # the three look-ups, not the user lookup
    rounds = trace.rounds
    slowest = [max(e.duration_s for e in rounds[k].executions) for k in (1, 2, 3)]
    expected = rounds[2].model_call.latency_s + rounds[3].model_call.latency_s + sum(slowest) - max(slowest)
    assert group.saved_upper_bound_s == pytest.approx(expected)


@needs_realdata
def test_results_not_recorded_make_pairs_unknown() -> None:
    """Four Responses streams of one run, without the requests between them: the calculator's results
    are not in the file, so whether step 2 used step 1's result cannot be checked."""
    (trace,) = import_recording(
        REALDATA / "vercel-ai/openai_responses_gpt-5.1-codex-max_stream_4steps_3_function_calls.chunks.jsonl"
    )
    pairs = dependency_evidence(trace)
    assert [(p.earlier, p.later) for p in pairs] == [(0, 1), (0, 2), (1, 2)]
    assert all(p.classification == "unknown" and "not recorded" in p.missing[0] for p in pairs)
    assert missed_parallelism(trace) == []


def test_scripted_scenarios() -> None:
    """The design scenarios: one independent pair, two data dependencies."""
    traces = {name: s.record() for name, s in SCENARIOS.items()}
    (p,) = dependency_evidence(traces["course_search_two_rounds"])
    assert p.classification == "likely_independent" and p.summary == "nothing found"
    (p,) = dependency_evidence(traces["search_then_read"])
    assert p.classification == "dependent" and p.evidence[0].kind in ("exact", "contained")
    (p,) = dependency_evidence(traces["two_tool_rounds"])
    assert p.classification == "dependent"


def test_normalise() -> None:
    assert normalise("  Mexico   City. ") == "mexico city"

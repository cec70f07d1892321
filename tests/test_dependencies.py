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
        "tau_all": lambda: import_tau_bench(
            REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json"
        ),
        "cc_v2": lambda: import_claude_code(
            REALDATA
            / "claude-reliability/claude-code_v2.1.14_opus-4-5_coverage-test-fix_14calls_parallel2x2.jsonl"
        ),
        "cc_sidechains": lambda: import_claude_code(
            REALDATA
            / "claude-code-viewer/claude-code_v1.0.108_sonnet-4_session-5c0375b4_20calls_sidechains_parallel3x2.jsonl"
        ),
        "cc_big": lambda: import_claude_code(
            REALDATA
            / "claude-code-viewer/claude-code_v1.0.98_sonnet-4_session-fe5e1c67_170calls_sidechains_parallel2+3+2.jsonl"
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
    ("openhands", "ponylang__ponyc-4595", 1, 2, "dependent",
     "ls of src/libponyc, a directory the ls of src listed"),
    ("openhands", "ponylang__ponyc-4595", 7, 8, "dependent",
     "the model views parser.c after grep reported 'DEF(pattern);' at line 666, and says so"),
    ("openhands", "ponylang__ponyc-4595", 0, 1, "dependent",
     "ls of .../src after the listing showed a 'src' directory; the model's text names it (`src`)"),
    ("openhands", "ponylang__ponyc-4595", 5, 6, "dependent",
     "grep printed '29:DECL(pattern);'; the model writes 'The `pattern` rule is declared on line 29' and "
     "views the file there: the text quotes the result"),
    ("openhands", "ponylang__ponyc-4595", 13, 14, "dependent",
     "a control dependency: the edit of parser.c, then a shell command; a command runs on the tree the "
     "edit changed, so the two cannot run as one batch"),
    ("cc_v2", "main turn 3", 2, 3, "dependent",
     "a control dependency: Edit .gitignore, then `git status` described as 'Verify untracked files are "
     "now ignored': it checks what the edit did"),
    ("swe", "function_calling_11steps_execution_time.traj", 9, 10, "dependent",
     "a control dependency: `rm reproduce.py`, then submit: the submission is the tree after the rm"),
    ("cc_big", "(Setup Next.js project) turn 1", 7, 9, "dependent",
     "a control dependency: Bash `cd /path/to/Demo/todo-app`, then Bash `pnpm add lucide-react`: Claude "
     "Code's Bash keeps its working directory, so in one batch pnpm add would run in the wrong folder"),
    ("cc_big", "(Setup Next.js project) turn 1", 7, 8, "likely_independent",
     "TodoWrite only updates the agent's own todo list: it neither reads the cd's output nor runs in its shell"),
    # sixth pass (issue 13): labelled by reading the rounds and the user's request before them
    ("tau_all", "trajectory 10 task 10 trial 0 turn 17", 1, 2, "likely_independent",
     "the user asked for 'any West Coast' city: JFK->SFO then JFK->LAX are two searches the model planned "
     "from the request; the 'JFK' in round 1's result is only its own origin echoed back"),
    ("tau_all", "trajectory 10 task 10 trial 0 turn 17", 2, 3, "likely_independent",
     "JFK->LAX found nothing, JFK->SEA is the next city of the same plan; the shared date is the user's, "
     "and two searches read the same thing in either order"),
    ("tau_all", "trajectory 33 task 33 trial 0 turn 21", 1, 7, "likely_independent",
     "EWR->MSP and EWR->LAX are legs of reservations listed before the turn: one batch could have "
     "searched all legs"),
    ("tau_all", "trajectory 196 task 46 trial 3 turn 25", 0, 1, "dependent",
     "the direct search SFO->JFK on May 17 returned []; the model then searches one-stop flights for the "
     "same route and date: a fallback only because the first found nothing"),
    ("tau_all", "trajectory 37 task 37 trial 0 turn 5", 0, 5, "dependent",
     "send_certificate issues a certificate to the user whose details round 0 read (and checked): a write "
     "after a read of the same record keeps its order"),
    ("cc_big", "(Create main page integration) turn 1", 39, 41, "dependent",
     "BashOutput read the dev server's output, then KillBash killed that shell (bash_2): in one batch the "
     "read could come after the kill"),
]

# Pairs whose dependency is real but the evidence found is weak: the classifier must say "unknown",
# never "likely_independent" (that would count them as missed parallelism).
WEAK = [
    ("swe", "function_calling_11steps_execution_time.traj", 0, 1,
     "insert writes into reproduce.py, the file create made: the model's text says 'Now let's paste'"),
    ("openhands", "ponylang__ponyc-4593 (part 1)", 3, 4,
     "find src/libponyc found nothing, so the model widens the search to src: 'It seems that the `find` "
     "command didn't return any results' reacts to the empty result without quoting it"),
]
# fmt: on


@needs_realdata
@pytest.mark.parametrize(
    ("name", "title", "earlier", "later", "label", "why"),
    LABELS,
    ids=[f"{x[0]}-{x[2]}-{x[3]}" for x in LABELS],
)
def test_hand_labelled_pairs(name, title, earlier, later, label, why) -> None:
    found = pair(name, title, earlier, later)
    assert found.classification == label, f"{why}\nevidence: {found.summary}"
    if label == "dependent":
        assert any(e.strong for e in found.evidence) and found.summary


@needs_realdata
@pytest.mark.parametrize(
    ("name", "title", "earlier", "later", "why"), WEAK, ids=[f"{x[0]}-{x[2]}-{x[3]}" for x in WEAK]
)
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


def _scripted(steps, results, failing=frozenset()):
    """A scripted sequential run: `steps` are (text, ((tool, arguments),)) per round; `results` the
    text each tool returns (the tools in `failing` raise it instead: an error result)."""
    from toolcall_lab.loop import run_sync
    from toolcall_lab.models import ScriptedModel, ScriptedResponse
    from toolcall_lab.tools import Tool, ToolRegistry
    from toolcall_lab.trace import Trace, TraceMetadata

    tools = ToolRegistry()
    for name, text in results.items():

        def answer(_text: str = text, _fails: bool = name in failing, **_: object) -> str:
            if _fails:
                raise RuntimeError(_text)
            return _text

        tools.add(Tool(name=name, function=answer, parameters={"type": "object", "properties": {}}))
    model = ScriptedModel([ScriptedResponse(content=c, tool_calls=tc) for c, tc in steps] + ["done"])
    result = run_sync(model, tools, "q", mode="sequential")
    return Trace.from_run(result, TraceMetadata(title="t", origin="scripted"))


# (case, steps, tool results, class, evidence kind, why); the fresh-eyes tester's cases and their kin
# fmt: off
SCRIPTED = [
    ("write then run", [(None, (("write_file", {"path": "a.py", "text": "print(1)"}),)),
                        (None, (("run_cmd", {"cmd": "python3 main.py"}),))],
     {"write_file": "written", "run_cmd": "1"}, "dependent", "effect",
     "a command runs on the files the write changed, whatever its arguments say"),
    ("rm then submit", [(None, (("bash", {"command": "rm reproduce.py"}),)), (None, (("submit", {}),))],
     {"bash": "", "submit": "diff --git a/src/x.py"}, "dependent", "effect",
     "the submission is the tree after the rm"),
    ("edit then read it", [(None, (("edit_file", {"path": "src/app.py", "old": "a", "new": "b"}),)),
                           (None, (("read_file", {"path": "src/app.py"}),))],
     {"edit_file": "ok", "read_file": "b"}, "dependent", "effect", "the read sees the edit"),
    ("text quotes a code line", [(None, (("grep", {"pattern": "pattern"}),)),
                                 ("The grep found DECL(pattern) in parser.c", (("view", {"path": "/src/a.c"}),))],
     {"grep": "29:DECL(pattern);", "view": "..."}, "dependent", "text", "the model copies the result"),
    ("text names the line", [(None, (("grep", {"pattern": "DEF(foo)"}),)),
                             ("Foo is declared on line 29. Let's view the file.", (("view", {"path": "/src/a.c"}),))],
     {"grep": "29:DEF(foo);", "view": "..."}, "dependent", "text", "line 29 is the grep's line 29"),
    ("two reads", [(None, (("read_file", {"path": "a.txt"}),)), (None, (("read_file", {"path": "b.txt"}),))],
     {"read_file": "hello"}, "likely_independent", None, "b.txt is not in a.txt's text; reads change nothing"),
    ("independent look-ups", [(None, (("get_weather", {"city": "Paris"}),)), (None, (("get_stock", {"ticker": "AAPL"}),))],
     {"get_weather": "sunny 18C", "get_stock": "191.2"}, "likely_independent", None, "nothing shared"),
    ("cd then a command", [(None, (("Bash", {"command": "cd web"}),)), (None, (("Bash", {"command": "pnpm test"}),))],
     {"Bash": ""}, "dependent", "effect", "the shell keeps the directory the cd chose"),
    ("export then a command", [(None, (("bash", {"command": "export NODE_ENV=test"}),)),
                               (None, (("bash", {"command": "node app.js"}),))],
     {"bash": ""}, "dependent", "effect", "the shell keeps the environment the export set"),
    ("source then a command", [(None, (("bash", {"command": "source .venv/bin/activate"}),)),
                               (None, (("bash", {"command": "pytest -q"}),))],
     {"bash": ""}, "dependent", "effect", "pytest runs in the environment the activate script set"),
    ("install then a run", [(None, (("execute_bash", {"command": "pip install -e ."}),)),
                            (None, (("execute_bash", {"command": "python -m mypkg"}),))],
     {"execute_bash": "ok"}, "dependent", "effect", "the run uses what the install put in place"),
    ("a kernel keeps what a cell defined", [(None, (("execute_ipython_cell", {"code": "import pandas as pd\ndf = pd.read_csv('a.csv')"}),)),
                                             (None, (("execute_ipython_cell", {"code": "df.describe()"}),))],
     {"execute_ipython_cell": "ok"}, "dependent", "effect", "the second cell uses the df the first defined"),
    ("a grep for 'export'", [(None, (("Bash", {"command": "grep -rn 'export default' src"}),)),
                             (None, (("Bash", {"command": "ls public"}),))],
     {"Bash": "src/a.ts:1"}, "likely_independent", None, "export is inside the grep's argument: nothing changed"),
]
# fmt: on


@pytest.mark.parametrize(
    ("case", "steps", "results", "label", "kind", "why"), SCRIPTED, ids=[c[0] for c in SCRIPTED]
)
def test_scripted_control_and_text_dependencies(case, steps, results, label, kind, why) -> None:
    (p,) = dependency_evidence(_scripted(steps, results))
    assert p.classification == label, f"{why}\nevidence: {p.summary}"
    if kind is not None:
        assert any(e.kind == kind and e.strong for e in p.evidence), p.summary


def test_a_case_changed_match_is_normalised_not_exact() -> None:
    """The tester's 'case/punct' case: THE-ALPHA-DOC is in the result only as the-alpha-doc."""
    trace = _scripted(
        [(None, (("search", {"q": "paris"}),)), (None, (("fetch", {"doc": "  THE-ALPHA-DOC  "}),))],
        {"search": "Found: the-alpha-doc.", "fetch": "content"},
    )
    (p,) = dependency_evidence(trace)
    (e,) = [e for e in p.evidence if e.argument == "fetch.doc"]
    assert (e.kind, e.match) == ("normalised", "normalised") and "normalised match" not in e.describe()
    exact = _scripted(
        [(None, (("search", {"q": "paris"}),)), (None, (("fetch", {"doc": "the-alpha-doc"}),))],
        {"search": "Found: the-alpha-doc.", "fetch": "content"},
    )
    (p,) = dependency_evidence(exact)
    assert [(e.kind, e.match) for e in p.evidence if e.argument == "fetch.doc"] == [("exact", "exact")]


def test_control_dependencies_leave_the_todo_list_and_reads_alone() -> None:
    """Bookkeeping (a todo list) changes nothing another call could observe, and a read after a read
    is no control dependency: neither turns a pair dependent."""
    todo = _scripted(
        [(None, (("TodoWrite", {"todos": "x"}),)), (None, (("Bash", {"command": "ls"}),))],
        {"TodoWrite": "ok", "Bash": "a b"},
    )
    assert not any(e.kind == "effect" for p in dependency_evidence(todo) for e in p.evidence)
    looked = _scripted(
        [(None, (("Bash", {"command": "git status"}),)), (None, (("Bash", {"command": "ls"}),))],
        {"Bash": "clean"},
    )
    assert not any(e.kind == "effect" for p in dependency_evidence(looked) for e in p.evidence)


# --- issue 13, seventh pass (t13 findings 7 and 13) --------------------------------------------------


def test_a_fallback_after_a_failed_call_is_a_control_dependency() -> None:
    """t13 dep/gen.py: update_ticket failed ('ticket T-9 is locked'), then create_note: classified
    likely_independent and counted in missed parallelism. The model took another way because the
    call failed: in one batch that call would not have been made."""
    trace = _scripted(
        [
            (None, (("update_ticket", {"id": "T-9", "status": "closed"}), ("get_queue", {"team": "ops"}))),
            ("It is locked; I'll leave a note.", (("create_note", {"text": "please unlock"}),)),
        ],
        {"update_ticket": "ticket T-9 is locked", "get_queue": "3 open", "create_note": "noted"},
        failing={"update_ticket"},
    )
    (p,) = dependency_evidence(trace)
    assert p.classification == "dependent", p.summary
    assert any(e.kind == "retry" and e.strong and "after update_ticket failed" in e.value for e in p.evidence)
    assert missed_parallelism(trace) == []


@needs_realdata
def test_the_fallback_the_tester_found_in_a_real_sub_agent() -> None:
    """fe5e1c67, sub-agent oiKjzVGS rounds 34 -> 35: MultiEdit fails 'File has not been read yet';
    'Let me create a simplified hook in a new file:' + Write. It was the largest item (7.751 s) of
    notebook 04's missed-parallelism headline."""
    found = pair("cc_big", "(Create main page integration) turn 1", 34, 35)
    assert found.classification == "dependent"
    assert any(e.kind == "retry" and "MultiEdit failed" in e.value for e in found.evidence)


def test_a_common_word_of_a_result_is_weak_evidence() -> None:
    """t13: status 'completed' vs the result 'Delivery completed.' counted as an exact, strong match:
    a plain word of running text turns up anywhere."""
    trace = _scripted(
        [
            (None, (("deliver", {"order": "O-1"}),)),
            (None, (("set_status", {"order": "O-2", "status": "completed"}),)),
        ],
        {"deliver": "Delivery completed.", "set_status": "ok"},
    )
    (p,) = dependency_evidence(trace)
    words = [e for e in p.evidence if e.value == "completed"]
    assert words and not any(e.strong for e in words), p.summary
    assert p.classification != "dependent"


def test_the_harness_s_framing_is_not_evidence() -> None:
    """t13: the OpenHands GUI run's '.completed {' CSS line and the word 'completed' counted as
    strong evidence; both came from '[The command completed with exit code 0.]'."""
    trace = _scripted(
        [
            (None, (("execute_bash", {"command": "ls /workspace"}),)),
            (
                None,
                (
                    (
                        "str_replace_editor",
                        {
                            "command": "create",
                            "path": "/other/style.css",
                            "file_text": ".completed {\n  color: green;\n}",
                        },
                    ),
                ),
            ),
        ],
        {"execute_bash": "notes.txt\n[The command completed with exit code 0.]", "str_replace_editor": "ok"},
    )
    (p,) = dependency_evidence(trace)
    assert not any("complete" in e.value for e in p.evidence), p.summary


def test_a_plain_word_a_result_lists_on_its_own_stays_strong() -> None:
    """'src' in a directory listing is the listing's own entry, not vocabulary: the model naming it
    is a reference (the hand-labelled OpenHands pair 0 -> 1)."""
    trace = _scripted(
        [
            (None, (("bash", {"command": "ls -l /repo"}),)),
            ("The `src` directory holds the code.", (("bash", {"command": "ls -l /repo/src"}),)),
        ],
        {
            "bash": "total 8\ndrwxr-xr-x 2 root root 4096 Apr 30 08:32 src\n-rw-r--r-- 1 root root 10 Apr 30 08:32 x"
        },
    )
    (p,) = dependency_evidence(trace)
    assert p.classification == "dependent" and any(e.kind == "text" and e.strong for e in p.evidence)


def test_a_write_into_a_folder_an_earlier_call_made_is_ordered() -> None:
    """The OpenHands GUI run: `mkdir -p /workspace/todo-app`, then a create of a file in it. With the
    boilerplate gone, this control dependency is what keeps them apart; a `cd` alone changes no
    file, so a write after it is not ordered by it."""
    trace = _scripted(
        [
            (None, (("execute_bash", {"command": "mkdir -p /workspace/todo-app"}),)),
            (
                None,
                (
                    (
                        "str_replace_editor",
                        {
                            "command": "create",
                            "path": "/workspace/todo-app/index.html",
                            "file_text": "<html></html>",
                        },
                    ),
                ),
            ),
        ],
        {"execute_bash": "", "str_replace_editor": "File created"},
    )
    (p,) = dependency_evidence(trace)
    assert p.classification == "dependent" and any(e.kind == "effect" for e in p.evidence), p.summary
    cd = _scripted(
        [
            (None, (("Bash", {"command": "cd /workspace/todo-app"}),)),
            (None, (("Write", {"file_path": "/workspace/todo-app/a.ts", "content": "x"}),)),
        ],
        {"Bash": "", "Write": "ok"},
    )
    (p,) = dependency_evidence(cd)
    assert not any(e.kind == "effect" for e in p.evidence), p.summary


_SEEDED = """
from tests.test_dependencies import _scripted
from toolcall_lab.dependencies import dependency_evidence
trace = _scripted(
    [(None, (("search_flights", {"origin": "JFK"}),)),
     (None, (("think", {"thought": "Flight HAT252 from atl to jfk is available in economy"}),))],
    {"search_flights": '[{"flight": "HAT252", "origin": "atl", "status": "available"}]', "think": ""},
)
print([(p.classification, p.summary) for p in dependency_evidence(trace)])
"""


def test_the_evidence_does_not_depend_on_the_hash_seed() -> None:
    """The classes over the real data changed from run to run (adjacent dependent pairs 359 to 364):
    the first match a set yielded decided between a strong value ('hat252') and a weak one ('atl').
    The strongest match is taken, in a fixed order, in every process."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    seen = {
        subprocess.run(
            [sys.executable, "-c", _SEEDED],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in (0, 1, 2, 3, 4, 5)
    }
    assert len(seen) == 1 and "dependent" in next(iter(seen)), seen

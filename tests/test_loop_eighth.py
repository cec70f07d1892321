"""Issue 11, eighth check: what the fresh-eyes tester's final pass (report f11) found in the run loop.

Each finding is fixed as a class of problem, and each test here failed before its fix:

1. an abort takes effect the moment it is asked for, whichever strategy starts the calls and
   however (built-in loops, the Batch API, eager dispatch): no call or first hook starts after it,
   calls never started say so, and a replay of such a run reproduces it;
2. / 3. a second signal that gives up waiting: every call still running says so in its record
   under every strategy, and the outcome says what the second signal did (no more, no less);
4. the command line's signals while it starts and after it has finished: 130 / 143 and one line.

Virtual clock unless a test needs real signals or real threads; no wall-clock thresholds.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import REPO
from toolcall_lab import Hooks, ScriptedModel, ScriptedResponse, ToolRegistry, replay, run_sync
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import AbortHandle, run
from toolcall_lab.runs import RunResult
from toolcall_lab.strategies import Batch, strategy
from toolcall_lab.trace import Trace, TraceMetadata


@strategy("one_by_one_run")
async def one_by_one_run(batch: Batch) -> None:
    """A user strategy starting calls one after another with `Batch.run`."""
    for pos in range(len(batch.calls)):
        await batch.run(pos)


@strategy("one_by_one_sequential")
async def one_by_one_sequential(batch: Batch) -> None:
    """A user strategy running every call with `Batch.run_sequential`."""
    await batch.run_sequential()


@strategy("start_and_join_capped")
async def start_and_join_capped(batch: Batch) -> None:
    """A user strategy starting each call and joining it before the next (the Batch's tasks)."""
    for pos in range(len(batch.calls)):
        batch.start(pos)
        await batch.join()


ONE_AT_A_TIME = [
    "sequential",
    "serialized",
    "parallel[cap=1]",
    "eager[cap=1]",
    one_by_one_run,
    one_by_one_sequential,
    start_and_join_capped,
]


def name_of(mode: Any) -> str:
    return mode if isinstance(mode, str) else mode.name


def three_calls() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=(
                    ("work", {"s": 0.1, "k": 0}),
                    ("work", {"s": 0.3, "k": 1}),
                    ("work", {"s": 0.05, "k": 2}),
                )
            ),
            "done",
        ]
    )


def aborting_tools(entered: list[int], handle: list[AbortHandle], *, from_tool: bool) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    async def work(s: float, k: int) -> str:
        """Sleeps `s` seconds; call 0 aborts the run just before it returns (when asked to)."""
        entered.append(k)
        await asyncio.sleep(s)
        if k == 0 and from_tool:
            handle[0].abort("stop now")
        return "ok"

    return tools


def as_trace(result: RunResult) -> Trace:
    return Trace.from_run(result, TraceMetadata(title="f11", origin="scripted"))


@pytest.mark.parametrize("via", ["tool", "on_tool_complete", "approve_result"])
@pytest.mark.parametrize("mode", ONE_AT_A_TIME, ids=name_of)
def test_no_call_starts_after_an_abort_and_a_replay_keeps_what_finished(mode: Any, via: str) -> None:
    entered: list[int] = []
    handle = [AbortHandle()]

    def hook(*args: Any) -> None:
        if args[-1].index == 0:
            handle[0].abort("stop now")

    hooks = Hooks(**{via: hook}) if via != "tool" else None
    tools = aborting_tools(entered, handle, from_tool=via == "tool")
    result = run_virtual(run(three_calls(), tools, "go", mode=mode, abort=handle[0], hooks=hooks))
    assert entered == [0]  # call 1 never started: the abort came before its turn
    assert (result.status, result.reason) == ("aborted", "aborted")
    first, *rest = result.executions
    assert (first.status, first.result, first.ended_at) == ("ok", "ok", pytest.approx(0.1))
    for ex in rest:
        assert ex.status == "cancelled"
        assert ex.result == "Not executed: the run was aborted (stop now) before this call started.", (
            ex.result
        )
    again = replay(as_trace(result), mode)
    assert [(e.status, e.started_at, e.ended_at) for e in again.executions] == [
        (e.status, e.started_at, e.ended_at) for e in result.executions
    ]
    assert [e.result.split(" (")[0] for e in again.executions] == [
        e.result.split(" (")[0] for e in result.executions
    ]


@pytest.mark.parametrize("mode", ["parallel", "eager"])
def test_a_replay_of_an_abort_keeps_a_call_that_finished_at_that_instant(mode: str) -> None:
    entered: list[int] = []
    handle = [AbortHandle()]
    tools = aborting_tools(entered, handle, from_tool=True)
    result = run_virtual(run(three_calls(), tools, "go", mode=mode, abort=handle[0]))
    assert [e.status for e in result.executions] == ["ok", "cancelled", "ok"]
    again = replay(as_trace(result), mode)
    assert [(e.status, e.ended_at) for e in again.executions] == [
        (e.status, e.ended_at) for e in result.executions
    ]


@pytest.mark.parametrize("mode", ["sequential", "serialized", one_by_one_run], ids=name_of)
def test_an_abort_from_approve_call_asks_no_other_call_and_runs_none(mode: Any) -> None:
    asked: list[int] = []
    entered: list[int] = []
    handle = [AbortHandle()]

    def approve_call(call: Any) -> bool:
        asked.append(call.index)
        handle[0].abort("stop now")
        return True

    tools = aborting_tools(entered, handle, from_tool=False)
    result = run_virtual(
        run(three_calls(), tools, "go", mode=mode, abort=handle[0], hooks=Hooks(approve_call=approve_call))
    )
    assert asked == [0] and entered == []
    assert all(e.result.startswith("Not executed: the run was aborted (stop now)") for e in result.executions)


@pytest.mark.parametrize("mode", ["sequential", "serialized", "parallel[cap=1]"])
def test_a_sync_tool_after_an_abort_on_the_real_clock_is_never_entered(mode: str) -> None:
    entered: list[str] = []
    handle = AbortHandle()
    tools = ToolRegistry()

    @tools.register
    async def first() -> str:
        """Aborts the run, then returns."""
        entered.append("first")
        handle.abort("stop now")
        return "ok"

    @tools.register
    def blocking(n: int) -> str:
        """A sync tool (a worker thread)."""
        entered.append("blocking")
        return "done"

    model = ScriptedModel([ScriptedResponse(tool_calls=(("first", {}), ("blocking", {"n": 1}))), "done"])
    result = run_sync(model, tools, "go", mode=mode, abort=handle)
    assert entered == ["first"]
    first_ex, blocked = result.executions
    assert first_ex.status == "ok"
    assert blocked.result == "Not executed: the run was aborted (stop now) before this call started."


# --- 2. / 3. a second signal ---------------------------------------------------------------------


def signalling_tools(*, stops: bool) -> ToolRegistry:
    """`slow` sends the first Ctrl-C as it starts; cancelled, it sends the second one and then
    ignores every cancellation (`stops` False) or stops at once (True)."""
    tools = ToolRegistry()

    @tools.register
    async def quick() -> str:
        """Returns at once."""
        return "ok"

    @tools.register
    async def slow(n: int) -> str:
        """Sends the signals (a real Ctrl-C to this process, as a terminal would)."""
        signal.raise_signal(signal.SIGINT)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            signal.raise_signal(signal.SIGINT)
            if stops:
                raise
            while True:  # it does not stop
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    continue
        return "late"

    return tools


EVERY_MODE = [
    "sequential",
    "serialized",
    "parallel",
    "parallel[cap=1]",
    "eager",
    one_by_one_run,
    start_and_join_capped,
]


def interrupted(mode: Any, *, stops: bool) -> RunResult:
    model = ScriptedModel([ScriptedResponse(tool_calls=(("quick", {}), ("slow", {"n": 1}))), "done"])
    with pytest.raises(KeyboardInterrupt) as caught:
        run_sync(model, signalling_tools(stops=stops), "go", mode=mode)
    result: RunResult = caught.value.partial_result  # type: ignore[attr-defined]
    return result


@pytest.mark.parametrize("mode", EVERY_MODE, ids=name_of)
def test_a_second_signal_says_which_calls_had_not_stopped_under_every_strategy(mode: Any) -> None:
    result = interrupted(mode, stops=False)
    quick, slow = result.executions
    assert quick.status == "ok"
    assert slow.status == "cancelled"
    assert "it had not stopped when the run gave up waiting for it" in slow.result, slow.result
    assert "it may still be running" in slow.result
    assert result.error is not None
    assert (
        f"a second signal gave up waiting for calls that had not stopped ({slow.tool_call_id}" in result.error
    )


@pytest.mark.parametrize("mode", EVERY_MODE, ids=name_of)
def test_a_second_signal_after_every_call_stopped_claims_nothing_was_abandoned(mode: Any) -> None:
    result = interrupted(mode, stops=True)
    slow = result.executions[1]
    assert slow.status == "cancelled" and "had not stopped" not in slow.result
    assert result.error is not None
    assert "had not stopped" not in result.error, result.error
    assert "a second signal came after every call had stopped" in result.error


# --- 4. the command line: a signal while the command starts, or after it has finished -----------------

START_UP = """
import os, signal, sys
sys.argv[0] = os.path.join(os.path.dirname(sys.executable), "toolcall-lab")  # as the console script
import toolcall_lab  # the guard is installed before the package's heavy imports
signal.raise_signal(getattr(signal, sys.argv[1]))  # a signal while the command still starts
from toolcall_lab.cli import main
print("never here")
"""

AFTER_THE_SAVE = """
import os, signal, sys
sys.argv[0] = os.path.join(os.path.dirname(sys.executable), "toolcall-lab")
import toolcall_lab
from toolcall_lab import _startup
_startup.release()  # (what cli.main does around the command)
_startup.rearm()
signal.raise_signal(getattr(signal, sys.argv[1]))  # a second signal just after a stopped run was saved
sys.exit(143 if sys.argv[1] == "SIGTERM" else 130)  # the command's own status
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("name", "code", "words"), [
    ("SIGINT", 130, "interrupted (Ctrl-C)"),
    ("SIGTERM", 143, "terminated (SIGTERM)"),
])  # fmt: skip
def test_a_signal_while_the_command_starts_exits_with_one_line(name: str, code: int, words: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", START_UP, name], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == code, done.stderr
    assert done.stderr == f"toolcall-lab: {words} while starting; nothing was done\n"
    assert "never here" not in done.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_after_the_command_finished_keeps_its_exit_status(name: str, code: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", AFTER_THE_SAVE, name], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == code, done.stderr
    assert "as it exited; what it did is done" in done.stderr and "Traceback" not in done.stderr


def test_the_library_and_cli_main_called_from_python_install_no_guard() -> None:
    from toolcall_lab import _startup, cli

    assert not _startup.active()
    assert cli.main(["findings"]) == 0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# --- 7. a provider call id reused in a later round --------------------------------------------------


def test_a_call_id_reused_in_a_later_round_gets_a_finding() -> None:
    from toolcall_lab.messages import ToolCall
    from toolcall_lab.protocol import validate_messages

    tools = ToolRegistry()

    @tools.register
    def look(n: int) -> str:
        """Looks."""
        return f"seen {n}"

    def call(n: int) -> ToolCall:
        return ToolCall(tool_call_id="Z", name="look", arguments=f'{{"n": {n}}}', index=0)

    model = ScriptedModel(
        [ScriptedResponse(tool_calls=(call(1),)), ScriptedResponse(tool_calls=(call(2),)), "done"]
    )
    result = run_virtual(run(model, tools, "go"))
    assert [e.result for e in result.executions] == ["seen 1", "seen 2"]  # both run and answered
    assert result.rounds[0].findings == ()
    (finding,) = result.rounds[1].findings
    assert finding.kind == "duplicate_tool_call_id" and finding.tool_call_id == "Z"
    assert "reuses the id 'Z' of a call of round 0" in finding.message
    assert validate_messages(list(result.messages))  # (the validator flags the transcript too)
    again = replay(as_trace(result))
    assert [f.message for f in again.rounds[1].findings] == [finding.message]


# --- 6. validate: a trace that contradicts itself -------------------------------------------------------


def two_rounds(tmp_path: Any) -> dict[str, Any]:
    import json

    from toolcall_lab.trace_files import save

    tools = ToolRegistry()

    @tools.register
    async def work(s: float) -> str:
        """Works."""
        await asyncio.sleep(s)
        return "done"

    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=(("work", {"s": 0.1}),)),
            ScriptedResponse(tool_calls=(("work", {"s": 0.2}),)),
            "fin",
        ]
    )
    path = save(as_trace(run_virtual(run(model, tools, "go"))), tmp_path / "t.json")
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def tampered(tmp_path: Any, doc: dict[str, Any]) -> tuple[int, str]:
    import contextlib
    import io
    import json

    from toolcall_lab import cli

    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(doc))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["validate", str(path)])
    return code, out.getvalue()


def test_validate_accepts_the_untampered_trace(tmp_path: Any) -> None:
    code, out = tampered(tmp_path, two_rounds(tmp_path))
    assert code == 0 and out.startswith("ok"), out


@pytest.mark.parametrize(("status", "error"), [("error", None), ("ok", "Error: boom"), ("timeout", None)])
def test_validate_calls_a_status_that_contradicts_the_error_a_contradiction(
    tmp_path: Any, status: str, error: str | None
) -> None:
    doc = two_rounds(tmp_path)
    ex = doc["rounds"][1]["tool_executions"][0]
    ex["status"], ex["error"] = status, error
    code, out = tampered(tmp_path, doc)
    assert code == 1, out
    assert f"contradiction: rounds[1] call {ex['tool_call_id']} (position 0): status {status!r}" in out


def test_validate_calls_a_result_the_next_request_did_not_send_a_contradiction(tmp_path: Any) -> None:
    doc = two_rounds(tmp_path)
    ex = doc["rounds"][0]["tool_executions"][0]
    ex["result"] = "changed"
    code, out = tampered(tmp_path, doc)
    assert code == 1, out
    assert f"contradiction: rounds[0] call {ex['tool_call_id']} (work) (position 0): the next request" in out
    assert "unanswered" not in out  # (it is answered: with another text)


def test_validate_calls_a_wall_time_far_beyond_the_rounds_a_contradiction(tmp_path: Any) -> None:
    doc = two_rounds(tmp_path)
    doc["outcome"]["wall_time_s"] = 99
    code, out = tampered(tmp_path, doc)
    assert code == 1, out
    assert "contradiction: outcome.wall_time_s is 99 s, but the rounds end at 0.300 s" in out


# --- 5. a blocking hook holding the loop past the deadline -------------------------------------------


@pytest.mark.parametrize("mode", ["parallel", "eager", "parallel[cap=2]"])
def test_calls_held_past_the_deadline_by_a_blocking_hook_are_recorded_alike(mode: str) -> None:
    tools = ToolRegistry()

    @tools.register
    async def work(s: float, k: int) -> str:
        """Sleeps `s` seconds."""
        await asyncio.sleep(s)
        return "ok"

    def on_tool_complete(ex: Any) -> None:
        if ex.index == 0:  # blocks the event loop for 0.6 s (as time.sleep would, on the virtual clock)
            asyncio.get_running_loop().advance(0.6)  # type: ignore[attr-defined]

    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=(
                    ("work", {"s": 0.1, "k": 0}),
                    ("work", {"s": 0.2, "k": 1}),
                    ("work", {"s": 0.1, "k": 2}),
                )
            ),
            "done",
        ]
    )
    result = run_virtual(
        run(model, tools, "go", mode=mode, timeout_s=0.4, hooks=Hooks(on_tool_complete=on_tool_complete))
    )
    assert (result.status, result.reason) == ("timeout", "deadline")
    first, *held = result.executions
    assert (first.status, first.ended_at) == ("ok", pytest.approx(0.1))
    assert [e.status for e in held] == ["cancelled", "cancelled"]  # neither returned before the deadline
    for ex in result.executions:
        assert ex.status != "ok" or ex.ended_at <= 0.4 + 1e-9  # no result kept from after the deadline
    assert "deadline" in held[1].result

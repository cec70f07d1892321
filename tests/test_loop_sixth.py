"""Issue 11, sixth check (restored: a lost session's fixes, checked against the code and redone).

`bench --jobs N` stopped by a signal sent to its pid alone (as a job scheduler sends it) stops its
worker processes with it; SIGTERM stops `bench` like Ctrl-C (tables written, exit 143); a file that
is not a trace says to import it; `bench` names a path once; the deadline's message says calls had
started and not finished. Real processes where signals are the point; the virtual clock elsewhere.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO
from toolcall_lab import ScriptedModel, ScriptedResponse, ToolRegistry
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import run
from toolcall_lab.strategies import Batch, strategy

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")

HANG = '''
import os, time
from pathlib import Path
from toolcall_lab.strategies import strategy


@strategy("hang_on_three")
async def hang_on_three(batch):
    """Runs batches of up to two calls; blocks its worker's whole process on a batch of three."""
    if len(batch.calls) >= 3:
        mark = Path(os.environ["L6_MARK"])
        mark.with_suffix(".tmp").write_text(str(os.getpid()))
        mark.with_suffix(".tmp").rename(mark)  # (whole or absent: the test reads it as soon as it exists)
        time.sleep(600)
    await batch.run_parallel()
'''


def _state(pid: int) -> str | None:
    """A process's state letter (None: it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[0]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            if int(text.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _gone(pids: list[int], limit_s: float = 30) -> list[int]:
    """The processes of `pids` still alive (not gone, not a zombie) after waiting up to `limit_s`."""
    end = time.monotonic() + limit_s
    while True:
        alive = [p for p in pids if _state(p) not in (None, "Z", "X")]
        if not alive or time.monotonic() > end:
            return alive
        time.sleep(0.1)


def _started_bench(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, Path, list[int]]:
    """`bench --jobs 2` on three traces, the last of which hangs its worker; returns once that
    worker hangs (the other traces compared or being compared), with the workers' pids."""
    folder = tmp_path / "traces"
    folder.mkdir()
    for name, source in [("a", "one_tool_round"), ("b", "two_tool_rounds"), ("z", "three_tools_100ms")]:
        (folder / f"{name}.json").write_bytes((REPO / "data" / "traces" / f"{source}.json").read_bytes())
    hang = tmp_path / "l6_hang.py"
    hang.write_text(HANG)
    mark = tmp_path / "hanging"
    out = tmp_path / "b.csv"
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolcall_lab", "bench", str(folder), "--jobs", "2", "--quiet",
         "--modes", "sequential", "--strategy", f"{hang}:hang_on_three", "--out", str(out)],
        cwd=tmp_path,
        env={**os.environ, "L6_MARK": str(mark)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    end = time.monotonic() + 120
    while not mark.exists():
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            out_text, err = proc.communicate()
            pytest.fail(f"the bench never reached the hanging trace: {proc.returncode}\n{out_text}\n{err}")
        time.sleep(0.05)
    workers = _children(proc.pid)
    if int(mark.read_text()) not in workers:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the hanging worker {mark.read_text()} is not a child of the bench: {workers}")
    return proc, out, folder, workers


@linux_only
@pytest.mark.parametrize(("sig", "code", "words"), [
    (signal.SIGINT, 130, "interrupted (Ctrl-C)"),
    (signal.SIGTERM, 143, "terminated (SIGTERM)"),
])  # fmt: skip
def test_a_bench_signalled_alone_stops_its_workers_and_writes_what_it_compared(
    tmp_path, sig, code, words
) -> None:
    proc, out, folder, workers = _started_bench(tmp_path)
    os.kill(proc.pid, sig)  # the parent alone, as `kill -INT <pid>` or a job scheduler does
    try:
        stdout, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        for w in workers:
            if _state(w) not in (None, "Z"):
                os.kill(w, signal.SIGKILL)
        pytest.fail("the bench did not stop: it waited for its hanging worker")
    assert proc.returncode == code, stderr
    assert f"toolcall-lab bench: {words} after" in stderr
    assert f"\n{words}: below, the " in stdout
    assert _gone(workers) == []
    missing = set(pd.read_csv(out.with_name("b_missing.csv"))["trace"])
    assert str(folder / "z.json") in missing  # the trace being compared when it stopped
    compared = set(pd.read_csv(out)["trace"]) if out.stat().st_size > 1 else set()
    assert compared | missing == {str(folder / f"{n}.json") for n in "abz"}
    assert not compared & missing


@linux_only
def test_workers_of_a_bench_killed_outright_exit_on_their_own(tmp_path) -> None:
    proc, _, _, workers = _started_bench(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)  # no handler runs: only the workers themselves can notice
    proc.communicate(timeout=60)
    alive = _gone(workers)
    for w in alive:
        os.kill(w, signal.SIGKILL)
    assert alive == []


def test_sigterm_before_anything_was_compared_exits_143_in_one_line(monkeypatch, capsys) -> None:
    from toolcall_lab import cli

    def terminated_while_generating(n: int, seed: int) -> list[object]:
        os.kill(os.getpid(), signal.SIGTERM)  # (the handler raises on the next bytecode)
        for _ in range(1000):
            time.sleep(0.001)
        raise AssertionError("SIGTERM was not turned into an interruption")

    import toolcall_lab.scenarios as scenarios

    monkeypatch.setattr(scenarios, "generate_corpus", terminated_while_generating)
    code = cli.main(["bench", "--corpus", "3", "--quiet"])
    err = capsys.readouterr().err
    assert code == 143 and err == "toolcall-lab bench: terminated (SIGTERM); nothing was compared\n"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # (put back)


# --- a file that is not a trace ----------------------------------------------------------------------

NOT_TRACES = {
    "response.sse": 'data: {"id":"x","choices":[]}\n\ndata: [DONE]\n\n',
    "session.jsonl": '{"type":"user","message":{"role":"user","content":"hi"}}\n{"type":"assistant"}\n',
    "request.json": '{"model": "gpt-4o", "messages": []}',
    "list.json": "[1, 2]",
}


@pytest.mark.parametrize("name", sorted(NOT_TRACES))
def test_a_file_that_is_not_a_trace_says_to_import_it(tmp_path, name, capsys) -> None:
    from toolcall_lab import cli

    path = tmp_path / name
    path.write_text(NOT_TRACES[name])
    hint = f"`toolcall-lab import KIND {path} --out traces/`"
    assert cli.main(["replay", str(path)]) == 2
    assert hint in capsys.readouterr().err
    assert cli.main(["validate", str(path)]) == 2
    assert hint in capsys.readouterr().err
    assert cli.main(["bench", str(path), "--quiet", "--modes", "sequential"]) == 1
    assert hint in capsys.readouterr().err


def test_a_truncated_trace_is_not_told_to_import(tmp_path, capsys) -> None:
    from toolcall_lab import cli

    text = (REPO / "data" / "traces" / "one_tool_round.json").read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])
    assert cli.main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "looks truncated" in err and "toolcall-lab import" not in err


def test_bench_names_a_file_it_could_not_load_once(tmp_path, capsys) -> None:
    from toolcall_lab import cli

    path = tmp_path / "response.sse"
    path.write_text(NOT_TRACES["response.sse"])
    assert cli.main(["bench", str(path), "--quiet", "--modes", "sequential"]) == 1
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("not compared"))
    assert line.startswith(f"not compared: {path}: not valid JSON")
    assert line.count(str(path)) == 2  # the line's own, and the import command it suggests


# --- the deadline's words -------------------------------------------------------------------------


def test_the_deadline_says_calls_had_started_and_not_finished_not_that_they_were_running() -> None:
    reg = ToolRegistry()

    @reg.register
    async def slow() -> str:
        await asyncio.sleep(10)
        return "done"

    @strategy("awaits_its_call")
    async def awaits_its_call(batch: Batch) -> None:
        await batch.run(0)

    model = ScriptedModel([ScriptedResponse(tool_calls=(("slow", {}),)), ScriptedResponse(content="x")])
    result = run_virtual(run(model, reg, "go", mode=awaits_its_call, timeout_s=1.0))
    assert (result.status, result.reason) == ("timeout", "deadline")
    assert "the calls at positions [0] had started and not finished" in (result.error or "")
    assert "running" not in (result.error or "").split("had not returned", 1)[1]
    assert result.executions[0].status == "cancelled"


# --- a blocking on_event listener and the deadline ------------------------------------------------


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized", "eager"])
def test_a_listener_that_blocks_past_the_deadline_stops_the_run_there_and_is_named(mode) -> None:
    """Real clock (a listener that blocks holds the real event loop). Before: sequential ran both
    calls and ended `completed` after its deadline; parallel ran them after it."""
    from toolcall_lab.loop import run_sync

    ran: list[int] = []
    reg = ToolRegistry()

    @reg.register
    async def f(x: int) -> str:
        ran.append(x)
        return "ok"

    held: list[str] = []

    def listener(event: object) -> None:
        if getattr(event, "kind", "") == "action" and not held:
            held.append("once")
            time.sleep(0.3)  # a human at input(), a slow print to a remote console

    model = ScriptedModel([ScriptedResponse(tool_calls=(("f", {"x": 1}), ("f", {"x": 2}))), "done"])
    result = run_sync(model, reg, "go", mode=mode, on_event=listener, timeout_s=0.1)
    assert (result.status, result.reason) == ("timeout", "deadline")
    assert ran == [] and [e.status for e in result.executions] == ["cancelled", "cancelled"]
    assert all(e.result.startswith("Not executed") for e in result.executions)
    error = result.error or ""
    assert "the on_event listener held the event loop until" in error
    assert "had started" not in error and "had not been run" in error


# --- the hot path's constructors and argument reads (speed work: same records) --------------------


def test_the_positional_constructors_make_ordinary_equal_frozen_records() -> None:
    import dataclasses
    import pickle

    from toolcall_lab.events import Action, Observation, make_action, make_observation
    from toolcall_lab.messages import ToolCall as Call
    from toolcall_lab.records import (
        MEASURED,
        ClientRoundTrip,
        ToolExecution,
        make_execution,
        make_round_trip,
    )

    call = Call(tool_call_id="c1", name="f", arguments='{"x": 1}')
    ex = make_execution("c1", "f", '{"x": 1}', 0, "ok", "done", None, 0.5, 1.5, None, MEASURED)
    assert type(ex) is ToolExecution
    assert ex == ToolExecution(
        tool_call_id="c1", name="f", arguments='{"x": 1}', index=0, status="ok", result="done",
        started_at=0.5, ended_at=1.5,
    )  # fmt: skip
    assert ex.queued_at is None and ex.returned_at is None  # (the trailing defaults)
    made = [
        ex,
        make_action("action", 0.5, 0, call),
        make_observation("observation", 1.5, 0, ex),
        make_round_trip(*(getattr(f, "default", 0) if f.default is not dataclasses.MISSING else 1.0
                          for f in dataclasses.fields(ClientRoundTrip))),
    ]  # fmt: skip
    for record in made:
        cls = type(record)
        assert cls in (ToolExecution, Action, Observation, ClientRoundTrip)
        every = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}  # every slot set
        assert cls(**every) == record and hash(repr(record))
        for field in dataclasses.fields(record):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(record, field.name, None)
        assert pickle.loads(pickle.dumps(record)) == record
        assert dataclasses.replace(record) == record


def test_a_call_the_parser_left_incomplete_never_runs_even_with_parsed_arguments() -> None:
    """The screening reads the parser's plain dict directly (no `ParsedArguments` made): it must still
    refuse a call whose stream ended before its arguments were complete."""
    from toolcall_lab._execution import Executor, Hooks
    from toolcall_lab.messages import ToolCall as Call

    reg = ToolRegistry()

    @reg.register
    def f(x: int) -> str:
        return "ran"

    async def screened() -> list[object]:
        ex = Executor(reg, Hooks(), 0.0)
        whole = Call(tool_call_id="a", name="f", arguments='{"x": 1}', _outcome={"x": 1})
        cut = Call(tool_call_id="b", name="f", arguments='{"x": 2}', complete=False, _outcome={"x": 2})
        batch = ex.new_batch()
        return [ex.check(whole, 0, batch), ex.check(cut, 1, batch)]

    ok, refused = asyncio.run(screened())
    assert ok is None
    assert refused is not None and refused.status == "invalid_arguments"  # type: ignore[attr-defined]
    assert "incomplete" in refused.result  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", ["parallel", "eager"])
def test_an_async_tool_that_blocks_past_the_deadline_keeps_its_result_and_the_rest_do_not_start(
    mode,
) -> None:
    """Real clock. The blocking tool ran and returned (its record says so); the call after it never
    started; the error says the loop was held, not that calls were slow to stop."""
    from toolcall_lab.loop import run_sync

    ran: list[str] = []
    reg = ToolRegistry()

    @reg.register
    async def blocker() -> str:
        ran.append("blocker")
        time.sleep(0.3)  # noqa: ASYNC251 (`time.sleep` where `await asyncio.sleep` was meant)
        return "blocked"

    @reg.register
    async def quick() -> str:
        ran.append("quick")
        return "quick"

    model = ScriptedModel([ScriptedResponse(tool_calls=(("blocker", {}), ("quick", {}))), "done"])
    result = run_sync(model, reg, "go", mode=mode, timeout_s=0.1)
    assert (result.status, result.reason) == ("timeout", "deadline")
    assert ran == ["blocker"]
    first, second = result.executions
    assert (first.status, first.result) == ("ok", "blocked")
    assert second.status == "cancelled" and second.result.startswith("Not executed")
    assert "the event loop was held until" in (result.error or "")
    assert "calls cut off had stopped" not in (result.error or "")


# --- a sync call whose limit passed before any worker thread took it ------------------------------


class _BusyThreads:
    """Worker threads that never get to a call (a machine too busy to start one within the limit)."""

    def __init__(self) -> None:
        import concurrent.futures

        self.jobs: list[concurrent.futures.Future[object]] = []

    def start(self, fn: object, arguments: object) -> tuple[asyncio.Future[object], object]:
        import concurrent.futures

        job: concurrent.futures.Future[object] = concurrent.futures.Future()
        self.jobs.append(job)
        return asyncio.get_running_loop().create_future(), job

    def shutdown(self) -> None:
        pass


def test_a_sync_call_no_thread_started_before_its_limit_is_withdrawn_and_said_never_to_have_run() -> None:
    """Before: "timed out ... Its thread cannot be stopped and may still be running", and the call
    then ran after the record was closed (the fault matrix saw it under load)."""
    from toolcall_lab._execution import Executor, Hooks
    from toolcall_lab.messages import ToolCall as Call

    ran: list[str] = []
    reg = ToolRegistry()

    @reg.register(timeout_s=0.05)
    def f(x: int) -> str:
        ran.append("f")
        return "late"

    busy = _BusyThreads()

    async def execute() -> object:
        ex = Executor(reg, Hooks(), asyncio.get_running_loop().time())
        ex._threads = busy  # type: ignore[assignment]
        return await ex.execute(Call(tool_call_id="c", name="f", arguments='{"x": 1}'), 0)

    record = asyncio.run(execute())
    assert record.status == "timeout"  # type: ignore[attr-defined]
    text = record.result  # type: ignore[attr-defined]
    assert "No worker thread had started it by then" in text and "never ran" in text
    assert "may still be running" not in text
    assert busy.jobs[0].cancelled() and ran == []  # withdrawn: no worker will ever take it


def test_a_started_job_is_not_withdrawn() -> None:
    import threading

    from toolcall_lab.tools import ToolThreads

    go, entered = threading.Event(), threading.Event()

    def blocks() -> str:
        entered.set()
        go.wait(10)
        return "done"

    async def main() -> tuple[bool, object]:
        threads = ToolThreads()
        pending, job = threads.start(blocks, {})
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 10)
        withdrawn = job.cancel()  # running: cannot be withdrawn
        go.set()
        value = await pending
        threads.shutdown()
        return withdrawn, value

    assert asyncio.run(main()) == (False, "done")

"""Issue 11, seventh check: what a fresh-eyes tester (report t11) found in the run loop.

Each finding is fixed as a class of problem, and each test here failed before its fix:

1. a harness limit told from a tool's own ``TimeoutError`` wherever the harness waits (both clocks);
2. / 7. the words of a cut-off call follow from what the code observed (did this call's own task
   receive the cancellation? who cut: the deadline, a hook, the strategy?), the same live and in replay;
3. every field of a record kept on every path (``queued_at`` of a call cut off while it waited or ran);
8. every ``--out`` checked before any work, by one rule;
4. / 5. / 6. signals in every command that runs (real processes, real signals);
9. ``validate`` reports a trace that contradicts itself;
10. / 11. a withheld result kept in the record, hook failures carried through a replay;
14. trace files grow linearly with the rounds (schema 3);
12. / 13. / 15. messages and docs that say what happens.

Virtual clock unless a test needs real threads or a real process; no wall-clock thresholds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.conftest import DATA, REPO
from toolcall_lab import Hooks, ScriptedModel, ScriptedResponse, ToolRegistry, cli, replay, run_sync
from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import UsageError
from toolcall_lab.loop import run
from toolcall_lab.models import response_chunks
from toolcall_lab.runs import RunResult
from toolcall_lab.scenarios import simulated
from toolcall_lab.tools import ToolThreads
from toolcall_lab.trace import Trace, TraceMetadata
from toolcall_lab.trace_files import load, redact_trace, save


def as_trace(result: RunResult, title: str = "t11") -> Trace:
    return Trace.from_run(result, TraceMetadata(title=title, origin="scripted"))


def reloaded(result: RunResult, tmp_path: Path, name: str = "t.json") -> Trace:
    return load(save(as_trace(result), tmp_path / name))


def texts(result: RunResult) -> list[tuple[str, str]]:
    return [(e.status, e.result) for e in result.executions]


def what_happened(result: RunResult) -> list[tuple[str, str]]:
    """Each call's status and what its text says it did, without what cut the run off (a replay of
    a run cancelled from outside is cut by its own abort at the recorded end, and says so)."""
    return [(e.status, e.result.split(" while this call was running")[-1]) for e in result.executions]


# --- 1. the harness's limit vs the tool's own TimeoutError ------------------------------------------


def own_timeout_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register(timeout_s=5)
    def fetch(url: str) -> str:
        """A sync tool whose socket read times out (its own TimeoutError)."""
        raise TimeoutError("socket read timed out")

    @tools.register(timeout_s=5)
    async def afetch(url: str) -> str:
        """The same, async."""
        raise TimeoutError("read timed out")

    return tools


def own_timeout_model() -> ScriptedModel:
    return ScriptedModel(
        [ScriptedResponse(tool_calls=(("fetch", {"url": "x"}), ("afetch", {"url": "y"}))), "ok"]
    )


@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_a_tools_own_timeout_error_is_its_error_on_both_clocks(clock: str) -> None:
    tools = own_timeout_tools()
    if clock == "virtual":
        result = run_virtual(run(own_timeout_model(), tools, "go", mode="parallel"))
    else:
        result = run_sync(own_timeout_model(), tools, "go", mode="parallel")
    assert texts(result) == [
        ("error", "Error: tool 'fetch' raised TimeoutError: socket read timed out"),
        ("error", "Error: tool 'afetch' raised TimeoutError: read timed out"),
    ]


def test_tool_threads_wait_tells_its_limit_from_the_tools_timeout_error() -> None:
    from toolcall_lab.tools import LimitExpired

    threads = ToolThreads()
    release = threading.Event()

    def own() -> str:
        raise TimeoutError("mine")

    try:
        with pytest.raises(TimeoutError, match="mine") as raised:
            threads.wait(own, {}, 30)
        assert not isinstance(raised.value, LimitExpired)
        with pytest.raises(LimitExpired) as expired:
            threads.wait(release.wait, {}, 0.01)  # (blocks until released below)
        assert not isinstance(expired.value, TimeoutError)  # never confused with a tool's own
    finally:
        release.set()
        threads.shutdown()


def test_a_tool_that_raises_a_timeout_error_on_being_cancelled_at_its_limit_is_said_so() -> None:
    tools = ToolRegistry()

    @tools.register(timeout_s=1)
    async def slow(x: int) -> str:
        """Turns the limit's cancellation into a TimeoutError of its own."""
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            raise TimeoutError("gave up politely") from None
        return "never"

    model = ScriptedModel([ScriptedResponse(tool_calls=(("slow", {"x": 1}),)), "ok"])
    result = run_virtual(run(model, tools, "go", all_failed_policy="continue"))
    ex = result.executions[0]
    assert ex.status == "timeout" and ex.duration_s == 1.0
    assert "on being cancelled it raised TimeoutError: gave up politely" in ex.result


def test_from_limit_tells_an_asyncio_timeout_apart_from_a_timeout_error_raised_inside() -> None:
    from toolcall_lab._execution import from_limit

    async def main() -> tuple[BaseException, BaseException]:
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(1)
        except TimeoutError as exc:
            limit = exc
        try:
            async with asyncio.timeout(10):
                await asyncio.sleep(0)
                raise TimeoutError("own")
        except TimeoutError as exc:
            own = exc
        return limit, own

    limit, own = run_virtual(main())
    assert from_limit(limit) and not from_limit(own)


# --- 2. / 7. the words of a cut-off call follow from what happened ---------------------------------

LOG: list[tuple[str, str]] = []
HOLDER: list[asyncio.Task[Any]] = []


def cut_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    async def work(key: str, secs: float, fail: bool = False) -> str:
        """Sleeps, logging what it saw."""
        try:
            await asyncio.sleep(secs)
        except asyncio.CancelledError:
            LOG.append(("cancelled", key))
            raise
        LOG.append(("finished", key))
        if fail:
            raise ValueError("fail " + key)
        return "done " + key

    @tools.register
    async def arm(at: float) -> str:
        """Cancels the run's task `at` seconds from now (a timer set after `work`'s had started)."""
        asyncio.get_running_loop().call_later(at, HOLDER[0].cancel)
        await asyncio.sleep(60)
        return "never"

    return tools


async def cancelled_run(mode: str, fail: bool) -> RunResult:
    """`work` ends at 1.0 s by itself; the run's task is cancelled at that same instant, after `work`'s
    timer fired: the call finished before any cancellation reached its task."""
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=(("work", {"key": "a", "secs": 1.0, "fail": fail}), ("arm", {"at": 1.0}))
            ),
            "x",
        ]
    )
    task = asyncio.get_running_loop().create_task(run(model, cut_tools(), "go", mode=mode))
    HOLDER[:] = [task]
    try:
        await task
    except asyncio.CancelledError as exc:
        return exc.partial_result  # type: ignore[attr-defined,no-any-return]
    raise AssertionError("the run was not cancelled")


@pytest.mark.parametrize("mode", ["parallel", "eager", "parallel[cap=2]"])
@pytest.mark.parametrize("fail", [False, True])
def test_a_call_that_finished_as_the_run_was_cut_keeps_its_outcome(
    mode: str, fail: bool, tmp_path: Path
) -> None:
    LOG.clear()
    result = run_virtual(cancelled_run(mode, fail))
    assert ("finished", "a") in LOG and ("cancelled", "a") not in LOG  # what the tool saw
    work, armed = result.executions
    if fail:
        assert (work.status, work.result) == ("error", "Error: tool 'work' raised ValueError: fail a")
    else:
        assert (work.status, work.result, work.ended_at) == ("ok", "done a", 1.0)
    assert "caught the cancellation" not in work.result and "on being cancelled" not in work.result
    assert armed.status == "cancelled" and "the run was cancelled while this call was running" in armed.result
    again = replay(reloaded(result, tmp_path), mode)  # a replay says the same
    assert what_happened(again) == what_happened(result)


def caught_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    async def stubborn(secs: float, then: str) -> str:
        """Catches the cancellation, then returns (after a while) or raises."""
        try:
            await asyncio.sleep(secs)
        except asyncio.CancelledError:
            await asyncio.sleep(0.25)
            if then == "raise":
                raise ValueError("in cleanup") from None
            return "late"
        return "on time"

    return tools


@pytest.mark.parametrize("mode", ["sequential", "parallel", "eager"])
@pytest.mark.parametrize("then", ["return", "raise"])
def test_what_a_cut_off_call_did_is_said_only_when_it_received_the_cancellation_and_replays(
    mode: str, then: str, tmp_path: Path
) -> None:
    model = ScriptedModel([ScriptedResponse(tool_calls=(("stubborn", {"secs": 5, "then": then}),)), "x"])
    result = run_virtual(run(model, caught_tools(), "go", mode=mode, timeout_s=1.0))
    ex = result.executions[0]
    said = (
        "it caught the cancellation and returned at 1.250 s; that result is discarded"
        if then == "return"
        else "on being cancelled it raised ValueError: in cleanup"
    )
    assert ex.status == "cancelled" and said in ex.result
    again = replay(reloaded(result, tmp_path), mode)
    assert texts(again) == texts(result)
    assert [(e.started_at, e.ended_at) for e in again.executions] == [
        (e.started_at, e.ended_at) for e in result.executions
    ]


def stop_on_first(execution: Any) -> None:
    if execution.index == 0:
        raise KeyboardInterrupt


def exit_on_first(call: Any, execution: Any) -> None:
    if execution.index == 0:
        raise SystemExit(3)


@pytest.mark.parametrize("mode", ["parallel", "eager", "eager[cap=2]", "parallel[cap=2]"])
@pytest.mark.parametrize(
    ("hooks", "what"),
    [
        (Hooks(on_tool_complete=stop_on_first), "hook on_tool_complete raised KeyboardInterrupt"),
        (Hooks(approve_result=exit_on_first), "hook approve_result raised SystemExit"),
    ],
)
def test_a_cut_a_hook_caused_is_blamed_on_the_hook_in_every_mode(mode: str, hooks: Hooks, what: str) -> None:
    tools = ToolRegistry([simulated("work", 1.0), simulated("long", 2.0)])
    model = ScriptedModel([ScriptedResponse(tool_calls=(("work", {}), ("long", {}))), "x"])
    with pytest.raises((KeyboardInterrupt, SystemExit)) as stopped:
        run_virtual(run(model, tools, "go", mode=mode, hooks=hooks))
    partial = stopped.value.partial_result  # type: ignore[union-attr]
    other = partial.executions[1]
    assert other.status == "cancelled" and what in other.result
    assert "strategy" not in other.result


# --- 3. every field kept on every path ---------------------------------------------------------------


def queue_run(mode: str, **settings: Any) -> RunResult:
    tools = ToolRegistry([simulated("work", 1.0)])
    calls = tuple(("work", {"i": i}) for i in range(3))
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "ok"])
    return run_virtual(run(model, tools, "go", mode=mode, dedupe=False, **settings))


@pytest.mark.parametrize("mode", ["parallel[cap=1]", "eager[cap=1]", "parallel[work=1]"])
def test_queued_at_is_kept_when_the_run_is_cut_off(mode: str, tmp_path: Path) -> None:
    whole = queue_run(mode)
    assert [e.queued_at for e in whole.executions] == [None, 0.0, 0.0]
    cut = queue_run(mode, timeout_s=1.5)
    assert [(e.status, e.queued_at, e.started_at, e.ended_at) for e in cut.executions] == [
        ("ok", None, 0.0, 1.0),
        ("cancelled", 0.0, 1.0, 1.5),  # waited 1 s, ran 0.5 s
        ("cancelled", 0.0, 1.5, 1.5),  # waited 1.5 s, never started
    ]
    again = replay(reloaded(cut, tmp_path), mode)
    assert [e.queued_at for e in again.executions] == [None, 0.0, 0.0]


def test_queued_at_is_kept_when_the_run_task_is_cancelled() -> None:
    tools = ToolRegistry([simulated("work", 1.0)])
    calls = tuple(("work", {"i": i}) for i in range(3))

    async def main() -> RunResult:
        model = ScriptedModel([ScriptedResponse(tool_calls=calls), "ok"])
        task = asyncio.get_running_loop().create_task(run(model, tools, "go", mode="parallel[cap=1]"))
        await asyncio.sleep(1.5)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as exc:
            return exc.partial_result  # type: ignore[attr-defined,no-any-return]
        raise AssertionError

    result = run_virtual(main())
    assert [e.queued_at for e in result.executions] == [None, 0.0, 0.0]


# --- 10. / 11. the withheld result and the hook failures survive a replay ---------------------------


def test_a_withheld_result_keeps_what_the_tool_returned(tmp_path: Path) -> None:
    tools = ToolRegistry([simulated("secret", 0.5, lambda a: "the real answer")])
    model = ScriptedModel([ScriptedResponse(tool_calls=(("secret", {}),)), "ok"])
    hooks = Hooks(approve_result=lambda call, ex: "not for the model")
    result = run_virtual(run(model, tools, "go", hooks=hooks))
    ex = result.executions[0]
    assert (ex.status, ex.result, ex.withheld_result) == (
        "withheld",
        "Result withheld: not for the model.",
        "the real answer",
    )
    assert result.messages[-2]["content"] == "Result withheld: not for the model."  # the model's text
    trace = reloaded(result, tmp_path)
    assert trace.rounds[0].executions[0] == ex
    again = replay(trace, "parallel").executions[0]
    assert (again.status, again.result, again.withheld_result) == (ex.status, ex.result, ex.withheld_result)


def failing_hooks() -> Hooks:
    def approve_call(call: Any) -> Any:
        if call.index == 1:
            raise RuntimeError("quota service down")
        return 1 if call.index == 2 else None  # (meaningless: a hook failure too)

    def approve_result(call: Any, ex: Any) -> Any:
        if call.index == 3:
            raise ValueError("classifier crashed")

    def on_tool_start(call: Any) -> None:
        if call.index == 0:
            raise LookupError("no dashboard")

    def on_tool_complete(ex: Any) -> None:
        if ex.index == 3:
            raise OSError("log full")

    chunks = [0]

    def on_model_chunk(payload: Any) -> None:
        chunks[0] += 1
        if chunks[0] == 3:
            raise KeyError("chunk 2")

    return Hooks(
        approve_call=approve_call,
        approve_result=approve_result,
        on_tool_start=on_tool_start,
        on_tool_complete=on_tool_complete,
        on_model_chunk=on_model_chunk,
    )


def listener(event: Any) -> None:
    if event.kind == "observation" and event.execution.index == 0:
        raise RuntimeError("listener down")


def hooked_run(mode: str) -> RunResult:
    tools = ToolRegistry([simulated("t", 0.5, lambda a: f"r{a['i']}")])
    calls = tuple(("t", {"i": i}) for i in range(4))
    model = ScriptedModel([ScriptedResponse(tool_calls=calls, latency_s=0.4), "ok"])
    return run_virtual(run(model, tools, "go", mode=mode, hooks=failing_hooks(), on_event=listener))


def failure_keys(result: RunResult) -> list[tuple[Any, ...]]:
    return sorted(
        (f.hook, f.error, f.effect, f.round_index, f.tool_call_id, f.position) for f in result.hook_failures
    )


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized", "eager"])
def test_hook_failures_are_carried_through_a_replay(mode: str, tmp_path: Path) -> None:
    result = hooked_run("parallel")
    hooks = {f.hook for f in result.hook_failures}
    assert hooks == {
        "approve_call",
        "approve_result",
        "on_tool_start",
        "on_tool_complete",
        "on_model_chunk",
        "on_event",
    }
    again = replay(reloaded(result, tmp_path), mode)
    assert failure_keys(again) == failure_keys(result)
    assert texts(again) == texts(result)


# --- 12. / 13. / 15. messages and docs ----------------------------------------------------------------


def test_a_sync_tool_raising_generator_exit_keeps_its_message_on_both_clocks() -> None:
    tools = ToolRegistry()

    @tools.register
    def g(x: int) -> str:
        """Raises GeneratorExit (a BaseException: the run stops)."""
        raise GeneratorExit("ge")

    def model() -> ScriptedModel:
        return ScriptedModel([ScriptedResponse(tool_calls=(("g", {"x": 1}),)), "ok"])

    for go in (lambda: run_virtual(run(model(), tools, "go")), lambda: run_sync(model(), tools, "go")):
        with pytest.raises(GeneratorExit, match="ge") as stopped:
            go()
        ex = stopped.value.partial_result.executions[0]  # type: ignore[attr-defined]
        assert ex.result == "Error: tool 'g' raised GeneratorExit: ge; the run stopped."


def test_registering_a_tool_object_points_to_add() -> None:
    with pytest.raises(UsageError, match=r"registry\.add\(tool\)"):
        ToolRegistry().register(simulated("s", 1.0))


def test_an_on_model_chunk_failure_names_the_chunk() -> None:
    result = hooked_run("parallel")
    (chunk,) = [f for f in result.hook_failures if f.hook == "on_model_chunk"]
    assert chunk.effect == "ignored; the stream went on (the hook failed on chunk 2)"


def test_the_docs_say_what_a_hooks_cancelled_error_and_a_stuck_thread_at_exit_do() -> None:
    from toolcall_lab import tools as tools_module

    assert "CancelledError`` the hook raises of its own" in (Hooks.__doc__ or "")
    assert "its ``finally`` blocks and other cleanup never run" in (tools_module.__doc__ or "")


# --- 8. every --out checked before any work, by one rule ----------------------------------------------

TOOLS_FILE = '''
import asyncio, os
from pathlib import Path
from toolcall_lab.tools import ToolRegistry

registry = ToolRegistry()
MARK = Path(os.environ["T7_MARK"])


@registry.register
async def quick(n: int) -> str:
    """Answers at once."""
    return f"quick {n}"


@registry.register
async def wait_here(n: int) -> str:
    """Says it started, then waits until the run is stopped."""
    MARK.write_text("started")
    await asyncio.Event().wait()
    return "never"


@registry.register
async def stubborn(n: int) -> str:
    """Says it started, and ignores every cancellation (it says so each time)."""
    MARK.write_text("started")
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            MARK.write_text("ignored")
'''


class Endpoint(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint: the first request gets `calls` (name, arguments), the next a
    final answer; it counts the requests it got."""

    calls: ClassVar[list[tuple[str, dict[str, Any]]]] = []
    requests: ClassVar[list[int]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.requests.append(1)
        if len(self.requests) == 1:
            calls = [(f"call_{i}", name, json.dumps(args)) for i, (name, args) in enumerate(self.calls)]
            chunks = response_chunks(content=None, calls=calls, finish_reason="tool_calls")
        else:
            chunks = response_chunks(content="done", calls=[], finish_reason="stop")
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body.encode())))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


class Recording:
    """`toolcall-lab record` against an `Endpoint` in a process of its own group (signals go to the
    whole group, as a terminal's Ctrl-C does); stderr is read line by line as it comes."""

    def __init__(
        self, tmp_path: Path, calls: list[tuple[str, dict[str, Any]]], out: Path, *extra: str
    ) -> None:
        handler = type("Handler", (Endpoint,), {"calls": calls, "requests": []})
        self.handler = handler
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        tools = tmp_path / "t7_tools.py"
        tools.write_text(TOOLS_FILE)
        self.mark = tmp_path / "mark"
        self.lines: list[str] = []
        self.new_line = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolcall_lab", "record", "--model", "m", "--prompt", "go", "--mode",
             "parallel", "--tools", f"{tools}:registry", "--base-url",
             f"http://127.0.0.1:{self.server.server_port}/v1", "--out", str(out), *extra],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "T7_MARK": str(self.mark), "OPENAI_API_KEY": "sk-x"},
            start_new_session=True,
        )  # fmt: skip
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self.new_line:
                self.lines.append(line)
                self.new_line.notify_all()

    def wait_for(self, what: str) -> None:
        """Until stderr says `what`, or the mark file holds it (a guard against a hang, not a timing)."""

        def seen() -> bool:
            return any(what in line for line in self.lines) or (
                self.mark.exists() and self.mark.read_text() == what
            )

        for _ in range(2400):  # (the mark file says nothing when it appears: look every 50 ms)
            with self.new_line:
                if self.new_line.wait_for(lambda: seen() or self.proc.poll() is not None, timeout=0.05):
                    break
        if not seen() or self.proc.poll() is not None:
            self.stop()
            raise AssertionError(f"never saw {what!r}: {self.lines}")

    def signal(self, *sigs: int) -> None:
        for sig in sigs:
            os.killpg(self.proc.pid, sig)

    def finish(self) -> tuple[int, str]:
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"the command hung after the signals: {self.lines}") from None
        self.close()
        return self.proc.returncode, "".join(self.lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.close()

    def close(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.read()
        self.reader.join(60)  # (it ends at the end of stderr)
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.server.shutdown()
        self.server.server_close()


linux_only = pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups (POSIX)")


def test_record_checks_out_before_the_run_and_names_the_users_path(tmp_path: Path) -> None:
    for out, said in [
        (Path("/proc/t7.json"), "--out /proc/t7.json: cannot write a file in /proc"),
        (tmp_path, f"--out {tmp_path}: a folder, not a file; name a file in it"),
    ]:
        rec = Recording(tmp_path, [("quick", {"n": 1})], out)
        code, err = rec.finish()
        assert code == 2 and said in err and ".tmp" not in err, err
        assert rec.handler.requests == []  # nothing ran: the check came first


@pytest.mark.parametrize("command", ["replay", "bench", "import", "generate"])
def test_every_out_makes_missing_folders_and_says_so(tmp_path: Path, capsys: Any, command: str) -> None:
    trace = str(DATA / "traces" / "one_tool_round.json")
    out = tmp_path / "new" / "deeper"
    args = {
        "replay": ["replay", trace, "--out", str(out / "r.json")],
        "bench": ["bench", trace, "--quiet", "--modes", "sequential", "--out", str(out / "b.csv")],
        "import": [
            "import",
            "recording",
            str(DATA / "recordings" / "scripted_weather_news_stock.sse"),
            "--out",
            str(out),
        ],
        "generate": ["generate", "--n", "1", "--out", str(out)],
    }[command]
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    assert f"toolcall-lab {command}: created the folder {out} for --out" in err
    assert any(out.iterdir())


@pytest.mark.parametrize("command", ["replay", "bench", "import", "generate"])
def test_every_out_refuses_the_wrong_kind_of_path_before_any_work(
    tmp_path: Path, capsys: Any, command: str
) -> None:
    trace = str(DATA / "traces" / "one_tool_round.json")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    args, said = {
        "replay": (["replay", trace, "--out", str(tmp_path)], "a folder, not a file"),
        "bench": (["bench", trace, "--quiet", "--out", str(tmp_path)], "use a .csv or .parquet file name"),
        "import": (["import", "recording", trace, "--out", str(a_file)], "a file, not a folder"),
        "generate": (["generate", "--n", "1", "--out", str(a_file)], "a file, not a folder"),
    }[command]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert said in err and str(tmp_path) in err


# --- 4. / 5. / 6. signals in every command that runs --------------------------------------------------


@linux_only
def test_two_quick_ctrl_cs_during_record_still_save_the_run(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    rec = Recording(tmp_path, [("quick", {"n": 1}), ("wait_here", {"n": 2})], out)
    rec.wait_for("started")
    rec.signal(signal.SIGINT, signal.SIGINT)  # back to back, to the process group
    code, err = rec.finish()
    assert code == 130 and "Traceback" not in err, err
    assert "saving the run so far to" in err and f"saved the run so far to {out}" in err
    trace = load(out)
    assert (trace.outcome.status, trace.outcome.reason) == ("aborted", "interrupted")
    assert [e.status for e in trace.rounds[0].executions] == ["ok", "cancelled"]


@linux_only
def test_sigterm_during_record_saves_the_run_and_exits_143(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    rec = Recording(tmp_path, [("quick", {"n": 1}), ("wait_here", {"n": 2})], out)
    rec.wait_for("started")
    rec.signal(signal.SIGTERM)
    code, err = rec.finish()
    assert code == 143 and "Traceback" not in err, err
    assert "terminated (SIGTERM): stopping the run; saving the run so far" in err
    assert f"terminated (SIGTERM): saved the run so far to {out}" in err
    trace = load(out)
    assert trace.outcome.reason == "interrupted" and trace.outcome.error.startswith(
        "SIGTERM; the run stopped"
    )
    assert (
        "the run was interrupted (SIGTERM) while this call was running"
        in trace.rounds[0].executions[1].result
    )


@linux_only
def test_a_second_ctrl_c_stops_waiting_for_a_call_that_ignores_its_cancellation(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    rec = Recording(tmp_path, [("quick", {"n": 1}), ("stubborn", {"n": 2})], out)
    rec.wait_for("started")
    rec.signal(signal.SIGINT)
    rec.wait_for("ignored")  # it caught the cancellation and goes on: the command waits for it
    assert rec.proc.poll() is None
    rec.signal(signal.SIGINT)
    code, err = rec.finish()
    assert code == 130 and "Traceback" not in err, err
    assert "Ctrl-C again: no longer waiting for calls that have not stopped" in err
    trace = load(out)
    quick, stubborn = trace.rounds[0].executions
    assert quick.status == "ok" and stubborn.status == "cancelled"
    assert "it had not stopped when the run gave up waiting for it" in stubborn.result
    assert "a second signal gave up waiting" in (trace.outcome.error or "")


def test_a_signal_while_the_record_is_saved_is_said_and_the_save_goes_on() -> None:
    from toolcall_lab._stopping import Outside, catch_signals

    heard: list[tuple[str, str]] = []
    outside = Outside(lambda event, name: heard.append((event, name)))
    undo = catch_signals(outside, (signal.SIGINT, signal.SIGTERM))
    try:
        outside.saving = True
        signal.raise_signal(signal.SIGINT)  # a real signal to this process: nothing is raised
        signal.raise_signal(signal.SIGTERM)
    finally:
        undo()
    assert heard == [("saving", "Ctrl-C"), ("saving", "SIGTERM")]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # (put back)


def real_time_trace(tmp_path: Path) -> Path:
    tools = ToolRegistry([simulated("slow", 3600.0), simulated("fast", 0.0)])
    model = ScriptedModel([ScriptedResponse(tool_calls=(("fast", {}), ("slow", {})), latency_s=0.01), "done"])
    return save(as_trace(run_virtual(run(model, tools, "go", mode="parallel"))), tmp_path / "slow.json")


@linux_only
@pytest.mark.parametrize(("sigs", "code", "words"), [
    ((signal.SIGINT, signal.SIGINT), 130, "interrupted (Ctrl-C)"),
    ((signal.SIGTERM,), 143, "terminated (SIGTERM)"),
])  # fmt: skip
def test_a_real_time_replay_stopped_by_signals_saves_the_run(
    tmp_path: Path, sigs: tuple[int, ...], code: int, words: str
) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolcall_lab", "replay", str(real_time_trace(tmp_path)), "--real-time", "--out", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the announcement: the signals are handled from here on
    assert "Ctrl-C stops it and saves the run so far" in line and "so does SIGTERM" in line
    for sig in sigs:
        os.killpg(proc.pid, sig)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("the replay hung after the signals") from None
    assert proc.returncode == code and "Traceback" not in err, err
    assert f"{words}: saved the run so far to {out}" in err
    assert load(out).outcome.reason == "interrupted"


@linux_only
def test_sigterm_to_a_bench_process_group_with_jobs_is_clean(tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    for i in range(40):
        (folder / f"t{i:02}.json").write_bytes((DATA / "traces" / "two_tool_rounds.json").read_bytes())
    out = tmp_path / "b.csv"
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolcall_lab", "bench", str(folder), "--jobs", "2", "--real-time",
         "--modes", "sequential,parallel", "--out", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None
    seen = ""
    while "| 1/40" not in seen:  # the progress bar: a trace was compared
        ch = proc.stderr.read(1)
        if not ch:
            break
        seen += ch
    os.killpg(proc.pid, signal.SIGTERM)  # every process of the group: the parent and its workers
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("the bench hung after SIGTERM") from None
    err = seen + err
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "Exception in thread" not in err, err
    assert "toolcall-lab bench: terminated (SIGTERM) after" in err
    assert out.exists() and out.with_name("b_missing.csv").exists()


# --- 9. validate reports a trace that contradicts itself -----------------------------------------------


def two_rounds(tmp_path: Path) -> dict[str, Any]:
    tools = ToolRegistry([simulated("t", 0.1, lambda a: f"r{a['i']}")])
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=(("t", {"i": 1}), ("t", {"i": 2}))),
            ScriptedResponse(tool_calls=(("t", {"i": 3}),)),
            "the answer",
        ]
    )
    path = save(as_trace(run_virtual(run(model, tools, "go"))), tmp_path / "clean.json")
    return json.loads(path.read_text())


def edited(doc: dict[str, Any], change: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    change(doc)
    return doc


EDITS = {
    "an execution's arguments": (
        lambda d: d["rounds"][0]["tool_executions"][1].__setitem__("arguments", '{"i": 99}'),
        "rounds[0] call call_0_1 (position 1): its execution ran with '{\"i\": 99}', the call holds",
    ),
    "a call's arguments against its assistant message": (
        lambda d: d["rounds"][1]["tool_calls"][0].__setitem__("arguments", '{"i": 77}'),
        "rounds[1] call call_1_0 (position 0): the call is t('{\"i\": 77}'), its assistant message says",
    ),
    "all_calls_failed while every call is ok": (
        lambda d: d["outcome"].update(status="failed", reason="all_calls_failed", final_answer=None),
        "outcome: failed/all_calls_failed, but the last round (rounds[2]) is the model's answer, not a batch",
    ),
    "all_calls_failed after a batch whose calls are ok": (
        lambda d: (
            d["rounds"].pop(),
            d["outcome"].update(status="failed", reason="all_calls_failed", final_answer=None),
        ),
        "outcome: failed/all_calls_failed, but in the last round (rounds[1]) these calls did not fail: call_1_0 (ok)",
    ),
    "a final answer that is not the last response": (
        lambda d: d["outcome"].__setitem__("final_answer", "something else"),
        "outcome.final_answer is 'something else', but the last round (rounds[2]) answered 'the answer'",
    ),
    "the final round deleted": (
        lambda d: d["rounds"].pop(),
        "outcome: completed/final_answer, but the last round (rounds[1]) is a batch of 1 tool call(s)",
    ),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_validate_reports_each_contradiction_naming_round_and_call(
    tmp_path: Path, capsys: Any, name: str
) -> None:
    change, said = EDITS[name]
    clean = two_rounds(tmp_path)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited(clean, change)))
    from toolcall_lab.trace_files import validate

    _, warnings = validate(path)
    assert [w for w in warnings if w.startswith("contradiction: ")] == [f"contradiction: {said}"] or any(
        said in w for w in warnings
    ), warnings
    assert cli.main(["validate", str(path)]) == 1  # not only with --strict
    out = capsys.readouterr().out
    assert out.startswith(f"CONTRADICTS {path}") and said in out
    assert cli.main(["validate", str(tmp_path / "clean.json")]) == 0


# --- 14. trace files grow linearly with the rounds (schema 3) ------------------------------------------


def many_rounds(rounds: int, hook: Any = None) -> Trace:
    tools = ToolRegistry([simulated("t", 0.01, lambda a: "r" * 2000)])
    steps: list[Any] = [
        ScriptedResponse(tool_calls=tuple(("t", {"i": r * 10 + i}) for i in range(3)), latency_s=0.01)
        for r in range(rounds)
    ]
    model = ScriptedModel([*steps, "done"])
    hooks = Hooks(before_model_call=hook) if hook else None
    return as_trace(run_virtual(run(model, tools, "go", max_rounds=rounds + 5, hooks=hooks)))


def test_a_trace_file_grows_linearly_with_its_rounds(tmp_path: Path) -> None:
    sizes = {n: save(many_rounds(n), tmp_path / f"{n}.json").stat().st_size for n in (20, 40, 80)}
    assert sizes[40] < 2.1 * sizes[20] and sizes[80] < 2.1 * sizes[40]  # (version 2: about 4x each)
    results = 80 * 3 * 2000
    assert sizes[80] < 4 * results  # each result: in its execution and once in the requests


def test_schema_3_loads_back_the_same_trace_also_when_a_hook_edits_earlier_messages(tmp_path: Path) -> None:
    def edits(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(messages) > 4:
            messages[1] = {**messages[1], "content": f"seen {len(messages)}"}  # edited for this call
        return messages

    for trace in (many_rounds(6), many_rounds(6, edits)):
        path = save(trace, tmp_path / "t.json")
        doc = json.loads(path.read_text())
        assert doc["schema_version"] == 3 and "messages" not in doc["rounds"][2]["request"]
        assert load(path) == trace
        assert path.read_text() == save(load(path), tmp_path / "again.json").read_text()  # stable
    kept = [r["request"]["kept"] for r in doc["rounds"]]
    assert kept == [1, 1, 1, 1, 1, 1, 1]  # (each request shares only the user message with the last one)


def test_version_2_files_load_to_the_same_objects_and_save_as_version_3(tmp_path: Path) -> None:
    from tests.conftest import REPO as repo

    for path in sorted((repo / "tests" / "fixtures" / "traces").glob("v2_*.json")):
        doc = json.loads(path.read_text())
        try:
            old = load(path)
        except Exception:
            continue  # (the negative fixtures)
        assert [list(r.request_messages) for r in old.rounds] == [
            r["request"]["messages"] for r in doc["rounds"]
        ]
        assert load(save(old, tmp_path / path.name)) == redact_trace(old)  # (a credential is removed)


def test_a_delta_that_keeps_more_than_there_was_is_refused_naming_the_field(tmp_path: Path) -> None:
    from toolcall_lab.exceptions import TraceFormatError

    path = save(many_rounds(3), tmp_path / "t.json")
    doc = json.loads(path.read_text())
    doc["rounds"][1]["request"]["kept"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(
        TraceFormatError, match=r"rounds\[1\]\.request\.kept: 99 messages kept, but the previous"
    ):
        load(path)
    doc["schema_version"] = 2  # version 2 has whole requests only
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=r"rounds\[0\]\.request\.messages: missing"):
        load(path)

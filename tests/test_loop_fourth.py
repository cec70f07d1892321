"""Issue 11, fourth pass: what a fresh-eyes tester found in records and on the CLI. Unencodable
strings in every file we write, Ctrl-C during long commands, the virtual clock at huge times,
model-call timing checked on load. Virtual clock unless a test needs a real process."""

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
from typing import Any

import pandas as pd
import pytest

from tests.conftest import DATA, REPO
from toolcall_lab import cli
from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import TraceError, TraceFormatError, UsageError
from toolcall_lab.loop import run
from toolcall_lab.messages import ToolCall
from toolcall_lab.models import ScriptedModel, ScriptedResponse, response_chunks
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import simulated
from toolcall_lab.tools import ToolRegistry
from toolcall_lab.trace import Trace, TraceMetadata
from toolcall_lab.trace_files import dumps, load, save

ODD = "a\ud800b\udfffc"
"""Lone surrogates: legal in a Python string and in JSON text (as escapes), not in UTF-8."""


def odd_run() -> Trace:
    """A run where a tool returns, the model sends and the title holds lone surrogates."""
    reg = ToolRegistry()

    @reg.register
    def echo(x: str) -> str:
        return ODD + x

    call = ToolCall(tool_call_id="call\udc00", name="echo", arguments='{"x": "\\ud83d"}')
    model = ScriptedModel([ScriptedResponse(tool_calls=(call,), latency_s=0.5), f"done {ODD}"])
    result = run_virtual(run(model, reg, f"hi {ODD}"))
    assert result.executions[0].result == ODD + "\ud83d"
    return Trace.from_run(result, TraceMetadata(title=f"odd {ODD}", origin="scripted"))


# --- 1. strings UTF-8 cannot encode ---------------------------------------------------------------


def test_lone_surrogates_from_a_tool_and_a_model_save_as_utf8_and_load_back_the_same(tmp_path) -> None:
    trace = odd_run()
    path = save(trace, tmp_path / "odd.json")
    raw = path.read_bytes()
    raw.decode("utf-8")  # a valid UTF-8 file
    assert b"\\ud800" in raw  # the escape JSON defines for the code point
    assert load(path) == trace
    assert load(path).rounds[0].executions[0].result == ODD + "\ud83d"
    assert load(path).outcome.final_answer == f"done {ODD}"


def test_a_surrogate_pair_kept_as_two_code_points_is_a_clear_error_naming_round_and_call(tmp_path) -> None:
    """JSON reads an escaped high+low pair as one character: such a string cannot round-trip, so
    saving says where it is instead of writing a record that would load as something else."""
    reg = ToolRegistry()

    @reg.register
    def decoded_badly() -> str:
        return "x\ud83d\ude00y"  # what bytes.decode("utf-16", "surrogatepass") can give

    model = ScriptedModel([ScriptedResponse(tool_calls=(("decoded_badly", {}, "c7"),)), "ok"])
    trace = Trace.from_run(run_virtual(run(model, reg, "go")), TraceMetadata(title="t", origin="scripted"))
    target = tmp_path / "pair.json"
    with pytest.raises(
        TraceError,
        match=r"pair\.json: cannot be saved: rounds\[0\]\.tool_executions\[0\]"
        r"\.result \(round 0, call c7\)",
    ):
        save(trace, target)
    assert not target.exists() and not list(tmp_path.iterdir())  # nothing half-written


def test_the_cli_writes_such_strings_without_a_traceback(tmp_path) -> None:
    """validate (prints the title), replay --out (a trace), bench --out (CSV tables), import report."""
    source = save(odd_run(), tmp_path / "odd.json")
    code, out, err = cli_run("validate", str(source))
    assert code == 0 and "Traceback" not in err and "odd a\\ud800b" in out
    code, out, err = cli_run("replay", str(source), "--out", str(tmp_path / "replayed.json"))
    assert code == 0, err
    assert load(tmp_path / "replayed.json").rounds[0].executions[0].result == ODD + "\ud83d"
    table = tmp_path / "b.csv"
    code, out, err = cli_run("bench", str(source), "--quiet", "--modes", "sequential", "--out", str(table))
    assert code == 0 and "Traceback" not in err, err
    calls = pd.read_csv(tmp_path / "b_calls.csv")
    assert calls["tool_call_id"].tolist() == ["call\\udc00"]  # escaped, and said so:
    assert "column tool_call_id: a lone surrogate" in err and "b_calls.csv: row 0" in err


def test_the_notebook_csv_export_escapes_and_warns(tmp_path) -> None:
    from toolcall_lab.notebook.export import write_csv

    with pytest.warns(UserWarning, match="row 0 column name"):
        path = write_csv([{"name": ODD, "n": 1}], tmp_path / "t.csv")
    assert path.read_text(encoding="utf-8").splitlines()[1] == "a\\ud800b\\udfffc,1"


def cli_run(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
    )
    return proc.returncode, proc.stdout, proc.stderr


# --- 3. the virtual clock far from zero -------------------------------------------------------------


def finishes(fn: Any) -> Any:
    """Run `fn` in a daemon thread: a hang fails the test instead of stalling the suite."""
    box: list[Any] = []
    worker = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    worker.start()
    worker.join(60)
    assert box, "still running after 60 s: the virtual clock stopped advancing"
    return box[0]


@pytest.mark.parametrize("seconds", [1e8, 1e12, 1e15])
def test_runs_and_replays_with_huge_durations_complete_on_the_virtual_clock(seconds) -> None:
    def record_and_replay() -> tuple[Trace, Any, Any]:
        tool = simulated("slow", seconds)
        model = ScriptedModel(
            [ScriptedResponse(tool_calls=(("slow", {"k": 1}), ("slow", {"k": 2})), latency_s=seconds), "done"]
        )
        result = run_virtual(run(model, [tool], "go", mode="parallel"))
        trace = Trace.from_run(result, TraceMetadata(title="huge", origin="scripted"))
        return trace, replay(Trace.from_dict(trace.to_dict()), "sequential"), replay(trace, "parallel")

    trace, sequential, parallel = finishes(record_and_replay)
    assert trace.outcome.status == "completed"
    assert trace.wall_time_s == pytest.approx(2 * seconds)
    assert sequential.status == "completed" and sequential.wall_time_s == pytest.approx(3 * seconds)
    assert parallel.wall_time_s == pytest.approx(2 * seconds)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, "1"])
def test_scripted_and_simulated_durations_must_be_finite_and_not_negative(bad) -> None:
    with pytest.raises(UsageError, match="latency_s"):
        ScriptedResponse(content="x", latency_s=bad)
    with pytest.raises(UsageError, match="seconds"):
        simulated("t", bad)


# --- 4. model-call times checked on load, like tool executions ---------------------------------------


def doc() -> dict[str, Any]:
    return json.loads(dumps(load(DATA / "traces" / "one_tool_round.json")))


def response(d: dict[str, Any], k: int = 0) -> dict[str, Any]:
    return d["rounds"][k]["response"]


@pytest.mark.parametrize(
    "change, where, what",
    [
        (lambda d: response(d).update(latency_s="0.8"), "rounds[0].response.latency_s", "expected a number"),
        (lambda d: response(d).update(latency_s=None), "rounds[0].response.latency_s", "null, but"),
        (lambda d: response(d).update(latency_s=5.0), "rounds[0].response.latency_s", "does not match"),
        (lambda d: response(d, 1).update(ended_at=99.0), "rounds[1].response.latency_s", "does not match"),
        (lambda d: response(d).update(ttfc_s=0.7), "rounds[0].response.ttfc_s", "does not match"),
        (
            lambda d: response(d).update(first_chunk_at=-0.5, ttfc_s=-0.5),
            "first_chunk_at",
            "outside the call",
        ),
        (lambda d: response(d).update(started_at=float("nan")), "started_at", "finite"),
        (lambda d: response(d).update(started_at=-1.0, latency_s=1.8), "started_at", "negative time"),
        (lambda d: d["outcome"].update(wall_time_s=0.5), "outcome.wall_time_s", "contradicts its rounds"),
        (lambda d: d["outcome"].update(wall_time_s=-1.0), "outcome.wall_time_s", "negative"),
        (lambda d: d["outcome"].update(wall_time_s=float("inf")), "outcome.wall_time_s", "finite"),
        (
            lambda d: d["rounds"][0]["tool_executions"][0].update(started_at=-1.0, duration_s=2.0),
            "tool_executions[0].started_at",
            "negative time",
        ),
    ],
)
def test_a_model_call_or_run_whose_times_contradict_each_other_is_refused_on_load(
    tmp_path, change, where, what
) -> None:
    d = doc()
    change(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(TraceFormatError) as raised:
        load(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ") and where in message and what in message, message
    code, _, err = cli_run("bench", str(path), "--quiet", "--modes", "sequential")
    assert code == 1 and "Traceback" not in err and where in err  # in compare's error table


def test_every_bundled_trace_passes_the_timing_checks() -> None:
    for path in sorted((DATA / "traces").glob("*.json")):
        load(path)


# --- 2. Ctrl-C during long CLI commands ----------------------------------------------------------------


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "toolcall_lab", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_for_line(proc: subprocess.Popen[str], text: str) -> None:
    """Block until the process prints `text` (it says so once its Ctrl-C handling is in place); a
    process that never does is killed and fails the test (a guard against a hang, not a timing)."""
    seen = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if text in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc.reader = reader  # type: ignore[attr-defined]
    if not seen.wait(60):
        proc.kill()
        raise AssertionError(f"the process never said {text!r}")


def wait_for_file(proc: subprocess.Popen[str], path: Path) -> None:
    for _ in range(6000):
        if path.exists() or proc.poll() is not None:
            return
        threading.Event().wait(0.01)
    proc.kill()
    raise AssertionError(f"{path} never appeared")


def interrupt(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.stderr is not None and proc.stdout is not None
    err = proc.stderr.read()
    reader = getattr(proc, "reader", None)
    if reader is not None:
        reader.join(60)  # it ends at the end of the output
    else:
        proc.stdout.read()
    proc.stdout.close()
    proc.stderr.close()
    return proc.returncode, err


def test_ctrl_c_during_a_real_time_replay_saves_the_run_so_far_and_exits_130(tmp_path) -> None:
    tool = simulated("slow", 3600.0)
    model = ScriptedModel([ScriptedResponse(tool_calls=(("slow", {}),), latency_s=0.01), "done"])
    recorded = save(
        Trace.from_run(run_virtual(run(model, [tool], "go")), TraceMetadata(title="slow", origin="scripted")),
        tmp_path / "slow.json",
    )
    out = tmp_path / "partial.json"
    proc = start("replay", str(recorded), "--real-time", "--out", str(out))
    wait_for_line(proc, "on the real clock (Ctrl-C stops it and saves the run so far")
    code, err = interrupt(proc)
    assert code == 130, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()  # (what the signal does, then what was done: issue 11, seventh)
    assert len(lines) == 2 and lines[0].startswith(
        f"toolcall-lab replay: interrupted (Ctrl-C): stopping the run; saving the run so far to {out}..."
    )
    assert lines[1].startswith(f"toolcall-lab replay: interrupted (Ctrl-C): saved the run so far to {out}")
    partial = load(out)
    assert (partial.outcome.status, partial.outcome.reason) == ("aborted", "interrupted")
    assert partial.metadata.origin == "replayed"


class _OneToolCall(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint streaming one call of `wait_here` (the tool blocks)."""

    marker = ""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        args = json.dumps({"marker": self.marker})
        body = (
            "".join(
                f"data: {json.dumps(c)}\n\n"
                for c in response_chunks(
                    content=None, calls=[("call_1", "wait_here", args)], finish_reason="tool_calls"
                )
            )
            + "data: [DONE]\n\n"
        )
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body.encode())))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


def test_ctrl_c_during_record_saves_what_was_recorded_and_exits_130(tmp_path) -> None:
    marker = tmp_path / "tool_started"
    handler = type("Handler", (_OneToolCall,), {"marker": str(marker)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "recorded.json"
    try:
        proc = start(
            "record",
            "--model",
            "m",
            "--prompt",
            "go",
            "--tools",
            "tests.blocking_tools:registry",
            "--base-url",
            f"http://127.0.0.1:{server.server_port}/v1",
            "--out",
            str(out),
        )
        wait_for_line(proc, "Ctrl-C stops and saves the run so far")
        wait_for_file(proc, marker)  # the tool is running (it wrote the file)
        code, err = interrupt(proc)
    finally:
        server.shutdown()
        server.server_close()
    assert code == 130, err
    lines = err.strip().splitlines()  # (what the signal does, then what was done: issue 11, seventh)
    assert "Traceback" not in err and len(lines) == 2
    assert lines[0].startswith("toolcall-lab record: interrupted (Ctrl-C): stopping the run; saving")
    assert f"saved the run so far to {out}" in lines[1]
    trace = load(out)
    assert (trace.outcome.status, trace.outcome.reason) == ("aborted", "interrupted")
    (execution,) = trace.rounds[0].executions
    assert execution.name == "wait_here" and execution.status == "cancelled"  # it ran, and was cut
    assert trace.metadata.origin == "recorded"


STRATEGY = """
import pathlib, time
from toolcall_lab.strategies import strategy

@strategy("stalls_on_tool_b")
async def stalls(batch):
    if any(c.name == "tool_b" for c in batch.calls):  # only three_tools_100ms has it
        pathlib.Path({marker!r}).write_text("stalled")
        while True:
            time.sleep(0.01)  # blocks the process until Ctrl-C
    await batch.run_sequential(range(len(batch.calls)))
"""


def test_ctrl_c_partway_through_bench_writes_the_tables_so_far_and_names_what_is_missing(tmp_path) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    for name in ("one_tool_round", "three_tools_100ms", "two_tool_rounds"):
        (folder / f"{name}.json").write_bytes((DATA / "traces" / f"{name}.json").read_bytes())
    marker = tmp_path / "stalled"
    (tmp_path / "stall.py").write_text(STRATEGY.format(marker=str(marker)), encoding="utf-8")
    out = tmp_path / "b.csv"
    proc = start(
        "bench",
        str(folder),
        "--quiet",
        "--modes",
        "sequential",
        "--strategy",
        f"{tmp_path / 'stall.py'}:stalls",
        "--out",
        str(out),
    )
    wait_for_file(proc, marker)
    code, err = interrupt(proc)
    assert code == 130, err
    assert "Traceback" not in err
    assert f"not compared (interrupted): {folder / 'three_tools_100ms.json'}" in err
    assert f"not compared (interrupted): {folder / 'two_tool_rounds.json'}" in err
    assert set(pd.read_csv(out)["trace"]) == {str(folder / "one_tool_round.json")}
    assert sorted(pd.read_csv(tmp_path / "b_missing.csv")["trace"]) == [
        str(folder / "three_tools_100ms.json"),
        str(folder / "two_tool_rounds.json"),
    ]


@pytest.mark.parametrize("where", ["building the tables", "printing the summary"])
def test_ctrl_c_after_every_trace_was_compared_still_writes_every_table(
    tmp_path, capsys, monkeypatch, where
) -> None:
    from toolcall_lab import analysis

    target = "_comparison" if where == "building the tables" else "summary_text"
    real = getattr(analysis, target)
    calls = []

    def pressed_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(analysis, target, pressed_once)
    out = tmp_path / "b.csv"
    code = cli.main(
        ["bench", str(DATA / "traces"), "--quiet", "--modes", "sequential,parallel", "--out", str(out)]
    )
    captured = capsys.readouterr()
    assert code == 130 and "Traceback" not in captured.err
    n = len(list((DATA / "traces").glob("*.json")))
    assert (
        pd.read_csv(out)["trace"].nunique() + pd.read_csv(tmp_path / "b_errors.csv")["trace"].nunique()
        >= n - 1
    )
    assert pd.read_csv(tmp_path / "b_missing.csv").empty  # every trace was compared
    assert "(partial: interrupted)" in captured.out


def test_a_ctrl_c_before_the_run_starts_stops_it_as_it_starts_with_a_record() -> None:
    from toolcall_lab._stopping import run_main

    async def main() -> Any:
        signal.raise_signal(signal.SIGINT)  # before `run` took the run
        await asyncio.sleep(0)
        return await run(ScriptedModel(["never"]), [], "go")

    with pytest.raises(KeyboardInterrupt) as raised:
        run_main(main())
    partial = raised.value.partial_result  # type: ignore[attr-defined]
    assert (partial.status, partial.reason) == ("aborted", "interrupted") and partial.rounds == ()


# --- 5. what approve_result sees; first_only's wording ---------------------------------------------------


def test_approve_result_sees_only_calls_that_ran_and_returned_including_a_returned_exception() -> None:
    from toolcall_lab.loop import Hooks

    seen: list[tuple[str, str]] = []
    reg = ToolRegistry()

    @reg.register
    def fine(k: int) -> str:
        return f"fine {k}"

    @reg.register
    def raises(k: int) -> str:
        raise RuntimeError("boom")

    @reg.register
    def returns_error(k: int) -> object:
        return ValueError("db down")  # returned, not raised: a value

    calls = (
        ("fine", {"k": 1}),
        ("raises", {"k": 1}),
        ("returns_error", {"k": 1}),
        ("nope", {}),
        ("fine", "{not json"),
        ("fine", {"k": 1}),  # duplicate
        ("fine", {"k": 2}),  # rejected
    )
    hooks = Hooks(
        approve_call=lambda call: "not this one" if call.arguments == '{"k": 2}' else None,
        approve_result=lambda call, ex: seen.append((call.name, ex.status)),
    )
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
    result = run_virtual(run(model, reg, "go", hooks=hooks, mode="sequential"))
    statuses = [e.status for e in result.executions]
    assert statuses == ["ok", "error", "ok", "unknown_tool", "invalid_arguments", "duplicate", "rejected"]
    assert seen == [("fine", "ok"), ("returns_error", "ok")]
    assert result.executions[2].result == '"db down"'


def test_first_only_says_every_call_that_ran_failed_when_the_others_were_skipped() -> None:
    def fails(k: int) -> str:
        raise RuntimeError("boom")

    model = ScriptedModel([ScriptedResponse(tool_calls=(("fails", {"k": 1}), ("fails", {"k": 2}))), "x"])
    result = run_virtual(run(model, [fails], "go", mode="first_only"))
    assert (result.status, result.reason) == ("failed", "all_calls_failed")
    assert result.error.startswith("every call of round 0 that ran failed (1 ran, 1 skipped without running)")

"""Strategies, ninth pass (issue 14): the v14 verification's findings.

1. ``serve-trace --delay-scale S`` with a paced stream in flight stopped only after aiohttp's 60 s
   shutdown timeout (SIGTERM, then a second one, did nothing visible) and then printed a traceback; a
   client that went away mid-stream printed "Error handling request ... Traceback" too; any scale, even
   1e308, was accepted. Now a stop cuts the replies in flight at once and says how many, exits 0 as
   `proxy` does; a client that leaves is a normal end, counted in /health; the scale is at most
   `MAX_DELAY_SCALE`.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.test_strategies_eighth import _eager_recording
from toolcall_lab.cli import main
from toolcall_lab.exceptions import UsageError

STOP_WITHIN_S = 30.0
"""A hang bound, not a speed figure: aiohttp's own shutdown timeout (what the bug waited for) is 60 s."""


def _trace_file(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """The eager recording (chunks at 0.2 / 0.4 s, [DONE] at 1.0 s) as a file, and a streaming request
    for its first round."""
    from toolcall_lab.trace_files import save

    trace = _eager_recording()
    path = save(trace, tmp_path / "eager.json")
    return path, {"model": "m", "messages": list(trace.initial_messages), "stream": True}


async def _serve_trace(path: Path, scale: float) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "toolcall_lab",
        "serve-trace",
        str(path),
        "--port",
        "0",
        "--delay-scale",
        str(scale),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        # (a pytest started in the background ignores SIGINT, and its children would inherit that)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
    url = next(w for w in line.split() if w.startswith("http://"))
    return proc, url.rstrip(")")


async def _health_until(http: httpx.AsyncClient, url: str, key: str, value: int) -> dict[str, Any]:
    """/health once `key` has reached `value` (polled; the test's own timeout bounds it)."""
    while True:
        health: dict[str, Any] = (await http.get(url.removesuffix("/v1") + "/health")).json()
        if health[key] >= value:
            return health
        await asyncio.sleep(0.05)


async def _stop(proc: asyncio.subprocess.Process, sig: int) -> tuple[int, str, str]:
    proc.send_signal(sig)
    try:
        code = await asyncio.wait_for(proc.wait(), STOP_WITHIN_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"serve-trace still running {STOP_WITHIN_S:g} s after {sig!r}") from None
    assert proc.stdout is not None and proc.stderr is not None
    return code, (await proc.stdout.read()).decode(), (await proc.stderr.read()).decode()


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_stop_cuts_a_paced_stream_in_flight_at_once_says_so_and_exits_0(tmp_path, name: str) -> None:
    path, request = _trace_file(tmp_path)

    async def go() -> tuple[int, str, str, bytes, BaseException | None, dict[str, Any]]:
        proc, url = await _serve_trace(path, 1000)  # the stream would take 1000 s
        received, failure = b"", None
        try:
            async with (
                httpx.AsyncClient(timeout=STOP_WITHIN_S) as http,
                http.stream("POST", url + "/chat/completions", json=request) as reply,
            ):
                assert reply.status_code == 200
                health = await _health_until(http, url, "answered", 1)  # the stream is under way
                code, out, err = await _stop(proc, getattr(signal, name))
                try:
                    async for piece in reply.aiter_bytes():
                        received += piece
                except httpx.HTTPError as exc:
                    failure = exc
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        return code, out, err, received, failure, health

    code, out, err, received, failure, health = asyncio.run(go())
    assert code == 0
    assert "Traceback" not in err and "Error handling request" not in err
    assert f"toolcall-lab serve-trace: {name} received: stopping; 1 reply in flight cut off" in err
    assert "served 1 request(s) (0 refused, 1 cut off by the stop)" in out
    assert b"[DONE]" not in received and failure is not None  # cut off: the client can tell
    assert health["disconnected"] == 0


def test_a_client_that_leaves_mid_stream_is_a_normal_end_counted_in_health(tmp_path) -> None:
    path, request = _trace_file(tmp_path)

    async def go() -> tuple[int, str, str, dict[str, Any], bytes]:
        proc, url = await _serve_trace(path, 5)  # chunks at 1 s and 2 s, [DONE] at 5 s
        try:
            async with httpx.AsyncClient(timeout=STOP_WITHIN_S) as http:
                async with (
                    httpx.AsyncClient(timeout=STOP_WITHIN_S) as leaver,
                    leaver.stream("POST", url + "/chat/completions", json=request) as reply,
                ):
                    first = await anext(reply.aiter_raw())  # the first chunk, then away
                health = await _health_until(http, url, "disconnected", 1)
            code, out, err = await _stop(proc, signal.SIGTERM)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        return code, out, err, health, first

    code, out, err, health, first = asyncio.run(go())
    assert first.startswith(b"data: {")
    assert health == {"ok": True, "requests": 1, "answered": 1, "disconnected": 1, "refused": 0}
    assert "Traceback" not in err and "Error handling request" not in err
    assert code == 0 and "no reply was in flight" in err
    assert "served 1 request(s) (0 refused, 1 left by their client before the end)" in out


@pytest.mark.parametrize("command", ["serve-trace", "proxy"])
@pytest.mark.parametrize("scale", ["1e308", "1000.5"])
def test_the_delay_scale_has_a_finite_stated_bound(tmp_path, capsys, command: str, scale: str) -> None:
    """1e308 was accepted: a request then got no bytes, and the server took 60 s to stop."""
    path, _ = _trace_file(tmp_path)
    argv = [command, str(path)] if command == "serve-trace" else [command, "--upstream", str(path)]
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--port", "0", "--delay-scale", scale])
    assert stopped.value.code == 2
    assert f"argument --delay-scale: '{scale}': must be >= 0 and <= 1000" in capsys.readouterr().err


def test_trace_upstream_refuses_a_scale_beyond_the_bound_and_the_cli_states_the_same_bound() -> None:
    from toolcall_lab import _cli_runs
    from toolcall_lab.proxy import TraceUpstream
    from toolcall_lab.proxy.upstreams import MAX_DELAY_SCALE

    assert _cli_runs.MAX_DELAY_SCALE == MAX_DELAY_SCALE == 1000
    trace = _eager_recording()
    assert TraceUpstream(trace, delay_scale=MAX_DELAY_SCALE).delay_scale == MAX_DELAY_SCALE
    for bad in (1e308, float("nan"), -1.0):
        with pytest.raises(UsageError, match="must be a number from 0 to 1000"):
            TraceUpstream(trace, delay_scale=bad)


def test_serve_trace_help_states_the_bound_and_that_a_stop_cuts_replies_in_flight(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["serve-trace", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "at most 1000" in text and "A stop (SIGTERM, Ctrl-C) cuts off the replies still in flight" in text

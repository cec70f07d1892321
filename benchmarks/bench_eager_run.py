"""A whole run on the virtual clock, eager against parallel (issue 14: eager within 1.5x of parallel).

`bench_modes.py` times scheduling only: the calls reach the batch as parsed calls. Here the whole run
is timed: the model's stream (chunks, the parser), eager's completeness tracking per chunk, the batch,
the record. Two streams of one 64-call batch: two chunks per call (a header, then the arguments whole,
as `ScriptedModel` streams), and twelve (a header, then the arguments in about eleven pieces, as real
providers stream them), followed by a final answer.

CPU time of this process (``time.process_time``), not wall time: on a shared machine other processes'
load adds wall time to whichever run it lands on, and a figure from the best of many samples still
moved by 2x between runs of the tester's wall-time script at a load average of 6 on 2 cores. Each
sample is 3 runs after a full collection; the figure is the best of `SAMPLES` samples per mode, the modes
interleaved. The function-call count of one run (cProfile, deterministic) is printed beside it.

Run: `python benchmarks/bench_eager_run.py [--quick]`; for an A/B, the same script with PYTHONPATH set
to the other code (the first line says which toolcall_lab was imported).
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import json
import pstats
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import toolcall_lab
from toolcall_lab import ScriptedModel, ScriptedResponse, ToolRegistry
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import run
from toolcall_lab.models import ModelRequest
from toolcall_lab.records import ChunkTiming, Timing

N = 64
SAMPLES = 8 if "--quick" in sys.argv else 30
REGISTRY = ToolRegistry()


@REGISTRY.register
async def noop(x: int, text: str = "") -> str:
    """A tool that does nothing."""
    return "ok"


ARGUMENTS = [json.dumps({"x": i, "text": "abcdefghij" * 6}) for i in range(N)]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _pieces() -> list[dict[str, Any]]:
    out = []
    for i, arguments in enumerate(ARGUMENTS):
        head = {"index": i, "id": f"c{i}", "type": "function", "function": {"name": "noop", "arguments": ""}}
        out.append(_chunk({"tool_calls": [head]}))
        step = max(1, len(arguments) // 11)
        for k in range(0, len(arguments), step):
            piece = {"index": i, "function": {"arguments": arguments[k : k + step]}}
            out.append(_chunk({"tool_calls": [piece]}))
    out.append(_chunk({}, "tool_calls"))
    return out


CHUNKS = _pieces()


class TwelvePerCall:
    """The batch streamed in `CHUNKS` over one second, then a final answer."""

    origin = "scripted"
    name = "twelve per call"
    copy_free = True

    def __init__(self) -> None:
        self.served = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        self.served += 1
        if self.served > 1:
            yield _chunk({"role": "assistant", "content": "done"}, "stop")
            return
        for payload in CHUNKS:
            await asyncio.sleep(1.0 / len(CHUNKS))
            yield payload

    def response_timing(self, request: ModelRequest) -> tuple[Timing, ChunkTiming]:
        return Timing(source="placeholder", note="a benchmark's stream"), "spread"


def two_per_call() -> ScriptedModel:
    calls = tuple(("noop", {"x": i}) for i in range(N))
    return ScriptedModel([ScriptedResponse(tool_calls=calls, latency_s=1.0), "done"])


def one(make: Callable[[], Any], mode: str) -> None:
    result = run_virtual(run(make(), REGISTRY, "go", mode=mode))
    assert result.status == "completed" and len(result.rounds[0].executions) == N, result


def main() -> None:
    print(f"toolcall_lab from {toolcall_lab.__file__.rsplit('/', 1)[0]}")
    for label, make in (("2 chunks per call", two_per_call), ("12 chunks per call", TwelvePerCall)):
        calls: dict[str, int] = {}
        best: dict[str, float] = {}
        for mode in ("parallel", "eager"):
            for _ in range(3):
                one(make, mode)
            profile = cProfile.Profile()
            profile.enable()
            one(make, mode)
            profile.disable()
            calls[mode] = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
            best[mode] = float("inf")
        for _ in range(SAMPLES):
            for mode in best:
                gc.collect()
                started = time.process_time()
                for _ in range(3):
                    one(make, mode)
                best[mode] = min(best[mode], (time.process_time() - started) / 3)
        print(
            f"{label}: parallel {best['parallel'] * 1e3:.2f} ms, eager {best['eager'] * 1e3:.2f} ms of CPU per "
            f"run: eager / parallel {best['eager'] / best['parallel']:.2f}x (target <= 1.5x); function calls "
            f"per run {calls['parallel']} / {calls['eager']} ({calls['eager'] / calls['parallel']:.2f}x)"
        )


if __name__ == "__main__":
    main()

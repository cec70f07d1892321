"""An abort and the run's deadline at the same instant: one rule under every strategy (the abort
wins), and a same-strategy replay of the saved recording ends as recorded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from toolcall_lab import ScriptedModel, ScriptedResponse, ToolRegistry, load
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import AbortHandle, run
from toolcall_lab.replay import replay
from toolcall_lab.runs import RunResult
from toolcall_lab.trace import Trace, TraceMetadata
from toolcall_lab.trace_files import save

MODES = ["sequential", "parallel", "serialized", "eager", "first_only", "parallel[cap=2]"]


def _tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    async def work(s: float, k: int) -> str:
        """Sleeps s seconds."""
        await asyncio.sleep(s)
        return f"ok{k}"

    return tools


def _live(mode: str, latency: float, t: float) -> RunResult:
    abort = AbortHandle()
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=(
                    ("work", {"s": 0.1, "k": 0}),
                    ("work", {"s": 0.1, "k": 1}),
                    ("work", {"s": 0.15, "k": 2}),
                ),
                latency_s=latency,
            ),
            ScriptedResponse(tool_calls=(("work", {"s": 0.05, "k": 3}),), latency_s=latency),
            "fin",
        ]
    )

    async def main() -> RunResult:
        async def external() -> None:
            await asyncio.sleep(t)
            abort.abort("ext")

        task = asyncio.ensure_future(external())
        result = await run(model, _tools(), "go", mode=mode, abort=abort, timeout_s=t)
        task.cancel()
        return result

    return run_virtual(main())


def _shape(r: RunResult) -> tuple[object, ...]:
    return (
        r.status,
        r.reason,
        len(r.rounds),
        [
            (e.tool_call_id, e.status, round(e.started_at, 4), round(e.ended_at, 4), e.error)
            for e in r.executions
        ],
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("latency", [0.0, 0.05])
@pytest.mark.parametrize("t", [0.1, 0.2])
def test_abort_at_the_deadline_instant_wins_and_replays(
    mode: str, latency: float, t: float, tmp_path: Path
) -> None:
    recorded = _live(mode, latency, t)
    # (first_only without latency answers before either comes)
    assert (recorded.status, recorded.reason) in {("aborted", "aborted"), ("completed", "final_answer")}
    assert all("deadline" not in (e.error or "") for e in recorded.executions)
    path = tmp_path / "tie.json"
    save(Trace.from_run(recorded, TraceMetadata(title="tie", origin="scripted")), path)
    replayed = replay(load(path), mode)
    assert _shape(replayed)[:3] == _shape(recorded)[:3]
    assert [x[:4] for x in _shape(replayed)[3]] == [x[:4] for x in _shape(recorded)[3]]  # type: ignore[index]
    assert all("deadline" not in (e.error or "") for e in replayed.executions)

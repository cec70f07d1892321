"""A tool that says it started (it writes the file its `marker` argument names) and then waits until
the run is stopped: a test sends Ctrl-C once the file exists, at a known point, whatever the
machine's speed (`test_loop_fourth.py`, ``toolcall-lab record``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from toolcall_lab.tools import ToolRegistry

registry = ToolRegistry()


@registry.register
async def wait_here(marker: str) -> str:
    """Writes `marker`, then waits until the run is stopped."""
    Path(marker).write_text("started", encoding="utf-8")  # noqa: ASYNC240 (a few bytes, once)
    await asyncio.Event().wait()
    return "never"

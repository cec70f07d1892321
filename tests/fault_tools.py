"""Tools that count their side effects, for the fault matrix: each call takes a `key`, and the ledger
says how many times a call with that key started and how many times it finished its work."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

from toolcall_lab.tools import ToolRegistry


class Ledger:
    def __init__(self) -> None:
        self.started: Counter[str] = Counter()
        self.finished: Counter[str] = Counter()
        self.release = threading.Event()
        """Set it to let blocked sync tools return (after the run, in the test's teardown)."""


def fault_tools(ledger: Ledger) -> ToolRegistry:
    reg = ToolRegistry()
    started, finished = ledger.started, ledger.finished

    @reg.register
    async def work(key: str, seconds: float = 0.1) -> str:
        """Does its work for `seconds` (virtual time), then answers."""
        started[key] += 1
        await asyncio.sleep(seconds)
        finished[key] += 1
        return f"done {key}"

    @reg.register
    async def fails(key: str) -> str:
        started[key] += 1
        await asyncio.sleep(0.05)
        raise RuntimeError(f"database unavailable for {key}")

    @reg.register(timeout_s=0.5)
    async def hangs(key: str) -> str:
        started[key] += 1
        await asyncio.sleep(3600)
        finished[key] += 1
        return "never"

    @reg.register
    async def own_timeout(key: str) -> str:
        started[key] += 1
        await asyncio.sleep(0.05)
        raise TimeoutError(f"upstream of {key} took too long")

    @reg.register
    async def own_cancel(key: str) -> str:
        started[key] += 1
        await asyncio.sleep(0.05)
        raise asyncio.CancelledError(f"{key} gave up")

    @reg.register
    async def interrupts(key: str) -> str:
        started[key] += 1
        await asyncio.sleep(0.05)
        raise KeyboardInterrupt

    @reg.register
    def sync_work(key: str) -> str:
        started[key] += 1
        finished[key] += 1
        return f"done {key}"

    @reg.register(timeout_s=0.05)
    def sync_hangs(key: str) -> str:
        started[key] += 1
        ledger.release.wait(30)
        finished[key] += 1
        return "late"

    return reg

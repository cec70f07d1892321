"""Tools that count their side effects, for the fault matrix: each call takes a `key`, and the ledger
says how many times a call with that key started and how many times it finished its work."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from typing import Any

from toolcall_lab.tools import ToolOutcome, ToolRegistry


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

    @reg.register
    def sync_blocks(key: str) -> str:
        """Blocks its worker thread until the test releases it (no limit of its own)."""
        started[key] += 1
        ledger.release.wait(30)
        finished[key] += 1
        return "late"

    @reg.register
    async def stops(key: str) -> str:
        """The bug of calling next() on an empty iterator, in a coroutine."""
        started[key] += 1
        return next(iter(()))

    @reg.register
    def sync_stops(key: str) -> str:
        """The same bug in a sync tool (its StopIteration must not hang the run)."""
        started[key] += 1
        return next(iter(()))

    @reg.register(timeout_s=0.5)
    async def swallows(key: str) -> str:
        """Catches the cancellation at its limit and returns anyway."""
        started[key] += 1
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return "I swallowed the cancel"
        return "never"

    @reg.register
    async def ignores_cancel(key: str) -> str:
        """Catches every cancellation and goes on sleeping: it ends at 3 s whatever happens."""
        started[key] += 1
        loop = asyncio.get_running_loop()
        end = loop.time() + 3.0
        while (left := end - loop.time()) > 0:
            with contextlib.suppress(asyncio.CancelledError):  # the bug under test
                await asyncio.sleep(left)
        return "finished late"

    @reg.register(timeout_s=0.5)
    async def cleanup_fails(key: str) -> str:
        started[key] += 1
        try:
            await asyncio.sleep(3600)
        finally:
            raise RuntimeError("cleanup failed")

    @reg.register
    def returns_generator(key: str) -> Any:
        """Not a generator function: it returns a generator object (its body never runs)."""
        started[key] += 1
        return (finished.update([key]) for _ in range(1))

    @reg.register
    async def returns_nan(key: str) -> dict[str, float]:
        started[key] += 1  # (its result has no JSON form: the record says error, not finished)
        return {"ratio": float("nan")}

    @reg.register
    async def returns_bytes(key: str) -> bytes:
        started[key] += 1
        finished[key] += 1
        return "héllo".encode()

    @reg.register
    async def bad_outcome(key: str) -> ToolOutcome:
        started[key] += 1
        return ToolOutcome(text="x", status="cancelled")  # type: ignore[arg-type]

    return reg

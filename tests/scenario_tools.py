"""Small async tools for loop tests: they sleep (virtual time) and count how many run at once."""

from __future__ import annotations

import asyncio

from toolcall_lab.tools import ToolRegistry


class Gauge:
    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.finished: list[str] = []


def make_tools(gauge: Gauge | None = None, delay: float = 0.1) -> ToolRegistry:
    g = gauge or Gauge()
    reg = ToolRegistry()

    async def timed(name: str, seconds: float) -> None:
        g.active += 1
        g.peak = max(g.peak, g.active)
        try:
            await asyncio.sleep(seconds)
        finally:
            g.active -= 1
        g.finished.append(name)

    @reg.register
    async def get_weather(city: str) -> str:
        """Current weather for a city."""
        await timed("get_weather", delay)
        return f"sunny in {city}"

    @reg.register
    async def get_news(topic: str) -> str:
        await timed("get_news", delay)
        return f"news about {topic}"

    @reg.register
    async def get_stock(ticker: str) -> dict:
        await timed("get_stock", delay)
        return {"ticker": ticker, "price": 100}

    @reg.register
    async def sleep_for(seconds: float) -> str:
        await timed("sleep_for", seconds)
        return f"slept {seconds}"

    @reg.register
    def broken(x: int = 0) -> str:
        raise RuntimeError("database unavailable")

    @reg.register(timeout_s=0.5)
    async def hangs() -> str:
        await asyncio.sleep(3600)
        return "never"

    return reg


THREE = (
    ("get_weather", {"city": "Paris"}),
    ("get_news", {"topic": "Paris"}),
    ("get_stock", {"ticker": "AIR"}),
)

"""The proxy's settings (`ProxySettings`, validated on creation) and the named locks that make concurrent
requests for one batch or one Idempotency-Key wait their turn."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from toolcall_lab.exceptions import UsageError
from toolcall_lab.proxy.store import StoreLimits


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxySettings:
    """Settings of a `ProxyServer`; validated on creation."""

    ttl_s: float = 600.0
    """A batch unused this long expires (its tombstone answers late continuations with 410)."""
    max_batches: int = 10_000
    max_bytes: int = 256 * 1024 * 1024
    tombstone_ttl_s: float = 24 * 3600.0
    max_body_bytes: int = 32 * 1024 * 1024
    """Largest request body accepted (a larger one gets a JSON 413)."""
    upstream_timeout_s: float = 120.0
    """An idle timeout: an upstream request fails (504) when the upstream sends nothing for this long,
    waiting for its answer or between two pieces of a stream. A stream that keeps flowing is never cut."""
    upstream_total_timeout_s: float | None = None
    """A cap on a whole upstream request, stream included (None, the default: no cap)."""
    model: str | None = None
    """Model name sent upstream instead of the client's (None: the client's)."""
    sweep_s: float = 1.0
    """How often expired batches are swept (so /health is current)."""

    def __post_init__(self) -> None:
        if not self.max_body_bytes >= 1024:
            raise UsageError(f"ProxySettings.max_body_bytes={self.max_body_bytes!r}: must be >= 1024")
        if not self.upstream_timeout_s > 0:
            raise UsageError(
                f"ProxySettings.upstream_timeout_s={self.upstream_timeout_s!r}: must be > 0 seconds"
            )
        if self.upstream_total_timeout_s is not None and not self.upstream_total_timeout_s > 0:
            raise UsageError(
                f"ProxySettings.upstream_total_timeout_s={self.upstream_total_timeout_s!r}: must be > 0 "
                "seconds, or None for no cap"
            )
        if not self.sweep_s > 0:
            raise UsageError(f"ProxySettings.sweep_s={self.sweep_s!r}: must be > 0 seconds")

    def limits(self) -> StoreLimits:
        return StoreLimits(
            ttl_s=self.ttl_s,
            max_batches=self.max_batches,
            max_bytes=self.max_bytes,
            tombstone_ttl_s=self.tombstone_ttl_s,
        )


class _Locks:
    """Named locks that exist only while someone holds or waits for them (counted, so none is dropped
    while a waiter still needs it)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, name: str) -> bool:
        return name in self._held

    @contextlib.asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        lock, users = self._held.get(name, (None, 0))
        lock = lock or asyncio.Lock()
        self._held[name] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            users = self._held[name][1] - 1
            if users:
                self._held[name] = (lock, users)
            else:
                del self._held[name]

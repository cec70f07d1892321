"""The proxy's settings (`ProxySettings`, validated on creation), the named locks that make concurrent
requests for one batch or one Idempotency-Key wait their turn, and the flights that let identical
requests in flight at once under one retry marker share one upstream call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

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
    head_timeout_s: float = 30.0
    """A request's head (request line and headers) must arrive whole within this many seconds of its
    first byte (of the connection's opening, for its first request), else a 408: a client trickling
    its head cannot hold a connection."""
    body_timeout_s: float = 60.0
    """A request's body must arrive whole within this many seconds of the end of its head, else a 408
    and the connection closes: a client that stalls mid-body cannot hold a connection slot longer."""
    keepalive_s: float = 75.0
    """An idle kept-alive connection closes after this long (a stalled body: `body_timeout_s`)."""
    max_connections: int = 1000
    """Open client connections at most: at the cap a new connection replaces the longest-idle
    kept-alive one, or gets a 503 when every connection is in use (keep it under the process's limit
    on open files, ``ulimit -n``, minus the upstream pool)."""
    max_inflight_body_bytes: int = 256 * 1024 * 1024
    """Request bodies the proxy holds at once, from a request's head (its Content-Length) until its reply
    is written: a request that would pass it gets a 503 with Retry-After before its body is read, so
    many large bodies arriving at once cannot exhaust memory. At least `max_body_bytes`."""
    close_grace_s: float = 10.0
    """On `ProxyServer.close`, requests in flight get this long to deliver their replies."""

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
        for name in ("sweep_s", "head_timeout_s", "body_timeout_s", "keepalive_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and value > 0):
                raise UsageError(f"ProxySettings.{name}={value!r}: must be > 0 seconds")
        if not (isinstance(self.close_grace_s, int | float) and self.close_grace_s >= 0):
            raise UsageError(f"ProxySettings.close_grace_s={self.close_grace_s!r}: must be >= 0 seconds")
        if (
            not isinstance(self.max_inflight_body_bytes, int)
            or isinstance(self.max_inflight_body_bytes, bool)
            or self.max_inflight_body_bytes < self.max_body_bytes
        ):
            raise UsageError(
                f"ProxySettings.max_inflight_body_bytes={self.max_inflight_body_bytes!r}: must be an integer "
                f">= max_body_bytes ({self.max_body_bytes}), so that one request of the largest size fits"
            )
        if (
            not isinstance(self.max_connections, int)
            or isinstance(self.max_connections, bool)
            or (self.max_connections < 1)
        ):
            raise UsageError(
                f"ProxySettings.max_connections={self.max_connections!r}: must be an integer >= 1"
            )

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

    def hold(self, name: str) -> _Hold:
        """``async with locks.hold(name):`` the lock `name`, made on first use, dropped after its last."""
        return _Hold(self._held, name)


class _Hold:
    """One use of a named lock (a plain async context manager: a generator-based one costs more per use)."""

    __slots__ = ("held", "lock", "name")

    def __init__(self, held: dict[str, tuple[asyncio.Lock, int]], name: str) -> None:
        self.held, self.name = held, name
        self.lock: asyncio.Lock | None = None

    async def __aenter__(self) -> None:
        held, name = self.held, self.name
        lock, users = held.get(name, (None, 0))
        lock = lock or asyncio.Lock()
        held[name] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:
            self._leave(lock)
            raise
        self.lock = lock

    async def __aexit__(self, *exc: object) -> None:
        lock = self.lock
        assert lock is not None
        lock.release()
        self._leave(lock)

    def _leave(self, lock: asyncio.Lock) -> None:
        users = self.held[self.name][1] - 1
        if users:
            self.held[self.name] = (lock, users)
        else:
            del self.held[self.name]


T = TypeVar("T")
_NO_OUTCOME = object()
"""What a flight's waiters get when its leader was cancelled (its client went away): no answer to share."""


class _Flights:
    """Identical requests in flight at once under one name (a retry marker in one scope): the first
    (the leader) does the work, the others wait for it and get its outcome, its result or the same
    exception. When the leader is cancelled (its client went away) a waiter takes its place, so a
    retry never waits for an answer that will not come."""

    def __init__(self) -> None:
        self._running: dict[str, asyncio.Future[object]] = {}

    def __len__(self) -> int:
        return len(self._running)

    async def run(self, name: str, work: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """``(outcome, shared)``: `work`'s result, run here (shared False) or by the request already in
        flight under `name` (shared True); its exception is raised in both."""
        while True:
            running = self._running.get(name)
            if running is None:
                break
            outcome = await asyncio.shield(running)
            if outcome is not _NO_OUTCOME:
                return outcome, True  # type: ignore[return-value]
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._running[name] = future
        try:
            result = await work()
        except asyncio.CancelledError:
            future.set_result(_NO_OUTCOME)
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waited
            raise
        else:
            future.set_result(result)
            return result, False
        finally:
            del self._running[name]

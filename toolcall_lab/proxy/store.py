"""Where the proxy keeps batches: in memory, or durably in SQLite (``--state FILE``) so a restart
resumes open queues.

Batches expire `ttl_s` after they were last used. The store is bounded by count *and* bytes: past
either bound the least recently used batch is evicted. An expired or evicted batch leaves a
`Tombstone` (its call ids, how far it got) for `tombstone_ttl_s`, so a client that continues it gets a
clear "gone" error instead of a partial batch forwarded upstream. Idempotency-Key replies are kept
here too. Reads are served from memory; the SQLite store writes every change through (WAL mode).
"""

from __future__ import annotations

import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from toolcall_lab.exceptions import UsageError
from toolcall_lab.proxy._wire import dumps, loads
from toolcall_lab.proxy.batches import Batch, Tombstone


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredReply:
    """A reply kept for an Idempotency-Key: replayed byte for byte when the same request comes again."""

    request_hash: str
    status: int
    content_type: str
    body: bytes
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreLimits:
    """Bounds of a store; validated on creation."""

    ttl_s: float = 600.0
    max_batches: int = 10_000
    max_bytes: int = 256 * 1024 * 1024
    tombstone_ttl_s: float = 24 * 3600.0
    max_tombstones: int = 100_000

    def __post_init__(self) -> None:
        for name in ("ttl_s", "tombstone_ttl_s"):
            value = getattr(self, name)
            if not value > 0:
                raise UsageError(f"StoreLimits.{name}={value!r}: must be > 0 seconds")
        for name in ("max_batches", "max_bytes", "max_tombstones"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise UsageError(f"StoreLimits.{name}={value!r}: must be an integer >= 1")


class MemoryStore:
    """Batches, tombstones and idempotent replies in memory (lost on restart)."""

    kind = "memory"

    def __init__(self, limits: StoreLimits | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.limits = limits or StoreLimits()
        self.clock = clock
        self._batches: OrderedDict[str, Batch] = OrderedDict()  # least recently used first
        self._sizes: dict[str, int] = {}
        self._by_call: dict[str, dict[str, None]] = {}  # ordered sets: oldest batch first
        self._by_prefix: dict[str, dict[str, None]] = {}
        self._by_start: dict[tuple[str, str], dict[str, None]] = {}
        self._tombs: OrderedDict[str, Tombstone] = OrderedDict()
        self._tombs_by_call: dict[str, set[str]] = {}
        self._replies: OrderedDict[str, StoredReply] = OrderedDict()
        self._reply_bytes = 0
        self.bytes = 0
        self.counts = {"expired": 0, "evicted": 0}

    # --- reading ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._batches)

    def get(self, batch_id: str) -> Batch | None:
        return self._batches.get(batch_id)

    def with_call(self, tool_call_id: str) -> list[Batch]:
        """Live batches holding a call with this id, oldest first."""
        return [self._batches[i] for i in self._by_call.get(tool_call_id, ())]

    def with_prefix(self, prefix_hash: str) -> list[Batch]:
        """Live batches issued for the conversation with this prefix hash, oldest first."""
        return [self._batches[i] for i in self._by_prefix.get(prefix_hash, ())]

    def has_call(self, tool_call_id: str) -> bool:
        return tool_call_id in self._by_call

    def starting(self, tool_call_id: str, prefix_hash: str) -> list[Batch]:
        """Live batches whose first call has this id and whose conversation has this prefix hash."""
        return [self._batches[i] for i in self._by_start.get((tool_call_id, prefix_hash), ())]

    def tombstones_with_call(self, tool_call_id: str) -> list[Tombstone]:
        ids = self._tombs_by_call.get(tool_call_id) or ()
        return [self._tombs[i] for i in ids]

    def summary(self) -> dict[str, Any]:
        states: dict[str, int] = {"open": 0, "finished": 0, "interrupted": 0}
        for b in self._batches.values():
            states[b.state] += 1
        return {
            "state_store": self.kind,
            "batches": len(self._batches),
            "open_batches": states["open"],
            "finished_batches": states["finished"],
            "interrupted_batches": states["interrupted"],
            "tombstones": len(self._tombs),
            "bytes": self.bytes + self._reply_bytes,
            "max_bytes": self.limits.max_bytes,
            "idempotent_replies": len(self._replies),
            **{f"batches_{k}": v for k, v in self.counts.items()},
        }

    # --- writing ---------------------------------------------------------------------------------

    def save(self, batch: Batch) -> None:
        """Insert or update a batch (marks it used now), then enforce the bounds."""
        batch.touched_at = self.clock()
        known = batch.batch_id in self._batches
        self._batches[batch.batch_id] = batch
        self._batches.move_to_end(batch.batch_id)
        size = batch.size
        self.bytes += size - self._sizes.get(batch.batch_id, 0)
        self._sizes[batch.batch_id] = size
        if not known:
            for call in batch.calls:
                self._by_call.setdefault(call.tool_call_id, {})[batch.batch_id] = None
            self._by_prefix.setdefault(batch.prefix_hash, {})[batch.batch_id] = None
            start = (batch.calls[0].tool_call_id, batch.prefix_hash)
            self._by_start.setdefault(start, {})[batch.batch_id] = None
        self._write_batch(batch)
        self._evict()

    def touch(self, batch: Batch) -> None:
        """Mark a batch used (a request referred to it), without rewriting it."""
        batch.touched_at = self.clock()
        if batch.batch_id in self._batches:
            self._batches.move_to_end(batch.batch_id)
            self._write_touch(batch)

    def sweep(self) -> int:
        """Expire batches unused for `ttl_s` and tombstones older than `tombstone_ttl_s`; returns how
        many batches expired. The server calls it on a timer, so counts in /health are current."""
        now = self.clock()
        expired = 0
        while self._batches:  # least recently used first: stop at the first one still fresh
            oldest = next(iter(self._batches.values()))
            if now - oldest.touched_at <= self.limits.ttl_s:
                break
            self._forget(oldest, "expired")
            expired += 1
        while self._tombs:
            first = next(iter(self._tombs.values()))
            if now - first.at <= self.limits.tombstone_ttl_s:
                break
            self._drop_tomb(first.batch_id)
        while self._replies and now - next(iter(self._replies.values())).at > self.limits.ttl_s:
            self._drop_reply(next(iter(self._replies)))
        return expired

    def _evict(self) -> None:
        """Least recently used first, until within both bounds (the newest batch always stays)."""
        limits = self.limits
        while len(self._batches) > limits.max_batches or self.bytes + self._reply_bytes > limits.max_bytes:
            if self._replies and (self._reply_bytes >= self.bytes or len(self._batches) <= 1):
                self._drop_reply(next(iter(self._replies)))
            elif len(self._batches) > 1:
                self._forget(next(iter(self._batches.values())), "evicted")
            else:
                break

    def _forget(self, batch: Batch, reason: str) -> None:
        self.counts[reason] += 1
        del self._batches[batch.batch_id]
        self.bytes -= self._sizes.pop(batch.batch_id, 0)
        for index, key in [
            *((self._by_call, c.tool_call_id) for c in batch.calls),
            (self._by_prefix, batch.prefix_hash),
            (self._by_start, (batch.calls[0].tool_call_id, batch.prefix_hash)),
        ]:
            ids = index.get(key)  # type: ignore[attr-defined]
            if ids is not None:
                ids.pop(batch.batch_id, None)
                if not ids:
                    del index[key]  # type: ignore[attr-defined]
        self._delete_batch(batch.batch_id)
        tomb = Tombstone(
            batch_id=batch.batch_id,
            session=batch.session,
            prefix_hash=batch.prefix_hash,
            call_ids=tuple(c.tool_call_id for c in batch.calls),
            names=tuple(c.name for c in batch.calls),
            answered=batch.answered,
            state=batch.state,
            reason="expired" if reason == "expired" else "evicted",
            at=self.clock(),
        )
        self._add_tomb(tomb)

    def _add_tomb(self, tomb: Tombstone, *, write: bool = True) -> None:
        self._tombs[tomb.batch_id] = tomb
        for cid in tomb.call_ids:
            self._tombs_by_call.setdefault(cid, set()).add(tomb.batch_id)
        if write:
            self._write_tomb(tomb)
        while len(self._tombs) > self.limits.max_tombstones:
            self._drop_tomb(next(iter(self._tombs)))

    def _drop_tomb(self, batch_id: str) -> None:
        tomb = self._tombs.pop(batch_id)
        for cid in tomb.call_ids:
            ids = self._tombs_by_call.get(cid)
            if ids is not None:
                ids.discard(batch_id)
                if not ids:
                    del self._tombs_by_call[cid]
        self._delete_tomb(batch_id)

    # --- idempotent replies ----------------------------------------------------------------------

    def reply_for(self, key: str) -> StoredReply | None:
        reply = self._replies.get(key)
        if reply is not None and self.clock() - reply.at > self.limits.ttl_s:
            self._drop_reply(key)
            return None
        return reply

    def keep_reply(self, key: str, reply: StoredReply) -> None:
        if key in self._replies:
            self._drop_reply(key)
        self._replies[key] = reply
        self._reply_bytes += len(reply.body) + len(key) + 100
        self._write_reply(key, reply)
        self._evict()
        while self._replies and self._reply_bytes > self.limits.max_bytes:
            self._drop_reply(next(iter(self._replies)))

    def _drop_reply(self, key: str) -> None:
        reply = self._replies.pop(key)
        self._reply_bytes -= len(reply.body) + len(key) + 100
        self._delete_reply(key)

    # --- persistence hooks (no-ops in memory) ----------------------------------------------------

    def _write_batch(self, batch: Batch) -> None: ...
    def _write_touch(self, batch: Batch) -> None: ...
    def _delete_batch(self, batch_id: str) -> None: ...
    def _write_tomb(self, tomb: Tombstone) -> None: ...
    def _delete_tomb(self, batch_id: str) -> None: ...
    def _write_reply(self, key: str, reply: StoredReply) -> None: ...
    def _delete_reply(self, key: str) -> None: ...

    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY, touched_at REAL NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS tombstones (batch_id TEXT PRIMARY KEY, at REAL NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY, at REAL NOT NULL, data BLOB NOT NULL, body BLOB NOT NULL
);
"""
SCHEMA_VERSION = "1"


class SQLiteStore(MemoryStore):
    """A `MemoryStore` written through to a SQLite file: a restarted proxy resumes open batches."""

    kind = "sqlite"

    def __init__(
        self, path: str | Path, limits: StoreLimits | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(limits, clock=clock)
        self.path = Path(path)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"--state {self.path}: not a usable SQLite file ({exc})") from None
        if row is None:
            self._db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
        elif row[0] != SCHEMA_VERSION:
            raise UsageError(
                f"--state {self.path}: proxy state schema {row[0]!r}, this version reads {SCHEMA_VERSION!r}; "
                "use another file"
            )
        self._load()

    def _load(self) -> None:
        for (data,) in self._db.execute("SELECT data FROM tombstones ORDER BY at"):
            d = loads(data)
            d["call_ids"], d["names"] = tuple(d["call_ids"]), tuple(d["names"])
            self._add_tomb(Tombstone(**d), write=False)
        rows = self._db.execute("SELECT touched_at, data FROM batches ORDER BY touched_at").fetchall()
        self._loading = True
        for touched, data in rows:
            batch = Batch.from_dict(loads(data))
            self.save(batch)
            batch.touched_at = touched  # keep the expiry time it had before the restart
        self._loading = False
        for key, data, body in self._db.execute("SELECT key, data, body FROM replies ORDER BY at"):
            d = loads(data)
            self._replies[key] = StoredReply(body=body, **d)
            self._reply_bytes += len(body) + len(key) + 100
        self.sweep()

    _loading = False

    def _write_batch(self, batch: Batch) -> None:
        if not self._loading:
            self._db.execute(
                "INSERT OR REPLACE INTO batches VALUES (?, ?, ?)",
                (batch.batch_id, batch.touched_at, dumps(batch.to_dict())),
            )

    def _write_touch(self, batch: Batch) -> None:
        self._db.execute(
            "UPDATE batches SET touched_at=? WHERE batch_id=?", (batch.touched_at, batch.batch_id)
        )

    def _delete_batch(self, batch_id: str) -> None:
        self._db.execute("DELETE FROM batches WHERE batch_id=?", (batch_id,))

    def _write_tomb(self, tomb: Tombstone) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO tombstones VALUES (?, ?, ?)",
            (tomb.batch_id, tomb.at, dumps(asdict(tomb))),
        )

    def _delete_tomb(self, batch_id: str) -> None:
        self._db.execute("DELETE FROM tombstones WHERE batch_id=?", (batch_id,))

    def _write_reply(self, key: str, reply: StoredReply) -> None:
        meta = {k: v for k, v in asdict(reply).items() if k != "body"}
        self._db.execute(
            "INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?)", (key, reply.at, dumps(meta), reply.body)
        )

    def _delete_reply(self, key: str) -> None:
        self._db.execute("DELETE FROM replies WHERE key=?", (key,))

    def close(self) -> None:
        self._db.close()

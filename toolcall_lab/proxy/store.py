"""Where the proxy keeps batches: in memory, or durably in SQLite (``--state FILE``) so a restart
resumes open queues.

Batches expire `ttl_s` after they were last used. Everything the store holds (batches, tombstones,
idempotent replies) counts against `max_bytes`, and at most `max_batches` batches and as many
tombstones are kept. Past a bound, what is cheapest to lose goes first (`MemoryStore._evict`): kept
replies (for an Idempotency-Key) and batches no longer open (finished, interrupted, rebuilt: kept only
so a retry gets the same reply), least recently used first; then open batches, least recently used
first; tombstones last. A forgotten batch leaves a small `Tombstone` (why, how far it got, its call
names) for `tombstone_ttl_s`, so a 410 can say what happened; without one the proxy still recognises
its own ids and answers 410. A batch larger than the whole byte bound is refused (`TooLarge`), never
kept over the bound. Reads are served from memory; the SQLite store writes every change through (WAL).
"""

from __future__ import annotations

import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
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
    kept: bool = True
    """False when the reply was too large to keep: a retry gets an error saying so."""
    headers: dict[str, str] = field(default_factory=dict)
    """The reply's headers besides Content-Type (those of the upstream call it answered)."""
    fields: dict[str, str] = field(default_factory=dict)
    """`batches.request_fields` of the request (to name the fields in which another body differs)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreLimits:
    """Bounds of a store; validated on creation. Tombstones count against `max_bytes` too, and at most
    `max_batches` of them are kept."""

    ttl_s: float = 600.0
    max_batches: int = 10_000
    max_bytes: int = 256 * 1024 * 1024
    tombstone_ttl_s: float = 24 * 3600.0

    def __post_init__(self) -> None:
        for name in ("ttl_s", "tombstone_ttl_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and value > 0):
                raise UsageError(f"StoreLimits.{name}={value!r}: must be > 0 seconds")
        for name in ("max_batches", "max_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UsageError(f"StoreLimits.{name}={value!r}: must be an integer >= 1")


class TooLarge(Exception):
    """A batch (or a reply to keep) larger than the store's whole byte bound."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(size, limit)
        self.size, self.limit = size, limit


class MemoryStore:
    """Batches, tombstones and idempotent replies in memory (lost on restart)."""

    kind = "memory"

    def __init__(self, limits: StoreLimits | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.limits = limits or StoreLimits()
        self.clock = clock
        self._batches: OrderedDict[str, Batch] = OrderedDict()  # least recently used first
        self._done: OrderedDict[str, None] = OrderedDict()  # the batches not open, least recently used first
        self._sizes: dict[str, int] = {}
        self._by_session: dict[str, dict[str, None]] = {}  # session key -> tags (ordered set)
        self._tombs: OrderedDict[str, Tombstone] = OrderedDict()  # oldest first
        self._tomb_bytes = 0
        self._replies: OrderedDict[str, StoredReply] = OrderedDict()  # oldest first
        self._stubs: OrderedDict[str, StoredReply] = OrderedDict()
        """Keys whose reply is not kept (too large, or dropped under pressure): a retry is told so."""
        self._reply_bytes = 0
        self.bytes = 0
        """Bytes of the batches held (the store's total is `total_bytes`)."""
        self.counts = {"expired": 0, "evicted": 0, "refused_too_large": 0, "finals_dropped": 0}
        self.tombstones_dropped = 0
        """Tombstones dropped to stay within the bounds (not by age): a 410 for an unknown batch says so."""

    # --- reading ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._batches)

    @property
    def total_bytes(self) -> int:
        return self.bytes + self._tomb_bytes + self._reply_bytes

    def get(self, tag: str) -> Batch | None:
        return self._batches.get(tag)

    def in_use(self, tag: str) -> bool:
        """Whether a batch or a tombstone has this tag (new tags must be fresh)."""
        return tag in self._batches or tag in self._tombs

    def open_for(self, session_key: str) -> Batch | None:
        """The newest open batch opened by a request with this session key (an ``x-session-id`` retry)."""
        for tag in reversed(self._by_session.get(session_key, {})):
            batch = self._batches[tag]
            if batch.state == "open":
                return batch
        return None

    def tombstone(self, tag: str) -> Tombstone | None:
        return self._tombs.get(tag)

    def summary(self) -> dict[str, Any]:
        states: dict[str, int] = {"open": 0, "finished": 0, "interrupted": 0, "rebuilt": 0}
        for b in self._batches.values():
            states["rebuilt" if b.rebuilt else b.state] += 1
        return {
            "state_store": self.kind,
            "batches": len(self._batches),
            "open_batches": states["open"],
            "finished_batches": states["finished"],
            "interrupted_batches": states["interrupted"],
            "rebuilt_batches": states["rebuilt"],
            "tombstones": len(self._tombs),
            "bytes": self.total_bytes,
            "max_bytes": self.limits.max_bytes,
            "idempotent_replies": len(self._replies) + len(self._stubs),
            "tombstones_dropped": self.tombstones_dropped,
            **{f"batches_{k}": v for k, v in self.counts.items()},
        }

    # --- writing ---------------------------------------------------------------------------------

    def save(self, batch: Batch) -> None:
        """Insert or update a batch (marks it used now), then enforce the bounds.

        Raises `TooLarge` (and keeps nothing) for a new batch larger than the whole byte bound.
        """
        size = batch.size
        known = batch.tag in self._batches
        if size > self.limits.max_bytes and not known:
            self.counts["refused_too_large"] += 1
            raise TooLarge(size, self.limits.max_bytes)
        batch.touched_at = self.clock()
        self._batches[batch.tag] = batch
        self._batches.move_to_end(batch.tag)
        if batch.state == "open":
            self._done.pop(batch.tag, None)
        else:
            self._done[batch.tag] = None
            self._done.move_to_end(batch.tag)
        self.bytes += size - self._sizes.get(batch.tag, 0)
        self._sizes[batch.tag] = size
        if not known and batch.session_key:
            self._by_session.setdefault(batch.session_key, {})[batch.tag] = None
        self._write_batch(batch)
        self._evict(keep=batch.tag)

    def touch(self, batch: Batch) -> None:
        """Mark a batch used (a request referred to it), without rewriting it."""
        batch.touched_at = self.clock()
        if batch.tag in self._batches:
            self._batches.move_to_end(batch.tag)
            if batch.tag in self._done:
                self._done.move_to_end(batch.tag)
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
            self._drop_tomb(first.tag)
        for replies in (self._replies, self._stubs):
            while replies and now - next(iter(replies.values())).at > self.limits.ttl_s:
                self._drop_reply(next(iter(replies)))
        return expired

    def _evict(self, keep: str | None = None) -> None:
        """Back within both bounds, losing what is cheapest first: kept replies (Idempotency-Key replies
        and batches no longer open, which are kept only so a retry gets the same reply), least recently
        used first; then open batches, least recently used first; tombstones last (small, and what lets a
        410 say why). The batch just saved (`keep`) stays; if it alone is over the byte bound (it grew),
        its kept final reply is dropped (a retry of that request then goes upstream)."""
        limits = self.limits
        while len(self._batches) > limits.max_batches or self.total_bytes > limits.max_bytes:
            over_bytes = self.total_bytes > limits.max_bytes
            done = next((t for t in self._done if t != keep), None)
            if over_bytes and self._replies:
                reply_at = next(iter(self._replies.values())).at
                if done is None or reply_at <= self._batches[done].touched_at:
                    self._stub_reply(next(iter(self._replies)), "dropped to stay within --max-bytes")
                    continue
            if done is not None:
                self._forget(self._batches[done], "evicted")
                continue
            oldest = next((t for t in self._batches if t != keep), None)
            if oldest is not None:
                self._forget(self._batches[oldest], "evicted")
            elif (
                (kept := self._batches.get(keep or "")) is not None and kept.final is not None and over_bytes
            ):
                kept.final, kept.final_raw, kept.final_headers = None, None, {}
                kept.final_dropped = True  # its retries are told, never sent upstream again
                self.counts["finals_dropped"] += 1
                self.save(kept)
                return
            elif over_bytes and self._stubs:
                self._drop_reply(next(iter(self._stubs)))
            elif over_bytes and self._tombs:
                self._drop_tomb(next(iter(self._tombs)))
                self.tombstones_dropped += 1
            else:
                break

    def _forget(self, batch: Batch, reason: str) -> None:
        self.counts[reason] += 1
        del self._batches[batch.tag]
        self._done.pop(batch.tag, None)
        self.bytes -= self._sizes.pop(batch.tag, 0)
        if batch.session_key:
            tags = self._by_session.get(batch.session_key)
            if tags is not None:
                tags.pop(batch.tag, None)
                if not tags:
                    del self._by_session[batch.session_key]
        self._delete_batch(batch.tag)
        self._add_tomb(batch.tombstone("expired" if reason == "expired" else "evicted", self.clock()))

    def keep_tombstone(self, tomb: Tombstone) -> None:
        """Remember a batch the proxy cannot hold (a rebuilt record too large to keep) by its tombstone
        alone, so its completing request is never sent upstream again."""
        self._add_tomb(tomb)
        self._evict()

    def _add_tomb(self, tomb: Tombstone, *, write: bool = True) -> None:
        if tomb.tag in self._tombs:
            self._drop_tomb(tomb.tag)
        self._tombs[tomb.tag] = tomb
        self._tomb_bytes += tomb.size
        if write:
            self._write_tomb(tomb)
        while len(self._tombs) > self.limits.max_batches:
            self._drop_tomb(next(iter(self._tombs)))
            self.tombstones_dropped += 1

    def _drop_tomb(self, tag: str) -> None:
        tomb = self._tombs.pop(tag)
        self._tomb_bytes -= tomb.size
        self._delete_tomb(tag)

    # --- idempotent replies ----------------------------------------------------------------------

    def reply_for(self, key: str) -> StoredReply | None:
        reply = self._replies.get(key) or self._stubs.get(key)
        if reply is not None and self.clock() - reply.at > self.limits.ttl_s:
            self._drop_reply(key)
            return None
        return reply

    def keep_reply(self, key: str, reply: StoredReply) -> None:
        """Keep a reply for its Idempotency-Key; one larger than the whole byte bound is kept without its
        body (`StoredReply.kept` False), so a retry is told instead of silently answered anew."""
        if key in self._replies or key in self._stubs:
            self._drop_reply(key)
        if _reply_size(key, reply) > self.limits.max_bytes:
            reply = _stub(reply, f"{len(reply.body)} bytes, more than the proxy may hold (--max-bytes)")
        self._put_reply(key, reply)
        self._evict()

    def _put_reply(self, key: str, reply: StoredReply, *, write: bool = True) -> None:
        (self._replies if reply.kept else self._stubs)[key] = reply
        self._reply_bytes += _reply_size(key, reply)
        if write:
            self._write_reply(key, reply)

    def _stub_reply(self, key: str, why: str) -> None:
        """Under pressure a kept reply loses its body but not its key: a retry is told the reply was not
        kept (409) instead of going upstream again as a new request."""
        reply = self._replies[key]
        self._drop_reply(key)
        self._put_reply(key, _stub(reply, f"{len(reply.body)} bytes, {why}"))

    def _drop_reply(self, key: str) -> None:
        reply = self._replies.pop(key, None) or self._stubs.pop(key)
        self._reply_bytes -= _reply_size(key, reply)
        self._delete_reply(key)

    # --- persistence hooks (no-ops in memory) ----------------------------------------------------

    def _write_batch(self, batch: Batch) -> None: ...
    def _write_touch(self, batch: Batch) -> None: ...
    def _delete_batch(self, tag: str) -> None: ...
    def _write_tomb(self, tomb: Tombstone) -> None: ...
    def _delete_tomb(self, tag: str) -> None: ...
    def _write_reply(self, key: str, reply: StoredReply) -> None: ...
    def _delete_reply(self, key: str) -> None: ...

    def close(self) -> None: ...


def _stub(reply: StoredReply, why: str) -> StoredReply:
    """`reply` without its body (`StoredReply.kept` False), saying why in its content type."""
    return StoredReply(
        request_hash=reply.request_hash,
        status=reply.status,
        content_type=why,
        body=b"",
        at=reply.at,
        kept=False,
        headers=reply.headers,
        fields=reply.fields,
    )


def _reply_size(key: str, reply: StoredReply) -> int:
    headers = sum(len(k) + len(v) + 4 for k, v in reply.headers.items())
    return len(reply.body) + len(key) + 100 + headers + 40 * len(reply.fields)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (tag TEXT PRIMARY KEY, touched_at REAL NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS tombstones (tag TEXT PRIMARY KEY, at REAL NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY, at REAL NOT NULL, data BLOB NOT NULL, body BLOB NOT NULL
);
"""
APPLICATION_ID = 0x546C5078
"""``PRAGMA application_id`` of a proxy state file ("TlPx"), to tell it from other applications' files."""
_TABLES = frozenset({"meta", "batches", "tombstones", "replies"})
SCHEMA_VERSION = "4"
"""1: batches matched by upstream call ids and prefix hashes; 2: batches by proxy id tags; 3: opaque
proxy ids (the upstream's ids kept in records and tombstones), choice fields, idempotency keys by JSON;
4: everything kept is scoped by a digest of the caller's credentials (`batches.scope_of`)."""


class SQLiteStore(MemoryStore):
    """A `MemoryStore` written through to a SQLite file: a restarted proxy resumes open batches."""

    kind = "sqlite"

    def __init__(
        self, path: str | Path, limits: StoreLimits | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(limits, clock=clock)
        self.path = Path(path)
        self._db = self._open(self.path)
        try:
            self._load()
        except (sqlite3.DatabaseError, ValueError, KeyError, TypeError) as exc:
            self._db.close()
            raise UsageError(f"--state {self.path}: cannot read the proxy state in it ({exc!r})") from None

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        """Open (or create) a state file, refusing clearly what is not one: a folder, a path whose folder
        does not exist, a file that is not SQLite, another application's SQLite file, a file another
        proxy holds, a state of another schema."""
        if path.is_dir():
            raise UsageError(f"--state {path}: is a folder; give a file in it, e.g. {path / 'proxy.sqlite'}")
        if not path.parent.is_dir():
            raise UsageError(
                f"--state {path}: the folder {path.parent} does not exist; create it first, or choose "
                "another path"
            )
        try:
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=0)
        except sqlite3.Error as exc:
            raise UsageError(f"--state {path}: cannot open it ({exc})") from None
        try:
            # one proxy per state file: the first takes an exclusive lock and holds it while it runs (the
            # operating system drops it when the process ends, kill -9 included)
            db.execute("PRAGMA locking_mode=EXCLUSIVE")
            db.execute("BEGIN IMMEDIATE")
            app = db.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            ours = tables <= _TABLES and (
                app == APPLICATION_ID
                or (
                    app == 0
                    and "meta" in tables
                    and db.execute("SELECT 1 FROM meta WHERE key='schema_version'").fetchone() is not None
                )
            )
            if tables and not ours:
                db.close()
                shown = ", ".join(sorted(tables)[:8]) + (", ..." if len(tables) > 8 else "")
                raise UsageError(
                    f"--state {path}: a SQLite file of another application (tables: {shown}), not a proxy "
                    "state file; the proxy will not add its tables to it. Give a new file name."
                )
            if not tables and app not in (0, APPLICATION_ID):
                db.close()
                raise UsageError(
                    f"--state {path}: a SQLite file of another application (application_id {app}); give a "
                    "new file name"
                )
            db.execute("COMMIT")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("BEGIN IMMEDIATE")
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.OperationalError as exc:
            db.close()
            if "locked" in str(exc):
                raise UsageError(
                    f"--state {path}: another process (another proxy?) has this state file open. Two "
                    "proxies cannot share one: each would know only its own batches. Give each its own "
                    "file, or stop the other one."
                ) from None
            raise UsageError(f"--state {path}: not a usable SQLite file ({exc})") from None
        except sqlite3.DatabaseError as exc:
            db.close()
            raise UsageError(f"--state {path}: not a SQLite file a proxy can use ({exc})") from None
        if row is None:
            db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
        elif row[0] != SCHEMA_VERSION:
            db.close()
            raise UsageError(
                f"--state {path}: proxy state schema {row[0]!r}, this version reads {SCHEMA_VERSION!r}; "
                "use another file"
            )
        return db

    def _load(self) -> None:
        for (data,) in self._db.execute("SELECT data FROM tombstones ORDER BY at"):
            d = loads(data)
            for name in ("names", "upstream_ids", "call_digests"):
                d[name] = tuple(d[name])
            d["result_digests"] = tuple(d.get("result_digests", ()))  # written before the field existed
            d.setdefault("completed", d["state"] == "finished")  # written before the field existed
            self._add_tomb(Tombstone(**d), write=False)
        rows = self._db.execute("SELECT touched_at, data FROM batches ORDER BY touched_at").fetchall()
        self._loading = True
        try:
            for touched, data in rows:
                batch = Batch.from_dict(loads(data))
                try:
                    self.save(batch)
                except TooLarge:  # the bound was lowered since: forget it, saying so
                    self._batches[batch.tag] = batch
                    self._sizes[batch.tag] = 0
                    self._forget(batch, "evicted")
                    continue
                batch.touched_at = touched  # keep the expiry time it had before the restart
        finally:
            self._loading = False
        for key, data, body in self._db.execute("SELECT key, data, body FROM replies ORDER BY at"):
            self._put_reply(key, StoredReply(body=body, **loads(data)), write=False)
        self._evict()
        self.sweep()

    _loading = False

    def _write_batch(self, batch: Batch) -> None:
        if not self._loading:
            self._db.execute(
                "INSERT OR REPLACE INTO batches VALUES (?, ?, ?)",
                (batch.tag, batch.touched_at, dumps(batch.to_dict())),
            )

    def _write_touch(self, batch: Batch) -> None:
        self._db.execute("UPDATE batches SET touched_at=? WHERE tag=?", (batch.touched_at, batch.tag))

    def _delete_batch(self, tag: str) -> None:
        self._db.execute("DELETE FROM batches WHERE tag=?", (tag,))

    def _write_tomb(self, tomb: Tombstone) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO tombstones VALUES (?, ?, ?)", (tomb.tag, tomb.at, dumps(asdict(tomb)))
        )

    def _delete_tomb(self, tag: str) -> None:
        self._db.execute("DELETE FROM tombstones WHERE tag=?", (tag,))

    def _write_reply(self, key: str, reply: StoredReply) -> None:
        meta = {k: v for k, v in asdict(reply).items() if k != "body"}
        self._db.execute(
            "INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?)", (key, reply.at, dumps(meta), reply.body)
        )

    def _delete_reply(self, key: str) -> None:
        self._db.execute("DELETE FROM replies WHERE key=?", (key,))

    def close(self) -> None:
        self._db.close()

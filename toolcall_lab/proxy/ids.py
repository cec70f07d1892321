"""The call ids the proxy hands out: its own, so a batch is identified by ids only it ever had.

An upstream's call ids cannot identify a batch: some repeat them across responses (``call_0``), some
send empty or no ids (Gemini's OpenAI compatibility), and identical conversations get identical
answers from a deterministic model. So every call the proxy hands out gets an opaque proxy id::

    call_tlp<batch tag>_<position>of<N>        e.g.  call_tlp4f0c9a1be27d_1of3

with a 0-based position (``_0of3``, ``_1of3``, ``_2of3``; error messages count the same way), at most
33 characters, whatever the upstream's id (OpenAI has refused ``tool_calls[].id`` longer than
40 characters). The tag is 12 random hex digits, unique among the batches the proxy holds. The id says
that the call is one of ours (so a batch the proxy no longer holds is recognised as such, even after a
restart without ``--state``), which batch and position it is, and how many calls the batch has. The
upstream's own id is not in it: the proxy keeps the mapping in the batch record (in ``--state`` too)
and, once it forgets the batch, in the batch's tombstone (see `batches.Tombstone`).
"""

from __future__ import annotations

import functools
import re
import secrets
from dataclasses import dataclass

PREFIX = "call_tlp"
MAX_CALLS = 99_999
"""Positions and sizes have at most five digits; a larger batch is refused (507)."""
_ID = re.compile(r"call_tlp([0-9a-f]{12})_(0|[1-9]\d{0,4})of([1-9]\d{0,4})\Z")


@dataclass(frozen=True, slots=True)
class ProxyId:
    """A call id the proxy handed out, taken apart."""

    tag: str
    position: int
    n_calls: int


_RANDOM: list[str] = []


def new_tag() -> str:
    """12 random hex digits (48 bits, from the operating system's random source): unguessable, and the
    store checks it is not in use. Drawn 64 at a time (one system call, not one per batch)."""
    if not _RANDOM:
        pool = secrets.token_hex(6 * 64)
        _RANDOM.extend(pool[i : i + 12] for i in range(0, len(pool), 12))
    return _RANDOM.pop()


def proxy_id(tag: str, position: int, n_calls: int) -> str:
    """The id the client receives for call `position` of the batch `tag`."""
    return f"{PREFIX}{tag}_{position}of{n_calls}"


def parse(value: object) -> ProxyId | None:
    """The parts of a proxy id, or None when `value` is not one (any other id, or not a string)."""
    if type(value) is not str or not value.startswith(PREFIX):
        return None
    return _parse(value)


@functools.lru_cache(maxsize=65536)
def _parse(value: str) -> ProxyId | None:
    """Cached: every request of a conversation resends the ids handed out before."""
    match = _ID.match(value)
    if match is None:
        return None
    position, n_calls = int(match.group(2)), int(match.group(3))
    if position >= n_calls:
        return None
    return ProxyId(match.group(1), position, n_calls)

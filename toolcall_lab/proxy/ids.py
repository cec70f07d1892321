"""The call ids the proxy hands out: its own, so a batch is identified by ids only it ever had.

An upstream's call ids cannot identify a batch: some repeat them across responses (``call_0``), some
send empty or no ids (Gemini's OpenAI compatibility), and identical conversations get identical
answers from a deterministic model. So every call the proxy hands out gets a proxy id::

    <upstream id>_tlp<batch tag>_<position>of<N>        e.g.  call_Ab3x_tlp4f0c9a1be27d_1of3

The tag is 12 random hex digits, unique among the batches the proxy holds. The id says that the call
is one of ours (so a batch the proxy no longer holds is recognised as such, even after a restart
without ``--state``), which batch and position it is, how many calls the batch has, and the
upstream's own id, which the proxy restores in every request it sends upstream. Clients echo ids and
never interpret them; they only see that the ids differ from the upstream's.
"""

from __future__ import annotations

import functools
import re
import secrets
from dataclasses import dataclass

MARKER = "_tlp"
_SUFFIX = re.compile(r"_tlp([0-9a-f]{12})_(\d{1,5})of(\d{1,5})\Z")


@dataclass(frozen=True, slots=True)
class ProxyId:
    """A call id the proxy handed out, taken apart."""

    upstream_id: str
    tag: str
    position: int
    n_calls: int


def new_tag() -> str:
    """12 random hex digits (48 bits): unguessable, and the store checks it is not in use."""
    return secrets.token_hex(6)


def upstream_id_text(value: object) -> str:
    """The upstream's id as it is embedded: a string as is, a missing/None id as '', anything else str()."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def proxy_id(upstream_id: object, tag: str, position: int, n_calls: int) -> str:
    """The id the client receives for call `position` of the batch `tag`."""
    return f"{upstream_id_text(upstream_id)}{MARKER}{tag}_{position}of{n_calls}"


def parse(value: object) -> ProxyId | None:
    """The parts of a proxy id, or None when `value` is not one (any other id, or not a string)."""
    if not isinstance(value, str) or MARKER not in value:
        return None
    return _parse(value)


@functools.lru_cache(maxsize=65536)
def _parse(value: str) -> ProxyId | None:
    """Cached: every request of a conversation resends the ids handed out before."""
    match = _SUFFIX.search(value)
    if match is None:
        return None
    position, n_calls = int(match.group(2)), int(match.group(3))
    if not 0 <= position < n_calls:
        return None
    return ProxyId(value[: match.start()], match.group(1), position, n_calls)

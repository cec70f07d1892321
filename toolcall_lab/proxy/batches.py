"""What the proxy remembers of a batch, and how a client's message list is matched against batches.

A *batch* is one upstream response with N > 1 tool calls served to a ``parallel_tool_calls: false``
client one call per round trip. The client's copy of the conversation then holds a *run*: N pairs of
(assistant message with the one call handed out, its tool message). `find_runs` locates runs of known
batches in a message list: a run starts where the client's messages before it hash to the batch's
*prefix hash* (the conversation the batch was issued for, under the same ``x-session-id``) and
continues while each pair answers the batch's next call id. Identity is therefore (session, prefix,
call ids), never the prefix alone: two conversations with identical messages get separate upstream
batches, and even a deterministic upstream that repeats call ids cannot cross them (see
`choose_batch`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolcall_lab.proxy._wire import dumps

BatchState = Literal["open", "finished", "interrupted"]

NOT_EXECUTED = (
    "Not executed: the user sent a new message before this call was handed out, so the client never "
    "ran it (serialized proxy)."
)
"""The result the upstream sees for calls of an interrupted batch that were never handed out."""


@dataclass(slots=True, kw_only=True)
class CallInfo:
    tool_call_id: str
    name: str
    arguments: str


@dataclass(slots=True, kw_only=True)
class Batch:
    """One upstream response with N calls, served one call per client round trip."""

    batch_id: str
    session: str
    prefix_hash: str
    prefix_len: int
    assistant: dict[str, Any]
    """The assistant message with all N calls, as it goes back upstream."""
    calls: list[CallInfo]
    template: dict[str, Any]
    """id / created / model / system_fingerprint / usage of the upstream response."""
    results: list[Any] = field(default_factory=list)
    """Tool message contents received so far, by position (a string or a list of content parts)."""
    final: dict[str, Any] | None = None
    """The reply sent once all N were answered (a retry of that request gets it again)."""
    state: BatchState = "open"
    created_at: float = 0.0
    touched_at: float = 0.0

    @property
    def answered(self) -> int:
        return len(self.results)

    _assistant_size: int = 0

    @property
    def size(self) -> int:
        """Approximate bytes this record holds (for the store's byte bound)."""
        if not self._assistant_size:
            self._assistant_size = len(dumps(self.assistant)) + len(dumps(self.template))
        results = sum(len(r) if isinstance(r, str) else len(dumps(r)) for r in self.results)
        return 400 + self._assistant_size + results + (len(dumps(self.final)) if self.final else 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "session": self.session,
            "prefix_hash": self.prefix_hash,
            "prefix_len": self.prefix_len,
            "assistant": self.assistant,
            "calls": [[c.tool_call_id, c.name, c.arguments] for c in self.calls],
            "template": self.template,
            "results": self.results,
            "final": self.final,
            "state": self.state,
            "created_at": self.created_at,
            "touched_at": self.touched_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Batch:
        calls = [CallInfo(tool_call_id=c[0], name=c[1], arguments=c[2]) for c in data["calls"]]
        return cls(
            batch_id=data["batch_id"],
            session=data["session"],
            prefix_hash=data["prefix_hash"],
            prefix_len=data["prefix_len"],
            assistant=data["assistant"],
            calls=calls,
            template=data["template"],
            results=data["results"],
            final=data["final"],
            state=data["state"],
            created_at=data["created_at"],
            touched_at=data["touched_at"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Tombstone:
    """What is left of a batch the proxy forgot (expired or evicted): enough to say so clearly."""

    batch_id: str
    session: str
    prefix_hash: str
    call_ids: tuple[str, ...]
    names: tuple[str, ...]
    answered: int
    state: BatchState
    reason: Literal["expired", "evicted"]
    at: float


# --- conversation identity -------------------------------------------------------------------------


def text_of(content: Any) -> str:
    """Message content as text: strings as they are, content-part lists joined, None as ''."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(
                    str(part.get("text", "")) if part.get("type", "text") == "text" else dumps(part).decode()
                )
            else:
                parts.append(str(part))
        return "".join(parts)
    return dumps(content).decode()


def _canonical_arguments(arguments: Any) -> str:
    """Arguments compared by meaning: clients such as LangChain re-serialise them (spacing, key order)."""
    if not isinstance(arguments, str):
        return json.dumps(arguments, sort_keys=True, separators=(",", ":"))
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments


def normal_form(message: dict[str, Any]) -> bytes:
    """The parts of a message that identify a conversation, robust to how clients re-serialise it."""
    calls = [
        (
            c.get("id"),
            (c.get("function") or {}).get("name"),
            _canonical_arguments((c.get("function") or {}).get("arguments")),
        )
        for c in message.get("tool_calls") or []
        if isinstance(c, dict)
    ]
    return dumps([message.get("role"), text_of(message.get("content")), calls, message.get("tool_call_id")])


class PrefixHashes:
    """Hash of every prefix of a message list (a chain), computed lazily and at most once."""

    def __init__(self, messages: Sequence[dict[str, Any]], session: str) -> None:
        self.messages = messages
        self._hashes = [hashlib.sha256(b"toolcall-lab proxy\x00" + session.encode()).hexdigest()]

    def __getitem__(self, length: int) -> str:
        """The hash of ``messages[:length]``."""
        while len(self._hashes) <= length:
            i = len(self._hashes) - 1
            h = hashlib.sha256(self._hashes[-1].encode() + normal_form(self.messages[i])).hexdigest()
            self._hashes.append(h)
        return self._hashes[length]


# --- runs ------------------------------------------------------------------------------------------


def single_call(message: dict[str, Any]) -> dict[str, Any] | None:
    """The one tool call of an assistant message that has exactly one, else None."""
    if message.get("role") != "assistant":
        return None
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or len(calls) != 1 or not isinstance(calls[0], dict):
        return None
    return calls[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """A batch's pairs inside a client's message list: messages[start:end], `answered` results."""

    batch: Batch
    start: int
    end: int
    results: tuple[Any, ...]

    @property
    def answered(self) -> int:
        return len(self.results)


def pairs_from(messages: Sequence[dict[str, Any]], start: int, call_ids: Sequence[str]) -> list[Any]:
    """Contents of the (assistant with call k, tool answering it) pairs at `start` that follow `call_ids`."""
    out: list[Any] = []
    i = start
    for cid in call_ids:
        if i + 1 >= len(messages):
            break
        call = single_call(messages[i])
        tool = messages[i + 1]
        if (
            call is None
            or call.get("id") != cid
            or tool.get("role") != "tool"
            or tool.get("tool_call_id") != cid
        ):
            break
        out.append(tool.get("content"))
        i += 2
    return out


def same_content(a: Any, b: Any) -> bool:
    return a == b or text_of(a) == text_of(b)


def choose_batch(candidates: Sequence[Batch], results: Sequence[Any]) -> Batch:
    """Among batches that fit the same place (identical conversations from an upstream that repeats call
    ids), the one whose recorded results agree with the client's: an exact retry first, then the batch
    waiting for exactly this next result, then the oldest (which will report the conflict)."""

    def agrees(b: Batch) -> bool:
        return all(same_content(x, y) for x, y in zip(b.results, results, strict=False))

    exact = [b for b in candidates if agrees(b) and b.answered >= len(results)]
    if exact:
        return exact[0]
    waiting = [b for b in candidates if agrees(b) and b.answered == len(results) - 1]
    if waiting:
        return waiting[0]
    growing = [b for b in candidates if agrees(b)]
    return growing[0] if growing else candidates[0]


def find_runs(
    messages: Sequence[dict[str, Any]],
    hashes: PrefixHashes,
    batches_starting: Callable[[str, str], list[Batch]],
    has_calls: Callable[[str], bool],
) -> list[Run]:
    """Every run of a known batch in `messages`, left to right (see the module docstring).

    `batches_starting(call_id, prefix_hash)` returns the batches whose first call and conversation
    match (the prefix hash includes the session); `has_calls(call_id)` tells cheaply whether any batch
    holds that id, so prefix hashes are computed only where a run may start.
    """
    runs: list[Run] = []
    i = 0
    n = len(messages)
    while i < n - 1:
        call = single_call(messages[i])
        cid = call.get("id") if call is not None else None
        if not isinstance(cid, str):
            i += 1
            continue
        candidates = batches_starting(cid, hashes[i]) if has_calls(cid) else []
        if not candidates:
            i += 1
            continue
        found = []
        for b in candidates:
            results = pairs_from(messages, i, [c.tool_call_id for c in b.calls])
            if results:
                found.append((b, results))
        if not found:
            i += 1
            continue
        longest = max(len(r) for _, r in found)
        best = choose_batch(
            [b for b, r in found if len(r) == longest], next(r for _, r in found if len(r) == longest)
        )
        results = pairs_from(messages, i, [c.tool_call_id for c in best.calls])
        runs.append(Run(batch=best, start=i, end=i + 2 * len(results), results=tuple(results)))
        i += 2 * len(results)
    return runs


def upstream_tool_messages(batch: Batch, results: Sequence[Any]) -> list[dict[str, Any]]:
    """The batch's N tool messages for the upstream: the client's results, then NOT_EXECUTED."""
    out = []
    for k, call in enumerate(batch.calls):
        content = results[k] if k < len(results) else NOT_EXECUTED
        out.append({"role": "tool", "tool_call_id": call.tool_call_id, "content": content})
    return out


def translate(messages: Sequence[dict[str, Any]], runs: Sequence[Run]) -> list[dict[str, Any]]:
    """The client's messages as the upstream saw the conversation: each run merged back into the batch's
    assistant message with all N calls and N results (unanswered calls marked NOT_EXECUTED)."""
    out: list[dict[str, Any]] = []
    last = 0
    for run in runs:
        out.extend(messages[last : run.start])
        out.append(run.batch.assistant)
        out.extend(upstream_tool_messages(run.batch, run.results))
        last = run.end
    out.extend(messages[last:])
    return out

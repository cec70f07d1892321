"""What the proxy remembers of a batch, and how a client's message list is read back into batches.

A *batch* is one upstream response with N > 1 tool calls, served to a ``parallel_tool_calls: false``
client one call per round trip under proxy ids (see `ids`). In the client's copy of the conversation
a batch appears *split*: up to N pairs of (assistant message with the one call handed out, its tool
message). `scan` finds every split batch in a message list by the proxy ids alone (never by the
upstream's ids or by the conversation around it) and checks that it is shaped the way the proxy
handed it out; `merged` turns one back into the upstream's form: the assistant message with all N
calls under the upstream's ids, then one tool message per call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolcall_lab.proxy._wire import TooDeep, dumps, dumps_sorted, hand_out_reply
from toolcall_lab.proxy.ids import PREFIX, parse, proxy_id

BatchState = Literal["open", "finished", "interrupted"]
ForgetReason = Literal["expired", "evicted", "too_large"]
"""Why the proxy forgot a batch: unused for ``--ttl``, pushed out by ``--max-batches`` / ``--max-bytes``,
or (a record rebuilt from a client's messages) too large to keep at all."""

HANDED_NOT_ANSWERED = (
    "Not executed: this call was handed to the client, but the user sent a new message before its "
    "result came back (serialized proxy)."
)
"""What the upstream sees for a call of an interrupted batch that the client received but never answered."""
NEVER_HANDED_OUT = (
    "Not executed: the user sent a new message before this call was handed to the client, so the "
    "client never ran it (serialized proxy)."
)
"""What the upstream sees for a call of an interrupted batch that was never handed out."""

_UPSTREAM_FIELDS = ("role", "content", "name", "refusal")


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


def result_digest(content: Any) -> str:
    """A result compared by its text (a string and a one-part list with the same text are the same)."""
    return hashlib.sha256(text_of(content).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def call_digest(call: Any) -> str:
    """A call compared by what it asks for: type, name and arguments (compared by meaning: clients
    such as LangChain re-serialise arguments with other spacing or key order)."""
    fn = call.get("function") if isinstance(call, dict) else None
    fn = fn if isinstance(fn, dict) else {}
    what = [str(call.get("type")) if isinstance(call, dict) else "", str(fn.get("name"))]
    what.append(_canonical_arguments(fn.get("arguments")))
    return hashlib.sha256(dumps(what)).hexdigest()[:32]


def _edit_message(where: str, held: Any, position: int, n_calls: int) -> str:
    return (
        f"{where}: call {held!r} (position {position} of {n_calls}) differs from the call the proxy handed "
        "out (its name or arguments were changed); the model's calls go upstream as the model made them. "
        "Send the call back exactly as received (arguments may be re-serialised)."
    )


@dataclass(slots=True, kw_only=True)
class Batch:
    """One upstream response with N calls, served one call per client round trip.

    Results are kept as digests (enough to tell a retry from a conflict): the client resends every
    result with each request, so the proxy never needs their text, and a batch's size does not grow
    with them.
    """

    tag: str
    message: dict[str, Any]
    """The upstream's assistant message with all N calls, as received."""
    template: dict[str, Any]
    """The upstream response's top-level fields (id, created, model, system_fingerprint, usage as sent,
    and any other), without its choices."""
    choice: dict[str, Any] = field(default_factory=dict)
    """The fields of the upstream's choice besides index, message and finish_reason (logprobs, ...):
    they describe the message the first hand-out carries."""
    headers: dict[str, str] = field(default_factory=dict)
    """The upstream reply's headers that describe the call (x-request-id, x-ratelimit-*, ...): the
    first hand-out carries them."""
    session_key: str = ""
    """With ``x-session-id``: a hash of the session and the request that opened the batch (retries)."""
    scope: str = ""
    """`scope_of` the credentials of the request that opened the batch (a digest, never the secret;
    '' for a request without any): only requests with the same credentials may continue it."""
    digests: list[str] = field(default_factory=list)
    """`result_digest` of each result received, by position."""
    final: dict[str, Any] | None = None
    """The reply sent once all N were answered (a retry of that request gets it again)."""
    final_headers: dict[str, str] = field(default_factory=dict)
    """The headers of the upstream call that `final` answers."""
    final_raw: str | None = None
    """The upstream's bytes of `final` (as UTF-8 text) when it went to the client as sent."""
    final_fields: dict[str, str] = field(default_factory=dict)
    """`request_fields` of the request that completed the batch: a retry that differs in one is refused."""
    final_dropped: bool = False
    """The request that completed the batch was answered, but its reply could not be kept (too large for
    ``--max-bytes``): a retry is told so, and the batch never goes upstream a second time."""
    rebuilt: bool = False
    """A record made from the client's messages after the proxy forgot the batch, only to keep the reply
    to the request that completed it (its retries get it again); it never hands out a call."""
    state: BatchState = "open"
    created_at: float = 0.0
    touched_at: float = 0.0
    _ids: list[str] = field(default_factory=list, repr=False, compare=False)
    _size: int = field(default=0, repr=False, compare=False)
    _rendered: dict[int, bytes] = field(default_factory=dict, repr=False, compare=False)

    @property
    def calls(self) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = self.message["tool_calls"]
        return calls

    @property
    def n_calls(self) -> int:
        return len(self.message["tool_calls"])

    @property
    def answered(self) -> int:
        return len(self.digests)

    @property
    def handed_out(self) -> int:
        """How many calls the proxy has handed out: each result received hands out the next."""
        return min(len(self.digests) + 1, len(self.message["tool_calls"]))

    @property
    def completed(self) -> bool:
        """Whether the request that completes the batch was answered by the upstream (its reply kept or
        not): the batch must never go upstream as a completing request again."""
        return self.final is not None or self.final_dropped

    @property
    def client_ids(self) -> list[str]:
        """The proxy ids of the N calls, by position (made once)."""
        if not self._ids:
            n = len(self.message["tool_calls"])
            self._ids = [proxy_id(self.tag, p, n) for p in range(n)]
        return self._ids

    def name(self, position: int) -> str:
        fn = self.calls[position].get("function")
        return str(fn.get("name")) if isinstance(fn, dict) else "?"

    def client_id(self, position: int) -> str:
        return self.client_ids[position]

    def describe(self, position: int) -> str:
        """``'<proxy id>' (name, position k of N)`` for error messages."""
        return f"{self.client_id(position)!r} ({self.name(position)}, position {position} of {self.n_calls})"

    def upstream_id(self, position: int) -> Any:
        """The upstream's id of a call; for a call it sent without one (missing or empty), the proxy id,
        so that every call and its result are paired by a real id upstream."""
        value = self.calls[position].get("id")
        return self.client_ids[position] if value is None or value == "" else value

    def upstream_ids(self) -> tuple[Any, ...]:
        return tuple(self.upstream_id(p) for p in range(self.n_calls))

    def upstream_assistant(self) -> dict[str, Any]:
        """The assistant message as it goes back upstream: all N calls under the upstream's own ids."""
        out = {k: self.message[k] for k in _UPSTREAM_FIELDS if self.message.get(k) is not None}
        out["role"] = "assistant"
        out.setdefault("content", None)
        calls = self.calls
        if any(c.get("id") is None or c.get("id") == "" for c in calls):
            calls = [{**c, "id": self.upstream_id(p)} for p, c in enumerate(calls)]
        out["tool_calls"] = list(calls)
        return out

    def hand_out(self, position: int) -> dict[str, Any]:
        """The assistant message the client receives for `position`: one call, under its proxy id.

        Position 0 is the upstream's message (its text and other fields) with only the first call; later
        positions carry no text (it went out with the first).
        """
        call = {**self.calls[position], "id": self.client_ids[position]}
        if position == 0:
            message = {k: v for k, v in self.message.items() if k != "tool_calls"}
        else:
            message = {"role": "assistant", "content": None}
        message["tool_calls"] = [call]
        return message

    def rendered(self, position: int) -> bytes:
        """The JSON reply that hands out call `position` (> 0) from the queue, written once and kept (a
        retry of that request gets the same bytes; not in ``--state``: made again after a restart)."""
        data = self._rendered.get(position)
        if data is None:
            data = self._rendered[position] = dumps(
                hand_out_reply(self.template, self.choice, self.hand_out(position), position)
            )
        return data

    def edited(self, position: int, held: dict[str, Any]) -> bool:
        """Whether the client's copy of a call differs from the call handed out (id aside)."""
        mine = self.calls[position]
        if held.get("function") == mine.get("function") and held.get("type", "function") == mine.get(
            "type", "function"
        ):
            return False
        return call_digest(held) != call_digest(mine)

    @property
    def size(self) -> int:
        """Approximate bytes this record holds (for the store's byte bound)."""
        if not self._size:
            self._size = (
                400
                + len(dumps(self.message))
                + len(dumps(self.template))
                + len(dumps(self.choice))
                + len(dumps(self.headers))
            )
        final = 0
        if self.final is not None:  # read from `final_raw` when that is kept: about as large again
            held = 2 * len(self.final_raw) if self.final_raw is not None else len(dumps(self.final))
            headers = sum(len(k) + len(v) + 6 for k, v in self.final_headers.items())
            final = held + headers + 40 * len(self.final_fields)
        return self._size + 40 * len(self.digests) + final

    def to_dict(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "message": self.message,
            "template": self.template,
            "choice": self.choice,
            "headers": self.headers,
            "session_key": self.session_key,
            "scope": self.scope,
            "digests": self.digests,
            "final": self.final,
            "final_headers": self.final_headers,
            "final_raw": self.final_raw,
            "final_fields": self.final_fields,
            **({"final_dropped": True} if self.final_dropped else {}),
            "rebuilt": self.rebuilt,
            "state": self.state,
            "created_at": self.created_at,
            "touched_at": self.touched_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Batch:
        return cls(**data)

    def tombstone(self, reason: ForgetReason, at: float) -> Tombstone:
        return Tombstone(
            tag=self.tag,
            names=tuple(self.name(p) for p in range(self.n_calls)),
            upstream_ids=self.upstream_ids(),
            call_digests=tuple(call_digest(c) for c in self.calls),
            answered=self.answered,
            result_digests=tuple(self.digests),
            state=self.state,
            reason=reason,
            at=at,
            scope=self.scope,
            completed=self.completed,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Tombstone:
    """What is left of a batch the proxy forgot (expired or evicted): enough to say so clearly, and to
    send a whole batch the client still holds upstream under the upstream's own ids, unchanged."""

    tag: str
    names: tuple[str, ...]
    upstream_ids: tuple[Any, ...] = ()
    """The upstream's id of each call (the proxy id where it sent none), by position."""
    call_digests: tuple[str, ...] = ()
    """`call_digest` of each call: a client copy that differs was edited."""
    answered: int
    result_digests: tuple[str, ...] = ()
    """`result_digest` of each result the proxy received, by position (empty in tombstones written before
    the field existed): a later copy that differs was edited."""
    state: BatchState
    reason: ForgetReason
    at: float
    scope: str = ""
    """The batch's `Batch.scope`: a tombstone answers only the credentials that opened the batch."""
    completed: bool = False
    """Whether the request that completed the batch was answered (`Batch.completed`): its retry is
    refused, never sent upstream again."""

    def name(self, position: int) -> str:
        return self.names[position]

    @property
    def n_calls(self) -> int:
        return len(self.names)

    @property
    def handed_out(self) -> int:
        """How many of its calls the proxy had handed out when it forgot the batch."""
        return self.n_calls if self.completed else min(self.answered + 1, self.n_calls)

    @property
    def size(self) -> int:
        return (
            200
            + sum(len(n) for n in self.names)
            + sum(len(str(i)) + 8 for i in self.upstream_ids)
            + 40 * len(self.call_digests)
            + 40 * len(self.result_digests)
        )


# --- a client's message list -----------------------------------------------------------------------


class MalformedBatch(ValueError):
    """The messages holding a batch's calls are not shaped the way the proxy handed them out (a 400)."""


class Split:
    """One batch as it appears in a client's message list: messages[start:end].

    Attributes:
        calls: position -> (message index, the call as the client holds it).
        results: position -> (message index, the client's tool message).
    """

    __slots__ = ("calls", "end", "n_calls", "results", "start", "tag", "verified")

    def __init__(self, tag: str, n_calls: int, *, start: int = 0, end: int = 0) -> None:
        self.tag, self.n_calls, self.start, self.end = tag, n_calls, start, end
        self.calls: dict[int, tuple[int, dict[str, Any]]] = {}
        self.results: dict[int, tuple[int, dict[str, Any]]] = {}
        self.verified = False
        """Found exactly as handed out, known results unchanged (the server's quick check): the closer
        checks of ids, calls and results would pass."""

    @property
    def handed(self) -> int:
        """How many of the batch's calls the client holds."""
        return len(self.calls)

    @property
    def answered(self) -> int:
        return len(self.results)


def _where(i: int, message: dict[str, Any]) -> str:
    return f"message {i} ({message.get('role')})"


def scan(messages: Sequence[dict[str, Any]]) -> list[Split]:
    """Every batch the proxy handed out in `messages`, in order; `MalformedBatch` names what is wrong.

    A batch's messages must be contiguous (nothing else between its pairs), hold its calls from position
    0 on, each once, and answer them in order, each after the message that holds it; only the last call
    the client holds may be unanswered (an interruption), and an unfinished batch is never followed by
    an assistant message with other calls (the model cannot have made them). Ids the proxy did not make
    are left alone.
    """
    splits: dict[str, Split] = {}
    owner: list[str | None] = [None] * len(messages)
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            calls = message.get("tool_calls")
            if not isinstance(calls, list):
                continue
            tags: set[str] = set()
            others = 0
            for call in calls:
                pid = parse(call.get("id")) if isinstance(call, dict) else None
                if pid is None:
                    others += 1
                    continue
                split = splits.get(pid.tag)
                if split is None:
                    split = splits[pid.tag] = Split(pid.tag, pid.n_calls)
                elif split.n_calls != pid.n_calls:
                    _same_size(split, pid.n_calls, call.get("id"), i)
                if pid.position in split.calls:
                    raise MalformedBatch(
                        f"{_where(i, message)}: call id {call.get('id')!r} was already in message "
                        f"{split.calls[pid.position][0]}; each call the proxy handed out appears once"
                    )
                split.calls[pid.position] = (i, call)
                tags.add(pid.tag)
            if tags and (others or len(tags) > 1):
                raise MalformedBatch(
                    f"{_where(i, message)} mixes calls the proxy handed out one at a time with other calls; "
                    "keep each call it handed out in its own assistant message, as received"
                )
            if tags:
                owner[i] = tags.pop()
        elif role == "tool":
            cid = message.get("tool_call_id")
            pid = parse(cid)
            if pid is None:
                _not_after_ours(messages, owner, i, cid)
                continue
            found = splits.get(pid.tag)
            if found is None or pid.position not in found.calls:
                raise MalformedBatch(
                    f"{_where(i, message)} answers {cid!r}, but no assistant message before it holds that "
                    "call; send the assistant message the proxy handed out, then its result"
                )
            if found.n_calls != pid.n_calls:
                _same_size(found, pid.n_calls, cid, i)
            held = found.calls[pid.position][1].get("id")
            if cid != held:
                raise MalformedBatch(
                    f"{_where(i, message)} answers {cid!r}, but the call at that position of the batch is "
                    f"{held!r}; send call ids back exactly as handed out"
                )
            if pid.position in found.results:
                raise MalformedBatch(
                    f"{_where(i, message)} answers {cid!r} a second time (first in message "
                    f"{found.results[pid.position][0]})"
                )
            found.results[pid.position] = (i, message)
            owner[i] = pid.tag
    out = list(splits.values())  # made at each batch's first call: in the order of their first calls
    for split in out:
        _check_shape(split, messages, owner)
    return out


def pairs_at_end(messages: Sequence[dict[str, Any]], tag: str, ids: Sequence[str], last: int) -> Split | None:
    """The batch `tag` read from the end of `messages` when it ends the list exactly as handed out:
    (assistant message with the one call ``ids[j]``, its tool message) for j = 0..`last`, and nothing
    of the batch before them. None when it is not so (then `scan` reads the whole list and says what
    is wrong). A request served from the queue needs no more than this: it forwards nothing, and the
    rest of the conversation is read when it goes upstream."""
    start = len(messages) - 2 * (last + 1)
    if start < 0 or last >= len(ids):
        return None
    split = Split(tag, len(ids), start=start, end=len(messages))
    calls, results = split.calls, split.results
    for j in range(last + 1):
        i = start + 2 * j
        held, answer = messages[i], messages[i + 1]
        found = held.get("tool_calls")
        if (
            held.get("role") != "assistant"
            or answer.get("role") != "tool"
            or answer.get("tool_call_id") != ids[j]
            or type(found) is not list
            or len(found) != 1
            or type(found[0]) is not dict
            or found[0].get("id") != ids[j]
        ):
            return None
        calls[j] = (i, found[0])
        results[j] = (i + 1, answer)
    if start:
        before = messages[start - 1]
        pid = parse(before.get("tool_call_id")) if before.get("role") == "tool" else None
        if pid is not None and pid.tag == tag:
            return None
        for call in before.get("tool_calls") or () if before.get("role") == "assistant" else ():
            pid = parse(call.get("id")) if isinstance(call, dict) else None
            if pid is not None and pid.tag == tag:
                return None
    return split


def holds_proxy_ids(messages: Sequence[dict[str, Any]], end: int) -> bool:
    """Whether ``messages[:end]`` hold any id that starts like the proxy's (``call_tlp``), as a call or a
    result: when none do, `scan` would find no batch there (a conservative test: an id that only looks
    like one of the proxy's counts too)."""
    for i in range(end):
        message = messages[i]
        role = message.get("role")
        if role == "tool":
            cid = message.get("tool_call_id")
            if type(cid) is str and cid.startswith(PREFIX):
                return True
        elif role == "assistant":
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                for call in calls:
                    cid = call.get("id") if isinstance(call, dict) else None
                    if type(cid) is str and cid.startswith(PREFIX):
                        return True
    return False


def _not_after_ours(messages: Sequence[dict[str, Any]], owner: list[str | None], i: int, cid: Any) -> None:
    """A tool message with another id must not answer an assistant message holding a call of ours."""
    j = i - 1
    while j >= 0 and messages[j].get("role") == "tool":
        j -= 1
    if j >= 0 and owner[j] is not None:
        held = [c.get("id") for c in messages[j].get("tool_calls") or [] if isinstance(c, dict)]
        raise MalformedBatch(
            f"message {i} (tool) answers {cid!r}, but the assistant message before it (message {j}) holds "
            f"{', '.join(repr(h) for h in held)}, handed out by the proxy; answer that call with its id "
            "exactly as received"
        )


def _same_size(split: Split, n_calls: int, cid: Any, i: int) -> None:
    if n_calls != split.n_calls:
        raise MalformedBatch(
            f"message {i}: call id {cid!r} says its batch has {n_calls} calls, but an earlier id of the "
            f"same batch says {split.n_calls}; call ids must be sent back exactly as handed out"
        )


def _check_shape(split: Split, messages: Sequence[dict[str, Any]], owner: list[str | None]) -> None:
    indexes = [i for i, _ in split.calls.values()] + [i for i, _ in split.results.values()]
    split.start, split.end = min(indexes), max(indexes) + 1
    for j in range(split.start, split.end):
        if owner[j] != split.tag:
            raise MalformedBatch(
                f"{_where(j, messages[j])} sits between the messages of one batch of calls the proxy "
                f"handed out one at a time (messages {split.start}-{split.end - 1}); the proxy cannot "
                "merge such a batch back into the model's answer"
            )
    after: dict[str, Any] = messages[split.end] if split.end < len(messages) else {}
    calls_after = after.get("tool_calls") if after.get("role") == "assistant" else None
    if split.answered < split.n_calls and isinstance(calls_after, list) and calls_after:
        raise MalformedBatch(
            f"{_where(split.end, after)} makes tool calls the proxy did not hand out, right after a batch "
            f"with {split.answered} of its {split.n_calls} calls answered (messages {split.start}-"
            f"{split.end - 1}); after a call the proxy handed out comes its result, or a new user message "
            "to move on"
        )
    held = sorted(split.calls)
    if held != list(range(len(held))):
        missing = next(p for p in range(split.n_calls) if p not in split.calls)
        some = split.calls[held[-1]][1].get("id")
        raise MalformedBatch(
            f"the conversation holds {some!r} (position {held[-1]} of {split.n_calls}) but not the call at "
            f"position {missing} of the same batch; send a batch's messages whole, from its first call on "
            "(every call handed out with its result), or leave the whole batch out"
        )
    answered = sorted(split.results)
    if answered != list(range(len(answered))) or len(answered) < len(held) - 1:
        missing = next(p for p in range(len(held)) if p not in split.results)
        index, call = split.calls[missing]
        raise MalformedBatch(
            f"call {call.get('id')!r} (message {index}, position {missing} of {split.n_calls}) has no "
            "result, but a later call of the same batch does; answer the calls in the order handed out"
        )


# --- the upstream's form ---------------------------------------------------------------------------


def merged(
    batch: Batch | None,
    split: Split,
    messages: Sequence[dict[str, Any]],
    tomb: Tombstone | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """A split batch in the upstream's form, and how many of its calls had to be left out.

    With the proxy's record (`batch`) the upstream gets its own assistant message with all N calls,
    byte for byte (a call it sent without an id gets the proxy id, in the call and in its result).
    Without one (expired, evicted, a restart without ``--state``) the message is rebuilt from the
    client's copies, under the upstream's ids the tombstone (`tomb`) kept, else under the proxy ids the
    client holds; calls the client never received are then unknown and left out (the count says how
    many). Each call gets one tool message: the client's own (under the upstream's id), else a text
    saying truthfully why there is none.
    """
    results = {p: m for p, (_, m) in split.results.items()}
    tools: list[dict[str, Any]] = []
    if batch is not None:
        handed = max(batch.handed_out, split.handed)
        for p in range(batch.n_calls):
            upstream_id = batch.upstream_id(p)
            if p in results:
                tools.append({**results[p], "tool_call_id": upstream_id})
                continue
            if p < batch.answered:  # the server refuses such a history first (`check_results`)
                raise MalformedBatch(f"batch {batch.tag}: the result of position {p} was left out")
            if p < handed:
                content = HANDED_NOT_ANSWERED
            else:
                content = NEVER_HANDED_OUT
            tools.append({"role": "tool", "tool_call_id": upstream_id, "content": content})
        return [batch.upstream_assistant(), *tools], 0
    known = tomb.upstream_ids if tomb is not None and len(tomb.upstream_ids) == split.n_calls else None
    calls = []
    for p in range(split.handed):
        call = split.calls[p][1]
        calls.append({**call, "id": known[p] if known is not None else call.get("id")})
    first = messages[split.calls[0][0]]
    assistant: dict[str, Any] = {"role": "assistant", "content": None}
    assistant.update({k: v for k, v in first.items() if k != "tool_calls"})
    assistant["tool_calls"] = calls
    for p, call in enumerate(calls):
        if p in results:
            tools.append({**results[p], "tool_call_id": call["id"]})
        else:
            tools.append({"role": "tool", "tool_call_id": call["id"], "content": HANDED_NOT_ANSWERED})
    return [assistant, *tools], split.n_calls - split.handed


def check_unedited(split: Split, batch: Batch | None, tomb: Tombstone | None) -> None:
    """The client's copies of a batch's calls must be the calls handed out (what the proxy knows of
    them: its record, else the tombstone's digests); `MalformedBatch` names an edited one."""
    if batch is not None:
        handed = batch.handed_out  # a call not handed out yet is the out-of-order check's business
        for position, (index, held) in split.calls.items():
            if position < handed and batch.edited(position, held):
                raise MalformedBatch(
                    _edit_message(f"message {index}", held.get("id"), position, split.n_calls)
                )
    elif tomb is not None and len(tomb.call_digests) == split.n_calls:
        for position, (index, held) in split.calls.items():
            if call_digest(held) != tomb.call_digests[position]:
                raise MalformedBatch(
                    _edit_message(f"message {index}", held.get("id"), position, split.n_calls)
                )


# --- what a retry is matched on: one definition for every retry path -----------------------------

RENDER_ONLY = frozenset({"messages", "stream", "stream_options"})
"""Request fields a retry of the completing request (or of a first request under ``x-session-id``) may
change: the messages (matched on their own: the batch's ids, calls and results, or the session's
messages) and how the reply is delivered (streamed or not: the proxy renders it as asked)."""


def request_fields(body: dict[str, Any], skip: frozenset[str] = RENDER_ONLY) -> dict[str, str]:
    """A digest of each top-level request field but `skip`, compared as JSON (spacing and key order
    aside). Every retry path compares requests by it: the completing request's retry and a first
    request under ``x-session-id`` (all fields but `RENDER_ONLY`), and an ``Idempotency-Key`` (every
    field: the kept reply is replayed byte for byte, so ``stream`` and the messages count too)."""
    return {
        str(k): hashlib.sha256(dumps_sorted(v)).hexdigest()[:16] for k, v in body.items() if k not in skip
    }


def differing_fields(
    kept: dict[str, str], body: dict[str, Any], skip: frozenset[str] = RENDER_ONLY
) -> list[str]:
    """The fields (sorted) in which `body` differs from the request whose `request_fields` are `kept`."""
    now = request_fields(body, skip)
    return sorted(k for k in kept.keys() | now.keys() if kept.get(k) != now.get(k))


# --- conversation identity for x-session-id retries ------------------------------------------------


def _canonical_arguments(arguments: Any) -> str:
    """Arguments compared by meaning: clients such as LangChain re-serialise them (spacing, key order)."""
    if not isinstance(arguments, str):
        try:
            return json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
        except RecursionError:  # a client's copy (the proxy splits string arguments only): a 400
            raise TooDeep("write") from None
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read: compared as written
        return arguments


def normal_form(message: dict[str, Any]) -> bytes:
    """The parts of a message that identify a conversation, robust to how clients re-serialise it."""
    calls = [
        (
            str(c.get("id")),
            str((c.get("function") or {}).get("name")) if isinstance(c.get("function"), dict) else "",
            _canonical_arguments((c.get("function") or {}).get("arguments"))
            if isinstance(c.get("function"), dict)
            else "",
        )
        for c in message.get("tool_calls") or []
        if isinstance(c, dict)
    ]
    return dumps(
        [str(message.get("role")), text_of(message.get("content")), calls, str(message.get("tool_call_id"))]
    )


SCOPE_HEADERS = (
    "authorization",
    "openai-organization",
    "openai-project",
    "api-key",
    "x-api-key",
    "x-goog-api-key",
)
"""The request headers that name the caller's credentials (lower case, as the server reads them):
OpenAI's, Azure OpenAI's ``api-key``, the ``x-api-key`` of Anthropic-style gateways and Gemini's
``x-goog-api-key``. A credential the proxy did not count here would let two callers share a scope."""
_FIRST_SCOPE_HEADERS = 3
"""The headers of the first scope digest (state schema 4): the others are added to it only when sent,
so a scope made from those three alone is the same digest as before (state files stay valid)."""


def scope_of(headers: dict[str, str]) -> str:
    """The caller's scope: a digest of its credentials (`SCOPE_HEADERS`), or '' when it sends none.

    Everything the proxy keeps (batches, kept replies, ``x-session-id`` retries, tombstones) is keyed by
    it, so one caller never gets another's kept reply or queue; only the digest is held, in memory and
    in ``--state``, never the secret."""
    if headers.keys().isdisjoint(SCOPE_HEADERS):  # no credentials at all (loopback setups): one C-level check
        return ""
    values = [headers.get(name) for name in SCOPE_HEADERS]
    if not any(values):
        return ""
    if values[0]:
        values[0] = _auth_scheme_case(values[0])
    h = hashlib.sha256(b"toolcall-lab proxy scope")
    for value in values[:_FIRST_SCOPE_HEADERS]:
        h.update(b"\x00" + (value or "").encode("latin-1"))  # header values are read as latin-1
    for name, value in zip(SCOPE_HEADERS[_FIRST_SCOPE_HEADERS:], values[_FIRST_SCOPE_HEADERS:], strict=True):
        if value:
            h.update(b"\x01" + name.encode("ascii") + b"\x00" + value.encode("latin-1"))
    return h.hexdigest()[:32]


def _auth_scheme_case(value: str) -> str:
    """``Authorization`` with its scheme in one spelling (RFC 9110 11.1: the scheme is case-insensitive, the
    credentials are not): ``bearer k`` and ``BEARER  k`` are ``Bearer k``, the spelling state files hold,
    so their digests do not change."""
    scheme, space, credentials = value.partition(" ")
    if not space:
        return value
    return f"{scheme[:1].upper()}{scheme[1:].lower()} {credentials.lstrip(' ')}"


def session_key(
    session: str, messages: Sequence[dict[str, Any]], scope: str = "", fields: dict[str, str] | None = None
) -> str:
    """Identity of a request under an ``x-session-id``: the same caller (`scope_of`), the same session,
    the same messages and the same other fields (`request_fields`: another model, temperature or tool
    list would get another answer, so such a request is not a retry of this one)."""
    h = hashlib.sha256(b"toolcall-lab proxy\x00" + scope.encode() + b"\x00")
    h.update(session.encode("utf-8", "surrogatepass"))
    for message in messages:
        h.update(hashlib.sha256(normal_form(message)).digest())
    if fields:
        h.update(b"\x00fields\x00" + dumps_sorted(fields))
    return h.hexdigest()


def translate(
    messages: Sequence[dict[str, Any]], splits: Sequence[Split], forms: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The client's messages with each split batch replaced by its upstream form (`forms`, by tag)."""
    out: list[dict[str, Any]] = []
    last = 0
    for split in sorted(splits, key=lambda s: s.start):
        out.extend(messages[last : split.start])
        out.extend(forms[split.tag])
        last = split.end
    out.extend(messages[last:])
    return out

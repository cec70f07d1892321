"""Anthropic Messages API: ``tool_use`` content blocks, streamed (``input_json_delta``) or whole.

A streamed tool_use whose deltas are all empty takes its ``input`` from ``content_block_start``
(``{}`` for tools without parameters) once its block is closed or the message has a stop reason; a
block cut before either, with no deltas, is incomplete (nothing says ``{}`` was meant). When the
start's ``input`` is not empty and deltas follow, the deltas are kept and a difference reported; a
delta after ``content_block_stop`` is appended and reported. Whole messages carry ``input`` as an
object: it is shown as compact JSON so every format yields an argument *string*.
``stop_reason: "refusal"`` marks every call incomplete; after any other stop reason that is not a
normal end (`_endings`: ``max_tokens``, ``pause_turn``...) a block not closed is incomplete, and so is
the last block of a whole message. An ``input_json_delta`` for a block no start opened holds every
client call of the message back.

Blocks the provider runs itself (``server_tool_use``, ``mcp_tool_use``) and their ``*_tool_result``
blocks are reported in ``server_tool_calls``, never as client calls. An ``error`` event
(``overloaded_error`` mid-stream) ends the stream with the provider's message; blocks that were
not closed by ``content_block_stop`` are marked incomplete.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from toolcall_lab.exceptions import ProviderStreamError
from toolcall_lab.formats._endings import cut_reason, ending_of, how_it_ended
from toolcall_lab.formats._values import (
    a_json_type,
    as_index,
    as_key,
    as_text,
    may_hold_calls,
    wire_format_of,
)
from toolcall_lab.formats.base import (
    ArgumentsDelta,
    CallFinished,
    CallStarted,
    PendingCall,
    StreamAccumulator,
    StreamListener,
    calls_snapshot,
    capped,
    compact_json,
    error_response,
    failure_clause,
    finding,
    provider_ids,
    single_choice,
    usage_problem,
)
from toolcall_lab.formats.errors import describe_error, is_detail_error
from toolcall_lab.messages import Finding, FindingKind, ParsedResponse, ServerToolCall, ToolCall

_SERVER_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})
_QUIET_DELTAS = frozenset({"signature_delta", "citations_delta"})  # known, carry no text nor arguments
_ABSENT: Any = object()  # a tool_use block (start) without `input`
_CALL_BLOCKS = frozenset({"tool_use", *_SERVER_BLOCKS})
_QUIET_BLOCKS = frozenset({"redacted_thinking", "container_upload"})  # known, hold no call nor text


def unknown_block_note(block: Mapping[str, Any], where: str) -> str:
    """The ``unknown_block`` message of a content block of a type this reader does not read; one
    with an id, a name or an input looks like a call, and the message says it was not read."""
    btype = as_key(block.get("type"))
    said = [key for key in ("id", "name", "input") if key in block]
    if said:
        return (
            f"{where}: a call-like content block of unknown type {btype!r} ({'/'.join(said)}: id "
            f"{as_text(block.get('id'))[:40]!r}, name {as_text(block.get('name'))[:40]!r}) was not read: "
            "no call is made of it, it will not be executed"
        )
    return f"{where}: a content block of unknown type {btype!r}; not read"


def _is_tool_use(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "tool_use"


def _header_text(value: Any, what: str, where: str, note: Callable[..., None]) -> Any:
    """An id or name as the wire gives it: a string; a number read as its text; anything else None
    (a fallback id, or no name: never run); the last two reported (``wrong_type``)."""
    if value is None or type(value) is str:
        return value
    if type(value) is int:
        note(
            "wrong_type",
            f"{where}: tool_use {what} {value!r} is a number, not a string; read as {str(value)!r}",
        )
        return str(value)
    note(
        "wrong_type",
        f"{where}: tool_use {what} {as_text(value)[:40]} is {a_json_type(value)}, not a string; "
        "read as absent",
    )
    return None


def _result_of(block: Mapping[str, Any]) -> tuple[str, str | None]:
    """(type, error code) of a ``*_tool_result`` block."""
    content = block.get("content")
    error = None
    if isinstance(content, Mapping) and str(content.get("type", "")).endswith("_error"):
        error = str(content.get("error_code") or content.get("type"))
    elif block.get("is_error"):
        error = "is_error"
    return str(block.get("type")), error


def _server_calls(
    pending: list[PendingCall],
    inputs: dict[int, Any],
    results: dict[str, tuple[str, str | None]],
    findings: list[Finding],
) -> tuple[ServerToolCall, ...]:
    out = []
    for call in pending:
        raw = "".join(call.pieces) if call.pieces else compact_json(inputs.get(call.index) or {})
        tid = call.tool_call_id or ""
        result_type, result_error = results.get(tid, (None, None))
        out.append(
            ServerToolCall(
                tool_call_id=tid,
                name=call.name or "",
                arguments=raw,
                result_type=result_type,
                result_error=result_error,
            )
        )
        findings.append(
            finding(
                "server_tool_call",
                f"server-side tool call {tid} ({call.name}) reported separately; not a client call",
                chunk_index=call.first_chunk,
                tool_call_id=tid or None,
            )
        )
    return tuple(out)


class AnthropicStreamAccumulator(StreamAccumulator):
    """Assemble tool calls and text from Anthropic stream events (``message_start`` ... ``message_stop``)."""

    __slots__ = (
        "_blocks",
        "_calls",
        "_ended",
        "_inputs",
        "_last",
        "_opened",
        "_results",
        "_server",
        "_server_inputs",
        "_stray",
        "_text",
        "_thinking",
        "_unknown_blocks",
        "early",
        "opened",
        "stop_reason",
    )

    def __init__(self, *, batch: int = 0, listener: StreamListener | None = None) -> None:
        super().__init__(batch=batch, listener=listener)
        self.stop_reason: str | None = None
        self.opened = False  # message_start (or the message's end) seen: a later message_start is a new one
        self.early = False  # a content event came before message_start (reported once)
        self._text: list[Any] = []
        self._thinking: list[Any] = []
        self._blocks: dict[Any, tuple[PendingCall, bool]] = {}  # block index -> (call, is client call)
        self._inputs: dict[int, Any] = {}
        self._server_inputs: dict[int, Any] = {}
        self._calls: list[PendingCall] = []
        self._server: list[PendingCall] = []
        self._results: dict[str, tuple[str, str | None]] = {}
        self._stray: str | None = None  # why every client call is held back (orphan arguments came)
        self._ended = False  # message_stop seen: an event of another format after it starts a response
        self._unknown_blocks: dict[Any, str] | None = None  # block index -> a type this reader does not read
        # the call of the last block opened, when that block is a tool_use: its content_block_stop does
        # not show it finished if the message was then cut (max_tokens) or failed (the API closes a cut
        # block too), as the last block of a whole body cut short (`parse_anthropic_message`)
        self._last: PendingCall | None = None
        self._opened: set[Any] = set()  # the indexes of the blocks started (a text_delta elsewhere is odd)

    own_format = "anthropic"

    def _hold_all(self, reason: str) -> None:
        if self._stray is None:
            self._stray = reason

    def feed(self, event: Mapping[str, Any]) -> None:
        n = self.chunk_count
        self.chunk_count = n + 1
        if type(event) is not dict:
            mapped = self._event_mapping(event, n)
            if mapped is None:
                return
            event = mapped
        kind = event.get("type")
        if kind == "content_block_delta":
            if not self.opened:
                self._before_start(kind, n)
            delta: Any = event.get("delta")
            dkind = as_key(delta.get("type")) if type(delta) is dict else None
            if dkind == "input_json_delta":
                self._input_delta(event, delta, n)
            elif dkind == "text_delta":
                text = delta.get("text")
                if text is not None:
                    self._text.append(text)
                index = event.get("index")
                if type(index) is int and index not in self._opened:
                    self.note(
                        "orphan_delta",
                        f"chunk {n}: text_delta for block {index}, which was never opened "
                        f"(no content_block_start); its text is kept ({as_text(text)[:60]})",
                        chunk_index=n,
                    )
                if self._blocks:
                    index = event.get("index")
                    if type(index) is not int:
                        index = self._index(event, n, "content_block_delta")
                    self._hold(index, "a text_delta arrived in its tool_use block", n)
            elif dkind == "thinking_delta":
                thought = delta.get("thinking")
                if thought is not None:
                    self._thinking.append(thought)
            elif dkind not in _QUIET_DELTAS:
                self._odd_delta(event, delta, n)
        elif kind == "content_block_start":
            if not self.opened:
                self._before_start(kind, n)
            self._block_start(event, n)
        elif kind == "content_block_stop":
            if not self.opened:
                self._before_start(kind, n)
            index = event.get("index")
            entry = self._blocks.get(
                index if type(index) is int else self._index(event, n, "content_block_stop")
            )
            if entry is not None:
                entry[0].done = True
            self._content_elsewhere(event.get("content_block"), kind, "content_block", n)
        elif kind == "message_start":
            self.opened = True
            message = self._part(event, "message", n, required=True)
            rid, model = message.get("id"), message.get("model")
            self.response_id = rid if type(rid) is str else self.response_id
            self.model = model if type(model) is str else self.model
            self._usage(message.get("usage"), n)
            content = message.get("content")
            if content:
                self._start_content(content, n)
        elif kind == "message_delta":
            self.opened = True
            stop = self._part(event, "delta", n, required=True).get("stop_reason")
            if stop is not None and type(stop) is not str:
                self.note(
                    "wrong_type",
                    f"chunk {n}: stop_reason {as_text(stop)[:60]} is {a_json_type(stop)}, not a string; "
                    "kept as its JSON text",
                    chunk_index=n,
                )
                stop = as_text(stop)
            self.stop_reason = stop or self.stop_reason
            self._usage(event.get("usage"), n)
            delta = event.get("delta")
            if type(delta) is dict:
                self._content_elsewhere(delta.get("content"), kind, "delta.content", n)
            self._content_elsewhere(event.get("content"), kind, "content", n)
        elif kind == "message_stop":
            self.opened = self._ended = True
            whole: Any = event.get("message")
            if whole:
                self._content_elsewhere(
                    whole.get("content") if type(whole) is dict else whole, kind, "message", n
                )
        elif kind == "ping":
            pass
        elif (
            kind == "error" or event.get("error") or event.get("object") == "error" or is_detail_error(event)
        ):
            self.fail(describe_error(event.get("error") or event), dict(event), n)
        else:
            self._unknown(event, kind, n)

    def _content_elsewhere(self, content: Any, kind: str, where: str, n: int) -> None:
        """Content (blocks, text) sent where the API sends none (``message_delta``,
        ``content_block_stop``, ``message_stop``): not read as blocks, reported
        (``malformed_chunk``); when it may hold a call, every call of the message is held back."""
        if not content:
            return
        calls = may_hold_calls(content)
        held = "; it may hold tool call data, so every call of this message is held back" if calls else ""
        self.note(
            "malformed_chunk",
            f"chunk {n}: {kind} carries {where}, where the API sends no content; not read "
            f"({as_text(content)[:80]}){held}",
            chunk_index=n,
        )
        if calls:
            self._hold_all(f"chunk {n}: {kind} carried {where} that may hold tool call data")

    def _unknown(self, event: Mapping[str, Any], kind: Any, n: int) -> None:
        """An event without ``type`` or of a type this reader does not know. One of another wire
        format goes to `_foreign_event`; one that may hold call data is never dropped unseen: the
        call of the block it names (every client call, when it names none) is held back."""
        fmt = wire_format_of(event)
        if fmt is not None and fmt != "anthropic":
            self._foreign_event(event, n, fmt, self._ended)
            return
        holds = may_hold_calls(event)
        what = (
            "an event without `type`"
            if kind is None
            else f"an Anthropic event of unknown type {as_key(kind)!r}"
        )
        if not holds:
            if kind is None:
                self.note(
                    "malformed_chunk", f"chunk {n}: {what}; skipped ({as_text(event)[:80]})", chunk_index=n
                )
            else:
                self.note("unknown_event", f"chunk {n}: {what} ignored", chunk_index=n)
            return
        self.note(
            "malformed_chunk",
            f"chunk {n}: {what} that may hold tool call data; skipped ({as_text(event)[:100]}), and the "
            "call(s) it may belong to held back",
            chunk_index=n,
        )
        index = event.get("index")
        entry = self._blocks.get(index) if type(index) is int else None
        if entry is not None:
            if entry[1]:
                entry[0].hold(f"chunk {n}: {what} named its block and may hold its arguments")
        else:
            self._hold_all(f"chunk {n}: {what} may hold tool call data, and which call it is for is unknown")

    def _usage(self, usage: Any, n: int) -> None:
        problem = usage_problem(usage, f"chunk {n}: ")
        if problem is not None:
            self.note("wrong_type", problem, chunk_index=n)
        elif usage is not None:
            self.usage = {**(self.usage or {}), **usage}

    def _before_start(self, kind: str, n: int) -> None:
        """A content event before ``message_start`` (reported once): read as part of that message."""
        if not self.early:
            self.early = True
            self.note(
                "event_before_start",
                f"chunk {n}: {kind} before message_start; read as part of the message that starts after it",
                chunk_index=n,
            )

    def _hold(self, index: Any, why: str, n: int) -> None:
        """Hold back the client call of block `index` (if it is one): `why` it cannot be trusted."""
        entry = self._blocks.get(index)
        if entry is not None and entry[1]:
            entry[0].hold(f"chunk {n}: {why}")

    def _index(self, event: Mapping[str, Any], n: int, what: str) -> int | None:
        """A content event's block index that is not an integer: a decimal string or a whole number
        (``"0"``, ``0.0``) read as that integer (``wrong_type``); absent or anything else None, reported
        (``malformed_chunk``) except on a delta, whose ``orphan_delta`` or hold says so."""
        value = event.get("index")
        if type(value) is int:
            return value
        number = as_index(value)
        if number is not None:
            self.note(
                "wrong_type",
                f"chunk {n}: {what} index {compact_json(value)[:40]} is {a_json_type(value)}, not an "
                f"integer; read as {number}",
                chunk_index=n,
            )
            return number
        if what != "content_block_delta":
            shown = compact_json(value)[:40]
            said = "without `index`" if value is None else f"with index {shown}, not an integer"
            self.note(
                "malformed_chunk",
                f"chunk {n}: {what} {said}; no delta can name its block",
                chunk_index=n,
            )
        return None

    def _orphan(self, index: Any, piece: Any, n: int) -> None:
        """An ``input_json_delta`` for no block a start opened: its text is reported, and every client
        call of the message is held back (which of them it belongs to is unknown), never run without it.
        A delta for a block of a type this reader does not read belongs to that block (reported)."""
        text = piece if isinstance(piece, str) else compact_json(piece) if piece is not None else ""
        unknown = self._unknown_blocks.get(index) if self._unknown_blocks and index is not None else None
        if unknown is not None:
            self.note(
                "unknown_block",
                f"chunk {n}: input_json_delta for block {index!r}, a {unknown!r} block this parser does not "
                f"read: {len(text)} character(s) ({text[:60]!r}) not read",
                chunk_index=n,
            )
            return
        which = (
            "without `index`" if index is None else f"for block {index!r} (no content_block_start opened it)"
        )
        self.note(
            "orphan_delta",
            f"chunk {n}: input_json_delta {which}: {len(text)} character(s) of arguments "
            f"({text[:60]!r}) that no call can take; skipped",
            chunk_index=n,
        )
        if index is None:
            self._hold_open("an input_json_delta came without index while its block was open", n)
        if text and self._stray is None:
            self._stray = (
                f"chunk {n}: an input_json_delta {which} carried arguments: which call they are for is"
                " unknown"
            )

    def _hold_open(self, why: str, n: int) -> None:
        """A delta that names no block: every client call whose block is still open may have lost it."""
        for call, client in self._blocks.values():
            if client and not call.done:
                call.hold(f"chunk {n}: {why}")

    def _odd_delta(self, event: Mapping[str, Any], delta: Any, n: int) -> None:
        """A delta of an unknown type, or one that is not an object: reported, and the call of its
        block (every open call, when the delta names no block) held back."""
        index = self._index(event, n, "content_block_delta")
        if type(delta) is dict:
            self.note(
                "unknown_event",
                f"chunk {n}: unknown Anthropic delta type {as_key(delta.get('type'))!r} in block {index!r} "
                "ignored",
                chunk_index=n,
            )
            what = f"a delta of unknown type {as_key(delta.get('type'))!r}"
        else:
            self.note(
                "malformed_chunk",
                f"chunk {n}: content_block_delta's `delta` is {a_json_type(delta)}, not an object "
                f"({as_text(delta)[:60]}); skipped",
                chunk_index=n,
            )
            what = f"a delta that is not an object ({as_text(delta)[:40]})"
        if index is None:
            self._hold_open(f"{what} came without index while its block was open", n)
        else:
            self._hold(index, f"{what} arrived in its tool_use block", n)

    def _input_delta(self, event: Mapping[str, Any], delta: Mapping[str, Any], n: int) -> None:
        index = event.get("index")
        if type(index) is not int:
            index = self._index(event, n, "content_block_delta")
        entry = self._blocks.get(index) if index is not None else None
        piece = delta.get("partial_json")
        if entry is None:
            self._orphan(index, piece, n)
            return
        call, client = entry
        if type(piece) is not str:
            if piece is None:
                self.note(
                    "malformed_chunk",
                    f"chunk {n}: input_json_delta for block {index!r} without `partial_json` (or null); "
                    "nothing appended",
                    chunk_index=n,
                    tool_call_id=call.tool_call_id,
                )
                return
            piece = call.not_string(piece, n)
        if call.done and piece and not call.late:
            call.late = True
            self.note(
                "late_delta",
                f"chunk {n}: input_json_delta for block {index!r} after its content_block_stop; "
                f"appended to call {call.tool_call_id}",
                chunk_index=n,
                tool_call_id=call.tool_call_id,
            )
        if piece:
            call.pieces.append(piece)
            if client and self.listener is not None:
                self.listener(
                    ArgumentsDelta(chunk_index=n, choice_index=0, call_index=call.index, delta=piece)
                )

    def _header(self, block: Mapping[str, Any], n: int) -> tuple[Any, Any]:
        """A block's id and name; values that are not strings reported (a number read as its text,
        anything else as absent: the call then has a fallback id, or no name and never runs)."""

        def note(kind: FindingKind, message: str) -> None:
            self.note(kind, message, chunk_index=n)

        where = f"chunk {n}"
        return _header_text(block.get("id"), "id", where, note), _header_text(
            block.get("name"), "name", where, note
        )

    def _start_content(self, content: Any, n: int) -> None:
        """Blocks in ``message_start.message.content`` (the API sends it empty; a shim may send the
        whole message there): each read as a block started at that point (a ``tool_use`` is a call,
        its ``input`` the arguments, complete only when the message stops normally, as a block never
        closed), reported (``content_in_start``) so the odd shape is seen."""
        if not isinstance(content, list):
            self.note(
                "malformed_chunk",
                f"chunk {n}: message_start's `content` is {a_json_type(content)}, not a list of blocks; "
                f"skipped ({as_text(content)[:100]})",
                chunk_index=n,
            )
            if may_hold_calls(content) or (isinstance(content, Mapping) and "input" in content):
                self._hold_all(f"chunk {n}: message_start's content may hold tool call data and was not read")
            return
        kinds = [as_text(b.get("type"))[:30] if isinstance(b, Mapping) else a_json_type(b) for b in content]
        self.note(
            "content_in_start",
            f"chunk {n}: message_start carries {len(content)} content block(s) ({', '.join(kinds[:5])}); "
            "read as blocks of the message",
            chunk_index=n,
        )
        for position, block in enumerate(content):
            if not isinstance(block, Mapping):
                self.note(
                    "malformed_chunk",
                    f"chunk {n}: message_start content block {position} is {a_json_type(block)}, not an "
                    f"object; skipped ({as_text(block)[:80]})",
                    chunk_index=n,
                )
                continue
            self._open_block(block, ("message_start", position), n)

    def _block_start(self, event: Mapping[str, Any], n: int) -> None:
        block = self._part(event, "content_block", n, required=True)
        if not block and may_hold_calls(event.get("content_block")):  # (a block sent as a JSON string)
            self._hold_all(f"chunk {n}: a content_block that is not an object may hold tool call data")
        index = event.get("index")
        if type(index) is not int:
            index = self._index(event, n, "content_block_start")
            if index is None:  # a block no delta can name: its deltas are orphans (and hold it back)
                index = ("unindexed", n)
        elif not 0 <= index < 1 << 30:  # (kept as the name its deltas use; the blocks keep stream order)
            self.note(
                "wrong_type",
                f"chunk {n}: content_block_start index {index} is out of range (a block index counts "
                "from 0); kept as the name its deltas use, the block in its place in the stream",
                chunk_index=n,
            )
        self._open_block(block, index, n)

    def _open_block(self, block: Mapping[str, Any], index: Any, n: int) -> None:
        btype = as_key(block.get("type"))
        self._last = None
        self._opened.add(index)
        held = self._blocks.get(index)
        if held is not None and (btype == "tool_use" or btype in _SERVER_BLOCKS):
            self.note(
                "index_reused",
                f"chunk {n}: content_block_start reuses block index {index!r} (held call "
                f"{held[0].tool_call_id}) for {block.get('id')!r}; kept as a new call, later deltas at "
                "that index go to it",
                chunk_index=n,
                tool_call_id=block.get("id") if isinstance(block.get("id"), str) else None,
            )
        if btype == "tool_use":
            tid, name = self._header(block, n)
            call = PendingCall.announced(0, len(self._calls), n, tid, name)
            self._blocks[index] = (call, True)
            self._last = call
            self._inputs[call.index] = block.get("input", _ABSENT)
            self._calls.append(call)
            if self.listener is not None:
                self.listener(
                    CallStarted(
                        chunk_index=n,
                        choice_index=0,
                        call_index=call.index,
                        tool_call_id=call.tool_call_id,
                        name=call.name,
                    )
                )
        elif btype in _SERVER_BLOCKS:
            tid, name = self._header(block, n)
            call = PendingCall.announced(0, len(self._server), n, tid, name)
            self._blocks[index] = (call, False)
            self._server_inputs[call.index] = block.get("input")
            self._server.append(call)
        elif isinstance(btype, str) and btype.endswith("_tool_result"):
            self._results[str(block.get("tool_use_id"))] = _result_of(block)
        elif btype == "text":
            text = block.get("text")
            if text:
                self._text.append(text)
        elif btype == "thinking":
            thought = block.get("thinking")
            if thought:
                self._thinking.append(thought)
        elif block and btype not in _QUIET_BLOCKS:
            if self._unknown_blocks is None:
                self._unknown_blocks = {}
            self._unknown_blocks[index] = str(btype)
            self.note(
                "unknown_block", unknown_block_note(block, f"chunk {n}: block {index!r}"), chunk_index=n
            )

    @staticmethod
    def _start_and_deltas(pending: PendingCall, start: dict[str, Any], findings: list[Finding]) -> None:
        """A block start with a non-empty ``input`` and deltas too: the deltas are kept; say so
        when they say something else."""
        joined = "".join(pending.pieces)
        try:
            same = json.loads(joined) == start
        except (ValueError, RecursionError):
            same = False
        if not same:
            findings.append(
                finding(
                    "arguments_mismatch",
                    f"call {pending.tool_call_id}: content_block_start carried input "
                    f"{compact_json(start)[:80]} and input_json_delta events followed; kept the deltas",
                    chunk_index=pending.first_chunk,
                    tool_call_id=pending.tool_call_id,
                )
            )

    def pending_calls(self) -> list[PendingCall]:
        return [*self._calls, *self._server]

    def text_pieces(self) -> list[list[Any]]:
        return [self._text, self._thinking]

    def snapshot(self) -> dict[int, dict[int, dict[str, Any]]]:
        """The calls assembled so far (for stepping through a stream)."""
        return calls_snapshot(self._calls)

    def _result(self, error: str | None) -> ParsedResponse:
        findings = list(self.findings)
        calls: list[ToolCall] = []
        stop = self.stop_reason
        ending = ending_of(stop)
        # why a call whose block was not closed may be unfinished (a closed block ended; after a
        # normal stop reason every block ended with the message)
        cut = None
        failed = failure_clause(error) if error is not None else None
        if ending == "filtered":
            failed = failed or f"the provider stopped or withheld the output (stop_reason {stop!r})"
        elif ending == "none":
            cut = "the stream ended before its content_block_stop, without a stop_reason"
        elif ending != "normal":
            cut = cut_reason("stop_reason", str(stop)) + ", before its content_block_stop"
        if self._stray is not None:
            for pending in self._calls:
                pending.hold(self._stray)
        taken = provider_ids(self._calls)
        doubt = None  # why the last block's content_block_stop does not show its call finished
        if error is not None:
            doubt = "its block was the last one opened before the provider error"
        elif ending in ("limit", "abnormal"):
            doubt = (
                f"{cut_reason('stop_reason', str(stop))} at this tool_use, the message's last block "
                "(the API closes a cut block with content_block_stop too)"
            )
        for pending in self._calls:
            raw = None
            start = self._inputs.get(pending.index)
            here = cut
            stopped = pending.done  # its block was closed: its start input is what it said
            if doubt is not None and pending is self._last and stopped:
                pending.done = False
                here = doubt
            closed = pending.done or ending == "normal"
            if pending.done and ending != "normal":
                pending.finished_by = "a block that was closed (content_block_stop)"
            if not pending.pieces:
                if start is None or start is _ABSENT:  # nothing said the arguments: not `{}` silently
                    pending.args_absent = "`input` null" if start is None else "`input` missing"
                    pending.quirky = True
                elif start or closed or stopped:  # (an empty start input of a block cut before its end
                    # says nothing)
                    raw = compact_json(start)
            elif start and isinstance(start, dict):
                self._start_and_deltas(pending, start, findings)
            call = pending.finalize(
                self.batch,
                findings,
                raw,
                failed if ending == "filtered" or not pending.done else None,
                None if closed else here,
                taken,
            )
            calls.append(call)
            if self.listener is not None:
                self.listener(CallFinished(call=call))
        server = _server_calls(self._server, self._server_inputs, self._results, findings)
        if error is None:
            if ending == "none":
                findings.append(finding("no_finish_reason", "stream ended without a stop_reason"))
            elif ending != "normal":
                unfinished = sum(not c.complete for c in calls)
                findings.append(how_it_ended("stop_reason", str(stop), unfinished))
        return single_choice(
            "anthropic-stream",
            text=self._text,
            reasoning=self._thinking,
            calls=calls,
            finish_reason=stop,
            findings=capped(findings, self._limit),
            usage=self.usage or None,
            response_id=self.response_id,
            model=self.model,
            server_calls=server,
            error=error,
        )


def parse_anthropic_message(body: Mapping[str, Any], *, batch: int = 0) -> ParsedResponse:
    """Read a whole Anthropic ``message`` body (``content`` blocks with ``tool_use``).

    An error body (``{"type": "error", "error": {...}}``) raises `ProviderStreamError` quoting it.
    """
    if body.get("type") == "error" or (body.get("error") and not body.get("content")):
        message = describe_error(body.get("error") or body)
        exc = ProviderStreamError(message, payload=dict(body), line_number=None)
        exc.partial_responses = (error_response(message, "anthropic", body),)
        raise exc
    findings: list[Finding] = []
    text: list[Any] = []
    thinking: list[Any] = []
    calls: list[ToolCall] = []
    server: list[PendingCall] = []
    server_inputs: dict[int, Any] = {}
    results: dict[str, tuple[str, str | None]] = {}
    stop = body.get("stop_reason")
    if stop is not None and type(stop) is not str:
        findings.append(
            finding(
                "wrong_type",
                f"stop_reason {as_text(stop)[:60]} is {a_json_type(stop)}, not a string; kept as its "
                "JSON text",
            )
        )
        stop = as_text(stop)
    ending = ending_of(stop)
    failed = (
        f"the provider stopped or withheld the output (stop_reason {stop!r})"
        if ending == "filtered"
        else None
    )
    # a body cut short (max_tokens, ...): a tool_use block followed by another block was finished, the
    # last block may have been cut (its `input` parses whatever was cut from it)
    cut = None
    if ending in ("limit", "abnormal"):
        cut = f"{cut_reason('stop_reason', str(stop))} at this tool_use, the message's last block"
    elif ending == "none":  # a snapshot of a message in progress: its last block may not be whole
        cut = "the message ended without a stop_reason at this tool_use, its last block"
        findings.append(finding("no_finish_reason", "the message has no stop_reason"))
    content = body.get("content")
    if not isinstance(content, list):
        if content is not None:
            findings.append(
                finding(
                    "malformed_chunk", f"content is {a_json_type(content)}, not a list of blocks; skipped"
                )
            )
        content = []

    def note(kind: FindingKind, message: str) -> None:
        findings.append(finding(kind, message))

    headers = [
        (_header_text(b.get("id"), "id", f"content block {pos}", note), b.get("name"))
        if isinstance(b, Mapping) and as_key(b.get("type")) in _CALL_BLOCKS
        else (None, None)
        for pos, b in enumerate(content)
    ]
    given = [tid for (tid, _), b in zip(headers, content, strict=True) if _is_tool_use(b)]
    taken = {i for i in given if i} if not all(given) else None
    stray = next(  # a block that is not an object but may hold a call: every tool_use is held back
        (pos for pos, b in enumerate(content) if not isinstance(b, Mapping) and may_hold_calls(b)), None
    )
    for pos, block in enumerate(content):
        if not isinstance(block, Mapping):
            calls_in = "; it may hold tool call data, so every call of this message is held back"
            findings.append(
                finding(
                    "malformed_chunk",
                    f"content block {pos} is {a_json_type(block)}, not an object; skipped "
                    f"({as_text(block)[:80]}){calls_in if may_hold_calls(block) else ''}",
                )
            )
            continue
        kind = as_key(block.get("type"))
        if kind in _CALL_BLOCKS:
            tid = headers[pos][0]
            name = _header_text(block.get("name"), "name", f"content block {pos}", note)
        if kind == "tool_use":
            pending = PendingCall.announced(0, len(calls), 0, tid, name)
            raw = block.get("input", _ABSENT)
            if raw is None or raw is _ABSENT:
                pending.args_absent = "`input` null" if raw is None else "`input` missing"
                pending.quirky = True
                raw = ""
            elif not isinstance(raw, str):
                raw = compact_json(raw)
            last = pos == len(content) - 1
            if stray is not None:
                pending.hold(f"content block {stray} is not an object and may hold tool call data")
            calls.append(
                pending.finalize(batch, findings, raw, failed, cut if last else None, taken, ending == "none")
            )
        elif kind in _SERVER_BLOCKS:
            pending = PendingCall.announced(0, len(server), 0, tid, name)
            server_inputs[pending.index] = block.get("input")
            server.append(pending)
        elif isinstance(kind, str) and kind.endswith("_tool_result"):
            results[str(block.get("tool_use_id"))] = _result_of(block)
        elif kind == "text":
            text.append(block.get("text"))
        elif kind == "thinking":
            thinking.append(block.get("thinking"))
        elif kind not in _QUIET_BLOCKS:
            findings.append(finding("unknown_block", unknown_block_note(block, f"content block {pos}")))
    if ending not in ("normal", "none"):
        findings.append(how_it_ended("stop_reason", str(stop), sum(not c.complete for c in calls)))
    server_calls = _server_calls(server, server_inputs, results, findings)
    odd_usage = usage_problem(body.get("usage"))
    if odd_usage is not None:
        findings.append(finding("wrong_type", odd_usage))
    return single_choice(
        "anthropic",
        text=text,
        reasoning=thinking,
        calls=calls,
        finish_reason=stop,
        findings=capped(findings),
        usage=body.get("usage") if isinstance(body.get("usage"), dict) else None,
        response_id=body.get("id") if type(body.get("id")) is str else None,
        model=body.get("model") if type(body.get("model")) is str else None,
        server_calls=server_calls,
    )

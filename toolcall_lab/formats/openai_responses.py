"""OpenAI Responses API: ``function_call`` and ``custom_tool_call`` output items, streamed or whole.

Streams announce a call with ``response.output_item.added`` (call_id + name), send its arguments as
``response.function_call_arguments.delta`` events (``response.custom_tool_call_input.delta`` for
custom tools, whose input is free-form text) and repeat them in ``.done`` and ``output_item.done``.
Events are matched to items by ``item_id``, else by ``output_index``, so interleaved calls stay
apart. The final forms are authoritative: ``.done`` / ``output_item.done`` over the deltas, and the
``output`` of ``response.completed`` over everything (a call only found there is recovered), each
difference reported. The tool call id is the item's ``call_id`` (what a ``function_call_output``
must answer), not its ``fc_`` item id. Items the provider runs itself (``web_search_call`` ...)
are reported in ``server_tool_calls``; items of built-in tools the *client* runs
(``computer_call``, ``local_shell_call``, ``shell_call``, ``apply_patch_call``) are calls of kind
``builtin`` whose arguments are the item's action. ``response.failed`` and ``error`` events raise
`ProviderStreamError` (the items ``response.failed`` lists are read as a body's are);
``response.incomplete`` marks calls whose items did not finish incomplete,
and so does a stream cut before ``response.completed`` for an item announced with no arguments.
A streamed call that ``response.completed`` lists nowhere in its ``output`` is kept when its item
finished and incomplete when it never did, reported either way; after a status that is not a normal
end (`_endings`), an item that never finished is incomplete.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from toolcall_lab.exceptions import ProviderStreamError
from toolcall_lab.formats._endings import ending_of, how_it_ended
from toolcall_lab.formats._values import (
    a_json_type,
    as_index,
    as_key,
    as_text,
    may_hold_calls,
    refusal_note,
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
    failure_clause,
    finding,
    fix_surrogates,
    provider_error_note,
    provider_ids,
    single_choice,
    usage_problem,
)
from toolcall_lab.formats.errors import error_message
from toolcall_lab.messages import Finding, ParsedResponse, ServerToolCall, ToolCall

_CLIENT_ITEMS = {"function_call": "arguments", "custom_tool_call": "input"}
_BUILTIN_ITEMS = frozenset({"computer_call", "local_shell_call", "shell_call", "apply_patch_call"})
_ITEM_BOOKKEEPING = frozenset({"id", "type", "status", "call_id", "pending_safety_checks"})


def _key(value: Any) -> str | None:
    """An item id as a lookup key: a non-empty string, else None (absent, or of another type)."""
    return value if type(value) is str and value else None


_ORDERED_BELOW = 1 << 30
"""An ``output_index`` from 0 up to this orders an item; another (negative, huge) is reported and the
item keeps its place in the stream."""


def _position(value: Any) -> int | None:
    """An ``output_index``: an integer (a decimal string read as one), else None."""
    return value if type(value) is int else as_index(value)


def _is_call(itype: Any) -> bool:
    """An item the client must answer: a function, custom or built-in tool call."""
    return itype in _CLIENT_ITEMS or itype in _BUILTIN_ITEMS


def _final_of(item: Mapping[str, Any]) -> Any:
    """The final arguments an item carries: ``arguments`` / ``input``, or a built-in tool's action
    (the item without its bookkeeping fields) as compact JSON."""
    itype = item.get("type")
    if itype in _BUILTIN_ITEMS:
        return compact_json({k: v for k, v in item.items() if k not in _ITEM_BOOKKEEPING})
    return item.get(_CLIENT_ITEMS[itype]) if itype in _CLIENT_ITEMS else None


_SERVER_ITEMS = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call"}
)
_FINAL_STATUSES = frozenset({"completed", "incomplete", "failed", "cancelled"})
"""Statuses that end a response (any other, ``in_progress`` or ``queued``, means the stream was cut)."""
_QUIET_ITEMS = frozenset({"message", "reasoning", "mcp_list_tools"})
_DATA_KEYS = frozenset({"delta", "arguments", "input", "item", "output", "response"})
"""Keys of an event that may carry a call's data (read when an event has no type to say what it is)."""
_RESPONSE_EVENTS = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.completed",
        "response.incomplete",
    }
)
_QUIET_PREFIXES = (
    "response.output_text.",
    "response.content_part.",
    "response.reasoning",
    "response.refusal.",
    "response.web_search_call.",
    "response.file_search_call.",
    "response.code_interpreter_call",
    "response.image_generation_call.",
    "response.mcp_",
    "response.audio",
    "response.output_item.",
    "response.function_call_arguments.",
    "response.custom_tool_call_input.",
)


def _message_texts(item: Mapping[str, Any]) -> list[Any]:
    """The ``output_text`` parts of a ``message`` item."""
    content = item.get("content")
    return [
        part.get("text")
        for part in (content if isinstance(content, list) else ())
        if isinstance(part, Mapping) and part.get("type") == "output_text"
    ]


def _server_call(item: Mapping[str, Any]) -> ServerToolCall:
    kind = str(item.get("type"))
    details = {
        k: v for k, v in item.items() if k not in ("id", "type", "status", "output", "results", "result")
    }
    status = item.get("status")
    return ServerToolCall(
        tool_call_id=str(item.get("id") or ""),
        name=str(item.get("name") or kind.removesuffix("_call")),
        arguments=compact_json(details),
        result_type=kind,
        result_error=str(status) if status in ("failed", "incomplete") else None,
    )


class _Item:
    """A client call item: its pending call, where it is, and its final text once known."""

    __slots__ = (
        "call",
        "compared",
        "cut_item",
        "emptied",
        "final",
        "final_from",
        "item_id",
        "order",
        "output_index",
        "unlisted",
    )

    def __init__(self, call: PendingCall, item_id: Any, output_index: Any, order: int | None) -> None:
        self.call = call
        self.item_id = item_id
        self.output_index = output_index  # (events naming it find the item: `_by_key`)
        self.order = _ORDERED_BELOW if order is None else order  # (the calls are sorted by it)
        self.final: str | None = None
        self.final_from = ""  # the form `final` came from (for findings)
        self.compared = False  # a finding already set the final arguments against the deltas
        self.unlisted = False  # never finished and not in response.completed's output
        self.cut_item: str | None = None  # a final form's `status` other than "completed" (repr)
        self.emptied: str | None = None  # a final form gave "" against earlier text (`_set_final`)

    def settle(self, status: Any, finished: bool) -> None:
        """What a final form of the item says of its end: any status other than ``"completed"``
        (``incomplete``, ``failed``, ``in_progress``, ``queued``, an unknown value) = not finished,
        whatever the response says; ``"completed"``, or a form that is itself the item's end (`finished`:
        ``output_item.done``) = finished. Being listed in a response's output without a status
        shows nothing (a ``custom_tool_call`` has no status field): only a normal end of the
        response then says the item is whole (`_result`)."""
        if status is not None and status != "completed":
            if self.cut_item is None:
                self.cut_item = repr(status)
            self.call.done = False
        elif (status == "completed" or finished) and self.cut_item is None:
            self.call.done = True


class _Held:
    """Deltas and a `.done` for an item not announced (yet): kept, never dropped."""

    __slots__ = ("count", "final", "first", "not_string_at", "pieces")

    def __init__(self, first: int) -> None:
        self.first = first
        self.count = 0
        self.pieces: list[str] = []
        self.final: str | None = None
        self.not_string_at: int | None = None  # a delta that was not a string (kept as JSON)


class ResponsesStreamAccumulator(StreamAccumulator):
    """Assemble function calls and text from the events of one Responses API stream."""

    __slots__ = (
        "_added_texts",
        "_by_key",
        "_completed",
        "_foreign_items",
        "_item_texts",
        "_items",
        "_orphans",
        "_part_texts",
        "_reasoning",
        "_refusal",
        "_server",
        "_stray",
        "_text",
        "_text_done",
        "ended",
        "incomplete_reason",
        "status",
        "whole",
    )

    def __init__(self, *, batch: int = 0, listener: StreamListener | None = None) -> None:
        super().__init__(batch=batch, listener=listener)
        self.status: str | None = None
        self.ended = False  # a response.completed / .incomplete event came (its status says how it ended)
        self.incomplete_reason: str | None = None
        self.whole = False  # a whole body (parse_responses_output), not a stream
        self._text: list[Any] = []
        self._reasoning: list[Any] = []
        self._refusal: list[Any] = []
        self._text_done: list[Any] | None = None  # the `text` of each response.output_text.done
        self._items: list[_Item] = []
        self._item_texts: list[Any] = []  # the text of output_item.done message items
        self._part_texts: list[Any] = []  # the text of content_part.done output_text parts
        self._added_texts: list[Any] = []  # the text of output_item.added message items (sent empty)
        self._by_key: dict[Any, _Item] = {}
        self._server: dict[str, ServerToolCall] = {}
        self._completed: list[Any] | None = None
        # deltas (and a `.done`) for items not announced yet, by item id or ("#", output_index)
        self._orphans: dict[Any, _Held] | None = None
        self._stray: str | None = None  # why every call is held back (call data that could not be read)
        self._foreign_items: set[Any] | None = None  # ids / ("#", output_index) of items not read

    own_format = "openai-responses"

    def _hold_all(self, reason: str) -> None:
        if self._stray is None:
            self._stray = reason

    def _find(self, event: Mapping[str, Any]) -> _Item | None:
        item_id = _key(event.get("item_id"))
        found = self._by_key.get(item_id) if item_id else None
        if found is None:
            found = self._at_position(event.get("output_index"))
        return found

    def _at_position(self, given: Any) -> _Item | None:
        """The item announced at output_index `given`; found by a value that is no integer (``"1"``,
        ``1.0``), it is reported (the item it names is a reading of that value)."""
        position = _position(given)
        found = self._by_key.get(("#", position)) if position is not None else None
        if found is not None and type(given) is not int:
            n = self.chunk_count - 1
            self.note(
                "wrong_type",
                f"chunk {n}: output_index {compact_json(given)[:40]} ({a_json_type(given)}) is not an "
                f"integer; read as {position}",
                chunk_index=n,
            )
        return found

    def _held(self, event: Mapping[str, Any], n: int) -> _Held:
        """What is held for the item an event names but nobody announced (made on first use)."""
        item_id = _key(event.get("item_id"))
        key = item_id if item_id else ("#", _position(event.get("output_index")))
        if self._orphans is None:
            self._orphans = {}
        held = self._orphans.get(key)
        if held is None:
            held = self._orphans[key] = _Held(n)
        return held

    def _adopt(self, entry: _Item, n: int) -> None:
        """Give a newly announced item the deltas (and `.done`) that came before it."""
        orphans = self._orphans
        assert orphans is not None
        found = [
            h
            for h in (
                orphans.pop(entry.item_id, None) if entry.item_id else None,
                orphans.pop(("#", entry.output_index), None),
            )
            if h is not None
        ]
        if not found:
            return
        found.sort(key=lambda h: h.first)
        pieces = [p for h in found for p in h.pieces]
        entry.call.pieces[:0] = pieces
        odd = next((h.not_string_at for h in found if h.not_string_at is not None), None)
        if odd is not None:
            entry.call.came_not_string(odd)
        final = next((h.final for h in found if h.final is not None), None)
        if final is not None:
            self._set_final(entry, final, "its .done", found[0].first)
            entry.call.done = True
        count = sum(h.count for h in found)
        what = f"{count} arguments delta(s)" + (" and its .done" if final is not None else "")
        self.note(
            "recovered_delta",
            f"chunk {found[0].first}: {what} for item {entry.item_id!r} came before the item was "
            f"announced (chunk {n if n >= 0 else 'response.completed'}); kept as call "
            f"{entry.call.tool_call_id}'s arguments, nothing lost",
            chunk_index=found[0].first,
            tool_call_id=entry.call.tool_call_id,
        )
        if self.listener is not None:
            for piece in pieces:
                self.listener(
                    ArgumentsDelta(chunk_index=n, choice_index=0, call_index=entry.call.index, delta=piece)
                )

    def _announce(self, item: Mapping[str, Any], output_index: Any, n: int, wire: bool = True) -> _Item:
        """A new call item; `output_index` as the event gave it (`wire`: else the parser's own
        stand-in, None for an item no announcement named)."""
        kind = str(item.get("type"))
        name = self._header(item.get("name"), "name", n)
        if kind in _BUILTIN_ITEMS:
            name = kind.removesuffix("_call")
        tid = self._header(item.get("call_id"), "call_id", n)
        call = PendingCall.announced(0, len(self._items), n, tid, name)
        if kind == "custom_tool_call":
            call.kind = "custom"
            call.quirky = True
        elif kind in _BUILTIN_ITEMS:
            call.kind = "builtin"
            call.quirky = True
        item_id = _key(item.get("id"))
        given, output_index = output_index, _position(output_index)
        order = output_index if output_index is not None and 0 <= output_index < _ORDERED_BELOW else None
        if wire and n >= 0 and (type(given) is not int or order is None):  # (the calls are ordered by
            # it: say how it was read)
            what = compact_json(given)[:40] + ("" if given is None else f" ({a_json_type(given)})")
            read = (
                f"read as {order}"
                if order is not None
                else f"ordered by its place in the stream (item {len(self._items)})"
            )
            self.note(
                "wrong_type",
                f"chunk {n}: item {item_id!r}{f' (call {tid})' if tid else ''} has output_index {what}, "
                + ("out of range" if type(given) is int else "not an integer")
                + f"; {read}",
                chunk_index=n,
                tool_call_id=tid,
            )
            if order is None:
                order = len(self._items)
        entry = _Item(call, item_id, output_index, order)
        self._items.append(entry)
        if item_id:
            self._by_key[item_id] = entry
        if output_index is not None:
            held = self._by_key.get(("#", output_index))
            if held is not None and n >= 0:
                self.note(
                    "index_reused",
                    f"chunk {n}: item {item_id!r} announced at output_index {output_index}, which item "
                    f"{held.item_id!r} (call {held.call.tool_call_id}) already holds; events naming that "
                    "output_index without an item_id go to the new item",
                    chunk_index=n,
                    tool_call_id=call.tool_call_id,
                )
            self._by_key[("#", output_index)] = entry
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
        if self._orphans:
            self._adopt(entry, n)
        return entry

    def _header(self, value: Any, what: str, n: int) -> Any:
        """An item's name or call_id: a string; a number read as its text; anything else absent;
        the last two reported (``wrong_type``)."""
        if value is None or type(value) is str:
            return value
        where = f"chunk {n}" if n >= 0 else "response.completed"
        if type(value) is int:
            self.note(
                "wrong_type", f"{where}: item {what} {value} is a number, not a string; read as '{value}'"
            )
            return str(value)
        self.note(
            "wrong_type",
            f"{where}: item {what} {as_text(value)[:40]} is {a_json_type(value)}, not a string; "
            "read as absent",
        )
        return None

    def _final_text(self, call: PendingCall | None, value: Any, n: int) -> str | None:
        """The final arguments an event or item gives: a string; another JSON value kept as its compact
        JSON (``arguments_not_string``, on `call` when known); None when absent."""
        if value is None or type(value) is str:
            return value
        if call is not None:
            return call.not_string(value, n)
        self.note(
            "arguments_not_string",
            f"chunk {n}: final arguments sent as {a_json_type(value)}, not a string; kept, serialised "
            "compactly",
            chunk_index=n,
        )
        return compact_json(value)

    def _delta(self, event: Mapping[str, Any], n: int) -> None:
        entry = self._find(event)
        piece = event.get("delta")
        if type(piece) is not str:
            if piece is None:
                self.note(
                    "malformed_chunk",
                    f"chunk {n}: {event.get('type')} without `delta` (or null); nothing appended",
                    chunk_index=n,
                )
                piece = ""
            elif entry is not None:
                piece = entry.call.not_string(piece, n)
            else:
                held = self._held(event, n)
                if held.not_string_at is None:
                    held.not_string_at = n
                piece = compact_json(piece)
        if entry is None:
            held = self._held(event, n)
            held.count += 1
            if piece:
                held.pieces.append(piece)
        elif piece:
            entry.call.pieces.append(piece)
            if self.listener is not None:
                self.listener(
                    ArgumentsDelta(chunk_index=n, choice_index=0, call_index=entry.call.index, delta=piece)
                )

    def feed(self, event: Mapping[str, Any]) -> None:
        n = self.chunk_count
        self.chunk_count = n + 1
        if type(event) is not dict:
            mapped = self._event_mapping(event, n)
            if mapped is None:
                return
            event = mapped
        kind = event.get("type")
        if kind is not None and type(kind) is not str:
            kind = as_text(kind)  # (an unhashable value): reported below as an unknown event type
        if kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            self._delta(event, n)
        elif kind == "response.output_text.delta":
            text = event.get("delta")
            if text is not None:
                self._text.append(text)
        elif kind == "response.output_text.done":
            if self._text_done is None:
                self._text_done = []
            self._text_done.append(event.get("text"))
        elif kind == "response.content_part.done":
            part = event.get("part")
            if isinstance(part, Mapping) and part.get("type") == "output_text":
                self._part_texts.append(part.get("text"))
        elif kind == "response.refusal.delta":
            self._refusal.append(event.get("delta"))
        elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            text = event.get("delta")
            if text is not None:
                self._reasoning.append(text)
        elif kind == "response.output_item.added":
            item = self._part(event, "item", n, required=True)
            if not item:
                self._odd_item(event.get("item"), f"chunk {n}: the output_item.added's item")
            itype = as_key(item.get("type"))
            if itype in _CLIENT_ITEMS:
                entry = self._announce(item, event.get("output_index"), n)
                first = self._final_text(entry.call, item.get(_CLIENT_ITEMS[itype]), n)
                if first:
                    entry.call.pieces.append(first)
            elif itype in _BUILTIN_ITEMS:
                self._announce(item, event.get("output_index"), n)
            elif itype == "message":
                self._added_texts.extend(_message_texts(item))
            elif item and itype not in _SERVER_ITEMS and itype not in _QUIET_ITEMS:
                self._unknown_item(itype, n, item, event.get("output_index"))
        elif kind in ("response.function_call_arguments.done", "response.custom_tool_call_input.done"):
            found = self._find(event)
            final = event.get("arguments" if kind.startswith("response.function") else "input")
            final = self._final_text(found.call if found is not None else None, final, n)
            if final is not None:
                if found is None:  # kept until its item comes (or as an orphan call at the end)
                    self._held(event, n).final = final
                else:
                    self._set_final(found, final, kind.removeprefix("response."), n)
                    found.call.done = True
        elif kind == "response.output_item.done":
            self._item_done(event, n)
        elif kind in _RESPONSE_EVENTS:
            self._response_event(kind, self._response_of(event, kind, n))
        elif kind == "response.failed" or kind == "error":
            self._response_event(kind, self._part(event, "response", n))
            self.fail(error_message(event) or "response failed", dict(event), n)
        elif kind not in _RESPONSE_EVENTS and (message := error_message(event)) is not None:
            self.fail(message, dict(event), n)  # {"error": ...} or "response.error" from other servers
        elif not (isinstance(kind, str) and kind.startswith(_QUIET_PREFIXES)):
            self._unknown(event, kind, n)

    def _unknown(self, event: Mapping[str, Any], kind: Any, n: int) -> None:
        """An event without ``type`` or of a type this reader does not know. One of another wire
        format goes to `_foreign_event`; one that may hold call data (a key such as ``delta``,
        ``arguments``, ``item``) is never dropped unseen: the call of the item it names (every call,
        when it names none) is held back."""
        fmt = wire_format_of(event)
        if fmt is not None and fmt != "openai-responses":
            self._foreign_event(event, n, fmt, self.ended)
            return
        what = "an event without `type`" if kind is None else f"a Responses event of unknown type {kind!r}"
        if not (may_hold_calls(event) or event.keys() & _DATA_KEYS):
            if kind is None:
                self.note(
                    "malformed_chunk", f"chunk {n}: {what}; skipped ({as_text(event)[:80]})", chunk_index=n
                )
            else:
                self.note("unknown_event", f"chunk {n}: {what} ignored", chunk_index=n)
            return
        if self._foreign_items and (
            _key(event.get("item_id")) in self._foreign_items
            or ("#", _position(event.get("output_index"))) in self._foreign_items
        ):  # it names an item of an unknown type (reported when it came): that item's data
            self.note(
                "malformed_chunk",
                f"chunk {n}: {what} for an output item of a type this parser does not read; not read "
                f"({as_text(event)[:100]})",
                chunk_index=n,
            )
            return
        self.note(
            "malformed_chunk",
            f"chunk {n}: {what} that may hold tool call data; skipped ({as_text(event)[:100]}), and the "
            "call(s) it may belong to held back",
            chunk_index=n,
        )
        entry = self._find(event)
        if entry is not None:
            entry.call.hold(f"chunk {n}: {what} named its item and may hold its arguments")
        else:
            self._hold_all(f"chunk {n}: {what} may hold tool call data, and which call it is for is unknown")

    def _was_foreign(self, item: Mapping[str, Any], output_index: Any) -> bool:
        """The item is one of an unknown type already reported when it streamed (by id, else position)."""
        foreign = self._foreign_items
        if not foreign:
            return False
        item_id = _key(item.get("id"))
        return item_id in foreign if item_id else ("#", _position(output_index)) in foreign

    def _unknown_item(
        self,
        itype: Any,
        n: int,
        item: Mapping[str, Any],
        output_index: Any = None,
        *,
        where: str | None = None,
    ) -> None:
        """An output item of a type this reader does not know (or without ``type``): one that looks
        like a call (a ``call_id``, ``name``, ``arguments`` or ``input``) is said not to be read (a
        warning); the deltas naming it are its own, not orphans that hold the other calls back."""
        said = [key for key in ("call_id", "name", "arguments", "input") if key in item]
        where = where or f"chunk {n}"
        chunk = n if n >= 0 else None
        if not said:
            self.note(
                "unknown_event",
                f"{where}: output item type {itype!r} is not read as a tool call; ignored "
                f"({as_text(item)[:80]})",
                chunk_index=chunk,
            )
            return
        self.note(
            "malformed_chunk",
            f"{where}: a call-like output item of unknown type {itype!r} ({'/'.join(said)}: call_id "
            f"{as_text(item.get('call_id'))[:40]!r}, name {as_text(item.get('name'))[:40]!r}) was not read: "
            "no call is made of it, it will not be executed",
            chunk_index=chunk,
        )
        if self._foreign_items is None:
            self._foreign_items = set()
        item_id = _key(item.get("id"))
        if item_id:
            self._foreign_items.add(item_id)
        position = _position(output_index)
        if position is not None:
            self._foreign_items.add(("#", position))

    def _response_of(self, event: Mapping[str, Any], kind: str, n: int) -> Mapping[str, Any]:
        """The ``response`` object of a response event. ``response.completed`` / ``.incomplete``
        without one still end the response (their type says how), reported."""
        response = self._part(event, "response", n)
        if not response and kind in ("response.completed", "response.incomplete"):
            status = kind.removeprefix("response.")
            self.note(
                "malformed_chunk",
                f"chunk {n}: {kind} without its `response` object; status taken from the event type "
                f"({status!r}), the calls kept as streamed",
                chunk_index=n,
            )
            return {"status": status}
        return response

    def _odd_item(self, item: Any, where: str) -> None:
        """An item that is not an object (a JSON string...): when it may hold a call's data, every
        call of the response is held back (which one it is, or whether it is one of its own, is
        unknown)."""
        if item is not None and not isinstance(item, Mapping) and may_hold_calls(item):
            self._hold_all(f"{where} is not an object and may hold tool call data")

    def _item_done(self, event: Mapping[str, Any], n: int) -> None:
        item = self._part(event, "item", n, required=True)
        if not item:
            self._odd_item(event.get("item"), f"chunk {n}: the output_item.done's item")
        itype = as_key(item.get("type"))
        if itype in _SERVER_ITEMS:
            server = _server_call(item)
            self._server[server.tool_call_id] = server
            return
        if not _is_call(itype):
            if itype == "message":  # its text: read when the stream sent no text deltas (`_final_text_of`)
                self._item_texts.extend(_message_texts(item))
            elif item and itype not in _QUIET_ITEMS:
                position = event.get("output_index")
                if not self._was_foreign(item, position):
                    self._unknown_item(itype, n, item, position)
            return
        item_id = _key(item.get("id"))
        entry = self._by_key.get(item_id) if item_id else None
        if entry is None:
            entry = self._at_position(event.get("output_index"))
        if entry is None:
            entry = self._announce(item, event.get("output_index"), n)
            self.note(
                "unannounced_item",
                f"chunk {n}: output_item.done for item {item.get('id')!r} never announced; "
                "call taken from it",
                chunk_index=n,
                tool_call_id=entry.call.tool_call_id,
            )
        else:
            self._disagree(entry, item, "output_item.done", n)
        final = self._final_text(entry.call, _final_of(item), n)
        if final is not None:
            self._set_final(entry, final, "output_item.done", n)
        entry.settle(item.get("status"), True)

    def _set_final(self, entry: _Item, final: str, where: str, n: int | None) -> bool:
        """Take `final` (from `where`) as the item's final arguments (the later form wins, README's
        authority rule), unless it is empty while what came before (the deltas, an earlier final form)
        holds text: then the earlier text is kept as the evidence, ``arguments_mismatch`` says so and
        the call is held back at the end (`_Item.emptied`), never run with ``{}``. A later non-empty
        form settles it. False when `final` was not taken."""
        if not final.strip():
            before = entry.final if entry.final else "".join(entry.call.pieces)
            if before.strip():
                what = "an earlier final form" if entry.final else "the concatenated deltas"
                entry.emptied = f"{where} gave empty arguments after {what} held {len(before)} characters"
                self.note(
                    "arguments_mismatch",
                    f"call {entry.call.tool_call_id}: {where} gives empty arguments (0 characters) but "
                    f"{what} held {len(before)}; kept those {len(before)} characters as the evidence, "
                    "and the call is held back (incomplete, never run): which is right is unknown",
                    chunk_index=n,
                    tool_call_id=entry.call.tool_call_id,
                )
                return False
        entry.final = final
        entry.final_from = where
        entry.emptied = None
        return True

    def _disagree(self, entry: _Item, item: Mapping[str, Any], where: str, n: int | None) -> None:
        """A later form of an item (``output_item.done``, ``response.completed``) against the call as
        announced: a missing id is filled in; a different name or call_id is reported, the first kept
        (what the listener announced and what the deltas were streamed under)."""
        call = entry.call
        name = self._header(item.get("name"), "name", -1 if n is None else n)
        if name and call.name and name != call.name and call.kind != "builtin":
            self.note(
                "name_changed",
                f"call {call.tool_call_id} (item {entry.item_id!r}): {where} names it {name!r}, it was "
                f"announced as {call.name!r}; kept the first",
                chunk_index=n,
                tool_call_id=call.tool_call_id,
            )
        elif name and not call.name:
            call.name = name
        call_id = self._header(item.get("call_id"), "call_id", -1 if n is None else n)
        if call_id and call.tool_call_id is None:
            call.tool_call_id = str(call_id)
        elif call_id and call_id != call.tool_call_id:
            self.note(
                "id_changed",
                f"call {call.tool_call_id} (item {entry.item_id!r}): {where} gives call_id {call_id!r}; "
                f"kept {call.tool_call_id!r}, the first",
                chunk_index=n,
                tool_call_id=call.tool_call_id,
            )

    def _response_event(self, kind: str, response: Any) -> None:
        if not isinstance(response, Mapping):
            return
        rid, model, status = response.get("id"), response.get("model"), response.get("status")
        self.response_id = rid if rid and type(rid) is str else self.response_id
        self.model = model if model and type(model) is str else self.model
        if status is not None and type(status) is not str:
            self.note(
                "wrong_type",
                f"{kind}: status {as_text(status)[:40]} is {a_json_type(status)}, not a string; kept as its "
                "JSON text",
            )
            status = as_text(status)
        self.status = status or self.status
        usage = response.get("usage")
        problem = usage_problem(usage, f"{kind}: ")
        if problem is not None:
            self.note("wrong_type", problem)
        elif usage:
            self.usage = usage if type(usage) is dict else dict(usage)
        if kind in ("response.completed", "response.incomplete"):
            self.ended = True
        if kind == "response.incomplete":
            details = response.get("incomplete_details") or {}
            self.incomplete_reason = (
                str(details.get("reason") or "no reason given") if isinstance(details, Mapping) else None
            )
            self.status = "incomplete"
        output = response.get("output")
        if kind not in ("response.completed", "response.incomplete", "response.failed", "error") and output:
            self._early_output(kind, output)
        if kind in ("response.completed", "response.incomplete", "response.failed") and output is not None:
            if isinstance(output, list):
                self._completed = output
            else:
                self.note(
                    "malformed_chunk",
                    f"{kind}: `output` is {a_json_type(output)}, not a list of items; skipped, the calls "
                    "kept as streamed",
                )

    def _early_output(self, kind: str, output: Any) -> None:
        """Items in the ``output`` of ``response.created`` / ``.in_progress`` (OpenAI sends it empty):
        not read, since only the item events and ``response.completed`` say what the response holds;
        reported, naming any call among them, so nothing they held goes unseen."""
        items = output if isinstance(output, list) else [output]
        calls = [
            f"{as_text(i.get('call_id'))[:40]} ({as_text(i.get('name'))[:40]})"
            for i in items
            if isinstance(i, Mapping) and (_is_call(as_key(i.get("type"))) or "call_id" in i)
        ]
        named = f", call(s) {', '.join(calls[:5])}" if calls else ""
        self.note(
            "malformed_chunk",
            f"{kind}: its `output` holds {len(items)} item(s){named}; not read (the item events and "
            "response.completed's output say what the response holds): a call only there is not made",
        )

    def _reconcile(self) -> None:
        """Take the ``output`` of ``response.completed`` as the authoritative list of items (its
        arguments over every earlier form; a different name or call_id is reported, see `_disagree`)."""
        if self._completed is None:
            return
        listed: set[int] = set()
        ending = {"incomplete": "response.incomplete", "failed": "response.failed"}.get(
            str(self.status), "response.completed"
        )
        for pos, item in enumerate(self._completed):
            if not isinstance(item, Mapping):
                self.note(
                    "malformed_chunk",
                    f"{ending}: output item {pos} is {a_json_type(item)}, not an object; skipped "
                    f"({as_text(item)[:100]})",
                )
                self._odd_item(item, f"{ending} output item {pos}")
                continue
            itype = as_key(item.get("type"))
            if itype in _SERVER_ITEMS:
                server = _server_call(item)
                self._server.setdefault(server.tool_call_id, server)
                continue
            if not _is_call(itype):
                if itype not in _QUIET_ITEMS and not self._was_foreign(item, pos):
                    self._unknown_item(itype, -1, item, pos, where=f"{ending} output item {pos}")
                continue
            item_id = _key(item.get("id"))
            entry = self._by_key.get(item_id) if item_id else None
            if entry is None:
                entry = next(
                    (
                        e
                        for e in self._items
                        if e.call.tool_call_id and e.call.tool_call_id == item.get("call_id")
                    ),
                    None,
                )
            if entry is None:
                entry = self._announce(item, pos, -1)
                cid = item.get("call_id")
                who = f"call {cid}" if cid and type(cid) is str else f"a call without id (output item {pos})"
                self.note(
                    "recovered_from_completed",
                    f"{who} ({item.get('name')}) only in {ending} output; taken from there",
                    tool_call_id=entry.call.tool_call_id,
                )
            else:
                self._disagree(entry, item, "response.completed", None)
            listed.add(id(entry))
            final = self._final_text(entry.call, _final_of(item), -1)
            earlier, earlier_from = entry.final, entry.final_from or "a final form"
            taken = final is not None and self._set_final(entry, final, "response.completed", None)
            if taken and final is not None and earlier is not None and earlier != final:
                # one finding naming every form that differs (the deltas are not compared again)
                pieces = entry.call.pieces
                joined = "".join(pieces) if pieces else None
                deltas = ""
                if joined == earlier:
                    deltas = ", which equal the concatenated deltas"
                elif joined is not None and joined != final:
                    deltas = f", and from the concatenated deltas ({len(joined)} characters)"
                entry.compared = joined is not None
                self.note(
                    "arguments_mismatch",
                    f"call {entry.call.tool_call_id}: response.completed output ({len(final)} "
                    f"characters) differs from the earlier final arguments of {earlier_from} "
                    f"({len(earlier)} characters){deltas}; kept the response.completed output",
                    tool_call_id=entry.call.tool_call_id,
                )
            entry.settle(item.get("status"), False)
        if self.status == "failed":  # a failed response's calls in progress are its error's to name
            return
        empty = " (its output list is empty)" if not self._completed else ""
        for entry in self._items:
            if id(entry) not in listed:
                entry.unlisted = not entry.call.done
                kept = (
                    "never finished, so marked incomplete (never run)"
                    if entry.unlisted
                    else "kept as streamed (its item finished)"
                )
                self.note(
                    "not_in_completed",
                    f"call {entry.call.tool_call_id} ({entry.call.name}) streamed but not in the "
                    f"{ending} output{empty}; {kept}",
                    chunk_index=entry.call.first_chunk,
                    tool_call_id=entry.call.tool_call_id,
                )

    def _orphan_calls(self) -> None:
        """Deltas or a `.done` for an item that never came: kept as a call without name (so
        incomplete, never run) holding what they said, with an ``orphan_delta`` finding."""
        orphans = self._orphans
        assert orphans is not None
        self._orphans = None
        if self._foreign_items:  # deltas for an item of an unknown type are that item's (reported)
            for key in [k for k in orphans if k in self._foreign_items]:
                held = orphans.pop(key)
                self.note(
                    "malformed_chunk",
                    f"chunk {held.first}: {held.count} arguments delta(s) for {key!r}, an output item of a "
                    "type this parser does not read; not read",
                    chunk_index=held.first,
                )
            if not orphans:
                return
        if any(held.pieces or held.final for held in orphans.values()):
            for entry in self._items:  # an item with no final form of its own may be what they were for
                if entry.final is None and entry.call.kind != "builtin":
                    entry.call.hold(
                        "arguments for an item never announced came in this response, and this call has no "
                        "final arguments (.done, output_item.done) to show they are not its"
                    )
        for key, held in orphans.items():
            item_id = None if isinstance(key, tuple) else key
            where = f"item {key!r}" if item_id is not None else f"output index {key[1]!r}"
            entry = self._announce({"type": "function_call", "id": item_id}, None, held.first, wire=False)
            entry.call.pieces = held.pieces
            entry.call.first_chunk = held.first
            if held.final is not None:
                self._set_final(entry, held.final, "the .done", held.first)
            what = f"{held.count} arguments delta(s)" if held.count else ""
            if held.final is not None:
                what = f"{what} and a .done" if what else "a function_call_arguments.done"
            self.note(
                "orphan_delta",
                f"chunk {held.first}: {what} for {where}, which was never announced; kept as call "
                f"{entry.call.index} without name or id (incomplete, never run)",
                chunk_index=held.first,
            )

    @staticmethod
    def _compare(pending: PendingCall, final: str, findings: list[Finding]) -> None:
        """The final arguments against the deltas joined: a surrogate pair split across two deltas
        is the same text (reported as joined), anything else a mismatch."""
        joined = "".join(pending.pieces)
        if joined == final:
            return
        fixed, paired, _ = fix_surrogates(joined)
        if paired and fixed == final:
            findings.append(
                finding(
                    "split_surrogate_pair",
                    f"call {pending.tool_call_id}: a surrogate pair split across deltas was joined",
                    chunk_index=pending.first_chunk,
                    tool_call_id=pending.tool_call_id,
                )
            )
            return
        findings.append(
            finding(
                "arguments_mismatch",
                f"call {pending.tool_call_id}: the final arguments ({len(final)} characters) differ from "
                f"the concatenated deltas ({len(joined)} characters); kept the final ones",
                chunk_index=pending.first_chunk,
                tool_call_id=pending.tool_call_id,
            )
        )

    def _final_text_of(self, findings: list[Finding]) -> list[Any]:
        """The text of the stream. Its final forms are authoritative over the deltas, as for arguments
        (the latest that holds text: ``response.completed``'s message items, ``output_item.done``,
        ``content_part.done``, ``output_text.done``); when it differs from the joined deltas,
        ``text_mismatch`` says so. Text only in ``output_item.added`` (sent empty by OpenAI) is read
        when nothing else holds any."""
        completed: list[Any] = []
        for item in self._completed or ():
            if isinstance(item, Mapping) and item.get("type") == "message":
                completed.extend(_message_texts(item))
        forms = (
            ("response.completed", completed),
            ("output_item.done", self._item_texts),
            ("content_part.done", self._part_texts),
            ("output_text.done", self._text_done or []),
        )
        final = next(((where, texts) for where, texts in forms if any(texts)), None)
        if final is None:
            return self._text or self._added_texts
        if not self._text:
            return final[1]
        where, texts = final
        if all(type(t) is str for t in (*texts, *self._text)):
            kept, sent = "".join(texts), "".join(self._text)
            if kept != sent:
                findings.append(
                    finding(
                        "text_mismatch",
                        f"the text deltas ({len(sent)} characters) differ from the {where} text "
                        f"({len(kept)} characters); kept the {where} text",
                    )
                )
            return texts
        return self._text

    def pending_calls(self) -> list[PendingCall]:
        return [e.call for e in self._items]

    def text_pieces(self) -> list[list[Any]]:
        return [self._text, self._reasoning]

    def snapshot(self) -> dict[int, dict[int, dict[str, Any]]]:
        """The calls assembled so far (for stepping through a stream)."""
        return calls_snapshot([e.call for e in self._items])

    def _result(self, error: str | None) -> ParsedResponse:
        if error is None or (self.status == "failed" and self._completed is not None):
            self._reconcile()  # (response.failed's output too: what it lists is read as the body reader does)
        if self._orphans:
            self._orphan_calls()
        if self._stray is not None:
            for entry in self._items:
                entry.call.hold(self._stray)
        for entry in self._items:
            if entry.emptied is not None:
                entry.call.hold(f"{entry.emptied}: which is right is unknown")
        findings = list(self.findings)
        calls: list[ToolCall] = []
        status = self.status
        ended = status in _FINAL_STATUSES or (self.ended and status is not None)
        ending = ending_of(status) if ended else "none"
        failed = failure_clause(error) if error is not None else None
        # why a call whose item did not finish may be unfinished (a finished item ended; after
        # response.completed an item it lists ended too, and `_reconcile` marked it done)
        if ending == "normal":
            cut = "the item never finished and response.completed's output does not list it"
        elif ending == "none" and self.whole:  # as a chat body without finish_reason: arguments that
            # form a JSON object are whole, an empty string or custom input is not
            cut = "the response ended without a status"
        elif ending == "none":
            cut = "the stream ended before the item finished, without response.completed"
        elif status == "incomplete":
            cut = f"the response is incomplete ({self.incomplete_reason}) and the item never finished"
        else:
            cut = f"the response ended with status {status!r}, not a normal end, before the item finished"
        taken = provider_ids([e.call for e in self._items])
        for position, entry in enumerate(sorted(self._items, key=lambda e: e.order)):
            pending = entry.call
            pending.index = position
            raw = None
            if entry.final is not None:
                if pending.pieces and not entry.compared:
                    self._compare(pending, entry.final, findings)
                raw = entry.final
            done = pending.done or (ending == "normal" and not entry.unlisted and entry.cut_item is None)
            why = cut
            if entry.cut_item is not None:
                why = f"its item has status {entry.cut_item}" + (
                    " although the response completed" if ending == "normal" else ""
                )
            elif done and ending != "normal":
                pending.finished_by = "an item that finished"
            call = pending.finalize(
                self.batch,
                findings,
                raw,
                None if done else failed,
                None if done else why,
                taken,
                self.whole and ending == "none",
            )
            calls.append(call)
            if self.listener is not None:
                self.listener(CallFinished(call=call))
        unfinished = sum(not c.complete for c in calls)
        if status == "incomplete":
            findings.append(
                finding(
                    "incomplete_response",
                    f"response incomplete ({self.incomplete_reason}); {unfinished} of {len(calls)} call(s) "
                    "incomplete, never run",
                )
            )
        elif ending == "none" and error is None:
            message = (
                f"the body has no final status (status {status!r})"
                if self.whole
                else f"stream ended without response.completed (status {status!r})"
            )
            findings.append(finding("no_finish_reason", message))
        elif ending not in ("normal", "none") and error is None:
            findings.append(how_it_ended("status", str(status), unfinished))
        if self._refusal and (refused := refusal_note(self._refusal, "")) is not None:
            findings.append(refused)
        server = tuple(self._server.values())
        for s in server:
            findings.append(
                finding(
                    "server_tool_call",
                    f"server-side tool call {s.tool_call_id} ({s.name}) reported separately; "
                    "not a client call",
                    tool_call_id=s.tool_call_id or None,
                )
            )
        return single_choice(
            "openai-responses-stream",
            text=self._final_text_of(findings),
            reasoning=self._reasoning,
            calls=calls,
            finish_reason=self.status,
            findings=capped(findings, self._limit),
            usage=self.usage,
            response_id=self.response_id,
            model=self.model,
            server_calls=server,
            error=error,
        )


def split_responses(events: Iterable[Mapping[str, Any]], *, batch: int = 0) -> list[ParsedResponse]:
    """Parse a file holding one or more consecutive Responses streams (a new one at ``response.created``)."""
    responses: list[ParsedResponse] = []
    acc = ResponsesStreamAccumulator(batch=batch)
    for event in events:
        if event.get("type") == "response.created" and acc.chunk_count:
            responses.append(acc.finish())
            acc = ResponsesStreamAccumulator(batch=batch + len(responses))
        acc.feed(event)
    if acc.chunk_count:
        responses.append(acc.finish())
    return responses


def parse_responses_output(body: Mapping[str, Any], *, batch: int = 0) -> ParsedResponse:
    """Read a whole Responses API ``response`` object (its ``output`` items).

    ``status: "failed"`` (or an ``error`` object) raises `ProviderStreamError` quoting the provider;
    ``status: "incomplete"`` marks calls whose items are not completed incomplete.
    """
    acc = ResponsesStreamAccumulator(batch=batch)
    acc.whole = True
    acc._response_event("response.completed", body)
    if body.get("status") == "incomplete":
        acc._response_event("response.incomplete", body)
    output = body.get("output")
    if not isinstance(output, list):
        if output is not None:
            acc.note("malformed_chunk", f"`output` is {a_json_type(output)}, not a list of items; skipped")
        output = []
    for pos, item in enumerate(output):
        if not isinstance(item, Mapping):
            acc.note(
                "malformed_chunk",
                f"output item {pos} is {a_json_type(item)}, not an object; skipped ({as_text(item)[:100]})",
            )
            acc._odd_item(item, f"output item {pos}")
            continue
        kind = as_key(item.get("type"))
        if kind == "message":
            for part in _parts(item.get("content"), f"output item {pos} content", acc):
                if part.get("type") == "output_text":
                    acc._text.append(part.get("text"))
                elif part.get("type") == "refusal":
                    acc._refusal.append(part.get("refusal"))
        elif kind == "reasoning":
            for part in _parts(item.get("summary"), f"output item {pos} summary", acc):
                acc._reasoning.append(part.get("text"))
        elif not _is_call(kind) and kind not in _SERVER_ITEMS and kind not in _QUIET_ITEMS:
            acc._unknown_item(kind, 0, item)
    acc._completed = None
    for pos, item in enumerate(output):
        kind = as_key(item.get("type")) if isinstance(item, Mapping) else None
        if _is_call(kind):
            entry = acc._announce(item, pos, 0)
            final = _final_of(item)
            if final is None:
                field = _CLIENT_ITEMS.get(str(kind), "arguments")
                entry.call.args_absent = f"`{field}` {'null' if field in item else 'missing'}"
                entry.call.quirky = True
                final = ""
            entry.final = acc._final_text(entry.call, final, 0)
            entry.settle(item.get("status"), False)
        elif kind in _SERVER_ITEMS:
            server = _server_call(item)
            acc._server[server.tool_call_id] = server
    message = error_message(body) if body.get("status") == "failed" or body.get("error") else None
    if message is None and body.get("status") == "failed":
        message = "status 'failed' without an error object"
    if message is not None:
        partial = acc._result(message)
        note = provider_error_note(message, body, partial.tool_calls, None, instead=True)
        exc = ProviderStreamError(message, payload=dict(body), line_number=None)
        exc.partial_responses = (_whole(partial, note),)
        raise exc
    return _whole(acc._result(None))


def _parts(value: Any, what: str, acc: ResponsesStreamAccumulator) -> list[Mapping[str, Any]]:
    """The object parts of an item's ``content`` / ``summary`` list; another value reported."""
    if value is None:
        return []
    if not isinstance(value, list):
        acc.note("malformed_chunk", f"{what} is {a_json_type(value)}, not a list of parts; skipped")
        return []
    return [part for part in value if isinstance(part, Mapping)]


def _whole(response: ParsedResponse, *more: Finding) -> ParsedResponse:
    return replace(response, format="openai-responses", findings=(*response.findings, *more))

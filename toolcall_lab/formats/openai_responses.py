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
`ProviderStreamError`; ``response.incomplete`` marks calls whose items did not finish incomplete,
and so does a stream cut before ``response.completed`` for an item announced with no arguments.
A streamed call that ``response.completed`` does not list is kept and reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from toolcall_lab.exceptions import ProviderStreamError
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
    finding,
    fix_surrogates,
    provider_ids,
    single_choice,
)
from toolcall_lab.formats.errors import error_message
from toolcall_lab.messages import Finding, ParsedResponse, ServerToolCall, ToolCall

_CLIENT_ITEMS = {"function_call": "arguments", "custom_tool_call": "input"}
_BUILTIN_ITEMS = frozenset({"computer_call", "local_shell_call", "shell_call", "apply_patch_call"})
_ITEM_BOOKKEEPING = frozenset({"id", "type", "status", "call_id", "pending_safety_checks"})


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
_QUIET_ITEMS = frozenset({"message", "reasoning", "mcp_list_tools"})
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

    __slots__ = ("call", "final", "item_id", "output_index")

    def __init__(self, call: PendingCall, item_id: Any, output_index: Any) -> None:
        self.call = call
        self.item_id = item_id
        self.output_index = output_index if type(output_index) is int else 1 << 30
        self.final: str | None = None


class _Held:
    """Deltas and a `.done` for an item not announced (yet): kept, never dropped."""

    __slots__ = ("count", "final", "first", "pieces")

    def __init__(self, first: int) -> None:
        self.first = first
        self.count = 0
        self.pieces: list[str] = []
        self.final: str | None = None


class ResponsesStreamAccumulator(StreamAccumulator):
    """Assemble function calls and text from the events of one Responses API stream."""

    __slots__ = (
        "_by_key",
        "_completed",
        "_items",
        "_orphans",
        "_reasoning",
        "_server",
        "_text",
        "incomplete_reason",
        "status",
    )

    def __init__(self, *, batch: int = 0, listener: StreamListener | None = None) -> None:
        super().__init__(batch=batch, listener=listener)
        self.status: str | None = None
        self.incomplete_reason: str | None = None
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._items: list[_Item] = []
        self._by_key: dict[Any, _Item] = {}
        self._server: dict[str, ServerToolCall] = {}
        self._completed: list[Any] | None = None
        # deltas (and a `.done`) for items not announced yet, by item id or ("#", output_index)
        self._orphans: dict[Any, _Held] | None = None

    def _find(self, event: Mapping[str, Any]) -> _Item | None:
        item_id = event.get("item_id")
        found = self._by_key.get(item_id) if item_id else None
        if found is None:
            found = self._by_key.get(("#", event.get("output_index")))
        return found

    def _held(self, event: Mapping[str, Any], n: int) -> _Held:
        """What is held for the item an event names but nobody announced (made on first use)."""
        item_id = event.get("item_id")
        key = item_id if item_id else ("#", event.get("output_index"))
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
        final = next((h.final for h in found if h.final is not None), None)
        if final is not None:
            entry.final = final
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

    def _announce(self, item: Mapping[str, Any], output_index: Any, n: int) -> _Item:
        kind = str(item.get("type"))
        name = item.get("name")
        if kind in _BUILTIN_ITEMS:
            name = kind.removesuffix("_call")
        call = PendingCall.announced(0, len(self._items), n, item.get("call_id"), name)
        if kind == "custom_tool_call":
            call.kind = "custom"
            call.quirky = True
        elif kind in _BUILTIN_ITEMS:
            call.kind = "builtin"
            call.quirky = True
        entry = _Item(call, item.get("id"), output_index)
        self._items.append(entry)
        if item.get("id"):
            self._by_key[item["id"]] = entry
        if type(output_index) is int:
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

    def feed(self, event: Mapping[str, Any]) -> None:
        n = self.chunk_count
        self.chunk_count = n + 1
        if type(event) is not dict:
            mapped = self._event_mapping(event, n)
            if mapped is None:
                return
            event = mapped
        kind = event.get("type")
        if kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            entry = self._find(event)
            piece = event.get("delta") or ""
            if entry is None:
                held = self._held(event, n)
                held.count += 1
                if piece and isinstance(piece, str):
                    held.pieces.append(piece)
            elif piece:
                entry.call.pieces.append(piece)
                if self.listener is not None:
                    self.listener(
                        ArgumentsDelta(
                            chunk_index=n, choice_index=0, call_index=entry.call.index, delta=piece
                        )
                    )
        elif kind == "response.output_text.delta":
            self._text.append(event.get("delta") or "")
        elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            self._reasoning.append(event.get("delta") or "")
        elif kind == "response.output_item.added":
            item = event.get("item") or {}
            itype = item.get("type")
            if itype in _CLIENT_ITEMS:
                entry = self._announce(item, event.get("output_index"), n)
                first = item.get(_CLIENT_ITEMS[itype])
                if isinstance(first, str) and first:
                    entry.call.pieces.append(first)
            elif itype in _BUILTIN_ITEMS:
                self._announce(item, event.get("output_index"), n)
            elif itype not in _SERVER_ITEMS and itype not in _QUIET_ITEMS:
                self._unknown_item(itype, n)
        elif kind in ("response.function_call_arguments.done", "response.custom_tool_call_input.done"):
            entry = self._find(event)
            final = event.get("arguments" if kind.startswith("response.function") else "input")
            if isinstance(final, str):
                if entry is None:  # kept until its item comes (or as an orphan call at the end)
                    self._held(event, n).final = final
                else:
                    entry.final = final
                    entry.call.done = True
        elif kind == "response.output_item.done":
            self._item_done(event, n)
        elif kind in _RESPONSE_EVENTS:
            self._response_event(kind, event.get("response") or {})
        elif kind == "response.failed" or kind == "error":
            self._response_event(kind, event.get("response") or {})
            self.fail(error_message(event) or "response failed", dict(event), n)
        elif kind not in _RESPONSE_EVENTS and (message := error_message(event)) is not None:
            self.fail(message, dict(event), n)  # {"error": ...} or "response.error" from other servers
        elif not (isinstance(kind, str) and kind.startswith(_QUIET_PREFIXES)):
            self.note("unknown_event", f"unknown Responses event type {kind!r} ignored", chunk_index=n)

    def _unknown_item(self, itype: Any, n: int) -> None:
        self.note(
            "unknown_event", f"output item type {itype!r} is not read as a tool call; ignored", chunk_index=n
        )

    def _item_done(self, event: Mapping[str, Any], n: int) -> None:
        item = event.get("item") or {}
        itype = item.get("type")
        if itype in _SERVER_ITEMS:
            server = _server_call(item)
            self._server[server.tool_call_id] = server
            return
        if not _is_call(itype):
            return
        entry = self._by_key.get(item.get("id")) if item.get("id") else None
        if entry is None:
            entry = self._by_key.get(("#", event.get("output_index")))
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
        final = _final_of(item)
        if isinstance(final, str):
            entry.final = final
        if item.get("status") != "incomplete":
            entry.call.done = True

    def _disagree(self, entry: _Item, item: Mapping[str, Any], where: str, n: int | None) -> None:
        """A later form of an item (``output_item.done``, ``response.completed``) against the call as
        announced: a missing id is filled in; a different name or call_id is reported, the first kept
        (what the listener announced and what the deltas were streamed under)."""
        call = entry.call
        name = item.get("name")
        if name and call.name and name != call.name and call.kind != "builtin":
            self.note(
                "name_changed",
                f"call {call.tool_call_id} (item {entry.item_id!r}): {where} names it {name!r}, it was "
                f"announced as {call.name!r}; kept the first",
                chunk_index=n,
                tool_call_id=call.tool_call_id,
            )
        elif name and not call.name:
            call.name = str(name)
        call_id = item.get("call_id")
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
        self.response_id = response.get("id") or self.response_id
        self.model = response.get("model") or self.model
        self.status = response.get("status") or self.status
        if response.get("usage"):
            self.usage = response["usage"]
        if kind == "response.incomplete":
            details = response.get("incomplete_details") or {}
            self.incomplete_reason = (
                str(details.get("reason") or "no reason given") if isinstance(details, Mapping) else None
            )
            self.status = "incomplete"
        if kind in ("response.completed", "response.incomplete") and isinstance(response.get("output"), list):
            self._completed = response["output"]

    def _reconcile(self) -> None:
        """Take the ``output`` of ``response.completed`` as the authoritative list of items (its
        arguments over every earlier form; a different name or call_id is reported, see `_disagree`)."""
        if self._completed is None:
            return
        listed: set[int] = set()
        for pos, item in enumerate(self._completed):
            if not isinstance(item, Mapping):
                continue
            itype = item.get("type")
            if itype in _SERVER_ITEMS:
                server = _server_call(item)
                self._server.setdefault(server.tool_call_id, server)
                continue
            if not _is_call(itype):
                continue
            entry = self._by_key.get(item.get("id")) if item.get("id") else None
            if entry is None:
                entry = next(
                    (
                        e
                        for e in self._items
                        if e.call.tool_call_id and e.call.tool_call_id == item.get("call_id")
                    ),
                    None,
                )
            final = _final_of(item)
            if entry is None:
                entry = self._announce(item, pos, -1)
                self.note(
                    "recovered_from_completed",
                    f"call {item.get('call_id')} ({item.get('name')}) only in response.completed "
                    "output; taken from there",
                    tool_call_id=entry.call.tool_call_id,
                )
            else:
                self._disagree(entry, item, "response.completed", None)
            listed.add(id(entry))
            if isinstance(final, str):
                if entry.final is not None and entry.final != final:
                    self.note(
                        "arguments_mismatch",
                        f"call {entry.call.tool_call_id}: response.completed output differs from "
                        "the earlier final arguments; kept the response.completed output",
                        tool_call_id=entry.call.tool_call_id,
                    )
                entry.final = final
            if item.get("status") != "incomplete":
                entry.call.done = True
        ending = "response.incomplete" if self.status == "incomplete" else "response.completed"
        empty = " (its output list is empty)" if not self._completed else ""
        for entry in self._items:
            if id(entry) not in listed:
                self.note(
                    "not_in_completed",
                    f"call {entry.call.tool_call_id} ({entry.call.name}) streamed but not in the "
                    f"{ending} output{empty}; kept as streamed",
                    chunk_index=entry.call.first_chunk,
                    tool_call_id=entry.call.tool_call_id,
                )

    def _orphan_calls(self) -> None:
        """Deltas or a `.done` for an item that never came: kept as a call without name (so
        incomplete, never run) holding what they said, with an ``orphan_delta`` finding."""
        orphans = self._orphans
        assert orphans is not None
        self._orphans = None
        for key, held in orphans.items():
            item_id = None if isinstance(key, tuple) else key
            where = f"item {key!r}" if item_id is not None else f"output index {key[1]!r}"
            entry = self._announce({"type": "function_call", "id": item_id}, None, held.first)
            entry.call.pieces = held.pieces
            entry.call.first_chunk = held.first
            entry.final = held.final
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
                f"call {pending.tool_call_id}: the final arguments differ from the concatenated deltas "
                f"({len(joined)} vs {len(final)} characters); kept the final ones",
                chunk_index=pending.first_chunk,
                tool_call_id=pending.tool_call_id,
            )
        )

    def pending_calls(self) -> list[PendingCall]:
        return [e.call for e in self._items]

    def snapshot(self) -> dict[int, dict[int, dict[str, Any]]]:
        """The calls assembled so far (for stepping through a stream)."""
        return calls_snapshot([e.call for e in self._items])

    def _result(self, error: str | None) -> ParsedResponse:
        if error is None:
            self._reconcile()
        if self._orphans:
            self._orphan_calls()
        findings = list(self.findings)
        calls: list[ToolCall] = []
        incomplete = self.status == "incomplete"
        closed = self.status in _FINAL_STATUSES
        unfinished = 0
        taken = provider_ids([e.call for e in self._items])
        for position, entry in enumerate(sorted(self._items, key=lambda e: e.output_index)):
            pending = entry.call
            pending.index = position
            raw = None
            if entry.final is not None:
                if pending.pieces:
                    self._compare(pending, entry.final, findings)
                raw = entry.final
            failed = (error is not None or incomplete) and not pending.done
            unfinished += failed
            call = pending.finalize(
                self.batch,
                findings,
                "length" if failed and incomplete else None,
                raw,
                failed,
                pending.done or closed,
                taken,
            )
            calls.append(call)
            if self.listener is not None:
                self.listener(CallFinished(call=call))
        if incomplete:
            findings.append(
                finding(
                    "incomplete_response",
                    f"response incomplete ({self.incomplete_reason}); {unfinished} call(s) not finished "
                    "marked incomplete",
                )
            )
        elif self.status not in _FINAL_STATUSES and error is None:
            message = f"stream ended without response.completed (status {self.status!r})"
            findings.append(finding("no_finish_reason", message))
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
            text=self._text,
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
    acc._response_event("response.completed", body)
    if body.get("status") == "incomplete":
        acc._response_event("response.incomplete", body)
    output = body.get("output") or []
    for pos, item in enumerate(output if isinstance(output, list) else []):
        if not isinstance(item, Mapping):
            acc.note("malformed_chunk", f"output item {pos} is not an object; skipped")
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if isinstance(part, Mapping) and part.get("type") == "output_text":
                    acc._text.append(part.get("text") or "")
        elif kind == "reasoning":
            for part in item.get("summary") or []:
                if isinstance(part, Mapping):
                    acc._reasoning.append(part.get("text") or "")
        elif not _is_call(kind) and kind not in _SERVER_ITEMS and kind not in _QUIET_ITEMS:
            acc._unknown_item(kind, 0)
    acc._completed = None
    for pos, item in enumerate(output if isinstance(output, list) else []):
        if isinstance(item, Mapping) and _is_call(item.get("type")):
            entry = acc._announce(item, pos, 0)
            final = _final_of(item)
            entry.final = final if isinstance(final, str) else ""
            entry.call.done = item.get("status") != "incomplete"
        elif isinstance(item, Mapping) and item.get("type") in _SERVER_ITEMS:
            server = _server_call(item)
            acc._server[server.tool_call_id] = server
    message = error_message(body) if body.get("status") == "failed" or body.get("error") else None
    if message is None and body.get("status") == "failed":
        message = "status 'failed' without an error object"
    if message is not None:
        acc.note("provider_error", f"provider error instead of a response: {message}")
        exc = ProviderStreamError(message, payload=dict(body), line_number=None)
        exc.partial_responses = (_whole(acc._result(message)),)
        raise exc
    return _whole(acc._result(None))


def _whole(response: ParsedResponse) -> ParsedResponse:
    from dataclasses import replace

    return replace(response, format="openai-responses")

"""When a streamed call becomes complete: an incremental scan of its argument deltas.

Eager execution starts a call as soon as its accumulated arguments form a complete JSON object, or,
for a call whose arguments never form one because its tool takes none (an empty argument string),
once a later call starts (the stream's end is the batch's business). An empty string for a tool that
takes arguments is never complete early: a stream that interleaves calls (all headers first, or
arguments for an earlier call after a later one started) may still send them, and a call must never
run with arguments it was not sent; it waits for its object, or for the stream's end, where the
parser decides. Re-parsing the
whole string on every delta would cost O(n²) per call; instead each delta is scanned once for the
characters that change JSON nesting (``{ } [ ] "`` and the backslash), carrying the state (depth,
inside a string, a pending escape) to the next delta. When the top-level value closes, the string
is parsed once to confirm it is usable arguments, exactly as `parse_arguments` reads them (a JSON
object, or a JSON string holding one).

`CallTracker` reads the chat-completions accumulator's calls of choice 0 (the choice the loop executes)
after each chunk: their argument pieces as they grow, and calls as they start.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

from toolcall_lab.formats.base import StreamEvent
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator
from toolcall_lab.messages import ParsedArguments, ToolCall, fallback_tool_call_id, parse_arguments
from toolcall_lab.records import TimedChunk

_STRUCTURAL = re.compile(r'[{}\[\]"\\]')
_OPEN, _CLOSED, _NOT_AN_OBJECT = 1, 2, 3


class ArgumentScan:
    """One call's argument string as it streams in; `feed` says when its top-level value closed."""

    __slots__ = ("depth", "escape", "in_string", "pieces", "state")

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.depth = 0
        self.in_string = False
        self.escape = False
        self.state = 0
        """0: only whitespace so far; 1: inside the top-level value; 2: closed; 3: never a complete
        object (the value is not an object or a string, or text follows its end)."""

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def feed(self, delta: str) -> bool:
        """Take the next delta; True when the top-level value closed with it (and nothing but
        whitespace follows)."""
        self.pieces.append(delta)
        state = self.state
        if state >= _CLOSED:
            if state == _CLOSED and delta and not delta.isspace():
                self.state = _NOT_AN_OBJECT  # text after the value: the string is no longer one object
            return False
        start = 0
        if not state:
            body = delta.lstrip()
            if not body:
                return False
            if body[0] not in '{"':
                self.state = _NOT_AN_OBJECT
                return False
            self.state = _OPEN
            start = len(delta) - len(body)
        depth, in_string = self.depth, self.in_string
        skip = start
        if self.escape:  # the previous delta ended with a backslash inside a string
            self.escape = False
            skip = start + 1
        for m in _STRUCTURAL.finditer(delta, start):
            i = m.start()
            if i < skip:
                continue
            ch = delta[i]
            if in_string:
                if ch == "\\":
                    if i + 1 >= len(delta):
                        self.escape = True
                    skip = i + 2
                    continue
                if ch != '"':
                    continue
                in_string = False
                if depth:
                    continue
            elif ch == '"':
                in_string = True
                continue
            elif ch == "{" or ch == "[":
                depth += 1
                continue
            elif ch == "\\":
                continue
            else:
                depth -= 1
                if depth > 0:
                    continue
            rest = delta[i + 1 :]
            self.state = _CLOSED if not rest or rest.isspace() else _NOT_AN_OBJECT
            self.depth, self.in_string = depth, in_string
            return self.state == _CLOSED
        self.depth, self.in_string = depth, in_string
        return False


def takes_no_arguments(parameters: Any) -> bool:
    """Whether a tool's parameter schema lists nothing to send: no properties and nothing required
    (an empty argument string then says everything; for any other tool it may be a call whose
    arguments have not arrived yet)."""
    if not parameters:
        return True
    if not isinstance(parameters, Mapping):
        return False
    return not parameters.get("properties") and not parameters.get("required")


def no_argument_tools(schemas: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The names of the tools in OpenAI-format `schemas` that take no arguments."""
    out = set()
    for schema in schemas:
        fn = schema.get("function") if isinstance(schema, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            continue
        if takes_no_arguments(fn.get("parameters")):
            out.add(fn["name"])
    return frozenset(out)


def usable(arguments: str) -> bool:
    """Whether `arguments` read as a call's arguments (a JSON object, possibly double-encoded)."""
    return type(parse_arguments(arguments)) is ParsedArguments and not arguments.isspace()


class CallTracker:
    """Which calls of choice 0 of one streamed response became complete, read from the chat-completions
    accumulator after each chunk (`poll`).

    A call is complete when its arguments form a complete, usable JSON object (`ArgumentScan`), or,
    when a later call starts, if nothing but whitespace has arrived for it and its tool takes no
    arguments (`no_arguments`: tool names; any other tool waits for its object or the stream's end).
    Complete calls collect in `ready` as ``(position, call)``.
    Only calls whose indices run 0, 1, 2, ... in the order they appear are tracked, so a position
    here is the call's position in the final batch; from the first other index on (sparse or
    repeated indices, a provider's quirk the parser reports), the remaining calls are left to the
    stream's end (`out_of_order` says where). A call whose name has not arrived yet waits. Arguments
    that never complete are left to the stream's end too, where the parser's verdict decides (they are
    never executed).

    It reads the accumulator's calls of choice 0 as they stand (in the order they started, each with its
    argument pieces so far) instead of listening to its stream events: no event object per argument
    delta, and the parser keeps its fast paths (a listener turns them off). This is the one place
    that reads the accumulator's internals; a public accessor on it would be better. Passed as the
    accumulator's listener it still works (it looks whenever an event comes).
    """

    __slots__ = (
        "acc",
        "calls",
        "dispatched",
        "fed",
        "in_order",
        "looked",
        "no_arguments",
        "open",
        "order",
        "out_of_order",
        "ready",
        "seen",
    )

    def __init__(self, no_arguments: Container[str] = frozenset()) -> None:
        self.no_arguments = no_arguments
        """Tools that take no arguments: only their calls complete when a later call starts."""
        self.acc: ChatCompletionAccumulator | None = None
        self.order: list[Any] | None = None
        """The accumulator's calls of choice 0, in the order they started (its own list)."""
        self.looked = 0
        """Calls of choice 0 looked at so far, in the order they started."""
        self.seen = 0
        """Calls tracked so far (their indices are 0 .. seen - 1, equal to their positions)."""
        self.open: dict[int, ArgumentScan] = {}
        """Tracked calls not dispatched yet, by index."""
        self.calls: dict[int, Any] = {}
        """The accumulator's pending call of each open call, by index."""
        self.fed: dict[int, int] = {}
        """How many of its argument pieces each open call's scan has read."""
        self.dispatched: dict[int, ToolCall] = {}
        self.ready: list[tuple[int, ToolCall]] = []
        self.in_order = True
        self.out_of_order: str | None = None
        """Where the indices stopped running 0, 1, 2, ... (in words), once they did."""

    def listen(self, acc: ChatCompletionAccumulator) -> None:
        self.acc = acc
        choices: Any = getattr(acc, "_choices", None)  # (choice 0 is made with the accumulator)
        self.order = choices[0].order if choices and 0 in choices else None

    def __call__(self, event: StreamEvent) -> None:
        self.poll()

    def poll(self) -> bool:
        """Look at the accumulator (after a chunk): each open call reads the argument pieces it got
        since, then calls that started since are taken in. True when calls are `ready`."""
        open_ = self.open
        if open_:  # (`_feed`, inlined: this runs once per chunk)
            calls, fed = self.calls, self.fed
            for index in tuple(open_):
                pieces = calls[index].pieces
                was = fed[index]
                if len(pieces) > was:
                    fed[index] = len(pieces)
                    scan = open_[index]
                    for piece in pieces[was:]:
                        if type(piece) is str and scan.feed(piece):
                            self._try(index, scan)
                            if index not in open_:
                                break
        order = self.order
        if order is not None and len(order) > self.looked:
            for call in order[self.looked :]:
                self._started(call)
            self.looked = len(order)
        return bool(self.ready)

    def _started(self, call: Any) -> None:
        """A call of choice 0 started (the parser numbered it `call.index`)."""
        if not self.in_order:
            return
        index = call.index
        for earlier, scan in list(self.open.items()):  # a later call started: the fallback rule
            if scan.state == 0:  # (only whitespace so far: an argument string that is not JSON
                self._try(earlier, scan, no_arguments_only=True)  # or is cut off never completes)
        if index != self.seen:
            self.in_order = False  # its position, and the later calls', is known at the end
            self.out_of_order = (
                f"call index {index} came where {self.seen} was expected"
                if index >= 0
                else f"a negative call index ({index}) came where {self.seen} was expected"
            )
            return
        self.seen += 1
        self.open[index] = ArgumentScan()
        self.calls[index] = call
        self.fed[index] = 0
        if call.pieces:
            self._feed(index)

    def _feed(self, index: int) -> None:
        """The open call at `index` reads the argument pieces it got since it last read."""
        pieces = self.calls[index].pieces
        fed = self.fed[index]
        self.fed[index] = len(pieces)
        scan = self.open[index]
        for piece in pieces[fed:]:
            if type(piece) is str and scan.feed(piece):
                self._try(index, scan)
                if index not in self.open:
                    return

    def _try(self, index: int, scan: ArgumentScan, no_arguments_only: bool = False) -> None:
        """Dispatch the call at `index` if its arguments are usable and its name known (with
        `no_arguments_only`: and its tool takes no arguments)."""
        arguments = scan.text
        outcome = parse_arguments(arguments)
        if type(outcome) is not ParsedArguments:
            return
        pending = self.calls[index]
        tool_call_id, name = pending.tool_call_id, pending.name
        if not name:
            return  # its name has not arrived: it waits (at the latest for the stream's end)
        if no_arguments_only and name not in self.no_arguments:
            return  # its arguments may still come (an interleaving stream): it waits
        call = ToolCall(
            tool_call_id=tool_call_id or fallback_tool_call_id(self.acc.batch if self.acc else 0, index),
            name=name,
            arguments=arguments,
            index=index,
            id_source="provider" if tool_call_id else "fallback",
            _outcome=outcome,
        )
        self.dispatched[index] = call
        del self.open[index], self.calls[index], self.fed[index]
        self.ready.append((index, call))

    def take(self) -> list[tuple[int, ToolCall]]:
        """The calls that became complete since the last `take` (the accumulator is looked at first)."""
        self.poll()
        ready, self.ready = self.ready, []
        return ready


def completion_offsets(
    chunks: Sequence[TimedChunk], latency_s: float, no_arguments: Container[str] = frozenset()
) -> dict[int, float]:
    """When each call of choice 0 became complete in a recorded stream, in seconds from the request,
    keyed by call index (calls complete only at the end get `latency_s`, the stream's end).

    The same rule eager execution follows live and in replay, applied to recorded chunk offsets
    (`no_arguments`: the tools that take no arguments, `no_argument_tools`). A whole (non-streamed)
    body completes every call at the end.
    """
    tracker = CallTracker(no_arguments)
    acc = ChatCompletionAccumulator()
    tracker.listen(acc)
    out: dict[int, float] = {}
    for chunk in chunks:
        payload = chunk.payload
        if payload.get("object") == "chat.completion":
            break
        acc.feed(payload)
        if tracker.poll():
            for _, call in tracker.take():
                out.setdefault(call.index, chunk.offset_s)
    for call in acc.finish().tool_calls:
        out.setdefault(call.index, latency_s)
    return out

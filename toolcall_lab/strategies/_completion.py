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

`CallTracker` listens to the chat-completions accumulator's `CallStarted` / `ArgumentsDelta` events
(the parser's public stream events) for choice 0, the choice the loop executes.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

from toolcall_lab.formats.base import ArgumentsDelta, CallStarted, StreamEvent
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
    """The accumulator's listener for one streamed response: which calls of choice 0 became complete.

    A call is complete when its arguments form a complete, usable JSON object (`ArgumentScan`), or,
    when a later call starts, if nothing but whitespace has arrived for it and its tool takes no
    arguments (`no_arguments`: tool names; any other tool waits for its object or the stream's end).
    Complete calls collect in `ready` as ``(position, call)``.
    Only calls whose indices run 0, 1, 2, ... in the order they appear are tracked, so a position
    here is the call's position in the final batch; from the first other index on (sparse or
    repeated indices, a provider's quirk the parser reports), the remaining calls are left to the
    stream's end. A call whose name has not arrived yet waits. Arguments that never complete are
    left to the stream's end too, where the parser's verdict decides (they are never executed).
    """

    __slots__ = ("acc", "dispatched", "in_order", "no_arguments", "open", "out_of_order", "ready", "seen")

    def __init__(self, no_arguments: Container[str] = frozenset()) -> None:
        self.no_arguments = no_arguments
        """Tools that take no arguments: only their calls complete when a later call starts."""
        self.acc: ChatCompletionAccumulator | None = None
        self.seen = 0
        """Calls tracked so far (their indices are 0 .. seen - 1, equal to their positions)."""
        self.open: dict[int, ArgumentScan] = {}
        """Tracked calls not dispatched yet, by index."""
        self.dispatched: dict[int, ToolCall] = {}
        self.ready: list[tuple[int, ToolCall]] = []
        self.in_order = True
        self.out_of_order: str | None = None
        """Where the indices stopped running 0, 1, 2, ... (in words), once they did."""

    def listen(self, acc: ChatCompletionAccumulator) -> None:
        self.acc = acc

    def __call__(self, event: StreamEvent) -> None:
        if type(event) is ArgumentsDelta:
            if event.choice_index == 0:
                scan = self.open.get(event.call_index)
                if scan is not None and scan.feed(event.delta):
                    self._try(event.call_index, scan)
        elif type(event) is CallStarted and event.choice_index == 0:
            index = event.call_index
            if not self.in_order or 0 <= index < self.seen:
                return  # (the accumulator says so again when the call's id arrives)
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

    def _try(self, index: int, scan: ArgumentScan, no_arguments_only: bool = False) -> None:
        """Dispatch the call at `index` if its arguments are usable and its name known (with
        `no_arguments_only`: and its tool takes no arguments)."""
        arguments = scan.text
        outcome = parse_arguments(arguments)
        if type(outcome) is not ParsedArguments:
            return
        tool_call_id, name = self._header(index)
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
        del self.open[index]
        self.ready.append((index, call))

    def _header(self, index: int) -> tuple[str | None, str | None]:
        """The id and name the accumulator holds for the call at `index` of choice 0.

        Read from the accumulator's pending call: its stream events do not carry the name (a
        `CallStarted` is sent before the name is read). A public accessor on the accumulator would
        be better; until the parser has one, this is the one place that reads its internals.
        """
        choices: Any = getattr(self.acc, "_choices", None)
        choice = choices[0] if choices and 0 in choices else None
        pending = choice.calls.get(index) if choice is not None else None
        if choice is not None and (pending is None or pending.index != index):
            # (a call sent without an index, or at a reused one, is numbered by the accumulator: it is
            # found by that number; by its wire index, none or another call would be)
            pending = next((c for c in reversed(choice.order) if c.index == index), None)
        if pending is None:
            return None, None
        return pending.tool_call_id, pending.name

    def take(self) -> list[tuple[int, ToolCall]]:
        """The calls that became complete since the last `take`."""
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
    acc = ChatCompletionAccumulator(listener=tracker)
    tracker.listen(acc)
    out: dict[int, float] = {}
    for chunk in chunks:
        payload = chunk.payload
        if payload.get("object") == "chat.completion":
            break
        acc.feed(payload)
        for _, call in tracker.take():
            out.setdefault(call.index, chunk.offset_s)
    for call in acc.finish().tool_calls:
        out.setdefault(call.index, latency_s)
    return out

"""OpenAI chat completions: the streaming accumulator for ``chat.completion.chunk`` deltas and the
parser for whole ``chat.completion`` bodies.

The accumulator is the one mutable object of the core. It keys calls by (choice, index), joins
argument pieces only at the end, and reports every oddity as a `Finding` with its chunk number.

How a delta finds its call (each rule is a provider seen doing it; see the finding reference):

* A delta with ``index`` goes to the call at that index; one without continues the choice's last
  call (Mistral, Gemini).
* At an occupied index a delta starts a *new* call only when its header names another call.
  Before the call's arguments form a complete JSON object, that is a different id *and* a different
  name (Ollama reuses index 0 for every call); a different id with the same name or no name
  continues the call, reported as ``id_changed`` (LM Studio sends a new id on every fragment, some
  servers the name too). Once the arguments are complete, any different id, a different name, or
  a repeated name with new arguments starts a new call; the name alone, repeated, waits for the next
  delta to decide (a repeat, or a second call to the same function). A *first* name for a call that
  has none (sent after its arguments) names that call (``late_name``): "another name" needs an
  existing name to differ from. The full table is in the README ("How a chat delta finds its call").
* ``type: "custom"`` entries (``custom.name`` / ``custom.input``) are custom tool calls (free-form
  text); an entry of any other type is kept raw and never complete (``unknown_call_type``). A delta
  after the choice's finish reason is appended and reported (``late_delta``).
* Names: a piece equal to the name so far is a repeat (OpenRouter/Novita repeat the full name on
  every delta), a piece that starts with it replaces it (a snapshot, reported), any other piece is
  appended (names split as ``get_`` + ``weather``). Ids are kept once, never concatenated.
* ``arguments`` that is not a string (an object) is serialised compactly and kept; ``null`` adds
  nothing. The deprecated ``function_call`` field is read as a call without id (once, when a
  ``tool_calls`` entry of the same message says the same).
* How the stream ended decides what a call may be (the one rule is in `_endings`): after a normal
  finish reason an empty argument string is ``{}`` (a tool without parameters); after any other
  reason (``length``, ``abort``...) no call is complete, since chat calls have no end marker of their
  own (``content_filter`` fails them all); with no finish reason at all, arguments that form a JSON
  object are whole and an empty string or custom input is not.
* A payload or part of one of a shape a chat chunk does not have is reported (``malformed_chunk``,
  quoting it); when it may hold call data, every call of the response is held back.
* An ``error`` object (top-level, or inside a choice as OpenRouter sends it, with ``finish_reason:
  "error"``) or ``finish_reason: "error"`` ends the stream: `ProviderStreamError` quoting the
  provider, calls marked incomplete.
* Choices: every choice is parsed; `ParsedResponse.tool_calls` and the run loop use choice 0, and an
  ``extra_choices`` finding says what the others hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolcall_lab.exceptions import UsageError
from toolcall_lab.formats._endings import NORMAL, cut_reason, ending_of, how_it_ended
from toolcall_lab.formats._values import (
    CHAT_METADATA,
    a_json_type,
    as_index,
    as_text,
    content_parts,
    describe_gaps,
    index_gaps,
    may_hold_calls,
    refusal_note,
    unknown_shape,
    wire_format_of,
)
from toolcall_lab.formats.base import (
    _CLOSED,
    FINDINGS_PER_KIND,
    ArgumentsDelta,
    CallFinished,
    CallStarted,
    PendingCall,
    StreamAccumulator,
    StreamEvent,
    StreamListener,
    _closed_class,
    capped,
    compact_json,
    extra_choices_note,
    failure_clause,
    finding,
    join_text,
    promised_calls,
    provider_ids,
    repeated_provider_ids,
    usage_problem,
)
from toolcall_lab.formats.errors import error_message, is_detail_error
from toolcall_lab.formats.openai_chat_body import (
    CHOICE_KEYS,
    entry_shape,
    legacy_differs_note,
    parse_chat_completion,
)
from toolcall_lab.messages import (
    Finding,
    ParsedChoice,
    ParsedResponse,
    ToolCall,
    _ChoiceTwin,
    _ResponseTwin,
)

__all__ = ["ChatCompletionAccumulator", "parse_chat_completion"]


_METADATA = CHAT_METADATA
"""Keys a chat chunk without ``choices`` may hold and still be a chunk (usage, metadata)."""
_EMPTY_CHOICES_KEYS = CHAT_METADATA | {"choices", "error"}
_CHOICE_KEYS = CHOICE_KEYS
"""Keys of a choice: one holding others and no ``delta`` is of a shape this parser does not read."""
_DELTA_KEYS = frozenset(
    {"role", "content", "reasoning_content", "reasoning", "function_call", "refusal", "tool_calls"}
)
"""Keys of a delta this reader reads; another key that may hold call data is a part of an unknown
shape (`_odd_keys`), never passed over."""


class _Odd:
    """What came in a chat stream that is not a chat-completion chunk (made on first use)."""

    __slots__ = ("extra", "extra_at", "extra_finished", "extra_high", "extra_low", "foreign", "stray")

    def __init__(self) -> None:
        self.foreign = 0  # events of other wire formats fed here
        self.stray: str | None = None  # why every call is held back (call data of an unknown shape)
        self.extra = 0  # entries of choices beyond `MAX_CHOICES` that held nothing (counted, not kept)
        self.extra_at = 0  # the chunk of the first
        self.extra_finished = 0  # how many of them had a finish_reason
        self.extra_low = 0  # the lowest and highest choice index among them
        self.extra_high = 0


MAX_CHOICES = 128
"""Choices whose state is kept whatever they hold (OpenAI's `n` is at most 128). An entry for a further
choice that holds no call, text nor error is only counted (`extra_choices`), so memory does not grow
with chunks that each name a new choice; one that holds something is kept, as its content is."""


def _holds_nothing(choice: dict[str, Any]) -> bool:
    """A choice entry with no call, text nor error: at most an index, an empty delta (or one with
    only a role) and a finish reason."""
    if not choice.keys() <= _CHOICE_KEYS or choice.get("error"):
        return False
    delta = choice.get("delta")
    if delta is None:
        delta = choice.get("message")
    if delta is None:
        return True
    return type(delta) is dict and not any(v for k, v in delta.items() if k != "role")


class _Choice:
    """The state of one choice. Rarely used fields are class defaults (a new choice is cheap)."""

    finish_reason: str | None = None
    last: PendingCall | None = None
    legacy: PendingCall | None = None
    max_index = -1
    seen = False  # choice 0 exists from the start; it is reported only if a chunk had it
    parked: dict[int, PendingCall] | None = None  # calls whose next delta decides (see _parks)
    parts = 0  # chunks whose content was a list of typed parts
    late_text = False  # text after the finish reason (reported once)
    slow = False  # a call was started off the fast path (it may have neither id nor name)
    sparse = False  # a call's wire index skipped numbers when it came (gaps are reported at the end)
    sparse_at = 0  # the chunk where that happened
    refusal: list[Any] | None = None  # OpenAI `refusal` text pieces, once some arrive
    content: list[str] | None = None  # text and reasoning pieces, once some arrive
    reasoning: list[str] | None = None

    def pristine(self) -> bool:
        """No chunk had this choice (content and reasoning mark it `seen`)."""
        return not (self.seen or self.order or self.finish_reason)

    def __init__(self, index: int) -> None:
        self.index = index
        self.finish_reason = None  # (see `ChatCompletionAccumulator.__init__`)
        self.calls: dict[int, PendingCall] = {}  # wire index -> the call it currently names
        self.order: list[PendingCall] = []  # every call, in the order they started
        self.tail: PendingCall | None = None  # (see `ChatCompletionAccumulator.feed`)


def _as_dict(chunk: Any) -> Any:
    """SDK objects (``ChatCompletionChunk``) -> the dict they were built from, keeping absent keys absent."""
    to_dict = getattr(chunk, "to_dict", None)
    if to_dict is not None:
        return to_dict(mode="json")
    dump = getattr(chunk, "model_dump", None)
    if dump is not None:
        return dump(mode="json", exclude_unset=True)
    return chunk


_FAST_ERRORS = (KeyError, TypeError, ValueError, AttributeError)
_new = object.__new__


class ChatCompletionAccumulator(StreamAccumulator):
    """Assemble tool calls, text and reasoning from OpenAI chat-completion chunks, one at a time.

    Args:
        batch: the number of this model call within its run (from 0); names fallback ids
            ``call_{batch}_{index}`` for calls that arrive without a provider id.
        listener: optional callback receiving `CallStarted` / `ArgumentsDelta` / `CallFinished`
            events, for animating how deltas become calls. None (the default) costs nothing.

    `feed` raises `ProviderStreamError` when a chunk reports a provider error; the response so far
    is on the exception (``partial_responses``).
    """

    __slots__ = ("_choices", "_heard", "_listener", "_odd", "_raised", "_zero", "finished")
    _listener: StreamListener | None  # `_tell` when a listener is set (the parser calls it), else None
    _heard: StreamListener  # the user's listener (set with one)
    _raised: BaseException | None  # what it raised, held until the chunk is read (`_tell`)

    def __init__(self, *, batch: int = 0, listener: StreamListener | None = None) -> None:
        # the base class's fields, set here directly: one accumulator per model response, so its
        # construction is part of every response's fixed cost
        self.batch = batch
        self._listener = None
        if listener is not None:  # (a listener hears every chunk through the general path)
            self.listener = listener
        self.findings: list[Finding] = []
        self.chunk_count = 0
        self.usage: dict[str, Any] | None = None
        self.response_id: str | None = None
        self.model: str | None = None
        self.damaged: str | None = None
        self._limit = None  # (`_final` is set when the response is built)
        first = _new(_Choice)  # _Choice(0), without the call: most streams have just choice 0
        first.index, first.calls, first.order = 0, {}, []
        first.finish_reason = first.tail = None  # (instance values: read on every delta, faster than
        # class defaults)
        self._choices: dict[int, _Choice] = {0: first}
        self._zero = first
        self._odd: _Odd | None = None  # what came that is not a chat-completion chunk (rare)
        self.foreign: str | None = None  # an event of this wire format starts the next response
        self.finished = False  # a choice had a finish_reason (a chunk with another id: a new stream)

    @property
    def listener(self) -> StreamListener | None:
        """The callback hearing this stream's events (None: none). Accumulators with one feed every
        chunk through the general path, which tells it everything; the fast path, for the usual
        accumulator without one, never looks (setting one later switches paths too).

        The parser calls it through `_tell`: what it raises is held until the chunk (or `finish`) is
        fully read, then raised, so the accumulator loses nothing of the stream; it hears nothing
        more of that chunk (or of that `finish`) meanwhile."""
        return self._heard if self._listener is not None else None

    @listener.setter
    def listener(self, value: StreamListener | None) -> None:
        cls = type(self)
        if value is None:
            self._listener = None
            if cls is _HeardChatCompletionAccumulator:
                self.__class__ = ChatCompletionAccumulator
            return
        _check_listener(value)
        self._heard = value
        self._raised = None
        self._listener = self._tell
        if cls is ChatCompletionAccumulator:
            self.__class__ = _HeardChatCompletionAccumulator

    def _tell(self, event: StreamEvent) -> None:
        """Hand `event` to the listener; what it raises is held (`_raise_held` raises it)."""
        if self._raised is None:
            try:
                self._heard(event)
            except BaseException as exc:  # (also KeyboardInterrupt: raised once the chunk is read)
                self._raised = exc

    def _raise_held(self) -> None:
        raised = self._raised
        if raised is not None:
            self._raised = None
            raise raised

    # -- feeding ---------------------------------------------------------------------------------
    def feed(self, chunk: Mapping[str, Any] | Any) -> None:
        """Take one chunk (a decoded SSE payload dict or an SDK ``ChatCompletionChunk``)."""
        n = self.chunk_count
        self.chunk_count = n + 1
        # The fast path is the common chunk: a dict with one known choice and no error. Anything
        # else, or anything that does not fit, takes `_general`, which checks every part.
        if type(chunk) is not dict or "error" in chunk:
            self._general(chunk, n)
            return
        if self.response_id is None:  # (`_first`, inlined for the usual first chunk, which has an id)
            rid = chunk.get("id")
            if rid and type(rid) is str:
                self.response_id = rid
                model = chunk.get("model")
                if model and type(model) is str:
                    self.model = model
            else:
                self._first(chunk)
        usage = chunk.get("usage")
        if usage is not None:
            self._usage(usage, n)
        try:
            (choice,) = chunk["choices"]
            ci = choice["index"]  # (a choice without "index" takes the general path)
            st = self._zero
            if ci is not st.index:  # (a decoded 0 is the interpreter's own 0, choice 0's index)
                if type(ci) is not int:  # false or 0.0, equal to 0 as a key: the general path reports it
                    raise KeyError
                st = self._choices[ci]
            delta = choice["delta"]
            if "error" in choice:  # OpenRouter's per-choice error object
                raise KeyError
            calls = delta.get("tool_calls") if delta else None  # (a delta that is no object: general)
            if calls is None and "tool_calls" in choice:  # calls beside the delta: the general path
                raise KeyError  # reports them
            if "message" in choice:  # a message beside the delta: the general path reports it
                raise KeyError
        except _FAST_ERRORS:
            self._general(chunk, n, usage_done=True)
            return
        if delta:
            if calls:
                # the hot loop: a continuation {"index": i, "function": {"arguments": s}} of a known
                # call, or the usual header {"index": next, "id", "type", "function": {"name", "arguments"}}
                try:
                    (tc,) = calls
                    idx = tc["index"]
                    fn = tc["function"]
                    args = fn["arguments"]
                    # the call the fast path started last, when the index is that call's own int
                    # object (a decoded small int is the interpreter's own), else by its index; an
                    # index false or 1.0 (equal to 0 or 1 as a key) finds none: the general path
                    # reports it
                    call = st.tail
                    if call is None or idx is not call.index:
                        call = st.calls.get(idx) if type(idx) is int else None
                    if call is not None:
                        if len(tc) == 2 and len(fn) == 1 and type(args) is str and st.finish_reason is None:
                            if args:
                                call.pieces.append(args)
                            if len(delta) == 1:  # nothing else in this delta: done, but for a finish
                                finish = choice.get("finish_reason")
                                if finish:
                                    self._finished(st, finish, chunk, n)
                                return
                            calls = None
                    elif (
                        idx == st.max_index + 1
                        and type(idx) is int
                        and len(fn) == 2
                        and type(args) is str
                        and st.finish_reason is None  # (a call after the finish: the general path reports it)
                    ):
                        tid = tc["id"]
                        name = fn["name"]
                        if (
                            tid
                            and name
                            and type(tid) is str
                            and type(name) is str
                            and (len(tc) == 3 or tc["type"] == "function")  # not custom/unknown
                        ):
                            call = _new(PendingCall)  # PendingCall(...) without the __init__ call
                            call.choice_index = st.index
                            call.index = idx
                            call.first_chunk = n
                            call.tool_call_id = tid
                            call.name = name
                            call.pieces = [args] if args else []
                            st.calls[idx] = call
                            st.order.append(call)
                            st.max_index = idx
                            st.last = st.tail = call
                            calls = None
                except _FAST_ERRORS:
                    pass
                if calls is not None:
                    self._tool_deltas(st, calls, n)
                if len(delta) > 1:
                    self._text(st, delta, n)
            else:
                self._text(st, delta, n)
        else:
            st.seen = True
        finish = choice.get("finish_reason")
        if finish:
            if type(finish) is str and finish != "error":  # (`_finished`'s common case, inlined)
                st.finish_reason = finish
                self.finished = True
            else:
                self._finished(st, finish, chunk, n)

    def _finished(self, st: _Choice, finish: Any, chunk: dict[str, Any], n: int) -> None:
        if type(finish) is str:  # (`_finish`, inlined for the common case)
            st.finish_reason = finish
            self.finished = True
        else:
            self._finish(st, finish, n)
        if finish == "error":
            self.fail(error_message(chunk) or "finish_reason 'error' without an error message", chunk, n)

    def _finish(self, st: _Choice, finish: Any, n: int) -> None:
        """A choice's finish reason; one that is not a string (an object, a number) is kept as its
        JSON text, reported."""
        if type(finish) is not str:
            self.note(
                "wrong_type",
                f"chunk {n}: choice {st.index}'s finish_reason {as_text(finish)[:60]} is a "
                f"{a_json_type(finish)}, not a string; kept as its JSON text",
                chunk_index=n,
                choice_index=st.index,
            )
            finish = as_text(finish)
        st.finish_reason = finish
        self.finished = True

    def _general(self, chunk: Any, n: int, *, usage_done: bool = False) -> None:
        if type(chunk) is not dict:
            chunk = _as_dict(chunk)
            if not isinstance(chunk, dict):
                self._malformed(n, f"chunk is {type(chunk).__name__}, expected an object")
                return
        if "choices" not in chunk and "error" not in chunk:
            if chunk.get("object") == "error" or chunk.get("type") == "error" or is_detail_error(chunk):
                # vLLM / FastChat's ErrorResponse, unwrapped ({"object": "error", "message", "type",
                # "code"}); FastAPI's {"detail": ...}
                self.fail(error_message(chunk) or "an error object without a message", chunk, n)
            if isinstance(chunk.get("type"), str):
                self._other_format(chunk, n)
                return
            if not chunk.keys() <= _METADATA:
                if not str(chunk.get("object", "")).startswith("chat.completion"):
                    what = f"{unknown_shape(chunk, 'payload')}, not a chat-completion chunk (no `choices`)"
                    self._stray(chunk, n, what)
                    return
                self._beside_no_choices(chunk, n)
        if self.response_id is None:
            self._first(chunk)
        if not usage_done:
            usage = chunk.get("usage")
            if usage is not None:
                self._usage(usage, n)
        choices = chunk.get("choices")
        error_finish = False
        if type(choices) is list:
            for choice in choices:
                error_finish |= self._choice(choice, n)
            if not choices and not chunk.keys() <= _EMPTY_CHOICES_KEYS:
                self._beside_no_choices(chunk, n)
        elif type(choices) is dict:
            self.note(
                "wrong_type",
                f"chunk {n}: choices is one object, not a list; read as a list of one choice",
                chunk_index=n,
            )
            error_finish |= self._choice(choices, n)
        elif choices is not None:
            self._stray(choices, n, f"choices is {a_json_type(choices)}, not a list")
        if "error" in chunk or error_finish:
            message = error_message(chunk)
            if message is None and error_finish:
                message = "finish_reason 'error' without an error message"
            if message is not None:
                self.fail(message, chunk, n)
            if chunk.get("error") is not None and chunk["error"] is not False:  # {}, "", []: no
                self._empty_error(chunk["error"], n)  # message, yet not "no error" (null, false)

    def _usage(self, usage: Any, n: int) -> None:
        """A chunk's ``usage``: kept when it is an object (an empty one says nothing); anything else
        is reported, not kept (a number, a string, a list)."""
        problem = usage_problem(usage, f"chunk {n}: ")
        if problem is not None:
            self.note("wrong_type", problem, chunk_index=n)
        elif usage:
            self.usage = usage if type(usage) is dict else dict(usage)

    def _beside_no_choices(self, chunk: dict[str, Any], n: int) -> None:
        """A chunk (``object: chat.completion.chunk``) without choices, or with ``choices: []``, that
        holds keys a chunk does not have (a top-level ``delta``, ``tool_calls``, ``message``): those
        keys are a part of an unknown shape (`_stray`: reported, and every call held back when they
        may hold call data), never passed over because the chunk names its object."""
        extra = {k: v for k, v in chunk.items() if k not in _EMPTY_CHOICES_KEYS}
        keys = sorted(str(k) for k in extra)[:10]
        what = f"a chat-completion chunk with no choices holds keys {keys} a chunk does not have"
        self._stray(extra, n, what)

    def _empty_error(self, error: Any, n: int) -> None:
        """An ``error`` that is present but empty (``{}``, ``""``): read as no error, and said, since
        a provider that meant one lost its message on the way."""
        self.note(
            "malformed_chunk",
            f"chunk {n}: `error` is {compact_json(error)[:40]} ({a_json_type(error)}): read as no error; if "
            "the provider meant one, its message is lost",
            chunk_index=n,
        )

    own_format = "openai-chat"

    def _other_format(self, chunk: dict[str, Any], n: int) -> None:
        """A typed event fed to the chat accumulator: of another wire format (Anthropic, Responses),
        `_foreign_event` (the next response, or skipped and the calls held back when it may hold
        call data); of no known format, a stray part (`_stray`)."""
        fmt = wire_format_of(chunk)
        if fmt is None:
            self._stray(
                chunk, n, f"an event of type {str(chunk['type'])[:40]!r}, not a chat-completion chunk"
            )
            return
        self._odd_state().foreign += 1
        self._foreign_event(chunk, n, fmt, self.finished)

    def _hold_all(self, reason: str) -> None:
        odd = self._odd_state()
        if odd.stray is None:
            odd.stray = reason

    def _first(self, chunk: dict[str, Any]) -> None:
        """The response's id and model, from the first chunk that has an id (Azure's first chunk,
        its prompt filter results, has ``"id": ""``: the stream's id comes after it)."""
        rid = chunk.get("id")
        if rid and type(rid) is str:
            self.response_id = rid
        elif self.model is not None:
            return
        model = chunk.get("model")
        if model and type(model) is str:
            self.model = model

    def _choice(self, choice: Any, n: int) -> bool:
        """One choice of a chunk; True when it finished with ``finish_reason: "error"``."""
        if type(choice) is not dict:
            self._stray(choice, n, f"a choice is {a_json_type(choice)}, not an object")
            return False
        ci = choice.get("index")
        if ci is None:
            said = "without `index`" if "index" not in choice else "with index null"
            self.note(
                "wrong_type", f"chunk {n}: a choice {said}; read as choice 0", chunk_index=n, choice_index=0
            )
            ci = 0
        elif type(ci) is not int:
            number = as_index(ci)
            if number is None:
                self._stray(
                    choice, n, f"choice index {as_text(ci)[:40]} is {a_json_type(ci)}, not an integer"
                )
                return False
            self.note(
                "wrong_type",
                f"chunk {n}: choice index {ci!r} is {a_json_type(ci)}; read as {number}",
                chunk_index=n,
                choice_index=number,
            )
            ci = number
        if ci < 0:  # (no choice has one: reading it as a choice would put it before choice 0)
            self._stray(choice, n, f"choice index {ci} is negative")
            return False
        st = self._choices.get(ci)
        if st is None:
            if len(self._choices) >= MAX_CHOICES and _holds_nothing(choice):
                self._count_extra(ci, choice, n)
                return False
            st = self._choices[ci] = _Choice(ci)
        st.seen = True
        delta = choice.get("delta")
        if delta is None:
            delta = choice.get("message")  # some servers stream whole messages
            if delta is None and not choice.keys() <= _CHOICE_KEYS:
                keys = sorted(str(k) for k in choice)[:10]
                self._stray(choice, n, f"choice {ci} has no `delta` (keys {keys})")
        else:
            if not choice.keys() <= _CHOICE_KEYS:
                self._odd_keys(choice, _CHOICE_KEYS, n, f"choice {ci}, beside its delta,")
            message = choice.get("message")
            if message and not (
                type(message) is dict and not any(v for k, v in message.items() if k != "role")
            ):
                self._stray(
                    message, n, f"choice {ci} has both `delta` and `message`; its message is not read"
                )
        if delta:
            if type(delta) is not dict:
                self._stray(delta, n, f"choice {ci}'s delta is {a_json_type(delta)}, not an object")
            else:
                calls = delta.get("tool_calls")
                if calls:
                    self._tool_deltas(st, calls, n)
                self._text(st, delta, n)
        finish = choice.get("finish_reason")
        if finish:
            self._finish(st, finish, n)
        return st.finish_reason == "error" or bool(choice.get("error"))

    def _count_extra(self, ci: int, choice: dict[str, Any], n: int) -> None:
        """An entry for a choice beyond `MAX_CHOICES` that holds nothing: counted, not kept."""
        odd = self._odd_state()
        if not odd.extra:
            odd.extra_at, odd.extra_low, odd.extra_high = n, ci, ci
        odd.extra += 1
        odd.extra_low = min(odd.extra_low, ci)
        odd.extra_high = max(odd.extra_high, ci)
        if choice.get("finish_reason"):
            odd.extra_finished += 1

    def _odd_state(self) -> _Odd:
        odd = self._odd
        if odd is None:
            odd = self._odd = _Odd()
        return odd

    def _stray(self, value: Any, n: int, what: str) -> None:
        """A payload or part of one that is not of the shape a chat chunk has (`what` says how):
        reported with what it held (``malformed_chunk``); when it may hold a call's data, every call
        of the response is held back at the end (which call it belongs to is unknown)."""
        calls = may_hold_calls(value)
        held = "; it may hold tool call data, so every call of this response is held back" if calls else ""
        self.note(
            "malformed_chunk",
            f"chunk {n}: {what}; skipped ({as_text(value)[:80]}){held}",
            chunk_index=n,
        )
        odd = self._odd_state() if calls else None
        if odd is not None and odd.stray is None:
            odd.stray = (
                f"chunk {n} held tool call data in a shape this parser does not read ({what}), and which "
                "call it belongs to, or whether it is a call of its own, is unknown"
            )

    def _text(self, st: _Choice, delta: dict[str, Any], n: int) -> None:
        st.seen = True
        text = delta.get("content")
        if text and type(text) is str:
            if st.finish_reason is not None:
                self._late_text(st, n)
            if st.content is None:
                st.content = [text]
            else:
                st.content.append(text)
            if len(delta) == 1:  # the usual text delta: nothing else to read
                return
        elif text is not None and type(text) is not str:
            self._odd_text(st, text, n)
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        if thought and type(thought) is str:
            if st.finish_reason is not None:
                self._late_text(st, n)
            if st.reasoning is None:
                st.reasoning = [thought]
            else:
                st.reasoning.append(thought)
        elif thought and type(thought) is not str:
            if st.reasoning is None:
                st.reasoning = []
            st.reasoning.append(thought)  # kept: the text join shows it as JSON, reported
        legacy = delta.get("function_call")
        if legacy:
            self._legacy(st, legacy, n)
        refusal = delta.get("refusal")
        if refusal:
            if st.refusal is None:
                st.refusal = []
            st.refusal.append(refusal)
        if not delta.keys() <= _DELTA_KEYS:
            self._odd_keys(delta, _DELTA_KEYS, n, f"choice {st.index}'s delta")

    def _odd_keys(self, part: dict[str, Any], known: frozenset[str], n: int, what: str) -> None:
        """Keys of a delta or choice this reader does not read: when they may hold call data (a
        ``tool_call``, a ``tool_calls`` beside the delta), a part of an unknown shape (`_stray`:
        reported, every call held back); other keys (metadata) pass."""
        extra = {k: v for k, v in part.items() if k not in known}
        if may_hold_calls(extra):
            keys = sorted(str(k) for k in extra)[:10]
            self._stray(extra, n, f"{what} holds keys {keys} this reader does not read")

    def _odd_text(self, st: _Choice, text: Any, n: int) -> None:
        """``content`` that is not a string: a list of typed parts (Mistral) read as text and
        reasoning; anything else kept as is for the text join to show as JSON and report."""
        if st.finish_reason is not None:
            self._late_text(st, n)
        if type(text) is list:
            text, thought = content_parts(text)
            st.parts += 1
            if thought:
                if st.reasoning is None:
                    st.reasoning = []
                st.reasoning += thought
        else:
            text = [text]
        if text:
            if st.content is None:
                st.content = []
            st.content += text

    def _late_text(self, st: _Choice, n: int) -> None:
        if not st.late_text:
            st.late_text = True
            self.note(
                "late_delta",
                f"chunk {n}: text after choice {st.index}'s finish_reason {st.finish_reason!r}; appended "
                "to its text",
                chunk_index=n,
                choice_index=st.index,
            )

    def _malformed(self, n: int, message: str) -> None:
        self.note("malformed_chunk", f"chunk {n}: {message}; skipped", chunk_index=n)

    # -- tool-call deltas ------------------------------------------------------------------------
    def _tool_deltas(self, st: _Choice, deltas: Any, n: int) -> None:
        st.tail = None  # (the fast path's shortcut holds only while it alone has handled calls)
        if type(deltas) is not list:
            if type(deltas) is not dict:
                self._stray(deltas, n, f"tool_calls is {a_json_type(deltas)}, not a list")
                return
            self.note(
                "wrong_type",
                f"chunk {n}: tool_calls is one object, not a list; read as a list of one entry",
                chunk_index=n,
                choice_index=st.index,
            )
            deltas = [deltas]
        seen: set[int] | None = None if len(deltas) == 1 else set()
        for tc in deltas:
            if type(tc) is not dict:
                self._stray(tc, n, f"a tool_calls entry is {a_json_type(tc)}, not an object")
                continue
            ctype = tc.get("type")
            if ctype == "":  # (Azure sends "type": "" on deltas: no type, as null)
                ctype = None
            fn = tc.get("function")
            kind = "function"
            flat = False
            if (ctype == "custom" and ("custom" in tc or fn is None)) or (
                ctype is None and fn is None and "custom" in tc
            ):
                kind, fn = "custom", tc.get("custom")  # {"name", "input"}: free-form text
                if type(fn) is dict and "input" in fn:
                    fn = {"name": fn.get("name"), "arguments": fn["input"]}
            elif fn is None or (ctype is not None and ctype != "function"):  # (also: typed custom, payload
                shape = entry_shape(tc)  # under `function`: `entry_shape` says so)
                if type(shape) is tuple:
                    self._unknown_type(st, tc, shape, n, seen)
                    continue
                if shape is not None:  # name/arguments at the top level: read as the function's
                    fn, flat = shape, True
            lost = None
            if fn is None:
                fn = {}
            elif type(fn) is not dict:
                lost = f"chunk {n}: its `{kind}` is {a_json_type(fn)}, not an object ({as_text(fn)[:60]})"
                self.note("malformed_chunk", f"{lost}; the call it names is held back", chunk_index=n)
                fn = {}
            tid = tc.get("id")
            if tid is not None and type(tid) is not str:
                tid = self._header_text(tid, "id", n)
            name = fn.get("name")
            if name is not None and type(name) is not str:
                name = self._header_text(name, "function name", n)
            args = fn.get("arguments")
            call = self._target(st, tc.get("index"), tid, name, args, n, seen)
            if call is None:
                continue
            if lost is not None:
                call.hold(f"{lost}: its name and arguments could not be read")
            if kind == "custom" and call.kind != "custom":
                call.kind = "custom"
                call.quirky = True
            if flat and not call.flat:
                call.flat = call.quirky = True
            if st.finish_reason is not None and not call.late and (args or name or tid):
                call.late = True
                said = tid or call.tool_call_id
                what = (  # (a call this delta starts, or one it adds to)
                    f"a new tool call{f' {said}' if said else ''} (call {call.index}) after choice "
                    f"{st.index}'s finish_reason {st.finish_reason!r}; kept as a call"
                    if call.first_chunk == n
                    else f"tool call delta for call {call.index} after choice {st.index}'s finish_reason "
                    f"{st.finish_reason!r}; appended to that call"
                )
                self.note(
                    "late_delta",
                    f"chunk {n}: {what}",
                    chunk_index=n,
                    choice_index=st.index,
                    call_index=call.index,
                    tool_call_id=said,
                )
            if tid is not None or name is not None:
                self._header(call, tid, name, n)
            if args is not None and (args or type(args) is not str):  # ({} or 0 or false: still JSON)
                self._arguments(st, call, args, n)  # (kept, then announced and told)
            # announced once it holds something: a delta with nothing but an index may end up making
            # no call (never announced, as it never ends; one that does is announced at `finish`)
            if self._listener is not None and not call.started and (call.tool_call_id or call.name):
                self._announce(call, n)

    def _unknown_type(
        self, st: _Choice, tc: dict[str, Any], shape: tuple[str, Any], n: int, seen: set[int] | None
    ) -> None:
        """A tool call entry whose payload is not where this parser reads one (`entry_shape`): what it
        holds is kept raw, the call marked incomplete (`unknown_call_type`), never run."""
        label, raw = shape
        tid = tc.get("id")
        tid = tid if type(tid) is str else None
        call = self._target(st, tc.get("index"), tid, None, None, n, seen)
        if call is None:
            return
        if tid:
            self._header(call, tid, None, n)
        if call.unknown_type is None:
            call.unknown_type = label
            call.quirky = True
        self._arguments(st, call, raw if type(raw) is str else compact_json(raw), n)

    def _announce(self, call: PendingCall, n: int) -> None:
        """`CallStarted`, once per call, with the id and name known now."""
        self._listener(_started(call, n))  # type: ignore[misc]

    def _header_text(self, value: Any, what: str, n: int) -> str | None:
        """An id or name as the wire gives it: a string; a number read as its text; anything else
        read as absent (a fallback id, or no name: never run); the last two reported (``wrong_type``),
        the value quoted."""
        if value is None or type(value) is str:
            return value
        if type(value) is int:
            self.note(
                "wrong_type",
                f"chunk {n}: tool call {what} {value!r} is a number, not a string; read as {str(value)!r}",
                chunk_index=n,
            )
            return str(value)
        self.note(
            "wrong_type",
            f"chunk {n}: tool call {what} {as_text(value)[:40]} is {a_json_type(value)}, not a string; read "
            "as absent",
            chunk_index=n,
        )
        return None

    def _arguments(self, st: _Choice, call: PendingCall, args: Any, n: int) -> None:
        """Keep `args` (serialised when not a string) as the call's next piece, then tell the listener
        (announcing the call first if it was not)."""
        if type(args) is not str:
            args = call.not_string(args, n)
        if args:
            call.pieces.append(args)
            if self._listener is not None:
                if not call.started:
                    self._announce(call, n)
                self._listener(
                    ArgumentsDelta(chunk_index=n, choice_index=st.index, call_index=call.index, delta=args)
                )

    def _target(
        self,
        st: _Choice,
        idx: Any,
        tid: str | None,
        name: str | None,
        args: Any,
        n: int,
        seen: set[int] | None,
    ) -> PendingCall | None:
        """The call a delta belongs to (see the module docstring for the rules); None when the
        delta was only a header whose meaning waits for the next delta (a parked name)."""
        if type(idx) is not int and idx is not None:
            number = as_index(idx)
            if number is None:
                self.note(
                    "wrong_type",
                    f"chunk {n}: tool call index {as_text(idx)[:40]} ({a_json_type(idx)}) is not an integer; "
                    "read as a delta without index",
                    chunk_index=n,
                    choice_index=st.index,
                )
            else:
                self.note(
                    "wrong_type",
                    f"chunk {n}: tool call index {idx!r} is {a_json_type(idx)}; read as {number}",
                    chunk_index=n,
                    choice_index=st.index,
                    call_index=number,
                )
                idx = number
        if type(idx) is not int:
            last = st.last
            if last is not None and last.next_name is not None:
                if _nothing_new(last.next_name, tid, name, args):  # still undecided: stays parked
                    if args:
                        self._keep(last, args, n)
                    return None
                parked_name, last.next_name = last.next_name, None
                if tid or _real_args(args) or (name and name != parked_name):
                    return self._unindexed(st, n, parked_name, idx is None)
            if last is not None and not _is_new_call(last, tid, name, args):
                if _parks(last, tid, name, args):
                    last.next_name = name
                    if args:  # whitespace: kept, as everything the model sent
                        self._keep(last, args, n)
                    return None
                if idx is None and len(st.order) > 1 and not last.guessed:  # (with one call there is
                    last.guessed = True  # nothing to guess; said once per call)
                    self.note(
                        "missing_index",
                        f"chunk {n}: tool call delta without index; read as part of call {last.index} "
                        f"({last.tool_call_id or 'no id yet'}), the last of {len(st.order)} calls to start",
                        chunk_index=n,
                        choice_index=st.index,
                        call_index=last.index,
                    )
                return last
            return self._unindexed(st, n, None, idx is None)
        held = st.calls.get(idx)
        if held is None and st.parked is not None and idx in st.parked:
            parked = st.parked[idx]
            if _nothing_new(parked.next_name, tid, name, args):  # still undecided: stays parked
                if args:
                    self._keep(parked, args, n)
                return None
            held = st.calls[idx] = st.parked.pop(idx)
            waiting, held.next_name = held.next_name, None
            if tid or _real_args(args) or (name and name != waiting):
                return self._reuse(st, idx, n, tid, name, waiting)
        if seen is not None:
            if held is not None and idx in seen:
                return self._same_index_twice(st, held, idx, tid, n)
            seen.add(idx)
        if held is None:
            return self._start(st, idx, n)
        if _is_new_call(held, tid, name, args):
            return self._reuse(st, idx, n, tid, name, None)
        if _parks(held, tid, name, args):  # the fast path must not append to it meanwhile
            held.next_name = name
            if args:  # whitespace: kept, as everything the model sent
                self._keep(held, args, n)
            del st.calls[idx]
            if st.parked is None:
                st.parked = {}
            st.parked[idx] = held
            return None
        return held

    def _keep(self, call: PendingCall, args: str, n: int) -> None:
        call.pieces.append(args)
        if self._listener is not None:
            if not call.started:
                self._announce(call, n)
            self._listener(
                ArgumentsDelta(
                    chunk_index=n, choice_index=call.choice_index, call_index=call.index, delta=args
                )
            )

    def _unindexed(self, st: _Choice, n: int, name: str | None, report: bool = True) -> PendingCall:
        """A new call for a delta without index; `name`: the name a parked delta already sent."""
        call = self._start(st, None, n)
        call.name = name
        if report:
            self.note(
                "missing_index",
                f"tool call delta without index; treated as call {call.index} "
                "(a new id, or a new name after complete arguments, starts a new call)",
                chunk_index=n,
                choice_index=st.index,
                call_index=call.index,
            )
        return call

    def _reuse(
        self, st: _Choice, idx: int, n: int, tid: str | None, name: str | None, waiting: str | None
    ) -> PendingCall:
        """A new call at an index already used; `waiting`: the name a parked delta already sent."""
        call = self._start(st, idx, n)
        call.name = waiting
        name = name or waiting
        self.note(
            "index_reused",
            f"index {idx} reused by a new call (id {tid!r}, name {name!r}); kept as call {call.index}",
            chunk_index=n,
            choice_index=st.index,
            call_index=call.index,
        )
        return call

    def _start(self, st: _Choice, idx: int | None, n: int) -> PendingCall:
        """A new call, at wire index `idx` (None: no index) or the next free index when it is taken."""
        st.slow = True  # (only calls started here can lack an id and a name: see _headers_apart)
        st.tail = None
        top = st.max_index
        if idx is not None and idx > top:
            index = idx
            if idx > top + 1 and not st.sparse:  # reported at the end, when the gaps are known
                st.sparse, st.sparse_at = True, n
        elif idx is not None and idx >= 0 and all(c.index != idx for c in st.order):
            index = idx
        else:
            index = top + 1
            if idx is not None and idx < 0:
                self.note(
                    "malformed_chunk",
                    f"chunk {n}: tool call index {idx} is negative; numbered as call {index}",
                    chunk_index=n,
                    choice_index=st.index,
                    call_index=index,
                )
        call = PendingCall(st.index, index, n)
        if idx is not None:
            st.calls[idx] = call
        st.order.append(call)
        if index > top:
            st.max_index = index
        st.last = call
        return call

    def _same_index_twice(
        self, st: _Choice, call: PendingCall, idx: int, tid: str | None, n: int
    ) -> PendingCall:
        different = bool(tid) and bool(call.tool_call_id) and tid != call.tool_call_id
        target = self._start(st, idx, n) if different else call
        what = f"a different id; kept as call {target.index}" if different else "continued"
        self.note(
            "duplicate_index_in_chunk",
            f"two tool call entries with index {idx} in one chunk ({what})",
            chunk_index=n,
            choice_index=st.index,
            call_index=idx,
        )
        return target

    def _header(self, call: PendingCall, tid: str | None, name: str | None, n: int) -> None:
        if tid:
            if call.tool_call_id is None:
                call.tool_call_id = tid
            elif tid == call.tool_call_id:
                call.repeated_header = call.quirky = True
            else:
                call.other_ids += 1
                call.quirky = True
                if call.first_other_id is None:
                    call.first_other_id = tid
        elif tid == "":
            call.saw_empty_id = True
        if name:
            if call.name is None and call.pieces:
                self.note(
                    "late_name",
                    f"call {call.index} ({call.tool_call_id or 'no id yet'}): name {name!r} arrived after "
                    "its arguments; read as this call's name",
                    chunk_index=n,
                    choice_index=call.choice_index,
                    call_index=call.index,
                )
            call.add_name(name)

    def _legacy(self, st: _Choice, fc: Any, n: int) -> None:
        """The deprecated ``function_call`` delta: one call per choice, without id."""
        if type(fc) is not dict:
            self._stray(fc, n, f"function_call is {a_json_type(fc)}, not an object")
            return
        call = st.legacy
        if call is None:
            call = st.legacy = self._start(st, None, n)
            self.note(
                "legacy_function_call",
                f"choice {st.index}: deprecated function_call read as call {call.index} (no id)",
                chunk_index=n,
                choice_index=st.index,
                call_index=call.index,
            )
        name = self._header_text(fc.get("name"), "function name", n)
        if name:
            call.add_name(name)
        args = fc.get("arguments")
        if args is not None:
            self._arguments(st, call, args, n)  # (kept, then announced and told)
        if not call.started and self._listener is not None:
            self._announce(call, n)

    # -- results ---------------------------------------------------------------------------------
    def pending_calls(self) -> list[PendingCall]:
        return [call for st in self._choices.values() for call in st.order]

    def text_pieces(self) -> list[list[Any]]:
        return [
            text for st in self._choices.values() for text in (st.content, st.reasoning) if text is not None
        ]

    def snapshot(self) -> dict[int, dict[int, dict[str, Any]]]:
        """The calls assembled so far per choice and index (for stepping through a stream)."""
        return {
            ci: {
                c.index: {"id": c.tool_call_id, "name": c.name, "arguments": "".join(c.pieces)}
                for c in sorted(st.order, key=_by_index)
            }
            for ci, st in sorted(self._choices.items())
            if ci or not st.pristine()
        }

    def finish(self) -> ParsedResponse:
        """End of stream: finalise every call and return the response (`StreamAccumulator.finish`,
        with `_result`'s choice of path inlined: this runs once per response)."""
        states = self._choices
        response = None
        if self.damaged is None and self._odd is None and self._listener is None and len(states) == 1:
            st = states[0]
            if st.finish_reason in NORMAL and not (st.slow or st.parts or st.refusal is not None):
                response = self._plain(st)
        if response is None:
            response = self._full_result(self.damaged)
        self._final = response  # closed
        self.__class__ = _CLOSED.get(type(self)) or _closed_class(type(self))
        if self._listener is not None:  # (what it raised while the response was built comes out once
            self._raise_held()  # the response is final: `finish()` again returns it)
        return response

    def _result(self, error: str | None) -> ParsedResponse:
        states = self._choices
        if error is None and self._odd is None and self._listener is None and len(states) == 1:
            st = states[0]
            if st.finish_reason in NORMAL and not (st.slow or st.parts or st.refusal is not None):
                return self._plain(st)
        return self._full_result(error)

    def _plain(self, st: _Choice) -> ParsedResponse:
        """`_full_result` for the usual response, without its checks: one choice, ended normally,
        none of the rare things that path reports (no error, nothing of another shape, no call
        started off the fast path, no typed parts nor refusal, no listener). Once per response, so
        every statement here is part of the fixed cost of parsing one; a test checks both paths
        give the same response."""
        findings = self.findings
        order = st.order
        batch = self.batch
        # every call was started by the fast path (a call started anywhere else sets `st.slow`),
        # which takes only the next index and only a call with a provider id (never unset after):
        # `order` is already in index order, and no fallback id is made (so no ids to avoid)
        calls: tuple[ToolCall, ...]
        if not order:
            calls = ()
            promised_calls("finish_reason", st.finish_reason, findings, "choice 0: ", 0)
        elif len(order) == 1:
            calls = (order[0].finalize(batch, findings),)
        else:
            calls = tuple([p.finalize(batch, findings) for p in order])
            repeated_provider_ids(calls, findings)
        text = st.content
        thought = st.reasoning
        choice: Any = _new(_ChoiceTwin)  # new_choice(...) and new_response(...), inlined
        choice.index = 0
        choice.content = None if text is None else join_text(text, findings, "choice 0 content")
        choice.reasoning = None if thought is None else join_text(thought, findings, "choice 0 reasoning")
        choice.tool_calls = calls
        choice.finish_reason = st.finish_reason
        choice.server_tool_calls = ()
        choice.__class__ = ParsedChoice
        return self._response((choice,), findings, None)

    def _full_result(self, error: str | None) -> ParsedResponse:
        findings = self.findings  # (not copied: the response is built once, then the accumulator is closed)
        if self._odd is not None:
            self._odd_notes(findings)
        choices = []
        batch = self.batch
        states = self._choices
        # the provider's ids across every choice, for fallback ids to avoid (None when all calls have
        # one, the usual case: `provider_ids`, inlined for one choice)
        taken = None
        if len(states) == 1:
            for pending in states[0].order:
                if pending.tool_call_id is None:
                    taken = provider_ids(states[0].order)
                    break
        else:
            taken = provider_ids(self.pending_calls())
        for ci in states if len(states) == 1 else sorted(states):
            st = states[ci]
            if ci == 0 and not (st.seen or st.order or st.finish_reason):
                continue  # no chunk had choice 0
            finish = st.finish_reason
            failed = cut = None
            loose = False
            if error is not None or finish not in NORMAL:  # (the rule is `_endings`; normal ends are common)
                failed, cut, loose = _ending(ci, finish, error, findings)
            order = st.order
            if st.legacy is not None and len(order) > 1:
                order = self._legacy_once(st, findings)
            if st.slow and len(order) > 1 and any(c.name is None and c.tool_call_id is None for c in order):
                order = _headers_apart(order, st.legacy, findings)
            if st.sparse:
                _gaps(st, order, findings)
            if len(order) == 1:
                calls: tuple[ToolCall, ...] = (
                    order[0].finalize(batch, findings, None, failed, cut, taken, loose),
                )
            else:
                calls = tuple(
                    p.finalize(batch, findings, None, failed, cut, taken, loose)
                    for p in sorted(order, key=_by_index)
                )
            if len(calls) > 1:
                repeated_provider_ids(calls, findings)
            elif not calls and error is None:
                promised_calls("finish_reason", finish, findings, f"choice {ci}: ", ci)
            if (failed or cut) and error is None and finish is not None:
                unfinished = sum(not c.complete for c in calls)
                findings.append(how_it_ended("finish_reason", finish, unfinished, f"choice {ci}: ", ci))
            if self._listener is not None:
                pendings = order if len(order) == 1 else sorted(order, key=_by_index)
                for pending, call in zip(pendings, calls, strict=True):
                    if not pending.started:  # (a call the listener never heard start: set after its
                        self._announce(pending, pending.first_chunk)  # last delta, or nothing but
                    self._listener(CallFinished(call=call))  # an index came for it)
            if st.parts or st.refusal is not None:
                self._text_notes(st, findings)
            content = None if st.content is None else join_text(st.content, findings, f"choice {ci} content")
            reasoning = (
                None if st.reasoning is None else join_text(st.reasoning, findings, f"choice {ci} reasoning")
            )
            # new_choice(...) and new_response(...), inlined: this runs once per response
            choice: Any = _new(_ChoiceTwin)
            choice.index = ci
            choice.content = content
            choice.reasoning = reasoning
            choice.tool_calls = calls
            choice.finish_reason = finish
            choice.server_tool_calls = ()
            choice.__class__ = ParsedChoice
            choices.append(choice)
        if len(choices) > 1:
            findings.append(extra_choices_note(choices))
        return self._response(tuple(choices), findings, error)

    def _response(
        self, choices: tuple[Any, ...], findings: list[Finding], error: str | None
    ) -> ParsedResponse:
        """The `ParsedResponse` made without its checks (its parts are built here, already valid)."""
        response: Any = _new(_ResponseTwin)
        response.format = "openai-chat-stream"
        response.choices = choices
        limit = self._limit  # (`capped`, which only counts when a kind may be over its cap)
        response.findings = (
            tuple(findings)
            if limit is None and len(findings) <= FINDINGS_PER_KIND
            else tuple(capped(findings, limit))
        )
        response.usage = self.usage
        response.response_id = self.response_id
        response.model = self.model
        response.error = error
        response.__class__ = ParsedResponse
        return response  # type: ignore[no-any-return]

    def _odd_notes(self, findings: list[Finding]) -> None:
        """What the stream held that is not a chat chunk: other formats' events counted, and every call
        held back when data of an unknown shape may have been one's."""
        odd = self._odd
        assert odd is not None
        if odd.stray is not None:
            for call in self.pending_calls():
                call.hold(odd.stray)
        if odd.extra:
            finished = f" ({odd.extra_finished} with a finish_reason)" if odd.extra_finished else ""
            findings.append(
                finding(
                    "extra_choices",
                    f"chunk {odd.extra_at} on: {odd.extra} entr(y/ies) for choices beyond the first "
                    f"{MAX_CHOICES} (indices {odd.extra_low}-{odd.extra_high}) held no call, text nor "
                    f"error{finished}; counted, not kept as choices",
                    chunk_index=odd.extra_at,
                )
            )

    @staticmethod
    def _text_notes(st: _Choice, findings: list[Finding]) -> None:
        """What a choice's text came with: typed parts (``content_parts``), a refusal (``refusal``)."""
        if st.parts:
            findings.append(
                finding(
                    "content_parts",
                    f"choice {st.index}: content came as a list of parts in {st.parts} chunk(s); their text "
                    "joined",
                    choice_index=st.index,
                )
            )
        if st.refusal is not None and (note := refusal_note(st.refusal, f"choice {st.index}: ")) is not None:
            findings.append(note)

    def _legacy_once(self, st: _Choice, findings: list[Finding]) -> list[PendingCall]:
        """The choice's calls without its `function_call` when a `tool_calls` entry says the same."""
        legacy = st.legacy
        assert legacy is not None
        said = (legacy.name, "".join(legacy.pieces))
        twin = next(
            (
                c
                for c in st.order
                if c is not legacy and (c.name, "".join(c.pieces)) == said and c.tool_call_id
            ),
            None,
        )
        if twin is None:
            findings.append(legacy_differs_note(st.index, legacy, [c for c in st.order if c is not legacy]))
            return st.order
        findings.append(
            finding(
                "duplicate_legacy_call",
                f"choice {st.index}: function_call duplicates tool call {twin.tool_call_id} (same name and "
                "arguments); counted once",
                choice_index=st.index,
                call_index=legacy.index,
            )
        )
        if self._listener is not None:  # it was announced: it ends, never to be run
            self._listener(CallFinished(call=legacy.finalize(self.batch, [], failed="counted once")))
        return [c for c in st.order if c is not legacy]


def _started(call: PendingCall, n: int) -> CallStarted:
    """The call's `CallStarted` (marking it announced), with the id and name known now."""
    call.started = True
    return CallStarted(
        chunk_index=n,
        choice_index=call.choice_index,
        call_index=call.index,
        tool_call_id=call.tool_call_id,
        name=call.name,
    )


def _check_listener(listener: Any) -> None:
    if not callable(listener):
        raise UsageError(
            f"ChatCompletionAccumulator(listener={listener!r}): a listener is a function taking one event "
            "(CallStarted, ArgumentsDelta, CallFinished), or None"
        )


class _HeardChatCompletionAccumulator(ChatCompletionAccumulator):
    """A `ChatCompletionAccumulator` with a listener: every chunk takes the general path, which
    emits the listener's events (the fast path never checks for a listener)."""

    __slots__ = ()

    def feed(self, chunk: Mapping[str, Any] | Any) -> None:
        n = self.chunk_count
        self.chunk_count = n + 1
        try:
            self._general(chunk, n)
        except BaseException as exc:  # (a provider error: the listener's own exception goes with it)
            held, self._raised = self._raised, None
            if held is not None and held is not exc:
                exc.add_note(f"the stream listener raised {held!r} on this chunk meanwhile")
            raise
        self._raise_held()


def _ending(
    ci: int, finish: str | None, error: str | None, findings: list[Finding]
) -> tuple[str | None, str | None, bool]:
    """(failed, cut, loose) for the calls of choice `ci` that did not end normally (`_endings`): a
    provider error or a filter fails them; any other reason cuts them; no finish reason at all cuts
    them loosely (arguments that form a JSON object are whole: servers that never send a reason)."""
    if error is not None:
        return failure_clause(error), None, False
    kind = ending_of(finish)
    if kind == "normal":
        return None, None, False
    if kind == "none":
        findings.append(
            finding("no_finish_reason", f"choice {ci}: stream ended without a finish_reason", choice_index=ci)
        )
        return None, "the stream ended without a finish reason", True
    if kind == "filtered":
        return f"the provider stopped or withheld the output (finish_reason {finish!r})", None, False
    return None, cut_reason("finish_reason", str(finish)), False


def _gaps(st: _Choice, order: list[PendingCall], findings: list[Finding]) -> None:
    """The ``sparse_index`` finding of a choice whose wire indices skip numbers: which never came
    (indices that only arrived out of order are no gap). The gaps are ranges, found from the calls
    present: an index is a number in the input (1e12 costs no more than 2)."""
    gaps = index_gaps(c.index for c in order)
    if not gaps:
        return
    findings.append(
        finding(
            "sparse_index",
            f"choice {st.index}: tool call indices skip {describe_gaps(gaps)} (sparse indices kept)",
            chunk_index=st.sparse_at,
            choice_index=st.index,
            call_index=gaps[0][0],
        )
    )


def _by_index(call: PendingCall) -> int:
    return call.index


def _headers_apart(
    order: list[PendingCall], legacy: PendingCall | None, findings: list[Finding]
) -> list[PendingCall]:
    """Calls whose header and arguments came at different indexes (LibreChat's agents API numbers a
    header by its run step, counting text steps, and the argument fragments by the call; LiteLLM's
    Bedrock path sends a no-argument call's "" at another index). At the end of the choice: one
    call with a name and no arguments and one with arguments but no id nor name are one call
    (``split_call``); with more of either, the header-only calls are held back (which arguments
    are theirs is unknown) rather than run with ``{}``. A call with nothing at all (no id, name or
    argument text) beside other calls is no call: dropped, reported."""

    def plain(c: PendingCall) -> bool:
        return c is not legacy and c.unknown_type is None and c.kind == "function"

    bare = [c for c in order if c.name is None and c.tool_call_id is None and plain(c)]
    empty = [c for c in bare if not "".join(c.pieces).strip()]
    fragments = [c for c in bare if c not in empty]
    if not bare:
        return order
    low = min(c.index for c in bare)
    # a header above the fragments' index (the servers seen count other blocks in it): a call whose
    # header came below them is a call of its own (a tool without parameters), left as it is
    heads = [c for c in order if c.name and plain(c) and not "".join(c.pieces).strip() and c.index > low]
    gone: list[PendingCall] = []
    if len(heads) == 1 and len(fragments) <= 1:
        head = heads[0]
        source = fragments[0] if fragments else None
        if source is not None:
            head.pieces = [*head.pieces, *source.pieces]
            gone.append(source)
        gone += empty
        where = f"index {source.index}" if source is not None else f"index {empty[0].index} (empty)"
        findings.append(
            finding(
                "split_call",
                f"call {head.tool_call_id} ({head.name}): its header came at index {head.index} without "
                f"arguments and its arguments at {where} without id or name; read as one call",
                chunk_index=head.first_chunk,
                choice_index=head.choice_index,
                call_index=head.index,
                tool_call_id=head.tool_call_id,
            )
        )
    else:
        indexes = ", ".join(str(c.index) for c in fragments)
        for head in heads if fragments else ():
            head.hold(
                f"its header came at index {head.index} without arguments, and arguments without id or "
                f"name came at index(es) {indexes}: which are its arguments is unknown"
            )
        for call in empty:
            findings.append(
                finding(
                    "malformed_chunk",
                    f"a tool call delta at index {call.index} (chunk {call.first_chunk}) had no id, name "
                    "or arguments; it made no call",
                    chunk_index=call.first_chunk,
                    choice_index=call.choice_index,
                    call_index=call.index,
                )
            )
        gone = empty
    return [c for c in order if c not in gone]


def _is_new_call(call: PendingCall, tid: str | None, name: str | None, args: Any) -> bool:
    """Does a delta with this header start a new call where `call` is? (module docstring rules)

    A first name for a call that has none (sent after its arguments) names that call unless a
    different id comes with it: "another function" needs an existing name to differ from.
    """
    if tid:
        if call.tool_call_id is None:  # a late id for this call, unless it already looks finished
            if name and call.name is None:
                return False  # a late header (id and first name) for a call that had neither
            return (bool(name) or _real_args(args)) and call.looks_complete()
        if tid != call.tool_call_id:
            if name and call.name is not None and name != call.name:
                return True  # another function: a new call (Ollama), whatever came before
            return call.looks_complete()  # same name or none: a fragment (LM Studio), unless done
        # the same id naming another function once the arguments are complete: a new call (a server
        # reusing an id); a longer snapshot of the same name is still this call; a first name names it
        if not name or call.name is None:
            return False
        return not name.startswith(call.name) and call.looks_complete()
    if name:
        if call.name is None:  # a first name for this call: it names it (late_name)
            return False
        return (name != call.name or _real_args(args)) and call.looks_complete()
    return False


def _real_args(args: Any) -> bool:
    return args is not None and (type(args) is not str or (args != "" and not args.isspace()))


def _nothing_new(waiting: str | None, tid: str | None, name: str | None, args: Any) -> bool:
    """A delta after a parked name that decides nothing: no id, no real arguments (``""``, blanks,
    null) and no name or the same name again. The call stays parked until a delta that says more."""
    return not tid and not _real_args(args) and (not name or name == waiting)


def _parks(call: PendingCall, tid: str | None, name: str | None, args: Any) -> bool:
    """The call's name again, without id or arguments, after its arguments are complete: a repeat,
    or the first delta of a second call to the same function. The next delta decides."""
    return not tid and bool(name) and name == call.name and not _real_args(args) and call.looks_complete()

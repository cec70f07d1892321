"""OpenAI chat completions: the streaming accumulator for ``chat.completion.chunk`` deltas and the
parser for whole ``chat.completion`` bodies.

The accumulator is the one mutable object of the core. It keys calls by (choice, index), keeps ids
and names once (repeated or empty continuation headers are not concatenated), joins argument pieces
only at the end, and reports every oddity as a `Finding` with its chunk number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from toolcall_lab.formats.base import (
    ArgumentsDelta,
    CallFinished,
    CallStarted,
    PendingCall,
    StreamAccumulator,
    StreamListener,
    compact_json,
)
from toolcall_lab.messages import Finding, ParsedChoice, ParsedResponse, ToolCall


class _Choice:
    __slots__ = ("calls", "content", "finish_reason", "index", "last", "max_index", "reasoning")

    def __init__(self, index: int) -> None:
        self.index = index
        self.calls: dict[int, PendingCall] = {}
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.finish_reason: str | None = None
        self.last: PendingCall | None = None
        self.max_index = -1


def _as_dict(chunk: Any) -> Any:
    """SDK objects (``ChatCompletionChunk``) -> the dict they were built from, keeping absent keys absent."""
    to_dict = getattr(chunk, "to_dict", None)
    if to_dict is not None:
        return to_dict(mode="json")
    dump = getattr(chunk, "model_dump", None)
    if dump is not None:
        return dump(mode="json", exclude_unset=True)
    return chunk


class ChatCompletionAccumulator(StreamAccumulator):
    """Assemble tool calls, text and reasoning from OpenAI chat-completion chunks, one at a time.

    Args:
        batch: the number of this model call within its run (from 0); names fallback ids
            ``call_{batch}_{index}`` for calls that arrive without a provider id.
        listener: optional callback receiving `CallStarted` / `ArgumentsDelta` / `CallFinished`
            events, for animating how deltas become calls. None (the default) costs nothing.
    """

    def __init__(self, *, batch: int = 0, listener: StreamListener | None = None) -> None:
        super().__init__(batch=batch, listener=listener)
        self._choices: dict[int, _Choice] = {}

    # -- feeding ---------------------------------------------------------------------------------
    def feed(self, chunk: Mapping[str, Any] | Any) -> None:
        """Take one chunk (a decoded SSE payload dict or an SDK ``ChatCompletionChunk``)."""
        n = self.chunk_count
        self.chunk_count = n + 1
        if type(chunk) is not dict:
            chunk = _as_dict(chunk)
            if not isinstance(chunk, dict):
                self._malformed(n, f"chunk is {type(chunk).__name__}, expected an object")
                return
        choices = chunk.get("choices")
        if self.response_id is None:
            self.response_id = chunk.get("id")
            self.model = chunk.get("model")
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if type(choices) is not list or not choices:
            if choices:
                self._malformed(n, "choices is not a list")
            return  # empty: Azure prelude, usage-only chunk, keep-alive
        known = self._choices
        for choice in choices:
            if type(choice) is not dict:
                self._malformed(n, "a choice is not an object")
                continue
            ci = choice.get("index") or 0
            st = known.get(ci)
            if st is None:
                if type(ci) is not int:
                    self._malformed(n, f"choice index {ci!r} is not an integer")
                    continue
                st = self._choices[ci] = _Choice(ci)
            delta = choice.get("delta")
            if delta:
                if type(delta) is not dict:
                    self._malformed(n, "delta is not an object")
                    continue
                calls = delta.get("tool_calls")
                if calls:
                    # inlined fast path (it is the hot loop): the common continuation delta
                    # [{"index": i, "function": {"arguments": s}}] of a call already started
                    tc = calls[0] if type(calls) is list and len(calls) == 1 else None
                    fn = tc.get("function") if type(tc) is dict and len(tc) == 2 else None
                    args = fn.get("arguments") if type(fn) is dict and len(fn) == 1 else None
                    call = st.calls.get(tc.get("index")) if type(args) is str else None  # type: ignore[union-attr]
                    if call is not None:
                        if args:
                            call.pieces.append(args)
                            if self.listener is not None:
                                self.listener(
                                    ArgumentsDelta(
                                        chunk_index=n, choice_index=ci, call_index=call.index, delta=args
                                    )
                                )
                    else:
                        self._tool_deltas(st, calls, n)
                    if len(delta) > 1:
                        self._text(st, delta)
                else:
                    self._text(st, delta)
            finish = choice.get("finish_reason")
            if finish:
                st.finish_reason = finish

    @staticmethod
    def _text(st: _Choice, delta: dict[str, Any]) -> None:
        text = delta.get("content")
        if text and type(text) is str:
            st.content.append(text)
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        if thought and type(thought) is str:
            st.reasoning.append(thought)

    def _malformed(self, n: int, message: str) -> None:
        self.findings.append(
            Finding(kind="malformed_chunk", message=f"chunk {n}: {message}; skipped", chunk_index=n)
        )

    def _tool_deltas(self, st: _Choice, deltas: Any, n: int) -> None:
        if type(deltas) is not list:
            self._malformed(n, "tool_calls is not a list")
            return
        seen: set[int] | None = None if len(deltas) == 1 else set()
        for tc in deltas:
            if type(tc) is not dict:
                self._malformed(n, "a tool_calls entry is not an object")
                continue
            fn = tc.get("function") or {}
            if type(fn) is not dict:
                self._malformed(n, "function is not an object")
                fn = {}
            tid = tc.get("id")
            name = fn.get("name")
            idx = tc.get("index")
            call: PendingCall | None
            if type(idx) is not int:
                call = self._unindexed(st, tid, name, n)
            else:
                call = st.calls.get(idx)
                if seen is not None:
                    if idx in seen:
                        call = self._same_index_twice(st, call, idx, tid, n)
                    seen.add(idx)
                if call is None:
                    call = self._start(st, idx, n)
            if tid is not None or name is not None:
                self._header(call, tid, name, n)
            args = fn.get("arguments")
            if args:
                if type(args) is not str:
                    self._malformed(n, f"arguments of call {call.index} are not a string")
                    continue
                call.pieces.append(args)
                if self.listener is not None:
                    self.listener(
                        ArgumentsDelta(
                            chunk_index=n, choice_index=st.index, call_index=call.index, delta=args
                        )
                    )

    def _start(self, st: _Choice, idx: int, n: int) -> PendingCall:
        if idx > st.max_index + 1 or idx < 0:
            expected = st.max_index + 1
            self.findings.append(
                Finding(
                    kind="sparse_index",
                    severity="info",
                    chunk_index=n,
                    choice_index=st.index,
                    call_index=idx,
                    message=f"tool call index {idx} where {expected} was next (sparse indices kept)",
                )
            )
        call = st.calls[idx] = PendingCall(st.index, idx, n)
        if idx > st.max_index:
            st.max_index = idx
        st.last = call
        if self.listener is not None:
            self.listener(
                CallStarted(
                    chunk_index=n, choice_index=st.index, call_index=idx, tool_call_id=None, name=None
                )
            )
        return call

    def _unindexed(self, st: _Choice, tid: Any, name: Any, n: int) -> PendingCall:
        """A delta without ``index``: a new id, or a name after arguments began, starts a new call."""
        last = st.last
        new = (
            last is None
            or (bool(tid) and tid != last.tool_call_id)
            or (bool(name) and not tid and bool(last.pieces))
        )
        if not new and last is not None:
            return last
        call = self._start(st, st.max_index + 1, n)
        self.findings.append(
            Finding(
                kind="missing_index",
                severity="info",
                chunk_index=n,
                choice_index=st.index,
                call_index=call.index,
                message=f"tool call delta without index; treated as call {call.index} "
                "(a new id or name starts a new call)",
            )
        )
        return call

    def _same_index_twice(
        self, st: _Choice, call: PendingCall | None, idx: int, tid: Any, n: int
    ) -> PendingCall | None:
        different = call is not None and bool(tid) and bool(call.tool_call_id) and tid != call.tool_call_id
        target = self._start(st, st.max_index + 1, n) if different else call
        what = f"a different id; kept as call {target.index}" if different and target else "continued"
        self.findings.append(
            Finding(
                kind="duplicate_index_in_chunk",
                chunk_index=n,
                choice_index=st.index,
                call_index=idx,
                message=f"two tool call entries with index {idx} in one chunk ({what})",
            )
        )
        return target

    def _header(self, call: PendingCall, tid: Any, name: Any, n: int) -> None:
        if tid:
            if call.tool_call_id is None:
                call.tool_call_id = str(tid)
                if self.listener is not None:
                    self.listener(
                        CallStarted(
                            chunk_index=n,
                            choice_index=call.choice_index,
                            call_index=call.index,
                            tool_call_id=call.tool_call_id,
                            name=call.name,
                        )
                    )
            elif tid == call.tool_call_id:
                call.repeated_header = True
            else:
                self._changed(call, "id", call.tool_call_id, tid, n)
        elif tid == "":
            call.saw_empty_id = True
        if name:
            if call.name is None:
                call.name = str(name)
            elif name == call.name:
                call.repeated_header = True
            else:
                self._changed(call, "name", call.name, name, n)

    def _changed(self, call: PendingCall, what: Literal["id", "name"], kept: Any, new: Any, n: int) -> None:
        self.findings.append(
            Finding(
                kind="id_changed" if what == "id" else "name_changed",
                chunk_index=n,
                choice_index=call.choice_index,
                call_index=call.index,
                tool_call_id=call.tool_call_id,
                message=f"call {call.index}: {what} changed from {kept!r} to {new!r}; kept the first",
            )
        )

    # -- results ---------------------------------------------------------------------------------
    def snapshot(self) -> dict[int, dict[int, dict[str, Any]]]:
        """The calls assembled so far per choice and index (for stepping through a stream)."""
        return {
            ci: {
                idx: {"id": c.tool_call_id, "name": c.name, "arguments": "".join(c.pieces)}
                for idx, c in sorted(st.calls.items())
            }
            for ci, st in sorted(self._choices.items())
        }

    def finish(self) -> ParsedResponse:
        """End of stream: finalise every call (fallback ids, argument checks) and return the response."""
        findings = list(self.findings)
        choices = []
        for ci in sorted(self._choices):
            st = self._choices[ci]
            if st.finish_reason is None:
                findings.append(
                    Finding(
                        kind="no_finish_reason",
                        severity="info",
                        choice_index=ci,
                        message=f"choice {ci}: stream ended without a finish_reason",
                    )
                )
            elif st.finish_reason == "length":
                findings.append(
                    Finding(
                        kind="length_finish",
                        choice_index=ci,
                        message=f"choice {ci}: finish_reason 'length' (output cut at the token limit)",
                    )
                )
            calls: list[ToolCall] = []
            for idx in sorted(st.calls):
                call = st.calls[idx].finalize(
                    batch=self.batch, findings=findings, finish_reason=st.finish_reason
                )
                calls.append(call)
                if self.listener is not None:
                    self.listener(CallFinished(call=call))
            choices.append(
                ParsedChoice(
                    index=ci,
                    content="".join(st.content) if st.content else None,
                    reasoning="".join(st.reasoning) if st.reasoning else None,
                    tool_calls=tuple(calls),
                    finish_reason=st.finish_reason,
                )
            )
        return ParsedResponse(
            format="openai-chat-stream",
            choices=tuple(choices),
            findings=tuple(findings),
            usage=self.usage,
            response_id=self.response_id,
            model=self.model,
        )


def parse_chat_completion(body: Mapping[str, Any], *, batch: int = 0) -> ParsedResponse:
    """Read a whole (non-streamed) chat completion body, including Ollama's ``index`` inside calls."""
    findings: list[Finding] = []
    choices = []
    raw_choices = body.get("choices") or []
    for pos, choice in enumerate(raw_choices):
        if not isinstance(choice, dict):
            findings.append(Finding(kind="malformed_chunk", message=f"choice {pos} is not an object"))
            continue
        ci = choice.get("index", pos)
        message = choice.get("message") or {}
        calls: list[ToolCall] = []
        for pos_call, tc in enumerate(message.get("tool_calls") or []):
            fn = (tc.get("function") if isinstance(tc, dict) else None) or {}
            idx = tc.get("index") if isinstance(tc, dict) else None
            tid = tc.get("id") if isinstance(tc, dict) else None
            pending = PendingCall.announced(
                ci, idx if isinstance(idx, int) else pos_call, 0, tid, fn.get("name")
            )
            args = fn.get("arguments")
            if isinstance(args, dict):  # some servers send an object; keep it, but say so
                findings.append(
                    Finding(
                        kind="malformed_chunk",
                        choice_index=ci,
                        call_index=pending.index,
                        message=f"call {pending.index}: arguments sent as an object, not a string; "
                        "serialised compactly",
                    )
                )
                args = compact_json(args)
            pending.pieces = [args] if isinstance(args, str) else []
            calls.append(
                pending.finalize(batch=batch, findings=findings, finish_reason=choice.get("finish_reason"))
            )
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        choices.append(
            ParsedChoice(
                index=ci,
                content=message.get("content"),
                reasoning=reasoning if isinstance(reasoning, str) else None,
                tool_calls=tuple(sorted(calls, key=lambda c: c.index)),
                finish_reason=choice.get("finish_reason"),
            )
        )
    return ParsedResponse(
        format="openai-chat",
        choices=tuple(choices),
        findings=tuple(findings),
        usage=body.get("usage"),
        response_id=body.get("id"),
        model=body.get("model"),
    )

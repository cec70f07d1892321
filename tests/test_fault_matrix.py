"""Every fault x every mode: the record says exactly what happened.

For each fault (issue 11's list and the older ones) and each mode, the run is made and then checked:

- every call of every batch is answered exactly once, by position and in model order (first_only:
  only the first; the others are its documented skips);
- the protocol validator finds nothing else (first_only's skips, a repeated provider id: flagged);
- each execution's recorded status matches what the tool did, counted by the tools themselves
  (started / finished its work), and the per-fault expected statuses hold;
- runs cut off by an exception (cancellation, KeyboardInterrupt, replay divergence) raise it, with
  the same consistent record as ``partial_result``.

Everything runs on the virtual clock except the blocking sync tool, which needs real threads.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from tests.fault_tools import Ledger, fault_tools
from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import ReplayDivergenceError
from toolcall_lab.loop import AbortHandle, Hooks, run
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.replay import replay
from toolcall_lab.runs import RunResult
from toolcall_lab.scenarios import SCENARIOS

MODES = [
    ("sequential", {}),
    ("parallel", {}),
    ("parallel_cap2", {"mode": "parallel", "concurrency": 2}),
    ("serialized", {"mode": "serialized", "round_trip_s": 0.01}),
    ("first_only", {}),
    ("eager", {}),
    ("eager_cap2", {"mode": "eager", "concurrency": 2}),
    ("parallel_work1", {"mode": "parallel[work=1]"}),
]
RAN = {"ok", "error", "timeout", "withheld"}
"""Statuses of calls whose tool started (a cancelled call says in its text whether it had)."""


def W(key: str, seconds: float = 0.1, cid: str | None = None) -> tuple[Any, ...]:
    call: tuple[Any, ...] = ("work", {"key": key, "seconds": seconds})
    return (*call, cid) if cid else call


@dataclass
class Case:
    calls: tuple[tuple[Any, ...], ...]
    """The first batch; the model then answers "done" (or follows `steps`)."""
    expect: list[str]
    """Statuses by position in every mode but first_only."""
    first_only: Case | None = None
    """What first_only does instead, when the fault is not in the first call (by default: the first
    status, then skips, and the same exception and outcome)."""
    steps: list[Any] | None = None
    hooks: Callable[[], Hooks] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    drive: str = "run"
    """run | abort | cancel (at t = 1.0 s) | real (real clock, for blocking sync tools) | real_abort
    (real clock, abort at 0.2 s)."""
    raises: type[BaseException] | None = None
    outcome: tuple[str, str] | None = None
    """(status, reason) of the run in every mode but first_only."""
    violations: tuple[str, ...] = ()
    """Protocol violation kinds expected besides first_only's skips."""
    by_mode: dict[str, list[str]] = field(default_factory=dict)
    """Statuses for the modes where they differ from `expect` (a cut lands elsewhere in each)."""
    model: Callable[[], Any] | None = None
    """A model of its own instead of the script (raw chunks, a stream that fails midway)."""
    check: Callable[[RunResult, str], None] | None = None
    """Further checks of the record, given the mode."""


def sleeping(seconds: float) -> Callable[..., Any]:
    """A hook that takes its time (it is running when the run is cut off)."""

    async def hook(*args: Any) -> Any:
        await asyncio.sleep(seconds)
        return None

    return hook


def says(position: int, *texts: str) -> Callable[[RunResult, str], None]:
    """Check that the result text of the first round's call at `position` says each of `texts`."""

    def check(result: RunResult, mode: str) -> None:
        text = result.rounds[0].executions[position].result
        for t in texts:
            assert t in text, (t, text)

    return check


class ChunkModel:
    """Streams given chunk lists, one per model call; a list ending in an exception raises it there."""

    name = "chunks"

    def __init__(self, *responses: list[Any]) -> None:
        self.responses = list(responses)

    async def stream(self, request: Any) -> Any:
        for item in self.responses[request.round_index]:
            await asyncio.sleep(0.1)
            if isinstance(item, BaseException):
                raise item
            yield item


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _call_chunk(index: int, cid: str | None, key: str) -> dict[str, Any]:
    call: dict[str, Any] = {
        "index": index,
        "type": "function",
        "function": {"name": "work", "arguments": json.dumps({"key": key})},
    }
    if cid is not None:
        call["id"] = cid
    return _chunk({"tool_calls": [call]})


def colliding_ids() -> ChunkModel:
    """The provider names call 0 ``call_0_1`` and sends call 1 without an id: its fallback id would be
    ``call_0_1`` too."""
    return ChunkModel(
        [
            _chunk({"role": "assistant"}),
            _call_chunk(0, "call_0_1", "a"),
            _call_chunk(1, None, "b"),
            _chunk({}, "tool_calls"),
        ],
        [_chunk({"role": "assistant", "content": "done"}), _chunk({}, "stop")],
    )


def fails_mid_stream() -> ChunkModel:
    return ChunkModel(
        [
            _chunk({"role": "assistant"}),
            _call_chunk(0, None, "a"),
            _call_chunk(1, None, "b"),
            _chunk({}, "tool_calls"),
        ],
        [_chunk({"role": "assistant", "content": "do"}), _chunk({"content": "ne"}), ConnectionError("reset")],
    )


def rewrite_chunk(payload: dict[str, Any]) -> None:
    """An on_model_chunk hook that rewrites what it is given: the record must not change."""
    for choice in payload.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content"):
            delta["content"] = "HACKED"
        for call in delta.get("tool_calls") or []:
            if (call.get("function") or {}).get("name"):
                call["function"]["name"] = "fails"


def chunks_kept(result: RunResult, mode: str) -> None:
    names = [
        c["function"]["name"]
        for chunk in result.rounds[0].model_call.chunks
        for choice in chunk.payload.get("choices") or []
        for c in (choice.get("delta") or {}).get("tool_calls") or []
        if (c.get("function") or {}).get("name")
    ]
    assert names == ["work", "work"] and result.final_answer == "done"
    if mode != "first_only":  # the record replays: it is what the model sent
        from toolcall_lab.trace import Trace, TraceMetadata

        trace = Trace.from_run(result, TraceMetadata(title="rewritten", origin="scripted"))
        assert replay(trace, result.mode).final_answer == "done"


def ids_unique(result: RunResult, mode: str) -> None:
    rnd = result.rounds[0]
    assert [c.tool_call_id for c in rnd.tool_calls] == ["call_0_1", "call_0_1_1"]
    assert "fallback id 'call_0_1' is another call's id" in " ".join(f.message for f in rnd.findings)


def unrecorded_stream(result: RunResult, mode: str) -> None:
    assert "ConnectionError: reset" in result.error
    assert "round 1's model call, sent at" in result.error
    assert "2 chunk(s) received when it failed; it is not in the record" in result.error


def ignored_deadline(result: RunResult, mode: str) -> None:
    """It ran 3 s from its start, whatever the deadline did; the record says so, and when."""
    b = result.rounds[0].executions[1]
    assert b.ended_at == pytest.approx(b.started_at + 3.0)
    assert "deadline (timeout_s=1.0) passed at 1.000 s" in result.error
    assert f"the run ended at {b.ended_at:.3f} s" in result.error
    assert f"it caught the cancellation and returned at {b.ended_at:.3f} s" in b.result


def raising(name: str) -> Callable[..., Any]:
    def hook(*args: Any) -> Any:
        if name == "before_model_call" and not any(m.get("role") == "tool" for m in args[0]):
            return None  # the first model call goes through; the one after the batch fails
        raise ValueError(f"{name} has a bug")

    return hook


FIRST_ONLY_UNCUT = Case(calls=(), expect=["ok", "skipped", "skipped"], outcome=("completed", "final_answer"))
"""first_only runs only the first (quick) call, so the fault in a later call never happens."""
NOT_STARTED = "before this call started"

CASES: dict[str, Case] = {
    "tool_raises": Case(calls=(W("a"), ("fails", {"key": "b"})), expect=["ok", "error"]),
    "async_hang_past_timeout": Case(calls=(("hangs", {"key": "a"}), W("b")), expect=["timeout", "ok"]),
    "sync_hang_past_timeout": Case(
        calls=(("sync_hangs", {"key": "a"}), ("sync_work", {"key": "b"})),
        expect=["timeout", "ok"],
        drive="real",
    ),
    "tool_raises_its_own_timeout_error": Case(
        calls=(("own_timeout", {"key": "a"}), W("b")), expect=["error", "ok"]
    ),
    "tool_raises_cancelled_error": Case(calls=(("own_cancel", {"key": "a"}), W("b")), expect=["error", "ok"]),
    "unknown_tool": Case(calls=(("no_such_tool", {"key": "a"}), W("b")), expect=["unknown_tool", "ok"]),
    "invalid_arguments": Case(calls=(("work", '{"key": "a",,}'), W("b")), expect=["invalid_arguments", "ok"]),
    "incomplete_arguments": Case(
        calls=(W("b"), ("work", '{"key": "a", "sec')), expect=["ok", "invalid_arguments"]
    ),
    "double_encoded_arguments": Case(calls=(("work", '"{\\"key\\": \\"a\\"}"'), W("b")), expect=["ok", "ok"]),
    "duplicates_in_a_batch": Case(calls=(W("a"), W("a"), W("b")), expect=["ok", "duplicate", "ok"]),
    "duplicate_provider_ids": Case(
        calls=(W("a", cid="same"), W("b", 0.2, cid="same"), W("c", cid="other")),
        expect=["ok", "ok", "ok"],
        violations=("duplicate_call_id",),
    ),
    "approve_call_raises": Case(
        calls=(W("a"), W("b")),
        expect=["rejected", "rejected"],
        hooks=lambda: Hooks(approve_call=raising("approve_call")),
    ),
    "approve_result_raises": Case(
        calls=(W("a"), ("fails", {"key": "b"})),
        expect=["withheld", "error"],
        hooks=lambda: Hooks(approve_result=raising("approve_result")),
    ),
    "before_model_call_raises": Case(
        calls=(W("a"), W("b")),
        expect=["ok", "ok"],
        hooks=lambda: Hooks(before_model_call=raising("before_model_call")),
        outcome=("failed", "hook_error"),
    ),
    "on_tool_start_raises": Case(
        calls=(W("a"), W("b")),
        expect=["ok", "ok"],
        hooks=lambda: Hooks(on_tool_start=raising("on_tool_start")),
    ),
    "on_tool_complete_raises": Case(
        calls=(W("a"), W("b")),
        expect=["ok", "ok"],
        hooks=lambda: Hooks(on_tool_complete=raising("on_tool_complete")),
    ),
    "on_model_chunk_raises": Case(
        calls=(W("a"), W("b")),
        expect=["ok", "ok"],
        hooks=lambda: Hooks(on_model_chunk=raising("on_model_chunk")),
    ),
    "abort": Case(
        calls=(W("a"), W("b", 5.0), W("c", 9.0)),
        expect=["ok", "cancelled", "cancelled"],
        first_only=FIRST_ONLY_UNCUT,
        drive="abort",
        outcome=("aborted", "aborted"),
    ),
    "cancel": Case(
        calls=(W("a"), W("b", 5.0), W("c", 9.0)),
        expect=["ok", "cancelled", "cancelled"],
        first_only=FIRST_ONLY_UNCUT,
        drive="cancel",
        raises=asyncio.CancelledError,
        outcome=("aborted", "cancelled"),
    ),
    "keyboard_interrupt_from_a_tool": Case(
        calls=(W("a", 0.01), ("interrupts", {"key": "b"}), W("c", 5.0)),
        expect=["ok", "error", "cancelled"],
        first_only=FIRST_ONLY_UNCUT,
        raises=KeyboardInterrupt,
        outcome=("aborted", "interrupted"),
    ),
    "model_raises": Case(
        calls=(W("a"), W("b")),
        expect=["ok", "ok"],
        steps=[lambda request: (_ for _ in ()).throw(ConnectionError("upstream went away"))],
        outcome=("failed", "model_error"),
    ),
    "empty_response_after_tools": Case(
        calls=(W("a"), W("b")),
        expect=["ok", "ok"],
        steps=[ScriptedResponse(content=None), "the answer"],
        outcome=("completed", "final_answer"),
    ),
    "run_deadline": Case(
        calls=(W("a"), W("b", 5.0), W("c", 9.0)),
        expect=["ok", "cancelled", "cancelled"],
        first_only=FIRST_ONLY_UNCUT,
        settings={"timeout_s": 1.0},
        outcome=("timeout", "deadline"),
    ),
    # -- second pass: what a fresh-eyes tester found ---------------------------------------------
    "tool_raises_stop_iteration": Case(  # sync: no asyncio future can carry it (it used to hang)
        calls=(("stops", {"key": "a"}), ("sync_stops", {"key": "b"}), W("c")),
        expect=["error", "error", "ok"],
        check=lambda result, mode: (
            says(0, "Error: tool 'stops' raised StopIteration")(result, mode)
            or mode == "first_only"
            or says(1, "Error: tool 'sync_stops' raised StopIteration")(result, mode)
        ),
    ),
    "arguments_the_tool_does_not_take": Case(  # the harness's TypeError is not the tool raising
        calls=(("work", {"seconds": 0.1}), ("work", {"key": "b", "zzz": 1}), W("c")),
        expect=["invalid_arguments", "invalid_arguments", "ok"],
        check=says(0, "invalid arguments for 'work': missing required argument 'key'"),
    ),
    "returned_values_without_a_text_form": Case(
        calls=(
            ("returns_generator", {"key": "a"}),
            ("returns_nan", {"key": "b"}),
            ("returns_bytes", {"key": "c"}),
            ("bad_outcome", {"key": "d"}),
        ),
        expect=["error", "error", "ok", "error"],
        check=says(0, "returned a generator object, whose body has not run"),
    ),
    "tool_catches_the_cancel_at_its_limit": Case(
        calls=(("swallows", {"key": "a"}), ("cleanup_fails", {"key": "b"}), W("c")),
        expect=["timeout", "timeout", "ok"],
        check=says(0, "timed out after 0.5 s", "it caught the cancellation and returned at 0.500 s"),
    ),
    "tool_ignores_the_run_deadline": Case(
        calls=(W("a"), ("ignores_cancel", {"key": "b"}), W("c", 5.0)),
        expect=["ok", "cancelled", "cancelled"],
        first_only=FIRST_ONLY_UNCUT,
        settings={"timeout_s": 1.0},
        outcome=("timeout", "deadline"),
        check=lambda result, mode: mode == "first_only" or ignored_deadline(result, mode),
    ),
    "result_hook_running_at_the_deadline": Case(  # the calls ran: never "cancelled, result unknown"
        calls=(W("a"), W("b")),
        expect=["withheld", "withheld"],
        by_mode={  # one call at a time (a per-tool limit of 1 holds the slot through the result hook)
            "sequential": ["withheld", "cancelled"],
            "serialized": ["withheld", "cancelled"],
            "parallel[work=1]": ["withheld", "cancelled"],
        },
        first_only=Case(calls=(), expect=["withheld", "skipped"], outcome=("timeout", "deadline")),
        hooks=lambda: Hooks(approve_result=sleeping(5)),
        settings={"timeout_s": 1.0},
        outcome=("timeout", "deadline"),
        check=says(0, "while the approve_result hook was deciding"),
    ),
    "notification_running_when_aborted": Case(
        calls=(W("a"), W("b")),
        expect=["ok", "ok"],
        by_mode={
            "sequential": ["ok", "cancelled"],
            "serialized": ["ok", "cancelled"],
            "parallel[work=1]": ["ok", "cancelled"],
        },
        first_only=Case(calls=(), expect=["ok", "skipped"], outcome=("aborted", "aborted")),
        hooks=lambda: Hooks(on_tool_complete=sleeping(5)),
        drive="abort",
        outcome=("aborted", "aborted"),
    ),
    "start_hook_running_when_cancelled": Case(  # the tool never started: not "while it was running"
        calls=(W("a"), W("b")),
        expect=["cancelled", "cancelled"],
        first_only=Case(
            calls=(),
            expect=["cancelled", "skipped"],
            raises=asyncio.CancelledError,
            outcome=("aborted", "cancelled"),
        ),
        hooks=lambda: Hooks(on_tool_start=sleeping(5)),
        drive="cancel",
        raises=asyncio.CancelledError,
        outcome=("aborted", "cancelled"),
        check=says(0, NOT_STARTED, "its on_tool_start hook was running"),
    ),
    "approve_call_answers_nonsense": Case(
        calls=(W("a"), W("b")),
        expect=["rejected", "rejected"],
        hooks=lambda: Hooks(approve_call=lambda call: 1),
        check=says(0, "the approve_call hook failed (TypeError: returned 1 (int)"),
    ),
    "duplicate_of_a_failed_call": Case(  # it got no result either: every call of the round failed
        calls=(("fails", {"key": "a"}), ("fails", {"key": "a"})),
        expect=["error", "duplicate"],
        outcome=("failed", "all_calls_failed"),
    ),
    "fallback_id_collides_with_a_provider_id": Case(
        calls=(), expect=["ok", "ok"], model=colliding_ids, check=ids_unique
    ),
    "model_raises_mid_stream": Case(
        calls=(),
        expect=["ok", "ok"],
        model=fails_mid_stream,
        outcome=("failed", "model_error"),
        check=unrecorded_stream,
    ),
    "chunk_hook_rewrites_the_chunks": Case(
        calls=(W("a"), W("b")),
        expect=["ok", "ok"],
        hooks=lambda: Hooks(on_model_chunk=rewrite_chunk),
        check=chunks_kept,
    ),
    "sync_tool_running_when_aborted": Case(
        calls=(("sync_work", {"key": "a"}), ("sync_blocks", {"key": "b"}), ("sync_work", {"key": "c"})),
        expect=["ok", "cancelled", "ok"],
        by_mode={
            "sequential": ["ok", "cancelled", "cancelled"],
            "serialized": ["ok", "cancelled", "cancelled"],
        },
        first_only=FIRST_ONLY_UNCUT,
        drive="real_abort",
        outcome=("aborted", "aborted"),
        check=lambda result, mode: (
            mode == "first_only" or says(1, "worker thread, which cannot be stopped")(result, mode)
        ),
    ),
}


async def _settled(case: Case, settings: dict[str, Any], ledger: Ledger, task: asyncio.Task[Any]) -> None:
    """(A real-clock abort) wait until every call the case expects ``ok`` under this mode has finished
    and its blocking call (the second) has started, within 30 s, then 0.2 s more (a call that is to
    wait for it, e.g. under ``sequential``, is still waiting when the abort comes)."""
    expect = case.by_mode.get(settings.get("mode", ""), case.expect)
    keys = [args["key"] for _, args in case.calls]
    loop = asyncio.get_running_loop()
    until = loop.time() + 30.0
    while not task.done() and loop.time() < until:
        done = all(ledger.finished[k] >= 1 for k, status in zip(keys, expect, strict=True) if status == "ok")
        if done and ledger.started[keys[1]] >= 1:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)


def make_run(case: Case, settings: dict[str, Any], ledger: Ledger) -> tuple[RunResult, BaseException | None]:
    steps = [ScriptedResponse(content="On it.", tool_calls=case.calls), *(case.steps or ["done"])]
    model = case.model() if case.model is not None else ScriptedModel(steps)
    kwargs = {**case.settings, **settings}
    hooks = case.hooks() if case.hooks else None
    coro_kwargs = {"hooks": hooks, **kwargs}

    async def main() -> RunResult:
        tools = fault_tools(ledger)
        if case.drive in ("abort", "cancel", "real_abort"):
            handle = AbortHandle()
            task = asyncio.create_task(run(model, tools, "go", abort=handle, **coro_kwargs))
            if case.drive == "real_abort":  # the calls expected to finish have, whatever the load (a
                await _settled(case, settings, ledger, task)  # fixed 0.2 s failed on a busy machine)
            else:
                await asyncio.sleep(1.0)
            if task.done():  # first_only finished before: nothing to cut
                return await task
            if case.drive in ("abort", "real_abort"):
                handle.abort("stop pressed")
            else:
                task.cancel()
            return await task
        return await run(model, tools, "go", **coro_kwargs)

    try:
        if case.drive in ("real", "real_abort"):
            result = asyncio.run(main())
        else:
            result = run_virtual(main())
    except BaseException as exc:  # the cases that must raise are checked by the caller
        partial = getattr(exc, "partial_result", None)
        assert isinstance(partial, RunResult), f"{type(exc).__name__} without partial_result: {exc!r}"
        return partial, exc
    return result, None


def check_record(result: RunResult, ledger: Ledger, first_only: bool, allowed: tuple[str, ...]) -> None:
    """Answered once each, by position, in model order; the validator clean; statuses match the tools."""
    messages = list(result.messages)
    for rnd in result.rounds:
        if not rnd.tool_calls:
            continue
        assert len(rnd.executions) == len(rnd.tool_calls)
        at = next(
            i for i, m in enumerate(messages) if m is rnd.assistant_message or m == rnd.assistant_message
        )
        answers = []
        for m in messages[at + 1 :]:
            if m.get("role") != "tool":
                break
            answers.append(m)
        expected = [
            (c.tool_call_id, e.result)
            for c, e in zip(rnd.tool_calls, rnd.executions, strict=True)
            if e.answered
        ]
        assert [(m["tool_call_id"], m["content"]) for m in answers] == expected
        for pos, (call, ex) in enumerate(zip(rnd.tool_calls, rnd.executions, strict=True)):
            assert ex.tool_call_id == call.tool_call_id, pos
            assert ex.status != "skipped" or (first_only and pos > 0)
    violations = validate_messages(result.messages)
    skipped = Counter(e.tool_call_id for r in result.rounds for e in r.executions if e.status == "skipped")
    for v in violations:
        if v.kind == "unanswered_call" and skipped[v.tool_call_id]:
            skipped[v.tool_call_id] -= 1
            continue
        assert v.kind in allowed, v
    # side effects: what the tools counted is what the record says
    started: Counter[str] = Counter()
    finished: Counter[str] = Counter()
    for ex in result.executions:
        args = _args(ex.arguments)
        key = args.get("key") if args else None
        if key is None:
            assert ex.status not in RAN, ex
            continue
        never = ex.status == "timeout" and "never ran" in ex.result  # withdrawn before a thread took it
        if (ex.status in RAN and not never) or (
            ex.status == "cancelled" and "while this call was running" in ex.result
        ):
            started[key] += 1
        if ex.status in ("ok", "withheld") and not ex.result.startswith("late"):
            finished[key] += 1
    assert +ledger.started == +started
    assert {k: v for k, v in ledger.finished.items() if v} == dict(+finished)


def _args(raw: str) -> dict[str, Any] | None:
    from toolcall_lab.messages import ParsedArguments, parse_arguments

    outcome = parse_arguments(raw)
    return outcome.value if isinstance(outcome, ParsedArguments) else None


@pytest.mark.parametrize(("label", "settings"), MODES, ids=[m[0] for m in MODES])
@pytest.mark.parametrize("name", list(CASES))
def test_fault_matrix(name: str, label: str, settings: dict[str, Any]) -> None:
    case = CASES[name]
    settings = {"mode": label, **settings} if "mode" not in settings else dict(settings)
    first_only = settings["mode"] == "first_only"
    ledger = Ledger()
    try:
        check_case(name, case, settings, ledger, first_only)
    finally:
        ledger.release.set()  # a blocked sync tool may return now, after the record was checked


def check_case(name: str, case: Case, settings: dict[str, Any], ledger: Ledger, first_only: bool) -> None:
    result, exc = make_run(case, settings, ledger)
    expect, raises, outcome = case.by_mode.get(settings["mode"], case.expect), case.raises, case.outcome
    if first_only:
        if case.first_only is not None:
            expect, raises, outcome = case.first_only.expect, case.first_only.raises, case.first_only.outcome
        else:
            expect = [case.expect[0]] + ["skipped"] * (len(case.expect) - 1)
    assert [e.status for e in result.rounds[0].executions] == expect
    if raises is not None:
        assert isinstance(exc, raises)
    else:
        assert exc is None, exc
    if outcome is not None:
        assert (result.status, result.reason) == outcome
    check_record(result, ledger, first_only, case.violations)
    assert result.events[-1].kind == "run_finished"
    if case.check is not None:
        case.check(result, settings["mode"])


def test_hook_failures_are_recorded_with_the_hook_the_call_and_what_followed() -> None:
    for hook, effect in [
        ("approve_call", "call rejected"),
        ("approve_result", "result withheld"),
        ("on_tool_start", "ignored; the call ran"),
        ("on_tool_complete", "ignored; the result stands"),
    ]:
        case = replace(CASES[f"{hook}_raises"], calls=(W("a"), W("b")), expect=[])
        result, _ = make_run(case, {"mode": "parallel"}, Ledger())
        failures = result.hook_failures
        assert [(f.hook, f.tool_call_id, f.position) for f in failures][:2] == [
            (hook, "call_0_0", 0),
            (hook, "call_0_1", 1),
        ]
        assert failures[0].error == f"ValueError: {hook} has a bug" and failures[0].effect == effect
        assert failures[0].timing.source == "placeholder"  # virtual clock
        kinds = [e.kind for e in result.events]
        assert kinds.count("hook_failed") == len(failures)
    result, _ = make_run(CASES["before_model_call_raises"], {"mode": "sequential"}, Ledger())
    assert result.hook_failures[0].round_index == 1 and "before_model_call hook failed" in result.error
    assert len(result.rounds) == 1  # the run stopped before the second model call


def test_an_event_listener_that_raises_is_recorded_and_the_run_goes_on() -> None:
    def listener(event: Any) -> None:
        if event.kind == "observation":
            raise RuntimeError("view crashed")

    model = ScriptedModel([ScriptedResponse(tool_calls=(W("a"), W("b"))), "done"])
    result = run_virtual(run(model, fault_tools(Ledger()), "go", on_event=listener))
    assert (result.status, result.final_answer) == ("completed", "done")
    assert [f.hook for f in result.hook_failures] == ["on_event", "on_event"]
    assert "RuntimeError: view crashed" in result.hook_failures[0].error


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized", "first_only", "eager"])
def test_replay_divergence_raises_in_every_mode(mode: str) -> None:
    trace = SCENARIOS["weather_news_stock"].record()
    first = trace.rounds[0]
    edited = replace(trace, rounds=(replace(first, executions=first.executions[1:]), *trace.rounds[1:]))
    with pytest.raises(ReplayDivergenceError, match="no recorded execution for call call_0_0") as info:
        replay(edited, mode)
    partial = info.value.partial_result
    assert (partial.status, partial.reason) == ("failed", "replay_divergence")
    assert validate_messages(partial.messages) == [] or mode == "first_only"


@pytest.mark.parametrize("mode", ["sequential", "parallel", "serialized", "eager"])
@pytest.mark.parametrize(
    "hook",
    [
        "approve_call",
        "approve_result",
        "before_model_call",
        "on_tool_start",
        "on_tool_complete",
        "on_model_chunk",
    ],
)
def test_a_keyboard_interrupt_from_a_hook_propagates_with_the_record(hook: str, mode: str) -> None:
    def interrupt(*args: Any) -> None:
        if hook == "before_model_call" and not any(m.get("role") == "tool" for m in args[0]):
            return None
        raise KeyboardInterrupt

    ledger = Ledger()
    model = ScriptedModel([ScriptedResponse(tool_calls=(W("a"), W("b"))), "done"])
    with pytest.raises(KeyboardInterrupt) as info:
        run_virtual(run(model, fault_tools(ledger), "go", mode=mode, hooks=Hooks(**{hook: interrupt})))
    partial = info.value.partial_result
    assert (partial.status, partial.reason) == ("aborted", "interrupted")
    assert f"hook {hook} raised KeyboardInterrupt" in partial.error
    check_record(partial, ledger, False, ())


def test_hooks_and_listeners_that_cannot_work_are_refused_up_front() -> None:
    from toolcall_lab.exceptions import UsageError

    with pytest.raises(UsageError, match=r"Hooks.approve_call='yes': must be a function"):
        Hooks(approve_call="yes")  # type: ignore[arg-type]

    async def listener(event: Any) -> None: ...

    with pytest.raises(UsageError, match=r"on_event=.*must be a plain function"):
        run_virtual(run(ScriptedModel(["hi"]), [], "go", on_event=listener))


def test_a_listener_returning_an_awaitable_is_recorded_not_ignored() -> None:
    async def later() -> None: ...

    result = run_virtual(run(ScriptedModel(["hi"]), [], "go", on_event=lambda event: later()))
    assert result.final_answer == "hi" and result.hook_failures
    assert "returned an awaitable" in result.hook_failures[0].error


def test_an_exception_whose_str_fails_is_still_recorded() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise ValueError("no text")

    async def broken() -> str:
        raise Broken

    model = ScriptedModel([ScriptedResponse(tool_calls=(("broken", {}),)), "done"])
    result = run_virtual(run(model, [broken], "go"))
    assert result.executions[0].status == "error"
    assert (
        result.executions[0].result == "Error: tool 'broken' raised Broken: (its str() raised an error too)"
    )

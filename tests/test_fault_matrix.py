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
    """run | abort | cancel (at t = 1.0 s) | real (real clock, for blocking sync tools)."""
    raises: type[BaseException] | None = None
    outcome: tuple[str, str] | None = None
    """(status, reason) of the run in every mode but first_only."""
    violations: tuple[str, ...] = ()
    """Protocol violation kinds expected besides first_only's skips."""


def raising(name: str) -> Callable[..., Any]:
    def hook(*args: Any) -> Any:
        if name == "before_model_call" and not any(m.get("role") == "tool" for m in args[0]):
            return None  # the first model call goes through; the one after the batch fails
        raise ValueError(f"{name} has a bug")

    return hook


FIRST_ONLY_UNCUT = Case(calls=(), expect=["ok", "skipped", "skipped"], outcome=("completed", "final_answer"))
"""first_only runs only the first (quick) call, so the fault in a later call never happens."""

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
}


def make_run(case: Case, settings: dict[str, Any], ledger: Ledger) -> tuple[RunResult, BaseException | None]:
    steps = [ScriptedResponse(content="On it.", tool_calls=case.calls), *(case.steps or ["done"])]
    model = ScriptedModel(steps)
    kwargs = {**case.settings, **settings}
    hooks = case.hooks() if case.hooks else None
    coro_kwargs = {"hooks": hooks, **kwargs}

    async def main() -> RunResult:
        tools = fault_tools(ledger)
        if case.drive in ("abort", "cancel"):
            handle = AbortHandle()
            task = asyncio.create_task(run(model, tools, "go", abort=handle, **coro_kwargs))
            await asyncio.sleep(1.0)
            if task.done():  # first_only finished before: nothing to cut
                return await task
            if case.drive == "abort":
                handle.abort("stop pressed")
            else:
                task.cancel()
            return await task
        return await run(model, tools, "go", **coro_kwargs)

    try:
        if case.drive == "real":
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
        if ex.status in RAN or (ex.status == "cancelled" and "while this call was running" in ex.result):
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
    expect, raises, outcome = case.expect, case.raises, case.outcome
    if first_only:
        if case.first_only is not None:
            expect, raises, outcome = case.first_only.expect, case.first_only.raises, case.first_only.outcome
        else:
            expect = [case.expect[0]] + ["skipped"] * (len(case.calls) - 1)
    assert [e.status for e in result.rounds[0].executions] == expect
    if raises is not None:
        assert isinstance(exc, raises)
    else:
        assert exc is None, exc
    if outcome is not None:
        assert (result.status, result.reason) == outcome
    check_record(result, ledger, first_only, case.violations)
    assert result.events[-1].kind == "run_finished"


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

"""Strategies, seventh pass (issue 14): a second fresh-eyes tester's fourteen findings (t14b), each fixed as
a class.

Every function that builds a trace builds one `load` accepts; headline figures count a sub-agent's time
once and duration pools hold tool executions only; every strategy option is honoured or refused,
whatever route gives it; a divergence is classified by the cause its record shows, for any strategy;
round notes say what happened; bounds never exceed what a run can show; empty and duplicate mode lists
are refused alike everywhere; a streaming strategy is called only for a response that holds calls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REALDATA, REPO, needs_realdata
from tests.test_strategies import ChunkModel, Counting, answer, args, chunk, header
from tests.test_strategies_sixth import SPEED, bfcl_question, tokens
from toolcall_lab.clock import run_virtual
from toolcall_lab.generation import as_streamed
from toolcall_lab.importers import import_bfcl, import_claude_code, import_otlp
from toolcall_lab.loop import run
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.record import record as record_live
from toolcall_lab.replay import replay, replayed_trace
from toolcall_lab.runs import RunResult
from toolcall_lab.scenarios import SCENARIOS, generate_corpus
from toolcall_lab.trace import Trace, TraceMetadata
from toolcall_lab.trace_files import load, order_problems, redact_trace, save

# -- 1: every builder builds a trace that `load` accepts ----------------------------------------------------


def _run(model: Any, tools: Any, **settings: Any) -> RunResult:
    return run_virtual(run(model, tools, "go", **settings))


def _eager_recording() -> Trace:
    """An eager run whose first call ran while the model still streamed."""
    stream = [
        (0.5, header(0, "a", "search", '{"key": "x", "seconds": 0.2}')),
        (1.0, header(1, "b", "read", '{"key": "y", "seconds": 3}')),
        (2.0, chunk({}, "tool_calls")),
    ]
    result = _run(ChunkModel(stream, answer()), Counting().registry(), mode="eager")
    return Trace.from_run(result, TraceMetadata(title="eager run", origin=result.origin))


def _cut_recording() -> Trace:
    """An eager run cut off by its deadline while the model streamed and a call ran."""
    stream = [
        (0.5, header(0, "a", "search", '{"key": "x", "seconds": 0.2}')),
        (1.0, header(1, "b", "read", '{"key": "y", "seconds": 10}')),
        (10.0, chunk({}, "tool_calls")),
    ]
    result = _run(ChunkModel(stream, answer()), Counting().registry(), mode="eager", timeout_s=5.0)
    assert result.status == "timeout"
    return Trace.from_run(result, TraceMetadata(title="cut run", origin=result.origin))


def _failed_model_recording() -> Trace:
    """A run whose second model call failed after a while (the run's tail holds that call's time)."""

    class Failing(ScriptedModel):
        async def stream(self, request: Any) -> Any:
            if request.round_index == 1:
                await asyncio.sleep(2.5)
                raise ConnectionError("upstream went away")
            async for payload in super().stream(request):
                yield payload

    model = Failing([ScriptedResponse(tool_calls=(("search", {"key": "k"}),), latency_s=1.0)])
    result = _run(model, Counting().registry(), mode="parallel")
    assert result.reason == "model_error"
    return Trace.from_run(result, TraceMetadata(title="failed model", origin=result.origin))


def _inputs(tmp_path: Path) -> Iterator[Trace]:
    """Traces of every shape a builder meets: each built-in's recordings, an imported question with its
    placeholder round, tools that ran while the model streamed, a run cut off mid-stream, a run whose
    model failed, serialized round trips."""
    for name in ("weather_news_stock", "dependent_chain", "search_then_read"):
        if name in SCENARIOS:
            yield SCENARIOS[name].record()
    yield SCENARIOS["weather_news_stock"].record("serialized")
    yield SCENARIOS["weather_news_stock"].record("first_only")
    yield bfcl_question(tmp_path)
    yield _eager_recording()
    yield _cut_recording()
    yield _failed_model_recording()


def _builders(tmp_path: Path) -> list[tuple[str, Callable[[Trace], Trace]]]:
    """Every library function that builds a trace from a trace (or from a run of one)."""
    return [
        ("as_streamed, durations kept", lambda t: as_streamed(t, SPEED, count=tokens)),
        ("as_streamed, every call 1 s", lambda t: as_streamed(t, SPEED, tool_s=1.0, count=tokens)),
        (
            "as_streamed, durations drawn",
            lambda t: as_streamed(t, SPEED, tool_s=[0.01, 2.0, 30.0], count=tokens),
        ),
        ("replayed_trace (sequential)", lambda t: replayed_trace(replay(t, "sequential", check="off"), t)),
        ("replayed_trace (eager)", lambda t: replayed_trace(replay(t, "eager", check="off"), t)),
        ("redact_trace", lambda t: redact_trace(t)),
    ]


def loads_back(trace: Trace, path: Path) -> Trace:
    """The checks `load` applies, on the file `save` writes, and the order of times across records."""
    save(trace, path)
    again = load(path)
    assert order_problems(again) == [], order_problems(again)
    return again


def test_every_builder_makes_traces_that_load_on_every_kind_of_input(tmp_path) -> None:
    built = 0
    for k, source in enumerate(_inputs(tmp_path)):
        loads_back(source, tmp_path / f"source{k}.json")
        for label, build in _builders(tmp_path):
            try:
                out = build(source)
            except Exception as exc:  # (a replay a shape does not allow is not this test's business)
                if label.startswith("replayed_trace"):
                    continue
                raise AssertionError(f"{label} on {source.metadata.title!r}: {exc}") from exc
            try:
                loads_back(out, tmp_path / f"built{k}_{built}.json")
            except Exception as exc:
                raise AssertionError(f"{label} on {source.metadata.title!r}: {exc}") from exc
            built += 1
    assert built >= 40


def test_traces_built_from_scratch_load_too(tmp_path) -> None:
    """The builders that start from no trace: scenarios, the generated corpus, a recorded live run,
    importers over bytes written here."""
    traces = [s.record() for s in SCENARIOS.values()] + generate_corpus(12, seed=3)
    live = run_virtual(record_live(ScriptedModel(["done"]), Counting().registry(), "hi", title="live"))
    traces.append(live)
    for f in sorted((REPO / "tests" / "fixtures" / "otlp").glob("*.json*")):
        traces += list(import_otlp(f).traces)
    traces.append(bfcl_question(tmp_path))
    for k, t in enumerate(traces):
        loads_back(t, tmp_path / f"t{k}.json")


@needs_realdata
def test_as_streamed_on_real_imports_loads_and_drops_the_source_wall_figures(tmp_path) -> None:
    questions = import_bfcl(REALDATA / "bfcl" / "BFCL_v4_parallel.jsonl").traces[:5]
    sessions = import_claude_code(REALDATA / "claude-code-viewer").traces[:4]
    for k, t in enumerate([*questions, *sessions]):
        s = as_streamed(t, SPEED, tool_s=1.0 if t in questions else None, count=tokens)
        again = loads_back(s, tmp_path / f"r{k}.json")
        assert again.metadata.recorded_wall_s is None
        if t.metadata.recorded_wall_s is not None:
            assert f"({t.metadata.recorded_wall_s} s)" in again.metadata.notes


def test_as_streamed_lays_out_one_timeline(tmp_path) -> None:
    """t14b #1: tools started at 0.0, before their own model call ended, and every round started at 0.0;
    the outcome kept the source's wall time, which ended before the first response did."""
    question = bfcl_question(tmp_path)
    s = as_streamed(question, SPEED, tool_s=1.0, count=tokens)
    first, last = s.rounds
    mc = first.model_call
    assert mc.started_at == 0.0
    assert [(e.started_at, e.ended_at) for e in first.executions] == [
        (mc.ended_at, mc.ended_at + 1.0),
        (mc.ended_at + 1.0, mc.ended_at + 2.0),
    ]
    assert last.model_call.started_at == last.model_call.ended_at == mc.ended_at + 2.0
    assert s.outcome.wall_time_s == pytest.approx(mc.ended_at + 2.0)
    eager = _eager_recording()
    kept = as_streamed(eager, SPEED, count=tokens)
    r0, r1 = kept.rounds
    for e, was in zip(r0.executions, eager.rounds[0].executions, strict=True):
        assert e.started_at >= r0.model_call.started_at
        assert e.duration_s == pytest.approx(was.duration_s)
    assert r1.model_call.started_at == pytest.approx(r0.ended_at)
    failed = _failed_model_recording()
    tail = as_streamed(failed, SPEED, count=tokens)
    assert tail.outcome.wall_time_s == pytest.approx(tail.rounds[-1].ended_at + 2.5)


def test_save_refuses_a_trace_load_would_refuse(tmp_path) -> None:
    from dataclasses import replace

    from toolcall_lab.exceptions import TraceError

    t = SCENARIOS["weather_news_stock"].record()
    bad = replace(t, outcome=replace(t.outcome, wall_time_s=0.1))
    with pytest.raises(TraceError, match=r"not saved: the trace would not load back.*wall_time_s"):
        save(bad, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()


# -- 4/14: every option, by every route, honoured or refused ------------------------------------------------


def _two_searches() -> ChunkModel:
    return ChunkModel(
        [
            (0.5, header(0, "a", "search", '{"key": "x"}')),
            (1.0, header(1, "b", "search", '{"key": "y"}')),
            (1.5, header(2, "c", "read", '{"key": "z"}')),
            (2.0, chunk({}, "tool_calls")),
        ],
        answer(),
    )


def test_options_set_as_class_attributes_of_a_builtin_subclass_are_honoured() -> None:
    """t14b #4: ``class OneAtATime(Parallel): concurrency = 1`` ran uncapped under the name 'parallel'."""
    from toolcall_lab.strategies import Eager, Parallel, resolve

    class OneAtATime(Parallel):
        concurrency = 1

    class OneSearch(Eager):
        tool_limits = {"search": 1}  # noqa: RUF012 (as a user writes it)

    assert resolve(OneAtATime()).name == "parallel[cap=1]"
    assert resolve(OneSearch()).name == "eager[search=1]"
    capped = _run(_two_searches(), Counting().registry(), mode=OneAtATime())
    assert [e.queued_at is not None for e in capped.rounds[0].executions] == [False, True, True]
    tools = Counting()
    limited = _run(_two_searches(), tools.registry(), mode=OneSearch())
    assert tools.peak["search"] == 1
    assert [e.queued_at is not None for e in limited.rounds[0].executions] == [False, True, False]
    assert OneAtATime(concurrency=2).concurrency == 2  # (the constructor's own wins)


@pytest.mark.parametrize(
    ("flag", "value"),
    [("streams", "yes"), ("skips_calls", "no"), ("streams", 1), ("skips_calls", None)],
)
def test_a_boolean_option_that_is_not_a_boolean_is_refused_by_every_route(flag: str, value: Any) -> None:
    """t14b #14: skips_calls="no" and streams="yes" were taken as True."""
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.strategies import FunctionStrategy, Strategy, resolve, strategy

    async def go(batch: Any) -> None:
        await batch.run_parallel()

    with pytest.raises(UsageError, match=f"{flag}={value!r}: must be True or False"):
        strategy("by_decorator", **{flag: value})(go)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=f"{flag}={value!r}: must be True or False"):
        FunctionStrategy(go, "by_constructor", **{flag: value})

    class ByClass(Strategy):
        name = "by_class"

        async def run(self, batch: Any) -> None:
            await batch.run_parallel()

    setattr(ByClass, flag, value)
    with pytest.raises(UsageError, match=f"{flag}={value!r}: must be True or False"):
        resolve(ByClass())

    class Duck:
        name = "duck"

        async def run(self, batch: Any) -> None:
            await batch.run_parallel()

    duck = Duck()
    setattr(duck, flag, value)
    with pytest.raises(UsageError, match=f"{flag}={value!r}: must be True or False"):
        resolve(duck)
    made = strategy("by_instance")(go)
    setattr(made, flag, value)
    with pytest.raises(UsageError, match=f"{flag}={value!r}: must be True or False"):
        resolve(made)


def test_limits_of_any_strategy_object_are_checked_not_only_a_strategy_subclasss() -> None:
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.strategies import resolve

    class Duck:
        name = "duck"
        concurrency = "2"

        async def run(self, batch: Any) -> None:
            await batch.run_parallel()

    with pytest.raises(UsageError, match="concurrency='2': must be an integer >= 1"):
        resolve(Duck())


@pytest.mark.parametrize(
    ("base", "flag", "value"),
    [("Eager", "streams", False), ("Parallel", "streams", True), ("FirstOnly", "skips_calls", False)],
)
def test_a_builtin_subclass_keeping_its_run_must_keep_what_that_run_needs(
    base: str, flag: str, value: Any
) -> None:
    """A subclass of Eager with streams = False kept Eager.run, which then ran no call at all."""
    import toolcall_lab.strategies as strategies
    from toolcall_lab.exceptions import UsageError

    cls = type("Mine", (getattr(strategies, base),), {"name": "mine", flag: value})
    with pytest.raises(UsageError, match=f"{flag}={value!r}, but it runs {base}.run, which needs"):
        strategies.resolve(cls())
    instance = getattr(strategies, base)()
    setattr(instance, flag, value)  # (set on an instance of the built-in itself)
    with pytest.raises(UsageError, match=f"{flag}={value!r}, but it runs {base}.run"):
        strategies.resolve(instance)


# -- 5: a divergence is classified by the cause its record shows, for any strategy --------------------------


def _impatient() -> Any:
    from toolcall_lab.strategies import strategy

    @strategy("impatient")
    async def impatient(batch: Any) -> None:
        """Give each call 0.2 s, then move on."""
        for i in range(len(batch.calls)):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(batch.run(i), 0.2)

    return impatient


def _skipper() -> Any:
    from toolcall_lab.strategies import strategy

    @strategy("keep_first", skips_calls=True)
    async def keep_first(batch: Any) -> None:
        await batch.run(0)
        for i in range(1, len(batch.calls)):
            batch.skip(i, "only the first")

    return keep_first


def _divergence(trace: Trace, mode: Any, check: str = "strict") -> str:
    from toolcall_lab.exceptions import ReplayDivergenceError

    with pytest.raises(ReplayDivergenceError) as caught:
        replay(trace, mode, check=check)  # type: ignore[arg-type]
    return str(caught.value)


HOOK_HINT = "before_model_call hook edited the messages"


def test_a_strategys_own_cancellation_is_named_not_blamed_on_a_hook() -> None:
    """t14b #5: a user strategy cancelling its own calls got the hook hint."""
    trace = SCENARIOS["weather_news_stock"].record()
    said = _divergence(trace, _impatient())
    assert "the strategy 'impatient' cancelled call call_0_0 here" in said
    assert "that strategy's own decision" in said and HOOK_HINT not in said
    made_under_it = SCENARIOS["weather_news_stock"].record(_impatient())
    said = _divergence(made_under_it, "parallel")
    assert "the recording's strategy 'impatient' cancelled it (its own decision)" in said
    assert "recorded run was cut off" not in said  # (before: it was cancelled by a cut, the error said)
    assert HOOK_HINT not in said
    from toolcall_lab.analysis import compare

    errors = compare([trace], ["parallel", _impatient()]).errors
    assert "the strategy 'impatient' cancelled call" in errors.iloc[0]["error"]


def test_a_skipped_call_on_either_side_is_the_skipping_strategys_decision() -> None:
    trace = SCENARIOS["weather_news_stock"].record()
    said = _divergence(trace, _skipper())
    assert "is not answered here" in said and "skipped it" in said and HOOK_HINT not in said
    first_only = SCENARIOS["weather_news_stock"].record("first_only")
    said = _divergence(first_only, "parallel")
    assert "the recording was made under first_only, which never ran it" in said and HOOK_HINT not in said


def test_a_difference_the_record_does_not_explain_keeps_the_hook_hint() -> None:
    from dataclasses import replace

    trace = SCENARIOS["weather_news_stock"].record()
    second = trace.rounds[1]
    edited = [dict(m) for m in second.request_messages]
    tool = next(k for k, m in enumerate(edited) if m.get("role") == "tool")
    edited[tool]["content"] = "an edit a hook made"
    rounds = (trace.rounds[0], replace(second, request_messages=tuple(edited)), *trace.rounds[2:])
    said = _divergence(replace(trace, rounds=rounds), "parallel")
    assert HOOK_HINT in said


# -- 6, 7, 12: what a streaming strategy is called for, and round notes that say what happened --------------

_STREAM = [
    (0.5, header(0, "a", "search", '{"key": "x"}')),
    (1.0, header(1, "b", "read", '{"key": "y"}')),
    (2.0, chunk({}, "tool_calls")),
]


def test_a_streaming_strategy_is_called_only_for_a_response_that_holds_calls() -> None:
    """t14b #12: a streams=True strategy was also called for the final answer, where a strategy awaiting
    its first arrival failed (StopAsyncIteration)."""
    from toolcall_lab.strategies import strategy

    calls: list[int] = []

    @strategy("first_then_rest", streams=True)
    async def first_then_rest(batch: Any) -> None:
        calls.append(batch.round_index)
        arrivals = batch.arrivals()
        batch.start(await arrivals.__anext__())  # (there is always a first: the batch holds a call)
        async for pos in arrivals:
            batch.start(pos)
        await batch.join()

    result = _run(ChunkModel(_STREAM, answer()), Counting().registry(), mode=first_then_rest)
    assert (result.status, result.reason) == ("completed", "final_answer")
    assert calls == [0]  # (not for round 1, the final answer)
    assert [e.started_at for e in result.rounds[0].executions] == [0.5, 1.0]
    only_text = _run(ChunkModel(answer()), Counting().registry(), mode=first_then_rest)
    assert (only_text.status, only_text.reason) == ("completed", "final_answer") and calls == [0]


def test_a_cut_off_note_says_no_call_ran_when_none_did() -> None:
    """t14b #6: "... cut off after 0.000 s (the strategy failed) while calls that were already complete
    ran", where no call had run."""
    from toolcall_lab.strategies import strategy

    @strategy("hasty", streams=True)
    async def hasty(batch: Any) -> None:
        await batch.run_parallel()  # (refused while the model streams)

    result = _run(ChunkModel(_STREAM, answer()), Counting().registry(), mode=hasty)
    assert result.reason == "strategy_error"
    note = result.rounds[0].strategy_notes[0]
    assert "before any call started" in note and "ran" not in note.split("(")[-1]


def _indexed(order: list[int | None]) -> list[tuple[float, dict[str, Any]]]:
    """A stream of calls sent with the given call indices (None: no index field), one a second."""
    out: list[tuple[float, dict[str, Any]]] = []
    for k, index in enumerate(order):
        head = header(index if index is not None else 0, f"c{k}", "search", f'{{"key": "{k}"}}')
        if index is None:
            del head["choices"][0]["delta"]["tool_calls"][0]["index"]
        out.append((1.0 + k, head))
    out.append((10.0, chunk({}, "tool_calls")))
    return out


@pytest.mark.parametrize(
    ("order", "why"),
    [
        ([1, 0, 2], "call index 1 came where 0 was expected"),
        ([0, 2, 5], "call index 2 came where 1 was expected"),
    ],
)
def test_eager_says_when_the_streams_indices_kept_calls_from_starting_early(
    order: list[int], why: str
) -> None:
    """t14b #7: every call started at the stream's end, with no note saying why."""
    result = _run(ChunkModel(_indexed(order), answer()), Counting().registry(), mode="eager")
    notes = result.rounds[0].strategy_notes
    assert any(why in n and "could start only when the stream ended" in n for n in notes), notes


def test_calls_sent_without_an_index_start_as_soon_as_they_are_complete() -> None:
    """t14b #7: a stream without index fields is numbered 0, 1, 2 by the parser, yet no call started
    early (its name was looked up by a wire index it does not have)."""
    from toolcall_lab.analysis import eager_bound_s

    result = _run(ChunkModel(_indexed([None, None]), answer()), Counting().registry(), mode="eager")
    assert [e.started_at for e in result.rounds[0].executions] == [1.0, 2.0]
    assert result.rounds[0].strategy_notes == ()
    trace = Trace.from_run(result, TraceMetadata(title="no index", origin=result.origin))
    assert eager_bound_s(trace) == pytest.approx(10.1)  # (the stream's end, then the answer's 0.1 s)


# -- 8: no bound above what a run of the trace can show ---------------------------------------------------


def test_a_recording_cut_off_has_no_bound_above_its_cut() -> None:
    """t14b #8: every mode's wall time was the cut's (14 s) but lower_bound_s read 19 s: the cut model
    call and the cancelled call's time counted in full."""
    import math

    from toolcall_lab.analysis import compare

    cut = _cut_recording()
    runs = compare([cut], ["sequential", "parallel", "eager"]).runs
    assert set(runs["wall_time_s"]) == {5.0}
    for _, row in runs.iterrows():
        assert math.isnan(row["lower_bound_s"]) and math.isnan(row["eager_bound_s"])
        assert math.isnan(row["eager_saving_bound_s"]) and math.isnan(row["efficiency"])
        assert not row["comparable"] and "left empty" in row["not_comparable_why"]
    whole = compare([_eager_recording()], ["parallel"]).runs.iloc[0]
    assert whole["lower_bound_s"] <= whole["wall_time_s"]  # (a run that was not cut keeps its bound)


# -- 9: empty and duplicate mode lists, refused alike ---------------------------------------------------


def test_an_empty_mode_list_is_refused_everywhere(tmp_path, capsys) -> None:
    """t14b #9: ``--modes ""`` printed "1 trace(s) x 0 mode(s)" and exited 0; compare([t], []) returned
    empty tables."""
    from toolcall_lab import plotting
    from toolcall_lab.analysis import compare
    from toolcall_lab.cli import main
    from toolcall_lab.exceptions import UsageError

    trace = SCENARIOS["weather_news_stock"].record()
    with pytest.raises(UsageError, match=r"no mode given"):
        compare([trace], [])
    with pytest.raises(UsageError, match=r"no mode given"):
        plotting.gantt(trace, [])
    path = save(trace, tmp_path / "t.json")
    for given in ("", ",", " , "):
        with pytest.raises(SystemExit) as stopped:  # (argparse's exit for a bad argument)
            main(["bench", str(path), "--modes", given, "--quiet"])
        assert stopped.value.code == 2
        assert "names no mode" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [["--modes", "parallel,parallel"], ["--modes", "parallel", "--strategy", "parallel"]],
)
def test_a_strategy_given_twice_is_refused_by_bench_as_by_compare(tmp_path, capsys, argv: list[str]) -> None:
    """t14b #9: ``--modes parallel --strategy parallel`` quietly became one row, where compare refuses the
    duplicate."""
    from toolcall_lab.analysis import compare
    from toolcall_lab.cli import main
    from toolcall_lab.exceptions import UsageError
    from toolcall_lab.strategies import Parallel

    trace = SCENARIOS["weather_news_stock"].record()
    with pytest.raises(UsageError, match=r"'parallel' is given twice: give each strategy once"):
        compare([trace], ["parallel", Parallel()])
    path = save(trace, tmp_path / "t.json")
    assert main(["bench", str(path), *argv, "--quiet"]) == 2
    assert "'parallel' given twice" in capsys.readouterr().err


# -- 2/3: a sub-agent's time once; duration pools hold tool executions only ---------------------------------


def _with_calls(trace: Trace, title: str, calls: list[tuple[str, float, str]]) -> Trace:
    """`trace` retitled, its first round's executions given these ids, recorded durations and notes."""
    from dataclasses import replace

    from toolcall_lab.records import Timing

    r = trace.rounds[0]
    executions = tuple(
        replace(
            e, tool_call_id=cid, ended_at=e.started_at + took, timing=Timing(source="recorded", note=note)
        )
        for e, (cid, took, note) in zip(r.executions, calls, strict=False)
    )
    meta = replace(trace.metadata, title=title)
    return replace(trace, metadata=meta, rounds=(replace(r, executions=executions), *trace.rounds[1:]))


def test_a_duration_pool_leaves_out_sub_agent_runs_and_calls_that_never_ran() -> None:
    """t14b #3: the pool BFCL's durations were drawn from held 7 whole sub-agent runs (271.6 s ... 21.2 s),
    32 of 440 questions drew one and made up 77 % of the eager total; and calls that never ran."""
    from toolcall_lab.analysis import sub_agent_of
    from toolcall_lab.generation import recorded_tool_durations
    from toolcall_lab.records import NOT_BATCH_EVIDENCE

    base = SCENARIOS["weather_news_stock"].record()
    parent = _with_calls(
        base,
        "session.jsonl main turn 1",
        [
            ("toolu_task", 271.6, "toolUseResult.totalDurationMs 271604 ms: the sub-agent's whole run"),
            (
                "toolu_bash",
                1.5,
                f"from the end of the response to the tool_result line; {NOT_BATCH_EVIDENCE}",
            ),
            ("toolu_no", 4.7, "InputValidationError: no tool ran, the time is Claude Code's check"),
        ],
    )
    child = _with_calls(
        base,
        "session.jsonl sub-agent of Task toolu_task (Build it) turn 1",
        [("toolu_read", 0.2, "durationMs 200 ms"), ("toolu_glob", 0.01, "durationMs 10 ms")],
    )
    assert sub_agent_of(child) == "toolu_task" and sub_agent_of(parent) is None
    pool = recorded_tool_durations([parent, child])
    assert sorted(pool.durations) == [0.01, 0.2, 1.5]
    assert (pool.sub_agent_calls, pool.never_ran, pool.upper_bounds) == (1, 1, 1)
    assert "1 sub-agent call(s)" in pool.describe() and "upper bounds" in pool.describe()


def test_sub_agent_of_reads_a_parent_link_when_a_trace_carries_one() -> None:
    from types import SimpleNamespace

    from toolcall_lab.analysis import sub_agent_of

    linked = SimpleNamespace(
        metadata=SimpleNamespace(title="any", parent={"source": "s", "tool_call_id": "t1"})
    )
    assert sub_agent_of(linked) == "t1"  # type: ignore[arg-type]


@needs_realdata
def test_the_claude_code_headline_counts_each_sub_agent_once() -> None:
    """t14b #2: 7 of the 14 traces are sub-agents whose time is also their parent's Task call's: totals
    over all 14 counted 934.6 s twice and read 1.003x / 1.23x / 1.30x for 1.006x / 1.52x / 1.66x."""
    from toolcall_lab.analysis import compare, sub_agent_of
    from toolcall_lab.generation import recorded_tool_durations

    sessions = [
        t
        for f in ("claude-code-viewer", "claude-reliability")
        for t in import_claude_code(REALDATA / f).traces
    ]
    nested = {t.metadata.title for t in sessions if sub_agent_of(t) is not None}
    assert len(nested) == 7 and len(sessions) == 14
    tasks = {e.tool_call_id for t in sessions for r in t.rounds for e in r.executions if e.name == "Task"}
    assert {sub_agent_of(t) for t in sessions} - {None} <= tasks  # (each is a Task call of a session)
    runs = compare(sessions, ["sequential", "parallel", "eager"]).runs
    own = runs[~runs["title"].isin(nested)].pivot(index="trace", columns="mode", values="wall_time_s").sum()
    assert own["sequential"] / own["eager"] == pytest.approx(1.515, abs=0.01)
    pool = recorded_tool_durations(sessions)
    assert pool.sub_agent_calls == 7 and max(pool.durations) < 60  # (before: 271.6 s, a whole sub-agent)


# -- 10: eager's completeness tracking reads the parser, without its stream events -------------------------


def test_completeness_is_tracked_without_a_listener_on_the_parser() -> None:
    """The loop's accumulator has no listener (a listener costs an event object per argument delta and
    turns off the parser's fast path for headers); the tracker reads its calls after each chunk and
    finds each call complete at the chunk its arguments closed, as when it listened to the events."""
    from toolcall_lab._model_call import ModelStream
    from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator
    from toolcall_lab.strategies._completion import CallTracker

    seen: list[Any] = []
    original = ModelStream.receive

    async def spy(self: ModelStream, on_chunk: Any) -> Any:
        out = await original(self, on_chunk)
        seen.append(self.acc)
        return out

    ModelStream.receive = spy  # type: ignore[method-assign]
    try:
        result = _run(ChunkModel(_STREAM, answer()), Counting().registry(), mode="eager")
    finally:
        ModelStream.receive = original  # type: ignore[method-assign]
    assert [e.started_at for e in result.rounds[0].executions] == [0.5, 1.0]
    assert seen and all(acc.listener is None for acc in seen)
    stream = [
        header(0, "a", "search", '{"key"'),
        args(0, ': "x"}'),
        header(1, "b", "read", ""),
        args(1, '{"key": "y"'),
        args(1, "}"),
    ]
    for listening in (False, True):
        tracker = CallTracker()
        acc = ChatCompletionAccumulator(listener=tracker if listening else None)
        tracker.listen(acc)
        at = []
        for k, payload in enumerate(stream):
            acc.feed(payload)
            at += [(k, pos) for pos, _ in tracker.take()]
        assert at == [(1, 0), (4, 1)], listening

"""Issue 13, sixth pass: what the fifth tester left open, and shapes of real exporters the stored files
lack. Every fixture is written here (our own bytes, modelled on the exporters' documented shapes);
the tests over ``../shared/realdata`` damage copies made in ``tmp_path``, never the files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab import cli
from toolcall_lab.importers import import_openhands, import_otlp, import_recording, import_source
from toolcall_lab.replay import replay

T0 = 1_751_474_439_000_000_000
MS = 1_000_000


# --- OTLP (GenAI conventions) ----------------------------------------------------------------------


def _span(sid: str, a: int, b: int | None, attrs: dict[str, Any], name: str = "chat m") -> dict[str, Any]:
    return {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": sid,
        "name": name,
        "startTimeUnixNano": str(T0 + a * MS),
        "endTimeUnixNano": None if b is None else str(T0 + b * MS),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }


def _msg(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "parts": list(parts)}


def _text(t: str) -> dict[str, Any]:
    return {"type": "text", "content": t}


def _call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "id": cid, "name": name, "arguments": args}


def _answer(cid: str, text: str) -> dict[str, Any]:
    return {"type": "tool_call_response", "id": cid, "response": text}


USER = [_msg("user", _text("read the file"))]
OUT1 = [_msg("assistant", _call("c1", "ls", {"path": "."}))]
RES1 = [_msg("tool", _answer("c1", "a.txt"))]
OUT2 = [_msg("assistant", _call("c2", "cat", {"path": "a.txt"}))]
RES2 = [_msg("tool", _answer("c2", "hello"))]
OUT3 = [_msg("assistant", _text("It says hello."))]


def _chat(sid: str, a: int, b: int | None, request: list[Any], output: list[Any]) -> dict[str, Any]:
    return _span(
        sid,
        a,
        b,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(request),
            "gen_ai.output.messages": json.dumps(output),
        },
    )


def _export(tmp_path: Path, spans: list[dict[str, Any]], name: str = "export.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    return path


def _three_rounds(second_end: int | None) -> list[dict[str, Any]]:
    return [
        _chat("s1", 0, 1000, USER, OUT1),
        _chat("s2", 2000, second_end, USER + OUT1 + RES1, OUT2),
        _chat("s3", 4000, 5000, USER + OUT1 + RES1 + OUT2 + RES2, OUT3),
    ]


@pytest.mark.parametrize("second_end", [1500, None], ids=["ends-before-it-starts", "no-end"])
def test_otlp_a_span_with_bad_times_keeps_its_place_in_the_conversation(tmp_path, second_end) -> None:
    """A model span ending before it starts (or not ending) was sorted last, which split its
    conversation in two and lost a result: it keeps its place by its start time, its latency is a
    placeholder, and a DAMAGED line names it."""
    result = import_otlp(_export(tmp_path, _three_rounds(second_end)))
    (trace,) = result
    assert [e.result for r in trace.rounds for e in r.executions] == ["a.txt", "hello"]
    assert trace.outcome.final_answer == "It says hello."
    assert trace.rounds[1].model_call.timing.source == "placeholder"
    (damaged,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert "span s2" in damaged.where and "keeps its place in time by its start" in damaged.what
    if second_end is not None:
        assert "ends before it starts" in damaged.what


def test_otlp_a_span_without_any_time_stays_where_the_file_has_it(tmp_path) -> None:
    spans = _three_rounds(1500)
    spans[1]["startTimeUnixNano"] = spans[1]["endTimeUnixNano"] = None
    result = import_otlp(_export(tmp_path, spans))
    (trace,) = result
    assert trace.n_calls == 2 and trace.outcome.final_answer == "It says hello."
    assert any("keeps its place in the file" in i.what for i in result.report.issues)


def _openinference(sid: str, a: int, b: int, request: list[Any], response: dict[str, Any]) -> dict[str, Any]:
    """An OpenInference LLM span as its OpenAI instrumentation writes it: the provider's request and
    response as JSON in input.value / output.value, and the same flattened."""
    attrs: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o",
        "input.value": json.dumps({"messages": request, "model": "gpt-4o"}),
        "output.value": json.dumps(response),
    }
    for i, m in enumerate(request):
        attrs[f"llm.input_messages.{i}.message.role"] = m["role"]
        if m.get("content") is not None:
            attrs[f"llm.input_messages.{i}.message.content"] = m["content"]
        if m.get("tool_call_id"):
            attrs[f"llm.input_messages.{i}.message.tool_call_id"] = m["tool_call_id"]
        for k, c in enumerate(m.get("tool_calls") or []):
            head = f"llm.input_messages.{i}.message.tool_calls.{k}.tool_call"
            attrs[f"{head}.id"] = c["id"]
            attrs[f"{head}.function.name"] = c["function"]["name"]
            attrs[f"{head}.function.arguments"] = c["function"]["arguments"]
    for n, choice in enumerate(response["choices"]):
        m = choice["message"]
        attrs[f"llm.output_messages.{n}.message.role"] = "assistant"
        if m.get("content") is not None:
            attrs[f"llm.output_messages.{n}.message.content"] = m["content"]
        for k, c in enumerate(m.get("tool_calls") or []):
            head = f"llm.output_messages.{n}.message.tool_calls.{k}.tool_call"
            attrs[f"{head}.id"] = c["id"]
            attrs[f"{head}.function.name"] = c["function"]["name"]
            attrs[f"{head}.function.arguments"] = c["function"]["arguments"]
    return _span(sid, a, b, attrs, name="ChatCompletion")


def _oi_call(cid: str, name: str, args: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def _oi_body(message: dict[str, Any], *more: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {"index": n, "message": {"role": "assistant", **m}, "finish_reason": "tool_calls"}
            for n, m in enumerate([message, *more])
        ],
    }


def _oi_two_rounds() -> list[dict[str, Any]]:
    user = [{"role": "user", "content": "list the folder"}]
    call = _oi_call("c1", "ls", '{"path": "."}')
    answer = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    answer.append({"role": "tool", "tool_call_id": "c1", "content": "a.txt"})
    final = {"id": "chatcmpl-2", "object": "chat.completion", "model": "gpt-4o", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "One file."}, "finish_reason": "stop"}
    ]}  # fmt: skip
    return [
        _openinference("o1", 0, 1000, user, _oi_body({"content": None, "tool_calls": [call]})),
        _openinference("o2", 1500, 2500, user + answer, final),
    ]


def _cut(span: dict[str, Any], key: str, keep: int = 40) -> None:
    attr = next(a for a in span["attributes"] if a["key"] == key)
    attr["value"]["stringValue"] = attr["value"]["stringValue"][:keep]


def test_otlp_a_cut_output_value_is_damage_and_the_flattened_output_is_read(tmp_path) -> None:
    """An exporter's length limit cut output.value: it was only noted on the trace ('rebuilt'); now a
    DAMAGED line names span and attribute, and the response is rebuilt from llm.output_messages."""
    spans = _oi_two_rounds()
    _cut(spans[0], "output.value")
    _cut(spans[1], "input.value")
    result = import_otlp(_export(tmp_path, spans))
    (trace,) = result
    assert trace.n_calls == 1 and trace.rounds[0].executions[0].result == "a.txt"
    damaged = [i for i in result.report.issues if i.kind == "damaged"]
    assert len(damaged) == 2
    assert "span o1" in damaged[0].where and "attribute output.value is not valid JSON" in damaged[0].what
    assert "rebuilt from the flattened output messages" in damaged[0].what
    assert "span o2" in damaged[1].where and "attribute input.value" in damaged[1].what
    assert cli.main(["import", "otlp", str(tmp_path / "export.json"), "--out", str(tmp_path / "o")]) == 1


def test_otlp_a_cut_output_value_with_nothing_else_costs_its_span_and_says_so(tmp_path) -> None:
    """Without flattened messages the response (and its calls) is unknown: a failed, unreadable span,
    never an empty response read as a final answer. (Since the eighth pass a next model span whose
    input holds the response rebuilds it: here there is none, so nothing else holds it.)"""
    spans = _oi_two_rounds()[:1]
    spans[0]["attributes"] = [a for a in spans[0]["attributes"] if not a["key"].startswith("llm.output")]
    _cut(spans[0], "output.value")
    result = import_otlp(_export(tmp_path, spans))
    (failed,) = [i for i in result.report.issues if i.kind == "failed"]
    assert "span o1" in failed.where and "output.value is not valid JSON" in failed.what
    assert failed.unreadable and "unreadable part" in result.report.summary()


def test_otlp_every_choice_of_an_n2_response_is_a_trace(tmp_path) -> None:
    """Choices beyond the first were dropped silently (not counted, not imported) by every importer
    but the recordings': the other choice is a trace of its own, its calls counted and without
    results; the agent's conversation goes on with choice 0."""
    spans = _oi_two_rounds()
    other = {"content": None, "tool_calls": [_oi_call("c9", "ls", '{"path": "/"}')]}
    body = _oi_body({"content": None, "tool_calls": [_oi_call("c1", "ls", '{"path": "."}')]}, other)
    spans[0] = _openinference("o1", 0, 1000, [{"role": "user", "content": "list the folder"}], body)
    for flattened in (False, True):
        if flattened:  # the same choices read from llm.output_messages.N (choice N)
            spans[0]["attributes"] = [a for a in spans[0]["attributes"] if a["key"] != "output.value"]
        result = import_otlp(_export(tmp_path, spans))
        assert (result.report.source_calls, result.report.imported_calls) == (2, 2)
        assert (result.report.source_model_calls, result.report.imported_model_calls) == (2, 2)
        main, alternative = sorted(result, key=lambda t: "choice 1" in t.metadata.title)
        assert main.rounds[0].executions[0].result == "a.txt"
        (call,) = alternative.rounds[0].executions
        assert (call.tool_call_id, call.status) == ("c9", "not_recorded")
        assert "choice 1 of a response with 2 choices" in alternative.metadata.notes
        assert result.report.ok


def test_genai_output_messages_are_choices(tmp_path) -> None:
    spans = _three_rounds(1000 + 2000)
    first = _chat("s1", 0, 1000, USER, [*OUT1, _msg("assistant", _call("c7", "ls", {"path": "/"}))])
    result = import_otlp(_export(tmp_path, [first, *spans[1:]]))
    assert (result.report.source_calls, result.report.imported_calls) == (3, 3)
    assert sorted(len(t.rounds) for t in result) == [2, 3]


# --- recordings: the import's own verdicts are not recorded figures ---------------------------------


@needs_realdata
def test_a_call_the_import_screened_out_is_not_labelled_recorded() -> None:
    """watsonx mistral's snapshot arguments are not one JSON object: the import's loop screens the
    calls out, but the source holds no result (the real client ran something): 0 s is a placeholder,
    and a recorded-only comparison leaves the trace out; replays still work."""
    (trace,) = import_recording(
        REALDATA
        / "watsonx-ai-java-sdk/watsonx_mistral-large-2512_chat_stream_parallel2_PATHOLOGICAL_snapshot_args.sse"
    )
    calls = trace.rounds[0].executions
    assert [e.status for e in calls] == ["invalid_arguments"] * 2
    assert {e.timing.source for e in calls} == {"placeholder"}
    assert "screened out by toolcall_lab's loop when importing" in calls[0].timing.note
    for mode in ("sequential", "parallel", "first_only"):
        assert replay(trace, mode).reason == "recording_incomplete"


# --- folders, zone-less times ---------------------------------------------------------------------


def test_a_folder_summary_says_an_unreadable_file_held_unknown_calls(tmp_path, capsys) -> None:
    folder = tmp_path / "spans"
    folder.mkdir()
    _export(folder, _three_rounds(3000), name="good.json")
    (folder / "cut.json").write_text(json.dumps({"resourceSpans": [{"scopeSpans": []}]})[:-5])
    result = import_source("otlp", folder)
    assert (result.report.source_calls, result.report.imported_calls) == (2, 2)
    summary = result.report.summary()
    assert "2 in the source (+ whatever 1 unreadable part(s) held)" in summary
    assert cli.main(["import", "otlp", str(folder), "--out", str(tmp_path / "o")]) == 1
    assert "unreadable part" in capsys.readouterr().out


def _openhands_events(stamp: str) -> list[dict[str, Any]]:
    """A small OpenHands event stream: a user message, one `run` action and its observation, and a
    final message; `stamp` formats the timestamps (e.g. without a zone, as OpenHands writes them)."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "t1",
                            "type": "function",
                            "function": {"name": "execute_bash", "arguments": '{"command": "ls"}'},
                        }
                    ],
                },
            }
        ],
    }
    return [
        {"id": 1, "timestamp": stamp.format(s=0), "source": "user", "action": "message",
         "args": {"content": "list files"}, "message": "list files"},
        {"id": 2, "timestamp": stamp.format(s=2), "source": "agent", "action": "run",
         "args": {"command": "ls"}, "message": "Running command: ls",
         "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "t1",
                                "model_response": body, "total_calls_in_response": 1}},
        {"id": 3, "timestamp": stamp.format(s=3), "source": "agent", "cause": 2, "observation": "run",
         "content": "a.txt", "extras": {"metadata": {"exit_code": 0}}},
        {"id": 4, "timestamp": stamp.format(s=5), "source": "agent", "action": "message",
         "args": {"content": "One file."}, "message": "One file."},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("stamp", "said"), [("2025-01-20T20:29:1{s}.500000", True), ("2025-01-20T20:29:1{s}.500000+01:00", False)]
)
def test_a_trace_read_from_zone_less_times_says_so_in_its_notes(tmp_path, stamp, said) -> None:
    """The UTC reading of zone-less times was only in the README: every trace resting on them says
    it, with an example, and a trace whose stamps carry a zone does not."""
    path = tmp_path / "events.json"
    path.write_text(json.dumps(_openhands_events(stamp)))
    (trace,) = import_openhands(path)
    assert (
        "have no time zone (e.g. '2025-01-20T20:29:10.500000'): read as UTC" in trace.metadata.notes
    ) is said
    assert trace.rounds[0].executions[0].duration_s == pytest.approx(1.0)


# --- Langfuse: n > 1 -------------------------------------------------------------------------------


def _obs(oid: str, kind: str, name: str, a: float, b: float, **more: Any) -> dict[str, Any]:
    def at(s: float) -> str:
        return f"2025-09-18T20:20:{s:06.3f}Z"

    return {"id": oid, "type": kind, "name": name, "startTime": at(a), "endTime": at(b), **more}


def _langfuse_export(choices: int) -> dict[str, Any]:
    """Langfuse's OpenAI integration: a generation per completion call (output = the completion
    with its choices), a TOOL observation, all under one span."""
    calls = [
        {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "search", "arguments": f'{{"q": "{n}"}}'},
        }
        for n in range(choices)
    ]
    first = {"choices": [{"index": n, "message": {"role": "assistant", "content": None, "tool_calls": [c]}}
                         for n, c in enumerate(calls)]}  # fmt: skip
    observations = [
        _obs("root", "SPAN", "agent", 0, 9),
        _obs("g1", "GENERATION", "OpenAI-generation", 1, 3, parentObservationId="root", model="gpt-4o",
             input=[{"role": "user", "content": "find it"}], output=first),
        _obs("t1", "TOOL", "search", 3.5, 5, parentObservationId="root", input={"q": "0"}, output="found",
             metadata={"tool_call_id": "call_0"}),
        _obs("g2", "GENERATION", "OpenAI-generation", 6, 8, parentObservationId="root", model="gpt-4o",
             output={"role": "assistant", "content": "Found it."}),
    ]  # fmt: skip
    return {"trace": {"id": "tr1", "name": "agent"}, "observations": observations}


def test_langfuse_every_choice_of_an_n2_generation_is_a_trace(tmp_path) -> None:
    path = tmp_path / "langfuse.json"
    path.write_text(json.dumps(_langfuse_export(2)))
    result = import_source("langfuse", path)
    assert (result.report.source_calls, result.report.imported_calls) == (2, 2)
    main, alternative = sorted(result, key=lambda t: "choice 1" in t.metadata.title)
    assert main.rounds[0].executions[0].result == "found" and main.outcome.final_answer == "Found it."
    assert alternative.rounds[0].executions[0].status == "not_recorded"
    assert result.report.ok


# --- Claude Code: later versions --------------------------------------------------------------------


class _Log:
    """Claude Code transcript lines, written the way its 2.x versions write them."""

    def __init__(self, session: str, *, agent: str | None = None) -> None:
        self.session, self.agent = session, agent
        self.lines: list[dict[str, Any]] = []
        self.last: str | None = None
        self.n = 0

    def add(self, doc: dict[str, Any], t: float) -> None:
        self.n += 1
        uid = f"{self.agent or 'main'}-{self.n:04d}"
        line = {"parentUuid": self.last, "isSidechain": self.agent is not None, "userType": "external",
                "cwd": "/w", "sessionId": self.session, "version": "2.1.20", "uuid": uid,
                "timestamp": f"2025-10-01T10:{int(t // 60):02d}:{t % 60:06.3f}Z", **doc}  # fmt: skip
        if self.agent is not None:
            line["agentId"] = self.agent
        self.lines.append(line)
        self.last = uid

    def user(self, text: str, t: float) -> None:
        self.add({"type": "user", "message": {"role": "user", "content": text}}, t)

    def response(self, mid: str, blocks: list[dict[str, Any]], t: float, step: float = 0.25) -> None:
        for k, block in enumerate(blocks):
            message = {"id": mid, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                       "content": [block], "stop_reason": None, "usage": {"input_tokens": 9, "output_tokens": 3}}  # fmt: skip
            self.add({"type": "assistant", "message": message, "requestId": f"req_{mid}"}, t + k * step)

    def result(self, tid: str, text: str, t: float, extra: Any = None, error: bool = False) -> None:
        block = {
            "type": "tool_result",
            "tool_use_id": tid,
            "content": text,
            **({"is_error": True} if error else {}),
        }
        doc: dict[str, Any] = {"type": "user", "message": {"role": "user", "content": [block]}}
        if extra is not None:
            doc["toolUseResult"] = extra
        self.add(doc, t)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(json.dumps(line) for line in self.lines) + "\n")
        return path


def _use(tid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


SESSION = "0b6c1c2e-1111-4222-8333-944444444444"


def _session_with_agents(folder: Path, layout: str) -> Path:
    """A session whose model starts two sub-agents at once (Agent x2) with the same prompt; each
    sub-agent runs one Grep; 2.1 keeps them in <session>/subagents/, 2.0 beside the session."""
    main = _Log(SESSION)
    main.user("look around", 0)
    main.response("msg_m1", [_use("toolu_A1", "Agent", description="scan", prompt="scan the repo"),
                             _use("toolu_A2", "Agent", description="scan", prompt="scan the repo")], 2)  # fmt: skip
    main.result("toolu_A1", "found x", 20, {"agentId": "a111", "totalDurationMs": 17000, "content": []})
    main.result("toolu_A2", "found y", 21, {"agentId": "a222", "totalDurationMs": 18500, "content": []})
    main.response("msg_m2", [{"type": "text", "text": "x and y"}], 25)
    path = main.write(folder / f"{SESSION}.jsonl")
    for agent, (start, answer) in {"a222": (3.0, "found y"), "a111": (3.2, "found x")}.items():
        log = _Log(SESSION, agent=agent)
        log.user("scan the repo", start)
        log.response(f"msg_{agent}_1", [_use(f"toolu_{agent}_g", "Grep", pattern="x")], start + 2)
        log.result(f"toolu_{agent}_g", "a.py", start + 3, {"durationMs": 400, "numFiles": 1})
        log.response(f"msg_{agent}_2", [{"type": "text", "text": answer}], start + 10)
        where = folder / SESSION / "subagents" if layout == "2.1" else folder
        log.write(where / f"agent-{agent}.jsonl")
    return path


@pytest.mark.parametrize("layout", ["2.1", "2.0"])
@pytest.mark.parametrize("whole_folder", [False, True], ids=["session-file", "project-folder"])
def test_claude_code_sub_agents_kept_in_their_own_files(tmp_path, layout, whole_folder) -> None:
    """Claude Code 2.x keeps each sub-agent's lines in a file of its own (2.1: <session>/subagents/,
    2.0: agent-<id>.jsonl beside the session). They were left out of a session's import (a folder
    listed them, or imported each flat file as an orphan): they are read with their session, every
    call counted once, each tied to its Agent call by the agentId the call's result names (the two
    prompts are equal, so the log's structure alone could not)."""
    path = _session_with_agents(tmp_path, layout)
    result = import_source("claude-code", tmp_path if whole_folder else path)
    report = result.report
    assert (report.source_calls, report.imported_calls) == (4, 4)
    assert (report.source_model_calls, report.imported_model_calls) == (6, 6)
    assert report.clean, report.summary()
    titles = sorted(t.metadata.title for t in result)
    assert [t.split(" ", 1)[1] for t in titles] == [
        "main turn 1",
        "sub-agent of Task toolu_A1 (scan) turn 1",
        "sub-agent of Task toolu_A2 (scan) turn 1",
    ]
    agent = next(t for t in result if "toolu_A1" in t.metadata.title)
    assert agent.outcome.final_answer == "found x"
    assert agent.rounds[0].executions[0].duration_s == pytest.approx(0.4)
    assert not any(i.kind == "skipped" for i in report.issues)
    assert any("sub-agent transcript(s)" in i.what for i in report.issues)


def test_claude_code_a_meta_file_ties_a_sub_agent_without_an_agent_id(tmp_path) -> None:
    path = _session_with_agents(tmp_path, "2.1")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for line in lines:
        line.pop("toolUseResult", None)  # an older result without agentId
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    sub = tmp_path / SESSION / "subagents"
    for agent, call in (("a111", "toolu_A1"), ("a222", "toolu_A2")):
        (sub / f"agent-{agent}.meta.json").write_text(json.dumps({"agentType": "general", "toolUseId": call}))
    result = import_source("claude-code", path)
    assert sum("sub-agent of Task" in t.metadata.title for t in result) == 2


def test_claude_code_an_interrupted_turn_says_so(tmp_path) -> None:
    """The user pressed Esc while a tool ran: the result says so, Claude Code writes a user line of
    its own, and the turn ends there: not 'the recording ends', and a replay stops as recorded; the
    tool's time runs until the interrupt (the note says so), a declined call's time is the wait for
    the user's decision."""
    log = _Log(SESSION)
    log.user("build it", 0)
    log.response("msg_1", [_use("toolu_1", "Bash", command="make")], 2)
    log.result("toolu_1", "The user doesn't want to proceed with this tool use. The tool use was rejected.", 9,
               "User rejected tool use", error=True)  # fmt: skip
    log.response("msg_2", [_use("toolu_2", "Bash", command="make -j")], 12)
    log.result("toolu_2", "[Request interrupted by user for tool use]", 30, "Error: interrupted", error=True)
    log.add({"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": "[Request interrupted by user for tool use]"}]}}, 30.01)  # fmt: skip
    log.user("never mind", 40)
    log.response("msg_3", [{"type": "text", "text": "ok"}], 42)
    result = import_source("claude-code", log.write(tmp_path / "s.jsonl"))
    (trace,) = result
    assert (trace.outcome.status, trace.outcome.reason) == ("incomplete", "interrupted_by_user")
    declined, interrupted = (r.executions[0] for r in trace.rounds[:2])
    assert "declined this call at the permission prompt" in declined.timing.note
    assert "interrupted this call" in interrupted.timing.note and interrupted.duration_s == pytest.approx(
        18.0
    )
    again = replay(trace, "parallel")
    assert (again.status, again.reason) == ("incomplete", "stopped_as_recorded")


# --- inspect: the binary .eval log ------------------------------------------------------------------

INSPECT = (
    REALDATA / "inspect_ai/inspect_log_gpt-4o-mini_browser_agent_5_model_calls_with_raw_api_and_timings.json"
)


def _as_eval(tmp_path: Path, *, header: bool = True, bad_sample: bool = False) -> Path:
    """The real JSON log written as inspect writes its default .eval log: a zip of header.json (the
    log without samples) and samples/<id>_epoch_<n>.json."""
    import zipfile

    log = json.loads(INSPECT.read_text())
    samples = log.pop("samples")
    path = tmp_path / "run.eval"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("_journal/start.json", json.dumps({k: log[k] for k in ("version", "eval", "plan")}))
        if header:
            z.writestr("header.json", json.dumps(log))
        for s in samples:
            z.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        if bad_sample:
            z.writestr("samples/9_epoch_1.json", json.dumps(samples[0])[:500])
    return path


@needs_realdata
def test_inspect_reads_its_default_eval_log_as_it_reads_the_json_one(tmp_path) -> None:
    """inspect writes .eval (a zip) by default; the importer asked users to convert it first."""
    from_json = import_source("inspect", INSPECT)
    from_eval = import_source("inspect", _as_eval(tmp_path))
    assert from_eval.report.clean
    assert [t.to_dict()["rounds"] for t in from_eval] == [t.to_dict()["rounds"] for t in from_json]
    assert (from_eval.report.source_calls, from_eval.report.imported_calls) == (4, 4)


@needs_realdata
def test_inspect_an_eval_log_being_written_or_damaged(tmp_path, capsys) -> None:
    unfinished = import_source("inspect", _as_eval(tmp_path, header=False))
    assert unfinished.report.imported_calls == 4
    assert any("no header.json" in i.what for i in unfinished.report.issues)
    (tmp_path / "b").mkdir()
    damaged = import_source("inspect", _as_eval(tmp_path / "b", bad_sample=True))
    (failed,) = [i for i in damaged.report.issues if i.kind == "failed"]
    assert "samples/9_epoch_1.json" in failed.where and failed.unreadable
    assert damaged.report.imported_calls == 4
    cut = tmp_path / "cut.eval"
    cut.write_bytes(_as_eval(tmp_path).read_bytes()[:3000])
    assert cli.main(["import", "inspect", str(cut), "--out", str(tmp_path / "o")]) == 2
    assert "an .eval log is a zip archive" in capsys.readouterr().err


@needs_realdata
def test_inspect_an_older_log_without_completed_times_is_never_zero_recorded(tmp_path) -> None:
    """Logs of inspect versions before `completed` existed stamp an event when it was logged (after
    the call). The missing end was taken to be the start: every duration 0 s, labelled recorded.
    Now a model call takes output.time (inspect's measurement), a tool without working_time is a
    placeholder, and nothing is placed on a timeline the log does not give."""
    log = json.loads(INSPECT.read_text())
    for e in log["samples"][0]["events"]:
        if e["event"] in ("model", "tool"):
            e.pop("completed", None)
            e.pop("working_time", None)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(log))
    result = import_source("inspect", path)
    (trace,) = result
    latencies = [round(r.model_call.latency_s, 3) for r in trace.rounds]
    assert latencies == [1.101, 0.797, 0.835, 0.741, 4.627]
    assert {r.model_call.timing.source for r in trace.rounds} == {"recorded"}
    assert {e.timing.source for r in trace.rounds for e in r.executions} == {"placeholder"}
    assert "output.time" in trace.rounds[0].model_call.timing.note
    assert sum(i.kind == "gap" for i in result.report.issues) == 4


# --- OTLP: pydantic-ai as Logfire exports it ----------------------------------------------------------


def _typed(key: str, value: Any) -> dict[str, Any]:
    """An OTLP/JSON attribute as protobuf-JSON writes it (int64 as a string)."""
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _pyd_span(
    sid: str, name: str, a: int, b: int, attrs: dict[str, Any], parent: str = "agentrun"
) -> dict[str, Any]:
    return {
        "traceId": "5b8efff798038103d269b633813fc60c",  # hex, as Logfire writes it
        "spanId": sid,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,  # SPAN_KIND_INTERNAL as a number
        "startTimeUnixNano": str(T0 + a * MS),
        "endTimeUnixNano": str(T0 + b * MS),
        "attributes": [_typed(k, v) for k, v in attrs.items()],
        "status": {},
    }


def _pydantic_ai_v1(tmp_path: Path) -> Path:
    """pydantic-ai's first instrumentation: messages as one `events` JSON list on each chat span,
    tool spans 'running tool' with gen_ai.tool.name / gen_ai.tool.call.id / tool_arguments /
    tool_response and no operation name; two tools that overlapped."""
    calls = [
        {"id": "call_P", "type": "function", "function": {"name": "temp", "arguments": '{"city":"Paris"}'}},
        {"id": "call_R", "type": "function", "function": {"name": "temp", "arguments": '{"city":"Rome"}'}},
    ]
    head = [
        {"content": "Be brief.", "role": "system", "gen_ai.system": "openai", "event.name": "gen_ai.system.message"},
        {"content": "Paris or Rome, which is warmer?", "role": "user", "gen_ai.message.index": 0},
    ]  # fmt: skip
    first = [
        *head,
        {"index": 0, "message": {"role": "assistant", "tool_calls": calls}, "event.name": "gen_ai.choice"},
    ]
    second = [
        *head,
        {"role": "assistant", "tool_calls": calls, "gen_ai.message.index": 1},
        {"content": "18", "role": "tool", "id": "call_P", "name": "temp", "gen_ai.message.index": 2},
        {"content": "24", "role": "tool", "id": "call_R", "name": "temp", "gen_ai.message.index": 2},
        {"index": 0, "message": {"role": "assistant", "content": "Rome."}},
    ]
    chat = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o"}
    spans = [
        _pyd_span("agentrun", "agent run", 0, 5000, {"agent_name": "agent"}, parent=""),
        _pyd_span("c1", "chat gpt-4o", 100, 1100, {**chat, "events": json.dumps(first), "gen_ai.usage.input_tokens": 50}),
        _pyd_span("t1", "running tool", 1150, 2150, {"gen_ai.tool.name": "temp", "gen_ai.tool.call.id": "call_P",
                  "tool_arguments": '{"city":"Paris"}', "tool_response": "18"}),
        _pyd_span("t2", "running tool", 1160, 2900, {"gen_ai.tool.name": "temp", "gen_ai.tool.call.id": "call_R",
                  "tool_arguments": '{"city":"Rome"}', "tool_response": "24"}),
        _pyd_span("c2", "chat gpt-4o", 3000, 4000, {**chat, "events": json.dumps(second)}),
    ]  # fmt: skip
    path = tmp_path / "logfire.json"
    path.write_text(
        json.dumps({"resourceSpans": [{"scopeSpans": [{"scope": {"name": "pydantic-ai"}, "spans": spans}]}]})
    )
    return path


def test_otlp_pydantic_ai_first_instrumentation_events_and_tool_spans(tmp_path) -> None:
    """Its messages live in the `events` attribute and its tool spans carry no operation name: the
    import read neither (no tool calls seen at all); now the calls, their recorded durations and
    the parallel batch are what the spans show."""
    result = import_otlp(_pydantic_ai_v1(tmp_path))
    (trace,) = result
    assert (result.report.source_calls, result.report.imported_calls) == (2, 2) and result.report.clean
    assert trace.initial_messages[0] == {"role": "system", "content": "Be brief."}
    durations = [round(e.duration_s, 3) for e in trace.rounds[0].executions]
    assert durations == [1.0, 1.74] and [e.result for e in trace.rounds[0].executions] == ["18", "24"]
    assert {e.timing.source for e in trace.rounds[0].executions} == {"recorded"}
    assert trace.metadata.mode == "parallel" and trace.outcome.final_answer == "Rome."


def test_otlp_pydantic_ai_later_instrumentation(tmp_path) -> None:
    """Later versions: gen_ai.input.messages / gen_ai.output.messages, tool spans named
    'execute_tool temp' with gen_ai.tool.call.arguments / .result, still no operation name."""
    path = _pydantic_ai_v1(tmp_path)
    doc = json.loads(path.read_text())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for span in spans:
        attrs = {a["key"]: a["value"] for a in span["attributes"]}
        if "events" in attrs:
            events = json.loads(attrs.pop("events")["stringValue"])
            inputs = [
                _msg(e["role"], *([_text(e["content"])] if e.get("content") else []),
                     *[_call(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in e.get("tool_calls", [])])
                if e.get("role") != "tool" else _msg("tool", _answer(e["id"], e["content"]))
                for e in events if "message" not in e and e.get("role") != "system"
            ]  # fmt: skip
            choice = next(e["message"] for e in events if "message" in e)
            out = [_msg("assistant", *([_text(choice["content"])] if choice.get("content") else []),
                        *[_call(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in choice.get("tool_calls", [])])]  # fmt: skip
            attrs["gen_ai.input.messages"] = {"stringValue": json.dumps(inputs)}
            attrs["gen_ai.output.messages"] = {"stringValue": json.dumps(out)}
            attrs["gen_ai.system_instructions"] = {"stringValue": json.dumps([_text("Be brief.")])}
        if "tool_response" in attrs:
            span["name"] = "execute_tool temp"
            attrs["gen_ai.tool.call.arguments"] = attrs.pop("tool_arguments")
            attrs["gen_ai.tool.call.result"] = attrs.pop("tool_response")
        span["attributes"] = [{"key": k, "value": v} for k, v in attrs.items()]
    path.write_text(json.dumps(doc))
    (trace,) = import_otlp(path)
    assert [e.result for e in trace.rounds[0].executions] == ["18", "24"]
    assert {e.timing.source for e in trace.rounds[0].executions} == {"recorded"}
    assert trace.metadata.mode == "parallel" and trace.outcome.final_answer == "Rome."


# --- SWE-agent: other trajectories --------------------------------------------------------------------

SWE = REALDATA / "SWE-agent/sweagent_replay_marshmallow-1867_function_calling_11steps_execution_time.traj"


@needs_realdata
def test_swe_agent_a_step_the_history_lacks_does_not_shift_every_later_duration(tmp_path) -> None:
    """Steps were matched to assistant messages by position only: one extra step (a requery the
    history does not show) gave every later call its neighbour's execution_time. Both record the
    action: a step is matched by it, the extra one reported."""
    doc = json.loads(SWE.read_text())
    truth = [s["execution_time"] for s in doc["trajectory"]]
    extra = dict(doc["trajectory"][2], action="ls -la", execution_time=99.0)
    doc["trajectory"].insert(3, extra)
    path = tmp_path / "extra.traj"
    path.write_text(json.dumps(doc))
    result = import_source("swe-agent", path)
    (trace,) = result
    got = [e.duration_s for r in trace.rounds for e in r.executions]
    assert got == pytest.approx(truth, abs=5e-7)  # (every figure to the microsecond: records.clock_time)
    (damaged,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert "trajectory steps 3-3 have no assistant message" in damaged.what


def test_swe_agent_without_function_calling_is_reported_not_read_as_answers(tmp_path, capsys) -> None:
    """SWE-agent 0.x (and its thought_action parser): the action is parsed from the model's text. It
    was read as a string of one-round 'final answers' with no tool call (0 calls in the source)."""
    steps = [
        {
            "action": "ls",
            "observation": "a.py",
            "response": "DISCUSSION\\nlook\\n```\\nls\\n```",
            "thought": "look",
        },
        {"action": "submit", "observation": "", "response": "```\\nsubmit\\n```", "thought": "done"},
    ]
    history = [{"role": "system", "content": "You are SWE-agent.", "agent": "primary"}]
    for step in steps:
        history.append({"role": "user", "content": "Observation: ...", "agent": "primary"})
        history.append({"role": "assistant", "content": step["response"], "thought": step["thought"],
                        "action": step["action"], "agent": "primary"})  # fmt: skip
    path = tmp_path / "old.traj"
    path.write_text(
        json.dumps({"trajectory": steps, "history": history, "info": {"exit_status": "submitted"}})
    )
    result = import_source("swe-agent", path)
    assert (result.report.source_calls, result.report.imported_calls, len(result)) == (2, 0, 0)
    (failed,) = [i for i in result.report.issues if i.kind == "failed"]
    assert "parsed by SWE-agent from the model's text" in failed.what and failed.calls == 2
    assert cli.main(["import", "swe-agent", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "no function calling" in capsys.readouterr().out


@needs_realdata
def test_swe_agent_a_step_of_two_calls_is_split_and_says_estimated(tmp_path) -> None:
    doc = json.loads(SWE.read_text())
    first = next(m for m in doc["history"] if m.get("tool_calls"))
    first["tool_calls"].append(dict(first["tool_calls"][0], id="call_second"))
    at = doc["history"].index(first)
    doc["history"].insert(at + 2, {"role": "tool", "content": "second", "tool_call_ids": ["call_second"]})
    path = tmp_path / "two.traj"
    path.write_text(json.dumps(doc))
    (trace,) = import_source("swe-agent", path)
    pair = trace.rounds[0].executions
    assert [e.timing.source for e in pair] == ["estimated", "estimated"]
    assert pair[0].duration_s == round(doc["trajectory"][0]["execution_time"] / 2, 6)  # (to the microsecond)


# --- OpenHands V1 (software-agent-sdk) event streams ---------------------------------------------------


def _v1_events() -> list[dict[str, Any]]:
    """A V1 conversation: system prompt, a user message, one response with two tool calls (the same
    llm_response_id), their observations (the second an error exit code), an agent answer."""

    def at(s: float) -> str:
        return f"2025-11-02T09:00:{s:06.3f}"  # V1 writes local time without a zone

    def action(eid: str, cid: str, cmd: str, s: float) -> dict[str, Any]:
        return {"kind": "ActionEvent", "id": eid, "timestamp": at(s), "source": "agent",
                "thought": [{"type": "text", "text": "run both"}], "tool_name": "terminal",
                "tool_call_id": cid, "llm_response_id": "resp-1",
                "tool_call": {"id": cid, "name": "terminal", "arguments": json.dumps({"command": cmd}), "origin": "completion"},
                "action": {"kind": "TerminalAction", "command": cmd}}  # fmt: skip

    def observation(eid: str, aid: str, cid: str, text: str, code: int, s: float) -> dict[str, Any]:
        return {"kind": "ObservationEvent", "id": eid, "timestamp": at(s), "source": "environment",
                "tool_name": "terminal", "tool_call_id": cid, "action_id": aid,
                "observation": {"kind": "TerminalObservation", "content": [{"type": "text", "text": text}],
                                "is_error": False, "exit_code": code}}  # fmt: skip

    return [
        {"kind": "SystemPromptEvent", "id": "e0", "timestamp": at(0), "source": "agent",
         "system_prompt": {"type": "text", "text": "You are OpenHands."},
         "tools": [{"type": "function", "function": {"name": "terminal", "parameters": {"type": "object"}}}]},
        {"kind": "MessageEvent", "id": "e1", "timestamp": at(1), "source": "user",
         "llm_message": {"role": "user", "content": [{"type": "text", "text": "check the build"}]}},
        action("e2", "call_1", "make", 4),
        action("e3", "call_2", "make test", 4.01),
        observation("e4", "e2", "call_1", "ok", 0, 6),
        observation("e5", "e3", "call_2", "1 failed", 2, 9),
        {"kind": "ConversationStateUpdateEvent", "id": "e6", "timestamp": at(9.1), "source": "environment", "key": "x"},
        {"kind": "MessageEvent", "id": "e7", "timestamp": at(12), "source": "agent",
         "llm_message": {"role": "assistant", "content": [{"type": "text", "text": "One test fails."}]}},
    ]  # fmt: skip


@pytest.mark.parametrize("as_folder", [False, True], ids=["json-list", "events-folder"])
def test_openhands_v1_event_streams(tmp_path, as_folder) -> None:
    """V1 events (a `kind` per event, calls grouped by llm_response_id) were read as V0 events: no
    call found at all (0 in the source). Now the batch of two is one round, results and statuses
    from the observations, times from the events."""
    events = _v1_events()
    if as_folder:
        folder = tmp_path / "events"
        folder.mkdir()
        for k, e in enumerate(events):
            (folder / f"event-{k:05d}-{e['id']}.json").write_text(json.dumps(e))
        source: Path = folder
    else:
        source = tmp_path / "v1.json"
        source.write_text(json.dumps(events))
    result = import_openhands(source)
    (trace,) = result
    assert (result.report.source_calls, result.report.imported_calls) == (2, 2) and result.report.clean
    (batch,) = [r for r in trace.rounds if r.tool_calls]
    assert [(e.result, e.status) for e in batch.executions] == [("ok", "ok"), ("1 failed", "error")]
    assert trace.initial_messages[0] == {"role": "system", "content": "You are OpenHands."}
    assert trace.outcome.final_answer == "One test fails." and "read as UTC" in trace.metadata.notes


def test_langfuse_langgraph_nested_spans_and_first_token_to_the_microsecond(tmp_path) -> None:
    """LangGraph under Langfuse: each generation under its own `agent` span, the tools under a
    `tools` span, all under the graph's root. The first token's time was 0.7000000476837158 (an
    epoch-float difference); the README promises times exact to the microsecond."""

    def at(s: float) -> str:
        return f"2025-09-18T20:20:{s:06.3f}Z"

    def obs(
        oid: str, kind: str, name: str, a: float, b: float, parent: str | None, **more: Any
    ) -> dict[str, Any]:
        return {"id": oid, "type": kind, "name": name, "startTime": at(a), "endTime": at(b),
                "parentObservationId": parent, **more}  # fmt: skip

    calls = [{"name": "search", "args": {"q": q}, "id": f"call_{q}", "type": "tool_call"} for q in "ab"]
    observations = [
        obs("root", "SPAN", "LangGraph", 0, 20, None),
        obs("ag1", "SPAN", "agent", 0.1, 3, "root"),
        obs("g1", "GENERATION", "ChatOpenAI", 0.2, 2.9, "ag1", model="gpt-4o", completionStartTime=at(0.9),
            input=[{"role": "user", "content": "find a and b"}],
            output={"role": "assistant", "content": "", "tool_calls": calls}),
        obs("tools", "SPAN", "tools", 3.1, 8, "root"),
        obs("t1", "TOOL", "search", 3.2, 5, "tools", input={"q": "a"}, output={"content": "A!", "tool_call_id": "call_a"}),
        obs("t2", "TOOL", "search", 3.2, 7.5, "tools", input={"q": "b"}, output={"content": "B!", "tool_call_id": "call_b"}),
        obs("ag2", "SPAN", "agent", 8.1, 12, "root"),
        obs("g2", "GENERATION", "ChatOpenAI", 8.2, 11.9, "ag2", model="gpt-4o", output={"role": "assistant", "content": "A and B"}),
    ]  # fmt: skip
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"trace": {"id": "t", "name": "LangGraph"}, "observations": observations}))
    result = import_source("langfuse", path)
    (trace,) = result
    assert result.report.clean and trace.metadata.mode == "parallel"
    assert trace.rounds[0].model_call.first_chunk_at == 0.7
    assert [(e.result, e.started_at, e.ended_at) for e in trace.rounds[0].executions] == [
        ("A!", 3.0, 4.8),
        ("B!", 3.0, 7.3),
    ]


def test_claude_code_a_progress_line_between_a_call_and_its_result_does_not_split_a_sub_agent(
    tmp_path,
) -> None:
    """2.x writes progress and hook lines into the parentUuid chain; a sub-agent's result line that
    follows one started a new 'sub-agent' (its Task not found) holding the rest of the run."""
    main = _Log(SESSION)
    main.user("look", 0)
    main.response("msg_m1", [_use("toolu_A1", "Task", description="scan", prompt="scan the repo")], 2)
    main.result("toolu_A1", "found x", 20, {"agentId": "a111", "totalDurationMs": 17000})
    main.response("msg_m2", [{"type": "text", "text": "x"}], 25)
    path = main.write(tmp_path / f"{SESSION}.jsonl")
    sub = _Log(SESSION, agent="a111")
    sub.user("scan the repo", 3)
    sub.response("msg_s1", [_use("toolu_g", "Bash", command="ls")], 5)
    sub.add({"type": "progress", "data": {"type": "hook_progress"}, "toolUseID": "toolu_g"}, 5.5)
    sub.result("toolu_g", "a.py", 6)
    sub.response("msg_s2", [{"type": "text", "text": "found x"}], 10)
    sub.write(tmp_path / SESSION / "subagents" / "agent-a111.jsonl")
    result = import_source("claude-code", path)
    assert result.report.clean and len(result) == 2
    (agent,) = [t for t in result if "sub-agent of Task toolu_A1" in t.metadata.title]
    assert agent.outcome.final_answer == "found x" and agent.rounds[0].executions[0].result == "a.py"


@pytest.mark.parametrize("failed", [False, True], ids=["content-not-captured", "error-status"])
def test_otlp_a_model_span_without_output_is_never_an_empty_answer(tmp_path, failed) -> None:
    """GenAI instrumentations capture no message content by default: a chat span without output
    was read as an empty response (a final answer, '0 tool calls'); one with status ERROR as well.
    Its tool calls are unknown: a failed, unreadable span saying why."""
    spans = _three_rounds(3000)
    attrs = spans[2]["attributes"]
    spans[2]["attributes"] = [a for a in attrs if a["key"] != "gen_ai.output.messages"]
    if failed:
        spans[2]["status"] = {"code": "STATUS_CODE_ERROR", "message": "rate limited"}
    result = import_otlp(_export(tmp_path, spans))
    (issue,) = [i for i in result.report.issues if i.kind == "failed"]
    assert "span s3" in issue.where and issue.unreadable
    assert ("rate limited" if failed else "content not captured") in issue.what
    (trace,) = result
    assert trace.outcome.final_answer is None and trace.outcome.reason == "next_round_not_representable"

"""Issue 13, seventh pass: what the t13 tester found (a result crossed to another call, an id reused,
a number resting on a timestamp the import itself rejected, a sub-agent transcript missing without a
word, dependency evidence from boilerplate). Every fixture is written here (our own bytes, modelled on
each source's documented shape); the tests over ``../shared/realdata`` damage copies made in
``tmp_path``, never the files."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab import cli
from toolcall_lab.importers import import_claude_code
from toolcall_lab.replay import replay

# --- a Claude Code transcript builder (our own bytes) -----------------------------------------------

T0 = datetime(2025, 9, 3, 0, 47, 19, tzinfo=UTC)


class Log:
    """Claude Code lines, each following the one before (``parentUuid``) unless told otherwise."""

    def __init__(
        self, session: str = "0d3a4c1e-0000-4000-8000-000000000007", version: str = "1.0.98"
    ) -> None:
        self.lines: list[dict[str, Any]] = []
        self.base = {"sessionId": session, "cwd": "/w", "version": version, "userType": "external"}

    def _add(self, kind: str, t: float, message: dict[str, Any], parent: str | None, **extra: Any) -> str:
        uuid = f"00000000-0000-4000-8000-{len(self.lines) + 1:012d}"
        if parent == "last":
            parent = self.lines[-1]["uuid"] if self.lines else None
        stamp = (T0 + timedelta(seconds=t)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self.lines.append(
            {
                **self.base,
                "type": kind,
                "uuid": uuid,
                "parentUuid": parent,
                "timestamp": stamp,
                "isSidechain": False,
                "message": message,
                **extra,
            }
        )
        return uuid

    def user(self, t: float, text: str, parent: str | None = "last", **extra: Any) -> str:
        return self._add("user", t, {"role": "user", "content": text}, parent, **extra)

    def says(self, t: float, mid: str, text: str, parent: str | None = "last", **extra: Any) -> str:
        block = {"type": "text", "text": text}
        return self._add("assistant", t, _assistant(mid, block), parent, **extra)

    def calls(
        self,
        t: float,
        mid: str,
        tid: str,
        name: str,
        args: dict[str, Any],
        parent: str | None = "last",
        **extra: Any,
    ) -> str:
        block = {"type": "tool_use", "id": tid, "name": name, "input": args}
        return self._add("assistant", t, _assistant(mid, block), parent, **extra)

    def result(
        self, t: float, tid: str, text: str, parent: str | None = "last", *, error: bool = False, **extra: Any
    ) -> str:
        block = {"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": error}
        return self._add("user", t, {"role": "user", "content": [block]}, parent, **extra)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return path


def _assistant(mid: str, block: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": [block],
        "usage": {"input_tokens": 3, "output_tokens": 20},
    }


def _results(result) -> list[tuple[str, str, str]]:
    return [
        (e.tool_call_id, json.loads(e.arguments).get("command", e.name), e.result)
        for t in result
        for r in t.rounds
        for e in r.executions
    ]


# --- finding 4: a call id reused in a later round is a call of its own ------------------------------


def _reused_id_log() -> Log:
    log = Log()
    log.user(0, "what is in the folder?")
    log.calls(2, "msg_01", "toolu_same", "Bash", {"command": "ls"})
    log.result(2.5, "toolu_same", "a.txt")
    log.calls(5, "msg_02", "toolu_same", "Bash", {"command": "cat a.txt"})
    log.result(5.4, "toolu_same", "hello")
    log.calls(8, "msg_03", "toolu_same", "Bash", {"command": "wc -c a.txt"})
    log.result(8.2, "toolu_same", "5 a.txt")
    log.says(10, "msg_04", "It holds a.txt, which says hello.")
    return log


def test_a_call_id_reused_in_later_rounds_is_a_call_of_its_own(tmp_path) -> None:
    """The tester's cc_idcross/cc_idtodo: a provider (claude-code-router) repeating an id in a later
    round lost the later calls as 'duplicates', counts saying nothing was lost, and a TodoWrite id in
    three rounds split the turn. Now every call is imported with its own result, and a note says
    the id is shared and how each result was matched."""
    result = import_claude_code(_reused_id_log().write(tmp_path / "reused.jsonl"))
    report = result.report
    assert (report.source_calls, report.imported_calls, report.source_model_calls) == (3, 3, 4)
    assert report.clean and len(result) == 1
    assert _results(result) == [
        ("toolu_same", "ls", "a.txt"),
        ("toolu_same", "cat a.txt", "hello"),
        ("toolu_same", "wc -c a.txt", "5 a.txt"),
    ]
    notes = [i.what for i in report.issues if i.kind == "note"]
    assert sum("a call of its own" in n for n in notes) == 2
    assert sum("matched to the call on line" in n and "parentUuid" in n for n in notes) == 3
    assert replay(result[0]).status == "completed"


def test_a_reused_id_is_matched_by_the_line_the_result_names_then_by_order(tmp_path) -> None:
    """2.x results name their call's line (sourceToolAssistantUUID): that beats the chain; without
    either, the latest call with that id still without a result, and the note says so."""
    log = Log(version="2.1.14")
    log.user(0, "go")
    first = log.calls(2, "msg_01", "toolu_same", "Read", {"file_path": "/a"})
    second = log.calls(2.1, "msg_02", "toolu_same", "Read", {"file_path": "/b"})  # (another response)
    log.result(2.5, "toolu_same", "B", parent=first, sourceToolAssistantUUID=second)
    log.result(2.6, "toolu_same", "A", parent=second, sourceToolAssistantUUID=first)
    log.says(4, "msg_03", "done")
    result = import_claude_code(log.write(tmp_path / "named.jsonl"))
    by_file = {
        json.loads(e.arguments)["file_path"]: e.result for t in result for r in t.rounds for e in r.executions
    }
    assert by_file == {"/a": "A", "/b": "B"}
    assert sum("sourceToolAssistantUUID names" in i.what for i in result.report.issues) == 2

    log = Log()
    log.user(0, "go")
    log.calls(2, "msg_01", "toolu_same", "Bash", {"command": "ls"})
    log.result(2.5, "toolu_same", "a.txt", parent=None)  # the chain is broken: order decides
    log.calls(5, "msg_02", "toolu_same", "Bash", {"command": "pwd"})
    log.result(5.5, "toolu_same", "/w", parent=None)
    log.says(7, "msg_03", "done")
    result = import_claude_code(log.write(tmp_path / "order.jsonl"))
    assert [(c, r) for _, c, r in _results(result)] == [("ls", "a.txt"), ("pwd", "/w")]
    assert sum("by order" in i.what for i in result.report.issues) == 2


def test_a_copied_call_line_is_still_one_call(tmp_path) -> None:
    """A copy of a line (another uuid, the same block of the same response) is damage, read once."""
    log = _reused_id_log()
    copy = {**log.lines[1], "uuid": "00000000-0000-4000-8000-0000000000cc"}
    log.lines.insert(2, copy)
    result = import_claude_code(log.write(tmp_path / "copied.jsonl"))
    assert (result.report.source_calls, result.report.imported_calls) == (3, 3)
    assert [i.what for i in result.report.issues if i.kind == "damaged"] == [
        "tool_use toolu_same (Bash) was already on line 2 (the same call of the same response): read once"
    ]


@needs_realdata
def test_the_testers_reused_id_in_a_real_log(tmp_path) -> None:
    """t13's sed over the real 1af7fc5e log: two different Bash calls given one id."""
    real = (
        REALDATA / "claude-code-viewer/claude-code_v1.0.98_sonnet-4_session-1af7fc5e_7calls_parallel5+3.jsonl"
    )
    text = real.read_text().replace("toolu_012Gbtu9wRFgVWjdDUHE3djw", "toolu_01UwiR8tuGvGJN2J7BW4KbPx")
    (tmp_path / "cc_idcross.jsonl").write_text(text)
    result = import_claude_code(tmp_path / "cc_idcross.jsonl")
    assert (result.report.source_calls, result.report.imported_calls) == (12, 12) and result.report.clean
    bash = [e for t in result for r in t.rounds for e in r.executions if e.name == "Bash"]
    assert [e.tool_call_id for e in bash] == ["toolu_01UwiR8tuGvGJN2J7BW4KbPx"] * 2
    assert bash[0].result != bash[1].result and "ls -la" in bash[1].arguments


# --- finding 12: a Task whose sub-agent transcript is not found -------------------------------------


def _session_with_a_subagent(folder: Path, *, with_agent_file: bool) -> Path:
    session = "5e551011-0000-4000-8000-00000000000a"
    log = Log(session=session, version="2.1.14")
    log.user(0, "Where is the config?")
    task = log.calls(
        2, "msg_01", "toolu_task", "Task", {"description": "Find config", "prompt": "Find config files"}
    )
    log.result(
        9,
        "toolu_task",
        "Config is in /repo/setup.cfg",
        parent=task,
        sourceToolAssistantUUID=task,
        toolUseResult={
            "status": "completed",
            "agentId": "a1111111",
            "totalDurationMs": 6900,
            "totalToolUseCount": 2,
            "totalTokens": 1000,
        },
    )
    log.says(11, "msg_02", "It is /repo/setup.cfg.")
    path = log.write(folder / f"{session}.jsonl")
    if with_agent_file:
        sub = Log(session=session, version="2.1.14")
        sub.base = {**sub.base, "isSidechain": True, "agentId": "a1111111"}
        sub.user(2.1, "Find config files", parent=None)
        sub.calls(4, "msg_s1", "toolu_g1", "Glob", {"pattern": "**/*.cfg"})
        sub.result(4.1, "toolu_g1", "/repo/setup.cfg")
        sub.calls(5, "msg_s2", "toolu_g2", "Glob", {"pattern": "**/*.toml"})
        sub.result(5.1, "toolu_g2", "No files found")
        sub.says(8.9, "msg_s3", "Config is in /repo/setup.cfg")
        for line in sub.lines:
            line["isSidechain"] = True
        sub.write(folder / session / "subagents" / "agent-a1111111.jsonl")
    return path


def test_a_task_whose_subagent_transcript_is_missing_is_counted_and_said(tmp_path, capsys) -> None:
    """The tester's cc2/alone: a 2.x session imported without its subagents/ folder said nothing
    about the sub-agent's calls. Now the Task's result (agentId, totalToolUseCount) makes a gap
    naming the file looked for, and the calls count in the source."""
    alone = _session_with_a_subagent(tmp_path / "alone", with_agent_file=False)
    result = import_claude_code(alone)
    report = result.report
    assert (report.source_calls, report.imported_calls) == (3, 1) and report.ok
    (gap,) = [i for i in report.issues if i.kind == "gap"]
    assert (
        gap.calls == 2 and "sub-agent a1111111" in gap.what and "subagents/agent-a1111111.jsonl" in gap.what
    )
    # calls not in what was read: exit 1 since the eighth pass (t13b #14: the README promises it)
    assert cli.main(["import", "claude-code", str(alone), "--out", str(tmp_path / "o")]) == 1
    assert "tool calls:  3 in the source, 1 imported" in capsys.readouterr().out

    whole = import_claude_code(_session_with_a_subagent(tmp_path / "whole", with_agent_file=True))
    assert (whole.report.source_calls, whole.report.imported_calls) == (3, 3)
    assert not [i for i in whole.report.issues if i.kind == "gap"]


# --- finding 17: the import says what it removed ----------------------------------------------------


def test_the_import_summary_says_which_credentials_it_removed(tmp_path, capsys) -> None:
    """Redactions were only in each trace's metadata; the import printed nothing about them."""
    log = Log()
    log.user(0, "call the api")
    log.calls(
        2, "msg_01", "toolu_1", "Bash", {"command": 'curl -H "x-api-key: abcd1234secretvalue9876" https://x'}
    )
    log.result(3, "toolu_1", "ok")
    log.says(5, "msg_02", "Done.")
    source = log.write(tmp_path / "secret.jsonl")
    assert cli.main(["import", "claude-code", str(source), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "credentials removed (" in out and "the value of x-api-key" in out
    assert "credentials removed (" in (tmp_path / "o" / "import_report.txt").read_text()
    assert "abcd1234secretvalue9876" not in "".join(p.read_text() for p in (tmp_path / "o").glob("*.json"))


# --- OTLP: tool spans matched by the strongest evidence (findings 2, 14) ----------------------------

NS = 1_751_474_439_000_000_000
TRACE_ID = "6b8efff798038103d269b633813fc60d"


def _otlp_span(
    sid: str, a: float, b: float, attrs: dict[str, Any], name: str, parent: str | None = "a1"
) -> dict:
    span = {
        "traceId": TRACE_ID,
        "spanId": sid,
        "name": name,
        "startTimeUnixNano": str(NS + int(a * 1e9)),
        "endTimeUnixNano": str(NS + int(b * 1e9)),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def _oi_llm(
    sid: str,
    a: float,
    b: float,
    messages: list[tuple[str, str]],
    calls: list[tuple[str, str, dict]],
    answer: str = "",
) -> dict:
    attrs = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o"}
    for i, (role, text) in enumerate(messages):
        attrs[f"llm.input_messages.{i}.message.role"] = role
        attrs[f"llm.input_messages.{i}.message.content"] = text
    attrs["llm.output_messages.0.message.role"] = "assistant"
    if answer:
        attrs["llm.output_messages.0.message.content"] = answer
    for j, (cid, name, args) in enumerate(calls):
        prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call."
        attrs |= {
            prefix + "id": cid,
            prefix + "function.name": name,
            prefix + "function.arguments": json.dumps(args),
        }
    return _otlp_span(sid, a, b, attrs, "ChatCompletion")


def _oi_tool(sid: str, a: float, b: float, name: str, shown: Any, result: str) -> dict:
    attrs = {"openinference.span.kind": "TOOL", "tool.name": name, "output.value": result}
    if shown is not None:
        attrs["input.value"] = json.dumps(shown)
    return _otlp_span(sid, a, b, attrs, name)


def _otlp_export(tmp_path: Path, spans: list[dict], name: str = "export.json") -> Path:
    agent = _otlp_span("a1", 0, 9, {"openinference.span.kind": "AGENT"}, "agent.run", parent=None)
    path = tmp_path / name
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [agent, *spans]}]}]}))
    return path


def _two_lookups(tmp_path: Path, rome_shows: Any, paris_shows: Any) -> Any:
    """One response calls lookup(paris) then lookup(rome); the tool spans ran Rome first (1 s), then
    Paris (2 s)."""
    from toolcall_lab.importers import import_otlp

    asked = [("system", "You are helpful."), ("user", "Compare Paris and Rome")]
    spans = [
        _oi_llm(
            "c1", 0.1, 2.0, asked, [("call_a", "lookup", {"q": "paris"}), ("call_b", "lookup", {"q": "rome"})]
        ),
        _oi_tool("d1", 2.05, 3.05, "lookup", rome_shows, "Rome: 2.8M"),
        _oi_tool("d2", 3.06, 5.06, "lookup", paris_shows, "Paris: 2.1M"),
        _oi_llm(
            "c2",
            5.1,
            7.9,
            [*asked, ("assistant", ""), ("tool", "Paris: 2.1M"), ("tool", "Rome: 2.8M")],
            [],
            "Rome is bigger.",
        ),
    ]
    result = import_otlp(_otlp_export(tmp_path, spans))
    (execs,) = [r.executions for t in result for r in t.rounds if r.executions]
    return result, {e.tool_call_id: (e.result, round(e.duration_s, 3), e.timing.note) for e in execs}


@pytest.mark.parametrize(
    ("form", "rome", "paris"),
    [
        ("plain JSON", {"q": "rome"}, {"q": "paris"}),
        (
            "smolagents",
            {"args": [], "sanitize_inputs_outputs": True, "kwargs": {"q": "rome"}},
            {"args": [], "sanitize_inputs_outputs": True, "kwargs": {"q": "paris"}},
        ),
        ("only the later call's span shows them", {"q": "rome"}, None),
    ],
)
def test_openinference_tool_spans_are_matched_by_the_arguments_they_show(tmp_path, form, rome, paris) -> None:
    """t13 gen_oi.py: TOOL spans that ran in the other order were matched by order although each
    span's input.value shows its arguments: Paris got Rome's result and duration. The arguments
    decide for the whole batch before order does, so the call without a telling span cannot take
    the span another call's arguments tie to it."""
    result, by_call = _two_lookups(tmp_path, rome, paris)
    assert by_call["call_a"][:2] == ("Paris: 2.1M", 2.0)
    assert by_call["call_b"][:2] == ("Rome: 2.8M", 1.0)
    assert "matched by name and arguments" in by_call["call_b"][2]
    assert result.report.clean


def test_calls_only_order_can_tell_apart_are_said_to_be_possibly_crossed(tmp_path) -> None:
    result, by_call = _two_lookups(tmp_path, None, None)
    assert "does not show its arguments" in by_call["call_a"][2]
    (note,) = [i for i in result.report.issues if i.kind == "note" and "by order only" in i.what]
    assert "call_a, call_b" in note.what and "may be crossed" in note.what


def _genai_chat(sid: str, a: float, b: float, request: list[dict], output: list[dict]) -> dict:
    return _otlp_span(
        sid,
        a,
        b,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps(request),
            "gen_ai.output.messages": json.dumps(output),
        },
        "chat gpt-4o",
    )


def _genai_tool(sid: str, a: float, b: float, name: str, cid: str, args: dict, result: str) -> dict:
    return _otlp_span(
        sid,
        a,
        b,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": cid,
            "gen_ai.tool.call.arguments": json.dumps(args),
            "gen_ai.tool.call.result": result,
        },
        f"execute_tool {name}",
    )


def _part_call(cid: str, name: str, args: dict) -> dict:
    return {"type": "tool_call", "id": cid, "name": name, "arguments": args}


USER = {"role": "user", "parts": [{"type": "text", "content": "Weather and time in Paris?"}]}


def test_a_span_whose_call_id_names_another_tools_call_is_that_tool_s_span(tmp_path) -> None:
    """t13 dupcallid.json: a get_time span carrying call_1 (the get_weather call's id) was 'dropped
    as a duplicate' and get_time got the 1.1 s gap instead of its 0.5 s span."""
    from toolcall_lab.importers import import_otlp

    out1 = [
        {
            "role": "assistant",
            "parts": [
                _part_call("call_1", "get_weather", {"city": "Paris"}),
                _part_call("call_2", "get_time", {"tz": "Europe/Paris"}),
            ],
        }
    ]
    spans = [
        _genai_chat("c1", 0.1, 2.1, [USER], out1),
        _genai_tool("d1", 2.15, 3.15, "get_weather", "call_1", {"city": "Paris"}, "18C"),
        _genai_tool("d2", 2.16, 2.66, "get_time", "call_1", {"tz": "Europe/Paris"}, "14:05"),
        _genai_chat(
            "c2",
            3.2,
            5.9,
            [USER, *out1],
            [{"role": "assistant", "parts": [{"type": "text", "content": "18C, 14:05."}]}],
        ),
    ]
    result = import_otlp(_otlp_export(tmp_path, spans))
    (execs,) = [r.executions for t in result for r in t.rounds if r.executions]
    assert [(e.name, e.result, round(e.duration_s, 3)) for e in execs] == [
        ("get_weather", "18C", 1.0),
        ("get_time", "14:05", 0.5),
    ]
    (damage,) = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert "names call call_1, a get_weather call, but ran get_time" in damage
    assert not any("duplicate" in i.what for i in result.report.issues)


def test_an_id_repeated_across_rounds_is_not_called_a_dropped_duplicate(tmp_path) -> None:
    """t13 repeat_id.json: both calls' notes said 'another span of this call id has other times
    (dropped as a duplicate)' though nothing was dropped, and their spans were not mode evidence."""
    from toolcall_lab.importers import import_otlp

    out1 = [{"role": "assistant", "parts": [_part_call("call_0", "get_weather", {"city": "Paris"})]}]
    out2 = [{"role": "assistant", "parts": [_part_call("call_0", "get_time", {"tz": "Europe/Paris"})]}]

    def answer(cid: str, text: str) -> dict[str, Any]:
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": cid, "response": text}]}

    spans = [
        _genai_chat("c1", 0.1, 1.1, [USER], out1),
        _genai_tool("d1", 1.15, 2.15, "get_weather", "call_0", {"city": "Paris"}, "18C"),
        _genai_chat("c2", 2.2, 3.2, [USER, *out1, answer("call_0", "18C")], out2),
        _genai_tool("d2", 3.25, 3.75, "get_time", "call_0", {"tz": "Europe/Paris"}, "14:05"),
        _genai_chat(
            "c3",
            3.8,
            5.0,
            [USER, *out1, answer("call_0", "18C"), *out2, answer("call_0", "14:05")],
            [{"role": "assistant", "parts": [{"type": "text", "content": "18C at 14:05"}]}],
        ),
    ]
    result = import_otlp(_otlp_export(tmp_path, spans))
    notes = [e.timing.note for t in result for r in t.rounds for e in r.executions]
    assert len(notes) == 2 and not any("duplicate" in n for n in notes)
    assert not any("duplicate" in i.what for i in result.report.issues)


def test_tool_spans_after_an_unreadable_model_span_say_so(tmp_path) -> None:
    """t13 nocontent.json: without captured message content the tool spans were skipped as 'ran
    outside a model's request'; they ran inside one whose output the export lacks."""
    from toolcall_lab.importers import import_otlp

    bare = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    spans = [
        _otlp_span("c1", 0.1, 2.1, bare, "chat gpt-4o"),
        _otlp_span(
            "d1",
            2.15,
            3.15,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
            },
            "execute_tool get_weather",
        ),
        _otlp_span("c2", 3.2, 5.9, bare, "chat gpt-4o"),
    ]
    result = import_otlp(_otlp_export(tmp_path, spans))
    (skip,) = [i.what for i in result.report.issues if i.kind == "skipped"]
    assert "the model span before it (c1) could not be read" in skip and "outside" not in skip


# --- inspect: tool events matched by the strongest evidence (findings 3, 15) ------------------------


def _stamp(t: float) -> str:
    return (T0 + timedelta(seconds=t)).isoformat(timespec="milliseconds")


def _inspect_model(a: float, b: float, calls: list[tuple[str, str, dict]], text: str = "") -> dict:
    message = {
        "role": "assistant",
        "content": text,
        "tool_calls": [{"id": cid, "function": name, "arguments": args} for cid, name, args in calls],
    }
    return {
        "event": "model",
        "timestamp": _stamp(a),
        "completed": _stamp(b),
        "working_time": b - a,
        "input": [{"role": "user", "content": "browse"}],
        "output": {"model": "gpt-4o-mini", "choices": [{"message": message}]},
    }


def _inspect_tool(cid: str, name: str, args: dict, a: float, b: float, result: str) -> dict:
    return {
        "event": "tool",
        "id": cid,
        "function": name,
        "arguments": args,
        "result": result,
        "timestamp": _stamp(a),
        "completed": _stamp(b),
        "working_time": b - a,
    }


def _inspect_log(tmp_path: Path, events: list[dict]) -> Path:
    path = tmp_path / "log.json"
    path.write_text(
        json.dumps(
            {"eval": {"model": "openai/gpt-4o-mini"}, "samples": [{"id": 1, "epoch": 1, "events": events}]}
        )
    )
    return path


def _browse(second_id: str) -> list[dict]:
    go, click = ("call_go", "go", {"url": "https://x"}), ("call_click", "click", {"element": 7})
    return [
        _inspect_model(0, 1, [go]),
        _inspect_tool("call_go", "go", {"url": "https://x"}, 1.1, 5.4, "page"),
        _inspect_model(5.5, 6.5, [click]),
        _inspect_tool(second_id, "click", {"element": 7}, 6.6, 7.9, "clicked"),
        _inspect_model(8, 9, [], "done"),
    ]


def test_inspect_a_tool_event_repeating_another_calls_id_does_not_take_its_place(tmp_path) -> None:
    """t13 in_dupid.json: a second tool event given the first's id made web_browser_go take the
    click's result and 1.278 s, labelled recorded; the report said only that the click had no
    result. The event that ran the call's function wins the id; the other is matched by its
    function and arguments, its wrong id reported as damage."""
    from toolcall_lab.importers import import_inspect

    result = import_inspect(_inspect_log(tmp_path, _browse(second_id="call_go")))
    execs = [e for t in result for r in t.rounds for e in r.executions]
    assert [(e.tool_call_id, e.result, round(e.duration_s, 3), e.timing.source) for e in execs] == [
        ("call_go", "page", 4.3, "recorded"),
        ("call_click", "clicked", 1.3, "recorded"),
    ]
    (damage,) = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert "ran click with the arguments of call call_click, but carries the id call_go" in damage


def test_inspect_a_repeated_tool_event_is_read_once_and_said(tmp_path) -> None:
    """t13 in_duptool.json: an identical duplicated tool event went by without a word."""
    from toolcall_lab.importers import import_inspect

    events = _browse(second_id="call_click")
    events.insert(2, dict(events[1]))
    result = import_inspect(_inspect_log(tmp_path, events))
    assert (result.report.source_calls, result.report.imported_calls) == (2, 2)
    (damage,) = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert "repeats tool event 0" in damage and "read once" in damage


def test_inspect_an_id_a_provider_reuses_in_a_later_round_is_answered_from_its_own_round(tmp_path) -> None:
    from toolcall_lab.importers import import_inspect

    events = _browse(second_id="call_go")
    events[2]["output"]["choices"][0]["message"]["tool_calls"][0]["id"] = "call_go"  # the provider's reuse
    result = import_inspect(_inspect_log(tmp_path, events))
    execs = [e for t in result for r in t.rounds for e in r.executions]
    assert [(e.name, e.result, round(e.duration_s, 3)) for e in execs] == [
        ("go", "page", 4.3),
        ("click", "clicked", 1.3),
    ]
    assert result.report.clean


# --- OpenHands: which latency is whose, and what rests on a rejected timestamp (findings 5, 6, 10) --


def _oh_stamp(t: float) -> str:
    return (T0 + timedelta(seconds=t)).replace(tzinfo=None).isoformat(timespec="microseconds")


def _oh_episode(rids: list[str], latencies: list[tuple[str, float]] | None = None) -> dict:
    """An evaluation record: a user message, then one `run` action per response (response i asks
    at 10 i + 8, its observation comes 1 s later), then a finish."""
    history: list[dict] = [
        {
            "id": 0,
            "timestamp": _oh_stamp(0),
            "source": "user",
            "action": "message",
            "args": {"content": "fix the bug"},
        }
    ]
    for i, rid in enumerate([*rids, "r-finish"]):
        finish = rid == "r-finish"
        name, cid = ("finish", f"toolu_{i}") if finish else ("execute_bash", f"toolu_{i}")
        args = {} if finish else {"command": f"ls dir{i}"}
        body = {
            "id": rid,
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": cid,
                                "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
        }
        action_id = len(history)
        history.append(
            {
                "id": action_id,
                "timestamp": _oh_stamp(10 * i + 8),
                "source": "agent",
                "action": "finish" if finish else "run",
                "args": args,
                "tool_call_metadata": {
                    "function_name": name,
                    "tool_call_id": cid,
                    "model_response": body,
                    "total_calls_in_response": 1,
                },
            }
        )
        if not finish:
            history.append(
                {
                    "id": len(history),
                    "timestamp": _oh_stamp(10 * i + 9),
                    "source": "agent",
                    "observation": "run",
                    "content": f"file{i}",
                    "cause": action_id,
                    "extras": {"metadata": {"exit_code": 0}},
                }
            )
    record = {"instance_id": "demo-1", "history": history, "metrics": {}}
    if latencies is not None:
        record["metrics"]["response_latencies"] = [
            {"model": "m", "latency": v, "response_id": rid} for rid, v in latencies
        ]
    return record


def _oh_import(tmp_path: Path, record: dict) -> Any:
    from toolcall_lab.importers import import_openhands

    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return import_openhands(path)


def _latencies(result) -> list[tuple[float, str]]:
    return [
        (round(r.model_call.latency_s, 3), r.model_call.timing.note.split(":")[0])
        for t in result
        for r in t.rounds
        if not r.placeholder
    ]


def test_openhands_a_response_id_listed_twice_gives_no_response_another_s_latency(tmp_path) -> None:
    """t13 oe_dupid: response_latencies[4] given [5]'s id and 1.0 s: R5 showed 1.000 s recorded (its
    own is 2.324 s) with exit 0. The entry in R5's place in the order of the calls is R5's; the
    other is no one's; R4, whose own entry is gone, is timed from the events."""
    record = _oh_episode(["r1", "r2", "r3"], [("r1", 3.0), ("r3", 7.5), ("r3", 6.5), ("r-finish", 4.0)])
    result = _oh_import(tmp_path, record)
    assert _latencies(result)[:3] == [
        (3.0, "metrics.response_latencies"),
        (9.0, "from the event that completed the request to the action (includes OpenHands' step overhead)"),
        (6.5, "metrics.response_latencies"),
    ]
    (damage,) = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert "lists response r3 2 times (entry 1: 7.5 s, entry 2: 6.5 s): entry 2, in its place" in damage


def test_openhands_responses_that_all_share_one_id_are_each_their_own(tmp_path) -> None:
    """t13 oe_sameid1: every model_response.id 'chatcmpl-local' crashed the import (IndexError, exit
    2, nothing imported); with only the latency ids the same, the counts differed without a word."""
    record = _oh_episode(["chatcmpl-local"] * 3, [("chatcmpl-local", v) for v in (3.0, 4.0, 5.0, 6.0)])
    for e in record["history"]:
        if e.get("action") == "finish":
            e["tool_call_metadata"]["model_response"]["id"] = "chatcmpl-local"
    result = _oh_import(tmp_path, record)
    report = result.report
    assert (
        report.source_model_calls,
        report.imported_model_calls,
        report.source_calls,
        report.imported_calls,
    ) == (4, 4, 4, 4)
    assert [v for v, _ in _latencies(result)] == [3.0, 4.0, 5.0, 6.0]
    assert any("paired in the order of the calls" in i.what for i in report.issues)

    record = _oh_episode(["r1", "r2", "r3"], [("chatcmpl-local", v) for v in (3.0, 4.0, 5.0, 6.0)])
    report = _oh_import(tmp_path, record).report
    assert report.source_model_calls == report.imported_model_calls == 4
    assert any("lists 1 response(s) the events do not show (chatcmpl-local)" in i.what for i in report.issues)


def test_openhands_a_latency_measured_from_a_rejected_timestamp_is_a_placeholder(tmp_path) -> None:
    """t13 oh_neg: an observation dated before its action is not trusted (its tool time became a
    placeholder), but the next response's latency, measured from the event before it, stayed
    recorded and held the tool's time."""
    record = _oh_episode(["r1", "r2"])
    obs = next(e for e in record["history"] if e.get("observation") and e["cause"] == 1)
    obs["timestamp"] = _oh_stamp(7)  # before its action (8 s)
    result = _oh_import(tmp_path, record)
    rounds = [r for t in result for r in t.rounds]
    assert rounds[0].executions[0].timing.source == "placeholder"
    assert rounds[1].model_call.timing.source == "placeholder"
    assert "event 2, whose timestamp is not trusted" in rounds[1].model_call.timing.note


# --- Langfuse: one bad time costs only itself (findings 11, 15) -------------------------------------


def _lf_stamp(t: float, zone: bool = True) -> str:
    stamp = (T0 + timedelta(seconds=t)).isoformat(timespec="milliseconds").replace("+00:00", "")
    return stamp + ("Z" if zone else "")


def _lf_export(tmp_path: Path, tool_start: str, tool_end: str, extra: list[dict] | None = None) -> Path:
    """An AI SDK run as Langfuse exports it: a wrapper generation, two doStream steps whose outputs
    are not recorded, and the tool the first step ran while it was still open (9.111 s into it)."""

    def obs(oid: str, kind: str, name: str, start: str, end: str, parent: str | None, **more: Any) -> dict:
        return {
            "id": oid,
            "type": kind,
            "name": name,
            "startTime": start,
            "endTime": end,
            "parentObservationId": parent,
            **more,
        }

    observations = [
        obs("root", "GENERATION", "ai.streamText", _lf_stamp(0), _lf_stamp(20), None, output="It is sunny."),
        obs(
            "g1", "GENERATION", "ai.streamText.doStream", _lf_stamp(0), _lf_stamp(12.085), "root", output=None
        ),
        obs(
            "t1",
            "SPAN",
            "ai.toolCall",
            tool_start,
            tool_end,
            "root",
            metadata={
                "attributes": {
                    "ai.toolCall.id": "call_1",
                    "ai.toolCall.name": "weather",
                    "ai.toolCall.args": '{"city":"Paris"}',
                    "ai.toolCall.result": "sunny",
                }
            },
        ),
        obs(
            "g2", "GENERATION", "ai.streamText.doStream", _lf_stamp(12.2), _lf_stamp(15), "root", output=None
        ),
        *(extra or []),
    ]
    path = tmp_path / "langfuse.json"
    path.write_text(
        json.dumps(
            {
                "trace": {"id": "tr1", "name": "weather", "input": "Weather in Paris?"},
                "observations": observations,
            }
        )
    )
    return path


@pytest.mark.parametrize(
    ("case", "start", "end", "placed_by"),
    [
        ("an end before the start", _lf_stamp(9.111), _lf_stamp(5), "start"),
        ("a zone-less start two hours off", _lf_stamp(9.111 + 7200, zone=False), _lf_stamp(12.0), "end"),
    ],
)
def test_langfuse_a_tool_with_bad_times_keeps_its_step(tmp_path, case, start, end, placed_by) -> None:
    """t13 lf_toolend: one bad time on the tool observation lost the call ('NOT REPRESENTED'), split
    the run in two and left the first generation 12.085 s recorded, the tool's time included. The
    observation keeps its place by the stamp inside its parent's time; its duration and the latency
    resting on its start are placeholders."""
    from toolcall_lab.importers import import_langfuse

    result = import_langfuse(_lf_export(tmp_path, start, end))
    report = result.report
    assert len(result) == 1 and (report.source_calls, report.imported_calls) == (1, 1)
    assert not [i for i in report.issues if i.kind == "failed"]
    (damage,) = [i.what for i in report.issues if i.kind == "damaged" and "startTime" in i.what]
    assert f"keeps its place in time by its {placed_by}" in damage
    first = result[0].rounds[0]
    assert first.executions[0].result == "sunny" and first.executions[0].timing.source == "placeholder"
    assert (
        first.model_call.timing.source == "placeholder" and "no valid times" in first.model_call.timing.note
    )


def test_langfuse_copies_of_an_observation_that_differ_say_so_and_which_is_used(tmp_path) -> None:
    """t13 lf_dupobs2: a duplicate observation whose endTime differed was 'exported 2 times: read
    once', without saying the copies differ or which one was used."""
    from toolcall_lab.importers import import_langfuse

    copy = {
        "id": "t1",
        "type": "SPAN",
        "name": "ai.toolCall",
        "startTime": _lf_stamp(9.111),
        "endTime": _lf_stamp(8),
        "parentObservationId": "root",
    }
    result = import_langfuse(_lf_export(tmp_path, _lf_stamp(9.111), _lf_stamp(12.0), extra=[copy]))
    (damage,) = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert "exported 2 times and the copies differ (in endTime, metadata)" in damage
    assert "copy 1 is used" in damage
    assert result[0].rounds[0].executions[0].timing.source == "recorded"


# --- tau-bench, SWE-agent, recorded exchanges: answers by the strongest evidence (class of 2-5) -----


def _fn(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def test_tau_bench_two_calls_sharing_an_id_get_their_own_answers(tmp_path) -> None:
    """Both calls took the first tool message with the id; the second message was lost unsaid."""
    from toolcall_lab.importers import import_tau_bench

    traj = [
        {"role": "system", "content": "airline agent"},
        {"role": "user", "content": "my reservation?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _fn("call_x", "get_user_details", {"user_id": "u1"}),
                _fn("call_x", "get_reservation_details", {"reservation_id": "R1"}),
            ],
        },
        {"role": "tool", "tool_call_id": "call_x", "name": "get_user_details", "content": '{"name": "Ann"}'},
        {
            "role": "tool",
            "tool_call_id": "call_x",
            "name": "get_reservation_details",
            "content": '{"id": "R1"}',
        },
        {"role": "assistant", "content": "Ann, R1 is fine."},
    ]
    path = tmp_path / "traj.json"
    path.write_text(json.dumps([{"task_id": 1, "traj": traj}]))
    result = import_tau_bench(path)
    execs = [e for t in result for r in t.rounds for e in r.executions]
    assert [(e.name, e.result) for e in execs] == [
        ("get_user_details", '{"name": "Ann"}'),
        ("get_reservation_details", '{"id": "R1"}'),
    ]
    assert any("share the id call_x" in i.what for i in result.report.issues)


def test_swe_agent_tool_messages_are_matched_by_the_id_they_name(tmp_path) -> None:
    """Tool messages were taken by position although each names its call's id."""
    from toolcall_lab.importers import import_swe_agent

    history = [
        {"role": "system", "content": "You are SWE-agent."},
        {"role": "user", "content": "fix it"},
        {
            "role": "assistant",
            "content": "look",
            "action": "ls\ncat a.py",
            "tool_calls": [
                _fn("call_ls", "bash", {"command": "ls"}),
                _fn("call_cat", "bash", {"command": "cat a.py"}),
            ],
        },
        {"role": "tool", "tool_call_ids": ["call_cat"], "content": "print(1)"},
        {"role": "tool", "tool_call_ids": ["call_ls"], "content": "a.py"},
        {
            "role": "assistant",
            "content": "done",
            "action": "submit",
            "tool_calls": [_fn("call_s", "submit", {})],
        },
        {"role": "tool", "tool_call_ids": ["call_s"], "content": "submitted"},
    ]
    doc = {
        "history": history,
        "trajectory": [
            {"action": "ls\ncat a.py", "execution_time": 0.5},
            {"action": "submit", "execution_time": 0.1},
        ],
        "info": {"exit_status": "submitted"},
    }
    path = tmp_path / "run.traj"
    path.write_text(json.dumps(doc))
    execs = [e for t in import_swe_agent(path) for r in t.rounds for e in r.executions]
    assert [(e.tool_call_id, e.result) for e in execs][:2] == [("call_ls", "a.py"), ("call_cat", "print(1)")]


def test_a_recorded_exchange_answers_two_calls_sharing_an_id_in_order(tmp_path) -> None:
    from toolcall_lab.importers import import_recording

    calls = [_fn("call_x", "weather", {"city": "Paris"}), _fn("call_x", "weather", {"city": "Rome"})]
    asked = {"role": "assistant", "content": None, "tool_calls": calls}

    def exchange(messages: list[dict], message: dict) -> dict:
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                }
            ],
        }
        return {
            "request": {
                "method": "POST",
                "url": "https://api.openai.com/v1/chat/completions",
                "headers": {},
                "body": {"model": "gpt-4o", "messages": messages},
            },
            "response": {"status_code": 200, "headers": {}, "body": body},
        }

    user = {"role": "user", "content": "Paris and Rome?"}
    answers = [
        {"role": "tool", "tool_call_id": "call_x", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_x", "content": "rainy"},
    ]
    path = tmp_path / "exchanges.json"
    path.write_text(
        json.dumps(
            [
                exchange([user], asked),
                exchange([user, asked, *answers], {"role": "assistant", "content": "Sunny, rainy."}),
            ]
        )
    )
    execs = [e for t in import_recording(path) for r in t.rounds for e in r.executions]
    assert [e.result for e in execs] == ["sunny", "rainy"]


def test_langfuse_a_call_without_telling_tool_does_not_take_the_one_another_call_s_arguments_tie(
    tmp_path,
) -> None:
    from toolcall_lab.importers import import_langfuse

    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [_fn("c1", "weather", {"city": "Paris"}), _fn("c2", "weather", {"city": "Rome"})],
    }

    def obs(oid: str, kind: str, a: float, b: float, **more: Any) -> dict:
        return {"id": oid, "type": kind, "startTime": _lf_stamp(a), "endTime": _lf_stamp(b), **more}

    observations = [
        obs(
            "g1",
            "GENERATION",
            0,
            1,
            name="chat",
            output=message,
            input=[{"role": "user", "content": "Paris, Rome?"}],
        ),
        obs("t_rome", "TOOL", 1.1, 2.1, name="weather", input={"city": "Rome"}, output="rainy"),
        obs("t_paris", "TOOL", 2.2, 5.2, name="weather", input=None, output="sunny"),
        obs("g2", "GENERATION", 6, 7, name="chat", output={"role": "assistant", "content": "Sunny, rainy."}),
    ]
    path = tmp_path / "lf.json"
    path.write_text(json.dumps({"trace": {"id": "t", "name": "w"}, "observations": observations}))
    execs = [e for t in import_langfuse(path) for r in t.rounds for e in r.executions]
    assert [(e.tool_call_id, e.result, round(e.duration_s, 3)) for e in execs] == [
        ("c1", "sunny", 3.0),
        ("c2", "rainy", 1.0),
    ]


# --- finding 9: the recorded wall time follows the trust decisions of the times it rests on --------


def test_a_rejected_tool_span_does_not_stretch_the_recorded_wall_time(tmp_path) -> None:
    """t13: a tool span lasting 30 days became a placeholder, yet metadata.recorded_wall_s was
    2592002.05 s (notebook 04's 'recorded wall s' column reads it)."""
    from toolcall_lab.importers import import_otlp

    out1 = [{"role": "assistant", "parts": [_part_call("call_1", "get_weather", {"city": "Paris"})]}]
    answer = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "18C"}]}
    spans = [
        _genai_chat("c1", 0.1, 2.1, [USER], out1),
        _genai_tool("d1", 2.15, 2.15 + 30 * 86400, "get_weather", "call_1", {"city": "Paris"}, "18C"),
        _genai_chat(
            "c2",
            3.2,
            5.9,
            [USER, *out1, answer],
            [{"role": "assistant", "parts": [{"type": "text", "content": "18C."}]}],
        ),
    ]
    (trace,) = import_otlp(_otlp_export(tmp_path, spans))
    assert trace.rounds[0].executions[0].timing.source == "placeholder"
    assert trace.metadata.recorded_wall_s == pytest.approx(5.8)


def test_a_rejected_last_timestamp_leaves_no_recorded_wall_time(tmp_path) -> None:
    """t13 cc_lastyear: the last line dated a year later made its latency a placeholder ('not
    usable'), yet recorded_wall_s was 31536032.971 s. The run's last end is not trusted: no wall."""
    log = _reused_id_log()
    log.lines[-1]["timestamp"] = "2026-09-03T00:47:29.000Z"
    result = import_claude_code(log.write(tmp_path / "late.jsonl"))
    (trace,) = result
    assert trace.rounds[-1].model_call.timing.source == "placeholder"
    assert trace.metadata.recorded_wall_s is None
    assert any("no recorded wall time: the run's last end" in i.what for i in result.report.issues)


# --- finding 14a: a zone-less timestamp among zoned ones ---------------------------------------------


def test_one_zone_less_timestamp_among_zoned_ones_is_not_said_to_be_harmless(tmp_path) -> None:
    """t13 cc_nozone: one line without a zone among 'Z' lines got the note 'read as UTC; durations
    are right whatever zone the recorder was in': untrue, a duration across the two kinds is off by
    the recorder's offset."""
    log = _reused_id_log()
    log.lines[2]["timestamp"] = log.lines[2]["timestamp"].removesuffix("Z")
    result = import_claude_code(log.write(tmp_path / "mixed.jsonl"))
    (damage,) = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert damage.startswith("some of the source's timestamps have a time zone and some do not: 1 of 8")
    assert (
        "durations are right" not in result[0].metadata.notes
        and "off by the recorder's UTC offset" in result[0].metadata.notes
    )

    for line in log.lines:
        line["timestamp"] = line["timestamp"].removesuffix("Z")
    result = import_claude_code(log.write(tmp_path / "local.jsonl"))
    assert result.report.clean and "durations are right whatever zone" in result[0].metadata.notes


# --- finding 16: derived times read as the microseconds they are -------------------------------------


def test_derived_times_of_an_import_are_exact_in_the_trace_file(tmp_path) -> None:
    """t13: trace files held latency_s=5.103000000000001 and durationMs 6 as 0.006000000000000227,
    though the README promised times exact to the microsecond."""
    from toolcall_lab.importers import write_result
    from toolcall_lab.trace_files import load

    log = Log()
    log.user(7.242678, "list it")
    log.calls(12.345678, "msg_01", "toolu_1", "Glob", {"pattern": "*.py"})
    log.result(12.38, "toolu_1", "a.py", toolUseResult={"filenames": ["a.py"], "durationMs": 6})
    log.says(14.0, "msg_02", "One file.")
    (path,) = write_result(import_claude_code(log.write(tmp_path / "s.jsonl")), tmp_path / "o")
    text = path.read_text()
    assert '"latency_s": 5.103,' in text and '"duration_s": 0.006,' in text
    assert "00000000000" not in text and "99999999999" not in text
    trace = load(path)
    assert trace.rounds[0].model_call.latency_s == 5.103 and trace.rounds[0].executions[0].duration_s == 0.006


# --- finding 8: how a batch ran rests only on calls that ran, with a start and an end in the log ----


def _batch_log(first_text: str, extra: dict | None = None) -> Log:
    """Two calls of one response; the second's result carries Claude Code's own duration when
    `extra` gives one."""
    log = Log()
    log.user(0, "look")
    log.calls(2.0, "msg_01", "toolu_a", "Read", {"file_path": "/a"})
    log.calls(2.1, "msg_01", "toolu_b", "Read", {"file_path": "/b"})
    log.result(2.14, "toolu_a", first_text, error=first_text.startswith("InputValidationError"))
    log.result(2.2, "toolu_b", "B", **({"toolUseResult": extra} if extra else {}))
    log.says(4, "msg_02", "done")
    return log


def test_calls_whose_start_the_log_does_not_give_are_no_evidence_of_how_a_batch_ran(tmp_path) -> None:
    """t13: a Read+Read batch whose starts were both assumed (the end of the response) counted as
    'overlapped' and made the trace parallel, though one after the other would give the same log."""
    from toolcall_lab.analysis import recorded_batch

    (trace,) = import_claude_code(_batch_log("A").write(tmp_path / "reads.jsonl"))
    batch = trace.rounds[0]
    assert recorded_batch(batch) == "not evidenced" and trace.metadata.mode is None
    from toolcall_lab.records import NOT_BATCH_EVIDENCE

    assert all(NOT_BATCH_EVIDENCE in e.timing.note for e in batch.executions)
    assert "start is not in the log" in batch.executions[0].timing.note


def test_a_call_claude_code_rejected_before_it_ran_is_no_evidence(tmp_path) -> None:
    """t13: 5c0375b4's Task+Task batch, its first Task rejected at once (InputValidationError, 37 ms
    after the response ended), was notebook 04's only 'one after another' batch and made the trace
    sequential."""
    from toolcall_lab.analysis import recorded_batch

    log = _batch_log("InputValidationError: [prompt: Required]", {"durationMs": 40})
    (trace,) = import_claude_code(log.write(tmp_path / "rejected.jsonl"))
    first, second = trace.rounds[0].executions
    assert "no tool ran" in first.timing.note and second.timing.source == "recorded"
    assert recorded_batch(trace.rounds[0]) == "not evidenced" and trace.metadata.mode is None


@needs_realdata
def test_the_real_batches_the_tester_named_are_not_evidence() -> None:
    from toolcall_lab.analysis import recorded_batch

    cc = import_claude_code(REALDATA / "claude-code-viewer")
    (main,) = [t for t in cc if "5c0375b4" in t.metadata.title and t.metadata.title.endswith("main turn 1")]
    tasks = next(r for r in main.rounds if [e.name for e in r.executions][:2] == ["Task", "Task"])
    assert recorded_batch(tasks) == "not evidenced" and main.metadata.mode is None
    v2 = import_claude_code(REALDATA / "claude-reliability")
    reads = next(r for r in v2[0].rounds if [e.name for e in r.executions] == ["Read", "Read"])
    assert recorded_batch(reads) == "not evidenced" and v2[0].metadata.mode is None

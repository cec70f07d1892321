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

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab import cli
from toolcall_lab.importers import import_claude_code
from toolcall_lab.replay import replay

# --- a Claude Code transcript builder (our own bytes) -----------------------------------------------

T0 = datetime(2025, 9, 3, 0, 47, 19, tzinfo=UTC)


class Log:
    """Claude Code lines, each following the one before (``parentUuid``) unless told otherwise."""

    def __init__(self, session: str = "0d3a4c1e-0000-4000-8000-000000000007", version: str = "1.0.98") -> None:
        self.lines: list[dict[str, Any]] = []
        self.base = {"sessionId": session, "cwd": "/w", "version": version, "userType": "external"}

    def _add(self, kind: str, t: float, message: dict[str, Any], parent: str | None, **extra: Any) -> str:
        uuid = f"00000000-0000-4000-8000-{len(self.lines) + 1:012d}"
        if parent == "last":
            parent = self.lines[-1]["uuid"] if self.lines else None
        stamp = (T0 + timedelta(seconds=t)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self.lines.append(
            {**self.base, "type": kind, "uuid": uuid, "parentUuid": parent, "timestamp": stamp,
             "isSidechain": False, "message": message, **extra}
        )
        return uuid

    def user(self, t: float, text: str, parent: str | None = "last", **extra: Any) -> str:
        return self._add("user", t, {"role": "user", "content": text}, parent, **extra)

    def says(self, t: float, mid: str, text: str, parent: str | None = "last", **extra: Any) -> str:
        block = {"type": "text", "text": text}
        return self._add("assistant", t, _assistant(mid, block), parent, **extra)

    def calls(
        self, t: float, mid: str, tid: str, name: str, args: dict[str, Any], parent: str | None = "last",
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
    return {"id": mid, "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514",
            "content": [block], "usage": {"input_tokens": 3, "output_tokens": 20}}


def _results(result) -> list[tuple[str, str, str]]:
    return [(e.tool_call_id, json.loads(e.arguments).get("command", e.name), e.result)
            for t in result for r in t.rounds for e in r.executions]


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
        ("toolu_same", "ls", "a.txt"), ("toolu_same", "cat a.txt", "hello"), ("toolu_same", "wc -c a.txt", "5 a.txt")
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
    by_file = {json.loads(e.arguments)["file_path"]: e.result for t in result for r in t.rounds for e in r.executions}
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
    real = REALDATA / "claude-code-viewer/claude-code_v1.0.98_sonnet-4_session-1af7fc5e_7calls_parallel5+3.jsonl"
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
    task = log.calls(2, "msg_01", "toolu_task", "Task", {"description": "Find config", "prompt": "Find config files"})
    log.result(
        9, "toolu_task", "Config is in /repo/setup.cfg", parent=task, sourceToolAssistantUUID=task,
        toolUseResult={"status": "completed", "agentId": "a1111111", "totalDurationMs": 6900,
                       "totalToolUseCount": 2, "totalTokens": 1000},
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
    assert gap.calls == 2 and "sub-agent a1111111" in gap.what and "subagents/agent-a1111111.jsonl" in gap.what
    assert cli.main(["import", "claude-code", str(alone), "--out", str(tmp_path / "o")]) == 0
    assert "tool calls:  3 in the source, 1 imported" in capsys.readouterr().out

    whole = import_claude_code(_session_with_a_subagent(tmp_path / "whole", with_agent_file=True))
    assert (whole.report.source_calls, whole.report.imported_calls) == (3, 3)
    assert not [i for i in whole.report.issues if i.kind == "gap"]


# --- finding 17: the import says what it removed ----------------------------------------------------


def test_the_import_summary_says_which_credentials_it_removed(tmp_path, capsys) -> None:
    """Redactions were only in each trace's metadata; the import printed nothing about them."""
    log = Log()
    log.user(0, "call the api")
    log.calls(2, "msg_01", "toolu_1", "Bash", {"command": 'curl -H "x-api-key: abcd1234secretvalue9876" https://x'})
    log.result(3, "toolu_1", "ok")
    log.says(5, "msg_02", "Done.")
    source = log.write(tmp_path / "secret.jsonl")
    assert cli.main(["import", "claude-code", str(source), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "credentials removed (" in out and "the value of x-api-key" in out
    assert "credentials removed (" in (tmp_path / "o" / "import_report.txt").read_text()
    assert "abcd1234secretvalue9876" not in "".join(p.read_text() for p in (tmp_path / "o").glob("*.json"))

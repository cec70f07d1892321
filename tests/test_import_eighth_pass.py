"""Issue 13, eighth pass: what the second t13 tester found (t13b). A result crossed to another call
although the source's own next request said which result answered which call; phantom model calls
from a line without its message id; a turn split by a result line without its parent; `save`
changing the caller's trace; figures that are not tool execution passing as recorded execution;
credentials a shell command gives; counts that do not say what they cover. Every fixture is written
here (our own bytes); the tests over ``../shared/realdata`` damage copies in ``tmp_path``."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab.importers import import_recording, import_source, looks_like
from toolcall_lab.redaction import redact, scrub_text, secret_warnings
from toolcall_lab.replay import replay
from toolcall_lab.trace import Trace
from toolcall_lab.trace_files import load, save, validate

# --- finding 4: save never changes its input; a streamed secret leaves each chunk in place ------------

KEY = "sk-ant-api03-" + "Q" * 40 + "AA"


def _sse(calls: list[tuple[str, str, str]], cuts: list[list[int]]) -> str:
    """A chat-completion stream: each call's header, then its arguments in the pieces `cuts` makes
    (the positions where a new chunk starts), then the finish."""
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": None})]
    for i, ((cid, name, args), at) in enumerate(zip(calls, cuts, strict=True)):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": cid,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        bounds = [0, *sorted(set(at) - {0, len(args)}), len(args)]
        for a, b in itertools.pairwise(bounds):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[a:b]}}]}))
    out.append(chunk({}, "tool_calls"))
    return "".join(f"data: {json.dumps(c)}\n\n" for c in out) + "data: [DONE]\n\n"


def _fragments(trace: Trace, round_index: int = 0) -> dict[int, list[str]]:
    """Each call's argument fragments, chunk by chunk ('' where a chunk holds none of it)."""
    out: dict[int, list[str]] = {}
    for c in trace.rounds[round_index].model_call.chunks:
        for choice in c.payload.get("choices") or []:
            calls = (choice.get("delta") or {}).get("tool_calls") or []
            seen = {call.get("index"): call for call in calls}
            for i in range(len(trace.rounds[round_index].tool_calls)):
                fn = (seen.get(i) or {}).get("function") or {}
                out.setdefault(i, []).append(fn.get("arguments") or "")
    return out


def _complete_at(pieces: list[str]) -> int | None:
    """The chunk at which the accumulated arguments first parse as a JSON object (eager starts then)."""
    text = ""
    for k, piece in enumerate(pieces):
        text += piece
        try:
            if isinstance(json.loads(text), dict):
                return k
        except json.JSONDecodeError:
            continue
    return None


def _import(tmp: Path, calls: list[tuple[str, str, str]], cuts: list[list[int]]) -> Trace:
    path = tmp / "k.sse"
    path.write_text(_sse(calls, cuts))
    return import_recording(path)[0]


def test_save_never_changes_the_trace_it_is_given(tmp_path) -> None:
    """The tester's /tmp/t13b_k.py: after `save`, the in-memory chunks held the redacted text moved
    into chunk 0 while the calls still held the key, and every later replay failed
    (StartedOnSnapshotError), printing the key."""
    args = json.dumps({"cmd": f"export ANTHROPIC_API_KEY={KEY}"})
    trace = _import(tmp_path, [("call_A", "shell", args)], [list(range(0, len(args), 7))])
    before = copy.deepcopy(trace.to_dict())
    assert replay(trace, "sequential").status == "incomplete"
    save(trace, tmp_path / "k.json")
    assert trace.to_dict() == before
    assert replay(trace, "sequential").status == "incomplete"
    for mode in ("parallel", "eager", "first_only"):
        replay(trace, mode)  # (raised StartedOnSnapshotError before)


def test_a_streamed_secret_is_taken_out_of_each_chunk_in_place(tmp_path) -> None:
    """The chunks of the saved trace join to the arguments it stores, every chunk keeps its offset,
    and each call's arguments complete at the chunk they did: eager starts call_A when it did
    (0.535 s in the tester's split_key2.sse, 0.2 s after the old redaction)."""
    a = json.dumps({"cmd": f"export ANTHROPIC_API_KEY={KEY}"})
    b = json.dumps({"cmd": "ls -la"})
    trace = _import(
        tmp_path, [("call_A", "shell", a), ("call_B", "shell", b)], [list(range(0, len(a), 7)), [3, 8]]
    )
    save(trace, tmp_path / "k.json")
    saved = load(tmp_path / "k.json")
    assert KEY[:20] not in (tmp_path / "k.json").read_text()
    got, was = _fragments(saved), _fragments(trace)
    for i, call in enumerate(saved.rounds[0].tool_calls):
        assert "".join(got[i]) == call.arguments == saved.rounds[0].executions[i].arguments
        assert _complete_at(got[i]) == _complete_at(was[i])
    assert "[REDACTED: an Anthropic key]" in saved.rounds[0].tool_calls[0].arguments
    assert [c.offset_s for c in saved.rounds[0].model_call.chunks] == [
        c.offset_s for c in trace.rounds[0].model_call.chunks
    ]
    starts = [[e.started_at for e in r.executions] for r in replay(trace, "eager").rounds]
    assert [[e.started_at for e in r.executions] for r in replay(saved, "eager").rounds] == starts


_SECRET_ARGS = st.sampled_from(
    [
        lambda s: {"cmd": f"export ANTHROPIC_API_KEY=sk-ant-api03-{s}{s}"},
        lambda s: {"cmd": f"curl -u admin:{s}! https://db && echo ok"},
        lambda s: {"api_key": s + "x9", "q": "weather"},
        lambda s: {"url": f"postgres://app:{s}9@db:5432/x", "n": 3},
        lambda s: {"text": f"token ghp_{s}{s}{s} and more"},
    ]
)


@settings(max_examples=120, deadline=None)
@given(make=_SECRET_ARGS, secret=st.from_regex(r"[A-Za-z][A-Za-z0-9]{11,15}", fullmatch=True), data=st.data())
def test_redacting_a_stream_keeps_it_self_consistent_for_any_chunking(make, secret, data) -> None:
    """Property: whatever the chunk boundaries, saving leaves the trace it was given unchanged, the
    saved chunks join to the stored arguments, hold no piece of the secret, keep their offsets, and
    complete each call's arguments at the same chunk."""
    args = json.dumps(make(secret))
    other = json.dumps({"q": "plain"})
    cuts = [data.draw(st.lists(st.integers(1, len(t) - 1), max_size=12)) for t in (args, other)]
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        trace = _import(tmp, [("call_A", "f", args), ("call_B", "f", other)], cuts)
        before = copy.deepcopy(trace.to_dict())
        text = save(trace, tmp / "k.json").read_text()
        assert trace.to_dict() == before
        saved = load(tmp / "k.json")
    assert secret not in text
    got, was = _fragments(saved), _fragments(trace)
    for i, call in enumerate(saved.rounds[0].tool_calls):
        assert "".join(got[i]) == call.arguments
        assert len(got[i]) == len(was[i]) and _complete_at(got[i]) == _complete_at(was[i])
    assert [c.offset_s for c in saved.rounds[0].model_call.chunks] == [
        c.offset_s for c in trace.rounds[0].model_call.chunks
    ]


def _every_shape() -> list[Trace]:
    """A trace of every shape the project makes: scripted scenarios, replays, the frozen fixtures,
    and every real recording imported (when ../shared/realdata is there)."""
    from toolcall_lab.scenarios import SCENARIOS

    out = [s.record() for s in SCENARIOS.values()]
    out += [
        load(p)
        for p in sorted((Path(__file__).parent / "fixtures" / "traces").glob("*.json"))
        if p.name[0] != "." and _loads(p)
    ]
    if (REALDATA / "PROVENANCE.md").is_file():
        for f in sorted(p for p in REALDATA.rglob("*") if p.is_file() and p.suffix != ".md"):
            kind = "tau-bench" if f.parent.name == "tau-bench" else looks_like(f)
            if kind not in (None, "bfcl answers"):
                try:
                    out += list(
                        import_source(kind, f, **({"limit": 5} if kind in ("tau-bench", "bfcl") else {}))
                    )
                except Exception:  # (a source the importer refuses: another test's business)
                    continue
    return out


def _loads(p: Path) -> bool:
    try:
        load(p)
    except Exception:  # (the negative fixtures)
        return False
    return True


def test_save_and_record_change_no_trace_of_any_shape(tmp_path) -> None:
    """Deep equality before and after `save`, and after `recorded_trace` over a replay of it (the
    run's rounds share the trace's payloads), for every shape of trace."""
    from toolcall_lab.models import ScriptedModel
    from toolcall_lab.record import recorded_trace

    traces = _every_shape()
    assert len(traces) > 20
    for n, trace in enumerate(traces):
        before = copy.deepcopy(trace.to_dict())
        save(trace, tmp_path / f"{n}.json")
        assert trace.to_dict() == before, trace.metadata.title
        try:
            run = replay(trace, "sequential", check="off")
        except Exception:  # (a trace that cannot replay: save alone is checked)
            continue
        run_before = copy.deepcopy([r.to_dict() for r in run.rounds])
        recorded_trace(run, ScriptedModel(["x"]), title="again")
        assert [r.to_dict() for r in run.rounds] == run_before and trace.to_dict() == before


def test_record_never_changes_the_run_it_records() -> None:
    from toolcall_lab.models import ScriptedModel, ScriptedResponse
    from toolcall_lab.record import record

    def shell(cmd: str) -> str:
        return f"ran {cmd}"

    model = ScriptedModel([ScriptedResponse(tool_calls=(("shell", {"cmd": f"curl -u a:{KEY}"}),)), "done"])
    trace = asyncio.run(record(model, [shell], "go", title="t"))
    assert KEY not in json.dumps(trace.to_dict())


# --- findings 10 and 11: shell credentials; validate names every kind and echoes none -----------------

COMMANDS = [  # (a command a tool ran, the secret in it)
    ("curl -u admin:Sup3rS3cret! https://db.internal/x", "Sup3rS3cret!"),
    ("mysql -u root -pHunter2Pass db", "Hunter2Pass"),
    ("mysqldump -uroot -p'Hunter 2' shop > shop.sql", "Hunter 2"),
    ("curl --user 'bob:s3cr3t pw' https://x", "s3cr3t pw"),
    ("wget --user=bob --password=W9xq8rTz http://x", "W9xq8rTz"),
    ("PGPASSWORD=Pq7sZ2x psql -h db -U app", "Pq7sZ2x"),
    ("git clone https://oauth2:gl0ab3c4d5@gitlab.example.com/g/r.git", "gl0ab3c4d5"),
    ("deploy --api-key Zk29fj3kd9 --region eu", "Zk29fj3kd9"),
    ("sshpass -p Tr0ub4dor ssh deploy@host", "Tr0ub4dor"),
    ("openssl enc -aes256 -pass pass:K3yPhr4se -in a", "K3yPhr4se"),
]
ORDINARY_COMMANDS = [
    "docker run -u 1000:1000 image",
    "sort -u a:b",
    "git push -u origin main",
    "mysql -p shop",
    "mysql --password --host db",
    "mysql -P 3306 -h db",
    "ssh -p 2222 host",
    "curl -u $USER:$PASS https://x",
    "app --password-file=/run/secrets/pw",
    "app --password=<your password>",
    "--token $GITHUB_TOKEN",
    "pip install -U requests",
    "python -m pytest -p no:cacheprovider",
    "curl http://localhost:8080/a:b",
    "MAX_TOKENS=1024 run",
    "tar -cvpf x.tar dir",
    "grep -rn password src/",
    "see --help for the --token flag",
]


@pytest.mark.parametrize(("command", "secret"), COMMANDS)
def test_credentials_a_command_line_gives_are_removed(command, secret) -> None:
    """The tester's d_secret2.json: `curl -u admin:Sup3rS3cret!` and `mysql -pHunter2Pass` survived
    `save`, and validate said nothing."""
    cleaned, found = scrub_text(command)
    assert secret not in cleaned and found
    assert cleaned.count("[REDACTED: ") == 1
    args = json.dumps({"command": command})
    redacted, notes = redact(args, "arguments")
    assert secret not in redacted and json.loads(redacted) and notes
    assert secret_warnings({"arguments": args})


@pytest.mark.parametrize("text", ORDINARY_COMMANDS)
def test_ordinary_command_lines_stay_as_they_are(text) -> None:
    assert scrub_text(text) == (text, [])
    assert secret_warnings({"result": text}) == []


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(
            [
                "run",
                "-u",
                "-p",
                "--user",
                "--pass",
                "1000:1000",
                "a:b",
                "main",
                "origin",
                "the",
                "port",
                "-P",
                "3306",
                "ls",
                "sort",
                "git",
                "docker",
                "push",
                "x",
                "--help",
                "&&",
                "|",
                "echo",
                "ok",
                ":",
                "@",
            ]
        ),
        max_size=12,
    ),
)
def test_ordinary_words_never_look_like_a_credential(words) -> None:
    """Negative property: flags, ids and words without a credential command before them
    (curl/wget/mysql/sshpass/openssl) or a credential option name are never touched."""
    text = " ".join(words)
    assert scrub_text(text) == (text, [])


def test_validate_names_every_kind_of_secret_in_a_field_and_never_echoes_one(tmp_path) -> None:
    """The tester: a result holding a ghp_ token, AKIAIOSFODNN7EXAMPLE and password=hunter2 got only
    the GitHub warning, and an 'unanswered tool call' warning printed the secrets."""
    from toolcall_lab.scenarios import SCENARIOS

    secrets = ["ghp_Z9y8x7w6v5u4t3s2r1q0p9o8n7m6l5k4j3i2", "AKIAIOSFODNN7EXAMPLE", "hunter2x"]
    text = f"ok; also found {secrets[1]} and {secrets[0]} password={secrets[2]}"
    warnings = secret_warnings({"result": text})
    assert len(warnings) == 1 and all(
        kind in warnings[0] for kind in ("a GitHub token", "an AWS access key id", "the value of password")
    )
    trace = SCENARIOS["one_tool_round"].record()
    doc = trace.to_dict()
    doc["rounds"][0]["tool_executions"][0]["result"] = text  # unsaved: validate reads the file as it is
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    _, found = validate(path)
    assert any("contradiction" in w and "the next request answers it with" in w for w in found)
    assert any("a GitHub token" in w and "an AWS access key id" in w for w in found)
    shown = "\n".join(found)
    assert not any(s in shown or s[:8] in shown for s in secrets)


# --- finding 5: one rounding rule for every derived time, on every path ------------------------------

from tests.test_import_seventh_pass import (  # noqa: E402 (helpers of the seventh pass's fixtures)
    USER,
    Log,
    _genai_chat,
    _genai_tool,
    _lf_export,
    _lf_stamp,
    _oh_episode,
    _oh_import,
    _otlp_export,
    _part_call,
    _session_with_a_subagent,
)


def _times(trace: Trace) -> list[float]:
    out: list[float] = []
    for r in trace.rounds:
        mc = r.model_call
        out += [mc.started_at, mc.ended_at, mc.latency_s, *(c.offset_s for c in mc.chunks)]
        out += [x for x in (mc.first_chunk_at, mc.ttfc_s) if x is not None]
        out += [x for e in r.executions for x in (e.started_at, e.ended_at, e.duration_s)]
    return out


def _to_the_microsecond(trace: Trace) -> bool:
    return all(round(x, 6) == x for x in _times(trace))


@needs_realdata
def test_one_untrusted_timestamp_adds_no_float_noise_to_the_other_numbers(tmp_path) -> None:
    """t13b: an OpenHands event stream with one timestamp out of order is scheduled by the loop, not
    placed, and every number came out with float noise (latency 2.751540184 for 2.75154, tool
    0.658356905), still labelled recorded."""
    from toolcall_lab.importers import import_openhands

    src = REALDATA / "OpenHands" / "openhands_claude-3-5-sonnet_basic_gui_mode_event_stream.json"
    events = json.loads(src.read_text())
    clean = import_openhands(src)[0]
    for e in events:
        if e.get("id") == 10:
            e["timestamp"] = "2025-01-20T20:29:40.000000"
    (tmp_path / "oh.json").write_text(json.dumps(events))
    damaged = import_openhands(tmp_path / "oh.json")[0]
    assert "schedules them" in damaged.metadata.notes  # (the other path: not placed as recorded)
    assert _to_the_microsecond(clean) and _to_the_microsecond(damaged)
    assert damaged.rounds[0].model_call.latency_s == clean.rounds[0].model_call.latency_s == 2.75154
    assert damaged.rounds[0].executions[0].duration_s == clean.rounds[0].executions[0].duration_s == 0.658357


def test_a_fallback_time_is_rounded_as_the_clean_path_rounds_it(tmp_path) -> None:
    """t13b: a Langfuse tool observation without endTime gave 1.900000095 s and a time to first
    token of 0.549999905 s."""
    from toolcall_lab.importers import import_langfuse

    path = _lf_export(tmp_path, _lf_stamp(9.111), _lf_stamp(12.0))
    doc = json.loads(path.read_text())
    for o in doc["observations"]:
        if o["id"] == "g2":
            o["completionStartTime"] = _lf_stamp(12.75)
        if o["id"] == "t1":
            del o["endTime"]
    path.write_text(json.dumps(doc))
    (trace,) = import_langfuse(path)
    assert _to_the_microsecond(trace)
    assert trace.rounds[1].model_call.ttfc_s == 0.55


def test_a_source_figure_with_more_digits_is_kept_to_the_microsecond_everywhere(tmp_path) -> None:
    """t13b #19: SWE-agent's execution_time (0.238733730999229) put float noise in every start
    (1.038733730999229)."""
    from toolcall_lab.importers import import_swe_agent

    if not (REALDATA / "SWE-agent").is_dir():
        pytest.skip("real recordings not found")
    (trace,) = import_swe_agent(REALDATA / "SWE-agent")
    assert _to_the_microsecond(trace)
    assert trace.rounds[1].executions[0].started_at == 1.838734


# --- finding 6: a time that is not execution never passes as recorded execution ---------------------


def _declined_log() -> Log:
    log = Log()
    log.user(0, "tidy up")
    log.calls(2, "msg_01", "toolu_1", "Bash", {"command": "ls"})
    log.result(2.3, "toolu_1", "a.txt")
    log.calls(4, "msg_02", "toolu_2", "Edit", {"file_path": "/w/a.txt", "old_string": "a", "new_string": "b"})
    log.result(
        12,
        "toolu_2",
        "The user doesn't want to proceed with this tool use. The tool use was rejected.",
        error=True,
    )
    log.says(14, "msg_03", "Understood, I left it.")
    return log


def test_a_declined_call_s_time_is_a_wait_and_a_start_assumed_is_an_upper_bound(tmp_path) -> None:
    """t13b craft/E: "Edit … d=8.0 [recorded] … no tool ran, the time is the wait", and
    compare(..., timings='recorded') kept it with tool_time_s 8.0, measured_share 1.0."""
    from toolcall_lab.analysis import compare
    from toolcall_lab.importers import import_claude_code

    (trace,) = import_claude_code(_declined_log().write(tmp_path / "s.jsonl"))
    bash, edit = trace.rounds[0].executions[0], trace.rounds[1].executions[0]
    assert (bash.timing.source, bash.timing.covers) == ("recorded", "upper_bound")
    assert (edit.timing.source, edit.timing.covers, edit.duration_s) == ("recorded", "wait", 8.0)
    table = compare([trace], ["sequential"], timings="recorded")
    assert table.runs.empty and "a wait, no tool ran, not execution" in table.excluded["reason"].iloc[0]
    runs = compare([trace], ["sequential"]).runs
    assert runs["not_execution_s"].iloc[0] == pytest.approx(8.3)
    assert runs["measured_share"].iloc[0] < 0.5
    calls = compare([trace], ["sequential"]).calls
    assert list(calls["covers"]) == ["upper_bound", "wait"]
    # the file says so (schema 3), and a view says so
    path = save(trace, tmp_path / "t.json")
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 3
    assert doc["rounds"][1]["tool_executions"][0]["timing"]["covers"] == "wait"
    assert load(path).rounds[1].executions[0].timing.covers == "wait"
    html = trace._repr_mimebundle_()["text/html"]
    assert "time: a wait, no tool ran" in html and "recorded (a wait, no tool ran)" in html


def test_an_otlp_gap_is_an_upper_bound(tmp_path) -> None:
    from toolcall_lab.analysis import compare
    from toolcall_lab.importers import import_otlp

    out1 = [{"role": "assistant", "parts": [_part_call("call_1", "get_weather", {"city": "Paris"})]}]
    answer = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "18C"}]}
    spans = [
        _genai_chat("c1", 0.1, 2.1, [USER], out1),
        _genai_chat(
            "c2",
            3.2,
            5.9,
            [USER, *out1, answer],
            [{"role": "assistant", "parts": [{"type": "text", "content": "18C."}]}],
        ),
    ]
    (trace,) = import_otlp(_otlp_export(tmp_path, spans))
    gap = trace.rounds[0].executions[0]
    assert (gap.timing.source, gap.timing.covers, gap.duration_s) == ("recorded", "upper_bound", 1.1)
    assert compare([trace], ["sequential"], timings="measured").runs.empty


def test_files_without_what_only_version_3_holds_are_written_and_read_as_before() -> None:
    """Old files load unchanged: every figure of a version 2 file covers the thing itself, and the
    trace it loads to gives back that file field for field (only the schema version differs: saving
    writes version 3, where requests are deltas and `covers` / `parent` may appear)."""
    fixtures = sorted((Path(__file__).parent / "fixtures" / "traces").glob("*.json"))
    checked = 0
    for p in fixtures:
        if not _loads(p) or json.loads(p.read_text()).get("schema_version") != 2:
            continue
        trace = load(p)
        assert trace.schema_version == 3 and "parent" not in trace.to_dict()["metadata"]
        assert all(e.timing.covers == "execution" for r in trace.rounds for e in r.executions)
        if {**trace.to_dict(), "schema_version": 2} == json.loads(p.read_text()):
            checked += 1
    assert checked >= 2


# --- finding 1: which result answered which call: the source's own next request first --------------

TWO_CITIES = [
    {
        "role": "assistant",
        "parts": [
            _part_call("call_p", "get_weather", {"city": "Paris"}),
            _part_call("call_r", "get_weather", {"city": "Rome"}),
        ],
    }
]


def _answer(cid: str, text: str) -> dict:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": cid, "response": text}]}


def _weather_export(
    tmp_path: Path,
    paris_id: str,
    rome_id: str,
    *,
    next_request: bool = True,
    answers: tuple[str, str] = ("18C sunny", "22C cloudy"),
) -> Any:
    """Paris ran 1.3 s and returned 18C sunny, Rome 2.0 s and 22C cloudy; each tool span names the
    call id given (crossed or repeated ids are the damage)."""
    from toolcall_lab.importers import import_otlp

    spans = [
        _genai_chat("c1", 0.1, 1.6, [USER], TWO_CITIES),
        _genai_tool("d1", 1.65, 2.95, "get_weather", paris_id, {"city": "Paris"}, "18C sunny"),
        _genai_tool("d2", 1.66, 3.66, "get_weather", rome_id, {"city": "Rome"}, "22C cloudy"),
    ]
    if next_request:
        request = [USER, *TWO_CITIES, _answer("call_p", answers[0]), _answer("call_r", answers[1])]
        spans.append(
            _genai_chat(
                "c2",
                3.7,
                5.9,
                request,
                [{"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}],
            )
        )
    return import_otlp(_otlp_export(tmp_path, spans))


def _weather(result: Any) -> list[tuple[str, str, str, float]]:
    return [
        (e.tool_call_id, json.loads(e.arguments)["city"], e.result, e.duration_s)
        for t in result
        for r in t.rounds
        for e in r.executions
    ]


def test_crossed_span_ids_are_matched_by_what_the_next_request_sent_back(tmp_path) -> None:
    """t13b d_tool_ids_crossed.json: the two tool spans' call ids swapped; call_p (Paris) got Rome's
    22C cloudy and 2.0 s, exit 0, no DAMAGED, although the next chat span's input said call_p was
    answered 18C sunny."""
    result = _weather_export(tmp_path, "call_r", "call_p")
    assert _weather(result) == [("call_p", "Paris", "18C sunny", 1.3), ("call_r", "Rome", "22C cloudy", 2.0)]
    damaged = {i.where.split(" span ")[-1]: i.what for i in result.report.issues if i.kind == "damaged"}
    assert set(damaged) == {"d1 (execute_tool get_weather)", "d2 (execute_tool get_weather)"}
    assert "it names call call_r" in damaged["d1 (execute_tool get_weather)"]
    assert (
        "imported as the get_weather call call_p (matched by name and arguments"
        in (damaged["d1 (execute_tool get_weather)"])
    )
    assert "its arguments and the next model request agree" in damaged["d1 (execute_tool get_weather)"]
    assert not result.report.clean


def test_two_spans_claiming_one_call_id_are_told_apart_by_the_next_request(tmp_path) -> None:
    """t13b d_tool_id_swapped.json: both spans said call_r; the importer kept the copy whose
    arguments said Paris for Rome's call and reported only 'another span … dropped as a duplicate',
    not naming the copy used."""
    result = _weather_export(tmp_path, "call_r", "call_r")
    assert _weather(result) == [("call_p", "Paris", "18C sunny", 1.3), ("call_r", "Rome", "22C cloudy", 2.0)]
    (damage,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert damage.where.endswith("span d1 (execute_tool get_weather)")
    assert "it names call call_r" in damage.what and "imported as the get_weather call call_p" in damage.what
    assert not any("duplicate" in i.what for i in result.report.issues)


def test_without_a_next_request_an_id_its_arguments_contradict_is_reported(tmp_path) -> None:
    """No next model call (the recording ends): the span ids decide, and a span whose arguments are
    another call's is DAMAGED, naming the span and what was used."""
    result = _weather_export(tmp_path, "call_r", "call_p", next_request=False)
    assert _weather(result) == [("call_p", "Paris", "22C cloudy", 2.0), ("call_r", "Rome", "18C sunny", 1.3)]
    damaged = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert len(damaged) == 2
    assert all(
        "its arguments (gen_ai.tool.call.arguments) are call" in d
        and "matched by call id" in d
        and "its result is the span's" in d
        for d in damaged
    )


def test_a_span_result_the_model_was_not_sent_is_reported_and_the_sent_one_kept(tmp_path) -> None:
    result = _weather_export(tmp_path, "call_p", "call_r", answers=("18 C, sunny", "22C cloudy"))
    assert _weather(result)[0] == ("call_p", "Paris", "18 C, sunny", 1.3)
    (damage,) = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert "the next model request sends back its result as no call's answer" in damage
    assert "the span's own '18C sunny' is not" in damage


# --- finding 16: a cut output falls back to the other evidence the export holds -----------------------


def _cut(span: dict) -> dict:
    for a in span["attributes"]:
        if a["key"] == "gen_ai.output.messages":
            a["value"]["stringValue"] = a["value"]["stringValue"][:60]
    return span


def test_a_cut_output_is_rebuilt_from_the_next_request(tmp_path) -> None:
    """t13b d_cut_output.json: gen_ai.output.messages cut by a length limit imported nothing (exit 2),
    though the next chat span's input held the assistant message and the tool spans ran it."""
    from toolcall_lab.importers import import_otlp

    request = [USER, *TWO_CITIES, _answer("call_p", "18C sunny"), _answer("call_r", "22C cloudy")]
    spans = [
        _cut(_genai_chat("c1", 0.1, 1.6, [USER], TWO_CITIES)),
        _genai_tool("d1", 1.65, 2.95, "get_weather", "call_p", {"city": "Paris"}, "18C sunny"),
        _genai_tool("d2", 1.66, 3.66, "get_weather", "call_r", {"city": "Rome"}, "22C cloudy"),
        _genai_chat(
            "c2", 3.7, 5.9, request, [{"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}]
        ),
    ]
    result = import_otlp(_otlp_export(tmp_path, spans))
    assert (result.report.source_calls, result.report.imported_calls) == (2, 2)
    assert _weather(result) == [("call_p", "Paris", "18C sunny", 1.3), ("call_r", "Rome", "22C cloudy", 2.0)]
    (damage,) = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert "gen_ai.output.messages is not valid JSON" in damage
    assert "rebuilt from the input messages of the next model span (c2)" in damage
    assert "rebuilt" in result[0].metadata.notes


def test_a_cut_output_without_a_next_request_is_rebuilt_from_the_tool_spans(tmp_path) -> None:
    from toolcall_lab.importers import import_otlp

    spans = [
        _cut(_genai_chat("c1", 0.1, 1.6, [USER], TWO_CITIES)),
        _genai_tool("d1", 1.65, 2.95, "get_weather", "call_p", {"city": "Paris"}, "18C sunny"),
        _genai_tool("d2", 1.66, 3.66, "get_weather", "call_r", {"city": "Rome"}, "22C cloudy"),
    ]
    result = import_otlp(_otlp_export(tmp_path, spans))
    assert _weather(result) == [("call_p", "Paris", "18C sunny", 1.3), ("call_r", "Rome", "22C cloudy", 2.0)]
    assert any("rebuilt from the 2 tool span(s) that ran after it" in i.what for i in result.report.issues)


# --- finding 12: token counts of the wrong type or negative are refused ------------------------------


def test_otlp_token_counts_that_are_not_counts_are_refused(tmp_path) -> None:
    from toolcall_lab.importers import import_otlp

    first = _genai_chat("c1", 0.1, 1.6, [USER], TWO_CITIES)
    first["attributes"] += [
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "-5"}},
        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "30"}},
    ]
    spans = [
        first,
        _genai_tool("d1", 1.65, 2.95, "get_weather", "call_p", {"city": "Paris"}, "18C sunny"),
        _genai_tool("d2", 1.66, 3.66, "get_weather", "call_r", {"city": "Rome"}, "22C cloudy"),
    ]
    result = import_otlp(_otlp_export(tmp_path, spans))
    assert result[0].rounds[0].model_call.usage == {"completion_tokens": 30}
    (damage,) = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert "token count gen_ai.usage.input_tokens -5 is negative" in damage


def _langgraph(tmp_path: Path, *, tools_span: bool = True, usage: dict | None = None) -> Path:
    """A LangGraph run as Langfuse exports it: agent spans with the model calls, a tools span with
    the two tools under the graph's root (our own bytes)."""

    def obs(oid: str, kind: str, name: str, parent: str | None, a: float, b: float, **more: Any) -> dict:
        return {
            "id": oid,
            "type": kind,
            "name": name,
            "parentObservationId": parent,
            "startTime": _lf_stamp(a),
            "endTime": _lf_stamp(b),
            **more,
        }

    calls = [
        {"id": "call_s", "type": "function", "function": {"name": "search", "arguments": '{"query": "a"}'}},
        {"id": "call_l", "type": "function", "function": {"name": "lookup", "arguments": '{"id": 7}'}},
    ]
    first = {"role": "assistant", "content": "", "tool_calls": calls}
    observations = [
        obs("root", "SPAN", "LangGraph", None, 0, 10),
        obs("a1", "SPAN", "agent", "root", 0.05, 2.1),
        obs(
            "g1",
            "GENERATION",
            "ChatOpenAI",
            "a1",
            0.1,
            2.0,
            output=first,
            usageDetails=usage or {"input": 40, "output": 20, "total": 60},
        ),
        *([obs("tools", "SPAN", "tools", "root", 2.2, 5.2)] if tools_span else []),
        obs("t1", "TOOL", "search", "tools", 2.25, 4.25, input={"query": "a"}, output="A"),
        obs("t2", "TOOL", "lookup", "tools", 2.26, 5.1, input={"id": 7}, output="B"),
        obs("a2", "SPAN", "agent", "root", 5.3, 9.0),
        obs(
            "g2",
            "GENERATION",
            "ChatOpenAI",
            "a2",
            5.35,
            8.9,
            output={"role": "assistant", "content": "A, B."},
        ),
    ]
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"trace": {"id": "lg", "name": "LangGraph"}, "observations": observations}))
    return path


def test_langfuse_token_counts_that_are_not_counts_are_refused(tmp_path) -> None:
    """t13b: usageDetails {"input": "40", "output": "x"} was kept as strings."""
    from toolcall_lab.importers import import_langfuse

    result = import_langfuse(_langgraph(tmp_path, usage={"input": "40", "output": "x", "total": -1}))
    usage = result[0].rounds[0].model_call.usage
    assert usage == {"prompt_tokens": 40, "completion_tokens": None, "total_tokens": None}
    damaged = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert any("usageDetails.output 'x' is a str, not a whole number" in d for d in damaged)
    assert any("usageDetails.total -1 is negative" in d for d in damaged)


# --- finding 15: a missing intermediate Langfuse span does not drop the tools under it ---------------


def test_langfuse_tools_under_a_span_the_export_lacks_stay_in_their_run(tmp_path) -> None:
    """t13b d_parent_missing.json: without the 'tools' span both tool observations were 'outside every
    run with a model call', the calls not_recorded, counted '4 in the source, 2 imported'."""
    from toolcall_lab.importers import import_langfuse

    whole = import_langfuse(_langgraph(tmp_path))
    cut = import_langfuse(_langgraph(tmp_path, tools_span=False))
    calls = [
        (e.tool_call_id, e.status, e.result, e.duration_s)
        for t in cut
        for r in t.rounds
        for e in r.executions
    ]
    assert calls == [
        (e.tool_call_id, e.status, e.result, e.duration_s)
        for t in whole
        for r in t.rounds
        for e in r.executions
    ]
    assert calls == [("call_s", "ok", "A", 2.0), ("call_l", "ok", "B", 2.84)]
    report = cut.report
    assert (report.source_calls, report.imported_calls) == (2, 2) and report.ok
    damaged = [i for i in report.issues if i.kind == "damaged"]
    assert len(damaged) == 2 and all(
        "names observation tools, which the export does not hold" in i.what for i in damaged
    )


# --- findings 2, 3, 13, 17, 20: a Claude Code line with a field missing is joined by the next key -----


def _batch(log: Log, rid: str = "req_1") -> Log:
    """One response of three Glob calls on three lines (sharing message id and requestId), each result
    line after the previous one (as Claude Code 1.0.98 chains them), then the answer."""
    log.user(0, "find the docs")
    for k, pattern in enumerate(["*.md", "*.txt", "*.rst"]):
        log.calls(2 + k * 0.5, "msg_01", f"toolu_{k}", "Glob", {"pattern": pattern}, requestId=rid)
    for k in range(3):
        log.result(4 + k * 0.01, f"toolu_{k}", f"found {k}")
    log.says(7, "msg_02", "Three kinds of docs.", requestId="req_2")
    return log


def _model_calls(result: Any) -> list[tuple[float, str]]:
    return [
        (r.model_call.latency_s, r.model_call.timing.source)
        for t in result
        for r in t.rounds
        if r.placeholder is None
    ]


@pytest.mark.parametrize(
    ("keep", "joined_by"),
    [
        ("requestId", "by its requestId req_1"),
        ("parentUuid", "by the line it follows (line 2, parentUuid)"),
    ],
)
def test_a_line_without_its_message_id_is_joined_by_the_next_strongest_key(tmp_path, keep, joined_by) -> None:
    """t13b: the real 1af7fc5e with message.id deleted on line 8 gave 'model calls: 8 in the source,
    9 imported', a phantom call of 0 s labelled recorded (from line 13 to line 8), and moved 0.7 s of
    the first response into the Bash call."""
    from toolcall_lab.importers import import_claude_code

    clean = import_claude_code(_batch(Log()).write(tmp_path / "clean.jsonl"))
    log = _batch(Log())
    del log.lines[2]["message"]["id"]  # the second Glob's line
    if keep != "requestId":
        del log.lines[2]["requestId"]
    result = import_claude_code(log.write(tmp_path / "s.jsonl"))
    report = result.report
    assert (report.source_model_calls, report.imported_model_calls) == (2, 2)
    assert (report.source_calls, report.imported_calls) == (3, 3)
    assert _model_calls(result) == _model_calls(clean) == [(3.0, "recorded"), (2.98, "recorded")]
    (damage,) = [i for i in report.issues if i.kind == "damaged"]
    assert damage.where.endswith("line 3") and f"joined to response msg_01 {joined_by}" in damage.what


def test_a_line_no_key_ties_is_its_own_response_and_says_so(tmp_path) -> None:
    from toolcall_lab.importers import import_claude_code

    log = _batch(Log())
    del log.lines[2]["message"]["id"], log.lines[2]["requestId"]
    log.lines[2]["parentUuid"] = None
    result = import_claude_code(log.write(tmp_path / "s.jsonl"))
    assert any("read as a response of its own" in i.what for i in result.report.issues if i.kind == "damaged")
    assert not result.report.clean
    for latency, source in _model_calls(result):
        assert latency > 0 or source != "recorded"  # never a clamped 0 labelled recorded


def test_a_response_dated_before_its_request_is_no_recorded_zero(tmp_path) -> None:
    """A latency the timestamps make negative (within the tolerance) was clamped to 0 and labelled
    recorded."""
    from toolcall_lab.importers import import_claude_code

    log = Log()
    log.user(0, "go")
    log.calls(2, "msg_01", "toolu_1", "Bash", {"command": "ls"})
    log.result(3, "toolu_1", "a.txt")
    log.says(2.95, "msg_02", "One file.")  # 50 ms before the result that completed its request
    (trace,) = import_claude_code(log.write(tmp_path / "s.jsonl"))
    last = trace.rounds[1].model_call
    assert last.timing.source == "placeholder" and "never a clamped 0" in last.timing.note


def test_a_result_line_without_its_parent_does_not_start_a_turn(tmp_path) -> None:
    """t13b: deleting parentUuid (or setting it null) on a Glob result of the 5-call batch gave two
    traces, exit 0, no report; the first ended incomplete with a placeholder closing round."""
    from toolcall_lab.importers import import_claude_code

    for how in ("missing", "null"):
        log = _batch(Log())
        if how == "missing":
            del log.lines[5]["parentUuid"]
        else:
            log.lines[5]["parentUuid"] = None
        result = import_claude_code(log.write(tmp_path / f"{how}.jsonl"))
        assert len(result) == 1 and result[0].outcome.status == "completed"
        assert [e.result for r in result[0].rounds for e in r.executions] == ["found 0", "found 1", "found 2"]
        (damage,) = [i for i in result.report.issues if i.kind == "damaged"]
        assert damage.where.endswith("line 6") and f"without its parentUuid ({how})" in damage.what


def test_a_result_without_its_tool_use_id_is_matched_by_elimination(tmp_path) -> None:
    """t13b dmg/no_tool_use_id: '13 in the source, 12 imported', the Glob not_recorded and its result
    'lost'. The only call of the response still without a result is the one it answers."""
    from toolcall_lab.importers import import_claude_code

    log = _batch(Log())
    del log.lines[5]["message"]["content"][0]["tool_use_id"]  # the result of toolu_1
    result = import_claude_code(log.write(tmp_path / "s.jsonl"))
    report = result.report
    assert (report.source_calls, report.imported_calls, report.missing_results) == (3, 3, 0)
    assert [e.result for r in result[0].rounds for e in r.executions] == ["found 0", "found 1", "found 2"]
    (damage,) = [i.what for i in report.issues if i.kind == "damaged"]
    assert "matched to call toolu_1 (Glob, line 3), the only call of the response before it" in damage
    # two results without ids: neither is guessed
    log = _batch(Log())
    for line in log.lines[4:6]:
        del line["message"]["content"][0]["tool_use_id"]
    result = import_claude_code(log.write(tmp_path / "two.jsonl"))
    assert (result.report.source_calls, result.report.missing_results) == (3, 2)
    assert sum("not matched" in i.what for i in result.report.issues) == 2


def test_a_tool_use_input_logged_as_text_is_damage_and_read_as_its_arguments(tmp_path) -> None:
    """t13b dmg/input_str: an input that is a JSON string only got a parser finding, exit 0."""
    from toolcall_lab.importers import import_claude_code

    log = _batch(Log())
    log.lines[2]["message"]["content"][0]["input"] = '{"pattern": "*.txt"}'
    result = import_claude_code(log.write(tmp_path / "s.jsonl"))
    assert result[0].rounds[0].tool_calls[1].arguments == '{"pattern": "*.txt"}'
    assert result[0].rounds[0].executions[1].status == "ok"
    (damage,) = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert "its input is a str, not an object: read as the argument string it spells" in damage


def test_a_user_interrupt_before_any_result_is_an_outcome_not_damage(tmp_path) -> None:
    """t13b craft/E2: tool_use lines then '[Request interrupted by user]' exited 1 as DAMAGED,
    though the outcome said interrupted_by_user."""
    from toolcall_lab import cli
    from toolcall_lab.importers import import_claude_code

    log = Log()
    log.user(0, "run two things")
    log.calls(2, "msg_01", "toolu_1", "Bash", {"command": "sleep 100"})
    log.calls(2.2, "msg_01", "toolu_2", "Bash", {"command": "sleep 200"})
    log.user(9, "[Request interrupted by user]")
    log.user(15, "never mind, say hi")
    log.says(17, "msg_02", "hi")
    path = log.write(tmp_path / "s.jsonl")
    result = import_claude_code(path)
    assert result[0].outcome.reason == "interrupted_by_user"
    assert not [i for i in result.report.issues if i.kind == "damaged"] and result.report.clean
    notes = [e.timing.note for e in result[0].rounds[0].executions]
    assert all("the user interrupted the run before this call's result" in n for n in notes)
    assert cli.main(["import", "claude-code", str(path), "--out", str(tmp_path / "o")]) == 0


def test_claude_code_s_compaction_agent_is_no_unlinked_sub_agent(tmp_path) -> None:
    """t13b craft/B_subagents: 2.1's subagents/agent-acompact-*.jsonl was 'sub-agent 2 (its Task
    call not found)', its model call not counted ('8 in the source, 7 imported')."""
    from toolcall_lab.importers import import_claude_code

    path = _session_with_a_subagent(tmp_path, with_agent_file=True)
    session = path.name.removesuffix(".jsonl")
    compact = Log(session=session, version="2.1.14")
    compact.base = {**compact.base, "isSidechain": True, "agentId": "acompact-9f8e7d"}
    compact.user(20, "Summarize the conversation so far", parent=None)
    compact.says(25, "msg_c1", "Summary: the user asked where the config is.")
    for line in compact.lines:
        line["isSidechain"] = True
    compact.write(tmp_path / session / "subagents" / "agent-acompact-9f8e7d.jsonl")
    result = import_claude_code(path, include_no_calls=True)
    titles = [t.metadata.title for t in result]
    assert not any("Task call not found" in t for t in titles)
    assert any("compaction (acompact-9f8e7d)" in t for t in titles)
    report = result.report
    assert report.source_model_calls == report.imported_model_calls == 6
    assert any("Claude Code's compaction agent (acompact-9f8e7d)" in i.what for i in report.issues)


# --- finding 14: calls not represented exit non-zero ------------------------------------------------


def test_missing_sub_agent_transcripts_exit_1(tmp_path, capsys) -> None:
    """t13b: '5 in the source, 2 imported', exit 0: a script checking the status saw success."""
    from toolcall_lab import cli

    alone = _session_with_a_subagent(tmp_path / "alone", with_agent_file=False)
    assert cli.main(["import", "claude-code", str(alone), "--out", str(tmp_path / "o")]) == 1
    assert "2 call(s) of" in capsys.readouterr().err
    whole = _session_with_a_subagent(tmp_path / "whole", with_agent_file=True)
    assert cli.main(["import", "claude-code", str(whole), "--out", str(tmp_path / "o2")]) == 0


# --- finding 8: a sub-agent's time is counted once in corpus totals ---------------------------------


def test_a_sub_agent_trace_links_to_its_task_call_and_totals_count_it_once(tmp_path) -> None:
    """t13b: the main trace's Task durations and the sub-agent traces are the same seconds; notebook
    04's 'all sessions' total counted 934.67 s of sub-agent runs twice."""
    from toolcall_lab.analysis import compare
    from toolcall_lab.importers import import_claude_code

    main, sub = import_claude_code(_session_with_a_subagent(tmp_path, with_agent_file=True))
    assert main.metadata.parent is None
    assert sub.metadata.parent == {"source": main.metadata.source, "tool_call_id": "toolu_task"}
    assert load(save(sub, tmp_path / "sub.json")).metadata.parent == sub.metadata.parent
    table = compare([main, sub], ["sequential"])
    runs = table.runs.set_index("title")["wall_time_s"]
    summary = table.summary.loc["sequential"]
    assert summary["wall_time_s"] == pytest.approx(runs[main.metadata.title])
    assert summary["sub_agent_runs_in_parents"] == 1 and summary["traces"] == 2
    alone = compare([sub], ["sequential"]).summary.loc["sequential"]  # without its parent: counted
    assert alone["wall_time_s"] == pytest.approx(runs[sub.metadata.title])


# --- finding 20: OpenHands args that contradict the model's call --------------------------------------


def test_openhands_args_contradicting_the_model_s_call_are_damage_and_no_secret_is_shown(tmp_path) -> None:
    """t13b craft/H d_secret.json: args.command said `curl -u admin:...` while model_response's
    call asked for `ls`; the importer used model_response without a word."""
    record = _oh_episode(["r1", "r2"])
    action = record["history"][1]
    action["args"] = {
        **action["args"],
        "command": "curl -u admin:Sup3rS3cret! https://x",
        "thought": "OpenHands' own text",
        "is_input": False,
    }
    result = _oh_import(tmp_path, record)
    (damage,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert damage.where.endswith("event 1") and "contradict its call toolu_0 in model_response" in damage.what
    assert "command: ran" in damage.what and "the call asks 'ls dir0'" in damage.what
    assert "Sup3rS3cret" not in damage.what and "thought" not in damage.what
    assert result[0].rounds[0].tool_calls[0].arguments == '{"command": "ls dir0"}'
    clean = (
        _oh_import(tmp_path / "clean", _oh_episode(["r1", "r2"]))
        if (tmp_path / "clean").mkdir() is None
        else None
    )
    assert clean is not None and not [i for i in clean.report.issues if i.kind == "damaged"]


# --- finding 7: a stored mode says only what the source shows -----------------------------------------


def test_a_trace_whose_source_shows_no_mode_stores_none_on_its_rounds(tmp_path) -> None:
    """t13b: 2947 round entries across the imports stored "sequential" though their traces' notes
    said 'mode not evidenced', and TraceView's header showed 'mode sequential'."""
    from toolcall_lab.importers import import_claude_code
    from toolcall_lab.records import MODE_NOT_EVIDENCED

    (trace,) = import_claude_code(_declined_log().write(tmp_path / "s.jsonl"))  # one call per batch
    assert trace.metadata.mode is None and "mode not evidenced" in trace.metadata.notes
    assert {r.mode for r in trace.rounds} == {MODE_NOT_EVIDENCED}
    assert "mode <b>not evidenced</b>" in trace._repr_mimebundle_()["text/html"]
    assert replay(load(save(trace, tmp_path / "t.json")), "parallel").status == "completed"
    log = _batch(Log())
    for line in log.lines[4:7]:  # each Glob measured its own run: 1.5 s, ending 10 ms apart (overlapped)
        line["toolUseResult"] = {"durationMs": 1500}
    (clean,) = import_claude_code(log.write(tmp_path / "b.jsonl"))
    assert clean.metadata.mode == "parallel" and {r.mode for r in clean.rounds} == {"parallel"}


@needs_realdata
def test_no_real_import_stores_a_mode_its_source_does_not_show() -> None:
    for trace in _every_shape():
        if trace.metadata.origin == "imported":
            shown = trace.metadata.mode or "not evidenced"
            assert {r.mode for r in trace.rounds} == {shown}, trace.metadata.title


# --- finding 18: replay prints what each time rests on ----------------------------------------------


def test_replay_prints_the_timing_label_of_every_time(tmp_path, capsys) -> None:
    """t13b: `toolcall-lab replay` printed SWE-agent's 0.8 s placeholder model calls like measured
    ones."""
    from toolcall_lab import cli
    from toolcall_lab.importers import import_claude_code

    (trace,) = import_claude_code(_declined_log().write(tmp_path / "s.jsonl"))
    path = save(trace, tmp_path / "t.json")
    assert cli.main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "round 0: model 0.000-2.000s [recorded]  Bash[ok 2.000-2.300 recorded, upper bound]" in out
    assert "Edit[error 4.000-12.000 recorded, wait]" in out
    assert "[label] says what each duration rests on" in out


# --- finding 19: bench tables and plots say what they hold -------------------------------------------


def test_a_run_that_is_not_comparable_has_no_speedup(tmp_path) -> None:
    """t13b: first_only rows that skipped calls kept speedup_vs_sequential 1.0 beside an empty
    efficiency."""
    from toolcall_lab.analysis import compare
    from toolcall_lab.scenarios import SCENARIOS

    trace = next(
        s.record() for s in SCENARIOS.values() if max(len(r.tool_calls) for r in s.record().rounds) > 1
    )
    runs = compare([trace], ["sequential", "first_only"]).runs.set_index("mode")
    assert not runs.loc["first_only", "comparable"]
    assert runs.loc["first_only", "speedup_vs_sequential"] != runs.loc["first_only", "speedup_vs_sequential"]
    assert runs.loc["sequential", "speedup_vs_sequential"] == 1.0


def test_an_upper_case_extension_is_a_parquet_or_csv_name(tmp_path) -> None:
    from toolcall_lab._cli_runs import _check_output
    from toolcall_lab.exceptions import UsageError

    _check_output(tmp_path / "x.CSV")
    try:
        _check_output(tmp_path / "x.PARQUET")
    except UsageError as exc:  # only when no parquet engine is installed here
        assert "needs pyarrow" in str(exc)


def test_a_failed_call_s_short_label_keeps_its_mark_and_tool() -> None:
    """t13b: a gantt error bar too narrow for its label showed only '0.1 s', without ✖ and the tool."""
    from toolcall_lab.notebook.timeline import items_of
    from toolcall_lab.scenarios import SCENARIOS

    trace = SCENARIOS["one_tool_round"].record()
    doc = trace.to_dict()
    doc["rounds"][0]["tool_executions"][0]["status"] = "error"
    (bar,) = [it for it in items_of(doc["rounds"]) if it.kind == "tool"]
    name = doc["rounds"][0]["tool_calls"][0]["name"]
    assert bar.short == f"✖ {name}" and bar.label.startswith("✖")


def test_langfuse_tools_are_matched_by_what_the_next_model_call_was_sent_first(tmp_path) -> None:
    """The class of finding 1 in Langfuse: two calls of one tool, tool observations without ids or
    inputs; the next generation's input says which result answered which call. Name and order would
    cross them (the first tool to start answered the second call)."""
    from toolcall_lab.importers import import_langfuse

    def obs(oid: str, kind: str, name: str, parent: str | None, a: float, b: float, **more: Any) -> dict:
        return {
            "id": oid,
            "type": kind,
            "name": name,
            "parentObservationId": parent,
            "startTime": _lf_stamp(a),
            "endTime": _lf_stamp(b),
            **more,
        }

    calls = [
        {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "search", "arguments": f'{{"q": "{k}"}}'},
        }
        for k in (1, 2)
    ]
    first = {"role": "assistant", "content": "", "tool_calls": calls}
    sent = [
        {"role": "user", "content": "search twice"},
        first,
        {"role": "tool", "tool_call_id": "call_1", "content": "B"},
        {"role": "tool", "tool_call_id": "call_2", "content": "A"},
    ]
    observations = [
        obs("root", "SPAN", "LangGraph", None, 0, 10),
        obs("g1", "GENERATION", "ChatOpenAI", "root", 0.1, 2.0, output=first),
        obs(
            "t1", "TOOL", "search", "root", 2.2, 3.2, output="A"
        ),  # 1.0 s: call_2's (the model was sent A for it)
        obs("t2", "TOOL", "search", "root", 2.3, 5.3, output="B"),  # 3.0 s: call_1's
        obs(
            "g2",
            "GENERATION",
            "ChatOpenAI",
            "root",
            5.5,
            7.0,
            input=sent,
            output={"role": "assistant", "content": "A and B."},
        ),
    ]
    path = tmp_path / "lf.json"
    path.write_text(json.dumps({"trace": {"id": "x", "name": "w"}, "observations": observations}))
    result = import_langfuse(path)
    got = [(e.tool_call_id, e.result, e.duration_s) for e in result[0].rounds[0].executions]
    assert got == [("call_1", "B", 3.0), ("call_2", "A", 1.0)]
    assert not [i for i in result.report.issues if i.kind == "damaged"]
    # a tool whose id names the other call: matched by what the model was sent, and said
    observations[3]["metadata"] = {"tool_call_id": "call_2"}
    path.write_text(json.dumps({"trace": {"id": "x", "name": "w"}, "observations": observations}))
    result = import_langfuse(path)
    assert [(e.tool_call_id, e.result, e.duration_s) for e in result[0].rounds[0].executions] == got
    (damage,) = [i for i in result.report.issues if i.kind == "damaged"]
    assert damage.where.startswith("lf.json observation t2") and "it names call call_2" in damage.what
    assert "matched by the next model call's input" in damage.what


def test_inspect_an_event_whose_arguments_contradict_its_call_id_is_reported(tmp_path) -> None:
    """The class of finding 1 in inspect: an event carrying a call's id and function but other
    arguments was that call's execution without a word."""
    from tests.test_import_seventh_pass import _browse, _inspect_log
    from toolcall_lab.importers import import_inspect

    events = _browse(second_id="call_click")
    events[3]["arguments"] = {"element": 9}
    result = import_inspect(_inspect_log(tmp_path, events))
    (damage,) = [i.what for i in result.report.issues if i.kind == "damaged"]
    assert "carries call id call_click and ran its function (click), but with other arguments" in damage
    assert import_inspect(_inspect_log(tmp_path, _browse(second_id="call_click"))).report.clean

"""Trace files: round trip, stable bytes, atomic saves, negative fixtures with exact errors, secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA
from toolcall_lab.exceptions import TraceFormatError, TraceVersionError
from toolcall_lab.scenarios import SCENARIOS, generate_corpus
from toolcall_lab.trace import Trace
from toolcall_lab.trace_files import dumps, load, save, scrub, secret_warnings, validate

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_round_trip(tmp_path, name) -> None:
    trace = SCENARIOS[name].record()
    path = save(trace, tmp_path / f"{name}.json")
    assert load(path) == trace
    assert path.read_text() == dumps(load(path))  # stable bytes


def test_generated_and_loaded_traces_round_trip(tmp_path) -> None:
    for i, trace in enumerate(generate_corpus(5, seed=3)):
        assert load(save(trace, tmp_path / f"{i}.json")) == trace


def test_output_is_sorted_and_indented() -> None:
    text = dumps(SCENARIOS["one_tool_round"].record())
    doc = json.loads(text)
    assert text == json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    assert list(doc) == sorted(doc)


def test_atomic_save_survives_a_crash(tmp_path, monkeypatch) -> None:
    path = save(SCENARIOS["one_tool_round"].record(), tmp_path / "t.json")
    before = path.read_bytes()

    def crash(*_a, **_k):
        raise KeyboardInterrupt("power cut during rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        save(SCENARIOS["straggler"].record(), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temp file left behind


def test_valid_fixture_loads() -> None:
    assert load(FIXTURES / "valid_one_tool_round.json").metadata.title.startswith("One tool round")
    assert load(FIXTURES / "v2_valid_one_tool_round.json").metadata.title.startswith("One tool round")


def test_version_1_files_load_with_honest_timing_labels() -> None:
    """v1 had one trace-wide word for its timings; a scripted v1 trace's numbers are placeholders."""
    old = load(FIXTURES / "valid_one_tool_round.json")
    assert old.schema_version == 3  # migrated on reading; saving writes version 3
    assert old.timing_sources == {"placeholder": 3}  # 2 model calls, 1 tool call
    assert old.rounds[0].model_call.chunk_timing == "spread"
    assert "v1 scripted trace" in old.rounds[0].executions[0].timing.note
    new = load(FIXTURES / "v2_valid_one_tool_round.json")
    assert [r.model_call.timing.source for r in new.rounds] == ["placeholder", "placeholder"]
    # the rest of the record is unchanged by the migration
    assert [r.to_dict()["tool_calls"] for r in old.rounds] == [r.to_dict()["tool_calls"] for r in new.rounds]


def test_v1_mixed_timings_are_not_claimed_as_recorded() -> None:
    from toolcall_lab.trace import v1_timing

    timing, chunks = v1_timing("imported", "mixed")
    assert timing.source == "placeholder" and "unknown" in timing.note and chunks == "spread"
    assert v1_timing("recorded", "recorded")[0].source == "recorded"


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        (
            "future_version.json",
            TraceVersionError,
            "schema_version 99 is not supported (newer than this toolcall_lab; upgrade it); supported: 1: ",
        ),
        ("missing_version.json", TraceVersionError, "no schema_version; supported versions: 1: "),
        (
            "wrong_type_duration.json",
            TraceFormatError,
            "rounds[0].tool_executions[0].duration_s: expected a number, got 'fast'",
        ),
        (
            "wrong_type_offset.json",
            TraceFormatError,
            "rounds[0].response.chunks[1].offset_s: expected a number, got null",
        ),
        (
            "wrong_origin.json",
            TraceFormatError,
            "metadata.origin: expected one of recorded, imported, scripted, got 'invented'",
        ),
        ("truncated.json", TraceFormatError, "not valid JSON (file looks truncated)"),
        (
            "v2_missing_timing.json",
            TraceFormatError,
            "rounds[0].tool_executions[0].timing: missing",
        ),
        (
            "v2_wrong_timing_source.json",
            TraceFormatError,
            "rounds[0].response.timing.source: expected one of recorded, reported, estimated, placeholder, "
            "got 'guessed'",
        ),
        (
            "v2_queued_after_start.json",
            TraceFormatError,
            "rounds[0].tool_executions[1].queued_at: 1.8714285714285714 is after started_at "
            "(0.8714285714285714)",
        ),
        (
            "v2_empty_strategy_name.json",
            TraceFormatError,
            "rounds[0].mode: expected a strategy name (a non-empty string), got ''",
        ),
    ],
)
def test_negative_fixtures_give_exact_errors(name, error, message) -> None:
    with pytest.raises(error) as info:
        load(FIXTURES / name)
    text = str(info.value)
    assert str(FIXTURES / name) in text
    assert message in text


def test_cli_validate_reports_each_file(tmp_path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "toolcall_lab", "validate", str(FIXTURES)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert "ok    " in out.stdout and out.stderr.count("ERROR") == 11  # every negative fixture


def test_secrets_are_scrubbed_and_flagged(tmp_path) -> None:
    assert scrub({"headers": {"Authorization": "Bearer x", "accept": "json"}, "api_key": "k"}) == {
        "headers": {"Authorization": "[REDACTED: the value of 'Authorization']", "accept": "json"},
        "api_key": "[REDACTED: the value of 'api_key']",
    }
    warnings = secret_warnings({"messages": [{"content": "my key is sk-abcdefghijklmnopqrstuv"}]})
    assert warnings == ["messages[0].content: looks like an OpenAI-style key"]  # (never the key itself)
    trace = SCENARIOS["one_tool_round"].record()
    doc = trace.to_dict()
    doc["initial_messages"][0]["content"] = "use Bearer abcdefghijklmnop123 please"
    path = tmp_path / "leaky.json"
    path.write_text(json.dumps(doc))
    _, found = validate(path)
    assert any("looks like a bearer token" in w for w in found)


def test_save_strips_credentials_wherever_they_occur_and_marks_them(tmp_path) -> None:
    """Settings, messages, raw argument strings, results and chunk payloads; the rest stays as it was."""
    from dataclasses import replace

    trace = SCENARIOS["one_tool_round"].record()
    r0 = trace.rounds[0]
    call = replace(r0.tool_calls[0], arguments='{"city": "Paris", "api_key": "abc123secret"}')
    leaky = replace(
        trace,
        metadata=replace(
            trace.metadata,
            settings={**trace.metadata.settings, "params": {"api_key": "sk-abcdefghijklmnop1234"}},
        ),
        initial_messages=({"role": "user", "content": "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789"},),
        rounds=(
            replace(
                r0,
                tool_calls=(call,),
                executions=(replace(r0.executions[0], result="the key is sk-ant-abcdefghijklmnopqrstu, ok"),),
            ),
            *trace.rounds[1:],
        ),
    )
    text = save(leaky, tmp_path / "t.json").read_text()
    for secret in ("abcdefghijklmnop1234", "ghp_abcdefghij", "sk-ant-abcdef", "abc123secret"):
        assert secret not in text
    saved = load(tmp_path / "t.json")
    assert saved.rounds[0].executions[0].result == "the key is [REDACTED: an Anthropic key], ok"
    assert saved.rounds[0].tool_calls[0].arguments == (
        '{"city": "Paris", "api_key": "[REDACTED: the value of \'api_key\']"}'
    )
    assert len(saved.metadata.redactions) == 4
    assert any(r.startswith("metadata.settings.params.api_key") for r in saved.metadata.redactions)
    _, found = validate(tmp_path / "t.json")
    assert not [w for w in found if w.startswith("possible secret")]
    clean = SCENARIOS["one_tool_round"].record()
    assert load(save(clean, tmp_path / "clean.json")) == clean  # nothing to strip: nothing changes


def test_validate_reports_unknown_fields_unanswered_calls_and_real_secrets_only() -> None:
    _, found = validate(FIXTURES / "v2_unknown_fields_unanswered_call.json")
    assert found == [
        "unanswered tool call: rounds[0]: 1 call(s) but 0 execution(s)",
        "unanswered tool call: rounds[0] call call_0_0 (step): no execution recorded",
        "unknown field: metadata.titel",
        "unknown field: rounds[0].tool_excutions",
    ]
    _, found = validate(FIXTURES / "v2_api_key_property_and_a_key_in_a_message.json")
    assert found == ["possible secret: initial_messages[0].content: looks like an OpenAI-style key"]
    for name in ("valid_one_tool_round.json", "v2_valid_one_tool_round.json"):
        assert validate(FIXTURES / name)[1] == []  # version 1's metadata.timings is known
    trace, found = validate(FIXTURES / "v2_imported_recorded_wall_and_redactions.json")
    assert found == [] and trace.metadata.recorded_wall_s == 2.25 and len(trace.metadata.redactions) == 1


def test_bundled_scenario_traces_replay_to_their_recorded_timings() -> None:
    from toolcall_lab.replay import replay

    paths = sorted((DATA / "traces").glob("*.json"))
    assert len(paths) == len(SCENARIOS)
    for path in paths:
        trace = load(path)
        result = replay(trace)  # recorded mode, strict divergence check
        assert result.wall_time_s == pytest.approx(trace.wall_time_s), path.name
        assert Trace.from_run(result, trace.metadata).to_dict()["rounds"] == trace.to_dict()["rounds"], (
            path.name
        )


def test_loop_records_fixture_loads_with_every_new_field() -> None:
    """Hook failures, serialized round trips, an empty-answer retry and a withheld result (schema 2)."""
    trace = load(FIXTURES / "v2_loop_records.json")
    assert [(f.hook, f.tool_call_id, f.effect) for f in trace.outcome.hook_failures] == [
        ("approve_call", "call_0_2", "call rejected"),
        ("approve_result", "call_0_1", "result withheld"),
    ]
    assert trace.outcome.hook_failures[0].error == "ValueError: quota service down"
    assert [e.status for e in trace.rounds[0].executions] == ["ok", "withheld", "rejected"]
    trips = trace.rounds[0].round_trips
    assert [(t.tool_call_id, t.position, round(t.duration_s, 6)) for t in trips] == [
        ("call_0_1", 1, 0.05),
        ("call_0_2", 2, 0.05),
    ]
    assert trips[0].timing.source == "placeholder" and trace.rounds[0].client_round_trips == 3
    assert [r.final_reason for r in trace.rounds] == [None, None, "empty_answer"]
    assert trace.rounds[2].request_messages[-1]["content"].startswith("[SYSTEM]")
    assert Trace.from_dict(json.loads(dumps(trace))) == trace


def test_unknown_hook_name_is_refused_with_its_path() -> None:
    with pytest.raises(
        TraceFormatError, match=r"outcome\.hook_failures\[0\]\.hook: expected one of .*got 'on_lunch'"
    ):
        load(FIXTURES / "v2_wrong_hook_name.json")


def test_v1_dedupe_setting_covered_repeats_across_rounds() -> None:
    old = load(FIXTURES / "valid_one_tool_round.json")
    assert old.metadata.settings["dedupe"] is True and old.metadata.settings["dedupe_across_rounds"] is True


def test_a_credential_split_over_streamed_chunks_is_removed_from_every_chunk(tmp_path) -> None:
    """A streamed answer that spells out a key across two deltas: no chunk keeps a piece of it."""
    from dataclasses import replace

    from toolcall_lab.records import TimedChunk

    trace = SCENARIOS["one_tool_round"].record()
    last = trace.rounds[-1]
    chunk = {
        "object": "chat.completion.chunk",
        "id": "x",
        "choices": [{"index": 0, "delta": {}, "finish_reason": None}],
    }
    pieces = ["your key: sk-abcdefgh", "ijklmnopqrstuvwx, keep it safe"]
    chunks = tuple(
        TimedChunk(
            offset_s=0.1 * i,
            payload={**chunk, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        )
        for i, text in enumerate(pieces)
    )
    leaky = replace(
        trace, rounds=(*trace.rounds[:-1], replace(last, model_call=replace(last.model_call, chunks=chunks)))
    )
    text = save(leaky, tmp_path / "t.json").read_text()
    assert "ijklmnopqrstuvwx" not in text and "sk-abcdefgh" not in text
    saved = load(tmp_path / "t.json")
    contents = [c.payload["choices"][0]["delta"]["content"] for c in saved.rounds[-1].model_call.chunks]
    # each chunk keeps its own characters (the mark where the key began), so they still join to the text
    assert contents == ["your key: [REDACTED: an OpenAI-style key]", ", keep it safe"]
    assert any("split over 2 chunks" in r for r in saved.metadata.redactions)


def loads_back(text: str) -> Trace:
    return Trace.from_dict(json.loads(text))


def test_strategy_fixtures_load_round_trip_and_replay() -> None:
    """Schema 2 extended in place (issue 14): any strategy name, queued_at, strategy_notes."""
    from toolcall_lab.replay import replay

    eager = load(FIXTURES / "v2_eager_cap1.json")
    assert eager.metadata.mode == "eager[cap=1]" and eager.rounds[0].mode == "eager[cap=1]"
    assert [e.queued_at for e in eager.rounds[0].executions][1:] == [0.5428571428571429, 0.7142857142857144]
    assert "spread" in eager.rounds[0].strategy_notes[0]
    assert validate(FIXTURES / "v2_eager_cap1.json")[1] == []
    written = json.loads((FIXTURES / "v2_eager_cap1.json").read_text())  # (version 2: requests whole)
    assert written == {**eager.to_dict(), "schema_version": 2}  # loaded as written, field for field
    assert dumps(loads_back(dumps(eager))) == dumps(eager)  # stable bytes (saved as version 3)
    again = replay(eager)  # the name says how to run it again
    assert Trace.from_run(again, eager.metadata).to_dict()["rounds"] == eager.to_dict()["rounds"]
    user = load(FIXTURES / "v2_user_strategy.json")
    assert user.metadata.mode == "weather_first" and validate(FIXTURES / "v2_user_strategy.json")[1] == []
    written = json.loads((FIXTURES / "v2_user_strategy.json").read_text())
    assert written == {**user.to_dict(), "schema_version": 2}
    assert dumps(loads_back(dumps(user))) == dumps(user)

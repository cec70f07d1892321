"""Tool-chain compression as designed: the format, variables that persist and read back, true statuses."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab.clock import run_virtual
from toolcall_lab.compression import (
    CompressionConfig,
    CompressionHook,
    VariableStore,
    compress,
    compress_messages,
    final_transcript,
    finished_chains,
    savings,
    token_counter,
)
from toolcall_lab.exceptions import UsageError
from toolcall_lab.loop import Hooks, run
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.records import ToolExecution
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import SCENARIOS, generate_corpus
from toolcall_lab.tools import ToolRegistry

FAILING = SCENARIOS["failing_and_hanging"].record()


def chain(calls, results, final="done", content=None):
    """user, assistant with `calls` [(id, name, args)], tool messages `results` [(id, content)], final."""
    return [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": content,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
            ],
        },
        *({"role": "tool", "tool_call_id": i, "content": c} for i, c in results),
        {"role": "assistant", "content": final},
    ]


def execution(cid, name, arguments, result, status="ok", error=None):
    return ToolExecution(
        tool_call_id=cid,
        name=name,
        arguments=arguments,
        index=0,
        status=status,
        result=result,
        error=error,
        started_at=0.0,
        ended_at=0.1,
    )


def test_the_designs_format_hint_block_flow_and_final_reply() -> None:
    store = VariableStore()
    out = compress_messages(final_transcript(FAILING), store, executions=FAILING)
    assert [m["role"] for m in out] == ["user", "assistant"]
    text = out[1]["content"]
    assert text.startswith(
        "<SYSTEM-CONTEXT>\nTool results cached in variables. **Access**: via `ReadVar` tool or "
        "`$VAR_REF{{VarID}}` syntax."
    )
    assert (
        "Executed tools:\n"
        "- `get_weather` (args=$VAR_REF{{get_weather_1_args}}, result=$VAR_REF{{get_weather_1_result}})\n"
        "- `flaky_api` (args=$VAR_REF{{flaky_api_1_args}}, result=$VAR_REF{{flaky_api_1_result}})\n"
    ) in text
    assert (
        "\n[WARNING] `[Tool Execution Log]` blocks are system-generated. Mimicking this format will NOT"
        in text
    )
    assert "</SYSTEM-CONTEXT>\n---\n**[Tool Execution Log]**: get_weather\n```accesslog\n" in text
    assert (
        '**[Tool Execution Log]**: get_weather\n```accesslog\nArguments: {"city":"Lyon"}\n'
        "Status: ✓ Success\n\nLyon: 18°C, light rain\n```\n"
    ) in text
    assert "Status: ✗ Failed: tool 'flaky_api' raised RuntimeError: 503" in text  # not "Failed: Error: ..."
    assert "Status: ✗ Failed: tool 'slow_service' timed out after 1.0 s (the harness's limit)." in text
    assert text.endswith("```\n\nWeather is fine; the API failed and the service timed out.")
    assert store.get("$VAR_REF{{flaky_api_1_result}}").startswith(
        "Error: tool 'flaky_api' raised RuntimeError"
    )
    assert json.loads(store.get("get_weather_1_args")) == {"city": "Lyon"}
    assert validate_messages(out) == []


def test_preview_is_200_characters_and_string_arguments_are_cut_at_50_but_ids_stay_whole() -> None:
    long_id = "x" * 80
    args = json.dumps({"query": "q" * 120, "id": long_id, "n": 3})
    messages = chain([("c1", "search", args)], [("c1", "r" * 500)])
    text = compress_messages(messages, executions=[execution("c1", "search", args, "r" * 500)])[1]["content"]
    assert f'Arguments: {{"query":"{"q" * 50}...","id":"{long_id}","n":3}}' in text
    assert "\n" + "r" * 200 + "...\n```" in text and "r" * 201 not in text


def test_statuses_come_from_records_not_from_the_text() -> None:
    messages = chain(
        [("a", "echo", "{}"), ("b", "echo", '{"x":1}'), ("c", "echo", '{"x":2}')],
        [("a", "Error: this is the text the tool returned"), ("b", "Rejected: no"), ("c", "fine")],
    )
    records = [
        execution("a", "echo", "{}", "Error: this is the text the tool returned"),
        execution("b", "echo", '{"x":1}', "Rejected: no", status="rejected", error="not allowed by policy"),
    ]
    text = compress_messages(messages, executions=records)[1]["content"]
    blocks = text.split("**[Tool Execution Log]**")[1:]
    assert "Status: ✓ Success\n\nError: this is the text the tool returned" in blocks[0]
    assert "Status: ⚠️ Rejected: not allowed by policy" in blocks[1]
    assert "Status: ? Not recorded" in blocks[2]  # no record: says so instead of guessing


def test_unanswered_calls_and_orphan_results_are_flagged_not_hidden() -> None:
    trace = SCENARIOS["weather_news_stock"].record()
    result = replay(trace, "first_only")  # the legacy bug: only the first call is answered
    messages = list(result.messages)
    assert validate_messages(messages)  # the raw transcript breaks the protocol
    done = compress(messages, executions=result)
    text = done.messages[-1]["content"]
    assert len(done.violations) == 2 and "was never answered by a tool message" in done.violations[0]
    assert text.count("[PROTOCOL VIOLATION]") == 2
    assert text.count("Status: ✗ Not answered") == 2 and text.count("Status: ✓ Success") == 1
    orphan = chain([("a", "f", "{}")], [("a", "ok"), ("zz", "stray")])
    flagged = compress(orphan, executions=[execution("a", "f", "{}", "ok")])
    assert "answers 'zz', which no earlier call in this chain left unanswered" in flagged.violations[0]


def test_content_part_lists_render_as_text() -> None:
    parts = [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]
    messages = chain(
        [("a", "f", "{}")], [("a", parts)], final=parts, content=[{"type": "text", "text": "thinking"}]
    )
    text = compress_messages(messages, executions=[execution("a", "f", "{}", "part one\npart two")])[1][
        "content"
    ]
    assert "---\nthinking\n\n**[Tool Execution Log]**: f" in text
    assert "Status: ✓ Success\n\npart one\npart two\n```" in text and text.endswith("part one\npart two")


def test_rejected_and_duplicate_calls_from_a_recorded_run() -> None:
    trace = SCENARIOS["duplicate_call"].record()
    text = compress_messages(final_transcript(trace), executions=trace)[-1]["content"]
    assert text.count("Status: ⚠️ Rejected") == 2 and text.count("Status: ✓ Success") == 1


def test_hook_keeps_its_variables_across_turns_and_the_model_reads_one_back() -> None:
    """End to end: turn 1 runs a tool; on turn 2 the model sees the compressed chain and reads the
    variable named in it with ReadVar; the full result comes back."""
    tools = ToolRegistry()

    @tools.register
    def lookup(key: str) -> str:
        return f"value of {key}: " + "data " * 100

    hook = CompressionHook(CompressionConfig(preview_chars=30))
    seen = []

    def read_back(request):
        seen.append(request.messages)
        hint = request.messages[1]["content"]
        variable = re.search(r"result=\$VAR_REF\{\{(\w+)\}\}", hint).group(1)
        return ScriptedResponse(tool_calls=(("ReadVar", {"name": variable}),))

    def answer(request):
        seen.append(request.messages)
        return "read it"

    model = ScriptedModel(
        [ScriptedResponse(tool_calls=(("lookup", {"key": "a"}),)), "first answer", read_back, answer]
    )
    registry = ToolRegistry([*tools, hook.store.read_variable_tool()])
    first = run_virtual(run(model, registry, "look up a", hooks=Hooks(before_model_call=hook)))
    hook.remember(first)
    history = [*first.messages, {"role": "user", "content": "what exactly did it say?"}]
    second = run_virtual(run(model, registry, history, hooks=Hooks(before_model_call=hook)))
    model.assert_consumed()
    assert [m["role"] for m in seen[0]] == ["user", "assistant", "user"]
    assert "Status: ✓ Success" in seen[0][1]["content"]
    (read,) = second.executions
    assert read.name == "ReadVar" and read.status == "ok"
    assert read.result == "value of a: " + "data " * 100  # the full result, from a store that persisted
    assert seen[1][1]["content"] == seen[0][1]["content"]  # stable variable names when resent
    assert second.final_answer == "read it"


def test_var_refs_in_arguments_are_resolved_and_unknown_ones_are_named() -> None:
    store = VariableStore()
    name = store.put("fetch", "0123456789", key=("c1",))
    assert name == "fetch_1_result" and store.put("fetch", "0123456789", key=("c1",)) == name

    def shout(text: str) -> str:
        return text.upper()

    tools = store.resolving(ToolRegistry([shout]))
    (tool,) = list(tools)
    assert tool.function(text="<$VAR_REF{{fetch_1_result:2:3}}>") == "<234>"
    with pytest.raises(UsageError, match=r"no such variable\. Known variables: fetch_1_result"):
        store.resolve("$VAR_REF{{nope}}")
    read = store.read_variable_tool()
    assert read.name == "ReadVar" and read.function(name="fetch_1_result", start=8).text == "89"
    missing = read.function(name="nope")
    assert missing.status == "error" and "no variable 'nope'" in missing.text


def test_another_template_and_bad_settings() -> None:
    text = compress_messages(
        final_transcript(FAILING), config=CompressionConfig(template="compact"), executions=FAILING
    )
    assert text[-1]["content"].startswith("[System hint] Tools executed: get_weather -> get_weather_1_result")
    with pytest.raises(UsageError, match="choose siyuan, compact"):
        CompressionConfig(template="fancy")
    with pytest.raises(UsageError, match="must be a whole number >= 0"):
        CompressionConfig(preview_chars=-1)


def test_only_finished_chains_are_compressed() -> None:
    full = final_transcript(SCENARIOS["two_tool_rounds"].record())
    in_progress = [*full[:-1], {"role": "user", "content": "and?"}]
    assert finished_chains(full) == [(1, 5)]
    assert finished_chains(in_progress) == []
    assert compress_messages(in_progress) == in_progress


def test_token_counts_use_a_real_offline_tokenizer_when_installed() -> None:
    pytest.importorskip("bpe_openai", reason="the `tokens` extra (bpe-openai) is not installed")
    label, count = token_counter()
    assert label.startswith("o200k_base") and count("hello world") == 2
    rows = [savings(t) for t in generate_corpus(10, seed=2)]
    assert all(r["token_method"] == label and r["tokens_before"] > 0 for r in rows)


@needs_realdata
def test_savings_on_imported_real_traces() -> None:
    from toolcall_lab.importers import import_tau_bench

    traces = import_tau_bench(REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json", limit=10)
    rows = [savings(t) for t in traces]
    assert sum(r["tokens_after"] for r in rows) < sum(r["tokens_before"] for r in rows)
    assert all(r["violations"] == 0 for r in rows)


def test_compress_and_savings_take_a_trace_or_a_run_result() -> None:
    """B16: a Trace or RunResult is compressed with its own transcript and executions."""
    expected = compress(final_transcript(FAILING), executions=FAILING).messages
    assert compress(FAILING).messages == expected
    result = replay(FAILING, "parallel")
    assert compress(result).messages == compress(list(result.messages), executions=result).messages
    assert savings(FAILING)["violations"] == 0
    with pytest.raises(UsageError, match="pass a list of OpenAI-format messages, a RunResult or a Trace"):
        compress(42)


def test_log_blocks_say_each_thing_once_and_show_what_the_model_sent() -> None:
    """C19: no "Failed: Error:" / "Rejected: Rejected:", raw non-JSON arguments, image parts described."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 500}}
    messages = chain(
        [("a", "boom", '{"x":1}'), ("b", "guarded", "{}"), ("c", "f", "not json"), ("d", "g", "")],
        [
            ("a", "Error: tool 'boom' raised RuntimeError: kaput"),
            ("b", "Rejected: rejected by policy"),
            ("c", [{"type": "text", "text": "see"}, image]),
            ("d", "ok"),
        ],
    )
    records = [
        execution(
            "a",
            "boom",
            '{"x":1}',
            "Error: tool 'boom' raised RuntimeError: kaput",
            "error",
            "Error: tool 'boom' raised RuntimeError: kaput",
        ),
        execution(
            "b", "guarded", "{}", "Rejected: rejected by policy", "rejected", "Rejected: rejected by policy"
        ),
    ]
    text = compress_messages(messages, executions=records)[1]["content"]
    assert "Status: ✗ Failed: tool 'boom' raised RuntimeError: kaput" in text
    assert "Status: ⚠️ Rejected: rejected by policy" in text
    assert "Arguments: not json\n" in text and "_raw" not in text and "Arguments: (none)\n" in text
    assert "see\n[image: data URL, 522 characters]" in text and "AAAA" not in text
    assert "may be garbage-collected by the system.\n" in text


def test_savings_count_what_the_model_reads_not_the_json_around_it() -> None:
    messages = chain([("a", "f", '{"q": "a \\"quoted\\" word"}')], [("a", 'line\n"two"')], final="done")
    counted = savings(messages)
    model_reads = "\n".join(["go", "f", '{"q": "a \\"quoted\\" word"}', 'line\n"two"', "done"])
    assert counted["chars_before"] == len(model_reads)

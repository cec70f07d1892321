"""Tool-chain compression: the compressed message, variables read back, the hook, what it saves."""

from __future__ import annotations

import pytest

from tests.conftest import REALDATA, needs_realdata
from toolcall_lab.clock import run_virtual
from toolcall_lab.compression import (
    CompressionConfig,
    CompressionHook,
    VariableStore,
    compress_messages,
    final_transcript,
    finished_chains,
    savings,
)
from toolcall_lab.exceptions import UsageError
from toolcall_lab.loop import Hooks, run
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.protocol import validate_messages
from toolcall_lab.scenarios import SCENARIOS, generate_corpus
from toolcall_lab.tools import ToolRegistry


def test_compressed_chain_has_hint_log_blocks_and_final_answer() -> None:
    messages = final_transcript(SCENARIOS["failing_and_hanging"].record())
    store = VariableStore()
    out = compress_messages(messages, store, CompressionConfig(preview_chars=20))
    assert [m["role"] for m in out] == ["user", "assistant"]
    text = out[1]["content"]
    assert text.startswith(
        "[System hint] Tools executed: get_weather -> ${get_weather_1}, flaky_api -> ${flaky_api_1}"
    )
    assert text.count("[Tool Execution Log]") == 3
    assert "Status: success" in text and text.count("Status: error") == 2
    assert "(full result: ${flaky_api_1}, 82 characters)" in text  # preview cut at 20 characters
    assert text.endswith("Weather is fine; the API failed and the service timed out.")
    assert store.get("flaky_api_1").startswith("Error: tool 'flaky_api' raised RuntimeError")
    assert validate_messages(out) == []


def test_read_variable_tool_returns_full_results() -> None:
    store = VariableStore()
    name = store.put("web.search", "x" * 500)
    read = store.read_variable_tool()
    assert name == "web_search_1" and read.schema()["function"]["name"] == "read_variable"
    assert read.function(name="${web_search_1}") == "x" * 500
    assert read.function(name="web_search_1", start=10, length=5) == "xxxxx"
    assert "no variable 'nope'" in read.function(name="nope")


def test_only_finished_chains_are_compressed() -> None:
    chain = final_transcript(SCENARIOS["two_tool_rounds"].record())
    in_progress = [*chain[:-1], {"role": "user", "content": "and?"}]
    assert finished_chains(chain) == [(1, 5)]
    assert finished_chains(in_progress) == []
    assert compress_messages(in_progress) == in_progress


def test_rejected_and_duplicate_results_get_rejected_status() -> None:
    messages = final_transcript(SCENARIOS["duplicate_call"].record())
    text = compress_messages(messages)[-1]["content"]
    assert text.count("Status: rejected") == 2 and text.count("Status: success") == 1


def test_hook_compresses_earlier_turns_before_each_model_call() -> None:
    tools = ToolRegistry()

    @tools.register
    def lookup(key: str) -> str:
        return f"value of {key}: " + "data " * 100

    seen = []

    def second_turn(request):
        seen.append(request.messages)
        return "done again"

    model = ScriptedModel(
        [ScriptedResponse(tool_calls=(("lookup", {"key": "a"}),)), "first answer", second_turn]
    )
    hook = CompressionHook(CompressionConfig(preview_chars=30))
    first = run_virtual(run(model, tools, "look up a", hooks=Hooks(before_model_call=hook)))
    history = [*first.messages, {"role": "user", "content": "again?"}]
    run_virtual(
        run(model, [*tools, hook.store.read_variable_tool()], history, hooks=Hooks(before_model_call=hook))
    )
    sent = seen[0]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert "${lookup_1}" in sent[1]["content"] and hook.store.get("lookup_1").startswith("value of a")


def test_bad_settings() -> None:
    with pytest.raises(UsageError, match="must contain"):
        CompressionConfig(reference="$x")


def test_savings_on_the_generated_corpus() -> None:
    rows = [savings(final_transcript(t)) for t in generate_corpus(20, seed=2)]
    assert all(r["chars_after"] < r["chars_before"] for r in rows if r["variables"])
    assert rows[0]["token_method"]


@needs_realdata
def test_savings_on_imported_real_traces() -> None:
    from toolcall_lab.importers import import_tau_bench

    traces = import_tau_bench(REALDATA / "tau-bench/historical_trajectories_gpt-4o-airline.json", limit=10)
    rows = [savings(final_transcript(t)) for t in traces]
    before = sum(r["chars_before"] for r in rows)
    after = sum(r["chars_after"] for r in rows)
    assert after < before

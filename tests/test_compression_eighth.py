"""Compression, eighth check (issue 12, the f12 tester): token counts of texts past the tokenizer's chunk
limit, statuses of calls whose ids repeat across turns, and where the log block cuts its lines."""

from __future__ import annotations

import json
import random

import pytest

from toolcall_lab import ToolOutcome
from toolcall_lab.compression import UncountableText, model_text, savings
from toolcall_lab.compression.counting import MAX_PIECE_CHARS

needs_bpe = pytest.mark.skipif(
    __import__("importlib").util.find_spec("bpe_openai") is None, reason="bpe-openai (the tokens extra)"
)


def _one_result(text: str) -> list[dict]:
    return [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": text},
        {"role": "assistant", "content": "ok"},
    ]


def _whole_count(text: str) -> int:
    """o200k_base's own count of the whole text (it encodes past its chunk limit, then refuses to return
    the tokens, saying how many there are)."""
    import bpe_openai

    encoding = bpe_openai.get_encoding("o200k_base")
    try:
        return len(encoding.encode_ordinary(text))
    except bpe_openai.TokenLimitError as exc:
        return int(exc.token_count)


# --- 2. texts past the tokenizer's chunk limit --------------------------------------------------------


@needs_bpe
@pytest.mark.parametrize(
    "text",
    [
        "".join(chr(random.Random(7).randint(0x4E00, 0x9FFF)) for _ in range(110_000)),  # the tester's
        "中文文本测试" * 20_000,  # one pre-split piece: a cut between its characters changes the count
        "ก" * 120_000,  # Thai letters, no space: one piece of more than 200,000 tokens' worth of bytes
    ],
    ids=["random-cjk", "repeated-cjk", "thai"],
)
def test_savings_counts_a_run_past_the_chunk_limit_exactly(text: str) -> None:
    """Found: 110,000 CJK characters without punctuation raised bpe_openai's TokenLimitError (211,535
    tokens > 200,000) out of savings(). CJK letters are one pre-split piece in o200k_base, so no cut
    between them is exact (the repeated phrase counts 12 tokens more cut every 997 characters): the run is
    counted whole, and the count is the tokenizer's own."""
    messages = _one_result(text)
    counted = savings(messages)
    assert counted["tokens_before"] == _whole_count(model_text(messages))
    assert counted["token_method"].startswith("o200k_base")


@needs_bpe
def test_a_run_no_tokenizer_call_can_count_is_a_clear_error_naming_the_message() -> None:
    """Past `MAX_PIECE_CHARS` without a safe cut, no exact count exists: an `UncountableText` (a
    ValueError) naming the message, its role and call id and its length, never a library's own error."""
    with pytest.raises(UncountableText) as caught:
        savings(_one_result("x" * (MAX_PIECE_CHARS + 100_000)))
    text = str(caught.value)
    assert "message 2 (tool, tool_call_id 'c1')" in text and "1,000,000 characters" in text
    assert isinstance(caught.value, ValueError) and caught.value.length == 1_000_000


# --- 7. where the log block cuts its lines ---------------------------------------------------------

_CLUSTERS = [
    "a",
    "👩\u200d💻",
    "🇫🇷",
    "e\u0301",
    "👍🏽",
    "❤\ufe0f",
    "\u1112\u1161\u11ab",
    "🏳️\u200d🌈",
    " ",
    "中",
]
"""Characters a reader sees as one (ZWJ sequences, flags, combining marks, skin tones, variation
selectors, Hangul jamo): a cut must fall between them."""


def _lines_of(messages: list[dict], prefix: str) -> list[str]:
    return [line for m in messages for line in str(m.get("content")).splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize(
    "arguments",
    [
        json.dumps({f"key{i}": "x" * 60 for i in range(10)}),  # the tester's: the line was 314 characters
        json.dumps({"q": ["y" * 40] * 9, "r": {"s": "z" * 49}, "t": "w" * 49}),
        "not json " * 60,
    ],
    ids=["json", "nested", "not-json"],
)
def test_the_arguments_line_is_at_most_300_characters_in_all(arguments: str) -> None:
    """Found: "Arguments: ..." was 314 characters (the prefix and the "..." on top of 300); the README
    promises the whole line to 300. The compact template's call line keeps the same bound."""
    from toolcall_lab.compression import CompressionConfig, compress

    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "done"},
    ]
    (line,) = _lines_of(compress(messages).messages, "Arguments: ")
    assert len(line) == 300 and line.endswith("...")
    (compact,) = _lines_of(
        compress(messages, config=CompressionConfig(template="compact")).messages, "[Tool Exe"
    )
    assert len(compact) <= 300 and compact.endswith("...)")


def test_cuts_never_split_a_character_the_reader_sees_as_one() -> None:
    """Found: the 50-character cut of an argument string split a ZWJ emoji (👩‍💻 became 👩 and a
    dangling joiner). Every cut (argument strings, the Arguments line, the result preview) now falls
    between grapheme clusters: property-tested on strings made of such clusters."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from toolcall_lab._unicode import grapheme_cut
    from toolcall_lab.compression.render import _cut

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.sampled_from(_CLUSTERS), min_size=1, max_size=80), st.integers(0, 120))
    def check(clusters: list[str], limit: int) -> None:
        text = "".join(clusters)
        kept = grapheme_cut(text, limit)
        assert len(kept) <= limit or kept == text
        bounds = {0}
        for cluster in clusters:
            bounds.add(max(bounds) + len(cluster))
        assert len(kept) in bounds, (clusters, limit, kept)
        assert len(kept) > limit - 6 or kept == text  # never more than one cluster short
        cut = _cut(text, limit)
        assert cut == text or (cut.endswith("...") and cut[:-3] == kept)

    check()


# --- 6. statuses when call ids repeat across turns ----------------------------------------------------


def _two_turns(on_complete: bool):
    """The tester's c4.py: a scripted model (ids restart at call_0_0 every run) calls the same tool with
    the same arguments in two turns; the tool answers the same text, failing the first time."""
    import asyncio
    import itertools

    from toolcall_lab.compression import CompressionHook
    from toolcall_lab.loop import Hooks, run
    from toolcall_lab.models import ScriptedModel, ScriptedResponse
    from toolcall_lab.tools import ToolRegistry

    tools = ToolRegistry()
    n = itertools.count(1)

    @tools.register
    def get_weather(city: str) -> ToolOutcome:
        """weather"""
        return ToolOutcome(text="same text", status="error" if next(n) == 1 else "ok")

    hook = CompressionHook()
    seen: list[list[dict]] = []

    def capture(messages):
        out = hook(messages)
        seen.append(out)
        return out

    hooks = Hooks(before_model_call=capture, on_tool_complete=hook.record if on_complete else None)

    async def go():
        result = None
        for turn in range(2):
            model = ScriptedModel(
                [ScriptedResponse(tool_calls=(("get_weather", {"city": "Paris"}),)), f"done {turn}"]
            )
            start = (
                "q0" if result is None else [*result.messages, {"role": "user", "content": f"q{turn + 1}"}]
            )
            result = await run(model, tools, start, hooks=hooks)
            if not on_complete:
                hook.remember(result)
        last = await run(
            ScriptedModel(["end"]), tools, [*result.messages, {"role": "user", "content": "q3"}], hooks=hooks
        )
        return result, last

    second, _ = asyncio.run(go())
    return second, seen[-1]


def _statuses(messages: list[dict]) -> list[str]:
    return _lines_of(messages, "Status: ")


@pytest.mark.parametrize("on_complete", [False, True], ids=["remember", "on_tool_complete"])
def test_a_call_whose_id_name_arguments_and_result_repeat_keeps_its_own_status(on_complete) -> None:
    """Found: the hook showed the first turn's failed call as "✓ Success" (the second turn's record, same
    id, name, arguments and result). Records of a run are now kept at the position where the run made the
    call; records given one by one are matched in order."""
    _, sent = _two_turns(on_complete)
    assert _statuses(sent) == ["Status: ✗ Failed: same text", "Status: ✓ Success"]


def test_compress_with_the_second_turns_executions_says_the_first_turns_call_was_not_recorded() -> None:
    """Found: `compress(messages, executions=<turn 2 only>)` gave turn 1's call turn 2's status. With the
    run, turn 2's call is matched where it was made and turn 1's reads "not recorded"; with its bare
    executions (no position) neither call can be told apart, so both read "not recorded"."""
    from toolcall_lab.compression import compress

    second, _ = _two_turns(False)
    messages = [*second.messages, {"role": "user", "content": "q3"}]
    first, later = _statuses(compress(messages, executions=second).messages)
    assert "Not recorded" in first and later == "Status: ✓ Success"
    bare = _statuses(compress(messages, executions=second.executions).messages)
    assert all("Not recorded" in s for s in bare) and len(bare) == 2

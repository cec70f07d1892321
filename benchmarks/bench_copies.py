"""What the loop's defensive copies cost (issue 11, second pass): every streamed chunk is copied as it
arrives (the record must not change when the model reuses a buffer or a hook rewrites a chunk), and
the conversation is copied once per model call (the model and ``before_model_call`` get their own).

Baselines measured in the same run: a whole model call through the loop's `ModelStream.receive`
(timing, parsing, recording every chunk) for the per-chunk copy, and the copy's share of it; the
chat-completions accumulator fed the same chunk. For the per-round copy: the conversation's size in
messages, against the time of the model call that follows it (a replayed 3-call response).

Prints microseconds and ratios (best of several repeats; the machine is shared, read the ratios).
Run: `python benchmarks/bench_copies.py [--quick]`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolcall_lab._copy import json_copy
from toolcall_lab._execution import Executor, Hooks
from toolcall_lab._model_call import ModelStream
from toolcall_lab.formats import ChatCompletionAccumulator, iter_sse_payloads
from toolcall_lab.models import ModelRequest, response_chunks
from toolcall_lab.tools import ToolRegistry

REAL = Path(__file__).resolve().parent.parent.parent / "shared/realdata/openai-python"
REQUEST = ModelRequest(messages=(), tools=None, round_index=0, batch=0)


def streams() -> dict[str, list[dict[str, Any]]]:
    """Chunk lists: a scripted 3-call response, a 200-chunk text answer, and real recordings if present."""
    out = {
        "scripted 3 calls": response_chunks(
            content="Let me check.",
            calls=[(f"call_{i}", "get_weather", json.dumps({"city": f"City {i}"})) for i in range(3)],
            finish_reason="tool_calls",
            usage={"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
        ),
        "text, 200 chunks": [
            {
                "id": "x",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": "word "}}],
            }
            for _ in range(200)
        ],
    }
    for path in sorted(REAL.glob("chat_stream_*.sse")) if REAL.is_dir() else []:
        out[f"real: {path.name[:40]}"] = list(iter_sse_payloads(path.read_bytes()))
    return out


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


class Replays:
    """A model yielding given chunks at once (no waits): what `receive` costs, not the network."""

    name = "replays"

    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self.chunks = chunks

    async def stream(self, request: ModelRequest) -> Any:
        for c in self.chunks:
            yield c


def main() -> None:
    quick = "--quick" in sys.argv
    repeat = 50 if quick else 400
    loop = asyncio.new_event_loop()
    executor = loop.run_until_complete(_executor())
    print(
        f"{'stream':<48} {'chunks':>6} {'copy us/chunk':>14} {'feed us/chunk':>14} {'copy/feed':>9} {'share of receive':>17}"
    )
    for name, chunks in streams().items():
        n = len(chunks)
        copy = best(lambda chunks=chunks: [json_copy(c) for c in chunks], repeat)

        def feed(chunks: list[dict[str, Any]] = chunks) -> None:
            acc = ChatCompletionAccumulator(batch=0)
            for c in chunks:
                acc.feed(c)
            acc.finish()

        fed = best(feed, repeat)
        model = Replays(chunks)
        received = best(
            lambda model=model: loop.run_until_complete(ModelStream(model, REQUEST, executor).receive(None)),
            repeat,
        )
        print(
            f"{name:<48} {n:>6} {copy / n * 1e6:>14.2f} {fed / n * 1e6:>14.2f} {copy / fed:>9.2f} {copy / received:>16.1%}"
        )
    print("\nper model call: the conversation copied for the model (a replayed 3-call response after it)")
    chunks = streams()["scripted 3 calls"]
    received = best(
        lambda: loop.run_until_complete(ModelStream(Replays(chunks), REQUEST, executor).receive(None)), repeat
    )
    for size in (10, 100, 1000):
        messages = _conversation(size)
        copied = best(lambda messages=messages: json_copy(messages), max(10, repeat // 10))
        print(
            f"  {size:>5} messages: copy {copied * 1e6:>8.1f} us = {copied / received:.2f}x the model call's handling"
        )
    loop.close()


async def _executor() -> Executor:
    return Executor(ToolRegistry(), Hooks(), asyncio.get_running_loop().time())


def _conversation(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "Weather in three cities?"}]
    while len(out) < n:
        calls = [
            {
                "id": f"c{len(out)}_{i}",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "X"}'},
            }
            for i in range(3)
        ]
        out.append({"role": "assistant", "content": None, "tool_calls": calls})
        out += [{"role": "tool", "tool_call_id": c["id"], "content": "18°C, light rain " * 20} for c in calls]
    return out[:n]


if __name__ == "__main__":
    main()

"""Parser speed against named baselines measured in the same run (issue: parsing).

Baselines:
  minimal   a dict-by-index accumulator written here: list of pieces, one join + json.loads per call
  sdk       openai's ChatCompletionStreamState fed the same chunks (as SDK objects)
  json-line decoding each `data:` line of the SSE bytes with the standard json module

Prints, per stream shape, our time / baseline time. Targets: <= 1.5x minimal, >= 100x faster than
sdk, end to end from SSE bytes <= 1.2x json-line. Run: `python benchmarks/bench_parse.py [--quick]`.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from toolcall_lab.formats import ChatCompletionAccumulator, iter_sse_payloads

PIECE = 12  # characters per argument delta, about what OpenAI models stream


def make_stream(n_calls: int, arg_bytes: int, interleave: bool) -> list[dict[str, Any]]:
    def chunk(tc: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
        delta: dict[str, Any] = {"tool_calls": [tc]} if tc else {}
        return {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    per_call = []
    for i in range(n_calls):
        args = json.dumps({"text": "x" * max(arg_bytes - 12, 1)})
        pieces = [args[j : j + PIECE] for j in range(0, len(args), PIECE)]
        chunks = [
            chunk(
                {
                    "index": i,
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": f"tool_{i}", "arguments": ""},
                }
            )
        ]
        chunks += [chunk({"index": i, "function": {"arguments": p}}) for p in pieces]
        per_call.append(chunks)
    out = [chunk()]
    if interleave:
        for group in zip(*per_call, strict=True):
            out.extend(group)
    else:
        for lst in per_call:
            out.extend(lst)
    out.append(chunk(finish="tool_calls"))
    return out


def ours(chunks: list[dict[str, Any]]) -> Any:
    acc = ChatCompletionAccumulator()
    for c in chunks:
        acc.feed(c)
    return acc.finish()


def minimal(chunks: list[dict[str, Any]]) -> Any:
    calls: dict[int, dict[str, Any]] = {}
    for c in chunks:
        for choice in c["choices"]:
            for tc in choice["delta"].get("tool_calls") or ():
                entry = calls.setdefault(tc["index"], {"id": None, "name": None, "pieces": []})
                if tc.get("id"):
                    entry["id"] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    entry["name"] = fn["name"]
                if fn.get("arguments"):
                    entry["pieces"].append(fn["arguments"])
    return [(e["id"], e["name"], json.loads("".join(e["pieces"]))) for _, e in sorted(calls.items())]


def sdk(chunks: list[Any]) -> Any:
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state: Any = ChatCompletionStreamState()
    for c in chunks:
        state.handle_chunk(c)
    return state.current_completion_snapshot


def json_lines(body: bytes) -> Any:
    out = []
    for line in body.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


def ours_sse(body: bytes) -> Any:
    acc = ChatCompletionAccumulator()
    for payload in iter_sse_payloads(body):
        acc.feed(payload)
    return acc.finish()


def best(fn: Callable[[Any], Any], arg: Any, budget: float) -> float:
    times: list[float] = []
    deadline = time.perf_counter() + budget
    while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 200):
        t0 = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    quick = "--quick" in sys.argv
    budget = 0.05 if quick else 0.3
    from openai.types.chat import ChatCompletionChunk

    print(
        f"{'calls':>5} {'args':>6} {'inter':>5} {'chunks':>6} | {'ours ms':>8} {'/minimal':>8} "
        f"{'sdk/ours':>9} | {'sse/json-line':>13}"
    )
    r_min, r_sdk, r_sse = [], [], []
    for n_calls in (1, 4, 16):
        for arg_bytes in (50, 2_000, 50_000):
            for interleave in (False, True):
                if n_calls == 1 and interleave:
                    continue
                chunks = make_stream(n_calls, arg_bytes, interleave)
                assert [(c.tool_call_id, c.name, c.args) for c in ours(chunks).tool_calls] == minimal(chunks)
                t_ours = best(ours, chunks, budget)
                t_min = best(minimal, chunks, budget)
                sdk_chunks = [ChatCompletionChunk.construct(**c) for c in chunks]
                sdk_chunks = [ChatCompletionChunk.model_validate(c) for c in chunks]
                t_sdk = best(sdk, sdk_chunks, budget if len(chunks) < 5000 else 0.0)
                body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"
                t_sse = best(ours_sse, body, budget)
                t_jl = best(json_lines, body, budget)
                r_min.append(t_ours / t_min)
                r_sdk.append(t_sdk / t_ours)
                r_sse.append(t_sse / t_jl)
                print(
                    f"{n_calls:>5} {arg_bytes:>6} {interleave!s:>5} {len(chunks):>6} | {t_ours * 1e3:>8.3f} "
                    f"{t_ours / t_min:>8.2f} {t_sdk / t_ours:>9.0f} | {t_sse / t_jl:>13.2f}"
                )
    print(
        f"\nours / minimal accumulator: median {statistics.median(r_min):.2f}x, worst {max(r_min):.2f}x "
        "(target <= 1.5x)"
    )
    print(
        f"ChatCompletionStreamState / ours: median {statistics.median(r_sdk):.0f}x, "
        f"least {min(r_sdk):.0f}x (target >= 100x)"
    )
    print(
        f"SSE bytes end to end / json.loads per data line: median {statistics.median(r_sse):.2f}x, "
        f"worst {max(r_sse):.2f}x (target <= 1.2x)"
    )


if __name__ == "__main__":
    main()

"""Writes data/recordings/*: scripted provider-style streams the project makes itself.

Run ``python data/make_recordings.py``; the output is deterministic. These are *scripted* bytes, not
captures from a provider: they exercise the quirks real providers show (see ../shared/realdata for
real ones) in a file small enough to read.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent / "recordings"


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {
        "id": "chatcmpl-scripted-1",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "scripted-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def weather_news_stock() -> list[dict]:
    """Text, then three calls interleaved by index; ids only on first deltas; args split mid-string."""
    calls = [
        ("call_w1", "get_weather", '{"city": "Paris", "unit": "celsius"}'),
        ("call_n2", "get_news", '{"topic": "Paris", "limit": 3}'),
        ("call_s3", "get_stock", '{"ticker": "AIR.PA"}'),
    ]
    out = [_chunk({"role": "assistant", "content": "Checking three sources at once. "})]
    for i, (cid, name, _) in enumerate(calls):
        out.append(
            _chunk(
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
    pieces = [[a[:7], a[7:19], a[19:]] for _, _, a in calls]
    for step in range(3):
        for i in range(3):
            out.append(_chunk({"tool_calls": [{"index": i, "function": {"arguments": pieces[i][step]}}]}))
    out.append(_chunk({}, finish="tool_calls"))
    out.append(
        {
            "id": "chatcmpl-scripted-1",
            "object": "chat.completion.chunk",
            "created": 1767225600,
            "model": "scripted-model",
            "choices": [],
            "usage": {"prompt_tokens": 120, "completion_tokens": 61, "total_tokens": 181},
        }
    )
    return out


def main() -> None:
    HERE.mkdir(exist_ok=True)
    body = "".join(f"data: {json.dumps(c, separators=(',', ':'))}\n\n" for c in weather_news_stock())
    (HERE / "scripted_weather_news_stock.sse").write_text(body + "data: [DONE]\n\n", encoding="utf-8")


if __name__ == "__main__":
    main()

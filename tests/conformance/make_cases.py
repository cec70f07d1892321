"""Writes the conformance corpus: one small input per provider quirk + what parsing it must give.

Every input here is written by this project (bytes modelled on the public issue or documentation
each case names; nothing is copied from recordings). Run ``python tests/conformance/make_cases.py``
to rewrite the files; `tests/test_conformance.py` checks that the committed files are what this
script writes. A case can also be added by hand: see ``tests/conformance/README.md``.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES: dict[str, tuple[bytes, dict[str, Any]]] = {}


def case(name: str, data: bytes | str, **spec: Any) -> None:
    if name in CASES:
        raise ValueError(f"duplicate case {name}")
    CASES[name] = (data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data, spec)


def js(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-conf",
        "object": "chat.completion.chunk",
        "created": 1732000000,
        "model": "conformance-model",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        **extra,
    }


def header(index: int | None, call_id: str | None, name: str | None, args: Any = "") -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if index is not None:
        entry["index"] = index
    if call_id is not None:
        entry["id"] = call_id
        entry["type"] = "function"
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    fn["arguments"] = args
    entry["function"] = fn
    return {"tool_calls": [entry]}


def more(index: int | None, args: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        entry = {"index": index, **entry}
    return {"tool_calls": [entry]}


def sse(payloads: list[Any], *, done: bool = True, eol: str = "\n") -> str:
    out = "".join(f"data: {p if isinstance(p, str) else js(p)}{eol}{eol}" for p in payloads)
    return out + (f"data: [DONE]{eol}{eol}" if done else "")


def events(pairs: list[tuple[str, Any]]) -> str:
    return "".join(f"event: {name}\ndata: {js(data)}\n\n" for name, data in pairs)


def call(call_id: str, name: str, arguments: str, **extra: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments, **extra}


def block_event(kind: str, index: int, **fields: Any) -> tuple[str, dict[str, Any]]:
    """One Anthropic stream event about content block ``index`` (event name repeated as its type)."""
    return kind, {"type": kind, "index": index, **fields}


def tool_use_start(index: int, tool_id: str, name: str, kind: str = "tool_use") -> tuple[str, dict[str, Any]]:
    return block_event(
        "content_block_start", index, content_block={"type": kind, "id": tool_id, "name": name, "input": {}}
    )


def input_delta(index: int, partial_json: str) -> tuple[str, dict[str, Any]]:
    return block_event(
        "content_block_delta", index, delta={"type": "input_json_delta", "partial_json": partial_json}
    )


def block_stop(index: int) -> tuple[str, dict[str, Any]]:
    return block_event("content_block_stop", index)


WEATHER = '{"city":"Paris"}'
ROLE = chunk({"role": "assistant", "content": None})


def weather_stream(pieces: tuple[str, ...] = ('{"ci', 'ty":"Pa', 'ris"}')) -> list[Any]:
    return [
        ROLE,
        chunk(header(0, "call_w1", "get_weather", "")),
        *[chunk(more(0, p)) for p in pieces],
        chunk(finish="tool_calls"),
    ]


# ---------------------------------------------------------------------------------------------
# 1. SSE framing (WHATWG rules)
SPEC = "https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation"
ONE_CALL = {
    "responses": [{"calls": [call("call_w1", "get_weather", WEATHER)], "absent": ["malformed_chunk"]}]
}

case(
    "sse/bom_at_start.sse",
    "\ufeff" + sse(weather_stream()),
    quirk="UTF-8 byte order mark at the start of the stream",
    category="sse-framing",
    provider="any SSE server (spec rule)",
    models=SPEC + " (one leading U+FEFF is stripped)",
    expect=ONE_CALL,
)
case(
    "sse/unicode_line_separators_in_json.sse",
    sse(
        [
            ROLE,
            chunk({"content": "line\u2028break\u2029para\u0085nel "}),
            chunk(header(0, "call_w1", "note", "")),
            chunk(more(0, '{"text":"a\u2028b')),
            chunk(more(0, '\u2029c\u0085d"}')),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="raw U+2028, U+2029 and NEL inside JSON strings (str.splitlines breaks on them)",
    category="sse-framing",
    provider="OpenAI / MCP servers",
    models="https://github.com/openai/openai-python/issues/1230 ; "
    "https://github.com/modelcontextprotocol/python-sdk/issues/1356",
    expect={"responses": [{"calls": [call("call_w1", "note", '{"text":"a\u2028b\u2029c\u0085d"}')]}]},
)
case(
    "sse/cr_only_line_endings.sse",
    sse(weather_stream(), eol="\r"),
    quirk="CR-only line endings",
    category="sse-framing",
    provider="any SSE server (spec rule)",
    models=SPEC + " (CR, LF and CRLF all end a line)",
    expect=ONE_CALL,
)
case(
    "sse/crlf_line_endings.sse",
    sse(weather_stream(), eol="\r\n"),
    quirk="CRLF line endings",
    category="sse-framing",
    provider="IIS / .NET-hosted gateways",
    models=SPEC,
    expect=ONE_CALL,
)
case(
    "sse/comments_and_keepalives.sse",
    ": OPENROUTER PROCESSING\n\n"
    + sse(weather_stream()[:2], done=False)
    + ": keep-alive\n\n:\n\n"
    + sse(weather_stream()[2:]),
    quirk="comment lines (': keep-alive', ': OPENROUTER PROCESSING')",
    category="sse-framing",
    provider="OpenRouter",
    models="https://openrouter.ai/docs/api-reference/streaming (comments to keep the connection open)",
    expect=ONE_CALL,
)
case(
    "sse/retry_id_and_unknown_fields.sse",
    "retry: 3000\n\n"
    + "".join(f"id: {n}\nevent: message\ndata: {js(p)}\n\n" for n, p in enumerate(weather_stream()))
    + "data: [DONE]\n\n",
    quirk="retry:, id: and event: message fields",
    category="sse-framing",
    provider="watsonx / vLLM-served",
    models=SPEC + " (retry and unknown fields are ignored)",
    expect=ONE_CALL,
)
case(
    "sse/empty_data_events.sse",
    "data:\n\n"
    + sse(weather_stream()[:2], done=False)
    + "data: \n\nevent: ping\ndata:\n\n"
    + sse(weather_stream()[2:]),
    quirk="empty data: lines and events with empty data (no payload)",
    category="sse-framing",
    provider="any SSE server (spec rule)",
    models=SPEC + " (an empty data buffer is not dispatched)",
    expect=ONE_CALL,
)
case(
    "sse/multiline_data.sse",
    "".join("data: " + js(p).replace(",", ",\ndata: ", 2) + "\n\n" for p in weather_stream())
    + "data: [DONE]\n\n",
    quirk="one event's data split over several data: lines (joined with a newline)",
    category="sse-framing",
    provider="any SSE server (spec rule)",
    models=SPEC + " (data lines are joined with U+000A)",
    expect=ONE_CALL,
)
case(
    "sse/no_trailing_newline.sse",
    sse(weather_stream(), done=False) + "data: [DONE]",
    quirk="no newline after the last line of the file",
    category="sse-framing",
    provider="llama.cpp server",
    models="https://github.com/darshi1337/apogee/pull/139 ('data: [DONE] arrives with no trailing blank line')",
    expect=ONE_CALL,
)
case(
    "sse/unterminated_last_event.sse",
    sse(weather_stream()[:-1], done=False) + "data: " + js(chunk(finish="tool_calls")),
    quirk="the last event is not closed by a blank line (file cut after its data line)",
    category="sse-framing",
    provider="recordings cut at the end",
    models="https://github.com/IBM/watsonx-ai-java-sdk (resources end without [DONE] or blank line)",
    expect={
        "responses": [
            {"calls": [call("call_w1", "get_weather", WEATHER)], "findings": ["sse_unterminated_event"]}
        ]
    },
)
case(
    "sse/leading_space_before_field.sse",
    " " + sse(weather_stream()),
    quirk="whitespace before the field name (' data: {...}')",
    category="sse-framing",
    provider="OpenRouter / Novita (kimi-k2)",
    models="https://github.com/simonw/llm tests/cassettes/test_tools_streaming (variant c body starts with ' data:')",
    expect={
        "responses": [
            {"calls": [call("call_w1", "get_weather", WEATHER)], "findings": ["sse_nonstandard_line"]}
        ]
    },
)
case(
    "sse/sse_saved_as_jsonl.chunks.jsonl",
    sse(weather_stream()),
    quirk="an SSE body (data: lines) saved under a .jsonl name",
    category="sse-framing",
    provider="recordings renamed by hand",
    models=SPEC,
    expect=ONE_CALL,
)
case(
    "sse/jsonl_crlf_bom.chunks.jsonl",
    "\ufeff" + "".join(js(p) + "\r\n" for p in weather_stream()) + "\r\n",
    quirk="JSON-lines chunks with a BOM, CRLF and a blank last line",
    category="sse-framing",
    provider="vercel/ai raw-chunk recordings edited on Windows",
    models="https://github.com/vercel/ai (packages/*/src/__fixtures__/*.chunks.txt)",
    expect=ONE_CALL,
)


# ---------------------------------------------------------------------------------------------
# 2. JSON text
def escaped(payloads: list[Any]) -> list[str]:
    """Payloads as ASCII JSON: lone surrogates become \\udXXX escapes, as JSON.stringify writes them."""
    return [json.dumps(p, separators=(",", ":")) for p in payloads]


case(
    "json/lone_surrogate_escape.sse",
    sse(
        escaped(
            [
                ROLE,
                chunk({"content": "cut emoji: \ud83d"}),
                chunk(header(0, "call_t1", "echo", "")),
                chunk(more(0, '{"text":"\ud83d"}')),
                chunk(finish="tool_calls"),
            ]
        )
    ),
    quirk="an escaped lone surrogate (\\ud83d): legal JSON that a fast decoder refuses",
    category="json-text",
    provider="Node-based servers slicing UTF-16 strings",
    models="https://github.com/rllm-org/rllm/pull/879 (orjson rejects lone surrogate escapes; "
    "JSON.stringify emits them)",
    expect={
        "responses": [
            {
                "calls": [call("call_t1", "echo", '{"text":"\ud83d"}')],
                "findings": ["lone_surrogate", "lone_surrogate"],
            }
        ]
    },
)
case(
    "json/surrogate_pair_split_across_chunks.sse",
    sse(
        escaped(
            [
                ROLE,
                chunk({"content": "smile \ud83d"}),
                chunk({"content": "\ude00!"}),
                chunk(header(0, "call_t2", "react", "")),
                chunk(more(0, '{"emoji":"\ud83d')),
                chunk(more(0, '\ude00"}')),
                chunk(finish="tool_calls"),
            ]
        )
    ),
    quirk="a surrogate pair split across two chunks (\\ud83d ... \\ude00)",
    category="json-text",
    provider="OpenRouter (surrogates in streamed delta.content)",
    models="https://github.com/Kohaku-Lab/KohakuTerrarium/pull/48",
    expect={
        "responses": [
            {
                "calls": [call("call_t2", "react", '{"emoji":"\U0001f600"}')],
                "findings": ["split_surrogate_pair", "split_surrogate_pair"],
            }
        ]
    },
)

# ---------------------------------------------------------------------------------------------
# 3. Provider errors
ERR_PARTIAL = [ROLE, chunk(header(0, "call_e1", "get_weather", "")), chunk(more(0, '{"city":"Par'))]
case(
    "errors/openrouter_error_chunk_with_choices.sse",
    sse(
        [
            *ERR_PARTIAL,
            chunk(
                {"content": ""},
                "error",
                provider="Novita",
                error={"code": "server_error", "message": "Provider disconnected unexpectedly"},
            ),
        ]
    ),
    quirk="an error object on a chunk that also carries choices (finish_reason: error)",
    category="provider-errors",
    provider="OpenRouter",
    models="https://openrouter.ai/docs/api-reference/streaming (errors during streaming)",
    expect={
        "responses": [
            {
                "calls": [call("call_e1", "get_weather", '{"city":"Par', complete=False)],
                "findings": ["incomplete_arguments", "provider_error"],
                "error": "Provider disconnected unexpectedly",
            }
        ],
        "raises": {"type": "ProviderStreamError", "message": "Provider disconnected unexpectedly"},
    },
)
case(
    "errors/llamacpp_error_field.sse",
    sse(ERR_PARTIAL, done=False)
    + 'error: {"code":400,"message":"the request exceeds the available context size","type":"invalid_request_error"}\n\n'
    + "data: [DONE]\n\n",
    quirk="an error: SSE field instead of data:",
    category="provider-errors",
    provider="llama.cpp server (before 2025-09)",
    models="https://github.com/ggml-org/llama.cpp/issues/16104 , fixed by /pull/16109",
    expect={
        "responses": [
            {
                "calls": [call("call_e1", "get_weather", '{"city":"Par', complete=False)],
                "findings": ["incomplete_arguments", "provider_error"],
                "error": "the request exceeds the available context size",
            }
        ],
        "raises": {"type": "ProviderStreamError", "message": "exceeds the available context size"},
    },
)
case(
    "errors/event_error_frame.sse",
    sse(ERR_PARTIAL, done=False)
    + "event: error\n"
    + 'data: {"error":{"message":"Tool call validation failed: parameters for tool get_weather did not match schema",'
    + '"type":"invalid_request_error","code":"tool_use_failed"}}\n\n',
    quirk="an event: error frame ends an HTTP 200 stream",
    category="provider-errors",
    provider="Groq",
    models="https://github.com/pydantic/pydantic-ai tests/models/cassettes/test_groq/test_tool_use_failed_error_streaming.yaml",
    expect={
        "responses": [
            {
                "calls": [call("call_e1", "get_weather", '{"city":"Par', complete=False)],
                "findings": ["incomplete_arguments", "provider_error"],
                "error": "Tool call validation failed",
            }
        ],
        "raises": {"type": "ProviderStreamError", "message": "tool_use_failed"},
    },
)
case(
    "errors/event_error_plain_text.sse",
    sse(ERR_PARTIAL, done=False) + "event: error\ndata: upstream timed out\n\n",
    quirk="an event: error frame whose data is plain text",
    category="provider-errors",
    provider="proxies (LiteLLM-style gateways)",
    models=SPEC + " (event types are free text; the data need not be JSON)",
    expect={
        "responses": [
            {
                "calls": [call("call_e1", "get_weather", '{"city":"Par', complete=False)],
                "findings": ["incomplete_arguments", "provider_error"],
                "error": "upstream timed out",
            }
        ]
    },
)
case(
    "errors/openai_error_payload_midstream.sse",
    sse(
        [
            *ERR_PARTIAL,
            {
                "error": {
                    "message": "The server had an error while processing your request.",
                    "type": "server_error",
                }
            },
        ],
        done=False,
    ),
    quirk="a data: payload that is only an error object (no choices)",
    category="provider-errors",
    provider="OpenAI",
    models="https://github.com/coder/coder aibridge/fixtures/openai/chatcompletions/stream_error.txtar",
    expect={
        "responses": [
            {
                "calls": [call("call_e1", "get_weather", '{"city":"Par', complete=False)],
                "findings": ["incomplete_arguments", "provider_error"],
                "error": "The server had an error while processing your request",
            }
        ]
    },
)
case(
    "errors/data_after_error_payload.sse",
    sse(
        [
            *ERR_PARTIAL,
            {"error": {"message": "upstream reset", "type": "server_error"}},
            ROLE,
            chunk(header(0, "call_w1", "get_weather", WEATHER)),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="a proxy keeps streaming after an error payload (a retried upstream)",
    category="provider-errors",
    provider="OpenAI-compatible proxies retrying upstream",
    models="https://github.com/coder/coder aibridge/fixtures/openai/chatcompletions/stream_error.txtar",
    expect={
        "responses": [
            {
                "calls": [call("call_e1", "get_weather", '{"city":"Par', complete=False)],
                "findings": ["incomplete_arguments", "provider_error"],
                "error": "upstream reset",
            },
            {"calls": [call("call_w1", "get_weather", WEATHER)], "findings": ["data_after_error"]},
        ],
        "raises": {"type": "ProviderStreamError", "message": "upstream reset"},
    },
)
case(
    "errors/finish_reason_error_without_object.sse",
    sse([*ERR_PARTIAL, chunk({}, "error")]),
    quirk="finish_reason: error with no error object",
    category="provider-errors",
    provider="OpenRouter",
    models="https://openrouter.ai/docs/api-reference/streaming ('error' finish reason)",
    expect={
        "responses": [
            {
                "calls": [call("call_e1", "get_weather", '{"city":"Par', complete=False)],
                "findings": ["incomplete_arguments", "provider_error"],
                "error": "finish_reason 'error'",
            }
        ]
    },
)
case(
    "errors/error_body.json",
    js(
        {
            "error": {
                "message": "Rate limit reached for gpt-4o",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        }
    ),
    quirk="the whole response body is an error object",
    category="provider-errors",
    provider="OpenAI",
    models="https://platform.openai.com/docs/guides/error-codes",
    expect={
        "responses": [{"calls": [], "findings": ["provider_error"], "error": "Rate limit reached"}],
        "raises": {"type": "ProviderStreamError", "message": "rate_limit_exceeded"},
    },
)
case(
    "errors/error_body_instead_of_stream.sse",
    js({"error": {"code": 402, "message": "Insufficient credits"}}) + "\n",
    quirk="a stream recording that holds a JSON error body instead of events",
    category="provider-errors",
    provider="OpenRouter",
    models="https://openrouter.ai/docs/api-reference/errors (error body with the HTTP status)",
    expect={"responses": [{"calls": [], "findings": ["provider_error"], "error": "Insufficient credits"}]},
)
case(
    "errors/vllm_error_object.json",
    js(
        {
            "object": "error",
            "message": "This model's maximum context length is 8192 tokens",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    ),
    quirk="an error body shaped {object: error, message, type, code}",
    category="provider-errors",
    provider="vLLM",
    models="https://github.com/vllm-project/vllm (entrypoints/openai ErrorResponse)",
    expect={
        "responses": [
            {"calls": [], "findings": ["provider_error"], "error": "maximum context length is 8192 tokens"}
        ]
    },
)
case(
    "errors/json_lines_in_sse_file.sse",
    "".join(js(p) + "\n" for p in ERR_PARTIAL)
    + js({"error": {"message": "stream aborted", "code": 500}})
    + "\n",
    quirk="a stream saved as JSON lines (no data: prefix) under .sse, ending in an error",
    category="provider-errors",
    provider="custom recorders / proxies logging payloads",
    models="https://github.com/vercel/ai (raw chunk logs, one JSON payload per line)",
    expect={
        "responses": [
            {
                "calls": [call("call_e1", "get_weather", '{"city":"Par', complete=False)],
                "findings": ["incomplete_arguments", "provider_error"],
                "error": "stream aborted",
            }
        ]
    },
)
case(
    "errors/anthropic_overloaded_midstream.sse",
    events(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_conf1",
                        "model": "claude-conf",
                        "content": [],
                        "usage": {"input_tokens": 10},
                    },
                },
            ),
            tool_use_start(0, "toolu_done", "get_time"),
            input_delta(0, '{"tz":"UTC"}'),
            block_stop(0),
            tool_use_start(1, "toolu_cut", "get_weather"),
            input_delta(1, '{"city": "Pa'),
            ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ]
    ),
    quirk="an error event (overloaded_error) in the middle of a stream",
    category="anthropic",
    provider="Anthropic",
    models="https://docs.anthropic.com/en/docs/build-with-claude/streaming#error-events",
    expect={
        "responses": [
            {
                "calls": [
                    call("toolu_done", "get_time", '{"tz":"UTC"}'),
                    call("toolu_cut", "get_weather", '{"city": "Pa', complete=False),
                ],
                "findings": ["incomplete_arguments", "provider_error"],
                "error": "Overloaded",
            }
        ],
        "raises": {"type": "ProviderStreamError", "message": "overloaded_error"},
    },
)

# ---------------------------------------------------------------------------------------------
# 4. Chat completions
case(
    "chat/legacy_function_call_stream.sse",
    sse(
        [
            ROLE,
            chunk({"function_call": {"name": "get_weather", "arguments": ""}}),
            chunk({"function_call": {"arguments": '{"city"'}}),
            chunk({"function_call": {"arguments": ':"Paris"}'}}),
            chunk(finish="function_call"),
        ]
    ),
    quirk="the deprecated function_call field, streamed",
    category="chat-completions",
    provider="Azure OpenAI (older API versions)",
    models="https://platform.openai.com/docs/api-reference/chat/streaming (delta.function_call, deprecated)",
    expect={
        "responses": [
            {
                "calls": [call("fallback", "get_weather", WEATHER)],
                "findings": ["legacy_function_call", "missing_id"],
            }
        ]
    },
)
case(
    "chat/legacy_function_call_body.json",
    js(
        {
            "id": "chatcmpl-conf",
            "object": "chat.completion",
            "model": "gpt-35-turbo-0613",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "function_call",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "function_call": {"name": "get_weather", "arguments": WEATHER},
                    },
                }
            ],
        }
    ),
    quirk="the deprecated function_call field in a whole message",
    category="chat-completions",
    provider="Azure OpenAI (older API versions)",
    models="https://platform.openai.com/docs/api-reference/chat/object (message.function_call, deprecated)",
    expect={
        "responses": [
            {
                "calls": [call("fallback", "get_weather", WEATHER)],
                "findings": ["legacy_function_call", "missing_id"],
            }
        ]
    },
)
case(
    "chat/index_zero_reused_for_every_call.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_a", "file_write", '{"filePath":"hello.py","content":"print(1)"}')),
            chunk(header(0, "call_b", "file_write", '{"filePath":"world.py","content":"print(2)"}')),
            chunk(header(0, "call_c", "list_dir", '{"path":"."}')),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="every call sent at index 0 (a new id in a later chunk is a new call)",
    category="chat-completions",
    provider="Ollama",
    models="https://github.com/ollama/ollama/issues/15457",
    expect={
        "responses": [
            {
                "calls": [
                    call("call_a", "file_write", '{"filePath":"hello.py","content":"print(1)"}'),
                    call("call_b", "file_write", '{"filePath":"world.py","content":"print(2)"}'),
                    call("call_c", "list_dir", '{"path":"."}'),
                ],
                "findings": ["index_reused", "index_reused"],
                "absent": ["invalid_arguments", "id_changed"],
            }
        ]
    },
)
case(
    "chat/index_reused_streamed_arguments.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_a", "get_weather", "")),
            chunk(more(0, '{"city":')),
            chunk(more(0, '"Paris"}')),
            chunk(header(0, "call_b", "get_weather", "")),
            chunk(more(0, '{"city":')),
            chunk(more(0, '"Rome"}')),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="index 0 reused, arguments streamed in pieces after each header",
    category="chat-completions",
    provider="DeepSeek / Qwen (OpenAI-compatible)",
    models="https://github.com/cloudwego/eino/pull/961",
    expect={
        "responses": [
            {
                "calls": [
                    call("call_a", "get_weather", WEATHER),
                    call("call_b", "get_weather", '{"city":"Rome"}'),
                ],
                "findings": ["index_reused"],
            }
        ]
    },
)
case(
    "chat/new_id_on_every_fragment.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_1", "get_weather", "")),
            *[
                chunk(
                    {
                        "tool_calls": [
                            {"index": 0, "id": f"call_{n + 2}", "function": {"name": "", "arguments": piece}}
                        ]
                    }
                )
                for n, piece in enumerate(['{"c', 'ity"', ':"Par', 'is"}'])
            ],
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="a different id on every argument fragment of one call",
    category="chat-completions",
    provider="LM Studio",
    models="https://github.com/NousResearch/hermes-agent/pull/106943 (fixes #5254)",
    expect={"responses": [{"calls": [call("call_1", "get_weather", WEATHER)], "findings": ["id_changed"]}]},
)
case(
    "chat/name_split_across_deltas.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_n1", "get_wea", '{"ci')),
            chunk({"tool_calls": [{"index": 0, "function": {"name": "ther", "arguments": 'ty":"Paris"}'}}]}),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="a function name split across deltas ('get_wea' + 'ther')",
    category="chat-completions",
    provider="Gemini (OpenAI-compatible) / LM Studio",
    models="https://github.com/continuedev/continue/pull/5849 ; https://github.com/ankit373/hydra/issues/957",
    expect={"responses": [{"calls": [call("call_n1", "get_weather", WEATHER)], "findings": ["split_name"]}]},
)
case(
    "chat/full_name_on_every_delta.sse",
    sse(
        [
            chunk({"role": "assistant", **header(0, "0", "get_weather", piece)})
            for piece in ("", '{"city"', ':"Paris"}')
        ],
    ),
    quirk="the full name (and id) repeated on every delta, no finish_reason",
    category="chat-completions",
    provider="OpenRouter / Novita (kimi-k2)",
    models="https://github.com/simonw/llm tests/cassettes/test_tools_streaming (variant a)",
    expect={
        "responses": [
            {
                "calls": [call("0", "get_weather", WEATHER)],
                "findings": ["repeated_header", "no_finish_reason"],
                "absent": ["split_name"],
            }
        ]
    },
)
case(
    "chat/arguments_as_object_stream.sse",
    sse([ROLE, chunk(header(0, "call_o1", "get_weather", {"city": "Paris"})), chunk(finish="tool_calls")]),
    quirk="arguments sent as a JSON object instead of a string (streamed)",
    category="chat-completions",
    provider="llama.cpp server",
    models="https://github.com/ggml-org/llama.cpp/issues/20198",
    expect={
        "responses": [
            {"calls": [call("call_o1", "get_weather", WEATHER)], "findings": ["arguments_not_string"]}
        ]
    },
)
case(
    "chat/arguments_as_object_body.json",
    js(
        {
            "id": "chatcmpl-conf",
            "object": "chat.completion",
            "model": "local",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {
                                "id": "call_o2",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                            }
                        ],
                    },
                }
            ],
        }
    ),
    quirk="arguments sent as a JSON object instead of a string (whole message)",
    category="chat-completions",
    provider="llama.cpp server",
    models="https://github.com/ggml-org/llama.cpp/pull/20202",
    expect={
        "responses": [
            {"calls": [call("call_o2", "get_weather", WEATHER)], "findings": ["arguments_not_string"]}
        ]
    },
)
case(
    "chat/arguments_null.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_z1", "get_time", None)),
            chunk(header(1, "call_z2", "get_weather", None)),
            chunk(more(1, WEATHER)),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="arguments: null (on a header, and for a tool without parameters)",
    category="chat-completions",
    provider="vLLM / TGI (OpenAI-compatible)",
    models="https://github.com/huggingface/text-generation-inference/issues/2136",
    expect={
        "responses": [
            {
                "calls": [call("call_z1", "get_time", ""), call("call_z2", "get_weather", WEATHER)],
                "findings": ["empty_arguments"],
            }
        ]
    },
)
case(
    "chat/no_index_two_calls.sse",
    sse(
        [
            chunk(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"id": "gSIMJ1", "function": {"name": "get_weather", "arguments": WEATHER}}
                    ],
                }
            ),
            chunk(
                {
                    "tool_calls": [
                        {"id": "gSIMJ2", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}}
                    ]
                },
                "tool_calls",
            ),
        ]
    ),
    quirk="tool-call deltas without index, one whole call per delta",
    category="chat-completions",
    provider="Mistral",
    models="https://github.com/vercel/ai packages/mistral/src/__fixtures__/mistral-tool-call.chunks.txt",
    expect={
        "responses": [
            {
                "calls": [
                    call("gSIMJ1", "get_weather", WEATHER),
                    call("gSIMJ2", "get_weather", '{"city":"Rome"}'),
                ],
                "findings": ["missing_index", "missing_index"],
            }
        ]
    },
)
case(
    "chat/empty_id_no_index_same_function_twice.sse",
    sse(
        [
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": WEATHER},
                        }
                    ],
                }
            ),
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                        }
                    ],
                },
                "tool_calls",
            ),
        ]
    ),
    quirk="id '' and no index; the same function called twice",
    category="chat-completions",
    provider="Gemini (OpenAI-compatible)",
    models="https://github.com/shediao/ai.cli tests/test_stream_response.cc (id '' and no index)",
    expect={
        "responses": [
            {
                "calls": [
                    call("fallback", "get_weather", WEATHER),
                    call("fallback", "get_weather", '{"city":"Rome"}'),
                ],
                "findings": ["empty_id", "empty_id", "missing_index", "missing_index"],
            }
        ]
    },
)
case(
    "chat/two_calls_same_index_one_chunk.sse",
    sse(
        [
            ROLE,
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_p",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": "{}"},
                        },
                        {
                            "index": 0,
                            "id": "call_q",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": WEATHER},
                        },
                    ]
                }
            ),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="two complete calls with the same index in one chunk",
    category="chat-completions",
    provider="OpenAI-compatible gateways flattening parallel calls",
    models="https://github.com/earendil-works/pi/issues/8861",
    expect={
        "responses": [
            {
                "calls": [call("call_p", "get_time", "{}"), call("call_q", "get_weather", WEATHER)],
                "findings": ["duplicate_index_in_chunk"],
            }
        ]
    },
)

case(
    "chat/no_ids_index_zero_same_function_twice.sse",
    sse(
        [
            ROLE,
            chunk(header(0, None, "get_weather", "")),
            chunk(more(0, WEATHER)),
            chunk(header(0, None, "get_weather", "")),
            chunk(more(0, '{"city":"Rome"}')),
            chunk(header(0, None, "get_weather", "")),  # a trailing repeat: no arguments follow
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="no ids, index 0 for every call, the same function twice (name first, arguments after)",
    category="chat-completions",
    provider="small OpenAI-compatible servers (llama.cpp forks, LocalAI)",
    models="https://github.com/ollama/ollama/issues/15457 (index 0 reuse) + "
    "https://github.com/IBM/watsonx-ai-java-sdk (streams without ids)",
    expect={
        "responses": [
            {
                "calls": [
                    call("fallback", "get_weather", WEATHER),
                    call("fallback", "get_weather", '{"city":"Rome"}'),
                ],
                "findings": ["index_reused", "missing_id", "missing_id"],
                "absent": ["invalid_arguments"],
            }
        ]
    },
)

# ---------------------------------------------------------------------------------------------
# 5. Anthropic
MSG_START = (
    "message_start",
    {
        "type": "message_start",
        "message": {"id": "msg_conf", "model": "claude-conf", "content": [], "usage": {"input_tokens": 20}},
    },
)
MSG_END = [
    (
        "message_delta",
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 40}},
    ),
    ("message_stop", {"type": "message_stop"}),
]
WEB_SEARCH_BLOCKS = [  # a server-run web search: its call (block 0) and its result (block 1)
    tool_use_start(0, "srvtoolu_conf1", "web_search", kind="server_tool_use"),
    input_delta(0, '{"query": "weather Paris"}'),
    block_stop(0),
    block_event(
        "content_block_start",
        1,
        content_block={
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_conf1",
            "content": [
                {
                    "type": "web_search_result",
                    "title": "Paris weather",
                    "url": "https://example.org/paris",
                    "encrypted_content": "xyz",
                    "page_age": None,
                }
            ],
        },
    ),
    block_stop(1),
]
case(
    "anthropic/server_tool_use_web_search.sse",
    events(
        [
            MSG_START,
            *WEB_SEARCH_BLOCKS,
            block_event("content_block_start", 2, content_block={"type": "text", "text": ""}),
            block_event("content_block_delta", 2, delta={"type": "text_delta", "text": "It is sunny."}),
            block_stop(2),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 40},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    ),
    quirk="server_tool_use + web_search_tool_result: run by Anthropic, not a client call",
    category="anthropic",
    provider="Anthropic (web search tool)",
    models="https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool",
    expect={
        "responses": [
            {
                "calls": [],
                "server_calls": [
                    {"id": "srvtoolu_conf1", "name": "web_search", "result_type": "web_search_tool_result"}
                ],
                "findings": ["server_tool_call"],
            }
        ]
    },
)
case(
    "anthropic/server_and_client_tools_mixed.sse",
    events(
        [
            MSG_START,
            *WEB_SEARCH_BLOCKS,
            tool_use_start(2, "toolu_conf2", "save_note"),
            input_delta(2, '{"text": "sunny"}'),
            block_stop(2),
            *MSG_END,
        ]
    ),
    quirk="server_tool_use mixed with client tool_use in one message",
    category="anthropic",
    provider="Anthropic (web search tool)",
    models="https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool",
    expect={
        "responses": [
            {
                "calls": [call("toolu_conf2", "save_note", '{"text": "sunny"}')],
                "findings": ["server_tool_call"],
                "server_calls": [
                    {"id": "srvtoolu_conf1", "name": "web_search", "result_type": "web_search_tool_result"}
                ],
            }
        ]
    },
)
case(
    "anthropic/server_tool_use_body.json",
    js(
        {
            "id": "msg_conf3",
            "type": "message",
            "role": "assistant",
            "model": "claude-conf",
            "stop_reason": "tool_use",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_conf3",
                    "name": "web_search",
                    "input": {"query": "weather Paris"},
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_conf3",
                    "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
                },
                {"type": "tool_use", "id": "toolu_conf4", "name": "get_weather", "input": {"city": "Paris"}},
            ],
        }
    ),
    quirk="server_tool_use with an error result, and a client tool_use, in a whole message",
    category="anthropic",
    provider="Anthropic (web search tool)",
    models="https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool#errors",
    expect={
        "responses": [
            {
                "calls": [call("toolu_conf4", "get_weather", WEATHER)],
                "findings": ["server_tool_call"],
                "server_calls": [
                    {"id": "srvtoolu_conf3", "name": "web_search", "result_type": "web_search_tool_result"}
                ],
            }
        ]
    },
)
case(
    "anthropic/tool_use_without_arguments.chunks.jsonl",
    "".join(
        js(p) + "\n"
        for _, p in [
            MSG_START,
            tool_use_start(0, "toolu_conf5", "list_files"),
            input_delta(0, ""),
            block_stop(0),
            *MSG_END,
        ]
    ),
    quirk="a tool_use whose only input_json_delta is empty (input {})",
    category="anthropic",
    provider="Anthropic",
    models="https://github.com/vercel/ai packages/anthropic/src/__fixtures__/anthropic-tool-no-args.chunks.txt",
    expect={"responses": [{"calls": [call("toolu_conf5", "list_files", "{}")]}]},
)


# ---------------------------------------------------------------------------------------------
# 6. OpenAI Responses API
def resp(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return kind, {"type": kind, **fields}


CREATED = resp(
    "response.created",
    response={"id": "resp_conf", "status": "in_progress", "model": "gpt-conf", "output": []},
)


def completed(output: list[Any], status: str = "completed", **extra: Any) -> tuple[str, dict[str, Any]]:
    kind = {
        "completed": "response.completed",
        "incomplete": "response.incomplete",
        "failed": "response.failed",
    }[status]
    return resp(
        kind, response={"id": "resp_conf", "status": status, "model": "gpt-conf", "output": output, **extra}
    )


FC = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_r1",
    "name": "get_weather",
    "arguments": WEATHER,
    "status": "completed",
}


def call_added(item: dict[str, Any], output_index: int = 0) -> tuple[str, dict[str, Any]]:
    """``output_item.added`` for a function call that has not streamed any arguments yet."""
    return resp(
        "response.output_item.added",
        output_index=output_index,
        item={**item, "arguments": "", "status": "in_progress"},
    )


def args_delta(delta: str, output_index: int = 0) -> tuple[str, dict[str, Any]]:
    """A ``function_call_arguments.delta`` for FC's item (fc_1)."""
    return resp(
        "response.function_call_arguments.delta", output_index=output_index, item_id="fc_1", delta=delta
    )


FC2 = {
    "type": "function_call",
    "id": "fc_2",
    "call_id": "call_r2",
    "name": "get_time",
    "arguments": '{"tz":"CET"}',
    "status": "completed",
}
CUSTOM_CALL = {
    "type": "custom_tool_call",
    "id": "ctc_1",
    "call_id": "call_c1",
    "name": "code_exec",
    "input": "print(1 + 1)",
    "status": "completed",
}
case(
    "responses/custom_tool_call.sse",
    events(
        [
            CREATED,
            resp(
                "response.output_item.added",
                output_index=0,
                item={**CUSTOM_CALL, "input": "", "status": "in_progress"},
            ),
            resp("response.custom_tool_call_input.delta", output_index=0, item_id="ctc_1", delta="print("),
            resp("response.custom_tool_call_input.delta", output_index=0, item_id="ctc_1", delta="1 + 1)"),
            resp(
                "response.custom_tool_call_input.done", output_index=0, item_id="ctc_1", input="print(1 + 1)"
            ),
            resp(
                "response.output_item.done",
                output_index=0,
                item=CUSTOM_CALL,
            ),
            completed([CUSTOM_CALL]),
        ]
    ),
    quirk="custom_tool_call items with custom_tool_call_input.delta / .done (free-form input)",
    category="responses",
    provider="OpenAI Responses API (GPT-5 custom tools)",
    models="https://platform.openai.com/docs/guides/function-calling#custom-tools",
    expect={
        "responses": [
            {
                "calls": [call("call_c1", "code_exec", "print(1 + 1)", kind="custom")],
                "findings": ["custom_tool_call"],
            }
        ]
    },
)
case(
    "responses/completed_output_is_authoritative.sse",
    events(
        [
            CREATED,
            call_added(FC),
            args_delta('{"city":'),
            completed(
                [
                    FC,
                    FC2,
                ]
            ),
        ]
    ),
    quirk="deltas and items missed: response.completed output used as the authoritative list",
    category="responses",
    provider="OpenAI-compatible Responses servers dropping events",
    models="https://platform.openai.com/docs/api-reference/responses-streaming/response/completed",
    expect={
        "responses": [
            {
                "calls": [
                    call("call_r1", "get_weather", WEATHER),
                    call("call_r2", "get_time", '{"tz":"CET"}'),
                ],
                "findings": ["arguments_mismatch", "recovered_from_completed"],
            }
        ]
    },
)
case(
    "responses/output_item_done_never_announced.sse",
    events(
        [
            CREATED,
            resp("response.output_item.done", output_index=0, item=FC),
            completed([FC]),
        ]
    ),
    quirk="an output_item.done for an item never announced",
    category="responses",
    provider="LM Studio / Ollama Responses endpoints",
    models="https://github.com/vercel/ai packages/open-responses/src/responses/__fixtures__/lmstudio-tool-call.1.chunks.txt",
    expect={
        "responses": [{"calls": [call("call_r1", "get_weather", WEATHER)], "findings": ["unannounced_item"]}]
    },
)
case(
    "responses/arguments_done_differs.sse",
    events(
        [
            CREATED,
            call_added(FC),
            args_delta('{"city":"Par'),
            args_delta('is"}{"city":"Paris"}'),
            resp("response.function_call_arguments.done", output_index=0, item_id="fc_1", arguments=WEATHER),
            resp("response.output_item.done", output_index=0, item=FC),
            completed([FC]),
        ]
    ),
    quirk="function_call_arguments.done differs from the concatenated deltas",
    category="responses",
    provider="Azure OpenAI Responses (duplicated delta)",
    models="https://platform.openai.com/docs/api-reference/responses-streaming/response/function_call_arguments/done",
    expect={
        "responses": [
            {"calls": [call("call_r1", "get_weather", WEATHER)], "findings": ["arguments_mismatch"]}
        ]
    },
)
case(
    "responses/interleaved_by_output_index.sse",
    events(
        [
            CREATED,
            call_added(FC, output_index=1),
            call_added(FC2, output_index=2),
            resp("response.function_call_arguments.delta", output_index=2, delta='{"tz":'),
            resp("response.function_call_arguments.delta", output_index=1, delta='{"city":'),
            resp("response.function_call_arguments.delta", output_index=2, delta='"CET"}'),
            resp("response.function_call_arguments.delta", output_index=1, delta='"Paris"}'),
            resp("response.output_item.done", output_index=1, item=FC),
            resp("response.output_item.done", output_index=2, item=FC2),
            completed([{"type": "reasoning", "id": "rs_1", "summary": []}, FC, FC2]),
        ]
    ),
    quirk="two calls interleaved, deltas keyed only by output_index",
    category="responses",
    provider="OpenAI-compatible Responses servers (no item_id on deltas)",
    models="https://platform.openai.com/docs/api-reference/responses-streaming (output_index on every event)",
    expect={
        "responses": [
            {"calls": [call("call_r1", "get_weather", WEATHER), call("call_r2", "get_time", '{"tz":"CET"}')]}
        ]
    },
)
case(
    "responses/response_failed.sse",
    events(
        [
            CREATED,
            call_added(FC),
            args_delta('{"city":"Pa'),
            completed(
                [],
                "failed",
                error={"code": "server_error", "message": "The model failed to generate a response."},
            ),
        ]
    ),
    quirk="response.failed ends the stream",
    category="responses",
    provider="OpenAI Responses API",
    models="https://platform.openai.com/docs/api-reference/responses-streaming/response/failed",
    expect={
        "responses": [
            {
                "calls": [call("call_r1", "get_weather", '{"city":"Pa', complete=False)],
                "findings": ["incomplete_arguments", "provider_error"],
                "error": "The model failed to generate a response",
            }
        ],
        "raises": {"type": "ProviderStreamError", "message": "server_error"},
    },
)
case(
    "responses/response_incomplete.sse",
    events(
        [
            CREATED,
            call_added(FC),
            args_delta('{"city":"Pa'),
            completed([], "incomplete", incomplete_details={"reason": "max_output_tokens"}),
        ]
    ),
    quirk="response.incomplete (max_output_tokens) with a call cut short",
    category="responses",
    provider="OpenAI Responses API",
    models="https://platform.openai.com/docs/api-reference/responses-streaming/response/incomplete",
    expect={
        "responses": [
            {
                "calls": [call("call_r1", "get_weather", '{"city":"Pa', complete=False)],
                "findings": ["incomplete_arguments", "incomplete_response", "not_in_completed"],
            }
        ]
    },
)
RESP_DOCS = "https://platform.openai.com/docs/api-reference/responses-streaming"
case(
    "responses/call_only_in_completed.sse",
    events([CREATED, completed([FC])]),
    quirk="a call that only response.completed lists (no item events at all)",
    category="responses",
    provider="OpenAI-compatible Responses servers dropping events",
    models=RESP_DOCS + "/response/completed",
    expect={
        "responses": [
            {"calls": [call("call_r1", "get_weather", WEATHER)], "findings": ["recovered_from_completed"]}
        ]
    },
)
case(
    "responses/deltas_before_item_only_in_completed.sse",
    events([CREATED, args_delta('{"city":'), args_delta('"Paris"}'), completed([FC])]),
    quirk="argument deltas for an item that is announced only by response.completed",
    category="responses",
    provider="OpenAI-compatible Responses servers dropping output_item.added",
    models=RESP_DOCS + "/response/function_call_arguments/delta",
    expect={
        "responses": [
            {
                "calls": [call("call_r1", "get_weather", WEATHER)],
                "findings": ["recovered_delta", "recovered_from_completed"],
            }
        ]
    },
)
case(
    "responses/completed_renames_the_call.sse",
    events([CREATED, call_added(FC), args_delta(WEATHER), completed([{**FC, "name": "get_time"}])]),
    quirk="response.completed names an item differently than output_item.added",
    category="responses",
    provider="OpenAI-compatible Responses servers",
    models=RESP_DOCS + "/response/completed",
    expect={
        "responses": [{"calls": [call("call_r1", "get_weather", WEATHER)], "findings": ["name_changed"]}]
    },
)
case(
    "responses/completed_changes_the_call_id.sse",
    events([CREATED, call_added(FC), args_delta(WEATHER), completed([{**FC, "call_id": "call_r9"}])]),
    quirk="response.completed gives an item another call_id than output_item.added",
    category="responses",
    provider="OpenAI-compatible Responses servers",
    models=RESP_DOCS + "/response/completed",
    expect={"responses": [{"calls": [call("call_r1", "get_weather", WEATHER)], "findings": ["id_changed"]}]},
)
case(
    "responses/arguments_done_for_an_item_never_announced.sse",
    events(
        [
            CREATED,
            resp(
                "response.function_call_arguments.done",
                output_index=0,
                item_id="fc_z",
                arguments='{"z":1}',
            ),
        ]
    ),
    quirk="function_call_arguments.done for an item never announced, stream cut after it",
    category="responses",
    provider="OpenAI-compatible Responses servers dropping events",
    models=RESP_DOCS + "/response/function_call_arguments/done",
    expect={
        "responses": [
            {
                "calls": [call("fallback", "", '{"z":1}', complete=False)],
                "findings": ["missing_id", "missing_name", "no_finish_reason", "orphan_delta"],
            }
        ]
    },
)
case(
    "responses/error_event.sse",
    events(
        [
            CREATED,
            resp(
                "error",
                code="ERR_RATE",
                message="Rate limit exceeded while streaming",
                param=None,
                sequence_number=2,
            ),
        ]
    ),
    quirk="an error event in a Responses stream",
    category="responses",
    provider="OpenAI Responses API",
    models="https://platform.openai.com/docs/api-reference/responses-streaming/error",
    expect={
        "responses": [
            {"calls": [], "findings": ["provider_error"], "error": "Rate limit exceeded while streaming"}
        ]
    },
)
case(
    "responses/web_search_call_server_item.sse",
    events(
        [
            CREATED,
            resp(
                "response.output_item.added",
                output_index=0,
                item={"type": "web_search_call", "id": "ws_1", "status": "in_progress"},
            ),
            resp("response.web_search_call.searching", output_index=0, item_id="ws_1"),
            resp(
                "response.output_item.done",
                output_index=0,
                item={
                    "type": "web_search_call",
                    "id": "ws_1",
                    "status": "completed",
                    "action": {"type": "search", "query": "weather Paris"},
                },
            ),
            call_added(FC, output_index=1),
            args_delta(WEATHER, output_index=1),
            resp("response.output_item.done", output_index=1, item=FC),
            completed(
                [
                    {
                        "type": "web_search_call",
                        "id": "ws_1",
                        "status": "completed",
                        "action": {"type": "search", "query": "weather Paris"},
                    },
                    FC,
                ]
            ),
        ]
    ),
    quirk="a web_search_call item (run by OpenAI) next to a function_call",
    category="responses",
    provider="OpenAI Responses API (web search tool)",
    models="https://platform.openai.com/docs/guides/tools-web-search",
    expect={
        "responses": [
            {
                "calls": [call("call_r1", "get_weather", WEATHER)],
                "findings": ["server_tool_call"],
                "server_calls": [{"id": "ws_1", "name": "web_search", "result_type": "web_search_call"}],
            }
        ]
    },
)


# ---------------------------------------------------------------------------------------------
# 7. Cassettes
def cassette(interactions: list[tuple[int, dict[str, list[str]], str]]) -> str:
    """A vcrpy YAML cassette; a body given as bytes is written as !!binary, as vcrpy does."""
    import base64

    lines = ["interactions:"]
    for status, headers, body in interactions:
        lines += [
            "- request:",
            '    body: \'{"model": "m"}\'',
            "    headers: {}",
            "    method: POST",
            "    uri: https://api.example.org/v1/chat/completions",
            "  response:",
        ]
        if isinstance(body, bytes):
            encoded = base64.encodebytes(body).decode().rstrip("\n").replace("\n", "\n        ")
            lines += ["    body:", "      string: !!binary |", f"        {encoded}"]
        else:
            lines += ["    body:", f"      string: {json.dumps(body)}"]
        lines.append("    headers:")
        for key, values in headers.items():
            lines.append(f"      {key}:")
            lines += [f"      - {v}" for v in values]
        lines += [
            "    status:",
            f"      code: {status}",
            "      message: OK" if status < 400 else "      message: Error",
        ]
    lines.append("version: 1")
    return "\n".join(lines) + "\n"


SSE_TEXT = sse(weather_stream())
case(
    "cassettes/binary_gzip_body.yaml",
    cassette(
        [
            (
                200,
                {"Content-Encoding": ["gzip"], "Content-Type": ["text/event-stream"]},
                gzip.compress(SSE_TEXT.encode(), mtime=0),
            )
        ]
    ),
    quirk="a !!binary gzip body, decoded by its recorded content-encoding",
    category="cassettes",
    provider="vcrpy (decode_compressed_response off)",
    models="https://github.com/kevin1024/vcrpy/issues/249",
    expect=ONE_CALL,
)
case(
    "cassettes/binary_plain_body.yaml",
    cassette(
        [
            (
                200,
                {"Content-Type": ["text/event-stream; charset=utf-8"]},
                sse(weather_stream(('{"city":', '"Zürich"}'))).encode(),
            )
        ]
    ),
    quirk="a !!binary body of plain UTF-8 bytes (no content-encoding)",
    category="cassettes",
    provider="vcrpy",
    models="https://github.com/kevin1024/vcrpy (bytes bodies are written as !!binary)",
    expect={"responses": [{"calls": [call("call_w1", "get_weather", '{"city":"Zürich"}')]}]},
)
case(
    "cassettes/http_error_then_success.yaml",
    cassette(
        [
            (
                429,
                {"Content-Type": ["application/json"]},
                js({"error": {"message": "Rate limit reached", "type": "requests"}}),
            ),
            (200, {"Content-Type": ["text/event-stream"]}, SSE_TEXT),
        ]
    ),
    quirk="a recorded 429 error body, then the retried successful stream",
    category="cassettes",
    provider="vcrpy recordings of retried requests",
    models="https://platform.openai.com/docs/guides/rate-limits",
    expect={
        "responses": [
            {"calls": [], "findings": ["provider_error"], "error": "Rate limit reached"},
            {"calls": [call("call_w1", "get_weather", WEATHER)]},
        ],
        "raises": {"type": "ProviderStreamError", "message": "Rate limit reached"},
    },
)


# ---------------------------------------------------------------------------------------------
# 8. Second pass (issue 10): what a fresh-eyes tester found. Each case is a provider behaviour;
# the bytes are written here, modelled on the public report or documentation it names.
TWO_CALLS = [
    ROLE,
    chunk(header(0, "call_a", "get_weather", "")),
    chunk(more(0, WEATHER)),
    chunk(header(1, "call_b", "get_time", "")),
]

case(
    "sse/done_with_extra_whitespace.sse",
    "".join(f"data: {js(p)}\n\n" for p in weather_stream())
    + "data:  [DONE]\n\n"
    + "".join(f"data: {js(p)}\n\n" for p in weather_stream())
    + "data:\t[DONE]\n\n",
    quirk="the end marker with extra whitespace ('data:  [DONE]', 'data:\\t[DONE]')",
    category="sse-framing",
    provider="Azure OpenAI / OpenAI-compatible gateways",
    models="https://github.com/continuedev/continue/pull/5580 ('data:[DONE]' spacing varies); "
    "https://github.com/davidmigloz/langchain_dart/pull/791 (whitespace around the marker)",
    expect={
        "responses": [
            {"calls": [call("call_w1", "get_weather", WEATHER)], "absent": ["unreadable_data"]},
            {"calls": [call("call_w1", "get_weather", WEATHER)], "findings": ["data_after_done"]},
        ]
    },
)
case(
    "sse/jsonl_first_line_with_data_prefix.chunks.jsonl",
    "".join(("data: " if n == 0 else "") + js(p) + "\n" for n, p in enumerate(weather_stream())),
    quirk="JSON lines whose first line kept the SSE 'data: ' prefix (the rest are bare JSON)",
    category="sse-framing",
    provider="hand-saved stream transcripts (curl output pasted into a .chunks.jsonl)",
    models="https://github.com/maximhq/bifrost/pull/5262 (JSON outside SSE framing must not be dropped)",
    expect={
        "responses": [
            {
                "calls": [call("call_w1", "get_weather", WEATHER)],
                "findings": ["sse_raw_json", "sse_raw_json", "sse_raw_json", "sse_raw_json", "sse_raw_json"],
            }
        ]
    },
)
case(
    "errors/openrouter_choice_error_object.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_o1", "get_weather", "")),
            chunk(more(0, '{"city":')),
            {
                **chunk(),
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": ""},
                        "finish_reason": "error",
                        "native_finish_reason": "error",
                        "error": {"code": 502, "message": "Upstream provider returned 502"},
                    }
                ],
            },
        ]
    ),
    quirk="an error object inside the choice (choices[0].error) with finish_reason 'error'",
    category="provider-errors",
    provider="OpenRouter",
    models="https://openrouter.ai/docs/api-reference/overview (StreamingChoice: error?: ErrorResponse)",
    expect={
        "responses": [
            {
                "calls": [call("call_o1", "get_weather", '{"city":', complete=False)],
                "error": "Upstream provider returned 502",
                "findings": ["incomplete_arguments", "provider_error"],
            }
        ],
        "raises": {"type": "ProviderStreamError", "message": "Upstream provider returned 502"},
    },
)
case(
    "errors/openrouter_choice_error_object_without_finish_reason.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_o2", "get_weather", "")),
            chunk(more(0, '{"city":"Oslo"}')),
            {
                **chunk(),
                "choices": [
                    {
                        "index": 0,
                        "delta": {},
                        "finish_reason": None,
                        "error": {"code": 502, "message": "Upstream provider disconnected"},
                    }
                ],
            },
        ]
    ),
    quirk="an error object inside the choice without a finish reason (the error alone ends the stream)",
    category="provider-errors",
    provider="OpenRouter",
    models="https://openrouter.ai/docs/api-reference/overview (StreamingChoice: error?: ErrorResponse; "
    "finish_reason nullable)",
    expect={
        "responses": [
            {
                "calls": [call("call_o2", "get_weather", '{"city":"Oslo"}', complete=False)],
                "error": "Upstream provider disconnected",
                "findings": ["provider_error", "unfinished_call"],
            }
        ],
        "raises": {"type": "ProviderStreamError", "message": "Upstream provider disconnected"},
    },
)
case(
    "errors/openrouter_choice_error_object_body.json",
    js(
        {
            "id": "gen-conf",
            "object": "chat.completion",
            "model": "conformance-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "error",
                    "message": {"role": "assistant", "content": ""},
                    "error": {"code": 429, "message": "Rate limit exceeded upstream"},
                }
            ],
        }
    ),
    quirk="a whole body whose choice carries the error object",
    category="provider-errors",
    provider="OpenRouter",
    models="https://openrouter.ai/docs/api-reference/overview (NonStreamingChoice: error?: ErrorResponse)",
    expect={
        "responses": [{"calls": [], "error": "Rate limit exceeded upstream", "findings": ["provider_error"]}],
        "raises": {"type": "ProviderStreamError", "message": "Rate limit exceeded upstream"},
    },
)
GEMINI_ERROR_LIST = [
    {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
        }
    }
]
case(
    "errors/gemini_error_list_body.json",
    json.dumps(GEMINI_ERROR_LIST, indent=2),
    quirk="an error body that is a JSON array of error objects",
    category="provider-errors",
    provider="Gemini (generativelanguage REST API)",
    models='https://github.com/Simpleyyt/ai-manus/issues/101 ([{"error": {...}}] error bodies)',
    expect={
        "responses": [{"calls": [], "error": "Resource has been exhausted", "findings": ["provider_error"]}],
        "raises": {"type": "ProviderStreamError", "message": "Resource has been exhausted"},
    },
)
case(
    "errors/event_error_without_data.sse",
    sse(TWO_CALLS[:3], done=False) + "event: error\n\n",
    quirk="an 'event: error' frame with no data line after a complete call",
    category="provider-errors",
    provider="OpenAI-compatible proxies signalling a failure with a bare error event",
    models="https://github.com/openai/openai-python/pull/2943 (events with no data; the 'error' event "
    "check); " + SPEC,
    expect={
        "responses": [
            {
                "calls": [call("call_a", "get_weather", WEATHER, complete=False)],
                "error": "error event without a message",
                "findings": ["provider_error", "unfinished_call"],
            }
        ],
        "raises": {"type": "ProviderStreamError", "message": "error event without a message"},
    },
)
case(
    "errors/raw_error_json_midstream.sse",
    sse(TWO_CALLS, done=False)
    + json.dumps(
        {"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}},
        indent=2,
    )
    + "\n",
    quirk="a pretty-printed JSON error written into the stream without 'data:' after a call header",
    category="provider-errors",
    provider="Gemini / Vertex AI (OpenAI-compatible endpoint)",
    models="https://github.com/maximhq/bifrost/pull/5262 (JSON error injected outside SSE framing)",
    expect={
        "responses": [
            {
                "calls": [
                    call("call_a", "get_weather", WEATHER, complete=False),
                    call("call_b", "get_time", "", complete=False),
                ],
                "error": "Resource has been exhausted",
                "findings": ["sse_raw_json", "provider_error", "unfinished_call", "incomplete_arguments"],
                "absent": ["empty_arguments"],
            }
        ],
        "raises": {"type": "ProviderStreamError", "message": "Resource has been exhausted"},
    },
)
case(
    "errors/error_event_inside_unclosed_event.sse",
    sse(TWO_CALLS[:2], done=False)
    + "data: "
    + js(chunk(more(0, '{"city":"Par')))[:60]
    + "\n"
    + "data: "
    + js({"type": "error", "error": {"type": "upstream_error", "message": "stream_read_error"}})
    + "\n\n",
    quirk="an error payload appended to an event that was cut and never closed (one event, two JSON texts)",
    category="provider-errors",
    provider="OpenAI-compatible relays injecting their own error event",
    models="https://github.com/Wei-Shaw/sub2api/issues/1471",
    expect={
        "responses": [
            {
                "calls": [call("call_a", "get_weather", "", complete=False)],
                "error": "stream_read_error",
                "findings": [
                    "sse_nonstandard_line",
                    "unreadable_data",
                    "provider_error",
                    "incomplete_arguments",
                ],
            }
        ],
        "raises": {"type": "SSEDecodeError", "message": "line 5: data is not JSON"},
    },
)
case(
    "json/bedrock_converse_body.json",
    js(
        {
            "output": {
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "toolUse": {
                                "toolUseId": "tooluse_conf1",
                                "name": "get_weather",
                                "input": {"city": "Paris"},
                            }
                        }
                    ],
                }
            },
            "stopReason": "tool_use",
            "usage": {"inputTokens": 20, "outputTokens": 12, "totalTokens": 32},
        }
    ),
    quirk="an AWS Bedrock Converse body (an 'output' key, but not the Responses API)",
    category="json-text",
    provider="AWS Bedrock Converse",
    models="https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html",
    expect={"raises": {"type": "UnknownFormatError", "message": "Bedrock Converse"}},
)
case(
    "json/chunk_saved_as_body.json",
    js(chunk(header(0, "call_k1", "get_weather", WEATHER), finish="tool_calls")),
    quirk="one chat.completion.chunk saved as a whole response body (choices carry delta, not message)",
    category="json-text",
    provider="any (a streamed response logged as if it were whole)",
    models="https://platform.openai.com/docs/api-reference/chat-streaming/streaming (the chunk object)",
    expect={
        "responses": [{"calls": [call("call_k1", "get_weather", WEATHER)], "findings": ["chunk_as_body"]}]
    },
)
case(
    "chat/cut_after_call_header.sse",
    sse(TWO_CALLS, done=False).rstrip("\n") + "\n",
    quirk="the stream is cut right after a call's header (arguments ''), no finish_reason, no [DONE]",
    category="chat-completions",
    provider="any (a dropped connection); DeepSeek and OpenRouter reports",
    models="https://github.com/NousResearch/hermes-agent/issues/80498 ; "
    "https://github.com/OpenRouterTeam/ai-sdk-provider/issues/558",
    expect={
        "responses": [
            {
                "calls": [
                    call("call_a", "get_weather", WEATHER),
                    call("call_b", "get_time", "", complete=False),
                ],
                "findings": ["no_finish_reason", "incomplete_arguments", "sse_unterminated_event"],
                "absent": ["empty_arguments"],
            }
        ]
    },
)
case(
    "chat/cut_after_call_header_null_arguments.sse",
    sse([*TWO_CALLS[:3], chunk(header(1, "call_b", "get_time", None))], done=False),
    quirk="the stream ends after a call header whose arguments are null",
    category="chat-completions",
    provider="any (a dropped connection)",
    models="https://github.com/OpenRouterTeam/ai-sdk-provider/issues/558",
    expect={
        "responses": [
            {
                "calls": [
                    call("call_a", "get_weather", WEATHER),
                    call("call_b", "get_time", "", complete=False),
                ],
                "findings": ["no_finish_reason", "incomplete_arguments"],
            }
        ]
    },
)
case(
    "chat/same_id_new_name_after_complete_arguments.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_s1", "get_weather", WEATHER)),
            chunk(header(0, "call_s1", "get_time", '{"tz":"UTC"}')),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="the same id and index, a new function name, after the first call's arguments are complete",
    category="chat-completions",
    provider="OpenAI-compatible servers reusing one id",
    models="https://github.com/unslothai/unsloth/pull/9817 (ids repeated once arguments are complete); "
    "https://github.com/NousResearch/hermes-agent/pull/102953 (calls sharing a key concatenated)",
    expect={
        "responses": [
            {
                "calls": [
                    call("call_s1", "get_weather", WEATHER),
                    call("call_s1", "get_time", '{"tz":"UTC"}'),
                ],
                "findings": ["index_reused", "duplicate_tool_call_id"],
                "absent": ["split_name", "invalid_arguments"],
            }
        ]
    },
)
case(
    "chat/new_id_and_name_on_every_fragment.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_f1", "get_weather", "")),
            chunk(header(0, "call_f2", "get_weather", '{"city":')),
            chunk(header(0, "call_f3", "get_weather", '"Paris"}')),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="a new id and the full name repeated on every argument fragment",
    category="chat-completions",
    provider="LM Studio / Fireworks-served models",
    models="https://github.com/SillyTavern/SillyTavern/pull/5948 (id, type, name repeated on every chunk)",
    expect={
        "responses": [
            {
                "calls": [call("call_f1", "get_weather", WEATHER)],
                "findings": ["id_changed", "repeated_header"],
                "absent": ["index_reused", "empty_arguments"],
            }
        ]
    },
)
case(
    "chat/content_filter_finish.sse",
    sse([*weather_stream()[:-1], chunk(finish="content_filter")]),
    quirk="finish_reason 'content_filter' on a response with a complete call",
    category="chat-completions",
    provider="Azure OpenAI",
    models="https://learn.microsoft.com/en-us/azure/ai-foundry/openai/concepts/content-filter "
    "(finish_reason content_filter: output withheld)",
    expect={
        "responses": [
            {
                "calls": [call("call_w1", "get_weather", WEATHER, complete=False)],
                "findings": ["filtered_finish", "unfinished_call"],
            }
        ]
    },
)
case(
    "chat/two_choices.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_c0", "get_weather", WEATHER)),
            {
                **chunk(),
                "choices": [
                    {
                        "index": 1,
                        "delta": header(0, "call_c1", "get_time", '{"tz":"UTC"}'),
                        "finish_reason": None,
                    }
                ],
            },
            chunk(finish="tool_calls"),
            {**chunk(), "choices": [{"index": 1, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
    ),
    quirk="n=2: a second choice with its own call (only choice 0 goes to the run loop)",
    category="chat-completions",
    provider="OpenAI (n > 1)",
    models="https://platform.openai.com/docs/api-reference/chat/create#chat-create-n",
    expect={
        "responses": [
            {
                "calls": [
                    call("call_c0", "get_weather", WEATHER),
                    call("call_c1", "get_time", '{"tz":"UTC"}'),
                ],
                "findings": ["extra_choices"],
            }
        ]
    },
)
case(
    "anthropic/cut_after_tool_use_block_start.sse",
    events(
        [
            MSG_START,
            tool_use_start(0, "toolu_cut1", "write_file"),
        ]
    ),
    quirk="the stream ends right after a tool_use block starts (input {} is a placeholder, not arguments)",
    category="anthropic",
    provider="Anthropic (a dropped connection)",
    models="https://github.com/NousResearch/hermes-agent/pull/81017 (the Anthropic path of a mid-call drop)",
    expect={
        "responses": [
            {
                "calls": [call("toolu_cut1", "write_file", "", complete=False)],
                "findings": ["no_finish_reason", "incomplete_arguments"],
            }
        ]
    },
)
case(
    "anthropic/refusal_stop_reason.sse",
    events(
        [
            MSG_START,
            tool_use_start(0, "toolu_ref1", "get_weather"),
            input_delta(0, WEATHER),
            block_stop(0),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "refusal"}}),
            ("message_stop", {"type": "message_stop"}),
        ]
    ),
    quirk="stop_reason 'refusal' on a message with a complete tool_use",
    category="anthropic",
    provider="Anthropic (streaming classifiers)",
    models="https://docs.anthropic.com/en/docs/test-and-evaluate/strengthen-guardrails/handle-streaming-refusals",
    expect={
        "responses": [
            {
                "calls": [call("toolu_ref1", "get_weather", WEATHER, complete=False)],
                "findings": ["filtered_finish", "unfinished_call"],
            }
        ]
    },
)
SPLIT_PAIR_FC = {**FC, "arguments": '{"emoji":"\U0001f600"}'}
case(
    "responses/surrogate_pair_split_across_deltas.sse",
    "".join(
        f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
        for name, data in [
            CREATED,
            call_added(FC),
            resp(
                "response.function_call_arguments.delta",
                item_id="fc_1",
                output_index=0,
                delta='{"emoji":"\ud83d',
            ),
            resp("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta='\ude00"}'),
            resp(
                "response.function_call_arguments.done",
                item_id="fc_1",
                output_index=0,
                arguments=SPLIT_PAIR_FC["arguments"],
            ),
            resp("response.output_item.done", output_index=0, item=SPLIT_PAIR_FC),
            completed([SPLIT_PAIR_FC]),
        ]
    ),
    quirk="a surrogate pair split across two argument deltas; .done holds the joined character",
    category="responses",
    provider="OpenAI Responses API (deltas cut at UTF-16 units)",
    models="https://github.com/Kohaku-Lab/KohakuTerrarium/pull/48 (split surrogate pairs in streamed deltas)",
    expect={
        "responses": [
            {
                "calls": [call("call_r1", "get_weather", '{"emoji":"\U0001f600"}')],
                "findings": ["split_surrogate_pair"],
                "absent": ["arguments_mismatch"],
            }
        ]
    },
)
LOCAL_SHELL = {
    "type": "local_shell_call",
    "id": "lsh_1",
    "call_id": "call_ls1",
    "status": "completed",
    "action": {"type": "exec", "command": ["ls", "-la"], "env": {}},
}
case(
    "responses/local_shell_call_builtin.sse",
    events(
        [
            CREATED,
            resp("response.output_item.added", output_index=0, item={**LOCAL_SHELL, "status": "in_progress"}),
            resp("response.output_item.done", output_index=0, item=LOCAL_SHELL),
            completed([LOCAL_SHELL]),
        ]
    ),
    quirk="a local_shell_call item: a built-in tool the client runs, not a function call",
    category="responses",
    provider="OpenAI Responses API (codex models with the local_shell tool)",
    models="https://platform.openai.com/docs/guides/tools-local-shell",
    expect={
        "responses": [
            {
                "calls": [
                    call(
                        "call_ls1",
                        "local_shell",
                        '{"action":{"type":"exec","command":["ls","-la"],"env":{}}}',
                        kind="builtin",
                    )
                ],
                "findings": ["builtin_tool_call"],
                "absent": ["unknown_event"],
            }
        ]
    },
)
case(
    "responses/cut_after_item_added.sse",
    events(
        [
            CREATED,
            call_added(FC),
        ]
    ),
    quirk="the stream ends after a function_call item is announced, before any argument delta",
    category="responses",
    provider="OpenAI Responses API via relays (stream ends without response.completed)",
    models="https://github.com/ltmoerdani/opencode-copilot-chat/pull/188",
    expect={
        "responses": [
            {
                "calls": [call("call_r1", "get_weather", "", complete=False)],
                "findings": ["no_finish_reason", "incomplete_arguments"],
            }
        ]
    },
)
case(
    "cassettes/bad_interaction_in_the_middle.yaml",
    cassette(
        [
            (200, {"Content-Type": ["text/event-stream"]}, SSE_TEXT),
            (200, {"Content-Type": ["application/json"], "Content-Encoding": ["gzip"]}, b'{"not": "gzip"}'),
            (200, {"Content-Type": ["text/event-stream"]}, SSE_TEXT),
        ]
    ),
    quirk="one interaction of a cassette cannot be read (recorded as gzip, stored plain)",
    category="cassettes",
    provider="vcrpy cassettes edited by hand or recorded with decode_compressed_response",
    models="https://vcrpy.readthedocs.io/en/latest/advanced.html#decode-compressed-response",
    expect={
        "responses": [
            {"calls": [call("call_w1", "get_weather", WEATHER)]},
            {
                "calls": [],
                "error": "interaction 1: the body does not decompress as gzip",
                "findings": ["unreadable_data"],
            },
            {"calls": [call("call_w1", "get_weather", WEATHER)]},
        ],
        "raises": {"type": "UnknownFormatError", "message": "interaction 1"},
    },
)
case(
    "cassettes/gemini_error_list_http_200.yaml",
    cassette([(200, {"Content-Type": ["application/json"]}, json.dumps(GEMINI_ERROR_LIST, indent=2))]),
    quirk="a Gemini error array recorded as a 200 body",
    category="cassettes",
    provider="Gemini (OpenAI-compatible endpoint) through recording proxies",
    models="https://github.com/Simpleyyt/ai-manus/issues/101",
    expect={
        "responses": [{"calls": [], "error": "Resource has been exhausted", "findings": ["provider_error"]}],
        "raises": {"type": "ProviderStreamError", "message": "Resource has been exhausted"},
    },
)
LATIN1_BODY = js(
    {
        "id": "chatcmpl-l1",
        "object": "chat.completion",
        "model": "conformance-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Météo",
                    "tool_calls": [
                        {
                            "id": "call_l1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Zürich"}'},
                        }
                    ],
                },
            }
        ],
    }
)
case(
    "cassettes/latin1_body_with_charset.yaml",
    cassette(
        [(200, {"Content-Type": ["application/json; charset=iso-8859-1"]}, LATIN1_BODY.encode("latin-1"))]
    ),
    quirk="a body in the charset its content-type declares (ISO-8859-1), not UTF-8",
    category="cassettes",
    provider="proxies re-encoding bodies (recorded as !!binary)",
    models="https://www.python-httpx.org/advanced/text-encodings/ (the declared charset decides)",
    expect={
        "responses": [
            {"calls": [call("call_l1", "get_weather", '{"city":"Zürich"}')], "absent": ["invalid_utf8"]}
        ]
    },
)
case(
    "cassettes/invalid_utf8_body.yaml",
    cassette([(200, {"Content-Type": ["application/json"]}, LATIN1_BODY.encode("latin-1"))]),
    quirk="a body with bytes that are not UTF-8 and no charset (read as a .sse file would be; the call "
    "whose arguments hold the U+FFFD is held back)",
    category="cassettes",
    provider="proxies re-encoding bodies without saying so",
    models=SPEC + " (bytes that are not UTF-8 decode to U+FFFD)",
    expect={
        "responses": [
            {
                "calls": [call("call_l1", "get_weather", '{"city":"Z\ufffdrich"}', complete=False)],
                "findings": ["invalid_utf8", "call_held_back"],
            }
        ]
    },
)


# -- third pass: custom chat tools, unknown entry types, late names, late deltas, early Responses deltas,
#    native formats refused with their keys
CUSTOM_DOCS = "https://platform.openai.com/docs/guides/function-calling#custom-tools"


def custom_entry(index: int, call_id: str | None, name: str | None, text: str) -> dict[str, Any]:
    """A Chat Completions ``tool_calls`` entry of a custom tool (``custom.input``: free-form text)."""
    entry: dict[str, Any] = {"index": index}
    custom: dict[str, Any] = {}
    if call_id is not None:
        entry["id"], entry["type"] = call_id, "custom"
    if name is not None:
        custom["name"] = name
    custom["input"] = text
    entry["custom"] = custom
    return {"tool_calls": [entry]}


case(
    "chat/custom_tool_call.sse",
    sse(
        [
            ROLE,
            chunk(custom_entry(0, "call_cu1", "run_sql", "")),
            chunk(custom_entry(0, None, None, "SELECT name FROM ")),
            chunk(custom_entry(0, None, None, "users LIMIT 3")),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="a custom tool call streamed in custom.input pieces (free-form text, not a function)",
    category="chat-completions",
    provider="OpenAI Chat Completions (GPT-5 custom tools)",
    models=CUSTOM_DOCS,
    expect={
        "responses": [
            {
                "calls": [call("call_cu1", "run_sql", "SELECT name FROM users LIMIT 3", kind="custom")],
                "findings": ["custom_tool_call"],
                "absent": ["missing_name", "empty_arguments"],
            }
        ]
    },
)
case(
    "chat/custom_tool_call_body.json",
    js(
        {
            "id": "chatcmpl-conf",
            "object": "chat.completion",
            "created": 1732000000,
            "model": "conformance-model",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_cu2",
                                "type": "custom",
                                "custom": {"name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
        }
    ),
    quirk="a custom tool call in a whole chat.completion message (custom.input, not function.arguments)",
    category="chat-completions",
    provider="OpenAI Chat Completions (GPT-5 custom tools)",
    models=CUSTOM_DOCS,
    expect={
        "responses": [
            {
                "calls": [call("call_cu2", "apply_patch", "*** Begin Patch\n*** End Patch", kind="custom")],
                "findings": ["custom_tool_call"],
            }
        ]
    },
)


def body(tool_calls: list[Any]) -> str:
    """A whole chat.completion body whose message carries `tool_calls`."""
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return js(
        {
            "id": "chatcmpl-conf",
            "object": "chat.completion",
            "model": "conformance-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        }
    )


FN_ENTRY = {
    "index": 0,
    "id": "call_f1",
    "type": "function",
    "fn": {"name": "get_weather", "arguments": WEATHER},
}
FLAT_ENTRY = {"index": 0, "id": "call_f1", "type": "function", "name": "get_weather", "arguments": WEATHER}
FLAT_MODELS = "https://platform.openai.com/docs/api-reference/chat/object (payload belongs under `function`)"
RAW_FN = js(FN_ENTRY)
case(
    "chat/payload_under_unknown_key_stream.sse",
    sse([ROLE, chunk({"tool_calls": [FN_ENTRY]}), chunk(finish="tool_calls")]),
    quirk="a streamed tool call whose payload sits under `fn`, not `function` (type function)",
    category="chat-completions",
    provider="OpenAI-compatible servers with a wrong key",
    models=FLAT_MODELS,
    expect={
        "responses": [
            {
                "calls": [call("call_f1", "", RAW_FN, complete=False)],
                "findings": ["missing_name", "unknown_call_type"],
            }
        ]
    },
)
case(
    "chat/payload_under_unknown_key_body.json",
    body([{k: v for k, v in FN_ENTRY.items() if k != "index"}]),
    quirk="a tool call whose payload sits under `fn`, not `function` (whole message)",
    category="chat-completions",
    provider="OpenAI-compatible servers with a wrong key",
    models=FLAT_MODELS,
    expect={
        "responses": [
            {
                "calls": [
                    call(
                        "call_f1",
                        "",
                        js({k: v for k, v in FN_ENTRY.items() if k != "index"}),
                        complete=False,
                    )
                ],
                "findings": ["missing_name", "unknown_call_type"],
            }
        ]
    },
)
case(
    "chat/name_and_arguments_at_top_level_stream.sse",
    sse(
        [
            ROLE,
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "call_f1", "name": "get_weather", "arguments": '{"city":'}
                    ]
                }
            ),
            chunk({"tool_calls": [{"index": 0, "arguments": '"Paris"}'}]}),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="streamed name/arguments at the top level of the entry (no type, no `function`)",
    category="chat-completions",
    provider="OpenAI-compatible servers flattening the call",
    models=FLAT_MODELS,
    expect={
        "responses": [{"calls": [call("call_f1", "get_weather", WEATHER)], "findings": ["flat_tool_call"]}]
    },
)
case(
    "chat/name_and_arguments_at_top_level_body.json",
    body([{k: v for k, v in FLAT_ENTRY.items() if k != "index"}]),
    quirk="name/arguments at the top level of a type-function entry (whole message)",
    category="chat-completions",
    provider="OpenAI-compatible servers flattening the call",
    models=FLAT_MODELS,
    expect={
        "responses": [{"calls": [call("call_f1", "get_weather", WEATHER)], "findings": ["flat_tool_call"]}]
    },
)
case(
    "chat/arguments_null_or_missing_body.json",
    body(
        [
            {"id": "call_n1", "type": "function", "function": {"name": "now", "arguments": None}},
            {"id": "call_n2", "type": "function", "function": {"name": "today"}},
        ]
    ),
    quirk="`arguments: null` and no `arguments` at all in a whole message",
    category="chat-completions",
    provider="OpenAI-compatible servers (tools without parameters)",
    models="https://platform.openai.com/docs/api-reference/chat/object (`arguments` is a JSON string)",
    expect={
        "responses": [
            {
                "calls": [call("call_n1", "now", ""), call("call_n2", "today", "")],
                "findings": ["empty_arguments", "empty_arguments"],
            }
        ]
    },
)
case(
    "chat/two_streams_without_done.sse",
    sse(
        [
            chunk(header(0, "call_a1", "get_weather", WEATHER), id="chatcmpl-A"),
            chunk(finish="tool_calls", id="chatcmpl-A"),
            chunk(header(0, "call_b1", "get_time", '{"tz":"CET"}'), id="chatcmpl-B"),
            chunk(finish="tool_calls", id="chatcmpl-B"),
        ],
        done=False,
    ),
    quirk="two chat streams saved one after the other with no [DONE] between them",
    category="chat-completions",
    provider="recorders that drop the [DONE] line (JSON-lines loggers)",
    models="https://platform.openai.com/docs/api-reference/chat-streaming (one id per completion)",
    expect={
        "responses": [
            {"calls": [call("call_a1", "get_weather", WEATHER)]},
            {
                "calls": [call("call_b1", "get_time", '{"tz":"CET"}')],
                "findings": ["new_stream_without_done"],
            },
        ]
    },
)
case(
    "chat/unknown_tool_call_type.sse",
    sse(
        [
            ROLE,
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_px1",
                            "type": "plugin",
                            "plugin": {"slug": "maps", "q": "Pa"},
                        }
                    ]
                }
            ),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="a tool_calls entry of a type the parser does not read (kept raw, never run)",
    category="chat-completions",
    provider="any server adding a tool type after function/custom",
    models="https://platform.openai.com/docs/api-reference/chat/object (tool_calls is a union by type)",
    expect={
        "responses": [
            {
                "calls": [call("call_px1", "", '{"slug":"maps","q":"Pa"}', complete=False)],
                "findings": ["missing_name", "unknown_call_type"],
            }
        ]
    },
)
case(
    "chat/name_after_arguments.sse",
    sse(
        [
            ROLE,
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "call_ln1", "type": "function", "function": {"arguments": WEATHER}}
                    ]
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"name": "get_weather"}}]}),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="the function name arrives after the arguments, without an id (one call, not two)",
    category="chat-completions",
    provider="any OpenAI-compatible server (the spec does not order a delta's fields)",
    models="https://platform.openai.com/docs/api-reference/chat-streaming (nothing orders name before arguments; this project's fresh-eyes test input)",
    expect={
        "responses": [
            {
                "calls": [call("call_ln1", "get_weather", WEATHER)],
                "findings": ["late_name"],
                "absent": ["index_reused", "missing_name"],
            }
        ]
    },
)
case(
    "chat/arguments_after_finish.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_lf1", "get_weather", '{"city":')),
            chunk(finish="tool_calls"),
            chunk(more(0, '"Paris"}')),
        ]
    ),
    quirk="an arguments delta after the choice's finish_reason (appended and reported)",
    category="chat-completions",
    provider="any OpenAI-compatible server or proxy sending a delta after the finish chunk",
    models="https://platform.openai.com/docs/api-reference/chat-streaming (finish_reason ends a choice; this project's fresh-eyes test input)",
    expect={"responses": [{"calls": [call("call_lf1", "get_weather", WEATHER)], "findings": ["late_delta"]}]},
)
case(
    "responses/delta_before_item_added.sse",
    events(
        [
            CREATED,
            args_delta('{"city":'),
            call_added(FC),
            args_delta('"Paris"}'),
            resp("response.function_call_arguments.done", output_index=0, item_id="fc_1", arguments=WEATHER),
            resp("response.output_item.done", output_index=0, item=FC),
            completed([FC]),
        ]
    ),
    quirk="an arguments delta before its output_item.added (held, then the start of the call)",
    category="responses",
    provider="OpenAI Responses API (an event order the spec does not promise)",
    models="https://platform.openai.com/docs/api-reference/responses-streaming (a delta before its item is announced; this project's fresh-eyes test input)",
    expect={
        "responses": [
            {
                "calls": [call("call_r1", "get_weather", WEATHER)],
                "findings": ["recovered_delta"],
                "absent": ["orphan_delta", "arguments_mismatch"],
            }
        ]
    },
)
GEMINI_NATIVE = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "modelVersion": "gemini-conf",
}
case(
    "json/gemini_native_stream.sse",
    sse([GEMINI_NATIVE], done=False),
    quirk="Gemini native streamGenerateContent?alt=sse (refused, naming its keys)",
    category="json-text",
    provider="Gemini API (native, not the OpenAI-compatible endpoint)",
    models="https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent",
    expect={"raises": {"type": "UnknownFormatError", "message": "['candidates', 'modelVersion']"}},
)
case(
    "json/gemini_native_array.json",
    js([GEMINI_NATIVE]),
    quirk="Gemini native streamGenerateContent without alt=sse: one JSON array (refused, naming its keys)",
    category="json-text",
    provider="Gemini API (native, not the OpenAI-compatible endpoint)",
    models="https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent",
    expect={"raises": {"type": "UnknownFormatError", "message": "Gemini native"}},
)
case(
    "json/ollama_native.chunks.jsonl",
    "".join(
        js(line) + "\n"
        for line in (
            {
                "model": "conf",
                "created_at": "2025-01-01T00:00:00Z",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
                },
                "done": False,
            },
            {
                "model": "conf",
                "created_at": "2025-01-01T00:00:01Z",
                "message": {"role": "assistant", "content": ""},
                "done": True,
            },
        )
    ),
    quirk="Ollama native /api/chat NDJSON (refused, naming its keys)",
    category="json-text",
    provider="Ollama (native API, not /v1)",
    models="https://github.com/ollama/ollama/blob/main/docs/api.md#chat-request-with-tools",
    expect={"raises": {"type": "UnknownFormatError", "message": "Ollama native"}},
)


# ---------------------------------------------------------------------------------------------
# 9. Fifth pass (issue 10): more quirks of public provider behaviour, each from the issue that
# reports it.
def entry(index: int | None, **fields: Any) -> dict[str, Any]:
    """One tool_calls entry with exactly the fields given (for shapes `header` cannot make)."""
    return {**({"index": index} if index is not None else {}), **fields}


case(
    "chat/azure_empty_tool_call_type.sse",
    sse(
        [
            ROLE,
            chunk(
                {
                    "tool_calls": [
                        entry(0, id="call_az1", type="", function={"name": "get_weather", "arguments": ""})
                    ]
                }
            ),
            chunk({"tool_calls": [entry(0, type="", function={"arguments": '{"city":'})]}),
            chunk({"tool_calls": [entry(0, type="", function={"arguments": '"Paris"}'})]}),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk='`"type": ""` on every tool call delta (read as no type, never as an unknown call type)',
    category="chat-completions",
    provider="Azure OpenAI / OpenAI-compatible proxies",
    models="https://github.com/vercel/ai/pull/12939 (fixes vercel/ai#6800)",
    expect={"responses": [{"calls": [call("call_az1", "get_weather", WEATHER)], "findings": []}]},
)
AZURE_FILTERS = {"hate": {"filtered": False, "severity": "safe"}}
case(
    "chat/azure_prompt_filter_chunk_and_usage_chunk.sse",
    sse(
        [
            {
                "id": "",
                "object": "",
                "created": 0,
                "model": "",
                "choices": [],
                "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": AZURE_FILTERS}],
            },
            chunk({"role": "assistant", "content": "", "refusal": None}),
            {
                **chunk({"content": "Sunny in Paris."}),
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": "Sunny in Paris."},
                        "finish_reason": None,
                        "content_filter_results": AZURE_FILTERS,
                    }
                ],
            },
            chunk(finish="stop"),
            {
                "id": "chatcmpl-conf",
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": {"total_tokens": 9},
            },
        ]
    ),
    quirk='a first chunk with id "" and no choices (prompt filter results), then a usage chunk after '
    "the finish reason: one response, not two",
    category="chat-completions",
    provider="Azure OpenAI",
    models="https://learn.microsoft.com/en-us/azure/ai-foundry/openai/concepts/content-filter",
    expect={"responses": [{"calls": [], "findings": [], "content": "Sunny in Paris."}]},
)
case(
    "chat/gemini_thought_signature_delta.sse",
    sse(
        [
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        entry(
                            None,
                            id="function-call-1",
                            type="function",
                            function={"name": "get_weather", "arguments": '{"city":'},
                        )
                    ],
                }
            ),
            chunk({"tool_calls": [entry(None, function={"arguments": '"Paris"}'})]}),
            chunk(
                {"tool_calls": [entry(None, extra_content={"google": {"thought_signature": "c2lnbmF0dXJl"}})]}
            ),
            chunk(finish="stop"),
        ]
    ),
    quirk="Gemini's extra_content.google.thought_signature sent alone on a tool call delta without index "
    "(metadata, not the call's arguments), and finish_reason 'stop' after a tool call",
    category="chat-completions",
    provider="Gemini (OpenAI-compatible endpoint)",
    models="https://github.com/open-webui/computer/issues/224",
    expect={
        "responses": [
            {"calls": [call("function-call-1", "get_weather", WEATHER)], "findings": ["missing_index"]}
        ]
    },
)
case(
    "chat/null_header_fields_on_continuations.sse",
    sse(
        [
            ROLE,
            chunk(
                {
                    "role": None,
                    "content": "",
                    "tool_calls": [
                        entry(
                            0,
                            id="call_zen1",
                            type="function",
                            function={"name": "get_weather", "arguments": ""},
                        )
                    ],
                }
            ),
            chunk(
                {
                    "role": None,
                    "content": "",
                    "tool_calls": [
                        entry(0, id=None, type=None, function={"name": None, "arguments": '{"city":'})
                    ],
                }
            ),
            chunk(
                {
                    "role": None,
                    "content": "",
                    "tool_calls": [
                        entry(0, id=None, type=None, function={"name": None, "arguments": '"Paris"}'})
                    ],
                }
            ),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="continuation deltas with explicit nulls (`id`, `type`, `function.name`) instead of absent fields",
    category="chat-completions",
    provider="OpenCode Zen gateway (DeepSeek models)",
    models="https://github.com/anomalyco/opencode/issues/43328",
    expect={"responses": [{"calls": [call("call_zen1", "get_weather", WEATHER)], "findings": []}]},
)
case(
    "chat/empty_id_and_name_on_continuations.sse",
    sse(
        [
            ROLE,
            chunk(
                {
                    "tool_calls": [
                        entry(
                            0,
                            id="call_ds1",
                            type="function",
                            function={"name": "get_weather", "arguments": "{"},
                        )
                    ]
                }
            ),
            chunk(
                {
                    "tool_calls": [
                        entry(0, id="", type="function", function={"name": "", "arguments": '"city":'})
                    ]
                }
            ),
            chunk(
                {
                    "tool_calls": [
                        entry(0, id="", type="function", function={"name": "", "arguments": '"Paris"}'})
                    ]
                }
            ),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk='`"id": ""` and `"name": ""` on every continuation delta (empty, not a new id or name)',
    category="chat-completions",
    provider="DashScope token plan (GLM models)",
    models="https://github.com/anomalyco/opencode/issues/37841",
    expect={"responses": [{"calls": [call("call_ds1", "get_weather", WEATHER)], "findings": []}]},
)
case(
    "chat/final_flush_repeats_the_arguments.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_fl1", "get_weather", "")),
            chunk(more(0, WEATHER)),
            chunk(
                {"tool_calls": [entry(0, id=None, type=None, function={"name": None, "arguments": WEATHER})]},
                finish="tool_calls",
            ),
        ]
    ),
    quirk="the end-of-stream flush sends the whole arguments again with the finish reason (the joined "
    "text is two objects: invalid, never run)",
    category="chat-completions",
    provider="vLLM (tool parsers' final flush)",
    models="https://github.com/vllm-project/vllm/issues/51697 and https://github.com/vllm-project/vllm/issues/42167",
    expect={
        "responses": [
            {
                "calls": [call("call_fl1", "get_weather", WEATHER + WEATHER, complete=False)],
                "findings": ["invalid_arguments"],
            }
        ]
    },
)
case(
    "chat/chunk_ids_change_on_every_chunk.sse",
    sse(
        [
            {**chunk({"role": "assistant", "content": "Under"}), "id": "chatcmpl-n1"},
            {**chunk({"content": "stood"}), "id": "chatcmpl-n2"},
            {**chunk(finish="stop"), "id": "chatcmpl-n3"},
            {
                "id": "chatcmpl-n4",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": None}, "finish_reason": None}],
                "usage": {"total_tokens": 5},
            },
        ]
    ),
    quirk="a new chunk id on every chunk, and a usage chunk after the finish reason (not a second stream)",
    category="chat-completions",
    provider="llama.cpp server (before 2024-03) / LiteLLM",
    models="https://github.com/ggml-org/llama.cpp/issues/5876 and https://github.com/BerriAI/litellm/issues/1571",
    expect={"responses": [{"calls": [], "findings": [], "content": "Understood"}]},
)
case(
    "chat/header_and_arguments_at_different_indexes.sse",
    sse(
        [
            chunk({"role": "assistant", "content": "Let me check."}),
            chunk(header(2, "toolu_lc1", "get_time", "")),
            chunk(more(1, '{"tz":')),
            chunk(more(1, '"Europe/Madrid"}')),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="a call's header at one index (its run step, counting the text step) and its arguments at another",
    category="chat-completions",
    provider="LibreChat agents API (Bedrock agents)",
    models="https://github.com/danny-avila/LibreChat/issues/13987",
    expect={
        "responses": [
            {
                "calls": [call("toolu_lc1", "get_time", '{"tz":"Europe/Madrid"}')],
                "findings": ["sparse_index", "split_call"],
            }
        ]
    },
)
case(
    "chat/no_argument_call_empty_delta_at_another_index.sse",
    sse(
        [
            chunk({"role": "assistant", "content": "I'll check the weather."}),
            chunk(header(1, "tooluse_br1", "get_current_weather", "")),
            chunk(more(0, "")),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="a tool without parameters: its header at index 1 (the text block counted) and its empty "
    "arguments at index 0 (one call, not two)",
    category="chat-completions",
    provider="LiteLLM (AWS Bedrock Claude)",
    models="https://github.com/BerriAI/litellm/issues/12973",
    expect={
        "responses": [
            {
                "calls": [call("tooluse_br1", "get_current_weather", "")],
                "findings": ["sparse_index", "split_call", "empty_arguments"],
            }
        ]
    },
)
case(
    "chat/refusal_field.sse",
    sse(
        [
            chunk({"role": "assistant", "content": None, "refusal": ""}),
            chunk({"refusal": "I'm sorry, "}),
            chunk({"refusal": "I can't help with that."}),
            chunk(finish="stop"),
        ]
    ),
    quirk="the model's refusal streamed in `delta.refusal`, not `content` (kept, quoted in a finding)",
    category="chat-completions",
    provider="OpenAI (structured outputs)",
    models="https://platform.openai.com/docs/guides/structured-outputs#refusals",
    expect={"responses": [{"calls": [], "findings": ["refusal"]}]},
)
case(
    "chat/content_as_typed_parts_with_thinking.sse",
    sse(
        [
            chunk(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": [{"type": "text", "text": "The user wants"}]}
                    ],
                }
            ),
            chunk(
                {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": " the weather."}]}]}
            ),
            chunk({"content": [{"type": "text", "text": "Let me check."}]}),
            chunk(header(0, "callmstr1", "get_weather", WEATHER)),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="`content` as a list of typed parts (`thinking` parts holding text parts, then `text` parts)",
    category="chat-completions",
    provider="Mistral (Magistral reasoning models)",
    models="https://docs.mistral.ai/capabilities/reasoning/",
    expect={
        "responses": [
            {
                "calls": [call("callmstr1", "get_weather", WEATHER)],
                "findings": ["content_parts"],
                "content": "Let me check.",
            }
        ]
    },
)
case(
    "anthropic/context_window_exceeded_cuts_tool_use.sse",
    events(
        [
            MSG_START,
            tool_use_start(0, "toolu_cw1", "get_weather"),
            input_delta(0, ""),
            (
                "message_delta",
                {"type": "message_delta", "delta": {"stop_reason": "model_context_window_exceeded"}},
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    ),
    quirk="stop_reason 'model_context_window_exceeded' with a tool_use block never closed (cut, not `{}`)",
    category="anthropic",
    provider="Anthropic (Claude Sonnet 4.5 and later)",
    models="https://docs.anthropic.com/en/api/handling-stop-reasons",
    expect={
        "responses": [
            {
                "calls": [call("toolu_cw1", "get_weather", "", complete=False)],
                "findings": ["incomplete_arguments", "length_finish"],
            }
        ]
    },
)
case(
    "anthropic/input_json_delta_without_index.sse",
    events(
        [
            MSG_START,
            tool_use_start(0, "toolu_ni1", "get_weather"),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "delta": {"type": "input_json_delta", "partial_json": WEATHER},
                },
            ),
            block_stop(0),
            *MSG_END,
        ]
    ),
    quirk="input_json_delta events without `index` (a translator dropped it): the open call is held back, "
    "never run with `{}`",
    category="anthropic",
    provider="9router (Anthropic format for Gemini models)",
    models="https://github.com/decolua/9router/issues/2218",
    expect={
        "responses": [
            {
                "calls": [call("toolu_ni1", "get_weather", "{}", complete=False)],
                "findings": ["orphan_delta", "call_held_back"],
            }
        ]
    },
)
case(
    "responses/only_output_text_done.sse",
    events(
        [
            CREATED,
            resp(
                "response.output_text.done",
                item_id="msg_1",
                output_index=0,
                content_index=0,
                text="Sunny in Paris.",
            ),
            completed([]),
        ]
    ),
    quirk="no text deltas, no output items: the text only in `response.output_text.done`",
    category="responses",
    provider="gemini-web2api (before its fix) and other Responses shims",
    models="https://github.com/Sophomoresty/gemini-web2api/pull/57",
    expect={"responses": [{"calls": [], "findings": [], "content": "Sunny in Paris."}]},
)
case(
    "responses/text_deltas_without_item_and_empty_completed_output.sse",
    events(
        [
            CREATED,
            resp("response.output_text.delta", delta="Sunny "),
            resp("response.output_text.delta", delta="in Paris."),
            completed([]),
        ]
    ),
    quirk="text deltas without `output_item.added`, and `response.completed` with an empty `output`",
    category="responses",
    provider="llm-rosetta (Responses converter, before its fix)",
    models="https://github.com/Oaklight/llm-rosetta/issues/56",
    expect={"responses": [{"calls": [], "findings": [], "content": "Sunny in Paris."}]},
)
case(
    "responses/refusal_delta.sse",
    events(
        [
            CREATED,
            resp(
                "response.output_item.added",
                output_index=0,
                item={"type": "message", "id": "msg_1", "content": []},
            ),
            resp(
                "response.refusal.delta",
                item_id="msg_1",
                output_index=0,
                content_index=0,
                delta="I can't help with that.",
            ),
            resp(
                "response.refusal.done",
                item_id="msg_1",
                output_index=0,
                content_index=0,
                refusal="I can't help with that.",
            ),
            completed(
                [
                    {
                        "type": "message",
                        "id": "msg_1",
                        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
                    }
                ]
            ),
        ]
    ),
    quirk="a refusal streamed as `response.refusal.delta` (kept, quoted in a finding)",
    category="responses",
    provider="OpenAI Responses API (structured outputs)",
    models="https://platform.openai.com/docs/guides/structured-outputs#refusals",
    expect={"responses": [{"calls": [], "findings": ["refusal"]}]},
)
case(
    "json/bedrock_invoke_stream.chunks.jsonl",
    "".join(
        js({"chunk": {"bytes": base64.b64encode(js(event).encode()).decode()}}) + "\n"
        for _, event in [MSG_START, tool_use_start(0, "toolu_bd1", "get_weather"), *MSG_END]
    ),
    quirk="AWS Bedrock InvokeModelWithResponseStream chunks (base64 `bytes` around Anthropic events): "
    "refused, naming the container",
    category="json-text",
    provider="AWS Bedrock (native streaming API)",
    models="https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html",
    expect={"raises": {"type": "UnknownFormatError", "message": "InvokeModelWithResponseStream"}},
)
case(
    "sse/utf16_file.sse",
    ("\ufeff" + sse(weather_stream())).encode("utf-16-le"),
    quirk="a stream saved as UTF-16 (Windows PowerShell 5's `>`): refused saying so, with the conversion",
    category="sse-framing",
    provider="any recording saved on Windows PowerShell 5.1",
    models="https://learn.microsoft.com/en-us/powershell/module/microsoft.powershell.core/about/about_redirection",
    expect={"raises": {"type": "UnknownFormatError", "message": "UTF-16LE text, not UTF-8"}},
)


# ---------------------------------------------------------------------------------------------
# Sixth pass: how a response ended (one rule, `toolcall_lab/formats/_endings.py`), data of an
# unexpected shape, bytes that are not UTF-8, duplicate keys, JSON lines told by their structure.
STOP_REASONS = "https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons"
case(
    "chat/vllm_finish_reason_abort.sse",
    sse(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "id": "chatcmpl-tool-ab1",
                            "type": "function",
                            "index": 0,
                            "function": {"name": "delete_files"},
                        }
                    ]
                }
            ),
            chunk({"content": ""}, "abort"),
        ]
    ),
    quirk="finish_reason 'abort' (an engine-aborted request) then [DONE] after a call header with no "
    "arguments: not a normal end, the call is not `{}`",
    category="chat-completions",
    provider="vLLM (OpenAI-compatible server)",
    models="https://github.com/vllm-project/vllm/issues/57082",
    expect={
        "responses": [
            {
                "calls": [call("chatcmpl-tool-ab1", "delete_files", "", complete=False)],
                "findings": ["incomplete_arguments", "abnormal_finish"],
            }
        ]
    },
)
case(
    "chat/malformed_function_call_finish.sse",
    sse(
        [ROLE, chunk(header(0, "call_mf1", "get_weather", WEATHER)), chunk(finish="malformed_function_call")]
    ),
    quirk="finish_reason 'malformed_function_call' (Gemini's MALFORMED_FUNCTION_CALL passed through) on a "
    "call whose arguments parse: never run",
    category="chat-completions",
    provider="OpenAI-compatible gateways in front of Gemini",
    models="https://github.com/NousResearch/hermes-agent/pull/83886 ; "
    "https://github.com/mozilla-ai/any-llm/pull/1202",
    expect={
        "responses": [
            {
                "calls": [call("call_mf1", "get_weather", WEATHER, complete=False)],
                "findings": ["unfinished_call", "abnormal_finish"],
            }
        ]
    },
)
case(
    "chat/custom_tool_call_cut_at_length.sse",
    sse([ROLE, chunk(custom_entry(0, "call_cl1", "shell", "rm -rf /tmp/build")), chunk(finish="length")]),
    quirk="a custom (free-form) tool call, then finish_reason 'length': its input has no end of its own, "
    "so it may be cut",
    category="chat-completions",
    provider="OpenAI Chat Completions (GPT-5 custom tools)",
    models=CUSTOM_DOCS
    + " ; https://platform.openai.com/docs/api-reference/chat/object (finish_reason length)",
    expect={
        "responses": [
            {
                "calls": [call("call_cl1", "shell", "rm -rf /tmp/build", kind="custom", complete=False)],
                "findings": ["custom_tool_call", "unfinished_call", "length_finish"],
            }
        ]
    },
)
case(
    "chat/custom_tool_call_body_cut_at_length.json",
    body([{"id": "call_cl2", "type": "custom", "custom": {"name": "shell", "input": "rm -rf /tm"}}]).replace(
        '"finish_reason":"tool_calls"', '"finish_reason":"length"'
    ),
    quirk="the same, in a whole body: no body reported `length` before, and its custom call ran",
    category="chat-completions",
    provider="OpenAI Chat Completions (GPT-5 custom tools)",
    models=CUSTOM_DOCS,
    expect={
        "responses": [
            {
                "calls": [call("call_cl2", "shell", "rm -rf /tm", kind="custom", complete=False)],
                "findings": ["custom_tool_call", "unfinished_call", "length_finish"],
            }
        ]
    },
)
case(
    "anthropic/max_tokens_body_cuts_last_tool_use.json",
    js(
        {
            "id": "msg_conf",
            "type": "message",
            "role": "assistant",
            "model": "claude-conf",
            "stop_reason": "max_tokens",
            "content": [
                {"type": "tool_use", "id": "toolu_mt1", "name": "read_file", "input": {"path": "a.txt"}},
                {"type": "text", "text": "Now I will write the file."},
                {"type": "tool_use", "id": "toolu_mt2", "name": "write_file", "input": {"path": "notes.txt"}},
            ],
        }
    ),
    quirk="a whole message cut at max_tokens whose last block is a tool_use: its `input` parses whatever "
    "was cut from it, so it never runs; an earlier tool_use (a block came after it) does",
    category="anthropic",
    provider="Anthropic Messages API",
    models=STOP_REASONS + " (max_tokens: the last tool_use block may be incomplete)",
    expect={
        "responses": [
            {
                "calls": [
                    call("toolu_mt1", "read_file", '{"path":"a.txt"}'),
                    call("toolu_mt2", "write_file", '{"path":"notes.txt"}', complete=False),
                ],
                "findings": ["unfinished_call", "length_finish"],
            }
        ]
    },
)
case(
    "anthropic/input_json_delta_at_another_index.sse",
    events(
        [
            MSG_START,
            tool_use_start(1, "toolu_ai1", "delete_all"),
            input_delta(0, '{"confirm": false}'),
            block_stop(1),
            *MSG_END,
        ]
    ),
    quirk="the arguments of a tool_use block arrive at an index no block started (a translator that "
    "numbers blocks its own way): the block is held back, never run with `{}`",
    category="anthropic",
    provider="Anthropic-format translators (9router and the like)",
    models="https://github.com/decolua/9router/issues/2218 (deltas whose index names no open block)",
    expect={
        "responses": [
            {
                "calls": [call("toolu_ai1", "delete_all", "{}", complete=False)],
                "findings": ["orphan_delta", "call_held_back"],
            }
        ]
    },
)
OLLAMA_NATIVE = {
    "model": "llama3.1",
    "created_at": "2024-07-25T00:00:00Z",
    "message": {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "get_time", "arguments": {"tz": "CET"}}}],
    },
    "done": False,
}
case(
    "chat/native_chunk_of_another_format_midstream.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_nm1", "get_weather", WEATHER)),
            OLLAMA_NATIVE,
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="a chunk of another wire format (Ollama's native /api/chat, carrying a call) inside a chat "
    "stream: reported, and the calls held back since the foreign chunk may hold one of theirs",
    category="chat-completions",
    provider="proxies in front of Ollama that pass native NDJSON through",
    models="https://github.com/decolua/9router/issues/4119 (Ollama answers NDJSON to a streaming request "
    "with tools) ; https://docs.ollama.com/api/chat",
    expect={
        "responses": [
            {
                "calls": [call("call_nm1", "get_weather", WEATHER, complete=False)],
                "findings": ["malformed_chunk", "call_held_back"],
            }
        ]
    },
)
case(
    "chat/duplicate_keys_in_arguments.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_dk1", "move_file", "")),
            chunk(more(0, '{"src": "a.txt", "dest": "/tmp/safe", ')),
            chunk(more(0, '"dest": "/"}')),
            chunk(finish="tool_calls"),
        ]
    ),
    quirk="the same key twice in a call's arguments (JSON readers keep the last value): which one the "
    "model meant is unknown, so the call never runs",
    category="chat-completions",
    provider="llama.cpp (Qwen3-Coder-Next parameters streamed as repeated keys)",
    models="https://github.com/ggml-org/llama.cpp/pull/19753 ; https://www.rfc-editor.org/rfc/rfc8259#section-4",
    expect={
        "responses": [
            {
                "calls": [
                    call(
                        "call_dk1",
                        "move_file",
                        '{"src": "a.txt", "dest": "/tmp/safe", "dest": "/"}',
                        complete=False,
                    )
                ],
                "findings": ["duplicate_keys"],
            }
        ]
    },
)
case(
    "sse/latin1_bytes_in_arguments.sse",
    sse([ROLE, chunk(header(0, "call_lb1", "write_file", ""))], done=False).encode()
    + b'data: {"id":"chatcmpl-conf","object":"chat.completion.chunk","created":1732000000,'
    b'"model":"conformance-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":'
    b'{"arguments":"{\\"path\\": \\"caf\xe9.txt\\"}"}}]},"finish_reason":null}]}\n\n'
    + sse([chunk(finish="tool_calls")]).encode(),
    quirk="a byte that is not UTF-8 (Latin-1 'é') inside a call's arguments: decoded to U+FFFD as the SSE "
    "standard says, and the call held back since its arguments are not what the model sent",
    category="sse-framing",
    provider="proxies re-encoding a stream to Latin-1",
    models=SPEC + " (bytes that are not UTF-8 decode to U+FFFD)",
    expect={
        "responses": [
            {
                "calls": [call("call_lb1", "write_file", '{"path": "caf\ufffd.txt"}', complete=False)],
                "findings": ["invalid_utf8", "call_held_back"],
            }
        ]
    },
)
case(
    "sse/json_lines_cr_only_long_first_line.sse",
    (
        js(chunk({"content": "x" * 6000}))
        + "\r"
        + js(chunk(header(0, "call_cr1", "get_weather", WEATHER)))
        + "\r"
        + js(chunk(finish="tool_calls"))
        + "\r"
    ),
    quirk="JSON lines saved in a .sse file with CR-only line ends and a first line over 4 KB: told from one "
    "JSON document by the structure of the first value, not its line end",
    category="sse-framing",
    provider="recorders that write CR line ends (classic Mac tools, some Windows loggers)",
    models=SPEC + " (CR alone ends a line) ; https://jsonlines.org/",
    expect={
        "responses": [
            {
                "calls": [call("call_cr1", "get_weather", WEATHER)],
                "findings": [],
            }
        ]
    },
)
case(
    "responses/completed_output_empty_after_finished_item.sse",
    events(
        [
            CREATED,
            call_added(FC),
            args_delta(WEATHER),
            resp("response.output_item.done", output_index=0, item=FC),
            completed([]),
        ]
    ),
    quirk="response.completed with `output: []` after the call's item finished (a proxy that does not "
    "rebuild the output): the finished call is kept as streamed, reported",
    category="responses",
    provider="Responses API proxies (CLIProxyAPI, new-api)",
    models="https://github.com/router-for-me/CLIProxyAPI/issues/2626 ; "
    "https://github.com/QuantumNous/new-api/issues/4362",
    expect={
        "responses": [{"calls": [call("call_r1", "get_weather", WEATHER)], "findings": ["not_in_completed"]}]
    },
)
case(
    "responses/completed_output_empty_item_never_finished.sse",
    events([CREATED, call_added(FC), args_delta(WEATHER), completed([])]),
    quirk="response.completed with `output: []` and the call's item never finished: response.completed is "
    "authoritative, the call is not complete",
    category="responses",
    provider="Responses API proxies (CLIProxyAPI, new-api)",
    models="https://github.com/router-for-me/CLIProxyAPI/issues/2626 ; " + RESP_DOCS,
    expect={
        "responses": [
            {
                "calls": [call("call_r1", "get_weather", WEATHER, complete=False)],
                "findings": ["not_in_completed", "unfinished_call"],
            }
        ]
    },
)
case(
    "errors/groq_failed_generation_in_error_event.sse",
    sse([ROLE, chunk({"reasoning": "I will call the tool."})], done=False)
    + "event: error\ndata: "
    + js(
        {
            "error": {
                "message": "Tool call validation failed: parameters for tool get_weather did not match schema",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
                "failed_generation": '{"name": "get_weather", "arguments": {"town": "Paris"}}',
                "status_code": 400,
            }
        }
    )
    + "\n\n",
    quirk="an `event: error` whose error carries `failed_generation` (the model output the provider "
    "rejected): quoted in the provider_error finding, not lost",
    category="provider-errors",
    provider="Groq",
    models="https://github.com/sipeed/picoclaw/issues/748 ; https://github.com/agno-agi/agno/issues/4090",
    expect={
        "responses": [{"calls": [], "findings": ["provider_error"], "error": "Tool call validation failed"}],
        "raises": {"type": "ProviderStreamError", "message": "Tool call validation failed"},
    },
)


# ---------------------------------------------------------------------------------------------
# Issue 10, seventh pass (f10): numbers in the input, completeness, shapes never dropped unseen
case(
    "chat/tool_call_index_of_ten_to_the_twelve.sse",
    sse([ROLE, chunk(header(10**12, "call_big1", "get_weather", WEATHER)), chunk(finish="tool_calls")]),
    quirk="a tool-call index of 10**12 (a corrupted or hostile upstream): the call is kept at its index and "
    "the gap reported as a range, in time and memory that do not grow with the number",
    category="chat-completions",
    provider="any OpenAI-compatible upstream (fuzzing; a proxy forwarding a broken index)",
    models="https://platform.openai.com/docs/api-reference/chat-streaming (index: integer, unbounded)",
    expect={
        "responses": [
            {"calls": [call("call_big1", "get_weather", WEATHER)], "findings": ["sparse_index"]},
        ]
    },
)
case(
    "errors/vllm_unwrapped_error_object_midstream.sse",
    sse(
        [
            ROLE,
            chunk(header(0, "call_kv1", "get_weather", '{"city":"Par')),
            {
                "object": "error",
                "message": "The model ran out of KV cache",
                "type": "InternalServerError",
                "param": None,
                "code": 500,
            },
        ]
    ),
    quirk="an OpenAI-compatible ErrorResponse sent unwrapped mid-stream ({object: error, message, type, "
    "code}, no `error` key): a provider error quoting it, the call in progress incomplete",
    category="provider-errors",
    provider="vLLM / FastChat (ErrorResponse)",
    models="https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/openai/protocol.py (ErrorResponse)",
    expect={
        "responses": [
            {
                "calls": [call("call_kv1", "get_weather", '{"city":"Par', complete=False)],
                "findings": ["incomplete_arguments", "provider_error"],
                "error": "The model ran out of KV cache",
            }
        ],
        "raises": {"type": "ProviderStreamError", "message": "The model ran out of KV cache"},
    },
)
case(
    "anthropic/unknown_call_like_block.sse",
    events(
        [
            MSG_START,
            block_event(
                "content_block_start",
                0,
                content_block={"type": "future_tool_use", "id": "ftu_1", "name": "delete", "input": {}},
            ),
            input_delta(0, '{"path": "/tmp/x"}'),
            block_stop(0),
            *MSG_END,
        ]
    ),
    quirk="a content block of a type this parser does not know, shaped like a call (id, name, input) and "
    "fed by input_json_delta: reported as a call-like block not read, its deltas too, never dropped "
    "unseen",
    category="anthropic",
    provider="Anthropic (a block type newer than this parser)",
    models="https://docs.anthropic.com/en/api/messages-streaming (content block types grow over time)",
    expect={
        "responses": [{"calls": [], "findings": ["unknown_block", "unknown_block", "finish_without_calls"]}]
    },
)
case(
    "anthropic/anthropic_then_chat_recording_in_one_file.sse",
    events(
        [
            MSG_START,
            tool_use_start(0, "toolu_mx1", "get_weather"),
            input_delta(0, WEATHER),
            block_stop(0),
            *MSG_END,
        ]
    )
    + sse([ROLE, chunk(header(0, "call_mx2", "get_time", '{"tz":"CET"}')), chunk(finish="tool_calls")]),
    quirk="two recordings of different wire formats saved in one file (an Anthropic stream, then an "
    "OpenAI chat stream): each read as its own response in its own format, none of their calls lost",
    category="anthropic",
    provider="recording tools that append every exchange to one file (multi-provider harnesses)",
    models="https://docs.anthropic.com/en/api/messages-streaming ; "
    "https://platform.openai.com/docs/api-reference/chat-streaming",
    expect={
        "responses": [
            {"calls": [call("toolu_mx1", "get_weather", WEATHER)], "findings": ["mixed_formats"]},
            {"calls": [call("call_mx2", "get_time", '{"tz":"CET"}')], "findings": []},
        ]
    },
)
case(
    "responses/custom_call_cut_and_listed_in_incomplete.sse",
    events(
        [
            CREATED,
            resp(
                "response.output_item.added",
                output_index=0,
                item={k: v for k, v in CUSTOM_CALL.items() if k != "status"} | {"input": ""},
            ),
            resp(
                "response.custom_tool_call_input.delta", output_index=0, item_id="ctc_1", delta="rm -rf /tm"
            ),
            completed(
                [{k: v for k, v in CUSTOM_CALL.items() if k != "status"} | {"input": "rm -rf /tm"}],
                status="incomplete",
                incomplete_details={"reason": "max_output_tokens"},
            ),
        ]
    ),
    quirk="a custom tool call cut at max_output_tokens and listed in response.incomplete's output (a "
    "custom_tool_call has no status field): being listed shows nothing, so it is incomplete",
    category="responses",
    provider="OpenAI Responses API",
    models="https://platform.openai.com/docs/guides/function-calling#custom-tools ; "
    "https://github.com/openai/openai-python (ResponseCustomToolCall has no status)",
    expect={
        "responses": [
            {
                "calls": [call("call_c1", "code_exec", "rm -rf /tm", complete=False, kind="custom")],
                "findings": ["custom_tool_call", "unfinished_call", "incomplete_response"],
            }
        ]
    },
)

# ---------------------------------------------------------------------------------------------
# v10: a part that may carry a call or text is never skipped unseen
case(
    "errors/fastapi_detail_midstream.sse",
    sse([ROLE, chunk(header(0, "call_fa1", "get_weather", WEATHER)), {"detail": "Internal Server Error"}]),
    quirk='FastAPI\'s error shape {"detail": ...} as a whole payload in the middle of a chat stream '
    "(an OpenAI-compatible server built on FastAPI failing after it began streaming)",
    category="provider-errors",
    provider="OpenAI-compatible servers built on FastAPI (vLLM, LiteLLM proxies)",
    models='https://fastapi.tiangolo.com/tutorial/handling-errors/ (HTTPException answers {"detail": ...})',
    expect={
        "responses": [
            {
                "calls": [call("call_fa1", "get_weather", WEATHER, complete=False)],
                "findings": ["unfinished_call", "provider_error"],
                "error": "Internal Server Error",
            }
        ],
        "raises": {"type": "ProviderStreamError", "message": "Internal Server Error"},
    },
)
case(
    "chat/chunk_without_choices_holding_tool_calls.sse",
    sse(
        [
            ROLE,
            {k: v for k, v in chunk().items() if k != "choices"} | header(0, "call_nc1", "delete_file", "{}"),
            chunk(finish="stop"),
        ]
    ),
    quirk="a payload that names itself chat.completion.chunk but has no choices, with tool_calls at its "
    "top level: reported as a part of an unknown shape, never passed over because of its `object`",
    category="chat-completions",
    provider="OpenAI-compatible shims that flatten the choice into the chunk",
    models="https://platform.openai.com/docs/api-reference/chat-streaming/streaming (tool_calls live in "
    "choices[].delta)",
    expect={"responses": [{"calls": [], "findings": ["malformed_chunk"]}]},
)
case(
    "anthropic/tool_use_in_message_start.sse",
    events(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_conf",
                        "model": "claude-conf",
                        "content": [
                            {"type": "text", "text": "Deleting."},
                            {
                                "type": "tool_use",
                                "id": "toolu_ms1",
                                "name": "delete_file",
                                "input": {"path": "a"},
                            },
                        ],
                        "usage": {"input_tokens": 20},
                    },
                },
            ),
            *MSG_END,
        ]
    ),
    quirk="content blocks inside message_start.message.content (the API sends it empty; a shim sends "
    "the whole message there): read as blocks of the message, with a finding",
    category="anthropic",
    provider="Anthropic-compatible shims that replay a whole message as its start",
    models="https://docs.anthropic.com/en/docs/build-with-claude/streaming#event-types (message_start "
    "has empty content)",
    expect={
        "responses": [
            {
                "calls": [call("toolu_ms1", "delete_file", '{"path":"a"}')],
                "findings": ["content_in_start"],
            }
        ]
    },
)
case(
    "responses/completed_item_without_type.sse",
    events([CREATED, completed([{k: v for k, v in FC.items() if k != "type"}])]),
    quirk="an item of response.completed's output without `type` (and no item events before it): "
    "reported as a call-like item that was not read, as the body reader does",
    category="responses",
    provider="Responses-API shims that drop the item type",
    models=RESP_DOCS,
    expect={"responses": [{"calls": [], "findings": ["malformed_chunk"]}]},
)
case(
    "responses/empty_done_after_deltas.sse",
    events(
        [
            CREATED,
            call_added(FC),
            args_delta(WEATHER),
            resp("response.function_call_arguments.done", output_index=0, item_id="fc_1", arguments=""),
            completed([]),
        ]
    ),
    quirk="function_call_arguments.done with empty arguments after non-empty deltas: the deltas are "
    "kept as the evidence, and the call is held back rather than run with {}",
    category="responses",
    provider="Responses-API proxies that do not fill in .done",
    models="https://platform.openai.com/docs/api-reference/responses-streaming/response/function_call_arguments/done",
    expect={
        "responses": [
            {
                "calls": [call("call_r1", "get_weather", WEATHER, complete=False)],
                "findings": ["arguments_mismatch", "not_in_completed", "call_held_back"],
            }
        ]
    },
)


# ---------------------------------------------------------------------------------------------
# w10: a call is never marked complete when the evidence does not show it finished
case(
    "responses/item_status_failed_in_completed_response.sse",
    events([CREATED, call_added(FC), args_delta(WEATHER), completed([{**FC, "status": "failed"}])]),
    quirk="a completed response whose function_call item has its own status 'failed' (no .done "
    "events): the item did not finish, so the call is incomplete whatever the response says",
    category="responses",
    provider="OpenAI Responses API",
    models="https://platform.openai.com/docs/api-reference/responses/object (output item status: "
    "in_progress, completed, incomplete; other values may come)",
    expect={
        "responses": [
            {
                "calls": [call("call_r1", "get_weather", WEATHER, complete=False)],
                "findings": ["unfinished_call"],
            }
        ]
    },
)
case(
    "anthropic/max_tokens_closes_last_tool_use.sse",
    events(
        [
            ("message_start", {"type": "message_start", "message": {"id": "msg_mt", "model": "claude"}}),
            tool_use_start(0, "toolu_mt1", "get_weather"),
            input_delta(0, WEATHER),
            block_stop(0),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}),
            ("message_stop", {"type": "message_stop"}),
        ]
    ),
    quirk="a tool_use block closed by content_block_stop as the last block of a message cut at "
    "max_tokens: the API closes a cut block too, so it is incomplete, as in a whole body",
    category="anthropic",
    provider="Anthropic Messages API (eager input streaming)",
    models="https://github.com/anthropics/anthropic-sdk-python/issues/794",
    expect={
        "responses": [
            {
                "calls": [call("toolu_mt1", "get_weather", WEATHER, complete=False)],
                "findings": ["unfinished_call", "length_finish"],
            }
        ]
    },
)


def write(root: Path = HERE) -> list[Path]:
    written = []
    for name, (data, spec) in CASES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        stem = (
            name[: -len("".join(Path(name).suffixes))]
            if not name.endswith(".chunks.jsonl")
            else name[: -len(".chunks.jsonl")]
        )
        expect = root / f"{stem}.expect.json"
        expect.write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
        written += [path, expect]
    return written


if __name__ == "__main__":
    for path in write():
        print(path.relative_to(HERE))

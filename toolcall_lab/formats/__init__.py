"""Wire formats: read what providers send (streamed or whole) into `ParsedResponse` values.

One module per format: `openai_chat` (chat completions), `anthropic` (Messages API),
`openai_responses` (Responses API); `sse` frames event streams (WHATWG rules); `errors` recognises
provider error reports; `dispatch` turns a payload stream into responses; `recordings` reads files
on disk (whole, or streamed payload by payload with `iter_responses`).
"""

from toolcall_lab.formats.anthropic import AnthropicStreamAccumulator, parse_anthropic_message
from toolcall_lab.formats.base import ArgumentsDelta, CallFinished, CallStarted, StreamEvent
from toolcall_lab.formats.dispatch import parse_body
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator, parse_chat_completion
from toolcall_lab.formats.openai_responses import ResponsesStreamAccumulator, parse_responses_output
from toolcall_lab.formats.recordings import (
    Recording,
    RecordingReader,
    detect_payload_format,
    iter_responses,
    read_recording,
)
from toolcall_lab.formats.sse import SSEEvent, iter_sse_events, iter_sse_payloads

__all__ = [
    "AnthropicStreamAccumulator",
    "ArgumentsDelta",
    "CallFinished",
    "CallStarted",
    "ChatCompletionAccumulator",
    "Recording",
    "RecordingReader",
    "ResponsesStreamAccumulator",
    "SSEEvent",
    "StreamEvent",
    "detect_payload_format",
    "iter_responses",
    "iter_sse_events",
    "iter_sse_payloads",
    "parse_anthropic_message",
    "parse_body",
    "parse_chat_completion",
    "parse_responses_output",
    "read_recording",
]

"""Wire formats: read what providers send (streamed or whole) into `ParsedResponse` values.

One module per format: `openai_chat` (chat completions), `anthropic` (Messages API),
`openai_responses` (Responses API); `sse` frames event streams; `recordings` detects the format of
a file on disk and reads it.
"""

from toolcall_lab.formats.anthropic import AnthropicStreamAccumulator, parse_anthropic_message
from toolcall_lab.formats.base import ArgumentsDelta, CallFinished, CallStarted, StreamEvent
from toolcall_lab.formats.openai_chat import ChatCompletionAccumulator, parse_chat_completion
from toolcall_lab.formats.openai_responses import ResponsesStreamAccumulator, parse_responses_output
from toolcall_lab.formats.recordings import Recording, detect_payload_format, read_recording
from toolcall_lab.formats.sse import SSEEvent, iter_sse_events, iter_sse_payloads

__all__ = [
    "AnthropicStreamAccumulator",
    "ArgumentsDelta",
    "CallFinished",
    "CallStarted",
    "ChatCompletionAccumulator",
    "Recording",
    "ResponsesStreamAccumulator",
    "SSEEvent",
    "StreamEvent",
    "detect_payload_format",
    "iter_sse_events",
    "iter_sse_payloads",
    "parse_anthropic_message",
    "parse_chat_completion",
    "parse_responses_output",
    "read_recording",
]

"""toolcall_lab: parse, run, record, replay and compare LLM tool calls.

The core (value types, parsing, the loop, execution modes, traces) imports no UI; notebook views live
in `toolcall_lab.notebook` and plots in `toolcall_lab.plotting`, both imported lazily.
"""

from toolcall_lab.exceptions import (
    ModelError,
    ProviderStreamError,
    ReplayDivergenceError,
    ScriptError,
    SSEDecodeError,
    ToolcallLabError,
    TraceError,
    TraceFormatError,
    TraceVersionError,
    UnknownFormatError,
    UsageError,
    WireFormatError,
)
from toolcall_lab.formats import (
    AnthropicStreamAccumulator,
    ChatCompletionAccumulator,
    ResponsesStreamAccumulator,
    iter_sse_payloads,
    parse_anthropic_message,
    parse_chat_completion,
    parse_responses_output,
    read_recording,
)
from toolcall_lab.messages import (
    Finding,
    InvalidArguments,
    ParsedArguments,
    ParsedChoice,
    ParsedResponse,
    ToolCall,
    fallback_tool_call_id,
    parse_arguments,
)

__all__ = [
    "AnthropicStreamAccumulator",
    "ChatCompletionAccumulator",
    "Finding",
    "InvalidArguments",
    "ModelError",
    "ParsedArguments",
    "ParsedChoice",
    "ParsedResponse",
    "ProviderStreamError",
    "ReplayDivergenceError",
    "ResponsesStreamAccumulator",
    "SSEDecodeError",
    "ScriptError",
    "ToolCall",
    "ToolcallLabError",
    "TraceError",
    "TraceFormatError",
    "TraceVersionError",
    "UnknownFormatError",
    "UsageError",
    "WireFormatError",
    "fallback_tool_call_id",
    "iter_sse_payloads",
    "parse_anthropic_message",
    "parse_arguments",
    "parse_chat_completion",
    "parse_responses_output",
    "read_recording",
]
__version__ = "0.1.0"

"""toolcall_lab: parse, run, record, replay and compare LLM tool calls.

The core (value types, parsing, the loop, execution modes, traces) imports no UI; notebook views live
in `toolcall_lab.notebook` and plots in `toolcall_lab.plotting`, both imported lazily.
"""

import sys as _sys

if _sys.argv and "toolcall-lab" in _sys.argv[0]:  # the command: guard its start-up before anything heavy
    from toolcall_lab import _startup

    if _startup.is_command():
        _startup.install()

from toolcall_lab._execution import Hooks
from toolcall_lab.exceptions import (
    ModelError,
    ProviderStreamError,
    ReplayDivergenceError,
    ScriptError,
    SSEDecodeError,
    StartedOnSnapshotError,
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
from toolcall_lab.loop import AbortHandle, run, run_sync
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
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.openai_model import OpenAIModel
from toolcall_lab.replay import replay, replay_async
from toolcall_lab.runs import RunConfig, RunResult
from toolcall_lab.tools import ToolOutcome, ToolRegistry
from toolcall_lab.trace import Trace, TraceMetadata
from toolcall_lab.trace_files import load, save

__all__ = [
    "AbortHandle",
    "AnthropicStreamAccumulator",
    "ChatCompletionAccumulator",
    "Finding",
    "Hooks",
    "InvalidArguments",
    "ModelError",
    "OpenAIModel",
    "ParsedArguments",
    "ParsedChoice",
    "ParsedResponse",
    "ProviderStreamError",
    "ReplayDivergenceError",
    "ResponsesStreamAccumulator",
    "RunConfig",
    "RunResult",
    "SSEDecodeError",
    "ScriptError",
    "ScriptedModel",
    "ScriptedResponse",
    "StartedOnSnapshotError",
    "ToolCall",
    "ToolOutcome",
    "ToolRegistry",
    "ToolcallLabError",
    "Trace",
    "TraceError",
    "TraceFormatError",
    "TraceMetadata",
    "TraceVersionError",
    "UnknownFormatError",
    "UsageError",
    "WireFormatError",
    "fallback_tool_call_id",
    "iter_sse_payloads",
    "load",
    "parse_anthropic_message",
    "parse_arguments",
    "parse_chat_completion",
    "parse_responses_output",
    "read_recording",
    "replay",
    "replay_async",
    "run",
    "run_sync",
    "save",
]
__version__ = "0.1.0"

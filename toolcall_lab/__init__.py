"""toolcall_lab: parse, run, record, replay and compare LLM tool calls.

The core (value types, parsing, the loop, execution modes, traces) imports no UI; notebook views live
in `toolcall_lab.notebook` and plots in `toolcall_lab.plotting`, both imported lazily.

The names below are imported on first use (PEP 562 `__getattr__`), so `import toolcall_lab` and a
command that only parses (``toolcall-lab parse``) do not pay for the loop, execution and asyncio.
"""

import sys

if sys.argv and "toolcall-lab" in sys.argv[0]:  # the command: guard its start-up before any other
    from toolcall_lab import _startup  # import (this one needs only os, signal, sys: already loaded)

    if _startup.is_command():
        _startup.install()

import importlib
import importlib.util
import types
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from toolcall_lab._execution import Hooks
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

_LAZY = {
    "AbortHandle": "toolcall_lab.loop",
    "AnthropicStreamAccumulator": "toolcall_lab.formats",
    "ChatCompletionAccumulator": "toolcall_lab.formats",
    "Finding": "toolcall_lab.messages",
    "Hooks": "toolcall_lab._execution",
    "InvalidArguments": "toolcall_lab.messages",
    "OpenAIModel": "toolcall_lab.openai_model",
    "ParsedArguments": "toolcall_lab.messages",
    "ParsedChoice": "toolcall_lab.messages",
    "ParsedResponse": "toolcall_lab.messages",
    "ResponsesStreamAccumulator": "toolcall_lab.formats",
    "RunConfig": "toolcall_lab.runs",
    "RunResult": "toolcall_lab.runs",
    "ScriptedModel": "toolcall_lab.models",
    "ScriptedResponse": "toolcall_lab.models",
    "ToolCall": "toolcall_lab.messages",
    "ToolOutcome": "toolcall_lab.tools",
    "ToolRegistry": "toolcall_lab.tools",
    "Trace": "toolcall_lab.trace",
    "TraceMetadata": "toolcall_lab.trace",
    "fallback_tool_call_id": "toolcall_lab.messages",
    "iter_sse_payloads": "toolcall_lab.formats",
    "load": "toolcall_lab.trace_files",
    "parse_anthropic_message": "toolcall_lab.formats",
    "parse_arguments": "toolcall_lab.messages",
    "parse_chat_completion": "toolcall_lab.formats",
    "parse_responses_output": "toolcall_lab.formats",
    "read_recording": "toolcall_lab.formats",
    "replay": "toolcall_lab.replay",
    "replay_async": "toolcall_lab.replay",
    "run": "toolcall_lab.loop",
    "run_sync": "toolcall_lab.loop",
    "save": "toolcall_lab.trace_files",
}


def __getattr__(name: str) -> Any:
    """A public name (or a submodule) imported on first use, then kept as a module attribute."""
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


class _Package(types.ModuleType):
    """The package module: importing the submodule ``toolcall_lab.replay`` must not hide the
    function ``replay`` it exports (the eager ``from ... import replay`` used to overwrite it)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _LAZY.get(name) == f"{__name__}.{name}":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


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

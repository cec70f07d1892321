"""The error hierarchy: caller mistakes, unreadable wire data, model/script problems, trace files.

Model *behaviour* (bad argument JSON, unknown tools, odd deltas) is never an exception: it becomes a
`Finding` or a tool message; so do a tool's own exceptions and a hook's (recorded as hook failures).
Exceptions are for things the caller must act on. When one stops a run (`ScriptError`,
`ReplayDivergenceError`, and also a task cancellation or a KeyboardInterrupt / other BaseException
raised by a tool or hook), it carries the consistent record of the run so far as ``partial_result``::

    ToolcallLabError
    ├── UsageError                  the caller used the API wrongly (bad setting, sync call in a loop)
    │   └── ProxyProtocolError      a serialized-proxy client sent an unknown/repeated/out-of-order result
    ├── WireFormatError             bytes that cannot be read as the format they claim to be
    │   ├── SSEDecodeError          a `data:` line that is not JSON (carries the line number)
    │   ├── ProviderStreamError     the provider reported an error in a stream or instead of a response
    │   └── UnknownFormatError      a file whose format cannot be detected
    ├── ModelError                  a model adapter could not produce a response
    │   └── ScriptError             a scripted model ran out of steps or left steps unused
    ├── TraceError                  a trace file is unusable
    │   ├── TraceFormatError        wrong shape; names the file and the JSON path of the bad field
    │   └── TraceVersionError       unknown or newer `schema_version`
    └── ReplayDivergenceError       the conversation sent in replay differs from the recording
        └── StartedOnSnapshotError  a streaming strategy started a call on an earlier snapshot of its
                                    arguments than the recording ran: the trace cannot evaluate it
"""

from __future__ import annotations


class ToolcallLabError(Exception):
    """Base class of every error raised on purpose by toolcall_lab."""

    partial_result: object = None
    """When a run is interrupted by this error, the `RunResult` of what it did so far."""


class UsageError(ToolcallLabError, ValueError):
    """The caller used the library wrongly; the message says how to fix it."""


class WireFormatError(ToolcallLabError):
    """Input bytes cannot be read as the wire format they claim to be."""

    partial_responses: tuple[object, ...] = ()
    """The `ParsedResponse`s read before the error, the last one being the interrupted response
    (its calls marked incomplete). Empty when nothing could be read."""


class SSEDecodeError(WireFormatError):
    """A server-sent-events payload is not JSON."""

    def __init__(self, message: str, *, line_number: int, line: str) -> None:
        super().__init__(f"line {line_number}: {message}: {line[:120]!r}")
        self.line_number = line_number
        self.line = line


class ProviderStreamError(WireFormatError):
    """The provider reported an error: inside an otherwise successful (HTTP 200) stream, or as the
    whole response body. `provider_message` is the provider's own text."""

    def __init__(
        self,
        message: str,
        *,
        payload: dict[str, object],
        line_number: int | None,
        chunk_index: int | None = None,
    ) -> None:
        where = (
            f" (line {line_number})"
            if line_number is not None
            else f" (chunk {chunk_index})"
            if chunk_index is not None
            else ""
        )
        super().__init__(f"provider error{where}: {message}")
        self.provider_message = message
        self.payload = payload
        self.line_number = line_number
        self.chunk_index = chunk_index


class UnknownFormatError(WireFormatError):
    """The format of a recording could not be detected."""


class ModelError(ToolcallLabError):
    """A model adapter failed to produce a response."""


class ScriptError(ModelError):
    """A scripted model was called more often than scripted, or not often enough."""


class TraceError(ToolcallLabError):
    """A trace file cannot be used."""


class TraceFormatError(TraceError):
    """A trace file has the wrong shape: names the file and the JSON path of the bad field."""

    def __init__(self, problem: str, *, path: str = "", source: str | None = None) -> None:
        location = f"{source}: " if source else ""
        field = f"{path}: " if path else ""
        super().__init__(f"{location}{field}{problem}")
        self.problem = problem
        self.path = path
        self.source = source


class TraceVersionError(TraceError):
    """A trace file has a missing, unknown or newer schema version."""


class ReplayDivergenceError(ToolcallLabError):
    """The conversation sent to a replay model differs from the recorded one."""


class StartedOnSnapshotError(ReplayDivergenceError):
    """A strategy that starts calls while the model streams (``eager``) started a call on an earlier
    snapshot of its arguments (already a complete JSON object) than the one the recorded stream ended
    with (e.g. a provider that resends the whole arguments object as it grows). That is what the
    strategy would truly do (a ``changed_after_start`` call live), but the recording never ran the call
    with those arguments, and a replay cannot invent its result: this trace cannot evaluate the
    strategy. `compare` lists it in ``errors`` for that mode; the trace's other modes still compare.
    (Also importable from `toolcall_lab.replay`, where it is raised.)"""


class ProxyProtocolError(UsageError):
    """A client broke the one-call-per-round-trip protocol (unknown, repeated or out-of-order result)."""

"""Record a live run against any OpenAI-compatible endpoint into a trace (credentials stripped and
marked wherever they occur: headers, settings, messages, arguments, results; see
`toolcall_lab.redaction`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from toolcall_lab.loop import run
from toolcall_lab.models import Model
from toolcall_lab.runs import RunResult
from toolcall_lab.tools import Tool, ToolFunction, ToolRegistry
from toolcall_lab.trace import Trace, TraceMetadata
from toolcall_lab.trace_files import redact_trace


def public_url(url: str | None) -> str | None:
    """A URL without user info or query string (where credentials hide)."""
    if url is None:
        return None
    return re.sub(r"//[^/@]*@", "//", url).split("?", 1)[0]


async def record(
    model: Model,
    tools: ToolRegistry | Iterable[Tool | ToolFunction],
    messages: str | Sequence[dict[str, Any]],
    *,
    title: str,
    provider: str | None = None,
    source: str | None = None,
    notes: str = "",
    **run_kwargs: Any,
) -> Trace:
    """Run live (real clock) and return the run as a recorded trace with chunk timings and tool durations.

    When the run is stopped (Ctrl-C, a cancellation) the exception carries the run so far as
    ``partial_result``; `recorded_trace` turns it into a trace the same way."""
    result = await run(model, tools, messages, **run_kwargs)
    return recorded_trace(result, model, title=title, provider=provider, source=source, notes=notes)


def recorded_trace(
    result: RunResult,
    model: Model,
    *,
    title: str,
    provider: str | None = None,
    source: str | None = None,
    notes: str = "",
) -> Trace:
    """A live run (complete, or the ``partial_result`` of one that was stopped) as a recorded trace,
    credentials stripped; a run of a scripted model keeps its own origin (``scripted``)."""
    meta = TraceMetadata(
        title=title,
        origin=result.origin,
        provider=provider,
        model=getattr(model, "name", None),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        source=public_url(source),
        notes=notes,
    )
    return redact_trace(Trace.from_run(result, meta))

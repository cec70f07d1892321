"""Open a user's own file as traces, whatever it is: a trace file, a recording or a transcript.

What the views' file pickers call. Every failure becomes one `TraceError` naming the file and what
was tried, never a traceback in the view.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from toolcall_lab.exceptions import ToolcallLabError, TraceError
from toolcall_lab.trace import Trace

ACCEPT = ".json,.jsonl,.sse,.yaml,.yml,.traj"
"""File kinds the pickers offer."""


def _importer(name: str) -> Any:
    from toolcall_lab import importers

    return getattr(importers, name, None)


def _first_json_line(text: str) -> Any:
    for line in text.splitlines():
        if line.strip():
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def open_traces(path: str | Path) -> list[Trace]:
    """The traces in a file: a toolcall_lab trace (``schema_version``), tau-bench trajectories, a
    Claude Code transcript (when that importer is installed) or any recording `read_recording`
    reads (VCR cassettes, SSE, chunk lists, exchange lists), imported through `toolcall_lab.importers`.

    Raises:
        TraceError: the file is missing, unreadable, or none of the readers could use it (the
            message says which were tried and why they refused).
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise TraceError(f"{p}: no such file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{p}: cannot read: {exc}") from None
    tried: list[str] = []
    if p.suffix == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceError(
                f"{p}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        if isinstance(doc, dict) and "schema_version" in doc:
            return [Trace.from_dict(doc, source=str(p))]
        if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "traj" in doc[0]:
            return _run(p, "tau-bench trajectories", _importer("import_tau_bench"))
    if p.suffix == ".jsonl":
        first = _first_json_line(text)
        if isinstance(first, dict) and ("sessionId" in first or "parentUuid" in first):
            importer = _importer("import_claude_code")
            if importer is None:
                raise TraceError(
                    f"{p}: looks like a Claude Code transcript, but this toolcall_lab has no Claude Code "
                    "importer (toolcall_lab.importers.import_claude_code)"
                )
            return _run(p, "Claude Code transcript", importer)
    try:
        return _run(p, "recording", _importer("import_recording"))
    except TraceError as exc:
        tried.append(str(exc))
    raise TraceError(
        f"{p}: not a trace file, and no importer could read it ({'; '.join(tried)}). Trace files carry "
        "a schema_version; recordings are .sse, .chunks.jsonl, exchange .json or VCR .yaml files"
    )


def _run(p: Path, what: str, importer: Any) -> list[Trace]:
    if importer is None:
        raise TraceError(f"{p}: no importer for {what} in this toolcall_lab")
    try:
        out = importer(p)
    except ToolcallLabError as exc:
        raise TraceError(f"{p}: as a {what}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise TraceError(f"{p}: as a {what}: unexpected content ({type(exc).__name__}: {exc})") from None
    traces = [out] if isinstance(out, Trace) else list(out)  # an importer's ImportResult is a sequence
    if not traces:
        raise TraceError(f"{p}: as a {what}: no traces in it")
    return traces


def open_upload(name: str, content: bytes) -> list[Trace]:
    """The traces in uploaded bytes (a FileUpload value), read through a temporary file of the same
    name so the same detection applies."""
    with tempfile.TemporaryDirectory(prefix="toolcall-lab-upload-") as folder:
        target = Path(folder) / Path(name).name
        target.write_bytes(content)
        try:
            return open_traces(target)
        except TraceError as exc:
            raise TraceError(str(exc).replace(str(target), name)) from None

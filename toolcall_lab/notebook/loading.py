"""Open a user's own file or folder as traces, whatever it is: what the views' file boxes call.

A trace file (``schema_version``) loads as it is; anything else goes through the importers'
registry (`toolcall_lab.importers.KINDS`, `import_source`): the kind is detected from a bounded look
at the content (or chosen by the caller), and when the detected kind refuses the file the others
that could fit are tried. What comes back carries the importer's report (the source's calls
against the imported ones, and every call skipped, missing from the source or not represented,
with file and line), so a view never says "opened" when something was lost. Every failure is one
`TraceError` that names the file once and says what was tried.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from toolcall_lab.exceptions import ToolcallLabError, TraceError
from toolcall_lab.notebook.theme import SUMMARY, e
from toolcall_lab.trace import Trace

TRACE = "trace"
"""The kind name of a toolcall_lab trace file."""
DETECT = "detect"
ACCEPT = ".json,.jsonl,.sse,.yaml,.yml,.traj"
"""File kinds the upload buttons offer."""
HEAD_BYTES = 256 * 1024
TRACE_KEYS = frozenset({"schema_version", "metadata", "tools", "initial_messages", "outcome", "rounds"})
"""The top-level keys of a trace file (written sorted, so ``rounds`` comes before ``schema_version``)."""


def kinds() -> list[tuple[str, str]]:
    """(kind, what it reads) for a kind selector: detection, trace files, then every importer."""
    from toolcall_lab.importers import KINDS

    return [
        (DETECT, "detect the kind from the content"),
        (TRACE, "a toolcall_lab trace file (.json with schema_version)"),
        *[(k.name, k.source) for k in KINDS.values()],
    ]


@dataclass(frozen=True, slots=True)
class Opened:
    """What a file box opened: the traces, how the source was read, and the importer's report."""

    traces: list[Trace]
    source: str
    kind: str
    report: Any = None
    """The `ImportReport` (None for trace files, which hold exactly what they show)."""
    left_out: tuple[str, ...] = ()
    """Files of an opened folder that look like another kind than the one read (name and kind)."""

    @property
    def lossless(self) -> bool:
        return self.report is None or bool(self.report.ok)


def _json_lines(head: str) -> list[Any]:
    out = []
    for line in head.splitlines()[:40]:
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by the head's end, or a bad line the importer will report
    return out


def _sniff_jsonl(head: str) -> list[str]:
    rows = [r for r in _json_lines(head) if isinstance(r, dict)]
    keys = set().union(*(r.keys() for r in rows)) if rows else set()
    if keys & {"sessionId", "parentUuid", "leafUuid"}:
        return ["claude-code"]
    if "instance_id" in keys and keys & {"history", "metrics", "test_result"}:
        return ["openhands"]
    if "resourceSpans" in keys:
        return ["otlp"]
    if {"question", "function"} <= keys:
        return ["bfcl"]
    if "schema_version" in keys:
        return [TRACE]
    return ["recording"]


def _sniff_json(head: str) -> list[str]:
    start = head.lstrip()[:1]
    window = head[:HEAD_BYTES]
    has = window.__contains__
    found: list[str] = []
    if has('"schema_version"') and has('"rounds"'):
        found.append(TRACE)
    if has('"resourceSpans"'):
        found.append("otlp")
    if has('"observations"') and has('"trace"'):
        found.append("langfuse")
    if has('"eval"') and (has('"samples"') or has('"eval_id"')):
        found.append("inspect")
    if has('"traj"') and has('"task_id"'):
        found.append("tau-bench")
    if has('"trajectory"') and (has('"history"') or has('"environment"') or has('"info"')):
        found.append("swe-agent")
    if (start == "[" and has('"source"') and (has('"observation"') or has('"action"'))) or (
        has('"instance_id"') and has('"history"')
    ):
        found.append("openhands")
    if has('"question"') and has('"function"'):
        found.append("bfcl")
    return [*found, "recording"]


def _top_level_keys(text: str) -> tuple[list[str], bool]:
    """The keys of the JSON object `text` starts with, in order, as far as `text` holds them whole,
    and whether the object was read to its end. Values are skipped by the C JSON scanner, so a
    multi-megabyte value costs one fast parse, not a Python loop; stops at the first key that is not
    a trace key (only trace detection needs more than the head)."""
    decoder = json.JSONDecoder()
    ws = re.compile(r"\s*")
    keys: list[str] = []
    i = ws.match(text).end()  # type: ignore[union-attr]
    if text[i : i + 1] != "{":
        return keys, True
    i += 1
    try:
        while True:
            i = ws.match(text, i).end()  # type: ignore[union-attr]
            if text[i : i + 1] == "}":
                return keys, True
            if text[i : i + 1] != '"':
                return keys, True  # not JSON: the importers say what is wrong
            key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
            i = ws.match(text, i).end()  # type: ignore[union-attr]
            if text[i : i + 1] != ":":
                return keys, i >= len(text)
            i = ws.match(text, i + 1).end()  # type: ignore[union-attr]
            _, i = decoder.raw_decode(text, i)
            keys.append(key)
            if key not in TRACE_KEYS:
                return keys, True
            i = ws.match(text, i).end()  # type: ignore[union-attr]
            if text[i : i + 1] == ",":
                i += 1
            elif text[i : i + 1] == "}":
                return keys, True
            else:
                return keys, i >= len(text)
    except (json.JSONDecodeError, ValueError):
        return keys, False


_TRACE_START = re.compile(r'\s*\{\s*"(initial_messages|metadata)"\s*:')
"""How a trace file begins (its keys are written sorted: ``initial_messages`` first, ``metadata``
first in a trace without initial messages)."""


def _is_trace(p: Path, head: str, whole: bool) -> bool:
    """Whether `p` is a trace file, judged by its top-level keys (``schema_version`` and ``rounds``,
    nothing a trace does not have). A trace's keys are written sorted, so ``schema_version`` follows
    the rounds: when the head ends inside a trace-like object, the whole file is read. A file that
    begins as a trace does and ends before its object is closed is a trace cut short (the trace
    reader says where)."""
    keys, done = _top_level_keys(head)
    if not done and not whole and set(keys) <= TRACE_KEYS:
        text = p.read_bytes().decode("utf-8", errors="replace").lstrip("\ufeff")
        keys, done = _top_level_keys(text)
    if not done and set(keys) <= TRACE_KEYS and _TRACE_START.match(head):
        return True  # cut short: read as a trace, whose error names the line
    return {"schema_version", "rounds"} <= set(keys) and set(keys) <= TRACE_KEYS


def what_it_is(raw: bytes) -> str | None:
    """What a file's first bytes are when no kind could read them (not text, plain text), or None
    when they look like something a kind reads (JSON, an event stream, a YAML cassette)."""
    if b"\x00" in raw[:4096]:
        return "binary data (NUL bytes), not text"
    try:
        text = raw[:4096].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(raw[:4096]) - 4:  # (not just a character cut by the end of the block)
            return f"not UTF-8 text (byte {exc.start} is 0x{raw[exc.start]:02x})"
        text = raw[: exc.start].decode("utf-8")
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped:
        return "only whitespace"
    if stripped[:1] in "{[" or stripped.startswith(("data:", "event:", "id:", "retry:", ":")):
        return None
    if stripped.startswith(("interactions:", "---")) or "\ninteractions:" in stripped:
        return None
    first = stripped.splitlines()[0][:60]
    return f"plain text, not JSON, JSON lines, an event stream or a YAML cassette (it begins {first!r})"


def detect(path: str | Path) -> list[str]:
    """Kinds that could read `path`, most likely first, from its content (the first 256 KB, and the
    top-level keys of a JSON object that may be a trace, however long; the file name's ending only
    where the content cannot tell); none for content no kind reads (`what_it_is` says what it is)."""
    p = Path(path)
    if p.is_dir():
        return _detect_folder(p)
    with p.open("rb") as fh:
        raw = fh.read(HEAD_BYTES)
        whole = not fh.read(1)
    if what_it_is(raw) is not None:
        return []
    head = raw.decode("utf-8", errors="replace").lstrip("\ufeff")
    if head.lstrip()[:1] == "{" and _is_trace(p, head, whole):
        return [TRACE]  # a trace file: the trace reader's error is the one that says what is wrong
    name = p.name.lower()
    if name.endswith((".sse", ".yaml", ".yml", ".chunks.jsonl")):
        return ["recording"]
    if name.endswith(".traj"):
        return ["swe-agent", *[k for k in _sniff_json(head) if k != "swe-agent"]]
    stripped = head.lstrip()
    if stripped.startswith("data:") or stripped.startswith("event:") or stripped.startswith(":"):
        return ["recording"]
    lines = [ln for ln in head.splitlines() if ln.strip()]
    first_is_object = bool(lines) and _json_lines(lines[0]) != []
    if name.endswith(".jsonl") or (len(lines) > 1 and first_is_object and stripped[:1] == "{"):
        found = _sniff_jsonl(head)
        if found != ["recording"] or name.endswith(".jsonl"):
            return [*found, *([] if "recording" in found else ["recording"])]
    return _sniff_json(head)


def _folder_files(folder: Path) -> list[Path]:
    """The files of a folder a view could read (the first 200, hidden and empty files aside)."""
    files = sorted(f for f in folder.rglob("*") if f.is_file() and not f.name.startswith("."))[:200]
    return [f for f in files if f.stat().st_size]


def _detect_folder(folder: Path) -> list[str]:
    """The kinds of a folder's files by vote; files of an ending no kind reads (``import_report.txt``)
    vote only when nothing else does."""
    files = _folder_files(folder)
    readable = [f for f in files if f.suffix.lower() in ACCEPT.split(",")] or files
    votes = Counter(kinds[0] for f in readable if (kinds := detect(f)))
    if not votes:
        raise TraceError(f"{folder}: a folder with no readable files")
    return [k for k, _ in votes.most_common()]


def _loaded_files(folder: Path, opened: Opened) -> set[Path]:
    """The files of `folder` that `opened` holds traces from: every trace file for kind ``trace``,
    else the files the imported traces name as their source."""
    from toolcall_lab.trace_files import iter_trace_paths

    if opened.kind == TRACE:
        failed = {x.split(" (not read as a trace: ", 1)[0] for x in opened.left_out}
        return {f.resolve() for f in iter_trace_paths([folder]) if str(f.relative_to(folder)) not in failed}
    sources = (t.metadata.source for t in opened.traces)
    return {Path(s.split("#", 1)[0]).resolve() for s in sources if s}


def kind_of(path: Path) -> str | None:
    """The one kind a file's content says it is (``trace``, or an import kind), None when it looks
    like none of them: for telling a user what a file left unread is, not for choosing a reader."""
    from toolcall_lab.importers._files import looks_like

    try:
        found = detect(path)
        return TRACE if found[:1] == [TRACE] else (looks_like(path) if found else None)
    except OSError:
        return None


def import_hint(path: Path, kind: str | None) -> str:
    """What a file that is not a trace looks like, and the command that imports it (a view's file
    box imports it too): for a file `compare` cannot read."""
    if kind is None:
        return "not a trace file, and no import kind recognises it"
    if kind == TRACE:
        return "a trace file"
    command = f"toolcall-lab import {kind} {path} --out traces/"
    return f"not a trace file: it looks like {kind}; import it with `{command}`"


IMPORT_FIRST = (
    "import them first (`toolcall-lab import KIND FILE --out traces/`, then compare that folder), "
    "or open one from the file box of a TraceView or CompareView, which imports it"
)
"""How to bring files that are not traces into a comparison."""


def _left_out(folder: Path, opened: Opened) -> tuple[str, ...]:
    """Every file of `folder` that `opened` holds nothing from, with what it looks like: a file that
    was read is never listed."""
    loaded = _loaded_files(folder, opened)
    told = {x.rsplit(" (", 1)[0] for x in opened.left_out}  # named already, with their error
    out = list(opened.left_out)
    for f in _folder_files(folder):
        if f.resolve() in loaded or str(f.relative_to(folder)) in told:
            continue
        kind = kind_of(f)
        if kind == opened.kind:
            continue  # read by the importer, with nothing in it to import (its report says so)
        what = f"looks like {kind}" if kind else "not read: no kind recognises it"
        out.append(f"{f.relative_to(folder)} ({what})")
    return tuple(out)


def _short(message: str, p: Path) -> str:
    """An error message without the path (the caller names the file once)."""
    message = message.replace(f"{p}: ", "").replace(str(p), p.name)
    if message.startswith(f"{p.name}: "):
        message = message[len(p.name) + 2 :]
    return message.strip(" :;") or "unreadable"


def _read_traces(p: Path) -> tuple[list[Trace], list[tuple[Path, str]]]:
    """The traces of a trace file, or of a folder's ``*.json`` files; in a folder, a file that does
    not load costs only itself (returned with its error), as in `compare`."""
    from toolcall_lab.trace_files import iter_trace_paths, load

    if not p.is_dir():
        return [load(p)], []
    traces, failed = [], []
    for f in iter_trace_paths([p]):
        try:
            traces.append(load(f))
        except TraceError as exc:
            failed.append((f, _short(str(exc), f)))
    return traces, failed


def _import(p: Path, kind: str) -> Opened:
    from toolcall_lab.importers import import_source

    if kind == TRACE:
        traces, failed = _read_traces(p)
        if not traces:
            why = "; ".join(f"{f.relative_to(p)}: {m}" for f, m in failed[:3])
            raise TraceError(f"{p}: no trace files in it" + (f" that load ({why})" if why else ""))
        unread = tuple(
            f"{f.relative_to(p)} (not read as a trace: {m[:160]}{'…' if len(m) > 160 else ''})"
            for f, m in failed
        )
        return Opened(traces=traces, source=str(p), kind=TRACE, left_out=unread)
    try:
        result = import_source(kind, p)
    except ToolcallLabError:
        raise
    except (OSError, UnicodeDecodeError, RecursionError, MemoryError) as exc:
        raise TraceError(f"{type(exc).__name__}: {exc}") from exc
    return Opened(traces=list(result.traces), source=str(p), kind=kind, report=result.report)


def open_source(path: str | Path, kind: str = DETECT) -> Opened:
    """The traces in a file or folder, read as `kind` (``detect``: from its content; ``trace``: a
    toolcall_lab trace file; or any name of `toolcall_lab.importers.KINDS`).

    Raises:
        TraceError: missing, empty or unreadable, or no kind could read it (one line: the file once,
            then what each kind that was tried said).
    """
    from toolcall_lab.importers import KINDS

    p = Path(path).expanduser()
    if not p.exists():
        raise TraceError(f"{p}: no such file or folder")
    if p.is_file() and p.stat().st_size == 0:
        raise TraceError(f"{p}: the file is empty")
    if kind not in (DETECT, TRACE, *KINDS):
        raise TraceError(f"unknown kind {kind!r}: choose {', '.join(k for k, _ in kinds())}")
    try:
        candidates = detect(p) if kind == DETECT else [kind]
        if not candidates:
            with p.open("rb") as fh:
                what = what_it_is(fh.read(HEAD_BYTES)) or "content no kind recognises"
            raise TraceError(
                f"{p}: no kind reads this file: it is {what}; open a trace file, a recording or a "
                "transcript, or choose its kind if you know it"
            )
    except OSError as exc:
        raise TraceError(f"{p}: cannot read: {exc.strerror or exc}") from None
    tried: list[str] = []
    for candidate in candidates:
        try:
            opened = _import(p, candidate)
        except ToolcallLabError as exc:
            tried.append(f"as {candidate}: {_short(str(exc), p)}")
            continue
        if opened.traces or (opened.report is not None and opened.report.source_calls):
            if p.is_dir():
                opened = Opened(
                    traces=opened.traces,
                    source=opened.source,
                    kind=opened.kind,
                    report=opened.report,
                    left_out=_left_out(p, opened),
                )
            return opened
        tried.append(f"as {candidate}: no traces in it")
    if kind != DETECT:
        raise TraceError(f"{p}: {'; '.join(tried)}")
    if candidates == [TRACE]:  # its content says trace file: the trace reader's error is the one
        raise TraceError(f"{p}: a trace file that does not load: {tried[0].removeprefix('as trace: ')}")
    raise TraceError(
        f"{p}: no importer could read it ({'; '.join(tried)}); choose a kind if the detection was wrong"
    )


def open_traces(path: str | Path, kind: str = DETECT) -> list[Trace]:
    """The traces of `open_source` alone (the report is dropped: prefer `open_source` in a view)."""
    return open_source(path, kind).traces


def open_upload(name: str, content: bytes, kind: str = DETECT) -> Opened:
    """Uploaded bytes (a FileUpload value), read through a temporary file of the same name so the
    same detection applies; messages, the traces' sources and the report name the upload, never
    the temporary file (it is gone once the upload is read)."""
    with tempfile.TemporaryDirectory(prefix="toolcall-lab-upload-") as folder:
        target = Path(folder) / Path(name).name
        target.write_bytes(content)
        try:
            opened = open_source(target, kind)
        except TraceError as exc:
            raise TraceError(str(exc).replace(str(target), name)) from None

        def named(text: str) -> str:
            return text.replace(str(target), name).replace(folder, "(upload)")

        traces = [
            replace(
                t,
                metadata=replace(
                    t.metadata, source=named(t.metadata.source or name), notes=named(t.metadata.notes)
                ),
            )
            for t in opened.traces
        ]
        report = opened.report
        if report is not None:
            issues = tuple(replace(i, where=named(i.where), what=named(i.what)) for i in report.issues)
            report = replace(report, source=named(report.source), issues=issues)
        return Opened(
            traces=traces,
            source=name,
            kind=opened.kind,
            report=report,
            left_out=tuple(named(x) for x in opened.left_out),
        )


def report_html(opened: Opened) -> str:
    """What was opened, and what the source held that the traces do not: the calls imported
    against the source's, and every issue by file and line. Losses are shown as warnings."""
    name = Path(opened.source).name or opened.source
    n = len(opened.traces)
    head = f"opened {name} as {opened.kind}: {n} trace{'s' if n != 1 else ''}"
    r = opened.report
    left = ""
    if opened.left_out:
        shown = "".join(f"<li>{e(x)}</li>" for x in opened.left_out[:50])
        more = f"<li>… and {len(opened.left_out) - 50} more</li>" if len(opened.left_out) > 50 else ""
        left = (
            f"<div class='tcl-warn'>⚠ {len(opened.left_out)} file(s) of the folder were not read as "
            f"{e(opened.kind)} (nothing from them is shown): open them on their own, or choose their "
            f"kind:</div><ul>{shown}{more}</ul>"
        )
    if r is None:
        return f"<div class='tcl-report'>✔ {e(head)}{left}</div>"
    counts = (
        f"tool calls: {r.source_calls} in the source, {r.imported_calls} imported; "
        f"model calls: {r.source_model_calls} in the source, {r.imported_model_calls} imported"
    )
    titles = {
        "failed": "⚠ not represented (present in the source, not in the traces)",
        "gap": "missing from the source",
        "skipped": "skipped",
    }
    groups = []
    for issue_kind in ("failed", "gap", "skipped"):
        items = [i for i in r.issues if i.kind == issue_kind]
        if items:
            shown = "".join(f"<li>{e(str(i))}</li>" for i in items[:50])
            more = f"<li>… and {len(items) - 50} more</li>" if len(items) > 50 else ""
            groups.append(
                f"<div class='{'tcl-warn' if issue_kind == 'failed' else 'tcl-muted'}'>"
                f"{e(titles[issue_kind])} ({len(items)}):</div><ul>{shown}{more}</ul>"
            )
    if r.ok and not opened.left_out:
        mark, cls = "✔", ""
    else:
        mark, cls = "⚠ imported with losses:", " tcl-warn"
    body = "".join(groups) + left
    summary = f"<span class='{cls.strip()}'>{e(mark)} {e(head)}</span> · {e(counts)}"
    if not body:
        return f"<div class='tcl-report'>{summary}</div>"
    return (
        f"<div class='tcl-report'><details{' open' if cls else ''}>{SUMMARY}{summary} · "
        f"{len(r.issues)} issue{'s' if len(r.issues) != 1 else ''}</summary>{body}</details></div>"
    )

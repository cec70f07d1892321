"""Reading source files: text that may be damaged, JSON whose errors name the place, the kind a file
looks like, and folders imported file by file (one unreadable file costs only itself).

Bytes that are not UTF-8 are read as U+FFFD and reported per line (a ``damaged`` issue): one bad
byte costs one character, not the file. A file that starts with a UTF-16 or UTF-32 byte order mark
is decoded as that encoding, with a note saying so (editors and PowerShell's ``>`` write UTF-16). An
empty file, or one of another kind, is `NotThisKind`
(the message says what it looks like and which kind would read it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from toolcall_lab.exceptions import ToolcallLabError
from toolcall_lab.importers._report import ImportResult, Issue, NotThisKind, SourceError, merge_results

READ_ERRORS = (ValueError, KeyError, TypeError, AttributeError, IndexError, OSError, RecursionError)
"""What reading a malformed file of a known shape can raise (caught per file, reported with its name)."""


def read_text(path: Path, issues: list[Issue], bad: dict[int, int] | None = None) -> str:
    """The file as text; lines with bytes that are not UTF-8 are reported and read with U+FFFD.

    Each such line is one ``damaged`` issue counting exactly the bytes that are not UTF-8 and the
    U+FFFD characters put in their place (one per invalid sequence, as Python's ``replace`` does);
    `bad`, when given, receives line number -> U+FFFD characters, so an importer can mark the texts
    that hold them."""
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    encoding = bom_encoding(data)
    if encoding is not None:
        text, n_bad = decode_bom(data, encoding)
        issues.append(
            Issue(
                kind="damaged" if n_bad else "note",
                where=path.name,
                what=f"the file is {encoding} (its byte order mark says so), not UTF-8: read as {encoding}"
                + (f"; {n_bad} sequence(s) are not valid {encoding} and are read as U+FFFD" if n_bad else ""),
            )
        )
        return text
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    lines = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        text, errors = _decode(raw)
        lines.append(text)
        if not errors:
            continue
        first = errors[0]
        n_bytes = sum(end - start for start, end, _ in errors)
        if bad is not None:
            bad[number] = len(errors)
        issues.append(
            Issue(
                kind="damaged",
                where=f"{path.name} line {number}",
                what=f"{n_bytes} byte(s) are not UTF-8 (the first, 0x{raw[first[0]]:02x} at column "
                f"{first[0] + 1}: {first[2]}); the line is read with {len(errors)} U+FFFD character(s) "
                "in their place, and the texts holding them say so",
            )
        )
    return "\n".join(lines)


_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32-LE"),
    (b"\x00\x00\xfe\xff", "UTF-32-BE"),
    (b"\xff\xfe", "UTF-16-LE"),
    (b"\xfe\xff", "UTF-16-BE"),
)


def bom_encoding(data: bytes) -> str | None:
    """The encoding a UTF-16 / UTF-32 byte order mark at the start of `data` names (None: none)."""
    return next((name for bom, name in _BOMS if data.startswith(bom)), None)


def decode_bom(data: bytes, encoding: str) -> tuple[str, int]:
    """`data` (starting with its byte order mark) decoded as `encoding`, and how many invalid
    sequences were read as U+FFFD."""
    bom = next(b for b, name in _BOMS if name == encoding)
    strict = True
    try:
        text = data[len(bom) :].decode(encoding)
    except UnicodeDecodeError:
        strict = False
        text = data[len(bom) :].decode(encoding, errors="replace")
    return text, 0 if strict else max(1, text.count("\ufffd"))


def decoded(data: bytes) -> str:
    """`data` as text for a quick scan: UTF-16 / UTF-32 when a byte order mark says so, else UTF-8 with
    U+FFFD (no report: `read_text` reports)."""
    encoding = bom_encoding(data)
    if encoding is not None:
        return decode_bom(data, encoding)[0]
    return data.decode("utf-8", errors="replace")


def _decode(raw: bytes) -> tuple[str, list[tuple[int, int, str]]]:
    """`raw` decoded with U+FFFD for each invalid sequence, and every (start, end, reason) replaced."""
    parts: list[str] = []
    errors: list[tuple[int, int, str]] = []
    pos = 0
    while True:
        try:
            parts.append(raw[pos:].decode("utf-8"))
            break
        except UnicodeDecodeError as exc:
            start, end = pos + exc.start, pos + exc.end
            parts.append(raw[pos:start].decode("utf-8") + "\ufffd")
            errors.append((start, end, exc.reason))
            pos = end
    return "".join(parts), errors


def json_error(exc: json.JSONDecodeError, *, with_line: bool = True) -> str:
    """A JSON syntax error as Python words it (``Extra data: line 2 column 1``), for messages."""
    where = f"line {exc.lineno} column {exc.colno}" if with_line else f"column {exc.colno}"
    return f"{exc.msg}: {where}"


def not_empty(path: Path, text: str, kind: str) -> None:
    """Raise `NotThisKind` for a file without content."""
    if not text.strip():
        raise NotThisKind(f"{path}: an empty file (no {kind} content to import)")


def load_json(path: Path, text: str, kind: str | None = None) -> Any:
    """One JSON document; a syntax error names the line and column, and the kind the file looks
    like when that is another (`NotThisKind`: a Claude Code ``.jsonl`` given to ``inspect``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        other = looks_like(path) if kind is not None else None
        if other is not None and other != kind:
            raise wrong_kind(path, kind or "", f"not one JSON document ({json_error(exc)})") from None
        raise SourceError(f"{path}: not valid JSON ({json_error(exc)})") from None


def _first_json_line(text: str) -> Any:
    for line in text.splitlines():
        if line.strip():
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def _kind_of_record(doc: dict[str, Any]) -> str | None:
    """The kind one JSON object (a whole file, or a line of a JSON-lines file) belongs to."""
    if "resourceSpans" in doc:
        return "otlp"
    if doc.get("type") in ("user", "assistant", "summary", "system", "queue-operation") and (
        "sessionId" in doc or "uuid" in doc or "leafUuid" in doc
    ):
        return "claude-code"
    if "trajectory" in doc and "history" in doc:
        return "swe-agent"
    if isinstance(doc.get("history"), list) and ("instance_id" in doc or "metrics" in doc):
        return "openhands"
    if isinstance(doc.get("observations"), list):
        return "langfuse"
    if "samples" in doc and "eval" in doc:
        return "inspect"
    if "question" in doc and "function" in doc:
        return "bfcl"
    if "ground_truth" in doc:
        return "bfcl answers"
    if (
        "choices" in doc
        or doc.get("type") == "message"
        or doc.get("object") == "response"
        or str(doc.get("type", "")).startswith(("response.", "message_", "content_"))
    ):
        return "recording"
    return None


def looks_like(path: Path) -> str | None:
    """The import kind a file looks like, from its content (None when it looks like none of them)."""
    try:
        data = path.read_bytes()[:4_000_000]
    except OSError:
        return None
    if data.startswith(b"PK\x03\x04"):  # a zip: inspect's .eval log holds a header.json
        return "inspect" if b"header.json" in data or b"_journal/start.json" in data else None
    text = data.decode("utf-8", errors="replace")
    head = text.lstrip()
    if head.startswith(("data:", "event:", "interactions:")):
        return "recording"
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    if doc is None:  # JSON lines: judge by the first
        line = _first_json_line(text)
        return _kind_of_record(line) if isinstance(line, dict) else None
    items = doc if isinstance(doc, list) else [doc]
    first = items[0] if items else None
    if isinstance(doc, dict):
        return _kind_of_record(doc)
    if isinstance(first, dict):
        if "resourceSpans" in first:
            return "otlp"
        if "traj" in first:
            return "tau-bench"
        if ("action" in first or "observation" in first) and "timestamp" in first:
            return "openhands"
        if "request" in first and "response" in first:
            return "recording"
    return None


def wrong_kind(path: Path, kind: str, what: str) -> NotThisKind:
    """`NotThisKind` for a file of `kind`'s extension without `what`, naming the kind it looks like."""
    other = looks_like(path)
    hint = ""
    if other and other != kind:
        hint = (
            f"; it looks like {other} (try `toolcall-lab import {other} {path}`)"
            if " " not in other
            else f"; it looks like {other}"
        )
    return NotThisKind(f"{path}: not a file of kind {kind}: {what}{hint}")


def import_folder(
    kind: str,
    folder: Path,
    suffixes: Sequence[str],
    one_file: Callable[[Path], ImportResult],
    *,
    recursive: bool = False,
    companion: Callable[[Path], bool] | None = None,
) -> ImportResult:
    """Import every file of `folder` ending with one of `suffixes`, each on its own: a file that cannot
    be read is a ``failed`` issue naming it (its calls are unknown), an empty file or one of another
    kind is ``skipped`` with the reason; files with other endings are listed as skipped. Files and
    subfolders `companion` accepts are read by another file's import (not listed, not read here)."""
    entries = sorted(folder.rglob("*") if recursive else folder.iterdir())
    files = [
        f for f in entries if f.is_file() and not f.name.startswith(".") and not (companion and companion(f))
    ]
    subfolders = (
        []
        if recursive
        else [
            f
            for f in entries
            if f.is_dir() and not f.name.startswith(".") and not (companion and companion(f))
        ]
    )
    chosen = [f for f in files if f.name.endswith(tuple(suffixes))]
    if not chosen:
        raise NotThisKind(
            f"{folder}: no {' / '.join(suffixes)} file in this folder ({len(files)} other file(s))"
        )
    others = [f for f in files if f not in chosen]
    issues = [
        Issue(
            kind="skipped",
            where=str(f.relative_to(folder)),
            what=f"not a {' / '.join(suffixes)} file: not read as {kind}"
            + (f" (it looks like {other})" if (other := looks_like(f)) else ""),
        )
        for f in others
        if len(others) <= 10
    ]
    issues += [
        Issue(
            kind="skipped",
            where=f"{d.name}/",
            what=f"a folder inside the folder: its files are not read (import it on its own: "
            f"`toolcall-lab import {kind} {d}`)",
        )
        for d in subfolders
    ]
    if len(others) > 10:
        issues.append(
            Issue(
                kind="skipped",
                where=str(folder),
                what=f"{len(others)} file(s) not ending with {' / '.join(suffixes)}: not read as {kind}",
            )
        )
    results = []
    for f in chosen:
        name = str(f.relative_to(folder))
        try:
            results.append(one_file(f))
        except NotThisKind as exc:
            issues.append(Issue(kind="skipped", where=name, what=str(exc).removeprefix(f"{f}: ")))
        except (SourceError, ToolcallLabError) as exc:
            issues.append(
                Issue(
                    kind="failed",
                    where=name,
                    what=f"{str(exc).removeprefix(f'{f}: ')}; nothing of this file is imported",
                    unreadable=True,  # its calls are not in the counts: the summary says so
                )
            )
        except READ_ERRORS as exc:
            issues.append(
                Issue(
                    kind="failed",
                    where=name,
                    what=f"could not be read as {kind} ({type(exc).__name__}: {exc}); nothing of this "
                    "file is imported",
                    unreadable=True,
                )
            )
    merged = merge_results(kind, str(folder), results)
    report = merged.report
    from dataclasses import replace

    return ImportResult(
        traces=merged.traces, slugs=merged.slugs, report=replace(report, issues=(*report.issues, *issues))
    )

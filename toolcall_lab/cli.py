"""The ``toolcall-lab`` command line: thin wrappers over the library, one subcommand per job."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from toolcall_lab._unicode import escape
from toolcall_lab.exceptions import ToolcallLabError

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - the optional extra is absent
    _orjson = None


def _encode(text: str) -> bytes:
    """UTF-8 whatever the locale; lone surrogates (legal in JSON text, not in UTF-8) become
    ``\\uXXXX`` escapes, so such strings print instead of crashing."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return escape(text).encode("utf-8")


def _write(data: bytes) -> None:
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        buffer.write(data)
    else:  # a text-only stdout (captured in tests)
        sys.stdout.write(data.decode("utf-8"))


def _dumps(value: Any) -> bytes:
    """``json.dumps(value, indent=2, ensure_ascii=False)`` as UTF-8; orjson writes the same bytes
    several times faster when it is installed (it refuses lone surrogates and integers beyond 64
    bits: json writes those)."""
    if _orjson is not None:
        try:
            return bytes(_orjson.dumps(value, option=_orjson.OPT_INDENT_2))
        except TypeError:
            pass
    return _encode(json.dumps(value, indent=2, ensure_ascii=False))


def write_json(doc: Any) -> None:
    """JSON to stdout as UTF-8 whatever the locale (lone surrogates escaped, see `_encode`)."""
    sys.stdout.flush()
    _write(_dumps(doc))
    _write(b"\n")
    sys.stdout.flush()


class _ResponsesOut:
    """The `parse` output, written as the responses come (memory does not grow with their number):
    one response prints as its object, several as ``{"format", "responses": [...]}``, then the
    fields of `close` (``container``, ``unreadable``). The same text ``json.dumps(indent=2)`` of the
    whole would give."""

    def __init__(self) -> None:
        self.count = 0
        self._first: dict[str, Any] | None = None

    def add(self, doc: dict[str, Any]) -> None:
        self.count += 1
        if self.count == 1:
            self._first = doc
            return
        if self._first is not None:
            sys.stdout.flush()
            _write(f'{{\n  "format": {json.dumps(self._first["format"])},\n  "responses": [\n'.encode())
            _write(_nested(self._first, b"    "))
            self._first = None
        _write(b",\n" + _nested(doc, b"    "))

    def close(self, tail: dict[str, Any]) -> None:
        if self._first is not None:
            write_json({**self._first, **tail})
        elif self.count:
            fields = b"".join(
                b",\n  " + _dumps(k) + b": " + _nested(v, b"  ").lstrip() for k, v in tail.items()
            )
            _write(b"\n  ]" + fields + b"\n}\n")
            sys.stdout.flush()
        elif "unreadable" not in tail:  # nothing was in the file, and nothing went wrong
            write_json({"format": None, "responses": [], **tail})


def _nested(value: Any, prefix: bytes) -> bytes:
    """`value` as JSON indented one level deeper (`prefix` before every line)."""
    return prefix + _dumps(value).replace(b"\n", b"\n" + prefix)


def _parse(args: argparse.Namespace) -> int:
    """Stream the recording through the parser and the JSON out, response by response (memory
    grows with the calls of one response, not with the chunks or the responses)."""
    from toolcall_lab.exceptions import WireFormatError
    from toolcall_lab.formats.recordings import RecordingReader

    reader = RecordingReader(args.path, errors="keep")
    out = _ResponsesOut()
    failure: WireFormatError | None = None
    worst = 0
    try:
        for response in reader:
            worst = max(worst, _report(out.count, response))
            out.add(response.to_dict())
    except WireFormatError as exc:  # keep what was read before the unreadable part
        failure = exc
        for partial in exc.partial_responses:
            worst = max(worst, _report(out.count, partial))
            out.add(partial.to_dict())  # type: ignore[attr-defined]
    tail: dict[str, Any] = {"container": reader.container}
    if failure is not None:
        tail["unreadable"] = str(failure)
    out.close(tail)
    if failure is not None:
        raise failure
    return worst


def _report(number: int, response: Any) -> int:
    """Say on stderr what is wrong with one response: 2 unreadable data, 1 a provider error, else 0."""
    if response.error is None:
        return 0
    unreadable = any(f.kind == "unreadable_data" for f in response.findings)
    what = "holds unreadable data" if unreadable else "is a provider error"
    error = response.error.removeprefix("unreadable data: ")
    print(f"toolcall-lab parse: response {number} {what}: {error}".replace("\n", " "), file=sys.stderr)
    return 2 if unreadable else 1


def _conformance(args: argparse.Namespace) -> int:
    from toolcall_lab.conformance import quirk_table, run_corpus

    results = run_corpus(args.corpus)
    print(quirk_table(results))
    failed = [r for r in results if not r.passed]
    for r in failed:
        print(f"FAIL {r.case.name}: " + "; ".join(r.problems), file=sys.stderr)
    return 1 if failed else 0


def _findings(args: argparse.Namespace) -> int:
    from toolcall_lab.finding_kinds import FINDING_KINDS, reference_markdown

    if args.markdown:
        print(reference_markdown())
        return 0
    for kind, info in FINDING_KINDS.items():
        print(f"{kind}  [{info.severity}]\n    {info.meaning}\n    e.g. {info.example}\n")
    return 0


_LIGHT = frozenset({"parse", "conformance", "findings"})
"""Commands that only read recordings: their parser is built without the run / import commands,
whose registration imports the importers, the loop and asyncio (most of a small parse's time)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; for a `command` of `_LIGHT`, without the other commands (lazy imports)."""
    parser = argparse.ArgumentParser(prog="toolcall-lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "parse",
        help="parse a recorded response (.sse, .chunks.jsonl, .json, cassette, or - for standard input); "
        "exit 1 if it holds a provider error, 2 if any of it is unreadable",
    )
    p.add_argument(
        "path", help="the recording file, or - to read standard input (its format told from its bytes)"
    )
    p.set_defaults(func=_parse)
    p = sub.add_parser("conformance", help="run the quirk-by-provider conformance corpus and print the table")
    p.add_argument("corpus", nargs="?", default=None, help="corpus folder (default: tests/conformance)")
    p.set_defaults(func=_conformance)
    p = sub.add_parser("findings", help="print the reference of every parser finding kind")
    p.add_argument("--markdown", action="store_true", help="as the Markdown table the README holds")
    p.set_defaults(func=_findings)
    if command in _LIGHT:
        return parser
    from toolcall_lab import _cli_runs

    _cli_runs.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from toolcall_lab import _startup

    guarded = _startup.active()  # (the command's process: a signal before the command runs exits 130/143)
    given = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(given[0] if given else None)
    args = parser.parse_args(given)
    for stream in (sys.stdout, sys.stderr):  # a lone surrogate in a name or message prints as \udXXX
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        return _command(args, guarded)
    finally:
        if guarded:
            _startup.rearm()


def _command(args: argparse.Namespace, guarded: bool = False) -> int:
    try:
        if guarded:  # a signal from here on stops the command as Ctrl-C does (said below), until its
            from toolcall_lab import _startup  # own handling takes over from the guard in one step

            _startup.release()
        return int(args.func(args))
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt as exc:  # Ctrl-C (or SIGTERM where a command handles it): one line, the
        partial = getattr(exc, "partial_result", None)  # conventional exit status
        kept = f" (the run so far: {partial!r})" if partial is not None and args.command == "replay" else ""
        sigterm = getattr(exc, "signal_name", None) == "SIGTERM"
        words = "terminated (SIGTERM)" if sigterm else "interrupted (Ctrl-C)"
        print(f"toolcall-lab {args.command}: {words}{kept}", file=sys.stderr)
        return 143 if sigterm else 130
    except Exception as exc:
        if not isinstance(exc, ToolcallLabError | OSError | UnicodeDecodeError) and not type(
            exc
        ).__module__.startswith("openai"):
            raise  # a bug of ours: keep the traceback
        print(f"toolcall-lab {args.command}: {exc}".replace("\n", " "), file=sys.stderr)
        return 2

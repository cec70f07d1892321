"""The ``toolcall-lab`` command line: thin wrappers over the library, one subcommand per job."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from toolcall_lab.exceptions import ToolcallLabError

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def write_json(doc: Any) -> None:
    """JSON to stdout as UTF-8 whatever the locale; lone surrogates (legal in JSON text, not in
    UTF-8) are written as ``\\uXXXX`` escapes, so such strings print instead of crashing."""
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        sys.stdout.flush()
        buffer.write(data)
        buffer.flush()
    else:  # a text-only stdout (captured in tests)
        sys.stdout.write(data.decode("utf-8"))


def _parse(args: argparse.Namespace) -> int:
    """Stream the recording through the parser (memory grows with the calls, not the chunks)."""
    from toolcall_lab.exceptions import WireFormatError
    from toolcall_lab.formats.recordings import RecordingReader

    reader = RecordingReader(args.path, errors="keep")
    responses: list[Any] = []
    failure: WireFormatError | None = None
    try:
        responses.extend(reader)
    except WireFormatError as exc:  # keep what was read before the unreadable part
        failure = exc
        responses = list(exc.partial_responses) or responses
    docs = [r.to_dict() for r in responses]
    out: dict[str, Any]
    if len(docs) == 1:
        out = docs[0]
    else:
        out = {"format": docs[0]["format"] if docs else None, "responses": docs}
    out["container"] = reader.container
    if failure is not None:
        out["unreadable"] = str(failure)
    if docs or failure is None:
        write_json(out)
    if failure is not None:
        raise failure
    errors = [(n, r.error) for n, r in enumerate(responses) if r.error]
    for n, error in errors:
        print(
            f"toolcall-lab parse: response {n} is a provider error: {error}".replace("\n", " "),
            file=sys.stderr,
        )
    return 1 if errors else 0


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolcall-lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "parse",
        help="parse a recorded response (.sse, .chunks.jsonl, .json, cassette); exit 1 if it holds a "
        "provider error, 2 if unreadable",
    )
    p.add_argument("path")
    p.set_defaults(func=_parse)
    p = sub.add_parser("conformance", help="run the quirk-by-provider conformance corpus and print the table")
    p.add_argument("corpus", nargs="?", default=None, help="corpus folder (default: tests/conformance)")
    p.set_defaults(func=_conformance)
    p = sub.add_parser("findings", help="print the reference of every parser finding kind")
    p.add_argument("--markdown", action="store_true", help="as the Markdown table the README holds")
    p.set_defaults(func=_findings)
    from toolcall_lab import _cli_runs

    _cli_runs.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt as exc:  # Ctrl-C: one line, the conventional exit status
        partial = getattr(exc, "partial_result", None)
        kept = f" (the run so far: {partial!r})" if partial is not None and args.command == "replay" else ""
        print(f"toolcall-lab {args.command}: interrupted (Ctrl-C){kept}", file=sys.stderr)
        return 130
    except Exception as exc:
        if not isinstance(exc, ToolcallLabError | OSError | UnicodeDecodeError) and not type(
            exc
        ).__module__.startswith("openai"):
            raise  # a bug of ours: keep the traceback
        print(f"toolcall-lab {args.command}: {exc}".replace("\n", " "), file=sys.stderr)
        return 2

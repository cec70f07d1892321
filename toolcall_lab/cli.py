"""The ``toolcall-lab`` command line: thin wrappers over the library, one subcommand per job."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from toolcall_lab.exceptions import ToolcallLabError


def _parse(args: argparse.Namespace) -> int:
    from toolcall_lab.formats import read_recording

    recording = read_recording(args.path)
    responses = recording.parse()
    docs = [r.to_dict() for r in responses]
    out: dict[str, Any]
    if len(docs) == 1:
        out = docs[0]
    else:
        out = {"format": docs[0]["format"] if docs else None, "responses": docs}
    out["container"] = recording.container
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolcall-lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("parse", help="parse a recorded response (.sse, .chunks.jsonl, .json, cassette)")
    p.add_argument("path")
    p.set_defaults(func=_parse)
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
    except Exception as exc:
        if not isinstance(exc, ToolcallLabError | OSError | UnicodeDecodeError) and not type(
            exc
        ).__module__.startswith("openai"):
            raise  # a bug of ours: keep the traceback
        print(f"toolcall-lab {args.command}: {exc}".replace("\n", " "), file=sys.stderr)
        return 2

"""Reads the expected tool calls that ../shared/realdata/PROVENANCE.md lists for each recording."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

_FILE = re.compile(r"^### `(?P<path>[^`]+)`")
_GROUP = re.compile(r"^  - (?P<label>.*?): (?:(?P<n>\d+) call\(s\)|.*\(no tool calls\))\s*$")
_CALL = re.compile(
    r"^    - id=`(?P<id>.*?)` name=`(?P<name>.*?)` arguments(?P<lit> \(as a JSON string literal\))?"
    r"=`(?P<args>.*)`(?P<bad> \*\*\(not valid JSON\)\*\*)?\s*$"
)
_CHOICE = re.compile(r"\(choice (\d+)\)")


@dataclass
class ExpectedCall:
    tool_call_id: str | None  # None: the recording has no usable id (no id, or "")
    name: str
    arguments: str
    prefix_only: bool  # PROVENANCE truncated the string with "…"
    valid_json: bool


@dataclass
class ExpectedResponse:
    choices: dict[int, list[ExpectedCall]] = field(default_factory=dict)


def expected_calls(provenance: Path) -> dict[str, list[ExpectedResponse]]:
    out: dict[str, list[ExpectedResponse]] = {}
    current: list[ExpectedResponse] | None = None
    calls: list[ExpectedCall] | None = None
    for line in provenance.read_text(encoding="utf-8").splitlines():
        if m := _FILE.match(line):
            current = out.setdefault(m["path"], [])
            continue
        if current is None:
            continue
        if m := _GROUP.match(line):
            c = _CHOICE.search(m["label"])
            choice = int(c.group(1)) if c else 0
            if choice == 0 or not current:
                current.append(ExpectedResponse())
            calls = current[-1].choices.setdefault(choice, [])
            continue
        if (m := _CALL.match(line)) and calls is not None:
            args = json.loads(m["args"]) if m["lit"] else m["args"]
            raw_id = m["id"]
            calls.append(
                ExpectedCall(
                    tool_call_id=None if raw_id in ("(no id)", '"" (empty)') else raw_id,
                    name=m["name"],
                    arguments=args[:-1] if args.endswith("…") else args,
                    prefix_only=args.endswith("…"),
                    valid_json=not m["bad"],
                )
            )
    return {path: responses for path, responses in out.items() if responses}

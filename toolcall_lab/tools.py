"""Tool registry: plain functions (sync or async) -> OpenAI function schemas, with per-tool timeouts.

Schemas come from type hints and Google-style docstrings, or are given explicitly, and can be passed
as ``tools=`` to the ``openai`` client. Sync functions run in worker threads (`ToolThreads`, one set
per run) so they never block the event loop.

A sync tool that outlives its timeout is reported at its timeout, and neither the other calls nor the
end of the run wait for it. **Its thread cannot be stopped** (Python has no way to kill a thread): it
runs on in the background until the function returns, and its result is discarded. Worker threads
are daemon threads, so when the interpreter exits first, Python stops such a thread where it stands:
its ``finally`` blocks and other cleanup never run. Give blocking tools their own timeouts (e.g. on
sockets) when that matters.

A tool is a function returning its result (or an awaitable of it): plain and ``async`` functions,
``functools.partial`` objects and callable objects. Generator functions are refused (their body would
not run until someone iterated the generator).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import itertools
import math
import re
import threading
import types
import typing
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

from toolcall_lab._rules import LIMIT_RULE, valid_limit
from toolcall_lab.exceptions import UsageError
from toolcall_lab.messages import ToolCall
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


OUTCOME_STATUSES = ("ok", "error", "timeout", "not_recorded", "invalid_arguments")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome:
    """A tool's result with an explicit status: the text is sent verbatim, the status recorded.

    Return it from a tool to report a failure without raising (replayed tools use it to reproduce
    recorded errors and timeouts exactly). ``invalid_arguments`` says the tool did not run its work
    because its arguments were unusable (e.g. a ``$VAR_REF`` naming no variable). Checked on creation:
    a bad one raises `UsageError` inside the tool, which is then recorded as the tool raising.
    """

    text: str
    status: Literal["ok", "error", "timeout", "not_recorded", "invalid_arguments"] = "ok"
    """``timeout`` reports the tool's own limit expiring (the harness's own limit is `Tool.timeout_s`);
    ``not_recorded``: a replayed call whose result the recording does not hold."""
    duration_s: float | None = None
    """How long the work took, when the tool knows better than the harness's clock (e.g. a server's
    own figure, a replayed duration): recorded as the execution's duration (it starts when the call
    started), labelled by `timing`. It cannot exceed the time the harness waited for the call: a
    larger figure is not used, and the execution's timing note says so. None: the clock's measurement."""
    timing: Timing | None = None
    """Where `duration_s` comes from (required with it, e.g. ``Timing(source="reported", note="the
    server's x-runtime header")``). The harness labels its own measurements itself."""

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise UsageError(
                f"ToolOutcome.text={self.text!r}: must be a str (the text the model reads); "
                "turn the value into text first, e.g. json.dumps(value)"
            )
        if self.status not in OUTCOME_STATUSES:
            raise UsageError(
                f"ToolOutcome.status={self.status!r}: a tool reports one of {', '.join(OUTCOME_STATUSES)} "
                "(the harness alone decides rejected, withheld, cancelled, ...)"
            )
        if (self.duration_s is None) != (self.timing is None):
            raise UsageError(
                f"ToolOutcome(duration_s={self.duration_s!r}, timing={self.timing!r}): give both or neither "
                "(a timing label says where a duration the tool supplies came from; the harness labels "
                "its own measurements)"
            )
        if self.duration_s is not None and not (
            isinstance(self.duration_s, int | float) and 0 <= self.duration_s < math.inf
        ):
            raise UsageError(f"ToolOutcome.duration_s={self.duration_s!r}: must be a number of seconds >= 0")
        if self.timing is not None and not isinstance(self.timing, Timing):
            raise UsageError(f"ToolOutcome.timing={self.timing!r}: must be a toolcall_lab.records.Timing")


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
    check_arguments: bool = True
    """Hold each call's arguments to the tool: the properties `parameters` requires are there, and the
    function accepts every one (a call that fails is ``invalid_arguments``: its body never ran, and
    no TypeError of the harness's call is blamed on the tool). Types and nested structure are the
    tool's business. Both are checked before the call runs (no hook sees it start). Replayed tools
    turn it off and pass `screen_call` instead: they reproduce whatever the recording did."""
    screen_call: Callable[[ToolCall], str | None] | None = None
    """A further check before the call runs (after the argument checks above): returns why the call
    cannot run (it is answered ``invalid_arguments`` with that reason, its body never runs) or None.
    Replayed tools use it to screen out what the recording screened out."""
    is_async: bool = field(init=False, compare=False, repr=False)
    required: tuple[str, ...] = field(init=False, compare=False, repr=False)
    """Arguments a call must carry: required by `parameters`, or by the function's signature."""
    screened: frozenset[str] = field(init=False, compare=False, repr=False)
    """`required`, as a set: checked before the call, with `accepted`."""
    accepted: frozenset[str] | None = field(init=False, compare=False, repr=False)
    """The argument names the function accepts (None: any, it takes ``**kwargs``)."""
    exact: frozenset[str] | None = field(init=False, compare=False, repr=False)
    """The names a call must carry, when they are all it may carry (every argument required) and
    nothing else is checked (no `screen_call`): one comparison checks the call."""
    plain: bool = field(init=False, compare=False, repr=False)
    """An async function without a limit that does not read its call: awaited directly."""

    def __post_init__(self) -> None:
        fn = self.function
        if not callable(fn):
            raise UsageError(f"Tool {self.name!r}: function={fn!r} is not callable")
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise UsageError(
                f"tool {self.name!r} is a generator function: its body would not run until someone "
                "iterated the generator. Return the result instead (e.g. a list)."
            )
        call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects: their __call__ decides
        is_async = inspect.iscoroutinefunction(fn) or (
            not inspect.isroutine(fn)
            and not isinstance(fn, functools.partial)
            and inspect.iscoroutinefunction(call)
        )
        object.__setattr__(self, "is_async", is_async)
        if self.check_arguments:
            required = _required(self.parameters, fn)
            object.__setattr__(self, "required", required)
            object.__setattr__(self, "screened", frozenset(required))
            object.__setattr__(self, "accepted", _accepted(fn))
            exact = self.accepted if self.accepted == self.screened and self.screen_call is None else None
            object.__setattr__(self, "exact", exact)
        else:  # (nothing to check: no signature to read, which replays make many of)
            object.__setattr__(self, "required", ())
            object.__setattr__(self, "screened", frozenset())
            object.__setattr__(self, "accepted", None)
            object.__setattr__(self, "exact", None)
        object.__setattr__(self, "plain", is_async and self.timeout_s is None and not self.uses_current_call)
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise UsageError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        if not valid_limit(self.timeout_s):  # (the rule RunConfig.timeout_s follows)
            raise UsageError(f"Tool.timeout_s={self.timeout_s!r}: {LIMIT_RULE}, or None for no limit")

    def argument_problem(self, arguments: dict[str, Any]) -> str | None:
        """Why these arguments cannot be passed to the tool (None: they can)."""
        missing = [name for name in self.required if name not in arguments]
        accepted = self.accepted
        unknown = [] if accepted is None else [k for k in arguments if k not in accepted]
        if not missing and not unknown:
            return None
        parts = []
        if missing:
            parts.append(f"missing required {_names(missing)}")
        if unknown:
            known = ", ".join(sorted(accepted or ())) or "none"
            parts.append(f"unknown {_names(unknown)} (it takes: {known})")
        return "; ".join(parts)

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


def _names(names: list[str]) -> str:
    return ("argument " if len(names) == 1 else "arguments ") + ", ".join(repr(n) for n in names)


def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: accept what the call carries
        return None


def _required(parameters: dict[str, Any], fn: Any) -> tuple[str, ...]:
    names: list[str] = []
    required = parameters.get("required") if isinstance(parameters, dict) else None
    if isinstance(required, list):
        names += [r for r in required if isinstance(r, str)]
    sig = _signature(fn)
    if sig is not None:
        for name, p in sig.parameters.items():
            keyword = p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            if keyword and p.default is p.empty and name not in names:
                names.append(name)
    return tuple(names)


def _accepted(fn: Any) -> frozenset[str] | None:
    sig = _signature(fn)
    if sig is None or any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return frozenset(
        name for name, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


_THREAD_NUMBERS = itertools.count(1)
"""Worker thread numbers, process-wide: each run has its own workers, and each has its own name."""


class StopIterationInTool(RuntimeError):
    """A sync tool raised StopIteration (or StopAsyncIteration), which no asyncio future can carry
    (``__cause__`` is the original). Python does the same to coroutines (PEP 479)."""


class GeneratorExitInTool(Exception):
    """A sync tool raised GeneratorExit in its worker thread: carried out as an ordinary exception
    (`original`), since asyncio throws a GeneratorExit into the coroutine awaiting the thread as a
    fresh one, its message lost. The executor raises the original again (the run stops)."""

    def __init__(self, original: GeneratorExit) -> None:
        super().__init__(repr(original))
        self.original = original


def call_sync(fn: Callable[..., Any], arguments: dict[str, Any]) -> Any:
    """``fn(**arguments)`` for a worker thread: StopIteration comes out as `StopIterationInTool`,
    GeneratorExit as `GeneratorExitInTool`."""
    try:
        return fn(**arguments)
    except (StopIteration, StopAsyncIteration) as exc:
        raise StopIterationInTool(f"tool raised {type(exc).__name__}") from exc
    except GeneratorExit as exc:
        raise GeneratorExitInTool(exc) from None


class LimitExpired(Exception):
    """The harness's limit on a sync call expired while the call ran in its worker thread (the thread
    runs on; its result is discarded). Deliberately not a ``TimeoutError``: since Python 3.11
    ``concurrent.futures.TimeoutError`` *is* the builtin, so a tool's own ``TimeoutError`` and the
    harness's limit could not be told apart by type."""


class NeverStarted(LimitExpired):
    """A sync call's limit expired before a worker thread had taken it up (a busy machine): it was
    withdrawn and never runs."""


class ToolThreads(concurrent.futures.Executor):
    """The worker threads of one run's sync tools: an idle worker takes the next call, and when none
    is idle a new one starts, so a batch of N blocking calls runs N at once (the concurrency cap, not
    the pool, decides how many run) and a worker stuck in a timed-out call never delays another.

    Workers are daemon threads: a stuck one does not keep the run, `run_sync` or the interpreter from
    finishing (at interpreter exit it is stopped where it stands: its ``finally`` blocks do not run).
    `shutdown()` (at the end of every run) lets idle workers exit; busy ones exit when their call
    returns. On the virtual clock sync tools run inline instead (see `toolcall_lab.clock`).
    """

    def __init__(self, name: str = "toolcall-lab-tool") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._idle: deque[_Worker] = deque()
        self._closed = False
        self.started = 0
        """Threads this pool started so far (for tests and curiosity)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        job = (future, functools.partial(fn, *args, **kwargs))
        with self._lock:
            if self._closed:
                raise RuntimeError("ToolThreads is shut down; this run has ended")
            worker = self._idle.pop() if self._idle else None
            if worker is None:
                self.started += 1
                worker = _Worker(self, f"{self._name}-{next(_THREAD_NUMBERS)}")
        worker.give(job)
        return future

    def run(self, fn: Callable[..., Any], arguments: dict[str, Any]) -> asyncio.Future[Any]:
        """Run ``fn(**arguments)`` on a worker, with the caller's context; await the result."""
        ctx = contextvars.copy_context()
        call = functools.partial(ctx.run, call_sync, fn, arguments)
        return asyncio.get_running_loop().run_in_executor(self, call)

    def start(
        self, fn: Callable[..., Any], arguments: dict[str, Any]
    ) -> tuple[asyncio.Future[Any], concurrent.futures.Future[Any]]:
        """`run`, also returning the worker's job: ``job.cancel()`` is True when no worker had taken
        the call yet (it will never run), False when it is running or done."""
        ctx = contextvars.copy_context()
        job = self.submit(ctx.run, call_sync, fn, arguments)
        return asyncio.wrap_future(job), job

    def wait(self, fn: Callable[..., Any], arguments: dict[str, Any], timeout_s: float) -> Any:
        """Run ``fn(**arguments)`` on a worker and block for at most `timeout_s` real seconds (the
        virtual clock's way to hold a sync tool to its limit: no virtual time passes); raises
        `LimitExpired` when the limit expires (the worker runs on; its result is discarded), or
        `NeverStarted` when no worker had taken the call by then (it never runs). Whatever the tool
        raises itself (its own ``TimeoutError`` too) comes out as it is: whether the limit expired is
        read from the future's state, never from the type of an exception."""
        ctx = contextvars.copy_context()
        future = self.submit(ctx.run, call_sync, fn, arguments)
        done, _ = concurrent.futures.wait((future,), timeout=timeout_s)
        if done:  # (also when it finished just as the limit expired)
            return future.result()
        if future.cancel():
            raise NeverStarted(f"no worker thread had started it after {timeout_s} s")
        raise LimitExpired(f"still running after {timeout_s} s")

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


def _target(function: Any) -> Any:
    """What holds the hints and the docstring: a partial's function, a callable object's ``__call__``."""
    while isinstance(function, functools.partial):
        function = function.func
    if inspect.isroutine(function) or inspect.isclass(function):
        return function
    return getattr(function, "__call__", function)  # noqa: B004


def tool_from_function(
    function: ToolFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    timeout_s: float | None = None,
    idempotent: bool = False,
) -> Tool:
    """Build a `Tool`, deriving the schema from hints and docstring unless `parameters` is given.

    `function` may be a plain or ``async`` function, a ``functools.partial`` (arguments bound by
    position leave the schema, by keyword become defaults; the name and docstring are the wrapped
    function's) or a callable object (its ``__call__`` gives the hints and docstring; pass `name`).
    """
    if isinstance(function, Tool):
        raise UsageError(
            f"{function.name!r} is already a Tool (e.g. made by simulated() or Tool(...)): add it with "
            "registry.add(tool); register() and tool_from_function() take a plain function"
        )
    if not callable(function):
        raise UsageError(f"a tool must be callable; got {function!r}")
    target = _target(function)
    if name is None and isinstance(function, functools.partial):
        name = target.__name__
    name = name or getattr(function, "__name__", None)
    if not name:
        raise UsageError(f"cannot tell what to call the tool {function!r}: pass name=...")
    doc = function.__doc__ if inspect.isroutine(function) else target.__doc__
    if doc is None and not inspect.isroutine(function) and not isinstance(function, functools.partial):
        doc = type(function).__doc__
    summary, arg_docs = _doc_parts(doc)
    if parameters is None:
        hints = typing.get_type_hints(target)
        props: dict[str, Any] = {}
        required: list[str] = []
        for pname, param in inspect.signature(function).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                continue
            schema = json_schema_for(hints.get(pname, param.annotation))
            if pname in arg_docs:
                schema = {**schema, "description": arg_docs[pname]}
            props[pname] = schema
            if param.default is inspect.Parameter.empty:
                required.append(pname)
        parameters = {"type": "object", "properties": props, "required": required}
    return Tool(
        name=name,
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
        self.any_idempotent = False
        """Whether some tool is `Tool.idempotent` (else cross-round history is kept only on request)."""
        for item in tools:
            self.add(item if isinstance(item, Tool) else tool_from_function(item))

    def add(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise UsageError(f"a tool named {tool.name!r} is already registered; names must be unique")
        self._tools[tool.name] = tool
        self.any_idempotent = self.any_idempotent or tool.idempotent
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

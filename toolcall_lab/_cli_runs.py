"""Subcommands that load, replay, record, import and generate traces."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import reprlib
import signal
import sys
from datetime import UTC
from pathlib import Path
from typing import Any

from toolcall_lab.exceptions import UsageError
from toolcall_lab.records import MODES

STRATEGY_HELP = (
    "a built-in (sequential, parallel, serialized, first_only, eager; options in brackets, e.g. "
    "'eager[cap=4,web_search=2]') or MODULE:ATTRIBUTE / path/to/file.py:ATTRIBUTE naming your own"
)


def _split(text: str) -> list[str]:
    """Comma-separated, except inside brackets (``parallel[cap=2,search=1],eager``)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _strategy(text: str) -> str:
    """An argparse type: a mode or strategy spec, checked now (kept as text for worker processes)."""
    from toolcall_lab.strategies import resolve

    try:
        resolve(text, "strategy")
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _modes(text: str) -> list[str]:
    modes = [_strategy(m) for m in _split(text)]
    if not modes:  # (refused as compare refuses an empty list: nothing would be compared)
        raise argparse.ArgumentTypeError(
            f"{text!r} names no mode; give at least one, comma-separated (e.g. --modes sequential,eager)"
        )
    return modes


def _name(spec: str) -> str:
    from toolcall_lab.strategies import name_of

    return name_of(spec)


def cmd_validate(args: argparse.Namespace) -> int:
    """Exit 2 when a file is unusable, 1 when a trace contradicts itself (or, with --strict, has any
    warning), else 0; every file is reported."""
    from toolcall_lab.trace_files import CONTRADICTION, iter_trace_paths, validate

    worst = 0
    for path in iter_trace_paths(args.paths):
        try:
            trace, warnings = validate(path)
        except Exception as exc:  # report every file, then fail
            text = str(exc)
            print(f"ERROR {text if text.startswith(f'{path}:') else f'{path}: {text}'}", file=sys.stderr)
            worst = 2
            continue
        contradicts = [w for w in warnings if w.startswith(CONTRADICTION)]
        print(f"{'CONTRADICTS' if contradicts else 'ok   '} {path}: {trace!r}")
        for w in warnings:
            if w.startswith(CONTRADICTION):
                print(f"  {w}")
                worst = max(worst, 1)
            else:
                print(f"  warning: {w}")
                worst = max(worst, 1 if args.strict else 0)
    return worst


def cmd_replay(args: argparse.Namespace) -> int:
    """Exit 0 when the replay followed the recording, 1 when it diverged (the partial run is shown).
    Says which conversation check was made: first_only against another mode's recording (or the
    reverse) is not checked by default, because the conversations differ on purpose. Ctrl-C and
    SIGTERM by the rule of `_stopped_runs`: the run so far is kept (saved to ``--out``), exit 130/143."""
    import asyncio

    from toolcall_lab._stopping import CURRENT, catch_signals, run_main
    from toolcall_lab.exceptions import ReplayDivergenceError, StartedOnSnapshotError
    from toolcall_lab.replay import (
        default_check,
        replay,
        replay_async,
        replayed_trace,
    )
    from toolcall_lab.runs import RunResult
    from toolcall_lab.strategies import STRATEGIES
    from toolcall_lab.trace_files import load

    out = _check_out(args.out, "replay") if args.out else None
    trace = load(args.path)
    recorded = trace.metadata.mode or "sequential"
    spec = args.strategy or args.mode
    if spec is None:  # the recording's own strategy, like replay(trace)
        if recorded not in STRATEGIES and not _builtin_with_options(recorded):
            print(
                f"toolcall-lab replay: {args.path} was recorded under the strategy {recorded!r}, which is "
                "not a built-in; name it to replay under it (--strategy module:attribute or "
                "path/to/file.py:attribute), or give another (--mode parallel)",
                file=sys.stderr,
            )
            return 2
        spec = recorded
    check = args.check or default_check(trace, spec)
    if check == "off":
        why = (
            f" ({getattr(spec, 'name', spec)} against a {recorded} recording: the conversations differ "
            "on purpose)"
            if args.check is None
            else ""
        )
        print(f"conversation check: off{why}; a divergence from the recording is not detected")
    settings = {} if args.round_trip is None else {"round_trip_s": args.round_trip}
    clock = "real" if args.real_time else "virtual"

    def as_trace(result: RunResult) -> Any:
        return replayed_trace(result, trace, source=str(args.path), clock=clock)

    outside = _stopped_runs("replay", out)
    undo = catch_signals(outside, (signal.SIGINT, signal.SIGTERM))
    try:
        try:
            if args.real_time:  # slow: a signal stops it and keeps the run so far
                replaying = replay_async(trace, spec, check=check, **settings)
                result = run_main(_announced(args, spec, replaying), outside)
            else:  # (fast, but a large trace takes a while: the same rule)
                token = CURRENT.set(outside)
                try:
                    result = replay(trace, spec, virtual=True, check=check, **settings)
                finally:
                    CURRENT.reset(token)
        except asyncio.CancelledError as exc:  # (a virtual replay stopped by a signal)
            if not outside.signals or getattr(exc, "partial_result", None) is None:
                raise
            return _keep_interrupted("replay", outside, exc.partial_result, out, as_trace)  # type: ignore[attr-defined]
        except KeyboardInterrupt as exc:
            if getattr(exc, "partial_result", None) is None:
                raise  # (no record: stopped at once; `cli.main` says it in one line)
            return _keep_interrupted("replay", outside, exc.partial_result, out, as_trace)  # type: ignore[attr-defined]
        except ReplayDivergenceError as exc:
            what = (
                "cannot be replayed"
                if isinstance(exc, StartedOnSnapshotError)
                else "diverged from its recording"
            )
            print(f"toolcall-lab replay: {args.path} {what} under {_name(spec)}: {exc}", file=sys.stderr)
            partial = exc.partial_result
            if partial is not None:
                print(f"  replayed until then: {partial!r}", file=sys.stderr)
                if out is not None and isinstance(partial, RunResult):
                    outside.saving = True
                    where = _save_run(as_trace(partial), out, "replay")
                    print(
                        f"  wrote {where}: the failed run's record up to the divergence "
                        f"({_so_far(partial)}), not a complete replay",
                        file=sys.stderr,
                    )
            elif out is not None:
                print(f"  {out} not written: no run was recorded", file=sys.stderr)
            return 1
        outside.saving = True  # (a signal from here on is said; the record is written whole)
        print(f"{trace!r}\nreplayed as {_name(spec)} on the {clock} clock: {result!r}")
        for r in result.rounds:
            for note in r.strategy_notes:
                print(f"  note (round {r.round_index}): {note}")
        print(
            "  times in seconds on the replay's clock; [label] says what each duration rests on (recorded, "
            "reported, estimated or placeholder; 'upper bound' / 'wait' when it is not the run itself)"
        )
        for r in result.rounds:
            calls = " ".join(
                f"{e.name}[{e.status} {e.started_at:.3f}-{e.ended_at:.3f} {_label(e.timing)}]"
                for e in r.executions
            )
            mc = r.model_call
            model = f"model {mc.started_at:.3f}-{mc.ended_at:.3f}s [{_label(mc.timing)}]"
            print(f"  round {r.round_index}: {model}  {calls}")
        failed = result.reason == "strategy_error"
        if failed:
            print(f"toolcall-lab replay: {result.error}", file=sys.stderr)
        if out is not None:
            where = _save_run(as_trace(result), out, "replay")
            if failed:
                print(
                    f"wrote {where}: the failed run's record ({_so_far(result)}; its outcome says why)",
                    file=sys.stderr,
                )
            else:
                print(f"wrote {where}")
        if outside.signals:  # (it came as the run ended: the whole run was kept)
            name = outside.signal_name
            print(f"toolcall-lab replay: {_words(name)} as the run ended: kept whole", file=sys.stderr)
            return _exit_code(name)
        return 1 if failed else 0
    finally:
        undo()


def _words(name: str) -> str:
    return "terminated (SIGTERM)" if name == "SIGTERM" else "interrupted (Ctrl-C)"


def _exit_code(name: str) -> int:
    return 143 if name == "SIGTERM" else 130


def _stopped_runs(command: str, out: Path | None) -> Any:
    """The `Outside` of a CLI command that runs a run (``record``, ``replay``): Ctrl-C and SIGTERM by
    the rule of `toolcall_lab._stopping.catch_signals`, each said on stderr as it comes:

    1. the first stops the run; what ran is kept (saved to ``--out``), the command says "saving";
    2. a second one while the run stops: no more waiting for calls that have not stopped (their
       records say so); the record is saved all the same;
    3. any one while the record is saved: said, and the save goes on (it is never cut in half);
    4. a third one while the run still has not stopped (code that never yields): it stops at once,
       and says that the run so far is not saved.

    The command exits 130 (Ctrl-C) or 143 (SIGTERM); never a traceback, never a hang. Messages are
    written with one system call each (a signal can come while the command itself prints)."""
    import os

    from toolcall_lab._stopping import Outside

    def say(event: str, name: str) -> None:
        keep = f"saving the run so far to {out}" if out is not None else "keeping the run so far"
        text = {
            "stopping": f"{_words(name)}: stopping the run; {keep}... ({name} again: stop waiting for "
            "calls that are still finishing)",
            "gave_up": f"{name} again: no longer waiting for calls that have not stopped (if any: their "
            f"records say so); {keep}...",
            "saving": f"{name} again: still saving the run so far to {out}; the save finishes first"
            if out is not None
            else f"{name} again: the run has stopped; showing what ran",
            "waiting": f"{name} again: the run has stopped; {keep}...",
            "now": f"{name} a third time: stopping at once; the run so far is not saved",
        }[event]
        os.write(2, f"toolcall-lab {command}: {text}\n".encode("utf-8", "backslashreplace"))

    return Outside(say)


def _keep_interrupted(command: str, outside: Any, partial: Any, out: Path | None, as_trace: Any) -> int:
    """A run a signal stopped: save what ran (when there is a record and an ``--out``) and say so."""
    name = outside.signal_name
    outside.saving = True
    if out is not None:
        where = _save_run(as_trace(partial), out, command)
        kept = f"saved the run so far to {where} ({_so_far(partial)})"
    else:
        kept = f"the run so far: {_so_far(partial)} (--out FILE saves it)"
    print(f"toolcall-lab {command}: {_words(name)}: {kept}", file=sys.stderr)
    return _exit_code(name)


def _save_run(trace: Any, out: Path, command: str) -> Path:
    """Save `trace` to `out` (checked before the run: `_check_out`); if that fails after all (the disk
    filled up, the folder went away), save it to a temporary file instead and say where, rather than
    lose the run."""
    import tempfile

    from toolcall_lab.exceptions import TraceError
    from toolcall_lab.trace_files import save

    try:
        _make_folder(out, command)
        return save(trace, out)
    except (OSError, TraceError, UsageError) as exc:
        if isinstance(exc, TraceError) and "cannot be saved" in str(exc):
            raise  # (what the record holds cannot be written anywhere: the error says what and where)
        fd, spare = tempfile.mkstemp(prefix=f"toolcall-lab-{command}-", suffix=".json")
        os.close(fd)
        where = save(trace, spare)
        print(
            f"toolcall-lab {command}: could not write --out {out} ({_os_reason(exc)}); the run was saved to "
            f"{where} instead",
            file=sys.stderr,
        )
        return where


def _os_reason(exc: BaseException) -> str:
    return (getattr(exc, "strerror", None) or str(exc)) if isinstance(exc, OSError) else str(exc)


def _check_out(given: str, command: str, *, folder: bool = False, suffixes: tuple[str, ...] = ()) -> Path:
    """The one rule for every ``--out`` (``record``, ``replay``, ``bench``, ``import``, ``generate``),
    checked before any work, with errors that name the path the user gave: a file that would be a
    folder (or a folder that is a file) is refused, and the folder the output goes in, or the nearest
    one that exists above it, must take a new file (tried: one is made there and removed). Missing
    folders are made when the output is written (`_make_folder`), and the command says so."""
    import tempfile

    path = Path(given)
    if suffixes and not folder and path.suffix.lower() not in suffixes:
        raise UsageError(f"--out {given}: use a {' or '.join(suffixes)} file name")
    if folder:
        if path.exists() and not path.is_dir():
            raise UsageError(f"--out {given}: a file, not a folder (name a folder for the files)")
        if not path.exists() and path.suffix.lower() in (".json", ".jsonl"):
            raise UsageError(
                f"--out {given}: {command} writes a folder of trace files (one per conversation, and a "
                "report), and this name reads like a file; name a folder (e.g. --out "
                f"{path.with_suffix('')}), then give one of its .json files to the next command"
            )
        where = path
    else:
        if path.is_dir():
            example = path / f"run{(suffixes or ('.json',))[0]}"
            raise UsageError(f"--out {given}: a folder, not a file; name a file in it (e.g. {example})")
        where = path.parent
    existing = where
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"--out {given}: {existing} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".toolcall-lab-out-check.", dir=existing)
    except OSError as exc:
        what = "write a file in" if existing == where else f"create the folder {where} in"
        raise UsageError(f"--out {given}: cannot {what} {existing} ({_os_reason(exc)})") from None
    os.close(fd)
    Path(probe).unlink(missing_ok=True)
    return path


def _make_folder(out: Path, command: str, *, folder: bool = False) -> None:
    """The folder `out` goes in (`out` itself with `folder`), made now if it is missing, and said."""
    where = out if folder else out.parent
    if where.is_dir():
        return
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create the folder {where} ({_os_reason(exc)})") from None
    print(f"toolcall-lab {command}: created the folder {where} for --out", file=sys.stderr)


def _label(timing: Any) -> str:
    """A duration's timing label for one line of output (`toolcall_lab.records.Timing`)."""
    covers = {"upper_bound": ", upper bound", "wait": ", wait"}.get(timing.covers, "")
    return f"{timing.source}{covers}"


_SIGINT_IGNORED = (
    "SIGINT is ignored in this process, as for a job a script started in the background: Ctrl-C "
    "will not stop it"
)


def _sigint_ignored() -> bool:
    import signal

    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN


async def _announced(args: argparse.Namespace, spec: str, replaying: Any) -> Any:
    """Say a real-time replay started (from inside the run, so a signal from here on is caught)."""
    keep = f" and saves the run so far to {args.out}" if args.out else ""
    how = _SIGINT_IGNORED if _sigint_ignored() else f"Ctrl-C stops it{keep}; so does SIGTERM"
    print(f"replaying {args.path} as {_name(spec)} on the real clock ({how})", flush=True)
    return await replaying


def _builtin_with_options(name: str) -> bool:
    """Whether `name` is a built-in with options (``parallel[cap=4]``)."""
    from toolcall_lab.strategies import STRATEGIES, resolve

    if not name.endswith("]") or name.split("[", 1)[0] not in STRATEGIES:
        return False
    try:
        resolve(name)
    except UsageError:
        return False
    return True


def _api_key() -> str:
    """OPENAI_API_KEY, or a placeholder for local endpoints that need none (a real one answers 401)."""
    return os.environ.get("OPENAI_API_KEY") or "no-key-set"


def _load_tools(spec: str) -> Any:
    """The tools ``--tools`` names (``module:attribute`` or ``path/to/file.py:attribute``): a
    `ToolRegistry`, or a list of functions and `Tool` objects."""
    from toolcall_lab._user_code import load_attribute
    from toolcall_lab.tools import Tool, ToolRegistry

    tools = load_attribute(spec, "--tools", "mypkg.tools:registry")
    if isinstance(tools, ToolRegistry):
        return tools
    if isinstance(tools, list | tuple) and all(isinstance(t, Tool) or callable(t) for t in tools):
        return ToolRegistry(tools)  # (a bad function is refused here, with its name)
    raise UsageError(
        f"--tools {spec!r} names {type(tools).__name__} {reprlib.repr(tools)}: expected a ToolRegistry, "
        "or a list of functions or Tool objects"
    )


def cmd_record(args: argparse.Namespace) -> int:
    """Record a live run into ``--out`` (checked before the run). Ctrl-C or SIGTERM stops it and
    saves what was recorded so far (the trace's outcome says ``aborted/interrupted``), exit 130 /
    143, by the rule of `_stopped_runs`."""
    from openai import AsyncOpenAI

    from toolcall_lab._stopping import catch_signals, run_main
    from toolcall_lab.openai_model import OpenAIModel
    from toolcall_lab.record import record, recorded_trace

    out = _check_out(args.out, "record")
    client = (
        AsyncOpenAI(base_url=args.base_url, api_key=_api_key())
        if args.base_url
        else AsyncOpenAI(api_key=_api_key())
    )
    model = OpenAIModel(args.model, client, parallel_tool_calls=args.parallel_tool_calls)
    tools = _load_tools(args.tools)
    about = {
        "title": args.title or args.prompt[:60],
        "provider": args.provider,
        "source": str(client.base_url),
    }

    async def main() -> Any:
        how = (
            _SIGINT_IGNORED
            if _sigint_ignored()
            else f"Ctrl-C stops and saves the run so far to {out}; so does SIGTERM"
        )
        print(f"recording against {client.base_url} ({how})", flush=True)
        return await record(model, tools, args.prompt, mode=args.mode, max_rounds=args.max_rounds, **about)

    outside = _stopped_runs("record", out)
    undo = catch_signals(outside, (signal.SIGINT, signal.SIGTERM))
    try:
        try:
            trace = run_main(main(), outside)
        except KeyboardInterrupt as exc:
            partial = getattr(exc, "partial_result", None)
            if partial is None:
                raise  # (no record: stopped at once; `cli.main` says it in one line)
            return _keep_interrupted(
                "record", outside, partial, out, lambda result: recorded_trace(result, model, **about)
            )
        outside.saving = True
        where = _save_run(trace, out, "record")
        print(f"recorded {trace!r} -> {where}")
        if outside.signals:  # (it came as the run ended: the whole run was kept)
            name = outside.signal_name
            print(f"toolcall-lab record: {_words(name)} as the run ended: saved whole", file=sys.stderr)
            return _exit_code(name)
        return _recorded_outcome(trace)
    finally:
        undo()


def _so_far(result: Any) -> str:
    calls = len(result.executions)
    return (
        f"{len(result.rounds)} round(s), {calls} tool call(s), {result.wall_time_s:.3f} s, "
        f"{result.status}/{result.reason}"
    )


def _recorded_outcome(trace: Any) -> int:
    """0 when the recorded run ended normally; else say why it did not (the trace is still saved) and 1."""
    outcome = trace.outcome
    if outcome.status in ("completed", "incomplete"):
        return 0
    print(
        f"toolcall-lab record: the run ended {outcome.status}/{outcome.reason}: "
        f"{outcome.error or '(no message)'} (the trace holds what was recorded)",
        file=sys.stderr,
    )
    return 1


def cmd_import(args: argparse.Namespace) -> int:
    """Import a source into trace files; print what was read and written. Exit 0: every call of the
    source is in a trace (or skipped on purpose) and nothing is damaged; 1: a call could not be
    represented, a call of the source is in no file read (a sub-agent transcript not found), or the
    source is damaged (the traces that could be made are still written); 2: nothing imported, or the
    input is unreadable, empty or of another kind. Ctrl-C or SIGTERM stops it
    (`toolcall_lab._workers.StopOnce`; files written so far are whole), 130 / 143."""
    from toolcall_lab._workers import StopOnce

    with StopOnce("import"):
        return _import(args)


def _import(args: argparse.Namespace) -> int:
    from toolcall_lab.importers import import_source, write_result

    out = _check_out(args.out, "import", folder=True)
    result = import_source(args.kind, args.source, limit=args.limit, include_no_calls=args.include_no_calls)
    _make_folder(out, "import", folder=True)
    removed: list[str] = []
    said: list[str] = []
    written = write_result(result, out, removed=removed, said=said)
    full = out / "import_report.txt"  # every issue of every import into `out`, one section each
    _append_report(full, args, result.report.summary(limit=None) + _redacted(removed, None))
    print(result.report.summary(full_list=str(full)) + _redacted(removed, str(full)))
    print(f"wrote {len(written)} trace file(s) to {args.out}" + "".join(f" ({n})" for n in said))
    if not result.traces:
        print(
            f"toolcall-lab import: nothing of kind {args.kind} was imported from {args.source} (see above)",
            file=sys.stderr,
        )
        return 2
    if not result.report.ok:
        print(
            f"toolcall-lab import: not every call of {args.source} could be represented (see above)",
            file=sys.stderr,
        )
        return 1
    if not result.report.complete:
        held = sum(i.calls for i in result.report.left_out)
        unknown = any(i.unreadable for i in result.report.left_out)
        print(
            f"toolcall-lab import: {held}{' or more' if unknown else ''} call(s) of {args.source} are not in "
            "the traces: the files holding them were not found (see 'not in the source' above)",
            file=sys.stderr,
        )
        return 1
    if not result.report.clean:
        print(
            f"toolcall-lab import: {args.source} is damaged (see above); the traces say which numbers are "
            "not recorded",
            file=sys.stderr,
        )
        return 1
    return 0


def _redacted(removed: list[str], full_list: str | None, limit: int = 20) -> str:
    """The credentials the saved traces no longer hold, for the import summary (each trace lists
    its own in ``metadata.redactions``)."""
    if not removed:
        return ""
    files = len({r.split(": ", 1)[0] for r in removed})
    shown = removed if full_list is None else removed[:limit]
    lines = [
        f"\n  credentials removed ({len(removed)}, in {files} trace file(s); marked [REDACTED: ...] in "
        "place and listed in each trace's metadata.redactions):",
        *(f"    {r}" for r in shown),
    ]
    if len(shown) < len(removed):
        lines.append(f"    ... and {len(removed) - len(shown)} more (every one is listed in {full_list})")
    return "\n".join(lines)


def _append_report(path: Path, args: argparse.Namespace, summary: str) -> None:
    """Add this import's full report to `path` under a header (command, source, time): an earlier
    import's report into the same folder is kept."""
    from datetime import datetime

    command = f"toolcall-lab import {args.kind} {args.source} --out {args.out}"
    if args.limit is not None:
        command += f" --limit {args.limit}"
    if args.include_no_calls:
        command += " --include-no-calls"
    when = datetime.now(UTC).isoformat(timespec="seconds")
    header = f"=== {command}  ({when}) ==="
    with path.open("a", encoding="utf-8", errors="backslashreplace") as f:
        if f.tell():
            f.write("\n")
        f.write(f"{header}\n{summary}\n")


def cmd_generate(args: argparse.Namespace) -> int:
    """Write the scenarios or a corpus; Ctrl-C or SIGTERM stops it (files written so far are whole)."""
    from toolcall_lab._workers import StopOnce

    with StopOnce("generate"):
        return _generate(args)


def _generate(args: argparse.Namespace) -> int:
    from toolcall_lab.scenarios import SCENARIOS, generate_corpus
    from toolcall_lab.trace_files import save

    out = _check_out(args.out, "generate", folder=True)
    _make_folder(out, "generate", folder=True)
    if args.scenarios:
        for name, scenario in SCENARIOS.items():
            save(scenario.record(), out / f"{name}.json")
        print(f"wrote {len(SCENARIOS)} scenario traces to {out}")
    else:
        for i, trace in enumerate(generate_corpus(args.n, args.seed)):
            save(trace, out / f"gen_{args.seed}_{i:04d}.json")
        print(f"wrote {args.n} generated traces (seed {args.seed}) to {out}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """`_bench` where Ctrl-C or SIGTERM stops it by the rule of `toolcall_lab._workers.StopOnce`:
    the first stops the comparison, what was compared is reported and written (a later signal is
    said and does not cut that short), exit 130 / 143; worker processes never outlive it."""
    from toolcall_lab._workers import StopOnce, Terminated

    with StopOnce("bench") as signals:
        try:
            return _bench(args, signals)
        except KeyboardInterrupt as exc:  # before anything was compared (e.g. while a corpus was made)
            print(f"toolcall-lab bench: {_why(exc)}; nothing was compared", file=sys.stderr)
            return 143 if isinstance(exc, Terminated) else 130


def _bench(args: argparse.Namespace, signals: Any) -> int:
    import time

    from toolcall_lab._workers import Terminated, process_pool, stop_workers
    from toolcall_lab.analysis import compare, trace_keys
    from toolcall_lab.trace_files import iter_trace_paths

    out = _check_out(args.out, "bench", suffixes=(".csv", ".parquet")) if args.out else None
    if out is not None:
        _check_output(out)
    absent = [p for p in args.paths if not Path(p).exists()]
    if absent:
        raise UsageError(f"no such file or folder: {', '.join(str(p) for p in absent)}")
    paths: list[Any] = list(iter_trace_paths(args.paths))
    if args.corpus:
        from toolcall_lab.scenarios import generate_corpus

        paths += generate_corpus(args.corpus, args.seed)
    if not paths:
        raise UsageError("no traces found: name trace files or folders, or use --corpus N")
    paths = paths[: args.limit] if args.limit else paths
    modes = [*args.modes, *(args.strategy or ())]  # (a strategy given twice is refused, as by compare)
    names = [_name(m) for m in modes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(
            f"--modes / --strategy: {', '.join(map(repr, twice))} given twice (the strategies named: "
            f"{', '.join(names)}); give each strategy once"
        )
    started = time.perf_counter()
    pool = process_pool(args.jobs) if args.jobs > 1 else None
    interrupted: BaseException | None = None
    try:
        result = compare(
            paths,
            modes,
            round_trip_s=args.round_trip,
            concurrency=args.concurrency,
            virtual=not args.real_time,
            timings=args.timings,
            executor=pool,
            progress=not args.quiet,
        )
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM: report and write what was compared so far
        if pool is not None:  # (its workers are stopped now, not left to finish their traces)
            stop_workers(pool)
            pool = None
        partial = getattr(exc, "partial_comparison", None)
        if partial is None:
            raise
        result, interrupted = partial, exc
    except BaseException:
        if pool is not None:
            stop_workers(pool)
            pool = None
        raise
    finally:
        if pool is not None:
            pool.shutdown()
    elapsed = time.perf_counter() - started
    missing: list[str] = []
    if interrupted:
        missing = list(result.not_compared)  # (the excluded table's traces were reached)
    try:
        shown = missing if interrupted else None
        _bench_report(args, result, paths, modes, elapsed, shown, _why(interrupted))
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM while reporting: the tables are still written
        interrupted = interrupted or exc
    if out is not None:
        with signals.hold("writing the tables (each is written whole)"):
            _make_folder(out, "bench")
            written = _write_tables(result, out)
            if interrupted:
                written.append(_write_missing(missing, out))
        print(
            "wrote " + ", ".join(str(p) for p in written) + (" (partial: interrupted)" if interrupted else "")
        )
    if signals.came and not interrupted:  # (it came while the tables were written: they are whole)
        interrupted = signals.first
    if interrupted:
        print(f"toolcall-lab bench: {_why(interrupted)} after {elapsed:.1f} s", file=sys.stderr)
        return 143 if isinstance(interrupted, Terminated) else 130
    if args.plot and len(result.runs):
        from toolcall_lab import plotting
        from toolcall_lab.trace_files import load

        plot = Path(args.plot)
        plotting.speedup_distribution(result, save=plot)
        plotting.time_breakdown(result, save=plot.with_name(plot.stem + "_breakdown" + plot.suffix))
        broken = set(result.errors["trace"])
        item = next(p for p, key in zip(paths, trace_keys(paths), strict=True) if key not in broken)
        first = load(item) if isinstance(item, (str, Path)) else item
        plotting.gantt(
            first,
            modes,
            round_trip_s=args.round_trip,
            save=plot.with_name(plot.stem + "_gantt" + plot.suffix),
        )
        print(f"wrote {plot}, its _breakdown and _gantt companions")
    return 1 if len(result.errors) else 0


def _why(interrupted: BaseException | None) -> str:
    """What stopped a bench, in words."""
    from toolcall_lab._workers import Terminated

    return "terminated (SIGTERM)" if isinstance(interrupted, Terminated) else "interrupted (Ctrl-C)"


def _bench_report(
    args: argparse.Namespace,
    result: Any,
    paths: list[Any],
    modes: list[str],
    elapsed: float,
    missing: list[str] | None,
    why: str = "interrupted (Ctrl-C)",
) -> None:
    from toolcall_lab.analysis import summary_text

    if missing is not None:
        print(
            f"\n{why}: below, the {len(paths) - len(missing)} of {len(paths)} trace(s) "
            f"compared so far; {len(missing)} not compared"
        )
        for name in missing[:10]:
            print(f"not compared ({why.split(' ', 1)[0]}): {name}", file=sys.stderr)
        if len(missing) > 10:
            more = " (all listed in the _missing table)" if args.out else ""
            print(f"  ... and {len(missing) - 10} more{more}", file=sys.stderr)
    compared = len(paths) - len(missing or ())
    print(
        f"\n{compared} trace(s) x {len(modes)} mode(s) in {elapsed:.2f} s "
        f"({compared / elapsed:,.0f} traces/s, jobs={args.jobs})"
        + (f"; {len(missing)} of {len(paths)} not compared (interrupted)" if missing else "")
        + "\n"
    )
    print(summary_text(result) if len(result.runs) else "(no trace could be compared)")
    for err in result.errors.itertuples():
        error = str(err.error)
        error = error.removeprefix(f"{err.trace}: ")  # (a load error names the file itself: not twice)
        print(
            f"not compared: {err.trace}"
            + (f" [{err.mode}]" if isinstance(err.mode, str) and err.mode else "")
            + f": {error}",
            file=sys.stderr,
        )
    excluded = result.excluded
    if len(excluded):
        print(
            f"left out by --timings {args.timings}: {len(excluded)} trace(s) whose timings rest on weaker "
            "evidence" + (" (all listed in the _excluded table)" if args.out else ""),
            file=sys.stderr,
        )
        for row in excluded.head(5).itertuples():
            print(f"  {row.trace}: {row.reason}", file=sys.stderr)
        if len(excluded) > 5:
            print(f"  ... and {len(excluded) - 5} more", file=sys.stderr)
    missed = result.missed
    if len(missed):
        print(
            f"\nmissed parallelism (upper bound): {missed['trace'].nunique()} trace(s) had consecutive "
            f"rounds with no evidence of using each other; one batch would have saved at most "
            f"{missed['saved_upper_bound_s'].sum():.2f} s in total"
        )
    if len(result.runs) and not result.runs["comparable"].all():
        print(
            "runs that skipped calls (first_only, or a strategy with skips_calls) did less work, and replays "
            "of runs that were cut off end at the cut: marked comparable=False (not_comparable_why says "
            "why), left out of speedups"
        )


def _write_missing(missing: list[str], out: Path) -> Path:
    """The traces an interrupted bench did not compare, beside the other tables."""
    import pandas as pd

    path = out.with_name(f"{out.stem}_missing{out.suffix}")
    table = _escape_surrogates(pd.DataFrame({"trace": missing}, columns=["trace"]), path)
    if out.suffix.lower() == ".parquet":
        table.to_parquet(path)
    else:
        table.to_csv(path, index=False)
    return path


_TABLES = ("rounds", "calls", "errors", "excluded", "missed", "dependencies")
"""Written beside the runs table (``<stem>_rounds``, ...); the rounds table holds the strategies' notes
(e.g. ``eager`` running as parallel for want of chunk timing), which the runs table only counts."""


def _check_output(out: Path) -> None:
    """Fail before a long run if the results could not be written (`_check_out` checked the folder)."""
    if out.suffix.lower() == ".parquet":
        try:
            importlib.import_module("pyarrow")
        except ImportError:
            try:
                importlib.import_module("fastparquet")
            except ImportError:
                raise UsageError(
                    f"--out {out}: writing parquet needs pyarrow (pip install pyarrow) or fastparquet; "
                    "or use a .csv file name"
                ) from None


def _write_tables(result: Any, out: Path) -> list[Path]:
    """The runs table at `out`, the others beside it (``<stem>_calls``, ``_errors``, ...)."""
    written = []
    for name in ("runs", *_TABLES):
        table = getattr(result, name)
        path = out if name == "runs" else out.with_name(f"{out.stem}_{name}{out.suffix}")
        table = _escape_surrogates(_to_nanoseconds(table), path)
        if out.suffix.lower() == ".parquet":
            table.to_parquet(path)
        else:
            table.to_csv(path, index=False)
        written.append(path)
    return written


def _to_nanoseconds(table: Any) -> Any:
    """Float columns rounded to 9 decimals (1 ns for times) for the written tables: sums of recorded
    times carry float noise (``21.118000000000002``, a saving of ``2.8e-14`` that is 0) that reads as
    precision nobody measured; no source records finer than a nanosecond. The DataFrames `compare`
    returns keep full precision."""
    floats = table.select_dtypes("float").columns
    if not len(floats):
        return table
    table = table.copy()
    table[floats] = table[floats].round(9) + 0.0  # (+ 0.0: no -0.0 from a tiny negative)
    return table


def _escape_surrogates(table: Any, path: Path) -> Any:
    """The table with lone surrogates (a tool's or model's string UTF-8 cannot encode) written as
    ``\\uXXXX`` text; each such cell is named on stderr (file, row's trace, round, call, column), as
    CSV and parquet cells cannot hold the code point itself."""
    from toolcall_lab._unicode import LONE_SURROGATE, escape

    hits: list[tuple[Any, Any]] = []
    copied = False
    for column in table.columns:
        if table[column].dtype.kind in "biufcmM":  # numbers, booleans, times: no text in them
            continue
        bad = table[column].map(lambda v: isinstance(v, str) and LONE_SURROGATE.search(v) is not None)
        if bad.any():
            hits += [(i, column) for i in table.index[bad]]
            if not copied:
                table, copied = table.copy(), True
            table[column] = table[column].map(lambda v: escape(v) if isinstance(v, str) else v)
    for i, column in hits[:20]:
        row = table.loc[i]
        where = ", ".join(
            f"{k} {escape(str(row[k]))}" for k in ("trace", "mode", "round", "tool_call_id") if k in row
        )
        print(
            f"toolcall-lab bench: {path}: row {i} ({where}), column {column}: a lone surrogate, which "
            "CSV/parquet cannot hold, is written as a \\uXXXX escape",
            file=sys.stderr,
        )
    if len(hits) > 20:
        print(f"  ... and {len(hits) - 20} more such cell(s) in {path}", file=sys.stderr)
    return table


class _Defaults(argparse.HelpFormatter):
    """--help shows each option's default (when it has one)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.option_strings and action.default is not None and action.default is not argparse.SUPPRESS:
            text += " (default: %(default)s)"
        return text


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port: use 0-65535 (0 picks a free one)")
    return port


def _positive(
    kind: type[int] | type[float], *, zero: bool = False, minimum: float = 0, maximum: float | None = None
) -> Any:
    """An argparse type: a number > 0 (or >= 0 with `zero`, or >= `minimum`; <= `maximum` when given),
    naming the bounds."""
    what = "an integer" if kind is int else "a number"
    bound = f">= {minimum:g}" if minimum else (">= 0" if zero else "> 0")
    if maximum is not None:
        bound = f"{bound} and <= {maximum:g}"

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        finite = value == value and value not in (float("inf"), float("-inf"))
        if not finite:
            raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number {bound}")
        too_big = maximum is not None and value > maximum
        if value < minimum or value < 0 or (value == 0 and not zero) or too_big:
            raise argparse.ArgumentTypeError(f"{text!r}: must be {bound}")
        return value

    return parse


MAX_DELAY_SCALE = 1000.0
"""``--delay-scale``'s upper bound: `toolcall_lab.proxy.upstreams.MAX_DELAY_SCALE` (a test keeps them equal;
that module loads aiohttp, which `--help` need not)."""


def _upstream(spec: str, delay_scale: float, ca_file: str | None = None) -> Any:
    """`--upstream` as an upstream: an http(s) URL, or a trace file; anything else is a clear error."""
    from toolcall_lab.proxy import HTTPUpstream

    if spec.startswith(("http://", "https://")):
        if delay_scale:
            raise UsageError(
                "--delay-scale applies to a trace upstream only (it paces replies by the recording); "
                f"{spec} is a live endpoint"
            )
        try:
            return HTTPUpstream(spec, api_key=os.environ.get("OPENAI_API_KEY") or None, ca_file=ca_file)
        except UsageError as exc:
            raise UsageError(str(exc) if str(exc).startswith("--") else f"--upstream: {exc}") from None
    if ca_file is not None:
        raise UsageError("--ca-file applies to an https:// upstream only")
    scheme = spec.split("://", 1)[0] if "://" in spec else ""
    if scheme:
        raise UsageError(
            f"--upstream {spec!r}: the scheme {scheme!r} is not supported; give an http:// or https:// URL "
            "of an OpenAI-compatible endpoint, or a trace JSON file"
        )
    return _trace_upstream(spec, delay_scale, "--upstream ")


def _trace_upstream(spec: str, delay_scale: float, option: str, keep_requests: int = 0) -> Any:
    """A trace file as an upstream; a missing file, or a raw recording that must be imported first, is a
    clear error."""
    from toolcall_lab.proxy import TraceUpstream

    path = Path(spec)
    if not path.is_file():
        looks_like_url = spec.split("/")[0].count(":") == 1 or spec.startswith("localhost")
        hint = (
            f"; URLs need a scheme: did you mean http://{spec} ?"
            if looks_like_url and option
            else " (give an http:// or https:// URL, or a trace JSON file)"
            if option
            else ""
        )
        raise UsageError(f"{option}{spec!r}: no such trace file{hint}")
    from toolcall_lab.exceptions import TraceError
    from toolcall_lab.trace_files import load

    try:
        trace = load(path)
    except TraceError as exc:
        raise UsageError(
            f"{option}{spec}: not a trace file toolcall-lab can serve ({_first_line(exc)}). A recorded "
            "response or exchange (.sse, .chunks.jsonl, .json, a VCR cassette) must be imported first: "
            f"`toolcall-lab import recording {spec} --out traces/`, then give one of the trace files it "
            "writes."
        ) from None
    return TraceUpstream(trace, delay_scale=delay_scale, keep_requests=keep_requests)


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _first_line(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


class _Stop:
    """A server's graceful stop: SIGTERM (``docker stop``, systemd, Kubernetes), and SIGINT (Ctrl-C)
    unless the process ignores it, set `event`; a second signal calls `hurry` (stop waiting for
    requests in flight). Made inside the running loop."""

    def __init__(self, hurry: Any = None) -> None:
        import asyncio

        self.event = asyncio.Event()
        self.names: list[str] = []
        self.hurry = hurry
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            if sig != signal.SIGINT or not _sigint_ignored():
                loop.add_signal_handler(sig, self._on, sig)

    def _on(self, sig: int) -> None:
        self.names.append(signal.Signals(sig).name)
        if len(self.names) == 1:
            self.event.set()
        elif self.hurry is not None:
            self.hurry()


def _how_to_stop(then: str = "") -> str:
    """What stops a server started now, for its first line: Ctrl-C only when SIGINT is not ignored."""
    if _sigint_ignored():
        return (
            "SIGINT is ignored in this process, as for a job a script started in the background: stop it "
            f"with SIGTERM (kill {os.getpid()}){then}"
        )
    return f"Ctrl-C or SIGTERM stops it{then}"


def cmd_proxy(args: argparse.Namespace) -> int:
    import asyncio

    from toolcall_lab.proxy import HTTPUpstream, ProxyServer, ProxySettings

    settings = ProxySettings(
        ttl_s=args.ttl,
        max_batches=args.max_batches,
        max_bytes=args.max_bytes,
        max_body_bytes=args.max_body_bytes,
        upstream_timeout_s=args.upstream_timeout,
        upstream_total_timeout_s=args.upstream_total_timeout,
        model=args.model,
        head_timeout_s=args.head_timeout,
        body_timeout_s=args.body_timeout,
        max_connections=args.max_connections,
        max_inflight_body_bytes=args.max_inflight_body_bytes,
    )
    hosts: list[str] = args.host or ["127.0.0.1"]
    upstream = _upstream(args.upstream, args.delay_scale, args.ca_file)
    if isinstance(upstream, HTTPUpstream):
        upstream.timeout_s = args.upstream_timeout

    async def main() -> None:
        import gc

        server = ProxyServer(upstream, settings, state=args.state)
        try:
            await server.start(hosts, args.port)
        except BaseException:
            await server.close()
            raise
        gc.freeze()  # what start-up made lives as long as the process: the collector need not walk it
        state = (
            f"state in {args.state} (SQLite; open batches survive a restart)"
            if args.state
            else "state in memory (after a restart, an open batch is gone: a 410; --state FILE keeps them)"
        )
        stop = _Stop(server.hurry)
        grace = settings.close_grace_s
        urls = " and ".join(server.urls)
        then = f"; requests in flight get {grace:g} s to finish"
        print(f"serialized proxy on {urls} -> {args.upstream} ({_how_to_stop(then)})", flush=True)
        loop = "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
        print(f"  {state}; batches expire after {settings.ttl_s:g} s unused; event loop: {loop}", flush=True)
        if isinstance(upstream, HTTPUpstream) and upstream.proxy is not None:
            print(
                f"  upstream requests go through the forward proxy {upstream.proxy} "
                "(HTTPS_PROXY / HTTP_PROXY; NO_PROXY to bypass it)"
            )
        exposed = [h for h in hosts if not _loopback(h)]
        if isinstance(upstream, HTTPUpstream) and upstream.api_key and exposed:
            print(
                f"toolcall-lab proxy: warning: listening on {', '.join(exposed)} (beyond loopback) and "
                "adding OPENAI_API_KEY to every upstream request: anyone who can reach this port uses your "
                "key. Listen on 127.0.0.1, or unset OPENAI_API_KEY so each client sends its own "
                "Authorization.",
                file=sys.stderr,
                flush=True,
            )
        try:
            await stop.event.wait()
        finally:
            if stop.names:
                print(
                    f"toolcall-lab proxy: {stop.names[0]} received: stopping; {server.in_flight} request(s) "
                    f"in flight get up to {grace:g} s to finish (a second signal stops at once)",
                    file=sys.stderr,
                    flush=True,
                )
            cut = await server.close()
            if stop.names:
                saved = f"; state saved in {args.state}" if args.state else ""
                done = f"{cut} request(s) still in flight were cut off" if cut else "no request was cut off"
                print(f"toolcall-lab proxy: stopped ({done}{saved})", file=sys.stderr, flush=True)

    factory = _loop_factory(args.event_loop)
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())  # a Ctrl-C before the server is up ends it quietly
    return 0


def _loop_factory(choice: str) -> Any:
    """The event loop the proxy runs on: uvloop (the `fast` extra: the loop itself in C, a tenth less
    work per request) when installed, unless asyncio's is asked for; None: asyncio's."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise UsageError(
                "--event-loop uvloop: uvloop is not installed; pip install 'toolcall-lab[fast]'"
            ) from None
        return None
    return uvloop.new_event_loop


def cmd_serve_trace(args: argparse.Namespace) -> int:
    """Serve a trace until SIGTERM or Ctrl-C; then stop at once: replies still in flight (a stream paced
    by ``--delay-scale`` may have minutes to go) are cut off and counted, exit 0 as `proxy` does."""
    import asyncio

    from toolcall_lab.proxy import serve, upstream_app
    from toolcall_lab.proxy.upstreams import COUNTS, cut_in_flight

    upstream = _trace_upstream(args.path, args.delay_scale, "", keep_requests=0)
    app = upstream_app(upstream)

    async def main() -> None:
        runner, url = await serve(app, args.host, args.port, shutdown_timeout=1.0)
        stop = _Stop()
        then = "; replies in flight are cut off" if args.delay_scale else ""
        how = _how_to_stop(then)
        print(f"trace {args.path} served as an OpenAI-compatible endpoint on {url} ({how})", flush=True)
        cut = 0
        try:
            await stop.event.wait()
        finally:
            cut = await cut_in_flight(app)
            if stop.names:
                print(
                    f"toolcall-lab serve-trace: {stop.names[0]} received: stopping; "
                    + (f"{cut} {_replies(cut)} in flight cut off" if cut else "no reply was in flight"),
                    file=sys.stderr,
                    flush=True,
                )
            await runner.cleanup()  # (nothing left to wait for; 1 s at most for a request just arrived)
            counts = app[COUNTS]
            refused = counts["requests"] - counts["answered"]
            went = counts["disconnected"]
            gone = f", {went} left by their client before the end" if went else ""
            print(
                f"served {counts['requests']} request(s) ({refused} refused{gone}"
                + (f", {cut} cut off by the stop" if cut else "")
                + ")",
                flush=True,
            )

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0


def _replies(n: int) -> str:
    return "reply" if n == 1 else "replies"


def register(sub: Any) -> None:
    defaults = _Defaults
    p = sub.add_parser(
        "serve-trace",
        help="serve a recorded trace as a plain OpenAI-compatible endpoint",
        description="Serve POST /v1/chat/completions and GET /health from a recorded trace: a request whose "
        "messages hold k assistant messages (after the trace's own initial ones) gets the recorded response "
        "of round k, streamed or not; no network, no key. Useful as the upstream of `toolcall-lab proxy`.",
        formatter_class=defaults,
    )
    p.add_argument("path", help="a trace JSON file")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=_port, default=8081, help="TCP port (0 picks a free one)")
    p.add_argument(
        "--delay-scale",
        type=_positive(float, zero=True, maximum=MAX_DELAY_SCALE),
        default=0.0,
        help="pace replies by the recording x this: a streaming request gets each recorded chunk at its "
        "offset x S and [DONE] at the latency x S (a live eager run can overlap the stream); a "
        "non-streaming one, or a round recorded whole, comes whole after the latency x S (0: at once; "
        f"at most {MAX_DELAY_SCALE:g}). A stop (SIGTERM, Ctrl-C) cuts off the replies still in flight",
    )
    p.set_defaults(func=cmd_serve_trace)

    p = sub.add_parser(
        "proxy",
        help="run the serialized proxy (OpenAI-compatible) in front of an upstream",
        description="Serve POST /v1/chat/completions and GET /health. For parallel_tool_calls=false, hand "
        "the client one tool call per response and send the upstream one complete batch.",
        formatter_class=defaults,
    )
    p.add_argument(
        "--upstream",
        required=True,
        help="an OpenAI-compatible base URL (http:// or https://), or a trace JSON file",
    )
    p.add_argument(
        "--host",
        action="append",
        help="address to listen on (default: 127.0.0.1); repeat it for several. `::` is IPv6 only: give "
        "`--host :: --host 0.0.0.0` for both",
    )
    p.add_argument("--port", type=_port, default=8080, help="TCP port (0 picks a free one)")
    p.add_argument("--model", help="model name to send upstream (default: the client's)")
    p.add_argument("--ttl", type=_positive(float), default=600.0, help="seconds an unused batch is kept")
    p.add_argument(
        "--max-batches",
        "--max-conversations",
        type=_positive(int),
        default=10_000,
        help="at most this many batches kept (and as many tombstones of forgotten ones)",
    )
    p.add_argument(
        "--max-bytes",
        type=_positive(int),
        default=256 * 1024 * 1024,
        help="bytes the proxy may hold in all (batches, tombstones, idempotent replies)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=_positive(int, minimum=1024),
        default=32 * 1024 * 1024,
        help="largest request body accepted",
    )
    p.add_argument(
        "--max-inflight-body-bytes",
        type=_positive(int, minimum=1024),
        default=256 * 1024 * 1024,
        help="request bodies held at once, from a request's head until its reply (at least "
        "--max-body-bytes); past it a request gets a 503 with Retry-After before its body is read",
    )
    p.add_argument("--state", help="SQLite file for durable state (open batches survive a restart)")
    p.add_argument(
        "--ca-file",
        help="PEM bundle of CAs to trust for an https:// upstream, instead of the system's (like curl "
        "--cacert); SSL_CERT_FILE / SSL_CERT_DIR change the system's default the same way",
    )
    p.add_argument(
        "--head-timeout",
        type=_positive(float),
        default=30.0,
        help="seconds a request's head (request line and headers) may take to arrive whole (else 408)",
    )
    p.add_argument(
        "--body-timeout",
        type=_positive(float),
        default=60.0,
        help="seconds a request's body may take to arrive whole after its head (else 408 and the "
        "connection closes)",
    )
    p.add_argument(
        "--max-connections",
        type=_positive(int),
        default=1000,
        help="open client connections at most (then the longest-idle one is closed, or a 503 when all "
        "are busy)",
    )
    p.add_argument(
        "--upstream-timeout",
        type=_positive(float),
        default=120.0,
        help="idle timeout: an upstream request fails (504) when the upstream sends nothing for this many "
        "seconds, waiting for its answer or between two pieces of a stream (a stream that keeps "
        "flowing is never cut)",
    )
    p.add_argument(
        "--upstream-total-timeout",
        type=_positive(float),
        default=None,
        help="cap on a whole upstream request, stream included, in seconds (default: no cap)",
    )
    p.add_argument(
        "--delay-scale",
        type=_positive(float, zero=True, maximum=MAX_DELAY_SCALE),
        default=0.0,
        help="trace upstream only: pace replies by the recording x this (recorded chunk offsets x S for "
        f"a streamed round, else the whole reply after the latency x S; at most {MAX_DELAY_SCALE:g})",
    )
    p.add_argument(
        "--event-loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="auto: uvloop when it is installed (the fast extra), else asyncio's own loop",
    )
    p.set_defaults(func=cmd_proxy)

    p = sub.add_parser("bench", help="replay traces under several modes and compare them")
    p.add_argument("paths", nargs="*", help="trace files or folders of them")
    p.add_argument(
        "--modes",
        type=_modes,
        default=list(MODES),
        help="comma-separated modes or strategies (default: the four classic modes; add eager, "
        "parallel[cap=4], or MODULE:ATTRIBUTE)",
    )
    p.add_argument(
        "--strategy",
        type=_strategy,
        action="append",
        metavar="SPEC",
        help=f"also compare this strategy (repeatable): {STRATEGY_HELP}",
    )
    p.add_argument("--corpus", type=int, default=0, help="also generate N traces in memory (seeded)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--limit", type=int)
    p.add_argument(
        "--round-trip", type=float, default=0.05, help="serialized mode: client round trip, seconds"
    )
    p.add_argument("--concurrency", type=int, help="cap on calls at once (parallel, eager)")
    p.add_argument("--real-time", action="store_true", help="replay on the real clock (slow)")
    p.add_argument("--jobs", type=int, default=1, help="spread traces over N processes")
    p.add_argument(
        "--out", help="results.csv or results.parquet (other tables beside it: _calls, _errors, ...)"
    )
    p.add_argument(
        "--timings",
        choices=["any", "measured", "recorded"],
        default="any",
        help="keep only traces whose durations were all recorded (or recorded/reported by a server)",
    )
    p.add_argument("--plot", help="out.png (or .svg): speedup distribution, plus _breakdown and _gantt")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser(
        "validate",
        help="check trace files (exit 2 if any is unusable, 1 if one contradicts itself: its calls, "
        "executions and outcome disagree)",
    )
    p.add_argument("paths", nargs="+")
    p.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "replay", help="replay a trace under a mode or strategy (virtual clock unless --real-time)"
    )
    p.add_argument("path")
    p.add_argument(
        "--mode",
        type=_strategy,
        default=None,
        help=f"the strategy (default: the one the trace was recorded under): {STRATEGY_HELP}",
    )
    p.add_argument("--strategy", type=_strategy, metavar="SPEC", help="the same as --mode (overrides it)")
    p.add_argument("--real-time", action="store_true")
    p.add_argument(
        "--round-trip",
        type=float,
        default=None,
        help="serialized mode: client round trip, seconds (default: the recording's round_trip_s)",
    )
    p.add_argument("--out", help="save the replayed run as a trace")
    p.add_argument(
        "--check",
        choices=("strict", "ids", "off"),
        help="compare the conversation sent with the recording: every message, only tool-call ids, or "
        "nothing (default: strict, off when first_only meets another mode)",
    )
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("record", help="record a live run against an OpenAI-compatible endpoint")
    p.add_argument("--model", required=True)
    p.add_argument("--prompt", required=True)
    p.add_argument(
        "--tools",
        required=True,
        help="a ToolRegistry or list of functions: MODULE:ATTRIBUTE or path/to/file.py:ATTRIBUTE",
    )
    p.add_argument("--base-url", help="default: OPENAI_BASE_URL or api.openai.com; key from OPENAI_API_KEY")
    p.add_argument("--mode", type=_strategy, default="parallel", help=f"the strategy: {STRATEGY_HELP}")
    p.add_argument("--max-rounds", type=int, default=10)
    p.add_argument("--parallel-tool-calls", type=lambda s: s.lower() == "true", default=None)
    p.add_argument("--provider")
    p.add_argument("--title")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_record)

    from toolcall_lab.importers import KINDS

    p = sub.add_parser(
        "import",
        help="turn agent runs where they already live into trace files",
        description="Kinds: " + "; ".join(f"{k.name}: {k.source}" for k in KINDS.values()),
    )
    p.add_argument("kind", choices=list(KINDS))
    p.add_argument("source", help="the file (or folder) to import")
    p.add_argument("--out", required=True, help="folder for the trace files")
    p.add_argument(
        "--limit",
        type=int,
        help="tau-bench, bfcl: import only the first N input items (trajectories, questions), not N traces",
    )
    p.add_argument(
        "--include-no-calls",
        action="store_true",
        help="also import conversations without tool calls (claude-code, otlp, recording, tau-bench)",
    )
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("generate", help="write the scripted scenarios or a seeded benchmark corpus")
    p.add_argument("--out", required=True)
    p.add_argument(
        "--scenarios", action="store_true", help="the design-document scenarios instead of a corpus"
    )
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--seed", type=int, default=7)
    p.set_defaults(func=cmd_generate)

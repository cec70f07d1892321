"""The corpus sweep: 1,000 traces x 4 modes on the virtual clock (issue: benchmark).

Reports traces/s for `compare` in one process and with 2 worker processes (traces read from files,
as the CLI does), and the overhead of `compare` (tables, bounds, missed parallelism) against the
baseline "replay alone": calling `replay` for every trace and mode and keeping nothing.
Targets: the whole sweep under 60 s; compare at most 2x replay alone.
Run: `python benchmarks/bench_compare.py [--quick]`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from toolcall_lab.analysis import compare
from toolcall_lab.records import MODES
from toolcall_lab.replay import replay
from toolcall_lab.scenarios import generate_corpus
from toolcall_lab.trace_files import load, save


def main() -> None:
    n = 200 if "--quick" in sys.argv else 1000
    t0 = time.perf_counter()
    traces = generate_corpus(n, seed=11)
    print(f"generated {n} traces in {time.perf_counter() - t0:.2f} s")

    t0 = time.perf_counter()
    for trace in traces:
        for mode in MODES:
            replay(trace, mode, **({"round_trip_s": 0.05} if mode == "serialized" else {}))
    alone = time.perf_counter() - t0

    t0 = time.perf_counter()
    result = compare(traces, MODES)
    in_process = time.perf_counter() - t0
    assert len(result.runs) == n * len(MODES)

    with tempfile.TemporaryDirectory() as tmp:
        paths = [save(t, Path(tmp) / f"{i:04d}.json") for i, t in enumerate(traces)]
        t0 = time.perf_counter()
        compare(paths, MODES)
        files_1 = time.perf_counter() - t0
        with ProcessPoolExecutor(2) as pool:
            t0 = time.perf_counter()
            compare(paths, MODES, executor=pool)
            files_2 = time.perf_counter() - t0
        t0 = time.perf_counter()
        for p in paths:
            load(p)
        loading = time.perf_counter() - t0

    print(
        f"replay alone (baseline):        {alone:6.2f} s  ({n / alone:7,.0f} traces/s, {len(MODES)} modes each)"
    )
    print(
        f"compare, in memory, 1 process:  {in_process:6.2f} s  ({n / in_process:7,.0f} traces/s)  "
        f"overhead {in_process / alone:.2f}x replay alone (target <= 2x)"
    )
    print(
        f"compare, from files, 1 process: {files_1:6.2f} s  ({n / files_1:7,.0f} traces/s; loading alone {loading:.2f} s)"
    )
    print(
        f"compare, from files, --jobs 2:  {files_2:6.2f} s  ({n / files_2:7,.0f} traces/s)  "
        f"speedup {files_1 / files_2:.2f}x over 1 process"
    )
    print(f"whole sweep ({n} x {len(MODES)}): {max(in_process, files_2):.2f} s at worst (target < 60 s)")


if __name__ == "__main__":
    main()

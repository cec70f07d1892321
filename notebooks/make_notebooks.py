"""Writes the notebooks in this folder from their sources in `notebooks/src/` (one module per notebook).

    python notebooks/make_notebooks.py            # sources -> notebooks, no outputs
    python notebooks/make_notebooks.py --execute  # ... then run each and keep its outputs (`make notebooks`)

Executed notebooks keep their outputs and widget state (the views also print a static HTML copy),
so they read on a code host without a kernel. They are executed on bundled data only: the real
recordings in ../shared/realdata are hidden from the kernel, so nothing from them lands in the
repository, and this machine's paths are written relative to the repository. A notebook whose run
fails (an error in any cell) is not written; the others are, and the command exits 1 naming the
cell. CI runs every notebook again with nbval. Keeping the source in Python makes notebook diffs
reviewable, and one module per notebook keeps edits to different notebooks apart.

    python notebooks/make_notebooks.py --execute 03_benchmark_modes   # only the notebooks named
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_notebook

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NOTEBOOKS = {
    "01_how_tool_calling_works": "nb01",
    "02_explore_strategies": "nb02",
    "03_benchmark_modes": "nb03",
    "04_real_recordings": "nb04",
    "05_serialized_proxy": "nb05",
    "06_eager_execution": "nb06",
}
OUTPUT_NOTE = (
    "*The outputs stored in this file were produced by `make notebooks` on the bundled data only "
    "(real recordings hidden); run it yourself to see the real ones.*"
)


def build(name: str, module: str) -> nbformat.NotebookNode:
    cells = importlib.import_module(f"src.{module}").CELLS
    for i, cell in enumerate(cells):  # stable ids: regenerating changes only what was edited
        cell["id"] = hashlib.sha1(f"{name}:{i}:{cell['source']}".encode()).hexdigest()[:8]
    return new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}})


def execute(nb: nbformat.NotebookNode) -> None:
    """Run in a fresh kernel in this folder, real data hidden; outputs and widget state kept."""
    from nbclient import NotebookClient

    os.environ["TOOLCALL_LAB_REALDATA"] = str(HERE / "no-real-data-when-storing-outputs")
    NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(HERE)}}).execute()
    if nb.cells and nb.cells[0].cell_type == "markdown" and OUTPUT_NOTE not in nb.cells[0].source:
        nb.cells[0].source += "\n\n" + OUTPUT_NOTE


def relative_paths(value: Any) -> Any:
    """Every string of the outputs with this machine's repository path made relative (``data/...``),
    so stored outputs say nothing about where they were made."""
    if isinstance(value, str):
        return value.replace(f"{ROOT}/", "").replace(str(ROOT), ".")
    if isinstance(value, list):
        return [relative_paths(v) for v in value]
    if isinstance(value, dict):
        return type(value)({k: relative_paths(v) for k, v in value.items()})
    return value


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    run = "--execute" in argv
    only = [a for a in argv if not a.startswith("--")]
    unknown = [a for a in only if a not in NOTEBOOKS]
    if unknown:
        print(f"unknown notebook(s): {', '.join(unknown)}; choose from {', '.join(NOTEBOOKS)}", file=sys.stderr)
        return 2
    failed = []
    for name, module in NOTEBOOKS.items():
        if only and name not in only:
            continue
        nb = build(name, module)
        if run:
            from nbclient.exceptions import CellExecutionError

            try:
                execute(nb)
            except CellExecutionError as exc:
                failed.append(name)
                lines = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip().splitlines()
                print(f"FAILED {name} (not written): {lines[-1] if lines else exc}", file=sys.stderr)
                continue
            nb = nbformat.from_dict(relative_paths(nb))
            print(f"executed {name}")
        nbformat.write(nb, HERE / f"{name}.ipynb")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

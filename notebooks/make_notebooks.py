"""Writes the notebooks in this folder from their sources in `notebooks/src/` (one module per notebook).

Run `python notebooks/make_notebooks.py` after editing a source; CI executes every notebook with nbval.
Keeping the source in Python makes notebook diffs reviewable, and one module per notebook keeps
edits to different notebooks apart.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_notebook

HERE = Path(__file__).resolve().parent
NOTEBOOKS = {
    "01_how_tool_calling_works": "nb01",
    "02_explore_strategies": "nb02",
    "03_benchmark_modes": "nb03",
    "04_real_recordings": "nb04",
    "05_serialized_proxy": "nb05",
}


def main() -> None:
    sys.path.insert(0, str(HERE))
    for name, module in NOTEBOOKS.items():
        cells = importlib.import_module(f"src.{module}").CELLS
        for i, cell in enumerate(cells):  # stable ids: regenerating changes only what was edited
            cell["id"] = hashlib.sha1(f"{name}:{i}:{cell['source']}".encode()).hexdigest()[:8]
        nb = new_notebook(cells=cells, metadata={
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}})
        nbformat.write(nb, HERE / f"{name}.ipynb")


if __name__ == "__main__":
    main()

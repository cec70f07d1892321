"""Cell builders shared by the notebook sources (`nbNN.py`, one per notebook)."""

from __future__ import annotations

from nbformat.v4 import new_code_cell, new_markdown_cell

SETUP = """from pathlib import Path
import json
import os
import pandas as pd
pd.set_option("display.width", 160)
pd.set_option("display.max_colwidth", None)  # titles and paths whole, never cut to "..."
ROOT = Path.cwd() if (Path.cwd() / "data").is_dir() else Path.cwd().parent
DATA = ROOT / "data"
REALDATA = Path(os.environ.get("TOOLCALL_LAB_REALDATA", ROOT.parent / "shared" / "realdata"))"""


def md(text: str):
    return new_markdown_cell(text.strip())


def code(text: str):
    return new_code_cell(text.strip())

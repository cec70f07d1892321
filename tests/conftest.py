"""Shared test helpers: where the real recordings live, and a skip when they are absent."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REALDATA = REPO.parent / "shared" / "realdata"
DATA = REPO / "data"

needs_realdata = pytest.mark.skipif(
    not (REALDATA / "PROVENANCE.md").is_file(),
    reason=f"real recordings not found at {REALDATA} (../shared/realdata beside the repo)",
)

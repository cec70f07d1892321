"""Rich display of core records in Jupyter (`_repr_mimebundle_` of `Round` and `RunResult`).

The records import this module lazily, only when a notebook displays them, so the core never
depends on the views at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolcall_lab.notebook.html import CSS, round_html
from toolcall_lab.trace import Trace, TraceMetadata

if TYPE_CHECKING:
    from toolcall_lab.records import Round
    from toolcall_lab.runs import RunResult


def round_bundle(rnd: Round) -> dict[str, str]:
    return {"text/plain": repr(rnd), "text/html": f"<div class='tcl'>{CSS}{round_html(rnd.to_dict())}</div>"}


def run_result_bundle(result: RunResult) -> dict[str, str]:
    """A run shown as the trace it would save as, labelled with where it came from."""
    trace = Trace.from_run(result, TraceMetadata(title=f"run ({result.mode})", origin=result.origin))
    bundle = trace._repr_mimebundle_()
    bundle["text/plain"] = repr(result)
    return bundle

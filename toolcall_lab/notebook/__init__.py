"""Notebook views (the only package that imports ipywidgets). Import submodules lazily.

``from toolcall_lab.notebook import CompareView`` works as well as the longer
``from toolcall_lab.notebook.widgets import CompareView``: the views are loaded on first use, so
importing the package (or `toolcall_lab`) never pulls in ipywidgets by itself.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CompareView", "CorpusView", "LiveView", "StreamStepper", "TraceView", "save_html"]


def __getattr__(name: str) -> Any:
    if name == "save_html":
        from toolcall_lab.notebook.export import save_html

        return save_html
    if name in __all__:
        from toolcall_lab.notebook import widgets

        return getattr(widgets, name)
    raise AttributeError(f"module 'toolcall_lab.notebook' has no attribute {name!r}")

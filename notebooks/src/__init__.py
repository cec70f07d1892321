"""Notebook sources: one module per notebook, each a list of cells (`CELLS`)."""

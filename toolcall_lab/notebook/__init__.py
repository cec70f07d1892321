"""Notebook views (the only package that imports ipywidgets). Import submodules lazily."""

"""Subcommands that run things (replay, bench, validate, ...); filled in as those parts land."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    del sub


__all__ = ["argparse", "register"]

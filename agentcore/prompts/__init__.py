"""Prompt texts shipped as package data (plain .md files), loaded once per use."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def load_prompt(name: str) -> str:
    """Package data never changes while the process runs, so each file is read once."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8").strip()

"""Prompt texts shipped as package data (plain .md files), loaded once per use."""

from __future__ import annotations

from importlib import resources


def load_prompt(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8").strip()

"""Subcommands beyond replay register here (fuzz, bench, export, corpus, report, campaign)."""
from __future__ import annotations


def register(sub) -> None:
    pass

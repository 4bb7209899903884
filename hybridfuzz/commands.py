"""Subcommands beyond replay: every module ``hybridfuzz/cli_<name>.py`` with a
``register(subparsers)`` function is picked up, so each command lives in its own
module (fuzz, bench, export, corpus, report, campaign, ...)."""
from __future__ import annotations

import importlib
import pkgutil

import hybridfuzz


def register(sub) -> None:
    for info in sorted(pkgutil.iter_modules(hybridfuzz.__path__), key=lambda i: i.name):
        if info.name.startswith("cli_"):
            importlib.import_module(f"hybridfuzz.{info.name}").register(sub)

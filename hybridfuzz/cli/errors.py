"""Exit codes and the one-line error rule, shared by every command.

Every failure a user can cause (bad flags, a file that cannot be read, a case of the
wrong kind, Ctrl-C) ends as one line on stderr and one of the exit codes below,
never a traceback. Commands raise ``UsageError`` (or let ``CaseError``/``OSError``
through); ``cli.main`` turns them into that line.
"""
from __future__ import annotations

import os
from typing import Final

OK: Final = 0
FOUND: Final = 1  # a divergence reproduced / something new was found / a check failed
USAGE: Final = 2  # bad flags or bad input: one line on stderr
UNSUPPORTED: Final = 3  # this machine cannot run it (the engine refused the configuration, no GPU)
INTERNAL: Final = 70  # a bug in hybridfuzz itself (EX_SOFTWARE); HYBRIDFUZZ_DEBUG=1 shows the traceback
INTERRUPTED: Final = 130  # Ctrl-C; what was found so far is kept

# Codes every command may return, whatever it does.
COMMON_EXITS: Final = {USAGE: "bad flags or input (one line on stderr)", INTERRUPTED: "interrupted (Ctrl-C); what was found so far is kept"}


class UsageError(Exception):
    """Bad flags or input, found before any work starts: one line, exit 2 (or ``code``)."""

    def __init__(self, message: str, code: int = USAGE):
        super().__init__(message)
        self.code = code


def describe(exc: BaseException) -> tuple[int, str] | None:
    """(exit code, one line) for a failure the user caused; None for a bug in hybridfuzz."""
    from hybridfuzz.case import CaseError
    from hybridfuzz.triage.ledger import LedgerError

    if isinstance(exc, UsageError):
        return exc.code, str(exc)
    if isinstance(exc, LedgerError):
        return USAGE, f"invalid bug ledger: {exc}"
    if isinstance(exc, CaseError):
        return USAGE, f"invalid case: {exc}"
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED, "interrupted"
    if isinstance(exc, BrokenPipeError):  # `hybridfuzz corpus | head`
        return OK, ""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return USAGE, f"{where}{exc.strerror or type(exc).__name__}"
    return None


def debug() -> bool:
    return os.environ.get("HYBRIDFUZZ_DEBUG", "") not in ("", "0")

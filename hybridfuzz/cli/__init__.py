"""The ``hybridfuzz`` command line.

One module per command in this package. ``COMMANDS`` below lists them in workflow order
(the order ``--help`` shows them); there is no discovery. Adding a command = one module
defining ``NAME``, ``HELP`` (None hides an internal command from --help), ``EXITS``
(its own exit codes; 2 and 130 hold for every command), ``add_arguments(parser)`` and
``run(args) -> int``, plus one line in ``COMMANDS``.

Shared options live in ``options.py``; exit codes and the one-line error rule in
``errors.py``, applied here in ``main`` for every command: bad flags or input print one
line and exit 2, Ctrl-C exits 130, and no command prints a traceback (a bug in
hybridfuzz itself prints one line and exits 70; HYBRIDFUZZ_DEBUG=1 re-raises it).
"""
from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from types import ModuleType

from hybridfuzz.cli import errors
from hybridfuzz.version import version

COMMANDS: tuple[str, ...] = (
    "replay",
    "fuzz",
    "shrink",
    "isolate",
    "export",
    "bugs",
    "corpus",
    "bisect",
    "campaign",
    "campaign_status",
    "report",
    "platform",
    "bench",
    "calibrate",
    "check_components",
    "atheris",
    "campaign_worker",  # internal: started by `campaign`
)


def command_modules() -> list[ModuleType]:
    return [importlib.import_module(f"hybridfuzz.cli.{name}") for name in COMMANDS]


def exits(module: ModuleType) -> dict[int, str]:
    """Every exit code a command documents: its own and the common ones, in order."""
    return dict(sorted({**module.EXITS, **errors.COMMON_EXITS}.items()))


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error raises (one line in main) instead of printing usage and exiting."""

    def error(self, message: str):
        cmd = self.prog.removeprefix("hybridfuzz").strip()
        hint = f"hybridfuzz {cmd} --help" if cmd else "hybridfuzz --help"
        if message.startswith("argument "):  # "argument --budget: ..." names the option already
            message = message.removeprefix("argument ")
        elif cmd:
            message = f"{cmd}: {message}"
        raise errors.UsageError(f"{message} (see `{hint}`)")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="hybridfuzz", description="Fuzz vLLM hybrid (GDN/Mamba + attention) models for silent state corruption.",
               epilog="Exit codes: 2 bad flags or input, 130 interrupted; each command's --help lists its own.")
    p.add_argument("--version", action="version", version=f"hybridfuzz {version()}")
    modules = command_modules()
    public = [m.NAME for m in modules if m.HELP]
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", help=" | ".join(public))
    for m in modules:
        codes = "; ".join(f"{code} {what}" for code, what in exits(m).items())
        kwargs = {"help": m.HELP} if m.HELP else {}  # without help=, argparse leaves a command out of --help
        cp = sub.add_parser(m.NAME, description=m.HELP or m.__doc__.strip().splitlines()[0], epilog=f"Exit codes: {codes}.", **kwargs)
        m.add_arguments(cp)
        cp.set_defaults(run=m.run, module=m)
    return p


def check_environment() -> None:
    """Variables the engines read later, checked before any work starts (one line naming the variable)."""
    from hybridfuzz.engines import cuda_sync
    from hybridfuzz.faults import mends

    try:
        cuda_sync.chosen()
        mends.chosen()
    except ValueError as e:
        raise errors.UsageError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    from hybridfuzz import _guard

    _guard.install()  # torchvision guard for this process and the engines it starts (never on import)
    interrupted = []  # Ctrl-C seen: whatever it broke on the way out (an import half done), the answer is 130

    def on_sigint(signum, frame):
        interrupted.append(True)
        raise KeyboardInterrupt

    def on_unraisable(unraisable):
        """A KeyboardInterrupt raised while Python runs a callback it cannot propagate from (a gc callback of
        torch's, seen in CI) is printed as "Exception ignored" and lost: the command would run on. Deliver the
        Ctrl-C again, silently, from a thread: it lands once the callback has returned."""
        if interrupted and issubclass(unraisable.exc_type, KeyboardInterrupt):
            threading.Timer(0.05, signal.raise_signal, (signal.SIGINT,)).start()
            return
        previous_hook(unraisable)

    previous = signal.signal(signal.SIGINT, on_sigint) if threading.current_thread() is threading.main_thread() else None
    previous_hook, sys.unraisablehook = sys.unraisablehook, on_unraisable
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as e:  # --help and --version print and exit 0
            return int(e.code or 0)
        check_environment()
        return args.run(args)
    except BaseException as e:  # noqa: BLE001  (every failure ends as one line and a documented code)
        if isinstance(e, SystemExit):
            raise
        known = (errors.INTERRUPTED, "interrupted") if interrupted else errors.describe(e)
        if known is None:
            if errors.debug():
                raise
            known = (errors.INTERNAL, f"internal error: {type(e).__name__}: {e} (a bug in hybridfuzz; HYBRIDFUZZ_DEBUG=1 shows the traceback)")
        code, line = known
        if line:
            print(f"hybridfuzz: {line}", file=sys.stderr, flush=True)
        return code
    finally:
        sys.unraisablehook = previous_hook
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def console() -> int:
    """The process's own entry (the console script, ``python -m hybridfuzz.cli``): ``main``; after "interrupted"
    (130) it runs the exit handlers and leaves at once. Left to the interpreter's own exit, a process that had
    printed "interrupted" and returned 130 was killed by a second SIGINT (strace: SI_USER, not from the test) in
    1 to 3 of 18 runs of the Ctrl-C test, 3 at once (2026-12-02); 0 of 36 this way. Likely CPython's own
    exit_sigint(): it flags a KeyboardInterrupt that passed through code run by ``PyRun_*`` even when caught."""
    code = main()
    if code == errors.INTERRUPTED:
        import atexit
        import os

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code

if __name__ == "__main__":
    sys.exit(console())

"""A written reproducer run standalone on this machine, as a ledger ``ReproducerRun``.

Standalone means what a maintainer has: vLLM and its dependencies, no hybridfuzz. The run gets
an environment in which ``import hybridfuzz`` fails (a shadowing package first on PYTHONPATH),
hybridfuzz's vLLM plugin is not loaded and its torchvision guard is off (the script must bring
its own). The environment section of the issue is then this machine's ``vllm.collect_env``.
"""
from __future__ import annotations

import datetime
import os
import subprocess

from hybridfuzz.export.issue import collect_env_text, run_script
from hybridfuzz.export.signature_check import DID_NOT_RUN
from hybridfuzz.triage.ledger import ReproducerRun

VERDICT_WORDS = ("REPRODUCED:", "NOT REPRODUCED:", "DID NOT RUN:")


def standalone_env(shadow_dir: str) -> dict[str, str]:
    """This process's environment with hybridfuzz made unimportable (a package of that name under ``shadow_dir``
    that raises), its vLLM plugin left out of VLLM_PLUGINS and its sitecustomize guard off PYTHONPATH."""
    from importlib.metadata import entry_points

    from hybridfuzz._guard import SITE_DIR

    pkg = os.path.join(shadow_dir, "hybridfuzz")
    os.makedirs(pkg, exist_ok=True)
    with open(os.path.join(pkg, "__init__.py"), "w", encoding="utf-8") as f:
        f.write("raise ImportError('hybridfuzz is deliberately unavailable to a standalone reproducer')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRIDFUZZ")}
    keep = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != SITE_DIR]
    env["PYTHONPATH"] = os.pathsep.join([shadow_dir, *keep])
    plugins = sorted({ep.name for group in entry_points().groups if group.startswith("vllm.") for ep in entry_points(group=group)
                      if not ep.value.startswith("hybridfuzz")})
    if "VLLM_PLUGINS" in env:
        plugins = [p for p in env["VLLM_PLUGINS"].split(",") if p in plugins]
    env["VLLM_PLUGINS"] = ",".join(plugins)
    env["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"  # the verdict lines alone on stdout
    return env


def device_name() -> str:
    """This machine as a run names it: the GPU's name, or "CPU <ISA class>" (hybridfuzz.machine)."""
    from hybridfuzz.machine import cpu_isa

    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return f"CPU {cpu_isa()}"


def verdict_line(stdout: str) -> str:
    return next((ln.strip() for ln in reversed(stdout.splitlines()) if ln.startswith(VERDICT_WORDS)), "")


def signature_in(stdout: str) -> str:
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith("signature: ")), "")
    sig = line.removeprefix("signature: ").split(" ", 1)[0]
    return "" if sig == "none" else sig


def run_standalone(script_path: str, timeout: float, collect_env: bool = True) -> tuple[ReproducerRun, str]:
    """Run the script in a fresh interpreter without hybridfuzz: (the run as the ledger records it, its stdout). A
    script that printed no verdict (killed, out of time) did not run: exit 3."""
    from hybridfuzz.vllm_facts import vllm_version

    script_path = os.path.abspath(script_path)  # it runs in its own folder: a relative --out would not be found there
    folder = os.path.dirname(script_path)
    env = standalone_env(os.path.join(folder, ".no-hybridfuzz"))
    try:
        rc, out = run_script(script_path, timeout=timeout, env=env, cwd=folder)
    except subprocess.TimeoutExpired:
        rc, out = DID_NOT_RUN, f"DID NOT RUN: the script did not finish within {timeout:g} s\n"
    out = "\n".join(ln for ln in out.splitlines() if not ln.startswith("Triton is installed"))
    line = verdict_line(out)
    if not line:
        rc, line = DID_NOT_RUN, f"DID NOT RUN: the script printed no verdict (exit code {rc})"
    run = ReproducerRun(date=datetime.datetime.now(datetime.timezone.utc).date().isoformat(), device=device_name(), vllm=vllm_version(),
                        exit_code=rc, line=line, signature=signature_in(out), collect_env=collect_env_text() if collect_env else "")
    return run, out

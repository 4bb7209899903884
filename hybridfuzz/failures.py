"""What an engine error's text says beyond the case: our harness ran short (memory, a port, a device the process
cannot see, vLLM's sleep check while other engines allocate), or the GPU faulted under a kernel.

Pure functions of ``ErrorInfo`` and of log text, shared by the engine hosts (engines/base.py ``classify``) and the
health oracle (oracles/health.py), which must not depend on the hosts.
"""
from __future__ import annotations

import re

from hybridfuzz.trace import ErrorInfo

# Our harness asked more of the device than it had, or its other engines got in the way: neither a refusal nor a
# finding (counted; replays retry it). "Memory usage increased after sleeping" is vLLM's sleep() comparing the
# *device's* free memory before and after it releases its own (gpu_worker.py), while the other engines of a
# campaign allocate on the same GPU: 60 engine lifetimes of the 10-minute H200 campaign of 2026-12-01 (vLLM
# 0.26.0) ended there, each then replayed "successfully" beside the other engines. A sleep that really grew this
# engine's memory would be masked; one that frees nothing never raised it (freed bytes 0 pass). The offline host
# now finishes such a sleep and goes on (engines/offline.py SLEEP_CHECK); this rule is for where it cannot.
SLEEP_CHECK = "Memory usage increased after sleeping"  # vLLM's words (gpu_worker.py sleep)
# A device the process cannot see at all is the host's, never the case's: on the H200 of 2026-12-04
# (results/2026-12-04-h200-vllm0.33.0-replays-shrinks/) every engine started after about 18:04 UTC, of five shrinks at once, raised torch's
# "No CUDA GPUs are available" at start-up; the fresh-engine confirmations of three shrinks took it for a finding of
# its own (`health:error:RuntimeError:e036263e`) and the other two shrinks spent their last minutes on it.
DEVICE_GONE = (r"No CUDA GPUs are available|CUDA driver initialization failed|"
               r"CUDA-capable device.{0,20}busy or unavailable|no CUDA-capable device is detected")
RESOURCE = re.compile(r"out of memory|no available memory|insufficient memory|not enough (free )?memory|"
                      r"free memory on device|EADDRINUSE|address already in use|" + DEVICE_GONE + "|" +
                      re.escape(SLEEP_CHECK), re.IGNORECASE)


def shortage(info: ErrorInfo | None) -> bool:
    """Whether an error is our harness's shortage or interference (RESOURCE), not the engine's doing."""
    return info is not None and RESOURCE.search(info.message) is not None


_DEVICE_GONE = re.compile(DEVICE_GONE, re.IGNORECASE)


def device_gone(info: ErrorInfo | None) -> bool:
    """The shortage that does not pass: the process sees no device at all (a campaign stops on it, campaign/counting.py host_lost)."""
    return info is not None and _DEVICE_GONE.search(info.message) is not None


# A fault of the GPU itself: a kernel's device-side assert, an illegal or misaligned access, a launch that failed.
# CUDA reports it at whatever later call synchronises, so one fault surfaces under several names: on the H200 and
# H100 of 2026-12-03..05 the int4 per-token-head crash of vLLM 0.33.0 was a SIGABRT between steps, an AcceleratorError
# at a stream synchronize, a Triton launch error and CUBLAS_STATUS_EXECUTION_FAILED, four signatures for one bug; a
# shrink that kept only one of them ran 155 engines, 32 of them faulting the GPU, and kept nothing
# (results/2026-12-05-h100-vllm0.33.0-shrinks-gpu-fault/). A device fault is never a refusal (``classify``) and has one symptom
# (oracles/health.py).
DEVICE_FAULT = re.compile(r"device-side assert triggered|an illegal memory access was encountered|"
                          r"an illegal instruction was encountered|misaligned address|unspecified launch failure|"
                          r"CUBLAS_STATUS_EXECUTION_FAILED|CUDA_ERROR_ILLEGAL_ADDRESS|uncorrectable ECC error")


def device_fault(info: ErrorInfo | None) -> bool:
    """Whether an error is the GPU faulting under a kernel (DEVICE_FAULT), whichever call reported it."""
    return info is not None and DEVICE_FAULT.search(info.message) is not None


def device_fault_line(log: str) -> str:
    """The first line of an engine's log that names a device fault, or "": a process that died by a signal left no
    exception, and its log's last lines are a C++ stack (the SIGABRT of a device-side assert, H200 2026-12-03)."""
    m = DEVICE_FAULT.search(log)
    if m is None:
        return ""
    start, end = log.rfind("\n", 0, m.start()) + 1, log.find("\n", m.end())
    return log[start:end if end >= 0 else len(log)].strip()[:300]


# The line CUDA's device-side assert prints for each faulting thread (PyTorch's CUDA_KERNEL_ASSERT, Triton's
# device_assert, a kernel's own assert): "FILE:LINE: FUNCTION: block: [0,0,0], thread: [8,0,0] Assertion `COND` failed."
# It names the kernel; the exception the host catches later ("Triton Error [CUDA]: device-side assert triggered" at the
# next launch, H100 2026-12-05) names only whoever synchronized next.
KERNEL_ASSERT = re.compile(r"^(.*?)(?:block|global id): \[[\d, ]+\], (?:thread|local id): \[[\d, ]+\] (Assertion .* failed\.?)\s*$", re.M)


def kernel_assert_line(log: str) -> str:
    """The first kernel assertion in an engine's log, without its thread coordinates (the same for every thread), or ""."""
    m = KERNEL_ASSERT.search(log)
    return f"{m.group(1).strip()} {m.group(2)}".strip()[:300] if m else ""

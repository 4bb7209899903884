"""Parsing ``HYBRIDFUZZ_FAULT`` (``name[:severity][,name[:severity]...]``) into FaultSpecs.

Engine-free on purpose: the bench and the CLI validate fault names without
importing vLLM; the plugin parses the same text inside the engine process.
"""
from __future__ import annotations

from dataclasses import dataclass

ENV = "HYBRIDFUZZ_FAULT"


class FaultSpecError(ValueError):
    """One line naming the offending part of HYBRIDFUZZ_FAULT / --faults."""


@dataclass(frozen=True)
class FaultSpec:
    name: str
    severity: float = 1.0  # fraction of state touched / probability per event; 1.0 = the full bug

    def text(self) -> str:
        return self.name if self.severity == 1.0 else f"{self.name}:{self.severity:g}"


def parse(text: str, known: tuple[str, ...]) -> list[FaultSpec]:
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, sev = part.partition(":")
        if name not in known:
            raise FaultSpecError(f"{ENV}: unknown fault {name!r} (known: {', '.join(known)})")
        try:
            severity = float(sev) if sev else 1.0
        except ValueError:
            raise FaultSpecError(f"{ENV}: {name}: severity {sev!r} is not a number") from None
        if not 0.0 < severity <= 1.0:
            raise FaultSpecError(f"{ENV}: {name}: severity must be in (0, 1], got {severity:g}")
        out.append(FaultSpec(name, severity))
    return out

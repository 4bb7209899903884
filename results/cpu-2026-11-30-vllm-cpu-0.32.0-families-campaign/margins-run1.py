"""One family on the CPU engine with real builder weights: class, cache settings, margins, prefix hits."""
import os, sys, json, time, statistics, traceback
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
from hybridfuzz import _guard; _guard.install()
from hybridfuzz.model import ModelSpec, build_model
fam, layers, pc = sys.argv[1], tuple(sys.argv[2].split(",")), sys.argv[3] == "pc"
spec = ModelSpec(layers=layers, architecture=fam)
d = str(build_model(spec))
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
t = time.time()
res = {"family": fam, "layers": layers, "pc": pc}
try:
    llm = LLM(model=d, skip_tokenizer_init=True, enforce_eager=True, max_model_len=512, kv_cache_memory_bytes=64 << 20,
              enable_prefix_caching=pc, max_num_seqs=4)
    res["startup_s"] = round(time.time() - t, 1)
    cc = llm.llm_engine.vllm_config.cache_config
    res["cache"] = dict(block_size=cc.block_size, mamba_block_size=getattr(cc, "mamba_block_size", None), mode=getattr(cc, "mamba_cache_mode", None), pc=cc.enable_prefix_caching)
    res["arch"] = llm.llm_engine.vllm_config.model_config.architectures
    prompts = [[3 + (s + i * st) % 500 for i in range(n)] for s, st, n in ((5, 7, 20), (11, 3, 60), (40, 1, 9), (100, 5, 33), (7, 0, 12), (200, 13, 45))]
    sp = SamplingParams(temperature=0, max_tokens=16, logprobs=2, ignore_eos=True)
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sp, use_tqdm=False)
    top1, gaps = [], []
    for o in outs:
        for pos in o.outputs[0].logprobs:
            r = sorted((v.logprob for v in pos.values()), reverse=True)
            top1.append(r[0]); gaps.append(r[0] - r[1])
    q = statistics.quantiles(gaps, n=10)
    res["top1_median"] = round(statistics.median(top1), 2)
    res["gap_deciles"] = [round(x, 2) for x in q]
    res["gap_below_0.1"] = round(sum(g < 0.1 for g in gaps) / len(gaps), 3)
    res["tokens0"] = outs[0].outputs[0].token_ids[:8]
    long = [3 + (i * 7) % 500 for i in int(sys.argv[4]) * [0] and range(int(sys.argv[4]))] if len(sys.argv) > 4 else None
    if long:
        sp2 = SamplingParams(temperature=0, max_tokens=4, logprobs=2, ignore_eos=True)
        a = llm.generate([TokensPrompt(prompt_token_ids=long)], sp2, use_tqdm=False)[0]
        b = llm.generate([TokensPrompt(prompt_token_ids=long)], sp2, use_tqdm=False)[0]
        res["long"] = dict(n=len(long), cached=[a.num_cached_tokens, b.num_cached_tokens], same=a.outputs[0].token_ids == b.outputs[0].token_ids)
    res["ok"] = True
except Exception as e:
    res["ok"] = False
    res["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    tb = traceback.extract_tb(e.__traceback__)
    res["where"] = f"{tb[-1].filename.split('site-packages/')[-1]}:{tb[-1].lineno}" if tb else ""
res["total_s"] = round(time.time() - t, 1)
print("RESULT", json.dumps(res))

"""``hybridfuzz platform``: what the fuzzer will try on this machine's vLLM (read from vLLM itself)."""
from __future__ import annotations

import dataclasses
import json

from hybridfuzz.cli import options

NAME = "platform"
HELP = "what the fuzzer will try here: KV dtypes, attention backends, runners (read from vLLM)"
EXITS = {0: "printed"}


def add_arguments(p) -> None:
    options.add_json(p)


def run(args) -> int:
    from hybridfuzz.strategies.platform import declared_kv_dtypes, detect_platform
    from hybridfuzz.vllm_facts import vllm_version

    p = detect_platform()
    from hybridfuzz.vllm_facts import family_support

    info = {"vllm": vllm_version(), **dataclasses.asdict(p), "declared_kv_dtypes": list(declared_kv_dtypes()),
            "families_not_runnable": {f.name: f.reason for f in family_support() if not f.runnable}}
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"vLLM {info['vllm']} on {p.device}")
    for key in ("families", "kv_cache_dtypes", "declared_kv_dtypes", "attention_backends", "model_runners", "block_sizes",
                "weight_quantizations"):
        print(f"  {key}: {', '.join(str(x) if x != '' else 'default' for x in info[key]) or '-'}")
    for name, dtypes in p.backend_kv_dtypes.items():
        print(f"  {name} declares KV dtypes: {', '.join(dtypes) or 'every one'}")
    for name, why in info["families_not_runnable"].items():
        print(f"  not runnable here: {name}: {why}")
    print(f"  graphs: {p.has_graphs}, sleep mode: {p.has_sleep_mode}, GPUs: {p.gpu_count} "
          f"(tensor_parallel_size drawn: {', '.join(map(str, p.tensor_parallel_choices()))})")
    print(f"  new dimensions (docs/dimensions.md): spec methods: {', '.join(p.spec_methods) or '-'}; async scheduling: "
          f"{p.async_scheduling}; preemption: {p.preemption}; priority policy: {p.priority_scheduling}; n > 1 greedy: {p.greedy_n}")
    return 0

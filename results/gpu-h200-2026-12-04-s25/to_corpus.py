"""s25: the shrunk (or partly shrunk) cases of s24's real findings into corpus/gpu, their observations fixed where the
shrinker's confirmation met a host without its GPU (vllm: unknown; fixed in cli/shrink.py since)."""
import dataclasses, os, subprocess
from hybridfuzz.case import load_case_file, dump_case
from hybridfuzz.store import write_atomic

S = "results/gpu-h200-2026-12-04-s25/res/shrink/"
R24 = "results/gpu-h200-2026-12-04-s24/"
R25 = "results/gpu-h200-2026-12-04-s25/"
A = ("Triage: real, high: one-token prompts under CUDA graphs. A batch whose new requests have 1-token prompts has a "
     "decode batch's shape, so the runner replays the FULL decode graph, which reads the new requests' recurrent state "
     "slots as if they held a state (read from 0.32.0's and 0.33.0's source). On 2026-12-04 (" + R25 + ") "
     "HYBRIDFUZZ_MEND=prefill-eager (batches with a prefilling request run eagerly) passed this class's five cases, "
     "0 of 2 fresh runs each, while the same cases unmended diverged again on the same host (at least 1 of 2 fresh runs each; that replay did not print the count).")
B = ("Triage: real, high: the per-token-head quantized KV class of results/gpu-h200-2026-12-03-s21/README.md (class 1).")
UNRUN = (" Its last variants failed to start on that host too and so were never judged: small, not proven minimal.")
GONE = (" The shrinker's own confirmation met a host that had lost its GPU ('No CUDA GPUs are available', every engine "
        "started after about 18:04 UTC); the minimal case's run when it was kept, on a fresh engine, is its reproduction.")
cases = [
  ("ffb181bb", "falcon-h1-auto-kv-graphs-one-token-prompts-differ", None,
   "Found unaided by the 20-minute default campaign on vLLM 0.33.0 (H200, " + R24 + ", signature ffb181bb). "
   "Shrunk on 2026-12-04 (" + R25 + ", 15 simplifications, 554 s) from 4 layers and 17 steps and replayed with the same "
   "signature. " + A + " One Falcon-H1 layer, kv auto, CUDA graphs, max_num_seqs 1: the engine's first two requests, "
   "the same 1-token prompt, give unrelated tokens."),
  ("fd0d6889", "jamba-graphs-one-token-prompt-after-reload", "jamba-bf16-kv-graphs-one-token-prompt-after-reload",
   "Found unaided by the 20-minute default campaign on vLLM 0.33.0 (H200, " + R24 + ", signature fd0d6889; bfloat16 KV and "
   "FLEX_ATTENTION there, neither needed). Shrunk on 2026-12-04 (" + R25 + ", 33 simplifications, 796 s) and replayed with "
   "the same signature. " + A + " One Jamba Mamba layer, CUDA graphs: a 1-token prompt before and after reload_weights "
   "gives unrelated tokens."),
  ("238c0dfc", "nemotron-h-without-mamba-layers-assertion", "nemotron-h-v2-runner-without-mamba-layers-assertion",
   "Found unaided by the 20-minute default campaign on vLLM 0.33.0 (H200, " + R24 + ", signature 238c0dfc). Shrunk on "
   "2026-12-04 (" + R25 + ", 6 simplifications, 73 s; the V2 model runner and prefix caching of the finding were not "
   "needed) and replayed with the same signature. Triage: real, low: a bare AssertionError ('no mamba layers in the "
   "model', v1/worker/mamba_utils.py:700 in get_mamba_groups) at start-up for a NemotronH whose layers are an MLP and "
   "an attention layer. vLLM should serve it like an attention-only model or refuse it with a clear error; the "
   "bare-assertion class of lfm2-mamba-align-without-mamba-layers.yaml (0.26.0)."),
  ("4e783eaf", "falcon-h1-fp8-graphs-one-token-prompt-reference", None,
   "Found unaided by the 20-minute default campaign on vLLM 0.33.0 (H200, " + R24 + ", signature 4e783eaf). Shrunk on "
   "2026-12-04 (" + R25 + ", 19 simplifications, 84 engine runs; the budget ended) from 3 layers and 11 steps." + GONE +
   " " + A + " One Falcon-H1 layer, fp8_e4m3 KV, CUDA graphs, max_num_seqs 1: two 1-token prompts; the second is off "
   "the auto-KV reference from its first token (both engines read a stale state slot, each its own)."),
  ("e15d36c9", "zamba2-int4-per-token-head-crash", "zamba2-int4-per-token-head-device-assert",
   "Found unaided by the 20-minute default campaign on vLLM 0.33.0 (H200, " + R24 + ", signature e15d36c9: SIGABRT at "
   "step 4; a replay gave 'Triton Error [CUDA]: device-side assert triggered'). Shrunk on 2026-12-04 (" + R25 + ", 21 "
   "simplifications, 170 engine runs, 866 s) from 8 layers and 23 steps toward the symptom its first run showed there, "
   "CUBLAS_STATUS_EXECUTION_FAILED at a generate step." + GONE + UNRUN + " " + B + " One Zamba2 hybrid layer, "
   "int4_per_token_head on TRITON_ATTN, eager, a 128-token budget: the engine's CUDA context fails at the third "
   "generate. A crash, the most severe member of the class."),
  ("6e91af78", "zamba2-int4-per-token-head-reload-differs-7", None,
   "Found unaided by the 20-minute default campaign on vLLM 0.33.0 (H200, " + R24 + ", signature 6e91af78, after a warm "
   "history of 47 steps in the budget's last 17 s). Replayed on 2026-12-04 (" + R25 + "): 2 of 2 fresh runs diverged, "
   "as reload-differs b32759bc (the signature of zamba2-int4-per-token-head-reload-differs-260-vllm-0.33.0.yaml). Shrunk "
   "(34 simplifications, 142 engine runs, 859 s) to one Zamba2 hybrid layer and 3 steps." + GONE + UNRUN + " " + B +
   " A 7-token prompt before and after reload_weights gives another first token."),
  ("ef8dca8d", "falcon-h1-fp8-warm-history-one-token-prompt", None,
   "Found unaided by the 20-minute default campaign on vLLM 0.33.0 (H200, " + R24 + ", signature ef8dca8d, after a warm "
   "history of 306 steps in the budget's last 17 s). Replayed on 2026-12-04 (" + R25 + "): 2 of 2 fresh runs diverged, "
   "as repeat-differs 471e1a80 (a 1-token prompt, its second token; the float32 control differs too). Only partly "
   "shrunk (306 to 290 steps, 3 layers) before the device time ended; the minimal member of its class is "
   "falcon-h1-auto-kv-graphs-one-token-prompts-differ-vllm-0.33.0.yaml. " + A),
  ("11c48cea", "zamba2-int4-per-token-head-warm-history-crash", None,
   "Found unaided by the 20-minute default campaign on vLLM 0.33.0 (H200, " + R24 + ", signature 11c48cea, wake-differs, "
   "after a warm history of 248 steps in the budget's last 17 s). Replayed on 2026-12-04 (" + R25 + "): 2 of 2 fresh "
   "runs crashed, SIGABRT e15d36c9 (the crash of zamba2-int4-per-token-head-crash-vllm-0.33.0.yaml). Only partly shrunk "
   "(248 to 54 steps, 8 layers) before the device time ended. " + B),
]
for sig, name, old, note in cases:
    c = load_case_file(S + sig + ".min.yaml")
    obs = list(c.observed)
    fixed = [o for o in obs if o.vllm == "unknown"]
    if fixed:
        new = dataclasses.replace(fixed[-1], vllm="0.33.0", device="NVIDIA H200", torch="2.14.0+cu130", isa="")
        obs = [o for o in obs if o.vllm != "unknown" and not (o.vllm == new.vllm and o.device == new.device and o.verdict == new.verdict)] + [new]
    c = c.replace(note=note, observed=obs)
    dest = f"corpus/gpu/{name}-vllm-0.33.0.yaml"
    if old and os.path.exists(f"corpus/gpu/{old}-vllm-0.33.0.yaml"):
        subprocess.run(["git", "rm", "-q", f"corpus/gpu/{old}-vllm-0.33.0.yaml"], check=True)
    write_atomic(dest, dump_case(c))
    print(dest, [o.signature for o in c.observed])

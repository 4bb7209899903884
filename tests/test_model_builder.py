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

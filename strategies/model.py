"""Model shapes: hybrid layer orders (1 to 8 layers, any order) and seeds."""
from __future__ import annotations

from hypothesis import strategies as st

from hybridfuzz.model import FULL, LINEAR, ModelSpec


def layer_orders(min_layers: int = 1, max_layers: int = 8) -> st.SearchStrategy[tuple[str, ...]]:
    # sampled_from shrinks toward its first element; lists shrink toward shorter.
    return st.lists(st.sampled_from([LINEAR, FULL]), min_size=min_layers, max_size=max_layers).map(tuple)


@st.composite
def model_specs(draw, max_layers: int = 8) -> ModelSpec:
    layers = draw(layer_orders(1, max_layers))
    seed = draw(st.integers(0, 3))
    return ModelSpec(layers=layers, seed=seed)

"""Hypothesis strategies for hybrid-model cases (installed as ``hybridfuzz.strategies``).

Small ``@composite`` builders, each listing its simplest value first so that
shrinking moves toward fewer layers, fewer steps, shorter prompts and vLLM's
default settings.
"""
from hybridfuzz.strategies.case import cases, sessions
from hybridfuzz.strategies.engine import engine_configs
from hybridfuzz.strategies.model import layer_orders, model_specs
from hybridfuzz.strategies.platform import Platform, detect_platform
from hybridfuzz.strategies.steps import step_scripts

__all__ = ["cases", "sessions", "engine_configs", "layer_orders", "model_specs", "Platform", "detect_platform", "step_scripts"]

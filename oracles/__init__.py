"""Oracles: pure functions from Traces to a Verdict (installed as ``hybridfuzz.oracles``)."""
from hybridfuzz.oracles.verdict import Verdict, combine

__all__ = ["Verdict", "combine"]

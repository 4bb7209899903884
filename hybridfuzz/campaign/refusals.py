"""Refusal memory: a configuration vLLM refused at start-up is not started again.

A refusal costs a whole engine start (a median 79 s each on a loaded H200 host, 20 % of all
worker time in the fourth session's 0.33.0 campaign, issue #12), and it is deterministic:
vLLM's config validation and attention-backend selection read only the model and engine
settings. So the first refusal of a configuration is remembered, and a later case with the
same configuration is answered from memory: its verdict is "unsupported", with the
remembered reason and ``predicted_refusal`` in its engine settings, and no engine starts.

The key is the model and engine settings without their seeds (which change the weights and
sampling, never validation). A shortage of our own harness (``RESOURCE``: out of memory,
no free port) is never remembered: it depends on the moment, not on the configuration.

Memories are files under DIR (one per key, written atomically), so every campaign worker
shares them and a restarted worker keeps them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os

from hybridfuzz.case import Case
from hybridfuzz.engines.base import RESOURCE
from hybridfuzz.store import write_atomic
from hybridfuzz.trace import ErrorInfo, Trace


def refusal_key(case: Case) -> str:
    """What a start-up refusal depends on: model and engine settings, seeds left out."""
    model = {k: v for k, v in dataclasses.asdict(case.model).items() if k != "seed"}
    engine = {k: v for k, v in dataclasses.asdict(case.engine).items() if k != "seed"}
    blob = json.dumps({"model": model, "engine": engine}, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def remembered(trace: Trace) -> bool:
    """Whether this trace is a refusal worth remembering: refused at start-up, not for want of resources."""
    return (trace.outcome == "rejected" and not trace.steps and trace.error is not None
            and not RESOURCE.search(trace.error.message) and "predicted_refusal" not in trace.engine_settings)


class RefusalMemory:
    def __init__(self, directory: str):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.hits = 0

    def _path(self, case: Case) -> str:
        return os.path.join(self.directory, refusal_key(case) + ".json")

    def learn(self, case: Case, trace: Trace) -> None:
        if remembered(trace) and not os.path.exists(self._path(case)):
            write_atomic(self._path(case), json.dumps(dataclasses.asdict(trace.error)))

    def predict(self, case: Case) -> Trace | None:
        """The remembered refusal of this case's configuration as a Trace, or None."""
        try:
            with open(self._path(case)) as f:
                error = ErrorInfo(**json.load(f))
        except (OSError, ValueError, TypeError):
            return None
        self.hits += 1
        return Trace(outcome="rejected", error=error, engine_settings={"predicted_refusal": refusal_key(case)})

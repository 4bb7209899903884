"""Requests in flight on the offline host: ``submit`` (sent, then ``advance`` engine steps), ``abort`` (cut chosen ones
short), and a ``generate`` that joins them, so requests arrive while others decode.

``LLM.generate`` adds its requests and steps the engine until every request is done; with requests already in flight
it would wait for those too and return their outputs as its own. Here the host drives vLLM's ``LLMEngine`` the same
way itself (``add_request``, ``step``, ``abort_request``): a generate steps the engine until its own requests are done
and keeps what the others produced meanwhile. Submitted requests (n = 1) stream cumulative outputs, so an aborted one
keeps the tokens it had; vLLM delivers nothing for a request once aborted. When the case's steps have run, ``drain``
steps the engine until every request has ended and writes the submitted ones into their submit steps' results, each
with how it ended (``length``, ``abort``).

Only for cases without sleep steps: sleeping with requests in flight is the server host's (engines/inflight.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hybridfuzz.case import Abort, Generate, Submit
from hybridfuzz.trace import RequestResult, StepResult

ABORTED = "abort"  # vLLM's finish_reason of an aborted request


def sampling_params(step: Generate | Submit, cumulative: bool = False):
    """vLLM's SamplingParams of a generate or submit step: greedy unless temperature > 0; every request runs to
    max_tokens (ignore_eos), so repeats and references compare whole outputs. Final outputs only (what LLM.generate
    asks for: a request with n > 1 then comes back as one output holding every sample), unless ``cumulative``."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    kw: dict[str, Any] = dict(temperature=step.temperature, max_tokens=step.max_tokens, logprobs=step.logprobs, ignore_eos=True)
    if step.seed is not None:
        kw["seed"] = step.seed
    if step.n != 1:
        kw["n"] = step.n
    if step.prompt_logprobs is not None:
        kw["prompt_logprobs"] = step.prompt_logprobs
    kw["output_kind"] = RequestOutputKind.CUMULATIVE if cumulative else RequestOutputKind.FINAL_ONLY
    return SamplingParams(**kw)


def _ranked(position: dict) -> list[list[float]]:
    return [[int(t), float(lp.logprob)] for t, lp in sorted(position.items(), key=lambda kv: (-kv[1].logprob, kv[0]))]


def request_result(req) -> RequestResult:
    """One vLLM RequestOutput as data: the first sample's tokens and logprobs, every sample's tokens when n > 1,
    the prompt logprobs when asked for (vLLM gives None for the first prompt token: it is left out)."""
    comp = req.outputs[0]
    prompt_lps = getattr(req, "prompt_logprobs", None)
    return RequestResult(prompt_len=len(req.prompt_token_ids or []), tokens=list(comp.token_ids),
                         logprobs=[_ranked(pos) for pos in comp.logprobs or []],
                         num_cached_tokens=getattr(req, "num_cached_tokens", None),
                         finish_reason=None,
                         samples=[list(c.token_ids) for c in req.outputs] if len(req.outputs) > 1 else None,
                         prompt_logprobs=[_ranked(pos) for pos in prompt_lps if pos is not None] if prompt_lps is not None else None)


@dataclass
class Sent:
    """One submitted request: where it came from, its id, the latest output vLLM gave for it."""

    step: int
    index: int
    request_id: str
    result: RequestResult | None = None
    finish_reason: str | None = None

    @property
    def done(self) -> bool:
        return self.finish_reason is not None


class StepLoop:
    """The requests a case has in flight on one offline engine, and the loop that steps it."""

    def __init__(self, llm):
        self.llm = llm
        self.engine = llm.llm_engine
        self.sent: list[Sent] = []  # every submitted request, in the order sent: what abort numbers count
        self._ids = 0
        self._finished: dict[str, Any] = {}  # request id -> final RequestOutput of a generate's requests

    @property
    def in_flight(self) -> bool:
        return any(not s.done for s in self.sent)

    def _add(self, prompt: list[int], params, priority: int) -> str:
        from vllm.inputs import TokensPrompt

        self._ids += 1
        request_id = f"hybridfuzz-{self._ids}"
        self.engine.add_request(request_id, TokensPrompt(prompt_token_ids=list(prompt)), params, priority=priority)
        return request_id

    def _step(self) -> None:
        by_id = {s.request_id: s for s in self.sent}
        for out in self.engine.step():
            sent = by_id.get(out.request_id)
            if sent is None:
                if out.finished:
                    self._finished[out.request_id] = out
                continue
            sent.result = request_result(out)
            if out.finished:
                sent.finish_reason = out.outputs[0].finish_reason or "stop"

    def submit(self, index: int, step: Submit) -> None:
        """Send the step's requests, then run ``advance`` engine steps (fewer if nothing is left to run)."""
        for r, prompt in enumerate(step.prompts):
            params = sampling_params(step, cumulative=step.n == 1)
            self.sent.append(Sent(index, r, self._add(prompt, params, step.priority)))
        for _ in range(step.advance):
            if not self.engine.has_unfinished_requests():
                break
            self._step()

    def generate(self, step: Generate) -> list[RequestResult]:
        """Send the step's requests and step the engine until they are done; requests in flight go on beside them."""
        ids = [self._add(prompt, sampling_params(step), step.priority) for prompt in step.prompts]
        while any(i not in self._finished for i in ids):
            if not self.engine.has_unfinished_requests():
                raise RuntimeError(f"the engine has no unfinished requests, yet {sum(i not in self._finished for i in ids)} of this step's never finished")
            self._step()
        return [request_result(self._finished.pop(i)) for i in ids]

    def abort(self, step: Abort) -> None:
        """Abort the named submitted requests that are still running; those that finished stay finished."""
        chosen = [self.sent[n] for n in step.requests if n < len(self.sent) and not self.sent[n].done]
        if chosen:
            self.engine.abort_request([s.request_id for s in chosen])
            for s in chosen:
                s.finish_reason = ABORTED

    def drain(self) -> None:
        """Step the engine until every request has ended."""
        while self.in_flight and self.engine.has_unfinished_requests():
            self._step()
        for s in self.sent:
            if not s.done:
                s.finish_reason = "lost"  # the engine holds no unfinished request, yet it never said this one ended

    def write(self, steps: list[StepResult]) -> None:
        """Each submitted request's result into its submit step's outputs, in prompt order, with how it ended."""
        by_index = {s.index: s for s in steps}
        for sent in self.sent:
            result = sent.result or RequestResult(prompt_len=0, tokens=[], logprobs=[])
            result.finish_reason = sent.finish_reason
            target = by_index.get(sent.step)
            if target is not None:
                target.outputs.append(result)

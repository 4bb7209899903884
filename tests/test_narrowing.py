"""Narrowing the platform (--kv-dtypes, --attention-backends, --eager-only) and what the engine
strategies then draw; the same narrowing passed from `hybridfuzz campaign` to its workers."""
import os
import sys

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from hybridfuzz.campaign.config import EngineUse, Narrowing
from hybridfuzz.case import EngineConfig
from hybridfuzz.strategies import engine_configs
from hybridfuzz.strategies.platform import Platform, narrow

CUDA = Platform("cuda", ("auto", "fp8", "int8_per_token_head"), ("TRITON_ATTN", "FLASH_ATTN"), has_graphs=True,
                has_sleep_mode=True, model_runners=("", "0", "1"), weight_quantizations=("fp8",))
CPU_LIKE = Platform("cpu", ("auto", "fp8"), ("CPU_ATTN",))
EXTRA_KEYS = {"max_num_batched_tokens", "enable_chunked_prefill", "quantization"}
FEW = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


# ---------------------------------------------------------------- narrow()

@pytest.mark.parametrize("kwargs,option", [
    ({"kv_dtypes": "fp8,int3"}, "--kv-dtypes"),
    ({"kv_dtypes": "fp8_e5m2"}, "--kv-dtypes"),
    ({"attention_backends": "FLASHINFER"}, "--attention-backends"),
    ({"kv_dtypes": "fp8", "attention_backends": "TRITON_ATTN,CPU_ATTN"}, "--attention-backends"),
])
def test_value_not_offered_raises_naming_the_option(kwargs, option):
    with pytest.raises(ValueError) as err:
        narrow(CUDA, **kwargs)
    message = str(err.value)
    assert message.startswith(option + ":") and "\n" not in message
    assert "offered:" in message


def test_narrow_keeps_only_what_was_asked():
    p = narrow(CUDA, kv_dtypes=" fp8 , int8_per_token_head,", attention_backends="FLASH_ATTN", eager_only=True)
    assert p.kv_cache_dtypes == ("fp8", "int8_per_token_head")
    assert p.attention_backends == ("FLASH_ATTN",)
    assert p.has_graphs is False
    # everything else untouched
    assert (p.device, p.has_sleep_mode, p.model_runners, p.weight_quantizations) == ("cuda", True, ("", "0", "1"), ("fp8",))
    assert narrow(CUDA) == CUDA and narrow(CUDA, kv_dtypes="", attention_backends=" , ") == CUDA


# ---------------------------------------------------------------- what the strategies draw

@FEW
@given(st.data())
def test_one_backend_is_always_used(data):
    platform = narrow(CUDA, attention_backends="FLASH_ATTN")
    engine = data.draw(engine_configs(platform))
    assert engine.attention_backend == "FLASH_ATTN"


@FEW
@given(engine_configs(narrow(CUDA, kv_dtypes="int8_per_token_head", eager_only=True)))
def test_narrowed_dtype_and_eager_only(engine):
    assert engine.kv_cache_dtype == "int8_per_token_head"
    assert engine.enforce_eager is True


@FEW
@given(engine_configs(CUDA))
def test_extra_holds_only_scheduler_and_weight_knobs(engine):
    assert set(engine.extra) <= EXTRA_KEYS
    assert ("max_num_batched_tokens" in engine.extra) == ("enable_chunked_prefill" in engine.extra)
    assert engine.extra.get("quantization", "fp8") in CUDA.weight_quantizations
    assert not set(engine.extra) & {f for f in EngineConfig.__dataclass_fields__}


@FEW
@given(engine_configs(CPU_LIKE))
def test_no_quantization_where_none_is_offered(engine):
    assert set(engine.extra) <= EXTRA_KEYS - {"quantization"}
    assert engine.attention_backend is None and engine.enforce_eager is True


def test_the_unnarrowed_cuda_platform_reaches_every_knob():
    """The narrowing tests above would pass vacuously if these were never drawn."""
    fast = settings(max_examples=2000, database=None, deadline=None)
    assert find(engine_configs(CUDA), lambda e: e.extra.get("quantization") == "fp8", settings=fast)
    assert find(engine_configs(CUDA), lambda e: "max_num_batched_tokens" in e.extra, settings=fast)
    assert find(engine_configs(CUDA), lambda e: e.enforce_eager is False, settings=fast)
    assert find(engine_configs(CUDA), lambda e: e.attention_backend == "TRITON_ATTN", settings=fast)
    assert find(engine_configs(CUDA), lambda e: e.kv_cache_dtype == "int8_per_token_head", settings=fast)


def _declared_cuda_platform() -> Platform:
    """CUDA's knobs with the attention backends' KV-dtype declarations of the installed vLLM (TRITON_ATTN,
    FLASH_ATTN and FLEX_ATTENTION import on the CPU build too; FLASHINFER needs its package)."""
    from hybridfuzz import _guard
    from hybridfuzz.strategies.platform import GPU_BACKENDS, backend_declarations

    _guard.block_here()
    declared = backend_declarations(GPU_BACKENDS)
    if len(declared) < 2:
        pytest.skip(f"the GPU attention backends do not import here: {sorted(declared)}")
    dtypes = ("auto", "float16", "fp8", "fp8_e5m2", "int8_per_token_head", "nvfp4")
    return Platform("cuda", dtypes, tuple(declared), has_graphs=True, has_sleep_mode=True, backend_kv_dtypes=declared)


def test_a_named_backend_declares_the_drawn_kv_dtype():
    """vLLM refuses a named backend with a KV dtype it does not declare, before the engine exists: 18 of the 22
    refused sessions of an H200 campaign (vLLM 0.32.0, 2026-12-01). Judged by vLLM's own rule
    (``supports_kv_cache_dtype``), not by the table the strategy read."""
    from hybridfuzz.strategies.platform import backend_class

    platform = _declared_cuda_platform()

    @settings(max_examples=300, database=None, deadline=None)
    @given(engine_configs(platform))
    def named_backend_takes_it(engine):
        if engine.attention_backend is not None:
            assert backend_class(engine.attention_backend).supports_kv_cache_dtype(engine.kv_cache_dtype), engine

    named_backend_takes_it()
    fast = settings(max_examples=3000, database=None, deadline=None)
    narrow_one = min(platform.backend_kv_dtypes, key=lambda b: len(platform.backend_kv_dtypes[b]))
    refused_there = next(d for d in platform.kv_cache_dtypes if not platform.takes(narrow_one, d))
    # the rule removes pairs, not knobs: that backend and that dtype are each still drawn
    assert find(engine_configs(platform), lambda e: e.attention_backend == narrow_one and e.kv_cache_dtype != "auto", settings=fast)
    assert find(engine_configs(platform), lambda e: e.kv_cache_dtype == refused_there and e.attention_backend is not None,
                settings=fast)
    only = narrow(platform, attention_backends=narrow_one)

    @FEW
    @given(engine_configs(only))
    def narrowed_to_one(engine):
        assert engine.attention_backend == narrow_one and only.takes(narrow_one, engine.kv_cache_dtype)

    narrowed_to_one()
    with pytest.raises(ValueError) as err:
        narrow(platform, kv_dtypes=refused_there, attention_backends=narrow_one)
    assert str(err.value).startswith("--kv-dtypes: " + refused_there + " not declared by --attention-backends") and "\n" not in str(err.value)


def test_graph_cases_skip_torch_compile_unless_asked():
    """Default graph cases capture full decode graphs without compile (seconds); --torch-compile adds
    vLLM's compiled path, and --eager-only wins over it."""
    fast = settings(max_examples=2000, database=None, deadline=None)

    @FEW
    @given(engine_configs(CUDA))
    def default_space(engine):
        assert engine.torch_compile is engine.enforce_eager  # eager: the default, unwritten in YAML

    default_space()
    widened = narrow(CUDA, torch_compile=True)
    assert widened.compiled_graphs and not CUDA.compiled_graphs
    assert find(engine_configs(widened), lambda e: not e.enforce_eager and e.torch_compile, settings=fast)
    assert find(engine_configs(widened), lambda e: not e.enforce_eager and not e.torch_compile, settings=fast)
    assert narrow(CUDA, eager_only=True, torch_compile=True).compiled_graphs is False


def test_engine_arguments_of_a_graph_case():
    from hybridfuzz.engines.offline import GRAPH_CAPTURE_SIZES, engine_kwargs

    def compilation(**fields):
        return engine_kwargs(EngineConfig(**fields), "/m", "cuda").get("compilation_config")

    assert compilation(enforce_eager=True) is None
    assert compilation(enforce_eager=False) == {"cudagraph_capture_sizes": GRAPH_CAPTURE_SIZES}  # vLLM's compiled path
    assert compilation(enforce_eager=False, torch_compile=False) == {
        "mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": GRAPH_CAPTURE_SIZES}
    own = {"mode": 3}
    assert compilation(enforce_eager=False, torch_compile=False, extra={"compilation_config": own}) == own
    assert "compilation_config" not in engine_kwargs(EngineConfig(enforce_eager=False), "/m", "cpu")


# ---------------------------------------------------------------- campaign -> worker

@pytest.mark.parametrize("narrowing,use", [
    (Narrowing(kv_dtypes="fp8", eager_only=True), EngineUse()),
    (Narrowing(attention_backends="TRITON_ATTN,FLASH_ATTN"), EngineUse(max_steps=3)),
    (Narrowing(torch_compile=True), EngineUse(cases_per_engine=5, shrink="inline")),
    (Narrowing(), EngineUse()),
])
def test_campaign_passes_narrowing_to_its_workers(tmp_path, narrowing, use):
    from hybridfuzz.campaign.config import WorkerSettings
    from hybridfuzz.campaign.supervisor import CampaignSupervisor
    from hybridfuzz.cli import build_parser
    from hybridfuzz.cli.campaign import settings_of

    settings = WorkerSettings(narrowing=narrowing, known_dirs=("corpus",), stale_after_s=30.0, shrink_slots=0 if narrowing.eager_only else 2,
                              use=use)
    campaign = CampaignSupervisor(str(tmp_path), 10, workers=1, engine="cpu", settings=settings)
    cmd = campaign._worker_cmd(0, 0.0)
    assert cmd[:4] == [sys.executable, "-m", "hybridfuzz.cli", "campaign-worker"]
    if narrowing.kv_dtypes:
        i = cmd.index("--kv-dtypes")
        assert cmd[i + 1] == narrowing.kv_dtypes
    else:
        assert "--kv-dtypes" not in cmd
    assert ("--eager-only" in cmd) == narrowing.eager_only
    assert ("--torch-compile" in cmd) == narrowing.torch_compile
    args = build_parser().parse_args(cmd[3:])
    assert args.module.NAME == "campaign-worker" and args.dir == str(tmp_path) and args.index == 0
    assert settings_of(args) == campaign.settings  # what the worker reads is what the supervisor meant
    assert ("--max-steps" in cmd) == bool(use.max_steps)  # unset: the worker's device decides (EngineUse.resolved)


# ---------------------------------------------------------------- the CLIs refuse at once (this machine: CPU)

@pytest.mark.parametrize("argv,option", [
    (["fuzz", "--budget", "1s", "--kv-dtypes", "fp8,int3"], "--kv-dtypes"),
    (["fuzz", "--budget", "1s", "--attention-backends", "FLASH_ATTN"], "--attention-backends"),
    (["campaign", "--budget", "1s", "--kv-dtypes", "int3"], "--kv-dtypes"),
])
def test_cli_refuses_a_value_not_offered_here(tmp_path, argv, option, capsys, monkeypatch):
    """In this process (the refusal comes before any engine; a subprocess each cost 11 s of importing vLLM)."""
    from hybridfuzz import cli

    monkeypatch.chdir(tmp_path)
    if argv[0] == "campaign":
        argv = [*argv, "--dir", str(tmp_path / "c")]
    else:
        argv = [*argv, "--out", str(tmp_path / "f"), "--findings", str(tmp_path / "found")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("hybridfuzz:")]
    assert len(lines) == 1 and lines[0].startswith(f"hybridfuzz: {option}:"), err
    assert os.listdir(tmp_path) == []


@FEW
@given(st.data())
def test_a_session_is_always_full(data):
    """Persistent mode: every session fills its engine (short sessions wasted engine starts, issue #12)."""
    from hybridfuzz.strategies import sessions

    n = data.draw(st.integers(1, 6))
    session = data.draw(sessions(narrow(CUDA, families=None), max_layers=2, max_steps=3, max_cases=n))
    assert len(session) == n
    assert all(c.model == session[0].model and c.engine == session[0].engine for c in session)


def test_a_server_session_draws_requests_in_flight_in_every_case():
    """The fuzz loop draws sessions with its host's protocol (host.protocol): a server's cases can leave
    requests in flight, in the first case and the later ones alike; an offline host's never."""
    from hybridfuzz import sleepwake
    from hybridfuzz.case import Sleep, Submit
    from hybridfuzz.hosts import make_host
    from hybridfuzz.strategies import sessions

    fast = settings(max_examples=3000, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    assert make_host("server").protocol == sleepwake.SERVER and make_host("forkserver").protocol == sleepwake.OFFLINE
    server = sessions(CUDA, max_layers=2, max_steps=6, max_cases=2, host=sleepwake.SERVER)
    assert find(server, lambda s: all(any(isinstance(x, Submit) for x in c.steps) for c in s), settings=fast)

    @FEW
    @given(sessions(CUDA, max_layers=2, max_steps=6, max_cases=2))
    def offline(session):
        # the offline host sends requests in flight itself only in cases without sleep steps (engines/steploop.py)
        for c in session:
            assert not (any(isinstance(x, Submit) for x in c.steps) and any(isinstance(x, Sleep) for x in c.steps))

    offline()


def test_later_session_cases_carry_more_steps():
    """A warm engine's cases draw at least half the step budget (79 % one-step cases on a GPU campaign
    before this); the first case keeps the simplest-first draw, so a session still starts small."""
    from hypothesis import seed as hseed

    from hybridfuzz.strategies import sessions

    firsts, laters = [], []

    @hseed(7)
    @settings(max_examples=60, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(sessions(CUDA, max_layers=2, max_steps=6, max_cases=4))
    def sample(session):
        firsts.append(len(session[0].steps))
        laters.extend(len(c.steps) for c in session[1:])

    sample()
    assert sum(n == 1 for n in laters) / len(laters) < 0.25
    assert sum(laters) / len(laters) > sum(firsts) / len(firsts)

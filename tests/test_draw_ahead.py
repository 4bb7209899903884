"""Background-shrinking loops (the GPU default) run sessions Hypothesis drew ahead (campaign/pacing.py draw_ahead)."""
from hybridfuzz import sleepwake
from hybridfuzz.campaign.loop import DRAW_AHEAD, batch_sessions, draw_ahead, draw_ahead_sessions
from hybridfuzz.strategies.case import sessions
from hybridfuzz.strategies.platform import Platform

# vLLM 0.26.0 on an H200 as `hybridfuzz platform` printed it (results/2026-12-01-h200-vllm0.26.0-default-campaigns/platform26.txt)
H200_026 = Platform(device="cuda", kv_cache_dtypes=("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2",
                                                     "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4"),
                    attention_backends=("TRITON_ATTN", "FLASH_ATTN", "FLASHINFER", "FLEX_ATTENTION"), has_graphs=True,
                    has_sleep_mode=True, model_runners=("", "0", "1"), weight_quantizations=("fp8",),
                    families=("qwen3_next", "nemotron_h", "granitemoehybrid", "falcon_h1", "lfm2", "jamba", "zamba2"))


def test_a_drawn_ahead_batch_is_not_the_simplest_sessions_over_and_over():
    """Hypothesis's first examples of a run zero-extend a short prefix (auto KV, one layer, no sleep mode); run one
    at a time on a GPU they were the whole campaign: 73 of 102 sessions drew auto (H200, 2026-12-01). A drawn-ahead
    batch has that phase as a tenth, shuffled in. Hypothesis mutates earlier examples, so one batch's share of sleep
    mode swings with its version (seed 7: 0.33 under 6.155, 0.24 under another); four batches pooled do not."""
    batches = [draw_ahead(sessions(H200_026, 8, 6, 12, sleepwake.OFFLINE), seed=seed, n=DRAW_AHEAD)
               for seed in (7, 11, 12, 13)]
    assert all(len(b) == DRAW_AHEAD and all(len(s) == 12 for s in b) for b in batches)
    first = [b[0] for batch in batches for b in batch]
    auto = sum(c.engine.kv_cache_dtype == "auto" for c in first) / len(first)
    sleep_mode = sum(c.engine.enable_sleep_mode for c in first) / len(first)
    assert auto <= 0.3, auto
    assert sleep_mode >= 0.3, sleep_mode
    for batch in batches:  # the head of each run order is mixed too
        assert sum(s[0].engine.kv_cache_dtype == "auto" for s in batch[:10]) <= 6


def test_draw_ahead_is_reproducible_per_seed():
    strategy = sessions(H200_026, 4, 4, 2, sleepwake.OFFLINE)
    assert draw_ahead(strategy, seed=3, n=20) == draw_ahead(strategy, seed=3, n=20)


def test_a_batch_of_longer_sessions_holds_no_more_cases():
    """Drawing costs about 11 ms a case, before a worker's first engine runs: 48-case sessions (the GPU default) come
    50 to a batch, the 2400 cases of 100 sessions of 24; single-case sessions still 100, and never fewer than 20."""
    assert draw_ahead_sessions(24) == DRAW_AHEAD == 100
    assert draw_ahead_sessions(48) == 50
    assert draw_ahead_sessions(1) == 100
    assert draw_ahead_sessions(1000) == 20


def test_a_workers_first_batches_are_small_and_double_up_to_a_full_one():
    """Twelve H200 workers drawing 2400 cases each at start delayed their first engines (2026-12-02); a worker runs
    about 3 sessions in ten minutes."""
    assert [batch_sessions(b, 48) for b in range(6)] == [3, 6, 12, 24, 48, 50]
    assert batch_sessions(100, 48) == draw_ahead_sessions(48)
    assert [batch_sessions(b, 1) for b in (0, 5, 6)] == [3, 96, 100]


def test_the_first_batch_leaves_out_hypothesis_simplest_session():
    """Hypothesis's first example is the strategy's simplest value (auto KV, one layer, no sleep mode); in a batch
    of 3 it would be a third of a worker's first sessions."""
    strategy = sessions(H200_026, 4, 4, 2, sleepwake.OFFLINE)
    every = draw_ahead(strategy, seed=5, n=4)
    kept = draw_ahead(strategy, seed=5, n=4, skip_simplest=True)
    left_out = [s for s in every if s not in kept]
    assert len(kept) == 3 and all(s in every for s in kept) and len(left_out) == 1
    first = left_out[0][0]
    assert (first.engine.kv_cache_dtype, len(first.model.layers), first.engine.enable_sleep_mode) == ("auto", 1, False)


def test_the_shrinking_share_counts_the_shrink_under_way_and_caps_it():
    """The progress line's share includes an inline shrink still running (it read 0 % through a 147-s first shrink),
    and an inline shrink ends once the run has spent FuzzConfig.shrink_share_cap of its budget shrinking."""
    import time

    from hybridfuzz.campaign.config import FuzzConfig
    from hybridfuzz.campaign.counting import Stats, shrink_share
    from hybridfuzz.campaign.shrinking import shrink_share_spent

    now = time.time()
    stats = Stats(started=now - 100, shrink_s=10.0)
    assert shrink_share(stats, 100) == 0.1
    stats.shrink_since = now - 20  # an inline shrink began 20 s ago
    assert 0.29 < shrink_share(stats, 100) < 0.31
    cfg = FuzzConfig(budget_s=1200, out_dir="unused", findings_dir="unused")
    assert cfg.shrink_share_cap == 0.25 and not shrink_share_spent(cfg, stats)  # 30 s of the 300 s share
    stats.shrink_s = 240.0  # 260 s with the shrink under way: 90 % of the share (SHARE_MARGIN) was 270
    assert not shrink_share_spent(cfg, stats)
    stats.shrink_s = 260.0
    assert shrink_share_spent(cfg, stats)
    stats.shrink_since = None  # no shrink under way: nothing to end
    assert not shrink_share_spent(cfg, stats)

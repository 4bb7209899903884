"""gpu/cpu_profile.py, the summary of a py-spy profile of a GPU campaign, on lines shaped like py-spy 0.4's raw
output of the H200 campaign of 2026-12-03 (results/2026-12-03-h200-vllm0.32.0-cpu-profile/README.md)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "gpu"))

import cpu_profile  # noqa: E402

SUP = 'process 1:"python3 -m hybridfuzz.cli campaign --engine gpu --dir /tmp/res/c32 --budget 600s"'
WORKER = 'process 2:"python3 -m hybridfuzz.cli campaign-worker --dir /tmp/res/c32 --index 4"'
SERVER = 'process 3:"python3 -m hybridfuzz.engines.forkserver"'
ENGINE = 'process 4:"python3 -m hybridfuzz.engines.forkserver"'
HELPER = 'process 5:"python3 -c import humming.ops.utils; humming.ops.utils.init_humming_launcher()"'
SERVE = "_run_module_as_main (<frozen runpy>:198);serve (hybridfuzz/engines/forkserver.py:317)"
COMPILING = ("_find_and_load (<frozen importlib._bootstrap>:1360);get_code (<frozen importlib._bootstrap_external>:1130);"
             "source_to_code (<frozen importlib._bootstrap_external>:1060)")
RAW = "\n".join([
    f"{SUP};{WORKER};{SERVER};{SERVE};{COMPILING} 30",  # the server importing vLLM before it forks
    f"{SUP};{WORKER};{SERVER};{ENGINE};{SERVE};_child (hybridfuzz/engines/forkserver.py:200);"
    "run_session (hybridfuzz/engines/offline.py:90);execute_model (vllm/v1/worker/gpu_model_runner.py:3000) 10",
    f"{SUP};{WORKER};{SERVER};{ENGINE};{HELPER};<module> (<string>:1);{COMPILING} 50",
    f"{SUP};{WORKER};main (hybridfuzz/cli/__init__.py:80);run_worker (hybridfuzz/campaign/worker.py:150);"
    "draw_ahead (hybridfuzz/campaign/loop.py:80);record (hypothesis/core.py:10) 10",
]) + "\n"


def test_records_keep_command_lines_that_hold_semicolons_apart_from_frames():
    recs = list(cpu_profile.records(RAW))
    assert [n for *_, n in recs] == [30, 10, 50, 10]
    cmds, frames, _ = recs[2]
    assert cmds[-1] == "python3 -c import humming.ops.utils; humming.ops.utils.init_humming_launcher()"
    assert frames[0] == "<module> (<string>:1)" and not any(f.startswith("process ") for f in frames)


def test_each_sample_goes_to_its_process_kind_and_stage():
    kinds = [cpu_profile.process_kind(c, f) for c, f, _ in cpu_profile.records(RAW)]
    assert kinds == ["fork server", "engine (forked)", "python -c import humming.ops.utils", "campaign worker"]
    stages = [cpu_profile.category(f) for _, f, _ in cpu_profile.records(RAW)]
    assert stages == ["import: compiling source (no .pyc)", "engine step", "import: compiling source (no .pyc)", "hypothesis"]


def test_the_summary_prints_shares_and_a_bad_path_is_one_line():
    text = cpu_profile.summarize(RAW, top=5)
    assert text.startswith("100 samples (CPU time only)")
    assert "   50.0 %  python -c import humming.ops.utils" in text and "   80.0 %  import: compiling source (no .pyc)" in text
    r = subprocess.run([sys.executable, os.path.join(ROOT, "gpu", "cpu_profile.py"), "/nonexistent/prof.txt"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == ["cpu_profile: /nonexistent/prof.txt: No such file or directory"]


def test_the_folded_profile_merges_stacks_by_kind_without_line_numbers():
    twice = RAW + RAW.replace(":1360)", ":1361)")  # the same stacks, one line number moved
    folded = cpu_profile.fold(twice, min_samples=21).splitlines()
    assert folded[0].startswith("# py-spy raw profile folded by gpu/cpu_profile.py: stacks of >= 21 samples, 160 of 200")
    assert folded[1].startswith("[python -c import humming.ops.utils];<module> (<string>);_find_and_load (<frozen importlib._bootstrap>)")
    assert folded[1].endswith(" 100") and folded[2].endswith(" 60") and len(folded) == 3  # the two stacks of 20 dropped

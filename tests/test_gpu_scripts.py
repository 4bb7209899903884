"""gpu/hf.sh and gpu/bg.sh, the wrappers for offline GPU hosts, exercised on CPU.

hf.sh is given a "site" that already carries its install marker, so it skips the bundle
install and runs against the vLLM installed here."""
import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HF = os.path.join(ROOT, "gpu", "hf.sh")
BG = os.path.join(ROOT, "gpu", "bg.sh")
SUM = "0123abcd" * 8

IMPORTS = ("import hybridfuzz, hybridfuzz.cli, hybridfuzz.strategies.platform, hybridfuzz.oracles.verdict, hybridfuzz.triage.shrink as r\n"
           "for m in (hybridfuzz, hybridfuzz.cli, hybridfuzz.strategies.platform, hybridfuzz.oracles.verdict, r): print(m.__file__)")


@pytest.fixture
def site(tmp_path):
    """(sum file, site dir) of a site that counts as installed."""
    sum_file = tmp_path / "sha256"
    sum_file.write_text(SUM + "\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / f".installed-{SUM}").touch()
    return str(sum_file), str(site)


def hf(sum_file, site, *args, env=None, cwd=None):
    return subprocess.run(["bash", HF, "/nonexistent", sum_file, site, "--", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd, timeout=600)


def json_object(text: str) -> dict:
    """The JSON object in output that may have log lines around it."""
    start, end = text.index("{"), text.rindex("}")
    return json.loads(text[start:end + 1])


@pytest.mark.engine
def test_hf_runs_a_hybridfuzz_command_from_the_snapshot(site):
    sum_file, site_dir = site
    r = hf(sum_file, site_dir, "hybridfuzz", "platform", "--json")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    info = json_object(r.stdout)
    assert info["device"] == "cpu" and info["vllm"] and "auto" in info["kv_cache_dtypes"]
    src = site_dir + ".src"
    assert os.path.isdir(os.path.join(src, "hybridfuzz")) and os.path.isdir(os.path.join(src, "corpus"))
    assert not os.path.exists(os.path.join(src, ".git")) and not os.path.exists(os.path.join(src, ".gpu"))
    # the installed layout: hybridfuzz.strategies is the checkout's strategies/, reachable in the snapshot
    assert any(os.path.isfile(os.path.join(src, d, "hybridfuzz", "strategies", "platform.py")) for d in (".", ".farm"))


def test_hf_snapshot_leaves_out_a_virtualenv_and_tool_caches_in_the_checkout(site, tmp_path):
    """A checkout with its own .venv (and Hypothesis', pytest's and ruff's caches) is snapshotted without them: the
    snapshot is what the command runs, and a venv in it cost a copy of the whole environment per site."""
    sum_file, site_dir = site
    co = tmp_path / "checkout"
    for d in ("gpu", "hybridfuzz", "strategies", "oracles", "corpus", ".venv/bin", ".hypothesis", ".pytest_cache",
              ".ruff_cache"):
        (co / d).mkdir(parents=True)
        (co / d / "__init__.py" if d in ("hybridfuzz", "strategies", "oracles") else co / d / "kept").write_text("")
    (co / "gpu" / "hf.sh").write_text(open(HF).read())
    (co / "pyproject.toml").write_text(open(os.path.join(ROOT, "pyproject.toml")).read())
    r = subprocess.run(["bash", str(co / "gpu" / "hf.sh"), "/nonexistent", sum_file, site_dir, "--", "python3", "-c",
                        "import os; print(sorted(os.listdir('.')))"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    listed = r.stdout.strip().splitlines()[-1]
    for kept in ("'corpus'", "'gpu'", "'hybridfuzz'", "'pyproject.toml'"):
        assert kept in listed, listed
    for left in ("'.venv'", "'.hypothesis'", "'.pytest_cache'", "'.ruff_cache'"):
        assert left not in listed, listed


def test_hf_imports_every_module_from_the_snapshot_and_keeps_it(site):
    """Not from the checkout (an editable install would otherwise serve hybridfuzz.strategies from there)."""
    sum_file, site_dir = site
    src = os.path.realpath(site_dir + ".src")
    r = hf(sum_file, site_dir, "python3", "-c", IMPORTS)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    files = r.stdout.split()
    assert len(files) == 5, r.stdout
    for f in files:
        assert os.path.realpath(f).startswith(src + os.sep), (f, os.path.realpath(f))

    marker = os.path.join(src, "marker")
    open(marker, "w").close()
    again = hf(sum_file, site_dir, "python3", "-c", "print('again')")
    assert again.returncode == 0 and again.stdout == "again\n", again.stderr[-2000:]
    assert os.path.exists(marker)  # a second run reuses the snapshot
    fresh = hf(sum_file, site_dir, "python3", "-c", "print('fresh')", env={"HF_RESNAPSHOT": "1"})
    assert fresh.returncode == 0 and fresh.stdout == "fresh\n", fresh.stderr[-2000:]
    assert not os.path.exists(marker)  # HF_RESNAPSHOT=1 takes a new one


def test_hf_gives_vllm_hybridfuzz_plugin_entry_point_from_the_snapshot(site):
    """vLLM loads plugins by entry point; hybridfuzz is not installed on a GPU host, so the snapshot carries a dist-info
    with pyproject.toml's entry points: else no engine there would apply HYBRIDFUZZ_FAULT or HYBRIDFUZZ_MEND."""
    sum_file, site_dir = site
    src = os.path.realpath(site_dir + ".src")
    r = hf(sum_file, site_dir, "python3", "-c", "import importlib.metadata as m\n"
           "for e in m.entry_points(group='vllm.general_plugins'): print(e.name, e.value, e.dist._path)")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    # a relative path is relative to the command's working directory, the snapshot
    ours = [line.split() for line in r.stdout.splitlines() if os.path.realpath(os.path.join(src, line.split()[-1])).startswith(src + os.sep)]
    assert [p[:2] for p in ours] == [["hybridfuzz_faults", "hybridfuzz.faults:register"]], r.stdout
    assert ours[0][2].endswith("hybridfuzz-0.1.0.dist-info"), r.stdout  # written from pyproject.toml, not a checkout's egg-info


def test_hf_leaves_bytecode_of_the_whole_snapshot_where_python_writes_none(site):
    """A host whose Python writes no .pyc (the H200's: every process compiled every source it imported, 2026-12-03)
    still gets bytecode for every module of the snapshot, imported or not, where imports through the link farm
    look for it."""
    sum_file, site_dir = site
    r = hf(sum_file, site_dir, "python3", "-c", "print('ok')", env={"PYTHONDONTWRITEBYTECODE": "1"})
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr[-3000:]
    tag = sys.implementation.cache_tag
    src = site_dir + ".src"
    for path in ("hybridfuzz/__pycache__/case", "hybridfuzz/campaign/__pycache__/loop", "hybridfuzz/export/__pycache__/issue",
                 "hybridfuzz/strategies/__pycache__/platform", "hybridfuzz/oracles/__pycache__/compare"):
        assert os.path.isfile(os.path.join(src, f"{path}.{tag}.pyc")), path


def _fake_bundle(tmp_path):
    """(parts dir, SHA256 file) of a bundle shaped like make-bundle.sh's: whl/ holding one tiny wheel, and a
    vllm-tree.tar.xz, as one tar cut into parts."""
    import hashlib
    import tarfile
    import zipfile

    b = tmp_path / "bundle"
    (b / "whl").mkdir(parents=True)
    with zipfile.ZipFile(b / "whl" / "tinymod-0.1-py3-none-any.whl", "w") as z:
        z.writestr("tinymod/__init__.py", "VALUE = 1\n")
        z.writestr("tinymod-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinymod\nVersion: 0.1\n")
        z.writestr("tinymod-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("tinymod-0.1.dist-info/RECORD", "")
    tree = tmp_path / "tree" / "tinytree"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text("X = 2\n")
    with tarfile.open(b / "vllm-tree.tar.xz", "w:xz") as t:
        t.add(tree, arcname="tinytree")
    with tarfile.open(tmp_path / "bundle.tar", "w") as t:
        for name in ("whl", "vllm-tree.tar.xz"):
            t.add(b / name, arcname=name)
    parts = tmp_path / "parts"
    parts.mkdir()
    data = (tmp_path / "bundle.tar").read_bytes()
    (parts / "part-000").write_bytes(data[:len(data) // 2])
    (parts / "part-001").write_bytes(data[len(data) // 2:])
    (tmp_path / "sha256").write_text(hashlib.sha256(data).hexdigest() + "\n")
    return str(parts), str(tmp_path / "sha256")


@pytest.mark.engine
def test_install_on_host_reads_parts_as_they_arrive(tmp_path):
    """HF_PARTS_COUNT: the install starts before the parts are all there (one device call carries one part) and
    reads each, in order, once it is moved into place; a part that never comes fails in one line naming it."""
    parts, sha = _fake_bundle(tmp_path)
    staged = tmp_path / "staged"
    os.rename(parts, staged)
    os.mkdir(parts)
    target = tmp_path / "site"
    script = os.path.join(ROOT, "gpu", "install-on-host.sh")
    proc = subprocess.Popen(["bash", script, parts, sha, str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "HF_PARTS_COUNT": "2"})
    for name in ("part-000", "part-001"):
        time.sleep(2)
        assert proc.poll() is None, "the install ended before all parts arrived"
        os.rename(staged / name, os.path.join(parts, name))
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err[-3000:]
    assert (target / "tinymod" / "__init__.py").is_file()

    r = subprocess.run(["bash", script, parts, sha, str(tmp_path / "site2")], capture_output=True, text=True,
                       env={**os.environ, "HF_PARTS_COUNT": "3", "HF_PARTS_WAIT_S": "2"}, timeout=120)
    assert r.returncode != 0
    assert "part-002 did not arrive within 2 s" in r.stderr, r.stderr


@pytest.mark.engine
def test_install_on_host_leaves_bytecode_where_python_writes_none(tmp_path):
    """install-on-host.sh compiles what it installed, wheels and vLLM's tree alike, once: on the H200 (2026-12-03)
    the host's Python wrote no .pyc, and 55 % of the host's CPU went to compiling sources at import."""
    parts, sha = _fake_bundle(tmp_path)
    target = tmp_path / "site"
    r = subprocess.run(["bash", os.path.join(ROOT, "gpu", "install-on-host.sh"), parts, sha, str(target)], capture_output=True,
                       text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "bytecode: " in r.stdout and " .pyc files in " in r.stdout, r.stdout
    tag = sys.implementation.cache_tag
    for module in ("tinymod", "tinytree"):
        assert (target / module / "__pycache__" / f"__init__.{tag}.pyc").is_file(), module


def test_hf_without_an_installed_site_fails_and_runs_nothing(tmp_path):
    sum_file = tmp_path / "sha256"
    sum_file.write_text(SUM + "\n")
    site = tmp_path / "site"
    site.mkdir()  # no .installed-<sum> marker: hf.sh tries to install from PARTS_DIR, which does not exist
    r = hf(str(sum_file), str(site), "python3", "-c", "print('RAN')")
    assert r.returncode != 0
    assert "RAN" not in r.stdout
    assert not (site / f".installed-{SUM}").exists()


def test_hf_accepts_a_relative_site(site, tmp_path):
    sum_file, _ = site
    r = hf(sum_file, "site", "python3", "-c", IMPORTS, cwd=str(tmp_path))
    src = os.path.realpath(str(tmp_path / "site.src"))
    assert r.returncode == 0, r.stderr[-3000:]
    files = r.stdout.split()
    assert len(files) == 5 and all(os.path.realpath(f).startswith(src + os.sep) for f in files), r.stdout


def wait_for_rc(path: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            text = open(path).read()
            if text.strip():
                return text.strip()
        time.sleep(0.1)
    raise AssertionError(f"{path} did not appear within {timeout}s")


def bg(res, *args):
    return subprocess.run(["bash", BG, *args], capture_output=True, text=True, env={**os.environ, "HF_RES": str(res)}, timeout=60)


def test_bg_records_output_and_exit_status(tmp_path):
    res = tmp_path / "res"
    r = bg(res, "job", "bash", "-c", "echo hi; exit 3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("started job (pid ")
    assert wait_for_rc(str(res / "job.rc")) == "3"
    assert "hi" in (res / "job.log").read_text().split()


def test_bg_detaches_and_clears_a_stale_status(tmp_path):
    res = tmp_path / "res"
    res.mkdir()
    (res / "job.rc").write_text("0\n")  # from an earlier run of the same name
    r = bg(res, "job", "bash", "-c", "sleep 2; echo done; exit 5")
    assert r.returncode == 0, r.stderr
    assert not (res / "job.rc").exists()  # a poller cannot mistake the old status for this run's
    pid = int(r.stdout.split("(pid ")[1].split(")")[0])
    # its own session (so it outlives the caller's); setsid runs in the child just after bg.sh returns
    deadline = time.monotonic() + 1.5
    while os.getsid(pid) == os.getsid(0) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert os.getsid(pid) == pid != os.getsid(0)
    assert wait_for_rc(str(res / "job.rc")) == "5"
    assert (res / "job.log").read_text() == "done\n"


def test_pack_results_brings_back_what_campaign_status_reads(tmp_path):
    res, out = tmp_path / "res", tmp_path / "out"
    for sub in ("database", "state", "refusals", "findings", "workers/0"):
        (res / "c26" / sub).mkdir(parents=True)
    (res / "c26" / "database" / "big").write_text("x" * 1000)
    (res / "c26" / "state" / "sig.json").write_text("{}")
    (res / "c26" / "refusals" / "k.json").write_text("{}")
    (res / "c26" / "campaign.json").write_text("{}")
    (res / "c26" / "workers" / "0" / "events.jsonl").write_text("")
    r = subprocess.run(["bash", os.path.join(ROOT, "gpu", "pack-results.sh"), str(res), str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for kept in ("state/sig.json", "refusals/k.json", "campaign.json", "workers/0/events.jsonl"):
        assert (out / "c26" / kept).exists(), kept
    assert not (out / "c26" / "database").exists()


@pytest.mark.engine
def test_run_campaign_reaches_hybridfuzz_and_leaves_its_log(site, tmp_path):
    """gpu/run-campaign.sh on a machine without CUDA: the plumbing (site, snapshot, output dir,
    fuzz.log) works and hybridfuzz refuses --engine gpu in one line with exit 3."""
    sum_file, site_dir = site
    out = tmp_path / "run"
    r = subprocess.run(["bash", os.path.join(ROOT, "gpu", "run-campaign.sh"), "/nonexistent", sum_file, "30s", str(out),
                        "--eager-only"], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "VLLM_SITE": site_dir})
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]
    log = (out / "fuzz.log").read_text()
    assert "--engine gpu: this machine's vLLM has no CUDA device" in log
    assert "Traceback" not in log


# ---------------------------------------------------------------- gpu/make-bundle.sh: what rides along

def _bundle_plan():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bundle_plan", os.path.join(ROOT, "gpu", "bundle_plan.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bundle_plan"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _pins(plan, name):
    with open(os.path.join(ROOT, "tests", "data", "bundle", name)) as f:
        return plan.parse_pins(f.read())


@pytest.mark.parametrize("version", ["0.26.0", "0.32.0"])
def test_bundle_plan_derives_riders_from_real_resolutions(version):
    """On uv's real resolutions (fixtures): vLLM 0.32.0 needs torch 2.13 with its triton, NCCL and torchvision
    (what shared/gpu/make-bundle.sh's hand table says), 0.26.0 runs on the host's torch 2.11."""
    plan = _bundle_plan()
    host = _pins(plan, "host-closure.txt")
    assert host["torch"] == "2.11.0" and host["triton"].startswith("3.6")
    decisions = {d.name: d for d in plan.decide(host, _pins(plan, f"vllm-{version}-closure.txt"))}
    riders = {d.name: d.version for d in decisions.values() if d.ride}
    assert "vllm" not in decisions  # vLLM itself travels as a slimmed tree
    if version == "0.32.0":
        assert {k: riders.get(k) for k in ("torch", "triton", "nvidia-nccl-cu13", "torchvision", "flashinfer-python")} == {
            "torch": "2.13.0", "triton": "3.7.1", "nvidia-nccl-cu13": "2.29.7", "torchvision": "0.28.0", "flashinfer-python": "0.7.0.post1"}
        assert decisions["nvidia-cublas"].why.startswith("the host's 13.1.0.3")  # same CUDA major: the host's copy serves
    else:
        assert "torch" not in riders and "triton" not in riders and "nvidia-nccl-cu13" not in riders
        assert riders["flashinfer-python"] == "0.6.14"
    for name in ("nvidia-cutlass-dsl", "torchaudio", "nvidia-cuda-nvcc"):
        assert not decisions[name].ride and decisions[name].why.startswith("never bundled")
    with open("/work/shared/gpu/host-deps.txt" if os.path.exists("/work/shared/gpu/host-deps.txt") else os.devnull) as f:
        hand = plan.parse_pins(f.read())
    missing = [n for n in hand if n in decisions and n not in riders and n not in host]
    assert not missing, missing  # every hand-listed dependency the host lacks is derived too


def test_make_bundle_refuses_bad_arguments_in_one_line(tmp_path):
    sh = os.path.join(ROOT, "gpu", "make-bundle.sh")
    r = subprocess.run(["bash", sh, "0.32.0", str(tmp_path / "b"), "6x"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == ["make-bundle.sh: PART_MB must be a whole number of MiB, got '6x'"]
    r = subprocess.run(["bash", sh], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "usage: make-bundle.sh VLLM_VERSION OUT_DIR [PART_MB]" in r.stderr
    r = subprocess.run(["bash", sh, "0.34.0", str(tmp_path / "b"), "--beside", str(tmp_path / "none")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [f"make-bundle.sh: --beside {tmp_path / 'none'} has no plan.txt"]
    r = subprocess.run(["bash", sh, "0.34.0", str(tmp_path / "b"), "--override", "flashinfer-python"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--override wants PKG==VERSION, got 'flashinfer-python'" in r.stderr, r.stderr


def test_a_bundle_beside_another_installs_on_its_site_and_names_its_overrides(tmp_path):
    """make-bundle.sh --beside: a bundle that carries no wheel of its own installs (its vLLM tree only), keeps its
    bundle-info.txt, and hf.sh puts the base site on the path (HF_BASE_SITE) and exports the pin overrides a run's
    summary names (hybridfuzz/vllm_facts.py PIN_OVERRIDES_ENV)."""
    import hashlib
    import tarfile

    b = tmp_path / "b"
    (b / "whl").mkdir(parents=True)
    tree = tmp_path / "tree" / "tinytree"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text("X = 2\n")
    with tarfile.open(b / "vllm-tree.tar.xz", "w:xz") as t:
        t.add(tree, arcname="tinytree")
    (b / "bundle-info.txt").write_text("vllm==0.34.0\noverride flashinfer-python==0.7.4\nbeside 0123\n")
    with tarfile.open(tmp_path / "bundle.tar", "w") as t:
        for name in ("whl", "vllm-tree.tar.xz", "bundle-info.txt"):
            t.add(b / name, arcname=name)
    (tmp_path / "parts").mkdir()
    data = (tmp_path / "bundle.tar").read_bytes()
    (tmp_path / "parts" / "part-000").write_bytes(data)
    (tmp_path / "sha").write_text(hashlib.sha256(data).hexdigest() + "\n")
    base = tmp_path / "base"
    (base / "basemod").mkdir(parents=True)
    (base / "basemod" / "__init__.py").write_text("Y = 3\n")
    r = subprocess.run(["bash", HF, str(tmp_path / "parts"), str(tmp_path / "sha"), str(tmp_path / "site34"), "--", "python3", "-c",
                        "import os, tinytree, basemod; print(os.environ['HYBRIDFUZZ_PIN_OVERRIDES'], tinytree.X, basemod.Y)"],
                       capture_output=True, text=True, env={**os.environ, "HF_BASE_SITE": str(base)}, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "flashinfer-python==0.7.4 2 3", r.stdout
    assert (tmp_path / "site34" / "bundle-info.txt").read_text().startswith("vllm==0.34.0")


def test_host_spec_names_what_the_real_host_lacks():
    """vLLM 0.33.0's first start on the H200 failed without pydantic, which the resolved host closure claimed."""
    plan = _bundle_plan()
    with open(os.path.join(ROOT, "gpu", "host-spec.txt")) as f:
        absent = plan.absent_on_host(f.read())
    assert "pydantic" in absent and "pydantic-core" in absent
    host = {"pydantic": "2.14.4", "torch": "2.11.0"}
    for name in absent:
        host.pop(name, None)
    decisions = {d.name: d.ride for d in plan.decide(host, {"pydantic": "2.14.4", "torch": "2.11.0"})}
    assert decisions["pydantic"] and not decisions["torch"]


def test_kernel_caches_survive_a_save_and_restore_on_another_home(tmp_path):
    """gpu/caches.sh carries a warm host's Triton and FlashInfer caches to a fresh host in 15 MiB parts (a fresh H200
    compiled for minutes, 2026-12-01); what comes out on the other side is byte for byte what went in."""
    caches = os.path.join(ROOT, "gpu", "caches.sh")
    warm, fresh, parts = tmp_path / "warm", tmp_path / "fresh", tmp_path / "parts"
    kernel = os.urandom(20 * 1024 * 1024)  # over one part
    (warm / ".triton" / "cache" / "ab").mkdir(parents=True)
    (warm / ".triton" / "cache" / "ab" / "k.cubin").write_bytes(kernel)
    (warm / ".cache" / "flashinfer" / "0.6").mkdir(parents=True)
    (warm / ".cache" / "flashinfer" / "0.6" / "m.so").write_bytes(b"jit")
    saved = subprocess.run(["bash", caches, "save", str(parts)], env={**os.environ, "HOME": str(warm)}, capture_output=True, text=True)
    assert saved.returncode == 0, saved.stderr
    assert sorted(p.name for p in parts.iterdir()) == ["caches.sha256", "fi.tgz.part-aa", "tri.tgz.part-aa", "tri.tgz.part-ab"]
    assert all(p.stat().st_size <= 15 * 1024 * 1024 for p in parts.iterdir())
    fresh.mkdir()
    restored = subprocess.run(["bash", caches, "restore", str(parts)], env={**os.environ, "HOME": str(fresh)}, capture_output=True, text=True)
    assert restored.returncode == 0, restored.stderr
    assert (fresh / ".triton" / "cache" / "ab" / "k.cubin").read_bytes() == kernel
    assert (fresh / ".cache" / "flashinfer" / "0.6" / "m.so").read_bytes() == b"jit"


@pytest.fixture
def tagged_site():
    """The TAG of a site that counts as installed where gpu/timed-campaign.sh looks for it (/tmp/shaTAG,
    /tmp/siteTAG), removed afterwards."""
    tag = f"t{os.getpid()}"
    sum_file, site = f"/tmp/sha{tag}", f"/tmp/site{tag}"
    with open(sum_file, "w") as f:
        f.write(SUM + "\n")
    os.makedirs(site, exist_ok=True)
    open(os.path.join(site, f".installed-{SUM}"), "w").close()
    yield tag
    subprocess.run(["rm", "-rf", sum_file, site, site + ".src"])


def test_timed_campaign_logs_its_run_and_leaves_a_status_file(tmp_path, tagged_site):
    """gpu/timed-campaign.sh on CPU: `campaign --engine gpu` refuses at once here (exit 3, no GPU); the wrapper
    still records the start and the exit status in chain.log and writes campaign-status's JSON beside it. (A budget
    of 60 s, not 5: the wrapper's timeout covers hf.sh's first snapshot and bytecode too, and under load, beside a
    CI run, 6 s ran out before the refusal, 2026-12-03.)"""
    tag = tagged_site
    res = tmp_path / "res"
    r = subprocess.run(["bash", os.path.join(ROOT, "gpu", "timed-campaign.sh"), tag, "c", "60", "1"], capture_output=True,
                       text=True, env={**os.environ, "HF_RES": str(res)}, timeout=600)
    assert r.returncode == 3, r.stderr  # the campaign's own status: no GPU here
    chain = (res / "chain.log").read_text().splitlines()
    assert chain[0].startswith("c start ") and chain[1].startswith("c rc 3 "), chain
    assert "--engine gpu" in (res / "c.log").read_text()
    assert (res / "c-status.json").exists()


FAKE_PYSPY = """#!/usr/bin/env bash
# stands in for py-spy: records its arguments, waits for the profiled process to end, then writes a raw profile
echo "$@" > "$(dirname "$0")/args"
while [ $# -gt 0 ]; do case $1 in --pid) pid=$2; shift ;; -o) out=$2; shift ;; esac; shift; done
while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
printf 'process %s:"python3 -m hybridfuzz.cli campaign";main (hybridfuzz/cli/__init__.py:80) 7\\n' "$pid" > "$out"
"""


def test_timed_campaign_profiles_the_campaign_when_given_py_spy(tmp_path, tagged_site):
    """HF_PYSPY: the campaign's own Python process is profiled with its subprocesses, and the profile comes back
    summarized, folded and gzipped where pack-results.sh picks it up."""
    tag = tagged_site
    spy = tmp_path / "bin" / "py-spy"
    spy.parent.mkdir()
    spy.write_text(FAKE_PYSPY)
    spy.chmod(0o755)
    res = tmp_path / "res"
    r = subprocess.run(["bash", os.path.join(ROOT, "gpu", "timed-campaign.sh"), tag, "c", "60", "1"], capture_output=True,
                       text=True, env={**os.environ, "HF_RES": str(res), "HF_PYSPY": str(spy)}, timeout=600)
    assert r.returncode == 3, r.stderr  # the campaign's own status: no GPU here
    args = (spy.parent / "args").read_text().split()
    assert args[:2] == ["record", "--pid"] and {"--subprocesses", "--nonblocking", "raw"} <= set(args), args
    assert args[args.index("--rate") + 1] == "5"
    chain = (res / "chain.log").read_text()
    assert f"c py-spy on pid {args[2]} " in chain and "c rc 3 " in chain, chain
    assert (res / "c-prof-summary.txt").read_text().startswith("7 samples (CPU time only)")
    assert (res / "c-prof.txt.gz").exists() and (res / "c-prof-folded.txt.gz").exists()
    out = tmp_path / "out"
    subprocess.run(["bash", os.path.join(ROOT, "gpu", "pack-results.sh"), str(res), str(out)], capture_output=True, timeout=60)
    assert (out / "c-prof-summary.txt").exists() and (out / "c-prof-folded.txt.gz").exists()


def test_kernel_caches_save_only_what_the_host_compiled_since_its_restore(tmp_path):
    """save-new: the files a host wrote after its restore, and nothing it was given; restoring the whole save and
    then the new files gives a third host both (an H200 of 2026-12-01/02, vLLM 0.26.0 and 0.32.0, compiled about 100 MB on top of its
    restored caches, and lost them with the host)."""
    caches = os.path.join(ROOT, "gpu", "caches.sh")
    warm, host, third = tmp_path / "warm", tmp_path / "host", tmp_path / "third"
    base, new = tmp_path / "base", tmp_path / "new"
    (warm / ".triton" / "cache" / "ab").mkdir(parents=True)
    (warm / ".triton" / "cache" / "ab" / "old.cubin").write_bytes(b"old")
    (warm / ".cache" / "flashinfer").mkdir(parents=True)

    def run(mode, home, *dirs):
        r = subprocess.run(["bash", caches, mode, *map(str, dirs)], env={**os.environ, "HOME": str(home)}, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r

    run("save", warm, base)
    host.mkdir()
    nothing = subprocess.run(["bash", caches, "save-new", str(new)], env={**os.environ, "HOME": str(host)}, capture_output=True, text=True)
    assert nothing.returncode == 2 and "nothing was restored" in nothing.stderr
    run("restore", host, base)
    (host / ".triton" / "cache" / "cd").mkdir(parents=True)
    (host / ".triton" / "cache" / "cd" / "jit.cubin").write_bytes(b"compiled here")
    (host / ".cache" / "flashinfer" / "m.so").write_bytes(b"fi jit")
    run("save-new", host, new)
    listed = subprocess.run(f"cat {new}/tri.tgz.part-* | tar -tzf -; cat {new}/fi.tgz.part-* | tar -tzf -", shell=True,
                            capture_output=True, text=True).stdout.split()
    assert sorted(listed) == ["cache/cd/jit.cubin", "flashinfer/m.so"]  # not the restored old.cubin
    third.mkdir()
    run("restore", third, base, new)
    assert (third / ".triton" / "cache" / "ab" / "old.cubin").read_bytes() == b"old"
    assert (third / ".triton" / "cache" / "cd" / "jit.cubin").read_bytes() == b"compiled here"
    assert (third / ".cache" / "flashinfer" / "m.so").read_bytes() == b"fi jit"


def test_unpack_wheels_installs_what_pip_installs_executable_bits_and_data_schemes_too(tmp_path):
    """gpu/unpack_wheels.py stands in for `pip install --no-deps --target` on the GPU host (pip took 62 of 96 s of
    installing 0.33.0's bundle here, one wheel at a time): the same importable files, an executable still
    executable (triton's ptxas), a wheel's .data/platlib at the root as pip puts it, and no .data folder left."""
    import stat
    import zipfile

    wheel = tmp_path / "tool-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("tool/__init__.py", "VALUE = 1\n")
        exe = zipfile.ZipInfo("tool/bin/ptxas")
        exe.external_attr = (stat.S_IFREG | 0o755) << 16
        z.writestr(exe, "#!/bin/sh\necho ok\n")
        z.writestr("tool-0.1.data/platlib/tool_ext/__init__.py", "EXT = 2\n")
        z.writestr("tool-0.1.data/scripts/tool-cli", "#!/bin/sh\n")
        z.writestr("tool-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: tool\nVersion: 0.1\n")
        z.writestr("tool-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("tool-0.1.dist-info/RECORD", "")
    ours, pips = tmp_path / "ours", tmp_path / "pip"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "gpu", "unpack_wheels.py"), str(ours), str(wheel)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target", str(pips), str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr

    def importable(root):
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.parts[len(root.parts)] == "bin"
                      and p.name not in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"))

    assert importable(ours) == importable(pips)
    assert (ours / "tool_ext" / "__init__.py").is_file() and not list(ours.glob("*.data"))
    assert os.access(ours / "tool" / "bin" / "ptxas", os.X_OK) and not os.access(ours / "tool" / "__init__.py", os.X_OK)


# ---------------------------------------------------------------- gpu/plan.sh: a run plan's helpers

FAKE_LOST_GPU = """#!/usr/bin/env bash
# stands in for nvidia-smi on a GPU that needs a reset, as the H100 of 2026-12-05 answered after Xid 154
if [ "$1" = -q ]; then echo "    Product Brand : GPU requires reset"; else echo "[N/A], 865, [GPU requires reset], [GPU requires reset], [N/A]"; fi
"""


def _plan(tmp_path, tag, script, path=None, **env_vars):
    env = {**os.environ, "HF_RES": str(tmp_path / "res"), **({"PATH": f"{path}:{os.environ['PATH']}"} if path else {}),
           **env_vars}
    return subprocess.run(["bash", "-c", f"here={ROOT}; source {ROOT}/gpu/plan.sh {tag}; {script}"], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=900)


def test_plan_sampler_interrupts_the_shrinks_when_the_gpu_needs_a_reset(tmp_path, tagged_site):
    """The sampler marks the chain "GPU LOST", saves `nvidia-smi -q`, and interrupts every shrink of the plan (on the
    H100 of 2026-12-05 the shrinks ran on against a lost GPU until their "host lost" rule stopped them)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_LOST_GPU)
    (bin_dir / "nvidia-smi").chmod(0o755)
    res = tmp_path / "res"
    # a process with a plan's shrink's command line (given by the environment: in the script's own text the
    # sampler's pkill would match this test's shell too); like hybridfuzz's CLI it installs its own SIGINT handler,
    # since a job started in the background of a non-interactive shell inherits SIGINT ignored
    # The interpreter by its path: a `python3` that is a launcher (a pyenv shim) execs the real one under its own name.
    r = _plan(tmp_path, tagged_site, "plan_sampler; (exec -a \"$SHRINK\" \"$PY\" -c \"$STAND_IN\") & s=$!; t0=$SECONDS; "
                                     "wait $s; echo \"shrink ended after $((SECONDS - t0)) s\"; plan_gpu_lost && echo lost; plan_end",
               path=str(bin_dir), SHRINK=f"python3 -m hybridfuzz.cli shrink {res}/shrink/x.yaml", PY=sys.executable,
               STAND_IN="import signal, time; signal.signal(signal.SIGINT, signal.default_int_handler); time.sleep(120)")
    assert r.returncode == 0, r.stderr
    assert "lost" in r.stdout.split() and int(r.stdout.split("after ")[1].split()[0]) < 60, r.stdout
    chain = (res / "chain.log").read_text()
    assert "GPU LOST: [N/A], 865, [GPU requires reset]" in chain and "all done" in chain, chain
    assert "GPU requires reset" in (res / "gpu-fault.txt").read_text()


@pytest.mark.engine
def test_plan_shrink_job_shrinks_a_copy_of_a_corpus_case_through_the_site(tmp_path, tagged_site):
    """shrink_job copies corpus/gpu/NAME-vllm-*.yaml, runs `hybridfuzz shrink` on it through hf.sh and logs both ends
    in chain.log; on this CPU the GPU case does not show its recorded finding, so nothing is written (exit 1)."""
    r = _plan(tmp_path, tagged_site, "shrink_job ef8dca8d 1 20 falcon-h1-graphs-one-token-prompt-repeat-differs; "
                                     "wait \"${jobs[@]}\"")
    assert r.returncode == 0, r.stderr
    res = tmp_path / "res"
    chain = (res / "chain.log").read_text()
    assert "shrink-ef8dca8d start budget 20s workers 1" in chain and "shrink-ef8dca8d rc 1" in chain, chain
    out = json_object((res / "shrink" / "ef8dca8d.json").read_text())
    assert out["written"] is None and out["target"] == "self_consistency:repeat-differs:471e1a80", out
    assert "its recorded self_consistency:repeat-differs:471e1a80" in (res / "shrink" / "ef8dca8d.log").read_text()


def test_plan_shrink_alone_waits_for_the_others_and_keeps_to_the_deadline(tmp_path, tagged_site):
    """shrink_alone runs last, with the GPU to itself: it waits for the plan's other jobs, and starts no shrink when the
    deadline (PLAN_LEFT from the sourcing) leaves less than its confirmation and 180 s, or when the GPU is lost."""
    res = tmp_path / "res"
    r = _plan(tmp_path, tagged_site, "(sleep 2; say other-done) & jobs+=($!); shrink_alone 11c48cea no-such-case; "
                                     "share=50 shrink_alone 11c48cea no-such-case; "
                                     "say 'GPU LOST: test'; shrink_alone 11c48cea no-such-case", PLAN_LEFT="300")
    assert r.returncode == 0, r.stderr
    lines = [ln.rsplit(" ", 1)[0] for ln in (res / "chain.log").read_text().splitlines()]
    assert lines[0] == "other-done" and lines[1].startswith("shrink-11c48cea skipped: ") and lines[1].endswith("s left")
    whole = int(lines[1].split(": ")[1][:-len("s left")])
    assert whole <= 300 - 150 - 2, lines
    # share=50: half of what is left (a second may pass between the two)
    assert lines[2] in (f"shrink-11c48cea skipped: {whole // 2}s left", f"shrink-11c48cea skipped: {(whole - 1) // 2}s left"), lines
    assert lines[4] == "shrink-11c48cea skipped: the GPU is lost", lines
    assert not (res / "shrink" / "11c48cea.yaml").exists()


def test_plan_replay_file_runs_a_copy_of_any_case_file_under_the_given_variables(tmp_path, tagged_site):
    """replay_file SIG RUNS PATH NAME=VALUE: a decisive replay under a mend (as in the H100 plan of 2026-12-06) reaches hybridfuzz with the
    variable set: a mend name that does not exist is refused in one line before any engine, naming the variable.
    replay_job is replay_file of the newest corpus/gpu/NAME-vllm-*.yaml."""
    res = tmp_path / "res"
    case = os.path.join(ROOT, "tests/data/gpu-plan/zamba2-int4-as-found.yaml")
    r = _plan(tmp_path, tagged_site, f"replay_file x 1 {case} HYBRIDFUZZ_MEND=no-such-mend; wait \"${{jobs[@]}}\"; "
                                     "corpus_case falcon-h1-graphs-one-token-prompt-repeat-differs")
    assert r.returncode == 0, r.stderr
    chain = (res / "chain.log").read_text().splitlines()
    assert chain[0].startswith("replay-x start HYBRIDFUZZ_MEND=no-such-mend ") and chain[1].startswith("replay-x rc 2 "), chain
    log = (res / "replay" / "x.log").read_text()
    assert "HYBRIDFUZZ_MEND" in log and "no-such-mend" in log and "Traceback" not in log, log[-2000:]
    assert (res / "replay" / "x.yaml").read_text() == open(case).read()
    assert r.stdout.strip().endswith("corpus/gpu/falcon-h1-graphs-one-token-prompt-repeat-differs-vllm-0.33.0.yaml"), r.stdout

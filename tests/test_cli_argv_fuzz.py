"""Every command, every kind of bad input: one line and a documented exit code, never a traceback.

Hypothesis builds argv for every subcommand from the parser's own flag names and choices, real
corpus cases (copies), run directories and bad files (a directory, a missing path, an
unreadable file, binary junk, YAML that is no case, a component case where an engine case is
needed), and runs ``cli.main`` in this process. No engine starts: a command that would start
one (replay, fuzz, shrink, campaign, bench, ...) always gets one poison that must stop it
before any work (an unknown flag, a junk value for a typed flag, or a bad case file), and then
must exit 2 with one ``hybridfuzz:`` line. The other commands (corpus, report, export,
campaign-status, platform) also get valid invocations and must exit with a code they document.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from demo_runs import write_demo_campaign, write_demo_fuzz
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridfuzz import cli
from hybridfuzz.cli import errors

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Commands that run to completion without an engine, a download or minutes of work.
SAFE = {"corpus", "report", "export", "campaign-status", "platform"}
NEVER = {"export": {"--run"}}  # runs the reproducer: an engine
ALWAYS = {"export": ["--no-collect-env"]}  # python -m vllm.collect_env: 15 s per run
# Examples per command: parse errors take milliseconds; corpus and platform runs about a second each.
EXAMPLES = {"corpus": 12, "platform": 10, "export": 25, "report": 30, "campaign-status": 30}
JUNK = ["", "-", "--", "x", "0", "-1", "1e999", "nan", "🙂", "--=", "-h5", "a,b", "a" * 300, "\x7f"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A working directory with copies of the corpus, run directories and bad files."""
    root = tmp_path_factory.mktemp("argv")
    shutil.copytree(os.path.join(REPO, "corpus"), root / "corpus")
    good = sorted(str(p) for p in (root / "corpus").rglob("*.yaml"))
    component = [p for p in good if "/components/" in p]
    bad = {"dir": root / "a-dir", "missing": root / "missing.yaml", "unreadable": root / "unreadable.yaml",
           "binary": root / "binary.yaml", "not-a-case": root / "list.yaml", "empty": root / "empty.yaml",
           "broken-link": root / "broken-link.yaml"}
    bad["dir"].mkdir()
    bad["unreadable"].write_text("model: {layers: [full_attention]}\n")
    bad["unreadable"].chmod(0)  # unreadable for anyone but root
    bad["binary"].write_bytes(bytes(range(256)) * 4)
    bad["not-a-case"].write_text("- 1\n- 2\n")
    bad["empty"].write_text("")
    bad["broken-link"].symlink_to(root / "nowhere")
    runs = [write_demo_fuzz(str(root / "fuzz-run"), n=30), write_demo_campaign(str(root / "campaign-run"), n=30)]
    outputs = [str(root / "out" / "x.md"), str(root / "out.html"), "/proc/no/such/dir/x", str(bad["dir"])]
    return {"root": root, "good": good, "component": component, "bad": [str(p) for p in bad.values()], "runs": runs,
            "outputs": outputs}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


PARSERS = _subparsers(cli.build_parser())
MODULES = {m.NAME: m for m in cli.command_modules()}


def _flags(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if a.option_strings and "-h" not in a.option_strings]


def _poisons(name: str, world) -> st.SearchStrategy[list[str]]:
    """Tokens that stop the command before it starts any work."""
    typed = [a for a in _flags(PARSERS[name]) if a.type is not None or a.choices]
    options = [st.just(["--no-such-flag"]), st.sampled_from(JUNK).map(lambda j: ["--no-such-flag=" + j])]
    if typed:
        bad_values = ["x", "", "0x", "🙂"]  # invalid for every type and every choice list here
        options.append(st.tuples(st.sampled_from(typed), st.sampled_from(bad_values)).map(lambda t: [t[0].option_strings[-1], t[1]]))
    return st.one_of(options)


def _tokens(name: str, world) -> st.SearchStrategy[str]:
    flags = [f for a in _flags(PARSERS[name]) for f in a.option_strings if f not in NEVER.get(name, ())]
    choices = sorted({str(c) for a in PARSERS[name]._actions if a.choices and not isinstance(a.choices, dict) for c in a.choices})
    paths = world["bad"] + world["outputs"]
    if name in SAFE or name == "shrink":
        paths = paths + world["good"] + world["runs"]
    return st.one_of(st.sampled_from(flags), st.sampled_from(paths), st.sampled_from(JUNK),
                     *([st.sampled_from(choices)] if choices else []), st.integers(-2, 10).map(str))


def _argv(name: str, world) -> st.SearchStrategy[tuple[list[str], bool]]:
    """(argv, poisoned)"""
    body = st.lists(_tokens(name, world), max_size=7)
    if name in SAFE:
        poison = st.one_of(st.just(None), _poisons(name, world))
    elif name == "shrink":  # a bad case file in the positional slot also stops it
        bad_cases = world["bad"] + world["component"]
        poison = st.one_of(_poisons(name, world), st.sampled_from(bad_cases).map(lambda p: ["--", p]))
    else:
        poison = _poisons(name, world)

    @st.composite
    def build(draw):
        tokens = draw(body)
        p = draw(poison)
        if name == "shrink" and p and p[0] == "--":
            # the bad case is the only positional: no other token may fill the slot first
            flags_only = [t for t in tokens if t.startswith("-") and t not in ("-", "--")]
            return [name, *flags_only, *ALWAYS.get(name, []), *p], True
        at = draw(st.integers(0, len(tokens)))
        if p:
            tokens = tokens[:at] + p + tokens[at:]
        return [name, *tokens, *ALWAYS.get(name, [])], p is not None

    return build()


def _run(argv: list[str], cwd) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
    finally:
        os.chdir(old)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_bad_argv_gives_one_line_and_a_documented_exit_code(name, world):
    allowed = set(cli.exits(MODULES[name]))

    @settings(max_examples=EXAMPLES.get(name, 60), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_argv(name, world))
    def check(drawn):
        argv, poisoned = drawn
        code, out, err = _run(argv, world["root"])
        assert "Traceback" not in out + err, (argv, err[-2000:])
        assert code in allowed, (argv, code, err[-500:])
        if poisoned:
            assert code == errors.USAGE, (argv, code, out[-300:], err[-500:])
        if code == errors.USAGE:
            ours = [ln for ln in err.splitlines() if ln.startswith("hybridfuzz:")]
            assert len(ours) == 1, (argv, err)

    check()


def test_every_command_documents_its_exit_codes():
    for name, m in MODULES.items():
        codes = cli.exits(m)
        assert {errors.USAGE, errors.INTERRUPTED} <= set(codes) and errors.INTERNAL not in codes, name
        assert "Exit codes: " in PARSERS[name].epilog, name


def test_internal_commands_are_hidden_from_help():
    text = cli.build_parser().format_help()
    for name, m in MODULES.items():
        assert (name in text) == bool(m.HELP), name


def _default_sigint() -> None:
    """In the child: Ctrl-C as a terminal delivers it. A test run started as a background job ignores SIGINT,
    the ignore is inherited through exec, and Python then installs no handler: the command would never see it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow  # a CLI or campaign in its own process: over a minute
def test_ctrl_c_is_130_and_one_line(tmp_path):
    """A real SIGINT while check-components imports vLLM (engine-free): exit 130, no traceback."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "hybridfuzz.cli", "check-components", "--examples", "1000", "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env, preexec_fn=_default_sigint)
    # Ctrl-C once the command is running (its first stderr line: vLLM's import log), not at a fixed time: a
    # SIGINT before the interpreter reaches hybridfuzz's handler is Python's own (seen under load after 3 s).
    first = proc.stderr.readline()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    err = first + err
    assert proc.returncode == errors.INTERRUPTED, (proc.returncode, err[-2000:])
    assert "Traceback" not in out + err, err[-2000:]
    assert [ln for ln in err.splitlines() if ln.startswith("hybridfuzz:")] == ["hybridfuzz: interrupted"], err[-2000:]


_CTRL_C_IN_GC_CALLBACK = """
import gc, signal, sys
from hybridfuzz import cli
fired = []
def ctrl_c_inside_gc(phase, info):  # the Ctrl-C lands while Python runs a gc callback, as seen in CI
    if not fired and getattr(signal.getsignal(signal.SIGINT), "__name__", "") == "on_sigint":
        fired.append(1)
        signal.raise_signal(signal.SIGINT)
gc.callbacks.append(ctrl_c_inside_gc)
sys.exit(cli.main(sys.argv[1:]))
"""


def test_ctrl_c_inside_a_gc_callback_is_still_130(tmp_path):
    """Python cannot propagate an exception out of a gc callback; the lost KeyboardInterrupt must not let
    the command run on (CI exited 1 with an "Exception ignored" traceback)."""
    proc = subprocess.run([sys.executable, "-c", _CTRL_C_IN_GC_CALLBACK, "check-components", "--examples", "1000", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300, preexec_fn=_default_sigint)
    assert proc.returncode == errors.INTERRUPTED, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("hybridfuzz:")] == ["hybridfuzz: interrupted"]


@pytest.mark.engine
def test_ctrl_c_during_fuzz_keeps_what_was_found(tmp_path):
    """Ctrl-C (SIGINT to the command's process group, as a terminal sends it) once the injected
    wake-up crash has been written: exit 130, one line, the finding and a summary marked interrupted."""
    import json

    from hybridfuzz.case import load_case_file

    out, found = tmp_path / "run", tmp_path / "found"
    (tmp_path / "none").mkdir()
    env = dict(os.environ, HYBRIDFUZZ_FAULT="wake-zero", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "hybridfuzz.cli", "fuzz", "--budget", "10m", "--seed", "1", "--out", str(out),
                             "--findings", str(found), "--known", str(tmp_path / "none"), "--kv-dtypes", "float16"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env, start_new_session=True,
                            preexec_fn=_default_sigint)
    t0 = time.time()
    while proc.poll() is None and time.time() - t0 < 480 and not (found.is_dir() and os.listdir(found)):
        time.sleep(0.5)
    assert proc.poll() is None, "the run ended before Ctrl-C"
    assert found.is_dir() and os.listdir(found), "no finding within 8 minutes"
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == errors.INTERRUPTED, stderr[-3000:]
    assert "Traceback" not in stdout + stderr, stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["cases"] >= 1
    # the new dimensions are counted in a fuzz run's summary and last lines, as in a campaign's
    assert 0 <= summary["new_dimension_cases"] <= summary["cases"] and sum(summary["dimensions"].values()) >= summary["new_dimension_cases"]
    assert f"new dimensions: {summary['new_dimension_cases']} of {summary['cases']} cases" in stderr + stdout
    for name in os.listdir(found):
        case = load_case_file(str(found / name))  # complete, parseable
        assert case.observed and case.observed[-1].signature

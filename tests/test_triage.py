"""hybridfuzz corpus: findings grouped by signature, status per vLLM version."""
from __future__ import annotations

import json

from hybridfuzz import cli
from hybridfuzz.case import Case, EngineConfig, Generate, Observation, dump_case
from hybridfuzz.model import ModelSpec
from hybridfuzz.triage import status


def _case(observed=(), expect=None, dtype="fp8") -> Case:
    return Case(model=ModelSpec(), engine=EngineConfig(kv_cache_dtype=dtype), steps=[Generate(prompts=[[5, 6, 7]])],
                observed=list(observed), expect=dict(expect or {}))


def _obs(vllm, verdict, sig="", summary="", oracle="self_consistency"):
    return Observation(vllm=vllm, verdict=verdict, oracle=oracle if verdict == "divergence" else "", signature=sig, summary=summary)


SIG_A = "self_consistency:repeat-differs:8b21d7e4"
SIG_B = "health:error:VLLMValidationError:88da12df"


def make_corpus(tmp_path):
    d = tmp_path / "corpus"
    (d / "found").mkdir(parents=True)
    (d / "found" / "a1.yaml").write_text(dump_case(_case([_obs("0.31.0", "divergence", SIG_A, "identical prompt gave different output: step 0 req 0 vs step 2 req 0, from token 3"),
                                                         _obs("0.32.0", "pass")], expect={"0.32.0": "pass"})))
    (d / "found" / "a2.yaml").write_text(dump_case(_case([_obs("0.31.0", "divergence", SIG_A, "from token 0")])))
    (d / "found" / "b.yaml").write_text(dump_case(_case([_obs("0.32.0", "divergence", SIG_B, "case error at step 0 (generate): VLLMValidationError: x", "health")],
                                                        expect={"0.32.0": "pass"})))
    (d / "seed.yaml").write_text(dump_case(_case(expect={"0.32.0": "pass"})))
    (d / "broken.yaml").write_text("schema: hybridfuzz/v1\nmodel: {layers: [nope]}\nsteps: [{generate: {prompts: [[1]]}}]\n")
    return d


def test_grouping_and_versions(tmp_path):
    groups, clean = status.group(status.load_entries([str(make_corpus(tmp_path))]))
    assert [g.signature for g in groups] == [SIG_A, SIG_B]
    a, b = groups
    assert (a.oracle, a.symptom, len(a.entries)) == ("self_consistency", "repeat-differs", 2)
    assert (b.oracle, b.symptom, b.where) == ("health", "error:VLLMValidationError", "step 0 (generate)")
    assert a.versions == {"0.31.0": "divergence", "0.32.0": "pass (as expected)"}  # found on 0.31, fixed in 0.32
    assert b.versions == {"0.32.0": "divergence (expected pass)"}
    assert sorted(e.path.rsplit("/", 1)[-1] for e in clean) == ["broken.yaml", "seed.yaml"]
    assert any(e.case is None and "layers[0]" in e.error for e in clean)


def test_helpers():
    assert status.split_signature(SIG_B) == ("health", "error:VLLMValidationError")
    assert status.where_of("step 1 req 0 diverges from the reference (kv_cache_dtype=auto) at token 0") == "token0"
    assert status.where_of("case crash at start-up: boom") == "start-up"
    assert status.version_status(_case(expect={"0.33.0": "divergence"})) == {"0.33.0": "expect divergence (not run)"}
    assert list(status.version_status(_case([_obs("0.10.1", "pass"), _obs("0.9.2", "pass")]))) == ["0.9.2", "0.10.1"]


def test_cli_corpus(tmp_path, capsys):
    d = make_corpus(tmp_path)
    assert cli.main(["corpus", str(d)]) == 0
    text = capsys.readouterr().out
    assert text.index(SIG_A) < text.index(SIG_B)
    assert "vLLM 0.32.0: divergence (expected pass)" in text and "unreadable cases: 1" in text
    assert cli.main(["corpus", str(d), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [f["signature"] for f in data["findings"]] == [SIG_A, SIG_B] and len(data["invalid"]) == 1


def test_real_seed_corpus(capsys):
    assert cli.main(["corpus", "corpus/seeds"]) == 0
    out = capsys.readouterr().out
    assert "no findings" in out and "prefix-hit-fp8.yaml" in out

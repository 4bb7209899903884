"""The standalone reproducer script of a case: a template module with the case's data and hybridfuzz's code inlined.

Engine cases use ``reproducer_engine.py`` (tiny model, vllm.LLM, ``executor.judge``);
component cases ``reproducer_component.py`` (vLLM's KV-cache classes, sentinel bytes,
the property's own check). Either way the rules come from hybridfuzz's source by
``inline.inline_template``: nothing is copied by hand, so the script can be neither
stricter nor looser than the fuzzer.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

from hybridfuzz.case import STEP_NAMES, Case, Observation, engine_to_dict
from hybridfuzz.export.inline import InlineError, inline_template, literal, template_text
from hybridfuzz.export.signature_check import EXIT_TEXT, Expected, expected_of

# What hybridfuzz's engine hosts set for engine processes, minus what only they need.
SCRIPT_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "OMP_NUM_THREADS": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
ENGINE_TEMPLATE = "hybridfuzz.export.reproducer_engine"
COMPONENT_TEMPLATE = "hybridfuzz.export.reproducer_component"


def _pretty(value: Any) -> str:
    import pprint

    return pprint.pformat(value, width=110, sort_dicts=False)


def _engine_kwargs(engine) -> dict[str, dict[str, Any]]:
    """The offline host's own vllm.LLM arguments per device kind, less the model path the script fills in."""
    from hybridfuzz.engines import offline

    out = {}
    for kind in ("cpu", "cuda"):
        kw = offline.engine_kwargs(engine, model_dir="", device=kind)
        del kw["model"]
        out[kind] = kw
    return out


def _namespace(name: str, fields: dict[str, Any], indent: str = "    ") -> str:
    """A namespace's source; a nested record (a dict, such as engine.speculative_config) is a namespace too, as the
    oracles read its fields by name."""
    inner = ",\n".join(f"{indent}    {k}={_namespace(name, v, indent + '    ') if isinstance(v, dict) and v and k != 'extra' and k != 'env' else literal(v)}"
                        for k, v in fields.items())
    return f"{name}(\n{inner},\n{indent})"


def latest_divergence(case: Case) -> Observation | None:
    bad = [o for o in case.observed if o.verdict == "divergence"]
    return bad[-1] if bad else None


def expected_for(obs: Observation | None) -> Expected | None:
    """The signature a reproducer checks: the observation's (the case's latest divergence by default)."""
    if obs is None or not obs.signature:
        return None
    return expected_of(obs.signature, obs.summary, obs.oracle)


def _expected_literal(expected: Expected | None) -> str:
    return "None" if expected is None else _pretty(dataclasses.asdict(expected))


def case_namespace(case: Case, reference: bool = True) -> str:
    """Source of a SimpleNamespace holding what ``judge`` reads of a Case: model, engine, oracle, the steps as
    (kind, arguments) pairs, which the script makes into the step dataclasses copied from hybridfuzz.case (they are
    defined at its end, after the data), and the reference case's data where the oracles run a reference (the
    script makes it ``CASE.reference_case()``, which the feature oracles call)."""
    from hybridfuzz.executor import needs_reference

    steps = "[\n" + "".join(f"        ({STEP_NAMES[type(s)]!r}, {literal({f.name: getattr(s, f.name) for f in dataclasses.fields(s)})}),\n"
                            for s in case.steps) + "    ]"
    model = {f.name: getattr(case.model, f.name) for f in dataclasses.fields(case.model)}
    ref = ""
    if reference and needs_reference(case):
        inner = case_namespace(case.reference_case(), reference=False).replace("\n", "\n    ")
        ref = f"    reference_data={inner},\n"
    return ("SimpleNamespace(\n"
            f"    kind={case.kind!r},\n"
            f"    model={_namespace('SimpleNamespace', model, '    ')},\n"
            f"    engine={_namespace('SimpleNamespace', engine_to_dict(case.engine), '    ')},\n"
            f"    oracle=SimpleNamespace(checks={literal(list(case.oracle.checks))}, reference={literal(dict(case.oracle.reference))}),\n"
            f"    steps={steps},\n"
            f"{ref}"
            ")")


def engine_script(case: Case, title: str, expected: Expected | None) -> str:
    from hybridfuzz.executor import needs_reference

    from hybridfuzz.engines.speculative import draft_spec
    from hybridfuzz.model import hf_config, tensor_plan

    def tiny(spec) -> dict:
        plan = {n: [list(shape), list(init)] for n, (shape, init) in tensor_plan(spec).items()}
        return {"config": hf_config(spec), "plan": plan, "seed": spec.seed, "dtype": spec.dtype}

    spec = case.engine.speculative_config
    draft = tiny(draft_spec(case.model)) if spec is not None and spec.method == "draft_model" else None
    ref_engine = None
    if needs_reference(case):
        ref = case.reference_case().engine
        if ref.env != case.engine.env:
            raise InlineError("a reference that overrides engine.env cannot share one script environment")
        ref_engine = _engine_kwargs(ref)
    data = "\n".join([
        f"TITLE = {title!r}",
        "# What counts as the bug: a divergence with this oracle and symptom (and exception type, place, message); exit 1 only then",
        f"EXPECTED = {_expected_literal(expected)}",
        "# vllm.LLM arguments per device kind (the model path is the tiny model's), and the reference run's if the case has one",
        f"ENGINE = {_pretty(_engine_kwargs(case.engine))}",
        f"REFERENCE_ENGINE = {_pretty(ref_engine)}",
        f"GPUS = {case.engine.tensor_parallel_size if case.engine.tensor_parallel_size > 1 else 0}  # the case needs this many (tensor_parallel_size)",
        f"CASE = {case_namespace(case)}",
        f"ENV = {_pretty(dict(case.engine.env))}  # the case's own, for the engine",
        f"HARNESS_ENV = {_pretty(SCRIPT_ENV)}  # for a small engine; a value already set in your shell wins",
        "# The tiny model: config.json, and each tensor's shape and initialisation (make_tensor, seeded by name)",
        f"MODEL = {_pretty(tiny(case.model))}",
        "# speculative method draft_model: the draft's tiny model (hybridfuzz's too: engines/speculative.py), or None",
        f"DRAFT_MODEL = {_pretty(draft)}",
    ])
    return inline_template(template_text(ENGINE_TEMPLATE), data)


def component_script(case: Case, title: str, expected: Expected | None) -> str:
    from hybridfuzz.components import PROPERTIES
    import importlib

    prop = (case.component or {}).get("property")
    if prop not in PROPERTIES:
        raise InlineError(f"component.property: unknown property {prop!r} (known: {', '.join(PROPERTIES)})")
    module = importlib.import_module(PROPERTIES[prop])
    data = "\n".join([
        f"TITLE = {title!r}",
        f"PROPERTY = {prop!r}",
        f"DESCRIPTION = {_pretty((module.__doc__ or '').strip())}",
        f"EXPECTED = {_expected_literal(expected)}  # the bug's signature: exit 1 only for a divergence that matches it",
        f"CASE = SimpleNamespace(kind='component', component={_pretty(dict(case.component))})",
    ])
    return inline_template(template_text(COMPONENT_TEMPLATE), data, extra_roots=[("run", module.run)])


# Python reads line 1 or 2 as an encoding declaration when it says "coding:" (PEP 263): a title such as "... speculative
# decoding: a prompt ..." there made the script a SyntaxError ("encoding problem: a"). Declared first, the title is safe.
ENCODING = "# -*- coding: utf-8 -*-\n"


def standalone_script(case: Case, title: str = "", case_name: str = "a hybridfuzz case", script_name: str = "repro.py",
                      observation: Observation | None = None) -> str:
    """Python source that reproduces the case without hybridfuzz (EXIT_TEXT). It checks the signature of
    ``observation``, by default the case's latest divergence (none recorded: any divergence counts)."""
    expected = expected_for(observation or latest_divergence(case))
    title = title or "hybridfuzz case"
    text = component_script(case, title, expected) if case.kind == "component" else engine_script(case, title, expected)
    head = (f"# Reproducer: {title}\n# Generated by `hybridfuzz export` from {os.path.basename(case_name)}; "
            f"run: python {script_name}   ({EXIT_TEXT})\n")
    first, rest = text.split("\n", 1)
    return f"{first}\n{ENCODING}{head}{rest}" if first.startswith("#!") else ENCODING + head + text

"""Aborts: aborting requests in flight changes no other request, and the request that takes the freed
recurrent-state slot computes what it computes where nothing was aborted.

An aborted request's blocks go back to the pool mid-decode; its state slot is handed to a later request, which must
start from a clean state (upstream's freed-slot and stale-block bugs: #37728, #56524). The reference is the same case
whose abort steps abort nothing (Case.reference_case), on the same engine: every other request, the requests sent
after the abort, and the tokens an aborted request had before it was cut must all agree with it. An abort that found
its requests already finished tested nothing: "not exercised".
"""
from __future__ import annotations

from hybridfuzz.case import Abort, Case
from hybridfuzz.oracles.compare import compare_requests
from hybridfuzz.oracles.feature import ABORTED, compare_with_reference, completed, cut_result, feature_tolerance, nonfinite, not_exercised
from hybridfuzz.oracles.verdict import Verdict, output_where
from hybridfuzz.trace import Trace

ORACLE = "abort"


def check_abort(case: Case, trace: Trace, ref: Trace | None) -> Verdict:
    aborts = [i for i, s in enumerate(case.steps) if isinstance(s, Abort) and s.requests]
    if not aborts:
        return Verdict("pass", ORACLE, "no abort in this case")
    cut = {(s.index, r): result for s in trace.steps if s.kind == "submit" for r, result in enumerate(s.outputs)
           if result.finish_reason == ABORTED}
    if not cut:
        return not_exercised(ORACLE, "nothing aborted: every request the abort steps named had finished (or never ran)")
    bad = nonfinite(case, trace, ORACLE)
    if bad is not None:
        return bad
    if ref is None:
        return Verdict("pass", ORACLE, f"{len(cut)} requests aborted; no reference run to compare with")
    tol = feature_tolerance(case, trace, regroups=False)
    after = {(idx, r) for idx, r, _ in completed(case, trace) if idx > aborts[0]}
    v, n_after = compare_with_reference(case, trace, ref, ORACLE, "where nothing was aborted", tol, "after-abort-differs", only=after)
    if v is not None:
        v.summary = "a request sent after the abort (it may take the freed state slot): " + v.summary
        return v
    others = {(idx, r) for idx, r, _ in completed(case, trace)} - after
    v, n_others = compare_with_reference(case, trace, ref, ORACLE, "where nothing was aborted", tol, "bystander-differs", only=others)
    if v is not None:
        v.summary = "a request running beside the aborted ones: " + v.summary
        return v
    theirs = {(s.index, r): result for s in ref.steps if s.kind == "submit" for r, result in enumerate(s.outputs)}
    for (idx, r), got in sorted(cut.items()):
        want = theirs.get((idx, r))
        if want is None or case.steps[idx].temperature > 0.0 or not got.tokens:
            continue
        m = compare_requests(cut_result(want, len(got.tokens)), got, tol)
        if m:
            return Verdict("divergence", ORACLE, f"step {idx} req {r} (aborted): its tokens before the abort diverge at token {m.position}",
                           [f"not aborted: {m.a_tokens}", f"aborted:     {m.b_tokens}", f"why: {m.reason}"],
                           symptom="aborted-prefix-differs", where=output_where(m.position, case.model.architecture))
    return Verdict("pass", ORACLE, f"{len(cut)} aborted; {n_after} requests after the abort and {n_others} beside it agree")

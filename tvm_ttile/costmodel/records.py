"""The measured records tuning already produces, as training data for rankers: per workload of a MetaSchedule
work dir, its Problem and each tvm_ttile scheme's median seconds (failed runs left out)."""
from __future__ import annotations

import re
import statistics

SCHEME_IN_TRACE = re.compile(r"""\['Annotate', \['b\d+', '"(\[[^'"]*\])"'\], \['tvm_ttile\.scheme'\]""")


def measured_layers(work_dir: str) -> list:
    """[(workload key, Problem, [(Scheme, seconds)])] of every workload in `work_dir` that tvm_ttile tuned."""
    from tvm_ffi import structural_hash

    from ..metaschedule.database import open_database
    from ..metaschedule.space import ttile_problem
    from ..scheme import Scheme

    database = open_database(work_dir)
    groups: dict = {}
    problems: dict = {}
    for rec in database.get_all_tuning_records():
        secs = [float(s) for s in rec.run_secs] if rec.run_secs else []
        if not secs or min(secs) >= 1e9:
            continue
        found = SCHEME_IN_TRACE.search(str(rec.trace.as_json()))
        if not found:  # another tuner's record
            continue
        key = structural_hash(rec.workload.mod)
        if key not in problems:
            problems[key], _ = ttile_problem(rec.workload.mod, rec.target)
        if problems[key] is None:
            continue
        groups.setdefault(key, {})[found.group(1)] = statistics.median(secs)
    return [(f"{work_dir}#{key}", problems[key], [(Scheme.parse(t), s) for t, s in g.items()])
            for key, g in groups.items()]


def feature_groups(layers, context_of) -> list:
    """[(features [n, f], seconds [n])], one per measured layer, in order; context_of(op) -> CostContext. Schemes whose
    features cannot be computed (a form the models do not know) are counted and left out."""
    import numpy as np

    from .analytic import features

    out, skipped = [], 0
    for _, problem, rows in layers:
        ctx = context_of(problem.op)
        x, t = [], []
        for scheme, secs in rows:
            try:
                x.append(features(problem, scheme, ctx))
                t.append(secs)
            except Exception:  # noqa: BLE001 - counted by the caller's report
                skipped += 1
        out.append((np.array(x), np.array(t)))
    return out, skipped

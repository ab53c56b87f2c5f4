"""Which traits of a drawn scheme go with a slow kernel? Reads the measured records of tvm_ttile work dirs
(`tvm-ttile tune-model ... --work-dir D`, `tvm-ttile tune ... --work-dir D`) and ranks, per task, the
candidates' times against simple traits of their schemes. No timing: it only reads databases.

    python benchmarks/paper/scheme_features.py WORK_DIR [WORK_DIR ...] [--out benchmarks/results/scheme_features.md]

Per task (a workload with at least --min-records tvm_ttile records), each candidate's speed relative to the
task's best (1.0 = the best); per trait, Spearman's rank correlation with that speed, the median over tasks
and on how many tasks it is negative (negative: more of the trait, slower).
"""
import argparse
import collections
import math
import os
import statistics
import sys
import time


from tvm_ttile.costmodel.records import SCHEME_IN_TRACE
from tvm_ttile.evaluation import spearman
from tvm_ttile.scheme import Lambda, Scheme, T, U, V
from tvm_ttile.space import REDUCTION, REUSE
from tvm_ttile.evaluation import command_line



def runs(dims: list) -> list:
    """Dimensions of consecutive loop levels, adjacent repeats merged (T(2,c),T(4,c) is one run of c)."""
    return [d for i, d in enumerate(dims) if i == 0 or dims[i - 1] != d]


def traits(text: str) -> dict:
    specs = Scheme.parse(text).specs
    levels = [s.dim for s in specs if isinstance(s, (T, Lambda))]
    op = "matmul" if any(getattr(s, "dim", None) in ("i", "j") for s in specs) else "conv2d"
    reuse_dim = REUSE[op]
    first_u = next(i for i, s in enumerate(specs) if isinstance(s, (U, V)))
    reuse, i = 1, first_u - 1
    while i >= 0 and isinstance(specs[i], T) and specs[i].dim == reuse_dim:
        reuse, i = reuse * specs[i].n, i - 1
    merged = runs(levels)
    return {"reuse_dim_runs": merged.count(reuse_dim),
            "spatial_runs": sum(d not in REDUCTION[op] for d in merged),
            "levels": len(levels),
            "log2_reuse": math.log2(reuse)}


def tasks_of(work_dir: str, min_records: int) -> list:
    """[(task label, [(relative speed, scheme text)])] of the work dir's tvm_ttile records."""
    from tvm_ttile.metaschedule import open_database
    by = collections.defaultdict(list)
    for rec in open_database(work_dir).get_all_tuning_records():
        m = SCHEME_IN_TRACE.search(str(rec.trace.as_json()))
        secs = [float(s) for s in rec.run_secs or []]
        if m and secs and all(s < 1e9 for s in secs):  # failed candidates carry 1e10
            by[str(rec.workload.as_json()[0])].append((statistics.median(secs), m.group(1)))
    out = []
    for n, cands in enumerate(v for v in by.values() if len(v) >= min_records):
        best = min(s for s, _ in cands)
        out.append((f"{os.path.basename(os.path.normpath(work_dir))}#{n}", [(best / s, t) for s, t in cands]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work_dirs", nargs="+")
    ap.add_argument("--min-records", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results",
                                                  "scheme_features.md"))
    args = ap.parse_args()
    tasks = [t for wd in args.work_dirs for t in tasks_of(wd, args.min_records)]
    if not tasks:
        sys.exit(f"no task with >= {args.min_records} tvm_ttile records in {args.work_dirs}")
    rho = collections.defaultdict(list)
    by_runs = collections.defaultdict(list)
    for _, cands in tasks:
        feats = [traits(t) for _, t in cands]
        speed = [s for s, _ in cands]
        for name in feats[0]:
            rho[name].append(spearman([f[name] for f in feats], speed))
        for f, s in zip(feats, speed):
            by_runs[f["reuse_dim_runs"]].append(s)
    lines = ["# Scheme traits against measured speed", "",
             f"Command: `{command_line()}` ({time.strftime('%Y-%m-%d %H:%M')}); "
             f"{len(tasks)} tasks, {sum(len(c) for _, c in tasks)} measured candidates.", "",
             "| trait | median Spearman with speed | tasks where negative |", "|---|---:|---:|"]
    lines += [f"| {n} | {statistics.median(v):+.2f} | {sum(x < 0 for x in v)} of {len(v)} |" for n, v in rho.items()]
    lines += ["", "Speed relative to the task's best, by how many separate runs of loops the reuse dimension "
              "(conv2d c, matmul k) is split into (1: all of it directly above the microkernel):", "",
              "| runs | candidates | median | 90th percentile |", "|---:|---:|---:|---:|"]
    for k in sorted(by_runs):
        v = sorted(by_runs[k])
        lines.append(f"| {k} | {len(v)} | {statistics.median(v):.2f} | {v[int(0.9 * (len(v) - 1))]:.2f} |")
    lines += ["", "Traits: reuse_dim_runs (of c for conv2d, k for matmul) and spatial_runs (of the other "
              "dimensions but r, s): runs of adjacent "
              "tile levels of one dimension; levels: T and Lambda levels; log2_reuse: reduction steps per "
              "microkernel call."]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

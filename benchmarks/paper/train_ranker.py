"""Train the pairwise ranker (tvm_ttile/costmodel/pairwise.py) on the measured records of tvm_ttile work dirs
and write the model the `learned` ranker ships with. No timing: it reads databases (1 thread, this CPU's).

    python benchmarks/paper/train_ranker.py WORK_DIR [WORK_DIR ...] --out tvm_ttile/data/ranker_pairwise.json

Every workload a work dir's records tuned with tvm_ttile is one group; pairs are made inside a group only (the
faster scheme by more than 2% wins). Work dirs of `tvm-ttile tune`, `compare` and `tune-model` all qualify;
a directory holding several work dirs (e.g. compare's work/) is searched for them.
"""
import argparse
import glob
import json
import os
import platform
import time
from tvm_ttile.evaluation import command_line



def work_dirs(paths: list) -> list:
    out = []
    for p in paths:
        found = sorted({os.path.dirname(f) for f in glob.glob(os.path.join(p, "**", "database_tuning_record.json"),
                                                                 recursive=True)})
        out += found
    return sorted(set(out))


def load_groups(paths: list, context_of) -> tuple:
    from tvm_ttile.costmodel.records import feature_groups, measured_layers

    layers = []
    for d in work_dirs(paths):
        layers += [lay for lay in measured_layers(d) if len(lay[2]) >= 4]
    groups, skipped = feature_groups(layers, context_of)
    return layers, groups, skipped


def contexts(threads: int = 1):
    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.costmodel import CostContext

    cpu = cpu_mod.detect_host()
    cache = {}

    def context_of(op):
        if op not in cache:
            cache[op] = CostContext.for_cpu(cpu, op, threads)
        return cache[op]
    return cpu, context_of


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work_dirs", nargs="+")
    ap.add_argument("--out", default="tvm_ttile/data/ranker_pairwise.json")
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from tvm_ttile.costmodel.analytic import FEATURES
    from tvm_ttile.costmodel.pairwise import PairwiseRanker

    start = time.time()
    cpu, context_of = contexts()
    layers, groups, skipped = load_groups(args.work_dirs, context_of)
    model = PairwiseRanker(len(FEATURES), seed=args.seed)
    losses = model.fit(groups, epochs=args.epochs)
    out = {"features": list(FEATURES), "model": model.to_json(),
           "trained_on": {"work_dirs": [os.path.relpath(d) for d in work_dirs(args.work_dirs)],
                          "layers": len(groups), "schemes": int(sum(len(t) for _, t in groups)),
                          "skipped_schemes": skipped},
           "loss": {"first": losses[0] if losses else None, "last": losses[-1] if losses else None},
           "command": command_line(),
           "machine": cpu.name, "isa": cpu.isa.name, "python": platform.python_version(),
           "seconds": round(time.time() - start, 1)}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f)
    print(f"{len(groups)} layers, {out['trained_on']['schemes']} schemes ({skipped} skipped); loss "
          f"{out['loss']['first']:.3f} -> {out['loss']['last']:.3f}; {out['seconds']} s; wrote {args.out}")


if __name__ == "__main__":
    main()

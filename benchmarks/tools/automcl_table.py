"""Issue #6's table from a `tvm-ttile compare` run with the automcl system (benchmarks/paper/automcl_matmul.sh):
per shape, every AutoMCL compute variant's best, the classifier's pick, the TTile space, MetaSchedule and
numpy, in GFLOPS and % of peak; and the two counts the issue asks for.

    python benchmarks/tools/automcl_table.py [benchmarks/results/automcl_matmul_zen3]  -> <dir>/automcl_table.md
    python benchmarks/tools/automcl_table.py DIR --repick   -> <dir>/automcl_table_repicked.md: the picks of this CPU's
        classifier as it is now (e.g. retrained after the run), on the variants the run measured
"""
import argparse
import json
import os

from tvm_ttile.automcl.selection import load_classifier, select
from tvm_ttile.automcl.space import COMPUTES
from tvm_ttile.baselines import AUTOMCL_FILE, work_dir_for
from tvm_ttile.compare import summary
from tvm_ttile.cpu import detect_host
from tvm_ttile.operators import matmul_shapes


def main(out_dir, repick=False):
    with open(os.path.join(out_dir, "compare.json")) as f:
        data = json.load(f)
    summ, peak = summary(data), data["peak_gflops"] * data["threads"]
    pct = lambda g: f"{g:.1f} ({100 * g / peak:.0f}%)" if g else "-"  # noqa: E731
    names = list(COMPUTES)
    lines = ["# AutoMCL compute variants against the TTile space, MetaSchedule and numpy", "",
             f"From `{data['command']}` ({data['date']}); {data['machine']['cpu']}, {data['threads']} thread(s), "
             f"peak {peak:.1f} GFLOPS; {data['budget']} trials per tuner and shape (AutoMCL: shared among its six "
             "computes, so each variant's column is its best of its share). GFLOPS (% of peak). Variant columns are "
             "tuning-time bests; the last four columns were timed again side by side."
             + (" TTile and MetaSchedule read prepacked weights (packed once at build time, untimed); AutoMCL packs "
                "inside the call, as in its paper; numpy packs in its BLAS call." if data.get("prepack") else ""), "",
             "| shape | " + " | ".join(names) + " | pick | pick / best variant | AutoMCL | TTile | MetaSchedule | "
             "numpy | best tvm_ttile / numpy |", "|---|" + "---:|" * (len(names) + 7)]
    classifier, how = load_classifier(detect_host())
    shapes = matmul_shapes()
    picks_ok = picks = beats = n_shapes = picked_later = 0
    for layer, systems in summ.items():
        work = work_dir_for(os.path.join(out_dir, "work"), "automcl", layer, 0, data["machine"]["isa"])
        saved = {}
        if os.path.exists(os.path.join(work, AUTOMCL_FILE)):
            with open(os.path.join(work, AUTOMCL_FILE)) as f:
                saved = json.load(f)
        per = {c: v["gflops"] for c, v in saved.get("per_compute", {}).items()}
        pick = None if repick else saved.get("selected")
        if pick is None and classifier is not None and per:  # tuned before this classifier existed: ask it now
            op = shapes[layer]
            pick, picked_later = select(classifier, op.M, op.K, op.N), picked_later + 1
        ratio = per.get(pick, 0) / max(per.values()) if pick and per and max(per.values()) else None
        if ratio is not None:
            picks, picks_ok = picks + 1, picks_ok + (ratio >= 0.9)
        g = {s: systems.get(s, {}).get("gflops", 0.0) for s in ("automcl", "tvm_ttile", "metaschedule", "numpy")}
        best = max(g["automcl"], g["tvm_ttile"])
        if g["numpy"]:
            n_shapes, beats = n_shapes + 1, beats + (best >= g["numpy"])
        lines.append(f"| {layer} | " + " | ".join(pct(per.get(c, 0)) for c in names) + f" | {pick or '-'} | "
                     + (f"{ratio:.2f}" if ratio is not None else "-") + " | " + " | ".join(
                         pct(g[s]) for s in ("automcl", "tvm_ttile", "metaschedule", "numpy"))
                     + (f" | {best / g['numpy']:.2f} |" if g["numpy"] else " | - |"))
    unpicked = len(summ) - picks
    lines += ["", f"The classifier's pick is within 10% of the best variant on **{picks_ok} of {picks}** shapes"
              + (f" ({unpicked} without a pick: no trained classifier)." if unpicked else ".")
              + (f" On {picked_later} shapes the pick is asked now of this CPU's classifier, trained after the "
                 f"run ({how}); the variants' GFLOPS are the run's." if picked_later else ""),
              f"tvm_ttile's best (TTile space or AutoMCL) is at least as fast as numpy on **{beats} of {n_shapes}** "
              "shapes."]
    with open(os.path.join(out_dir, "automcl_table_repicked.md" if repick else "automcl_table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir", nargs="?", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results", "automcl_matmul_zen3"))
    ap.add_argument("--repick", action="store_true", help="ask this CPU's classifier as it is now for every pick")
    args = ap.parse_args()
    main(args.out_dir, repick=args.repick)

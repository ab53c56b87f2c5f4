"""How well do rankers order schemes before measuring them? Judged on layers where 200 random schemes were each
measured once (`tvm-ttile tune conv2d --layer L --prepack --trials 200 --work-dir DIR/L`), with learned models
trained only on other networks' records (PolyDL's split: train on some networks, test on others).

    python benchmarks/paper/ranking_eval.py --eval DIR/ResNet18-2 ... --train WORK_DIR ... --out benchmarks/results/R
        [--retime]

Per layer and ranker (polydl = PolyDL's Eq. 1, time = predicted seconds, learned = pairwise network,
committee = time and learned together, led by the lowest sum of their ranks (committee) or by the
time ranker's pick (committee-time); -online = refit after each batch of 10, as
`--strategy model` runs, 1 of 10 explored at random; random = the measured order's expectation over 2000
shuffles):
- Spearman correlation of the ranker's cost with the measured seconds;
- top-1: the top-ranked of the 200 as a share of the best of the 200 (GFLOPS ratio); best of the top 8 likewise;
- trials until a scheme within 95% of the best of 200 is measured;
- top-1 of a smaller pool: the top-ranked of n of the 200 drawn at random (expectation over 1000 draws), as a
  share of the best of the 200: does the top of a larger pool land lower (the pick the models overrate most)?
Learned models for a layer are trained on every --train work dir except the layer's own network's
(ResNet18-* leaves out dirs named resnet18, Yolo9000-* those named darknet19: Yolo9000's layers are Darknet-19's;
a layer of --shapes, from no trained-on network, gets the model trained on them all);
a fold's model already in OUT/work, trained on the same dirs, is reused (training is seeded).
--retime: the zero-trial picks (the top-ranked of a fresh pool of 2000 by the default ranker and by the learned
one alone, the layer's fold model, and by the committee led by its rank-sum winner; and the default ranker's of a
pool of 200; results before the time-led default have a "zero-trial time" column instead, the default's pick now),
the model strategy's best of --trials, random's best of its first --trials and the best of the 200, built again,
checked against numpy and timed side by side, 5 rounds round-robin.
No other heavy job may run during --retime.
"""
import argparse
import json
import math
import os
import platform
import statistics
import time

import numpy as np

from tvm_ttile.evaluation import spearman
from tvm_ttile.evaluation import command_line


from train_ranker import contexts, load_groups, work_dirs  # noqa: E402

NETWORK_OF = {"ResNet18": "resnet18", "Yolo9000": "darknet19"}
BATCH, EXPLORE = 10, 1
EPOCHS = 300  # training epochs of a fold model
# name -> (ranker, options): the committee as it leads with the Borda winner and with the time ranker's pick
VARIANTS = {"polydl": ("polydl", {}), "time": ("time", {}), "learned": ("learned", {}),
            "committee": ("committee", {"first": "borda"}), "committee-time": ("committee", {"first": "time"})}
LEARNED = ("learned", "committee", "committee-time")  # the rankers that read a model file and refit online
RANKERS = ("polydl", "time", "learned", "learned-online", "committee", "committee-online", "committee-time",
           "committee-time-online", "random")
SPEARMAN = ("polydl", "time", "learned")  # a committee's cost is a position, not a prediction
POOLS, POOL_DRAWS = (25, 50, 100, 200), 1000  # sub-pools of the 200 measured: top-1 against the pool's size
POOL_RANKERS = ("time", "learned", "committee")


def training_groups(train_dirs, context_of, work) -> list:
    """[(work dir, (features, seconds))] per trained-on layer, loaded once and kept in `work` for reruns
    (reading the databases takes minutes)."""
    import pickle

    path = os.path.join(work, "training_groups.pkl")
    if os.path.exists(path):
        with open(path, "rb") as f:
            held = pickle.load(f)
        if held["dirs"] == train_dirs:
            return held["groups"]
    layers, groups, _ = load_groups(train_dirs, context_of)  # once; each fold takes its part
    by_dir = [(key.split("#")[0], g) for (key, _, _), g in zip(layers, groups)]
    os.makedirs(work, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump({"dirs": train_dirs, "groups": by_dir}, f)
    return by_dir


def order_metrics(order_secs: list, best: float) -> dict:
    hit = next(i + 1 for i, s in enumerate(order_secs) if s <= best / 0.95)
    return {"top1": best / order_secs[0], "top8": best / min(order_secs[:8]), "trials_to_95": hit}


def random_metrics(secs: list, best: float, rng) -> dict:
    runs = [order_metrics(list(rng.permutation(secs)), best) for _ in range(2000)]
    return {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}


def pool_metrics(ranker, problem, schemes, secs, best, rng) -> dict:
    """{n: expected share of the best of the 200 reached by the top-ranked of n of them drawn at random}."""
    out = {}
    for n in POOLS:
        shares = []
        for _ in range(POOL_DRAWS if n < len(secs) else 1):
            pick = rng.choice(len(secs), n, replace=False) if n < len(secs) else np.arange(len(secs))
            costs = ranker.costs(problem, [schemes[i] for i in pick])
            shares.append(best / secs[pick[int(np.argmin(costs))]])
        out[n] = float(np.mean(shares))
    return out


def online_order(ranker, problem, schemes, secs, rng):
    """The model strategy on the measured pool: rank, measure a batch (1 explored at random), tell the ranker
    (an online one refits), rank the rest again."""
    left = list(range(len(secs)))
    order = []
    while left:
        index = {id(schemes[i]): i for i in left}
        ranked = [index[id(s)] for s in ranker.rank(problem, [schemes[i] for i in left])]
        take = ranked[:BATCH - EXPLORE]
        rest = ranked[BATCH - EXPLORE:]
        if rest:
            take += [int(i) for i in rng.choice(rest, min(EXPLORE, len(rest)), replace=False)]
        order += take
        ranker.observe(problem, [schemes[i] for i in take], [secs[i] for i in take])
        left = [i for i in left if i not in set(take)]
    return order


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", nargs="+", required=True)
    ap.add_argument("--train", nargs="+", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--retime", action="store_true")
    ap.add_argument("--trials", type=int, default=50, help="--retime: the model strategy's and random's budget")
    ap.add_argument("--shapes", nargs="+", default=[],
                    help="shapes files (`tvm-ttile compare --shapes`' format) holding the --eval layers that are not "
                    "named ones (the work dir's name is the layer's)")
    args = ap.parse_args()
    from tvm_ttile.costmodel.analytic import FEATURES
    from tvm_ttile.costmodel.pairwise import PairwiseRanker
    from tvm_ttile.costmodel.rankers import make_ranker
    from tvm_ttile.costmodel.records import measured_layers
    from tvm_ttile.operators import get_layer, load_shapes

    os.makedirs(args.out, exist_ok=True)
    shapes = {op.name: op for f in args.shapes for op in load_shapes(f)}
    cpu, context_of = contexts()
    train_dirs = work_dirs(args.train)
    by_dir = training_groups(train_dirs, context_of, os.path.join(args.out, "work"))
    models, rows, scatter = {}, [], {}
    rng = np.random.default_rng(0)
    for d in args.eval:
        name = os.path.basename(os.path.normpath(d))
        fold = NETWORK_OF.get(name.split("-")[0])
        if fold not in models:
            keep = [t for t in train_dirs if fold is None or fold not in t.lower()]
            fold_groups = [g for t, g in by_dir if t in keep]
            os.makedirs(os.path.join(args.out, "work"), exist_ok=True)  # not committed: made again by this script
            path = os.path.join(args.out, "work", f"ranker_without_{fold}.json" if fold else "ranker_all.json")
            made = {"features": list(FEATURES), "trained_on": [os.path.relpath(t) for t in keep], "epochs": args.epochs}
            held = json.load(open(path)) if os.path.exists(path) else {}
            if {k: held.get(k, EPOCHS if k == "epochs" else None) for k in made} == made:  # older files: EPOCHS
                print(f"{path}: trained on the same records, reused (training is seeded)", flush=True)
            else:
                model = PairwiseRanker(len(FEATURES), seed=0)
                model.fit(fold_groups, epochs=args.epochs)
                with open(path, "w") as f:
                    json.dump({**made, "model": model.to_json()}, f)
            models[fold] = (path, len(fold_groups), int(sum(len(t) for _, t in fold_groups)))
        model_path, n_layers, n_schemes = models[fold]
        ((_, problem, measured),) = measured_layers(d)
        ctx = context_of(problem.op)
        schemes = [s for s, _ in measured]
        secs = [t for _, t in measured]
        best = min(secs)
        rankers = {r: make_ranker(kind, ctx, **opts, **({"model": model_path, "online": False} if r in LEARNED
                                                        else {}))
                   for r, (kind, opts) in VARIANTS.items()}
        costs = {r: ranker.costs(problem, schemes) for r, ranker in rankers.items()}
        row = {"layer": name, "schemes": len(secs), "best_gflops": problem_flops(problem) / best / 1e9,
               "fold": (f"trained without {fold}" if fold else "trained on every --train dir") +
                       f": {n_layers} layers, {n_schemes} schemes"}
        for ranker, c in costs.items():
            order = [secs[i] for i in np.argsort(c, kind="stable")]
            row[ranker] = {"spearman": spearman(c, secs), **order_metrics(order, best)}
        for r in LEARNED:
            kind, opts = VARIANTS[r]
            online = online_order(make_ranker(kind, ctx, **opts, model=model_path, online=True), problem, schemes,
                                  secs, np.random.default_rng(0))
            row[f"{r}-online"] = order_metrics([secs[i] for i in online], best)
        row["random"] = random_metrics(secs, best, rng)
        row["pools"] = {r: pool_metrics(rankers[r], problem, schemes, secs, best, np.random.default_rng(1))
                        for r in POOL_RANKERS}
        scatter[name] = {"measured": secs, "time": costs["time"], "learned": costs["learned"]}
        if args.retime:
            row["retime"] = retime(shapes.get(name) or get_layer(name), model_path, d,
                                   {sc.text: t for sc, t in measured}, cpu, args.out, args.trials)
        rows.append(row)
        print(name, {k: v for k, v in row.items() if k not in ("layer",)}, flush=True)
    write(args, rows, scatter, cpu)


def problem_flops(problem) -> float:
    return 2.0 * problem.batch * math.prod(v for _, v in problem.sizes)


def random_first(work_dir: str, n: int, measured: dict) -> str:
    """The best of the first n schemes the random run measured (its trial log keeps the drawn order)."""
    from tvm_ttile.workdir import WorkDir, read_journal

    drawn = [e["scheme"] for e in read_journal(WorkDir(work_dir).trials) if e.get("scheme") and not e.get("error")]
    first = [t for t in drawn if t in measured][:n]
    return min(first, key=measured.__getitem__)


def retime(layer, model_path, eval_dir, measured, cpu, out, trials) -> dict:
    """Side by side, 5 rounds round-robin, each checked against numpy: the zero-trial picks (fold model), the best
    of `trials` measured by the model strategy (fold model), the best of the random run's first `trials`, and the
    best of its 200."""
    import dataclasses

    import tvm

    from tvm_ttile.lowering import lower
    from tvm_ttile.measure import MeasureSettings, measure_modules
    from tvm_ttile.metaschedule import cpu_tensor_intrinsics_only
    from tvm_ttile.scheme import Scheme
    from tvm_ttile.space import Problem
    from tvm_ttile.tune import pick_without_measuring, tune, verify

    cpu_tensor_intrinsics_only()
    op = dataclasses.replace(layer, prepack=True)
    name = layer.name
    start = time.time()
    pick = pick_without_measuring(op, cpu, strategy_options={"model": model_path})
    pick_seconds = time.time() - start
    alone = pick_without_measuring(op, cpu, strategy_options={"model": model_path, "ranker": "learned"})
    # The default committee leads with the time ranker's pick; its former lead, the rank-sum winner, beside it
    ranksum = pick_without_measuring(op, cpu, strategy_options={"model": model_path, "first": "borda"})
    small = pick_without_measuring(op, cpu, strategy_options={"model": model_path, "pool": 200})
    model = tune(op, cpu, trials=trials, seed=0, work_dir=os.path.join(out, "work", f"{name}-model{trials}"),
                 strategy="model", strategy_options={"model": model_path}, progress=False)
    texts = {"zero-trial": pick.scheme, "zero-trial learned": alone.scheme,
             "zero-trial rank sum": ranksum.scheme, "zero-trial pool 200": small.scheme,
             f"model-{trials}": model.scheme,
             f"random-{trials}": random_first(eval_dir, trials, measured),
             "best-of-200": min(measured, key=measured.get)}
    problem = Problem.from_operator(op, cpu.lanes, cpu.isa.name)
    target = cpu.target(1)
    mods, checks = [], {}
    for label, text in texts.items():
        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": op.prim_func(cpu.lanes)}))
        lower(problem, Scheme.parse(text), sch)
        checks[label] = verify(op, sch.mod, target)[0]
        mods.append(sch.mod)
    timed = measure_modules(mods, target, MeasureSettings(), rounds=5)
    gflops = {label: op.flops / statistics.median(m.seconds) / 1e9 for label, m in zip(texts, timed)}
    return {"schemes": texts, "verified": checks, "gflops": gflops, "pick_chosen_in_s": round(pick_seconds, 1),
            "model_tuning_s": round(model.seconds, 1)}


def write(args, rows, scatter, cpu):
    out = {"command": command_line(), "machine": cpu.name,
           "isa": cpu.isa.name, "threads": 1, "python": platform.python_version(),
           "date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}
    with open(os.path.join(args.out, "ranking_eval.json"), "w") as f:
        json.dump(out, f, indent=1)
    from tvm_ttile.evaluation import geomean as geo

    lines = [f"# Ranking schemes before measuring, {cpu.name} ({cpu.isa.name}), 1 thread", "",
             f"Command: `{out['command']}`", "",
             "Per layer, 200 random tvm_ttile schemes each measured once (prepacked weights). top-1 / top-8: the "
             "best-ranked scheme / the best of the 8 best-ranked, as a share of the best of the 200 (GFLOPS); "
             "to 95%: schemes measured in ranked order until one within 95% of that best; random: expectation over "
             "2000 shuffles of the same 200; -online: as `--strategy model` runs, batches of 10 (1 explored at "
             "random), the model refitted after each. Learned models never saw the layer's network.", ""]
    metrics = (("spearman", "Spearman correlation of the ranker's cost with the measured seconds", SPEARMAN,
                "{:.2f}", statistics.mean, "mean"),
               ("top1", "top-1: the best-ranked scheme, share of the best of the 200", RANKERS, "{:.2f}", geo,
                "geomean"),
               ("top8", "top-8: the best of the 8 best-ranked, share of the best of the 200", RANKERS, "{:.2f}",
                geo, "geomean"),
               ("trials_to_95", "schemes measured in ranked order until one within 95% of the best", RANKERS,
                "{:.0f}", geo, "geomean"))
    for key, title, names, fmt, summary, summary_name in metrics:
        lines += [f"**{title}**", "", "| layer | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
        lines += [f"| {r['layer']} | " + " | ".join(fmt.format(r[k][key]) for k in names) + " |" for r in rows]
        lines += [f"| {summary_name} | " + " | ".join(f"{summary([r[k][key] for r in rows]):.3f}" for k in names) +
                  " |", ""]
    lines += ["**top-1 of a pool of n of the 200 drawn at random, share of the best of the 200 (geometric mean over "
              f"the layers of the expectation over {POOL_DRAWS} draws)**", "",
              "| ranker | " + " | ".join(f"n = {n}" for n in POOLS) + " |", "|---|" + "---:|" * len(POOLS)]
    lines += [f"| {r} | " + " | ".join(f"{geo([row['pools'][r][n] for row in rows]):.3f}" for n in POOLS) + " |"
              for r in POOL_RANKERS]
    lines += [""]
    lines.append("Folds: " +
                 "; ".join(sorted({f"{r['layer'].split('-')[0]}: {r['fold']}" for r in rows})))
    if any("retime" in r for r in rows):
        labels = list(rows[0]["retime"]["gflops"])
        lines += ["", "## Picks timed side by side", "",
                  "Per layer, built again, checked against numpy and timed together (5 rounds round-robin, medians, "
                  "% of the best of the 200 random): zero-trial (the top-ranked of a fresh pool of 2000 by the "
                  "default ranker, no candidate timed), zero-trial learned / rank sum (the same by the learned ranker "
                  "alone / the committee led by its rank-sum winner), zero-trial pool 200 (the default ranker's top "
                  "of a fresh pool of 200), "
                  f"model-{args.trials} (`--strategy model`, fold model), random-{args.trials} "
                  f"(the best of the random run's first {args.trials}), and the best of the 200.", "",
                  "| layer | " + " | ".join(labels) + " | verified | pick chosen in | model tuning |",
                  "|---|" + "---:|" * len(labels) + "---|---:|---:|"]
        for r in rows:
            t = r["retime"]
            ref = t["gflops"]["best-of-200"]
            lines.append(f"| {r['layer']} | " + " | ".join(f"{100 * t['gflops'][k] / ref:.1f}" for k in labels) +
                         f" | {'yes' if all(t['verified'].values()) else 'NO'} | {t['pick_chosen_in_s']:.0f} s | "
                         f"{t['model_tuning_s']:.0f} s |")
        lines.append("| geomean | " + " | ".join(
            f"{100 * geo([r['retime']['gflops'][k] / r['retime']['gflops']['best-of-200'] for r in rows]):.1f}"
            for k in labels) + " | | | |")
        model, rand = f"model-{args.trials}", f"random-{args.trials}"
        lines.append("")
        lines.append(f"{model} / {rand} per layer: " + ", ".join(
            f"{r['layer']} {r['retime']['gflops'][model] / r['retime']['gflops'][rand]:.3f}" for r in rows))
    with open(os.path.join(args.out, "ranking_eval.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plot(args.out, scatter)


def plot(out, scatter):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(scatter)
    fig, axes = plt.subplots(2, len(names), figsize=(3 * len(names), 6), squeeze=False)
    for j, name in enumerate(names):
        s = scatter[name]
        for i, key in enumerate(("time", "learned")):
            ax = axes[i][j]
            ax.scatter(s[key], [1e3 * t for t in s["measured"]], s=6)
            ax.set_title(f"{name}: {key}", fontsize=8)
            ax.set_xlabel("predicted seconds" if key == "time" else "learned cost (lower: faster)", fontsize=7)
            ax.set_ylabel("measured ms", fontsize=7)
            ax.tick_params(labelsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "predicted_vs_measured.png"), dpi=110)


if __name__ == "__main__":
    main()

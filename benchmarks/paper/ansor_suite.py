"""Ansor's single-operator suite (TVM's meta_schedule.testing.te_workload) through tvm_ttile's MetaSchedule
plug-in exactly as a TVM user calls it, side by side with MetaSchedule's default search.

    python benchmarks/paper/ansor_suite.py --families C2D GMM DIL --ttile-trials 50 --ms-trials 50 \
        --out benchmarks/results/ansor_suite_zen4/suite

For each workload (family, configuration index): `ms.tune_tir(mod, target, space=TTileSpaceGenerator(),
strategy=TTileSearch(...))` with `--ttile-trials`, and MetaSchedule's default search (post-order-apply,
evolutionary, XGBoost) with each of `--ms-trials`, all through the same builder and runner (tune.run_tuner),
databases in OUT's directory under work/ (resumed; `--fresh SYSTEM ...` moves a system's earlier ones aside
and tunes it afresh). Each best is built, checked against a numpy reference,
then every build of the workload is timed again round-robin in this process (`--rounds` rounds, median).
Workloads tvm_ttile does not tune get the one-line reason in their row (MetaSchedule still runs). The peak is
measured in the run. Writes OUT.json and OUT.md after every workload.

`--sampler-option NAME=VALUE` (repeatable): tvm_ttile's sampler options; its work dirs carry them in their names.
`--schemes TEXT ...` (with one workload): scheme texts lowered as tvm_ttile lowers them, no tuning, verified and
timed in the same rounds beside the tuned builds (is a gap the search's or the lowering's?).
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
from tvm_ttile.timing import evaluator, round_robin
from tvm_ttile.evaluation import command_line


def reference(family, params, inputs):
    """numpy's result of the workload on `inputs` (params with their defaults filled in, _conv_params)."""
    from tvm_ttile.operators import conv1d_nwc_reference, conv2d_nhwc_reference

    x, w = inputs
    if family == "GMM":
        return x @ w
    if family == "C1D":  # (N, L, CI, CO, kernel, stride, padding, dilation, groups)
        stride, pad, dil, groups = (tuple(params[5:]) + (1, 0, 1, 1)[len(params) - 5:])
        if groups != 1:
            raise ValueError("no numpy reference for grouped C1D")
        return conv1d_nwc_reference(x, w, stride, pad, dil)
    if family in ("C2D", "DIL", "GRP"):
        n, h, wd, ci, co, k, stride, pad, dil, groups = params
        return conv2d_nhwc_reference(x, w, stride, pad, dil, groups)
    if family == "DEP":  # weights (factor 1, k, k, C): one group per channel
        n, h, wd, c, k, stride, pad = params[:7]
        return conv2d_nhwc_reference(x, w[0][:, :, None, :], stride, pad, params[7] if len(params) > 7 else 1, c)
    raise ValueError(f"no numpy reference for family {family}")


def _conv_params(params):
    """te_workload's conv2d_nhwc arguments with their defaults: (N, H, W, CI, CO, kernel, stride, pad, dilation,
    groups)."""
    defaults = (1, 0, 1, 1)  # stride, padding, dilation, groups
    return tuple(params) + defaults[len(params) - 6:]


def tune_workload(family, idx, cpu, args, root):
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.analysis import estimate_tir_flops
    from tvm.s_tir.meta_schedule.testing import te_workload

    from tvm_ttile.lowering import lower
    from tvm_ttile.measure import MeasureSettings
    from tvm_ttile.metaschedule import TTileSearch, TTileSpaceGenerator, open_database, records_of, ttile_problem
    from tvm_ttile.microkernels.catalog import catalog_for
    from tvm_ttile.samplers.base import options_text
    from tvm_ttile.scheme import Scheme
    from tvm_ttile.tune import run_tuner
    from tvm_ttile.workdir import claim, work_key

    func, params = te_workload.CONFIGS[family]
    params = params[idx]
    mod = tvm.IRModule({"main": te_workload.create_te_workload(family, idx)})
    target = cpu.target(args.threads)
    flops = float(estimate_tir_flops(mod))
    settings = MeasureSettings()
    problem, reason = ttile_problem(mod, target)
    row = {"family": family, "config": idx, "params": list(params), "flops": flops,
           "problem": None if problem is None else f"{problem.op} {dict(problem.sizes)} batch {problem.batch} "
                                                   f"stride {problem.stride} dilation {problem.dilation}",
           "systems": {}}
    builds = {}
    runs = []
    if problem is not None:
        catalog = catalog_for(cpu, problem)
        runs.append(("tvm_ttile", args.ttile_trials, TTileSpaceGenerator(),
                     TTileSearch(kept=catalog.kept, fallback=catalog.ranked(), threads=args.threads,
                                 sampler_options=args.sampler_options),
                     ms.cost_model.RandomModel()))
    else:
        row["systems"]["tvm_ttile"] = {"refused": reason}
    for trials in args.ms_trials:
        runs.append((f"metaschedule-{trials}", trials, "post-order-apply", "evolutionary", "xgb"))
    for name, trials, space, strategy, cost in runs:
        # tvm_ttile's sampler options name its work dir: a run with others must not resume this one's records.
        dirname = (f"{name}-{options_text(args.sampler_options, '-')}" if name == "tvm_ttile" and args.sampler_options
                   else name)
        work_dir = os.path.join(root, "work", f"{family}-{idx}-{dirname}")
        if name in args.fresh and os.path.isdir(work_dir):  # kept aside, never deleted: its records stay readable
            aside = f"{work_dir}.earlier-{time.strftime('%Y%m%d-%H%M%S')}"
            os.rename(work_dir, aside)
            print(f"{name} {family}-{idx}: tuning afresh; the earlier work dir moved to {aside}", flush=True)
        claim(work_dir, work_key(target, args.threads, settings, cpu))  # before MetaSchedule writes its files
        database = open_database(work_dir)
        todo = max(trials - len(records_of(database, mod)), 0)
        seconds, database = run_tuner(flops, mod, target, work_dir, database, todo, space=space, strategy=strategy,
                                      cost_model=cost, seed=0, settings=settings, threads=args.threads, cpu=cpu,
                                      trials_per_iter=min(64, trials), progress=True, label=f"{name} {family}-{idx}")
        records = records_of(database, mod)
        if not records:
            row["systems"][name] = {"error": "no successful measurement", "tuning_seconds": seconds}
            continue
        sch = tvm.s_tir.Schedule(mod)
        records[0].trace.apply_to_schedule(sch, remove_postproc=False)
        lib = tvm.compile(sch.mod, target=target)
        builds[name] = lib
        row["systems"][name] = {"trials": len(records), "tuning_seconds": round(seconds, 1)}
    for i, text in enumerate(args.schemes):  # fixed schemes, lowered as tvm_ttile lowers them
        name = f"scheme {i + 1}"
        try:
            sch = tvm.s_tir.Schedule(mod)
            lower(problem, Scheme.parse(text), sch, threads=args.threads)
            builds[name] = tvm.compile(sch.mod, target=target)
            row["systems"][name] = {"scheme": text}
        except Exception as e:  # noqa: BLE001 - reported in the row
            row["systems"][name] = {"scheme": text, "error": str(e).splitlines()[0] if str(e) else repr(e)}
    # Verify every build against numpy on one set of random inputs.
    rng = np.random.default_rng(0)
    main = mod["main"]
    inputs = [rng.standard_normal([int(d) for d in p.shape], dtype=np.float32) for p in main.params[:-1]]
    ref_params = _conv_params(params) if family in ("C2D", "DIL", "GRP") else params
    ref = reference(family, ref_params, inputs)
    dev = tvm.cpu()
    out_shape = [int(d) for d in main.params[-1].shape]
    args_of = {}
    for name, lib in builds.items():
        tensors = [tvm.runtime.tensor(v, dev) for v in inputs] + [tvm.runtime.tensor(np.zeros(out_shape, np.float32), dev)]
        lib["main"](*tensors)
        err = float(np.abs(tensors[-1].numpy() - ref).max())
        ok = bool(np.isfinite(err) and err <= 1e-3 * max(1.0, float(np.abs(ref).max())))
        row["systems"][name].update(verified=ok, max_abs_error=err)
        args_of[name] = tensors
    # Time every verified build round-robin.
    times = round_robin({name: (lambda name=name: evaluator(builds[name].mod, repeat=1, min_repeat_ms=200)(
        *args_of[name]).mean) for name in builds if row["systems"][name]["verified"]}, args.rounds)
    for name, secs in times.items():
        med = statistics.median(secs)
        row["systems"][name].update(ms=round(med * 1e3, 4), gflops=round(flops / med / 1e9, 2),
                                    spread_pct=round(100 * (max(secs) - min(secs)) / med, 1))
    return row


def write(data, out):
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump(data, f, indent=1)
    peak = data["peak_gflops"]
    names = ["tvm_ttile"] + [f"metaschedule-{t}" for t in data["ms_trials"]]
    lines = [f"# Ansor's suite through the plug-in, {data['threads']} thread(s)", "",
             f"Command: `{data['command']}`", "",
             f"Machine: {data['machine']['cpu']} ({data['machine']['isa']}), peak {peak:.1f} GFLOPS measured in the "
             f"run; {data['date']}. Medians of {data['rounds']} round-robin rounds in one process; every build "
             "verified against numpy before timing. A ratio marked (level) differs from 1 by less than the larger "
             "spread (max - min over the rounds, in % of the median) of the two builds.", "",
             "| workload | " + " | ".join(f"{n} GFLOPS (% peak) | {n} tuning s" for n in names)
             + " | tvm_ttile / " + " | tvm_ttile / ".join(names[1:]) + " |",
             "|---|" + "---:|---:|" * len(names) + "---:|" * (len(names) - 1)]
    per_family = {}
    for key, row in data["workloads"].items():
        cells, s = [], row["systems"]
        for n in names:
            r = s.get(n, {})
            if "gflops" in r:
                cells += [f"{r['gflops']:.1f} ({100 * r['gflops'] / peak:.0f}%)", f"{r['tuning_seconds']:.0f}"]
            else:
                cells += [r.get("refused") or r.get("error") or ("not verified" if r else "-"), "-"]
        ratios = []
        for n in names[1:]:
            if "gflops" in s.get("tvm_ttile", {}) and "gflops" in s.get(n, {}):
                ratio = s["tvm_ttile"]["gflops"] / s[n]["gflops"]
                per_family.setdefault((row["family"], n), []).append(ratio)
                spread = max(s["tvm_ttile"]["spread_pct"], s[n]["spread_pct"]) / 100
                ratios.append(f"{ratio:.2f}x" + (" (level)" if abs(ratio - 1) < spread else ""))
            else:
                ratios.append("-")
        lines.append(f"| {key} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    lines += ["", "Geometric mean of tvm_ttile's speed over each MetaSchedule run, per family:", ""]
    for (family, n), ratios in sorted(per_family.items()):
        geo = float(np.exp(np.mean(np.log(ratios))))
        lines.append(f"- {family} against {n}: {geo:.3f}x over {len(ratios)} workloads")
    fixed = [(key, n, r) for key, row in data["workloads"].items() for n, r in row["systems"].items()
             if n.startswith("scheme ")]
    if fixed:
        lines += ["", "Fixed schemes (`--schemes`), lowered as tvm_ttile lowers them, timed in the same rounds:", "",
                  "| workload | scheme | GFLOPS (% peak) | spread % | / tvm_ttile's tuned best |", "|---|---|---:|---:|---:|"]
        for key, n, r in fixed:
            best = data["workloads"][key]["systems"].get("tvm_ttile", {}).get("gflops")
            if "gflops" in r:
                lines.append(f"| {key} | {n}: `{r['scheme']}` | {r['gflops']:.1f} ({100 * r['gflops'] / peak:.0f}%) | "
                             f"{r['spread_pct']:.1f} | " + (f"{r['gflops'] / best:.2f}x |" if best else "- |"))
            else:
                lines.append(f"| {key} | {n}: `{r['scheme']}` | {r.get('error') or 'not verified'} | - | - |")
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None):
    from tvm.s_tir.meta_schedule.testing import te_workload

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.cli import parse_options
    from tvm_ttile.compare import library_versions
    from tvm_ttile.errors import TTileError
    from tvm_ttile.samplers import make_sampler

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--families", nargs="+", default=["C2D", "GMM", "DIL"])
    p.add_argument("--configs", nargs="+", type=int, default=None, help="configuration indices (default: all)")
    p.add_argument("--ttile-trials", type=int, default=50)
    p.add_argument("--ms-trials", nargs="+", type=int, default=[50])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--schemes", nargs="+", default=[], metavar="TEXT",
                   help="scheme texts timed beside the tuned builds, untuned (use with one workload)")
    p.add_argument("--sampler-option", action="append", default=[], metavar="NAME=VALUE",
                   help="an option of tvm_ttile's sampler (as tvm-ttile tune's); its work dirs are named by them")
    p.add_argument("--fresh", nargs="+", default=[], metavar="SYSTEM",
                   help="systems tuned afresh (tvm_ttile, metaschedule-N): their earlier work dirs are moved aside "
                        "instead of resumed")
    p.add_argument("--out", required=True, help="path prefix of the .json and .md results")
    args = p.parse_args(argv)
    try:  # bad names or values: one line, before anything runs
        args.sampler_options = parse_options(args.sampler_option)
        make_sampler("ttile", 0, **args.sampler_options)
    except TTileError as e:
        p.error(str(e))
    known = {"tvm_ttile"} | {f"metaschedule-{t}" for t in args.ms_trials}
    if set(args.fresh) - known:
        p.error(f"--fresh names no system of this run: {sorted(set(args.fresh) - known)}; the run's systems are "
                f"{sorted(known)}")
    if args.schemes and (len(args.families) > 1 or args.configs is None or len(args.configs) > 1):
        p.error("--schemes needs one workload: one family and one --configs index")
    cpu = cpu_mod.detect_host()
    cpu_mod.use_threads(args.threads)
    peak = cpu_mod.measure_peak(cpu, threads=args.threads)
    data = {"command": command_line() if argv is None else "",
            "machine": dict(cpu.describe(), platform=platform.platform()), "threads": args.threads,
            "ttile_trials": args.ttile_trials, "sampler_options": args.sampler_options,
            "ms_trials": args.ms_trials, "rounds": args.rounds,
            "versions": library_versions(), "peak_gflops": peak["peak_gflops"], "date": time.strftime("%Y-%m-%d %H:%M"),
            "workloads": {}}
    root = os.path.dirname(args.out) or "."
    for family in args.families:
        n = len(te_workload.CONFIGS[family][1])
        for idx in args.configs if args.configs is not None else range(n):
            if idx < n:
                data["workloads"][f"{family}-{idx}"] = tune_workload(family, idx, cpu, args, root)
                write(data, args.out)
    print(open(args.out + ".md").read())


def rewrite(out):
    """Write OUT.md again from OUT.json (after a change of the table's form)."""
    with open(out + ".json") as f:
        write(json.load(f), out)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rewrite"]:
        rewrite(sys.argv[2])
    else:
        main()

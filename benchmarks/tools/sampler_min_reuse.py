"""A/B of the ttile sampler's `min_reuse` option: the paper's uniform draw of the reuse-loop length (1)
against floors (default 32 reduction steps per microkernel call; a floor above the reduction extent, e.g. 4096,
puts the whole reduction in every call), same layers, seeds and 50 trials each. `--option weights_first --values
0.5` varies another option of the ttile sampler the same way, against its default; `--option
strategy:in_place_variants --values 0` an option of the random search strategy.

    python benchmarks/tools/sampler_min_reuse.py [--layers ResNet18-2,ResNet18-9,ResNet18-12,ResNet18-7] [--floors 32]

Single thread, weights prepacked, each best verified against numpy. Pairs run back to back, so machine noise
hits both sides alike. Writes benchmarks/results/sampler_min_reuse.md.
"""
import argparse
import dataclasses
import os
import statistics
import time
from tvm_ttile.evaluation import command_line

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="ResNet18-2,ResNet18-9,ResNet18-12,ResNet18-7")
    ap.add_argument("--option", default="min_reuse", help="the ttile sampler option to vary (strategy:NAME: the "
                                                          "random strategy's option NAME)")
    ap.add_argument("--values", "--floors", default="32",
                    help="comma-separated values, each against the option's default (min_reuse: 1)")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "sampler_min_reuse.md"))
    args = ap.parse_args()

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.cli import parse_options
    from tvm_ttile.operators import get_layer
    from tvm_ttile.options import as_type_of
    from tvm_ttile.samplers.ttile import TTileSampler
    from tvm_ttile.strategies.drawn_order import RandomStrategy
    from tvm_ttile.tune import tune

    host = cpu_mod.detect_host()
    of_strategy = args.option.startswith("strategy:")
    option = args.option.partition(":")[2] if of_strategy else args.option
    if of_strategy:
        base = RandomStrategy.all_options()[option][0]
        values = [as_type_of(base, v, option, "strategy 'random'") for v in args.values.split(",")]
    else:
        base = TTileSampler.all_options()[option][0]
        values = [parse_options([f"{option}={v}"])[option] for v in args.values.split(",")]
    rows, gains = [], {v: [] for v in values}
    for name in args.layers.split(","):
        op = dataclasses.replace(get_layer(name), prepack=True)
        for seed in range(args.seeds):
            pct = {}
            for value in (base, *values):
                r = tune(op, host, trials=args.trials, seed=seed, progress=False,
                         **({"strategy_options": {option: value}} if of_strategy else
                            {"sampler_options": {option: value}}))
                pct[value] = r.percent_of_peak if r.verified else float("nan")
                rows.append(f"| {name} | {seed} | {value} | {pct[value]:.1f} | {r.verified} | `{r.scheme}` |")
                print(rows[-1], flush=True)
            for v in values:
                gains[v].append(pct[v] - pct[base])
    lines = [f"# {'random strategy' if of_strategy else 'ttile sampler'}: {option} {args.values} against its default {base}", "",
             f"Command: `{command_line()}` ({time.strftime('%Y-%m-%d %H:%M')}); {host.describe()}; "
             f"1 thread; {args.trials} trials per run; weights prepacked; % of peak of each run's verified best.", "",
             f"| layer | seed | {args.option} | % of peak | verified | best scheme |", "|---|---:|---:|---:|---|---|", *rows, ""]
    lines += [f"{args.option} {v} minus {base}, per (layer, seed): {', '.join(f'{g:+.1f}' for g in gs)} points; "
              f"median {statistics.median(gs):+.1f}, wins {sum(g > 0 for g in gs)} of {len(gs)}." for v, gs in gains.items()]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[-len(values):]))


if __name__ == "__main__":
    main()

"""Time several tuned builds of one network side by side: the databases of earlier `tvm-ttile tune-model`
runs (their --work-dir), each built and checked against the untuned build, then every build and ONNX Runtime
timed round-robin, each in a fresh process of its own per round (tvm_ttile.isolated), so that a disturbed moment
of this shared machine hits all of them alike and no system's threads disturb another's.
Separate tune-model runs compare badly here: each times its network at another moment.

    python benchmarks/tools/network_ab.py resnet18 LABEL=WORK_DIR [LABEL=WORK_DIR ...] [--input-shape 1,3,224,224]
        [--rounds 8] [--also-with VAR=VALUE] [--input-permute-apart LABEL,...] --out FILE.md

`--compiled LABEL,...`: those builds' VM programs are compiled to machine code (relax.build's exec_mode="compiled")
instead of interpreted as bytecode; the same work dir may appear under two labels.
`--also-with VAR=VALUE`: every build and library timed a second time, in processes with that environment variable
(e.g. GLIBC_TUNABLES=glibc.malloc.hugetlb=1: glibc's malloc asks for transparent huge pages), labelled
"NAME VAR=VALUE". `--input-permute-apart`: those builds are prepared as before the first conv2d read the NCHW
input itself (network.prepare's input_layout_in_conv=False: the input's permute to NHWC a function of its own);
their work dirs need records for that form's tasks.

No tuning: a work dir without records for a task builds that task untuned (the report says how many records).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
from tvm_ttile.evaluation import command_line


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("builds", nargs="+", help="LABEL=WORK_DIR")
    ap.add_argument("--input-shape", help="NCHW, e.g. 1,3,224,224 (default: the model's)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)  # the peak, TVM's pool and the libraries at this count
    ap.add_argument("--libraries", default="onnxruntime")
    ap.add_argument("--also-with", metavar="VAR=VALUE", help="time every system again with this variable set")
    ap.add_argument("--input-permute-apart", default="", metavar="LABEL,...",
                    help="builds prepared with the input's permute to NHWC as a function of its own")
    ap.add_argument("--compiled", default="", metavar="LABEL,...",
                    help="builds whose VM program is compiled to machine code (relax.build exec_mode='compiled')")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import network as nw
    from tvm_ttile.baselines.engines import create as engine
    from tvm_ttile.network.report import TOLERANCE
    from tvm_ttile.isolated import IsolatedTimer, Saved
    from tvm_ttile.metaschedule import open_database
    from tvm_ttile.models.importers import load_model

    builds = dict(b.split("=", 1) for b in args.builds)
    if args.also_with and "=" not in args.also_with:
        sys.exit(f"--also-with {args.also_with!r}: give VAR=VALUE")
    extra = dict([args.also_with.split("=", 1)]) if args.also_with else {}

    apart = set(filter(None, args.input_permute_apart.split(",")))
    compiled = set(filter(None, args.compiled.split(",")))
    for option, labels in (("--input-permute-apart", apart), ("--compiled", compiled)):
        if labels - set(builds):
            sys.exit(f"{option}: no build labelled {sorted(labels - set(builds))}")
    missing = [d for d in builds.values() if not os.path.isdir(d)]
    if missing:
        sys.exit(f"no such work dir: {missing}")
    cpu = cpu_mod.detect_host()
    cpu_mod.use_threads(args.threads)
    peak = cpu_mod.run_peak(cpu, threads=args.threads)["peak_gflops"]
    shape = tuple(int(x) for x in args.input_shape.split(",")) if args.input_shape else None
    net = load_model(args.model, shape, seed=0)  # the weights tune-model drew (seed 0)
    mod = nw.prepare(net.mod)
    mod_apart = nw.prepare(net.mod, input_layout_in_conv=False) if apart else None
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    ref = nw.run(nw.build_network(mod, None, cpu=cpu, threads=args.threads), x)
    scale = float(np.max(np.abs(ref))) or 1.0
    tmp = tempfile.TemporaryDirectory(prefix="network_ab_")
    timer, notes = IsolatedTimer(x, args.threads, tmp.name), []

    def add(label, saved):  # each system, and with --also-with the same system again in its environment
        timer.add(label, saved)
        if extra:
            timer.add(f"{label} {args.also_with}", saved, env=extra)

    for label, wd in builds.items():
        ex = nw.build_executable(mod_apart if label in apart else mod, wd, cpu=cpu, threads=args.threads,
                                 exec_mode="compiled" if label in compiled else "bytecode")
        err = float(np.max(np.abs(nw.run(nw.vm_of(ex), x) - ref)))
        records = len(open_database(wd).get_all_tuning_records())
        notes.append(f"{label}: `{wd}`, {records} records, max abs difference to the untuned build {err:.2e}"
                     + ("; the input's permute a function of its own" if label in apart else "")
                     + ("; its VM program compiled to machine code" if label in compiled else ""))
        if err > TOLERANCE * scale:
            sys.exit(f"{label}: output differs from the untuned build by {err} (> {TOLERANCE} x {scale})")
        add(label, Saved.tvm(ex, tmp.name, label))
    for lib in filter(None, args.libraries.split(",")):
        run, version = engine(lib).runner_for(net, x, args.threads)
        notes.append(f"{version}: max abs difference to the untuned build {float(np.max(np.abs(run() - ref))):.2e}")
        add(lib, Saved.library(lib, net, x, tmp.name))
    ms = timer.run(args.rounds)
    tmp.cleanup()
    ref_lib = next((lib for lib in ("onnxruntime", "torch") if lib in ms), None)
    gflop = sum(t.flops * t.weight for t in nw.extract_tasks(mod, cpu=cpu, threads=args.threads)) / 1e9
    lines = [f"# {args.model}: tuned builds side by side", "",
             f"Command: `{command_line()}` ({time.strftime('%Y-%m-%d %H:%M')}); {cpu.describe()['cpu']}, "
             f"peak {peak:.1f} GFLOPS measured in this run; {args.threads} thread(s); {args.rounds} round-robin rounds of 5 repeats, "
             "each system in a process of its own every round.", "",
             "| build | median ms | IQR | min | % of peak |" + (f" / {ref_lib} |" if ref_lib else ""),
             "|---|---:|---:|---:|---:|" + ("---:|" if ref_lib else "")]
    med = {name: statistics.median(v) for name, v in ms.items()}
    for name, v in ms.items():
        q = statistics.quantiles(v, n=4)
        lines.append(f"| {name} | {med[name]:.2f} | {q[2] - q[0]:.2f} | {min(v):.2f} | "
                     f"{100 * gflop / (med[name] / 1e3) / peak:.1f} |" + (f" {med[name] / med[ref_lib]:.3f} |" if ref_lib else ""))
    lines += ["", *[f"- {n}" for n in notes]]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

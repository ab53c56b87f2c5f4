"""Per layer, tvm_ttile at N threads against itself at 1 thread and against ONNX Runtime and oneDNN at N threads
(and 1), side by side in one process.

    python benchmarks/paper/threads_layers.py --threads 2 --out benchmarks/results/threads_zen4/layers_2threads

For each layer: tvm_ttile tuned at 1 thread and at N threads (`--trials` trials each, seed 0, databases in
OUT/work, resumable), each best verified against numpy; the libraries' outputs checked against numpy; then
every kernel timed again round-robin over `--rounds` rounds in this process (TVM's thread pool holds N threads;
the 1-thread kernels have no parallel loop, the libraries are pinned to their thread count per call). The peak
at 1 and at N threads is measured in the run; every % is of the peak at the kernel's own thread count. Writes
OUT.json and OUT.md after every layer. Runs unchanged at any N on a bigger host (`--threads all`).
"""
import argparse
import dataclasses
import json
import os
import platform
import statistics
import time
from tvm_ttile.evaluation import command_line

LAYERS = "ResNet18-2,ResNet18-4,ResNet18-6,ResNet18-9,ResNet18-12,Yolo9000-12,Yolo9000-13,Yolo9000-18"
LIBS = ("onnxruntime", "onednn")


def main(argv=None):
    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.cli import threads_arg
    from tvm_ttile.compare import library_versions

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", default=LAYERS)
    p.add_argument("--threads", type=threads_arg, default=2)
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--no-prepack", action="store_true", help="weights as inputs instead of constants")
    p.add_argument("--out", required=True, help="path prefix of the .json and .md results")
    args = p.parse_args(argv)
    n = args.threads
    cpu = cpu_mod.detect_host()
    cpu_mod.use_threads(n)  # before anything runs a parallel loop in this process
    peaks = {t: cpu_mod.measure_peak(cpu, threads=t) for t in (1, n)}
    data = {"command": command_line() if argv is None else "",
            "machine": dict(cpu.describe(), platform=platform.platform()), "threads": n, "trials": args.trials,
            "rounds": args.rounds, "prepack": not args.no_prepack, "versions": library_versions(),
            "peak_gflops": {t: peaks[t]["peak_gflops"] for t in peaks},
            "bandwidth_gbs": {t: peaks[t]["bandwidth_gbs"] for t in peaks},
            "date": time.strftime("%Y-%m-%d %H:%M"), "layers": {}}
    for layer in args.layers.split(","):
        data["layers"][layer] = run_layer(layer, cpu, n, args, os.path.dirname(args.out) or ".")
        write(data, args.out)
    print(open(args.out + ".md").read())


def run_layer(layer, cpu, n, args, root):
    from tvm_ttile.baselines import in_process_timers, run_system
    from tvm_ttile.operators import get_layer
    from tvm_ttile.scheme import Scheme

    op = dataclasses.replace(get_layer(layer), prepack=not args.no_prepack)
    entries, out = [], {"flops": op.flops, "systems": {}}
    for t in dict.fromkeys((1, n)):
        work = os.path.join(root, "work", f"{cpu.isa.name}-{layer}{'-prepack' if op.prepack else ''}-{t}threads")
        res = run_system("tvm_ttile", op, cpu, trials=args.trials, seed=0, work_dir=work, threads=t)
        if not res.verified:
            raise SystemExit(f"{layer}: tvm_ttile's best at {t} threads does not match numpy")
        from tvm_ttile.metaschedule import measured_schemes, open_database
        import tvm

        scheme = measured_schemes(open_database(work), tvm.IRModule({"main": op.prim_func(cpu.lanes)}), 1)[0]
        out["systems"][f"tvm_ttile@{t}"] = {"tuning_seconds": res.seconds, "trials": res.trials, "scheme": scheme,
                                           "parallel": Scheme.parse(scheme).parallel_balance(t),
                                           "tuning_gflops": res.gflops, "verified": True}
        entries.append((f"tvm_ttile@{t}", t, ("tvm_ttile", work)))
        for lib in LIBS:
            try:
                lres = run_system(lib, op, cpu, threads=t)  # checked against numpy
            except Exception as e:  # noqa: BLE001 - a missing library is reported, not fatal
                out["systems"][f"{lib}@{t}"] = {"error": str(e).splitlines()[0]}
                continue
            out["systems"][f"{lib}@{t}"] = {"version": lres.version, "verified": lres.verified}
            entries.append((f"{lib}@{t}", t, (lib, None)))
    timers = [in_process_timers([entry], op, cpu, t)[0] for _, t, entry in entries]
    times = [[] for _ in entries]
    for _ in range(args.rounds):  # round-robin: a disturbed moment hits every kernel alike
        for i, timer in enumerate(timers):
            times[i].append(timer())
    for (name, t, _), secs in zip(entries, times):
        g = [op.flops / s / 1e9 for s in secs]
        out["systems"][name].update(gflops=statistics.median(g), gflops_rounds=g, threads=t)
    return out


def write(data, out):
    n = data["threads"]
    with open(out + ".json", "w") as f:
        json.dump(data, f, indent=1)
    peak = {int(k): v for k, v in data["peak_gflops"].items()}
    bw = {int(k): v for k, v in data["bandwidth_gbs"].items()}
    m = data["machine"]
    lines = [f"# tvm_ttile at {n} threads against 1 thread and the libraries, per layer", "",
             f"Machine: {m['cpu']} ({m['isa']}), {m['cores']} cores, L2 {m['l2_bytes'] // 1024} KiB, L3 "
             f"{m['l3_bytes'] // 2**20} MiB; {data['date']}.", "",
             f"Command: `{data['command']}`", "",
             f"Peak measured in this run: {peak[1]:.1f} GFLOPS at 1 thread, {peak[n]:.1f} at {n} threads; memory "
             f"{bw[1]:.1f} / {bw[n]:.1f} GB/s. tvm_ttile: {data['trials']} trials per layer and thread count, seed 0; "
             f"weights {'prepacked (constants)' if data['prepack'] else 'as inputs'}. Every kernel was checked against "
             f"numpy, then timed again {data['rounds']} rounds round-robin in one process: medians (GFLOPS), with % "
             f"of the peak at the kernel's thread count. Versions: {data['versions']}.", "",
             f"| layer | tvm_ttile 1t | tvm_ttile {n}t | speedup | ONNX Runtime {n}t | oneDNN {n}t | "
             f"tvm_ttile / best library | ONNX Runtime 1t | oneDNN 1t | {n}t scheme's chunks |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    speedups, ratios = [], []
    for layer, res in data["layers"].items():
        s = res["systems"]
        g = lambda k: s.get(k, {}).get("gflops")  # noqa: E731
        cell = lambda k, t: f"{g(k):.1f} ({100 * g(k) / peak[t]:.0f}%)" if g(k) else "-"  # noqa: E731
        one, many = g("tvm_ttile@1"), g(f"tvm_ttile@{n}")
        libs = [g(f"{lib}@{n}") for lib in LIBS if g(f"{lib}@{n}")]
        speedups.append(many / one)
        ratios.append(many / max(libs) if libs else None)
        par = s[f"tvm_ttile@{n}"]["parallel"]
        lines.append(f"| {layer} | {cell('tvm_ttile@1', 1)} | {cell(f'tvm_ttile@{n}', n)} | {many / one:.2f}x | "
                     f"{cell(f'onnxruntime@{n}', n)} | {cell(f'onednn@{n}', n)} | "
                     f"{ratios[-1]:.3f} | {cell('onnxruntime@1', 1)} | {cell('onednn@1', 1)} | "
                     f"{par['chunks']} ({par['kind']}) |" if ratios[-1] else "| - |")
    valid = [r for r in ratios if r]
    lines += ["", f"Median speedup of tvm_ttile from 1 to {n} threads: **{statistics.median(speedups):.2f}x** "
                  f"({min(speedups):.2f}-{max(speedups):.2f}). At {n} threads tvm_ttile is at least as fast as the faster "
                  f"library on **{sum(r >= 1 for r in valid)} of {len(valid)}** layers (within 2%: "
                  f"{sum(r >= 0.98 for r in valid)}); geometric mean of tvm_ttile / best library "
                  f"{statistics.geometric_mean(valid):.3f}.", "",
              f"Schemes at {n} threads (the best of each layer):", ""]
    for layer, res in data["layers"].items():
        s = res["systems"][f"tvm_ttile@{n}"]
        lines.append(f"- {layer}: `{s['scheme']}` ({s['trials']} trials, {s['tuning_seconds']:.0f} s of tuning)")
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

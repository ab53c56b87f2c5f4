"""One tuned work dir built by two versions of tvm_ttile, side by side: the same records must make the same
network. Each version builds the network in a process of its own (the other from a git worktree of BASE on
PYTHONPATH), both builds run the same input (their outputs compared exactly and against the untuned build), then
both and ONNX Runtime are timed round-robin, each in a process of its own every round.

    python benchmarks/experiments/commit_build_ab.py resnet18 WORK_DIR --base 91ac827 --threads 1 --rounds 7 \
        --out benchmarks/results/refactor_ab_xeon_emr.md
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

BUILD = r"""
import json, sys
import numpy as np
model, work_dir, threads, out, shape = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
from tvm_ttile import cpu as cpu_mod
from tvm_ttile import network as nw
from tvm_ttile.models.importers import load_model
cpu_mod.use_threads(threads)
cpu = cpu_mod.detect_host()
net = load_model(model, tuple(int(v) for v in shape.split(",")) if shape else None, seed=0)
mod = nw.prepare(net.mod, cpu)
try:
    ex = nw.build_executable(mod, work_dir, cpu=cpu, threads=threads)
except TypeError:  # a version before Context: cpu and threads by position
    ex = nw.build_executable(mod, work_dir, cpu, threads)
ex.export_library(out + ".so")
x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
np.save(out + ".out.npy", nw.run(nw.vm_of(ex), x))
np.save(out + ".in.npy", x)
import tvm_ttile
print(tvm_ttile.__file__)
"""


def build(version_path: str | None, args, out: str) -> None:
    env = dict(os.environ)
    if version_path:
        env["PYTHONPATH"] = version_path + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", BUILD, args.model, args.work_dir, str(args.threads), out,
                           args.input_shape or ""], env=env, capture_output=True, text=True,
                          cwd=version_path or os.getcwd())
    if proc.returncode:
        sys.exit(f"building with {version_path or 'this checkout'} failed: {proc.stderr.strip().splitlines()[-1]}")
    used = proc.stdout.strip().splitlines()[-1]
    if version_path and not os.path.realpath(used).startswith(os.path.realpath(version_path)):
        sys.exit(f"the build meant for {version_path} imported tvm_ttile from {used}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("work_dir")
    ap.add_argument("--base", required=True, help="the other version: a commit of this repository")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--input-shape")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    args.work_dir = os.path.abspath(args.work_dir)
    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.evaluation import md_table, provenance
    from tvm_ttile.isolated import IsolatedTimer, Saved
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.network import spread

    repo = subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip()
    head = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    with tempfile.TemporaryDirectory(prefix="commit_build_ab_") as tmp:
        tree = os.path.join(tmp, "base")
        subprocess.check_call(["git", "-C", repo, "worktree", "add", "--detach", tree, args.base],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            build(None, args, os.path.join(tmp, "head"))
            build(tree, args, os.path.join(tmp, "base"))
        finally:
            subprocess.call(["git", "-C", repo, "worktree", "remove", "--force", tree])
        outs = {v: np.load(os.path.join(tmp, f"{v}.out.npy")) for v in ("head", "base")}
        x = np.load(os.path.join(tmp, "head.in.npy"))
        same = bool(np.array_equal(outs["head"], outs["base"]))
        diff = float(np.max(np.abs(outs["head"] - outs["base"])))
        cpu = cpu_mod.detect_host()
        timer = IsolatedTimer(x, args.threads, tmp)
        timer.add(f"head {head}", Saved("tvm", os.path.join(tmp, "head.so")))
        timer.add(f"base {args.base}", Saved("tvm", os.path.join(tmp, "base.so")))
        net = load_model(args.model, tuple(int(v) for v in args.input_shape.split(",")) if args.input_shape else None,
                         seed=0)
        timer.add("onnxruntime", Saved.library("onnxruntime", net, x, tmp))
        latencies = {k: spread(v) for k, v in timer.run(args.rounds).items()}
    ort = latencies["onnxruntime"]["median_ms"]
    rows = [(name, f"{v['median_ms']:.2f}", f"{v['iqr_ms']:.2f}", f"{v['min_ms']:.2f}", f"{v['max_ms']:.2f}",
             f"{v['median_ms'] / ort:.3f}") for name, v in latencies.items()]
    lines = [f"# {args.model}: one work dir built by two versions, side by side", "",
             provenance(cpu, threads=args.threads,
                        extra=f"{args.rounds} round-robin rounds of 5 repeats, each system in a process of its own "
                              "every round; work dir " + os.path.relpath(args.work_dir)), "",
             *md_table(["build", "median ms", "IQR", "min", "max", "/ onnxruntime"], rows), "",
             f"Outputs of the two builds on one random input: {'identical' if same else 'differ'} "
             f"(max abs difference {diff:.3g})."]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({"latency": latencies, "identical_outputs": same, "max_abs_difference": diff,
                   "head": head, "base": args.base, "threads": args.threads, "rounds": args.rounds}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Where a tuned network's inference spends its time, with no hook in the network: Linux `perf record` samples a
process that runs the build over and over (the VM's time_evaluator), and the samples are split by function: each
compiled function of the build, TVM's runtime (the VM's own work between calls), libc's fills and copies (which
the kernels' padding passes call), and the rest. The VM's instrument hook (network.profile, the tune-model
report's "ms in network") puts a Python call before and after every kernel; this does not, so it also says what
that hook adds. Shares are turned into ms with the median latency the sampled process measured itself.

    python benchmarks/tools/perf_profile.py resnet18 WORK_DIR [--input-shape 1,3,224,224] [--threads 1] [--seconds 20]
        --out FILE.md

Needs `perf` (linux-tools) and perf_event_paranoid <= 2 (user-space sampling of one's own processes).
"""
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time

from tuned_network import arguments
from tvm_ttile.evaluation import command_line

RUNTIME_LIBRARIES = ("libtvm_runtime", "libtvm_ffi")  # the VM interpreter, its builtins and the FFI
FILLS_AND_COPIES = ("memset", "memmove", "memcpy")
FREQUENCY = 999  # samples a second: few enough interrupts to leave the caches as the network leaves them


def child(library: str, shape: str, seconds: float) -> None:
    """Runs in the sampled process: load the build, warm it, print its median latency, then run inferences for
    `seconds` (sampled)."""
    import numpy as np
    import tvm

    from tvm_ttile.network import vm_of

    vm = vm_of(tvm.runtime.load_module(library))
    x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal([int(v) for v in shape.split(",")])
                           .astype(np.float32), tvm.cpu())
    from tvm_ttile.timing import evaluator

    timer = evaluator(vm, "main", repeat=20, min_repeat_ms=0)
    timer(x)  # warm-up
    # the latency before any sampling (perf's interrupts slow what they sample by a few %)
    print(1e3 * float(np.median(timer(x).results + timer(x).results + timer(x).results)), flush=True)
    end = time.time() + seconds
    while time.time() < end:
        timer(x)


def samples(perf_data: str) -> list:
    """(percent, shared object, symbol) per line of perf's report, self time only."""
    out = subprocess.run(["perf", "report", "-i", perf_data, "--no-children", "--sort", "dso,sym", "--stdio",
                          "-g", "none"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].endswith("%") and parts[2] in ("[.]", "[k]"):
            rows.append((float(parts[0].rstrip("%")), parts[1], " ".join(parts[3:])))
    return rows


def kind_of(dso: str, symbol: str, build: str) -> str:
    if dso == build:
        if symbol.startswith("__tvm_ffi_") or symbol.endswith("@plt"):
            return "the build's call wrappers (__tvm_ffi_*, PLT stubs)"
        return symbol.removesuffix("_compute_")
    if dso.startswith(RUNTIME_LIBRARIES):
        return "TVM runtime (the VM between calls, its builtins, the FFI)"
    if dso.startswith("libc") and any(f in symbol for f in FILLS_AND_COPIES):
        return "libc fills and copies (the padding passes' memset / memcpy)"
    return "other (Python, the kernel, other libraries)"


def main():
    args = arguments(__doc__, numbers={"--seconds": (20.0, "how long to sample")})
    if not shutil.which("perf"):
        sys.exit("perf is not installed (linux-tools); this script samples with it")

    import numpy as np

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import network as nw
    from tvm_ttile.network.in_network import alone_times
    from tvm_ttile.models.importers import load_model

    cpu = cpu_mod.detect_host()
    cpu_mod.use_threads(args.threads)
    shape = tuple(int(x) for x in args.input_shape.split(",")) if args.input_shape else None
    net = load_model(args.model, shape, seed=0)
    ex = nw.build_executable(nw.prepare(net.mod, cpu), args.work_dir, cpu=cpu, threads=args.threads)
    with tempfile.TemporaryDirectory(prefix="perf_profile_") as tmp:
        build = f"{args.model}_build.so"
        library, perf_data = os.path.join(tmp, build), os.path.join(tmp, "perf.data")
        ex.export_library(library)
        env = {**os.environ, "TVM_NUM_THREADS": str(args.threads)}
        # it runs inferences for longer than the sampling window, so that the window holds nothing else
        proc = subprocess.Popen([sys.executable, __file__, "--child", library, ",".join(map(str, net.input_shape)),
                                 str(args.seconds + 2)], stdout=subprocess.PIPE, text=True, env=env)
        try:
            median_ms = float(proc.stdout.readline())
        except ValueError:
            sys.exit("the sampled process failed before its first inferences")
        subprocess.run(["perf", "record", "-F", str(FREQUENCY), "-p", str(proc.pid), "-o", perf_data, "--", "sleep",
                        str(args.seconds)], capture_output=True, check=True)
        proc.wait()
        rows = samples(perf_data)
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    vm = nw.vm_of(ex)
    hooked = nw.profile(vm, x)  # the same build, each call timed by the VM's instrument hook
    alone = alone_times(ex, vm, x)  # ... and each of its functions alone on copies of its arguments, hot and flushed
    by_kind = collections.defaultdict(float)
    for percent, dso, symbol in rows:
        by_kind[kind_of(dso, symbol, build)] += percent
    total = sum(by_kind.values()) or 1.0
    lines = [f"# {args.model}: where an inference's time goes, sampled by perf ({args.threads} thread(s))", "",
             f"Command: `{command_line()}` ({time.strftime('%Y-%m-%d %H:%M')}); {cpu.describe()['cpu']} "
             f"({cpu.isa.name}); `perf record -F {FREQUENCY}` on a process running the build with the VM's "
             f"time_evaluator for {args.seconds:.0f} s, no hook in the network; median inference in that process "
             f"before sampling {median_ms:.2f} ms (60 inferences); ms = share x that median. Beside it, the same build's calls timed by the VM's instrument hook "
             f"(network.profile, as the tune-model report times them; {hooked['repeats']} inferences, median "
             f"{hooked['total_ms']:.2f} ms with the hook).", "",
             "Alone: each function on copies of the arguments it gets in an inference, hot and with the caches "
             "flushed before every call (in_network.alone_times), x its calls.", "",
             "| function or kind | share | ms per inference | ms with the hook | alone hot | alone flushed |",
             "|---|---:|---:|---:|---:|---:|"]
    sums = [0.0, 0.0, 0.0]  # the compiled functions with an alone time: in the network, alone hot, alone flushed
    for kind, percent in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        share, call = percent / total, hooked["calls"].get(kind)
        with_hook = f"{call['ms']:.3f}" if call else "-"
        hot = flushed = "-"
        if call and kind in alone:
            hot_ms, flushed_ms = (1e3 * call["calls"] * alone[kind][k] for k in ("hot_s", "flushed_s"))
            hot, flushed = f"{hot_ms:.3f}", f"{flushed_ms:.3f}"
            sums = [sums[0] + share * median_ms, sums[1] + hot_ms, sums[2] + flushed_ms]
        lines.append(f"| {kind} | {100 * share:.2f}% | {share * median_ms:.3f} | {with_hook} | {hot} | {flushed} |")
    outside = hooked["total_ms"] - sum(c["ms"] for c in hooked["calls"].values())
    lines += ["", f"With the hook, the time in no call (the VM between calls and the hook itself): {outside:.3f} ms.",
              "", f"The compiled functions, with no hook: {sums[0]:.3f} ms in the network (the libc fills and copies "
              f"their padding passes call not included), {sums[1]:.3f} alone hot ({sums[0] / sums[1]:.3f}x), "
              f"{sums[2]:.3f} alone flushed ({sums[0] / sums[2]:.3f}x)." if sums[1] else ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:4], float(sys.argv[4]))
    else:
        main()

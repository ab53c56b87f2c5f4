"""One inference's compiled calls replayed in the network's order on the VM's own buffers, each call timed.

The VM's instrument hook hands over every call's arguments; the calls are then made again from Python, in order,
on those very tensors (the activations where the previous call writes them, the weights the build holds), with
nothing between two calls but a clock read. The ways, round-robin:
- in order: an inference's calls one after the other, as the network makes them;
- hot: each call made twice more on its buffers right before the timed one (its operands as hot as they get);
- in order without the calls named by --leave-out: the others, while those calls' operands (the largest weights)
  no longer pass through the caches. What the others gain bounds what keeping those weights out of the caches
  (non-temporal reads) could give them;
- with --read-weights, in order with each call's constant operands (weights, biases: arguments no call writes)
  read right before it, untimed: they then come from the caches as far as they fit (the last level), as perfect
  prefetching of the next layer's weights during the previous layer would leave them. What the calls gain bounds
  what such prefetching could give;
- with --hook, also the running network with the VM's instrument hook timing each call (network.profile, the
  tune-model report's "ms in network"), per function, beside the replay in order: what the hook adds to them.

    python benchmarks/tools/call_replay.py resnet18 WORK_DIR --input-shape 1,3,224,224 [--threads 1] [--rounds 6]
        [--leave-out conv2d9_] [--read-weights] [--hook] --out FILE.md
"""
import statistics
import sys
import time

from tuned_network import arguments
from tvm_ttile.evaluation import command_line

REPEATS = 5  # timed inferences per way and round, after 3 untimed ones


def main():
    args = arguments(__doc__, flags={"--hook": "also time the network with the VM's instrument hook",
                                     "--read-weights": "also in order with each call's constants read before it"},
                     more=lambda ap: ap.add_argument("--leave-out", default="",
                                                     help="comma-separated parts of function names whose calls the "
                                                          "third way skips"))
    import numpy as np

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import network as nw
    from tvm_ttile.network.in_network import captured_calls
    from tvm_ttile.models.importers import load_model

    cpu = cpu_mod.detect_host()
    cpu_mod.use_threads(args.threads)
    shape = tuple(int(x) for x in args.input_shape.split(",")) if args.input_shape else None
    net = load_model(args.model, shape, seed=0)
    ex = nw.build_executable(nw.prepare(net.mod, cpu), args.work_dir, cpu=cpu, threads=args.threads)
    vm = nw.vm_of(ex)
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    calls = captured_calls(ex, vm, x)  # the VM's own tensors: it keeps them alive
    left_out = [p for p in args.leave_out.split(",") if p]
    skipped = [any(p in s for p in left_out) for s, _, _ in calls]
    if left_out and not any(skipped):
        sys.exit(f"--leave-out {args.leave_out}: no call's function name contains it")

    # A call's constants: the arguments no call writes (each writes its last), found by address, the network's
    # input aside (numpy views of the tensors themselves).
    views = [[np.from_dlpack(t) if hasattr(t, "shape") else None for t in a] for _, _, a in calls]
    written = {v[-1].ctypes.data for v in views if v[-1] is not None}
    constants = [[t for t in v[1:-1] if t is not None and t.ctypes.data not in written] for v in views]

    def inference(way: str) -> list:
        out = []
        for (_, f, a), skip, consts in zip(calls, skipped, constants):
            if way == "without" and skip:
                out.append(None)
                continue
            if way == "hot":
                f(*a)
                f(*a)
            if way == "weights_read":
                for c in consts:
                    c.sum()  # reads every line of it, writes nothing
            t0 = time.perf_counter()
            f(*a)
            out.append(time.perf_counter() - t0)
        return out

    ways = ["in_order", "hot"] + (["without"] if left_out else []) + (["weights_read"] if args.read_weights
                                                                      else [])
    runs, hooked = {w: [] for w in ways}, []
    for r in range(args.rounds):
        for way in ways if r % 2 == 0 else ways[::-1]:
            for _ in range(3):
                inference(way)
            runs[way] += [inference(way) for _ in range(REPEATS)]
        if args.hook:  # per function, all its calls: {symbol: ms}
            hooked.append({s: c["ms"] for s, c in nw.profile(vm, x, repeat=REPEATS).get("calls", {}).items()})
    ms = {w: [None if rs[0][i] is None else 1e3 * statistics.median(run[i] for run in rs)
              for i in range(len(calls))] for w, rs in runs.items()}

    def fmt(v):
        return "-" if v is None else f"{v:.3f}"

    head = ["#", "function", "in order", "hot", "in order / hot"] + (["without the left-out calls"] if left_out
                                                                      else [])
    head += ["constants read first", "MB of constants"] if args.read_weights else []
    lines = [f"# {args.model}: one inference's calls replayed in order on the VM's buffers ({args.threads} thread(s))",
             "", f"Command: `{command_line()}` ({time.strftime('%Y-%m-%d %H:%M')}); "
             f"{cpu.describe()['cpu']} ({cpu.isa.name}); {args.rounds} round-robin rounds of {REPEATS} replayed "
             "inferences per way; medians per call, ms. In order: the calls as the network makes them, on the tensors "
             "it passes them (captured by the VM's instrument hook), no hook while timing. Hot: each call made twice "
             "more on its buffers before the timed one." + (f" Without: in order, the calls of {left_out} skipped."
                                                            if left_out else "")
             + (" Constants read first: in order, each call's constant arguments summed by numpy right before it, "
                "untimed." if args.read_weights else ""), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for i, (symbol, _, _) in enumerate(calls):
        row = [str(i), symbol, fmt(ms["in_order"][i]), fmt(ms["hot"][i]),
               f"{ms['in_order'][i] / ms['hot'][i]:.2f}"] + ([fmt(ms["without"][i])] if left_out else [])
        if args.read_weights:
            row += [fmt(ms["weights_read"][i]), f"{sum(c.nbytes for c in constants[i]) / 1e6:.2f}"]
        lines.append("| " + " | ".join(row) + " |")
    total = {w: sum(v for v in ms[w] if v is not None) for w in ways}
    kept = {w: sum(v for v, s in zip(ms[w], skipped) if v is not None and not s) for w in ways}
    lines += ["", f"All calls: in order {total['in_order']:.3f} ms, hot {total['hot']:.3f} ms "
                  f"({total['in_order'] / total['hot']:.3f}x)."]
    if args.read_weights:
        lines.append(f"With each call's constants read before it: {total['weights_read']:.3f} ms (they gain "
                     f"{total['in_order'] - total['weights_read']:.3f} ms against in order).")
    if left_out:
        lines.append(f"The calls not left out: in order {kept['in_order']:.3f} ms, hot {kept['hot']:.3f} ms, in order "
                     f"without the left-out calls {kept['without']:.3f} ms (they gain "
                     f"{kept['in_order'] - kept['without']:.3f} ms).")
    if hooked:
        lines += ["", "With the hook (network.profile, the same rounds), per function, all its calls, medians of the "
                      "rounds' medians, ms:", "", "| function | with the hook | replayed in order | ratio |",
                  "|---|---:|---:|---:|"]
        per_function = {}
        for i, (symbol, _, _) in enumerate(calls):
            per_function[symbol] = per_function.get(symbol, 0.0) + ms["in_order"][i]
        sums = [0.0, 0.0]
        for symbol, replayed in per_function.items():
            with_hook = statistics.median(h[symbol] for h in hooked)
            sums = [sums[0] + with_hook, sums[1] + replayed]
            lines.append(f"| {symbol} | {with_hook:.3f} | {replayed:.3f} | {with_hook / replayed:.3f} |")
        lines.append(f"| all | {sums[0]:.3f} | {sums[1]:.3f} | {sums[0] / sums[1]:.3f} |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Attention fused in one function (tvm_ttile/attention.py), each of its schedules timed against the three tuned
tasks a network runs when it is not fused (Q K^T, the padded-row softmax, P V).

The network is prepared with `fused_attention=False` and built from WORK_DIR (a tune-model work dir of that form:
its three attention tasks tuned); one inference hands over the first layer's Q, K and V. The three calls run on
them, then each fused schedule (attention.schedules, for this CPU and thread count) on the same Q, K, V, and each
again with a padding mask over the keys (the last tenth at -1e4; a mask the network itself does not have): every
output is checked against float64 numpy before anything is timed. All are then timed round-robin, alone hot and
with the caches flushed before every call (every operand but the first), the three calls as one per round.

    python benchmarks/tools/fused_attention.py MODEL WORK_DIR [--input-shape 1,3,224,224] [--threads 1]
        [--rounds 5] --out FILE.md
"""
import math
import shlex
import statistics
import sys

from tuned_network import arguments

TOLERANCE = 1e-5  # of the output's scale, against float64 numpy


def main():
    args = arguments(__doc__)
    import numpy as np
    import tvm
    from tvm import te

    from tvm_ttile import attention
    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import network as nw
    from tvm_ttile.evaluation import publish
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.network.in_network import captured_calls
    from tvm_ttile.timing import kernel_timer, round_robin

    cpu = cpu_mod.detect_host()
    cpu_mod.use_threads(args.threads)
    shape = tuple(int(x) for x in args.input_shape.split(",")) if args.input_shape else None
    net = load_model(args.model, shape, seed=0)
    ex = nw.build_executable(nw.prepare(net.mod, cpu, fused_attention=False), args.work_dir, cpu=cpu,
                             threads=args.threads)
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    calls = captured_calls(ex, nw.vm_of(ex), x, copy=True, first_only=True)
    shapes = lambda a: [tuple(t.shape) for t in a]  # noqa: E731
    try:  # Q K^T (Q, K, S), the softmax (S, P), P V (P, V, O), by their shapes
        qk = next(c for c in calls if len(c[2]) == 3 and shapes(c[2])[0] == shapes(c[2])[1]
                  and shapes(c[2])[2][-1] == shapes(c[2])[2][-2] == shapes(c[2])[0][-2])
        q_shape, scores = shapes(qk[2])[0], shapes(qk[2])[2]
        soft = next(c for c in calls if shapes(c[2]) == [scores, scores])
        pv = next(c for c in calls if shapes(c[2]) == [scores, q_shape, q_shape])
    except StopIteration:
        sys.exit(f"{args.model}: no Q K^T, softmax, P V calls of a self-attention found in the network")
    lib = ex.mod.imports[0]
    q, k, v = qk[2][0], qk[2][1], pv[2][1]
    chain = [(qk[0], qk[2]), (soft[0], [qk[2][2], soft[2][1]]), (pv[0], [soft[2][1], v, pv[2][2]])]
    for symbol, a in chain:
        lib[symbol](*a)
    qn, kn, vn = (t.numpy().astype(np.float64) for t in (q, k, v))
    n_keys = q_shape[-2]
    padding = np.where(np.arange(n_keys) < n_keys - n_keys // 10, 0, -1e4).astype(np.float32)  # the last tenth masked

    def exact(mask):
        sc = qn @ np.swapaxes(kn, -1, -2) + mask
        p = np.exp(sc - sc.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ vn

    refs = {None: exact(0.0), "padding": exact(padding)}

    def error(out, mask=None):
        return float(np.abs(out - refs[mask]).max()) / float(np.abs(refs[mask]).max())

    target = cpu.target(args.threads)
    rows = [("the network's three tasks", error(pv[2][2].numpy()))]
    fused = []
    for label, mask in (("fused", None), ("fused, a padding mask over the keys", padding)):
        placeholders = [te.placeholder(q_shape, "float32", name=n) for n in "qkv"]
        placeholders += [] if mask is None else [te.placeholder(mask.shape, "float32", name="mask")]
        fused_mod = tvm.IRModule({"main": te.create_prim_func([*placeholders, attention.fused_attention(
            *placeholders, keys_transposed=False, scale=1.0, lanes=cpu.lanes)])})
        inputs = [q, k, v] + ([] if mask is None else [tvm.runtime.tensor(mask, tvm.cpu())])
        for name, sch in attention.schedules(fused_mod, cpu.lanes, args.threads):
            f = tvm.compile(sch.mod, target=target)
            out = tvm.runtime.tensor(np.zeros(q_shape, "float32"), tvm.cpu())
            f(*inputs, out)
            err = error(out.numpy(), None if mask is None else "padding")
            if err > TOLERANCE:
                sys.exit(f"{label} {name}: {err:.1e} of the scale from numpy")
            rows.append((f"{label}, {name}", err))
            fused.append((f.mod, [*inputs, out]))
    table = {}
    for state in ("hot", "flushed"):
        timers = [kernel_timer(lib, a, symbol, state=state, repeat=5) for symbol, a in chain]
        timers += [kernel_timer(f, a, "main", state=state, repeat=5) for f, a in fused]
        rounds = round_robin(timers, args.rounds)
        table[state] = [statistics.median(map(sum, zip(*rounds[:3])))] + [statistics.median(r) for r in rounds[3:]]
        table[state + " parts"] = [statistics.median(r) for r in rounds[:3]]
    lines = [f"Command: `{shlex.join(['python', *sys.argv])}`", "",
             f"# Attention fused against the network's three tasks: {args.model}, Q/K/V {list(q_shape)} "
             f"({math.prod(q_shape[:-2])} heads per call), {args.threads} thread(s), {cpu.name}", "",
             "| attention | error / scale vs float64 | ms hot | ms flushed | against the three tasks (hot / flushed) |",
             "|---|---:|---:|---:|---:|"]
    for n, (name, err) in enumerate(rows):
        hot, flushed = table["hot"][n], table["flushed"][n]
        lines.append(f"| {name} | {err:.1e} | {hot * 1e3:.3f} | {flushed * 1e3:.3f} | "
                     f"{hot / table['hot'][0]:.2f} / {flushed / table['flushed'][0]:.2f} |")
        if n == 0:
            lines += [f"| - {symbol} | | {h * 1e3:.3f} | {f * 1e3:.3f} | |" for (symbol, _), h, f in
                      zip(chain, table["hot parts"], table["flushed parts"])]
    lines += ["", f"Medians of {args.rounds} round-robin rounds (each a median of 5 calls); the three tasks' sum per "
              "round; hot: the operands in the caches, flushed: every operand but the first flushed before each "
              "call (timing.evaluator)."]
    publish("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()

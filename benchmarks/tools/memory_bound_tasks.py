"""A network's memory-bound tasks (pooling, means, transposes) alone: the fastest record MetaSchedule's own search
left in a tune-model work dir, against tvm_ttile's memory-bound schedules (tvm_ttile/memory_bound.py: the
function as written and each channel-vectorized variant), built and timed side by side, round-robin, with the
caches flushed before every call (as tune-model times them). Each is checked against the function as written.

    python benchmarks/tools/memory_bound_tasks.py resnet18 WORK_DIR [--input-shape 1,3,224,224] [--threads 1]
        [--rounds 5] --out FILE.md

WORK_DIR: a tune-model work dir with MetaSchedule records for those tasks (`--other-trials` > 0); its records made
by tvm_ttile's schedules are left out of "MetaSchedule's search".
"""
import statistics
import sys
import time

import numpy as np
from tuned_network import arguments, open_tuned
from tvm_ttile.evaluation import command_line


def main():
    args = arguments(__doc__)

    import tvm

    from tvm_ttile import memory_bound
    from tvm_ttile import network as nw
    from tvm_ttile.measure import measure_modules
    from tvm_ttile.metaschedule import records_of

    net = open_tuned(args)
    cpu, target, database = net.cpu, net.target, net.database
    lines = [f"# {args.model}: memory-bound tasks alone, MetaSchedule's search against tvm_ttile's schedules", "",
             f"Command: `{command_line()}` ({time.strftime('%Y-%m-%d %H:%M')}); {cpu.describe()['cpu']} "
             f"({cpu.isa.name}); {args.threads} thread(s); caches flushed before every call (10 calls per round), "
             f"{args.rounds} round-robin rounds; medians in ms. Every schedule matches the function as written.", "",
             "| task | shape | MetaSchedule's search (its fastest record) | " + " | ".join(
                 ["as written"] + [v.name.replace("_", " ") for v in memory_bound.VARIANTS]) + " | best / MetaSchedule's |",
             "|---|---|---:|" + "---:|" * (len(memory_bound.VARIANTS) + 2)]
    for task in net.tasks:
        if task.policy != "metaschedule":
            continue
        candidates = {}
        for rec in records_of(database, task.mod):
            sch = tvm.s_tir.Schedule(task.mod)
            rec.trace.apply_to_schedule(sch, remove_postproc=False)
            if memory_bound.variant_of(sch.mod["main"]) is None:
                candidates["metaschedule"] = sch.mod
                break
        for name, sch in memory_bound.schedules(task.mod, cpu.lanes, args.threads):
            candidates[name] = sch.mod
        x = [np.random.default_rng(i).standard_normal([int(d) for d in a.shape]).astype("float32")
             for i, a in enumerate(_args(task.mod)[:-1])]
        want = _run(task.mod, target, x, _args(task.mod)[-1])
        for name, m in candidates.items():
            got = _run(m, target, x, _args(task.mod)[-1])
            if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                sys.exit(f"{task.name}: {name} differs from the function as written")
        timed = measure_modules(list(candidates.values()), target, nw.COLD_SETTINGS, rounds=args.rounds)
        ms = {name: statistics.median(m.seconds) * 1e3 for name, m in zip(candidates, timed) if m.seconds}
        ours = [v for k, v in ms.items() if k != "metaschedule"]
        cells = [ms.get("metaschedule"), ms.get(memory_bound.AS_WRITTEN)] + [ms.get(v.name) for v in memory_bound.VARIANTS]
        ratio = f"{min(ours) / ms['metaschedule']:.2f}" if ours and "metaschedule" in ms else "-"
        lines.append(f"| {task.name} | {task.shape} | " + " | ".join(f"{c:.4f}" if c is not None else "-" for c in cells)
                     + f" | {ratio} |")
        print(lines[-1], flush=True)
    lines += ["", "A dash: the variant does not apply to that function (no whole vectors along its axis, no window "
                  "loops to hold them across), or the work dir has no record of MetaSchedule's search."]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def _args(mod):
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    return ArgInfo.from_prim_func(mod["main"])


def _run(mod, target, inputs, out_info):
    import tvm

    lib = tvm.compile(mod, target=target)
    out = tvm.runtime.tensor(np.zeros([int(d) for d in out_info.shape], "float32"))
    lib["main"](*[tvm.runtime.tensor(a) for a in inputs], out)
    return out.numpy()


if __name__ == "__main__":
    main()

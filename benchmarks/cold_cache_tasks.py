"""Each tuned task of a network timed alone with hot caches (as tuners measure) and with the CPU cache
flushed before every call (as a layer meets its weights inside a whole inference), against the end-to-end time.

    python benchmarks/cold_cache_tasks.py resnet18 benchmarks/results/end_to_end/work/resnet18
        -> benchmarks/results/end_to_end/cold_cache_<basename of the work dir>.md
"""
import os
import statistics
import sys

import tvm

from tvm_ttile import network as nw
from tvm_ttile.cpu import detect_host
from tvm_ttile.measure import build_module, timing_args
from tvm_ttile.metaschedule import best_schedule, open_database
from tvm_ttile.models.importers import load_model


def main(model, work_dir, input_shape=None):
    host = detect_host()
    target = host.target(1)
    mod = nw.prepare(load_model(model, input_shape).mod)
    db = open_database(work_dir)
    rows, hot_total, cold_total = [], 0.0, 0.0
    for task in nw.extract_tasks(mod, host):
        best = best_schedule(db, task.mod)
        if best is None:
            continue
        lib = build_module(best[0].mod, target)  # as tuned: weights already packed (packing runs at build time)
        args = timing_args(best[0].mod)
        hot = statistics.median(lib.time_evaluator("main", tvm.cpu(), number=1, repeat=9, min_repeat_ms=20)(*args).results)
        cold = statistics.median(lib.time_evaluator("main", tvm.cpu(), number=1, repeat=9,
                                                    f_preproc="cache_flush_cpu_non_first_arg")(*args).results)
        hot_total, cold_total = hot_total + hot * task.weight, cold_total + cold * task.weight
        rows.append(f"| {task.name} | {task.shape} | {task.weight} | {1e3 * hot:.3f} | {1e3 * cold:.3f} | {cold / hot:.2f} |")
    lines = [f"# {model}: tuned tasks with hot and with flushed caches (1 thread)", "",
             f"Command: `python benchmarks/cold_cache_tasks.py {' '.join(sys.argv[1:])}`; {host.name}; medians of 9.", "",
             "| task | shape | calls | hot ms | cold ms | cold / hot |", "|---|---|---:|---:|---:|---:|", *rows, "",
             f"Sum over the network (x calls): hot **{1e3 * hot_total:.1f} ms**, cold **{1e3 * cold_total:.1f} ms**."]
    out = os.path.join(os.path.dirname(__file__), "results", "end_to_end",
                       f"cold_cache_{os.path.basename(os.path.normpath(work_dir))}.md")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], tuple(int(v) for v in sys.argv[3].split(",")) if len(sys.argv) > 3 else None)

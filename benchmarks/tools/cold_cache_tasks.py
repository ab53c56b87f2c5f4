"""Each tuned task of a network timed alone with hot caches (as tuners measure) and with the CPU cache
flushed before every call (as a layer meets its weights inside a whole inference), against the end-to-end time.

    python benchmarks/tools/cold_cache_tasks.py resnet18 benchmarks/results/end_to_end/work/resnet18 [1,3,224,224] [--threads N]
        -> benchmarks/results/end_to_end/cold_cache_<basename of the work dir>.md
           (with --threads N > 1: beside the work dir's parent, cold_cache_<basename>.md)
"""
import os


from tvm_ttile import network as nw
from tvm_ttile.cpu import detect_host
from tvm_ttile.measure import build_module, timing_args
from tvm_ttile.metaschedule import best_schedule, open_database
from tvm_ttile.models.importers import load_model
from tvm_ttile.timing import kernel_timer
from tvm_ttile.evaluation import command_line


def main(model, work_dir, input_shape=None, threads=1):
    from tvm_ttile.cpu import use_threads

    use_threads(threads)  # before TVM's pool is sized
    host = detect_host()
    target = host.target(threads)
    mod = nw.prepare(load_model(model, input_shape).mod)
    db = open_database(work_dir)
    rows, hot_total, cold_total = [], 0.0, 0.0
    for task in nw.extract_tasks(mod, cpu=host, threads=threads):
        best = best_schedule(db, task.mod)
        if best is None:
            continue
        lib = build_module(best[0].mod, target)  # as tuned: weights already packed (packing runs at build time)
        args = timing_args(best[0].mod)
        hot = kernel_timer(lib, args, repeat=9, min_repeat_ms=20)()
        cold = kernel_timer(lib, args, state="flushed", repeat=9)()
        hot_total, cold_total = hot_total + hot * task.weight, cold_total + cold * task.weight
        rows.append(f"| {task.name} | {task.shape} | {task.weight} | {1e3 * hot:.3f} | {1e3 * cold:.3f} | {cold / hot:.2f} |")
    lines = [f"# {model}: tuned tasks with hot and with flushed caches ({threads} thread(s))", "",
             f"Command: `{command_line()}`; {host.name}; medians of 9.", "",
             "| task | shape | calls | hot ms | cold ms | cold / hot |", "|---|---|---:|---:|---:|---:|", *rows, "",
             f"Sum over the network (x calls): hot **{1e3 * hot_total:.1f} ms**, cold **{1e3 * cold_total:.1f} ms**."]
    name = f"cold_cache_{os.path.basename(os.path.normpath(work_dir))}.md"
    out = (os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results", "end_to_end", name) if threads == 1 else
           os.path.join(os.path.dirname(os.path.dirname(os.path.normpath(work_dir))), name))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("work_dir")
    ap.add_argument("input_shape", nargs="?", help="NCHW, e.g. 1,3,224,224 (default: the model's)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    main(args.model, args.work_dir, tuple(int(v) for v in args.input_shape.split(",")) if args.input_shape else None,
         args.threads)

"""Where OpenVINO's time goes on a model: its CPU plugin's per-node counters (PERF_COUNT), median over inferences,
largest first, with the kernel it picked (exec_type, e.g. jit_avx512_amx_I8 or brgconv_avx512_core_vnni_I8): the
per-layer side of a `tvm-ttile tune-model` report's per-task table.

    python benchmarks/tools/openvino_profile.py resnet18_int8.onnx --threads 1 [--out profile.md]
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time

from tvm_ttile.evaluation import publish


def profile(path: str, threads: int = 1, inferences: int = 50, precision: str | None = None) -> dict:
    import numpy as np
    import openvino as ov

    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "PERF_COUNT": True}
    if precision:
        config["INFERENCE_PRECISION_HINT"] = precision
    compiled = core.compile_model(core.read_model(path), "CPU", config)
    request = compiled.create_infer_request()
    inp = compiled.input(0)
    x = np.random.default_rng(0).standard_normal(list(inp.shape)).astype(np.float32)
    request.infer({inp.get_any_name(): x})  # warm-up
    per_node, walls = collections.defaultdict(list), []
    kinds = {}
    for _ in range(inferences):
        t0 = time.perf_counter()
        request.infer({inp.get_any_name(): x})
        walls.append(1e3 * (time.perf_counter() - t0))
        for info in request.profiling_info:
            if str(info.status).endswith("EXECUTED"):
                per_node[info.node_name].append(info.real_time.total_seconds() * 1e3)
                kinds[info.node_name] = (info.node_type, info.exec_type)
    nodes = sorted(((statistics.median(v), name) for name, v in per_node.items()), reverse=True)
    return {"version": ov.__version__, "wall_ms": statistics.median(walls), "threads": threads,
            "nodes": [{"node": n, "type": kinds[n][0], "kernel": kinds[n][1], "ms": ms} for ms, n in nodes],
            "precision": str(compiled.get_property("INFERENCE_PRECISION_HINT"))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="an .onnx file")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--inferences", type=int, default=50)
    p.add_argument("--precision", help="INFERENCE_PRECISION_HINT, e.g. f32 (default: the plugin's)")
    p.add_argument("--out", help="a markdown file to write (default: print)")
    args = p.parse_args(argv)
    r = profile(args.model, args.threads, args.inferences, args.precision)
    by_kernel = collections.Counter()
    for n in r["nodes"]:
        by_kernel[(n["type"], n["kernel"])] += n["ms"]
    lines = [f"# OpenVINO {r['version']} on {args.model}, {r['threads']} thread(s), float layers in {r['precision']}", "",
             f"Command: `python benchmarks/tools/openvino_profile.py {' '.join(argv or sys.argv[1:])}`; median inference "
             f"{r['wall_ms']:.2f} ms over {args.inferences}; per-node medians sum to "
             f"{sum(n['ms'] for n in r['nodes']):.2f} ms.", "", "| node type | kernel | ms |", "|---|---|---:|"]
    lines += [f"| {t} | {k} | {ms:.3f} |" for (t, k), ms in by_kernel.most_common()]
    lines += ["", "| node | type | kernel | ms |", "|---|---|---|---:|"]
    lines += [f"| {n['node']} | {n['type']} | {n['kernel']} | {n['ms']:.3f} |" for n in r["nodes"][:40]]
    text = "\n".join(lines) + "\n"
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One table and geometric means from per-layer fixed_schemes.py runs (each with the tuned tvm_ttile best, ONNX
Runtime, another run's best through --also-run, and the best scheme lowered several ways); Markdown on stdout.

    python benchmarks/tools/fixed_schemes_table.py DIR --also-run NAME --variants as-is,border-copy,copied

DIR: the directory of the runs' .json files (every .json there is read).
"""
import argparse
import glob
import json
import math
import os


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="directory of fixed_schemes.py's per-layer .json files")
    ap.add_argument("--also-run", required=True, help="the other run's name, as fixed_schemes labelled it")
    ap.add_argument("--variants", default="as-is,border-copy,copied")
    args = ap.parse_args()
    variants = args.variants.split(",")
    ratios = {"tuned": [], "onnxruntime": [], **{v: [] for v in variants[1:]}}
    print(f"| layer | tvm_ttile tuned | tvm_ttile ({args.also_run}) | ratio | ONNX Runtime | "
          + " | ".join(f"best scheme {v}" for v in variants) + " | "
          + " | ".join(f"{variants[0]} / {v}" for v in variants[1:]) + " |")
    print("|---|" + "---:|" * (4 + 2 * len(variants) - 1))
    for path in sorted(glob.glob(os.path.join(args.dir, "*.json"))):
        d = json.load(open(path))
        rows = {r["what"] if r["kind"] != "scheme" else r["variant"]: r["median"] for r in d["rows"]}
        new, old, ort = rows["tvm_ttile"], rows[f"tvm_ttile ({args.also_run})"], rows["onnxruntime"]
        ratios["tuned"].append(new / old)
        ratios["onnxruntime"].append(new / ort)
        for v in variants[1:]:
            ratios[v].append(rows[variants[0]] / rows[v])
        print(f"| {d['layer']} | {new:.1f} | {old:.1f} | {new / old:.2f} | {ort:.1f} | "
              + " | ".join(f"{rows[v]:.1f}" for v in variants) + " | "
              + " | ".join(f"{rows[variants[0]] / rows[v]:.2f}" for v in variants[1:]) + " |")
    print("\nGeometric means (GFLOPS ratios, range in brackets):")
    for k, xs in ratios.items():
        g = math.exp(sum(map(math.log, xs)) / len(xs))
        label = {"tuned": f"tuned best / {args.also_run}'s", "onnxruntime": "tuned best / ONNX Runtime"}.get(
            k, f"best scheme {variants[0]} / {k}")
        print(f"- {label}: {g:.3f}x ({min(xs):.2f}-{max(xs):.2f})")


if __name__ == "__main__":
    main()

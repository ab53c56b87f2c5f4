"""Table of benchmarks/paper/prepack_matmul.sh: the TTile space with weights in the operator's layout and prepacked,
each against numpy timed in the same run, in GFLOPS and % of peak.

    python benchmarks/tools/prepack_table.py [benchmarks/results/prepack_matmul]  -> <dir>/prepack_table.md
"""
import json
import os

from tvm_ttile.compare import summary


def main(out_dir):
    runs = {}
    for mode in ("layout", "prepack"):
        with open(os.path.join(out_dir, mode, "compare.json")) as f:
            runs[mode] = json.load(f)
    first = runs["layout"]
    peak = first["peak_gflops"] * first["threads"]
    pct = lambda g: f"{g:.1f} ({100 * g / peak:.0f}%)"  # noqa: E731
    lines = ["# TTile matmul space: weights in the operator's layout vs prepacked", "",
             f"`{runs['layout']['command']}` ({runs['layout']['date']}) and `{runs['prepack']['command']}` "
             f"({runs['prepack']['date']}); {first['machine']['cpu']}, {first['threads']} thread(s), peak "
             f"{peak:.1f} GFLOPS (measured in the first run); {first['budget']} trials per shape. Every figure is "
             "the best timed again side by side with numpy in its own run (median of rounds); GFLOPS (% of peak).",
             "", "| shape | TTile, layout | numpy (run 1) | TTile, prepacked | numpy (run 2) | layout / numpy | "
             "prepacked / numpy |", "|---|---:|---:|---:|---:|---:|---:|"]
    summ = {mode: summary(data) for mode, data in runs.items()}
    for layer in summ["layout"]:
        lay, pre = summ["layout"][layer], summ["prepack"].get(layer, {})
        if "tvm_ttile" not in pre:
            continue
        g = [lay["tvm_ttile"]["gflops"], lay["numpy"]["gflops"], pre["tvm_ttile"]["gflops"], pre["numpy"]["gflops"]]
        lines.append(f"| {layer} | " + " | ".join(pct(x) for x in g) + f" | {g[0] / g[1]:.2f} | {g[2] / g[3]:.2f} |")
    with open(os.path.join(out_dir, "prepack_table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "prepack table")
    ap.add_argument("out_dir", nargs="?", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                               "results", "prepack_matmul"))
    main(ap.parse_args().out_dir)

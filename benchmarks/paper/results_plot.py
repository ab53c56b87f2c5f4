"""The README's plot: each network's tuned latency against ONNX Runtime's, per machine, threads and precision, read
from the side-by-side results files (benchmarks/tools/network_ab.py's tables, or tune-model's reports: build
"tvm_ttile"; nothing is timed here).

    python benchmarks/paper/results_plot.py   -> benchmarks/results/latency_vs_onnxruntime.{png,md}
"""
import argparse
import os
import re

from tvm_ttile.evaluation import md_table, provenance

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")
# (network, machine, threads, precision, results file, the build shown): each file times its builds and ONNX
# Runtime side by side in one run, at the same precision.
ROWS = [
    ("ResNet-18", "Zen 5", 1, "fp32", "in_network_zen5/resnet18_winograd_packed_1thread.md", "winograd_packed"),
    ("Darknet-19", "Zen 5", 1, "fp32", "in_network_zen5/darknet19_winograd_packed_1thread.md", "winograd_packed"),
    ("ResNet-18", "Zen 5", 2, "fp32", "in_network_zen5/resnet18_winograd_packed_2threads.md", "winograd_packed"),
    ("Darknet-19", "Zen 5", 2, "fp32", "in_network_zen5/darknet19_winograd_packed_2threads.md", "winograd_packed"),
    ("ConvNeXt-T", "Zen 4", 1, "fp32", "layout_and_softmax_zen4/convnext_tiny_fp32_1thread.md", "tvm_ttile"),
    ("ViT-B/16", "Zen 4", 1, "fp32", "layout_and_softmax_zen4/vit_b_16_fp32_1thread.md", "tvm_ttile"),
    ("BERT-base", "Zen 4", 1, "fp32", "modern_networks_zen4/bert_base_fp32_1thread.md", "tvm_ttile"),
    ("ShuffleNet-v2", "Zen 4", 1, "fp32", "modern_networks_zen4/shufflenet_v2_x1_0_fp32_1thread.md", "tvm_ttile"),
    # a quantized model against ONNX Runtime's int8 on the same QDQ file
    ("ResNet-18", "Zen 4", 1, "int8", "dot_blocked_zen4/resnet18_int8_1thread.md", "tvm_ttile"),
    ("MobileNet-v2", "Zen 4", 1, "int8", "dot_blocked_zen4/mobilenet_v2_int8_1thread.md", "tvm_ttile"),
]


def read_report(path: str) -> dict:
    """{system: (median ms, ratio to onnxruntime)} from tune-model's latency table."""
    medians = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\| (\S+) \| ([\d.]+) \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+x \|", line)
            if m:
                medians[m.group(1)] = float(m.group(2))
    if "onnxruntime" not in medians:
        raise SystemExit(f"{path}: no onnxruntime row in its latency table")
    return {name: (ms, ms / medians["onnxruntime"]) for name, ms in medians.items()}


def read_table(path: str) -> dict:
    """{build: (median ms, ratio to onnxruntime)} from a network_ab.py table."""
    rows = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\| (\S+) \| ([\d.]+) \| [\d.]+ \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|", line)
            if m:
                rows[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    if "onnxruntime" not in rows:
        raise SystemExit(f"{path}: no onnxruntime row in its table")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(RESULTS, "latency_vs_onnxruntime"), help="OUT.png and OUT.md")
    args = ap.parse_args()
    points = []
    for net, machine, threads, precision, name, build in ROWS:
        table = (read_report if build == "tvm_ttile" else read_table)(os.path.join(RESULTS, name))
        if build not in table:
            raise SystemExit(f"{name}: no build {build!r} in its table")
        points.append((net, machine, threads, precision, name, table[build][0], table["onnxruntime"][0],
                       table[build][1]))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.2 + 1.2 * len(points), 3.6))
    labels = [f"{n}\n{m}\n{t} thread{'s' if t > 1 else ''}, {p}" for n, m, t, p, *_ in points]
    ratios = [r for *_, r in points]
    bars = ax.bar(range(len(points)), ratios, color="tab:green")
    ax.axhline(1.0, color="gray", lw=1, ls="--")
    ax.text(len(points) - 0.5, 1.01, "ONNX Runtime", ha="right", va="bottom", fontsize=8, color="gray")
    for b, r in zip(bars, ratios):
        ax.text(b.get_x() + b.get_width() / 2, r + 0.01, f"{r:.2f}x", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(points)), labels, fontsize=7)
    ax.set_ylabel("tvm_ttile latency / ONNX Runtime's\n(same precision)", fontsize=8)
    ax.set_ylim(0, 1.15)
    ax.set_title("Whole networks, batch 1, each system in its own process (lower is faster)", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out + ".png", dpi=120)
    rows = [(n, m, t, p, f"{ms:.2f}", f"{ort:.2f}", f"{r:.3f}", f"[{os.path.basename(f)}]({f})")
            for n, m, t, p, f, ms, ort, r in points]
    lines = ["# Latency against ONNX Runtime", "", provenance(extra="Read from the files linked; nothing timed."), "",
             *md_table(["network", "machine", "threads", "precision", "tvm_ttile ms", "ONNX Runtime ms", "ratio",
                        "file"], rows, "llrlrrrl")]
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}.png and {args.out}.md")


if __name__ == "__main__":
    main()

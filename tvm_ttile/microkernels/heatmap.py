"""Heat map of a catalog slice, like the paper's Fig. 6: vector unroll (x) by row unroll (y), % of peak."""
from __future__ import annotations

from .spec import Microkernel

# The slice shown: every other unroll factor is 1.
SLICE = {"conv2d": ("k", "h"), "matmul": ("j", "i"), "depthwise": ("k", "w")}


def heatmap_grid(catalog) -> tuple:
    xdim, ydim = SLICE[catalog.op]
    cells = {}
    for e in catalog.entries:
        mk = Microkernel.parse(e["text"])
        if all(f == 1 for d, f in mk.unroll if d not in (xdim, ydim)) and e.get("percent_of_peak"):
            cells[(mk.get(xdim), mk.get(ydim))] = e["percent_of_peak"]
    return xdim, ydim, cells


def write_heatmap(catalog, path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    xdim, ydim, cells = heatmap_grid(catalog)
    if not cells:
        raise ValueError(f"the {catalog.op} catalog has no measured microkernel in the {xdim} x {ydim} slice")
    xs = range(1, max(x for x, _ in cells) + 1)
    ys = range(1, max(y for _, y in cells) + 1)
    grid = np.full((len(ys), len(xs)), np.nan)
    for (x, y), v in cells.items():
        grid[y - 1, x - 1] = v
    fig, ax = plt.subplots(figsize=(0.55 * len(xs) + 3, 0.28 * len(ys) + 2))
    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto", origin="upper")
    for (x, y), v in cells.items():
        kept = v >= 100 * catalog.threshold
        ax.text(x - 1, y - 1, f"{v:.0f}", ha="center", va="center", fontsize=7,
                color="black" if v > 60 else "white", fontweight="bold" if kept else "normal")
        if kept:
            ax.add_patch(plt.Rectangle((x - 1.5, y - 1.5), 1, 1, fill=False, edgecolor="red", lw=1.2))
    ax.set_xticks(range(len(xs)), [str(x) for x in xs])
    ax.set_yticks(range(len(ys)), [str(y) for y in ys])
    ax.set_xlabel(f"unroll along {xdim} (vectors of {catalog.cpu['lanes_fp32']} fp32)")
    ax.set_ylabel(f"unroll along {ydim}")
    ax.set_title(f"{catalog.op} microkernels, {catalog.cpu['isa']}, % of {catalog.peak_gflops:.0f} GFLOPS peak\n"
                 f"red boxes: kept (>= {100 * catalog.threshold:.0f}%), 1 thread", fontsize=9)
    fig.colorbar(im, ax=ax, label="% of measured peak")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)

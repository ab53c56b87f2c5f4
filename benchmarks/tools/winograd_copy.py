"""A copy of a tuned network's work dir with other Winograd choices (for network_ab.py): every layer direct
(`--all 0`), or some layers set to a tile size or to the direct convolution (`--layer "LAYER=M"`, M = 0, 2 or
4; LAYER as winograd.json names it). The records are copied as they are: the copy builds the chosen forms from
what tuning measured, no tuning.

    python benchmarks/tools/winograd_copy.py WORK_DIR OUT_DIR --all 0
    python benchmarks/tools/winograd_copy.py WORK_DIR OUT_DIR --layer "conv3x3 N1 H14 W14 C256 K256 out14x14=2"
"""
import argparse
import json
import os
import shutil
import sys

from tvm_ttile.winograd import CHOICES, TILE_SIZES


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("work_dir")
    p.add_argument("out_dir")
    p.add_argument("--all", type=int, choices=(0, *TILE_SIZES), help="every layer to this tile size (0: direct)")
    p.add_argument("--layer", action="append", default=[], help='"LAYER=M", repeatable')
    args = p.parse_args(argv)
    src = os.path.join(args.work_dir, CHOICES)
    if not os.path.exists(src):
        sys.exit(f"{src}: no Winograd choices in this work dir (tune it with tune-model --winograd on)")
    with open(src) as f:
        choices = json.load(f)
    for spec in args.layer:
        layer, _, m = spec.rpartition("=")
        if layer not in choices:
            sys.exit(f"--layer {spec!r}: no layer {layer!r} in {src} (it has: {', '.join(choices)})")
        if m not in ("0", *map(str, TILE_SIZES)) or (m != "0" and m not in choices[layer]["winograd_ms"]):
            sys.exit(f"--layer {spec!r}: F({m},3) was not measured for that layer")
        choices[layer]["m"] = int(m)
    for layer, c in choices.items():
        if args.all is not None:
            c["m"] = args.all if args.all == 0 or str(args.all) in c["winograd_ms"] else 0
    if os.path.exists(args.out_dir):
        sys.exit(f"{args.out_dir} exists: choose a new directory")
    shutil.copytree(args.work_dir, args.out_dir)
    with open(os.path.join(args.out_dir, CHOICES), "w") as f:
        json.dump(choices, f, indent=1)
    forms = {layer: "direct" if c["m"] == 0 else f"F({c['m']},3)" for layer, c in choices.items()}
    print(f"{args.out_dir}: " + "; ".join(f"{layer} {form}" for layer, form in forms.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Copy a tuning work dir with every tvm_ttile intrinsic its records name switched to the variant that prefetches
its weights D reduction steps ahead (intrinsic names carry the distance: ..._pkw32 -> ..._pkw32_pf16), so that
the same schedules can be built with and without the prefetch and timed side by side (benchmarks/tools/network_ab.py).

    python benchmarks/tools/prefetch_copy.py WORK_DIR OUT_DIR [--ops conv2d,matmul] [--distance 16]

Only intrinsics reading prepacked weights (as every network task does) are switched; distance 0 removes the
prefetch. The records' timings are left as they are: the copy is for building, not for comparing records.
"""
import argparse
import re
import shutil


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--ops", default="conv2d,matmul")
    ap.add_argument("--distance", type=int, default=16)
    args = ap.parse_args()
    from tvm_ttile.microkernels.intrin import PACKED, PREFETCH, variant_suffix

    ops = "|".join(re.escape(op) for op in args.ops.split(","))
    suffix = variant_suffix(0, args.distance)
    # ttile_conv2d_..._pkw32 and ttile_tail~conv2d~...~_pkw32, each with or without a _pf<d> already
    name = re.compile(rf'("ttile_(?:{ops})_[^"]*?{PACKED}\d+|"ttile_tail~(?:{ops})~[^"]*?{PACKED}\d+)(?:{PREFETCH}\d+)?"')
    shutil.copytree(args.src, args.dst)
    path = f"{args.dst}/database_tuning_record.json"
    with open(path) as f:
        text = f.read()
    text, n = name.subn(lambda m: m.group(1) + suffix + '"', text)
    with open(path, "w") as f:
        f.write(text)
    print(f"{args.dst}: {n} intrinsic names switched to {'prefetch ' + str(args.distance) if suffix else 'no prefetch'}")


if __name__ == "__main__":
    main()

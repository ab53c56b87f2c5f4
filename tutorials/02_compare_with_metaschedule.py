"""Tutorial 2: tvm_ttile against MetaSchedule (and the libraries) on one layer, in a few lines.

    python tutorials/02_compare_with_metaschedule.py

Both tuners run through the same MetaSchedule builder and runner, single-threaded; each best kernel is
checked against numpy before its time is reported. Use your own operator (operators.Conv2d/Matmul) the
same way, or `tvm-ttile compare` for several layers, seeds and plots.
"""
from tvm_ttile.baselines import run_system
from tvm_ttile.operators import get_layer

layer = get_layer("ResNet18-9")  # 3x3, 256 -> 256 channels at 14x14
results = [
    run_system("tvm_ttile", layer, trials=30, seed=0, work_dir="tutorial_work/ttile"),
    run_system("metaschedule", layer, trials=64, seed=0, work_dir="tutorial_work/ms"),
]
for lib in ("onednn", "onnxruntime"):  # optional extras: pip install 'tvm-ttile[libs]'
    try:
        results.append(run_system(lib, layer))
    except Exception as e:  # noqa: BLE001 - a missing optional library is reported, not fatal
        print(f"{lib}: skipped ({e})")

for r in results:
    reached = next((t for t, _, best in r.curve if best >= 0.95 * r.gflops), None)
    print(f"{r.system:12s} {r.gflops:7.1f} GFLOPS {r.percent_of_peak:5.1f}% of peak  "
          f"{r.trials:4d} trials  {r.seconds:5.0f} s tuning  verified={r.verified}"
          + (f"  (95% of its best after {reached} trials)" if reached else ""))

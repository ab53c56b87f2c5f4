"""Tutorial 3: a whole ONNX network, tuned with tvm_ttile, compared with MetaSchedule, then run.

    python tutorials/03_tune_onnx_model.py [model.onnx]

Without an argument it writes the built-in ResNet-18 (random weights) to resnet18.onnx and uses that file,
so the ONNX path is the one a user with their own model takes. Single thread; about 15 minutes for tvm_ttile
and as long again for MetaSchedule here. For a first try, fewer trials (TRIALS=10 per conv2d/matmul task,
OTHER_TRIALS=4 per other task) or a small model: `python -c "import onnx; from tvm_ttile.models import zoo;
onnx.save(zoo.to_onnx('tiny_resnet'), 'tiny.onnx')"` then `python tutorials/03_tune_onnx_model.py tiny.onnx`.
"""
import os
import sys

import numpy as np
import onnx

from tvm_ttile import network as nw
from tvm_ttile.baselines.tvm_tuners import tune_network_metaschedule
from tvm_ttile.cpu import detect_host
from tvm_ttile.models import zoo
from tvm_ttile.models.importers import load_model

trials = int(os.environ.get("TRIALS", 50))
other_trials = int(os.environ.get("OTHER_TRIALS", 16))
path = sys.argv[1] if len(sys.argv) > 1 else "resnet18.onnx"
if not os.path.exists(path):
    onnx.save(zoo.to_onnx("resnet18"), path)

# 1. Import: ONNX -> Relax (NCHW), then NHWC / HWIO convolutions for the microkernels.
net = load_model(path)
mod = nw.prepare(net.mod)
host = detect_host()
for task in nw.extract_tasks(mod, cpu=host):
    print(f"{task.name:34s} x{task.weight}  {task.policy:12s} {task.shape}")

# 2. Tune: tvm_ttile for conv2d/matmul tasks, MetaSchedule's default for the rest; one database in work_dir.
result = nw.tune_network(mod, cpu=host, work_dir="tutorial_work/net_ttile", trials_per_task=trials,
                         other_trials=other_trials)
total_trials = sum(t.trials for t in result.tasks)
print(f"tvm_ttile: {total_trials} trials, {result.tuning_seconds:.0f} s; every task verified: "
      f"{all(t.verified for t in result.tasks if t.trials)}")

# 3. The same number of trials for MetaSchedule's own whole-network tuning (tune_relax).
ms_db, ms_seconds = tune_network_metaschedule(mod, host, "tutorial_work/net_ms", total_trials)
print(f"MetaSchedule: {total_trials} trials, {ms_seconds:.0f} s")

# 4. Build both, check them against the untuned build, and time them.
x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
reference = nw.run(nw.build_network(mod), x)
for name, db in (("tvm_ttile", "tutorial_work/net_ttile"), ("MetaSchedule", ms_db)):
    vm = nw.build_network(mod, db, cpu=host)
    out = nw.run(vm, x)
    err = float(np.max(np.abs(out - reference)))
    lat = nw.latency(vm, x)
    print(f"{name:12s} {lat['median_ms']:7.2f} ms (IQR {lat['iqr_ms']:.2f}), max abs error vs untuned {err:.1e}, "
          f"top class {int(np.argmax(out))}")

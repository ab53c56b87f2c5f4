"""AutoMCL for the dense layers of a Relax network (`tune_network(..., dense="automcl")`).

A dense layer is `matmul(x[M,K], W[K,N])` with a constant W (ONNX Gemm and torch Linear import to that, the
transpose folded on the constant). Each distinct (M, K, N) is tuned with `tune_automcl` (the classifier's
compute when this CPU has one, else every compute) and its result kept in work_dir/automcl/, so a rerun
resumes. The network is then rewritten: the matmul becomes a call_tir of the tuned AutoMCL kernel on the
weights in the dense layout W[N,K] (its computes' layout, transposed once here); its epilogue (bias add,
activation) stays a separate elementwise task. `build_network` applies the same rewrite from work_dir.
"""
from __future__ import annotations

import dataclasses
import json
import os

from ..workdir import WorkDir

DIR = WorkDir.AUTOMCL_DENSE  # in the network's work_dir: one JSON per dense shape
MARK = "tvm_ttile.automcl"  # PrimFunc attribute: a tuned AutoMCL kernel, not a MetaSchedule task


def dense_shapes(mod) -> dict:
    """{(M, K, N): calls} of the dense layers of a Relax module."""
    shapes = {}

    def count(M, K, N):
        shapes[(M, K, N)] = shapes.get((M, K, N), 0) + 1  # and keep the matmul

    _rewrite(mod, count)
    return shapes


def _record_path(work_dir, M, K, N):
    return WorkDir(work_dir).dense(M, K, N, ".json")


def tune_dense(mod, cpu, work_dir, trials, threads=1, seed=0, settings=None) -> list:
    """Tune every dense shape of `mod` with AutoMCL (resumes from work_dir); [(shape, calls, saved result)]
    where a shape AutoMCL could not tune has {"error": why} (it is not rewritten)."""
    from ..errors import TTileError
    from ..measure import MeasureSettings
    from ..operators import Matmul
    from .tune import tune_automcl

    out = []
    for (M, K, N), calls in dense_shapes(mod).items():
        path = _record_path(work_dir, M, K, N)
        saved = None
        if os.path.exists(path):
            with open(path) as f:
                saved = json.load(f)
        if saved is None or saved["trials_asked"] != trials:
            op = Matmul(M, N, K, dense=True, name=f"dense_{M}x{K}x{N}")
            try:
                res = tune_automcl(op, cpu, trials=trials, seed=seed, settings=settings or MeasureSettings(),
                                   threads=threads, work_dir=WorkDir(work_dir).dense(M, K, N))
            except TTileError as e:  # reported, and the layer stays with the network's other policies
                out.append(((M, K, N), calls, {"error": str(e)}))
                continue
            saved = dict(dataclasses.asdict(res), trials_asked=trials)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:  # per shape: an interrupted run keeps the shapes it finished
                json.dump(saved, f)
        out.append(((M, K, N), calls, saved))
    return out


def apply_dense(mod, work_dir):
    """`mod` with every dense layer that has a record in work_dir/automcl/ calling its tuned AutoMCL kernel;
    (module, number of layers rewritten). Layers without a record are left as they are."""
    from .computes import schedule

    def kernel(M, K, N):
        path = _record_path(work_dir, M, K, N)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            saved = json.load(f)
        if not saved["verified"]:  # never build a kernel that failed its check against numpy
            return None
        func = schedule(saved["compute"], M, N, K, tuple(saved["config"]))["main"]
        # Opaque: FuseOps must not fuse the epilogue into an already scheduled kernel.
        return func.with_attrs({"op_pattern": 8, "tir.is_scheduled": True, MARK: saved["compute"]})

    if not os.path.isdir(WorkDir(work_dir).file(DIR)):
        return mod, 0
    return _rewrite(mod, kernel)


def _rewrite(mod, kernel):
    """Replace matmul(x, constant W[K,N]) by call_tir(kernel(M, K, N), x, W^T) where kernel gives a PrimFunc
    (None: keep the matmul). Returns (module, rewritten calls)."""
    import numpy as np
    import tvm
    from tvm import relax

    from ..relax.bindings import replace_calls

    def replace(call, add_func):
        if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.matmul"):
            return None
        x, w = call.args
        xt, wt = x.ty, w.ty
        if not (isinstance(w, tvm.ir.expr.Constant) and wt.ndim == 2 and xt.ndim == 2
                and str(xt.dtype) == str(wt.dtype) == "float32" and isinstance(xt.shape, relax.ShapeExpr)
                and all(isinstance(d, tvm.tirx.IntImm) for d in list(xt.shape.values) + list(wt.shape.values))):
            return None
        (M, K), (_, N) = [int(d) for d in xt.shape.values], [int(d) for d in wt.shape.values]
        func = kernel(M, K, N)
        if func is None:
            return None
        name = f"automcl_dense_{M}x{K}x{N}"
        dense_kernel = add_func(name, lambda: func.with_attr("global_symbol", name))
        dense_w = relax.const(np.ascontiguousarray(w.value.numpy().T))
        return relax.call_tir(dense_kernel, [x, dense_w], relax.TensorType((M, N), "float32"))

    return replace_calls(mod, replace)

"""Tune a dense layer AutoMCL's way: analytic space per compute, AutoConfig (REG) within it, and either the
classifier's choice of compute (the one trained on this CPU, when there is one) or every compute with an
equal share of the trials (reported, with the classifier's pick when there is one). The best kernel is
checked against numpy before its time is reported."""
from __future__ import annotations

import dataclasses
import time

from ..errors import TTileError
from ..measure import MeasureSettings
from ..tune import verify
from ..workdir import WorkDir
from .computes import schedule
from .space import COMPUTES, CacheModel, build_space
from .tuner import auto_config, measure_configs


@dataclasses.dataclass
class AutoMCLResult:
    operator: str
    compute: str  # the compute of the best kernel
    config: tuple
    gflops: float
    percent_of_peak: float
    per_compute: dict  # compute -> {"gflops", "trials", "space"} for every compute tried
    selected_by: str  # how the computes tried were chosen
    selected: str | None  # the classifier's pick (also when every compute was tuned), None without one
    seconds: float
    verified: bool
    max_abs_error: float
    curve: list = dataclasses.field(default_factory=list)  # [(trial, tuning seconds, GFLOPS or None)]


def tune_automcl(op, cpu=None, trials: int = 48, seed: int = 0, classifier="auto", model: str = "reg",
                 settings: MeasureSettings = MeasureSettings(), threads: int = 1,
                 all_computes: bool = False, work_dir: str | None = None) -> AutoMCLResult:
    """classifier: "auto" (this CPU's trained one, if any), a selection.ComputeClassifier, or None.
    all_computes: tune every compute anyway (to compare the pick with the best compute). work_dir: each
    compute's measurements are kept there as it finishes, and a rerun with the same trials reuses them."""
    from .. import cpu as cpu_mod
    from .selection import load_classifier, select

    if not getattr(op, "dense", False):
        raise TTileError("AutoMCL's computes are for dense layers (weights W[N,K]): use a dense matmul (--dense)")
    cpu = cpu or cpu_mod.detect_host()
    cache, target = CacheModel.of(cpu), cpu.target(threads)
    M, N, K = op.M, op.N, op.K
    how = "the given classifier" if classifier is not None else "no classifier"
    if isinstance(classifier, str) and classifier == "auto":
        classifier, how = load_classifier(cpu)
    selected = select(classifier, M, K, N) if classifier is not None else None
    if selected and not all_computes:
        computes = [selected]
    else:
        computes = list(COMPUTES)
        how = ("all computes; " if selected else "all computes: ") + how
    start, per, best, curve, measurer = time.time(), {}, None, [], {}  # one builder and runner for every compute
    done = _load_partial(work_dir, trials, model, seed)
    for compute in computes:
        space = build_space(compute, M, N, K, cache, threads)["configs"]
        if not space:
            per[compute] = {"gflops": 0.0, "trials": 0, "space": 0}
            continue
        if compute in done:  # measured by an earlier, interrupted run
            runs = [(tuple(c), s) for c, s in done[compute]["runs"]]
            spent = time.time() - start
            curve += [(len(curve) + 1, spent + t, g) for t, g in done[compute]["curve"]]
            start -= done[compute]["seconds"]
        else:
            timed = measure_configs(compute, M, N, K, target, settings, measurer)
            began, first = time.time(), len(curve)

            def measure(configs, timed=timed):
                secs = timed(configs)
                for t in secs:
                    curve.append((len(curve) + 1, time.time() - start, op.flops / t / 1e9 if t else None))
                return secs

            runs = auto_config(compute, space, measure, max(1, trials // len(computes)), cache, model=model,
                               seed=seed)
            done[compute] = {"runs": runs, "seconds": time.time() - began,
                             "curve": [(t - (began - start), g) for _, t, g in curve[first:]]}
            _save_partial(work_dir, trials, model, seed, done)
        ok = [(c, s) for c, s in runs if s]
        g = op.flops / min(s for _, s in ok) / 1e9 if ok else 0.0
        per[compute] = {"gflops": g, "trials": len(runs), "space": len(space)}
        if ok and (best is None or g > best[2]):
            best = (compute, min(ok, key=lambda r: r[1])[0], g)
    if best is None:
        raise TTileError(f"no AutoMCL configuration of {op} built and ran")
    compute, config, g = best
    ok, err = verify(op, schedule(compute, M, N, K, tuple(config)), target)
    peak = cpu_mod.peak(cpu)["peak_gflops"] * threads
    return AutoMCLResult(op.name or repr(op), compute, config, g, 100 * g / peak, per, how, selected,
                         time.time() - start, ok, err, curve)


PARTIAL_FILE = WorkDir.AUTOMCL_PARTIAL  # per compute: its measured configurations, as each compute finishes


def _load_partial(work_dir, trials, model, seed) -> dict:
    import json
    import os

    path = WorkDir(work_dir).automcl_partial if work_dir else None
    if not path or not os.path.exists(path):
        return {}
    with open(path) as f:
        saved = json.load(f)
    return saved["computes"] if saved["key"] == [trials, model, seed] else {}


def _save_partial(work_dir, trials, model, seed, done) -> None:
    import json
    import os

    if work_dir:
        os.makedirs(work_dir, exist_ok=True)
        with open(WorkDir(work_dir).automcl_partial, "w") as f:
            json.dump({"key": [trials, model, seed], "computes": done}, f)

"""Side-by-side comparison: one call per system, one result type.

    from tvm_ttile.baselines import run_system
    r = run_system("metaschedule", get_layer("ResNet18-2"), trials=300, seed=0, work_dir="cmp/ms")

Tuners: tvm_ttile, metaschedule, template-xgb, template-random (all through the same MetaSchedule builder,
runner and measurement settings), automcl (matmul only, in the dense layout W[N,K] its computes are for;
same builder and runner). Libraries: onednn, onnxruntime (conv2d), numpy (matmul).
"""
from __future__ import annotations

import dataclasses
import os
import statistics

import numpy as np

from ..errors import TTileError
from ..measure import MeasureSettings, build_module, timing_args

TUNERS = ("tvm_ttile", "metaschedule", "template-xgb", "template-random", "automcl")
LIBRARY_SYSTEMS = ("onednn", "onnxruntime", "numpy")


def handles(system: str, operator) -> bool:
    """Whether `system` takes this kind of operator: the libraries and AutoMCL take one kind each."""
    from ..operators import Conv2d, Matmul

    only = {"onednn": Conv2d, "onnxruntime": Conv2d, "numpy": Matmul, "automcl": Matmul}.get(system)
    return only is None or isinstance(operator, only)


@dataclasses.dataclass
class SystemResult:
    system: str
    operator: str
    gflops: float
    percent_of_peak: float
    seconds: float  # tuning wall time (0 for libraries)
    trials: int
    verified: bool
    max_abs_error: float
    curve: list  # [(trial, tuning seconds, best GFLOPS so far)]
    threads: int
    version: str = ""
    notes: list = dataclasses.field(default_factory=list)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def _best_so_far(rows):
    out, best = [], 0.0
    for trial, secs, g in rows:
        best = max(best, g or 0.0)
        out.append((trial, secs, best))
    return out


def run_system(system, operator, cpu=None, trials=50, seed=0, work_dir=None, threads=1,
               settings: MeasureSettings = MeasureSettings(), progress=True,
               sampler_options: dict | None = None) -> SystemResult:
    """One system's result on one operator: a library timed, or a tuner run (`sampler_options` go to
    tvm_ttile's ttile sampler; other systems refuse them)."""
    from .. import cpu as cpu_mod

    cpu = cpu or cpu_mod.detect_host()
    cpu_mod.use_threads(threads)
    peak = cpu_mod.peak(cpu, threads=threads)["peak_gflops"]
    name = operator.name or repr(operator)
    if system in LIBRARY_SYSTEMS:
        from .libraries import LIBRARIES

        try:
            out, secs, version = LIBRARIES[system](operator, threads)
        except ImportError as e:
            raise TTileError(f"{system} is not installed ({e}); pip install 'tvm-ttile[libs]'") from None
        except AttributeError as e:
            raise TTileError(f"{system} does not handle {type(operator).__name__}: {e}") from None
        ref = operator.reference(*operator.random_inputs())
        err = float(np.max(np.abs(out - ref)))
        ok = err <= 1e-3 * (float(np.max(np.abs(ref))) or 1.0)
        g = operator.flops / secs / 1e9
        return SystemResult(system, name, g, 100 * g / peak, 0.0, 0, ok, err, [], threads, version)
    if system not in TUNERS:
        raise TTileError(f"unknown system {system!r}; choose from {TUNERS + LIBRARY_SYSTEMS}")
    import tempfile

    from ..tune import read_curve, tune, verify

    if sampler_options and system != "tvm_ttile":
        raise TTileError(f"sampler options are tvm_ttile's; {system} takes none (got {sampler_options})")
    work_dir = work_dir or tempfile.mkdtemp(prefix=f"tvm_ttile_{system}_")
    if system == "automcl":
        return _run_automcl(operator, cpu, trials, seed, work_dir, threads, settings)
    if system == "tvm_ttile":
        res = tune(operator, cpu, trials=trials, seed=seed, threads=threads, work_dir=work_dir, settings=settings,
                   progress=progress, sampler_options=sampler_options)
        return SystemResult(system, name, res.gflops, res.percent_of_peak, res.seconds, res.trials, res.verified,
                            res.max_abs_error, _best_so_far(read_curve(work_dir)), threads, "tvm_ttile",
                            res.lowering_notes)
    import tvm

    from ..metaschedule import best_schedule
    from .tvm_tuners import tune_tvm_baseline

    db, mod, target, seconds = tune_tvm_baseline(system, operator, cpu, trials, seed, work_dir, settings, threads,
                                                 progress)
    best = best_schedule(db, mod)
    if best is None:
        raise TTileError(f"{system} measured no valid candidate for {name}")
    sch, record = best
    ok, err = verify(operator, sch.mod, target)
    g = operator.flops / statistics.median(float(s) for s in record.run_secs) / 1e9
    curve = read_curve(work_dir)
    return SystemResult(system, name, g, 100 * g / peak, seconds, len(curve), ok, err, _best_so_far(curve), threads,
                        f"tvm {tvm.__version__}")


AUTOMCL_FILE = "automcl.json"


def _dense(operator):
    from ..operators import Matmul

    if not isinstance(operator, Matmul):
        raise TTileError(f"automcl tunes matmul/dense layers only, not {type(operator).__name__}")
    return dataclasses.replace(operator, dense=True)


def _run_automcl(operator, cpu, trials, seed, work_dir, threads, settings) -> SystemResult:
    """AutoMCL on the dense form of a matmul; the result is kept in work_dir, so a rerun reuses it."""
    import json

    from ..automcl.tune import tune_automcl

    path = os.path.join(work_dir, AUTOMCL_FILE)
    saved = None
    if os.path.exists(path):
        with open(path) as f:
            saved = json.load(f)
    if saved is None or saved["trials_asked"] != trials:
        # Every compute, so that the table can set the classifier's pick against the best compute.
        res = tune_automcl(_dense(operator), cpu, trials=trials, seed=seed, settings=settings, threads=threads,
                           all_computes=True, work_dir=work_dir)
        saved = dict(dataclasses.asdict(res), trials_asked=trials)
        os.makedirs(work_dir, exist_ok=True)
        with open(path, "w") as f:
            json.dump(saved, f)
    return SystemResult("automcl", operator.name or repr(operator), saved["gflops"], saved["percent_of_peak"],
                        saved["seconds"], len(saved["curve"]), saved["verified"], saved["max_abs_error"],
                        _best_so_far(saved["curve"]), threads, "automcl",
                        [f"best compute {saved['compute']} {tuple(saved['config'])}; classifier's pick "
                         f"{saved.get('selected')}; {saved['selected_by']}; dense layout W[N,K]"])


def best_module(operator, work_dir, cpu, threads=1):
    """The best measured schedule of `operator` in a tuner's work_dir, as a scheduled IRModule (for automcl,
    of the operator's dense form)."""
    import tvm

    from ..metaschedule import best_schedule, open_database

    if os.path.exists(os.path.join(work_dir, AUTOMCL_FILE)):
        import json

        from ..automcl.computes import schedule

        with open(os.path.join(work_dir, AUTOMCL_FILE)) as f:
            saved = json.load(f)
        return schedule(saved["compute"], operator.M, operator.N, operator.K, tuple(saved["config"]))

    best = best_schedule(open_database(work_dir), tvm.IRModule({"main": operator.prim_func(cpu.lanes)}))
    if best is None:
        raise TTileError(f"no measured candidate for {operator.name or operator!r} in {work_dir}")
    return best[0].mod


def retime(entries, operator, cpu, threads=1, rounds=3, settings: MeasureSettings = MeasureSettings()) -> list:
    """Time every system's best again, side by side in this process, round-robin over `rounds` rounds, so
    that a disturbed moment during one system's tuning does not decide the comparison. `entries` are
    (system, work_dir or None); returns the median seconds of each."""
    timers = in_process_timers(entries, operator, cpu, threads, settings)
    times = [[] for _ in entries]
    for _ in range(rounds):
        for i, timer in enumerate(timers):
            times[i].append(timer())
    return [statistics.median(t) for t in times]


def in_process_timers(entries, operator, cpu, threads=1, settings: MeasureSettings = MeasureSettings()) -> list:
    """One callable per (system, work_dir or None) entry, each returning one timing in seconds (median of
    `settings.repeat`) of that system's best in this process; tuned kernels are built once, here."""
    import tvm

    target = cpu.target(threads)
    timers = []
    for system, work_dir in entries:
        if system in LIBRARY_SYSTEMS:
            from .libraries import LIBRARIES

            timers.append(lambda s=system: LIBRARIES[s](operator, threads)[1])
            continue
        mod = best_module(operator, work_dir, cpu, threads)
        lib = build_module(mod, target)  # as tuned: prepacked weights are packed at build time, not timed
        args = timing_args(mod)
        f = lib.time_evaluator("main", tvm.cpu(), number=settings.number, repeat=settings.repeat,
                               min_repeat_ms=settings.min_repeat_ms)
        timers.append(lambda f=f, args=args: statistics.median(f(*args).results))
    return timers


def work_dir_for(root, system, layer, seed, isa, threads=1):
    return os.path.join(root, f"{isa}-{system}-{layer}-seed{seed}" + (f"-{threads}threads" if threads > 1 else ""))

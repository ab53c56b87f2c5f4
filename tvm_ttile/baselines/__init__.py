"""Side-by-side comparison: one call per system, one result type.

    from tvm_ttile.baselines import run_system
    r = run_system("metaschedule", get_layer("ResNet18-2"), trials=300, seed=0, work_dir="cmp/ms")

SYSTEMS, one object per system, resolves names. Tuners: tvm_ttile, tvm_ttile-model (ranked before measuring),
tvm_ttile-gbfs (G-BFS walking the structured space), metaschedule, template-xgb, template-random, gbfs and na2c
(G-BFS and N-A2C walking the templates' knobs; all through the same MetaSchedule builder, runner and measurement
settings), automcl (matmul only, in the dense layout W[N,K] its computes are for; same builder and runner). The
templates (and gbfs, na2c) take conv2d without groups and matmul, tvm_ttile and MetaSchedule every operator
(grouped conv2d, depthwise, batch matmul too). Libraries: onednn (conv2d, depthwise, matmul), onnxruntime (every
operator), numpy (matmul, batch matmul). A new system is a System subclass added to SYSTEMS;
tests/test_systems.py runs every one through the same checks.
"""
from __future__ import annotations

import dataclasses
import os
import statistics

import numpy as np

from ..errors import TTileError
from ..measure import MeasureSettings, build_module, timing_args
from ..precision import target_for
from ..workdir import WorkDir

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


class System:
    """One system of the comparison. It knows which operators it takes (`operators`), whether it tunes
    (`tunes`: then it has a work dir, trials and seeds) and its options, declared as data; `run` gives its
    SystemResult, `timer` a callable timing its best again in this process."""
    name = ""
    tunes = True
    ours = False  # a tvm_ttile system: its budget is --ttile-budget, it draws with the sampler's options
    operators: tuple = ("Conv2d", "Matmul", "Depthwise", "BatchMatmul", "Conv1d", "Depthwise1d", "QMatmul",
                         "QConv2d")  # class names it takes
    grouped = True  # it takes grouped convolutions (Conv2d, Conv1d with groups > 1)
    options: dict = {}  # option name -> default; `run` refuses any other
    color = "tab:gray"  # its curve in compare's convergence plot

    def missing(self) -> str | None:
        """Why it cannot run here (a library not installed), or None: TVM's tuners always can."""
        return None

    def strategy_options(self) -> dict:
        """Its search strategy's options, declared as data (name -> (default, help)); none for most systems."""
        return {}

    def handles(self, operator) -> bool:
        return type(operator).__name__ in self.operators and (self.grouped or operator.groups == 1)

    def takes(self) -> str:
        """What it takes, for messages."""
        return " and ".join(self.operators) + " operators" + ("" if self.grouped else " (no grouped convolutions)")

    def work_name(self, layer: str, prepack: bool) -> str:
        """Its work dir's layer part: prepacked weights are another workload."""
        return layer + ("-prepack" if prepack else "")

    def run(self, operator, cpu, peak, trials, seed, work_dir, threads, settings, progress, options) -> SystemResult:
        raise NotImplementedError

    def timer(self, operator, cpu, work_dir, threads, settings):
        """A callable returning one timing in seconds (median of settings.repeat) of the best in work_dir."""
        from ..timing import kernel_timer

        mod = self.best_module(operator, work_dir, cpu, threads)
        # as tuned: prepacked weights packed at build time, not timed
        lib = build_module(mod, target_for(cpu, threads, operator.precision))
        return kernel_timer(lib, timing_args(mod), number=settings.number, repeat=settings.repeat,
                            min_repeat_ms=settings.min_repeat_ms)

    def best_module(self, operator, work_dir, cpu, threads=1):
        """The best measured schedule of `operator` in its work_dir, as a scheduled IRModule."""
        import tvm

        from ..metaschedule import best_schedule, open_database

        best = best_schedule(open_database(work_dir), tvm.IRModule({"main": operator.prim_func(cpu.lanes)}))
        if best is None:
            raise TTileError(f"no measured candidate for {operator.name or operator!r} in {work_dir}")
        return best[0].mod


class TTile(System):
    """tvm_ttile with a search strategy (strategies.STRATEGIES): random (measured as drawn) or model (ranked
    before measuring: the system tvm_ttile-model, PolyDL's idea in the structured space)."""
    options = {"sampler_options": None, "strategy_options": None}  # the ttile sampler's and the strategy's
    ours = True

    def __init__(self, name="tvm_ttile", color="tab:green", strategy="random"):
        self.name, self.color, self.strategy = name, color, strategy

    def strategy_options(self):
        from ..strategies import STRATEGIES

        return STRATEGIES[self.strategy].OPTIONS

    def run(self, operator, cpu, peak, trials, seed, work_dir, threads, settings, progress, options):
        from ..tune import read_curve, tune

        res = tune(operator, cpu, trials=trials, seed=seed, threads=threads, work_dir=work_dir, settings=settings,
                   progress=progress, sampler_options=options.get("sampler_options"), strategy=self.strategy,
                   strategy_options=options.get("strategy_options"))
        return SystemResult(self.name, res.operator, res.gflops, res.percent_of_peak, res.seconds, res.trials,
                            res.verified, res.max_abs_error, _best_so_far(read_curve(work_dir)), threads, "tvm_ttile",
                            res.lowering_notes)


class TVMPolicy(System):
    """MetaSchedule's default policy or an AutoTVM-style template (tvm_tuners.POLICIES); `search` names the
    neighbourhood search (strategies.SEARCHES) walking the template's knobs, if any: its options are the system's."""

    def __init__(self, name, color, operators=System.operators, search=None, grouped=True):
        self.name, self.color, self.operators, self.search, self.grouped = name, color, operators, search, grouped
        self.options = {"strategy_options": None} if search else {}

    def strategy_options(self):
        from ..strategies import SEARCHES

        return SEARCHES[self.search].OPTIONS if self.search else {}

    def run(self, operator, cpu, peak, trials, seed, work_dir, threads, settings, progress, options):
        import tvm

        from ..metaschedule import best_schedule
        from ..tune import read_curve, verify
        from .tvm_tuners import tune_tvm_baseline

        db, mod, target, seconds = tune_tvm_baseline(self.name, operator, cpu, trials, seed, work_dir, settings,
                                                     threads, progress, options.get("strategy_options"))
        best = best_schedule(db, mod)
        if best is None:
            raise TTileError(f"{self.name} measured no valid candidate for {operator.name or operator!r}")
        sch, record = best
        ok, err = verify(operator, sch.mod, target)
        g = operator.flops / statistics.median(float(s) for s in record.run_secs) / 1e9
        curve = read_curve(work_dir)
        return SystemResult(self.name, operator.name or repr(operator), g, 100 * g / peak, seconds, len(curve), ok,
                            err, _best_so_far(curve), threads, f"tvm {tvm.__version__}")


AUTOMCL_FILE = WorkDir.AUTOMCL


class AutoMCL(System):
    """AutoMCL on the dense form W[N,K] of a matmul (the layout its computes are for); the result is kept in
    its work dir, so a rerun reuses it."""
    name, color, operators = "automcl", "tab:brown", ("Matmul",)

    def work_name(self, layer, prepack):
        return layer  # its computes pack inside the timed function, as in its paper: prepack changes nothing

    def run(self, operator, cpu, peak, trials, seed, work_dir, threads, settings, progress, options):
        import json

        from ..automcl.tune import tune_automcl

        path = WorkDir(work_dir).automcl
        saved = None
        if os.path.exists(path):
            with open(path) as f:
                saved = json.load(f)
        if saved is None or saved["trials_asked"] != trials:
            # Every compute, so that the table can set the classifier's pick against the best compute.
            res = tune_automcl(dataclasses.replace(operator, dense=True), cpu, trials=trials, seed=seed,
                               settings=settings, threads=threads, all_computes=True, work_dir=work_dir)
            saved = dict(dataclasses.asdict(res), trials_asked=trials)
            os.makedirs(work_dir, exist_ok=True)
            with open(path, "w") as f:
                json.dump(saved, f)
        return SystemResult(self.name, operator.name or repr(operator), saved["gflops"], saved["percent_of_peak"],
                            saved["seconds"], len(saved["curve"]), saved["verified"], saved["max_abs_error"],
                            _best_so_far(saved["curve"]), threads, "automcl",
                            [f"best compute {saved['compute']} {tuple(saved['config'])}; classifier's pick "
                             f"{saved.get('selected')}; {saved['selected_by']}; dense layout W[N,K]"])

    def best_module(self, operator, work_dir, cpu, threads=1):
        import json

        from ..automcl.computes import schedule

        with open(WorkDir(work_dir).automcl) as f:
            saved = json.load(f)
        return schedule(saved["compute"], operator.M, operator.N, operator.K, tuple(saved["config"]))


class Library(System):
    """A vendor library timed as it is (libraries.LIBRARIES), its output checked against numpy. `module`: the
    Python package it comes from (oneDNN through torch)."""
    tunes = False

    def __init__(self, name, color, module):
        from .libraries import LIBRARIES

        self.name, self.operators, self.color, self.module = name, tuple(LIBRARIES[name]), color, module

    def missing(self) -> str | None:
        """Why this library cannot be timed here (its package is not installed), or None."""
        import importlib.util

        if importlib.util.find_spec(self.module) is None:
            return f"{self.name} is not installed (no module named {self.module!r}); pip install 'tvm-ttile[libs]'"
        return None

    def handles(self, operator) -> bool:
        from .libraries import reference_for

        return super().handles(operator) and reference_for(self.name, operator) is not None

    def _call(self, operator, threads):
        from .libraries import reference_for

        try:
            return reference_for(self.name, operator)(operator, threads)
        except ImportError as e:
            raise TTileError(f"{self.name} is not installed ({e}); pip install 'tvm-ttile[libs]'") from None

    def run(self, operator, cpu, peak, trials, seed, work_dir, threads, settings, progress, options):
        out, secs, version = self._call(operator, threads)
        ref = operator.reference(*operator.random_inputs())
        err = float(np.max(np.abs(out.astype(np.float64) - ref)))
        ok = err == 0 if operator.exact else err <= 1e-3 * (float(np.max(np.abs(ref))) or 1.0)
        g = operator.flops / secs / 1e9
        return SystemResult(self.name, operator.name or repr(operator), g, 100 * g / peak, 0.0, 0, ok, err, [],
                            threads, version)

    def timer(self, operator, cpu, work_dir, threads, settings):
        return lambda: self._call(operator, threads)[1]


TEMPLATED = ("Conv2d", "Matmul")  # the operators the AutoTVM-style templates are written for (templates.py)
SYSTEMS = {s.name: s for s in (
    TTile(), TTile("tvm_ttile-model", "tab:olive", "model"), TVMPolicy("metaschedule", "tab:blue"), TVMPolicy("template-xgb", "tab:purple", TEMPLATED, grouped=False),
    TVMPolicy("template-random", "tab:gray", TEMPLATED, grouped=False),
    TVMPolicy("gbfs", "tab:pink", TEMPLATED, "gbfs", grouped=False),
    TVMPolicy("na2c", "tab:cyan", TEMPLATED, "na2c", grouped=False),
    TTile("tvm_ttile-gbfs", "darkgreen", "gbfs"), AutoMCL(), Library("onednn", "tab:orange", "torch"),
    Library("onnxruntime", "tab:red", "onnxruntime"), Library("numpy", "tab:green", "numpy"))}
TUNERS = tuple(n for n, s in SYSTEMS.items() if s.tunes)
LIBRARY_SYSTEMS = tuple(n for n, s in SYSTEMS.items() if not s.tunes)


def get_system(name: str) -> System:
    if name not in SYSTEMS:
        raise TTileError(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")
    return SYSTEMS[name]


def handles(system: str, operator) -> bool:
    """Whether `system` takes this kind of operator (the libraries and AutoMCL take one kind each)."""
    return get_system(system).handles(operator)


def run_system(system, operator, cpu=None, trials=50, seed=0, work_dir=None, threads=1,
               settings: MeasureSettings = MeasureSettings(), progress=True,
               sampler_options: dict | None = None, strategy_options: dict | None = None) -> SystemResult:
    """One system's result on one operator: a library timed, or a tuner run (`sampler_options` go to
    tvm_ttile's ttile sampler, other systems refuse them; `strategy_options` to the system's search strategy,
    System.strategy_options)."""
    import tempfile

    from .. import cpu as cpu_mod

    sys_ = get_system(system)
    if not sys_.handles(operator):
        grouped = " with groups" if operator.groups > 1 else ""
        raise TTileError(f"{system} takes {sys_.takes()}, not a {type(operator).__name__}{grouped}")
    options = {"sampler_options": sampler_options} if sampler_options else {}
    unknown = sorted(set(options) - set(sys_.options))
    if unknown:
        raise TTileError(f"{system} takes no {', '.join(unknown)} (got {options}); sampler options are tvm_ttile's")
    if strategy_options:
        check_strategy_options(system, strategy_options)
        options["strategy_options"] = strategy_options
    cpu = cpu or cpu_mod.detect_host()
    cpu_mod.use_threads(threads)
    peak = cpu_mod.run_peak(cpu, threads=threads, precision=operator.precision)["peak_gflops"]
    if sys_.tunes:
        work_dir = work_dir or tempfile.mkdtemp(prefix=f"tvm_ttile_{system}_")
    return sys_.run(operator, cpu, peak, trials, seed, work_dir, threads, settings, progress, options)


def check_strategy_options(system: str, options: dict) -> None:
    """One line naming the problem if `system`'s search strategy has no such option (before anything runs)."""
    known = get_system(system).strategy_options()
    unknown = sorted(set(options) - set(known))
    if not known:
        raise TTileError(f"{system} has no search strategy options (got {', '.join(sorted(options))}); "
                         f"systems with some: {', '.join(n for n, s in SYSTEMS.items() if s.strategy_options())}")
    if unknown:
        raise TTileError(f"{system}'s search has no option(s) {', '.join(unknown)}; it has {', '.join(sorted(known))}")


def best_module(operator, work_dir, cpu, threads=1, system=None):
    """The best measured schedule of `operator` in a tuner's work_dir, as a scheduled IRModule (an AutoMCL work
    dir: of the operator's dense form)."""
    if system is None:
        system = "automcl" if os.path.exists(WorkDir(work_dir).automcl) else "tvm_ttile"
    return get_system(system).best_module(operator, work_dir, cpu, threads)


def retime(entries, operator, cpu, threads=1, rounds=3, settings: MeasureSettings = MeasureSettings()) -> list:
    """Time every system's best again, side by side in this process, round-robin over `rounds` rounds, so
    that a disturbed moment during one system's tuning does not decide the comparison. `entries` are
    (system, work_dir or None); returns the median seconds of each."""
    from ..timing import medians, round_robin

    return medians(round_robin(in_process_timers(entries, operator, cpu, threads, settings), rounds))


def in_process_timers(entries, operator, cpu, threads=1, settings: MeasureSettings = MeasureSettings()) -> list:
    """One callable per (system, work_dir or None) entry, each returning one timing in seconds (median of
    `settings.repeat`) of that system's best in this process; tuned kernels are built once, here."""
    return [get_system(system).timer(operator, cpu, work_dir, threads, settings) for system, work_dir in entries]


def work_dir_for(root, system, layer, seed, isa, threads=1):
    return os.path.join(root, f"{isa}-{system}-{layer}-seed{seed}" + (f"-{threads}threads" if threads > 1 else ""))

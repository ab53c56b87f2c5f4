"""MetaSchedule plug-ins: hand these to `tvm.s_tir.meta_schedule.tune_tir(...)` (or tune_relax).

    ms.tune_tir(mod, target, work_dir, max_trials_global=50,
                space=TTileSpaceGenerator(), strategy=TTileSearch(sampler="ttile", seed=0),
                builder=ms.builder.LocalBuilder(f_build=tvm_ttile.measure.build_module), ...)

The space generator hands over the unscheduled function; the structure lives in the strategy, which draws
schemes from the structured space, lowers each on a MetaSchedule Schedule (so the trace records it) and
returns them as measure candidates. Records are ordinary MetaSchedule records; open a database with
`open_database` so that the tvm_ttile intrinsics its traces use are registered first.
"""
from __future__ import annotations

import logging
import os
import re

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate, PySearchStrategy
from tvm.s_tir.meta_schedule.space_generator import PySpaceGenerator

from .lowering import lower, problem_of, register_by_name, scheme_of_schedule
from .scheme import Scheme
from .space import Space
from .workdir import WorkDir, append_journal, repair_database


def cpu_tensor_intrinsics_only() -> bool:
    """Make `import tvm.s_tir.tensor_intrin` (which every TuneContext does) register the CPU intrinsics only.

    The package's __init__ parses every target's TVMScript intrinsics: 30-65 s here, CUDA's about two thirds,
    paid once per tuning process (ENVIRONMENT.md). Registered in its place: the package without its __init__,
    plus its x86, arm_cpu and riscv_cpu modules (about 3 s), all MetaSchedule's CPU rules use. Other targets'
    modules still import by name (`import tvm.s_tir.tensor_intrin.cuda`). Does nothing, and returns False, when
    the package is already imported."""
    import importlib
    import importlib.util
    import sys

    import tvm.s_tir

    name = "tvm.s_tir.tensor_intrin"
    if name in sys.modules:
        return False
    package = importlib.util.module_from_spec(importlib.util.find_spec(name))
    sys.modules[name] = tvm.s_tir.tensor_intrin = package
    for sub in ("x86", "arm_cpu", "riscv_cpu"):
        importlib.import_module(f"{name}.{sub}")
    return True


def ttile_problem(mod, target):
    """(Problem, None) when tvm_ttile can tune `mod` (a conv2d_nhwc or matmul block, e.g. a Relax task),
    else (None, the reason)."""
    from .cpu import from_target
    from .errors import TTileError

    cpu = from_target(target)
    try:
        return problem_of(mod["main"], cpu.isa.name, cpu.lanes), None
    except TTileError as e:
        return None, str(e)


@derived_object
class TTileSpaceGenerator(PySpaceGenerator):
    """The design space is the unscheduled function: TTile's structure is drawn by TTileSearch. For whole
    networks (tune_relax) keep MetaSchedule's default post-order-apply space instead: TTileSearch ignores the
    design spaces of tvm_ttile tasks, and the other tasks' evolutionary search needs that space's rules."""

    def __init__(self):
        self.sch_rules, self.postprocs, self.mutator_probs = [], [], {}

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def generate_design_space(self, mod):
        return [tvm.s_tir.Schedule(mod)]

    def clone(self):
        return TTileSpaceGenerator()


@derived_object
class TTileSearch(PySearchStrategy):
    """Random sampling of the structured space (section 6.1 by default; any tvm_ttile sampler by name).

    kept: the catalog microkernels to draw from; by default the target CPU's catalog (built if missing).
    Schemes already in the database for this workload are not measured again (resumed runs).
    first: scheme texts to measure before drawing (e.g. the best of a task with the same operator and sizes).
    """

    def __init__(self, sampler: str = "ttile", seed: int = 0, kept=None, threshold: float = 0.80, threads=None,
                 trial_log: str | None = None, fallback=(), sampler_options: dict | None = None, first=()):
        self.sampler_name, self.seed, self.kept, self.threshold, self.threads = sampler, seed, kept, threshold, threads
        self.first = list(first)
        self.fallback = list(fallback)  # measured microkernels below the threshold, best first
        self.sampler_options = dict(sampler_options or {})
        from .samplers import make_sampler

        make_sampler(sampler, seed, **self.sampler_options)  # a bad name fails here, not inside MetaSchedule's C++
        # Every drawn scheme is appended here (JSON lines, in order), with the error if it could not be lowered.
        self.trial_log = trial_log

    def _initialize_with_tune_context(self, context) -> None:
        from .cpu import from_target

        self.mod = context.mod
        self.target = context.target
        self.cpu = from_target(context.target)
        if self.threads is None:
            self.threads = int(context.target.attrs.get("num-cores", 1)) if context.target.attrs.get("num-cores") else 1
        self.problem, reason = ttile_problem(context.mod, context.target)
        self.delegate = None
        if self.problem is None:  # not a tvm_ttile task: MetaSchedule's evolutionary search, reported
            from .errors import TTileError

            if not context.space_generator.postprocs:
                raise TTileError(f"task {context.task_name} is not a conv2d/matmul task ({reason}); TTileSearch hands "
                                 "it to MetaSchedule's evolutionary search, which needs the default space: pass "
                                 "space='post-order-apply' (tune_relax's default), not TTileSpaceGenerator()")
            logging.getLogger(__name__).warning("task %s: MetaSchedule's default search (%s)",
                                                context.task_name, reason)
            self.delegate = ms.search_strategy.EvolutionarySearch()
            self.delegate._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        from .microkernels.catalog import build_catalog
        from .samplers import make_sampler

        if self.delegate is not None:
            return self.delegate.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database,
                                            cost_model or ms.cost_model.RandomModel())
        if self.kept is not None:
            kept, fallback = self.kept, self.fallback
        else:
            catalog = build_catalog(self.cpu, self.problem.op, self.threshold)
            kept, fallback = catalog.kept, catalog.ranked()
        space = Space(self.problem, kept, fallback, threads=self.threads)
        if space.notes and self.trial_log:
            append_journal(self.trial_log, {"scheme": None, "error": None, "notes": space.notes})
        if space.fallback_used:
            logging.getLogger(__name__).warning(
                "no kept microkernel fits %s: using the best measured ones that do (paper's fallback)", self.problem.size)
            if self.trial_log:
                append_journal(self.trial_log, {"scheme": None, "error": None, "notes": [
                    "fallback: no microkernel above the catalog threshold fits; used the best measured ones"]})
        done = set(measured_schemes(database, self.mod))
        first = [Scheme.parse(t) for t in dict.fromkeys(self.first) if t not in done]
        sampler = make_sampler(self.sampler_name, seed=self.seed, **self.sampler_options)
        drawn = sampler.sample_many(space, max_trials + len(done) + len(first))
        seen = done | {s.text for s in first}
        self.queue = (first + [s for s in drawn if s.text not in seen])[:max_trials]
        self.per_iter = num_trials_per_iter

    def generate_measure_candidates(self):
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        if self.delegate is not None:
            return self.delegate.generate_measure_candidates()

        batch = []
        while self.queue and len(batch) < self.per_iter:
            scheme = self.queue.pop(0)
            sch = tvm.s_tir.Schedule(self.mod)
            entry = {"scheme": scheme.text, "error": None}
            try:
                entry["notes"] = lower(self.problem, scheme, sch, threads=self.threads).notes
            except Exception as e:  # noqa: BLE001 - reported, never silent: the trial log keeps it
                entry["error"] = str(e).splitlines()[0] if str(e) else repr(e)
            if self.trial_log:
                append_journal(self.trial_log, entry)
            if entry["error"]:
                continue
            # Arguments as the builder leaves the function: without its weight-packing block, packed weights.
            batch.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
        return batch or None

    def notify_runner_results(self, measure_candidates, results) -> None:
        # Random sampling learns nothing from results; they reach the database and curve.jsonl.
        if self.delegate is not None:
            self.delegate.notify_runner_results(measure_candidates, results)

    def post_tuning(self) -> None:
        if self.delegate is not None:
            self.delegate.post_tuning()

    def clone(self):
        return TTileSearch(self.sampler_name, self.seed, self.kept, self.threshold, self.threads, self.trial_log,
                           self.fallback, self.sampler_options, self.first)


def prepare_logging(verbose: bool = False) -> None:
    """MetaSchedule's console log at WARNING (INFO with verbose); its per-trial log still goes to work_dir/logs.
    Also drops unnamed handlers from its logger: tune_tir's dictConfig lists handlers by name and fails on a
    second call in a process where one has none (seen under pytest)."""
    logger = logging.getLogger("tvm.s_tir.meta_schedule")
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    for handler in list(logger.handlers):
        if handler.get_name() is None:
            logger.removeHandler(handler)


_NAME_IN_JSON = re.compile(r'"(ttile_[^"]*)"')


def register_intrinsics_in(work_dir: str) -> list:
    """Register every tvm_ttile intrinsic that the database files in `work_dir` mention."""
    names = set()
    for path in (WorkDir(work_dir).records, WorkDir(work_dir).workloads):
        if os.path.exists(path):
            with open(path) as f:
                names.update(_NAME_IN_JSON.findall(f.read()))
    for name in sorted(names):
        register_by_name(name)
    return sorted(names)


def best_schedule(database, mod):
    """(Schedule, record) of the fastest measured record of `mod` in `database`, or None when it has none."""
    if not database.has_workload(mod):
        return None
    records = database.get_top_k(database.commit_workload(mod), 1)
    if not records:
        return None
    sch = tvm.s_tir.Schedule(mod)
    records[0].trace.apply_to_schedule(sch, remove_postproc=False)
    return sch, records[0]


def measured_schemes(database, mod, k: int = 10**6) -> list:
    """The schemes of `mod`'s records in `database`, fastest first (at most k)."""
    if database is None or not database.has_workload(mod):
        return []
    out = []
    for rec in database.get_top_k(database.commit_workload(mod), k):
        sch = tvm.s_tir.Schedule(mod)
        rec.trace.apply_to_schedule(sch, remove_postproc=False)
        text = scheme_of_schedule(sch)
        if text is not None:  # (a record of another tuner of the same workload has no scheme)
            out.append(text)
    return out


def open_database(work_dir: str):
    """A MetaSchedule JSON database in `work_dir`, with the tvm_ttile intrinsics it uses registered."""
    os.makedirs(work_dir, exist_ok=True)
    repair_database(work_dir)  # damaged lines (an interrupted write) are set aside with a warning, not fatal
    register_intrinsics_in(work_dir)
    return ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")

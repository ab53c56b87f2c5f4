"""The search strategy: sampling of the structured space (in drawn or ranked order), each drawn scheme lowered on a MetaSchedule
Schedule (so the trace records it) and handed over as a measure candidate; tasks that are not tvm_ttile's go to
MetaSchedule's evolutionary search, with a warning."""
from __future__ import annotations

import logging
import statistics

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate, PySearchStrategy

from ..lowering import lower
from ..scheme import Scheme
from ..space import Space
from ..workdir import append_journal
from .database import measured_scheme_seconds
from .environment import cpu_tensor_intrinsics_only, evolutionary_search
from .space import ttile_problem


@derived_object
class TTileSearch(PySearchStrategy):
    """Search of the structured space: schemes drawn by a tvm_ttile sampler (section 6.1 by default), measured
    in the order a strategy gives (strategies.STRATEGIES: "random", the order drawn; "model", ranked first;
    "gbfs" and "na2c", walks from measured schemes to their neighbours).

    kept: the catalog microkernels to draw from; by default the target CPU's catalog (built if missing).
    Schemes already in the database for this workload are not measured again (resumed runs).
    first: scheme texts to measure before drawing (e.g. the best of a task with the same operator and sizes).
    """

    def __init__(self, sampler: str = "ttile", seed: int = 0, kept=None, threshold: float = 0.80, threads=None,
                 trial_log: str | None = None, fallback=(), sampler_options: dict | None = None, first=(),
                 strategy: str = "random", strategy_options: dict | None = None):
        self.sampler_name, self.seed, self.kept, self.threshold, self.threads = sampler, seed, kept, threshold, threads
        self.first = list(first)
        self.fallback = list(fallback)  # (microkernel, GFLOPS) of every measured one, best first (Catalog.ranked)
        self.sampler_options = dict(sampler_options or {})
        self.strategy_name, self.strategy_options = strategy, dict(strategy_options or {})
        from ..samplers import make_sampler
        from ..strategies import make_strategy

        # Bad names and options fail here, not inside MetaSchedule's C++.
        make_sampler(sampler, seed, **self.sampler_options)
        make_strategy(strategy, **self.strategy_options)
        # Every drawn scheme is appended here (JSON lines, in order), with the error if it could not be lowered.
        self.trial_log = trial_log
        # Before tune_tir or tune_relax makes its TuneContext, which imports tvm.s_tir.tensor_intrin: then only
        # the CPU intrinsics are parsed, not every target's (a minute otherwise; environment.py).
        cpu_tensor_intrinsics_only()

    def _initialize_with_tune_context(self, context) -> None:
        from ..cpu import from_target

        self.mod = context.mod
        self.target = context.target
        self.cpu = from_target(context.target)
        if self.threads is None:
            self.threads = int(context.target.attrs.get("num-cores", 1)) if context.target.attrs.get("num-cores") else 1
        self.problem, reason = ttile_problem(context.mod, context.target)
        self.delegate = None
        if self.problem is None:  # not a tvm_ttile task: MetaSchedule's evolutionary search, reported
            from ..errors import TTileError

            if not context.space_generator.postprocs:
                raise TTileError(f"task {context.task_name} is not a conv2d/matmul task ({reason}); TTileSearch hands "
                                 "it to MetaSchedule's evolutionary search, which needs the default space: pass "
                                 "space='post-order-apply' (tune_relax's default), not TTileSpaceGenerator()")
            logging.getLogger(__name__).warning("task %s: MetaSchedule's default search (%s)",
                                                context.task_name, reason)
            self.delegate = evolutionary_search()
            self.delegate._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        from ..microkernels.catalog import catalog_for
        from ..samplers import make_sampler

        if self.delegate is not None:
            return self.delegate.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database,
                                            cost_model or ms.cost_model.RandomModel())
        from ..strategies import make_strategy

        catalog = None
        if self.kept is not None:
            kept, fallback = self.kept, self.fallback
        else:
            catalog = catalog_for(self.cpu, self.problem, self.threshold)
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
        done = measured_scheme_seconds(database, self.mod)  # {text: seconds}: walking strategies resume from them
        sampler = make_sampler(self.sampler_name, seed=self.seed, **self.sampler_options)
        self.strategy = make_strategy(self.strategy_name, **self.strategy_options)
        context = None
        if self.strategy.RANKS:
            from ..costmodel import CostContext

            # The rates of this problem's catalog (its window's microkernels too), whoever chose the microkernels.
            catalog = catalog or catalog_for(self.cpu, self.problem, self.threshold)
            context = CostContext.for_cpu(self.cpu, self.problem.op, self.threads, catalog=catalog)
        self.strategy.plan(space, sampler, max_trials, skip=done, first=[Scheme.parse(t) for t in self.first],
                           context=context)
        self.per_iter = num_trials_per_iter
        self.pending, self.failed = [], []  # the last batch: schemes measured (in candidate order), not lowered

    def generate_measure_candidates(self):
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        if self.delegate is not None:
            return self.delegate.generate_measure_candidates()

        batch, self.pending, self.failed = [], [], []
        while not batch:
            schemes = self.strategy.next_batch(self.per_iter)
            if not schemes:
                break
            for scheme in schemes:
                sch = tvm.s_tir.Schedule(self.mod)
                entry = {"scheme": scheme.text, "error": None}
                try:
                    entry["notes"] = lower(self.problem, scheme, sch, threads=self.threads).notes
                except Exception as e:  # noqa: BLE001 - reported, never silent: the trial log keeps it
                    entry["error"] = str(e).splitlines()[0] if str(e) else repr(e)
                if self.trial_log:
                    append_journal(self.trial_log, entry)
                if entry["error"]:
                    self.failed.append(scheme)  # told to the strategy as failed (a walk must not wait for it)
                    continue
                # Arguments as the builder leaves the function: without its weight-packing block, packed weights.
                self.pending.append(scheme)
                batch.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
            if not batch and self.failed:
                self.strategy.observe(self.failed, [None] * len(self.failed))
                self.failed = []
        return batch or None

    def notify_runner_results(self, measure_candidates, results) -> None:
        # Results reach the database and curve.jsonl; a strategy that learns hears them too.
        if self.delegate is not None:
            return self.delegate.notify_runner_results(measure_candidates, results)
        seconds = []
        for res in results:
            secs = [float(x) for x in res.run_secs] if res.run_secs else []
            ok = bool(secs) and res.error_msg is None and min(secs) < 1e9
            seconds.append(statistics.median(secs) if ok else None)
        self.strategy.observe(self.pending[:len(seconds)] + self.failed, seconds + [None] * len(self.failed))

    def post_tuning(self) -> None:
        if self.delegate is not None:
            return self.delegate.post_tuning()
        notes = getattr(self.strategy, "notes", [])  # e.g. a walk that restarted from a random scheme
        if notes and self.trial_log:
            append_journal(self.trial_log, {"scheme": None, "error": None, "notes": list(notes)})

    def clone(self):
        return TTileSearch(self.sampler_name, self.seed, self.kept, self.threshold, self.threads, self.trial_log,
                           self.fallback, self.sampler_options, self.first, self.strategy_name,
                           self.strategy_options)


@derived_object
class DesignSpacesOnce(PySearchStrategy):
    """Measures each design space of the task once, in order, except those the database holds already: for
    small spaces of finished schedules (MemoryBoundSpace)."""

    def _initialize_with_tune_context(self, context) -> None:
        self.mod = context.mod

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        from .database import record_variants
        from ..memory_bound import variant_of

        done = set(record_variants(database, self.mod))
        todo = [s for s in design_spaces if variant_of(s.mod["main"]) not in done][:max_trials]
        self.batch = [MeasureCandidate(s, ArgInfo.from_entry_func(s.mod, remove_preproc=True)) for s in todo]

    def generate_measure_candidates(self):
        batch, self.batch = self.batch, []
        return batch or None

    def notify_runner_results(self, measure_candidates, results) -> None:
        pass

    def post_tuning(self) -> None:
        pass

    def clone(self):
        return DesignSpacesOnce()

"""The search strategy: random sampling of the structured space, each drawn scheme lowered on a MetaSchedule
Schedule (so the trace records it) and handed over as a measure candidate; tasks that are not tvm_ttile's go to
MetaSchedule's evolutionary search, with a warning."""
from __future__ import annotations

import logging

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate, PySearchStrategy

from ..lowering import lower
from ..scheme import Scheme
from ..space import Space
from ..workdir import append_journal
from .database import measured_schemes
from .space import ttile_problem


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
        from ..samplers import make_sampler

        make_sampler(sampler, seed, **self.sampler_options)  # a bad name fails here, not inside MetaSchedule's C++
        # Every drawn scheme is appended here (JSON lines, in order), with the error if it could not be lowered.
        self.trial_log = trial_log

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
            self.delegate = ms.search_strategy.EvolutionarySearch()
            self.delegate._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        from ..microkernels.catalog import build_catalog
        from ..samplers import make_sampler

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

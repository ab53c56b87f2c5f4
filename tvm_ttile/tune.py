"""Tune one operator with the tvm_ttile policy through MetaSchedule, then verify and report the best.

    result = tune(get_layer("ResNet18-2"), trials=50, seed=0, work_dir="tune_resnet18_2")

Candidates are built by measure.PooledBuilder (MetaSchedule's LocalBuilder keeping its processes, with a build
function that skips the 30-45 s `tvm.s_tir.tensor_intrin` import) and timed by MetaSchedule's LocalRunner, or by
an RPCRunner through a tracker.
Records go to a MetaSchedule JSON database in work_dir; rerunning with the same work_dir resumes.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import statistics
import time
from pathlib import Path

import numpy as np
import tvm
from tvm.ir.utils import derived_object
from tvm_ffi import structural_equal
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

from . import cpu as cpu_mod
from .cache import read_json, write_json
from .confirm import confirm_top, reopen
from .context import Context
from .errors import TTileError
from .lowering import scheme_of_schedule
from .measure import MeasureSettings, default_builder, default_runner
from .metaschedule import (TTileSearch, TTileSpaceGenerator, cpu_tensor_intrinsics_only, open_database,
                           prepare_logging, records_of, schedule_of)
from .operators import run_against_reference
from .phases import phase
from .progress import Progress
from .precision import tag_for
from .scheme import Scheme
from .workdir import WorkDir, append_journal, claim, read_journal, work_key


@derived_object
class CurveCallback(PyMeasureCallback):
    """Appends each measured candidate (tuning seconds so far, GFLOPS) to a JSON-lines file, in order,
    and advances the progress bar: the data of convergence curves against trials and wall time."""

    def __init__(self, path, flops, start, bar=None):
        self.path, self.flops, self.start, self.bar = path, flops, start, bar

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
        now = time.time() - self.start
        rows = []
        for res in runner_results:
            secs = [float(x) for x in res.run_secs] if res.run_secs else []
            ok = bool(secs) and res.error_msg is None and min(secs) < 1e9
            rows.append({"seconds": now, "gflops": self.flops / statistics.median(secs) / 1e9 if ok else None})
        append_journal(self.path, *rows)
        if self.bar:
            self.bar.update(len(measure_candidates))


@dataclasses.dataclass
class TuneResult:
    operator: str
    gflops: float
    percent_of_peak: float
    peak_gflops: float
    scheme: str
    trials: int  # measured records for this workload in the database (this run and earlier ones)
    new_trials: int
    seconds: float  # tuning wall time, summed over all runs in work_dir
    verified: bool
    max_abs_error: float
    threads: int
    lowering_failures: list
    lowering_notes: list  # what lowering could not do as asked (e.g. an epilogue left unfused)
    parallel: dict  # how the best scheme's parallel chunks share the threads (Scheme.parallel_balance)
    history: list  # (scheme, gflops or None, error) of this run, in measurement order
    work_dir: str

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["history"] = [{"scheme": s, "gflops": g, "error": e} for s, g, e in self.history]
        return d


def rpc_runner(tracker_host: str, tracker_port: int, key: str, settings: MeasureSettings = MeasureSettings()):
    """Measure on the devices registered under `key` at an RPC tracker (TVM's way to spread measurement)."""
    return ms.runner.RPCRunner(
        rpc_config=ms.runner.RPCConfig(tracker_host=tracker_host, tracker_port=tracker_port, tracker_key=key,
                                       session_timeout_sec=settings.timeout_sec),
        evaluator_config=settings.evaluator_config(), max_workers=1,
    )


def tune(operator, cpu=None, trials: int = 50, seed: int = 0, threads: int = 1, work_dir: str | None = None,
         sampler: str = "ttile", kept=None, runner=None, settings: MeasureSettings = MeasureSettings(),
         trials_per_iter: int = 10, progress: bool = True, verbose: bool = False,
         sampler_options: dict | None = None, strategy: str = "random",
         strategy_options: dict | None = None, builder=None) -> TuneResult:
    """Tune `operator` (an operators.OPERATORS class) and return the verified best. strategy "model"
    ranks a pool of drawn schemes before measuring (strategies.model); with trials=0 it measures no candidate
    and builds the top-ranked scheme (pick_without_measuring). builder: MetaSchedule's builder to build the
    candidates with (default: measure.default_builder)."""
    import tempfile

    from .strategies import make_strategy

    make_strategy(strategy, **(strategy_options or {}))  # a bad name or option: one line, before anything runs
    if trials == 0 and strategy == "model":
        return pick_without_measuring(operator, cpu, seed=seed, threads=threads, sampler=sampler,
                                      sampler_options=sampler_options, strategy_options=strategy_options,
                                      settings=settings)
    if trials <= 0:
        raise TTileError(f"trials must be positive (0 only with the model strategy, which then measures no "
                         f"candidate), got {trials}")
    # TVM's pool is sized before anything in this process runs a parallel loop (Context.make); the precision is
    # the operator's, refused in one line when the CPU lacks it
    ctx = Context.make(cpu=cpu, threads=threads, precision=operator.precision, settings=settings, seed=seed,
                       work_dir=work_dir or tempfile.mkdtemp(prefix="tvm_ttile_tune_"))
    cpu, work_dir, target = ctx.cpu, ctx.work_dir, ctx.target
    operator = fit_weights(operator, ctx.dot)
    ctx.check_runs_here() if runner is None else None
    ctx.claim()  # before any measuring: refuse another CPU's (or precision's) work dir
    mod = tvm.IRModule({"main": operator.prim_func(cpu.lanes)})
    database = open_database(work_dir)
    before = len(records_of(database, mod))
    todo = max(trials - before, 0)
    trial_log = WorkDir(work_dir).trials
    fallback = ()
    if kept is None:  # the CPU's catalog, measured now if it is not cached (its own progress bar)
        from .microkernels.catalog import catalog_for
        from .space import Problem

        problem = Problem.from_operator(operator, cpu.lanes, cpu.isa.name, tag_for(operator.precision, cpu))
        catalog = catalog_for(cpu, problem)
        kept, fallback = catalog.kept, catalog.ranked()
    search = TTileSearch(sampler=sampler, seed=seed, kept=kept, threads=threads, trial_log=trial_log,
                         fallback=fallback, sampler_options=sampler_options or {}, strategy=strategy,
                         strategy_options=strategy_options)
    seconds, database = run_tuner(
        operator.flops, mod, target, work_dir, database, todo, space=TTileSpaceGenerator(), strategy=search,
        cost_model=ms.cost_model.RandomModel(), seed=seed, settings=settings, runner=runner, threads=threads, cpu=cpu,
        trials_per_iter=trials_per_iter, progress=progress, verbose=verbose, builder=builder,
        label=f"tuning {operator.name or type(operator).__name__}", precision=ctx.precision)
    return _report(operator, cpu, mod, target, database, work_dir, trial_log, seconds, todo, threads)


def fit_weights(operator, dot):
    """`operator` with weights `dot` multiplies exactly: an int8 operator on a CPU without VNNI takes weights
    within +-64 (its random ones drawn there, larger ones refused), said in a warning."""
    limit = getattr(operator, "weight_limit", None)
    if limit is None or not operator.kind.exact or dot.weight_limit >= limit:
        return operator
    logging.getLogger(__name__).warning("%s: %s sums products exactly only for |weight| <= %d: the weights are "
                                        "taken within it", operator.name or type(operator).__name__, dot.name,
                                        dot.weight_limit)
    return dataclasses.replace(operator, weight_limit=dot.weight_limit)


def pick_without_measuring(operator, cpu=None, seed: int = 0, threads: int = 1, sampler: str = "ttile",
                           sampler_options: dict | None = None, strategy_options: dict | None = None,
                           settings: MeasureSettings = MeasureSettings()) -> TuneResult:
    """Zero trials: draw the model strategy's pool, rank it, build the top-ranked scheme that lowers, verify it
    against numpy; no candidate is timed. The chosen kernel is then timed once, for the report only."""
    from .costmodel import CostContext
    from .lowering import lower
    from .measure import measure_modules
    from .microkernels.catalog import catalog_for
    from .samplers import make_sampler
    from .space import Problem, Space
    from .strategies import make_strategy

    start = time.time()
    ctx = Context.make(cpu=cpu, threads=threads, precision=operator.precision)  # (one-line refusals)
    cpu = ctx.cpu
    ctx.check_runs_here()
    cpu_tensor_intrinsics_only()
    target = ctx.target  # with the precision's instruction (VNNI, AVX512_BF16)
    mod = tvm.IRModule({"main": operator.prim_func(cpu.lanes)})
    problem = Problem.from_operator(operator, cpu.lanes, cpu.isa.name, tag_for(operator.precision, cpu))
    catalog = catalog_for(cpu, problem)
    space = Space(problem, catalog.kept, catalog.ranked(), threads=threads)
    chooser = make_strategy("model", **(strategy_options or {}))
    chooser.plan(space, make_sampler(sampler, seed, **(sampler_options or {})), 1,
                 context=CostContext.for_cpu(cpu, problem.op, threads, catalog=catalog))
    failures = []
    for scheme in chooser.top(20):  # the first that lowers (a failure is reported, never silent)
        sch = tvm.s_tir.Schedule(mod)
        try:
            notes = lower(problem, scheme, sch, threads=threads).notes
            break
        except Exception as e:  # noqa: BLE001
            failures.append({"scheme": scheme.text, "error": str(e).splitlines()[0] if str(e) else repr(e)})
    else:
        raise TTileError(f"none of the 20 top-ranked schemes could be lowered: {failures[:3]}")
    verified, err = verify(operator, sch.mod, target)
    chosen_seconds = time.time() - start
    (m,) = measure_modules([sch.mod], target, settings)
    if m.error:
        raise TTileError(f"the top-ranked scheme {scheme.text} failed to run: {m.error}")
    gflops = operator.flops / statistics.median(m.seconds) / 1e9
    peak = cpu_mod.run_peak(cpu, threads=threads, precision=operator.precision)["peak_gflops"]
    return TuneResult(operator.name or repr(operator), gflops, 100 * gflops / peak, peak, scheme.text, 0, 0,
                      chosen_seconds, verified, err, threads, failures, notes,
                      scheme.parallel_balance(threads, problem.batch), [], "")


def run_tuner(flops, mod, target, work_dir, database, todo, space, strategy, cost_model, seed, settings,
              runner=None, threads=1, trials_per_iter=10, progress=True, verbose=False, label="tuning",
              builder=None, cpu=None, precision: str = "fp32", confirm: bool = True) -> tuple:
    """Run MetaSchedule's tune_tir for `todo` more trials with the given space/strategy/cost model, through
    the same builder, runner and measurement settings whatever the policy, then re-time the fastest records
    together (confirm.confirm_top, per `settings`). Every measured candidate is appended to
    work_dir/curve.jsonl (trial, tuning seconds so far, GFLOPS). Returns (the total tuning seconds spent in
    work_dir over all runs, confirmation included; the database, reopened when confirmation rewrote it).
    Pass one builder and runner to many calls (default_builder); `cpu`, the processor timing runs on, keys the
    work dir with the target and `precision`; `confirm=False` leaves the re-timing to the caller (a network's
    task searched over several rounds is confirmed once, after its last)."""
    cpu_tensor_intrinsics_only()  # before tune_tir's TuneContext: saves 30-60 s per process
    # never reuse timings made for other threads, targets, CPUs or precisions
    claim(work_dir, work_key(target, threads, settings, cpu, precision))
    offset = add_tuning_seconds(work_dir, 0.0)
    start = time.time()
    if todo:
        prepare_logging(verbose)
        builder, runner = builder or default_builder(settings), runner or default_runner(settings, threads)
        bar = Progress(todo, label, unit="trial") if progress else None
        recorder = CurveCallback(WorkDir(work_dir).curve, flops, start - offset, bar)
        callbacks = ms.measure_callback.MeasureCallback.create("default") + [recorder]
        ms.tune_tir(mod, target, work_dir, max_trials_global=todo, num_trials_per_iter=trials_per_iter,
                    builder=builder, runner=runner, database=database, cost_model=cost_model,
                    measure_callbacks=callbacks, space=space, strategy=strategy, seed=seed,
                    num_tuning_cores=settings.build_workers)
        if bar:
            bar.close()
        if confirm:
            database = confirmed(database, mod, target, settings, builder, runner, progress)
    return add_tuning_seconds(work_dir, time.time() - start), database


def confirmed(database, mod, target, settings, builder, runner, progress=True):
    """`database` after re-timing `mod`'s fastest records together (confirm.confirm_top; reopened when that
    rewrote it)."""
    with phase("confirm-top"):
        if confirm_top(database, mod, target, settings, builder, runner, progress=progress):
            return reopen(database)
    return database


def read_curve(work_dir: str) -> list:
    """[(trial, seconds, gflops or None)] of every measured candidate in work_dir, in measurement order."""
    rows = read_journal(WorkDir(work_dir).curve)
    return [(i + 1, r["seconds"], r["gflops"]) for i, r in enumerate(rows)]


def add_tuning_seconds(work_dir: str, seconds: float) -> float:
    """Tuning wall time summed over every run in work_dir, so a resumed run reports the whole cost."""
    path = WorkDir(work_dir).seconds
    total = seconds
    if os.path.exists(path):
        held = read_json(Path(path))
        if isinstance(held, dict) and isinstance(held.get("seconds"), (int, float)):
            total += held["seconds"]
        else:  # damaged: the curve log's last row holds the tuning seconds up to its last measurement
            before = max((r[1] for r in read_curve(work_dir)), default=0.0)
            logging.getLogger(__name__).warning("%s is damaged: tuning seconds so far taken from %s (%.0f s)", path,
                                                WorkDir.CURVE, before)
            total += before
    write_json(Path(path), {"seconds": total})
    return total


def measured_history(database, mod, flops, trial_log: str) -> list:
    """(scheme, GFLOPS or None, error) of every drawn scheme of `mod`, in the order they were drawn
    (the trial log), with the measurements from the database."""
    measured = {}
    for rec in database.get_all_tuning_records():
        if not structural_equal(rec.workload.mod, mod):
            continue
        sch = schedule_of(rec)
        secs = [float(s) for s in rec.run_secs] if rec.run_secs else []
        ok = secs and min(secs) < 1e9  # MetaSchedule stores failed runs as 1e10 s
        measured[scheme_of_schedule(sch)] = flops / statistics.median(secs) / 1e9 if ok else None
    out, notes = [], set()
    for entry in read_journal(trial_log):
        s = entry["scheme"]
        if s is None:  # a note about the whole run
            notes.update(entry.get("notes", []))
            continue
        if entry.get("notes"):
            notes.update(entry["notes"])
        if entry["error"]:
            out.append((s, None, "lowering failed: " + entry["error"]))
        elif s in measured:
            g = measured.pop(s)
            out.append((s, g, None if g else "build or run failed"))
    return out + [(s, g, None if g else "build or run failed") for s, g in measured.items()], sorted(notes)


def _report(operator, cpu, mod, target, database, work_dir, trial_log, seconds, new_trials, threads) -> TuneResult:
    # measured in this process, at this thread count and the operator's precision
    peak = cpu_mod.run_peak(cpu, threads=threads, precision=operator.precision)["peak_gflops"]
    records = records_of(database, mod)
    history, notes = measured_history(database, mod, operator.flops, trial_log)
    failures = [{"scheme": s, "error": e} for s, g, e in history if e and e.startswith("lowering")]
    history = [h for h in history if not (h[2] and h[2].startswith("lowering"))]
    if not records:
        raise TTileError(f"no successful measurement in {work_dir}; lowering failures: {failures[:3]}; "
                         f"measurement failures: {[h for h in history if h[2]][:3]}")
    best = records[0]
    sch = schedule_of(best)
    verified, err = verify(operator, sch.mod, target)
    secs = statistics.median(float(s) for s in best.run_secs)
    gflops = operator.flops / secs / 1e9
    scheme = scheme_of_schedule(sch)
    from .space import Problem

    batch = Problem.from_operator(operator, cpu.lanes, cpu.isa.name, tag_for(operator.precision, cpu)).batch
    balance = Scheme.parse(scheme).parallel_balance(threads, batch) if scheme else {}
    return TuneResult(operator.name or repr(operator), gflops, 100 * gflops / peak, peak, scheme,
                      len(history), new_trials, seconds, verified, err, threads, failures, notes, balance, history,
                      work_dir)


def verify(operator, mod, target, rtol: float = 1e-3) -> tuple:
    """Run `mod` once on random inputs and compare with the numpy reference (relative to the output scale; an
    integer precision's result must equal it)."""
    got, ref = run_against_reference(operator, mod, target)
    err = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
    if operator.exact:
        return bool(err == 0), err
    scale = float(np.max(np.abs(ref))) or 1.0
    return bool(np.isfinite(err) and err <= rtol * scale), err

"""Tuning a whole network: every task of a prepared Relax module searched by the policy of its kind (policy.py),
its records in one MetaSchedule database in the work dir, its best checked against the untuned function."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import statistics
import time

from tvm.s_tir import meta_schedule as ms
from tvm_ffi import structural_hash

from .. import cpu as cpu_mod
from .. import winograd as wg
from ..context import Context, resolve
from ..errors import TTileError
from ..measure import default_builder, default_runner
from ..metaschedule import (DesignSpacesOnce, MemoryBoundSpace, best_schedule, open_database, records_of,
                            schedule_of, ttile_problem)
from .. import record_library
from ..record_library import RecordLibrary
from ..relax import extract_tasks, quantized
from ..phases import active, phase, recording
from ..progress import Progress, Silent
from ..tune import add_tuning_seconds, confirmed, run_tuner
from ..workdir import WorkDir, append_journal
from .build import verify_against_untuned
from .defaults import COLD_SETTINGS
from .in_network import forget_picks, weight_bytes
from .budget import Standing, create as create_budget
from .policy import create as create_policy
from .search import NetworkSearch, refuse_unknown, take
from .winograd_choice import choose_winograd, winograd_tasks


@dataclasses.dataclass
class TaskResult:
    name: str
    policy: str
    shape: str
    weight: int
    flops: float
    seconds: float  # best run time of one call
    gflops: float
    trials: int
    tuning_seconds: float
    verified: bool  # the tuned function matches the untuned one on random inputs
    max_abs_error: float
    notes: list
    weight_bytes: int = 0  # its constant (layout-free) parameters: what it reads from memory in a cold network
    # Who made the fastest record: the policy, or for a memory-bound task "tvm_ttile <variant>" (memory_bound.py)
    # or "metaschedule's search"
    made_by: str = ""
    # Whether the build runs it: a layer computed with Winograd runs its winograd task instead of its direct one
    built: bool = True
    # Its function's name in the built network when that differs from `name` (a rewritten network numbers its
    # fused functions anew)
    symbol: str = ""
    from_library: bool = False  # its records came from the record library (record_library.py), measured in another run
    ranked: bool = False  # a zero-trial pick: the ranker's top schedule, verified, never timed


@dataclasses.dataclass
class NetworkTuneResult:
    tasks: list  # TaskResult
    tuning_seconds: float
    work_dir: str
    peak_gflops: float
    threads: int
    phases: dict = dataclasses.field(default_factory=dict)  # where its wall time went (phases.PhaseClock.to_json)
    rounds: int = 0  # the budget's rounds of measurement after each task's first (budget.py)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def claim_task_dir(task_dir: str, workload: str, has_records: bool) -> int:
    """Make `task_dir` the directory of the function whose structural hash is `workload`, and return the budget a
    finished run asked for it (0: none). A task directory is named by its place and name in the network, which a
    function changed since (prepared or fused otherwise) can keep: a directory whose asked.json names another
    function is moved aside, logs and all, to `task_dir`.earlier-<that hash>, so the budget, trial log, curve and
    tuning seconds of the new function start clean. An asked.json written before functions were recorded belongs
    to this function while the database holds records of it; an unreadable one is reported and counts for nothing."""
    path = WorkDir(task_dir).asked
    if os.path.exists(path):
        try:
            with open(path) as f:
                saved = json.load(f)
            trials = int(saved["trials"])
        except (ValueError, KeyError, TypeError) as e:
            logging.getLogger(__name__).warning("%s is damaged (%s): its task is searched up to its budget again",
                                                path, type(e).__name__)
            return 0
        owner = str(saved.get("workload", workload if has_records else "unrecorded"))
        if owner == workload:
            return trials
        aside = f"{task_dir}.earlier-{owner}"
        if os.path.exists(aside):
            shutil.rmtree(aside)  # an older copy of the same function's directory
        os.replace(task_dir, aside)
        logging.getLogger(__name__).info("%s held another function's tuning: moved to %s", task_dir, aside)
    os.makedirs(task_dir, exist_ok=True)
    return 0


def earlier_forms(database, task_mods: list, target) -> dict:
    """{Problem: modules} of the conv2d / matmul workloads in `database` that are none of `task_mods`: a task's
    earlier form (the same layer fused or prepared otherwise, e.g. by an earlier version of prepare). A task of
    that Problem first measures their best schemes, as a twin's, instead of starting from blind draws."""
    seen = {structural_hash(m) for m in task_mods}
    found = {}
    for rec in database.get_all_tuning_records():
        key = structural_hash(rec.workload.mod)
        if key in seen:
            continue
        seen.add(key)
        problem, _ = ttile_problem(rec.workload.mod, target)
        if problem is not None:
            found.setdefault(problem, []).append(rec.workload.mod)
    return found



@dataclasses.dataclass
class NetworkRun:
    """What every task of one tune_network call shares: its context, the database and what the tasks learn."""
    context: Context
    database: object
    search: NetworkSearch
    progress: object
    verbose: bool
    earlier: dict = dataclasses.field(default_factory=dict)  # Problem -> earlier forms' modules (earlier_forms)
    twins_of: dict = dataclasses.field(default_factory=dict)  # Problem -> the task modules of it tuned so far
    measurer: dict = dataclasses.field(default_factory=dict)  # one builder and runner, made when first needed
    label: str = ""  # where the task being tuned stands in the run, before its bar's label
    budgets: dict = dataclasses.field(default_factory=dict)  # task dir -> the trials its task measures this round

    # (the context's fields, as the policies read them)
    cpu = property(lambda self: self.context.cpu)
    target = property(lambda self: self.context.target)
    threads = property(lambda self: self.context.threads)
    seed = property(lambda self: self.context.seed)
    settings = property(lambda self: self.context.settings)
    work_dir = property(lambda self: self.context.work_dir)

    def builder_and_runner(self) -> dict:
        if not self.measurer:
            self.measurer.update(builder=default_builder(self.settings),
                                 runner=default_runner(self.settings, self.threads))
        return self.measurer

    def tune(self, task, space, strategy, cost_model, task_dir, trials, per_iter, label, progress,
             confirm=True) -> float:
        tuning, self.database = run_tuner(task.flops, task.mod, self.target, task_dir, self.database, trials, space,
                                          strategy, cost_model, self.seed, self.settings, threads=self.threads,
                                          trials_per_iter=per_iter, progress=progress, verbose=self.verbose,
                                          label=self.label + label, cpu=self.cpu, confirm=confirm, **self.measurer)
        return tuning

    def confirm(self, task, task_dir) -> float:
        """Re-time `task`'s fastest records together (after its budget's last round); its tuning seconds then."""
        start = time.time()
        self.database = confirmed(self.database, task.mod, self.target, self.settings, self.measurer.get("builder"),
                                  self.measurer.get("runner"), self.progress)
        return add_tuning_seconds(task_dir, time.time() - start)


def _tune_task(run: NetworkRun, task, task_dir: str) -> float:
    """Search one task as its policy plans, up to its budget (a finished run's budget is remembered: a task whose
    space holds fewer candidates than the budget, or whose candidates partly failed, is not searched again on
    every resume); returns its tuning seconds (all runs in its directory)."""
    workload = str(structural_hash(task.mod))
    asked = claim_task_dir(task_dir, workload, bool(records_of(run.database, task.mod)))
    plan = create_policy(task.policy).plan(task, run, task_dir)
    if not plan.remembers_budget:
        asked = 0
    todo = 0 if asked >= plan.budget else max(plan.budget - plan.measured, 0)
    if todo or plan.finished:  # the in-network picks were made among the records before this run: stale now
        forget_picks(run.work_dir)
    tuning = 0.0
    with phase(f"tuning {task.policy}"):
        if plan.finished:
            run.builder_and_runner()
            tuning = run.tune(task, MemoryBoundSpace(), DesignSpacesOnce(), ms.cost_model.RandomModel(), task_dir,
                              len(plan.finished), len(plan.finished), f"memory-bound {task.name}", False)
        if plan.budget:
            if todo:
                run.builder_and_runner()
            tuning = run.tune(task, plan.space, plan.strategy, plan.cost_model, task_dir, todo, plan.per_iter,
                              f"{task.policy} {task.name}", run.progress,
                              confirm=not create_policy(task.policy).budgeted)
    with open(WorkDir(task_dir).asked, "w") as f:
        json.dump({"trials": max(asked, plan.budget), "workload": workload}, f)
    return tuning


def _dense_by_automcl(mod, run: NetworkRun) -> tuple:
    """Dense layers tuned by AutoMCL, `trials_per_task` trials per shape (automcl.network): the module with
    them replaced by its kernels, and their results."""
    from ..automcl.network import apply_dense, tune_dense

    results = []
    for (M, K, N), calls, saved in tune_dense(mod, run.cpu, run.work_dir, run.search.trials_per_task, run.threads,
                                              run.seed, run.settings):
        flops, name, shape = 2.0 * M * K * N, f"automcl_dense_{M}x{K}x{N}", f"dense M{M},K{K},N{N}"
        if "error" in saved:
            results.append(TaskResult(name, "automcl", shape, calls, flops, float("nan"), 0.0, 0, 0.0, False,
                                      float("nan"), [f"AutoMCL failed, left to the other policies: "
                                                     f"{saved['error']}"]))
            continue
        results.append(TaskResult(
            name, "automcl", shape, calls, flops, flops / (saved["gflops"] * 1e9), saved["gflops"],
            len(saved["curve"]), saved["seconds"], saved["verified"], saved["max_abs_error"],
            [f"compute {saved['compute']} {tuple(saved['config'])}; {saved['selected_by']}"]))
    return apply_dense(mod, run.work_dir)[0], results


# How dense layers (matmul by a constant) are tuned: as tvm_ttile tasks like any other, or by AutoMCL first.
DENSE_TUNERS = {"tvm_ttile": lambda mod, run: (mod, []), "automcl": _dense_by_automcl}
DENSE_POLICIES = tuple(DENSE_TUNERS)
CONTEXT_OPTIONS = ("cpu", "threads", "seed", "settings", "prepack")  # what tune_network takes one by one


def tune_network(mod, context: Context | None = None, *, search: NetworkSearch | None = None,
                 work_dir: str | None = None, progress=True, verbose=False, **options) -> NetworkTuneResult:
    """Tune every task of the (prepared) Relax module: conv2d/matmul tasks (with their fused epilogues) with
    tvm_ttile's search of the structured space, `trials_per_task` trials each (`search`, a NetworkSearch, or its
    fields passed one by one: trials_per_task, other_trials, dense, sampler_options, strategy, strategy_options,
    winograd); every other task with
    MetaSchedule's default policy, `other_trials` trials each, beside tvm_ttile's few memory-bound schedules
    (memory_bound.py: pooling, means, transposes), each measured once (0: leave them to the default build). Every
    task's best is checked against the untuned function before it is reported (settings=COLD_SETTINGS times
    every candidate with flushed caches, as a layer meets its weights in the network). With `prepack`, constant
    weights are packed for the kernels once at build time (build with the same `prepack`). With
    dense="automcl", dense layers (matmul by a constant) are tuned by AutoMCL instead, `trials_per_task`
    trials per shape (automcl.network), and their epilogues become elementwise tasks. `sampler_options` go to
    the ttile sampler of every conv2d/matmul task, over NETWORK_SAMPLER_OPTIONS (e.g. {"min_reuse": 32});
    `strategy` (strategies.STRATEGIES; NETWORK_STRATEGY by default) orders what those tasks measure. With
    `winograd`, each 3x3 stride-1 conv2d layer is also computed with Winograd F(2,3) and F(4,3) (winograd.py; every
    schedule of those tasks measured once) and the build takes, layer by layer, whichever form was faster
    (work_dir/winograd.json); None: winograd.DEFAULT. `context` (context.Context) gives the CPU, threads, timing
    settings, seed, prepack and work dir; without one, those passed one by one (cpu, threads, seed, settings,
    prepack) make it (by default the host, 1 thread, COLD_SETTINGS, seed 0, prepack, work dir "tune_network")."""
    search = take(NetworkSearch, search, options)
    loose = {k: options.pop(k) for k in CONTEXT_OPTIONS if k in options}
    refuse_unknown("tune_network", options)
    if search.dense not in DENSE_TUNERS:
        raise TTileError(f"unknown dense-layer policy {search.dense!r}; choose from {', '.join(DENSE_TUNERS)}")
    own = active() is None  # (inside tune_model, its clock holds the whole run's phases)
    with recording() as clock:
        result = _tune_network(mod, context, search, work_dir, progress, verbose, loose)
    result.phases = clock.to_json()
    if own:
        append_journal(WorkDir(result.work_dir).phases, {"run": "tune_network", **result.phases})
    return result


def _tune_network(mod, context, search, work_dir, progress, verbose, loose) -> NetworkTuneResult:
    ctx = resolve(context, {"settings": COLD_SETTINGS, "work_dir": "tune_network"}, work_dir=work_dir, **loose)
    ctx = quantized.context_for(mod, ctx)  # a QDQ model's int8 kernels: tuned for the CPU's int8 instruction
    ctx.claim()
    shutil.rmtree(WorkDir(ctx.work_dir).verified, ignore_errors=True)  # made again below, task by task
    shutil.rmtree(WorkDir(ctx.work_dir).ranked, ignore_errors=True)  # (a zero-trial run's picks, made again)
    run = NetworkRun(ctx, open_database(ctx.work_dir), search, progress, verbose)
    start = time.time()
    with phase("tuning automcl"):
        mod, results = DENSE_TUNERS[search.dense](mod, run)
    with phase("extraction"):
        tasks = extract_tasks(mod, ctx)
        # (a zero-trial network has no measurement to choose a layer's form by: direct convolutions)
        if search.trials_per_task and (search.winograd if search.winograd is not None else wg.DEFAULT == "on"):
            tasks += winograd_tasks(mod, ctx)
        tasks = [as_recorded(run.database, t) for t in tasks]
        run.earlier = earlier_forms(run.database, [t.mod for t in tasks], ctx.target)
    dirs = [ctx.dirs.task(i, task.name) for i, task in enumerate(tasks)]
    library = RecordLibrary.of(ctx) if uses_library(search) else None
    if not search.trials_per_task:  # a zero-trial network: each task's top-ranked schedule, verified
        results += [_ranked_task(run, task, task_dir) for task, task_dir in zip(tasks, dirs)]
        return _finish(run, mod, tasks, results, start)
    lent = _from_library(run, library, tasks, dirs)
    searched = {d: 0.0 for d in dirs}
    budget = create_budget(search.budget)
    run.budgets = {d: budget.first(search.trials_per_task) for d in dirs}
    gains, rounds = {}, [[i for i, d in enumerate(dirs) if d not in lent]]
    # Where the whole run is: task i of n, and the time the tasks left should take at the pace so far.
    overall = Progress(len(rounds[0]), "network", unit="task") if progress else Silent()
    while rounds[-1]:
        for n, i in enumerate(rounds[-1]):
            overall.describe(f"network, round {len(rounds)}, task {n + 1} of {len(rounds[-1])}")
            run.label = f"[{i + 1}/{len(tasks)}] "
            before = best_seconds(run.database, tasks[i].mod)
            searched[dirs[i]] = _tune_task(run, tasks[i], dirs[i])
            after = best_seconds(run.database, tasks[i].mod)
            if len(rounds) > 1:
                gains[dirs[i]] = before / after - 1 if before and after else 0.0
            overall.update()
        standings = [Standing(dirs[i], run.budgets[dirs[i]], (best_seconds(run.database, t.mod) or 0) * t.weight,
                              gains.get(dirs[i])) for i, t in enumerate(tasks)
                     if create_policy(t.policy).budgeted and dirs[i] not in lent]
        more = budget.more(standings, search.trials_per_task)
        run.budgets.update(more)
        rounds.append([i for i, d in enumerate(dirs) if d in more])
        overall.add(len(rounds[-1]))
    overall.close()
    for i in sorted({i for r in rounds for i in r}):  # each task searched in rounds: confirmed once, at its end
        if create_policy(tasks[i].policy).budgeted and searched[dirs[i]] and run.measurer:
            searched[dirs[i]] = run.confirm(tasks[i], dirs[i])
    with phase("record library"):
        if library is not None:
            library.keep([t.mod for t, d in zip(tasks, dirs) if d not in lent], run.database)
    for task, task_dir in zip(tasks, dirs):
        with phase("verification"):
            result = task_result(task, run.database, run.target, searched[task_dir], run.work_dir)
        if task_dir in lent:
            result.notes.append(f"{lent[task_dir]} record(s) from the record library: not measured in this run")
            result.from_library = True
        results.append(result)
    return _finish(run, mod, tasks, results, start, rounds=len(rounds) - 1)


def _from_library(run: NetworkRun, library, tasks, dirs) -> dict:
    """{task dir: records lent} of the tasks whose records the library holds (copied into the work dir's
    database), when the work dir has none of its own."""
    lent = {}
    if library is None:
        return lent
    with phase("record library"):
        for task, task_dir in zip(tasks, dirs):
            if not records_of(run.database, task.mod, 1):
                n = library.lend(task.mod, run.database)
                if n:
                    lent[task_dir] = n
    return lent


def _ranked_task(run: NetworkRun, task, task_dir: str) -> TaskResult:
    """A zero-trial task: its policy's schedule chosen without measuring (the ranker's top scheme for a
    conv2d/matmul), checked against the untuned function; the others keep the default build."""
    policy = create_policy(task.policy)
    with phase("zero-trial picks"):
        picked = policy.unmeasured(task, run, task_dir)
    if picked is None:
        return TaskResult(task.name, task.policy, task.shape, task.weight, task.flops, float("nan"), 0.0, 0, 0.0,
                          False, float("nan"), [policy.missing], weight_bytes(task.mod))
    sch, note = picked
    with phase("verification"):
        ok, err = verify_against_untuned(task.mod, sch.mod, run.target)
    if ok:
        keep_ranked(run.work_dir, task.mod, sch, run.target)
    return TaskResult(task.name, task.policy, task.shape, task.weight, task.flops, float("nan"), 0.0, 0, 0.0, ok,
                      err, [note if ok else f"{note}: failed its check (max error {err:.3g}), built untuned"],
                      weight_bytes(task.mod), policy.made_by(sch.mod), ranked=ok)


def _finish(run: NetworkRun, mod, tasks, results, start: float, rounds: int = 0) -> NetworkTuneResult:
    ctx = run.context
    with phase("winograd choice"):
        choose_winograd(list(zip(tasks, results[-len(tasks):])), mod, ctx)
    structured = [r for r in results if create_policy(r.policy).structured]
    failed = [r for r in structured if not r.trials and not r.ranked]
    if failed and len(failed) == len(structured):
        raise TTileError(f"every conv2d/matmul task failed to tune ({len(failed)} of them), e.g. {failed[0].name}: "
                         f"{'; '.join(failed[0].notes) or 'no successful measurement'}; see {ctx.work_dir}/tasks/*/"
                         f"{WorkDir.TRIALS}. No untuned build is reported as a result")
    tuning_seconds = time.time() - start
    with phase("peaks"):  # (a QDQ network's peak is int8's: its convolutions' instruction)
        peak = cpu_mod.run_peak(ctx.cpu, threads=ctx.threads, precision=ctx.precision)["peak_gflops"]
    return NetworkTuneResult(results, tuning_seconds, ctx.work_dir, peak, ctx.threads, rounds=rounds)


def uses_library(search: NetworkSearch) -> bool:
    """Whether `search` reads and adds to the record library (its `library`, else records.DEFAULT)."""
    return search.library if search.library is not None else record_library.DEFAULT == "on"


def best_seconds(database, mod) -> float | None:
    """The median run time of `mod`'s fastest record in `database` (None: no successful one)."""
    best = records_of(database, mod, 1)
    secs = [float(v) for v in best[0].run_secs] if best else []
    return statistics.median(secs) if secs and min(secs) < 1e9 else None


def keep_ranked(work_dir: str, mod, sch, target) -> None:
    """File a zero-trial pick in the work dir's `ranked` database, which the build reads after the tuning records
    (build.build_executable): a later tuned run's records take its place. Its run time is no measurement (1 s)."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    database = open_database(WorkDir(work_dir).ranked)
    database.commit_tuning_record(ms.database.TuningRecord(
        sch.trace, database.commit_workload(mod), [1.0], target, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))


def as_recorded(database, task):
    """`task` with the function the work dir's database has recorded for it, when it has one: structurally the
    same, but its blocks may carry other names (TVM names some after Relax variables), and traces tuned on the
    task's own names would be filed under the recorded workload, where they do not replay."""
    if not database.has_workload(task.mod):
        return task
    return dataclasses.replace(task, mod=database.commit_workload(task.mod).mod)


# Records tried, fastest first, when the fastest fails its check against the untuned function.
VERIFY_DEPTH = 8


def _built_instead(task, database, target, work_dir: str, err: float) -> tuple:
    """Commit what the build runs for a task whose fastest record failed its check: (the note saying so, the
    (Schedule, record, max error) that passed or None)."""
    from tvm.s_tir.schedule import Trace

    os.makedirs(WorkDir(work_dir).verified, exist_ok=True)
    override = ms.database.JSONDatabase(work_dir=WorkDir(work_dir).verified, module_equality="structural")
    workload = override.commit_workload(task.mod)
    for rank, rec in enumerate(records_of(database, task.mod, VERIFY_DEPTH)[1:], start=2):
        sch = schedule_of(rec)
        ok, rec_err = verify_against_untuned(task.mod, sch.mod, target)
        if ok:
            override.commit_tuning_record(ms.database.TuningRecord(rec.trace, workload, rec.run_secs, rec.target,
                                                                   rec.args_info))
            return (f"its fastest record failed the check (max error {err:.3g}); the build runs its record no. {rank}, "
                    "which passed (its time here)"), (sch, rec, rec_err)
    best = records_of(database, task.mod, 1)[0]
    override.commit_tuning_record(ms.database.TuningRecord(Trace([], {}), workload, [1e9], best.target,
                                                           best.args_info))
    return (f"its fastest record failed the check (max error {err:.3g}) and none of the next "
            f"{VERIFY_DEPTH - 1} passed: the build runs the function as written (untuned)"), None


def task_result(task, database, target, tuning_seconds, work_dir: str | None = None) -> TaskResult:
    """The task's best record, checked against the untuned function. When it fails, the next fastest are
    checked (VERIFY_DEPTH) and the first that passes, or else the function as written, goes into the work dir's
    `verified` database, which the build puts before the tuning records (build.build_executable); the result
    reports what the build runs, with a note: the record that passed, or the fastest, failed, when none did."""
    best = best_schedule(database, task.mod)
    notes = [task.reason] if task.reason else []
    size = weight_bytes(task.mod)
    policy = create_policy(task.policy)
    if best is None:
        return TaskResult(task.name, task.policy, task.shape, task.weight, task.flops, float("nan"), 0.0, 0,
                          tuning_seconds, False, float("nan"), notes + [policy.missing], size)
    sch, record = best
    ok, err = verify_against_untuned(task.mod, sch.mod, target)
    if not ok and work_dir is not None:
        note, passed = _built_instead(task, database, target, work_dir, err)
        notes.append(note)
        if passed is not None:
            sch, record, err = passed
            ok = True
    secs = statistics.median(float(s) for s in record.run_secs)
    made_by = policy.made_by(sch.mod)
    return TaskResult(task.name, task.policy, task.shape, task.weight, task.flops, secs, task.flops / secs / 1e9,
                      len(records_of(database, task.mod)), tuning_seconds, ok, err, notes, size, made_by)


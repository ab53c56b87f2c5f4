"""TVM-side baselines, run through the same builder, runner and measurement settings as tvm_ttile:
MetaSchedule's default policy (Ansor's successor: post-order-apply + evolutionary + XGBoost) and the
AutoTVM-style templates searched with XGBoost (evolutionary), at random (replay-func), or by the seed paper's G-BFS
and N-A2C walking the templates' knobs (metaschedule.KnobSearch)."""
from __future__ import annotations

import tvm
from tvm.s_tir import meta_schedule as ms

from ..metaschedule import evolutionary_search, open_database, records_of
from ..precision import target_for
from ..metaschedule.knob_search import KnobSearch
from ..tune import run_tuner
from .templates import template_for

def template_space(mod):
    return ms.space_generator.ScheduleFn(template_for(mod))


POLICIES = {
    # system name: (space, strategy, cost model) factory of the workload, the seed and the search's options
    "metaschedule": lambda mod, seed, options: ("post-order-apply", evolutionary_search(), "xgb"),
    "template-xgb": lambda mod, seed, options: (template_space(mod), evolutionary_search(), "xgb"),
    "template-random": lambda mod, seed, options: (template_space(mod), "replay-func", ms.cost_model.RandomModel()),
    "gbfs": lambda mod, seed, options: (template_space(mod), KnobSearch("gbfs", seed, options),
                                        ms.cost_model.RandomModel()),
    "na2c": lambda mod, seed, options: (template_space(mod), KnobSearch("na2c", seed, options),
                                        ms.cost_model.RandomModel()),
}


def tune_tvm_baseline(system, operator, cpu, trials, seed, work_dir, settings, threads=1, progress=True,
                      strategy_options=None):
    """Returns (database, mod, target, total tuning seconds); `strategy_options` go to the knob search of gbfs and
    na2c."""
    target = target_for(cpu, threads, operator.precision)
    mod = tvm.IRModule({"main": operator.prim_func(cpu.lanes)})
    database = open_database(work_dir)
    before = len(records_of(database, mod))
    space, strategy, cost_model = POLICIES[system](mod, seed, strategy_options)
    seconds, database = run_tuner(
        operator.flops, mod, target, work_dir, database, max(trials - before, 0), space=space, strategy=strategy,
        cost_model=cost_model, seed=seed, settings=settings, threads=threads, trials_per_iter=min(64, max(trials, 1)),
        progress=progress, label=f"{system} {operator.name or ''}", cpu=cpu, precision=operator.precision)
    return database, mod, target, seconds


def tune_network_metaschedule(mod, cpu, work_dir, trials, threads=1, seed=0, settings=None, progress=True,
                              prepack=True):
    """MetaSchedule's whole-network tuning (tune_relax: gradient task scheduler, default policy) of a
    prepared Relax module with `trials` trials in all, through the same builder and runner as tvm_ttile.
    With `prepack` the weights are marked layout-free as for tvm_ttile, so that MetaSchedule's RewriteLayout
    postproc packs them too (TVM's cpu_weight_prepack). Returns (database, tuning seconds); build with
    network.build_network(mod, database, prepack=prepack)."""
    import json
    import os
    import time

    from ..confirm import confirm_all
    from ..measure import MeasureSettings, default_builder, default_runner
    from ..metaschedule import cpu_tensor_intrinsics_only, prepare_logging
    from ..relax import fuse
    from ..tune import add_tuning_seconds

    from ..workdir import WorkDir, claim, work_key

    settings = settings or MeasureSettings()
    target = cpu.target(threads)
    claim(work_dir, work_key(target, threads, settings, cpu))
    database = open_database(work_dir)
    done = len(database.get_all_tuning_records())
    asked_file = WorkDir(work_dir).asked  # a finished run's budget: failed trials are not redone
    if os.path.exists(asked_file):
        with open(asked_file) as f:
            done = max(done, json.load(f)["trials"])
    start = time.time()
    if trials > done:
        prepare_logging()
        cpu_tensor_intrinsics_only()
        fused = fuse(mod, target, prepack)
        # MetaSchedule's default of 64 trials per task iteration would leave tasks untuned (and unscheduled)
        # when the budget is below 64 per task: share it so that every task gets at least one iteration.
        n_tasks = len(ms.relax_integration.extract_tasks(fused, target))
        per_iter = min(64, max(8, trials // max(n_tasks, 1)))
        builder, runner = default_builder(settings), default_runner(settings, threads)
        ms.relax_integration.tune_relax(
            fused, None, target, work_dir, max_trials_global=trials - done, num_trials_per_iter=per_iter,
            builder=builder, runner=runner, database=database, seed=seed)
        # Each task's fastest records timed again together, as tvm_ttile's network tuning does.
        database = confirm_all(database, target, settings, builder, runner, progress)
        with open(asked_file, "w") as f:
            json.dump({"trials": trials}, f)
    return database, add_tuning_seconds(work_dir, time.time() - start)

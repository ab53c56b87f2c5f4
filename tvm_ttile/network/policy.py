"""How each kind of network task is tuned. A task gets its kind at extraction (relax.extract_tasks: "tvm_ttile",
"winograd", "attention" or "metaschedule"); `create(kind)` is the one place a kind becomes the policy that plans its
search."""
from __future__ import annotations

import dataclasses

import tvm
from tvm.s_tir import meta_schedule as ms

from .. import attention
from .. import winograd as wg
from ..errors import TTileError
from ..memory_bound import schedules as memory_bound_schedules, variant_of
from ..metaschedule import (AttentionSpace, DesignSpacesOnce, TTileSearch, TTileSpaceGenerator, WinogradSpace,
                            evolutionary_search, measured_schemes, record_variants, records_of, ttile_problem)
from ..microkernels.catalog import catalog_for
from ..workdir import WorkDir
from .defaults import TWIN_SCHEMES, network_sampler_options, network_strategy_options


@dataclasses.dataclass
class Plan:
    """What one task's run measures: `budget` candidates of `space` in the order of `strategy`, `measured` of
    them there already, `per_iter` per round; `finished` names tvm_ttile's finished schedules of the task to
    measure once before (memory_bound.py)."""
    space: object
    strategy: object
    cost_model: object
    budget: int
    measured: int
    per_iter: int
    remembers_budget: bool = True  # a finished run's budget keeps a resume from searching the task again
    finished: list = dataclasses.field(default_factory=list)


MAX_PER_BATCH = 10  # candidates built and timed together (MetaSchedule's trials per iteration)


class TaskPolicy:
    kind = ""
    structured = True  # tvm_ttile's own forms (its share of a network's FLOPs): a run where all fail is refused
    rewritten = False  # a layer rewritten into another form (Winograd): its FLOPs are not the network's
    picks_in_network = False  # its top candidates may be timed inside the running network (in_network.py)
    budgeted = False  # its trials follow the network's budget (budget.py): more where the network's time is
    missing = "no record: built with the default schedule"  # what a task without a record is told

    def unmeasured(self, task, run, task_dir: str):
        """A zero-trial network's pick, measuring nothing: (Schedule, what chose it), or None (the default
        build)."""
        return None

    def made_by(self, scheduled_mod) -> str:
        """Who made a record of this task."""
        return self.kind

    def layer_form(self, task, target):
        """(layer, Winograd tile size m; 0 for the direct form) when the task computes a 3x3 layer that Winograd
        could compute (winograd.py), else None: what the per-layer choice between the forms compares."""
        return None

    def plan(self, task, run, task_dir: str) -> Plan:
        raise NotImplementedError


class TTilePolicy(TaskPolicy):
    """conv2d / matmul with their epilogues: tvm_ttile's structured space, searched by the network strategy."""
    kind = "tvm_ttile"
    picks_in_network = True
    budgeted = True
    RANKED_DEPTH = 20  # top-ranked schemes tried, in order, until one lowers

    def unmeasured(self, task, run, task_dir):
        from ..costmodel import CostContext
        from ..lowering import lower
        from ..samplers import make_sampler
        from ..space import Space
        from ..strategies import make_strategy

        problem, _ = ttile_problem(task.mod, run.target)
        catalog = catalog_for(run.cpu, problem)
        space = Space(problem, catalog.kept, catalog.ranked(), threads=run.threads)
        # the model strategy's ranking whatever the network's strategy: the only order that needs no measurement
        ranking = make_strategy("model", **network_strategy_options(run.search.strategy_options
                                                                   if run.search.strategy == "model" else {}))
        ranking.plan(space, make_sampler("ttile", run.seed, **network_sampler_options(run.search.sampler_options)),
                     1, context=CostContext.for_cpu(run.cpu, problem.op, run.threads, catalog=catalog))
        errors = []
        for rank, scheme in enumerate(ranking.top(self.RANKED_DEPTH), start=1):
            sch = tvm.s_tir.Schedule(task.mod)
            try:
                lower(problem, scheme, sch, threads=run.threads)
            except Exception as e:  # noqa: BLE001 - the next one is tried; all failing is reported
                errors.append(str(e).splitlines()[0] if str(e) else repr(e))
                continue
            return sch, f"zero trials: ranked no. {rank} of a pool, {scheme.text}, not timed"
        task.reason = f"none of the {self.RANKED_DEPTH} top-ranked schemes lowers: " + "; ".join(errors[:2])
        return None

    def plan(self, task, run, task_dir):
        problem, _ = ttile_problem(task.mod, run.target)
        catalog = catalog_for(run.cpu, problem)
        # Tasks of one operator and size (with other epilogues) share what they learn: a twin first measures
        # the best schemes of those tuned before it, then draws with another seed.
        twins = run.twins_of.setdefault(problem, list(run.earlier.get(problem, [])))
        place = next((i for i, t in enumerate(twins) if t is task.mod), len(twins))  # (a later round: its own)
        first = [t for twin in twins[:place] for t in measured_schemes(run.database, twin, TWIN_SCHEMES)]
        strategy = TTileSearch(seed=run.seed + place, kept=catalog.kept, fallback=catalog.ranked(),
                               threads=run.threads, trial_log=WorkDir(task_dir).trials, first=first,
                               sampler_options=network_sampler_options(run.search.sampler_options),
                               strategy=run.search.strategy,
                               strategy_options=network_strategy_options(run.search.strategy_options, run.search.strategy))
        if place == len(twins):
            twins.append(task.mod)
        return Plan(TTileSpaceGenerator(), strategy, ms.cost_model.RandomModel(),
                    run.budgets.get(task_dir, run.search.trials_per_task), len(records_of(run.database, task.mod)),
                    min(MAX_PER_BATCH, max(run.budgets.get(task_dir, MAX_PER_BATCH), 1)))


    def layer_form(self, task, target):
        layer = wg.layer_of(task.mod["main"], ttile_problem(task.mod, target)[0])
        return None if layer is None else (layer, 0)


def _each_once(space, schedules, what: str, task, run) -> Plan:
    """A Plan measuring once each finished schedule of `space`, `schedules(errors)` ([(name, schedule)], why the
    others failed in `errors`); those the database has no record of (new, or failed before) are measured on a
    resume, whatever an earlier run asked. When none lowers the task is told why (`what`: which schedules)."""
    errors = []
    made = [n for n, _ in schedules(errors)]
    if not made:  # reported with the task (no record), with why
        task.reason = f"no {what} schedule of this function lowers: " + "; ".join(errors[:2])
    measured = set(record_variants(run.database, task.mod))
    return Plan(space, DesignSpacesOnce(), ms.cost_model.RandomModel(), len(made), sum(n in measured for n in made),
                max(len(made), 1), remembers_budget=False)


class WinogradPolicy(TaskPolicy):
    """A 3x3 layer computed with Winograd (winograd.py): each of its schedules measured once."""
    kind = "winograd"
    rewritten = True
    missing = "no record: this form is not chosen"

    def layer_form(self, task, target):
        conv = wg.conv_from_key(task.shape)
        return conv.layer, conv.m

    def plan(self, task, run, task_dir):
        return _each_once(WinogradSpace(), lambda errors: wg.schedules(
            task.mod, run.cpu.lanes, run.cpu.vector_registers, run.threads, errors), "Winograd", task, run)


class AttentionPolicy(TaskPolicy):
    """Attention's matmul, softmax and matmul fused (attention.py): each of its schedules measured once."""
    kind = "attention"

    def made_by(self, scheduled_mod):
        return variant_of(scheduled_mod["main"]) or self.kind

    def plan(self, task, run, task_dir):
        return _each_once(AttentionSpace(), lambda errors: attention.schedules(
            task.mod, run.cpu.lanes, run.threads, errors), "fused attention", task, run)

    def unmeasured(self, task, run, task_dir):
        made = attention.schedules(task.mod, run.cpu.lanes, run.threads)
        return (made[0][1], f"zero trials: the first fitting schedule, {made[0][0]}, not timed") if made else None


class MetaSchedulePolicy(TaskPolicy):
    """Every other task: MetaSchedule's own search, beside tvm_ttile's few finished memory-bound schedules."""
    kind = "metaschedule"
    structured = False

    def made_by(self, scheduled_mod):
        variant = variant_of(scheduled_mod["main"])
        return f"tvm_ttile {variant}" if variant else "metaschedule's search"

    def plan(self, task, run, task_dir):
        budget = run.search.other_trials
        variants = record_variants(run.database, task.mod)
        finished = ([n for n, _ in memory_bound_schedules(task.mod, run.cpu.lanes, run.threads) if n not in variants]
                    if run.search.memory_bound else [])
        # (the memory-bound schedules, measured first, are not in MetaSchedule's budget)
        return Plan("post-order-apply", evolutionary_search(), "xgb", budget, sum(v is None for v in variants),
                    min(64, max(budget, 1)), finished=finished)


class AutoMCLPolicy(TaskPolicy):
    """Dense layers tuned by AutoMCL before extraction (automcl.network): never planned here."""
    kind = "automcl"


POLICIES = {p.kind: p for p in (TTilePolicy(), WinogradPolicy(), AttentionPolicy(), MetaSchedulePolicy(),
                                 AutoMCLPolicy())}


def create(kind: str) -> TaskPolicy:
    """The policy of task kind `kind`."""
    try:
        return POLICIES[kind]
    except KeyError:
        raise TTileError(f"unknown task policy {kind!r}; known: {', '.join(POLICIES)}") from None


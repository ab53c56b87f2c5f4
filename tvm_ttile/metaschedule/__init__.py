"""MetaSchedule plug-ins: hand these to `tvm.s_tir.meta_schedule.tune_tir(...)` (or tune_relax).

    ms.tune_tir(mod, target, work_dir, max_trials_global=50,
                space=TTileSpaceGenerator(), strategy=TTileSearch(sampler="ttile", seed=0),
                builder=tvm_ttile.measure.PooledBuilder(f_build=tvm_ttile.measure.build_module), ...)

The space generator hands over the unscheduled function; the structure lives in the strategy, which draws
schemes from the structured space, lowers each on a MetaSchedule Schedule (so the trace records it) and
returns them as measure candidates. Records are ordinary MetaSchedule records; open a database with
`open_database` so that the tvm_ttile intrinsics its traces use are registered first.

A network's memory-bound tasks (pooling, means, transposes) are measured with MemoryBoundSpace and
DesignSpacesOnce: a few finished schedules (memory_bound.py), each once, beside MetaSchedule's own search; its
Winograd convolutions (winograd.py) with WinogradSpace and its fused attentions (attention.py) with
AttentionSpace, both with DesignSpacesOnce.

The package, one module per concept: space.py (the space generators and which tasks are tvm_ttile's),
search.py (the search strategies), database.py (opening a database, the records of a workload, the best one),
environment.py (what a tuning process sets up first: CPU intrinsics only, MetaSchedule's log level).
"""
from .database import (best_schedule, measured_schemes, record_variants, open_database, records_of, schedule_of,
                       register_intrinsics_in)
from .environment import cpu_tensor_intrinsics_only, evolutionary_search, prepare_logging
from .search import DesignSpacesOnce, TTileSearch
from .space import AttentionSpace, MemoryBoundSpace, TTileSpaceGenerator, WinogradSpace, ttile_problem

__all__ = ["AttentionSpace", "DesignSpacesOnce", "MemoryBoundSpace", "TTileSearch", "TTileSpaceGenerator",
           "best_schedule", "cpu_tensor_intrinsics_only", "evolutionary_search", "measured_schemes", "open_database",
           "prepare_logging", "record_variants", "records_of", "register_intrinsics_in", "schedule_of", "ttile_problem",
           "WinogradSpace"]

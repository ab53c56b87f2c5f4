"""What a tuning process sets up before MetaSchedule runs: the CPU tensor intrinsics only, and the log level."""
from __future__ import annotations

import logging


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


def prepare_logging(verbose: bool = False) -> None:
    """MetaSchedule's console log at WARNING (INFO with verbose); its per-trial log still goes to work_dir/logs.
    Also drops unnamed handlers from its logger: tune_tir's dictConfig lists handlers by name and fails on a
    second call in a process where one has none (seen under pytest)."""
    logger = logging.getLogger("tvm.s_tir.meta_schedule")
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    for handler in list(logger.handlers):
        if handler.get_name() is None:
            logger.removeHandler(handler)


def evolutionary_search():
    """MetaSchedule's evolutionary search as its default ("evolutionary"), or with the population
    $TVM_TTILE_EVOLUTIONARY_POPULATION sets (e.g. 32 for quick runs: the tests; the default is 512)."""
    import os

    from tvm.s_tir import meta_schedule as ms

    value = os.environ.get("TVM_TTILE_EVOLUTIONARY_POPULATION")
    if value is None:
        return ms.search_strategy.EvolutionarySearch()
    if not value.isdigit() or int(value) < 2:
        from ..errors import TTileError

        raise TTileError(f"TVM_TTILE_EVOLUTIONARY_POPULATION must be a whole number >= 2, got {value!r}")
    size = int(value)
    return ms.search_strategy.EvolutionarySearch(population_size=size, init_min_unmeasured=min(50, size))

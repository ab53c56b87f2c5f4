"""How a network is searched and what it is compared with: two frozen option values that tune_network and
tune_model take whole (`search=`, `compare=`), or make from the same names passed one by one."""
from __future__ import annotations

import dataclasses
from types import MappingProxyType

from ..baselines.engines import ENGINES
from ..errors import TTileError
from .budget import create as create_budget
from .defaults import NETWORK_STRATEGY
from .in_network import IN_NETWORK_TOP

LIBRARIES = ("onnxruntime", "openvino", "torch")  # the default; any of baselines.engines.ENGINES


def _frozen(options=None) -> MappingProxyType:
    return MappingProxyType(dict(options or {}))


@dataclasses.dataclass(frozen=True)
class NetworkSearch:
    """How each task of a network is tuned. `trials_per_task`: the most trials a conv2d/matmul task measures (0:
    none, a zero-trial network: each task's top-ranked scheme, verified); `budget`: how many of those each task
    measures (budget.BUDGETS: "share", the tasks holding the network's time measure more while it pays; "fixed",
    every task `trials_per_task`); `other_trials`: MetaSchedule's evolutionary search of every other task, beside
    tvm_ttile's memory-bound schedules, measured once each (default 0: those schedules alone; `memory_bound`
    False: not those either, the default build); `library`: take a task's records from the per-CPU record library
    when it holds them, and add the run's (None: record_library.DEFAULT); `dense`: who tunes dense
    layers (tune.DENSE_POLICIES, checked by tune_network); `strategy` and `strategy_options`: how conv2d/matmul tasks pick what to measure
    (strategies.STRATEGIES, over defaults.NETWORK_STRATEGY_OPTIONS); `sampler_options`: the ttile sampler's, over
    defaults.NETWORK_SAMPLER_OPTIONS; `winograd`: also time Winograd forms of the 3x3 layers (None:
    winograd.DEFAULT); `in_network_top`: how many of each task's fastest candidates the build times inside the
    running network (0 or 1: tuning's pick)."""
    trials_per_task: int = 50
    other_trials: int = 0
    dense: str = "tvm_ttile"
    strategy: str = NETWORK_STRATEGY
    strategy_options: MappingProxyType = dataclasses.field(default_factory=_frozen)
    sampler_options: MappingProxyType = dataclasses.field(default_factory=_frozen)
    winograd: bool | None = None
    in_network_top: int = IN_NETWORK_TOP
    budget: str = "share"
    library: bool | None = None
    memory_bound: bool = True

    def __post_init__(self):
        create_budget(self.budget)  # (an unknown name: one line)
        for name in ("trials_per_task", "other_trials", "in_network_top"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TTileError(f"{name} must be a whole number >= 0, got {value!r}")
        object.__setattr__(self, "strategy", self.strategy or NETWORK_STRATEGY)
        for name in ("strategy_options", "sampler_options"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))


@dataclasses.dataclass(frozen=True)
class Comparisons:
    """What tune_model times beside tvm_ttile: MetaSchedule on the whole network with `metaschedule_trials`
    trials (0: not run; "same": as many as tvm_ttile measured), the `libraries` (baselines.engines.ENGINES;
    default LIBRARIES), and for a quantized model the `fp32_model` it was quantized from (a built-in name or an
    .onnx path: top-1 agreement and error over fidelity.FP32_INPUTS random inputs; None: not compared)."""
    metaschedule_trials: int | str = 0
    libraries: tuple = LIBRARIES
    fp32_model: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "libraries", tuple(self.libraries))
        unknown = [v for v in self.libraries if v not in ENGINES]
        if unknown:
            raise TTileError(f"unknown libraries {', '.join(map(str, unknown))}; choose from {', '.join(ENGINES)}")
        trials = self.metaschedule_trials
        if trials != "same" and (isinstance(trials, bool) or not isinstance(trials, int) or trials < 0):
            raise TTileError(f"metaschedule_trials must be a whole number >= 0 or 'same', got {trials!r}")


def take(cls, value, loose: dict):
    """`value` (a `cls`, or None for the defaults) with the fields of `cls` found in `loose` put in (popped;
    None means not given), so a caller may pass the value whole or its fields one by one."""
    if value is not None and not isinstance(value, cls):
        raise TTileError(f"expected a {cls.__name__}, got {type(value).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    given = {k: loose.pop(k) for k in list(loose) if k in names}
    given = {k: v for k, v in given.items() if v is not None}
    value = value or cls()
    return dataclasses.replace(value, **given) if given else value


def refuse_unknown(function: str, loose: dict) -> None:
    """One line naming the options `function` does not take (what is left of `loose` after `take`)."""
    if loose:
        raise TTileError(f"{function}() got unknown option(s) {', '.join(sorted(loose))}")

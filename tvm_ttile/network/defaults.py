"""What network tuning uses unless the caller says otherwise; why each was chosen: docs/decisions.md."""
from __future__ import annotations

import dataclasses

from ..measure import MeasureSettings

# Caches flushed, weights cold, as a layer meets them in the network.
COLD_SETTINGS = MeasureSettings(number=1, repeat=10, cache_flush=True)
# What tune-model's --cache-flush can ask for: everything but the input flushed ("on"), only the weights and the
# output flushed, the input and the residuals an epilogue adds kept in cache as the previous layers leave them
# ("weights", MeasureSettings.keep_activations), or nothing ("off": hot).
CACHE_STATES = {"on": COLD_SETTINGS, "weights": dataclasses.replace(COLD_SETTINGS, keep_activations=True),
                "off": MeasureSettings()}
TWIN_SCHEMES = 5  # the best schemes of an earlier task with the same operator and sizes, measured first
NETWORK_SAMPLER_OPTIONS = {"weights_first": 0.5, "reduction_inner": 0.5, "parallel_dims": "rows"}
NETWORK_STRATEGY = "model"
# (each strategy takes those it declares: pool is the model strategy's)
NETWORK_STRATEGY_OPTIONS = {"in_place_variants": 0.0, "pool": 1000}


def network_strategy_options(options: dict | None = None, strategy: str = NETWORK_STRATEGY) -> dict:
    """The options of search strategy `strategy` for network tasks: those of NETWORK_STRATEGY_OPTIONS it
    declares, overridden by `options`."""
    from ..strategies import STRATEGIES

    declared = STRATEGIES[strategy].all_options() if strategy in STRATEGIES else {}  # (unknown: refused later)
    return {**{k: v for k, v in NETWORK_STRATEGY_OPTIONS.items() if k in declared}, **(options or {})}


def network_sampler_options(options: dict | None = None) -> dict:
    """The ttile sampler options network tuning uses: NETWORK_SAMPLER_OPTIONS, overridden by `options`
    ({"weights_first": 0, "reduction_inner": 0} gives the paper's draw)."""
    return {**NETWORK_SAMPLER_OPTIONS, **(options or {})}

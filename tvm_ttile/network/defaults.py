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
NETWORK_STRATEGY_OPTIONS = {"in_place_variants": 0.0}


def network_strategy_options(options: dict | None = None) -> dict:
    """The search strategy's options for network tasks (any strategy): NETWORK_STRATEGY_OPTIONS, overridden by
    `options`."""
    return {**NETWORK_STRATEGY_OPTIONS, **(options or {})}


def network_sampler_options(options: dict | None = None) -> dict:
    """The ttile sampler options network tuning uses: NETWORK_SAMPLER_OPTIONS, overridden by `options`
    ({"weights_first": 0, "reduction_inner": 0} gives the paper's draw)."""
    return {**NETWORK_SAMPLER_OPTIONS, **(options or {})}

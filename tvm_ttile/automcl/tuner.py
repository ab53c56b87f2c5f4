"""AutoMCL's configuration tuner (Algorithm 2, "AutoConfig"): measure a batch, fit a regression model on
what was measured, pop the configurations it predicts fastest, repeat. `model="random"` pops at random
instead (the baseline the paper's REG is compared with).

`measure(configs) -> [seconds or None]` is any timing function, e.g. `measure_configs` below (TVM builder and
runner); the tuner itself is plain Python + XGBoost.
"""
from __future__ import annotations

import math
import random

from .space import CacheModel, cache_fit

MODELS = ("reg", "random")


def features(compute: str, config, cache: CacheModel) -> list:
    mo, mt, no, nt, kt = config
    fit = cache_fit(compute, mt, kt, nt, cache.line_words) / cache.lines
    return [math.log2(v) for v in config] + [fit, float(nt % cache.vector_words == 0), math.log2(mt * nt)]


def auto_config(compute, configs, measure, trials: int, cache: CacheModel, batch: int = 8, model: str = "reg",
                seed: int = 0) -> list:
    """Measured (config, seconds or None) in measurement order, at most `trials` of them."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose from {MODELS}")
    rng = random.Random(seed)
    pool = list(configs)
    rng.shuffle(pool)
    done = []
    nxt, pool = pool[:batch], pool[batch:]
    while nxt:
        nxt = nxt[:trials - len(done)]
        done += list(zip(nxt, measure(nxt)))
        if not pool or len(done) >= trials:
            break
        ok = [(c, s) for c, s in done if s]
        if model == "random" or len(ok) < 2:
            nxt, pool = pool[:batch], pool[batch:]
            continue
        import numpy as np
        import xgboost

        train = xgboost.DMatrix(np.array([features(compute, c, cache) for c, _ in ok]),
                                label=np.array([math.log(s) for _, s in ok]))  # log time: scale-free
        reg = xgboost.train({"max_depth": 4, "eta": 0.3, "seed": seed, "nthread": 1}, train, num_boost_round=50)
        pred = reg.predict(xgboost.DMatrix(np.array([features(compute, c, cache) for c in pool])))
        order = sorted(range(len(pool)), key=lambda i: pred[i])
        nxt = [pool[i] for i in order[:batch]]
        taken = set(order[:batch])
        pool = [c for i, c in enumerate(pool) if i not in taken]
    return done


def measure_configs(compute, M, N, K, target, settings=None, measurer=None):
    """A `measure` function for auto_config: schedule each configuration, build and time it through
    MetaSchedule's builder and runner (measure.measure_modules). `measurer`: a dict that keeps the builder
    and runner between batches (and computes, when shared): each new pair costs seconds to start."""
    from ..measure import MeasureSettings, default_builder, default_runner, measure_modules
    from .computes import schedule

    settings = settings or MeasureSettings()
    measurer = {} if measurer is None else measurer

    def measure(configs):
        if not measurer:
            measurer.update(builder=default_builder(settings), runner=default_runner(settings))
        results = measure_modules([schedule(compute, M, N, K, c) for c in configs], target, settings, **measurer)
        return [r.median for r in results]

    return measure

"""Learned choice of the compute per shape (AutoMCL section 3): a dataset of shapes measured with every
compute variant, and an XGBoost classifier from (M, K, N) to the fastest compute.

The paper's dataset: every dimension in {1, 8, 16, 64, 256, 1024, 4096} (343 shapes, 5 extremes removed)
plus 120 random shapes in 1..4096. `dataset_shapes` keeps that design with a FLOP cap, so that measuring
every compute on every shape fits one machine's time budget; it says how many it dropped.
"""
from __future__ import annotations

import itertools
import math
import random

from .space import COMPUTES

PAPER_SIZES = (1, 8, 16, 64, 256, 1024, 4096)
NAMES = list(COMPUTES)


def dataset_shapes(max_gflop: float = 0.5, extra: int = 40, seed: int = 0, min_gflop: float = 0.0) -> tuple:
    """(shapes [(M, K, N)], note): the paper's grid and random shapes, without those above `max_gflop` (and
    below `min_gflop`: tiny shapes are many, cheap to measure, and say little about the layers users tune)."""
    grid = list(itertools.product(PAPER_SIZES, repeat=3))
    rng = random.Random(seed)
    rand = [tuple(rng.randint(1, 4096) for _ in range(3)) for _ in range(extra)]
    shapes = [s for s in grid + rand if min_gflop <= 2 * math.prod(s) / 1e9 <= max_gflop and max(s) > 1]
    bounds = f"{min_gflop} to {max_gflop} GFLOP" if min_gflop else f"at most {max_gflop} GFLOP"
    note = f"{len(shapes)} of {len(grid) + len(rand)} shapes ({len(grid)} grid + {len(rand)} random), {bounds} each"
    return shapes, note


def shape_features(M: int, K: int, N: int) -> list:
    return [math.log2(M), math.log2(K), math.log2(N), math.log2(M * N), math.log2(M * K * N)]


def train_classifier(records, holdout: float = 0.25, seed: int = 0) -> dict:
    """records: [((M, K, N), {compute: best GFLOPS})]. Returns the held-out accuracy (exact) and held-out mean
    of (GFLOPS of the chosen compute / GFLOPS of the best one) of a model fitted on the rest, and "model":
    the same fit on every record (the one to use: measured shapes are too few to leave a quarter out)."""
    import numpy as np
    import xgboost

    rng = random.Random(seed)
    order = list(range(len(records)))
    rng.shuffle(order)
    n_test = max(1, int(holdout * len(records)))
    test, train = [records[i] for i in order[:n_test]], [records[i] for i in order[n_test:]]

    def xy(rows):
        x = np.array([shape_features(*shape) for shape, _ in rows])
        y = np.array([NAMES.index(max(g, key=g.get)) for _, g in rows])
        return x, y

    def fit(rows):
        x, y = xy(rows)
        return xgboost.train({"objective": "multi:softmax", "num_class": len(NAMES), "max_depth": 4, "eta": 0.3,
                              "seed": seed, "nthread": 1}, xgboost.DMatrix(x, label=y), num_boost_round=60)

    tx, ty = xy(test)
    pred = fit(train).predict(xgboost.DMatrix(tx)).astype(int)
    quality = [g[NAMES[p]] / max(g.values()) for p, (_, g) in zip(pred, test)]
    return {"model": fit(records), "accuracy": float(np.mean(pred == ty)), "relative_gflops": float(np.mean(quality)),
            "train": len(train), "test": len(test)}


def select(model, M: int, K: int, N: int) -> str:
    import numpy as np
    import xgboost

    return NAMES[int(model.predict(xgboost.DMatrix(np.array([shape_features(M, K, N)])))[0])]


CLASSIFIER_FILE = "automcl_classifier.json"  # in the CPU's cache directory: labels are this machine's timings


def save_classifier(cpu, trained: dict, note: str) -> str:
    """Keep a trained classifier for `cpu` (its cache directory, keyed by CPU, TVM and tvm_ttile versions)."""
    import json

    path = cpu.cache_dir / CLASSIFIER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    trained["model"].save_model(str(path))
    meta = {k: trained[k] for k in ("accuracy", "relative_gflops", "train", "test")}
    with open(str(path) + ".meta", "w") as f:
        json.dump(dict(meta, dataset=note), f)
    return str(path)


def load_classifier(cpu):
    """(model, description) of the classifier trained on this CPU, or (None, why not)."""
    import json

    import xgboost

    path = cpu.cache_dir / CLASSIFIER_FILE
    if not path.exists():
        return None, ("no trained classifier for this CPU (python benchmarks/automcl_selection.py trains one)")
    model = xgboost.Booster()
    model.load_model(str(path))
    with open(str(path) + ".meta") as f:
        meta = json.load(f)
    return model, (f"classifier fitted on {meta['train'] + meta['test']} shapes ({meta['dataset']}), held-out "
                   f"accuracy {100 * meta['accuracy']:.0f}% ({meta['test']} shapes left out of a fit on the rest)")

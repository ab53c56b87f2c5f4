"""Learned choice of the compute per shape (AutoMCL section 3): a dataset of shapes measured with every
compute variant, the computes worth choosing among (the paper keeps those exclusively the best on at least
5% of the shapes), and an XGBoost classifier from (M, K, N) to the fastest of them.

The paper's dataset: every dimension in {1, 8, 16, 64, 256, 1024, 4096} (343 shapes, 5 extremes removed)
plus 120 random shapes in 1..4096. `dataset_shapes` keeps that design with a FLOP cap, so that measuring
every compute on every shape fits one machine's time budget; it says how many it dropped.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import os
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


# Where dense layers live (rows = batch x tokens), a band the paper's grid ({1, 8, 16, 64, 256, 1024, 4096}^3)
# hardly samples: (low, high) per dimension, multiples of 16.
LAYER_BAND = {"M": (16, 512), "K": (256, 4096), "N": (256, 4096)}


def layer_band_shapes(n: int, max_gflop: float, seed: int = 0, exclude=()) -> list:
    """n random shapes (M, K, N) from LAYER_BAND, each at most `max_gflop`, none in `exclude` (e.g. the
    benchmark shapes, which must stay unseen)."""
    rng, out = random.Random(seed + 1), []
    while len(out) < n:
        s = tuple(16 * rng.randint(LAYER_BAND[d][0] // 16, LAYER_BAND[d][1] // 16) for d in "MKN")
        if 2 * math.prod(s) / 1e9 <= max_gflop and s not in exclude and s not in out:
            out.append(s)
    return out


def shape_features(M: int, K: int, N: int) -> list:
    return [math.log2(M), math.log2(K), math.log2(N), math.log2(M * N), math.log2(M * K * N)]


TIE = 0.02  # the paper's tolerance for "the best" (section 4)
MIN_SHARE = 0.05  # a compute is a candidate when it alone is the best on at least this share of the shapes


def candidate_computes(records, tie: float = TIE, min_share: float = MIN_SHARE) -> list:
    """The paper's "top performed" computes, the ones the classifier chooses among: those that are exclusively
    the best (no other compute within `tie` of it) on at least `min_share` of the measured shapes (else the
    one that is the best most often)."""
    alone = {c: 0 for c in NAMES}
    best = {c: 0 for c in NAMES}
    for _, g in records:
        top = max(g.values())
        near = [c for c in NAMES if g.get(c, 0.0) >= (1 - tie) * top]
        best[max(g, key=g.get)] += 1
        if len(near) == 1:
            alone[near[0]] += 1
    keep = [c for c in NAMES if alone[c] and alone[c] >= min_share * len(records)]
    return keep or [max(NAMES, key=lambda c: best[c])]


@dataclasses.dataclass
class ComputeClassifier:
    """An XGBoost classifier from (M, K, N) to one of `computes` (a single candidate needs no model)."""

    computes: list
    booster: object = None

    def pick(self, M: int, K: int, N: int) -> str:
        if self.booster is None:
            return self.computes[0]
        import numpy as np
        import xgboost

        x = xgboost.DMatrix(np.array([shape_features(M, K, N)]))
        return self.computes[int(self.booster.predict(x)[0])]


def _fit(records, computes, seed) -> ComputeClassifier:
    import numpy as np
    import xgboost

    if len(computes) == 1:
        return ComputeClassifier(list(computes))
    x = np.array([shape_features(*shape) for shape, _ in records])
    y = np.array([max(range(len(computes)), key=lambda i: g.get(computes[i], 0.0)) for _, g in records])
    # A shape weighs what a wrong pick there costs: near-ties between the candidates teach little.
    w = []
    for _, g in records:
        top = sorted((g.get(c, 0.0) for c in computes), reverse=True)
        w.append(max(1 - top[1] / top[0], 0.05) if top[0] else 0.05)
    booster = xgboost.train({"objective": "multi:softmax", "num_class": len(computes), "max_depth": 3, "eta": 0.3,
                             "seed": seed, "nthread": 1}, xgboost.DMatrix(x, label=y, weight=np.array(w)),
                            num_boost_round=40)
    return ComputeClassifier(list(computes), booster)


def train_classifier(records, holdout: float = 0.25, seed: int = 0) -> dict:
    """records: [((M, K, N), {compute: best GFLOPS})]. Held out: a random `holdout` share of the shapes, with
    candidates and classifier chosen on the rest.
    Returns the held-out exact accuracy (the pick is the fastest of all computes), "within_10": the share of
    held-out shapes where the pick is within 10% of the fastest compute (what a user loses), the mean GFLOPS
    of the pick over the fastest one's, and "model": the same fit on every record (the one to use: measured
    shapes are too few to leave a quarter out)."""
    rng = random.Random(seed)
    order = list(range(len(records)))
    rng.shuffle(order)
    n_test = max(1, int(holdout * len(records)))
    test, train = [records[i] for i in order[:n_test]], [records[i] for i in order[n_test:]]
    held_out = _fit(train, candidate_computes(train), seed)  # candidates too are chosen without the test shapes
    quality = [g.get(held_out.pick(*shape), 0.0) / max(g.values()) for shape, g in test]
    exact = [held_out.pick(*shape) == max(g, key=g.get) for shape, g in test]
    computes = candidate_computes(records)
    return {"model": _fit(records, computes, seed), "computes": computes, "accuracy": sum(exact) / len(test),
            "within_10": sum(q >= 0.9 for q in quality) / len(test), "relative_gflops": sum(quality) / len(test),
            "train": len(train), "test": len(test)}


def select(model, M: int, K: int, N: int) -> str:
    return model.pick(M, K, N)


CLASSIFIER_FILE = "automcl_classifier.json"  # in the CPU's cache directory: labels are this machine's timings


def save_classifier(cpu, trained: dict, note: str) -> str:
    """Keep a trained classifier for `cpu` (its cache directory, keyed by CPU, TVM and tvm_ttile versions)."""
    import json

    path = cpu.cache_dir / CLASSIFIER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    model = trained["model"]
    if model.booster is not None:
        model.booster.save_model(str(path))
    else:
        path.write_text("{}")
    meta = {k: trained[k] for k in ("computes", "accuracy", "within_10", "relative_gflops", "train", "test")}
    with open(str(path) + ".meta", "w") as f:
        json.dump(dict(meta, dataset=note), f)
    return str(path)


def load_classifier(cpu):
    """(ComputeClassifier, description) of the classifier trained on this CPU, or (None, why not)."""
    import json

    import xgboost

    path = cpu.cache_dir / CLASSIFIER_FILE
    meta_path = str(path) + ".meta"
    if not (path.exists() and os.path.exists(meta_path)):
        return None, ("no trained classifier for this CPU (python benchmarks/paper/automcl_selection.py trains one)")
    with open(meta_path) as f:
        meta = json.load(f)
    if "computes" not in meta:
        return None, f"the classifier in {path} predates candidate computes: train it again"
    booster = None
    if len(meta["computes"]) > 1:
        booster = xgboost.Booster()
        booster.load_model(str(path))
    return ComputeClassifier(meta["computes"], booster), (
        f"classifier among {', '.join(meta['computes'])}, fitted on {meta['train'] + meta['test']} shapes "
        f"({meta['dataset']}); held out ({meta['test']} shapes left out of a fit on the rest): exact "
        f"{100 * meta['accuracy']:.0f}%, within 10% of the best compute {100 * meta['within_10']:.0f}%")

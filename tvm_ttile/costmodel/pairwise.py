"""A pairwise ranker written with numpy (PolyDL section 4.2.2): which of two schemes of one layer is faster.

PolyDL's network reads two variants' statistics and says which wins; a tournament (every variant against
every other, ranked by wins) orders them. Here the comparison is RankNet's: P(a beats b) = sigmoid(s(a) - s(b))
with s a small network over one scheme's features (PolyDL's four hidden layers of 64, 32, 16 and 8; ReLU).
Because that comparison is antisymmetric and transitive, the tournament's win counts order schemes exactly as s
does, so ranking thousands of drawn schemes is one pass of s and a sort instead of n^2 games. Why numpy and not
XGBoost's rank:pairwise: the online refit below takes a few gradient steps from the shipped weights on each
batch, which a boosted model would do by growing trees on a handful of records; and torch stays optional.

Trained on pairs of measured schemes of the same layer (the faster one by more than `margin` wins), with Adam;
features standardized with the training set's mean and spread, kept in the model.
"""
from __future__ import annotations

import json

import numpy as np

HIDDEN = (64, 32, 16, 8)


class PairwiseRanker:
    def __init__(self, n_features: int, hidden=HIDDEN, seed: int = 0):
        rng = np.random.default_rng(seed)
        sizes = (n_features,) + tuple(hidden) + (1,)
        self.weights = [rng.normal(0, np.sqrt(2.0 / a), (a, b)) for a, b in zip(sizes[:-1], sizes[1:])]
        self.biases = [np.zeros(b) for b in sizes[1:]]
        self.mean = np.zeros(n_features)
        self.scale = np.ones(n_features)
        self.seed = seed

    # --- scoring ------------------------------------------------------------------------------------
    def _forward(self, x):
        acts = [(x - self.mean) / self.scale]
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            z = acts[-1] @ w + b
            acts.append(np.maximum(z, 0) if i < len(self.weights) - 1 else z)
        return acts

    def score(self, x) -> np.ndarray:
        """Higher is faster."""
        return self._forward(np.asarray(x, float))[-1][:, 0]

    def prefers(self, a, b) -> np.ndarray:
        """P(a beats b) per row: the pairwise comparison the tournament plays."""
        return 1 / (1 + np.exp(-(self.score(a) - self.score(b))))

    # --- training -----------------------------------------------------------------------------------
    def fit(self, groups, epochs: int = 200, lr: float = 1e-3, margin: float = 0.02, pairs_per_group: int = 2000,
            standardize: bool = True, seed: int | None = None) -> list:
        """groups: [(features [n, f], seconds [n])] one per layer. Returns the loss per epoch."""
        rng = np.random.default_rng(self.seed if seed is None else seed)
        groups = [(np.asarray(x, float), np.asarray(t, float)) for x, t in groups if len(t) >= 2]
        if not groups:
            return []
        if standardize:
            allx = np.concatenate([x for x, _ in groups])
            self.mean, self.scale = allx.mean(0), allx.std(0) + 1e-6
        adam = [(np.zeros_like(p), np.zeros_like(p)) for p in self.weights + self.biases]
        losses, step = [], 0
        for _ in range(epochs):
            xa, xb = [], []
            for x, t in groups:
                i = rng.integers(0, len(t), pairs_per_group)
                j = rng.integers(0, len(t), pairs_per_group)
                keep = t[i] * (1 + margin) < t[j]  # i clearly faster than j
                xa.append(x[i[keep]])
                xb.append(x[j[keep]])
            xa, xb = np.concatenate(xa), np.concatenate(xb)
            if not len(xa):
                break
            step += 1
            loss, grads = self._pair_gradients(xa, xb)
            losses.append(loss)
            params = self.weights + self.biases
            for k, (p, g) in enumerate(zip(params, grads)):
                m, v = adam[k]
                m[:] = 0.9 * m + 0.1 * g
                v[:] = 0.999 * v + 0.001 * g * g
                p -= lr * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
        return losses

    def _pair_gradients(self, xa, xb):
        """RankNet loss log(1 + exp(-(s(a) - s(b)))) with a the winner, and its gradients."""
        fa, fb = self._forward(xa), self._forward(xb)
        diff = fa[-1][:, 0] - fb[-1][:, 0]
        loss = float(np.mean(np.logaddexp(0, -diff)))
        d = -1 / (1 + np.exp(diff)) / len(diff)  # dLoss/dDiff
        gw = [np.zeros_like(w) for w in self.weights]
        gb = [np.zeros_like(b) for b in self.biases]
        for acts, sign in ((fa, 1.0), (fb, -1.0)):
            delta = (sign * d)[:, None]
            for i in range(len(self.weights) - 1, -1, -1):
                gw[i] += acts[i].T @ delta
                gb[i] += delta.sum(0)
                if i:
                    delta = (delta @ self.weights[i].T) * (acts[i] > 0)
        return loss, gw + gb

    # --- storage ------------------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {"hidden": [w.shape[1] for w in self.weights[:-1]], "mean": self.mean.tolist(),
                "scale": self.scale.tolist(), "weights": [w.tolist() for w in self.weights],
                "biases": [b.tolist() for b in self.biases], "seed": self.seed}

    @classmethod
    def from_json(cls, d: dict) -> "PairwiseRanker":
        model = cls(len(d["mean"]), tuple(d["hidden"]), d.get("seed", 0))
        model.mean, model.scale = np.array(d["mean"]), np.array(d["scale"])
        model.weights = [np.array(w) for w in d["weights"]]
        model.biases = [np.array(b) for b in d["biases"]]
        return model

    def copy(self) -> "PairwiseRanker":
        return PairwiseRanker.from_json(json.loads(json.dumps(self.to_json())))

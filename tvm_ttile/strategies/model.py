"""Ranking before measuring (PolyDL's idea on the structured space): draw a large pool (drawing is cheap plain
Python), order it with a ranker (costmodel.rankers), measure from the top. With an online ranker the rest of the
pool is ranked again after each measured batch. A share `explore` of each batch comes from lower in the ranking,
so a wrong model still sees other parts of the pool."""
from __future__ import annotations

import random

from ..costmodel.rankers import RANKERS
from ..errors import TTileError
from .base import Strategy

# Ranked pools by everything they depend on: a task searched again (a budget's next round, a zero-trial pick
# of a twin) takes its ranking without drawing and ranking the pool again (seconds per task).
_RANKED: dict = {}
_RANKED_KEPT = 256


def ranker_options() -> dict:
    """Every ranker's options, declared once by the ranker (costmodel.rankers) and taken here as the strategy's
    own, so a default is written in one place."""
    out = {}
    for ranker in RANKERS.values():
        for name, declared in ranker.OPTIONS.items():
            out.setdefault(name, declared)
    return out


class ModelStrategy(Strategy):
    NAME = "model"
    RANKS = True  # needs the CPU's cost context
    OPTIONS = {"pool": (2000, "schemes drawn and ranked per task"),
               "ranker": ("committee", "polydl (PolyDL's Eq. 1), time (predicted seconds), learned (pairwise "
                          "network) or committee (time and learned together)"),
               "explore": (0.1, "share of each batch drawn uniformly from the rest of the pool"),
               **ranker_options()}  # each passed on to the chosen ranker if it declares it

    def __init__(self, **options):
        super().__init__(**options)
        if self.options["ranker"] not in RANKERS:
            raise TTileError(f"unknown ranker {self.options['ranker']!r}; choose from {', '.join(RANKERS)}")
        if not 0 <= self.options["explore"] <= 1:
            raise TTileError(f"strategy 'model' option 'explore' is a share in [0, 1], got {self.options['explore']}")
        if self.options["pool"] < 1:
            raise TTileError(f"strategy 'model' option 'pool' needs at least 1 scheme, got {self.options['pool']}")

    def start(self, space, sampler, budget, skip=(), first=(), context=None):
        from ..costmodel.rankers import make_ranker

        if context is None:
            raise TTileError("the model strategy needs the CPU's cost context (costmodel.CostContext)")
        takes = RANKERS[self.options["ranker"]].OPTIONS  # the strategy's options that this ranker declares
        self.ranker = make_ranker(self.options["ranker"], context,
                                  **{k: v for k, v in self.options.items() if k in takes})
        self.problem = space.problem
        self.rng = random.Random(sampler.seed)
        skip = set(skip)
        first = [s for s in dict.fromkeys(first, None) if s.text not in skip]
        seen = skip | {s.text for s in first}
        size = max(self.options["pool"], budget)
        key = (space.problem, tuple(space.choices), space.threads, type(sampler).__name__, sampler.seed,
               tuple(sorted(sampler.options.items())), size, self.options["ranker"],
               tuple(sorted((k, v) for k, v in self.options.items() if k in takes)), context)
        if key not in _RANKED:
            if len(_RANKED) >= _RANKED_KEPT:
                _RANKED.pop(next(iter(_RANKED)))
            _RANKED[key] = self.ranker.rank(self.problem, sampler.sample_many(space, size))
        pool = [s for s in _RANKED[key] if s.text not in seen]
        self.first, self.pool, self.budget = first, pool, budget

    def ask(self, n):
        want = min(n, self.budget)
        batch, self.first = self.first[:want], self.first[want:]
        m = want - len(batch)
        explore = int(m * self.options["explore"]) if len(self.pool) > m else 0
        take, rest = self.pool[:m - explore], self.pool[m - explore:]
        batch += take + self.rng.sample(rest, min(explore, len(rest)))
        chosen = {s.text for s in batch}
        self.pool = [s for s in self.pool if s.text not in chosen]
        self.budget -= len(batch)
        return batch

    def tell(self, schemes, seconds):
        self.ranker.observe(self.problem, schemes, seconds)
        if self.ranker.LEARNS and self.options["online"] and self.pool:
            self.pool = self.ranker.rank(self.problem, self.pool)

    def top(self, n: int = 1) -> list:
        """The n best-ranked schemes not measured yet (the zero-trial pick is top(1))."""
        return (self.first + self.pool)[:n]

"""G-BFS (the seed paper's Algorithm 1): a priority queue of measured states ordered by their seconds; pop the
best, measure rho of its unvisited neighbours drawn at random, push each with its time. When the queue runs dry
before the budget, a random unvisited state restarts it (the paper stops; reported in the notes).

`GBFS` is the search (plain Python over any neighbours.Landscape); `GBFSStrategy` runs it over tvm_ttile's
structured space as the strategy "gbfs" (tvm-ttile tune --strategy gbfs; the compare system tvm_ttile-gbfs).
"""
from __future__ import annotations

import heapq
import math

from .base import Strategy
from .neighbours import NeighbourhoodSearch, SchemeLandscape


class GBFS(NeighbourhoodSearch):
    NAME = "gbfs"
    OPTIONS = {"rho": (5, "neighbours measured per popped state (the paper's rho)"),
               "starts": (1, "states measured before the first pop: the first one (option start), then random ones"),
               **NeighbourhoodSearch.START}

    def __init__(self, landscape, seed=0, **options):
        super().__init__(landscape, seed, **options)
        self.queue: list = []  # (seconds, order, key, state)
        self.order = 0
        self.deferred: list = []  # drawn neighbours that did not fit the last batch
        self.started = False

    def heard(self, state, seconds):
        if math.isfinite(seconds):
            self.order += 1
            heapq.heappush(self.queue, (seconds, self.order, self.land.key(state), state))

    def _starts(self):
        out = [self.first_state()]
        for _ in range(self.options["starts"] - 1):
            s = self.land.random_state(self.rng)
            if s is not None:
                out.append(s)
        return out

    def ask(self, n):
        batch = []
        if not self.started:
            self.started = True
            self.deferred = [s for s in self._starts() if s is not None] + self.deferred
        while len(batch) < n:
            while self.deferred and len(batch) < n:
                s = self.deferred.pop(0)
                if self.fresh(s):
                    self._ask(s, batch)
            if len(batch) >= n:
                break
            if not self.queue:
                if batch or self.pending:
                    break  # wait for this batch's times before going on
                s = self.restart()
                if s is None:
                    break
                self._ask(s, batch)
                continue
            _, _, _, s = heapq.heappop(self.queue)
            g = [x for x in self.land.neighbours(s) if self.fresh(x)]
            self.deferred += self.rng.sample(g, min(self.options["rho"], len(g)))
        return batch


class SchemeSearchStrategy(Strategy):
    """A neighbourhood search (`SEARCH`) run over the structured space: the sampler draws the start and the
    restarts, the search walks from there; the task's earlier measurements (plan's `skip`, with their seconds)
    resume it."""
    SEARCH = GBFS

    def __init__(self, **options):
        super().__init__(**options)
        self.search = None

    def start(self, space, sampler, budget, skip=(), first=(), context=None):
        from ..scheme import Scheme
        from ..space import WHOLE_REUSE

        def draw():
            return sampler.sample(space)

        land = SchemeLandscape(space.problem, draw, WHOLE_REUSE[space.problem.op])
        self.search = self.SEARCH(land, sampler.seed, **self.own_options)
        measured = skip if isinstance(skip, dict) else dict.fromkeys(skip)
        self.search.resume([(Scheme.parse(t), c) for t, c in measured.items()])
        self.first = [s for s in dict.fromkeys(first, None) if self.search.fresh(s)]
        self.budget = budget

    def ask(self, n):
        n = min(n, self.budget)
        batch = self.first[:n]
        self.first = self.first[n:]
        for s in batch:
            self.search.pending[s.text] = s
        batch += self.search.ask(n - len(batch)) if n > len(batch) else []
        self.budget -= len(batch)
        return batch

    def tell(self, schemes, seconds):
        self.search.tell(schemes, seconds)

    @property
    def notes(self):
        return self.search.notes if self.search else []


class GBFSStrategy(SchemeSearchStrategy):
    NAME = "gbfs"
    SEARCH = GBFS
    OPTIONS = {**GBFS.OPTIONS, "starts": (8, "schemes drawn by the sampler and measured before the first pop "
                                                "(several microkernels to start from; the paper starts from one)")}

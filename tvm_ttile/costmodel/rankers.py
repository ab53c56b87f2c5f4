"""Rankers: order drawn schemes before measuring them. One small class each, options declared as data.

    polydl    PolyDL's Eq. 1: working sets per cache level x latency / bandwidth (section 4.2.1)
    time      predicted seconds: the microkernel's measured rate + the data moved between levels, slowed where
              a microkernel's input pixels crowd L1 sets
    learned   the pairwise network (pairwise.py) trained on measured records, shipped in tvm_ttile/data;
              with online=True it refits on the layer's own measurements as they arrive (as MetaSchedule's
              cost model does)
    committee time and learned together: first the time ranker's pick (or the learned one's, or the lowest sum
              of their two ranks), then each member's next best in turn

`costs(problem, schemes)`: lower is better. `observe(problem, schemes, seconds)`: measurements of this layer.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import TTileError
from .analytic import FEATURES, CostContext, features, l1_conflict_slowdown, polydl_cost, predicted_seconds
from .pairwise import PairwiseRanker

MODEL_PATH = Path(__file__).resolve().parent.parent / "data" / "ranker_pairwise.json"


# What per_scheme computed, by function, problem, scheme and cost context (all hashable, all it depends on).
_COMPUTED: dict = {}
_COMPUTED_KEPT = 500_000


class Ranker:
    NAME = "base"
    OPTIONS: dict = {}
    LEARNS = False  # refits on the layer's measurements (takes the options model and online)

    def __init__(self, ctx: CostContext, **options):
        from ..options import resolve as resolve_options

        self.ctx = ctx
        self.options = resolve_options(self.OPTIONS, options, f"ranker {self.NAME!r}")

    def per_scheme(self, problem, scheme, compute):
        """compute(problem, scheme, ctx) of one scheme, once per process: a pool is ranked again after every
        measured batch, and by the next round's ranker of a network's task."""
        key = (compute, problem, scheme.text, self.ctx)
        if key not in _COMPUTED:
            if len(_COMPUTED) >= _COMPUTED_KEPT:
                _COMPUTED.clear()
            _COMPUTED[key] = compute(problem, scheme, self.ctx)
        return _COMPUTED[key]

    def costs(self, problem, schemes) -> list:
        raise NotImplementedError

    def observe(self, problem, schemes, seconds) -> None:
        """Measured seconds of some schemes of `problem` (None: failed). Analytic rankers learn nothing."""

    def rank(self, problem, schemes) -> list:
        """`schemes` best first (ties keep the drawn order, so a seed gives one order)."""
        costs = self.costs(problem, schemes)
        return [s for _, _, s in sorted(zip(costs, range(len(schemes)), schemes), key=lambda t: (t[0], t[1]))]


class PolyDLRanker(Ranker):
    NAME = "polydl"

    def costs(self, problem, schemes):
        return [self.per_scheme(problem, s, polydl_cost) for s in schemes]


class TimeRanker(Ranker):
    NAME = "time"
    OPTIONS = {"l1_conflicts": (True, "slow the microkernels whose input pixels crowd L1 sets "
                                "(analytic.l1_conflict_slowdown)")}

    def costs(self, problem, schemes):
        seconds = [self.per_scheme(problem, s, predicted_seconds) for s in schemes]
        if not self.options["l1_conflicts"]:
            return seconds
        return [t * self.per_scheme(problem, s, l1_conflict_slowdown) for t, s in zip(seconds, schemes)]


class LearnedRanker(Ranker):
    NAME = "learned"
    LEARNS = True
    OPTIONS = {"model": ("", "a model file written by benchmarks/paper/train_ranker.py (default: the shipped one)"),
               "online": (True, "refit on the layer's own measurements after each batch"),
               "refit_epochs": (60, "gradient steps of each online refit")}

    def __init__(self, ctx, **options):
        super().__init__(ctx, **options)
        path = Path(self.options["model"] or MODEL_PATH)
        from ..cache import read_json

        data = read_json(path)
        if not isinstance(data, dict) or data.get("features") != list(FEATURES):
            raise TTileError(f"ranker model {path} is missing, damaged or made for other features; train one with "
                             "benchmarks/paper/train_ranker.py, or rank with --strategy-option ranker=time")
        self.prior = PairwiseRanker.from_json(data["model"])
        self.model = self.prior
        self.seen: dict = {}  # scheme text -> (features, seconds) of this layer

    def costs(self, problem, schemes):
        x = np.array([self.per_scheme(problem, s, features) for s in schemes])
        return list(-self.model.score(x)) if len(x) else []

    def observe(self, problem, schemes, seconds):
        if not self.options["online"]:
            return
        for s, t in zip(schemes, seconds):
            if t is not None:
                self.seen[s.text] = (self.per_scheme(problem, s, features), t)
        if len(self.seen) < 4:
            return
        x = np.array([f for f, _ in self.seen.values()])
        t = np.array([t for _, t in self.seen.values()])
        model = self.prior.copy()  # from the prior each time: the layer's records pull it, never drift it
        model.fit([(x, t)], epochs=self.options["refit_epochs"], pairs_per_group=500, standardize=False,
                  seed=len(self.seen))
        self.model = model


class CommitteeRanker(Ranker):
    """Neither member ranks best everywhere: the learned ranker's top pick was the better on a Zen 4, the
    predicted time's on a Xeon, and a ranker trained on some networks misjudges schemes unlike theirs. Taking
    each one's best in turn puts both members' favourites among the first few measured: on the Xeon's held-out
    layers the first 8 held 0.969x the best of 200 (either alone 0.958-0.962x) and 50 trials came 1.044x random
    draws (benchmarks/results/ranking_xeon/NOTES.md). `first` says which scheme leads, the one a zero-trial build
    takes: the time ranker's top pick (the default), the learned one's, or the lowest sum of the two members' ranks
    (Borda's count). Timed on the Xeon's 23 paper layers, the time ranker's pick held 0.951x the best of 200
    random schemes and the Borda winner 0.874x: a scheme both members rate fairly well can be one neither rates
    best, and the learned ranker misjudges layers unlike its training networks' (a 3-channel 544x544 layer:
    0.37x)."""
    NAME = "committee"
    LEARNS = True
    FIRST = ("borda", "time", "learned")
    OPTIONS = {**LearnedRanker.OPTIONS, **TimeRanker.OPTIONS,  # each member takes its own
               "first": ("time", "the scheme ranked first, a zero-trial build's pick: time or learned (that member's top "
                                 "pick) or borda (the lowest sum of the members' ranks)")}

    def __init__(self, ctx, **options):
        super().__init__(ctx, **options)
        if self.options["first"] not in self.FIRST:
            raise TTileError(f"committee option first={self.options['first']!r}; choose {', '.join(self.FIRST)}")
        self.members = tuple(m(ctx, **{k: v for k, v in self.options.items() if k in m.OPTIONS})
                             for m in (LearnedRanker, TimeRanker))

    def costs(self, problem, schemes):
        """Each scheme's position in the committee's order."""
        if not schemes:
            return []
        orders = [np.argsort(m.costs(problem, schemes), kind="stable") for m in self.members]
        first = self.options["first"]
        if first == "borda":
            ranks = sum(np.argsort(o, kind="stable") for o in orders)  # a scheme's rank summed over the members
            order = [int(np.argmin(ranks))]  # the first of the lowest sums, in drawn order
        else:
            order = []
            if first == "time":  # the members take turns from the time ranker's pick on
                orders = orders[::-1]
        seen = set(order)
        for i in (int(i) for pair in zip(*orders) for i in pair):
            if i not in seen:
                seen.add(i)
                order.append(i)
        position = np.empty(len(schemes), dtype=int)
        position[order] = np.arange(len(schemes))
        return list(position)

    def observe(self, problem, schemes, seconds):
        for m in self.members:
            m.observe(problem, schemes, seconds)


RANKERS = {r.NAME: r for r in (PolyDLRanker, TimeRanker, LearnedRanker, CommitteeRanker)}


def make_ranker(name: str, ctx: CostContext, **options) -> Ranker:
    if name not in RANKERS:
        raise TTileError(f"unknown ranker {name!r}; choose from {', '.join(RANKERS)}")
    return RANKERS[name](ctx, **options)


"""The search-strategy interface: which drawn schemes are measured, in which order.

A strategy is planned once per task with the task's space and a sampler (`plan`), then hands out batches
(`next_batch`) and hears their measured seconds (`observe`). Options are declared as data (`OPTIONS`). Plain
Python: lowering, building and timing stay in the MetaSchedule adapter (metaschedule/search.py).

A strategy implements `start`, `ask` and `tell`; the base class keeps the last share of the budget
(`in_place_variants`, every strategy's option) for the fastest measured schemes read in place, where a conv2d's
input is padded: which border and whether to pad by a pass depend on the scheme, so they are measured, not drawn.
"""
from __future__ import annotations

from ..options import check_share, resolve as resolve_options
from ..scheme import Scheme

IN_PLACE_OPTION = {"in_place_variants": (0.2, "share of the budget measured last, where a conv2d's input is padded: "
                                              "the fastest measured schemes again with the input read in place "
                                              "(InPlace, each border), fastest first (0: none)")}


class InPlaceVariants:
    """The last phase of every strategy: the fastest schemes measured so far (a resumed run's too), each again with
    the input read in place on each border. A scheme whose pass is slow can be fast in place, but the pass decides
    which are tried: the phase costs its share of the budget, not a doubled space."""

    def __init__(self, borders, left: int, skip=()):
        self.borders, self.left = tuple(borders), left if borders else 0
        self.measured = {t: s for t, s in (skip.items() if isinstance(skip, dict) else ()) if s is not None}
        self.issued = set(skip)
        self.own: set = set()  # the texts this phase handed out

    def ask(self, n: int) -> list:
        batch, want = [], min(n, self.left)
        for text, _ in sorted(self.measured.items(), key=lambda kv: kv[1]):
            if len(batch) == want:
                break
            scheme = Scheme.parse(text)
            variants = [] if scheme.in_place else [scheme.with_in_place(b) for b in self.borders]
            batch += [v for v in variants if v.text not in self.issued][:want - len(batch)]
            self.issued |= {v.text for v in batch}
        self.own |= {v.text for v in batch}
        self.left = self.left - len(batch) if batch else 0  # nothing left to vary: the phase ends
        return batch

    def heard(self, schemes, seconds) -> None:
        for scheme, sec in zip(schemes, seconds):
            self.issued.add(scheme.text)
            if sec is not None:
                self.measured[scheme.text] = sec


class Strategy:
    NAME = "base"
    OPTIONS: dict = {}  # option name -> (default, help); IN_PLACE_OPTION is added to every strategy's
    RANKS = False  # whether plan() needs the CPU's cost context (measured hierarchy, catalog rates)

    @classmethod
    def all_options(cls) -> dict:
        return {**cls.OPTIONS, **IN_PLACE_OPTION}

    def __init__(self, **options):
        self.options = resolve_options(self.all_options(), options, f"strategy {self.NAME!r}")
        check_share(self.options, "in_place_variants", f"strategy {self.NAME!r}")
        self.queue: list = []
        self.variants = InPlaceVariants((), 0)

    @property
    def own_options(self) -> dict:
        """The options this strategy declares itself (without the base class's)."""
        return {k: v for k, v in self.options.items() if k in self.OPTIONS}

    def plan(self, space, sampler, budget: int, skip=(), first=(), context=None) -> None:
        """Prepare `budget` schemes to measure for `space`: `first` ones before any other, none in `skip`
        (measured already; a dict maps them to their seconds). `context`: the CPU's costmodel.CostContext, for
        strategies that rank."""
        borders = space.problem.in_place_borders
        self.variants = InPlaceVariants(borders, round(self.options["in_place_variants"] * budget), skip)
        self.start(space, sampler, budget - self.variants.left, skip=skip, first=first, context=context)

    def next_batch(self, n: int) -> list:
        batch = self.ask(n)
        self.variants.issued |= {s.text for s in batch}
        return batch or self.variants.ask(n)

    def observe(self, schemes, seconds) -> None:
        """Measured seconds of a batch (None: failed to build or run)."""
        self.variants.heard(schemes, seconds)
        mine = [i for i, s in enumerate(schemes) if s.text not in self.variants.own]  # a walk hears its own only
        if mine:
            self.tell([schemes[i] for i in mine], [seconds[i] for i in mine])

    # What each strategy implements.
    def start(self, space, sampler, budget: int, skip=(), first=(), context=None) -> None:
        raise NotImplementedError

    def ask(self, n: int) -> list:
        batch, self.queue = self.queue[:n], self.queue[n:]
        return batch

    def tell(self, schemes, seconds) -> None:
        pass

"""The search-strategy interface: which drawn schemes are measured, in which order.

A strategy is planned once per task with the task's space and a sampler (`plan`), then hands out batches
(`next_batch`) and hears their measured seconds (`observe`). Options are declared as data (`OPTIONS`). Plain
Python: lowering, building and timing stay in the MetaSchedule adapter (metaschedule/search.py).
"""
from __future__ import annotations

from ..errors import TTileError
from ..samplers.base import as_type_of


class Strategy:
    NAME = "base"
    OPTIONS: dict = {}  # option name -> (default, help)
    RANKS = False  # whether plan() needs the CPU's cost context (measured hierarchy, catalog rates)

    def __init__(self, **options):
        unknown = set(options) - set(self.OPTIONS)
        if unknown:
            raise TTileError(f"strategy {self.NAME!r} has no option(s) {sorted(unknown)}; it has "
                             f"{sorted(self.OPTIONS) or 'none'}")
        self.options = {k: as_type_of(default, options.get(k, default), k, f"strategy {self.NAME!r}")
                        for k, (default, _) in self.OPTIONS.items()}
        self.queue: list = []

    def plan(self, space, sampler, budget: int, skip=(), first=(), context=None) -> None:
        """Prepare `budget` schemes to measure for `space`: `first` ones before any other, none in `skip`
        (measured already). `context`: the CPU's costmodel.CostContext, for strategies that rank."""
        raise NotImplementedError

    def next_batch(self, n: int) -> list:
        batch, self.queue = self.queue[:n], self.queue[n:]
        return batch

    def observe(self, schemes, seconds) -> None:
        """Measured seconds of a batch (None: failed to build or run)."""


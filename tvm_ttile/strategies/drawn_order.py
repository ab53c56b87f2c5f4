"""The paper's search: schemes drawn by the sampler, measured in the order drawn (section 6.1)."""
from .base import Strategy


class RandomStrategy(Strategy):
    NAME = "random"

    def start(self, space, sampler, budget, skip=(), first=(), context=None):
        skip = set(skip)
        first = [s for s in dict.fromkeys(first, None) if s.text not in skip]
        drawn = sampler.sample_many(space, budget + len(skip) + len(first))
        seen = skip | {s.text for s in first}
        self.queue = (first + [s for s in drawn if s.text not in seen])[:budget]

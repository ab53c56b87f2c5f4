"""The paper's search: schemes drawn by the sampler, measured in the order drawn (section 6.1); then, where a
conv2d's input is padded, the fastest of them measured again with the input read in place (InPlace)."""
from ..scheme import Scheme
from .base import Strategy


class RandomStrategy(Strategy):
    NAME = "random"
    OPTIONS = {"in_place_variants": (0.2, "share of the budget measured last, where a conv2d's input is padded: the "
                                          "fastest measured schemes again with the input read in place (InPlace, "
                                          "each border), fastest first (0: none)")}

    def plan(self, space, sampler, budget, skip=(), first=(), context=None):
        borders = space.problem.in_place_borders
        self.variants = round(self.options["in_place_variants"] * budget) if borders else 0
        self.borders = borders
        # Measured seconds by scheme text (a resumed run's too: `skip` maps them when it is a dict).
        self.measured = {t: s for t, s in (skip.items() if isinstance(skip, dict) else ()) if s is not None}
        self.issued = set(skip)
        skip = set(skip)
        first = [s for s in dict.fromkeys(first, None) if s.text not in skip]
        drawn = sampler.sample_many(space, budget + len(skip) + len(first))
        seen = skip | {s.text for s in first}
        self.queue = (first + [s for s in drawn if s.text not in seen])[:budget - self.variants]
        self.issued |= {s.text for s in self.queue}

    def next_batch(self, n):
        if self.queue or not self.variants:
            return super().next_batch(n)
        # The drawn schemes are measured (a batch is observed before the next is asked for): their fastest, read
        # in place. A scheme whose pass is slow can be fast in place, but the pass decides which are tried.
        batch, want = [], min(n, self.variants)
        for text, _ in sorted(self.measured.items(), key=lambda kv: kv[1]):
            scheme = Scheme.parse(text)
            variants = [] if scheme.in_place else [scheme.with_in_place(b) for b in self.borders]
            batch += [v for v in variants if v.text not in self.issued][:want - len(batch)]
            self.issued |= {v.text for v in batch}
            if len(batch) == want:
                break
        self.variants -= len(batch)
        if not batch:
            self.variants = 0
        return batch

    def observe(self, schemes, seconds):
        for scheme, sec in zip(schemes, seconds):
            if sec is not None:
                self.measured[scheme.text] = sec

"""Samplers of the paper's ablations.

- single / combined (section 6.2): the 6.1 sampler restricted to single microkernels or to combinations.
- levels (section 6.3, divisible space): per dimension a number of tiling levels in 1..`max_levels`, then
  one uniformly drawn ordered decomposition of what is left into that many factors (> 1 where possible),
  and a uniformly random order of all levels.
- nondivisible (section 6.3, non-divisible space): the same, except that along the output dimensions
  (h, w, k / i, j) the levels are tile sizes drawn uniformly between twice the microkernel and the problem
  size, in whole microkernels, sorted (P specifiers: the last tile of each loop is partial). Single
  microkernels only, so compare it with levels(singles_only=True).
"""

from ..errors import TTileError
from ..scheme import LAMBDA
from ..space import PARALLEL, divisors, remaining
from .base import Sampler
from .ttile import TTileSampler


class SingleSampler(TTileSampler):
    NAME = "single"

    def choices(self, space):
        return space.singles


class CombinedSampler(TTileSampler):
    NAME = "combined"

    def choices(self, space):
        return space.combos


def ordered_factorizations(n: int, parts: int) -> list:
    """All tuples of `parts` factors (each > 1 when n allows) whose product is n, order significant."""
    if parts == 1:
        return [(n,)] if n > 1 else []
    out = []
    for f in divisors(n):
        if f > 1:
            out += [(f,) + rest for rest in ordered_factorizations(n // f, parts - 1)]
    return out


class LevelsSampler(Sampler):
    NAME = "levels"
    OPTIONS = {"max_levels": (4, "tiling levels per dimension: the memory hierarchy above registers"),
               "singles_only": (False, "draw single microkernels only (the non-divisible space has no Lambda)")}

    def choices(self, space):
        return space.singles if self.options["singles_only"] else space.choices

    def draw(self, space):
        choice = self.draw_choice(space)
        reuse = self.draw_reuse(space, choice)
        parallel = self.draw_parallel(space, choice, reuse)
        left = remaining(space.problem, choice, reuse, parallel)
        levels = []
        for d in sorted(left):
            if left[d] == 1:
                continue
            n_levels = self.rng.randint(1, self.options["max_levels"])
            while n_levels > 1 and not ordered_factorizations(left[d], n_levels):
                n_levels -= 1
            levels += [(d, f) for f in self.rng.choice(ordered_factorizations(left[d], n_levels))]
        self.rng.shuffle(levels)
        if choice.combined:  # the Lambda goes anywhere above the outer levels of its dimension
            outer = [i for i, (d, _) in enumerate(levels) if d == choice.dim]
            pos = self.rng.randint(max(outer) + 1 if outer else 0, len(levels))
            levels.insert(pos, (choice.dim, LAMBDA))
        return self.build(space, choice, reuse, levels, parallel)


class NonDivisibleSampler(LevelsSampler):
    NAME = "nondivisible"
    OPTIONS = {"max_levels": (4, "tiling levels per dimension: the memory hierarchy above registers")}

    def choices(self, space):
        return space.singles

    def draw(self, space):
        choice = self.draw_choice(space)
        reuse = self.draw_reuse(space, choice)
        parallel = self.draw_parallel(space, choice, reuse)
        left = remaining(space.problem, choice, reuse, parallel)
        partial = [d for d in PARALLEL[space.problem.op] if d != "n"]  # the output's dimensions but the batch
        levels = []  # (dim, T factor) or (dim, ("P", tile elements))
        for d in sorted(left):
            if left[d] == 1:
                continue
            n_levels = self.rng.randint(1, self.options["max_levels"])
            if d in partial:
                unit = choice.covers(d)
                sizes = sorted({self.rng.randint(2, left[d]) for _ in range(n_levels)}, reverse=True) if left[d] >= 2 else []
                levels += [(d, ("P", n * unit)) for n in sizes]
            else:
                while n_levels > 1 and not ordered_factorizations(left[d], n_levels):
                    n_levels -= 1
                levels += [(d, f) for f in self.rng.choice(ordered_factorizations(left[d], n_levels))]
        self.rng.shuffle(levels)
        # keep each dimension's P sizes decreasing from the outside in
        for d in partial:
            idx = [i for i, (dd, f) in enumerate(levels) if dd == d]
            ordered = sorted((levels[i][1] for i in idx), key=lambda f: -f[1])
            for i, f in zip(idx, ordered):
                levels[i] = (d, f)
        return self.build(space, choice, reuse, levels, parallel)


SAMPLERS = {cls.NAME: cls for cls in (TTileSampler, SingleSampler, CombinedSampler, LevelsSampler,
                                      NonDivisibleSampler)}


def make_sampler(name: str, seed=0, **options) -> Sampler:
    if name not in SAMPLERS:
        raise TTileError(f"unknown sampler {name!r}; choose one of {sorted(SAMPLERS)}")
    return SAMPLERS[name](seed=seed, **options)

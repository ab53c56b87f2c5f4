"""The paper's random sampler (section 6.1): microkernel or combination uniformly, a divisor of the reuse
dimension for the reuse loop, then (dimension, factor) pairs uniformly until the problem is covered."""
from .base import Sampler


class TTileSampler(Sampler):
    NAME = "ttile"
    OPTIONS = {"min_reuse": (1, "fewest reduction steps per microkernel call (1: the paper's uniform draw)")}

    def sample(self, space):
        choice = self.draw_choice(space)
        reuse = self.draw_reuse(space, choice)
        return self.build(space, choice, reuse, self.large_factor_levels(space, choice, reuse))

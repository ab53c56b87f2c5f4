"""The paper's random sampler (section 6.1): microkernel or combination uniformly, a divisor of the reuse
dimension for the reuse loop, then (dimension, factor) pairs uniformly until the problem is covered."""
from ..errors import TTileError
from .base import Sampler


class TTileSampler(Sampler):
    NAME = "ttile"
    OPTIONS = {"min_reuse": (1, "fewest reduction steps per microkernel call (1: the paper's uniform draw)"),
               "weights_first": (0.0, "share of draws with the weight dimension's tiles outermost, then the "
                                      "reduction's, then the pixels' (0: the paper's uniform order)")}

    def __init__(self, seed=0, **options):
        super().__init__(seed, **options)
        if not 0 <= self.options["weights_first"] <= 1:
            raise TTileError(f"sampler 'ttile' option 'weights_first' is a share in [0, 1], got "
                             f"{self.options['weights_first']}")

    def sample(self, space):
        choice = self.draw_choice(space)
        reuse = self.draw_reuse(space, choice)
        levels = self.weights_first(space, self.large_factor_levels(space, choice, reuse))
        return self.build(space, choice, reuse, levels)

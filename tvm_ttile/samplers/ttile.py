"""The paper's random sampler (section 6.1): microkernel or combination uniformly, a divisor of the reuse
dimension for the reuse loop, then (dimension, factor) pairs uniformly until the problem is covered."""
from ..errors import TTileError
from .base import Sampler


class TTileSampler(Sampler):
    NAME = "ttile"
    OPTIONS = {"min_reuse": (1, "fewest reduction steps per microkernel call (1: the paper's uniform draw)"),
               "weights_first": (0.0, "share of draws with the weight dimension's tiles outermost, then the "
                                      "reduction's, then the pixels' (0: the paper's uniform order)"),
               "reduction_inner": (0.0, "share of draws with the reduction's tiles innermost, right above the "
                                        "microkernel, so each output tile is finished before the next "
                                        "(0: the paper's uniform order)")}

    def __init__(self, seed=0, **options):
        super().__init__(seed, **options)
        for name in ("weights_first", "reduction_inner"):
            if not 0 <= self.options[name] <= 1:
                raise TTileError(f"sampler 'ttile' option {name!r} is a share in [0, 1], got {self.options[name]}")

    def draw(self, space):
        choice = self.draw_choice(space)
        reuse = self.draw_reuse(space, choice)
        parallel = self.draw_parallel(space, choice, reuse)
        levels = self.large_factor_levels(space, choice, reuse, parallel)
        levels = self.reduction_inner(space, self.weights_first(space, levels))
        return self.build(space, choice, reuse, levels, parallel)

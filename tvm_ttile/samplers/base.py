"""The sampler interface: draw schemes from a Space, reproducibly from a seed.

A sampler is a small class with its options declared as data (`OPTIONS`); `common` holds the draws
they share. Only the standard library's Random is used, so a seed gives the same schemes in any process.
"""
from __future__ import annotations

import random

from ..errors import TTileError
from ..options import check_choice, check_share, resolve as resolve_options
from ..scheme import LAMBDA, Scheme
from ..space import PARALLEL_KINDS, REDUCTION, Choice, Space, divisors, fold_into_reuse, remaining, scheme_of


# Options every sampler has (its own OPTIONS add to them).
COMMON_OPTIONS = {"parallel": ("any", "the parallel level's kind at threads > 1: exact (one chunk per thread, "
                                      "TTile's reservation), multiple (a multiple of the thread count), balanced "
                                      "(at least 4x it), or any (a kind drawn uniformly among those that fit)"),
                  "parallel_dims": ("any", "the dimensions the parallel level splits at threads > 1: any, or "
                                           "activations (only the output's pixels or rows: conv2d's n, h, w, "
                                           "matmul's i; each thread then writes whole pixels, the share of the "
                                           "activations the next layer's same thread reads; where no such level "
                                           "fits, any), or rows (each thread, or each group of neighbouring "
                                           "threads, a band of whole output rows, the same band in every layer: "
                                           "the first split is conv2d's n or h, matmul's i, into a multiple or a "
                                           "divisor of the thread count; where none fits, any)"),
                  "pad": (0.5, "share of draws that pad each awkward dimension of the problem to a friendlier size "
                               "(Space.padding; 0: never pad, 1: always)"),
                  "in_place": (0.0, "share of draws, for a conv2d whose input is padded, that read the input in "
                                    "place (InPlace, its border tiles guarding their loads or copying their window, "
                                    "even odds) instead of padding it in a pass (0: always the pass; the search "
                                    "strategy then tries the fastest in place, its in_place_variants)"),
                  "choice_draw": ("list", "how the microkernel is drawn: list (the paper's: uniformly from the list of "
                                          "single microkernels and two-microkernel combinations that fit) or kind "
                                          "(a single one or a combination at even odds where both fit, then "
                                          "uniformly within the kind: on a friendly size the combinations can "
                                          "outnumber the singles 16 to 1)"),
                  "fold_reuse": (False, "levels drawn right above the reuse loop on its dimension join it, so the "
                                        "microkernel keeps its accumulators over all of them (space.fold_into_reuse; "
                                        "measured level with the paper's draw: benchmarks/results/fold_reuse_zen5)")}


CHOICE_DRAWS = ("list", "kind")
# The output dimensions that hold whole pixels (conv2d, depthwise) or rows (matmul) of a network's activations.
ACTIVATION_DIMS = {"conv2d": ("n", "h", "w"), "depthwise": ("n", "h", "w"), "matmul": ("i",)}
# ... and those whose outermost split gives each thread a band of whole rows (TVM hands a parallel loop's
# iterations to the threads in contiguous blocks): the band a layer writes is the band the next layer's same
# thread reads (its halo aside), at any stride, so activations stay in that core's L2. Split into a divisor of
# the thread count, a band goes to a group of neighbouring threads, nested in the bands of finer splits.
ROW_DIMS = {"conv2d": ("n", "h"), "depthwise": ("n", "h"), "matmul": ("i",)}


def _whole_pixels(op: str, threads: int, level) -> bool:
    return all(d in ACTIVATION_DIMS[op] for d, _ in level)


def _row_bands(op: str, threads: int, level) -> bool:
    dim, chunks = level[0]
    return dim in ROW_DIMS[op] and (chunks % threads == 0 or threads % chunks == 0)


# parallel_dims: which parallel levels each value keeps (op, threads, level ((dim, chunks), ...)); None: all.
PARALLEL_DIMS = {"any": None, "activations": _whole_pixels, "rows": _row_bands}


class Sampler:
    NAME = "base"
    OPTIONS: dict = {}  # option name -> (default, help)

    @classmethod
    def all_options(cls) -> dict:
        return {**COMMON_OPTIONS, **cls.OPTIONS}

    def __init__(self, seed: int | None = 0, **options):
        owner = f"sampler {self.NAME!r}"
        self.options = resolve_options(self.all_options(), options, owner)
        check_choice(self.options, "parallel", ("any",) + PARALLEL_KINDS, owner)
        check_choice(self.options, "parallel_dims", tuple(PARALLEL_DIMS), owner)
        check_choice(self.options, "choice_draw", tuple(CHOICE_DRAWS), owner)
        for name in ("pad", "in_place"):
            check_share(self.options, name, owner)
        self.seed = seed
        self.rng = random.Random(seed)
        self._draw_pools: dict = {}  # id(space) -> (space, the choices draw_choice draws from): one filter a space

    def choices(self, space: Space) -> list:
        """The microkernels/combinations this sampler draws from (ablations restrict it)."""
        return space.choices

    def sample(self, space: Space) -> Scheme:
        """A scheme: first the padding of the problem's awkward dimensions (draw_padding), then the loops, then
        where a padded input is read (draw_in_place)."""
        pads = self.draw_padding(space)
        scheme = self.draw(space.padded(pads)).with_pads(pads) if pads else self.draw(space)
        return scheme.with_in_place(self.draw_in_place(space))

    def draw_in_place(self, space: Space) -> str:
        """The InPlace border in a share `in_place` of the draws ("": the padding pass otherwise). A problem
        without a padded input (Problem.in_place_borders) draws no random number: its schemes stay what every
        seed gave before."""
        borders = space.problem.in_place_borders
        if not borders or not self.options["in_place"] or self.rng.random() >= self.options["in_place"]:
            return ""
        return self.rng.choice(borders)

    def draw(self, space: Space) -> Scheme:
        """The loop specifiers of a scheme for `space`'s problem as it is (each sampler's own draw)."""
        raise NotImplementedError

    def draw_padding(self, space: Space) -> dict:
        """{dim: padded size}: each awkward dimension padded in a share `pad` of the draws, to a target drawn
        uniformly (Space.padding). A friendly problem draws no random number, so its schemes stay what every
        seed gave before padding existed. When nothing fits the problem unpadded, every draw pads."""
        if not space.padding:
            return {}
        must = not self.choices(space)
        for _ in range(100):
            pads = {d: self.rng.choice(targets) for d, targets in sorted(space.padding.items())
                    if self.rng.random() < self.options["pad"]}
            sub = space.padded(pads) if pads else None
            if pads and (sub is None or not self.choices(sub)):
                continue
            if pads or not must:
                return pads
        raise TTileError(f"sampler {self.NAME!r}: nothing to draw from for {space.problem.size}, padded or not")

    def sample_many(self, space: Space, n: int, unique: bool = True, max_tries: int = 50) -> list:
        """n schemes; with unique=True, distinct ones (fewer if the space has fewer)."""
        out, seen = [], set()
        tries = 0
        while len(out) < n and tries < n * max_tries:
            tries += 1
            s = self.sample(space)
            if unique and s.text in seen:
                continue
            seen.add(s.text)
            out.append(s)
        return out

    # --- shared draws ----------------------------------------------------------------------------
    def draw_choice(self, space: Space) -> Choice:
        held = self._draw_pools.get(id(space))
        if held is None or held[0] is not space:
            held = self._draw_pools[id(space)] = (space, self._draw_pool(space))
        pool = held[1]
        if self.options["choice_draw"] == "kind":  # no random number unless both kinds fit
            kinds = [k for k in ([c for c in pool if not c.combined], [c for c in pool if c.combined]) if k]
            pool = self.rng.choice(kinds) if len(kinds) > 1 else pool
        return self.rng.choice(pool)

    def _draw_pool(self, space: Space) -> list:
        """The choices draw_choice draws from: the sampler's, at threads > 1 those with room for the parallel
        levels it wants where any have (the same for every draw of a space: filtered once)."""
        pool = self.choices(space)
        if not pool:
            raise TTileError(f"sampler {self.NAME!r} has nothing to draw from for {space.problem.size}")
        if space.threads > 1:  # microkernels that leave room for a balanced parallel level, where any do
            pool = [c for c in pool if "imbalanced" not in space.parallel_levels(c, 1)] or pool
            if PARALLEL_DIMS[self.options["parallel_dims"]]:  # ... and for one on the wanted dimensions, where any do
                pool = [c for c in pool if self._wanted_levels(space, space.parallel_levels(c, 1))] or pool
        return pool

    def draw_reuse(self, space: Space, choice: Choice) -> int:
        """A divisor of the reuse extent, at least the `min_reuse` option (or the whole extent if smaller) and the
        space's own floor (Space.min_reuse)."""
        sizes = space.reuse_sizes(choice)
        floor = min(max(self.options.get("min_reuse", 1), space.min_reuse(choice)), max(sizes))
        return self.rng.choice([d for d in sizes if d >= floor])

    def draw_parallel(self, space: Space, choice: Choice, reuse: int) -> tuple:
        """The parallel level for space.threads, drawn before the per-core tiles: a kind (the `parallel`
        option, or one drawn uniformly among those that fit), then one of its levels uniformly
        (space.parallel_levels). () at one thread, without drawing a random number, so 1-thread schemes
        stay what every seed gave before threads existed."""
        options = space.parallel_levels(choice, reuse)
        if not options:
            return ()
        options = self._wanted_levels(space, options) or options
        want = self.options["parallel"]
        kinds = [want] if want in options else [k for k in PARALLEL_KINDS if k in options] or ["imbalanced"]
        return self.rng.choice(options[self.rng.choice(kinds)])

    def _wanted_levels(self, space: Space, options: dict) -> dict:
        """The parallel levels of `options` ({kind: levels}, space.parallel_levels) on the dimensions the
        `parallel_dims` option asks for, by kind, kinds left empty dropped; all of them for any."""
        keep = PARALLEL_DIMS[self.options["parallel_dims"]]
        if keep is None:
            return options
        op, threads = space.problem.op, space.threads
        kept = {kind: [lv for lv in levels if lv and keep(op, threads, lv)] for kind, levels in options.items()}
        return {kind: levels for kind, levels in kept.items() if levels}

    def large_factor_levels(self, space: Space, choice: Choice, reuse: int, parallel=()) -> list:
        """Paper section 6.1: repeatedly draw a (dimension, factor > 1) pair uniformly among those left
        and put it outside the levels drawn so far; a Lambda is the innermost level of its dimension.
        Drawing pairs uniformly favours large factors, which avoids needlessly small tiles."""
        left = remaining(space.problem, choice, reuse, parallel)
        lam_pending = choice.combined
        levels = []  # innermost first while drawing
        while True:
            options = []
            for d in sorted(left):
                if lam_pending and d == choice.dim:
                    options.append((d, LAMBDA))
                else:
                    options += [(d, f) for f in divisors(left[d]) if f > 1]
            if not options:
                break
            d, f = self.rng.choice(options)
            levels.append((d, f))
            if f == LAMBDA:
                lam_pending = False
            else:
                left[d] //= f
        return levels[::-1]

    def weights_first(self, space: Space, levels: list) -> list:
        """With probability `weights_first` (an option), the drawn levels stably reordered: the vector
        dimension's (conv2d k, matmul j) outermost, then the reduction's, then the output pixels'. Each weight
        block then comes from memory once and stays in cache while the spatial loops sweep over it, which is
        what layers with few pixels and many weights want (7x7x512). Draws nothing when the share is 0."""
        reduction = REDUCTION[space.problem.op]
        return self._reorder_a_share("weights_first", levels,
                                     lambda d: 0 if d == space.problem.vector else 1 if d in reduction else 2)

    def reduction_inner(self, space: Space, levels: list) -> list:
        """With probability `reduction_inner` (an option), the drawn levels stably reordered: the output
        dimensions' outside, the reduction's innermost. Each output tile then takes all of its reduction before
        the next starts: the order of MetaSchedule's best 3x3 conv2d kernels on the Zen 3, which the uniform draw
        seldom makes (benchmarks/results/sampler_reduction_inner.md). Draws nothing when the share is 0."""
        if space.reduction_innermost:  # build() puts it so in every scheme, drawing nothing
            return levels
        reduction = REDUCTION[space.problem.op]
        return self._reorder_a_share("reduction_inner", levels, lambda d: d in reduction)

    def _reorder_a_share(self, option: str, levels: list, rank) -> list:
        """`levels` stably sorted by rank(dimension) in a share `option` of the draws, else unchanged. A share of
        0 draws no random number, so the paper's draw (and every seed's schemes) stays as it was."""
        share = self.options.get(option, 0)
        if not share or self.rng.random() >= share:
            return levels
        return sorted(levels, key=lambda level: rank(level[0]))

    def build(self, space: Space, choice: Choice, reuse: int, levels: list, parallel=()) -> Scheme:
        if space.reduction_innermost:  # the space asks it of every scheme, whichever sampler drew it
            levels = sorted(levels, key=lambda level: level[0] in REDUCTION[space.problem.op])
        # The batch's levels go outermost (below the parallel level): a Lambda's or a partial nest's tensorized
        # region holds no batch loop. Batch 1 has none, so its schemes are unchanged.
        levels = [lv for lv in levels if lv[0] == "n"] + [lv for lv in levels if lv[0] != "n"]
        if self.options["fold_reuse"]:
            levels, reuse = fold_into_reuse(levels, space.problem.reuse, reuse)
        return scheme_of(space.problem, choice, reuse, levels, parallel)


def options_text(options: dict, sep: str = ", ") -> str:
    """Sampler options as stable text, e.g. "min_reuse=32, weights_first=0.5" (reports, work-dir names)."""
    return sep.join(f"{k}={v}" for k, v in sorted(options.items()))

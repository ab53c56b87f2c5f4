"""The online structured space for one problem (paper Fig. 7): admissible microkernels from the catalog,
two-microkernel combinations from one class where no single size fits, divisible tilings above them.

Plain Python: a Problem is a dict of sizes, a microkernel a spec.Microkernel; no TVM here.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache

from .errors import TTileError
from .microkernels.catalog import classes_of
from .microkernels.family import FEW_CHANNELS, window_unrolls
from .microkernels.spec import FAMILIES, Microkernel
from .precision import get as get_precision
from .scheme import IN_PLACE_BORDERS, LAMBDA, Lambda, P, Par, Scheme, T, U, V, balance_kind

# Loop dimensions of each operator, and which one is the reduction the microkernel reuses.
DIMS = {"conv2d": ("n", "h", "w", "k", "c", "r", "s"), "matmul": ("i", "j", "k"),
        "depthwise": ("n", "h", "w", "k", "r", "s")}
REUSE = {op: family["reduction"] for op, family in FAMILIES.items()}
REDUCTION = {"conv2d": ("c", "r", "s"), "matmul": ("k",), "depthwise": ("r", "s")}
# Operators whose reuse loop always runs over all of its dimension: depthwise's window rows are few (3-7), so a
# shorter loop would load and store the accumulators several times per output tile for 3-7 FMAs each.
WHOLE_REUSE = {"conv2d": False, "matmul": False, "depthwise": True}
# The dimensions a parallel level may split among threads (spatial: every chunk writes its own outputs).
PARALLEL = {"conv2d": ("n", "h", "w", "k"), "matmul": ("i", "j"), "depthwise": ("n", "h", "w", "k")}
# Kinds of parallel level, by how the chunks share the threads (Scheme.parallel_balance): exactly one chunk per
# thread (TTile's parallelization reservation: the thread count's prime factors spread over the dimensions), a
# multiple of the thread count, or at least 4x it for balance (MetaSchedule books up to 16 x cores jobs).
PARALLEL_KINDS = ("exact", "multiple", "balanced")
MAX_CHUNKS_PER_THREAD = 16
# Dimensions a scheme may pad (Pad specifiers), and by how much at most: matmul's einsum form lets TVM's
# pad_einsum add the zero copies; conv2d's sliding windows do not (its padding would go into the operator).
PADDABLE = {"conv2d": (), "matmul": ("i", "j", "k"), "depthwise": ()}
MAX_PAD_GROWTH = 0.125
PAD_MULTIPLES = (4, 8, 16, 32, 64)  # friendly sizes: multiples of these (of vectors along the vector dimension)
REDUCTION_BLOCK = (16, 256)  # a reduction that has a divisor in this range can be cut into cache-sized blocks


@dataclasses.dataclass(frozen=True)
class Problem:
    """Loop extents of one operator instance (the vector dimension already padded to whole vectors)."""

    op: str
    sizes: tuple  # ((dim, extent), ...) in DIMS order
    lanes: int
    isa: str
    stride: int = 1
    dilation: int = 1
    vector_pad: int = 0  # elements added along the vector dimension to reach whole vectors
    batch: int = 1  # independent instances above the scheme's loops (a batch matmul's batch dimensions)
    halo: bool = False  # the function pads the input (a convolution's padding): where, a scheme's InPlace says
    precision: str = "fp32"  # what the microkernels multiply (precision.PRECISIONS)
    dot: str = ""  # the tag of the instruction they multiply with (precision.tag_for: "" for the ISA's first)
    input: str = ""  # a depthwise input narrower than the lanes, widened as read (microkernels.spec.WIDENED_INPUTS)

    @property
    def in_place_borders(self) -> tuple:
        """The InPlace borders a scheme may choose: a conv2d whose input is padded may read it in place instead
        of padding it in a pass (depthwise always reads in place, matmul pads nothing)."""
        return IN_PLACE_BORDERS if self.op == "conv2d" and self.halo else ()

    @property
    def size(self) -> dict:
        return dict(self.sizes)

    def padded(self, pads: dict) -> "Problem":
        """The problem with dimensions padded (zeros in, extra outputs dropped); along the vector dimension
        the extra elements add to vector_pad."""
        if not pads:
            return self
        bad = sorted(set(pads) - set(PADDABLE[self.op]))
        if bad:
            can = ", ".join(PADDABLE[self.op]) or "nothing"
            raise TTileError(f"{self.op} cannot pad {', '.join(bad)}; it can pad {can}")
        size = self.size
        grow = pads.get(self.vector, size[self.vector]) - size[self.vector]
        return dataclasses.replace(self, sizes=tuple((d, pads.get(d, n)) for d, n in self.sizes),
                                   vector_pad=self.vector_pad + grow)

    @property
    def vector(self) -> str:
        return FAMILIES[self.op]["vector"]

    @property
    def reuse(self) -> str:
        return REUSE[self.op]

    @classmethod
    def from_operator(cls, operator, lanes: int, isa: str, dot: str = "") -> "Problem":
        from .operators import BatchMatmul, Conv1d, Conv2d, Depthwise, Depthwise1d, Matmul, QConv2d, QMatmul

        if isinstance(operator, QConv2d):  # the channels in whole groups, as the function pads them, per group
            g = operator.groups
            kg = operator.K // g
            kp = -(-kg // lanes) * lanes
            sizes = {"n": operator.N, "h": operator.out_h, "w": operator.out_w, "k": kp, "c": operator.padded_c(),
                     "r": operator.R, "s": operator.S}
            return cls("conv2d", tuple(sizes.items()), lanes, isa, operator.stride, operator.dilation, kp - kg,
                       batch=g, halo=bool(any(operator.pads) or operator.padded_c() != operator.C // g),
                       precision=operator.precision, dot=dot)
        if isinstance(operator, QMatmul):  # the reduction in whole groups, as the function pads it
            np_ = -(-operator.N // lanes) * lanes
            return cls("matmul", (("i", operator.M), ("j", np_), ("k", operator.padded_k())), lanes, isa,
                       vector_pad=np_ - operator.N, precision=operator.precision, dot=dot)
        if isinstance(operator, Conv1d):  # a conv2d of height 1 (its intrinsics read the 3-d buffers), per group
            g = operator.groups
            kg = operator.K // g
            kp = -(-kg // lanes) * lanes
            sizes = {"n": operator.N, "h": 1, "w": operator.out_w, "k": kp, "c": operator.C // g, "r": 1,
                     "s": operator.S}
            return cls("conv2d", tuple(sizes.items()), lanes, isa, operator.stride, operator.dilation, kp - kg,
                       batch=g, halo=any(operator.pads))
        if isinstance(operator, Depthwise1d):  # a depthwise conv2d of height 1, as above
            cp = -(-operator.C // lanes) * lanes
            sizes = {"n": operator.N, "h": 1, "w": operator.out_w, "k": cp, "r": 1, "s": operator.S}
            return cls("depthwise", tuple(sizes.items()), lanes, isa, operator.stride, operator.dilation,
                       cp - operator.C, halo=any(operator.pads))
        if isinstance(operator, Depthwise):
            cp = -(-operator.C // lanes) * lanes
            sizes = {"n": operator.N, "h": operator.out_h, "w": operator.out_w, "k": cp, "r": operator.R,
                     "s": operator.S}
            return cls("depthwise", tuple(sizes.items()), lanes, isa, operator.stride, operator.dilation,
                       cp - operator.C, halo=any(operator.pads), input=operator.widened_input)
        if isinstance(operator, Conv2d):  # a grouped one: one conv2d per group, the group a batch level
            g = operator.groups
            kg = operator.K // g
            kp = -(-kg // lanes) * lanes
            sizes = {"n": operator.N, "h": operator.out_h, "w": operator.out_w, "k": kp, "c": operator.C // g,
                     "r": operator.R, "s": operator.S}
            return cls("conv2d", tuple(sizes.items()), lanes, isa, operator.stride, operator.dilation,
                       kp - kg, batch=g, halo=any(operator.pads))
        if isinstance(operator, (Matmul, BatchMatmul)):
            np_ = -(-operator.N // lanes) * lanes
            return cls("matmul", (("i", operator.M), ("j", np_), ("k", operator.K)), lanes, isa,
                       vector_pad=np_ - operator.N, batch=operator.B if isinstance(operator, BatchMatmul) else 1)
        raise TTileError(f"no structured space for {type(operator).__name__}; conv2d, depthwise, conv1d, depthwise1d, "
                         "matmul and batch matmul are supported")


@dataclasses.dataclass(frozen=True)
class Choice:
    """A microkernel, or two of one class combined along `dim` as parts ((a, u1), (b, u2))."""

    mk: Microkernel  # for a combination: the class member with the larger size along `dim`
    dim: str | None = None
    parts: tuple = ()

    @property
    def combined(self) -> bool:
        return bool(self.parts)

    def covers(self, dim: str) -> int:
        if dim == self.dim:  # the parts count microkernel sizes: vectors along the vector dimension
            n = sum(a * u for a, u in self.parts)
            return n * self.mk.lanes if dim == self.mk.family["vector"] else n
        if dim == REUSE[self.mk.op]:  # the reuse loop covers `red`; only an unrolled part (conv2d's c) is inside
            unrolled = self.mk.family["unrolled_reduction"]
            return self.mk.get(unrolled) if unrolled else 1
        return self.mk.tile.get(dim, 1)


@lru_cache(maxsize=None)
def divisors(n: int) -> tuple:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def _fits(mk: Microkernel, size: dict, skip=()) -> bool:
    for d, u in mk.unroll:
        if d in skip:
            continue
        ext = u * mk.lanes if d == mk.family["vector"] else u
        if size[d] % ext:
            return False
    return True


def admissible(problem: Problem, kept: list, max_parts_per_pair: int = 4) -> list:
    """Every single microkernel whose sizes divide the problem, and every combination a*u1 + b*u2 (a, b >= 1)
    of two sizes of one class that divides the problem along that dimension. Along the vector dimension only
    where no kept microkernel 2 vectors wide or more divides it (N = 1009 is 127 vectors: 3 x 41 + 2 x 2 from 4x3
    and 4x2): the weights then need no padding copy, which a Pad specifier makes at every call."""
    size, vector, lanes = problem.size, problem.vector, problem.lanes
    # (an fp32 depthwise microkernel reads a narrower input as it is, widening each load: the same unrolls)
    kept = [dataclasses.replace(mk, stride=problem.stride, dilation=problem.dilation, input=problem.input)
            for mk in kept if mk.op == problem.op and mk.lanes == lanes]
    out = [Choice(mk) for mk in kept if _fits(mk, size)]
    for cls in classes_of(kept, vector=vector_count_awkward(size[vector] // lanes, kept, vector)):
        dim = cls["dim"]
        extent = size[dim] // lanes if dim == vector else size[dim]
        members = {Microkernel.parse(t).get(dim): Microkernel.parse(t) for t in cls["members"]}
        if not _fits(next(iter(members.values())), size, skip=(dim,)):
            continue
        sizes = sorted(members)
        for x, u1 in enumerate(sizes):
            for u2 in sizes[x + 1:]:
                found = 0
                for period in divisors(extent):
                    for a in range(1, period // u1 + 1):
                        rest = period - a * u1
                        if rest > 0 and rest % u2 == 0 and found < max_parts_per_pair:
                            mk = dataclasses.replace(members[u2], stride=problem.stride, dilation=problem.dilation)
                            out.append(Choice(mk, dim, ((a, u1), (rest // u2, u2))))
                            found += 1
    return out


def microkernel_specs(choice: Choice) -> list:
    """The microkernel as scheme specifiers (unit unrolls left out)."""
    mk = choice.mk
    specs = []
    for d, u in mk.unroll:
        if d == choice.dim:
            specs.append(U(LAMBDA, d))
        elif u > 1:
            specs.append(U(u, d))
    specs.append(V(mk.family["vector"]))
    return specs


def remaining(problem: Problem, choice: Choice, reuse_trips: int, parallel=()) -> dict:
    """Per dimension, how many tile iterations remain above the reuse loop (below the parallel level
    `parallel`, (dim, chunks) pairs)."""
    size = problem.size
    out = {}
    for d in DIMS[problem.op]:
        inner = choice.covers(d)
        if d == problem.reuse:
            inner *= reuse_trips
        out[d] = size[d] // inner
    for d, n in parallel:
        out[d] //= n
    return out


@lru_cache(maxsize=4096)
def parallel_levels(problem: Problem, choice: Choice, reuse_trips: int, threads: int) -> dict:
    """Every parallel level that fits above this microkernel and reuse loop, by kind (PARALLEL_KINDS):
    {kind: [((dim, chunks), ...), ...]}, dimensions in DIMS order. At most MAX_CHUNKS_PER_THREAD x threads
    chunks. When no level of any kind fits (a tiny problem), "imbalanced" holds those that keep the most threads
    busy, so the loss is a visible feature of the scheme. {} at one thread."""
    if threads <= 1:
        return {}
    left = remaining(problem, choice, reuse_trips)
    dims = [d for d in PARALLEL[problem.op] if left[d] > 1]
    cap = MAX_CHUNKS_PER_THREAD * threads
    combos = [()]
    for d in dims:
        combos = [c + ((d, f),) if f > 1 else c for c in combos for f in divisors(left[d])
                  if _chunks(c) * f <= cap]
    out = {}
    for c in combos:
        kind = balance_kind(_chunks(c), threads)
        if kind != "imbalanced":
            out.setdefault(kind, []).append(c)
    if not out:
        speedup = lambda c: _chunks(c) / -(-_chunks(c) // threads)  # noqa: E731  (chunks / rounds)
        best = max(speedup(c) for c in combos)
        out["imbalanced"] = [c for c in combos if c and speedup(c) == best] or [()]
    return out


def _chunks(levels) -> int:
    n = 1
    for _, f in levels:
        n *= f
    return n


def scheme_of(problem: Problem, choice: Choice, reuse_trips: int, levels: list, parallel=()) -> Scheme:
    """levels: outermost-first list of (dim, factor) or (dim, 'lambda') above the reuse loop, below the
    parallel level `parallel` ((dim, chunks) pairs)."""
    specs = [Par(n, d) for d, n in parallel]
    for d, f in levels:
        if isinstance(f, tuple):  # ("P", tile elements): a partial-tile level
            specs.append(P(f[1], d))
        else:
            specs.append(Lambda(d, choice.parts) if f == LAMBDA else T(f, d))
    specs.append(T(reuse_trips, problem.reuse))
    specs += microkernel_specs(choice)
    scheme = Scheme(tuple(specs))
    return scheme


def fold_into_reuse(levels: list, reuse_dim: str, reuse_trips: int) -> tuple:
    """(levels, reuse_trips) with the run of tile levels right above the reuse loop on its dimension merged into
    the reuse loop. The loop nest walks the same iterations in the same order; what changes is how often the
    microkernel loads and stores its accumulators (a reuse loop of 2 under a tile of 16 on the same dimension:
    16 times per output; a reuse loop of 32: once). Measured level with the paper's draw on 13 layers
    (benchmarks/results/fold_reuse_zen5), so the samplers' `fold_reuse` option is off by default."""
    levels = list(levels)
    while levels and levels[-1][0] == reuse_dim and isinstance(levels[-1][1], int):
        reuse_trips *= levels.pop()[1]
    return levels, reuse_trips


def microkernel_of(problem: Problem, scheme: Scheme, lambda_unroll: int | None = None) -> Microkernel:
    """The microkernel a scheme ends with (for a Lambda: the part with unroll `lambda_unroll`)."""
    specs = list(scheme.specs)
    i = len(specs)
    while i > 0 and specs[i - 1].__class__ in (U, V):
        i -= 1
    if i == 0 or specs[i - 1].dim != problem.reuse:
        raise TTileError(f"{scheme.text}: no reuse loop over {problem.reuse} above the microkernel")
    factors = {}
    for s in specs[i:]:
        if isinstance(s, U):
            n = s.n
            if n == LAMBDA:
                lam = scheme.lambda_spec()
                n = lambda_unroll if lambda_unroll is not None else max(a for _, a in lam.parts)
            factors[s.dim] = factors.get(s.dim, 1) * n
    unrolled = FAMILIES[problem.op]["unrolled_reduction"]
    red = specs[i - 1].n * (factors.get(unrolled, 1) if unrolled else 1)
    return Microkernel.make(problem.op, problem.isa, problem.lanes, red, problem.stride, problem.dilation,
                            problem.precision, problem.dot, problem.input, **factors)


def vector_widths(kept: list, vector: str) -> set:
    """The kept microkernels' widths of 2 vectors or more (2..6 where none is kept)."""
    return {mk.get(vector) for mk in kept if mk.get(vector) > 1} or set(range(2, 7))


def vector_count_awkward(n: int, kept: list, vector: str) -> bool:
    """Whether `n` vectors tile badly: none of vector_widths divides it. Awkward for the kept microkernels, not in
    general: 125 vectors (N = 1000 on AVX2) has a factor 5, but no kept microkernel there is 5 vectors wide."""
    return n >= 4 and not any(n % u == 0 for u in vector_widths(kept, vector))


def pad_targets(problem: Problem, kept: list) -> dict:
    """Per dimension the structured space tiles badly, the friendlier sizes it may be padded to (at most
    MAX_PAD_GROWTH more): rows no kept microkernel of 4 rows or more divides, a reduction with no divisor in
    REDUCTION_BLOCK (no reduction tile below the whole of it), a vector count no kept microkernel's width (2 vectors
    or more) divides. Targets: the next multiples of PAD_MULTIPLES and of the kept microkernels' sizes along the
    dimension. {} for a friendly problem."""
    size, lanes, out = problem.size, problem.lanes, {}
    vector = problem.vector
    ours = [mk for mk in kept if mk.op == problem.op and mk.lanes == lanes]
    for d in PADDABLE[problem.op]:
        n = size[d] // lanes if d == vector else size[d]
        units = set(PAD_MULTIPLES)
        if d == vector:
            awkward = vector_count_awkward(n, ours, d)
            units = {2, 4, 8} | vector_widths(ours, d)
        elif d == problem.reuse:
            lo, hi = REDUCTION_BLOCK
            awkward = n > hi and not any(n % u == 0 for u in range(lo, hi + 1))
        else:
            rows = {mk.get(d) for mk in ours}
            awkward = n >= 8 and not any(n % u == 0 for u in rows if u >= 4)
            units |= {u for u in rows if u >= 4}
        if not awkward:
            continue
        targets = sorted({-(-n // u) * u for u in units} - {n})
        targets = [t * (lanes if d == vector else 1) for t in targets if t <= n * (1 + MAX_PAD_GROWTH)]
        if targets:
            out[d] = targets
    return out


FALLBACK_CHOICES = 4  # choices the fallback keeps, by expected rate


def fallback_choices(problem: Problem, rated, n: int = FALLBACK_CHOICES) -> list:
    """Where no kept microkernel or Lambda of two fits: the `n` choices made of measured microkernels, single or
    two of one class combined, with the best expected rate, a Lambda's parts each at its member's measured rate.
    On a 7 x 7 grid with 40 vectors of outputs (AVX2), 4 rows at 99% of peak and 3 at 72% make 7 rows at about
    86%, where the best 7-row microkernel alone runs at 64%."""
    rates = {mk.unroll: g for mk, g in rated}

    def rate(choice: Choice) -> float:
        if not choice.combined:
            return rates.get(choice.mk.unroll, 0.0)
        seconds = 0.0  # the members differ along `dim` only: each row of a part takes 1 / its member's rate
        for a, u in choice.parts:
            member = tuple((d, u if d == choice.dim else f) for d, f in choice.mk.unroll)
            seconds += a * u / max(rates.get(member, 0.0), 1e-9)
        return sum(a * u for a, u in choice.parts) / seconds

    choices = admissible(problem, [mk for mk, _ in rated])
    return sorted(choices, key=lambda c: (-rate(c), c.combined))[:n]


SMALL_REUSE = FEW_CHANNELS  # below this many c steps, microkernels must also unroll r and s (when one fits)


class Space:
    """The admissible choices for one problem; samplers draw schemes from it."""

    def __init__(self, problem: Problem, kept: list, fallback: list = (), threads: int = 1, padding: bool = True):
        """fallback: every measured microkernel with its GFLOPS, (mk, gflops) best first (Catalog.ranked), used
        (and reported through `fallback_used`) only when no kept one fits: the paper's sub-optimal microkernel
        fallback, with Lambdas of them too (fallback_choices).
        threads: the schemes' parallel level is drawn for this many threads (none at 1).
        padding: offer padded variants of awkward dimensions (`padding`, `padded`); the padded spaces
        themselves offer none."""
        if not isinstance(threads, int) or threads < 1:
            raise TTileError(f"threads must be a whole number >= 1, got {threads!r}")
        self.problem = problem
        self.threads = threads
        self.choices = admissible(problem, kept)
        self.fallback_used = False
        self.notes = []
        # Whether every scheme puts the reduction's tiles innermost, right above the microkernel (the samplers'
        # reduction_inner order at a share of 1).
        self.reduction_innermost = False
        if problem.op == "conv2d" and problem.size["c"] < SMALL_REUSE:
            # Too few c steps to amortize loading and storing the accumulators: reuse r and s as well
            # (the thesis' remedy for C = 3 layers; measured here: Yolo9000-0 36% -> 56% of peak).
            # Window microkernels this few channels do not want (family.window_unrolls), whoever passed them.
            size = problem.size
            unwanted = set(window_unrolls(size["r"], size["s"])) - set(window_unrolls(size["r"], size["s"], size["c"]))
            self.choices = [c for c in self.choices if (c.mk.get("r"), c.mk.get("s")) not in unwanted]
            rs = [c for c in self.choices if c.mk.get("r") > 1 or c.mk.get("s") > 1]
            if rs:
                self.choices = rs
                self.notes.append(f"C = {problem.size['c']} < {SMALL_REUSE}: only microkernels unrolled along r and s")
            elif problem.size["r"] * problem.size["s"] > 1:
                # No microkernel unrolls this window (ResNet's 7x7 stem): its loops go right above the
                # microkernel, so each output tile keeps its accumulators over the whole window (unrolling the
                # whole window inside the microkernel measured slower; benchmarks/results/ansor_suite_xeon).
                self.reduction_innermost = True
                self.notes.append(f"C = {problem.size['c']} < {SMALL_REUSE} and no microkernel unrolls the "
                                  f"{problem.size['r']}x{problem.size['s']} window: the reduction's tiles innermost")
        if not self.choices and fallback:
            self.choices = fallback_choices(problem, fallback)
            self.fallback_used = bool(self.choices)
        self.kept = kept
        self._padded = {}
        # Padding is a choice next to partial tiles and Lambdas: each target kept only if a space exists with it,
        # alone or with one other dimension padded too (M = 97 rows fit a Lambda only once N's 125 vectors are 128).
        targets = pad_targets(problem, kept) if padding and get_precision(problem.precision).pads else {}
        self.padding = {}
        for d, ts in targets.items():
            others = [{}] + [{e: u} for e, us in targets.items() if e != d for u in us]
            ts = [t for t in ts if any(self.padded({d: t, **o}) is not None for o in others)]
            if ts:
                self.padding[d] = ts
        if not self.choices and not self.padding:
            raise TTileError(
                f"no catalog microkernel or two-microkernel combination divides {problem.size}; "
                "lower the catalog threshold or rebuild the catalog for this ISA"
            )

    def padded(self, pads: dict):
        """The space of the problem padded as `pads` says ({dim: size}); None when nothing fits it either."""
        if not pads:
            return self
        key = tuple(sorted(pads.items()))
        if key not in self._padded:
            try:
                # Kept microkernels only: padding is there to make them fit, not to fall back.
                self._padded[key] = Space(self.problem.padded(pads), self.kept, (), self.threads, padding=False)
            except TTileError:
                self._padded[key] = None
        return self._padded[key]

    @property
    def singles(self) -> list:
        return [c for c in self.choices if not c.combined]

    @property
    def combos(self) -> list:
        return [c for c in self.choices if c.combined]

    def parallel_levels(self, choice: Choice, reuse_trips: int) -> dict:
        return parallel_levels(self.problem, choice, reuse_trips, self.threads)

    def reuse_extent(self, choice: Choice) -> int:
        """Iterations available to the reuse loop over c (conv2d), k (matmul) or r (depthwise)."""
        return self.problem.size[self.problem.reuse] // choice.covers(self.problem.reuse)

    def reuse_sizes(self, choice: Choice) -> list:
        """The iteration counts the reuse loop may run: divisors of reuse_extent, in whole groups of the
        precision's dot product (int8's 4 reduction elements per instruction)."""
        group = get_precision(self.problem.precision).group
        return [d for d in divisors(self.reuse_extent(choice)) if d % group == 0]

    def min_reuse(self, choice: Choice) -> int:
        """The fewest iterations the reuse loop may run (WHOLE_REUSE: all of them)."""
        return self.reuse_extent(choice) if WHOLE_REUSE[self.problem.op] else 1

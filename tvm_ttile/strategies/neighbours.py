"""Neighbourhoods for the G-BFS and N-A2C searches (the seed paper's configuration search model, section 3.2).

A state is a configuration; an action moves a factor from one loop level of a dimension to another of the same
dimension, so that neighbours are the nearest states (the paper: s_x[i] *= 2, s_x[j] /= 2). Here the factor moved
is the smallest prime of the giving level, which is the paper's 2 on powers of two and still reaches every
factorization of sizes such as 1000 or 7. An action that leaves the space (the paper's legitimacy bit J = 0)
steps to None. Every landscape offers the same list of actions in every state, so an actor network has one
output per action.

Two landscapes: `KnobLandscape`, the AutoTVM-style templates' knobs (split factors; the loop order and unroll
depth as extra coordinates moved one value up or down), and `SchemeLandscape`, tvm_ttile's structured space
(factors moved between the tile levels of one dimension, a level split in two, two adjacent levels of different
dimensions swapped; the microkernel, the padding, the Lambda and the parallel level stay). Plain Python.
"""
from __future__ import annotations

import dataclasses
import math
import random

from ..scheme import Lambda, P, Scheme, SchemeError, T, U, V


def smallest_prime(n: int) -> int:
    for p in range(2, int(math.isqrt(n)) + 1):
        if n % p == 0:
            return p
    return n


def prime_factors(n: int) -> list:
    out = []
    while n > 1:
        p = smallest_prime(n)
        out.append(p)
        n //= p
    return out


class Landscape:
    """States with neighbours. `actions` is one list for every state; `step` gives the state an action leads to
    (None: outside the space); `key` a stable text (visited sets, records)."""
    actions: list = []

    def start(self):
        raise NotImplementedError

    def step(self, state, action):
        raise NotImplementedError

    def key(self, state) -> str:
        raise NotImplementedError

    def features(self, state) -> list:
        """Numbers describing a state (the actor's and critic's input), each in [0, 1]."""
        raise NotImplementedError

    def random_state(self, rng: random.Random):
        raise NotImplementedError

    def neighbours(self, state) -> list:
        """g(s): the distinct states one action away, in action order."""
        out, seen = [], {self.key(state)}
        for a in self.actions:
            s = self.step(state, a)
            if s is not None and self.key(s) not in seen:
                seen.add(self.key(s))
                out.append(s)
        return out


# --- the templates' knobs ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Tile:
    """A split of `extent` into `levels` factors, outermost first (MetaSchedule's SamplePerfectTile)."""
    extent: int
    levels: int
    max_inner: int = 0  # the innermost factor's bound (0: none)

    def legit(self, factors) -> bool:
        return not self.max_inner or factors[-1] <= self.max_inner

    def count(self) -> int:
        """How many factorizations: stars and bars per prime, the innermost factor bounded."""
        def ordered(n, k):
            total = 1
            for p in set(prime_factors(n)):
                e = prime_factors(n).count(p)
                total *= math.comb(e + k - 1, k - 1)
            return total
        if self.levels == 1:
            return 1
        inner = [d for d in range(1, self.extent + 1) if self.extent % d == 0 and self.legit((d,))]
        return sum(ordered(self.extent // d, self.levels - 1) for d in inner)


@dataclasses.dataclass(frozen=True)
class Category:
    """One of `n` values (MetaSchedule's SampleCategorical: loop order, unroll depth)."""
    n: int

    def count(self) -> int:
        return self.n


class KnobLandscape(Landscape):
    """States: one tuple of factors per Tile coordinate, one value index per Category coordinate."""

    def __init__(self, coords):
        self.coords = list(coords)
        self.actions = []
        for c, coord in enumerate(self.coords):
            if isinstance(coord, Tile):
                self.actions += [("move", c, i, j) for i in range(coord.levels) for j in range(coord.levels) if i != j]
            else:
                self.actions += [("shift", c, 1), ("shift", c, -1)]

    def size(self) -> int:
        return math.prod(c.count() for c in self.coords)

    def start(self):
        """The paper's s0: each extent in its outermost level ([[m,1,1,1],[k,1],[n,1,1,1]]), first values."""
        return tuple((c.extent,) + (1,) * (c.levels - 1) if isinstance(c, Tile) else 0 for c in self.coords)

    def step(self, state, action):
        kind, c = action[0], action[1]
        coord, value = self.coords[c], state[c]
        if kind == "shift":
            v = value + action[2]
            if not 0 <= v < coord.n:
                return None
            new = v
        else:
            i, j = action[2], action[3]
            if value[j] == 1:
                return None
            p = smallest_prime(value[j])
            f = list(value)
            f[i], f[j] = f[i] * p, f[j] // p
            if not coord.legit(f):
                return None
            new = tuple(f)
        return state[:c] + (new,) + state[c + 1:]

    def key(self, state) -> str:
        return repr(state)

    def features(self, state) -> list:
        out = []
        for coord, v in zip(self.coords, state):
            if isinstance(coord, Tile):
                scale = math.log(coord.extent) if coord.extent > 1 else 1.0
                out += [math.log(f) / scale for f in v]
            else:
                out.append(v / max(coord.n - 1, 1))
        return out

    def random_state(self, rng):
        out = []
        for coord in self.coords:
            if isinstance(coord, Category):
                out.append(rng.randrange(coord.n))
                continue
            for _ in range(1000):
                f = [1] * coord.levels
                for p in prime_factors(coord.extent):
                    f[rng.randrange(coord.levels)] *= p
                if coord.legit(f):
                    out.append(tuple(f))
                    break
            else:
                return None  # (a bound the random splits seldom meet: the caller draws again or gives up)
        return tuple(out)


# --- tvm_ttile's structured space ----------------------------------------------------------------------
MAX_LEVELS = 4  # tile levels per dimension the actions address (schemes seldom have more)


class SchemeLandscape(Landscape):
    """States: schemes of one problem. The tile levels are the T specifiers between the parallel level and the
    microkernel (the reuse loop included: it is the innermost level of its dimension and stays innermost).
    Actions: ("move", d, i, j) moves the smallest prime of d's i-th level (outermost first) to its j-th, a level
    left with 1 disappearing; ("split", d, i) moves it to a new level just outside the i-th; ("swap", p) swaps the
    tile levels at positions p and p + 1 when they are of different dimensions. A Lambda or partial level, the
    microkernel, the padding and the Par level stay where they are; every result is validated as lowering does."""

    def __init__(self, problem, draw, whole_reuse: bool = False):
        """draw: a callable giving a scheme drawn by the sampler (the start and restarts)."""
        from ..space import DIMS, REDUCTION

        self.problem, self.whole_reuse, self.draw = problem, whole_reuse, draw
        self.reductions = REDUCTION[problem.op]
        dims = DIMS[problem.op]
        self.actions = [("move", d, i, j) for d in dims for i in range(MAX_LEVELS) for j in range(MAX_LEVELS)
                        if i != j]
        self.actions += [("split", d, i) for d in dims for i in range(MAX_LEVELS)]
        self.actions += [("swap", p) for p in range(2 * MAX_LEVELS)]
        self.dims = dims

    def start(self):
        return self.draw()

    def _parts(self, scheme):
        """(Par prefix, tile levels, microkernel suffix): the levels are every specifier between them."""
        specs = list(scheme.specs)
        npar = len(scheme.parallel_levels)
        end = len(specs)
        while end > npar and isinstance(specs[end - 1], (U, V)):
            end -= 1
        return specs[:npar], specs[npar:end], specs[end:]

    def step(self, scheme, action):
        head, levels, tail = self._parts(scheme)
        reuse_at = len(levels) - 1  # the reuse loop: directly above the microkernel
        kind = action[0]
        if kind == "swap":
            p = action[1]
            if p + 1 >= reuse_at or levels[p].dim == levels[p + 1].dim or "n" in (levels[p].dim, levels[p + 1].dim):
                return None
            levels[p], levels[p + 1] = levels[p + 1], levels[p]
        else:
            d = action[1]
            at = [k for k, s in enumerate(levels) if s.dim == d and isinstance(s, T)]
            i = action[2]
            if i >= len(at) or levels[at[i]].n == 1 or (self.whole_reuse and at[i] == reuse_at):
                return None
            p = smallest_prime(levels[at[i]].n)
            if kind == "move":
                j = action[3]
                if j >= len(at) or (self.whole_reuse and at[j] == reuse_at):
                    return None
                if any(isinstance(levels[k], (Lambda, P)) and levels[k].dim == d
                       for k in range(min(at[i], at[j]), max(at[i], at[j]))):
                    return None  # never across a Lambda or partial level of the same dimension
                levels[at[j]] = T(levels[at[j]].n * p, d)
                levels[at[i]] = T(levels[at[i]].n // p, d)
                if levels[at[i]].n == 1 and at[i] != reuse_at:
                    del levels[at[i]]
            else:
                if levels[at[i]].n == p:
                    return None  # a prime level has nothing to split
                levels[at[i]] = T(levels[at[i]].n // p, d)
                levels.insert(at[i], T(p, d))
        new = Scheme(tuple(head + levels + tail), scheme.pads, scheme.in_place)
        try:
            new.validate(self.problem.size, self.problem.lanes, self.problem.reuse, self.reductions)
        except SchemeError:
            return None
        return new

    def key(self, scheme) -> str:
        return scheme.text

    def features(self, scheme) -> list:
        """Per dimension and level (outermost first, MAX_LEVELS of them), log(factor) / log(size)."""
        _, levels, _ = self._parts(scheme)
        sizes = scheme.padded_sizes(self.problem.size)
        out = []
        for d in self.dims:
            fs = [s.n for s in levels if s.dim == d and isinstance(s, T)][:MAX_LEVELS]
            fs += [1] * (MAX_LEVELS - len(fs))
            scale = math.log(sizes[d]) if sizes[d] > 1 else 1.0
            out += [math.log(f) / scale for f in fs]
        return out

    def random_state(self, rng):
        return self.draw()  # the sampler's own seeded draw




# --- the searches' shared bookkeeping --------------------------------------------------------------------
class NeighbourhoodSearch:
    """Ask/tell over a landscape: `ask(n)` gives at most n states never asked before, `tell` their measured
    seconds (None: failed to build or run, a state outside the space). `resume` tells the measurements of an
    earlier run, so that nothing is measured twice. Options as data (`OPTIONS`: name -> (default, help))."""
    NAME = ""
    OPTIONS: dict = {}
    START = {"start": ("given", "given: the landscape's start (the paper's s0); random: a random state")}

    def __init__(self, landscape: Landscape, seed: int = 0, **options):
        from ..errors import TTileError
        from ..options import resolve as resolve_options

        self.options = resolve_options(self.OPTIONS, options, f"search {self.NAME!r}")
        self.land, self.seed = landscape, seed
        self.rng = random.Random(seed)
        self.visited: dict = {}  # key -> seconds (inf: failed)
        self.pending: dict = {}  # key -> state asked, not told yet
        self.best = None  # (seconds, state)
        self.notes: list = []
        if self.options.get("start", "given") not in ("given", "random"):
            raise TTileError(f"search {self.NAME!r} option 'start' is given or random, got {self.options['start']!r}")

    def fresh(self, state) -> bool:
        k = self.land.key(state)
        return k not in self.visited and k not in self.pending

    def _ask(self, state, batch):
        self.pending[self.land.key(state)] = state
        batch.append(state)

    def resume(self, measured) -> None:
        """measured: (state, seconds) pairs of an earlier run, in any order (sorted here, so that a resumed
        search does not depend on the database's order)."""
        measured = sorted(measured, key=lambda m: (m[1] if m[1] is not None else math.inf, self.land.key(m[0])))
        self.tell([s for s, _ in measured], [c for _, c in measured])

    def tell(self, states, seconds) -> None:
        for s, c in zip(states, seconds):
            k = self.land.key(s)
            self.pending.pop(k, None)
            if k in self.visited:
                continue
            c = math.inf if c is None else float(c)
            self.visited[k] = c
            if math.isfinite(c) and (self.best is None or c < self.best[0]):
                self.best = (c, s)
            self.heard(s, c)
        self.learn()

    def heard(self, state, seconds) -> None:
        """One new measurement (the search's own bookkeeping)."""

    def learn(self) -> None:
        """After each told batch."""

    def first_state(self):
        """Where the walk starts: the landscape's start (option start=given: the paper's s0 for the templates, a
        drawn scheme in the structured space) or a random state (start=random)."""
        s = self.land.start() if self.options["start"] == "given" else self.land.random_state(self.rng)
        return s if s is not None else self.land.start()

    def restart(self):
        """An unvisited random state (when the search has nowhere left to go), reported in `notes`."""
        for _ in range(200):
            s = self.land.random_state(self.rng)
            if s is not None and self.fresh(s):
                self.notes.append(f"restart from a random state after {len(self.visited)} measured")
                return s
        return None

    def ask(self, n: int) -> list:
        raise NotImplementedError

"""The scheme language (paper section 3.3): a list of loop specifiers from the outermost inwards.

    Par(n, d)              n parallel chunks along d: outermost only, spatial dimensions only; the product of
                           the Par sizes is the number of chunks the threads share (parallel_balance says how well)
    R(d)                   outer loop over what remains of dimension d
    P(t, d)                tiles of t elements along d, the last one partial (non-divisible space only)
    T(n, d)                a tile loop of exactly n iterations along d
    U(n, d)                a tile loop of n iterations, fully unrolled (U(lambda, d): the factor a Lambda sets)
    V(d)                   the vector lanes along d; innermost, at most one
    Lambda(d, [(r, a),..]) loop nests in sequence along d; nest i runs r_i times the inner sub-scheme with
                           U(lambda, d) = a_i. 34 = 2*11 + 1*12 is Lambda(h, [(2,11),(1,12)]).
    Pad(n, d)              d padded with zeros to n inside the function (the copies timed with it), so that the
                           specifiers that follow tile n instead of an awkward size: written first, kept apart
                           from the loop specifiers (`Scheme.pads`). 1009 rows as 1016: [Pad(1016,i),...].
    InPlace(b)             a convolution's padded input read where it lies by the tiles whose window is inside it,
                           instead of a padding pass over the whole input before the operator; the tiles on the
                           border guard each load (b = guard) or copy their window (b = copy). Written after the
                           Pads, before every loop specifier (`Scheme.in_place`).

A scheme has one canonical text form; `Scheme.parse(s.text) == s`. Plain Python: no TVM here.
"""
from __future__ import annotations

import dataclasses
import re

from .errors import TTileError

LAMBDA = "lambda"


class SchemeError(TTileError):
    pass


@dataclasses.dataclass(frozen=True)
class R:
    dim: str

    @property
    def text(self):
        return f"R({self.dim})"


@dataclasses.dataclass(frozen=True)
class T:
    n: int
    dim: str

    @property
    def text(self):
        return f"T({self.n},{self.dim})"


@dataclasses.dataclass(frozen=True)
class Par:
    """A parallel tile loop of exactly n iterations along a spatial dimension: the chunks the threads share.
    All Par levels come first in a scheme; each core runs the rest (the per-core scheme) on its chunks."""

    n: int
    dim: str

    @property
    def text(self):
        return f"Par({self.n},{self.dim})"


@dataclasses.dataclass(frozen=True)
class P:
    """A loop over tiles of `size` elements along `dim` that need not divide the enclosing tile: the last
    one is partial (paper section 6.3's non-divisible space). Tiles still hold whole microkernels."""

    size: int
    dim: str

    @property
    def text(self):
        return f"P({self.size},{self.dim})"


@dataclasses.dataclass(frozen=True)
class U:
    n: object  # int, or LAMBDA
    dim: str

    @property
    def text(self):
        return f"U({self.n},{self.dim})"


@dataclasses.dataclass(frozen=True)
class V:
    dim: str

    @property
    def text(self):
        return f"V({self.dim})"


@dataclasses.dataclass(frozen=True)
class Pad:
    """Dimension `dim` padded to `n` elements: zero inputs in, the extra outputs dropped."""

    n: int
    dim: str

    @property
    def text(self):
        return f"Pad({self.n},{self.dim})"


IN_PLACE_BORDERS = ("guard", "copy")


@dataclasses.dataclass(frozen=True)
class InPlace:
    """The input's padding read in place (see the module's docstring); `border`: what the border tiles do."""

    border: str

    @property
    def text(self):
        return f"InPlace({self.border})"


@dataclasses.dataclass(frozen=True)
class Lambda:
    dim: str
    parts: tuple  # ((repeats, unroll), ...)

    @property
    def text(self):
        return f"Lambda({self.dim},[" + ",".join(f"({r},{a})" for r, a in self.parts) + "])"


_ITEM = re.compile(r"(R|T|U|V|Par|Pad|P|InPlace|Lambda)\(([^()]*(?:\[[^\]]*\])?)\)")


@dataclasses.dataclass(frozen=True)
class Scheme:
    specs: tuple  # the loop specifiers, outermost first
    pads: tuple = ()  # Pad specifiers: what the loops tile is the problem padded to these sizes
    in_place: str = ""  # InPlace's border ("": the input's padding is a pass before the operator)

    @property
    def text(self) -> str:
        lead = self.pads + ((InPlace(self.in_place),) if self.in_place else ())
        return "[" + ",".join(s.text for s in lead + self.specs) + "]"

    @property
    def padding(self) -> dict:
        return {p.dim: p.n for p in self.pads}

    def padded_sizes(self, sizes: dict) -> dict:
        """The sizes the loop specifiers tile: `sizes` with this scheme's Pad applied."""
        return {**sizes, **self.padding}

    @property
    def unpadded(self) -> "Scheme":
        return Scheme(self.specs, (), self.in_place)

    def with_pads(self, pads: dict) -> "Scheme":
        return Scheme(self.specs, tuple(Pad(n, d) for d, n in sorted(pads.items())), self.in_place)

    def with_in_place(self, border: str) -> "Scheme":
        """This scheme with the input read in place, `border` (IN_PLACE_BORDERS; "": a padding pass)."""
        return Scheme(self.specs, self.pads, border)

    def __str__(self):
        return self.text

    @classmethod
    def parse(cls, text: str) -> "Scheme":
        body = text.strip().replace(" ", "")
        if not (body.startswith("[") and body.endswith("]")):
            raise SchemeError(f"a scheme is written [spec,spec,...]; got {text!r}")
        body = body[1:-1]
        specs, pos = [], 0
        while pos < len(body):
            m = _ITEM.match(body, pos)
            if not m:
                raise SchemeError(f"cannot read a specifier at {body[pos:]!r} in {text!r}")
            specs.append(_make(m.group(1), m.group(2), text))
            pos = m.end()
            if pos < len(body):
                if body[pos] != ",":
                    raise SchemeError(f"expected ',' at {body[pos:]!r} in {text!r}")
                pos += 1
        nlead = 0
        while nlead < len(specs) and isinstance(specs[nlead], (Pad, InPlace)):
            nlead += 1
        if any(isinstance(s, (Pad, InPlace)) for s in specs[nlead:]):
            raise SchemeError(f"{text}: Pad and InPlace specifiers come first, before every loop specifier")
        pads = tuple(sorted((s for s in specs[:nlead] if isinstance(s, Pad)), key=lambda p: p.dim))
        if len({p.dim for p in pads}) < len(pads):
            raise SchemeError(f"{text}: at most one Pad per dimension")
        in_place = [s.border for s in specs[:nlead] if isinstance(s, InPlace)]
        if len(in_place) > 1:
            raise SchemeError(f"{text}: at most one InPlace")
        return cls(tuple(specs[nlead:]), pads, in_place[0] if in_place else "")

    # --- structure -----------------------------------------------------------------------------
    def lambda_spec(self):
        lams = [s for s in self.specs if isinstance(s, Lambda)]
        if len(lams) > 1:
            raise SchemeError(f"{self.text}: at most one Lambda is supported")
        return lams[0] if lams else None

    def extents(self, lanes: int, lambda_unroll: int | None = None) -> list:
        """Per specifier (outermost first), the extent of the tile it iterates over, per dimension,
        computed from the innermost specifier outwards. R specifiers are left at their inner extent
        (they cover whatever remains)."""
        ext: dict = {}
        out = [None] * len(self.specs)
        lam = self.lambda_spec()
        for i in range(len(self.specs) - 1, -1, -1):
            s = self.specs[i]
            cur = ext.get(s.dim, 1)
            if isinstance(s, V):
                ext[s.dim] = cur * lanes
            elif isinstance(s, (T, U, Par)):
                n = s.n
                if n == LAMBDA:
                    if lam is None or lam.dim != s.dim:
                        raise SchemeError(f"{self.text}: U(lambda,{s.dim}) needs a Lambda on {s.dim} above it")
                    n = lambda_unroll if lambda_unroll is not None else max(a for _, a in lam.parts)
                ext[s.dim] = cur * n
            elif isinstance(s, P):
                ext[s.dim] = s.size
            elif isinstance(s, Lambda):
                inner = cur // (lambda_unroll if lambda_unroll is not None else max(a for _, a in s.parts))
                ext[s.dim] = sum(r * a * inner for r, a in s.parts)
            out[i] = dict(ext)
        return out

    def validate(self, sizes: dict, lanes: int, reduction: str | None = None, reductions=()) -> None:
        """Raise SchemeError naming the first rule broken: one V, innermost; known dimensions; divisible
        tiles; Lambda parts adding up; the reduction loop directly above the microkernel; Par levels outermost
        and never over a reduction dimension (`reductions`; `reduction` always counts). Pad sizes exceed the
        problem's, and the loop specifiers are checked against the padded sizes."""
        specs = self.specs
        if not specs:
            raise SchemeError("empty scheme")
        if self.in_place and self.in_place not in IN_PLACE_BORDERS:
            raise SchemeError(f"{self.text}: InPlace takes one of {', '.join(IN_PLACE_BORDERS)}")
        for p in self.pads:
            if p.dim not in sizes:
                raise SchemeError(f"{self.text}: unknown dimension {p.dim!r} in {p.text} (dimensions: {sorted(sizes)})")
            if not isinstance(p.n, int) or p.n <= sizes[p.dim]:
                raise SchemeError(f"{self.text}: {p.text} must pad {p.dim}={sizes[p.dim]} to a larger size")
        sizes = self.padded_sizes(sizes)
        for s in specs:
            if s.dim not in sizes:
                raise SchemeError(f"{self.text}: unknown dimension {s.dim!r} (dimensions: {sorted(sizes)})")
            if isinstance(s, (T, U, Par)) and s.n != LAMBDA and (not isinstance(s.n, int) or s.n <= 0):
                raise SchemeError(f"{self.text}: {s.text} needs a positive size")
        npar = len(self.parallel_levels)
        if any(isinstance(s, Par) for s in specs[npar:]):
            raise SchemeError(f"{self.text}: Par levels must be the outermost specifiers")
        for s in specs[:npar]:
            if s.dim == reduction or s.dim in reductions:
                raise SchemeError(f"{self.text}: {s.text} runs over a reduction dimension; only spatial "
                                  "dimensions can be shared among threads")
        vs = [i for i, s in enumerate(specs) if isinstance(s, V)]
        if len(vs) > 1:
            raise SchemeError(f"{self.text}: at most one V")
        if vs and vs[0] != len(specs) - 1:
            raise SchemeError(f"{self.text}: V must be the innermost specifier")
        lam = self.lambda_spec()
        if lam is not None:
            if len(lam.parts) < 2 or any(r <= 0 or a <= 0 for r, a in lam.parts):
                raise SchemeError(f"{self.text}: {lam.text} needs two or more (repeats, unroll) pairs, all positive")
            li = specs.index(lam)
            if not any(isinstance(s, U) and s.n == LAMBDA and s.dim == lam.dim for s in specs[li + 1:]):
                raise SchemeError(f"{self.text}: {lam.text} needs a U(lambda,{lam.dim}) below it")
            if any(s.dim == lam.dim and not (isinstance(s, U) and s.n == LAMBDA) for s in specs[li + 1:]
                   if not isinstance(s, V)):
                raise SchemeError(f"{self.text}: below {lam.text} only U(lambda,{lam.dim}) may split {lam.dim}")
        for i, s in enumerate(specs):
            if isinstance(s, U) and s.n == LAMBDA and (lam is None or lam.dim != s.dim or specs.index(lam) > i):
                raise SchemeError(f"{self.text}: U(lambda,{s.dim}) needs a Lambda on {s.dim} above it")
        final = self._final_extents(lanes)
        partial = self._check_partial(sizes, lanes)
        for d, size in sizes.items():
            if d in partial:
                continue
            got = final.get(d, 1)
            has_r = any(isinstance(s, R) and s.dim == d for s in specs)
            if has_r or d not in final:
                if size % got:
                    raise SchemeError(f"{self.text}: tiles along {d} cover {got}, which does not divide {d}={size}")
            elif got != size:
                raise SchemeError(f"{self.text}: the specifiers along {d} cover {got}, but {d}={size}")
        if reduction is not None:
            first_u = len(specs)  # the microkernel: the longest suffix of U and V specifiers
            while first_u > 0 and isinstance(specs[first_u - 1], (U, V)):
                first_u -= 1
            if first_u == len(specs) or first_u == 0:
                raise SchemeError(f"{self.text}: no loop over the reduction dimension {reduction} above the microkernel")
            above = specs[first_u - 1]
            if above.dim != reduction or not isinstance(above, (T, R)):
                raise SchemeError(f"{self.text}: the loop directly above the microkernel must run over "
                                  f"{reduction} (T or R), not {above.text}")

    # --- threads -------------------------------------------------------------------------------------
    @property
    def parallel_levels(self) -> tuple:
        """The leading Par specifiers (the parallel level)."""
        out = []
        for s in self.specs:
            if not isinstance(s, Par):
                break
            out.append(s)
        return tuple(out)

    @property
    def parallel_chunks(self) -> int:
        n = 1
        for s in self.parallel_levels:
            n *= s.n
        return n

    def per_core(self) -> "Scheme":
        """The scheme each core runs on one chunk: everything below the parallel level."""
        return Scheme(self.specs[len(self.parallel_levels):], self.pads, self.in_place)

    def parallel_balance(self, threads: int, batch: int = 1) -> dict:
        """How the chunks share `threads`: kind "serial" (no Par level), "exact" (chunks == threads),
        "multiple" (a multiple of it), "balanced" (at least 4x it, not a multiple) or "imbalanced"; and the
        efficiency chunks / (threads x rounds), the share of the threads' time spent on work when every chunk
        costs the same (1.0: no core waits). `batch` independent instances (a batch matmul's, a grouped conv's
        groups) join the parallel loop (lowering): batch x the Par levels' chunks."""
        chunks = self.parallel_chunks * batch
        if not self.parallel_levels:
            return {"kind": "serial", "chunks": 1, "threads": threads, "efficiency": 1.0 / max(threads, 1)}
        rounds = -(-chunks // threads)
        return {"kind": balance_kind(chunks, threads), "chunks": chunks, "threads": threads,
                "efficiency": chunks / (threads * rounds)}

    def per_core_footprint(self, lanes: int, footprint_fn) -> dict:
        """Elements of each tensor one chunk touches: what one core's L1/L2 must hold (the L3 is shared)."""
        per = self.footprints(lanes, footprint_fn)
        return per[len(self.parallel_levels)] if len(per) > len(self.parallel_levels) else per[-1]

    @property
    def partial_dims(self) -> set:
        return {s.dim for s in self.specs if isinstance(s, P)}

    def _check_partial(self, sizes: dict, lanes: int) -> set:
        """Rules for P levels: only P levels along such a dimension, sizes decreasing inwards, each a
        multiple of the microkernel's size along it, which must divide the problem (whole microkernels)."""
        dims = self.partial_dims
        if not dims:
            return dims
        if self.lambda_spec() is not None:
            raise SchemeError(f"{self.text}: P levels and a Lambda cannot be combined")
        exts = self.extents(lanes)
        for d in dims:
            levels = [(i, s) for i, s in enumerate(self.specs) if s.dim == d and not isinstance(s, (U, V, Par))]
            if any(not isinstance(s, P) for _, s in levels):
                raise SchemeError(f"{self.text}: along {d}, P levels cannot be mixed with T or R levels")
            chunks = 1  # a Par level above splits d into equal chunks; the P levels tile one chunk
            for s in self.parallel_levels:
                chunks *= s.n if s.dim == d else 1
            if sizes[d] % chunks:
                raise SchemeError(f"{self.text}: {chunks} parallel chunks do not divide {d}={sizes[d]}")
            last = max(i for i, _ in levels)
            unit = exts[last + 1].get(d, 1) if last + 1 < len(self.specs) else 1
            if (sizes[d] // chunks) % unit:
                raise SchemeError(f"{self.text}: the microkernel's {unit} along {d} does not divide "
                                  f"{d}={sizes[d] // chunks} (per chunk)")
            prev = sizes[d] // chunks
            for _, s in levels:
                if s.size % unit or s.size > prev or s.size <= 0:
                    raise SchemeError(f"{self.text}: {s.text} must be a multiple of {unit} and at most {prev}")
                prev = s.size
        return dims

    def _final_extents(self, lanes):
        ext = self.extents(lanes)[0] if self.specs else {}
        return ext

    def footprints(self, lanes: int, footprint_fn) -> list:
        """Per specifier, the number of elements each tensor touches in the whole tile that loop iterates
        over (the largest over a Lambda's parts). `footprint_fn(extents) -> {tensor: elements}`."""
        lam = self.lambda_spec()
        unrolls = [a for _, a in lam.parts] if lam else [None]
        per = [self.extents(lanes, u) for u in unrolls]
        out = []
        for i in range(len(self.specs)):
            fps = [footprint_fn(p[i]) for p in per]
            out.append({t: max(f[t] for f in fps) for t in fps[0]})
        return out


def balance_kind(chunks: int, threads: int) -> str:
    """How `chunks` equal chunks share `threads`: exact (one each), multiple (a multiple of the thread count),
    balanced (at least 4 per thread, not a multiple) or imbalanced."""
    if chunks == threads:
        return "exact"
    if chunks > threads and chunks % threads == 0:
        return "multiple"
    return "balanced" if chunks >= 4 * threads else "imbalanced"


def _make(kind, args, text):
    try:
        if kind == "R":
            return R(args)
        if kind == "V":
            return V(args)
        if kind == "InPlace":
            if args not in IN_PLACE_BORDERS:
                raise ValueError
            return InPlace(args)
        if kind == "Lambda":
            dim, _, rest = args.partition(",")
            pairs = re.findall(r"\((\d+),(\d+)\)", rest)
            if not pairs or not re.fullmatch(r"\[(\(\d+,\d+\),?)+\]", rest):
                raise ValueError
            return Lambda(dim, tuple((int(r), int(a)) for r, a in pairs))
        n, dim = args.split(",")
        if kind == "P":
            return P(int(n), dim)
        if kind == "Pad":
            return Pad(int(n), dim)
        if kind == "Par":
            return Par(int(n), dim)
        return (T if kind == "T" else U)(n if n == LAMBDA else int(n), dim)
    except ValueError:
        raise SchemeError(f"cannot read {kind}({args}) in {text!r}") from None


def conv2d_footprint(stride=1, dilation=1):
    """Elements of input, weights and output touched by a conv2d tile with the given extents."""
    def fp(e):
        g = lambda d: e.get(d, 1)  # noqa: E731
        ih = (g("h") - 1) * stride + (g("r") - 1) * dilation + 1
        iw = (g("w") - 1) * stride + (g("s") - 1) * dilation + 1
        return {"input": ih * iw * g("c"), "weights": g("r") * g("s") * g("c") * g("k"),
                "output": g("h") * g("w") * g("k")}
    return fp


def matmul_footprint(e):
    g = lambda d: e.get(d, 1)  # noqa: E731
    return {"A": g("i") * g("k"), "B": g("k") * g("j"), "C": g("i") * g("j")}

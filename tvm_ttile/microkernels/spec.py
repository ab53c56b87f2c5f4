"""What a microkernel is, as plain data: its unroll factors, register needs, name and text form.

conv2d family (paper section 4.1):  [U(us,s), U(ur,r), U(uc,c), U(uw,w), U(uh,h), U(uk,k), V(k)]
matmul family:                      [U(ui,i), U(uj,j), V(j)]
depthwise family:                   [U(us,s), U(uw,w), U(uh,h), U(uk,k), V(k)]
each inside a reduction loop (c for conv2d, k for matmul, the window's rows r for depthwise) of `red`
iterations that the intrinsic owns, so the output tile stays in registers for the whole loop: loaded once,
stored once. Depthwise multiplies vectors of input channels by vectors of weights (no broadcast): each output
channel reads its own input channel.
"""
from __future__ import annotations

import dataclasses
import re

from ..errors import RegisterPressureError, ShapeError, TTileError, check_positive
from ..precision import PRECISIONS, TAGS, dot_for_isa, get as get_precision

# Family order (outermost first) and which dimensions play which role.
# "reduction": the dimension of the loop the intrinsic owns; "unrolled_reduction": a dimension unrolled inside
# each of its steps (conv2d's c, so red counts c elements, red // uc steps).
FAMILIES = {
    "conv2d": {"dims": ("s", "r", "c", "w", "h", "k"), "vector": "k", "rows": ("w", "h"), "weights": ("s", "r", "c", "k"),
               "reduction": "c", "unrolled_reduction": "c"},
    "matmul": {"dims": ("i", "j"), "vector": "j", "rows": ("i",), "weights": ("j",), "reduction": "k",
               "unrolled_reduction": None},
    "depthwise": {"dims": ("s", "w", "h", "k"), "vector": "k", "rows": ("w", "h"), "weights": ("s", "k"),
                  "reduction": "r", "unrolled_reduction": None},
}


# The families that have reduced-precision microkernels (int8: intrin_dot.py).
REDUCED_OPS = ("matmul", "conv2d")

# Inputs an fp32 depthwise microkernel may read narrower than its lanes, widened by the load: the dtype each holds.
# A quantized depthwise layer's u8 activations (operators.QDepthwise), read in place and converted in registers.
WIDENED_INPUTS = {"u8": "uint8"}


@dataclasses.dataclass(frozen=True)
class Microkernel:
    op: str
    isa: str
    lanes: int
    unroll: tuple  # ((dim, factor), ...) in family order
    red: int  # iterations of the reduction loop inside the intrinsic
    stride: int = 1
    dilation: int = 1
    precision: str = "fp32"  # precision.PRECISIONS: what it multiplies; `red` counts reduction elements in any
    dot: str = ""  # the instruction's tag (precision.DotProduct.tag), "" for its ISA's first
    input: str = ""  # WIDENED_INPUTS: an fp32 depthwise microkernel's input held narrower, widened as it is loaded

    def __post_init__(self):
        if self.op not in FAMILIES:
            raise TTileError(f"unknown microkernel op {self.op!r}; choose one of {sorted(FAMILIES)}")
        dims = FAMILIES[self.op]["dims"]
        if tuple(d for d, _ in self.unroll) != dims:
            raise TTileError(f"{self.op} microkernel needs unroll factors for {dims} in that order, got {self.unroll}")
        check_positive(red=self.red, lanes=self.lanes, stride=self.stride, dilation=self.dilation,
                       **{f"u{d}": f for d, f in self.unroll})
        if self.op == "conv2d" and self.red % self.get("c"):
            raise ShapeError(f"reduction length {self.red} is not a multiple of the c unroll {self.get('c')}")
        if self.precision != "fp32":
            group = get_precision(self.precision).group
            if self.op not in REDUCED_OPS:
                raise TTileError(f"{self.precision} microkernels exist for {', '.join(REDUCED_OPS)}, not {self.op}")
            if self.red % group:
                raise ShapeError(f"{self.precision} reduction length {self.red} is not a multiple of its group "
                                 f"{group}")
            if self.op == "conv2d" and self.get("c") != 1:  # (each step takes a whole group of channels)
                raise TTileError(f"{self.precision} conv2d microkernels unroll no c, got {self.get('c')}")
        if self.dot:
            dot_for_isa(self.precision, self.isa, self.dot)  # (refuses a tag the precision has not on this ISA)
        if self.input and (self.input not in WIDENED_INPUTS or (self.op, self.precision) != ("depthwise", "fp32")):
            raise TTileError(f"an input of {self.input!r} is read by fp32 depthwise microkernels only, as one of "
                             f"{sorted(WIDENED_INPUTS)}; got a {self.precision} {self.op} one")

    @property
    def instruction(self):
        """The precision.DotProduct of a reduced-precision microkernel."""
        return dot_for_isa(self.precision, self.isa, self.dot)

    @classmethod
    def make(cls, op, isa, lanes, red, stride=1, dilation=1, precision="fp32", dot="", input="", **factors):
        dims = FAMILIES.get(op, {}).get("dims")
        if dims is None:
            raise TTileError(f"unknown microkernel op {op!r}; choose one of {sorted(FAMILIES)}")
        unknown = set(factors) - set(dims)
        if unknown:
            raise TTileError(f"{op} microkernels have no dimension(s) {sorted(unknown)}; they unroll {dims}")
        return cls(op, isa, lanes, tuple((d, factors.get(d, 1)) for d in dims), red, stride, dilation, precision,
                   dot, input)

    def get(self, dim: str) -> int:
        return dict(self.unroll)[dim]

    @property
    def family(self) -> dict:
        return FAMILIES[self.op]

    @property
    def output_registers(self) -> int:
        n = 1
        for d in self.family["rows"] + (self.family["vector"],):
            n *= self.get(d)
        return n

    @property
    def weight_vectors(self) -> int:
        n = 1
        for d in self.family["weights"]:
            n *= self.get(d)
        return n

    @property
    def min_registers(self) -> int:
        """Accumulators + one weight vector + one broadcast: below this the kernel must spill."""
        return self.output_registers + 2

    @property
    def weights_resident(self) -> bool:
        """FMA order: hold the uk weight vectors of one step while sweeping the rows, when they fit;
        otherwise sweep k outermost so one weight vector is live (the order that avoided spills here)."""
        return self.output_registers + self.get(self.family["vector"]) + 1 <= self._regs

    @property
    def _regs(self) -> int:
        from ..cpu import get_isa

        return get_isa(self.isa).vector_registers

    def check_registers(self, vector_registers: int | None = None) -> None:
        regs = vector_registers or self._regs
        if self.min_registers > regs:
            raise RegisterPressureError(
                f"microkernel {self.text} needs {self.output_registers} accumulator registers + 2 "
                f"but {self.isa} has {regs} vector registers"
            )

    @property
    def tile(self) -> dict:
        """Iteration-space extent covered by one call, per operator dimension."""
        u = dict(self.unroll)
        v = self.family["vector"]
        ext = {d: f for d, f in u.items()}
        ext[v] = u[v] * self.lanes
        ext[self.family["reduction"]] = self.red
        return ext

    @property
    def flops(self) -> int:
        f = 2 * self.red * self.lanes
        for d, u in self.unroll:
            if d != self.family["unrolled_reduction"]:  # conv2d: c's unroll is part of `red`
                f *= u
        return f

    @property
    def scheme(self) -> str:
        v = self.family["vector"]
        body = ",".join(f"U({f},{d})" for d, f in self.unroll)
        return f"[{body},V({v})]"

    @property
    def text(self) -> str:
        """Canonical text: parses back with `Microkernel.parse`."""
        extra = "" if (self.stride, self.dilation) == (1, 1) else f" stride={self.stride} dilation={self.dilation}"
        kind = "" if self.precision == "fp32" else f":{self.precision}" + (f".{self.dot}" if self.dot else "")
        kind += f"<{self.input}" if self.input else ""
        return f"{self.op}/{self.isa}x{self.lanes}{kind} {self.scheme} red={self.red}{extra}"

    @property
    def name(self) -> str:
        """Deterministic TensorIntrin name: same shape and ISA -> same name."""
        body = "_".join(f"{d}{f}" for d, f in self.unroll)
        extra = "" if (self.stride, self.dilation) == (1, 1) else f"_st{self.stride}_dl{self.dilation}"
        kind = "" if self.precision == "fp32" else f"{self.precision}_" + (f"{self.dot}_" if self.dot else "")
        kind += f"{self.input}in_" if self.input else ""
        return f"ttile_{self.op}_{self.isa}x{self.lanes}_{kind}{body}_red{self.red}{extra}"

    _TEXT = re.compile(r"^(\w+)/(\w+)x(\d+)(?::(\w+)(?:\.(\w+))?)?(?:<(\w+))? \[(.*)\] red=(\d+)"
                       r"(?: stride=(\d+) dilation=(\d+))?$")

    @classmethod
    def parse(cls, text: str) -> "Microkernel":
        m = cls._TEXT.match(text.strip())
        if not m:
            raise TTileError(f"not a microkernel text: {text!r}")
        op, isa, lanes, precision, dot, widened, body, red, st, dl = m.groups()
        factors = {}
        for item in re.findall(r"U\((\d+),(\w)\)", body):
            factors[item[1]] = int(item[0])
        mk = cls.make(op, isa, int(lanes), int(red), int(st or 1), int(dl or 1), precision or "fp32", dot or "",
                      widened or "", **factors)
        if mk.text != text.strip():
            raise TTileError(f"not a canonical microkernel text: {text!r} (canonical: {mk.text!r})")
        return mk

    _NAME = re.compile(r"^ttile_(\w+?)_(\w+)x(\d+)_(?:(" + "|".join(p for p in PRECISIONS if p != "fp32")
                       + r")_)?(?:(" + "|".join(TAGS) + r")_)?(?:(" + "|".join(WIDENED_INPUTS)
                       + r")in_)?((?:[a-z]\d+_)+)red(\d+)(?:_st(\d+)_dl(\d+))?$")

    @classmethod
    def from_name(cls, name: str) -> "Microkernel":
        """Inverse of `name`, so intrinsics found in a database can be registered again."""
        m = cls._NAME.match(name)
        if not m:
            raise TTileError(f"not a tvm_ttile microkernel intrinsic name: {name!r}")
        op, isa, lanes, precision, dot, widened, body, red, st, dl = m.groups()
        factors = {item[0]: int(item[1:]) for item in body.strip("_").split("_")}
        mk = cls.make(op, isa, int(lanes), int(red), int(st or 1), int(dl or 1), precision or "fp32", dot or "",
                      widened or "", **factors)
        if mk.name != name:
            raise TTileError(f"not a canonical microkernel intrinsic name: {name!r}")
        return mk

    def with_red(self, red: int) -> "Microkernel":
        return dataclasses.replace(self, red=red)

"""Precisions and the dot-product instructions that compute them, per CPU.

A precision says what a microkernel multiplies (the activations', weights' and accumulators' types) and how many
consecutive reduction elements one instruction folds into each accumulator lane (`group`: 1 for fp32's FMA, 4 for
int8's `vpdpbusd`). A `DotProduct` is one instruction that computes it, with the CPU flags it needs and the LLVM
attribute that lets TVM emit it. `dot_product(precision, cpu)` is the one place that says which a CPU uses; a CPU
with none is refused in one line (`require`), never run in another precision.
"""
from __future__ import annotations

import dataclasses

from .errors import UnsupportedISAError


@dataclasses.dataclass(frozen=True)
class DotProduct:
    name: str
    isa: str  # the cpu.ISAS entry whose registers it uses
    lanes: int  # accumulator lanes of one vector register
    flags: tuple  # /proc/cpuinfo flags it needs, all of them
    mattr: tuple = ()  # LLVM attributes the target must add to the ISA's
    llvm_intrinsic: str = ""

    def runs_on(self, cpu) -> bool:
        return cpu.isa.name == self.isa and all(f in cpu.extensions for f in self.flags)

    def step(self, acc, group, weights):
        """One instruction as a TIR expression: `acc` (the accumulator vector) plus, lane by lane, the dot product
        of `group` (a 32-bit scalar holding one row's consecutive reduction elements, broadcast to every lane) with
        that lane's elements of `weights` (a vector of lanes x group elements). The operands go to LLVM as the
        byte vectors its signature wants (TVM 0.27's own VNNI intrinsic passes int32 vectors, which LLVM's
        verifier refuses: ENVIRONMENT.md)."""
        from tvm import tirx as tir

        if not self.llvm_intrinsic:
            raise UnsupportedISAError(f"{self.name} has no dot-product step: it is fp32's FMA")
        broadcast = tir.reinterpret(f"uint8x{4 * self.lanes}", tir.Broadcast(group, self.lanes))
        return tir.call_llvm_pure_intrin(f"int32x{self.lanes}", self.llvm_intrinsic, acc, broadcast, weights)


@dataclasses.dataclass(frozen=True)
class Precision:
    name: str
    activation: str  # dtype of the activations a microkernel reads
    weight: str
    accumulator: str
    group: int  # consecutive reduction elements one instruction folds into an accumulator lane
    dots: tuple  # DotProducts that compute it, the preferred first
    # Whether lowering packs the weights (fp32's blocked layout, packing.pack_weights); a grouped precision's
    # weights come packed in its instruction's layout by the operator instead.
    packs_weights: bool = True
    # Whether a scheme may pad a dimension (Pad, through TVM's pad_einsum: it refuses int8's widening product)
    pads: bool = True

    @property
    def unit(self) -> str:
        """What its rates are counted in: GFLOPS, or GOPS for integers (a multiply and an add each one op)."""
        return "GOPS" if self.exact else "GFLOPS"

    @property
    def exact(self) -> bool:
        """Integer accumulation: a result must equal its reference, not approach it."""
        return self.accumulator.startswith("int")

    @property
    def ops_per_lane(self) -> int:
        """Operations (a multiply and an add each count one) per accumulator lane per instruction."""
        return 2 * self.group


FMA = {isa: DotProduct(f"fma_{isa}", isa, lanes, ()) for isa, lanes in (("avx512", 16), ("avx2", 8), ("neon", 4))}
# -prefer-256-bit: LLVM then vectorizes the requantize epilogue fused after the microkernel on zmm too; on ymm it
# cost 13% of a ResNet-18 3x3 layer, on zmm under 1% (docs/decisions.md)
VNNI_512 = DotProduct("avx512_vnni", "avx512", 16, ("avx512_vnni",), ("+avx512vnni", "-prefer-256-bit"),
                      "llvm.x86.avx512.vpdpbusd.512")
# AVX-VNNI: the same instruction on 256-bit registers in a VEX encoding (Alder Lake and later; this LLVM names it
# as the AVX-512VL form)
VNNI_256 = DotProduct("avx_vnni", "avx2", 8, ("avx_vnni",), ("+avxvnni",), "llvm.x86.avx512.vpdpbusd.256")

PRECISIONS = {
    "fp32": Precision("fp32", "float32", "float32", "float32", 1, tuple(FMA.values())),
    # u8 activations x s8 weights -> s32, as ONNX Runtime's and NNCF's QDQ models hold them
    "int8": Precision("int8", "uint8", "int8", "int32", 4, (VNNI_512, VNNI_256), packs_weights=False, pads=False),
}


def get(name: str) -> Precision:
    try:
        return PRECISIONS[name]
    except KeyError:
        raise UnsupportedISAError(f"precision {name!r} is not supported; choose from {', '.join(PRECISIONS)}") \
            from None


def dot_product(precision: str, cpu) -> DotProduct | None:
    """The instruction `cpu` computes `precision` with (None: it has none)."""
    return next((d for d in get(precision).dots if d.runs_on(cpu)), None)


def dot_for_isa(precision: str, isa: str) -> DotProduct:
    """The instruction a `precision` microkernel of `isa` is written with (one per ISA)."""
    found = [d for d in get(precision).dots if d.isa == isa]
    if not found:
        raise UnsupportedISAError(f"no {precision} microkernels for {isa}")
    return found[0]


def target_for(cpu, threads: int, precision: str):
    """The TVM target of `cpu` and `threads` with what `precision`'s instruction needs (refused in one line when
    the CPU lacks one): what code of that precision is built and timed for."""
    return cpu.target(threads, require(precision, cpu).mattr)


def require(precision: str, cpu) -> DotProduct:
    """dot_product, or a one-line refusal naming what the CPU lacks."""
    dot = dot_product(precision, cpu)
    if dot is None:
        needs = " or ".join("+".join(d.flags) or d.isa for d in get(precision).dots)
        raise UnsupportedISAError(f"{cpu.name} ({cpu.isa.name}) cannot compute {precision}: it needs {needs}")
    return dot

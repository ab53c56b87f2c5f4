"""Precisions and the dot-product instructions that compute them, per CPU.

A precision says what a microkernel multiplies (the activations', weights' and accumulators' types) and how many
consecutive reduction elements one instruction folds into each accumulator lane (`group`: 1 for fp32's FMA, 4 for
int8's `vpdpbusd`, 2 for bf16's `vdpbf16ps`). A `DotProduct` is one instruction that computes it, with the CPU flags
it needs and the LLVM attribute that lets TVM emit it. bf16 values are held as their 16 bits in uint16 tensors, so
that TVM's bf16 legalization (which turns bfloat16 vectors into float32 before LLVM sees them: ENVIRONMENT.md) never
touches them; `widen` is their exact fp32 value. `dot_product(precision, cpu)` is the one place that says which a CPU uses; a CPU
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
    # For an intrinsic whose operand types TIR cannot carry to LLVM (bf16 vectors): the accumulator's and the
    # operands' LLVM types; the step then calls a small LLVM IR function (`llvm_ir`) that bitcasts and calls it.
    wrapped: tuple = ()
    # A microkernel's name for it when it is not its ISA's first for the precision (microkernels.spec): "" for
    # the first, so that the names of the microkernels measured before a second existed stay as they were
    tag: str = ""
    # The largest |weight| whose products it sums exactly (128: every s8 value)
    weight_limit: int = 128

    def runs_on(self, cpu) -> bool:
        have = set(cpu.extensions) | set(cpu.flags)
        return cpu.isa.name == self.isa and all(f in have for f in self.flags)

    @property
    def reduced(self) -> bool:
        """A dot-product instruction (not fp32's FMA)."""
        return bool(self.llvm_intrinsic)

    @property
    def wrapper(self) -> str:
        return "tvm_ttile_" + self.name if self.wrapped else ""

    def llvm_ir(self) -> str:
        """The LLVM IR module of the wrapper ("" for an intrinsic called directly). TVM links it into the
        module that imports it (`imports`) and inlines it, so the code is the bare instruction."""
        if not self.wrapped:
            return ""
        acc, operand = self.wrapped
        ints = f"<{self.lanes} x i32>"
        return (f"define {acc} @{self.wrapper}({acc} %c, {ints} %a, {ints} %b) {{\n"
                f"  %x = bitcast {ints} %a to {operand}\n  %y = bitcast {ints} %b to {operand}\n"
                f"  %r = call {acc} @{self.llvm_intrinsic}({acc} %c, {operand} %x, {operand} %y)\n"
                f"  ret {acc} %r\n}}\ndeclare {acc} @{self.llvm_intrinsic}({acc}, {operand}, {operand})\n")

    def imports(self):
        """A TIR-builder frame to emit the steps of this instruction in: it imports the wrapper's LLVM IR
        (`pragma_import_llvm`, which TVM's LLVM codegen links and force-inlines); a no-op frame otherwise."""
        import contextlib

        from tvm.tirx.script import builder as T

        return T.attr(0, "pragma_import_llvm", self.llvm_ir()) if self.wrapped else contextlib.nullcontext()

    def step(self, acc, group, weights):
        """One instruction as a TIR expression: `acc` (the accumulator vector) plus, lane by lane, the dot product
        of `group` (a 32-bit scalar holding one row's consecutive reduction elements, broadcast to every lane) with
        that lane's elements of `weights` (a vector of lanes x group elements). The operands go to LLVM as the
        vectors its signature wants: bytes for VNNI (TVM 0.27's own VNNI intrinsic passes int32 vectors, which
        LLVM's verifier refuses: ENVIRONMENT.md), bf16 through the wrapper (emit it inside `imports()`)."""
        from tvm import tirx as tir

        if not self.reduced:
            raise UnsupportedISAError(f"{self.name} has no dot-product step: it is fp32's FMA")
        if str(group.ty.dtype) != "int32":
            group = tir.reinterpret("int32", group)
        if self.wrapped:
            ints = f"int32x{self.lanes}"
            return tir.call_pure_extern(str(acc.ty.dtype), self.wrapper, acc, tir.Broadcast(group, self.lanes),
                                        tir.reinterpret(ints, weights))
        broadcast = tir.reinterpret(f"uint8x{4 * self.lanes}", tir.Broadcast(group, self.lanes))
        return tir.call_llvm_pure_intrin(f"int32x{self.lanes}", self.llvm_intrinsic, acc, broadcast, weights)

    def peak_operand(self, weights, acc):
        """The weights a peak-measuring chain multiplies at each step: the loop's own for an instruction that
        accumulates (it cannot be hoisted out of the loop)."""
        return weights

    def weights_fit(self, weights) -> bool:
        """Whether every value of `weights` (a numpy array) is one the instruction multiplies exactly."""
        return weights.size == 0 or int(abs(weights.astype("int64")).max()) <= self.weight_limit


@dataclasses.dataclass(frozen=True)
class PairedDotProduct(DotProduct):
    """int8 without VNNI: `vpmaddubsw` multiplies u8 by s8 and adds pairs into s16, `vpmaddwd` by ones adds the
    pairs of those into s32 lanes, and an add accumulates them: three instructions for VNNI's one. The s16 pair
    sum saturates beyond 32767: 255 x (|w0| + |w1|) stays inside only when |w| <= 64, so a layer's weights must
    (`weight_limit`; ONNX Runtime's quantizer writes such weights with reduce_range=True; oneDNN halves the
    weights' scale on these CPUs for the same reason)."""

    widen_intrinsic: str = ""  # the pairs' instruction (vpmaddwd)

    def peak_operand(self, weights, acc):
        """The accumulator's own bits: the two multiplies do not read it, and with loop-invariant operands LLVM
        hoists them out of a peak's loop, which then times the adds alone (twice VNNI's rate, measured)."""
        from tvm import tirx as tir

        return tir.reinterpret(str(weights.ty.dtype), acc)

    def step(self, acc, group, weights):
        from tvm import tirx as tir

        if str(group.ty.dtype) != "int32":
            group = tir.reinterpret("int32", group)
        broadcast = tir.reinterpret(f"uint8x{4 * self.lanes}", tir.Broadcast(group, self.lanes))
        pairs = tir.call_llvm_pure_intrin(f"int16x{2 * self.lanes}", self.llvm_intrinsic, broadcast, weights)
        ones = tir.Broadcast(tir.const(1, "int16"), 2 * self.lanes)
        return acc + tir.call_llvm_pure_intrin(f"int32x{self.lanes}", self.widen_intrinsic, pairs, ones)


@dataclasses.dataclass(frozen=True)
class Precision:
    name: str
    activation: str  # dtype of the activations a microkernel reads
    weight: str
    accumulator: str
    group: int  # consecutive reduction elements one instruction folds into an accumulator lane
    dots: tuple  # DotProducts that compute it, the preferred first
    # Whether a scheme may pad a dimension (Pad, through TVM's pad_einsum: it refuses int8's widening product)
    pads: bool = True
    # How far a whole network built in it may be from another build of it (tuned against untuned), over the
    # output's scale: fp32's summation orders; bf16's two bf16 steps, since an fp32 activation a summation order
    # moves across a rounding boundary enters the next layer one bf16 step (2^-8) apart
    network_tolerance: float = 1e-3

    def widen(self, value):
        """A TIR value of this precision's storage as the accumulator's type, exactly: what the microkernels'
        instruction multiplies (bf16 bits: the fp32 with those upper 16 bits)."""
        from tvm import tirx as tir

        if self.activation == "uint16" and self.accumulator == "float32":
            return tir.reinterpret("float32", tir.shift_left(value.astype("uint32"), tir.const(16, "uint32")))
        return value.astype(self.accumulator)

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
# Without VNNI (Skylake-X, Zen 3, Haswell to Comet Lake): weights within +-64
PMADD_512 = PairedDotProduct("avx512_pmaddubsw", "avx512", 16, ("avx512bw",), ("-prefer-256-bit",),
                             "llvm.x86.avx512.pmaddubs.w.512", tag="pmadd", weight_limit=64,
                             widen_intrinsic="llvm.x86.avx512.pmaddw.d.512")
PMADD_256 = PairedDotProduct("avx2_pmaddubsw", "avx2", 8, ("avx2",), (), "llvm.x86.avx2.pmadd.ub.sw", tag="pmadd",
                             weight_limit=64, widen_intrinsic="llvm.x86.avx2.pmadd.wd")

# vdpbf16ps: two bf16 products per fp32 lane, accumulated in fp32 (Zen 4, Zen 5, Cooper Lake, Sapphire Rapids); the
# 256-bit form on ymm registers needs AVX512VL too
BF16_512 = DotProduct("avx512_bf16", "avx512", 16, ("avx512_bf16",), ("+avx512bf16", "-prefer-256-bit"),
                      "llvm.x86.avx512bf16.dpbf16ps.512", ("<16 x float>", "<32 x bfloat>"))
BF16_256 = DotProduct("avx512_bf16_256", "avx2", 8, ("avx512_bf16", "avx512vl"), ("+avx512bf16", "+avx512vl"),
                      "llvm.x86.avx512bf16.dpbf16ps.256", ("<8 x float>", "<16 x bfloat>"))

PRECISIONS = {
    "fp32": Precision("fp32", "float32", "float32", "float32", 1, tuple(FMA.values())),
    # u8 activations x s8 weights -> s32, as ONNX Runtime's and NNCF's QDQ models hold them
    "int8": Precision("int8", "uint8", "int8", "int32", 4, (VNNI_512, VNNI_256, PMADD_512, PMADD_256),
                      pads=False),
    # bf16 activations and weights (their bits in uint16) -> fp32
    "bf16": Precision("bf16", "uint16", "uint16", "float32", 2, (BF16_512, BF16_256), pads=False,
                      network_tolerance=2 ** -7),
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


def dot_for_isa(precision: str, isa: str, tag: str = "") -> DotProduct:
    """The instruction a `precision` microkernel of `isa` is written with: the ISA's first, or the one of that
    `tag` (a microkernel's name for it, DotProduct.tag)."""
    found = [d for d in get(precision).dots if d.isa == isa]
    if not found:
        raise UnsupportedISAError(f"no {precision} microkernels for {isa}")
    if not tag:
        return found[0]
    tagged = [d for d in found if d.tag == tag]
    if not tagged:
        raise UnsupportedISAError(f"no {precision} instruction tagged {tag!r} for {isa}")
    return tagged[0]


def tag_for(precision: str, cpu) -> str:
    """The tag of the instruction `cpu` computes `precision` with, as its microkernels name it ("" for fp32 and
    for each ISA's first instruction)."""
    if precision == "fp32":
        return ""
    dot = require(precision, cpu)
    return "" if dot is dot_for_isa(precision, dot.isa) else dot.tag


TAGS = tuple(sorted({d.tag for p in PRECISIONS.values() for d in p.dots if d.tag}))


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

"""The blocked weight layout lowering packs constant weights into (packing.pack_weights), as the microkernels
read it: the vector dimension v (conv2d's k, matmul's j) becomes (v // block, ..., v % block), block = the
microkernel's vector extent, so that a microkernel streams its weights contiguously along the reduction instead of
reading rows strided by the vector dimension's length, which share L1 sets when that stride is a multiple of 4 KiB.
A dot-product precision keeps its group of g reduction elements innermost, after the block: (v // block, ...,
v % block, g)."""
from __future__ import annotations

import tvm.tirx as tir
from tvm.sym.analyzer import Analyzer


def packed_shape(shape, block: int, grouped: bool = False) -> tuple:
    """The packed layout of an unpacked weight shape (the vector dimension last, or before the group)."""
    if grouped:
        return (shape[-2] // block, *shape[:-2], block, shape[-1])
    return (shape[-1] // block, *shape[:-1], block)


class PackedWeights:
    """A weight tile in the packed layout, indexed with the unpacked indices."""

    def __init__(self, buf, block: int, grouped: bool = False):
        self.buf, self.block, self.grouped = buf, block, grouped

    def _at(self, idx):
        idx, group = (idx[:-1], idx[-1:]) if self.grouped else (idx, [])
        analyzer, v = Analyzer(), tir.const(idx[-1], "int32") if isinstance(idx[-1], int) else idx[-1]
        return [analyzer.simplify(tir.floordiv(v, self.block)), *idx[:-1],
                analyzer.simplify(tir.floormod(v, self.block)), *group]

    def __getitem__(self, idx):
        return self.buf[tuple(self._at(list(idx)))]

    def vload(self, idx, dtype):
        return self.buf.vload(self._at(list(idx)), dtype)


def weights(B, packed: int, grouped: bool = False):
    """`B` as the microkernel code indexes it: through the packed layout when `packed` (a block size) is set."""
    return PackedWeights(B, packed, grouped) if packed else B

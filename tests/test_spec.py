"""Plain-Python core: microkernel text, names, register checks, families, classes, coverage."""
import pytest

from tvm_ttile.cpu import get_isa
from tvm_ttile.errors import RegisterPressureError, ShapeError, TTileError, UnsupportedISAError
from tvm_ttile.microkernels import family
from tvm_ttile.microkernels.catalog import classes_of, coverage, decompose
from tvm_ttile.microkernels.spec import Microkernel

KERNELS = [
    Microkernel.make("conv2d", "avx2", 8, 256, h=1, w=3, k=4),
    Microkernel.make("conv2d", "avx512", 16, 64, h=2, w=7, k=2, r=3, s=3, c=2, stride=2, dilation=2),
    Microkernel.make("matmul", "neon", 4, 128, i=6, j=4),
    Microkernel.make("depthwise", "avx512", 16, 3, s=3, w=4, k=1, stride=2, input="u8"),  # reads u8, widened
]


@pytest.mark.parametrize("mk", KERNELS, ids=lambda m: m.name)
def test_text_round_trip(mk):
    assert Microkernel.parse(mk.text) == mk
    assert Microkernel.parse(mk.text).name == mk.name
    assert Microkernel.from_name(mk.name) == mk


def test_a_widened_input_is_an_fp32_depthwise_microkernels_only():
    mk = Microkernel.make("depthwise", "avx512", 16, 3, s=3, w=4, input="u8")
    assert mk.text == "depthwise/avx512x16<u8 [U(3,s),U(4,w),U(1,h),U(1,k),V(k)] red=3"
    assert mk.name != Microkernel.make("depthwise", "avx512", 16, 3, s=3, w=4).name
    with pytest.raises(TTileError, match="read by fp32 depthwise microkernels only"):
        Microkernel.make("conv2d", "avx512", 16, 64, h=2, k=2, input="u8")
    with pytest.raises(TTileError, match="read by fp32 depthwise microkernels only"):
        Microkernel.make("depthwise", "avx512", 16, 3, s=3, input="s16")


def test_names_are_deterministic_and_distinct():
    a = Microkernel.make("conv2d", "avx2", 8, 256, h=1, w=3, k=4)
    b = Microkernel.make("conv2d", "avx2", 8, 256, h=1, w=3, k=4)
    c = Microkernel.make("conv2d", "avx2", 8, 256, h=3, w=1, k=4)
    assert a.name == b.name and hash(a) == hash(b)
    assert a.name != c.name
    assert a.name != a.with_red(128).name


def test_text_form_reads_like_the_paper():
    mk = Microkernel.make("conv2d", "avx512", 16, 256, h=12, k=2)
    assert mk.scheme == "[U(1,s),U(1,r),U(1,c),U(1,w),U(12,h),U(2,k),V(k)]"


@pytest.mark.parametrize("bad", ["", "conv2d/avx2x8 [U(1,i)] red=4", "conv2d/avx2x8 [U(1,s)] red=x",
                                 "matmul/avx2x8 [U(2,j),U(1,i),V(j)] red=8"])
def test_parse_rejects_bad_text(bad):
    with pytest.raises(TTileError):
        Microkernel.parse(bad)


def test_bad_sizes_and_dims_are_named():
    with pytest.raises(ShapeError, match="uh=0"):
        Microkernel.make("conv2d", "avx2", 8, 64, h=0)
    with pytest.raises(ShapeError, match="red"):
        Microkernel.make("matmul", "avx2", 8, -1)
    with pytest.raises(TTileError, match="no dimension"):
        Microkernel.make("matmul", "avx2", 8, 64, h=2)
    with pytest.raises(TTileError, match="unknown microkernel op"):
        Microkernel.make("pool", "avx2", 8, 64)
    with pytest.raises(ShapeError, match="multiple of the c unroll"):
        Microkernel.make("conv2d", "avx2", 8, 63, c=2)


def test_register_file_limits():
    too_big = Microkernel.make("matmul", "avx2", 8, 64, i=5, j=3)  # 15 accumulators + 2 > 16
    with pytest.raises(RegisterPressureError, match="16 vector registers"):
        too_big.check_registers()
    Microkernel.make("matmul", "avx512", 16, 64, i=5, j=3).check_registers()  # fits 32


def test_unknown_isa():
    with pytest.raises(UnsupportedISAError, match="sse"):
        get_isa("sse")


@pytest.mark.parametrize("isa_name", ["avx2", "avx512", "neon"])
def test_family_bounds_follow_the_register_file(isa_name):
    isa = get_isa(isa_name)
    b = family.bounds(isa)
    assert b["out_max"] <= isa.vector_registers - 2
    cands = family.conv2d_candidates(isa, 64)
    assert len({m.name for m in cands}) == len(cands)
    for mk in cands + family.matmul_candidates(isa, 64):
        mk.check_registers()
    main = [m for m in cands if m.output_registers >= b["out_min"]]
    assert all(m.output_registers <= b["out_max"] for m in main)
    assert any(m.get("r") == 3 for m in cands)  # r/s unrolled kernels for small-C layers


def test_paper_avx512_bounds_are_recovered():
    assert family.bounds(get_isa("avx512")) == {"out_min": 14, "out_max": 28, "footprint_max": 36, "k_max": 4}


def test_decompose_examples_from_the_paper():
    a, h1, b, h2 = decompose(34, [11, 12])
    assert a * h1 + b * h2 == 34 and {h1, h2} == {11, 12}
    a, h1, b, h2 = decompose(17, range(8, 16))
    assert a * h1 + b * h2 == 17
    assert decompose(7, [4, 5]) is None
    assert decompose(24, [12, 5]) == (2, 12, 0, 12)


def test_classes_and_coverage():
    kept = [Microkernel.make("matmul", "avx2", 8, 64, i=i, j=j) for i, j in [(4, 2), (5, 2), (6, 2), (7, 2), (12, 1)]]
    cls = classes_of(kept)
    assert cls == [{"dim": "i", "fixed": {"j": 2}, "sizes": [4, 5, 6, 7], "members": [m.text for m in kept[:4]]}]
    cov = coverage(cls, 100)["i"]
    assert cov["all_sizes_from"] == 4 and cov["uncovered_at_or_above_8"] == []
    assert coverage(classes_of(kept[:2]), 40)["i"]["all_sizes_from"] == 12

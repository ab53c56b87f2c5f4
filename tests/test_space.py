"""The online space (plain Python): admissible microkernels, combinations, reuse loops, Problem sizes."""
import pytest

from kernels import conv_kept, matmul_kept
from tvm_ttile.errors import TTileError
from tvm_ttile.microkernels.spec import Microkernel
from tvm_ttile.operators import Conv2d, Matmul, get_layer
from tvm_ttile.scheme import LAMBDA
from tvm_ttile.space import Problem, Space, admissible, microkernel_of, scheme_of


def test_problem_sizes_and_vector_padding():
    p = Problem.from_operator(get_layer("Yolo9000-23"), 16, "avx512")
    assert p.size["k"] == 28272 and p.vector_pad == 3 and p.size["h"] == 17
    p = Problem.from_operator(Matmul(M=1, N=1000, K=512), 16, "avx512")
    assert p.size == {"i": 1, "j": 1008, "k": 512} and p.vector_pad == 8
    p = Problem.from_operator(get_layer("ResNet18-4"), 8, "avx2")
    assert (p.stride, p.size["h"]) == (2, 28)


def test_paper_worked_example_h34():
    """Yolo9000-12 (H = W = 34): 34 = 2 x 11 + 1 x 12 is admissible from a class holding 11 and 12."""
    kept = [Microkernel.make("conv2d", "avx512", 16, 256, h=h, k=2) for h in range(8, 15)]
    p = Problem.from_operator(get_layer("Yolo9000-12"), 16, "avx512")
    choices = admissible(p, kept)
    assert not [c for c in choices if not c.combined]  # no h in 8..14 divides 34
    combos = {(c.dim, c.parts) for c in choices}
    assert ("h", ((2, 11), (1, 12))) in combos
    for c in choices:
        assert sum(a * u for a, u in c.parts) in (17, 34)  # periods divide 34
        assert c.mk.stride == 1


def test_combination_for_prime_17():
    kept = [Microkernel.make("conv2d", "avx2", 8, 64, h=h, k=1) for h in (7, 8, 9, 10)]
    p = Problem.from_operator(get_layer("Yolo9000-18"), 8, "avx2")
    parts = {c.parts for c in admissible(p, kept) if c.dim == "h"}
    assert ((1, 8), (1, 9)) in parts and ((1, 7), (1, 10)) in parts


def test_no_admissible_microkernel_is_a_clear_error():
    kept = [Microkernel.make("conv2d", "avx2", 8, 64, h=4, w=1, k=4)]  # k = 32 does not divide 8
    p = Problem.from_operator(Conv2d(K=8, C=8, H=8, W=8, R=1, S=1), 8, "avx2")
    with pytest.raises(TTileError, match="divides"):
        Space(p, kept)


@pytest.mark.parametrize("op", [Conv2d(K=32, C=12, H=17, W=10, R=3, S=3, pad=1),
                                Matmul(M=34, N=40, K=24), Matmul(M=7, N=1000, K=9)])
def test_every_choice_completes_to_a_valid_scheme(op):
    from tvm_ttile.samplers import make_sampler

    kept = (conv_kept if isinstance(op, Conv2d) else matmul_kept)("avx2", 8)
    p = Problem.from_operator(op, 8, "avx2")
    space = Space(p, kept)
    sampler = make_sampler("ttile", seed=3)
    for choice in space.choices:
        reuse = sampler.draw_reuse(space, choice)
        scheme = scheme_of(p, choice, reuse, sampler.large_factor_levels(space, choice, reuse))
        scheme.validate(p.size, p.lanes, p.reuse)
        mk = microkernel_of(p, scheme)
        assert mk.red == reuse * (mk.get("c") if p.op == "conv2d" else 1)


def test_levels_right_above_the_reuse_loop_join_it():
    from tvm_ttile.space import fold_into_reuse

    levels = [("i", 2), ("k", 4), ("i", LAMBDA), ("j", 8), ("j", 2), ("k", 16), ("k", 2)]
    assert fold_into_reuse(levels, "k", 1) == (levels[:5], 32)  # other runs stay as drawn
    # A Lambda or a partial tile is a level of its own: nothing folds across or into it.
    assert fold_into_reuse([("k", 2), ("k", ("P", 3))], "k", 4) == ([("k", 2), ("k", ("P", 3))], 4)
    assert fold_into_reuse([("k", 2), ("j", 2)], "k", 4) == ([("k", 2), ("j", 2)], 4)


def test_drawn_schemes_have_no_reduction_tile_right_above_the_reuse_loop():
    from tvm_ttile.samplers import make_sampler

    p = Problem.from_operator(Matmul(M=2048, N=4096, K=32), 16, "avx512")
    space = Space(p, matmul_kept("avx512", 16))
    for scheme in make_sampler("ttile", seed=0, fold_reuse=True).sample_many(space, 40):
        reuse_at = next(i for i, s in enumerate(scheme.specs) if type(s).__name__ in ("U", "V")) - 1
        above = scheme.specs[reuse_at - 1] if reuse_at else None
        assert not (type(above).__name__ == "T" and above.dim == "k"), scheme.text


def test_small_c_prefers_r_s_unrolled_microkernels():
    kept = conv_kept("avx2", 8)
    p = Problem.from_operator(Conv2d(K=16, C=3, H=12, W=12, R=3, S=3, pad=1), 8, "avx2")
    sp = Space(p, kept)
    assert sp.choices and all(c.mk.get("r") == 3 for c in sp.choices) and sp.notes
    p7 = Problem.from_operator(Conv2d(K=16, C=3, H=12, W=12, R=7, S=7, pad=3), 8, "avx2")
    sp7 = Space(p7, kept)
    assert any(c.mk.get("r") == 1 for c in sp7.choices)  # no 3x3 fits 7x7: keep the others
    assert not sp.reduction_innermost


@pytest.mark.parametrize("sampler", ["ttile", "single", "levels", "nondivisible"])
def test_small_c_with_no_window_microkernel_draws_the_reduction_innermost(sampler):
    """A 7x7 window over 3 channels (ResNet's stem): no microkernel unrolls the window, so every scheme any sampler
    draws puts the window's and the channels' tiles right above the microkernel; other problems draw as before."""
    from test_samplers import _reduction_inner
    from tvm_ttile.samplers import make_sampler

    kept = conv_kept("avx2", 8)
    stem = Space(Problem.from_operator(Conv2d(K=16, C=3, H=28, W=28, R=7, S=7, stride=2, pad=3), 8, "avx2"), kept)
    assert stem.reduction_innermost and any("reduction's tiles innermost" in n for n in stem.notes)
    drawn = make_sampler(sampler, seed=2).sample_many(stem, 30)
    assert all(_reduction_inner(s, stem.problem) for s in drawn)
    assert not all(_reduction_inner(s, stem.problem) for s in make_sampler("ttile", seed=2).sample_many(
        Space(Problem.from_operator(Conv2d(K=16, C=8, H=28, W=28, R=7, S=7, stride=2, pad=3), 8, "avx2"), kept), 30))
    for c, r in ((3, 1), (16, 7)):  # a 1x1 window and a long reduction: nothing to ask
        assert not Space(Problem.from_operator(Conv2d(K=16, C=c, H=28, W=28, R=r, S=r), 8, "avx2"),
                         kept).reduction_innermost


def test_awkward_dimensions_get_pad_targets():
    from tvm_ttile.space import MAX_PAD_GROWTH, pad_targets

    kept = matmul_kept("avx512", 16)
    p = Problem.from_operator(Matmul(M=1009, N=1009, K=1009), 16, "avx512")  # j: 64 vectors, friendly
    targets = pad_targets(p, kept)
    assert set(targets) == {"i", "k"} and 1012 in targets["i"] and 1024 in targets["k"]
    assert all(1009 < t <= 1009 * (1 + MAX_PAD_GROWTH) for ts in targets.values() for t in ts)
    assert pad_targets(Problem.from_operator(Matmul(M=1024, N=1024, K=1024), 16, "avx512"), kept) == {}
    thin = pad_targets(Problem.from_operator(Matmul(M=1, N=61 * 16, K=97), 16, "avx512"), kept)
    assert set(thin) == {"j"} and all(t % 16 == 0 for t in thin["j"])  # 61 vectors; one row, K = 97 not padded
    conv = Problem.from_operator(Conv2d(K=32, C=13, H=17, W=17, R=3, S=3), 16, "avx512")
    assert pad_targets(conv, conv_kept("avx512", 16)) == {}
    sp = Space(p, kept)
    padded = sp.padded({"i": 1012, "k": 1024})
    assert padded.problem.size == {"i": 1012, "j": 1024, "k": 1024} and padded.padding == {}
    assert p.padded({"j": 1040}).vector_pad == p.vector_pad + 16
    with pytest.raises(TTileError, match="cannot pad"):
        conv.padded({"h": 20})


def test_vector_widths_no_kept_microkernel_divides_are_padded_jointly_with_rows():
    """N = 1000 is 125 vectors of 8: a factor 5, but no kept AVX2 microkernel is 5 vectors wide (the catalog's
    are 2-4), and M = 97 is prime: unpadded only the fallback fits. N is padded to 126 or 128 vectors, and a
    target stays when it makes a space alone or with another dimension padded too."""
    from tvm_ttile.space import pad_targets

    kept = [Microkernel.make("matmul", "avx2", 8, 16, i=i, j=j) for i, j in ((4, 2), (5, 2), (6, 2), (3, 3), (4, 3), (3, 4))]
    p = Problem.from_operator(Matmul(M=97, N=1000, K=384), 8, "avx2")
    assert not admissible(p, kept)
    assert pad_targets(p, kept)["j"] == [1008, 1024] and 100 in pad_targets(p, kept)["i"]
    fallback = [(Microkernel.make("matmul", "avx2", 8, 16, i=1, j=5), 60.0)]
    sp = Space(p, kept, fallback)
    assert sp.fallback_used and sp.padding["j"] == [1008, 1024]
    lam = [c for c in sp.padded({"j": 1024}).choices if c.dim == "i"]  # 97 rows: a Lambda of two row counts
    assert lam and all(sum(a * u for a, u in c.parts) in (97,) for c in lam)
    both = sp.padded({"i": 100, "j": 1008})
    assert any(not c.combined and c.mk.get("i") in (4, 5) for c in both.choices)
    # 64 vectors: 2 and 4 divide it, nothing to pad; on a catalog whose microkernels are one vector wide, the
    # widths 2-6 decide as before
    assert "j" not in pad_targets(Problem.from_operator(Matmul(M=96, N=512, K=384), 8, "avx2"), kept)
    narrow = [Microkernel.make("matmul", "avx2", 8, 16, i=i, j=1) for i in (4, 6)]
    assert "j" not in pad_targets(Problem.from_operator(Matmul(M=96, N=1000, K=384), 8, "avx2"), narrow)


def test_a_vector_width_no_kept_microkernel_divides_gets_lambdas_along_it():
    """N = 1009 is 127 vectors of 8: no kept width (2-4 vectors) divides it, so two kept microkernels of one class
    along j are combined (4x2 and 4x3: 127 = 2a + 3b), which needs no padding copy of the weights. Where a kept
    width divides the vector dimension, nothing changes: no Lambda along it."""
    kept = [Microkernel.make("matmul", "avx2", 8, 16, i=i, j=j) for i, j in ((4, 2), (5, 2), (6, 2), (3, 3), (4, 3), (3, 4))]
    p = Problem.from_operator(Matmul(M=512, N=1009, K=512), 8, "avx2")
    lam = [c for c in Space(p, kept).choices if c.dim == "j"]
    assert lam and all(127 % sum(a * u for a, u in c.parts) == 0 for c in lam)
    assert {c.mk.get("i") for c in lam} == {4} and all(c.covers("j") * (127 // sum(a * u for a, u in c.parts))
                                                       == 1016 for c in lam)
    assert not [c for c in Space(Problem.from_operator(Matmul(M=512, N=1024, K=512), 8, "avx2"), kept).choices
                if c.dim == "j"]
    conv_kept_ = [Microkernel.make("conv2d", "avx2", 8, 16, h=4, k=k) for k in (2, 3)]
    conv = Problem.from_operator(Conv2d(K=97, C=16, H=28, W=28, R=3, S=3, pad=1), 8, "avx2")  # 13 vectors
    assert {c.parts for c in admissible(conv, conv_kept_) if c.dim == "k"} >= {((5, 2), (1, 3)), ((2, 2), (3, 3))}


def test_the_fallback_combines_measured_microkernels_by_their_expected_rate():
    """A 7 x 7 grid with 40 vectors of outputs on AVX2: no kept microkernel (4-6 rows x 2 vectors, 3-4 rows x 3
    vectors) fits, nor a Lambda of two (7 rows need 3 + 4 at 3 vectors, which do not divide 40). The fallback then
    combines measured ones too: 4 rows at 99% and 3 rows at 72% of peak (about 86% for the 7 rows) come before a
    7-row microkernel at 64% alone, which comes before 5 + 2 rows with the 2-row member at 30% (57%)."""
    from tvm_ttile.space import fallback_choices

    def mk(h, k, w=1):
        return Microkernel.make("conv2d", "avx2", 8, 256, h=h, k=k, w=w)

    kept = [mk(4, 2), mk(5, 2), mk(6, 2), mk(3, 3), mk(4, 3)]
    rated = [(mk(4, 2), 99.0), (mk(3, 3), 98.0), (mk(5, 2), 90.0), (mk(3, 2), 72.0), (mk(1, 2, w=7), 64.0),
             (mk(2, 2), 30.0)]
    p = Problem.from_operator(Conv2d(K=320, C=960, H=7, W=7, R=1, S=1), 8, "avx2")
    assert not admissible(p, kept)
    sp = Space(p, kept, rated)
    assert sp.fallback_used
    best = sp.choices[0]
    assert best.dim == "h" and best.parts == ((1, 3), (1, 4)) and best.mk.get("k") == 2
    assert [c.combined for c in sp.choices[:3]] == [True, False, True] and sp.choices[1].mk.get("w") == 7
    assert sp.choices[2].parts == ((1, 2), (1, 5))
    assert all(c.covers("h") == 7 or c.mk.get("h") in (1, 7) for c in sp.choices)
    # with the 3-row member at 20%, the 7 rows of the Lambda run at 7 / (4 / 99 + 3 / 20) = 37%: the single first
    slow = fallback_choices(p, [(m, 20.0 if (m.get("h"), m.get("k")) == (3, 2) else g) for m, g in rated])
    assert not slow[0].combined and slow[0].mk.get("w") == 7


def test_window_microkernels_serve_the_windows_the_base_unrolls_do_not_divide():
    """1x7, 7x1 and the 7x7 stem get microkernels unrolling a row or a column of their window, within the register
    model; 3x3 and 1x1 windows (and 6x6, which 3x3 divides) get none, so their spaces are as before. Over 3
    channels the stem leaves them out (they measured slower there than 1x1 microkernels under its window's loops)."""
    from tvm_ttile.cpu import get_isa
    from tvm_ttile.microkernels import family

    assert family.window_unrolls(1, 7) == ((1, 7),) and family.window_unrolls(7, 1) == ((7, 1),)
    assert family.window_unrolls(7, 7) == ((1, 7), (7, 1)) and family.window_unrolls(5, 5) == ((1, 5), (5, 1))
    assert family.window_unrolls(3, 3) == family.window_unrolls(1, 1) == family.window_unrolls(6, 6) == ()
    assert family.window_unrolls(1, 9) == ()  # longer than MAX_WINDOW_UNROLL: the base unrolls stay
    for isa in ("avx2", "avx512"):
        b = family.bounds(get_isa(isa))
        got = family.window_candidates(get_isa(isa), 64, 7, 7)
        assert got and {(mk.get("r"), mk.get("s")) for mk in got} == {(1, 7), (7, 1)}
        assert all(b["out_min"] <= mk.output_registers <= b["out_max"] and
                   mk.output_registers + 7 * mk.get("k") <= b["footprint_max"] for mk in got)
        assert not {mk.text for mk in got} & {mk.text for mk in family.conv2d_candidates(get_isa(isa), 64)}
    kept = conv_kept("avx2", 8) + family.window_candidates(get_isa("avx2"), 16, 7, 7)
    stem = Space(Problem.from_operator(Conv2d(K=16, C=3, H=28, W=28, R=7, S=7, stride=2, pad=3), 8, "avx2"), kept)
    assert stem.choices and all(c.mk.get("r") == c.mk.get("s") == 1 for c in stem.choices)
    assert stem.reduction_innermost
    wide = Space(Problem.from_operator(Conv2d(K=16, C=16, H=28, W=28, R=7, S=7, stride=2, pad=3), 8, "avx2"), kept)
    assert any(c.mk.get("s") == 7 for c in wide.choices) and any(c.mk.get("r") == 7 for c in wide.choices)
    one_by_7 = Space(Problem.from_operator(Conv2d(K=16, C=3, H=17, W=17, R=1, S=7, pad=(0, 3)), 8, "avx2"),
                     kept + family.window_candidates(get_isa("avx2"), 16, 1, 7))
    assert one_by_7.choices and all(c.mk.get("s") == 7 for c in one_by_7.choices)  # the whole window per call
    small3 = Space(Problem.from_operator(Conv2d(K=16, C=3, H=12, W=12, R=3, S=3, pad=1), 8, "avx2"), kept)
    assert all(c.mk.get("r") == c.mk.get("s") == 3 for c in small3.choices) and not small3.reduction_innermost

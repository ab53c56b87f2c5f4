"""Conformance suite every sampler runs: valid schemes, seeded reproducibility (also across processes),
and the ablation restrictions."""
import json
import subprocess
import sys

import pytest

from kernels import conv_kept, matmul_kept
from tvm_ttile.errors import TTileError
from tvm_ttile.operators import Conv2d, Matmul, get_layer
from tvm_ttile.samplers import SAMPLERS, make_sampler
from tvm_ttile.samplers.ablations import ordered_factorizations
from tvm_ttile.space import Problem, Space

PROBLEMS = {
    "conv": (Conv2d(K=32, C=24, H=34, W=17, R=3, S=3, pad=1), conv_kept),
    "resnet18-2": (get_layer("ResNet18-2"), conv_kept),
    "matmul": (Matmul(M=34, N=48, K=64), matmul_kept),
    # Prime rows and reduction (no microkernel of 4+ rows fits, no cache-sized reduction block): Pad choices.
    "awkward": (Matmul(M=37, N=56, K=521), matmul_kept),
}


def space(name, isa="avx2", lanes=8):
    op, kept = PROBLEMS[name]
    return Space(Problem.from_operator(op, lanes, isa), kept(isa, lanes))


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_schemes_are_valid(sampler, problem):
    sp = space(problem)
    pool = make_sampler(sampler, seed=1).choices(sp)
    if not pool:
        pytest.skip(f"{sampler} has nothing to draw for {problem}")
    for s in make_sampler(sampler, seed=1).sample_many(sp, 25):
        s.validate(sp.problem.size, sp.problem.lanes, sp.problem.reuse)


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_same_seed_same_schemes(sampler):
    sp = space("conv")
    a = [s.text for s in make_sampler(sampler, seed=5).sample_many(sp, 20)]
    b = [s.text for s in make_sampler(sampler, seed=5).sample_many(sp, 20)]
    c = [s.text for s in make_sampler(sampler, seed=6).sample_many(sp, 20)]
    assert a == b and a != c
    assert len(set(a)) == len(a)


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
@pytest.mark.parametrize("problem", ["conv", "awkward"])
def test_reproducible_across_processes(sampler, problem):
    code = ("import json, sys; sys.path.insert(0, 'tests'); from test_samplers import space; "
            "from tvm_ttile.samplers import make_sampler; "
            f"print(json.dumps([s.text for s in make_sampler({sampler!r}, seed=11).sample_many(space({problem!r}), 10)]))")
    here = [s.text for s in make_sampler(sampler, seed=11).sample_many(space(problem), 10)]
    for hashseed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={"PYTHONHASHSEED": hashseed, "PATH": ""}, cwd=str(__import__("pathlib").Path(__file__).parents[1]))
        assert json.loads(out.stdout) == here


def test_ablation_pools():
    sp = space("conv")
    assert all(not c.combined for c in make_sampler("single").choices(sp))
    assert all(c.combined for c in make_sampler("combined").choices(sp))
    for s in make_sampler("combined", seed=2).sample_many(sp, 10):
        assert s.lambda_spec() is not None
    for s in make_sampler("single", seed=2).sample_many(sp, 10):
        assert s.lambda_spec() is None


def test_large_factor_bias():
    """Section 6.1 draws (dimension, factor) pairs uniformly, which favours large factors: with 16 tiles
    left along i, a single T(16,i) level comes up 1/4 of the time, against 1/8 for a uniform choice among
    the 8 ordered factorizations of 16."""
    from tvm_ttile.microkernels.spec import Microkernel

    kept = [Microkernel.make("matmul", "avx2", 8, 1, i=2, j=1)]
    sp = Space(Problem.from_operator(Matmul(M=32, N=8, K=1), 8, "avx2"), kept)
    draws = make_sampler("ttile", seed=0).sample_many(sp, 400, unique=False)
    single = sum(1 for s in draws if [x.text for x in s.specs if x.dim == "i"] == ["T(16,i)", "U(2,i)"])
    assert 70 < single < 130


def test_options_and_names_are_checked():
    with pytest.raises(TTileError, match="unknown sampler"):
        make_sampler("annealing")
    with pytest.raises(TTileError, match="no option"):
        make_sampler("ttile", depth=3)
    assert make_sampler("levels", max_levels=2).options == {"max_levels": 2, "singles_only": False, "parallel": "any",
                                                                  "parallel_dims": "any", "pad": 0.5, "in_place": 0.0,
                                                                  "choice_draw": "list", "fold_reuse": False}


def test_ordered_factorizations():
    assert sorted(ordered_factorizations(12, 2)) == [(2, 6), (3, 4), (4, 3), (6, 2)]
    assert ordered_factorizations(7, 2) == []
    assert ordered_factorizations(8, 3) == [(2, 2, 2)]


def test_min_reuse_floors_the_reuse_loop():
    sp = space("resnet18-2")
    floored = make_sampler("ttile", seed=0, min_reuse=16)
    whole = make_sampler("ttile", seed=0, min_reuse=10**6)  # above every extent: the whole reduction
    uniform = make_sampler("ttile", seed=0)
    draws = {"floored": set(), "whole": set(), "uniform": set()}
    for choice in sp.choices:
        extent = sp.reuse_extent(choice)
        for _ in range(20):
            draws["floored"].add(floored.draw_reuse(sp, choice) >= min(16, extent))
            draws["whole"].add(whole.draw_reuse(sp, choice) == extent)
            draws["uniform"].add(uniform.draw_reuse(sp, choice) >= min(16, extent))
    assert draws["floored"] == {True} and draws["whole"] == {True}
    assert False in draws["uniform"]  # the paper's draw does go below the floor


def _levels_above_reuse(scheme) -> list:
    """The dimensions of a scheme's tile levels, outermost first, without the last: the reuse loop."""
    from tvm_ttile.scheme import Lambda, P, T

    return [s.dim for s in scheme.specs if isinstance(s, (T, P, Lambda))][:-1]


def _grouped(scheme, problem) -> bool:
    """Are the levels above the reuse loop in the order weight dimension, reduction, pixels?"""
    from tvm_ttile.space import REDUCTION

    rank = [0 if d == problem.vector else 1 if d in REDUCTION[problem.op] else 2 for d in _levels_above_reuse(scheme)]
    return rank == sorted(rank)


@pytest.mark.parametrize("problem", ["resnet18-2", "matmul"])
def test_weights_first_orders_a_share_of_the_draws(problem):
    sp = space(problem)
    share = {w: [_grouped(s, sp.problem) for s in make_sampler("ttile", seed=3, weights_first=w).sample_many(sp, 60)]
             for w in (0.0, 0.5, 1.0)}
    assert all(share[1.0])
    assert not all(share[0.0]) and not all(share[0.5]) and sum(share[0.5]) > sum(share[0.0])
    for s in make_sampler("ttile", seed=3, weights_first=1.0).sample_many(sp, 20):
        s.validate(sp.problem.size, sp.problem.lanes, sp.problem.reuse)


def _reduction_inner(scheme, problem) -> bool:
    """Are the reduction's levels above the reuse loop all below every output level?"""
    from tvm_ttile.space import REDUCTION

    rank = [1 if d in REDUCTION[problem.op] else 0 for d in _levels_above_reuse(scheme)]
    return rank == sorted(rank)


@pytest.mark.parametrize("problem", ["resnet18-2", "matmul"])
def test_reduction_inner_orders_a_share_of_the_draws(problem):
    sp = space(problem)
    share = {w: [_reduction_inner(s, sp.problem) for s in
                 make_sampler("ttile", seed=3, reduction_inner=w).sample_many(sp, 60)] for w in (0.0, 0.5, 1.0)}
    assert all(share[1.0])
    assert not all(share[0.0]) and not all(share[0.5]) and sum(share[0.5]) > sum(share[0.0])
    for s in make_sampler("ttile", seed=3, reduction_inner=1.0).sample_many(sp, 20):
        s.validate(sp.problem.size, sp.problem.lanes, sp.problem.reuse)
    with pytest.raises(TTileError, match="'reduction_inner' is a share"):
        make_sampler("ttile", reduction_inner=2)


def test_sampler_option_values_are_checked():
    assert make_sampler("ttile", weights_first=1).options["weights_first"] == 1.0  # (an int from the CLI)
    with pytest.raises(TTileError, match="in \\[0, 1\\]"):
        make_sampler("ttile", weights_first=1.5)
    with pytest.raises(TTileError, match="'pad' is a share in \\[0, 1\\]"):
        make_sampler("levels", pad=2)
    with pytest.raises(TTileError, match="'min_reuse' takes a value of type int, got 'many'"):
        make_sampler("ttile", min_reuse="many")
    with pytest.raises(TTileError, match="'min_reuse' takes a value of type int, got 32.5"):
        make_sampler("ttile", min_reuse=32.5)  # not truncated to 32
    assert make_sampler("ttile", min_reuse=32.0).options["min_reuse"] == 32
    with pytest.raises(TTileError, match="takes a value of type int, got True"):
        make_sampler("ttile", min_reuse=True)


def test_sampler_options_from_the_command_line():
    from tvm_ttile.cli import parse_options

    assert parse_options(["min_reuse=32", "singles_only=true", "weights_first=0.5"]) == {
        "min_reuse": 32, "singles_only": True, "weights_first": 0.5}
    with pytest.raises(TTileError, match="NAME=VALUE"):
        parse_options(["min_reuse"])
    from tvm_ttile.metaschedule import TTileSearch

    with pytest.raises(TTileError, match="no option"):  # raised in Python, before MetaSchedule runs it
        TTileSearch(sampler_options={"depth": 3})


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_padding_is_drawn_as_a_share(sampler):
    """Awkward dimensions are padded in a share `pad` of the draws, to one of Space.padding's targets; a friendly
    problem draws exactly what it drew before padding existed (no random number spent on it)."""
    sp = space("awkward")
    assert set(sp.padding) == {"i", "k"}
    if not make_sampler(sampler).choices(sp):
        pytest.skip(f"{sampler} has nothing to draw unpadded")
    never = make_sampler(sampler, seed=3, pad=0.0).sample_many(sp, 20)
    always = make_sampler(sampler, seed=3, pad=1.0).sample_many(sp, 20)
    some = make_sampler(sampler, seed=3).sample_many(sp, 40)
    assert not any(s.pads for s in never)
    assert all(set(s.padding) == {"i", "k"} for s in always)
    assert {s.padding.get(d) for s in always for d in "ik"} <= {t for ts in sp.padding.values() for t in ts}
    assert any(s.pads for s in some) and any(not s.pads for s in some)
    friendly = Space(Problem.from_operator(Matmul(M=40, N=48, K=64), 8, "avx2"), matmul_kept("avx2", 8))
    assert friendly.padding == {}
    assert ([s.text for s in make_sampler(sampler, seed=4, pad=1.0).sample_many(friendly, 10)]
            == [s.text for s in make_sampler(sampler, seed=4, pad=0.0).sample_many(friendly, 10)])


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_in_place_is_drawn_as_a_share(sampler):
    """A conv2d whose input is padded reads it in place (InPlace, each border drawn) in a share `in_place` of the
    draws; a conv2d without padding and a matmul draw exactly what they drew before (no random number spent)."""
    sp = space("conv")
    assert sp.problem.halo and sp.problem.in_place_borders == ("guard", "copy")
    if not make_sampler(sampler).choices(sp):
        pytest.skip(f"{sampler} has nothing to draw")
    never = make_sampler(sampler, seed=3, in_place=0.0).sample_many(sp, 20)
    always = make_sampler(sampler, seed=3, in_place=1.0).sample_many(sp, 30)
    some = make_sampler(sampler, seed=3, in_place=0.5).sample_many(sp, 40)
    assert not any(s.in_place for s in never)
    assert [s.text for s in make_sampler(sampler, seed=3).sample_many(sp, 20)] == [s.text for s in never]
    assert {s.in_place for s in always} == {"guard", "copy"}
    assert any(s.in_place for s in some) and any(not s.in_place for s in some)
    for s in always:
        s.validate(sp.problem.size, sp.problem.lanes, sp.problem.reuse)
    unpadded = Space(Problem.from_operator(Conv2d(K=32, C=24, H=34, W=17, R=1, S=1), 8, "avx2"), conv_kept("avx2", 8))
    assert not unpadded.problem.halo
    for other in (unpadded, space("matmul")):
        assert ([s.text for s in make_sampler(sampler, seed=4, in_place=1.0).sample_many(other, 10)]
                == [s.text for s in make_sampler(sampler, seed=4, in_place=0.0).sample_many(other, 10)])
    with pytest.raises(TTileError, match="'in_place' is a share"):
        make_sampler(sampler, in_place=2.0)


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_choice_draw_by_kind_gives_singles_even_odds(sampler):
    """choice_draw=kind draws a single microkernel or a combination at even odds where both fit (on ResNet18-2
    the combinations outnumber the singles 13 to 1, so the paper's list draw is nearly all Lambdas); where one
    kind fits it draws exactly what the list draw does (no random number spent)."""
    sp = space("resnet18-2")
    pool = make_sampler(sampler).choices(sp)
    if not any(c.combined for c in pool) or all(c.combined for c in pool):
        pytest.skip(f"{sampler} draws from one kind only")
    singles = [s.lambda_spec() is None for s in make_sampler(sampler, seed=7, choice_draw="kind").sample_many(sp, 200)]
    listed = [s.lambda_spec() is None for s in make_sampler(sampler, seed=7).sample_many(sp, 200)]
    assert 70 < sum(singles) < 130
    assert sum(listed) < 40
    one_kind = Space(Problem.from_operator(Matmul(M=2, N=48, K=64), 8, "avx2"), matmul_kept("avx2", 8))
    assert one_kind.singles and not one_kind.combos
    assert ([s.text for s in make_sampler(sampler, seed=4, choice_draw="kind").sample_many(one_kind, 10)]
            == [s.text for s in make_sampler(sampler, seed=4).sample_many(one_kind, 10)])
    with pytest.raises(TTileError, match="'choice_draw' is one of list, kind; got 'even'"):
        make_sampler(sampler, choice_draw="even")

"""The cost models (plain Python, no building): working sets and traffic on hand-checked schemes, PolyDL's
Algorithm 2, the pairwise ranker learning an order, and the conformance suite every search strategy runs
(budget, skipped and first schemes, seeded reproducibility, across processes too)."""
import json
from pathlib import Path

import numpy as np
import pytest

from kernels import conv_kept, in_another_process, matmul_kept
from tvm_ttile.costmodel import CostContext, features, polydl_cost, predicted_seconds
from tvm_ttile.costmodel.analytic import FEATURES
from tvm_ttile.costmodel.pairwise import PairwiseRanker
from tvm_ttile.costmodel.rankers import RANKERS, make_ranker
from tvm_ttile.costmodel.working_sets import (WorkingSet, cache_capacities, loop_levels, per_cache, traffic,
                                              working_sets)
from tvm_ttile.cpu import CPUModel, get_isa
from tvm_ttile.errors import TTileError
from tvm_ttile.operators import Conv2d, Depthwise, Matmul
from tvm_ttile.samplers import make_sampler
from tvm_ttile.scheme import Scheme
from tvm_ttile.space import Problem, Space
from tvm_ttile.strategies import STRATEGIES, make_strategy

ROOT = Path(__file__).resolve().parents[1]


def matmul_problem(M=64, N=64, K=64, lanes=8):
    return Problem.from_operator(Matmul(M=M, N=N, K=K), lanes, "avx2")


def context(threads=1):
    """A made-up CPU: 8 KiB L1, 64 KiB L2, 1 MiB L3; every microkernel at half of a 100 GFLOPS peak."""
    cpu = CPUModel("test", get_isa("avx2"), l1d_bytes=8192, l2_bytes=65536, l3_bytes=1 << 20)
    levels = (("L1", 1.0, 400.0), ("L2", 4.0, 200.0), ("L3", 20.0, 100.0), ("mem", 80.0, 20.0))
    return CostContext(100.0, (), levels, tuple(cache_capacities(cpu, threads)), threads, 16)


def test_input_pixels_crowding_l1_sets_slow_the_time_ranker_only_there():
    """A 17-row, 3x3-window microkernel on a 17x17 layer reads 19 x 3 input pixels per channel step: with 512 channels
    (a pixel of 2 KiB) they fall in 2 set groups of a 4 KiB way, 29 in one; with 448, in 16 groups, 4 in one
    (benchmarks/results/ranking_xeon/committee8/l1_conflicts_channels.md). A 48 KiB L1 has 12 such ways."""
    from tvm_ttile.costmodel.analytic import l1_conflict_slowdown
    from tvm_ttile.costmodel.working_sets import l1_pixels_per_set
    from tvm_ttile.space import microkernel_of

    text = "[T(64,k),T(2,c),T({c},c),T(17,w),T(32,c),U(3,s),U(3,r),U(17,h),V(k)]"
    cpu = CPUModel("test", get_isa("avx512"), l1d_bytes=48 * 1024, l2_bytes=1 << 21, l3_bytes=1 << 24)
    levels = (("L1", 1.0, 400.0), ("L2", 4.0, 200.0), ("L3", 20.0, 100.0), ("mem", 80.0, 20.0))
    ctx = CostContext(100.0, (), levels, tuple(cache_capacities(cpu)), 1, 32)
    slowed = {}
    for c, per_set in ((512, 29), (448, 4)):
        p = Problem.from_operator(Conv2d(K=1024, C=c, H=17, W=17, R=3, S=3, pad=1), 16, "avx512")
        s = Scheme.parse(text.format(c=c // 64))
        assert l1_pixels_per_set(p, microkernel_of(p, s)) == (57, per_set)
        slowed[c] = l1_conflict_slowdown(p, s, ctx)
        on, off = make_ranker("time", ctx), make_ranker("time", ctx, l1_conflicts=False)
        assert on.costs(p, [s])[0] == pytest.approx(off.costs(p, [s])[0] * slowed[c])
    assert slowed == {512: pytest.approx(29 / 24), 448: 1.0}
    # the model strategy's option reaches the committee's time member, and only it
    for flag in (True, False):
        strategy = make_strategy("model", l1_conflicts=flag, pool=1)
        strategy.start(Space(p, conv_kept("avx512", 16)), make_sampler("ttile", seed=0), 1, context=ctx)
        learned, time_member = strategy.ranker.members
        assert time_member.options == {"l1_conflicts": flag} and "l1_conflicts" not in learned.options
    # every ranker option is the strategy's, declared once: the same default
    from tvm_ttile.costmodel.rankers import RANKERS
    from tvm_ttile.strategies.model import ModelStrategy

    for ranker in RANKERS.values():
        for name, (default, _) in ranker.OPTIONS.items():
            assert ModelStrategy.OPTIONS[name][0] == default
    mm = matmul_problem()
    assert l1_conflict_slowdown(mm, Scheme.parse("[T(2,i),T(8,j),T(4,i),T(64,k),U(8,i),V(j)]"), ctx) == 1.0


def test_levels_of_a_matmul_scheme():
    p = matmul_problem()
    s = Scheme.parse("[T(2,i),T(8,j),T(4,i),T(64,k),U(8,i),V(j)]")
    levels = loop_levels(p, s)
    assert [lv.spec for lv in levels] == ["T(2,i)", "T(8,j)", "T(4,i)", "microkernel"]
    assert [lv.trips for lv in levels] == [2, 8, 4, 1]
    assert [lv.executions for lv in levels] == [1, 2, 16, 64]
    # The microkernel's call: 8 rows of A over all of k, one vector of B's columns, 8 x 8 outputs (bytes).
    assert levels[-1].footprint == {"A": 8 * 64 * 4, "B": 64 * 8 * 4, "C": 8 * 8 * 4}
    assert levels[0].footprint == {"A": 64 * 64 * 4, "B": 64 * 64 * 4, "C": 64 * 64 * 4}


def test_working_sets_follow_the_reuse_each_loop_carries():
    p = matmul_problem()
    s = Scheme.parse("[T(2,i),T(8,j),T(4,i),T(64,k),U(8,i),V(j)]")
    sets = working_sets(p, s)
    # T(4,i) reuses B (not indexed by i); T(8,j) reuses A; T(2,i) reuses B: a min and a max working set each.
    assert {(w.spec, w.tensor) for w in sets} == {("T(4,i)", "B"), ("T(8,j)", "A"), ("T(2,i)", "B")}
    inner = [w for w in sets if w.spec == "T(4,i)"]
    assert sorted(w.bytes for w in inner) == [(8 * 64 + 64 * 8 + 64) * 4, (32 * 64 + 64 * 8 + 32 * 8) * 4]


def test_algorithm_2_puts_each_working_set_in_the_fastest_level_it_fits():
    caps = [("L1", 100), ("L2", 1000)]
    sets = [WorkingSet("x", "A", "min", b) for b in (50, 100, 101, 1000, 5000)]
    assert per_cache(sets, caps) == {"L1": 150, "L2": 1101, "mem": 5000}


def test_traffic_falls_when_caches_grow_and_counts_the_written_tensor_twice():
    p = matmul_problem(128, 128, 256)
    s = Scheme.parse("[T(4,j),T(16,i),T(2,j),T(256,k),U(8,i),V(j)]")
    small = traffic(p, s, [("L1", 4096), ("L2", 32768), ("L3", 65536)])
    big = traffic(p, s, [("L1", 1 << 20), ("L2", 1 << 21), ("L3", 1 << 22)])
    assert all(big[k] <= small[k] for k in ("L1", "L2", "L3"))
    everything = 4 * (128 * 256 + 256 * 128 + 2 * 128 * 128)  # fits: every tensor comes in once
    assert big["L3"] == everything
    assert small["L0"] == 2 * 4 * 128 * 128  # the accumulators: loaded and stored once per call


@pytest.mark.parametrize("op", [Conv2d(K=32, C=24, H=34, W=17, R=3, S=3, pad=1), Matmul(M=34, N=48, K=64),
                                Matmul(M=37, N=56, K=521), Depthwise(C=32, H=20, W=20, R=3, S=3, pad=1)])
def test_every_sampled_scheme_has_costs_and_features(op):
    from kernels import depthwise_kept

    kept = {"Conv2d": conv_kept, "Matmul": matmul_kept, "Depthwise": depthwise_kept}[type(op).__name__]
    sp = Space(Problem.from_operator(op, 8, "avx2"), kept("avx2", 8))
    ctx = context()
    for s in make_sampler("ttile", seed=3).sample_many(sp, 30):
        assert predicted_seconds(sp.problem, s, ctx) > 0
        assert polydl_cost(sp.problem, s, ctx) >= 0
        f = features(sp.problem, s, ctx)
        assert len(f) == len(FEATURES) and all(np.isfinite(f))


def test_the_pairwise_ranker_learns_an_order_and_is_reproducible():
    rng = np.random.default_rng(0)
    groups = []
    for _ in range(6):
        x = rng.normal(size=(80, 5))
        groups.append((x, np.exp(x[:, 0] - 0.5 * x[:, 1])))  # seconds from two of the five features
    a, b = PairwiseRanker(5, seed=1), PairwiseRanker(5, seed=1)
    a.fit(groups, epochs=150, pairs_per_group=400)
    b.fit(groups, epochs=150, pairs_per_group=400)
    x = rng.normal(size=(200, 5))
    truth = np.exp(x[:, 0] - 0.5 * x[:, 1])
    from scipy.stats import spearmanr

    assert spearmanr(-a.score(x), truth).statistic > 0.9
    assert np.array_equal(a.score(x), b.score(x))
    assert np.allclose(PairwiseRanker.from_json(json.loads(json.dumps(a.to_json()))).score(x), a.score(x))
    assert np.all((a.prefers(x[:5], x[5:10]) > 0.5) == (a.score(x[:5]) > a.score(x[5:10])))


def test_the_shipped_model_reads_these_features():
    ranker = make_ranker("learned", context())
    sp = Space(Problem.from_operator(Matmul(M=34, N=48, K=64), 8, "avx2"), matmul_kept("avx2", 8))
    schemes = make_sampler("ttile", seed=0).sample_many(sp, 20)
    assert len(ranker.rank(sp.problem, schemes)) == 20


def test_the_committee_picks_the_lowest_rank_sum_then_each_members_best_in_turn():
    class Fixed:  # a member whose costs are given
        def __init__(self, costs):
            self.given, self.heard = costs, 0

        def costs(self, problem, schemes):
            return self.given

        def observe(self, problem, schemes, seconds):
            self.heard += len(schemes)

    ranker = make_ranker("committee", context(), first="borda")
    # learned orders s3 s0 s1 s2 s4, time s1 s3 s4 s0 s2: rank sums s3 1, s1 2, s0 4, s4 6, s2 7
    ranker.members = (Fixed([1, 2, 3, 0, 4]), Fixed([3, 0, 4, 1, 2]))
    assert ranker.rank(None, ["s0", "s1", "s2", "s3", "s4"]) == ["s3", "s1", "s0", "s4", "s2"]
    ranker.members = (Fixed([0, 1, 2, 3, 4]), Fixed([4, 3, 2, 1, 0]))  # opposite views: their own favourites next
    assert ranker.rank(None, ["s0", "s1", "s2", "s3", "s4"]) == ["s0", "s4", "s1", "s3", "s2"]
    ranker.observe(None, ["s0", "s1"], [1.0, 2.0])
    assert [m.heard for m in ranker.members] == [2, 2] and ranker.rank(None, []) == []
    # Led by one member's pick, then the members in turn
    for first, order in (("time", ["s4", "s0", "s3", "s1", "s2"]), ("learned", ["s0", "s4", "s1", "s3", "s2"])):
        led = make_ranker("committee", context(), first=first)
        led.members = (Fixed([0, 1, 2, 3, 4]), Fixed([4, 3, 2, 1, 0]))
        assert led.rank(None, ["s0", "s1", "s2", "s3", "s4"]) == order
    with pytest.raises(TTileError, match="first='vote'; choose borda, time, learned"):
        make_ranker("committee", context(), first="vote")


def test_bad_ranker_and_strategy_names_and_options_are_one_line():
    with pytest.raises(TTileError, match="unknown ranker 'nope'"):
        make_ranker("nope", context())
    with pytest.raises(TTileError, match="unknown search strategy"):
        make_strategy("nope")
    with pytest.raises(TTileError, match="has no option"):
        make_strategy("model", poool=3)
    with pytest.raises(TTileError, match="'pool' takes a value of type int, got 'many'"):
        make_strategy("model", pool="many")
    with pytest.raises(TTileError, match="missing, damaged"):
        make_ranker("learned", context(), model=str(ROOT / "README.md"))


# --- the conformance suite every strategy runs ----------------------------------------------------------------
def strategy_sequence(name, seed, budget=25, skip=(), first=(), batch=7, options=None):
    sp = Space(matmul_problem(34, 48, 64), matmul_kept("avx2", 8))
    strategy = make_strategy(name, **(options or {}))
    strategy.plan(sp, make_sampler("ttile", seed=seed), budget, skip=skip, first=[Scheme.parse(t) for t in first],
                  context=context() if strategy.RANKS else None)
    out = []
    while True:
        got = strategy.next_batch(batch)
        if not got:
            return out
        strategy.observe(got, [1.0 + 0.01 * len(s.text) for s in got])  # made-up seconds, a fixed function
        out += [s.text for s in got]


OPTIONS = {"random": {}, "model": {"pool": 200, "ranker": "time"}, "gbfs": {}, "na2c": {}}
ALL = [(name, opts) for name in sorted(STRATEGIES) for opts in
       ([OPTIONS[name]] + ([{"pool": 200, "ranker": r} for r in ("learned", "polydl", "committee")]
                           if name == "model" else []))]


@pytest.mark.parametrize("name,options", ALL)
def test_strategies_respect_budget_skip_and_first(name, options):
    seq = strategy_sequence(name, 4, options=options)
    assert len(seq) == 25 and len(set(seq)) == 25
    skipped = strategy_sequence(name, 4, skip=set(seq[:5]), options=options)
    assert not set(seq[:5]) & set(skipped) and len(skipped) == 25
    first = strategy_sequence(name, 9, first=[seq[3]], options=options)
    assert first[0] == seq[3]


@pytest.mark.parametrize("name,options", ALL)
def test_strategies_are_reproducible_with_a_seed_across_processes(name, options):
    here = strategy_sequence(name, 5, options=options)
    assert here == strategy_sequence(name, 5, options=options)
    assert here != strategy_sequence(name, 6, options=options)
    assert in_another_process("test_costmodel", f"strategy_sequence({name!r}, 5, options={options!r})") == here


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_reads_its_fastest_in_place_last(name):
    """Where a conv2d's input is padded, the last share `in_place_variants` of the budget measures the fastest
    schemes measured so far again with the input read in place, each border, fastest first; 0 measures none, and
    the strategy's own part is what it measures without the phase (it never hears the variants)."""
    sp = Space(Problem.from_operator(Conv2d(K=32, C=24, H=34, W=17, R=3, S=3, pad=1), 8, "avx2"), conv_kept("avx2", 8))
    runs = {}
    for share in (0.2, 0.0):
        strategy = make_strategy(name, in_place_variants=share, **OPTIONS[name])
        strategy.plan(sp, make_sampler("ttile", seed=3), 20 if share else 16,
                      context=context() if strategy.RANKS else None)
        order = []
        while True:
            got = strategy.next_batch(7)
            if not got:
                break
            strategy.observe(got, [1.0 + 0.01 * len(s.text) for s in got])  # made-up seconds, a fixed function
            order += got
        runs[share] = order
        assert len(order) == (20 if share else 16) and len({s.text for s in order}) == len(order)
    own, variants = runs[0.2][:16], runs[0.2][16:]
    assert [s.text for s in own] == [s.text for s in runs[0.0]] and not any(s.in_place for s in runs[0.0])
    fastest = sorted(own, key=lambda s: 1.0 + 0.01 * len(s.text))[:2]
    assert [s.text for s in variants] == [s.with_in_place(b).text for s in fastest for b in ("guard", "copy")]


def test_the_in_place_share_is_checked():
    with pytest.raises(TTileError, match="'in_place_variants' takes a value of type float"):
        make_strategy("random", in_place_variants="some")
    with pytest.raises(TTileError, match="'in_place_variants' is a share in \\[0, 1\\], got 1.5"):
        make_strategy("gbfs", in_place_variants=1.5)


def test_the_model_strategy_measures_the_best_ranked_first():
    sp = Space(matmul_problem(34, 48, 64), matmul_kept("avx2", 8))
    ranker = make_ranker("time", context())
    strategy = make_strategy("model", pool=200, ranker="time", explore=0.0)
    strategy.plan(sp, make_sampler("ttile", seed=2), 10, context=context())
    pool = make_sampler("ttile", seed=2).sample_many(sp, 200)
    best = ranker.rank(sp.problem, pool)[:10]
    assert [s.text for s in strategy.next_batch(10)] == [s.text for s in best]


def test_the_bound_of_a_call_is_its_fmas_or_its_operands_at_the_bandwidth_of_the_level_holding_them():
    from tvm_ttile.costmodel.roofline import bound
    from tvm_ttile.operators import BatchMatmul

    cpu = CPUModel(name="test", isa=get_isa("avx512"), l1d_bytes=48 * 1024, l2_bytes=2**20, l3_bytes=32 * 2**20)
    hier = {"levels": {"L1": {"bandwidth_gbs": 400.0}, "L2": {"bandwidth_gbs": 200.0}, "L3": {"bandwidth_gbs": 80.0},
                       "mem": {"bandwidth_gbs": 20.0}}}
    gemv = Matmul(M=1, N=1000, K=1000)  # 4 MB of weights, 2 flops per weight: the L3's bandwidth bounds it
    b = bound(gemv, cpu, 200.0, hier)
    assert (b["limit"], b["level"], b["bytes"]) == ("L3 bandwidth", "L3", 4 * (1000 + 1000 * 1000 + 1000))
    assert b["seconds"] == pytest.approx(b["bytes"] / 80e9) and b["fma_seconds"] < b["seconds"]
    square = Matmul(M=512, N=512, K=512)
    assert bound(square, cpu, 200.0, hier)["limit"] == "FMA peak"
    assert bound(Matmul(M=1, N=4000, K=4000), cpu, 200.0, hier)["level"] == "mem"  # 64 MB: beyond the L3
    assert bound(BatchMatmul(B=2, M=8, N=16, K=8, layout="nt"), cpu, 200.0, hier)["level"] == "L1"

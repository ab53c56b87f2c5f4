"""Threads: the parallel level of the scheme language, thread-aware samplers at 1, 2, 3, 4 and 8 threads on
random shapes (primes included) whose generated code must match numpy, the N-thread peak, the --threads
argument, and work dirs that are never reused at another thread count."""
import random
import re

import numpy as np
import pytest

from kernels import conv_kept, matmul_kept
from test_lowering import random_conv, random_matmul
from tvm_ttile.errors import TTileError
from tvm_ttile.lowering import lower
from tvm_ttile.microkernels.no_init import NO_INIT
from tvm_ttile.operators import BatchMatmul, Conv2d, Depthwise, Matmul, run_against_reference
from tvm_ttile.samplers import SAMPLERS, make_sampler
from tvm_ttile.scheme import Par, Scheme, SchemeError
from tvm_ttile.space import PARALLEL, REDUCTION, Problem, Space

THREADS = (1, 2, 3, 4, 8)


def spaces(threads, n=6, isa="avx2", lanes=8, seed=0):
    rng = random.Random(seed)
    for i in range(n):
        conv = i % 2 == 0
        op = (random_conv if conv else random_matmul)(rng, lanes)
        kept = (conv_kept if conv else matmul_kept)(isa, lanes)
        yield op, Space(Problem.from_operator(op, lanes, isa), kept, threads=threads)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_parallel_schemes_are_valid_for_every_thread_count(sampler, threads):
    for op, sp in spaces(threads, seed=threads):
        if not make_sampler(sampler).choices(sp):
            continue
        for s in make_sampler(sampler, seed=2).sample_many(sp, 12):
            p = sp.problem
            s.validate(p.size, p.lanes, p.reuse, REDUCTION[p.op])
            par = s.parallel_levels
            assert all(x.dim in PARALLEL[p.op] for x in par)
            if threads == 1:
                assert not par, s.text
                continue
            balance = s.parallel_balance(threads)
            assert balance["chunks"] == s.parallel_chunks and 0 < balance["efficiency"] <= 1
            # a balanced kind is drawn wherever the chosen microkernel leaves room for one
            room = {k for c in make_sampler(sampler).choices(sp) for k in sp.parallel_levels(c, 1)}
            if room - {"imbalanced"}:
                assert balance["kind"] != "imbalanced" or sampler in ("single", "combined", "levels", "nondivisible")


def test_the_parallel_option_picks_the_kind():
    op = Conv2d(K=64, C=16, H=24, W=24, R=3, S=3, pad=1)
    sp = Space(Problem.from_operator(op, 8, "avx2"), conv_kept("avx2", 8), threads=4)
    for kind, share in (("exact", 15), ("multiple", 15), ("balanced", 3)):
        schemes = make_sampler("ttile", seed=1, parallel=kind).sample_many(sp, 20)
        # the kind asked for wherever the drawn microkernel leaves room for it (else one that fits: few
        # microkernels leave room for 16-64 chunks that are no multiple of 4 here)
        kinds = [s.parallel_balance(4)["kind"] for s in schemes]
        assert kinds.count(kind) >= share and "imbalanced" not in kinds
    exact = make_sampler("ttile", seed=1, parallel="exact").sample_many(sp, 10)
    assert sum(s.parallel_chunks == 4 for s in exact) >= 8  # TTile's reservation: one chunk per thread
    with pytest.raises(TTileError, match="parallel"):
        make_sampler("ttile", parallel="some")


def test_parallel_dims_activations_splits_pixels_where_it_can():
    """parallel_dims=activations: each thread writes whole pixels (n, h, w), never a share of the channels,
    wherever such a level fits; a 7 x 7 layer, whose pixels no level splits evenly, falls back to any level."""
    wide = Space(Problem.from_operator(Conv2d(K=64, C=16, H=24, W=24, R=3, S=3, pad=1), 8, "avx2"),
                 conv_kept("avx2", 8), threads=2)
    mixed = make_sampler("ttile", seed=3).sample_many(wide, 30)
    assert any(x.dim == "k" for s in mixed for x in s.parallel_levels)  # the default splits channels too
    own = make_sampler("ttile", seed=3, parallel_dims="activations").sample_many(wide, 30)
    assert all(s.parallel_levels and {x.dim for x in s.parallel_levels} <= {"n", "h", "w"} for s in own)
    small = Space(Problem.from_operator(Conv2d(K=64, C=16, H=7, W=7, R=3, S=3, pad=1), 8, "avx2"),
                  conv_kept("avx2", 8), threads=2)
    assert all(s.parallel_balance(2)["kind"] != "imbalanced"
               for s in make_sampler("ttile", seed=3, parallel_dims="activations").sample_many(small, 10))
    with pytest.raises(TTileError, match="parallel_dims"):
        make_sampler("ttile", parallel_dims="channels")


def test_parallel_dims_rows_gives_each_thread_a_band_of_rows():
    """parallel_dims=rows: the parallel level's outermost split is the rows (h), into a multiple of the thread
    count, so that each thread's chunks are one band of whole rows, or into a divisor of it (a band per group of
    threads); a 7-row layer at 2 threads falls back to any level."""
    wide = Space(Problem.from_operator(Conv2d(K=64, C=16, H=24, W=24, R=3, S=3, pad=1), 8, "avx2"),
                 conv_kept("avx2", 8), threads=2)
    rows = make_sampler("ttile", seed=3, parallel_dims="rows").sample_many(wide, 30)
    assert all(s.parallel_levels[0].dim == "h" and s.parallel_levels[0].n % 2 == 0 for s in rows)
    assert any(len(s.parallel_levels) > 1 for s in rows)  # splits inside the band are still drawn
    small = Space(Problem.from_operator(Conv2d(K=64, C=16, H=7, W=7, R=3, S=3, pad=1), 8, "avx2"),
                  conv_kept("avx2", 8), threads=2)
    fallback = make_sampler("ttile", seed=3, parallel_dims="rows").sample_many(small, 10)
    assert all(s.parallel_levels and s.parallel_balance(2)["kind"] != "imbalanced" for s in fallback)
    assert any(s.parallel_levels[0].dim != "h" for s in fallback)
    many = Space(Problem.from_operator(Conv2d(K=64, C=16, H=24, W=24, R=3, S=3, pad=1), 8, "avx2"),
                 conv_kept("avx2", 8), threads=8)  # bands for groups of threads: 2 or 4 bands, 8 | 24 not
    grouped = make_sampler("ttile", seed=3, parallel_dims="rows").sample_many(many, 30)
    assert all(s.parallel_levels[0].dim == "h" and (s.parallel_levels[0].n % 8 == 0 or 8 % s.parallel_levels[0].n == 0)
               for s in grouped)


def test_a_padding_pass_runs_on_every_thread(host):
    """At 2 threads a padded conv2d's input copy, left as a pass before the operator, is split over the threads
    too (lowering.PARALLEL_INPUT_PASS), and the result is unchanged."""
    op = Conv2d(K=2 * host.lanes, C=8, H=12, W=12, R=3, S=3, pad=1)
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    space = Space(problem, conv_kept(host.isa.name, host.lanes), threads=2)
    for scheme in make_sampler("ttile", seed=5).sample_many(space, 3):
        lowered = lower(problem, scheme, op.prim_func(host.lanes), threads=2)
        script = lowered.sch.mod.script()
        nest = script[script.index("pad_temp = T.sblock_alloc_buffer"):script.index('T.sblock("pad_temp")')]
        assert "T.parallel" in nest, (scheme.text, nest)
        got, ref = run_against_reference(op, lowered.sch.mod, host.target(2), seed=1)
        assert np.allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0)), scheme.text


def test_parallel_level_rules():
    s = Scheme.parse("[Par(2,k),Par(7,h),T(2,w),T(64,c),U(3,s),U(3,r),U(8,h),U(2,k),V(k)]")
    assert Scheme.parse(s.text) == s and s.specs[0] == Par(2, "k") and s.parallel_chunks == 14
    assert s.per_core().text == "[T(2,w),T(64,c),U(3,s),U(3,r),U(8,h),U(2,k),V(k)]"
    assert s.parallel_balance(2)["kind"] == "multiple" and s.parallel_balance(14)["kind"] == "exact"
    assert s.parallel_balance(3) == {"kind": "balanced", "chunks": 14, "threads": 3, "efficiency": 14 / 15}
    assert s.parallel_balance(8)["kind"] == "imbalanced" and s.parallel_balance(8)["efficiency"] == 14 / 16
    sizes = {"n": 1, "h": 56, "w": 2, "k": 64, "c": 64, "r": 3, "s": 3}
    s.validate(sizes, 16, "c", ("c", "r", "s"))
    with pytest.raises(SchemeError, match="reduction"):
        Scheme.parse("[Par(2,c),T(32,c),U(4,h),V(k)]").validate({"h": 4, "k": 16, "c": 64}, 16, "c", ("c",))
    with pytest.raises(SchemeError, match="outermost"):
        Scheme.parse("[T(2,h),Par(2,h),T(64,c),V(k)]").validate({"h": 4, "k": 16, "c": 64}, 16, "c")
    fp = s.per_core_footprint(16, __import__("tvm_ttile.scheme", fromlist=["x"]).conv2d_footprint())
    assert fp["weights"] == 3 * 3 * 64 * 32  # one chunk holds half the output channels' weights


@pytest.mark.slow
@pytest.mark.parametrize("threads", (2, 3, 4, 8))
def test_parallel_schemes_match_numpy(host, threads):
    rng = random.Random(100 + threads)
    ops = [random_conv(rng, host.lanes) for _ in range(3)] + [random_matmul(rng, host.lanes) for _ in range(2)]
    ops.append(Matmul(M=97, N=host.lanes * 3, K=13))  # primes
    ops.append(Conv2d(K=2 * host.lanes, C=8, H=7, W=5, R=3, S=3, pad=1, N=4))  # a batch for the parallel level
    # independent instances above the scheme: they join the parallel loop
    ops.append(BatchMatmul(B=3, M=10, N=host.lanes * 2, K=9, layout="nt"))
    ops.append(Conv2d(K=4 * host.lanes, C=6, H=6, W=6, R=3, S=3, pad=1, groups=2))
    checked = skipped = 0
    for i, op in enumerate(ops):
        conv = isinstance(op, Conv2d)
        problem = Problem.from_operator(op, host.lanes, host.isa.name)
        batch = problem.batch
        space = Space(problem, (conv_kept if conv else matmul_kept)(host.isa.name, host.lanes), threads=threads)
        for sampler in ("ttile", "nondivisible"):
            if not make_sampler(sampler).choices(space):
                continue
            for scheme in make_sampler(sampler, seed=i).sample_many(space, 2):
                func = op.prim_func(host.lanes)
                if i % 2:
                    func = func.with_attr("layout_free_buffers", [1])
                lowered = lower(problem, scheme, func, threads=threads)
                assert not lowered.notes or not scheme.parallel_levels, lowered.notes  # (no room: said so)
                if batch > 1 and scheme.parallel_levels:
                    # the operator's parallel loop last (a padding pass before it is parallel too)
                    extents = re.findall(r"in T\.parallel\((\d+)\)", lowered.sch.mod.script())
                    assert extents[-1:] == [str(batch * scheme.parallel_chunks)], (extents, scheme.text)
                got, ref = run_against_reference(op, lowered.sch.mod, host.target(threads), seed=1)
                scale = max(float(np.abs(ref).max()), 1.0)
                assert np.allclose(got, ref, rtol=1e-4, atol=1e-4 * scale), (op, scheme.text)
                checked += bool(scheme.parallel_levels)
                # the dead init dropped under the parallel loop too (skip_dead_init), the output starting as NaN
                skipped += bool(scheme.parallel_levels) and any(n.startswith(NO_INIT) for n in lowered.intrinsics)
    assert checked >= 12 and skipped >= 3, (checked, skipped)


@pytest.mark.parametrize("kind", ["conv2d", "depthwise"])
def test_a_scheme_without_a_parallel_level_says_so(host, kind):
    """Its outermost spatial loops become the parallel loop, said in a note; a depthwise scheme's per-tile input
    copy sits between those loops, so only the ones above it are fused."""
    if kind == "conv2d":
        op, text = Conv2d(K=host.lanes, C=16, H=6, W=6, R=1, S=1), "[T(2,c),T(6,h),T(6,w),T(8,c),V(k)]"
    else:
        op = Depthwise(C=2 * host.lanes, H=13, W=9, R=3, S=3, stride=2, pad=1)
        text = "[T(2,k),T(7,h),T(3,r),U(3,s),U(5,w),V(k)]"  # the copy sits under k, above h
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    lowered = lower(problem, Scheme.parse(text), op.prim_func(host.lanes), threads=2)
    assert any("no Par level" in n for n in lowered.notes)
    got, ref = run_against_reference(op, lowered.sch.mod, host.target(2), seed=1)
    assert np.allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0))


def test_threads_argument():
    import argparse

    from tvm_ttile.cli import threads_arg, physical_cores

    assert threads_arg("all") == physical_cores() >= 1 and threads_arg("1") == 1
    for bad in ("0", "-2", "x", "1.5", "100000"):
        with pytest.raises(argparse.ArgumentTypeError, match="threads"):
            threads_arg(bad)


@pytest.mark.slow
def test_peak_is_measured_at_the_thread_count(host):
    from tvm_ttile.cli import physical_cores
    from tvm_ttile.cpu import measure_peak

    if physical_cores() < 2:
        pytest.skip("one core")
    res = measure_peak(host, repeat=3, threads=2)
    assert res["threads"] == 2 and res["runtime_threads"] == 2 and res["target"]["num-cores"] == 2
    assert res["peak_gflops"] > 0 and res["bandwidth_gbs"] > 0


@pytest.mark.slow
def test_work_dir_is_not_reused_at_another_thread_count(host, tmp_path, capsys):
    from tvm_ttile import cli
    from tvm_ttile.metaschedule import open_database
    from tvm_ttile.tune import tune
    from tvm_ttile.workdir import WorkDirMismatch

    op = Conv2d(K=2 * host.lanes, C=16, H=8, W=8, R=3, S=3, pad=1, name="small")
    kept = conv_kept(host.isa.name, host.lanes)
    work = str(tmp_path / "w")
    first = tune(op, host, trials=2, work_dir=work, kept=kept, progress=False)
    assert first.verified and first.threads == 1
    with pytest.raises(WorkDirMismatch, match="threads=1.*threads=2"):
        tune(op, host, trials=2, threads=2, work_dir=work, kept=kept, progress=False)
    assert len(open_database(work).get_all_tuning_records()) == 2  # nothing lost, nothing added
    assert cli.main(["tune", "conv2d", "--K", str(2 * host.lanes), "--C", "16", "--hw", "10", "--pad", "1",
                     "--threads", "2", "--work-dir", work]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "threads differ" in err[0]
    # a 2-thread run in its own work dir draws parallel schemes, verified
    second = tune(op, host, trials=2, threads=2, work_dir=str(tmp_path / "w2"), kept=kept, progress=False)
    assert second.verified and Scheme.parse(second.scheme).parallel_levels and second.parallel["chunks"] >= 2


def test_the_batch_is_there_for_the_parallel_level():
    op = Conv2d(K=16, C=8, H=7, W=7, R=3, S=3, pad=1, N=8)
    sp = Space(Problem.from_operator(op, 8, "avx2"), conv_kept("avx2", 8), threads=8)
    schemes = make_sampler("ttile", seed=0).sample_many(sp, 30)
    assert any(p.dim == "n" for s in schemes for p in s.parallel_levels)


def test_a_batch_joins_the_parallel_chunks():
    """A batch matmul's batch (a grouped conv's groups) is fused with the Par levels into one parallel loop."""
    scheme = Scheme.parse("[Par(2,i),T(4,k),U(4,i),V(j)]")
    assert scheme.parallel_balance(2)["chunks"] == 2 and scheme.parallel_balance(2)["kind"] == "exact"
    assert scheme.parallel_balance(2, batch=3) == {"kind": "multiple", "chunks": 6, "threads": 2, "efficiency": 1.0}
    assert scheme.parallel_balance(4, batch=3)["efficiency"] == 6 / 8

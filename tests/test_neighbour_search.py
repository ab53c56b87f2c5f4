"""G-BFS and N-A2C (strategies.SEARCHES) over both landscapes: neighbours stay inside the space, the space's
size is what the walks can reach, seeded runs repeat across processes, a resumed run measures nothing twice, and
through MetaSchedule the templates' knobs are walked, resumed and verified against numpy."""
import math
import random

import pytest

from kernels import conv_kept, depthwise_kept, in_another_process, matmul_kept
from tvm_ttile.errors import TTileError
from tvm_ttile.operators import Conv2d, Depthwise, Matmul
from tvm_ttile.samplers import make_sampler
from tvm_ttile.scheme import Lambda, P, U, V
from tvm_ttile.space import WHOLE_REUSE, Problem, Space
from tvm_ttile.strategies import SEARCHES
from tvm_ttile.strategies.neighbours import Category, KnobLandscape, SchemeLandscape, Tile, prime_factors


def knob_land(extents=(96, 1009, 1000), seed=0):
    rng = random.Random(seed)
    coords = [Tile(e, rng.choice([2, 3, 4]), rng.choice([0, 4, 16])) for e in extents]
    return KnobLandscape(coords + [Category(3)])


@pytest.mark.parametrize("seed", range(4))
def test_knob_neighbours_stay_inside_the_space_and_move_one_prime(seed):
    rng = random.Random(seed)
    extents = [rng.choice([7, 12, 64, 96, 509, 1000, 1009, 210]) for _ in range(3)]
    land = knob_land(extents, seed)
    for _ in range(30):
        s = land.random_state(rng)
        if s is None:
            continue
        for n in land.neighbours(s):
            changed = [c for c in range(len(s)) if n[c] != s[c]]
            assert len(changed) == 1
            c = changed[0]
            coord = land.coords[c]
            if isinstance(coord, Tile):
                assert math.prod(n[c]) == coord.extent and coord.legit(n[c])
                moved = [(a, b) for a, b in zip(s[c], n[c]) if a != b]
                (a, b), (c2, d2) = moved  # one level gives a prime p, the other takes it
                p = max(a, b) // min(a, b)
                assert p in prime_factors(coord.extent) and {b / a, d2 / c2} == {p, 1 / p}
            else:
                assert abs(n[c] - s[c]) == 1 and 0 <= n[c] < coord.n


def test_the_knob_space_size_is_every_state_the_actions_reach():
    land = KnobLandscape([Tile(12, 3, 4), Tile(8, 2), Tile(7, 2), Category(3)])
    seen, todo = {land.key(land.start())}, [land.start()]
    while todo:
        for n in land.neighbours(todo.pop()):
            if land.key(n) not in seen:
                seen.add(land.key(n))
                todo.append(n)
    assert len(seen) == land.size() == 15 * 4 * 2 * 3


SHAPES = [(Matmul(M=34, N=48, K=64), matmul_kept), (Matmul(M=37, N=56, K=521), matmul_kept),
          (Conv2d(K=32, C=24, H=34, W=17, R=3, S=3, pad=1), conv_kept),
          (Depthwise(C=32, H=20, W=20, R=3, S=3, pad=1), depthwise_kept)]


def microkernel_part(land, scheme):
    head, _, tail = land._parts(scheme)
    lam = [s for s in scheme.specs if isinstance(s, (Lambda, P))]
    return head, tail, lam, scheme.pads


@pytest.mark.parametrize("op,kept", SHAPES)
def test_scheme_neighbours_are_valid_schemes_with_the_same_microkernel(op, kept):
    sp = Space(Problem.from_operator(op, 8, "avx2"), kept("avx2", 8))
    sampler = make_sampler("ttile", seed=1)
    land = SchemeLandscape(sp.problem, lambda: sampler.sample(sp), WHOLE_REUSE[sp.problem.op])
    moved = 0
    for s in sampler.sample_many(sp, 15):
        for n in land.neighbours(s):
            n.validate(sp.problem.size, sp.problem.lanes, sp.problem.reuse, land.reductions)
            assert microkernel_part(land, n) == microkernel_part(land, s)
            assert all(isinstance(x, (U, V)) for x in land._parts(n)[2])
            moved += 1
    assert moved > 0


def cost(land, state):
    """A made-up landscape with one best state: the distance of each factor's log from a target."""
    x = land.features(state)
    return 1.0 + sum(abs(v - 0.37 * (i % 3)) for i, v in enumerate(x))


def run(name, land, seed, budget, batch=7, told=()):
    search = SEARCHES[name](land, seed)
    search.resume(told)
    asked = []
    while len(asked) < budget:
        got = search.ask(min(batch, budget - len(asked)))
        if not got:
            break
        asked += got
        search.tell(got, [cost(land, s) for s in got])
    return search, asked


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_a_search_finds_the_best_of_a_smooth_landscape_and_asks_nothing_twice(name):
    land = KnobLandscape([Tile(256, 3), Tile(64, 2), Category(4)])
    search, asked = run(name, land, 0, 200)
    keys = [land.key(s) for s in asked]
    assert len(keys) == len(set(keys)) == 200
    best = min(cost(land, s) for s in asked)
    assert search.best[0] == best
    everything = [(a, b, c, d, e, u) for a in (1, 2, 4, 8, 16, 32, 64, 128, 256) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)
                  for c in (1, 2, 4, 8, 16, 32, 64, 128, 256) if a * b * c == 256
                  for d in (1, 2, 4, 8, 16, 32, 64) for e in (64 // d,) for u in range(4)]
    optimum = min(cost(land, ((a, b, c), (d, e), u)) for a, b, c, d, e, u in everything)
    assert best <= optimum * 1.05  # within 5% of the landscape's optimum after ~5% of its 720 states


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_a_resumed_search_measures_nothing_twice(name):
    land = knob_land(seed=3)
    _, first = run(name, land, 4, 30)
    _, more = run(name, land, 4, 30, told=[(s, cost(land, s)) for s in first])
    assert not {land.key(s) for s in first} & {land.key(s) for s in more} and len(more) == 30


def sequence(name, seed):
    land = knob_land(seed=1)
    return [land.key(s) for s in run(name, land, seed, 40)[1]]


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_a_seeded_search_repeats_across_processes(name):
    here = sequence(name, 5)
    assert here == sequence(name, 5) and here != sequence(name, 6)
    assert in_another_process("test_neighbour_search", f"sequence({name!r}, 5)") == here


def test_bad_search_names_and_options_are_one_line():
    from tvm_ttile.metaschedule.knob_search import KnobSearch

    with pytest.raises(TTileError, match="unknown search 'bfs'; choose from gbfs, na2c"):
        KnobSearch("bfs")
    with pytest.raises(TTileError, match=r"search 'gbfs' has no option\(s\) \['tau'\]"):
        KnobSearch("gbfs", options={"tau": 0.5})
    with pytest.raises(TTileError, match="option 'rho' takes a value of type int"):
        SEARCHES["gbfs"](knob_land(), 0, rho="many")


@pytest.mark.slow
def test_gbfs_walks_the_conv2d_template_resumes_without_measuring_twice_and_verifies(host, tmp_path):
    """The AutoTVM-style conv2d template's knobs walked by G-BFS through MetaSchedule; a second run on the same
    work dir goes on from the database; the best is checked against numpy."""
    import tvm

    from tvm_ttile.baselines import run_system
    from tvm_ttile.metaschedule import open_database, records_of
    from tvm_ttile.metaschedule.knob_search import knob_insts

    op = Conv2d(K=2 * host.lanes, C=8, H=6, W=6, R=3, S=3, pad=1, name="small-conv")
    work = str(tmp_path / "gbfs")
    first = run_system("gbfs", op, host, trials=2, seed=0, work_dir=work, progress=False)
    again = run_system("gbfs", op, host, trials=5, seed=0, work_dir=work, progress=False)
    # (not again.gflops >= first.gflops: the best record is MetaSchedule's by mean time, GFLOPS come from the median,
    # and on a busy machine the two can disagree)
    assert first.verified and again.verified and first.trials == 2 and again.trials == 5
    records = records_of(open_database(work), tvm.IRModule({"main": op.prim_func(host.lanes)}))
    states = [str([rec.trace.decisions[i] for i in knob_insts(rec.trace)]) for rec in records]
    assert len(states) == len(set(states)) == 5


@pytest.mark.slow
def test_compare_gives_each_system_its_own_search_options_and_work_dirs(host, monkeypatch, tmp_path):
    """`compare --strategy-option gbfs:starts=2` reaches the template walk (2 states before the first pop), a plain
    NAME goes to every chosen system whose search has it, and the options name the work dirs and the report."""
    from tvm_ttile.compare import compare, resolve_strategy_options

    systems = ["tvm_ttile", "gbfs", "tvm_ttile-gbfs", "numpy"]
    assert resolve_strategy_options(systems, {"rho": 3, "gbfs:starts": 2}) == {
        "gbfs": {"rho": 3, "starts": 2}, "tvm_ttile-gbfs": {"rho": 3}}
    with pytest.raises(TTileError, match="no chosen system's search has it"):
        resolve_strategy_options(["tvm_ttile", "numpy"], {"rho": 3})
    monkeypatch.setattr("tvm_ttile.operators.get_layer", lambda name: Matmul(M=8, N=2 * host.lanes, K=16, name=name))
    data = compare(["tiny"], ["gbfs"], budget=3, out_dir=str(tmp_path), progress=False, retime_rounds=1,
                   strategy_options={"gbfs": {"starts": 2}})
    run = data["results"]["tiny"]["gbfs"][0]
    assert run["verified"] and run["trials"] == 3 and data["strategy_options"] == {"gbfs": {"starts": 2}}
    assert (tmp_path / "work" / f"{host.isa.name}-gbfs-tiny-starts=2-seed0").is_dir()
    assert "gbfs starts=2" in (tmp_path / "compare.md").read_text()
    with pytest.raises(TTileError, match="na2c's search has no option"):
        compare(["tiny"], ["na2c"], budget=1, out_dir=str(tmp_path), strategy_options={"na2c": {"rho": 3}})

"""The conformance suite every system of the comparison runs (baselines.SYSTEMS): on a small operator of
each kind it takes, one verified SystemResult; its best timed again in this process; the kinds it does not
take refused with one error naming them; its options declared as data and others refused."""
import pytest

from tvm_ttile.baselines import SYSTEMS, get_system, in_process_timers, run_system
from tvm_ttile.errors import TTileError
from tvm_ttile.operators import BatchMatmul, Conv1d, Conv2d, Depthwise, Depthwise1d, Matmul, QConv2d, QMatmul
from tvm_ttile.precision import dot_product

KINDS = ("Conv2d", "Matmul", "Depthwise", "BatchMatmul", "Conv1d", "Depthwise1d")


def small(kind, lanes):
    return {"Conv2d": Conv2d(K=2 * lanes, C=8, H=6, W=6, R=3, S=3, pad=1, name="small-conv"),
            "Matmul": Matmul(M=8, N=2 * lanes, K=16, name="small-matmul"),
            "Depthwise": Depthwise(C=2 * lanes - 3, H=9, W=7, R=3, S=3, stride=2, pad=1, name="small-depthwise"),
            "BatchMatmul": BatchMatmul(B=3, M=6, N=2 * lanes - 3, K=12, layout="nt", name="small-bmm"),
            "Conv1d": Conv1d(K=2 * lanes - 3, C=7, W=23, S=3, stride=2, pad=(1, 2), name="small-conv1d"),
            "Depthwise1d": Depthwise1d(C=lanes + 3, W=29, S=5, pad=(2, 1), name="small-depthwise1d"),
            "QMatmul": QMatmul(M=8, N=2 * lanes - 3, K=18, name="small-qmatmul"),
            "QConv2d": QConv2d(K=2 * lanes - 3, C=6, H=6, W=7, R=3, S=3, pad=1, input_zero=7, name="small-qconv")}[kind]


def grouped(lanes):
    """A grouped convolution whose groups' outputs are not whole vectors (padded per group)."""
    return Conv2d(K=4 * (lanes - 2), C=12, H=7, W=7, R=3, S=3, pad=1, groups=4, name="small-grouped")


@pytest.mark.parametrize("position,name", list(enumerate(SYSTEMS)))
@pytest.mark.slow
def test_every_system_gives_a_verified_result_and_times_its_best_again(position, name, host, tmp_path,
                                                                       small_catalog):
    system = get_system(name)
    assert system.name == name and system.operators and isinstance(system.options, dict)
    # One kind of operator per system, taking turns (each kind by several systems), to keep the suite short.
    for kind in [system.operators[position % len(system.operators)]]:
        op = small(kind, host.lanes)
        if op.precision != "fp32" and dot_product(op.precision, host) is None:
            pytest.skip(f"this CPU cannot compute {op.precision}")
        work = str(tmp_path / kind) if system.tunes else None
        try:
            res = run_system(name, op, host, trials=2, seed=0, work_dir=work, progress=False)
        except TTileError as e:
            if "not installed" in str(e):
                pytest.skip(str(e))
            raise
        assert res.system == name and res.operator == op.name and res.verified and res.gflops > 0
        assert (res.trials > 0) == system.tunes
        (seconds,) = [t() for t in in_process_timers([(name, work)], op, host)]
        assert seconds > 0


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_every_system_refuses_what_it_does_not_take_in_one_error(name, host):
    system = get_system(name)
    for kind in set(KINDS) - set(system.operators):
        assert not system.handles(small(kind, host.lanes))
        with pytest.raises(TTileError, match=f"^{name} takes .* operators.*, not a {kind}$"):
            run_system(name, small(kind, host.lanes), host, trials=1)
    if "Conv2d" in system.operators and not system.grouped:
        assert not system.handles(grouped(host.lanes))
        with pytest.raises(TTileError, match=f"^{name} takes .* operators \\(no grouped convolutions\\), not a "
                                             "Conv2d with groups$"):
            run_system(name, grouped(host.lanes), host, trials=1)
    if "sampler_options" not in system.options:
        kind = system.operators[0]
        with pytest.raises(TTileError, match="takes no sampler_options"):
            run_system(name, small(kind, host.lanes), host, trials=1, sampler_options={"min_reuse": 4})


def test_an_unknown_system_names_the_known_ones():
    with pytest.raises(TTileError, match="unknown system .autotvm.; choose from tvm_ttile, tvm_ttile-model, metaschedule"):
        get_system("autotvm")


@pytest.mark.parametrize("name", ["tvm_ttile", "metaschedule"])
@pytest.mark.slow
def test_tuners_take_a_depthwise_convolution(name, host, tmp_path, small_catalog):
    """Depthwise (channels not whole vectors, stride 2, padding) through both TVM tuners, verified."""
    op = small("Depthwise", host.lanes)
    res = run_system(name, op, host, trials=2, seed=0, work_dir=str(tmp_path / name), progress=False)
    assert res.verified and res.trials > 0


@pytest.mark.parametrize("name", ["tvm_ttile", "metaschedule", "onnxruntime", "onednn"])
@pytest.mark.slow
def test_a_grouped_convolution_is_tuned_or_timed_and_verified(name, host, tmp_path, small_catalog):
    """Groups of K / groups outputs that are not whole vectors: tvm_ttile pads each group (one conv2d per group,
    the group a batch level), the others take the groups as they are; every output checked against numpy."""
    system = get_system(name)
    work = str(tmp_path / name) if system.tunes else None
    try:
        res = run_system(name, grouped(host.lanes), host, trials=2, seed=0, work_dir=work, progress=False)
    except TTileError as e:
        if "not installed" in str(e):
            pytest.skip(str(e))
        raise
    assert res.verified and (res.trials > 0) == system.tunes


@pytest.mark.parametrize("name", ["tvm_ttile", "onnxruntime", "onednn"])  # MetaSchedule: any PrimFunc alike
@pytest.mark.parametrize("kind", ["Conv1d", "grouped", "Depthwise1d"])
def test_a_conv1d_is_tuned_or_timed_and_verified(name, kind, host, tmp_path, small_catalog):
    """1-d convolutions (outputs not whole vectors, stride 2, asymmetric padding; plain, grouped with groups of
    1.5 vectors, depthwise): tvm_ttile tunes them as their 2-d operator of height 1, the libraries run their own
    1-d convolution; every output checked against numpy."""
    system = get_system(name)
    work = str(tmp_path / name) if system.tunes else None
    op = Conv1d(K=3 * host.lanes, C=6, W=19, S=3, stride=2, pad=1, groups=2, name="small-grouped1d") \
        if kind == "grouped" else small(kind, host.lanes)
    try:
        res = run_system(name, op, host, trials=2, seed=0, work_dir=work, progress=False)
    except TTileError as e:
        if "not installed" in str(e):
            pytest.skip(str(e))
        raise
    assert res.verified and (res.trials > 0) == system.tunes

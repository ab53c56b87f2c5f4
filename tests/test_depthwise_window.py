"""A depthwise window that no base tap count but 1 divides (ConvNeXt's 7x7) draws microkernels taking a whole row
of it per step (family.depthwise_window_candidates), measured on first use; a 7x7 depthwise layer tuned on them is
verified against numpy."""
import pytest

from tvm_ttile.microkernels import family
from tvm_ttile.microkernels.spec import Microkernel
from tvm_ttile.operators import Depthwise
from tvm_ttile.tune import tune


def test_only_windows_the_base_taps_do_not_divide_get_whole_rows(host):
    sevens = family.depthwise_window_candidates(host.isa, 7)
    assert sevens and {dict(mk.unroll)["s"] for mk in sevens} == {7}
    for s in (1, 3, 5, 6, 9, 11):  # divided by a base tap count, or longer than a window row unrolls
        assert family.depthwise_window_candidates(host.isa, s) == []


@pytest.mark.slow
def test_a_7x7_depthwise_layer_tuned_on_whole_rows_of_its_window_is_verified(host, tmp_path):
    kept = [Microkernel.make("depthwise", host.isa.name, host.lanes, 7, s=7, w=w, h=1, k=1) for w in (4, 7)]
    op = Depthwise(C=2 * host.lanes, H=14, W=14, R=7, S=7, pad=3)
    res = tune(op, host, trials=4, seed=0, work_dir=str(tmp_path), kept=kept, progress=False)
    assert res.verified and "U(7,s)" in res.scheme, res.scheme

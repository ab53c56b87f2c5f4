"""AutoTVM-style schedule templates, rebuilt for TVM 0.27 (AutoTVM itself was removed upstream).

This reproduces the *method* of TVM's former x86 templates, not their code: a hand-written schedule with
tunable knobs (split factors, loop order, unroll depth, vectorized innermost output axis), expressed with
MetaSchedule's sampling instructions so that a cost-model-guided search (XGBoost, like AutoTVM's
XGBTuner) or plain random replay explores the knobs.
"""
from __future__ import annotations

UNROLL_STEPS = [0, 16, 64, 512]


def _knobs_common(sch, block, loops_in_order):
    sch.reorder(*loops_in_order)
    unroll = sch.sample_categorical(UNROLL_STEPS, [0.25] * 4)
    sch.annotate(block, "meta_schedule.unroll_explicit", unroll)
    return loops_in_order


def conv2d_nhwc_template(sch):
    """Knobs: 3-level w, 2-level h/k/c splits; one of two loop orders; unroll depth; k innermost, vectorized."""
    block = sch.get_sblock("conv2d_nhwc")
    n, h, w, k, r, s, c = sch.get_loops(block)
    ho, hi = sch.split(h, sch.sample_perfect_tile(h, n=2))
    wo, wm, wi = sch.split(w, sch.sample_perfect_tile(w, n=3))
    ko, ki = sch.split(k, sch.sample_perfect_tile(k, n=2, max_innermost_factor=64))
    co, ci = sch.split(c, sch.sample_perfect_tile(c, n=2))
    order = sch.sample_categorical([0, 1], [0.5, 0.5])
    orders = [[n, ho, wo, ko, r, s, co, hi, wm, ci, wi, ki], [n, ko, ho, wo, co, r, s, ci, hi, wm, wi, ki]]
    # The loop order knob: MetaSchedule replays decisions, so pick the order from the sampled value.
    chosen = orders[int(sch.get(order))]
    _knobs_common(sch, block, chosen)
    sch.vectorize(ki)
    return [sch]


def matmul_template(sch):
    """Knobs: 3-level i, 2-level j/k splits; unroll depth; j innermost, vectorized."""
    block = sch.get_sblock("matmul")
    i, j, k = sch.get_loops(block)
    io, im, ii = sch.split(i, sch.sample_perfect_tile(i, n=3))
    jo, ji = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=64))
    ko, ki = sch.split(k, sch.sample_perfect_tile(k, n=2))
    _knobs_common(sch, block, [io, jo, im, ko, ki, ii, ji])
    sch.vectorize(ji)
    return [sch]


def matmul_paper_template(sch):
    """The G-BFS / N-A2C paper's GEMM configuration space: i and j split in 4 levels, k in 2 (d_m = d_n = 4,
    d_k = 2), no bound on any factor and no other knob: 484000 states for 512^3, 899756 for 1024^3, as the paper
    counts. Order i0 j0 i1 j1 k0 i2 j2 k1 i3 j3 (blocks of the output, the reduction inside); LLVM vectorizes the
    innermost j loop itself."""
    block = sch.get_sblock("matmul")
    i, j, k = sch.get_loops(block)
    i0, i1, i2, i3 = sch.split(i, sch.sample_perfect_tile(i, n=4, max_innermost_factor=-1))
    j0, j1, j2, j3 = sch.split(j, sch.sample_perfect_tile(j, n=4, max_innermost_factor=-1))
    k0, k1 = sch.split(k, sch.sample_perfect_tile(k, n=2, max_innermost_factor=-1))
    sch.reorder(i0, j0, i1, j1, k0, i2, j2, k1, i3, j3)
    return [sch]


def template_for(mod):
    """The template matching the operator block found in `mod`."""
    from ..errors import TTileError

    text = mod.script()
    if 'sblock("conv2d_nhwc")' in text:
        return conv2d_nhwc_template
    if 'sblock("matmul")' in text:
        return matmul_template
    raise TTileError("no AutoTVM-style template for this function (conv2d_nhwc and matmul blocks only)")

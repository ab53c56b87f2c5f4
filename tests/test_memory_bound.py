"""memory_bound.py: the schedules of pooling, means, transposes, LayerNorm and softmax compute what the function
as written does, at 1 and 2 threads; a function it cannot read keeps only the function as written; inside a network they are
measured once beside MetaSchedule's search and never again on a resume."""
import json

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import relax as R

from tvm_ttile import memory_bound
from tvm_ttile.metaschedule.database import open_database, record_variants


def _legalized(make, shape):
    """The PrimFunc Relax's legalization makes of one operator on an NHWC float32 tensor, as its IRModule."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor(shape, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(make(x))
        bb.emit_func_output(out)
    mod = relax.transform.LegalizeOps()(bb.get())
    (gv,) = [gv for gv in mod.get_global_vars() if gv.name_hint != "main"]
    return tvm.IRModule({"main": mod[gv].with_attr("global_symbol", "main")})


OPERATORS = {
    "max_pool": (lambda x: relax.op.nn.max_pool2d(x, 3, 2, 1, layout="NHWC"), (1, 9, 9, 32),
                 {"output_vectors", "output_vectors_across_window", "output_vectors_outermost"}),
    "avg_pool": (lambda x: relax.op.nn.avg_pool2d(x, 2, 2, layout="NHWC"), (1, 8, 8, 48),
                 {"output_vectors", "output_vectors_across_window"}),
    "mean": (lambda x: relax.op.mean(x, [1, 2], keepdims=True), (1, 5, 5, 64),
             {"output_vectors", "output_vectors_across_window"}),
    "nhwc_to_nchw": (lambda x: relax.op.permute_dims(x, [0, 3, 1, 2]), (1, 3, 5, 32), {"input_vectors_outermost"}),
    # a whole tensor's max, a scalar (dynamic quantization's range): no axis to vectorize, the function as written
    "max_of_all": (lambda x: relax.op.max(x), (4, 96), set()),
    # row-wise: one row at a time, sums along the row as vector partial sums (ConvNeXt's channels-last LayerNorm,
    # attention's softmax at 128 tokens, and at 197, whose rows are not whole vectors)
    "layer_norm": (lambda x: relax.op.nn.layer_norm(x, relax.const(np.linspace(0.5, 1.5, 96, dtype="float32")),
                                                    relax.const(np.linspace(-1, 1, 96, dtype="float32")), axes=[-1]),
                   (1, 5, 7, 96), {memory_bound.ROWS}),
    "softmax": (lambda x: relax.op.nn.softmax(x, axis=-1), (1, 2, 9, 128), {memory_bound.ROWS}),
    "softmax_197": (lambda x: relax.op.nn.softmax(x, axis=-1), (2, 5, 197), {memory_bound.ROWS}),
}
# sums taken in another order: the float error of 96 or 128 terms
TOLERANCE = {"layer_norm": 2e-5, "softmax": 1e-6, "softmax_197": 1e-6}


def _run(mod, x, out_shape):
    """The function on x (and on fixed values for the constants legalization made parameters)."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    lib = tvm.compile(mod, target="llvm")
    out = tvm.runtime.tensor(np.zeros(out_shape, "float32"))
    rng = np.random.default_rng(7)
    extra = [tvm.runtime.tensor(rng.standard_normal([int(d) for d in a.shape]).astype("float32"))
             for a in ArgInfo.from_prim_func(mod["main"])[1:-1]]
    lib["main"](tvm.runtime.tensor(x), *extra, out)
    return out.numpy()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_each_schedule_computes_what_the_function_as_written_does(name, threads):
    make, shape, expected = OPERATORS[name]
    mod = _legalized(make, shape)
    made = memory_bound.schedules(mod, lanes=16, threads=threads)
    names = [n for n, _ in made]
    assert names[0] == memory_bound.AS_WRITTEN and expected <= set(names), names
    assert len(set(names)) == len(names)
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    out_shape = [int(d) for d in ArgInfo.from_prim_func(mod["main"])[-1].shape]
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    want = _run(mod, x, out_shape)
    for n, sch in made:
        assert memory_bound.variant_of(sch.mod["main"]) == n
        tol = TOLERANCE.get(name, 1e-6)
        np.testing.assert_allclose(_run(sch.mod, x, out_shape), want, rtol=tol, atol=tol, err_msg=n)
        if n != memory_bound.AS_WRITTEN:
            text = sch.mod.script()
            whole_rows = n != memory_bound.ROWS or shape[-1] % 16 == 0  # rows of 197: row-local, not in vectors
            assert ("T.vectorized" in text) == whole_rows and ("T.parallel" in text) == (threads > 1), n


def test_a_function_it_cannot_read_keeps_only_the_function_as_written():
    mod = _legalized(OPERATORS["max_pool"][0], OPERATORS["max_pool"][1])
    sch = tvm.s_tir.Schedule(mod)
    block = sch.get_sblock("pool_max")
    sch.fuse(*sch.get_loops(block)[1:3])  # its loops no longer bind its axes one to one
    assert [n for n, _ in memory_bound.schedules(sch.mod, lanes=16)] == [memory_bound.AS_WRITTEN]
    # an axis of 7 channels splits into no whole vectors: nothing but the function as written
    odd = _legalized(OPERATORS["max_pool"][0], (1, 9, 9, 7))
    assert [n for n, _ in memory_bound.schedules(odd, lanes=16)] == [memory_bound.AS_WRITTEN]


def test_a_network_measures_them_once_beside_metaschedule_and_not_again_on_resume(small_catalog, host, tmp_path):
    from tvm_ttile import network as nw
    from tvm_ttile.models.importers import load_model

    mod = nw.prepare(load_model("micro_resnet").mod, host)
    work = tmp_path / "w"
    res = nw.tune_network(mod, cpu=host, work_dir=str(work), trials_per_task=1, other_trials=1, progress=False)
    others = [t for t in res.tasks if t.policy == "metaschedule"]
    assert others and all(t.verified for t in others)
    database = open_database(str(work))
    tasks = {t.name: t for t in nw.extract_tasks(mod, cpu=host)}
    for t in others:
        variants = record_variants(database, tasks[t.name].mod)
        made = [n for n, _ in memory_bound.schedules(tasks[t.name].mod, host.lanes)]
        # each schedule made here once, and MetaSchedule's one trial (its evolutionary search starts from the
        # database's best records, so its candidate may be one of those again); the fastest named in the result
        assert set(variants) >= set(made) and len(variants) == t.trials == len(made) + 1
        assert made[0] == memory_bound.AS_WRITTEN
        assert t.made_by == (f"tvm_ttile {variants[0]}" if variants[0] else "metaschedule's search")
    curves = sorted(work.glob("tasks/*/curve.jsonl"))
    rows = {p: len(p.read_text().splitlines()) for p in curves}
    again = nw.tune_network(mod, cpu=host, work_dir=str(work), trials_per_task=1, other_trials=1, progress=False)
    assert {p: len(p.read_text().splitlines()) for p in curves} == rows
    assert [t.made_by for t in again.tasks] == [t.made_by for t in res.tasks]
    # other_trials=0 (the default): the schedules made here alone, no evolutionary search
    alone = nw.tune_network(mod, cpu=host, work_dir=str(tmp_path / "alone"), trials_per_task=1, progress=False)
    for t in (t for t in alone.tasks if t.policy == "metaschedule"):
        assert t.verified and t.trials == len(memory_bound.schedules(tasks[t.name].mod, host.lanes))
    # memory_bound=False (--memory-bound off) leaves those tasks to the default build: nothing of theirs measured
    bare = nw.tune_network(mod, cpu=host, work_dir=str(tmp_path / "bare"), trials_per_task=1, memory_bound=False,
                           progress=False)
    assert all(t.trials == 0 for t in bare.tasks if t.policy == "metaschedule")
    assert json.loads(json.dumps(res.to_json()))["tasks"][0]["made_by"]


@pytest.mark.parametrize("threads", [1, 2])
def test_softmax_over_rows_not_whole_vectors_runs_its_row_passes_in_vectors(threads):
    """relax/softmax.py's softmax over rows of 197 (copied into 208 lanes, the extra ones -inf): the ROWS schedule
    keeps vector partial sums for its max and its sum, and every schedule is numpy's softmax."""
    from tvm import te

    from tvm_ttile.relax.softmax import padded_softmax

    shape = (2, 5, 197)
    x_t = te.placeholder(shape, "float32", name="x")
    mod = tvm.IRModule({"main": te.create_prim_func([x_t, padded_softmax(x_t, 16)])})
    made = dict(memory_bound.schedules(mod, lanes=16, threads=threads))
    rows = made[memory_bound.ROWS].mod.script()
    assert "T.vectorized" in rows and rows.count("_rf") >= 2  # the max's and the sum's partial sums
    x = (np.random.default_rng(0).standard_normal(shape) * 4).astype("float32")
    e = np.exp(x.astype("float64") - x.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    for n, sch in made.items():
        np.testing.assert_allclose(_run(sch.mod, x, shape), want, rtol=2e-6, atol=1e-9, err_msg=n)

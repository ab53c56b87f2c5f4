"""A tuning record is replayed on the workload it was recorded on (metaschedule.database.schedule_of): a task
structurally equal to it but with other block names (TVM names LayerNorm's blocks after the Relax variable, which
another export or rewrite renames) gets the record's schedule, where replaying the trace on the task itself failed
("Cannot find a block with the name: lv3_sum") when a work dir was resumed after such a change."""
import numpy as np
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms
from tvm_ffi import structural_equal

from tvm_ttile.metaschedule import best_schedule, records_of


def _row_sums(prefix: str):
    x = te.placeholder((8, 64), "float32", name=prefix)
    k = te.reduce_axis((0, 64), name="k")
    s = te.compute((8,), lambda i: te.sum(x[i, k], axis=k), name=f"{prefix}_sum")
    return tvm.IRModule({"main": te.create_prim_func([x, s])})


def test_a_record_replays_on_its_own_workload_when_the_task_names_its_blocks_otherwise(tmp_path):
    recorded, renamed = _row_sums("lv3"), _row_sums("lv9")
    assert structural_equal(recorded, renamed)
    db = ms.database.JSONDatabase(work_dir=str(tmp_path), module_equality="structural")
    sch = tvm.s_tir.Schedule(recorded)
    block = sch.get_sblock("lv3_sum")
    sch.split(sch.get_loops(block)[1], [None, 16])
    workload = db.commit_workload(recorded)
    db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, [1e-6], tvm.target.Target("llvm"),
                                                     ms.arg_info.ArgInfo.from_prim_func(recorded["main"])))
    assert len(records_of(db, renamed)) == 1
    replayed, _ = best_schedule(db, renamed)
    lib = tvm.compile(replayed.mod, target="llvm")
    x = np.random.default_rng(0).standard_normal((8, 64)).astype("float32")
    out = tvm.runtime.tensor(np.zeros(8, "float32"))
    lib["main"](tvm.runtime.tensor(x), out)
    np.testing.assert_allclose(out.numpy(), x.sum(1), rtol=1e-5)


def _record(db, sch, workload, mod, secs):
    db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, [secs], tvm.target.Target("llvm"),
                                                     ms.arg_info.ArgInfo.from_prim_func(mod["main"])))


def test_a_record_that_does_not_replay_on_its_workload_is_set_aside_and_the_others_kept(tmp_path, caplog):
    """What a tuner wrote before as_recorded: a trace made on the renamed task, filed under the recorded workload
    (structurally equal). TVM refused to open such a database at all ("parallel_for_dynamic error")."""
    from tvm_ttile.metaschedule import open_database

    recorded, renamed = _row_sums("lv3"), _row_sums("lv9")
    db = ms.database.JSONDatabase(work_dir=str(tmp_path), module_equality="structural")
    workload = db.commit_workload(recorded)
    good = tvm.s_tir.Schedule(recorded)
    good.split(good.get_loops(good.get_sblock("lv3_sum"))[1], [None, 8])
    _record(db, good, workload, recorded, 2e-6)
    bad = tvm.s_tir.Schedule(renamed)
    bad.split(bad.get_loops(bad.get_sblock("lv9_sum"))[1], [None, 16])
    _record(db, bad, workload, renamed, 1e-6)
    del db
    with caplog.at_level("WARNING"):
        reopened = open_database(str(tmp_path))
    assert len(records_of(reopened, recorded)) == 1
    assert "database_tuning_record.json line 2 is damaged" in caplog.text
    assert (tmp_path / "database_tuning_record.json.damaged").read_text().count("\n") == 1


def test_a_network_task_is_tuned_on_the_function_its_work_dir_recorded(tmp_path):
    """network.tune.as_recorded: the recorded workload's names, so what is tuned now replays where it is filed."""
    from tvm_ttile.network.tune import as_recorded
    from tvm_ttile.relax.tasks import Task

    db = ms.database.JSONDatabase(work_dir=str(tmp_path), module_equality="structural")
    db.commit_workload(_row_sums("lv3"))
    task = Task("sum", 1, _row_sums("lv9"), "metaschedule", "", 0.0, "8x64")
    assert "lv3_sum" in as_recorded(db, task).mod.script()
    other = Task("sum", 1, tvm.IRModule({"main": _row_sums("x")["main"].with_attr("global_symbol", "main")}),
                 "metaschedule", "", 0.0, "8x64")
    (tmp_path / "fresh").mkdir()
    fresh = ms.database.JSONDatabase(work_dir=str(tmp_path / "fresh"), module_equality="structural")
    assert as_recorded(fresh, other) is other

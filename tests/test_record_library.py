"""The per-CPU record library (record_library.py): a record is lent only under the key it was timed under (CPU, target,
threads, precision, timing settings); a damaged line is set aside with a warning; two processes adding at once
both land; a network tuned after one that shares its shapes takes their records without measuring them."""
import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kernels import conv_kept
from tvm_ttile.context import Context
from tvm_ttile.operators import Conv2d
from tvm_ttile.record_library import RecordLibrary


def _tuned(host, work, K):
    """A small conv2d tuned into `work`: its database and its function."""
    from tvm_ttile.metaschedule import open_database
    from tvm_ttile.tune import tune

    op = Conv2d(K=K, C=8, H=6, W=6, R=3, S=3, pad=1, name=f"lib{K}")
    tune(op, host, trials=3, seed=1, work_dir=str(work), kept=conv_kept(host.isa.name, host.lanes), progress=False)
    database = open_database(str(work))
    return str(work), database, database.get_all_tuning_records()[0].workload.mod


@pytest.fixture(scope="module")
def tuned(host, tmp_path_factory):
    return _tuned(host, tmp_path_factory.mktemp("tuned"), 2 * host.lanes)


def _fresh(tmp_path, name):
    from tvm_ttile.metaschedule import open_database

    return open_database(str(tmp_path / name))


def test_a_record_is_lent_only_under_the_key_it_was_timed_under(host, tuned, tmp_path):
    from tvm_ttile.cpu import detect_host

    _, database, mod = tuned
    root = tmp_path / "cache"
    here = Context(host, threads=1)
    assert RecordLibrary.of(here, root).keep([mod], database) > 0
    assert RecordLibrary.of(here, root).keep([mod], database) == 0  # held already: nothing added twice
    assert RecordLibrary.of(here, root).lend(mod, _fresh(tmp_path, "same")) > 0
    others = [Context(host, threads=2), here.replace(precision="int8")]
    if host.isa.name == "avx512":  # another target of the same CPU
        others.append(Context(detect_host("avx2"), threads=1))
    for i, other in enumerate(others):
        library = RecordLibrary.of(other, root)
        assert library.path != RecordLibrary.of(here, root).path
        assert library.lend(mod, _fresh(tmp_path, f"other{i}")) == 0


def test_a_damaged_library_line_is_set_aside_with_a_warning(host, tuned, tmp_path, caplog):
    from tvm_ttile.workdir import WorkDir

    _, database, mod = tuned
    library = RecordLibrary.of(Context(host), tmp_path)
    kept = library.keep([mod], database)
    records = f"{library.path}/{WorkDir.RECORDS}"
    with open(records) as f:
        text = f.read()
    with open(records, "w") as f:  # the last record cut short, as an interrupted write leaves it
        f.write(text[:len(text) - 40])
    with caplog.at_level(logging.WARNING):
        lent = RecordLibrary.of(Context(host), tmp_path).lend(mod, _fresh(tmp_path, "w"))
    assert "damaged" in caplog.text and WorkDir.RECORDS in caplog.text
    assert lent == kept - 1  # the sound records are still lent


def test_two_processes_adding_at_once_both_land(host, tuned, tmp_path):
    """Two processes, each adding another function's records many times, at once: the library ends up with both
    functions' records and no damaged line."""
    other, _, other_mod = _tuned(host, tmp_path / "other", 3 * host.lanes)
    work, _, mod = tuned
    script = textwrap.dedent("""
        import sys
        from tvm_ttile.context import Context
        from tvm_ttile.cpu import detect_host
        from tvm_ttile.metaschedule import open_database
        from tvm_ttile.record_library import RecordLibrary
        source, root = sys.argv[1:]
        database = open_database(source)
        mods = list({str(r.workload.mod): r.workload.mod for r in database.get_all_tuning_records()}.values())
        for _ in range(5):  # (each keep reopens the library under its lock)
            RecordLibrary.of(Context(detect_host()), root).keep(mods, database)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, s, str(tmp_path / "cache")]) for s in (other, work)]
    assert [p.wait(timeout=600) for p in procs] == [0, 0]
    from tvm_ttile.metaschedule import open_database

    library = RecordLibrary.of(Context(host), tmp_path / "cache")
    held = open_database(library.path)
    assert held.has_workload(mod) and held.has_workload(other_mod)
    assert RecordLibrary.of(Context(host), tmp_path / "cache").lend(other_mod, _fresh(tmp_path, "w")) > 0
    with open(f"{library.path}/database_tuning_record.json") as f:
        assert all(line.endswith("]\n") for line in f)


@pytest.mark.slow
def test_a_network_sharing_shapes_with_one_tuned_before_measures_none_of_them(small_catalog, host, tmp_path):
    """micro_resnet tuned with the library on; tuned again into a new work dir, every conv2d task takes its
    records from the library (nothing measured, each verified) and the build matches the untuned network;
    `library=False` (--fresh) measures them again."""
    from tvm_ttile import network as nw
    from tvm_ttile.models.importers import load_model

    net = load_model("micro_resnet")
    mod = nw.prepare(net.mod)
    first = nw.tune_network(mod, cpu=host, work_dir=str(tmp_path / "a"), trials_per_task=2, progress=False,
                            library=True, memory_bound=False)
    assert not any(t.from_library for t in first.tasks)
    second = nw.tune_network(mod, cpu=host, work_dir=str(tmp_path / "b"), trials_per_task=2, progress=False,
                             library=True, memory_bound=False)
    tuned = [t for t in second.tasks if t.policy == "tvm_ttile"]
    assert tuned and all(t.from_library and t.verified and t.tuning_seconds == 0 for t in tuned)
    assert all("record library" in " ".join(t.notes) for t in tuned)
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    got = nw.run(nw.build_network(mod, str(tmp_path / "b")), x)
    np.testing.assert_allclose(got, nw.run(nw.build_network(mod, None, cpu=host), x), rtol=1e-3, atol=1e-3)
    fresh = nw.tune_network(mod, cpu=host, work_dir=str(tmp_path / "c"), trials_per_task=2, progress=False,
                            library=False, memory_bound=False)
    assert not any(t.from_library for t in fresh.tasks)
    assert all(t.trials == 2 for t in fresh.tasks if t.policy == "tvm_ttile")


@pytest.mark.slow
def test_a_zero_trial_network_verifies_every_task_and_measures_none(small_catalog, host, tmp_path):
    """`trials_per_task=0`: each conv2d task's top-ranked scheme, checked against the untuned function, nothing
    timed; the build holds them and matches the untuned network."""
    from tvm_ttile import network as nw
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.workdir import WorkDir

    net = load_model("micro_resnet")
    mod = nw.prepare(net.mod)
    res = nw.tune_network(mod, cpu=host, work_dir=str(tmp_path / "z"), trials_per_task=0, progress=False)
    tuned = [t for t in res.tasks if t.policy == "tvm_ttile"]
    assert tuned and all(t.ranked and t.verified and t.trials == 0 and t.made_by for t in tuned)
    assert not (tmp_path / "z" / WorkDir.RECORDS).exists() or not open(tmp_path / "z" / WorkDir.RECORDS).read()
    x = np.random.default_rng(1).standard_normal(net.input_shape).astype(np.float32)
    got = nw.run(nw.build_network(mod, str(tmp_path / "z")), x)
    np.testing.assert_allclose(got, nw.run(nw.build_network(mod, None, cpu=host), x), rtol=1e-3, atol=1e-3)

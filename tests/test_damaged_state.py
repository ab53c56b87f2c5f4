"""State that survives faults: damaged lines of the journals and of the MetaSchedule database are set aside with
a warning naming the file and line (what they held is measured again, nothing else is lost); a damaged tuning
seconds file is rebuilt from the curve log; two first runs on one cache measure the peak one at a time."""
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from kernels import conv_kept
from tvm_ttile.operators import Conv2d
from tvm_ttile.workdir import append_journal, read_journal, repair_database


def test_a_damaged_journal_line_is_skipped_with_a_warning_naming_file_and_line(tmp_path, caplog):
    path = str(tmp_path / "curve.jsonl")
    with open(path, "w") as f:
        f.write('{"seconds": 1.0, "gflops": 5.0}\n{"seconds": 2.0, "gfl\n{"seconds": 3.0, "gflops": 7.0}\n')
    with caplog.at_level(logging.WARNING):
        rows = read_journal(path)
    assert [r["seconds"] for r in rows] == [1.0, 3.0]
    assert f"{path} line 2 is damaged" in caplog.text


def test_a_row_appended_after_a_truncated_last_line_is_not_glued_to_it(tmp_path):
    path = str(tmp_path / "ttile_trials.jsonl")
    with open(path, "w") as f:
        f.write('{"scheme": "a", "error": null}\n{"scheme": "b", "err')  # an interrupted write
    append_journal(path, {"scheme": "c", "error": None})
    assert [r["scheme"] for r in read_journal(path)] == ["a", "c"]


def test_damaged_database_lines_are_set_aside_and_records_renumbered(tmp_path, caplog):
    wl, rec = tmp_path / "database_workload.json", tmp_path / "database_tuning_record.json"
    wl.write_text('["h0", "m0"]\n["h1", "m1\n["h2", "m2"]\n')  # workload 1 is damaged
    rec.write_text('[0, {"r": 0}]\n[1, {"r": 1}]\n[2, {"r": 2}]\n[2, {"r": 3}\n')  # the last record is cut short
    with caplog.at_level(logging.WARNING):
        assert repair_database(str(tmp_path)) == 3  # workload 1, its record, the cut record
    assert wl.read_text().splitlines() == ['["h0", "m0"]', '["h2", "m2"]']
    assert [json.loads(x) for x in rec.read_text().splitlines()] == [[0, {"r": 0}], [1, {"r": 2}]]
    assert "database_workload.json line 2 is damaged" in caplog.text
    assert "database_tuning_record.json line 4 is damaged" in caplog.text
    assert (tmp_path / "database_tuning_record.json.damaged").read_text().count("\n") == 2  # kept, not lost
    assert repair_database(str(tmp_path)) == 0  # sound now: nothing rewritten


@pytest.fixture(scope="module")
def tuned_dir(host, tmp_path_factory):
    from tvm_ttile.tune import tune

    work = tmp_path_factory.mktemp("tuned")
    op = Conv2d(K=2 * host.lanes, C=8, H=8, W=8, R=3, S=3, pad=1, name="damaged")
    tune(op, host, trials=4, seed=1, work_dir=str(work), kept=conv_kept(host.isa.name, host.lanes), progress=False)
    return op, work


@pytest.mark.parametrize("damage", ["record", "trial_log", "curve", "seconds"])
def test_a_work_dir_with_a_damaged_file_resumes_and_keeps_every_sound_measurement(host, tuned_dir, tmp_path, damage,
                                                                                 caplog):
    from tvm_ttile.metaschedule import open_database
    from tvm_ttile.tune import read_curve, tune
    from tvm_ttile.workdir import WorkDir

    op, src = tuned_dir
    work = tmp_path / "w"
    shutil.copytree(src, work)
    records = work / WorkDir.RECORDS
    n_records = len(records.read_text().splitlines())
    if damage == "record":  # the last record cut in the middle, as an interrupted write leaves it
        text = records.read_text()
        records.write_text(text[:len(text) - 40])
    elif damage == "trial_log":
        with open(work / WorkDir.TRIALS, "a") as f:
            f.write('{"scheme": "[T(2,k)')
    elif damage == "curve":
        with open(work / WorkDir.CURVE, "a") as f:
            f.write('{"seconds": 9')
    else:
        (work / WorkDir.SECONDS).write_text("")
    kept = n_records - (damage == "record")
    with caplog.at_level(logging.WARNING):
        assert len(open_database(str(work)).get_all_tuning_records()) == kept
        res = tune(op, host, trials=4, seed=1, work_dir=str(work), kept=conv_kept(host.isa.name, host.lanes),
                   progress=False)
        curve = read_curve(str(work))
    assert res.verified and res.new_trials == 4 - kept  # only what was lost is measured again
    assert "damaged" in caplog.text
    assert len(curve) >= 4
    assert res.seconds > 0


def test_a_task_directory_belongs_to_one_function_and_another_ones_is_moved_aside(tmp_path, caplog):
    """A network task's directory is named by its place and name, which a changed function (prepared or fused
    otherwise) can keep: the budget a finished run asked counts for the function it tuned only, another
    function's directory is moved aside with its logs; a file from before functions were recorded counts while
    that function has records; a damaged one is reported."""
    from tvm_ttile.network import claim_task_dir as _claim_task_dir

    task_dir = str(tmp_path / "tasks" / "02-fused_conv2d_add_relu")
    asked = os.path.join(task_dir, "asked.json")

    def write(text):
        with open(asked, "w") as f:
            f.write(text)

    assert _claim_task_dir(task_dir, "1", has_records=False) == 0 and os.path.isdir(task_dir)
    write(json.dumps({"trials": 50, "workload": "1"}))
    assert _claim_task_dir(task_dir, "1", has_records=True) == 50
    assert _claim_task_dir(task_dir, "1", has_records=False) == 50
    assert _claim_task_dir(task_dir, "2", has_records=False) == 0  # function 1's directory, moved aside
    assert os.listdir(task_dir) == [] and os.path.exists(f"{task_dir}.earlier-1/asked.json")
    write(json.dumps({"trials": 50}))  # written before functions were recorded
    assert _claim_task_dir(task_dir, "2", has_records=True) == 50
    assert _claim_task_dir(task_dir, "3", has_records=False) == 0
    assert os.path.exists(f"{task_dir}.earlier-unrecorded/asked.json")
    write('{"trials": 5')
    with caplog.at_level(logging.WARNING):
        assert _claim_task_dir(task_dir, "3", has_records=True) == 0
    assert f"{asked} is damaged" in caplog.text


def test_two_first_runs_on_one_cache_measure_the_peak_one_at_a_time(tmp_path):
    script = textwrap.dedent(f"""
        import os, time
        from tvm_ttile import cpu
        def fake(c, repeat=5, threads=1, bursts=1, precision="fp32"):  # a slow measurement that says who made it
            with open({str(tmp_path / 'measured')!r}, "a") as f:
                f.write(f"{{os.getpid()}}\\n")
            time.sleep(2)
            return {{"peak_gflops": float(os.getpid())}}
        cpu.measure_peak = fake
        print(cpu.peak(cpu.detect_host())["peak_gflops"])
    """)
    env = dict(os.environ, TVM_TTILE_CACHE=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert len((tmp_path / "measured").read_text().split()) == 1  # measured once
    assert outs[0][0] == outs[1][0]  # the second read what the first measured
    assert any("another process is measuring" in o[1] for o in outs)


def test_a_work_dir_measured_on_another_processor_is_refused(tmp_path):
    """One target (x86-64-v4) covers several processors: the work dir's key names the one its timings were made
    on, and a run on another refuses it in one line; a key of an older tvm_ttile (no processor) is taken."""
    from tvm_ttile.workdir import WorkDirMismatch, claim, work_key

    class Processor:
        def __init__(self, name):
            self.name = name

        def describe(self):
            return {"cpu": self.name}

    target = {"kind": "llvm", "mcpu": "x86-64-v4"}
    claim(str(tmp_path / "w"), work_key(target, 1, None, Processor("AMD EPYC (family 26 model 2)")))
    claim(str(tmp_path / "w"), work_key(target, 1, None, Processor("AMD EPYC (family 26 model 2)")))
    with pytest.raises(WorkDirMismatch, match=r"on AMD EPYC \(family 26 model 2\); this run asks for .* on Intel "
                                              r"Xeon .*\(cpu differ\)") as e:
        claim(str(tmp_path / "w"), work_key(target, 1, None, Processor("Intel Xeon (Ice Lake)")))
    assert "\n" not in str(e.value)
    claim(str(tmp_path / "old"), work_key(target, 1))
    claim(str(tmp_path / "old"), work_key(target, 1, None, Processor("Intel Xeon (Ice Lake)")))

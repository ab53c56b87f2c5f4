"""Copy a tuning work dir with the re-timing undone: every record confirm.py re-timed gets back the run_secs it
had when tuning measured it (the first entry of confirmed.jsonl that names it), so that the same candidates
can be built with MetaSchedule's pick as it was before the re-timing (e.g. for benchmarks/tools/network_ab.py).

    python benchmarks/tools/unconfirmed_copy.py WORK_DIR OUT_DIR
"""
import json
import os
import shutil
import sys


def main():
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work_dir")
    ap.add_argument("out_dir")
    args = ap.parse_args()
    src, dst = args.work_dir, args.out_dir
    from tvm_ttile.confirm import CONFIRM_LOG, record_key
    from tvm_ttile.workdir import read_journal

    log = os.path.join(src, CONFIRM_LOG)
    if not os.path.exists(log):
        sys.exit(f"{log} not found: nothing was re-timed in {src}")
    original = {}
    for entry in read_journal(log):
        for c in entry["candidates"]:
            original.setdefault((entry["workload"], c["key"]), c["tuning_secs"])
    shutil.copytree(src, dst)
    os.remove(os.path.join(dst, CONFIRM_LOG))
    path = os.path.join(dst, "database_tuning_record.json")
    lines, restored = read_journal(path), 0
    for line in lines:
        secs = original.get((line[0], record_key(line[1])))
        if secs is not None:
            line[1][1], restored = secs, restored + 1
    with open(path, "w") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    print(f"{dst}: {restored} records given back their tuning-time run_secs")


if __name__ == "__main__":
    main()

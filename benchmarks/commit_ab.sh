#!/usr/bin/env bash
# A/B of two commits on one layer's tuning: `tvm-ttile tune conv2d --layer L --prepack --trials T --seed S` at BASE
# and at HEAD (git worktrees), seed by seed, the two of a seed back to back so machine noise hits both alike; then a
# table of % of peak of each run's verified best. 1 thread. Run nothing else heavy meanwhile.
#
#   BASE=56f4c53 LAYER=ResNet18-1 SEEDS="0 1 2 3" OUT=benchmarks/results/x.md bash benchmarks/commit_ab.sh
#   TABLE_ONLY=1 HEAD=<commit the run used> ...   # only the table, from the JSON outputs a run left in $WORK
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:?set BASE (a commit)} LAYER=${LAYER:?set LAYER} OUT=${OUT:?set OUT}
SEEDS=${SEEDS:-0 1 2 3} TRIALS=${TRIALS:-50} WORK=$(realpath -m "${WORK:-commit_ab_work}")
HEAD_COMMIT=${HEAD:-$(git rev-parse --short HEAD)}
if [ -z "${TABLE_ONLY:-}" ]; then
  mkdir -p "$WORK"
  [ -d "$WORK/base" ] || git worktree add -f "$WORK/base" "$BASE" > /dev/null
  for S in $SEEDS; do
    for side in base head; do
      tree=$([ $side = base ] && echo "$WORK/base" || pwd)
      rm -rf "$WORK/$side-$S"
      (cd "$tree" && PYTHONPATH="$tree" python -m tvm_ttile tune conv2d --layer "$LAYER" --prepack --trials "$TRIALS" \
         --seed "$S" --work-dir "$WORK/$side-$S" --json) > "$WORK/$side-$S.json"
    done
  done
fi
python - "$WORK" "$OUT" "$BASE" "$HEAD_COMMIT" "$LAYER" "$TRIALS" "$SEEDS" <<'PY'
import json, statistics, sys, time
work, out, base, head, layer, trials, seeds = sys.argv[1:]
rows, gains = [], []
for s in seeds.split():
    r = {side: json.load(open(f"{work}/{side}-{s}.json")) for side in ("base", "head")}
    pct = {side: r[side]["percent_of_peak"] if r[side]["verified"] else float("nan") for side in r}
    gains.append(pct["head"] - pct["base"])
    rows += [f"| {s} | {side} | {pct[side]:.1f} | {r[side]['verified']} | `{r[side]['scheme']}` |" for side in ("base", "head")]
from tvm_ttile import cpu as cpu_mod
cpu = cpu_mod.detect_host().describe()
lines = [f"# {layer}: tuning at {base} (base) against {head} (head), {trials} trials, 1 thread", "",
         f"Command: `BASE={base} LAYER={layer} SEEDS=\"{seeds}\" TRIALS={trials} OUT={out} bash benchmarks/commit_ab.sh` "
         f"(table written {time.strftime('%Y-%m-%d %H:%M')}); {cpu['cpu']} ({cpu['isa']}, {cpu['cores']} cores); weights prepacked; "
         "% of peak of each run's verified best, the two runs of a seed back to back.", "",
         "| seed | commit | % of peak | verified | best scheme |", "|---:|---|---:|---|---|", *rows, "",
         f"head minus base per seed: {', '.join(f'{g:+.1f}' for g in gains)} points; median {statistics.median(gains):+.1f}."]
open(out, "w").write("\n".join(lines) + "\n")
print(lines[-1])
PY

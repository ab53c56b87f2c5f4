#!/usr/bin/env bash
# How long tune-model takes to a tuned build, phase by phase, and what the build runs at: on a fresh cache and
# work dir, a model with the defaults and with zero trials, then a second model after a first on one cache (the
# record library). The builds are then timed side by side with ONNX Runtime (and BASE_WORK, a work dir tuned
# before, e.g. by an earlier version's defaults), each in a process of its own per round.
#
#   OUT=benchmarks/results/tuning_time_zen4 MODEL=resnet50.onnx [THREADS=2] [BASE_WORK=DIR] \
#     [FIRST=resnet18.onnx SECOND=resnet34.onnx] bash benchmarks/paper/tuning_time.sh
#
# Writes $OUT/<label>.{md,json} (each run's report, its phases inside), $OUT/<label>.time (GNU time's wall and
# memory), $OUT/side_by_side.md (network_ab.py) and $OUT/phases.md (phases_table.py: every run's phases).
set -euo pipefail
: "${OUT:?set OUT}" "${MODEL:?set MODEL}"
THREADS=${THREADS:-2}
mkdir -p "$OUT"
SCRATCH=$(mktemp -d)
name=$(basename "${MODEL%.onnx}")

run() {  # label, cache dir, extra tune-model options...
  local label=$1 cache=$2; shift 2
  echo "== $label: TVM_TTILE_CACHE=$cache tvm-ttile tune-model $* --threads $THREADS" | tee "$OUT/$label.time"
  TVM_TTILE_CACHE=$cache /usr/bin/time -v tvm-ttile tune-model "$@" --threads "$THREADS" --libraries onnxruntime \
    --work-dir "$SCRATCH/$label" > "$SCRATCH/$label.log" 2>> "$OUT/$label.time"
  cp "$SCRATCH/$label/report.md" "$OUT/$label.md"
  cp "$SCRATCH/$label/report.json" "$OUT/$label.json"
}

run "${name}_defaults" "$SCRATCH/cache_defaults" "$MODEL"
run "${name}_zero_trials" "$SCRATCH/cache_zero" "$MODEL" --trials-per-task 0
builds=("defaults=$SCRATCH/${name}_defaults" "zero_trials=$SCRATCH/${name}_zero_trials")
if [ -n "${BASE_WORK:-}" ]; then builds=("before=$BASE_WORK" "${builds[@]}"); fi
python benchmarks/tools/network_ab.py "$MODEL" "${builds[@]}" --threads "$THREADS" --rounds 5 \
  --out "$OUT/side_by_side.md"
labels=("$OUT/${name}_defaults.json" "$OUT/${name}_zero_trials.json")
if [ -n "${FIRST:-}" ] && [ -n "${SECOND:-}" ]; then
  first=$(basename "${FIRST%.onnx}") second=$(basename "${SECOND%.onnx}")
  run "${first}_first" "$SCRATCH/cache_library" "$FIRST"
  run "${second}_after_${first}" "$SCRATCH/cache_library" "$SECOND"
  labels+=("$OUT/${first}_first.json" "$OUT/${second}_after_${first}.json")
fi
python benchmarks/tools/phases_table.py "${labels[@]}" --out "$OUT/phases.md"

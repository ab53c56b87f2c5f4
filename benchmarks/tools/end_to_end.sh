#!/usr/bin/env bash
# Whole networks on this machine: tvm_ttile (50 trials per conv2d/matmul task, 16 per other task), MetaSchedule's
# tune_relax with as many trials in all, ONNX Runtime and torch, side by side, at $THREADS threads (default 1)
# and batch $BATCH (default 1). Reports land in $OUT/<model><suffix>.{md,json} (OUT: one directory per machine,
# default benchmarks/results/end_to_end, the Zen 5's; suffix -<T>threads / -batch<B> when not 1); databases in
# $OUT/work/<model><suffix> (resumable: a rerun only builds and times again). LIBRARIES: the library references
# (default onnxruntime,torch).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-benchmarks/results/end_to_end}
mkdir -p "$out"
# Darknet-19 at its ImageNet size (224), so that MetaSchedule's run fits the session; the Yolo9000 size is 544.
threads=${THREADS:-1}
batch=${BATCH:-1}
declare -A shape=([resnet18]=$batch,3,224,224 [darknet19]=${DARKNET_SHAPE:-$batch,3,224,224})
suffix=""
[ "$threads" != 1 ] && suffix="$suffix-${threads}threads"
[ "$batch" != 1 ] && suffix="$suffix-batch$batch"
for model in ${MODELS:-resnet18 darknet19}; do
    name="$model$suffix"
    tvm-ttile tune-model "$model" --input-shape "${shape[$model]}" --trials-per-task "${TRIALS:-50}" \
        --other-trials "${OTHER_TRIALS:-16}" --metaschedule-trials "${MS_TRIALS:-same}" --threads "$threads" \
        --libraries "${LIBRARIES:-onnxruntime,torch}" --work-dir "$out/work/$name"
    cp "$out/work/$name/report.md" "$out/$name.md"
    cp "$out/work/$name/report.json" "$out/$name.json"
done

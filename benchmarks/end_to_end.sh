#!/usr/bin/env bash
# Whole networks (issue #5), 1 thread, this machine: tvm_ttile (50 trials per conv2d/matmul task, 16 per other
# task), MetaSchedule's tune_relax with as many trials in all, ONNX Runtime and torch, side by side.
# Reports land in $OUT/<model>.{md,json} (OUT: one directory per machine, default benchmarks/results/end_to_end,
# the Zen 5's); databases in $OUT/work/<model> (resumable: a rerun only builds and times again).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-benchmarks/results/end_to_end}
mkdir -p "$out"
# Darknet-19 at its ImageNet size (224), so that MetaSchedule's run fits the session; the Yolo9000 size is 544.
declare -A shape=([resnet18]=1,3,224,224 [darknet19]=${DARKNET_SHAPE:-1,3,224,224})
for model in ${MODELS:-resnet18 darknet19}; do
    tvm-ttile tune-model "$model" --input-shape "${shape[$model]}" --trials-per-task "${TRIALS:-50}" \
        --other-trials "${OTHER_TRIALS:-16}" --metaschedule-trials "${MS_TRIALS:-same}" --threads 1 \
        --work-dir "$out/work/$model"
    cp "$out/work/$model/report.md" "$out/$model.md"
    cp "$out/work/$model/report.json" "$out/$model.json"
done

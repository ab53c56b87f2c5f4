#!/usr/bin/env bash
# Rankers judged on the 8 compare layers (1 thread, this machine): 200 random tvm_ttile schemes per layer measured
# once each (prepacked weights), then benchmarks/paper/ranking_eval.py ranks them with models trained on other networks'
# records (TRAIN: tvm_ttile work dirs of this CPU, e.g. tune-model's) and, with RETIME=1, builds the zero-trial
# picks and times them beside the best of the 200. Resumes: a layer's 200 are measured once into $DIRS/<layer>.
# Run nothing else heavy meanwhile.
set -euo pipefail
cd "$(dirname "$0")/../.."
DIRS=${DIRS:-ranking_work}
OUT=${OUT:-benchmarks/results/ranking}
LAYERS=${LAYERS:-ResNet18-2 ResNet18-4 ResNet18-6 ResNet18-9 ResNet18-12 Yolo9000-12 Yolo9000-13 Yolo9000-18}
for L in $LAYERS; do
  tvm-ttile tune conv2d --layer "$L" --prepack --trials 200 --seed 0 --work-dir "$DIRS/$L" --json > /dev/null
done
python benchmarks/paper/ranking_eval.py --eval $(for L in $LAYERS; do echo "$DIRS/$L"; done) --train ${TRAIN:?set TRAIN} \
    --out "$OUT" ${RETIME:+--retime}

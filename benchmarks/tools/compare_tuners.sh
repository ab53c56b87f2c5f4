#!/usr/bin/env bash
# Side-by-side comparison recorded in $OUT (default benchmarks/results/compare/, the Zen 5's; 1 thread, this
# machine). PREPACK=1: weights packed once at build time, as in a network.
# OpenBLAS overrides set on these machines slow numpy down; unset them for this command only.
set -euo pipefail
cd "$(dirname "$0")/../.."
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE tvm-ttile compare --layers "${LAYERS:-ResNet18-2,Yolo9000-12}" \
    --systems "${SYSTEMS:-tvm_ttile,metaschedule,onednn,onnxruntime}" --budget "${BUDGET:-300}" \
    --ttile-budget "${TTILE_BUDGET:-50}" --seeds "${SEEDS:-1}" \
    --baseline-seeds "${BASELINE_SEEDS:-${SEEDS:-1}}" --out "${OUT:-benchmarks/results/compare}" ${PREPACK:+--prepack}

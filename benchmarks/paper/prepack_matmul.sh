#!/usr/bin/env bash
# The TTile matmul space with the weights in the operator's layout and prepacked (--prepack: constants packed
# once at build time, as in a network), against numpy's BLAS, 1 thread; two `tvm-ttile compare` runs on the
# same shapes, each with numpy timed side by side. Results: benchmarks/results/prepack_matmul/.
set -euo pipefail
cd "$(dirname "$0")/../.."
shapes="${SHAPES:-square-1024,gnmt-128,bert-ffn2,bert-qkv}"
out=benchmarks/results/prepack_matmul
for mode in layout prepack; do
    flag=$([ "$mode" = prepack ] && echo --prepack || true)
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE tvm-ttile compare --layers "$shapes" --systems tvm_ttile,numpy \
        --budget "${BUDGET:-40}" --seeds 1 $flag --out "$out/$mode" > /dev/null
done
python benchmarks/tools/prepack_table.py "$out"

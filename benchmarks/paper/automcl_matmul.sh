#!/usr/bin/env bash
# Issue #6's table: AutoMCL (its six computes, analytic space, REG tuner), the TTile matmul space, MetaSchedule
# at the same budget and numpy's BLAS on the matmul shapes of shared/benchmarks, 1 thread, side by side.
# TTile and MetaSchedule tune the prepacked workload (weights packed once at build time, as in a network);
# AutoMCL runs the dense layout W[N,K] its computes are written for and packs inside the call, as in its paper.
# Per-compute bests are in each <out>/work/<isa>-automcl-<shape>-seed0/automcl.json.
#   OUT=benchmarks/results/automcl_matmul_icelake BUDGET=60 bash benchmarks/paper/automcl_matmul.sh
# The compare run resumes from <out>/work (tuners with fewer records than BUDGET are tuned further).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-benchmarks/results/automcl_matmul}"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE tvm-ttile compare \
    --layers "${SHAPES:-square-512,square-1024,gnmt-128,gnmt-320,gnmt-2048,bert-qkv,bert-ffn1,bert-ffn2,fc-batch16,resnet18-fc}" \
    --systems tvm_ttile,automcl,metaschedule,numpy --budget "${BUDGET:-60}" --seeds 1 --prepack --out "$OUT"
python benchmarks/tools/automcl_table.py "$OUT"

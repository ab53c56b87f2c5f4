#!/usr/bin/env bash
# Issue #6's table: AutoMCL (its six computes, analytic space, REG tuner), the TTile matmul space, MetaSchedule
# at the same budget and numpy's BLAS on the matmul shapes of shared/benchmarks, 1 thread, side by side.
# AutoMCL runs the dense layout W[N,K] its computes are written for; per-compute bests are in each
# work/avx512-automcl-<shape>-seed0/automcl.json. Results: benchmarks/results/automcl_matmul/.
set -euo pipefail
cd "$(dirname "$0")/.."
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE tvm-ttile compare \
    --layers "${SHAPES:-square-512,square-1024,gnmt-128,gnmt-320,gnmt-2048,bert-qkv,bert-ffn1,bert-ffn2,fc-batch16,resnet18-fc}" \
    --systems tvm_ttile,automcl,metaschedule,numpy --budget "${BUDGET:-60}" --seeds 1 \
    --out benchmarks/results/automcl_matmul
python benchmarks/automcl_table.py benchmarks/results/automcl_matmul

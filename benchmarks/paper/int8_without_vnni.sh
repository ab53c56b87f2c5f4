#!/usr/bin/env bash
# int8 without VNNI (vpmaddubsw + vpmaddwd, weights within +-64) beside VNNI and fp32 on one machine: the peaks of
# each instruction, their microkernel catalogs, and ResNet-18 layers tuned in each. A machine with VNNI measures
# the no-VNNI path through a target without it (AVX-512: mcpu skylake-avx512; AVX2: --isa avx2). Writes
# $OUT/{peaks,catalogs,layers}.md (OUT default benchmarks/results/int8_without_vnni); LAYERS (default
# "ResNet18-2 ResNet18-9"), TRIALS (50).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-benchmarks/results/int8_without_vnni}
trials=${TRIALS:-50}
mkdir -p "$out"
skylake='{"kind":"llvm","mcpu":"skylake-avx512"}'
# name | the flags that pick the CPU model | precision
paths=("fp32 AVX-512|--isa avx512|fp32" "int8 VNNI (AVX-512)|--isa avx512|int8"
       "int8 vpmaddubsw (AVX-512BW, no VNNI)|--target $skylake|int8"
       "fp32 AVX2|--isa avx2|fp32" "int8 vpmaddubsw (AVX2, no VNNI)|--isa avx2|int8")
{
    echo "# Peaks of each instruction, 1 thread ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), flags:"\
         "$(grep -o -w -E 'avx512_vnni|avx_vnni|avx512bw|avx2' /proc/cpuinfo | sort -u | xargs))"
    echo
    for p in "${paths[@]}"; do
        IFS='|' read -r name flags precision <<< "$p"
        echo "## $name: \`tvm-ttile peak $flags --precision $precision\`"
        echo; echo '```'; tvm-ttile peak $flags --precision "$precision" | grep -E '^(peak|kept)'; echo '```'; echo
    done
} > "$out/peaks.md"
{
    echo "# int8 microkernel catalogs, 1 thread (best of each, % of that instruction's peak)"
    echo
    for p in "${paths[@]}"; do
        IFS='|' read -r name flags precision <<< "$p"
        [ "$precision" = int8 ] || continue
        for op in matmul conv2d; do
            echo "## $name, $op: \`tvm-ttile microkernels --op $op $flags --precision int8 --top 5\`"
            echo; echo '```'; tvm-ttile microkernels --op "$op" $flags --precision int8 --top 5 2>/dev/null \
                | sed -n '/^==/,/^\.\.\./p'; echo '```'; echo
        done
    done
} > "$out/catalogs.md"
{
    echo "# ResNet-18 layers tuned in each path, 1 thread, $trials trials each (each verified against numpy;"\
         "int8 exactly)"
    echo
    for layer in ${LAYERS:-ResNet18-2 ResNet18-9}; do
        for p in "${paths[@]}"; do
            IFS='|' read -r name flags precision <<< "$p"
            cmd="tvm-ttile tune conv2d --layer $layer $flags --precision $precision --trials $trials"
            echo "## $layer, $name: \`$cmd\`"
            echo; echo '```'; tvm-ttile tune conv2d --layer "$layer" $flags --precision "$precision" \
                --trials "$trials" 2>&1 | grep -E '^(peak|[A-Za-z0-9-]+:|scheme|verified|trials|warning)' ; echo '```'; echo
        done
    done
} > "$out/layers.md"

#!/usr/bin/env bash
# Build workers bound to core 0 (OLD_TREE: a checkout without measure.unpin_build_worker) against build workers
# with every CPU (this tree), alternated ROUNDS times: the same small compare run (ResNet18-2, tvm_ttile and
# template-random, 32 trials each, the peak measured first as compare does). Wall time and tuning seconds.
#   OLD_TREE=/work/ab bash benchmarks/build_binding_ab.sh > benchmarks/results/build_binding_ab_zen5.txt
set -uo pipefail
OLD_TREE="${OLD_TREE:?a checkout of the code before the change}"
WORK="$(mktemp -d)"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), $(nproc) CPUs"
echo "command: tvm-ttile compare --layers ResNet18-2 --systems tvm_ttile,template-random --budget 32 --retime-rounds 1 --confirm-top 0 --out DIR"
echo "columns of compare.md: template-random, tvm_ttile: % of peak (tuning seconds)"
for r in $(seq "${ROUNDS:-2}"); do
  for v in bound unbound; do
    if [ "$v" = bound ]; then PP="$OLD_TREE"; else PP=""; fi
    start=$(date +%s.%N)
    (cd /tmp && PYTHONPATH=$PP tvm-ttile compare --layers ResNet18-2 --systems tvm_ttile,template-random --budget 32 \
        --retime-rounds 1 --confirm-top 0 --out "$WORK/$v$r" > "$WORK/$v$r.log" 2>&1)
    echo "$v round $r: rc=$? $(echo "$(date +%s.%N) - $start" | bc) s total; $(grep -a '^| ResNet18-2' "$WORK/$v$r.log" | head -1)"
  done
done

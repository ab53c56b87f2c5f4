#!/usr/bin/env bash
# bf16 networks side by side: torchvision definitions exported to ONNX (seeded random weights), then
# `tvm-ttile tune-model --precision bf16` on the fp32 file against OpenVINO's default (bf16 on an AVX512_BF16 CPU),
# OpenVINO fp32 and ONNX Runtime fp32 on the same file, with top-1 and error against the fp32 model (its untuned TVM
# build) over 100 inputs. Needs a CPU with AVX512_BF16 (Zen 4, Zen 5): elsewhere tune-model refuses in one line.
# Reports land in $OUT/<model>_bf16_<T>thread.{md,json} (OUT default benchmarks/results/bf16_networks), models and
# work dirs in $OUT/work (resumable). MODELS (default "resnet18 resnet50 mobilenet_v2"), THREADS (1), STRATEGY (ttile).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-benchmarks/results/bf16_networks}
threads=${THREADS:-1}
work="$out/work"
mkdir -p "$work"
for model in ${MODELS:-resnet18 resnet50 mobilenet_v2}; do
    fp32="$work/$model.onnx"
    [ -f "$fp32" ] || python benchmarks/tools/torchvision_onnx.py "$model" "$fp32"
    name="${model}_bf16_${threads}thread"
    cmd=(tvm-ttile tune-model "$fp32" --precision bf16 --libraries openvino,openvino-fp32,onnxruntime
         --strategy "${STRATEGY:-ttile}" --threads "$threads" --work-dir "$work/$name")
    "${cmd[@]}"
    { echo "Command: \`$0\` with MODELS=$model THREADS=$threads, i.e. \`${cmd[*]}\`"; echo;
      cat "$work/$name/report.md"; } > "$out/$name.md"
    cp "$work/$name/report.json" "$out/$name.json"
done

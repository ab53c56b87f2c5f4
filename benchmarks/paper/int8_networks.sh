#!/usr/bin/env bash
# Quantized networks side by side: each model exported (torchvision definitions, seeded random weights; ResNet-18
# the built-in one), quantized as ONNX Runtime users do (quantize_static, QDQ, per-channel s8, u8, random
# calibration), then `tvm-ttile tune-model` on the QDQ file against ONNX Runtime's and OpenVINO's int8 on the same
# file, with top-1 and error against the fp32 model over 100 inputs. Reports land in $OUT/<model>_int8_<T>thread.{md,json}
# (OUT default benchmarks/results/int8_networks), models and work dirs in $OUT/work (resumable).
# MODELS (default "resnet18 resnet50 mobilenet_v2"; those in BUILTIN, default "resnet18 transformer", are
# tvm_ttile's built-in models, the others exported from torchvision), THREADS (1), STRATEGY (ttile), FORMAT (QDQ, QOperator, or dynamic: quantize_dynamic's
# MatMulInteger, as transformers are quantized).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-benchmarks/results/int8_networks}
threads=${THREADS:-1}
format=${FORMAT:-QDQ}
work="$out/work"
mkdir -p "$work"
for model in ${MODELS:-resnet18 resnet50 mobilenet_v2}; do
    fp32="$model"  # a built-in model's name, or the torchvision export
    if [[ " ${BUILTIN:-resnet18 transformer} " != *" $model "* ]]; then
        fp32="$work/$model.onnx"
        [ -f "$fp32" ] || python benchmarks/tools/torchvision_onnx.py "$model" "$fp32"
    fi
    q="$work/${model}_int8_$format.onnx"
    how=(--format "$format")
    [ "$format" = dynamic ] && how=(--dynamic)
    [ -f "$q" ] || python benchmarks/tools/quantize_model.py "$fp32" "$q" "${how[@]}"
    name="${model}_int8${format/QDQ/}_${threads}thread"
    cmd=(tvm-ttile tune-model "$q" --libraries onnxruntime,openvino --fp32-model "$fp32" --strategy "${STRATEGY:-ttile}"
         --threads "$threads" --work-dir "$work/$name")
    "${cmd[@]}" || echo "tune-model exited with $? (its report says why); the report is kept"
    { echo "Command: \`$0\` with MODELS=$model THREADS=$threads FORMAT=$format, i.e. \`${cmd[*]}\`"; echo;
      cat "$work/$name/report.md"; } > "$out/$name.md"
    cp "$work/$name/report.json" "$out/$name.json"
done

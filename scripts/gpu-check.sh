#!/usr/bin/env bash
# GPU acceptance check in one command: logprob parity CPU vs the CUDA or WebGPU provider on the
# tiny GPT-2 / Qwen3 / Qwen2 / Llama models (float32, and float16 / bfloat16 weight inputs), a
# training step on both, and Qwen3-0.6B decode throughput. Prints one summary line; exit 0 OK,
# 1 a check failed, 2 no GPU provider here.
#   scripts/gpu-check.sh [--device auto|cuda|webgpu] [--tol 1e-3] [--skip-scale]
#     [--weights-dtype float32|float16|bfloat16]   (the decode-throughput policy's weights)
# CUDA needs the provider libraries: ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node
set -euo pipefail
cd "$(dirname "$0")/.."
built=dist/scripts/gpu-check.js
if [ ! -f "$built" ] || [ -n "$(find src scripts bench -name '*.ts' -newer "$built" -print -quit)" ]; then
  npm run build --silent >&2
fi
exec node "$built" "$@"

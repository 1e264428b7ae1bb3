#!/usr/bin/env bash
# GPU acceptance check in one command, made for a BARE GPU machine holding a copy of the working
# tree: CPU/GPU logprob parity on the tiny GPT-2 / Qwen3 / Qwen2 / Llama models (float32, float16
# and bfloat16 weight inputs), a tiny training step on both devices with its peak GPU memory, and
# decode and training throughput of the Qwen3-0.6B shape. Prints ONE summary line on stdout
# (`gpu-check: OK ...`, `gpu-check: FAIL ...`, or `SKIP: <reason>`); exit 0 OK, 1 a check failed
# or something is missing (the line says what), 2 no GPU here.
#   scripts/gpu-check.sh [--device auto|cuda|webgpu] [--tol 1e-3] [--weights-dtype float32|float16|bfloat16]
# Prepare HERE with scripts/gpu-fetch-loader.sh (fills .gl/), then on the device tool: carry [".gl"].
# Every stage runs under its own timeout (the whole check stays inside 8 minutes); a stage that
# runs out is reported as such, never a hang. Stage logs: $GPU_CHECK_LOGS (default /tmp/gpu-check).
# GPU_CHECK_STAGES='parity:60 train:60' runs only those stages (name:seconds), e.g. to rerun one.
set -uo pipefail
cd "$(dirname "$0")/.."

# 1. A GPU at all? Checked first, so a machine without one answers at once.
if ! compgen -G '/dev/nvidia[0-9]*' >/dev/null && ! command -v nvidia-smi >/dev/null 2>&1; then
  echo 'SKIP: no GPU here (nvidia-smi absent, no /dev/nvidia*)'
  exit 2
fi
fail() {
  echo "gpu-check: FAIL $*"
  exit 1
}
logs=${GPU_CHECK_LOGS:-/tmp/gpu-check}
mkdir -p "$logs"

# 2. The Vulkan loader (ORT's WebGPU provider is Dawn on Vulkan), from .gl/ where it is absent.
if ! ldconfig -p | grep -q 'libvulkan\.so\.1'; then
  compgen -G '.gl/*.deb' >/dev/null ||
    fail 'no Vulkan loader (libvulkan.so.1) and no .gl/*.deb: run scripts/gpu-fetch-loader.sh where there is network, then carry .gl'
  [ "$(id -u)" = 0 ] || fail 'no Vulkan loader, and unpacking .gl/*.deb into / needs root'
  for f in .gl/*.deb; do dpkg -x "$f" / || fail "dpkg -x $f failed"; done
  ldconfig
  ldconfig -p | grep -q 'libvulkan\.so\.1' || fail 'unpacked .gl/*.deb but libvulkan.so.1 is still not found'
fi
# The NVIDIA ICD where the device machines mount the driver, unless the caller chose one.
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then export VK_DRIVER_FILES=$icd; fi

# 3. node and the check itself: the repository's build where node_modules is real, else the
# bundle from .gl/akbe-runtime.tar.xz (node_modules here is a symlink that travels without its files).
if [ -f node_modules/onnxruntime-node/package.json ] && command -v node >/dev/null 2>&1; then
  built=dist/scripts/gpu-check.js
  if [ ! -f "$built" ] || [ -n "$(find src scripts bench -name '*.ts' -newer "$built" -print -quit)" ]; then
    timeout 180 npm run build --silent >"$logs/build.log" 2>&1 || fail "npm run build failed (see $logs/build.log)"
  fi
  run=(node "$built")
elif [ -f .gl/akbe-runtime.tar.xz ]; then
  rt=/tmp/akbe-gl-runtime
  rm -rf "$rt" && mkdir -p "$rt"
  # python3's tarfile reads xz where the xz program may be missing.
  timeout 120 python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    .gl/akbe-runtime.tar.xz "$rt" 2>"$logs/unpack.log" ||
    timeout 120 tar -xJf .gl/akbe-runtime.tar.xz -C "$rt" 2>>"$logs/unpack.log" ||
    fail "could not unpack .gl/akbe-runtime.tar.xz (see $logs/unpack.log)"
  here=$(find src scripts/gpu-check.ts -name '*.ts' 2>/dev/null | LC_ALL=C sort | xargs cat 2>/dev/null | sha256sum | cut -c1-16)
  [ "$(cat "$rt/app/SOURCES" 2>/dev/null)" = "$here" ] ||
    echo 'gpu-check: note: the bundle was built from other sources than this tree (re-run scripts/gpu-fetch-loader.sh)' >&2
  run=("$rt/bin/node" "$rt/app/gpu-check.mjs")
else
  fail 'no node_modules and no .gl/akbe-runtime.tar.xz: run scripts/gpu-fetch-loader.sh here, then carry .gl'
fi

# 4. The stages. Budget (seconds): probe 45, parity 60, half 60, train 60, decode 120,
# train-speed 120 = 465 < 480.
mem_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -n 1; }
stage() { # stage NAME SECONDS [extra args]: its one line into $line, its exit code returned
  local name=$1 secs=$2 rc
  shift 2
  timeout -k 5 "$secs" "${run[@]}" --stage "$name" "$@" >"$logs/$name.out" 2>"$logs/$name.err"
  rc=$?
  line=$(tail -n 1 "$logs/$name.out")
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then line="$name: FAIL timed out after ${secs}s (see $logs/$name.err)"; fi
  [ -n "$line" ] || line="$name: FAIL exit $rc, no output (see $logs/$name.err)"
  return "$rc"
}
stage probe 45 "$@"
rc=$?
if [ "$rc" = 2 ]; then echo "$line" && exit 2; fi
[ "$rc" = 0 ] || fail "$line"
device=${line#probe: }
summary=("device=$device")
ok=1
for s in ${GPU_CHECK_STAGES:-parity:60 half:60 train:60 decode:120 train-speed:120}; do
  name=${s%%:*}
  # GPU memory sampled every 0.2 s while the stage runs: its peak over the idle level.
  base=$(mem_used)
  (while sleep 0.2; do mem_used; done >"$logs/$name.mem") &
  sampler=$!
  stage "$name" "${s#*:}" --device "$device" "$@" || ok=0
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  top=$(sort -n "$logs/$name.mem" | tail -n 1)
  peak=''
  if [ -n "$base" ] && [ -n "$top" ]; then peak=", peak GPU memory +$((top - base)) MiB"; fi
  summary+=("$line$peak")
done
joined=$(printf '%s; ' "${summary[@]}")
if [ "$ok" = 1 ]; then echo "gpu-check: OK ${joined%; }"; else echo "gpu-check: FAIL ${joined%; }"; fi
[ "$ok" = 1 ]

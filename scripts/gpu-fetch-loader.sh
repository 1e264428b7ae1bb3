#!/usr/bin/env bash
# Run HERE (a machine with network), before a GPU run: fills .gl/ (gitignored) with what a bare
# GPU machine lacks and cannot download (it reaches no registry):
#   .gl/*.deb               Debian's Vulkan loader (libvulkan1: ORT's WebGPU provider is Dawn on
#                           Vulkan) and the GL/EGL dispatch libraries the NVIDIA ICD links against;
#                           scripts/gpu-check.sh unpacks them with `dpkg -x` where libvulkan is absent
#   .gl/akbe-runtime.tar.xz node itself, scripts/gpu-check.ts bundled into one file (esbuild), and
#                           onnxruntime-node's linux-x64 binaries: node_modules here is a symlink to
#                           a shared install, and a symlink travels without what it points to
# Then carry it: the device tool's `run` with carry [".gl"], command `scripts/gpu-check.sh`.
# Re-run after changing src/gpu or scripts/gpu-check.ts (gpu-check.sh warns on a stale bundle).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gl /tmp/akbe-gl-apt/partial
rm -f .gl/*.deb
# amd64 lists in a private folder: the GPU machine is x86-64 whatever this machine is.
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/akbe-gl-apt)
apt-get "${o[@]}" update -qq
(cd .gl && apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/app/node_modules"
cp "$(command -v node)" "$stage/bin/node"
node_modules/.bin/esbuild scripts/gpu-check.ts --bundle --platform=node --format=esm --target=node20 \
  --external:onnxruntime-node --outfile="$stage/app/gpu-check.mjs" --log-level=warning
ort=node_modules/onnxruntime-node
mkdir -p "$stage/app/node_modules/onnxruntime-node/bin/napi-v6/linux"
cp -r "$ort/package.json" "$ort/dist" "$stage/app/node_modules/onnxruntime-node/"
cp -r "$ort/bin/napi-v6/linux/x64" "$stage/app/node_modules/onnxruntime-node/bin/napi-v6/linux/"
mkdir -p "$stage/app/node_modules/onnxruntime-common"
cp -r node_modules/onnxruntime-common/package.json node_modules/onnxruntime-common/dist \
  "$stage/app/node_modules/onnxruntime-common/"
# What the bundle was built from: gpu-check.sh compares it with the tree it runs in (no .git there).
find src scripts/gpu-check.ts -name '*.ts' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16 >"$stage/app/SOURCES"
tar -C "$stage" -cf - bin app | xz -6 -T0 >.gl/akbe-runtime.tar.xz
du -ch .gl/* | tail -n 1 | sed 's/^/gpu-fetch-loader: .gl holds /'

#!/usr/bin/env bash
# Installs bitnet-dsl's build and test dependencies from Debian 12 packages. Idempotent:
# packages already present are left alone and apt is not touched when nothing is missing.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config clang
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers
  glslang-dev glslang-tools spirv-tools
  libfmt-dev libgtest-dev libbenchmark-dev libssl-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"

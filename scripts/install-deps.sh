#!/usr/bin/env bash
# Installs bitnet-dsl's build and test dependencies from Debian 12 packages. Idempotent:
# packages already present are left alone and apt is not touched when nothing is missing.
# Then the npm packages of the serve tests' client (tests/serve/client: the official `openai`
# package, pinned by its package-lock.json).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  build-essential cmake ninja-build pkg-config clang curl
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers
  glslang-dev glslang-tools spirv-tools
  libfmt-dev libgtest-dev libbenchmark-dev libssl-dev
  libcpp-httplib-dev nlohmann-json3-dev
)
# Node and npm run the serve tests' OpenAI client. A node installed otherwise (e.g. nodesource,
# which brings its own npm) is kept: Debian's npm would conflict with it.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# `npm ci` installs exactly the lock file; skipped when node_modules was installed from this one.
client=tests/serve/client
stamp=$client/node_modules/.installed-from-lock
if [[ "$(sha256sum < "$client/package-lock.json")" != "$(cat "$stamp" 2>/dev/null)" ]]; then
  echo "install-deps: npm ci in $client"
  (cd "$client" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  sha256sum < "$client/package-lock.json" > "$stamp"
fi

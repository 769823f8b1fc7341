#!/usr/bin/env bash
# The README's first command: dependencies, configure, build, then the main job on a built-in
# default (bitnet-dsl demo), so a newcomer sees the whole path work.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
scripts/install-deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release}
cmake --build "$build"
"$build"/tools/bitnet-dsl demo

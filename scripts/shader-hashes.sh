#!/usr/bin/env bash
# Prints every catalog op with the SHA-256 of its GLSL (the shader cache key), one per line, so
# that a refactor can show it changed no kernel:
#   scripts/shader-hashes.sh build/tools/bitnet-dsl --no-device > before.txt   # and without, or with --exact-norm
#   ... change ...; then the same into after.txt; diff before.txt after.txt
set -euo pipefail
bin=${1:?usage: shader-hashes.sh BITNET_DSL [--no-device | --device N]}
shift
for op in $("$bin" shaders --no-device | awk '{print $1}'); do
  echo "$op $("$bin" shaders --op "$op" "$@" | grep -m1 -o 'sha256: [0-9a-f]*')"
done

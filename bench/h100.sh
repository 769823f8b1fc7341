#!/usr/bin/env bash
# Runs bitnet-dsl-bench on a machine with a GPU but without Debian's dev packages (the H100 box of
# ../shared/DEVICE.md). Two steps:
#
#   bench/h100.sh pack            # here, on Debian 12: build Release, gather the binaries and the
#                                 # shared libraries Debian ships only as .so into .h100/ (ignored)
#   bench/h100.sh run [ARGS...]   # there, in the checkout root, with .h100 (and .gl, the Vulkan
#                                 # loader .debs) carried: unpack the loader, run the bench; results
#                                 # go to $OUT (or .h100/out) as JSON plus the console table
#   bench/h100.sh run-tests       # there: the device suites, with the validation layer when .vl
#                                 # (Debian's vulkan-validationlayers .deb) is carried too
#
# ARGS go to bitnet-dsl-bench (e.g. --benchmark_filter=decode). The synthetic 2B model is written
# on the GPU machine's disk by the bench itself (1.2 GB, seconds), never shipped.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  pack)
    cmake -S . -B build-h100 -G Ninja -DCMAKE_BUILD_TYPE=Release -DBDSL_BUILD_TESTS=OFF >/dev/null
    cmake --build build-h100 --target bitnet-dsl bitnet-dsl-bench
    rm -rf .h100 && mkdir -p .h100/lib
    cp build-h100/bench/bitnet-dsl-bench build-h100/tools/bitnet-dsl .h100/
    strip .h100/bitnet-dsl-bench .h100/bitnet-dsl
    # The device test suites too, when this checkout's build/ has them (they find golden data
    # under the source path they were built in: `run-tests` links it there).
    for t in device runtime codegen ops_common ops_ternary ops_attention ops_head ops_experimental bitnet serve; do
      [[ -x build/tests/$t/bdsl_${t}_tests ]] && cp build/tests/$t/bdsl_${t}_tests .h100/ && strip .h100/bdsl_${t}_tests
    done
    echo "$PWD" > .h100/source_dir
    for lib in $(ldd .h100/bitnet-dsl-bench | awk '/libfmt|libbenchmark|libcpp-httplib|libbrotli|libssl|libcrypto|libz\./ {print $3}'); do
      cp -L "$lib" .h100/lib/
    done
    grep -qx '/.h100/' .git/info/exclude 2>/dev/null || echo '/.h100/' >> .git/info/exclude
    du -sh .h100
    ;;
  run)
    shift
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export LD_LIBRARY_PATH="$PWD/.h100/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    out=${OUT:-.h100/out}
    mkdir -p "$out"
    .h100/bitnet-dsl devices -v | tee "$out/device.txt"
    # Correctness first: the tiny model against the committed golden data, on this GPU.
    .h100/bitnet-dsl make-model /tmp/bdsl-tiny.gguf --preset tiny >/dev/null
    .h100/bitnet-dsl validate -m /tmp/bdsl-tiny.gguf --golden golden/data/tiny | tee "$out/validate.txt"
    .h100/bitnet-dsl-bench --benchmark_out="$out/bench.json" --benchmark_out_format=json "$@" 2>&1 | tee "$out/bench.txt"
    ;;
  run-tests)
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export LD_LIBRARY_PATH="$PWD/.h100/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # The Khronos validation layer, where .vl holds Debian's vulkan-validationlayers .deb (carried):
    # unpacked beside, not over /, and found through VK_LAYER_PATH. The suites fail on any message.
    if compgen -G ".vl/*.deb" >/dev/null; then
      mkdir -p /tmp/vl && dpkg -x .vl/*.deb /tmp/vl
      export VK_LAYER_PATH=/tmp/vl/usr/share/vulkan/explicit_layer.d
      export LD_LIBRARY_PATH="/tmp/vl/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH"
    fi
    src=$(cat .h100/source_dir)
    [[ -e $src ]] || { mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; }
    mkdir -p build/tools && cp .h100/bitnet-dsl build/tools/  # the CLI tests run the program
    status=0
    for t in .h100/bdsl_*_tests; do "$t" --gtest_brief=1 2>&1 | tail -25 || status=1; done
    exit $status
    ;;
  *)
    echo "usage: bench/h100.sh pack | run [bitnet-dsl-bench args] | run-tests" >&2
    exit 2
    ;;
esac

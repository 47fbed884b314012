#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in build-fuzz/ and runs
# each for SECONDS (default 15) from the committed seed corpus. Exits non-zero on
# any finding; crash inputs are left in build-fuzz/findings/.
#   scripts/fuzz.sh          # the short run `make test` does (ctest: fuzz_short)
#   scripts/fuzz.sh 600      # the longer run for bench/
# HPOD_FUZZ_JOBS=N builds with N compilers at once (default: one per core).
set -euo pipefail
seconds=${1:-15}
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/build-fuzz"
mkdir -p "$build"
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHPOD_BUILD_FUZZERS=ON -DHPOD_BUILD_TESTS=OFF > "$build/configure.log" 2>&1 \
    || { cat "$build/configure.log"; exit 1; }
fi
cmake --build "$build" -j"${HPOD_FUZZ_JOBS:-$(nproc)}" --target request_decoder_fuzzer sigv4_fuzzer > "$build/build.log" 2>&1 \
  || { tail -50 "$build/build.log"; exit 1; }
mkdir -p "$build/findings"
status=0
for f in request_decoder sigv4; do
  corpus="$build/corpus/$f"
  mkdir -p "$corpus"
  cp -n "$top/fuzz/corpus/$f/"* "$corpus/" 2>/dev/null || true
  echo "fuzz: $f for ${seconds}s"
  if ! "$build/fuzz/${f}_fuzzer" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
      -rss_limit_mb=2048 -artifact_prefix="$build/findings/$f-" -print_final_stats=1 \
      "$corpus" > "$build/findings/$f.log" 2>&1; then
    echo "fuzz: $f FOUND A PROBLEM:"; tail -40 "$build/findings/$f.log"; status=1
  else
    grep -E "stat::number_of_executed_units|Done" "$build/findings/$f.log" | tail -2 || true
  fi
done
exit $status

#!/usr/bin/env bash
# Builds the cargo-fuzz targets in fuzz/ and runs each for a short time from its
# committed corpus; fails on any crash (panic, failed assertion, timeout, OOM).
# Usage: scripts/fuzz.sh [seconds-per-target] [target...]   (default 20 s, all)
# FUZZ_JOBS=n runs n targets at once (default 1; one libFuzzer process each).
# Long runs and their numbers: fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

secs="${1:-20}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(s1ap_decode nas_decode gtpu_datapath sctp_endpoint mme_flow config_parse diameter_decode)
fi
jobs="${FUZZ_JOBS:-1}"

# cargo-fuzz needs nightly flags; our stable toolchain accepts them with this.
export RUSTC_BOOTSTRAP=1
# The dev profile of fuzz/Cargo.toml (opt-level 1): a build short enough for the test
# command. No sanitizer (safe Rust but for a few data-path blocks; ASan is for long
# runs), debug assertions and overflow checks on, as in the tests.
flags=(--dev -s none)
cargo fuzz build "${flags[@]}"

# New inputs go to a scratch dir, so the committed corpus stays as it is.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

run() {
  local t="$1" log="$scratch/$1.log"
  mkdir -p "$scratch/$t" "$scratch/$t.artifacts"
  if cargo fuzz run "${flags[@]}" "$t" "$scratch/$t" "corpus/$t" -- \
      -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$scratch/$t.artifacts/" -print_final_stats=1 >"$log" 2>&1; then
    local runs rate
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    echo "fuzz $t: ok, $runs inputs in ${secs}s ($rate/s)"
    return 0
  fi
  echo "fuzz $t: FAILED"
  grep -E -A12 "panicked|ERROR: libFuzzer" "$log" | head -40 || tail -40 "$log"
  for a in "$scratch/$t.artifacts"/*; do
    [ -e "$a" ] || continue
    mkdir -p "artifacts/$t"
    cp "$a" "artifacts/$t/"
    echo "  reproducer: fuzz/artifacts/$t/$(basename "$a")"
    echo "  replay: cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run ${flags[*]} $t artifacts/$t/$(basename "$a")"
  done
  return 1
}

failed=0
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  run "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
if [ "$failed" -ne 0 ]; then
  echo "fuzz: a target crashed (see above)"
  exit 1
fi

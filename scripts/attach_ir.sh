#!/usr/bin/env bash
# Instructions per attach on the MME thread of `pepc bench attach --transport inprocess`
# (issue 28's target), counted by callgrind, one file per thread.
#
#   scripts/attach_ir.sh [PEPC_BINARY] [ATTACHES]     # defaults: target/release/pepc 2000
#
# Prints the MME thread's instructions per attach, the part of them spent before the
# first attach (sizing and faulting in the MME's state: Mme::prewarm and
# ControlPlane::prewarm), and the part in SHA-256's compression function. Valgrind
# does not run SHA-NI, so under it `sha2` takes its software path (about 3,450
# instructions per 64-octet block); natively, on a CPU with SHA-NI, the same 12
# blocks per attach cost a small fraction of that. Keep the callgrind files with
# KEEP=DIR (callgrind_annotate --inclusive=yes DIR/callgrind.out.*-03).
set -euo pipefail
bin=${1:-target/release/pepc}
n=${2:-2000}
dir=${KEEP:-$(mktemp -d)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
valgrind --tool=callgrind --separate-threads=yes \
    --callgrind-out-file="$dir/callgrind.out.%p" \
    "$bin" bench attach --transport inprocess --attaches "$n" --json >"$dir/bench.json" 2>"$dir/valgrind.log"
# The MME thread is the one that ran Mme::prewarm.
mme=$(grep -l 'Mme::prewarm' "$dir"/callgrind.out.*-* | head -1)
incl() { # inclusive Ir of the functions matching $1 (their own entries only); run
    # away from the checkout, where relative source paths split a function's entries
    (cd / && callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$mme") |
        grep -E "$1" | grep -E '\]$' | awk '{gsub(",", "", $1); s += $1} END {print s + 0}'
}
total=$(awk '/^summary:/ {print $2}' "$mme")
prewarm=$(incl ':pepc_mme::mme::Mme::prewarm \[|:pepc_slice::control::ControlPlane::prewarm \[')
sha=$(incl ':sha2::sha256::soft::compress \[|:sha2::sha256::x86::compress\w* \[')
awk -v t="$total" -v p="$prewarm" -v s="$sha" -v n="$n" -v f="$mme" 'BEGIN {
    printf "MME thread (%s): %.0f Ir per attach; prewarm %.0f; per attach without prewarm %.0f, of which SHA-256 compression %.0f (without it %.0f)\n",
        f, t / n, p / n, (t - p) / n, s / n, (t - p - s) / n
}'
[ -n "${KEEP:-}" ] || rm -rf "$dir"

#!/usr/bin/env bash
# Two pepc binaries' data-path rates, alternating on one machine (A B, B A, A B, ...),
# as issue 33's target asks (no congestion: >= 97% of the old Mpps per core):
# `pepc bench dataplane --json` each round, any further arguments passed on.
#
#   scripts/dataplane_pair.sh OLD_BINARY NEW_BINARY [ROUNDS] [-- BENCH ARGS]
#
# Prints every round's Mpps per core (pipeline time) and per wall core (generation
# included) for both, the medians, and the per-round ratio NEW/OLD with its median.
# One unmeasured run of each first. Quote `lscpu`'s model name beside the figures.
set -euo pipefail
old=$1
new=$2
rounds=${3:-6}
shift 3 || shift $#
[ "${1:-}" = "--" ] && shift
run() { "$1" bench dataplane --json "${@:2}" | tail -1; }
run "$old" "$@" >/dev/null
run "$new" "$@" >/dev/null
out=$(mktemp)
for i in $(seq "$rounds"); do
    if [ $((i % 2)) -eq 1 ]; then
        a=$(run "$old" "$@"); b=$(run "$new" "$@")
    else
        b=$(run "$new" "$@"); a=$(run "$old" "$@")
    fi
    printf '%s\t%s\n' "$a" "$b" >>"$out"
done
python3 - "$out" <<'PY'
import json, statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
o = [json.loads(a) for a, _ in rows]
n = [json.loads(b) for _, b in rows]
for name, rs in (("old", o), ("new", n)):
    core = [r["mpps_per_core"] for r in rs]
    wall = [r["mpps_wall_per_core"] for r in rs]
    print(f"{name}: Mpps per core {[round(c, 2) for c in core]} median {st.median(core):.2f};"
          f" per wall core {[round(w, 2) for w in wall]} median {st.median(wall):.2f}")
for key in ("mpps_per_core", "mpps_wall_per_core"):
    ratio = [b[key] / a[key] for a, b in zip(o, n)]
    print(f"new/old {key}, per round {[round(r, 3) for r in ratio]} median {st.median(ratio):.3f}")
PY
rm -f "$out"

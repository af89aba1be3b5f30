#!/usr/bin/env bash
# Two pepc binaries' in-process attach rates, alternating on one machine (A B, A B, ...),
# as issue 28's target asks: `pepc bench attach --transport inprocess --json` each round.
#
#   scripts/attach_pair.sh OLD_BINARY NEW_BINARY [ROUNDS] [ATTACHES]   # 6 rounds, 20000
#
# Prints every round's attaches per MME core-second and per wall second for both, the
# medians, and the per-round ratio NEW/OLD with its median (pairs share the machine's
# state, so their ratio drifts less than the absolute figures). One unmeasured run of
# each first. Quote `lscpu`'s model name beside the figures.
set -euo pipefail
old=$1
new=$2
rounds=${3:-6}
n=${4:-20000}
run() { "$1" bench attach --transport inprocess --attaches "$n" --json | tail -1; }
run "$old" >/dev/null
run "$new" >/dev/null
out=$(mktemp)
for _ in $(seq "$rounds"); do
    printf '%s\t%s\n' "$(run "$old")" "$(run "$new")" >>"$out"
done
python3 - "$out" <<'EOF'
import json, statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
o = [json.loads(a) for a, _ in rows]
n = [json.loads(b) for _, b in rows]
for name, rs in (("old", o), ("new", n)):
    core = [r["attaches_per_mme_core_s"] for r in rs]
    wall = [r["attaches_per_s"] for r in rs]
    print(f"{name}: per MME core-second {[round(c) for c in core]} median {st.median(core):.0f};"
          f" per wall second {[round(w) for w in wall]} median {st.median(wall):.0f}")
ratio = [b["attaches_per_mme_core_s"] / a["attaches_per_mme_core_s"] for a, b in zip(o, n)]
print(f"new/old per MME core-second, per round {[round(r, 3) for r in ratio]} median {st.median(ratio):.3f}")
EOF
rm -f "$out"

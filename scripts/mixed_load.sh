#!/bin/bash
# Issue 34 item 7's heavy mixed load: `pepc run` (2 slices, SCTP over UDP) and
# `pepc ran` on this machine: UES UEs stormed at ATTACH_RATE, then SECONDS at EVENTS
# events/s of detach + re-attach (half) and connected -> idle (half), then detach.
# Usage: scripts/mixed_load.sh [PEPC] [UES] [ATTACH_RATE] [SECONDS] [EVENTS]
# Writes $DIR/ran.json (the emulator's report), $DIR/node.log, $DIR/metrics.txt.
set -eu
PEPC=${1:-target/release/pepc}; UES=${2:-50000}; RATE=${3:-20000}; SECS=${4:-90}; EV=${5:-4000}
PEPC=$(realpath "$PEPC")
DIR=${DIR:-$(mktemp -d /tmp/pepc-mixed.XXXX)}
cd "$DIR"
python3 - "$UES" > subs.csv <<'PY'
import sys
print('imsi,k,opc,amf,sqn')
for i in range(int(sys.argv[1])):
    print('%015d,465B5CE8B199B49FAA5F0A2EE238A6BC,E8ED289DEBA952E4283B54E88E6183CA,8000,32' % (1010000000001 + i))
PY
rm -f hss.redb hss.state.redb
"$PEPC" subscriber --db "$DIR/hss.redb" import subs.csv
cat > node.toml <<TOML
[node]
slices = 2
max_users = $((UES * 2 + 1024))
prewarm_users = $UES
[s1u]
bind = "127.0.91.1:2152"
[sgi]
mode = "udp"
sink_local = "127.0.0.1:15911"
sink_peer = "127.0.0.1:15912"
[metrics]
listen = "127.0.91.1:19913"
[api]
listen = ""
[s1mme]
transport = "udp"
udp_port = 19910
[hss]
db = "$DIR/hss.redb"
TOML
cat > scen.toml <<TOML
ues = $UES
attach_rate = $RATE
duration_s = $SECS
event_rate = $EV
detach_at_end = true
[mix]
attach = 0.5
add_default_bearer = 0.0
dedicated_bearer = 0.0
idle_to_connected = 0.0
connected_to_idle = 0.5
x2_handover = 0.0
s1_handover = 0.0
tau = 0.0
paging = 0.0
TOML
"$PEPC" run --config node.toml > node.log 2>&1 &
NODE=$!
sleep 3
rc=0
"$PEPC" ran --scenario scen.toml --mme 127.0.0.1:19910 --gtpu-local 127.0.91.2:2152 \
    --sgi-peer 127.0.0.1:15911 --pdn-local 127.0.0.1:15912 --json --quiet > ran.json || rc=$?
curl -s 127.0.91.1:19913/metrics > metrics.txt || true
kill -INT $NODE; wait $NODE || true
echo "pepc ran exit $rc; report $DIR/ran.json, node log $DIR/node.log"
exit $rc

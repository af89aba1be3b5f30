#!/usr/bin/env bash
# Installs what the test suite needs (if missing) and runs every test.
# Usage: scripts/test.sh            (README's test command; .ci/run calls it)
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v tshark >/dev/null 2>&1 || need_apt+=(tshark)
[ -e /usr/include/usrsctp.h ] || need_apt+=(libusrsctp-dev)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
# A real Diameter agent (relay) for pepc-diameter's interop test; it wants a TLS pair.
command -v freeDiameterd >/dev/null 2>&1 || need_apt+=(freediameter)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# The web console's test drives Debian's Chromium with Playwright (Node.js).
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
# SCTP under faults (crates/pepc/tests/sctp_faults.rs): network namespaces, veth, tc.
command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || need_apt+=(iproute2)
command -v ethtool >/dev/null 2>&1 || need_apt+=(ethtool)
# `pepc man` pages are rendered by man(1) in crates/pepc/tests/cli.rs.
command -v man >/dev/null 2>&1 || need_apt+=(man-db)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# The fuzz step (scripts/fuzz.sh) builds with cargo-fuzz.
command -v cargo-fuzz >/dev/null 2>&1 || cargo install -q cargo-fuzz --version 0.13.2 --locked
# The Debian package (scripts/package.sh) is built with cargo-deb.
command -v cargo-deb >/dev/null 2>&1 || cargo install -q cargo-deb --version 3.6.2 --locked
python3 -c 'import pycrate_asn1dir.S1AP, pycrate_mobile.NASLTE, pycrate_diameter.Diameter3GPP' 2>/dev/null || python3 -m pip install -q 'pycrate==0.8.1' || python3 -m pip install -q --break-system-packages 'pycrate==0.8.1'
# An independent parser of the metrics endpoint's OpenMetrics text (crates/pepc/tests/metrics.rs).
python3 -c 'import prometheus_client' 2>/dev/null || python3 -m pip install -q 'prometheus_client==0.21.1' || python3 -m pip install -q --break-system-packages 'prometheus_client==0.21.1'
# A property-based tester reading the API's OpenAPI document (crates/pepc/tests/api.rs).
command -v st >/dev/null 2>&1 || python3 -m pip install -q 'schemathesis==4.32.5' || python3 -m pip install -q --break-system-packages 'schemathesis==4.32.5'
[ -d crates/pepc/tests/console/node_modules/playwright-core ] || (cd crates/pepc/tests/console && npm ci --silent --no-audit --no-fund)

# A clean build gains nothing from incremental state; it only costs disk.
export CARGO_INCREMENTAL=0
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo build --workspace --all-targets
# Bounded: a test that hangs fails the run with its name in the log instead of
# running into CI's own limit.
timeout --kill-after=30s 45m cargo test --workspace 2>&1
# The Debian package of the debug build just made: its contents, conffile,
# configuration and systemd unit (systemd-analyze verify).
scripts/package.sh --check --dev
# 20 s of every fuzz target from its corpus, two at a time on CI's two cores
# (~3.5 min with the build; fuzz/README.md).
FUZZ_JOBS=2 scripts/fuzz.sh 20

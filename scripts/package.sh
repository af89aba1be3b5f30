#!/usr/bin/env bash
# The Debian package of pepc (cargo-deb): the binary, its man pages and shell
# completions, the default configuration as /etc/pepc/pepc.toml (a conffile), the
# systemd unit (packaging/pepc.service) and the operator's docs.
#   scripts/package.sh                 release build -> target/debian/pepc_*.deb
#   scripts/package.sh --check [--dev] build, then check the package's contents, its
#                                      configuration and its unit (systemd-analyze
#                                      verify); --dev packages the debug build (the
#                                      test command's, which has it built already)
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
profile=release
for a in "$@"; do
  case "$a" in
    --check) check=1 ;;
    --dev) profile=dev ;;
    *) echo "usage: scripts/package.sh [--check] [--dev]" >&2; exit 2 ;;
  esac
done
target="${CARGO_TARGET_DIR:-target}"
dir=$([ "$profile" = dev ] && echo debug || echo release)
command -v cargo-deb >/dev/null 2>&1 || cargo install -q cargo-deb --version 3.6.2 --locked
cargo build -q --profile "$profile" -p pepc
bin="$target/$dir/pepc"
build=packaging/build
rm -rf "$build"
mkdir -p "$build/man"
"$bin" config default > "$build/pepc.toml"
"$bin" man --dir "$build/man"
"$bin" completions bash > "$build/pepc.bash"
"$bin" completions zsh > "$build/_pepc"
"$bin" completions fish > "$build/pepc.fish"
deb=$(cargo deb -q -p pepc --no-build --profile "$profile" --fast 2>&1 | tail -1)
[ -f "$deb" ] || { echo "package.sh: cargo deb made no package: $deb" >&2; exit 1; }
echo "$deb"
[ "$check" = 1 ] || exit 0

fail() { echo "package.sh --check: $*" >&2; exit 1; }
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/pepc ./etc/pepc/pepc.toml ./lib/systemd/system/pepc.service \
         ./usr/share/man/man1/pepc.1.gz ./usr/share/man/man1/pepc-run.1.gz \
         ./usr/share/bash-completion/completions/pepc ./usr/share/zsh/vendor-completions/_pepc \
         ./usr/share/fish/vendor_completions.d/pepc.fish ./usr/share/doc/pepc/configuration.md \
         ./usr/share/doc/pepc/grafana/pepc-node.json; do
  grep -q " $f\$" <<<"$contents" || fail "$f is not in the package"
done
dpkg-deb -f "$deb" Package | grep -qx pepc || fail "not named pepc"
dpkg-deb -I "$deb" conffiles | grep -qx /etc/pepc/pepc.toml || fail "/etc/pepc/pepc.toml is not a conffile"
x=$(mktemp -d)
trap 'rm -rf "$x"' EXIT
dpkg-deb -x "$deb" "$x"
# The packaged configuration is the defaults, and a file the packaged binary takes.
cmp -s "$x/etc/pepc/pepc.toml" "$build/pepc.toml" || fail "the packaged pepc.toml is not pepc config default"
"$x/usr/bin/pepc" config check "$x/etc/pepc/pepc.toml" >/dev/null || fail "the packaged binary refuses its configuration"
"$x/usr/bin/pepc" --version | grep -q '^pepc ' || fail "the packaged binary does not run"
# The unit as systemd reads it (its ExecStart pointed at the unpacked binary).
if command -v systemd-analyze >/dev/null 2>&1; then
  sed "s|/usr/bin/pepc|$x/usr/bin/pepc|; s|man:pepc-run(1)|file://$x/usr/share/man/man1/pepc-run.1.gz|" \
    "$x/lib/systemd/system/pepc.service" > "$x/pepc.service"
  out=$(systemd-analyze verify "$x/pepc.service" 2>&1) || fail "systemd-analyze verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify says: $out"
fi
for want in 'DynamicUser=yes' 'StateDirectory=pepc' 'CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_RAW' \
            'ExecStart=/usr/bin/pepc run --config /etc/pepc/pepc.toml' 'NoNewPrivileges=yes'; do
  grep -qxF "$want" "$x/lib/systemd/system/pepc.service" || fail "the unit lacks $want"
done
echo "package.sh --check: $deb ($(du -h "$deb" | cut -f1)): contents, conffile, configuration and unit as they should be"

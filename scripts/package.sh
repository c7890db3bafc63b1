#!/usr/bin/env bash
# Builds dist/netdoctor-VERSION-linux-amd64.tar.gz and
# dist/netdoctor_DEBVERSION_amd64.deb from bin/netdoctor (make build):
# the binary, man pages and shell completions generated from the
# binary's own flag definitions, and the agent's systemd unit. Needs
# only dpkg-deb (Debian's dpkg) besides the binary. Reproducible: files
# are root's, dated from the last commit.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:?usage: scripts/package.sh VERSION}
bin=${BIN:-bin/netdoctor}
dist=${DIST:-dist}
[ -x "$bin" ] || { echo "package: $bin missing: run make build" >&2; exit 1; }
command -v dpkg-deb >/dev/null || { echo "package: dpkg-deb missing (apt-get install dpkg)" >&2; exit 1; }

# Debian versions start with a digit: a tag v1.2.3 is 1.2.3, an
# untagged commit 0.0~gitYYYYMMDD.HASH (sorts before any release).
epoch=$(git log -1 --format=%ct 2>/dev/null || date +%s)
if [[ $version =~ ^v?[0-9]+\.[0-9]+ ]]; then
  debversion=${version#v}
  debversion=${debversion//-/\~}
else
  debversion="0.0~git$(date -u -d "@$epoch" +%Y%m%d).${version//-/.}"
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$dist"

# The tarball: everything beside the binary, for /usr/local.
name=netdoctor-$version-linux-amd64
t=$stage/$name
mkdir -p "$t/man/man1" "$t/completions" "$t/systemd"
install -m 0755 "$bin" "$t/netdoctor"
SOURCE_DATE_EPOCH=$epoch "$bin" manpages "$t/man/man1" >/dev/null
gzip -9n "$t"/man/man1/*.1
"$bin" completion bash >"$t/completions/netdoctor.bash"
"$bin" completion zsh >"$t/completions/_netdoctor"
"$bin" completion fish >"$t/completions/netdoctor.fish"
install -m 0644 deploy/systemd/netdoctor-agent.service "$t/systemd/"
install -m 0644 README.md "$t/"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$stage" -czf "$dist/$name.tar.gz" "$name"

# The .deb: the same files where Debian keeps them.
d=$stage/deb
install -D -m 0755 "$bin" "$d/usr/bin/netdoctor"
install -d "$d/usr/share/man/man1"
cp "$t"/man/man1/*.1.gz "$d/usr/share/man/man1/"
install -D -m 0644 "$t/completions/netdoctor.bash" "$d/usr/share/bash-completion/completions/netdoctor"
install -D -m 0644 "$t/completions/_netdoctor" "$d/usr/share/zsh/vendor-completions/_netdoctor"
install -D -m 0644 "$t/completions/netdoctor.fish" "$d/usr/share/fish/vendor_completions.d/netdoctor.fish"
# The unit is installed, not enabled: the agent needs a token first
# (docs/agent.md).
install -d "$d/lib/systemd/system"
sed 's#/usr/local/bin/netdoctor#/usr/bin/netdoctor#' deploy/systemd/netdoctor-agent.service >"$d/lib/systemd/system/netdoctor-agent.service"
install -D -m 0644 README.md "$d/usr/share/doc/netdoctor/README.md"
size=$(du -sk "$d" | cut -f1)
install -d "$d/DEBIAN"
cat >"$d/DEBIAN/control" <<CONTROL
Package: netdoctor
Version: $debversion
Architecture: amd64
Maintainer: netdoctor developers <netdoctor@users.noreply.github.com>
Installed-Size: $size
Recommends: iproute2
Suggests: prometheus
Section: net
Priority: optional
Homepage: https://github.com/netdoctor/netdoctor
Description: find why a Linux service is slow under load
 netdoctor loads an HTTP service while sampling the kernel's evidence on
 both ends (sockets, queues, counters, conntrack, the servers' workers),
 then names every root cause with its evidence and the exact fix. Its
 agent serves a host's evidence and a continuous diagnosis to runs from
 other hosts and to Prometheus. One static binary.
CONTROL
find "$d" -exec touch -h -d "@$epoch" {} +
deb=$dist/netdoctor_${debversion}_amd64.deb
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zxz --build "$d" "$deb" >/dev/null
echo "$dist/$name.tar.gz"
echo "$deb"

#!/usr/bin/env bash
# Builds dist/netdoctor-VERSION-linux-amd64.tar.gz and
# dist/netdoctor_DEBVERSION_amd64.deb from bin/netdoctor (make build):
# the binary, man pages and shell completions generated from the
# binary's own flag definitions, the agent's systemd unit, the docs, the
# license with those of the Go modules compiled in, and the changelog.
# The .deb makes the agent's token on install (postinst). Needs dpkg-deb
# (Debian's dpkg) and Go (for the modules' licenses, from its module
# cache) besides the binary. Reproducible: files are root's, dated from
# the last commit. The .deb's data is xz-compressed, which every dpkg
# reads; DEB_COMPRESS (dpkg-deb -Z: gzip, zstd on dpkg 1.21.18 and
# later) trades size for time, as the package test does (xz takes 14 s
# of a CPU for its unstripped binary, zstd a tenth of a second).
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-$(cat VERSION)}
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
chmod 0644 "$t"/man/man1/*.1 # manpages writes them 0600, as every file it writes
gzip -9n "$t"/man/man1/*.1
"$bin" completion bash >"$t/completions/netdoctor.bash"
"$bin" completion zsh >"$t/completions/_netdoctor"
"$bin" completion fish >"$t/completions/netdoctor.fish"
install -m 0644 deploy/systemd/netdoctor-agent.service "$t/systemd/"
install -m 0644 README.md LICENSE CHANGELOG.md "$t/"
install -d "$t/docs"
install -m 0644 docs/*.md "$t/docs/"

# The licenses of the Go modules compiled into the binary, from the
# module cache: what the binary carries besides netdoctor's own code.
licenses=$stage/licenses
mkdir -p "$licenses"
modules=$stage/modules
go version -m "$bin" | awk '$1 == "dep" { print $2, $3 }' >"$modules"
while read -r mod ver; do
  dir=$(go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  lic=$(find "$dir" -maxdepth 1 -type f \( -iname 'LICENSE*' -o -iname 'COPYING*' \) | sort | head -1)
  [ -n "$lic" ] || { echo "package: no license file in $mod@$ver ($dir)" >&2; exit 1; }
  install -D -m 0644 "$lic" "$licenses/$mod/LICENSE"
done <"$modules"
cp -r "$licenses" "$t/licenses"
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
# The docs the README links, where Debian keeps a package's docs; the
# changelog as it is, and the Debian changelog a native package has,
# which points at it.
doc=$d/usr/share/doc/netdoctor
install -D -m 0644 README.md "$doc/README.md"
install -m 0644 docs/*.md CHANGELOG.md "$doc/"
{
  echo "netdoctor ($debversion) unstable; urgency=medium"
  echo
  echo "  * netdoctor $version: see /usr/share/doc/netdoctor/CHANGELOG.md."
  echo
  echo " -- netdoctor developers <netdoctor@users.noreply.github.com>  $(LC_ALL=C date -u -R -d "@$epoch")"
} | gzip -9n >"$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
# netdoctor is one static binary on purpose (no runtime dependency).
install -D -m 0644 /dev/stdin "$d/usr/share/lintian/overrides/netdoctor" <<'OVERRIDES'
netdoctor: statically-linked-binary [usr/bin/netdoctor]
OVERRIDES
cp -r "$licenses" "$doc/licenses"
find "$doc/licenses" -type d -exec chmod 0755 {} + -o -type f -exec chmod 0644 {} +
# The copyright file (DEP-5): netdoctor's license, and each module's,
# with its text beside it.
license_of() {
  if grep -q 'Apache License' "$1"; then echo Apache-2.0
  elif grep -q 'Permission is hereby granted, free of charge' "$1"; then echo Expat
  elif grep -q 'Neither the name' "$1"; then echo BSD-3-clause
  elif grep -q 'Redistribution and use in source and binary forms' "$1"; then echo BSD-2-clause
  else echo "other"; fi
}
{
  echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: netdoctor"
  echo "Source: https://github.com/netdoctor/netdoctor"
  echo
  echo "Files: *"
  echo "Copyright: 2026 the netdoctor developers"
  echo "License: Apache-2.0"
  while read -r mod ver; do
    echo
    echo "Files: $mod/*"
    echo "Copyright: the authors of $mod $ver (see its license)"
    echo "License: $(license_of "$licenses/$mod/LICENSE")"
    echo "Comment: compiled into /usr/bin/netdoctor; the full text is /usr/share/doc/netdoctor/licenses/$mod/LICENSE"
  done <"$modules"
  echo
  echo "License: Apache-2.0"
  echo " On Debian systems, the full text of the Apache License 2.0 is in"
  echo " /usr/share/common-licenses/Apache-2.0, and in this package's LICENSE."
  for l in Expat BSD-3-clause BSD-2-clause other; do
    if grep -q "^License: $l\$" <(while read -r mod ver; do echo "License: $(license_of "$licenses/$mod/LICENSE")"; done <"$modules"); then
      echo
      echo "License: $l"
      echo " The full text of each module's license is in"
      echo " /usr/share/doc/netdoctor/licenses/MODULE/LICENSE, as named above."
    fi
  done
} >"$doc/copyright"
install -m 0644 LICENSE "$doc/LICENSE"
size=$(du -sk "$d" | cut -f1)
install -d "$d/DEBIAN"
# The agent's token, made on install when there is none: the unit reads
# it, and `run --server-agent`/`check --agent` need a copy (docs/agent.md).
# Removed on purge only, since it was made here.
cat >"$d/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  install -d -m 0700 -o 0 -g 0 /etc/netdoctor
  if [ ! -e /etc/netdoctor/agent.token ]; then
    (umask 077; head -c 24 /dev/urandom | base64 >/etc/netdoctor/agent.token)
    echo "netdoctor: made the agent's token, /etc/netdoctor/agent.token (0600); copy it to the hosts that run --server-agent, then: systemctl enable --now netdoctor-agent"
  fi
fi
exit 0
POSTINST
cat >"$d/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ "$1" = purge ]; then
  rm -f /etc/netdoctor/agent.token
  rmdir /etc/netdoctor 2>/dev/null || true
fi
exit 0
POSTRM
chmod 0755 "$d/DEBIAN/postinst" "$d/DEBIAN/postrm"
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
case ${DEB_COMPRESS:=xz} in
  xz | gzip | zstd | none) ;;
  *) echo "package: DEB_COMPRESS=$DEB_COMPRESS: want xz, gzip, zstd or none" >&2; exit 1 ;;
esac
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Z"$DEB_COMPRESS" --build "$d" "$deb" >/dev/null
echo "$dist/$name.tar.gz"
echo "$deb"

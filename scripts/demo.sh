#!/usr/bin/env bash
# The demo until `netdoctor lab` exists: audit this host, then diagnose a
# bundle captured from a namespace whose accept queue overflowed.
set -uo pipefail
bin=${1:-bin/netdoctor}
echo "== netdoctor check (this host, 5 s window)"
"$bin" check --window 5s --json bin/check.json
rc=$?
[ "$rc" -le 1 ] || exit "$rc"
echo
echo "== netdoctor diagnose testdata/bundles/accept-overflow.json (captured: somaxconn 8, a listener that never accepts, 50 connections)"
"$bin" diagnose testdata/bundles/accept-overflow.json
[ $? -le 1 ] || exit 1
echo
echo "JSON report of this host: bin/check.json"

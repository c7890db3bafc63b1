#!/usr/bin/env bash
# Installs what netdoctor's build, tests and demo need on a Debian host, and
# nothing when it is already there. Safe to run repeatedly.
set -euo pipefail

export PATH="/usr/local/go/bin:$PATH"
if ! command -v go >/dev/null; then
  echo "deps: Go not found; install Go >= 1.24 (https://go.dev/dl) into /usr/local/go" >&2
  exit 1
fi

need=()
command -v ip >/dev/null || need+=(iproute2)   # test namespaces; ss for the benchmark
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing ${need[*]}; run as root or install them with apt-get" >&2
    exit 1
  fi
  echo "deps: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
go mod download

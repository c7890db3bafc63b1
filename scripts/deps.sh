#!/usr/bin/env bash
# What netdoctor needs, by purpose:
#   scripts/deps.sh go    the build: checks that Go is recent enough for
#                         go.mod, installs nothing (make build)
#   scripts/deps.sh lab   the lab, the tests and the demo: installs the real
#                         servers and tools from Debian (12 or 13) as root,
#                         and nothing when they are already there (make
#                         test, make demo). Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-lab}
export PATH="/usr/local/go/bin:$PATH"
want=$(sed -n 's/^go \([0-9.]*\).*/\1/p' go.mod)
if ! command -v go >/dev/null; then
  echo "deps: Go not found; install Go >= $want (https://go.dev/dl) into /usr/local/go" >&2
  exit 1
fi
have=$(go env GOVERSION | sed 's/^go//; s/[^0-9.].*//')
if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" != "$want" ]; then
  # A newer toolchain may be fetched by GOTOOLCHAIN when the proxy is
  # reachable; say what is needed either way.
  if [ "$(go env GOTOOLCHAIN)" = local ]; then
    echo "deps: Go $have is older than go.mod's $want; install Go >= $want (https://go.dev/dl)" >&2
    exit 1
  fi
  echo "deps: Go $have is older than go.mod's $want; the go command will fetch go$want (GOTOOLCHAIN)" >&2
fi
case "$mode" in
  go) exit 0 ;;
  lab) ;;
  *) echo "deps: unknown purpose $mode: go or lab" >&2; exit 2 ;;
esac

need=()
command -v ip >/dev/null || need+=(iproute2)   # test namespaces; ss for the benchmark
# nginx: the binary only, started by internal/load/loadtest and bench/loadgen.sh
# with configs of their own; wrk: the reference in bench/loadgen.sh.
PATH="$PATH:/usr/sbin:/sbin" command -v nginx >/dev/null || need+=(nginx)
command -v wrk >/dev/null || need+=(wrk)
# php-fpm: the pools behind nginx in run's integration tests and the lab;
# Debian's php-fpm package is the release's version (8.2 in 12, 8.4 in 13).
compgen -G '/usr/sbin/php-fpm*' >/dev/null || PATH="$PATH:/usr/sbin" command -v php-fpm >/dev/null || need+=(php-fpm)
PATH="$PATH:/usr/sbin:/sbin" command -v nft >/dev/null || need+=(nftables)   # conntrack faults in run tests
# iptables-nft: the firewall rules the drop tests read back in iptables'
# syntax (Debian's iptables is nft-backed).
PATH="$PATH:/usr/sbin:/sbin" command -v iptables-nft >/dev/null || need+=(iptables)
# The lab's other real servers and tools (netdoctor lab, its tests):
# dnsmasq's binary without its service, redis, nginx's Lua module with
# the Lua redis client (seed 004), hping3 for the SYN flood.
PATH="$PATH:/usr/sbin:/sbin" command -v dnsmasq >/dev/null || need+=(dnsmasq-base)
command -v redis-server >/dev/null || need+=(redis-server)
[ -e /usr/lib/nginx/modules/ngx_http_lua_module.so ] || need+=(libnginx-mod-http-lua)
[ -e /usr/share/lua/5.1/nginx/redis.lua ] || need+=(lua-nginx-redis)
PATH="$PATH:/usr/sbin:/sbin" command -v hping3 >/dev/null || need+=(hping3)
# Servers the lab has no rule written for: Debian's python3 runs the
# lab's Python servers (internal/lab/servers), haproxy a proxy in front
# of nginx. Debian's python3 by path: a pyenv or venv python3 earlier
# in PATH does not count, as the lab runs /usr/bin/python3 first.
[ -x /usr/bin/python3 ] || need+=(python3)
PATH="$PATH:/usr/sbin:/sbin" command -v haproxy >/dev/null || need+=(haproxy)
command -v chromium >/dev/null || need+=(chromium)   # renders run's HTML report in a test
command -v groff >/dev/null || need+=(groff-base)    # checks the generated man pages
[ -x /usr/bin/time ] || need+=(time)          # CPU time of the tools in bench/loadgen.sh
# Prometheus: promtool checks and unit-tests the generated alert rules, and
# a real server scrapes an agent in the fleet tests (binaries only).
command -v promtool >/dev/null || need+=(prometheus)
# iperf3: the reference load tcp:// is held to in internal/layer's lab
# test (the client and a server with a config of its own, no service).
command -v iperf3 >/dev/null || need+=(iperf3)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing ${need[*]}; run as root or install them with apt-get" >&2
    exit 1
  fi
  echo "deps: installing ${need[*]}"
  had_nginx_pid=0
  [ -e /run/nginx.pid ] && had_nginx_pid=1
  had_redis=0
  pgrep -x redis-server >/dev/null && had_redis=1
  had_fpm_pid=0
  compgen -G '/run/php/php*-fpm.pid' >/dev/null && had_fpm_pid=1
  had_haproxy=0
  pgrep -x haproxy >/dev/null && had_haproxy=1
  had_prometheus=0
  pgrep -x prometheus >/dev/null && had_prometheus=1
  had_iperf3=0
  pgrep -x iperf3 >/dev/null && had_iperf3=1
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" \
    >/dev/null 2> >(grep -v 'apt-utils is not installed' >&2)
  # Debian's postinst starts the nginx service unless policy-rc.d forbids it
  # (as in most containers). We want the binary only: stop and disable a
  # service the install started, and leave any nginx that ran before alone.
  if [ "$had_nginx_pid" -eq 0 ] && [[ " ${need[*]} " == *" nginx "* ]]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now nginx >/dev/null 2>&1 || true
    fi
    if [ -s /run/nginx.pid ]; then
      kill -QUIT "$(cat /run/nginx.pid)" 2>/dev/null || true
    fi
  fi
  if [ "$had_fpm_pid" -eq 0 ] && [[ " ${need[*]} " == *" php-fpm "* ]]; then
    if [ -d /run/systemd/system ]; then
      for unit in /lib/systemd/system/php*-fpm.service; do
        [ -e "$unit" ] && systemctl disable --now "$(basename "$unit")" >/dev/null 2>&1 || true
      done
    fi
    for p in /run/php/php*-fpm.pid; do
      [ -s "$p" ] && kill -QUIT "$(cat "$p")" 2>/dev/null || true
    done
  fi
  if [ "$had_redis" -eq 0 ] && [[ " ${need[*]} " == *" redis-server "* ]]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now redis-server >/dev/null 2>&1 || true
    fi
    pkill -x redis-server 2>/dev/null || true
  fi
  # haproxy's postinst starts its service the same way: the lab wants the
  # binary only, with configs of its own. None ran before the install, so
  # any haproxy now running is the service's.
  if [ "$had_haproxy" -eq 0 ] && [[ " ${need[*]} " == *" haproxy "* ]]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now haproxy >/dev/null 2>&1 || true
    fi
    pkill -x haproxy 2>/dev/null || true
  fi
  if [ "$had_prometheus" -eq 0 ] && [[ " ${need[*]} " == *" prometheus "* ]]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
    pkill -x prometheus 2>/dev/null || true
  fi
  # Debian's iperf3 can start a server service (debconf's default is
  # not to): the tests start their own.
  if [ "$had_iperf3" -eq 0 ] && [[ " ${need[*]} " == *" iperf3 "* ]]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now iperf3 >/dev/null 2>&1 || true
    fi
    pkill -x iperf3 2>/dev/null || true
  fi
fi
go mod download

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
# nginx: the binary only, started by internal/load/loadtest and bench/loadgen.sh
# with configs of their own; wrk: the reference in bench/loadgen.sh.
PATH="$PATH:/usr/sbin:/sbin" command -v nginx >/dev/null || need+=(nginx)
command -v wrk >/dev/null || need+=(wrk)
# php-fpm: the pools behind nginx in run's integration tests and the lab.
PATH="$PATH:/usr/sbin:/sbin" command -v php-fpm8.2 >/dev/null || PATH="$PATH:/usr/sbin" command -v php-fpm >/dev/null || need+=(php8.2-fpm)
PATH="$PATH:/usr/sbin:/sbin" command -v nft >/dev/null || need+=(nftables)   # conntrack faults in run tests
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
[ -x /usr/bin/time ] || need+=(time)          # CPU time of the tools in bench/loadgen.sh
# Prometheus: promtool checks and unit-tests the generated alert rules, and
# a real server scrapes an agent in the fleet tests (binaries only).
command -v promtool >/dev/null || need+=(prometheus)
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
  ls /run/php/php*-fpm.pid >/dev/null 2>&1 && had_fpm_pid=1
  had_haproxy=0
  pgrep -x haproxy >/dev/null && had_haproxy=1
  had_prometheus=0
  pgrep -x prometheus >/dev/null && had_prometheus=1
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
  if [ "$had_fpm_pid" -eq 0 ] && [[ " ${need[*]} " == *" php8.2-fpm "* ]]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now php8.2-fpm >/dev/null 2>&1 || true
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
fi
go mod download

#!/usr/bin/env bash
# Load-generator benchmark: `netdoctor load` against wrk on 127.0.0.1.
# Debian's nginx runs one worker pinned to CPU 0 and answers "hello\n";
# each load tool runs with one thread pinned to CPU 1 (taskset -c 1).
# The tools alternate (each round in another order), RUNS runs of SECONDS
# each, for keep-alive with 50 and with 1000 connections, for a new
# connection per request with 50, and for HTTPS keep-alive with 50. The
# tools are wrk and netdoctor with each engine in ENGINES (default "auto
# epoll": the engine auto picks, io_uring where the kernel allows it, and
# the epoll engine forced). It prints medians of requests/s and of the
# tool's CPU time (user+sys, from /usr/bin/time) per completed request,
# the ratios netdoctor/wrk, and (unless SYSCALLS=0) the system calls per
# request of each tool, counted in one more run of each cell under
# `perf stat -e raw_syscalls:sys_enter`. It stops nginx and removes its
# files on exit.
#
#   bench/loadgen.sh [SECONDS] [RUNS]      # default 10 s, 3 runs
#   SKIP_NETDOCTOR=1 bench/loadgen.sh 5    # wrk only
#   SCENARIOS="ka50 close50" bench/loadgen.sh   # some of: ka50 ka1000 close50 tls50
#   ENGINES="io_uring epoll" bench/loadgen.sh   # netdoctor's engines (auto, io_uring, epoll)
#
# wrk's Lua scripts (-s), each tool running the same script with c=50,
# keep-alive; compare them with ka50 in the same run:
#   SCENARIOS="ka50 lua-static lua-request lua-response lua-headers lua-keep lua-format" bench/loadgen.sh
#   lua-static:   init sets a header, no request(): the request is built once
#   lua-request:  request() returns the same string every time
#   lua-response: response() counts the responses (it reads neither its
#                 headers nor its body, so neither is built)
#   lua-headers:  response() reads a header and the body's length (one
#                 headers table per thread, refilled)
#   lua-keep:     response() iterates its headers with pairs (a new table
#                 per response, as in wrk)
#   lua-format:   request() calls wrk.format() for every request
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
runs=${2:-3}
skip_nd=${SKIP_NETDOCTOR:-0}
engines=${ENGINES:-auto epoll}
syscalls=${SYSCALLS:-1}
export PATH="/usr/local/go/bin:$PATH:/usr/sbin:/sbin"

die() { echo "loadgen: $*" >&2; exit 1; }
for sc in ${SCENARIOS:-}; do
  [[ $sc =~ ^(ka50|ka1000|close50|tls50|lua-static|lua-request|lua-response|lua-headers|lua-keep|lua-format)$ ]] ||
    die "unknown scenario '$sc' in SCENARIOS: want ka50, ka1000, close50, tls50, lua-static, lua-request, lua-response, lua-headers, lua-keep or lua-format"
done
for eng in $engines; do
  [[ $eng =~ ^(auto|io_uring|epoll)$ ]] || die "unknown engine '$eng' in ENGINES: want auto, io_uring or epoll"
done
[[ $secs =~ ^[1-9][0-9]*$ ]] || die "SECONDS must be a whole number of seconds, got '$secs'"
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number, got '$runs'"
for t in wrk nginx taskset setsid openssl; do
  command -v "$t" >/dev/null || die "$t not found: run scripts/deps.sh (openssl: Debian's, for the HTTPS scenario's certificate)"
done
if [ "$syscalls" = 1 ] && ! perf stat -e raw_syscalls:sys_enter -x, -o /dev/null true 2>/dev/null; then
  echo "loadgen: perf cannot count raw_syscalls:sys_enter here: no system calls per request (SYSCALLS=0)" >&2
  syscalls=0
fi
[ -x /usr/bin/time ] || die "/usr/bin/time not found: run scripts/deps.sh"
if [ "$skip_nd" != 1 ]; then
  command -v go >/dev/null || die "go not found: install Go or set SKIP_NETDOCTOR=1"
  if command -v python3 >/dev/null; then json=python3
  elif command -v jq >/dev/null; then json=jq
  else die "python3 or jq needed to read netdoctor's JSON"
  fi
fi
{ taskset -c 0 true && taskset -c 1 true; } 2>/dev/null ||
  die "needs CPUs 0 and 1 (nginx on one, the load tool on the other)"
ulimit -n "$(ulimit -Hn)" # for 1000 connections, in the tools and in nginx
nofile=$(ulimit -n)
[ "$nofile" = unlimited ] || [ "$nofile" -ge 2100 ] ||
  die "open files limit $nofile too low for 1000 connections"

tmp=$(mktemp -d -t loadgen.XXXXXX)
nginx_pid=
tool_pid=
alive() { # alive PID: running and not a zombie
  local s
  s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
  [ "${s:0:1}" != Z ]
}
stop_nginx() {
  [ -n "$nginx_pid" ] || return 0
  kill -QUIT "$nginx_pid" 2>/dev/null || true
  for _ in $(seq 60); do alive "$nginx_pid" || break; sleep 0.05; done
  # Not yet waited for, so its pid is still its process group's id.
  alive "$nginx_pid" && kill -KILL -- "-$nginx_pid" 2>/dev/null
  wait "$nginx_pid" 2>/dev/null || true
  nginx_pid=
}
cleanup() {
  set +e
  if [ -n "$tool_pid" ]; then # its own process group: time and the tool
    kill -TERM -- "-$tool_pid" 2>/dev/null
    wait "$tool_pid" 2>/dev/null
  fi
  stop_nginx
  rm -rf "$tmp"
}
trap cleanup EXIT
cat >"$tmp/lua-static.lua" <<'EOF'
function init(args)
  wrk.headers["X-Bench"] = "static"
end
EOF
cat >"$tmp/lua-request.lua" <<'EOF'
local req
function init(args)
  req = wrk.format(nil, nil, { ["X-Bench"] = "request" })
end
function request()
  return req
end
EOF
cat >"$tmp/lua-response.lua" <<'EOF'
local n = 0
function response(status, headers, body)
  n = n + 1
end
EOF
cat >"$tmp/lua-headers.lua" <<'EOF'
local n = 0
function response(status, headers, body)
  if headers["Content-Type"] == "text/plain" and #body > 0 then
    n = n + 1
  end
end
EOF
cat >"$tmp/lua-keep.lua" <<'EOF'
local n = 0
function response(status, headers, body)
  for name, value in pairs(headers) do
    n = n + 1
  end
end
EOF
cat >"$tmp/lua-format.lua" <<'EOF'
local i = 0
function request()
  i = i + 1
  return wrk.format(nil, "/?i=" .. i)
end
EOF
trap 'exit 130' INT
trap 'exit 143' TERM

write_conf() { # write_conf DIR PORT TLS_PORT
  local d=$1 user='' nofile=''
  [ "$(id -u)" -ne 0 ] || { user='user root;'; nofile='worker_rlimit_nofile 65536;'; }
  cat >"$d/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
worker_cpu_affinity 01;
$user
$nofile
pid $d/nginx.pid;
error_log $d/error.log;
events { worker_connections 20000; }
http {
  client_body_temp_path $d/client_body_temp;
  proxy_temp_path $d/proxy_temp;
  fastcgi_temp_path $d/fastcgi_temp;
  uwsgi_temp_path $d/uwsgi_temp;
  scgi_temp_path $d/scgi_temp;
  access_log off;
  keepalive_requests 1000000;
  default_type text/plain;
  server {
    listen 127.0.0.1:$2 backlog=4096;
    location / { return 200 "hello\n"; }
  }
  server {
    listen 127.0.0.1:$3 ssl backlog=4096;
    ssl_certificate $d/cert.pem;
    ssl_certificate_key $d/key.pem;
    location / { return 200 "hello\n"; }
  }
}
EOF
}

start_nginx() { # sets port, tls_port, nginx_pid and worker; retries other ports if bind fails
  local d=$tmp/nginx
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
    -keyout "$d/key.pem" -out "$d/cert.pem" >/dev/null 2>&1 || die "openssl could not make a certificate"
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 10000)) # below the usual ephemeral range
    tls_port=$((port + 1))
    write_conf "$d" "$port" "$tls_port"
    rm -f "$d/nginx.pid"
    setsid nginx -p "$d/" -c "$d/nginx.conf" -e "$d/error.log" >"$d/stderr" 2>&1 &
    nginx_pid=$!
    for _ in $(seq 100); do # 5 s; nginx itself retries a busy port for 2.5 s
      alive "$nginx_pid" || break
      if [ -s "$d/nginx.pid" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null &&
        (exec 3<>"/dev/tcp/127.0.0.1/$tls_port") 2>/dev/null &&
        worker=$(pgrep -P "$nginx_pid"); then
        return 0
      fi
      sleep 0.05
    done
    if alive "$nginx_pid"; then
      stop_nginx
      die "nginx on port $port not ready after 5 s: $(tail -n 3 "$d/stderr")"
    fi
    wait "$nginx_pid" 2>/dev/null || true
    nginx_pid=
    grep -q 'Address already in use' "$d/stderr" ||
      die "nginx did not start: $(tail -n 3 "$d/stderr")"
  done
  die "no free port for nginx after 5 tries"
}

json_field() { # json_field FILE NAME
  if [ "$json" = python3 ]; then
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
  else
    jq -er ".$2" "$1"
  fi
}

busy() { # busy: percent of all CPUs busy over the next half second
  local a b
  a=$(awk '/^cpu /{ print $2+$3+$4+$7+$8+$9, $5+$6 }' /proc/stat)
  sleep 0.5
  b=$(awk '/^cpu /{ print $2+$3+$4+$7+$8+$9, $5+$6 }' /proc/stat)
  echo "$a $b" | awk '{ w = $3 - $1; t = w + $4 - $2; printf "%d", t ? 100 * w / t : 0 }'
}
wait_quiet() { # wait_quiet: up to 30 s for other programs to leave the CPUs alone
  local b
  for _ in $(seq 60); do
    b=$(busy)
    [ "$b" -ge 10 ] || return 0
  done
  echo "  warning: CPUs still ${b}% busy with other programs; this run is noisy" >&2
}

# tool_cmd TOOL SCENARIO SECONDS: the command line of TOOL (wrk, or
# nd-ENGINE: netdoctor with --engine ENGINE) for SCENARIO, into cmd.
tool_cmd() {
  local tool=$1 sc=$2 s=$3 c u=$url
  case $sc in
    ka1000) c=1000 ;;
    *) c=50 ;;
  esac
  [ "$sc" != tls50 ] || u=$tls_url
  if [ "$tool" = wrk ]; then
    cmd=(wrk -t 1 -c "$c" -d "${s}s" --timeout 2s)
    [ "$sc" != close50 ] || cmd+=(-H 'Connection: close')
  else
    rm -f "$tmp/nd.json"
    cmd=("$tmp/netdoctor" load --engine "${tool#nd-}" -t 1 -c "$c" -d "${s}s" --timeout 2s --json "$tmp/nd.json")
    [ "$sc" != close50 ] || cmd+=(--no-keepalive)
  fi
  [[ $sc != lua-* ]] || cmd+=(-s "$tmp/$sc.lua")
  cmd+=("$u")
}

# requests_of TOOL: the responses and requests/s of the run just done,
# into requests and rps.
requests_of() {
  if [ "$1" = wrk ]; then
    requests=$(awk '/ requests in /{print $1}' "$tmp/out")
    rps=$(awk '/^Requests\/sec:/{print $2}' "$tmp/out")
  else
    requests=$(json_field "$tmp/nd.json" requests)
    rps=$(json_field "$tmp/nd.json" rps)
  fi
}

# run_one TOOL SCENARIO RUN: one measured run; appends "RPS US_PER_REQUEST"
# to $tmp/res.SCENARIO.TOOL.
run_one() {
  local tool=$1 sc=$2 i=$3 cmd requests rps u s
  tool_cmd "$tool" "$sc" "$secs"
  wait_quiet
  setsid taskset -c 1 /usr/bin/time -f '%U %S' -o "$tmp/time" "${cmd[@]}" >"$tmp/out" 2>&1 &
  tool_pid=$!
  if ! wait "$tool_pid"; then
    tool_pid=
    echo "loadgen: $tool failed in $sc run $i: ${cmd[*]}" >&2
    tail -n 20 "$tmp/out" "$tmp/time" >&2
    exit 1
  fi
  tool_pid=
  requests_of "$tool"
  if [ "$tool" = wrk ] && grep -qE '^ *(Socket errors|Non-2xx)' "$tmp/out"; then
    echo "  warning: wrk $sc run $i: $(grep -E '^ *(Socket errors|Non-2xx)' "$tmp/out" | tr -s ' ' | tr '\n' ' ')" >&2
  fi
  [ "$tool" = wrk ] || json_field "$tmp/nd.json" engine >"$tmp/engine.$tool"
  [[ $requests =~ ^[0-9]+$ && $requests -gt 0 && -n $rps ]] ||
    die "$tool $sc run $i: no request count in its output: $(tail -n 5 "$tmp/out")"
  read -r u s < <(tail -n 1 "$tmp/time")
  awk -v r="$rps" -v n="$requests" -v u="$u" -v s="$s" \
    'BEGIN { printf "%.0f %.3f\n", r, (u + s) * 1e6 / n }' | tee -a "$tmp/res.$sc.$tool" |
    awk -v t="$tool" -v sc="$sc" -v i="$i" '{ printf "  %-8s %-12s run %d: %8d req/s  %6.3f µs CPU/request\n", sc, t, i, $1, $2 }' >&2
}

# count_syscalls TOOL SCENARIO: one more run (5 s at most) under perf
# stat; writes the system calls per request to $tmp/sys.SCENARIO.TOOL.
count_syscalls() {
  local tool=$1 sc=$2 cmd requests rps n
  tool_cmd "$tool" "$sc" "$((secs < 5 ? secs : 5))"
  wait_quiet
  setsid taskset -c 1 perf stat -x, -e raw_syscalls:sys_enter -o "$tmp/perf" -- "${cmd[@]}" >"$tmp/out" 2>&1 &
  tool_pid=$!
  wait "$tool_pid" || die "$tool failed under perf stat in $sc: $(tail -n 5 "$tmp/out")"
  tool_pid=
  requests_of "$tool"
  n=$(awk -F, '/raw_syscalls:sys_enter/{print $1}' "$tmp/perf")
  if ! [[ $n =~ ^[0-9]+$ && $requests =~ ^[0-9]+$ && $requests -gt 0 ]]; then
    echo "n/a" >"$tmp/sys.$sc.$tool"
    return
  fi
  awk -v n="$n" -v r="$requests" 'BEGIN { printf "%.2f\n", n / r }' >"$tmp/sys.$sc.$tool"
  echo "  $sc $tool: $(cat "$tmp/sys.$sc.$tool") system calls per request ($n for $requests)" >&2
}

median() { # median COLUMN < FILE
  sort -g -k"$1","$1" | awk -v k="$1" '{ a[NR] = $k } END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; print m }'
}

tools=(wrk)
if [ "$skip_nd" != 1 ]; then
  CGO_ENABLED=0 go build -o "$tmp/netdoctor" ./cmd/netdoctor
  for eng in $engines; do tools+=("nd-$eng"); done
fi
start_nginx
url=http://127.0.0.1:$port/
tls_url=https://127.0.0.1:$tls_port/
if [ "$skip_nd" != 1 ]; then # fail fast if the load command, an engine or its JSON is not there
  for eng in $engines; do
    for u in "$url" "$tls_url"; do
      "$tmp/netdoctor" load --engine "$eng" -t 1 -c 1 -n 10 --json "$tmp/nd.json" "$u" >"$tmp/out" 2>&1 ||
        die "netdoctor load --engine $eng $u does not run (SKIP_NETDOCTOR=1 for wrk only): $(tail -n 5 "$tmp/out")"
      json_field "$tmp/nd.json" requests >/dev/null ||
        die "netdoctor's --json has no \"requests\""
    done
  done
fi

echo "# loadgen: $(date -u +%FT%TZ), $(uname -r), $(nginx -v 2>&1 | sed 's/.*version: //'), $(wrk -v 2>&1 | head -1 | awk '{print "wrk " $2}'), $(nproc) CPUs" >&2
echo "# nginx worker $worker on CPU $(taskset -pc "$worker" | awk '{print $NF}'), load tool on CPU 1; ${secs}s x $runs runs; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
read -r -a scenarios <<<"${SCENARIOS:-ka50 ka1000 close50 tls50}"
# Rounds over every scenario, the tools in another order each round
# (rotated, and reversed every other round), so that slow drifts of the
# machine hit every cell alike.
nt=${#tools[@]}
for i in $(seq "$runs"); do
  order=()
  for k in $(seq 0 $((nt - 1))); do order+=("${tools[$(((k + i - 1) % nt))]}"); done
  if [ $((i % 2)) -eq 0 ]; then
    rev=()
    for ((k = nt - 1; k >= 0; k--)); do rev+=("${order[$k]}"); done
    order=("${rev[@]}")
  fi
  for sc in "${scenarios[@]}"; do
    for tool in "${order[@]}"; do run_one "$tool" "$sc" "$i"; done
  done
done
if [ "$syscalls" = 1 ]; then
  echo "# system calls per request: one more run of each cell under perf stat" >&2
  for sc in "${scenarios[@]}"; do
    for tool in "${tools[@]}"; do count_syscalls "$tool" "$sc"; done
  done
fi

name() {
  case $1 in
    ka50) echo "keep-alive, c=50" ;;
    ka1000) echo "keep-alive, c=1000" ;;
    close50) echo "no keep-alive, c=50" ;;
    tls50) echo "HTTPS keep-alive, c=50" ;;
    lua-static) echo "script without request(), c=50" ;;
    lua-request) echo "request() returning one string, c=50" ;;
    lua-response) echo "response() counting, c=50" ;;
    lua-headers) echo "response() reading a header and the body, c=50" ;;
    lua-keep) echo "response() iterating its headers with pairs, c=50" ;;
    lua-format) echo "request() calling wrk.format, c=50" ;;
  esac
}
label() { # label TOOL: wrk, or netdoctor and its engine (auto's: the one it ran)
  case $1 in
    wrk) echo wrk ;;
    nd-auto) echo "netdoctor auto ($(cat "$tmp/engine.nd-auto" 2>/dev/null || echo '?'))" ;;
    *) echo "netdoctor ${1#nd-}" ;;
  esac
}
sys_of() { cat "$tmp/sys.$1.$2" 2>/dev/null || echo "-"; }
echo
echo "| scenario | tool | rps (median) | CPU µs/request (median) | syscalls/request | ratio netdoctor/wrk |"
echo "|---|---|---:|---:|---:|---|"
for sc in "${scenarios[@]}"; do
  w_rps=$(median 1 <"$tmp/res.$sc.wrk")
  w_cpu=$(median 2 <"$tmp/res.$sc.wrk")
  printf '| %s | wrk | %.0f | %.2f | %s | |\n' "$(name "$sc")" "$w_rps" "$w_cpu" "$(sys_of "$sc" wrk)"
  if [ "$skip_nd" = 1 ]; then
    printf '| %s | netdoctor | skipped | skipped | | |\n' "$(name "$sc")"
    continue
  fi
  for tool in "${tools[@]:1}"; do
    n_rps=$(median 1 <"$tmp/res.$sc.$tool")
    n_cpu=$(median 2 <"$tmp/res.$sc.$tool")
    printf '| %s | %s | %.0f | %.2f | %s | rps %.2f, CPU/request %.2f |\n' "$(name "$sc")" "$(label "$tool")" \
      "$n_rps" "$n_cpu" "$(sys_of "$sc" "$tool")" "$(awk "BEGIN { print $n_rps / $w_rps }")" "$(awk "BEGIN { print $n_cpu / $w_cpu }")"
  done
done

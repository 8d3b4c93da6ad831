#!/usr/bin/env bash
# CPU per 1,000 paced streams of nginx (a plain SSE pass-through) and of
# one or more baton builds, measured in turns against one simulated
# provider, so two builds are compared in the same minutes of the same
# machine: `curl --parallel` keeps LEVEL streams of 200 tokens (the first
# after 20 ms, then one every 5 ms) open through each gateway in turn, and
# each gateway's user and system CPU is read from /proc around its turn.
#
#   benches/paced_cpu.sh                               # this build, levels 10 and 100, 2 rounds
#   LEVELS="10 100 1000" ROUNDS=3 benches/paced_cpu.sh kept/baton target/release/baton
#
# Each level sends LEVEL × 6 streams, at least 300. The load benchmark's
# paced part (`BATON_BENCH_PARTS=paced cargo bench --bench load`) gives the
# full table with first-token times and memory; this is for comparing builds.
set -euo pipefail
cd "$(dirname "$0")/.."
LEVELS=${LEVELS:-10 100}
ROUNDS=${ROUNDS:-2}
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { echo "nginx is needed (apt-get install nginx-light)" >&2; exit 1; }
source benches/support.sh
builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=("$(baton_bin)")
mock=$(BATON_BIN=${builds[0]} baton_bin)
start_scratch

start_mock "$mock" 200 20 5
provider=$mock_port

# nginx as the load benchmark runs it: two workers, upstream keep-alive, no buffering.
port=$(free_port)
mkdir -p "$work/nginx/logs"
cat >"$work/nginx/nginx.conf" <<CONF
worker_processes auto; pid $work/nginx/nginx.pid; error_log $work/nginx/logs/error.log warn;
worker_rlimit_nofile 20000;
events { worker_connections 20000; }
http {
  access_log off; client_body_temp_path $work/nginx/body; proxy_temp_path $work/nginx/proxy;
  upstream paced { server 127.0.0.1:$provider; keepalive 1024; }
  server {
    listen 127.0.0.1:$port backlog=4096;
    location /v1/ { proxy_pass http://paced/v1/; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; proxy_cache off; }
  }
}
CONF
PATH=$PATH:/usr/sbin nginx -g 'daemon off;' -c "$work/nginx/nginx.conf" &
nginx_pid=$!
pids+=($nginx_pid)
wait_port "$port"
names=(nginx)
ports=($port)
watched=("$nginx_pid $(pgrep -P "$nginx_pid" | tr '\n' ' ')")

for i in "${!builds[@]}"; do
  port=$(free_port)
  mkdir -p "$work/baton$i"
  route_config "$work/baton$i/baton.toml" "$port" "$provider" sqlite
  "${builds[$i]}" serve --config "$work/baton$i/baton.toml" 2>"$work/baton$i/log" &
  baton=$!
  pids+=($baton)
  wait_port "$port"
  names+=("baton ${builds[$i]}")
  ports+=($port)
  watched+=("$baton")
done

# User and system clock ticks of the processes in $1.
ticks() { for pid in $1; do awk '{print $14, $15}' "/proc/$pid/stat"; done | awk '{u += $1; s += $2} END {print u, s}'; }

echo "CPU seconds per 1,000 paced streams (200 tokens, 20 ms to the first, 5 ms apart):"
for level in $LEVELS; do
  streams=$((level * 6 > 300 ? level * 6 : 300))
  for round in $(seq "$ROUNDS"); do
    for k in "${!names[@]}"; do
      {
        echo "-d @$work/body.json"
        echo '-H "content-type: application/json"'
        for _ in $(seq "$streams"); do echo "url = \"http://127.0.0.1:${ports[$k]}/v1/chat/completions\""; done
      } >"$work/curl.cfg"
      read -r user0 sys0 < <(ticks "${watched[$k]}")
      curl -s --no-progress-meter --parallel --parallel-max "$level" -K "$work/curl.cfg" >"$work/answers"
      read -r user1 sys1 < <(ticks "${watched[$k]}")
      done=$(grep -c '^data: \[DONE\]' "$work/answers" || true)
      awk -v name="${names[$k]}" -v level="$level" -v round="$round" -v done="$done" -v user=$((user1 - user0)) -v sys=$((sys1 - sys0)) \
        'BEGIN { printf "  %3d streams, round %d, %-40s %5.2f (user %.2f, system %.2f; %d answers)\n", level, round, name, (user + sys) * 10 / done, user * 10 / done, sys * 10 / done, done }'
      sleep 1
    done
  done
done

#!/usr/bin/env bash
# Three baton replicas behind nginx, sharing one Redis, all on loopback:
# a breaker opened on one replica makes the others skip the provider, and
# a key's rpm holds across the three. Needs redis-server and nginx
# (apt-get install redis-server nginx-light); builds baton with cargo.
# Everything it starts is stopped when it ends; nothing is left on disk.
set -euo pipefail
cd "$(dirname "$0")/../.."

base=${BASE_PORT:-18080}             # nginx; replicas base+1..3; Redis base+9; providers base+11, base+12
redis_port=$((base + 9)) good_port=$((base + 11)) flaky_port=$((base + 12))
for tool in redis-server nginx curl python3; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || {
    echo "needs $tool: apt-get install redis-server nginx-light curl python3" >&2
    exit 1
  }
done
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

wait_for() { # port
  for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done
  echo "nothing listens on $1" >&2
  exit 1
}

cargo build -q --bin baton
baton=target/debug/baton

redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no >"$dir/redis.log" &
pids+=($!)
"$baton" mock --listen "127.0.0.1:$good_port" --first-token-ms 20 2>"$dir/good.log" &
pids+=($!)
"$baton" mock --listen "127.0.0.1:$flaky_port" --fault http_5xx 2>"$dir/flaky.log" &
pids+=($!)

for i in 1 2 3; do
  cat >"$dir/baton-$i.toml" <<TOML
listen = "127.0.0.1:$((base + i))"

[[providers]]
name = "flaky"
kind = "openai"
base_url = "http://127.0.0.1:$flaky_port/v1"
breaker = { failure_threshold = 2, cooldown_ms = 30000 }

[[providers]]
name = "good"
kind = "openai"
base_url = "http://127.0.0.1:$good_port/v1"

[[routes]]
model = "chat"
targets = [{ provider = "flaky", model = "m", retries = 0 }, { provider = "good", model = "m" }]

[[keys]]
name = "demo"
key = "sk-demo-0123456789abcdef"
rpm = 5

[[keys]]
name = "ops"
key = "sk-ops-0123456789abcdef"

[state]
backend = "redis"
redis_url = "redis://127.0.0.1:$redis_port"
key_prefix = "replicas-example:"
TOML
  "$baton" serve --config "$dir/baton-$i.toml" 2>"$dir/baton-$i.log" &
  pids+=($!)
done

cat >"$dir/nginx.conf" <<NGINX
daemon off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log warn;
events {}
http {
  access_log off;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  upstream baton {
    server 127.0.0.1:$((base + 1));
    server 127.0.0.1:$((base + 2));
    server 127.0.0.1:$((base + 3));
    keepalive 16;
  }
  server {
    listen 127.0.0.1:$base;
    location / {
      proxy_pass http://baton;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;          # SSE goes through as it comes
    }
  }
}
NGINX
"$nginx_bin" -c "$dir/nginx.conf" -p "$dir" &
pids+=($!)
for port in "$redis_port" "$good_port" "$flaky_port" $((base + 1)) $((base + 2)) $((base + 3)) "$base"; do wait_for "$port"; done
reachable() {
  for i in 1 2 3; do
    curl -s "http://127.0.0.1:$((base + i))/admin/status" |
      python3 -c "import json, sys; print(json.load(sys.stdin)['state']['reachable'])"
  done | tr '\n' ' '
}
for _ in $(seq 100); do [ "$(reachable)" = "True True True " ] && break; sleep 0.1; done # the first pings to Redis
[ "$(reachable)" = "True True True " ] || { echo "FAILED: the replicas never reached Redis (see $dir/baton-*.log)" >&2; exit 1; }

ask() { # url key
  curl -s -o /dev/null -w '%{http_code} %header{x-baton-provider} attempts=%header{x-baton-attempts}\n' \
    -H "authorization: Bearer $2" -H 'content-type: application/json' \
    -d '{"model": "chat", "messages": [{"role": "user", "content": "hi"}]}' "$1/v1/chat/completions"
}
breakers() {
  for i in 1 2 3; do
    curl -s "http://127.0.0.1:$((base + i))/admin/status" | python3 -c \
      "import json, sys; s = json.load(sys.stdin); print('  replica $i: state', s['state'], '| flaky', [p['breaker'] for p in s['providers'] if p['name'] == 'flaky'][0])"
  done
}

failed=0
expect() { # what got wanted
  if [ "$2" = "$3" ]; then echo "  ok: $1"; else echo "  FAILED: $1: got $2, wanted $3"; failed=1; fi
}
flaky_breakers() {
  for i in 1 2 3; do
    curl -s "http://127.0.0.1:$((base + i))/admin/status" |
      python3 -c "import json, sys; print([p['breaker'] for p in json.load(sys.stdin)['providers'] if p['name'] == 'flaky'][0])"
  done | tr '\n' ' '
}

echo "== the shared state, as each replica sees it"
breakers
echo
echo "== two requests straight to replica 1: flaky fails twice, replica 1 opens its breaker"
ask "http://127.0.0.1:$((base + 1))" sk-ops-0123456789abcdef
ask "http://127.0.0.1:$((base + 1))" sk-ops-0123456789abcdef
opened=$(date +%s%N)
for _ in $(seq 50); do [ "$(flaky_breakers)" = "open open open " ] && break; sleep 0.05; done
echo "== $(( ($(date +%s%N) - opened) / 1000000 )) ms later, every replica has it open"
breakers
expect "flaky's breaker is open on all three replicas" "$(flaky_breakers)" "open open open "
echo "== so replicas 2 and 3 go straight to good (one attempt each)"
for i in 2 3; do
  answer=$(ask "http://127.0.0.1:$((base + i))" sk-ops-0123456789abcdef)
  echo "$answer"
  expect "replica $i answered from good at its first attempt" "$answer" "200 good attempts=1"
done
echo
echo "== ten requests through nginx (round robin over the three) as key demo, rpm = 5 cluster-wide"
answers=$(for _ in $(seq 10); do ask "http://127.0.0.1:$base" sk-demo-0123456789abcdef; done)
echo "$answers"
echo "(each replica alone would have let 5 through: 10 in all)"
expect "answered across the three" "$(grep -c '^200 ' <<<"$answers")" 5
expect "refused with 429" "$(grep -c '^429 ' <<<"$answers")" 5
exit "$failed"

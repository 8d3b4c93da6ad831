#!/usr/bin/env bash
# What baton spends on a request up to its first token, and after it,
# counted in instructions by callgrind: the work a storm of new streams
# waits behind, since every stream's first token queues behind the others'.
# `baton serve` runs under valgrind in front of a simulated provider that
# sends the answer's first token at once and each later one 10 s after; N
# streamed requests are sent at once, each on a connection of its own.
# Callgrind's counts are dumped before the requests, once every request has
# committed (its attempt's log line written with its first token), and at
# the end, so start-up is left out and the two halves are counted apart.
#
#   benches/first_token_cost.sh            # N=300
#   BATON_BIN=<an earlier build> benches/first_token_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-300}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
source benches/support.sh
bin=$(baton_bin)
start_scratch

start_mock "$bin" 3 0 10000
port=$(free_port)
route_config "$work/baton.toml" "$port" "$mock_port" none
# Names written out in every dump, so each part reads on its own.
valgrind --tool=callgrind --compress-strings=no --compress-pos=no --callgrind-out-file="$work/callgrind.out" \
  "$bin" serve --config "$work/baton.toml" 2>"$work/log" &
baton=$!
pids+=($baton)
wait_port "$port"
sleep 1
callgrind_control --dump=started "$baton" >/dev/null 2>&1
{
  echo "-d @$work/body.json"
  echo '-H "content-type: application/json"'
  for _ in $(seq "$N"); do echo "url = \"http://127.0.0.1:$port/v1/chat/completions\""; done
} >"$work/curl.cfg"
# --parallel-immediate: a connection each at once, rather than one first
# to see whether later requests could share it.
curl -s --no-progress-meter --parallel --parallel-immediate --parallel-max "$N" -K "$work/curl.cfg" >"$work/answers" &
client=$!
committed() { grep -c 'outcome="committed"' "$work/log" || true; }
for _ in $(seq 80); do
  [ "$(committed)" -ge "$N" ] && break
  sleep 0.1
done
[ "$(committed)" -ge "$N" ] || { echo "only $(committed) of $N requests committed within 8 s" >&2; exit 1; }
callgrind_control --dump=first_tokens "$baton" >/dev/null 2>&1
wait "$client"
done=$(grep -c '^data: \[DONE\]' "$work/answers" || true)
[ "$done" -eq "$N" ] || { echo "only $done of $N answers completed" >&2; exit 1; }
callgrind_control --dump=ends "$baton" >/dev/null 2>&1
kill -TERM "$baton"
wait "$baton" || true
part() { awk '/^totals:/ {print $2}' "$work/callgrind.out.$1"; }
first=$(part 2)
rest=$(part 3)
echo "instructions per streamed request, $N at once on new connections:"
echo "  up to its first token: $((first / N)) ($first in all)"
echo "  after it, to its end (2 more tokens 10 s apart): $((rest / N)) ($rest in all)"
if [ -n "${KEEP:-}" ]; then
  cp "$work"/callgrind.out.* "$KEEP"/
  echo "  the dumps are in $KEEP (callgrind_annotate $KEEP/callgrind.out.2)"
fi

#!/usr/bin/env bash
# What keeping the request log costs baton per streamed request, counted in
# instructions by callgrind, which counts the same whatever else the machine
# is doing: `baton serve` under valgrind in front of a simulated provider,
# N streamed requests C at a time, with the SQLite store and without it
# (`backend = "none"`). Each mode runs twice, with N and 2N requests; the
# difference between the two is N requests' worth, start-up and shutdown
# taken out.
#
#   benches/recording_cost.sh            # N=400 C=50 TOKENS=200, as the load benchmark streams
#   N=1000 C=100 benches/recording_cost.sh
#   GAP_MS=10 N=300 benches/recording_cost.sh   # paced streams: one event per upstream read
#
# BATON_BIN runs that baton binary (a build kept from before a change, say)
# instead of building target/release/baton.
# BACKENDS (default "none sqlite") picks the store backends counted; the
# recording cost is printed only when both are.
# GAP_MS (default 0) is the simulated provider's gap between tokens: at 0 it
# writes its events back to back, so many arrive in one read; paced, each
# event costs its own read, wake-up and write, as a held stream's do.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-400}
C=${C:-50}
TOKENS=${TOKENS:-200}
GAP_MS=${GAP_MS:-0}
BACKENDS=${BACKENDS:-none sqlite}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
source benches/support.sh
bin=$(baton_bin)
start_scratch

start_mock "$bin" "$TOKENS" 0 "$GAP_MS"

# Instructions baton spends serving $2 requests with store backend $1.
count() {
  local backend=$1 requests=$2 port dir
  port=$(free_port)
  dir=$work/$backend-$requests
  mkdir -p "$dir"
  route_config "$dir/baton.toml" "$port" "$mock_port" "$backend"
  valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" "$bin" serve --config "$dir/baton.toml" 2>"$dir/log" &
  local baton=$!
  pids+=($baton)
  wait_port "$port"
  {
    echo "-d @$work/body.json"
    echo '-H "content-type: application/json"'
    for _ in $(seq "$requests"); do echo "url = \"http://127.0.0.1:$port/v1/chat/completions\""; done
  } >"$dir/curl.cfg"
  curl -s --no-progress-meter --parallel --parallel-max "$C" -K "$dir/curl.cfg" >"$dir/answers"
  local done
  done=$(grep -c '^data: \[DONE\]' "$dir/answers" || true)
  [ "$done" -eq "$requests" ] || { echo "only $done of $requests answers completed ($backend)" >&2; exit 1; }
  kill -TERM "$baton"
  wait "$baton" || true
  awk '/^totals:/ {print $2}' "$dir/callgrind.out"
}

echo "instructions per streamed request ($TOKENS tokens, $GAP_MS ms apart), $N more requests at concurrency $C:"
declare -A per
for backend in $BACKENDS; do
  small=$(count "$backend" "$N")
  large=$(count "$backend" $((N * 2)))
  per[$backend]=$(( (large - small) / N ))
  echo "  store $backend: ${per[$backend]} (runs of $N and $((N * 2)): $small, $large)"
done
[ -n "${per[none]:-}" ] && [ -n "${per[sqlite]:-}" ] || exit 0
awk -v none="${per[none]}" -v sqlite="${per[sqlite]}" \
  'BEGIN { printf "  recording costs %+.1f %% per request\n", (sqlite - none) * 100 / none }'

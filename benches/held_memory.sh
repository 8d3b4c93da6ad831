#!/usr/bin/env bash
# Resident memory per held paced stream of `baton serve` alone: N streams of
# 300 tokens 50 ms apart from `baton mock`, held open at once by curl
# (250 a process), store `none`. Reads VmRSS after 20 warm-up streams and
# again HOLD seconds into the N, and prints the difference per stream.
#
#   benches/held_memory.sh               # N=1000
#   N=9000 HOLD=12 benches/held_memory.sh
#
# BATON_BIN runs that baton binary instead of building target/release/baton.
# Each stream is two descriptors in baton and two in the mock: N=9000 needs
# a descriptor limit of 20,000.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000}
HOLD=${HOLD:-8}
source benches/support.sh
bin=$(baton_bin)
ulimit -n 20000
start_scratch
mock_port=$(free_port)
port=$(free_port)

"$bin" mock --kind openai --listen "127.0.0.1:$mock_port" --tokens 300 --first-token-ms 20 --gap-ms 50 >"$work/mock.log" 2>&1 &
pids+=($!)
wait_port "$mock_port"
route_config "$work/baton.toml" "$port" "$mock_port" none
"$bin" serve --config "$work/baton.toml" >"$work/serve.log" 2>&1 &
serve=$!
pids+=($serve)
wait_port "$port"

printf '%s' '{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}' >"$work/body.json"
# A curl config of $1 streams.
streams() {
  echo "-d @$work/body.json"
  echo '-H "content-type: application/json"'
  for _ in $(seq "$1"); do echo "url = \"http://127.0.0.1:$port/v1/chat/completions\""; done
}
rss() { awk '/VmRSS/{print $2}' "/proc/$serve/status"; }

streams 20 >"$work/warm.cfg"
curl -s --parallel --parallel-max 20 -K "$work/warm.cfg" >/dev/null 2>&1 &
warm=$!
sleep 1.5
kill "$warm" 2>/dev/null || true
sleep 1
before=$(rss)
streams 250 >"$work/held.cfg"
for _ in $(seq $((N / 250))); do
  curl -s --parallel --parallel-immediate --parallel-max 250 -K "$work/held.cfg" >/dev/null 2>&1 &
  pids+=($!)
done
sleep "$HOLD"
during=$(rss)
open=$(ls "/proc/$serve/fd" | wc -l)
held=$(( N / 250 * 250 ))
echo "baton serve: ${before} KiB before, ${during} KiB with ${held} streams held (${open} descriptors open)"
python3 -c "print(f'RSS per held stream: {($during - $before) / $held:.1f} KiB')"

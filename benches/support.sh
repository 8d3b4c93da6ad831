# Shell support for the benchmark scripts that run `baton serve` in front
# of `baton mock` (recording_cost.sh, held_memory.sh, paced_cpu.sh,
# first_token_cost.sh); sourced, not run.
# Each script keeps the pids it starts in `pids` and its files in `work`.

# The baton binary: $BATON_BIN (a build kept from before a change, say), or
# target/release/baton built now.
baton_bin() {
  if [ -n "${BATON_BIN:-}" ]; then
    realpath "$BATON_BIN"
  else
    cargo build --release -q
    echo "$PWD/target/release/baton"
  fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# Starts `$1 mock`, an OpenAI-kind simulated provider answering $2 tokens,
# the first after $3 ms and then one every $4 ms, its port in `mock_port`;
# writes the request every script sends to "$work/body.json".
start_mock() {
  mock_port=$(free_port)
  "$1" mock --kind openai --listen "127.0.0.1:$mock_port" --tokens "$2" --first-token-ms "$3" --gap-ms "$4" 2>/dev/null &
  pids+=($!)
  wait_port "$mock_port"
  printf '%s' '{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}' >"$work/body.json"
}

# A scratch folder in `work`, removed with every process in `pids` at exit.
start_scratch() {
  work=$(mktemp -d)
  pids=()
  trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"' EXIT
}

# Writes to $1 a config listening on port $2 with one route, model "chat",
# to the simulated OpenAI provider on port $3, keeping records in store
# backend $4; deadlines of a minute, so only the provider's pace shows.
route_config() {
  cat >"$1" <<TOML
listen = "127.0.0.1:$2"
[[providers]]
name = "p"
kind = "openai"
base_url = "http://127.0.0.1:$3/v1"
[[routes]]
model = "chat"
first_token_timeout_ms = 60000
idle_timeout_ms = 60000
targets = [{ provider = "p", model = "m" }]
[store]
backend = "$4"
TOML
}
